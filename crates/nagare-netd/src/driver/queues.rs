//! The driver's extra receive queues of a multi-queue TAP. netd loads a
//! steering program into the TAP that picks a frame's queue from a port
//! map; the driver gives each client that owns a port a queue of its own
//! (while there are queues left) and writes its ports into the map, so the
//! kernel's one copy of a frame lands in a buffer of that client's region.

use nagare_dev::{Device, PortMap};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;

/// Queues netd passes besides the TAP's first (the map takes one of the
/// eight descriptors a control message carries).
pub const MAX_RX_QUEUES: usize = nagare_ipc::fdpass::MAX_FDS - 1;

/// One extra queue and the client whose frames it carries.
pub(crate) struct RxQueue {
    pub device: Box<dyn Device>,
    pub key: Option<u64>,
}

/// The extra queues, their clients and the map that steers to them.
pub(crate) struct RxQueues {
    map: PortMap,
    pub queues: Vec<RxQueue>,
    /// The queue (an index of `queues`) each steered port's frames go to.
    ports: HashMap<(u8, u16), usize>,
}

impl RxQueues {
    pub fn new(map: PortMap, devices: Vec<Box<dyn Device>>) -> RxQueues {
        RxQueues { map, queues: devices.into_iter().map(|device| RxQueue { device, key: None }).collect(), ports: HashMap::new() }
    }

    /// Frames to `(proto, port)` go to client `key`'s queue (a free one is
    /// given to it first). Without a queue to give, they stay on the TAP's
    /// first queue (and reach the client through the driver region).
    pub fn steer(&mut self, proto: u8, port: u16, key: u64) -> io::Result<()> {
        let at = match self.queues.iter().position(|q| q.key == Some(key)) {
            Some(at) => at,
            None => match self.queues.iter().position(|q| q.key.is_none()) {
                Some(at) => {
                    self.queues[at].key = Some(key);
                    at
                }
                None => return self.unsteer(proto, port),
            },
        };
        // The TAP's queue numbers: 0 is the first file, ours follow.
        self.map.steer(proto, port, at as u32 + 1)?;
        self.ports.insert((proto, port), at);
        Ok(())
    }

    /// Only frames to `ip` (netd's) are steered.
    pub fn set_local(&mut self, ip: [u8; 4]) -> io::Result<()> {
        self.map.set_local(u32::from_be_bytes(ip))
    }

    /// Frames to `(proto, port)` go to the TAP's first queue again.
    pub fn unsteer(&mut self, proto: u8, port: u16) -> io::Result<()> {
        self.ports.remove(&(proto, port));
        self.map.unsteer(proto, port)
    }

    /// Client `key` is gone: its queue is free for another (frames still
    /// in it are read into the driver region).
    pub fn detach(&mut self, key: u64) {
        let Some(at) = self.queues.iter().position(|q| q.key == Some(key)) else { return };
        let stale: Vec<(u8, u16)> = self.ports.iter().filter(|(_, &q)| q == at).map(|(&p, _)| p).collect();
        for (proto, port) in stale {
            let _ = self.unsteer(proto, port);
        }
        self.queues[at].key = None;
    }

    /// The queues' descriptors, to sleep on.
    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.queues.iter().filter_map(|q| q.device.raw_fd())
    }
}
