//! A two-port learning bridge between a VNI segment and a TAP device, so
//! programs on the Linux kernel's stack reach nagare instances on the
//! segment and back.
//!
//! One side is a port of the segment, the other a TAP opened for plain
//! frames. No [`nagare_core::Interface`] is involved: frames are moved as
//! [`PacketBuf`]s from one device to the other, so each is copied once at
//! each edge (TAP read into a pool buffer, pool buffer into a VNI slot;
//! VNI slot into a pool buffer, `writev` to the TAP).
//!
//! Instances on the segment send with offloads (partial checksums, TCP
//! super-segments across slots); what the TAP side cannot take is
//! completed here before it is queued for the TAP
//! ([`nagare_dev::software_offload`]): checksums summed, super-segments cut
//! into MTU-sized segments. A frame that claims a partial checksum but is
//! no TCP or UDP packet whose checksum could be completed is dropped and
//! counted ([`Direction::uncompletable`]): sent on, it would reach the
//! wire with a wrong checksum.
//!
//! Learning: the source MAC of every frame records which side that station
//! is on, in a bounded table whose entries age out ([`MacTable`]). A frame
//! whose destination is known to be on the side it came from is filtered;
//! everything else crosses. On the VNI side the port itself sends unicast
//! to the peer with that MAC and floods the rest (broadcast, multicast,
//! unknown unicast) to every live peer; VNI instances in turn flood their
//! frames to MACs behind the TAP (they only know port MACs), which is how
//! those reach the bridge.

use crate::realtime;
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::Capabilities;
use nagare_core::Instant;
use nagare_dev::software_offload::{complete, fits_device, Refused};
use nagare_dev::{Device, MonotonicClock, RX_HEADROOM};
use nagare_wire::ETHERNET_HEADER_LEN;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Stations remembered at most (a full table forgets the oldest).
pub const MAC_TABLE_CAPACITY: usize = 4096;
/// A station not heard from for this long is forgotten (Linux bridges use
/// the same default).
pub const MAC_AGEING: Duration = Duration::from_secs(300);
/// Frames read from one side per round.
const BATCH: usize = 64;
/// Frames queued towards one side at most; while it is full that side's
/// opposite is not read (back pressure, then the kernel or the ring drops).
const MAX_QUEUE: usize = 1024;
/// Longest sleep, so a stop request and peers' link changes are noticed.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// How often aged entries are swept out.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A side of the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Tap,
    Vni,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    side: Side,
    seen: Instant,
}

/// Counters of the MAC table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// New stations.
    pub learned: u64,
    /// Stations seen on the other side than before.
    pub moved: u64,
    /// Stations forgotten because they were silent too long.
    pub aged: u64,
    /// Stations forgotten to make room (table full).
    pub evicted: u64,
}

/// Which side each station (source MAC) is on: bounded, with ageing.
#[derive(Debug)]
pub struct MacTable {
    entries: HashMap<[u8; 6], Entry>,
    capacity: usize,
    max_age: Duration,
    pub stats: TableStats,
}

fn is_group(mac: [u8; 6]) -> bool {
    mac[0] & 1 != 0
}

impl MacTable {
    pub fn new(capacity: usize, max_age: Duration) -> MacTable {
        let capacity = capacity.max(1);
        MacTable {
            entries: HashMap::with_capacity(capacity.min(1024)),
            capacity,
            max_age,
            stats: TableStats::default(),
        }
    }

    /// Stations known.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no station is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn fresh(&self, e: &Entry, now: Instant) -> bool {
        now.saturating_since(e.seen) < self.max_age
    }

    /// Records that `mac` sent a frame from `side` at `now`. Group and
    /// all-zero addresses are not stations and are ignored (false).
    pub fn learn(&mut self, mac: [u8; 6], side: Side, now: Instant) -> bool {
        if is_group(mac) || mac == [0; 6] {
            return false;
        }
        if let Some(e) = self.entries.get_mut(&mac) {
            if e.side != side {
                e.side = side;
                self.stats.moved += 1;
            }
            e.seen = now;
            return true;
        }
        if self.entries.len() >= self.capacity {
            self.sweep(now);
        }
        if self.entries.len() >= self.capacity {
            // Still full of live stations: forget the one silent longest.
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.seen).map(|(m, _)| *m) {
                self.entries.remove(&oldest);
                self.stats.evicted += 1;
            }
        }
        self.entries.insert(mac, Entry { side, seen: now });
        self.stats.learned += 1;
        true
    }

    /// The side `mac` was last heard on, unless that is too long ago.
    pub fn lookup(&self, mac: [u8; 6], now: Instant) -> Option<Side> {
        self.entries.get(&mac).filter(|e| self.fresh(e, now)).map(|e| e.side)
    }

    /// Forgets stations silent for longer than the ageing time; returns
    /// how many.
    pub fn sweep(&mut self, now: Instant) -> usize {
        let before = self.entries.len();
        let max_age = self.max_age;
        self.entries.retain(|_, e| now.saturating_since(e.seen) < max_age);
        let gone = before - self.entries.len();
        self.stats.aged += gone as u64;
        gone
    }

    /// The stations known, with their sides (for reports).
    pub fn stations(&self) -> Vec<([u8; 6], Side)> {
        let mut v: Vec<_> = self.entries.iter().map(|(m, e)| (*m, e.side)).collect();
        v.sort();
        v
    }
}

/// What to do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it to the other side.
    Forward,
    /// Its destination is on the side it came from: drop it.
    Filter,
    /// Too short for an Ethernet header, or a group source address: drop.
    Bad,
}

/// Learns from the Ethernet header `head` (destination, source) of a
/// frame that arrived on `from`, and decides where it goes.
pub fn decide(table: &mut MacTable, from: Side, head: Option<[u8; 12]>, now: Instant) -> Verdict {
    let Some(head) = head else { return Verdict::Bad };
    let mut dst = [0u8; 6];
    let mut src = [0u8; 6];
    dst.copy_from_slice(&head[..6]);
    src.copy_from_slice(&head[6..]);
    if is_group(src) {
        return Verdict::Bad;
    }
    table.learn(src, from, now);
    if !is_group(dst) && table.lookup(dst, now) == Some(from) {
        Verdict::Filter
    } else {
        Verdict::Forward
    }
}

/// Frame counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Direction {
    /// Frames read from the source side.
    pub received: u64,
    /// Frames handed to the destination side's device.
    pub forwarded: u64,
    pub bytes: u64,
    /// Destination on the source side.
    pub filtered: u64,
    /// Runts and group source addresses, and super-segments whose
    /// headers could not be cut.
    pub bad: u64,
    /// Frames whose offloads (a partial checksum, a super-segment) the
    /// bridge completed because the destination device could not.
    pub completed: u64,
    /// Frames with a partial checksum that the destination device could
    /// not complete and the bridge could not either: not an unfragmented
    /// IPv4 packet, or an IPv6 one without extension headers, carrying TCP
    /// or UDP with its transport header whole. Dropped.
    pub uncompletable: u64,
    /// Frames dropped for want of room: the queue to the destination full,
    /// or its pool out of buffers while completing.
    pub no_buffer: u64,
}

/// The bridge's state between rounds: table, queues, counters.
pub struct Bridge {
    pub table: MacTable,
    to_tap: VecDeque<PacketBuf>,
    to_vni: VecDeque<PacketBuf>,
    pub tap_to_vni: Direction,
    pub vni_to_tap: Direction,
    /// Device errors seen (and waited out).
    pub device_errors: u64,
    last_sweep: Option<Instant>,
    scratch: Vec<PacketBuf>,
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    pub received: usize,
    pub transmitted: usize,
}

impl Round {
    pub fn did_work(&self) -> bool {
        self.received + self.transmitted > 0
    }
}

impl Default for Bridge {
    fn default() -> Self {
        Bridge::new(MacTable::new(MAC_TABLE_CAPACITY, MAC_AGEING))
    }
}

impl Bridge {
    pub fn new(table: MacTable) -> Bridge {
        Bridge {
            table,
            to_tap: VecDeque::new(),
            to_vni: VecDeque::new(),
            tap_to_vni: Direction::default(),
            vni_to_tap: Direction::default(),
            device_errors: 0,
            last_sweep: None,
            scratch: Vec::with_capacity(BATCH),
        }
    }

    /// Frames waiting for a device that did not take them yet.
    pub fn pending(&self) -> usize {
        self.to_tap.len() + self.to_vni.len()
    }

    /// Reads a batch from `from` (unless the queue to the other side is
    /// full) and queues what crosses, completed in software where the
    /// other side's device (`to`) cannot take a frame's offloads.
    fn pull(
        &mut self,
        from: Side,
        dev: &mut dyn Device,
        to: Capabilities,
        pool: &BufferPool,
        now: Instant,
    ) -> io::Result<usize> {
        let queued = match from {
            Side::Tap => self.to_vni.len(),
            Side::Vni => self.to_tap.len(),
        };
        let room = MAX_QUEUE.saturating_sub(queued).min(BATCH);
        if room == 0 {
            return Ok(0);
        }
        self.scratch.clear();
        let n = dev.receive_batch(pool, &mut self.scratch, room, now)?;
        for frame in self.scratch.drain(..) {
            let verdict = decide(&mut self.table, from, frame.header::<12>(), now);
            let (dir, queue) = match from {
                Side::Tap => (&mut self.tap_to_vni, &mut self.to_vni),
                Side::Vni => (&mut self.vni_to_tap, &mut self.to_tap),
            };
            dir.received += 1;
            match verdict {
                Verdict::Forward if queue.len() >= MAX_QUEUE => dir.no_buffer += 1,
                Verdict::Forward if fits_device(&frame, to.mtu, to.tx_offloads) => queue.push_back(frame),
                Verdict::Forward => {
                    // The queue's bound holds for the segments a cut makes.
                    let room = MAX_QUEUE.saturating_sub(queue.len());
                    match complete(frame, to.mtu, pool, queue, room) {
                        Ok(_) => dir.completed += 1,
                        Err(Refused::Malformed) => dir.bad += 1,
                        Err(Refused::Uncompletable) => dir.uncompletable += 1,
                        Err(Refused::NoBuffer | Refused::NoRoom) => dir.no_buffer += 1,
                    }
                }
                Verdict::Filter => dir.filtered += 1,
                Verdict::Bad => dir.bad += 1,
            }
        }
        Ok(n)
    }

    /// Hands queued frames to the device on side `to`.
    fn push(&mut self, to: Side, dev: &mut dyn Device, now: Instant) -> io::Result<usize> {
        let (dir, queue) = match to {
            Side::Vni => (&mut self.tap_to_vni, &mut self.to_vni),
            Side::Tap => (&mut self.vni_to_tap, &mut self.to_tap),
        };
        if queue.is_empty() {
            return Ok(0);
        }
        let bytes_before: usize = queue.iter().map(PacketBuf::len).sum();
        let n = dev.transmit_batch(queue, now)?;
        let bytes_after: usize = queue.iter().map(PacketBuf::len).sum();
        dir.forwarded += n as u64;
        dir.bytes += (bytes_before - bytes_after) as u64;
        Ok(n)
    }

    /// One round: read both sides, forward, write both sides. A device
    /// error is returned after the other side had its turn, and only if
    /// nothing moved (the loop waits it out) unless it is `NotConnected`
    /// (the VNI port was lost).
    pub fn round(
        &mut self,
        tap: &mut dyn Device,
        vni: &mut dyn Device,
        pool: &BufferPool,
        now: Instant,
    ) -> io::Result<Round> {
        if self.last_sweep.is_none_or(|t| now.saturating_since(t) >= SWEEP_INTERVAL) {
            self.table.sweep(now);
            self.last_sweep = Some(now);
        }
        let mut round = Round::default();
        let mut error = None;
        let (tap_caps, vni_caps) = (tap.capabilities(), vni.capabilities());
        let pulled = [self.pull(Side::Tap, tap, vni_caps, pool, now), self.pull(Side::Vni, vni, tap_caps, pool, now)];
        for r in pulled {
            match r {
                Ok(n) => round.received += n,
                Err(e) => error = error.or(Some(e)),
            }
        }
        let pushed = [self.push(Side::Vni, vni, now), self.push(Side::Tap, tap, now)];
        for r in pushed {
            match r {
                Ok(n) => round.transmitted += n,
                Err(e) => error = error.or(Some(e)),
            }
        }
        match error {
            // Losing the port is final, however busy the other side is.
            Some(e) if !round.did_work() || e.kind() == io::ErrorKind::NotConnected => Err(e),
            _ => Ok(round),
        }
    }
}

/// Buffers big enough for a whole frame of a segment with IP MTU `mtu`
/// read from the TAP at the headroom, and as many as fit in about 64 MiB
/// (256 to 4096).
pub fn pool_for(mtu: usize) -> BufferPool {
    let size = (RX_HEADROOM + mtu + ETHERNET_HEADER_LEN + 1).next_multiple_of(64).max(2048);
    let count = ((64 << 20) / size).clamp(256, 4096);
    BufferPool::new(size, count)
}

impl Bridge {
    /// Runs rounds between `tap` and `vni` on the wall clock until `stop`
    /// is raised. Device errors are counted, logged now and then and
    /// waited out; losing the VNI port ends the bridge with an error.
    pub fn run(
        &mut self,
        tap: &mut dyn Device,
        vni: &mut dyn Device,
        pool: &BufferPool,
        clock: &MonotonicClock,
        stop: &AtomicBool,
    ) -> io::Result<()> {
        loop {
            if realtime::stopped(stop) {
                return Ok(());
            }
            let now = clock.now();
            let round = match self.round(tap, vni, pool, now) {
                Ok(round) => round,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    return Err(crate::link::context(e, "the bridge's VNI port was taken over"));
                }
                Err(e) => {
                    self.device_errors += 1;
                    if self.device_errors.is_power_of_two() {
                        log::warn!("device error ({} so far): {e}", self.device_errors);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            if round.received > 0 {
                continue;
            }
            if self.pending() > 0 {
                // A full ring or a busy kernel queue: neither has an fd that
                // says when it has room.
                if round.transmitted == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                continue;
            }
            realtime::wait_for_any(&[tap.raw_fd(), vni.raw_fd()], false, MAX_WAIT)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_dev::vni::{destroy, Segment, VniPort};
    use nagare_dev::DeviceStats;
    use std::sync::Arc;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
    const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];
    const BCAST: [u8; 6] = [0xff; 6];

    fn t(secs: u64) -> Instant {
        Instant::from_micros(secs * 1_000_000)
    }

    fn head(dst: [u8; 6], src: [u8; 6]) -> Option<[u8; 12]> {
        let mut h = [0u8; 12];
        h[..6].copy_from_slice(&dst);
        h[6..].copy_from_slice(&src);
        Some(h)
    }

    #[test]
    fn table_learns_moves_and_ages() {
        let mut table = MacTable::new(8, Duration::from_secs(10));
        assert!(table.learn(A, Side::Tap, t(0)));
        assert!(!table.learn(BCAST, Side::Tap, t(0)), "group addresses are not stations");
        assert!(!table.learn([0; 6], Side::Tap, t(0)));
        assert_eq!(table.lookup(A, t(1)), Some(Side::Tap));
        assert_eq!(table.lookup(B, t(1)), None);
        table.learn(A, Side::Vni, t(2));
        assert_eq!(table.lookup(A, t(3)), Some(Side::Vni));
        assert_eq!(table.stats.moved, 1);
        // Silent for the ageing time: unknown, then swept.
        assert_eq!(table.lookup(A, t(12)), None);
        assert_eq!(table.sweep(t(12)), 1);
        assert_eq!(table.len(), 0);
        assert_eq!(table.stats, TableStats { learned: 1, moved: 1, aged: 1, evicted: 0 });
    }

    #[test]
    fn a_full_table_forgets_the_oldest_station() {
        let mut table = MacTable::new(3, Duration::from_secs(100));
        for (i, mac) in [A, B, C].into_iter().enumerate() {
            table.learn(mac, Side::Tap, t(i as u64));
        }
        table.learn(A, Side::Tap, t(5)); // A refreshed: B is now the oldest
        let d = [2, 0, 0, 0, 0, 0xd];
        table.learn(d, Side::Vni, t(6));
        assert_eq!(table.len(), 3);
        assert_eq!(table.lookup(B, t(6)), None);
        assert_eq!(table.lookup(A, t(6)), Some(Side::Tap));
        assert_eq!(table.lookup(d, t(6)), Some(Side::Vni));
        assert_eq!(table.stats.evicted, 1);
        // Aged entries go before live ones are evicted.
        let e = [2, 0, 0, 0, 0, 0xe];
        table.learn(e, Side::Tap, t(150));
        assert_eq!(table.stats.evicted, 1);
        assert_eq!(table.len(), 1);
        // Bounded however many stations there are.
        let mut table = MacTable::new(16, MAC_AGEING);
        for i in 0..1000u32 {
            let b = i.to_be_bytes();
            table.learn([2, 0, b[0], b[1], b[2], b[3]], Side::Vni, t(u64::from(i)));
        }
        assert_eq!(table.len(), 16);
    }

    #[test]
    fn frames_cross_unless_their_destination_is_on_their_side() {
        let mut table = MacTable::new(8, MAC_AGEING);
        // The kernel (A) broadcasts an ARP request: it crosses, A is behind the TAP.
        assert_eq!(decide(&mut table, Side::Tap, head(BCAST, A), t(0)), Verdict::Forward);
        // B answers from the VNI: crosses.
        assert_eq!(decide(&mut table, Side::Vni, head(A, B), t(0)), Verdict::Forward);
        assert_eq!(table.lookup(B, t(0)), Some(Side::Vni));
        // Unknown unicast crosses (flooding in a two-port bridge).
        assert_eq!(decide(&mut table, Side::Vni, head(C, B), t(0)), Verdict::Forward);
        // A frame from a VNI station to another VNI station stays.
        table.learn(C, Side::Vni, t(0));
        assert_eq!(decide(&mut table, Side::Vni, head(C, B), t(0)), Verdict::Filter);
        // A frame from behind the TAP to a station behind the TAP stays.
        let a2 = [2, 0, 0, 0, 1, 0xa];
        table.learn(a2, Side::Tap, t(0));
        assert_eq!(decide(&mut table, Side::Tap, head(a2, A), t(0)), Verdict::Filter);
        // Runts and group sources are dropped, and not learned.
        assert_eq!(decide(&mut table, Side::Tap, None, t(0)), Verdict::Bad);
        assert_eq!(decide(&mut table, Side::Tap, head(A, BCAST), t(0)), Verdict::Bad);
    }

    /// A stand-in for the TAP: frames "from the kernel" are queued in
    /// `inbox`, frames sent to it collect in `sent`.
    #[derive(Default)]
    struct Wire {
        inbox: VecDeque<PacketBuf>,
        sent: Vec<PacketBuf>,
        stats: DeviceStats,
    }

    impl Device for Wire {
        fn receive_batch(
            &mut self,
            _: &BufferPool,
            out: &mut Vec<PacketBuf>,
            max: usize,
            _: Instant,
        ) -> io::Result<usize> {
            let n = max.min(self.inbox.len());
            out.extend(self.inbox.drain(..n));
            Ok(n)
        }
        fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, _: Instant) -> io::Result<usize> {
            let n = frames.len();
            self.sent.extend(frames.drain(..));
            Ok(n)
        }
        fn capabilities(&self) -> nagare_core::Capabilities {
            nagare_core::Capabilities { mtu: 1500, ..Default::default() }
        }
        fn stats(&self) -> DeviceStats {
            self.stats
        }
    }

    fn frame(pool: &BufferPool, dst: [u8; 6], src: [u8; 6], tag: u8) -> PacketBuf {
        let mut bytes = vec![tag; 60];
        bytes[..6].copy_from_slice(&dst);
        bytes[6..12].copy_from_slice(&src);
        PacketBuf::from_slice(pool, RX_HEADROOM, &bytes).unwrap()
    }

    fn receive_all(port: &mut VniPort, pool: &BufferPool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..3 {
            port.receive_batch(pool, &mut out, 64, Instant::ZERO).unwrap();
        }
        out.iter().map(PacketBuf::to_vec).collect()
    }

    /// Removes a test's segment even when an assertion fails.
    struct Removed(String);

    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = destroy(&self.0);
        }
    }

    /// A fresh segment named after `tag` and this process, of `ports`
    /// ports with `slots` slots per ring at MTU 1500.
    fn segment(tag: &str, ports: usize, slots: usize) -> (Removed, Arc<Segment>) {
        let name = format!("{tag}-{}", std::process::id());
        let _ = destroy(&name);
        let removed = Removed(name.clone());
        (removed, Arc::new(Segment::create(&name, ports, 1500, slots).unwrap()))
    }

    #[test]
    fn frames_cross_between_a_vni_segment_and_a_wire() {
        let (removed, seg) = segment("bridge-unit", 3, 16);
        let pool = BufferPool::new(2048, 256);
        let mut bridge_port = VniPort::attach(Arc::clone(&seg), Some([2, 0, 0, 0, 9, 0])).unwrap();
        let mut b = VniPort::attach(Arc::clone(&seg), Some(B)).unwrap();
        let mut c = VniPort::attach(Arc::clone(&seg), Some(C)).unwrap();
        let mut wire = Wire::default();
        let mut bridge = Bridge::default();

        // Kernel A broadcasts: both VNI instances get it.
        wire.inbox.push_back(frame(&pool, BCAST, A, 1));
        bridge.round(&mut wire, &mut bridge_port, &pool, t(0)).unwrap();
        assert_eq!(receive_all(&mut b, &pool).len(), 1);
        assert_eq!(receive_all(&mut c, &pool).len(), 1);

        // B answers A: B's port learned from the broadcast that A is behind
        // the bridge's port, so the answer goes there alone, and the
        // bridge sends it to the wire.
        let mut q = VecDeque::from([frame(&pool, A, B, 2)]);
        b.transmit_batch(&mut q, Instant::ZERO).unwrap();
        for _ in 0..3 {
            bridge.round(&mut wire, &mut bridge_port, &pool, t(0)).unwrap();
        }
        assert_eq!(wire.sent.len(), 1);
        assert_eq!(wire.sent[0].to_vec()[..12], head(A, B).unwrap());
        assert!(receive_all(&mut c, &pool).is_empty(), "not flooded to C");

        // A unicasts to C: only C gets it (the port knows C's MAC).
        wire.inbox.push_back(frame(&pool, C, A, 3));
        bridge.round(&mut wire, &mut bridge_port, &pool, t(0)).unwrap();
        assert_eq!(receive_all(&mut c, &pool).len(), 1);
        assert!(receive_all(&mut b, &pool).is_empty());

        // A frame between two VNI stations that reaches the bridge (C
        // flooding to B, as before C's port knew B) stays off the wire.
        let mut vni_side = Wire::default();
        vni_side.inbox.push_back(frame(&pool, B, C, 4));
        bridge.round(&mut wire, &mut vni_side, &pool, t(0)).unwrap();
        assert_eq!(bridge.vni_to_tap.filtered, 1);
        assert_eq!(wire.sent.len(), 1);

        assert_eq!(bridge.tap_to_vni.forwarded, 2);
        assert_eq!(bridge.vni_to_tap.forwarded, 1);
        assert_eq!(bridge.table.lookup(A, t(0)), Some(Side::Tap));
        drop((bridge_port, b, c, seg));
        destroy(&removed.0).unwrap();
    }

    /// An IPv4 TCP super-segment from `src` to `dst` with `payload` bytes
    /// and its checksum left partial, as an engine with offloads sends it.
    fn super_segment(pool: &BufferPool, dst: [u8; 6], src: [u8; 6], payload: usize) -> PacketBuf {
        use nagare_core::buf::Offload;
        let mut b = vec![0u8; 14 + 20 + 20 + payload];
        b[..6].copy_from_slice(&dst);
        b[6..12].copy_from_slice(&src);
        b[12] = 0x08;
        let total = (40 + payload) as u16;
        b[14] = 0x45;
        b[16..18].copy_from_slice(&total.to_be_bytes());
        b[20] = 0x40;
        b[22] = 64;
        b[23] = 6;
        b[26..30].copy_from_slice(&[10, 0, 0, 2]);
        b[30..34].copy_from_slice(&[10, 0, 0, 1]);
        let sum = nagare_wire::checksum(&b[14..34]);
        b[24..26].copy_from_slice(&sum.to_be_bytes());
        b[38..42].copy_from_slice(&5000u32.to_be_bytes());
        b[46] = 5 << 4;
        b[47] = 0x18;
        let pseudo = nagare_wire::pseudo_header_v4([10, 0, 0, 2].into(), [10, 0, 0, 1].into(), 6, total - 20);
        b[50..52].copy_from_slice(&pseudo.folded().to_be_bytes());
        for (i, x) in b[54..].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        let mut f = PacketBuf::from_slice(pool, RX_HEADROOM, &b).unwrap();
        f.set_offload(Offload::tcp_segments(1448));
        f
    }

    /// A bridge between a segment named `name` and a plain wire, with A
    /// behind the wire heard from first; B on the segment sends `frames`
    /// to A, and the bridge takes three rounds. What reached the wire, and
    /// the bridge.
    fn from_the_segment_to_the_wire(name: &str, pool: &BufferPool, frames: Vec<PacketBuf>) -> (Wire, Bridge) {
        let (_removed, seg) = segment(name, 2, 64);
        let mut bridge_port = VniPort::attach(Arc::clone(&seg), Some([2, 0, 0, 0, 9, 0])).unwrap();
        let mut b = VniPort::attach(Arc::clone(&seg), Some(B)).unwrap();
        let mut wire = Wire::default();
        let mut bridge = Bridge::default();
        wire.inbox.push_back(frame(pool, BCAST, A, 1));
        bridge.round(&mut wire, &mut bridge_port, pool, t(0)).unwrap();
        receive_all(&mut b, pool);
        let mut q = VecDeque::from(frames);
        b.transmit_batch(&mut q, Instant::ZERO).unwrap();
        assert!(q.is_empty());
        for _ in 0..3 {
            bridge.round(&mut wire, &mut bridge_port, pool, t(0)).unwrap();
        }
        (wire, bridge)
    }

    #[test]
    fn super_segments_from_the_segment_reach_a_plain_wire_cut_to_the_mtu() {
        let pool = BufferPool::new(2048, 512);
        let sent = super_segment(&pool, A, B, 20_000);
        let whole = sent.to_vec();
        let (wire, bridge) = from_the_segment_to_the_wire("bridge-tso", &pool, vec![sent]);
        assert_eq!(wire.sent.len(), 20_000usize.div_ceil(1448));
        let mut payload = Vec::new();
        for (k, f) in wire.sent.iter().enumerate() {
            let f = f.to_vec();
            assert!(f.len() <= 1514, "frame {k} is {} bytes", f.len());
            assert_eq!(f[..12], whole[..12]);
            assert!(nagare_wire::verify(&f[14..34]), "IP checksum of frame {k}");
            let mut sum =
                nagare_wire::pseudo_header_v4([10, 0, 0, 2].into(), [10, 0, 0, 1].into(), 6, (f.len() - 34) as u16);
            sum.add_bytes(&f[34..]);
            assert_eq!(sum.folded(), 0xffff, "TCP checksum of frame {k}");
            payload.extend_from_slice(&f[54..]);
        }
        assert!(payload == whole[54..], "payload cut and put back together");
        assert_eq!(bridge.vni_to_tap.completed, 1);
        assert_eq!(bridge.vni_to_tap.bad, 0);
    }

    /// An IPv4 UDP super-frame from `src` to `dst` with `payload` bytes in
    /// datagrams of `segment_size`, as an engine with the VNI's offloads
    /// sends it.
    fn udp_super_frame(pool: &BufferPool, dst: [u8; 6], src: [u8; 6], payload: usize, segment_size: u16) -> PacketBuf {
        use nagare_core::buf::Offload;
        let (from, to) = ([10, 0, 0, 2].into(), [10, 0, 0, 1].into());
        let mut b = vec![0u8; 14 + 20 + 8 + payload];
        b[..6].copy_from_slice(&dst);
        b[6..12].copy_from_slice(&src);
        b[12] = 0x08;
        let ip = nagare_wire::Ipv4Repr::new(from, to, nagare_wire::IpProtocol::Udp, 8 + payload, 64);
        ip.emit(&mut b[14..34]).unwrap();
        nagare_wire::UdpRepr { src_port: 5000, dst_port: 9 }
            .emit_header_partial(&mut b[34..42], payload, from, to)
            .unwrap();
        for (i, x) in b[42..].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        let mut f = PacketBuf::from_slice(pool, RX_HEADROOM, &b).unwrap();
        f.set_offload(Offload::udp_segments(segment_size));
        f
    }

    #[test]
    fn udp_super_frames_from_the_segment_reach_a_plain_wire_as_its_datagrams() {
        let pool = BufferPool::new(2048, 512);
        // One long super-frame, and one shorter than the MTU that still
        // stands for two datagrams.
        let sent = vec![udp_super_frame(&pool, A, B, 20_000, 1472), udp_super_frame(&pool, A, B, 1000, 600)];
        let wholes: Vec<_> = sent.iter().map(PacketBuf::to_vec).collect();
        let (wire, bridge) = from_the_segment_to_the_wire("bridge-uso", &pool, sent);
        let long = 20_000usize.div_ceil(1472);
        assert_eq!(wire.sent.len(), long + 2);
        let mut payloads = (Vec::new(), Vec::new());
        for (k, f) in wire.sent.iter().enumerate() {
            let f = f.to_vec();
            assert!(f.len() <= 1514, "frame {k} is {} bytes", f.len());
            assert_eq!(f[..12], wholes[0][..12]);
            let ip = nagare_wire::Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert!(ip.verify_checksum(), "IP checksum of frame {k}");
            assert_eq!(usize::from(ip.total_len()), f.len() - 14);
            let udp = nagare_wire::UdpPacket::new_checked(ip.payload()).unwrap();
            assert_eq!(usize::from(udp.len()), ip.payload().len(), "UDP length of frame {k}");
            assert!(udp.verify_checksum([10, 0, 0, 2].into(), [10, 0, 0, 1].into()), "UDP checksum of frame {k}");
            let size = if k < long { 1472 } else { 600 };
            let last = k + 1 == long || k + 1 == long + 2;
            assert!(udp.payload().len() == size || last, "frame {k}: {} bytes of payload", udp.payload().len());
            let into = if k < long { &mut payloads.0 } else { &mut payloads.1 };
            into.extend_from_slice(udp.payload());
        }
        assert!(payloads.0 == wholes[0][42..], "the long super-frame's datagrams");
        assert!(payloads.1 == wholes[1][42..], "the short super-frame's datagrams");
        assert_eq!(bridge.vni_to_tap.completed, 2);
        assert_eq!(bridge.vni_to_tap.bad, 0);
    }

    /// A frame from the segment that claims a partial checksum but is no
    /// TCP or UDP packet whose checksum can be completed (ICMP, an IP
    /// fragment) never reaches the plain wire; a UDP one beside it does,
    /// completed.
    #[test]
    fn partial_checksums_the_bridge_cannot_complete_are_dropped_and_counted() {
        use nagare_core::buf::{ChecksumState, Offload};
        let pool = BufferPool::new(2048, 256);
        let mut wire = Wire::default();
        let mut vni_side = Wire::default();
        let mut bridge = Bridge::default();
        let partial = |mut f: PacketBuf| {
            f.set_offload(Offload::checksum(ChecksumState::Partial));
            f
        };
        let udp = udp_super_frame(&pool, A, B, 100, 100).to_vec();
        let with_ip = |edit: &dyn Fn(&mut [u8])| {
            let mut b = udp.clone();
            edit(&mut b[14..34]);
            b[24..26].copy_from_slice(&[0, 0]);
            let sum = nagare_wire::checksum(&b[14..34]);
            b[24..26].copy_from_slice(&sum.to_be_bytes());
            partial(PacketBuf::from_slice(&pool, RX_HEADROOM, &b).unwrap())
        };
        vni_side.inbox.push_back(with_ip(&|ip| ip[9] = 1)); // ICMP
        vni_side.inbox.push_back(with_ip(&|ip| ip[6] = 0x20)); // more fragments
        vni_side.inbox.push_back(partial(PacketBuf::from_slice(&pool, RX_HEADROOM, &udp).unwrap()));
        bridge.round(&mut wire, &mut vni_side, &pool, t(0)).unwrap();
        assert_eq!(bridge.vni_to_tap.uncompletable, 2);
        assert_eq!(bridge.vni_to_tap.completed, 1);
        assert_eq!(wire.sent.len(), 1, "only the UDP datagram crosses");
        let f = wire.sent[0].to_vec();
        let ip = nagare_wire::Ipv4Packet::new_checked(&f[14..]).unwrap();
        let udp = nagare_wire::UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum([10, 0, 0, 2].into(), [10, 0, 0, 1].into()));
        assert_eq!(pool.in_use(), 1, "the dropped frames' buffers are free");
    }
}
