//! TCP under deterministic simulation: two engines on a simulated link in
//! virtual time, with seeded loss, reordering, duplication and corruption,
//! moving megabytes each way. Every byte must arrive in order (checked by
//! a hash over the stream), within a virtual-time bound. A failing run
//! prints its seed; `NAGARE_SIM_SEED=<seed>` replays exactly that run.
//!
//! Each seed picks its address family by its parity: even seeds run over
//! IPv4, odd seeds over IPv6 (link-local and unique local addresses made
//! preferred by duplicate address detection first, neighbour discovery in
//! place of ARP), so the campaign is half IPv4, half IPv6, with the same
//! checks. Corruption flips a bit anywhere in a frame of either family;
//! as the IPv6 header has no checksum of its own, a flipped address or
//! next header must be caught by the TCP checksum over the pseudo header
//! or by the address checks, and the stream hash fails the run if a
//! corrupted segment is ever delivered.
//!
//! `NAGARE_SIM_RUNS` sets how many seeded runs the campaign makes (the test
//! script runs 1000 in release mode; plain `cargo test` runs a few).

use nagare_core::buf::{BufferPool, PacketBuf, TxOffloads};
use nagare_core::iface::Error;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::tcp::congestion::CongestionAlgorithm;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_dev::{Device, Impairment, LinkConfig, SimLink, SimPort, SimRng};
use nagare_wire::{EthernetAddress, Ipv4Addr, Ipv4Cidr, Ipv6Addr};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const A_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const B_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const PORT: u16 = 5001;
const SUPER_SEGMENTS: TxOffloads = TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };

fn trace() -> bool {
    std::env::var_os("NAGARE_SIM_TRACE").is_some()
}

/// The address family a run's connection uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    V4,
    V6,
}

impl Family {
    /// Even seeds over IPv4, odd ones over IPv6.
    fn of_seed(seed: u64) -> Family {
        if seed.is_multiple_of(2) {
            Family::V4
        } else {
            Family::V6
        }
    }

    /// A's listening address and the address B connects to.
    fn endpoints(self) -> (SocketAddr, SocketAddr) {
        match self {
            Family::V4 => (SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT).into(), SocketAddrV4::new(A_IP, PORT).into()),
            Family::V6 => (
                SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, PORT, 0, 0).into(),
                SocketAddrV6::new(A_IP6, PORT, 0, 0).into(),
            ),
        }
    }
}

/// One line per TCP segment, for NAGARE_SIM_TRACE.
fn describe(frame: &PacketBuf) -> String {
    let bytes = frame.to_vec();
    let Some(ip) = bytes.get(14..) else { return "runt".into() };
    // The header length and protocol of IPv4, or IPv6's fixed header and
    // next header (extension headers are not followed).
    let (hl, proto) = match ip.first().map(|b| b >> 4) {
        Some(4) => (usize::from(ip[0] & 0xf) * 4, ip.get(9)),
        Some(6) => (40, ip.get(6)),
        _ => return "?".into(),
    };
    if proto != Some(&6) {
        return format!("non-tcp proto {proto:?} len {}", bytes.len());
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

fn side(ip: Ipv4Addr, ip6: Ipv6Addr, mac: u8, port: SimPort, seed: u64, family: Family) -> Side {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), Ipv4Cidr::new(ip, 24).unwrap());
    config.seed = seed;
    config.secrets = nagare_core::Secrets::from_seed(seed);
    // At the campaign's worst (10 % loss each way, corruption), three ARP
    // exchanges in a row fail about once in a hundred, and a connect whose
    // next hop never answers fails with host unreachable, as in Linux
    // (tested on its own in nagare-core's `neighbour_unreachable`). The
    // campaign is about TCP, so ARP asks longer here.
    config.arp.max_requests = 10;
    if family == Family::V6 {
        let mut v6 = Ipv6Config {
            addresses: vec![Ipv6Cidr::new(ip6, 64).unwrap()],
            // No router on the link to ask.
            router_solicitations: 0,
            ..Ipv6Config::default()
        };
        // Neighbour discovery asks longer, as ARP does above.
        v6.ndp.max_multicast_solicit = 10;
        v6.ndp.max_unicast_solicit = 10;
        config.ipv6 = Some(v6);
    }
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

    fn new(link: LinkConfig, seed: u64, family: Family) -> Net {
        let (pa, pb) = SimLink::new(link, seed);
        Net {
            a: side(A_IP, A_IP6, 1, pa, seed ^ 0xa, family),
            b: side(B_IP, B_IP6, 2, pb, seed ^ 0xb, family),
            now: Instant::ZERO,
        }
    }

    /// Runs both sides until every IPv6 address they have is preferred
    /// (duplicate address detection takes a few seconds); at once for a
    /// side without IPv6.
    fn wait_for_addresses(&mut self) -> Result<(), String> {
        let limit = Instant::from_secs(30);
        loop {
            self.settle();
            let pending = [&self.a, &self.b]
                .iter()
                .flat_map(|s| s.iface.ipv6_addresses())
                .find(|a| a.state != AddrState::Preferred)
                .map(|a| (a.address(), a.state));
            let Some(pending) = pending else { return Ok(()) };
            if !self.advance(limit) {
                return Err(format!("address {pending:?} not preferred at {:?}\n{}", self.now, self.dump()));
            }
        }
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
    /// The send and receive buffers grow from `buffers` (autotuning)
    /// rather than staying there (as after SO_SNDBUF and SO_RCVBUF).
    autotune: bool,
    family: Family,
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
            family: Family::V4,
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
        scenario.family = Family::of_seed(seed);
        scenario
    }

    fn describe(&self) -> String {
        format!(
            "seed {} ({:?}, {} B a->b, {} B b->a, buffers {} B, autotune {}, {:?}, sack {}, ts {}, link {:?})",
            self.seed,
            self.family,
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
        self.run_on().map(|(elapsed, frames, _)| (elapsed, frames))
    }

    /// [`run`](Self::run), giving back the network as it ended too.
    fn run_on(&self) -> Result<(Duration, u64, Net), String> {
        let mut net = Net::new(self.link, self.seed, self.family);
        net.wait_for_addresses()?;
        let started = net.now;
        for iface in [&mut net.a.iface, &mut net.b.iface] {
            let d = iface.tcp().defaults_mut();
            if self.autotune {
                d.send_buffer = self.buffers;
                d.recv_buffer = self.buffers;
            } else {
                d.set_send_buffer(self.buffers);
                d.set_recv_buffer(self.buffers);
            }
            d.congestion = self.algorithm;
            d.sack = self.sack;
            d.timestamps = self.timestamps;
        }
        let (listen_at, connect_to) = self.family.endpoints();
        let listener = net.a.iface.tcp().listen(listen_at, 8).map_err(|e| e.to_string())?;
        let hb = net.b.iface.tcp().connect(connect_to, 0, net.now).map_err(|e| e.to_string())?;
        let mut ha: Option<TcpHandle> = None;
        let mut accepted_from = None;
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
                accepted_from = ha.and_then(|h| net.a.iface.tcp_ref().connection(h)).map(|c| c.remote().ip());
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
        // The family asked for is the one the connection used.
        let expected = match self.family {
            Family::V4 => Some(SocketAddr::from((B_IP, 0)).ip()),
            Family::V6 => Some(SocketAddr::from((B_IP6, 0)).ip()),
        };
        if accepted_from != expected {
            return Err(format!("accepted from {accepted_from:?}, not {expected:?}"));
        }
        let frames = net.a.port.stats().tx_frames + net.b.port.stats().tx_frames;
        Ok((net.now - started, frames, net))
    }
}

fn runs() -> u64 {
    std::env::var("NAGARE_SIM_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

#[test]
fn clean_link_transfer() {
    for family in [Family::V4, Family::V6] {
        clean_link_transfer_over(family);
    }
}

fn clean_link_transfer_over(family: Family) {
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
        family,
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
        family: Family::V4,
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
    for family in [Family::V4, Family::V6] {
        let mut scenario = Scenario::random(11);
        scenario.family = family;
        scenario.bytes_ab = 2 << 20;
        scenario.bytes_ba = 256 << 10;
        scenario.link.impairment = Impairment { corrupt: 0.05, ..Impairment::none() };
        scenario.link.offloads = SUPER_SEGMENTS;
        // The stream hash check inside run() fails if a corrupted segment is
        // ever taken on the strength of its partial checksum.
        scenario.run().unwrap_or_else(|e| panic!("{}: {e}", scenario.describe()));
    }
}

#[test]
fn corrupted_ipv6_frames_are_dropped_not_delivered() {
    let mut scenario = Scenario::random(13);
    scenario.family = Family::V6;
    scenario.bytes_ab = 1 << 20;
    scenario.bytes_ba = 1 << 20;
    scenario.link.offloads = TxOffloads::NONE;
    // One frame in ten has a bit flipped: some in the IPv6 header, which
    // has no checksum, so its addresses and next header are caught by the
    // TCP checksum over the pseudo header or by the address checks.
    scenario.link.impairment = Impairment { corrupt: 0.1, ..Impairment::none() };
    // The stream hash check inside run() fails if one is ever delivered.
    let (_, _, net) = scenario.run_on().unwrap_or_else(|e| panic!("{}: {e}", scenario.describe()));
    let corrupted = net.a.port.tx_link_stats().impair.corrupted + net.b.port.tx_link_stats().impair.corrupted;
    let c = |side: &Side| side.iface.counters().clone();
    let (ca, cb) = (c(&net.a), c(&net.b));
    let checksum = ca.drop_tcp_checksum + cb.drop_tcp_checksum;
    let by_header = |c: &nagare_core::Counters| {
        c.drop_ip6_not_for_us + c.drop_ip6_bad_source + c.drop_ip6_unknown_next_header + c.drop_eth_not_for_us
    };
    assert!(corrupted > 200, "{corrupted} frames corrupted");
    assert!(checksum > 100, "{checksum} TCP checksum drops of {corrupted} corrupted frames\n{}", net.dump());
    assert!(by_header(&ca) + by_header(&cb) > 0, "no corrupted header caught\n{}", net.dump());
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
    let mut families = [0u64; 2];
    let verbose = std::env::var_os("NAGARE_SIM_VERBOSE").is_some();
    for seed in 1..=runs() {
        let scenario = Scenario::random(seed);
        families[usize::from(scenario.family == Family::V6)] += 1;
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
    eprintln!("{} runs over IPv4, {} over IPv6", families[0], families[1]);
    if runs() >= 2 {
        assert!(families.iter().all(|&n| n > 0), "both families run: {families:?}");
    }
}
