//! Two IPv6 interfaces wired back to back by moving their transmit
//! queues, in virtual time: addresses and duplicate address detection,
//! echo both ways on link-local and configured addresses, neighbour
//! discovery and the neighbour cache's states, a neighbour that stops
//! answering, and the cache's bounds. Link-local addresses take the
//! modified EUI-64 of the MAC, so that they and their groups are known in
//! advance.

mod common;

use common::wire::Wire;
use nagare_core::buf::BufferPool;
use nagare_core::icmp::Echo6Event;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::ipv6::iid::InterfaceIds;
use nagare_core::ipv6::neighbor::NeighborState;
use nagare_core::{Capabilities, Interface, InterfaceConfig, Ipv6Config, NdpConfig};
use nagare_wire::{EthernetAddress, Icmpv6Packet, Icmpv6Repr, Ipv4Addr, Ipv6Addr, Ipv6Packet};
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn cidr(s: &str) -> Ipv6Cidr {
    s.parse().unwrap()
}

fn iface_with(mac: EthernetAddress, v4: u8, v6: &str, ndp: NdpConfig) -> Interface {
    let v4 = nagare_wire::Ipv4Cidr::new(Ipv4Addr::new(192, 168, 9, v4), 24).unwrap();
    let mut config = InterfaceConfig::new(mac, v4);
    config.seed = u64::from(mac.0[5]);
    // No router on this wire: none solicited.
    let addresses = vec![cidr(v6)];
    config.ipv6 = Some(Ipv6Config {
        addresses,
        ndp,
        router_solicitations: 0,
        interface_ids: InterfaceIds::Eui64,
        ..Ipv6Config::default()
    });
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

impl Wire {
    fn new() -> Wire {
        Wire::with(NdpConfig::default())
    }

    fn with(ndp: NdpConfig) -> Wire {
        Wire::between(iface_with(MAC_A, 1, "fd00::1/64", ndp.clone()), iface_with(MAC_B, 2, "fd00::2/64", ndp))
    }

    /// A wire whose addresses have all passed duplicate address detection.
    fn ready() -> Wire {
        let mut w = Wire::new();
        w.advance(Duration::ZERO);
        w.advance(Duration::from_secs(3));
        assert!(w.a.ipv6_addresses().chain(w.b.ipv6_addresses()).all(|a| a.state == AddrState::Preferred));
        w
    }
}

/// The ICMPv6 messages (type, bytes from the ICMPv6 header on, IPv6
/// source and destination) among `frames`.
fn icmp6(frames: &[Vec<u8>]) -> Vec<(u8, Vec<u8>, Ipv6Addr, Ipv6Addr)> {
    frames
        .iter()
        .filter(|f| f[12..14] == [0x86, 0xdd])
        .map(|f| {
            let p = Ipv6Packet::new_unchecked(&f[14..]);
            let mut upper = &f[54..];
            if f[20] == 0 {
                upper = &upper[8..]; // the MLD report's hop-by-hop header
            }
            (upper[0], upper.to_vec(), p.src_addr(), p.dst_addr())
        })
        .collect()
}

#[test]
fn link_local_from_the_mac_and_detection_before_use() {
    let mut w = Wire::new();
    let ll_a = w.a.ipv6_link_local().unwrap();
    assert_eq!(ll_a, ip("fe80::ff:fe00:1"), "modified EUI-64 of 02:00:00:00:00:01");
    let states: Vec<_> = w.a.ipv6_addresses().map(|a| (a.address(), a.state)).collect();
    assert_eq!(states, [(ll_a, AddrState::Tentative), (ip("fd00::1"), AddrState::Tentative)]);
    let echo = w.a.icmp().echo_open(7).unwrap();
    assert_eq!(
        w.a.icmp().echo6_send(echo, ip("fd00::2"), 1, b"early", w.now),
        Err(nagare_core::iface::Error::AddrNotAvailable),
        "a tentative address is no source"
    );

    w.advance(Duration::ZERO);
    let sent = icmp6(&w.sent_by_a);
    // First the MLDv2 report joining the solicited-node group, from ::
    // (fe80::ff:fe00:1 and fd00::1 end alike: one group for both).
    assert_eq!(sent[0].0, 143);
    assert_eq!((sent[0].2, sent[0].3), (Ipv6Addr::UNSPECIFIED, ip("ff02::16")));
    assert_eq!(u16::from_be_bytes([sent[0].1[6], sent[0].1[7]]), 1, "one record");
    assert_eq!(sent[0].1[12..28], ip("ff02::1:ff00:1").octets());
    assert_eq!(w.a.counters().mld_reports_sent, 1);

    w.advance(Duration::from_millis(1001));
    let sent = icmp6(&w.sent_by_a);
    let dad: Vec<_> = sent.iter().filter(|m| m.0 == 135).collect();
    assert_eq!(dad.len(), 2, "one solicitation per address");
    for m in &dad {
        assert_eq!(m.2, Ipv6Addr::UNSPECIFIED);
        assert_eq!(m.3.segments()[..6], [0xff02, 0, 0, 0, 0, 1], "to a solicited-node group");
        assert_eq!(m.1.len(), 24, "no source link-layer address from ::");
    }
    assert_eq!(w.a.ipv6_address_state(ip("fd00::1")), Some(AddrState::Tentative));
    // B was not asked about its own addresses: it drops them as not for it.
    assert!(w.b.counters().drop_ndp_not_for_us + w.b.counters().drop_eth_not_for_us >= 2);

    w.advance(Duration::from_secs(2));
    assert_eq!(w.a.ipv6_address_state(ip("fd00::1")), Some(AddrState::Preferred));
    assert_eq!(w.a.ipv6_address_state(ll_a), Some(AddrState::Preferred));
    assert_eq!(w.a.counters().dad_succeeded, 2);
    assert_eq!(w.a.counters().dad_duplicates, 0);
    assert_eq!(w.a.poll_at(), None, "nothing left to time");
}

fn expect_reply(iface: &mut Interface, echo: nagare_core::EchoHandle, from: Ipv6Addr, seq: u16, len: usize) {
    match iface.icmp().echo6_recv(echo).unwrap() {
        Some(Echo6Event::Reply { from: f, seq_no, data_len, hop_limit, .. }) => {
            assert_eq!((f, seq_no, data_len, hop_limit), (from, seq, len, 64))
        }
        None => panic!("no reply from {from}"),
    }
}

#[test]
fn echo_both_ways_on_link_local_and_configured_addresses() {
    let mut w = Wire::ready();
    let (ll_a, ll_b) = (w.a.ipv6_link_local().unwrap(), w.b.ipv6_link_local().unwrap());
    let ea = w.a.icmp().echo_open(0x1111).unwrap();
    let eb = w.b.icmp().echo_open(0x2222).unwrap();
    let mut seq = 0;
    for (dst_b, dst_a) in [(ll_b, ll_a), (ip("fd00::2"), ip("fd00::1"))] {
        seq += 1;
        w.sent_by_a.clear();
        w.sent_by_b.clear();
        w.a.icmp().echo6_send(ea, dst_b, seq, b"from a to b", w.now).unwrap();
        w.b.icmp().echo6_send(eb, dst_a, seq, b"from b", w.now).unwrap();
        w.settle();
        expect_reply(&mut w.a, ea, dst_b, seq, 11);
        expect_reply(&mut w.b, eb, dst_a, seq, 6);
        // Every echo message on the wire carries a checksum a parser that
        // is not the engine's accepts, and the reply comes from the
        // address asked.
        let messages: Vec<_> = icmp6(&w.sent_by_a).into_iter().chain(icmp6(&w.sent_by_b)).collect();
        let echoes: Vec<_> = messages.iter().filter(|m| m.0 == 128 || m.0 == 129).collect();
        assert_eq!(echoes.len(), 4);
        for (_, bytes, src, dst) in echoes {
            let parsed = Icmpv6Repr::parse(&Icmpv6Packet::new_unchecked(&bytes[..]), *src, *dst, true);
            assert!(parsed.is_ok(), "{parsed:?} from {src} to {dst}");
            assert_eq!(src.segments()[0] == 0xfe80, dst.segments()[0] == 0xfe80, "same scope both ends");
        }
    }
    assert_eq!(w.a.counters().icmp6_echo_replies_sent, 2);
    assert_eq!(w.b.counters().icmp6_echo_replies_sent, 2);
    assert_eq!(w.a.neighbor_lookup(ip("fd00::2")), Some(MAC_B));
    assert_eq!(w.b.neighbor_lookup(ll_a), Some(MAC_A));
}

#[test]
fn resolution_then_the_cache_states_over_virtual_time() {
    let mut w = Wire::ready();
    let b = ip("fd00::2");
    let ea = w.a.icmp().echo_open(1).unwrap();
    w.a.icmp().echo6_send(ea, b, 1, b"x", w.now).unwrap();
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Incomplete));
    assert_eq!(w.a.neighbor_queued(b), 1);
    w.settle();
    // One multicast solicitation; B learned A from it (STALE) and answered
    // with a solicited advertisement, which made B REACHABLE for A.
    assert_eq!(w.a.counters().ndp_solicits_sent, 2 + 1);
    assert_eq!(w.b.counters().ndp_adverts_sent, 1);
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Reachable));
    assert_eq!(w.b.neighbor_state(ip("fd00::1")), Some(NeighborState::Delay), "B sent its reply to a STALE entry");
    expect_reply(&mut w.a, ea, b, 1, 1);

    w.advance(Duration::from_secs(29));
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Reachable));
    w.advance(Duration::from_secs(1));
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Stale), "REACHABLE for 30 s");

    // Sending to a STALE neighbour goes at once and starts DELAY; with no
    // confirmation for 5 s it is probed with unicast solicitations, which B
    // answers: REACHABLE again.
    let solicits = w.a.counters().ndp_solicits_sent;
    w.sent_by_a.clear();
    w.a.icmp().echo6_send(ea, b, 2, b"y", w.now).unwrap();
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Delay));
    w.settle();
    expect_reply(&mut w.a, ea, b, 2, 1);
    w.a.poll(w.now + Duration::from_millis(4999));
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Delay));
    w.now += Duration::from_secs(5);
    w.a.poll(w.now);
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Probe));
    let probe = w.a.tx_queue().front().unwrap().to_vec();
    assert_eq!(probe[..6], MAC_B.0, "the probe is unicast to the cached address");
    w.settle();
    assert_eq!(w.a.counters().ndp_solicits_sent, solicits + 1);
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Reachable));
}

#[test]
fn a_neighbour_that_stops_answering_fails_and_its_packets_are_dropped() {
    let mut w = Wire::ready();
    let b = ip("fd00::2");
    let ea = w.a.icmp().echo_open(1).unwrap();
    w.a.icmp().echo6_send(ea, b, 1, b"x", w.now).unwrap();
    w.settle();
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Reachable));
    w.b_plugged = false;

    // A known neighbour that goes silent: STALE after 30 s, DELAY when sent
    // to, then three unanswered probes a second apart, and it is gone.
    w.advance(Duration::from_secs(30));
    w.a.icmp().echo6_send(ea, b, 2, b"x", w.now).unwrap();
    let before = w.a.counters().ndp_solicits_sent;
    w.advance(Duration::from_secs(5));
    assert_eq!(w.a.neighbor_state(b), Some(NeighborState::Probe));
    w.advance(Duration::from_secs(2));
    assert_eq!(w.a.counters().ndp_solicits_sent, before + 3);
    w.advance(Duration::from_secs(1));
    assert_eq!(w.a.neighbor_state(b), None);
    assert_eq!(w.a.counters().ndp_neighbors_failed, 1);

    // An address nobody has: three multicast solicitations, then the
    // packets that waited are dropped and counted.
    let nobody = ip("fd00::99");
    let before = w.a.counters().ndp_solicits_sent;
    for seq in 0..4 {
        w.a.icmp().echo6_send(ea, nobody, seq, b"lost", w.now).unwrap();
    }
    assert_eq!(w.a.neighbor_queued(nobody), 4);
    assert_eq!(w.a.counters().ndp_solicits_sent, before + 1);
    w.advance(Duration::from_millis(2999));
    assert_eq!(w.a.counters().ndp_solicits_sent, before + 3);
    assert_eq!(w.a.counters().drop_ndp_unresolved, 0);
    w.advance(Duration::from_millis(1));
    assert_eq!(w.a.counters().drop_ndp_unresolved, 4);
    assert_eq!(w.a.neighbor_state(nobody), None);
    assert_eq!(w.a.counters().ndp_neighbors_failed, 2);
    assert_eq!(w.a.poll_at(), None);
    assert_eq!(w.a.pool().in_use(), 0, "the dropped packets gave their buffers back");
}

#[test]
fn the_neighbour_cache_is_bounded() {
    let ndp = NdpConfig { cache_size: 4, pending_per_address: 2, pending_addresses: 2, ..NdpConfig::default() };
    let mut w = Wire::with(ndp);
    w.advance(Duration::ZERO);
    w.advance(Duration::from_secs(3));
    let ea = w.a.icmp().echo_open(1).unwrap();
    w.b_plugged = false;
    for host in 0x10..0x20u16 {
        for seq in 0..3 {
            w.a.icmp().echo6_send(ea, Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, host), seq, b"x", w.now).unwrap();
        }
    }
    assert_eq!(w.a.neighbor_cache_len(), 2, "two addresses under resolution at most");
    assert_eq!(w.a.counters().drop_ndp_queue_full, 16 * 3 - 2 * 2, "two packets wait per address");
    // Resolved neighbours fill the cache up to its size, the least
    // recently used making room.
    w.advance(Duration::from_secs(3));
    assert_eq!(w.a.neighbor_cache_len(), 0);
    w.b_plugged = true;
    w.a.icmp().echo6_send(ea, ip("fd00::2"), 1, b"x", w.now).unwrap();
    w.settle();
    assert_eq!(w.a.neighbor_state(ip("fd00::2")), Some(NeighborState::Reachable));
    assert!(w.a.neighbor_cache_len() <= 4);
}

#[test]
fn detection_finds_an_address_a_neighbour_already_has() {
    let mut w = Wire::ready();
    // B has fd00::2; A is given it too and asks the link first: B defends
    // it with an advertisement to all nodes, and A never uses it.
    w.a.add_ipv6_address(cidr("fd00::2/64")).unwrap();
    assert_eq!(w.a.ipv6_address_state(ip("fd00::2")), Some(AddrState::Tentative));
    w.advance(Duration::from_secs(3));
    assert_eq!(w.a.ipv6_address_state(ip("fd00::2")), Some(AddrState::Duplicate));
    assert_eq!(w.a.counters().dad_duplicates, 1);
    assert_eq!(w.b.ipv6_address_state(ip("fd00::2")), Some(AddrState::Preferred), "B keeps it");
    let advert = icmp6(&w.sent_by_b).into_iter().find(|m| m.0 == 136).unwrap();
    assert_eq!((advert.2, advert.3), (ip("fd00::2"), ip("ff02::1")));
    assert_eq!(advert.1[4] & 0x40, 0, "not solicited: the solicitation came from ::");
    // Packets for it still go to B, which answers them.
    let ea = w.a.icmp().echo_open(1).unwrap();
    w.a.icmp().echo6_send(ea, w.b.ipv6_link_local().unwrap(), 1, b"x", w.now).unwrap();
    w.settle();
    assert!(w.a.icmp().echo6_recv(ea).unwrap().is_some());
    assert_eq!(w.a.add_ipv6_address(cidr("fd00::2/64")), Err(nagare_core::iface::Error::AddrInUse));
    // B's own advertisement for it, later, is a conflict A counts and
    // ignores: the address stays B's.
    assert_eq!(w.a.counters().drop_ndp_address_conflict, 0);
}

#[test]
fn of_two_nodes_checking_the_same_address_the_later_one_gives_it_up() {
    let mut w = Wire::ready();
    w.a.add_ipv6_address(cidr("fd00::77/64")).unwrap();
    w.b.add_ipv6_address(cidr("fd00::77/64")).unwrap();
    w.advance(Duration::from_secs(3));
    // The first solicitation from :: reaches the other node while its own
    // is still waiting for its random delay (RFC 4862 5.4.3).
    let states = [w.a.ipv6_address_state(ip("fd00::77")), w.b.ipv6_address_state(ip("fd00::77"))];
    assert!(states.contains(&Some(AddrState::Duplicate)), "{states:?}");
    assert!(states.contains(&Some(AddrState::Preferred)), "{states:?}");
    assert_eq!(w.a.counters().dad_duplicates + w.b.counters().dad_duplicates, 1);
}
