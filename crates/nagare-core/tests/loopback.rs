//! The loopback network, 127.0.0.0/8: every address in it is local, a
//! datagram to one is received by the next poll and never reaches the link,
//! and one from the link to or from it is a martian, dropped and counted.
//! The interface has a gateway, so a datagram to 127/8 that went the way
//! of other destinations would show up in the transmit queue.

mod common;

use common::*;
use nagare_core::buf::BufferPool;
use nagare_core::iface::Error;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{IpProtocol, Ipv4Addr, TcpFlags, TcpRepr, TcpSeqNumber};
use std::net::SocketAddrV4;
use std::time::Duration;

const LOCALHOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn interface() -> Interface {
    let mut config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    config.gateway = Some(Ipv4Addr::new(10, 0, 0, 254));
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

/// Polls a few rounds (each receives what the one before sent itself),
/// then checks that the link saw nothing.
fn settle(iface: &mut Interface, now: Instant) {
    for _ in 0..16 {
        iface.poll(now);
    }
    assert!(iface.tx_queue().is_empty(), "a datagram to 127.0.0.0/8 went to the link");
}

/// Connects to `to`, accepts on `listener`, and returns the client's and
/// the server's ends.
fn connect(
    iface: &mut Interface,
    listener: nagare_core::tcp::TcpListenerHandle,
    to: SocketAddrV4,
    now: Instant,
) -> (TcpHandle, TcpHandle) {
    let client = iface.tcp().connect(to, 0, now).unwrap();
    settle(iface, now);
    let server = iface.tcp().accept(listener).unwrap().expect("the handshake went through the loopback network");
    (client, server)
}

/// `data` from `from` to `to`, read back whole.
fn carry(iface: &mut Interface, from: TcpHandle, to: TcpHandle, data: &[u8], mut now: Instant) -> Vec<u8> {
    let (mut sent, mut got, mut buf) = (0, Vec::new(), vec![0u8; 65536]);
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += iface.tcp().send(from, &data[sent..], now).unwrap_or(0);
        }
        while let Ok(n) = iface.tcp().recv(to, &mut buf, now) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() >= data.len() {
            break;
        }
        iface.poll(now);
        now += Duration::from_micros(10);
    }
    assert!(iface.tx_queue().is_empty(), "a segment over the loopback network went to the link");
    got
}

#[test]
fn tcp_to_127_0_0_1_reaches_a_wildcard_listener_from_127_0_0_1() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let listener = iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    let (client, server) = connect(&mut iface, listener, SocketAddrV4::new(LOCALHOST, 80), now);
    let tcp = iface.tcp_ref();
    let (c, s) = (tcp.connection(client).unwrap(), tcp.connection(server).unwrap());
    assert_eq!(c.local().ip(), LOCALHOST, "the source chosen for 127.0.0.1 is 127.0.0.1");
    assert_eq!(c.remote(), SocketAddrV4::new(LOCALHOST, 80).into());
    assert_eq!(s.local(), SocketAddrV4::new(LOCALHOST, 80).into());
    assert_eq!(s.remote(), c.local());

    let request: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    assert!(carry(&mut iface, client, server, &request, now) == request, "client to server, byte for byte");
    let answer: Vec<u8> = request.iter().rev().copied().collect();
    assert!(carry(&mut iface, server, client, &answer, now) == answer, "server to client, byte for byte");
    assert!(iface.counters().local_delivered > 0);
    assert_eq!(iface.counters().tx_frames, 0);
    assert_eq!(iface.counters().arp_requests_sent, 0, "nobody is asked where 127.0.0.1 is");
}

#[test]
fn tcp_to_a_listener_bound_to_127_0_0_1() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let listener = iface.tcp().listen(SocketAddrV4::new(LOCALHOST, 8080), 8).unwrap();
    let (client, server) = connect(&mut iface, listener, SocketAddrV4::new(LOCALHOST, 8080), now);
    assert_eq!(carry(&mut iface, client, server, b"GET / HTTP/1.0\r\n\r\n", now), b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(carry(&mut iface, server, client, b"HTTP/1.0 200 OK\r\n\r\n", now), b"HTTP/1.0 200 OK\r\n\r\n");
    // Anywhere in 127.0.0.0/8 is local; the listener takes only its own.
    let other = iface.tcp().connect(SocketAddrV4::new(Ipv4Addr::new(127, 1, 2, 3), 8080), 0, now).unwrap();
    settle(&mut iface, now);
    let mut buf = [0u8; 8];
    assert_eq!(iface.tcp().recv(other, &mut buf, now), Err(Error::ConnectionRefused));
}

#[test]
fn tcp_to_a_loopback_port_nobody_listens_on_is_refused() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let h = iface.tcp().connect(SocketAddrV4::new(LOCALHOST, 9), 0, now).unwrap();
    settle(&mut iface, now);
    let mut buf = [0u8; 8];
    assert_eq!(iface.tcp().recv(h, &mut buf, now), Err(Error::ConnectionRefused));
    assert_eq!(iface.counters().drop_tcp_no_socket, 1);
    assert_eq!(iface.counters().tcp_resets_sent, 1);
}

#[test]
fn udp_both_ways_over_127_0_0_1() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let a = iface.udp().bind(SocketAddrV4::new(LOCALHOST, 5000)).unwrap();
    let b = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 6000)).unwrap();
    let c = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::new(127, 9, 9, 9), 7000)).unwrap();
    let big: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
    iface.udp().send_to(a, b"ping", SocketAddrV4::new(LOCALHOST, 6000), now).unwrap();
    iface.udp().send_to(a, &big, SocketAddrV4::new(LOCALHOST, 6000), now).unwrap();
    settle(&mut iface, now);
    let mut buf = vec![0u8; 65536];
    assert_eq!(iface.udp().recv_from(b, &mut buf).unwrap(), Some((4, SocketAddrV4::new(LOCALHOST, 5000))));
    let (n, _) = iface.udp().recv_from(b, &mut buf).unwrap().unwrap();
    assert!(buf[..n] == big[..], "a datagram above the MTU arrives whole");
    iface.udp().send_to(b, b"pong", SocketAddrV4::new(LOCALHOST, 5000), now).unwrap();
    iface.udp().send_to(b, b"to 127.9.9.9", SocketAddrV4::new(Ipv4Addr::new(127, 9, 9, 9), 7000), now).unwrap();
    settle(&mut iface, now);
    assert_eq!(iface.udp().recv_from(a, &mut buf).unwrap(), Some((4, SocketAddrV4::new(LOCALHOST, 6000))));
    assert_eq!(&buf[..4], b"pong");
    assert_eq!(iface.udp().recv_from(c, &mut buf).unwrap(), Some((12, SocketAddrV4::new(LOCALHOST, 6000))));
    assert_eq!(iface.counters().frag_sent, 0);
    assert_eq!(iface.counters().tx_frames, 0);
}

#[test]
fn udp_to_a_loopback_port_nobody_listens_on_is_dropped_and_counted() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let a = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000)).unwrap();
    let bound = iface.udp().bind(SocketAddrV4::new(OUR_IP, 6000)).unwrap();
    iface.udp().send_to(a, b"nobody", SocketAddrV4::new(LOCALHOST, 7777), now).unwrap();
    // Bound to 10.0.0.1 only: a datagram to 127.0.0.1 is not for it.
    iface.udp().send_to(a, b"not mine", SocketAddrV4::new(LOCALHOST, 6000), now).unwrap();
    settle(&mut iface, now);
    assert_eq!(iface.counters().drop_udp_no_socket, 2);
    assert!(iface.udp().recv(bound).unwrap().is_none());
}

#[test]
fn a_loopback_source_never_reaches_the_link() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let a = iface.udp().bind(SocketAddrV4::new(LOCALHOST, 5000)).unwrap();
    assert_eq!(iface.udp().send_to(a, b"out", SocketAddrV4::new(PEER_IP, 9), now), Err(Error::Unaddressable));
    assert_eq!(
        iface.udp().send_to(a, b"out", SocketAddrV4::new(Ipv4Addr::new(8, 8, 8, 8), 9), now),
        Err(Error::Unaddressable)
    );
    // From 127.0.0.1 to our own address is local, and allowed.
    let b = iface.udp().bind(SocketAddrV4::new(OUR_IP, 6000)).unwrap();
    iface.udp().send_to(a, b"in", SocketAddrV4::new(OUR_IP, 6000), now).unwrap();
    settle(&mut iface, now);
    let mut buf = [0u8; 8];
    assert_eq!(iface.udp().recv_from(b, &mut buf).unwrap(), Some((2, SocketAddrV4::new(LOCALHOST, 5000))));
}

#[test]
fn binding_needs_an_address_of_ours_or_of_127_0_0_0_8() {
    let mut iface = interface();
    assert!(iface.udp().bind(SocketAddrV4::new(LOCALHOST, 53)).is_ok());
    assert!(iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 53), 53), 1).is_ok());
    assert_eq!(iface.udp().bind(SocketAddrV4::new(PEER_IP, 54)).err(), Some(Error::AddrNotAvailable));
    assert_eq!(iface.tcp().listen(SocketAddrV4::new(PEER_IP, 54), 1).err(), Some(Error::AddrNotAvailable));
}

#[test]
fn datagrams_from_the_link_to_127_0_0_0_8_are_martians() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let sink = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let _listener = iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    let datagram = udp_datagram(PEER_IP, LOCALHOST, 7, b"to your loopback");
    feed(&mut iface, &ipv4_from(PEER_IP, LOCALHOST, 64, IpProtocol::Udp, &datagram), 2000, now);
    let mut syn = vec![0u8; 20];
    let mut repr = TcpRepr::bare(4000, 80, TcpSeqNumber(1), None, TcpFlags::SYN);
    repr.window_len = 1000;
    repr.emit(&mut syn, &[], PEER_IP, LOCALHOST).unwrap();
    feed(&mut iface, &ipv4_from(PEER_IP, LOCALHOST, 64, IpProtocol::Tcp, &syn), 2000, now);
    assert_eq!(iface.counters().drop_ip_martian_destination, 2);
    // With a loopback source too (a source check drops it first).
    let datagram = udp_datagram(LOCALHOST, LOCALHOST, 7, b"from your loopback");
    feed(&mut iface, &ipv4_from(LOCALHOST, LOCALHOST, 64, IpProtocol::Udp, &datagram), 2000, now);
    assert_eq!(iface.counters().drop_ip_bad_source, 1);
    settle(&mut iface, now);
    assert!(iface.udp().recv(sink).unwrap().is_none());
    assert_eq!(iface.counters().tcp_segments_received, 0);
    assert_eq!(iface.counters().local_delivered, 0);
}

#[test]
fn ping_127_0_0_1() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let echo = iface.icmp().echo_open(77).unwrap();
    iface.icmp().echo_send(echo, Ipv4Addr::new(127, 0, 0, 2), 1, b"me", now).unwrap();
    settle(&mut iface, now);
    assert!(matches!(
        iface.icmp().echo_recv(echo).unwrap(),
        Some(nagare_core::icmp::EchoEvent::Reply { from, seq_no: 1, data_len: 2, .. }) if from == Ipv4Addr::new(127, 0, 0, 2)
    ));
}

/// What waits for the next poll is bounded: past 4096 local datagrams a
/// send fails and is counted, and the poll receives what waited.
#[test]
fn the_local_queue_is_bounded() {
    let mut config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    config.udp_rx_queue_packets = 8192;
    config.udp_rx_queue_bytes = 1 << 20;
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 8192));
    let now = Instant::from_secs(1);
    let a = iface.udp().bind(SocketAddrV4::new(LOCALHOST, 5000)).unwrap();
    let b = iface.udp().bind(SocketAddrV4::new(LOCALHOST, 6000)).unwrap();
    let mut sent = 0;
    for _ in 0..5000 {
        match iface.udp().send_to(a, b"x", SocketAddrV4::new(LOCALHOST, 6000), now) {
            Ok(()) => sent += 1,
            Err(e) => assert_eq!(e, Error::NoBuffer),
        }
    }
    assert_eq!(sent, 4096);
    assert_eq!(iface.counters().drop_local_queue_full, 5000 - 4096);
    settle(&mut iface, now);
    let mut received = 0;
    while iface.udp().recv(b).unwrap().is_some() {
        received += 1;
    }
    assert_eq!(received, 4096);
    assert!(iface.udp().send_to(a, b"x", SocketAddrV4::new(LOCALHOST, 6000), now).is_ok(), "room again");
}
