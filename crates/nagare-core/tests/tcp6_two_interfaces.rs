//! TCP over IPv6 between two interfaces wired back to back, in virtual
//! time: a transfer each way on configured and link-local addresses, the
//! MSS IPv6 leaves, super-segments over a device that cuts them, a
//! dual-stack listener beside a v6-only one, SYN cookies, and the segments
//! a receiver must drop or answer with a reset.

mod common;

use common::feed;
use common::wire::Wire;
use nagare_core::buf::{BufferPool, TxOffloads};
use nagare_core::iface::Error;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::tcp::connection::State;
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{Capabilities, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{EthernetAddress, IpProtocol, Ipv4Addr, Ipv6Addr, Ipv6Repr, TcpFlags, TcpRepr, TcpSeqNumber};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const A4: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 1);
const B4: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 2);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn sa(ip: Ipv6Addr, port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(ip, port, 0, 0)
}

fn iface_with(mac: EthernetAddress, v4: Ipv4Addr, v6: &str, offloads: TxOffloads) -> Interface {
    let mut config = InterfaceConfig::new(mac, nagare_wire::Ipv4Cidr::new(v4, 24).unwrap());
    config.seed = u64::from(mac.0[5]);
    config.ipv6 = Some(Ipv6Config { addresses: vec![v6.parse::<Ipv6Cidr>().unwrap()], ..Ipv6Config::default() });
    let caps = Capabilities { tx_offloads: offloads, ..Capabilities::default() };
    Interface::new(config, caps, BufferPool::new(2048, 4096))
}

/// A wire whose IPv6 addresses have all passed duplicate address
/// detection.
fn ready(offloads: TxOffloads) -> Wire {
    let a = iface_with(MAC_A, A4, "fd00::1/64", offloads);
    let b = iface_with(MAC_B, B4, "fd00::2/64", offloads);
    let mut w = Wire::between(a, b);
    w.advance(Duration::ZERO);
    w.advance(Duration::from_secs(3));
    assert!(w.a.ipv6_addresses().chain(w.b.ipv6_addresses()).all(|a| a.state == AddrState::Preferred));
    w
}

/// Connects A to `to` on B's listener `l` and returns both ends.
fn connect(w: &mut Wire, l: TcpListenerHandle, to: SocketAddr) -> (TcpHandle, TcpHandle) {
    let c = w.a.tcp().connect(to, 0, w.now).unwrap();
    w.advance(Duration::from_millis(10));
    let s = w.b.tcp().accept(l).unwrap().expect("the handshake completed");
    assert_eq!(w.a.tcp_ref().state(c).unwrap(), State::Established);
    (c, s)
}

/// Sends `data` from `from` on A to `to` on B and returns what B read.
fn transfer(w: &mut Wire, from: TcpHandle, to: TcpHandle, data: &[u8]) -> Vec<u8> {
    transfer_way(w, (from, to), data, false)
}

/// As [`transfer`], from B's `ends.0` to A's `ends.1` when `b_to_a`.
fn transfer_way(w: &mut Wire, (from, to): (TcpHandle, TcpHandle), data: &[u8], b_to_a: bool) -> Vec<u8> {
    let mut sent = 0;
    let mut got = Vec::new();
    for _ in 0..10_000 {
        let sender = if b_to_a { &mut w.b } else { &mut w.a };
        sent += send_some(sender, from, &data[sent..], w.now);
        w.advance(Duration::from_millis(1));
        let receiver = if b_to_a { &mut w.a } else { &mut w.b };
        read_all(receiver, to, &mut got, w.now);
        if got.len() == data.len() {
            break;
        }
    }
    got
}

/// What of `data` the connection takes now.
fn send_some(iface: &mut Interface, h: TcpHandle, data: &[u8], now: nagare_core::Instant) -> usize {
    if data.is_empty() {
        return 0;
    }
    match iface.tcp().send(h, data, now) {
        Ok(n) => n,
        Err(Error::WouldBlock) => 0,
        Err(e) => panic!("send: {e:?}"),
    }
}

/// Appends to `out` everything the connection has received.
fn read_all(iface: &mut Interface, h: TcpHandle, out: &mut Vec<u8>, now: nagare_core::Instant) {
    let mut buf = vec![0u8; 65536];
    loop {
        match iface.tcp().recv(h, &mut buf, now) {
            Ok(0) | Err(Error::WouldBlock) => return,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => panic!("recv: {e:?}"),
        }
    }
}

/// The IPv6 frames (next header, payload) `frames` holds.
fn ipv6_packets(frames: &[Vec<u8>]) -> Vec<(u8, Vec<u8>)> {
    frames.iter().filter(|f| f[12..14] == [0x86, 0xdd]).map(|f| (f[14 + 6], f[14 + 40..].to_vec())).collect()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_connection_over_ipv6_carries_data_both_ways_and_closes() {
    let mut w = ready(TxOffloads::NONE);
    let l = w.b.tcp().listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8).unwrap();
    let (c, s) = connect(&mut w, l, sa(ip("fd00::2"), 80).into());
    let local = w.a.tcp_ref().connection(c).unwrap().local();
    assert_eq!(local.ip(), ip("fd00::1"), "the source is A's address of the destination's scope");
    assert_eq!(w.b.tcp_ref().connection(s).unwrap().remote(), local);

    let data = pattern(300_000);
    assert_eq!(transfer(&mut w, c, s, &data), data);
    let back = pattern(70_000);
    assert_eq!(transfer_way(&mut w, (s, c), &back, true), back);

    // The SYN announced what a 1500-byte link leaves after 40 + 20 bytes
    // of headers, and no segment needed a fragment.
    let from_a = ipv6_packets(&w.sent_by_a);
    let syn = from_a.iter().find(|(nh, p)| *nh == 6 && p[13] & 0x02 != 0).expect("A's SYN went over IPv6");
    assert_eq!(&syn.1[20..24], &[2, 4, 0x05, 0xa0], "MSS 1440");
    let tcp_frames = from_a.iter().filter(|(nh, _)| *nh == 6).count();
    assert!(tcp_frames > 200, "{tcp_frames} TCP frames over IPv6");
    assert!(from_a.iter().all(|(nh, _)| *nh != 44), "no fragment header");
    assert!(w.sent_by_a.iter().all(|f| f.len() <= 1514));
    let counters = w.a.counters();
    assert!(counters.tcp6_segments_sent >= tcp_frames as u64);
    assert_eq!(counters.tcp6_segments_sent, counters.tcp_segments_sent);
    assert_eq!(counters.tcp6_segments_received, counters.tcp_segments_received);
    assert_eq!(counters.drop_tcp_checksum + w.b.counters().drop_tcp_checksum, 0);

    w.a.tcp().close(c, w.now).unwrap();
    w.b.tcp().close(s, w.now).unwrap();
    w.advance(Duration::from_secs(1));
    assert!(w.b.tcp_ref().connection(s).is_none());
}

#[test]
fn link_local_addresses_carry_a_connection() {
    let mut w = ready(TxOffloads::NONE);
    let b_link_local = w.b.ipv6_link_local().unwrap();
    let l = w.b.tcp().listen(sa(b_link_local, 22), 4).unwrap();
    let (c, s) = connect(&mut w, l, sa(b_link_local, 22).into());
    assert_eq!(w.a.tcp_ref().connection(c).unwrap().local().ip(), w.a.ipv6_link_local().unwrap());
    assert_eq!(transfer(&mut w, c, s, b"over fe80::/10"), b"over fe80::/10");
}

#[test]
fn over_a_device_that_cuts_super_segments_none_is_fragmented() {
    let offloads = TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };
    let mut w = ready(offloads);
    let l = w.b.tcp().listen(sa(ip("fd00::2"), 80), 8).unwrap();
    let (c, s) = connect(&mut w, l, sa(ip("fd00::2"), 80).into());
    let data = pattern(1_000_000);
    assert_eq!(transfer(&mut w, c, s, &data), data);
    let from_a = ipv6_packets(&w.sent_by_a);
    assert!(from_a.iter().all(|(nh, _)| *nh != 44), "a super-segment is the device's to cut");
    let largest = from_a.iter().filter(|(nh, _)| *nh == 6).map(|(_, p)| p.len()).max().unwrap();
    assert!(largest > 1500, "super-segments went whole ({largest} bytes)");
    assert!(40 + largest <= 65535, "the IPv6 packet fits a device's 64 KiB ({largest} bytes of payload)");
}

#[test]
fn a_dual_stack_listener_takes_both_families_and_a_v6_only_one_takes_ipv6_alone() {
    let mut w = ready(TxOffloads::NONE);
    let dual = w.b.tcp().listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8).unwrap();
    assert_eq!(w.b.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8), Err(Error::AddrInUse));
    assert_eq!(w.b.tcp().listen(sa(ip("fd00::2"), 80), 8), Err(Error::AddrInUse));

    let (c6, s6) = connect(&mut w, dual, sa(ip("fd00::2"), 80).into());
    let (c4, s4) = connect(&mut w, dual, SocketAddrV4::new(B4, 80).into());
    assert_eq!(w.b.tcp_ref().connection(s6).unwrap().remote().ip(), ip("fd00::1"));
    assert_eq!(w.b.tcp_ref().connection(s4).unwrap().remote(), w.a.tcp_ref().connection(c4).unwrap().local());
    assert!(w.b.tcp_ref().connection(s4).unwrap().local().is_ipv4(), "an IPv4 connection keeps IPv4 addresses");
    assert_eq!(transfer(&mut w, c6, s6, b"six"), b"six");
    assert_eq!(transfer(&mut w, c4, s4, b"four"), b"four");

    // An IPv4-mapped destination is its IPv4 address.
    let mapped = sa(B4.to_ipv6_mapped(), 80);
    let (cm, _) = connect(&mut w, dual, mapped.into());
    assert_eq!(w.a.tcp_ref().connection(cm).unwrap().remote(), SocketAddrV4::new(B4, 80).into());

    w.b.tcp().listener_close(dual, w.now).unwrap();
    let only6 = w.b.tcp().listen_v6_only(sa(Ipv6Addr::UNSPECIFIED, 80), 8).unwrap();
    let refused = w.a.tcp().connect(SocketAddrV4::new(B4, 80), 0, w.now).unwrap();
    w.advance(Duration::from_millis(10));
    assert_eq!(w.a.tcp().recv(refused, &mut [0u8; 4], w.now), Err(Error::ConnectionRefused));
    let four = w.b.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    connect(&mut w, four, SocketAddrV4::new(B4, 80).into());
    connect(&mut w, only6, sa(ip("fd00::2"), 80).into());
}

#[test]
fn a_full_syn_queue_answers_ipv6_syns_with_cookies() {
    let mut w = ready(TxOffloads::NONE);
    let l = w.b.tcp().listen(sa(ip("fd00::2"), 80), 1).unwrap();
    let conns: Vec<TcpHandle> = (0..3).map(|_| w.a.tcp().connect(sa(ip("fd00::2"), 80), 0, w.now).unwrap()).collect();
    w.advance(Duration::from_millis(10));
    assert!(w.b.counters().tcp_syn_cookies_sent >= 1);
    // A cookie's ACK that finds the accept queue full is dropped; the
    // peer's data, retransmitted, completes it once there is room.
    for &c in &conns {
        assert_eq!(w.a.tcp().send(c, b"x", w.now), Ok(1));
    }
    let mut accepted = Vec::new();
    for _ in 0..20 {
        while let Some(s) = w.b.tcp().accept(l).unwrap() {
            accepted.push(s);
        }
        if accepted.len() == conns.len() {
            break;
        }
        w.advance(Duration::from_millis(500));
    }
    assert_eq!(accepted.len(), 3);
    assert!(w.b.counters().tcp_syn_cookies_accepted >= 1);
    for (c, s) in conns.into_iter().zip(accepted) {
        assert_eq!(w.a.tcp_ref().state(c).unwrap(), State::Established);
        let peer = w.b.tcp_ref().connection(s).unwrap().remote();
        assert!(peer.is_ipv6());
    }
}

/// (Connections to `::1` and to ourselves are delivered locally:
/// `local_delivery.rs`.)
#[test]
fn connections_to_multicast_or_unspecified_are_refused_at_once() {
    let mut w = ready(TxOffloads::NONE);
    for to in [ip("ff02::1"), Ipv6Addr::UNSPECIFIED] {
        assert_eq!(w.a.tcp().connect(sa(to, 80), 0, w.now).err(), Some(Error::Unaddressable), "{to}");
    }
}

/// A frame from B to A holding `tcp` (header and data) over IPv6 from
/// `src` to `dst`.
fn tcp6_frame(src: Ipv6Addr, dst: Ipv6Addr, tcp: &[u8], dst_mac: EthernetAddress) -> Vec<u8> {
    let mut ip = vec![0u8; 40];
    Ipv6Repr::new(src, dst, IpProtocol::Tcp, tcp.len(), 64).emit(&mut ip).unwrap();
    let mut frame = Vec::new();
    frame.extend(dst_mac.0);
    frame.extend(MAC_B.0);
    frame.extend([0x86, 0xdd]);
    frame.extend(ip);
    frame.extend(tcp);
    frame
}

fn syn_to(port: u16, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let syn = TcpRepr::bare(5555, port, TcpSeqNumber(1000), None, TcpFlags::SYN);
    let mut tcp = vec![0u8; syn.header_len()];
    syn.emit(&mut tcp, &[], src, dst).unwrap();
    tcp
}

#[test]
fn bad_segments_over_ipv6_are_counted_and_a_closed_port_answers_with_a_reset() {
    let mut w = ready(TxOffloads::NONE);
    let (b6, a6) = (ip("fd00::2"), ip("fd00::1"));
    w.a.tcp().listen(sa(a6, 80), 4).unwrap();
    let before = w.a.counters().clone();

    // A SYN whose checksum covers the wrong pseudo header.
    let mut tcp = syn_to(80, b6, a6);
    tcp[16] ^= 0x40;
    feed(&mut w.a, &tcp6_frame(b6, a6, &tcp, MAC_A), 2048, w.now);
    assert_eq!(w.a.counters().drop_tcp_checksum, before.drop_tcp_checksum + 1);
    // A SYN to the all-nodes group.
    let all_nodes = ip("ff02::1");
    let group_mac = EthernetAddress([0x33, 0x33, 0, 0, 0, 1]);
    feed(&mut w.a, &tcp6_frame(b6, all_nodes, &syn_to(80, b6, all_nodes), group_mac), 2048, w.now);
    assert_eq!(w.a.counters().drop_tcp_broadcast, before.drop_tcp_broadcast + 1);
    // A header shorter than its data offset.
    let mut short = syn_to(80, b6, a6);
    short.truncate(19);
    feed(&mut w.a, &tcp6_frame(b6, a6, &short, MAC_A), 2048, w.now);
    assert_eq!(w.a.counters().drop_tcp_malformed, before.drop_tcp_malformed + 1);
    assert!(w.a.tx_queue().is_empty(), "none of them was answered");

    // A SYN to a closed port: a reset back over IPv6.
    feed(&mut w.a, &tcp6_frame(b6, a6, &syn_to(81, b6, a6), MAC_A), 2048, w.now);
    assert_eq!(w.a.counters().drop_tcp_no_socket, before.drop_tcp_no_socket + 1);
    w.settle();
    let packets = ipv6_packets(&w.sent_by_a);
    let (_, rst) = packets.iter().find(|(nh, _)| *nh == 6).expect("a reset");
    let rst = [&[0u8; 14][..], &[0u8; 40][..], &rst[..]].concat();
    let flags = rst[14 + 40 + 13];
    assert_eq!(flags & 0x04, 0x04, "RST");
    assert_eq!(u16::from_be_bytes([rst[54 + 2], rst[54 + 3]]), 5555, "to the SYN's source port");
    let to_b = w.sent_by_a.iter().find(|f| f[12..14] == [0x86, 0xdd] && f[14 + 6] == 6).unwrap();
    assert_eq!(&to_b[14 + 24..14 + 40], &b6.octets(), "to the SYN's source");
}

#[test]
fn a_connection_to_a_neighbour_that_never_answers_fails_as_unreachable() {
    let mut w = ready(TxOffloads::NONE);
    let c = w.a.tcp().connect(sa(ip("fd00::9"), 80), 0, w.now).unwrap();
    w.advance(Duration::from_secs(5));
    assert_eq!(w.a.tcp().recv(c, &mut [0u8; 4], w.now), Err(Error::HostUnreachable));
    assert_eq!(w.a.counters().tcp_connects_unreachable, 1);
}

/// An ICMPv6 destination unreachable from B (`code`) quoting `packet`, a
/// packet A sent (from its IPv6 header on), as a frame to A.
fn unreachable6(code: u8, packet: &[u8]) -> Vec<u8> {
    let (src, dst) = (ip("fd00::2"), ip("fd00::1"));
    let mut icmp = vec![1, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(packet);
    let mut sum = nagare_wire::pseudo_header_v6(src, dst, 58, icmp.len() as u32);
    sum.add_bytes(&icmp);
    icmp[2..4].copy_from_slice(&sum.finish().to_be_bytes());
    let mut ip6 = vec![0u8; 40];
    Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, icmp.len(), 64).emit(&mut ip6).unwrap();
    [&MAC_A.0[..], &MAC_B.0[..], &[0x86, 0xdd], &ip6, &icmp].concat()
}

#[test]
fn a_destination_unreachable_about_the_syn_fails_the_connect_and_a_forged_one_is_ignored() {
    let mut w = ready(TxOffloads::NONE);
    // A knows B's link-layer address from a first connection.
    let l = w.b.tcp().listen(sa(ip("fd00::2"), 80), 8).unwrap();
    connect(&mut w, l, sa(ip("fd00::2"), 80).into());
    w.b_plugged = false;
    for (code, expected) in [(4, Error::ConnectionRefused), (3, Error::HostUnreachable)] {
        let from = w.sent_by_a.len();
        let c = w.a.tcp().connect(sa(ip("fd00::2"), 81), 0, w.now).unwrap();
        w.settle();
        let syn =
            w.sent_by_a[from..].iter().find(|f| f[12..14] == [0x86, 0xdd] && f[20] == 6).expect("A's SYN").clone();
        // The same SYN with another sequence number: not in flight.
        let mut forged = syn[14..].to_vec();
        forged[40 + 4] ^= 0x80;
        let before = w.a.counters().drop_icmp_tcp_unverified;
        feed(&mut w.a, &unreachable6(code, &forged), 2048, w.now);
        assert_eq!(w.a.counters().drop_icmp_tcp_unverified, before + 1);
        assert_eq!(w.a.tcp_ref().state(c).unwrap(), State::SynSent, "a forged error changes nothing");
        feed(&mut w.a, &unreachable6(code, &syn[14..]), 2048, w.now);
        assert_eq!(w.a.tcp().recv(c, &mut [0u8; 4], w.now), Err(expected), "code {code}");
    }
}
