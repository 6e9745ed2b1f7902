//! Moving bytes: `read`/`write`, `readv`/`writev` and the `send`/`recv`
//! family, over each socket's data path (a write queues and returns, a
//! read takes what netd already delivered; see `nagare::net`).
//!
//! Flags: `MSG_DONTWAIT` (this call never waits), `MSG_NOSIGNAL` (no
//! `SIGPIPE` with `EPIPE`), `MSG_WAITALL` (a stream read waits for all
//! it asked), `MSG_TRUNC` (a datagram's whole length), `MSG_PEEK`;
//! `MSG_MORE` and `MSG_EOR` are ignored; `MSG_OOB` is refused.

use crate::addr::{read_addr, write_addr};
use crate::errors::{errno, say_once};
use crate::sock::{Proto, Sock};
use crate::{table, Entered, Res};
use std::net::SocketAddr;

/// The most bytes one vectored call gathers (more is a short count, as a
/// full send buffer gives).
const GATHER_MAX: usize = 256 * 1024;

/// The most entries of an `iovec` array (Linux's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// What one receive gave.
struct Received {
    n: usize,
    /// A datagram's whole length (more than `n` when truncated).
    whole: usize,
    from: Option<SocketAddr>,
}

fn recv_into(s: &Sock, buf: &mut [u8], flags: i32) -> Res<Received> {
    s.touch();
    if flags & libc::MSG_OOB != 0 {
        say_once("MSG_OOB is refused on nagare sockets");
        return Err(libc::EOPNOTSUPP);
    }
    let may_wait = flags & libc::MSG_DONTWAIT == 0;
    match s.proto {
        Proto::Tcp if flags & libc::MSG_PEEK != 0 => {
            let n = s.stream()?.peek_with(buf, may_wait).map_err(|e| errno(&e))?;
            Ok(Received { n, whole: n, from: None })
        }
        Proto::Tcp => {
            let st = s.stream()?;
            let mut n = st.read_with(buf, may_wait).map_err(|e| errno(&e))?;
            if flags & libc::MSG_WAITALL != 0 && may_wait && n > 0 {
                while n < buf.len() {
                    match st.read_with(&mut buf[n..], true) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k,
                    }
                }
            }
            Ok(Received { n, whole: n, from: None })
        }
        Proto::Udp => {
            let (d, peer) = s.datagram()?;
            let peek = flags & libc::MSG_PEEK != 0;
            loop {
                let (n, whole, from) = match peek {
                    true => d.peek_from_with(buf, may_wait),
                    false => d.recv_from_with(buf, may_wait),
                }
                .map_err(|e| errno(&e))?;
                // A connected UDP socket takes datagrams from its peer only:
                // another's is dropped (taken, if it was only peeked at).
                if peer.is_some_and(|p| from != p) {
                    if peek {
                        d.recv_from_with(&mut [], false).map_err(|e| errno(&e))?;
                    }
                    continue;
                }
                return Ok(Received { n, whole, from: Some(from) });
            }
        }
    }
}

fn send_from(s: &Sock, buf: &[u8], flags: i32, to: Option<SocketAddr>) -> Res<usize> {
    s.touch();
    if flags & libc::MSG_OOB != 0 {
        say_once("MSG_OOB is refused on nagare sockets");
        return Err(libc::EOPNOTSUPP);
    }
    let may_wait = flags & libc::MSG_DONTWAIT == 0;
    let r = match s.proto {
        Proto::Tcp => s.stream_to_write().and_then(|st| st.write_with(buf, may_wait).map_err(|e| errno(&e))),
        Proto::Udp => {
            let (d, peer) = s.datagram()?;
            let to = to.or(peer).ok_or(libc::EDESTADDRREQ)?;
            d.send_to_with(buf, to, may_wait).map_err(|e| errno(&e))
        }
    };
    if r == Err(libc::EPIPE) && flags & libc::MSG_NOSIGNAL == 0 {
        // As the kernel does for a write on a closed stream.
        unsafe { libc::raise(libc::SIGPIPE) };
    }
    r
}

/// `read`.
///
/// # Safety
/// `buf` has `len` writable bytes.
pub unsafe fn read(fd: i32, buf: *mut u8, len: usize) -> Res<usize> {
    unsafe { recv(fd, buf, len, 0) }
}

/// `write` (`SIGPIPE` with `EPIPE`).
///
/// # Safety
/// `buf` has `len` readable bytes.
pub unsafe fn write(fd: i32, buf: *const u8, len: usize) -> Res<usize> {
    unsafe { send(fd, buf, len, 0) }
}

/// `recv`.
///
/// # Safety
/// `buf` has `len` writable bytes.
pub unsafe fn recv(fd: i32, buf: *mut u8, len: usize, flags: i32) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let out = unsafe { slice_mut(buf, len) }?;
    let r = recv_into(&s, out, flags)?;
    Ok(if flags & libc::MSG_TRUNC != 0 { r.whole } else { r.n })
}

/// `recvfrom`: the sender written to `addr` (a datagram's; a stream
/// leaves `addr` alone).
///
/// # Safety
/// `buf` has `len` writable bytes; `addr` as `getsockname`'s.
pub unsafe fn recvfrom(
    fd: i32,
    buf: *mut u8,
    len: usize,
    flags: i32,
    addr: *mut libc::sockaddr,
    addr_len: *mut libc::socklen_t,
) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let out = unsafe { slice_mut(buf, len) }?;
    let r = recv_into(&s, out, flags)?;
    if let Some(from) = r.from {
        unsafe { write_addr(from, s.is_six(), addr, addr_len) }?;
    }
    Ok(if flags & libc::MSG_TRUNC != 0 { r.whole } else { r.n })
}

/// `send`.
///
/// # Safety
/// `buf` has `len` readable bytes.
pub unsafe fn send(fd: i32, buf: *const u8, len: usize, flags: i32) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    send_from(&s, unsafe { slice(buf, len) }?, flags, None)
}

/// `sendto`: a datagram to `addr` (a stream ignores `addr`).
///
/// # Safety
/// `buf` has `len` readable bytes; `addr` is null or has `addr_len`.
pub unsafe fn sendto(
    fd: i32,
    buf: *const u8,
    len: usize,
    flags: i32,
    addr: *const libc::sockaddr,
    addr_len: libc::socklen_t,
) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let to = if addr.is_null() || s.proto == Proto::Tcp {
        None
    } else {
        Some(unsafe { read_addr(addr, addr_len, s.is_six()) }?)
    };
    send_from(&s, unsafe { slice(buf, len) }?, flags, to)
}

/// `readv`: a stream fills the buffers in turn, waiting (if it may) only
/// for the first byte; a datagram is spread over them.
///
/// # Safety
/// `iov` has `n` entries, each naming writable bytes.
pub unsafe fn readv(fd: i32, iov: *const libc::iovec, n: i32) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let iov = unsafe { iovecs(iov, n) }?;
    unsafe { scatter_recv(&s, iov, 0) }.map(|r| r.n)
}

/// `writev`: the buffers sent as one write (a stream's in turn, with no
/// copy of their own; a datagram's gathered, up to 256 KiB).
///
/// # Safety
/// `iov` has `n` entries, each naming readable bytes.
pub unsafe fn writev(fd: i32, iov: *const libc::iovec, n: i32) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let iov = unsafe { iovecs(iov, n) }?;
    unsafe { gather_send(&s, iov, 0, None) }
}

/// `recvmsg`: as `readv` with `recvfrom`'s sender in `msg_name`; no
/// ancillary data (`msg_controllen` 0), `MSG_TRUNC` in `msg_flags` for a
/// datagram cut short.
///
/// # Safety
/// `msg` is a valid `msghdr` whose pointers name what its lengths say.
pub unsafe fn recvmsg(fd: i32, msg: *mut libc::msghdr, flags: i32) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let m = unsafe { msg.as_mut() }.ok_or(libc::EFAULT)?;
    let iov = unsafe { iovecs(m.msg_iov, i32::try_from(m.msg_iovlen).map_err(|_| libc::EMSGSIZE)?) }?;
    let r = unsafe { scatter_recv(&s, iov, flags) }?;
    m.msg_controllen = 0;
    m.msg_flags = if r.whole > r.n { libc::MSG_TRUNC } else { 0 };
    match r.from {
        Some(from) if !m.msg_name.is_null() => {
            unsafe { write_addr(from, s.is_six(), m.msg_name.cast(), &mut m.msg_namelen) }?
        }
        _ => m.msg_namelen = 0,
    }
    Ok(if flags & libc::MSG_TRUNC != 0 { r.whole } else { r.n })
}

/// `sendmsg`: the buffers gathered, to `msg_name` if set; ancillary data
/// is ignored (said once).
///
/// # Safety
/// `msg` is a valid `msghdr` whose pointers name what its lengths say.
pub unsafe fn sendmsg(fd: i32, msg: *const libc::msghdr, flags: i32) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let m = unsafe { msg.as_ref() }.ok_or(libc::EFAULT)?;
    if m.msg_controllen > 0 {
        say_once("sendmsg's ancillary data is ignored on nagare sockets");
    }
    let to = if m.msg_name.is_null() || m.msg_namelen == 0 || s.proto == Proto::Tcp {
        None
    } else {
        Some(unsafe { read_addr(m.msg_name.cast(), m.msg_namelen, s.is_six()) }?)
    };
    let iov = unsafe { iovecs(m.msg_iov, i32::try_from(m.msg_iovlen).map_err(|_| libc::EMSGSIZE)?) }?;
    unsafe { gather_send(&s, iov, flags, to) }
}

/// `sendmmsg`: each message sent as [`sendmsg`] sends it, its count
/// written to `msg_len`; stops at the first that fails (its error is the
/// call's only if none was sent).
///
/// # Safety
/// `msgs` has `n` valid `mmsghdr`s.
pub unsafe fn sendmmsg(fd: i32, msgs: *mut libc::mmsghdr, n: u32, flags: i32) -> Res<usize> {
    let _in = Entered::new();
    unsafe { each_message(msgs, n, |_, m| sendmsg(fd, &m.msg_hdr, flags)) }
}

/// `recvmmsg`: messages received as [`recvmsg`] receives them, the first
/// as `flags` says, the rest only while they are already here; `timeout`
/// is not taken (the call waits for the first message alone).
///
/// # Safety
/// `msgs` has `n` valid `mmsghdr`s.
pub unsafe fn recvmmsg(fd: i32, msgs: *mut libc::mmsghdr, n: u32, flags: i32) -> Res<usize> {
    let _in = Entered::new();
    unsafe {
        each_message(msgs, n, |i, m| {
            let f = if i == 0 { flags & !libc::MSG_WAITFORONE } else { flags | libc::MSG_DONTWAIT };
            recvmsg(fd, &mut m.msg_hdr, f)
        })
    }
}

/// `one` on each of the `n` messages (at most [`IOV_MAX`]) in turn, its
/// count written to the message's `msg_len`, until one fails: how many
/// went, or the first's error if none did.
///
/// # Safety
/// `msgs` has `n` valid `mmsghdr`s; `one` is safe to call on each.
unsafe fn each_message(
    msgs: *mut libc::mmsghdr,
    n: u32,
    mut one: impl FnMut(usize, &mut libc::mmsghdr) -> Res<usize>,
) -> Res<usize> {
    let n = (n as usize).min(IOV_MAX);
    if n > 0 && msgs.is_null() {
        return Err(libc::EFAULT);
    }
    let mut done = 0;
    while done < n {
        let m = unsafe { &mut *msgs.add(done) };
        match one(done, m) {
            Ok(k) => m.msg_len = k as u32,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        done += 1;
    }
    Ok(done)
}

/// `sendfile` to a nagare socket: up to 256 KiB of `in_fd` (from
/// `*offset`, which then moves on by what was sent; else from its file
/// position, which moves on by what was sent) copied here and sent as one
/// write.
///
/// # Safety
/// `offset` is null or valid.
pub unsafe fn sendfile(out_fd: i32, in_fd: i32, offset: *mut libc::off_t, count: usize) -> Res<usize> {
    let _in = Entered::new();
    let s = table::get(out_fd)?;
    let mut bytes = vec![0u8; count.min(GATHER_MAX)];
    let got = match unsafe { offset.as_mut() } {
        Some(at) => unsafe { libc::pread(in_fd, bytes.as_mut_ptr().cast(), bytes.len(), *at) },
        None => unsafe { libc::read(in_fd, bytes.as_mut_ptr().cast(), bytes.len()) },
    };
    let got = usize::try_from(got).map_err(|_| crate::calls::last_errno())?;
    if got == 0 {
        return Ok(0);
    }
    let sent = send_from(&s, &bytes[..got], 0, None);
    let kept = *sent.as_ref().unwrap_or(&0);
    match unsafe { offset.as_mut() } {
        Some(at) => *at += kept as libc::off_t,
        // The file position goes back over what was read and not sent.
        None => {
            unsafe { libc::lseek(in_fd, -((got - kept) as libc::off_t), libc::SEEK_CUR) };
        }
    }
    sent
}

/// # Safety
/// `buf` is null only with `len` 0, else has `len` writable bytes.
unsafe fn slice_mut<'a>(buf: *mut u8, len: usize) -> Res<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(unsafe { std::slice::from_raw_parts_mut(buf, len) })
}

/// # Safety
/// `buf` is null only with `len` 0, else has `len` readable bytes.
unsafe fn slice<'a>(buf: *const u8, len: usize) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(unsafe { std::slice::from_raw_parts(buf, len) })
}

/// # Safety
/// `iov` has `n` entries.
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: i32) -> Res<&'a [libc::iovec]> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n > IOV_MAX {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(unsafe { std::slice::from_raw_parts(iov, n) })
}

/// One send of the bytes the buffers name. A stream's buffers are written
/// in turn (only the first waits, and a short write ends the call), with
/// no copy of their own; a datagram of one buffer goes as it is, one of
/// several is gathered first (up to [`GATHER_MAX`]).
///
/// # Safety
/// Each entry names readable bytes.
unsafe fn gather_send(s: &Sock, iov: &[libc::iovec], flags: i32, to: Option<SocketAddr>) -> Res<usize> {
    if s.proto == Proto::Tcp {
        let mut sent = 0;
        for v in iov.iter().filter(|v| v.iov_len > 0) {
            // After the first buffer: no wait, and no SIGPIPE for bytes
            // already counted as sent.
            let f = if sent == 0 { flags } else { flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL };
            match send_from(s, unsafe { slice(v.iov_base.cast(), v.iov_len) }?, f, to) {
                Ok(k) => {
                    sent += k;
                    if k < v.iov_len {
                        break;
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        return Ok(sent);
    }
    if let [one] = iov {
        return send_from(s, unsafe { slice(one.iov_base.cast(), one.iov_len) }?, flags, to);
    }
    send_from(s, &unsafe { gather(iov) }?, flags, to)
}

/// The bytes the buffers name, up to [`GATHER_MAX`].
///
/// # Safety
/// Each entry names readable bytes.
unsafe fn gather(iov: &[libc::iovec]) -> Res<Vec<u8>> {
    let total = iov.iter().fold(0usize, |t, v| t.saturating_add(v.iov_len)).min(GATHER_MAX);
    let mut bytes = Vec::with_capacity(total);
    for v in iov {
        let k = v.iov_len.min(total - bytes.len());
        bytes.extend_from_slice(unsafe { slice(v.iov_base.cast(), k) }?);
        if bytes.len() == total {
            break;
        }
    }
    Ok(bytes)
}

/// One receive spread over the buffers.
///
/// # Safety
/// Each entry names writable bytes.
unsafe fn scatter_recv(s: &Sock, iov: &[libc::iovec], flags: i32) -> Res<Received> {
    if s.proto == Proto::Tcp {
        let mut got = Received { n: 0, whole: 0, from: None };
        for v in iov {
            let out = unsafe { slice_mut(v.iov_base.cast(), v.iov_len) }?;
            if out.is_empty() {
                continue;
            }
            // Only the first byte is waited for.
            let f = if got.n == 0 { flags } else { flags | libc::MSG_DONTWAIT };
            match recv_into(s, out, f) {
                Ok(r) => {
                    got.n += r.n;
                    if r.n < out.len() {
                        break;
                    }
                }
                Err(e) if got.n == 0 => return Err(e),
                Err(_) => break,
            }
        }
        got.whole = got.n;
        return Ok(got);
    }
    if let [one] = iov {
        // One buffer: the datagram lands in it.
        return recv_into(s, unsafe { slice_mut(one.iov_base.cast(), one.iov_len) }?, flags);
    }
    let total = iov.iter().fold(0usize, |t, v| t.saturating_add(v.iov_len)).min(GATHER_MAX);
    let mut bytes = vec![0u8; total];
    let r = recv_into(s, &mut bytes, flags)?;
    let mut at = 0;
    for v in iov {
        if at == r.n {
            break;
        }
        let k = v.iov_len.min(r.n - at);
        let out = unsafe { slice_mut(v.iov_base.cast(), k) }?;
        out.copy_from_slice(&bytes[at..at + k]);
        at += k;
    }
    Ok(r)
}
