//! Path MTU discovery between two interfaces in virtual time, with a
//! router emulated on the wire: what A sends past the router's MTU is
//! dropped and answered with ICMP "fragmentation needed" or ICMPv6
//! "packet too big" quoting it. TCP lowers its segment size at once and
//! the transfer completes; forged messages, claims below the floors and
//! above the link are ignored or clamped; the cache is bounded and
//! expires; datagrams are fragmented at the path MTU.

mod common;

use common::feed;
use common::wire::Wire;
use nagare_core::buf::{BufferPool, PacketBuf, TxOffloads};
use nagare_core::iface::Error;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::pmtu::{PMTU_CACHE_ENTRIES, PMTU_EXPIRY};
use nagare_core::tcp::connection::State;
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{Capabilities, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    pseudo_header_v6, EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Addr, Ipv4Repr, Ipv6Addr, Ipv6Repr,
};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const A4: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 1);
const B4: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 2);
const ROUTER4: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 254);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn iface_with(mac: EthernetAddress, v4: Ipv4Addr, v6: &str, offloads: TxOffloads) -> Interface {
    let mut config = InterfaceConfig::new(mac, nagare_wire::Ipv4Cidr::new(v4, 24).unwrap());
    config.seed = u64::from(mac.0[5]);
    config.ipv6 = Some(Ipv6Config { addresses: vec![v6.parse::<Ipv6Cidr>().unwrap()], ..Ipv6Config::default() });
    let caps = Capabilities { tx_offloads: offloads, ..Capabilities::default() };
    Interface::new(config, caps, BufferPool::new(2048, 8192))
}

/// A and B on one wire with a router's MTU between them (the link's
/// 1500 until a test lowers it).
struct Net {
    w: Wire,
    mtu: usize,
    /// ICMP errors the router sent A.
    errors_sent: usize,
    /// The largest packet A put on the wire (each piece of a
    /// super-segment counted as the device cuts it) from its first send
    /// after the first error.
    largest_after_error: usize,
    /// Every frame A sent, as bytes.
    sent_by_a: Vec<Vec<u8>>,
}

/// The IP packet length of each piece the device makes of `frame`: a
/// super-segment is cut into segments of its offload's size.
fn on_wire_len(frame: &PacketBuf, bytes: &[u8]) -> usize {
    let ip_len = bytes.len() - 14;
    let segment_size = usize::from(frame.offload().segment_size);
    if segment_size == 0 {
        return ip_len;
    }
    let ip_header = if bytes[12..14] == [0x86, 0xdd] { 40 } else { 20 };
    let tcp_header = usize::from(bytes[14 + ip_header + 12] >> 4) * 4;
    ip_len.min(ip_header + tcp_header + segment_size)
}

impl Net {
    fn new(offloads: TxOffloads) -> Net {
        let a = iface_with(MAC_A, A4, "fd00::1/64", offloads);
        let b = iface_with(MAC_B, B4, "fd00::2/64", offloads);
        let mut w = Wire::between(a, b);
        w.advance(Duration::ZERO);
        w.advance(Duration::from_secs(3));
        assert!(w.a.ipv6_addresses().chain(w.b.ipv6_addresses()).all(|a| a.state == AddrState::Preferred));
        Net { w, mtu: 1500, errors_sent: 0, largest_after_error: 0, sent_by_a: Vec::new() }
    }

    /// Carries frames both ways until neither side sends more; A's
    /// packets past the router's MTU are answered with an ICMP error.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let from_a: Vec<_> = self.w.a.tx_queue().drain(..).collect();
            let from_b: Vec<_> = self.w.b.tx_queue().drain(..).collect();
            if from_a.is_empty() && from_b.is_empty() {
                return;
            }
            // Frames A queued before it saw an error are not its answer.
            let after_error = self.errors_sent > 0;
            for frame in from_a {
                let bytes = frame.to_vec();
                let len = on_wire_len(&frame, &bytes);
                if after_error {
                    self.largest_after_error = self.largest_after_error.max(len);
                }
                let error = match &bytes[12..14] {
                    [0x08, 0x00] if len > self.mtu => Some(frag_needed(self.mtu as u16, &bytes[14..])),
                    [0x86, 0xdd] if len > self.mtu => Some(packet_too_big(self.mtu as u32, &bytes[14..])),
                    _ => None,
                };
                match error {
                    Some(error) => {
                        self.errors_sent += 1;
                        feed(&mut self.w.a, &error, 2048, self.w.now);
                    }
                    None => self.w.b.receive(frame, self.w.now),
                }
                self.sent_by_a.push(bytes);
            }
            for frame in from_b {
                self.w.a.receive(frame, self.w.now);
            }
        }
        panic!("frames kept flowing");
    }

    /// Runs both interfaces' timers up to `by` from now.
    fn advance(&mut self, by: Duration) {
        let end = self.w.now + by;
        for _ in 0..10_000 {
            self.w.a.poll(self.w.now);
            self.w.b.poll(self.w.now);
            self.settle();
            match [self.w.a.poll_at(), self.w.b.poll_at()].into_iter().flatten().min() {
                Some(t) if t <= end && t > self.w.now => self.w.now = t,
                Some(t) if t <= self.w.now => {}
                _ => break,
            }
        }
        self.w.now = end;
        self.w.a.poll(self.w.now);
        self.w.b.poll(self.w.now);
        self.settle();
    }

    fn connect(&mut self, l: TcpListenerHandle, to: SocketAddr) -> (TcpHandle, TcpHandle) {
        let c = self.w.a.tcp().connect(to, 0, self.w.now).unwrap();
        self.advance(Duration::from_millis(10));
        let s = self.w.b.tcp().accept(l).unwrap().expect("the handshake completed");
        assert_eq!(self.w.a.tcp_ref().state(c).unwrap(), State::Established);
        (c, s)
    }

    /// Sends `data` from A's `from` to B's `to`, returns what B read.
    fn transfer(&mut self, from: TcpHandle, to: TcpHandle, data: &[u8]) -> Vec<u8> {
        let (mut sent, mut got) = (0, Vec::new());
        let mut buf = vec![0u8; 65536];
        for _ in 0..20_000 {
            if sent < data.len() {
                match self.w.a.tcp().send(from, &data[sent..], self.w.now) {
                    Ok(n) => sent += n,
                    Err(Error::WouldBlock) => {}
                    Err(e) => panic!("send: {e:?}"),
                }
            }
            self.advance(Duration::from_millis(1));
            loop {
                match self.w.b.tcp().recv(to, &mut buf, self.w.now) {
                    Ok(0) | Err(Error::WouldBlock) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => panic!("recv: {e:?}"),
                }
            }
            if got.len() == data.len() {
                break;
            }
        }
        got
    }
}

fn ethernet_to_a(ethertype: EtherType, packet: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; 14];
    EthernetRepr { src_addr: MAC_B, dst_addr: MAC_A, ethertype }.emit(&mut frame).unwrap();
    frame.extend_from_slice(packet);
    frame
}

/// An ICMP "fragmentation needed" from the router to A, with next-hop
/// MTU `mtu`, quoting the start of `packet` (what RFC 792 asks: the IP
/// header and 8 bytes, here a little more).
fn frag_needed(mtu: u16, packet: &[u8]) -> Vec<u8> {
    let quote = &packet[..packet.len().min(60)];
    let mut icmp = vec![3, 4, 0, 0, 0, 0];
    icmp.extend(mtu.to_be_bytes());
    icmp.extend_from_slice(quote);
    let sum = nagare_wire::checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut ip = vec![0u8; 20];
    Ipv4Repr::new(ROUTER4, A4, IpProtocol::Icmp, icmp.len(), 64).emit(&mut ip).unwrap();
    ip.extend(icmp);
    ethernet_to_a(EtherType::Ipv4, &ip)
}

/// An ICMPv6 "packet too big" from a router to A with MTU `mtu`, quoting
/// the start of `packet`.
fn packet_too_big(mtu: u32, packet: &[u8]) -> Vec<u8> {
    let (src, dst) = (ip("fd00::fe"), ip("fd00::1"));
    let quote = &packet[..packet.len().min(1000)];
    let mut icmp = vec![2, 0, 0, 0];
    icmp.extend(mtu.to_be_bytes());
    icmp.extend_from_slice(quote);
    let mut sum = pseudo_header_v6(src, dst, 58, icmp.len() as u32);
    sum.add_bytes(&icmp);
    icmp[2..4].copy_from_slice(&sum.finish().to_be_bytes());
    let mut ip = vec![0u8; 40];
    Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, icmp.len(), 255).emit(&mut ip).unwrap();
    ip.extend(icmp);
    ethernet_to_a(EtherType::Ipv6, &ip)
}

/// An IPv6 packet from `src` to `dst` carrying a UDP header between the
/// ports, as a router would quote it.
fn udp6_quote(src: Ipv6Addr, dst: Ipv6Addr, src_port: u16, dst_port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    Ipv6Repr::new(src, dst, IpProtocol::Udp, 1400, 64).emit(&mut p).unwrap();
    p.extend(src_port.to_be_bytes());
    p.extend(dst_port.to_be_bytes());
    p.extend([0x05, 0x78, 0, 0]);
    p
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// The frames (as bytes, with their offload's segment size) A sends from
/// now until the next settle, found by draining A's queue.
fn sent_by_a(net: &mut Net) -> Vec<(Vec<u8>, u16)> {
    net.w.a.tx_queue().drain(..).map(|f| (f.to_vec(), f.offload().segment_size)).collect()
}

fn tcp_path_mtu_transfer(offloads: TxOffloads, to: SocketAddr, router_mtu: usize) {
    let mut net = Net::new(offloads);
    let l = match to {
        SocketAddr::V4(_) => net.w.b.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap(),
        SocketAddr::V6(_) => net.w.b.tcp().listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 8).unwrap(),
    };
    let (c, s) = net.connect(l, to);
    let link_mss = net.w.a.tcp_ref().connection(c).unwrap().send_mss();
    net.mtu = router_mtu;
    let data = pattern(400_000);
    assert_eq!(net.transfer(c, s, &data), data);

    let conn = net.w.a.tcp_ref().connection(c).unwrap();
    let ip_header = if to.is_ipv6() { 40 } else { 20 };
    assert!(net.errors_sent >= 1, "the router had something to refuse");
    assert!(link_mss > router_mtu - ip_header - 20);
    assert_eq!(conn.send_mss(), router_mtu - ip_header - 20, "the send MSS follows the path MTU");
    assert!(net.largest_after_error <= router_mtu, "{} bytes after the error", net.largest_after_error);
    assert_eq!(conn.stats().timeouts, 0, "what was lost went again at once, not after a timeout");
    assert_eq!(conn.stats().path_mtu_drops, 1);
    assert_eq!(net.w.a.path_mtu(to.ip(), net.w.now), router_mtu);
    let counters = net.w.a.counters();
    assert_eq!(counters.pmtu_lowered, 1);
    assert_eq!(counters.tcp_path_mss_lowered, 1);
    assert_eq!(counters.pmtu_lowered + counters.pmtu_not_lower, net.errors_sent as u64);
    assert_eq!(counters.drop_pmtu_unverified, 0);

    // A new connection to the same destination starts at the path's size,
    // while its SYN still announces the link's MSS.
    let seen = net.sent_by_a.len();
    let c2 = net.w.a.tcp().connect(to, 0, net.w.now).unwrap();
    net.advance(Duration::from_millis(10));
    let syn = net.sent_by_a[seen..].iter().find(|f| f[14 + ip_header + 13] & 0x02 != 0).expect("the SYN");
    let tcp = &syn[14 + ip_header..];
    assert_eq!(&tcp[20..22], &[2, 4]);
    let announced = usize::from(u16::from_be_bytes([tcp[22], tcp[23]]));
    assert_eq!(announced, 1500 - ip_header - 20, "the SYN's MSS is the link's");
    let s2 = net.w.b.tcp().accept(l).unwrap().expect("the second handshake completed");
    assert_eq!(net.w.a.tcp_ref().connection(c2).unwrap().send_mss(), router_mtu - ip_header - 20);
    let errors = net.errors_sent;
    assert_eq!(net.transfer(c2, s2, &data[..100_000]), &data[..100_000]);
    assert_eq!(net.errors_sent, errors, "nothing of the new connection was too big");
}

#[test]
fn packet_too_big_quoting_a_segment_in_flight_lowers_the_mss_and_the_transfer_completes() {
    let b6 = SocketAddrV6::new(ip("fd00::2"), 80, 0, 0).into();
    tcp_path_mtu_transfer(TxOffloads::NONE, b6, 1400);
}

#[test]
fn fragmentation_needed_quoting_a_segment_in_flight_lowers_the_mss_and_the_transfer_completes() {
    tcp_path_mtu_transfer(TxOffloads::NONE, SocketAddrV4::new(B4, 80).into(), 1000);
}

#[test]
fn super_segments_are_cut_at_the_lowered_segment_size() {
    let offloads = TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };
    tcp_path_mtu_transfer(offloads, SocketAddrV4::new(B4, 80).into(), 1000);
    tcp_path_mtu_transfer(offloads, SocketAddrV6::new(ip("fd00::2"), 80, 0, 0).into(), 1280);
}

/// A connection from A to B with data in flight, and the frames carrying
/// it (not yet delivered).
fn in_flight(net: &mut Net, to: SocketAddr) -> (TcpHandle, Vec<(Vec<u8>, u16)>) {
    let l = match to {
        SocketAddr::V4(_) => net.w.b.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap(),
        SocketAddr::V6(_) => net.w.b.tcp().listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 8).unwrap(),
    };
    let (c, _) = net.connect(l, to);
    net.w.a.tcp().send(c, &pattern(20_000), net.w.now).unwrap();
    let frames = sent_by_a(net);
    assert!(frames.len() > 2);
    (c, frames)
}

#[test]
fn forged_messages_quoting_no_segment_in_flight_are_ignored_and_counted() {
    let mut net = Net::new(TxOffloads::NONE);
    let b6: SocketAddr = SocketAddrV6::new(ip("fd00::2"), 80, 0, 0).into();
    let (c, frames) = in_flight(&mut net, b6);
    let mss = net.w.a.tcp_ref().connection(c).unwrap().send_mss();
    let real = frames[1].0[14..].to_vec();

    let seq_at = 40 + 4;
    let mut outside = real.clone();
    let seq = u32::from_be_bytes(outside[seq_at..seq_at + 4].try_into().unwrap());
    outside[seq_at..seq_at + 4].copy_from_slice(&seq.wrapping_add(1 << 30).to_be_bytes());
    let mut below = real.clone();
    below[seq_at..seq_at + 4].copy_from_slice(&seq.wrapping_sub(100_000).to_be_bytes());
    let mut other_port = real.clone();
    other_port[40..42].copy_from_slice(&1u16.to_be_bytes());
    let mut not_our_source = real.clone();
    not_our_source[8..24].copy_from_slice(&ip("fd00::77").octets());
    for forged in [&outside, &below, &other_port, &not_our_source] {
        feed(&mut net.w.a, &packet_too_big(1300, forged), 2048, net.w.now);
    }
    // Quotes cut short, down to nothing, in pieces of 7 bytes.
    for cut in [0, 10, 40, 47] {
        feed(&mut net.w.a, &packet_too_big(1300, &real[..cut]), 7, net.w.now);
        feed(&mut net.w.a, &frag_needed(1000, &real[..cut.min(27)]), 7, net.w.now);
    }
    let counters = net.w.a.counters();
    assert_eq!(counters.drop_pmtu_unverified, 4 + 8);
    assert_eq!(counters.pmtu_lowered, 0);
    assert_eq!(net.w.a.path_mtu(b6.ip(), net.w.now), 1500);
    assert_eq!(net.w.a.tcp_ref().connection(c).unwrap().send_mss(), mss);
    assert_eq!(net.w.a.path_mtu_cache_len(), 0);

    // The genuine quote is taken.
    feed(&mut net.w.a, &packet_too_big(1300, &real), 2048, net.w.now);
    assert_eq!(net.w.a.counters().pmtu_lowered, 1);
    assert_eq!(net.w.a.tcp_ref().connection(c).unwrap().send_mss(), 1300 - 60);
    // The same claim again changes nothing.
    feed(&mut net.w.a, &packet_too_big(1300, &real), 2048, net.w.now);
    assert_eq!(net.w.a.counters().pmtu_not_lower, 1);
}

#[test]
fn ipv4_claims_are_floored_and_capped_and_a_missing_mtu_takes_the_plateau_below() {
    let mut net = Net::new(TxOffloads::NONE);
    let b4: SocketAddr = SocketAddrV4::new(B4, 80).into();
    let (c, frames) = in_flight(&mut net, b4);
    let real = frames[1].0[14..].to_vec();
    let dst = IpAddr::V4(B4);

    feed(&mut net.w.a, &frag_needed(300, &real), 2048, net.w.now);
    assert_eq!(net.w.a.counters().drop_pmtu_below_floor, 1, "a claim below 552 is ignored");
    assert_eq!(net.w.a.path_mtu(dst, net.w.now), 1500);
    feed(&mut net.w.a, &frag_needed(9000, &real), 2048, net.w.now);
    assert_eq!(net.w.a.counters().pmtu_not_lower, 1, "never above the link");
    assert_eq!(net.w.a.path_mtu(dst, net.w.now), 1500);

    // No MTU in the message: the plateau below the quoted datagram's
    // length (a full 1500-byte segment: 1492).
    assert_eq!(u16::from_be_bytes([real[2], real[3]]), 1500);
    feed(&mut net.w.a, &frag_needed(0, &real), 2048, net.w.now);
    assert_eq!(net.w.a.path_mtu(dst, net.w.now), 1492);
    feed(&mut net.w.a, &frag_needed(552, &real), 2048, net.w.now);
    assert_eq!(net.w.a.path_mtu(dst, net.w.now), 552, "the floor itself is taken");
    assert_eq!(net.w.a.tcp_ref().connection(c).unwrap().send_mss(), 512);

    // A datagram sent without DF cannot have drawn the message.
    let mut no_df = real.clone();
    no_df[6] &= !0x40;
    let sum_before = net.w.a.counters().drop_pmtu_unverified;
    feed(&mut net.w.a, &frag_needed(600, &no_df), 2048, net.w.now);
    assert_eq!(net.w.a.counters().drop_pmtu_unverified, sum_before + 1);
}

#[test]
fn ipv6_claims_below_1280_are_taken_as_1280() {
    let mut net = Net::new(TxOffloads::NONE);
    let b6: SocketAddr = SocketAddrV6::new(ip("fd00::2"), 80, 0, 0).into();
    let (c, frames) = in_flight(&mut net, b6);
    let real = frames[1].0[14..].to_vec();
    feed(&mut net.w.a, &packet_too_big(600, &real), 2048, net.w.now);
    assert_eq!(net.w.a.counters().pmtu_raised_to_minimum, 1);
    assert_eq!(net.w.a.path_mtu(b6.ip(), net.w.now), 1280);
    assert_eq!(net.w.a.tcp_ref().connection(c).unwrap().send_mss(), 1280 - 60);
    feed(&mut net.w.a, &packet_too_big(9000, &real), 2048, net.w.now);
    assert_eq!(net.w.a.path_mtu(b6.ip(), net.w.now), 1280);
}

#[test]
fn the_cache_holds_a_bounded_number_of_destinations_and_forgets_after_ten_minutes() {
    let mut net = Net::new(TxOffloads::NONE);
    let sock = net.w.a.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4000, 0, 0)).unwrap();
    let dst = |i: usize| ip(&format!("2001:db8::{:x}", i + 1));
    for i in 0..=PMTU_CACHE_ENTRIES {
        let quote = udp6_quote(ip("fd00::1"), dst(i), 4000, 53);
        feed(&mut net.w.a, &packet_too_big(1300, &quote), 2048, net.w.now);
        net.w.now += Duration::from_secs(1);
    }
    assert_eq!(net.w.a.counters().pmtu_lowered, PMTU_CACHE_ENTRIES as u64 + 1);
    assert_eq!(net.w.a.path_mtu_cache_len(), PMTU_CACHE_ENTRIES);
    assert_eq!(net.w.a.path_mtu(IpAddr::V6(dst(0)), net.w.now), 1500, "the oldest made room");
    assert_eq!(net.w.a.path_mtu(IpAddr::V6(dst(1)), net.w.now), 1300);
    let last = IpAddr::V6(dst(PMTU_CACHE_ENTRIES));
    assert_eq!(net.w.a.path_mtu(last, net.w.now), 1300);
    net.w.now += PMTU_EXPIRY;
    assert_eq!(net.w.a.path_mtu(last, net.w.now), 1500, "ten minutes on, the link MTU is tried again");

    // A quote from a port with no socket is not ours.
    net.w.a.udp().close(sock).unwrap();
    let quote = udp6_quote(ip("fd00::1"), dst(3), 4000, 53);
    feed(&mut net.w.a, &packet_too_big(1300, &quote), 2048, net.w.now);
    assert_eq!(net.w.a.counters().drop_pmtu_unverified, 1);
}

#[test]
fn datagrams_are_fragmented_at_the_path_mtu() {
    let mut net = Net::new(TxOffloads::NONE);
    let sock6 = net.w.a.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4000, 0, 0)).unwrap();
    let quote = udp6_quote(ip("fd00::1"), ip("fd00::2"), 4000, 53);
    feed(&mut net.w.a, &packet_too_big(1280, &quote), 2048, net.w.now);
    net.w.a.udp().send_to6(sock6, &pattern(1400), SocketAddrV6::new(ip("fd00::2"), 53, 0, 0), net.w.now).unwrap();
    net.advance(Duration::from_millis(10));
    let frames: Vec<_> = net.sent_by_a.iter().filter(|f| f[12..14] == [0x86, 0xdd] && f[14 + 6] == 44).collect();
    assert_eq!(frames.len(), 2, "a 1448-byte packet in two fragments");
    assert!(frames.iter().all(|f| f.len() - 14 <= 1280));

    // IPv4: TCP's DF segments taught the path; UDP goes without DF, in
    // fragments that fit it.
    let (_, tcp_frames) = in_flight(&mut net, SocketAddrV4::new(B4, 80).into());
    feed(&mut net.w.a, &frag_needed(1000, &tcp_frames[1].0[14..]), 2048, net.w.now);
    sent_by_a(&mut net);
    let sock4 = net.w.a.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4000)).unwrap();
    net.w.a.udp().send_to(sock4, &pattern(1400), SocketAddrV4::new(B4, 53), net.w.now).unwrap();
    let frames: Vec<_> = sent_by_a(&mut net).into_iter().filter(|(f, _)| f[14 + 9] == 17).collect();
    assert_eq!(frames.len(), 2, "a 1428-byte datagram in two fragments");
    assert!(frames.iter().all(|(f, _)| f.len() - 14 <= 1000));
}

/// The largest IP packet among A's frames from `seen` on (no offloads).
fn largest_sent_since(net: &Net, seen: usize) -> usize {
    net.sent_by_a[seen..].iter().map(|f| f.len() - 14).max().unwrap_or(0)
}

/// A lowered path MTU holds ten minutes after its last decrease, not
/// sooner, then the link MTU is tried again: the open connection's
/// segments grow back to the link's size, a new connection starts there,
/// and a router that refuses them lowers it once more.
fn path_mtu_rises_again(to: SocketAddr) {
    let mut net = Net::new(TxOffloads::NONE);
    let ip_header = if to.is_ipv6() { 40 } else { 20 };
    let l = match to {
        SocketAddr::V4(_) => net.w.b.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap(),
        SocketAddr::V6(_) => net.w.b.tcp().listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 8).unwrap(),
    };
    let (c, s) = net.connect(l, to);
    let mss = |net: &Net| net.w.a.tcp_ref().connection(c).unwrap().send_mss();
    let link_mss = mss(&net);
    assert_eq!(link_mss, 1500 - ip_header - 20);
    let data = pattern(100_000);

    net.mtu = 1400;
    assert_eq!(net.transfer(c, s, &data), data);
    assert_eq!(mss(&net), 1400 - ip_header - 20);
    // A second decrease five minutes on restarts the ten minutes.
    net.advance(Duration::from_secs(300));
    net.mtu = 1300;
    assert_eq!(net.transfer(c, s, &data), data);
    assert_eq!(mss(&net), 1300 - ip_header - 20);
    let lowered_at = net.w.now;
    assert_eq!(net.w.a.counters().pmtu_lowered, 2);

    // The path grows, but nothing rises before ten minutes have passed
    // since the last decrease.
    net.mtu = 1500;
    net.advance(PMTU_EXPIRY - Duration::from_secs(1));
    assert_eq!(net.w.now, lowered_at + PMTU_EXPIRY - Duration::from_secs(1));
    let seen = net.sent_by_a.len();
    assert_eq!(net.transfer(c, s, &data), data);
    assert_eq!(mss(&net), 1300 - ip_header - 20, "still low before ten minutes");
    assert_eq!(largest_sent_since(&net, seen), 1300);
    assert_eq!(net.w.a.path_mtu(to.ip(), net.w.now), 1300);
    assert_eq!(net.w.a.counters().pmtu_expired, 0);

    // Ten minutes after the last decrease, the link MTU is tried again.
    assert!(net.w.a.poll_at().is_some_and(|t| t <= lowered_at + PMTU_EXPIRY));
    net.advance(Duration::from_secs(2));
    assert_eq!(net.w.a.path_mtu(to.ip(), net.w.now), 1500);
    assert_eq!(net.w.a.path_mtu_cache_len(), 0);
    assert_eq!(mss(&net), link_mss, "the segment size follows the path MTU up");
    let counters = net.w.a.counters();
    assert_eq!((counters.pmtu_expired, counters.tcp_path_mss_raised), (1, 1));
    let seen = net.sent_by_a.len();
    assert_eq!(net.transfer(c, s, &data), data);
    assert_eq!(largest_sent_since(&net, seen), 1500, "full-size segments again");

    // A new connection starts at the link's size.
    let c2 = net.w.a.tcp().connect(to, 0, net.w.now).unwrap();
    net.advance(Duration::from_millis(10));
    let _s2 = net.w.b.tcp().accept(l).unwrap().expect("the second handshake completed");
    assert_eq!(net.w.a.tcp_ref().connection(c2).unwrap().send_mss(), link_mss);

    // A router refusing the larger packets lowers it again.
    net.mtu = 1280;
    assert_eq!(net.transfer(c, s, &data), data);
    assert_eq!(mss(&net), 1280 - ip_header - 20);
    assert_eq!(net.w.a.path_mtu(to.ip(), net.w.now), 1280);
    assert_eq!(net.w.a.counters().pmtu_lowered, 3);
}

#[test]
fn a_lowered_path_mtu_expires_ten_minutes_after_its_last_decrease_over_ipv6() {
    path_mtu_rises_again(SocketAddrV6::new(ip("fd00::2"), 80, 0, 0).into());
}

#[test]
fn a_lowered_path_mtu_expires_ten_minutes_after_its_last_decrease_over_ipv4() {
    path_mtu_rises_again(SocketAddrV4::new(B4, 80).into());
}

#[test]
fn the_expiry_is_configurable() {
    let mut config = InterfaceConfig::new(MAC_A, nagare_wire::Ipv4Cidr::new(A4, 24).unwrap());
    assert_eq!(config.pmtu_expiry, PMTU_EXPIRY);
    config.pmtu_expiry = Duration::from_secs(900);
    config.ipv6 = Some(Ipv6Config { addresses: vec!["fd00::1/64".parse().unwrap()], ..Ipv6Config::default() });
    let mut a = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 64));
    // Past duplicate address detection.
    let t0 = nagare_core::time::Instant::ZERO + Duration::from_secs(3);
    while let Some(t) = a.poll_at().filter(|&t| t <= t0) {
        a.poll(t);
        a.tx_queue().clear();
    }
    a.poll(t0);
    assert_eq!(a.ipv6_address_state(ip("fd00::1")), Some(AddrState::Preferred));
    a.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4000, 0, 0)).unwrap();
    let dst = ip("2001:db8::1");
    feed(&mut a, &packet_too_big(1300, &udp6_quote(ip("fd00::1"), dst, 4000, 53)), 2048, t0);
    assert_eq!(a.path_mtu(IpAddr::V6(dst), t0), 1300);
    a.poll(t0 + PMTU_EXPIRY);
    assert_eq!(a.path_mtu(IpAddr::V6(dst), t0 + PMTU_EXPIRY), 1300, "ten minutes are not fifteen");
    assert_eq!(a.counters().pmtu_expired, 0);
    let end = t0 + Duration::from_secs(900);
    assert!(a.poll_at().is_some_and(|t| t <= end));
    a.poll(end);
    assert_eq!(a.path_mtu(IpAddr::V6(dst), end), 1500);
    assert_eq!((a.counters().pmtu_expired, a.path_mtu_cache_len()), (1, 0));
}
