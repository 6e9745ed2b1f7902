//! TCP: listen, accept, connect, send, recv, shutdown, and a connection's
//! options.
//!
//! A socket exists in the client's table from the moment the engine has
//! it (a connect's half-open connection included), so the client's death
//! at any point resets it. A send lent in place goes into the send buffer
//! whole or waits; a copied send takes what fits. A receive of data that
//! lies in the client's region takes one steered buffer's worth, so that
//! the buffer can be handed over whole.
//!
//! A new connection (connect, accept) and a buffer resize are sized to
//! fit its client's memory budget and netd's cap (`crate::memory`): a
//! connection past its client's first ones starts at the floor, growing
//! with use, and past the budget gets `ENOBUFS`; a resize gets what fits.

use super::deliver::{copy_to_region, received_in_place};
use super::{
    address, address6, blocked, buffer, check_port, encode_end, engine_errno, local6, payload, Caller, Context, Done,
    Outcome,
};
use crate::memory::{connection_charge, BUFFER_FLOOR};
use crate::sockets::{ClientSockets, Sock};
use crate::steering::TCP;
use nagare_core::iface::Error as EngineError;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use nagare_ipc::{BufRef, SharedBytes};
use nagare_request::{
    encode_accepted, Completion, Op, Piece, Request, SockOption, ADDR_ELSEWHERE, SHUT_READ, SHUT_WRITE, V6_ONLY,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// `LISTEN`: a listener on `aux[0]` with backlog `aux[1]`; `LISTEN6`: on
/// an IPv6 address (`aux[0..3]`), v6-only or dual stack, backlog `aux[3]`.
pub(super) fn listen(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let l = match req.op {
        Op::Listen6 => {
            let backlog = req.aux[3] as usize;
            let local = local6(req)?;
            check_port(cx, c, local.port())?;
            match local {
                SocketAddr::V6(six) if req.aux[2] & V6_ONLY != 0 => cx.iface.tcp().listen_v6_only(six, backlog),
                local => cx.iface.tcp().listen(local, backlog),
            }
        }
        _ => {
            let local = address(req.aux[0])?;
            check_port(cx, c, local.port())?;
            cx.iface.tcp().listen(local, req.aux[1] as usize)
        }
    }
    .map_err(engine_errno)?;
    let local = cx.iface.tcp_ref().listener_local(l).ok_or(libc::EBADF)?;
    let id = c.sockets.add(Sock::Listener(l), cx.config.max_sockets).inspect_err(|_| {
        let _ = cx.iface.tcp().listener_close(l, cx.now);
    })?;
    c.sockets.claim_port(cx.steering, id, TCP, local.port());
    Ok(Some(Done::with_addr(u64::from(id), encode_end(local))))
}

/// `ACCEPT`: the listener's next connection, or wait for one.
pub(super) fn accept(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let l = c.sockets.listener(req.socket)?;
    c.sockets.room(cx.config.max_sockets)?;
    let Some(h) = cx.iface.tcp().accept(l).map_err(engine_errno)? else { return blocked(req) };
    cx.sharing.exclusive.accepted(l, c.key);
    let ends = cx.iface.tcp_ref().connection(h).map(|k| (k.local(), k.remote()));
    let added = fit_buffers(cx, c.key, h).and_then(|()| c.sockets.add(Sock::Tcp(h), cx.config.max_sockets));
    let id = match added {
        Ok(id) => id,
        Err(e) => {
            // Nobody could ever name it: reset it now.
            let _ = cx.iface.tcp().abort(h, cx.now);
            return Err(e);
        }
    };
    cx.memory.charge(c.key, id, connection_charge(cx.iface, h));
    if let Some((local, _)) = ends {
        c.sockets.claim_port(cx.steering, id, TCP, local.port());
    }
    // An IPv6 connection's addresses do not fit the words: the peer word
    // says so, and the client asks for both (`Op::Name`).
    let (local_ip, remote) = match ends {
        Some((SocketAddr::V4(l), r)) => (*l.ip(), encode_end(r)),
        Some((SocketAddr::V6(_), _)) => (Ipv4Addr::UNSPECIFIED, ADDR_ELSEWHERE),
        None => (Ipv4Addr::UNSPECIFIED, 0),
    };
    let done = Done::with_addr(encode_accepted(id, local_ip), remote);
    Ok(Some(Done { extra: socket_buffers(cx, h), ..done }))
}

/// The sizes of connection `h`'s send and receive buffers, which a
/// connect or accept completion carries in `aux[2]` and `aux[3]`: the
/// client keeps its queued sends within the first, so that the engine has
/// room for every one, and about the second posted for receives, so that
/// netd can always take a window's worth out of the engine.
fn socket_buffers(cx: &Context<'_>, h: TcpHandle) -> [u64; 2] {
    cx.iface.tcp_ref().connection(h).map_or([0; 2], |k| [k.send_buffer() as u64, k.recv_buffer() as u64])
}

/// Sizes new connection `h`'s buffers to what client `key` may be
/// charged: as they are if they fit, else started at the floor
/// (`buffers_shrunk`), to grow with use as grants allow, else `ENOBUFS`
/// (`memory_refused`). A buffer holding more than that already keeps
/// what it holds.
fn fit_buffers(cx: &mut Context<'_>, key: u64, h: TcpHandle) -> Result<(), i32> {
    let k = cx.iface.tcp_ref().connection(h).ok_or(libc::EBADF)?;
    let (send, recv) = (k.send_buffer(), k.recv_buffer());
    let mut grant = cx.memory.grant_connection(key, send, recv);
    if grant != Some((send, recv)) && cx.memory.has_orphans() {
        // Closed connections done with their FIN exchange give their room
        // back first.
        cx.memory.settle(cx.iface);
        grant = cx.memory.grant_connection(key, send, recv);
    }
    let Some((s, r)) = grant else {
        cx.stats.memory_refused += 1;
        return Err(libc::ENOBUFS);
    };
    let mut tcp = cx.iface.tcp();
    if s < send || r < recv {
        cx.stats.buffers_shrunk += 1;
        tcp.start_buffers(h, s.max(BUFFER_FLOOR), r.max(BUFFER_FLOOR), cx.now).map_err(engine_errno)?;
        return Ok(());
    }
    // Growth past the buffers waits for a grant (`grow_buffer`).
    tcp.set_recv_buffer_ceiling(h, recv, cx.now).map_err(engine_errno)?;
    tcp.set_send_buffer_ceiling(h, send, cx.now).map_err(engine_errno)?;
    Ok(())
}

/// Which of a connection's buffers a grant is for.
#[derive(Clone, Copy)]
enum Grown {
    Receive,
    Send,
}

/// Grants connection `h` (socket `id` of client `key`) the buffer its
/// autotuning wants past its ceiling, as far as `Memory::grant_growth`
/// allows (the client charged at most a quarter of its budget), and
/// charges it to every holder (`recv_buffers_grown`, `send_buffers_grown`;
/// `recv_buffer_growth_refused`, `send_buffer_growth_refused` when
/// nothing could be granted: the engine asks again a round trip on while
/// the reader keeps up, or once a buffer's worth of bytes is
/// acknowledged). Called as its client reads or sends: a buffer grows
/// only while its application keeps up, or writes faster than the buffer
/// lets it. Where frames are steered into the clients' regions, a window
/// past the receive buffers netd keeps there has the frames that find
/// none copied, as without steering.
fn grow_buffer(cx: &mut Context<'_>, key: u64, id: u32, h: TcpHandle, which: Grown) {
    let Some(k) = cx.iface.tcp_ref().connection(h) else { return };
    let (ceiling, wanted, other) = match which {
        Grown::Receive => (k.recv_buffer_ceiling(), k.recv_buffer_wanted(), k.send_buffer_ceiling()),
        Grown::Send => (k.send_buffer_ceiling(), k.send_buffer_wanted(), k.recv_buffer_ceiling()),
    };
    if wanted <= ceiling {
        return;
    }
    let granted = cx.memory.grant_growth(key, id, ceiling, other, wanted);
    let mut tcp = cx.iface.tcp();
    if granted <= ceiling {
        let _ = match which {
            Grown::Receive => {
                cx.stats.recv_buffer_growth_refused += 1;
                tcp.refuse_recv_buffer_growth(h)
            }
            Grown::Send => {
                cx.stats.send_buffer_growth_refused += 1;
                tcp.refuse_send_buffer_growth(h)
            }
        };
        return;
    }
    let in_force = match which {
        Grown::Receive => tcp.set_recv_buffer_ceiling(h, granted, cx.now),
        Grown::Send => tcp.set_send_buffer_ceiling(h, granted, cx.now),
    };
    if in_force.is_ok_and(|in_force| in_force > ceiling) {
        match which {
            Grown::Receive => cx.stats.recv_buffers_grown += 1,
            Grown::Send => cx.stats.send_buffers_grown += 1,
        }
        charge_holders(cx, key, id, h);
    }
}

/// Charges connection `h`'s buffers as they are to socket `id` of client
/// `key`, and so to every holder of it (`Memory::charge`).
fn charge_holders(cx: &mut Context<'_>, key: u64, id: u32, h: TcpHandle) {
    cx.memory.charge(key, id, connection_charge(cx.iface, h));
}

/// The completion of a send on connection `h`: `aux[2]` is its send
/// buffer now (autotuning grows it), which the client queues up to.
fn with_send_buffer(cx: &Context<'_>, h: TcpHandle, done: Done) -> Done {
    let buffer = cx.iface.tcp_ref().connection(h).map_or(0, |k| k.send_buffer() as u64);
    Done { extra: [buffer, done.extra[1]], ..done }
}

/// `CONNECT`: on socket 0, a connection to `aux[0]` from local port
/// `aux[1]` (0: an ephemeral one), whose id the request names from then
/// on; done once it is established (at once if non-blocking), failed if
/// the engine gave up on it. `CONNECT6` the same to an IPv6 address
/// (`aux[0..3]`), the local port in `aux[2]` bits 16..32.
pub(super) fn connect(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &mut Request) -> Outcome {
    if req.socket == 0 {
        let (remote, local_port) = match req.op {
            Op::Connect6 => (address6(req), (req.aux[2] >> 16) as u16),
            _ => (SocketAddr::V4(address(req.aux[0])?), req.aux[1] as u16),
        };
        c.sockets.room(cx.config.max_sockets)?;
        check_port(cx, c, local_port)?;
        if cx.iface.tcp_ref().at_connection_limit() {
            cx.stats.connections_refused += 1;
            return Err(libc::ENFILE);
        }
        cx.memory.settle_if_short(cx.iface, c.key, 2 * BUFFER_FLOOR);
        if !cx.memory.has_room_for_connection(c.key) {
            cx.stats.memory_refused += 1;
            return Err(libc::ENOBUFS);
        }
        let h = cx.iface.tcp().connect(remote, local_port, cx.now).map_err(engine_errno)?;
        // Room for the floor was there: this cannot fail.
        let _ = fit_buffers(cx, c.key, h);
        // The socket exists from now on, so the client's death while it
        // waits resets it; the waiting request names it.
        req.socket = c.sockets.add(Sock::Tcp(h), cx.config.max_sockets)?;
        cx.memory.charge(c.key, req.socket, connection_charge(cx.iface, h));
        if let Some(local) = cx.iface.tcp_ref().connection(h).map(|k| k.local()) {
            c.sockets.claim_port(cx.steering, req.socket, TCP, local.port());
        }
    }
    let h = c.sockets.tcp(req.socket)?;
    let state = cx.iface.tcp_ref().state(h).map_err(engine_errno)?;
    let done = |cx: &Context<'_>| -> Outcome {
        let local = cx.iface.tcp_ref().connection(h).map(|k| k.local());
        let done = Done::with_addr(u64::from(req.socket), local.map_or(0, encode_end));
        Ok(Some(Done { extra: socket_buffers(cx, h), ..done }))
    };
    if state.is_synchronized() {
        return done(cx);
    }
    if state == State::Closed || cx.iface.tcp_ref().readiness(h).map(|r| r.closed).unwrap_or(true) {
        let e = cx.iface.tcp().send(h, &[], cx.now).err().map_or(libc::ECONNREFUSED, engine_errno);
        drop_failed_connect(cx, c.sockets, c.key, req.socket);
        return Err(e);
    }
    if req.nonblocking() {
        return done(cx);
    }
    Ok(None)
}

/// A connect that failed (refused, reset, timed out): nobody names the
/// connection again, so it leaves client `key`'s table and the engine.
/// A shared connection (established once, so no connect of its own: a
/// `CONNECT` naming one asks only how it is) stays, for its close to let
/// the other holders have it.
pub(crate) fn drop_failed_connect(cx: &mut Context<'_>, sockets: &mut ClientSockets, key: u64, id: u32) {
    if cx.sharing.shares.holders(key, id) > 0 {
        return;
    }
    if let Some(Sock::Tcp(h)) = sockets.remove(cx.steering, id) {
        let _ = cx.iface.tcp().abort(h, cx.now);
    }
}

/// `SEND` with `LEND`: the client's buffer goes into the send buffer in
/// place, whole, and comes back when the engine lets go (acknowledged);
/// with `COPY_SHORT`, one of at most `SHORT_SEND` bytes is copied in
/// whole, and its buffer comes back at once.
pub(super) fn send_in_place(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, buf: Option<BufRef>) -> Outcome {
    let h = c.sockets.tcp(req.socket)?;
    let b = buffer(buf)?;
    if b.len == 0 {
        return Ok(Some(Done::value(0)));
    }
    grow_buffer(cx, c.key, req.socket, h, Grown::Send);
    let conn = cx.iface.tcp_ref().connection(h).ok_or(libc::EBADF)?;
    if conn.send_closed() {
        // Reset, refused, timed out: that error; else shut down.
        return Err(cx.iface.tcp().send(h, &[], cx.now).err().map_or(libc::EPIPE, engine_errno));
    }
    if conn.send_free() < b.len as usize {
        if req.completes_on_accept() && conn.send_free() > 0 {
            // A std `write`: what fits now, copied, as a socket's send
            // takes it; waiting for room for all of it would make a writer
            // told the stream is writable spin.
            return send_copied(cx, h, payload(c.pool, buf)?, req);
        }
        // The whole buffer goes in at once, or the request waits: its
        // writer is held back by the buffer, which autotuning weighs.
        let _ = cx.iface.tcp().note_send_blocked(h);
        return blocked(req);
    }
    if copies_short(cx, h, req, b.len) {
        return send_short(cx, h, payload(c.pool, buf)?);
    }
    let mut done = Completion::ok(req, u64::from(b.len));
    // The buffer it went into (its size when the completion is posted, on
    // acknowledgement, may have grown since).
    done.aux[2] = cx.iface.tcp_ref().connection(h).map_or(0, |k| k.send_buffer() as u64);
    done.piece = Some(Piece { buffer: b.index, offset: b.offset, len: b.len });
    let packet = cx.lending.lend(c.key, c.pool, b.index, b.offset, b.len, done.encode()).ok_or(libc::EFAULT)?;
    match cx.iface.tcp().send_buf(h, packet, cx.now) {
        Ok(rest) if rest.is_empty() => {}
        // Checked to fit: a remainder is dropped here and the loan
        // completes when the queued part is acknowledged.
        Ok(_) => cx.stats.bad_buffers += 1,
        Err(e) => {
            cx.lending.unlend(c.key, b.index);
            return Err(engine_errno(e));
        }
    }
    cx.stats.tx_payload_in_place += u64::from(b.len);
    Ok(Some(Done::lent(u64::from(b.len))))
}

/// The most a connection's send buffer may hold for a `COPY_SHORT` send
/// to be copied into it: a reply's worth. The client counts a send as
/// queued until its completion, which a copied send posts at once, so
/// what netd copies is bytes the engine holds that the client's count
/// leaves out; this bounds them, and a writer that keeps the buffer full
/// has its short writes lent, counted until acknowledged.
const SHORT_QUEUED: usize = 16 * 1024;

/// Of every eight buffers of the engine's pool, the one a `COPY_SHORT`
/// copy never takes (a lent send takes none; the frames the engine
/// receives need them), and at least this many (one of `SHORT_SEND`
/// bytes takes at most two).
const SHORT_POOL_ROOM: usize = 4;

/// Whether lent send `req` of `len` bytes, which fits in connection
/// `h`'s send buffer, is copied instead: it carries `COPY_SHORT`, is at
/// most `SHORT_SEND` bytes, the buffer holds at most [`SHORT_QUEUED`],
/// and the engine's pool has room for all of it past an eighth
/// ([`SHORT_POOL_ROOM`]; a copy cut short by a dry pool would lose the
/// bytes the client was told went in).
fn copies_short(cx: &Context<'_>, h: TcpHandle, req: &Request, len: u32) -> bool {
    if !req.copies_short() || len > nagare_request::SHORT_SEND {
        return false;
    }
    let pool = cx.iface.pool().stats();
    let free = pool.capacity.saturating_sub(pool.in_use);
    cx.iface.tcp_ref().connection(h).is_some_and(|k| k.send_queued() <= SHORT_QUEUED)
        && free >= SHORT_POOL_ROOM.max(pool.capacity / 8)
}

/// A `COPY_SHORT` send's bytes copied whole into the send buffer, done at
/// once, its buffer back with the completion.
fn send_short(cx: &mut Context<'_>, h: TcpHandle, view: SharedBytes) -> Outcome {
    // SAFETY: as in `send_copied`.
    let n = cx.iface.tcp().send(h, unsafe { view.as_slice() }, cx.now).map_err(engine_errno)?;
    cx.stats.tx_payload_copied += n as u64;
    if n < view.len() {
        // Checked to fit: never taken. The bytes that went in are in the
        // stream and the rest are not: the connection is reset, so that
        // the peer never reads past the hole, and the client hears of it.
        cx.stats.bad_buffers += 1;
        let _ = cx.iface.tcp().abort(h, cx.now);
        return Err(libc::EIO);
    }
    Ok(Some(with_send_buffer(cx, h, Done::value(n as u64))))
}

/// `SEND`: the buffer's bytes copied into the send buffer, as many as fit,
/// or wait for room.
pub(super) fn send(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, buf: Option<BufRef>) -> Outcome {
    let h = c.sockets.tcp(req.socket)?;
    grow_buffer(cx, c.key, req.socket, h, Grown::Send);
    send_copied(cx, h, payload(c.pool, buf)?, req)
}

/// Room in connection `socket`'s send buffer for `bytes` more than it
/// holds: for the sends a client that went away left waiting on it. The
/// buffer is set to hold them (its size fixed, not autotuned) as far as the
/// client's budget allows; whether they all fit now.
pub(crate) fn make_room_for_sends(cx: &mut Context<'_>, c: &mut Caller<'_>, socket: u32, bytes: usize) -> bool {
    let Ok(h) = c.sockets.tcp(socket) else { return false };
    let Some(k) = cx.iface.tcp_ref().connection(h) else { return false };
    if k.send_closed() {
        return false;
    }
    let needed = k.send_queued().saturating_add(bytes);
    if needed <= k.send_buffer() {
        return true;
    }
    let granted = cx.memory.grant_resize(c.key, socket, k.send_buffer_ceiling(), k.recv_buffer_ceiling(), needed);
    if granted < needed {
        return false;
    }
    let in_force = cx.iface.tcp().set_send_buffer(h, needed, cx.now);
    charge_holders(cx, c.key, socket, h);
    in_force.is_ok_and(|n| n >= needed)
}

/// A stream's send of `view` copied into the send buffer: as much as fits
/// now, or it waits.
fn send_copied(cx: &mut Context<'_>, h: TcpHandle, view: SharedBytes, req: &Request) -> Outcome {
    // SAFETY: payload the engine copies into the send buffer once and
    // never interprets; a client racing its own buffer changes only its
    // stream.
    match cx.iface.tcp().send(h, unsafe { view.as_slice() }, cx.now) {
        Ok(n) if n > 0 || view.is_empty() => {
            cx.stats.tx_payload_copied += n as u64;
            Ok(Some(with_send_buffer(cx, h, Done::value(n as u64))))
        }
        Ok(_) | Err(EngineError::WouldBlock) => blocked(req),
        Err(e) => Err(engine_errno(e)),
    }
}

/// `RECV`: up to the buffer's length of the stream into it (0 at its end),
/// or wait for data; the completion's `aux[3]` is the connection's
/// receive buffer now.
pub(super) fn recv(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, buf: Option<BufRef>) -> Outcome {
    let h = c.sockets.tcp(req.socket)?;
    let outcome = receive(cx, c, req, h, buf)?;
    // The buffer now, which autotuning may have grown: the client keeps
    // as much posted for receives.
    let buffer = cx.iface.tcp_ref().connection(h).map_or(0, |k| k.recv_buffer() as u64);
    Ok(outcome.map(|done| Done { extra: [0, buffer], ..done }))
}

/// `RECV`'s work: the data, or the wait, of connection `h`.
fn receive(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, h: TcpHandle, buf: Option<BufRef>) -> Outcome {
    let b = buffer(buf)?;
    if b.len == 0 {
        return Ok(Some(Done::received(0, 0, 0)));
    }
    if cx.sharing.shares.has_returned(c.key, req.socket) {
        // Bytes another holder took and gave back come first.
        cx.scratch.resize(b.len as usize, 0);
        let n = cx.sharing.shares.take_returned(c.key, req.socket, cx.scratch);
        c.pool.write(b.index, b.offset, &cx.scratch[..n]).map_err(|_| libc::EFAULT)?;
        cx.stats.rx_payload_copied += n as u64;
        return Ok(Some(Done::received(n as u64, 0, n as u32)));
    }
    // The front of a steered segment in this client's region, up to the
    // end of its buffer, is read alone, so that the buffer can be handed
    // over whole (a super-segment spans several).
    let front = cx.iface.tcp_ref().connection(h).and_then(|k| k.recv_front());
    let in_place = front.and_then(|f| {
        let chunk = f.chunks().next()?;
        cx.steering.locate(c.key, chunk.as_ptr() as usize, chunk.len()).map(|_| chunk.len())
    });
    let want = in_place.map_or(b.len as usize, |n| n.min(b.len as usize));
    grow_buffer(cx, c.key, req.socket, h, Grown::Receive);
    match cx.iface.tcp().recv_buf(h, want, cx.now) {
        Ok(Some(data)) => match received_in_place(c, cx.steering, b, data) {
            Ok(swapped) => {
                cx.stats.rx_payload_in_place += u64::from(swapped.len);
                let n = swapped.len;
                Ok(Some(Done { swapped: Some(swapped), ..Done::received(u64::from(n), 0, n) }))
            }
            Err(data) => {
                let n = copy_to_region(c.pool, b, &data)?;
                cx.stats.rx_payload_copied += u64::from(n);
                Ok(Some(Done::received(u64::from(n), 0, n)))
            }
        },
        Ok(None) => Ok(Some(Done::received(0, 0, 0))),
        Err(EngineError::WouldBlock) => blocked(req),
        Err(e) => Err(engine_errno(e)),
    }
}

/// `SHUTDOWN`: the receiving side ends (what is queued and what arrives
/// later is dropped), the sending side (a FIN after what is queued), or
/// both.
pub(super) fn shutdown(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.tcp(req.socket)?;
    if req.aux[0] & SHUT_READ != 0 {
        cx.iface.tcp().shutdown_read(h, cx.now).map_err(engine_errno)?;
        // The client drops what it holds unread, as the engine does.
        c.sockets.note_read_shut(req.socket);
    }
    if req.aux[0] & SHUT_WRITE != 0 {
        cx.iface.tcp().shutdown(h, cx.now).map_err(engine_errno)?;
    }
    Ok(Some(Done::value(0)))
}

/// `SET_OPTION`: option `aux[0]` of the connection to `aux[1]` (checked
/// by the protocol); done with the value in force.
pub(super) fn set_option(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.tcp(req.socket)?;
    let option = SockOption::from_u64(req.aux[0]).ok_or(libc::ENOPROTOOPT)?;
    let value = req.aux[1];
    let bytes = usize::try_from(value).map_err(|_| libc::EINVAL)?;
    let k = cx.iface.tcp_ref().connection(h).ok_or(libc::EBADF)?;
    let (config, recv, send) = (k.config(), k.recv_buffer_ceiling(), k.send_buffer_ceiling());
    let mut fit = |current: usize, other: usize| {
        let granted = cx.memory.grant_resize(c.key, req.socket, current, other, bytes);
        cx.stats.buffers_shrunk += u64::from(granted < bytes);
        granted
    };
    let in_force = match option {
        SockOption::SendBuffer => {
            let granted = fit(send, recv);
            cx.iface.tcp().set_send_buffer(h, granted, cx.now).map(|n| n as u64)
        }
        SockOption::RecvBuffer => {
            let granted = fit(recv, send);
            cx.iface.tcp().set_recv_buffer(h, granted, cx.now).map(|n| n as u64)
        }
        SockOption::UserTimeout => {
            cx.iface.tcp().set_user_timeout(h, Some(Duration::from_millis(value))).map(|()| value)
        }
        SockOption::NoDelay => cx.iface.tcp().set_nodelay(h, value != 0).map(|()| value),
        SockOption::ResetOnClose => cx.iface.tcp().set_reset_on_close(h, value != 0).map(|()| value),
        SockOption::KeepIdle | SockOption::KeepInterval | SockOption::KeepCount => {
            let secs = |d: Duration| d.as_secs();
            let (mut idle, mut interval, mut probes) =
                (config.keepalive.map_or(0, secs), secs(config.keepalive_interval), u64::from(config.keepalive_probes));
            match option {
                SockOption::KeepIdle => idle = value,
                SockOption::KeepInterval => interval = value,
                _ => probes = value,
            }
            let idle = (idle > 0).then(|| Duration::from_secs(idle));
            let probes = u32::try_from(probes).map_err(|_| libc::EINVAL)?;
            cx.iface.tcp().set_keepalive(h, idle, Duration::from_secs(interval), probes).map(|()| value)
        }
        SockOption::Priority => return super::control::set_priority(cx, c, req),
    };
    let in_force = in_force.map_err(engine_errno)?;
    charge_holders(cx, c.key, req.socket, h);
    Ok(Some(Done::value(in_force)))
}

/// `GET_OPTION`: the value of option `aux[0]` of the connection.
pub(super) fn get_option(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.tcp(req.socket)?;
    let option = SockOption::from_u64(req.aux[0]).ok_or(libc::ENOPROTOOPT)?;
    let k = cx.iface.tcp_ref().connection(h).ok_or(libc::EBADF)?;
    let config = k.config();
    let value = match option {
        SockOption::SendBuffer => k.send_buffer() as u64,
        SockOption::RecvBuffer => k.recv_buffer() as u64,
        SockOption::UserTimeout => config.user_timeout.map_or(0, |d| d.as_millis().min(u128::from(u32::MAX)) as u64),
        SockOption::NoDelay => u64::from(!config.nagle),
        SockOption::ResetOnClose => u64::from(config.reset_on_close),
        SockOption::KeepIdle => config.keepalive.map_or(0, |d| d.as_secs()),
        SockOption::KeepInterval => config.keepalive_interval.as_secs(),
        SockOption::KeepCount => u64::from(config.keepalive_probes),
        SockOption::Priority => return super::control::get_priority(c, req),
    };
    Ok(Some(Done::value(value)))
}
