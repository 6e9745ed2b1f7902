//! Each client's priority comes from its process's nice value, and a
//! socket's own option overrides it; `nagare stat` shows both and where
//! each comes from.

mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare_netd::Placement;
use nagare_request::{encode_addr, Op, SockOption};
use std::net::{SocketAddr, SocketAddrV4};
use support::{NetdThread, RawClient, Wire, LIMIT, NETD_ADDR};

fn at(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(NETD_ADDR, port)
}

/// This process's nice value.
fn our_nice() -> i32 {
    // SAFETY: getpriority has no memory preconditions.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

#[test]
fn a_client_has_its_nice_values_priority_and_a_socket_may_have_its_own() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let s = netd.connect();
    let nice = our_nice();
    let ours = u8::try_from(120 + nice).unwrap();
    let udp = UdpSocket::bind_via(&s, at(9800)).expect("bind");
    let listener = TcpListener::bind_via(&s, at(9801)).expect("listen");
    let stream = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9801)), LIMIT).expect("connect");
    let (_accepted, _) = listener.accept().expect("accept");

    let report = s.stat().expect("stat");
    let client = report.lines().find(|l| l.starts_with("client ")).expect("a client line");
    assert!(client.ends_with(&format!(" prio {ours} nice {nice} boosted no")), "{client}");
    assert_eq!(udp.priority().unwrap(), ours);
    assert_eq!(stream.priority().unwrap(), ours);
    assert!(report
        .lines()
        .filter(|l| l.starts_with("socket "))
        .all(|l| l.contains(&format!(" prio {ours} from nice "))));

    // Its own, on a datagram socket and a stream alike, then its
    // process's again.
    udp.set_priority(Some(100)).unwrap();
    stream.set_priority(Some(139)).unwrap();
    assert_eq!((udp.priority().unwrap(), stream.priority().unwrap()), (100, 139));
    let report = s.stat().expect("stat");
    let udp_line = report.lines().find(|l| l.starts_with("socket ") && l.contains(" udp ")).expect("the UDP line");
    assert!(udp_line.contains(" prio 100 from option "), "{udp_line}");
    assert!(report.lines().any(|l| l.starts_with("socket ") && l.contains(" prio 139 from option ")), "{report}");
    udp.set_priority(None).unwrap();
    assert_eq!(udp.priority().unwrap(), ours);
    let report = s.stat().expect("stat");
    let udp_line = report.lines().find(|l| l.starts_with("socket ") && l.contains(" udp ")).expect("the UDP line");
    assert!(udp_line.contains(&format!(" prio {ours} from nice ")), "{udp_line}");

    // Out of the scale: refused, and nothing changes.
    for bad in [99, 140] {
        let e = stream.set_priority(Some(bad)).expect_err("out of the scale");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{bad}");
    }
    assert_eq!(stream.priority().unwrap(), 139);
}

#[test]
fn a_raw_priority_out_of_the_scale_is_refused_and_a_gone_socket_is_ebadf() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let mut raw = RawClient::connect(&netd);
    let mut bind = raw.request(Op::UdpBind);
    bind.aux[0] = encode_addr(at(9810));
    let udp = raw.call(bind).result().expect("bind") as u32;
    for (value, expect) in
        [(140, Err(libc::EINVAL)), (1, Err(libc::EINVAL)), (u64::MAX, Err(libc::EINVAL)), (101, Ok(101))]
    {
        let mut r = raw.request(Op::SetOption);
        r.socket = udp;
        r.aux = [SockOption::Priority as u64, value, 0, 0];
        assert_eq!(raw.call(r).result(), expect, "priority {value}");
    }
    let mut r = raw.request(Op::GetOption);
    r.socket = udp;
    r.aux[0] = SockOption::Priority as u64;
    assert_eq!(raw.call(r).result(), Ok(101));
    let mut close = raw.request(Op::Close);
    close.socket = udp;
    raw.call(close).result().expect("close");
    let mut r = raw.request(Op::GetOption);
    r.socket = udp;
    r.aux[0] = SockOption::Priority as u64;
    assert_eq!(raw.call(r).result(), Err(libc::EBADF));
}

/// A session made for a child (as one is before a `fork`) is the child's
/// once the child says so (`PID`): netd's report names the child's pid,
/// and the child's nice value sets the session's priority. A process that
/// is not a child of the session's (netd's init, the session's own) is
/// refused.
#[test]
fn a_session_passes_to_a_child_of_its_process_that_says_so() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let mut raw = RawClient::connect(&netd);
    let nice = (our_nice() + 7).min(19);
    // A child of this process, niced (`nice` runs `sleep` in its place).
    let mut child =
        std::process::Command::new("nice").args(["-n", "7", "sleep", "30"]).spawn().expect("a child process");
    let child_pid = child.id();
    // Until `nice` has set the value and run `sleep`.
    let deadline = std::time::Instant::now() + LIMIT;
    // SAFETY: getpriority has no memory preconditions.
    while unsafe { libc::getpriority(libc::PRIO_PROCESS, child_pid) } != nice {
        assert!(std::time::Instant::now() < deadline, "the child never took its nice value");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let head = format!("client {} pid ", raw.client.id);
    let client_line =
        |report: &str| report.lines().find(|l| l.starts_with(&head)).map(str::to_owned).expect("the raw client's line");
    let before = client_line(&netd.connect().stat().expect("stat"));
    assert!(before.contains(&format!(" pid {} ", std::process::id())), "{before}");
    for stranger in [1, std::process::id()] {
        let mut claim = raw.request(Op::Pid);
        claim.aux[0] = u64::from(stranger);
        assert_eq!(raw.call(claim).result(), Err(libc::EPERM), "pid {stranger}");
    }
    let mut claim = raw.request(Op::Pid);
    claim.aux[0] = u64::from(child_pid);
    assert_eq!(raw.call(claim).result(), Ok(0));
    let after = client_line(&netd.connect().stat().expect("stat"));
    // Ended by its pid: the child is ours.
    let _ = child.kill();
    let _ = child.wait();
    assert!(after.contains(&format!(" pid {child_pid} ")), "{after}");
    assert!(after.ends_with(&format!(" prio {} nice {nice} boosted no", 120 + nice)), "{after}");
}
