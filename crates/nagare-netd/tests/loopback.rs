//! The loopback network through netd: clients of one netd reach each
//! other at 127.0.0.0/8, TCP and UDP, with 127.0.0.1 as the address both
//! ends see, and nothing of it reaches netd's device (a simulated link to
//! a peer here, so that whatever went there would show in the engine's
//! `tx_frames`).

mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare_netd::Placement;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use support::{stat_value, NetdThread, Wire, LIMIT};

const PLACEMENTS: [Placement; 2] = [Placement::Inline, Placement::Single];

fn lo(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
}

/// Nothing went to the device, and something was delivered locally.
fn all_local(report: &str) {
    assert_eq!(stat_value(report, "engine tx_frames "), None, "frames went to the device: {report}");
    assert!(stat_value(report, "engine local_delivered ").is_some_and(|n| n > 0), "{report}");
}

/// A listener on 0.0.0.0 and one on 127.0.0.1, each reached at
/// 127.0.0.1 by another client: both ends say 127.0.0.1, bytes go both
/// ways whole; a port nobody listens on refuses.
#[test]
fn streams_over_127_0_0_1_between_two_clients() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::PeerLink);
        let (server_side, client_side) = (netd.connect(), netd.connect());
        let wildcard = TcpListener::bind_via(&server_side, "0.0.0.0:9500").expect("listen on 0.0.0.0");
        let bound = TcpListener::bind_via(&server_side, lo(9501)).expect("listen on 127.0.0.1");
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
        for (listener, port) in [(&wildcard, 9500), (&bound, 9501)] {
            let mut c = TcpStream::connect_timeout_via(&client_side, &lo(port), LIMIT).expect("connect");
            let (mut s, peer) = listener.accept().expect("accept");
            let mine = c.local_addr().unwrap();
            assert_eq!(mine.ip(), Ipv4Addr::LOCALHOST, "{placement:?}");
            assert_eq!(c.peer_addr().unwrap(), lo(port), "{placement:?}");
            assert_eq!(peer, mine, "{placement:?}");
            assert_eq!(s.local_addr().unwrap(), lo(port), "{placement:?}");
            c.set_read_timeout(Some(LIMIT)).unwrap();
            s.set_read_timeout(Some(LIMIT)).unwrap();
            c.write_all(&data).expect("write");
            let mut got = vec![0u8; data.len()];
            s.read_exact(&mut got).expect("the server reads");
            assert!(got == data, "the server got other bytes ({placement:?})");
            s.write_all(&data[..1000]).expect("answer");
            let mut back = vec![0u8; 1000];
            c.read_exact(&mut back).expect("the client reads");
            assert!(back == data[..1000], "the client got other bytes ({placement:?})");
        }
        let e = TcpStream::connect_timeout_via(&client_side, &lo(9502), LIMIT).err().expect("nobody listens");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
        all_local(&client_side.stat().expect("stat"));
        drop((wildcard, bound, server_side, client_side));
        let done = netd.stop();
        assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
    }
}

/// A socket bound to 127.0.0.1 and one bound to 0.0.0.0: datagrams both
/// ways, each from the sender's 127.0.0.1 address. The sender's buffers
/// are copied, never lent (the receiver's queue could hold a lent one for
/// ever): more datagrams than the client's region has buffers wait in
/// the receiver's queue and the sender keeps sending. A datagram to a
/// port nobody has is dropped and counted; one from 127.0.0.1 to the link
/// fails with `EINVAL`.
#[test]
fn datagrams_over_127_0_0_1_between_two_clients() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::PeerLink);
        let (one, two) = (netd.connect(), netd.connect());
        let a = UdpSocket::bind_via(&one, lo(0)).expect("bind 127.0.0.1");
        let b = UdpSocket::bind_via(&two, "0.0.0.0:9600").expect("bind 0.0.0.0");
        let a_addr = a.local_addr().unwrap();
        assert_eq!(a_addr.ip(), Ipv4Addr::LOCALHOST);
        a.set_read_timeout(Some(LIMIT)).unwrap();
        b.set_read_timeout(Some(LIMIT)).unwrap();
        let count = 2 * support::BUFFERS as usize;
        for i in 0..count {
            assert_eq!(a.send_to(&[i as u8; 700], lo(9600)).expect("send"), 700, "{placement:?}");
        }
        let mut got = [0u8; 2048];
        for i in 0..count {
            let (n, from) = b.recv_from(&mut got).expect("b receives");
            assert_eq!(&got[..n], &[i as u8; 700][..], "{placement:?}");
            assert_eq!(from, a_addr, "{placement:?}");
        }
        b.send_to(b"answer", a_addr).expect("answer");
        let (n, from) = a.recv_from(&mut got).expect("a receives the answer");
        assert_eq!(&got[..n], b"answer", "{placement:?}");
        assert_eq!(from, lo(9600), "{placement:?}");
        a.send_to(b"nobody", lo(9601)).expect("a datagram to nobody is sent");
        // Bound to 127.0.0.1, `a` cannot send off the host: the send's
        // error is the socket's next, as Linux's EINVAL.
        let _ = a.send_to(b"out", SocketAddrV4::new(support::PEER_ADDR, support::ECHO_PORT));
        let deadline = std::time::Instant::now() + LIMIT;
        let e = loop {
            if let Some(e) = a.take_error().expect("take_error") {
                break e;
            }
            assert!(std::time::Instant::now() < deadline, "the send off the host did not fail ({placement:?})");
            std::thread::sleep(std::time::Duration::from_millis(2));
        };
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        let report = support::wait_for_report(&one, "the datagram to nobody counted", |r| {
            stat_value(r, "engine drop_udp_no_socket ") == Some(1)
        });
        all_local(&report);
        assert_eq!(stat_value(&report, "netd sends_in_place "), Some(0), "{report}");
        drop((a, b, one, two));
        let done = netd.stop();
        assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
    }
}
