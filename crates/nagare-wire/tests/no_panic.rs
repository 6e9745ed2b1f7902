//! Arbitrary bytes through every view, parser and iterator: errors are fine,
//! panics are not. Views are also exercised unchecked, since callers may
//! wrap buffers with `new_unchecked`.

use nagare_wire::*;
use proptest::prelude::*;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);

fn ethernet(data: &[u8]) {
    let f = EthernetFrame::new_unchecked(data);
    let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
    let _ = EthernetRepr::parse(&f);
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let r = EthernetRepr::parse(&f).expect("checked frame parses");
        let mut out = [0u8; ETHERNET_HEADER_LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &data[..ETHERNET_HEADER_LEN]);
    }
}

fn arp(data: &[u8]) {
    let p = ArpPacket::new_unchecked(data);
    let _ = (
        p.hardware_type(),
        p.protocol_type(),
        p.hardware_len(),
        p.protocol_len(),
        p.operation(),
        p.source_hardware_addr(),
        p.source_protocol_addr(),
        p.target_hardware_addr(),
        p.target_protocol_addr(),
    );
    let _ = ArpRepr::parse(&p);
    if let Ok(p) = ArpPacket::new_checked(data) {
        if let Ok(r) = ArpRepr::parse(&p) {
            let mut out = [0u8; ARP_ETHERNET_IPV4_LEN];
            r.emit(&mut out).unwrap();
            assert_eq!(&out[..], &data[..ARP_ETHERNET_IPV4_LEN]);
        }
    }
}

fn ipv4(data: &[u8]) {
    let p = Ipv4Packet::new_unchecked(data);
    let _ = (
        p.version(),
        p.header_len(),
        p.dscp_ecn(),
        p.total_len(),
        p.ident(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.ttl(),
        p.protocol(),
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.verify_checksum(),
        p.options(),
        p.payload(),
    );
    let _ = Ipv4Repr::parse(&p, true);
    let _ = Ipv4Repr::parse(&p, false);
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let r = Ipv4Repr::parse(&p, false).expect("checked packet parses");
        assert_eq!(r.payload_len, p.payload().len());
        transports(p.payload(), p.src_addr(), p.dst_addr());
    }
}

fn ipv6(data: &[u8]) {
    let p = Ipv6Packet::new_unchecked(data);
    let _ = (
        p.version(),
        p.traffic_class(),
        p.flow_label(),
        p.payload_len(),
        p.next_header(),
        p.hop_limit(),
        p.src_addr(),
        p.dst_addr(),
        p.payload(),
    );
    let _ = Ipv6Repr::parse(&p);
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let r = Ipv6Repr::parse(&p).expect("checked packet parses");
        assert_eq!(r.payload_len, p.payload().len());
        let mut out = [0u8; IPV6_HEADER_LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &data[..IPV6_HEADER_LEN]);
        ipv6_ext(p.next_header(), p.payload());
        if let Ok(c) = Ipv6ExtChain::walk(p.next_header(), p.payload()) {
            if let Some(upper) = p.payload().get(c.offset..) {
                transports_v6(upper, p.src_addr(), p.dst_addr());
            }
        }
    }
}

fn icmpv6(data: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    let p = Icmpv6Packet::new_unchecked(data);
    let _ = (
        p.msg_type(),
        p.msg_code(),
        p.checksum(),
        p.echo_ident(),
        p.echo_seq_no(),
        p.mtu(),
        p.pointer(),
        p.data(),
        p.verify_checksum(src, dst),
    );
    let _ = Icmpv6Repr::parse(&p, src, dst, true);
    let _ = Icmpv6EchoHeader::parse(&p);
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        if let Ok(r) = Icmpv6Repr::parse(&p, src, dst, false) {
            assert_eq!(r.buffer_len(), data.len());
            let mut out = vec![0u8; r.buffer_len()];
            // A quoted header is re-emitted from its fields, so the bytes may
            // differ (reserved bits), but emitting must not panic.
            let _ = r.emit(&mut out, src, dst);
        }
    }
}

fn ndp(data: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    let p = Icmpv6Packet::new_unchecked(data);
    for verify in [true, false] {
        if let Ok(r) = NdpRepr::parse(&p, src, dst, verify) {
            assert_eq!(r.msg_type(), p.msg_type());
            if let NdpRepr::RouterAdvert { options, .. } | NdpRepr::Redirect { options, .. } = r {
                assert!(NdpOptionsIter::new(options).all(|o| o.is_ok()));
            }
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out, src, dst).expect("a parsed message re-emits");
            let q = Icmpv6Packet::new_checked(&out[..]).unwrap();
            assert_eq!(NdpRepr::parse(&q, src, dst, true), Ok(r));
        }
    }
    ndp_options(data);
}

fn ndp_options(data: &[u8]) {
    let mut n = 0;
    for item in NdpOptionsIter::new(data) {
        n += 1;
        if item.is_err() {
            break;
        }
    }
    assert!(n <= data.len() / 8 + 1);
    let mut rest = data;
    while let Ok((r, o)) = NdpOption::parse(rest) {
        assert!(r.len() + 8 <= rest.len());
        let mut out = vec![0u8; o.buffer_len()];
        o.emit(&mut out).expect("a parsed option re-emits");
        rest = r;
    }
}

fn mld(data: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    let p = Icmpv6Packet::new_unchecked(data);
    for verify in [true, false] {
        if let Ok(r) = MldReportRepr::parse(&p, src, dst, verify) {
            assert_eq!(r.records().filter(|x| x.is_ok()).count(), usize::from(r.num_records));
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out, src, dst).expect("a parsed report re-emits");
        }
    }
    let mut n = 0;
    for item in MldRecordsIter::new(data, u16::MAX) {
        n += 1;
        if item.is_err() {
            break;
        }
    }
    assert!(n <= data.len() / MLD_RECORD_HEADER_LEN + 1);
}

fn transports_v6(data: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    icmpv6(data, src, dst);
    ndp(data, src, dst);
    mld(data, src, dst);
}

fn ipv6_ext(first: IpProtocol, payload: &[u8]) {
    match Ipv6ExtChain::walk(first, payload) {
        Ok(c) => {
            assert!(c.offset <= payload.len().min(IPV6_EXT_MAX_LEN));
            assert!(c.headers <= IPV6_EXT_MAX_HEADERS);
            assert_eq!(c.headers == 0, c.offset == 0);
            if let Some((at, f)) = c.fragment {
                assert!(at + IPV6_FRAGMENT_HEADER_LEN <= c.offset);
                assert!(f.is_atomic() || at + IPV6_FRAGMENT_HEADER_LEN == c.offset);
            }
        }
        Err(e) => {
            if let Some(p) = e.pointer() {
                assert!((p as usize) < IPV6_HEADER_LEN + payload.len());
            }
            let _ = Error::from(e);
        }
    }
    let h = Ipv6ExtHeader::new_unchecked(payload);
    let _ = (h.next_header(), h.header_len(), h.data(), h.routing_type(), h.segments_left());
    let _ = Ipv6ExtHeader::new_checked(payload);
    let mut n = 0;
    for item in h.options_iter() {
        n += 1;
        if item.is_err() {
            break;
        }
    }
    assert!(n <= payload.len());
    let f = Ipv6FragmentHeader::new_unchecked(payload);
    let _ = (f.next_header(), f.frag_offset(), f.more_frags(), f.ident());
    if let Ok(f) = Ipv6FragmentHeader::new_checked(payload) {
        let r = Ipv6FragmentRepr::parse(&f).expect("checked fragment header parses");
        let mut out = [0u8; IPV6_FRAGMENT_HEADER_LEN];
        r.emit(&mut out).unwrap();
    }
}

fn icmp(data: &[u8]) {
    let p = Icmpv4Packet::new_unchecked(data);
    let _ = (
        p.msg_type(),
        p.msg_code(),
        p.checksum(),
        p.echo_ident(),
        p.echo_seq_no(),
        p.next_hop_mtu(),
        p.data(),
        p.verify_checksum(),
    );
    let _ = Icmpv4Repr::parse(&p, true);
    let _ = Icmpv4EchoHeader::parse(&p);
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        if let Ok(r) = Icmpv4Repr::parse(&p, false) {
            let mut out = vec![0u8; r.buffer_len()];
            // Quoted headers may not be re-emittable (e.g. odd total_len), but
            // emitting must not panic either.
            let _ = r.emit(&mut out);
        }
    }
}

fn udp(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let p = UdpPacket::new_unchecked(data);
    let _ = (p.src_port(), p.dst_port(), p.len(), p.checksum(), p.payload(), p.verify_checksum(src, dst));
    let _ = UdpRepr::parse(&p, src, dst, true);
    if let Ok(p) = UdpPacket::new_checked(data) {
        UdpRepr::parse(&p, src, dst, false).expect("checked datagram parses");
    }
}

fn tcp(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let p = TcpPacket::new_unchecked(data);
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.seq_number(),
        p.ack_number(),
        p.header_len(),
        p.flags(),
        p.window_len(),
        p.checksum(),
        p.urgent_at(),
        p.options(),
        p.payload(),
        p.verify_checksum(src, dst),
    );
    let _ = p.options_iter().count();
    let _ = TcpRepr::parse(&p, src, dst, true);
    if let Ok(p) = TcpPacket::new_checked(data) {
        if let Ok(r) = TcpRepr::parse(&p, src, dst, false) {
            assert_eq!(r.payload_len, p.payload().len());
            let mut out = vec![0u8; r.header_len()];
            r.emit_header(&mut out, src, dst, Checksum::new()).unwrap();
        }
    }
}

fn options(data: &[u8]) {
    let mut n = 0;
    for item in TcpOptionsIter::new(data) {
        n += 1;
        if item.is_err() {
            break;
        }
    }
    assert!(n <= data.len());
    let mut rest = data;
    while let Ok((r, _)) = TcpOption::parse(rest) {
        assert!(r.len() < rest.len());
        rest = r;
    }
}

fn transports(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    icmp(data);
    udp(data, src, dst);
    tcp(data, src, dst);
}

fn everything(data: &[u8]) {
    ethernet(data);
    arp(data);
    ipv4(data);
    ipv6(data);
    for first in [IpProtocol::HopByHop, IpProtocol::Ipv6Opts, IpProtocol::Ipv6Route, IpProtocol::Ipv6Frag] {
        ipv6_ext(first, data);
    }
    transports(data, A, B);
    transports_v6(data, A6, B6);
    options(data);
    let mut c = Checksum::new();
    c.add_bytes(data);
    assert_eq!(c.finish(), checksum(data));
    if let Ok(s) = core::str::from_utf8(data) {
        let _ = s.parse::<Ipv4Cidr>();
        let _ = s.parse::<EthernetAddress>();
    }
}

/// Bytes that look like a plausible IPv4 header so the deeper parsers are
/// reached often, not only when random bytes happen to validate.
fn ipv4_like() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(any::<u8>(), 20..2000), 5u8..=15, any::<u8>(), any::<bool>()).prop_map(
        |(mut v, ihl, proto, fit)| {
            v[0] = 0x40 | ihl;
            v[9] = [1, 6, 17, proto][usize::from(proto % 4)];
            if fit {
                let total = v.len() as u16;
                v[2..4].copy_from_slice(&total.to_be_bytes());
            }
            v
        },
    )
}

/// Bytes that look like an IPv6 header whose payload starts with extension
/// headers, so the walk gets past the first header often.
fn ipv6_like() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(any::<u8>(), 40..600),
        proptest::collection::vec((0u8..6, 0u8..3, any::<u8>()), 0..10),
        any::<bool>(),
    )
        .prop_map(|(mut v, chain, fit)| {
            v[0] = 0x60 | (v[0] & 0x0f);
            let names = [0u8, 60, 43, 44, 58, 17];
            v[6] = chain.first().map_or(58, |&(n, _, _)| names[usize::from(n)]);
            // Lay out short headers one after another, each naming the next.
            let mut at = 40;
            for (i, &(_, len, opt)) in chain.iter().enumerate() {
                let next = chain.get(i + 1).map_or(58, |&(n, _, _)| names[usize::from(n)]);
                if at + 8 * (usize::from(len) + 1) > v.len() {
                    break;
                }
                v[at] = next;
                v[at + 1] = len;
                v[at + 2] = opt;
                at += 8 * (usize::from(len) + 1);
            }
            if fit {
                let n = (v.len() - 40) as u16;
                v[4..6].copy_from_slice(&n.to_be_bytes());
            }
            v
        })
}

/// Bytes shaped like a TCP header with a short data offset and option area.
fn tcp_like() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(any::<u8>(), 20..120), 5u8..=15).prop_map(|(mut v, off)| {
        v[12] = (off << 4) | (v[12] & 0x0f);
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
        everything(&data);
    }

    #[test]
    fn ipv4_shaped(data in ipv4_like()) {
        everything(&data);
    }

    #[test]
    fn ipv6_shaped(data in ipv6_like()) {
        everything(&data);
    }

    #[test]
    fn icmpv6_error_shaped(mut data in proptest::collection::vec(any::<u8>(), 8..200), kind in 1u8..=4, v: u8) {
        data[0] = kind;
        if let Some(b) = data.get_mut(8) {
            *b = if v % 4 == 0 { v } else { 0x60 | (v & 0x0f) };
        }
        icmpv6(&data, A6, B6);
    }

    #[test]
    fn ndp_shaped(
        mut data in proptest::collection::vec(any::<u8>(), 8..300),
        ty in 133u8..=137,
        lens in proptest::collection::vec((1u8..=6, 0u8..=4), 0..8),
    ) {
        data[0] = ty;
        data[1] = 0;
        // Option headers with small lengths where each message's options start.
        let mut at = match ty { 133 => 8, 134 => 16, 137 => 40, _ => 24 };
        for (kind, units) in lens {
            if at + 1 >= data.len() {
                break;
            }
            data[at] = kind;
            data[at + 1] = units;
            at += usize::from(units.max(1)) * 8;
        }
        let link_local = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 9);
        ndp(&data, link_local, A6);
        ndp(&data, Ipv6Addr::UNSPECIFIED, B6);
    }

    #[test]
    fn mld_shaped(mut data in proptest::collection::vec(any::<u8>(), 8..400), count in 0u16..6, small: [u8; 6]) {
        data[0] = 143;
        data[6..8].copy_from_slice(&count.to_be_bytes());
        // Small source and aux counts in the first records' headers.
        let mut at = 8;
        for s in small {
            if at + 20 > data.len() {
                break;
            }
            data[at + 1] = s % 3;
            data[at + 2] = 0;
            data[at + 3] = s % 4;
            at += 20 + 16 * usize::from(s % 4) + 4 * usize::from(s % 3);
        }
        mld(&data, A6, B6);
    }

    #[test]
    fn tcp_shaped(data in tcp_like()) {
        tcp(&data, A, B);
        options(&data[20..]);
    }

    #[test]
    fn icmp_error_shaped(mut data in proptest::collection::vec(any::<u8>(), 8..100), unreach: bool, ihl in 0u8..16) {
        data[0] = if unreach { 3 } else { 11 };
        if let Some(b) = data.get_mut(8) {
            *b = 0x40 | ihl;
        }
        icmp(&data);
    }
}

#[test]
fn every_short_length() {
    // All prefixes of a full-size buffer of each fill value.
    for fill in [0x00u8, 0xff, 0x45, 0x50, 0x02, 0x60, 0x3c, 0x2c] {
        let buf = [fill; 100];
        for n in 0..=buf.len() {
            everything(&buf[..n]);
        }
    }
}
