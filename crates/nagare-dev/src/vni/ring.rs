//! One single-producer, single-consumer ring of frame slots in a segment:
//! the index protocol of `nagare_ipc::spsc` (the same as the inet server's
//! descriptor rings) with slots that hold one frame each, or one TCP
//! super-segment across consecutive slots.
//!
//! Positions are free-running `u32` counters; slot `p % count` holds the
//! frame at position `p`. The producer alone writes `head` (+0), the
//! consumer alone writes `tail` (+64); each keeps its own position in
//! private memory and never reads it back from shared memory, so a
//! scribbled counter cannot steer it. What it reads from the other side is
//! checked: the consumer's tail by `spsc` (it must lie between the last
//! one accepted and our head), the producer's head by `spsc` (between our
//! tail and our tail plus the ring; a head that moves back to no less than
//! our tail is a producer that took its port over and withdrew what its
//! predecessor left, and is accepted), a slot's length here (outside
//! `14 ..= max_super_frame`, or running past the published slots, is a
//! bad slot, skipped and counted) and its offload word (`super::meta`:
//! one that does not fit the frame drops the frame, counted). A position out
//! of range is a broken ring: counted by the port, and the end starts
//! again from the peer's value, so both ends agree again after one
//! exchange. The producer holds itself to the same bounds: it writes only
//! frames of `14 ..= max_super_frame` bytes, and a frame whose bytes were
//! not all written is refused ([`Unwritten`]) before its length, offload
//! word or the head move, so nothing half-written is ever published.
//!
//! Ordering (`spsc`): a slot's bytes and length are written before the
//! head that publishes them (a sequentially consistent swap, which is also
//! the sender's half of the doorbell handshake: `nagare_ipc::notify`), and
//! read after the head is loaded (acquire); the tail is stored with
//! release after the slots are read.
//!
//! Why this is not `nagare_ipc::ring`: a slot here holds a frame of any
//! length up to the MTU (a length word and raw bytes, which an application
//! may write in place, [`super::SlotWriter`]), not one fixed 64-byte
//! descriptor copied as eight atomic words; the receiver's polling flag is
//! one per port, covering all its incoming rings, not one per ring; a
//! violation resynchronises the ring instead of breaking it for good,
//! because a segment is shared by many processes and one bad one must not
//! stop a port; and a port that attaches takes its rings over from whoever
//! had them before.

use std::sync::atomic::Ordering;

use nagare_core::buf::{BufferPool, Offload, PacketBuf};
use nagare_ipc::notify::{wake_decision, Wake};
use nagare_ipc::spsc::{ConsumerIndex, ProducerIndex, Withdrawal};
use nagare_wire::ETHERNET_HEADER_LEN;

use super::layout::{Geometry, R_HEAD, R_TAIL, SLOT_HEADER_LEN, SLOT_OFFLOAD};
use super::meta;
use super::segment::Segment;
use crate::device::RX_HEADROOM;

/// The producer's side of one ring.
#[derive(Debug, Clone, Copy)]
pub struct Producer {
    /// Offset of the ring in the segment.
    ring: usize,
    idx: ProducerIndex,
}

/// Why a ring could not be used as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokenRing;

/// Why a frame was not written into a ring: a length outside
/// `14..=max_super_frame`, or its bytes not all written. Nothing of it
/// is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwritten;

/// The slot count of a validated geometry as a ring capacity (a power of
/// two of at most 2^16).
fn capacity(seg: &Segment) -> u32 {
    seg.geometry().slot_count as u32
}

impl Producer {
    /// Takes over the producer side of the ring at `ring` and empties it:
    /// the head is set to the consumer's tail, so nothing a previous owner
    /// left behind is delivered.
    pub fn reset(seg: &Segment, ring: usize) -> Producer {
        let idx = ProducerIndex::take_over(capacity(seg), seg.u32_at(ring + R_HEAD), seg.u32_at(ring + R_TAIL));
        Producer { ring, idx }
    }

    /// Free slots, from the consumer's tail as it is now. A tail that is
    /// ahead of our head, or behind the last one we accepted, is broken:
    /// we then restart from it (counted by the caller).
    pub fn free_slots(&mut self, seg: &Segment) -> Result<usize, BrokenRing> {
        match self.idx.load_tail(seg.u32_at(self.ring + R_TAIL)) {
            Ok(free) => Ok(free as usize),
            Err(e) => {
                self.idx.resync(e.seen().unwrap_or(self.idx.head()));
                Err(BrokenRing)
            }
        }
    }

    /// Writes `frame` into the slots at our head, with its offload word
    /// `word` ([`meta::checked_encode`] of the frame's offload): one slot,
    /// or [`Geometry::slots_for`] consecutive ones for a super-segment (the
    /// caller checked they are free). A frame of a length the ring does
    /// not carry (`14..=max_super_frame`) is refused; so is one whose
    /// bytes were not all written, which cannot happen while the chunks
    /// add up to the span's length and the span's pieces lie in slots of
    /// a validated geometry, but is checked rather than assumed. A refused
    /// frame leaves the length word, the offload word and the head as they
    /// were: what it wrote lies past the published head, unseen.
    pub fn push(&mut self, seg: &Segment, geo: &Geometry, frame: &PacketBuf, word: u32) -> Result<(), Unwritten> {
        let len = frame.len();
        if !(ETHERNET_HEADER_LEN..=geo.max_super_frame()).contains(&len) {
            return Err(Unwritten);
        }
        let span = SlotSpan { ring: self.ring, first: self.idx.slot(0) as usize, len };
        let mut at = 0;
        for chunk in frame.chunks() {
            if !span.write(seg, geo, at, chunk) {
                return Err(Unwritten);
            }
            at += chunk.len();
        }
        let slot = self.next_slot(geo);
        seg.u32_at(slot + SLOT_OFFLOAD).store(word, Ordering::Relaxed);
        seg.u32_at(slot).store(len as u32, Ordering::Relaxed);
        self.idx.advance(geo.slots_for(len) as u32);
        Ok(())
    }

    /// Offset in the segment of the slot at our head: the slot the next
    /// [`push`](Self::push) or [`commit`](Self::commit) fills.
    fn next_slot(&self, geo: &Geometry) -> usize {
        geo.slot_offset(self.ring, self.idx.slot(0) as usize)
    }

    /// Offset in the segment of the frame bytes of the slot at our head:
    /// the slot the next [`push`](Self::push) or [`commit`](Self::commit)
    /// fills. It is ours until published (the consumer reads no slot at
    /// or past the published head); a hostile process may still write it,
    /// which only spoils our own frame.
    pub fn next_frame_offset(&self, geo: &Geometry) -> usize {
        self.next_slot(geo) + SLOT_HEADER_LEN
    }

    /// Stores the length of the one-slot frame written at
    /// [`next_frame_offset`](Self::next_frame_offset), with an offload
    /// word that claims nothing, and moves the head past it (unpublished
    /// until [`publish`](Self::publish)). The caller checked that there is
    /// a free slot and that `14 <= len <= geo.max_frame()`.
    pub fn commit(&mut self, seg: &Segment, geo: &Geometry, len: usize) {
        debug_assert!((ETHERNET_HEADER_LEN..=geo.max_frame()).contains(&len));
        let slot = self.next_slot(geo);
        seg.u32_at(slot + SLOT_OFFLOAD).store(meta::encode(Offload::NONE), Ordering::Relaxed);
        seg.u32_at(slot).store(len as u32, Ordering::Relaxed);
        self.idx.advance(1);
    }

    /// Our head (next position to fill), published or not.
    pub fn head(&self) -> u32 {
        self.idx.head()
    }

    /// Whether frames were pushed since the last publish.
    pub fn has_unpublished(&self) -> bool {
        self.idx.has_unpublished()
    }

    /// Makes the pushed frames visible and decides whether the receiver
    /// needs a doorbell (`nagare_ipc::notify::wake_decision`), given the
    /// offset of its polling flag: the head is published with a
    /// sequentially consistent swap, then the flag and the receiver's tail
    /// are read.
    pub fn publish(&mut self, seg: &Segment, polling: usize) -> Wake {
        let before = self.idx.publish_sc(seg.u32_at(self.ring + R_HEAD));
        wake_decision(seg.u32_at(polling), seg.u32_at(self.ring + R_TAIL), before, self.idx.head())
    }
}

/// The consumer's side of one ring.
#[derive(Debug, Clone, Copy)]
pub struct Consumer {
    ring: usize,
    idx: ConsumerIndex,
}

impl Consumer {
    /// Takes over the consumer side of the ring at `ring` and empties it:
    /// the tail is set to the producer's head.
    pub fn reset(seg: &Segment, ring: usize) -> Consumer {
        let idx = ConsumerIndex::take_over(
            capacity(seg),
            Withdrawal::Allowed,
            seg.u32_at(ring + R_HEAD),
            seg.u32_at(ring + R_TAIL),
        );
        Consumer { ring, idx }
    }

    /// Frames waiting, from the producer's head as it is now. A head more
    /// than a ring ahead of our tail, or behind it, is broken: we skip to
    /// it, dropping whatever was there (counted by the caller).
    pub fn available(&mut self, seg: &Segment) -> Result<usize, BrokenRing> {
        match self.idx.load_head(seg.u32_at(self.ring + R_HEAD)) {
            Ok(n) => Ok(n as usize),
            Err(e) => {
                self.idx.resync(e.seen().unwrap_or(self.idx.tail()));
                self.release(seg);
                Err(BrokenRing)
            }
        }
    }

    /// The frame at the tail, given that `available` slots (from
    /// [`available`](Self::available)) are published from it, and moves
    /// past its slots. A length outside `14..=max_super_frame`, or a
    /// frame whose slots are not all published, is a bad slot: only that
    /// slot is skipped. An offload word that does not fit the frame
    /// ([`meta::decode`]) is bad metadata: the frame's slots are skipped.
    /// The slots stay ours to read until [`release`](Self::release).
    pub fn pop_frame(&mut self, seg: &Segment, geo: &Geometry, available: usize) -> Popped {
        let first = self.idx.slot(0) as usize;
        let slot = geo.slot_offset(self.ring, first);
        let len = seg.u32_at(slot).load(Ordering::Relaxed) as usize;
        let word = seg.u32_at(slot + SLOT_OFFLOAD).load(Ordering::Relaxed);
        if !(ETHERNET_HEADER_LEN..=geo.max_super_frame()).contains(&len) || geo.slots_for(len) > available {
            self.idx.advance(1);
            return Popped::BadSlot;
        }
        let slots = geo.slots_for(len);
        self.idx.advance(slots as u32);
        match meta::decode(word, len, geo) {
            Ok(offload) => Popped::Frame(SlotSpan { ring: self.ring, first, len }, offload, slots),
            Err(_) => Popped::BadMetadata(slots),
        }
    }

    /// Gives the slots read so far back to the producer.
    pub fn release(&mut self, seg: &Segment) {
        self.idx.release(seg.u32_at(self.ring + R_TAIL));
    }
}

/// What [`Consumer::pop_frame`] found at the tail.
#[derive(Debug, Clone, Copy)]
pub enum Popped {
    /// A frame, its offload, and the slots it filled.
    Frame(SlotSpan, Offload, usize),
    /// An impossible length: one slot skipped.
    BadSlot,
    /// An offload word that does not fit the frame: its slots skipped.
    BadMetadata(usize),
}

/// Where a frame lies in a ring: `len` bytes from the frame area of slot
/// `first` on, continuing in the frame areas of the slots after it.
#[derive(Debug, Clone, Copy)]
pub struct SlotSpan {
    ring: usize,
    first: usize,
    len: usize,
}

impl SlotSpan {
    /// The frame's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame is empty (never, for a span a ring hands out).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `each(segment offset, range of the frame)` for the pieces of
    /// frame bytes `at..at + n`, slot by slot; false if that runs past the
    /// frame.
    fn pieces(&self, geo: &Geometry, at: usize, n: usize, mut each: impl FnMut(usize, usize, usize) -> bool) -> bool {
        let Some(end) = at.checked_add(n).filter(|&e| e <= self.len) else {
            return false;
        };
        let per_slot = geo.slot_payload();
        let mask = geo.slot_count - 1;
        let mut pos = at;
        while pos < end {
            let (k, within) = (pos / per_slot, pos % per_slot);
            let take = (per_slot - within).min(end - pos);
            let slot = geo.slot_offset(self.ring, (self.first + k) & mask);
            if !each(slot + SLOT_HEADER_LEN + within, pos - at, take) {
                return false;
            }
            pos += take;
        }
        true
    }

    /// Copies frame bytes `at..at + out.len()` into `out`; false if that
    /// runs past the frame.
    pub fn read(&self, seg: &Segment, geo: &Geometry, at: usize, out: &mut [u8]) -> bool {
        let n = out.len();
        self.pieces(geo, at, n, |off, from, take| seg.read_bytes(off, &mut out[from..from + take]))
    }

    /// Copies `bytes` into the frame at `at`; false if that runs past it.
    fn write(&self, seg: &Segment, geo: &Geometry, at: usize, bytes: &[u8]) -> bool {
        self.pieces(geo, at, bytes.len(), |off, from, take| seg.write_bytes(off, &bytes[from..from + take]))
    }
}

/// Copies the frame in `span` into one pool buffer at [`RX_HEADROOM`],
/// or a chain of them for a frame larger than a buffer, with `offload`:
/// the one copy on the receive path.
pub(super) fn copy_to_pool(
    seg: &Segment,
    geo: &Geometry,
    span: &SlotSpan,
    offload: Offload,
    pool: &BufferPool,
) -> Option<PacketBuf> {
    let len = span.len;
    let size = pool.buf_size();
    let mut packet: Option<PacketBuf> = None;
    let mut done = 0;
    let mut start = RX_HEADROOM.min(size / 2);
    while done < len {
        let mut buf = pool.alloc().ok()?;
        let bytes = buf.as_mut_slice()?;
        let take = (len - done).min(size - start);
        if take == 0 || !span.read(seg, geo, done, &mut bytes[start..start + take]) {
            return None;
        }
        let piece = PacketBuf::from_buffer(buf, start, start + take)?;
        match packet.as_mut() {
            Some(p) => p.append(piece),
            None => packet = Some(piece),
        }
        done += take;
        start = 0;
    }
    let mut packet = packet?;
    packet.set_offload(offload);
    Some(packet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vni::layout::P_POLLING;
    use crate::vni::segment::destroy;

    /// Removes the test's segment even when an assertion fails.
    struct Removed(String);

    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = destroy(&self.0);
        }
    }

    /// A frame the ring does not carry is refused and leaves nothing
    /// behind: the head stays, nothing is published, and the next frame
    /// takes the same slots and arrives whole.
    #[test]
    fn a_frame_the_ring_does_not_carry_is_refused_unpublished() {
        let name = format!("ring-unit-{}", std::process::id());
        let _ = destroy(&name);
        let _removed = Removed(name.clone());
        let seg = Segment::create(&name, 2, 1500, 16).unwrap();
        let geo = *seg.geometry();
        let ring = geo.ring_offset_of(0, 1);
        let mut producer = Producer::reset(&seg, ring);
        let mut consumer = Consumer::reset(&seg, ring);
        let pool = BufferPool::new(2048, 64);
        let frame = |len: usize| {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            PacketBuf::from_slice(&pool, 0, &bytes).unwrap()
        };
        let longest = geo.max_super_frame();
        for len in [ETHERNET_HEADER_LEN - 1, longest + 1, 3 * longest] {
            assert_eq!(producer.push(&seg, &geo, &frame(len), 0), Err(Unwritten), "{len} bytes");
            assert_eq!(producer.head(), 0, "{len} bytes");
            assert!(!producer.has_unpublished(), "{len} bytes");
        }
        let sent = frame(longest);
        let tso = Offload::tcp_segments(1448);
        assert_eq!(producer.push(&seg, &geo, &sent, meta::encode(tso)), Ok(()));
        assert_eq!(producer.head(), geo.slots_for(longest) as u32);
        producer.publish(&seg, geo.port_offset(1) + P_POLLING);
        let available = consumer.available(&seg).unwrap();
        let Popped::Frame(span, offload, _) = consumer.pop_frame(&seg, &geo, available) else {
            panic!("no frame at the tail");
        };
        let mut got = vec![0u8; span.len()];
        assert!(span.read(&seg, &geo, 0, &mut got));
        assert!(got == sent.to_vec());
        assert_eq!(offload, tso);
        drop(sent);
        assert_eq!(pool.in_use(), 0);
    }
}
