//! The driver's extra receive queues of a multi-queue TAP. netd loads a
//! steering program into the TAP that picks a frame's queue from a port
//! map; the driver gives each client that owns a port a queue of its own
//! (while there are queues left) and writes its ports into the map, so the
//! kernel's one copy of a frame lands in a buffer of that client's region.

use nagare_dev::{Device, PortMap, MAX_LOCAL6, MAX_STEERED_PORTS};
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
    /// Frames steered to someone before (a client gone, a driver dead, a
    /// port that left its client) may wait in it: while any drain is
    /// under way it is read into the driver region, so they cannot reach
    /// a client's region. Oldest first; each counts down on its own.
    drains: Vec<Drain>,
    /// Frames a drain reads at most: more than the queue holds.
    drain_frames: usize,
    /// Ports steered to it.
    pub ports: usize,
    /// A port could not be taken out of the map for it: read into the
    /// driver region for good (its client's frames copied once).
    copy_only: bool,
}

/// One reason to read a queue into the driver region for a while.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Drain {
    /// The steering change that asked for it (0: none, a queue that is
    /// nobody's until drained), not confirmed to netd until it is done.
    serial: u64,
    /// Frames it still reads, unless the queue reads empty first (every
    /// frame the kernel put on the queue before it began is then read).
    left: usize,
}

/// Ports one queue's client may have in the map: its even share of what
/// netd's own address (one entry) leaves.
pub const PORTS_PER_QUEUE: usize = (MAX_STEERED_PORTS as usize - 1) / MAX_RX_QUEUES;
const _: () = assert!(PORTS_PER_QUEUE * MAX_RX_QUEUES < MAX_STEERED_PORTS as usize);

/// Frames a drain reads at least: more than a TAP queue holds with the
/// default `tx_queue_len` (1000); a queue that says it holds more is
/// drained for that many (tun drops beyond it rather than queueing).
pub const DRAIN_LIMIT: usize = 2048;

/// A drain asked for while the newest one has read fewer frames than its
/// join window (this, or a 32nd of `drain_frames` if more) joins it: it
/// still reads at least `drain_frames` after the new one began. So a queue
/// has at most 34 drains however often its ports change.
const DRAIN_JOIN: usize = 64;

impl RxQueue {
    fn new(device: Box<dyn Device>) -> RxQueue {
        let drain_frames =
            device.queue_capacity().map_or(DRAIN_LIMIT, |c| c.saturating_add(DRAIN_JOIN).clamp(DRAIN_LIMIT, 1 << 24));
        RxQueue { device, key: None, drains: Vec::new(), drain_frames, ports: 0, copy_only: false }
    }

    /// Whether the queue is read into the driver region for now.
    pub fn draining(&self) -> bool {
        !self.drains.is_empty()
    }

    /// The client whose region the queue is read into, if any now.
    pub fn reader(&self) -> Option<u64> {
        self.key.filter(|_| !self.draining() && !self.copy_only)
    }

    /// Reads it into the driver region until `drain_frames` more frames
    /// were read, or it reads empty; change `serial` (0: none) is not
    /// complete until then.
    fn drain(&mut self, serial: u64) {
        let join = (self.drain_frames / 32).max(DRAIN_JOIN);
        let whole = self.drain_frames + join;
        match self.drains.last_mut() {
            Some(newest) if newest.left > self.drain_frames => {
                // The oldest change still waiting is the one to report.
                if newest.serial == 0 || (serial != 0 && serial < newest.serial) {
                    newest.serial = serial;
                }
            }
            _ => self.drains.push(Drain { serial, left: whole }),
        }
    }

    /// A frame was read while draining: true when the last drain is done.
    pub fn drained_one(&mut self) -> bool {
        for d in &mut self.drains {
            d.left = d.left.saturating_sub(1);
        }
        self.drains.retain(|d| d.left > 0);
        self.drains.is_empty()
    }

    /// The queue read empty: every drain is done.
    fn read_empty(&mut self) {
        self.drains.clear();
    }

    /// The oldest steering change whose drain is under way.
    fn oldest_pending(&self) -> Option<u64> {
        self.drains.iter().map(|d| d.serial).filter(|&s| s != 0).min()
    }
}

/// Where the kernel looks up a frame's queue: the TAP's BPF map, or a
/// table in memory for tests that cannot load the program.
pub(crate) trait QueueMap {
    fn steer(&mut self, proto: u8, port: u16, queue: u32) -> io::Result<()>;
    fn unsteer(&mut self, proto: u8, port: u16) -> io::Result<()>;
    fn set_local(&mut self, ip: u32) -> io::Result<()>;
    fn set_local6(&mut self, slot: usize, ip: Option<[u8; 16]>) -> io::Result<()>;
}

impl QueueMap for PortMap {
    fn steer(&mut self, proto: u8, port: u16, queue: u32) -> io::Result<()> {
        PortMap::steer(self, proto, port, queue)
    }
    fn unsteer(&mut self, proto: u8, port: u16) -> io::Result<()> {
        PortMap::unsteer(self, proto, port)
    }
    fn set_local(&mut self, ip: u32) -> io::Result<()> {
        PortMap::set_local(self, ip)
    }
    fn set_local6(&mut self, slot: usize, ip: Option<[u8; 16]>) -> io::Result<()> {
        PortMap::set_local6(self, slot, ip)
    }
}

/// The extra queues, their clients and the map that steers to them.
pub(crate) struct RxQueues {
    map: Box<dyn QueueMap>,
    pub queues: Vec<RxQueue>,
    /// The queue (an index of `queues`) each steered port's frames go to.
    ports: HashMap<(u8, u16), usize>,
    /// Ports of clients that got no queue (none was free): steered again
    /// when one is.
    waiting: BTreeMap<(u8, u16), u64>,
    /// The queue `receive_queues` starts at, turn by turn, so that no
    /// queue has the first claim on every batch.
    pub next: usize,
    /// What each IPv6 slot of the map holds, as last written: a slot is
    /// written only when its address changes, as a write takes the
    /// slot's gate out first (frames to it meanwhile go to queue 0).
    local6: [Option<[u8; 16]>; MAX_LOCAL6],
}

impl RxQueues {
    /// Queues passed by netd: each drained before use (a dead driver's
    /// clients' frames may wait in them).
    pub fn new(map: Box<dyn QueueMap>, devices: Vec<Box<dyn Device>>) -> RxQueues {
        RxQueues {
            map,
            queues: devices
                .into_iter()
                .map(|device| {
                    let mut q = RxQueue::new(device);
                    q.drain(0);
                    q
                })
                .collect(),
            ports: HashMap::new(),
            waiting: BTreeMap::new(),
            next: 0,
            local6: [None; MAX_LOCAL6],
        }
    }

    /// Frames to `(proto, port)` go to client `key`'s queue (a free one is
    /// given to it first). Without a queue to give, or with its queue's
    /// share of the map used up, they stay on the TAP's first queue (and
    /// reach the client through the driver region) until a queue drains.
    /// `serial`: the steering change this is (0: a port waiting for a
    /// queue, steered again).
    pub fn steer(&mut self, proto: u8, port: u16, key: u64, serial: u64) -> io::Result<()> {
        self.waiting.remove(&(proto, port));
        let old = self.ports.get(&(proto, port)).copied();
        let at = match self.queues.iter().position(|q| q.key == Some(key)) {
            Some(at) => Some(at),
            None => self
                .queues
                .iter()
                .position(|q| q.key.is_none() && !q.draining())
                .inspect(|&at| self.queues[at].key = Some(key)),
        };
        // One client's ports cannot crowd the others' out of the map.
        let at = at.filter(|&at| old == Some(at) || self.queues[at].ports < PORTS_PER_QUEUE);
        if old.is_some() && old != at {
            // Taken from another client's queue without an unsteer between
            // (netd sends only the latest change of a port).
            self.fence(proto, port, serial);
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

    /// Only frames to `ip` or to an IPv6 address in a slot (netd's) are
    /// steered; IPv6 slot `slot` holds `ip6` (`None`: it is empty). The
    /// slot is written only if it held another address (or none).
    pub fn set_local(&mut self, ip: [u8; 4], slot: usize, ip6: Option<[u8; 16]>) -> io::Result<()> {
        self.map.set_local(u32::from_be_bytes(ip))?;
        let held = self.local6.get_mut(slot).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        if *held == ip6 {
            return Ok(());
        }
        // A write that fails midway leaves the slot's gate out: it
        // matches nothing, as an empty slot.
        *held = None;
        self.map.set_local6(slot, ip6)?;
        *held = ip6;
        Ok(())
    }

    /// Frames to `(proto, port)` go to the TAP's first queue again.
    pub fn unsteer(&mut self, proto: u8, port: u16) -> io::Result<()> {
        let at = self.ports.remove(&(proto, port));
        if let Some(q) = at.and_then(|at| self.queues.get_mut(at)) {
            q.ports = q.ports.saturating_sub(1);
        }
        let removed = self.map.unsteer(proto, port);
        if removed.is_err() {
            // The kernel may go on steering the port to that queue: none
            // of its frames is read into its client's region again.
            if let Some(q) = at.and_then(|at| self.queues.get_mut(at)) {
                q.copy_only = true;
            }
        }
        removed
    }

    /// Frames to `(proto, port)` are nobody's: not steered, nor waiting
    /// for a queue (steering change `serial`).
    pub fn forget(&mut self, proto: u8, port: u16, serial: u64) -> io::Result<()> {
        self.waiting.remove(&(proto, port));
        self.fence(proto, port, serial);
        self.unsteer(proto, port)
    }

    /// The queue `(proto, port)` is steered to may hold frames for it that
    /// the kernel queued before the map changed: it is drained into the
    /// driver region (its client's frames copied meanwhile) before the
    /// driver says change `serial` is applied, so they never reach that
    /// client's region once another client has the port.
    fn fence(&mut self, proto: u8, port: u16, serial: u64) {
        if let Some(q) = self.ports.get(&(proto, port)).and_then(|&at| self.queues.get_mut(at)) {
            q.drain(serial);
        }
    }

    /// The oldest steering change not complete: a queue it fenced is
    /// still being drained. Changes before it are.
    pub fn oldest_pending(&self) -> Option<u64> {
        self.queues.iter().filter_map(RxQueue::oldest_pending).min()
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
        self.queues[at].drain(0);
    }

    /// Queue `at` read empty, or its drains read their frames: no longer
    /// draining, and the ports waiting for a queue get one.
    pub fn drained(&mut self, at: usize) -> io::Result<()> {
        if let Some(q) = self.queues.get_mut(at) {
            q.read_empty();
        }
        let mut result = Ok(());
        for ((proto, port), key) in std::mem::take(&mut self.waiting) {
            if let Err(e) = self.steer(proto, port, key, 0) {
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
    use nagare_dev::Loopback;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// The kernel's port map, in memory: what a test can look into.
    #[derive(Clone, Default)]
    struct Table(Rc<RefCell<HashMap<(u8, u16), u32>>>);

    impl QueueMap for Table {
        fn steer(&mut self, proto: u8, port: u16, queue: u32) -> io::Result<()> {
            self.0.borrow_mut().insert((proto, port), queue);
            Ok(())
        }
        fn unsteer(&mut self, proto: u8, port: u16) -> io::Result<()> {
            self.0.borrow_mut().remove(&(proto, port));
            Ok(())
        }
        fn set_local(&mut self, _ip: u32) -> io::Result<()> {
            Ok(())
        }
        fn set_local6(&mut self, _slot: usize, _ip: Option<[u8; 16]>) -> io::Result<()> {
            Ok(())
        }
    }

    /// `n` queues over an in-memory map, and the map.
    fn queues(n: usize) -> (RxQueues, Table) {
        let table = Table::default();
        let devices: Vec<Box<dyn Device>> =
            (0..n).map(|_| Box::new(Loopback::new(1500, 8)) as Box<dyn Device>).collect();
        (RxQueues::new(Box::new(table.clone()), devices), table)
    }

    /// Queues passed to a new driver, and a dead client's queue, are read
    /// empty before any client gets them: what waits there was steered to
    /// someone else; so is a queue a port leaves.
    #[test]
    fn a_queue_is_drained_before_a_client_gets_it() {
        let (mut q, table) = queues(2);
        q.steer(17, 5000, 1, 1).unwrap();
        assert!(q.queues.iter().all(|x| x.key.is_none()), "a queue not yet drained was given");
        assert_eq!(table.0.borrow().get(&(17, 5000)), None, "steered to a queue nobody reads for it");
        q.drained(0).unwrap();
        assert_eq!(q.queues[0].key, Some(1), "the waiting port gets the drained queue");
        assert_eq!(table.0.borrow().get(&(17, 5000)), Some(&1));
        q.drained(1).unwrap();
        q.detach(1);
        assert!(q.queues[0].draining() && q.queues[0].key.is_none());
        assert!(table.0.borrow().is_empty(), "a gone client's port is still steered");
        assert_eq!(q.oldest_pending(), None, "a queue nobody has holds back no change");
        // Client 2 gets the free queue 1, not client 1's old queue 0.
        q.steer(6, 80, 2, 2).unwrap();
        assert_eq!((q.queues[0].key, q.queues[1].key), (None, Some(2)));
        // Client 3 waits for queue 0 to be drained.
        q.steer(6, 81, 3, 3).unwrap();
        assert_eq!(q.queues[0].key, None);
        q.forget(6, 81, 4).unwrap();
        q.drained(0).unwrap();
        assert_eq!(q.queues[0].key, None, "a port nobody has any more waits for nothing");
        q.steer(6, 81, 3, 5).unwrap();
        assert_eq!(q.queues[0].key, Some(3));
        assert_eq!(q.oldest_pending(), None);
        // A port that leaves client 3 may have frames waiting on its
        // queue: the queue is drained (its client keeps it) before the
        // change counts as applied.
        q.steer(6, 82, 3, 6).unwrap();
        q.forget(6, 81, 7).unwrap();
        assert!(q.queues[0].draining() && q.queues[0].key == Some(3));
        assert_eq!(q.oldest_pending(), Some(7));
        q.drained(0).unwrap();
        assert_eq!(q.oldest_pending(), None);
        assert!(!q.queues[0].draining() && q.queues[0].key == Some(3));
        // So is one taken straight over by another client's queue (netd
        // sends only a port's latest change).
        q.steer(6, 82, 2, 8).unwrap();
        assert!(q.queues[0].draining() && !q.queues[1].draining());
        assert_eq!((q.oldest_pending(), table.0.borrow().get(&(6, 82))), (Some(8), Some(&2)));
    }

    /// A queue whose client keeps it busy and keeps closing ports never
    /// reads empty: each fence still ends after its frames, so the changes
    /// before the newest fences are confirmed as they go, never held back
    /// for good by the stream of later ones.
    #[test]
    fn a_busy_queue_holds_back_only_the_changes_that_fenced_it() {
        let (mut q, _) = queues(1);
        q.drained(0).unwrap();
        let frames = q.queues[0].drain_frames;
        let whole = frames + (frames / 32).max(DRAIN_JOIN);
        let mut serial = 0;
        // A port closed every 100 frames, 200 times.
        for round in 0..200u16 {
            serial += 2;
            q.steer(17, 20_000 + round, 1, serial - 1).unwrap();
            q.forget(17, 20_000 + round, serial).unwrap();
            for _ in 0..100 {
                let _ = q.queues[0].drained_one();
            }
            let pending = q.oldest_pending().expect("a fence is under way");
            // No fence lives longer than its frames.
            let oldest_allowed = serial.saturating_sub(2 * (whole as u64 / 100 + 1));
            assert!(pending >= oldest_allowed, "round {round}: change {pending} still held back at {serial}");
            assert!(q.queues[0].drains.len() <= whole / DRAIN_JOIN + 1, "{} drains", q.queues[0].drains.len());
        }
        // Two fences within a few frames share one drain, which reports
        // the older change.
        q.drained(0).unwrap();
        q.steer(17, 30_000, 1, 1001).unwrap();
        q.steer(17, 30_001, 1, 1002).unwrap();
        q.forget(17, 30_000, 1003).unwrap();
        let _ = q.queues[0].drained_one();
        q.forget(17, 30_001, 1004).unwrap();
        assert_eq!((q.queues[0].drains.len(), q.oldest_pending()), (1, Some(1003)));
        for _ in 0..frames {
            assert!(!q.queues[0].drained_one(), "a drain ended before reading its frames");
        }
        assert_eq!(q.oldest_pending(), Some(1003));
        for _ in 0..whole {
            if q.queues[0].drained_one() {
                break;
            }
        }
        assert_eq!(q.oldest_pending(), None);
    }

    /// An IPv6 slot is written only when its address changes: a write
    /// takes the slot's gate out first, so a frame to an address that
    /// stays would meanwhile miss its queue.
    #[test]
    fn an_ipv6_slot_is_written_only_when_its_address_changes() {
        type Write = (usize, Option<[u8; 16]>);
        #[derive(Clone, Default)]
        struct Writes(Rc<RefCell<Vec<Write>>>);
        impl QueueMap for Writes {
            fn steer(&mut self, _: u8, _: u16, _: u32) -> io::Result<()> {
                Ok(())
            }
            fn unsteer(&mut self, _: u8, _: u16) -> io::Result<()> {
                Ok(())
            }
            fn set_local(&mut self, _: u32) -> io::Result<()> {
                Ok(())
            }
            fn set_local6(&mut self, slot: usize, ip: Option<[u8; 16]>) -> io::Result<()> {
                self.0.borrow_mut().push((slot, ip));
                Ok(())
            }
        }
        let writes = Writes::default();
        let mut q = RxQueues::new(Box::new(writes.clone()), Vec::new());
        let (a, b) = ([0xfe; 16], [0xfd; 16]);
        let ip = [10, 0, 0, 2];
        // A fresh map holds no address: an empty slot is not written.
        q.set_local(ip, 0, None).unwrap();
        q.set_local(ip, 0, Some(a)).unwrap();
        q.set_local(ip, 1, Some(b)).unwrap();
        q.set_local(ip, 0, Some(a)).unwrap();
        q.set_local(ip, 0, None).unwrap();
        q.set_local(ip, 0, None).unwrap();
        assert_eq!(*writes.0.borrow(), [(0, Some(a)), (1, Some(b)), (0, None)]);
        assert!(q.set_local(ip, MAX_LOCAL6, Some(a)).is_err(), "no such slot");
    }

    /// A port the map would not let go of: its queue is no longer read
    /// into its client's region (the kernel may still steer it there).
    #[test]
    fn a_port_stuck_in_the_map_makes_its_queue_copy_only() {
        struct Stuck;
        impl QueueMap for Stuck {
            fn steer(&mut self, _: u8, _: u16, _: u32) -> io::Result<()> {
                Ok(())
            }
            fn unsteer(&mut self, _: u8, _: u16) -> io::Result<()> {
                Err(io::Error::from_raw_os_error(libc::EPERM))
            }
            fn set_local(&mut self, _: u32) -> io::Result<()> {
                Ok(())
            }
            fn set_local6(&mut self, _: usize, _: Option<[u8; 16]>) -> io::Result<()> {
                Ok(())
            }
        }
        let devices: Vec<Box<dyn Device>> = vec![Box::new(Loopback::new(1500, 8))];
        let mut q = RxQueues::new(Box::new(Stuck), devices);
        q.drained(0).unwrap();
        q.steer(6, 80, 1, 1).unwrap();
        assert_eq!(q.queues[0].reader(), Some(1));
        assert!(q.forget(6, 80, 2).is_err());
        q.drained(0).unwrap();
        assert_eq!((q.queues[0].key, q.queues[0].reader()), (Some(1), None));
    }

    /// One client's ports cannot fill the map: past its queue's share they
    /// stay on the first queue, and get steered when a port of its goes.
    #[test]
    fn a_client_has_at_most_its_share_of_the_map() {
        let (mut q, table) = queues(1);
        q.drained(0).unwrap();
        for port in 0..PORTS_PER_QUEUE as u16 + 2 {
            q.steer(17, 10_000 + port, 1, u64::from(port) + 1).unwrap();
        }
        assert_eq!(q.queues[0].ports, PORTS_PER_QUEUE);
        assert_eq!((q.waiting.len(), table.0.borrow().len()), (2, PORTS_PER_QUEUE));
        q.forget(17, 10_000, 5000).unwrap();
        q.drained(0).unwrap();
        assert_eq!(q.queues[0].ports, PORTS_PER_QUEUE);
        assert_eq!((q.waiting.len(), table.0.borrow().len()), (1, PORTS_PER_QUEUE));
        // Steering a port it has again changes nothing.
        q.steer(17, 10_001, 1, 5001).unwrap();
        assert_eq!((q.queues[0].ports, q.waiting.len()), (PORTS_PER_QUEUE, 1));
    }
}
