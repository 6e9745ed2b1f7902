//! Async Rust over a running `nagare netd`: tokio's shapes of
//! [`TcpStream`] ([`tokio::io::AsyncRead`] + [`tokio::io::AsyncWrite`]),
//! [`TcpListener`] and [`UdpSocket`], over the client library's
//! (`nagare::net`) sockets of one [`Session`].
//!
//! ```no_run
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! # async fn f() -> std::io::Result<()> {
//! let netd = nagare_tokio::Session::connect_default()?; // NAGARE_NETD
//! let listener = nagare_tokio::TcpListener::bind(&netd, "10.0.0.1:7000").await?;
//! let mut s = nagare_tokio::TcpStream::connect(&netd, "10.0.0.1:7000").await?;
//! let (mut peer, _) = listener.accept().await?;
//! s.write_all(b"hello").await?;
//! let mut buf = [0u8; 5];
//! peer.read_exact(&mut buf).await?;
//! # Ok(()) }
//! ```
//!
//! Order: make a [`Session`] (one per netd connection; clones share it),
//! then sockets on it, used from tasks of one tokio runtime. Every data
//! call is first tried without waiting: the client library keeps each
//! socket's data path in the session's region, so a read takes what netd
//! already delivered, a write queues what the send buffer has room for,
//! and an accept takes a connection netd accepted ahead. Only a call that
//! would block waits, on the socket's own descriptor (the client
//! library's `readiness_fd`, whose readiness follows the socket's)
//! registered with tokio's reactor (`reactor.rs`, whose docs say why no wake-up is
//! lost): a task waiting on one socket is woken by that socket alone.
//!
//! Control requests wait for netd. A connect waits for the handshake, so
//! [`TcpStream::connect`] runs it on tokio's blocking pool
//! (`spawn_blocking`). Listen, bind, shutdown and the close a dropped
//! socket sends are answered by netd without the network and run inline.
//! The client library lets the session go while a connect waits for its
//! handshake, so the session's other calls go on meanwhile.
//!
//! netd's death wakes every waiting task (the client library sets every
//! socket's descriptor readable and writable), whose next try fails.
//!
//! The sockets are made here (connect, bind, accept) and are this
//! process's alone. A socket shared with another process has no readiness
//! descriptor (its readiness is netd's alone): registering one fails with
//! `ErrorKind::Unsupported` rather than waiting on a descriptor that
//! would always say ready.

#![warn(missing_docs)]

mod reactor;
mod tcp;
mod udp;

pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;

use reactor::Reactor;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A session with a running netd, whose sockets' tasks are woken through
/// tokio's reactor. Cheap to clone (shared).
#[derive(Clone)]
pub struct Session {
    reactor: Arc<Reactor>,
}

impl Session {
    /// Drives `session`'s sockets from tokio.
    pub fn new(session: nagare::Session) -> Session {
        Session { reactor: Arc::new(Reactor::new(session)) }
    }

    /// Connects to the netd listening on `path`.
    pub fn connect(path: impl AsRef<Path>) -> io::Result<Session> {
        nagare::Session::connect(path).map(Session::new)
    }

    /// Connects to the netd that `NAGARE_NETD` names (or the default
    /// socket).
    pub fn connect_default() -> io::Result<Session> {
        nagare::Session::connect_default().map(Session::new)
    }

    /// The client library's session under this one.
    pub fn inner(&self) -> &nagare::Session {
        self.reactor.session()
    }

    /// How many times an operation of this session's sockets would have
    /// blocked: about once per sleep. A task woken by its data retries a
    /// few times; a task that polled would retry without end.
    pub fn retries(&self) -> u64 {
        self.reactor.retries()
    }
}

impl From<nagare::Session> for Session {
    fn from(session: nagare::Session) -> Session {
        Session::new(session)
    }
}
