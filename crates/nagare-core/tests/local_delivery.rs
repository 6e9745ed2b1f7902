//! Datagrams to one of our own addresses never reach the link: they are
//! received by the next poll, so two applications of one stack (netd's
//! clients) can talk to each other by its address, over IPv4 and IPv6
//! (`::1` too).

mod common;

use nagare_core::buf::BufferPool;
use nagare_core::icmp::EchoEvent;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::Ipv6Config;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{EthernetAddress, Ipv4Addr};
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

fn interface() -> Interface {
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096))
}

/// Polls until nothing local is left (a few rounds), then checks the link
/// saw nothing.
fn settle(iface: &mut Interface, now: Instant) {
    for _ in 0..16 {
        iface.poll(now);
    }
    assert!(iface.tx_queue().is_empty(), "a datagram to ourselves went to the link");
}

#[test]
fn udp_and_ping_to_ourselves() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let a = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000)).unwrap();
    let b = iface.udp().bind(SocketAddrV4::new(OURS, 6000)).unwrap();
    let big: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
    iface.udp().send_to(a, b"hi", SocketAddrV4::new(OURS, 6000), now).unwrap();
    iface.udp().send_to(a, &big, SocketAddrV4::new(OURS, 6000), now).unwrap();
    assert!(iface.udp().recv(b).unwrap().is_none(), "delivered inside the send");
    settle(&mut iface, now);
    let mut buf = vec![0u8; 10000];
    assert_eq!(iface.udp().recv_from(b, &mut buf).unwrap(), Some((2, SocketAddrV4::new(OURS, 5000))));
    let (n, _) = iface.udp().recv_from(b, &mut buf).unwrap().unwrap();
    assert_eq!(&buf[..n], &big[..], "a datagram above the MTU arrives whole");
    assert_eq!(iface.counters().frag_sent, 0);

    let echo = iface.icmp().echo_open(77).unwrap();
    iface.icmp().echo_send(echo, OURS, 1, b"me", now).unwrap();
    settle(&mut iface, now);
    assert!(matches!(
        iface.icmp().echo_recv(echo).unwrap(),
        Some(EchoEvent::Reply { from: OURS, seq_no: 1, data_len: 2, .. })
    ));
    assert!(iface.counters().local_delivered >= 4);
    assert_eq!(iface.counters().drop_ip_bad_source, 0);
}

/// A frame from the link sent to the Ethernet broadcast address (an ARP
/// request, received as every host on the link receives it) says nothing
/// of the datagrams to ourselves received after it: a connection to our
/// own address made right after one still completes its handshake and
/// carries its bytes without a retransmission.
#[test]
fn tcp_to_ourselves_after_a_link_broadcast() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let listener = iface.tcp().listen(SocketAddrV4::new(OURS, 81), 8).unwrap();
    common::feed(&mut iface, &common::to_link_broadcast(common::arp(nagare_wire::ArpOperation::Request)), 4096, now);
    let client = iface.tcp().connect(SocketAddrV4::new(OURS, 81), 0, now).unwrap();
    iface.tcp().send(client, b"after a broadcast", now).unwrap();
    for _ in 0..16 {
        iface.poll(now);
    }
    let server = iface.tcp().accept(listener).unwrap().expect("the handshake to ourselves completed");
    let mut buf = [0u8; 64];
    for _ in 0..16 {
        iface.poll(now);
    }
    let n = iface.tcp().recv(server, &mut buf, now).unwrap();
    assert_eq!(&buf[..n], b"after a broadcast");
    assert_eq!(iface.counters().drop_tcp_broadcast, 0);
}

#[test]
fn tcp_to_ourselves_is_byte_exact() {
    tcp_to_ourselves(interface());
}

/// With checksum and segmentation offload (as on a TAP): the segments to
/// ourselves are super-segments with partial checksums, received as they are.
#[test]
fn tcp_to_ourselves_with_offloads_is_byte_exact() {
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    let offloads = nagare_core::buf::TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };
    let caps = Capabilities { tx_offloads: offloads, ..Capabilities::default() };
    tcp_to_ourselves(Interface::new(config, caps, BufferPool::new(2048, 4096)));
}

fn tcp_to_ourselves(iface: Interface) {
    tcp_to(iface, SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80)), SocketAddrV4::new(OURS, 80).into());
}

/// A megabyte over TCP from a connection to `to` to a listener on `on`,
/// every byte checked.
fn tcp_to(mut iface: Interface, on: SocketAddr, to: SocketAddr) {
    let mut now = Instant::from_secs(30);
    let listener = iface.tcp().listen(on, 8).unwrap();
    let client = iface.tcp().connect(to, 0, now).unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let mut server = None;
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..100_000 {
        if server.is_none() {
            server = iface.tcp().accept(listener).unwrap();
        }
        if sent < data.len() {
            sent += iface.tcp().send(client, &data[sent..], now).unwrap_or(0);
        }
        if let Some(s) = server {
            while let Ok(n) = iface.tcp().recv(s, &mut buf, now) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == data.len() {
            break;
        }
        iface.poll(now);
        now += Duration::from_micros(10);
    }
    assert!(got == data, "received {} of {} bytes, or wrong ones", got.len(), data.len());
    assert!(iface.tx_queue().is_empty(), "a segment to ourselves went to the link");
}

const OURS6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);

/// An interface with IPv6 whose addresses passed duplicate address
/// detection (nobody answered), its link quiet again.
fn interface6(caps: Capabilities) -> Interface {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    config.ipv6 =
        Some(Ipv6Config { addresses: vec!["fd00::1/64".parse::<Ipv6Cidr>().unwrap()], ..Ipv6Config::default() });
    let mut iface = Interface::new(config, caps, BufferPool::new(2048, 4096));
    // Detection, router solicitations and listener reports: all sent
    // by 20 seconds.
    for secs in 0..=20 {
        iface.poll(Instant::from_secs(secs));
    }
    assert!(iface.ipv6_addresses().all(|a| a.state == AddrState::Preferred));
    iface.tx_queue().clear();
    iface
}

fn six(ip: Ipv6Addr, port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(ip, port, 0, 0)
}

#[test]
fn udp6_to_ourselves_and_to_loopback() {
    let mut iface = interface6(Capabilities::default());
    let now = Instant::from_secs(30);
    let any = iface.udp().bind6(six(Ipv6Addr::UNSPECIFIED, 5000)).unwrap();
    let ours = iface.udp().bind6(six(OURS6, 6000)).unwrap();
    let lo = iface.udp().bind6(six(Ipv6Addr::LOCALHOST, 7000)).unwrap();
    let big: Vec<u8> = (0..9000u32).map(|i| (i % 251) as u8).collect();
    iface.udp().send_to6(any, b"to ours", six(OURS6, 6000), now).unwrap();
    iface.udp().send_to6(any, &big, six(OURS6, 6000), now).unwrap();
    iface.udp().send_to6(any, b"to ::1", six(Ipv6Addr::LOCALHOST, 7000), now).unwrap();
    assert!(iface.udp().recv6(ours).unwrap().is_none(), "delivered inside the send");
    settle(&mut iface, now);
    let mut buf = vec![0u8; 10000];
    assert_eq!(iface.udp().recv_from6(ours, &mut buf).unwrap(), Some((7, six(OURS6, 5000))), "from ours");
    let (n, _) = iface.udp().recv_from6(ours, &mut buf).unwrap().unwrap();
    assert!(buf[..n] == big[..], "a datagram above the MTU arrives whole");
    assert_eq!(iface.udp().recv_from6(lo, &mut buf).unwrap(), Some((6, six(Ipv6Addr::LOCALHOST, 5000))));
    // And back: from ::1 to a socket on `::`.
    iface.udp().send_to6(lo, b"back", six(Ipv6Addr::LOCALHOST, 5000), now).unwrap();
    settle(&mut iface, now);
    assert_eq!(iface.udp().recv_from6(any, &mut buf).unwrap(), Some((4, six(Ipv6Addr::LOCALHOST, 7000))));
    let c = iface.counters();
    assert_eq!((c.ip6_frag_sent, c.drop_ip6_bad_source), (0, 0));
    assert!(c.local_delivered >= 4);
    assert_eq!(c.udp6_delivered, 4);
}

/// A closed local port answers with port unreachable, which a socket
/// connected to it keeps; `::1` is never a source on the link.
#[test]
fn a_closed_local_port_is_unreachable_and_loopback_stays_off_the_link() {
    let mut iface = interface6(Capabilities::default());
    let now = Instant::from_secs(30);
    for to in [OURS6, Ipv6Addr::LOCALHOST] {
        let s = iface.udp().bind6(six(Ipv6Addr::UNSPECIFIED, 0)).unwrap();
        iface.udp().connect(s, Some(SocketAddr::V6(six(to, 9)))).unwrap();
        iface.udp().send_to6(s, b"anyone?", six(to, 9), now).unwrap();
        settle(&mut iface, now);
        let error = iface.udp().take_error(s).unwrap();
        assert_eq!(error, Some(nagare_core::icmp::IcmpError::Unreachable6 { from: to, code: 4 }), "{to}");
        iface.udp().close(s).unwrap();
    }
    let lo = iface.udp().bind6(six(Ipv6Addr::LOCALHOST, 0)).unwrap();
    let off_link = six("fd00::2".parse().unwrap(), 9);
    assert_eq!(iface.udp().send_to6(lo, b"out", off_link, now), Err(nagare_core::iface::Error::Unaddressable));
    assert!(iface.tx_queue().is_empty());
}

#[test]
fn tcp6_to_ourselves_and_to_loopback_is_byte_exact() {
    for to in [OURS6, Ipv6Addr::LOCALHOST] {
        let any = SocketAddr::V6(six(Ipv6Addr::UNSPECIFIED, 80));
        tcp_to(interface6(Capabilities::default()), any, SocketAddr::V6(six(to, 80)));
        let offloads = nagare_core::buf::TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };
        let caps = Capabilities { tx_offloads: offloads, ..Capabilities::default() };
        tcp_to(interface6(caps), any, SocketAddr::V6(six(to, 80)));
    }
}

/// An address still in duplicate address detection is not ours to send
/// to yet.
#[test]
fn a_tentative_address_of_ours_is_not_local() {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    config.ipv6 =
        Some(Ipv6Config { addresses: vec!["fd00::1/64".parse::<Ipv6Cidr>().unwrap()], ..Ipv6Config::default() });
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 64));
    let now = Instant::from_secs(0);
    iface.poll(now);
    assert_eq!(iface.ipv6_address_state(OURS6), Some(AddrState::Tentative));
    assert!(!iface.is_local6(OURS6) && iface.is_local6(Ipv6Addr::LOCALHOST));
    let s = iface.udp().bind6(six(Ipv6Addr::LOCALHOST, 0)).unwrap();
    assert!(iface.udp().send_to6(s, b"x", six(OURS6, 9), now).is_err());
    assert_eq!(iface.counters().local_delivered, 0);
}
