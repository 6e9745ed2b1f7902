//! Receive steering: a flow's frames land in the region of the application
//! that owns its port, so the payload reaches the application without a
//! copy inside the instance.
//!
//! netd keeps a pool of buffers in each client's region (the first
//! `receive_pool` of them start netd's) and hands some to the driver. The
//! driver reads each frame's headers where the device holds it (a VNI
//! slot), looks the local port up in the table netd sends it (`Steer`), and
//! copies the frame straight into one of that client's buffers
//! (`RX_CLIENT_PIECE`): the device's one copy at the edge. netd copies the
//! headers out (the application can write its region, so netd parses only
//! its own copy) and checks again that the port is the client's; the
//! payload goes to the engine as a view of the buffer. When the
//! application receives it, the completion names that buffer, and the
//! buffer the request posted joins netd's pool in its place (a swap, as a
//! NIC's receive ring trades buffers): no byte is copied.
//!
//! What the application can do with this: read its own flows' frames,
//! headers included, and change them while netd holds them. Changing the
//! payload changes only what it receives. Changing the headers before netd
//! copies them can make a frame claim another port: netd then drops it if
//! another client owns that port, so one application cannot inject into
//! another's sockets.
//!
//! In inline placement netd reads a multi-queue TAP's queues itself, in the
//! same way (`crate::tap_queues`): "the driver" below is then that reader.

use crate::driver::messages::{SteerChange, MAX_PIECES};
use crate::view::{Release, View};
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_dev::{MAX_LOCAL6, RX_HEADROOM};
use nagare_ipc::{Descriptor, SharedBytes};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Bytes of a frame read to steer it: Ethernet, the longest IPv4 header
/// (longer than IPv6's fixed one) and the longest TCP header.
pub(crate) const HEAD_LEN: usize = 14 + 60 + 60;

/// Whether a frame whose first bytes are `head` (an Ethernet and IP
/// header, as [`flow_of`] found) is sent to `mac` and, over IPv4, `ip`
/// or, over IPv6, one of the addresses in `ip6`'s slots (none: no IPv6
/// frame is).
pub(crate) fn is_for(head: &[u8], mac: [u8; 6], ip: [u8; 4], ip6: &Local6) -> bool {
    if head.get(0..6) != Some(&mac[..]) {
        return false;
    }
    match head.get(12..14) {
        Some([0x86, 0xdd]) => head.get(38..54).is_some_and(|dst| ip6.iter().flatten().any(|a| a[..] == *dst)),
        _ => head.get(30..34) == Some(&ip[..]),
    }
}

/// netd's IPv6 addresses frames are steered for, by slot (the TAP
/// program's, [`MAX_LOCAL6`]); `None`: an empty slot.
pub(crate) type Local6 = [Option<[u8; 16]>; MAX_LOCAL6];

/// The slots of `addrs` (the first [`MAX_LOCAL6`] different ones) after
/// `old`: an address already in a slot keeps it, a slot whose address
/// left is emptied, and the addresses that have none take the emptiest
/// slots, the lowest first. Only the slots of addresses that came or
/// left change, so the TAP program's other slots go on matching.
pub(crate) fn local6(old: &Local6, addrs: &[[u8; 16]]) -> Local6 {
    // On the stack: netd asks every turn.
    let mut wanted = [[0u8; 16]; MAX_LOCAL6];
    let mut n = 0;
    for a in addrs {
        if n == MAX_LOCAL6 {
            break;
        }
        if !wanted[..n].contains(a) {
            wanted[n] = *a;
            n += 1;
        }
    }
    let wanted = &wanted[..n];
    let mut slots = old.map(|a| a.filter(|a| wanted.contains(a)));
    for &a in wanted {
        if slots.contains(&Some(a)) {
            continue;
        }
        if let Some(free) = slots.iter_mut().find(|s| s.is_none()) {
            *free = Some(a);
        }
    }
    slots
}

/// The slots whose address differs between `a` and `b`, one bit each.
fn changed_slots(a: &Local6, b: &Local6) -> u16 {
    a.iter().zip(b).enumerate().filter(|(_, (x, y))| x != y).fold(0, |m, (slot, _)| m | 1 << slot)
}

/// netd's own addresses, where a steered frame is sent: Ethernet, IPv4,
/// and the IPv6 ones frames are steered for.
pub(crate) type Local = ([u8; 6], [u8; 4], Local6);

/// The driver's messages that say `local`'s IPv6 slots in `slots` (one
/// bit each), each with the Ethernet and IPv4 addresses.
fn local_changes((mac, ip, ip6): Local, slots: u16) -> impl Iterator<Item = SteerChange> {
    ip6.into_iter()
        .enumerate()
        .filter(move |(slot, _)| slots & 1 << slot != 0)
        .map(move |(slot, ip6)| SteerChange::Local { mac, ip, slot: slot as u8, ip6 })
}

/// IP protocol numbers steered.
pub(crate) const TCP: u8 = 6;
pub(crate) const UDP: u8 = 17;

/// What a frame is for, read from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flow {
    /// IP protocol (TCP or UDP).
    pub proto: u8,
    /// Destination (local) port.
    pub port: u16,
    /// Ethernet, IP and transport headers together.
    pub header_len: usize,
}

/// The flow of an unfragmented IPv4 TCP or UDP frame, or an IPv6 one whose
/// TCP or UDP header follows the fixed header, whose headers all lie in
/// `head`; `None` for anything else (ARP, ICMP, fragments, extension
/// headers, junk).
pub(crate) fn flow_of(head: &[u8]) -> Option<Flow> {
    let byte = |i: usize| head.get(i).copied();
    let word = |i: usize| Some(u16::from_be_bytes([byte(i)?, byte(i + 1)?]));
    let (proto, l4) = match word(12)? {
        0x0800 => {
            let vihl = byte(14)?;
            let ihl = usize::from(vihl & 0x0f) * 4;
            if vihl >> 4 != 4 || ihl < 20 {
                return None;
            }
            // More fragments, or an offset: not the whole datagram.
            if word(20)? & 0x3fff != 0 {
                return None;
            }
            (byte(23)?, 14 + ihl)
        }
        0x86dd if byte(14)? >> 4 == 6 => (byte(20)?, 14 + 40),
        _ => return None,
    };
    let l4_len = match proto {
        UDP => 8,
        TCP => usize::from(byte(l4 + 12)? >> 4) * 4,
        _ => return None,
    };
    if l4_len < 8 || l4 + l4_len > head.len() {
        return None;
    }
    Some(Flow { proto, port: word(l4 + 2)?, header_len: l4 + l4_len })
}

/// Who owns the sockets on one local port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// One client, with this many sockets there.
    One { key: u64, sockets: u32 },
    /// Sockets of several clients: not steered.
    Shared { sockets: u32 },
}

/// Where one of netd's receive buffers in a client's region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxState {
    /// With netd, to be handed to the driver.
    Spare,
    /// With the driver.
    AtDriver,
    /// Its payload is with the engine (this lending's serial).
    InEngine(u64),
}

struct RxBuffer {
    view: SharedBytes,
    state: RxState,
}

/// One client's receive buffers.
struct ClientRx {
    base: usize,
    size: usize,
    buffers: HashMap<u32, RxBuffer>,
}

/// How netd took a steered frame.
#[derive(Debug)]
pub(crate) enum Steered {
    /// Headers copied, payload lent in place.
    InPlace(PacketBuf),
    /// The port is nobody's now (a socket closed while the frame came):
    /// copied whole, for the engine to answer as it would any frame.
    Copied(PacketBuf),
    /// Refused: not a buffer netd gave the driver, or the headers name a
    /// port another client owns (counted by the caller).
    Refused,
}

/// The engine's hold on a steered frame's payload.
struct SteeredPayload {
    key: u64,
    index: u32,
    serial: u64,
    released: Rc<RefCell<Vec<(u64, u32, u64)>>>,
}

impl Release for SteeredPayload {
    fn release(&mut self) {
        self.released.borrow_mut().push((self.key, self.index, self.serial));
    }
}

/// The steering table and every client's receive buffers, shared by netd
/// and its link to the driver.
pub(crate) struct Steering {
    /// Frames are steered: by a driver, or by netd reading a multi-queue
    /// TAP itself (`crate::tap_queues`); any other device inside netd
    /// copies.
    enabled: bool,
    ports: RefCell<HashMap<(u8, u16), Owner>>,
    clients: RefCell<HashMap<u64, ClientRx>>,
    /// Ports whose steering changed since the driver was last told: the
    /// latest owner of each (a client looping bind and close adds nothing).
    updates: RefCell<BTreeMap<(u8, u16), Option<u64>>>,
    /// Ports unsteered (their owner left, or another client joined) that
    /// the driver may still steer to the client that had them: the serial
    /// of the descriptor that carries the change, 0 until it is sent. A
    /// client that takes such a port hears of it only once the driver has
    /// applied the change ([`Steering::settled`]).
    unsettled: RefCell<HashMap<(u8, u16), u64>>,
    /// The serial of the last steering descriptor made.
    sent: Cell<u64>,
    /// A driver runs (or starts); while none does, nothing is steered.
    driver_running: Cell<bool>,
    /// netd's own addresses (only frames to them are steered), and the
    /// IPv6 slots (one bit each) the driver has not been told yet; a
    /// change of the Ethernet or IPv4 address marks slot 0, whose message
    /// carries them.
    local: Cell<Option<Local>>,
    local_changed: Cell<u16>,
    released: Rc<RefCell<Vec<(u64, u32, u64)>>>,
    serial: Cell<u64>,
    /// Some buffer may have become spare (or a client attached) since the
    /// driver was last given some.
    spare_changed: Cell<bool>,
}

impl Steering {
    /// A table; `enabled` when a driver, or netd's own queue reader,
    /// consumes it (the "driver" of the methods below).
    pub fn new(enabled: bool) -> Steering {
        Steering {
            enabled,
            ports: RefCell::default(),
            clients: RefCell::default(),
            updates: RefCell::default(),
            unsettled: RefCell::default(),
            sent: Cell::new(0),
            driver_running: Cell::new(enabled),
            local: Cell::new(None),
            local_changed: Cell::new(0),
            released: Rc::default(),
            serial: Cell::new(0),
            spare_changed: Cell::new(true),
        }
    }

    /// Whether frames are steered at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Client `key`'s receive buffers (index, view of the whole buffer),
    /// in an area starting at `base` of buffers of `size` bytes.
    pub fn add_client(&self, key: u64, base: usize, size: usize, buffers: Vec<(u32, SharedBytes)>) {
        let buffers = buffers.into_iter().map(|(i, view)| (i, RxBuffer { view, state: RxState::Spare })).collect();
        self.clients.borrow_mut().insert(key, ClientRx { base, size, buffers });
    }

    /// Client `key` is gone: its buffers (the engine's views keep them
    /// mapped) and its ports.
    pub fn remove_client(&self, key: u64) {
        self.clients.borrow_mut().remove(&key);
        let mut ports = self.ports.borrow_mut();
        ports.retain(|&(proto, port), owner| {
            let mine = matches!(owner, Owner::One { key: k, .. } if *k == key);
            if mine {
                self.update(proto, port, None);
            }
            !mine
        });
    }

    /// Client `key` has one more socket on local port `port`.
    pub fn bind(&self, proto: u8, port: u16, key: u64) {
        let mut ports = self.ports.borrow_mut();
        let owner = match ports.get(&(proto, port)).copied() {
            None => {
                self.update(proto, port, Some(key));
                Owner::One { key, sockets: 1 }
            }
            Some(Owner::One { key: k, sockets }) if k == key => Owner::One { key, sockets: sockets + 1 },
            Some(Owner::One { sockets, .. }) => {
                self.update(proto, port, None);
                Owner::Shared { sockets: sockets + 1 }
            }
            Some(Owner::Shared { sockets }) => Owner::Shared { sockets: sockets + 1 },
        };
        ports.insert((proto, port), owner);
    }

    /// Client `key` has one socket fewer on `port`. A port shared once
    /// stays unsteered until its last socket goes.
    pub fn unbind(&self, proto: u8, port: u16) {
        let mut ports = self.ports.borrow_mut();
        let Some(owner) = ports.get_mut(&(proto, port)) else { return };
        let (Owner::One { sockets, .. } | Owner::Shared { sockets }) = owner;
        *sockets = sockets.saturating_sub(1);
        if *sockets == 0 {
            if matches!(owner, Owner::One { .. }) {
                self.update(proto, port, None);
            }
            ports.remove(&(proto, port));
        }
    }

    fn update(&self, proto: u8, port: u16, key: Option<u64>) {
        if self.enabled {
            self.updates.borrow_mut().insert((proto, port), key);
            if key.is_none() && self.driver_running.get() {
                // The latest unsteer is the one to wait for.
                self.unsettled.borrow_mut().insert((proto, port), 0);
            }
        }
    }

    /// Whether the driver can no longer steer frames to `(proto, port)` into
    /// the region of a client that had it: a client that binds the port
    /// hears of it only then, so no frame sent to it after it has bound
    /// lands in another client's region.
    pub fn settled(&self, proto: u8, port: u16) -> bool {
        !self.unsettled.borrow().contains_key(&(proto, port))
    }

    /// Ring-0 descriptors for `changes`, numbered: the driver tells which it
    /// has applied ([`Steering::applied`]).
    pub fn descriptors(&self, changes: &[SteerChange]) -> Vec<Descriptor> {
        let mut unsettled = self.unsettled.borrow_mut();
        changes
            .iter()
            .map(|c| {
                let serial = self.sent.get() + 1;
                self.sent.set(serial);
                if let SteerChange::Port { proto, port, .. } = *c {
                    if let Some(s @ 0) = unsettled.get_mut(&(proto, port)) {
                        *s = serial;
                    }
                }
                Descriptor { id: serial, ..c.descriptor() }
            })
            .collect()
    }

    /// The driver has applied every steering descriptor up to `serial`
    /// (one it cannot have seen yet is ignored).
    pub fn applied(&self, serial: u64) {
        if serial <= self.sent.get() {
            self.unsettled.borrow_mut().retain(|_, &mut s| s == 0 || s > serial);
        }
    }

    /// netd's own addresses: a frame is steered only if it is sent to
    /// them (a VNI floods frames for other stations to every port); an
    /// IPv6 frame only to one of `ip6` (the first [`MAX_LOCAL6`]), each
    /// in a slot of its own that it keeps while it stays (see
    /// [`local6`]). The driver is told only the slots that change; the
    /// same addresses again change nothing.
    pub fn set_local(&self, mac: [u8; 6], ip: [u8; 4], ip6: &[[u8; 16]]) {
        let old = self.local.get();
        let old6 = old.map_or([None; MAX_LOCAL6], |(_, _, six)| six);
        let six = local6(&old6, ip6);
        let mut changed = changed_slots(&old6, &six);
        if old.is_none_or(|(m, i, _)| (m, i) != (mac, ip)) {
            changed |= 1;
        }
        self.local.set(Some((mac, ip, six)));
        if self.enabled {
            self.local_changed.set(self.local_changed.get() | changed);
        }
    }

    /// Whether `head` (a frame's first bytes, with a flow) is addressed
    /// to netd's own Ethernet and IP addresses.
    fn for_us(&self, head: &[u8]) -> bool {
        self.local.get().is_some_and(|(mac, ip, ip6)| is_for(head, mac, ip, &ip6))
    }

    /// Whether a frame client `key`'s queue brought, whose first bytes are
    /// `head` in netd's own memory, may reach the engine as a copy: by the
    /// rules of [`Steering::receive`], it is for netd, and for a port that
    /// client owns or nobody has.
    pub fn admits(&self, key: u64, head: &[u8]) -> bool {
        let Some(f) = flow_of(head).filter(|_| self.for_us(head)) else { return false };
        match self.owner(f.proto, f.port) {
            Some(owner) => owner == key,
            None => !self.bound(f.proto, f.port),
        }
    }

    /// The client that owns local port `port`, if one alone does.
    pub fn owner(&self, proto: u8, port: u16) -> Option<u64> {
        match self.ports.borrow().get(&(proto, port)) {
            Some(Owner::One { key, .. }) => Some(*key),
            _ => None,
        }
    }

    /// Whether some socket, of any client, is on `port`.
    fn bound(&self, proto: u8, port: u16) -> bool {
        self.ports.borrow().contains_key(&(proto, port))
    }

    /// Whether spare buffers may wait for the driver; clears the mark.
    pub fn take_spare_changed(&self) -> bool {
        self.spare_changed.replace(false)
    }

    /// Marks that spare buffers may wait (a client the driver has just
    /// mapped).
    pub fn spare_changed(&self) {
        self.spare_changed.set(true);
    }

    /// Whether steering changes wait to be taken.
    pub fn has_updates(&self) -> bool {
        self.local_changed.get() != 0 || !self.updates.borrow().is_empty()
    }

    /// Steering changes for the driver since it was last told.
    pub fn take_updates(&self) -> Vec<SteerChange> {
        let mut out = Vec::new();
        let changed = self.local_changed.replace(0);
        if let Some(local) = self.local.get().filter(|_| changed != 0) {
            out.extend(local_changes(local, changed));
        }
        let updates = std::mem::take(&mut *self.updates.borrow_mut());
        out.extend(updates.into_iter().map(|((proto, port), key)| SteerChange::Port { proto, port, key }));
        out
    }

    /// The whole table, for a driver that just started (which supersedes
    /// every change not sent yet).
    pub fn table(&self) -> Vec<SteerChange> {
        self.updates.borrow_mut().clear();
        // The new driver starts with no port steered: nothing it does can
        // reach a former owner.
        self.unsettled.borrow_mut().clear();
        self.driver_running.set(true);
        self.local_changed.set(0);
        // Its map holds no address: the slots that hold one, and slot 0
        // for the Ethernet and IPv4 addresses.
        let mut out: Vec<SteerChange> = self
            .local
            .get()
            .into_iter()
            .flat_map(|local @ (_, _, six)| {
                let held = six.iter().enumerate().filter(|(_, a)| a.is_some()).fold(1, |m, (slot, _)| m | 1 << slot);
                local_changes(local, held)
            })
            .collect();
        let ports = self.ports.borrow();
        let mut owned: Vec<SteerChange> = ports
            .iter()
            .filter_map(|(&(proto, port), o)| match o {
                Owner::One { key, .. } => Some(SteerChange::Port { proto, port, key: Some(*key) }),
                Owner::Shared { .. } => None,
            })
            .collect();
        owned.sort_unstable_by_key(|c| match c {
            SteerChange::Port { proto, port, .. } => (*proto, *port),
            SteerChange::Local { .. } => (0, 0),
        });
        out.append(&mut owned);
        out
    }

    /// Spare buffers of client `key` to hand to the driver, so that it
    /// holds at most `limit`; they count as the driver's from now on.
    pub fn to_post(&self, key: u64, limit: usize) -> Vec<u32> {
        let mut clients = self.clients.borrow_mut();
        let Some(c) = clients.get_mut(&key) else { return Vec::new() };
        let held = c.buffers.values().filter(|b| b.state == RxState::AtDriver).count();
        let mut out = Vec::new();
        for (&i, b) in c.buffers.iter_mut() {
            if held + out.len() >= limit {
                break;
            }
            if b.state == RxState::Spare {
                b.state = RxState::AtDriver;
                out.push(i);
            }
        }
        out
    }

    /// `n` spare receive buffers of client `key` lent to netd's own queue
    /// reader ([`crate::tap_queues`]) to read frames into, in `out` (index,
    /// view of the whole buffer); they count as the reader's, as buffers
    /// handed to a driver do, across its reads, until
    /// [`Steering::receive`] or [`Steering::give_back`] takes them back. The buffers' size, or `None` (nothing taken) when
    /// the client has fewer than `n` spare.
    pub fn lend(&self, key: u64, n: usize, out: &mut Vec<(u32, SharedBytes)>) -> Option<usize> {
        out.clear();
        let mut clients = self.clients.borrow_mut();
        let c = clients.get_mut(&key)?;
        let spare = c.buffers.iter().filter(|(_, b)| b.state == RxState::Spare).map(|(&i, _)| i);
        let mut taken = [0u32; MAX_PIECES];
        let mut count = 0;
        for (slot, index) in taken.iter_mut().zip(spare).take(n) {
            *slot = index;
            count += 1;
        }
        if count < n || n == 0 {
            return None;
        }
        for &index in &taken[..n] {
            if let Some(view) = c.buffers.get(&index).and_then(|b| b.view.sub(0, b.view.len())) {
                out.push((index, view));
            }
        }
        if out.len() < n {
            out.clear();
            return None;
        }
        for (index, _) in out.iter() {
            if let Some(b) = c.buffers.get_mut(index) {
                b.state = RxState::AtDriver;
            }
        }
        Some(c.size)
    }

    /// The size of client `key`'s receive buffers.
    pub fn buffer_size(&self, key: u64) -> Option<usize> {
        self.clients.borrow().get(&key).map(|c| c.size)
    }

    /// The driver died: what it held is netd's again, and no port is
    /// steered any more.
    pub fn driver_lost(&self) {
        self.unsettled.borrow_mut().clear();
        self.driver_running.set(false);
        for c in self.clients.borrow_mut().values_mut() {
            for b in c.buffers.values_mut() {
                if b.state == RxState::AtDriver {
                    b.state = RxState::Spare;
                }
            }
        }
        self.spare_changed.set(true);
    }

    /// Client `key`'s frame, steered by the driver into `pieces` (buffer,
    /// offset, length) of its receive buffers, in order: for the engine,
    /// or refused. Every buffer named that was at the driver is netd's
    /// again (spare, or held by the engine until it lets go).
    pub fn receive(&self, pool: &BufferPool, key: u64, pieces: &[(u32, u32, u32)]) -> Steered {
        let mut clients = self.clients.borrow_mut();
        let Some(c) = clients.get_mut(&key) else { return Steered::Refused };
        // Every piece's buffer back to netd first; the frame is taken only
        // if each was at the driver (named once) and its extent is sound.
        let mut whole = !pieces.is_empty() && pieces.len() <= MAX_PIECES;
        for &(index, offset, len) in pieces {
            match c.buffers.get_mut(&index) {
                Some(b) if b.state == RxState::AtDriver => {
                    b.state = RxState::Spare;
                    self.spare_changed.set(true);
                    whole &= b.view.sub(offset as usize, len as usize).is_some();
                }
                // Named twice, or never handed out.
                _ => whole = false,
            }
        }
        // The view of piece `k`, of netd's own bookkeeping (checked above).
        let view = |c: &ClientRx, k: usize| {
            let (index, offset, len) = *pieces.get(k)?;
            c.buffers.get(&index)?.view.sub(offset as usize, len as usize)
        };
        let Some(first) = view(c, 0).filter(|_| whole) else { return Steered::Refused };
        // Our own copy of the headers, which lie in the first piece (the
        // driver fills each buffer before the next): the application can
        // rewrite its region under us, so nothing is parsed where it lies.
        let mut head = [0u8; HEAD_LEN];
        let n = first.len().min(HEAD_LEN);
        // SAFETY: copied once into private memory and parsed only there.
        head[..n].copy_from_slice(unsafe { &first.as_slice()[..n] });
        let flow = flow_of(&head[..n]).filter(|_| self.for_us(&head[..n]));
        let owner = flow.and_then(|f| self.owner(f.proto, f.port));
        match (flow, owner) {
            (Some(f), Some(k)) if k == key && f.header_len <= first.len() => {
                let Ok(mut packet) = PacketBuf::from_slice(pool, RX_HEADROOM, &head[..f.header_len]) else {
                    return Steered::Refused;
                };
                // One view a buffer, each holding its buffer alone, so a
                // receive can hand any of them over whole. The buffers are
                // the engine's only once all are in: a frame dropped half
                // built releases serials nobody recorded.
                let mut held = [(0u32, 0u64); MAX_PIECES];
                for (k, &(index, _, _)) in pieces.iter().enumerate() {
                    let Some(v) = view(c, k) else { return Steered::Refused };
                    let skip = if k == 0 { f.header_len } else { 0 };
                    if v.len() == skip {
                        continue;
                    }
                    let Some(payload) = v.sub(skip, v.len() - skip) else { return Steered::Refused };
                    let serial = self.serial.get() + 1;
                    self.serial.set(serial);
                    let hold = SteeredPayload { key, index, serial, released: self.released.clone() };
                    let Some(p) = View::packet(payload, hold, 0, v.len() - skip) else { return Steered::Refused };
                    packet.append(p);
                    if let Some(slot) = held.get_mut(k) {
                        *slot = (index, serial);
                    }
                }
                for &(index, serial) in held.iter().take(pieces.len()).filter(|(_, serial)| *serial != 0) {
                    if let Some(b) = c.buffers.get_mut(&index) {
                        b.state = RxState::InEngine(serial);
                    }
                }
                Steered::InPlace(packet)
            }
            // Another client's port: a rewritten header.
            (Some(f), _) if self.bound(f.proto, f.port) => Steered::Refused,
            (Some(_), _) => {
                // The headers from the copy that was checked, never read
                // again where the application can change them; the rest
                // (payload, its own to spoil) copied from its region.
                let Ok(mut packet) = PacketBuf::from_slice(pool, RX_HEADROOM, &head[..n]) else {
                    return Steered::Refused;
                };
                let mut skip = n;
                for k in 0..pieces.len() {
                    let Some(v) = view(c, k) else { return Steered::Refused };
                    // SAFETY: copied into the engine's own buffers at once.
                    let piece = unsafe { v.as_slice() };
                    let from = skip.min(piece.len());
                    skip -= from;
                    if from < piece.len() {
                        let Ok(rest) = PacketBuf::from_slice(pool, 0, &piece[from..]) else { return Steered::Refused };
                        packet.append(rest);
                    }
                }
                Steered::Copied(packet)
            }
            (None, _) => Steered::Refused,
        }
    }

    /// Buffers of client `key` the driver named in a frame that broke the
    /// rules: netd's spare again, unread.
    pub fn give_back(&self, key: u64, index: u32) {
        if let Some(b) = self.clients.borrow_mut().get_mut(&key).and_then(|c| c.buffers.get_mut(&index)) {
            if b.state == RxState::AtDriver {
                b.state = RxState::Spare;
                self.spare_changed.set(true);
            }
        }
    }

    /// Payloads the engine let go of: their buffers are spare again.
    pub fn settle(&self) {
        let released: Vec<(u64, u32, u64)> = std::mem::take(&mut *self.released.borrow_mut());
        let mut clients = self.clients.borrow_mut();
        for (key, index, serial) in released {
            if let Some(b) = clients.get_mut(&key).and_then(|c| c.buffers.get_mut(&index)) {
                if b.state == RxState::InEngine(serial) {
                    b.state = RxState::Spare;
                    self.spare_changed.set(true);
                }
            }
        }
    }

    /// The receive buffer of client `key` that `len` bytes at `addr` lie in
    /// while the engine holds them: `(buffer, offset)`.
    pub fn locate(&self, key: u64, addr: usize, len: usize) -> Option<(u32, u32)> {
        let clients = self.clients.borrow();
        let c = clients.get(&key)?;
        let at = addr.checked_sub(c.base)?;
        let (index, offset) = (u32::try_from(at / c.size).ok()?, at % c.size);
        let b = c.buffers.get(&index)?;
        (matches!(b.state, RxState::InEngine(_)) && offset + len <= c.size).then_some((index, offset as u32))
    }

    /// Buffer `index` goes to client `key` with a receive's completion;
    /// `posted`, the buffer that receive brought, takes its place.
    pub fn swap(&self, key: u64, index: u32, posted: (u32, SharedBytes)) {
        let mut clients = self.clients.borrow_mut();
        let Some(c) = clients.get_mut(&key) else { return };
        c.buffers.remove(&index);
        c.buffers.insert(posted.0, RxBuffer { view: posted.1, state: RxState::Spare });
        self.spare_changed.set(true);
    }

    /// Receive buffers netd keeps in client `key`'s region.
    pub fn pool_size(&self, key: u64) -> usize {
        self.clients.borrow().get(&key).map_or(0, |c| c.buffers.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0x5e, 0, 0, 2];
    const IP: [u8; 4] = [10, 0, 0, 2];
    const IP6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    /// The slots of `addrs`, set from none.
    fn slots(addrs: &[[u8; 16]]) -> Local6 {
        local6(&[None; MAX_LOCAL6], addrs)
    }

    /// An Ethernet + IPv4 frame to `MAC` and `IP`, of `proto` to local
    /// port `port`, with a
    /// transport header of `l4_len` bytes and `payload` after it.
    fn frame(proto: u8, port: u16, l4_len: usize, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + l4_len];
        f[0..6].copy_from_slice(&MAC);
        f[30..34].copy_from_slice(&IP);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[20] = 0x40; // DF: still whole
        f[23] = proto;
        f[34 + 2..34 + 4].copy_from_slice(&port.to_be_bytes());
        if proto == TCP {
            f[34 + 12] = ((l4_len / 4) as u8) << 4;
        }
        f.extend_from_slice(payload);
        f
    }

    /// An Ethernet + IPv6 frame to `MAC` and `IP6` whose next header is
    /// `next`, of `proto` to local port `port` with a transport header of
    /// `l4_len` bytes right after the fixed header, and `payload`.
    fn frame6(next: u8, proto: u8, port: u16, l4_len: usize, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + l4_len];
        f[0..6].copy_from_slice(&MAC);
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        f[14] = 0x60;
        f[20] = next;
        f[38..54].copy_from_slice(&IP6);
        f[54 + 2..54 + 4].copy_from_slice(&port.to_be_bytes());
        if proto == TCP {
            f[54 + 12] = ((l4_len / 4) as u8) << 4;
        }
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn ipv6_flows_are_read_from_tcp_and_udp_right_after_the_fixed_header_only() {
        let udp = frame6(UDP, UDP, 7000, 8, b"x");
        assert_eq!(flow_of(&udp), Some(Flow { proto: UDP, port: 7000, header_len: 62 }));
        assert_eq!(flow_of(&frame6(TCP, TCP, 80, 32, b"")), Some(Flow { proto: TCP, port: 80, header_len: 86 }));
        // Hop-by-hop options, routing, a fragment header, destination
        // options, ICMPv6.
        for next in [0, 43, 44, 60, 58] {
            assert_eq!(flow_of(&frame6(next, UDP, 7000, 8, b"x")), None, "next header {next}");
        }
        let mut v4 = udp.clone();
        v4[14] = 0x45;
        assert_eq!(flow_of(&v4), None, "not version 6");
        let whole = frame6(TCP, TCP, 80, 60, b"");
        for n in 0..whole.len() {
            assert_eq!(flow_of(&whole[..n]), None, "{n} bytes");
        }
        // Sent to netd's IPv6 address, and only when it has one.
        assert!(is_for(&udp, MAC, IP, &slots(&[IP6])));
        assert!(!is_for(&udp, MAC, IP, &slots(&[])));
        let mut other = IP6;
        other[15] = 3;
        assert!(!is_for(&udp, MAC, IP, &slots(&[other])));
        assert!(!is_for(&udp, [2, 0, 0x5e, 0, 0, 3], IP, &slots(&[IP6])));
        // In any slot, beside others.
        let link_local = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut last = [Some(other); MAX_LOCAL6];
        last[MAX_LOCAL6 - 1] = Some(IP6);
        assert!(is_for(&udp, MAC, IP, &last));
        assert!(is_for(&udp, MAC, IP, &slots(&[link_local, IP6])));
        assert!(!is_for(&udp, MAC, IP, &slots(&[link_local, other])));
        // The IPv4 check is unchanged beside it.
        let four = frame(UDP, 7000, 8, b"x");
        assert!(is_for(&four, MAC, IP, &slots(&[])) && is_for(&four, MAC, IP, &slots(&[IP6])));
        assert!(!is_for(&four, MAC, [10, 0, 0, 3], &slots(&[IP6])));
    }

    #[test]
    fn flows_are_read_from_whole_tcp_and_udp_frames_only() {
        assert_eq!(flow_of(&frame(UDP, 7000, 8, b"x")), Some(Flow { proto: UDP, port: 7000, header_len: 42 }));
        assert_eq!(flow_of(&frame(TCP, 80, 32, b"")), Some(Flow { proto: TCP, port: 80, header_len: 66 }));
        let mut fragment = frame(UDP, 7000, 8, b"x");
        fragment[20] = 0x20; // more fragments
        assert_eq!(flow_of(&fragment), None);
        let mut icmp = frame(UDP, 7000, 8, b"x");
        icmp[23] = 1;
        assert_eq!(flow_of(&icmp), None);
        let mut short_tcp = frame(TCP, 80, 20, b"");
        short_tcp[34 + 12] = 0x10; // data offset 4 bytes
        assert_eq!(flow_of(&short_tcp), None);
        // Headers cut short, junk, nothing: no flow and no panic.
        let whole = frame(TCP, 80, 60, b"");
        for n in 0..whole.len() {
            assert_eq!(flow_of(&whole[..n]), None, "{n} bytes");
        }
        assert_eq!(flow_of(&[0xff; 200]), None);
    }

    #[test]
    fn a_port_is_steered_while_one_client_alone_has_sockets_there() {
        let s = Steering::new(true);
        s.bind(UDP, 7000, 1);
        s.bind(UDP, 7000, 1);
        assert_eq!(s.owner(UDP, 7000), Some(1));
        assert_eq!(s.take_updates(), vec![SteerChange::Port { proto: UDP, port: 7000, key: Some(1) }]);
        s.bind(UDP, 7000, 2);
        assert_eq!(s.owner(UDP, 7000), None);
        assert_eq!(s.take_updates(), vec![SteerChange::Port { proto: UDP, port: 7000, key: None }]);
        for _ in 0..3 {
            s.unbind(UDP, 7000);
        }
        assert!(!s.bound(UDP, 7000));
        assert!(s.take_updates().is_empty());
        s.bind(TCP, 80, 3);
        s.remove_client(3);
        assert_eq!(s.owner(TCP, 80), None);
        assert_eq!(s.take_updates().last(), Some(&SteerChange::Port { proto: TCP, port: 80, key: None }));
        // A client looping bind and close leaves one change per port, the
        // last; a driver that starts gets the table, which supersedes it.
        for _ in 0..1000 {
            s.bind(UDP, 9, 4);
            s.unbind(UDP, 9);
        }
        s.bind(UDP, 9, 4);
        assert_eq!(s.take_updates(), vec![SteerChange::Port { proto: UDP, port: 9, key: Some(4) }]);
        s.set_local(MAC, IP, &[IP6]);
        s.unbind(UDP, 9);
        s.bind(UDP, 10, 5);
        // A fresh driver's map is empty: the slots that hold an address.
        let table = vec![
            SteerChange::Local { mac: MAC, ip: IP, slot: 0, ip6: Some(IP6) },
            SteerChange::Port { proto: UDP, port: 10, key: Some(5) },
        ];
        assert_eq!(s.table(), table);
        assert!(s.take_updates().is_empty());
        // An address more: its slot alone; the same ones: nothing.
        let link_local = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        s.set_local(MAC, IP, &[link_local, IP6]);
        assert_eq!(s.take_updates(), [SteerChange::Local { mac: MAC, ip: IP, slot: 1, ip6: Some(link_local) }]);
        s.set_local(MAC, IP, &[link_local, IP6]);
        assert!(s.take_updates().is_empty());
        // Another IPv4 address: slot 0's message carries it.
        s.set_local(MAC, [10, 0, 0, 9], &[link_local, IP6]);
        assert_eq!(s.take_updates(), [SteerChange::Local { mac: MAC, ip: [10, 0, 0, 9], slot: 0, ip6: Some(IP6) }]);
        let off = Steering::new(false);
        off.bind(UDP, 1, 1);
        assert!(off.take_updates().is_empty());
    }

    #[test]
    fn a_port_that_left_a_client_is_settled_once_the_driver_applied_it() {
        let s = Steering::new(true);
        s.bind(UDP, 53, 1);
        assert!(s.settled(UDP, 53), "a port nobody had is settled");
        let first = s.descriptors(&s.take_updates());
        assert_eq!(first.iter().map(|d| d.id).collect::<Vec<_>>(), vec![1]);
        s.unbind(UDP, 53);
        s.bind(UDP, 53, 2);
        assert!(!s.settled(UDP, 53), "unsteered from client 1, not yet sent");
        s.applied(1);
        assert!(!s.settled(UDP, 53), "a change made before the unsteer says nothing of it");
        // The unsteer and the new owner coalesce into one change: the
        // driver applying it is what settles the port.
        let second = s.descriptors(&s.take_updates());
        assert_eq!(second.len(), 1);
        assert_eq!(SteerChange::of(&second[0]), Some(SteerChange::Port { proto: UDP, port: 53, key: Some(2) }));
        s.applied(99);
        assert!(!s.settled(UDP, 53), "a serial never sent is ignored");
        s.applied(second[0].id);
        assert!(s.settled(UDP, 53));
        // A dead driver steers nothing: every port is settled, and stays
        // so until a new one has the table.
        s.bind(UDP, 53, 3);
        assert!(!s.settled(UDP, 53));
        s.driver_lost();
        assert!(s.settled(UDP, 53));
        s.bind(UDP, 54, 4);
        s.unbind(UDP, 54);
        assert!(s.settled(UDP, 54));
        s.bind(UDP, 54, 4);
        let _ = s.table();
        s.remove_client(4);
        assert!(!s.settled(UDP, 54), "a new driver has the port steered to client 4");
        // Without a driver nothing waits.
        let off = Steering::new(false);
        off.bind(UDP, 7, 1);
        off.unbind(UDP, 7);
        assert!(off.settled(UDP, 7));
    }

    /// A small frame copied out of a client's queue reaches the engine by
    /// the rules a steered one does: for netd, to that client's port or a
    /// port nobody has; never to another client's, never junk.
    /// Each IPv6 address keeps its slot while it stays: the first one
    /// leaving changes its slot alone (the TAP program goes on matching
    /// the others), and the next one to come takes the slot it freed.
    #[test]
    fn an_ipv6_address_keeps_its_slot_while_it_stays() {
        let s = Steering::new(true);
        let addr = |last: u8| {
            let mut a = IP6;
            a[15] = last;
            a
        };
        let local = |slot: u8, ip6: Option<[u8; 16]>| SteerChange::Local { mac: MAC, ip: IP, slot, ip6 };
        s.set_local(MAC, IP, &[addr(1), addr(2), addr(3)]);
        assert_eq!(s.take_updates(), [local(0, Some(addr(1))), local(1, Some(addr(2))), local(2, Some(addr(3)))]);
        s.set_local(MAC, IP, &[addr(2), addr(3)]);
        assert_eq!(s.take_updates(), [local(0, None)], "only the slot of the address that left");
        s.set_local(MAC, IP, &[addr(2), addr(3), addr(4)]);
        assert_eq!(s.take_updates(), [local(0, Some(addr(4)))], "the freed slot, taken again");
        // Past the slots, the first addresses are steered; duplicates
        // take one slot.
        let many: Vec<[u8; 16]> = (10..30).map(addr).collect();
        let slots = local6(&[None; MAX_LOCAL6], &[&many[..1], &many[..]].concat());
        assert_eq!(slots, core::array::from_fn(|i| Some(many[i])));
        // Changes not yet taken add up: a slot changed and changed back
        // is sent, with what it holds.
        s.set_local(MAC, IP, &[addr(3), addr(4)]);
        s.set_local(MAC, IP, &[addr(2), addr(3), addr(4)]);
        assert_eq!(s.take_updates(), [local(1, Some(addr(2)))]);
    }

    #[test]
    fn a_copied_frame_is_admitted_only_for_its_client_s_ports() {
        let s = Steering::new(true);
        s.set_local(MAC, IP, &[]);
        s.bind(UDP, 7000, 1);
        s.bind(UDP, 7001, 2);
        s.bind(TCP, 80, 1);
        s.bind(TCP, 80, 2);
        assert!(s.admits(1, &frame(UDP, 7000, 8, b"x")));
        assert!(!s.admits(1, &frame(UDP, 7001, 8, b"x")), "another client's port");
        assert!(!s.admits(2, &frame(UDP, 7000, 8, b"x")), "another client's port");
        assert!(!s.admits(1, &frame(TCP, 80, 20, b"")), "a port two clients share");
        assert!(s.admits(1, &frame(UDP, 7002, 8, b"x")), "nobody's port: the engine answers it");
        let mut other_ip = frame(UDP, 7000, 8, b"x");
        other_ip[30] ^= 1;
        assert!(!s.admits(1, &other_ip), "not for netd");
        assert!(!s.admits(1, &[0u8; 10]), "junk");
        assert!(!s.admits(1, &[]), "nothing");
    }

    /// netd's own queue reader borrows spare buffers a read at a time: all
    /// it asks for or none, never one lent already, each back once taken
    /// or given back.
    #[test]
    fn a_read_borrows_spare_buffers_all_or_none() {
        let region =
            nagare_ipc::Region::create("nagare-steer-lend-test", nagare_ipc::RegionConfig::pair(8, 8, 2048)).unwrap();
        let mut pool = region.pool().unwrap();
        let indices: Vec<u32> = (0..3).filter_map(|_| pool.alloc()).collect();
        assert_eq!(indices.len(), 3);
        let views: Vec<(u32, SharedBytes)> = indices.iter().map(|&i| (i, pool.shared(i, 0, 2048).unwrap())).collect();
        let s = Steering::new(true);
        s.add_client(1, pool.area_base(), 2048, views);
        let mut lent = Vec::new();
        assert_eq!(s.lend(1, 2, &mut lent), Some(2048));
        assert_eq!(lent.len(), 2);
        assert!(lent.iter().all(|(_, v)| v.len() == 2048));
        let mut more = Vec::new();
        assert_eq!(s.lend(1, 2, &mut more), None, "one spare left, two asked");
        assert!(more.is_empty());
        assert_eq!(s.lend(2, 1, &mut more), None, "no such client");
        assert_eq!(s.lend(1, 1, &mut more), Some(2048));
        assert!(lent.iter().all(|(i, _)| *i != more[0].0), "a buffer lent twice");
        for &(i, _) in &lent {
            s.give_back(1, i);
        }
        assert_eq!(s.lend(1, 2, &mut lent), Some(2048), "given back: spare again");
        assert_eq!(s.lend(1, 0, &mut lent), None);
    }

    #[test]
    fn a_steered_frame_lends_its_payload_and_a_rewritten_port_is_refused() {
        let region =
            nagare_ipc::Region::create("nagare-steer-test", nagare_ipc::RegionConfig::pair(8, 4, 2048)).unwrap();
        let mut pool = region.pool().unwrap();
        assert_eq!((pool.alloc(), pool.alloc()), (Some(0), Some(1)));
        let view = |i: u32| pool.shared(i, 0, 2048).unwrap();
        let engine = BufferPool::new(2048, 8);
        let s = Steering::new(true);
        s.set_local(MAC, IP, &[IP6]);
        s.add_client(1, pool.area_base(), 2048, vec![(0, view(0)), (1, view(1))]);
        s.bind(UDP, 7000, 1);
        s.bind(UDP, 7001, 2);
        let mut posted = s.to_post(1, 8);
        posted.sort_unstable();
        assert_eq!(posted, vec![0, 1]);
        let write = |i: u32, bytes: &[u8]| {
            let mut v = pool.shared(i, RX_HEADROOM as u32, bytes.len() as u32).unwrap();
            assert!(v.write(0, bytes));
        };
        let good = frame(UDP, 7000, 8, b"payload");
        write(0, &good);
        let Steered::InPlace(p) = s.receive(&engine, 1, &[(0, RX_HEADROOM as u32, good.len() as u32)]) else {
            panic!("not in place")
        };
        assert_eq!(p.to_vec(), good);
        assert_eq!(p.slice_count(), 2);
        let payload_at = p.chunks().nth(1).unwrap().as_ptr() as usize;
        assert_eq!(s.locate(1, payload_at, 7), Some((0, (RX_HEADROOM + 42) as u32)));
        // Refused twice over: not the driver's any more.
        assert!(matches!(s.receive(&engine, 1, &[(0, RX_HEADROOM as u32, good.len() as u32)]), Steered::Refused));
        drop(p);
        s.settle();
        assert_eq!(s.locate(1, payload_at, 7), None);
        // Client 1 rewrote the port to client 2's: dropped.
        let forged = frame(UDP, 7001, 8, b"payload");
        write(1, &forged);
        assert!(matches!(s.receive(&engine, 1, &[(1, RX_HEADROOM as u32, forged.len() as u32)]), Steered::Refused));
        // A port nobody has any more: copied, for the engine to answer.
        s.to_post(1, 8);
        let stray = frame(UDP, 9999, 8, b"payload");
        write(1, &stray);
        let Steered::Copied(p) = s.receive(&engine, 1, &[(1, RX_HEADROOM as u32, stray.len() as u32)]) else {
            panic!("not copied")
        };
        assert_eq!(p.to_vec(), stray);
        // A frame for another station (a VNI floods those): refused.
        s.to_post(1, 8);
        let mut elsewhere = frame(UDP, 7000, 8, b"payload");
        elsewhere[33] = 3;
        write(1, &elsewhere);
        assert!(matches!(s.receive(&engine, 1, &[(1, RX_HEADROOM as u32, elsewhere.len() as u32)]), Steered::Refused));
        // Over IPv6, to netd's address: lent in place.
        s.to_post(1, 8);
        let good6 = frame6(UDP, UDP, 7000, 8, b"payload");
        write(1, &good6);
        let Steered::InPlace(p) = s.receive(&engine, 1, &[(1, RX_HEADROOM as u32, good6.len() as u32)]) else {
            panic!("not in place")
        };
        assert_eq!(p.to_vec(), good6);
        assert_eq!(p.slice_count(), 2);
        drop(p);
        s.settle();
        // To another IPv6 address: refused.
        s.to_post(1, 8);
        let mut elsewhere6 = good6.clone();
        elsewhere6[53] = 3;
        write(1, &elsewhere6);
        assert!(matches!(s.receive(&engine, 1, &[(1, RX_HEADROOM as u32, elsewhere6.len() as u32)]), Steered::Refused));
        assert_eq!(s.pool_size(1), 2);
    }

    #[test]
    fn a_frame_over_several_buffers_lends_one_view_a_buffer() {
        let region =
            nagare_ipc::Region::create("nagare-steer-multi", nagare_ipc::RegionConfig::pair(8, 8, 2048)).unwrap();
        let mut pool = region.pool().unwrap();
        for i in 0..3 {
            assert_eq!(pool.alloc(), Some(i));
        }
        let view = |i: u32| pool.shared(i, 0, 2048).unwrap();
        let engine = BufferPool::new(2048, 8);
        let s = Steering::new(true);
        s.set_local(MAC, IP, &[]);
        s.add_client(1, pool.area_base(), 2048, vec![(0, view(0)), (1, view(1)), (2, view(2))]);
        s.bind(TCP, 80, 1);
        let _ = s.to_post(1, 8);
        // 2048 - RX_HEADROOM bytes in the first buffer, 2048 in the second,
        // the rest in the third.
        let payload: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
        let f = frame(TCP, 80, 20, &payload);
        let first = 2048 - RX_HEADROOM;
        let pieces = [(0u32, RX_HEADROOM as u32, first as u32), (1, 0, 2048), (2, 0, (f.len() - first - 2048) as u32)];
        let mut at = 0;
        for &(i, off, len) in &pieces {
            let mut v = pool.shared(i, off, len).unwrap();
            assert!(v.write(0, &f[at..at + len as usize]));
            at += len as usize;
        }
        let Steered::InPlace(p) = s.receive(&engine, 1, &pieces) else { panic!("not in place") };
        assert_eq!(p.to_vec(), f);
        // Headers, then the payload in each of the three buffers.
        assert_eq!(p.slice_count(), 4);
        let second = p.chunks().nth(2).unwrap();
        assert_eq!(s.locate(1, second.as_ptr() as usize, second.len()), Some((1, 0)));
        drop(p);
        s.settle();
        assert_eq!(s.to_post(1, 8).len(), 3, "every buffer is spare again");
        // A buffer named twice: refused, and both pieces spare.
        let twice = [(0u32, RX_HEADROOM as u32, 100u32), (0, 0, 100)];
        assert!(matches!(s.receive(&engine, 1, &twice), Steered::Refused));
        assert_eq!(s.to_post(1, 8), vec![0], "buffer 0 is spare again, 1 and 2 still at the driver");
    }
}
