//! Readiness calls: a set without nagare sockets is libc's to answer; one
//! with them is `nagare_posix::poll`'s or `select`'s.

use crate::next::next;
use crate::{ours, ret};
use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};
use nagare_posix as posix;
use std::time::Duration;

/// Whether a `poll` set holds a socket of ours.
unsafe fn any_ours(fds: *const pollfd, n: nfds_t) -> bool {
    if fds.is_null() || posix::Entered::inside() {
        return false;
    }
    (0..n as usize).any(|i| {
        let fd = unsafe { (*fds.add(i)).fd };
        fd >= 0 && posix::is_ours(fd)
    })
}

/// Whether `select`'s sets hold a socket of ours.
unsafe fn any_ours_in(nfds: c_int, sets: [*mut fd_set; 3]) -> bool {
    if posix::Entered::inside() {
        return false;
    }
    (0..nfds.clamp(0, libc::FD_SETSIZE as c_int))
        .any(|fd| posix::is_ours(fd) && sets.iter().any(|s| !s.is_null() && unsafe { libc::FD_ISSET(fd, *s) }))
}

fn from_millis(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// A `timespec` limit (null: none); `EINVAL` for a bad one.
unsafe fn from_timespec(ts: *const timespec) -> Result<Option<Duration>, i32> {
    let Some(t) = (unsafe { ts.as_ref() }) else { return Ok(None) };
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(libc::EINVAL);
    }
    Ok(Some(Duration::new(t.tv_sec as u64, t.tv_nsec as u32)))
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    if !unsafe { any_ours(fds, n) } {
        return unsafe { next!(poll: fn(*mut pollfd, nfds_t, c_int) -> c_int)(fds, n, timeout) };
    }
    ret(unsafe { posix::poll(fds, n, from_millis(timeout), std::ptr::null()) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, room: libc::size_t) -> c_int {
    if !unsafe { any_ours(fds, n) } {
        return unsafe {
            next!(__poll_chk: fn(*mut pollfd, nfds_t, c_int, libc::size_t) -> c_int)(fds, n, timeout, room)
        };
    }
    if (n as usize).saturating_mul(std::mem::size_of::<pollfd>()) > room {
        unsafe { libc::abort() };
    }
    ret(unsafe { posix::poll(fds, n, from_millis(timeout), std::ptr::null()) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const timespec, mask: *const sigset_t) -> c_int {
    if !unsafe { any_ours(fds, n) } {
        return unsafe {
            next!(ppoll: fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int)(fds, n, ts, mask)
        };
    }
    let limit = match unsafe { from_timespec(ts) } {
        Ok(l) => l,
        Err(e) => return ret::<i32>(Err(e)) as c_int,
    };
    ret(unsafe { posix::poll(fds, n, limit, mask) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    tv: *mut timeval,
) -> c_int {
    if !unsafe { any_ours_in(nfds, [r, w, e]) } {
        return unsafe {
            next!(select: fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int)(nfds, r, w, e, tv)
        };
    }
    let limit = match unsafe { tv.as_ref() } {
        None => None,
        Some(t) if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) => {
            return ret::<i32>(Err(libc::EINVAL)) as c_int
        }
        Some(t) => Some(Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)),
    };
    ret(unsafe { posix::select(nfds, r, w, e, limit, std::ptr::null()) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if !unsafe { any_ours_in(nfds, [r, w, e]) } {
        return unsafe {
            next!(pselect: fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *const timespec, *const sigset_t) -> c_int)(
                nfds, r, w, e, ts, mask,
            )
        };
    }
    let limit = match unsafe { from_timespec(ts) } {
        Ok(l) => l,
        Err(err) => return ret::<i32>(Err(err)) as c_int,
    };
    ret(unsafe { posix::select(nfds, r, w, e, limit, mask) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> c_int {
    if !ours(fd) {
        return unsafe { next!(epoll_ctl: fn(c_int, c_int, c_int, *mut epoll_event) -> c_int)(epfd, op, fd, event) };
    }
    ret(unsafe { posix::epoll_ctl(epfd, op, fd, event) }.map(|()| 0)) as c_int
}

/// Whether `epoll_wait` on `epfd` is ours to answer.
fn watched(epfd: c_int) -> bool {
    !posix::Entered::inside() && posix::epoll_watches(epfd)
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, out: *mut epoll_event, max: c_int, timeout: c_int) -> c_int {
    if !watched(epfd) {
        return unsafe {
            next!(epoll_wait: fn(c_int, *mut epoll_event, c_int, c_int) -> c_int)(epfd, out, max, timeout)
        };
    }
    ret(unsafe { posix::epoll_wait(epfd, out, max, from_millis(timeout), std::ptr::null()) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    out: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    if !watched(epfd) {
        return unsafe {
            next!(epoll_pwait: fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int)(
                epfd, out, max, timeout, mask,
            )
        };
    }
    ret(unsafe { posix::epoll_wait(epfd, out, max, from_millis(timeout), mask) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    out: *mut epoll_event,
    max: c_int,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if !watched(epfd) {
        return unsafe {
            next!(epoll_pwait2: fn(c_int, *mut epoll_event, c_int, *const timespec, *const sigset_t) -> c_int)(
                epfd, out, max, ts, mask,
            )
        };
    }
    let limit = match unsafe { from_timespec(ts) } {
        Ok(l) => l,
        Err(e) => return ret::<i32>(Err(e)) as c_int,
    };
    ret(unsafe { posix::epoll_wait(epfd, out, max, limit, mask) }) as c_int
}
