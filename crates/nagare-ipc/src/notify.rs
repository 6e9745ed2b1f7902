//! Wake-ups across a ring in shared memory: the consumer spins for a
//! bounded time, then sleeps on an eventfd; the producer writes the eventfd
//! only on an empty-to-non-empty edge and only when the consumer is not
//! polling.
//!
//! The primitive is shared by every ring nagare keeps in shared memory: the
//! descriptor rings here ([`Notifier`], [`Waiter`]) and the VNI's rings of
//! frames in `nagare-dev` (whose ports keep one polling flag for all their
//! incoming rings and let their caller sleep on the eventfd). It is three
//! pieces: an [`EventFd`], the consumer's *polling* flag
//! ([`set_awake`], [`set_asleep`]) and the producer's [`wake_decision`].
//!
//! The polling flag is a `u32` in shared memory that the consumer alone
//! writes: 1 while it is awake (spinning, or busy with what it popped) and
//! 0 while it is going to sleep or asleep. The two sides follow the classic
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
//! **Invariant: a wake-up is never lost.** Either the consumer sees the new
//! head and does not sleep, or the producer sees `polling == 0` and the
//! consumer's last tail (so it knows the ring was empty) and signals. One
//! that is not needed is usually suppressed, and both outcomes are counted.
//! The head is published with [`crate::spsc::ProducerIndex::publish_sc`],
//! whose swap is the producer's barrier; a producer that published with a
//! plain release store issues `fence(SeqCst)` before [`wake_decision`].
//!
//! What the peer can do with this: set our polling flag so that we never
//! wake it (only its own loss), or write our eventfd (a spurious wake-up,
//! after which we re-check the ring and sleep again). The tail the decision
//! reads is compared with our own heads only, never used as an index.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::descriptor::Descriptor;
use crate::ring::{Consumer, Producer, RingError};
use crate::sys;

/// The default spin before sleeping.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);

/// A non-blocking, close-on-exec eventfd: the consumer sleeps in `poll(2)`
/// on it, the producer writes it.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A fresh eventfd with a zero count.
    pub fn new() -> io::Result<EventFd> {
        Ok(EventFd { fd: sys::eventfd()? })
    }

    /// Wraps a descriptor the caller knows to be an eventfd (received over
    /// a socket, or fetched from another process and checked).
    pub fn from_owned(fd: OwnedFd) -> EventFd {
        EventFd { fd }
    }

    /// Adds one to the count, waking a sleeper. A full counter already
    /// wakes it, so that is not an error.
    pub fn signal(&self) -> io::Result<()> {
        sys::eventfd_signal(self.fd.as_fd())
    }

    /// Reads (and so resets) the count; 0 if nobody signalled.
    pub fn drain(&self) -> io::Result<u64> {
        sys::eventfd_drain(self.fd.as_fd())
    }

    /// Waits until the eventfd is readable or `timeout` passes (`None`:
    /// forever); whether it is readable. EINTR counts as a timeout.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        Ok(sys::poll_one(self.fd.as_fd(), libc::POLLIN, timeout)? != 0)
    }

    /// [`EventFd::wait_readable`], except that a signal handler that ran
    /// meanwhile ends the wait with `ErrorKind::Interrupted`; with `mask`,
    /// the thread's signal mask while it sleeps (as `ppoll(2)`'s).
    pub fn wait_readable_or_signal(
        &self,
        timeout: Option<Duration>,
        mask: Option<&libc::sigset_t>,
    ) -> io::Result<bool> {
        Ok(sys::poll_one_or_signal(self.fd.as_fd(), libc::POLLIN, timeout, mask)? != 0)
    }

    /// The descriptor, to pass on or to give up.
    pub fn into_owned(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Creates a fresh eventfd for a [`Notifier`]/[`Waiter`] pair.
pub fn eventfd() -> io::Result<OwnedFd> {
    EventFd::new().map(EventFd::into_owned)
}

/// The consumer is awake: producers need not signal. A hint only (a relaxed
/// store): a producer that has not seen it yet signals once too often.
#[inline]
pub fn set_awake(flag: &AtomicU32) {
    flag.store(1, Ordering::Relaxed);
}

/// The consumer is about to sleep: producers must signal from here on.
/// The consumer's half of the handshake: after this, look at the ring (or
/// rings) once more, and sleep only if it is still empty.
#[inline]
pub fn set_asleep(flag: &AtomicU32) {
    flag.store(0, Ordering::SeqCst);
    fence(Ordering::SeqCst);
}

/// What a producer decided after publishing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The ring went from empty to non-empty and the consumer is not
    /// polling: signal its eventfd.
    Signal,
    /// The consumer is polling: it will look at the ring anyway.
    Polling,
    /// The consumer took some of this push before we looked: it is awake.
    Taken,
    /// The ring was not empty before this push: whoever made it non-empty
    /// decided then.
    NotEdge,
}

/// The producer's half of the handshake, after publishing its head with a
/// sequentially consistent swap (or a store and `fence(SeqCst)`):
/// `old_head` is the head published before, `head` the one just published;
/// `polling` and `tail` are the consumer's flag and tail.
#[inline]
pub fn wake_decision(polling: &AtomicU32, tail: &AtomicU32, old_head: u32, head: u32) -> Wake {
    // SeqCst (an acquire): if it reads the consumer's `polling = 0`, the
    // consumer's tail store before it is visible too. A polling consumer
    // needs nothing, edge or not, and its tail is not read at all (in the
    // VNI it lies on another cache line than the flag).
    if polling.load(Ordering::SeqCst) != 0 {
        return Wake::Polling;
    }
    // Comparing the peer's tail with our own heads is safe whatever the
    // peer wrote: the worst outcome is a wake-up too many or too few for a
    // peer that breaks the protocol.
    let tail = tail.load(Ordering::Relaxed);
    if tail == old_head {
        Wake::Signal
    } else if tail.wrapping_sub(old_head) <= head.wrapping_sub(old_head) {
        Wake::Taken
    } else {
        Wake::NotEdge
    }
}

/// Producer-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifyStats {
    /// Eventfd writes.
    pub sent: u64,
    /// Pushes that found the ring already non-empty (no edge) and the
    /// consumer not polling.
    pub suppressed_not_edge: u64,
    /// Pushes while the consumer was polling.
    pub suppressed_polling: u64,
    /// Edges where the consumer had already taken some of what was pushed
    /// before the producer looked: it is awake, so no wake-up is due.
    pub suppressed_taken: u64,
    /// Eventfd writes that failed.
    pub errors: u64,
}

/// The producer's half: wakes the consumer of one ring through its eventfd.
#[derive(Debug)]
pub struct Notifier {
    fd: EventFd,
    stats: NotifyStats,
}

impl Notifier {
    /// Signals through `eventfd` (the consumer's).
    pub fn new(eventfd: OwnedFd) -> Notifier {
        Notifier { fd: EventFd::from_owned(eventfd), stats: NotifyStats::default() }
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
        let (polling, tail) = p.wake_words();
        match wake_decision(polling, tail, old_head, p.head()) {
            Wake::Signal => {
                if self.fd.signal().is_ok() {
                    self.stats.sent += 1;
                } else {
                    self.stats.errors += 1;
                }
            }
            Wake::Polling => self.stats.suppressed_polling += 1,
            Wake::Taken => self.stats.suppressed_taken += 1,
            Wake::NotEdge => self.stats.suppressed_not_edge += 1,
        }
    }

    /// The counters.
    pub fn stats(&self) -> NotifyStats {
        self.stats
    }

    /// The eventfd it signals.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
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
    fd: EventFd,
    spin: Duration,
    /// The CPU is given up between looks while spinning (`sched_yield`).
    yields: bool,
    stats: WaitStats,
    /// What we last stored in the polling flag: stores are skipped when they
    /// would not change it, so the producer's copy of the line stays valid.
    /// (A peer that rewrites our flag only loses its own wake-ups.)
    polling: bool,
}

impl Waiter {
    /// Sleeps on `eventfd` after spinning for `spin` (zero: sleep at once).
    pub fn new(eventfd: OwnedFd, spin: Duration) -> Waiter {
        Waiter { fd: EventFd::from_owned(eventfd), spin, yields: true, stats: WaitStats::default(), polling: false }
    }

    /// Whether a spinning wait gives the CPU up between looks (the
    /// default: the producers may be waiting for it), or only hints the
    /// CPU that it spins (for a process whose system calls are filtered,
    /// as `sshd`'s sandboxed children are, where `sched_yield` kills).
    pub fn set_yields(&mut self, yields: bool) {
        self.yields = yields;
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
            set_awake(c.polling_flag());
            self.polling = true;
        }
    }

    /// Asks for wake-ups and re-checks the ring. `Some(n)`: `n` descriptors
    /// arrived meanwhile, do not sleep (the consumer is marked awake again);
    /// `None`: sleep until the eventfd is readable, then call [`Waiter::woke`].
    pub fn prepare_sleep(&mut self, c: &mut Consumer) -> Result<Option<u32>, RingError> {
        set_asleep(c.polling_flag());
        self.polling = false;
        let n = c.available()?;
        if n > 0 {
            self.set_polling(c);
            return Ok(Some(n));
        }
        Ok(None)
    }

    /// After sleeping: resets the eventfd and marks the consumer awake.
    pub fn woke(&mut self, c: &Consumer) -> io::Result<()> {
        self.fd.drain()?;
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
            self.fd.wait_readable(remaining)?;
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
        // Stores are skipped when they would not change the flag, so the
        // producers' copies of the line stay valid.
        let awake = |c: &Consumer| {
            if c.polling_flag().load(Ordering::Relaxed) != 1 {
                set_awake(c.polling_flag());
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
        let spin = timeout.map_or(self.spin, |t| t.min(self.spin));
        if let Some(i) = self.spin_any(rings, spin)? {
            return Ok(WaitOutcome::Ready(i));
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
                set_asleep(c.polling_flag());
            }
            if let Some(i) = ready(rings)? {
                for c in rings.iter() {
                    awake(c);
                }
                return Ok(WaitOutcome::Ready(i));
            }
            self.stats.slept += 1;
            self.fd.wait_readable(remaining)?;
            self.fd.drain()?;
            for c in rings.iter() {
                awake(c);
            }
            if let Some(i) = ready(rings)? {
                return Ok(WaitOutcome::Ready(i));
            }
            self.stats.empty_wakeups += 1;
        }
    }

    /// Polls `rings` for up to `spin` (yielding the CPU between looks, for
    /// the producers may be waiting for it), marking their consumers
    /// awake: the index of one that holds a descriptor, or `None` once the
    /// time is up.
    pub fn spin_any(&mut self, rings: &mut [&mut Consumer], spin: Duration) -> Result<Option<u32>, RingError> {
        let start = Instant::now();
        for c in rings.iter() {
            // Stores are skipped when they would not change the flag, so
            // the producers' copies of the line stay valid.
            if c.polling_flag().load(Ordering::Relaxed) != 1 {
                set_awake(c.polling_flag());
            }
        }
        loop {
            for (i, c) in rings.iter_mut().enumerate() {
                if c.available()? > 0 {
                    self.stats.spun += 1;
                    return Ok(Some(i as u32));
                }
            }
            if start.elapsed() >= spin {
                return Ok(None);
            }
            if self.yields {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// The time [`Waiter::wait`] polls before it sleeps.
    pub fn spin(&self) -> Duration {
        self.spin
    }

    /// Signals this waiter's own eventfd, waking whoever sleeps on it (a
    /// second thread, after this one marked the rings awake and so kept
    /// the producers from signalling).
    pub fn nudge(&self) -> io::Result<()> {
        self.fd.signal()
    }

    /// [`Waiter::prepare_sleep`] over several rings, for a caller that
    /// sleeps in its own `poll` set on [`Waiter::fd`] beside other
    /// descriptors: asks every ring's producer for wake-ups and re-checks
    /// them. `true`: a ring holds a descriptor, do not sleep (all are
    /// marked awake again); `false`: sleep, then call
    /// [`Waiter::woke_any`].
    pub fn prepare_sleep_any(&mut self, rings: &mut [&mut Consumer]) -> Result<bool, RingError> {
        for c in rings.iter() {
            set_asleep(c.polling_flag());
        }
        self.polling = false;
        for c in rings.iter_mut() {
            if c.available()? > 0 {
                self.mark_awake(rings);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// After [`Waiter::prepare_sleep_any`] and a sleep (or none): resets
    /// the eventfd and marks every ring's consumer awake.
    pub fn woke_any(&mut self, rings: &[&mut Consumer]) -> io::Result<()> {
        self.fd.drain()?;
        self.mark_awake(rings);
        Ok(())
    }

    fn mark_awake(&mut self, rings: &[&mut Consumer]) {
        for c in rings.iter() {
            set_awake(c.polling_flag());
        }
        self.polling = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::scratch;
    use crate::ring::ring_len;

    /// Both ends of `n` rings of 16 slots, one after the other in a mapping.
    fn rings(n: u32) -> Vec<(Producer, Consumer)> {
        let map = scratch(4096 * 4);
        (0..u64::from(n))
            .map(|i| {
                (Producer::new(map.clone(), i * ring_len(16), 16), Consumer::new(map.clone(), i * ring_len(16), 16))
            })
            .collect()
    }

    fn setup(spin: Duration) -> (Producer, Consumer, Notifier, Waiter) {
        let (p, c) = rings(1).pop().unwrap();
        let efd = eventfd().unwrap();
        let n = Notifier::new(efd.try_clone().unwrap());
        let w = Waiter::new(efd, spin);
        (p, c, n, w)
    }

    fn d(i: u64) -> Descriptor {
        Descriptor { id: i, ..Default::default() }
    }

    #[test]
    fn the_decision_follows_the_edge_and_the_flag() {
        let (polling, tail) = (AtomicU32::new(0), AtomicU32::new(5));
        assert_eq!(wake_decision(&polling, &tail, 5, 7), Wake::Signal);
        set_awake(&polling);
        assert_eq!(wake_decision(&polling, &tail, 5, 7), Wake::Polling);
        assert_eq!(wake_decision(&polling, &tail, 6, 7), Wake::Polling, "edge or not");
        set_asleep(&polling);
        assert_eq!(wake_decision(&polling, &tail, 6, 7), Wake::NotEdge);
        tail.store(6, Ordering::Relaxed);
        assert_eq!(wake_decision(&polling, &tail, 5, 7), Wake::Taken);
        // Whatever the peer wrote, the answer is one of the four.
        tail.store(u32::MAX, Ordering::Relaxed);
        assert_eq!(wake_decision(&polling, &tail, 5, 7), Wake::NotEdge);
    }

    #[test]
    fn an_eventfd_counts_and_drains() {
        let e = EventFd::new().unwrap();
        assert!(!e.wait_readable(Some(Duration::ZERO)).unwrap());
        e.signal().unwrap();
        e.signal().unwrap();
        assert!(e.wait_readable(None).unwrap());
        assert_eq!(e.drain().unwrap(), 2);
        assert_eq!(e.drain().unwrap(), 0);
    }

    #[test]
    fn only_the_empty_to_non_empty_edge_signals() {
        let (mut p, mut c, mut n, _w) = setup(Duration::ZERO);
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
        let (mut p, mut c, mut n, mut w) = setup(Duration::ZERO);
        w.set_polling(&c);
        for i in 0..10 {
            n.push_batch(&mut p, &[d(i)]).unwrap();
            assert_eq!(c.pop().unwrap(), Some(d(i)));
        }
        assert_eq!(n.stats(), NotifyStats { suppressed_polling: 10, ..Default::default() });
    }

    #[test]
    fn wait_times_out_on_an_empty_ring() {
        let (_p, mut c, _n, mut w) = setup(Duration::from_micros(20));
        let t = Instant::now();
        assert_eq!(w.wait(&mut c, Some(Duration::from_millis(20))).unwrap(), WaitOutcome::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_caller_sleeping_in_its_own_poll_is_woken_by_either_ring() {
        let mut both = rings(2);
        let (mut p1, mut c1) = both.pop().unwrap();
        let (_p0, mut c0) = both.pop().unwrap();
        let efd = eventfd().unwrap();
        let mut n = Notifier::new(efd.try_clone().unwrap());
        let mut w = Waiter::new(efd, Duration::ZERO);
        assert!(!w.prepare_sleep_any(&mut [&mut c0, &mut c1]).unwrap(), "empty rings: sleep");
        assert!(!w.fd.wait_readable(Some(Duration::ZERO)).unwrap());
        n.push_batch(&mut p1, &[d(1)]).unwrap();
        assert!(w.fd.wait_readable(Some(Duration::ZERO)).unwrap(), "the second ring's producer signalled");
        w.woke_any(&[&mut c0, &mut c1]).unwrap();
        assert!(!w.fd.wait_readable(Some(Duration::ZERO)).unwrap(), "woke_any resets the eventfd");
        // Awake again: a producer does not signal, and the ring that holds a
        // descriptor says not to sleep.
        n.push_batch(&mut p1, &[d(2)]).unwrap();
        assert!(!w.fd.wait_readable(Some(Duration::ZERO)).unwrap());
        assert!(w.prepare_sleep_any(&mut [&mut c0, &mut c1]).unwrap());
    }

    #[test]
    fn a_sleeping_consumer_is_woken() {
        let (mut p, mut c, mut n, mut w) = setup(Duration::ZERO);
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
        let mut ends = rings(2);
        let (mut p2, mut c2) = ends.pop().unwrap();
        let (mut p1, mut c1) = ends.pop().unwrap();
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
