//! [`UdpSocket`]: the client library's, with sends and receives that
//! would block made into futures through the session's reactor.

use crate::reactor::Reactor;
use crate::Session;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// A UDP socket through netd.
pub struct UdpSocket {
    /// `Some` until dropped (its close is a blocking call the reactor is
    /// told of).
    inner: Option<nagare::net::UdpSocket>,
    reactor: Arc<Reactor>,
}

impl UdpSocket {
    /// Binds `addr` through `session` (netd answers without the network:
    /// it runs inline).
    pub async fn bind(session: &Session, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let reactor = Arc::clone(&session.reactor);
        let inner = reactor.blocking(|| nagare::net::UdpSocket::bind_via(reactor.session(), addr))?;
        Ok(UdpSocket { inner: Some(inner), reactor })
    }

    fn inner(&self) -> io::Result<&nagare::net::UdpSocket> {
        self.inner.as_ref().ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner()?.local_addr()
    }

    /// Sends one datagram to `addr`, waiting for room in the send queue.
    pub async fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        let inner = self.inner()?;
        self.reactor.io(|| inner.send_to_with(buf, addr, false)).await
    }

    /// Waits for one datagram; a longer one is truncated to `buf`. The
    /// bytes copied and the sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let inner = self.inner()?;
        let (n, _, from) = self.reactor.io(|| inner.recv_from_with(buf, false)).await?;
        Ok((n, from))
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            self.reactor.blocking(|| drop(inner));
        }
    }
}
