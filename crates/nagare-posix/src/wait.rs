//! Readiness of nagare sockets beside the kernel's descriptors: `poll`
//! (`ppoll`) and `select` (`pselect`) over a mixed set.
//!
//! A socket's readiness is in our region (a stream's or datagram socket's
//! data path, a listener's queue of accepted connections), so it is read
//! without asking netd. A set of nagare sockets alone waits in the client
//! library's `poll`. A mixed set looks at both sides without waiting, then
//! sleeps in the kernel's `poll` on its own descriptors plus the session's
//! eventfd, which netd signals with its next completion, at most
//! [`SLICE`] (netd's death signals nothing).

use crate::errors::errno;
use crate::session::session;
use crate::sock::{Proto, Sock, State};
use crate::{table, Entered, Res};
use nagare::poll::{PollEntry, CLOSED, EXCLUSIVE, INVALID, READABLE, WRITABLE};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest sleep before netd's life is looked at again.
pub(crate) const SLICE: Duration = Duration::from_millis(100);

/// The sleep between looks at a set of more nagare sockets than one of the
/// client library's polls takes.
const SHORT_SLEEP: Duration = Duration::from_millis(1);

/// The most entries one `poll` takes (Linux's `RLIMIT_NOFILE` bound).
const MAX_ENTRIES: usize = 1 << 20;

/// A nagare socket in a set: where it is, and what it is.
pub(crate) struct Ours {
    pub(crate) at: usize,
    pub(crate) sock: Arc<Sock>,
    /// Watched with `EPOLLEXCLUSIVE`: a shared listener's connection wakes
    /// this wait only if it woke no other (`EXCLUSIVE`).
    pub(crate) exclusive: bool,
}

/// `poll`/`ppoll` over a set that may hold nagare sockets. `limit`:
/// `None` waits as long as it takes. `sigmask` is the one `ppoll` is
/// given (null for `poll`), in force while sleeping in the kernel.
///
/// # Safety
/// `fds` has `n` entries; `sigmask` is null or valid.
pub unsafe fn poll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    limit: Option<Duration>,
    sigmask: *const libc::sigset_t,
) -> Res<i32> {
    // Held before the mark, let go after it (dropped in reverse): a
    // handler never runs marked but in a sleep.
    let held = hold_signals(sigmask)?;
    let _in = Entered::new();
    let n = usize::try_from(n).ok().filter(|&n| n <= MAX_ENTRIES).ok_or(libc::EINVAL)?;
    if n > 0 && fds.is_null() {
        return Err(libc::EFAULT);
    }
    let entries: &mut [libc::pollfd] = if n == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(fds, n) } };
    poll_entries(entries, limit, &held)
}

fn poll_entries(entries: &mut [libc::pollfd], limit: Option<Duration>, held: &nagare::signals::Held) -> Res<i32> {
    let ours: Vec<Ours> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.fd >= 0 && table::is_ours(e.fd))
        .filter_map(|(at, e)| table::get(e.fd).ok().map(|sock| Ours { at, sock, exclusive: false }))
        .collect();
    let mut kernel: Vec<libc::pollfd> = entries.to_vec();
    for o in &ours {
        // The kernel looks past our entries: a negative number is skipped.
        kernel[o.at].fd = -1;
    }
    let deadline = limit.map(|l| Instant::now() + l);
    let only_ours = kernel.iter().all(|e| e.fd < 0);
    let mut looked_again = false;
    loop {
        let mut ready = match readiness(&ours, entries) {
            Ok(n) => n,
            Err(gone) if netd_gone(gone) => return without_netd(entries, &mut kernel, deadline, held, gone),
            Err(e) => return Err(e),
        };
        let seen = looked(&ours);
        ready += kernel_poll(&mut kernel, Duration::ZERO, std::ptr::null())?;
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if ready > 0 || left.is_some_and(|l| l.is_zero()) {
            for (e, k) in entries.iter_mut().zip(&kernel) {
                if k.fd >= 0 {
                    e.revents = k.revents;
                }
            }
            return Ok(ready);
        }
        let Some(mask) = sleep_mask(held, &mut looked_again)? else { continue };
        let connecting = ours.iter().any(|o| o.sock.lock().is_ok_and(|g| matches!(g.state, State::Connecting(_))));
        let slept = if only_ours && !connecting {
            wait_in_netd(&ours, entries, left, mask)
        } else {
            sleep(&ours, entries, &mut kernel, left, mask, seen)
        };
        match slept {
            Err(gone) if netd_gone(gone) => return without_netd(entries, &mut kernel, deadline, held, gone),
            r => r?,
        }
    }
}

/// Whether a call failed because netd is gone (its sockets' calls fail so
/// once it died, or the session could not be made).
pub(crate) fn netd_gone(e: i32) -> bool {
    e == libc::ECONNABORTED || e == libc::ENETDOWN
}

/// How long a wait whose netd is gone sleeps on its kernel descriptors:
/// the call's time left (its `deadline`), at most [`SLICE`]; `EINTR` if a
/// signal was handled on the way to it.
pub(crate) fn slice_without_netd(deadline: Option<Instant>) -> Res<Duration> {
    if nagare::signals::take_handled() {
        return Err(libc::EINTR);
    }
    Ok(deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()).min(SLICE)))
}

/// `poll` over a set whose nagare sockets went with netd (`gone`, the
/// error their calls give): the kernel's entries (`kernel`, ours left
/// out) are still waited on, for at most the call's time and [`SLICE`],
/// and without one ready the call fails with `gone`, so that a loop that
/// waits again at once does not spin (as `epoll::without_netd`).
fn without_netd(
    entries: &mut [libc::pollfd],
    kernel: &mut [libc::pollfd],
    deadline: Option<Instant>,
    held: &nagare::signals::Held,
    gone: i32,
) -> Res<i32> {
    let ready = kernel_poll(kernel, slice_without_netd(deadline)?, held.mask())?;
    if ready == 0 {
        return Err(gone);
    }
    for (e, k) in entries.iter_mut().zip(kernel.iter()) {
        e.revents = if k.fd >= 0 { k.revents } else { 0 };
    }
    Ok(ready)
}

/// Holds the signals for a whole wait (`nagare::signals`): a handler
/// runs only while the wait sleeps (with [`sleep_mask`]'s mask, the
/// caller's `sigmask` if it gave one) or once the wait returns, never
/// while the library looks at readiness under its locks. Programs run
/// handlers around exactly these calls: PostgreSQL's postmaster before
/// version 16 unblocks its signals only around `select` and forks in its
/// handlers, and a handler that met the session's lock held by its own
/// thread would wait on it for ever. Taken before the layer's mark
/// (`Entered`) and dropped after it, so that a handler runs marked only
/// while the wait sleeps.
pub(crate) fn hold_signals(sigmask: *const libc::sigset_t) -> Res<nagare::signals::Held> {
    // SAFETY: a mask the caller gave points to a sigset_t for the call's
    // duration.
    let mask = unsafe { sigmask.as_ref() };
    nagare::signals::hold(mask).map_err(|e| errno(&e))
}

/// The session's count of completions taken, read right after a look at
/// readiness, for [`sleep`]: `None` without nagare sockets in the set, or
/// without a session (then the sleep prepares without it, and says why it
/// cannot, as the look would have).
pub(crate) fn looked(ours: &[Ours]) -> Option<u64> {
    if ours.is_empty() {
        return None;
    }
    session().ok()?.collected().ok()
}

/// The mask a sleep of a wait installs so that a signal handler ends it:
/// the caller's (`ppoll`, `pselect`, `epoll_pwait`), else the thread's own
/// from before [`hold_signals`]. `EINTR` once a handler ran in a sleep of
/// the wait that went on after it. The first time (`looked_again` unset)
/// it gives `None`: the wait looks at readiness once more before its first
/// sleep, so that what netd was completing as the wait began (the answer
/// an event loop waits for) is taken for the price of a look, not of a
/// sleep and a wake-up.
pub(crate) fn sleep_mask(held: &nagare::signals::Held, looked_again: &mut bool) -> Res<Option<*const libc::sigset_t>> {
    if !std::mem::replace(looked_again, true) {
        return Ok(None);
    }
    if nagare::signals::take_handled() {
        return Err(libc::EINTR);
    }
    Ok(Some(held.mask() as *const libc::sigset_t))
}

/// Sleeps until one of `kernel` is ready or netd completes something for
/// this session, at most `left` and [`SLICE`]. Our sockets whose
/// readiness only netd knows (shared with another process, or without a
/// receive posted for want of a buffer) have netd answer a request when
/// one is ready, which ends the sleep; a shared listener watched
/// exclusively only when its connection woke no other holder. `seen`:
/// the session's count of completions taken ([`looked`]) right after
/// the caller's look at readiness.
pub(crate) fn sleep(
    ours: &[Ours],
    entries: &[libc::pollfd],
    kernel: &mut Vec<libc::pollfd>,
    left: Option<Duration>,
    sigmask: *const libc::sigset_t,
    seen: Option<u64>,
) -> Res<()> {
    let slice = left.map_or(SLICE, |l| l.min(SLICE));
    let netd = session()?;
    let shared: Vec<PollEntry> = ours
        .iter()
        .filter_map(|o| {
            let g = o.sock.lock().ok()?;
            let (socket, mut interest) = match &g.state {
                State::Listener(l) if l.readiness_from_netd() => {
                    (l.socket_id(), if o.exclusive { EXCLUSIVE } else { 0 })
                }
                State::Stream(s) if s.readiness_from_netd() => (s.socket_id(), 0),
                State::Datagram(d) if d.readiness_from_netd() => (d.socket_id(), 0),
                _ => return None,
            };
            let events = entries.get(o.at).map_or(0, |e| e.events);
            if events & (libc::POLLIN | libc::POLLRDNORM) != 0 {
                interest |= READABLE;
            }
            if events & (libc::POLLOUT | libc::POLLWRNORM) != 0 {
                interest |= WRITABLE;
            }
            Some(PollEntry { socket, interest, ready: 0 })
        })
        .take(nagare_request::MAX_POLL as usize)
        .collect();
    if !shared.is_empty() {
        nagare::poll::wake_when_ready(&netd, &shared, slice).map_err(|e| errno(&e))?;
    }
    // Completions taken since the look (here, or by another thread) may
    // have made one of ours ready: then no sleep, the caller looks again.
    let prepared = match seen {
        Some(seen) => netd.prepare_wait_after(seen),
        None => netd.prepare_wait(),
    };
    let Some(wake) = prepared.map_err(|e| errno(&e))? else { return Ok(()) };
    kernel.push(libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 });
    let slept = kernel_poll(kernel, slice, sigmask);
    kernel.pop();
    netd.finish_wait().map_err(|e| errno(&e))?;
    slept.map(|_| ())
}

/// The kernel's `ppoll` on `set` for at most `limit`; the entries ready.
pub(crate) fn kernel_poll(set: &mut [libc::pollfd], limit: Duration, sigmask: *const libc::sigset_t) -> Res<i32> {
    if set.iter().all(|e| e.fd < 0) && limit.is_zero() {
        set.iter_mut().for_each(|e| e.revents = 0);
        return Ok(0);
    }
    let ts = libc::timespec { tv_sec: limit.as_secs() as libc::time_t, tv_nsec: limit.subsec_nanos() as libc::c_long };
    let r = unsafe { libc::ppoll(set.as_mut_ptr(), set.len() as libc::nfds_t, &ts, sigmask) };
    if r < 0 {
        return Err(crate::calls::last_errno());
    }
    Ok(r)
}

/// Fills in `revents` of our entries; how many are nonzero.
pub(crate) fn readiness(ours: &[Ours], entries: &mut [libc::pollfd]) -> Res<i32> {
    let mut asks: Vec<(usize, PollEntry, i16)> = Vec::new();
    for o in ours {
        let e = &mut entries[o.at];
        e.revents = 0;
        let Ok(g) = o.sock.lock() else {
            e.revents = libc::POLLNVAL;
            continue;
        };
        let id = match &g.state {
            State::Fresh if o.sock.proto == Proto::Tcp => {
                e.revents = (libc::POLLOUT | libc::POLLHUP) & (e.events | libc::POLLHUP);
                continue;
            }
            State::Fresh => {
                e.revents = libc::POLLOUT & e.events;
                continue;
            }
            // netd's answer wakes the sleep (a completion).
            State::Connecting(_) => continue,
            State::Failed(_) => {
                e.revents = (libc::POLLOUT & e.events) | libc::POLLERR | libc::POLLHUP;
                continue;
            }
            State::Listener(l) => l.socket_id(),
            State::Stream(s) => s.socket_id(),
            State::Datagram(d) => d.socket_id(),
        };
        let connected = if g.connect_done { libc::POLLOUT | libc::POLLWRNORM } else { 0 };
        asks.push((o.at, PollEntry { socket: id, interest: READABLE | WRITABLE, ready: 0 }, connected));
    }
    if !asks.is_empty() {
        let netd = session()?;
        for chunk in asks.chunks_mut(nagare_request::MAX_POLL as usize) {
            let mut list: Vec<PollEntry> = chunk.iter().map(|(_, p, _)| *p).collect();
            nagare::poll::poll(&netd, &mut list, Some(Duration::ZERO)).map_err(|e| errno(&e))?;
            for ((at, _, connected), p) in chunk.iter().zip(&list) {
                let e = &mut entries[*at];
                e.revents =
                    (events_of(p.ready) | connected) & (e.events | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL);
            }
        }
    }
    Ok(ours.iter().filter(|o| entries[o.at].revents != 0).count() as i32)
}

/// `poll`'s events for nagare's readiness bits.
fn events_of(ready: u16) -> i16 {
    let mut ev = 0;
    if ready & READABLE != 0 {
        ev |= libc::POLLIN | libc::POLLRDNORM;
    }
    if ready & WRITABLE != 0 {
        ev |= libc::POLLOUT | libc::POLLWRNORM;
    }
    if ready & CLOSED != 0 {
        ev |= libc::POLLHUP;
    }
    if ready & INVALID != 0 {
        ev |= libc::POLLNVAL;
    }
    ev
}

/// A set of nagare sockets alone: waits in the client library's `poll`
/// for at most `left`, or [`SLICE`].
fn wait_in_netd(
    ours: &[Ours],
    entries: &mut [libc::pollfd],
    left: Option<Duration>,
    sigmask: *const libc::sigset_t,
) -> Res<()> {
    let mut list = Vec::new();
    for o in ours {
        let Ok(g) = o.sock.lock() else { return Ok(()) };
        let id = match &g.state {
            State::Listener(l) => l.socket_id(),
            State::Stream(s) => s.socket_id(),
            State::Datagram(d) => d.socket_id(),
            // Ready, or left to the caller's sleep: its next look answers.
            State::Fresh | State::Connecting(_) | State::Failed(_) => return Ok(()),
        };
        let e = &entries[o.at];
        let mut interest = 0;
        if e.events & (libc::POLLIN | libc::POLLRDNORM) != 0 {
            interest |= READABLE;
        }
        if e.events & (libc::POLLOUT | libc::POLLWRNORM) != 0 {
            interest |= WRITABLE;
        }
        list.push(PollEntry { socket: id, interest, ready: 0 });
    }
    if list.len() > nagare_request::MAX_POLL as usize {
        // More than one poll takes: a short sleep, then the next look (a
        // sleep with the call's mask, which a held signal ends).
        kernel_poll(&mut [], left.map_or(SHORT_SLEEP, |l| l.min(SHORT_SLEEP)), sigmask)?;
        return Ok(());
    }
    let limit = left.map_or(SLICE, |l| l.min(SLICE));
    // SAFETY: a mask the caller gave (`ppoll`, `pselect`) points to a
    // sigset_t for the call's duration.
    let mask = unsafe { sigmask.as_ref() };
    nagare::poll::poll_masked(&session()?, &mut list, Some(limit), mask).map_err(|e| errno(&e))?;
    Ok(())
}

/// `select`/`pselect` over sets that may hold nagare sockets, as one
/// `poll`: readable with `POLLIN`, `POLLHUP` or `POLLERR`; writable with
/// `POLLOUT` or `POLLERR`; exceptional with `POLLPRI`.
///
/// # Safety
/// Each set is null or a valid `fd_set`; `sigmask` is null or valid.
pub unsafe fn select(
    nfds: i32,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    limit: Option<Duration>,
    sigmask: *const libc::sigset_t,
) -> Res<i32> {
    let held = hold_signals(sigmask)?;
    let _in = Entered::new();
    let nfds = usize::try_from(nfds).ok().filter(|&n| n <= libc::FD_SETSIZE).ok_or(libc::EINVAL)?;
    let has = |set: *mut libc::fd_set, fd: i32| !set.is_null() && unsafe { libc::FD_ISSET(fd, set) };
    let mut entries = Vec::new();
    for fd in 0..nfds as i32 {
        let mut events = 0;
        if has(read, fd) {
            events |= libc::POLLIN;
        }
        if has(write, fd) {
            events |= libc::POLLOUT;
        }
        if has(except, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            entries.push(libc::pollfd { fd, events, revents: 0 });
        }
    }
    poll_entries(&mut entries, limit, &held)?;
    if entries.iter().any(|e| e.revents & libc::POLLNVAL != 0) {
        return Err(libc::EBADF);
    }
    for set in [read, write, except] {
        if !set.is_null() {
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mut bits = 0;
    for e in &entries {
        let mut mark = |set: *mut libc::fd_set, wanted: i16, on: i16| {
            if e.events & wanted != 0 && e.revents & on != 0 && !set.is_null() {
                unsafe { libc::FD_SET(e.fd, set) };
                bits += 1;
            }
        };
        mark(read, libc::POLLIN, libc::POLLIN | libc::POLLHUP | libc::POLLERR);
        mark(write, libc::POLLOUT, libc::POLLOUT | libc::POLLERR);
        mark(except, libc::POLLPRI, libc::POLLPRI);
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_bits_become_poll_events() {
        assert_eq!(events_of(READABLE), libc::POLLIN | libc::POLLRDNORM);
        assert_eq!(events_of(WRITABLE | CLOSED), libc::POLLOUT | libc::POLLWRNORM | libc::POLLHUP);
        assert_eq!(events_of(0), 0);
    }

    #[test]
    fn a_set_of_kernel_descriptors_alone_is_the_kernel_s_poll() {
        let mut fds = [0i32; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut set = [
            libc::pollfd { fd: fds[0], events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: fds[1], events: libc::POLLOUT, revents: 0 },
        ];
        let n = unsafe { poll(set.as_mut_ptr(), 2, Some(Duration::ZERO), std::ptr::null()) };
        assert_eq!(n, Ok(1));
        assert_eq!(set[0].revents, 0);
        assert_eq!(set[1].revents, libc::POLLOUT);
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
