//! `TcpStream`, `TcpListener` and `UdpSocket` with `std::net`'s shapes,
//! over a running netd. IPv4 only.

use crate::{request, Data, Netd};
use nagare_request::{decode_addr, encode_addr, Op};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, ToSocketAddrs};

fn v4(addr: impl ToSocketAddrs) -> io::Result<SocketAddrV4> {
    for a in addr.to_socket_addrs()? {
        if let SocketAddr::V4(a) = a {
            return Ok(a);
        }
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, "nagare speaks IPv4 only"))
}

fn addr_of(w: u64) -> SocketAddr {
    SocketAddr::V4(decode_addr(w).unwrap_or(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)))
}

/// Closes a socket id on drop.
struct Handle {
    netd: Netd,
    id: u32,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.netd.call(request(Op::Close, self.id), Data::None);
    }
}

/// A TCP connection through netd.
pub struct TcpStream {
    h: Handle,
    local: SocketAddr,
    peer: SocketAddr,
}

impl TcpStream {
    /// Connects through the default netd (`NAGARE_NETD`).
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        TcpStream::connect_via(&Netd::default_netd()?, addr)
    }

    /// Connects through `netd`.
    pub fn connect_via(netd: &Netd, addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let remote = v4(addr)?;
        let mut r = request(Op::Connect, 0);
        r.aux[0] = encode_addr(remote);
        let (c, _) = netd.call(r, Data::None)?;
        let id = c.aux[0] as u32;
        Ok(TcpStream { h: Handle { netd: netd.clone(), id }, local: addr_of(c.aux[1]), peer: SocketAddr::V4(remote) })
    }

    /// Our address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.peer)
    }

    /// Closes the sending side (`Write` or `Both`); `Read` alone does
    /// nothing yet.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match how {
            Shutdown::Read => Ok(()),
            Shutdown::Write | Shutdown::Both => self.h.netd.call(request(Op::Shutdown, self.h.id), Data::None).map(|_| ()),
        }
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (_, n) = self.h.netd.call(request(Op::Recv, self.h.id), Data::Recv(buf))?;
        Ok(n)
    }

    fn send(&self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (c, _) = self.h.netd.call(request(Op::Send, self.h.id), Data::Send(buf))?;
        sent_count(c.aux[0], buf.len())
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TCP listener through netd.
pub struct TcpListener {
    h: Handle,
    local: SocketAddr,
}

impl TcpListener {
    /// Listens through the default netd.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::bind_via(&Netd::default_netd()?, addr)
    }

    /// Listens through `netd` (backlog 128).
    pub fn bind_via(netd: &Netd, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let local = v4(addr)?;
        let mut r = request(Op::Listen, 0);
        r.aux[0] = encode_addr(local);
        r.aux[1] = 128;
        let (c, _) = netd.call(r, Data::None)?;
        Ok(TcpListener { h: Handle { netd: netd.clone(), id: c.aux[0] as u32 }, local: SocketAddr::V4(local) })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// Waits for the next connection.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (c, _) = self.h.netd.call(request(Op::Accept, self.h.id), Data::None)?;
        let peer = addr_of(c.aux[1]);
        let s = TcpStream { h: Handle { netd: self.h.netd.clone(), id: c.aux[0] as u32 }, local: self.local, peer };
        Ok((s, peer))
    }
}

/// A UDP socket through netd.
pub struct UdpSocket {
    h: Handle,
    local: SocketAddr,
}

impl UdpSocket {
    /// Binds through the default netd (port 0: ephemeral).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        UdpSocket::bind_via(&Netd::default_netd()?, addr)
    }

    /// Binds through `netd`.
    pub fn bind_via(netd: &Netd, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let local = v4(addr)?;
        let mut r = request(Op::UdpBind, 0);
        r.aux[0] = encode_addr(local);
        let (c, _) = netd.call(r, Data::None)?;
        Ok(UdpSocket { h: Handle { netd: netd.clone(), id: c.aux[0] as u32 }, local: addr_of(c.aux[1]) })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// Sends one datagram (at most one region buffer, 16 KiB by default).
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        if buf.len() > self.h.netd.max_chunk() {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        let mut r = request(Op::SendTo, self.h.id);
        r.aux[0] = encode_addr(v4(addr)?);
        let (c, _) = self.h.netd.call(r, Data::Send(buf))?;
        sent_count(c.aux[0], buf.len())
    }

    /// Waits for one datagram; a longer one is truncated to `buf`.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (c, n) = self.h.netd.call(request(Op::RecvFrom, self.h.id), Data::Recv(buf))?;
        Ok((n, addr_of(c.aux[1])))
    }
}

/// The byte count a send completion claims, if it is one the request could
/// have produced (a netd that claims more would make `write_all` slice out
/// of bounds).
fn sent_count(claimed: u64, offered: usize) -> io::Result<usize> {
    usize::try_from(claimed)
        .ok()
        .filter(|&n| n <= offered)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("netd claims {claimed} bytes sent of {offered}")))
}
