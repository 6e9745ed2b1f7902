//! The echo (ping) socket: open, send an echo request, take the next
//! reply or error.
//!
//! A socket is named by its ICMP identifier (`aux[0]` asks for one; the
//! engine gives another if that one is taken); a completion of a receive
//! carries the data length, the sender and one packed word for the
//! sequence number, TTL or error code.

use super::{address, blocked, engine_errno, payload, Caller, Context, Done, Outcome};
use crate::sockets::Sock;
use nagare_core::icmp::{EchoEvent, IcmpError};
use nagare_ipc::BufRef;
use nagare_request::{encode_addr, EchoWord, Request};
use std::net::SocketAddrV4;

/// `ECHO_OPEN`: an echo socket with identifier `aux[0]`.
pub(super) fn open(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    c.sockets.room(cx.config.max_sockets)?;
    let h = cx.iface.icmp().echo_open(req.aux[0] as u16).map_err(engine_errno)?;
    let id = c.sockets.add(Sock::Echo(h), cx.config.max_sockets).inspect_err(|_| {
        let _ = cx.iface.icmp().echo_close(h);
    })?;
    Ok(Some(Done::value(u64::from(id))))
}

/// `ECHO_SEND`: an echo request with the buffer's bytes as data to host
/// `aux[0]`, sequence number `aux[1]`.
pub(super) fn send(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, buf: Option<BufRef>) -> Outcome {
    let h = c.sockets.echo(req.socket)?;
    let dst = address(req.aux[0])?;
    let view = payload(c.pool, buf)?;
    // SAFETY: as for datagrams: the echo data is copied, not read.
    cx.iface
        .icmp()
        .echo_send(h, *dst.ip(), req.aux[1] as u16, unsafe { view.as_slice() }, cx.now)
        .map_err(engine_errno)?;
    Ok(Some(Done::value(view.len() as u64)))
}

/// `ECHO_RECV`: the socket's next reply or error, or wait for one.
pub(super) fn recv(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.echo(req.socket)?;
    match cx.iface.icmp().echo_recv(h).map_err(engine_errno)? {
        Some(event) => Ok(Some(echo_done(event))),
        None => blocked(req),
    }
}

/// An echo socket's event as a completion: data length, sender, and the
/// packed sequence/TTL/code word.
fn echo_done(event: EchoEvent) -> Done {
    let host = |a| encode_addr(SocketAddrV4::new(a, 0));
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
    Done { extra: [word.encode(), 0], ..Done::with_addr(len, from) }
}
