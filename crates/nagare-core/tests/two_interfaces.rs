//! Two interfaces wired back to back by moving their transmit queues, in
//! virtual time: ARP, echo, fragmentation both ways, UDP, ICMP errors and
//! the timers, checked through the public API and the counters.

use nagare_core::buf::BufferPool;
use nagare_core::icmp::{EchoEvent, IcmpError};
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{EthernetAddress, Ipv4Addr};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const A: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 1);
const B: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 2);

struct Wire {
    a: Interface,
    b: Interface,
    now: Instant,
    /// Frames moved A -> B and B -> A, for the assertions.
    moved: (usize, usize),
    /// When false, frames from A are lost (B is unplugged).
    b_plugged: bool,
}

fn iface(mac: u8, ip: Ipv4Addr) -> Interface {
    let cidr = nagare_wire::Ipv4Cidr::new(ip, 24).unwrap();
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), cidr);
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

impl Wire {
    fn new() -> Wire {
        Wire { a: iface(1, A), b: iface(2, B), now: Instant::from_secs(100), moved: (0, 0), b_plugged: true }
    }

    /// Moves frames both ways until both queues are empty.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let from_a: Vec<_> = self.a.tx_queue().drain(..).collect();
            let from_b: Vec<_> = self.b.tx_queue().drain(..).collect();
            if from_a.is_empty() && from_b.is_empty() {
                return;
            }
            self.moved.0 += from_a.len();
            self.moved.1 += from_b.len();
            for frame in from_a {
                if self.b_plugged {
                    self.b.receive(frame, self.now);
                }
            }
            for frame in from_b {
                self.a.receive(frame, self.now);
            }
        }
        panic!("frames kept flowing");
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.a.poll(self.now);
        self.b.poll(self.now);
        self.settle();
    }
}

#[test]
fn ping_resolves_arp_once_then_goes_direct() {
    let mut w = Wire::new();
    let echo = w.a.icmp().echo_open(99).unwrap();
    w.a.icmp().echo_send(echo, B, 1, b"first", w.now).unwrap();
    w.settle();
    assert_eq!(w.a.counters().arp_requests_sent, 1);
    assert_eq!(w.b.counters().arp_replies_sent, 1);
    assert_eq!(w.a.arp_lookup(B, w.now), Some(EthernetAddress([2, 0, 0, 0, 0, 2])));
    // B learned A from the request (RFC 826), so its reply needed no ARP.
    assert_eq!(w.b.counters().arp_requests_sent, 0);
    match w.a.icmp().echo_recv(echo).unwrap() {
        Some(EchoEvent::Reply { from, seq_no, data_len, .. }) => assert_eq!((from, seq_no, data_len), (B, 1, 5)),
        other => panic!("expected a reply, got {other:?}"),
    }
    let frames_before = w.moved;
    w.a.icmp().echo_send(echo, B, 2, b"second", w.now).unwrap();
    w.settle();
    assert_eq!((w.moved.0 - frames_before.0, w.moved.1 - frames_before.1), (1, 1));
    assert!(matches!(w.a.icmp().echo_recv(echo).unwrap(), Some(EchoEvent::Reply { seq_no: 2, .. })));
}

#[test]
fn fragmented_udp_both_ways_is_byte_exact_and_leaks_nothing() {
    let mut w = Wire::new();
    let sa = w.a.udp().bind(SocketAddrV4::new(A, 4000)).unwrap();
    let sb = w.b.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000)).unwrap();
    for size in [0usize, 1, 1472, 1473, 2961, 20000, 65507] {
        let data: Vec<u8> = (0..size).map(|i| (i % 249) as u8).collect();
        w.a.udp().send_to(sa, &data, SocketAddrV4::new(B, 5000), w.now).unwrap();
        w.settle();
        let got = w.b.udp().recv(sb).unwrap().expect("datagram arrived");
        assert_eq!(got.payload.to_vec(), data, "size {size}");
        assert_eq!(got.source, SocketAddrV4::new(A, 4000));
        // Back the other way, zero-copy: the same buffers go out again.
        w.b.udp().send_buf(sb, got.payload, got.source, w.now).unwrap();
        w.settle();
        let back = w.a.udp().recv(sa).unwrap().expect("echo arrived");
        assert_eq!(back.payload.to_vec(), data, "echo of size {size}");
    }
    assert!(w.a.counters().frag_sent > 40);
    assert_eq!(w.a.counters().frag_reassembled, w.b.counters().frag_reassembled);
    assert_eq!(w.a.pool().in_use(), 0);
    assert_eq!(w.b.pool().in_use(), 0);
    assert_eq!(
        w.a.udp().send_to(sa, &vec![0; 65508], SocketAddrV4::new(B, 5000), w.now),
        Err(nagare_core::iface::Error::MessageTooLong)
    );
}

#[test]
fn closed_port_reports_unreachable_and_rate_limit_holds() {
    let mut w = Wire::new();
    let sa = w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    w.a.udp().send_to(sa, b"anyone?", SocketAddrV4::new(B, 9), w.now).unwrap();
    w.settle();
    assert_eq!(w.a.udp().take_error(sa).unwrap(), Some(IcmpError::Unreachable { from: B, code: 3 }));
    // A burst of 200 to closed ports gets at most the burst of errors back.
    for _ in 0..200 {
        w.a.udp().send_to(sa, b"x", SocketAddrV4::new(B, 9), w.now).unwrap();
    }
    w.settle();
    let c = w.b.counters().clone();
    assert_eq!(c.icmp_errors_sent + c.icmp_errors_rate_limited, 201);
    assert!(c.icmp_errors_sent <= 51, "sent {}", c.icmp_errors_sent);
    // Tokens come back with time.
    w.advance(Duration::from_secs(1));
    w.a.udp().send_to(sa, b"x", SocketAddrV4::new(B, 9), w.now).unwrap();
    w.settle();
    assert_eq!(w.b.counters().icmp_errors_sent, c.icmp_errors_sent + 1);
}

/// A connected socket keeps only the errors about datagrams to its peer,
/// as a connected Linux socket is found for an ICMP error by its peer;
/// a dual-stack IPv6 one connected to an IPv4-mapped peer alike.
#[test]
fn a_connected_socket_keeps_only_errors_about_its_peer() {
    let mut w = Wire::new();
    let sa = w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    w.a.udp().connect(sa, Some(SocketAddr::V4(SocketAddrV4::new(B, 10)))).unwrap();
    w.a.udp().send_to(sa, b"not the peer", SocketAddrV4::new(B, 9), w.now).unwrap();
    w.settle();
    assert_eq!(w.a.udp().take_error(sa).unwrap(), None);
    w.advance(Duration::from_secs(1));
    w.a.udp().send_to(sa, b"the peer", SocketAddrV4::new(B, 10), w.now).unwrap();
    w.settle();
    assert_eq!(w.a.udp().take_error(sa).unwrap(), Some(IcmpError::Unreachable { from: B, code: 3 }));
    assert_eq!(w.b.counters().icmp_errors_sent, 2);

    let dual = w.a.udp().bind6_dual_stack(0).unwrap();
    let mapped = SocketAddr::V6(SocketAddrV6::new(B.to_ipv6_mapped(), 11, 0, 0));
    w.a.udp().connect(dual, Some(mapped)).unwrap();
    assert_eq!(w.a.udp_ref().socket(dual).unwrap().peer(), Some(SocketAddr::V4(SocketAddrV4::new(B, 11))));
    w.advance(Duration::from_secs(1));
    w.a.udp().send_buf(dual, nagare_core::buf::PacketBuf::new(), SocketAddrV4::new(B, 11), w.now).unwrap();
    w.settle();
    assert_eq!(w.a.udp().take_error(dual).unwrap(), Some(IcmpError::Unreachable { from: B, code: 3 }));
}

#[test]
fn unanswered_arp_is_retried_once_a_second_then_dropped() {
    let mut w = Wire::new();
    w.b_plugged = false;
    let sa = w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    for _ in 0..5 {
        w.a.udp().send_to(sa, b"lost", SocketAddrV4::new(B, 7), w.now).unwrap();
    }
    w.settle();
    assert_eq!(w.a.counters().arp_requests_sent, 1);
    assert_eq!(w.a.poll_at(), Some(w.now + Duration::from_secs(1)));
    w.advance(Duration::from_millis(999));
    assert_eq!(w.a.counters().arp_requests_sent, 1);
    w.advance(Duration::from_millis(1));
    assert_eq!(w.a.counters().arp_requests_sent, 2);
    w.advance(Duration::from_secs(1));
    w.advance(Duration::from_secs(1));
    assert_eq!(w.a.counters().arp_requests_sent, 3);
    assert_eq!(w.a.counters().drop_arp_unresolved, 5);
    assert_eq!(
        w.a.udp().take_error(sa).unwrap(),
        Some(IcmpError::Unreachable { from: A, code: 1 }),
        "the socket learns its neighbour never answered"
    );
    assert_eq!(w.a.poll_at(), None);
    assert_eq!(w.a.pool().in_use(), 0);
}

#[test]
fn lost_fragment_times_out_and_frees_its_buffers() {
    let mut w = Wire::new();
    let sa = w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    let sb = w.b.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000)).unwrap();
    // Resolve ARP first, so the datagram's frames are all that flows.
    w.a.udp().send_to(sa, b"warm-up", SocketAddrV4::new(B, 5000), w.now).unwrap();
    w.settle();
    assert!(w.b.udp().recv(sb).unwrap().is_some());
    w.a.udp().send_to(sa, &[7u8; 4000], SocketAddrV4::new(B, 5000), w.now).unwrap();
    let mut frames: Vec<_> = w.a.tx_queue().drain(..).collect();
    assert_eq!(frames.len(), 3);
    frames.remove(1);
    for f in frames {
        w.b.receive(f, w.now);
    }
    assert_eq!(w.b.reassembly_pending(), 1);
    // The frames moved without copying: B holds buffers of A's pool.
    assert!(w.a.pool().in_use() > 0);
    w.advance(Duration::from_secs(29));
    assert_eq!(w.b.reassembly_pending(), 1);
    w.advance(Duration::from_secs(1));
    assert_eq!(w.b.reassembly_pending(), 0);
    assert_eq!(w.b.counters().drop_frag_timeout, 1);
    // The first fragment had arrived: B says so (RFC 1122 3.3.2), and A's
    // socket hears of it.
    assert_eq!(w.b.counters().icmp_errors_sent, 1);
    assert_eq!(w.a.udp().take_error(sa).unwrap(), Some(IcmpError::TimeExceeded { from: B, code: 1 }));
    assert_eq!(w.a.pool().in_use(), 0);
}

/// Over a device that completes checksums, a datagram that fits the MTU
/// leaves with its UDP checksum partial (the pseudo-header sum) and is
/// marked so; one cut into IP fragments is summed in full. Both arrive.
#[test]
fn udp_checksums_are_left_partial_for_a_device_that_completes_them() {
    let mut w = Wire::new();
    let cidr = nagare_wire::Ipv4Cidr::new(A, 24).unwrap();
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), cidr);
    let offloads = nagare_core::buf::TxOffloads { checksum: true, tcp_segmentation: 0, udp_segmentation: 0 };
    w.a = Interface::new(
        config,
        Capabilities { tx_offloads: offloads, ..Capabilities::default() },
        BufferPool::new(2048, 1024),
    );
    let sa = w.a.udp().bind(SocketAddrV4::new(A, 4000)).unwrap();
    let sb = w.b.udp().bind(SocketAddrV4::new(B, 5000)).unwrap();
    let to_b = SocketAddrV4::new(B, 5000);
    w.a.udp().send_to(sa, b"resolve", to_b, w.now).unwrap();
    w.settle();
    assert!(w.b.udp().recv(sb).unwrap().is_some());

    let big = vec![7u8; 3000];
    w.a.udp().send_to(sa, b"small", to_b, w.now).unwrap();
    w.a.udp().send_to(sa, &big, to_b, w.now).unwrap();
    let frames: Vec<_> = w.a.tx_queue().iter().cloned().collect();
    assert_eq!(frames.len(), 4, "one datagram and three fragments");
    let small = frames[0].to_vec();
    assert_eq!(frames[0].offload().checksum, nagare_core::buf::ChecksumState::Partial);
    let pseudo = nagare_wire::pseudo_header_v4(A, B, 17, 8 + 5).folded();
    assert_eq!(u16::from_be_bytes([small[40], small[41]]), pseudo);
    assert!(frames[1..].iter().all(|f| f.offload().checksum == nagare_core::buf::ChecksumState::Complete));
    drop(frames);
    w.settle();
    let mut buf = vec![0u8; 4000];
    assert_eq!(w.b.udp().recv_from(sb, &mut buf).unwrap(), Some((5, SocketAddrV4::new(A, 4000))));
    assert_eq!(&buf[..5], b"small");
    let (n, _) = w.b.udp().recv_from(sb, &mut buf).unwrap().unwrap();
    assert_eq!(&buf[..n], &big[..], "the fragmented datagram's full checksum verified");
}

/// An ICMP destination unreachable from B (`code`) quoting `packet`, a
/// datagram A sent (from its IPv4 header on), as a frame to A.
fn unreachable_from_b(code: u8, packet: &[u8]) -> Vec<u8> {
    let mut icmp = vec![3, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&packet[..packet.len().min(28)]);
    let sum = nagare_wire::checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut ip = vec![0u8; 20];
    nagare_wire::Ipv4Repr::new(B, A, nagare_wire::IpProtocol::Icmp, icmp.len(), 64).emit(&mut ip).unwrap();
    [&[2, 0, 0, 0, 0, 1][..], &[2, 0, 0, 0, 0, 2], &[0x08, 0x00], &ip, &icmp].concat()
}

/// A connect whose SYN draws an ICMP destination unreachable fails at
/// once (port unreachable: refused; host unreachable: host unreachable),
/// as Linux's does; one quoting a sequence number not in flight is
/// ignored and counted.
#[test]
fn a_destination_unreachable_about_the_syn_fails_the_connect() {
    use nagare_core::iface::Error;
    let mut w = Wire::new();
    let l = w.b.tcp().listen(SocketAddrV4::new(B, 80), 4).unwrap();
    w.a.tcp().connect(SocketAddrV4::new(B, 80), 0, w.now).unwrap();
    w.settle();
    assert!(w.b.tcp().accept(l).unwrap().is_some(), "ARP resolved by a first connection");
    w.b_plugged = false;
    for (code, expected) in [(3, Error::ConnectionRefused), (1, Error::HostUnreachable)] {
        let c = w.a.tcp().connect(SocketAddrV4::new(B, 81), 0, w.now).unwrap();
        let syn = w.a.tx_queue().iter().map(|f| f.to_vec()).find(|f| f[12..14] == [8, 0] && f[23] == 6).unwrap();
        w.settle();
        let mut forged = syn[14..].to_vec();
        forged[20 + 4] ^= 0x80;
        let before = w.a.counters().drop_icmp_tcp_unverified;
        let frame = unreachable_from_b(code, &forged);
        w.a.receive(nagare_core::buf::PacketBuf::from_slice(w.a.pool(), 0, &frame).unwrap(), w.now);
        assert_eq!(w.a.counters().drop_icmp_tcp_unverified, before + 1);
        let frame = unreachable_from_b(code, &syn[14..]);
        w.a.receive(nagare_core::buf::PacketBuf::from_slice(w.a.pool(), 0, &frame).unwrap(), w.now);
        assert_eq!(w.a.tcp().recv(c, &mut [0u8; 4], w.now), Err(expected), "code {code}");
    }
}
