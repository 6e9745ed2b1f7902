//! TCP over IPv6 through netd: a client connects to the peer's IPv6
//! address and its stream carries bytes both ways with IPv6 addresses at
//! both ends; a listener on `[::]` holds its port for IPv4 too and reports
//! an IPv4 peer as IPv4-mapped, while a v6-only one leaves the IPv4 port
//! free; UDP over IPv6 echoes with the peer, a socket on `[::]` takes
//! IPv4 datagrams from IPv4-mapped senders and answers them, a v6-only one
//! leaves the IPv4 port free; two clients exchange datagrams and a
//! stream over IPv6 by netd's address and by `::1`; a UDP socket and a
//! listener bound to an IPv4-mapped address are IPv4 ones, as on Linux;
//! a ping socket pings
//! the peer over ICMPv6 and ICMP alike; and the requests that carry IPv6
//! addresses, and `NAME`, are checked like every other.

mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare_netd::{Op, Placement};
use nagare_request::{decode_sender, encode_addr6, ADDR_ELSEWHERE, NAME_LOCAL, NAME_PEER, SENDER6, V6_ONLY};
use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use support::{
    stat_value, NetdThread, RawClient, Tune, Wire, ECHO_PORT, LIMIT, NETD_ADDR, NETD_ADDR6, PEER_ADDR, PEER_ADDR6,
};

const PLACEMENTS: [Placement; 2] = [Placement::Inline, Placement::Single];

/// netd with IPv6 on its link and the peer's.
fn start(placement: Placement) -> NetdThread {
    NetdThread::start_tuned(placement, Wire::PeerLink, Tune { ipv6: true, ..Tune::default() }, |_| {})
}

fn six(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

#[test]
fn a_stream_to_an_ipv6_peer_echoes_with_ipv6_addresses_at_both_ends() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let client = netd.connect();
        let peer = six(PEER_ADDR6, ECHO_PORT);
        let mut s = TcpStream::connect_timeout_via(&client, &peer, LIMIT).expect("connect over IPv6");
        assert_eq!(s.peer_addr().unwrap(), peer, "{placement:?}");
        let local = s.local_addr().unwrap();
        assert_eq!(local.ip(), NETD_ADDR6, "{placement:?}: {local}");
        assert_ne!(local.port(), 0);
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        s.write_all(&data).expect("write");
        let mut back = vec![0u8; data.len()];
        s.read_exact(&mut back).expect("the echo comes back");
        assert!(back == data, "other bytes came back ({placement:?})");
        let report = client.stat().expect("stat");
        assert!(report.contains(&format!("remote [{PEER_ADDR6}]:{ECHO_PORT}")), "{report}");
        drop((s, client));
        netd.stop();
    }
}

#[test]
fn a_non_blocking_connect_over_ipv6_finishes_with_its_addresses() {
    let netd = start(Placement::Inline);
    let client = netd.connect();
    let peer = six(PEER_ADDR6, ECHO_PORT);
    let mut pending = TcpStream::connect_start_via(&client, peer).expect("connect started");
    let deadline = std::time::Instant::now() + LIMIT;
    let s = loop {
        if let Some(s) = pending.try_finish().expect("connected") {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "no answer");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(s.peer_addr().unwrap(), peer);
    assert_eq!(s.local_addr().unwrap().ip(), NETD_ADDR6);
}

#[test]
fn a_listener_on_any_ipv6_address_takes_ipv4_too_and_a_v6_only_one_does_not() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let (server_side, client_side) = (netd.connect(), netd.connect());
        let any6 = six(Ipv6Addr::UNSPECIFIED, 9600);
        let dual = TcpListener::bind_via(&server_side, any6).expect("listen on [::]");
        assert_eq!(dual.local_addr().unwrap(), any6);
        let taken = TcpListener::bind_via(&server_side, "0.0.0.0:9600").err().expect("the port is taken");
        assert_eq!(taken.raw_os_error(), Some(libc::EADDRINUSE), "{taken}");

        // An IPv4 connection (delivered locally) to the dual-stack
        // listener: its ends are IPv4-mapped on the listener's side.
        let to = SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, 9600));
        let mut c = TcpStream::connect_timeout_via(&client_side, &to, LIMIT).expect("connect over IPv4");
        let (mut s, peer) = dual.accept().expect("accept");
        let mapped = |a: SocketAddr| match a {
            SocketAddr::V4(a) => six(a.ip().to_ipv6_mapped(), a.port()),
            other => other,
        };
        assert_eq!(peer, mapped(c.local_addr().unwrap()), "{placement:?}");
        assert_eq!(s.local_addr().unwrap(), mapped(to), "{placement:?}");
        assert!(c.local_addr().unwrap().is_ipv4(), "the IPv4 client's own ends stay IPv4");
        c.write_all(b"four to six").unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut got = [0u8; 11];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"four to six");
        drop((c, s, dual));

        let only6 =
            TcpListener::listen_v6_only_via(&server_side, SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 9601, 0, 0), 8)
                .expect("a v6-only listener");
        let four = TcpListener::bind_via(&server_side, "0.0.0.0:9601").expect("the IPv4 port stays free");
        drop((only6, four, server_side, client_side));
        netd.stop();
    }
}

#[test]
fn ipv6_requests_and_names_are_checked() {
    let netd = start(Placement::Inline);
    let mut raw = RawClient::connect(&netd);

    // A listener made by hand, then its name, and a peer it has not.
    let [hi, lo, port] = encode_addr6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 9700, 0, 0));
    let mut listen = raw.request(Op::Listen6);
    listen.aux = [hi, lo, port | V6_ONLY, 4];
    let done = raw.call(listen);
    assert_eq!(done.status, 0, "{done:?}");
    let id = done.aux[0] as u32;
    let mut name = raw.request(Op::Name);
    name.socket = id;
    name.aux[0] = NAME_LOCAL;
    let named = raw.call(name);
    assert_eq!(named.status, 0);
    assert_eq!([named.aux[0], named.aux[1], named.aux[2]], [hi, lo, 9700]);
    name.id += 100;
    name.aux[0] = NAME_PEER;
    assert_eq!(raw.call(name).status, -libc::ENOTCONN);
    name.id += 100;
    name.socket = id + 50;
    assert_eq!(raw.call(name).status, -libc::EBADF, "no such socket");

    // Arguments out of range, refused before netd acts on them.
    let mut bad = raw.request(Op::Listen6);
    bad.aux = [hi, lo, port | 1 << 20, 4];
    assert_eq!(raw.call(bad).status, -libc::EINVAL);
    let mut connect = raw.request(Op::Connect6);
    let [phi, plo, _] = encode_addr6(SocketAddrV6::new(PEER_ADDR6, ECHO_PORT, 0, 0));
    connect.aux = [phi, plo, 0, 0];
    assert_eq!(raw.call(connect).status, -libc::EINVAL, "no port");
    // IPv6 to our own address is delivered here: the listener above
    // takes it.
    let [ohi, olo, oport] = encode_addr6(SocketAddrV6::new(NETD_ADDR6, 9700, 0, 0));
    let mut own = raw.request(Op::Connect6);
    own.aux = [ohi, olo, oport, 0];
    assert_eq!(raw.call(own).status, 0);
    // An IPv4-mapped destination is its IPv4 address: the listener above
    // is v6-only, so nothing listens on IPv4 port 9700.
    let [mhi, mlo, mport] = encode_addr6(SocketAddrV6::new(NETD_ADDR.to_ipv6_mapped(), 9700, 0, 0));
    let mut mapped = raw.request(Op::Connect6);
    mapped.aux = [mhi, mlo, mport, 0];
    assert_eq!(raw.call(mapped).status, -libc::ECONNREFUSED);
    assert!(netd.running());
}

/// `(v4 or v6 address, port)` as a socket of IPv6 reports it.
fn mapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(a) => six(a.ip().to_ipv6_mapped(), a.port()),
        other => other,
    }
}

/// The next datagram on `s` within the test's limit: its bytes and sender.
fn next_datagram(s: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut buf = vec![0u8; 70_000];
    let (n, from) = s.recv_from(&mut buf).expect("a datagram within the limit");
    buf.truncate(n);
    (buf, from)
}

#[test]
fn udp_over_ipv6_echoes_with_the_peer_one_datagram_and_a_burst() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let client = netd.connect();
        let s = UdpSocket::bind_via(&client, "[::]:0").expect("bind [::]:0");
        let local = s.local_addr().unwrap();
        assert!(local.is_ipv6() && local.ip().is_unspecified() && local.port() != 0, "{local}");
        let peer = six(PEER_ADDR6, ECHO_PORT);
        // One small datagram, one past the link's MTU (fragments both
        // ways), then a burst the receive path packs several to a buffer.
        let big: Vec<u8> = (0..4000u32).map(|i| (i % 253) as u8).collect();
        for data in [b"over six".to_vec(), big] {
            assert_eq!(s.send_to(&data, peer).unwrap(), data.len());
            let (back, from) = next_datagram(&s);
            assert_eq!(from, peer, "{placement:?}");
            assert!(back == data, "{placement:?}: {} bytes came back for {}", back.len(), data.len());
        }
        let burst: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
        for d in &burst {
            s.send_to(d, peer).unwrap();
        }
        for d in &burst {
            let (back, from) = next_datagram(&s);
            assert_eq!((back.len(), back.first(), from), (d.len(), d.first(), peer), "{placement:?}");
        }
        let report = client.stat().expect("stat");
        assert!(report.contains(&format!("local [::]:{}", local.port())), "{report}");
        drop((s, client));
        netd.stop();
    }
}

#[test]
fn a_udp_socket_on_any_ipv6_address_takes_ipv4_from_mapped_senders_and_a_v6_only_one_does_not() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let (a, b) = (netd.connect(), netd.connect());
        let any6 = six(Ipv6Addr::UNSPECIFIED, 9610);
        let dual = UdpSocket::bind_via(&a, any6).expect("bind [::]:9610");
        assert_eq!(dual.local_addr().unwrap(), any6);
        let taken = UdpSocket::bind_via(&b, "0.0.0.0:9610").err().expect("the IPv4 port is taken");
        assert_eq!(taken.raw_os_error(), Some(libc::EADDRINUSE), "{taken}");

        // Another client's IPv4 socket (delivered locally) and back.
        let four = UdpSocket::bind_via(&b, "0.0.0.0:0").unwrap();
        let four_at = SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, four.local_addr().unwrap().port()));
        four.send_to(b"four to six", SocketAddrV4::new(NETD_ADDR, 9610)).unwrap();
        let (got, from) = next_datagram(&dual);
        assert_eq!((got.as_slice(), from), (&b"four to six"[..], mapped(four_at)), "{placement:?}");
        dual.send_to(b"six to four", from).unwrap();
        let (got, from) = next_datagram(&four);
        assert_eq!((got.as_slice(), from), (&b"six to four"[..], SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, 9610))));

        // Over IPv4 on the link, to a mapped address and an IPv4 one.
        let peer4 = SocketAddr::V4(SocketAddrV4::new(PEER_ADDR, ECHO_PORT));
        for to in [mapped(peer4), peer4] {
            dual.send_to(b"mapped out", to).unwrap();
            let (got, from) = next_datagram(&dual);
            assert_eq!((got.as_slice(), from), (&b"mapped out"[..], mapped(peer4)), "{placement:?} {to}");
        }
        // And IPv6 on the same socket.
        dual.send_to(b"six", six(PEER_ADDR6, ECHO_PORT)).unwrap();
        assert_eq!(next_datagram(&dual), (b"six".to_vec(), six(PEER_ADDR6, ECHO_PORT)));
        drop((dual, four));
        UdpSocket::bind_via(&b, "0.0.0.0:9610").expect("closed, the dual-stack socket frees the IPv4 port");

        let only6 = UdpSocket::bind_v6_only_via(&a, SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 9611, 0, 0))
            .expect("a v6-only socket");
        let four = UdpSocket::bind_via(&b, "0.0.0.0:9611").expect("the IPv4 port stays free");
        // The send is queued; netd's refusal is the socket's error next.
        only6.send_to(b"x", mapped(peer4)).expect("queued");
        let deadline = std::time::Instant::now() + LIMIT;
        let refused = loop {
            if let Some(e) = only6.take_error().unwrap() {
                break e;
            }
            assert!(std::time::Instant::now() < deadline, "no error for an IPv4 send from a v6-only socket");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(refused.raw_os_error(), Some(libc::ENETUNREACH), "{refused}");
        let v4_to_v6 = four.send_to(b"x", six(PEER_ADDR6, ECHO_PORT)).expect_err("no IPv6 from an IPv4 socket");
        assert_eq!(v4_to_v6.raw_os_error(), Some(libc::EAFNOSUPPORT), "{v4_to_v6}");
        drop((only6, four, a, b));
        netd.stop();
    }
}

#[test]
fn ipv6_datagram_requests_are_checked_and_completions_carry_ipv6_senders() {
    let netd = start(Placement::Inline);
    let mut raw = RawClient::connect(&netd);
    let [hi, lo, port] = encode_addr6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 9620, 0, 0));
    let mut bind = raw.request(Op::UdpBind6);
    bind.aux = [hi, lo, port, 0];
    let done = raw.call(bind);
    assert_eq!((done.status, done.aux[1]), (0, ADDR_ELSEWHERE), "{done:?}");
    let id = done.aux[0] as u32;
    let mut name = raw.request(Op::Name);
    name.socket = id;
    let named = raw.call(name);
    assert_eq!([named.aux[0], named.aux[1], named.aux[2]], [hi, lo, 9620]);

    // A send to the peer, and its echo's completion: the sender in three
    // words.
    let [phi, plo, pport] = encode_addr6(SocketAddrV6::new(PEER_ADDR6, ECHO_PORT, 0, 0));
    let mut send = raw.request(Op::SendTo6);
    send.socket = id;
    send.piece = Some(raw.give(b"raw six", 7));
    send.aux = [phi, plo, pport, 0];
    assert_eq!(raw.call(send).status, 0);
    let mut recv = raw.request(Op::RecvFrom);
    recv.socket = id;
    recv.piece = Some(raw.give(&[], 64));
    recv.aux[3] = 5_000_000;
    let got = raw.call(recv);
    assert_eq!((got.status, got.aux[0]), (0, 7), "{got:?}");
    assert_eq!(got.aux[1], SENDER6 | u64::from(ECHO_PORT));
    assert_eq!(decode_sender([got.aux[1], got.aux[2], got.aux[3]]), Ok(six(PEER_ADDR6, ECHO_PORT)));

    // Out of range: a flag in a port's word, a port past 16 bits, the
    // IPv4 trace flag, an unused word.
    for (op, aux, flags) in [
        (Op::UdpBind6, [hi, lo, port | 1 << 20, 0], 0),
        (Op::UdpBind6, [hi, lo, port, 1], 0),
        (Op::SendTo6, [phi, plo, 1 << 16, 0], 0),
        (Op::SendTo6, [phi, plo, pport, 7], 0),
        (Op::SendTo6, [phi, plo, pport, 0], nagare_request::TRACE),
    ] {
        let mut r = raw.request(op);
        r.aux = aux;
        r.flags = flags;
        if op == Op::SendTo6 {
            r.socket = id;
            r.piece = Some(raw.give(b"x", 1));
        }
        let c = raw.call(r);
        assert_eq!(c.status, -libc::EINVAL, "{op:?} {aux:x?} {flags}");
    }
    // An address not netd's, and an IPv6 send from an IPv4 socket.
    let [nhi, nlo, nport] = encode_addr6(SocketAddrV6::new(PEER_ADDR6, 9621, 0, 0));
    let mut foreign = raw.request(Op::UdpBind6);
    foreign.aux = [nhi, nlo, nport, 0];
    assert_eq!(raw.call(foreign).status, -libc::EADDRNOTAVAIL);
    let mut bind4 = raw.request(Op::UdpBind);
    bind4.aux[0] = nagare_request::encode_addr(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0));
    let four = raw.call(bind4).aux[0] as u32;
    let mut send = raw.request(Op::SendTo6);
    send.socket = four;
    send.piece = Some(raw.give(b"x", 1));
    send.aux = [phi, plo, pport, 0];
    assert_eq!(raw.call(send).status, -libc::EAFNOSUPPORT, "as Linux's IPv4 socket says");
    assert!(netd.running());
}

/// Two clients of one netd over IPv6, by netd's address and by `::1`: a
/// UDP socket each, datagrams both ways (one past the link's MTU, which
/// stays whole), and a TCP stream, every byte checked.
#[test]
fn two_clients_talk_over_ipv6_by_netd_s_address_and_loopback() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let (a, b) = (netd.connect(), netd.connect());
        for (k, ip) in [NETD_ADDR6, Ipv6Addr::LOCALHOST].into_iter().enumerate() {
            let what = format!("{placement:?} {ip}");
            let sa = UdpSocket::bind_via(&a, six(ip, 9620 + k as u16)).expect("bind");
            let sb = UdpSocket::bind_via(&b, "[::]:0").expect("bind [::]:0");
            let at_a = six(ip, 9620 + k as u16);
            let big: Vec<u8> = (0..9000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
            for data in [b"from b".to_vec(), big.clone()] {
                assert_eq!(sb.send_to(&data, at_a).unwrap(), data.len());
                let (got, from) = next_datagram(&sa);
                assert!(got == data, "{what}: {} bytes for {}", got.len(), data.len());
                assert_eq!(from, six(ip, sb.local_addr().unwrap().port()), "{what}");
                sa.send_to(&got, from).unwrap();
                let (back, back_from) = next_datagram(&sb);
                assert!(back == data, "{what}: {} bytes back for {}", back.len(), data.len());
                assert_eq!(back_from, at_a, "{what}");
            }
            drop((sa, sb));

            let listener = TcpListener::bind_via(&a, six(ip, 9630 + k as u16)).expect("listen");
            let mut client = TcpStream::connect_timeout_via(&b, &six(ip, 9630 + k as u16), LIMIT).expect("connect");
            let (mut server, peer) = listener.accept().expect("accept");
            assert_eq!(peer, client.local_addr().unwrap(), "{what}");
            assert_eq!(peer.ip(), std::net::IpAddr::V6(ip), "{what}");
            let data: Vec<u8> = (0..300_000u32).map(|i| (i % 249) as u8).collect();
            let writer = std::thread::spawn(move || {
                client.write_all(&data).expect("write");
                client.shutdown(std::net::Shutdown::Write).expect("shutdown");
                data
            });
            server.set_read_timeout(Some(LIMIT)).unwrap();
            let mut got = Vec::new();
            server.read_to_end(&mut got).expect("read");
            let data = writer.join().unwrap();
            assert!(got == data, "{what}: {} bytes of {}", got.len(), data.len());
        }
        let report = a.stat().expect("stat");
        assert!(stat_value(&report, "local_delivered").is_some_and(|n| n >= 8), "{report}");
        drop((a, b));
        netd.stop();
    }
}

/// An IPv6 socket bound to an IPv4-mapped address is bound to that IPv4
/// address, as on Linux: it takes IPv4 datagrams (from IPv4-mapped
/// senders) and sends over IPv4, holds the IPv4 port, and has nothing to
/// do with IPv6 (`EAFNOSUPPORT` to an IPv6 destination; a datagram to
/// netd's IPv6 address is not its); `V6_ONLY` refuses such an address.
/// A listener there takes IPv4 connections, their peers IPv4-mapped.
#[test]
fn a_socket_bound_to_an_ipv4_mapped_address_is_bound_to_its_ipv4_address() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let (a, b) = (netd.connect(), netd.connect());
        let at = six(NETD_ADDR.to_ipv6_mapped(), 9640);
        let s = UdpSocket::bind_via(&a, at).expect("bind an IPv4-mapped address");
        assert_eq!(s.local_addr().unwrap(), at, "{placement:?}");
        let e = UdpSocket::bind_via(&b, "0.0.0.0:9640").err().expect("the IPv4 port is taken");
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE), "{e}");
        let only6 = SocketAddrV6::new(NETD_ADDR.to_ipv6_mapped(), 9641, 0, 0);
        let e = UdpSocket::bind_v6_only_via(&b, only6).err().expect("v6-only on an IPv4-mapped address");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");

        // IPv4 from another client, and over the link to the peer's echo.
        let four = UdpSocket::bind_via(&b, "0.0.0.0:0").unwrap();
        let four_at = SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, four.local_addr().unwrap().port()));
        four.send_to(b"to mapped", SocketAddrV4::new(NETD_ADDR, 9640)).unwrap();
        assert_eq!(next_datagram(&s), (b"to mapped".to_vec(), mapped(four_at)), "{placement:?}");
        s.send_to(b"back", mapped(four_at)).unwrap();
        assert_eq!(next_datagram(&four), (b"back".to_vec(), SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, 9640))));
        let peer4 = SocketAddr::V4(SocketAddrV4::new(PEER_ADDR, ECHO_PORT));
        s.send_to(b"echo", peer4).unwrap();
        assert_eq!(next_datagram(&s), (b"echo".to_vec(), mapped(peer4)), "{placement:?}");

        // Nothing of IPv6: a datagram to netd's IPv6 address on the port
        // is not its, and it cannot send one.
        let v6 = UdpSocket::bind_via(&b, "[::]:0").unwrap();
        v6.send_to(b"six", six(NETD_ADDR6, 9640)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        let e = s.recv_from(&mut [0u8; 16]).expect_err("no IPv6 datagram");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{placement:?}: {e}");
        let e = s.send_to(b"x", six(PEER_ADDR6, ECHO_PORT)).expect_err("no IPv6 send");
        assert_eq!(e.raw_os_error(), Some(libc::EAFNOSUPPORT), "{placement:?}: {e}");
        drop((s, four, v6));

        let on = six(NETD_ADDR.to_ipv6_mapped(), 9642);
        let listener = TcpListener::bind_via(&a, on).expect("listen on an IPv4-mapped address");
        assert_eq!(listener.local_addr().unwrap(), on);
        let client = TcpStream::connect_timeout_via(&b, &SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, 9642)), LIMIT)
            .expect("an IPv4 connection");
        let (_server, peer) = listener.accept().expect("accept");
        assert_eq!(peer, mapped(client.local_addr().unwrap()), "{placement:?}");
        let e = TcpStream::connect_timeout_via(&b, &six(NETD_ADDR6, 9642), LIMIT).err().expect("no IPv6 listener");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{placement:?}: {e}");
        drop((listener, client, a, b));
        netd.stop();
    }
}

#[test]
fn a_ping_socket_pings_over_icmpv6_and_icmp() {
    for placement in PLACEMENTS {
        let netd = start(placement);
        let client = netd.connect();
        let ping = nagare::ping::PingSocket::open_via(&client, 4343).expect("an echo socket");
        // The first ICMPv6 request may wait for neighbour discovery; a
        // poll says when the reply is there.
        for (seq, to) in [(1, std::net::IpAddr::V6(PEER_ADDR6)), (2, std::net::IpAddr::V4(PEER_ADDR))] {
            ping.send(to, seq, &[seq as u8; 56]).expect("send");
            let mut entries =
                [nagare_request::PollEntry { socket: ping.socket_id(), interest: nagare_request::READABLE, ready: 0 }];
            assert_eq!(nagare::poll::poll(&client, &mut entries, Some(LIMIT)).expect("poll"), 1, "{placement:?} {to}");
            let got = ping.recv_timeout(Some(std::time::Duration::ZERO)).expect("recv");
            assert!(
                matches!(got, Some(nagare::ping::PingEvent::Reply { from, seq: s, len: 56, .. }) if from == to && s == seq),
                "{placement:?}: {got:?}"
            );
        }
        // A raw request's checks: a sequence past 16 bits.
        let mut raw = RawClient::connect(&netd);
        let mut open = raw.request(Op::EchoOpen);
        open.aux[0] = 4400;
        let id = raw.call(open).aux[0] as u32;
        let [hi, lo, _] = encode_addr6(SocketAddrV6::new(PEER_ADDR6, 0, 0, 0));
        let mut send = raw.request(Op::EchoSend6);
        send.socket = id;
        send.piece = Some(raw.give(b"x", 1));
        send.aux = [hi, lo, 1 << 16, 0];
        assert_eq!(raw.call(send).status, -libc::EINVAL);
        drop((ping, client));
        netd.stop();
    }
}
