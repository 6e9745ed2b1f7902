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
    let ms: libc::c_int = match timeout {
        None => -1,
        // Round up, so a short positive timeout does not become a busy poll.
        Some(t) => libc::c_int::try_from(t.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX),
    };
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 };
    // SAFETY: one valid pollfd on the stack for the call's duration.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r == -1 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(if r == 0 { 0 } else { pfd.revents })
}
