//! The `virtio_net_hdr` a TAP opened with `IFF_VNET_HDR` puts in front of
//! every frame, both ways (linux/virtio_net.h, the legacy 10-byte form
//! without `num_buffers`). It carries what a NIC descriptor would: whether
//! the transport checksum still has to be completed and where, and how to
//! cut a TCP super-segment.
//!
//! Multi-byte fields are in the host's byte order: a TAP speaks legacy
//! virtio unless told otherwise (`TUNSETVNETLE`), and legacy virtio is
//! native-endian.

use nagare_core::buf::{ChecksumState, Offload, PacketBuf, Segmentation};

use crate::ip_headers::{Family, IpHeaders, IP_PREFIX_LEN, PROTO_TCP, PROTO_UDP};

/// Length of the header.
pub const VNET_HDR_LEN: usize = 10;

/// The checksum from `csum_start` to the end must be completed and stored
/// at `csum_start + csum_offset`.
const F_NEEDS_CSUM: u8 = 1;
/// The checksum was verified (receive only).
const F_DATA_VALID: u8 = 2;
/// `gso_type`: not a super-segment.
const GSO_NONE: u8 = 0;
/// `gso_type`: an IPv4 TCP super-segment.
const GSO_TCPV4: u8 = 1;
/// `gso_type`: an IPv6 TCP super-segment.
const GSO_TCPV6: u8 = 4;

/// Where the checksum field sits inside the TCP and UDP headers.
const TCP_CHECKSUM_OFFSET: u16 = 16;
const UDP_CHECKSUM_OFFSET: u16 = 6;

/// Bytes of a frame the header is computed from: Ethernet, the longest IP
/// header and the TCP header's fixed part.
const PARSED_PREFIX: usize = IP_PREFIX_LEN + 20;

/// The header for a frame the engine hands to the device, from the frame's
/// offload metadata: for a TCP or UDP packet over IPv4 or IPv6, where its
/// checksum is to be completed, and for a TCP super-segment how to cut it
/// (`GSO_TCPV4` or `GSO_TCPV6`; UDP super-frames are not announced, as the
/// TAP is not asked to cut them). A frame whose metadata asks for nothing,
/// or whose headers cannot be read (an IPv4 fragment, an IPv6 packet with
/// extension headers before its transport header, lengths past the frame),
/// gets an all-zero header: the kernel then checks it as it is.
pub fn header_for(frame: &PacketBuf) -> [u8; VNET_HDR_LEN] {
    let mut hdr = [0u8; VNET_HDR_LEN];
    let offload = frame.offload();
    if offload.checksum != ChecksumState::Partial {
        return hdr;
    }
    let mut prefix = [0u8; PARSED_PREFIX];
    let got = frame.copy_out(0, &mut prefix);
    let Some(ip) = IpHeaders::parse(&prefix[..got], frame.len()) else {
        return hdr;
    };
    let checksum_offset = match ip.protocol {
        PROTO_TCP => TCP_CHECKSUM_OFFSET,
        PROTO_UDP => UDP_CHECKSUM_OFFSET,
        _ => return hdr,
    };
    let Ok(csum_start) = u16::try_from(ip.l4_start) else {
        return hdr;
    };
    let mut gso_type = GSO_NONE;
    let mut hdr_len = 0u16;
    let mut gso_size = 0u16;
    if offload.segment_size != 0 && offload.segmentation == Segmentation::Tcp && ip.protocol == PROTO_TCP {
        let Some(&offset_byte) = prefix[..got].get(ip.l4_start + 12) else {
            return hdr;
        };
        let tcp_header_len = usize::from(offset_byte >> 4) * 4;
        let Ok(headers) = u16::try_from(ip.l4_start + tcp_header_len) else {
            return hdr;
        };
        gso_type = match ip.family {
            Family::V4 { .. } => GSO_TCPV4,
            Family::V6 { .. } => GSO_TCPV6,
        };
        hdr_len = headers;
        gso_size = offload.segment_size;
    }
    hdr[0] = F_NEEDS_CSUM;
    hdr[1] = gso_type;
    hdr[2..4].copy_from_slice(&hdr_len.to_ne_bytes());
    hdr[4..6].copy_from_slice(&gso_size.to_ne_bytes());
    hdr[6..8].copy_from_slice(&csum_start.to_ne_bytes());
    hdr[8..10].copy_from_slice(&checksum_offset.to_ne_bytes());
    hdr
}

/// What the kernel's header says about a received frame, of either IP
/// family. The kernel is the one writer of this header and hands over
/// only frames it built, so its promises are taken; a super-segment
/// (`GSO_TCPV4` or `GSO_TCPV6`) stays whole (the engine takes TCP
/// segments of any length).
pub fn offload_of(hdr: &[u8; VNET_HDR_LEN]) -> Offload {
    let flags = hdr[0];
    let checksum = if flags & F_NEEDS_CSUM != 0 {
        ChecksumState::Partial
    } else if flags & F_DATA_VALID != 0 {
        ChecksumState::Verified
    } else {
        ChecksumState::Complete
    };
    Offload::checksum(checksum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::buf::BufferPool;

    /// Ethernet + IPv4 (no options) + TCP with 12 bytes of options.
    fn tcp_frame(pool: &BufferPool, payload: usize) -> PacketBuf {
        let mut bytes = vec![0u8; 14 + 20 + 32 + payload];
        bytes[12..14].copy_from_slice(&[0x08, 0x00]);
        bytes[14] = 0x45;
        bytes[16..18].copy_from_slice(&((20 + 32 + payload) as u16).to_be_bytes());
        bytes[14 + 6] = 0x40; // DF
        bytes[14 + 9] = PROTO_TCP;
        bytes[34 + 12] = 8 << 4;
        PacketBuf::from_slice(pool, 0, &bytes).unwrap()
    }

    fn field(hdr: &[u8], at: usize) -> u16 {
        u16::from_ne_bytes([hdr[at], hdr[at + 1]])
    }

    #[test]
    fn complete_frames_get_an_empty_header() {
        let pool = BufferPool::new(2048, 64);
        assert_eq!(header_for(&tcp_frame(&pool, 100)), [0; VNET_HDR_LEN]);
    }

    #[test]
    fn partial_checksum_points_at_the_tcp_checksum() {
        let pool = BufferPool::new(2048, 64);
        let mut frame = tcp_frame(&pool, 100);
        frame.set_offload(Offload::checksum(ChecksumState::Partial));
        let hdr = header_for(&frame);
        assert_eq!(hdr[0], F_NEEDS_CSUM);
        assert_eq!(hdr[1], GSO_NONE);
        assert_eq!(field(&hdr, 6), 34);
        assert_eq!(field(&hdr, 8), 16);
    }

    #[test]
    fn super_segment_carries_size_and_header_length() {
        let pool = BufferPool::new(2048, 64);
        let mut frame = tcp_frame(&pool, 20_000);
        frame.set_offload(Offload::tcp_segments(1448));
        let hdr = header_for(&frame);
        assert_eq!(hdr[1], GSO_TCPV4);
        assert_eq!(field(&hdr, 2), 14 + 20 + 32);
        assert_eq!(field(&hdr, 4), 1448);
    }

    /// The TAP is never asked for UDP segmentation: a frame whose offload
    /// says UDP super-frame is not announced as a TCP one.
    #[test]
    fn udp_segmentation_is_not_announced_as_tcp() {
        let pool = BufferPool::new(2048, 64);
        let mut frame = tcp_frame(&pool, 20_000);
        frame.set_offload(Offload::udp_segments(1448));
        let hdr = header_for(&frame);
        assert_eq!(hdr[1], GSO_NONE);
        assert_eq!(field(&hdr, 4), 0);
    }

    #[test]
    fn fragments_and_other_protocols_are_left_to_the_kernel() {
        let pool = BufferPool::new(2048, 64);
        let mut bytes = tcp_frame(&pool, 10).to_vec();
        bytes[14 + 6] = 0x20; // more fragments
        let mut frame = PacketBuf::from_slice(&pool, 0, &bytes).unwrap();
        frame.set_offload(Offload::checksum(ChecksumState::Partial));
        assert_eq!(header_for(&frame), [0; VNET_HDR_LEN]);
        let mut short = PacketBuf::from_slice(&pool, 0, &bytes[..20]).unwrap();
        short.set_offload(frame.offload());
        assert_eq!(header_for(&short), [0; VNET_HDR_LEN]);
    }

    /// Ethernet + IPv6 + a TCP header with 12 bytes of options (or a UDP
    /// header) + `payload` bytes.
    fn ipv6_frame(protocol: u8, payload: usize) -> Vec<u8> {
        let l4 = if protocol == PROTO_TCP { 32 } else { 8 };
        let mut b = vec![0u8; 14 + 40 + l4 + payload];
        b[12..14].copy_from_slice(&[0x86, 0xdd]);
        b[14] = 0x60;
        b[18..20].copy_from_slice(&((l4 + payload) as u16).to_be_bytes());
        b[20] = protocol;
        b[21] = 64;
        b[22] = 0xfd;
        b[38] = 0xfd;
        if protocol == PROTO_TCP {
            b[54 + 12] = 8 << 4;
        }
        b
    }

    fn with_offload(pool: &BufferPool, bytes: &[u8], offload: Offload) -> PacketBuf {
        let mut frame = PacketBuf::from_slice(pool, 0, bytes).unwrap();
        frame.set_offload(offload);
        frame
    }

    #[test]
    fn ipv6_partial_checksums_point_at_the_transport_checksum() {
        let pool = BufferPool::new(2048, 64);
        let partial = Offload::checksum(ChecksumState::Partial);
        for (protocol, offset) in [(PROTO_TCP, 16), (PROTO_UDP, 6)] {
            let hdr = header_for(&with_offload(&pool, &ipv6_frame(protocol, 100), partial));
            assert_eq!(hdr[0], F_NEEDS_CSUM, "protocol {protocol}");
            assert_eq!(hdr[1], GSO_NONE);
            assert_eq!(field(&hdr, 6), 14 + 40, "csum_start, protocol {protocol}");
            assert_eq!(field(&hdr, 8), offset, "csum_offset, protocol {protocol}");
        }
        // Complete, it asks for nothing.
        assert_eq!(header_for(&with_offload(&pool, &ipv6_frame(PROTO_TCP, 100), Offload::NONE)), [0; VNET_HDR_LEN]);
    }

    #[test]
    fn an_ipv6_super_segment_is_announced_as_tcpv6() {
        let pool = BufferPool::new(2048, 64);
        let hdr = header_for(&with_offload(&pool, &ipv6_frame(PROTO_TCP, 20_000), Offload::tcp_segments(1428)));
        assert_eq!(hdr[0], F_NEEDS_CSUM);
        assert_eq!(hdr[1], GSO_TCPV6);
        assert_eq!(field(&hdr, 2), 14 + 40 + 32, "hdr_len");
        assert_eq!(field(&hdr, 4), 1428, "gso_size");
        assert_eq!((field(&hdr, 6), field(&hdr, 8)), (54, 16));
        // A UDP super-frame is not announced, as over IPv4.
        let hdr = header_for(&with_offload(&pool, &ipv6_frame(PROTO_UDP, 20_000), Offload::udp_segments(1452)));
        assert_eq!((hdr[1], field(&hdr, 4)), (GSO_NONE, 0));
    }

    /// An extension header between the IPv6 header and TCP, or a payload
    /// length past the frame, is left to the kernel as an IPv4 fragment
    /// is, while the same segment without them is offloaded.
    #[test]
    fn ipv6_extension_headers_and_lengths_past_the_frame_are_left_to_the_kernel() {
        let pool = BufferPool::new(2048, 64);
        let plain = ipv6_frame(PROTO_TCP, 100);
        let mut long = plain.clone();
        long[18..20].copy_from_slice(&1000u16.to_be_bytes());
        // Hop-by-hop options (PadN) or an atomic fragment header, then TCP.
        let with_ext = |kind: u8, ext: [u8; 8]| {
            let mut b = plain.clone();
            b.splice(54..54, ext);
            b[18..20].copy_from_slice(&(32 + 100 + 8u16).to_be_bytes());
            b[20] = kind;
            b
        };
        let hop_by_hop = with_ext(0, [PROTO_TCP, 0, 1, 4, 0, 0, 0, 0]);
        let fragment = with_ext(44, [PROTO_TCP, 0, 0, 0, 0, 0, 0, 7]);
        for offload in [Offload::checksum(ChecksumState::Partial), Offload::tcp_segments(1428)] {
            assert_ne!(header_for(&with_offload(&pool, &plain, offload)), [0; VNET_HDR_LEN], "{offload:?}");
            for (what, bytes) in [("hop-by-hop", &hop_by_hop), ("fragment", &fragment), ("length", &long)] {
                assert_eq!(header_for(&with_offload(&pool, bytes, offload)), [0; VNET_HDR_LEN], "{what}, {offload:?}");
            }
        }
    }

    /// An IPv4 total length past the frame: its headers cannot be trusted.
    #[test]
    fn an_ipv4_length_past_the_frame_is_left_to_the_kernel() {
        let pool = BufferPool::new(2048, 64);
        let mut bytes = tcp_frame(&pool, 100).to_vec();
        bytes[16..18].copy_from_slice(&(20 + 32 + 100u16).to_be_bytes());
        let partial = Offload::checksum(ChecksumState::Partial);
        assert_ne!(header_for(&with_offload(&pool, &bytes, partial)), [0; VNET_HDR_LEN]);
        bytes[16..18].copy_from_slice(&(20 + 32 + 101u16).to_be_bytes());
        assert_eq!(header_for(&with_offload(&pool, &bytes, partial)), [0; VNET_HDR_LEN]);
    }

    #[test]
    fn received_flags_map_to_checksum_states() {
        let mut hdr = [0u8; VNET_HDR_LEN];
        assert_eq!(offload_of(&hdr).checksum, ChecksumState::Complete);
        hdr[0] = F_DATA_VALID;
        assert_eq!(offload_of(&hdr).checksum, ChecksumState::Verified);
        hdr[0] = F_NEEDS_CSUM;
        for gso_type in [GSO_TCPV4, GSO_TCPV6] {
            hdr[1] = gso_type;
            assert_eq!(offload_of(&hdr), Offload::checksum(ChecksumState::Partial));
        }
    }
}
