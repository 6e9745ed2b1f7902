//! The texts of the errors that come from netd's side rather than from a
//! socket call: reaching netd at its socket, and losing it. Each names the
//! socket, says what happened and what to do about it, since whoever reads
//! it is usually running a program that uses the library, not the library.

use nagare_ipc::RendezvousError;
use std::io;
use std::path::Path;

/// How to start a netd that listens at `path`.
fn start_hint(path: &Path) -> String {
    let socket = if path == Path::new(nagare_request::DEFAULT_SOCKET) {
        String::new()
    } else {
        format!(" --socket {}", path.display())
    };
    format!(
        "start one with `nagare netd --tap TAP --addr ADDRESS/PREFIX{socket}` (as root, or on a TAP made for your \
         user), or set {} to the socket of a running netd",
        crate::NETD_ENV
    )
}

/// The error of a failed [`crate::Session::connect`] to `path`.
pub(crate) fn connect_error(path: &Path, e: RendezvousError) -> io::Error {
    let at = path.display();
    match e {
        RendezvousError::Io(e) => {
            let text = match e.kind() {
                io::ErrorKind::NotFound => {
                    format!("no nagare netd answers at {at}: there is no socket there; {}", start_hint(path))
                }
                io::ErrorKind::ConnectionRefused => format!(
                    "no nagare netd answers at {at}: nothing listens on that file (a netd that stopped without \
                     removing its socket, or not a socket at all); {} (netd replaces a stale socket file)",
                    start_hint(path)
                ),
                io::ErrorKind::PermissionDenied => format!(
                    "not allowed to connect to nagare netd at {at} ({e}): the socket or its directory belongs to \
                     another user; run this program as netd's user or as root, or start a netd of your own with \
                     `nagare netd ... --socket PATH` and set {} to that PATH",
                    crate::NETD_ENV
                ),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
                    "nagare netd at {at} accepted the connection but did not answer in time: it may be stuck or \
                     overloaded, or what listens there is not nagare netd; restart netd, or set {} to the socket \
                     of another",
                    crate::NETD_ENV
                ),
                _ => format!(
                    "cannot reach nagare netd at {at}: {e}; check that {} (or --via) names netd's socket",
                    crate::NETD_ENV
                ),
            };
            io::Error::new(e.kind(), text)
        }
        RendezvousError::VersionMismatch { server, client } => io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!(
                "nagare netd at {at} speaks version {server} of the shared-memory layout and this program version \
                 {client}: run a netd from the same nagare release as this program (restart netd with the matching \
                 `nagare`), or rebuild the program against netd's release"
            ),
        ),
        RendezvousError::Refused(errno) if errno == libc::EACCES as u32 => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "nagare netd at {at} refused this process: it serves only its own user and root unless started with \
                 --socket-mode or --socket-group; run this program as netd's user, or start a netd of your own with `nagare netd ... --socket PATH` and set {} to \
                 that PATH",
                crate::NETD_ENV
            ),
        ),
        RendezvousError::Refused(errno) => io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!(
                "nagare netd at {at} refused the connection ({}); its log says why",
                io::Error::from_raw_os_error(errno as i32)
            ),
        ),
        RendezvousError::BadHello(what) => io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "what listens at {at} is not a nagare netd this program understands (its greeting: {what}); set {} \
                 to the socket of a nagare netd from the same release",
                crate::NETD_ENV
            ),
        ),
        RendezvousError::Region(e) => unusable_region(path, e),
        RendezvousError::NotAllowed(_) => io::Error::new(io::ErrorKind::PermissionDenied, format!("{at}: {e}")),
    }
}

/// The error of a region from netd at `path` whose rings or buffers do not
/// hold together (`e` says where).
pub(crate) fn unusable_region(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "nagare netd at {} offered shared memory this program cannot use ({e}): run a netd from the same \
             nagare release as this program",
            path.display()
        ),
    )
}

/// The error of every call once netd at `path` has gone away.
pub(crate) fn netd_gone(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        format!(
            "nagare netd at {} is gone (it stopped or crashed during this session), and with it this session's \
             sockets; start netd again and reconnect",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(e: RendezvousError) -> String {
        connect_error(Path::new("/run/x.sock"), e).to_string()
    }

    /// The cases no test can provoke without another user or another build.
    #[test]
    fn every_case_names_the_socket_and_what_to_do() {
        let cases: [(RendezvousError, io::ErrorKind, &[&str]); 5] = [
            (
                RendezvousError::Io(io::Error::from(io::ErrorKind::PermissionDenied)),
                io::ErrorKind::PermissionDenied,
                &["not allowed to connect", "netd's user or as root", "NAGARE_NETD"],
            ),
            (
                RendezvousError::VersionMismatch { server: 9, client: 1 },
                io::ErrorKind::ConnectionRefused,
                &["version 9", "version 1", "same nagare release"],
            ),
            (
                RendezvousError::Refused(libc::EACCES as u32),
                io::ErrorKind::PermissionDenied,
                &["refused this process", "own user and root", "NAGARE_NETD"],
            ),
            (
                RendezvousError::Io(io::Error::from(io::ErrorKind::WouldBlock)),
                io::ErrorKind::WouldBlock,
                &["did not answer in time", "restart netd"],
            ),
            (
                RendezvousError::BadHello("magic"),
                io::ErrorKind::InvalidData,
                &["not a nagare netd", "magic", "NAGARE_NETD"],
            ),
        ];
        for (e, kind, needles) in cases {
            let e = connect_error(Path::new("/run/x.sock"), e);
            assert_eq!(e.kind(), kind, "{e}");
            let message = e.to_string();
            assert!(message.contains("/run/x.sock"), "{message}");
            for needle in needles {
                assert!(message.contains(needle), "{needle:?} missing from: {message}");
            }
        }
    }

    #[test]
    fn the_start_hint_names_a_socket_other_than_the_default() {
        let missing = || RendezvousError::Io(io::Error::from(io::ErrorKind::NotFound));
        assert!(text(missing()).contains("--socket /run/x.sock"));
        let default = connect_error(Path::new(nagare_request::DEFAULT_SOCKET), missing()).to_string();
        assert!(default.contains("nagare netd --tap TAP --addr ADDRESS/PREFIX`"), "{default}");
    }
}
