//! Sockets shared with another process, as a child after `fork` (or a
//! program it runs) holds its parent's: [`TcpStream::share`] and
//! [`TcpListener::share`] and [`UdpSocket::share`] give a token that names
//! the socket in netd, and [`adopt_via`] (or each kind's own), in another
//! session of the same user, holds the socket too. It closes once every
//! holder closed it or went away. TCP connections, listeners and UDP
//! sockets may be shared.
//!
//! Sharing hands the socket over without losing a byte: netd first ends
//! this session's receives and accepts waiting on it (`ECANCELED`), and
//! the stream bytes that arrived here and were not read go back to netd
//! (`GIVE_BACK`), to be read first by the next reader. From then on,
//! here and in every session that adopts it, the socket's path takes
//! nothing ahead: a read posts one receive of at most what it asks for
//! and waits for it, an accept one `ACCEPT`, and a poll asks netd, so that
//! no holder's exit loses what another would have read; and a write is in
//! the engine before it returns, so that the holders' writes keep their
//! order. Connections a listener had already accepted ahead, and
//! datagrams a UDP socket had already received ahead, stay in this
//! process's queue (netd takes no datagram back). A UDP socket's reads
//! take one datagram each from netd, so that each holder reads whole
//! datagrams and none twice.
//!
//! Once every other holder let go, the one left takes the socket back as
//! its own ([`TcpStream::reclaim`], [`TcpListener::reclaim`],
//! [`UdpSocket::reclaim`]: netd's `RECLAIM`): its path reads and accepts
//! ahead again, queues its writes and lends readiness descriptors, as a
//! socket never shared; its token names nothing from then on, and a
//! later share gives a fresh one.

use crate::net::{addr_in, addr_of, Handle, TcpListener, TcpStream, UdpSocket};
use crate::path::Kind;
use crate::path::Role;
use crate::{request, Data, InFlight, Session};
use nagare_request::{AdoptWord, Op, ADDR_ELSEWHERE, NAME_LOCAL, NAME_PEER};
use std::io;

/// A socket adopted by its token: a connection or a listener.
pub enum Adopted {
    /// A TCP connection.
    Stream(TcpStream),
    /// A TCP listener.
    Listener(TcpListener),
    /// A UDP socket.
    Datagram(UdpSocket),
}

/// Holds the socket `token` names (from a `share` in a process of the same
/// user) through `netd`, whichever kind it is. Its path takes nothing
/// ahead, as a shared socket's: a session made ahead for another process
/// (a child after `fork`) takes nothing that process never asks for.
pub fn adopt_via(netd: &Session, token: u64) -> io::Result<Adopted> {
    let mut r = request(Op::Adopt, 0);
    r.aux[0] = token;
    let (c, _) = netd.call(r, Data::None)?;
    let h = Handle::new(netd, c.aux[0] as u32);
    let id = c.aux[0] as u32;
    let six = c.aux[1] == ADDR_ELSEWHERE;
    let local = addr_in(netd, id, c.aux[1], NAME_LOCAL, six)?;
    let peer = if c.aux[2] == 0 { addr_of(0) } else { addr_in(netd, id, c.aux[2], NAME_PEER, six)? };
    match AdoptWord::decode(c.aux[3]) {
        Some(AdoptWord { kind: AdoptWord::STREAM, recv_buffer }) => {
            let id = h.id;
            let s = TcpStream::from_handle(h, local, peer);
            netd.lock()?.open_path_as(id, Kind::Stream, 0, recv_buffer, true)?;
            Ok(Adopted::Stream(s))
        }
        Some(AdoptWord { kind: AdoptWord::LISTENER, .. }) => {
            let id = h.id;
            let l = TcpListener::from_handle(h, local);
            netd.lock()?.open_listen_path(id, true)?;
            Ok(Adopted::Listener(l))
        }
        Some(AdoptWord { kind: AdoptWord::DATAGRAM, .. }) => {
            let id = h.id;
            let d = UdpSocket::from_handle(h, local);
            netd.lock()?.open_path_as(id, Kind::Datagram, 0, 0, true)?;
            Ok(Adopted::Datagram(d))
        }
        // Nothing this library can use: let go again (the handle's drop).
        _ => Err(io::Error::from_raw_os_error(libc::ENOTSOCK)),
    }
}

impl Session {
    /// Shares socket `id`: its token, after netd ended our receives and
    /// accepts on it and our unread bytes went back.
    fn share_socket(&self, id: u32) -> io::Result<u64> {
        // Nothing more is received ahead here from now on.
        self.lock()?.mark_shared(id);
        let (c, _) = self.call(request(Op::Share, id), Data::None)?;
        // What netd gave us and we did not read goes back ahead of any
        // later receive of ours: taken and posted in one hold.
        let posted = {
            let mut conn = self.lock()?;
            conn.collect()?;
            let unread = conn.take_unread(id);
            let size = conn.pool.buffer_size().max(1) as usize;
            let mut posted = Vec::new();
            for chunk in unread.chunks(size) {
                let mut r = request(Op::GiveBack, id);
                let buffer = conn.fill(&mut r, &Data::Send(chunk))?;
                conn.submit(&mut r, buffer)?;
                conn.in_flight.insert(r.id, InFlight { buffer, abandoned: false, role: Role::Call });
                posted.push((r.id, buffer));
            }
            posted
        };
        for (rid, buffer) in posted {
            let comp = self.until(false, None, |c| {
                Ok(c.complete(rid, buffer)?.map(|(comp, back)| {
                    c.in_flight.remove(&rid);
                    if let Some(b) = back {
                        let _ = c.pool.release(b.index);
                    }
                    comp
                }))
            })?;
            crate::finish(comp, 0)?;
        }
        Ok(c.aux[0])
    }
}

impl Session {
    /// Takes shared socket `id` back as ours alone: whether netd granted
    /// it (not while another holder, or another process's watched
    /// descriptor, has it: a refusal, `false`, that changes nothing). On a
    /// grant the path reads and accepts ahead again; bytes given back that
    /// still wait in netd are its first receives'.
    fn reclaim_socket(&self, id: u32) -> io::Result<bool> {
        match self.call(request(Op::Reclaim, id), Data::None) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(false),
            Err(e) => return Err(e),
        }
        self.lock()?.mark_unshared(id)?;
        Ok(true)
    }
}

impl TcpStream {
    /// Takes this connection back as this process's alone once no other
    /// holder has it ([`TcpStream::share`]): whether netd granted it. From
    /// then on it reads ahead again and queues its writes, as a
    /// connection never shared. `EINVAL` if it is not shared.
    pub fn reclaim(&self) -> io::Result<bool> {
        self.h.netd.reclaim_socket(self.h.id)
    }

    /// Whether another process holds this connection too (it was shared
    /// or adopted).
    pub fn is_shared(&self) -> bool {
        self.h.netd.lock().is_ok_and(|c| c.is_shared(self.h.id))
    }

    /// Whether this connection's readiness is netd's to say, for a waiter
    /// to ask of it ([`crate::poll::wake_when_ready`]): it is shared, or
    /// has no receive posted for want of a buffer (`crate::path`).
    pub fn readiness_from_netd(&self) -> bool {
        self.h.netd.lock().is_ok_and(|c| !c.tracks_readiness(self.h.id))
    }

    /// Lets another process of the same user hold this connection too
    /// ([`TcpStream::adopt_via`]): its token. Bytes that arrived and were
    /// not read are read first by whichever holder reads next.
    pub fn share(&self) -> io::Result<u64> {
        self.h.netd.share_socket(self.h.id)
    }

    /// Holds the connection `token` names (from [`TcpStream::share`] in a
    /// process of the same user) through `netd`.
    pub fn adopt_via(netd: &Session, token: u64) -> io::Result<TcpStream> {
        match adopt_via(netd, token)? {
            Adopted::Stream(s) => Ok(s),
            _ => Err(io::Error::from_raw_os_error(libc::ENOTSOCK)),
        }
    }
}

impl TcpListener {
    /// Takes this listener back as this process's alone once no other
    /// holder has it: whether netd granted it. From then on it accepts
    /// ahead again. `EINVAL` if it is not shared.
    pub fn reclaim(&self) -> io::Result<bool> {
        self.h.netd.reclaim_socket(self.h.id)
    }

    /// Whether another process holds this listener too (it was shared or
    /// adopted).
    pub fn is_shared(&self) -> bool {
        self.h.netd.lock().is_ok_and(|c| c.is_shared_listener(self.h.id))
    }

    /// Whether this listener's readiness is netd's to say, for a waiter to
    /// ask of it ([`crate::poll::wake_when_ready`]): it is shared.
    pub fn readiness_from_netd(&self) -> bool {
        self.h.netd.lock().is_ok_and(|c| !c.tracks_readiness(self.h.id))
    }

    /// Lets another process of the same user hold this listener too
    /// ([`TcpListener::adopt_via`]), as pre-forked servers' children
    /// accept on their parent's: its token.
    pub fn share(&self) -> io::Result<u64> {
        self.h.netd.share_socket(self.h.id)
    }

    /// Holds the listener `token` names through `netd`.
    pub fn adopt_via(netd: &Session, token: u64) -> io::Result<TcpListener> {
        match adopt_via(netd, token)? {
            Adopted::Listener(l) => Ok(l),
            _ => Err(io::Error::from_raw_os_error(libc::ENOTSOCK)),
        }
    }
}

impl UdpSocket {
    /// Takes this socket back as this process's alone once no other
    /// holder has it: whether netd granted it. From then on it receives
    /// ahead again. `EINVAL` if it is not shared.
    pub fn reclaim(&self) -> io::Result<bool> {
        self.h.netd.reclaim_socket(self.h.id)
    }

    /// Whether another process holds this socket too (it was shared or
    /// adopted).
    pub fn is_shared(&self) -> bool {
        self.h.netd.lock().is_ok_and(|c| c.is_shared(self.h.id))
    }

    /// Whether this socket's readiness is netd's to say, for a waiter to
    /// ask of it ([`crate::poll::wake_when_ready`]): it is shared, or has
    /// no receive posted for want of a buffer (`crate::path`).
    pub fn readiness_from_netd(&self) -> bool {
        self.h.netd.lock().is_ok_and(|c| !c.tracks_readiness(self.h.id))
    }

    /// Lets another process of the same user hold this socket too
    /// ([`UdpSocket::adopt_via`]), as a forking UDP server's children
    /// receive on their parent's: its token. Datagrams already received
    /// ahead here are read here.
    pub fn share(&self) -> io::Result<u64> {
        self.h.netd.share_socket(self.h.id)
    }

    /// Holds the UDP socket `token` names through `netd`.
    pub fn adopt_via(netd: &Session, token: u64) -> io::Result<UdpSocket> {
        match adopt_via(netd, token)? {
            Adopted::Datagram(d) => Ok(d),
            _ => Err(io::Error::from_raw_os_error(libc::ENOTSOCK)),
        }
    }
}
