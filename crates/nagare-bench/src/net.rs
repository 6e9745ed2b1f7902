//! Two nagare interfaces on an in-memory link, stepped in one thread on a
//! virtual clock.
//!
//! Two links are offered ([`LinkKind`]): the simulated link of
//! `nagare-dev` (`LinkConfig::default()`: zero latency, unlimited
//! bandwidth, MTU 1500, no impairment, with room for every frame a large
//! window puts in flight), and [`FifoPort`], a pair of plain FIFO queues
//! (the same shape as the frame queues the smoltcp peer runs on; the
//! simulated link keeps frames in a heap ordered by delivery time, which
//! costs a sift per frame). Frames cross without a copy either way (the
//! `PacketBuf` moves), so what a benchmark measures is the two engines'
//! send and receive paths. Time is
//! virtual: it stays put while there is work and jumps to the next timer
//! when both sides are idle ([`Pair::idle_jump`] counts those jumps, so a
//! run that leaned on them shows it).

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::tcp::config::TcpConfig;
use nagare_core::{Instant, Interface, InterfaceConfig};
use nagare_dev::{Device, DeviceStats, LinkConfig, SimLink};
use nagare_wire::{EthernetAddress, Ipv4Cidr, ETHERNET_HEADER_LEN};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::time::Duration;

/// A's address (the side that connects and sends).
pub const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// B's address (the side that listens and receives).
pub const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Size of every pool buffer: a 1514-byte frame plus headroom fits.
pub const BUFFER_SIZE: usize = 2048;
/// Frames taken from the link per step.
const RX_BATCH: usize = 256;
/// Steps at one instant before `settle` gives up (a livelock guard).
const SETTLE_LIMIT: usize = 1_000_000;

/// Which in-memory link joins the two interfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// `nagare_dev::SimLink` with `LinkConfig::default()`.
    Sim,
    /// [`FifoPort`]: two FIFO queues, MTU 1500.
    Fifo,
}

/// One end of a cable made of two FIFO queues of frames: what one end
/// transmits the other receives, in order, at once, without a copy.
pub struct FifoPort {
    queues: Rc<RefCell<[VecDeque<PacketBuf>; 2]>>,
    side: usize,
    mtu: usize,
    stats: DeviceStats,
}

impl FifoPort {
    /// Both ends of a cable carrying IP packets up to `mtu` bytes.
    pub fn pair(mtu: usize) -> (FifoPort, FifoPort) {
        let queues = Rc::new(RefCell::new([VecDeque::new(), VecDeque::new()]));
        let end = |side| FifoPort { queues: queues.clone(), side, mtu, stats: DeviceStats::default() };
        (end(0), end(1))
    }
}

impl Device for FifoPort {
    fn receive_batch(
        &mut self,
        _pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        _now: Instant,
    ) -> io::Result<usize> {
        let mut queues = self.queues.borrow_mut();
        let queue = &mut queues[1 - self.side];
        let n = queue.len().min(max);
        for frame in queue.drain(..n) {
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += frame.len() as u64;
            out.push(frame);
        }
        Ok(n)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, _now: Instant) -> io::Result<usize> {
        let mut queues = self.queues.borrow_mut();
        let queue = &mut queues[self.side];
        let n = frames.len();
        for frame in frames.drain(..) {
            if frame.is_empty() || frame.len() > self.mtu + ETHERNET_HEADER_LEN {
                self.stats.tx_errors += 1;
                continue;
            }
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += frame.len() as u64;
            queue.push_back(frame);
        }
        Ok(n)
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

/// One interface and its end of the link.
pub struct Side {
    pub iface: Interface,
    pub port: Box<dyn Device>,
    rx: Vec<PacketBuf>,
}

impl Side {
    /// Receives what the link delivers, runs timers, transmits; whether
    /// anything moved.
    pub fn step(&mut self, now: Instant) -> bool {
        let pool = self.iface.pool().clone();
        let got = self.port.receive_batch(&pool, &mut self.rx, RX_BATCH, now).unwrap_or(0);
        self.iface.receive_batch(self.rx.drain(..), now);
        self.iface.poll(now);
        let sent = if self.iface.tx_queue().is_empty() {
            0
        } else {
            self.port.transmit_batch(self.iface.tx_queue(), now).unwrap_or(0)
        };
        got > 0 || sent > 0
    }

    fn poll_at(&self) -> Option<Instant> {
        [self.iface.poll_at(), self.port.poll_at()].into_iter().flatten().min()
    }
}

/// How to build a pair.
#[derive(Clone)]
pub struct PairConfig {
    /// Most buffers each interface's pool may create.
    pub pool_buffers: usize,
    /// Buffers created up front and returned to each pool, so that a
    /// measurement does not see the pool grow.
    pub prewarm_buffers: usize,
    /// Settings of every TCP socket on both sides.
    pub tcp: TcpConfig,
    /// The link between them.
    pub link: LinkKind,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig { pool_buffers: 16384, prewarm_buffers: 0, tcp: TcpConfig::default(), link: LinkKind::Sim }
    }
}

/// Two interfaces, A (10.0.0.1) and B (10.0.0.2), on one link.
pub struct Pair {
    pub a: Side,
    pub b: Side,
    pub now: Instant,
    /// Times virtual time jumped because neither side had work.
    pub idle_jumps: u64,
}

fn side(ip: Ipv4Addr, mac: u8, port: Box<dyn Device>, config: &PairConfig) -> Side {
    let cidr = Ipv4Cidr::new(ip, 24).expect("a /24 is valid");
    let mut ic = InterfaceConfig::new(EthernetAddress([0x02, 0x6e, 0x67, 0, 0, mac]), cidr);
    ic.seed = 0x6265_6e63_6800 | u64::from(mac);
    // A 4 MiB window is ~2900 segments queued in one go.
    ic.tx_queue_limit = 1 << 16;
    let pool = BufferPool::new(BUFFER_SIZE, config.pool_buffers);
    prewarm(&pool, config.prewarm_buffers);
    let mut iface = Interface::new(ic, pool);
    *iface.tcp_defaults_mut() = config.tcp.clone();
    Side { iface, port, rx: Vec::with_capacity(RX_BATCH) }
}

/// Creates `n` buffers in `pool` and gives them back (to its free list).
pub fn prewarm(pool: &BufferPool, n: usize) {
    let held: Vec<_> = (0..n).map_while(|_| pool.alloc().ok()).collect();
    drop(held);
}

impl Pair {
    pub fn new(config: &PairConfig) -> Pair {
        let (pa, pb): (Box<dyn Device>, Box<dyn Device>) = match config.link {
            LinkKind::Sim => {
                let link = LinkConfig { queue_limit: 1 << 20, ..LinkConfig::default() };
                let (pa, pb) = SimLink::new(link, 1);
                (Box::new(pa), Box::new(pb))
            }
            LinkKind::Fifo => {
                let (pa, pb) = FifoPort::pair(nagare_dev::DEFAULT_MTU);
                (Box::new(pa), Box::new(pb))
            }
        };
        Pair { a: side(A_IP, 0x0a, pa, config), b: side(B_IP, 0x0b, pb, config), now: Instant::ZERO, idle_jumps: 0 }
    }

    /// Steps both sides once; whether anything moved.
    pub fn step(&mut self) -> bool {
        let a = self.a.step(self.now);
        let b = self.b.step(self.now);
        a || b
    }

    /// Steps both sides at the current instant until nothing moves.
    pub fn settle(&mut self) -> Result<(), String> {
        for _ in 0..SETTLE_LIMIT {
            if !self.step() {
                return Ok(());
            }
        }
        Err(format!("no quiet after {SETTLE_LIMIT} steps at {:?}: livelock", self.now))
    }

    /// When either side next has something to do.
    pub fn poll_at(&self) -> Option<Instant> {
        [self.a.poll_at(), self.b.poll_at()].into_iter().flatten().min()
    }

    /// Both sides are idle: moves virtual time to the next timer (at most
    /// `limit` ahead, and at least 1 µs) and counts the jump. False when no
    /// timer is due within `limit`.
    pub fn idle_jump(&mut self, limit: Duration) -> bool {
        let deadline = self.now + limit;
        match self.poll_at() {
            Some(t) if t <= deadline => {
                self.now = if t <= self.now { self.now + Duration::from_micros(1) } else { t };
                self.idle_jumps += 1;
                true
            }
            _ => false,
        }
    }

    /// Lets `by` of virtual time pass, running every timer on the way.
    pub fn advance(&mut self, by: Duration) -> Result<(), String> {
        let deadline = self.now + by;
        loop {
            self.settle()?;
            match self.poll_at() {
                Some(t) if t <= deadline && t > self.now => self.now = t,
                _ => break,
            }
        }
        self.now = deadline;
        self.settle()
    }
}

/// Stable names for the `Error`s of socket calls in messages.
pub fn err(e: nagare_core::iface::Error) -> String {
    e.to_string()
}
