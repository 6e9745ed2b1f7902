//! One client's session: the ends of its region's rings, its buffers, its
//! sockets, the requests it has waiting and the completions it is owed.
//!
//! Invariant: a buffer a request brought is netd's (in the pool's own
//! table) until the completion that names it is made, and a completion
//! names it only once netd has given it back in that table
//! ([`Session::completion`]): the client can never be handed a buffer netd
//! or the engine still uses. Completions wait in `out` until the ring has
//! room; netd takes a new request only while the ring has room for every
//! completion already owed (waiting requests, queued completions, held
//! binds) and for this one ([`Session::request_budget`]).
//!
//! Everything the client wrote is hostile: a ring it broke, a descriptor
//! that does not decode or names a buffer that is not its own, dooms or
//! refuses, and is counted; nothing it sends can make netd panic or hold
//! more than the region's buffers and `max_pending` waiting requests.

use crate::lending::Lending;
use crate::memory::Memory;
use crate::ops::{Caller, Done, Outcome};
use crate::packetflow::{Load, MemoryManager, Receivers};
use crate::parked::Parked;
use crate::priority::ClientPriority;
use crate::report::{ClientLine, SocketLine};
use crate::shares::Shares;
use crate::sharing::{LetGo, Sharing};
use crate::sockets::{ClientSockets, Sock};
use crate::stats::NetdStats;
use crate::steering::Steering;
use crate::wakes::Wakes;
use nagare_core::{Instant, Interface};
use nagare_ipc::{
    BufRef, Consumer, Descriptor, Notifier, Pool, Producer, RendezvousError, ServerConn, SharedBytes, Waiter,
};
use nagare_request::{Completion, Piece, ProtoError, Request};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

/// A request that waits for the engine (data, a connection, room),
/// holding its buffer.
pub(crate) struct Pending {
    pub req: Request,
    pub buf: Option<BufRef>,
    /// When it fails if still waiting (the request's time limit).
    pub deadline: Option<Instant>,
    /// The socket a receive or an accept found nothing on, where only
    /// that socket's events, or a request naming it that was taken or
    /// ended (a close, a shutdown, a connect that failed), can change
    /// that: it waits parked there, and is run again only then, when
    /// every wait is (housekeeping, `Context::wake_all`), or once its
    /// time limit passed ([`Session::begin_retry`]).
    pub parked: Option<crate::sockets::Sock>,
    /// Its place among the client's waiting requests
    /// ([`Session::next_seq`]): they run again in the order they came, so
    /// that a stream's receives complete in order.
    pub seq: u64,
}

/// Sockets a client's requests may name between two runs of its waits
/// before every parked one runs again (`Session::note_named`).
const MOST_NAMED: usize = 32;

/// Whether a waiting `req` can get further only after an event of the
/// socket it names (`crate::wakes`): data, an end or an error for a
/// receive, a connection for an accept, room or the end of its sends for
/// a send, shutdown or close, the handshake's end for a connect.
fn watched(req: &Request) -> bool {
    use nagare_request::Op;
    matches!(
        req.op,
        Op::Recv | Op::RecvFrom | Op::Accept | Op::Send | Op::Connect | Op::Connect6 | Op::Shutdown | Op::Close
    )
}

/// One client.
pub(crate) struct Session {
    pub conn: ServerConn,
    requests: Consumer,
    completions: Producer,
    pub pool: Pool,
    waiter: Waiter,
    notifier: Notifier,
    pub sockets: ClientSockets,
    /// Its process's priority.
    pub priority: ClientPriority,
    /// Requests waiting, in the order they came, but for those parked.
    pub pending: Vec<Pending>,
    /// The waiting receives and accepts parked on their sockets
    /// (`Pending::parked`): a turn does not look at them until
    /// [`Session::begin_retry`] takes a socket's back.
    parked: Parked,
    /// The number the next request to wait gets (`Pending::seq`).
    seq: u64,
    /// `pending`'s other storage: the waiting requests move from one to
    /// the other each turn, so that a turn allocates nothing.
    spare: Vec<Pending>,
    /// Of `pending`, those whose progress no event of their own socket
    /// tells (`watched`), at most.
    unwatched: usize,
    /// The earliest time limit in `pending`, or an earlier one.
    next_deadline: Option<Instant>,
    /// Something of its own changed since its waiting requests last ran
    /// again: it made requests, or one of them completed (a close, an
    /// option, a share of its own may change what the others get, and a
    /// closed socket has no events left to tell them).
    changed: bool,
    /// The sockets named since its waiting requests last ran again by
    /// requests, taken or ended, that change what a receive gets without
    /// an event (a close, a shutdown, a failed connect:
    /// `requests::changes_without_event`), at most [`MOST_NAMED`]; past
    /// them, `named_many`. [`Session::begin_retry`] takes back the
    /// requests parked on them.
    named: Vec<u32>,
    named_many: bool,
    /// Completions made, not yet on the ring.
    out: Vec<Descriptor>,
    /// Completions of binds to a port that left another client, held
    /// until the driver can no longer steer its frames to that client.
    held: Vec<((u8, u16), Descriptor)>,
    /// Segments its TCP connections had received, in all, when last
    /// asked ([`Session::tcp_received`]).
    tcp_segments: u64,
    /// The client made a request since it was last weighed
    /// ([`Session::load`]): it is awake and working.
    awake: bool,
    /// Descriptors refused so far.
    pub bad: u64,
    /// Set when the client must go, with the reason.
    pub doomed: Option<&'static str>,
    /// The process that connected held `CAP_NET_BIND_SERVICE`, and every
    /// process the session moved to since does (`crate::access`).
    may_bind_privileged: bool,
}

/// What a departing client left: for netd's counters and log.
pub(crate) struct Departure {
    pub sockets: usize,
    pub reclaimed: u32,
    /// Buffers the engine still holds (lent, not leaked).
    pub lent: u32,
    /// Buffers still marked in use that nothing accounts for.
    pub leaked: u32,
    /// Connections reset rather than closed because netd kept as many
    /// closed ones as it may.
    pub orphans_reset: u32,
}

/// Why a session ends when its client went away (its process exited or
/// was killed, or it closed the session): the only ending after which its
/// last requests are still served and its connections closed as an exit
/// closes them.
pub(crate) const GONE: &str = "gone";

impl Session {
    /// The session of a client that has just connected, its sockets
    /// charged in `memory` and indexed in `wakes`.
    pub fn new(conn: ServerConn, memory: Rc<Memory>, wakes: Rc<Wakes>) -> Result<Session, RendezvousError> {
        let requests = conn.region.consumer(0)?;
        let completions = conn.region.producer(1)?;
        let pool = conn.region.pool()?;
        let waiter = Waiter::new(conn.server_wakeup.try_clone()?, Duration::ZERO);
        let notifier = Notifier::new(conn.client_wakeup.try_clone()?);
        let sockets = ClientSockets::new(conn.id, memory, wakes);
        let priority = ClientPriority::of_process(conn.cred.pid);
        let may_bind_privileged = crate::access::may_bind_privileged(conn.cred.pid);
        Ok(Session {
            conn,
            requests,
            completions,
            pool,
            waiter,
            notifier,
            sockets,
            priority,
            pending: Vec::new(),
            parked: Parked::default(),
            seq: 0,
            unwatched: 0,
            next_deadline: None,
            changed: false,
            named: Vec::new(),
            named_many: false,
            spare: Vec::new(),
            out: Vec::new(),
            held: Vec::new(),
            tcp_segments: 0,
            awake: false,
            bad: 0,
            doomed: None,
            may_bind_privileged,
        })
    }

    /// The client's key (its region's, as the driver and steering know it).
    pub fn key(&self) -> u64 {
        self.conn.id
    }

    /// What a request of this client runs with.
    pub fn caller(&mut self) -> Caller<'_> {
        Caller {
            key: self.conn.id,
            uid: self.conn.cred.uid,
            sockets: &mut self.sockets,
            pool: &mut self.pool,
            priority: self.priority.get(),
            pid: &mut self.conn.cred.pid,
            process: &mut self.priority,
            may_bind_privileged: &mut self.may_bind_privileged,
        }
    }

    /// netd's receive pool in the region: the buffers the region started
    /// netd's with, taken out of the pool's free list for steering.
    pub fn take_receive_pool(&mut self) -> Vec<(u32, SharedBytes)> {
        let size = self.pool.buffer_size();
        let mut pool = Vec::new();
        while let Some(i) = self.pool.alloc() {
            if let Ok(v) = self.pool.shared(i, 0, size) {
                pool.push((i, v));
            }
        }
        pool
    }

    /// Completions owed and not yet on the ring: one per waiting request,
    /// queued completion and held bind.
    fn owed(&self) -> usize {
        self.waiting() + self.out.len() + self.held.len()
    }

    /// Its waiting requests, parked ones included.
    pub fn waiting(&self) -> usize {
        self.pending.len() + self.parked.len()
    }

    /// The number of the next request to wait: its place among them.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The earliest time limit of its waiting requests, or an earlier
    /// time.
    pub fn next_deadline(&self) -> Option<Instant> {
        let pending = self.pending.iter().filter_map(|p| p.deadline).min();
        match (pending, self.parked.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How many new requests may be taken now: as many as the completion
    /// ring has room for beyond what is owed, at most `max`; `None` if the
    /// client broke the ring (the session is doomed).
    pub fn request_budget(&mut self, max: usize) -> Option<usize> {
        match self.completions.free() {
            Ok(free) => Some((free as usize).saturating_sub(self.owed()).min(max)),
            Err(_) => {
                self.doomed = Some("completion ring broken");
                None
            }
        }
    }

    /// The request ring's slots.
    pub fn request_capacity(&self) -> usize {
        self.requests.capacity() as usize
    }

    /// Takes up to `into.len()` requests off the ring; `None` if the
    /// client broke the ring (the session is doomed).
    pub fn take_requests(&mut self, into: &mut [Descriptor]) -> Option<usize> {
        match self.requests.pop_batch(into) {
            Ok(n) => {
                self.awake |= n > 0;
                self.changed |= n > 0;
                Some(n)
            }
            Err(_) => {
                self.doomed = Some("request ring broken");
                None
            }
        }
    }

    /// Dooms the session if the client broke its request ring; true if so.
    /// (Checked while no request is taken, so that a broken ring ends the
    /// session now, not whenever the client next drains its completions.)
    pub fn requests_broken(&mut self) -> bool {
        if self.requests.available().is_err() {
            self.doomed = Some("request ring broken");
            return true;
        }
        false
    }

    /// Moves the waiting requests out for a turn, in the order they came:
    /// all of `pending`, and the parked ones of each socket that had an
    /// event, was named since (`Session::note_named`) or has a time limit
    /// passed at `now`, or of every socket if `every` or if more were
    /// named. They come back through [`Session::wait`] as each still
    /// waits. Give the list back with [`Session::end_retry`].
    pub fn begin_retry(&mut self, now: Instant, every: bool) -> Vec<Pending> {
        let spare = std::mem::take(&mut self.spare);
        (self.unwatched, self.next_deadline, self.changed) = (0, None, false);
        let mut list = std::mem::replace(&mut self.pending, spare);
        let named_many = std::mem::take(&mut self.named_many);
        let all = every || named_many;
        self.parked.take_back(&mut list, all, &self.named, &self.sockets, now);
        self.named.clear();
        list
    }

    /// Whether the waiting requests must be run again at `now` although
    /// none of the client's sockets had an event: one of them waits for
    /// something no socket's event tells, a time limit has passed, or
    /// something of the client's own changed since they last ran.
    pub fn waits_need_retry(&self, now: Instant) -> bool {
        let due = |d: Option<Instant>| d.is_some_and(|d| now >= d);
        self.changed || self.unwatched > 0 || due(self.next_deadline) || due(self.parked.deadline())
    }

    /// One of its waiting requests completed: the others run again next
    /// turn.
    pub fn note_wait_ended(&mut self) {
        self.changed = true;
    }

    /// The emptied list from [`Session::begin_retry`], kept for next turn.
    pub fn end_retry(&mut self, mut list: Vec<Pending>) {
        list.clear();
        self.spare = list;
    }

    /// A request of the client's naming socket `id`, one that may change
    /// what a receive parked there gets, was taken or ended.
    pub fn note_named(&mut self, id: u32) {
        if id == 0 || self.named_many || self.named.contains(&id) {
            return;
        }
        if self.named.len() >= MOST_NAMED {
            self.named_many = true;
        } else {
            self.named.push(id);
        }
    }

    /// `p` waits (again): parked on its socket if `p.parked` names one.
    pub fn wait(&mut self, p: Pending) {
        if let Some(sock) = p.parked {
            self.parked.park(sock, p);
            return;
        }
        if !watched(&p.req) {
            self.unwatched += 1;
        }
        if let Some(d) = p.deadline {
            self.next_deadline = Some(self.next_deadline.map_or(d, |n| n.min(d)));
        }
        self.pending.push(p);
    }

    /// The receives and accepts waiting on `socket` complete now with
    /// `ECANCELED`, their buffers back to the client (the socket is being
    /// shared: what arrives later is for whichever holder asks next).
    pub fn cancel_receives(&mut self, socket: u32) {
        use nagare_request::Op;
        let (mut cancelled, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.req.socket == socket && matches!(p.req.op, Op::Recv | Op::RecvFrom | Op::Accept));
        self.pending = rest;
        if let Some(parked) = self.parked.take(socket) {
            cancelled.extend(parked);
            cancelled.sort_by_key(|p| p.seq);
        }
        for p in cancelled {
            self.finish(&p.req, p.buf, Err(libc::ECANCELED));
        }
    }

    /// Waiting requests that hold no buffer of the client's and name no
    /// socket of their own (an accept, a poll): those `max_pending` bounds,
    /// as the client's pool bounds those holding a buffer (its posted
    /// receives among them) and its socket table the connects and closes.
    pub fn waiting_without_buffer(&self) -> usize {
        use nagare_request::Op;
        self.pending
            .iter()
            .chain(self.parked.iter())
            .filter(|p| p.buf.is_none() && !matches!(p.req.op, Op::Connect | Op::Connect6 | Op::Close))
            .count()
    }

    /// Whether a send on `socket` waits (a later send or shutdown of the
    /// stream must wait behind it).
    pub fn send_waits(&self, socket: u32) -> bool {
        self.pending.iter().any(|q| q.req.op == nagare_request::Op::Send && q.req.socket == socket)
    }

    /// Queues completion `c`.
    pub fn post(&mut self, c: Descriptor) {
        self.out.push(c);
    }

    /// Posts the completions that fit in the ring.
    pub fn flush(&mut self, stats: &mut NetdStats) {
        if !self.out.is_empty() {
            match self.notifier.push_batch(&mut self.completions, &self.out) {
                Ok(n) => {
                    stats.completions += n as u64;
                    self.out.drain(..n);
                }
                Err(_) => self.doomed = Some("completion ring broken"),
            }
        }
    }

    /// Queues the completion of `req`, handing its buffer back.
    pub fn finish(&mut self, req: &Request, buf: Option<BufRef>, r: Outcome) {
        let c = self.completion(req, buf, r);
        self.out.push(c);
    }

    /// A request whose buffer the engine now holds: one that completes on
    /// accept completes now, without its buffer (which comes back with the
    /// completion posted when the engine lets go).
    pub fn accepted(&mut self, req: &Request, value: u64) {
        if req.completes_on_accept() {
            self.out.push(Completion::ok(req, value).encode());
        }
    }

    /// The completion of `req`; its buffer is handed back.
    pub fn completion(&mut self, req: &Request, buf: Option<BufRef>, r: Outcome) -> Descriptor {
        // A receive completed in place hands over the buffer its data lies
        // in; the request's stays with netd.
        let buf = match &r {
            Ok(Some(Done { swapped: Some(b), .. })) => Some(*b),
            _ => buf,
        };
        let mut c = match r {
            Ok(Some(d)) => {
                let mut c = Completion::ok(req, d.value);
                c.aux[1] = d.addr;
                [c.aux[2], c.aux[3]] = d.extra;
                c.piece = buf.map(|b| Piece { buffer: b.index, offset: b.offset, len: d.len.unwrap_or(b.len) });
                c
            }
            Ok(None) => Completion::err(req, libc::EAGAIN),
            Err(e) => Completion::err(req, e),
        };
        if let Some(b) = buf {
            if c.piece.is_none() {
                c.piece = Some(Piece { buffer: b.index, offset: b.offset, len: 0 });
            }
            if self.pool.give(b.index).is_err() {
                c.piece = None;
            }
        }
        c.encode()
    }

    /// Refuses a descriptor that did not decode; a buffer it validly named
    /// is handed straight back, so a bad request does not strand it.
    pub fn refuse(&mut self, d: &Descriptor, e: ProtoError) {
        self.bad += 1;
        let mut c = Completion::refused(d, e.errno());
        if let Ok(Some(b)) = self.pool.take(d) {
            if self.pool.give(b.index).is_ok() {
                c.piece = Some(Piece { buffer: b.index, offset: b.offset, len: 0 });
            }
        }
        self.out.push(c.encode());
    }

    /// Refuses a request that names a buffer that is not the client's, or
    /// an extent outside it.
    pub fn refuse_buffer(&mut self, req: &Request) {
        self.bad += 1;
        self.out.push(Completion::err(req, libc::EFAULT).encode());
    }

    /// Holds completion `c` of a bind to `port` until the driver has
    /// applied the port's change of hands.
    pub fn hold(&mut self, port: (u8, u16), c: Descriptor) {
        self.held.push((port, c));
    }

    /// Queues the held completions whose port the driver has let go of.
    pub fn release_settled(&mut self, steering: &Steering) {
        if !self.held.is_empty() {
            let out = &mut self.out;
            self.held.retain(|&((proto, port), c)| {
                let wait = !steering.settled(proto, port);
                if !wait {
                    out.push(c);
                }
                wait
            });
        }
    }

    /// Before netd sleeps: whether this client has requests netd would
    /// take now. A client whose completion ring is full does not count (its
    /// requests cannot be taken before it drains, so they must not keep
    /// netd awake; its wake-up or the sleep's timeout brings netd back).
    /// A broken request ring dooms the session and counts.
    pub fn prepare_sleep(&mut self) -> bool {
        if self.completions.free().is_ok_and(|f| (f as usize) <= self.owed()) {
            return false;
        }
        match self.waiter.prepare_sleep(&mut self.requests) {
            Ok(Some(_)) => true,
            Ok(None) => false,
            Err(_) => {
                self.doomed = Some("request ring broken");
                true
            }
        }
    }

    /// What netd's sleep watches for this client: its wake-up and its
    /// liveness socket.
    pub fn sleep_fds(&self) -> [RawFd; 2] {
        [self.waiter.fd().as_raw_fd(), self.conn.liveness_fd().as_raw_fd()]
    }

    /// After netd's sleep: `woken` its wake-up fired, `hung_up` its
    /// liveness socket did.
    pub fn after_sleep(&mut self, woken: bool, hung_up: bool) {
        if woken {
            let _ = self.waiter.woke(&self.requests);
        } else {
            self.waiter.set_polling(&self.requests);
        }
        if hung_up && self.conn.peer_gone() {
            self.doomed = Some(GONE);
        }
    }

    /// Dooms the session if the client has gone (exit or death).
    pub fn notice_gone(&mut self) {
        if self.doomed.is_none() && self.conn.peer_gone() {
            self.doomed = Some(GONE);
        }
    }

    /// The client's line in the report, with a line per socket.
    pub fn client_line(
        &self,
        steering: &Steering,
        memory: &Memory,
        iface: &Interface,
        receivers: &Receivers,
        mm: Option<MemoryManager>,
        shares: &Shares<Sock>,
    ) -> ClientLine {
        let counts = self.sockets.counts();
        let (_, netd_held, client_held) = self.pool.counts();
        let receive = steering.pool_size(self.conn.id) as u32;
        ClientLine {
            id: self.conn.id,
            pid: self.conn.cred.pid,
            uid: self.conn.cred.uid,
            tcp: counts.tcp,
            listeners: counts.listeners,
            udp: counts.udp,
            echo: counts.echo,
            pending: self.waiting(),
            buffers_client: client_held,
            buffers_netd: netd_held.saturating_sub(receive),
            buffers_receive: receive,
            buffers_total: self.pool.len(),
            bad: self.bad,
            memory_charged: memory.client_charged(self.conn.id),
            memory_budget: memory.budget(),
            priority: self.priority.get(),
            nice: self.priority.nice(),
            boosted: receivers.is_boosted(self.conn.id),
            lifted: self.priority.lifted(),
            sockets: self.socket_lines(iface, receivers, mm, shares),
        }
    }

    /// The client as PacketFlow's scheduler weighs it: the best priority
    /// and the fullest receive buffer (percent) among its receiving
    /// sockets (TCP connections, UDP sockets), and whether it made a
    /// request since it was last weighed; `None` without a receiving
    /// socket.
    pub fn load(&mut self, iface: &Interface) -> Option<Load> {
        let awake = std::mem::take(&mut self.awake);
        let mut load: Option<Load> = None;
        for (id, sock) in self.sockets.iter() {
            let fill = match sock {
                Sock::Tcp(h) => iface.tcp_ref().connection(h).map(|k| percent(k.recv_queued(), k.recv_buffer())),
                Sock::Udp(h) => iface.udp_ref().socket(h).map(|u| {
                    let (datagrams, bytes) = u.queue_limits();
                    percent(u.queued(), datagrams).max(percent(u.queued_bytes(), bytes))
                }),
                Sock::Listener(_) | Sock::Echo(_) => None,
            };
            let Some(fill) = fill else { continue };
            let priority = crate::ops::socket_priority(&self.sockets, self.priority.get(), id).value;
            let l = load.get_or_insert(Load { client: self.conn.id, priority, fill, awake });
            l.priority = l.priority.min(priority);
            l.fill = l.fill.max(fill);
        }
        load
    }

    /// The best priority among the client's TCP connections (all of them,
    /// whichever received) and the segments they received since the last
    /// call, if they received any.
    pub fn tcp_received(&mut self, iface: &Interface) -> Option<(u8, u64)> {
        let (mut segments, mut best) = (0u64, None::<u8>);
        for (id, sock) in self.sockets.iter() {
            let Sock::Tcp(h) = sock else { continue };
            let Some(k) = iface.tcp_ref().connection(h) else { continue };
            segments = segments.wrapping_add(k.stats().segments_received);
            let p = crate::ops::socket_priority(&self.sockets, self.priority.get(), id).value;
            best = Some(best.map_or(p, |b| b.min(p)));
        }
        // A sum that moved either way: a connection that closed takes its
        // count with it.
        let moved = segments != self.tcp_segments;
        let more = segments.saturating_sub(self.tcp_segments);
        self.tcp_segments = segments;
        best.filter(|_| moved).map(|b| (b, more))
    }

    /// A report line per socket, by id. A UDP socket's largest receive
    /// queue is its SB_max under PacketFlow's memory manager (unless its
    /// application sized it), its queue's size otherwise.
    fn socket_lines(
        &self,
        iface: &Interface,
        receivers: &Receivers,
        mm: Option<MemoryManager>,
        shares: &Shares<Sock>,
    ) -> Vec<SocketLine> {
        let mut lines: Vec<SocketLine> = self
            .sockets
            .iter()
            .map(|(id, sock)| {
                let waiting = self.pending.iter().filter(|p| p.req.socket == id).count() + self.parked.on(id);
                let port = self.sockets.port(id).map(|(_, port)| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
                let mut line = SocketLine {
                    id,
                    kind: "",
                    local: port.map(Into::into),
                    remote: None,
                    state: "",
                    send_queued: 0,
                    recv_queued: 0,
                    client_unread: self.sockets.unread_in_client(id),
                    waiting,
                    send_buffer: 0,
                    recv_buffer: 0,
                    recv_buffer_max: 0,
                    priority: crate::ops::socket_priority(&self.sockets, self.priority.get(), id),
                    filter_drops: 0,
                    overflow_drops: 0,
                    holders: shares.holders(self.conn.id, id).max(1),
                };
                match sock {
                    Sock::Tcp(h) => {
                        line.kind = "tcp";
                        if let Some(k) = iface.tcp_ref().connection(h) {
                            line.local = Some(k.local());
                            line.remote = Some(k.remote());
                            line.state = k.state().name();
                            line.send_queued = k.send_queued();
                            line.recv_queued = k.recv_queued();
                            line.send_buffer = k.send_buffer();
                            line.recv_buffer = k.recv_buffer();
                            line.recv_buffer_max = k.config().recv_buffer_limit();
                        }
                    }
                    Sock::Listener(l) => {
                        line.kind = "listener";
                        line.state = "listen";
                        line.local = iface.tcp_ref().listener_local(l).or(line.local);
                    }
                    Sock::Udp(h) => {
                        line.kind = "udp";
                        let (low_priority, overflow) = receivers.filter_drops(h);
                        line.filter_drops = low_priority;
                        line.overflow_drops = overflow;
                        if let Some(u) = iface.udp_ref().socket(h) {
                            line.overflow_drops += u.dropped();
                            line.local = Some(u.local_addr());
                            line.recv_queued = u.queued_bytes();
                            line.recv_buffer = u.queue_limits().1;
                        }
                        let grows = receivers.destination(h).filter(|d| !d.sized).and(mm);
                        line.recv_buffer_max = grows.map_or(line.recv_buffer, |mm| mm.max_for(line.priority.value));
                    }
                    Sock::Echo(_) => line.kind = "echo",
                }
                if line.state.is_empty() {
                    line.state = "-";
                }
                line
            })
            .collect();
        lines.sort_unstable_by_key(|l| l.id);
        lines
    }

    /// The client leaves: its sockets are closed or reset (those another
    /// client holds too stay theirs), its ports unsteered, the buffers of
    /// its waiting requests and every buffer it held reclaimed, and it is
    /// forgotten by lending and steering.
    ///
    /// A client that `exited` (its process ended, or closed its session)
    /// has its connections ended as Linux ends a process's at exit, as
    /// `close(2)` would: a FIN after what it wrote, or a reset when data
    /// it never read waits, when a send of its still waits for room in the
    /// engine (the room its sends were given as it went, as far as its
    /// budget had any, was not enough: what it wrote cannot all go, and
    /// the reset tells the peer so), or when netd keeps as many closed
    /// connections as it may. Data
    /// that waits unread is the engine's, or what was delivered to the
    /// client past the count it last reported taking with a receive it
    /// posted; that count lags by the last read on a shared socket (whose
    /// reads read nothing ahead) and once the peer's FIN was delivered
    /// (the client posts no receive after the end), so there the engine's
    /// alone counts. Its closed connections are charged to netd while they
    /// linger. Any other client (one that broke the protocol, or all of
    /// them when netd stops) has its connections reset, except a shared
    /// one whose last holder it was, which is closed.
    pub fn leave(
        &mut self,
        iface: &mut Interface,
        lending: &Lending,
        steering: &Steering,
        sharing: &mut Sharing,
        exited: bool,
        now: Instant,
    ) -> Departure {
        let sockets = self.sockets.len();
        let key = self.conn.id;
        let memory = self.sockets.memory();
        // What each socket is charged, and what each connection left
        // unread in the client and whether a send of it waits, taken
        // before the table lets go of them.
        let charged: hashbrown::HashMap<u32, usize> =
            self.sockets.iter().map(|(id, _)| (id, memory.socket_charged(key, id))).collect();
        let sends_wait: hashbrown::HashSet<u32> =
            self.pending.iter().filter(|q| q.req.op == nagare_request::Op::Send).map(|q| q.req.socket).collect();
        let left: hashbrown::HashMap<u32, (u64, bool)> = self
            .sockets
            .iter()
            .filter(|(_, sock)| matches!(sock, Sock::Tcp(_)))
            .map(|(id, _)| (id, (self.sockets.unread_in_client(id), sends_wait.contains(&id))))
            .collect();
        let mut orphans_reset = 0;
        for (id, sock) in self.sockets.drain(steering) {
            let shared = sharing.shares.holders(key, id) > 0;
            match sharing.let_go(key, id) {
                LetGo::Close => {}
                LetGo::Held => continue,
                LetGo::Watched(token) => {
                    memory.keep_watched(token, key, charged.get(&id).copied().unwrap_or(0));
                    continue;
                }
            }
            let _ = match sock {
                Sock::Tcp(h) if exited => {
                    let (in_client, send_waits) = left.get(&id).copied().unwrap_or_default();
                    let charge = charged.get(&id).copied().unwrap_or(0);
                    let conn = iface.tcp_ref().connection(h);
                    let counted = !shared && !conn.is_some_and(|k| k.at_eof());
                    let unread = conn.is_some_and(|k| k.recv_queued() > 0) || (counted && in_client > 0);
                    let full = !unread && !send_waits && memory.orphans_full(iface);
                    orphans_reset += u32::from(full);
                    if unread || send_waits || full {
                        sock.reset(iface, now)
                    } else {
                        let closed = sock.close(iface, now);
                        memory.keep_orphan(iface, Some(key), h, charge);
                        closed
                    }
                }
                _ if exited || shared => sock.close(iface, now),
                _ => sock.reset(iface, now),
            };
        }
        let mut reclaimed = 0;
        for p in self.pending.drain(..).chain(self.parked.drain()) {
            if let Some(b) = p.buf {
                reclaimed += u32::from(self.pool.release(b.index).is_ok());
            }
        }
        reclaimed += self.pool.reclaim_peer();
        // Buffers the engine still holds are lent, not leaked: their views
        // keep the region mapped until the engine lets go. So are netd's
        // own receive buffers in the region.
        let lent = lending.lent_by(self.conn.id) as u32;
        let receive = steering.pool_size(self.conn.id) as u32;
        let (_, in_use, _) = self.pool.counts();
        let leaked = in_use.saturating_sub(lent + receive);
        lending.remove_client(self.conn.id);
        steering.remove_client(self.conn.id);
        Departure { sockets, reclaimed, lent, leaked, orphans_reset }
    }
}

/// `part` of `whole` in percent, at most 100 (0 of nothing).
fn percent(part: usize, whole: usize) -> u8 {
    if whole == 0 {
        return 0;
    }
    (part.saturating_mul(100) / whole).min(100) as u8
}
