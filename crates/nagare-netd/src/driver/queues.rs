//! The driver's extra receive queues of a multi-queue TAP. netd loads a
//! steering program into the TAP that picks a frame's queue from a port
//! map; the driver gives each client that owns a port a queue of its own
//! (while there are queues left) and writes its ports into the map, so the
//! kernel's one copy of a frame lands in a buffer of that client's region.

use nagare_dev::{Device, PortMap, MAX_STEERED_PORTS};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::RawFd;

/// Queues netd passes besides the TAP's first (the map takes one of the
/// eight descriptors a control message carries).
pub const MAX_RX_QUEUES: usize = nagare_ipc::fdpass::MAX_FDS - 1;

/// One extra queue and the client whose frames it carries.
pub(crate) struct RxQueue {
    pub device: Box<dyn Device>,
    pub key: Option<u64>,
    /// Frames steered to someone before (a client gone, a driver dead)
    /// may wait in it: it is read into the driver region until empty
    /// before it is given to anyone, so they cannot reach the next client.
    pub draining: bool,
    /// Frames a drain may still read before the queue counts as drained
    /// though it never read empty (its client's other flows keep it busy).
    pub drain_left: usize,
    /// Ports steered to it.
    pub ports: usize,
}

/// Ports one queue's client may have in the map: its even share.
pub const PORTS_PER_QUEUE: usize = MAX_STEERED_PORTS as usize / MAX_RX_QUEUES;

/// Frames a drain reads at most: more than a TAP queue and its queueing
/// discipline hold (`txqueuelen`, 1000 by default, each), so every frame
/// the kernel put on the queue before the drain began has been read.
pub const DRAIN_LIMIT: usize = 2048;

/// The extra queues, their clients and the map that steers to them.
pub(crate) struct RxQueues {
    map: PortMap,
    pub queues: Vec<RxQueue>,
    /// The queue (an index of `queues`) each steered port's frames go to.
    ports: HashMap<(u8, u16), usize>,
    /// Ports of clients that got no queue (none was free): steered again
    /// when one is.
    waiting: BTreeMap<(u8, u16), u64>,
    /// The queue `receive_queues` starts at, turn by turn, so that no
    /// queue has the first claim on every batch.
    pub next: usize,
}

impl RxQueues {
    /// Queues passed by netd: each drained before use (a dead driver's
    /// clients' frames may wait in them).
    pub fn new(map: PortMap, devices: Vec<Box<dyn Device>>) -> RxQueues {
        RxQueues {
            map,
            queues: devices.into_iter().map(|device| RxQueue { device, key: None, draining: true, drain_left: DRAIN_LIMIT, ports: 0 }).collect(),
            ports: HashMap::new(),
            waiting: BTreeMap::new(),
            next: 0,
        }
    }

    /// Frames to `(proto, port)` go to client `key`'s queue (a free one is
    /// given to it first). Without a queue to give, or with its queue's
    /// share of the map used up, they stay on the TAP's first queue (and
    /// reach the client through the driver region) until a queue drains.
    pub fn steer(&mut self, proto: u8, port: u16, key: u64) -> io::Result<()> {
        self.waiting.remove(&(proto, port));
        let old = self.ports.get(&(proto, port)).copied();
        let at = match self.queues.iter().position(|q| q.key == Some(key)) {
            Some(at) => Some(at),
            None => self.queues.iter().position(|q| q.key.is_none() && !q.draining).inspect(|&at| self.queues[at].key = Some(key)),
        };
        // One client's ports cannot crowd the others' out of the map.
        let at = at.filter(|&at| old == Some(at) || self.queues[at].ports < PORTS_PER_QUEUE);
        if old.is_some() && old != at {
            // Taken from another client's queue without an unsteer between
            // (netd sends only the latest change of a port).
            self.fence(proto, port);
        }
        let Some(at) = at else {
            self.waiting.insert((proto, port), key);
            return self.unsteer(proto, port);
        };
        // The TAP's queue numbers: 0 is the first file, ours follow.
        if let Err(e) = self.map.steer(proto, port, at as u32 + 1) {
            // Never leave an entry that names the port's old queue.
            let _ = self.unsteer(proto, port);
            return Err(e);
        }
        if let Some(old) = old.and_then(|o| self.queues.get_mut(o)) {
            old.ports = old.ports.saturating_sub(1);
        }
        self.queues[at].ports += 1;
        self.ports.insert((proto, port), at);
        Ok(())
    }

    /// Only frames to `ip` (netd's) are steered.
    pub fn set_local(&mut self, ip: [u8; 4]) -> io::Result<()> {
        self.map.set_local(u32::from_be_bytes(ip))
    }

    /// Frames to `(proto, port)` go to the TAP's first queue again.
    pub fn unsteer(&mut self, proto: u8, port: u16) -> io::Result<()> {
        if let Some(q) = self.ports.remove(&(proto, port)).and_then(|at| self.queues.get_mut(at)) {
            q.ports = q.ports.saturating_sub(1);
        }
        self.map.unsteer(proto, port)
    }

    /// Frames to `(proto, port)` are nobody's: not steered, nor waiting
    /// for a queue.
    pub fn forget(&mut self, proto: u8, port: u16) -> io::Result<()> {
        self.waiting.remove(&(proto, port));
        self.fence(proto, port);
        self.unsteer(proto, port)
    }

    /// The queue `(proto, port)` is steered to may hold frames for it that
    /// the kernel queued before the map changed: it is drained into the
    /// driver region (its client's frames copied meanwhile) before the
    /// driver says the change is applied, so they never reach that
    /// client's region once another client has the port.
    fn fence(&mut self, proto: u8, port: u16) {
        if let Some(q) = self.ports.get(&(proto, port)).and_then(|&at| self.queues.get_mut(at)) {
            q.draining = true;
            q.drain_left = DRAIN_LIMIT;
        }
    }

    /// Whether some queue is being drained (a steering change is not
    /// complete until none is).
    pub fn draining(&self) -> bool {
        self.queues.iter().any(|q| q.draining)
    }

    /// Client `key` is gone: its queue is drained, then free for another.
    pub fn detach(&mut self, key: u64) {
        self.waiting.retain(|_, k| *k != key);
        let Some(at) = self.queues.iter().position(|q| q.key == Some(key)) else { return };
        let stale: Vec<(u8, u16)> = self.ports.iter().filter(|(_, &q)| q == at).map(|(&p, _)| p).collect();
        for (proto, port) in stale {
            let _ = self.unsteer(proto, port);
        }
        self.queues[at].key = None;
        self.queues[at].draining = true;
        self.queues[at].drain_left = DRAIN_LIMIT;
    }

    /// Queue `at` was read empty after draining: free, and the ports
    /// waiting for a queue get one.
    pub fn drained(&mut self, at: usize) -> io::Result<()> {
        if let Some(q) = self.queues.get_mut(at) {
            q.draining = false;
        }
        let mut result = Ok(());
        for ((proto, port), key) in std::mem::take(&mut self.waiting) {
            if let Err(e) = self.steer(proto, port, key) {
                result = Err(e);
            }
        }
        result
    }

    /// The queues' descriptors, to sleep on.
    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.queues.iter().filter_map(|q| q.device.raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_dev::{Loopback, PortSteering};

    /// Queues passed to a new driver, and a dead client's queue, are read
    /// empty before any client gets them: what waits there was steered to
    /// someone else; so is a queue a port leaves. Needs the steering map (root); skipped loudly without.
    /// `n` queues over a real steering map; `None` (and a loud SKIPPED)
    /// without the right to make one.
    fn queues(test: &str, n: usize) -> Option<RxQueues> {
        let steering = match PortSteering::load() {
            Ok(s) => s,
            Err(e) => {
                let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("\n*** SKIPPED {test}: {e} ***\n\n"));
                return None;
            }
        };
        let map = PortMap::from_fd(steering.map().fd().try_clone_to_owned().unwrap());
        let devices: Vec<Box<dyn Device>> = (0..n).map(|_| Box::new(Loopback::new(1500, 8)) as Box<dyn Device>).collect();
        Some(RxQueues::new(map, devices))
    }

    #[test]
    fn a_queue_is_drained_before_a_client_gets_it() {
        let Some(mut q) = queues("a_queue_is_drained_before_a_client_gets_it", 2) else { return };
        q.steer(17, 5000, 1).unwrap();
        assert!(q.queues.iter().all(|x| x.key.is_none()), "a queue not yet drained was given");
        q.drained(0).unwrap();
        assert_eq!(q.queues[0].key, Some(1), "the waiting port gets the drained queue");
        q.drained(1).unwrap();
        q.detach(1);
        assert!(q.queues[0].draining && q.queues[0].key.is_none());
        // Client 2 gets the free queue 1, not client 1's old queue 0.
        q.steer(6, 80, 2).unwrap();
        assert_eq!((q.queues[0].key, q.queues[1].key), (None, Some(2)));
        // Client 3 waits for queue 0 to be drained.
        q.steer(6, 81, 3).unwrap();
        assert_eq!(q.queues[0].key, None);
        q.forget(6, 81).unwrap();
        q.drained(0).unwrap();
        assert_eq!(q.queues[0].key, None, "a port nobody has any more waits for nothing");
        q.steer(6, 81, 3).unwrap();
        assert_eq!(q.queues[0].key, Some(3));
        assert!(!q.draining());
        // A port that leaves client 3 may have frames waiting on its
        // queue: the queue is drained (its client keeps it) before the
        // change counts as applied.
        q.steer(6, 82, 3).unwrap();
        q.forget(6, 81).unwrap();
        assert!(q.draining() && q.queues[0].draining && q.queues[0].key == Some(3));
        q.drained(0).unwrap();
        assert!(!q.draining() && q.queues[0].key == Some(3));
        // So is one taken straight over by another client's queue (netd
        // sends only a port's latest change).
        q.steer(6, 82, 2).unwrap();
        assert!(q.queues[0].draining && !q.queues[1].draining);
    }

    /// One client's ports cannot fill the map: past its queue's share they
    /// stay on the first queue, and get steered when a port of its goes.
    #[test]
    fn a_client_has_at_most_its_share_of_the_map() {
        let Some(mut q) = queues("a_client_has_at_most_its_share_of_the_map", 1) else { return };
        q.drained(0).unwrap();
        for port in 0..PORTS_PER_QUEUE as u16 + 2 {
            q.steer(17, 10_000 + port, 1).unwrap();
        }
        assert_eq!(q.queues[0].ports, PORTS_PER_QUEUE);
        assert_eq!(q.waiting.len(), 2);
        q.forget(17, 10_000).unwrap();
        q.drained(0).unwrap();
        assert_eq!(q.queues[0].ports, PORTS_PER_QUEUE);
        assert_eq!(q.waiting.len(), 1);
        // Steering a port it has again changes nothing.
        q.steer(17, 10_001, 1).unwrap();
        assert_eq!((q.queues[0].ports, q.waiting.len()), (PORTS_PER_QUEUE, 1));
    }
}
