//! [`TcpStream`] and [`TcpListener`]: the client library's, with calls
//! that would block made into futures through each socket's descriptor
//! (`reactor.rs`).

use crate::reactor::{Reactor, Registered};
use crate::Session;
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A TCP connection through netd: [`AsyncRead`] and [`AsyncWrite`].
/// Reading and writing halves (`tokio::io::split`) wait independently.
pub struct TcpStream {
    io: Registered<nagare::net::TcpStream>,
}

impl TcpStream {
    fn new(inner: nagare::net::TcpStream, reactor: Arc<Reactor>) -> io::Result<TcpStream> {
        Ok(TcpStream { io: Registered::new(inner, reactor)? })
    }

    /// Connects through `session`. The connect is a request that waits
    /// for the handshake, so it runs on tokio's blocking pool
    /// (`spawn_blocking`), as does resolving `addr`.
    pub async fn connect(session: &Session, addr: impl ToSocketAddrs + Send + 'static) -> io::Result<TcpStream> {
        let reactor = Arc::clone(&session.reactor);
        let inner = {
            let reactor = Arc::clone(&reactor);
            tokio::task::spawn_blocking(move || nagare::net::TcpStream::connect_via(reactor.session(), addr))
                .await
                .map_err(io::Error::other)??
        };
        TcpStream::new(inner, reactor)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get().peer_addr()
    }

    /// The client library's stream, for its options (`set_nodelay`,
    /// buffer sizes).
    pub fn get_ref(&self) -> io::Result<&nagare::net::TcpStream> {
        Ok(self.io.get())
    }

    /// Reads into `buf` without taking the bytes (`MSG_PEEK`), waiting
    /// until some arrived; 0 at the end of the stream.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.io(Interest::READABLE, |s| s.peek_with(buf, false)).await
    }

    fn poll_read_slice(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io.poll_io(cx, Interest::READABLE, |s| s.read_with(buf, false))
    }

    fn poll_write_slice(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io.poll_io(cx, Interest::WRITABLE, |s| s.write_with(buf, false))
    }

    /// Sends a FIN after what is queued (a short request, inline).
    fn shutdown_write(&self) -> io::Result<()> {
        self.io.get().shutdown(Shutdown::Write)
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let n = std::task::ready!(this.poll_read_slice(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_slice(cx, buf)
    }

    /// Writes are queued to netd as they are made: nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown_write())
    }
}

#[cfg(feature = "futures-io")]
impl futures_io::AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_read_slice(cx, buf)
    }
}

#[cfg(feature = "futures-io")]
impl futures_io::AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_slice(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown_write())
    }
}

/// A TCP listener through netd.
pub struct TcpListener {
    io: Registered<nagare::net::TcpListener>,
}

impl TcpListener {
    /// Listens on `addr` through `session` (backlog 128). netd answers
    /// the listen without the network: it runs inline.
    pub async fn bind(session: &Session, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let reactor = Arc::clone(&session.reactor);
        let inner = nagare::net::TcpListener::bind_via(reactor.session(), addr)?;
        // Its accept then takes a connection netd accepted ahead, or says
        // it would block.
        inner.set_nonblocking(true)?;
        Ok(TcpListener { io: Registered::new(inner, reactor)? })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get().local_addr()
    }

    /// The next connection, waiting for one. Its descriptor is made
    /// before it is taken: when that fails, it stays queued.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, peer, fd) = self.io.io(Interest::READABLE, |l| l.accept_with_readiness_fd()).await?;
        Ok((TcpStream { io: Registered::with_fd(s, fd, Arc::clone(self.io.reactor()))? }, peer))
    }
}
