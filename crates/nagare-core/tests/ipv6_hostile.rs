//! Hostile and malformed IPv6 input: each is dropped and counted under
//! its own reason, nothing panics, and only what RFC 4443 and RFC 8200
//! ask for is answered (parameter problems, rate limited, never about an
//! error or to a multicast destination but for RFC 4443 2.4 (e.3)'s
//! exception).

mod common;

use common::{feed, OUR_MAC, PEER_MAC};
use nagare_core::buf::BufferPool;
use nagare_core::ipv6::addr::AddrState;
use nagare_core::ipv6::neighbor::NeighborState;
use nagare_core::{Capabilities, Counters, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    multicast_mac, solicited_node, EtherType, EthernetRepr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Addr, Ipv6Option,
    Ipv6OptionsRepr, Ipv6Packet, Ipv6Repr, NdpRepr,
};

const T: Instant = Instant::from_secs(5);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn us() -> Ipv6Addr {
    ip("fd00::1")
}

fn peer() -> Ipv6Addr {
    ip("fd00::2")
}

/// An interface whose addresses need no detection: preferred at once.
fn interface() -> Interface {
    let mut config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    config.ipv6 =
        Some(Ipv6Config { addresses: vec!["fd00::1/64".parse().unwrap()], dad_transmits: 0, ..Default::default() });
    let iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 256));
    assert!(iface.ipv6_addresses().all(|a| a.state == AddrState::Preferred));
    iface
}

/// [`interface`], with the peer's link-layer address learned from its
/// solicitation (what that sent is taken), so that answers go straight out.
fn interface_knowing_the_peer() -> Interface {
    let mut iface = interface();
    let learn = NdpRepr::NeighborSolicit { target: us(), lladdr: Some(PEER_MAC) };
    let g = solicited_node(&us());
    feed(&mut iface, &frame(peer(), g, IpProtocol::Icmpv6, 255, &ndp(&learn, peer(), g)), 2000, T);
    sent(&mut iface);
    iface
}

/// An IPv6 packet in an Ethernet frame from the peer, to our MAC or to
/// `dst`'s group address.
fn frame(src: Ipv6Addr, dst: Ipv6Addr, next_header: IpProtocol, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40];
    let dst_mac = multicast_mac(&dst).unwrap_or(OUR_MAC);
    EthernetRepr { src_addr: PEER_MAC, dst_addr: dst_mac, ethertype: EtherType::Ipv6 }.emit(&mut f).unwrap();
    Ipv6Repr::new(src, dst, next_header, payload.len(), hop_limit).emit(&mut f[14..]).unwrap();
    f.extend_from_slice(payload);
    f
}

fn echo_request(src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let repr = Icmpv6Repr::EchoRequest { ident: 9, seq_no: 1, data: b"ping" };
    let mut m = vec![0u8; repr.buffer_len()];
    repr.emit(&mut m, src, dst).unwrap();
    m
}

fn ndp(repr: &NdpRepr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut m = vec![0u8; repr.buffer_len()];
    repr.emit(&mut m, src, dst).unwrap();
    m
}

/// A destination options header holding `option`, then `next`.
fn dest_opts(next: IpProtocol, option: Ipv6Option<'_>) -> Vec<u8> {
    let repr = Ipv6OptionsRepr { next_header: next, options: &[option] };
    let mut h = vec![0u8; repr.buffer_len()];
    repr.emit(&mut h).unwrap();
    h
}

/// What was sent, as ICMPv6 messages: (type, code, word, source, destination).
fn sent(iface: &mut Interface) -> Vec<(u8, u8, u32, Ipv6Addr, Ipv6Addr)> {
    iface
        .tx_queue()
        .drain(..)
        .map(|f| f.to_vec())
        .filter(|f| f[12..14] == [0x86, 0xdd])
        .map(|f| {
            let p = Ipv6Packet::new_unchecked(&f[14..]);
            let m = Icmpv6Packet::new_unchecked(&f[54..]);
            assert!(m.verify_checksum(p.src_addr(), p.dst_addr()), "checksum of what we send");
            let word = u32::from_be_bytes([f[58], f[59], f[60], f[61]]);
            (f[54], f[55], word, p.src_addr(), p.dst_addr())
        })
        .collect()
}

fn only(c: &Counters) -> Vec<(&'static str, u64)> {
    c.iter().filter(|(n, v)| *v != 0 && n.starts_with("drop")).collect()
}

#[test]
fn an_echo_request_is_answered_and_the_frame_checks_hold() {
    let mut iface = interface();
    let f = frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo_request(peer(), us()));
    // Split in pieces so headers straddle buffers.
    feed(&mut iface, &f, 7, T);
    // The reply waits for the peer's address to be resolved.
    assert_eq!(iface.neighbor_state(peer()), Some(NeighborState::Incomplete));
    let out = sent(&mut iface);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].3, out[0].4), (135, us(), solicited_node(&peer())));
    let advert = NdpRepr::NeighborAdvert {
        router_flag: false,
        solicited_flag: true,
        override_flag: true,
        target: peer(),
        lladdr: Some(PEER_MAC),
    };
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 255, &ndp(&advert, peer(), us())), 2000, T);
    let out = sent(&mut iface);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].2, out[0].3, out[0].4), (129, 0x0009_0001, us(), peer()));
    assert_eq!(iface.counters().icmp6_echo_replies_sent, 1);
    assert_eq!(only(iface.counters()), []);
}

#[test]
fn bad_fixed_headers_are_dropped_and_counted() {
    let mut iface = interface();
    // Payload length past the frame.
    let mut f = frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo_request(peer(), us()));
    f[18..20].copy_from_slice(&100u16.to_be_bytes());
    feed(&mut iface, &f, 2000, T);
    // Shorter than the fixed header.
    feed(&mut iface, &f[..14 + 39], 2000, T);
    // Version 4 in an IPv6 frame.
    let mut f = frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo_request(peer(), us()));
    f[14] = 0x40;
    feed(&mut iface, &f, 2000, T);
    // Multicast, loopback and our own address as sources.
    for src in [ip("ff02::1"), Ipv6Addr::LOCALHOST, us()] {
        feed(&mut iface, &frame(src, us(), IpProtocol::Icmpv6, 64, &echo_request(src, us())), 2000, T);
    }
    // Not ours, to our MAC.
    let other = ip("fd00::9");
    feed(&mut iface, &frame(peer(), other, IpProtocol::Icmpv6, 64, &echo_request(peer(), other)), 2000, T);
    // A group we did not join: dropped by the link layer.
    let group = ip("ff02::1:ff00:9");
    feed(&mut iface, &frame(peer(), group, IpProtocol::Icmpv6, 64, &echo_request(peer(), group)), 2000, T);
    // An echo request to all nodes, and one with a bad checksum.
    let all = ip("ff02::1");
    feed(&mut iface, &frame(peer(), all, IpProtocol::Icmpv6, 64, &echo_request(peer(), all)), 2000, T);
    let mut m = echo_request(peer(), us());
    m[9] ^= 1;
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 64, &m), 2000, T);
    assert_eq!(
        only(iface.counters()),
        [
            ("drop_eth_not_for_us", 1),
            ("drop_ip6_truncated", 2),
            ("drop_ip6_bad_version", 1),
            ("drop_ip6_bad_source", 3),
            ("drop_ip6_not_for_us", 1),
            ("drop_icmp6_checksum", 1),
            ("drop_icmp6_multicast_echo", 1),
        ]
    );
    assert!(sent(&mut iface).is_empty(), "nothing answers any of them");
}

#[test]
fn neighbour_discovery_from_off_the_link_or_malformed_is_dropped() {
    let mut iface = interface();
    let solicit = NdpRepr::NeighborSolicit { target: us(), lladdr: Some(PEER_MAC) };
    let group = solicited_node(&us());
    let message = ndp(&solicit, peer(), group);
    feed(&mut iface, &frame(peer(), group, IpProtocol::Icmpv6, 254, &message), 2000, T);
    assert_eq!(only(iface.counters()), [("drop_ndp_hop_limit", 1)]);
    assert_eq!(iface.neighbor_state(peer()), None, "nothing learned from it");
    // Nonzero code, a zero-length option: RFC 4861 7.1.1's checks.
    let mut bad_code = message.clone();
    bad_code[1] = 1;
    let mut zero_len = message.clone();
    zero_len[25] = 0;
    for mut m in [bad_code, zero_len] {
        m[2..4].fill(0);
        Icmpv6Packet::new_unchecked(&mut m[..]).fill_checksum(peer(), group);
        feed(&mut iface, &frame(peer(), group, IpProtocol::Icmpv6, 255, &m), 2000, T);
    }
    assert_eq!(iface.counters().drop_ndp_malformed, 2);
    // For someone else's address.
    let other = NdpRepr::NeighborSolicit { target: ip("fd00::1:1"), lladdr: Some(PEER_MAC) };
    let g = solicited_node(&ip("fd00::1:1"));
    let f = frame(peer(), g, IpProtocol::Icmpv6, 255, &ndp(&other, peer(), g));
    feed(&mut iface, &f, 2000, T);
    assert_eq!(iface.counters().drop_eth_not_for_us, 1, "its group is not ours");
    assert!(sent(&mut iface).is_empty());

    // The real one is answered: solicited, override, to the solicitor, and
    // the solicitor is learned STALE (RFC 4861 7.2.3).
    feed(&mut iface, &frame(peer(), group, IpProtocol::Icmpv6, 255, &message), 2000, T);
    let out = sent(&mut iface);
    assert_eq!(out.len(), 1);
    let (kind, _, word, src, dst) = out[0];
    assert_eq!((kind, src, dst), (136, us(), peer()));
    assert_eq!(word >> 29, 0b011, "solicited and override, not a router");
    assert_eq!(iface.neighbor_state(peer()), Some(NeighborState::Delay), "STALE, then sent to");
    assert_eq!(iface.neighbor_lookup(peer()), Some(PEER_MAC));
}

#[test]
fn extension_header_refusals_are_counted_and_answered_as_rfc8200_says() {
    let mut iface = interface_knowing_the_peer();
    let echo = echo_request(peer(), us());

    // Nine destination options headers: past the walk's limit of eight.
    let mut chain = Vec::new();
    for i in 0..9 {
        let next = if i == 8 { IpProtocol::Icmpv6 } else { IpProtocol::Ipv6Opts };
        chain.extend(dest_opts(next, Ipv6Option::PadN(0)));
    }
    chain.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Opts, 64, &chain), 2000, T);
    assert_eq!(iface.counters().drop_ip6_ext_too_many, 1);
    assert!(sent(&mut iface).is_empty(), "dropped silently");

    // An unknown option of type 10xxxxxx: discard and send a parameter
    // problem (code 2) pointing at the option's type byte (40 + 2).
    let mut p = dest_opts(IpProtocol::Icmpv6, Ipv6Option::Unknown { kind: 0x9e, data: &[0; 2] });
    p.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Opts, 64, &p), 2000, T);
    assert_eq!(sent(&mut iface), [(4, 2, 42, us(), peer())]);
    // ... even about a packet to a multicast destination (RFC 4443 2.4
    // (e.3)), from our address of the source's scope.
    let all = ip("ff02::1");
    feed(&mut iface, &frame(peer(), all, IpProtocol::Ipv6Opts, 64, &p), 2000, T);
    assert_eq!(sent(&mut iface), [(4, 2, 42, us(), peer())]);
    // Not about an ICMPv6 error behind the option (RFC 4443 2.4 (e.1)).
    let quoted = Ipv6Repr::new(us(), peer(), IpProtocol::Icmpv6, 8, 64);
    let unreachable = Icmpv6Repr::DstUnreachable {
        reason: nagare_wire::Icmpv6DstUnreachable::PortUnreachable,
        header: quoted,
        data: &[0; 8],
    };
    let mut e = dest_opts(IpProtocol::Icmpv6, Ipv6Option::Unknown { kind: 0x9e, data: &[0; 2] });
    let at = e.len();
    e.resize(at + unreachable.buffer_len(), 0);
    unreachable.emit(&mut e[at..], peer(), us()).unwrap();
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Opts, 64, &e), 2000, T);
    assert!(sent(&mut iface).is_empty(), "no error about an error");
    // Type 11xxxxxx: not to a multicast destination.
    let mut q = dest_opts(IpProtocol::Icmpv6, Ipv6Option::Unknown { kind: 0xde, data: &[0; 2] });
    q.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), all, IpProtocol::Ipv6Opts, 64, &q), 2000, T);
    assert!(sent(&mut iface).is_empty());
    // Type 01xxxxxx: discard, no error.
    let mut r = dest_opts(IpProtocol::Icmpv6, Ipv6Option::Unknown { kind: 0x5e, data: &[0; 2] });
    r.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Opts, 64, &r), 2000, T);
    assert!(sent(&mut iface).is_empty());
    assert_eq!(iface.counters().drop_ip6_ext_unknown_option, 5);

    // An unknown next header: parameter problem code 1 at the Next Header
    // field (6); none for one to a multicast group.
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Unknown(253), 64, b"whatever"), 2000, T);
    assert_eq!(sent(&mut iface), [(4, 1, 6, us(), peer())]);
    feed(&mut iface, &frame(peer(), all, IpProtocol::Unknown(253), 64, b"whatever"), 2000, T);
    assert!(sent(&mut iface).is_empty());
    assert_eq!(iface.counters().drop_ip6_unknown_next_header, 2);
    assert_eq!(iface.counters().icmp6_errors_sent, 3);

    // A fragment goes to reassembly (this one, 12 bytes with more to
    // follow, is malformed there); an atomic fragment passes.
    let mut frag = vec![u8::from(IpProtocol::Icmpv6), 0, 0, 1, 0, 0, 0, 7];
    frag.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Frag, 64, &frag), 2000, T);
    assert_eq!(iface.counters().ip6_frag_received, 1);
    assert_eq!(iface.counters().drop_ip6_frag_malformed, 1);
    assert!(sent(&mut iface).is_empty());
    frag[3] = 0;
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Frag, 64, &frag), 2000, T);
    assert_eq!(sent(&mut iface).iter().map(|m| m.0).collect::<Vec<_>>(), [129]);
}

/// A fragment header: `next`, the offset in 8-byte units, more to come
/// or not, the identification.
fn fragment_header(next: IpProtocol, offset: u16, more: bool, ident: u32) -> Vec<u8> {
    let mut h = vec![u8::from(next), 0];
    h.extend_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
    h.extend_from_slice(&ident.to_be_bytes());
    h
}

/// `whole` (what follows a fragment header naming `next`) sent in two
/// fragments of identification `ident`, the first of 16 bytes.
fn in_two_fragments(iface: &mut Interface, next: IpProtocol, ident: u32, whole: &[u8]) {
    let (first, rest) = whole.split_at(16);
    for (offset, more, part) in [(0, true, first), (2, false, rest)] {
        let mut p = fragment_header(next, offset, more, ident);
        p.extend_from_slice(part);
        feed(iface, &frame(peer(), us(), IpProtocol::Ipv6Frag, 64, &p), 2000, T);
    }
}

#[test]
fn routing_type_0_hop_by_hop_out_of_place_nested_fragments_and_long_chains_are_refused() {
    let mut iface = interface_knowing_the_peer();
    let echo = echo_request(peer(), us());

    // A type 0 routing header with segments left (RFC 5095): discarded,
    // with a parameter problem (code 0) at its routing type (40 + 2).
    let mut rh0 = vec![u8::from(IpProtocol::Icmpv6), 2, 0, 1, 0, 0, 0, 0];
    rh0.extend_from_slice(&ip("fd00::99").octets());
    rh0.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Route, 64, &rh0), 2000, T);
    assert_eq!(iface.counters().drop_ip6_ext_routing, 1);
    assert_eq!(sent(&mut iface), [(4, 0, 42, us(), peer())]);
    // With no segments left it is passed over, as an unknown routing type
    // is, and what follows is taken.
    rh0[3] = 0;
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Route, 64, &rh0), 2000, T);
    assert_eq!(sent(&mut iface).iter().map(|m| m.0).collect::<Vec<_>>(), [129]);
    assert_eq!(iface.counters().drop_ip6_ext_routing, 1);

    // Hop-by-hop options after another header (RFC 8200 4.1): a parameter
    // problem (code 1) at the next header field that names them (40).
    let hop_by_hop = {
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Icmpv6, options: &[Ipv6Option::PadN(4)] };
        let mut h = vec![0u8; repr.buffer_len()];
        repr.emit(&mut h).unwrap();
        h
    };
    let mut late = dest_opts(IpProtocol::HopByHop, Ipv6Option::PadN(4));
    late.extend_from_slice(&hop_by_hop);
    late.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Opts, 64, &late), 2000, T);
    assert_eq!(iface.counters().drop_ip6_ext_hop_by_hop_not_first, 1);
    assert_eq!(sent(&mut iface), [(4, 1, 40, us(), peer())]);

    // A fragment header inside a reassembled datagram, and hop-by-hop
    // options behind a fragment header: dropped, counted, unanswered.
    let mut nested = fragment_header(IpProtocol::Icmpv6, 0, true, 77);
    nested.extend_from_slice(&echo);
    in_two_fragments(&mut iface, IpProtocol::Ipv6Frag, 1, &nested);
    assert_eq!(iface.counters().drop_ip6_frag_nested, 1);
    let mut behind = hop_by_hop.clone();
    behind.extend_from_slice(&echo);
    in_two_fragments(&mut iface, IpProtocol::HopByHop, 2, &behind);
    assert_eq!(iface.counters().drop_ip6_frag_nested, 2);
    assert_eq!(iface.counters().ip6_frag_reassembled, 2, "both were whole before they were refused");
    assert!(sent(&mut iface).is_empty());

    // A chain longer than the walk's 1024 bytes: dropped and counted.
    let pads = [Ipv6Option::PadN(250); 5];
    let repr = Ipv6OptionsRepr { next_header: IpProtocol::Icmpv6, options: &pads };
    let mut long = vec![0u8; repr.buffer_len()];
    repr.emit(&mut long).unwrap();
    assert!(long.len() > 1024);
    long.extend_from_slice(&echo);
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Ipv6Opts, 64, &long), 2000, T);
    assert_eq!(iface.counters().drop_ip6_ext_too_long, 1);
    assert!(sent(&mut iface).is_empty(), "dropped silently");

    // The same echo with none of these is answered: the refusals were the
    // headers', not the echo's.
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo), 2000, T);
    assert_eq!(sent(&mut iface).iter().map(|m| m.0).collect::<Vec<_>>(), [129]);
}

#[test]
fn icmpv6_errors_are_rate_limited_and_never_answer_errors() {
    let mut iface = interface_knowing_the_peer();
    for _ in 0..200 {
        feed(&mut iface, &frame(peer(), us(), IpProtocol::Unknown(253), 64, b"x"), 2000, T);
    }
    let c = iface.counters().clone();
    assert_eq!(c.icmp6_errors_sent + c.icmp6_errors_rate_limited, 200);
    assert!(c.icmp6_errors_sent <= 50, "the burst of the ICMP token bucket: {}", c.icmp6_errors_sent);
    sent(&mut iface);
    // An error received is counted, and answered with nothing.
    let quoted = Ipv6Repr::new(us(), peer(), IpProtocol::Icmpv6, 8, 64);
    let error = Icmpv6Repr::ParamProblem {
        reason: nagare_wire::Icmpv6ParamProblem::ErroneousHeaderField,
        pointer: 0,
        header: quoted,
        data: &[0; 8],
    };
    let mut m = vec![0u8; error.buffer_len()];
    error.emit(&mut m, peer(), us()).unwrap();
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 64, &m), 2000, Instant::from_secs(60));
    assert_eq!(iface.counters().icmp6_errors_received, 1);
    assert!(sent(&mut iface).is_empty());
}

#[test]
fn a_tentative_address_takes_only_neighbour_discovery() {
    let mut config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    config.ipv6 = Some(Ipv6Config { addresses: vec!["fd00::1/64".parse().unwrap()], ..Default::default() });
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 256));
    assert_eq!(iface.ipv6_address_state(us()), Some(AddrState::Tentative));
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo_request(peer(), us())), 2000, T);
    assert_eq!(iface.counters().drop_ip6_tentative_destination, 1);
    // A solicitation for it from a unicast source is someone resolving an
    // address that is not ours yet: ignored.
    let g = solicited_node(&us());
    let ns = NdpRepr::NeighborSolicit { target: us(), lladdr: Some(PEER_MAC) };
    feed(&mut iface, &frame(peer(), g, IpProtocol::Icmpv6, 255, &ndp(&ns, peer(), g)), 2000, T);
    assert!(sent(&mut iface).is_empty());
    assert_eq!(iface.counters().drop_ndp_tentative_target, 1);
    assert_eq!(iface.ipv6_address_state(us()), Some(AddrState::Tentative));
    // One from :: is another node checking it: ours is a duplicate.
    let dad = NdpRepr::NeighborSolicit { target: us(), lladdr: None };
    let f = frame(Ipv6Addr::UNSPECIFIED, g, IpProtocol::Icmpv6, 255, &ndp(&dad, Ipv6Addr::UNSPECIFIED, g));
    feed(&mut iface, &f, 2000, T);
    assert_eq!(iface.ipv6_address_state(us()), Some(AddrState::Duplicate));
    assert_eq!(iface.counters().dad_duplicates, 1);
    // A duplicate is not ours: what comes for it is not for us.
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo_request(peer(), us())), 2000, T);
    assert_eq!(iface.counters().drop_ip6_not_for_us, 1);
}

#[test]
fn without_ipv6_configured_ipv6_frames_are_an_unknown_ethertype() {
    let mut iface = Interface::new(
        InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap()),
        Capabilities::default(),
        BufferPool::new(2048, 64),
    );
    feed(&mut iface, &frame(peer(), us(), IpProtocol::Icmpv6, 64, &echo_request(peer(), us())), 2000, T);
    assert_eq!(only(iface.counters()), [("drop_eth_unknown_type", 1)]);
    assert_eq!(iface.ipv6_link_local(), None);
}
