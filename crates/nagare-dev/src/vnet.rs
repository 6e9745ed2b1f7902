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

use nagare_wire::ETHERNET_HEADER_LEN;

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

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
/// Where the checksum field sits inside the TCP and UDP headers.
const TCP_CHECKSUM_OFFSET: u16 = 16;
const UDP_CHECKSUM_OFFSET: u16 = 6;

/// Bytes of a frame the header is computed from: Ethernet, the longest IPv4
/// header and the TCP header's fixed part.
const PARSED_PREFIX: usize = ETHERNET_HEADER_LEN + 60 + 20;

/// The header for a frame the engine hands to the device, from the frame's
/// offload metadata. A frame whose metadata asks for nothing, or whose
/// headers cannot be read, gets an all-zero header: the kernel then checks
/// it as it is.
pub fn header_for(frame: &PacketBuf) -> [u8; VNET_HDR_LEN] {
    let mut hdr = [0u8; VNET_HDR_LEN];
    let offload = frame.offload();
    if offload.checksum != ChecksumState::Partial {
        return hdr;
    }
    let mut prefix = [0u8; PARSED_PREFIX];
    let got = frame.copy_out(0, &mut prefix);
    let Some(l4) = transport_start(&prefix[..got]) else {
        return hdr;
    };
    let (protocol, l4_start) = l4;
    let checksum_offset = match protocol {
        PROTO_TCP => TCP_CHECKSUM_OFFSET,
        PROTO_UDP => UDP_CHECKSUM_OFFSET,
        _ => return hdr,
    };
    let Ok(csum_start) = u16::try_from(l4_start) else {
        return hdr;
    };
    let mut gso_type = GSO_NONE;
    let mut hdr_len = 0u16;
    let mut gso_size = 0u16;
    if offload.segment_size != 0 && offload.segmentation == Segmentation::Tcp && protocol == PROTO_TCP {
        let Some(&offset_byte) = prefix.get(l4_start + 12) else {
            return hdr;
        };
        let tcp_header_len = usize::from(offset_byte >> 4) * 4;
        let Ok(headers) = u16::try_from(l4_start + tcp_header_len) else {
            return hdr;
        };
        gso_type = GSO_TCPV4;
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

/// What the kernel's header says about a received frame. The kernel is
/// the one writer of this header and hands over only frames it built, so
/// its promises are taken; a super-segment stays whole (the engine takes
/// TCP segments of any length).
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

/// The transport protocol and the offset of its header in an Ethernet
/// frame carrying IPv4, if the frame is one and is not a fragment.
fn transport_start(frame: &[u8]) -> Option<(u8, usize)> {
    if frame.get(12..14)? != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = frame.get(ETHERNET_HEADER_LEN..)?;
    let version_ihl = *ip.first()?;
    if version_ihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(version_ihl & 0x0f) * 4;
    let flags_fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
    if ihl < 20 || flags_fragment & 0x3fff != 0 {
        return None;
    }
    Some((*ip.get(9)?, ETHERNET_HEADER_LEN + ihl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::buf::BufferPool;

    /// Ethernet + IPv4 (no options) + TCP with 12 bytes of options.
    fn tcp_frame(pool: &BufferPool, payload: usize) -> PacketBuf {
        let mut bytes = vec![0u8; 14 + 20 + 32 + payload];
        bytes[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        bytes[14] = 0x45;
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

    #[test]
    fn received_flags_map_to_checksum_states() {
        let mut hdr = [0u8; VNET_HDR_LEN];
        assert_eq!(offload_of(&hdr).checksum, ChecksumState::Complete);
        hdr[0] = F_DATA_VALID;
        assert_eq!(offload_of(&hdr).checksum, ChecksumState::Verified);
        hdr[0] = F_NEEDS_CSUM;
        hdr[1] = GSO_TCPV4;
        assert_eq!(offload_of(&hdr), Offload::checksum(ChecksumState::Partial));
    }
}
