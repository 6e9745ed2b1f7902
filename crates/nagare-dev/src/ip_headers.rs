//! Where the IP and transport headers of an Ethernet frame lie, for what
//! acts on a frame's offload metadata: the virtio header of a TAP
//! ([`crate::vnet`]) and the offloads done in software
//! ([`crate::software_offload`]).
//!
//! Two kinds of packet are read: an unfragmented IPv4 packet, and an IPv6
//! packet, whose transport header is the one its fixed header names. The
//! protocol of an IPv6 packet is its header's next header, so one with
//! extension headers (hop-by-hop or destination options, routing, a
//! fragment header) has the first of them as its protocol: never TCP or
//! UDP, so to every caller a packet that cannot be offloaded, as an IPv4
//! fragment is.

use nagare_wire::checksum::{pseudo_header_v4, pseudo_header_v6, Checksum};
use nagare_wire::{Ipv4Addr, Ipv6Addr, ETHERNET_HEADER_LEN, IPV6_HEADER_LEN};

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// Bytes of a frame that [`IpHeaders::parse`] reads: an Ethernet header
/// and the longest IPv4 header (longer than IPv6's fixed one).
pub const IP_PREFIX_LEN: usize = ETHERNET_HEADER_LEN + 60;

/// What differs between the two families' headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4 {
        /// Header length, options included.
        ihl: usize,
        ident: u16,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
    },
}

/// Where the headers of an Ethernet frame carrying an unfragmented IPv4
/// packet or an IPv6 packet lie, checked against the frame's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeaders {
    pub family: Family,
    /// The IPv4 protocol, or the IPv6 next header.
    pub protocol: u8,
    /// Offset of the transport header.
    pub l4_start: usize,
    /// End of the IP packet (Ethernet padding excluded).
    pub end: usize,
}

impl IpHeaders {
    /// The headers of a frame of `frame_len` bytes whose first bytes are
    /// `prefix` (at least its Ethernet and IP headers; the whole frame will
    /// do), if it carries an unfragmented IPv4 packet or an IPv6 packet whose
    /// lengths lie within the frame.
    pub fn parse(prefix: &[u8], frame_len: usize) -> Option<IpHeaders> {
        let ethertype = prefix.get(12..14)?;
        let ip = prefix.get(ETHERNET_HEADER_LEN..)?;
        let ip_room = frame_len.checked_sub(ETHERNET_HEADER_LEN)?;
        let version_ihl = *ip.first()?;
        let version = version_ihl >> 4;
        let (family, protocol, header_len, packet_len) = if ethertype == ETHERTYPE_IPV4 && version == 4 {
            let ihl = usize::from(version_ihl & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            let flags_fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
            if ihl < 20 || total < ihl || flags_fragment & 0x3fff != 0 {
                return None;
            }
            let addr = |at: usize| Some(Ipv4Addr::from(<[u8; 4]>::try_from(ip.get(at..at + 4)?).ok()?));
            let ident = u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]);
            (Family::V4 { ihl, ident, src: addr(12)?, dst: addr(16)? }, *ip.get(9)?, ihl, total)
        } else if ethertype == ETHERTYPE_IPV6 && version == 6 {
            let payload_len = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            let addr = |at: usize| Some(Ipv6Addr::from(<[u8; 16]>::try_from(ip.get(at..at + 16)?).ok()?));
            let family = Family::V6 { src: addr(8)?, dst: addr(24)? };
            (family, *ip.get(6)?, IPV6_HEADER_LEN, IPV6_HEADER_LEN + payload_len)
        } else {
            return None;
        };
        if packet_len > ip_room {
            return None;
        }
        Some(IpHeaders {
            family,
            protocol,
            l4_start: ETHERNET_HEADER_LEN + header_len,
            end: ETHERNET_HEADER_LEN + packet_len,
        })
    }

    /// Length of the IP header (IPv4 options included).
    pub fn header_len(&self) -> usize {
        self.l4_start - ETHERNET_HEADER_LEN
    }

    /// The pseudo-header sum of a transport segment of `l4_len` bytes of
    /// this packet's protocol (`l4_len` at most 65535, as every IP payload
    /// here is).
    pub fn pseudo_header(&self, l4_len: usize) -> Checksum {
        match self.family {
            Family::V4 { src, dst, .. } => pseudo_header_v4(src, dst, self.protocol, l4_len as u16),
            Family::V6 { src, dst } => pseudo_header_v6(src, dst, self.protocol, l4_len as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv6(next_header: u8, payload_len: u16, frame_len: usize) -> Vec<u8> {
        let mut b = vec![0u8; frame_len];
        b[12..14].copy_from_slice(&ETHERTYPE_IPV6);
        b[14] = 0x60;
        b[18..20].copy_from_slice(&payload_len.to_be_bytes());
        b[20] = next_header;
        b[22] = 0xfd;
        b[22 + 15] = 1;
        b[38] = 0xfd;
        b[38 + 15] = 2;
        b
    }

    #[test]
    fn ipv6_headers_are_read_and_checked_against_the_frame() {
        let b = ipv6(PROTO_TCP, 100, 14 + 40 + 100 + 6);
        let ip = IpHeaders::parse(&b, b.len()).unwrap();
        assert_eq!(ip.protocol, PROTO_TCP);
        assert_eq!((ip.l4_start, ip.end, ip.header_len()), (54, 154, 40));
        let src = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        let dst = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
        assert_eq!(ip.family, Family::V6 { src, dst });
        // A prefix of the frame reads the same.
        assert_eq!(IpHeaders::parse(&b[..IP_PREFIX_LEN], b.len()), Some(ip));
        // An extension header is the protocol.
        assert_eq!(IpHeaders::parse(&ipv6(0, 100, 154), 154).map(|h| h.protocol), Some(0));
        assert_eq!(IpHeaders::parse(&b, 153), None, "payload past the frame");
        assert_eq!(IpHeaders::parse(&b[..53], 53), None, "header cut short");
        let mut v4_in_v6 = b.clone();
        v4_in_v6[14] = 0x45;
        assert_eq!(IpHeaders::parse(&v4_in_v6, v4_in_v6.len()), None, "version 4 under IPv6's type");
    }
}
