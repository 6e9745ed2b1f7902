//! Ethernet II framing.

use core::fmt;
use core::str::FromStr;

use crate::error::{Error, Result};
use crate::field;

/// Destination (6) + source (6) + EtherType (2); no FCS, no VLAN tag.
pub const ETHERNET_HEADER_LEN: usize = 14;

mod offs {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const ETHERTYPE: usize = 12;
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Self = EthernetAddress([0xff; 6]);

    /// The first 6 bytes of `bytes`; `Err(Truncated)` if there are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        bytes.first_chunk::<6>().map(|b| EthernetAddress(*b)).ok_or(Error::Truncated)
    }

    /// The six octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit set (includes broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Group bit clear.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered bit set.
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl FromStr for EthernetAddress {
    type Err = Error;

    /// Six groups of exactly two hex digits separated by `:` (or all by `-`).
    fn from_str(s: &str) -> Result<Self> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for o in out.iter_mut() {
            let p = parts.next().ok_or(Error::Malformed)?;
            if p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::Malformed);
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(EthernetAddress(out))
    }
}

/// The EtherType field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800
    Ipv4,
    /// 0x0806
    Arp,
    /// 0x86dd
    Ipv6,
    /// Anything else (never one of the values above).
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> Self {
        match v {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(other) => other,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

/// A view of an Ethernet II frame in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wrap, requiring at least a full header (`Err(Truncated)` otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < ETHERNET_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Always 14.
    pub const fn header_len() -> usize {
        ETHERNET_HEADER_LEN
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let b = field::slice(self.buffer.as_ref(), offs::DST, offs::SRC);
        EthernetAddress::from_bytes(b).unwrap_or_default()
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> EthernetAddress {
        let b = field::slice(self.buffer.as_ref(), offs::SRC, offs::ETHERTYPE);
        EthernetAddress::from_bytes(b).unwrap_or_default()
    }

    /// EtherType.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(field::u16_at(self.buffer.as_ref(), offs::ETHERTYPE))
    }

    /// Everything after the header (including any padding).
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(ETHERNET_HEADER_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination MAC address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        field::set_bytes(self.buffer.as_mut(), offs::DST, &addr.0);
    }

    /// Set the source MAC address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        field::set_bytes(self.buffer.as_mut(), offs::SRC, &addr.0);
    }

    /// Set the EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        field::set_u16(self.buffer.as_mut(), offs::ETHERTYPE, t.into());
    }

    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut().get_mut(ETHERNET_HEADER_LEN..).unwrap_or(&mut [])
    }
}

/// Parsed Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src_addr: EthernetAddress,
    /// Destination MAC address.
    pub dst_addr: EthernetAddress,
    /// Type of the payload.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// `Err(Truncated)` if the frame is shorter than a header.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        if frame.buffer.as_ref().len() < ETHERNET_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(EthernetRepr { src_addr: frame.src_addr(), dst_addr: frame.dst_addr(), ethertype: frame.ethertype() })
    }

    /// Always 14.
    pub const fn header_len(&self) -> usize {
        ETHERNET_HEADER_LEN
    }

    /// Write the 14 header bytes at the start of `header`.
    pub fn emit(&self, header: &mut [u8]) -> Result<()> {
        let h = header.first_chunk_mut::<ETHERNET_HEADER_LEN>().ok_or(Error::Truncated)?;
        h[offs::DST..offs::SRC].copy_from_slice(&self.dst_addr.0);
        h[offs::SRC..offs::ETHERTYPE].copy_from_slice(&self.src_addr.0);
        h[offs::ETHERTYPE..].copy_from_slice(&u16::from(self.ethertype).to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    // Captured broadcast ARP request frame head (dst ff.., src 52:54:00:12:34:56).
    const FRAME: [u8; 16] =
        [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0x00, 0x01];

    #[test]
    fn parse_known() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        let r = EthernetRepr::parse(&f).unwrap();
        assert_eq!(r.dst_addr, EthernetAddress::BROADCAST);
        assert_eq!(r.src_addr, EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(r.ethertype, EtherType::Arp);
        assert_eq!(f.payload(), &[0x00, 0x01]);
        let mut out = [0u8; 14];
        r.emit(&mut out).unwrap();
        assert_eq!(out, FRAME[..14]);
        assert_eq!(r.emit(&mut [0u8; 13]), Err(Error::Truncated));
    }

    #[test]
    fn short_frames() {
        assert_eq!(EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(), Error::Truncated);
        let f = EthernetFrame::new_unchecked(&FRAME[..3]);
        assert_eq!(f.src_addr(), EthernetAddress::default());
        assert_eq!(f.payload(), &[] as &[u8]);
        assert_eq!(EthernetRepr::parse(&f), Err(Error::Truncated));
        let mut short = [0u8; 5];
        let mut f = EthernetFrame::new_unchecked(&mut short[..]);
        f.set_src_addr(EthernetAddress::BROADCAST);
        f.set_dst_addr(EthernetAddress::BROADCAST);
        // Neither address fits, so nothing is written (no partial address).
        assert_eq!(short, [0u8; 5]);
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 20];
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(EthernetAddress([1, 2, 3, 4, 5, 6]));
        f.set_src_addr(EthernetAddress([7, 8, 9, 10, 11, 12]));
        f.set_ethertype(EtherType::Ipv6);
        f.payload_mut()[0] = 0xaa;
        assert_eq!(&buf[..15], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x86, 0xdd, 0xaa]);
    }

    #[test]
    fn address_classes_and_text() {
        let a: EthernetAddress = "02:00:00:00:00:01".parse().unwrap();
        assert_eq!(a, EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(a.to_string(), "02:00:00:00:00:01");
        assert!(a.is_local() && a.is_unicast() && !a.is_multicast());
        let m: EthernetAddress = "01-00-5E-00-00-FB".parse().unwrap();
        assert!(m.is_multicast() && !m.is_broadcast() && !m.is_local());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "2:0:0:0:0:1",
            "02:00:00:00:00:0g",
            "02-00:00:00:00:01",
            "+2:00:00:00:00:01",
        ] {
            assert_eq!(bad.parse::<EthernetAddress>(), Err(Error::Malformed), "{bad}");
        }
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3]), Err(Error::Truncated));
        assert_eq!(a.as_bytes(), &[2, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn ethertype_conversions() {
        for v in [0x0800u16, 0x0806, 0x86dd, 0x88cc, 0] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x0800), EtherType::Ipv4);
        assert_eq!(EtherType::from(0x88cc), EtherType::Unknown(0x88cc));
    }
}
