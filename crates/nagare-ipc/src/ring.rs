//! Single-producer single-consumer rings of 64-byte descriptors inside a
//! region.
//!
//! A ring is three control lines and `slots` descriptor slots:
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
//! `head` and `tail` are free-running counters (wrapping at 2^32); slot
//! `i & (slots - 1)` holds descriptor `i`. The producer writes the slots with
//! relaxed stores and then publishes with a release store of `head`; the
//! consumer loads `head` with acquire, reads the slots, and hands them back
//! with a release store of `tail`.
//!
//! Each end keeps its own index in private memory and never reads it back
//! from the region. The peer's index is validated on every load: the tail the
//! producer reads must lie between the last tail it saw and its own head; the
//! head the consumer reads must lie between the last head it saw and its own
//! tail plus the capacity. Anything else (out of range, moving backwards,
//! more than the capacity ahead) is an error that marks the ring broken:
//! every later call returns [`RingError::Broken`], and the owner is expected
//! to disconnect the peer. Slot indices are always masked, so no value the
//! peer writes can make us touch memory outside the ring.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::region::Mapping;

/// The size of one descriptor slot.
pub const SLOT_LEN: usize = 64;
/// The size of a ring's control lines (head; tail and polling flag).
pub const RING_HEADER_LEN: usize = 2 * 64;
const HEAD_OFF: u64 = 0;
const TAIL_OFF: u64 = 64;
const POLLING_OFF: u64 = 68;
const WORDS: usize = SLOT_LEN / 8;

/// `Descriptor::buffer` when the descriptor names no buffer.
pub const NO_BUFFER: u32 = u32::MAX;

/// One request or completion: 64 bytes, one cache line. The meaning of
/// `kind`, `flags`, `status` and `aux` belongs to the protocol above; the
/// buffer fields are checked by [`crate::Pool::take`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// Operation.
    pub kind: u32,
    /// Operation flags.
    pub flags: u32,
    /// Request identifier, returned in the completion (and, for a multi-stage
    /// request, the return address).
    pub id: u64,
    /// Buffer index, or [`NO_BUFFER`].
    pub buffer: u32,
    /// Offset of the data in the buffer.
    pub offset: u32,
    /// Length of the data.
    pub len: u32,
    /// Result of a completion (0 or a negative errno).
    pub status: i32,
    /// Operation-specific words (addresses, ports, socket handles).
    pub aux: [u64; 4],
}

impl Descriptor {
    fn to_words(self) -> [u64; WORDS] {
        [
            u64::from(self.kind) | u64::from(self.flags) << 32,
            self.id,
            u64::from(self.buffer) | u64::from(self.offset) << 32,
            u64::from(self.len) | u64::from(self.status as u32) << 32,
            self.aux[0],
            self.aux[1],
            self.aux[2],
            self.aux[3],
        ]
    }

    fn from_words(w: [u64; WORDS]) -> Descriptor {
        Descriptor {
            kind: w[0] as u32,
            flags: (w[0] >> 32) as u32,
            id: w[1],
            buffer: w[2] as u32,
            offset: (w[2] >> 32) as u32,
            len: w[3] as u32,
            status: (w[3] >> 32) as u32 as i32,
            aux: [w[4], w[5], w[6], w[7]],
        }
    }
}

/// A violation of the ring protocol by the peer. The first one marks the
/// ring broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The producer's head is more than the capacity ahead of our tail.
    HeadOutOfRange {
        /// The head read from the region.
        seen: u32,
        /// Our tail.
        tail: u32,
    },
    /// The producer's head moved backwards.
    HeadBackwards {
        /// The head read from the region.
        seen: u32,
        /// The last head we accepted.
        last: u32,
    },
    /// The consumer's tail is ahead of our head.
    TailOutOfRange {
        /// The tail read from the region.
        seen: u32,
        /// Our head.
        head: u32,
    },
    /// The consumer's tail moved backwards.
    TailBackwards {
        /// The tail read from the region.
        seen: u32,
        /// The last tail we accepted.
        last: u32,
    },
    /// An earlier violation broke the ring; nothing more goes through it.
    Broken,
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RingError::HeadOutOfRange { seen, tail } => {
                write!(f, "ring: peer head {seen} more than the capacity past tail {tail}")
            }
            RingError::HeadBackwards { seen, last } => write!(f, "ring: peer head moved back from {last} to {seen}"),
            RingError::TailOutOfRange { seen, head } => write!(f, "ring: peer tail {seen} past head {head}"),
            RingError::TailBackwards { seen, last } => write!(f, "ring: peer tail moved back from {last} to {seen}"),
            RingError::Broken => write!(f, "ring: broken by an earlier protocol violation"),
        }
    }
}

impl std::error::Error for RingError {}

/// Pointers to one ring inside a mapping that the `Arc` keeps alive.
#[derive(Debug)]
struct RingMem {
    /// Keeps the mapping alive as long as `base` is used.
    _map: Arc<Mapping>,
    base: *mut u8,
    mask: u32,
}

// SAFETY: `base` points into `map`, which is Send + Sync and kept alive by
// the `Arc`; every access through it is atomic.
unsafe impl Send for RingMem {}

impl RingMem {
    fn new(map: Arc<Mapping>, offset: u64, slots: u32) -> RingMem {
        debug_assert!(slots.is_power_of_two());
        // `at` asserts the start is inside the mapping; the layout placed the
        // whole ring (control lines and slots) inside it.
        let base = map.at(offset);
        debug_assert_eq!(base as usize % 64, 0);
        RingMem { _map: map, base, mask: slots - 1 }
    }

    fn u32_at(&self, off: u64) -> &AtomicU32 {
        // SAFETY: `off` is one of the control-line offsets, inside the ring's
        // first RING_HEADER_LEN bytes, which the validated layout put inside
        // the mapping at a 64-byte-aligned address. An `AtomicU32` tolerates
        // concurrent writes by the peer and has no invalid values. The
        // reference cannot outlive `self`, whose `Arc` keeps the mapping.
        unsafe { &*self.base.add(off as usize).cast::<AtomicU32>() }
    }

    fn head(&self) -> &AtomicU32 {
        self.u32_at(HEAD_OFF)
    }

    fn tail(&self) -> &AtomicU32 {
        self.u32_at(TAIL_OFF)
    }

    fn polling(&self) -> &AtomicU32 {
        self.u32_at(POLLING_OFF)
    }

    fn slot_word(&self, index: u32, w: usize) -> &AtomicU64 {
        let slot = (index & self.mask) as usize;
        debug_assert!(w < WORDS);
        // SAFETY: `slot <= mask < slots`, `w < 8`, so the word lies inside the
        // ring's slot array, which the layout put inside the mapping; slots are
        // 64-byte aligned, so the word is 8-aligned. Atomic, as above.
        unsafe { &*self.base.add(RING_HEADER_LEN + slot * SLOT_LEN + w * 8).cast::<AtomicU64>() }
    }

    fn write(&self, index: u32, d: &Descriptor) {
        for (w, v) in d.to_words().into_iter().enumerate() {
            self.slot_word(index, w).store(v, Ordering::Relaxed);
        }
    }

    fn read(&self, index: u32) -> Descriptor {
        let mut words = [0u64; WORDS];
        for (w, v) in words.iter_mut().enumerate() {
            *v = self.slot_word(index, w).load(Ordering::Relaxed);
        }
        Descriptor::from_words(words)
    }

    fn capacity(&self) -> u32 {
        self.mask + 1
    }
}

/// The producing end of a ring.
#[derive(Debug)]
pub struct Producer {
    mem: RingMem,
    /// Ours; never read back from the region.
    head: u32,
    /// The last tail read from the region and accepted.
    tail: u32,
    broken: Option<RingError>,
    pushed: u64,
}

impl Producer {
    pub(crate) fn new(map: Arc<Mapping>, offset: u64, slots: u32) -> Producer {
        Producer { mem: RingMem::new(map, offset, slots), head: 0, tail: 0, broken: None, pushed: 0 }
    }

    /// A producer that carries on where a predecessor on this side left
    /// off (a restarted driver taking over an application's ring): starts
    /// at the head and tail now in the region. A pair that makes no sense
    /// (more in flight than the ring holds) gives a broken end.
    pub(crate) fn resumed(map: Arc<Mapping>, offset: u64, slots: u32) -> Producer {
        let mut p = Producer::new(map, offset, slots);
        let head = p.mem.head().load(Ordering::Acquire);
        let tail = p.mem.tail().load(Ordering::Acquire);
        p.head = head;
        p.tail = tail;
        if head.wrapping_sub(tail) > p.capacity() {
            p.broken = Some(RingError::TailOutOfRange { seen: tail, head });
        }
        p
    }

    fn fail(&mut self, e: RingError) -> RingError {
        self.broken = Some(e);
        e
    }

    /// Loads the consumer's tail and checks it lies in `last tail ..= head`.
    fn refresh_tail(&mut self) -> Result<(), RingError> {
        let t = self.mem.tail().load(Ordering::Acquire);
        let in_flight = self.head.wrapping_sub(self.tail);
        if t.wrapping_sub(self.tail) > in_flight {
            // Not inside the window: behind the last tail (backwards) or past our head.
            let e = if self.head.wrapping_sub(t) <= self.capacity() {
                RingError::TailBackwards { seen: t, last: self.tail }
            } else {
                RingError::TailOutOfRange { seen: t, head: self.head }
            };
            return Err(self.fail(e));
        }
        self.tail = t;
        Ok(())
    }

    /// The number of slots.
    pub fn capacity(&self) -> u32 {
        self.mem.capacity()
    }

    /// Free slots, after reading the consumer's tail.
    pub fn free(&mut self) -> Result<u32, RingError> {
        self.check()?;
        self.refresh_tail()?;
        Ok(self.capacity() - self.head.wrapping_sub(self.tail))
    }

    fn check(&self) -> Result<(), RingError> {
        match self.broken {
            Some(_) => Err(RingError::Broken),
            None => Ok(()),
        }
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
        let mut free = self.capacity() - self.head.wrapping_sub(self.tail);
        if (free as usize) < descs.len() {
            self.refresh_tail()?;
            free = self.capacity() - self.head.wrapping_sub(self.tail);
        }
        let n = descs.len().min(free as usize);
        if n == 0 {
            return Ok(0);
        }
        for (i, d) in descs[..n].iter().enumerate() {
            self.mem.write(self.head.wrapping_add(i as u32), d);
        }
        self.head = self.head.wrapping_add(n as u32);
        if sc {
            self.mem.head().swap(self.head, Ordering::SeqCst);
        } else {
            self.mem.head().store(self.head, Ordering::Release);
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
        self.head
    }

    /// Descriptors pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// The violation that broke the ring, if any.
    pub fn broken(&self) -> Option<RingError> {
        self.broken
    }

    /// The consumer's tail as it is now, unvalidated (used only to compare
    /// with our own head when deciding whether to wake the consumer).
    pub(crate) fn peek_tail(&self) -> u32 {
        self.mem.tail().load(Ordering::Relaxed)
    }

    /// The consumer's polling flag.
    pub(crate) fn polling_flag(&self) -> &AtomicU32 {
        self.mem.polling()
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
    /// Ours; never read back from the region.
    tail: u32,
    /// The last head read from the region and accepted.
    head: u32,
    broken: Option<RingError>,
    popped: u64,
}

impl Consumer {
    pub(crate) fn new(map: Arc<Mapping>, offset: u64, slots: u32) -> Consumer {
        Consumer { mem: RingMem::new(map, offset, slots), tail: 0, head: 0, broken: None, popped: 0 }
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

    /// Loads the producer's head and checks it lies in `last head ..= tail + capacity`.
    fn refresh_head(&mut self) -> Result<(), RingError> {
        let h = self.mem.head().load(Ordering::Acquire);
        let ahead = h.wrapping_sub(self.tail);
        if ahead > self.capacity() {
            let e = if self.head.wrapping_sub(h) <= self.capacity() && h != self.head {
                RingError::HeadBackwards { seen: h, last: self.head }
            } else {
                RingError::HeadOutOfRange { seen: h, tail: self.tail }
            };
            return Err(self.fail(e));
        }
        if ahead < self.head.wrapping_sub(self.tail) {
            return Err(self.fail(RingError::HeadBackwards { seen: h, last: self.head }));
        }
        self.head = h;
        Ok(())
    }

    /// The number of slots.
    pub fn capacity(&self) -> u32 {
        self.mem.capacity()
    }

    /// Descriptors waiting, after reading the producer's head.
    pub fn available(&mut self) -> Result<u32, RingError> {
        self.check()?;
        self.refresh_head()?;
        Ok(self.head.wrapping_sub(self.tail))
    }

    /// Pops up to `out.len()` descriptors into `out` (copies in private
    /// memory), releasing their slots with one store of the tail.
    pub fn pop_batch(&mut self, out: &mut [Descriptor]) -> Result<usize, RingError> {
        self.check()?;
        let mut ready = self.head.wrapping_sub(self.tail);
        if (ready as usize) < out.len() {
            self.refresh_head()?;
            ready = self.head.wrapping_sub(self.tail);
        }
        let n = out.len().min(ready as usize);
        if n == 0 {
            return Ok(0);
        }
        for (i, d) in out[..n].iter_mut().enumerate() {
            *d = self.mem.read(self.tail.wrapping_add(i as u32));
        }
        self.tail = self.tail.wrapping_add(n as u32);
        self.mem.tail().store(self.tail, Ordering::Release);
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
    use crate::region::{Region, RegionConfig};

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

    /// A producer and a consumer on the same ring (two views of one region).
    fn same_ring(slots: u32) -> (Region, Region, Producer, Consumer) {
        let r = Region::create("ring-test", RegionConfig::pair(slots, 0, 64)).unwrap();
        let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let p = a.producer(0).unwrap();
        let c = r.consumer(0).unwrap();
        (r, a, p, c)
    }

    #[test]
    fn descriptor_round_trips_through_words() {
        let x = Descriptor {
            kind: u32::MAX,
            flags: 1,
            id: u64::MAX - 1,
            buffer: 5,
            offset: 9,
            len: 10,
            status: -22,
            aux: [1, 2, 3, u64::MAX],
        };
        assert_eq!(Descriptor::from_words(x.to_words()), x);
    }

    #[test]
    fn fifo_order_and_wraparound() {
        let (_r, _a, mut p, mut c) = same_ring(8);
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
        let (_r, _a, mut p, mut c) = same_ring(4);
        let batch: Vec<_> = (0..6).map(d).collect();
        assert_eq!(p.push_batch(&batch).unwrap(), 4);
        assert!(!p.push(&d(9)).unwrap());
        assert_eq!(c.pop().unwrap(), Some(d(0)));
        assert!(p.push(&d(9)).unwrap());
        assert_eq!(p.free().unwrap(), 0);
    }

    #[test]
    fn head_too_far_ahead_breaks_the_consumer() {
        let (_r, _a, p, mut c) = same_ring(8);
        p.scribble_head(9);
        assert_eq!(c.available(), Err(RingError::HeadOutOfRange { seen: 9, tail: 0 }));
        p.scribble_head(1);
        assert_eq!(c.pop(), Err(RingError::Broken));
        assert!(c.broken().is_some());
    }

    #[test]
    fn head_moving_back_breaks_the_consumer() {
        let (_r, _a, mut p, mut c) = same_ring(8);
        p.push_batch(&[d(0), d(1), d(2)]).unwrap();
        assert_eq!(c.pop().unwrap(), Some(d(0)));
        assert_eq!(c.available().unwrap(), 2);
        p.scribble_head(2);
        assert_eq!(c.available(), Err(RingError::HeadBackwards { seen: 2, last: 3 }));
    }

    #[test]
    fn head_behind_tail_breaks_the_consumer() {
        let (_r, _a, mut p, mut c) = same_ring(8);
        p.push_batch(&[d(0), d(1)]).unwrap();
        assert_eq!(c.pop_batch(&mut [Descriptor::default(); 2]).unwrap(), 2);
        p.scribble_head(u32::MAX);
        assert!(matches!(c.available(), Err(RingError::HeadBackwards { .. })));
    }

    #[test]
    fn tail_past_head_breaks_the_producer() {
        let (_r, _a, mut p, c) = same_ring(8);
        p.push_batch(&[d(0), d(1)]).unwrap();
        c.scribble_tail(3);
        assert_eq!(p.free(), Err(RingError::TailOutOfRange { seen: 3, head: 2 }));
        assert_eq!(p.push(&d(5)), Err(RingError::Broken));
    }

    #[test]
    fn tail_moving_back_breaks_the_producer() {
        let (_r, _a, mut p, mut c) = same_ring(8);
        p.push_batch(&[d(0), d(1), d(2)]).unwrap();
        c.pop_batch(&mut [Descriptor::default(); 2]).unwrap();
        assert_eq!(p.free().unwrap(), 7);
        c.scribble_tail(1);
        assert_eq!(p.free(), Err(RingError::TailBackwards { seen: 1, last: 2 }));
    }

    #[test]
    fn indices_wrap_at_u32() {
        let (_r, _a, mut p, mut c) = same_ring(4);
        // Start both ends just below the wrap.
        p.head = u32::MAX - 1;
        p.tail = u32::MAX - 1;
        c.tail = u32::MAX - 1;
        c.head = u32::MAX - 1;
        c.scribble_tail(u32::MAX - 1);
        for i in 0..20 {
            assert!(p.push(&d(i)).unwrap());
            assert_eq!(c.pop().unwrap(), Some(d(i)));
        }
        assert_eq!(p.head(), 18);
    }

    #[test]
    fn a_resumed_producer_carries_on_where_its_predecessor_stopped() {
        let r = crate::region::Region::create("ring-resume", crate::region::RegionConfig::pair(8, 0, 64)).unwrap();
        let a = crate::region::Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let mut c = r.consumer(0).unwrap();
        {
            let mut p = a.producer(0).unwrap();
            p.push_batch(&[Descriptor { id: 1, ..Default::default() }, Descriptor { id: 2, ..Default::default() }])
                .unwrap();
        }
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(1));
        // The first producer is gone; a delegate of the same side takes over.
        let b = crate::region::Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let mut p = b.resume_producer(0).unwrap();
        assert_eq!(p.free().unwrap(), 7);
        p.push(&Descriptor { id: 3, ..Default::default() }).unwrap();
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(2));
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(3));
        assert_eq!(c.pop().unwrap(), None);
    }
}
