//! What a device with transmit offloads does to a frame, done in software
//! for a device that has none: a partial transport checksum is completed,
//! a TCP super-segment is cut into segments of its segment size, each with
//! its own IP and TCP header and full checksums, and a UDP super-frame
//! into datagrams of its segment size, each with its own IP header and UDP
//! length and checksum (as the kernel's software GSO does for
//! `SKB_GSO_TCPV4`, `SKB_GSO_TCPV6` and `SKB_GSO_UDP_L4`). Both IP families
//! are cut by the same code; what differs is the IP header of each piece
//! (IPv4: total length, identification, header checksum; IPv6: payload
//! length) and the pseudo header its transport checksum covers.
//! The VNI–TAP bridge uses it for frames that crossed the segment with
//! offloads and leave for a TAP opened for plain frames.
//!
//! The frame comes from another process (a VNI peer), so its headers are
//! checked before use: a super-frame that is not an unfragmented IPv4
//! packet, or an IPv6 packet, of its kind whose lengths agree is refused,
//! never cut, and a partial checksum is completed only in an unfragmented
//! IPv4 or an IPv6 TCP or UDP packet whose transport header is whole. An
//! IPv6 packet with extension headers before its transport header is, like
//! an IPv4 fragment, neither cut nor completed. Any other frame that
//! claims a partial checksum is refused: only a TCP or UDP checksum over a
//! whole transport segment can be partial, so sent as it is it would reach
//! the wire with a checksum no receiver accepts.

use std::collections::VecDeque;

use nagare_core::buf::{BufferPool, ChecksumState, Offload, PacketBuf, Segmentation, TxOffloads};
use nagare_core::udp::UDP_MAX_SEGMENTS;
use nagare_wire::checksum::{self, Checksum};
use nagare_wire::ETHERNET_HEADER_LEN;

use crate::device::RX_HEADROOM;
use crate::ip_headers::{Family, IpHeaders, PROTO_TCP, PROTO_UDP};

const TCP_CHECKSUM: usize = 16;
const UDP_CHECKSUM: usize = 6;
const UDP_HEADER_LEN: usize = 8;
const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_URG: u8 = 0x20;
const TCP_CWR: u8 = 0x80;

/// Why a frame could not be completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A super-frame whose headers are not an unfragmented IPv4, or an
    /// IPv6, TCP (or, for a UDP super-frame, UDP) packet with consistent
    /// lengths, or whose segments would not fit the MTU. An IPv6 packet
    /// with extension headers before its transport header is one.
    Malformed,
    /// A partial checksum on a frame that is not an unfragmented IPv4 or
    /// an IPv6 TCP or UDP packet with its transport header whole (another
    /// protocol, an IP fragment, IPv6 extension headers before the
    /// transport header, a header cut short or with lengths that
    /// disagree): there is no checksum field that could be completed.
    Uncompletable,
    /// No pool buffer for a segment.
    NoBuffer,
    /// More segments than the queue they go to has room for.
    NoRoom,
}

/// The smallest segment size a super-segment may ask to be cut to (as
/// Linux's `tcp_min_snd_mss`): an engine never sends smaller segments, and
/// a smaller size would let one frame multiply into thousands.
pub const MIN_SEGMENT_SIZE: usize = 48;

/// Whether a device with `mtu` and `offloads` takes `frame` as it is. A
/// UDP super-frame stands for several datagrams however short it is, so
/// only a device that cuts UDP super-frames takes one.
pub fn fits_device(frame: &PacketBuf, mtu: usize, offloads: TxOffloads) -> bool {
    let offload = frame.offload();
    let checksum_done = offload.checksum != ChecksumState::Partial || offloads.checksum;
    let len = frame.len();
    let super_frame_fits = len <= offloads.super_frame_limit(offload) + ETHERNET_HEADER_LEN;
    checksum_done
        && if offload.is_udp_segmented() {
            super_frame_fits
        } else {
            len <= mtu + ETHERNET_HEADER_LEN || super_frame_fits
        }
}

/// Appends `frame` to `out` as a device without offloads must send it:
/// with its checksum complete, as MTU-sized TCP segments if it is a TCP
/// super-segment longer than the MTU, and as its datagrams if it is a UDP
/// super-frame (of any length), over IPv4 or IPv6. Frames that need
/// nothing go as they are; a partial checksum that is not a TCP or UDP one
/// in an unfragmented IPv4 packet or an IPv6 packet without extension
/// headers is refused ([`Refused::Uncompletable`]). At most
/// `room` frames are appended: a super-segment that would be cut into more
/// is refused whole. Returns the number of frames appended.
pub fn complete(
    frame: PacketBuf,
    mtu: usize,
    pool: &BufferPool,
    out: &mut VecDeque<PacketBuf>,
    room: usize,
) -> Result<usize, Refused> {
    if room == 0 {
        return Err(Refused::NoRoom);
    }
    let offload = frame.offload();
    let cut = offload.is_udp_segmented() || (offload.segment_size != 0 && frame.len() > mtu + ETHERNET_HEADER_LEN);
    if !cut && offload.checksum != ChecksumState::Partial {
        out.push_back(frame);
        return Ok(1);
    }
    let mut bytes = frame.to_vec();
    drop(frame);
    let Some(ip) = IpHeaders::parse(&bytes, bytes.len()) else {
        return Err(if cut { Refused::Malformed } else { Refused::Uncompletable });
    };
    if cut {
        let segment_size = usize::from(offload.segment_size);
        return match offload.segmentation {
            Segmentation::Tcp => cut_tcp(&bytes, &ip, segment_size, mtu, pool, out, room),
            Segmentation::Udp => cut_udp(&bytes, &ip, segment_size, mtu, pool, out, room),
        };
    }
    let l4 = ip.l4_start..ip.end;
    let field = match ip.protocol {
        PROTO_TCP if tcp_header_whole(&bytes[l4.clone()]) => TCP_CHECKSUM,
        PROTO_UDP if udp_length_agrees(&bytes[l4.clone()]) => UDP_CHECKSUM,
        _ => return Err(Refused::Uncompletable),
    };
    // The field holds the pseudo-header sum: the sum over the transport
    // header and payload with it in place is the whole checksum.
    let mut sum = checksum::checksum(&bytes[l4.clone()]);
    if ip.protocol == PROTO_UDP && sum == 0 {
        sum = 0xffff;
    }
    bytes[l4.start + field..l4.start + field + 2].copy_from_slice(&sum.to_be_bytes());
    out.push_back(rebuild(pool, &bytes[..ip.end])?);
    Ok(1)
}

/// Whether `tcp` (an IP payload) starts with a TCP header whose data
/// offset lies within it.
fn tcp_header_whole(tcp: &[u8]) -> bool {
    let header = tcp.get(12).map_or(0, |&b| usize::from(b >> 4) * 4);
    header >= 20 && header <= tcp.len()
}

/// Whether `udp` (an IP payload) starts with a UDP header whose length is
/// the IP payload's.
fn udp_length_agrees(udp: &[u8]) -> bool {
    udp.get(4..6).is_some_and(|b| usize::from(u16::from_be_bytes([b[0], b[1]])) == udp.len())
        && udp.len() >= UDP_HEADER_LEN
}

/// A frame in fresh pool buffers with nothing left to offload.
fn rebuild(pool: &BufferPool, bytes: &[u8]) -> Result<PacketBuf, Refused> {
    let mut frame = PacketBuf::from_slice(pool, RX_HEADROOM, bytes).map_err(|_| Refused::NoBuffer)?;
    frame.set_offload(Offload::NONE);
    Ok(frame)
}

/// Cuts the TCP super-segment in `frame` into segments of at most
/// `segment_size` payload bytes that fit `mtu`, if they are at most
/// `room`. A super-segment carries data only: SYN, RST or URG on one is
/// refused (they would be copied onto every segment).
fn cut_tcp(
    frame: &[u8],
    ip: &IpHeaders,
    segment_size: usize,
    mtu: usize,
    pool: &BufferPool,
    out: &mut VecDeque<PacketBuf>,
    room: usize,
) -> Result<usize, Refused> {
    let malformed = Err(Refused::Malformed);
    if ip.protocol != PROTO_TCP {
        return malformed;
    }
    let tcp = &frame[ip.l4_start..ip.end];
    let Some(&offset_byte) = tcp.get(12) else {
        return malformed;
    };
    let tcp_len = usize::from(offset_byte >> 4) * 4;
    if tcp_len < 20
        || tcp_len > tcp.len()
        || segment_size < MIN_SEGMENT_SIZE
        || ip.header_len() + tcp_len + segment_size > mtu
    {
        return malformed;
    }
    let (tcp_header, payload) = tcp.split_at(tcp_len);
    let seq = u32::from_be_bytes([tcp_header[4], tcp_header[5], tcp_header[6], tcp_header[7]]);
    let flags = tcp_header[13];
    if flags & (TCP_SYN | TCP_RST | TCP_URG) != 0 {
        return malformed;
    }
    let pieces = payload.len().div_ceil(segment_size).max(1);
    if pieces > room {
        return Err(Refused::NoRoom);
    }
    let mut built = Vec::with_capacity(pieces);
    let mut bytes = Vec::with_capacity(ip.l4_start + tcp_len + segment_size);
    for k in 0..pieces {
        let piece = &payload[(k * segment_size).min(payload.len())..((k + 1) * segment_size).min(payload.len())];
        let last = k + 1 == pieces;
        bytes.clear();
        bytes.extend_from_slice(&frame[..ip.l4_start]);
        bytes.extend_from_slice(tcp_header);
        bytes.extend_from_slice(piece);
        set_piece_ip(&mut bytes, ip, tcp_len + piece.len(), k);
        // TCP: sequence number, flags (FIN and PSH on the last segment,
        // CWR on the first), full checksum.
        let t = &mut bytes[ip.l4_start..];
        let piece_seq = seq.wrapping_add((k * segment_size) as u32);
        t[4..8].copy_from_slice(&piece_seq.to_be_bytes());
        let mut piece_flags = flags;
        if !last {
            piece_flags &= !(TCP_FIN | TCP_PSH);
        }
        if k > 0 {
            piece_flags &= !TCP_CWR;
        }
        t[13] = piece_flags;
        t[TCP_CHECKSUM..TCP_CHECKSUM + 2].copy_from_slice(&[0, 0]);
        let mut sum: Checksum = ip.pseudo_header(tcp_len + piece.len());
        sum.add_bytes(t);
        t[TCP_CHECKSUM..TCP_CHECKSUM + 2].copy_from_slice(&sum.finish().to_be_bytes());
        built.push(rebuild(pool, &bytes)?);
    }
    out.extend(built);
    Ok(pieces)
}

/// The IP header of piece `k` of a cut frame (`bytes`: Ethernet header
/// on), whose transport part is `l4_len` bytes: for IPv4 its total length,
/// a fresh identification (the super-frame's plus `k`) and its header
/// checksum; for IPv6 its payload length (it has no identification
/// outside a fragment header, nor a header checksum).
fn set_piece_ip(bytes: &mut [u8], ip: &IpHeaders, l4_len: usize, k: usize) {
    let ip_bytes = &mut bytes[ETHERNET_HEADER_LEN..];
    match ip.family {
        Family::V4 { ihl, ident, .. } => {
            let total = (ihl + l4_len) as u16;
            ip_bytes[2..4].copy_from_slice(&total.to_be_bytes());
            ip_bytes[4..6].copy_from_slice(&ident.wrapping_add(k as u16).to_be_bytes());
            ip_bytes[10..12].copy_from_slice(&[0, 0]);
            let header_sum = checksum::checksum(&ip_bytes[..ihl]);
            ip_bytes[10..12].copy_from_slice(&header_sum.to_be_bytes());
        }
        Family::V6 { .. } => ip_bytes[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes()),
    }
}

/// Cuts the UDP super-frame in `frame` into datagrams of `segment_size`
/// payload bytes (the last may be shorter) that fit `mtu`, if they are at
/// most `room`. The UDP length must be the IP payload's, and the segment
/// size must make at least one and at most [`UDP_MAX_SEGMENTS`] datagrams.
fn cut_udp(
    frame: &[u8],
    ip: &IpHeaders,
    segment_size: usize,
    mtu: usize,
    pool: &BufferPool,
    out: &mut VecDeque<PacketBuf>,
    room: usize,
) -> Result<usize, Refused> {
    let malformed = Err(Refused::Malformed);
    if ip.protocol != PROTO_UDP {
        return malformed;
    }
    let udp = &frame[ip.l4_start..ip.end];
    let Some(length) = udp.get(4..6).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]]))) else {
        return malformed;
    };
    if length != udp.len() || length < UDP_HEADER_LEN {
        return malformed;
    }
    let (udp_header, payload) = udp.split_at(UDP_HEADER_LEN);
    if segment_size == 0 || segment_size > payload.len() || ip.header_len() + UDP_HEADER_LEN + segment_size > mtu {
        return malformed;
    }
    let pieces = payload.len().div_ceil(segment_size);
    if pieces > UDP_MAX_SEGMENTS {
        return malformed;
    }
    if pieces > room {
        return Err(Refused::NoRoom);
    }
    let mut built = Vec::with_capacity(pieces);
    let mut bytes = Vec::with_capacity(ip.l4_start + UDP_HEADER_LEN + segment_size);
    for (k, piece) in payload.chunks(segment_size).enumerate() {
        bytes.clear();
        bytes.extend_from_slice(&frame[..ip.l4_start]);
        bytes.extend_from_slice(udp_header);
        bytes.extend_from_slice(piece);
        set_piece_ip(&mut bytes, ip, UDP_HEADER_LEN + piece.len(), k);
        // UDP: length, full checksum (0 is sent as all ones).
        let u = &mut bytes[ip.l4_start..];
        let udp_len = (UDP_HEADER_LEN + piece.len()) as u16;
        u[4..6].copy_from_slice(&udp_len.to_be_bytes());
        u[UDP_CHECKSUM..UDP_CHECKSUM + 2].copy_from_slice(&[0, 0]);
        let mut sum: Checksum = ip.pseudo_header(usize::from(udp_len));
        sum.add_bytes(u);
        let sum = match sum.finish() {
            0 => 0xffff,
            s => s,
        };
        u[UDP_CHECKSUM..UDP_CHECKSUM + 2].copy_from_slice(&sum.to_be_bytes());
        built.push(rebuild(pool, &bytes)?);
    }
    out.extend(built);
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_wire::checksum::{pseudo_header_v4, verify};
    use nagare_wire::Ipv4Addr;

    const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];

    /// An Ethernet frame with an IPv4 TCP segment of `payload` bytes, its
    /// TCP checksum left partial.
    fn super_segment(pool: &BufferPool, payload: usize, flags: u8, segment_size: u16) -> PacketBuf {
        let mut b = vec![0u8; 14 + 20 + 32 + payload];
        b[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        let total = (20 + 32 + payload) as u16;
        b[14] = 0x45;
        b[16..18].copy_from_slice(&total.to_be_bytes());
        b[18..20].copy_from_slice(&7u16.to_be_bytes());
        b[20] = 0x40;
        b[22] = 64;
        b[23] = PROTO_TCP;
        b[26..30].copy_from_slice(&[10, 0, 0, 1]);
        b[30..34].copy_from_slice(&[10, 0, 0, 2]);
        let sum = checksum::checksum(&b[14..34]);
        b[24..26].copy_from_slice(&sum.to_be_bytes());
        b[34 + 4..34 + 8].copy_from_slice(&1000u32.to_be_bytes());
        b[34 + 12] = 8 << 4;
        b[34 + 13] = flags;
        let pseudo = pseudo_header_v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 6, total - 20);
        b[34 + 16..34 + 18].copy_from_slice(&pseudo.folded().to_be_bytes());
        for (i, x) in b[66..].iter_mut().enumerate() {
            *x = i as u8;
        }
        let mut f = PacketBuf::from_slice(pool, 0, &b).unwrap();
        f.set_offload(Offload::tcp_segments(segment_size));
        f
    }

    fn tcp_checksum_ok(f: &[u8]) -> bool {
        let len = (f.len() - 34) as u16;
        let mut sum = pseudo_header_v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 6, len);
        sum.add_bytes(&f[34..]);
        sum.folded() == 0xffff
    }

    #[test]
    fn a_super_segment_is_cut_into_mtu_segments() {
        let pool = BufferPool::new(2048, 256);
        let frame = super_segment(&pool, 10_000, TCP_PSH | TCP_FIN | 0x10, 1448);
        let whole = frame.to_vec();
        let mut out = VecDeque::new();
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Ok(7));
        let mut payload = Vec::new();
        for (k, f) in out.iter().enumerate() {
            assert_eq!(f.offload(), Offload::NONE);
            let f = f.to_vec();
            assert!(f.len() <= 1514, "segment {k}: {} bytes", f.len());
            assert!(verify(&f[14..34]), "IP header checksum");
            assert!(tcp_checksum_ok(&f), "TCP checksum of segment {k}");
            let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
            assert_eq!(seq, 1000 + (k * 1448) as u32);
            assert_eq!(f[47] & (TCP_FIN | TCP_PSH) != 0, k == 6, "FIN and PSH only on the last");
            assert_eq!(u16::from_be_bytes([f[18], f[19]]), 7 + k as u16);
            payload.extend_from_slice(&f[66..]);
        }
        assert_eq!(payload, whole[66..]);
    }

    #[test]
    fn a_partial_checksum_is_completed() {
        let pool = BufferPool::new(2048, 256);
        let mut out = VecDeque::new();
        let frame = super_segment(&pool, 1000, 0x10, 0);
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Ok(1));
        let f = out.pop_front().unwrap();
        assert_eq!(f.offload(), Offload::NONE);
        assert!(tcp_checksum_ok(&f.to_vec()));
    }

    #[test]
    fn a_partial_udp_checksum_is_completed() {
        let pool = BufferPool::new(2048, 256);
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let payload = b"a datagram of odd length";
        let mut b = vec![0u8; 14 + 20 + 8 + payload.len()];
        b[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        b[14] = 0x45;
        b[16..18].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
        b[23] = PROTO_UDP;
        b[26..30].copy_from_slice(&src.octets());
        b[30..34].copy_from_slice(&dst.octets());
        nagare_wire::UdpRepr { src_port: 1000, dst_port: 9 }
            .emit_header_partial(&mut b[34..42], payload.len(), src, dst)
            .unwrap();
        b[42..].copy_from_slice(payload);
        let mut f = PacketBuf::from_slice(&pool, 0, &b).unwrap();
        f.set_offload(Offload::checksum(ChecksumState::Partial));
        let mut out = VecDeque::new();
        assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Ok(1));
        let done = out[0].to_vec();
        let udp = nagare_wire::UdpPacket::new_checked(&done[34..]).unwrap();
        assert!(udp.verify_checksum(src, dst));
        assert_ne!(udp.checksum(), 0);
    }

    /// A partial checksum is only a TCP or UDP one over a whole transport
    /// segment: on anything else there is no field to complete, and the
    /// frame is refused rather than sent with a checksum no one accepts.
    #[test]
    fn partial_checksums_that_cannot_be_completed_are_refused() {
        let pool = BufferPool::new(2048, 256);
        let tcp = super_segment(&pool, 100, 0x10, 0).to_vec();
        // `tcp` changed by `f`, its IP header checksum made right again.
        let edit = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = tcp.clone();
            f(&mut b);
            b[24..26].copy_from_slice(&[0, 0]);
            let sum = checksum::checksum(&b[14..34]);
            b[24..26].copy_from_slice(&sum.to_be_bytes());
            b
        };
        let cases: [(&str, Vec<u8>); 7] = [
            ("ICMP", edit(&|b| b[23] = 1)),
            ("ARP", edit(&|b| b[13] = 0x06)),
            ("an IP fragment (more fragments)", edit(&|b| b[20] = 0x20)),
            ("an IP fragment (offset)", edit(&|b| b[21] = 0x10)),
            ("a TCP header shorter than 20 bytes", edit(&|b| b[34 + 12] = 4 << 4)),
            (
                "a TCP data offset past the packet",
                edit(&|b| {
                    b[34 + 12] = 15 << 4;
                    b[16..18].copy_from_slice(&60u16.to_be_bytes());
                    b.truncate(14 + 60);
                }),
            ),
            (
                "a UDP length that is not the IP payload's",
                edit(&|b| {
                    b[23] = PROTO_UDP;
                    b[34 + 4..34 + 6].copy_from_slice(&20u16.to_be_bytes());
                }),
            ),
        ];
        let mut out = VecDeque::new();
        for (what, bytes) in cases {
            let mut f = PacketBuf::from_slice(&pool, 0, &bytes).unwrap();
            f.set_offload(Offload::checksum(ChecksumState::Partial));
            assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Err(Refused::Uncompletable), "{what}");
            // With its checksum complete the same frame is none of our business.
            let f = PacketBuf::from_slice(&pool, 0, &bytes).unwrap();
            assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Ok(1), "{what}, complete");
            assert!(out.pop_front().unwrap().to_vec() == bytes, "{what}: sent as it is");
        }
        assert!(out.is_empty());
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn bad_super_segments_are_refused() {
        let pool = BufferPool::new(2048, 256);
        let mut out = VecDeque::new();
        // Segments past the MTU.
        assert_eq!(
            complete(super_segment(&pool, 10_000, 0, 1480), 1500, &pool, &mut out, 1024),
            Err(Refused::Malformed)
        );
        // Not TCP; not IPv4; a length past the frame.
        let mut udp = super_segment(&pool, 5000, 0, 1448).to_vec();
        udp[23] = PROTO_UDP;
        let mut arp = udp.clone();
        arp[12] = 0x08;
        arp[13] = 0x06;
        let mut long = super_segment(&pool, 5000, 0, 1448).to_vec();
        long[16..18].copy_from_slice(&u16::MAX.to_be_bytes());
        for bytes in [udp, arp, long] {
            let mut f = PacketBuf::from_slice(&pool, 0, &bytes).unwrap();
            f.set_offload(Offload::tcp_segments(1448));
            assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Err(Refused::Malformed));
        }
        assert!(out.is_empty());
        assert_eq!(pool.in_use(), 0);
    }

    /// A hostile segment size or flags cannot make one frame into
    /// thousands, nor a burst of SYNs; and a cut never overfills the queue
    /// it goes to.
    #[test]
    fn tiny_segment_sizes_control_flags_and_a_full_queue_are_refused() {
        let pool = BufferPool::new(2048, 4096);
        let mut out = VecDeque::new();
        for tiny in [1, 8, MIN_SEGMENT_SIZE as u16 - 1] {
            let f = super_segment(&pool, 60_000, 0, tiny);
            assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Err(Refused::Malformed), "segment size {tiny}");
        }
        for flags in [TCP_SYN, TCP_RST, TCP_URG] {
            let f = super_segment(&pool, 5000, flags, 1448);
            assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Err(Refused::Malformed), "flags {flags:#x}");
        }
        // 5000 bytes in 1448-byte segments are four frames.
        let f = super_segment(&pool, 5000, 0, 1448);
        assert_eq!(complete(f, 1500, &pool, &mut out, 3), Err(Refused::NoRoom));
        let f = super_segment(&pool, 100, 0, 0);
        assert_eq!(complete(f, 1500, &pool, &mut out, 0), Err(Refused::NoRoom));
        assert!(out.is_empty());
        assert_eq!(pool.in_use(), 0, "nothing built is kept");
        let f = super_segment(&pool, 5000, 0, 1448);
        assert_eq!(complete(f, 1500, &pool, &mut out, 4), Ok(4));
        let f = super_segment(&pool, 60_000, 0, MIN_SEGMENT_SIZE as u16);
        out.clear();
        assert_eq!(complete(f, 1500, &pool, &mut out, 1024), Err(Refused::NoRoom), "1250 segments");
    }

    #[test]
    fn what_a_device_takes_is_left_alone() {
        let pool = BufferPool::new(2048, 256);
        let tso = TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };
        let big = super_segment(&pool, 10_000, 0, 1448);
        assert!(fits_device(&big, 1500, tso));
        assert!(!fits_device(&big, 1500, TxOffloads::NONE));
        let small = super_segment(&pool, 100, 0, 0);
        assert!(!fits_device(&small, 1500, TxOffloads::NONE), "partial checksum");
        let mut plain = super_segment(&pool, 100, 0, 0);
        plain.set_offload(Offload::NONE);
        assert!(fits_device(&plain, 1500, TxOffloads::NONE));
        let mut out = VecDeque::new();
        assert_eq!(complete(plain, 1500, &pool, &mut out, 1024), Ok(1));
    }

    /// An Ethernet frame with one IPv4 UDP header over `payload` bytes, its
    /// checksum left partial, as an engine sends a UDP super-frame.
    fn udp_super_frame(pool: &BufferPool, payload: usize, segment_size: u16) -> PacketBuf {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut b = vec![0u8; 14 + 20 + 8 + payload];
        b[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        let repr = nagare_wire::Ipv4Repr {
            ident: 40,
            ..nagare_wire::Ipv4Repr::new(src, dst, nagare_wire::IpProtocol::Udp, 8 + payload, 64)
        };
        repr.emit(&mut b[14..34]).unwrap();
        nagare_wire::UdpRepr { src_port: 1000, dst_port: 9 }
            .emit_header_partial(&mut b[34..42], payload, src, dst)
            .unwrap();
        for (i, x) in b[42..].iter_mut().enumerate() {
            *x = (i % 253) as u8;
        }
        let mut f = PacketBuf::from_slice(pool, 0, &b).unwrap();
        f.set_offload(Offload::udp_segments(segment_size));
        f
    }

    /// The datagrams of a UDP super-frame leave as ordinary ones: each with
    /// its IP length, identification and header checksum, its UDP length
    /// and full checksum, the last one short; read back with the parsers.
    #[test]
    fn a_udp_super_frame_is_cut_into_its_datagrams() {
        use nagare_wire::{Ipv4Packet, UdpPacket};
        let pool = BufferPool::new(2048, 256);
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let frame = udp_super_frame(&pool, 10_000, 1472);
        let whole = frame.to_vec();
        let mut out = VecDeque::new();
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Ok(7));
        let mut payload = Vec::new();
        for (k, f) in out.iter().enumerate() {
            assert_eq!(f.offload(), Offload::NONE);
            let f = f.to_vec();
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert!(ip.verify_checksum(), "IP checksum of datagram {k}");
            assert_eq!(ip.ident(), 40 + k as u16);
            assert_eq!(usize::from(ip.total_len()), f.len() - 14);
            assert!(f.len() <= 1514);
            let udp = UdpPacket::new_checked(ip.payload()).unwrap();
            let want = if k == 6 { 10_000 - 6 * 1472 } else { 1472 };
            assert_eq!(usize::from(udp.len()), 8 + want, "UDP length of datagram {k}");
            assert!(udp.checksum() != 0 && udp.verify_checksum(src, dst), "UDP checksum of datagram {k}");
            assert_eq!((udp.src_port(), udp.dst_port()), (1000, 9));
            payload.extend_from_slice(udp.payload());
        }
        assert_eq!(payload, whole[42..]);
    }

    /// A UDP super-frame shorter than the MTU still stands for several
    /// datagrams: no device without the offload takes it whole.
    #[test]
    fn a_short_udp_super_frame_is_cut_too() {
        let pool = BufferPool::new(2048, 256);
        let frame = udp_super_frame(&pool, 1000, 400);
        assert!(!fits_device(
            &frame,
            1500,
            TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 }
        ));
        assert!(fits_device(&frame, 1500, TxOffloads { checksum: true, tcp_segmentation: 0, udp_segmentation: 65535 }));
        assert!(!crate::device::frame_fits(&frame, 1500, TxOffloads::NONE));
        let mut out = VecDeque::new();
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Ok(3));
        let lens: Vec<_> = out.iter().map(PacketBuf::len).collect();
        assert_eq!(lens, [42 + 400, 42 + 400, 42 + 200]);
    }

    #[test]
    fn bad_udp_super_frames_are_refused() {
        let pool = BufferPool::new(2048, 4096);
        let mut out = VecDeque::new();
        let cut = |f: PacketBuf, out: &mut VecDeque<PacketBuf>| complete(f, 1500, &pool, out, 1024);
        let with = |bytes: &[u8], offload: Offload| {
            let mut f = PacketBuf::from_slice(&pool, 0, bytes).unwrap();
            f.set_offload(offload);
            f
        };
        let good = udp_super_frame(&pool, 5000, 1472).to_vec();
        let uso = Offload::udp_segments(1472);
        for (what, frame) in [
            ("datagrams past the MTU", udp_super_frame(&pool, 5000, 1473)),
            ("segment size past the payload", udp_super_frame(&pool, 5000, 5001)),
            ("more datagrams than allowed", udp_super_frame(&pool, 5000, 8)),
            (
                "TCP under a UDP offload",
                with(
                    &{
                        let mut b = good.clone();
                        b[23] = PROTO_TCP;
                        b
                    },
                    uso,
                ),
            ),
            (
                "UDP length short of the packet",
                with(
                    &{
                        let mut b = good.clone();
                        b[38..40].copy_from_slice(&3000u16.to_be_bytes());
                        b
                    },
                    uso,
                ),
            ),
            (
                "UDP length past the packet",
                with(
                    &{
                        let mut b = good.clone();
                        b[38..40].copy_from_slice(&6000u16.to_be_bytes());
                        b
                    },
                    uso,
                ),
            ),
            (
                "IP length past the frame",
                with(
                    &{
                        let mut b = good.clone();
                        b[16..18].copy_from_slice(&u16::MAX.to_be_bytes());
                        b
                    },
                    uso,
                ),
            ),
            (
                "not IPv4",
                with(
                    &{
                        let mut b = good.clone();
                        b[13] = 0x06;
                        b
                    },
                    uso,
                ),
            ),
        ] {
            assert_eq!(cut(frame, &mut out), Err(Refused::Malformed), "{what}");
        }
        assert_eq!(complete(with(&good, uso), 1500, &pool, &mut out, 3), Err(Refused::NoRoom), "four datagrams");
        assert!(out.is_empty());
        assert_eq!(pool.in_use(), 0);
        assert_eq!(cut(with(&good, uso), &mut out), Ok(4));
    }

    const SRC6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const DST6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    /// Its transport checksum field at `at` given the IPv6 pseudo-header sum
    /// over `len` transport bytes: left partial, as an engine sends it.
    fn leave_partial(b: &mut [u8], protocol: u8, at: usize) {
        let len = (b.len() - 54) as u32;
        let pseudo = nagare_wire::pseudo_header_v6(SRC6.into(), DST6.into(), protocol, len);
        b[54 + at..54 + at + 2].copy_from_slice(&pseudo.folded().to_be_bytes());
    }

    /// An Ethernet frame with an IPv6 TCP segment (12 bytes of options,
    /// TCP `flags`) over `payload` bytes, built by etherparse, its checksum
    /// left partial.
    fn ipv6_tcp(payload: usize, flags: u8) -> Vec<u8> {
        let data: Vec<u8> = (0..payload).map(|i| (i % 251) as u8).collect();
        let mut b = Vec::new();
        etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv6(SRC6, DST6, 64)
            .tcp(1000, 80, 1000, 65535)
            .ack(77)
            .options_raw(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
            .unwrap()
            .write(&mut b, &data)
            .unwrap();
        b[54 + 13] = flags;
        leave_partial(&mut b, PROTO_TCP, 16);
        b
    }

    /// An Ethernet frame with an IPv6 UDP datagram over `payload` bytes,
    /// built by etherparse, its checksum left partial.
    fn ipv6_udp(payload: usize) -> Vec<u8> {
        let data: Vec<u8> = (0..payload).map(|i| (i % 253) as u8).collect();
        let mut b = Vec::new();
        etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv6(SRC6, DST6, 64)
            .udp(1000, 9)
            .write(&mut b, &data)
            .unwrap();
        leave_partial(&mut b, PROTO_UDP, 6);
        b
    }

    fn frame_with(pool: &BufferPool, bytes: &[u8], offload: Offload) -> PacketBuf {
        let mut f = PacketBuf::from_slice(pool, 0, bytes).unwrap();
        f.set_offload(offload);
        f
    }

    /// `f` read by etherparse: its IPv6 header (checked to span the frame,
    /// with no extension header), its transport header, its payload.
    fn read_ipv6(f: &[u8]) -> (etherparse::Ipv6Header, etherparse::TransportHeader, Vec<u8>) {
        let h = etherparse::PacketHeaders::from_ethernet_slice(f).expect("etherparse reads the frame");
        let Some(etherparse::NetHeaders::Ipv6(ip, exts)) = h.net else { panic!("not IPv6") };
        assert!(exts.is_empty());
        assert_eq!(usize::from(ip.payload_length), f.len() - 54, "IPv6 payload length");
        (ip, h.transport.expect("a transport header"), h.payload.slice().to_vec())
    }

    #[test]
    fn an_ipv6_super_segment_is_cut_into_mtu_segments() {
        let pool = BufferPool::new(2048, 256);
        let whole = ipv6_tcp(10_000, TCP_PSH | TCP_FIN | TCP_CWR | 0x10);
        let mut out = VecDeque::new();
        // 1500 less the IPv6 and TCP headers (40 + 32).
        let frame = frame_with(&pool, &whole, Offload::tcp_segments(1428));
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Ok(8));
        let mut payload = Vec::new();
        for (k, f) in out.iter().enumerate() {
            assert_eq!(f.offload(), Offload::NONE);
            let f = f.to_vec();
            assert!(f.len() <= 1514, "segment {k}: {} bytes", f.len());
            let (ip, transport, data) = read_ipv6(&f);
            let etherparse::TransportHeader::Tcp(tcp) = transport else { panic!("not TCP") };
            assert_eq!(data.len(), if k == 7 { 10_000 - 7 * 1428 } else { 1428 }, "segment {k}");
            assert_eq!(tcp.checksum, tcp.calc_checksum_ipv6(&ip, &data).unwrap(), "TCP checksum of segment {k}");
            assert_eq!(tcp.sequence_number, 1000 + (k * 1428) as u32);
            assert_eq!((tcp.fin, tcp.psh), (k == 7, k == 7), "FIN and PSH only on the last");
            assert_eq!(tcp.cwr, k == 0, "CWR only on the first");
            assert!(tcp.ack && tcp.acknowledgment_number == 77);
            assert!(f[..18] == whole[..18] && f[20..54] == whole[20..54], "headers but the length as they were");
            payload.extend_from_slice(&data);
        }
        assert_eq!(payload, whole[86..]);
        // One byte more per segment is past the MTU with IPv6's header.
        out.clear();
        let frame = frame_with(&pool, &whole, Offload::tcp_segments(1429));
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Err(Refused::Malformed));
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn partial_ipv6_tcp_and_udp_checksums_are_completed() {
        let pool = BufferPool::new(2048, 256);
        let partial = Offload::checksum(ChecksumState::Partial);
        let mut out = VecDeque::new();
        for bytes in [ipv6_tcp(1001, 0x18), ipv6_udp(1001), ipv6_udp(0)] {
            assert_eq!(complete(frame_with(&pool, &bytes, partial), 1500, &pool, &mut out, 1024), Ok(1));
            let f = out.pop_front().unwrap();
            assert_eq!(f.offload(), Offload::NONE);
            let f = f.to_vec();
            assert_eq!(f.len(), bytes.len());
            let (ip, transport, data) = read_ipv6(&f);
            match transport {
                etherparse::TransportHeader::Tcp(t) => {
                    assert_eq!(t.checksum, t.calc_checksum_ipv6(&ip, &data).unwrap())
                }
                etherparse::TransportHeader::Udp(u) => {
                    assert_ne!(u.checksum, 0, "a UDP checksum over IPv6 is never left out");
                    assert_eq!(u.checksum, u.calc_checksum_ipv6(&ip, &data).unwrap());
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn an_ipv6_udp_super_frame_is_cut_into_its_datagrams() {
        let pool = BufferPool::new(2048, 256);
        let whole = ipv6_udp(10_000);
        let mut out = VecDeque::new();
        // 1500 less the IPv6 and UDP headers (40 + 8).
        let frame = frame_with(&pool, &whole, Offload::udp_segments(1452));
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Ok(7));
        let mut payload = Vec::new();
        for (k, f) in out.iter().enumerate() {
            assert_eq!(f.offload(), Offload::NONE);
            let f = f.to_vec();
            assert!(f.len() <= 1514);
            let (ip, transport, data) = read_ipv6(&f);
            let etherparse::TransportHeader::Udp(udp) = transport else { panic!("not UDP") };
            let want = if k == 6 { 10_000 - 6 * 1452 } else { 1452 };
            assert_eq!((data.len(), usize::from(udp.length)), (want, 8 + want), "datagram {k}");
            assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&ip, &data).unwrap(), "UDP checksum of datagram {k}");
            assert_eq!((udp.source_port, udp.destination_port), (1000, 9));
            payload.extend_from_slice(&data);
        }
        assert_eq!(payload, whole[62..]);
        let frame = frame_with(&pool, &whole, Offload::udp_segments(1453));
        assert_eq!(complete(frame, 1500, &pool, &mut out, 1024), Err(Refused::Malformed), "past the MTU");
    }

    /// With an extension header between the IPv6 header and the transport
    /// header there is nothing to complete or cut, as with an IPv4
    /// fragment; without it, the same packet is completed and cut.
    #[test]
    fn ipv6_extension_headers_and_bad_lengths_are_refused() {
        let pool = BufferPool::new(2048, 256);
        let partial = Offload::checksum(ChecksumState::Partial);
        let with_ext = |plain: &[u8], kind: u8, mut ext: [u8; 8]| {
            let mut b = plain.to_vec();
            ext[0] = b[20];
            b.splice(54..54, ext);
            let len = u16::from_be_bytes([b[18], b[19]]) + 8;
            b[18..20].copy_from_slice(&len.to_be_bytes());
            b[20] = kind;
            b
        };
        let with_len = |plain: &[u8], len: u16| {
            let mut b = plain.to_vec();
            b[18..20].copy_from_slice(&len.to_be_bytes());
            b
        };
        let tcp = ipv6_tcp(5000, 0x10);
        let udp = ipv6_udp(5000);
        let mut out = VecDeque::new();
        for (plain, cut) in [(&tcp, Offload::tcp_segments(1428)), (&udp, Offload::udp_segments(1452))] {
            assert_eq!(complete(frame_with(&pool, plain, partial), 9000, &pool, &mut out, 1024), Ok(1));
            assert_eq!(complete(frame_with(&pool, plain, cut), 1500, &pool, &mut out, 1024), Ok(4));
            out.clear();
            for (what, bytes) in [
                ("hop-by-hop options", with_ext(plain, 0, [0, 0, 1, 4, 0, 0, 0, 0])),
                ("an atomic fragment", with_ext(plain, 44, [0, 0, 0, 0, 0, 0, 0, 7])),
                ("destination options", with_ext(plain, 60, [0, 0, 1, 4, 0, 0, 0, 0])),
                ("a payload length past the frame", with_len(plain, (plain.len() - 53) as u16)),
                ("a transport length past the payload length", with_len(plain, 7)),
            ] {
                let f = frame_with(&pool, &bytes, partial);
                assert_eq!(complete(f, 9000, &pool, &mut out, 1024), Err(Refused::Uncompletable), "{what}");
                assert_eq!(
                    complete(frame_with(&pool, &bytes, cut), 1500, &pool, &mut out, 1024),
                    Err(Refused::Malformed),
                    "{what}"
                );
                // With its checksum complete the frame goes as it is.
                assert_eq!(complete(frame_with(&pool, &bytes, Offload::NONE), 9000, &pool, &mut out, 1024), Ok(1));
                assert!(out.pop_front().unwrap().to_vec() == bytes, "{what}: sent as it is");
            }
        }
        assert!(out.is_empty());
        assert_eq!(pool.in_use(), 0);
    }
}
