//! UDP over IPv6 between two interfaces wired back to back by moving their
//! transmit queues, in virtual time: datagrams both ways on link-local and
//! configured addresses, one past the MTU, a closed port (and its error
//! kept for the socket that sent to it, a connected one's about its peer
//! only), checksums zero
//! and wrong, what the device says of a frame's checksum (partial, as
//! Linux hands a TAP's frames over with offloads; verified), and the
//! receive queue's bound.

mod common;

use common::wire::Wire;
use common::{feed, feed_with};
use nagare_core::buf::{BufferPool, ChecksumState, Offload};
use nagare_core::icmp::IcmpError;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::{Capabilities, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{EthernetAddress, IpProtocol, Ipv4Addr, Ipv6Addr, Ipv6Packet, Ipv6Repr};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn sa(ip: Ipv6Addr, port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(ip, port, 0, 0)
}

fn iface_with(mac: EthernetAddress, v4: u8, v6: &str, queue_packets: usize) -> Interface {
    let v4 = nagare_wire::Ipv4Cidr::new(Ipv4Addr::new(192, 168, 9, v4), 24).unwrap();
    let mut config = InterfaceConfig::new(mac, v4);
    config.seed = u64::from(mac.0[5]);
    config.udp_rx_queue_packets = queue_packets;
    config.ipv6 = Some(Ipv6Config { addresses: vec![v6.parse::<Ipv6Cidr>().unwrap()], ..Ipv6Config::default() });
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

impl Wire {
    /// A wire whose addresses have all passed duplicate address detection;
    /// A's sockets hold at most `queue_packets` datagrams.
    fn ready(queue_packets: usize) -> Wire {
        let mut w =
            Wire::between(iface_with(MAC_A, 1, "fd00::1/64", queue_packets), iface_with(MAC_B, 2, "fd00::2/64", 1024));
        w.advance(Duration::ZERO);
        w.advance(Duration::from_secs(3));
        assert!(w.a.ipv6_addresses().chain(w.b.ipv6_addresses()).all(|a| a.state == AddrState::Preferred));
        w
    }
}

/// A frame from B to A holding UDP over IPv6 from `src` port 5000 to `dst`
/// port `dst_port`, with `checksum` in the UDP header (`None`: the right
/// one).
fn udp6_frame(src: Ipv6Addr, dst: Ipv6Addr, dst_port: u16, data: &[u8], checksum: Option<u16>) -> Vec<u8> {
    let len = 8 + data.len();
    let mut udp = Vec::with_capacity(len);
    udp.extend(5000u16.to_be_bytes());
    udp.extend(dst_port.to_be_bytes());
    udp.extend((len as u16).to_be_bytes());
    udp.extend([0, 0]);
    udp.extend(data);
    let mut sum = nagare_wire::pseudo_header_v6(src, dst, 17, len as u32);
    sum.add_bytes(&udp);
    let right = match sum.finish() {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&checksum.unwrap_or(right).to_be_bytes());
    let mut ip = vec![0u8; 40];
    Ipv6Repr::new(src, dst, IpProtocol::Udp, len, 64).emit(&mut ip).unwrap();
    let mut frame = Vec::new();
    frame.extend(MAC_A.0);
    frame.extend(MAC_B.0);
    frame.extend([0x86, 0xdd]);
    frame.extend(ip);
    frame.extend(udp);
    frame
}

#[test]
fn datagrams_both_ways_on_configured_and_link_local_addresses() {
    let mut w = Wire::ready(1024);
    let ll_a = w.a.ipv6_link_local().unwrap();
    let ll_b = w.b.ipv6_link_local().unwrap();
    let sa_ = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 4000)).unwrap();
    let sb = w.b.udp().bind6(sa(ip("fd00::2"), 5000)).unwrap();
    w.a.udp().send_to6(sa_, b"ping", sa(ip("fd00::2"), 5000), w.now).unwrap();
    w.settle();
    let mut buf = [0u8; 64];
    let (n, from) = w.b.udp().recv_from6(sb, &mut buf).unwrap().expect("B got A's datagram");
    assert_eq!((&buf[..n], from), (&b"ping"[..], sa(ip("fd00::1"), 4000)), "source of the global's scope");
    w.b.udp().send_to6(sb, b"pong", from, w.now).unwrap();
    w.settle();
    let got = w.a.udp().recv6(sa_).unwrap().expect("A got B's answer");
    assert_eq!(
        (got.payload.to_vec(), got.source, got.destination.ip()),
        (b"pong".to_vec(), sa(ip("fd00::2"), 5000), &ip("fd00::1"))
    );

    // Link-local both ways: A's wildcard socket picks its link-local source.
    let sb_ll = w.b.udp().bind6(sa(ll_b, 6000)).unwrap();
    w.a.udp().send_to6(sa_, b"local", sa(ll_b, 6000), w.now).unwrap();
    w.settle();
    let (n, from) = w.b.udp().recv_from6(sb_ll, &mut buf).unwrap().expect("B got it on its link-local");
    assert_eq!((&buf[..n], from), (&b"local"[..], sa(ll_a, 4000)));
    w.b.udp().send_to6(sb_ll, b"back", from, w.now).unwrap();
    w.settle();
    let (n, from) = w.a.udp().recv_from6(sa_, &mut buf).unwrap().expect("A got the link-local answer");
    assert_eq!((&buf[..n], from), (&b"back"[..], sa(ll_b, 6000)));
    // B's socket bound to its global gets nothing sent to its link-local.
    assert_eq!(w.b.udp().recv6(sb).unwrap().map(|d| d.payload.len()), None);
    assert_eq!(w.a.counters().udp6_delivered, 2);
    assert_eq!(w.b.counters().udp6_delivered, 2);
    assert_eq!(w.a.counters().udp6_sent, 2);
}

#[test]
fn a_port_is_bound_once_per_family() {
    let mut w = Wire::ready(1024);
    let v4 = w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000)).unwrap();
    let v6 = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 7000)).unwrap();
    assert_ne!(v4, v6);
    assert_eq!(w.a.udp().bind6(sa(ip("fd00::1"), 7000)), Err(nagare_core::iface::Error::AddrInUse));
    assert_eq!(w.a.udp().bind6(sa(ip("fd00::9"), 7001)), Err(nagare_core::iface::Error::AddrNotAvailable));
    assert_eq!(
        w.a.udp().send_to(v6, b"x", SocketAddrV4::new(Ipv4Addr::new(192, 168, 9, 2), 1), w.now),
        Err(nagare_core::iface::Error::Unaddressable),
        "an IPv6 socket does not send over IPv4"
    );
    // The IPv6 datagram goes to the IPv6 socket only.
    let sb = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 0)).unwrap();
    w.b.udp().send_to6(sb, b"six", sa(ip("fd00::1"), 7000), w.now).unwrap();
    w.settle();
    assert!(w.a.udp().recv(v4).unwrap().is_none());
    assert_eq!(w.a.udp().recv6(v6).unwrap().map(|d| d.payload.to_vec()), Some(b"six".to_vec()));
    w.a.udp().close(v6).unwrap();
    w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 7000)).expect("closing frees the IPv6 port");
    assert_eq!(w.a.udp_ref().socket(v4).map(|s| s.local().port()), Some(7000), "the IPv4 socket keeps its port");
}

#[test]
fn a_dual_stack_socket_takes_both_families_on_its_port_and_answers_each() {
    let mut w = Wire::ready(1024);
    let dual = w.a.udp().bind6_dual_stack(7100).unwrap();
    assert!(w.a.udp_ref().socket(dual).is_some_and(|s| s.is_dual_stack()));
    let taken = nagare_core::iface::Error::AddrInUse;
    assert_eq!(w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7100)), Err(taken));
    let b4 = w.b.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5100)).unwrap();
    let b6 = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 5106)).unwrap();
    let a4 = SocketAddrV4::new(Ipv4Addr::new(192, 168, 9, 1), 7100);
    w.b.udp().send_to(b4, b"over four", a4, w.now).unwrap();
    w.settle();
    w.b.udp().send_to6(b6, b"over six", sa(ip("fd00::1"), 7100), w.now).unwrap();
    w.settle();
    let (from4, data) = w.a.udp().recv_any(dual).unwrap().expect("the IPv4 datagram");
    assert_eq!(
        (from4, data.to_vec()),
        (SocketAddrV4::new(Ipv4Addr::new(192, 168, 9, 2), 5100).into(), b"over four".to_vec())
    );
    let (from6, data) = w.a.udp().recv_any(dual).unwrap().expect("the IPv6 datagram");
    assert_eq!((from6, data.to_vec()), (sa(ip("fd00::2"), 5106).into(), b"over six".to_vec()));
    assert!(w.a.udp().recv_any(dual).unwrap().is_none());
    assert_eq!(w.a.udp_ref().socket(dual).map(|s| s.queued_bytes()), Some(0));
    // Answers go out in each sender's family, from the socket's port.
    let std::net::SocketAddr::V4(back4) = from4 else { unreachable!() };
    w.a.udp().send_to(dual, b"four back", back4, w.now).unwrap();
    w.a.udp().send_to6(dual, b"six back", sa(ip("fd00::2"), 5106), w.now).unwrap();
    w.settle();
    let mut buf = [0u8; 64];
    let (n, from) = w.b.udp().recv_from(b4, &mut buf).unwrap().expect("B's IPv4 socket got the answer");
    assert_eq!((&buf[..n], from), (&b"four back"[..], a4));
    let (n, from) = w.b.udp().recv_from6(b6, &mut buf).unwrap().expect("B's IPv6 socket got the answer");
    assert_eq!((&buf[..n], from), (&b"six back"[..], sa(ip("fd00::1"), 7100)));
    // Closed, it frees the port in both families.
    w.a.udp().close(dual).unwrap();
    w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7100)).expect("the IPv4 port is free");
    w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 7100)).expect("the IPv6 port is free");
}

#[test]
fn a_datagram_past_the_mtu_arrives_whole() {
    let mut w = Wire::ready(1024);
    let sa_ = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 4000)).unwrap();
    let sb = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 5000)).unwrap();
    let data: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
    w.a.udp().send_to6(sa_, &data, sa(ip("fd00::2"), 5000), w.now).unwrap();
    w.settle();
    assert!(w.a.counters().ip6_frag_sent >= 3);
    assert!(w.sent_by_a.iter().all(|f| f.len() <= 14 + 1500));
    let got = w.b.udp().recv6(sb).unwrap().expect("reassembled and delivered");
    assert_eq!(got.payload.to_vec(), data);
    assert_eq!(w.b.counters().ip6_frag_reassembled, 1);
}

#[test]
fn a_closed_port_is_answered_with_port_unreachable() {
    let mut w = Wire::ready(1024);
    let sb = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 5000)).unwrap();
    w.b.udp().send_to6(sb, b"anyone?", sa(ip("fd00::1"), 9), w.now).unwrap();
    w.settle();
    assert_eq!(w.a.counters().drop_udp6_no_socket, 1);
    let errors: Vec<_> = w
        .sent_by_a
        .iter()
        .filter(|f| f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[54] == 1)
        .map(|f| (f[55], Ipv6Packet::new_unchecked(&f[14..]).dst_addr(), f[62 + 40 + 2..62 + 40 + 4].to_vec()))
        .collect();
    assert_eq!(errors, [(4, ip("fd00::2"), 9u16.to_be_bytes().to_vec())], "code 4, quoting the datagram");
    assert_eq!(w.a.counters().icmp6_errors_sent, 1);
    assert_eq!(w.b.counters().icmp6_errors_received, 1);

    // Rate limited through the ICMP token bucket: a burst is not all answered.
    for _ in 0..200 {
        w.b.udp().send_to6(sb, b"anyone?", sa(ip("fd00::1"), 9), w.now).unwrap();
    }
    w.settle();
    assert_eq!(w.a.counters().drop_udp6_no_socket, 201);
    assert!(w.a.counters().icmp6_errors_rate_limited > 0);
    assert_eq!(w.a.counters().icmp6_errors_sent + w.a.counters().icmp6_errors_rate_limited, 201);

    // Never about a datagram to a multicast group.
    let before = w.a.counters().icmp6_errors_sent + w.a.counters().icmp6_errors_rate_limited;
    let ll_b = w.b.ipv6_link_local().unwrap();
    let mut frame = udp6_frame(ll_b, ip("ff02::1"), 9, b"all", None);
    frame[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    w.now += Duration::from_secs(10);
    feed(&mut w.a, &frame, 2048, w.now);
    assert_eq!(w.a.counters().drop_udp6_no_socket, 202);
    assert_eq!(w.a.counters().icmp6_errors_sent + w.a.counters().icmp6_errors_rate_limited, before);
}

/// The port unreachable B gets back is kept for the socket that sent the
/// datagram; once the socket is connected, only an error about a datagram
/// to its peer is.
#[test]
fn a_port_unreachable_reaches_the_sending_socket_and_a_connected_one_hears_of_its_peer_only() {
    let mut w = Wire::ready(1024);
    let sb = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 5000)).unwrap();
    w.b.udp().send_to6(sb, b"anyone?", sa(ip("fd00::1"), 9), w.now).unwrap();
    w.settle();
    let refused = Some(IcmpError::Unreachable6 { from: ip("fd00::1"), code: 4 });
    assert_eq!(w.b.udp().take_error(sb).unwrap(), refused);
    assert_eq!(w.b.udp().take_error(sb).unwrap(), None, "taken once");

    w.b.udp().connect(sb, Some(SocketAddr::V6(sa(ip("fd00::1"), 10)))).unwrap();
    assert_eq!(w.b.udp_ref().socket(sb).unwrap().peer(), Some(SocketAddr::V6(sa(ip("fd00::1"), 10))));
    w.now += Duration::from_secs(1);
    w.b.udp().send_to6(sb, b"not the peer", sa(ip("fd00::1"), 9), w.now).unwrap();
    w.settle();
    assert_eq!(w.b.udp().take_error(sb).unwrap(), None, "about another destination");
    w.now += Duration::from_secs(1);
    w.b.udp().send_to6(sb, b"the peer", sa(ip("fd00::1"), 10), w.now).unwrap();
    w.settle();
    assert_eq!(w.b.udp().take_error(sb).unwrap(), refused);
    assert_eq!(w.b.counters().icmp6_errors_received, 3);
    // A peer of the other family, or without a port, is refused.
    let v4 = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(192, 168, 9, 1), 9));
    assert!(w.b.udp().connect(sb, Some(v4)).is_err());
    assert!(w.b.udp().connect(sb, Some(SocketAddr::V6(sa(ip("fd00::1"), 0)))).is_err());
    w.b.udp().connect(sb, None).unwrap();
    assert_eq!(w.b.udp_ref().socket(sb).unwrap().peer(), None);
}

#[test]
fn zero_and_wrong_checksums_are_dropped_and_counted() {
    let mut w = Wire::ready(1024);
    let sa_ = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 4000)).unwrap();
    let (b, a) = (ip("fd00::2"), ip("fd00::1"));
    feed(&mut w.a, &udp6_frame(b, a, 4000, b"zero", Some(0)), 2048, w.now);
    assert_eq!(w.a.counters().drop_udp6_zero_checksum, 1);
    feed(&mut w.a, &udp6_frame(b, a, 4000, b"bad", Some(0x1234)), 2048, w.now);
    assert_eq!(w.a.counters().drop_udp6_checksum, 1);
    assert!(w.a.udp().recv6(sa_).unwrap().is_none());
    // The same datagram with its checksum right is taken, even in pieces.
    feed(&mut w.a, &udp6_frame(b, a, 4000, b"good", None), 7, w.now);
    assert_eq!(w.a.udp().recv6(sa_).unwrap().map(|d| d.payload.to_vec()), Some(b"good".to_vec()));
    assert_eq!(w.a.counters().udp6_delivered, 1);
    // A length past the packet is malformed.
    let mut short = udp6_frame(b, a, 4000, b"len", None);
    short[14 + 40 + 4..14 + 40 + 6].copy_from_slice(&200u16.to_be_bytes());
    feed(&mut w.a, &short, 2048, w.now);
    assert_eq!(w.a.counters().drop_udp6_malformed, 1);
}

#[test]
fn the_devices_word_on_the_checksum_is_taken() {
    let mut w = Wire::ready(1024);
    let sa_ = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 4000)).unwrap();
    let (b, a) = (ip("fd00::2"), ip("fd00::1"));
    // Linux leaves a checksum partial on a TAP with offloads (the field
    // holds only the pseudo-header's sum) and says so in the frame's
    // header; one it has checked, it says is verified.
    let partial = Offload::checksum(ChecksumState::Partial);
    feed_with(&mut w.a, &udp6_frame(b, a, 4000, b"partial", Some(0x1234)), 2048, partial, w.now);
    let verified = Offload::checksum(ChecksumState::Verified);
    feed_with(&mut w.a, &udp6_frame(b, a, 4000, b"verified", Some(0x1234)), 7, verified, w.now);
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| w.a.udp().recv6(sa_).unwrap().map(|d| d.payload.to_vec())).collect();
    assert_eq!(got, [b"partial".to_vec(), b"verified".to_vec()]);
    assert_eq!(w.a.counters().drop_udp6_checksum, 0);
    // A super-frame of UDP datagrams is not taken as one datagram.
    feed_with(&mut w.a, &udp6_frame(b, a, 4000, b"segmented", None), 2048, Offload::udp_segments(4), w.now);
    assert_eq!(w.a.counters().drop_udp_bad_segmentation, 1);
    assert_eq!(w.a.counters().udp6_delivered, 2);
}

#[test]
fn the_receive_queue_bound_holds() {
    let mut w = Wire::ready(4);
    let sa_ = w.a.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 4000)).unwrap();
    let sb = w.b.udp().bind6(sa(Ipv6Addr::UNSPECIFIED, 5000)).unwrap();
    for i in 0..10u8 {
        w.b.udp().send_to6(sb, &[i], sa(ip("fd00::1"), 4000), w.now).unwrap();
    }
    w.settle();
    let socket = w.a.udp_ref().socket(sa_).unwrap();
    assert_eq!((socket.queued(), socket.dropped()), (4, 6));
    assert_eq!((w.a.counters().udp6_delivered, w.a.counters().drop_udp6_queue_full), (4, 6));
    let first: Vec<u8> = (0..4).map(|_| w.a.udp().recv6(sa_).unwrap().unwrap().payload.to_vec()[0]).collect();
    assert_eq!(first, [0, 1, 2, 3]);
    assert!(w.a.udp().recv6(sa_).unwrap().is_none());
}
