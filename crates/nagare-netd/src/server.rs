//! netd: the request manager (client sessions and their rings), the socket
//! manager (client socket ids to engine handles) and the protocol manager
//! (the engine and its device) in one event loop.

use crate::config::NetdConfig;
use crate::driver::{DriverLink, Placement};
use crate::lending::Lending;
use crate::stats::NetdStats;
use crate::steering::Steering;
use nagare_core::buf::PacketBuf;
use nagare_core::icmp::{EchoEvent, IcmpError};
use nagare_core::iface::{Error as EngineError, TcpHandle, TcpListenerHandle};
use nagare_core::tcp::connection::State;
use nagare_core::{EchoHandle, Instant, Interface, UdpHandle};
use nagare_dev::{Device, MonotonicClock};
use nagare_ipc::{
    BufRef, Consumer, Descriptor, Listener, Notifier, Pool, Producer, RendezvousError, ServerConn, Waiter,
};
use nagare_request::{
    decode_addr, encode_addr, pack_stages, Completion, EchoWord, Op, Piece, PollEntry, ProtoError, Request, CLOSED,
    INVALID, READABLE, WRITABLE,
};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Frames taken from the device per turn.
const RX_BATCH: usize = 64;
/// Requests taken from one client per turn.
const REQ_BATCH: usize = 64;
/// Clients served at once: each holds a region and about six descriptors,
/// so this keeps netd well inside the usual limit of 1024 descriptors.
const MAX_CLIENTS: usize = 128;
/// Longest sleep, so a stop request and timers are noticed.
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// How often a busy loop looks for new clients and dead ones.
const HOUSEKEEPING: Duration = Duration::from_millis(20);

/// A socket of one client.
#[derive(Clone, Copy, Debug)]
enum Sock {
    Udp(UdpHandle),
    Tcp(TcpHandle),
    Listener(TcpListenerHandle),
    Echo(EchoHandle),
}

/// A request that waits for the engine (data, a connection), holding its
/// buffer.
struct Pending {
    req: Request,
    buf: Option<BufRef>,
    /// When it fails with `EAGAIN` if still waiting (the request's time
    /// limit).
    deadline: Option<Instant>,
}

/// One client: its region's ring ends and pool, its sockets and its
/// waiting requests.
struct Session {
    conn: ServerConn,
    requests: Consumer,
    completions: Producer,
    pool: Pool,
    waiter: Waiter,
    notifier: Notifier,
    sockets: HashMap<u32, Sock>,
    next_socket: u32,
    pending: Vec<Pending>,
    out: Vec<Descriptor>,
    /// Completions of binds to a port that left another client, held
    /// until the driver can no longer steer its frames to that client.
    held: Vec<((u8, u16), Descriptor)>,
    /// The local port of each socket that has one: (protocol, port).
    ports: HashMap<u32, (u8, u16)>,
    bad: u64,
    /// Set when the client must go, with the reason.
    doomed: Option<&'static str>,
}

impl Session {
    fn new(conn: ServerConn) -> Result<Session, RendezvousError> {
        let requests = conn.region.consumer(0)?;
        let completions = conn.region.producer(1)?;
        let pool = conn.region.pool()?;
        let waiter = Waiter::new(conn.server_wakeup.try_clone()?, Duration::ZERO);
        let notifier = Notifier::new(conn.client_wakeup.try_clone()?);
        Ok(Session {
            conn,
            requests,
            completions,
            pool,
            waiter,
            notifier,
            sockets: HashMap::new(),
            next_socket: 1,
            pending: Vec::new(),
            out: Vec::new(),
            held: Vec::new(),
            ports: HashMap::new(),
            bad: 0,
            doomed: None,
        })
    }

    /// Socket `id` is on local `port` of `proto`: that port's frames may be
    /// steered into this client's region.
    fn claim_port(&mut self, steering: &Steering, id: u32, proto: u8, port: u16) {
        if port != 0 && self.ports.insert(id, (proto, port)).is_none() {
            steering.bind(proto, port, self.conn.id);
        }
    }

    /// Forgets socket `id`, and its port.
    fn remove_socket(&mut self, steering: &Steering, id: u32) -> Option<Sock> {
        if let Some((proto, port)) = self.ports.remove(&id) {
            steering.unbind(proto, port);
        }
        self.sockets.remove(&id)
    }

    fn add_socket(&mut self, s: Sock, max: usize) -> Result<u32, i32> {
        if self.sockets.len() >= max {
            return Err(libc::EMFILE);
        }
        loop {
            let id = self.next_socket;
            self.next_socket = self.next_socket.checked_add(1).unwrap_or(1);
            if id != 0 && !self.sockets.contains_key(&id) {
                self.sockets.insert(id, s);
                return Ok(id);
            }
        }
    }
}

/// What a request came to.
struct Done {
    value: u64,
    addr: u64,
    /// For a receive: the bytes now in the buffer.
    len: Option<u32>,
    /// `aux[2]` of the completion.
    extra: u64,
    /// For a receive completed in place: the buffer the data lies in,
    /// which the completion names instead of the request's (netd keeps
    /// that one).
    swapped: Option<BufRef>,
    /// The request's buffer is lent to the engine: no completion now, or,
    /// for one that completes on accept, one without the buffer.
    lent: bool,
}

impl Done {
    fn value(value: u64) -> Done {
        Done { value, addr: 0, len: None, extra: 0, swapped: None, lent: false }
    }

    fn with_addr(value: u64, addr: u64) -> Done {
        Done { value, addr, len: None, extra: 0, swapped: None, lent: false }
    }

    fn received(value: u64, addr: u64, len: u32) -> Done {
        Done { value, addr, len: Some(len), extra: 0, swapped: None, lent: false }
    }
}

/// The errno for an engine error.
pub fn engine_errno(e: EngineError) -> i32 {
    match e {
        EngineError::InvalidHandle => libc::EBADF,
        EngineError::AddrInUse => libc::EADDRINUSE,
        EngineError::AddrNotAvailable => libc::EADDRNOTAVAIL,
        EngineError::NoPortAvailable => libc::EADDRNOTAVAIL,
        EngineError::NoRoute => libc::EHOSTUNREACH,
        EngineError::Unaddressable => libc::EINVAL,
        EngineError::MessageTooLong => libc::EMSGSIZE,
        EngineError::NoBuffer => libc::ENOBUFS,
        EngineError::WouldBlock => libc::EAGAIN,
        EngineError::NotConnected => libc::ENOTCONN,
        EngineError::ConnectionReset => libc::ECONNRESET,
        EngineError::ConnectionRefused => libc::ECONNREFUSED,
        EngineError::TimedOut => libc::ETIMEDOUT,
    }
}

/// Copies a received chain into the client's buffer (the one copy on
/// receive); returns the bytes copied (at most the buffer piece's length).
fn copy_to_region(pool: &mut Pool, b: BufRef, data: &PacketBuf) -> Result<u32, i32> {
    let mut at = 0u32;
    for chunk in data.chunks() {
        let room = (b.len - at) as usize;
        if room == 0 {
            break;
        }
        let n = chunk.len().min(room);
        pool.write(b.index, b.offset + at, &chunk[..n]).map_err(|_| libc::EFAULT)?;
        at += n as u32;
    }
    Ok(at)
}

/// IP protocol numbers of the sockets whose ports are steered.
const TCP: u8 = 6;
const UDP: u8 = 17;

/// Received data that already lies in one of netd's receive buffers in
/// this client's region (steered there by the driver), which nothing else
/// holds: that buffer goes to the client as it is, and `posted`, the
/// buffer the receive brought, joins netd's receive pool in its place. The
/// data back if it is not so.
fn received_in_place(
    s: &mut Session,
    steering: &Steering,
    posted: BufRef,
    data: PacketBuf,
) -> Result<BufRef, PacketBuf> {
    if data.slice_count() != 1 || !data.holds_buffers_alone() || !steering.enabled() {
        return Err(data);
    }
    let Some((addr, len)) = data.chunks().next().map(|c| (c.as_ptr() as usize, c.len())) else { return Err(data) };
    let Some((index, offset)) = steering.locate(s.conn.id, addr, len) else { return Err(data) };
    // `finish` gives the buffer to the client: it must be netd's to give
    // (it is, while steering has it in the engine), or it would be
    // stranded, in no pool.
    if !s.pool.holds(index) {
        return Err(data);
    }
    let Ok(view) = s.pool.shared(posted.index, 0, s.pool.buffer_size()) else { return Err(data) };
    steering.swap(s.conn.id, index, (posted.index, view));
    // The engine's hold goes; the buffer is the client's with the
    // completion.
    drop(data);
    let len = (len as u32).min(posted.len);
    Ok(BufRef { index, offset, len })
}

/// Where netd's frames go: a device called from netd's loop, or a driver.
enum FramePath {
    /// A device called from netd's loop.
    Inline(Box<dyn Device>),
    /// A driver, a process or a thread of its own.
    Driver(Box<DriverLink>),
}

impl FramePath {
    fn device(&mut self) -> &mut dyn Device {
        match self {
            FramePath::Inline(d) => d.as_mut(),
            FramePath::Driver(d) => d.as_mut(),
        }
    }
}

/// The inet server.
pub struct Netd {
    iface: Interface,
    frames: FramePath,
    placement: Placement,
    lending: Rc<Lending>,
    steering: Rc<Steering>,
    clock: MonotonicClock,
    listener: Listener,
    config: NetdConfig,
    sessions: Vec<Session>,
    rx: Vec<PacketBuf>,
    scratch: Vec<u8>,
    stats: NetdStats,
    started: std::time::Instant,
}

impl Netd {
    /// A server over `iface` and `device` (called from netd's own loop),
    /// listening on `config.socket`.
    pub fn new(
        iface: Interface,
        device: Box<dyn Device>,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let config = NetdConfig { receive_pool: 0, ..config };
        let steering = Rc::new(Steering::new(false));
        Self::build(
            iface,
            FramePath::Inline(device),
            Placement::Inline,
            Rc::new(Lending::default()),
            steering,
            clock,
            config,
        )
    }

    /// A server over `iface` whose frames go through `driver` (started
    /// with [`DriverLink::start`]; `placement` says whether it is a process
    /// or a thread, for the report).
    pub fn with_driver(
        iface: Interface,
        driver: DriverLink,
        placement: Placement,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let (lending, steering) = (driver.lending(), driver.steering());
        Self::build(iface, FramePath::Driver(Box::new(driver)), placement, lending, steering, clock, config)
    }

    fn build(
        iface: Interface,
        frames: FramePath,
        placement: Placement,
        lending: Rc<Lending>,
        steering: Rc<Steering>,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let listener = Listener::bind(&config.socket, config.region()).map_err(io::Error::other)?;
        set_nonblocking(listener.fd().as_raw_fd())?;
        // Frames are steered only when sent to netd's own addresses (the
        // first IPv4 address; others reach the engine as before).
        if let Some(addr) = iface.config().addresses.first() {
            steering.set_local(iface.config().mac.0, addr.address().octets());
        }
        Ok(Netd {
            iface,
            frames,
            placement,
            lending,
            steering,
            clock,
            listener,
            config,
            sessions: Vec::new(),
            rx: Vec::with_capacity(RX_BATCH),
            scratch: Vec::new(),
            stats: NetdStats::default(),
            started: std::time::Instant::now(),
        })
    }

    /// The engine.
    pub fn iface(&self) -> &Interface {
        &self.iface
    }

    /// The counters.
    pub fn stats(&self) -> NetdStats {
        self.stats
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.sessions.len()
    }

    /// The driver link's counters, if frames go through a driver.
    pub fn driver_stats(&self) -> Option<crate::driver::DriverLinkStats> {
        match &self.frames {
            FramePath::Driver(d) => Some(d.link_stats()),
            FramePath::Inline(_) => None,
        }
    }

    /// Runs until `stop` is raised; then every client is disconnected.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        self.run_with(stop, |_, _| false)
    }

    /// [`Netd::run`] with `local` run once per turn on the engine: services
    /// built into the inet server itself (as inetd's internal services),
    /// beside its clients. `local` returns whether it did anything.
    pub fn run_with(
        &mut self,
        stop: &AtomicBool,
        mut local: impl FnMut(&mut Interface, Instant) -> bool,
    ) -> io::Result<()> {
        let mut last_work = std::time::Instant::now();
        let mut last_housekeeping = last_work;
        let mut listener_ready = true;
        while !stop.load(Ordering::Relaxed) {
            let housekeeping = listener_ready || last_housekeeping.elapsed() >= HOUSEKEEPING;
            if housekeeping {
                last_housekeeping = std::time::Instant::now();
            }
            let work = self.turn_with(housekeeping, &mut local);
            listener_ready = false;
            if work {
                last_work = std::time::Instant::now();
                continue;
            }
            if last_work.elapsed() < self.config.spin {
                // The driver and the applications may be waiting for a CPU.
                std::thread::yield_now();
                continue;
            }
            listener_ready = self.sleep()?;
        }
        let gone: Vec<Session> = self.sessions.drain(..).collect();
        for s in gone {
            self.disconnect(s, "netd stopping");
        }
        Ok(())
    }

    /// One batch: new clients (if `housekeeping`), the device, the engine's
    /// timers, every client's requests and waiting requests, completions
    /// and transmission. Returns whether anything happened.
    pub fn turn(&mut self, housekeeping: bool) -> bool {
        self.turn_with(housekeeping, &mut |_, _| false)
    }

    fn turn_with(&mut self, housekeeping: bool, local: &mut dyn FnMut(&mut Interface, Instant) -> bool) -> bool {
        let mut work = false;
        if housekeeping {
            work |= self.accept_all();
            for s in &mut self.sessions {
                if s.doomed.is_none() && s.conn.peer_gone() {
                    s.doomed = Some("gone");
                }
            }
            if let FramePath::Driver(d) = &mut self.frames {
                let clients = self.sessions.iter().map(|s| {
                    (s.conn.id, s.conn.region.fd(), s.conn.region.layout().config, s.conn.client_wakeup.as_fd())
                });
                work |= d.check(clients);
            }
        }
        let now = self.clock.now();
        let pool = self.iface.pool().clone();
        match self.frames.device().receive_batch(&pool, &mut self.rx, RX_BATCH, now) {
            Ok(n) => {
                work |= n > 0;
                self.iface.receive_batch(self.rx.drain(..), now);
            }
            Err(_) => self.stats.device_errors += 1,
        }
        self.iface.poll(now);
        work |= local(&mut self.iface, now);
        for i in 0..self.sessions.len() {
            work |= self.serve(i, now);
        }
        work |= self.answer_stat_requests();
        match self.frames.device().transmit_batch(self.iface.tx_queue(), now) {
            Ok(n) => work |= n > 0,
            Err(_) => self.stats.device_errors += 1,
        }
        work |= self.settle_lent_buffers();
        let mut i = 0;
        while i < self.sessions.len() {
            if let Some(why) = self.sessions[i].doomed {
                let s = self.sessions.swap_remove(i);
                self.disconnect(s, why);
                work = true;
            } else {
                i += 1;
            }
        }
        work
    }

    fn accept_all(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.listener.accept() {
                Ok(_) if self.sessions.len() >= MAX_CLIENTS => {
                    // Each client costs a region and a handful of fds.
                    self.stats.clients_refused += 1;
                    any = true;
                }
                Ok(conn) => match Session::new(conn) {
                    Ok(mut s) => {
                        self.stats.clients_accepted += 1;
                        any = true;
                        self.lending.add_client(s.conn.id, &s.pool);
                        // netd's receive pool in the region: the buffers
                        // the region started netd's with.
                        let size = s.pool.buffer_size();
                        let mut pool = Vec::new();
                        while let Some(i) = s.pool.alloc() {
                            if let Ok(v) = s.pool.shared(i, 0, size) {
                                pool.push((i, v));
                            }
                        }
                        self.steering.add_client(s.conn.id, s.pool.area_base(), size as usize, pool);
                        if let FramePath::Driver(d) = &mut self.frames {
                            d.attach(
                                s.conn.id,
                                s.conn.region.fd(),
                                s.conn.region.layout().config,
                                s.conn.client_wakeup.as_fd(),
                            );
                        }
                        self.sessions.push(s);
                    }
                    Err(_) => self.stats.clients_refused += 1,
                },
                Err(RendezvousError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => return any,
                Err(RendezvousError::Io(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Out of descriptors or memory: the connection stays
                    // queued, so trying again now would spin; the next
                    // turn tries again.
                    self.stats.clients_refused += 1;
                    return any;
                }
            }
        }
    }

    /// Runs one client's waiting and new requests and posts completions.
    fn serve(&mut self, i: usize, now: Instant) -> bool {
        let mut work = false;
        let s = &mut self.sessions[i];
        if s.doomed.is_some() {
            return false;
        }
        // Binds whose port the driver has let go of since.
        if !s.held.is_empty() {
            let out = &mut s.out;
            s.held.retain(|&((proto, port), c)| {
                let wait = !self.steering.settled(proto, port);
                if !wait {
                    out.push(c);
                }
                wait
            });
        }
        // Waiting requests first: the engine may have what they wait for.
        let mut still: Vec<Pending> = Vec::new();
        for mut p in std::mem::take(&mut s.pending) {
            // A stream's sends go in the order they came: one waits while
            // an earlier send on its socket waits.
            if stream_ordered(p.req.op) && still.iter().any(|q| q.req.op == Op::Send && q.req.socket == p.req.socket) {
                if p.deadline.is_some_and(|d| now >= d) {
                    finish(s, &p.req, p.buf, Err(libc::EAGAIN));
                    work = true;
                } else {
                    still.push(p);
                }
                continue;
            }
            match execute(
                s,
                &mut self.iface,
                &mut p.req,
                p.buf,
                now,
                &mut Context {
                    scratch: &mut self.scratch,
                    config: &self.config,
                    lending: &self.lending,
                    steering: &self.steering,
                    stats: &mut self.stats,
                },
            ) {
                Ok(None) if p.deadline.is_some_and(|d| now >= d) => {
                    let errno = if p.req.op == Op::Connect {
                        // Nobody will name the half-open connection again.
                        if let Some(Sock::Tcp(h)) = s.remove_socket(&self.steering, p.req.socket) {
                            let _ = self.iface.tcp_abort(h, now);
                        }
                        libc::ETIMEDOUT
                    } else {
                        libc::EAGAIN
                    };
                    finish(s, &p.req, p.buf, Err(errno));
                    work = true;
                }
                Ok(None) => still.push(p),
                // Lent to the engine: completed when it lets go.
                Ok(Some(Done { lent: true, value, .. })) => {
                    accepted(s, &p.req, value);
                    work = true;
                }
                r => {
                    finish(s, &p.req, p.buf, r);
                    work = true;
                }
            }
        }
        s.pending = still;
        // New requests, as many as the completion ring has room for.
        let free = match s.completions.free() {
            Ok(f) => f as usize,
            Err(_) => {
                s.doomed = Some("completion ring broken");
                return true;
            }
        };
        let budget = free.saturating_sub(s.pending.len() + s.out.len() + s.held.len()).min(REQ_BATCH);
        if budget == 0 {
            // No request is taken until the client drains its completions,
            // but a request ring it has broken ends the session now, not
            // whenever it next drains (perhaps never).
            if s.requests.available().is_err() {
                s.doomed = Some("request ring broken");
                return true;
            }
        } else {
            let mut descs = [Descriptor::default(); REQ_BATCH];
            let n = match s.requests.pop_batch(&mut descs[..budget]) {
                Ok(n) => n,
                Err(_) => {
                    s.doomed = Some("request ring broken");
                    return true;
                }
            };
            for d in &descs[..n] {
                work = true;
                match Request::decode(d) {
                    Ok(mut req) => {
                        self.stats.requests += 1;
                        let buf = match s.pool.take(d) {
                            Ok(b) => b,
                            Err(_) => {
                                self.stats.bad_buffers += 1;
                                s.bad += 1;
                                s.out.push(Completion::err(&req, libc::EFAULT).encode());
                                continue;
                            }
                        };
                        if req.op == Op::Connect && s.pending.len() >= self.config.max_pending {
                            // A connect that might wait must have room to:
                            // refused before it creates a connection.
                            finish(s, &req, buf, Err(libc::ENOBUFS));
                            continue;
                        }
                        if stream_ordered(req.op)
                            && s.pending.iter().any(|q| q.req.op == Op::Send && q.req.socket == req.socket)
                        {
                            // Behind an earlier send of its stream.
                            if req.nonblocking() {
                                finish(s, &req, buf, Err(libc::EAGAIN));
                            } else if buf.is_some() || s.pending.len() < self.config.max_pending {
                                let deadline = req.wait_limit().map(|w| now + w);
                                s.pending.push(Pending { req, buf, deadline });
                            } else {
                                finish(s, &req, buf, Err(libc::ENOBUFS));
                            }
                            continue;
                        }
                        let r = execute(
                            s,
                            &mut self.iface,
                            &mut req,
                            buf,
                            now,
                            &mut Context {
                                scratch: &mut self.scratch,
                                config: &self.config,
                                lending: &self.lending,
                                steering: &self.steering,
                                stats: &mut self.stats,
                            },
                        );
                        // A socket now on a port another client had: the
                        // bind returns once no frame sent to it can be
                        // steered into that client's region.
                        let unsettled = match (&r, req.op) {
                            (Ok(Some(done)), Op::UdpBind | Op::Listen) => u32::try_from(done.value)
                                .ok()
                                .and_then(|id| s.ports.get(&id).copied())
                                .filter(|&(proto, port)| !self.steering.settled(proto, port)),
                            _ => None,
                        };
                        if let Some(port) = unsettled {
                            let c = completion(s, &req, buf, r);
                            s.held.push((port, c));
                            self.stats.binds_held += 1;
                            continue;
                        }
                        match r {
                            // Lent to the engine: completed when it lets go.
                            Ok(Some(Done { lent: true, value, .. })) => accepted(s, &req, value),
                            // A request holding a buffer is bounded by the
                            // client's pool; the others by `max_pending`.
                            Ok(None) if buf.is_some() || s.pending.len() < self.config.max_pending => {
                                let deadline = req.wait_limit().map(|w| now + w);
                                s.pending.push(Pending { req, buf, deadline });
                            }
                            Ok(None) => finish(s, &req, buf, Err(libc::ENOBUFS)),
                            r => finish(s, &req, buf, r),
                        }
                    }
                    Err(e) => {
                        self.stats.bad_descriptors += 1;
                        s.bad += 1;
                        refuse(s, d, e);
                    }
                }
            }
            if s.bad > self.config.max_bad {
                s.doomed = Some("too many bad descriptors");
            }
        }
        flush(s, &mut self.stats);
        work
    }

    /// Buffers the engine let go of: the driver they went to posts their
    /// completion (a `RETURN` queued behind their frames), or netd does;
    /// and completions a dead driver left behind.
    fn settle_lent_buffers(&mut self) -> bool {
        let mut work = false;
        let generation = match &self.frames {
            FramePath::Driver(d) => d.generation(),
            FramePath::Inline(_) => None,
        };
        for (key, index, lent) in self.lending.take_released() {
            work = true;
            let Some(s) = self.sessions.iter_mut().find(|s| s.conn.id == key) else { continue };
            let mut c = lent.completion;
            if let Some([posted, taken, engine_done, handed]) = lent.trace {
                // Handed to a driver: until then; else until the device
                // (inside netd) was written and the engine let go.
                let sent = if handed != 0 { handed } else { nagare_ipc::monotonic_ns() };
                c.aux[1] = pack_stages(
                    taken.saturating_sub(posted),
                    engine_done.saturating_sub(taken),
                    sent.saturating_sub(engine_done),
                );
            }
            if s.pool.give(index).is_err() {
                c.buffer = nagare_ipc::NO_BUFFER;
                c.offset = 0;
                c.len = 0;
            }
            let by_driver = match (&mut self.frames, lent.handed) {
                (FramePath::Driver(d), Some(g)) if generation == Some(g) => d.post_return(key, c),
                _ => false,
            };
            if !by_driver {
                s.out.push(c);
                flush(s, &mut self.stats);
            }
        }
        if let FramePath::Driver(d) = &mut self.frames {
            for (key, c) in d.take_orphans() {
                work = true;
                if let Some(s) = self.sessions.iter_mut().find(|s| s.conn.id == key) {
                    s.out.push(c);
                    flush(s, &mut self.stats);
                }
            }
        }
        work
    }

    /// Completes every waiting `Stat` request with the report, made once
    /// for all of them (it needs every session, so it cannot be made while
    /// one of them is being served).
    fn answer_stat_requests(&mut self) -> bool {
        let waiting = |s: &Session| s.pending.iter().any(|p| p.req.op == Op::Stat);
        if !self.sessions.iter().any(waiting) {
            return false;
        }
        let text = self.report(self.config.buffer_size as usize);
        for s in self.sessions.iter_mut().filter(|s| waiting(s)) {
            let (stats, rest): (Vec<Pending>, Vec<Pending>) =
                std::mem::take(&mut s.pending).into_iter().partition(|p| p.req.op == Op::Stat);
            s.pending = rest;
            for p in stats {
                let r = match p.buf {
                    Some(b) => {
                        let n = text.len().min(b.len as usize);
                        match s.pool.write(b.index, b.offset, &text.as_bytes()[..n]) {
                            Ok(()) => Ok(Some(Done::received(n as u64, 0, n as u32))),
                            Err(_) => Err(libc::EFAULT),
                        }
                    }
                    None => Err(libc::EFAULT),
                };
                finish(s, &p.req, p.buf, r);
            }
            flush(s, &mut self.stats);
        }
        true
    }

    /// What `nagare stat` shows, at most `limit` bytes.
    pub fn report(&mut self, limit: usize) -> String {
        let clients: Vec<crate::report::ClientLine> = self
            .sessions
            .iter()
            .map(|s| {
                let count = |f: fn(&Sock) -> bool| s.sockets.values().filter(|k| f(k)).count();
                let (_, netd_held, client_held) = s.pool.counts();
                let receive = self.steering.pool_size(s.conn.id) as u32;
                crate::report::ClientLine {
                    id: s.conn.id,
                    pid: s.conn.cred.pid,
                    uid: s.conn.cred.uid,
                    tcp: count(|k| matches!(k, Sock::Tcp(_))),
                    listeners: count(|k| matches!(k, Sock::Listener(_))),
                    udp: count(|k| matches!(k, Sock::Udp(_))),
                    echo: count(|k| matches!(k, Sock::Echo(_))),
                    pending: s.pending.len(),
                    buffers_client: client_held,
                    buffers_netd: netd_held.saturating_sub(receive),
                    buffers_receive: receive,
                    buffers_total: s.pool.len(),
                    bad: s.bad,
                }
            })
            .collect();
        let counters = self.iface.counters().clone();
        let mut engine = counters.iter();
        crate::report::Report {
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            placement: self.placement.name(),
            driver: match &self.frames {
                FramePath::Driver(d) => Some((d.pid(), d.link_stats(), d.driver_counters())),
                FramePath::Inline(_) => None,
            },
            link: &self.config.link,
            clients: &clients,
            stats: self.stats,
            engine: &mut engine,
            engine_buffers: self.iface.pool().stats(),
        }
        .render(limit)
    }

    /// Sleeps until a client, the device, a new client or a timer needs us.
    /// Returns whether the listener is readable.
    fn sleep(&mut self) -> io::Result<bool> {
        if let FramePath::Driver(d) = &mut self.frames {
            if d.prepare_sleep() {
                return Ok(false);
            }
        }
        for s in &mut self.sessions {
            if s.completions.free().is_ok_and(|f| (f as usize) <= s.pending.len() + s.out.len() + s.held.len()) {
                // Its completion ring is full: its requests cannot be taken
                // before it drains, so they must not keep us awake; its
                // wake-up or the sleep's timeout brings us back.
                continue;
            }
            match s.waiter.prepare_sleep(&mut s.requests) {
                Ok(Some(_)) => return Ok(false),
                Ok(None) => {}
                Err(_) => {
                    s.doomed = Some("request ring broken");
                    return Ok(false);
                }
            }
        }
        let now = self.clock.now();
        let next = match (self.iface.poll_at(), self.frames.device().poll_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let deadline = self.sessions.iter().flat_map(|s| s.pending.iter().filter_map(|p| p.deadline)).min();
        let next = match (next, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut timeout = next.map_or(MAX_SLEEP, |t| t.saturating_since(now)).min(MAX_SLEEP);
        if !self.iface.tx_queue().is_empty() {
            timeout = timeout.min(Duration::from_millis(1));
        }
        if timeout.is_zero() {
            return Ok(false);
        }
        let mut fds = Vec::with_capacity(4 + 2 * self.sessions.len());
        let pfd = |fd: i32| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let [link_a, link_b] = match &self.frames {
            FramePath::Inline(d) => [d.raw_fd().unwrap_or(-1), -1],
            FramePath::Driver(d) => d.sleep_fds(),
        };
        fds.push(pfd(link_a));
        fds.push(pfd(link_b));
        fds.push(pfd(self.listener.fd().as_raw_fd()));
        for s in &self.sessions {
            fds.push(pfd(s.waiter.fd().as_raw_fd()));
            fds.push(pfd(s.conn.liveness_fd().as_raw_fd()));
        }
        let millis = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        self.stats.sleeps += 1;
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if let FramePath::Driver(d) = &mut self.frames {
            d.after_sleep(fds[0].revents != 0);
        }
        for (k, s) in self.sessions.iter_mut().enumerate() {
            let wake = fds[3 + 2 * k].revents;
            let live = fds[4 + 2 * k].revents;
            if wake != 0 {
                let _ = s.waiter.woke(&s.requests);
            } else {
                s.waiter.set_polling(&s.requests);
            }
            if live != 0 && s.conn.peer_gone() {
                s.doomed = Some("gone");
            }
        }
        // The driver's control socket hung up: it died; housekeeping now.
        Ok(fds[2].revents != 0 || fds[1].revents != 0)
    }

    /// A client leaves (exit, death, broken rings, netd stopping): its
    /// sockets are reset or closed, its buffers return, its region goes.
    fn disconnect(&mut self, mut s: Session, why: &str) {
        let now = self.clock.now();
        let sockets = s.sockets.len();
        for (_, (proto, port)) in s.ports.drain() {
            self.steering.unbind(proto, port);
        }
        for (_, sock) in s.sockets.drain() {
            let _ = match sock {
                Sock::Tcp(h) => self.iface.tcp_abort(h, now),
                Sock::Listener(l) => self.iface.tcp_listener_close(l, now),
                Sock::Udp(h) => self.iface.udp_close(h),
                Sock::Echo(h) => self.iface.echo_close(h),
            };
        }
        for p in s.pending.drain(..) {
            if let Some(b) = p.buf {
                let _ = s.pool.release(b.index);
            }
        }
        let reclaimed = s.pool.reclaim_peer();
        // Buffers the engine still holds are lent, not leaked: their views
        // keep the region mapped until the engine lets go.
        // So are netd's own receive buffers in the region.
        let lent = self.lending.lent_by(s.conn.id) as u32;
        let receive = self.steering.pool_size(s.conn.id) as u32;
        let (_, in_use, _) = s.pool.counts();
        let in_use = in_use.saturating_sub(lent + receive);
        self.lending.remove_client(s.conn.id);
        self.steering.remove_client(s.conn.id);
        if let FramePath::Driver(d) = &mut self.frames {
            d.detach(s.conn.id);
        }
        self.stats.sockets_reclaimed += sockets as u64;
        self.stats.buffers_reclaimed += u64::from(reclaimed);
        self.stats.buffers_leaked += u64::from(in_use);
        if why == "gone" {
            self.stats.clients_gone += 1;
        } else if why != "netd stopping" {
            self.stats.clients_broken += 1;
        }
        eprintln!(
            "nagare netd: client {} (pid {}) {why}: {sockets} sockets closed, {reclaimed} buffers reclaimed, {lent} lent to the stack, {in_use} in use",
            s.conn.id, s.conn.cred.pid
        );
        // Flush what the engine sent (RSTs) before the session's region goes.
        let _ = self.frames.device().transmit_batch(self.iface.tx_queue(), now);
        drop(s);
    }
}

/// Posts the session's completions that fit in its ring.
fn flush(s: &mut Session, stats: &mut NetdStats) {
    if !s.out.is_empty() {
        match s.notifier.push_batch(&mut s.completions, &s.out) {
            Ok(n) => {
                stats.completions += n as u64;
                s.out.drain(..n);
            }
            Err(_) => s.doomed = Some("completion ring broken"),
        }
    }
}

/// Nothing done yet: a non-blocking request fails with `EAGAIN`, another
/// waits.
fn blocked(req: &Request) -> Result<Option<Done>, i32> {
    if req.nonblocking() {
        Err(libc::EAGAIN)
    } else {
        Ok(None)
    }
}

/// A stream's send of `view` copied into the send buffer: as much as fits
/// now, or it waits.
fn send_copied(
    iface: &mut Interface,
    h: TcpHandle,
    view: nagare_ipc::SharedBytes,
    req: &Request,
    now: Instant,
    stats: &mut NetdStats,
) -> Result<Option<Done>, i32> {
    // SAFETY: payload the engine copies into the send buffer once and
    // never interprets; a client racing its own buffer changes only its
    // stream.
    match iface.tcp_send(h, unsafe { view.as_slice() }, now) {
        Ok(n) if n > 0 || view.is_empty() => {
            stats.tx_payload_copied += n as u64;
            Ok(Some(Done::value(n as u64)))
        }
        Ok(_) | Err(EngineError::WouldBlock) => blocked(req),
        Err(e) => Err(engine_errno(e)),
    }
}

/// A request whose buffer the engine now holds: one that completes on
/// accept completes now, without its buffer (which comes back with the
/// completion posted when the engine lets go).
fn accepted(s: &mut Session, req: &Request, value: u64) {
    if req.completes_on_accept() {
        s.out.push(Completion::ok(req, value).encode());
    }
}

/// Posts the completion of `req`, handing its buffer back.
fn finish(s: &mut Session, req: &Request, buf: Option<BufRef>, r: Result<Option<Done>, i32>) {
    let c = completion(s, req, buf, r);
    s.out.push(c);
}

/// The completion of `req`; its buffer is handed back.
fn completion(s: &mut Session, req: &Request, buf: Option<BufRef>, r: Result<Option<Done>, i32>) -> Descriptor {
    // A receive completed in place hands over the buffer its data lies in;
    // the request's stays with netd.
    let buf = match &r {
        Ok(Some(Done { swapped: Some(b), .. })) => Some(*b),
        _ => buf,
    };
    let mut c = match r {
        Ok(Some(d)) => {
            let mut c = Completion::ok(req, d.value);
            c.aux[1] = d.addr;
            c.aux[2] = d.extra;
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
        if s.pool.give(b.index).is_err() {
            c.piece = None;
        }
    }
    c.encode()
}

/// Refuses a descriptor that did not decode; a buffer it validly named is
/// handed straight back, so a bad request does not strand it.
fn refuse(s: &mut Session, d: &Descriptor, e: ProtoError) {
    let mut c = Completion::refused(d, e.errno());
    if let Ok(Some(b)) = s.pool.take(d) {
        if s.pool.give(b.index).is_ok() {
            c.piece = Some(Piece { buffer: b.index, offset: b.offset, len: 0 });
        }
    }
    s.out.push(c.encode());
}

/// Ops that must not overtake a waiting send on their socket: more data,
/// and the end of the stream. (A close does not wait: sends still waiting
/// for room then fail, their socket gone, as data a closed socket never
/// took.)
fn stream_ordered(op: Op) -> bool {
    matches!(op, Op::Send | Op::Shutdown)
}

fn tcp_of(s: &Session, id: u32) -> Result<TcpHandle, i32> {
    match s.sockets.get(&id) {
        Some(Sock::Tcp(h)) => Ok(*h),
        Some(_) => Err(libc::EOPNOTSUPP),
        None => Err(libc::EBADF),
    }
}

/// What running a request needs of netd besides the session and engine.
struct Context<'a> {
    scratch: &'a mut Vec<u8>,
    config: &'a NetdConfig,
    lending: &'a Lending,
    steering: &'a Steering,
    stats: &'a mut NetdStats,
}

/// Runs a request against the engine: `Ok(Some)` done, `Ok(None)` it must
/// wait (the caller keeps it pending), `Err(errno)` failed.
fn execute(
    s: &mut Session,
    iface: &mut Interface,
    req: &mut Request,
    buf: Option<BufRef>,
    now: Instant,
    cx: &mut Context<'_>,
) -> Result<Option<Done>, i32> {
    let Context { scratch, config, lending, steering, stats } = cx;
    // The client's bytes to send, in place: the engine copies them once
    // into its own buffers (a private copy first would be a second).
    let payload = |pool: &Pool| -> Result<nagare_ipc::SharedBytes, i32> {
        let b = buf.ok_or(libc::EFAULT)?;
        pool.shared(b.index, b.offset, b.len).map_err(|_| libc::EFAULT)
    };
    // A private copy, for bytes netd interprets (a poll list).
    let data = |pool: &Pool, scratch: &mut Vec<u8>| -> Result<(), i32> {
        let b = buf.ok_or(libc::EFAULT)?;
        scratch.clear();
        scratch.resize(b.len as usize, 0);
        pool.read(b.index, b.offset, scratch).map_err(|_| libc::EFAULT)
    };
    match req.op {
        Op::UdpBind => {
            let local = decode_addr(req.aux[0]).map_err(|e| e.errno())?;
            let h = iface.udp_bind(local).map_err(engine_errno)?;
            let local = iface.udp_socket(h).map_or(local, |u| u.local());
            let id = s.add_socket(Sock::Udp(h), config.max_sockets).inspect_err(|_| {
                let _ = iface.udp_close(h);
            })?;
            s.claim_port(steering, id, UDP, local.port());
            Ok(Some(Done::with_addr(u64::from(id), encode_addr(local))))
        }
        Op::SendTo => {
            let Some(Sock::Udp(h)) = s.sockets.get(&req.socket).copied() else {
                return Err(if s.sockets.contains_key(&req.socket) { libc::EOPNOTSUPP } else { libc::EBADF });
            };
            let dst = decode_addr(req.aux[0]).map_err(|e| e.errno())?;
            let b = buf.ok_or(libc::EFAULT)?;
            // Zero copy unless the datagram stays here: a receiving
            // socket's queue could hold the sender's buffer indefinitely.
            if req.lends() && !iface.has_address(*dst.ip()) && b.len > 0 {
                let taken = req.trace_time().map(|_| nagare_ipc::monotonic_ns());
                let mut done = Completion::ok(req, u64::from(b.len));
                done.piece = Some(Piece { buffer: b.index, offset: b.offset, len: b.len });
                let key = s.conn.id;
                let payload =
                    lending.lend(key, &s.pool, b.index, b.offset, b.len, done.encode()).ok_or(libc::EFAULT)?;
                if let Err(e) = iface.udp_send_buf(h, payload, dst, now) {
                    lending.unlend(key, b.index);
                    return Err(engine_errno(e));
                }
                if let (Some(posted), Some(taken)) = (req.trace_time(), taken) {
                    lending.trace(key, b.index, posted, taken, nagare_ipc::monotonic_ns());
                }
                stats.sends_in_place += 1;
                stats.tx_payload_in_place += u64::from(b.len);
                return Ok(Some(Done { lent: true, ..Done::value(u64::from(b.len)) }));
            }
            let view = payload(&s.pool)?;
            // SAFETY: payload the engine copies and sums, never interprets;
            // a client racing its own buffer changes only its datagram.
            iface.udp_send_to(h, unsafe { view.as_slice() }, dst, now).map_err(engine_errno)?;
            stats.tx_payload_copied += view.len() as u64;
            Ok(Some(Done::value(view.len() as u64)))
        }
        Op::RecvFrom => {
            let Some(Sock::Udp(h)) = s.sockets.get(&req.socket).copied() else {
                return Err(if s.sockets.contains_key(&req.socket) { libc::EOPNOTSUPP } else { libc::EBADF });
            };
            let b = buf.ok_or(libc::EFAULT)?;
            match iface.udp_recv(h).map_err(engine_errno)? {
                Some(d) => {
                    // The result is the datagram's whole length (as with
                    // MSG_TRUNC); the piece's length what fit.
                    let whole = d.payload.len() as u64;
                    let source = encode_addr(d.source);
                    let payload = match received_in_place(s, steering, b, d.payload) {
                        Ok(swapped) => {
                            stats.rx_payload_in_place += u64::from(swapped.len);
                            return Ok(Some(Done {
                                swapped: Some(swapped),
                                ..Done::received(whole, source, swapped.len)
                            }));
                        }
                        Err(payload) => payload,
                    };
                    let n = copy_to_region(&mut s.pool, b, &payload)?;
                    stats.rx_payload_copied += u64::from(n);
                    Ok(Some(Done::received(whole, source, n)))
                }
                None => blocked(req),
            }
        }
        Op::Listen => {
            let local = decode_addr(req.aux[0]).map_err(|e| e.errno())?;
            let l = iface.tcp_listen(local, req.aux[1] as usize).map_err(engine_errno)?;
            let id = s.add_socket(Sock::Listener(l), config.max_sockets).inspect_err(|_| {
                let _ = iface.tcp_listener_close(l, now);
            })?;
            s.claim_port(steering, id, TCP, local.port());
            Ok(Some(Done::with_addr(u64::from(id), encode_addr(local))))
        }
        Op::Accept => {
            let l = match s.sockets.get(&req.socket) {
                Some(Sock::Listener(l)) => *l,
                Some(_) => return Err(libc::EINVAL),
                None => return Err(libc::EBADF),
            };
            if s.sockets.len() >= config.max_sockets {
                return Err(libc::EMFILE);
            }
            match iface.tcp_accept(l).map_err(engine_errno)? {
                Some(h) => {
                    let remote = iface.tcp_connection(h).map(|c| c.remote());
                    let id = match s.add_socket(Sock::Tcp(h), config.max_sockets) {
                        Ok(id) => id,
                        Err(e) => {
                            // Nobody could ever name it: reset it now.
                            let _ = iface.tcp_abort(h, now);
                            return Err(e);
                        }
                    };
                    if let Some(local) = iface.tcp_connection(h).map(|c| c.local()) {
                        s.claim_port(steering, id, TCP, local.port());
                    }
                    Ok(Some(Done::with_addr(u64::from(id), remote.map_or(0, encode_addr))))
                }
                None => blocked(req),
            }
        }
        Op::Connect => {
            if req.socket == 0 {
                let remote = decode_addr(req.aux[0]).map_err(|e| e.errno())?;
                if s.sockets.len() >= config.max_sockets {
                    return Err(libc::EMFILE);
                }
                let h = iface.tcp_connect(remote, req.aux[1] as u16, now).map_err(engine_errno)?;
                // The socket exists from now on, so the client's death
                // while it waits resets it; the waiting request names it.
                req.socket = s.add_socket(Sock::Tcp(h), config.max_sockets)?;
                if let Some(local) = iface.tcp_connection(h).map(|c| c.local()) {
                    s.claim_port(steering, req.socket, TCP, local.port());
                }
            }
            let h = tcp_of(s, req.socket)?;
            let state = iface.tcp_state(h).map_err(engine_errno)?;
            let done = || {
                let local = iface.tcp_connection(h).map(|c| c.local());
                Ok(Some(Done::with_addr(u64::from(req.socket), local.map_or(0, encode_addr))))
            };
            if state.is_synchronized() {
                return done();
            }
            if state == State::Closed || iface.tcp_readiness(h).map(|r| r.closed).unwrap_or(true) {
                let e = iface.tcp_send(h, &[], now).err().map_or(libc::ECONNREFUSED, engine_errno);
                s.remove_socket(steering, req.socket);
                let _ = iface.tcp_abort(h, now);
                return Err(e);
            }
            if req.nonblocking() {
                return done();
            }
            Ok(None)
        }
        Op::Send if req.lends() => {
            let h = tcp_of(s, req.socket)?;
            let b = buf.ok_or(libc::EFAULT)?;
            if b.len == 0 {
                return Ok(Some(Done::value(0)));
            }
            let conn = iface.tcp_connection(h).ok_or(libc::EBADF)?;
            if conn.send_closed() {
                // Reset, refused, timed out: that error; else shut down.
                return Err(iface.tcp_send(h, &[], now).err().map_or(libc::EPIPE, engine_errno));
            }
            if conn.send_free() < b.len as usize {
                if req.completes_on_accept() && conn.send_free() > 0 {
                    // A std `write`: what fits now, copied, as a socket's
                    // send takes it; waiting for room for all of it would
                    // make a writer told the stream is writable spin.
                    return send_copied(iface, h, payload(&s.pool)?, req, now, stats);
                }
                // The whole buffer goes in at once, or the request waits.
                return blocked(req);
            }
            let mut done = Completion::ok(req, u64::from(b.len));
            done.piece = Some(Piece { buffer: b.index, offset: b.offset, len: b.len });
            let key = s.conn.id;
            let payload = lending.lend(key, &s.pool, b.index, b.offset, b.len, done.encode()).ok_or(libc::EFAULT)?;
            match iface.tcp_send_buf(h, payload, now) {
                Ok(rest) if rest.is_empty() => {}
                // Checked to fit: a remainder is dropped here and the loan
                // completes when the queued part is acknowledged.
                Ok(_) => stats.bad_buffers += 1,
                Err(e) => {
                    lending.unlend(key, b.index);
                    return Err(engine_errno(e));
                }
            }
            stats.tx_payload_in_place += u64::from(b.len);
            Ok(Some(Done { lent: true, ..Done::value(u64::from(b.len)) }))
        }
        Op::Send => {
            let h = tcp_of(s, req.socket)?;
            send_copied(iface, h, payload(&s.pool)?, req, now, stats)
        }
        Op::Recv => {
            let h = tcp_of(s, req.socket)?;
            let b = buf.ok_or(libc::EFAULT)?;
            if b.len == 0 {
                return Ok(Some(Done::received(0, 0, 0)));
            }
            // The front of a steered segment in this client's region, up
            // to the end of its buffer, is read alone, so that the buffer
            // can be handed over whole (a super-segment spans several).
            let front = iface.tcp_connection(h).and_then(|c| c.recv_front());
            let in_place = front.and_then(|f| {
                let chunk = f.chunks().next()?;
                steering.locate(s.conn.id, chunk.as_ptr() as usize, chunk.len()).map(|_| chunk.len())
            });
            let want = in_place.map_or(b.len as usize, |n| n.min(b.len as usize));
            match iface.tcp_recv_buf(h, want, now) {
                Ok(Some(data)) => {
                    let data = match received_in_place(s, steering, b, data) {
                        Ok(swapped) => {
                            stats.rx_payload_in_place += u64::from(swapped.len);
                            let n = swapped.len;
                            return Ok(Some(Done { swapped: Some(swapped), ..Done::received(u64::from(n), 0, n) }));
                        }
                        Err(data) => data,
                    };
                    let n = copy_to_region(&mut s.pool, b, &data)?;
                    stats.rx_payload_copied += u64::from(n);
                    Ok(Some(Done::received(u64::from(n), 0, n)))
                }
                Ok(None) => Ok(Some(Done::received(0, 0, 0))),
                Err(EngineError::WouldBlock) => blocked(req),
                Err(e) => Err(engine_errno(e)),
            }
        }
        Op::Shutdown => {
            let h = tcp_of(s, req.socket)?;
            iface.tcp_shutdown(h, now).map_err(engine_errno)?;
            Ok(Some(Done::value(0)))
        }
        Op::EchoOpen => {
            if s.sockets.len() >= config.max_sockets {
                return Err(libc::EMFILE);
            }
            let h = iface.echo_open(req.aux[0] as u16).map_err(engine_errno)?;
            let id = s.add_socket(Sock::Echo(h), config.max_sockets).inspect_err(|_| {
                let _ = iface.echo_close(h);
            })?;
            Ok(Some(Done::value(u64::from(id))))
        }
        Op::EchoSend => {
            let Some(Sock::Echo(h)) = s.sockets.get(&req.socket).copied() else {
                return Err(if s.sockets.contains_key(&req.socket) { libc::EOPNOTSUPP } else { libc::EBADF });
            };
            let dst = decode_addr(req.aux[0]).map_err(|e| e.errno())?;
            let view = payload(&s.pool)?;
            // SAFETY: as for datagrams: the echo data is copied, not read.
            iface.echo_send(h, *dst.ip(), req.aux[1] as u16, unsafe { view.as_slice() }, now).map_err(engine_errno)?;
            Ok(Some(Done::value(view.len() as u64)))
        }
        Op::EchoRecv => {
            let Some(Sock::Echo(h)) = s.sockets.get(&req.socket).copied() else {
                return Err(if s.sockets.contains_key(&req.socket) { libc::EOPNOTSUPP } else { libc::EBADF });
            };
            match iface.echo_recv(h).map_err(engine_errno)? {
                Some(event) => Ok(Some(echo_done(event))),
                None => blocked(req),
            }
        }
        Op::Poll => {
            let b = buf.ok_or(libc::EFAULT)?;
            data(&s.pool, scratch)?;
            let mut ready = 0u64;
            for chunk in scratch.chunks_exact_mut(PollEntry::SIZE) {
                let mut bytes = [0u8; PollEntry::SIZE];
                bytes.copy_from_slice(chunk);
                let mut e = PollEntry::from_bytes(bytes);
                e.ready = readiness(s, iface, e);
                ready += u64::from(e.ready != 0);
                chunk.copy_from_slice(&e.to_bytes());
            }
            if ready == 0 && !req.nonblocking() {
                return Ok(None);
            }
            s.pool.write(b.index, b.offset, scratch).map_err(|_| libc::EFAULT)?;
            Ok(Some(Done::received(ready, 0, b.len)))
        }
        Op::Nop => Ok(Some(Done::value(0))),
        // Answered after every session was served (`answer_stat_requests`).
        Op::Stat => Ok(None),
        Op::Close => {
            let sock = s.remove_socket(steering, req.socket).ok_or(libc::EBADF)?;
            match sock {
                Sock::Udp(h) => iface.udp_close(h),
                Sock::Tcp(h) => iface.tcp_close(h, now),
                Sock::Listener(l) => iface.tcp_listener_close(l, now),
                Sock::Echo(h) => iface.echo_close(h),
            }
            .map_err(engine_errno)?;
            Ok(Some(Done::value(0)))
        }
    }
}

/// What one socket of a `Poll` is ready for: the interest it asked about,
/// and `CLOSED`/`INVALID` always.
fn readiness(s: &Session, iface: &Interface, e: PollEntry) -> u16 {
    let want = e.interest & (READABLE | WRITABLE);
    let bit = |on: bool, b: u16| if on { b } else { 0 };
    let bits = |r: bool, w: bool| bit(r, READABLE) | bit(w, WRITABLE);
    let ready = match s.sockets.get(&e.socket) {
        None => return INVALID,
        Some(Sock::Tcp(h)) => match iface.tcp_readiness(*h) {
            Ok(r) => bits(r.readable, r.writable) | bit(r.closed, CLOSED),
            Err(_) => CLOSED,
        },
        Some(Sock::Listener(l)) => match iface.tcp_listener_readiness(*l) {
            Ok(r) => bits(r.readable, false),
            Err(_) => CLOSED,
        },
        Some(Sock::Udp(h)) => bits(iface.udp_socket(*h).is_some_and(|u| u.queued() > 0), true),
        Some(Sock::Echo(h)) => bits(iface.echo_socket(*h).is_some_and(|x| x.queued() > 0), true),
    };
    ready & (want | CLOSED)
}

/// An echo socket's event as a completion: data length, sender, and the
/// packed sequence/TTL/code word.
fn echo_done(event: EchoEvent) -> Done {
    let host = |a| encode_addr(std::net::SocketAddrV4::new(a, 0));
    let (len, from, word) = match event {
        EchoEvent::Reply { from, seq_no, data_len, ttl, .. } => {
            (data_len as u64, host(from), EchoWord::Reply { seq: seq_no, ttl })
        }
        EchoEvent::Error { seq_no, error: IcmpError::Unreachable { from, code } } => {
            (0, host(from), EchoWord::Unreachable { seq: seq_no, code })
        }
        EchoEvent::Error { seq_no, error: IcmpError::TimeExceeded { from, code } } => {
            (0, host(from), EchoWord::TimeExceeded { seq: seq_no, code })
        }
    };
    Done { value: len, addr: from, len: None, extra: word.encode(), swapped: None, lent: false }
}

pub(crate) fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
