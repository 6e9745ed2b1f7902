//! ARP (RFC 826), with a representation for the Ethernet/IPv4 flavour.

use core::net::Ipv4Addr;

use crate::error::{Error, Result};
use crate::ethernet::{EtherType, EthernetAddress};
use crate::field;

/// Length of an ARP packet for Ethernet hardware and IPv4 protocol addresses.
pub const ARP_ETHERNET_IPV4_LEN: usize = 28;

/// Length of the fixed part before the variable-length addresses.
const FIXED_LEN: usize = 8;

mod offs {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
}

/// Hardware type for Ethernet.
const HTYPE_ETHERNET: u16 = 1;

/// The ARP operation code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1
    Request,
    /// 2
    Reply,
    /// Anything else (never 1 or 2).
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(v: ArpOperation) -> Self {
        match v {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(other) => other,
        }
    }
}

/// A view of an ARP packet of any hardware/protocol address sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wrap, requiring the fixed part and all four addresses (as sized by
    /// the length fields) to be present; `Err(Truncated)` otherwise.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = ArpPacket { buffer };
        let len = p.buffer.as_ref().len();
        if len < FIXED_LEN || len < p.total_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length implied by the address length fields.
    fn total_len(&self) -> usize {
        FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::HTYPE)
    }

    /// Protocol type, using EtherType numbering.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(field::u16_at(self.buffer.as_ref(), offs::PTYPE))
    }

    /// Hardware address length in bytes.
    pub fn hardware_len(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::HLEN)
    }

    /// Protocol address length in bytes.
    pub fn protocol_len(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::PLEN)
    }

    /// Operation code.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(field::u16_at(self.buffer.as_ref(), offs::OPER))
    }

    fn spa_off(&self) -> usize {
        offs::SHA + usize::from(self.hardware_len())
    }

    fn tha_off(&self) -> usize {
        self.spa_off() + usize::from(self.protocol_len())
    }

    fn tpa_off(&self) -> usize {
        self.tha_off() + usize::from(self.hardware_len())
    }

    /// Sender hardware address (empty if not inside the buffer).
    pub fn source_hardware_addr(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), offs::SHA, self.spa_off())
    }

    /// Sender protocol address (empty if not inside the buffer).
    pub fn source_protocol_addr(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), self.spa_off(), self.tha_off())
    }

    /// Target hardware address (empty if not inside the buffer).
    pub fn target_hardware_addr(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), self.tha_off(), self.tpa_off())
    }

    /// Target protocol address (empty if not inside the buffer).
    pub fn target_protocol_addr(&self) -> &[u8] {
        let start = self.tpa_off();
        field::slice(self.buffer.as_ref(), start, start + usize::from(self.protocol_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Set the hardware type.
    pub fn set_hardware_type(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::HTYPE, v);
    }

    /// Set the protocol type.
    pub fn set_protocol_type(&mut self, v: EtherType) {
        field::set_u16(self.buffer.as_mut(), offs::PTYPE, v.into());
    }

    /// Set the hardware address length; set it before the addresses.
    pub fn set_hardware_len(&mut self, v: u8) {
        field::set_u8(self.buffer.as_mut(), offs::HLEN, v);
    }

    /// Set the protocol address length; set it before the addresses.
    pub fn set_protocol_len(&mut self, v: u8) {
        field::set_u8(self.buffer.as_mut(), offs::PLEN, v);
    }

    /// Set the operation code.
    pub fn set_operation(&mut self, v: ArpOperation) {
        field::set_u16(self.buffer.as_mut(), offs::OPER, v.into());
    }

    /// Write the sender hardware address; `addr` should be `hardware_len` long.
    pub fn set_source_hardware_addr(&mut self, addr: &[u8]) {
        let off = offs::SHA;
        field::set_bytes(self.buffer.as_mut(), off, addr);
    }

    /// Write the sender protocol address; `addr` should be `protocol_len` long.
    pub fn set_source_protocol_addr(&mut self, addr: &[u8]) {
        let off = self.spa_off();
        field::set_bytes(self.buffer.as_mut(), off, addr);
    }

    /// Write the target hardware address; `addr` should be `hardware_len` long.
    pub fn set_target_hardware_addr(&mut self, addr: &[u8]) {
        let off = self.tha_off();
        field::set_bytes(self.buffer.as_mut(), off, addr);
    }

    /// Write the target protocol address; `addr` should be `protocol_len` long.
    pub fn set_target_protocol_addr(&mut self, addr: &[u8]) {
        let off = self.tpa_off();
        field::set_bytes(self.buffer.as_mut(), off, addr);
    }
}

/// A parsed ARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArpRepr {
    /// Ethernet hardware addresses, IPv4 protocol addresses.
    EthernetIpv4 {
        /// Request, reply or other.
        operation: ArpOperation,
        /// Sender MAC.
        source_hardware_addr: EthernetAddress,
        /// Sender IPv4 address.
        source_protocol_addr: Ipv4Addr,
        /// Target MAC (zero in requests).
        target_hardware_addr: EthernetAddress,
        /// Target IPv4 address.
        target_protocol_addr: Ipv4Addr,
    },
}

impl ArpRepr {
    /// Parse an Ethernet/IPv4 ARP packet.
    ///
    /// `Err(Unsupported)` for other hardware/protocol types or address sizes;
    /// `Err(Truncated)` if the buffer is too short.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<Self> {
        if packet.buffer.as_ref().len() < FIXED_LEN {
            return Err(Error::Truncated);
        }
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != EtherType::Ipv4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        if packet.buffer.as_ref().len() < ARP_ETHERNET_IPV4_LEN {
            return Err(Error::Truncated);
        }
        let ipv4 = |b: &[u8]| b.first_chunk::<4>().map(|a| Ipv4Addr::from(*a)).ok_or(Error::Truncated);
        Ok(ArpRepr::EthernetIpv4 {
            operation: packet.operation(),
            source_hardware_addr: EthernetAddress::from_bytes(packet.source_hardware_addr())?,
            source_protocol_addr: ipv4(packet.source_protocol_addr())?,
            target_hardware_addr: EthernetAddress::from_bytes(packet.target_hardware_addr())?,
            target_protocol_addr: ipv4(packet.target_protocol_addr())?,
        })
    }

    /// Bytes [`ArpRepr::emit`] writes: 28.
    pub const fn buffer_len(&self) -> usize {
        match self {
            ArpRepr::EthernetIpv4 { .. } => ARP_ETHERNET_IPV4_LEN,
        }
    }

    /// Write the packet at the start of `buf`; `Err(Truncated)` if it is
    /// shorter than [`ArpRepr::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let buf = buf.get_mut(..self.buffer_len()).ok_or(Error::Truncated)?;
        match *self {
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => {
                let mut p = ArpPacket::new_unchecked(buf);
                p.set_hardware_type(HTYPE_ETHERNET);
                p.set_protocol_type(EtherType::Ipv4);
                p.set_hardware_len(6);
                p.set_protocol_len(4);
                p.set_operation(operation);
                p.set_source_hardware_addr(&source_hardware_addr.0);
                p.set_source_protocol_addr(&source_protocol_addr.octets());
                p.set_target_hardware_addr(&target_hardware_addr.0);
                p.set_target_protocol_addr(&target_protocol_addr.octets());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A captured ARP request (Ethernet payload only): who has 24.166.173.159?
    /// tell 24.166.172.1 (00:07:0d:af:f4:54). Zero Ethernet padding to the
    /// 46-byte minimum payload kept, as received.
    const REQUEST: [u8; 46] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54, 0x18, 0xa6, 0xac, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0xa6, 0xad, 0x9f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> ArpRepr {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54]),
            source_protocol_addr: Ipv4Addr::new(24, 166, 172, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(24, 166, 173, 159),
        }
    }

    #[test]
    fn parse_captured_request() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), EtherType::Ipv4);
        assert_eq!(p.operation(), ArpOperation::Request);
        assert_eq!(p.source_protocol_addr(), &[24, 166, 172, 1]);
        assert_eq!(ArpRepr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_matches_capture() {
        let mut out = [0u8; 28];
        repr().emit(&mut out).unwrap();
        assert_eq!(out, REQUEST[..28]);
        assert_eq!(repr().emit(&mut [0u8; 27]), Err(Error::Truncated));
    }

    #[test]
    fn rejects() {
        assert_eq!(ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(), Error::Truncated);
        assert_eq!(ArpPacket::new_checked(&REQUEST[..7]).unwrap_err(), Error::Truncated);
        let mut other = REQUEST;
        other[1] = 6; // IEEE 802 hardware type
        let p = ArpPacket::new_checked(&other[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p), Err(Error::Unsupported));
        let mut other = REQUEST;
        other[4] = 8; // 8-byte hardware addresses: different layout
        let p = ArpPacket::new_checked(&other[..]).unwrap();
        assert_eq!(p.target_protocol_addr(), &[0x00, 0x00, 0x00, 0x00]);
        assert_eq!(ArpRepr::parse(&p), Err(Error::Unsupported));
        // Unchecked short view: no panic, a clean error.
        let p = ArpPacket::new_unchecked(&REQUEST[..20]);
        assert_eq!(p.target_protocol_addr(), &[] as &[u8]);
        assert_eq!(ArpRepr::parse(&p), Err(Error::Truncated));
    }

    #[test]
    fn operation_codes() {
        for v in [0u16, 1, 2, 3, 0xffff] {
            assert_eq!(u16::from(ArpOperation::from(v)), v);
        }
        assert_eq!(ArpOperation::from(2), ArpOperation::Reply);
    }
}
