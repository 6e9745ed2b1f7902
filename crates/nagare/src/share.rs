//! Sockets shared with another process, as a child after `fork` (or a
//! program it runs) holds its parent's: [`TcpStream::share`] and
//! [`TcpListener::share`] give a token that names the socket in netd, and
//! [`TcpStream::adopt_via`] and [`TcpListener::adopt_via`], in another
//! session of the same user, hold the socket too. It closes once every
//! holder closed it or went away. TCP connections and listeners may be
//! shared; UDP sockets may not.
//!
//! Sharing hands the socket over without losing a byte: netd first ends
//! this session's receives and accepts waiting on it (`ECANCELED`), the
//! stream bytes that arrived here and were not read go back to netd
//! (`GIVE_BACK`), to be read first by the next reader, and the socket's
//! path here posts nothing more (it is *paused*) until this process reads,
//! accepts or polls on it again. Connections a listener had already
//! accepted ahead stay in this process's queue.

use crate::net::{addr_of, Handle, TcpListener, TcpStream};
use crate::path::Kind;
use crate::{request, Data, Session};
use nagare_request::{AdoptWord, Op};
use std::io;
use std::net::SocketAddr;

/// What netd says of a socket this session adopted.
struct Adopted {
    id: u32,
    local: SocketAddr,
    peer: SocketAddr,
    word: AdoptWord,
}

impl Session {
    /// Shares socket `id`: its token, after netd ended our receives and
    /// accepts on it and our unread bytes went back.
    fn share_socket(&self, id: u32) -> io::Result<u64> {
        let (c, _) = self.call(request(Op::Share, id), Data::None)?;
        let unread = {
            let mut conn = self.lock()?;
            conn.collect()?;
            conn.pause(id)
        };
        for chunk in unread.chunks(self.max_chunk().max(1)) {
            self.call(request(Op::GiveBack, id), Data::Send(chunk))?;
        }
        Ok(c.aux[0])
    }

    /// Holds the socket of `token` in this session: `want` is the kind the
    /// caller expects (`ENOTSOCK` for another).
    fn adopt(&self, token: u64, want: u8) -> io::Result<Adopted> {
        let mut r = request(Op::Adopt, 0);
        r.aux[0] = token;
        let (c, _) = self.call(r, Data::None)?;
        let id = c.aux[0] as u32;
        match AdoptWord::decode(c.aux[3]).filter(|w| w.kind == want) {
            Some(word) => Ok(Adopted { id, local: addr_of(c.aux[1]), peer: addr_of(c.aux[2]), word }),
            None => {
                // Not what the caller can use: let it go again.
                drop(Handle { netd: self.clone(), id });
                Err(io::Error::from_raw_os_error(libc::ENOTSOCK))
            }
        }
    }
}

impl TcpStream {
    /// Lets another process of the same user hold this connection too
    /// ([`TcpStream::adopt_via`]): its token. Bytes that arrived and were
    /// not read are read first by whichever holder reads next.
    pub fn share(&self) -> io::Result<u64> {
        self.h.netd.share_socket(self.h.id)
    }

    /// Holds the connection `token` names (from [`TcpStream::share`] in a
    /// process of the same user) through `netd`.
    pub fn adopt_via(netd: &Session, token: u64) -> io::Result<TcpStream> {
        let a = netd.adopt(token, AdoptWord::STREAM)?;
        let s = TcpStream::from_handle(Handle { netd: netd.clone(), id: a.id }, a.local, a.peer);
        s.h.netd.lock()?.open_path(a.id, Kind::Stream, 0, a.word.recv_buffer)?;
        Ok(s)
    }
}

impl TcpListener {
    /// Lets another process of the same user hold this listener too
    /// ([`TcpListener::adopt_via`]), as pre-forked servers' children
    /// accept on their parent's: its token.
    pub fn share(&self) -> io::Result<u64> {
        self.h.netd.share_socket(self.h.id)
    }

    /// Holds the listener `token` names through `netd`.
    pub fn adopt_via(netd: &Session, token: u64) -> io::Result<TcpListener> {
        let a = netd.adopt(token, AdoptWord::LISTENER)?;
        let l = TcpListener::from_handle(Handle { netd: netd.clone(), id: a.id }, a.local);
        l.h.netd.lock()?.open_listen_path(a.id)?;
        Ok(l)
    }
}
