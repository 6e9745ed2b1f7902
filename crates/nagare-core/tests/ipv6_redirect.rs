//! ICMPv6 redirects (RFC 4861 8) against one interface in virtual time:
//! frames from its first-hop router and others are crafted, what it
//! sends is read from its transmit queue. A valid redirect changes the
//! destination MAC of the packets that follow (to a better router, or to
//! the destination itself on the link); every variant 8.1 refuses is
//! dropped and counted; a flood of redirects grows nothing past the
//! bounds; a redirect ends with its lifetime, or sooner with its next
//! hop (a default router that leaves the list, a neighbour that stops
//! answering).

mod common;

use common::feed;
use nagare_core::buf::BufferPool;
use nagare_core::ipv6::redirect::{MAX_REDIRECTS, REDIRECT_LIFETIME};

use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config, NdpConfig, UdpHandle};
use nagare_wire::{
    pseudo_header_v6, EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Addr, Ipv6Addr, Ipv6Repr, NdpOption,
    NdpRepr,
};
use std::net::SocketAddrV6;
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_R1: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xf1]);
const MAC_R2: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xf2]);
const MAC_D: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xdd]);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn a_addr() -> Ipv6Addr {
    ip("fd00::1")
}

fn r1() -> Ipv6Addr {
    ip("fe80::1")
}

fn r2() -> Ipv6Addr {
    ip("fe80::2")
}

fn frame(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, src_mac: EthernetAddress, icmp: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40];
    EthernetRepr { src_addr: src_mac, dst_addr: MAC_A, ethertype: EtherType::Ipv6 }.emit(&mut f[..14]).unwrap();
    Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, icmp.len(), hop_limit).emit(&mut f[14..]).unwrap();
    f.extend_from_slice(icmp);
    f
}

fn checksum(src: Ipv6Addr, dst: Ipv6Addr, icmp: &mut [u8]) {
    icmp[2..4].fill(0);
    let mut sum = pseudo_header_v6(src, dst, 58, icmp.len() as u32);
    sum.add_bytes(icmp);
    let sum = sum.finish();
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
}

/// A redirect's ICMPv6 message: type 137, `code`, target and destination,
/// then `options` as given (checksummed for `src` to A).
fn redirect_icmp(src: Ipv6Addr, code: u8, target: Ipv6Addr, dest: Ipv6Addr, options: &[u8]) -> Vec<u8> {
    let mut m = vec![137, code, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&target.octets());
    m.extend_from_slice(&dest.octets());
    m.extend_from_slice(options);
    checksum(src, a_addr(), &mut m);
    m
}

/// A target link-layer address option for `mac`.
fn tlla(mac: EthernetAddress) -> Vec<u8> {
    let mut o = vec![2, 1];
    o.extend_from_slice(&mac.0);
    o
}

/// A redirect from `src` (hop limit 255, code 0) to A's address.
fn redirect(src: Ipv6Addr, target: Ipv6Addr, dest: Ipv6Addr, mac: Option<EthernetAddress>) -> Vec<u8> {
    let options = mac.map(tlla).unwrap_or_default();
    frame(src, a_addr(), 255, MAC_R1, &redirect_icmp(src, 0, target, dest, &options))
}

struct Host {
    a: Interface,
    now: Instant,
    sock: UdpHandle,
}

impl Host {
    /// A with fd00::1/64, its first hop fe80::1 (configured, its MAC
    /// known from a solicitation it sent), and a UDP socket.
    fn new(ndp: NdpConfig) -> Host {
        Host::taking(ndp, true)
    }

    fn taking(ndp: NdpConfig, accept_redirects: bool) -> Host {
        let v4 = nagare_wire::Ipv4Cidr::new(Ipv4Addr::new(192, 168, 9, 1), 24).unwrap();
        let mut c = InterfaceConfig::new(MAC_A, v4);
        c.ipv6 = Some(Ipv6Config {
            addresses: vec![format!("{}/64", a_addr()).parse().unwrap()],
            gateway: Some(r1()),
            router_solicitations: 0,
            ndp,
            accept_redirects,
            ..Ipv6Config::default()
        });
        let mut a = Interface::new(c, Capabilities::default(), BufferPool::new(2048, 4096));
        let now = Instant::ZERO + Duration::from_secs(3);
        while let Some(t) = a.poll_at().filter(|&t| t <= now) {
            a.poll(t);
        }
        a.poll(now);
        a.tx_queue().clear();
        let ll = a.ipv6_link_local().unwrap();
        // The router asks for our link-local address: A learns its MAC.
        let ns = NdpRepr::NeighborSolicit { target: ll, lladdr: Some(MAC_R1) };
        let mut icmp = vec![0u8; ns.buffer_len()];
        ns.emit(&mut icmp, r1(), ll).unwrap();
        let mut f = frame(r1(), ll, 255, MAC_R1, &icmp);
        // To A's link-local address itself.
        f[14 + 24..14 + 40].copy_from_slice(&ll.octets());
        feed(&mut a, &f, 2048, now);
        assert_eq!(a.neighbor_lookup(r1()), Some(MAC_R1));
        a.tx_queue().clear();
        let sock = a.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4000, 0, 0)).unwrap();
        Host { a, now, sock }
    }

    /// Sends a datagram to `dst` and returns the destination MAC of the
    /// frame that carries it (or of the solicitation it waits on: `None`).
    fn mac_towards(&mut self, dst: Ipv6Addr) -> Option<EthernetAddress> {
        self.a.udp().send_to6(self.sock, b"hello", SocketAddrV6::new(dst, 53, 0, 0), self.now).unwrap();
        let frames: Vec<Vec<u8>> = self.a.tx_queue().drain(..).map(|f| f.to_vec()).collect();
        let udp = frames.iter().find(|f| f[12..14] == [0x86, 0xdd] && f[14 + 6] == 17)?;
        EthernetAddress::from_bytes(&udp[0..6]).ok()
    }

    fn feed(&mut self, f: &[u8]) {
        feed(&mut self.a, f, 2048, self.now);
    }

    /// Moves virtual time to `until`, polling at every deadline on the
    /// way (bounded), and drops what was sent.
    fn run_until(&mut self, until: Instant) {
        for _ in 0..10_000 {
            match self.a.poll_at().filter(|&t| t <= until) {
                Some(t) => {
                    self.now = self.now.max(t);
                    self.a.poll(self.now);
                }
                None => break,
            }
        }
        self.now = until;
        self.a.poll(until);
        self.a.tx_queue().clear();
    }
}

/// A router advertisement from `src` (its MAC `mac`) with router lifetime
/// `lifetime` seconds and a source link-layer address option.
fn router_advert(src: Ipv6Addr, mac: EthernetAddress, lifetime: u16) -> Vec<u8> {
    common::router_advert(src, mac, lifetime, &[NdpOption::SourceLinkLayerAddr(mac)])
}

#[test]
fn a_redirect_to_a_better_router_changes_the_first_hop_of_what_follows() {
    let mut h = Host::new(NdpConfig::default());
    let dest = ip("2001:db8::5");
    assert_eq!(h.mac_towards(dest), Some(MAC_R1));
    h.feed(&redirect(r1(), r2(), dest, Some(MAC_R2)));
    assert_eq!(h.a.counters().ndp_redirects_received, 1);
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r2()));
    assert_eq!(h.a.neighbor_lookup(r2()), Some(MAC_R2), "the target link-layer address is cached");
    assert_eq!(h.mac_towards(dest), Some(MAC_R2));
    // Other destinations keep their router.
    assert_eq!(h.mac_towards(ip("2001:db8::6")), Some(MAC_R1));
    // The first hop is fe80::2 now: a redirect for it from fe80::1 is not
    // from the first hop any more, one from fe80::2 is.
    h.feed(&redirect(r1(), r1(), dest, None));
    assert_eq!(h.a.counters().drop_ndp_redirect_not_first_hop, 1);
    assert_eq!(h.mac_towards(dest), Some(MAC_R2));
    h.feed(&redirect(r2(), r1(), dest, None));
    assert_eq!(h.mac_towards(dest), Some(MAC_R1));
}

#[test]
fn a_redirect_to_the_destination_itself_puts_it_on_the_link() {
    let mut h = Host::new(NdpConfig::default());
    let dest = ip("2001:db8::7");
    assert_eq!(h.mac_towards(dest), Some(MAC_R1));
    h.feed(&redirect(r1(), dest, dest, Some(MAC_D)));
    assert_eq!(h.a.ipv6_next_hop(dest), Some(dest));
    assert_eq!(h.mac_towards(dest), Some(MAC_D));

    // Without the option, the destination is resolved on the link.
    let dest = ip("2001:db8::8");
    h.feed(&redirect(r1(), dest, dest, None));
    assert_eq!(h.mac_towards(dest), None, "it waits for neighbour discovery");
    let ns = h.a.counters().ndp_solicits_sent;
    assert!(ns >= 1);
}

#[test]
fn each_redirect_rfc_4861_refuses_is_dropped_and_counted() {
    let mut h = Host::new(NdpConfig::default());
    let dest = ip("2001:db8::5");
    let ok = redirect_icmp(r1(), 0, r2(), dest, &tlla(MAC_R2));
    let mut variants: Vec<(&str, Vec<u8>)> = Vec::new();
    variants.push(("hop limit 64", frame(r1(), a_addr(), 64, MAC_R1, &ok)));
    let global = ip("fd00::fe");
    variants.push((
        "a source that is not link-local",
        frame(global, a_addr(), 255, MAC_R1, &redirect_icmp(global, 0, r2(), dest, &tlla(MAC_R2))),
    ));
    variants.push(("code 1", frame(r1(), a_addr(), 255, MAC_R1, &redirect_icmp(r1(), 1, r2(), dest, &[]))));
    let mut short = ok[..32].to_vec();
    checksum(r1(), a_addr(), &mut short);
    variants.push(("shorter than 40 bytes", frame(r1(), a_addr(), 255, MAC_R1, &short)));
    variants.push(("a global target other than the destination", redirect(r1(), ip("2001:db8::99"), dest, None)));
    variants.push(("a multicast destination", redirect(r1(), r2(), ip("ff0e::1"), None)));
    variants.push(("not from the first hop", redirect(r2(), r2(), dest, Some(MAC_R2))));
    let ll = h.a.ipv6_link_local().unwrap();
    variants.push(("our own address as the target", redirect(r1(), ll, dest, Some(MAC_R2))));
    variants.push(("our own address as the destination", redirect(r1(), a_addr(), a_addr(), None)));
    let zero_length_option = [2, 0, 0, 0, 0, 0, 0, 0];
    variants.push((
        "an option of length 0",
        frame(r1(), a_addr(), 255, MAC_R1, &redirect_icmp(r1(), 0, r2(), dest, &zero_length_option)),
    ));
    let cut_option = [2, 2, 0, 0, 0, 0, 0, 0];
    variants.push((
        "an option past the end",
        frame(r1(), a_addr(), 255, MAC_R1, &redirect_icmp(r1(), 0, r2(), dest, &cut_option)),
    ));
    for (i, (what, f)) in variants.iter().enumerate() {
        let before = h.a.counters().clone();
        h.feed(f);
        let c = h.a.counters();
        assert_eq!(c.drop_ndp_redirect_invalid, before.drop_ndp_redirect_invalid + 1, "{what}");
        assert_eq!(c.drop_ndp_redirect_invalid, i as u64 + 1, "{what}");
        assert_eq!(c.ndp_redirects_received, 0, "{what}");
        assert_eq!(h.a.ipv6_next_hop(dest), Some(r1()), "{what}");
        assert_eq!(h.a.neighbor_lookup(r2()), None, "{what}");
        assert_eq!(h.mac_towards(dest), Some(MAC_R1), "{what}");
    }
    let c = h.a.counters();
    assert_eq!(c.drop_ndp_hop_limit, 1);
    assert_eq!(c.drop_ndp_redirect_not_first_hop, 1);
    assert_eq!(c.drop_ndp_malformed, variants.len() as u64 - 2);
    assert_eq!(h.a.neighbor_lookup(ll), None);
    assert_eq!(h.a.ipv6_redirects_len(), 0);
    // The genuine one is taken.
    h.feed(&frame(r1(), a_addr(), 255, MAC_R1, &ok));
    assert_eq!(h.mac_towards(dest), Some(MAC_R2));
}

#[test]
fn redirects_are_ignored_when_the_configuration_takes_none() {
    assert!(Ipv6Config::default().accept_redirects);
    let mut h = Host::taking(NdpConfig::default(), false);
    let dest = ip("2001:db8::5");
    h.feed(&redirect(r1(), r2(), dest, Some(MAC_R2)));
    assert_eq!(h.a.counters().ndp_redirects_ignored, 1);
    assert_eq!(h.a.ipv6_redirects_len(), 0);
    assert_eq!(h.mac_towards(dest), Some(MAC_R1));
}

#[test]
fn a_flood_of_redirects_grows_nothing_past_the_bounds() {
    let ndp = NdpConfig::default();
    let cache_size = ndp.cache_size;
    let mut h = Host::new(ndp);
    let flood = 4 * MAX_REDIRECTS.max(cache_size);
    for i in 0..flood {
        let dest = Ipv6Addr::from(u128::from(ip("2001:db8:1::")) + i as u128);
        let target = Ipv6Addr::from(u128::from(ip("fe80::1:0")) + i as u128);
        let mac = EthernetAddress([2, 0, 0, 1, (i >> 8) as u8, i as u8]);
        h.feed(&redirect(r1(), target, dest, Some(mac)));
        h.now += Duration::from_millis(1);
    }
    let c = h.a.counters();
    assert_eq!(c.ndp_redirects_received, flood as u64);
    assert_eq!(c.ndp_redirects_evicted, (flood - MAX_REDIRECTS) as u64);
    assert_eq!(h.a.ipv6_redirects_len(), MAX_REDIRECTS);
    assert!(h.a.neighbor_cache_len() <= cache_size);
    // The latest are kept, the earliest went back to the router.
    let last = Ipv6Addr::from(u128::from(ip("2001:db8:1::")) + (flood - 1) as u128);
    assert_eq!(h.a.ipv6_next_hop(last), Some(Ipv6Addr::from(u128::from(ip("fe80::1:0")) + (flood - 1) as u128)));
    assert_eq!(h.a.ipv6_next_hop(ip("2001:db8:1::")), Some(r1()));
}

#[test]
fn a_redirect_ends_with_its_lifetime() {
    assert_eq!(Ipv6Config::default().redirect_lifetime, REDIRECT_LIFETIME);
    assert_eq!(REDIRECT_LIFETIME, Duration::from_secs(600));
    let mut h = Host::new(NdpConfig::default());
    let (dest, other) = (ip("2001:db8::5"), ip("2001:db8::6"));
    let start = h.now;
    h.feed(&redirect(r1(), r2(), dest, Some(MAC_R2)));
    h.run_until(start + Duration::from_secs(300));
    h.feed(&redirect(r1(), r2(), other, Some(MAC_R2)));
    assert_eq!(h.a.poll_at().filter(|&t| t <= start + REDIRECT_LIFETIME), Some(start + REDIRECT_LIFETIME));
    h.run_until(start + REDIRECT_LIFETIME - Duration::from_millis(1));
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r2()));
    assert_eq!(h.a.counters().ndp_redirects_expired, 0);

    h.run_until(start + REDIRECT_LIFETIME);
    assert_eq!(h.a.counters().ndp_redirects_expired, 1);
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r1()), "back to the router");
    assert_eq!(h.a.ipv6_next_hop(other), Some(r2()), "taken later, it lasts longer");
    h.run_until(start + Duration::from_secs(300) + REDIRECT_LIFETIME);
    assert_eq!(h.a.ipv6_redirects_len(), 0);
    assert_eq!(h.a.counters().ndp_redirects_expired, 2);
    assert_eq!(h.a.ipv6_next_hop(other), Some(r1()));
}

#[test]
fn a_redirect_ends_when_its_router_leaves_the_list() {
    let mut h = Host::new(NdpConfig::default());
    let dest = ip("2001:db8::5");
    h.feed(&router_advert(r2(), MAC_R2, 1800));
    assert_eq!(h.a.ipv6_default_routers().len(), 1);
    h.feed(&redirect(r1(), r2(), dest, Some(MAC_R2)));
    assert_eq!(h.mac_towards(dest), Some(MAC_R2));
    // The router says it is one no more.
    h.feed(&router_advert(r2(), MAC_R2, 0));
    assert_eq!(h.a.counters().ndp_redirects_next_hop_gone, 1);
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r1()));
    assert_eq!(h.mac_towards(dest), Some(MAC_R1));

    // Its router lifetime running out does the same.
    h.feed(&router_advert(r2(), MAC_R2, 30));
    h.feed(&redirect(r1(), r2(), dest, Some(MAC_R2)));
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r2()));
    let now = h.now;
    h.run_until(now + Duration::from_secs(31));
    assert!(h.a.ipv6_default_routers().is_empty());
    assert_eq!(h.a.counters().ndp_redirects_next_hop_gone, 2);
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r1()));
}

#[test]
fn a_redirect_ends_when_its_next_hop_stops_answering() {
    let mut h = Host::new(NdpConfig::default());
    let (dest, kept) = (ip("2001:db8::7"), ip("2001:db8::8"));
    // On the link, says the router; nobody answers there.
    h.feed(&redirect(r1(), dest, dest, None));
    h.feed(&redirect(r1(), r2(), kept, Some(MAC_R2)));
    assert_eq!(h.mac_towards(dest), None, "it waits for neighbour discovery");
    let now = h.now;
    h.run_until(now + Duration::from_secs(10));
    assert_eq!(h.a.neighbor_state(dest), None, "given up");
    // fe80::1 went unanswered too (nobody answers here), but no redirect
    // led to it.
    assert_eq!(h.a.counters().ndp_redirects_next_hop_gone, 1);
    assert_eq!(h.a.ipv6_next_hop(dest), Some(r1()), "back to the router");
    assert_eq!(h.a.ipv6_next_hop(kept), Some(r2()));
}
