//! ICMP errors through netd to UDP sockets, as Linux reports them to a
//! socket without `IP_RECVERR`: the peer's port unreachable (ICMP or
//! ICMPv6) fails a connected socket's next receive, or its next send,
//! once, and `take_error` (`SO_ERROR`) takes it too; an unconnected
//! socket, or one connected to another peer, hears of none. The receive
//! fails with it before datagrams that arrived earlier and wait to be
//! read, as Linux reports `sk_err` before the queue; they come after.
//! `FIONREAD` says the next datagram's length and leaves the error.

mod support;

use nagare::net::UdpSocket;
use nagare::Session;
use nagare_netd::Placement;
use std::io::ErrorKind;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::{Duration, Instant};
use support::{stat_value, wait_for_report, NetdThread, Tune, Wire, ECHO_PORT, LIMIT, PEER_ADDR, PEER_ADDR6};

/// How long a receive waits for what must not come.
const QUIET: Duration = Duration::from_millis(300);

/// A port the peer has no socket on.
const CLOSED: u16 = 9;

fn start(placement: Placement) -> NetdThread {
    NetdThread::start_tuned(placement, Wire::PeerLink, Tune { ipv6: true, ..Tune::default() }, |_| {})
}

fn six(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

/// What a receive that waited `QUIET` for nothing gives.
fn nothing_for(s: &UdpSocket) -> ErrorKind {
    s.set_read_timeout(Some(QUIET)).unwrap();
    s.recv_from(&mut [0u8; 64]).map(|_| ()).expect_err("nothing came").kind()
}

/// The sockets and closed peers of the cases: IPv4, IPv6, and a
/// dual-stack socket's IPv4-mapped peer.
fn cases() -> [(&'static str, SocketAddr); 3] {
    let four = SocketAddrV4::new(PEER_ADDR, CLOSED);
    [
        ("0.0.0.0:0", SocketAddr::V4(four)),
        ("[::]:0", six(PEER_ADDR6, CLOSED)),
        ("[::]:0", six(PEER_ADDR.to_ipv6_mapped(), CLOSED)),
    ]
}

/// Runs `check` in both placements for each of [`cases`], on a client of
/// a netd started for the placement, with the case's index `k`, its bind
/// address and closed peer, and a name for messages.
fn each_case(mut check: impl FnMut(&Session, usize, &str, SocketAddr, &str)) {
    for placement in [Placement::Inline, Placement::Single] {
        let netd = start(placement);
        let client = netd.connect();
        for (k, (bind, closed)) in cases().into_iter().enumerate() {
            check(&client, k, bind, closed, &format!("{placement:?}, {bind} to {closed}"));
        }
        drop(client);
        netd.stop();
    }
}

/// The echoing peer at the closed peer's address.
fn echo_of(closed: SocketAddr) -> SocketAddr {
    let mut echo = closed;
    echo.set_port(ECHO_PORT);
    echo
}

#[test]
fn a_connected_socket_hears_of_its_peer_s_closed_port_once() {
    each_case(|client, k, bind, closed, what| {
        let s = UdpSocket::bind_via(client, bind).unwrap();
        s.connect(closed).unwrap();
        assert_eq!(s.peer_addr().unwrap(), closed, "{what}");
        // The next receive fails with it, and only that one.
        s.send(b"anyone?").unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let e = s.recv(&mut [0u8; 64]).expect_err("the port unreachable fails the receive");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{what}: {e}");
        assert_eq!(nothing_for(&s), ErrorKind::WouldBlock, "{what}: reported once");
        // Or the next send, once netd has it.
        let reported = 3 * k as u64 + 2;
        s.send(b"anyone?").unwrap();
        wait_for_report(client, "the second error", |r| stat_value(r, "netd udp_errors_reported") == Some(reported));
        let e = send_until_refused(&s, what);
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{what}: {e}");
        assert!(s.take_error().unwrap().is_none(), "{what}: reported once");
        // Or `take_error`, as `SO_ERROR`.
        s.send(b"anyone?").unwrap();
        let deadline = Instant::now() + LIMIT;
        let e = loop {
            if let Some(e) = s.take_error().unwrap() {
                break e;
            }
            assert!(Instant::now() < deadline, "{what}: no error for SO_ERROR");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{what}: {e}");
        assert!(s.take_error().unwrap().is_none(), "{what}: reported once");
    });
}

#[test]
fn the_error_comes_before_datagrams_already_delivered() {
    each_case(|client, k, bind, closed, what| {
        let echo = echo_of(closed);
        let s = UdpSocket::bind_via(client, bind).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        // Two datagrams from the echoing peer: the first read, the
        // second waiting in the client's region once a peek sees it.
        s.send_to(b"one", echo).unwrap();
        s.send_to(b"two", echo).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = s.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"one"[..], echo), "{what}");
        let (n, _, from) = s.peek_from_with(&mut buf, true).unwrap();
        assert_eq!((&buf[..n], from), (&b"two"[..], echo), "{what}");
        // Connected to the closed port: its error reaches the client
        // while "two" waits.
        s.connect(closed).unwrap();
        s.send(b"anyone?").unwrap();
        wait_for_report(client, "the error reported", |r| {
            stat_value(r, "netd udp_errors_reported") == Some(k as u64 + 1)
        });
        let e = s.recv_from(&mut buf).expect_err("the error first");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{what}: {e}");
        let (n, from) = s.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"two"[..], echo), "{what}: the datagram after");
        assert!(s.take_error().unwrap().is_none(), "{what}: reported once");
        assert_eq!(nothing_for(&s), ErrorKind::WouldBlock, "{what}");
    });
}

#[test]
fn the_next_datagram_s_length_leaves_the_error_for_the_receive() {
    each_case(|client, k, bind, closed, what| {
        let echo = echo_of(closed);
        let s = UdpSocket::bind_via(client, bind).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        s.send_to(b"twelve bytes", echo).unwrap();
        let mut buf = [0u8; 64];
        let (n, _, _) = s.peek_from_with(&mut buf, true).unwrap();
        assert_eq!(n, 12, "{what}");
        s.connect(closed).unwrap();
        s.send(b"anyone?").unwrap();
        wait_for_report(client, "the error reported", |r| {
            stat_value(r, "netd udp_errors_reported") == Some(k as u64 + 1)
        });
        // `FIONREAD` says the datagram's length, as Linux's `SIOCINQ`,
        // and leaves the error to the receive, which takes it first.
        assert_eq!(s.next_datagram_len().unwrap(), 12, "{what}");
        assert_eq!(s.next_datagram_len().unwrap(), 12, "{what}: asked again");
        let e = s.recv_from(&mut buf).expect_err("the error first");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{what}: {e}");
        let (n, from) = s.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"twelve bytes"[..], echo), "{what}: the datagram after");
        assert_eq!(s.next_datagram_len().unwrap(), 0, "{what}: none left");
        assert!(s.take_error().unwrap().is_none(), "{what}: reported once");
    });
}

/// Sends to `s`'s peer until a send fails: the error netd reported
/// reaches the client's path with a completion, which a send takes
/// first. The sends before are queued only; each may bring back an
/// error of its own, as the first did.
fn send_until_refused(s: &UdpSocket, what: &str) -> std::io::Error {
    for _ in 0..1000 {
        if let Err(e) = s.send(b"x") {
            return e;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("{what}: no send failed");
}

#[test]
fn an_unconnected_socket_and_one_connected_elsewhere_hear_of_nothing() {
    let netd = start(Placement::Inline);
    let client = netd.connect();
    for (bind, closed) in cases() {
        let s = UdpSocket::bind_via(&client, bind).unwrap();
        s.send_to(b"anyone?", closed).unwrap();
        assert_eq!(nothing_for(&s), ErrorKind::WouldBlock, "{bind} to {closed}");
        assert!(s.take_error().unwrap().is_none());
        // Connected to another port: the error about this one is not its.
        let mut elsewhere = closed;
        elsewhere.set_port(CLOSED + 1);
        s.connect(elsewhere).unwrap();
        s.send_to(b"anyone?", closed).unwrap();
        assert_eq!(nothing_for(&s), ErrorKind::WouldBlock, "{bind} to {closed}");
        assert!(s.take_error().unwrap().is_none());
        // An error kept while unconnected is not reported once connected.
        s.disconnect().unwrap();
        assert!(s.peer_addr().is_err());
        s.send_to(b"anyone?", closed).unwrap();
        std::thread::sleep(QUIET);
        s.connect(closed).unwrap();
        assert_eq!(nothing_for(&s), ErrorKind::WouldBlock, "{bind} to {closed}");
    }
    let report = client.stat().unwrap();
    assert_eq!(stat_value(&report, "netd udp_errors_reported"), Some(0), "{report}");
    drop(client);
    netd.stop();
}

#[test]
fn a_peer_of_the_other_family_is_refused_as_linux_does() {
    let netd = start(Placement::Inline);
    let client = netd.connect();
    let four = UdpSocket::bind_via(&client, "0.0.0.0:0").unwrap();
    let e = four.connect(six(PEER_ADDR6, CLOSED)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EAFNOSUPPORT), "{e}");
    let only6 = UdpSocket::bind_v6_only_via(&client, SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0)).unwrap();
    let e = only6.connect(SocketAddrV4::new(PEER_ADDR, CLOSED)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH), "{e}");
    assert!(only6.peer_addr().is_err());
    drop((four, only6, client));
    netd.stop();
}

/// A connected socket with the peer's port unreachable waiting in netd
/// reads as readable to a `POLL`, as Linux's `poll` says `POLLERR` and
/// wakes a reader: a socket whose reads ask netd (shared, or past its
/// pool's receives) learns of the error there. The read that takes it
/// leaves the socket not readable.
#[test]
fn a_poll_finds_a_connected_socket_with_an_error_waiting_readable() {
    use nagare_netd::{encode_addr, Op};
    use nagare_request::{encode_addr6, PollEntry, NONBLOCK, READABLE};
    let netd = start(Placement::Inline);
    let mut raw = support::RawClient::connect(&netd);
    let mut bind = raw.request(Op::UdpBind);
    bind.aux[0] = encode_addr(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0));
    let udp = raw.call(bind).result().expect("bind") as u32;
    let closed = SocketAddrV4::new(PEER_ADDR, CLOSED);
    let mut connect = raw.request(Op::UdpConnect);
    connect.socket = udp;
    connect.aux[..3].copy_from_slice(&encode_addr6(SocketAddrV6::new(closed.ip().to_ipv6_mapped(), CLOSED, 0, 0)));
    assert_eq!(raw.call(connect).result(), Ok(0));
    let ready = |raw: &mut support::RawClient| {
        let mut poll = raw.request(Op::Poll);
        poll.flags = NONBLOCK;
        let entry = PollEntry { socket: udp, interest: READABLE, ready: 0 };
        poll.piece = Some(raw.give(&entry.to_bytes(), PollEntry::SIZE as u32));
        let (c, bytes) = raw.call_raw(poll.encode());
        assert!(c.result().is_ok(), "{c:?}");
        let answered: [u8; PollEntry::SIZE] = bytes[..PollEntry::SIZE].try_into().expect("an entry");
        PollEntry::from_bytes(answered).ready
    };
    assert_eq!(ready(&mut raw) & READABLE, 0, "nothing waits yet");
    let mut send = raw.request(Op::SendTo);
    send.socket = udp;
    send.aux[0] = encode_addr(closed);
    send.piece = Some(raw.give(b"to a closed port", 16));
    assert_eq!(raw.call(send).result(), Ok(16));
    let deadline = Instant::now() + LIMIT;
    while ready(&mut raw) & READABLE == 0 {
        assert!(Instant::now() < deadline, "the port unreachable never made the socket readable");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut recv = raw.request(Op::RecvFrom);
    recv.socket = udp;
    recv.piece = Some(raw.give(&[], 512));
    assert_eq!(raw.call(recv).result(), Err(libc::ECONNREFUSED), "the error a read takes");
    assert_eq!(ready(&mut raw) & READABLE, 0, "taken");
}
