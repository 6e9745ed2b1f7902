//! `nagare_poll`: a set without nagare sockets is libc's `poll`; one with
//! them is `nagare_posix::poll`'s, kernel descriptors in it included.

use crate::ret;
use libc::{c_int, nfds_t, pollfd};
use nagare_posix as posix;
use std::time::Duration;

/// Whether a `poll` set holds a nagare socket.
///
/// # Safety
/// `fds` is null or has `n` entries.
unsafe fn any_ours(fds: *const pollfd, n: nfds_t) -> bool {
    if fds.is_null() {
        return false;
    }
    (0..n as usize).any(|i| {
        let fd = unsafe { (*fds.add(i)).fd };
        fd >= 0 && posix::is_ours(fd)
    })
}

/// `poll` (a negative `timeout_ms` waits as long as it takes).
#[no_mangle]
pub unsafe extern "C" fn nagare_poll(fds: *mut pollfd, n: nfds_t, timeout_ms: c_int) -> c_int {
    if !unsafe { any_ours(fds, n) } {
        return unsafe { libc::poll(fds, n, timeout_ms) };
    }
    let limit = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
    ret(unsafe { posix::poll(fds, n, limit, std::ptr::null()) }) as c_int
}
