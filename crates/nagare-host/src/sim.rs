//! Two hosts joined by an in-memory link, stepped together in one thread on
//! a virtual clock: time stays put while either host has work and jumps to
//! the next timer of either host or the link when both are idle.

use crate::host::{earliest, Host};
use nagare_core::buf::BufferPool;
use nagare_core::{Instant, Interface, InterfaceConfig, UdpHandle};
use nagare_dev::{Device, LinkConfig, SimLink, SimPort};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

/// Buffers per host: a 64 KiB datagram in 1500-byte fragments, echoed,
/// with room to spare.
const POOL_BUFFERS: usize = 8192;
/// One Ethernet frame plus the device's headroom fits in a buffer.
const BUFFER_SIZE: usize = 2048;
/// Steps at one instant before [`SimPair::settle`] gives up (a livelock
/// guard: a pathological ping-pong at one instant cannot spin forever).
const SETTLE_LIMIT: usize = 1_000_000;

/// The configuration of a simulated host: MAC `02:6e:67:00:00:mac_last`,
/// address `cidr`, random numbers and keys from `seed` (the same run for
/// the same seed).
pub fn host_config(mac_last: u8, cidr: Ipv4Cidr, seed: u64) -> InterfaceConfig {
    let mut config = InterfaceConfig::new(EthernetAddress([0x02, 0x6e, 0x67, 0, 0, mac_last]), cidr);
    config.seed = seed;
    config.secrets = nagare_core::Secrets::from_seed(seed);
    config
}

/// Both ends of a simulated link (each may be wrapped, e.g. in a pcap
/// capture, before it becomes a host's device).
pub fn sim_ports(link: LinkConfig, seed: u64) -> (SimPort, SimPort) {
    SimLink::new(link, seed)
}

/// A host on `device` with a pool sized for simulation.
pub fn new_host<D: Device>(config: InterfaceConfig, device: D) -> Host<D> {
    let pool = BufferPool::new(BUFFER_SIZE, POOL_BUFFERS);
    Host::new(Interface::new(config, device.capabilities(), pool), device)
}

/// Two hosts on one link, and the virtual time they share.
pub struct SimPair<A: Device = SimPort, B: Device = SimPort> {
    /// The first host.
    pub a: Host<A>,
    /// The second host.
    pub b: Host<B>,
    /// Virtual time.
    pub now: Instant,
    /// Times [`SimPair::idle_jump`] moved virtual time because neither
    /// host had work (a measurement that leaned on such jumps shows it).
    pub idle_jumps: u64,
}

impl<A: Device, B: Device> SimPair<A, B> {
    /// Two hosts whose devices are the ends of one link, at time zero.
    pub fn new(a: Host<A>, b: Host<B>) -> Self {
        SimPair { a, b, now: Instant::ZERO, idle_jumps: 0 }
    }

    /// Steps both hosts once at the current time; whether anything moved.
    pub fn step(&mut self) -> io::Result<bool> {
        let ra = self.a.step(self.now);
        let rb = self.b.step(self.now);
        if ra.device_error || rb.device_error {
            return Err(io::Error::other("a simulated device failed"));
        }
        Ok(ra.did_work() || rb.did_work())
    }

    /// Steps both hosts at the current time until neither has work.
    pub fn settle(&mut self) -> io::Result<()> {
        for _ in 0..SETTLE_LIMIT {
            if !self.step()? {
                return Ok(());
            }
        }
        Err(io::Error::other(format!("hosts did not settle in {SETTLE_LIMIT} steps at {:?}: livelock", self.now)))
    }

    /// Both hosts are idle: moves virtual time to the next timer (at most
    /// `limit` ahead, and at least 1 µs) and counts the jump. False when no
    /// timer is due within `limit`.
    pub fn idle_jump(&mut self, limit: Duration) -> bool {
        let deadline = self.now + limit;
        match self.poll_at() {
            Some(t) if t <= deadline => {
                self.now = self.now.max(t).max(self.now + Duration::from_micros(1));
                self.idle_jumps += 1;
                true
            }
            _ => false,
        }
    }

    /// When either host (or its end of the link) next needs a step.
    pub fn poll_at(&self) -> Option<Instant> {
        earliest(self.a.poll_at(), self.b.poll_at())
    }

    /// Runs until `done` holds or virtual time passes `limit` from now;
    /// returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Self) -> bool) -> io::Result<bool> {
        let deadline = self.now + limit;
        loop {
            self.settle()?;
            if done(self) {
                return Ok(true);
            }
            match self.poll_at() {
                // A timer that is due and stays due after a settle still
                // moves time on, so the loop always ends.
                Some(t) if t <= deadline && self.now < deadline => {
                    self.now = t.max(self.now + Duration::from_micros(1)).min(deadline)
                }
                _ => {
                    self.now = deadline;
                    self.settle()?;
                    return Ok(done(self));
                }
            }
        }
    }

    /// Lets virtual time pass, processing whatever happens meanwhile.
    pub fn advance(&mut self, by: Duration) -> io::Result<()> {
        self.run_until(by, |_| false).map(|_| ())
    }
}

/// Port of the sink [`udp_stream`] sends to.
pub const STREAM_SINK_PORT: u16 = 9;
/// Datagrams [`udp_stream`] sends before it steps the hosts.
const STREAM_BATCH: usize = 32;

/// What one stream achieved.
#[derive(Debug, Clone, Copy)]
pub struct StreamResult {
    /// Datagrams sent.
    pub sent: usize,
    /// Datagrams the sink received.
    pub received: usize,
    /// Payload bytes the sink received.
    pub bytes: usize,
    /// Wall-clock time of the whole stream.
    pub elapsed: Duration,
}

impl StreamResult {
    /// Goodput in Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e9
    }

    /// Datagrams received per second, in millions.
    pub fn mpps(&self) -> f64 {
        self.received as f64 / self.elapsed.as_secs_f64() / 1e6
    }

    /// Datagrams that did not arrive.
    pub fn lost(&self) -> usize {
        self.sent - self.received
    }
}

/// Sends `count` datagrams of `size` bytes from A to a sink on B at
/// `b_addr`, stepping both hosts after every batch, and measures the wall
/// clock: the cost of both engines' send and receive paths on one core.
/// An error if a datagram is lost.
pub fn udp_stream<A: Device, B: Device>(
    pair: &mut SimPair<A, B>,
    b_addr: Ipv4Addr,
    count: usize,
    size: usize,
) -> io::Result<StreamResult> {
    let engine = |e: nagare_core::iface::Error| io::Error::other(e.to_string());
    let sink = pair.b.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, STREAM_SINK_PORT)).map_err(engine)?;
    let source = pair.a.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(engine)?;
    let result = stream_between(pair, source, sink, SocketAddrV4::new(b_addr, STREAM_SINK_PORT), count, size);
    let closed_a = pair.a.iface.udp().close(source).map_err(engine);
    let closed_b = pair.b.iface.udp().close(sink).map_err(engine);
    let result = result?;
    closed_a?;
    closed_b?;
    if result.received != count {
        return Err(io::Error::other(format!("UDP stream lost datagrams: {} of {count}", result.received)));
    }
    Ok(result)
}

fn stream_between<A: Device, B: Device>(
    pair: &mut SimPair<A, B>,
    source: UdpHandle,
    sink: UdpHandle,
    dst: SocketAddrV4,
    count: usize,
    size: usize,
) -> io::Result<StreamResult> {
    let payload = vec![0x5au8; size];
    let mut received = 0usize;
    let mut bytes = 0usize;
    let started = std::time::Instant::now();
    let mut sent = 0usize;
    while sent < count {
        let now = pair.now;
        for _ in 0..STREAM_BATCH.min(count - sent) {
            pair.a.iface.udp().send_to(source, &payload, dst, now).map_err(|e| io::Error::other(e.to_string()))?;
            sent += 1;
        }
        pair.run_until(Duration::from_millis(10), |p| {
            while let Ok(Some(d)) = p.b.iface.udp().recv(sink) {
                received += 1;
                bytes += d.payload.len();
            }
            received == sent
        })?;
    }
    Ok(StreamResult { sent, received, bytes, elapsed: started.elapsed() })
}
