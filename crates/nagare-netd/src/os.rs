//! The few system calls netd and the driver make on descriptors directly,
//! and what netd reads of a client's process in `/proc`.

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

/// Whether process `pid` is a child of process `parent` and runs as user
/// `uid` (its real or effective one), by `/proc/PID/status`; false when
/// that cannot be read.
pub(crate) fn is_child_of(pid: i32, parent: i32, uid: u32) -> bool {
    if pid <= 0 || parent <= 0 {
        return false;
    }
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| status_says_child_of(&s, parent, uid))
}

/// [`is_child_of`] on the text of a `/proc/PID/status`.
fn status_says_child_of(status: &str, parent: i32, uid: u32) -> bool {
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::split_whitespace);
    let ppid = field("PPid:").and_then(|mut w| w.next()).and_then(|w| w.parse::<i32>().ok());
    let uids: Vec<u32> = field("Uid:").map(|w| w.take(2).filter_map(|u| u.parse().ok()).collect()).unwrap_or_default();
    ppid == Some(parent) && uids.contains(&uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_told_by_its_parent_and_user() {
        let status = "Name:\tpython3\nPid:\t4321\nPPid:\t1234\nUid:\t1000\t1000\t1000\t1000\n";
        assert!(status_says_child_of(status, 1234, 1000));
        assert!(!status_says_child_of(status, 1235, 1000), "another parent");
        assert!(!status_says_child_of(status, 1234, 1001), "another user");
        assert!(!status_says_child_of("Name:\tx\n", 1234, 1000), "no fields");
        assert!(!status_says_child_of("PPid:\tnan\nUid:\t1000\n", 1234, 1000), "a field that is no number");
        let me = std::process::id() as i32;
        // SAFETY: getppid and getuid have no preconditions.
        let (parent, uid) = unsafe { (libc::getppid(), libc::getuid()) };
        assert!(is_child_of(me, parent, uid), "this process is its parent's");
        assert!(!is_child_of(me, me, uid), "nor its own child");
        assert!(!is_child_of(0, parent, uid));
    }
}
