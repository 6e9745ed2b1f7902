//! The waker side: one per [`crate::Session`], shared by all its sockets,
//! wakes the tasks whose operations would block when netd completes
//! something for the session.
//!
//! An operation is tried without waiting (`read_with(.., false)` and its
//! kin). When it would block, the task asks [`nagare::Session::prepare_wait`]
//! to have netd signal the session's eventfd on its next completion:
//! `None` means completions are already on the rings, so the operation is
//! tried again at once; `Some(fd)` means sleep until the fd is readable.
//! The fd is registered once with tokio's reactor as an
//! [`AsyncFd`] over [`SessionFd`], a wrapper that only lends the raw fd
//! (the session owns it and closes it). The task that wakes on it calls
//! [`nagare::Session::finish_wait`] (which drains the eventfd and stops
//! netd's signals), clears tokio's readiness, tells every other waiter,
//! and tries again. Each sleep is cut into slices (of
//! [`nagare::LIVENESS_SLICE`] unless [`crate::Session::set_slice`] says
//! otherwise): netd's death does not signal the eventfd, so after a slice
//! the operation is tried again, and that fails once netd is gone.
//!
//! Why no wake-up is lost, with several tasks waiting on one session:
//! a completion that arrives after a task's attempt is either still on
//! the rings when the task calls `prepare_wait` (which then answers
//! `None`), or arrives after netd was asked to signal, and the signal
//! makes the eventfd readable. tokio's registration is edge-triggered,
//! but it keeps the readiness it saw until a task clears it, so a task
//! that starts waiting after the edge still sees it, and every task
//! waiting when it comes is woken. Three things could still hide a
//! completion from a waiter, and each is closed:
//! - Another task drains the eventfd (`finish_wait`) and clears the
//!   readiness: the edge is gone, and netd no longer signals. So every
//!   drain bumps a count (`drains`) and wakes every waiter (a
//!   [`Notify`]); a waiter reads the count before its attempt and sleeps
//!   only while it is unchanged, so a drain after its attempt, even one
//!   before it started to sleep, sends it back to try again.
//! - Another task takes the completions off the rings between this task's
//!   attempt and its `prepare_wait` (any attempt collects them): the rings
//!   look empty, yet the completion for this task's socket was taken, and
//!   no signal comes. So the attempt and the `prepare_wait` after it are
//!   one turn, under a lock (`turn`) that every attempt of this crate
//!   takes.
//! - A blocking call of the client library on the session (the connect
//!   this crate runs on tokio's blocking pool; the listen, bind, shutdown
//!   and close it runs inline) waits on the same eventfd in its own way
//!   and may drain it and collect completions. So such a call wakes the
//!   waiters when it starts, they sleep in slices of [`BLOCKING_SLICE`]
//!   while it is out, and are woken again as after a drain when it
//!   returns. Blocking calls made on the session outside this crate (an
//!   option through `TcpStream::get_ref`, the client library used
//!   directly) are not seen: a waiter may then learn of its readiness a
//!   slice late.
//!
//! The fd is registered with the runtime of the first task that sleeps on
//! it: a session's sockets are driven by one runtime.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

/// How long a waiter sleeps between attempts while a blocking call of the
/// client library is out on the session (it may take the signal).
pub const BLOCKING_SLICE: Duration = Duration::from_millis(1);

/// Attempts again in one poll (after completions were found waiting, or
/// a sleep ended at once) before the poll yields to the runtime (it is
/// woken again at once): one busy session does not hold the thread.
const ROUNDS: u32 = 16;

/// The session's eventfd, lent: never closed here.
#[derive(Debug)]
pub(crate) struct SessionFd(RawFd);

impl AsRawFd for SessionFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A sleep until the session may have changed.
pub(crate) type Wait = Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>;

/// The waker of one session's sockets.
pub(crate) struct Reactor {
    /// Declared before `session`: deregistered before the session (and its
    /// eventfd) may go.
    fd: OnceLock<AsyncFd<SessionFd>>,
    session: nagare::Session,
    /// Held across an attempt and the `prepare_wait` after it.
    turn: Mutex<()>,
    /// Drains of the eventfd (and blocking calls returned) so far.
    drains: AtomicU64,
    drained: Notify,
    /// Blocking calls of the client library out on the session.
    blocking: AtomicUsize,
    /// Attempts made again after one would have blocked.
    retries: AtomicU64,
    /// The longest sleep without a wake-up, in microseconds.
    slice: AtomicU64,
}

impl Reactor {
    pub(crate) fn new(session: nagare::Session) -> Reactor {
        Reactor {
            fd: OnceLock::new(),
            session,
            turn: Mutex::new(()),
            drains: AtomicU64::new(0),
            drained: Notify::new(),
            blocking: AtomicUsize::new(0),
            retries: AtomicU64::new(0),
            slice: AtomicU64::new(nagare::LIVENESS_SLICE.as_micros() as u64),
        }
    }

    pub(crate) fn session(&self) -> &nagare::Session {
        &self.session
    }

    pub(crate) fn set_slice(&self, slice: Duration) {
        let micros = slice.as_micros().clamp(1, u128::from(u64::MAX)) as u64;
        self.slice.store(micros, Ordering::Relaxed);
    }

    pub(crate) fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Runs `call`, a blocking call of the client library on the session,
    /// with the waiters told (see the module docs).
    pub(crate) fn blocking<T>(&self, call: impl FnOnce() -> T) -> T {
        self.blocking.fetch_add(1, Ordering::SeqCst);
        // Waiters already asleep wake and sleep again in short slices.
        self.woken();
        let out = call();
        self.blocking.fetch_sub(1, Ordering::SeqCst);
        self.woken();
        out
    }

    /// Tells every waiter that the session may have changed.
    fn woken(&self) {
        self.drains.fetch_add(1, Ordering::SeqCst);
        self.drained.notify_waiters();
    }

    /// Polls `attempt` (a call that never waits) until it gives something
    /// other than `WouldBlock`, sleeping in `wait` (kept by the caller
    /// across polls) while it would block.
    pub(crate) fn poll_io<T>(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        wait: &mut Option<Wait>,
        mut attempt: impl FnMut() -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        let mut rounds = 0;
        loop {
            if let Some(w) = wait.as_mut() {
                let slept = std::task::ready!(w.as_mut().poll(cx));
                *wait = None;
                slept?;
                self.retries.fetch_add(1, Ordering::Relaxed);
                rounds += 1;
                if rounds >= ROUNDS {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            let seen = self.drains.load(Ordering::SeqCst);
            let armed = {
                let _turn = self.turn.lock().map_err(|_| io::Error::other("reactor poisoned"))?;
                match attempt() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    done => return Poll::Ready(done),
                }
                let armed = self.session.prepare_wait()?;
                if let Some(fd) = armed {
                    self.register(fd)?;
                }
                armed
            };
            if armed.is_none() {
                // Completions are waiting: try again now (yielding after
                // `ROUNDS`).
                self.retries.fetch_add(1, Ordering::Relaxed);
                rounds += 1;
                if rounds >= ROUNDS {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                continue;
            }
            *wait = Some(Box::pin(Arc::clone(self).sleep(seen)));
        }
    }

    /// Runs `attempt` as [`Reactor::poll_io`] does, as a future.
    pub(crate) async fn io<T>(self: &Arc<Self>, mut attempt: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        let mut wait = None;
        std::future::poll_fn(|cx| self.poll_io(cx, &mut wait, &mut attempt)).await
    }

    /// Registers the eventfd with tokio the first time (under `turn`).
    fn register(&self, fd: RawFd) -> io::Result<()> {
        if self.fd.get().is_none() {
            // SAFETY: the fd is the session's eventfd, open while the
            // session lives; `self.session` outlives `self.fd` (declared
            // after it), and `SessionFd` always answers the same fd.
            let registered = unsafe { AsyncFd::register_with_interest(SessionFd(fd), Interest::READABLE) };
            let _ = self.fd.set(registered.map_err(|e| e.into_parts().1)?);
        }
        Ok(())
    }

    /// Sleeps until the eventfd is readable (then drains it and tells the
    /// other waiters), another task drained it, or a slice passed; `seen`
    /// is the drain count read before the attempt that would have blocked.
    async fn sleep(self: Arc<Self>, seen: u64) -> io::Result<()> {
        let Some(fd) = self.fd.get() else {
            return Ok(());
        };
        let drained = self.drained.notified();
        tokio::pin!(drained);
        drained.as_mut().enable();
        if self.drains.load(Ordering::SeqCst) != seen {
            return Ok(());
        }
        let slice = Duration::from_micros(self.slice.load(Ordering::Relaxed));
        let slice = if self.blocking.load(Ordering::SeqCst) > 0 { slice.min(BLOCKING_SLICE) } else { slice };
        tokio::select! {
            ready = fd.readable() => {
                let mut guard = ready?;
                let finished = self.session.finish_wait();
                guard.clear_ready();
                self.woken();
                finished?;
            }
            _ = &mut drained => {}
            _ = tokio::time::sleep(slice) => {}
        }
        Ok(())
    }
}
