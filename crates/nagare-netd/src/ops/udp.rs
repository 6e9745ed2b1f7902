//! UDP: bind, sendto, recvfrom, and the receive queue's size
//! (`SO_RCVBUF`).
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
use super::{address, blocked, buffer, engine_errno, payload, Caller, Context, Done, Outcome};
use crate::memory::UDP_RECV_QUEUE;
use crate::sockets::Sock;
use crate::steering::UDP;
use nagare_core::buf::PacketBuf;
use nagare_core::UdpHandle;
use nagare_ipc::{BufRef, Pool};
use nagare_request::records::{next_record, record_header, RECORD_HEADER};
use nagare_request::{encode_addr, Completion, Piece, Request, BATCH, RECORDS};

/// `UDP_BIND`: a socket on `aux[0]` (port 0: an ephemeral one).
pub(super) fn bind(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let local = address(req.aux[0])?;
    let h = cx.iface.udp().bind(local).map_err(engine_errno)?;
    let local = cx.iface.udp_ref().socket(h).map_or(local, |u| u.local());
    // Its receive queue: as much as its client's budget leaves, at most
    // `UDP_RECV_QUEUE` (the memory manager's starting size for its
    // client's priority, with it), at least the floor.
    let most = cx.mm.map_or(UDP_RECV_QUEUE, |mm| mm.start(c.priority.value));
    let want = cx.iface.udp_ref().socket(h).map_or(0, |u| u.queue_limits().1).min(most);
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
    Ok(Some(Done::with_addr(u64::from(id), encode_addr(local))))
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

/// `SENDTO`: the buffer's bytes to `aux[0]`.
pub(super) fn send_to(
    cx: &mut Context<'_>,
    c: &mut Caller<'_>,
    req: &Request,
    buf: Option<nagare_ipc::BufRef>,
) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    let dst = address(req.aux[0])?;
    let b = buffer(buf)?;
    // Zero copy unless the datagram stays here: a receiving socket's queue
    // could hold the sender's buffer indefinitely.
    if req.lends() && !cx.iface.is_local(*dst.ip()) && b.len > 0 {
        let taken = req.trace_time().map(|_| nagare_ipc::monotonic_ns());
        let mut done = Completion::ok(req, u64::from(b.len));
        done.piece = Some(Piece { buffer: b.index, offset: b.offset, len: b.len });
        let packet = cx.lending.lend(c.key, c.pool, b.index, b.offset, b.len, done.encode()).ok_or(libc::EFAULT)?;
        if let Err(e) = cx.iface.udp().send_buf(h, packet, dst, cx.now) {
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
    if let (Some(mm), true) = (cx.mm, cx.iface.is_local(*dst.ip())) {
        // Delivered here, past the frame path where the memory manager
        // sees received datagrams: it sees this one now.
        let receiver = cx.iface.udp_ref().receiver_of(dst).map(|(rh, _)| rh);
        if let Some((rh, dest)) = receiver.and_then(|rh| cx.receivers.destination(rh).map(|d| (rh, d))) {
            mm.grow_for(cx.iface, cx.memory, cx.stats, rh, &dest, (0, 0), view.len());
        }
    }
    // SAFETY: payload the engine copies and sums, never interprets; a
    // client racing its own buffer changes only its datagram.
    cx.iface.udp().send_to(h, unsafe { view.as_slice() }, dst, cx.now).map_err(engine_errno)?;
    cx.stats.tx_payload_copied += view.len() as u64;
    Ok(Some(Done::value(view.len() as u64)))
}

/// `RECVFROM`: the next datagram into the buffer, or wait for one; with
/// `BATCH`, as records, with as many more as fit.
pub(super) fn recv_from(
    cx: &mut Context<'_>,
    c: &mut Caller<'_>,
    req: &Request,
    buf: Option<nagare_ipc::BufRef>,
) -> Outcome {
    let h = c.sockets.udp(req.socket)?;
    let b = buffer(buf)?;
    let Some(d) = cx.iface.udp().recv(h).map_err(engine_errno)? else { return blocked(req) };
    // The result is the datagram's whole length (as with MSG_TRUNC); the
    // piece's length what fit.
    let whole = d.payload.len() as u64;
    let source = encode_addr(d.source);
    let payload = match received_in_place(c, cx.steering, b, d.payload) {
        Ok(swapped) => {
            cx.stats.rx_payload_in_place += u64::from(swapped.len);
            return Ok(Some(Done { swapped: Some(swapped), ..Done::received(whole, source, swapped.len) }));
        }
        Err(payload) => payload,
    };
    if req.flags & BATCH != 0 && b.len as usize >= RECORD_HEADER {
        return records(cx, c, h, b, source, &payload);
    }
    let n = copy_to_region(c.pool, b, &payload)?;
    cx.stats.rx_payload_copied += u64::from(n);
    Ok(Some(Done::received(whole, source, n)))
}

/// Datagram `first` (from `from`, cut to the buffer if it must be) and as
/// many of socket `h`'s next datagrams as fit whole, copied into `b` as
/// records: the result their number, the piece's length the bytes they
/// take.
fn records(cx: &mut Context<'_>, c: &mut Caller<'_>, h: UdpHandle, b: BufRef, from: u64, first: &PacketBuf) -> Outcome {
    let size = b.len as usize;
    // The last record written: where it starts and its payload bytes.
    let (mut at, mut last) = (0, write_record(c.pool, b, 0, from, first)?);
    let (mut count, mut copied) = (1u64, last);
    loop {
        let next = next_record(at, last);
        let Some(len) = cx.iface.udp_ref().socket(h).and_then(|u| u.next_len()) else { break };
        if next + RECORD_HEADER + len > size {
            break;
        }
        let Some(d) = cx.iface.udp().recv(h).map_err(engine_errno)? else { break };
        // A record that cannot be written (the region refused it) loses
        // its datagram alone: the records before it are complete.
        let Ok(len) = write_record(c.pool, b, next, encode_addr(d.source), &d.payload) else { break };
        (at, last) = (next, len);
        count += 1;
        copied += last;
    }
    cx.stats.rx_payload_copied += copied as u64;
    let end = (at + RECORD_HEADER + last) as u32;
    Ok(Some(Done { extra: [RECORDS, 0], ..Done::received(count, 0, end) }))
}

/// Writes the record of datagram `payload` from `from` at `at` of buffer
/// `b` (which holds its header there), its payload cut to what is left of
/// the buffer; returns the payload bytes written.
fn write_record(pool: &mut Pool, b: BufRef, at: usize, from: u64, payload: &PacketBuf) -> Result<usize, i32> {
    let room = (b.len as usize).saturating_sub(at + RECORD_HEADER);
    let len = payload.len().min(room);
    let whole = u32::try_from(payload.len()).map_err(|_| libc::EMSGSIZE)?;
    let header = record_header(from, whole, len as u32);
    let start = b.offset + at as u32;
    pool.write(b.index, start, &header).map_err(|_| libc::EFAULT)?;
    let body = BufRef { index: b.index, offset: start + RECORD_HEADER as u32, len: len as u32 };
    copy_to_region(pool, body, payload)?;
    Ok(len)
}
