//! Router discovery and stateless address autoconfiguration, in virtual
//! time: A is the host under test; B, on the same wire, stands for the
//! router (crafted router advertisements carry B's link-local address and
//! MAC, and B answers neighbour discovery for them). Addresses formed from
//! prefixes and used after detection, lifetimes running out, the two-hour
//! rule, deprecated addresses, invalid advertisements, a flood of
//! prefixes, solicitations, the MTU option, and off-link traffic through
//! the router (learned or configured). Interface identifiers are the
//! modified EUI-64 of the MAC, so that addresses are known in advance,
//! except where stable opaque identifiers (the default) and their retry
//! after a duplicate are tested.

mod common;

use common::wire::Wire;
use nagare_core::buf::BufferPool;
use nagare_core::icmp::Echo6Event;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr, MAX_ADDRESSES, MAX_AUTOCONFIGURED};
use nagare_core::ipv6::iid::{IidGenerator, InterfaceIds};
use nagare_core::ipv6::router::{MAX_PREFIXES, MAX_ROUTERS};
use nagare_core::{Capabilities, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Addr, Ipv6Addr, Ipv6Packet, Ipv6Repr, NdpOption,
    NdpPrefixInfo, NdpRepr,
};
use std::net::SocketAddrV6;
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const FOREVER: u32 = u32::MAX;

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A's address in prefix `p` (a /64): the prefix and the modified EUI-64
/// of MAC_A, as its link-local address has.
fn slaac_a(p: &str) -> Ipv6Addr {
    let prefix = u128::from(ip(p)) & !u128::from(u64::MAX);
    Ipv6Addr::from(prefix | u128::from(ip("::ff:fe00:1")))
}

/// IPv6 with interface identifiers by the modified EUI-64 of the MAC.
fn eui64() -> Ipv6Config {
    Ipv6Config { interface_ids: InterfaceIds::Eui64, ..Ipv6Config::default() }
}

fn iface(mac: EthernetAddress, v4: u8, config: Ipv6Config) -> Interface {
    let v4 = nagare_wire::Ipv4Cidr::new(Ipv4Addr::new(192, 168, 9, v4), 24).unwrap();
    let mut c = InterfaceConfig::new(mac, v4);
    c.seed = u64::from(mac.0[5]);
    c.ipv6 = Some(config);
    Interface::new(c, Capabilities::default(), BufferPool::new(2048, 1024))
}

/// A with only its link-local address (and `a` changed as asked), B
/// with its link-local address and `b_addr`, both past detection.
fn ready_with(a: impl FnOnce(&mut Ipv6Config), b_addr: &str) -> Wire {
    let mut ca = Ipv6Config { router_solicitations: 0, ..eui64() };
    a(&mut ca);
    let cb = Ipv6Config { addresses: vec![b_addr.parse::<Ipv6Cidr>().unwrap()], router_solicitations: 0, ..eui64() };
    let mut w = Wire::between(iface(MAC_A, 1, ca), iface(MAC_B, 2, cb));
    w.advance(secs(3));
    assert!(w.a.ipv6_addresses().chain(w.b.ipv6_addresses()).all(|a| a.state == AddrState::Preferred));
    assert_eq!(w.b.ipv6_link_local(), Some(ROUTER));
    w
}

fn ready() -> Wire {
    ready_with(|_| {}, "2001:db8:1::1/64")
}

/// B's link-local address (the modified EUI-64 of MAC_B): the router's.
const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 2);

fn prefix(p: &str, len: u8, flags: (bool, bool), valid: u32, preferred: u32) -> NdpOption<'static> {
    NdpOption::PrefixInfo(NdpPrefixInfo {
        prefix_len: len,
        on_link: flags.0,
        autonomous: flags.1,
        valid_lifetime: valid,
        preferred_lifetime: preferred,
        prefix: ip(p),
    })
}

/// An on-link, autonomous /64 prefix.
fn slaac(p: &str, valid: u32, preferred: u32) -> NdpOption<'static> {
    prefix(p, 64, (true, true), valid, preferred)
}

/// A router advertisement from `src` (B's MAC) to all nodes.
struct Ra<'a> {
    src: Ipv6Addr,
    ip_hop_limit: u8,
    code: u8,
    cur_hop_limit: u8,
    lifetime: u16,
    options: &'a [NdpOption<'a>],
}

impl Ra<'_> {
    fn frame(&self) -> Vec<u8> {
        let mut opts = vec![0u8; self.options.iter().map(|o| o.buffer_len()).sum()];
        let mut at = 0;
        for o in self.options {
            o.emit(&mut opts[at..]).unwrap();
            at += o.buffer_len();
        }
        let repr = NdpRepr::RouterAdvert {
            hop_limit: self.cur_hop_limit,
            managed_flag: false,
            other_flag: false,
            router_lifetime: self.lifetime,
            reachable_time: 0,
            retrans_timer: 0,
            options: &opts,
        };
        let dst = ip("ff02::1");
        let mut msg = vec![0u8; repr.buffer_len()];
        repr.emit(&mut msg, self.src, dst).unwrap();
        if self.code != 0 {
            msg[1] = self.code;
            let mut p = nagare_wire::Icmpv6Packet::new_unchecked(&mut msg[..]);
            p.fill_checksum(self.src, dst);
        }
        let mut f = vec![0u8; 14 + 40];
        let eth = EthernetRepr {
            src_addr: MAC_B,
            dst_addr: EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
            ethertype: EtherType::Ipv6,
        };
        eth.emit(&mut f).unwrap();
        Ipv6Repr::new(self.src, dst, IpProtocol::Icmpv6, msg.len(), self.ip_hop_limit).emit(&mut f[14..]).unwrap();
        f.extend(msg);
        f
    }
}

fn ra<'a>(src: Ipv6Addr, lifetime: u16, options: &'a [NdpOption<'a>]) -> Ra<'a> {
    Ra { src, ip_hop_limit: 255, code: 0, cur_hop_limit: 0, lifetime, options }
}

fn give(w: &mut Wire, frame: Vec<u8>) {
    let f = nagare_core::buf::PacketBuf::from_slice(w.a.pool(), 0, &frame).unwrap();
    w.a.receive(f, w.now);
    w.settle();
}

/// The IPv6 frames A sent from index `from` on: (destination MAC, IPv6
/// source, destination, hop limit, next header).
fn sent_by_a(w: &Wire, from: usize) -> Vec<(EthernetAddress, Ipv6Addr, Ipv6Addr, u8, u8)> {
    w.sent_by_a[from..]
        .iter()
        .filter(|f| f[12..14] == [0x86, 0xdd])
        .map(|f| {
            let p = Ipv6Packet::new_unchecked(&f[14..]);
            let mac = EthernetAddress([f[0], f[1], f[2], f[3], f[4], f[5]]);
            (mac, p.src_addr(), p.dst_addr(), p.hop_limit(), f[20])
        })
        .collect()
}

#[test]
fn an_address_formed_from_an_autonomous_prefix_is_used_after_detection() {
    let mut w = ready();
    let ours = slaac_a("2001:db8:1::");
    let options = [slaac("2001:db8:1::", 3600, 1800), prefix("2001:db8:2::", 64, (true, false), 3600, 1800)];
    give(&mut w, ra(ROUTER, 1800, &options).frame());
    assert_eq!(w.a.counters().ndp_ra_received, 1);
    assert_eq!(w.a.counters().slaac_addresses, 1, "the prefix without the A flag forms none");
    assert_eq!(w.a.ipv6_address_state(ours), Some(AddrState::Tentative));
    assert_ne!(w.a.ipv6_source_for(ip("2001:db8:1::1")), Some(ours), "not a source while tentative");
    assert_eq!(w.a.ipv6_default_routers().len(), 1);
    assert_eq!(w.a.ipv6_on_link_prefixes().len(), 2);

    let detections = w.a.counters().ndp_solicits_sent;
    w.advance(secs(3));
    assert_eq!(w.a.ipv6_address_state(ours), Some(AddrState::Preferred));
    assert!(w.a.counters().ndp_solicits_sent > detections, "detection ran on it");
    assert_eq!(w.a.ipv6_source_for(ip("2001:db8:1::1")), Some(ours));
    // Ping B's address on the advertised prefix: on the link, from ours.
    let echo = w.a.icmp().echo_open(7).unwrap();
    w.a.icmp().echo6_send(echo, ip("2001:db8:1::1"), 1, b"slaac", w.now).unwrap();
    w.settle();
    match w.a.icmp().echo6_recv(echo).unwrap() {
        Some(Echo6Event::Reply { from, seq_no: 1, .. }) => assert_eq!(from, ip("2001:db8:1::1")),
        other => panic!("no reply: {other:?}"),
    }
    assert_eq!(w.b.counters().icmp6_echo_replies_sent, 1);
}

#[test]
fn lifetimes_run_out_deprecating_then_removing_the_address_and_the_router() {
    let mut w = ready();
    let ours = slaac_a("2001:db8:1::");
    let t0 = w.now;
    give(&mut w, ra(ROUTER, 30, &[slaac("2001:db8:1::", 60, 20)]).frame());
    w.advance(secs(3));
    assert_eq!(w.a.poll_at(), Some(t0 + secs(20)), "the preferred lifetime is the next deadline");
    w.advance(secs(17));
    let a = *w.a.ipv6_addresses().find(|a| a.address() == ours).unwrap();
    assert!(a.is_deprecated() && a.state == AddrState::Preferred, "deprecated, still ours");
    assert_eq!(w.a.counters().slaac_addresses_deprecated, 1);
    assert_eq!(w.a.poll_at(), Some(t0 + secs(30)), "then the router's lifetime");
    w.advance(secs(10));
    assert!(w.a.ipv6_default_routers().is_empty());
    assert_eq!(w.a.counters().ndp_routers_removed, 1);
    assert_eq!(w.a.ipv6_next_hop(ip("2001:db9::1")), None, "no router: no route off the link");
    assert_eq!(w.a.poll_at(), Some(t0 + secs(60)), "then the address's and prefix's valid lifetime");
    w.advance(secs(30));
    assert_eq!(w.a.ipv6_address_state(ours), None, "removed");
    assert!(w.a.ipv6_on_link_prefixes().is_empty());
    assert_eq!(w.a.counters().slaac_addresses_removed, 1);
    assert_eq!(w.a.poll_at(), None);
    // A router lifetime of 0 removes a router at once.
    give(&mut w, ra(ROUTER, 600, &[]).frame());
    assert_eq!(w.a.ipv6_default_routers().len(), 1);
    give(&mut w, ra(ROUTER, 0, &[]).frame());
    assert!(w.a.ipv6_default_routers().is_empty());
}

#[test]
fn the_two_hour_rule_keeps_a_forged_advertisement_from_ending_an_address() {
    let mut w = ready();
    let ours = slaac_a("2001:db8:1::");
    let t0 = w.now;
    give(&mut w, ra(ROUTER, 0, &[slaac("2001:db8:1::", 10 * 3600, 3600)]).frame());
    w.advance(secs(3));
    // A valid lifetime of 60 s while 10 hours remain: cut to two hours.
    let t1 = w.now;
    give(&mut w, ra(ROUTER, 0, &[slaac("2001:db8:1::", 60, 0)]).frame());
    let lifetimes = w.a.ipv6_addresses().find(|a| a.address() == ours).unwrap().lifetimes().unwrap();
    assert_eq!(lifetimes.valid_until, Some(t1 + secs(7200)));
    assert_eq!(lifetimes.preferred_until, Some(t1), "the preferred lifetime is taken as it is");
    w.advance(secs(61));
    assert_eq!(w.a.ipv6_address_state(ours), Some(AddrState::Preferred), "still there after 60 s");
    // With two hours or less left, a shorter one is ignored.
    give(&mut w, ra(ROUTER, 0, &[slaac("2001:db8:1::", 5, 0)]).frame());
    let lifetimes = w.a.ipv6_addresses().find(|a| a.address() == ours).unwrap().lifetimes().unwrap();
    assert_eq!(lifetimes.valid_until, Some(t1 + secs(7200)));
    w.advance(secs(7200 - 61 - 1));
    assert!(w.a.ipv6_address_state(ours).is_some());
    w.advance(secs(1));
    assert_eq!(w.a.ipv6_address_state(ours), None, "gone two hours after the short lifetime");
    assert!(w.now >= t0 + secs(7200));
}

#[test]
fn a_deprecated_address_is_not_chosen_as_a_source_when_another_fits() {
    let mut w = ready();
    let (one, two) = (slaac_a("2001:db8:1::"), slaac_a("2001:db8:2::"));
    let options = [slaac("2001:db8:1::", 3600, 10), slaac("2001:db8:2::", 3600, 3600)];
    give(&mut w, ra(ROUTER, 1800, &options).frame());
    w.advance(secs(3));
    // Longest match picks each prefix's own address while both are preferred.
    assert_eq!(w.a.ipv6_source_for(ip("2001:db8:1::99")), Some(one));
    assert_eq!(w.a.ipv6_source_for(ip("2001:db8:2::99")), Some(two));
    assert_eq!(w.a.ipv6_source_for(ip("fe80::99")), w.a.ipv6_link_local(), "link-local for link-local");
    w.advance(secs(10));
    assert!(w.a.ipv6_addresses().find(|a| a.address() == one).unwrap().is_deprecated());
    assert_eq!(w.a.ipv6_source_for(ip("2001:db8:1::99")), Some(two), "deprecated loses to a longer match");
    assert_eq!(w.a.ipv6_source_for(ip("2001:db9::1")), Some(two));
    // When every address is deprecated, one is still used.
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:2::", 3600, 0)]).frame());
    w.advance(Duration::ZERO);
    assert_eq!(w.a.ipv6_source_for(ip("2001:db9::1")), Some(one));
}

#[test]
fn invalid_advertisements_are_dropped_and_counted() {
    let mut w = ready();
    let options = [slaac("2001:db8:1::", 3600, 1800)];
    let mut bad = ra(ip("2001:db8:1::1"), 1800, &options);
    give(&mut w, bad.frame());
    bad.src = ROUTER;
    bad.ip_hop_limit = 254;
    give(&mut w, bad.frame());
    bad.ip_hop_limit = 255;
    bad.code = 1;
    give(&mut w, bad.frame());
    // A Prefix Information option with a length of 3 units, not 4.
    let mut broken = ra(ROUTER, 1800, &options).frame();
    let opt = 14 + 40 + 16;
    broken[opt + 1] = 3;
    nagare_wire::Icmpv6Packet::new_unchecked(&mut broken[14 + 40..]).fill_checksum(ROUTER, ip("ff02::1"));
    give(&mut w, broken);
    let c = w.a.counters();
    assert_eq!(c.drop_ndp_ra_invalid, 4);
    assert_eq!((c.drop_ndp_hop_limit, c.drop_ndp_malformed), (1, 3));
    assert_eq!(c.ndp_ra_received, 0);
    assert!(w.a.ipv6_default_routers().is_empty() && w.a.ipv6_on_link_prefixes().is_empty());
    assert_eq!(w.a.ipv6_addresses().count(), 1, "the link-local address alone");
    // The same advertisement, valid, is taken.
    give(&mut w, ra(ROUTER, 1800, &options).frame());
    assert_eq!(w.a.counters().ndp_ra_received, 1);
    assert_eq!(w.a.ipv6_addresses().count(), 2);
}

#[test]
fn a_flood_of_prefixes_and_routers_keeps_every_list_bounded() {
    let mut w = ready();
    for i in 0..1000u16 {
        let p = Ipv6Addr::new(0x2001, 0xdb8, 0x100 + i, 0, 0, 0, 0, 0).to_string();
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0x10, i);
        let mac = EthernetAddress([2, 0, 0, 0, (i >> 8) as u8 | 0x80, i as u8]);
        let options = [slaac(&p, FOREVER, FOREVER), NdpOption::SourceLinkLayerAddr(mac)];
        give(&mut w, ra(src, 1800, &options).frame());
        if i % 100 == 0 {
            w.advance(secs(1));
        }
    }
    let c = w.a.counters().clone();
    assert_eq!(c.ndp_ra_received, 1000);
    assert_eq!(w.a.ipv6_default_routers().len(), MAX_ROUTERS);
    assert_eq!(w.a.ipv6_on_link_prefixes().len(), MAX_PREFIXES);
    let formed = w.a.ipv6_addresses().filter(|a| a.is_autoconfigured()).count();
    assert_eq!(formed, MAX_AUTOCONFIGURED);
    assert!(w.a.ipv6_addresses().count() <= MAX_ADDRESSES);
    assert_eq!(c.ndp_router_limit, 1000 - MAX_ROUTERS as u64);
    assert_eq!(c.ndp_prefix_limit, 1000 - MAX_PREFIXES as u64);
    assert_eq!(
        (c.slaac_addresses, c.slaac_address_limit),
        (MAX_AUTOCONFIGURED as u64, 1000 - MAX_AUTOCONFIGURED as u64)
    );
    assert!(w.a.neighbor_cache_len() <= nagare_core::NdpConfig::default().cache_size);
}

#[test]
fn off_link_traffic_goes_to_the_routers_mac() {
    let mut w = ready();
    let ours = slaac_a("2001:db8:1::");
    let options = [slaac("2001:db8:1::", 3600, 1800), NdpOption::SourceLinkLayerAddr(MAC_B)];
    let mut advert = ra(ROUTER, 1800, &options);
    advert.cur_hop_limit = 42;
    give(&mut w, advert.frame());
    w.advance(secs(3));
    let far = ip("2001:db9::7");
    assert_eq!(w.a.ipv6_next_hop(far), Some(ROUTER));
    let from = w.sent_by_a.len();
    let echo = w.a.icmp().echo_open(7).unwrap();
    w.a.icmp().echo6_send(echo, far, 1, b"far", w.now).unwrap();
    let udp = w.a.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4000, 0, 0)).unwrap();
    w.a.udp().send_to6(udp, b"far", SocketAddrV6::new(far, 53, 0, 0), w.now).unwrap();
    w.settle();
    let out = sent_by_a(&w, from);
    assert_eq!(out.len(), 2, "{out:?}");
    for (mac, src, dst, hop_limit, _) in &out {
        assert_eq!((*mac, *src, *dst), (MAC_B, ours, far), "to the router's MAC, for the far address");
        assert_eq!(*hop_limit, 42, "the advertised hop limit");
    }
    assert_eq!((out[0].4, out[1].4), (58, 17));
}

#[test]
fn a_router_without_its_link_layer_address_is_resolved_through_the_neighbour_cache() {
    let mut w = ready();
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:1::", 3600, 1800)]).frame());
    w.advance(secs(3));
    assert_eq!(w.a.neighbor_lookup(ROUTER), None);
    let from = w.sent_by_a.len();
    let echo = w.a.icmp().echo_open(7).unwrap();
    w.a.icmp().echo6_send(echo, ip("2001:db9::7"), 1, b"far", w.now).unwrap();
    w.settle();
    assert_eq!(w.a.neighbor_lookup(ROUTER), Some(MAC_B), "B answered for its link-local address");
    let out = sent_by_a(&w, from);
    assert_eq!(out[0].2.segments()[..6], [0xff02, 0, 0, 0, 0, 1], "a solicitation for the router first");
    assert_eq!(out.last().map(|o| (o.0, o.2)), Some((MAC_B, ip("2001:db9::7"))));
}

#[test]
fn a_router_that_never_answers_gives_way_to_the_next_in_turn() {
    // Two routers advertise without their link-layer addresses; the first
    // is not on the link. Neither is known reachable, so off-link traffic
    // goes to the first; once neighbour discovery gives up on it, to the
    // other (RFC 4861 6.3.6's round robin), which answers.
    let mut w = ready();
    let dead = ip("fe80::dead");
    give(&mut w, ra(dead, 1800, &[]).frame());
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:1::", 3600, 1800)]).frame());
    w.advance(secs(3));
    let far = ip("2001:db9::7");
    assert_eq!(w.a.ipv6_next_hop(far), Some(dead), "the first advertised");
    let echo = w.a.icmp().echo_open(7).unwrap();
    w.a.icmp().echo6_send(echo, far, 1, b"far", w.now).unwrap();
    w.advance(secs(5));
    assert_eq!(w.a.counters().ndp_neighbors_failed, 1, "the dead router was given up on");
    assert_eq!(w.a.ipv6_next_hop(far), Some(ROUTER), "the next in turn");
    let from = w.sent_by_a.len();
    w.a.icmp().echo6_send(echo, far, 2, b"far", w.now).unwrap();
    w.settle();
    let out = sent_by_a(&w, from);
    assert_eq!(out.last().map(|o| (o.0, o.2)), Some((MAC_B, far)), "through the router that answers: {out:?}");
}

#[test]
fn a_configured_gateway_takes_off_link_traffic() {
    let mut w = ready_with(
        |c| {
            c.addresses = vec!["fd00::1/64".parse().unwrap()];
            c.gateway = Some(ip("fd00::2"));
        },
        "fd00::2/64",
    );
    assert_eq!(w.a.ipv6_gateway(), Some(ip("fd00::2")));
    let from = w.sent_by_a.len();
    let echo = w.a.icmp().echo_open(7).unwrap();
    w.a.icmp().echo6_send(echo, ip("2001:db9::7"), 1, b"far", w.now).unwrap();
    w.settle();
    let out = sent_by_a(&w, from);
    assert_eq!(out.last().map(|o| (o.0, o.1, o.2)), Some((MAC_B, ip("fd00::1"), ip("2001:db9::7"))));
    assert_eq!(w.b.counters().drop_ip6_not_for_us, 1, "B got it (and does not forward)");
}

#[test]
fn solicitations_at_start_up_stop_when_a_router_answers() {
    let ca = eui64();
    let cb = Ipv6Config { router_solicitations: 0, ..eui64() };
    let mut w = Wire::between(iface(MAC_A, 1, ca), iface(MAC_B, 2, cb));
    w.advance(secs(20));
    let rs: Vec<_> = w.sent_by_a.iter().filter(|f| f.len() > 54 && f[20] == 58 && f[54] == 133).collect();
    assert_eq!(rs.len(), 3, "three, then no more");
    assert_eq!(w.a.counters().ndp_rs_sent, 3);
    let first = Ipv6Packet::new_unchecked(&rs[0][14..]);
    assert_eq!(first.dst_addr(), ip("ff02::2"));
    let last = Ipv6Packet::new_unchecked(&rs[2][14..]);
    assert_eq!(last.src_addr(), w.a.ipv6_link_local().unwrap(), "from the link-local address once preferred");
    assert_eq!(rs[2].len(), 14 + 40 + 16, "with the source link-layer address");
    // The first goes before detection has made the link-local address
    // preferred (its delay drawn from the seed): from ::, without one.
    assert_eq!(first.src_addr(), Ipv6Addr::UNSPECIFIED);
    assert_eq!(rs[0].len(), 14 + 40 + 8, "none from ::");

    // An answer ends them.
    let mut w = Wire::between(iface(MAC_A, 1, eui64()), iface(MAC_B, 2, eui64()));
    w.advance(secs(2));
    let sent = w.a.counters().ndp_rs_sent;
    assert!(sent >= 1);
    give(&mut w, ra(ROUTER, 1800, &[]).frame());
    w.advance(secs(20));
    assert_eq!(w.a.counters().ndp_rs_sent, sent);
}

#[test]
fn the_mtu_option_lowers_the_link_mtu_for_ipv6() {
    let mut w = ready();
    give(&mut w, ra(ROUTER, 1800, &[NdpOption::Mtu(1400), slaac("2001:db8:1::", 3600, 1800)]).frame());
    assert_eq!(w.a.ipv6_mtu(), 1400);
    give(&mut w, ra(ROUTER, 1800, &[NdpOption::Mtu(1000)]).frame());
    assert_eq!(w.a.ipv6_mtu(), 1400, "below 1280: ignored");
    assert_eq!(w.a.counters().ndp_mtu_ignored, 1);
    w.advance(secs(3));
    let from = w.sent_by_a.len();
    let udp = w.a.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4000, 0, 0)).unwrap();
    w.a.udp().send_to6(udp, &[7u8; 1400], SocketAddrV6::new(ip("2001:db8:1::1"), 9, 0, 0), w.now).unwrap();
    w.settle();
    let frames: Vec<_> = w.sent_by_a[from..].iter().filter(|f| f[20] == 44).collect();
    assert_eq!(frames.len(), 2, "in fragments");
    assert!(frames.iter().all(|f| f.len() - 14 <= 1400));
}

/// TCP over IPv6 announces the MSS the advertised MTU leaves: 1400 less
/// 40 bytes of IPv6 header and 20 of TCP.
#[test]
fn a_connection_announces_the_mss_the_advertised_mtu_leaves() {
    let mut w = ready();
    give(&mut w, ra(ROUTER, 1800, &[NdpOption::Mtu(1400)]).frame());
    w.b.tcp().listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 4).unwrap();
    let from = w.sent_by_a.len();
    w.a.tcp().connect(SocketAddrV6::new(ROUTER, 80, 0, 0), 0, w.now).unwrap();
    w.settle();
    let is_syn = |f: &&Vec<u8>| f[12..14] == [0x86, 0xdd] && f[20] == 6 && f[54 + 13] & 0x12 == 0x02;
    let syn = w.sent_by_a[from..].iter().find(is_syn).expect("A's SYN");
    assert_eq!(&syn[54 + 20..54 + 24], &[2, 4, 0x05, 0x3c], "MSS 1340");
}

#[test]
fn a_prefix_without_the_on_link_flag_forms_an_address_but_its_neighbours_are_reached_through_the_router() {
    let mut w = ready();
    let options = [prefix("2001:db8:5::", 64, (false, true), 3600, 1800), NdpOption::SourceLinkLayerAddr(MAC_B)];
    give(&mut w, ra(ROUTER, 1800, &options).frame());
    w.advance(secs(3));
    assert_eq!(w.a.ipv6_address_state(slaac_a("2001:db8:5::")), Some(AddrState::Preferred));
    assert!(w.a.ipv6_on_link_prefixes().is_empty());
    assert_eq!(w.a.ipv6_next_hop(ip("2001:db8:5::9")), Some(ROUTER));
}

/// The address A makes in `prefix` with stable opaque identifiers at DAD
/// counter `counter`.
fn stable_a(w: &Wire, prefix: &str, counter: u8) -> Ipv6Addr {
    let ids = IidGenerator::new(InterfaceIds::StableOpaque, w.a.config().secrets.stable_iid, MAC_A);
    let (addr, c) = ids.generate(ip(prefix), counter).unwrap();
    assert_eq!(c, counter);
    addr
}

#[test]
fn by_default_addresses_have_stable_opaque_identifiers_of_their_prefix() {
    let mut w =
        ready_with(|c| *c = Ipv6Config { router_solicitations: 0, ..Ipv6Config::default() }, "2001:db8:1::1/64");
    let ll = w.a.ipv6_link_local().unwrap();
    assert_eq!(ll, stable_a(&w, "fe80::", 0));
    assert_ne!(ll, ip("fe80::ff:fe00:1"), "not the EUI-64 of the MAC");
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:1::", 3600, 1800), slaac("2001:db8:5::", 3600, 1800)]).frame());
    w.advance(secs(3));
    let (one, five) = (stable_a(&w, "2001:db8:1::", 0), stable_a(&w, "2001:db8:5::", 0));
    assert_eq!(w.a.ipv6_address_state(one), Some(AddrState::Preferred));
    assert_eq!(w.a.ipv6_address_state(five), Some(AddrState::Preferred));
    let iid = |a: Ipv6Addr| u128::from(a) as u64;
    assert!(iid(one) != iid(five) && iid(one) != iid(ll), "a different identifier in every prefix");
    // The same prefix again: the same address, its lifetimes renewed.
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:1::", 3600, 1800)]).frame());
    assert_eq!(w.a.counters().slaac_addresses, 2);
}

#[test]
fn a_formed_address_found_duplicate_is_retried_with_the_next_identifier() {
    // B holds the address A's identifier makes first in 2001:db8:1::/64.
    let key = ready_with(|c| c.interface_ids = InterfaceIds::StableOpaque, "2001:db8:9::1/64");
    let taken = stable_a(&key, "2001:db8:1::", 0);
    let mut w = ready_with(|c| c.interface_ids = InterfaceIds::StableOpaque, &format!("{taken}/64"));
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:1::", 3600, 1800)]).frame());
    w.advance(secs(3));
    assert_eq!(w.a.counters().dad_duplicates, 1, "B defended it");
    assert_eq!(w.a.counters().dad_iid_retries, 1);
    assert_eq!(w.a.ipv6_address_state(taken), None, "given up");
    let next = stable_a(&w, "2001:db8:1::", 1);
    assert_eq!(w.a.ipv6_address_state(next), Some(AddrState::Preferred), "the next counter's address");
    let formed: Vec<_> = w.a.ipv6_addresses().filter(|a| a.is_autoconfigured()).map(|a| a.dad_counter()).collect();
    assert_eq!(formed, [Some(1)]);
    assert_eq!(w.a.ipv6_source_for(ip("2001:db8:1::99")), Some(next));
}

#[test]
fn an_eui64_address_found_duplicate_is_not_retried() {
    let taken = slaac_a("2001:db8:1::");
    let mut w = ready_with(|_| {}, &format!("{taken}/64"));
    give(&mut w, ra(ROUTER, 1800, &[slaac("2001:db8:1::", 3600, 1800)]).frame());
    w.advance(secs(3));
    assert_eq!(w.a.counters().dad_duplicates, 1);
    assert_eq!(w.a.counters().dad_iid_retries, 0);
    assert_eq!(w.a.ipv6_address_state(taken), Some(AddrState::Duplicate));
}
