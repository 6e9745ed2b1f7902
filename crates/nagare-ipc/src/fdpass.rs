//! Messages with file descriptors attached (`SCM_RIGHTS`) over a Unix
//! socket: how regions and eventfds reach a peer, at the rendezvous and
//! between netd and its driver.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Most descriptors one message carries.
pub const MAX_FDS: usize = 8;

/// Control-message space for [`MAX_FDS`] descriptors, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; 64]);

/// Sends `bytes` as one message with `fds` attached (at most [`MAX_FDS`]).
/// A short send is an error.
pub fn send_with_fds(sock: BorrowedFd<'_>, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors for one message"));
    }
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    let mut cbuf = CmsgBuf([0; 64]);
    let fd_bytes = size_of::<RawFd>() * fds.len();
    // SAFETY: an all-zero msghdr is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
        msg.msg_control = cbuf.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: msg_control points at `space` zeroed, 8-aligned bytes we
        // own (space for MAX_FDS descriptors fits in 64 bytes), so
        // CMSG_FIRSTHDR returns the first header inside them and CMSG_DATA
        // its data, with room for `fd_bytes` bytes.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            let data = libc::CMSG_DATA(c).cast::<RawFd>();
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `msg` points at live `iov`, `bytes` and `cbuf` for the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != bytes.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short message"));
    }
    Ok(())
}

/// What [`recv_with_fds`] received.
#[derive(Debug)]
pub struct Received {
    /// Bytes of the message written into the buffer (0: end of stream).
    pub len: usize,
    /// Every descriptor that came with it, owned (so none leaks whatever the
    /// peer sent), close-on-exec.
    pub fds: Vec<OwnedFd>,
    /// The kernel dropped descriptors that did not fit (`MSG_CTRUNC`).
    pub fds_truncated: bool,
}

/// Receives one message into `buf` with its descriptors; `flags` are
/// `recvmsg` flags (`MSG_DONTWAIT`, say).
pub fn recv_with_fds(sock: BorrowedFd<'_>, buf: &mut [u8], flags: i32) -> io::Result<Received> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = CmsgBuf([0; 64]);
    // SAFETY: an all-zero msghdr is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = cbuf.0.len() as _;
    // SAFETY: `msg` points at live, writable `buf` and `cbuf`; the kernel
    // writes at most their lengths.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, flags | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: after recvmsg, msg_control/msg_controllen describe the control
    // messages the kernel wrote into `cbuf`; the CMSG macros walk them within
    // those bounds. Each SCM_RIGHTS payload holds (cmsg_len - CMSG_LEN(0)) / 4
    // descriptors that the kernel installed in this process for us, so we
    // take ownership of each exactly once.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let payload = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..payload / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Received { len: n as usize, fds, fds_truncated: msg.msg_flags & libc::MSG_CTRUNC != 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn bytes_and_descriptors_arrive_together() {
        let (a, b) = UnixStream::pair().unwrap();
        let e1 = crate::eventfd().unwrap();
        let e2 = crate::eventfd().unwrap();
        send_with_fds(a.as_fd(), b"hello", &[e1.as_fd(), e2.as_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let r = recv_with_fds(b.as_fd(), &mut buf, 0).unwrap();
        assert_eq!(&buf[..r.len], b"hello");
        assert_eq!(r.fds.len(), 2);
        assert!(!r.fds_truncated);
        // Nothing more: a non-blocking receive says so.
        let e = recv_with_fds(b.as_fd(), &mut buf, libc::MSG_DONTWAIT).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn too_many_descriptors_are_refused() {
        let (a, _b) = UnixStream::pair().unwrap();
        let e = crate::eventfd().unwrap();
        let fds: Vec<_> = (0..MAX_FDS + 1).map(|_| e.as_fd()).collect();
        assert!(send_with_fds(a.as_fd(), b"x", &fds).is_err());
    }
}
