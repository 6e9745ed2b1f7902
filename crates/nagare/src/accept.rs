//! A listener's path: one `ACCEPT` kept posted with netd, so that a
//! connection netd accepts waits in our queue until the application's
//! `accept` takes it, and a listener's readiness is read here rather than
//! asked of netd (what an event loop polling a listener on every turn
//! would pay a round trip for).
//!
//! The queue holds at most [`ACCEPTED_AHEAD`] connections: past it no
//! `ACCEPT` is posted, and further connections wait in netd's accept
//! queue (the listener's backlog). A connection that arrives for a
//! listener already closed here is closed at once.

use crate::path::{Ask, Role, NOTHING_KEPT};
use crate::{Conn, InFlight};
use nagare_request::{Completion, Op};
use std::collections::VecDeque;
use std::io;

/// The most accepted connections a listener's queue holds.
pub(crate) const ACCEPTED_AHEAD: usize = 16;

/// A listener's queue of connections netd accepted.
#[derive(Default)]
pub(crate) struct ListenPath {
    accepted: VecDeque<Completion>,
    /// `ACCEPT`s posted and not completed: at most one ahead on a listener
    /// of this process alone, one per waiting accept on a shared one.
    posted: usize,
    /// The error the last `ACCEPT` met, reported by the next `accept`.
    error: Option<i32>,
    /// Shared with another process (`crate::share`): an `ACCEPT` is posted
    /// only when this one accepts, so that no connection another holder
    /// could take waits in this queue.
    shared: bool,
    /// A shared listener's `ACCEPT`s that netd answered with nothing
    /// (`EAGAIN`), by request id: the accept that posted one says
    /// `WouldBlock` when it looks, no other; past [`NOTHING_KEPT`] the
    /// oldest go.
    nothing_for: VecDeque<u64>,
}

impl Conn {
    /// Listener `id` is shared: it accepts nothing ahead from now on.
    pub(crate) fn share_listen_path(&mut self, id: u32) {
        if let Some(l) = self.listeners.get_mut(&id) {
            l.shared = true;
        }
    }

    /// Listener `id` was taken back from sharing: it accepts ahead again.
    pub(crate) fn unshare_listen_path(&mut self, id: u32) -> io::Result<()> {
        let Some(l) = self.listeners.get_mut(&id) else { return Ok(()) };
        l.shared = false;
        self.post_accept(id, None)
    }

    /// Whether listener `id` is shared with another process.
    pub(crate) fn is_shared_listener(&self, id: u32) -> bool {
        self.listeners.get(&id).is_some_and(|l| l.shared)
    }

    /// Whether listener `id`'s readiness is known here (a path, not
    /// shared).
    pub(crate) fn listener_tracks_readiness(&self, id: u32) -> bool {
        self.listeners.get(&id).is_some_and(|l| !l.shared)
    }

    /// Opens listener `id`'s path and posts its first `ACCEPT` (`shared`:
    /// one another process holds too, which accepts nothing ahead).
    pub(crate) fn open_listen_path(&mut self, id: u32, shared: bool) -> io::Result<()> {
        self.listeners.insert(id, ListenPath { shared, ..ListenPath::default() });
        self.post_accept(id, None)
    }

    /// Posts an `ACCEPT` on listener `id` unless the queue is full or an
    /// error waits: on a listener of this process alone one ahead, unless
    /// one is posted; on a shared one only for an accept that `asked`, its
    /// own, answered at once unless it may wait.
    fn post_accept(&mut self, id: u32, asked: Option<&mut Ask>) -> io::Result<()> {
        let Some(l) = self.listeners.get(&id) else { return Ok(()) };
        let post = if l.shared { asked.is_some() } else { l.posted == 0 };
        if !post || l.error.is_some() || l.accepted.len() >= ACCEPTED_AHEAD {
            return Ok(());
        }
        let asked = if l.shared { asked } else { None };
        // No wait limit: netd completes it when a connection is there.
        let mut req = crate::request(Op::Accept, id);
        if asked.as_ref().is_some_and(|a| !a.may_wait) {
            req.flags |= nagare_request::NONBLOCK;
        }
        self.submit(&mut req, None)?;
        self.in_flight
            .insert(req.id, InFlight { buffer: None, abandoned: false, role: Role::PostedAccept { listener: id } });
        if let Some(l) = self.listeners.get_mut(&id) {
            l.posted += 1;
        }
        if let Some(a) = asked {
            a.posted = Some(req.id);
        }
        Ok(())
    }

    /// Takes the completion of listener `listener`'s posted `ACCEPT`.
    pub(crate) fn deliver_accept(&mut self, listener: u32, comp: Result<Completion, nagare_request::ProtoError>) {
        let result = comp.as_ref().map_err(|_| libc::EPROTO).and_then(|c| c.result().map(|_| *c));
        let rid = comp.as_ref().map_or(0, |c| c.id);
        let Some(l) = self.listeners.get_mut(&listener) else {
            // The listener is closed here: nobody will take the connection.
            if let Ok(c) = result {
                self.close_unclaimed(c.aux[0] as u32);
            }
            return;
        };
        l.posted = l.posted.saturating_sub(1);
        match result {
            Ok(c) => l.accepted.push_back(c),
            // A shared listener's accept that found nothing (the
            // listener may be taken back since): its asker's.
            Err(libc::EAGAIN) => {
                if l.nothing_for.len() >= NOTHING_KEPT {
                    l.nothing_for.pop_front();
                }
                l.nothing_for.push_back(rid);
            }
            // ECANCELED: the listener was shared.
            Err(libc::EINTR | libc::ECANCELED) => {}
            Err(e) => {
                l.error.get_or_insert(e);
            }
        }
        let _ = self.post_accept(listener, None);
    }

    /// The next connection listener `id` accepted (`None` if none is
    /// here yet), or the error its last `ACCEPT` met.
    /// A shared listener's accept that may not wait still waits for netd's
    /// answer to its own `ACCEPT` (`ask`), which comes at once; one whose
    /// `ACCEPT` was answered with a connection another accept took posts
    /// again.
    pub(crate) fn take_accepted(&mut self, id: u32, ask: &mut Ask) -> io::Result<Option<Completion>> {
        let l = self.listeners.get_mut(&id).ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
        // A failed post (a full request ring) is tried again by the next
        // take; the connection or error taken is returned either way.
        if let Some(c) = l.accepted.pop_front() {
            let _ = self.post_accept(id, None);
            return Ok(Some(c));
        }
        if let Some(e) = l.error.take() {
            let _ = self.post_accept(id, None);
            return Err(io::Error::from_raw_os_error(e));
        }
        if !l.shared {
            let ends = ask.shared && ask.ends_unshared(&mut l.nothing_for, |r| self.in_flight.contains_key(&r));
            self.post_accept(id, None)?;
            return if ends { Err(io::Error::from_raw_os_error(libc::EAGAIN)) } else { Ok(None) };
        }
        if let Some(rid) = ask.posted {
            if let Some(at) = l.nothing_for.iter().position(|&r| r == rid) {
                l.nothing_for.remove(at);
                ask.posted = None;
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            if self.in_flight.contains_key(&rid) {
                return Ok(None);
            }
            ask.posted = None;
        }
        self.post_accept(id, Some(ask))?;
        Ok(None)
    }

    /// Whether listener `id` has a connection (or an error) waiting;
    /// `None` if it has no path.
    pub(crate) fn listener_ready(&self, id: u32) -> Option<bool> {
        self.listeners.get(&id).map(|l| !l.accepted.is_empty() || l.error.is_some())
    }

    /// Forgets listener `id`'s path; the connections it holds are closed.
    pub(crate) fn close_listen_path(&mut self, id: u32) {
        let _ = self.collect();
        let Some(l) = self.listeners.remove(&id) else { return };
        for c in l.accepted {
            self.close_unclaimed(c.aux[0] as u32);
        }
    }

    /// Closes a connection netd made (accepted, or connected for a
    /// `Connecting` dropped) that no application will take.
    pub(crate) fn close_unclaimed(&mut self, socket: u32) {
        let mut req = crate::request(Op::Close, socket);
        req.aux[0] = nagare_request::CLOSE_RESET;
        if self.submit(&mut req, None).is_ok() {
            self.in_flight.insert(req.id, InFlight { buffer: None, abandoned: true, role: Role::Call });
        }
    }
}
