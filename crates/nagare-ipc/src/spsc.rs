//! The index protocol of every single-producer single-consumer ring nagare
//! keeps in shared memory: the descriptor rings of this crate
//! ([`crate::ring`]) and the VNI's rings of frame slots (`nagare-dev`). What
//! a slot holds belongs to them; where the two positions live, how they
//! move, in which order they are published and how a position written by
//! the peer is checked is here, once.
//!
//! A ring starts with two control lines (64-byte aligned), then its slots:
//!
//! ```text
//!   +0    head  u32, written by the producer only (a cache line of its own)
//!   +64   tail  u32, written by the consumer only; the rest of this line is
//!               the user's (the descriptor ring keeps the consumer's polling
//!               flag at +68)
//!   +128  slot[0], slot[1], ... capacity of them (a power of two), in the
//!               user's format
//! ```
//!
//! **Invariant.** `head` and `tail` are free-running `u32` counters
//! (wrapping at 2^32); slot `p & (capacity - 1)` holds the entry at
//! position `p`; `head - tail` (mod 2^32) is the number of entries in the
//! ring and never exceeds the capacity. Each end keeps its own position in
//! private memory ([`ProducerIndex`], [`ConsumerIndex`]) and never reads it
//! back from shared memory, so a scribbled counter cannot steer it.
//!
//! **Ordering.** The producer writes the slots, then publishes them with a
//! release store of `head` ([`ProducerIndex::publish`]), or with a
//! sequentially consistent swap when a wake-up decision follows (the
//! producer's half of the store-load handshake in [`crate::notify`]:
//! [`ProducerIndex::publish_sc`]). The consumer loads `head` with acquire,
//! reads the slots, and hands them back with a release store of `tail`; the
//! producer loads `tail` with acquire before it writes those slots again.
//!
//! **Validation.** Every position read from the peer is checked before use:
//!
//! - the tail the producer reads must lie between the last tail it accepted
//!   and its own head;
//! - the head the consumer reads must lie between the last head it accepted
//!   and its own tail plus the capacity. A ring whose producer may withdraw
//!   entries it published that the consumer has not read yet
//!   ([`Withdrawal::Allowed`]: the VNI, where a process that takes over a
//!   port empties its rings) lowers that floor to the consumer's own tail.
//!
//! Anything else (out of range, moving backwards, more than the capacity
//! ahead) is a [`RingError`], and nothing of it is taken over. What follows
//! is the user's policy: the descriptor ring stops for good (its owner
//! disconnects the peer); the VNI starts again from the peer's value and
//! counts it, because one bad process must not stop a port that others
//! share. Slot indices are always masked, so no value the peer writes can
//! make a user touch memory outside the ring.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

/// Offset of the producer's position in a ring.
pub const HEAD: usize = 0;
/// Offset of the consumer's position in a ring.
pub const TAIL: usize = 64;
/// Bytes of a ring's control lines: its slots start here.
pub const CONTROL_LEN: usize = 128;

/// A violation of the ring protocol by the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The producer's head is more than the capacity ahead of our tail.
    HeadOutOfRange {
        /// The head read from the ring.
        seen: u32,
        /// Our tail.
        tail: u32,
    },
    /// The producer's head moved backwards.
    HeadBackwards {
        /// The head read from the ring.
        seen: u32,
        /// The last head we accepted.
        last: u32,
    },
    /// The consumer's tail is ahead of our head.
    TailOutOfRange {
        /// The tail read from the ring.
        seen: u32,
        /// Our head.
        head: u32,
    },
    /// The consumer's tail moved backwards.
    TailBackwards {
        /// The tail read from the ring.
        seen: u32,
        /// The last tail we accepted.
        last: u32,
    },
    /// An earlier violation broke the ring; nothing more goes through it
    /// (returned by ring ends that stop at the first violation, never by
    /// the indices themselves).
    Broken,
}

impl RingError {
    /// The position read from the peer that was refused (`None` for
    /// [`RingError::Broken`]).
    pub fn seen(&self) -> Option<u32> {
        match *self {
            RingError::HeadOutOfRange { seen, .. }
            | RingError::HeadBackwards { seen, .. }
            | RingError::TailOutOfRange { seen, .. }
            | RingError::TailBackwards { seen, .. } => Some(seen),
            RingError::Broken => None,
        }
    }
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

fn mask_of(capacity: u32) -> u32 {
    assert!(capacity.is_power_of_two(), "ring capacity {capacity} is not a power of two");
    capacity - 1
}

/// The producer's positions: its own head (private), the head it last
/// published, and the consumer's tail it last accepted.
#[derive(Clone, Copy, Debug)]
pub struct ProducerIndex {
    /// Next position to fill; ours, never read back from shared memory.
    head: u32,
    /// The head last stored in shared memory.
    published: u32,
    /// The last tail read from shared memory and accepted.
    tail: u32,
    mask: u32,
}

impl ProducerIndex {
    /// An empty ring at position 0, as a freshly zeroed ring is.
    pub fn new(capacity: u32) -> ProducerIndex {
        ProducerIndex { head: 0, published: 0, tail: 0, mask: mask_of(capacity) }
    }

    /// Carries on from the head and tail now in the ring (a delegate that
    /// takes over from one that died); a pair with more in flight than the
    /// ring holds is refused.
    pub fn resume(capacity: u32, head: &AtomicU32, tail: &AtomicU32) -> Result<ProducerIndex, RingError> {
        let mut p = ProducerIndex::new(capacity);
        let h = head.load(Ordering::Acquire);
        let t = tail.load(Ordering::Acquire);
        if h.wrapping_sub(t) > p.capacity() {
            return Err(RingError::TailOutOfRange { seen: t, head: h });
        }
        (p.head, p.published, p.tail) = (h, h, t);
        Ok(p)
    }

    /// Takes the ring over and empties it: the head is set to the
    /// consumer's tail, so nothing a previous producer published and the
    /// consumer has not read is delivered (the consumer must allow that:
    /// [`Withdrawal::Allowed`]).
    pub fn take_over(capacity: u32, head: &AtomicU32, tail: &AtomicU32) -> ProducerIndex {
        let t = tail.load(Ordering::Acquire);
        head.store(t, Ordering::SeqCst);
        ProducerIndex { head: t, published: t, tail: t, mask: mask_of(capacity) }
    }

    /// The number of slots.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.mask + 1
    }

    /// Our head: the next position to fill, published or not.
    #[inline]
    pub fn head(&self) -> u32 {
        self.head
    }

    /// The head last published.
    #[inline]
    pub fn published(&self) -> u32 {
        self.published
    }

    /// Whether positions were filled since the last publish.
    #[inline]
    pub fn has_unpublished(&self) -> bool {
        self.head != self.published
    }

    /// Free slots as the last accepted tail says (no load).
    #[inline]
    pub fn free(&self) -> u32 {
        self.capacity() - self.head.wrapping_sub(self.tail)
    }

    /// The slot of the `k`-th free position (`k < free()`), masked.
    #[inline]
    pub fn slot(&self, k: u32) -> u32 {
        self.head.wrapping_add(k) & self.mask
    }

    /// Checks a tail read from the consumer: it must lie in
    /// `last tail ..= head`. Accepted, it becomes the last tail and the
    /// free slots are returned; refused, nothing changes.
    #[inline]
    pub fn accept_tail(&mut self, t: u32) -> Result<u32, RingError> {
        let in_flight = self.head.wrapping_sub(self.tail);
        if t.wrapping_sub(self.tail) > in_flight {
            // Outside the window: behind the last tail or past our head.
            return Err(if self.head.wrapping_sub(t) <= self.capacity() {
                RingError::TailBackwards { seen: t, last: self.tail }
            } else {
                RingError::TailOutOfRange { seen: t, head: self.head }
            });
        }
        self.tail = t;
        Ok(self.free())
    }

    /// Loads the consumer's tail (acquire: the slots it hands back are read
    /// before we write them again) and checks it ([`Self::accept_tail`]).
    #[inline]
    pub fn load_tail(&mut self, tail: &AtomicU32) -> Result<u32, RingError> {
        self.accept_tail(tail.load(Ordering::Acquire))
    }

    /// Moves the head past `n` filled slots (`n <= free()`); they stay
    /// invisible to the consumer until published.
    #[inline]
    pub fn advance(&mut self, n: u32) {
        debug_assert!(n <= self.free());
        self.head = self.head.wrapping_add(n);
    }

    /// Publishes the filled slots with a release store of the head; returns
    /// the head published before.
    #[inline]
    pub fn publish(&mut self, head: &AtomicU32) -> u32 {
        let before = self.published;
        head.store(self.head, Ordering::Release);
        self.published = self.head;
        before
    }

    /// As [`Self::publish`], with a sequentially consistent swap: the
    /// producer's store-load barrier of the wake-up handshake
    /// ([`crate::notify::wake_decision`] loads next), on x86 one `xchg`
    /// instead of a store and an `mfence`.
    #[inline]
    pub fn publish_sc(&mut self, head: &AtomicU32) -> u32 {
        let before = self.published;
        head.swap(self.head, Ordering::SeqCst);
        self.published = self.head;
        before
    }

    /// Starts again from a tail the consumer wrote (after a refused one, on
    /// a ring that resynchronises): the ring is empty from here; the next
    /// publish stores the new head.
    #[inline]
    pub fn resync(&mut self, t: u32) {
        self.head = t;
        self.tail = t;
    }
}

/// Whether the producer may take back entries it published that the
/// consumer has not read yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withdrawal {
    /// A head that moves backwards is a violation (the descriptor rings:
    /// what was published is a request the peer is committed to).
    Refused,
    /// A head may move back, never behind the consumer's own tail (the
    /// VNI: a process taking over a port drops the frames its predecessor
    /// left in the rings).
    Allowed,
}

/// The consumer's positions: its own tail (private), the tail it last
/// handed back, and the producer's head it last accepted.
#[derive(Clone, Copy, Debug)]
pub struct ConsumerIndex {
    /// Next position to read; ours, never read back from shared memory.
    tail: u32,
    /// The tail last stored in shared memory.
    released: u32,
    /// The last head read from shared memory and accepted.
    head: u32,
    mask: u32,
    withdrawal: Withdrawal,
}

impl ConsumerIndex {
    /// An empty ring at position 0, as a freshly zeroed ring is.
    pub fn new(capacity: u32, withdrawal: Withdrawal) -> ConsumerIndex {
        ConsumerIndex { tail: 0, released: 0, head: 0, mask: mask_of(capacity), withdrawal }
    }

    /// Takes the ring over and empties it: the tail is set to the
    /// producer's head, so nothing a previous consumer left unread is
    /// delivered.
    pub fn take_over(capacity: u32, withdrawal: Withdrawal, head: &AtomicU32, tail: &AtomicU32) -> ConsumerIndex {
        let h = head.load(Ordering::Acquire);
        tail.store(h, Ordering::SeqCst);
        ConsumerIndex { tail: h, released: h, head: h, mask: mask_of(capacity), withdrawal }
    }

    /// The number of slots.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.mask + 1
    }

    /// Our tail: the next position to read.
    #[inline]
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// Entries waiting as the last accepted head says (no load).
    #[inline]
    pub fn available(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// The slot of the `k`-th waiting position (`k < available()`), masked.
    #[inline]
    pub fn slot(&self, k: u32) -> u32 {
        self.tail.wrapping_add(k) & self.mask
    }

    /// Checks a head read from the producer: it must lie in
    /// `last head ..= tail + capacity` (from our tail with
    /// [`Withdrawal::Allowed`]). Accepted, it becomes the last head and the
    /// entries waiting are returned; refused, nothing changes.
    #[inline]
    pub fn accept_head(&mut self, h: u32) -> Result<u32, RingError> {
        let floor = match self.withdrawal {
            Withdrawal::Refused => self.head,
            Withdrawal::Allowed => self.tail,
        };
        let ahead = h.wrapping_sub(self.tail);
        if ahead > self.capacity() {
            return Err(if floor.wrapping_sub(h) <= self.capacity() && h != floor {
                RingError::HeadBackwards { seen: h, last: self.head }
            } else {
                RingError::HeadOutOfRange { seen: h, tail: self.tail }
            });
        }
        if ahead < floor.wrapping_sub(self.tail) {
            return Err(RingError::HeadBackwards { seen: h, last: self.head });
        }
        self.head = h;
        Ok(ahead)
    }

    /// Loads the producer's head (acquire: the slots it published are
    /// visible) and checks it ([`Self::accept_head`]).
    #[inline]
    pub fn load_head(&mut self, head: &AtomicU32) -> Result<u32, RingError> {
        self.accept_head(head.load(Ordering::Acquire))
    }

    /// Moves the tail past `n` slots read (`n <= available()`); they go
    /// back to the producer at the next release.
    #[inline]
    pub fn advance(&mut self, n: u32) {
        debug_assert!(n <= self.available());
        self.tail = self.tail.wrapping_add(n);
    }

    /// Hands the slots read so far back to the producer with a release
    /// store of the tail (none if nothing was read since the last one).
    #[inline]
    pub fn release(&mut self, tail: &AtomicU32) {
        if self.tail != self.released {
            tail.store(self.tail, Ordering::Release);
            self.released = self.tail;
        }
    }

    /// Starts again from a head the producer wrote (after a refused one, on
    /// a ring that resynchronises): whatever lay before it is dropped; the
    /// next release stores the new tail.
    #[inline]
    pub fn resync(&mut self, h: u32) {
        self.tail = h;
        self.head = h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words() -> (AtomicU32, AtomicU32) {
        (AtomicU32::new(0), AtomicU32::new(0))
    }

    #[test]
    fn fill_publish_read_release() {
        let (head, tail) = words();
        let mut p = ProducerIndex::new(4);
        let mut c = ConsumerIndex::new(4, Withdrawal::Refused);
        assert_eq!(p.free(), 4);
        assert_eq!((p.slot(0), p.slot(3)), (0, 3));
        p.advance(3);
        assert!(p.has_unpublished());
        assert_eq!(c.load_head(&head), Ok(0), "nothing visible before the publish");
        assert_eq!(p.publish(&head), 0);
        assert_eq!(c.load_head(&head), Ok(3));
        c.advance(2);
        c.release(&tail);
        assert_eq!(p.load_tail(&tail), Ok(3));
        assert_eq!(p.slot(0), 3);
        assert_eq!(p.slot(1), 0, "masked");
    }

    #[test]
    fn heads_and_tails_out_of_their_windows_are_refused_and_change_nothing() {
        let mut c = ConsumerIndex::new(8, Withdrawal::Refused);
        assert_eq!(c.accept_head(9), Err(RingError::HeadOutOfRange { seen: 9, tail: 0 }));
        assert_eq!(c.accept_head(3), Ok(3));
        c.advance(1);
        assert_eq!(c.accept_head(2), Err(RingError::HeadBackwards { seen: 2, last: 3 }));
        assert_eq!(c.accept_head(u32::MAX), Err(RingError::HeadBackwards { seen: u32::MAX, last: 3 }));
        assert_eq!(c.available(), 2, "a refused head changes nothing");

        let mut p = ProducerIndex::new(8);
        p.advance(3);
        assert_eq!(p.accept_tail(4), Err(RingError::TailOutOfRange { seen: 4, head: 3 }));
        assert_eq!(p.accept_tail(2), Ok(7));
        assert_eq!(p.accept_tail(1), Err(RingError::TailBackwards { seen: 1, last: 2 }));
        assert_eq!(p.free(), 7);
    }

    #[test]
    fn a_withdrawn_head_is_accepted_only_where_allowed() {
        for (w, ok) in [(Withdrawal::Refused, false), (Withdrawal::Allowed, true)] {
            let mut c = ConsumerIndex::new(8, w);
            assert_eq!(c.accept_head(5), Ok(5));
            c.advance(2);
            // The producer takes back what we have not read.
            assert_eq!(c.accept_head(2).is_ok(), ok, "{w:?}");
            // Never behind what we have read.
            assert!(c.accept_head(1).is_err());
        }
    }

    #[test]
    fn take_over_empties_the_ring_in_both_directions() {
        let (head, tail) = words();
        head.store(10, Ordering::Relaxed);
        tail.store(7, Ordering::Relaxed);
        let p = ProducerIndex::take_over(8, &head, &tail);
        assert_eq!((p.head(), p.free(), head.load(Ordering::Relaxed)), (7, 8, 7));
        head.store(12, Ordering::Relaxed);
        let c = ConsumerIndex::take_over(8, Withdrawal::Allowed, &head, &tail);
        assert_eq!((c.tail(), c.available(), tail.load(Ordering::Relaxed)), (12, 0, 12));
    }

    #[test]
    fn resume_refuses_more_in_flight_than_the_ring_holds() {
        let (head, tail) = words();
        head.store(5, Ordering::Relaxed);
        tail.store(1, Ordering::Relaxed);
        let p = ProducerIndex::resume(4, &head, &tail).unwrap();
        assert_eq!((p.head(), p.free()), (5, 0));
        tail.store(0, Ordering::Relaxed);
        assert_eq!(ProducerIndex::resume(4, &head, &tail).unwrap_err(), RingError::TailOutOfRange { seen: 0, head: 5 });
    }

    #[test]
    fn positions_wrap_at_u32() {
        let (head, tail) = words();
        head.store(u32::MAX - 1, Ordering::Relaxed);
        tail.store(u32::MAX - 1, Ordering::Relaxed);
        let mut p = ProducerIndex::take_over(4, &head, &tail);
        let mut c = ConsumerIndex::take_over(4, Withdrawal::Refused, &head, &tail);
        for _ in 0..10 {
            assert_eq!(p.load_tail(&tail), Ok(4));
            p.advance(3);
            p.publish(&head);
            assert_eq!(c.load_head(&head), Ok(3));
            c.advance(3);
            c.release(&tail);
        }
        assert_eq!(p.head(), (u32::MAX - 1).wrapping_add(30));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Honest traffic mixed with positions scribbled by a hostile peer:
        /// whatever either end accepts keeps `head - tail` within the
        /// capacity from its point of view, a refused value changes
        /// nothing, and an end that resynchronises carries on.
        #[test]
        fn peer_positions_never_take_an_end_outside_its_ring(
            withdraw in any::<bool>(),
            ops in proptest::collection::vec((0u8..8, any::<u32>()), 1..300),
        ) {
            let w = if withdraw { Withdrawal::Allowed } else { Withdrawal::Refused };
            let (head, tail) = words();
            let mut p = ProducerIndex::new(8);
            let mut c = ConsumerIndex::new(8, w);
            let mut scribbled = false;
            for (op, v) in ops {
                match op {
                    0 | 1 => {
                        let n = (v % 4).min(p.free());
                        p.advance(n);
                        if v & 8 == 0 { p.publish(&head); } else { p.publish_sc(&head); }
                    }
                    2 | 3 => {
                        let n = (v % 4).min(c.available());
                        c.advance(n);
                        c.release(&tail);
                    }
                    4 => { head.store(v, Ordering::Relaxed); scribbled = true; }
                    5 => { tail.store(v, Ordering::Relaxed); scribbled = true; }
                    _ => {}
                }
                let (pb, cb) = (p, c);
                match p.load_tail(&tail) {
                    Ok(free) => prop_assert!(free <= p.capacity()),
                    Err(e) => {
                        prop_assert!(scribbled, "{e:?} without a scribble");
                        prop_assert_eq!((p.head(), p.free()), (pb.head(), pb.free()));
                        p.resync(e.seen().unwrap());
                        p.publish(&head);
                    }
                }
                match c.load_head(&head) {
                    Ok(n) => prop_assert!(n <= c.capacity()),
                    Err(e) => {
                        prop_assert!(scribbled, "{e:?} without a scribble");
                        prop_assert_eq!((c.tail(), c.available()), (cb.tail(), cb.available()));
                        c.resync(e.seen().unwrap());
                        c.release(&tail);
                    }
                }
                prop_assert!(p.head().wrapping_sub(tail.load(Ordering::Relaxed)) <= 8 || scribbled);
                prop_assert!(c.available() <= c.capacity());
                prop_assert!(p.free() <= p.capacity());
                prop_assert!(p.slot(0) < 8 && c.slot(0) < 8);
            }
        }
    }
}
