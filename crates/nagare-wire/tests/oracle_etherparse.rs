//! Cross-check against etherparse 0.21 as an independent implementation:
//! frames we emit decode in etherparse with the same values and checksums
//! it agrees with, and frames etherparse builds decode in ours.

use etherparse::{
    icmpv4::DestUnreachableHeader,
    icmpv6::{
        DestUnreachableCode, Icmpv6PayloadSlice, NdpOptionSlice, NeighborAdvertisementHeader, ParameterProblemCode,
        ParameterProblemHeader, PrefixInformation, RouterAdvertisementHeader, TimeExceededCode,
    },
    ArpHardwareId, IcmpEchoHeader, Icmpv4Header, Icmpv4Type, Icmpv6Header, Icmpv6Slice, Icmpv6Type, IpDscp, IpEcn,
    IpFragOffset, IpHeaders, IpNumber, Ipv4Header, Ipv6Extensions, Ipv6FlowLabel, Ipv6FragmentHeader as EpFragment,
    Ipv6Header, Ipv6RawExtHeader, Ipv6RoutingExtensions, LinkHeader, NetHeaders, PacketBuilder, PacketHeaders,
    TcpOptionElement, TransportHeader,
};
use nagare_wire::*;
use proptest::prelude::*;

fn ipv4_addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn ipv6_addr() -> impl Strategy<Value = Ipv6Addr> {
    any::<[u8; 16]>().prop_map(Ipv6Addr::from)
}

/// Check etherparse's view of our IPv6 fixed header.
fn check_ipv6(v6: &Ipv6Header, ip: &Ipv6Repr) {
    assert_eq!(v6.source, ip.src_addr.octets());
    assert_eq!(v6.destination, ip.dst_addr.octets());
    assert_eq!(v6.traffic_class, ip.traffic_class);
    assert_eq!(v6.flow_label.value(), ip.flow_label);
    assert_eq!(usize::from(v6.payload_length), ip.payload_len);
    assert_eq!(v6.hop_limit, ip.hop_limit);
}

/// Ethernet + IPv4 (unfragmented, so etherparse decodes the transport) with
/// `emit_transport` writing the IP payload.
fn frame(eth: &EthernetRepr, ip: &Ipv4Repr, emit_transport: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut buf = vec![0u8; ETHERNET_HEADER_LEN + ip.buffer_len()];
    eth.emit(&mut buf).unwrap();
    ip.emit(&mut buf[ETHERNET_HEADER_LEN..]).unwrap();
    emit_transport(&mut buf[ETHERNET_HEADER_LEN + IPV4_HEADER_LEN..]);
    buf
}

/// Check etherparse's view of the Ethernet and IPv4 headers; return the IP
/// header for transport checksum calculations.
fn check_eth_ip(h: &PacketHeaders<'_>, eth: &EthernetRepr, ip: &Ipv4Repr) -> Ipv4Header {
    match &h.link {
        Some(LinkHeader::Ethernet2(e)) => {
            assert_eq!(e.source, eth.src_addr.0);
            assert_eq!(e.destination, eth.dst_addr.0);
            assert_eq!(e.ether_type.0, u16::from(eth.ethertype));
        }
        other => panic!("link {other:?}"),
    }
    match &h.net {
        Some(NetHeaders::Ipv4(v4, _)) => {
            assert_eq!(v4.source, ip.src_addr.octets());
            assert_eq!(v4.destination, ip.dst_addr.octets());
            assert_eq!(v4.protocol.0, u8::from(ip.protocol));
            assert_eq!(usize::from(v4.total_len), 20 + ip.payload_len);
            assert_eq!(v4.time_to_live, ip.ttl);
            assert_eq!(v4.identification, ip.ident);
            assert_eq!(v4.dont_fragment, ip.dont_frag);
            assert_eq!(v4.more_fragments, ip.more_frags);
            assert_eq!(v4.fragment_offset.byte_offset(), ip.frag_offset);
            assert_eq!((v4.dscp.value() << 2) | v4.ecn.value(), ip.dscp_ecn);
            assert_eq!(v4.header_checksum, v4.calc_header_checksum());
            v4.clone()
        }
        other => panic!("net {other:?}"),
    }
}

prop_compose! {
    fn eth_ip(protocol: IpProtocol)(
        src_addr in mac(), dst_addr in mac(),
        src in ipv4_addr(), dst in ipv4_addr(),
        ttl: u8, ident: u16, dont_frag: bool, dscp_ecn: u8,
    ) -> (EthernetRepr, Ipv4Repr) {
        (
            EthernetRepr { src_addr, dst_addr, ethertype: EtherType::Ipv4 },
            Ipv4Repr {
                src_addr: src, dst_addr: dst, protocol, payload_len: 0, ttl, ident,
                dont_frag, more_frags: false, frag_offset: 0, dscp_ecn,
            },
        )
    }
}

prop_compose! {
    fn tcp_repr()(
        src_port: u16, dst_port: u16, seq: u32,
        ack in proptest::option::of(any::<u32>()),
        flag_bits in 0u16..0x200,
        window_len: u16, urgent_pointer: u16,
        max_seg_size in proptest::option::of(any::<u16>()),
        window_scale in proptest::option::of(0u8..=14),
        sack_permitted: bool,
        n_sack in 0usize..=4,
        blocks: [(u32, u32); 4],
        timestamp in proptest::option::of(any::<(u32, u32)>()),
    ) -> TcpRepr {
        let mut flags = TcpFlags::from_bits_truncate(flag_bits);
        flags.set(TcpFlags::ACK, ack.is_some());
        let mut sack_ranges = [None; 4];
        for (s, b) in sack_ranges.iter_mut().zip(blocks).take(n_sack) {
            *s = Some(b);
        }
        TcpRepr {
            src_port, dst_port, seq_number: TcpSeqNumber(seq),
            ack_number: ack.map(TcpSeqNumber), flags, window_len, urgent_pointer,
            max_seg_size, window_scale, sack_permitted, sack_ranges, timestamp, payload_len: 0,
        }
    }
}

fn flags_of(t: &etherparse::TcpHeader) -> TcpFlags {
    let mut f = TcpFlags::empty();
    for (on, flag) in [
        (t.fin, TcpFlags::FIN),
        (t.syn, TcpFlags::SYN),
        (t.rst, TcpFlags::RST),
        (t.psh, TcpFlags::PSH),
        (t.ack, TcpFlags::ACK),
        (t.urg, TcpFlags::URG),
        (t.ece, TcpFlags::ECE),
        (t.cwr, TcpFlags::CWR),
        (t.ns, TcpFlags::NS),
    ] {
        f.set(flag, on);
    }
    f
}

proptest! {
    #[test]
    fn our_udp_in_etherparse(
        (eth, mut ip) in eth_ip(IpProtocol::Udp),
        src_port: u16, dst_port: u16,
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        ip.payload_len = UDP_HEADER_LEN + payload.len();
        let udp = UdpRepr { src_port, dst_port };
        let buf = frame(&eth, &ip, |b| udp.emit(b, &payload, ip.src_addr, ip.dst_addr).unwrap());
        let h = PacketHeaders::from_ethernet_slice(&buf).unwrap();
        let v4 = check_eth_ip(&h, &eth, &ip);
        match &h.transport {
            Some(TransportHeader::Udp(u)) => {
                prop_assert_eq!(u.source_port, src_port);
                prop_assert_eq!(u.destination_port, dst_port);
                prop_assert_eq!(usize::from(u.length), 8 + payload.len());
                prop_assert_eq!(u.checksum, u.calc_checksum_ipv4(&v4, &payload).unwrap());
            }
            other => panic!("transport {other:?}"),
        }
        prop_assert_eq!(h.payload.slice(), &payload[..]);
    }

    #[test]
    fn our_tcp_in_etherparse(
        (eth, mut ip) in eth_ip(IpProtocol::Tcp),
        repr in tcp_repr(),
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let repr = TcpRepr { payload_len: payload.len(), ..repr };
        ip.payload_len = repr.buffer_len();
        let buf = frame(&eth, &ip, |b| repr.emit(b, &payload, ip.src_addr, ip.dst_addr).unwrap());
        let h = PacketHeaders::from_ethernet_slice(&buf).unwrap();
        let v4 = check_eth_ip(&h, &eth, &ip);
        let Some(TransportHeader::Tcp(t)) = &h.transport else { panic!("{:?}", h.transport) };
        prop_assert_eq!(t.source_port, repr.src_port);
        prop_assert_eq!(t.destination_port, repr.dst_port);
        prop_assert_eq!(t.sequence_number, repr.seq_number.0);
        prop_assert_eq!(t.acknowledgment_number, repr.ack_number.map_or(0, |a| a.0));
        prop_assert_eq!(flags_of(t), repr.flags);
        prop_assert_eq!(t.window_size, repr.window_len);
        prop_assert_eq!(t.urgent_pointer, repr.urgent_pointer);
        prop_assert_eq!(t.header_len(), repr.header_len());
        prop_assert_eq!(t.checksum, t.calc_checksum_ipv4(&v4, &payload).unwrap());
        prop_assert_eq!(h.payload.slice(), &payload[..]);

        let (mut mss, mut ws, mut sackok, mut ts, mut sack) = (None, None, false, None, [None; 4]);
        for o in t.options_iterator() {
            match o.unwrap() {
                TcpOptionElement::Noop => {}
                TcpOptionElement::MaximumSegmentSize(v) => mss = Some(v),
                TcpOptionElement::WindowScale(v) => ws = Some(v),
                TcpOptionElement::SelectiveAcknowledgementPermitted => sackok = true,
                TcpOptionElement::Timestamp(a, b) => ts = Some((a, b)),
                TcpOptionElement::SelectiveAcknowledgement(first, rest) => {
                    sack[0] = Some(first);
                    sack[1..].copy_from_slice(&rest);
                }
            }
        }
        prop_assert_eq!(mss, repr.max_seg_size);
        prop_assert_eq!(ws, repr.window_scale);
        prop_assert_eq!(sackok, repr.sack_permitted);
        prop_assert_eq!(ts, repr.timestamp);
        // Blocks that did not fit are dropped; the rest arrive in order.
        let n = sack.iter().flatten().count();
        prop_assert_eq!(&sack[..n], &repr.sack_ranges[..n]);
        prop_assert!(n == repr.sack_ranges.iter().flatten().count() || repr.header_len() >= 56);
    }

    #[test]
    fn our_icmp_echo_in_etherparse(
        (eth, mut ip) in eth_ip(IpProtocol::Icmp),
        reply: bool, ident: u16, seq_no: u16,
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let icmp = if reply {
            Icmpv4Repr::EchoReply { ident, seq_no, data: &data }
        } else {
            Icmpv4Repr::EchoRequest { ident, seq_no, data: &data }
        };
        ip.payload_len = icmp.buffer_len();
        let buf = frame(&eth, &ip, |b| icmp.emit(b).unwrap());
        let h = PacketHeaders::from_ethernet_slice(&buf).unwrap();
        check_eth_ip(&h, &eth, &ip);
        let Some(TransportHeader::Icmpv4(i)) = &h.transport else { panic!("{:?}", h.transport) };
        let echo = IcmpEchoHeader { id: ident, seq: seq_no };
        let expect = if reply { Icmpv4Type::EchoReply(echo) } else { Icmpv4Type::EchoRequest(echo) };
        prop_assert_eq!(&i.icmp_type, &expect);
        prop_assert_eq!(i.checksum, Icmpv4Header::with_checksum(expect, &data).checksum);
        prop_assert_eq!(h.payload.slice(), &data[..]);
    }

    #[test]
    fn our_arp_in_etherparse(
        src_addr in mac(), op in 1u16..=2,
        sha in mac(), spa in ipv4_addr(), tha in mac(), tpa in ipv4_addr(),
    ) {
        let eth = EthernetRepr { src_addr, dst_addr: EthernetAddress::BROADCAST, ethertype: EtherType::Arp };
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::from(op),
            source_hardware_addr: sha, source_protocol_addr: spa,
            target_hardware_addr: tha, target_protocol_addr: tpa,
        };
        let mut buf = vec![0u8; 14 + arp.buffer_len()];
        eth.emit(&mut buf).unwrap();
        arp.emit(&mut buf[14..]).unwrap();
        let h = PacketHeaders::from_ethernet_slice(&buf).unwrap();
        let Some(NetHeaders::Arp(a)) = &h.net else { panic!("{:?}", h.net) };
        prop_assert_eq!(a.hw_addr_type, ArpHardwareId::ETHERNET);
        prop_assert_eq!(a.proto_addr_type, etherparse::EtherType::IPV4);
        let e = a.try_eth_ipv4().unwrap();
        prop_assert_eq!(e.operation.0, op);
        prop_assert_eq!(e.sender_mac, sha.0);
        prop_assert_eq!(e.sender_ipv4, spa.octets());
        prop_assert_eq!(e.target_mac, tha.0);
        prop_assert_eq!(e.target_ipv4, tpa.octets());
    }

    #[test]
    fn etherparse_udp_in_ours(
        src_mac: [u8; 6], dst_mac: [u8; 6], src: [u8; 4], dst: [u8; 4],
        ttl: u8, ident: u16, df: bool, dscp in 0u8..64, ecn in 0u8..4,
        src_port: u16, dst_port: u16,
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut v4 = Ipv4Header::new(0, ttl, IpNumber::UDP, src, dst).unwrap();
        v4.identification = ident;
        v4.dont_fragment = df;
        v4.dscp = IpDscp::try_new(dscp).unwrap();
        v4.ecn = IpEcn::try_new(ecn).unwrap();
        let mut buf = Vec::new();
        PacketBuilder::ethernet2(src_mac, dst_mac)
            .ip(IpHeaders::Ipv4(v4, Default::default()))
            .udp(src_port, dst_port)
            .write(&mut buf, &payload)
            .unwrap();

        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        let e = EthernetRepr::parse(&f).unwrap();
        prop_assert_eq!(e, EthernetRepr {
            src_addr: EthernetAddress(src_mac), dst_addr: EthernetAddress(dst_mac), ethertype: EtherType::Ipv4,
        });
        let p = Ipv4Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv4Repr::parse(&p, true).unwrap();
        prop_assert_eq!(ip, Ipv4Repr {
            src_addr: Ipv4Addr::from(src), dst_addr: Ipv4Addr::from(dst), protocol: IpProtocol::Udp,
            payload_len: 8 + payload.len(), ttl, ident, dont_frag: df, more_frags: false,
            frag_offset: 0, dscp_ecn: (dscp << 2) | ecn,
        });
        let u = UdpPacket::new_checked(p.payload()).unwrap();
        prop_assert_eq!(UdpRepr::parse(&u, ip.src_addr, ip.dst_addr, true).unwrap(), UdpRepr { src_port, dst_port });
        prop_assert_eq!(u.payload(), &payload[..]);
    }

    #[test]
    fn etherparse_tcp_in_ours(
        src: [u8; 4], dst: [u8; 4],
        src_port: u16, dst_port: u16, seq: u32, window: u16,
        ack in proptest::option::of(any::<u32>()),
        syn: bool, fin: bool, psh: bool,
        mss: u16, ws in 0u8..=14, tsval: u32, tsecr: u32,
        sacks in proptest::collection::vec(any::<(u32, u32)>(), 0..=3),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut opts = vec![
            TcpOptionElement::MaximumSegmentSize(mss),
            TcpOptionElement::Noop,
            TcpOptionElement::WindowScale(ws),
            TcpOptionElement::Timestamp(tsval, tsecr),
        ];
        // Room left: 40 - (4 + 1 + 3 + 10) = 22 bytes: up to 2 blocks.
        let sacks = &sacks[..sacks.len().min(2)];
        if let Some((&first, rest)) = sacks.split_first() {
            let mut more = [None; 3];
            for (m, r) in more.iter_mut().zip(rest) {
                *m = Some(*r);
            }
            opts.push(TcpOptionElement::SelectiveAcknowledgement(first, more));
        }
        let mut b = PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4(src, dst, 64)
            .tcp(src_port, dst_port, seq, window)
            .options(&opts)
            .unwrap();
        if syn { b = b.syn(); }
        if fin { b = b.fin(); }
        if psh { b = b.psh(); }
        if let Some(a) = ack { b = b.ack(a); }
        let mut buf = Vec::new();
        b.write(&mut buf, &payload).unwrap();

        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        let p = Ipv4Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv4Repr::parse(&p, true).unwrap();
        prop_assert_eq!(ip.protocol, IpProtocol::Tcp);
        let t = TcpPacket::new_checked(p.payload()).unwrap();
        let r = TcpRepr::parse(&t, ip.src_addr, ip.dst_addr, true).unwrap();
        let mut flags = TcpFlags::empty();
        flags.set(TcpFlags::SYN, syn);
        flags.set(TcpFlags::FIN, fin);
        flags.set(TcpFlags::PSH, psh);
        flags.set(TcpFlags::ACK, ack.is_some());
        let mut sack_ranges = [None; 4];
        for (s, r) in sack_ranges.iter_mut().zip(sacks) {
            *s = Some(*r);
        }
        prop_assert_eq!(r, TcpRepr {
            src_port, dst_port, seq_number: TcpSeqNumber(seq),
            ack_number: ack.map(TcpSeqNumber), flags, window_len: window, urgent_pointer: 0,
            max_seg_size: Some(mss), window_scale: Some(ws), sack_permitted: false,
            sack_ranges, timestamp: Some((tsval, tsecr)), payload_len: payload.len(),
        });
        prop_assert_eq!(t.payload(), &payload[..]);
    }

    #[test]
    fn etherparse_icmp_echo_in_ours(
        src: [u8; 4], dst: [u8; 4], id: u16, seq: u16, reply: bool,
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let b = PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(src, dst, 64);
        let b = if reply { b.icmpv4_echo_reply(id, seq) } else { b.icmpv4_echo_request(id, seq) };
        let mut buf = Vec::new();
        b.write(&mut buf, &data).unwrap();
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        let p = Ipv4Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv4Repr::parse(&p, true).unwrap();
        prop_assert_eq!(ip.protocol, IpProtocol::Icmp);
        let payload = p.payload();
        let i = Icmpv4Packet::new_checked(payload).unwrap();
        let r = Icmpv4Repr::parse(&i, true).unwrap();
        let expect = if reply {
            Icmpv4Repr::EchoReply { ident: id, seq_no: seq, data: &data }
        } else {
            Icmpv4Repr::EchoRequest { ident: id, seq_no: seq, data: &data }
        };
        prop_assert_eq!(r, expect);
    }

    #[test]
    fn etherparse_ipv4_fragment_fields_in_ours(
        units in 0u16..8192, mf: bool, proto: u8,
        payload in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        let mut v4 = Ipv4Header::new(payload.len() as u16, 9, IpNumber(proto), [1, 2, 3, 4], [5, 6, 7, 8]).unwrap();
        v4.fragment_offset = IpFragOffset::try_new(units).unwrap();
        v4.more_fragments = mf;
        v4.header_checksum = v4.calc_header_checksum();
        let mut buf = v4.to_bytes().to_vec();
        buf.extend_from_slice(&payload);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        let r = Ipv4Repr::parse(&p, true).unwrap();
        prop_assert_eq!(r.frag_offset, units * 8);
        prop_assert_eq!(r.more_frags, mf);
        prop_assert_eq!(r.protocol, IpProtocol::from(proto));
        prop_assert_eq!(r.payload_len, payload.len());
        // And back: our emit of the same repr is byte-identical.
        let mut out = [0u8; 20];
        r.emit(&mut out).unwrap();
        prop_assert_eq!(&out[..], &buf[..20]);
    }
}

#[test]
fn etherparse_arp_in_ours() {
    let arp = etherparse::ArpPacket::new(
        ArpHardwareId::ETHERNET,
        etherparse::EtherType::IPV4,
        etherparse::ArpOperation::REPLY,
        &[2, 0, 0, 0, 0, 1],
        &[10, 0, 0, 1],
        &[2, 0, 0, 0, 0, 2],
        &[10, 0, 0, 2],
    )
    .unwrap();
    let mut buf = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]).arp(arp).write(&mut buf).unwrap();
    let f = EthernetFrame::new_checked(&buf[..]).unwrap();
    assert_eq!(f.ethertype(), EtherType::Arp);
    let p = ArpPacket::new_checked(f.payload()).unwrap();
    assert_eq!(
        ArpRepr::parse(&p).unwrap(),
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    );
}

#[test]
fn our_port_unreachable_in_etherparse() {
    let quoted = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 2),
        dst_addr: Ipv4Addr::new(10, 0, 0, 1),
        protocol: IpProtocol::Udp,
        payload_len: 14,
        ttl: 64,
        ident: 7,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        dscp_ecn: 0,
    };
    let udp_head = [0xeb, 0x63, 0x00, 0x09, 0x00, 0x0e, 0x12, 0x34];
    let icmp = Icmpv4Repr::DstUnreachable { reason: DstUnreachable::PortUnreachable, header: quoted, data: &udp_head };
    let mut buf = vec![0u8; icmp.buffer_len()];
    icmp.emit(&mut buf).unwrap();
    let (h, rest) = Icmpv4Header::from_slice(&buf).unwrap();
    assert_eq!(h.icmp_type, Icmpv4Type::DestinationUnreachable(DestUnreachableHeader::Port));
    assert_eq!(h.checksum, Icmpv4Header::with_checksum(h.icmp_type.clone(), rest).checksum);
    let (q, tail) = Ipv4Header::from_slice(rest).unwrap();
    assert_eq!(q.source, [10, 0, 0, 2]);
    assert_eq!(q.total_len, 34);
    assert_eq!(q.header_checksum, q.calc_header_checksum());
    assert_eq!(tail, &udp_head);
}

proptest! {
    #[test]
    fn our_ipv6_ext_chain_in_etherparse(
        src in ipv6_addr(), dst in ipv6_addr(),
        hop_limit: u8, traffic_class: u8, flow_label in 0..=IPV6_MAX_FLOW_LABEL,
        alert: u16, with_dest_opts: bool, with_routing: bool, with_frag: bool, ident: u32,
        payload in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        // Hop-by-hop (Router Alert), maybe destination options, maybe a
        // routing header with no segments left, maybe an atomic fragment,
        // then a payload with "no next header".
        let mut exts = Vec::new();
        let mut names = vec![IpProtocol::HopByHop];
        if with_dest_opts { names.push(IpProtocol::Ipv6Opts); }
        if with_routing { names.push(IpProtocol::Ipv6Route); }
        if with_frag { names.push(IpProtocol::Ipv6Frag); }
        names.push(IpProtocol::Ipv6NoNxt);
        for (i, name) in names.iter().enumerate().take(names.len() - 1) {
            let next = names[i + 1];
            let start = exts.len();
            match name {
                IpProtocol::HopByHop => {
                    let opts = [Ipv6Option::RouterAlert(alert)];
                    let r = Ipv6OptionsRepr { next_header: next, options: &opts };
                    exts.resize(start + r.buffer_len(), 0);
                    r.emit(&mut exts[start..]).unwrap();
                }
                IpProtocol::Ipv6Opts => {
                    let r = Ipv6OptionsRepr { next_header: next, options: &[Ipv6Option::PadN(9)] };
                    exts.resize(start + r.buffer_len(), 0);
                    r.emit(&mut exts[start..]).unwrap();
                }
                IpProtocol::Ipv6Route => {
                    exts.extend_from_slice(&[u8::from(next), 0, 4, 0, 0, 0, 0, 0]);
                }
                _ => {
                    let f = Ipv6FragmentRepr { next_header: next, frag_offset: 0, more_frags: false, ident };
                    exts.resize(start + 8, 0);
                    f.emit(&mut exts[start..]).unwrap();
                }
            }
        }
        let ip = Ipv6Repr {
            src_addr: src, dst_addr: dst, next_header: IpProtocol::HopByHop,
            payload_len: exts.len() + payload.len(), hop_limit, traffic_class, flow_label,
        };
        let mut buf = vec![0u8; ip.buffer_len()];
        ip.emit(&mut buf).unwrap();
        buf[40..40 + exts.len()].copy_from_slice(&exts);
        buf[40 + exts.len()..].copy_from_slice(&payload);

        let (h, exts_ep, rest) = etherparse::Ipv6Header::from_slice(&buf)
            .map(|(h, rest)| {
                let (e, _, rest) = Ipv6Extensions::from_slice(h.next_header, rest).unwrap();
                (h, e, rest)
            })
            .unwrap();
        check_ipv6(&h, &ip);
        prop_assert_eq!(h.next_header, IpNumber::IPV6_HEADER_HOP_BY_HOP);
        let hbh = exts_ep.hop_by_hop_options.as_ref().unwrap();
        prop_assert_eq!(&hbh.payload()[..4], &[5, 2, (alert >> 8) as u8, alert as u8][..]);
        prop_assert_eq!(exts_ep.destination_options.is_some(), with_dest_opts);
        prop_assert_eq!(exts_ep.routing.is_some(), with_routing);
        match exts_ep.fragment {
            Some(f) => {
                prop_assert!(with_frag);
                prop_assert_eq!(f.identification, ident);
                prop_assert!(!f.is_fragmenting_payload());
            }
            None => prop_assert!(!with_frag),
        }
        prop_assert_eq!(rest, &payload[..]);

        let chain = Ipv6ExtChain::walk(IpProtocol::HopByHop, &buf[40..]).unwrap();
        prop_assert_eq!(chain.upper, IpProtocol::Ipv6NoNxt);
        prop_assert_eq!(chain.offset, exts.len());
        prop_assert_eq!(chain.headers, names.len() - 1);
    }

    #[test]
    fn etherparse_ipv6_udp_in_ours(
        src_mac: [u8; 6], dst_mac: [u8; 6], src: [u8; 16], dst: [u8; 16], hop_limit: u8,
        src_port: u16, dst_port: u16,
        hbh_len in 0usize..4, with_dest: bool, with_routing: bool, frag: Option<(u16, bool, u32)>,
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut exts = Ipv6Extensions::default();
        let raw = |n: usize| {
            let mut body = vec![0u8; 6 + 8 * n];
            body[0] = 1; // PadN over the rest
            body[1] = (4 + 8 * n) as u8;
            Ipv6RawExtHeader::new_raw(IpNumber::UDP, &body).unwrap()
        };
        exts.hop_by_hop_options = Some(raw(hbh_len));
        if with_dest { exts.destination_options = Some(raw(1)); }
        if with_routing {
            // Segment routing type 4 with no segments left: skipped.
            let mut body = vec![0u8; 22];
            body[0] = 4;
            exts.routing = Some(Ipv6RoutingExtensions {
                routing: Ipv6RawExtHeader::new_raw(IpNumber::UDP, &body).unwrap(),
                final_destination_options: None,
            });
        }
        if let Some((units, mf, id)) = frag {
            exts.fragment = Some(EpFragment::new(IpNumber::UDP, IpFragOffset::try_new(units % 8192).unwrap(), mf, id));
        }
        let v6 = Ipv6Header {
            traffic_class: 0, flow_label: Ipv6FlowLabel::try_new(0x12345).unwrap(), payload_length: 0,
            next_header: IpNumber::UDP, hop_limit, source: src, destination: dst,
        };
        let mut buf = Vec::new();
        PacketBuilder::ethernet2(src_mac, dst_mac)
            .ip(IpHeaders::Ipv6(v6, exts.clone()))
            .udp(src_port, dst_port)
            .write(&mut buf, &payload)
            .unwrap();

        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(f.ethertype(), EtherType::Ipv6);
        let p = Ipv6Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv6Repr::parse(&p).unwrap();
        prop_assert_eq!(ip.src_addr, Ipv6Addr::from(src));
        prop_assert_eq!(ip.dst_addr, Ipv6Addr::from(dst));
        prop_assert_eq!(ip.hop_limit, hop_limit);
        prop_assert_eq!(ip.flow_label, 0x12345);
        prop_assert_eq!(ip.next_header, IpProtocol::HopByHop);
        let chain = Ipv6ExtChain::walk(ip.next_header, p.payload()).unwrap();
        let ext_len = exts.header_len();
        prop_assert_eq!(chain.offset, ext_len);
        prop_assert_eq!(chain.upper, IpProtocol::Udp);
        let fr = frag.map(|(units, mf, id)| Ipv6FragmentRepr {
            next_header: IpProtocol::Udp, frag_offset: (units % 8192) * 8, more_frags: mf, ident: id,
        });
        prop_assert_eq!(chain.fragment.map(|(_, f)| f), fr);
        // UDP checksum as etherparse computed it, verified over our IPv6 pseudo header.
        let udp = &p.payload()[ext_len..];
        prop_assert_eq!(udp.len(), 8 + payload.len());
        let mut c = pseudo_header_v6(ip.src_addr, ip.dst_addr, 17, udp.len() as u32);
        c.add_bytes(udp);
        prop_assert_eq!(c.folded(), 0xffff);
        prop_assert_eq!(&udp[..4], &[(src_port >> 8) as u8, src_port as u8, (dst_port >> 8) as u8, dst_port as u8][..]);
    }
}

prop_compose! {
    fn eth_ipv6(next_header: IpProtocol)(
        src_addr in mac(), dst_addr in mac(),
        src in ipv6_addr(), dst in ipv6_addr(),
        hop_limit: u8, traffic_class: u8, flow_label in 0..=IPV6_MAX_FLOW_LABEL,
    ) -> (EthernetRepr, Ipv6Repr) {
        (
            EthernetRepr { src_addr, dst_addr, ethertype: EtherType::Ipv6 },
            Ipv6Repr { src_addr: src, dst_addr: dst, next_header, payload_len: 0, hop_limit, traffic_class, flow_label },
        )
    }
}

/// Ethernet + IPv6 with `emit_upper` writing the IPv6 payload.
fn frame_v6(eth: &EthernetRepr, ip: &Ipv6Repr, emit_upper: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut buf = vec![0u8; ETHERNET_HEADER_LEN + ip.buffer_len()];
    eth.emit(&mut buf).unwrap();
    ip.emit(&mut buf[ETHERNET_HEADER_LEN..]).unwrap();
    emit_upper(&mut buf[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..]);
    buf
}

/// etherparse's ICMPv6 type for one of our echo or error reprs.
fn icmpv6_type_of(r: &Icmpv6Repr<'_>) -> Icmpv6Type {
    match *r {
        Icmpv6Repr::EchoRequest { ident, seq_no, .. } => {
            Icmpv6Type::EchoRequest(IcmpEchoHeader { id: ident, seq: seq_no })
        }
        Icmpv6Repr::EchoReply { ident, seq_no, .. } => Icmpv6Type::EchoReply(IcmpEchoHeader { id: ident, seq: seq_no }),
        Icmpv6Repr::DstUnreachable { reason, .. } => {
            Icmpv6Type::DestinationUnreachable(DestUnreachableCode::from_u8(u8::from(reason)).unwrap())
        }
        Icmpv6Repr::PacketTooBig { mtu, .. } => Icmpv6Type::PacketTooBig { mtu },
        Icmpv6Repr::TimeExceeded { code, .. } => Icmpv6Type::TimeExceeded(TimeExceededCode::from_u8(code).unwrap()),
        Icmpv6Repr::ParamProblem { reason, pointer, .. } => Icmpv6Type::ParameterProblem(ParameterProblemHeader {
            code: ParameterProblemCode::from_u8(u8::from(reason)).unwrap(),
            pointer,
        }),
    }
}

proptest! {
    #[test]
    fn our_icmpv6_echo_in_etherparse(
        (eth, mut ip) in eth_ipv6(IpProtocol::Icmpv6),
        reply: bool, ident: u16, seq_no: u16,
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let icmp = if reply {
            Icmpv6Repr::EchoReply { ident, seq_no, data: &data }
        } else {
            Icmpv6Repr::EchoRequest { ident, seq_no, data: &data }
        };
        ip.payload_len = icmp.buffer_len();
        let buf = frame_v6(&eth, &ip, |b| icmp.emit(b, ip.src_addr, ip.dst_addr).unwrap());
        let h = PacketHeaders::from_ethernet_slice(&buf).unwrap();
        let Some(NetHeaders::Ipv6(v6, _)) = &h.net else { panic!("{:?}", h.net) };
        check_ipv6(v6, &ip);
        prop_assert_eq!(v6.next_header, IpNumber::IPV6_ICMP);
        let Some(TransportHeader::Icmpv6(i)) = &h.transport else { panic!("{:?}", h.transport) };
        let expect = icmpv6_type_of(&icmp);
        prop_assert_eq!(&i.icmp_type, &expect);
        let ck = Icmpv6Header::with_checksum(expect, v6.source, v6.destination, &data).unwrap().checksum;
        prop_assert_eq!(i.checksum, ck);
        prop_assert_eq!(h.payload.slice(), &data[..]);
    }

    #[test]
    fn our_icmpv6_errors_in_etherparse(
        kind in 0u8..4, code in 0u8..2, word: u32,
        src in ipv6_addr(), dst in ipv6_addr(),
        quoted in eth_ipv6(IpProtocol::Udp),
        data in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let header = Ipv6Repr { payload_len: data.len(), ..quoted.1 };
        let icmp = match kind {
            0 => Icmpv6Repr::DstUnreachable { reason: Icmpv6DstUnreachable::from(code * 4), header, data: &data },
            1 => Icmpv6Repr::PacketTooBig { mtu: word, header, data: &data },
            2 => Icmpv6Repr::TimeExceeded { code, header, data: &data },
            _ => Icmpv6Repr::ParamProblem { reason: Icmpv6ParamProblem::from(code + 1), pointer: word, header, data: &data },
        };
        let mut buf = vec![0u8; icmp.buffer_len()];
        icmp.emit(&mut buf, src, dst).unwrap();
        let (h, rest) = Icmpv6Header::from_slice(&buf).unwrap();
        let expect = icmpv6_type_of(&icmp);
        prop_assert_eq!(&h.icmp_type, &expect);
        prop_assert_eq!(h.checksum, Icmpv6Header::with_checksum(expect, src.octets(), dst.octets(), rest).unwrap().checksum);
        let (q, tail) = etherparse::Ipv6Header::from_slice(rest).unwrap();
        check_ipv6(&q, &header);
        prop_assert_eq!(tail, &data[..]);
    }

    #[test]
    fn etherparse_icmpv6_echo_in_ours(
        src: [u8; 16], dst: [u8; 16], id: u16, seq: u16, reply: bool,
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let b = PacketBuilder::ethernet2([2; 6], [4; 6]).ipv6(src, dst, 64);
        let b = if reply { b.icmpv6_echo_reply(id, seq) } else { b.icmpv6_echo_request(id, seq) };
        let mut buf = Vec::new();
        b.write(&mut buf, &data).unwrap();
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        let p = Ipv6Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv6Repr::parse(&p).unwrap();
        prop_assert_eq!(ip.next_header, IpProtocol::Icmpv6);
        let i = Icmpv6Packet::new_checked(p.payload()).unwrap();
        let r = Icmpv6Repr::parse(&i, ip.src_addr, ip.dst_addr, true).unwrap();
        let expect = if reply {
            Icmpv6Repr::EchoReply { ident: id, seq_no: seq, data: &data }
        } else {
            Icmpv6Repr::EchoRequest { ident: id, seq_no: seq, data: &data }
        };
        prop_assert_eq!(r, expect);
    }

    #[test]
    fn etherparse_icmpv6_errors_in_ours(
        kind in 0u8..4, code in 0u8..2, word: u32, src: [u8; 16], dst: [u8; 16],
        quoted_src: [u8; 16], quoted_dst: [u8; 16], hop: u8,
        data in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let q = Ipv6Header {
            traffic_class: 0, flow_label: Ipv6FlowLabel::ZERO, payload_length: data.len() as u16,
            next_header: IpNumber::UDP, hop_limit: hop, source: quoted_src, destination: quoted_dst,
        };
        let mut quote = q.to_bytes().to_vec();
        quote.extend_from_slice(&data);
        let ty = match kind {
            0 => Icmpv6Type::DestinationUnreachable(DestUnreachableCode::from_u8(code * 4).unwrap()),
            1 => Icmpv6Type::PacketTooBig { mtu: word },
            2 => Icmpv6Type::TimeExceeded(TimeExceededCode::from_u8(code).unwrap()),
            _ => Icmpv6Type::ParameterProblem(ParameterProblemHeader {
                code: ParameterProblemCode::from_u8(code + 1).unwrap(),
                pointer: word,
            }),
        };
        let h = Icmpv6Header::with_checksum(ty, src, dst, &quote).unwrap();
        let mut buf = h.to_bytes().to_vec();
        buf.extend_from_slice(&quote);
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        let r = Icmpv6Repr::parse(&p, Ipv6Addr::from(src), Ipv6Addr::from(dst), true).unwrap();
        prop_assert_eq!(icmpv6_type_of(&r), h.icmp_type);
        let header = Ipv6Repr {
            src_addr: Ipv6Addr::from(quoted_src), dst_addr: Ipv6Addr::from(quoted_dst), next_header: IpProtocol::Udp,
            payload_len: data.len(), hop_limit: hop, traffic_class: 0, flow_label: 0,
        };
        let (got_header, got_data) = match r {
            Icmpv6Repr::DstUnreachable { header, data, .. }
            | Icmpv6Repr::PacketTooBig { header, data, .. }
            | Icmpv6Repr::TimeExceeded { header, data, .. }
            | Icmpv6Repr::ParamProblem { header, data, .. } => (header, data),
            other => panic!("{other:?}"),
        };
        prop_assert_eq!(got_header, header);
        prop_assert_eq!(got_data, &data[..]);
    }
}

/// A link-local address with `a`'s interface identifier.
fn ll_target(a: Ipv6Addr) -> Ipv6Addr {
    Ipv6Addr::from((0xfe80u128 << 112) | (a.to_bits() & u128::from(u64::MAX)))
}

/// Our reading of an etherparse option, for comparison.
fn from_etherparse_option<'a>(o: &NdpOptionSlice<'a>) -> NdpOption<'a> {
    let mac = |b: &[u8]| EthernetAddress(b.try_into().unwrap());
    match o {
        NdpOptionSlice::SourceLinkLayerAddress(s) => NdpOption::SourceLinkLayerAddr(mac(s.link_layer_address())),
        NdpOptionSlice::TargetLinkLayerAddress(s) => NdpOption::TargetLinkLayerAddr(mac(s.link_layer_address())),
        NdpOptionSlice::PrefixInformation(s) => NdpOption::PrefixInfo(NdpPrefixInfo {
            prefix_len: s.prefix_length(),
            on_link: s.on_link(),
            autonomous: s.autonomous_address_configuration(),
            valid_lifetime: s.valid_lifetime(),
            preferred_lifetime: s.preferred_lifetime(),
            prefix: Ipv6Addr::from(s.prefix()),
        }),
        NdpOptionSlice::RedirectedHeader(s) => NdpOption::RedirectedHeader(s.redirected_packet()),
        NdpOptionSlice::Mtu(s) => NdpOption::Mtu(s.mtu()),
        NdpOptionSlice::Unknown(s) => NdpOption::Unknown { kind: s.option_type().0, data: s.data() },
        other => panic!("{other:?}"),
    }
}

proptest! {
    #[test]
    fn our_ndp_in_etherparse(
        which in 0u8..5,
        mac: [u8; 6], mtu: u32, valid: u32, preferred: u32, prefix_len in 0u8..=128, prefix: [u8; 16],
        flags: u8, hop_limit: u8, router_lifetime: u16, reachable_time: u32, retrans_timer: u32,
        target: [u8; 16], dest: [u8; 16], iid: u64, dst: [u8; 16],
        unknown in proptest::collection::vec(any::<u8>(), 0..3).prop_map(|v| vec![0xa5u8; 6 + 8 * v.len()]),
    ) {
        let target = Ipv6Addr::from(target);
        let dest = Ipv6Addr::from(dest);
        prop_assume!(!target.is_multicast() && !dest.is_multicast());
        let src = Ipv6Addr::from((0xfe80u128 << 112) | u128::from(iid));
        let dst = Ipv6Addr::from(dst);
        let info = NdpPrefixInfo {
            prefix_len, on_link: flags & 8 != 0, autonomous: flags & 16 != 0,
            valid_lifetime: valid, preferred_lifetime: preferred, prefix: Ipv6Addr::from(prefix),
        };
        let quoted = [0x60u8; 24];
        let opts = [
            NdpOption::SourceLinkLayerAddr(EthernetAddress(mac)),
            NdpOption::Mtu(mtu),
            NdpOption::PrefixInfo(info),
            NdpOption::RedirectedHeader(&quoted),
            NdpOption::Unknown { kind: 200, data: &unknown },
        ];
        let mut options = vec![0u8; opts.iter().map(|o| o.buffer_len()).sum()];
        let mut rest = &mut options[..];
        for o in &opts {
            rest = o.emit(rest).unwrap();
        }
        let lladdr = Some(EthernetAddress(mac));
        let redirect_target = if flags & 32 != 0 { dest } else { ll_target(target) };
        let repr = match which {
            0 => NdpRepr::RouterSolicit { lladdr },
            1 => NdpRepr::RouterAdvert {
                hop_limit, managed_flag: flags & 1 != 0, other_flag: flags & 2 != 0,
                router_lifetime, reachable_time, retrans_timer, options: &options,
            },
            2 => NdpRepr::NeighborSolicit { target, lladdr },
            3 => NdpRepr::NeighborAdvert {
                router_flag: flags & 1 != 0, solicited_flag: flags & 2 != 0, override_flag: flags & 4 != 0,
                target, lladdr,
            },
            _ => NdpRepr::Redirect { target: redirect_target, dest, options: &options },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, src, dst).unwrap();

        let e = Icmpv6Slice::from_slice(&buf).unwrap();
        prop_assert!(e.is_checksum_valid(src.octets(), dst.octets()));
        let ep_options = match (e.icmp_type(), e.payload_slice().unwrap()) {
            (Icmpv6Type::RouterSolicitation, Icmpv6PayloadSlice::RouterSolicitation(p)) => {
                prop_assert_eq!(which, 0);
                p.options_iterator()
            }
            (Icmpv6Type::RouterAdvertisement(h), Icmpv6PayloadSlice::RouterAdvertisement(p)) => {
                prop_assert_eq!(h, RouterAdvertisementHeader {
                    cur_hop_limit: hop_limit, managed_address_config: flags & 1 != 0, other_config: flags & 2 != 0,
                    router_lifetime,
                });
                prop_assert_eq!((p.reachable_time(), p.retrans_timer()), (reachable_time, retrans_timer));
                p.options_iterator()
            }
            (Icmpv6Type::NeighborSolicitation, Icmpv6PayloadSlice::NeighborSolicitation(p)) => {
                prop_assert_eq!(p.target_address(), target);
                p.options_iterator()
            }
            (Icmpv6Type::NeighborAdvertisement(h), Icmpv6PayloadSlice::NeighborAdvertisement(p)) => {
                prop_assert_eq!(h, NeighborAdvertisementHeader {
                    router: flags & 1 != 0, solicited: flags & 2 != 0, r#override: flags & 4 != 0,
                });
                prop_assert_eq!(p.target_address(), target);
                p.options_iterator()
            }
            (Icmpv6Type::Redirect, Icmpv6PayloadSlice::Redirect(p)) => {
                prop_assert_eq!((p.target_address(), p.destination_address()), (redirect_target, dest));
                p.options_iterator()
            }
            other => panic!("{other:?}"),
        };
        let got: Vec<NdpOption<'_>> = ep_options.map(|o| from_etherparse_option(&o.unwrap())).collect();
        let want: Vec<NdpOption<'_>> = match repr {
            NdpRepr::RouterAdvert { .. } | NdpRepr::Redirect { .. } => opts.to_vec(),
            NdpRepr::NeighborAdvert { .. } => vec![NdpOption::TargetLinkLayerAddr(EthernetAddress(mac))],
            _ => vec![NdpOption::SourceLinkLayerAddr(EthernetAddress(mac))],
        };
        prop_assert_eq!(got, want);
    }

    #[test]
    fn etherparse_prefix_info_in_ours(
        prefix_length in 0u8..=128, on_link: bool, autonomous: bool, valid: u32, preferred: u32, prefix: [u8; 16],
    ) {
        let p = PrefixInformation {
            prefix_length, on_link, autonomous_address_configuration: autonomous,
            valid_lifetime: valid, preferred_lifetime: preferred, prefix,
        };
        let bytes = p.to_bytes();
        let (rest, o) = NdpOption::parse(&bytes).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(o, NdpOption::PrefixInfo(NdpPrefixInfo {
            prefix_len: prefix_length, on_link, autonomous,
            valid_lifetime: valid, preferred_lifetime: preferred, prefix: Ipv6Addr::from(prefix),
        }));
        let mut out = [0u8; 32];
        o.emit(&mut out).unwrap();
        prop_assert_eq!(out, bytes);
    }
}

proptest! {
    #[test]
    fn our_mld_report_checksum_in_etherparse(
        groups in proptest::collection::vec(ipv6_addr(), 0..10), iid: u64, join: bool,
    ) {
        // etherparse has no MLD messages, but checks any ICMPv6 checksum.
        let src = Ipv6Addr::from((0xfe80u128 << 112) | u128::from(iid));
        let records: Vec<MldAddressRecord<'_>> = groups
            .iter()
            .map(|g| if join { MldAddressRecord::join(*g) } else { MldAddressRecord::leave(*g) })
            .collect();
        let mut buf = vec![0u8; 8 + 20 * records.len()];
        MldReportRepr::emit_records(&records, &mut buf, src, IPV6_ALL_MLDV2_ROUTERS).unwrap();
        let e = Icmpv6Slice::from_slice(&buf).unwrap();
        prop_assert_eq!(e.type_u8(), 143);
        prop_assert!(e.is_checksum_valid(src.octets(), IPV6_ALL_MLDV2_ROUTERS.octets()));
    }
}
