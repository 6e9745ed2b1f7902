//! The few system calls netd and the driver make on descriptors directly.

use std::io;

/// Puts descriptor `fd` in non-blocking mode.
pub(crate) fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `millis` ms for one of `fds` to be ready; a wait a signal
/// interrupted returns as a wake-up.
pub(crate) fn poll(fds: &mut [libc::pollfd], millis: i32) -> io::Result<()> {
    // SAFETY: `fds` is a live array of pollfd of the length passed.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
