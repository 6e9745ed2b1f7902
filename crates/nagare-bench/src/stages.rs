//! `nagare bench stages`: a request passed through 1 to 4 stages and its
//! completion's way back, in the form of Figure 7 of the AnT paper: the
//! completion sent straight back to the requester by the last stage
//! (*direct return*, what netd's driver does) against passed back stage by
//! stage (*sequential return*).
//!
//! The requester and each stage are threads joined by `nagare-ipc`
//! regions, as netd's processes are: between neighbours a region with a
//! request ring forward and a completion ring back, and for direct return
//! one more region whose ring goes from the last stage to the requester.
//! Every thread waits on an eventfd of its own (a `Waiter` over every ring
//! it takes from), and every producer wakes the consumer only when it
//! sleeps, so a hand-over between two stages is what it is between two of
//! netd's processes: a ring write and, when the other sleeps, a wake-up.
//! One request is in flight at a time. Times come from `CLOCK_MONOTONIC`:
//! the requester stamps the post, the last stage its arrival and the
//! moment it posts the completion, the requester the completion's arrival.
//! *Request* is post to arrival at the last stage, *return* is the
//! completion's post to its arrival; medians over `requests` requests.

use anyhow::{bail, ensure, Context, Result};
use nagare_ipc::{eventfd, monotonic_ns, Consumer, Descriptor, Notifier, Producer, Region, RegionConfig, Waiter};
use std::os::fd::OwnedFd;
use std::time::Duration;

/// Arguments of `nagare bench stages`.
#[derive(Debug, Clone)]
pub struct StagesArgs {
    /// Timed requests per stage count and way of return.
    pub requests: usize,
    /// Stages, from 1 to this.
    pub max_stages: usize,
    /// How long a waiting thread polls its rings before it sleeps.
    pub spin: Duration,
    /// Every thread on one CPU (the AnT paper's machine had one).
    pub one_cpu: bool,
}

/// Untimed requests before the timed ones.
const WARMUP: usize = 200;
/// Slots per ring (one request is in flight).
const SLOTS: u32 = 16;
/// The longest any wait may take before the bench gives up.
const WAIT_LIMIT: Duration = Duration::from_secs(5);

/// A descriptor's kind: a request going forward, a completion going back,
/// the end of the run.
const REQUEST: u32 = 1;
const COMPLETION: u32 = 2;
const STOP: u32 = 3;

/// How the completion goes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Return {
    Direct,
    Sequential,
}

/// Median nanoseconds of one stage count and way of return.
#[derive(Clone, Copy, Debug, Default)]
struct Times {
    request: u64,
    ret: u64,
    total: u64,
}

/// One end of a ring and whom to wake when it is written.
struct Out {
    ring: Producer,
    notifier: Notifier,
}

impl Out {
    fn push(&mut self, d: &Descriptor) -> Result<()> {
        let started = std::time::Instant::now();
        loop {
            if self.notifier.push_batch(&mut self.ring, std::slice::from_ref(d)).context("ring broken")? == 1 {
                return Ok(());
            }
            ensure!(started.elapsed() < WAIT_LIMIT, "a ring stayed full");
            std::thread::yield_now();
        }
    }
}

/// A thread's way in: the rings it takes from, and its eventfd's waiter.
struct In {
    rings: Vec<Consumer>,
    waiter: Waiter,
}

impl In {
    /// The next descriptor on any of its rings, waiting for one.
    fn next(&mut self) -> Result<Descriptor> {
        let started = std::time::Instant::now();
        loop {
            for r in &mut self.rings {
                if let Some(d) = r.pop().context("ring broken")? {
                    return Ok(d);
                }
            }
            ensure!(started.elapsed() < WAIT_LIMIT, "nothing came for {WAIT_LIMIT:?}");
            let mut rings: Vec<&mut Consumer> = self.rings.iter_mut().collect();
            self.waiter.wait_any(&mut rings, Some(Duration::from_millis(100))).context("waiting")?;
        }
    }
}

/// A region between two threads: (creator, attacher).
fn region(name: &str, rings: u32, attacher_produces: u32) -> Result<(Region, Region)> {
    let config =
        RegionConfig { rings, attacher_produces, ring_slots: SLOTS, buffers: 0, buffer_size: 64, creator_buffers: 0 };
    let creator = Region::create(name, config)?;
    let attacher = Region::attach(creator.fd().try_clone_to_owned()?)?;
    Ok((creator, attacher))
}

/// What one stage thread owns.
struct Stage {
    input: In,
    /// The request ring to the next stage (none for the last).
    forward: Option<Out>,
    /// The completion ring to the stage before (or the requester).
    back: Out,
    /// The last stage's ring straight to the requester (direct return).
    direct: Option<Out>,
}

impl Stage {
    fn run(mut self) -> Result<()> {
        loop {
            let mut d = self.input.next()?;
            match d.kind {
                STOP => {
                    if let Some(f) = &mut self.forward {
                        f.push(&d)?;
                    }
                    return Ok(());
                }
                REQUEST => match &mut self.forward {
                    Some(f) => f.push(&d)?,
                    None => {
                        d.aux[1] = monotonic_ns();
                        d.kind = COMPLETION;
                        d.aux[2] = monotonic_ns();
                        match &mut self.direct {
                            Some(direct) => direct.push(&d)?,
                            None => self.back.push(&d)?,
                        }
                    }
                },
                COMPLETION => self.back.push(&d)?,
                other => bail!("a descriptor of kind {other}"),
            }
        }
    }
}

fn notifier(fd: &OwnedFd) -> Result<Notifier> {
    Ok(Notifier::new(fd.try_clone()?))
}

/// `requests` timed requests through `stages` stages.
fn measure(stages: usize, how: Return, requests: usize, spin: Duration) -> Result<Times> {
    let fds: Vec<OwnedFd> = (0..=stages).map(|_| eventfd()).collect::<std::io::Result<_>>()?;
    let tag = format!("nagare-bench-stages-{}", std::process::id());
    // Links: link i joins thread i (the attacher: it produces requests,
    // ring 0) and thread i + 1 (the creator: completions back, ring 1);
    // thread 0 is the requester.
    let mut links = Vec::new();
    for i in 0..stages {
        links.push(region(&format!("{tag}-{i}"), 2, 0b01)?);
    }
    let direct = match how {
        Return::Direct => Some(region(&format!("{tag}-direct"), 1, 0b1)?),
        Return::Sequential => None,
    };
    let mut requester_in = vec![links[0].1.consumer(1)?];
    let mut requester_out = Out { ring: links[0].1.producer(0)?, notifier: notifier(&fds[1])? };
    if let Some((creator, _)) = &direct {
        requester_in.push(creator.consumer(0)?);
    }
    let mut requester = In { rings: requester_in, waiter: Waiter::new(fds[0].try_clone()?, spin) };
    let mut threads = Vec::new();
    for s in 1..=stages {
        let (here, _) = &links[s - 1];
        let mut rings = vec![here.consumer(0)?];
        let forward = match links.get(s) {
            Some((_, next)) => {
                rings.push(next.consumer(1)?);
                Some(Out { ring: next.producer(0)?, notifier: notifier(&fds[s + 1])? })
            }
            None => None,
        };
        let back = Out { ring: here.producer(1)?, notifier: notifier(&fds[s - 1])? };
        let direct = match (&direct, s == stages) {
            (Some((_, attacher)), true) => Some(Out { ring: attacher.producer(0)?, notifier: notifier(&fds[0])? }),
            _ => None,
        };
        // The ring ends keep their regions mapped.
        let stage =
            Stage { input: In { rings, waiter: Waiter::new(fds[s].try_clone()?, spin) }, forward, back, direct };
        threads.push(std::thread::Builder::new().name(format!("stage-{s}")).spawn(move || stage.run())?);
    }
    let mut request = Vec::with_capacity(requests);
    let mut ret = Vec::with_capacity(requests);
    let mut total = Vec::with_capacity(requests);
    let mut run = || -> Result<()> {
        for n in 0..WARMUP + requests {
            let t0 = monotonic_ns();
            requester_out.push(&Descriptor {
                kind: REQUEST,
                id: n as u64,
                aux: [t0, 0, 0, 0],
                ..Default::default()
            })?;
            let d = requester.next()?;
            let back = monotonic_ns();
            ensure!(d.kind == COMPLETION && d.id == n as u64, "completion {} of kind {} for request {n}", d.id, d.kind);
            if n >= WARMUP {
                request.push(d.aux[1].saturating_sub(t0));
                ret.push(back.saturating_sub(d.aux[2]));
                total.push(back.saturating_sub(t0));
            }
        }
        Ok(())
    };
    let result = run();
    let _ = requester_out.push(&Descriptor { kind: STOP, ..Default::default() });
    for t in threads {
        match t.join() {
            Ok(r) => r?,
            Err(_) => bail!("a stage panicked"),
        }
    }
    result?;
    Ok(Times { request: median(request), ret: median(ret), total: median(total) })
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Pins this thread, and the threads it starts from now on, to CPU 0.
fn pin_to_one_cpu() -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes bit 0
    // of it; sched_setaffinity reads the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error()).context("sched_setaffinity");
        }
    }
    Ok(())
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

pub fn run(args: StagesArgs) -> Result<()> {
    if args.requests == 0 || !(1..=8).contains(&args.max_stages) {
        bail!("--requests must be positive and --max-stages within 1..=8");
    }
    if args.one_cpu {
        pin_to_one_cpu()?;
    }
    println!(
        "nagare bench stages: median µs of a request through 1 to {} stages and of its completion's return, {} requests each; threads over nagare-ipc rings, polling {} µs before they sleep{}",
        args.max_stages,
        args.requests,
        args.spin.as_micros(),
        if args.one_cpu { ", all on CPU 0" } else { "" }
    );
    println!();
    println!("| stages | direct: request | direct: return | direct: total | sequential: request | sequential: return | sequential: total |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for stages in 1..=args.max_stages {
        let direct = measure(stages, Return::Direct, args.requests, args.spin)?;
        let sequential = measure(stages, Return::Sequential, args.requests, args.spin)?;
        println!(
            "| {stages} | {} | {} | {} | {} | {} | {} |",
            us(direct.request),
            us(direct.ret),
            us(direct.total),
            us(sequential.request),
            us(sequential.ret),
            us(sequential.total)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request of every shape comes back, as the completion of that
    /// request, and the times add up: the total holds the request and the
    /// return.
    #[test]
    fn requests_pass_every_stage_and_come_back_either_way() {
        for stages in 1..=3 {
            for how in [Return::Direct, Return::Sequential] {
                let t = measure(stages, how, 50, Duration::ZERO).expect("a run");
                assert!(t.request > 0 && t.ret > 0, "{stages} {how:?}: {t:?}");
                assert!(t.total >= t.request, "{stages} {how:?}: {t:?}");
            }
        }
    }
}
