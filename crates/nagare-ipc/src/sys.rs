//! Thin wrappers over the few system calls the crate needs (libc), each
//! returning `io::Result` and owning what it creates.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `-1` into the thread's `errno`.
pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A new file descriptor returned by a system call, owned from here on.
fn owned(ret: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(ret)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing
    // else in this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)`.
pub(crate) fn memfd_create(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string for the call's duration.
    owned(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) })
}

/// `ftruncate(fd, len)`.
pub(crate) fn ftruncate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain system call on a borrowed, open descriptor.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }).map(drop)
}

/// The size of the file behind `fd` (`fstat`).
pub(crate) fn file_size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is writable memory of the right type; fstat fills it on success.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    u64::try_from(st.st_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// Adds seals to a memfd (`F_ADD_SEALS`).
pub(crate) fn add_seals(fd: BorrowedFd<'_>, seals: libc::c_int) -> io::Result<()> {
    // SAFETY: plain fcntl on a borrowed, open descriptor.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) }).map(drop)
}

/// The seals of a memfd (`F_GET_SEALS`).
pub(crate) fn get_seals(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    // SAFETY: plain fcntl on a borrowed, open descriptor.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) })
}

/// A non-blocking, close-on-exec eventfd with a zero count.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; the result is a new descriptor.
    owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })
}

/// Adds one to an eventfd's count. A full counter (EAGAIN) already wakes the
/// reader, so it is not an error.
pub(crate) fn eventfd_signal(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local.
    let r = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    if r == 8 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::WouldBlock {
        Ok(())
    } else {
        Err(err)
    }
}

/// Reads (and so resets) an eventfd's count; 0 if it was already zero.
pub(crate) fn eventfd_drain(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live local.
    let r = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    if r == 8 {
        return Ok(v);
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::WouldBlock {
        Ok(0)
    } else {
        Err(err)
    }
}

/// `poll(2)` on one descriptor; returns its `revents` (0 on timeout).
/// `None` waits forever. EINTR is reported as a timeout (the caller re-checks).
pub(crate) fn poll_one(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout: Option<Duration>,
) -> io::Result<libc::c_short> {
    match poll_one_or_signal(fd, events, timeout, None) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        r => r,
    }
}

/// [`poll_one`], with EINTR (a signal handler ran) returned as
/// `ErrorKind::Interrupted`; with `mask`, the thread's signal mask while
/// it sleeps (`ppoll(2)`'s, set and restored atomically by the kernel).
pub(crate) fn poll_one_or_signal(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout: Option<Duration>,
    mask: Option<&libc::sigset_t>,
) -> io::Result<libc::c_short> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let mask_ptr = mask.map_or(std::ptr::null(), |m| m as *const libc::sigset_t);
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 };
    // SAFETY: one valid pollfd on the stack for the call's duration; the
    // timespec and mask, when given, outlive it.
    let r = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, mask_ptr) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(if r == 0 { 0 } else { pfd.revents })
}

/// A listening `AF_UNIX` stream socket at `path` whose file has mode 0600
/// (less whatever the umask takes) from its `bind` on: the socket's mode
/// is set before the bind, which gives the file that mode under the
/// umask, so nobody but its user connects before the caller chooses, and
/// the process's umask, which other threads read, is left alone.
pub(crate) fn unix_listener_private(path: &std::path::Path) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::ffi::OsStrExt;
    let (addr, len) =
        unix_addr(path.as_os_str().as_bytes(), false).ok_or(io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
    // SAFETY: plain socket creation; the result is owned at once.
    let fd = owned(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a mode change of the socket this function owns.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) })?;
    // SAFETY: `addr` is a whole sockaddr_un, of which the first `len`
    // bytes are the address.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) })?;
    // SAFETY: listen on the socket this function owns.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), libc::SOMAXCONN) })?;
    Ok(std::os::unix::net::UnixListener::from(fd))
}

/// An `AF_UNIX` address for `name` and its length, for `bind` or
/// `connect`: a path (with its closing NUL; neither empty nor holding a
/// NUL), or with `abstract_name` a name in the abstract namespace (a
/// leading NUL, none closing it). `None` if it does not fit. It takes no
/// lock and allocates nothing, so a fork handler may call it.
pub fn unix_addr(name: &[u8], abstract_name: bool) -> Option<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all zeros is a valid sockaddr_un.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if !abstract_name && (name.is_empty() || name.contains(&0)) {
        return None;
    }
    let start = usize::from(abstract_name);
    // A path needs its closing NUL, which the zeroed address has already.
    let room = addr.sun_path.len() - start - usize::from(!abstract_name);
    if name.len() > room {
        return None;
    }
    for (to, &from) in addr.sun_path[start..].iter_mut().zip(name) {
        *to = from as libc::c_char;
    }
    let used = start + name.len() + usize::from(!abstract_name);
    let len = std::mem::size_of::<libc::sa_family_t>() + used;
    Some((addr, len as libc::socklen_t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_a_path_with_its_nul_or_an_abstract_name_after_one() {
        let family = std::mem::size_of::<libc::sa_family_t>();
        let (addr, len) = unix_addr(b"/tmp/a", false).unwrap();
        assert_eq!(len as usize, family + 7);
        assert_eq!(addr.sun_path[..7].iter().map(|&c| c as u8).collect::<Vec<_>>(), b"/tmp/a\0");
        let (addr, len) = unix_addr(b"n\0m", true).unwrap();
        assert_eq!(len as usize, family + 4);
        assert_eq!(addr.sun_path[..4].iter().map(|&c| c as u8).collect::<Vec<_>>(), b"\0n\0m");
        let room = addr.sun_path.len();
        assert!(unix_addr(&vec![b'a'; room - 1], false).is_some());
        assert!(unix_addr(&vec![b'a'; room], false).is_none(), "no room for the NUL");
        assert!(unix_addr(&vec![b'a'; room - 1], true).is_some());
        assert!(unix_addr(&vec![b'a'; room], true).is_none(), "no room for the leading NUL");
        assert!(unix_addr(b"", false).is_none());
        assert!(unix_addr(b"/tmp/a\0b", false).is_none());
    }
}
