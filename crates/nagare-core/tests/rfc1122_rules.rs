//! The host requirements (RFC 1122) the receive path must keep: which
//! sources are accepted, when ICMP errors may be sent, where errors go.

mod common;

use common::*;
use nagare_core::buf::BufferPool;
use nagare_core::icmp::IcmpError;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{IpProtocol, Ipv4Addr};
use std::net::SocketAddrV4;
use std::time::Duration;

fn interface() -> Interface {
    let mut config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    config.gateway = Some(Ipv4Addr::new(10, 0, 0, 254));
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 256))
}

#[test]
fn no_icmp_error_for_a_link_layer_broadcast() {
    let mut iface = interface();
    let datagram = udp_datagram(PEER_IP, OUR_IP, 9, b"to a closed port");
    let frame = to_link_broadcast(ipv4_from(PEER_IP, OUR_IP, 64, IpProtocol::Udp, &datagram));
    feed(&mut iface, &frame, 2000, Instant::from_secs(1));
    assert_eq!(iface.counters().drop_udp_no_socket, 1);
    assert_eq!(iface.counters().icmp_errors_sent, 0);
    // The same datagram unicast on the link does get its error.
    let frame = ipv4_from(PEER_IP, OUR_IP, 64, IpProtocol::Udp, &datagram);
    feed(&mut iface, &frame, 2000, Instant::from_secs(1));
    assert_eq!(iface.counters().icmp_errors_sent, 1);
}

#[test]
fn sources_that_are_no_single_host_are_dropped() {
    let mut iface = interface();
    let sink = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    for src in [
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::new(240, 0, 0, 1),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(10, 0, 0, 255),
        OUR_IP,
    ] {
        let datagram = udp_datagram(src, OUR_IP, 7, b"spoofed");
        feed(&mut iface, &ipv4_from(src, OUR_IP, 64, IpProtocol::Udp, &datagram), 2000, Instant::from_secs(1));
    }
    assert_eq!(iface.counters().drop_ip_bad_source, 7);
    assert!(iface.udp().recv(sink).unwrap().is_none());
    assert!(iface.tx_queue().is_empty(), "nothing answers a martian");
}

#[test]
fn a_host_delivers_datagrams_whatever_their_ttl() {
    let mut iface = interface();
    let sink = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    for ttl in [0u8, 1] {
        let datagram = udp_datagram(PEER_IP, OUR_IP, 7, b"last hop");
        feed(&mut iface, &ipv4_from(PEER_IP, OUR_IP, ttl, IpProtocol::Udp, &datagram), 2000, Instant::from_secs(1));
        assert!(iface.udp().recv(sink).unwrap().is_some(), "ttl {ttl}");
    }
}

#[test]
fn broadcasts_reach_only_wildcard_sockets() {
    let mut iface = interface();
    let bound = iface.udp().bind(SocketAddrV4::new(OUR_IP, 7)).unwrap();
    let broadcast = Ipv4Addr::new(10, 0, 0, 255);
    let datagram = udp_datagram(PEER_IP, broadcast, 7, b"everyone");
    let frame = to_link_broadcast(ipv4_from(PEER_IP, broadcast, 64, IpProtocol::Udp, &datagram));
    feed(&mut iface, &frame, 2000, Instant::from_secs(1));
    assert!(iface.udp().recv(bound).unwrap().is_none());
    iface.udp().close(bound).unwrap();
    let wildcard = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    feed(&mut iface, &frame, 2000, Instant::from_secs(1));
    assert!(iface.udp().recv(wildcard).unwrap().is_some());
}

#[test]
fn unresolved_neighbour_is_reported_once_to_the_right_socket() {
    let mut iface = interface();
    let sender = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4000)).unwrap();
    // A socket whose port equals the payload bytes a non-first fragment
    // would show where a UDP header would be.
    let bystander = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0x4141)).unwrap();
    let t0 = Instant::from_secs(1);
    iface.udp().send_to(sender, &[0x41; 3000], SocketAddrV4::new(PEER_IP, 7), t0).unwrap();
    for s in 1..=3 {
        iface.poll(t0 + Duration::from_secs(s));
        iface.tx_queue().clear();
    }
    assert_eq!(iface.counters().drop_arp_unresolved, 3, "three fragments waited");
    assert_eq!(iface.udp().take_error(sender).unwrap(), Some(IcmpError::Unreachable { from: OUR_IP, code: 1 }));
    assert_eq!(iface.udp().take_error(bystander).unwrap(), None);
}

#[test]
fn an_arp_claim_to_our_address_is_not_cached() {
    let mut iface = interface();
    let mut body = vec![0u8; 28];
    nagare_wire::ArpRepr::EthernetIpv4 {
        operation: nagare_wire::ArpOperation::Request,
        source_hardware_addr: PEER_MAC,
        source_protocol_addr: OUR_IP,
        target_hardware_addr: nagare_wire::EthernetAddress([0; 6]),
        target_protocol_addr: OUR_IP,
    }
    .emit(&mut body)
    .unwrap();
    feed(&mut iface, &ethernet(nagare_wire::EtherType::Arp, &body), 2000, Instant::from_secs(1));
    assert_eq!(iface.counters().drop_arp_conflict, 1);
    assert_eq!(iface.arp_cache_len(), 0);
}
