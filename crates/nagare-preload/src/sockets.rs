//! The calls that make, name, join and end sockets, and those on
//! descriptors in general (`close`, `dup`, `fcntl`, `ioctl`).

use crate::next::next;
use crate::{ours, ret};
use libc::{c_int, c_ulong, c_void, sockaddr, socklen_t};
use nagare_posix as posix;

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    if !through_netd(domain) || posix::Entered::inside() {
        return unsafe { next!(socket: fn(c_int, c_int, c_int) -> c_int)(domain, ty, protocol) };
    }
    ret(posix::socket(domain, ty, protocol)) as c_int
}

/// Whether a socket of `domain` goes through netd: every `AF_INET` and
/// `AF_INET6` one (streams and datagrams; `nagare_posix` refuses other
/// kinds, as nothing of the process's IP reaches the kernel's stack);
/// every other family goes to the kernel.
fn through_netd(domain: c_int) -> bool {
    domain == libc::AF_INET || domain == libc::AF_INET6
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !ours(fd) {
        return unsafe { next!(bind: fn(c_int, *const sockaddr, socklen_t) -> c_int)(fd, addr, len) };
    }
    ret(unsafe { posix::bind(fd, addr, len) }.map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    if !ours(fd) {
        return unsafe { next!(listen: fn(c_int, c_int) -> c_int)(fd, backlog) };
    }
    ret(posix::listen(fd, backlog).map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        return unsafe { next!(accept: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int)(fd, addr, len) };
    }
    ret(unsafe { posix::accept4(fd, addr, len, 0) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    if !ours(fd) {
        return unsafe {
            next!(accept4: fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int)(fd, addr, len, flags)
        };
    }
    ret(unsafe { posix::accept4(fd, addr, len, flags) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !ours(fd) {
        return unsafe { next!(connect: fn(c_int, *const sockaddr, socklen_t) -> c_int)(fd, addr, len) };
    }
    ret(unsafe { posix::connect(fd, addr, len) }.map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    if !ours(fd) {
        return unsafe { next!(shutdown: fn(c_int, c_int) -> c_int)(fd, how) };
    }
    ret(posix::shutdown(fd, how).map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if !ours(fd) {
        if !posix::Entered::inside() && posix::epoll_watches(fd) {
            // An epoll set that watched nagare sockets.
            posix::epoll_forget(fd);
        }
        return unsafe { next!(close: fn(c_int) -> c_int)(fd) };
    }
    ret(posix::close(fd).map(|()| 0)) as c_int
}

/// A range of numbers closes: ours among them as `close` closes them, the
/// library's own descriptors spared (`nagare_posix::close_range`).
#[no_mangle]
pub unsafe extern "C" fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int {
    if posix::Entered::inside() {
        // The system call itself: a libc older than the call has no
        // definition to pass on to.
        return unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) } as c_int;
    }
    // The kernel takes the flags as an unsigned word; a negative one is
    // refused there as unknown bits.
    ret(posix::close_range(first, last, flags as u32).map(|()| 0)) as c_int
}

/// `closefrom(low)`: every number from `low` up closes, as with
/// [`close_range`]; it has no result.
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let low = u32::try_from(low).unwrap_or(0);
    if posix::Entered::inside() {
        unsafe { libc::syscall(libc::SYS_close_range, low, u32::MAX, 0) };
        return;
    }
    let _ = posix::close_range(low, u32::MAX, 0);
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    if !ours(fd) {
        return unsafe { next!(dup: fn(c_int) -> c_int)(fd) };
    }
    ret(posix::dup(fd, 0, false)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if !ours(old) && !ours(new) {
        return unsafe { next!(dup2: fn(c_int, c_int) -> c_int)(old, new) };
    }
    ret(posix::dup3(old, new, 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if !ours(old) && !ours(new) {
        return unsafe { next!(dup3: fn(c_int, c_int, c_int) -> c_int)(old, new, flags) };
    }
    ret(posix::dup3(old, new, flags)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if !ours(fd) {
        return unsafe { next!(fcntl: variadic fn(c_int, c_int) -> c_int)(fd, cmd, arg) };
    }
    ret(posix::fcntl(fd, cmd, arg)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if !ours(fd) {
        return unsafe { next!(fcntl64: variadic fn(c_int, c_int) -> c_int)(fd, cmd, arg) };
    }
    ret(posix::fcntl(fd, cmd, arg)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if !ours(fd) {
        return unsafe { next!(ioctl: variadic fn(c_int, c_ulong) -> c_int)(fd, request, arg) };
    }
    ret(unsafe { posix::ioctl(fd, request, arg.cast()) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        return unsafe { next!(getsockname: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int)(fd, addr, len) };
    }
    ret(unsafe { posix::getsockname(fd, addr, len) }.map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        return unsafe { next!(getpeername: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int)(fd, addr, len) };
    }
    ret(unsafe { posix::getpeername(fd, addr, len) }.map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    if !ours(fd) {
        return unsafe {
            next!(setsockopt: fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int)(fd, level, name, value, len)
        };
    }
    ret(unsafe { posix::setsockopt(fd, level, name, value, len) }.map(|()| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    if !ours(fd) {
        return unsafe {
            next!(getsockopt: fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int)(
                fd, level, name, value, len,
            )
        };
    }
    ret(unsafe { posix::getsockopt(fd, level, name, value, len) }.map(|()| 0)) as c_int
}
