//! One single-producer, single-consumer ring of frame slots in a segment:
//! the index protocol of `nagare_ipc::spsc` (the same as the inet server's
//! descriptor rings) with slots that hold one frame each.
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
//! `14 ..= mtu + 14` is a bad slot, skipped and counted). A position out
//! of range is a broken ring: counted by the port, and the end starts
//! again from the peer's value, so both ends agree again after one
//! exchange.
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

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_ipc::notify::{wake_decision, Wake};
use nagare_ipc::spsc::{ConsumerIndex, ProducerIndex, Withdrawal};
use nagare_wire::ETHERNET_HEADER_LEN;

use super::layout::{Geometry, R_HEAD, R_TAIL, SLOT_HEADER_LEN};
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

    /// Writes `frame` into the next slot (the caller checked there is one
    /// and that the frame fits a slot).
    pub fn push(&mut self, seg: &Segment, geo: &Geometry, frame: &PacketBuf) {
        let len = frame.len();
        debug_assert!(len <= geo.max_frame());
        let mut off = self.next_frame_offset(geo);
        for chunk in frame.chunks() {
            seg.write_bytes(off, chunk);
            off += chunk.len();
        }
        self.commit(seg, geo, len);
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

    /// Stores the length of the frame written at
    /// [`next_frame_offset`](Self::next_frame_offset) and moves the head
    /// past it (unpublished until [`publish`](Self::publish)). The caller
    /// checked that there is a free slot and that `14 <= len <=
    /// geo.max_frame()`.
    pub fn commit(&mut self, seg: &Segment, geo: &Geometry, len: usize) {
        debug_assert!((ETHERNET_HEADER_LEN..=geo.max_frame()).contains(&len));
        seg.u32_at(self.next_slot(geo)).store(len as u32, Ordering::Relaxed);
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

    /// The frame at the tail, as (offset in the segment, length), and
    /// moves past it (the caller checked one is available); `None` for a
    /// slot whose length is impossible (skipped). The slot stays ours to
    /// read until [`release`](Self::release).
    pub fn pop_slot(&mut self, seg: &Segment, geo: &Geometry) -> Option<(usize, usize)> {
        let slot = geo.slot_offset(self.ring, self.idx.slot(0) as usize);
        self.idx.advance(1);
        let len = seg.u32_at(slot).load(Ordering::Relaxed) as usize;
        (ETHERNET_HEADER_LEN..=geo.max_frame()).contains(&len).then_some((slot + SLOT_HEADER_LEN, len))
    }

    /// Gives the slots read so far back to the producer.
    pub fn release(&mut self, seg: &Segment) {
        self.idx.release(seg.u32_at(self.ring + R_TAIL));
    }
}

/// Copies `len` bytes at `off` into one pool buffer at [`RX_HEADROOM`],
/// or a chain of them for a frame larger than a buffer: the one copy on
/// the receive path.
pub(super) fn copy_to_pool(seg: &Segment, off: usize, len: usize, pool: &BufferPool) -> Option<PacketBuf> {
    let size = pool.buf_size();
    let mut packet: Option<PacketBuf> = None;
    let mut done = 0;
    let mut start = RX_HEADROOM.min(size / 2);
    while done < len {
        let mut buf = pool.alloc().ok()?;
        let bytes = buf.as_mut_slice()?;
        let take = (len - done).min(size - start);
        if take == 0 || !seg.read_bytes(off + done, &mut bytes[start..start + take]) {
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
    packet
}
