//! The waker side: each socket's own descriptor (the client library's
//! `readiness_fd`, whose readiness follows the socket's) registered with tokio's
//! reactor, so that a task waiting on one socket is woken by that
//! socket's readiness alone, never by another socket's completion.
//!
//! An operation is tried once tokio says the socket may be ready for it,
//! without waiting (`read_with(.., false)` and its kin). When it would
//! block, the task looks at the descriptor's level (`poll(2)` without
//! waiting): not ready, it clears tokio's readiness of that direction and
//! sleeps until tokio sees the descriptor ready again; still ready, it
//! tries again (yielding to the runtime every [`ROUNDS`] tries).
//!
//! Why no wake-up is lost: the client library sets the descriptor when a
//! completion raises the socket's readiness (its session's watcher
//! thread takes completions off the rings while every task sleeps) and
//! after every call on the socket, so each rise of a direction is a
//! change of the descriptor that tokio sees as an edge. tokio's
//! registration is edge-triggered, keeps a readiness it saw until a task
//! clears it, and a clear removes only the readiness the task saw, not
//! one from a later edge. So a rise after the look at the level is an
//! edge that survives the clear, and a rise before it is seen by the
//! look. The look is needed because a call that would block may leave
//! the descriptor ready with no edge to come: another task's call on the
//! socket took the data and has not set the descriptor yet.
//!
//! netd's death sets every descriptor readable and writable: every task
//! wakes, tries again, and fails. A descriptor is registered with the
//! runtime its socket is made in.

use nagare::ReadinessFd;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Attempts again in one poll (the descriptor stayed ready) before the
/// poll yields to the runtime (it is woken again at once): one busy
/// socket does not hold the thread.
const ROUNDS: u32 = 16;

/// The client library's sockets, which lend a descriptor.
pub(crate) trait Lends {
    /// The socket's descriptor, made on the first call.
    fn readiness_fd(&self) -> io::Result<ReadinessFd>;
}

impl Lends for nagare::net::TcpStream {
    fn readiness_fd(&self) -> io::Result<ReadinessFd> {
        nagare::net::TcpStream::readiness_fd(self)
    }
}

impl Lends for nagare::net::TcpListener {
    fn readiness_fd(&self) -> io::Result<ReadinessFd> {
        nagare::net::TcpListener::readiness_fd(self)
    }
}

impl Lends for nagare::net::UdpSocket {
    fn readiness_fd(&self) -> io::Result<ReadinessFd> {
        nagare::net::UdpSocket::readiness_fd(self)
    }
}

/// What the sockets of one session share.
pub(crate) struct Reactor {
    session: nagare::Session,
    /// Attempts made again after one would have blocked.
    retries: AtomicU64,
}

impl Reactor {
    pub(crate) fn new(session: nagare::Session) -> Reactor {
        Reactor { session, retries: AtomicU64::new(0) }
    }

    pub(crate) fn session(&self) -> &nagare::Session {
        &self.session
    }

    pub(crate) fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
}

/// A socket of the client library with its descriptor registered with
/// tokio.
pub(crate) struct Registered<S> {
    /// Declared before `socket`: deregistered before the socket goes.
    fd: AsyncFd<ReadinessFd>,
    socket: S,
    reactor: Arc<Reactor>,
}

impl<S: Lends> Registered<S> {
    /// Registers `socket`'s descriptor with the current runtime.
    pub(crate) fn new(socket: S, reactor: Arc<Reactor>) -> io::Result<Registered<S>> {
        let lent = socket.readiness_fd()?;
        Registered::with_fd(socket, lent, reactor)
    }

    /// Registers `lent`, `socket`'s descriptor, with the current runtime.
    pub(crate) fn with_fd(socket: S, lent: ReadinessFd, reactor: Arc<Reactor>) -> io::Result<Registered<S>> {
        // SAFETY: a `ReadinessFd` owns (a share of) its descriptor, open
        // while it lives, and always answers the same one.
        let fd = unsafe { AsyncFd::register_with_interest(lent, Interest::READABLE | Interest::WRITABLE) };
        let fd = fd.map_err(|e| e.into_parts().1)?;
        Ok(Registered { fd, socket, reactor })
    }

    pub(crate) fn get(&self) -> &S {
        &self.socket
    }

    pub(crate) fn reactor(&self) -> &Arc<Reactor> {
        &self.reactor
    }

    /// Polls `attempt` (a call that never waits, wanting `interest`:
    /// readable or writable) until it gives something other than
    /// `WouldBlock`, with the task's waker kept for that direction (one
    /// task per direction, as `AsyncRead` and `AsyncWrite` poll).
    pub(crate) fn poll_io<T>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        mut attempt: impl FnMut(&S) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        let mut rounds = 0;
        loop {
            let ready = if interest.is_readable() { self.fd.poll_read_ready(cx) } else { self.fd.poll_write_ready(cx) };
            let mut guard = std::task::ready!(ready)?;
            match attempt(&self.socket) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
            self.reactor.retries.fetch_add(1, Ordering::Relaxed);
            if !still_ready(self.fd.get_ref().as_raw_fd(), interest) {
                // The next poll of readiness sleeps until an edge (one
                // that came since the readiness was seen is kept).
                guard.clear_ready();
                continue;
            }
            rounds += 1;
            if rounds >= ROUNDS {
                // Readiness left as it is: the next poll tries again.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
    }

    /// Runs `attempt` as [`Registered::poll_io`] does, as a future; any
    /// number of tasks may wait on one socket this way.
    pub(crate) async fn io<T>(
        &self,
        interest: Interest,
        mut attempt: impl FnMut(&S) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut rounds = 0;
        loop {
            let mut guard = self.fd.ready(interest).await?;
            match attempt(&self.socket) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            self.reactor.retries.fetch_add(1, Ordering::Relaxed);
            if !still_ready(self.fd.get_ref().as_raw_fd(), interest) {
                guard.clear_ready_matching(ready_of(interest));
                continue;
            }
            drop(guard);
            rounds += 1;
            if rounds % ROUNDS == 0 {
                tokio::task::yield_now().await;
            }
        }
    }
}

/// tokio's readiness for `interest`.
fn ready_of(interest: Interest) -> tokio::io::Ready {
    if interest.is_readable() {
        tokio::io::Ready::READABLE
    } else {
        tokio::io::Ready::WRITABLE
    }
}

/// Whether `fd` is ready for `interest` now (`poll(2)` without waiting);
/// an error counts as ready, for the call to meet it.
fn still_ready(fd: RawFd, interest: Interest) -> bool {
    let events = if interest.is_readable() { libc::POLLIN } else { libc::POLLOUT };
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n != 0
}
