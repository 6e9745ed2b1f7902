//! The TCP sockets of an interface: connections found by a keyed hash of
//! their four-tuple (never by a scan), listeners by family and port, and
//! one timer heap ordered by deadline, so the cost of `poll` follows the
//! number of timers due, not the number of connections. A connection's
//! addresses are both IPv4 or both IPv6; one that an IPv6 listener took
//! over IPv4 (dual stack) has IPv4 addresses.

use super::config::TcpConfig;
use super::connection::{Connection, State};
use super::syn_guard::{SynFilter, SynGuard};
use crate::buf::PacketBuf;
use crate::capabilities::Capabilities;
use crate::config::Secrets;
use crate::hash::{KeyedState, SipKey};
use crate::iface::Error;
use crate::socket::{SocketHandle, SocketTable, EPHEMERAL_PORTS};
use crate::time::Instant;
use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Reverse;
use core::net::{IpAddr, SocketAddr};
use hashbrown::HashMap;
use nagare_wire::{TcpRepr, IPV4_HEADER_LEN, IPV6_HEADER_LEN};

/// A connection's four-tuple (local, remote), the key connections are
/// found by. Its hash takes both ends in one fixed-length write (the
/// addresses as IPv6 ones, an IPv4 one mapped, then the ports), as cheap
/// for one family as for the other; connections of two families never
/// meet under one key, since the engine keeps an IPv4-mapped address
/// IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FourTuple(pub(super) SocketAddr, pub(super) SocketAddr);

impl core::hash::Hash for FourTuple {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        let bits = |a: SocketAddr| match a.ip() {
            IpAddr::V4(ip) => ip.to_ipv6_mapped().to_bits(),
            IpAddr::V6(ip) => ip.to_bits(),
        };
        let mut bytes = [0u8; 36];
        bytes[..16].copy_from_slice(&bits(self.0).to_le_bytes());
        bytes[16..32].copy_from_slice(&bits(self.1).to_le_bytes());
        bytes[32..34].copy_from_slice(&self.0.port().to_le_bytes());
        bytes[34..].copy_from_slice(&self.1.port().to_le_bytes());
        h.write(&bytes);
    }
}

/// Names a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpHandle(pub(super) SocketHandle);

/// Names a listening TCP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpListenerHandle(pub(super) SocketHandle);

/// A TCP socket of either kind (what a readiness event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpSocket {
    /// A connection.
    Connection(TcpHandle),
    /// A listener.
    Listener(TcpListenerHandle),
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) conn: Connection,
    /// The listener that created it, until the application accepts it.
    pub(super) listener: Option<TcpListenerHandle>,
    /// The application let go of the handle; the entry goes when the
    /// connection closes.
    pub(super) released: bool,
    /// The deadline of this entry's live timer in the heap.
    pub(super) scheduled: Option<Instant>,
    /// Waiting in `TcpSockets::deferred` for the end of a receive batch.
    pub(super) run_deferred: bool,
    /// Listed in `TcpSockets::events`.
    pub(super) event_pending: bool,
}

#[derive(Debug)]
pub(super) struct Listener {
    pub(super) local: SocketAddr,
    /// An IPv6 listener on `::` that takes IPv6 connections only (as
    /// `IPV6_V6ONLY`); without it, it takes IPv4 ones to its port too.
    pub(super) v6_only: bool,
    pub(super) backlog: usize,
    /// Connections in SYN-RECEIVED.
    pub(super) half_open: usize,
    pub(super) accept_queue: VecDeque<TcpHandle>,
    pub(super) config: TcpConfig,
    /// Until when cookie ACKs are worth checking (cookies were sent lately).
    pub(super) cookies_until: Option<Instant>,
    /// Listed in `TcpSockets::events`.
    pub(super) event_pending: bool,
}

/// Every TCP socket of an interface.
#[derive(Debug)]
pub struct TcpSockets {
    pub(super) conns: SocketTable<Entry>,
    pub(super) by_tuple: HashMap<FourTuple, TcpHandle, KeyedState>,
    pub(super) listeners: SocketTable<Listener>,
    /// IPv4 listeners by port.
    pub(super) by_port: HashMap<u16, TcpListenerHandle>,
    /// IPv6 listeners by port.
    pub(super) by_port6: HashMap<u16, TcpListenerHandle>,
    pub(super) timers: BinaryHeap<Reverse<(Instant, SocketHandle)>>,
    pub(super) key: SipKey,
    /// Settings new sockets start with.
    pub(super) defaults: TcpConfig,
    next_ephemeral: u16,
    /// Reused buffer for segments a connection hands out.
    pub(super) outbox: Vec<(TcpRepr, PacketBuf)>,
    /// Reused list of connections whose timers are due.
    pub(super) due: Vec<TcpHandle>,
    /// Inside a receive batch: connections send once, at its end.
    pub(crate) deferring: bool,
    /// Connections that received segments in the current batch.
    pub(super) deferred: Vec<TcpHandle>,
    /// Sockets whose readiness may have changed since events were last
    /// taken; each at most once (their `event_pending` flag).
    pub(super) events: Vec<TcpSocket>,
    /// What a SYN flood may cost.
    pub(super) syn_guard: SynGuard,
    /// Connections held at most (every state counts): a SYN that would
    /// make one more is dropped.
    pub(super) max_connections: usize,
}

impl TcpSockets {
    /// An empty set; `secrets` key the hashes and `seed` picks where the
    /// search for ephemeral ports starts.
    pub(crate) fn new(seed: u64, secrets: &Secrets) -> Self {
        let span = u64::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        TcpSockets {
            conns: SocketTable::default(),
            by_tuple: HashMap::with_hasher(KeyedState(secrets.table)),
            listeners: SocketTable::default(),
            by_port: HashMap::new(),
            by_port6: HashMap::new(),
            timers: BinaryHeap::new(),
            key: secrets.isn,
            defaults: TcpConfig::default(),
            next_ephemeral: EPHEMERAL_PORTS.start() + ((seed >> 7) % span) as u16,
            outbox: Vec::new(),
            due: Vec::new(),
            deferring: false,
            deferred: Vec::new(),
            events: Vec::new(),
            syn_guard: SynGuard::new(secrets.table),
            max_connections: usize::MAX,
        }
    }

    /// When the earliest timer is due.
    pub(crate) fn poll_at(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|Reverse((t, _))| *t);
        [timer, self.syn_guard.poll_at()].into_iter().flatten().min()
    }

    /// The SYN filter the engine asks a device to apply before it reads
    /// (see [`syn_guard`](super::syn_guard)); give each generation to the
    /// device once and say whether it took it
    /// ([`Tcp::set_syn_filter_applied`](super::Tcp::set_syn_filter_applied)).
    pub fn syn_filter(&self) -> &SynFilter {
        self.syn_guard.filter()
    }

    /// Lets the SYN guard close its measuring window.
    pub(crate) fn poll_syn_guard(&mut self, now: Instant) {
        self.syn_guard.poll(now);
    }

    /// How many times the SYN guard has engaged.
    pub fn syn_guard_engagements(&self) -> u64 {
        self.syn_guard.engaged_count()
    }

    /// TCP connections held, in any state (TIME-WAIT included).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Settings new sockets start with.
    pub fn defaults(&self) -> &TcpConfig {
        &self.defaults
    }

    /// Connections held at most ([`Tcp::set_max_connections`](super::Tcp::set_max_connections)).
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Whether a new connection would take the count past
    /// [`max_connections`](Self::max_connections).
    pub fn at_connection_limit(&self) -> bool {
        self.conns.len() >= self.max_connections
    }

    /// The connection behind a handle the application has let go of
    /// (closed, not reset) while the engine still holds it: finishing its
    /// FIN exchange, sending what was queued, or in TIME-WAIT.
    pub fn released(&self, h: TcpHandle) -> Option<&Connection> {
        self.conns.get(h.0).filter(|e| e.released).map(|e| &e.conn)
    }

    /// The address listener `l` listens on, if it is open.
    pub fn listener_local(&self, l: TcpListenerHandle) -> Option<SocketAddr> {
        self.listeners.get(l.0).map(|x| x.local)
    }

    /// The connection behind a handle, for its state and counters.
    pub fn connection(&self, h: TcpHandle) -> Option<&Connection> {
        self.conns.get(h.0).filter(|e| !e.released).map(|e| &e.conn)
    }

    /// The connection's state.
    pub fn state(&self, h: TcpHandle) -> Result<State, Error> {
        self.connection(h).map(Connection::state).ok_or(Error::InvalidHandle)
    }

    /// The entry of a connection the application holds.
    pub(super) fn entry_mut(&mut self, h: TcpHandle) -> Result<&mut Entry, Error> {
        match self.conns.get_mut(h.0) {
            Some(entry) if !entry.released => Ok(entry),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// A new socket's settings: the defaults, and what the device
    /// offloads.
    pub(super) fn socket_config(&self, caps: &Capabilities) -> TcpConfig {
        let mut config = self.defaults.clone();
        let offloads = caps.tx_offloads;
        config.segmentation_offload = if offloads.checksum && offloads.tcp_segmentation > caps.mtu {
            // Room for the largest IP (IPv6's) and TCP headers.
            offloads.tcp_segmentation.min(usize::from(u16::MAX)).saturating_sub(IPV6_HEADER_LEN + 60)
        } else {
            0
        };
        config
    }

    /// The offset of a four-tuple's timestamp clock: a keyed hash without
    /// time in it, so every incarnation of the four-tuple shares one clock.
    pub(super) fn timestamp_offset(&self, local: SocketAddr, remote: SocketAddr) -> u32 {
        use core::hash::Hasher;
        let mut h = four_tuple_hasher(self.key, local, remote);
        h.write(b"tsoff");
        (h.finish() >> 32) as u32
    }

    /// Whether a listener holds `port` for connections to `local`'s
    /// family: an IPv6 listener on `::` that is not v6-only holds it for
    /// IPv4 too.
    pub(super) fn listener_for(&self, local: SocketAddr) -> Option<TcpListenerHandle> {
        let port = local.port();
        let matches = |l: &TcpListenerHandle, dual: bool| {
            self.listeners.get(l.0).is_some_and(|x| {
                let any = x.local.ip().is_unspecified();
                if dual {
                    any && !x.v6_only
                } else {
                    any || x.local.ip() == local.ip()
                }
            })
        };
        match local.ip() {
            IpAddr::V4(_) => {
                let v4 = self.by_port.get(&port).copied().filter(|l| matches(l, false));
                v4.or_else(|| self.by_port6.get(&port).copied().filter(|l| matches(l, true)))
            }
            IpAddr::V6(_) => self.by_port6.get(&port).copied().filter(|l| matches(l, false)),
        }
    }

    /// Whether a new listener on `local` would share a port with one
    /// already listening: one per family and port, and a dual-stack one
    /// counts in both families.
    pub(super) fn listen_conflicts(&self, local: SocketAddr, v6_only: bool) -> bool {
        let port = local.port();
        let dual_at = |l: &TcpListenerHandle| {
            self.listeners.get(l.0).is_some_and(|x| x.local.ip().is_unspecified() && !x.v6_only)
        };
        match local.ip() {
            IpAddr::V4(_) => self.by_port.contains_key(&port) || self.by_port6.get(&port).is_some_and(dual_at),
            IpAddr::V6(ip) => {
                self.by_port6.contains_key(&port)
                    || (ip.is_unspecified() && !v6_only && self.by_port.contains_key(&port))
            }
        }
    }

    /// A free ephemeral port for a connection from `src` to `remote`.
    pub(super) fn pick_port(&mut self, src: IpAddr, remote: SocketAddr) -> Result<u16, Error> {
        let span = usize::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        for _ in 0..span {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == *EPHEMERAL_PORTS.end() { *EPHEMERAL_PORTS.start() } else { port + 1 };
            let taken = self.by_port.contains_key(&port)
                || self.by_port6.contains_key(&port)
                || self.by_tuple.contains_key(&FourTuple(SocketAddr::new(src, port), remote));
            if !taken {
                return Ok(port);
            }
        }
        Err(Error::NoPortAvailable)
    }

    pub(super) fn insert(&mut self, conn: Connection, listener: Option<TcpListenerHandle>) -> TcpHandle {
        let tuple = FourTuple(conn.local(), conn.remote());
        let handle = TcpHandle(self.conns.insert(Entry {
            conn,
            listener,
            released: false,
            scheduled: None,
            run_deferred: false,
            event_pending: false,
        }));
        self.by_tuple.insert(tuple, handle);
        handle
    }

    pub(super) fn forget(&mut self, handle: TcpHandle) {
        let Some(entry) = self.conns.remove(handle.0) else {
            return;
        };
        self.unmap(&entry, handle);
        if let Some(listener) = entry.listener.and_then(|l| self.listeners.get_mut(l.0)) {
            let queued = listener.accept_queue.contains(&handle);
            if queued {
                listener.accept_queue.retain(|h| *h != handle);
            } else {
                // It never finished its handshake.
                listener.half_open = listener.half_open.saturating_sub(1);
            }
        }
    }

    /// Removes the four-tuple's route to this entry, so a new connection
    /// with the same tuple can start while the old handle is still held.
    fn unmap(&mut self, entry: &Entry, handle: TcpHandle) {
        let tuple = FourTuple(entry.conn.local(), entry.conn.remote());
        if self.by_tuple.get(&tuple) == Some(&handle) {
            self.by_tuple.remove(&tuple);
        }
    }

    /// A handshake completed on a passive connection: it becomes
    /// acceptable.
    pub(super) fn hand_to_listener(&mut self, handle: TcpHandle, now: Instant) {
        let Some(entry) = self.conns.get_mut(handle.0) else {
            return;
        };
        let Some(l) = entry.listener else {
            return;
        };
        // A completed handshake proves the peer holds its address.
        self.syn_guard.prove(entry.conn.remote().ip(), now);
        if let Some(listener) = self.listeners.get_mut(l.0) {
            listener.half_open = listener.half_open.saturating_sub(1);
            listener.accept_queue.push_back(handle);
            if !listener.event_pending {
                listener.event_pending = true;
                self.events.push(TcpSocket::Listener(l));
            }
        }
    }

    /// The connections a listener made that it still owns.
    pub(super) fn conns_with_listener(&self, l: TcpListenerHandle) -> Vec<TcpHandle> {
        // Only on listener close; bounded by the listener's half-open
        // count, but found by a scan since entries do not index listeners.
        let mut out = Vec::new();
        for (handle, entry) in self.conns.iter() {
            if entry.listener == Some(l) {
                out.push(TcpHandle(handle));
            }
        }
        out
    }
}

/// The MSS we announce to `remote`: what the link's MTU for `remote`'s
/// family (over IPv6, a router may have advertised a lower one) leaves
/// after that family's IP header and the TCP header.
pub(super) fn local_mss(iface: &crate::iface::Interface, remote: SocketAddr) -> usize {
    let (mtu, ip_header) = match remote {
        SocketAddr::V4(_) => (iface.capabilities().mtu, IPV4_HEADER_LEN),
        SocketAddr::V6(_) => (iface.ipv6_mtu(), IPV6_HEADER_LEN),
    };
    mtu.saturating_sub(ip_header + 20).max(64)
}

/// A keyed hasher that has taken in a four-tuple: the addresses (4 or 16
/// bytes each) and ports. The ISN, SYN cookies and timestamp offsets go
/// on from it with inputs of their own.
pub(super) fn four_tuple_hasher(key: SipKey, local: SocketAddr, remote: SocketAddr) -> crate::hash::SipHasher24 {
    use core::hash::Hasher;
    let mut h = crate::hash::SipHasher24::new(key);
    for end in [local, remote] {
        match end.ip() {
            IpAddr::V4(ip) => h.write(&ip.octets()),
            IpAddr::V6(ip) => h.write(&ip.octets()),
        }
        h.write(&end.port().to_be_bytes());
    }
    h
}
