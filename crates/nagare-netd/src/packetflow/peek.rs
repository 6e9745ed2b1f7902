//! A received frame as the PacketFlow modules read it, once per frame for
//! all of them: an unfragmented UDP datagram to one of netd's addresses on
//! its MAC address, over IPv4 or IPv6 (UDP straight after the fixed
//! header), and the socket delivery would choose for it (a dual-stack
//! IPv6 socket for IPv4 ones too). Reading costs a copy of the frame's
//! first 54 bytes and the 8 of the UDP header onto the stack and one hash
//! lookup in the engine's port map of the family; nothing is allocated. A
//! frame it cannot read so (an IPv6 one with extension headers or in
//! fragments among them) is none of PacketFlow's business: it passes to
//! the engine, which counts and drops what is malformed.

use nagare_core::buf::PacketBuf;
use nagare_core::{Interface, UdpHandle};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

pub(super) const ETHERNET_HEADER: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IPV4_MIN_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
const UDP_HEADER: usize = 8;
const PROTOCOL_UDP: u8 = 17;

/// A UDP datagram as read from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Datagram {
    pub dst: SocketAddr,
    /// Datagrams the frame stands for (more than one for a UDP
    /// super-frame), their payload bytes in all, and the smallest.
    pub count: usize,
    pub bytes: usize,
    pub smallest: usize,
}

/// `frame`'s datagram and the engine's socket for it, if it is a UDP
/// datagram for one of netd's sockets.
pub(super) fn arrival(iface: &Interface, frame: &PacketBuf) -> Option<(UdpHandle, Datagram)> {
    let d = read_datagram(frame, &iface.config().mac.0)?;
    let (h, _) = match d.dst {
        SocketAddr::V4(dst) if iface.has_address(*dst.ip()) => iface.udp_ref().receiver_of(dst)?,
        SocketAddr::V6(dst) if iface.ipv6_address_state(*dst.ip()).is_some() => iface.udp_ref().receiver_of6(dst)?,
        _ => return None,
    };
    Some((h, d))
}

/// `frame` as an unfragmented UDP datagram sent to `mac`, if it is one
/// whose headers hold together.
pub(super) fn read_datagram(frame: &PacketBuf, mac: &[u8; 6]) -> Option<Datagram> {
    let mut head = [0u8; ETHERNET_HEADER + IPV6_HEADER];
    let got = frame.copy_out(0, &mut head);
    if got < ETHERNET_HEADER + IPV4_MIN_HEADER || head[..6] != mac[..] {
        return None;
    }
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    if be16(&head, 12) == ETHERTYPE_IPV6 && got == head.len() {
        return read_datagram6(frame, &head);
    }
    let ip = &head[ETHERNET_HEADER..];
    if be16(&head, 12) != ETHERTYPE_IPV4 || ip[0] >> 4 != 4 || ip[9] != PROTOCOL_UDP {
        return None;
    }
    let header_len = usize::from(ip[0] & 0x0f) * 4;
    let total_len = usize::from(be16(ip, 2));
    // More fragments, or an offset: only the first fragment has the UDP
    // header, and the datagram's fate is decided once it is whole.
    if header_len < IPV4_MIN_HEADER || be16(ip, 6) & 0x3fff != 0 {
        return None;
    }
    let mut udp = [0u8; UDP_HEADER];
    if frame.copy_out(ETHERNET_HEADER + header_len, &mut udp) != UDP_HEADER {
        return None;
    }
    let udp_len = usize::from(be16(&udp, 4));
    let ip_payload = total_len.checked_sub(header_len)?;
    let in_frame = frame.len().checked_sub(ETHERNET_HEADER + header_len)?;
    if udp_len < UDP_HEADER || udp_len > ip_payload || udp_len > in_frame {
        return None;
    }
    let dst = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]), be16(&udp, 2)));
    let bytes = udp_len - UDP_HEADER;
    let offload = frame.offload();
    if !offload.is_udp_segmented() {
        return Some(Datagram { dst, count: 1, bytes, smallest: bytes });
    }
    // A super-frame: full segments and a last one of what is left.
    let segment = usize::from(offload.segment_size);
    if bytes == 0 {
        return None;
    }
    let count = bytes.div_ceil(segment);
    Some(Datagram { dst, count, bytes, smallest: bytes - (count - 1) * segment })
}

/// `frame` (whose Ethernet and IPv6 headers are `head`) as a UDP datagram
/// straight after the IPv6 header, if it is one whose lengths hold
/// together. The engine takes no UDP super-frame over IPv6: one is left
/// to it.
fn read_datagram6(frame: &PacketBuf, head: &[u8; ETHERNET_HEADER + IPV6_HEADER]) -> Option<Datagram> {
    let ip = &head[ETHERNET_HEADER..];
    if ip[0] >> 4 != 6 || ip[6] != PROTOCOL_UDP || frame.offload().is_udp_segmented() {
        return None;
    }
    let payload_len = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let mut udp = [0u8; UDP_HEADER];
    if frame.copy_out(ETHERNET_HEADER + IPV6_HEADER, &mut udp) != UDP_HEADER {
        return None;
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let in_frame = frame.len().checked_sub(ETHERNET_HEADER + IPV6_HEADER)?;
    if udp_len < UDP_HEADER || udp_len > payload_len || udp_len > in_frame {
        return None;
    }
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&ip[24..40]);
    let dst = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(dst), u16::from_be_bytes([udp[2], udp[3]]), 0, 0));
    let bytes = udp_len - UDP_HEADER;
    Some(Datagram { dst, count: 1, bytes, smallest: bytes })
}
