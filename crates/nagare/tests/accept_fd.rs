//! An accept that lends the stream's readiness descriptor
//! (`TcpListener::accept_with_readiness_fd`) makes it before it takes the
//! connection: with no descriptor left to make, the accept fails and the
//! connection stays queued, unharmed, for the next accept. A test file of
//! its own: it lowers the process's descriptor limit for a moment.

#[path = "../../nagare-netd/tests/support/mod.rs"]
mod support;

use nagare::net::{TcpListener, TcpStream};
use nagare_netd::Placement;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use support::{NetdThread, Wire, LIMIT, NETD_ADDR};

/// Takes every free descriptor number below a limit lowered to just
/// above the highest in use: the descriptors taken, and the limit as it
/// was.
fn use_up_descriptors() -> (Vec<OwnedFd>, libc::rlimit) {
    let mut was = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid rlimit to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut was) }, 0);
    let probe = std::fs::File::open("/dev/null").expect("a descriptor");
    let low = libc::rlimit { rlim_cur: probe.as_raw_fd() as libc::rlim_t + 1, rlim_max: was.rlim_max };
    drop(probe);
    // SAFETY: a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
    let mut taken = Vec::new();
    for _ in 0..low.rlim_cur {
        // SAFETY: duplicates standard input's number; -1 when none is left.
        let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            break;
        }
        // SAFETY: just made, ours alone.
        taken.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    (taken, was)
}

#[test]
fn an_accept_without_a_descriptor_leaves_the_connection_queued() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9720").expect("listen");
    // The session's watcher runs already: only the stream's descriptor
    // is left to make.
    let _ = listener.readiness_fd().expect("the listener's descriptor");
    let at = SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, 9720));
    let mut c = TcpStream::connect_timeout_via(&client, &at, LIMIT).expect("connect");
    c.write_all(b"kept").expect("write");
    let (taken, was) = use_up_descriptors();
    let refused = listener.accept_with_readiness_fd();
    drop(taken);
    // SAFETY: a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &was) }, 0);
    assert!(refused.is_err(), "no descriptor left: the accept fails");
    listener.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + LIMIT;
    let (s, _, fd) = loop {
        match listener.accept_with_readiness_fd() {
            Ok(got) => break got,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the connection is not queued any more: {e}"),
        }
    };
    assert!(fd.as_raw_fd() >= 0);
    s.set_read_timeout(Some(LIMIT)).expect("timeout");
    let mut buf = [0u8; 4];
    (&s).read_exact(&mut buf).expect("the data written before");
    assert_eq!(&buf, b"kept");
    (&s).write_all(b"back").expect("write back");
    c.set_read_timeout(Some(LIMIT)).expect("timeout");
    c.read_exact(&mut buf).expect("the peer was not reset");
    assert_eq!(&buf, b"back");
}
