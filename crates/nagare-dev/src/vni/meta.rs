//! The offload word of a slot: what a NIC descriptor (or virtio-net's
//! header) says about a frame, carried between two ports of a segment so
//! that neither end sums or cuts what the other can take whole.
//!
//! ```text
//! bits  0..16  segment size (u16): non-zero on a super-frame, the payload
//!              bytes of each MTU-sized segment or datagram it stands for
//! bits 16..18  transport checksum: 0 complete, 1 partial (the field holds
//!              the pseudo-header sum only), 2 verified
//! bit  18      set on a UDP super-frame (its pieces are UDP datagrams,
//!              as `SKB_GSO_UDP_L4`), clear on a TCP super-segment; only
//!              with a segment size
//! bits 19..32  zero
//! ```
//!
//! The word is written by the sender and read from shared memory, so it is
//! hostile: [`decode`] accepts it only if it fits the frame it comes with.
//! The sender applies the same rule to the word it writes
//! ([`checked_encode`]), so that a frame whose offload does not fit is
//! refused where it is sent, not dropped unexplained on the far side.

use nagare_core::buf::{ChecksumState, Offload, Segmentation};

use super::layout::Geometry;

const CHECKSUM_SHIFT: u32 = 16;
const CHECKSUM_PARTIAL: u32 = 1;
const CHECKSUM_VERIFIED: u32 = 2;
const CHECKSUM_MASK: u32 = 3;
const UDP_SEGMENTS: u32 = 1 << 18;
/// Bits that must be clear.
const RESERVED: u32 = !0u32 << 19;
/// The shortest IP and TCP headers (IPv4's and TCP's without options): a
/// segment's payload is at most the MTU less these. IPv6's longer header
/// makes the bound tighter, which the cut itself checks
/// ([`crate::software_offload`]), as it does every header's real length.
const MIN_IP_TCP_HEADERS: usize = 40;
/// The shortest IP (IPv4 without options) and UDP headers: a datagram's
/// payload is at most the MTU less these.
const IP_UDP_HEADERS: usize = 28;

/// The word for a frame with `offload`.
pub fn encode(offload: Offload) -> u32 {
    let checksum = match offload.checksum {
        ChecksumState::Complete => 0,
        ChecksumState::Partial => CHECKSUM_PARTIAL,
        ChecksumState::Verified => CHECKSUM_VERIFIED,
    };
    let udp = if offload.is_udp_segmented() { UDP_SEGMENTS } else { 0 };
    u32::from(offload.segment_size) | checksum << CHECKSUM_SHIFT | udp
}

/// The word for a frame of `len` bytes with `offload`, if [`decode`]
/// accepts it for that frame: what a sending port writes into a slot.
pub fn checked_encode(offload: Offload, len: usize, geo: &Geometry) -> Result<u32, BadMetadata> {
    let word = encode(offload);
    decode(word, len, geo).map(|_| word)
}

/// Why a slot's offload word was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadMetadata;

/// The offload of a frame of `len` bytes (Ethernet header included) whose
/// slot holds `word`, if the two agree: no reserved bit set, a known
/// checksum state, and a frame longer than one slot only as a super-frame
/// (segment size set, a checksum the receiver need not verify, segments or
/// datagrams that fit the MTU); the UDP bit only with a segment size. The
/// frame's bytes are not looked at: the engine (or
/// the bridge's segmentation) validates them like any frame from a wire.
pub fn decode(word: u32, len: usize, geo: &Geometry) -> Result<Offload, BadMetadata> {
    if word & RESERVED != 0 {
        return Err(BadMetadata);
    }
    let checksum = match word >> CHECKSUM_SHIFT & CHECKSUM_MASK {
        0 => ChecksumState::Complete,
        CHECKSUM_PARTIAL => ChecksumState::Partial,
        CHECKSUM_VERIFIED => ChecksumState::Verified,
        _ => return Err(BadMetadata),
    };
    let segment_size = word as u16;
    let (segmentation, headers) = if word & UDP_SEGMENTS != 0 {
        (Segmentation::Udp, IP_UDP_HEADERS)
    } else {
        (Segmentation::Tcp, MIN_IP_TCP_HEADERS)
    };
    if segmentation == Segmentation::Udp && segment_size == 0 {
        return Err(BadMetadata);
    }
    if segment_size != 0 && (checksum == ChecksumState::Complete || usize::from(segment_size) + headers > geo.mtu) {
        return Err(BadMetadata);
    }
    if len > geo.max_frame() && (segment_size == 0 || len > geo.max_super_frame()) {
        return Err(BadMetadata);
    }
    Ok(Offload { checksum, segment_size, segmentation })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let geo = Geometry::new(2, 1500, 256).unwrap();
        for offload in [
            Offload::NONE,
            Offload::checksum(ChecksumState::Partial),
            Offload::checksum(ChecksumState::Verified),
            Offload::tcp_segments(1448),
            Offload::udp_segments(1472),
            Offload { checksum: ChecksumState::Verified, ..Offload::udp_segments(1) },
        ] {
            assert_eq!(decode(encode(offload), 1514, &geo), Ok(offload));
        }
        let tso = Offload::tcp_segments(1460);
        assert_eq!(decode(encode(tso), 14 + 65535, &geo), Ok(tso));
        let uso = Offload::udp_segments(1472);
        assert_eq!(decode(encode(uso), 14 + 65535, &geo), Ok(uso));
        assert_ne!(encode(uso), encode(Offload::tcp_segments(1472)), "UDP and TCP super-frames differ");
    }

    #[test]
    fn words_that_do_not_fit_the_frame_are_refused() {
        let geo = Geometry::new(2, 1500, 256).unwrap();
        let partial = encode(Offload::checksum(ChecksumState::Partial));
        assert_eq!(decode(1 << 19, 100, &geo), Err(BadMetadata), "reserved bit");
        assert_eq!(decode(1 << 31, 100, &geo), Err(BadMetadata), "reserved bit");
        assert_eq!(decode(partial | UDP_SEGMENTS, 100, &geo), Err(BadMetadata), "UDP without a segment size");
        assert_eq!(decode(UDP_SEGMENTS | 1472, 100, &geo), Err(BadMetadata), "UDP with a complete checksum");
        assert_eq!(decode(partial | UDP_SEGMENTS | 1473, 3000, &geo), Err(BadMetadata), "datagrams past the MTU");
        assert_eq!(decode(partial | UDP_SEGMENTS, 3000, &geo), Err(BadMetadata), "over the MTU, no segment size");
        assert_eq!(decode(partial | UDP_SEGMENTS | 1472, 14 + 65536, &geo), Err(BadMetadata), "past an IP packet");
        assert_eq!(decode(3 << 16, 100, &geo), Err(BadMetadata), "no such checksum state");
        assert_eq!(decode(1448, 100, &geo), Err(BadMetadata), "segments with a complete checksum");
        assert_eq!(decode(partial | 1461, 3000, &geo), Err(BadMetadata), "segments past the MTU");
        assert_eq!(decode(partial, 1515, &geo), Err(BadMetadata), "over the MTU, not a super-segment");
        assert_eq!(decode(partial | 1448, 14 + 65536, &geo), Err(BadMetadata), "past an IP packet");
        let small = Geometry::new(2, 1500, 8).unwrap();
        assert_eq!(decode(partial | 1448, small.max_super_frame() + 1, &small), Err(BadMetadata), "past the ring");
    }

    /// Strictness over every word without reserved bits, at a frame of
    /// one slot and a super-frame's length: what `decode` accepts is what
    /// `encode` makes of the result, so no two words mean one offload, and
    /// a super-frame's segments always fit the MTU.
    #[test]
    fn every_word_decode_accepts_is_one_encode_makes() {
        let geo = Geometry::new(2, 1500, 256).unwrap();
        for word in 0..1u32 << 19 {
            for len in [100, 14 + 30_000] {
                let Ok(offload) = decode(word, len, &geo) else { continue };
                assert_eq!(encode(offload), word, "{word:#x}");
                let headers = if offload.is_udp_segmented() { IP_UDP_HEADERS } else { MIN_IP_TCP_HEADERS };
                assert!(offload.segment_size == 0 || usize::from(offload.segment_size) + headers <= geo.mtu);
                assert!(len <= geo.max_frame() || offload.segment_size != 0);
            }
        }
        for bit in 19..32 {
            assert_eq!(decode(1 << bit | 1 << 16 | 1448, 100, &geo), Err(BadMetadata), "bit {bit}");
        }
    }
}
