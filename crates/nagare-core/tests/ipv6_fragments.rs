//! IPv6 fragmentation and reassembly through the interface: a 5000-byte
//! echo both ways between two interfaces (fragmented on output,
//! reassembled on input), and hostile fragments fed to one: reordered,
//! overlapping, a first fragment without the whole header chain, a
//! datagram that never completes, and a flood against the caps; the
//! identifications of fragmented datagrams, per destination.

mod common;

use common::wire::Wire;
use common::{feed, OUR_MAC, PEER_MAC};
use nagare_core::buf::BufferPool;
use nagare_core::config::ReassemblyConfig;
use nagare_core::icmp::Echo6Event;
use nagare_core::ipv6::addr::AddrState;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    multicast_mac, solicited_node, EtherType, EthernetAddress, EthernetRepr, Icmpv6Repr, IpProtocol, Ipv6Addr,
    Ipv6FragmentRepr, Ipv6Option, Ipv6OptionsRepr, Ipv6Packet, Ipv6Repr, NdpRepr,
};
use std::time::Duration;

const T: Instant = Instant::from_secs(5);
/// Fragment data per frame at MTU 1500: 1500 - 40 - 8, rounded down to 8.
const UNIT: usize = 1448;

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn us() -> Ipv6Addr {
    ip("fd00::1")
}

fn peer() -> Ipv6Addr {
    ip("fd00::2")
}

/// An interface whose addresses need no detection, with `reassembly`,
/// soliciting no routers.
fn interface_with(mac: EthernetAddress, addr: &str, reassembly: ReassemblyConfig) -> Interface {
    let mut config = InterfaceConfig::new(mac, "10.0.0.1/24".parse().unwrap());
    config.seed = u64::from(mac.0[5]);
    let addresses = vec![addr.parse().unwrap()];
    config.ipv6 =
        Some(Ipv6Config { addresses, dad_transmits: 0, reassembly, router_solicitations: 0, ..Default::default() });
    let iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 512));
    assert!(iface.ipv6_addresses().all(|a| a.state == AddrState::Preferred));
    iface
}

fn interface() -> Interface {
    interface_with(OUR_MAC, "fd00::1/64", Ipv6Config::default().reassembly)
}

/// An interface that knows the peer's MAC (from a solicitation), so that
/// its answers go out at once.
fn interface_knowing_the_peer(reassembly: ReassemblyConfig) -> Interface {
    let mut iface = interface_with(OUR_MAC, "fd00::1/64", reassembly);
    let g = solicited_node(&us());
    let learn = NdpRepr::NeighborSolicit { target: us(), lladdr: Some(PEER_MAC) };
    let mut m = vec![0u8; learn.buffer_len()];
    learn.emit(&mut m, peer(), g).unwrap();
    feed(&mut iface, &frame(peer(), g, IpProtocol::Icmpv6, 255, &m), 2000, T);
    iface.tx_queue().clear();
    iface
}

/// An IPv6 packet in an Ethernet frame from the peer.
fn frame(src: Ipv6Addr, dst: Ipv6Addr, next_header: IpProtocol, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40];
    let dst_mac = multicast_mac(&dst).unwrap_or(OUR_MAC);
    EthernetRepr { src_addr: PEER_MAC, dst_addr: dst_mac, ethertype: EtherType::Ipv6 }.emit(&mut f).unwrap();
    Ipv6Repr::new(src, dst, next_header, payload.len(), hop_limit).emit(&mut f[14..]).unwrap();
    f.extend_from_slice(payload);
    f
}

/// A fragment from `src` to us: `whole[offset..offset + len]` of datagram
/// `ident` whose fragmentable part starts with `next`.
fn fragment(src: Ipv6Addr, ident: u32, next: IpProtocol, whole: &[u8], offset: usize, len: usize) -> Vec<u8> {
    let more = offset + len < whole.len();
    let header = Ipv6FragmentRepr { next_header: next, frag_offset: offset as u16, more_frags: more, ident };
    let mut payload = vec![0u8; 8];
    header.emit(&mut payload).unwrap();
    payload.extend_from_slice(&whole[offset..offset + len]);
    frame(src, us(), IpProtocol::Ipv6Frag, 64, &payload)
}

/// An echo request from `src` to us with `len` bytes of data.
fn echo_request(src: Ipv6Addr, len: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..len).map(|i| (i % 241) as u8).collect();
    let repr = Icmpv6Repr::EchoRequest { ident: 9, seq_no: 1, data: &data };
    let mut m = vec![0u8; repr.buffer_len()];
    repr.emit(&mut m, src, us()).unwrap();
    m
}

/// The pieces of `whole` at `UNIT` bytes: (offset, length).
fn pieces(whole: &[u8]) -> Vec<(usize, usize)> {
    (0..whole.len()).step_by(UNIT).map(|o| (o, UNIT.min(whole.len() - o))).collect()
}

/// A sent IPv6 frame: its next header, then (offset, more, ident) of its
/// fragment header and the bytes after it if it has one, or the payload.
#[derive(Debug)]
struct Sent {
    next_header: IpProtocol,
    fragment: Option<(u16, bool, u32)>,
    data: Vec<u8>,
    len: usize,
}

fn sent(iface: &mut Interface) -> Vec<Sent> {
    iface
        .tx_queue()
        .drain(..)
        .map(|f| f.to_vec())
        .filter(|f| f[12..14] == [0x86, 0xdd])
        .map(|f| {
            let p = Ipv6Packet::new_unchecked(&f[14..]);
            let next_header = p.next_header();
            let fragment = (next_header == IpProtocol::Ipv6Frag).then(|| {
                let word = u16::from_be_bytes([f[56], f[57]]);
                (word & 0xfff8, word & 1 == 1, u32::from_be_bytes([f[58], f[59], f[60], f[61]]))
            });
            let at = if fragment.is_some() { 62 } else { 54 };
            Sent { next_header, fragment, data: f[at..].to_vec(), len: f.len() }
        })
        .collect()
}

/// The fragments' data joined in offset order.
fn joined(frames: &[Sent]) -> Vec<u8> {
    let mut by_offset: Vec<_> = frames.iter().filter_map(|s| s.fragment.map(|f| (f.0, &s.data))).collect();
    by_offset.sort();
    by_offset.into_iter().flat_map(|(_, d)| d.clone()).collect()
}

impl Wire {
    fn new() -> Wire {
        let config = Ipv6Config::default().reassembly;
        Wire::between(
            interface_with(EthernetAddress([2, 0, 0, 0, 0, 1]), "fd00::1/64", config.clone()),
            interface_with(EthernetAddress([2, 0, 0, 0, 0, 2]), "fd00::2/64", config),
        )
    }
}

/// Frames among `frames` that carry a fragment header.
fn fragments_in(frames: &[Vec<u8>]) -> Vec<&Vec<u8>> {
    frames.iter().filter(|f| f[12..14] == [0x86, 0xdd] && f[20] == u8::from(IpProtocol::Ipv6Frag)).collect()
}

#[test]
fn a_5000_byte_echo_both_ways_goes_in_fragments() {
    let mut w = Wire::new();
    let data: Vec<u8> = (0..5000).map(|i| (i * 7 % 256) as u8).collect();
    let ea = w.a.icmp().echo_open(0x1111).unwrap();
    let eb = w.b.icmp().echo_open(0x2222).unwrap();
    let (ll_a, ll_b) = (w.a.ipv6_link_local().unwrap(), w.b.ipv6_link_local().unwrap());
    for (seq, (to_b, to_a)) in [(ip("fd00::2"), ip("fd00::1")), (ll_b, ll_a)].into_iter().enumerate() {
        let seq = seq as u16 + 1;
        w.sent_by_a.clear();
        w.sent_by_b.clear();
        w.a.icmp().echo6_send(ea, to_b, seq, &data, w.now).unwrap();
        w.b.icmp().echo6_send(eb, to_a, seq, &data, w.now).unwrap();
        w.settle();
        for (iface, echo, from) in [(&mut w.a, ea, to_b), (&mut w.b, eb, to_a)] {
            match iface.icmp().echo6_recv(echo).unwrap() {
                Some(Echo6Event::Reply { from: f, seq_no, data_len, .. }) => {
                    assert_eq!((f, seq_no, data_len), (from, seq, 5000))
                }
                other => panic!("no reply from {from}: {other:?}"),
            }
        }
        // Each side sent its request and its reply in 4 fragments, none
        // past the MTU.
        for frames in [&w.sent_by_a, &w.sent_by_b] {
            let frags = fragments_in(frames);
            assert_eq!(frags.len(), 8);
            assert!(frags.iter().all(|f| f.len() <= 1514));
        }
    }
    for iface in [&w.a, &w.b] {
        let c = iface.counters();
        assert_eq!((c.ip6_frag_sent, c.ip6_frag_received, c.ip6_frag_reassembled), (16, 16, 4));
        assert_eq!(iface.ipv6_reassembly_pending(), (0, 0));
    }
    assert_eq!(w.a.pool().in_use(), 0);
}

#[test]
fn reordered_fragments_are_reassembled_and_the_reply_fragmented() {
    let mut iface = interface_knowing_the_peer(Ipv6Config::default().reassembly);
    let whole = echo_request(peer(), 5000);
    let parts = pieces(&whole);
    for &i in &[3, 1, 0, 2] {
        let (offset, len) = parts[i];
        feed(&mut iface, &fragment(peer(), 7, IpProtocol::Icmpv6, &whole, offset, len), 700, T);
    }
    let out = sent(&mut iface);
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|s| s.next_header == IpProtocol::Ipv6Frag && s.len <= 1514));
    let reply = joined(&out);
    assert_eq!(reply.len(), whole.len());
    assert_eq!(reply[0], 129, "an echo reply");
    assert_eq!(reply[8..], whole[8..], "with the request's data");
    let idents: Vec<_> = out.iter().map(|s| s.fragment.unwrap().2).collect();
    assert!(idents.iter().all(|&i| i == idents[0]), "one identification");
    assert_eq!(iface.counters().ip6_frag_reassembled, 1);
    assert_eq!(iface.counters().icmp6_echo_replies_sent, 1);
}

#[test]
fn an_overlap_discards_the_whole_datagram() {
    let mut iface = interface_knowing_the_peer(Ipv6Config::default().reassembly);
    let whole = echo_request(peer(), 3000);
    feed(&mut iface, &fragment(peer(), 7, IpProtocol::Icmpv6, &whole, 0, UNIT), 2000, T);
    // Starts 8 bytes inside the first fragment.
    feed(&mut iface, &fragment(peer(), 7, IpProtocol::Icmpv6, &whole, UNIT - 8, UNIT), 2000, T);
    assert_eq!(iface.counters().drop_ip6_frag_overlap, 1);
    assert_eq!(iface.ipv6_reassembly_pending(), (0, 0));
    // The rest cannot complete what was discarded.
    for (offset, len) in pieces(&whole).into_iter().skip(1) {
        feed(&mut iface, &fragment(peer(), 7, IpProtocol::Icmpv6, &whole, offset, len), 2000, T);
    }
    assert!(sent(&mut iface).is_empty());
    assert_eq!(iface.counters().ip6_frag_reassembled, 0);
    assert_eq!(iface.ipv6_reassembly_pending().0, 1);
}

#[test]
fn a_first_fragment_without_the_whole_header_chain_is_refused() {
    let mut iface = interface_knowing_the_peer(Ipv6Config::default().reassembly);
    // Destination options, then the echo request: the first fragment holds
    // the options header alone.
    let opts = Ipv6OptionsRepr { next_header: IpProtocol::Icmpv6, options: &[Ipv6Option::PadN(4)] };
    let mut whole = vec![0u8; opts.buffer_len()];
    opts.emit(&mut whole).unwrap();
    assert_eq!(whole.len(), 8);
    whole.extend(echo_request(peer(), 100));
    feed(&mut iface, &fragment(peer(), 7, IpProtocol::Ipv6Opts, &whole, 0, 8), 2000, T);
    assert_eq!(iface.counters().drop_ip6_frag_incomplete_chain, 1);
    let out = sent(&mut iface);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].next_header, out[0].data[0], out[0].data[1]), (IpProtocol::Icmpv6, 4, 3), "parameter problem 3");
    assert_eq!(iface.ipv6_reassembly_pending().0, 0);
    // The same datagram with the chain whole in its first fragment passes.
    feed(&mut iface, &fragment(peer(), 8, IpProtocol::Ipv6Opts, &whole, 0, 16), 2000, T);
    feed(&mut iface, &fragment(peer(), 8, IpProtocol::Ipv6Opts, &whole, 16, whole.len() - 16), 2000, T);
    assert_eq!(iface.counters().ip6_frag_reassembled, 1);
    assert_eq!(iface.counters().icmp6_echo_replies_sent, 1);
}

#[test]
fn an_unfinished_datagram_times_out_after_sixty_seconds() {
    let mut iface = interface_knowing_the_peer(Ipv6Config::default().reassembly);
    let whole = echo_request(peer(), 3000);
    feed(&mut iface, &fragment(peer(), 7, IpProtocol::Icmpv6, &whole, 0, UNIT), 2000, T);
    // A datagram whose first fragment never comes times out silently.
    feed(&mut iface, &fragment(peer(), 8, IpProtocol::Icmpv6, &whole, UNIT, UNIT), 2000, T);
    assert_eq!(iface.ipv6_reassembly_pending().0, 2);
    assert!(iface.poll_at().is_some_and(|t| t <= T + Duration::from_secs(60)));
    // (The first poll sends the MLD report joining our groups, a poll
    // within the second after it the report again.)
    iface.poll(T);
    iface.poll(T + Duration::from_secs(1));
    sent(&mut iface);
    iface.poll(T + Duration::from_secs(59));
    // (Neighbour discovery probes the peer meanwhile.)
    assert!(sent(&mut iface).iter().all(|s| s.data[0] == 135));
    assert_eq!(iface.ipv6_reassembly_pending().0, 2);
    iface.poll(T + Duration::from_secs(60));
    assert_eq!(iface.counters().drop_ip6_frag_timeout, 2);
    assert_eq!(iface.ipv6_reassembly_pending(), (0, 0));
    let out: Vec<_> = sent(&mut iface).into_iter().filter(|s| s.data[0] != 135).collect();
    assert_eq!(out.len(), 1, "one time exceeded, for the datagram whose first fragment came");
    assert_eq!((out[0].data[0], out[0].data[1]), (3, 1));
    // It quotes the first fragment: IPv6 header, fragment header, data.
    let quote = &out[0].data[8..];
    assert_eq!(quote[6], u8::from(IpProtocol::Ipv6Frag));
    assert_eq!(quote[40], u8::from(IpProtocol::Icmpv6));
    assert_eq!(quote[48..56], whole[..8]);
    assert_eq!(iface.pool().in_use(), 0);
}

#[test]
fn a_flood_of_first_fragments_stays_within_the_caps() {
    let caps = ReassemblyConfig { max_datagrams: 16, max_bytes: 64 << 10, ..Ipv6Config::default().reassembly };
    let mut iface = interface_knowing_the_peer(caps);
    let flooder = ip("fd00::66");
    let junk = echo_request(flooder, 3000);
    for ident in 0..500 {
        feed(&mut iface, &fragment(flooder, ident, IpProtocol::Icmpv6, &junk, 0, UNIT), 2000, T);
        let (held, bytes) = iface.ipv6_reassembly_pending();
        assert!(held <= 4, "one source holds a quarter of the datagrams");
        assert!(bytes <= 64 << 10);
    }
    assert!(iface.counters().drop_ip6_frag_evicted >= 496);
    // Another source's datagram still goes through.
    let whole = echo_request(peer(), 3000);
    for (offset, len) in pieces(&whole) {
        feed(&mut iface, &fragment(peer(), 1, IpProtocol::Icmpv6, &whole, offset, len), 2000, T);
    }
    assert_eq!(iface.counters().ip6_frag_reassembled, 1);
    assert_eq!(joined(&sent(&mut iface)).len(), whole.len());
    // A fragment past the memory cap on its own is refused.
    let small = ReassemblyConfig { max_bytes: 1000, ..Ipv6Config::default().reassembly };
    let mut iface = interface_knowing_the_peer(small);
    feed(&mut iface, &fragment(peer(), 1, IpProtocol::Icmpv6, &whole, 0, UNIT), 2000, T);
    assert_eq!(iface.counters().drop_ip6_frag_memory, 1);
}

#[test]
fn a_duplicate_is_dropped_alone_and_disagreeing_ends_discard_the_datagram() {
    let mut iface = interface();
    let whole = echo_request(peer(), 3000);
    feed(&mut iface, &fragment(peer(), 1, IpProtocol::Icmpv6, &whole, 0, UNIT), 2000, T);
    feed(&mut iface, &fragment(peer(), 1, IpProtocol::Icmpv6, &whole, 0, UNIT), 2000, T);
    assert_eq!(iface.counters().drop_ip6_frag_duplicate, 1);
    assert_eq!(iface.ipv6_reassembly_pending().0, 1);
    let last = fragment(peer(), 1, IpProtocol::Icmpv6, &whole[..2 * UNIT + 8], 2 * UNIT, 8);
    feed(&mut iface, &last, 2000, T);
    let shorter = fragment(peer(), 1, IpProtocol::Icmpv6, &whole[..UNIT + 8], UNIT, 8);
    feed(&mut iface, &shorter, 2000, T);
    assert_eq!(iface.counters().drop_ip6_frag_malformed, 1);
    assert_eq!(iface.ipv6_reassembly_pending(), (0, 0));
}

#[test]
fn fragment_identifications_step_per_destination_and_differ_across_destinations() {
    let mut iface = interface_knowing_the_peer(Ipv6Config::default().reassembly);
    // A second neighbour, learned as the first was.
    let other = ip("fd00::3");
    let g = solicited_node(&us());
    let learn = NdpRepr::NeighborSolicit { target: us(), lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 0x33])) };
    let mut m = vec![0u8; learn.buffer_len()];
    learn.emit(&mut m, other, g).unwrap();
    feed(&mut iface, &frame(other, g, IpProtocol::Icmpv6, 255, &m), 2000, T);
    iface.tx_queue().clear();

    let echo = iface.icmp().echo_open(5).unwrap();
    let data = vec![7u8; 3000];
    let ident_to = |iface: &mut Interface, dst: Ipv6Addr, seq: u16| {
        iface.icmp().echo6_send(echo, dst, seq, &data, T).unwrap();
        let idents: Vec<u32> = sent(iface).iter().filter_map(|s| s.fragment.map(|f| f.2)).collect();
        assert_eq!(idents.len(), 3, "3000 bytes in three fragments");
        assert!(idents.iter().all(|&i| i == idents[0]), "one datagram, one identification");
        idents[0]
    };
    let first = ident_to(&mut iface, peer(), 1);
    let second = ident_to(&mut iface, peer(), 2);
    let elsewhere = ident_to(&mut iface, other, 3);
    assert_ne!(first, second, "successive datagrams to one destination differ");
    // Another destination's identification is no neighbour of these: an
    // off-path node that learns the ones sent to it cannot tell another's.
    for known in [first, second] {
        let apart = elsewhere.wrapping_sub(known).min(known.wrapping_sub(elsewhere));
        assert!(apart > 16, "{elsewhere:#x} is {apart} from {known:#x}");
    }
}
