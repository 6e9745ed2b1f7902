//! A session across `fork`: the child made by `fork` has a copy of the
//! session (its mapping, descriptors and tables), and exactly one of the
//! two processes may use it afterwards.
//!
//! [`Session::hold_for_fork`] takes the session (its table and its
//! watcher's slot) before the `fork`, so that no thread of the parent
//! holds either at the moment of the copy (the child's copy would stay
//! taken, with no thread to let it go) and no thread of the parent takes
//! completions off the rings between the `fork` and the parent's word on
//! who keeps the session. After the `fork`, [`ForkHold::in_parent`] or
//! [`ForkHold::in_child`] says which process keeps it, under the same
//! hold. The process that leaves it ([`Session::abandon`]) stops its
//! watcher; the one that takes it ([`Session::moved_here`]) starts its
//! own watcher with its first call on the session, not in the `fork`
//! handler (a thread started there would run before the child's own
//! handlers are done).

use crate::{watcher, Conn, InFlight, Role, Session};
use nagare_request::{Op, Request};
use std::io;
use std::sync::MutexGuard;

/// The session held across a `fork` ([`Session::hold_for_fork`]).
pub struct ForkHold<'a> {
    /// Taken first, as `watcher::ensure` takes them.
    slot: MutexGuard<'a, Option<watcher::Watcher>>,
    conn: MutexGuard<'a, Conn>,
}

impl Session {
    /// Takes the session before a `fork` (see [`ForkHold`]): no other
    /// thread of this process uses it until the hold is let go after the
    /// `fork`, by [`ForkHold::in_parent`] in the parent and
    /// [`ForkHold::in_child`] in the child (dropped instead, the session
    /// stays this process's, in both).
    pub fn hold_for_fork(&self) -> io::Result<ForkHold<'_>> {
        let slot = self.inner.watcher.lock().map_err(|_| crate::poisoned())?;
        let conn = self.inner.conn.lock().map_err(|_| crate::poisoned())?;
        Ok(ForkHold { slot, conn })
    }

    /// Leaves the session to another process that has a copy of it (a
    /// child made by `fork` after it was connected): from now on this
    /// process's calls on it fail, and dropping it or its sockets touches
    /// nothing it shares with netd (no close, no buffer returned to the
    /// pool); only this process's own descriptors and mapping go. Its
    /// watcher, if it runs here, stops. A thread of this process that
    /// took completions between the `fork` and this call took what the
    /// child owns: [`Session::hold_for_fork`] rules that out.
    pub fn abandon(&self) {
        let Ok(slot) = self.inner.watcher.lock() else { return };
        let Ok(conn) = self.inner.conn.lock() else { return };
        ForkHold { slot, conn }.in_parent();
    }

    /// Lets go of this process's copy of a session another process keeps
    /// (a child's copy of its parent's, made by `fork`, which the child
    /// never uses): the copy of its rendezvous socket is closed, so that
    /// netd sees the session end when the process that keeps it ends, not
    /// when the last child that inherited it does; nothing else of it is
    /// touched (no lock is taken, no object dropped, no other descriptor
    /// closed), since the copy may hold what a thread of the other
    /// process held at the `fork`. A number that names another file by
    /// now (the copy was closed already, and the number reused) is left
    /// alone.
    ///
    /// # Safety
    /// No clone of this session is used in this process afterwards: its
    /// rendezvous socket is closed under it.
    pub unsafe fn let_go_copy(self) {
        let fd = self.inner.liveness;
        if self.inner.liveness_file.is_some_and(|f| file_of(fd) == Some(f)) {
            // SAFETY: this process's copy of the rendezvous socket (the same
            // file), which no clone of the session uses again (the caller's
            // promise).
            unsafe { libc::close(fd) };
        }
        std::mem::forget(self);
    }

    /// Whether `self` and `other` are the same session (clones of one).
    pub fn same_as(&self, other: &Session) -> bool {
        std::sync::Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Tells netd that this process holds the session from now on: a child
    /// after `fork` that takes the session its parent made for it (netd
    /// allows it for a child of the session's process, of the same user).
    /// netd then weighs the session by this process's nice value and names
    /// this process in its report. Returns at once, without waiting for
    /// netd's answer (a `fork` handler calls it). Where the session's
    /// sockets lent descriptors (`readiness_fd`), this process's first
    /// call on the session starts its watcher thread for them.
    pub fn moved_here(&self) -> io::Result<()> {
        let Ok(slot) = self.inner.watcher.lock() else { return Err(crate::poisoned()) };
        let Ok(conn) = self.inner.conn.lock() else { return Err(crate::poisoned()) };
        ForkHold { slot, conn }.in_child()
    }
}

impl ForkHold<'_> {
    /// In the parent after the `fork`: the session is the child's
    /// ([`Session::abandon`]).
    pub fn in_parent(self) {
        let ForkHold { mut slot, mut conn } = self;
        conn.abandoned = true;
        conn.dead = true;
        // The watcher, if it runs here, sees `abandoned` when it wakes and
        // touches nothing; the stop wakes it.
        let here = slot.take();
        drop(conn);
        drop(slot);
        drop(here);
    }

    /// In the child after the `fork`: the session is this process's
    /// ([`Session::moved_here`]).
    pub fn in_child(self) -> io::Result<()> {
        let ForkHold { slot, mut conn } = self;
        let mut req = Request::new(Op::Pid, 0);
        req.aux[0] = u64::from(std::process::id());
        // The thread that slept on the eventfd when the session was copied
        // is the other process's: none sleeps here.
        conn.sleeper = false;
        conn.watcher_sleeps = false;
        conn.watcher_waits = false;
        conn.outside_waits = 0;
        let posted = conn.submit(&mut req, None);
        if posted.is_ok() {
            // Nobody takes the answer.
            conn.in_flight.insert(req.id, InFlight { buffer: None, abandoned: true, role: Role::Call });
        }
        // Sockets that lent descriptors in the other process need a
        // watcher in this one (the other's thread was not copied): started
        // by the first call (`Session::lock`). The other's entry in the
        // slot is replaced then.
        conn.start_watcher = !conn.ready_fds.is_empty() || !conn.answer_fds.is_empty();
        drop(conn);
        drop(slot);
        posted.map(|_| ())
    }
}

/// The device and inode of the file descriptor `fd` names, if it is open.
pub(crate) fn file_of(fd: std::os::fd::RawFd) -> Option<(u64, u64)> {
    // SAFETY: all zeros is a valid stat buffer, and fstat writes only it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a whole stat buffer; a closed or foreign number
    // gives an error, not a fault.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((st.st_dev as u64, st.st_ino as u64))
}
