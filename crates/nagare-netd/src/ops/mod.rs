//! One function per request operation; [`execute`], which routes a
//! request to its function and notes what every operation of a kind
//! changes (the bytes a receive delivered, a share that may wake other
//! clients); and [`may_progress`], which tells a waiting request that
//! could get further from one that could not.
//!
//! An operation runs against the engine at once and says what it came to
//! ([`Outcome`]): done (`Ok(Some)`), nothing yet (`Ok(None)`: the request
//! waits and runs again when it may get further), or failed
//! (`Err(errno)`). It touches
//! the client's sockets and buffers and the engine, never its rings:
//! whether a request may wait, in what order, and what its completion
//! carries is decided in one place, `crate::requests`.
//!
//! - `udp`: bind, connect, sendto, recvfrom (of either family);
//!   `udp_errors`: the ICMP errors a connected socket's calls report.
//! - `tcp`: listen, accept, connect, send, recv, shutdown, set and get
//!   options.
//! - `icmp`: the echo (ping) socket: open, send, receive (ICMP and ICMPv6).
//! - `control`: close (any socket), poll, nop, stat.
//! - `share`: a socket held by several clients: share, adopt, give back.
//! - `deliver`: received data into the client's buffer, copied or handed
//!   over in place.

mod control;
mod deliver;
mod icmp;
mod share;
mod tcp;
mod udp;
mod udp_errors;

pub(crate) use control::socket_priority;
pub(crate) use tcp::{drop_failed_connect, make_room_for_sends};

use crate::config::NetdConfig;
use crate::lending::Lending;
use crate::memory::Memory;
use crate::packetflow::{MemoryManager, Receivers};
use crate::priority::{ClientPriority, Priority};
use crate::sharing::Sharing;
use crate::sockets::{ClientSockets, Sock};
use crate::stats::NetdStats;
use crate::steering::Steering;
use nagare_core::iface::Error as EngineError;
use nagare_core::{Instant, Interface};
use nagare_ipc::{BufRef, Pool, SharedBytes};
use nagare_request::{decode_addr, decode_addr6, encode_addr, Op, Request, SockOption, ADDR_ELSEWHERE};
use std::net::{SocketAddr, SocketAddrV4};

/// What a request came to: `Ok(Some)` done, `Ok(None)` it must wait,
/// `Err(errno)` failed.
pub(crate) type Outcome = Result<Option<Done>, i32>;

/// A request done: what its completion says.
pub(crate) struct Done {
    pub value: u64,
    pub addr: u64,
    /// For a receive: the bytes now in the buffer.
    pub len: Option<u32>,
    /// For a receive: the payload bytes among them (records' heads not
    /// counted), which the client's socket holds unread once it completes.
    pub delivered: u64,
    /// `aux[2]` and `aux[3]` of the completion.
    pub extra: [u64; 2],
    /// For a receive completed in place: the buffer the data lies in,
    /// which the completion names instead of the request's (netd keeps
    /// that one).
    pub swapped: Option<BufRef>,
    /// The request's buffer is lent to the engine: no completion now, or,
    /// for one that completes on accept, one without the buffer.
    pub lent: bool,
}

impl Done {
    pub fn value(value: u64) -> Done {
        Done { value, addr: 0, len: None, delivered: 0, extra: [0; 2], swapped: None, lent: false }
    }

    pub fn with_addr(value: u64, addr: u64) -> Done {
        Done { value, addr, len: None, delivered: 0, extra: [0; 2], swapped: None, lent: false }
    }

    pub fn received(value: u64, addr: u64, len: u32) -> Done {
        Done { value, addr, len: Some(len), delivered: u64::from(len), extra: [0; 2], swapped: None, lent: false }
    }

    /// The request's buffer went to the engine, `value` bytes of it.
    pub fn lent(value: u64) -> Done {
        Done { lent: true, ..Done::value(value) }
    }
}

/// What an operation may use of netd besides the client: the engine and
/// the tables it shares with the driver.
pub(crate) struct Context<'a> {
    pub iface: &'a mut Interface,
    pub now: Instant,
    /// A private copy of bytes netd interprets (a poll list), kept between
    /// requests so that none allocates.
    pub scratch: &'a mut Vec<u8>,
    /// Room for the descriptors taken off a client's request ring in one
    /// turn, kept between turns.
    pub descriptors: &'a mut Vec<nagare_ipc::Descriptor>,
    /// Set when a request changed what another client's waiting requests
    /// may get without an event of their sockets (a socket shared, taken
    /// back, or given bytes back): every client's run again next turn.
    pub wake_all: &'a mut bool,
    pub config: &'a NetdConfig,
    pub lending: &'a Lending,
    pub steering: &'a Steering,
    /// What each client's sockets are charged.
    pub memory: &'a Memory,
    pub stats: &'a mut NetdStats,
    /// The UDP sockets PacketFlow's modules ask about.
    pub receivers: &'a mut Receivers,
    /// PacketFlow's memory manager, if it runs: what a UDP socket's
    /// queue starts at and may grow to.
    pub mm: Option<MemoryManager>,
    /// Sockets held by several clients.
    pub sharing: &'a mut Sharing,
}

/// The client a request comes from: its key, sockets and region buffers.
pub(crate) struct Caller<'a> {
    pub key: u64,
    /// The user the client runs as.
    pub uid: u32,
    pub sockets: &'a mut ClientSockets,
    pub pool: &'a mut Pool,
    /// The client's own priority (its process's).
    pub priority: Priority,
    /// The pid of the client's process, and what netd reads of it.
    pub pid: &'a mut i32,
    pub process: &'a mut ClientPriority,
    /// Whether the client may bind a privileged port at all: the process
    /// that connected could, and every one it moved to (`PID`) can.
    pub may_bind_privileged: &'a mut bool,
}

/// `EACCES` unless client `c` may bind `port` (`crate::access`): a port
/// below the unprivileged start takes `CAP_NET_BIND_SERVICE`.
fn check_port(cx: &mut Context<'_>, c: &Caller<'_>, port: u16) -> Result<(), i32> {
    if crate::access::may_bind(*c.may_bind_privileged, *c.pid, port, cx.config.unprivileged_port_start) {
        return Ok(());
    }
    cx.stats.ports_refused += 1;
    Err(libc::EACCES)
}

/// Runs `req` (which brought `buf`, if it names one) for `c`.
pub(crate) fn execute(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &mut Request, buf: Option<BufRef>) -> Outcome {
    let outcome = dispatch(cx, c, req, buf);
    if matches!(req.op, Op::Share | Op::Adopt | Op::GiveBack | Op::Reclaim) {
        *cx.wake_all = true;
    }
    if let (Op::Recv | Op::RecvFrom, Ok(Some(done))) = (req.op, &outcome) {
        c.sockets.note_delivered(req.socket, done.delivered);
    }
    outcome
}

/// Whether waiting request `req` of client `key` (whose sockets are
/// `sockets`) could get further if it ran again now. Only a receive or an
/// accept whose socket has nothing for it is told apart, from the
/// engine's state and without taking anything: every socket keeps
/// receives posted (and every listener an accept) while it is idle, and
/// running each of them again on every turn would make a turn cost as
/// much as all the idle sockets of every client.
pub(crate) fn may_progress(cx: &Context<'_>, key: u64, sockets: &ClientSockets, req: &Request) -> bool {
    match (req.op, sockets.get(req.socket)) {
        (Op::Recv, Some(Sock::Tcp(h))) => {
            cx.sharing.shares.has_returned(key, req.socket)
                || cx.iface.tcp_ref().connection(h).is_none_or(|k| k.can_recv())
        }
        (Op::RecvFrom, Some(Sock::Udp(h))) => {
            cx.iface.udp_ref().socket(h).is_none_or(|u| u.queued() > 0 || u.has_error())
        }
        (Op::Accept, Some(Sock::Listener(l))) => cx.iface.tcp_ref().listener_readiness(l).map_or(true, |r| r.readable),
        _ => true,
    }
}

/// The operation `req` names.
fn dispatch(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &mut Request, buf: Option<BufRef>) -> Outcome {
    match req.op {
        Op::UdpBind | Op::UdpBind6 => udp::bind(cx, c, req),
        Op::SendTo | Op::SendTo6 => udp::send_to(cx, c, req, buf),
        Op::RecvFrom => udp::recv_from(cx, c, req, buf),
        Op::UdpConnect => udp::connect(cx, c, req),
        Op::Listen | Op::Listen6 => tcp::listen(cx, c, req),
        Op::Accept => tcp::accept(cx, c, req),
        Op::Connect | Op::Connect6 => tcp::connect(cx, c, req),
        Op::Name => control::name(cx, c, req),
        Op::Pid => control::pid(c, req),
        Op::Send if req.lends() => tcp::send_in_place(cx, c, req, buf),
        Op::Send => tcp::send(cx, c, req, buf),
        Op::Recv => tcp::recv(cx, c, req, buf),
        Op::Shutdown => tcp::shutdown(cx, c, req),
        Op::SetOption if req.aux[0] == SockOption::Priority as u64 => control::set_priority(cx, c, req),
        Op::GetOption if req.aux[0] == SockOption::Priority as u64 => control::get_priority(c, req),
        Op::SetOption if is_udp_recv_buffer(c, req) => udp::set_recv_buffer(cx, c, req),
        Op::GetOption if is_udp_recv_buffer(c, req) => udp::get_recv_buffer(cx, c, req),
        Op::SetOption => tcp::set_option(cx, c, req),
        Op::GetOption => tcp::get_option(cx, c, req),
        Op::EchoOpen => icmp::open(cx, c, req),
        Op::EchoSend | Op::EchoSend6 => icmp::send(cx, c, req, buf),
        Op::EchoRecv => icmp::recv(cx, c, req),
        Op::Close => control::close(cx, c, req),
        Op::Poll => control::poll(cx, c, req, buf),
        Op::Nop => control::nop(),
        Op::Stat => control::stat(),
        Op::Share => share::share(cx, c, req),
        Op::Adopt => share::adopt(cx, c, req),
        Op::GiveBack => share::give_back(cx, c, req, buf),
        Op::Reclaim => share::reclaim(cx, c, req),
    }
}

/// Whether `req` is about `SO_RCVBUF` of a UDP socket (its receive
/// queue; the other options are a connection's).
fn is_udp_recv_buffer(c: &Caller<'_>, req: &Request) -> bool {
    req.aux[0] == SockOption::RecvBuffer as u64 && c.sockets.udp(req.socket).is_ok()
}

/// An engine socket's address as one word of a completion: an IPv4 one
/// as [`encode_addr`] makes it, an IPv6 one [`ADDR_ELSEWHERE`] (the
/// client asks [`Op::Name`]).
pub(crate) fn encode_end(a: SocketAddr) -> u64 {
    match a {
        SocketAddr::V4(v4) => encode_addr(v4),
        SocketAddr::V6(_) => ADDR_ELSEWHERE,
    }
}

/// The errno for an engine error.
pub(crate) fn engine_errno(e: EngineError) -> i32 {
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
        EngineError::HostUnreachable => libc::EHOSTUNREACH,
    }
}

/// Nothing done yet: a non-blocking request fails with `EAGAIN`, another
/// waits.
fn blocked(req: &Request) -> Outcome {
    if req.nonblocking() {
        Err(libc::EAGAIN)
    } else {
        Ok(None)
    }
}

/// The address in an aux word.
fn address(word: u64) -> Result<SocketAddrV4, i32> {
    decode_addr(word).map_err(|e| e.errno())
}

/// The IPv6 address in a request's first three aux words (the port in
/// the third's low 16 bits, as `Op::Listen6`, `Op::Connect6`,
/// `Op::UdpBind6` and `Op::SendTo6` carry it).
fn address6(req: &Request) -> SocketAddr {
    SocketAddr::V6(decode_addr6([req.aux[0], req.aux[1], req.aux[2] & 0xffff]))
}

/// The local address of a `LISTEN6` or `UDP_BIND6`: an IPv4-mapped one
/// (`::ffff:a.b.c.d`) is its IPv4 address, as Linux binds an `AF_INET6`
/// socket there (IPv4 alone, its ends reported mapped by the client),
/// and `V6_ONLY` refuses it (`EINVAL`, as Linux does).
fn local6(req: &Request) -> Result<SocketAddr, i32> {
    let local = address6(req);
    let SocketAddr::V6(six) = local else { return Ok(local) };
    match six.ip().to_ipv4_mapped() {
        Some(_) if req.aux[2] & nagare_request::V6_ONLY != 0 => Err(libc::EINVAL),
        Some(ip) => Ok(SocketAddr::V4(SocketAddrV4::new(ip, six.port()))),
        None => Ok(local),
    }
}

/// The buffer a request must have brought.
fn buffer(buf: Option<BufRef>) -> Result<BufRef, i32> {
    buf.ok_or(libc::EFAULT)
}

/// The client's bytes to send, in place: the engine copies them once into
/// its own buffers (a private copy first would be a second).
fn payload(pool: &Pool, buf: Option<BufRef>) -> Result<SharedBytes, i32> {
    let b = buffer(buf)?;
    pool.shared(b.index, b.offset, b.len).map_err(|_| libc::EFAULT)
}

/// A private copy of the request's bytes into `scratch`, for bytes netd
/// interprets.
fn private_copy(pool: &Pool, buf: Option<BufRef>, scratch: &mut Vec<u8>) -> Result<(), i32> {
    let b = buffer(buf)?;
    scratch.clear();
    scratch.resize(b.len as usize, 0);
    pool.read(b.index, b.offset, scratch).map_err(|_| libc::EFAULT)
}
