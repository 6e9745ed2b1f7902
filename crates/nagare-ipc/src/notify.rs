//! Wake-ups across a ring: the consumer spins for a bounded time, then
//! sleeps on an eventfd; the producer writes the eventfd only on an
//! empty-to-non-empty edge and only when the consumer is not polling.
//!
//! The consumer's *polling* flag lives in the ring's flags line. It is 1
//! while the consumer is awake (spinning, or busy with what it popped) and 0
//! while it is going to sleep or asleep. The two sides follow the classic
//! store-fence-load handshake:
//!
//! ```text
//!   producer                          consumer (before sleeping)
//!   write slots                       polling = 0 (SeqCst)
//!   head.swap(h, SeqCst)              fence(SeqCst)
//!   if polling == 0 (SeqCst load)     if head != tail: polling = 1, go on
//!      and tail == old head: signal   else: sleep on the eventfd
//! ```
//!
//! Either the consumer sees the new head and does not sleep, or the producer
//! sees `polling == 0` and the consumer's last tail (so it knows the ring was
//! empty) and signals. A wake-up is never lost; one that is not needed is
//! usually suppressed, and both outcomes are counted.
//!
//! What the peer can do with this: set our polling flag so that we never
//! wake it (only its own loss), or write our eventfd (a spurious wake-up,
//! after which we re-check the ring and sleep again).

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use crate::ring::{Consumer, Descriptor, Producer, RingError};
use crate::sys;

/// The default spin before sleeping.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);

/// Producer-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifyStats {
    /// Eventfd writes.
    pub sent: u64,
    /// Pushes that found the ring already non-empty (no edge).
    pub suppressed_not_edge: u64,
    /// Edges where the consumer was polling.
    pub suppressed_polling: u64,
    /// Edges where the consumer had already taken some of what was pushed
    /// before the producer looked: it is awake, so no wake-up is due.
    pub suppressed_taken: u64,
    /// Eventfd writes that failed.
    pub errors: u64,
}

/// Creates a fresh eventfd for a [`Notifier`]/[`Waiter`] pair.
pub fn eventfd() -> io::Result<OwnedFd> {
    sys::eventfd()
}

/// The producer's half: wakes the consumer of one ring through its eventfd.
#[derive(Debug)]
pub struct Notifier {
    fd: OwnedFd,
    stats: NotifyStats,
}

impl Notifier {
    /// Signals through `eventfd` (the consumer's).
    pub fn new(eventfd: OwnedFd) -> Notifier {
        Notifier { fd: eventfd, stats: NotifyStats::default() }
    }

    /// [`Producer::push_batch`], then a wake-up if it is needed.
    pub fn push_batch(&mut self, p: &mut Producer, descs: &[Descriptor]) -> Result<usize, RingError> {
        let old = p.head();
        // The head is published with a SeqCst swap: that is the producer's
        // side of the handshake, so no separate fence is needed.
        let n = p.push_batch_sc(descs)?;
        if n > 0 {
            self.decide(p, old);
        }
        Ok(n)
    }

    /// Decides on a wake-up after descriptors were published with
    /// [`Producer::push_batch`]; `old_head` is the producer's head before
    /// the push.
    pub fn published(&mut self, p: &Producer, old_head: u32) {
        fence(Ordering::SeqCst);
        self.decide(p, old_head);
    }

    fn decide(&mut self, p: &Producer, old_head: u32) {
        // SeqCst (an acquire): if it reads the consumer's `polling = 0`, the
        // consumer's tail store before it is visible too.
        let polling = p.polling_flag().load(Ordering::SeqCst);
        // Comparing the peer's tail with our own heads is safe whatever the
        // peer wrote: the worst outcome is a wake-up too many or too few for
        // a peer that breaks the protocol. A tail already past the old head
        // means the consumer took some of this push before we looked, so it
        // was awake; before this was told apart it counted as "not an edge".
        let tail = p.peek_tail();
        let pushed = p.head().wrapping_sub(old_head);
        let taken = tail.wrapping_sub(old_head);
        if tail == old_head {
            if polling != 0 {
                self.stats.suppressed_polling += 1;
            } else if sys::eventfd_signal(self.fd.as_fd()).is_ok() {
                self.stats.sent += 1;
            } else {
                self.stats.errors += 1;
            }
        } else if taken <= pushed {
            self.stats.suppressed_taken += 1;
        } else {
            self.stats.suppressed_not_edge += 1;
        }
    }

    /// The counters.
    pub fn stats(&self) -> NotifyStats {
        self.stats
    }
}

/// What [`Waiter::wait`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// This many descriptors are waiting.
    Ready(u32),
    /// The timeout passed with the ring empty.
    TimedOut,
}

/// Why a wait failed.
#[derive(Debug)]
pub enum WaitError {
    /// The ring is broken.
    Ring(RingError),
    /// `poll` or the eventfd failed.
    Io(io::Error),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Ring(e) => e.fmt(f),
            WaitError::Io(e) => write!(f, "wait: {e}"),
        }
    }
}

impl std::error::Error for WaitError {}

impl From<RingError> for WaitError {
    fn from(e: RingError) -> Self {
        WaitError::Ring(e)
    }
}

impl From<io::Error> for WaitError {
    fn from(e: io::Error) -> Self {
        WaitError::Io(e)
    }
}

/// Consumer-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Waits that found work while spinning.
    pub spun: u64,
    /// Times the consumer went to sleep.
    pub slept: u64,
    /// Wake-ups after which the ring was still empty (spurious, or timeouts).
    pub empty_wakeups: u64,
}

/// The consumer's half: spins for a bounded time, then sleeps on its eventfd.
#[derive(Debug)]
pub struct Waiter {
    fd: OwnedFd,
    spin: Duration,
    stats: WaitStats,
    /// What we last stored in the polling flag: stores are skipped when they
    /// would not change it, so the producer's copy of the line stays valid.
    /// (A peer that rewrites our flag only loses its own wake-ups.)
    polling: bool,
}

impl Waiter {
    /// Sleeps on `eventfd` after spinning for `spin` (zero: sleep at once).
    pub fn new(eventfd: OwnedFd, spin: Duration) -> Waiter {
        Waiter { fd: eventfd, spin, stats: WaitStats::default(), polling: false }
    }

    /// How long [`Waiter::wait`] and [`Waiter::wait_any`] poll before they
    /// sleep.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// The eventfd, for a caller that sleeps in its own `poll` set (use
    /// [`Waiter::prepare_sleep`] and [`Waiter::woke`] around it).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The counters.
    pub fn stats(&self) -> WaitStats {
        self.stats
    }

    /// Marks the consumer awake: producers stop signalling.
    pub fn set_polling(&mut self, c: &Consumer) {
        if !self.polling {
            c.polling_flag().store(1, Ordering::Relaxed);
            self.polling = true;
        }
    }

    /// Asks for wake-ups and re-checks the ring. `Some(n)`: `n` descriptors
    /// arrived meanwhile, do not sleep (the consumer is marked awake again);
    /// `None`: sleep until the eventfd is readable, then call [`Waiter::woke`].
    pub fn prepare_sleep(&mut self, c: &mut Consumer) -> Result<Option<u32>, RingError> {
        c.polling_flag().store(0, Ordering::SeqCst);
        self.polling = false;
        fence(Ordering::SeqCst);
        let n = c.available()?;
        if n > 0 {
            self.set_polling(c);
            return Ok(Some(n));
        }
        Ok(None)
    }

    /// After sleeping: resets the eventfd and marks the consumer awake.
    pub fn woke(&mut self, c: &Consumer) -> io::Result<()> {
        sys::eventfd_drain(self.fd.as_fd())?;
        self.set_polling(c);
        Ok(())
    }

    /// Waits until the ring holds a descriptor or `timeout` passes (`None`:
    /// forever): spins first, then sleeps.
    pub fn wait(&mut self, c: &mut Consumer, timeout: Option<Duration>) -> Result<WaitOutcome, WaitError> {
        let start = Instant::now();
        self.set_polling(c);
        let n = c.available()?;
        if n > 0 {
            self.stats.spun += 1;
            return Ok(WaitOutcome::Ready(n));
        }
        if !self.spin.is_zero() {
            let spin = timeout.map_or(self.spin, |t| t.min(self.spin));
            while start.elapsed() < spin {
                for _ in 0..16 {
                    std::hint::spin_loop();
                }
                let n = c.available()?;
                if n > 0 {
                    self.stats.spun += 1;
                    return Ok(WaitOutcome::Ready(n));
                }
            }
        }
        loop {
            if let Some(n) = self.prepare_sleep(c)? {
                return Ok(WaitOutcome::Ready(n));
            }
            let remaining = match timeout {
                None => None,
                Some(t) => match t.checked_sub(start.elapsed()) {
                    Some(r) if !r.is_zero() => Some(r),
                    _ => {
                        self.set_polling(c);
                        return Ok(WaitOutcome::TimedOut);
                    }
                },
            };
            self.stats.slept += 1;
            sys::poll_one(self.fd.as_fd(), libc::POLLIN, remaining)?;
            self.woke(c)?;
            let n = c.available()?;
            if n > 0 {
                return Ok(WaitOutcome::Ready(n));
            }
            self.stats.empty_wakeups += 1;
        }
    }

    /// [`Waiter::wait`] over several rings whose producers all signal this
    /// waiter's eventfd (netd's completions and the driver's direct
    /// returns). Returns `Ready(i)` with the index of a ring that holds a
    /// descriptor.
    pub fn wait_any(
        &mut self,
        rings: &mut [&mut Consumer],
        timeout: Option<Duration>,
    ) -> Result<WaitOutcome, WaitError> {
        let start = Instant::now();
        let mark = |c: &Consumer, on: u32| {
            if c.polling_flag().load(Ordering::Relaxed) != on {
                c.polling_flag().store(on, Ordering::SeqCst);
            }
        };
        let ready = |rings: &mut [&mut Consumer]| -> Result<Option<u32>, RingError> {
            for (i, c) in rings.iter_mut().enumerate() {
                if c.available()? > 0 {
                    return Ok(Some(i as u32));
                }
            }
            Ok(None)
        };
        for c in rings.iter() {
            mark(c, 1);
        }
        let spin = timeout.map_or(self.spin, |t| t.min(self.spin));
        loop {
            if let Some(i) = ready(rings)? {
                self.stats.spun += 1;
                return Ok(WaitOutcome::Ready(i));
            }
            if start.elapsed() >= spin {
                break;
            }
            // The producers (netd, its driver) may be waiting for this CPU.
            std::thread::yield_now();
        }
        loop {
            let remaining = match timeout {
                None => None,
                Some(t) => match t.checked_sub(start.elapsed()) {
                    Some(r) if !r.is_zero() => Some(r),
                    _ => return Ok(WaitOutcome::TimedOut),
                },
            };
            for c in rings.iter() {
                mark(c, 0);
            }
            fence(Ordering::SeqCst);
            if let Some(i) = ready(rings)? {
                for c in rings.iter() {
                    mark(c, 1);
                }
                return Ok(WaitOutcome::Ready(i));
            }
            self.stats.slept += 1;
            sys::poll_one(self.fd.as_fd(), libc::POLLIN, remaining)?;
            sys::eventfd_drain(self.fd.as_fd())?;
            for c in rings.iter() {
                mark(c, 1);
            }
            if let Some(i) = ready(rings)? {
                return Ok(WaitOutcome::Ready(i));
            }
            self.stats.empty_wakeups += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::{Region, RegionConfig};

    fn setup(spin: Duration) -> (Region, Region, Producer, Consumer, Notifier, Waiter) {
        let r = Region::create("notify-test", RegionConfig::pair(16, 0, 64)).unwrap();
        let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let p = a.producer(0).unwrap();
        let c = r.consumer(0).unwrap();
        let efd = eventfd().unwrap();
        let n = Notifier::new(efd.try_clone().unwrap());
        let w = Waiter::new(efd, spin);
        (r, a, p, c, n, w)
    }

    fn d(i: u64) -> Descriptor {
        Descriptor { id: i, ..Default::default() }
    }

    #[test]
    fn only_the_empty_to_non_empty_edge_signals() {
        let (_r, _a, mut p, mut c, mut n, _w) = setup(Duration::ZERO);
        n.push_batch(&mut p, &[d(0)]).unwrap();
        n.push_batch(&mut p, &[d(1), d(2)]).unwrap();
        n.push_batch(&mut p, &[d(3)]).unwrap();
        assert_eq!(n.stats(), NotifyStats { sent: 1, suppressed_not_edge: 2, ..Default::default() });
        while c.pop().unwrap().is_some() {}
        n.push_batch(&mut p, &[d(4)]).unwrap();
        assert_eq!(n.stats().sent, 2);
    }

    #[test]
    fn a_polling_consumer_masks_wakeups() {
        let (_r, _a, mut p, mut c, mut n, mut w) = setup(Duration::ZERO);
        w.set_polling(&c);
        for i in 0..10 {
            n.push_batch(&mut p, &[d(i)]).unwrap();
            assert_eq!(c.pop().unwrap(), Some(d(i)));
        }
        assert_eq!(n.stats(), NotifyStats { suppressed_polling: 10, ..Default::default() });
    }

    #[test]
    fn wait_times_out_on_an_empty_ring() {
        let (_r, _a, _p, mut c, _n, mut w) = setup(Duration::from_micros(20));
        let t = Instant::now();
        assert_eq!(w.wait(&mut c, Some(Duration::from_millis(20))).unwrap(), WaitOutcome::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_sleeping_consumer_is_woken() {
        let (_r, _a, mut p, mut c, mut n, mut w) = setup(Duration::ZERO);
        let h = std::thread::spawn(move || {
            let mut got = 0;
            while got < 100 {
                match w.wait(&mut c, Some(Duration::from_secs(10))).unwrap() {
                    WaitOutcome::Ready(_) => {
                        while c.pop().unwrap().is_some() {
                            got += 1;
                        }
                    }
                    WaitOutcome::TimedOut => panic!("lost wake-up"),
                }
            }
            w.stats()
        });
        for i in 0..100 {
            while !n.push_batch(&mut p, &[d(i)]).map(|k| k == 1).unwrap() {}
            if i % 10 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let ws = h.join().unwrap();
        assert!(ws.slept >= 1);
        let s = n.stats();
        assert_eq!(s.sent + s.suppressed_not_edge + s.suppressed_polling + s.suppressed_taken, 100);
        assert!(s.sent >= 1);
    }

    #[test]
    fn wait_any_wakes_for_either_ring() {
        let r = Region::create(
            "notify-any",
            RegionConfig { rings: 3, attacher_produces: 0b110, ..RegionConfig::pair(16, 0, 64) },
        )
        .unwrap();
        let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let mut p1 = a.producer(1).unwrap();
        let mut p2 = a.producer(2).unwrap();
        let mut c1 = r.consumer(1).unwrap();
        let mut c2 = r.consumer(2).unwrap();
        let efd = eventfd().unwrap();
        let mut n1 = Notifier::new(efd.try_clone().unwrap());
        let mut n2 = Notifier::new(efd.try_clone().unwrap());
        let mut w = Waiter::new(efd, Duration::ZERO);
        let t = Some(Duration::from_millis(20));
        assert_eq!(w.wait_any(&mut [&mut c1, &mut c2], t).unwrap(), WaitOutcome::TimedOut);
        let th = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            n2.push_batch(&mut p2, &[d(7)]).unwrap();
            (n2, p2)
        });
        let got = w.wait_any(&mut [&mut c1, &mut c2], Some(Duration::from_secs(5))).unwrap();
        assert_eq!(got, WaitOutcome::Ready(1));
        let (mut n2, mut p2) = th.join().unwrap();
        assert_eq!(c2.pop().unwrap().map(|x| x.id), Some(7));
        assert!(w.stats().slept >= 1, "it slept and the eventfd woke it");
        n1.push_batch(&mut p1, &[d(8)]).unwrap();
        assert_eq!(w.wait_any(&mut [&mut c1, &mut c2], t).unwrap(), WaitOutcome::Ready(0));
        n2.push_batch(&mut p2, &[d(9)]).unwrap();
        assert_eq!(c1.pop().unwrap().map(|x| x.id), Some(8));
        assert_eq!(w.wait_any(&mut [&mut c1, &mut c2], t).unwrap(), WaitOutcome::Ready(1));
    }
}
