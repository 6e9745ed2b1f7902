//! One single-producer, single-consumer ring of frame slots in a segment.
//!
//! Positions are free-running `u32` counters; slot `p % count` holds the
//! frame at position `p`. The producer alone writes `tail`, the consumer
//! alone writes `head`; each keeps its own copy of its counter and never
//! reads it back from shared memory, so a scribbled counter cannot steer
//! it. What it reads from the other side (the producer's tail, the
//! consumer's head, a slot's length) is checked: a distance larger than
//! the ring is a broken ring, resynchronised and counted; a length outside
//! `14 ..= mtu + 14` is a bad slot, skipped and counted.
//!
//! Ordering: a slot's bytes and length are written before the tail that
//! publishes them (release), and read after the tail is loaded (acquire).
//! Tail and head stores and the loads that decide on a doorbell are
//! sequentially consistent, which is what makes "ring only on the
//! empty-to-non-empty edge" lose no wake-up (see `port.rs`).

use std::sync::atomic::Ordering;

use nagare_core::buf::{BufferPool, PacketBuf};

use super::layout::{Geometry, R_HEAD, R_TAIL, SLOT_HEADER_LEN};
use super::segment::Segment;
use crate::device::RX_HEADROOM;

/// The producer's side of one ring.
#[derive(Debug, Clone, Copy)]
pub struct Producer {
    /// Offset of the ring in the segment.
    ring: usize,
    /// Next position to fill (ours).
    tail: u32,
    /// The tail last stored in shared memory.
    published: u32,
}

/// Why a ring could not be used as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokenRing;

impl Producer {
    /// Takes over the producer side of the ring at `ring` and empties it:
    /// the tail is set to the consumer's head, so nothing a previous owner
    /// left behind is delivered.
    pub fn reset(seg: &Segment, ring: usize) -> Producer {
        let head = seg.u32_at(ring + R_HEAD).load(Ordering::Acquire);
        seg.u32_at(ring + R_TAIL).store(head, Ordering::SeqCst);
        Producer { ring, tail: head, published: head }
    }

    /// Free slots, from the consumer's head as it is now. A head that is
    /// ahead of our tail or more than a ring behind it is broken: we then
    /// restart from it (counted by the caller).
    pub fn free_slots(&mut self, seg: &Segment, geo: &Geometry) -> Result<usize, BrokenRing> {
        let head = seg.u32_at(self.ring + R_HEAD).load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(head) as usize;
        if used > geo.slot_count {
            self.tail = head;
            return Err(BrokenRing);
        }
        Ok(geo.slot_count - used)
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

    /// Offset in the segment of the frame bytes of the slot at our tail:
    /// the slot the next [`push`](Self::push) or [`commit`](Self::commit)
    /// fills. It is ours until published (the consumer reads no slot at
    /// or past the published tail); a hostile process may still write it,
    /// which only spoils our own frame.
    pub fn next_frame_offset(&self, geo: &Geometry) -> usize {
        geo.slot_offset(self.ring, self.tail as usize & (geo.slot_count - 1)) + SLOT_HEADER_LEN
    }

    /// Stores the length of the frame written at
    /// [`next_frame_offset`](Self::next_frame_offset) and moves the tail
    /// past it (unpublished until [`publish`](Self::publish)). The caller
    /// checked that there is a free slot and that `14 <= len <=
    /// geo.max_frame()`.
    pub fn commit(&mut self, seg: &Segment, geo: &Geometry, len: usize) {
        debug_assert!((crate::device::ETHERNET_HEADER_LEN..=geo.max_frame()).contains(&len));
        let slot = geo.slot_offset(self.ring, self.tail as usize & (geo.slot_count - 1));
        seg.u32_at(slot).store(len as u32, Ordering::Relaxed);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Our tail (next position to fill), published or not.
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// Whether frames were pushed since the last publish.
    pub fn has_unpublished(&self) -> bool {
        self.tail != self.published
    }

    /// Makes the pushed frames visible; returns the tail published before
    /// (the caller compares it with the consumer's head to find the
    /// empty-to-non-empty edge).
    pub fn publish(&mut self, seg: &Segment) -> u32 {
        let before = self.published;
        seg.u32_at(self.ring + R_TAIL).store(self.tail, Ordering::SeqCst);
        self.published = self.tail;
        before
    }

    /// The consumer's head now (for the edge test).
    pub fn head(&self, seg: &Segment) -> u32 {
        seg.u32_at(self.ring + R_HEAD).load(Ordering::SeqCst)
    }
}

/// The consumer's side of one ring.
#[derive(Debug, Clone, Copy)]
pub struct Consumer {
    ring: usize,
    /// Next position to read (ours).
    head: u32,
    /// The head last stored in shared memory.
    published: u32,
}

impl Consumer {
    /// Takes over the consumer side of the ring at `ring` and empties it:
    /// the head is set to the producer's tail.
    pub fn reset(seg: &Segment, ring: usize) -> Consumer {
        let tail = seg.u32_at(ring + R_TAIL).load(Ordering::Acquire);
        seg.u32_at(ring + R_HEAD).store(tail, Ordering::SeqCst);
        Consumer { ring, head: tail, published: tail }
    }

    /// Frames waiting, from the producer's tail as it is now. A tail more
    /// than a ring ahead of our head (or behind it) is broken: we skip to
    /// it, dropping whatever was there (counted by the caller).
    pub fn available(&mut self, seg: &Segment, geo: &Geometry) -> Result<usize, BrokenRing> {
        let tail = seg.u32_at(self.ring + R_TAIL).load(Ordering::SeqCst);
        let avail = tail.wrapping_sub(self.head) as usize;
        if avail > geo.slot_count {
            self.head = tail;
            self.release(seg);
            return Err(BrokenRing);
        }
        Ok(avail)
    }

    /// The frame at the head, as (offset in the segment, length), and
    /// moves past it (the caller checked one is available); `None` for a
    /// slot whose length is impossible (skipped). The slot stays ours to
    /// read until [`release`](Self::release).
    pub fn pop_slot(&mut self, seg: &Segment, geo: &Geometry) -> Option<(usize, usize)> {
        let slot = geo.slot_offset(self.ring, self.head as usize & (geo.slot_count - 1));
        self.head = self.head.wrapping_add(1);
        let len = seg.u32_at(slot).load(Ordering::Relaxed) as usize;
        (crate::device::ETHERNET_HEADER_LEN..=geo.max_frame()).contains(&len).then_some((slot + SLOT_HEADER_LEN, len))
    }

    /// Gives the slots read so far back to the producer.
    pub fn release(&mut self, seg: &Segment) {
        if self.head != self.published {
            seg.u32_at(self.ring + R_HEAD).store(self.head, Ordering::SeqCst);
            self.published = self.head;
        }
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
