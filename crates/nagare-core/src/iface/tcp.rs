//! TCP on the interface: demultiplexing segments to connections and
//! listeners, the socket calls, and the timers of every connection.
//!
//! Connections are found by a keyed hash of their four-tuple, never by a
//! scan; timers live in one heap ordered by deadline, so the cost of
//! `poll` follows the number of timers due, not the number of connections.

use super::{linear_prefix, Error, Interface, HEADROOM};
use crate::buf::{ChecksumState, Offload, PacketBuf};
use crate::hash::{KeyedState, SipKey};
use crate::socket::{SocketHandle, SocketTable};
use crate::tcp::config::TcpConfig;
use crate::tcp::connection::{Connection, Processed, State, TcpError};
use crate::tcp::isn::{check_syn_cookie, initial_sequence_number, make_syn_cookie};
use crate::time::Instant;
use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Reverse;
use core::net::{Ipv4Addr, SocketAddrV4};
use hashbrown::HashMap;
use nagare_wire::{Checksum, IpProtocol, Ipv4Repr, TcpFlags, TcpPacket, TcpRepr, TcpSeqNumber, IPV4_HEADER_LEN};

/// Names a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpHandle(SocketHandle);

/// Names a listening TCP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpListenerHandle(SocketHandle);

/// What a TCP socket is ready for, as `poll(2)` would say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness {
    /// A receive call returns data, the end of the stream or an error (for
    /// a listener: `tcp_accept` returns a connection).
    pub readable: bool,
    /// A send call accepts bytes now.
    pub writable: bool,
    /// The connection is over (closed, reset or timed out): nothing more
    /// will change.
    pub closed: bool,
}

/// A socket whose readiness may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpSocket {
    /// A connection.
    Connection(TcpHandle),
    /// A listener.
    Listener(TcpListenerHandle),
}

/// One readiness event: the socket and what it is ready for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpEvent {
    /// Which socket.
    pub socket: TcpSocket,
    /// Its readiness when the events were taken.
    pub readiness: Readiness,
}

/// Ephemeral ports for active opens.
const EPHEMERAL: core::ops::RangeInclusive<u16> = 49152..=65535;

#[derive(Debug)]
struct Entry {
    conn: Connection,
    /// The listener that created it, until the application accepts it.
    listener: Option<TcpListenerHandle>,
    /// The application let go of the handle; the entry goes when the
    /// connection closes.
    released: bool,
    /// The deadline of this entry's live timer in the heap.
    scheduled: Option<Instant>,
    /// Waiting in `TcpSockets::deferred` for the end of a receive batch.
    run_deferred: bool,
    /// Listed in `TcpSockets::events`.
    event_pending: bool,
}

#[derive(Debug)]
struct Listener {
    local: SocketAddrV4,
    backlog: usize,
    /// Connections in SYN-RECEIVED.
    half_open: usize,
    accept_queue: VecDeque<TcpHandle>,
    config: TcpConfig,
    /// Until when cookie ACKs are worth checking (cookies were sent lately).
    cookies_until: Option<Instant>,
    /// Listed in `TcpSockets::events`.
    event_pending: bool,
}

/// Every TCP socket of an interface.
#[derive(Debug)]
pub(super) struct TcpSockets {
    conns: SocketTable<Entry>,
    by_tuple: HashMap<(SocketAddrV4, SocketAddrV4), TcpHandle, KeyedState>,
    listeners: SocketTable<Listener>,
    by_port: HashMap<u16, TcpListenerHandle>,
    timers: BinaryHeap<Reverse<(Instant, SocketHandle)>>,
    key: SipKey,
    /// Settings new sockets start with.
    pub(super) defaults: TcpConfig,
    next_ephemeral: u16,
    /// Reused buffer for segments a connection hands out.
    outbox: Vec<(TcpRepr, PacketBuf)>,
    /// Reused list of connections whose timers are due.
    due: Vec<TcpHandle>,
    /// Inside a receive batch: connections send once, at its end.
    pub(super) deferring: bool,
    /// Connections that received segments in the current batch.
    deferred: Vec<TcpHandle>,
    /// Sockets whose readiness may have changed since events were last
    /// taken; each at most once (their `event_pending` flag).
    events: Vec<TcpSocket>,
}

impl TcpSockets {
    pub(super) fn new(seed: u64) -> Self {
        let key = SipKey::from_seed(seed ^ 0x7463_7073_6563_7265);
        let span = u64::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        TcpSockets {
            conns: SocketTable::default(),
            by_tuple: HashMap::with_hasher(KeyedState(SipKey::from_seed(seed ^ 0x0064_656d_7578))),
            listeners: SocketTable::default(),
            by_port: HashMap::new(),
            timers: BinaryHeap::new(),
            key,
            defaults: TcpConfig::default(),
            next_ephemeral: EPHEMERAL.start() + ((seed >> 7) % span) as u16,
            outbox: Vec::new(),
            due: Vec::new(),
            deferring: false,
            deferred: Vec::new(),
            events: Vec::new(),
        }
    }

    pub(super) fn poll_at(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Number of connections held (any state).
    pub(super) fn connection_count(&self) -> usize {
        self.conns.len()
    }
}

fn parse_error(e: TcpError) -> Error {
    match e {
        TcpError::Refused => Error::ConnectionRefused,
        TcpError::Reset => Error::ConnectionReset,
        TcpError::TimedOut => Error::TimedOut,
    }
}

/// The offset of a four-tuple's timestamp clock: a keyed hash without
/// time in it, so every incarnation of the four-tuple shares one clock.
fn timestamp_offset(key: SipKey, local: SocketAddrV4, remote: SocketAddrV4) -> u32 {
    use core::hash::Hasher;
    let mut h = crate::hash::SipHasher24::new(key);
    h.write(&local.ip().octets());
    h.write(&local.port().to_be_bytes());
    h.write(&remote.ip().octets());
    h.write(&remote.port().to_be_bytes());
    h.write(b"tsoff");
    (h.finish() >> 32) as u32
}

/// A RST answering `seg`, which reached no connection (RFC 9293 3.10.7.1).
fn reset_for(seg: &TcpRepr, payload_len: usize) -> TcpRepr {
    let (seq, ack) = match seg.ack_number {
        Some(ack) => (ack, None),
        None => {
            let len = payload_len
                + usize::from(seg.flags.contains(TcpFlags::SYN))
                + usize::from(seg.flags.contains(TcpFlags::FIN));
            (TcpSeqNumber(0), Some(seg.seq_number + len))
        }
    };
    TcpRepr::bare(seg.dst_port, seg.src_port, seq, ack, TcpFlags::RST)
}

impl Interface {
    fn local_mss(&self) -> usize {
        self.caps.mtu.saturating_sub(IPV4_HEADER_LEN + 20).max(64)
    }

    /// A new socket's settings: the defaults, and what the device
    /// offloads.
    fn tcp_socket_config(&self) -> TcpConfig {
        let mut config = self.tcp.defaults.clone();
        let offloads = self.caps.tx_offloads;
        config.segmentation_offload = if offloads.checksum && offloads.tcp_segmentation > self.caps.mtu {
            // Room for the largest IP and TCP headers.
            offloads.tcp_segmentation.min(usize::from(u16::MAX)).saturating_sub(IPV4_HEADER_LEN + 60)
        } else {
            0
        };
        config
    }

    /// Settings new TCP sockets start with.
    pub fn tcp_defaults_mut(&mut self) -> &mut TcpConfig {
        &mut self.tcp.defaults
    }

    /// TCP connections held, in any state (TIME-WAIT included).
    pub fn tcp_connection_count(&self) -> usize {
        self.tcp.connection_count()
    }

    // ---- receive ------------------------------------------------------------

    pub(super) fn receive_tcp(&mut self, ip: &Ipv4Repr, mut payload: PacketBuf, now: Instant) {
        let mut scratch = [0u8; 60];
        let Some(fixed) = linear_prefix(&payload, 20, &mut scratch) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        let header_len = usize::from(fixed[12] >> 4) * 4;
        if header_len < 20 || header_len > payload.len() {
            self.counters.drop_tcp_malformed += 1;
            return;
        }
        let Ok(segment_len) = u16::try_from(payload.len()) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        if !payload.offload().checksum.trusted() {
            let mut sum = nagare_wire::pseudo_header_v4(ip.src_addr, ip.dst_addr, IpProtocol::Tcp.into(), segment_len);
            sum.add_checksum(payload.checksum());
            if sum.folded() != 0xffff {
                self.counters.drop_tcp_checksum += 1;
                return;
            }
        }
        // The promise was about this frame; its payload may travel on.
        payload.set_offload(Offload::NONE);
        let mut scratch = [0u8; 60];
        let Some(header) = linear_prefix(&payload, header_len, &mut scratch) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        let Ok(mut repr) = TcpRepr::parse(&TcpPacket::new_unchecked(header), ip.src_addr, ip.dst_addr, false) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        if self.rx_link_broadcast || self.is_broadcast(ip.dst_addr) {
            // TCP is point to point.
            self.counters.drop_tcp_broadcast += 1;
            return;
        }
        payload.trim_front(header_len);
        repr.payload_len = payload.len();
        self.counters.tcp_segments_received += 1;
        let local = SocketAddrV4::new(ip.dst_addr, repr.dst_port);
        let remote = SocketAddrV4::new(ip.src_addr, repr.src_port);

        if let Some(&handle) = self.tcp.by_tuple.get(&(local, remote)) {
            let reuse = repr.flags.contains(TcpFlags::SYN)
                && !repr.flags.contains(TcpFlags::ACK)
                && self.tcp.conns.get(handle.0).is_some_and(|e| e.conn.time_wait_accepts(&repr));
            if !reuse {
                self.segment_to_connection(handle, &repr, payload, now);
                return;
            }
            // RFC 6191: a new incarnation replaces the one in TIME-WAIT.
            self.tcp_forget(handle);
            self.counters.tcp_time_wait_reused += 1;
        }
        let listener = self.tcp.by_port.get(&repr.dst_port).copied().filter(|l| {
            self.tcp.listeners.get(l.0).is_some_and(|l| l.local.ip().is_unspecified() || *l.local.ip() == ip.dst_addr)
        });
        match listener {
            Some(l) => self.segment_to_listener(l, local, remote, &repr, payload, now),
            None => {
                self.counters.drop_tcp_no_socket += 1;
                if !repr.flags.contains(TcpFlags::RST) {
                    self.send_tcp_reset(local, remote, &repr, payload.len(), now);
                }
            }
        }
    }

    fn send_tcp_reset(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        payload_len: usize,
        now: Instant,
    ) {
        let rst = reset_for(seg, payload_len);
        if self.send_tcp_control(local, remote, rst, now).is_ok() {
            self.counters.tcp_resets_sent += 1;
        }
    }

    fn segment_to_connection(&mut self, handle: TcpHandle, repr: &TcpRepr, payload: PacketBuf, now: Instant) {
        let payload_len = payload.len();
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            return;
        };
        let state_before = entry.conn.state();
        let result: Processed = entry.conn.process(repr, payload, now);
        let (local, remote) = (entry.conn.local(), entry.conn.remote());
        if let Some(seq) = result.reset_reply {
            let mut rst = reset_for(repr, payload_len);
            rst.seq_number = seq;
            rst.ack_number = None;
            if self.send_tcp_control(local, remote, rst, now).is_ok() {
                self.counters.tcp_resets_sent += 1;
            }
        }
        if result.established && state_before == State::SynReceived {
            self.hand_to_listener(handle);
        }
        if result.challenged {
            self.counters.tcp_challenged += 1;
        }
        self.tcp_run_after_input(handle, now);
    }

    /// Lets a connection send what a segment made due: now, or inside a
    /// receive batch once at its end, so that a burst of segments gets one
    /// ACK (and one round of new data) instead of one per segment or two.
    fn tcp_run_after_input(&mut self, handle: TcpHandle, now: Instant) {
        // At once all the same when the connection just closed (so its
        // four-tuple is free for the rest of the batch) or holds data out
        // of order (each such segment owes its own duplicate ACK, RFC 5681
        // 4.2, which fast retransmit counts on).
        let urgent = self.tcp.conns.get(handle.0).is_some_and(|e| e.conn.is_closed() || e.conn.has_out_of_order_data());
        if !self.tcp.deferring || urgent {
            self.tcp_run(handle, now);
            return;
        }
        if let Some(entry) = self.tcp.conns.get_mut(handle.0) {
            if !entry.run_deferred {
                entry.run_deferred = true;
                self.tcp.deferred.push(handle);
            }
        }
    }

    /// Runs the connections a receive batch touched.
    pub(super) fn tcp_run_deferred(&mut self, now: Instant) {
        let mut deferred = core::mem::take(&mut self.tcp.deferred);
        for handle in deferred.drain(..) {
            match self.tcp.conns.get_mut(handle.0) {
                Some(entry) if entry.run_deferred => entry.run_deferred = false,
                _ => continue,
            }
            self.tcp_run(handle, now);
        }
        self.tcp.deferred = deferred;
    }

    /// A handshake completed on a passive connection: it becomes
    /// acceptable.
    fn hand_to_listener(&mut self, handle: TcpHandle) {
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            return;
        };
        let Some(l) = entry.listener else {
            return;
        };
        if let Some(listener) = self.tcp.listeners.get_mut(l.0) {
            listener.half_open = listener.half_open.saturating_sub(1);
            listener.accept_queue.push_back(handle);
            if !listener.event_pending {
                listener.event_pending = true;
                self.tcp.events.push(TcpSocket::Listener(l));
            }
        }
    }

    /// Notes that a connection's readiness may have changed. Connections
    /// the application does not hold (not yet accepted, or released) have
    /// no one to tell.
    fn tcp_note_event(&mut self, handle: TcpHandle) {
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            return;
        };
        if entry.event_pending || entry.released || entry.listener.is_some() {
            return;
        }
        entry.event_pending = true;
        self.tcp.events.push(TcpSocket::Connection(handle));
        self.tcp_compact_events();
    }

    /// Keeps the event list within the number of live sockets: entries of
    /// sockets forgotten before the application took their events would
    /// otherwise pile up for an application that never takes them.
    fn tcp_compact_events(&mut self) {
        let live = self.tcp.conns.len() + self.tcp.listeners.len();
        if self.tcp.events.len() <= 2 * live + 64 {
            return;
        }
        let (conns, listeners) = (&self.tcp.conns, &self.tcp.listeners);
        self.tcp.events.retain(|socket| match socket {
            TcpSocket::Connection(h) => conns.get(h.0).is_some_and(|e| e.event_pending),
            TcpSocket::Listener(l) => listeners.get(l.0).is_some_and(|l| l.event_pending),
        });
    }

    /// What connection `h` is ready for now.
    pub fn tcp_readiness(&self, h: TcpHandle) -> Result<Readiness, Error> {
        let entry = match self.tcp.conns.get(h.0) {
            Some(entry) if !entry.released => entry,
            _ => return Err(Error::InvalidHandle),
        };
        let conn = &entry.conn;
        Ok(Readiness { readable: conn.can_recv(), writable: conn.can_send(), closed: conn.is_closed() })
    }

    /// What listener `l` is ready for now (readable: a connection waits
    /// to be accepted).
    pub fn tcp_listener_readiness(&self, l: TcpListenerHandle) -> Result<Readiness, Error> {
        let listener = self.tcp.listeners.get(l.0).ok_or(Error::InvalidHandle)?;
        Ok(Readiness { readable: !listener.accept_queue.is_empty(), writable: false, closed: false })
    }

    /// Appends to `out` every socket whose readiness may have changed
    /// since the last call, with its readiness now (edge-triggered, as
    /// epoll: a socket that stays ready is not listed again until
    /// something happens to it). Sockets closed and released since are
    /// left out.
    pub fn tcp_take_events(&mut self, out: &mut Vec<TcpEvent>) {
        let mut events = core::mem::take(&mut self.tcp.events);
        for socket in events.drain(..) {
            let readiness = match socket {
                TcpSocket::Connection(h) => {
                    match self.tcp.conns.get_mut(h.0) {
                        Some(entry) => entry.event_pending = false,
                        None => continue,
                    }
                    self.tcp_readiness(h)
                }
                TcpSocket::Listener(l) => {
                    match self.tcp.listeners.get_mut(l.0) {
                        Some(listener) => listener.event_pending = false,
                        None => continue,
                    }
                    self.tcp_listener_readiness(l)
                }
            };
            if let Ok(readiness) = readiness {
                out.push(TcpEvent { socket, readiness });
            }
        }
        self.tcp.events = events;
    }

    fn segment_to_listener(
        &mut self,
        l: TcpListenerHandle,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: &TcpRepr,
        payload: PacketBuf,
        now: Instant,
    ) {
        let flags = repr.flags;
        if flags.contains(TcpFlags::RST) {
            self.counters.drop_tcp_listener_rst += 1;
            return;
        }
        let Some(listener) = self.tcp.listeners.get(l.0) else {
            return;
        };
        if let Some(ack) = repr.ack_number {
            // Perhaps the last step of a handshake answered with a cookie.
            let cookies_live = listener.cookies_until.is_some_and(|t| now <= t);
            if cookies_live && !flags.contains(TcpFlags::SYN) {
                let iss = ack - 1;
                let irs = repr.seq_number - 1;
                if let Some(contents) = check_syn_cookie(self.tcp.key, local, remote, irs, iss, now) {
                    if listener.accept_queue.len() >= listener.backlog {
                        // No room to queue it: drop the ACK, as Linux does
                        // on a listen overflow. The peer sends again (its
                        // data or ACK), and the cookie is still good then.
                        // Without this bound, completed cookie handshakes
                        // would grow the accept queue without limit.
                        self.counters.drop_tcp_backlog_full += 1;
                        return;
                    }
                    let config = listener.config.clone();
                    let mss = self.local_mss();
                    let conn = Connection::from_cookie(config, local, remote, mss, iss, irs, contents.mss, repr, now);
                    let handle = self.tcp_insert(conn, Some(l));
                    self.counters.tcp_syn_cookies_accepted += 1;
                    self.hand_to_listener(handle);
                    self.segment_to_connection(handle, repr, payload, now);
                    return;
                }
                self.counters.drop_tcp_bad_cookie += 1;
            }
            self.counters.drop_tcp_no_socket += 1;
            self.send_tcp_reset(local, remote, repr, payload.len(), now);
            return;
        }
        if !flags.contains(TcpFlags::SYN) {
            self.counters.drop_tcp_no_socket += 1;
            return;
        }
        if listener.accept_queue.len() >= listener.backlog {
            // The application is not accepting: drop the SYN and let the
            // peer retry, as Linux does.
            self.counters.drop_tcp_backlog_full += 1;
            return;
        }
        if listener.half_open >= listener.backlog {
            self.send_syn_cookie(l, local, remote, repr, now);
            return;
        }
        let config = listener.config.clone();
        let iss = initial_sequence_number(self.tcp.key, local, remote, now);
        let mut conn = Connection::accept_syn(config, local, remote, self.local_mss(), iss, repr, now);
        conn.set_timestamp_offset(timestamp_offset(self.tcp.key, local, remote));
        if let Some(listener) = self.tcp.listeners.get_mut(l.0) {
            listener.half_open += 1;
        }
        let handle = self.tcp_insert(conn, Some(l));
        self.tcp_run(handle, now);
    }

    fn send_syn_cookie(
        &mut self,
        l: TcpListenerHandle,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        now: Instant,
    ) {
        let peer_mss = syn.max_seg_size.unwrap_or(536);
        let cookie = make_syn_cookie(self.tcp.key, local, remote, syn.seq_number, peer_mss, now);
        let window = self.tcp.listeners.get(l.0).map_or(65535, |l| l.config.recv_buffer.min(65535));
        let synack = TcpRepr {
            window_len: window as u16,
            max_seg_size: Some(self.local_mss().min(65535) as u16),
            ..TcpRepr::bare(
                local.port(),
                remote.port(),
                cookie,
                Some(syn.seq_number + 1),
                TcpFlags::SYN | TcpFlags::ACK,
            )
        };
        if let Some(listener) = self.tcp.listeners.get_mut(l.0) {
            // Cookies stay checkable for two cookie ticks.
            listener.cookies_until = Some(now + core::time::Duration::from_secs(128));
        }
        if self.send_tcp_control(local, remote, synack, now).is_ok() {
            self.counters.tcp_syn_cookies_sent += 1;
        }
    }

    fn tcp_insert(&mut self, conn: Connection, listener: Option<TcpListenerHandle>) -> TcpHandle {
        let tuple = (conn.local(), conn.remote());
        let handle = TcpHandle(self.tcp.conns.insert(Entry {
            conn,
            listener,
            released: false,
            scheduled: None,
            run_deferred: false,
            event_pending: false,
        }));
        self.tcp.by_tuple.insert(tuple, handle);
        handle
    }

    fn tcp_forget(&mut self, handle: TcpHandle) {
        let Some(entry) = self.tcp.conns.remove(handle.0) else {
            return;
        };
        self.tcp_unmap(&entry, handle);
        if let Some(listener) = entry.listener.and_then(|l| self.tcp.listeners.get_mut(l.0)) {
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
    fn tcp_unmap(&mut self, entry: &Entry, handle: TcpHandle) {
        let tuple = (entry.conn.local(), entry.conn.remote());
        if self.tcp.by_tuple.get(&tuple) == Some(&handle) {
            self.tcp.by_tuple.remove(&tuple);
        }
    }

    /// Sends what a connection has due, then files its next timer, and
    /// forgets it once it is closed and nobody holds it.
    fn tcp_run(&mut self, handle: TcpHandle, now: Instant) {
        // Every path that changes a connection (input, timers, socket
        // calls) ends here.
        self.tcp_note_event(handle);
        let mut outbox = core::mem::take(&mut self.tcp.outbox);
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            self.tcp.outbox = outbox;
            return;
        };
        entry.conn.dispatch(now, &mut |repr, payload| outbox.push((repr, payload)));
        let (local, remote) = (entry.conn.local(), entry.conn.remote());
        let segment_size = entry.conn.segment_payload_limit();
        for (repr, payload) in outbox.drain(..) {
            match self.send_tcp_segment(local, remote, repr, payload, segment_size, now) {
                Ok(()) => self.counters.tcp_segments_sent += 1,
                Err(_) => self.counters.drop_tcp_send_failed += 1,
            }
        }
        self.tcp.outbox = outbox;
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            return;
        };
        if entry.conn.is_closed() {
            if entry.released || entry.listener.is_some() {
                self.tcp_forget(handle);
            } else {
                // The application still holds it (to read the error).
                let tuple = (entry.conn.local(), entry.conn.remote());
                if self.tcp.by_tuple.get(&tuple) == Some(&handle) {
                    self.tcp.by_tuple.remove(&tuple);
                }
            }
            return;
        }
        match entry.conn.poll_at(now) {
            Some(at) if entry.scheduled.is_none_or(|s| at < s) => {
                entry.scheduled = Some(at);
                self.tcp.timers.push(Reverse((at, handle.0)));
            }
            _ => {}
        }
    }

    /// Runs the TCP timers that are due. Entries filed while this runs wait
    /// for the next call, so a connection that keeps asking for "now"
    /// cannot keep one call going.
    pub(super) fn tcp_poll(&mut self, now: Instant) {
        let mut due = core::mem::take(&mut self.tcp.due);
        while let Some(&Reverse((at, slot))) = self.tcp.timers.peek() {
            if at > now || due.len() >= 4096 {
                break;
            }
            self.tcp.timers.pop();
            let handle = TcpHandle(slot);
            match self.tcp.conns.get_mut(handle.0) {
                // A stale entry: another one stands for this connection.
                Some(entry) if entry.scheduled == Some(at) => {
                    entry.scheduled = None;
                    due.push(handle);
                }
                _ => {}
            }
        }
        for handle in due.drain(..) {
            let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
                continue;
            };
            let was_synrecv = entry.conn.state() == State::SynReceived;
            entry.conn.on_timer(now);
            if was_synrecv && entry.conn.is_closed() {
                self.counters.tcp_handshake_timeouts += 1;
            }
            self.tcp_run(handle, now);
        }
        self.tcp.due = due;
    }

    /// Sends a segment without payload (RST, SYN-ACK) for `local`.
    fn send_tcp_control(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: TcpRepr,
        now: Instant,
    ) -> Result<(), Error> {
        self.send_tcp_segment(local, remote, repr, PacketBuf::new(), 0, now)
    }

    /// Sends one segment of `local`'s connection to `remote`; a payload
    /// longer than `segment_size` goes as a super-segment the device cuts.
    fn send_tcp_segment(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: TcpRepr,
        mut payload: PacketBuf,
        segment_size: usize,
        now: Instant,
    ) -> Result<(), Error> {
        let offload_checksum = self.caps.tx_offloads.checksum;
        let payload_sum = if offload_checksum { Checksum::default() } else { payload.checksum() };
        let header_len = repr.header_len();
        let payload_len = payload.len();
        let Ok(header) = payload.prepend(&self.pool, header_len) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        if offload_checksum {
            repr.emit_header_partial(header, *local.ip(), *remote.ip())
        } else {
            repr.emit_header(header, *local.ip(), *remote.ip(), payload_sum)
        }
        .map_err(|_| Error::MessageTooLong)?;
        if offload_checksum {
            let segment_size = if payload_len > segment_size {
                u16::try_from(segment_size).map_err(|_| Error::MessageTooLong)?
            } else {
                0
            };
            payload.set_offload(Offload { checksum: ChecksumState::Partial, segment_size });
        }
        let ip = Ipv4Repr {
            // Path MTU discovery needs DF (RFC 1191); segments fit the MSS.
            dont_frag: true,
            ..Ipv4Repr::new(*local.ip(), *remote.ip(), IpProtocol::Tcp, payload.len(), self.config.ttl)
        };
        self.send_ip(ip, payload, now)
    }

    // ---- socket calls -------------------------------------------------------

    /// Listens on `local` (address 0.0.0.0: every address of ours), with an
    /// accept queue of `backlog` connections; when as many handshakes are
    /// half open, further SYNs are answered with SYN cookies.
    pub fn tcp_listen(&mut self, local: SocketAddrV4, backlog: usize) -> Result<TcpListenerHandle, Error> {
        if !local.ip().is_unspecified() && !self.has_address(*local.ip()) {
            return Err(Error::AddrNotAvailable);
        }
        if local.port() == 0 {
            return Err(Error::Unaddressable);
        }
        if self.tcp.by_port.contains_key(&local.port()) {
            return Err(Error::AddrInUse);
        }
        let listener = Listener {
            local,
            backlog: backlog.max(1),
            half_open: 0,
            accept_queue: VecDeque::new(),
            config: self.tcp_socket_config(),
            cookies_until: None,
            event_pending: false,
        };
        let handle = TcpListenerHandle(self.tcp.listeners.insert(listener));
        self.tcp.by_port.insert(local.port(), handle);
        Ok(handle)
    }

    /// Takes the next established connection from a listener.
    pub fn tcp_accept(&mut self, l: TcpListenerHandle) -> Result<Option<TcpHandle>, Error> {
        let listener = self.tcp.listeners.get_mut(l.0).ok_or(Error::InvalidHandle)?;
        let Some(handle) = listener.accept_queue.pop_front() else {
            return Ok(None);
        };
        if let Some(entry) = self.tcp.conns.get_mut(handle.0) {
            entry.listener = None;
        }
        // As epoll reports a socket's readiness when it is added: data that
        // came with the handshake must not wait for a later edge.
        self.tcp_note_event(handle);
        Ok(Some(handle))
    }

    /// Stops listening; connections not yet accepted are reset.
    pub fn tcp_listener_close(&mut self, l: TcpListenerHandle, now: Instant) -> Result<(), Error> {
        let listener = self.tcp.listeners.remove(l.0).ok_or(Error::InvalidHandle)?;
        self.tcp.by_port.remove(&listener.local.port());
        let pending: Vec<TcpHandle> =
            self.tcp.conns_with_listener(l).into_iter().chain(listener.accept_queue.iter().copied()).collect();
        for handle in pending {
            if let Some(entry) = self.tcp.conns.get_mut(handle.0) {
                entry.listener = None;
                entry.released = true;
                entry.conn.abort();
            }
            self.tcp_run(handle, now);
        }
        Ok(())
    }

    /// Opens a connection to `remote` from `local_port` (0: ephemeral).
    pub fn tcp_connect(&mut self, remote: SocketAddrV4, local_port: u16, now: Instant) -> Result<TcpHandle, Error> {
        if remote.port() == 0
            || remote.ip().is_unspecified()
            || remote.ip().is_multicast()
            || self.is_broadcast(*remote.ip())
        {
            return Err(Error::Unaddressable);
        }
        let src = self.source_for(*remote.ip()).ok_or(Error::NoRoute)?;
        let port = match local_port {
            0 => self.tcp_pick_port(src, remote)?,
            p => {
                if self.tcp.by_tuple.contains_key(&(SocketAddrV4::new(src, p), remote)) {
                    return Err(Error::AddrInUse);
                }
                p
            }
        };
        let local = SocketAddrV4::new(src, port);
        let iss = initial_sequence_number(self.tcp.key, local, remote, now);
        let mut conn = Connection::connect(self.tcp_socket_config(), local, remote, self.local_mss(), iss, now);
        conn.set_timestamp_offset(timestamp_offset(self.tcp.key, local, remote));
        let handle = self.tcp_insert(conn, None);
        self.counters.tcp_connects += 1;
        self.tcp_run(handle, now);
        Ok(handle)
    }

    fn tcp_pick_port(&mut self, src: Ipv4Addr, remote: SocketAddrV4) -> Result<u16, Error> {
        let span = usize::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        for _ in 0..span {
            let port = self.tcp.next_ephemeral;
            self.tcp.next_ephemeral = if port == *EPHEMERAL.end() { *EPHEMERAL.start() } else { port + 1 };
            let taken = self.tcp.by_port.contains_key(&port)
                || self.tcp.by_tuple.contains_key(&(SocketAddrV4::new(src, port), remote));
            if !taken {
                return Ok(port);
            }
        }
        Err(Error::NoPortAvailable)
    }

    fn tcp_entry(&mut self, h: TcpHandle) -> Result<&mut Entry, Error> {
        match self.tcp.conns.get_mut(h.0) {
            Some(entry) if !entry.released => Ok(entry),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// The connection behind a handle, for its state and counters.
    pub fn tcp_connection(&self, h: TcpHandle) -> Option<&Connection> {
        self.tcp.conns.get(h.0).filter(|e| !e.released).map(|e| &e.conn)
    }

    /// The connection's state.
    pub fn tcp_state(&self, h: TcpHandle) -> Result<State, Error> {
        self.tcp_connection(h).map(Connection::state).ok_or(Error::InvalidHandle)
    }

    /// Turns Nagle's algorithm off (`true`) or on, like TCP_NODELAY.
    pub fn tcp_set_nodelay(&mut self, h: TcpHandle, nodelay: bool) -> Result<(), Error> {
        self.tcp_entry(h)?.conn.set_nagle(!nodelay);
        Ok(())
    }

    /// Queues bytes for sending, copying them once into packet buffers;
    /// returns how many were taken (fewer when the send buffer fills).
    pub fn tcp_send(&mut self, h: TcpHandle, data: &[u8], now: Instant) -> Result<usize, Error> {
        let pool = self.pool.clone();
        let entry = self.tcp_entry(h)?;
        if let Some(e) = entry.conn.error() {
            return Err(parse_error(e));
        }
        if !entry.conn.can_send() && !data.is_empty() {
            return match entry.conn.state() {
                State::Established | State::CloseWait | State::SynSent | State::SynReceived => Err(Error::WouldBlock),
                _ => Err(Error::NotConnected),
            };
        }
        let taken = entry.conn.send(&pool, HEADROOM, data)?;
        self.tcp_run(h, now);
        Ok(taken)
    }

    /// Queues a chain for sending without copying; returns what did not fit.
    pub fn tcp_send_buf(&mut self, h: TcpHandle, data: PacketBuf, now: Instant) -> Result<PacketBuf, Error> {
        let entry = self.tcp_entry(h)?;
        if let Some(e) = entry.conn.error() {
            return Err(parse_error(e));
        }
        let rest = entry.conn.send_buf(data);
        self.tcp_run(h, now);
        Ok(rest)
    }

    /// Copies received bytes into `buf`: `Ok(n)` with n > 0 for data,
    /// `Ok(0)` at end of stream, `Err(WouldBlock)` when nothing is there yet.
    pub fn tcp_recv(&mut self, h: TcpHandle, buf: &mut [u8], now: Instant) -> Result<usize, Error> {
        let entry = self.tcp_entry(h)?;
        let n = entry.conn.recv(buf);
        if n > 0 || buf.is_empty() {
            self.tcp_run(h, now);
            return Ok(n);
        }
        if let Some(e) = entry.conn.error() {
            return Err(parse_error(e));
        }
        if entry.conn.at_eof() {
            return Ok(0);
        }
        Err(Error::WouldBlock)
    }

    /// Takes up to `max` received bytes without copying: `Ok(Some)` data,
    /// `Ok(None)` end of stream, `Err(WouldBlock)` nothing yet.
    pub fn tcp_recv_buf(&mut self, h: TcpHandle, max: usize, now: Instant) -> Result<Option<PacketBuf>, Error> {
        let entry = self.tcp_entry(h)?;
        if let Some(data) = entry.conn.recv_buf(max) {
            self.tcp_run(h, now);
            return Ok(Some(data));
        }
        if let Some(e) = entry.conn.error() {
            return Err(parse_error(e));
        }
        if entry.conn.at_eof() {
            return Ok(None);
        }
        Err(Error::WouldBlock)
    }

    /// Closes the sending side (FIN after the queued data).
    pub fn tcp_shutdown(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        self.tcp_entry(h)?.conn.shutdown();
        self.tcp_run(h, now);
        Ok(())
    }

    /// Closes the connection and lets go of the handle; the FIN exchange
    /// and TIME-WAIT go on without the application.
    pub fn tcp_close(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        let entry = self.tcp_entry(h)?;
        entry.conn.close();
        entry.released = true;
        if entry.conn.is_closed() {
            self.tcp_forget(h);
            return Ok(());
        }
        self.tcp_run(h, now);
        Ok(())
    }

    /// Resets the connection and lets go of the handle.
    pub fn tcp_abort(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        let entry = self.tcp_entry(h)?;
        entry.conn.abort();
        entry.released = true;
        self.tcp_run(h, now);
        // A RST went out, or there was nothing to reset: either way gone.
        self.tcp_forget(h);
        Ok(())
    }
}

impl TcpSockets {
    fn conns_with_listener(&self, l: TcpListenerHandle) -> Vec<TcpHandle> {
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
