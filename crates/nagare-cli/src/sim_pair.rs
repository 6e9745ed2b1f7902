//! Two hosts joined by a simulated link, stepped together in virtual time.

use crate::host::{earliest, Host};
use nagare_core::buf::BufferPool;
use nagare_core::{Instant, Interface, InterfaceConfig};
use nagare_dev::{Device, LinkConfig, SimLink, SimPort};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::io;
use std::time::Duration;

/// Buffers per host: a 64 KiB datagram in 1500-byte fragments, echoed,
/// with room to spare.
const POOL_BUFFERS: usize = 8192;
/// One Ethernet frame plus the device's headroom fits in a buffer.
const BUFFER_SIZE: usize = 2048;

pub fn host_config(mac_last: u8, cidr: Ipv4Cidr, seed: u64) -> InterfaceConfig {
    let mut config = InterfaceConfig::new(EthernetAddress([0x02, 0x6e, 0x67, 0, 0, mac_last]), cidr);
    config.seed = seed;
    config
}

pub struct SimPair<A: Device = SimPort, B: Device = SimPort> {
    pub a: Host<A>,
    pub b: Host<B>,
    pub now: Instant,
}

/// Two hosts on one simulated link; each port may be wrapped (pcap).
pub fn sim_ports(link: LinkConfig, seed: u64) -> (SimPort, SimPort) {
    SimLink::new(link, seed)
}

pub fn new_host<D: Device>(config: InterfaceConfig, device: D) -> Host<D> {
    let pool = BufferPool::new(BUFFER_SIZE, POOL_BUFFERS);
    Host::new(Interface::new(config, device.capabilities(), pool), device)
}

impl<A: Device, B: Device> SimPair<A, B> {
    pub fn new(a: Host<A>, b: Host<B>) -> Self {
        SimPair { a, b, now: Instant::ZERO }
    }

    /// Steps both hosts at the current time until neither has work.
    pub fn settle(&mut self) -> io::Result<()> {
        // Bounded: a pathological ping-pong at one instant cannot spin forever.
        for _ in 0..100_000 {
            let ra = self.a.step(self.now)?;
            let rb = self.b.step(self.now)?;
            if !ra.did_work() && !rb.did_work() {
                return Ok(());
            }
        }
        Err(io::Error::other("hosts did not settle"))
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
            let next = earliest(self.a.poll_at(), self.b.poll_at());
            match next {
                Some(t) if t <= deadline => self.now = self.now.max(t),
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
