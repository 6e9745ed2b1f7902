//! Each socket's readiness descriptor (`readiness_fd`) in the program's
//! own `poll(2)`, beside a kernel pipe, through a netd running in a thread
//! of the test:
//! data on one stream makes that stream's descriptor readable and no
//! other; reading it all makes it not readable; a full send buffer makes
//! it not writable until room comes back, and so does a pool with no free
//! buffer until buffers come back; a listener's is readable with a
//! connection waiting; a datagram socket's with a datagram; a connect's
//! is writable once it ends; a child made by `fork` watches its own; every
//! one is readable and writable once netd is gone.

#[path = "../../nagare-netd/tests/support/mod.rs"]
mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare_netd::Placement;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};
use support::{NetdThread, Wire, LIMIT, NETD_ADDR};

/// The number of a socket's readiness descriptor (`readiness_fd`; the
/// socket keeps it open).
macro_rules! fd_of {
    ($s:expr) => {
        $s.readiness_fd().expect("a readiness descriptor").as_raw_fd()
    };
}

fn at(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, port))
}

/// `poll(2)` over `fds`, each for `events`, waiting at most `wait`: each
/// one's `revents`.
fn poll(fds: &[RawFd], events: i16, wait: Duration) -> Vec<i16> {
    let mut p: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events, revents: 0 }).collect();
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // SAFETY: `p` holds `p.len()` valid pollfds.
        let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, left.as_millis() as libc::c_int) };
        if n >= 0 {
            return p.iter().map(|x| x.revents).collect();
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), ErrorKind::Interrupted, "poll: {e}");
    }
}

/// A kernel pipe: (read end, write end).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: room for the two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded: both are open and ours.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A stream of `client`'s to `listener`'s port, and the end `listener`
/// accepted.
fn pair(listener: &TcpListener, client: &nagare::Session, port: u16) -> (TcpStream, TcpStream) {
    let c = TcpStream::connect_timeout_via(client, &at(port), LIMIT).expect("connect");
    let (s, _) = listener.accept().expect("accept");
    (c, s)
}

/// Reads `s` without waiting until it would block; the bytes read.
fn read_all_now(s: &TcpStream) -> usize {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    for _ in 0..10_000 {
        match s.read_with(&mut buf, false) {
            Ok(0) => panic!("the stream ended"),
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return total,
            Err(e) => panic!("read: {e}"),
        }
    }
    panic!("the stream never ran dry");
}

/// Data on one of two streams of a session makes its descriptor readable
/// and leaves the other's and a pipe's as they were; reading it to
/// `WouldBlock` makes it not readable; then the other's turn.
#[test]
fn only_the_stream_with_data_is_readable() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9700").expect("listen");
    let (mut c1, a) = pair(&listener, &client, 9700);
    let (mut c2, b) = pair(&listener, &client, 9700);
    let (pipe_r, _pipe_w) = pipe();
    let fds = [fd_of!(a), fd_of!(b), pipe_r.as_raw_fd()];
    assert_ne!(fds[0], fds[1], "each socket has its own descriptor");
    assert_eq!(fd_of!(a), fds[0], "the same descriptor every time");
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0, 0], "nothing arrived yet");

    c1.write_all(b"hello").expect("write to a");
    let got = poll(&fds, libc::POLLIN, LIMIT);
    assert_eq!(got[0] & libc::POLLIN, libc::POLLIN, "a's data makes a readable: {got:?}");
    assert_eq!(got[1..], [0, 0], "and nothing else: {got:?}");
    assert_eq!(read_all_now(&a), 5);
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0, 0], "a read to WouldBlock makes a not readable");

    c2.write_all(b"world!").expect("write to b");
    let got = poll(&fds, libc::POLLIN, LIMIT);
    assert_eq!(got, [0, libc::POLLIN, 0], "b's data makes b readable, and only b");
    assert_eq!(read_all_now(&b), 6);
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0, 0]);

    // The end of the stream is readable too (a read returns 0 at once).
    drop(c1);
    let got = poll(&fds, libc::POLLIN, LIMIT);
    assert_eq!(got[0] & libc::POLLIN, libc::POLLIN, "a's end makes a readable: {got:?}");
    assert_eq!(got[1..], [0, 0], "{got:?}");
    assert_eq!((&a).read(&mut [0u8; 8]).expect("read at the end"), 0);
    assert_eq!(poll(&fds[..1], libc::POLLIN, Duration::ZERO), [libc::POLLIN], "the end stays readable");
}

/// Writing without waiting until the send buffer is full makes the
/// descriptor not writable (while it says writable, a write does not
/// block); once the peer reads, it is writable again.
#[test]
fn a_full_send_buffer_is_not_writable_until_room_returns() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9701").expect("listen");
    let (c, s) = pair(&listener, &client, 9701);
    c.set_send_buffer_size(16 << 10).expect("a small send buffer");
    let fd = [fd_of!(c)];
    assert_eq!(poll(&fd, libc::POLLOUT, Duration::ZERO), [libc::POLLOUT], "a fresh stream is writable");
    let chunk = vec![7u8; 16 << 10];
    let mut written = 0usize;
    let mut full = false;
    // The peer does not read: the send buffer, netd's and the peer's
    // receive buffers fill, and room stops coming back.
    for _ in 0..10_000 {
        loop {
            match c.write_with(&chunk, false) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
            assert!(written < 256 << 20, "the send buffer never filled");
        }
        if poll(&fd, libc::POLLOUT, Duration::from_millis(50)) == [0] {
            full = true;
            break;
        }
        // Room came back: a write must not block.
        match c.write_with(&chunk, false) {
            Ok(n) => written += n,
            Err(e) => panic!("writable, yet the write failed: {e}"),
        }
    }
    assert!(full, "the descriptor never stopped being writable");
    let reader = std::thread::spawn(move || {
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0;
        while total < written {
            match (&s).read(&mut buf) {
                Ok(0) => panic!("the stream ended after {total} of {written}"),
                Ok(n) => total += n,
                Err(e) => panic!("the peer's read after {total} of {written}: {e}"),
            }
        }
        s
    });
    let got = poll(&fd, libc::POLLOUT, LIMIT);
    assert_eq!(got, [libc::POLLOUT], "the peer read: room came back");
    c.write_with(&chunk[..1], false).expect("a write with room does not block");
    drop(reader.join().expect("the reader"));
}

/// Streams whose peers never read hold every free buffer of the
/// session's pool: a healthy stream with an empty send buffer cannot
/// queue a byte then, so its descriptor is not writable (at most one
/// write is refused before it says so) until buffers come back, and
/// writable again once they do.
#[test]
fn no_free_buffer_is_not_writable_until_buffers_return() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9708").expect("listen");
    let (hog, hog_peer) = pair(&listener, &client, 9708);
    let (healthy, _healthy_peer) = pair(&listener, &client, 9708);
    hog.set_send_buffer_size(64 << 20).expect("a send buffer larger than the pool");
    let fd = [fd_of!(healthy)];
    assert_eq!(poll(&fd, libc::POLLOUT, Duration::ZERO), [libc::POLLOUT], "a fresh stream is writable");
    let chunk = vec![7u8; 64 << 10];
    let mut written = 0usize;
    let mut starved = false;
    for _ in 0..200 {
        // The hog's peer does not read: its sends stay queued, each
        // holding a buffer of the pool, until none is free.
        loop {
            match hog.write_with(&chunk, false) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
            assert!(written < 64 << 20, "the pool never ran dry");
        }
        if poll(&fd, libc::POLLOUT, Duration::ZERO) == [0] {
            starved = true;
            break;
        }
        match healthy.write_with(b"x", false) {
            // A buffer came back meanwhile.
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                // Refused: the descriptor stops saying writable (unless a
                // buffer came back since, then the next round looks again).
                if poll(&fd, libc::POLLOUT, Duration::ZERO) == [0] {
                    starved = true;
                    break;
                }
            }
            Err(e) => panic!("write: {e}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(starved, "the descriptor kept saying writable while its writes were refused");
    assert_eq!(
        healthy.write_with(b"x", false).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "not writable: a write is refused"
    );
    let reader = std::thread::spawn(move || {
        hog_peer.set_read_timeout(Some(LIMIT)).unwrap();
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0;
        while total < written {
            match (&hog_peer).read(&mut buf) {
                Ok(0) => panic!("the stream ended after {total} of {written}"),
                Ok(n) => total += n,
                Err(e) => panic!("the peer's read after {total} of {written}: {e}"),
            }
        }
        hog_peer
    });
    let got = poll(&fd, libc::POLLOUT, LIMIT);
    assert_eq!(got, [libc::POLLOUT], "buffers came back: writable again");
    healthy.write_with(b"x", false).expect("writable: a write is taken");
    drop(reader.join().expect("the reader"));
}

/// A session forked while its watcher runs, held across the `fork`
/// (`hold_for_fork`): the parent leaves it, the child takes it, and the
/// child's socket descriptor is set by a watcher of the child's own,
/// started by its first call on the session.
#[test]
fn a_child_made_by_fork_watches_its_descriptors() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9709").expect("listen");
    let (c, mut s) = pair(&listener, &client, 9709);
    let _ = fd_of!(c);
    let hold = client.hold_for_fork().expect("held");
    // SAFETY: the child calls what the test needs and leaves by `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            hold.in_child().expect("moved here");
            // A call on the session: it starts this process's watcher.
            let fd = fd_of!(c);
            if poll(&[fd], libc::POLLIN, LIMIT) != [libc::POLLIN] {
                return false;
            }
            let mut buf = [0u8; 8];
            matches!(c.read_with(&mut buf, false), Ok(4)) && &buf[..4] == b"ping"
        }))
        .unwrap_or(false);
        // SAFETY: ends the child without running the test's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    hold.in_parent();
    s.write_all(b"ping").expect("write");
    let deadline = Instant::now() + 2 * LIMIT;
    let mut status = 0;
    loop {
        // SAFETY: waits for the child made above, without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: the child made above, by its pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: reaps it.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("the child did not end in time");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's socket: status {status:#x}");
}

/// A listener's descriptor is readable while a connection waits to be
/// taken, and not once it is taken.
#[test]
fn a_listener_is_readable_with_a_connection_waiting() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9702").expect("listen");
    listener.set_nonblocking(true).unwrap();
    let other = UdpSocket::bind_via(&server, "0.0.0.0:9703").expect("bind");
    let fds = [fd_of!(listener), fd_of!(other)];
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0], "nobody connected yet");
    let c = TcpStream::connect_timeout_via(&client, &at(9702), LIMIT).expect("connect");
    assert_eq!(poll(&fds, libc::POLLIN, LIMIT), [libc::POLLIN, 0], "a connection waits");
    let (s, peer) = listener.accept().expect("accept without waiting");
    assert_eq!(peer, c.local_addr().unwrap());
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0], "taken: none waits");
    assert!(matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
    drop((s, c));
}

/// A datagram socket's descriptor is writable, readable with a datagram
/// waiting and not once it is read.
#[test]
fn a_datagram_socket_is_readable_with_a_datagram_waiting() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (one, two) = (netd.connect(), netd.connect());
    let u = UdpSocket::bind_via(&one, "0.0.0.0:9704").expect("bind");
    let v = UdpSocket::bind_via(&two, "0.0.0.0:9705").expect("bind");
    let fds = [fd_of!(u), fd_of!(v)];
    assert_eq!(poll(&fds, libc::POLLIN | libc::POLLOUT, Duration::ZERO), [libc::POLLOUT, libc::POLLOUT]);
    v.send_to(b"ping", at(9704)).expect("send");
    let got = poll(&fds[..1], libc::POLLIN, LIMIT);
    assert_eq!(got, [libc::POLLIN], "a datagram waits");
    let mut buf = [0u8; 64];
    let (n, _, _) = u.recv_from_with(&mut buf, false).expect("recv");
    assert_eq!(&buf[..n], b"ping");
    assert!(matches!(u.recv_from_with(&mut buf, false), Err(e) if e.kind() == ErrorKind::WouldBlock));
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0], "read: nothing waits");
}

/// A connect under way (`Connecting`) lends a descriptor that becomes
/// writable once the connection is made (and readable too when it
/// failed), as a non-blocking kernel socket's does.
#[test]
fn a_connect_is_writable_once_it_ends() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9707").expect("listen");
    let mut made = TcpStream::connect_start_via(&client, at(9707)).expect("start");
    let mut refused = TcpStream::connect_start_via(&client, at(9708)).expect("start");
    let both = libc::POLLIN | libc::POLLOUT;
    let deadline = Instant::now() + LIMIT;
    let fds = [fd_of!(made), fd_of!(refused)];
    // The two directions of one descriptor are set one after the other:
    // wait for both.
    let got = loop {
        let got = poll(&fds, both, LIMIT);
        if got[0] != 0 && got[1] == both {
            break got;
        }
        assert!(Instant::now() < deadline, "the connects did not end: {got:?}");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(got, [libc::POLLOUT, both], "made: writable; refused: readable and writable");
    let s = made.try_finish().expect("made").expect("answered");
    let (peer, _) = listener.accept().expect("accept");
    assert_eq!(peer.peer_addr().unwrap(), s.local_addr().unwrap());
    let Err(e) = refused.try_finish() else { panic!("the connect to nobody was made") };
    assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
}

/// A socket shared with another process has its readiness in netd, not
/// here: it lends no descriptor (`Unsupported`), neither from the share
/// on nor adopted by another session; one lent before the share says
/// readable and writable from the share on (a call learns the rest),
/// never a readiness that may be stale.
#[test]
fn a_shared_socket_lends_no_descriptor() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9710").expect("listen");
    let (_c, s) = pair(&listener, &client, 9710);
    let both = libc::POLLIN | libc::POLLOUT;
    let lent = fd_of!(s);
    assert_eq!(poll(&[lent], both, Duration::ZERO), [libc::POLLOUT], "nothing arrived");
    let token = s.share().expect("share");
    assert_eq!(poll(&[lent], both, Duration::ZERO), [both], "shared: both");
    let e = s.readiness_fd().expect_err("shared: no descriptor");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let other = netd.connect();
    let adopted = TcpStream::adopt_via(&other, token).expect("adopt");
    let e = adopted.readiness_fd().expect_err("adopted: no descriptor");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
}

/// An outside loop (`prepare_wait`, a sleep on the session's eventfd,
/// `finish_wait`) on a session whose sockets lent descriptors sleeps
/// while nothing arrives: its `finish_wait` does not wake the watcher
/// into waking the loop again, and a datagram still wakes both. A wake-up
/// that feeds itself would wake every turn; one late completion of the
/// set-up (on a loaded machine it can come after the first turns) wakes
/// one, so the turns after a few to settle may wake once, never more.
#[test]
fn an_outside_loop_beside_descriptors_sleeps_while_nothing_arrives() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (one, two) = (netd.connect(), netd.connect());
    let u = UdpSocket::bind_via(&one, "0.0.0.0:9710").expect("bind");
    let v = UdpSocket::bind_via(&two, "0.0.0.0:9711").expect("bind");
    let mine = fd_of!(u);
    let mut woken = 0;
    for turn in 0..13 {
        if let Some(fd) = one.prepare_wait().expect("prepare") {
            let woke = poll(&[fd], libc::POLLIN, Duration::from_millis(20)) != [0];
            woken += usize::from(woke && turn >= 3);
        }
        one.finish_wait().expect("finish");
    }
    assert!(woken <= 1, "the loop woke {woken} times of 10 with nothing arriving");
    let fd = loop {
        if let Some(fd) = one.prepare_wait().expect("prepare") {
            break fd;
        }
        one.finish_wait().expect("finish");
    };
    v.send_to(b"ping", at(9710)).expect("send");
    assert_eq!(poll(&[fd], libc::POLLIN, LIMIT), [libc::POLLIN], "a datagram wakes the loop");
    one.finish_wait().expect("finish");
    assert_eq!(poll(&[mine], libc::POLLIN, LIMIT), [libc::POLLIN], "and makes the socket's descriptor readable");
}

/// Once netd is gone, every descriptor is readable and writable, and a
/// call fails at once.
#[test]
fn every_descriptor_is_ready_once_netd_is_gone() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, "0.0.0.0:9706").expect("listen");
    let (c, s) = pair(&listener, &client, 9706);
    let fds = [fd_of!(listener), fd_of!(s), fd_of!(c)];
    assert_eq!(poll(&fds, libc::POLLIN, Duration::ZERO), [0, 0, 0]);
    drop(netd);
    let both = libc::POLLIN | libc::POLLOUT;
    let deadline = Instant::now() + LIMIT;
    loop {
        let got = poll(&fds, both, LIMIT);
        if got.iter().all(|&r| r & both == both) {
            break;
        }
        assert!(Instant::now() < deadline, "not every descriptor is ready: {got:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let e = s.read_with(&mut [0u8; 8], false).expect_err("netd is gone");
    assert_ne!(e.kind(), ErrorKind::WouldBlock, "{e}");
}

/// A session names every descriptor it keeps open (`Session::descriptors`,
/// what a preload library spares when its program closes a range): all
/// of them open and distinct, and a readiness descriptor among them once
/// one is lent, with the watcher's own.
#[test]
fn a_session_names_every_descriptor_it_keeps_open() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let session = netd.connect();
    let before = session.descriptors();
    let open = |fds: &[RawFd]| {
        // SAFETY: a flag query on a number; no memory passed.
        fds.iter().all(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
    };
    let distinct = |fds: &[RawFd]| {
        let mut sorted = fds.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.len() == fds.len()
    };
    // The rendezvous socket, the region, two eventfds and three copies.
    assert_eq!(before.len(), 7, "{before:?}");
    assert!(open(&before) && distinct(&before), "{before:?}");
    let socket = UdpSocket::bind_via(&session, at(9870)).expect("bind");
    let lent = fd_of!(socket);
    let after = session.descriptors();
    assert!(after.contains(&lent), "{lent} not in {after:?}");
    assert!(before.iter().all(|fd| after.contains(fd)), "{before:?} then {after:?}");
    // Its two ends and the watcher's four.
    assert_eq!(after.len(), before.len() + 6, "{after:?}");
    assert!(open(&after) && distinct(&after), "{after:?}");
}
