//! The calls that move bytes, the fortified ones included (glibc's
//! `_FORTIFY_SOURCE` builds call `__recv_chk` where the buffer's size is
//! known; a length past it ends the process, as glibc's own does).

use crate::next::next;
use crate::{ours, ret};
use libc::{c_int, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use nagare_posix as posix;

/// A fortified call's length past its buffer: what glibc's `__chk_fail`
/// does.
fn overflow() -> ! {
    let msg = b"*** buffer overflow detected ***: terminated\n";
    unsafe {
        libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
        libc::abort()
    }
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(read: fn(c_int, *mut c_void, size_t) -> ssize_t)(fd, buf, n) };
    }
    ret(unsafe { posix::read(fd, buf.cast(), n) })
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, room: size_t) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(__read_chk: fn(c_int, *mut c_void, size_t, size_t) -> ssize_t)(fd, buf, n, room) };
    }
    if n > room {
        overflow();
    }
    ret(unsafe { posix::read(fd, buf.cast(), n) })
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(write: fn(c_int, *const c_void, size_t) -> ssize_t)(fd, buf, n) };
    }
    ret(unsafe { posix::write(fd, buf.cast(), n) })
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(readv: fn(c_int, *const iovec, c_int) -> ssize_t)(fd, iov, n) };
    }
    ret(unsafe { posix::readv(fd, iov, n) })
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(writev: fn(c_int, *const iovec, c_int) -> ssize_t)(fd, iov, n) };
    }
    ret(unsafe { posix::writev(fd, iov, n) })
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(recv: fn(c_int, *mut c_void, size_t, c_int) -> ssize_t)(fd, buf, n, flags) };
    }
    ret(unsafe { posix::recv(fd, buf.cast(), n, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, room: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe {
            next!(__recv_chk: fn(c_int, *mut c_void, size_t, size_t, c_int) -> ssize_t)(fd, buf, n, room, flags)
        };
    }
    if n > room {
        overflow();
    }
    ret(unsafe { posix::recv(fd, buf.cast(), n, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if !ours(fd) {
        return unsafe {
            next!(recvfrom: fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t)(
                fd, buf, n, flags, addr, len,
            )
        };
    }
    ret(unsafe { posix::recvfrom(fd, buf.cast(), n, flags, addr, len) })
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    room: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if !ours(fd) {
        return unsafe {
            next!(__recvfrom_chk: fn(c_int, *mut c_void, size_t, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t)(
                fd, buf, n, room, flags, addr, len,
            )
        };
    }
    if n > room {
        overflow();
    }
    ret(unsafe { posix::recvfrom(fd, buf.cast(), n, flags, addr, len) })
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(recvmsg: fn(c_int, *mut msghdr, c_int) -> ssize_t)(fd, msg, flags) };
    }
    ret(unsafe { posix::recvmsg(fd, msg, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(send: fn(c_int, *const c_void, size_t, c_int) -> ssize_t)(fd, buf, n, flags) };
    }
    ret(unsafe { posix::send(fd, buf.cast(), n, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    if !ours(fd) {
        return unsafe {
            next!(sendto: fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t)(
                fd, buf, n, flags, addr, len,
            )
        };
    }
    ret(unsafe { posix::sendto(fd, buf.cast(), n, flags, addr, len) })
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    if !ours(fd) {
        return unsafe { next!(sendmsg: fn(c_int, *const msghdr, c_int) -> ssize_t)(fd, msg, flags) };
    }
    ret(unsafe { posix::sendmsg(fd, msg, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut libc::off_t, count: size_t) -> ssize_t {
    if !ours(out_fd) {
        return unsafe {
            next!(sendfile: fn(c_int, c_int, *mut libc::off_t, size_t) -> ssize_t)(out_fd, in_fd, offset, count)
        };
    }
    ret(unsafe { posix::sendfile(out_fd, in_fd, offset, count) })
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut libc::off64_t, count: size_t) -> ssize_t {
    if !ours(out_fd) {
        return unsafe {
            next!(sendfile64: fn(c_int, c_int, *mut libc::off64_t, size_t) -> ssize_t)(out_fd, in_fd, offset, count)
        };
    }
    ret(unsafe { posix::sendfile(out_fd, in_fd, offset, count) })
}

#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, msgs: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int) -> c_int {
    if !ours(fd) {
        return unsafe {
            next!(sendmmsg: fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int) -> c_int)(fd, msgs, n, flags)
        };
    }
    ret(unsafe { posix::sendmmsg(fd, msgs, n, flags) }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: libc::c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    if !ours(fd) {
        return unsafe {
            next!(recvmmsg: fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int, *mut libc::timespec) -> c_int)(
                fd, msgs, n, flags, timeout,
            )
        };
    }
    ret(unsafe { posix::recvmmsg(fd, msgs, n, flags) }) as c_int
}
