//! TCP over IPv6 through netd: a client connects to the peer's IPv6
//! address and its stream carries bytes both ways with IPv6 addresses at
//! both ends; a listener on `[::]` holds its port for IPv4 too and reports
//! an IPv4 peer as IPv4-mapped, while a v6-only one leaves the IPv4 port
//! free; and the requests that carry IPv6 addresses, and `NAME`, are
//! checked like every other.

mod support;

use nagare::net::{TcpListener, TcpStream};
use nagare_netd::{Op, Placement};
use nagare_request::{encode_addr6, NAME_LOCAL, NAME_PEER, V6_ONLY};
use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use support::{NetdThread, RawClient, Tune, Wire, ECHO_PORT, LIMIT, NETD_ADDR, NETD_ADDR6, PEER_ADDR6};

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
    // IPv6 to our own address is not delivered locally.
    let [ohi, olo, oport] = encode_addr6(SocketAddrV6::new(NETD_ADDR6, 9700, 0, 0));
    let mut own = raw.request(Op::Connect6);
    own.aux = [ohi, olo, oport, 0];
    assert_eq!(raw.call(own).status, -libc::EINVAL);
    // An IPv4-mapped destination is its IPv4 address: the listener above
    // is v6-only, so nothing listens on IPv4 port 9700.
    let [mhi, mlo, mport] = encode_addr6(SocketAddrV6::new(NETD_ADDR.to_ipv6_mapped(), 9700, 0, 0));
    let mut mapped = raw.request(Op::Connect6);
    mapped.aux = [mhi, mlo, mport, 0];
    assert_eq!(raw.call(mapped).status, -libc::ECONNREFUSED);
    assert!(netd.running());
}
