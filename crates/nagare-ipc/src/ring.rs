//! Single-producer single-consumer rings of 64-byte [`Descriptor`]s inside a
//! mapping: the [`crate::spsc`] index protocol with descriptor slots, the
//! consumer's polling flag, and a ring end that stops at the first
//! violation.
//!
//! A ring is the two control lines of [`crate::spsc`] and `slots`
//! descriptor slots:
//!
//! ```text
//!   +0    head     u32, written by the producer only (own cache line)
//!   +64   tail     u32, written by the consumer only
//!   +68   polling  u32, written by the consumer: 1 while it is awake (see
//!                  notify); on the tail's line, so the producer's wake-up
//!                  check reads one line the consumer wrote, not two
//!   +128  slot[0], slot[1], ... each 64 bytes = 8 × u64
//! ```
//!
//! The producer writes a slot's words with relaxed atomic stores, then
//! publishes (release store or, with a notifier, SeqCst swap of `head`); the
//! consumer loads `head` with acquire, copies the words out with relaxed
//! atomic loads into a private [`Descriptor`], and hands the slots back with
//! a release store of `tail`.
//!
//! Every index read from the peer is validated by [`crate::spsc`]. The
//! first violation marks the ring end broken: every later call returns
//! [`RingError::Broken`], and the owner is expected to disconnect the peer
//! (a client that breaks its ring has nothing more to say to the server).
//! Slot indices are always masked, so no value the peer writes can make us
//! touch memory outside the ring.
//!
//! Why the VNI's frame rings (`nagare-dev`) share the index protocol but
//! not this module: their slots hold frames of variable length up to the
//! MTU (a length word and raw bytes, written in place by the application)
//! where these hold one fixed 64-byte descriptor copied as eight atomic
//! words; their consumer's polling flag is one per port and covers all of
//! the port's incoming rings, where this one is per ring; and a violation
//! there resynchronises the ring instead of breaking it, since a segment is
//! shared by many processes and one bad one must not stop a port.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::descriptor::{Descriptor, WORDS};
use crate::mapping::Mapping;
pub use crate::spsc::RingError;
use crate::spsc::{ConsumerIndex, ProducerIndex, Withdrawal, CONTROL_LEN, HEAD, TAIL};

/// The size of one descriptor slot.
pub const SLOT_LEN: usize = WORDS * 8;
/// The size of a ring's control lines (head; tail and polling flag).
pub const RING_HEADER_LEN: usize = CONTROL_LEN;
const POLLING: usize = TAIL + 4;

/// Bytes of a ring of `slots` descriptors, control lines included.
pub fn ring_len(slots: u32) -> u64 {
    RING_HEADER_LEN as u64 + u64::from(slots) * SLOT_LEN as u64
}

/// Pointers to one ring inside a mapping that the `Arc` keeps alive.
#[derive(Debug)]
struct RingMem {
    /// Keeps the mapping alive as long as `base` is used.
    _map: Arc<Mapping>,
    base: *mut u8,
}

// SAFETY: `base` points into `map`, which is Send + Sync and kept alive by
// the `Arc`; every access through it is atomic.
unsafe impl Send for RingMem {}

impl RingMem {
    fn new(map: Arc<Mapping>, offset: u64, slots: u32) -> RingMem {
        assert!(slots.is_power_of_two(), "ring slots {slots} not a power of two");
        let inside = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(ring_len(slots)).ok())
            .is_some_and(|(off, len)| map.contains(off, len));
        assert!(inside, "ring at {offset} with {slots} slots outside the mapping");
        let base = map.at(offset);
        assert_eq!(base as usize % 64, 0, "ring at {offset} not 64-byte aligned");
        RingMem { _map: map, base }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is one of the control-line offsets, inside the ring's
        // first RING_HEADER_LEN bytes, which `new` checked lie inside the
        // mapping at a 64-byte-aligned address. An `AtomicU32` tolerates
        // concurrent writes by the peer and has no invalid values. The
        // reference cannot outlive `self`, whose `Arc` keeps the mapping.
        unsafe { &*self.base.add(off).cast::<AtomicU32>() }
    }

    fn head(&self) -> &AtomicU32 {
        self.u32_at(HEAD)
    }

    fn tail(&self) -> &AtomicU32 {
        self.u32_at(TAIL)
    }

    fn polling(&self) -> &AtomicU32 {
        self.u32_at(POLLING)
    }

    /// Word `w` of slot `slot` (already masked by the index).
    fn slot_word(&self, slot: u32, w: usize) -> &AtomicU64 {
        debug_assert!(w < WORDS);
        // SAFETY: the index masks `slot` below the slot count, `w < 8`, so the
        // word lies inside the ring's slot array, which `new` checked lies
        // inside the mapping; slots are 64-byte aligned, so the word is
        // 8-aligned. Atomic, as above.
        unsafe { &*self.base.add(RING_HEADER_LEN + slot as usize * SLOT_LEN + w * 8).cast::<AtomicU64>() }
    }

    fn write(&self, slot: u32, d: &Descriptor) {
        for (w, v) in d.to_words().into_iter().enumerate() {
            self.slot_word(slot, w).store(v, Ordering::Relaxed);
        }
    }

    fn read(&self, slot: u32) -> Descriptor {
        let mut words = [0u64; WORDS];
        for (w, v) in words.iter_mut().enumerate() {
            *v = self.slot_word(slot, w).load(Ordering::Relaxed);
        }
        Descriptor::from_words(words)
    }
}

/// The producing end of a ring.
#[derive(Debug)]
pub struct Producer {
    mem: RingMem,
    idx: ProducerIndex,
    broken: Option<RingError>,
    pushed: u64,
}

impl Producer {
    /// The producer of the ring of `slots` slots at `offset` in `map`, from
    /// position 0 (a fresh, zeroed ring).
    pub(crate) fn new(map: Arc<Mapping>, offset: u64, slots: u32) -> Producer {
        Producer { mem: RingMem::new(map, offset, slots), idx: ProducerIndex::new(slots), broken: None, pushed: 0 }
    }

    /// A producer that carries on where a predecessor on this side left
    /// off (a restarted driver taking over an application's ring): starts
    /// at the head and tail now in the region. A pair that makes no sense
    /// (more in flight than the ring holds) gives a broken end.
    pub(crate) fn resumed(map: Arc<Mapping>, offset: u64, slots: u32) -> Producer {
        let mut p = Producer::new(map, offset, slots);
        match ProducerIndex::resume(slots, p.mem.head(), p.mem.tail()) {
            Ok(idx) => p.idx = idx,
            Err(e) => p.broken = Some(e),
        }
        p
    }

    fn fail(&mut self, e: RingError) -> RingError {
        self.broken = Some(e);
        e
    }

    fn check(&self) -> Result<(), RingError> {
        match self.broken {
            Some(_) => Err(RingError::Broken),
            None => Ok(()),
        }
    }

    /// The number of slots.
    pub fn capacity(&self) -> u32 {
        self.idx.capacity()
    }

    /// Free slots, after reading the consumer's tail.
    pub fn free(&mut self) -> Result<u32, RingError> {
        self.check()?;
        self.idx.load_tail(self.mem.tail()).map_err(|e| self.fail(e))
    }

    /// Pushes as many of `descs` as fit, publishing them with one store of
    /// the head; returns how many went in (0 if the ring is full).
    pub fn push_batch(&mut self, descs: &[Descriptor]) -> Result<usize, RingError> {
        self.push_inner(descs, false)
    }

    /// As `push_batch`, but publishes the head with a sequentially
    /// consistent swap, which also serves as the notifier's store-load
    /// barrier (on x86 one `xchg` instead of a store and an `mfence`).
    pub(crate) fn push_batch_sc(&mut self, descs: &[Descriptor]) -> Result<usize, RingError> {
        self.push_inner(descs, true)
    }

    fn push_inner(&mut self, descs: &[Descriptor], sc: bool) -> Result<usize, RingError> {
        self.check()?;
        let mut free = self.idx.free();
        if (free as usize) < descs.len() {
            free = self.idx.load_tail(self.mem.tail()).map_err(|e| self.fail(e))?;
        }
        let n = descs.len().min(free as usize);
        if n == 0 {
            return Ok(0);
        }
        for (i, d) in descs[..n].iter().enumerate() {
            self.mem.write(self.idx.slot(i as u32), d);
        }
        self.idx.advance(n as u32);
        if sc {
            self.idx.publish_sc(self.mem.head());
        } else {
            self.idx.publish(self.mem.head());
        }
        self.pushed += n as u64;
        Ok(n)
    }

    /// Pushes one descriptor; `false` if the ring is full.
    pub fn push(&mut self, d: &Descriptor) -> Result<bool, RingError> {
        Ok(self.push_batch(std::slice::from_ref(d))? == 1)
    }

    /// Our head (the count of descriptors ever pushed, wrapping).
    pub fn head(&self) -> u32 {
        self.idx.head()
    }

    /// Descriptors pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// The violation that broke the ring, if any.
    pub fn broken(&self) -> Option<RingError> {
        self.broken
    }

    /// The consumer's words the notifier reads after a push: its polling
    /// flag and its tail.
    pub(crate) fn wake_words(&self) -> (&AtomicU32, &AtomicU32) {
        (self.mem.polling(), self.mem.tail())
    }

    /// Writes the raw head word, bypassing the protocol (hostile-peer tests).
    #[doc(hidden)]
    pub fn scribble_head(&self, v: u32) {
        self.mem.head().store(v, Ordering::Release);
    }
}

/// The consuming end of a ring.
#[derive(Debug)]
pub struct Consumer {
    mem: RingMem,
    idx: ConsumerIndex,
    broken: Option<RingError>,
    popped: u64,
}

impl Consumer {
    /// The consumer of the ring of `slots` slots at `offset` in `map`, from
    /// position 0 (a fresh, zeroed ring).
    pub(crate) fn new(map: Arc<Mapping>, offset: u64, slots: u32) -> Consumer {
        Consumer {
            mem: RingMem::new(map, offset, slots),
            idx: ConsumerIndex::new(slots, Withdrawal::Refused),
            broken: None,
            popped: 0,
        }
    }

    fn fail(&mut self, e: RingError) -> RingError {
        self.broken = Some(e);
        e
    }

    fn check(&self) -> Result<(), RingError> {
        match self.broken {
            Some(_) => Err(RingError::Broken),
            None => Ok(()),
        }
    }

    /// The number of slots.
    pub fn capacity(&self) -> u32 {
        self.idx.capacity()
    }

    /// Descriptors waiting, after reading the producer's head.
    pub fn available(&mut self) -> Result<u32, RingError> {
        self.check()?;
        self.idx.load_head(self.mem.head()).map_err(|e| self.fail(e))
    }

    /// Pops up to `out.len()` descriptors into `out` (copies in private
    /// memory), releasing their slots with one store of the tail.
    pub fn pop_batch(&mut self, out: &mut [Descriptor]) -> Result<usize, RingError> {
        self.check()?;
        let mut ready = self.idx.available();
        if (ready as usize) < out.len() {
            ready = self.idx.load_head(self.mem.head()).map_err(|e| self.fail(e))?;
        }
        let n = out.len().min(ready as usize);
        if n == 0 {
            return Ok(0);
        }
        for (i, d) in out[..n].iter_mut().enumerate() {
            *d = self.mem.read(self.idx.slot(i as u32));
        }
        self.idx.advance(n as u32);
        self.idx.release(self.mem.tail());
        self.popped += n as u64;
        Ok(n)
    }

    /// Pops one descriptor.
    pub fn pop(&mut self) -> Result<Option<Descriptor>, RingError> {
        let mut d = [Descriptor::default()];
        Ok((self.pop_batch(&mut d)? == 1).then_some(d[0]))
    }

    /// Descriptors popped so far.
    pub fn popped(&self) -> u64 {
        self.popped
    }

    /// The violation that broke the ring, if any.
    pub fn broken(&self) -> Option<RingError> {
        self.broken
    }

    /// Our polling flag (written by us, read by the producer).
    pub(crate) fn polling_flag(&self) -> &AtomicU32 {
        self.mem.polling()
    }

    /// Writes the raw tail word, bypassing the protocol (hostile-peer tests).
    #[doc(hidden)]
    pub fn scribble_tail(&self, v: u32) {
        self.mem.tail().store(v, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::scratch;

    fn d(i: u64) -> Descriptor {
        Descriptor {
            kind: 7,
            id: i,
            buffer: i as u32,
            len: 3,
            status: -(i as i32),
            aux: [i, !i, 0, 1],
            ..Default::default()
        }
    }

    /// A producer and a consumer on one ring at the start of a mapping.
    fn same_ring(slots: u32) -> (Producer, Consumer) {
        let map = scratch(ring_len(slots).next_multiple_of(4096));
        (Producer::new(map.clone(), 0, slots), Consumer::new(map, 0, slots))
    }

    #[test]
    fn fifo_order_and_wraparound() {
        let (mut p, mut c) = same_ring(8);
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        let mut buf = [Descriptor::default(); 5];
        for round in 0..1000usize {
            let batch: Vec<_> = (0..(round as u64 % 7 + 1)).map(|k| d(next_in + k)).collect();
            let n = p.push_batch(&batch).unwrap();
            next_in += n as u64;
            let m = c.pop_batch(&mut buf[..(round % 5 + 1)]).unwrap();
            for x in &buf[..m] {
                assert_eq!(*x, d(next_out));
                next_out += 1;
            }
        }
        while let Some(x) = c.pop().unwrap() {
            assert_eq!(x, d(next_out));
            next_out += 1;
        }
        assert_eq!(next_in, next_out);
        assert!(next_in > 1000);
    }

    #[test]
    fn full_ring_refuses_more() {
        let (mut p, mut c) = same_ring(4);
        let batch: Vec<_> = (0..6).map(d).collect();
        assert_eq!(p.push_batch(&batch).unwrap(), 4);
        assert!(!p.push(&d(9)).unwrap());
        assert_eq!(c.pop().unwrap(), Some(d(0)));
        assert!(p.push(&d(9)).unwrap());
        assert_eq!(p.free().unwrap(), 0);
    }

    #[test]
    fn head_too_far_ahead_breaks_the_consumer() {
        let (p, mut c) = same_ring(8);
        p.scribble_head(9);
        assert_eq!(c.available(), Err(RingError::HeadOutOfRange { seen: 9, tail: 0 }));
        p.scribble_head(1);
        assert_eq!(c.pop(), Err(RingError::Broken));
        assert!(c.broken().is_some());
    }

    #[test]
    fn head_moving_back_breaks_the_consumer() {
        let (mut p, mut c) = same_ring(8);
        p.push_batch(&[d(0), d(1), d(2)]).unwrap();
        assert_eq!(c.pop().unwrap(), Some(d(0)));
        assert_eq!(c.available().unwrap(), 2);
        p.scribble_head(2);
        assert_eq!(c.available(), Err(RingError::HeadBackwards { seen: 2, last: 3 }));
    }

    #[test]
    fn head_behind_tail_breaks_the_consumer() {
        let (mut p, mut c) = same_ring(8);
        p.push_batch(&[d(0), d(1)]).unwrap();
        assert_eq!(c.pop_batch(&mut [Descriptor::default(); 2]).unwrap(), 2);
        p.scribble_head(u32::MAX);
        assert!(matches!(c.available(), Err(RingError::HeadBackwards { .. })));
    }

    #[test]
    fn tail_past_head_breaks_the_producer() {
        let (mut p, c) = same_ring(8);
        p.push_batch(&[d(0), d(1)]).unwrap();
        c.scribble_tail(3);
        assert_eq!(p.free(), Err(RingError::TailOutOfRange { seen: 3, head: 2 }));
        assert_eq!(p.push(&d(5)), Err(RingError::Broken));
    }

    #[test]
    fn tail_moving_back_breaks_the_producer() {
        let (mut p, mut c) = same_ring(8);
        p.push_batch(&[d(0), d(1), d(2)]).unwrap();
        c.pop_batch(&mut [Descriptor::default(); 2]).unwrap();
        assert_eq!(p.free().unwrap(), 7);
        c.scribble_tail(1);
        assert_eq!(p.free(), Err(RingError::TailBackwards { seen: 1, last: 2 }));
    }

    #[test]
    fn indices_wrap_at_u32() {
        let (mut p, mut c) = same_ring(4);
        // Start both ends just below the wrap.
        p.scribble_head(u32::MAX - 1);
        c.scribble_tail(u32::MAX - 1);
        p.idx = ProducerIndex::resume(4, p.mem.head(), p.mem.tail()).unwrap();
        c.idx = ConsumerIndex::take_over(4, Withdrawal::Refused, c.mem.head(), c.mem.tail());
        for i in 0..20 {
            assert!(p.push(&d(i)).unwrap());
            assert_eq!(c.pop().unwrap(), Some(d(i)));
        }
        assert_eq!(p.head(), 18);
    }

    #[test]
    fn a_resumed_producer_carries_on_where_its_predecessor_stopped() {
        let map = scratch(4096);
        let mut c = Consumer::new(map.clone(), 0, 8);
        {
            let mut p = Producer::new(map.clone(), 0, 8);
            p.push_batch(&[Descriptor { id: 1, ..Default::default() }, Descriptor { id: 2, ..Default::default() }])
                .unwrap();
        }
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(1));
        // The first producer is gone; a delegate of the same side takes over.
        let mut p = Producer::resumed(map.clone(), 0, 8);
        assert_eq!(p.free().unwrap(), 7);
        p.push(&Descriptor { id: 3, ..Default::default() }).unwrap();
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(2));
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(3));
        assert_eq!(c.pop().unwrap(), None);
    }

    #[test]
    fn a_resumed_producer_refuses_nonsense() {
        let map = scratch(4096);
        let p = Producer::new(map.clone(), 0, 8);
        p.scribble_head(100);
        let mut p = Producer::resumed(map, 0, 8);
        assert_eq!(p.broken(), Some(RingError::TailOutOfRange { seen: 0, head: 100 }));
        assert_eq!(p.push(&d(0)), Err(RingError::Broken));
    }

    #[test]
    #[should_panic(expected = "outside the mapping")]
    fn a_ring_must_lie_inside_its_mapping() {
        let map = scratch(4096);
        Producer::new(map, 4096 - 128, 2);
    }
}
