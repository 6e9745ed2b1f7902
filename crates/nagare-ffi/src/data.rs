//! The calls that move bytes. A descriptor that is not a nagare socket
//! goes to libc's call.

use crate::ret;
use libc::{c_int, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use nagare_posix as posix;

/// `read`.
#[no_mangle]
pub unsafe extern "C" fn nagare_read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::read(fd, buf, n) };
    }
    ret(unsafe { posix::read(fd, buf.cast(), n) })
}

/// `write`.
#[no_mangle]
pub unsafe extern "C" fn nagare_write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::write(fd, buf, n) };
    }
    ret(unsafe { posix::write(fd, buf.cast(), n) })
}

/// `readv`.
#[no_mangle]
pub unsafe extern "C" fn nagare_readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::readv(fd, iov, n) };
    }
    ret(unsafe { posix::readv(fd, iov, n) })
}

/// `writev`.
#[no_mangle]
pub unsafe extern "C" fn nagare_writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::writev(fd, iov, n) };
    }
    ret(unsafe { posix::writev(fd, iov, n) })
}

/// `recv`.
#[no_mangle]
pub unsafe extern "C" fn nagare_recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::recv(fd, buf, n, flags) };
    }
    ret(unsafe { posix::recv(fd, buf.cast(), n, flags) })
}

/// `recvfrom`.
#[no_mangle]
pub unsafe extern "C" fn nagare_recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::recvfrom(fd, buf, n, flags, addr, len) };
    }
    ret(unsafe { posix::recvfrom(fd, buf.cast(), n, flags, addr, len) })
}

/// `recvmsg`.
#[no_mangle]
pub unsafe extern "C" fn nagare_recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::recvmsg(fd, msg, flags) };
    }
    ret(unsafe { posix::recvmsg(fd, msg, flags) })
}

/// `send`.
#[no_mangle]
pub unsafe extern "C" fn nagare_send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::send(fd, buf, n, flags) };
    }
    ret(unsafe { posix::send(fd, buf.cast(), n, flags) })
}

/// `sendto`.
#[no_mangle]
pub unsafe extern "C" fn nagare_sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::sendto(fd, buf, n, flags, addr, len) };
    }
    ret(unsafe { posix::sendto(fd, buf.cast(), n, flags, addr, len) })
}

/// `sendmsg`.
#[no_mangle]
pub unsafe extern "C" fn nagare_sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    if !posix::is_ours(fd) {
        return unsafe { libc::sendmsg(fd, msg, flags) };
    }
    ret(unsafe { posix::sendmsg(fd, msg, flags) })
}
