//! [`UdpSocket`]: the client library's, with sends and receives that
//! would block made into futures through the socket's descriptor
//! (`reactor.rs`).

use crate::reactor::Registered;
use crate::Session;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use tokio::io::Interest;

/// A UDP socket through netd.
pub struct UdpSocket {
    io: Registered<nagare::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds `addr` through `session` (netd answers without the network:
    /// it runs inline).
    pub async fn bind(session: &Session, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let reactor = Arc::clone(&session.reactor);
        let inner = nagare::net::UdpSocket::bind_via(reactor.session(), addr)?;
        Ok(UdpSocket { io: Registered::new(inner, reactor)? })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get().local_addr()
    }

    /// Sends one datagram to `addr`, waiting for room in the send queue.
    pub async fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.io.io(Interest::WRITABLE, |u| u.send_to_with(buf, addr, false)).await
    }

    /// Waits for one datagram; a longer one is truncated to `buf`. The
    /// bytes copied and the sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, _, from) = self.io.io(Interest::READABLE, |u| u.recv_from_with(buf, false)).await?;
        Ok((n, from))
    }
}
