//! `epoll` sets that hold nagare sockets. The kernel's set keeps the
//! program's own descriptors; the nagare sockets added to it are watched
//! here, by set. `epoll_wait` looks at both without waiting, then sleeps
//! in the kernel's `poll` on the set's descriptor (readable when one of
//! its own is ready) and the session's eventfd (`wait::sleep`).
//!
//! Readiness is level-triggered. An edge-triggered watch (`EPOLLET`)
//! reports an event that was not ready at its last report, or that is
//! still ready after a data call on the socket since (a read that may
//! have emptied it and found more, as the kernel reports each arrival):
//! a program that reads until `EAGAIN`, or until a short read, is woken
//! for what arrives after. `EPOLLONESHOT` disables the watch after one
//! report until `EPOLL_CTL_MOD`. `EPOLLEXCLUSIVE` on a shared listener
//! has netd wake one waiting set per connection (`wait::sleep`, netd's
//! `EXCLUSIVE`). `EPOLLRDHUP` is not reported (the end of a stream shows
//! as `EPOLLIN`, a read then gives 0).

use crate::sock::Sock;
use crate::wait::{hold_signals, looked, netd_gone, readiness, sleep, sleep_mask, slice_without_netd, Ours};
use crate::{table, Entered, Res};
use hashbrown::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One nagare socket in a set.
struct Watch {
    fd: i32,
    sock: Arc<Sock>,
    /// The events asked for, with `EPOLLERR` and `EPOLLHUP` (none while a
    /// one-shot watch is disabled).
    events: u32,
    data: u64,
    /// What it last reported, and its socket's data calls then.
    last: u32,
    seen: u64,
}

/// The flags of a watch that are not events.
const MODES: u32 = (libc::EPOLLET | libc::EPOLLONESHOT | libc::EPOLLEXCLUSIVE | libc::EPOLLWAKEUP) as u32;

static SETS: Mutex<Option<HashMap<i32, Vec<Watch>>>> = Mutex::new(None);
/// Whether any set holds a nagare socket (so that `close` and
/// `epoll_wait` of the others look no further).
static ANY: AtomicBool = AtomicBool::new(false);

fn sets() -> MutexGuard<'static, Option<HashMap<i32, Vec<Watch>>>> {
    SETS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the set `epfd` holds nagare sockets.
pub fn epoll_watches(epfd: i32) -> bool {
    ANY.load(Ordering::Relaxed) && sets().as_ref().is_some_and(|m| m.get(&epfd).is_some_and(|w| !w.is_empty()))
}

/// Takes `fd` out of every set, and the set `fd` is, if it is one (its
/// number is being closed).
pub(crate) fn forget(fd: i32) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    if let Some(m) = sets().as_mut() {
        m.remove(&fd);
        for w in m.values_mut() {
            w.retain(|w| w.fd != fd);
        }
    }
}

/// Forgets every set numbered within `first..=last`, and takes every
/// number of that range out of the sets (the range is being closed).
pub(crate) fn forget_range(first: i32, last: i32) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    if let Some(m) = sets().as_mut() {
        m.retain(|&set, _| !(first..=last).contains(&set));
        for w in m.values_mut() {
            w.retain(|w| !(first..=last).contains(&w.fd));
        }
    }
}

/// `close` of a descriptor that is not a nagare socket: forgets the set
/// it may be.
pub fn epoll_forget(epfd: i32) {
    let _in = Entered::new();
    forget(epfd);
}

/// `epoll_ctl` with a nagare socket `fd`.
///
/// # Safety
/// `event` is null or a valid `epoll_event`.
pub unsafe fn epoll_ctl(epfd: i32, op: i32, fd: i32, event: *const libc::epoll_event) -> Res<()> {
    let _in = Entered::new();
    let sock = table::get(fd)?;
    if epfd == fd || table::is_ours(epfd) {
        return Err(libc::EINVAL);
    }
    // The set must be a descriptor the kernel knows.
    if unsafe { libc::fcntl(epfd, libc::F_GETFD) } < 0 {
        return Err(libc::EBADF);
    }
    let asked = if op == libc::EPOLL_CTL_DEL {
        None
    } else {
        let e = unsafe { event.as_ref() }.ok_or(libc::EFAULT)?;
        // As the kernel: errors and hang-ups are always watched for.
        Some((e.events | (libc::EPOLLERR | libc::EPOLLHUP) as u32, e.u64))
    };
    let mut g = sets();
    let set = g.get_or_insert_with(HashMap::new).entry(epfd).or_default();
    let at = set.iter().position(|w| w.fd == fd);
    exclusive_allowed(op, asked.map(|(events, _)| events), at.and_then(|i| set.get(i)).map(|w| w.events))?;
    match (op, at, asked) {
        (libc::EPOLL_CTL_ADD, Some(_), _) => return Err(libc::EEXIST),
        (libc::EPOLL_CTL_ADD, None, Some((events, data))) => {
            set.push(Watch { fd, sock, events, data, last: 0, seen: 0 });
            ANY.store(true, Ordering::Relaxed);
        }
        (libc::EPOLL_CTL_MOD, Some(i), Some((events, data))) => {
            set[i] = Watch { fd, sock, events, data, last: 0, seen: 0 };
        }
        (libc::EPOLL_CTL_DEL, Some(i), _) => {
            set.remove(i);
        }
        (libc::EPOLL_CTL_MOD | libc::EPOLL_CTL_DEL, None, _) => return Err(libc::ENOENT),
        _ => return Err(libc::EINVAL),
    }
    Ok(())
}

/// `EINVAL` where the kernel refuses `EPOLLEXCLUSIVE`: in a change of a
/// watch (`EPOLL_CTL_MOD`), of one that has it or to give it, and beside
/// any event or mode but `EPOLLIN`, `EPOLLOUT`, `EPOLLERR`, `EPOLLHUP`,
/// `EPOLLWAKEUP` and `EPOLLET`. `asked` is the call's events, `had` the
/// watch's if it exists.
fn exclusive_allowed(op: i32, asked: Option<u32>, had: Option<u32>) -> Res<()> {
    let exclusive = libc::EPOLLEXCLUSIVE as u32;
    let with = (libc::EPOLLIN
        | libc::EPOLLOUT
        | libc::EPOLLERR
        | libc::EPOLLHUP
        | libc::EPOLLWAKEUP
        | libc::EPOLLET
        | libc::EPOLLEXCLUSIVE) as u32;
    let asks = asked.is_some_and(|e| e & exclusive != 0);
    if op == libc::EPOLL_CTL_MOD && (asks || had.is_some_and(|e| e & exclusive != 0)) {
        return Err(libc::EINVAL);
    }
    if asks && asked.is_some_and(|e| e & !with != 0) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// What a watch reports now, given the socket's events `now`; updates
/// its memory of the report.
fn report(w: &mut Watch, now: u32) -> u32 {
    let now = now & w.events & !MODES;
    let calls = w.sock.calls.load(Ordering::Relaxed);
    let fresh = if w.events & libc::EPOLLET as u32 != 0 && calls == w.seen { now & !w.last } else { now };
    w.last = now;
    w.seen = calls;
    if fresh != 0 && w.events & libc::EPOLLONESHOT as u32 != 0 {
        // Disabled, errors and hang-ups included, until EPOLL_CTL_MOD.
        w.events &= MODES;
    }
    fresh
}

/// What a watch could report at its next look, without a data call on
/// its socket since its last: nothing once a one-shot watch is disabled,
/// and for an edge-triggered one nothing it reported last. What the
/// sleep asks netd to answer for (a shared socket): an answer for
/// anything else would end the sleep for a look that reports nothing,
/// again and again.
fn reportable(w: &Watch) -> u32 {
    let asked = w.events & !MODES;
    if w.events & libc::EPOLLET as u32 != 0 {
        asked & !w.last
    } else {
        asked
    }
}

/// `epoll_wait`/`epoll_pwait` on a set that holds nagare sockets: at most
/// `max` events into `out`, waiting at most `limit` (`None`: as long as
/// it takes).
///
/// # Safety
/// `out` has room for `max` events; `sigmask` is null or valid.
pub unsafe fn epoll_wait(
    epfd: i32,
    out: *mut libc::epoll_event,
    max: i32,
    limit: Option<Duration>,
    sigmask: *const libc::sigset_t,
) -> Res<i32> {
    // Held before the mark and let go after it (`wait::hold_signals`).
    let held = hold_signals(sigmask)?;
    let _in = Entered::new();
    let mut looked_again = false;
    let max = usize::try_from(max).ok().filter(|&m| m > 0).ok_or(libc::EINVAL)?;
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        let watched: Vec<(i32, Arc<Sock>, u32)> = match sets().as_ref().and_then(|m| m.get(&epfd)) {
            Some(set) => set.iter().map(|w| (w.fd, w.sock.clone(), w.events)).collect(),
            None => Vec::new(),
        };
        let mut entries: Vec<libc::pollfd> = watched
            .iter()
            .map(|(fd, _, events)| libc::pollfd { fd: *fd, events: (*events & 0xffff) as i16, revents: 0 })
            .collect();
        let ours: Vec<Ours> = watched
            .iter()
            .enumerate()
            .map(|(at, (_, sock, events))| Ours {
                at,
                sock: sock.clone(),
                exclusive: events & libc::EPOLLEXCLUSIVE as u32 != 0,
            })
            .collect();
        if let Err(e) = readiness(&ours, &mut entries) {
            if !netd_gone(e) {
                return Err(e);
            }
            return without_netd(epfd, out, max, deadline, &held, e);
        }
        let seen = looked(&ours);
        let mut n = 0;
        if let Some(set) = sets().as_mut().and_then(|m| m.get_mut(&epfd)) {
            for (e, w) in entries.iter_mut().zip(set.iter_mut()) {
                if n == max {
                    break;
                }
                if w.fd != e.fd {
                    continue;
                }
                let ev = report(w, e.revents as u16 as u32);
                if ev != 0 {
                    unsafe { out.add(n).write_unaligned(libc::epoll_event { events: ev, u64: w.data }) };
                    n += 1;
                }
                // What the sleep below may wake for.
                e.events = (reportable(w) & 0xffff) as i16;
            }
        }
        if n < max {
            let k = unsafe { libc::epoll_pwait(epfd, out.add(n), (max - n) as i32, 0, std::ptr::null()) };
            if k < 0 {
                return Err(crate::calls::last_errno());
            }
            n += k as usize;
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if n > 0 || left.is_some_and(|l| l.is_zero()) {
            return Ok(n as i32);
        }
        let Some(mask) = sleep_mask(&held, &mut looked_again)? else { continue };
        let mut kernel = vec![libc::pollfd { fd: epfd, events: libc::POLLIN, revents: 0 }];
        // A watch that could report nothing asks netd for nothing.
        let waking: Vec<Ours> = ours
            .iter()
            .filter(|o| entries.get(o.at).is_some_and(|e| e.events != 0))
            .map(|o| Ours { at: o.at, sock: o.sock.clone(), exclusive: o.exclusive })
            .collect();
        match sleep(&waking, &entries, &mut kernel, left, mask, seen) {
            Err(gone) if netd_gone(gone) => return without_netd(epfd, out, max, deadline, &held, gone),
            r => r?,
        }
    }
}

/// `epoll_wait` on a set whose nagare sockets went with netd (`gone`,
/// the error their calls give): the kernel's descriptors of the set are
/// still waited on, for at most the call's time and
/// [`crate::wait::SLICE`], and
/// without one ready the call fails with `gone`. An event loop that takes
/// the failure for a passing one and waits again (nginx's workers) then
/// tries about ten times a second, not as fast as it can, and still hears
/// its own descriptors (its master's word to stop).
fn without_netd(
    epfd: i32,
    out: *mut libc::epoll_event,
    max: usize,
    deadline: Option<Instant>,
    held: &nagare::signals::Held,
    gone: i32,
) -> Res<i32> {
    let millis = slice_without_netd(deadline)?.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    let max = i32::try_from(max).unwrap_or(i32::MAX);
    // SAFETY: `out` has room for `max` events (the caller's promise); the
    // mask is the held one's, live for the call.
    let k = unsafe { libc::epoll_pwait(epfd, out, max, millis, held.mask()) };
    if k < 0 {
        return Err(crate::calls::last_errno());
    }
    if k == 0 {
        return Err(gone);
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sock::{Proto, State};

    fn watch(events: i32) -> Watch {
        let sock = Arc::new(Sock::new(Proto::Tcp, State::Fresh, false));
        let events = events as u32 | (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        Watch { fd: 3, sock, events, data: 7, last: 0, seen: 0 }
    }

    const IN: u32 = libc::EPOLLIN as u32;
    const OUT: u32 = libc::EPOLLOUT as u32;

    #[test]
    fn exclusive_is_refused_where_the_kernel_refuses_it() {
        let ex = libc::EPOLLEXCLUSIVE as u32;
        let add = libc::EPOLL_CTL_ADD;
        let modify = libc::EPOLL_CTL_MOD;
        assert_eq!(exclusive_allowed(add, Some(IN | ex), None), Ok(()));
        assert_eq!(exclusive_allowed(add, Some(IN | OUT | libc::EPOLLET as u32 | ex), None), Ok(()));
        assert_eq!(exclusive_allowed(add, Some(IN | libc::EPOLLONESHOT as u32 | ex), None), Err(libc::EINVAL));
        assert_eq!(exclusive_allowed(add, Some(IN | libc::EPOLLRDHUP as u32 | ex), None), Err(libc::EINVAL));
        assert_eq!(exclusive_allowed(modify, Some(IN | ex), Some(IN)), Err(libc::EINVAL), "a change to it");
        assert_eq!(exclusive_allowed(modify, Some(IN), Some(IN | ex)), Err(libc::EINVAL), "a change of one with it");
        assert_eq!(exclusive_allowed(modify, Some(IN | libc::EPOLLONESHOT as u32), Some(IN)), Ok(()));
        assert_eq!(exclusive_allowed(libc::EPOLL_CTL_DEL, None, Some(IN | ex)), Ok(()), "it goes as any");
    }

    #[test]
    fn a_watch_is_woken_only_for_what_it_could_report() {
        let err_hup = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        let mut level = watch(libc::EPOLLIN);
        assert_eq!(report(&mut level, IN), IN);
        assert_eq!(reportable(&level), IN | err_hup, "level: all it asked for, reported or not");
        let mut edge = watch(libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET);
        assert_eq!(report(&mut edge, IN | OUT), IN | OUT);
        assert_eq!(reportable(&edge), err_hup, "edge: not what it reported last");
        assert_eq!(report(&mut edge, IN | OUT | libc::EPOLLHUP as u32), libc::EPOLLHUP as u32);
        assert_eq!(reportable(&edge), libc::EPOLLERR as u32, "nor a hang-up it reported");
        let mut once = watch(libc::EPOLLIN | libc::EPOLLONESHOT);
        assert_eq!(reportable(&once), IN | err_hup);
        assert_eq!(report(&mut once, IN), IN);
        assert_eq!(reportable(&once), 0, "a disabled one-shot watch: nothing");
    }

    #[test]
    fn a_level_watch_reports_while_ready() {
        let mut w = watch(libc::EPOLLIN);
        assert_eq!(report(&mut w, IN | OUT), IN, "only what was asked for");
        assert_eq!(report(&mut w, libc::EPOLLHUP as u32), libc::EPOLLHUP as u32, "hang-ups always");
        assert_eq!(report(&mut w, IN), IN);
        assert_eq!(report(&mut w, 0), 0);
    }

    #[test]
    fn an_edge_watch_reports_again_only_after_a_change_or_a_data_call() {
        let mut w = watch(libc::EPOLLIN | libc::EPOLLET);
        assert_eq!(report(&mut w, IN), IN);
        assert_eq!(report(&mut w, IN), 0, "still readable, nothing happened: no edge");
        w.sock.touch();
        assert_eq!(report(&mut w, IN), IN, "a read since, and readable again: an edge");
        assert_eq!(report(&mut w, 0), 0);
        assert_eq!(report(&mut w, IN), IN, "not ready, then ready: an edge");
    }

    #[test]
    fn a_one_shot_watch_is_quiet_after_its_report() {
        let mut w = watch(libc::EPOLLIN | libc::EPOLLONESHOT);
        assert_eq!(report(&mut w, IN), IN);
        assert_eq!(report(&mut w, IN), 0);
        w.sock.touch();
        assert_eq!(report(&mut w, IN), 0, "until EPOLL_CTL_MOD");
        assert_eq!(report(&mut w, libc::EPOLLHUP as u32), 0, "hang-ups too");
    }
}
