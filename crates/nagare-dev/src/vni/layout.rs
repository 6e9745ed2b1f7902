//! The segment's layout: where the header, the port records and the rings
//! lie, computed from four numbers and checked before anything is mapped.
//!
//! ```text
//! 0      header (128 B): magic, version, ports, mtu, slot size, slot count,
//!        ring offset, ring stride, total size
//! 128    port records, 128 B each (two cache lines):
//!          +0  owner   u64  state (high 32 bits) | pid (low 32 bits)
//!          +8  gen     u32  attach generation, bumped by every attach
//!          +12 bell    u32  the owner's eventfd number (in its fd table)
//!          +16 mac     u64  the port's MAC in the low 48 bits
//!          +64 polling u32  non-zero while the owner polls: do not ring
//! R      rings, one per ordered pair (i -> j), i != j, at
//!        R + (i * (n - 1) + (j < i ? j : j - 1)) * stride, laid out as
//!        every ring of `nagare_ipc::spsc`:
//!          +0   head u32 (written by i, the producer)
//!          +64  tail u32 (written by j, the consumer)
//!          +128 slots: [len u32][offload u32][frame ...] x slot count
//! ```
//!
//! A frame longer than one slot (a TCP super-segment) fills as many
//! consecutive slots as it needs, at most half the ring: the first slot's
//! header describes it, its bytes continue in the frame area of the slots
//! after it (wrapping at the ring's end), and their headers are unused.
//!
//! This module is pure arithmetic: no memory is touched here, so the
//! validation of a header read from a hostile segment is testable alone.

use std::io;

use nagare_ipc::spsc;
use nagare_wire::ETHERNET_HEADER_LEN;

/// "nagareVN" in little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"nagareVN");
/// Bumped whenever the layout changes incompatibly: 2 added the offload
/// word, 3 its UDP segmentation bit (a reader of version 2 refuses the
/// word, so the two never share a segment).
pub const VERSION: u32 = 3;

/// Bytes of the segment header (one cache line used, two reserved).
pub const HEADER_LEN: usize = 128;
/// Bytes of one port record.
pub const PORT_RECORD_LEN: usize = 128;
/// Bytes in front of a ring's slots: the head and the tail, each on a
/// cache line of its own so producer and consumer do not share one.
pub const RING_HEADER_LEN: usize = spsc::CONTROL_LEN;
/// Bytes in front of the frame in a slot: its length and its offload word
/// (`super::meta`).
pub const SLOT_HEADER_LEN: usize = 8;
/// Offset of the offload word in a slot.
pub const SLOT_OFFLOAD: usize = 4;
/// Largest IPv4 packet: the most a super-segment carries, an IPv6 one too
/// (its fixed header and payload 65 535 bytes in all).
const MAX_IP_PACKET: usize = 65535;
/// Cache line size everything shared is aligned to.
pub const CACHE_LINE: usize = 64;

/// Fewest and most ports in a segment.
pub const MIN_PORTS: usize = 2;
pub const MAX_PORTS: usize = 64;
/// Fewest and most slots per ring (a power of two).
pub const MIN_SLOTS: usize = 4;
pub const MAX_SLOTS: usize = 1 << 16;
/// Smallest and largest IP MTU.
pub const MIN_MTU: usize = 68;
pub const MAX_MTU: usize = 65535;
/// Largest segment we create or accept (tmpfs memory is not free).
pub const MAX_SEGMENT_BYTES: u64 = 32 << 30;

/// Bytes of slots a ring gets by default: 24 super-segments of 64 KiB.
/// A sender on a ring that holds only a few of them waits for the
/// receiver to wake up and drain it every few frames; TCP at MTU 1500
/// goes about twice as fast with this as with 256 slots.
pub const DEFAULT_RING_BYTES: usize = 3 << 19;
/// Fewest slots a ring gets by default.
pub const MIN_DEFAULT_SLOTS: usize = 256;

// Header field offsets.
pub const H_MAGIC: usize = 0;
pub const H_VERSION: usize = 8;
pub const H_PORTS: usize = 12;
pub const H_MTU: usize = 16;
pub const H_SLOT_SIZE: usize = 20;
pub const H_SLOT_COUNT: usize = 24;
pub const H_RING_OFFSET: usize = 32;
pub const H_RING_STRIDE: usize = 40;
pub const H_TOTAL: usize = 48;

// Port record field offsets.
pub const P_OWNER: usize = 0;
pub const P_GENERATION: usize = 8;
pub const P_DOORBELL: usize = 12;
pub const P_MAC: usize = 16;
pub const P_POLLING: usize = 64;

// Ring field offsets: the control lines of `nagare_ipc::spsc`.
/// The producer's position (head), written by the sending port only.
pub const R_HEAD: usize = spsc::HEAD;
/// The consumer's position (tail), written by the receiving port only.
pub const R_TAIL: usize = spsc::TAIL;

/// Port states (high half of the owner word).
pub const STATE_FREE: u32 = 0;
pub const STATE_CLAIMING: u32 = 1;
pub const STATE_ATTACHED: u32 = 2;

/// The owner word for `state` and `pid`.
pub fn owner_word(state: u32, pid: u32) -> u64 {
    (u64::from(state) << 32) | u64::from(pid)
}

/// The state and pid in an owner word.
pub fn split_owner(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

fn align_up(n: u64, to: u64) -> Option<u64> {
    n.checked_add(to - 1).map(|v| v / to * to)
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

fn corrupt(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Bytes of one slot for frames of IP MTU `mtu`: the slot header and an
/// Ethernet frame, rounded up to a cache line.
pub fn slot_size_for(mtu: usize) -> usize {
    (SLOT_HEADER_LEN + mtu + ETHERNET_HEADER_LEN).div_ceil(CACHE_LINE) * CACHE_LINE
}

/// Slots per ring for `nagare vni create` without `--slots`: the largest
/// power of two whose slots fit [`DEFAULT_RING_BYTES`], at least
/// [`MIN_DEFAULT_SLOTS`]: 1024 at MTU 1500, 256 at 9000 and above.
pub fn default_slots(mtu: usize) -> usize {
    let fit = DEFAULT_RING_BYTES / slot_size_for(mtu).max(1);
    let pow2 = if fit == 0 { 1 } else { 1 << fit.ilog2() };
    pow2.clamp(MIN_DEFAULT_SLOTS, MAX_SLOTS)
}

/// The shape of a segment; every offset into it comes from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub ports: usize,
    pub mtu: usize,
    pub slot_size: usize,
    pub slot_count: usize,
    pub ring_offset: usize,
    pub ring_stride: usize,
    pub total: usize,
}

impl Geometry {
    /// The geometry of a new segment, or why it cannot be made.
    pub fn new(ports: usize, mtu: usize, slots: usize) -> io::Result<Geometry> {
        if !(MIN_PORTS..=MAX_PORTS).contains(&ports) {
            return Err(invalid(format!("{ports} ports: a segment has {MIN_PORTS} to {MAX_PORTS}")));
        }
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(invalid(format!("MTU {mtu}: must be {MIN_MTU} to {MAX_MTU}")));
        }
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&slots) || !slots.is_power_of_two() {
            return Err(invalid(format!("{slots} slots: a ring has a power of two from {MIN_SLOTS} to {MAX_SLOTS}")));
        }
        let slot_size = slot_size_for(mtu);
        let ring_offset = align_up((HEADER_LEN + ports * PORT_RECORD_LEN) as u64, 4096)
            .ok_or_else(|| invalid("segment too large".into()))?;
        let ring_stride = (slots as u64)
            .checked_mul(slot_size as u64)
            .and_then(|b| b.checked_add(RING_HEADER_LEN as u64))
            .ok_or_else(|| invalid("segment too large".into()))?;
        let rings = (ports * (ports - 1)) as u64;
        let total = rings
            .checked_mul(ring_stride)
            .and_then(|b| b.checked_add(ring_offset))
            .filter(|&t| t <= MAX_SEGMENT_BYTES)
            .ok_or_else(|| {
                invalid(format!(
                    "{ports} ports x {slots} slots of {slot_size} B need more than {} GiB",
                    MAX_SEGMENT_BYTES >> 30
                ))
            })?;
        let to_usize = |v: u64| usize::try_from(v).map_err(|_| invalid("segment too large".into()));
        Ok(Geometry {
            ports,
            mtu,
            slot_size,
            slot_count: slots,
            ring_offset: to_usize(ring_offset)?,
            ring_stride: to_usize(ring_stride)?,
            total: to_usize(total)?,
        })
    }

    /// Checks a header read from a segment (any values at all) against
    /// the geometry its ports, MTU and slot count imply and against the
    /// file's real length; a geometry only if everything agrees.
    #[allow(clippy::too_many_arguments)]
    pub fn from_header(
        magic: u64,
        version: u32,
        ports: u32,
        mtu: u32,
        slot_size: u32,
        slot_count: u32,
        ring_offset: u64,
        ring_stride: u64,
        total: u64,
        file_len: u64,
    ) -> io::Result<Geometry> {
        if magic != MAGIC {
            return Err(corrupt("not a nagare VNI segment (bad magic, or still being created)".into()));
        }
        if version != VERSION {
            return Err(corrupt(format!("segment layout version {version}, this nagare speaks {VERSION}")));
        }
        let geo = Geometry::new(ports as usize, mtu as usize, slot_count as usize)
            .map_err(|e| corrupt(format!("bad segment header: {e}")))?;
        let agrees = geo.slot_size as u64 == u64::from(slot_size)
            && geo.ring_offset as u64 == ring_offset
            && geo.ring_stride as u64 == ring_stride
            && geo.total as u64 == total;
        if !agrees {
            return Err(corrupt("bad segment header: sizes and offsets disagree".into()));
        }
        if file_len != total {
            return Err(corrupt(format!("segment file is {file_len} bytes, its header says {total}")));
        }
        Ok(geo)
    }

    /// Largest frame a slot carries (an Ethernet header and the MTU).
    pub fn max_frame(&self) -> usize {
        self.mtu + ETHERNET_HEADER_LEN
    }

    /// Frame bytes one slot holds.
    pub fn slot_payload(&self) -> usize {
        self.slot_size - SLOT_HEADER_LEN
    }

    /// Largest frame a ring carries, in consecutive slots: an Ethernet
    /// header and the largest IPv4 packet, if half the ring holds it (so a
    /// ring never has to be empty for one frame to go in), else half the
    /// ring. Frames past [`max_frame`](Self::max_frame) are TCP
    /// super-segments.
    pub fn max_super_frame(&self) -> usize {
        (ETHERNET_HEADER_LEN + MAX_IP_PACKET).min(self.slot_count / 2 * self.slot_payload()).max(self.max_frame())
    }

    /// Slots a frame of `len` bytes fills.
    pub fn slots_for(&self, len: usize) -> usize {
        len.div_ceil(self.slot_payload()).max(1)
    }

    /// Offset of port `i`'s record.
    pub fn port_offset(&self, i: usize) -> usize {
        debug_assert!(i < self.ports);
        HEADER_LEN + i * PORT_RECORD_LEN
    }

    /// Index of the ring from port `from` to port `to` (`from != to`).
    pub fn ring_index(&self, from: usize, to: usize) -> usize {
        debug_assert!(from < self.ports && to < self.ports && from != to);
        from * (self.ports - 1) + if to < from { to } else { to - 1 }
    }

    /// Offset of the ring from `from` to `to`.
    pub fn ring_offset_of(&self, from: usize, to: usize) -> usize {
        self.ring_offset + self.ring_index(from, to) * self.ring_stride
    }

    /// Offset of slot `k` (already reduced modulo the slot count) of the
    /// ring at `ring`.
    pub fn slot_offset(&self, ring: usize, k: usize) -> usize {
        debug_assert!(k < self.slot_count);
        ring + RING_HEADER_LEN + k * self.slot_size
    }

    /// Rings in the segment: one per ordered pair of ports.
    pub fn ring_count(&self) -> usize {
        self.ports * (self.ports - 1)
    }
}

/// A segment's size as `nagare vni info` shows it: KiB below a MiB, MiB
/// below a GiB, else GiB.
pub fn format_size(bytes: usize) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

/// Bytes of a segment of `ports` ports with rings of `slots` slots for IP
/// MTU `mtu`: it grows as the square of the ports.
pub fn segment_size(ports: usize, mtu: usize, slots: usize) -> io::Result<usize> {
    Geometry::new(ports, mtu, slots).map(|g| g.total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_sizes_follow_the_mtu() {
        assert_eq!(slot_size_for(1500), 1536);
        assert_eq!(slot_size_for(9000), 9024);
        assert_eq!(slot_size_for(65535), 65600);
        for mtu in [68, 1500, 9000, 65535] {
            let s = slot_size_for(mtu);
            assert_eq!(s % CACHE_LINE, 0);
            assert!(s >= SLOT_HEADER_LEN + mtu + ETHERNET_HEADER_LEN);
        }
    }

    #[test]
    fn default_rings_hold_two_dozen_super_segments() {
        assert_eq!(default_slots(1500), 1024);
        assert_eq!(default_slots(9000), 256);
        assert_eq!(default_slots(65535), 256);
        assert_eq!(default_slots(68), 8192);
        for mtu in [68, 576, 1500, 4000, 9000, 65535] {
            let slots = default_slots(mtu);
            assert!(slots.is_power_of_two() && Geometry::new(2, mtu, slots).is_ok());
        }
        let g = Geometry::new(2, 1500, default_slots(1500)).unwrap();
        assert!(g.slot_count * g.slot_payload() >= 23 * 65549);
    }

    #[test]
    fn super_frames_fill_at_most_half_a_ring() {
        let g = Geometry::new(2, 1500, 256).unwrap();
        assert_eq!(g.max_super_frame(), 14 + 65535);
        assert_eq!(g.slots_for(g.max_super_frame()), 43);
        assert_eq!(g.slots_for(g.max_frame()), 1);
        let small = Geometry::new(2, 1500, 8).unwrap();
        assert_eq!(small.max_super_frame(), 4 * 1528);
        assert_eq!(small.slots_for(small.max_super_frame()), 4);
        let jumbo = Geometry::new(2, 65535, 4).unwrap();
        assert_eq!(jumbo.max_super_frame(), jumbo.max_frame());
    }

    #[test]
    fn rings_are_disjoint_and_inside() {
        let g = Geometry::new(5, 1500, 8).unwrap();
        let mut seen = std::collections::HashSet::new();
        for i in 0..5 {
            for j in (0..5).filter(|&j| j != i) {
                assert!(seen.insert(g.ring_index(i, j)));
                let last = g.slot_offset(g.ring_offset_of(i, j), 7) + g.slot_size;
                assert!(last <= g.total);
            }
        }
        assert_eq!(seen.len(), g.ring_count());
        assert!(g.slots_for(g.max_super_frame()) <= g.slot_count / 2);
        assert!(g.port_offset(4) + PORT_RECORD_LEN <= g.ring_offset);
        assert_eq!(g.ring_offset % 4096, 0);
    }
}
