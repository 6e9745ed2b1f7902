//! Feed arbitrary bytes to every parser in nagare-wire, at every layer,
//! IPv4 and IPv6.
//! Any panic is a bug; parsed representations must also re-emit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_wire::*;

fn transports(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let _ = p.verify_checksum();
        let _ = Icmpv4EchoHeader::parse(&p);
        if let Ok(r) = Icmpv4Repr::parse(&p, false) {
            let mut out = vec![0u8; r.buffer_len()];
            let _ = r.emit(&mut out);
        }
    }
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = UdpRepr::parse(&p, src, dst, true);
        let r = UdpRepr::parse(&p, src, dst, false).expect("checked UDP parses");
        let mut out = vec![0u8; UDP_HEADER_LEN + p.payload().len()];
        r.emit(&mut out, p.payload(), src, dst).expect("re-emit UDP");
        assert!(UdpPacket::new_checked(&out[..]).unwrap().verify_checksum(src, dst));
    }
    if let Ok(p) = TcpPacket::new_checked(data) {
        for _ in p.options_iter() {}
        let _ = TcpRepr::parse(&p, src, dst, true);
        if let Ok(r) = TcpRepr::parse(&p, src, dst, false) {
            // Re-emitting needs the segment length to fit the pseudo header.
            if r.buffer_len() <= usize::from(u16::MAX) {
                let mut out = vec![0u8; r.buffer_len()];
                r.emit(&mut out, p.payload(), src, dst).expect("re-emit TCP");
                let q = TcpPacket::new_checked(&out[..]).expect("emitted TCP is valid");
                assert!(q.verify_checksum(src, dst));
            }
        }
    }
}

fn transports_v6(data: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        let _ = p.verify_checksum(src, dst);
        let _ = Icmpv6EchoHeader::parse(&p);
        if let Ok(r) = Icmpv6Repr::parse(&p, src, dst, false) {
            let mut out = vec![0u8; r.buffer_len()];
            let _ = r.emit(&mut out, src, dst);
        }
    }
    let p = Icmpv6Packet::new_unchecked(data);
    if let Ok(r) = NdpRepr::parse(&p, src, dst, false) {
        if let NdpRepr::RouterAdvert { options, .. } | NdpRepr::Redirect { options, .. } = r {
            assert!(NdpOptionsIter::new(options).all(|o| o.is_ok()), "parsed NDP options all parse");
        }
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out, src, dst).expect("re-emit NDP");
        let q = Icmpv6Packet::new_checked(&out[..]).expect("emitted NDP is valid");
        assert_eq!(NdpRepr::parse(&q, src, dst, true), Ok(r));
    }
    if let Ok(r) = MldReportRepr::parse(&p, src, dst, false) {
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out, src, dst).expect("re-emit MLDv2 report");
        let q = Icmpv6Packet::new_checked(&out[..]).expect("emitted report is valid");
        assert_eq!(MldReportRepr::parse(&q, src, dst, true), Ok(r));
    }
}

fn ipv6(data: &[u8]) {
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let r = Ipv6Repr::parse(&p).expect("checked IPv6 parses");
        let mut out = [0u8; IPV6_HEADER_LEN];
        r.emit(&mut out).expect("re-emit IPv6");
        assert_eq!(&out[..], &data[..IPV6_HEADER_LEN]);
        match Ipv6ExtChain::walk(p.next_header(), p.payload()) {
            Ok(c) => {
                assert!(c.offset <= p.payload().len() && c.headers <= IPV6_EXT_MAX_HEADERS);
                if let Some(upper) = p.payload().get(c.offset..) {
                    transports_v6(upper, p.src_addr(), p.dst_addr());
                }
            }
            Err(e) => {
                let _ = Icmpv6ParamProblem::for_ext_error(&e);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // Raw checksum: pieces must sum like the whole.
    let mid = data.len() / 3;
    let mut c = Checksum::new();
    c.add_bytes(&data[..mid]);
    c.add_bytes(&data[mid..]);
    assert_eq!(c.finish(), checksum(data));

    // Options area alone.
    for _ in TcpOptionsIter::new(data) {}

    // As an Ethernet frame and as each layer on its own.
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = EthernetRepr::parse(&f);
        match f.ethertype() {
            EtherType::Arp => {
                if let Ok(p) = ArpPacket::new_checked(f.payload()) {
                    let _ = ArpRepr::parse(&p);
                }
            }
            EtherType::Ipv4 => {
                if let Ok(p) = Ipv4Packet::new_checked(f.payload()) {
                    let _ = Ipv4Repr::parse(&p, true);
                    transports(p.payload(), p.src_addr(), p.dst_addr());
                }
            }
            EtherType::Ipv6 => ipv6(f.payload()),
            _ => {}
        }
    }
    if let Ok(p) = ArpPacket::new_checked(data) {
        let _ = ArpRepr::parse(&p);
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = Ipv4Repr::parse(&p, true);
        if let Ok(r) = Ipv4Repr::parse(&p, false) {
            let mut out = [0u8; IPV4_HEADER_LEN];
            r.emit(&mut out).expect("re-emit IPv4");
        }
        transports(p.payload(), p.src_addr(), p.dst_addr());
    }
    transports(data, Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(198, 51, 100, 7));

    // IPv6, its extension headers from every starting header, and ICMPv6,
    // neighbour discovery and MLD on their own.
    ipv6(data);
    for first in [IpProtocol::HopByHop, IpProtocol::Ipv6Opts, IpProtocol::Ipv6Route, IpProtocol::Ipv6Frag] {
        let _ = Ipv6ExtChain::walk(first, data);
    }
    for _ in Ipv6OptionsIter::new(data) {}
    for _ in NdpOptionsIter::new(data) {}
    for _ in MldRecordsIter::new(data, u16::MAX) {}
    let link_local = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    transports_v6(data, link_local, IPV6_ALL_NODES);

    if let Ok(s) = core::str::from_utf8(data) {
        let _ = s.parse::<Ipv4Cidr>();
        let _ = s.parse::<EthernetAddress>();
    }
});
