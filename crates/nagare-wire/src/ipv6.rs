//! IPv6 fixed header (RFC 8200) and the address mappings a host needs on
//! Ethernet (RFC 4291, RFC 2464).
//!
//! Extension headers are walked separately ([`crate::ipv6ext`]); this view
//! only knows the 40-byte fixed header and the payload length. Jumbograms
//! (RFC 2675, a zero payload length with a hop-by-hop Jumbo option) are not
//! supported: a zero payload length means an empty payload.

use core::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::ethernet::EthernetAddress;
use crate::field;
use crate::ipv4::IpProtocol;

/// The fixed header: no extension headers.
pub const IPV6_HEADER_LEN: usize = 40;
/// The smallest MTU every IPv6 link carries (RFC 8200 section 5).
pub const IPV6_MIN_MTU: usize = 1280;
/// Largest value of the payload length field.
pub const IPV6_MAX_PAYLOAD_LEN: usize = 65535;
/// Largest flow label (20 bits).
pub const IPV6_MAX_FLOW_LABEL: u32 = 0xf_ffff;

/// ff02::1, all nodes on the link.
pub const IPV6_ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// ff02::2, all routers on the link.
pub const IPV6_ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
/// ff02::16, the MLDv2-capable routers MLDv2 reports go to (RFC 3810).
pub const IPV6_ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

mod offs {
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// Whether `addr` is a link-local unicast address (fe80::/10).
pub fn is_link_local(addr: &Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// Whether `addr` is a solicited-node multicast address (ff02::1:ff00:0/104).
pub fn is_solicited_node(addr: &Ipv6Addr) -> bool {
    let o = addr.octets();
    o[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]
}

/// The solicited-node multicast address of `addr` (RFC 4291 section
/// 2.7.1): ff02::1:ff00:0 with the low 24 bits of `addr`. Neighbour
/// solicitations for `addr` go there.
pub fn solicited_node(addr: &Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15]])
}

/// The Ethernet destination of the IPv6 multicast address `addr`
/// (RFC 2464 section 7): 33:33 followed by its low 32 bits. `None` if
/// `addr` is not multicast.
pub fn multicast_mac(addr: &Ipv6Addr) -> Option<EthernetAddress> {
    if !addr.is_multicast() {
        return None;
    }
    let o = addr.octets();
    Some(EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]]))
}

/// A view of an IPv6 packet in a buffer.
///
/// The buffer may extend past `40 + payload_len` (e.g. Ethernet padding);
/// those bytes belong to neither header nor payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap without any validation.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wrap after validating: `Err(Truncated)` if the buffer is shorter than
    /// 40 bytes or than `40 + payload_len`; `Err(Malformed)` if the version
    /// is not 6.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Ipv6Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < IPV6_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if IPV6_HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), offs::VER_TC_FLOW)
    }

    /// IP version (6 for a valid packet).
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    /// Traffic class: DSCP (upper 6 bits) and ECN (lower 2 bits).
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.first_word() & IPV6_MAX_FLOW_LABEL
    }

    /// Length of everything after the fixed header, extension headers
    /// included.
    pub fn payload_len(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::PAYLOAD_LEN)
    }

    /// What follows the fixed header: an extension header or the upper
    /// layer.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(field::u8_at(self.buffer.as_ref(), offs::NEXT_HEADER))
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::HOP_LIMIT)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        field::ipv6_at(self.buffer.as_ref(), offs::SRC)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        field::ipv6_at(self.buffer.as_ref(), offs::DST)
    }

    /// Bytes `40..40 + payload_len` (empty if that range is not valid).
    pub fn payload(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), IPV6_HEADER_LEN, IPV6_HEADER_LEN + usize::from(self.payload_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_first_word(&mut self, f: impl FnOnce(u32) -> u32) {
        let v = f(self.first_word());
        field::set_u32(self.buffer.as_mut(), offs::VER_TC_FLOW, v);
    }

    /// Set the version nibble.
    pub fn set_version(&mut self, v: u8) {
        self.set_first_word(|w| (w & 0x0fff_ffff) | (u32::from(v & 0x0f) << 28));
    }

    /// Set the traffic class.
    pub fn set_traffic_class(&mut self, v: u8) {
        self.set_first_word(|w| (w & 0xf00f_ffff) | (u32::from(v) << 20));
    }

    /// Set the flow label; bits above the low 20 are dropped.
    pub fn set_flow_label(&mut self, v: u32) {
        self.set_first_word(|w| (w & !IPV6_MAX_FLOW_LABEL) | (v & IPV6_MAX_FLOW_LABEL));
    }

    /// Set the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::PAYLOAD_LEN, v);
    }

    /// Set the next header.
    pub fn set_next_header(&mut self, v: IpProtocol) {
        field::set_u8(self.buffer.as_mut(), offs::NEXT_HEADER, v.into());
    }

    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        field::set_u8(self.buffer.as_mut(), offs::HOP_LIMIT, v);
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        field::set_bytes(self.buffer.as_mut(), offs::SRC, &a.octets());
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        field::set_bytes(self.buffer.as_mut(), offs::DST, &a.octets());
    }

    /// Mutable payload (`40..40 + payload_len`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = IPV6_HEADER_LEN + usize::from(self.payload_len());
        field::slice_mut(self.buffer.as_mut(), IPV6_HEADER_LEN, end)
    }
}

/// A parsed IPv6 fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// What follows the fixed header.
    pub next_header: IpProtocol,
    /// Bytes after the fixed header, extension headers included.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label; at most [`IPV6_MAX_FLOW_LABEL`].
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// A header with traffic class and flow label 0.
    pub const fn new(
        src_addr: Ipv6Addr,
        dst_addr: Ipv6Addr,
        next_header: IpProtocol,
        payload_len: usize,
        hop_limit: u8,
    ) -> Self {
        Ipv6Repr { src_addr, dst_addr, next_header, payload_len, hop_limit, traffic_class: 0, flow_label: 0 }
    }

    /// Parse a packet, validating it as [`Ipv6Packet::new_checked`] does.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self::from_fields(packet))
    }

    /// Parse the header quoted inside an ICMPv6 error: only the fixed header
    /// must be present and `payload_len` may disagree with the (truncated)
    /// quote. Returns the repr and the quoted bytes after the header.
    pub(crate) fn parse_quoted(data: &[u8]) -> Result<(Self, &[u8])> {
        let p = Ipv6Packet::new_unchecked(data);
        let rest = data.get(IPV6_HEADER_LEN..).ok_or(Error::Truncated)?;
        if p.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok((Self::from_fields(&p), rest))
    }

    fn from_fields<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Self {
        Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        }
    }

    /// Header length written by [`Ipv6Repr::emit`]: 40.
    pub const fn header_len(&self) -> usize {
        IPV6_HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        IPV6_HEADER_LEN + self.payload_len
    }

    /// Write the 40-byte header at the start of `header`.
    ///
    /// `Err(Malformed)` if the payload length exceeds 65535 or the flow
    /// label 20 bits; `Err(Truncated)` if `header` is too short.
    pub fn emit(&self, header: &mut [u8]) -> Result<()> {
        let payload_len = u16::try_from(self.payload_len).map_err(|_| Error::Malformed)?;
        if self.flow_label > IPV6_MAX_FLOW_LABEL {
            return Err(Error::Malformed);
        }
        let h = header.get_mut(..IPV6_HEADER_LEN).ok_or(Error::Truncated)?;
        let mut p = Ipv6Packet::new_unchecked(h);
        p.set_first_word(|_| 0);
        p.set_version(6);
        p.set_traffic_class(self.traffic_class);
        p.set_flow_label(self.flow_label);
        p.set_payload_len(payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header of an ICMPv6 echo request from ::1 to ::1, laid out by hand
    /// from RFC 8200 section 3: payload 16, next header 58, hop limit 64,
    /// traffic class 0, flow label 0x3a1b2.
    const HEADER: [u8; 40] = [
        0x60, 0x03, 0xa1, 0xb2, 0x00, 0x10, 0x3a, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    ];

    fn packet() -> [u8; 56] {
        let mut b = [0u8; 56];
        b[..40].copy_from_slice(&HEADER);
        b
    }

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: Ipv6Addr::LOCALHOST,
            dst_addr: Ipv6Addr::LOCALHOST,
            next_header: IpProtocol::Icmpv6,
            payload_len: 16,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x3a1b2,
        }
    }

    #[test]
    fn parse_known() {
        let b = packet();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.payload().len(), 16);
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_known() {
        let mut out = [0xaau8; 40];
        repr().emit(&mut out).unwrap();
        assert_eq!(out, HEADER);
    }

    #[test]
    fn traffic_class_and_flow_label_bits() {
        let r = Ipv6Repr { traffic_class: 0xb9, flow_label: 0xf_edcb, ..repr() };
        let mut out = [0u8; 40];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..4], &[0x6b, 0x9f, 0xed, 0xcb]);
        let p = Ipv6Packet::new_unchecked(&out[..]);
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0xb9, 0xf_edcb));
        let mut p = Ipv6Packet::new_unchecked(&mut out[..]);
        p.set_flow_label(0xfff_ffff);
        p.set_traffic_class(0x01);
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0x01, 0xf_ffff));
    }

    #[test]
    fn validation() {
        let b = packet();
        assert_eq!(Ipv6Packet::new_checked(&b[..39]).unwrap_err(), Error::Truncated);
        assert_eq!(Ipv6Packet::new_checked(&b[..55]).unwrap_err(), Error::Truncated);
        let mut v4 = packet();
        v4[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&v4[..]).unwrap_err(), Error::Malformed);
        // Padding after the payload is allowed and excluded.
        let mut padded = [0u8; 64];
        padded[..56].copy_from_slice(&packet());
        let p = Ipv6Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload().len(), 16);
    }

    #[test]
    fn emit_rejects() {
        let mut out = [0u8; 40];
        let mut r = repr();
        r.payload_len = 65535;
        assert!(r.emit(&mut out).is_ok());
        r.payload_len = 65536;
        assert_eq!(r.emit(&mut out), Err(Error::Malformed));
        let r = Ipv6Repr { flow_label: 0x10_0000, ..repr() };
        assert_eq!(r.emit(&mut out), Err(Error::Malformed));
        assert_eq!(repr().emit(&mut out[..39]), Err(Error::Truncated));
    }

    #[test]
    fn unchecked_short_buffer() {
        let b = [0x60u8, 0, 0];
        let p = Ipv6Packet::new_unchecked(&b[..]);
        assert_eq!((p.version(), p.flow_label(), p.payload_len()), (0, 0, 0));
        assert_eq!(p.src_addr(), Ipv6Addr::UNSPECIFIED);
        assert!(p.payload().is_empty());
        let mut b = [0u8; 10];
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_dst_addr(Ipv6Addr::LOCALHOST);
        p.set_payload_len(7);
        assert_eq!(b[4..6], [0, 7]);
    }

    #[test]
    fn link_local() {
        assert!(is_link_local(&"fe80::1".parse().unwrap()));
        assert!(is_link_local(&"febf:ffff::1".parse().unwrap()));
        assert!(!is_link_local(&"fec0::1".parse().unwrap()));
        assert!(!is_link_local(&"fe7f::1".parse().unwrap()));
        assert!(!is_link_local(&"ff02::1".parse().unwrap()));
        assert!(!is_link_local(&Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn solicited_node_address() {
        // RFC 4291 section 2.7.1 example: 4037::01:800:200E:8C6C.
        let a: Ipv6Addr = "4037::1:800:200e:8c6c".parse().unwrap();
        let s = solicited_node(&a);
        assert_eq!(s, "ff02::1:ff0e:8c6c".parse::<Ipv6Addr>().unwrap());
        assert!(is_solicited_node(&s));
        assert!(!is_solicited_node(&a));
        assert!(!is_solicited_node(&IPV6_ALL_NODES));
    }

    #[test]
    fn multicast_mac_mapping() {
        // RFC 2464 section 7: FF02::1 -> 33:33:00:00:00:01.
        assert_eq!(multicast_mac(&IPV6_ALL_NODES), Some(EthernetAddress([0x33, 0x33, 0, 0, 0, 1])));
        let s: Ipv6Addr = "ff02::1:ff0e:8c6c".parse().unwrap();
        assert_eq!(multicast_mac(&s), Some(EthernetAddress([0x33, 0x33, 0xff, 0x0e, 0x8c, 0x6c])));
        assert!(multicast_mac(&s).unwrap().is_multicast());
        assert_eq!(multicast_mac(&"fe80::1".parse().unwrap()), None);
    }
}
