//! A simulated point-to-point Ethernet link running on virtual time.
//!
//! [`SimLink::new`] returns the two ends of a cable. A frame transmitted at
//! one end at time `t` is serialized onto the link (it starts when the
//! previous frame in the same direction has finished, and takes
//! `len * 8 / bandwidth`), propagates for `latency`, passes through the
//! impairment, and can be received at the other end once `now` has reached
//! its delivery time. Nothing happens by itself: time moves only through the
//! `now` given to each call, so a whole network of nagare instances can be
//! run deterministically and faster than real time. [`Device::poll_at`]
//! says when the next frame becomes deliverable.
//!
//! Frames move across without being copied (the `PacketBuf` itself goes to
//! the receiver), except corrupted ones, which are copied into the
//! receiver's pool with one bit flipped.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use nagare_core::buf::{BufferPool, PacketBuf, TxOffloads};
use nagare_core::{Capabilities, Instant};

use crate::device::{frame_fits, Device, DeviceStats, DEFAULT_MTU};
use crate::impair::{DelayLine, ImpairStats, Impairer, Impairment};
use crate::rng::splitmix64;

/// How a simulated link behaves (the same in both directions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Propagation delay added to every frame.
    pub latency: Duration,
    /// Bits per second, or `None` for infinitely fast serialization.
    /// Only the frame's own bytes count (no preamble or inter-frame gap).
    pub bandwidth_bps: Option<u64>,
    /// Largest IP packet carried; longer frames are refused as
    /// transmit errors.
    pub mtu: usize,
    /// Most frames in flight per direction (queued for serialization,
    /// propagating, or held by the impairment); excess frames are dropped
    /// and counted.
    pub queue_limit: usize,
    /// What goes wrong on the way.
    pub impairment: Impairment,
    /// What the ports offer to complete on transmit. Frames cross in
    /// memory, so a partial checksum is never completed and the receiver
    /// trusts it, and a super-segment arrives whole: as between two
    /// virtual machines on one host.
    pub offloads: TxOffloads,
}

impl Default for LinkConfig {
    /// No latency, unlimited bandwidth, MTU 1500, 1024 frames in flight,
    /// no impairment.
    fn default() -> Self {
        LinkConfig {
            latency: Duration::ZERO,
            bandwidth_bps: None,
            mtu: DEFAULT_MTU,
            queue_limit: 1024,
            impairment: Impairment::none(),
            offloads: TxOffloads::NONE,
        }
    }
}

/// What happened to the frames sent in one direction of a simulated link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimLinkStats {
    /// The impairment's counters.
    pub impair: ImpairStats,
    /// Frames dropped because `queue_limit` frames were already in flight.
    pub queue_dropped: u64,
    /// Frames in flight now.
    pub in_flight: usize,
}

struct Direction {
    line: DelayLine,
    impairer: Impairer,
    /// When the link finishes serializing the last frame, in units of
    /// `1 / bandwidth_bps` microseconds, so serialization times add up
    /// exactly and rounding (up, to the microsecond clock) happens only
    /// when a delivery time is computed.
    busy_until: u128,
    queue_dropped: u64,
}

struct Shared {
    config: LinkConfig,
    dirs: [Direction; 2],
}

/// Constructor of simulated links.
pub struct SimLink;

impl SimLink {
    /// A link with both ends; `seed` fixes every random decision of the
    /// impairment (the two directions use independent streams).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(config: LinkConfig, seed: u64) -> (SimPort, SimPort) {
        let mut sm = seed;
        let mut direction = || Direction {
            line: DelayLine::default(),
            impairer: Impairer::new(config.impairment, splitmix64(&mut sm)),
            busy_until: 0,
            queue_dropped: 0,
        };
        let dirs = [direction(), direction()];
        let shared = Rc::new(RefCell::new(Shared { config, dirs }));
        let port = |side| SimPort { shared: Rc::clone(&shared), side, stats: DeviceStats::default() };
        (port(0), port(1))
    }
}

/// One end of a simulated link.
pub struct SimPort {
    shared: Rc<RefCell<Shared>>,
    /// 0 or 1: this end transmits into `dirs[side]` and receives from
    /// `dirs[1 - side]`.
    side: usize,
    stats: DeviceStats,
}

impl SimPort {
    /// The link's configuration.
    pub fn config(&self) -> LinkConfig {
        self.shared.borrow().config
    }

    /// Counters of the direction this end transmits into.
    pub fn tx_link_stats(&self) -> SimLinkStats {
        let shared = self.shared.borrow();
        let dir = &shared.dirs[self.side];
        SimLinkStats { impair: dir.impairer.stats, queue_dropped: dir.queue_dropped, in_flight: dir.line.len() }
    }

    /// Frames on their way to this end.
    pub fn rx_in_flight(&self) -> usize {
        self.shared.borrow().dirs[1 - self.side].line.len()
    }
}

impl Device for SimPort {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        let mut shared = self.shared.borrow_mut();
        let line = &mut shared.dirs[1 - self.side].line;
        let mut n = 0;
        while n < max {
            let Some(held) = line.pop_due(now) else { break };
            match held.deliver(pool) {
                Some(frame) => {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += frame.len() as u64;
                    out.push(frame);
                    n += 1;
                }
                None => self.stats.rx_dropped_no_buffer += 1,
            }
        }
        Ok(n)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        let mut shared = self.shared.borrow_mut();
        let config = shared.config;
        let dir = &mut shared.dirs[self.side];
        let mut taken = 0;
        while let Some(frame) = frames.pop_front() {
            taken += 1;
            let len = frame.len();
            if !frame_fits(&frame, config.mtu, config.offloads) {
                self.stats.tx_errors += 1;
                continue;
            }
            if dir.line.len() >= config.queue_limit {
                dir.queue_dropped += 1;
                self.stats.tx_dropped += 1;
                continue;
            }
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += len as u64;
            let finished = match config.bandwidth_bps {
                Some(bps) if bps > 0 => {
                    let bps = u128::from(bps);
                    let start = dir.busy_until.max(u128::from(now.total_micros()) * bps);
                    dir.busy_until = start + len as u128 * 8 * 1_000_000;
                    Instant::from_micros(u64::try_from(dir.busy_until.div_ceil(bps)).unwrap_or(u64::MAX))
                }
                _ => now,
            };
            let arrive = finished + config.latency;
            dir.impairer.apply(frame, arrive, &mut dir.line, config.queue_limit);
        }
        Ok(taken)
    }

    fn capabilities(&self) -> Capabilities {
        let shared = self.shared.borrow();
        Capabilities { mtu: shared.config.mtu, tx_offloads: shared.config.offloads }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.shared.borrow().dirs[1 - self.side].line.next_at()
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u32 = 10_000;

    fn frame(pool: &BufferPool, seq: u32, len: usize) -> PacketBuf {
        let mut bytes = vec![0xa5u8; len];
        bytes[..4].copy_from_slice(&seq.to_be_bytes());
        PacketBuf::from_slice(pool, 0, &bytes).unwrap()
    }

    fn seq(frame: &PacketBuf) -> u32 {
        u32::from_be_bytes(frame.header::<4>().unwrap())
    }

    fn send(port: &mut SimPort, pool: &BufferPool, seq: u32, len: usize, now: Instant) {
        let mut q = VecDeque::from([frame(pool, seq, len)]);
        assert_eq!(port.transmit_batch(&mut q, now).unwrap(), 1);
    }

    /// Sends `N` frames from `a`, one every 10 µs, receiving at `b` as time
    /// goes on; returns `(arrival time, frame)` in delivery order.
    fn run(config: LinkConfig, seed: u64) -> (Vec<(Instant, PacketBuf)>, SimLinkStats, BufferPool) {
        let pool = BufferPool::new(2048, 4 * N as usize);
        let (mut a, mut b) = SimLink::new(config, seed);
        let mut got = Vec::new();
        let mut out = Vec::new();
        let mut now = Instant::ZERO;
        let mut i = 0;
        loop {
            if i < N {
                send(&mut a, &pool, i, 100, now);
                i += 1;
            }
            b.receive_batch(&pool, &mut out, usize::MAX, now).unwrap();
            got.extend(out.drain(..).map(|f| (now, f)));
            if i == N {
                match b.poll_at() {
                    Some(t) => now = t,
                    None => break,
                }
            } else {
                now += Duration::from_micros(10);
            }
        }
        (got, a.tx_link_stats(), pool)
    }

    fn impaired(s: &str) -> LinkConfig {
        LinkConfig { queue_limit: usize::MAX, impairment: s.parse().unwrap(), ..LinkConfig::default() }
    }

    #[test]
    fn latency_and_bandwidth_timing_is_exact() {
        let pool = BufferPool::new(2048, 16);
        let config = LinkConfig {
            latency: Duration::from_millis(5),
            bandwidth_bps: Some(8_000_000), // 1000-byte frame = 1 ms on the wire
            ..LinkConfig::default()
        };
        let (mut a, mut b) = SimLink::new(config, 1);
        let t0 = Instant::ZERO;
        let mut q: VecDeque<PacketBuf> = (0..3).map(|i| frame(&pool, i, 1000)).collect();
        assert_eq!(a.transmit_batch(&mut q, t0).unwrap(), 3);
        assert_eq!(b.poll_at(), Some(Instant::from_micros(6000)));
        assert_eq!(a.poll_at(), None, "nothing travels towards a");
        let mut out = Vec::new();
        assert_eq!(b.receive_batch(&pool, &mut out, 10, Instant::from_micros(5999)).unwrap(), 0);
        assert_eq!(b.receive_batch(&pool, &mut out, 10, Instant::from_micros(6000)).unwrap(), 1);
        assert_eq!(b.poll_at(), Some(Instant::from_micros(7000)));
        assert_eq!(b.receive_batch(&pool, &mut out, 10, Instant::from_micros(7999)).unwrap(), 1);
        assert_eq!(b.poll_at(), Some(Instant::from_micros(8000)));
        assert_eq!(b.receive_batch(&pool, &mut out, 10, Instant::from_micros(8000)).unwrap(), 1);
        assert_eq!(b.poll_at(), None);
        assert_eq!(out.iter().map(seq).collect::<Vec<_>>(), [0, 1, 2]);

        // Sent while the link is still busy: waits for the previous frame.
        send(&mut a, &pool, 3, 500, Instant::from_micros(2500)); // starts 3000, ends 3500
        assert_eq!(b.poll_at(), Some(Instant::from_micros(8500)));
        // An idle link starts at once; the other direction is independent.
        send(&mut a, &pool, 4, 1000, Instant::from_micros(20_000));
        send(&mut b, &pool, 5, 125, Instant::from_micros(20_000));
        assert_eq!(a.poll_at(), Some(Instant::from_micros(25_125)));
        b.receive_batch(&pool, &mut out, 10, Instant::from_micros(8500)).unwrap();
        assert_eq!(b.poll_at(), Some(Instant::from_micros(26_000)));

        // Zero copy: the frames received are the ones sent.
        assert_eq!(pool.in_use(), 6);
        drop(out);
        let mut rest = Vec::new();
        b.receive_batch(&pool, &mut rest, 10, Instant::from_secs(1)).unwrap();
        a.receive_batch(&pool, &mut rest, 10, Instant::from_secs(1)).unwrap();
        assert_eq!(rest.iter().map(seq).collect::<Vec<_>>(), [4, 5]);
        drop(rest);
        assert_eq!(pool.in_use(), 0);
        let s = a.stats();
        assert_eq!((s.tx_frames, s.tx_bytes, s.rx_frames), (5, 4500, 1));
    }

    #[test]
    fn serialization_rounding_does_not_accumulate() {
        // 100 bytes at 3 Mbit/s = 266.67 µs each: 30 frames take exactly 8 ms.
        let pool = BufferPool::new(2048, 64);
        let config = LinkConfig { bandwidth_bps: Some(3_000_000), ..LinkConfig::default() };
        let (mut a, b) = SimLink::new(config, 1);
        let mut q: VecDeque<PacketBuf> = (0..30).map(|i| frame(&pool, i, 100)).collect();
        a.transmit_batch(&mut q, Instant::ZERO).unwrap();
        let mut b = b;
        let mut times = Vec::new();
        let mut out = Vec::new();
        while let Some(t) = b.poll_at() {
            b.receive_batch(&pool, &mut out, 1, t).unwrap();
            times.push(t.total_micros());
        }
        assert_eq!(times.len(), 30);
        assert_eq!(times[0], 267);
        assert_eq!(times[2], 800);
        assert_eq!(times[29], 8000);
    }

    #[test]
    fn same_seed_same_sequence_different_seed_different() {
        let config = impaired("loss=5%,dup=5%,reorder=10%,jitter=30us,corrupt=1%");
        let digest = |seed| {
            let (got, _, _) = run(config, seed);
            got.iter().map(|(t, f)| (t.total_micros(), f.to_vec())).collect::<Vec<_>>()
        };
        let a = digest(7);
        assert_eq!(a, digest(7));
        assert_ne!(a, digest(8));
    }

    #[test]
    fn loss_all_or_nothing() {
        let (got, stats, pool) = run(impaired("loss=100%"), 3);
        assert!(got.is_empty());
        assert_eq!(stats.impair.lost, u64::from(N));
        assert_eq!(pool.in_use(), 0, "lost frames return their buffers");

        let (got, stats, _) = run(impaired("none"), 3);
        assert_eq!(got.len(), N as usize);
        assert_eq!(stats.impair.lost, 0);
        assert!(got.iter().enumerate().all(|(i, (_, f))| seq(f) == i as u32), "in order");
    }

    #[test]
    fn loss_rate_within_bounds() {
        let (got, stats, _) = run(impaired("loss=30%"), 11);
        // Expect 3000 lost, sigma ~46.
        assert!((2800..=3200).contains(&stats.impair.lost), "lost {}", stats.impair.lost);
        assert_eq!(got.len() as u64, u64::from(N) - stats.impair.lost);
    }

    #[test]
    fn duplication_rate_within_bounds() {
        let (got, stats, pool) = run(impaired("dup=5%"), 12);
        let extra = got.len() - N as usize;
        // Expect 500, sigma ~22.
        assert!((400..=600).contains(&extra), "duplicates {extra}");
        assert_eq!(extra as u64, stats.impair.duplicated);
        let mut seen = vec![0u8; N as usize];
        for (_, f) in &got {
            seen[seq(f) as usize] += 1;
        }
        assert_eq!(seen.iter().filter(|&&c| c == 2).count(), extra);
        assert!(seen.iter().all(|&c| c == 1 || c == 2));
        drop(got);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn reorder_rate_within_bounds() {
        let (got, stats, _) = run(impaired("reorder=10%,reorder_delay=1ms"), 13);
        assert_eq!(got.len(), N as usize);
        // A held-back frame arrives after frames sent later than it.
        let mut highest = None;
        let mut late = 0;
        for (_, f) in &got {
            let s = seq(f);
            if highest.is_some_and(|h| s < h) {
                late += 1;
            }
            highest = highest.max(Some(s));
        }
        // Expect 1000, sigma 30.
        assert!((880..=1120).contains(&late), "late frames {late}");
        // Every held-back frame is overtaken, except possibly the last few
        // sent, which have no successors.
        let held = stats.impair.reordered;
        assert!(late as u64 <= held && held - late as u64 <= 3, "late {late}, held back {held}");
    }

    #[test]
    fn corruption_rate_within_bounds_and_one_bit_each() {
        let (got, stats, pool) = run(impaired("corrupt=2%"), 14);
        assert_eq!(got.len(), N as usize);
        let mut corrupted = 0;
        let mut in_use_by_copies = 0;
        for (i, (_, f)) in got.iter().enumerate() {
            let sent = {
                let mut b = vec![0xa5u8; 100];
                b[..4].copy_from_slice(&(i as u32).to_be_bytes());
                b
            };
            let bits: u32 = f.to_vec().iter().zip(&sent).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert!(bits <= 1);
            if bits == 1 {
                corrupted += 1;
                assert_eq!(f.headroom(), crate::RX_HEADROOM, "corrupted copy is a fresh buffer");
                in_use_by_copies += 1;
            }
        }
        // Expect 200, sigma 14.
        assert!((140..=260).contains(&corrupted), "corrupted {corrupted}");
        assert_eq!(corrupted, stats.impair.corrupted);
        // Originals of corrupted frames were released; copies are held.
        assert_eq!(pool.in_use(), N as usize);
        assert!(in_use_by_copies > 0);
        drop(got);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn delay_and_jitter_bounds() {
        let config = LinkConfig { latency: Duration::from_micros(100), ..impaired("delay=1ms,jitter=200us") };
        let pool = BufferPool::new(2048, 16);
        let (mut a, mut b) = SimLink::new(config, 5);
        let mut delays = Vec::new();
        for i in 0..2000u32 {
            let t = Instant::from_millis(u64::from(i) * 10);
            send(&mut a, &pool, i, 60, t);
            let at = b.poll_at().unwrap();
            let d = (at - t).as_micros() as u64;
            assert!((900..=1300).contains(&d), "delay {d}");
            delays.push(d);
            let mut out = Vec::new();
            b.receive_batch(&pool, &mut out, 10, at).unwrap();
            assert_eq!(out.len(), 1);
        }
        assert!(delays.iter().any(|&d| d < 920));
        assert!(delays.iter().any(|&d| d > 1280));
        let mean = delays.iter().sum::<u64>() as f64 / delays.len() as f64;
        assert!((1080.0..1120.0).contains(&mean), "mean {mean}");
    }

    #[test]
    fn queue_limit_drops_are_counted() {
        let pool = BufferPool::new(2048, 64);
        let config = LinkConfig { latency: Duration::from_millis(1), queue_limit: 4, ..LinkConfig::default() };
        let (mut a, mut b) = SimLink::new(config, 1);
        let mut q: VecDeque<PacketBuf> = (0..10).map(|i| frame(&pool, i, 100)).collect();
        assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 10);
        assert_eq!(a.tx_link_stats().queue_dropped, 6);
        assert_eq!(a.stats().tx_dropped, 6);
        assert_eq!(a.stats().tx_frames, 4);
        assert_eq!(b.rx_in_flight(), 4);
        assert_eq!(pool.in_use(), 4, "dropped frames return their buffers");
        let mut out = Vec::new();
        b.receive_batch(&pool, &mut out, 100, Instant::from_millis(1)).unwrap();
        assert_eq!(out.iter().map(seq).collect::<Vec<_>>(), [0, 1, 2, 3]);
        // Room again once delivered.
        let mut q = VecDeque::from([frame(&pool, 10, 100)]);
        a.transmit_batch(&mut q, Instant::from_millis(1)).unwrap();
        assert_eq!(a.tx_link_stats().in_flight, 1);
        // Oversize is a transmit error, not a queue drop.
        let mut q = VecDeque::from([frame(&pool, 11, 1515)]);
        a.transmit_batch(&mut q, Instant::from_millis(1)).unwrap();
        assert_eq!(a.stats().tx_errors, 1);
        drop(out);
        drop(b);
        drop(a);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn corrupted_frame_without_pool_buffer_is_dropped_and_counted() {
        let pool = BufferPool::new(2048, 1);
        let (mut a, mut b) = SimLink::new(impaired("corrupt=100%"), 2);
        send(&mut a, &pool, 0, 60, Instant::ZERO);
        let hog = BufferPool::new(2048, 0);
        let mut out = Vec::new();
        assert_eq!(b.receive_batch(&hog, &mut out, 10, Instant::ZERO).unwrap(), 0);
        assert_eq!(b.stats().rx_dropped_no_buffer, 1);
        assert_eq!(pool.in_use(), 0);
    }
}
