//! UDP: bind, connect, sendto, recvfrom, and the receive queue's size
//! (`SO_RCVBUF`).
//!
//! A connected socket's `SENDTO` or `RECVFROM` fails first with the ICMP
//! error the engine kept about a datagram to its peer, once, if Linux
//! would report it (`udp_errors`); the client's data path keeps it for
//! the socket's next call, as `SO_ERROR`.
//!
//! A datagram goes out in place (the client's buffer lent to the engine,
//! completed when the engine lets go) when the client lends it and it
//! leaves netd; otherwise the engine copies it. A received datagram is
//! handed over in place or copied (`deliver`); the result is its whole
//! length, the completion's piece what fit. A receive that asks for a
//! batch gets, unless its first datagram is handed over in place, that
//! datagram and as many more as fit whole, copied as records
//! (`nagare_request::records`). A socket's receive queue is charged to
//! its client (`crate::memory`): a fixed size without PacketFlow's memory
//! manager, a starting size it grows with it, or what the application
//! sized.

use super::deliver::{copy_to_region, received_in_place};
use super::udp_errors::hard_errno;
use super::{
    address, address6, blocked, buffer, check_port, encode_end, engine_errno, local6, payload, Caller, Context, Done,
    Outcome,
};
use crate::memory::UDP_RECV_QUEUE;
use crate::sockets::Sock;
use crate::steering::UDP;
use nagare_core::buf::PacketBuf;
use nagare_core::UdpHandle;
use nagare_ipc::{BufRef, Pool};
use nagare_request::records::{next_record, record_head, record_header, RECORD_ADDR6, RECORD_HEADER};
use nagare_request::{encode_sender, Completion, Op, Piece, Request, BATCH, RECORDS, SENDER6, V6_ONLY};
use std::net::{SocketAddr, SocketAddrV4};

/// `UDP_BIND`: a socket on `aux[0]` (port 0: an ephemeral one);
/// `UDP_BIND6`: on an IPv6 address (`aux[0..3]`), dual stack on `::`
/// unless `V6_ONLY`; on an IPv4-mapped one, an IPv4 socket on its IPv4
/// address (`local6`).
pub(super) fn bind(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let local = match req.op {
        Op::UdpBind6 => local6(req)?,
        _ => SocketAddr::V4(address(req.aux[0])?),
    };
    check_port(cx, c, local.port())?;
    let h = match local {
        SocketAddr::V6(six) if six.ip().is_unspecified() && req.aux[2] & V6_ONLY == 0 => {
            cx.iface.udp().bind6_dual_stack(six.port())
        }
        SocketAddr::V6(six) => cx.iface.udp().bind6(six),
        SocketAddr::V4(four) => cx.iface.udp().bind(four),
    }
    .map_err(engine_errno)?;
    let local = cx.iface.udp_ref().socket(h).map(|u| u.local_addr()).ok_or(libc::EBADF)?;
    // Its receive queue: as much as its client's budget leaves, at most
    // `UDP_RECV_QUEUE` (the memory manager's starting size for its
    // client's priority, with it), at least the floor.
    let most = cx.mm.map_or(UDP_RECV_QUEUE, |mm| mm.start(c.priority.value));
    let want = cx.iface.udp_ref().socket(h).map_or(0, |u| u.queue_limits().1).min(most);
    cx.memory.settle_if_short(cx.iface, c.key, want);
    let Some(queue) = cx.memory.grant_queue(c.key, want) else {
        cx.stats.memory_refused += 1;
        let _ = cx.iface.udp().close(h);
        return Err(libc::ENOBUFS);
    };
    cx.stats.buffers_shrunk += u64::from(queue < want);
    let queue = cx.iface.udp().set_recv_queue_limit(h, queue).map_err(engine_errno)?;
    let id = c.sockets.add(Sock::Udp(h), cx.config.max_sockets).inspect_err(|_| {
        let _ = cx.iface.udp().close(h);
    })?;
    cx.memory.charge(c.key, id, queue);
    c.sockets.claim_port(cx.steering, id, UDP, local.port());
    cx.receivers.add(h, c.key, id);
    Ok(Some(Done::with_addr(u64::from(id), encode_end(local))))
}

/// `UDP_CONNECT`: the socket's peer (`aux[0..3]`, an IPv4 one mapped),
/// or none when all three words are 0. As Linux's: an IPv4 peer of a
/// v6-only socket fails with `ENETUNREACH`, an IPv6 one of an IPv4
/// socket with `EAFNOSUPPORT`. An error the engine kept before is
/// dropped: it came while the socket had no peer.
pub(super) fn connect(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    let peer = match address6(req) {
        _ if req.aux[..3] == [0; 3] => None,
        SocketAddr::V6(six) => {
            let socket = cx.iface.udp_ref().socket(h).ok_or(libc::EBADF)?;
            match (six.ip().to_ipv4_mapped(), socket.local_addr()) {
                (Some(ip), SocketAddr::V4(_)) => Some(SocketAddr::V4(SocketAddrV4::new(ip, six.port()))),
                (Some(ip), SocketAddr::V6(_)) if socket.is_dual_stack() => {
                    Some(SocketAddr::V4(SocketAddrV4::new(ip, six.port())))
                }
                (Some(_), SocketAddr::V6(_)) => return Err(libc::ENETUNREACH),
                (None, SocketAddr::V4(_)) => return Err(libc::EAFNOSUPPORT),
                (None, SocketAddr::V6(_)) => Some(SocketAddr::V6(six)),
            }
        }
        SocketAddr::V4(_) => return Err(libc::EINVAL),
    };
    let mut udp = cx.iface.udp();
    udp.take_error(h).map_err(engine_errno)?;
    udp.connect(h, peer).map_err(engine_errno)?;
    Ok(Some(Done::value(0)))
}

/// The error socket `h`'s next call fails with: the ICMP error the
/// engine kept, taken, if the socket is connected and Linux reports it
/// (a hard one); any other is dropped.
fn socket_error(cx: &mut Context<'_>, h: UdpHandle) -> Result<(), i32> {
    let Some(error) = cx.iface.udp().take_error(h).map_err(engine_errno)? else { return Ok(()) };
    let connected = cx.iface.udp_ref().socket(h).is_some_and(|u| u.peer().is_some());
    match hard_errno(error) {
        Some(errno) if connected => {
            cx.stats.udp_errors_reported += 1;
            Err(errno)
        }
        _ => Ok(()),
    }
}

/// `SET_OPTION` of `SO_RCVBUF` on a UDP socket: sizes its receive queue
/// (shrunk no lower than what it holds, grown as far as its client's
/// budget allows) and fixes it: PacketFlow's memory manager does not
/// grow it again, as Linux leaves a buffer its application sized.
pub(super) fn set_recv_buffer(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    let bytes = usize::try_from(req.aux[1]).map_err(|_| libc::EINVAL)?;
    let current = cx.iface.udp_ref().socket(h).ok_or(libc::EBADF)?.queue_limits().1;
    let granted = cx.memory.grant_resize(c.key, req.socket, current, 0, bytes);
    cx.stats.buffers_shrunk += u64::from(granted < bytes);
    let in_force = cx.iface.udp().set_recv_queue_limit(h, granted).map_err(engine_errno)?;
    cx.memory.charge(c.key, req.socket, in_force);
    cx.receivers.set_sized(h);
    Ok(Some(Done::value(in_force as u64)))
}

/// `GET_OPTION` of `SO_RCVBUF` on a UDP socket: its receive queue's size
/// in force.
pub(super) fn get_recv_buffer(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    let limit = cx.iface.udp_ref().socket(h).ok_or(libc::EBADF)?.queue_limits().1;
    Ok(Some(Done::value(limit as u64)))
}

/// `SENDTO`: the buffer's bytes to `aux[0]`; `SENDTO6`: to the IPv6
/// address in `aux[0..3]` (an IPv4-mapped one over IPv4, from a
/// dual-stack socket or one bound to an IPv4-mapped address;
/// `ENETUNREACH` from a v6-only one, as Linux says; an IPv6 one from a
/// socket bound to an IPv4-mapped address, `EAFNOSUPPORT`).
pub(super) fn send_to(
    cx: &mut Context<'_>,
    c: &mut Caller<'_>,
    req: &Request,
    buf: Option<nagare_ipc::BufRef>,
) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    socket_error(cx, h)?;
    let dst = match (req.op, address6(req)) {
        (Op::SendTo6, SocketAddr::V6(six)) => {
            // Of IPv4: an IPv4 socket, or a dual-stack IPv6 one.
            let four =
                cx.iface.udp_ref().socket(h).map_or((false, false), |u| (u.local_addr().is_ipv4(), u.is_dual_stack()));
            match (six.ip().to_ipv4_mapped(), four) {
                (Some(ip), (true, _) | (_, true)) => SocketAddr::V4(SocketAddrV4::new(ip, six.port())),
                (Some(_), _) => return Err(libc::ENETUNREACH),
                (None, (true, _)) => return Err(libc::EAFNOSUPPORT),
                (None, _) => SocketAddr::V6(six),
            }
        }
        _ => SocketAddr::V4(address(req.aux[0])?),
    };
    // Delivered here, not on the device: to our own addresses, and to
    // 127.0.0.0/8 and `::1`.
    let local = match dst {
        SocketAddr::V4(v4) => cx.iface.is_local(*v4.ip()),
        SocketAddr::V6(v6) => cx.iface.is_local6(*v6.ip()),
    };
    let b = buffer(buf)?;
    // Zero copy unless the datagram stays here: a receiving socket's queue
    // could hold the sender's buffer indefinitely.
    if req.lends() && !local && b.len > 0 {
        let taken = req.trace_time().map(|_| nagare_ipc::monotonic_ns());
        let mut done = Completion::ok(req, u64::from(b.len));
        done.piece = Some(Piece { buffer: b.index, offset: b.offset, len: b.len });
        let packet = cx.lending.lend(c.key, c.pool, b.index, b.offset, b.len, done.encode()).ok_or(libc::EFAULT)?;
        let sent = match dst {
            SocketAddr::V4(v4) => cx.iface.udp().send_buf(h, packet, v4, cx.now),
            SocketAddr::V6(v6) => cx.iface.udp().send_buf6(h, packet, v6, cx.now),
        };
        if let Err(e) = sent {
            cx.lending.unlend(c.key, b.index);
            return Err(engine_errno(e));
        }
        if let (Some(posted), Some(taken)) = (req.trace_time(), taken) {
            cx.lending.trace(c.key, b.index, posted, taken, nagare_ipc::monotonic_ns());
        }
        cx.stats.sends_in_place += 1;
        cx.stats.tx_payload_in_place += u64::from(b.len);
        return Ok(Some(Done::lent(u64::from(b.len))));
    }
    let view = payload(c.pool, buf)?;
    if let (Some(mm), true) = (cx.mm, local) {
        // Delivered here, past the frame path where the memory manager
        // sees received datagrams: it sees this one now.
        let receiver = match dst {
            SocketAddr::V4(dst) => cx.iface.udp_ref().receiver_of(dst).map(|(rh, _)| rh),
            SocketAddr::V6(dst) => cx.iface.udp_ref().receiver_of6(dst).map(|(rh, _)| rh),
        };
        if let Some((rh, dest)) = receiver.and_then(|rh| cx.receivers.destination(rh).map(|d| (rh, d))) {
            mm.grow_for(cx.iface, cx.memory, cx.stats, rh, &dest, (0, 0), view.len());
        }
    }
    // SAFETY: payload the engine copies and sums, never interprets; a
    // client racing its own buffer changes only its datagram.
    let bytes = unsafe { view.as_slice() };
    match dst {
        SocketAddr::V4(v4) => cx.iface.udp().send_to(h, bytes, v4, cx.now),
        SocketAddr::V6(v6) => cx.iface.udp().send_to6(h, bytes, v6, cx.now),
    }
    .map_err(engine_errno)?;
    cx.stats.tx_payload_copied += view.len() as u64;
    Ok(Some(Done::value(view.len() as u64)))
}

/// `RECVFROM`: the next datagram (of either family) into the buffer, or
/// wait for one; with `BATCH`, as records, with as many more as fit. The
/// sender goes out as `encode_sender` gives it: an IPv4 one (of a
/// dual-stack socket too) in one word.
pub(super) fn recv_from(
    cx: &mut Context<'_>,
    c: &mut Caller<'_>,
    req: &Request,
    buf: Option<nagare_ipc::BufRef>,
) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    let b = buffer(buf)?;
    socket_error(cx, h)?;
    let Some((from, payload)) = cx.iface.udp().recv_any(h).map_err(engine_errno)? else { return blocked(req) };
    // The result is the datagram's whole length (as with MSG_TRUNC); the
    // piece's length what fit.
    let whole = payload.len() as u64;
    let source = encode_sender(from);
    let payload = match received_in_place(c, cx.steering, b, payload) {
        Ok(swapped) => {
            cx.stats.rx_payload_in_place += u64::from(swapped.len);
            let done = Done::received(whole, source[0], swapped.len);
            return Ok(Some(Done { swapped: Some(swapped), extra: [source[1], source[2]], ..done }));
        }
        Err(payload) => payload,
    };
    if req.flags & BATCH != 0 && b.len as usize >= record_head(source[0]) {
        return records(cx, c, h, b, source, &payload);
    }
    let n = copy_to_region(c.pool, b, &payload)?;
    cx.stats.rx_payload_copied += u64::from(n);
    Ok(Some(Done { extra: [source[1], source[2]], ..Done::received(whole, source[0], n) }))
}

/// Datagram `first` (from `from`, cut to the buffer if it must be) and as
/// many of socket `h`'s next datagrams as fit whole, copied into `b` as
/// records: the result their number, the piece's length the bytes they
/// take.
fn records(
    cx: &mut Context<'_>,
    c: &mut Caller<'_>,
    h: UdpHandle,
    b: BufRef,
    from: [u64; 3],
    first: &PacketBuf,
) -> Outcome {
    let size = b.len as usize;
    // The room a next record's head may take: an IPv6 socket's senders
    // may be IPv6 ones, whose address follows the header.
    let six = cx.iface.udp_ref().socket(h).is_some_and(|u| u.local_addr().is_ipv6());
    let head_room = if six { RECORD_HEADER + RECORD_ADDR6 } else { RECORD_HEADER };
    // The last record written: where it starts, its sender's word and
    // its payload bytes.
    let (mut at, mut last_from, mut last) = (0, from[0], write_record(c.pool, b, 0, from, first)?);
    let (mut count, mut copied) = (1u64, last);
    loop {
        let next = next_record(at, last_from, last);
        let Some(len) = cx.iface.udp_ref().socket(h).and_then(|u| u.next_len()) else { break };
        if next + head_room + len > size {
            break;
        }
        let Some((source, payload)) = cx.iface.udp().recv_any(h).map_err(engine_errno)? else { break };
        let source = encode_sender(source);
        // A record that cannot be written (the region refused it) loses
        // its datagram alone: the records before it are complete.
        let Ok(len) = write_record(c.pool, b, next, source, &payload) else { break };
        (at, last_from, last) = (next, source[0], len);
        count += 1;
        copied += last;
    }
    cx.stats.rx_payload_copied += copied as u64;
    let end = (at + record_head(last_from) + last) as u32;
    Ok(Some(Done { extra: [RECORDS, 0], delivered: copied as u64, ..Done::received(count, 0, end) }))
}

/// Writes the record of datagram `payload` from `from` (its sender, as
/// `encode_sender` gives it) at `at` of buffer `b` (which holds its head
/// there), its payload cut to what is left of the buffer; returns the
/// payload bytes written.
fn write_record(pool: &mut Pool, b: BufRef, at: usize, from: [u64; 3], payload: &PacketBuf) -> Result<usize, i32> {
    let head = record_head(from[0]);
    let room = (b.len as usize).saturating_sub(at + head);
    let len = payload.len().min(room);
    let whole = u32::try_from(payload.len()).map_err(|_| libc::EMSGSIZE)?;
    let header = record_header(from[0], whole, len as u32);
    let start = b.offset + at as u32;
    pool.write(b.index, start, &header).map_err(|_| libc::EFAULT)?;
    if from[0] & SENDER6 != 0 {
        let mut addr = [0u8; RECORD_ADDR6];
        addr[..8].copy_from_slice(&from[1].to_be_bytes());
        addr[8..].copy_from_slice(&from[2].to_be_bytes());
        pool.write(b.index, start + RECORD_HEADER as u32, &addr).map_err(|_| libc::EFAULT)?;
    }
    let body = BufRef { index: b.index, offset: start + head as u32, len: len as u32 };
    copy_to_region(pool, body, payload)?;
    Ok(len)
}
