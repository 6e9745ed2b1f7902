//! When a loop keeps looking for work and when it sleeps: it polls while
//! work keeps coming and sleeps when it stops, the idea of NAPI and of
//! Linux's busy-polling sockets.
//!
//! A sleeping loop is woken by the kernel when a frame or a request
//! arrives, and on a virtual machine whose idle CPUs halt, that wake-up
//! costs tens of microseconds: more than the work it wakes for. So after
//! work the loop goes on looking, for a time that follows how often work
//! has been coming: four times the smoothed gap between bursts, between
//! `base` and `max`. Work every few milliseconds (a ping every 2 ms, a
//! request stream) keeps the loop polling and never pays for a wake-up;
//! once work stops, the loop sleeps after at most `max`; work that comes
//! more rarely than `max` gets only `base`, so an idle loop costs next to
//! nothing.
//!
//! Polling past `base` is for a process with a CPU besides the one the
//! loop runs on: on one CPU it would take the CPU from whoever it waits
//! for (the application, the kernel's side of the link). Where two loops
//! hand work to each other (a driver that reads the device and the engine
//! it hands frames to), both poll on: a frame after a pause finds the
//! driver still looking and netd too, and pays for no wake-up, where a
//! driver asleep costs one (a ping every 2 ms to netd beside its driver:
//! 10–11 µs at the median with both polling on, 13–17 µs with the driver
//! polling `base` alone; `docs/benchmarks.md`).
//!
//! A loop that polls on beside others yields the CPU between looks with
//! [`BusyPoll::yield_cpu`], which notes how long the yield took: a long
//! one says someone else had work for that CPU (an application sending,
//! the other loop, the kernel's side of the link), and the loop then polls
//! `base` alone for the next `max`, so that its polling on between bursts
//! takes no CPU time anyone else wants.

use std::time::{Duration, Instant};

/// What a loop polls after its last work by default.
pub const DEFAULT_BASE: Duration = Duration::from_micros(50);

/// The longest it polls without work by default.
pub const DEFAULT_MAX: Duration = Duration::from_millis(5);

/// A yield longer than this gave the CPU to someone with work of their
/// own: more than a wake-up's worth of handling (a frame's, a request's).
pub const CONTENDED_YIELD: Duration = Duration::from_micros(100);

/// How long after work a loop keeps polling.
#[derive(Debug, Clone)]
pub struct BusyPoll {
    base: Duration,
    max: Duration,
    /// The CPUs outnumber the loops that poll: one is left for the rest.
    many_cpus: bool,
    last_work: Option<Instant>,
    /// The smoothed gap between bursts of work.
    gap: Option<Duration>,
    /// When a yield last took longer than [`CONTENDED_YIELD`].
    contended: Option<Instant>,
}

impl BusyPoll {
    /// A policy polling `base` after work at least and `max` at most, for
    /// a process that may use `cpus` CPUs.
    pub fn new(base: Duration, max: Duration, cpus: usize) -> Self {
        BusyPoll { base, max: max.max(base), many_cpus: cpus > 1, last_work: None, gap: None, contended: None }
    }

    /// The policy with [`DEFAULT_BASE`] and [`DEFAULT_MAX`], for the CPUs
    /// this process may run on.
    pub fn for_this_process() -> Self {
        Self::with_base(DEFAULT_BASE)
    }

    /// As [`for_this_process`](Self::for_this_process), polling at least
    /// `base`.
    pub fn with_base(base: Duration) -> Self {
        Self::new(base, DEFAULT_MAX.max(base), cpus())
    }

    /// The loop did work at `now`.
    pub fn work(&mut self, now: Instant) {
        if let Some(last) = self.last_work {
            let since = now.saturating_duration_since(last);
            // A burst's own steps are no gap: only a pause counts.
            if since > self.base {
                let sample = since.min(self.max * 4);
                self.gap = Some(match self.gap {
                    Some(gap) => (gap * 3 + sample) / 4,
                    None => sample,
                });
            }
        }
        self.last_work = Some(now);
    }

    /// How long after work the loop polls now.
    pub fn spin(&self) -> Duration {
        match self.gap {
            Some(gap) if self.many_cpus && gap <= self.max => (gap * 4).clamp(self.base, self.max),
            _ => self.base,
        }
    }

    /// Whether the loop, with nothing to do at `now`, should look again
    /// rather than sleep: for [`BusyPoll::spin`] after its last work, or
    /// for `base` alone within `max` of a yield that took long.
    pub fn keep_polling(&self, now: Instant) -> bool {
        let contended = self.contended.is_some_and(|t| now.saturating_duration_since(t) < self.max);
        let spin = if contended { self.base } else { self.spin() };
        self.last_work.is_some_and(|last| now.saturating_duration_since(last) < spin)
    }

    /// A yield of `took` ended at `now`: a long one means another thread
    /// had work for this CPU.
    pub fn yielded(&mut self, took: Duration, now: Instant) {
        if took > CONTENDED_YIELD {
            self.contended = Some(now);
        }
    }

    /// Gives the CPU to whoever waits for it (`sched_yield`) between two
    /// looks, and notes how long that took ([`BusyPoll::yielded`]).
    pub fn yield_cpu(&mut self) {
        let before = Instant::now();
        std::thread::yield_now();
        let after = Instant::now();
        self.yielded(after.saturating_duration_since(before), after);
    }
}

/// The CPUs this process may run on (its affinity and cgroup quota).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn fed_every(policy: &mut BusyPoll, gap: Duration, times: u32) -> Instant {
        let start = Instant::now();
        let mut now = start;
        for _ in 0..times {
            policy.work(now);
            now += gap;
        }
        now - gap
    }

    #[test]
    fn work_every_two_milliseconds_keeps_the_loop_polling_until_the_next() {
        let mut p = BusyPoll::new(DEFAULT_BASE, DEFAULT_MAX, 2);
        let last = fed_every(&mut p, 2 * MS, 20);
        assert_eq!(p.spin(), DEFAULT_MAX);
        assert!(p.keep_polling(last + 2 * MS), "the next ping comes while it polls");
        assert!(!p.keep_polling(last + DEFAULT_MAX), "it sleeps once work stops");
    }

    #[test]
    fn a_long_yield_holds_the_loop_to_its_base_for_max() {
        let mut p = BusyPoll::new(DEFAULT_BASE, DEFAULT_MAX, 2);
        let last = fed_every(&mut p, 2 * MS, 20);
        assert!(p.keep_polling(last + MS), "uncontended, it polls on");
        // A yield that returned at once changes nothing.
        p.yielded(Duration::from_micros(2), last + Duration::from_micros(100));
        assert!(p.keep_polling(last + MS));
        // Someone ran for 200 µs in the yield: base alone from then on.
        p.yielded(Duration::from_micros(200), last + Duration::from_micros(300));
        assert!(p.keep_polling(last + Duration::from_micros(10)));
        assert!(!p.keep_polling(last + MS), "contended: it sleeps after base");
        // Past max without another long yield, it polls on again.
        let later = last + Duration::from_micros(300) + DEFAULT_MAX + MS;
        p.work(later);
        assert!(p.keep_polling(later + MS));
    }

    #[test]
    fn rare_work_gets_only_the_base() {
        let mut p = BusyPoll::new(DEFAULT_BASE, DEFAULT_MAX, 2);
        let last = fed_every(&mut p, 100 * MS, 10);
        assert_eq!(p.spin(), DEFAULT_BASE);
        assert!(p.keep_polling(last + Duration::from_micros(10)));
        assert!(!p.keep_polling(last + MS));
    }

    #[test]
    fn a_burst_is_not_a_gap_and_a_pause_lowers_the_spin_again() {
        let mut p = BusyPoll::new(DEFAULT_BASE, DEFAULT_MAX, 2);
        let last = fed_every(&mut p, MS, 20);
        assert_eq!(p.spin(), 4 * MS);
        // Steps of one burst, microseconds apart, leave the gap alone.
        let mut now = last;
        for _ in 0..100 {
            now += Duration::from_micros(5);
            p.work(now);
        }
        assert_eq!(p.spin(), 4 * MS);
        // A second of silence: the gap grows past the most it polls.
        p.work(now + Duration::from_secs(1));
        p.work(now + Duration::from_secs(2));
        assert_eq!(p.spin(), DEFAULT_BASE);
    }

    #[test]
    fn one_cpu_polls_only_the_base() {
        let mut p = BusyPoll::new(DEFAULT_BASE, DEFAULT_MAX, 1);
        fed_every(&mut p, 2 * MS, 20);
        assert_eq!(p.spin(), DEFAULT_BASE);
    }

    #[test]
    fn before_any_work_the_loop_sleeps() {
        let p = BusyPoll::new(DEFAULT_BASE, DEFAULT_MAX, 2);
        assert!(!p.keep_polling(Instant::now()));
    }
}
