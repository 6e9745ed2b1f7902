//! Sockets held by several clients (`crate::shares`): share, adopt, give
//! back, take back. Established TCP connections, listeners and UDP sockets may be
//! shared (a connection still connecting: `ENOTCONN`; an echo socket:
//! `EOPNOTSUPP`).
//!
//! A holder's receives and accepts waiting when it shares complete first
//! with `ECANCELED`, decided with the other waiting rules in
//! `crate::requests`. An adopter is charged the socket's buffers (a UDP
//! socket's receive queue) as its sharer is, and with it from then on
//! (`Memory::adopt`), and does not claim its port:
//! frames to a shared socket are received through netd's own pool once
//! the sharer let go. A UDP socket's datagrams stay its sharer's to
//! PacketFlow (priority, memory manager) while the sharer holds it, and
//! pass to another holder when it lets go (`crate::packetflow`'s
//! receivers, `ops::control::close`, `Netd::disconnect`).

use super::{buffer, encode_end, private_copy, Caller, Context, Done, Outcome};
use crate::memory::connection_charge;
use crate::sockets::Sock;
use nagare_core::tcp::connection::State;
use nagare_request::{AdoptWord, Request};

/// `SHARE`: the socket's token.
pub(super) fn share(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let sock = c.sockets.get(req.socket).ok_or(libc::EBADF)?;
    match sock {
        Sock::Listener(_) => {}
        // A connection still being made may yet be refused or time out,
        // which takes it out of its table without a close: only one
        // established (or past it) is shared.
        Sock::Tcp(h) => match cx.iface.tcp_ref().state(h) {
            Ok(State::SynSent | State::SynReceived) | Err(_) => return Err(libc::ENOTCONN),
            Ok(_) => {}
        },
        Sock::Udp(_) => {}
        Sock::Echo(_) => return Err(libc::EOPNOTSUPP),
    }
    let token = cx.sharing.shares.share(c.key, req.socket, sock, c.uid, || {
        nagare_host::secrets::random_u64().unwrap_or_else(|_| cx.now.total_micros())
    });
    Ok(Some(Done::value(token)))
}

/// `ADOPT`: the socket of token `aux[0]`, under a new id of the caller.
pub(super) fn adopt(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    let token = req.aux[0];
    let sock = cx.sharing.shares.find(token, c.uid)?;
    c.sockets.room(cx.config.max_sockets)?;
    let (local, peer, word) = match sock {
        Sock::Tcp(h) => {
            let k = cx.iface.tcp_ref().connection(h).ok_or(libc::ENOENT)?;
            let word = AdoptWord { kind: AdoptWord::STREAM, recv_buffer: k.recv_buffer() as u64 };
            (encode_end(k.local()), encode_end(k.remote()), word)
        }
        Sock::Listener(l) => {
            let local = cx.iface.tcp_ref().listener_local(l).ok_or(libc::ENOENT)?;
            (encode_end(local), 0, AdoptWord { kind: AdoptWord::LISTENER, recv_buffer: 0 })
        }
        Sock::Udp(h) => {
            let u = cx.iface.udp_ref().socket(h).ok_or(libc::ENOENT)?;
            (encode_end(u.local_addr()), 0, AdoptWord { kind: AdoptWord::DATAGRAM, recv_buffer: 0 })
        }
        Sock::Echo(_) => return Err(libc::EOPNOTSUPP),
    };
    let id = c.sockets.add(sock, cx.config.max_sockets)?;
    cx.sharing.shares.adopted(token, c.key, id);
    // A socket no client held is the adopter's to pay for from now on.
    let _ = cx.memory.end_watched(token);
    let bytes = match sock {
        Sock::Tcp(h) => Some(connection_charge(cx.iface, h)),
        Sock::Udp(h) => Some(cx.iface.udp_ref().socket(h).map_or(0, |u| u.queue_limits().1)),
        Sock::Listener(_) | Sock::Echo(_) => None,
    };
    if let Some(bytes) = bytes {
        // Charged as every other holder is, and with them from now on.
        let sharer = cx.sharing.shares.other_holders(c.key, id).next();
        cx.memory.adopt(sharer, (c.key, id), bytes);
    }
    Ok(Some(Done { extra: [peer, word.encode()], ..Done::with_addr(u64::from(id), local) }))
}

/// `GIVE_BACK`: the buffer's bytes, taken from shared connection
/// `socket` and not read, are received first from now on.
pub(super) fn give_back(
    cx: &mut Context<'_>,
    c: &mut Caller<'_>,
    req: &Request,
    buf: Option<nagare_ipc::BufRef>,
) -> Outcome {
    c.sockets.tcp(req.socket)?;
    let b = buffer(buf)?;
    private_copy(c.pool, buf, cx.scratch)?;
    cx.sharing.shares.give_back(c.key, req.socket, cx.scratch)?;
    Ok(Some(Done::value(u64::from(b.len))))
}

/// `RECLAIM`: shared socket `socket` is the caller's alone again
/// (`Sharing::reclaim`). Its charges, and a UDP socket's place in
/// PacketFlow, are already the caller's: every holder is charged the
/// socket as its sharer is, and the receiver passed to the caller when
/// the others let go.
pub(super) fn reclaim(cx: &mut Context<'_>, c: &mut Caller<'_>, req: &Request) -> Outcome {
    c.sockets.get(req.socket).ok_or(libc::EBADF)?;
    cx.sharing.reclaim(c.key, req.socket)?;
    Ok(Some(Done::value(0)))
}
