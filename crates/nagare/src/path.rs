//! Each socket's data path: sends queued with netd without waiting for
//! them, and receives posted ahead, so that data netd delivers waits in
//! our region until the application reads it.
//!
//! - **Send.** `write`/`send_to` copy into region buffers, post them as
//!   lent sends and return. A socket's queued bytes (posted, not yet
//!   completed) stay within its send buffer, the size netd's engine gives
//!   the socket, so the engine has room for every send it is handed and
//!   none waits in netd. netd completes a lent send when the engine lets
//!   go of it (acknowledged; on the device, for a datagram), and its
//!   buffer comes back then.
//! - **Receive.** A socket keeps receives posted with netd, each with a
//!   buffer: a stream about its receive buffer's worth (the size netd
//!   gives the socket), so that netd can always take a whole window out
//!   of the engine; a datagram socket [`RECV_AHEAD`], each asking for a
//!   batch: netd fills the buffer with as many datagrams as fit, as
//!   records (`nagare_request::records`), so that one wake-up brings them
//!   all. No more are posted or hold data not yet read, so a reader that
//!   stops closes the window. Completions queue here in arrival order;
//!   `read` takes from the queue without a request and posts a receive
//!   again for each buffer it empties.
//! - **Errors.** An error a later completion reports (a reset, an
//!   unreachable host) is kept and returned by the socket's next call, as
//!   `SO_ERROR` is. A stream's data that arrived before it is read first;
//!   a datagram socket's next read takes the error before the datagrams
//!   that arrived (as Linux's `sk_err`), which wait for the read after.
//!   netd answers a posted receive with the error as soon as it has it,
//!   so the error is here while the socket has a receive posted; with
//!   all of its [`RECV_AHEAD`] buffers holding unread datagrams, it
//!   comes with the receive that reading one of them posts.
//!
//! Readiness follows from the same state ([`Conn::readiness`]): readable
//! when data, the end of the stream or an error waits; writable while the
//! queued bytes leave room.

use crate::{Conn, InFlight};
use nagare_ipc::BufRef;
use nagare_request::records::{Records, RECORD_ADDR6, RECORD_HEADER};
use nagare_request::{
    decode_sender, Completion, Op, Piece, Request, BATCH, CLOSED, MAX_RECV_AHEAD, READABLE, RECORDS, SENDER6, WRITABLE,
};
use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// The sender a completion or record names that does not hold together
/// (netd is trusted; this only keeps a bad word from being misread).
const NO_SENDER: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// Buffers a datagram socket keeps posted for receives or holding data
/// not yet read (and a stream whose receive buffer netd does not say).
pub const RECV_AHEAD: usize = 4;

/// The most datagrams one socket keeps queued with netd.
const DATAGRAMS_QUEUED: usize = 64;

/// The send buffer assumed when netd does not say (an older netd).
const DEFAULT_SEND_BUFFER: usize = 256 * 1024;

/// Of every eight buffers of the pool, the one a send never takes: queued
/// sends of streams whose peer stops reading cannot leave receives and
/// other calls without a buffer.
const SEND_RESERVE_EIGHTHS: u32 = 1;

/// Of every four buffers of the pool, the one a receive posted ahead never
/// takes: idle sockets' receives, one each, cannot leave sends (which
/// leave an eighth themselves) and other calls without a buffer. Past
/// it a socket is unposted (`Conn::unposted`).
const RECV_RESERVE_QUARTERS: u32 = 1;

/// Of every sixteen buffers of the pool, the one an unposted socket's own
/// receive never takes, so that other calls (a poll's list, a
/// connect's address) find one. Below the eighth sends leave: a reader
/// finds a buffer while queued sends hold all they may (a writer whose
/// bytes its own reader holds waits for that reader).
pub(crate) const UNPOSTED_RESERVE_SIXTEENTHS: u32 = 1;

/// What a socket's path carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A byte stream (TCP).
    Stream,
    /// Datagrams with their senders (UDP).
    Datagram,
}

/// What an in-flight request of a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A call or ticket whose completion someone takes.
    Call,
    /// A send queued on `socket`'s path, of `bytes` bytes.
    QueuedSend { socket: u32, bytes: usize },
    /// A receive posted ahead on `socket`'s path.
    PostedRecv { socket: u32 },
    /// An accept posted ahead on `listener`'s path (`accept.rs`).
    PostedAccept { listener: u32 },
    /// A connect whose `Connecting` was dropped: the connection it makes
    /// is closed.
    AbandonedConnect,
    /// A poll of netd for unposted sockets that lent descriptors
    /// (`Conn::watch_unposted`).
    WatchUnposted,
}

/// What is known of an unposted socket's reads (`Conn::unposted`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Unposted {
    /// What netd last said it is ready for (`READABLE`, `CLOSED`): 0 since
    /// a read found nothing, or before netd was asked.
    pub(crate) said: u16,
    /// The watch in flight that lists it (`Conn::watch_unposted`), by
    /// request id; 0: none.
    pub(crate) watch: u64,
}

/// Data that arrived in one of our buffers.
#[derive(Clone, Copy, Debug)]
struct Arrived {
    buf: BufRef,
    /// Bytes of it already read.
    taken: u32,
    /// A datagram's whole length (more than `buf.len` when truncated).
    whole: u64,
    /// A datagram's sender.
    from: SocketAddr,
    /// Datagrams packed as records, those not yet read: `None` for one
    /// datagram alone in the buffer.
    records: Option<Records>,
}

/// A datagram found among those that arrived: where its payload lies,
/// its whole length, its sender, and whether its buffer is to be
/// released (or handed over) once it is read: it held that datagram
/// alone, or the last record left in it.
struct Found {
    index: u32,
    offset: u32,
    len: u32,
    whole: u64,
    from: SocketAddr,
    /// The buffer held this datagram alone: it may be handed over as it is.
    alone: bool,
    /// The buffer has nothing more to read.
    last: bool,
}

/// One socket's path.
pub(crate) struct SockPath {
    kind: Kind,
    arrived: VecDeque<Arrived>,
    /// Receives posted and not completed.
    posted: usize,
    /// Payload bytes taken out of what the receives delivered, read or
    /// handed over or dropped: each receive posted tells netd, which
    /// shows what it delivered beyond this as waiting in the client.
    consumed: u64,
    /// The most buffers posted or holding data not yet read.
    recv_ahead: usize,
    /// Bytes and buffers of sends queued and not completed.
    queued_bytes: usize,
    queued_bufs: usize,
    send_buffer: usize,
    /// The application set the send buffer's size (SO_SNDBUF): send
    /// completions (some lent before the set) leave it alone.
    send_buffer_set: bool,
    error: Option<i32>,
    /// The stream ended (a FIN, or an error already reported).
    eof: bool,
    /// Our sending side is shut: a write fails with `EPIPE`.
    write_shut: bool,
    /// A stream's error was reported: later writes fail with `EPIPE`.
    failed: bool,
    /// Shared with another process (`crate::share`): nothing is received
    /// ahead, which another holder could need; a read posts one receive
    /// of its own (a stream's of at most what it asks for, a datagram
    /// socket's of one datagram) and waits for it.
    shared: bool,
    /// A shared socket's receives that netd answered with nothing
    /// (`EAGAIN`), by request id: the read that posted one says
    /// `WouldBlock` when it looks; past [`NOTHING_KEPT`] the oldest go
    /// (their reads gave up waiting).
    nothing_for: VecDeque<u64>,
    /// The length of the last datagram refused for want of room in the
    /// send buffer (0 when none was): the socket counts as writable only
    /// once that much room is back (`Conn::readiness`).
    refused_len: usize,
    /// A shared socket's receives posted by reads that may wait, not
    /// answered yet (netd answers them when data comes), by request id.
    /// A read that may wait posts none while one is out and waits for it
    /// (whichever read takes its data): so reads that gave up (a time
    /// limit) leave at most one behind, which the next read waits on.
    waiting: Vec<u64>,
}

/// The most answers of nothing a shared socket's path keeps for reads
/// that have not looked yet.
pub(crate) const NOTHING_KEPT: usize = 16;

/// One read (or accept) on a shared socket (`Conn::ask_for`,
/// `Conn::take_accepted`): whether it may wait for data, and the receive
/// it posted that netd has not answered yet, so that an answer of nothing
/// is this read's alone and no other thread's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ask {
    pub(crate) may_wait: bool,
    pub(crate) posted: Option<u64>,
    /// The socket was shared when the read began: one that may not wait
    /// waits for netd's answer, and says `WouldBlock` itself if the socket
    /// is taken back meanwhile (`crate::share`) with nothing here.
    pub(crate) shared: bool,
}

impl Ask {
    /// A read that may wait for data (`may_wait`) or must not, on a
    /// socket that is `shared` as it begins or not.
    pub(crate) fn new(may_wait: bool, shared: bool) -> Ask {
        Ask { may_wait, posted: None, shared }
    }

    /// On a socket taken back since this read began shared: whether it
    /// is to say `WouldBlock` (it may not wait and has no receive of its
    /// own out), its receive's answer of nothing (`nothing_for`) taken.
    pub(crate) fn ends_unshared(&mut self, nothing_for: &mut VecDeque<u64>, in_flight: impl Fn(u64) -> bool) -> bool {
        if let Some(rid) = self.posted {
            if let Some(at) = nothing_for.iter().position(|&r| r == rid) {
                nothing_for.remove(at);
                self.posted = None;
                return true;
            }
            if in_flight(rid) {
                return false;
            }
            self.posted = None;
        }
        self.shared && !self.may_wait
    }
}

/// A datagram read: bytes copied, its whole length, its sender.
pub(crate) type Datagram = (usize, usize, SocketAddr);

impl SockPath {
    fn room(&self) -> usize {
        match self.kind {
            Kind::Stream => self.send_buffer.saturating_sub(self.queued_bytes),
            Kind::Datagram if self.queued_bufs >= DATAGRAMS_QUEUED => 0,
            Kind::Datagram => self.send_buffer.saturating_sub(self.queued_bytes),
        }
    }

    /// Whether another process holds the socket too.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }

    /// Whether a write could queue something, a free buffer of the pool
    /// given: room in the send buffer (for a datagram refused for want of
    /// room, room for it), the sending side open, no error waiting.
    pub(crate) fn may_queue(&self) -> bool {
        self.room() >= self.refused_len.max(1) && !self.write_shut && self.error.is_none()
    }

    fn readable(&self) -> bool {
        !self.arrived.is_empty() || self.eof || self.error.is_some()
    }
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

impl Conn {
    /// Opens socket `id`'s path (`send_buffer`, `recv_buffer`: what netd
    /// said the socket's are, 0 if it did not) and posts its first
    /// receives.
    pub(crate) fn open_path(&mut self, id: u32, kind: Kind, send_buffer: u64, recv_buffer: u64) -> io::Result<()> {
        self.open_path_as(id, kind, send_buffer, recv_buffer, false)
    }

    /// [`Conn::open_path`], or with `shared` the path of a socket another
    /// process holds too (one adopted), which receives nothing ahead.
    pub(crate) fn open_path_as(
        &mut self,
        id: u32,
        kind: Kind,
        send_buffer: u64,
        recv_buffer: u64,
        shared: bool,
    ) -> io::Result<()> {
        let send_buffer = match usize::try_from(send_buffer) {
            Ok(0) | Err(_) => DEFAULT_SEND_BUFFER,
            Ok(n) => n.min(nagare_request::MAX_SOCKET_BUFFER as usize),
        };
        let path = SockPath {
            kind,
            arrived: VecDeque::new(),
            posted: 0,
            consumed: 0,
            recv_ahead: self.recv_ahead(kind, recv_buffer),
            queued_bytes: 0,
            queued_bufs: 0,
            send_buffer,
            send_buffer_set: false,
            error: None,
            eof: false,
            write_shut: false,
            failed: false,
            shared,
            nothing_for: VecDeque::new(),
            refused_len: 0,
            waiting: Vec::new(),
        };
        self.paths.insert(id, path);
        self.post_receives(id)
    }

    /// Forgets socket `id`'s path: what it holds goes back to the pool, and
    /// its requests still in flight return their buffers when they complete.
    /// Whether it held stream data nobody read (the close must then reset
    /// the connection, as a socket closed with unread data does).
    pub(crate) fn close_path(&mut self, id: u32) -> bool {
        // Not posted again as it closes: a receive would take unread data
        // out of netd that the close must see to reset the connection.
        self.unposted.remove(&id);
        let _ = self.collect();
        let Some(p) = self.paths.remove(&id) else { return false };
        let unread = p.kind == Kind::Stream && !p.arrived.is_empty();
        for a in p.arrived {
            let _ = self.pool.release(a.buf.index);
        }
        unread
    }

    /// Whether socket `id`'s readiness is known here, from its path (a
    /// listener's included): not for a socket without one, nor for a
    /// shared or unposted one, whose data waits in netd until a read asks
    /// for it.
    pub(crate) fn tracks_readiness(&self, id: u32) -> bool {
        (self.paths.contains_key(&id) && !self.reads_from_netd(id)) || self.listener_tracks_readiness(id)
    }

    /// Whether a read of socket `id` asks netd for data (a receive of its
    /// own) rather than finding it posted ahead: the socket is shared, or
    /// unposted.
    fn reads_from_netd(&self, id: u32) -> bool {
        self.paths.get(&id).is_some_and(|p| p.shared) || self.unposted.contains_key(&id)
    }

    /// The buffers a socket of `kind` with a receive buffer of
    /// `recv_buffer` bytes (0: not known) keeps posted: a stream's receive
    /// buffer's worth, rounded up, at most [`MAX_RECV_AHEAD`] (what netd
    /// takes back if the socket is shared) and within what all may post.
    fn recv_ahead(&self, kind: Kind, recv_buffer: u64) -> usize {
        let size = u64::from(self.pool.buffer_size()).max(1);
        match (kind, recv_buffer) {
            (Kind::Datagram, _) | (Kind::Stream, 0) => RECV_AHEAD,
            (Kind::Stream, bytes) => {
                let most = (MAX_RECV_AHEAD / size).max(1);
                let buffers = usize::try_from(bytes.div_ceil(size).min(most)).unwrap_or(usize::MAX);
                buffers.clamp(1, self.posted_cap().max(1))
            }
        }
    }

    /// The buffers a receive posted ahead leaves free:
    /// [`RECV_RESERVE_QUARTERS`] of the pool.
    fn recv_reserve(&self) -> u32 {
        self.pool.len() * RECV_RESERVE_QUARTERS / 4
    }

    /// The receives all sockets together keep posted, past which a socket
    /// gets one at most: a quarter of the pool, and of the completion
    /// ring, whose slots every posted receive holds one of until it
    /// completes.
    fn posted_cap(&self) -> usize {
        (self.pool.len().min(self.completions.capacity()) / 4) as usize
    }

    /// Sets the receive buffer of stream `id`, which sets how many
    /// receives it keeps posted, and posts more if that grew.
    pub(crate) fn set_path_recv_buffer(&mut self, id: u32, bytes: u64) -> io::Result<()> {
        let ahead = self.recv_ahead(Kind::Stream, bytes);
        match self.paths.get_mut(&id) {
            Some(p) if p.kind == Kind::Stream => p.recv_ahead = ahead,
            _ => return Ok(()),
        }
        self.post_receives(id)
    }

    /// Sets the send buffer socket `id`'s queued sends stay within, as
    /// the application set it (SO_SNDBUF).
    pub(crate) fn set_path_send_buffer(&mut self, id: u32, bytes: u64) {
        if let Some(p) = self.paths.get_mut(&id) {
            p.send_buffer = usize::try_from(bytes).unwrap_or(usize::MAX).max(1);
            p.send_buffer_set = true;
        }
    }

    /// Our receiving side of socket `id` is shut: what arrived and was not
    /// read is dropped, and reads return the end of the stream.
    pub(crate) fn shut_path_read(&mut self, id: u32) {
        let Some(p) = self.paths.get_mut(&id) else { return };
        p.eof = true;
        let left: u64 = p.arrived.iter().map(|a| u64::from(a.buf.len.saturating_sub(a.taken))).sum();
        p.consumed = p.consumed.wrapping_add(left);
        let dropped: Vec<u32> = p.arrived.drain(..).map(|a| a.buf.index).collect();
        for index in dropped {
            let _ = self.pool.release(index);
        }
    }

    /// Our sending side of socket `id` is shut.
    pub(crate) fn shut_path_write(&mut self, id: u32) {
        if let Some(p) = self.paths.get_mut(&id) {
            p.write_shut = true;
        }
    }

    /// Socket `id` is shared (`crate::share`): its path (or its
    /// listener's) receives nothing ahead from now on.
    pub(crate) fn mark_shared(&mut self, id: u32) {
        self.share_listen_path(id);
        if let Some(p) = self.paths.get_mut(&id) {
            p.shared = true;
        }
        // Its readiness is netd's to know from here on.
        self.publish(id);
    }

    /// Socket `id` was taken back from sharing (`crate::share`): its
    /// path (or its listener's) receives ahead again, as one never shared,
    /// and its readiness is known here again.
    pub(crate) fn mark_unshared(&mut self, id: u32) -> io::Result<()> {
        self.unshare_listen_path(id)?;
        let unposted = self.unposted.contains_key(&id);
        if let Some(p) = self.paths.get_mut(&id) {
            p.shared = false;
            // Receives still out count as posted ahead from here on, but
            // an unposted socket's reads still wait on theirs.
            if !unposted {
                p.waiting.clear();
            }
        }
        self.post_receives(id)?;
        self.publish(id);
        Ok(())
    }

    /// The stream bytes that arrived on socket `id` and were not read,
    /// taken out to be given back to netd; its end, if it had come, is
    /// netd's to say again after them.
    pub(crate) fn take_unread(&mut self, id: u32) -> Vec<u8> {
        let Some(p) = self.paths.get_mut(&id) else { return Vec::new() };
        if p.kind != Kind::Stream {
            return Vec::new();
        }
        p.eof = false;
        let held: Vec<Arrived> = p.arrived.drain(..).collect();
        let held_bytes: u64 = held.iter().map(|a| u64::from(a.buf.len.saturating_sub(a.taken))).sum();
        p.consumed = p.consumed.wrapping_add(held_bytes);
        let mut unread = Vec::new();
        for a in held {
            let at = a.buf.offset + a.taken;
            let n = a.buf.len.saturating_sub(a.taken) as usize;
            let start = unread.len();
            unread.resize(start + n, 0);
            if self.pool.read(a.buf.index, at, &mut unread[start..]).is_err() {
                unread.truncate(start);
            }
            let _ = self.pool.release(a.buf.index);
        }
        unread
    }

    /// Whether socket `id`'s path is shared with another process.
    pub(crate) fn is_shared(&self, id: u32) -> bool {
        self.paths.get(&id).is_some_and(|p| p.shared)
    }

    /// How a read on socket `id` waits, given whether it may wait for data
    /// (`may_wait`, its socket's mode and its call's flags taken in):
    /// whether the wait here is non-blocking, and the read's [`Ask`]. A
    /// shared socket's read that may not wait still waits for netd's
    /// answer to its receive, which comes at once ([`Conn::ask_for`]).
    pub(crate) fn read_ask(&self, id: u32, may_wait: bool) -> (bool, Ask) {
        let shared = self.reads_from_netd(id);
        (!may_wait && !shared, Ask::new(may_wait, shared))
    }

    /// A read of up to `want` bytes (a datagram: one whole) on socket `id`.
    /// On a shared socket's path (the others keep theirs posted ahead)
    /// with nothing arrived, a read that has no receive of its own out
    /// posts one, of at most that many bytes: one that may not wait, a
    /// receive netd answers at once, with nothing if nothing is there,
    /// which makes this read, and no other, `WouldBlock`; one that may
    /// wait, a receive netd answers when data comes, unless such a receive
    /// is out already (`SockPath::waiting`). A read whose receive was
    /// answered with data another read took posts again.
    fn ask_for(&mut self, id: u32, want: usize, ask: &mut Ask) -> io::Result<()> {
        let from_netd = self.reads_from_netd(id);
        let Some(p) = self.paths.get_mut(&id) else { return Ok(()) };
        if !p.arrived.is_empty() || p.eof || p.error.is_some() {
            return Ok(());
        }
        if !from_netd {
            let in_flight = &self.in_flight;
            if ask.shared && ask.ends_unshared(&mut p.nothing_for, |r| in_flight.contains_key(&r)) {
                return Err(errno(libc::EAGAIN));
            }
            return Ok(());
        }
        if ask.may_wait && !p.waiting.is_empty() {
            return Ok(());
        }
        if let Some(rid) = ask.posted {
            if let Some(at) = p.nothing_for.iter().position(|&r| r == rid) {
                p.nothing_for.remove(at);
                ask.posted = None;
                return Err(errno(libc::EAGAIN));
            }
            if self.in_flight.contains_key(&rid) {
                return Ok(());
            }
            ask.posted = None;
        }
        let kind = p.kind;
        // An unposted socket's receive may take the buffers receives
        // posted ahead and sends leave, but for
        // [`UNPOSTED_RESERVE_SIXTEENTHS`] kept for other calls; a read
        // that may not wait then says `WouldBlock`.
        let short = !p.shared && self.pool.counts().0 <= self.pool.len() * UNPOSTED_RESERVE_SIXTEENTHS / 16;
        let Some(b) = (!short).then(|| self.pool.alloc()).flatten() else {
            return if ask.may_wait { Ok(()) } else { Err(errno(libc::EAGAIN)) };
        };
        let (op, len) = match kind {
            Kind::Stream => (Op::Recv, (want.max(1) as u32).min(self.pool.buffer_size())),
            Kind::Datagram => (Op::RecvFrom, self.pool.buffer_size()),
        };
        let mut req = crate::request(op, id);
        req.aux[0] = self.paths.get(&id).map_or(0, |p| p.consumed);
        if !ask.may_wait {
            req.flags |= nagare_request::NONBLOCK;
        }
        req.piece = Some(Piece { buffer: b, offset: 0, len });
        if let Err(e) = self.submit(&mut req, Some(b)) {
            let _ = self.pool.release(b);
            return Err(e);
        }
        self.in_flight
            .insert(req.id, InFlight { buffer: Some(b), abandoned: false, role: Role::PostedRecv { socket: id } });
        self.posted_total += 1;
        if let Some(p) = self.paths.get_mut(&id) {
            p.posted += 1;
            if ask.may_wait {
                p.waiting.push(req.id);
            }
        }
        ask.posted = Some(req.id);
        Ok(())
    }

    /// Posts receives on socket `id` until its `recv_ahead` buffers are
    /// posted or hold unread data. A quarter of the pool stays free for
    /// sends and other calls ([`RECV_RESERVE_QUARTERS`]), and past
    /// [`Conn::posted_cap`] a socket gets one
    /// receive at most, so that many sockets each get one. A socket left
    /// with none posted and nothing held is unposted
    /// (`Conn::unposted`) until one is.
    fn post_receives(&mut self, id: u32) -> io::Result<()> {
        loop {
            let Some(p) = self.paths.get(&id) else { return Ok(()) };
            if p.shared || p.eof || p.error.is_some() || p.posted + p.arrived.len() >= p.recv_ahead {
                return Ok(());
            }
            // Receives keep the last buffers for other calls, and a socket
            // with one posted leaves the rest to sockets with none.
            let (free, _, _) = self.pool.counts();
            if free <= self.recv_reserve() || (p.posted > 0 && self.posted_total >= self.posted_cap()) {
                self.set_unposted(id);
                return Ok(());
            }
            let Some(b) = self.pool.alloc() else {
                self.set_unposted(id);
                return Ok(());
            };
            let Some(p) = self.paths.get(&id) else {
                let _ = self.pool.release(b);
                return Ok(());
            };
            let op = match p.kind {
                Kind::Stream => Op::Recv,
                Kind::Datagram => Op::RecvFrom,
            };
            let mut req = crate::request(op, id);
            req.aux[0] = p.consumed;
            if op == Op::RecvFrom {
                req.flags |= BATCH;
            }
            req.piece = Some(Piece { buffer: b, offset: 0, len: self.pool.buffer_size() });
            self.submit(&mut req, Some(b))?;
            self.in_flight
                .insert(req.id, InFlight { buffer: Some(b), abandoned: false, role: Role::PostedRecv { socket: id } });
            self.posted_total += 1;
            if let Some(p) = self.paths.get_mut(&id) {
                p.posted += 1;
            }
            if self.unposted.remove(&id).is_some() {
                // Its readiness is known here again.
                self.publish(id);
            }
        }
    }

    /// Socket `id` could not post a receive: unposted if it has none
    /// posted and holds nothing, its readiness netd's from then on.
    fn set_unposted(&mut self, id: u32) {
        let Some(p) = self.paths.get(&id) else { return };
        if p.posted == 0 && p.arrived.is_empty() && !self.unposted.contains_key(&id) {
            self.unposted.insert(id, Unposted::default());
            self.publish(id);
        }
    }

    /// Tries again to post receives ahead for unposted sockets, a few at
    /// a time and each in turn, while the pool has buffers past the
    /// reserve: after a squeeze, idle sockets go back to their posted
    /// receives instead of asking netd for ever. One at its end, with an
    /// error waiting or shared leaves the set, for nothing is posted
    /// ahead for it.
    fn repost_unposted(&mut self) -> io::Result<()> {
        const AT_ONCE: usize = 8;
        if self.pool.counts().0 <= self.recv_reserve() {
            return Ok(());
        }
        for _ in 0..AT_ONCE {
            if self.pool.counts().0 <= self.recv_reserve() {
                break;
            }
            let next = self.unposted.range(self.repost_from..).next().or_else(|| self.unposted.iter().next());
            let Some((&id, _)) = next else { break };
            self.repost_from = id.wrapping_add(1);
            let Some(p) = self.paths.get(&id) else {
                self.unposted.remove(&id);
                continue;
            };
            if p.eof || p.error.is_some() || p.shared {
                // Nothing to post ahead: its end or error is known here, and
                // a shared socket's reads ask netd (taken back, it posts
                // again, `Conn::mark_unshared`).
                self.unposted.remove(&id);
                self.publish(id);
                continue;
            }
            self.post_receives(id)?;
        }
        Ok(())
    }

    /// Takes the completion of a path's request `rid` (`role`), with the
    /// buffer it returned, and sets its socket's descriptor (`readyfd.rs`):
    /// a completion is how a socket's readiness rises.
    pub(crate) fn deliver(
        &mut self,
        rid: u64,
        role: Role,
        comp: Result<Completion, nagare_request::ProtoError>,
        back: Option<BufRef>,
    ) {
        let socket = match role {
            Role::QueuedSend { socket, .. } | Role::PostedRecv { socket } => Some(socket),
            Role::PostedAccept { listener } => Some(listener),
            Role::Call | Role::AbandonedConnect | Role::WatchUnposted => None,
        };
        self.deliver_to_path(rid, role, comp, back);
        if let Some(id) = socket {
            self.publish(id);
        }
        self.publish_starved();
    }

    /// [`Conn::deliver`] without the descriptor.
    fn deliver_to_path(
        &mut self,
        rid: u64,
        role: Role,
        comp: Result<Completion, nagare_request::ProtoError>,
        back: Option<BufRef>,
    ) {
        let result = comp.as_ref().map_err(|_| libc::EPROTO).and_then(|c| c.result().map(|_| c));
        match role {
            Role::Call => {}
            Role::WatchUnposted => self.take_watch(rid, comp, back),
            Role::PostedAccept { listener } => self.deliver_accept(listener, comp),
            Role::AbandonedConnect => {
                if let Ok(c) = comp.as_ref().map_err(|_| ()).and_then(|c| c.result().map(|_| *c).map_err(|_| ())) {
                    self.close_unclaimed(c.aux[0] as u32);
                }
            }
            Role::QueuedSend { socket, bytes } => {
                self.queued_total = self.queued_total.saturating_sub(1);
                if let Some(b) = back {
                    let _ = self.pool.release(b.index);
                }
                if let Some(p) = self.paths.get_mut(&socket) {
                    p.queued_bytes = p.queued_bytes.saturating_sub(bytes);
                    p.queued_bufs = p.queued_bufs.saturating_sub(1);
                    match result {
                        // A stream's send buffer when the bytes went in
                        // (0: not given). Autotuning only grows it, and a
                        // completion posted late may carry an older size,
                        // so the largest is the one in force, until the
                        // application sets one.
                        Ok(c) if p.kind == Kind::Stream && c.aux[2] > 0 && !p.send_buffer_set => {
                            let size = usize::try_from(c.aux[2])
                                .unwrap_or(usize::MAX)
                                .min(nagare_request::MAX_SOCKET_BUFFER as usize);
                            p.send_buffer = p.send_buffer.max(size);
                        }
                        Ok(_) => {}
                        Err(e) => {
                            p.error.get_or_insert(e);
                        }
                    }
                }
            }
            Role::PostedRecv { socket } => {
                self.posted_total = self.posted_total.saturating_sub(1);
                // A stream's receive buffer now (netd's autotuning grows
                // it): as much is kept posted from here on. (A datagram
                // completion's `aux[3]` is its sender's.)
                let stream = self.paths.get(&socket).is_some_and(|p| p.kind == Kind::Stream);
                let grown = match &result {
                    Ok(c) if stream && c.aux[3] > 0 => Some(self.recv_ahead(Kind::Stream, c.aux[3])),
                    _ => None,
                };
                let Some(p) = self.paths.get_mut(&socket) else {
                    if let Some(b) = back {
                        let _ = self.pool.release(b.index);
                    }
                    return;
                };
                p.posted = p.posted.saturating_sub(1);
                p.waiting.retain(|&w| w != rid);
                if let Some(ahead) = grown.filter(|&a| a > p.recv_ahead) {
                    p.recv_ahead = ahead;
                }
                let answered_nothing = matches!(result, Err(libc::EAGAIN));
                let kept = match (result, back) {
                    (Ok(c), Some(b)) if p.kind == Kind::Datagram && c.aux[1] & SENDER6 == 0 && c.aux[2] == RECORDS => {
                        match u32::try_from(c.aux[0]) {
                            Ok(count) if count > 0 => {
                                let records = Some(Records::new(count, b.len as usize));
                                let a = Arrived { buf: b, taken: 0, whole: 0, from: NO_SENDER, records };
                                p.arrived.push_back(a);
                                return;
                            }
                            // No records: nothing to keep.
                            _ => Some(b),
                        }
                    }
                    (Ok(c), Some(b)) if p.kind == Kind::Datagram || b.len > 0 => {
                        let from = decode_sender([c.aux[1], c.aux[2], c.aux[3]]).unwrap_or(NO_SENDER);
                        let a = Arrived { buf: b, taken: 0, whole: c.aux[0], from, records: None };
                        p.arrived.push_back(a);
                        return;
                    }
                    (Ok(_), b) if p.kind == Kind::Stream => {
                        // A stream's end: nothing more will come.
                        p.eof = true;
                        b
                    }
                    // A datagram completion without its buffer (netd always
                    // returns it): nothing to keep.
                    (Ok(_), b) => b,
                    // A shared socket's receive that found nothing (the
                    // socket may be taken back since): its read's to see.
                    (Err(libc::EAGAIN), b) => {
                        if p.nothing_for.len() >= NOTHING_KEPT {
                            p.nothing_for.pop_front();
                        }
                        p.nothing_for.push_back(rid);
                        b
                    }
                    (Err(e), b) => {
                        // A receive ended because the socket was shared
                        // is no error of the socket's.
                        if e != libc::EBADF && e != libc::ECANCELED {
                            p.error.get_or_insert(e);
                        }
                        b
                    }
                };
                if let Some(b) = kept {
                    let _ = self.pool.release(b.index);
                }
                if answered_nothing {
                    // netd had nothing to read: what it said before is past.
                    if let Some(u) = self.unposted.get_mut(&socket) {
                        u.said = 0;
                    }
                }
                // A receive of its own answered with nothing (a socket taken
                // back from sharing while the pool was short) leaves a socket
                // with none posted: unposted, so that its readiness is
                // asked of netd until one is.
                let left_without = |p: &SockPath| p.posted == 0 && !p.shared && !p.eof && p.error.is_none();
                if answered_nothing && self.paths.get(&socket).is_some_and(left_without) {
                    self.set_unposted(socket);
                }
            }
        }
    }

    /// Takes every completion already on the rings, without waiting.
    pub(crate) fn collect(&mut self) -> io::Result<()> {
        while let Some(d) = self.pop(None)? {
            self.set_aside(d);
        }
        self.publish_starved();
        if !self.unposted.is_empty() {
            self.repost_unposted()?;
        }
        self.watch_unposted();
        Ok(())
    }

    /// The error socket `id`'s path holds, taken (reported once; a stream
    /// ends with it).
    fn take_error(&mut self, id: u32) -> Option<io::Error> {
        let p = self.paths.get_mut(&id)?;
        let e = p.error.take()?;
        if p.kind == Kind::Stream {
            p.eof = true;
            p.failed = true;
        }
        Some(errno(e))
    }

    /// Reads stream bytes that arrived into `out`: `Some(n)` (0 at the end
    /// of the stream), `None` if none are here yet.
    pub(crate) fn read_stream(&mut self, id: u32, out: &mut [u8], ask: &mut Ask) -> io::Result<Option<usize>> {
        self.ask_for(id, out.len(), ask)?;
        let mut n = 0;
        let mut emptied = false;
        while n < out.len() {
            let Some(a) = self.paths.get_mut(&id).and_then(|p| p.arrived.front_mut()) else { break };
            let left = (a.buf.len - a.taken) as usize;
            let k = left.min(out.len() - n);
            let at = a.buf.offset + a.taken;
            let index = a.buf.index;
            a.taken += k as u32;
            let done = a.taken >= a.buf.len;
            let read = self.pool.read(index, at, &mut out[n..n + k]);
            if let Some(p) = self.paths.get_mut(&id) {
                p.consumed = p.consumed.wrapping_add(k as u64);
                if done {
                    p.arrived.pop_front();
                }
            }
            if done {
                let _ = self.pool.release(index);
                emptied = true;
            }
            read.map_err(io::Error::other)?;
            n += k;
        }
        if emptied {
            self.post_receives(id)?;
        }
        if n > 0 {
            return Ok(Some(n));
        }
        self.end_or_error(id)
    }

    /// As [`Conn::read_stream`], leaving the bytes to be read again
    /// (`MSG_PEEK`).
    pub(crate) fn peek_stream(&mut self, id: u32, out: &mut [u8], ask: &mut Ask) -> io::Result<Option<usize>> {
        self.ask_for(id, out.len(), ask)?;
        let mut n = 0;
        if let Some(p) = self.paths.get(&id) {
            for a in &p.arrived {
                if n == out.len() {
                    break;
                }
                let k = ((a.buf.len - a.taken) as usize).min(out.len() - n);
                self.pool.read(a.buf.index, a.buf.offset + a.taken, &mut out[n..n + k]).map_err(io::Error::other)?;
                n += k;
            }
        }
        if n > 0 {
            return Ok(Some(n));
        }
        self.end_or_error(id)
    }

    /// Nothing to read on `id`: the end of the stream (`Some(0)`), its
    /// error, or `None` (a receive is posted to wait for data).
    fn end_or_error(&mut self, id: u32) -> io::Result<Option<usize>> {
        if let Some(e) = self.take_error(id) {
            return Err(e);
        }
        let p = self.paths.get(&id).ok_or_else(|| errno(libc::EBADF))?;
        if p.eof {
            return Ok(Some(0));
        }
        if p.posted == 0 {
            self.post_receives(id)?;
        }
        Ok(None)
    }

    /// The next piece of stream data, whole or up to `max` bytes, handed to
    /// the caller in its buffer (`Some(None)` at the end of the stream):
    /// the buffer is the caller's while the rest of it is still to be read
    /// here only when `max` takes all of it; otherwise the bytes are copied
    /// into a buffer of its own.
    pub(crate) fn take_stream(&mut self, id: u32, max: usize, ask: &mut Ask) -> io::Result<Option<Option<BufRef>>> {
        self.ask_for(id, max, ask)?;
        let front = self.paths.get(&id).and_then(|p| p.arrived.front().copied());
        let Some(a) = front else {
            return match self.end_or_error(id)? {
                Some(_) => Ok(Some(None)),
                None => Ok(None),
            };
        };
        let left = a.buf.len - a.taken;
        if left as usize <= max {
            if let Some(p) = self.paths.get_mut(&id) {
                p.arrived.pop_front();
                p.consumed = p.consumed.wrapping_add(u64::from(left));
            }
            self.post_receives(id)?;
            return Ok(Some(Some(BufRef { index: a.buf.index, offset: a.buf.offset + a.taken, len: left })));
        }
        let b = self.pool.alloc().ok_or_else(|| errno(libc::ENOBUFS))?;
        let size = (max.min(self.pool.buffer_size() as usize)) as u32;
        let mut bytes = vec![0u8; size as usize];
        let copied = self.read_stream(id, &mut bytes, ask).and_then(|n| {
            let n = n.unwrap_or(0);
            self.pool.write(b, 0, &bytes[..n]).map_err(io::Error::other)?;
            Ok(n)
        });
        match copied {
            Ok(n) => Ok(Some(Some(BufRef { index: b, offset: 0, len: n as u32 }))),
            Err(e) => {
                let _ = self.pool.release(b);
                Err(e)
            }
        }
    }

    /// The next datagram that arrived, copied into `out` (truncated to it),
    /// or `None` if none is here yet.
    pub(crate) fn read_datagram(&mut self, id: u32, out: &mut [u8], ask: &mut Ask) -> io::Result<Option<Datagram>> {
        let Some(f) = self.next_datagram(id, ask)? else { return Ok(None) };
        let n = (f.len as usize).min(out.len());
        let read = self.pool.read(f.index, f.offset, &mut out[..n]);
        if f.last {
            let _ = self.pool.release(f.index);
            self.post_receives(id)?;
        }
        read.map_err(io::Error::other)?;
        Ok(Some((n, usize::try_from(f.whole).unwrap_or(usize::MAX).max(n), f.from)))
    }

    /// As [`Conn::read_datagram`], leaving the datagram to be read again
    /// (`MSG_PEEK`): bytes copied, its whole length, its sender. A buffer
    /// of records whose headers do not hold together gives `EPROTO` (the
    /// next read drops it).
    pub(crate) fn peek_datagram(&mut self, id: u32, out: &mut [u8], ask: &mut Ask) -> io::Result<Option<Datagram>> {
        let Some(front) = self.front_arrived(id, ask)? else { return Ok(None) };
        let (f, _) = self.locate(&front).ok_or_else(|| errno(libc::EPROTO))?;
        let n = (f.len as usize).min(out.len());
        self.pool.read(f.index, f.offset, &mut out[..n]).map_err(io::Error::other)?;
        Ok(Some((n, usize::try_from(f.whole).unwrap_or(usize::MAX).max(n), f.from)))
    }

    /// The next datagram that arrived, its buffer handed to the caller:
    /// (buffer, whole length, sender), or `None` if none is here yet. A
    /// datagram that shares its buffer with others is copied into one of
    /// its own, taken first (`ENOBUFS`, the datagram left unread, when
    /// none is free).
    pub(crate) fn take_datagram_buf(
        &mut self,
        id: u32,
        ask: &mut Ask,
    ) -> io::Result<Option<(BufRef, usize, SocketAddr)>> {
        // The error first, before a buffer is looked for: it comes before
        // the datagrams that arrived (see `front_arrived`).
        if let Some(e) = self.take_error(id) {
            return Err(e);
        }
        let shared = self.paths.get(&id).and_then(|p| p.arrived.front()).is_some_and(|a| a.records.is_some());
        let own = match shared {
            true => Some(self.pool.alloc().ok_or_else(|| errno(libc::ENOBUFS))?),
            false => None,
        };
        let found = self.next_datagram(id, ask);
        let (f, b) = match (found, own) {
            (Ok(Some(f)), Some(b)) if !f.alone => (f, b),
            (Ok(Some(f)), own) => {
                if let Some(b) = own {
                    let _ = self.pool.release(b);
                }
                let whole = usize::try_from(f.whole).unwrap_or(usize::MAX).max(f.len as usize);
                self.post_receives(id)?;
                return Ok(Some((BufRef { index: f.index, offset: f.offset, len: f.len }, whole, f.from)));
            }
            (other, own) => {
                if let Some(b) = own {
                    let _ = self.pool.release(b);
                }
                return other.map(|_| None);
            }
        };
        let whole = usize::try_from(f.whole).unwrap_or(usize::MAX).max(f.len as usize);
        let mut bytes = vec![0u8; f.len as usize];
        let copied = self
            .pool
            .read(f.index, f.offset, &mut bytes)
            .and_then(|()| self.pool.write(b, 0, &bytes))
            .map_err(io::Error::other);
        if f.last {
            let _ = self.pool.release(f.index);
        }
        if let Err(e) = copied {
            let _ = self.pool.release(b);
            return Err(e);
        }
        if f.last {
            self.post_receives(id)?;
        }
        Ok(Some((BufRef { index: b, offset: 0, len: f.len }, whole, f.from)))
    }

    /// The next datagram that arrived on `id`, or `None` (with a receive
    /// posted) if none is here yet; its error if it has one instead. A
    /// buffer it empties (`Found::last`) is out of the path, for the
    /// caller to release or hand over and then post receives again. A
    /// buffer of records whose headers do not hold together is dropped
    /// with `EPROTO`.
    fn next_datagram(&mut self, id: u32, ask: &mut Ask) -> io::Result<Option<Found>> {
        let Some(front) = self.front_arrived(id, ask)? else { return Ok(None) };
        let located = self.locate(&front);
        if let Some(p) = self.paths.get_mut(&id) {
            if let Some((f, _)) = &located {
                p.consumed = p.consumed.wrapping_add(u64::from(f.len));
            }
            match (&located, p.arrived.front_mut()) {
                (Some((f, rest)), Some(a)) if !f.last => a.records = *rest,
                _ => {
                    p.arrived.pop_front();
                }
            }
        }
        let Some((found, _)) = located else {
            let _ = self.pool.release(front.buf.index);
            self.post_receives(id)?;
            return Err(errno(libc::EPROTO));
        };
        Ok(Some(found))
    }

    /// The error the path holds, taken; else the first buffer that
    /// arrived on `id` and holds a datagram not yet read, left in place;
    /// else `None` (with a receive posted: a shared socket's, `ask`'s
    /// own). The error comes before datagrams that arrived, as Linux
    /// reports a datagram socket's pending error (`sk_err`) before its
    /// queue: they wait for the read after.
    fn front_arrived(&mut self, id: u32, ask: &mut Ask) -> io::Result<Option<Arrived>> {
        self.ask_for(id, usize::MAX, ask)?;
        if let Some(e) = self.take_error(id) {
            return Err(e);
        }
        self.front_queued(id)
    }

    /// The first buffer that arrived on `id` and holds a datagram not yet
    /// read, left in place; else `None`, with receives posted unless the
    /// path holds an error (the read that takes it posts them).
    fn front_queued(&mut self, id: u32) -> io::Result<Option<Arrived>> {
        let p = self.paths.get(&id).ok_or_else(|| errno(libc::EBADF))?;
        if let Some(front) = p.arrived.front().copied() {
            return Ok(Some(front));
        }
        if p.posted == 0 && p.error.is_none() {
            self.post_receives(id)?;
        }
        Ok(None)
    }

    /// The whole length of the next datagram that arrived on `id`, left
    /// in place, or 0 with none (what `FIONREAD` says). The error the
    /// path holds stays for the next read, as Linux's `SIOCINQ` leaves a
    /// datagram socket's `sk_err` alone.
    pub(crate) fn next_datagram_len(&mut self, id: u32, ask: &mut Ask) -> io::Result<usize> {
        self.ask_for(id, usize::MAX, ask)?;
        let Some(front) = self.front_queued(id)? else { return Ok(0) };
        let (f, _) = self.locate(&front).ok_or_else(|| errno(libc::EPROTO))?;
        Ok(usize::try_from(f.whole).unwrap_or(usize::MAX).max(f.len as usize))
    }

    /// Where the next datagram of `front` lies, read without changing the
    /// path, and the records left after it (`None` for a datagram alone in
    /// its buffer); `None` when the buffer's record headers do not hold
    /// together.
    fn locate(&self, front: &Arrived) -> Option<(Found, Option<Records>)> {
        let b = front.buf;
        let Some(mut records) = front.records else {
            let found = Found {
                index: b.index,
                offset: b.offset,
                len: b.len,
                whole: front.whole,
                from: front.from,
                alone: true,
                last: true,
            };
            return Some((found, None));
        };
        let at = records.next_header().ok().flatten()?;
        let mut header = [0u8; RECORD_HEADER];
        self.pool.read(b.index, b.offset.saturating_add(at as u32), &mut header).ok()?;
        let r = records.take(&header).ok()?;
        let mut addr = [0u8; RECORD_ADDR6];
        if let Some(at) = r.addr6 {
            self.pool.read(b.index, b.offset.saturating_add(at as u32), &mut addr).ok()?;
        }
        let [hi, lo] = [0, 8].map(|i| u64::from_be_bytes(addr[i..i + 8].try_into().unwrap_or_default()));
        let from = decode_sender([r.from, hi, lo]).ok()?;
        let found = Found {
            index: b.index,
            offset: b.offset.saturating_add(r.payload.start as u32),
            len: r.payload.len() as u32,
            whole: u64::from(r.whole),
            from,
            alone: false,
            last: records.left == 0,
        };
        Some((found, Some(records)))
    }

    /// Before a send on `id`: its error, or `EPIPE` once its sending side
    /// is shut or the connection failed.
    pub(crate) fn send_check(&mut self, id: u32) -> io::Result<()> {
        if let Some(e) = self.take_error(id) {
            return Err(e);
        }
        let p = self.paths.get(&id).ok_or_else(|| errno(libc::EBADF))?;
        if p.write_shut || p.failed {
            return Err(errno(libc::EPIPE));
        }
        Ok(())
    }

    /// Queues as much of `bytes` on stream `id` as its send buffer has room
    /// for (one lent send per region buffer, which netd may copy if short:
    /// `COPY_SHORT`): `Some(n)`, or `None` when there is no room or no free
    /// buffer yet.
    pub(crate) fn queue_stream(&mut self, id: u32, bytes: &[u8], template: &Request) -> io::Result<Option<usize>> {
        self.send_check(id)?;
        let mut template = *template;
        template.flags |= nagare_request::COPY_SHORT;
        let size = self.pool.buffer_size() as usize;
        let mut n = 0;
        while n < bytes.len() {
            let room = self.paths.get(&id).map_or(0, SockPath::room);
            if room == 0 {
                break;
            }
            let k = (bytes.len() - n).min(room).min(size);
            if !self.queue_copy(id, &bytes[n..n + k], template)? {
                break;
            }
            n += k;
        }
        Ok((n > 0).then_some(n))
    }

    /// Queues one datagram (at most a region buffer): `Some(len)`, or
    /// `None` when the socket's queue is full or no buffer is free yet.
    pub(crate) fn queue_datagram(&mut self, id: u32, bytes: &[u8], template: &Request) -> io::Result<Option<usize>> {
        self.send_check(id)?;
        let Some(p) = self.paths.get_mut(&id) else { return Err(errno(libc::EBADF)) };
        if p.room() < bytes.len().max(1) {
            p.refused_len = bytes.len().max(1);
            return Ok(None);
        }
        p.refused_len = 0;
        Ok(self.queue_copy(id, bytes, *template)?.then_some(bytes.len()))
    }

    /// Copies `bytes` into a free buffer and posts it as a lent send;
    /// false when no buffer is free (some reserved for receives and other
    /// calls).
    fn queue_copy(&mut self, id: u32, bytes: &[u8], template: Request) -> io::Result<bool> {
        let Some(b) = self.alloc_for_send() else { return Ok(false) };
        if let Err(e) = self.pool.write(b, 0, bytes) {
            let _ = self.pool.release(b);
            return Err(io::Error::other(e));
        }
        self.queue_owned(id, b, bytes.len(), template)?;
        Ok(true)
    }

    /// A free buffer for a send, unless only the reserve is left.
    pub(crate) fn alloc_for_send(&mut self) -> Option<u32> {
        if !self.send_buffer_free() {
            return None;
        }
        self.pool.alloc()
    }

    /// Whether a send may take a buffer ([`Conn::alloc_for_send`]): more
    /// are free than the reserve.
    pub(crate) fn send_buffer_free(&self) -> bool {
        let (free, _, _) = self.pool.counts();
        free > self.pool.len() * SEND_RESERVE_EIGHTHS / 8
    }

    /// A free buffer for a send, unless only the reserve is left: `None`
    /// when none is free but some are on their way back, `ENOBUFS` when
    /// none will come.
    pub(crate) fn wait_for_send_buffer(&mut self) -> io::Result<Option<u32>> {
        match self.alloc_for_send() {
            Some(b) => Ok(Some(b)),
            None if self.queued_total > 0 || self.posted_total > 0 => Ok(None),
            None => Err(errno(libc::ENOBUFS)),
        }
    }

    /// Posts buffer `b` (ours, `len` bytes filled) as a lent send on
    /// socket `id`'s path, counted in its queue.
    pub(crate) fn queue_owned(&mut self, id: u32, b: u32, len: usize, template: Request) -> io::Result<()> {
        let mut req = template;
        req.flags |= nagare_request::LEND;
        req.flags &= !(nagare_request::NONBLOCK | nagare_request::COMPLETE_ON_ACCEPT);
        req.aux[nagare_request::WAIT_LIMIT] = 0;
        req.piece = Some(Piece { buffer: b, offset: 0, len: len as u32 });
        self.submit(&mut req, Some(b))?;
        self.in_flight.insert(
            req.id,
            InFlight { buffer: Some(b), abandoned: false, role: Role::QueuedSend { socket: id, bytes: len } },
        );
        self.queued_total += 1;
        if let Some(p) = self.paths.get_mut(&id) {
            p.queued_bytes += len;
            p.queued_bufs += 1;
        }
        Ok(())
    }

    /// The error socket `id`'s path holds, taken without waiting
    /// (`SO_ERROR`), after taking what arrived.
    pub(crate) fn path_error(&mut self, id: u32) -> io::Result<Option<io::Error>> {
        self.collect()?;
        Ok(self.take_error(id))
    }

    /// The stream bytes socket `id` holds that were not read yet (what
    /// `FIONREAD` says), or `None` if it has no stream path.
    pub(crate) fn unread(&self, id: u32) -> Option<usize> {
        let p = self.paths.get(&id).filter(|p| p.kind == Kind::Stream)?;
        Some(p.arrived.iter().map(|a| a.buf.len.saturating_sub(a.taken) as usize).sum())
    }

    /// What socket `id` is ready for by its path (`READABLE`, `WRITABLE`,
    /// `CLOSED`), or `None` if it has none.
    pub(crate) fn readiness(&self, id: u32) -> Option<u16> {
        if let Some(ready) = self.listener_ready(id) {
            return Some(if ready { READABLE } else { 0 });
        }
        let p = self.paths.get(&id)?;
        let mut r = 0;
        if p.readable() {
            r |= READABLE;
        }
        // Writable: a write would queue something. It needs room in the
        // socket's own send buffer (for a datagram refused for want of
        // room, room for it) and a free buffer of the session's pool.
        if p.may_queue() && self.send_buffer_free() {
            r |= WRITABLE;
        }
        if p.error.is_some() || p.failed {
            r |= CLOSED;
        }
        Some(r)
    }
}
