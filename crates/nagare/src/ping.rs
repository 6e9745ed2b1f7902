//! ICMP and ICMPv6 echo through netd: a ping socket, like Linux's
//! `socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)` (and `AF_INET6`,
//! `IPPROTO_ICMPV6`, one socket for both): netd's engine fills in the
//! header and the checksum and hands back only replies and errors that
//! carry this socket's identifier.

use crate::net::{sent_count, Handle};
use crate::{request, Data, Session};
use nagare_request::{decode_addr, decode_addr6, encode_addr, encode_addr6, EchoWord, Op, ECHO_FROM6};
use std::io;
use std::net::{IpAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

/// Identifiers tried after the first is taken by another socket.
const IDENT_TRIES: u16 = 64;

/// What a ping socket received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PingEvent {
    /// An echo reply.
    Reply {
        /// Who answered.
        from: IpAddr,
        /// The sequence number it echoes.
        seq: u16,
        /// Bytes of echo data.
        len: usize,
        /// Its IP TTL.
        ttl: u8,
    },
    /// A router or the destination reported it unreachable.
    Unreachable {
        /// Who reported it.
        from: IpAddr,
        /// The sequence number of the request it quotes.
        seq: u16,
        /// The ICMP code.
        code: u8,
    },
    /// The request's TTL ran out on the way.
    TimeExceeded {
        /// Who reported it.
        from: IpAddr,
        /// The sequence number of the request it quotes.
        seq: u16,
        /// The ICMP code.
        code: u8,
    },
}

/// An ICMP echo socket through netd.
pub struct PingSocket {
    h: Handle,
    ident: u16,
}

impl PingSocket {
    /// Opens one through `netd` with an identifier of its own: `ident`,
    /// or the next free one after it if another socket holds it.
    pub fn open_via(netd: &Session, ident: u16) -> io::Result<PingSocket> {
        let mut last = io::Error::from_raw_os_error(libc::EADDRINUSE);
        for k in 0..IDENT_TRIES {
            let ident = ident.wrapping_add(k);
            let mut r = request(Op::EchoOpen, 0);
            r.aux[0] = u64::from(ident);
            match netd.call(r, Data::None) {
                Ok((c, _)) => return Ok(PingSocket { h: Handle::new(netd, c.aux[0] as u32), ident }),
                Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// The id netd knows this socket by (for [`crate::poll::poll`]).
    pub fn socket_id(&self) -> u32 {
        self.h.id
    }

    /// The ICMP identifier its requests carry.
    pub fn ident(&self) -> u16 {
        self.ident
    }

    /// Sends an echo request with `data` (at most one region buffer), an
    /// ICMPv6 one to an IPv6 address.
    pub fn send(&self, to: impl Into<IpAddr>, seq: u16, data: &[u8]) -> io::Result<usize> {
        if data.len() > self.h.netd.max_chunk() {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        let r = match to.into() {
            IpAddr::V4(to) => {
                let mut r = request(Op::EchoSend, self.h.id);
                r.aux[0] = encode_addr(SocketAddrV4::new(to, 0));
                r.aux[1] = u64::from(seq);
                r
            }
            IpAddr::V6(to) => {
                let mut r = request(Op::EchoSend6, self.h.id);
                let [hi, lo, _] = encode_addr6(SocketAddrV6::new(to, 0, 0, 0));
                r.aux[..3].copy_from_slice(&[hi, lo, u64::from(seq)]);
                r
            }
        };
        let (c, _) = self.h.netd.call(r, Data::Send(data))?;
        sent_count(c.aux[0], data.len())
    }

    /// The next reply or error; waits at most `limit` (`None`: as long as
    /// it takes). `Ok(None)` when the time ran out.
    pub fn recv_timeout(&self, limit: Option<Duration>) -> io::Result<Option<PingEvent>> {
        let mut r = request(Op::EchoRecv, self.h.id);
        crate::set_wait_limit(&mut r, limit);
        let c = match self.h.netd.call(r, Data::None) {
            Ok((c, _)) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        let bad = |e: nagare_request::ProtoError| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
        let from = if c.aux[2] & ECHO_FROM6 != 0 {
            IpAddr::V6(*decode_addr6([c.aux[1], c.aux[3], 0]).ip())
        } else {
            IpAddr::V4(*decode_addr(c.aux[1]).map_err(bad)?.ip())
        };
        Ok(Some(match EchoWord::decode(c.aux[2] & !ECHO_FROM6).map_err(bad)? {
            EchoWord::Reply { seq, ttl } => PingEvent::Reply { from, seq, len: c.aux[0] as usize, ttl },
            EchoWord::Unreachable { seq, code } => PingEvent::Unreachable { from, seq, code },
            EchoWord::TimeExceeded { seq, code } => PingEvent::TimeExceeded { from, seq, code },
        }))
    }
}
