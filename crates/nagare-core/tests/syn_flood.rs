//! A SYN flood from spoofed sources against a listener, in virtual time:
//! the SYN guard keeps the SYN-ACKs sent near its budget, a peer that
//! completed a handshake is always answered, and everything is answered
//! again once the flood stops. With a device that filters, the engine
//! draws for the SYNs the device could not read: IPv6 ones behind an
//! extension header or rebuilt from fragments, and IPv4 ones rebuilt
//! from a first fragment that ends before the TCP flags; not for an IPv4
//! one whose first fragment holds them, which the device drew for.

mod common;

use common::*;
use nagare_core::buf::BufferPool;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    ArpOperation, EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Addr, Ipv4Cidr, Ipv4Packet, Ipv6Addr,
    Ipv6Option, Ipv6OptionsRepr, Ipv6Repr, TcpFlags, TcpRepr, TcpSeqNumber,
};
use std::net::{SocketAddrV4, SocketAddrV6};
use std::time::Duration;

const BUDGET: u32 = 1_000;
const OUR_IP6: &str = "fd00::1/64";

fn our_ip6() -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)
}

fn interface() -> Interface {
    let mut config = InterfaceConfig::new(OUR_MAC, Ipv4Cidr::new(OUR_IP, 24).unwrap());
    config.ipv6 =
        Some(Ipv6Config { addresses: vec![OUR_IP6.parse().unwrap()], dad_transmits: 0, ..Default::default() });
    // Spoofed sources are off the network: their SYN-ACKs go to the
    // gateway, whose address the interface learns first.
    config.gateway = Some(PEER_IP);
    config.seed = 7;
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096));
    feed(&mut iface, &arp(ArpOperation::Request), 2048, Instant::from_secs(1));
    iface.tx_queue().clear();
    iface
}

fn syn_frame(src: SocketAddrV4, seq: u32) -> Vec<u8> {
    let mut repr = TcpRepr::bare(src.port(), 80, TcpSeqNumber(seq), None, TcpFlags::SYN);
    repr.max_seg_size = Some(1460);
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&mut bytes, &[], *src.ip(), OUR_IP).unwrap();
    ipv4_from(*src.ip(), OUR_IP, 64, IpProtocol::Tcp, &bytes)
}

/// The SYN-ACKs sent since the last call, by destination.
fn synacks(iface: &mut Interface) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    for frame in iface.tx_queue().drain(..) {
        let bytes = frame.to_vec();
        let Ok(eth) = EthernetFrame::new_checked(&bytes[..]) else { continue };
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { continue };
        if ip.protocol() == IpProtocol::Tcp && ip.payload().get(13).is_some_and(|f| f & 0x12 == 0x12) {
            out.push(ip.dst_addr());
        }
    }
    out
}

fn spoofed(i: u32) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(0xc633_0000 + (i % 60_000)), 1024 + (i % 50_000) as u16)
}

/// `per_second` spoofed SYNs for `span` from `now`; the SYN-ACKs sent.
fn flood(iface: &mut Interface, now: &mut Instant, span: Duration, per_second: u64, first: u32) -> usize {
    let step = Duration::from_micros(1_000_000 / per_second);
    let end = *now + span;
    let mut answered = 0;
    let mut i = first;
    while *now < end {
        feed(iface, &syn_frame(spoofed(i), i.wrapping_mul(7919)), 2048, *now);
        answered += synacks(iface).len();
        i += 1;
        *now += step;
    }
    answered
}

/// A peer completes a handshake: from then on it is proven.
fn handshake(iface: &mut Interface, now: Instant) {
    let peer = SocketAddrV4::new(PEER_IP, 40_000);
    feed(iface, &syn_frame(peer, 100), 2048, now);
    let out: Vec<_> = iface.tx_queue().drain(..).collect();
    let synack = out.iter().find_map(|f| {
        let bytes = f.to_vec();
        let eth = EthernetFrame::new_checked(&bytes[..]).ok()?;
        let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
        let seq = u32::from_be_bytes(ip.payload().get(4..8)?.try_into().ok()?);
        Some(seq)
    });
    let iss = synack.expect("the first SYN is answered");
    let ack = TcpRepr::bare(40_000, 80, TcpSeqNumber(101), Some(TcpSeqNumber(iss.wrapping_add(1))), TcpFlags::ACK);
    let mut bytes = vec![0u8; ack.buffer_len()];
    ack.emit(&mut bytes, &[], PEER_IP, OUR_IP).unwrap();
    feed(iface, &ipv4_from(PEER_IP, OUR_IP, 64, IpProtocol::Tcp, &bytes), 2048, now);
    iface.tx_queue().clear();
}

#[test]
fn a_spoofed_flood_gets_about_the_budget_in_syn_acks_and_a_proven_peer_gets_through() {
    let mut iface = interface();
    let mut now = Instant::from_secs(10);
    let l = iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    iface.tcp().set_syn_budget(BUDGET);
    handshake(&mut iface, now);
    assert!(iface.tcp().accept(l).unwrap().is_some());

    // 20,000 SYNs a second for two seconds: twenty times the budget.
    let answered = flood(&mut iface, &mut now, Duration::from_secs(2), 20_000, 0);
    let filter = iface.tcp_ref().syn_filter().clone();
    assert!(filter.engaged, "the guard engaged");
    assert_eq!(filter.ports, [80]);
    assert_eq!(filter.proven, [PEER_IP]);
    assert_eq!(iface.tcp_ref().syn_guard_engagements(), 1);
    // The first quarter second is answered in full (5,000), the rest at
    // about the budget (1,750): without the guard all 40,000 would be.
    assert!((5_500..9_000).contains(&answered), "{answered} of 40,000 SYNs answered");
    assert!(iface.counters().drop_tcp_syn_guard > 30_000);

    // The proven peer's new connection is answered, every time.
    for port in 41_000..41_020 {
        feed(&mut iface, &syn_frame(SocketAddrV4::new(PEER_IP, port), 5), 2048, now);
        assert_eq!(synacks(&mut iface), [PEER_IP]);
        now += Duration::from_micros(50);
    }

    // Once the flood stops, the guard lets go within two measuring windows
    // (half a second) and every SYN is answered again.
    let quiet = now + Duration::from_millis(500);
    while let Some(at) = iface.poll_at().filter(|at| *at <= quiet) {
        now = at.max(now);
        iface.poll(now);
        if !iface.tcp_ref().syn_filter().engaged {
            break;
        }
        now += Duration::from_millis(1);
    }
    assert!(!iface.tcp_ref().syn_filter().engaged);
    assert_eq!(flood(&mut iface, &mut now, Duration::from_millis(100), 1_000, 900_000), 100);
}

#[test]
fn with_a_device_that_filters_the_engine_answers_all_it_sees() {
    let mut iface = interface();
    let mut now = Instant::from_secs(10);
    iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    iface.tcp().set_syn_budget(BUDGET);
    flood(&mut iface, &mut now, Duration::from_millis(600), 20_000, 0);
    assert!(iface.tcp_ref().syn_filter().engaged);
    iface.tcp().set_syn_filter_applied(true);
    let seen = 1_000;
    let answered = flood(&mut iface, &mut now, Duration::from_millis(1_000), seen, 100_000);
    assert_eq!(answered, seen as usize);
}

#[test]
fn a_flood_below_the_budget_is_answered_in_full() {
    let mut iface = interface();
    let mut now = Instant::from_secs(10);
    iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    iface.tcp().set_syn_budget(BUDGET);
    assert_eq!(flood(&mut iface, &mut now, Duration::from_secs(2), 500, 0), 1_000);
    assert!(!iface.tcp_ref().syn_filter().engaged);
    assert_eq!(iface.counters().drop_tcp_syn_guard, 0);
}

/// A SYN to port 80 over IPv6 from `src`, with a destination options
/// header before the TCP header when `behind_options`.
fn syn6_frame(src: Ipv6Addr, seq: u32, behind_options: bool) -> Vec<u8> {
    let repr = TcpRepr::bare(1024 + (seq % 50_000) as u16, 80, TcpSeqNumber(seq), None, TcpFlags::SYN);
    let mut tcp = vec![0u8; repr.buffer_len()];
    repr.emit(&mut tcp, &[], src, our_ip6()).unwrap();
    let mut payload = Vec::new();
    let mut next = IpProtocol::Tcp;
    if behind_options {
        let opts = Ipv6OptionsRepr { next_header: IpProtocol::Tcp, options: &[Ipv6Option::PadN(4)] };
        let mut h = vec![0u8; opts.buffer_len()];
        opts.emit(&mut h).unwrap();
        payload.extend(h);
        next = IpProtocol::Ipv6Opts;
    }
    payload.extend(tcp);
    let mut f = vec![0u8; 14 + 40];
    EthernetRepr { src_addr: PEER_MAC, dst_addr: OUR_MAC, ethertype: EtherType::Ipv6 }.emit(&mut f).unwrap();
    Ipv6Repr::new(src, our_ip6(), next, payload.len(), 64).emit(&mut f[14..]).unwrap();
    f.extend(payload);
    f
}

#[test]
fn with_a_device_that_filters_the_engine_draws_only_for_ipv6_syns_the_device_cannot_read() {
    let mut iface = interface();
    let mut now = Instant::from_secs(10);
    iface.tcp().listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 1).unwrap();
    iface.tcp().set_syn_budget(BUDGET);
    flood(&mut iface, &mut now, Duration::from_millis(600), 20_000, 0);
    assert!(iface.tcp_ref().syn_filter().engaged);
    iface.tcp().set_syn_filter_applied(true);
    let spoofed6 = |i: u32| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 1, (i >> 16) as u16, i as u16);
    // What the device reads reached the engine through its draw: all of
    // it is answered.
    let guarded = iface.counters().drop_tcp_syn_guard;
    let cookies = iface.counters().tcp_syn_cookies_sent;
    for i in 0..200 {
        feed(&mut iface, &syn6_frame(spoofed6(i), i.wrapping_mul(7919), false), 2048, now);
        now += Duration::from_micros(100);
    }
    assert_eq!(iface.counters().drop_tcp_syn_guard, guarded, "the engine drew again");
    assert_eq!(iface.counters().tcp_syn_cookies_sent - cookies, 200, "each answered with a cookie");
    // Behind an extension header the device passed it without a draw:
    // the engine draws, and admits about the guard's fraction.
    for i in 200..400 {
        feed(&mut iface, &syn6_frame(spoofed6(i), i.wrapping_mul(7919), true), 2048, now);
        now += Duration::from_micros(100);
    }
    let refused = iface.counters().drop_tcp_syn_guard - guarded;
    assert!(refused > 150, "{refused} of 200 SYNs behind an extension header refused");
}

/// A SYN to port 80 from `src` in two IPv4 fragments (identification
/// `ident`), the first holding `first` bytes of the 24-byte TCP header:
/// 8 end short of its flags, which a device's filter then cannot read;
/// 16 hold them.
fn syn_fragments(src: SocketAddrV4, seq: u32, ident: u16, first: usize) -> [Vec<u8>; 2] {
    let mut repr = TcpRepr::bare(src.port(), 80, TcpSeqNumber(seq), None, TcpFlags::SYN);
    repr.max_seg_size = Some(1460);
    let mut tcp = vec![0u8; repr.buffer_len()];
    repr.emit(&mut tcp, &[], *src.ip(), OUR_IP).unwrap();
    let piece = |data: &[u8], frag_offset: u16, more_frags: bool| {
        ipv4_fragment_from(*src.ip(), IpProtocol::Tcp, data, frag_offset, more_frags, ident)
    };
    [piece(&tcp[..first], 0, true), piece(&tcp[first..], first as u16, false)]
}

#[test]
fn with_a_device_that_filters_the_engine_draws_for_ipv4_syns_rebuilt_from_fragments() {
    let mut iface = interface();
    let mut now = Instant::from_secs(10);
    iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    iface.tcp().set_syn_budget(BUDGET);
    flood(&mut iface, &mut now, Duration::from_millis(600), 20_000, 0);
    assert!(iface.tcp_ref().syn_filter().engaged);
    iface.tcp().set_syn_filter_applied(true);
    // Whole, the device read them and drew: all answered.
    let guarded = iface.counters().drop_tcp_syn_guard;
    assert_eq!(flood(&mut iface, &mut now, Duration::from_millis(20), 10_000, 100_000), 200);
    assert_eq!(iface.counters().drop_tcp_syn_guard, guarded, "the engine drew again");
    // Rebuilt from a tiny first fragment, it passed the device undrawn:
    // the engine draws, and admits about the guard's fraction.
    let reassembled = iface.counters().frag_reassembled;
    for i in 200_000..200_200u32 {
        for f in syn_fragments(spoofed(i), i.wrapping_mul(7919), i as u16, 8) {
            feed(&mut iface, &f, 2048, now);
        }
        now += Duration::from_micros(100);
    }
    assert_eq!(iface.counters().frag_reassembled - reassembled, 200);
    let refused = iface.counters().drop_tcp_syn_guard - guarded;
    assert!(refused > 150, "{refused} of 200 SYNs rebuilt from fragments refused");
}

#[test]
fn with_a_device_that_filters_the_engine_does_not_draw_again_for_an_ipv4_first_fragment_with_the_flags() {
    let mut iface = interface();
    let mut now = Instant::from_secs(10);
    iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    iface.tcp().set_syn_budget(BUDGET);
    flood(&mut iface, &mut now, Duration::from_millis(600), 20_000, 0);
    assert!(iface.tcp_ref().syn_filter().engaged);
    iface.tcp().set_syn_filter_applied(true);
    // The device read the flags in the first fragment and drew for each
    // SYN: the engine admits them all, rebuilt, without a draw of its own.
    let guarded = iface.counters().drop_tcp_syn_guard;
    let reassembled = iface.counters().frag_reassembled;
    let mut answered = 0;
    for i in 200_000..200_200u32 {
        for f in syn_fragments(spoofed(i), i.wrapping_mul(7919), i as u16, 16) {
            feed(&mut iface, &f, 2048, now);
        }
        answered += synacks(&mut iface).len();
        now += Duration::from_micros(100);
    }
    assert_eq!(iface.counters().frag_reassembled - reassembled, 200);
    assert_eq!(iface.counters().drop_tcp_syn_guard, guarded, "the engine drew again");
    assert_eq!(answered, 200);
}
