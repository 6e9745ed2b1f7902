//! The echo (ping) socket: open, send an echo request (ICMP or ICMPv6),
//! take the next reply or error.
//!
//! A socket is named by its ICMP identifier (`aux[0]` asks for one; the
//! engine gives another if that one is taken); a completion of a receive
//! carries the data length, the sender and one packed word for the
//! sequence number, TTL or error code (an ICMPv6 reply's sender in two
//! words, the packed word saying so).

use super::{address, address6, blocked, engine_errno, payload, Caller, Context, Done, Outcome};
use crate::sockets::Sock;
use nagare_core::icmp::{Echo6Event, EchoEvent, IcmpError};
use nagare_ipc::BufRef;
use nagare_request::{encode_addr, encode_addr6, EchoWord, Op, Request, ECHO_FROM6};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

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
/// `aux[0]`, sequence number `aux[1]`; `ECHO_SEND6`: an ICMPv6 one to
/// the IPv6 host in `aux[0]` and `aux[1]`, sequence number `aux[2]`.
pub(super) fn send(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request, buf: Option<BufRef>) -> Outcome {
    let h = c.sockets.echo(req.socket)?;
    let view = payload(c.pool, buf)?;
    // SAFETY: as for datagrams: the echo data is copied, not read.
    let data = unsafe { view.as_slice() };
    match (req.op, address6(req)) {
        (Op::EchoSend6, SocketAddr::V6(dst)) => {
            cx.iface.icmp().echo6_send(h, *dst.ip(), req.aux[2] as u16, data, cx.now)
        }
        _ => cx.iface.icmp().echo_send(h, *address(req.aux[0])?.ip(), req.aux[1] as u16, data, cx.now),
    }
    .map_err(engine_errno)?;
    Ok(Some(Done::value(view.len() as u64)))
}

/// `ECHO_RECV`: the socket's next reply or error (an ICMP one first,
/// then an ICMPv6 one), or wait for one.
pub(super) fn recv(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let h = c.sockets.echo(req.socket)?;
    if let Some(event) = cx.iface.icmp().echo_recv(h).map_err(engine_errno)? {
        return Ok(Some(echo_done(event)));
    }
    match cx.iface.icmp().echo6_recv(h).map_err(engine_errno)? {
        Some(Echo6Event::Reply { from, seq_no, data_len, hop_limit, .. }) => {
            let [hi, lo, _] = encode_addr6(SocketAddrV6::new(from, 0, 0, 0));
            let word = EchoWord::Reply { seq: seq_no, ttl: hop_limit }.encode() | ECHO_FROM6;
            Ok(Some(Done { extra: [word, lo], ..Done::with_addr(data_len as u64, hi) }))
        }
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
        // An echo socket's errors are about its IPv4 requests: the ICMPv6
        // ones come only to UDP sockets.
        EchoEvent::Error { seq_no, error: IcmpError::Unreachable6 { code, .. } } => {
            (0, 0, EchoWord::Unreachable { seq: seq_no, code })
        }
        EchoEvent::Error { seq_no, error: IcmpError::TimeExceeded6 { code, .. } } => {
            (0, 0, EchoWord::TimeExceeded { seq: seq_no, code })
        }
        EchoEvent::Error { seq_no, error: IcmpError::PacketTooBig6 { .. } } => {
            (0, 0, EchoWord::Unreachable { seq: seq_no, code: 4 })
        }
    };
    Done { extra: [word.encode(), 0], ..Done::with_addr(len, from) }
}
