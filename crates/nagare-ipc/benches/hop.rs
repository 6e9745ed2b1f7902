//! One IPC hop: a descriptor pushed on one side and popped on the other.
//!
//! Two threads, pinned to two different CPUs when the machine has them, play
//! ping-pong over a ring pair in one region (attacher → creator on ring 0,
//! back on ring 1); one hop is half a round trip. Modes:
//!
//! - `polled`: both sides spin on the ring (no notifier at all);
//! - `polled+notifier`: both sides wait with a long spin, the producer runs
//!   the notifier's fence and flag check on every push (all masked);
//! - `sleep/wake`: both sides sleep on their eventfd at once (spin 0), so
//!   every hop is an eventfd write, a `poll` wake-up and an eventfd read;
//! - `stream`: one direction, batches of 32, no waiting: ns per descriptor;
//! - `futex floor`: no ring and no eventfd, two bare futex words (shared,
//!   as across processes): what sleeping and waking costs on this machine
//!   with the cheapest means Linux has, the floor under `sleep/wake`.
//!
//! `cargo bench -p nagare-ipc --bench hop`; `NAGARE_HOP_ROUNDS` scales the
//! number of round trips (default 1 000 000 polled, 100 000 sleeping).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nagare_ipc::{eventfd, Consumer, Descriptor, Notifier, Producer, Region, RegionConfig, WaitOutcome, Waiter};

fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it;
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Polled,
    PolledNotifier,
    SleepWake,
}

struct End {
    tx: Producer,
    rx: Consumer,
    notifier: Notifier,
    waiter: Waiter,
}

impl End {
    fn send(&mut self, mode: Mode, d: &Descriptor) {
        loop {
            let n = if mode == Mode::Polled {
                self.tx.push_batch(std::slice::from_ref(d)).unwrap()
            } else {
                self.notifier.push_batch(&mut self.tx, std::slice::from_ref(d)).unwrap()
            };
            if n == 1 {
                return;
            }
            std::hint::spin_loop();
        }
    }

    fn recv(&mut self, mode: Mode) -> Descriptor {
        loop {
            if let Some(d) = self.rx.pop().unwrap() {
                return d;
            }
            if mode != Mode::Polled {
                match self.waiter.wait(&mut self.rx, Some(Duration::from_secs(10))).unwrap() {
                    WaitOutcome::Ready(_) => {}
                    WaitOutcome::TimedOut => panic!("lost wake-up"),
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Two ends of a ring pair: (attacher side, creator side).
fn ends(spin: Duration) -> (Region, Region, End, End) {
    let r = Region::create("hop", RegionConfig::pair(256, 0, 64)).unwrap();
    let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
    let to_creator = eventfd().unwrap();
    let to_attacher = eventfd().unwrap();
    let ea = End {
        tx: a.producer(0).unwrap(),
        rx: a.consumer(1).unwrap(),
        notifier: Notifier::new(to_creator.try_clone().unwrap()),
        waiter: Waiter::new(to_attacher.try_clone().unwrap(), spin),
    };
    let ec = End {
        tx: r.producer(1).unwrap(),
        rx: r.consumer(0).unwrap(),
        notifier: Notifier::new(to_attacher),
        waiter: Waiter::new(to_creator, spin),
    };
    (r, a, ea, ec)
}

/// Per-hop figures in ns: mean over the run, and the median and 99th
/// percentile of the individually timed round trips (halved). The median is
/// what a hop costs; the mean also carries every preemption by other load.
struct Hop {
    mean: f64,
    p50: f64,
    p99: f64,
}

impl Hop {
    /// From the round trips timed one by one and the time they took in all.
    fn of(mut rtts: Vec<u64>, elapsed: Duration) -> Hop {
        rtts.sort_unstable();
        let pct = |p: f64| rtts[((rtts.len() - 1) as f64 * p) as usize] as f64 / 2.0;
        Hop { mean: elapsed.as_nanos() as f64 / rtts.len() as f64 / 2.0, p50: pct(0.5), p99: pct(0.99) }
    }
}

/// Times `rounds` round trips, and the wake-ups both sides sent.
fn ping_pong(mode: Mode, rounds: u64, pinned: Option<(usize, usize)>) -> (Hop, String) {
    let spin = match mode {
        Mode::SleepWake => Duration::ZERO,
        _ => Duration::from_secs(3600),
    };
    let (_r, _a, mut ping, mut pong) = ends(spin);
    let echo = std::thread::spawn(move || {
        if let Some((_, cpu)) = pinned {
            pin(cpu);
        }
        for _ in 0..rounds + 1000 {
            let d = pong.recv(mode);
            pong.send(mode, &Descriptor { kind: 2, ..d });
        }
        pong.notifier.stats()
    });
    if let Some((cpu, _)) = pinned {
        pin(cpu);
    }
    let mut d = Descriptor { kind: 1, ..Default::default() };
    // Warm-up.
    for i in 0..1000 {
        d.id = i;
        ping.send(mode, &d);
        assert_eq!(ping.recv(mode).id, i);
    }
    let mut rtts = Vec::with_capacity(rounds as usize);
    let start = Instant::now();
    for i in 0..rounds {
        d.id = i;
        let t = Instant::now();
        ping.send(mode, &d);
        let r = ping.recv(mode);
        rtts.push(t.elapsed().as_nanos() as u64);
        assert_eq!(r.id, i);
    }
    let hop = Hop::of(rtts, start.elapsed());
    let pong_stats = echo.join().unwrap();
    (hop, format!("wake-ups sent {} + {}", ping.notifier.stats().sent, pong_stats.sent))
}

/// Sleeps until `word` holds `want` (a shared futex wait, no spinning).
fn futex_wait_for(word: &AtomicU32, want: u32) {
    loop {
        let now = word.load(Ordering::Acquire);
        if now == want {
            return;
        }
        // SAFETY: FUTEX_WAIT reads the live word at this address; it returns
        // at once if the word is no longer `now`.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, now, std::ptr::null::<libc::timespec>())
        };
    }
}

/// Stores `value` in `word` and wakes its sleeper.
fn futex_set(word: &AtomicU32, value: u32) {
    word.store(value, Ordering::Release);
    // SAFETY: FUTEX_WAKE on the address of a live word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
}

/// Round trips over two bare futex words: every hop is a wake and a sleep.
fn futex_floor(rounds: u64, pinned: Option<(usize, usize)>) -> (Hop, String) {
    let words = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let theirs = Arc::clone(&words);
    let total = rounds + 1000;
    let echo = std::thread::spawn(move || {
        if let Some((_, cpu)) = pinned {
            pin(cpu);
        }
        for i in 1..=total as u32 {
            futex_wait_for(&theirs[0], i);
            futex_set(&theirs[1], i);
        }
    });
    if let Some((cpu, _)) = pinned {
        pin(cpu);
    }
    let mut rtts = Vec::with_capacity(rounds as usize);
    let mut start = Instant::now();
    for i in 1..=total as u32 {
        if u64::from(i) == 1001 {
            start = Instant::now();
        }
        let t = Instant::now();
        futex_set(&words[0], i);
        futex_wait_for(&words[1], i);
        if u64::from(i) > 1000 {
            rtts.push(t.elapsed().as_nanos() as u64);
        }
    }
    let hop = Hop::of(rtts, start.elapsed());
    echo.join().unwrap();
    (hop, String::from("bare futex words, no ring"))
}

/// ns per descriptor, one direction, batches of 32.
fn stream(count: u64, pinned: bool) -> f64 {
    let (_r, _a, mut prod, mut cons) = ends(Duration::ZERO);
    let h = std::thread::spawn(move || {
        if pinned {
            pin(1);
        }
        let mut buf = [Descriptor::default(); 32];
        let mut got = 0u64;
        while got < count {
            let n = cons.rx.pop_batch(&mut buf).unwrap();
            for (k, d) in buf[..n].iter().enumerate() {
                assert_eq!(d.id, got + k as u64);
            }
            got += n as u64;
        }
    });
    if pinned {
        pin(0);
    }
    let start = Instant::now();
    let mut batch = [Descriptor::default(); 32];
    let mut sent = 0u64;
    while sent < count {
        let k = (count - sent).min(32) as usize;
        for (j, d) in batch[..k].iter_mut().enumerate() {
            d.id = sent + j as u64;
        }
        sent += prod.tx.push_batch(&batch[..k]).unwrap() as u64;
    }
    h.join().unwrap();
    start.elapsed().as_nanos() as f64 / count as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // special either, so keep a quick mode for test runs.
    let quick = std::env::args().all(|a| a != "--bench");
    let scale: u64 = std::env::var("NAGARE_HOP_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let (polled, sleeping, streamed) = if quick { (10_000, 1_000, 100_000) } else { (scale, scale / 10, scale * 10) };
    let pinned = cpus() >= 2;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // How long an idle vCPU polls before it halts decides what waking it
    // costs (a halted vCPU is woken through the hypervisor).
    let halt_poll = std::fs::read_to_string("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
        .map_or_else(|_| String::from("n/a"), |s| s.trim().to_string());
    // The parameter acts only when the haltpoll cpuidle driver is the one
    // in use; with none, an idle vCPU halts at once.
    let idle_driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .map_or_else(|_| String::from("n/a"), |s| s.trim().to_string());
    println!(
        "ipc hop: {} CPUs, threads pinned: {pinned}, load {}, cpuidle driver {idle_driver}, guest_halt_poll_ns {halt_poll}",
        cpus(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "{:<18} {:>9} {:>9} {:>9} {:>9}   (3 runs; median run by p50 shown)",
        "mode", "rounds", "p50 ns", "p99 ns", "mean ns"
    );
    let two = pinned.then_some((0, 1));
    for (name, mode, rounds, cpus) in [
        ("polled", Some(Mode::Polled), polled, two),
        ("polled+notifier", Some(Mode::PolledNotifier), polled, two),
        ("sleep/wake", Some(Mode::SleepWake), sleeping, two),
        ("futex floor", None, sleeping, two),
        ("sleep/wake 1 CPU", Some(Mode::SleepWake), sleeping, Some((0, 0))),
        ("futex floor 1 CPU", None, sleeping, Some((0, 0))),
    ] {
        let run = || match mode {
            Some(mode) => ping_pong(mode, rounds, cpus),
            None => futex_floor(rounds, cpus),
        };
        let mut runs: Vec<(Hop, String)> = (0..3).map(|_| run()).collect();
        runs.sort_by(|a, b| a.0.p50.partial_cmp(&b.0.p50).unwrap());
        let p50s: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.0.p50)).collect();
        let (h, note) = &runs[1];
        println!(
            "{name:<18} {rounds:>9} {:>9.0} {:>9.0} {:>9.0}   p50s {}; {note}",
            h.p50,
            h.p99,
            h.mean,
            p50s.join(" / ")
        );
    }
    let runs: Vec<f64> = (0..3).map(|_| stream(streamed, pinned)).collect();
    let shown: Vec<String> = runs.iter().map(|x| format!("{x:.1}")).collect();
    println!(
        "{:<18} {streamed:>9} {:>29.1}   runs {} (ns per descriptor, batches of 32)",
        "stream",
        median(runs.clone()),
        shown.join(" / ")
    );
}
