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
//! when both sides are idle (`SimPair::idle_jump` counts those jumps, so a
//! run that leaned on them shows it).

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::tcp::config::TcpConfig;
use nagare_core::{Instant, Interface, InterfaceConfig};
use nagare_dev::{Device, DeviceStats, LinkConfig, SimLink};
use nagare_host::{Host, SimPair};
use nagare_wire::{EthernetAddress, Ipv4Cidr, ETHERNET_HEADER_LEN};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::rc::Rc;

/// A's address (the side that connects and sends).
pub const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// B's address (the side that listens and receives).
pub const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Size of every pool buffer: a 1514-byte frame plus headroom fits.
pub const BUFFER_SIZE: usize = 2048;
/// Frames taken from the link per step.
pub const RX_BATCH: usize = 256;

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

    fn capabilities(&self) -> nagare_core::Capabilities {
        nagare_core::Capabilities { mtu: self.mtu, ..Default::default() }
    }

    fn stats(&self) -> DeviceStats {
        self.stats
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

/// Two interfaces, A (10.0.0.1) and B (10.0.0.2), on one link, each
/// taking up to [`RX_BATCH`] frames per step.
pub type Pair = SimPair<Box<dyn Device>, Box<dyn Device>>;

fn side(ip: Ipv4Addr, mac: u8, port: Box<dyn Device>, config: &PairConfig) -> Host<Box<dyn Device>> {
    let cidr = Ipv4Cidr::new(ip, 24).expect("a /24 is valid");
    let mut ic = InterfaceConfig::new(EthernetAddress([0x02, 0x6e, 0x67, 0, 0, mac]), cidr);
    ic.seed = 0x6265_6e63_6800 | u64::from(mac);
    ic.secrets = nagare_core::Secrets::from_seed(ic.seed);
    // A 4 MiB window is ~2900 segments queued in one go.
    ic.tx_queue_limit = 1 << 16;
    let pool = BufferPool::new(BUFFER_SIZE, config.pool_buffers);
    prewarm(&pool, config.prewarm_buffers);
    let mut iface = Interface::new(ic, port.capabilities(), pool);
    *iface.tcp().defaults_mut() = config.tcp.clone();
    Host::with_rx_batch(iface, port, RX_BATCH)
}

/// Creates `n` buffers in `pool` and gives them back (to its free list).
pub fn prewarm(pool: &BufferPool, n: usize) {
    let held: Vec<_> = (0..n).map_while(|_| pool.alloc().ok()).collect();
    drop(held);
}

/// A pair as `config` says.
pub fn pair(config: &PairConfig) -> Pair {
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
    SimPair::new(side(A_IP, 0x0a, pa, config), side(B_IP, 0x0b, pb, config))
}

/// Stable names for the `Error`s of socket calls in messages.
pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
