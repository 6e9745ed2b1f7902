//! Requests about sockets of any kind, or about netd itself: close, poll,
//! a socket's priority and addresses, nop, stat; and about the client:
//! the process that holds it (pid).
//!
//! A poll reads the client's list into netd's own copy first (netd
//! interprets those bytes, and the client can write its buffer at any
//! time), fills in each entry's readiness and writes the list back; it
//! waits while nothing is ready, unless it is non-blocking.

use super::{buffer, engine_errno, private_copy, Caller, Context, Done, Outcome};
use crate::priority::{self, ClientPriority, Priority, Source};
use crate::sharing::LetGo;
use crate::sockets::{ClientSockets, Sock};
use nagare_core::Interface;
use nagare_ipc::BufRef;
use nagare_request::{
    encode_addr6, PollEntry, Request, CLOSED, CLOSE_RESET, EXCLUSIVE, INVALID, NAME_PEER, READABLE, WRITABLE,
};
use std::net::{SocketAddr, SocketAddrV6};

/// `CLOSE`: the socket leaves the table and, unless another client holds
/// it too (`crate::shares`), is closed in the engine, or
/// reset (`CLOSE_RESET`: its client left received data unread; or
/// `max_orphans` closed connections are held already, `orphans_reset`).
/// A connection the engine keeps after its close stays charged as an
/// orphan (`crate::memory`).
pub(super) fn close(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let charge = cx.memory.socket_charged(c.key, req.socket);
    let sock = c.sockets.remove(cx.steering, req.socket).ok_or(libc::EBADF)?;
    if let Sock::Listener(l) = sock {
        cx.sharing.exclusive.let_go(l, c.key);
    }
    let other = cx.sharing.shares.other_holder(c.key, req.socket);
    match cx.sharing.let_go(c.key, req.socket) {
        LetGo::Close => {}
        left => {
            // Another client holds it too, or a descriptor of a program
            // yet to adopt it: it stays open for them, and a UDP socket's
            // datagrams are theirs to PacketFlow from now on.
            if let Sock::Udp(h) = sock {
                cx.receivers.hand_over(h, (c.key, req.socket), other);
            }
            if let LetGo::Watched(token) = left {
                cx.memory.keep_watched(token, c.key, charge);
            }
            return Ok(Some(Done::value(0)));
        }
    }
    match sock {
        Sock::Udp(h) => cx.receivers.remove(h),
        Sock::Listener(l) => cx.sharing.exclusive.forget_listener(l),
        _ => {}
    }
    let mut reset = req.aux[0] & CLOSE_RESET != 0;
    if let (Sock::Tcp(_), false) = (sock, reset) {
        if cx.memory.orphans_full(cx.iface) {
            cx.stats.orphans_reset += 1;
            reset = true;
        }
    }
    if reset {
        sock.reset(cx.iface, cx.now).map_err(engine_errno)?;
    } else {
        sock.close(cx.iface, cx.now).map_err(engine_errno)?;
        if let Sock::Tcp(h) = sock {
            cx.memory.keep_orphan(cx.iface, Some(c.key), h, charge);
        }
    }
    Ok(Some(Done::value(0)))
}

/// `SET_OPTION` of `SockOption::Priority`, for a socket of any kind:
/// `aux[1]` its own priority (100 to 139), or 0 for its client's again;
/// done with the priority in force. A UDP socket's queue above the
/// maximum the new priority gives it is cut back (PacketFlow's memory
/// manager).
pub(super) fn set_priority(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let sock = c.sockets.get(req.socket).ok_or(libc::EBADF)?;
    let own = match u8::try_from(req.aux[1]) {
        Ok(0) => None,
        Ok(v) if (priority::HIGHEST..=priority::LOWEST).contains(&v) => Some(v),
        _ => return Err(libc::EINVAL),
    };
    c.sockets.set_priority(req.socket, own);
    if let Sock::Udp(h) = sock {
        cx.receivers.set_own(h, own);
        if let (Some(mm), Some(dest)) = (cx.mm, cx.receivers.destination(h)) {
            mm.fit(cx.iface, cx.memory, h, &dest);
        }
    }
    Ok(Some(Done::value(u64::from(socket_priority(c.sockets, c.priority, req.socket).value))))
}

/// `GET_OPTION` of `SockOption::Priority`: the priority in force.
pub(super) fn get_priority(c: &mut Caller<'_>, req: &Request) -> Outcome {
    c.sockets.get(req.socket).ok_or(libc::EBADF)?;
    Ok(Some(Done::value(u64::from(socket_priority(c.sockets, c.priority, req.socket).value))))
}

/// Socket `id`'s priority: its own, or its client's (`client`).
pub(crate) fn socket_priority(sockets: &ClientSockets, client: Priority, id: u32) -> Priority {
    match sockets.priority(id) {
        Some(value) => Priority { value, source: Source::Option },
        None => client,
    }
}

/// `POLL`: the readiness of every socket the buffer's entries name. A
/// waiting poll's `EXCLUSIVE` entry on a listener is readable only with a
/// wake-up of its client's own (`crate::exclusive`).
pub(super) fn poll(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, buf: Option<BufRef>) -> Outcome {
    let b = buffer(buf)?;
    private_copy(c.pool, buf, cx.scratch)?;
    let mut ready = 0u64;
    for chunk in cx.scratch.chunks_exact_mut(PollEntry::SIZE) {
        let mut bytes = [0u8; PollEntry::SIZE];
        bytes.copy_from_slice(chunk);
        let mut e = PollEntry::from_bytes(bytes);
        e.ready = readiness(c.sockets, cx.iface, e);
        if e.interest & EXCLUSIVE != 0 && !req.nonblocking() {
            if let Some(Sock::Listener(l)) = c.sockets.get(e.socket) {
                let queued = cx.iface.tcp_ref().accept_queue_len(l).unwrap_or(0);
                if !cx.sharing.exclusive.take(l, c.key, queued) {
                    e.ready &= !READABLE;
                }
            }
        }
        if cx.sharing.shares.has_returned(c.key, e.socket) {
            e.ready |= e.interest & READABLE;
        }
        ready += u64::from(e.ready != 0);
        chunk.copy_from_slice(&e.to_bytes());
    }
    if ready == 0 && !req.nonblocking() {
        return Ok(None);
    }
    c.pool.write(b.index, b.offset, cx.scratch).map_err(|_| libc::EFAULT)?;
    Ok(Some(Done::received(ready, 0, b.len)))
}

/// What one socket of a poll is ready for: the interest it asked about,
/// and `CLOSED`/`INVALID` always.
fn readiness(sockets: &ClientSockets, iface: &Interface, e: PollEntry) -> u16 {
    let want = e.interest & (READABLE | WRITABLE);
    let bit = |on: bool, b: u16| if on { b } else { 0 };
    let bits = |r: bool, w: bool| bit(r, READABLE) | bit(w, WRITABLE);
    let ready = match sockets.get(e.socket) {
        None => return INVALID,
        Some(Sock::Tcp(h)) => match iface.tcp_ref().readiness(h) {
            Ok(r) => bits(r.readable, r.writable) | bit(r.closed, CLOSED),
            Err(_) => CLOSED,
        },
        Some(Sock::Listener(l)) => match iface.tcp_ref().listener_readiness(l) {
            Ok(r) => bits(r.readable, false),
            Err(_) => CLOSED,
        },
        // An error the next read reports (a hard ICMP error about a
        // connected socket's datagram, `udp::socket_error`) is readable,
        // as Linux's POLLERR wakes a reader; one it drops is not.
        Some(Sock::Udp(h)) => {
            let readable = iface.udp_ref().socket(h).is_some_and(|u| {
                u.queued() > 0 || (u.peer().is_some() && u.error().and_then(super::udp_errors::hard_errno).is_some())
            });
            bits(readable, true)
        }
        Some(Sock::Echo(h)) => {
            bits(iface.icmp_ref().echo_socket(h).is_some_and(|x| x.queued() + x.queued6() > 0), true)
        }
    };
    ready & (want | CLOSED)
}

/// `PID`: process `aux[0]`, a child of the client's process of the same
/// user (a child after `fork` that took the session its parent made for
/// it), is the client's from now on: its nice value sets the client's
/// priority, and the report names it. `EPERM` for any other process.
pub(super) fn pid(c: &mut Caller<'_>, req: &Request) -> Outcome {
    let pid = i32::try_from(req.aux[0]).map_err(|_| libc::EINVAL)?;
    if !crate::os::is_child_of(pid, *c.pid, c.uid) {
        return Err(libc::EPERM);
    }
    // A nice value netd lifted goes back to the process it lifted.
    c.process.unlift();
    *c.process = ClientPriority::of_process(pid);
    *c.pid = pid;
    *c.may_bind_privileged = crate::access::may_bind_after_move(*c.may_bind_privileged, pid);
    Ok(Some(Done::value(0)))
}

/// `NOP`: done at once (what a request's round trip costs).
/// `NAME`: socket `socket`'s own address (`aux[0]` `NAME_LOCAL`) or its
/// peer's (`NAME_PEER`), as an IPv6 one (an IPv4 one mapped) in the
/// completion's first three words. A socket without a peer, or a
/// connection the engine has let go of, has none: `ENOTCONN`.
pub(super) fn name(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let sock = c.sockets.get(req.socket).ok_or(libc::EBADF)?;
    let peer = req.aux[0] == NAME_PEER;
    let addr = match sock {
        Sock::Tcp(h) => {
            let k = cx.iface.tcp_ref().connection(h).ok_or(libc::ENOTCONN)?;
            if peer {
                k.remote()
            } else {
                k.local()
            }
        }
        Sock::Listener(l) if !peer => cx.iface.tcp_ref().listener_local(l).ok_or(libc::EBADF)?,
        Sock::Udp(h) if !peer => cx.iface.udp_ref().socket(h).map(|u| u.local_addr()).ok_or(libc::EBADF)?,
        _ => return Err(libc::ENOTCONN),
    };
    let six = match addr {
        SocketAddr::V4(a) => SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0),
        SocketAddr::V6(a) => a,
    };
    let [hi, lo, port] = encode_addr6(six);
    Ok(Some(Done { extra: [port, 0], ..Done::with_addr(hi, lo) }))
}

pub(super) fn nop() -> Outcome {
    Ok(Some(Done::value(0)))
}

/// `STAT`: waits; every waiting stat request is answered with one report
/// once every session has been served this turn (the report needs them
/// all).
pub(super) fn stat() -> Outcome {
    Ok(None)
}
