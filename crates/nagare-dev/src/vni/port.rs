//! A port on a segment: an Ethernet-compatible [`Device`].
//!
//! Attaching claims a free port record (compare-and-swap of its owner
//! word; a port whose owner process is dead is free again), empties every
//! ring to and from it, publishes the MAC and the doorbell, bumps the
//! attach generation and only then marks the port attached. Peers notice
//! the new generation and fetch the new doorbell; the rings need nothing
//! from them, because the attacher reset its own counters to theirs.
//!
//! Wake-ups follow `nagare_ipc::notify`, the inet server's primitive,
//! with one polling flag per port (in its record) for all its incoming
//! rings: a receiver that found frames sets its `polling` flag (it will
//! look again at once) and clears it, then looks once more, before
//! reporting an empty batch (after which its caller may sleep on the
//! eventfd). A sender publishes its head with a sequentially consistent
//! swap, then reads `polling`, then the receiver's tail; it rings only if
//! the receiver is not polling and the tail equals the head published
//! before (the ring went from empty to non-empty). The receiver clears its
//! flag with a sequentially consistent store and fence before it looks
//! again, so of "receiver stores tail / polling, then loads head" and
//! "sender swaps head, then loads polling and tail", one side sees the
//! other: either the receiver finds the frame, or the sender rings.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use nagare_core::buf::{BufferPool, Offload, PacketBuf, TxOffloads};
use nagare_core::{Capabilities, Instant};
use nagare_ipc::notify::{set_asleep, set_awake, Wake};
use nagare_wire::ETHERNET_HEADER_LEN;

use super::doorbell::{process_alive, Doorbell, RemoteBell};
use super::layout::*;
use super::meta;
use super::ring::{copy_to_pool, Consumer, Popped, Producer, SlotSpan};
use super::segment::Segment;
use crate::device::{frame_fits, Device, DeviceStats, FrameInPlace};

/// How often a live-looking peer's pid is checked (kill(pid, 0)).
const LIVENESS_INTERVAL: Duration = Duration::from_millis(200);
/// A unicast peer whose ring stays full this long is treated as stuck:
/// frames to it are dropped instead of holding up the others.
const STALL_LIMIT: Duration = Duration::from_millis(200);
/// How long after a failed doorbell fetch before trying again.
const BELL_RETRY: Duration = Duration::from_millis(500);
/// Stations (source MACs behind peers) remembered at most.
pub const STATION_CAPACITY: usize = 1024;
/// A station silent this long is forgotten (as the bridge's table).
pub const STATION_AGE: Duration = Duration::from_secs(300);
/// How long a station must be silent behind one peer before frames from
/// another peer with its source address move it.
const STATION_MOVE_HOLD: Duration = Duration::from_secs(2);

/// Counters particular to the VNI (frames are in [`DeviceStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VniStats {
    /// Slots with an impossible length, skipped (also in `rx_errors`).
    pub bad_slots: u64,
    /// Frames whose offload word did not fit them, dropped (also in
    /// `rx_errors`).
    pub bad_metadata: u64,
    /// Frames refused by the sender because the offload word it would
    /// write does not fit them by the rule receivers apply
    /// (`meta::decode`: a segment size past the MTU, a super-frame with a
    /// complete checksum); also in `tx_errors`.
    pub tx_bad_metadata: u64,
    /// Rings whose head or tail made no sense, resynchronised (received
    /// ones also count in `rx_errors`).
    pub broken_rings: u64,
    /// Doorbells rung.
    pub doorbells_rung: u64,
    /// Doorbells not rung because the receiver was polling.
    pub doorbells_masked: u64,
    /// Doorbells not rung because the ring already held frames (or the
    /// receiver had taken some of the batch before the sender looked).
    pub doorbells_elided: u64,
    /// Doorbells that could not be fetched or rung.
    pub doorbell_errors: u64,
    /// Unicast frames to an unknown MAC, sent to every peer.
    pub flooded: u64,
    /// Frame copies not delivered to a peer whose ring was full.
    pub ring_full_drops: u64,
    /// Peers seen going up or down.
    pub link_changes: u64,
    /// Unicast frames to a learned station (a MAC behind a peer that is
    /// not the peer's own), sent to that peer alone instead of flooded.
    pub learned_unicast: u64,
    /// Stations learned (new entries, or moves to another peer).
    pub stations_learned: u64,
    /// Stations forgotten to make room in a full table.
    pub stations_evicted: u64,
    /// Frames built in place in a slot and committed ([`SlotWriter`]).
    pub slots_committed: u64,
}

/// A source MAC seen on the ring from one peer.
#[derive(Debug, Clone, Copy)]
struct Station {
    /// Index into `VniPort::peers`.
    peer: usize,
    /// The peer's attach generation when it was seen: a re-attached peer
    /// (perhaps no bridge any more) does not inherit its predecessor's
    /// stations.
    generation: u32,
    seen: std::time::Instant,
}

/// The learned stations: a bounded table with ageing. Port MACs (from the
/// port records) always take precedence, so a peer claiming another
/// port's MAC as a source steers nothing.
#[derive(Debug, Default)]
struct Stations {
    map: HashMap<[u8; 6], Station>,
    swept: Option<std::time::Instant>,
}

impl Stations {
    /// Records `mac` as behind peer `peer`. Returns (new or moved, evicted).
    fn learn(&mut self, mac: [u8; 6], peer: usize, generation: u32, now: std::time::Instant) -> (bool, bool) {
        if let Some(st) = self.map.get_mut(&mac) {
            if st.peer != peer && now.duration_since(st.seen) < STATION_MOVE_HOLD {
                // A station heard behind another peer just now: a peer
                // sending with its source address would steal its frames.
                // It moves only once its old place has gone quiet.
                return (false, false);
            }
            let moved = st.peer != peer || st.generation != generation;
            *st = Station { peer, generation, seen: now };
            return (moved, false);
        }
        let mut evicted = false;
        if self.map.len() >= STATION_CAPACITY {
            // Forget the aged first (at most once a second), then, if
            // still full, the station silent longest.
            if self.swept.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
                self.swept = Some(now);
                self.map.retain(|_, st| now.duration_since(st.seen) < STATION_AGE);
            }
            if self.map.len() >= STATION_CAPACITY {
                if let Some(oldest) = self.map.iter().min_by_key(|(_, st)| st.seen).map(|(m, _)| *m) {
                    self.map.remove(&oldest);
                    evicted = true;
                }
            }
        }
        self.map.insert(mac, Station { peer, generation, seen: now });
        (true, evicted)
    }

    /// The peer (index into `peers`) a live entry for `mac` names.
    fn lookup(&self, mac: &[u8; 6], now: std::time::Instant) -> Option<Station> {
        self.map.get(mac).copied().filter(|st| now.duration_since(st.seen) < STATION_AGE)
    }
}

/// What a port knows of one peer.
#[derive(Debug)]
struct Peer {
    index: usize,
    up: bool,
    /// The peer's owner pid and generation when we last looked.
    pid: u32,
    generation: u32,
    alive: bool,
    checked_alive: Option<std::time::Instant>,
    mac: [u8; 6],
    bell: Option<RemoteBell>,
    bell_failed_at: Option<std::time::Instant>,
    tx: Producer,
    rx: Consumer,
    /// Free slots known without looking at the head again (this batch).
    credit: usize,
    full_since: Option<std::time::Instant>,
}

/// A peer as this port sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLink {
    pub index: usize,
    pub up: bool,
    pub mac: [u8; 6],
    pub pid: u32,
}

/// One attached port of a VNI segment.
#[derive(Debug)]
pub struct VniPort {
    seg: Arc<Segment>,
    geo: Geometry,
    index: usize,
    pid: u32,
    generation: u32,
    mac: [u8; 6],
    doorbell: Doorbell,
    peers: Vec<Peer>,
    polling: bool,
    /// The caller spins on `receive_batch` and never sleeps on the
    /// doorbell ([`VniPort::set_busy_poll`]).
    busy_poll: bool,
    /// The peer the next receive starts with (round robin).
    next_rx: usize,
    /// Source MACs learned per incoming ring.
    stations: Stations,
    stats: DeviceStats,
    vni: VniStats,
}

fn mac_to_u64(mac: [u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[..6].copy_from_slice(&mac);
    u64::from_le_bytes(b)
}

fn mac_from_u64(v: u64) -> [u8; 6] {
    let b = v.to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

/// A locally administered MAC for port `index` of segment `name`.
pub fn derived_mac(name: &str, index: usize) -> [u8; 6] {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let h = h.to_be_bytes();
    [0x02, 0x76, h[0], h[1], h[2], index as u8]
}

impl VniPort {
    /// Attaches to the first free port of `seg`, with MAC `mac` (derived
    /// from the segment name and port number if `None`).
    pub fn attach(seg: Arc<Segment>, mac: Option<[u8; 6]>) -> io::Result<VniPort> {
        for index in 0..seg.geometry().ports {
            if claim(&seg, index) {
                return Self::attach_claimed(seg, index, mac);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("VNI {}: all {} ports are attached", seg.name(), seg.geometry().ports),
        ))
    }

    /// Attaches to port `index` if it is free.
    pub fn attach_port(seg: Arc<Segment>, index: usize, mac: Option<[u8; 6]>) -> io::Result<VniPort> {
        if index >= seg.geometry().ports {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no port {index}")));
        }
        if !claim(&seg, index) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("VNI {} port {index} is attached", seg.name()),
            ));
        }
        Self::attach_claimed(seg, index, mac)
    }

    fn attach_claimed(seg: Arc<Segment>, index: usize, mac: Option<[u8; 6]>) -> io::Result<VniPort> {
        let geo = *seg.geometry();
        let pid = std::process::id();
        let base = geo.port_offset(index);
        let owner = seg.u64_at(base + P_OWNER);
        let give_up = |e: io::Error| {
            let _ = owner.compare_exchange(
                owner_word(STATE_CLAIMING, pid),
                owner_word(STATE_FREE, 0),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            e
        };
        let mac = mac.unwrap_or_else(|| derived_mac(seg.name(), index));
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(give_up(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a port's MAC must be unicast and not zero",
            )));
        }
        let taken = (0..geo.ports)
            .filter(|&j| j != index)
            .filter_map(|j| seg.port_info(j))
            .any(|p| p.mac == mac && p.is_live());
        if taken {
            return Err(give_up(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("another port of VNI {} has MAC {}", seg.name(), format_mac(mac)),
            )));
        }
        let doorbell = Doorbell::new().map_err(give_up)?;
        seg.u64_at(base + P_MAC).store(mac_to_u64(mac), Ordering::SeqCst);
        seg.u32_at(base + P_DOORBELL).store(doorbell.raw_fd() as u32, Ordering::SeqCst);
        seg.u32_at(base + P_POLLING).store(0, Ordering::SeqCst);
        let mut peers = Vec::with_capacity(geo.ports - 1);
        for j in (0..geo.ports).filter(|&j| j != index) {
            peers.push(Peer {
                index: j,
                up: false,
                pid: 0,
                generation: 0,
                alive: false,
                checked_alive: None,
                mac: [0; 6],
                bell: None,
                bell_failed_at: None,
                tx: Producer::reset(&seg, geo.ring_offset_of(index, j)),
                rx: Consumer::reset(&seg, geo.ring_offset_of(j, index)),
                credit: 0,
                full_since: None,
            });
        }
        let gen_word = seg.u32_at(base + P_GENERATION);
        let mut generation = gen_word.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        if generation == 0 {
            generation = gen_word.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        }
        if owner
            .compare_exchange(
                owner_word(STATE_CLAIMING, pid),
                owner_word(STATE_ATTACHED, pid),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_err()
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("VNI {} port {index} was taken while attaching", seg.name()),
            ));
        }
        let mut port = VniPort {
            seg,
            geo,
            index,
            pid,
            generation,
            mac,
            doorbell,
            peers,
            polling: false,
            busy_poll: false,
            next_rx: 0,
            stations: Stations::default(),
            stats: DeviceStats::default(),
            vni: VniStats::default(),
        };
        port.refresh()?;
        Ok(port)
    }

    /// The port's number in the segment.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The port's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// This attachment's generation.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The segment.
    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }

    /// VNI counters.
    pub fn vni_stats(&self) -> VniStats {
        self.vni
    }

    /// The peers as last seen (call after a receive or transmit, or
    /// [`refresh`](Self::refresh), for a current view).
    pub fn peer_links(&self) -> Vec<PeerLink> {
        self.peers.iter().map(|p| PeerLink { index: p.index, up: p.up, mac: p.mac, pid: p.pid }).collect()
    }

    /// The learned stations, as (MAC, the peer port it is behind), live
    /// entries only, sorted by MAC.
    pub fn stations(&self) -> Vec<([u8; 6], usize)> {
        let now = std::time::Instant::now();
        let mut v: Vec<_> = self
            .stations
            .map
            .iter()
            .filter(|(m, _)| self.stations.lookup(m, now).is_some())
            .map(|(m, st)| (*m, self.peers[st.peer].index))
            .collect();
        v.sort();
        v
    }

    /// The one peer (index into `peers`) a unicast frame to `dst` goes
    /// to: the live peer with that port MAC, else the live peer a station
    /// with that MAC was last seen behind (same attach generation); `None`
    /// means unknown: flood.
    /// The bool says whether the answer came from the learned stations.
    fn unicast_target(&self, dst: [u8; 6], now: std::time::Instant) -> Option<(usize, bool)> {
        if let Some(k) = self.peers.iter().position(|p| p.up && p.mac == dst) {
            return Some((k, false));
        }
        let st = self.stations.lookup(&dst, now)?;
        let peer = &self.peers[st.peer];
        (peer.up && peer.generation == st.generation).then_some((st.peer, true))
    }

    /// Starts a batch of frames built in place in ring slots (zero-copy
    /// send): the port records are read once, here; the frames committed
    /// through the batch are published, and the doorbells that need it
    /// rung, when it is dropped (or [`SlotBatch::publish`]ed).
    pub fn slot_batch(&mut self) -> io::Result<SlotBatch<'_>> {
        let now = std::time::Instant::now();
        self.refresh_at(now)?;
        Ok(SlotBatch { port: self, now, committed: 0 })
    }

    /// Re-reads the port records: our own (still ours?) and every peer's
    /// (attached? alive? re-attached?). Done by every receive and
    /// transmit.
    pub fn refresh(&mut self) -> io::Result<()> {
        self.refresh_at(std::time::Instant::now())
    }

    /// [`refresh`](Self::refresh) with the time already read (one clock
    /// read per batch).
    fn refresh_at(&mut self, now: std::time::Instant) -> io::Result<()> {
        let seg = &*self.seg;
        let base = self.geo.port_offset(self.index);
        let own = seg.u64_at(base + P_OWNER).load(Ordering::Acquire);
        let own_gen = seg.u32_at(base + P_GENERATION).load(Ordering::Acquire);
        if own != owner_word(STATE_ATTACHED, self.pid) || own_gen != self.generation {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("VNI {} port {} is no longer ours", seg.name(), self.index),
            ));
        }
        for peer in &mut self.peers {
            let pbase = self.geo.port_offset(peer.index);
            let owner = seg.u64_at(pbase + P_OWNER);
            let word = owner.load(Ordering::Acquire);
            let (state, pid) = split_owner(word);
            let mut up = false;
            if state == STATE_ATTACHED {
                let generation = seg.u32_at(pbase + P_GENERATION).load(Ordering::Acquire);
                let mac = mac_from_u64(seg.u64_at(pbase + P_MAC).load(Ordering::Acquire));
                // A record that changed while we read it is read again next time.
                let stable = owner.load(Ordering::Acquire) == word;
                if stable {
                    if generation != peer.generation || pid != peer.pid {
                        peer.generation = generation;
                        peer.pid = pid;
                        peer.mac = mac;
                        peer.bell = None;
                        peer.bell_failed_at = None;
                        peer.checked_alive = None;
                        peer.full_since = None;
                    }
                    if peer.checked_alive.is_none_or(|t| now.duration_since(t) >= LIVENESS_INTERVAL) {
                        peer.alive = process_alive(pid);
                        peer.checked_alive = Some(now);
                    }
                    up = peer.alive;
                }
            }
            if up != peer.up {
                peer.up = up;
                self.vni.link_changes += 1;
            }
        }
        Ok(())
    }

    /// What the port completes for the engine: the checksum (left partial
    /// for the receiver, which trusts it: the bytes never leave memory)
    /// and, when the ring holds frames longer than the MTU, TCP and UDP
    /// segmentation (the super-frame crosses whole, in consecutive slots,
    /// and the receiving engine takes it whole). A bridge to a device that cannot take either completes
    /// them itself.
    pub fn tx_offloads(&self) -> TxOffloads {
        let max_packet = self.geo.max_super_frame() - ETHERNET_HEADER_LEN;
        let segmentation = if max_packet > self.geo.mtu { max_packet } else { 0 };
        TxOffloads { checksum: true, tcp_segmentation: segmentation, udp_segmentation: segmentation }
    }

    /// Busy-poll mode: the caller promises to call `receive_batch` again
    /// at once, forever, without sleeping on [`Device::raw_fd`]. The port
    /// then keeps its `polling` flag set, so senders never ring it, and
    /// does not read its eventfd on every call. Turning it off clears the
    /// flag; as always, sleep only after a `receive_batch` that returned
    /// 0 (that call looks at the rings after the flag was cleared).
    pub fn set_busy_poll(&mut self, on: bool) {
        self.busy_poll = on;
        self.set_polling(on);
    }

    /// Whether the port is in busy-poll mode.
    pub fn busy_poll(&self) -> bool {
        self.busy_poll
    }

    fn set_polling(&mut self, on: bool) {
        if self.polling != on {
            self.polling = on;
            let flag = self.seg.u32_at(self.geo.port_offset(self.index) + P_POLLING);
            if on {
                set_awake(flag);
            } else {
                set_asleep(flag);
            }
        }
    }

    /// Drains up to `max` frames from the peers' rings, round robin,
    /// handing each to `deliver` as it lies in its slots, with its
    /// offload; `deliver` says whether it took the frame (false: no
    /// buffer, counted).
    fn drain(&mut self, max: usize, now: std::time::Instant, deliver: &mut Deliver<'_>) -> usize {
        let seg = &*self.seg;
        let count = self.peers.len();
        let mut got = 0;
        for k in 0..count {
            if got >= max {
                break;
            }
            let slot = (self.next_rx + k) % count;
            let peer = &mut self.peers[slot];
            if !peer.up {
                continue;
            }
            let avail = match peer.rx.available(seg) {
                Ok(n) => n,
                Err(_) => {
                    self.vni.broken_rings += 1;
                    self.stats.rx_errors += 1;
                    continue;
                }
            };
            let mut left = avail;
            // Slots read and not yet handed back: every eighth of the
            // ring goes back at once, so the sender refills one part of a
            // ring (a few super-segments fill it) while we copy out of
            // another, instead of waiting for the whole batch.
            let mut unreleased = 0;
            let release_every = (self.geo.slot_count / 8).max(1);
            while left > 0 && got < max {
                if unreleased >= release_every {
                    peer.rx.release(seg);
                    unreleased = 0;
                }
                let (span, offload) = match peer.rx.pop_frame(seg, &self.geo, left) {
                    Popped::Frame(span, offload, slots) => {
                        left -= slots;
                        unreleased += slots;
                        (span, offload)
                    }
                    Popped::BadSlot => {
                        left -= 1;
                        unreleased += 1;
                        self.vni.bad_slots += 1;
                        self.stats.rx_errors += 1;
                        continue;
                    }
                    Popped::BadMetadata(slots) => {
                        left -= slots;
                        unreleased += slots;
                        self.vni.bad_metadata += 1;
                        self.stats.rx_errors += 1;
                        continue;
                    }
                };
                // Learn the source if it is not the peer's own MAC (a
                // station behind it, e.g. behind a bridge): a 6-byte
                // compare in the common case.
                let mut src = [0u8; 6];
                if span.read(seg, &self.geo, 6, &mut src)
                    && src != peer.mac
                    && src != self.mac
                    && src[0] & 1 == 0
                    && src != [0; 6]
                {
                    let (learned, evicted) = self.stations.learn(src, slot, peer.generation, now);
                    self.vni.stations_learned += u64::from(learned);
                    self.vni.stations_evicted += u64::from(evicted);
                }
                if deliver(seg, &self.geo, &span, offload) {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += span.len() as u64;
                    got += 1;
                } else {
                    self.stats.rx_dropped_no_buffer += 1;
                }
            }
            peer.rx.release(seg);
        }
        if count > 0 {
            self.next_rx = (self.next_rx + 1) % count;
        }
        got
    }

    /// One receive batch with the doorbell protocol around it.
    fn receive_with(&mut self, max: usize, deliver: &mut Deliver<'_>) -> io::Result<usize> {
        // While polling (the last batch found frames, or busy-poll mode)
        // senders do not ring, and a ring that raced with setting the flag
        // only makes the caller's next sleep return at once; the eventfd
        // is drained on the first call after an empty batch, before the
        // caller may sleep again. This saves a read(2) per busy batch.
        if !self.polling && !self.busy_poll {
            self.doorbell.drain();
        }
        let now = std::time::Instant::now();
        self.refresh_at(now)?;
        let mut got = self.drain(max, now, deliver);
        if self.busy_poll {
            return Ok(got);
        }
        if got == 0 && self.polling {
            // About to report nothing: let senders ring again, then look
            // once more for frames published while they did not.
            self.set_polling(false);
            got = self.drain(max, now, deliver);
        }
        if got > 0 {
            self.set_polling(true);
        }
        Ok(got)
    }

    /// Room in the ring to peer `k`, looking at its tail only when the
    /// credit known from the last look is less than `need` slots.
    fn room(&mut self, k: usize, need: usize) -> usize {
        let peer = &mut self.peers[k];
        if peer.credit < need {
            peer.credit = match peer.tx.free_slots(&self.seg) {
                Ok(n) => n,
                Err(_) => {
                    self.vni.broken_rings += 1;
                    self.geo.slot_count
                }
            };
        }
        peer.credit
    }

    /// The offload word to send `frame` with, if the port carries the
    /// frame as it is: it fits the ring (`frame_fits`), and its word fits
    /// it by the rule every receiver applies (`meta::decode`; refusals
    /// counted in `tx_bad_metadata`). The port completes nothing in
    /// software: a frame whose offload does not fit was sent against the
    /// port's capabilities, and is refused as the `Device` contract
    /// refuses a frame too large (the caller counts it in `tx_errors`).
    fn offload_word(&mut self, frame: &PacketBuf) -> Option<u32> {
        if !frame_fits(frame, self.geo.mtu, self.tx_offloads()) {
            return None;
        }
        let word = meta::checked_encode(frame.offload(), frame.len(), &self.geo).ok();
        self.vni.tx_bad_metadata += u64::from(word.is_none());
        word
    }

    /// Writes `frame` into the ring to peer `k`; false if the ring refused
    /// it (`ring::Unwritten`: not after [`offload_word`](Self::offload_word)
    /// took it, whose checks include the ring's), which leaves that copy
    /// undelivered.
    fn push(&mut self, k: usize, frame: &PacketBuf, word: u32, slots: usize) -> bool {
        let peer = &mut self.peers[k];
        if peer.tx.push(&self.seg, &self.geo, frame, word).is_err() {
            return false;
        }
        peer.credit -= slots;
        peer.full_since = None;
        true
    }

    /// Publishes what was pushed to every peer and rings the doorbells
    /// that need it: one store and at most one ring per peer per batch.
    fn publish(&mut self, now: std::time::Instant) {
        let seg = &*self.seg;
        for peer in &mut self.peers {
            peer.credit = 0;
            if !peer.tx.has_unpublished() {
                continue;
            }
            let pbase = self.geo.port_offset(peer.index);
            match peer.tx.publish(seg, pbase + P_POLLING) {
                Wake::Signal => {}
                Wake::Polling => {
                    self.vni.doorbells_masked += 1;
                    continue;
                }
                Wake::Taken | Wake::NotEdge => {
                    self.vni.doorbells_elided += 1;
                    continue;
                }
            }
            if peer.bell.is_none() && peer.bell_failed_at.is_none_or(|t| now.duration_since(t) >= BELL_RETRY) {
                let fd = seg.u32_at(pbase + P_DOORBELL).load(Ordering::Acquire);
                match RemoteBell::fetch(peer.pid, fd) {
                    Ok(bell) => peer.bell = Some(bell),
                    Err(_) => {
                        self.vni.doorbell_errors += 1;
                        peer.bell_failed_at = Some(now);
                    }
                }
            }
            if let Some(bell) = &peer.bell {
                if bell.ring().is_ok() {
                    self.vni.doorbells_rung += 1;
                } else {
                    self.vni.doorbell_errors += 1;
                    peer.bell = None;
                    peer.bell_failed_at = Some(now);
                }
            }
        }
    }
}

/// A batch of frames built in place in ring slots: the zero-copy send of
/// the VNI (see `docs/vni.md`). Made by [`VniPort::slot_batch`]; each
/// [`reserve_slot`](Self::reserve_slot) lends the slot at the tail of the
/// ring to one peer as a [`SlotWriter`]; committed frames become visible
/// to the peers, once per ring, when the batch is published or dropped.
#[derive(Debug)]
pub struct SlotBatch<'a> {
    port: &'a mut VniPort,
    now: std::time::Instant,
    committed: usize,
}

impl SlotBatch<'_> {
    /// The slot for the next frame to `dst`: the ring of the live peer
    /// with that port MAC, or of the peer that station was learned
    /// behind. Errors (nothing reserved): `InvalidInput` for a group
    /// (broadcast, multicast) address, which goes to every peer and so
    /// cannot be built in one slot; `NotFound` for a MAC no live peer has
    /// and no station learned (send those with `transmit_batch`, which
    /// floods); `WouldBlock` when that ring is full (publish, and try
    /// again once the peer has read).
    pub fn reserve_slot(&mut self, dst: [u8; 6]) -> io::Result<SlotWriter<'_>> {
        if dst[0] & 1 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a group address goes to every peer: use transmit_batch",
            ));
        }
        let Some((k, learned)) = self.port.unicast_target(dst, self.now) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no peer port or learned station has MAC {}", format_mac(dst)),
            ));
        };
        if self.port.room(k, 1) == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let frame = self.port.peers[k].tx.next_frame_offset(&self.port.geo);
        let capacity = self.port.geo.max_frame();
        Ok(SlotWriter {
            port: &mut *self.port,
            committed: &mut self.committed,
            peer: k,
            learned,
            frame,
            capacity,
            written: 0,
        })
    }

    /// Frames committed in this batch so far.
    pub fn committed(&self) -> usize {
        self.committed
    }

    /// Publishes the committed frames and rings the doorbells that need
    /// it (what dropping the batch does); returns how many there were.
    pub fn publish(self) -> usize {
        self.committed
    }
}

impl Drop for SlotBatch<'_> {
    fn drop(&mut self) {
        self.port.publish(self.now);
    }
}

/// One reserved slot: the frame is written straight into it, with
/// [`write`](Self::write), and sent with [`commit`](Self::commit). It
/// lends no `&mut [u8]` into the segment: the slot is shared memory that
/// another process can write at any time, so, as everywhere in the VNI,
/// bytes reach it by raw copies inside `Segment` and never through a Rust
/// reference. Dropping the writer without committing sends nothing (the
/// slot stays free for the next frame).
#[derive(Debug)]
pub struct SlotWriter<'b> {
    port: &'b mut VniPort,
    /// The batch's count of committed frames.
    committed: &'b mut usize,
    peer: usize,
    learned: bool,
    /// Offset of the slot's frame bytes in the segment.
    frame: usize,
    capacity: usize,
    /// Bytes `0..written` have been written (the highest end written).
    written: usize,
}

impl SlotWriter<'_> {
    /// The largest frame the slot takes: MTU + 14.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The end of the furthest write so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// The MAC of the peer port whose ring this slot is in.
    pub fn peer_mac(&self) -> [u8; 6] {
        self.port.peers[self.peer].mac
    }

    /// Copies `bytes` into the frame at `offset`; `InvalidInput` (nothing
    /// written) if that goes past [`capacity`](Self::capacity).
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> io::Result<()> {
        let end = offset.checked_add(bytes.len()).filter(|&e| e <= self.capacity).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} bytes at {offset} do not fit a {}-byte slot", bytes.len(), self.capacity),
            )
        })?;
        let done = self.port.seg.write_bytes(self.frame + offset, bytes);
        debug_assert!(done, "slot offsets come from the geometry");
        self.written = self.written.max(end);
        Ok(())
    }

    /// Sends the first `len` bytes of the slot as a frame (visible to the
    /// peer when the batch is published). Refused with `InvalidInput`,
    /// nothing sent and the slot left free, unless `14 <= len <=
    /// capacity` and `len <= written()`: a frame is never padded with
    /// whatever the slot held before. Bytes inside `0..written()` that
    /// were never written (gaps between writes) are the slot's old
    /// contents: segment memory that every attached process can read
    /// anyway, never our private memory.
    pub fn commit(self, len: usize) -> io::Result<()> {
        if !(ETHERNET_HEADER_LEN..=self.capacity).contains(&len) || len > self.written {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("frame length {len}: must be 14..={} and written ({} bytes are)", self.capacity, self.written),
            ));
        }
        let port = self.port;
        let peer = &mut port.peers[self.peer];
        debug_assert_eq!(peer.tx.next_frame_offset(&port.geo), self.frame);
        peer.tx.commit(&port.seg, &port.geo, len);
        peer.credit -= 1;
        peer.full_since = None;
        port.stats.tx_frames += 1;
        port.stats.tx_bytes += len as u64;
        port.vni.slots_committed += 1;
        port.vni.learned_unicast += u64::from(self.learned);
        *self.committed += 1;
        Ok(())
    }
}

fn claim(seg: &Segment, index: usize) -> bool {
    let owner = seg.u64_at(seg.geometry().port_offset(index) + P_OWNER);
    let word = owner.load(Ordering::Acquire);
    let (state, pid) = split_owner(word);
    let free = state == STATE_FREE || !process_alive(pid);
    free && owner
        .compare_exchange(word, owner_word(STATE_CLAIMING, std::process::id()), Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

/// `02:76:...` notation.
pub fn format_mac(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// What a receive does with each frame in its slots: the segment, its
/// geometry, where the frame lies and its offload; whether it was taken.
type Deliver<'a> = dyn FnMut(&Segment, &Geometry, &SlotSpan, Offload) -> bool + 'a;

/// A frame in its slots, shown to [`Device::receive_placed`]'s caller.
struct SlotFrame<'a> {
    seg: &'a Segment,
    geo: &'a Geometry,
    span: &'a SlotSpan,
    offload: Offload,
}

impl FrameInPlace for SlotFrame<'_> {
    fn len(&self) -> usize {
        self.span.len()
    }

    fn copy_out(&self, offset: usize, out: &mut [u8]) -> bool {
        self.span.read(self.seg, self.geo, offset, out)
    }

    fn offload(&self) -> Offload {
        self.offload
    }
}

impl Device for VniPort {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        _now: Instant,
    ) -> io::Result<usize> {
        self.receive_with(max, &mut |seg, geo, span, offload| match copy_to_pool(seg, geo, span, offload, pool) {
            Some(frame) => {
                out.push(frame);
                true
            }
            None => false,
        })
    }

    fn receive_placed(
        &mut self,
        max: usize,
        _now: Instant,
        place: &mut dyn FnMut(&dyn FrameInPlace),
    ) -> io::Result<usize> {
        self.receive_with(max, &mut |seg, geo, span, offload| {
            place(&SlotFrame { seg, geo, span, offload });
            true
        })
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, _now: Instant) -> io::Result<usize> {
        let now = std::time::Instant::now();
        self.refresh_at(now)?;
        let mut taken = 0;
        while let Some(frame) = frames.front() {
            let Some(word) = self.offload_word(frame) else {
                frames.pop_front();
                self.stats.tx_errors += 1;
                taken += 1;
                continue;
            };
            let len = frame.len();
            let slots = self.geo.slots_for(len);
            let dst = frame.header::<6>().unwrap_or([0xff; 6]);
            let group = dst[0] & 1 != 0;
            let target = if group { None } else { self.unicast_target(dst, now) };
            let mut delivered = 0;
            if let Some((k, learned)) = target {
                if self.room(k, slots) < slots {
                    let peer = &mut self.peers[k];
                    let since = *peer.full_since.get_or_insert(now);
                    if now.duration_since(since) < STALL_LIMIT {
                        // Back pressure: the rest waits for the next call.
                        break;
                    }
                    self.vni.ring_full_drops += 1;
                } else if self.push(k, frame, word, slots) {
                    self.vni.learned_unicast += u64::from(learned);
                    delivered = 1;
                }
            } else {
                if !group {
                    self.vni.flooded += 1;
                }
                for k in 0..self.peers.len() {
                    if !self.peers[k].up {
                        continue;
                    }
                    if self.room(k, slots) < slots {
                        self.vni.ring_full_drops += 1;
                    } else if self.push(k, frame, word, slots) {
                        delivered += 1;
                    }
                }
            }
            if delivered > 0 {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += len as u64;
            } else {
                self.stats.tx_dropped += 1;
            }
            frames.pop_front();
            taken += 1;
        }
        self.publish(now);
        Ok(taken)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { mtu: self.geo.mtu, tx_offloads: self.tx_offloads() }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.doorbell.raw_fd())
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

impl Drop for VniPort {
    fn drop(&mut self) {
        let base = self.geo.port_offset(self.index);
        self.seg.u32_at(base + P_POLLING).store(0, Ordering::SeqCst);
        let _ = self.seg.u64_at(base + P_OWNER).compare_exchange(
            owner_word(STATE_ATTACHED, self.pid),
            owner_word(STATE_FREE, 0),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}
