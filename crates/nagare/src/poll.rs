//! Readiness of several sockets at once, as `poll(2)`.
//!
//! A stream or datagram socket answers from its data path (`crate::path`):
//! what netd already delivered or completed is in our region, so no request
//! is needed, and a wait is a wait on the session's eventfd for the next
//! completion. Other sockets (listeners, echo sockets) are asked of netd
//! with one `POLL` request, the list in a region buffer, answered when any
//! is ready; while it is out, the paths are watched too, and the first to
//! be ready answers. When a socket with a path is ready from the start,
//! the request asks without waiting.

use crate::path::Role;
use crate::{set_wait_limit, Data, InFlight, Session};
use nagare_request::{Op, Request, MAX_POLL};
pub use nagare_request::{PollEntry, CLOSED, EXCLUSIVE, INVALID, READABLE, WRITABLE};
use std::io;
use std::time::{Duration, Instant};

/// How long one `POLL` request for sockets without a path may wait before
/// it is asked again (so that an abandoned one does not linger in netd).
const NETD_POLL_SLICE: Duration = Duration::from_millis(100);

/// The most [`wake_when_ready`] requests in flight at once, for as many
/// lists (each thread sleeping over shared sockets asks for its own).
pub const MAX_ARMED: usize = 64;

/// Fills in `ready` of every entry and returns how many are nonzero.
/// Waits until one is, at most `limit` (`None`: as long as it takes;
/// `Some(ZERO)`: not at all). Sockets must be of this `netd`. A signal
/// handler that runs while it sleeps ends it with
/// `ErrorKind::Interrupted`, as it ends `poll(2)`.
pub fn poll(netd: &Session, entries: &mut [PollEntry], limit: Option<Duration>) -> io::Result<usize> {
    poll_masked(netd, entries, limit, None)
}

/// [`poll`] with `mask` as the thread's signal mask while it sleeps, set
/// and restored atomically, as `ppoll(2)` takes one (`None`: the thread's
/// own).
pub fn poll_masked(
    netd: &Session,
    entries: &mut [PollEntry],
    limit: Option<Duration>,
    mask: Option<&libc::sigset_t>,
) -> io::Result<usize> {
    if entries.is_empty() || entries.len() > MAX_POLL as usize || entries.len() * PollEntry::SIZE > netd.max_chunk() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("poll takes 1 to {MAX_POLL} sockets")));
    }
    let deadline = limit.map(|l| Instant::now() + l);
    let asks_netd = {
        let c = netd.lock()?;
        entries.iter().any(|e| !c.tracks_readiness(e.socket))
    };
    if !asks_netd {
        let n = if limit == Some(Duration::ZERO) {
            netd.until(true, limit, |c| Ok(from_paths(c, entries)))
        } else {
            netd.until_or_signal(limit, mask, |c| Ok(from_paths(c, entries)))
        };
        return match n {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        };
    }
    // A socket with a path that is ready already: the call waits for
    // nothing, and one request that does not wait fills in the rest.
    let ready_now = {
        let c = netd.lock()?;
        from_paths(&c, entries).is_some()
    };
    if ready_now {
        return ask_netd(netd, entries, Duration::ZERO, false, mask);
    }
    // A signal between one request and the next must end the call too:
    // held from the first request on, it waits for the next sleep.
    let _held = if limit == Some(Duration::ZERO) { None } else { Some(crate::signals::hold(mask)?) };
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let n = ask_netd(netd, entries, left.map_or(NETD_POLL_SLICE, |l| l.min(NETD_POLL_SLICE)), true, mask)?;
        if n > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(n);
        }
    }
}

/// The readiness of every entry, if those with a path make one ready
/// (`None` otherwise; entries without a path are left at 0).
fn from_paths(c: &crate::Conn, entries: &mut [PollEntry]) -> Option<usize> {
    let mut ready = 0;
    for e in entries.iter_mut() {
        e.ready = c.readiness(e.socket).map_or(0, |r| r & (e.interest & (READABLE | WRITABLE) | CLOSED));
        ready += usize::from(e.ready != 0);
    }
    (ready > 0).then_some(ready)
}

/// Asks netd, without waiting, to answer once one of `entries` is ready
/// or `limit` has passed: its answer wakes whoever sleeps on the
/// session's eventfd (an outside loop, between [`Session::prepare_wait`]
/// and [`Session::finish_wait`]), which then looks at readiness again.
/// For sockets whose readiness netd alone knows (shared ones): their
/// data waits in netd, which signals nothing else when it comes. While a
/// request for the same list is in flight this does nothing; a request
/// for another list (another thread's sockets) is made beside it, up to
/// [`MAX_ARMED`] in flight (past them, the sleep ends at its own limit).
/// It may take completions off the rings on the way (to see which of its
/// requests are answered, or to free a buffer), which may make a socket
/// ready after the caller's look: a caller that sleeps after it prepares
/// its sleep with [`Session::prepare_wait_after`], which then says not to.
pub fn wake_when_ready(netd: &Session, entries: &[PollEntry], limit: Duration) -> io::Result<()> {
    if entries.is_empty() || entries.len() > MAX_POLL as usize || entries.len() * PollEntry::SIZE > netd.max_chunk() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("poll takes 1 to {MAX_POLL} sockets")));
    }
    let bytes: Vec<u8> = entries.iter().flat_map(|e| PollEntry { ready: 0, ..*e }.to_bytes()).collect();
    let mut r = Request::new(Op::Poll, 0);
    set_wait_limit(&mut r, Some(limit.max(Duration::from_micros(1))));
    {
        let mut c = netd.lock()?;
        c.collect()?;
        let crate::Conn { armed, in_flight, .. } = &mut *c;
        armed.retain(|(id, _)| in_flight.contains_key(id));
        // The one in flight for this list wakes the sleep within its limit.
        if armed.len() >= MAX_ARMED || armed.iter().any(|(_, asked)| *asked == bytes) {
            return Ok(());
        }
    }
    let (buffer, mut c) = netd.fill_waiting(&mut r, &Data::Send(&bytes))?;
    c.submit(&mut r, buffer)?;
    // Only its buffer comes back: nobody takes the answer.
    c.in_flight.insert(r.id, InFlight { buffer, abandoned: true, role: Role::Call });
    c.armed.push((r.id, bytes));
    Ok(())
}

/// One `POLL` request for every entry, waiting at most `limit` for its
/// answer or (`watch_paths`) for a socket with a path to be ready,
/// whichever comes first; the number ready (0 when none was within the
/// limit). When a path is ready first, netd is asked again without
/// waiting, so that every entry is filled in. A request left unanswered
/// completes in netd within its limit, and its buffer comes back then.
fn ask_netd(
    netd: &Session,
    entries: &mut [PollEntry],
    limit: Duration,
    watch_paths: bool,
    mask: Option<&libc::sigset_t>,
) -> io::Result<usize> {
    let mut bytes: Vec<u8> = entries.iter().flat_map(|e| PollEntry { ready: 0, ..*e }.to_bytes()).collect();
    let mut r = Request::new(Op::Poll, 0);
    if limit.is_zero() {
        r.flags |= nagare_request::NONBLOCK;
    } else {
        set_wait_limit(&mut r, Some(limit));
    }
    let (id, buffer) = {
        let (buffer, mut c) = netd.fill_waiting(&mut r, &Data::InOut(&mut bytes))?;
        c.submit(&mut r, buffer)?;
        c.in_flight.insert(r.id, InFlight { buffer, abandoned: false, role: Role::Call });
        (r.id, buffer)
    };
    let take = |c: &mut crate::Conn| {
        if let Some((comp, back)) = c.complete(id, buffer)? {
            c.in_flight.remove(&id);
            let mut got = 0;
            if let Some(b) = back {
                let n = (b.len as usize).min(bytes.len());
                let read = c.pool.read(b.index, b.offset, &mut bytes[..n]);
                let _ = c.pool.release(b.index);
                read.map_err(io::Error::other)?;
                got = n;
            }
            return Ok(Some(Some((comp, got))));
        }
        if watch_paths && from_paths(c, entries).is_some() {
            if let Some(f) = c.in_flight.get_mut(&id) {
                f.abandoned = true;
            }
            return Ok(Some(None));
        }
        Ok(None)
    };
    // An answer that does not wait comes at once: a signal meanwhile does
    // not end the call (something may be ready), as the kernel's `poll`
    // returns what is ready.
    let answered = if limit.is_zero() { netd.until(false, None, take) } else { netd.until_or_signal(None, mask, take) };
    let answered = match answered {
        Ok(a) => a,
        Err(e) => {
            // Interrupted (or netd gone): the answer, if it comes, only
            // returns the buffer.
            if let Ok(mut c) = netd.lock() {
                if let Some(f) = c.in_flight.get_mut(&id) {
                    f.abandoned = true;
                }
            }
            return Err(e);
        }
    };
    let Some((comp, got)) = answered else {
        return ask_netd(netd, entries, Duration::ZERO, false, mask);
    };
    let comp = match crate::finish(comp, got) {
        Ok((c, _)) => c,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            entries.iter_mut().for_each(|e| e.ready = 0);
            return Ok(0);
        }
        Err(e) => return Err(e),
    };
    if got != bytes.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "netd answered a poll with a short list"));
    }
    let _ = comp;
    // netd's answer, and for sockets with a path what already arrived:
    // netd does not see data its posted receives took.
    let c = netd.lock()?;
    for (e, chunk) in entries.iter_mut().zip(bytes.chunks_exact(PollEntry::SIZE)) {
        let mut b = [0u8; PollEntry::SIZE];
        b.copy_from_slice(chunk);
        let path = c.readiness(e.socket).map_or(0, |r| r & (e.interest & (READABLE | WRITABLE) | CLOSED));
        e.ready = PollEntry::from_bytes(b).ready | path;
    }
    Ok(entries.iter().filter(|e| e.ready != 0).count())
}
