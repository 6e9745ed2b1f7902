//! TCP under deterministic simulation: two engines on a simulated link in
//! virtual time, with seeded loss, reordering, duplication and corruption,
//! moving megabytes each way. Every byte must arrive in order (checked by
//! a hash over the stream), within a virtual-time bound. A failing run
//! prints its seed; `NAGARE_SIM_SEED=<seed>` replays exactly that run.
//!
//! `NAGARE_SIM_RUNS` sets how many seeded runs the campaign makes (the test
//! script runs 1000 in release mode; plain `cargo test` runs a few).

use nagare_core::buf::{BufferPool, PacketBuf, TxOffloads};
use nagare_core::iface::Error;
use nagare_core::tcp::congestion::CongestionAlgorithm;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Instant, Interface, InterfaceConfig};
use nagare_dev::{Device, Impairment, LinkConfig, SimLink, SimPort, SimRng};
use nagare_wire::{EthernetAddress, Ipv4Addr, Ipv4Cidr};
use std::net::SocketAddrV4;
use std::time::Duration;

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5001;
const SUPER_SEGMENTS: TxOffloads = TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };

fn trace() -> bool {
    std::env::var_os("NAGARE_SIM_TRACE").is_some()
}

/// One line per TCP segment, for NAGARE_SIM_TRACE.
fn describe(frame: &PacketBuf) -> String {
    let bytes = frame.to_vec();
    let Some(ip) = bytes.get(14..) else { return "runt".into() };
    let Some(hl) = ip.first().map(|b| usize::from(b & 0xf) * 4) else { return "?".into() };
    if ip.get(9) != Some(&6) {
        return format!("non-tcp proto {:?} len {}", ip.get(9), bytes.len());
    }
    let Some(tcp) = ip.get(hl..) else { return "short".into() };
    let p = nagare_wire::TcpPacket::new_unchecked(tcp);
    let payload = p.payload().len();
    let r = nagare_wire::TcpRepr::parse(&p, Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED, false);
    match r {
        Ok(r) => format!(
            "{}>{} {:?} seq {} ack {:?} win {} len {} sack {:?} ts {:?}",
            r.src_port,
            r.dst_port,
            r.flags,
            r.seq_number.0,
            r.ack_number.map(|a| a.0),
            r.window_len,
            payload,
            r.sack_ranges.iter().flatten().collect::<Vec<_>>(),
            r.timestamp
        ),
        Err(e) => format!("unparsable {e:?}"),
    }
}

struct Side {
    iface: Interface,
    port: SimPort,
    rx: Vec<PacketBuf>,
}

struct Net {
    a: Side,
    b: Side,
    now: Instant,
}

fn side(ip: Ipv4Addr, mac: u8, port: SimPort, seed: u64) -> Side {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), Ipv4Cidr::new(ip, 24).unwrap());
    config.seed = seed;
    config.secrets = nagare_core::Secrets::from_seed(seed);
    // At the campaign's worst (10 % loss each way, corruption), three ARP
    // exchanges in a row fail about once in a hundred, and a connect whose
    // next hop never answers fails with host unreachable, as in Linux
    // (tested on its own in nagare-core's `neighbour_unreachable`). The
    // campaign is about TCP, so ARP asks longer here.
    config.arp.max_requests = 10;
    Side { iface: Interface::new(config, port.capabilities(), BufferPool::new(2048, 16384)), port, rx: Vec::new() }
}

impl Side {
    fn step(&mut self, now: Instant) -> bool {
        let pool = self.iface.pool().clone();
        let got = self.port.receive_batch(&pool, &mut self.rx, 64, now).unwrap_or(0);
        if trace() {
            for frame in &self.rx {
                eprintln!("{now:?} {} <- {}", self.iface.config().addresses[0].address(), describe(frame));
            }
        }
        self.iface.receive_batch(self.rx.drain(..), now);
        self.iface.poll(now);
        if trace() {
            let me = self.iface.config().addresses[0].address();
            for frame in self.iface.tx_queue().iter() {
                eprintln!("{now:?} {me} -> {}", describe(frame));
            }
        }
        let sent = self.port.transmit_batch(self.iface.tx_queue(), now).unwrap_or(0);
        got > 0 || sent > 0
    }

    fn poll_at(&self) -> Option<Instant> {
        [self.iface.poll_at(), self.port.poll_at()].into_iter().flatten().min()
    }
}

impl Net {
    /// Counters of both sides, for a failure report.
    fn dump(&self) -> String {
        let mut out = String::new();
        for (name, side) in [("a", &self.a), ("b", &self.b)] {
            let counters: Vec<String> =
                side.iface.counters().iter().filter(|(_, v)| *v != 0).map(|(n, v)| format!("{n}={v}")).collect();
            out += &format!(
                "  {name}: pool in use {} / exhausted {}; device {:?}; link {:?}\n  {name}: {}\n",
                side.iface.pool().in_use(),
                side.iface.pool().stats().exhausted,
                side.port.stats(),
                side.port.tx_link_stats(),
                counters.join(" ")
            );
        }
        out
    }

    fn new(link: LinkConfig, seed: u64) -> Net {
        let (pa, pb) = SimLink::new(link, seed);
        Net { a: side(A_IP, 1, pa, seed ^ 0xa), b: side(B_IP, 2, pb, seed ^ 0xb), now: Instant::ZERO }
    }

    /// Steps both sides until nothing moves at this instant.
    fn settle(&mut self) {
        for _ in 0..100_000 {
            let a = self.a.step(self.now);
            let b = self.b.step(self.now);
            if !a && !b {
                return;
            }
        }
        panic!("no progress at {:?}: livelock", self.now);
    }

    /// Advances virtual time to the next event; false if there is none
    /// before `limit`.
    fn advance(&mut self, limit: Instant) -> bool {
        let next = [self.a.poll_at(), self.b.poll_at()].into_iter().flatten().min();
        match next {
            Some(t) if t <= limit => {
                // An event "due now" that produced no work must not stall
                // time: step past it.
                self.now = if t <= self.now { self.now + Duration::from_micros(1) } else { t };
                true
            }
            _ => false,
        }
    }
}

/// FNV-1a over a byte stream, to compare what was sent and what arrived.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct StreamHash(u64, u64);

impl StreamHash {
    fn new() -> Self {
        StreamHash(0xcbf2_9ce4_8422_2325, 0)
    }
    fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.1 += data.len() as u64;
    }
}

/// One direction of a transfer: a generator of `total` pseudo-random bytes.
struct Sender {
    total: usize,
    sent: usize,
    rng: SimRng,
    hash: StreamHash,
    chunk: Vec<u8>,
    pending: usize,
    closed: bool,
    error: Option<String>,
}

impl Sender {
    fn new(total: usize, seed: u64) -> Self {
        Sender {
            total,
            sent: 0,
            rng: SimRng::new(seed),
            hash: StreamHash::new(),
            chunk: Vec::new(),
            pending: 0,
            closed: false,
            error: None,
        }
    }

    /// Writes as much as the connection takes.
    fn pump(&mut self, iface: &mut Interface, h: TcpHandle, now: Instant) {
        loop {
            if self.pending == 0 {
                if self.sent == self.total {
                    if !self.closed {
                        self.closed = true;
                        iface.tcp().shutdown(h, now).unwrap();
                    }
                    return;
                }
                // Write sizes vary so segment boundaries fall anywhere.
                let n = (1 + (self.rng.next_u64() % 20000) as usize).min(self.total - self.sent);
                self.chunk.clear();
                self.chunk.extend((0..n).map(|_| self.rng.next_u64() as u8));
                self.hash.update(&self.chunk);
                self.pending = n;
            }
            let start = self.chunk.len() - self.pending;
            match iface.tcp().send(h, &self.chunk[start..], now) {
                Ok(0) | Err(Error::WouldBlock) => return,
                Ok(n) => {
                    self.pending -= n;
                    self.sent += n;
                }
                Err(e) => {
                    self.error = Some(format!("send failed: {e}"));
                    return;
                }
            }
        }
    }
}

struct Receiver {
    hash: StreamHash,
    eof: bool,
    error: Option<String>,
}

impl Receiver {
    fn drain(&mut self, iface: &mut Interface, h: TcpHandle, now: Instant) {
        loop {
            match iface.tcp().recv_buf(h, usize::MAX, now) {
                Ok(Some(data)) => {
                    for chunk in data.chunks() {
                        self.hash.update(chunk);
                    }
                }
                Ok(None) => {
                    self.eof = true;
                    return;
                }
                Err(Error::WouldBlock) => return,
                Err(e) => {
                    self.error = Some(format!("recv failed: {e}"));
                    return;
                }
            }
        }
    }
}

struct Scenario {
    seed: u64,
    bytes_ab: usize,
    bytes_ba: usize,
    link: LinkConfig,
    buffers: usize,
    algorithm: CongestionAlgorithm,
    sack: bool,
    timestamps: bool,
    /// The receive buffer grows from `buffers` (autotuning) rather than
    /// staying there (as after SO_RCVBUF).
    autotune: bool,
}

impl Scenario {
    fn random(seed: u64) -> Scenario {
        let mut rng = SimRng::new(seed);
        let mut pick = |n: u64| rng.next_u64() % n;
        let mb = 1 << 20;
        let loss = [0.0, 0.001, 0.01, 0.03, 0.1][pick(5) as usize];
        let impairment = Impairment {
            loss,
            duplicate: [0.0, 0.01, 0.05][pick(3) as usize],
            reorder: [0.0, 0.01, 0.1][pick(3) as usize],
            reorder_extra_delay: Duration::from_micros(200 + pick(2000)),
            corrupt: [0.0, 0.001, 0.01][pick(3) as usize],
            delay: Duration::ZERO,
            jitter: Duration::from_micros(pick(3) * 50),
        };
        let mut scenario = Scenario {
            seed,
            bytes_ab: mb + pick(9 * mb as u64) as usize,
            bytes_ba: mb + pick(9 * mb as u64) as usize,
            link: LinkConfig {
                latency: Duration::from_micros(50 + pick(5000)),
                bandwidth_bps: Some([100_000_000, 1_000_000_000, 10_000_000_000][pick(3) as usize]),
                queue_limit: 64 + pick(1000) as usize,
                impairment,
                ..LinkConfig::default()
            },
            buffers: [8 * 1024, 64 * 1024, 256 * 1024, 1 << 20][pick(4) as usize],
            algorithm: if pick(2) == 0 { CongestionAlgorithm::NewReno } else { CongestionAlgorithm::Cubic },
            sack: pick(4) != 0,
            timestamps: pick(4) != 0,
            autotune: false,
        };
        if pick(4) == 0 {
            // Checksum and segmentation offload: 64 KiB super-segments,
            // lost, reordered and corrupted whole (a corrupted one is a
            // copy without the offload promise, so its partial checksum
            // fails and it is dropped).
            scenario.link.offloads = SUPER_SEGMENTS;
        }
        // Drawn last, so that every seed keeps the scenario it had before
        // autotuning existed, and half of them its fixed buffers.
        scenario.autotune = pick(2) == 0;
        scenario
    }

    fn describe(&self) -> String {
        format!(
            "seed {} ({} B a->b, {} B b->a, buffers {} B, autotune {}, {:?}, sack {}, ts {}, link {:?})",
            self.seed,
            self.bytes_ab,
            self.bytes_ba,
            self.buffers,
            self.autotune,
            self.algorithm,
            self.sack,
            self.timestamps,
            self.link
        )
    }

    /// Runs the transfer; Err describes what went wrong. Ok gives the
    /// virtual time taken and the frames both ports put on the link.
    fn run(&self) -> Result<(Duration, u64), String> {
        let mut net = Net::new(self.link, self.seed);
        for iface in [&mut net.a.iface, &mut net.b.iface] {
            let d = iface.tcp().defaults_mut();
            d.send_buffer = self.buffers;
            if self.autotune {
                d.recv_buffer = self.buffers;
            } else {
                d.set_recv_buffer(self.buffers);
            }
            d.congestion = self.algorithm;
            d.sack = self.sack;
            d.timestamps = self.timestamps;
        }
        let listener =
            net.a.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), 8).map_err(|e| e.to_string())?;
        let hb = net.b.iface.tcp().connect(SocketAddrV4::new(A_IP, PORT), 0, net.now).map_err(|e| e.to_string())?;
        let mut ha: Option<TcpHandle> = None;
        let mut send_ab = Sender::new(self.bytes_ab, self.seed ^ 1);
        let mut send_ba = Sender::new(self.bytes_ba, self.seed ^ 2);
        let mut recv_a = Receiver { hash: StreamHash::new(), eof: false, error: None };
        let mut recv_b = Receiver { hash: StreamHash::new(), eof: false, error: None };
        // Generous: 10 MB at 100 Mbit/s with 10 % loss and small windows.
        let limit = Instant::from_secs(3600);
        let mut dumped = false;
        // A bound on work as well as on virtual time: a run that crawls
        // through virtual time in tiny steps is a livelock too.
        let mut rounds: u64 = 0;
        let max_rounds = 20_000_000;
        loop {
            rounds += 1;
            if rounds > max_rounds {
                return Err(format!(
                    "no progress after {rounds} rounds at {:?}: a->b {} of {} received, b->a {} of {} received\n{}",
                    net.now,
                    recv_b.hash.1,
                    self.bytes_ab,
                    recv_a.hash.1,
                    self.bytes_ba,
                    net.dump()
                ));
            }
            net.settle();
            if ha.is_none() {
                ha = net.a.iface.tcp().accept(listener).map_err(|e| e.to_string())?;
            }
            if let Some(ha) = ha {
                send_ab.pump(&mut net.a.iface, ha, net.now);
                recv_a.drain(&mut net.a.iface, ha, net.now);
            }
            send_ba.pump(&mut net.b.iface, hb, net.now);
            recv_b.drain(&mut net.b.iface, hb, net.now);
            for (who, error) in [
                ("a send", &send_ab.error),
                ("b send", &send_ba.error),
                ("a recv", &recv_a.error),
                ("b recv", &recv_b.error),
            ] {
                if let Some(e) = error {
                    return Err(format!("{who} at {:?}: {e}\n{}", net.now, net.dump()));
                }
            }
            if recv_a.eof && recv_b.eof && send_ab.closed && send_ba.closed {
                break;
            }
            net.settle();
            if std::env::var_os("NAGARE_SIM_DUMP_AT").is_some() && !dumped {
                let at: u64 = std::env::var("NAGARE_SIM_DUMP_AT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
                if net.now >= Instant::from_millis(at) {
                    dumped = true;
                    eprintln!(
                        "DUMP at {:?}\nA: {:#?}\nB: {:#?}",
                        net.now,
                        ha.and_then(|h| net.a.iface.tcp_ref().connection(h)),
                        net.b.iface.tcp_ref().connection(hb)
                    );
                }
            }
            if !net.advance(limit) {
                return Err(format!(
                    "stalled at {:?}: a->b {} of {} sent, {} received; b->a {} of {} sent, {} received; a {:?} b {:?}",
                    net.now,
                    send_ab.sent,
                    self.bytes_ab,
                    recv_b.hash.1,
                    send_ba.sent,
                    self.bytes_ba,
                    recv_a.hash.1,
                    ha.and_then(|h| net.a.iface.tcp_ref().state(h).ok()),
                    net.b.iface.tcp_ref().state(hb).ok(),
                ) + &format!(
                    "\n{}A: {:#?}\nB: {:#?}",
                    net.dump(),
                    ha.and_then(|h| net.a.iface.tcp_ref().connection(h)),
                    net.b.iface.tcp_ref().connection(hb)
                ));
            }
        }
        if std::env::var_os("NAGARE_SIM_VERBOSE").is_some() {
            eprintln!("done at {:?} after {rounds} rounds\n{}", net.now, net.dump());
        }
        if recv_b.hash != send_ab.hash {
            return Err(format!("a->b stream differs: sent {:?}, received {:?}", send_ab.hash, recv_b.hash));
        }
        if recv_a.hash != send_ba.hash {
            return Err(format!("b->a stream differs: sent {:?}, received {:?}", send_ba.hash, recv_a.hash));
        }
        let frames = net.a.port.stats().tx_frames + net.b.port.stats().tx_frames;
        Ok((net.now - Instant::ZERO, frames))
    }
}

fn runs() -> u64 {
    std::env::var("NAGARE_SIM_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

#[test]
fn clean_link_transfer() {
    let scenario = Scenario {
        seed: 0,
        bytes_ab: 200_000,
        bytes_ba: 100_000,
        link: LinkConfig {
            latency: Duration::from_micros(100),
            bandwidth_bps: Some(1_000_000_000),
            ..LinkConfig::default()
        },
        buffers: 64 * 1024,
        algorithm: CongestionAlgorithm::Cubic,
        sack: true,
        timestamps: true,
        autotune: false,
    };
    let (elapsed, _) = scenario.run().unwrap_or_else(|e| panic!("{}: {e}", scenario.describe()));
    // 300 kB at 1 Gbit/s with a 200 us RTT: a few milliseconds of virtual time.
    assert!(elapsed < Duration::from_millis(100), "took {elapsed:?}");
}

#[test]
fn offloaded_link_carries_super_segments() {
    let mut scenario = Scenario {
        seed: 7,
        bytes_ab: 4 << 20,
        bytes_ba: 1 << 20,
        link: LinkConfig {
            latency: Duration::from_micros(100),
            bandwidth_bps: Some(10_000_000_000),
            ..LinkConfig::default()
        },
        buffers: 1 << 20,
        algorithm: CongestionAlgorithm::Cubic,
        sack: true,
        timestamps: true,
        autotune: false,
    };
    let (_, plain_frames) = scenario.run().unwrap_or_else(|e| panic!("{}: {e}", scenario.describe()));
    scenario.link.offloads = SUPER_SEGMENTS;
    let (_, offloaded_frames) = scenario.run().unwrap_or_else(|e| panic!("{}: {e}", scenario.describe()));
    // 5 MiB in 1448-byte segments is over 3600 frames of data alone; in
    // 64 KiB super-segments, data needs about 80.
    assert!(plain_frames > 3600, "{plain_frames} frames without offload");
    assert!(offloaded_frames * 4 < plain_frames, "{offloaded_frames} frames with offload, {plain_frames} without");
}

#[test]
fn corrupted_super_segments_are_dropped_not_delivered() {
    let mut scenario = Scenario::random(11);
    scenario.bytes_ab = 2 << 20;
    scenario.bytes_ba = 256 << 10;
    scenario.link.impairment = Impairment { corrupt: 0.05, ..Impairment::none() };
    scenario.link.offloads = SUPER_SEGMENTS;
    // The stream hash check inside run() fails if a corrupted segment is
    // ever taken on the strength of its partial checksum.
    scenario.run().unwrap_or_else(|e| panic!("{}: {e}", scenario.describe()));
}

#[test]
fn seeded_transfers_deliver_every_byte() {
    if let Some(seed) = std::env::var("NAGARE_SIM_SEED").ok().and_then(|v| v.parse().ok()) {
        let scenario = Scenario::random(seed);
        eprintln!("replaying {}", scenario.describe());
        if let Err(e) = scenario.run() {
            panic!("{}: {e}", scenario.describe());
        }
        return;
    }
    let mut failures = Vec::new();
    let verbose = std::env::var_os("NAGARE_SIM_VERBOSE").is_some();
    for seed in 1..=runs() {
        let scenario = Scenario::random(seed);
        let started = std::time::Instant::now();
        let result = scenario.run();
        if verbose {
            eprintln!("seed {seed}: {:?} virtual, {:?} wall", result.as_ref().ok(), started.elapsed());
        }
        if let Err(e) = result {
            eprintln!(
                "FAILED {}: {e}\n  replay: NAGARE_SIM_SEED={seed} cargo test -p nagare-dev --test tcp_sim",
                scenario.describe()
            );
            failures.push(seed);
        }
    }
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}
