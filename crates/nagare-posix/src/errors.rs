//! `errno` from the client library's errors, and the messages said once
//! for what this layer refuses.

use std::collections::HashSet;
use std::io;
use std::sync::Mutex;

/// The `errno` an error of the client library stands for.
pub(crate) fn errno(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    use io::ErrorKind::*;
    match e.kind() {
        NotFound => libc::ENOENT,
        PermissionDenied => libc::EACCES,
        ConnectionRefused => libc::ECONNREFUSED,
        ConnectionReset => libc::ECONNRESET,
        ConnectionAborted => libc::ECONNABORTED,
        NotConnected => libc::ENOTCONN,
        AddrInUse => libc::EADDRINUSE,
        AddrNotAvailable => libc::EADDRNOTAVAIL,
        BrokenPipe => libc::EPIPE,
        AlreadyExists => libc::EEXIST,
        WouldBlock => libc::EAGAIN,
        InvalidInput => libc::EINVAL,
        TimedOut => libc::ETIMEDOUT,
        Interrupted => libc::EINTR,
        Unsupported => libc::EOPNOTSUPP,
        OutOfMemory => libc::ENOMEM,
        HostUnreachable => libc::EHOSTUNREACH,
        NetworkUnreachable => libc::ENETUNREACH,
        NetworkDown => libc::ENETDOWN,
        _ => libc::EIO,
    }
}

/// Says `message` on stderr, once per process and message, prefixed
/// `nagare:`: what a program asked of a nagare socket that is refused or
/// has no effect. `NAGARE_LOG=off` (or `error`) silences it.
pub(crate) fn say_once(message: &str) {
    if std::env::var("NAGARE_LOG").is_ok_and(|l| l.eq_ignore_ascii_case("off") || l.eq_ignore_ascii_case("error")) {
        return;
    }
    static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(message.to_string()) {
        eprintln!("nagare: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_errors_pass_through_and_kinds_map_to_their_errno() {
        assert_eq!(errno(&io::Error::from_raw_os_error(libc::ECONNRESET)), libc::ECONNRESET);
        assert_eq!(errno(&io::Error::new(io::ErrorKind::ConnectionRefused, "x")), libc::ECONNREFUSED);
        assert_eq!(errno(&io::Error::other("x")), libc::EIO);
    }
}
