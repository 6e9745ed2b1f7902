//! The offload word of a slot: what a NIC descriptor (or virtio-net's
//! header) says about a frame, carried between two ports of a segment so
//! that neither end sums or cuts what the other can take whole.
//!
//! ```text
//! bits  0..16  segment size (u16): non-zero on a TCP super-segment, the
//!              payload bytes of each MTU-sized segment it stands for
//! bits 16..18  transport checksum: 0 complete, 1 partial (the field holds
//!              the pseudo-header sum only), 2 verified
//! bits 18..32  zero
//! ```
//!
//! The word is written by the sender and read from shared memory, so it is
//! hostile: [`decode`] accepts it only if it fits the frame it comes with.

use nagare_core::buf::{ChecksumState, Offload};

use super::layout::Geometry;

const CHECKSUM_SHIFT: u32 = 16;
const CHECKSUM_PARTIAL: u32 = 1;
const CHECKSUM_VERIFIED: u32 = 2;
/// Bits that must be clear.
const RESERVED: u32 = !0u32 << 18;
/// IPv4 and TCP headers without options: a segment's payload is at most
/// the MTU less these.
const MIN_IP_TCP_HEADERS: usize = 40;

/// The word for a frame with `offload`.
pub fn encode(offload: Offload) -> u32 {
    let checksum = match offload.checksum {
        ChecksumState::Complete => 0,
        ChecksumState::Partial => CHECKSUM_PARTIAL,
        ChecksumState::Verified => CHECKSUM_VERIFIED,
    };
    u32::from(offload.segment_size) | checksum << CHECKSUM_SHIFT
}

/// Why a slot's offload word was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadMetadata;

/// The offload of a frame of `len` bytes (Ethernet header included) whose
/// slot holds `word`, if the two agree: no reserved bit set, a known
/// checksum state, and a frame longer than one slot only as a super-segment
/// (segment size set, a checksum the receiver need not verify, segments
/// that fit the MTU). The frame's bytes are not looked at: the engine (or
/// the bridge's segmentation) validates them like any frame from a wire.
pub fn decode(word: u32, len: usize, geo: &Geometry) -> Result<Offload, BadMetadata> {
    if word & RESERVED != 0 {
        return Err(BadMetadata);
    }
    let checksum = match word >> CHECKSUM_SHIFT {
        0 => ChecksumState::Complete,
        CHECKSUM_PARTIAL => ChecksumState::Partial,
        CHECKSUM_VERIFIED => ChecksumState::Verified,
        _ => return Err(BadMetadata),
    };
    let segment_size = word as u16;
    if segment_size != 0
        && (checksum == ChecksumState::Complete || usize::from(segment_size) + MIN_IP_TCP_HEADERS > geo.mtu)
    {
        return Err(BadMetadata);
    }
    if len > geo.max_frame() && (segment_size == 0 || len > geo.max_super_frame()) {
        return Err(BadMetadata);
    }
    Ok(Offload { checksum, segment_size })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let geo = Geometry::new(2, 1500, 256).unwrap();
        for offload in [
            Offload::NONE,
            Offload { checksum: ChecksumState::Partial, segment_size: 0 },
            Offload { checksum: ChecksumState::Verified, segment_size: 0 },
            Offload { checksum: ChecksumState::Partial, segment_size: 1448 },
        ] {
            assert_eq!(decode(encode(offload), 1514, &geo), Ok(offload));
        }
        let tso = Offload { checksum: ChecksumState::Partial, segment_size: 1460 };
        assert_eq!(decode(encode(tso), 14 + 65535, &geo), Ok(tso));
    }

    #[test]
    fn words_that_do_not_fit_the_frame_are_refused() {
        let geo = Geometry::new(2, 1500, 256).unwrap();
        let partial = encode(Offload { checksum: ChecksumState::Partial, segment_size: 0 });
        assert_eq!(decode(1 << 18, 100, &geo), Err(BadMetadata), "reserved bit");
        assert_eq!(decode(3 << 16, 100, &geo), Err(BadMetadata), "no such checksum state");
        assert_eq!(decode(1448, 100, &geo), Err(BadMetadata), "segments with a complete checksum");
        assert_eq!(decode(partial | 1461, 3000, &geo), Err(BadMetadata), "segments past the MTU");
        assert_eq!(decode(partial, 1515, &geo), Err(BadMetadata), "over the MTU, not a super-segment");
        assert_eq!(decode(partial | 1448, 14 + 65536, &geo), Err(BadMetadata), "past an IP packet");
        let small = Geometry::new(2, 1500, 8).unwrap();
        assert_eq!(decode(partial | 1448, small.max_super_frame() + 1, &small), Err(BadMetadata), "past the ring");
    }
}
