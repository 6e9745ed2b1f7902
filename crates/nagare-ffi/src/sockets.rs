//! The calls that make, name, join and end sockets, their options, and
//! those on descriptors in general (`close`, `dup`, `fcntl`, `ioctl`). A
//! descriptor that is not a nagare socket goes to libc's call.

use crate::ret;
use libc::{c_int, c_long, c_ulong, c_void, sockaddr, socklen_t};
use nagare_posix as posix;

/// `socket(AF_INET, ty, protocol)` or `socket(AF_INET6, ty, protocol)`;
/// `EAFNOSUPPORT` for another family.
#[no_mangle]
pub extern "C" fn nagare_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    ret(posix::socket(domain, ty, protocol)) as c_int
}

/// `bind`.
#[no_mangle]
pub unsafe extern "C" fn nagare_bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::bind(fd, addr, len) };
    }
    ret(unsafe { posix::bind(fd, addr, len) }.map(|()| 0)) as c_int
}

/// `listen`.
#[no_mangle]
pub extern "C" fn nagare_listen(fd: c_int, backlog: c_int) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::listen(fd, backlog) };
    }
    ret(posix::listen(fd, backlog).map(|()| 0)) as c_int
}

/// `accept`.
#[no_mangle]
pub unsafe extern "C" fn nagare_accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    unsafe { nagare_accept4(fd, addr, len, 0) }
}

/// `accept4` (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`).
#[no_mangle]
pub unsafe extern "C" fn nagare_accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::accept4(fd, addr, len, flags) };
    }
    ret(unsafe { posix::accept4(fd, addr, len, flags) }) as c_int
}

/// `connect`.
#[no_mangle]
pub unsafe extern "C" fn nagare_connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::connect(fd, addr, len) };
    }
    ret(unsafe { posix::connect(fd, addr, len) }.map(|()| 0)) as c_int
}

/// `shutdown`.
#[no_mangle]
pub extern "C" fn nagare_shutdown(fd: c_int, how: c_int) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::shutdown(fd, how) };
    }
    ret(posix::shutdown(fd, how).map(|()| 0)) as c_int
}

/// `close`.
#[no_mangle]
pub extern "C" fn nagare_close(fd: c_int) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::close(fd) };
    }
    ret(posix::close(fd).map(|()| 0)) as c_int
}

/// `dup`.
#[no_mangle]
pub extern "C" fn nagare_dup(fd: c_int) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::dup(fd) };
    }
    ret(posix::dup(fd, 0, false)) as c_int
}

/// `dup2`.
#[no_mangle]
pub extern "C" fn nagare_dup2(old: c_int, new: c_int) -> c_int {
    if !posix::is_ours(old) && !posix::is_ours(new) {
        return unsafe { libc::dup2(old, new) };
    }
    ret(posix::dup3(old, new, 0)) as c_int
}

/// `fcntl`, its optional argument always passed.
#[no_mangle]
pub extern "C" fn nagare_fcntl(fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::fcntl(fd, cmd, arg) };
    }
    ret(posix::fcntl(fd, cmd, arg as c_ulong)) as c_int
}

/// `ioctl` with an `int` argument (`FIONBIO`, `FIONREAD`).
#[no_mangle]
pub unsafe extern "C" fn nagare_ioctl(fd: c_int, request: c_ulong, arg: *mut c_int) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::ioctl(fd, request as _, arg) };
    }
    ret(unsafe { posix::ioctl(fd, request, arg) }) as c_int
}

/// `getsockname`.
#[no_mangle]
pub unsafe extern "C" fn nagare_getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::getsockname(fd, addr, len) };
    }
    ret(unsafe { posix::getsockname(fd, addr, len) }.map(|()| 0)) as c_int
}

/// `getpeername`.
#[no_mangle]
pub unsafe extern "C" fn nagare_getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::getpeername(fd, addr, len) };
    }
    ret(unsafe { posix::getpeername(fd, addr, len) }.map(|()| 0)) as c_int
}

/// `setsockopt`.
#[no_mangle]
pub unsafe extern "C" fn nagare_setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::setsockopt(fd, level, name, value, len) };
    }
    ret(unsafe { posix::setsockopt(fd, level, name, value, len) }.map(|()| 0)) as c_int
}

/// `getsockopt`.
#[no_mangle]
pub unsafe extern "C" fn nagare_getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    if !posix::is_ours(fd) {
        return unsafe { libc::getsockopt(fd, level, name, value, len) };
    }
    ret(unsafe { posix::getsockopt(fd, level, name, value, len) }.map(|()| 0)) as c_int
}

/// 1 if `fd` is a nagare socket, else 0.
#[no_mangle]
pub extern "C" fn nagare_is_socket(fd: c_int) -> c_int {
    c_int::from(posix::is_ours(fd))
}
