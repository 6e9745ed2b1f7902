//! The C boundary: every function packetdrill calls through
//! [`PacketdrillInterface`], and [`packetdrill_interface_init`].
//!
//! Each function checks what it is given (null pointers, lengths, counts,
//! descriptors) before anything is read or written, never unwinds into C
//! (a panic becomes `EIO`), and reports failure as -1 with `errno` set in
//! the calling thread, which is where packetdrill reads it.

use crate::abi::{FcntlFn, IoctlFn, PacketdrillInterface};
use crate::stack::{Errno, Ready, SockOpt, Stack};
use crate::{Config, Shim};
use libc::{
    c_char, c_int, c_uint, c_ulong, c_void, epoll_event, iovec, loff_t, msghdr, nfds_t, pollfd, size_t, sockaddr,
    sockaddr_in, sockaddr_in6, socklen_t, ssize_t, timeval, useconds_t, EAGAIN, EFAULT, EINVAL, EIO, ENOPROTOOPT,
    EOPNOTSUPP,
};
use std::ffi::CStr;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Most `iovec`s one call may carry (Linux's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;
/// Most descriptors one `poll` may name.
const MAX_POLL_FDS: usize = 4096;
/// Largest single read through `readv`/`recvmsg`'s bounce buffer.
const MAX_BOUNCE: usize = 4 << 20;

fn set_errno(e: Errno) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot,
    // valid for writes for the thread's whole life.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` with panics caught, turning `Err(e)` into `fail` with errno `e`.
fn entry<T>(fail: T, f: impl FnOnce() -> Result<T, Errno>) -> T {
    match catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(EIO)) {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            fail
        }
    }
}

fn to_ssize(n: usize) -> Result<ssize_t, Errno> {
    ssize_t::try_from(n).map_err(|_| EINVAL)
}

/// The shim behind `userdata`.
///
/// # Safety
/// `ud` is null or the pointer [`packetdrill_interface_init`] stored, not
/// yet given to `free`.
unsafe fn shim<'a>(ud: *mut c_void) -> Result<&'a Shim, Errno> {
    let p = ud.cast::<Shim>();
    if p.is_null() || !p.is_aligned() {
        return Err(EINVAL);
    }
    // SAFETY: per this function's contract `p` came from `Box::into_raw`
    // in `packetdrill_interface_init` and is still owned by packetdrill;
    // the `Shim` is only ever accessed through shared references (its state
    // is behind a mutex).
    let s = unsafe { &*p };
    if s.is_alive() {
        Ok(s)
    } else {
        Err(EINVAL)
    }
}

/// `len` bytes at `ptr`, borrowed.
///
/// # Safety
/// When `ptr` is not null it must be valid for reads of `len` bytes for
/// `'a`.
unsafe fn in_bytes<'a>(ptr: *const c_void, len: usize) -> Result<&'a [u8], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(EFAULT);
    }
    if isize::try_from(len).is_err() {
        return Err(EINVAL);
    }
    // SAFETY: non-null, length within isize::MAX, validity per contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// `len` writable bytes at `ptr`, borrowed.
///
/// # Safety
/// When `ptr` is not null it must be valid for writes of `len` bytes for
/// `'a` and not aliased by anything else the call touches.
unsafe fn out_bytes<'a>(ptr: *mut c_void, len: usize) -> Result<&'a mut [u8], Errno> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(EFAULT);
    }
    if isize::try_from(len).is_err() {
        return Err(EINVAL);
    }
    // SAFETY: non-null, length within isize::MAX, validity per contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// Reads a socket address: a `sockaddr_in` or a `sockaddr_in6` (whose
/// flow information and scope are not used), by its family.
///
/// # Safety
/// When `addr` is not null it must be valid for reads of `len` bytes.
unsafe fn read_sockaddr(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddr, Errno> {
    if addr.is_null() {
        return Err(EFAULT);
    }
    let len = usize::try_from(len).map_err(|_| EINVAL)?;
    if len < size_of::<libc::sa_family_t>() {
        return Err(EINVAL);
    }
    // SAFETY: at least the family's bytes are readable (checked above,
    // validity per contract); read unaligned since the caller may have
    // passed a byte buffer.
    let family = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) };
    match c_int::from(family) {
        libc::AF_INET => {
            if len < size_of::<sockaddr_in>() {
                return Err(EINVAL);
            }
            // SAFETY: at least size_of::<sockaddr_in>() readable bytes
            // (checked above); unaligned as above.
            let sin = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            if len < size_of::<sockaddr_in6>() {
                return Err(EINVAL);
            }
            // SAFETY: at least size_of::<sockaddr_in6>() readable bytes
            // (checked above); unaligned as above.
            let sin6 = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in6>()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), 0, 0)))
        }
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Writes `value` to a (`sockaddr *`, `socklen_t *`) pair the way the
/// kernel does: a `sockaddr_in` or a `sockaddr_in6` by its family,
/// truncated to the room given, the full length reported. Nothing happens
/// when `addr` is null.
///
/// # Safety
/// When not null, `len` must be valid for reads and writes of a
/// `socklen_t`, and `addr` for writes of `*len` bytes.
unsafe fn write_sockaddr(addr: *mut sockaddr, len: *mut socklen_t, value: SocketAddr) -> Result<(), Errno> {
    if addr.is_null() {
        return Ok(());
    }
    if len.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: non-null, validity per contract; unaligned access tolerated.
    let room = unsafe { std::ptr::read_unaligned(len) };
    let room = usize::try_from(room).map_err(|_| EINVAL)?;
    // The address as the kernel lays it out, in a buffer as large as the
    // larger of the two.
    let mut bytes = [0u8; size_of::<sockaddr_in6>()];
    let full = match value {
        SocketAddr::V4(v4) => {
            let sin = sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: `sin` is a plain value of size_of::<sockaddr_in>()
            // bytes, which `bytes` has room for.
            unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr().cast::<sockaddr_in>(), sin) };
            size_of::<sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: 0,
            };
            // SAFETY: `bytes` is exactly size_of::<sockaddr_in6>() bytes.
            unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr().cast::<sockaddr_in6>(), sin6) };
            size_of::<sockaddr_in6>()
        }
    };
    let n = room.min(full);
    let from = bytes.get(..n).ok_or(EINVAL)?;
    // SAFETY: `from` is `n` bytes; `addr` is valid for `room` >= n bytes
    // per contract; the two cannot overlap (one is on our stack).
    unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), addr.cast::<u8>(), n) };
    let full = socklen_t::try_from(full).map_err(|_| EINVAL)?;
    // SAFETY: as the read above.
    unsafe { std::ptr::write_unaligned(len, full) };
    Ok(())
}

/// Copies an `iovec` array in, checking every element.
///
/// # Safety
/// When `iov` is not null it must be valid for reads of `cnt` `iovec`s.
unsafe fn read_iovecs(iov: *const iovec, cnt: usize) -> Result<Vec<iovec>, Errno> {
    if cnt > MAX_IOV {
        return Err(EINVAL);
    }
    if cnt == 0 {
        return Ok(Vec::new());
    }
    if iov.is_null() {
        return Err(EFAULT);
    }
    let mut out = Vec::with_capacity(cnt);
    let mut total = 0usize;
    for i in 0..cnt {
        // SAFETY: i < cnt, validity per contract; unaligned read tolerated.
        let v = unsafe { std::ptr::read_unaligned(iov.add(i)) };
        if v.iov_base.is_null() && v.iov_len != 0 {
            return Err(EFAULT);
        }
        total = total.checked_add(v.iov_len).ok_or(EINVAL)?;
        if isize::try_from(total).is_err() {
            return Err(EINVAL);
        }
        out.push(v);
    }
    Ok(out)
}

fn iov_total(iovs: &[iovec]) -> usize {
    iovs.iter().map(|v| v.iov_len).sum()
}

/// Scatters `data` over `iovs`.
///
/// # Safety
/// Every `iovec` must describe memory valid for writes of its length.
unsafe fn scatter(iovs: &[iovec], mut data: &[u8]) -> Result<(), Errno> {
    for v in iovs {
        if data.is_empty() {
            break;
        }
        let n = v.iov_len.min(data.len());
        // SAFETY: per contract; `n` is within the iovec's length.
        let out = unsafe { out_bytes(v.iov_base, n) }?;
        out.copy_from_slice(&data[..n]);
        data = &data[n..];
    }
    Ok(())
}

/// Gathers `iovs` into one buffer.
///
/// # Safety
/// Every `iovec` must describe memory valid for reads of its length.
unsafe fn gather(iovs: &[iovec]) -> Result<Vec<u8>, Errno> {
    let mut data = Vec::with_capacity(iov_total(iovs));
    for v in iovs {
        // SAFETY: per contract.
        data.extend_from_slice(unsafe { in_bytes(v.iov_base, v.iov_len) }?);
    }
    Ok(data)
}

// ---- the calls, on safe types ----------------------------------------------

const RECV_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
const SEND_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;

fn do_recv(shim: &Shim, fd: c_int, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    if flags & !RECV_FLAGS != 0 {
        return Err(EOPNOTSUPP);
    }
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    shim.block(|s| !dontwait && s.is_blocking(fd), None, || Err(EAGAIN), |s| s.recv(fd, buf))
}

fn do_send(shim: &Shim, fd: c_int, data: &[u8], flags: c_int) -> Result<usize, Errno> {
    if flags & !SEND_FLAGS != 0 {
        return Err(EOPNOTSUPP);
    }
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let done = std::cell::Cell::new(0usize);
    let r = shim.block(
        |s| !dontwait && s.is_blocking(fd),
        None,
        || Err(EAGAIN),
        |s| {
            let blocking = !dontwait && s.is_blocking(fd);
            match s.send(fd, &data[done.get()..]) {
                Ok(n) => {
                    done.set(done.get() + n);
                    // A blocking write returns when everything is queued.
                    if done.get() == data.len() || !blocking {
                        Ok(done.get())
                    } else {
                        Err(EAGAIN)
                    }
                }
                Err(e) => Err(e),
            }
        },
    );
    match r {
        Err(_) if done.get() > 0 => Ok(done.get()),
        r => r,
    }
}

fn readiness_bits(r: Option<Ready>) -> i16 {
    let Some(r) = r else {
        return libc::POLLNVAL;
    };
    let mut bits = 0;
    if r.readable {
        bits |= libc::POLLIN | libc::POLLRDNORM;
    }
    if r.writable {
        bits |= libc::POLLOUT | libc::POLLWRNORM;
    }
    if r.error {
        bits |= libc::POLLERR;
    }
    if r.hangup {
        bits |= libc::POLLHUP;
    }
    if r.read_hangup {
        bits |= libc::POLLRDHUP;
    }
    bits
}

/// `revents` for each `(fd, events)`; how many are non-zero.
fn poll_once(s: &mut Stack, fds: &[(c_int, i16)], revents: &mut [i16]) -> usize {
    let mut count = 0;
    for ((fd, events), out) in fds.iter().zip(revents.iter_mut()) {
        *out = if *fd < 0 {
            0
        } else {
            let bits = readiness_bits(s.readiness(*fd));
            bits & (*events | libc::POLLERR | libc::POLLHUP | libc::POLLNVAL)
        };
        if *out != 0 {
            count += 1;
        }
    }
    count
}

fn sock_opt(level: c_int, name: c_int) -> Option<SockOpt> {
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => Some(SockOpt::ReuseAddr),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => Some(SockOpt::ReusePort),
        (libc::SOL_SOCKET, libc::SO_ERROR) => Some(SockOpt::Error),
        (libc::SOL_SOCKET, libc::SO_TYPE) => Some(SockOpt::Type),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => Some(SockOpt::SendBuffer),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => Some(SockOpt::RecvBuffer),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => Some(SockOpt::KeepAlive),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => Some(SockOpt::NoDelay),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => Some(SockOpt::UserTimeout),
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => Some(SockOpt::V6Only),
        _ => None,
    }
}

// ---- the C entry points ----------------------------------------------------

unsafe extern "C" fn pd_free(ud: *mut c_void) {
    let p = ud.cast::<Shim>();
    // SAFETY: checks the pointer as every call does; `free` is the last
    // call packetdrill makes with it.
    if unsafe { shim(ud) }.is_err() {
        return;
    }
    // SAFETY: `p` came from `Box::into_raw` in `packetdrill_interface_init`
    // and packetdrill gives it back exactly once, here.
    let mut owned = unsafe { Box::from_raw(p) };
    // A panic must not unwind into C: at worst the shim leaks.
    let _ = catch_unwind(AssertUnwindSafe(move || {
        owned.kill();
        drop(owned);
    }));
}

unsafe extern "C" fn pd_socket(ud: *mut c_void, domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        sh.run(|s| s.socket(domain, ty, protocol))
    })
}

unsafe extern "C" fn pd_bind(ud: *mut c_void, fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        // SAFETY: `addr` points at `len` bytes per bind(2)'s contract.
        let a = unsafe { read_sockaddr(addr, len) }?;
        sh.run(|s| s.bind(fd, a)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_listen(ud: *mut c_void, fd: c_int, backlog: c_int) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        sh.run(|s| s.listen(fd, backlog)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_accept(ud: *mut c_void, fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if !addr.is_null() && len.is_null() {
            return Err(EFAULT);
        }
        let (new_fd, peer) = sh.block(|s| s.is_blocking(fd), None, || Err(EAGAIN), |s| s.accept(fd))?;
        // SAFETY: accept(2)'s contract: `len` points at the room `addr` has.
        unsafe { write_sockaddr(addr, len, peer) }?;
        Ok(new_fd)
    })
}

unsafe extern "C" fn pd_connect(ud: *mut c_void, fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        // SAFETY: `addr` points at `len` bytes per connect(2)'s contract.
        let remote = unsafe { read_sockaddr(addr, len) }?;
        match sh.run(|s| s.connect(fd, remote)) {
            Err(libc::EINPROGRESS) => {}
            r => return r.map(|()| 0),
        }
        if !sh.run(|s| s.is_blocking(fd)) {
            return Err(libc::EINPROGRESS);
        }
        // A blocking connect waits for the handshake, then reports it.
        sh.block(|_| true, None, || Err(EAGAIN), |s| if s.connect_settled(fd) { Ok(()) } else { Err(EAGAIN) })
            .map_err(|e| if e == EAGAIN { libc::ETIMEDOUT } else { e })?;
        sh.run(|s| s.connect(fd, remote)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_read(ud: *mut c_void, fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    // SAFETY: read(2)'s contract: `buf` has room for `count` bytes.
    unsafe { pd_recv(ud, fd, buf, count, 0) }
}

unsafe extern "C" fn pd_recv(ud: *mut c_void, fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        // SAFETY: recv(2)'s contract: `buf` has room for `len` bytes.
        let out = unsafe { out_bytes(buf, len) }?;
        to_ssize(do_recv(sh, fd, out, flags)?)
    })
}

unsafe extern "C" fn pd_recvfrom(
    ud: *mut c_void,
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if !addr.is_null() && addrlen.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: recvfrom(2)'s contract: `buf` has room for `len` bytes.
        let out = unsafe { out_bytes(buf, len) }?;
        let n = do_recv(sh, fd, out, flags)?;
        if !addr.is_null() {
            let peer = sh.run(|s| s.peer(fd))?;
            // SAFETY: recvfrom(2)'s contract for the address pair.
            unsafe { write_sockaddr(addr, addrlen, peer) }?;
        }
        to_ssize(n)
    })
}

unsafe extern "C" fn pd_readv(ud: *mut c_void, fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        let cnt = usize::try_from(cnt).map_err(|_| EINVAL)?;
        // SAFETY: readv(2)'s contract: `iov` holds `cnt` entries.
        let iovs = unsafe { read_iovecs(iov, cnt) }?;
        let mut bounce = vec![0u8; iov_total(&iovs).min(MAX_BOUNCE)];
        let n = do_recv(sh, fd, &mut bounce, 0)?;
        // SAFETY: readv(2)'s contract: each entry is writable memory.
        unsafe { scatter(&iovs, &bounce[..n]) }?;
        to_ssize(n)
    })
}

unsafe extern "C" fn pd_recvmsg(ud: *mut c_void, fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if msg.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: recvmsg(2)'s contract: `msg` is a readable msghdr.
        let mut m = unsafe { std::ptr::read_unaligned(msg) };
        // SAFETY: recvmsg(2)'s contract: `msg_iov` holds `msg_iovlen` entries.
        let iovs = unsafe { read_iovecs(m.msg_iov, m.msg_iovlen) }?;
        let mut bounce = vec![0u8; iov_total(&iovs).min(MAX_BOUNCE)];
        let n = do_recv(sh, fd, &mut bounce, flags)?;
        // SAFETY: recvmsg(2)'s contract: each entry is writable memory.
        unsafe { scatter(&iovs, &bounce[..n]) }?;
        if !m.msg_name.is_null() {
            let peer = sh.run(|s| s.peer(fd))?;
            // SAFETY: recvmsg(2)'s contract: `msg_name` has `msg_namelen`
            // bytes of room; the length lives in our copy `m`.
            unsafe { write_sockaddr(m.msg_name.cast::<sockaddr>(), &raw mut m.msg_namelen, peer) }?;
        }
        m.msg_controllen = 0;
        m.msg_flags = 0;
        // SAFETY: recvmsg(2)'s contract: `msg` is writable.
        unsafe { std::ptr::write_unaligned(msg, m) };
        to_ssize(n)
    })
}

unsafe extern "C" fn pd_write(ud: *mut c_void, fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    // SAFETY: write(2)'s contract: `buf` holds `count` bytes.
    unsafe { pd_send(ud, fd, buf, count, 0) }
}

unsafe extern "C" fn pd_send(ud: *mut c_void, fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        // SAFETY: send(2)'s contract: `buf` holds `len` bytes.
        let data = unsafe { in_bytes(buf, len) }?;
        to_ssize(do_send(sh, fd, data, flags)?)
    })
}

unsafe extern "C" fn pd_sendto(
    ud: *mut c_void,
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    _addr: *const sockaddr,
    _addrlen: socklen_t,
) -> ssize_t {
    // A connected stream socket ignores the destination, as Linux does.
    // SAFETY: sendto(2)'s contract: `buf` holds `len` bytes.
    unsafe { pd_send(ud, fd, buf, len, flags) }
}

unsafe extern "C" fn pd_writev(ud: *mut c_void, fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        let cnt = usize::try_from(cnt).map_err(|_| EINVAL)?;
        // SAFETY: writev(2)'s contract: `iov` holds `cnt` readable entries.
        let data = unsafe { gather(&read_iovecs(iov, cnt)?) }?;
        to_ssize(do_send(sh, fd, &data, 0)?)
    })
}

unsafe extern "C" fn pd_sendmsg(ud: *mut c_void, fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if msg.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: sendmsg(2)'s contract: `msg` is a readable msghdr.
        let m = unsafe { std::ptr::read_unaligned(msg) };
        if m.msg_controllen != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: sendmsg(2)'s contract: `msg_iov` holds `msg_iovlen`
        // readable entries.
        let data = unsafe { gather(&read_iovecs(m.msg_iov, m.msg_iovlen)?) }?;
        to_ssize(do_send(sh, fd, &data, flags)?)
    })
}

/// `fcntl(fd, cmd[, int arg])`. Declared with the variadic argument as a
/// named `int`; see `packetdrill_interface_init` for why that is sound.
unsafe extern "C" fn pd_fcntl(ud: *mut c_void, fd: c_int, cmd: c_int, arg: c_int) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        match cmd {
            libc::F_GETFL => sh.run(|s| s.get_flags(fd)),
            libc::F_SETFL => sh.run(|s| s.set_flags(fd, arg)).map(|()| 0),
            libc::F_GETFD | libc::F_SETFD => sh.run(|s| s.check_fd(fd)).map(|()| 0),
            _ => Err(EINVAL),
        }
    })
}

/// `ioctl(fd, request[, void *argp])`, the variadic argument named as a
/// pointer (see `packetdrill_interface_init`). Only `FIONREAD`.
unsafe extern "C" fn pd_ioctl(ud: *mut c_void, fd: c_int, request: c_ulong, argp: *mut c_void) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if request != libc::FIONREAD as c_ulong {
            return Err(EOPNOTSUPP);
        }
        if argp.is_null() {
            return Err(EFAULT);
        }
        let n = sh.run(|s| s.readable_bytes(fd))?;
        let n = c_int::try_from(n).unwrap_or(c_int::MAX);
        // SAFETY: FIONREAD's contract: `argp` points at a writable int.
        unsafe { std::ptr::write_unaligned(argp.cast::<c_int>(), n) };
        Ok(0)
    })
}

unsafe extern "C" fn pd_close(ud: *mut c_void, fd: c_int) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        sh.run(|s| s.close(fd)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_shutdown(ud: *mut c_void, fd: c_int, how: c_int) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        sh.run(|s| s.shutdown(fd, how)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_getsockopt(
    ud: *mut c_void,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if val.is_null() || len.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: getsockopt(2)'s contract: `len` is a readable socklen_t.
        let room = unsafe { std::ptr::read_unaligned(len) };
        if usize::try_from(room).map_err(|_| EINVAL)? < size_of::<c_int>() {
            return Err(EINVAL);
        }
        sh.run(|s| s.check_fd(fd))?;
        let opt = sock_opt(level, name).ok_or(ENOPROTOOPT)?;
        let v = sh.run(|s| s.get_option(fd, opt))?;
        // SAFETY: getsockopt(2)'s contract: `val` has `room` >= 4 bytes and
        // `len` is writable.
        unsafe {
            std::ptr::write_unaligned(val.cast::<c_int>(), v);
            std::ptr::write_unaligned(len, size_of::<c_int>() as socklen_t);
        }
        Ok(0)
    })
}

unsafe extern "C" fn pd_setsockopt(
    ud: *mut c_void,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: setsockopt(2)'s contract: `val` holds `len` bytes.
        let bytes = unsafe { in_bytes(val, len) }?;
        sh.run(|s| s.check_fd(fd))?;
        let int_at = |at: usize| -> Result<c_int, Errno> {
            let b = bytes.get(at..at + 4).ok_or(EINVAL)?;
            Ok(c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        if (level, name) == (libc::SOL_SOCKET, libc::SO_LINGER) {
            let (on, secs) = (int_at(0)?, int_at(4)?);
            return sh.run(|s| s.set_linger(fd, on != 0, secs)).map(|()| 0);
        }
        let opt = sock_opt(level, name).ok_or(ENOPROTOOPT)?;
        let v = int_at(0)?;
        sh.run(|s| s.set_option(fd, opt, v)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_poll(ud: *mut c_void, fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        let n = usize::try_from(nfds).map_err(|_| EINVAL)?;
        if n > MAX_POLL_FDS {
            return Err(EINVAL);
        }
        if n > 0 && fds.is_null() {
            return Err(EFAULT);
        }
        let mut wanted = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: poll(2)'s contract: `fds` holds `nfds` entries; i < n.
            let p = unsafe { std::ptr::read_unaligned(fds.add(i)) };
            wanted.push((p.fd, p.events));
        }
        let mut revents = vec![0i16; n];
        let timeout_usecs = u64::try_from(timeout).ok().map(|ms| ms.saturating_mul(1000));
        let count = sh.block(
            |_| timeout != 0,
            timeout_usecs,
            || Ok(0),
            |s| match poll_once(s, &wanted, &mut revents) {
                0 if timeout != 0 => Err(EAGAIN),
                c => Ok(c),
            },
        )?;
        for (i, r) in revents.iter().enumerate() {
            // SAFETY: as above; `revents` is a field of entry i.
            unsafe { std::ptr::write_unaligned(&raw mut (*fds.add(i)).revents, *r) };
        }
        c_int::try_from(count).map_err(|_| EINVAL)
    })
}

unsafe extern "C" fn pd_netdev_send(ud: *mut c_void, buf: *const c_void, count: size_t) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if count == 0 {
            return Err(EINVAL);
        }
        // SAFETY: packetdrill passes `count` bytes at `buf`.
        let packet = unsafe { in_bytes(buf, count) }?;
        sh.run(|s| s.inject(packet)).map(|()| 0)
    })
}

unsafe extern "C" fn pd_netdev_receive(ud: *mut c_void, buf: *mut c_void, count: *mut size_t, time: *mut i64) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        if count.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: packetdrill passes the buffer's size in `*count`.
        let room = unsafe { std::ptr::read_unaligned(count) };
        // SAFETY: `buf` has `room` bytes of room.
        let out = unsafe { out_bytes(buf, room) }?;
        // Waits as a blocking read of the device would: other threads first
        // (a blocking call may be about to send), then virtual time.
        let wait = sh.run(|s| s.config().sniff_timeout_usecs);
        let got = sh.block(|_| true, Some(wait), || Ok(None), |s| s.take_outbound().map(Some).ok_or(EAGAIN))?;
        let now = sh.run(|s| s.now_usecs());
        let (n, at) = match got {
            Some((packet, at)) => {
                let n = packet.len().min(out.len());
                out[..n].copy_from_slice(&packet[..n]);
                (n, at)
            }
            // Nothing within the timeout: a zero-length "packet", which
            // packetdrill reports as an error instead of waiting forever.
            None => (0, now),
        };
        // SAFETY: `count` checked non-null above; `time` may be null.
        unsafe {
            std::ptr::write_unaligned(count, n);
            if !time.is_null() {
                std::ptr::write_unaligned(time, i64::try_from(at).unwrap_or(i64::MAX));
            }
        }
        Ok(0)
    })
}

unsafe extern "C" fn pd_usleep(ud: *mut c_void, usec: useconds_t) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        sh.run(|s| s.sleep(u64::from(usec)));
        Ok(0)
    })
}

unsafe extern "C" fn pd_gettimeofday(ud: *mut c_void, tv: *mut timeval, tz: *mut c_void) -> c_int {
    entry(-1, || {
        // SAFETY: `ud` is packetdrill's userdata (see `shim`).
        let sh = unsafe { shim(ud) }?;
        let now = sh.run(|s| s.tick());
        if !tv.is_null() {
            let t = timeval {
                tv_sec: libc::time_t::try_from(now / 1_000_000).map_err(|_| EINVAL)?,
                tv_usec: libc::suseconds_t::try_from(now % 1_000_000).map_err(|_| EINVAL)?,
            };
            // SAFETY: gettimeofday(2)'s contract: `tv` is writable.
            unsafe { std::ptr::write_unaligned(tv, t) };
        }
        if !tz.is_null() {
            // SAFETY: gettimeofday(2)'s contract: `tz` is a writable
            // struct timezone (two ints): UTC, no DST.
            unsafe { std::ptr::write_unaligned(tz.cast::<[c_int; 2]>(), [0, 0]) };
        }
        Ok(0)
    })
}

unsafe extern "C" fn pd_epoll_create(_ud: *mut c_void, _size: c_int) -> c_int {
    entry(-1, || Err(EOPNOTSUPP))
}

unsafe extern "C" fn pd_epoll_ctl(
    _ud: *mut c_void,
    _epfd: c_int,
    _op: c_int,
    _fd: c_int,
    _ev: *mut epoll_event,
) -> c_int {
    entry(-1, || Err(EOPNOTSUPP))
}

unsafe extern "C" fn pd_epoll_wait(
    _ud: *mut c_void,
    _epfd: c_int,
    _ev: *mut epoll_event,
    _max: c_int,
    _t: c_int,
) -> c_int {
    entry(-1, || Err(EOPNOTSUPP))
}

unsafe extern "C" fn pd_pipe(_ud: *mut c_void, _fds: *mut c_int) -> c_int {
    entry(-1, || Err(EOPNOTSUPP))
}

unsafe extern "C" fn pd_splice(
    _ud: *mut c_void,
    _fd_in: c_int,
    _off_in: *mut loff_t,
    _fd_out: c_int,
    _off_out: *mut loff_t,
    _len: size_t,
    _flags: c_uint,
) -> c_int {
    entry(-1, || Err(EOPNOTSUPP))
}

/// The entry point packetdrill looks up with `dlsym`: fills `ifc` with this
/// shim's functions and a fresh stack as `userdata`.
///
/// `flags` is packetdrill's `--so_flags` (may be null): `key=value` items
/// separated by spaces or commas, see [`Config::parse`]. Bad flags are
/// reported on stderr and leave `ifc` untouched (all null), so packetdrill
/// fails at its first call rather than running with settings nobody asked
/// for.
///
/// # Safety
/// `ifc` must be null or point at a writable `struct
/// packetdrill_interface`; `flags` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn packetdrill_interface_init(flags: *const c_char, ifc: *mut PacketdrillInterface) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        if ifc.is_null() || !ifc.is_aligned() {
            return Err("nagare-packetdrill: null or misaligned interface pointer".to_string());
        }
        let flags = if flags.is_null() {
            String::new()
        } else {
            // SAFETY: per this function's contract, a NUL-terminated string.
            unsafe { CStr::from_ptr(flags) }.to_string_lossy().into_owned()
        };
        let config = Config::parse(&flags)?;
        let stack = Stack::new(config).map_err(|e| format!("nagare-packetdrill: engine setup failed (errno {e})"))?;
        let ud = Box::into_raw(Box::new(Shim::new(stack))).cast::<c_void>();

        // fcntl and ioctl are C-variadic in the struct. Stable Rust cannot
        // define a variadic function, so they are defined with the one
        // optional argument named (an int for fcntl, a pointer for ioctl)
        // and stored as the variadic type.
        // SAFETY: on the System V x86_64, AAPCS64 (Linux, not Apple) and
        // RISC-V Linux ABIs (the only targets this crate compiles for, see
        // lib.rs), a variadic integer or pointer argument after named ones
        // is passed in the same register or stack slot as a named argument
        // of that type would be, and the callee owns no extra state, so
        // the non-variadic definition reads exactly what the variadic
        // caller passed. When packetdrill passes no third argument (fcntl
        // F_GETFL), the value read is garbage and is not used.
        let (fcntl, ioctl) = unsafe {
            (
                std::mem::transmute::<unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int) -> c_int, FcntlFn>(
                    pd_fcntl,
                ),
                std::mem::transmute::<unsafe extern "C" fn(*mut c_void, c_int, c_ulong, *mut c_void) -> c_int, IoctlFn>(
                    pd_ioctl,
                ),
            )
        };
        let table = PacketdrillInterface {
            userdata: ud,
            free: Some(pd_free),
            socket: Some(pd_socket),
            bind: Some(pd_bind),
            listen: Some(pd_listen),
            accept: Some(pd_accept),
            connect: Some(pd_connect),
            read: Some(pd_read),
            readv: Some(pd_readv),
            recv: Some(pd_recv),
            recvfrom: Some(pd_recvfrom),
            recvmsg: Some(pd_recvmsg),
            write: Some(pd_write),
            writev: Some(pd_writev),
            send: Some(pd_send),
            sendto: Some(pd_sendto),
            sendmsg: Some(pd_sendmsg),
            fcntl: Some(fcntl),
            ioctl: Some(ioctl),
            close: Some(pd_close),
            shutdown: Some(pd_shutdown),
            getsockopt: Some(pd_getsockopt),
            setsockopt: Some(pd_setsockopt),
            poll: Some(pd_poll),
            netdev_send: Some(pd_netdev_send),
            netdev_receive: Some(pd_netdev_receive),
            usleep: Some(pd_usleep),
            gettimeofday: Some(pd_gettimeofday),
            epoll_create: Some(pd_epoll_create),
            epoll_ctl: Some(pd_epoll_ctl),
            epoll_wait: Some(pd_epoll_wait),
            pipe: Some(pd_pipe),
            splice: Some(pd_splice),
        };
        // SAFETY: `ifc` is non-null and aligned (checked above) and
        // writable per this function's contract.
        unsafe { std::ptr::write(ifc, table) };
        Ok(())
    }));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => eprintln!("{msg}"),
        Err(_) => eprintln!("nagare-packetdrill: panic during initialisation"),
    }
}
