//! What netd lets each client make the engine hold: every socket is
//! charged the buffer sizes the engine may fill for it (a TCP connection
//! the ceilings its send and receive buffers may grow to, a UDP socket its
//! receive queue limit), to the client that holds it, and the sum over
//! every client to netd as a whole. A buffer's ceiling starts at its size
//! and rises only when autotuning wants more and the client has room
//! ([`Memory::grant_growth`]).
//!
//! A socket several clients hold (one shared across `fork`) is charged in
//! full to each holder, as Linux counts a shared socket in each process
//! that holds it, and once to netd, whose cap is the engine's buffers:
//! its holders' charges move together ([`Memory::adopt`]), and a grant for
//! it fits every holder's room.
//!
//! A shared socket whose holders have all let go while a watched
//! descriptor keeps it open (a program between `fork` and `exec`, which
//! adopts it next) is kept charged under its token: to the client that
//! held it last while that client is here, to netd alone once it has
//! gone, until it is adopted (its adopter pays from then on) or its last
//! descriptor closes ([`Memory::keep_watched`], [`Memory::end_watched`]).
//!
//! Invariant: `charged` is the sum of every socket's charge, a shared
//! socket's once, every kept socket's and every orphan's; a client's
//! account is the sum of its sockets' charges and of the kept sockets and
//! orphans it left while it is here; the holders of a shared socket are
//! charged alike. A grant never takes a client past its budget nor netd
//! past its cap, except by what the engine already holds for a connection
//! accepted with data in it (a buffer never shrinks below what it holds),
//! by the window a connection started at the floor offered in its
//! handshake (at most 64 KiB, honoured until it closes), and by an
//! adoption (a child's inherited socket is never refused).
//!
//! An orphan is a connection its client closed that the engine still
//! keeps for its FIN exchange (FIN-WAIT, CLOSING, LAST-ACK), perhaps with
//! data queued for a peer that does not take it. It stays charged, to the
//! client that left it while that client is here and to netd alone (the
//! unowned account) once it has gone, until the engine lets go of it or
//! it reaches TIME-WAIT (which holds no data). At most `max_orphans`
//! exist: a close past that resets the connection instead (Linux's
//! `tcp_max_orphans`).

use crate::config::NetdConfig;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use nagare_core::Interface;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The smallest send or receive buffer netd gives a connection (and
/// receive queue a UDP socket): below it, a new socket is refused
/// (`ENOBUFS`) rather than made too small to carry a window.
pub(crate) const BUFFER_FLOOR: usize = 16 * 1024;

/// A new connection takes at most one part in this many of the room its
/// client has left.
pub(crate) const CONNECTION_SHARE: usize = 4;

/// New connections start with the buffers they want only while their
/// client is charged at most one part in this many of its budget; later
/// ones start at the floor ([`Memory::grant_connection`]).
pub(crate) const FULL_START_SHARE: usize = 8;

/// Send and receive buffers grow (autotuning) only while their client is charged
/// at most one part in this many of its budget: the rest is for the
/// connections it may still make, which start at the floor past the
/// first ones ([`Memory::grant_connection`]).
pub(crate) const GROWTH_SHARE: usize = 4;

/// Buffers grow only while netd as a whole is charged at most one part
/// in this many of its cap, and each client at most an even part of that
/// among the clients charged: the rest is for new connections, which
/// would otherwise find the cap taken by the growths of those that came
/// first (Linux stops growing buffers under `tcp_mem` pressure the same
/// way), and no client's growth takes what another's could have had.
pub(crate) const GROWTH_CAP_SHARE: usize = 2;

/// The largest receive queue netd gives a UDP socket: as much as a TCP
/// receive buffer (the engine's default, 4 MiB, would let two sockets take
/// a client's whole budget).
pub(crate) const UDP_RECV_QUEUE: usize = 256 * 1024;

/// The part of the engine's buffer pool kept out of the cap, eighths:
/// frames in flight (received, not yet delivered; headers; ARP, ICMP)
/// need buffers that no socket is charged for.
const RESERVE_EIGHTHS: usize = 1;

/// A connection closed by its client that the engine still holds.
struct Orphan {
    handle: TcpHandle,
    bytes: usize,
    /// The client that left it, while that client is here.
    owner: Option<u64>,
}

/// The accounts: netd's cap, each client's budget, every charge.
pub(crate) struct Memory {
    budget: usize,
    cap: usize,
    max_orphans: usize,
    charged: Cell<usize>,
    /// Each client's charge (sockets and orphans), by key.
    clients: RefCell<HashMap<u64, usize>>,
    /// How many of `clients` are charged anything.
    clients_charged: Cell<usize>,
    /// Each socket's charge, by (client key, socket id).
    sockets: RefCell<HashMap<(u64, u32), usize>>,
    /// The sockets several clients hold.
    shared: RefCell<Shared>,
    /// Shared sockets no client holds and a watched descriptor keeps, by
    /// token: who left them (while it is here) and their charge.
    watched: RefCell<HashMap<u64, (Option<u64>, usize)>>,
    orphans: RefCell<Vec<Orphan>>,
}

/// A holder of a socket: its client's key and the socket's id there.
type Holder = (u64, u32);

/// The holders of each socket several clients hold, in groups: one group
/// per socket, each holder in at most one.
#[derive(Default)]
struct Shared {
    group_of: HashMap<Holder, u64>,
    holders: HashMap<u64, Vec<Holder>>,
    next: u64,
}

impl Shared {
    /// The holders of `holder`'s socket, `holder` among them, if it is
    /// shared.
    fn group(&self, holder: Holder) -> Option<&[Holder]> {
        self.group_of.get(&holder).and_then(|g| self.holders.get(g)).map(Vec::as_slice)
    }

    /// `adopter` holds `sharer`'s socket too.
    fn join(&mut self, sharer: Holder, adopter: Holder) {
        let group = match self.group_of.get(&sharer) {
            Some(&g) => g,
            None => {
                self.next += 1;
                self.group_of.insert(sharer, self.next);
                self.holders.insert(self.next, vec![sharer]);
                self.next
            }
        };
        self.group_of.insert(adopter, group);
        self.holders.entry(group).or_default().push(adopter);
    }

    /// `holder` holds its socket no more: whether other holders still do.
    fn leave(&mut self, holder: Holder) -> bool {
        let Some(group) = self.group_of.remove(&holder) else { return false };
        let Some(left) = self.holders.get_mut(&group) else { return false };
        left.retain(|&h| h != holder);
        let others = !left.is_empty();
        if left.len() < 2 {
            // One holder is no group.
            for h in left.drain(..) {
                self.group_of.remove(&h);
            }
            self.holders.remove(&group);
        }
        others
    }
}

/// What the report says about memory as a whole.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MemoryLine {
    pub charged: usize,
    pub cap: usize,
    pub orphans: usize,
    pub max_orphans: usize,
    /// Charged for orphans and kept sockets whose client has gone.
    pub unowned: usize,
}

impl Memory {
    /// The accounts for `config`'s budgets over an engine whose pool holds
    /// `pool_bytes`.
    pub fn new(config: &NetdConfig, pool_bytes: usize) -> Memory {
        Memory {
            budget: config.client_memory,
            cap: (pool_bytes - pool_bytes / 8 * RESERVE_EIGHTHS).min(config.memory_cap.unwrap_or(usize::MAX)),
            max_orphans: config.max_orphans,
            charged: Cell::new(0),
            clients: RefCell::new(HashMap::new()),
            clients_charged: Cell::new(0),
            sockets: RefCell::new(HashMap::new()),
            shared: RefCell::new(Shared::default()),
            watched: RefCell::new(HashMap::new()),
            orphans: RefCell::new(Vec::new()),
        }
    }

    /// A client's budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// What client `key` is charged.
    pub fn client_charged(&self, key: u64) -> usize {
        self.clients.borrow().get(&key).copied().unwrap_or(0)
    }

    /// What socket `id` of client `key` is charged.
    pub fn socket_charged(&self, key: u64, id: u32) -> usize {
        self.sockets.borrow().get(&(key, id)).copied().unwrap_or(0)
    }

    /// The bytes client `key` may still be charged for a new socket.
    pub fn room(&self, key: u64) -> usize {
        self.budget.saturating_sub(self.client_charged(key)).min(self.cap.saturating_sub(self.charged.get()))
    }

    /// The bytes socket `id` of client `key` may be charged, counting what
    /// it is charged now as free: the least any of its holders' budgets
    /// leaves, and netd's cap.
    pub fn room_of(&self, key: u64, id: u32) -> usize {
        let own = self.socket_charged(key, id);
        let budget = self.with_holders(key, id, |holders| {
            holders.iter().map(|&(k, _)| self.budget.saturating_sub(self.client_charged(k).saturating_sub(own))).min()
        });
        let all = self.charged.get().saturating_sub(own);
        budget.unwrap_or(0).min(self.cap.saturating_sub(all))
    }

    /// `f` of every holder of socket `id` of client `key` (that one alone
    /// if it is not shared).
    fn with_holders<R>(&self, key: u64, id: u32, f: impl FnOnce(&[Holder]) -> R) -> R {
        let shared = self.shared.borrow();
        f(shared.group((key, id)).unwrap_or(&[(key, id)]))
    }

    /// Lets go of the finished orphans ([`Memory::settle`]) when client
    /// `key` has less than `bytes` of room: a server of short connections
    /// closes them faster than housekeeping settles them, and the room
    /// they held is what its next sockets need.
    pub fn settle_if_short(&self, iface: &Interface, key: u64, bytes: usize) {
        if self.room(key) < bytes {
            self.settle(iface);
        }
    }

    /// Whether client `key` has room for a new connection at the floor.
    pub fn has_room_for_connection(&self, key: u64) -> bool {
        self.room(key) >= 2 * BUFFER_FLOOR
    }

    /// Send and receive buffer sizes for a new connection of client `key`
    /// that wants `send` and `recv`: what it wants while that keeps the
    /// client charged at most a [`FULL_START_SHARE`] of its budget and
    /// takes at most a [`CONNECTION_SHARE`] of the room left (netd's cap
    /// included), else the floor each, else (less room than two floors)
    /// `None`. A client's first connections start as fast as one alone;
    /// a server's many start small, as Linux's do, and grow with use
    /// ([`Memory::grant_growth`]), so that the budget holds as many
    /// connections as floors fit in it.
    pub fn grant_connection(&self, key: u64, send: usize, recv: usize) -> Option<(usize, usize)> {
        let room = self.room(key);
        if room < 2 * BUFFER_FLOOR {
            return None;
        }
        let want = send.saturating_add(recv);
        let first = self.client_charged(key).saturating_add(want) <= self.budget / FULL_START_SHARE;
        if first && want <= room / CONNECTION_SHARE {
            return Some((send, recv));
        }
        Some((send.min(BUFFER_FLOOR), recv.min(BUFFER_FLOOR)))
    }

    /// A receive queue for a new UDP socket of client `key` that wants
    /// `want`: as much as fits, at least the floor, else `None`.
    pub fn grant_queue(&self, key: u64, want: usize) -> Option<usize> {
        let room = self.room(key);
        (room >= BUFFER_FLOOR).then(|| want.min(room))
    }

    /// A resize of one buffer of socket `id` from `current` to `asked`,
    /// the socket's other buffer being `other`: a shrink is granted, a
    /// growth as far as it fits ([`Memory::room_of`]).
    pub fn grant_resize(&self, key: u64, id: u32, current: usize, other: usize, asked: usize) -> usize {
        if asked <= current {
            return asked;
        }
        let room = self.room_of(key, id).saturating_sub(other);
        asked.min(current.max(room))
    }

    /// A growth of a buffer its engine wants (autotuning) from
    /// `current` toward `wanted`, socket `id`'s other buffer being
    /// `other`: as far as the room its client has left goes, but only
    /// while the client is charged at most a [`GROWTH_SHARE`] of its
    /// budget and netd at most a [`GROWTH_CAP_SHARE`] of its cap, the
    /// client no more than an even part of that, so that growths never
    /// take the room of the connections still to come (the client's, and
    /// every other client's) nor another client's part; never below
    /// `current`. A shared socket's holders are each held to these, the
    /// one charged most binding.
    pub fn grant_growth(&self, key: u64, id: u32, current: usize, other: usize, wanted: usize) -> usize {
        let room = self.room_of(key, id).saturating_sub(other).saturating_sub(current);
        let charged = self
            .with_holders(key, id, |holders| holders.iter().map(|&(k, _)| self.client_charged(k)).max())
            .unwrap_or(0);
        let share = (self.budget / GROWTH_SHARE).saturating_sub(charged);
        let growing = self.cap / GROWTH_CAP_SHARE;
        let pressure = growing.saturating_sub(self.charged.get());
        let even = (growing / self.clients_charged.get().max(1)).saturating_sub(charged);
        current + wanted.saturating_sub(current).min(room).min(share).min(pressure).min(even)
    }

    /// Socket `id` of client `key` is charged `bytes` from now on, and so
    /// is every other holder of it.
    pub fn charge(&self, key: u64, id: u32, bytes: usize) {
        let before = self.with_holders(key, id, |holders| {
            let mut before = 0;
            for &holder in holders {
                // Holders are charged alike: any one's charge is netd's.
                before = self.sockets.borrow_mut().insert(holder, bytes).unwrap_or(0);
                self.shift_client(holder.0, before, bytes);
            }
            before
        });
        self.shift(None, before, bytes);
    }

    /// Socket `adopter` (client key, socket id) is the socket `sharer`
    /// holds: charged as the sharer is, its charges moving with the
    /// sharer's from now on, netd's unchanged. Without a sharer charged
    /// for it (every holder let go, and a watched descriptor kept it for
    /// the program that adopts it now), it is charged `bytes` as a socket
    /// of its own.
    pub fn adopt(&self, sharer: Option<(u64, u32)>, adopter: (u64, u32), bytes: usize) {
        let charged = sharer.and_then(|h| self.sockets.borrow().get(&h).copied().map(|b| (h, b)));
        let Some((sharer, bytes)) = charged else {
            self.charge(adopter.0, adopter.1, bytes);
            return;
        };
        self.shared.borrow_mut().join(sharer, adopter);
        let before = self.sockets.borrow_mut().insert(adopter, bytes).unwrap_or(0);
        self.shift_client(adopter.0, before, bytes);
    }

    /// Socket `id` of client `key` has gone: its charge comes back, to
    /// netd too unless another client still holds the socket.
    pub fn release(&self, key: u64, id: u32) {
        let others = self.shared.borrow_mut().leave((key, id));
        if let Some(bytes) = self.sockets.borrow_mut().remove(&(key, id)) {
            self.shift_client(key, bytes, 0);
            if !others {
                self.shift(None, bytes, 0);
            }
        }
    }

    /// Every socket of client `key` has gone: charged ones, and any it
    /// holds in a group.
    pub fn release_all(&self, key: u64) {
        let mut ids: Vec<u32> = self.sockets.borrow().keys().filter(|&&(k, _)| k == key).map(|&(_, id)| id).collect();
        ids.extend(self.shared.borrow().group_of.keys().filter(|&&(k, _)| k == key).map(|&(_, id)| id));
        for id in ids {
            self.release(key, id);
        }
    }

    /// Moves an account from `from` bytes to `to`: a client's, with
    /// `key`, and netd's.
    fn shift(&self, key: Option<u64>, from: usize, to: usize) {
        if let Some(key) = key {
            self.shift_client(key, from, to);
        }
        self.charged.set((self.charged.get() + to).saturating_sub(from));
    }

    /// Moves client `key`'s account from `from` bytes to `to`.
    fn shift_client(&self, key: u64, from: usize, to: usize) {
        let mut clients = self.clients.borrow_mut();
        let c = clients.entry(key).or_insert(0);
        let was = *c;
        *c = (*c + to).saturating_sub(from);
        match (was > 0, *c > 0) {
            (false, true) => self.clients_charged.set(self.clients_charged.get() + 1),
            (true, false) => self.clients_charged.set(self.clients_charged.get().saturating_sub(1)),
            _ => {}
        }
    }

    /// Shared socket `token`, whose last holder client `key` just let it
    /// go, stays open for a watched descriptor: it stays charged `bytes`,
    /// to that client while it is here.
    pub fn keep_watched(&self, token: u64, key: u64, bytes: usize) {
        let before = self.watched.borrow_mut().insert(token, (Some(key), bytes));
        if let Some((owner, b)) = before {
            self.shift(owner, b, 0);
        }
        self.shift(Some(key), 0, bytes);
    }

    /// Watched socket `token` is adopted, or closed with its last descriptor:
    /// its charge comes back. Who had left it and what it was charged.
    pub fn end_watched(&self, token: u64) -> Option<(Option<u64>, usize)> {
        let (owner, bytes) = self.watched.borrow_mut().remove(&token)?;
        self.shift(owner, bytes, 0);
        Some((owner, bytes))
    }

    /// Whether the orphans netd keeps are at the cap, after letting go of
    /// those the engine no longer keeps.
    pub fn orphans_full(&self, iface: &Interface) -> bool {
        if self.orphans.borrow().len() < self.max_orphans {
            return false;
        }
        self.settle(iface);
        self.orphans.borrow().len() >= self.max_orphans
    }

    /// Connection `handle`, just closed by client `owner` (`None`: by
    /// netd, for a client gone), stays charged `bytes` while the engine
    /// keeps it (and not past TIME-WAIT).
    pub fn keep_orphan(&self, iface: &Interface, owner: Option<u64>, handle: TcpHandle, bytes: usize) {
        if lingers(iface, handle) {
            self.orphans.borrow_mut().push(Orphan { handle, bytes, owner });
            self.shift(owner, 0, bytes);
        }
    }

    /// Whether any closed connection is still charged (an orphan).
    pub fn has_orphans(&self) -> bool {
        !self.orphans.borrow().is_empty()
    }

    /// Lets go of the orphans the engine no longer keeps, or that reached
    /// TIME-WAIT.
    pub fn settle(&self, iface: &Interface) {
        let mut gone = Vec::new();
        self.orphans.borrow_mut().retain(|o| {
            let keep = lingers(iface, o.handle);
            if !keep {
                gone.push((o.owner, o.bytes));
            }
            keep
        });
        for (owner, bytes) in gone {
            self.shift(owner, bytes, 0);
        }
    }

    /// Client `key` has gone (its sockets released): its orphans and the
    /// sockets it left kept are charged to netd alone from now on.
    pub fn client_gone(&self, key: u64) {
        for o in self.orphans.borrow_mut().iter_mut().filter(|o| o.owner == Some(key)) {
            o.owner = None;
        }
        for (owner, _) in self.watched.borrow_mut().values_mut().filter(|(o, _)| *o == Some(key)) {
            *owner = None;
        }
        if self.clients.borrow_mut().remove(&key).is_some_and(|c| c > 0) {
            self.clients_charged.set(self.clients_charged.get().saturating_sub(1));
        }
    }

    /// The figures for the report.
    pub fn line(&self) -> MemoryLine {
        let orphans = self.orphans.borrow();
        MemoryLine {
            charged: self.charged.get(),
            cap: self.cap,
            orphans: orphans.len(),
            max_orphans: self.max_orphans,
            unowned: orphans.iter().filter(|o| o.owner.is_none()).map(|o| o.bytes).sum::<usize>()
                + self.watched.borrow().values().filter(|(o, _)| o.is_none()).map(|(_, b)| b).sum::<usize>(),
        }
    }
}

/// Whether the engine keeps closed connection `h` with buffers to charge:
/// held, and neither closed nor waiting only for the peer (FIN-WAIT-2,
/// where everything it sent is acknowledged and data that came would be
/// answered with a reset, and TIME-WAIT hold no data).
fn lingers(iface: &Interface, h: TcpHandle) -> bool {
    iface.tcp_ref().released(h).is_some_and(|k| !matches!(k.state(), State::FinWait2 | State::TimeWait | State::Closed))
}

/// What a connection's buffers may come to hold: the most its send and
/// receive buffers may grow to without another grant (their ceilings).
pub(crate) fn connection_charge(iface: &Interface, h: TcpHandle) -> usize {
    iface.tcp_ref().connection(h).map_or(0, |k| k.send_buffer_ceiling() + k.recv_buffer_ceiling())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(budget: usize, pool: usize) -> Memory {
        Memory::new(&NetdConfig { client_memory: budget, ..NetdConfig::default() }, pool)
    }

    #[test]
    fn a_connection_gets_what_it_wants_then_the_floor_then_nothing() {
        // An eighth of the budget is 1 MiB: two connections at full size.
        let m = memory(8 << 20, 64 << 20);
        assert_eq!(m.grant_connection(1, 262144, 262144), Some((262144, 262144)));
        m.charge(1, 1, 524288);
        assert_eq!(m.grant_connection(1, 262144, 262144), Some((262144, 262144)));
        m.charge(1, 2, 524288);
        // Past the eighth: the floor each, as long as two floors fit.
        assert_eq!(m.grant_connection(1, 262144, 262144), Some((16384, 16384)));
        assert_eq!(m.grant_connection(1, 8192, 262144), Some((8192, 16384)), "never more than it wants");
        m.charge(1, 3, (8 << 20) - (1 << 20) - 32768);
        assert_eq!(m.grant_connection(1, 262144, 262144), Some((16384, 16384)));
        m.charge(1, 4, 16384);
        assert_eq!(m.grant_connection(1, 262144, 262144), None);
        // Another client has its own budget.
        assert_eq!(m.grant_connection(2, 262144, 262144), Some((262144, 262144)));
        // Room for full buffers comes back with the charges.
        m.release(1, 3);
        m.release(1, 4);
        assert_eq!(m.grant_connection(1, 262144, 262144), Some((16384, 16384)), "still past the eighth");
        m.release(1, 2);
        assert_eq!(m.grant_connection(1, 262144, 262144), Some((262144, 262144)));
        m.release_all(1);
        assert_eq!((m.client_charged(1), m.line().charged), (0, 0));
    }

    #[test]
    fn netd_s_room_holds_a_first_connection_to_the_floor_too() {
        // 8 MiB of pool: 7 MiB to charge, 1.25 MiB left once 5.75 are.
        let m = memory(64 << 20, 8 << 20);
        m.charge(1, 1, 5 << 20 | 3 << 18);
        assert_eq!(m.grant_connection(2, 262144, 262144), Some((16384, 16384)), "a quarter of the room is 320 KiB");
        assert_eq!(m.grant_connection(2, 65536, 65536), Some((65536, 65536)));
    }

    #[test]
    fn the_cap_binds_every_client_together() {
        // 8 MiB of pool: 7 MiB to charge.
        let m = memory(64 << 20, 8 << 20);
        m.charge(1, 1, 7 << 20);
        assert_eq!(m.grant_connection(2, 262144, 262144), None);
        assert_eq!(m.grant_queue(2, 1), None);
        m.release(1, 1);
        assert_eq!(m.grant_queue(2, 1000), Some(1000));
    }

    #[test]
    fn a_cap_given_below_the_pools_binds_instead() {
        let config = NetdConfig { memory_cap: Some(1 << 20), ..NetdConfig::default() };
        let m = Memory::new(&config, 64 << 20);
        assert_eq!(m.line().cap, 1 << 20);
        m.charge(1, 1, (1 << 20) - 20_000);
        assert_eq!(m.grant_queue(2, 30_000), Some(20_000), "what is left under the cap");
        m.charge(1, 1, (1 << 20) - 10_000);
        assert_eq!(m.grant_queue(2, 30_000), None, "under the floor, whatever the budget");
        // Above the pool's own, the pool's binds.
        let config = NetdConfig { memory_cap: Some(1 << 30), ..NetdConfig::default() };
        assert_eq!(Memory::new(&config, 8 << 20).line().cap, 7 << 20);
    }

    #[test]
    fn a_resize_gets_what_fits_and_never_less_than_it_had() {
        let m = memory(1 << 20, 64 << 20);
        m.charge(1, 1, 524288);
        // 512 KiB room besides this socket's own 256 KiB of send buffer.
        assert_eq!(m.grant_resize(1, 1, 262144, 262144, 4 << 20), 786432);
        assert_eq!(m.grant_resize(1, 1, 262144, 262144, 1000), 1000);
        m.charge(1, 2, 1 << 20);
        assert_eq!(m.grant_resize(1, 1, 262144, 262144, 4 << 20), 262144);
    }

    #[test]
    fn a_shared_socket_is_charged_in_full_to_each_holder_and_once_to_netd() {
        let m = memory(8 << 20, 64 << 20);
        m.charge(1, 1, 524288);
        m.adopt(Some((1, 1)), (2, 7), 0);
        m.adopt(Some((2, 7)), (3, 4), 0);
        assert_eq!((m.client_charged(1), m.client_charged(2), m.client_charged(3)), (524288, 524288, 524288));
        assert_eq!(m.line().charged, 524288);
        // A charge of one holder is a charge of all.
        m.charge(3, 4, 1 << 20);
        assert_eq!((m.client_charged(1), m.client_charged(2), m.line().charged), (1 << 20, 1 << 20, 1 << 20));
        // The sharer lets go: the others hold it still, and netd is charged it.
        m.release(1, 1);
        assert_eq!((m.client_charged(1), m.client_charged(2), m.line().charged), (0, 1 << 20, 1 << 20));
        m.release_all(2);
        assert_eq!((m.client_charged(3), m.line().charged), (1 << 20, 1 << 20));
        // The last holder alone, its charges are its own again.
        m.charge(3, 4, 65536);
        assert_eq!((m.client_charged(2), m.client_charged(3), m.line().charged), (0, 65536, 65536));
        m.release(3, 4);
        assert_eq!(m.line().charged, 0);
    }

    /// One step of the accounts' life: a socket made and charged, charged
    /// again, adopted by another client (from a holder, or from one that
    /// holds it no more), released, let go by its last holder while a
    /// watched descriptor keeps it, adopted from there or ended there, or
    /// a client gone (its sockets closed, or those it holds alone kept for
    /// watched descriptors).
    #[derive(Clone, Debug)]
    enum Step {
        Open(u64, u32, usize),
        Charge(u64, u32, usize),
        Adopt((u64, u32), (u64, u32), usize),
        Release(u64, u32),
        LeaveWatched(u64, u32),
        AdoptWatched((u64, u32)),
        EndWatched,
        Gone(u64),
        GoneWatched(u64),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let holder = || (1u64..4, 1u32..5);
        prop_oneof![
            (holder(), 0usize..1 << 20).prop_map(|((k, i), b)| Step::Open(k, i, b)),
            (holder(), 0usize..1 << 20).prop_map(|((k, i), b)| Step::Charge(k, i, b)),
            (holder(), holder(), 0usize..1 << 20).prop_map(|(a, b, n)| Step::Adopt(a, b, n)),
            holder().prop_map(|(k, i)| Step::Release(k, i)),
            holder().prop_map(|(k, i)| Step::LeaveWatched(k, i)),
            holder().prop_map(Step::AdoptWatched),
            Just(Step::EndWatched),
            (1u64..4).prop_map(Step::Gone),
            (1u64..4).prop_map(Step::GoneWatched),
        ]
    }

    proptest::proptest! {
        /// Whatever the steps, each client is charged the sum of the
        /// sockets it holds, a shared one's in full, and of those it left
        /// kept, and netd the sum over the sockets held or kept, each once.
        #[test]
        fn every_holder_is_charged_its_sockets_and_netd_each_socket_once(steps in proptest::collection::vec(step(), 1..60)) {
            let m = memory(64 << 20, 1 << 30);
            // The model: each holder's socket, each socket's charge, and
            // the sockets kept for a watched descriptor (by socket, the
            // token) with who left them.
            let mut held: HashMap<(u64, u32), usize> = HashMap::new();
            let mut charge: HashMap<usize, usize> = HashMap::new();
            let mut kept: std::collections::BTreeMap<usize, Option<u64>> = std::collections::BTreeMap::new();
            let mut sockets = 0;
            for s in steps {
                match s {
                    Step::Open(k, i, b) if !held.contains_key(&(k, i)) => {
                        sockets += 1;
                        held.insert((k, i), sockets);
                        charge.insert(sockets, b);
                        m.charge(k, i, b);
                    }
                    Step::Charge(k, i, b) if held.contains_key(&(k, i)) => {
                        charge.insert(held[&(k, i)], b);
                        m.charge(k, i, b);
                    }
                    Step::Adopt(a, b, n) if !held.contains_key(&b) => {
                        // A sharer that holds it no more: the adopter's
                        // is a socket charged on its own.
                        let socket = held.get(&a).copied().unwrap_or_else(|| {
                            sockets += 1;
                            charge.insert(sockets, n);
                            sockets
                        });
                        held.insert(b, socket);
                        m.adopt(Some(a), b, n);
                    }
                    Step::Release(k, i) if held.contains_key(&(k, i)) => {
                        held.remove(&(k, i));
                        m.release(k, i);
                    }
                    Step::LeaveWatched(k, i) if held.contains_key(&(k, i)) => {
                        let socket = held[&(k, i)];
                        if held.values().filter(|&&x| x == socket).count() == 1 {
                            held.remove(&(k, i));
                            kept.insert(socket, Some(k));
                            let bytes = m.socket_charged(k, i);
                            m.release(k, i);
                            m.keep_watched(socket as u64, k, bytes);
                        }
                    }
                    Step::AdoptWatched(b) if !held.contains_key(&b) => {
                        if let Some((&socket, _)) = kept.iter().next() {
                            kept.remove(&socket);
                            held.insert(b, socket);
                            proptest::prop_assert!(m.end_watched(socket as u64).is_some());
                            m.adopt(None, b, charge[&socket]);
                        }
                    }
                    Step::EndWatched => {
                        if let Some((&socket, _)) = kept.iter().next() {
                            kept.remove(&socket);
                            proptest::prop_assert!(m.end_watched(socket as u64).is_some());
                        }
                    }
                    Step::GoneWatched(k) => {
                        // As a departure does: each socket is let go, and
                        // one it held alone is kept, charged to it.
                        let mine: Vec<((u64, u32), usize)> =
                            held.iter().filter(|(h, _)| h.0 == k).map(|(&h, &s)| (h, s)).collect();
                        let charges: Vec<usize> = mine.iter().map(|&((_, i), _)| m.socket_charged(k, i)).collect();
                        m.release_all(k);
                        for (((_, i), socket), bytes) in mine.into_iter().zip(charges) {
                            held.remove(&(k, i));
                            if !held.values().any(|&x| x == socket) {
                                kept.insert(socket, None);
                                m.keep_watched(socket as u64, k, bytes);
                            }
                        }
                        for owner in kept.values_mut().filter(|o| **o == Some(k)) {
                            *owner = None;
                        }
                        m.client_gone(k);
                    }
                    Step::Gone(k) => {
                        held.retain(|&(c, _), _| c != k);
                        for owner in kept.values_mut().filter(|o| **o == Some(k)) {
                            *owner = None;
                        }
                        m.release_all(k);
                        m.client_gone(k);
                    }
                    _ => {}
                }
                for k in 1..4 {
                    let holds: usize = held.iter().filter(|(h, _)| h.0 == k).map(|(_, s)| charge[s]).sum();
                    let left: usize = kept.iter().filter(|(_, o)| **o == Some(k)).map(|(s, _)| charge[s]).sum();
                    proptest::prop_assert_eq!(m.client_charged(k), holds + left, "client {}", k);
                }
                let mut live: std::collections::HashSet<usize> = held.values().copied().collect();
                live.extend(kept.keys().copied());
                proptest::prop_assert_eq!(m.line().charged, live.iter().map(|s| charge[s]).sum::<usize>());
                let unowned: usize = kept.iter().filter(|(_, o)| o.is_none()).map(|(s, _)| charge[s]).sum();
                proptest::prop_assert_eq!(m.line().unowned, unowned);
            }
        }
    }

    #[test]
    fn a_grant_for_a_shared_socket_fits_every_holders_room() {
        let m = memory(1 << 20, 64 << 20);
        m.charge(1, 1, 131072);
        m.adopt(Some((1, 1)), (2, 1), 0);
        // The adopter holds 768 KiB besides: 128 KiB of room is left to it.
        m.charge(2, 2, 786432);
        assert_eq!(m.room_of(1, 1), 262144);
        assert_eq!(m.grant_resize(1, 1, 65536, 65536, 4 << 20), 196608);
        assert_eq!(m.grant_growth(1, 1, 65536, 65536, 4 << 20), 65536, "the adopter is past a quarter of its budget");
        m.release(2, 2);
        assert_eq!(m.grant_resize(1, 1, 65536, 65536, 4 << 20), (1 << 20) - 65536);
    }

    #[test]
    fn a_growth_takes_a_share_of_the_budget_and_leaves_the_rest() {
        // Charged 512 KiB of an 8 MiB budget: it may grow until the
        // client is charged a quarter of it.
        let m = memory(8 << 20, 64 << 20);
        m.charge(1, 1, 524288);
        assert_eq!(m.grant_growth(1, 1, 262144, 262144, 4 << 20), 262144 + (2 << 20) - 524288);
        assert_eq!(m.grant_growth(1, 1, 262144, 262144, 300_000), 300_000, "what it wants, when that is less");
        m.charge(1, 1, 2 << 20);
        assert_eq!(m.grant_growth(1, 1, (2 << 20) - 262144, 262144, 64 << 20), (2 << 20) - 262144, "at a quarter");
        assert!(m.room(1) >= 6 << 20, "the rest is the next connections'");
        // Another connection's charge counts too.
        m.charge(1, 1, 524288);
        m.charge(1, 2, 1 << 20);
        assert_eq!(m.grant_growth(1, 1, 262144, 262144, 64 << 20), 262144 + (1 << 20) - 524288);
        // A small budget's room is what holds a growth back.
        let m = memory(1 << 20, 64 << 20);
        m.charge(1, 1, 1 << 20);
        assert_eq!(m.grant_growth(1, 1, 262144, 786432, 4 << 20), 262144);
    }

    #[test]
    fn growths_stop_at_half_the_cap_and_leave_the_rest_to_new_connections() {
        // 8 MiB of pool: 7 MiB to charge, growths up to 3.5 MiB in all.
        let m = memory(64 << 20, 8 << 20);
        for client in 1..=6 {
            m.charge(client, 1, 524288);
        }
        // 3 MiB charged: half a MiB of growth is left, whoever asks.
        assert_eq!(m.grant_growth(7, 1, 262144, 262144, 4 << 20), 262144 + 524288);
        m.charge(7, 1, 262144 + 524288 + 262144);
        assert_eq!(m.grant_growth(1, 1, 262144, 262144, 4 << 20), 262144, "past half the cap, no growth");
        // The other half is still there for new connections, every client's.
        assert_eq!(m.grant_connection(8, 262144, 262144), Some((262144, 262144)));
        assert!(m.room(8) >= 3 << 20);
    }

    #[test]
    fn a_client_grows_no_further_than_an_even_part_of_the_growth_half() {
        // 64 MiB of pool: 56 MiB to charge, growths up to 28 MiB in all,
        // 7 MiB for each of four clients charged.
        let m = memory(64 << 20, 64 << 20);
        for client in 1..=4 {
            m.charge(client, 1, 524288);
        }
        let grown = m.grant_growth(1, 1, 262144, 262144, 64 << 20);
        assert_eq!(grown, 262144 + (7 << 20) - 524288);
        m.charge(1, 1, grown + 262144);
        assert_eq!(m.grant_growth(1, 1, grown, 262144, 64 << 20), grown, "at its part");
        // A fifth client makes the parts smaller: 5.6 MiB each.
        m.charge(5, 1, 524288);
        assert_eq!(m.grant_growth(2, 1, 262144, 262144, 64 << 20), 262144 + (28 << 20) / 5 - 524288);
        // Gone, it leaves the parts as they were.
        m.release_all(5);
        m.client_gone(5);
        assert_eq!(m.grant_growth(2, 1, 262144, 262144, 64 << 20), 262144 + (7 << 20) - 524288);
    }
}
