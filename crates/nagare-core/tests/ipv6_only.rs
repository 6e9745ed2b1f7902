//! An interface with IPv6 addresses only ([`InterfaceConfig::ipv6_only`]):
//! TCP and UDP over IPv6 with a dual-stack peer, without a frame of ARP or
//! IPv4 on the link; ARP and IPv4 to it counted and dropped, unanswered;
//! IPv4 sends failing with no route, the loopback network still served.

mod common;

use common::wire::Wire;
use common::{arp, feed, icmp, ipv4_from, to_link_broadcast, udp, udp_datagram, OUR_MAC, PEER_IP};
use nagare_core::buf::BufferPool;
use nagare_core::iface::Error;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::tcp::connection::State;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{ArpOperation, EthernetAddress, IpProtocol, Ipv4Addr, Ipv4Cidr, Ipv6Addr};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const MAC_PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn sa(ip: Ipv6Addr, port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(ip, port, 0, 0)
}

fn v6(cidr: &str) -> Ipv6Config {
    Ipv6Config { addresses: vec![cidr.parse::<Ipv6Cidr>().unwrap()], ..Ipv6Config::default() }
}

/// The IPv6-only interface, on the MAC the frame builders of `common`
/// send to, with IPv4 gateway `gateway`.
fn ipv6_only(gateway: Option<Ipv4Addr>) -> Interface {
    let mut config = InterfaceConfig::ipv6_only(OUR_MAC, v6("fd00::1/64"));
    config.seed = 1;
    config.gateway = gateway;
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096))
}

/// The IPv6-only interface (A) and a dual-stack peer (B), their IPv6
/// addresses past duplicate address detection.
fn ready() -> Wire {
    let mut config = InterfaceConfig::new(MAC_PEER, Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 24).unwrap());
    config.seed = 2;
    config.ipv6 = Some(v6("fd00::2/64"));
    let peer = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096));
    let mut w = Wire::between(ipv6_only(None), peer);
    w.advance(Duration::ZERO);
    w.advance(Duration::from_secs(3));
    assert!(w.a.ipv6_addresses().chain(w.b.ipv6_addresses()).all(|a| a.state == AddrState::Preferred));
    w
}

fn ethertype(frame: &[u8]) -> [u8; 2] {
    [frame[12], frame[13]]
}

#[test]
fn tcp_and_udp_over_ipv6_with_a_dual_stack_peer() {
    let mut w = ready();
    assert!(!w.a.speaks_ipv4());
    assert!(w.a.config().addresses.is_empty());

    // TCP: the peer connects to A's listener on every address, as to a
    // service; data both ways.
    let l = w.a.tcp().listen(SocketAddr::from(sa(Ipv6Addr::UNSPECIFIED, 7)), 4).unwrap();
    let c = w.b.tcp().connect(sa(ip("fd00::1"), 7), 0, w.now).unwrap();
    w.advance(Duration::from_millis(10));
    let s = w.a.tcp().accept(l).unwrap().expect("the handshake completed");
    assert_eq!(w.b.tcp_ref().state(c).unwrap(), State::Established);
    assert_eq!(w.a.tcp_ref().connection(s).unwrap().local(), SocketAddr::from(sa(ip("fd00::1"), 7)));
    assert_eq!(w.b.tcp().send(c, b"hello over IPv6", w.now).unwrap(), 15);
    w.advance(Duration::from_millis(10));
    let mut buf = [0u8; 64];
    let n = w.a.tcp().recv(s, &mut buf, w.now).unwrap();
    assert_eq!(&buf[..n], b"hello over IPv6");
    assert_eq!(w.a.tcp().send(s, &buf[..n], w.now).unwrap(), n);
    w.advance(Duration::from_millis(10));
    let n = w.b.tcp().recv(c, &mut buf, w.now).unwrap();
    assert_eq!(&buf[..n], b"hello over IPv6");

    // A connects out too, from its address.
    let l6 = w.b.tcp().listen(SocketAddr::from(sa(Ipv6Addr::UNSPECIFIED, 80)), 4).unwrap();
    let out = w.a.tcp().connect(sa(ip("fd00::2"), 80), 0, w.now).unwrap();
    w.advance(Duration::from_millis(10));
    assert!(w.b.tcp().accept(l6).unwrap().is_some());
    assert_eq!(w.a.tcp_ref().state(out).unwrap(), State::Established);
    assert_eq!(w.a.tcp_ref().connection(out).unwrap().local().ip(), ip("fd00::1"));

    // UDP both ways.
    let ua = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 4000)).unwrap();
    let ub = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 5000)).unwrap();
    w.b.udp().send_to6(ub, b"ping", sa(ip("fd00::1"), 4000), w.now).unwrap();
    w.settle();
    let (n, from) = w.a.udp().recv_from6(ua, &mut buf).unwrap().expect("A got the peer's datagram");
    assert_eq!((&buf[..n], from), (&b"ping"[..], sa(ip("fd00::2"), 5000)));
    w.a.udp().send_to6(ua, b"pong", from, w.now).unwrap();
    w.settle();
    let (n, from) = w.b.udp().recv_from6(ub, &mut buf).unwrap().expect("the peer got A's answer");
    assert_eq!((&buf[..n], from), (&b"pong"[..], sa(ip("fd00::1"), 4000)));

    // Nothing but IPv6 left A.
    assert!(!w.sent_by_a.is_empty());
    assert!(w.sent_by_a.iter().all(|f| ethertype(f) == [0x86, 0xdd]), "only IPv6 frames from A");
    assert_eq!(w.a.counters().arp_requests_sent, 0);
}

#[test]
fn arp_and_ipv4_to_it_are_counted_and_dropped() {
    let mut iface = ipv6_only(None);
    let now = Instant::from_secs(1);
    iface.poll(now);
    iface.tx_queue().clear();
    // A socket that would take an IPv4 broadcast on an interface with an
    // IPv4 address.
    let sock = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 68)).unwrap();
    let broadcast = to_link_broadcast(ipv4_from(
        PEER_IP,
        Ipv4Addr::BROADCAST,
        64,
        IpProtocol::Udp,
        &udp_datagram(PEER_IP, Ipv4Addr::BROADCAST, 68, b"offer"),
    ));
    let frames = [
        to_link_broadcast(arp(ArpOperation::Request)),
        arp(ArpOperation::Reply),
        icmp(8, b"echo?"),
        udp(7, b"echo?"),
        broadcast,
    ];
    for frame in &frames {
        feed(&mut iface, frame, 2048, now);
    }
    iface.poll(now);
    assert_eq!(iface.counters().drop_eth_unknown_type, frames.len() as u64);
    assert_eq!(iface.counters().rx_frames, frames.len() as u64);
    assert_eq!(iface.counters().arp_replies_received, 0);
    assert!(iface.tx_queue().is_empty(), "nothing answered");
    assert_eq!(iface.arp_lookup(PEER_IP, now), None, "no neighbour learned");
    let mut buf = [0u8; 64];
    assert_eq!(iface.udp().recv_from(sock, &mut buf).unwrap(), None, "the broadcast was not delivered");
}

#[test]
fn ipv4_sends_fail_without_a_route_but_loopback_works() {
    // A gateway with no address of ours to send from changes nothing.
    let mut iface = ipv6_only(Some(Ipv4Addr::new(10, 0, 0, 254)));
    let now = Instant::from_secs(1);
    iface.poll(now);
    iface.tx_queue().clear();
    let peer = SocketAddrV4::new(PEER_IP, 9);

    let sock = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000)).unwrap();
    assert_eq!(iface.udp().send_to(sock, b"x", peer, now), Err(Error::NoRoute));
    let limited = SocketAddrV4::new(Ipv4Addr::BROADCAST, 9);
    assert_eq!(iface.udp().send_to(sock, b"x", limited, now), Err(Error::NoRoute));
    assert_eq!(iface.tcp().connect(peer, 0, now), Err(Error::NoRoute));
    let echo = iface.icmp().echo_open(1).unwrap();
    assert_eq!(iface.icmp().echo_send(echo, PEER_IP, 1, b"x", now), Err(Error::NoRoute));
    iface.poll(now);
    assert!(iface.tx_queue().is_empty(), "nothing IPv4 reached the link");

    // 127.0.0.1 is local as on every interface.
    let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 6000);
    let there = iface.udp().bind(lo).unwrap();
    iface.udp().send_to(sock, b"local", lo, now).unwrap();
    iface.poll(now);
    let mut buf = [0u8; 64];
    let (n, from) = iface.udp().recv_from(there, &mut buf).unwrap().expect("delivered on loopback");
    assert_eq!((&buf[..n], from), (&b"local"[..], SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5000)));
    assert!(iface.tx_queue().is_empty());
}
