//! The session's watcher: a thread, started with the session's first
//! socket descriptor (`readyfd.rs`), that takes completions off the rings
//! while the program sleeps in its own `poll` on those descriptors, so
//! that each is set when its socket's readiness rises.
//!
//! It is one of the session's waiters (`Shared` in `lib.rs`): when no
//! thread sleeps on the session's eventfd it becomes the sleeper (asks
//! netd for a signal, looks at the rings once more, sleeps without
//! holding the session), and when another thread sleeps there it waits
//! to be woken by it. Either way every completion is taken by some
//! thread, which delivers it to its socket's path and sets the socket's
//! descriptor (`Conn::deliver`), with the session taken: no completion is
//! left on the rings while every thread sleeps, and none is taken without
//! its descriptor being set.
//!
//! It sleeps with no time limit, on the eventfd, on netd's rendezvous
//! socket (which hangs up when netd dies: then every descriptor is set
//! readable and writable, for the calls to fail) and on its stop eventfd,
//! signalled when the session goes. It holds the session only weakly,
//! and not at all while it sleeps, so that the session goes with its last
//! socket.

use crate::{Conn, Shared, LIVENESS_SLICE};
use nagare_ipc::EventFd;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// A running watcher; stopped when dropped (with its session).
pub(crate) struct Watcher {
    stop: EventFd,
    /// The process it runs in (a child made by `fork` has no copy of it).
    pid: u32,
    /// Which thread it is ([`NEXT_ID`]): the one that leaves clears the
    /// slot only if it still holds its own.
    id: u64,
    /// The numbers of the thread's own copies ([`Fds`]).
    copies: [std::os::fd::RawFd; 3],
}

impl Watcher {
    /// The descriptors it keeps open in this process: its stop eventfd
    /// and its thread's copies (none for a parent's, copied by `fork`).
    pub(crate) fn descriptors(&self) -> Vec<std::os::fd::RawFd> {
        if self.pid != std::process::id() {
            return Vec::new();
        }
        let [a, b, c] = self.copies;
        vec![self.stop.as_raw_fd(), a, b, c]
    }
}

/// The next watcher's [`Watcher::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Drop for Watcher {
    fn drop(&mut self) {
        // Only this process's: a child's copy of the session must not stop
        // its parent's watcher (the eventfd is the same one).
        if self.pid == std::process::id() {
            let _ = self.stop.signal();
        }
    }
}

/// Starts `shared`'s watcher unless it runs in this process already.
pub(crate) fn ensure(shared: &Arc<Shared>) -> io::Result<()> {
    let mut slot = shared.watcher.lock().map_err(|_| io::Error::other("netd connection poisoned"))?;
    let here = std::process::id();
    if slot.as_ref().is_some_and(|w| w.pid == here) {
        return Ok(());
    }
    let stop = EventFd::new()?;
    let fds = {
        let c = shared.conn.lock().map_err(|_| io::Error::other("netd connection poisoned"))?;
        Fds {
            wake: shared.wake.as_fd().try_clone_to_owned()?,
            alive: c.client.liveness_fd().try_clone_to_owned()?,
            stop: stop.as_fd().try_clone_to_owned()?,
        }
    };
    let copies = [fds.wake.as_raw_fd(), fds.alive.as_raw_fd(), fds.stop.as_raw_fd()];
    let session = Arc::downgrade(shared);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    crate::signals::spawn_quiet(std::thread::Builder::new().name(String::from("nagare-watcher")), move || {
        let _leaving = Leaving { session: session.clone(), id };
        watch(&session, &fds);
    })?;
    // Another process's, if there was one (this one is a child of it):
    // dropped, which closes this process's copy of its stop eventfd and
    // signals nothing (`Watcher::drop`).
    drop(slot.replace(Watcher { stop, pid: here, id, copies }));
    Ok(())
}

/// Clears the session's watcher slot when its thread ends, whatever ends
/// it, so that the slot never names a thread that is gone: a watcher that
/// ended while its session still needs one ([`Conn::start_watcher`]) is
/// started again by the session's next call.
struct Leaving {
    session: Weak<Shared>,
    id: u64,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        let Some(shared) = self.session.upgrade() else { return };
        let Ok(mut slot) = shared.watcher.lock() else { return };
        if slot.as_ref().is_some_and(|w| w.id == self.id) {
            *slot = None;
        }
    }
}

/// The watcher's own copies of what it sleeps on.
struct Fds {
    /// The session's eventfd.
    wake: OwnedFd,
    /// netd's rendezvous socket.
    alive: OwnedFd,
    /// Signalled when the session goes.
    stop: OwnedFd,
}

/// What ended one sleep.
struct Woke {
    stop: bool,
    /// `poll` itself failed (no memory).
    failed: bool,
    /// The rendezvous socket hung up or became readable (netd is gone).
    alive_changed: bool,
}

fn watch(session: &Weak<Shared>, fds: &Fds) {
    loop {
        let Some(shared) = session.upgrade() else { return };
        let Ok(mut c) = shared.conn.lock() else { return };
        if c.abandoned {
            return;
        }
        if !c.dead && c.collect().is_err() {
            c.mark_dead();
        }
        if c.dead {
            c.publish_all();
            return;
        }
        if c.sleeper {
            // Another thread sleeps on the eventfd: it wakes the waiters,
            // this one too, once it wakes (within a liveness slice).
            let _ = shared.woken.wait_timeout(c, LIVENESS_SLICE);
            continue;
        }
        let Conn { waiter, completions, direct, .. } = &mut *c;
        match waiter.prepare_sleep_any(&mut [completions, direct]) {
            // Completions arrived meanwhile: taken at the top.
            Ok(true) => continue,
            Ok(false) => {}
            Err(_) => {
                c.mark_dead();
                continue;
            }
        }
        c.sleeper = true;
        c.watcher_sleeps = true;
        drop(c);
        drop(shared);
        let woke = sleep(fds);
        let Some(shared) = session.upgrade() else { return };
        let Ok(mut c) = shared.conn.lock() else { return };
        if c.abandoned {
            // Another process holds the session (`Session::abandon`): its
            // eventfd and rings are not this one's to touch.
            return;
        }
        c.sleeper = false;
        c.watcher_sleeps = false;
        shared.woken.notify_all();
        if woke.stop {
            return;
        }
        if woke.failed {
            c.start_watcher = true;
            return;
        }
        if woke.alive_changed && c.client.peer_gone() {
            // Every descriptor is set at the top.
            c.mark_dead();
            continue;
        }
        if c.outside_waits > 0 {
            // An outside loop sleeps on the eventfd too: a reset here could
            // take its wake-up (its `poll` looks again once woken). What
            // arrived is taken here, and the loop resets the eventfd
            // (`finish_wait`), which wakes this thread to ask for signals
            // again.
            if c.collect().is_err() {
                c.mark_dead();
            }
            if !c.dead && c.outside_waits > 0 {
                c.watcher_waits = true;
                if let Ok((mut c, _)) = shared.woken.wait_timeout(c, LIVENESS_SLICE) {
                    c.watcher_waits = false;
                }
            }
            continue;
        }
        let Conn { waiter, completions, direct, .. } = &mut *c;
        if waiter.woke_any(&[completions, direct]).is_err() {
            c.mark_dead();
        }
    }
}

/// Sleeps until one of the watcher's descriptors is ready (a signal
/// handler's interruption is slept through).
fn sleep(fds: &Fds) -> Woke {
    let watched: [BorrowedFd<'_>; 3] = [fds.wake.as_fd(), fds.alive.as_fd(), fds.stop.as_fd()];
    let mut p = watched.map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
    loop {
        // SAFETY: `p` holds three valid pollfds.
        let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if n > 0 {
            return Woke { stop: p[2].revents != 0, failed: false, alive_changed: p[1].revents != 0 };
        }
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // poll itself failed (no memory): this thread ends, and the
            // session's next call starts another.
            return Woke { stop: false, failed: true, alive_changed: false };
        }
    }
}
