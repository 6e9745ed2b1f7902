//! parse(emit(x)) == x for every representation, over arbitrary valid x.

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

prop_compose! {
    fn ipv6_repr(max_payload: usize)(
        src_addr in ipv6_addr(),
        dst_addr in ipv6_addr(),
        next_header in any::<u8>().prop_map(IpProtocol::from),
        payload_len in 0..=max_payload,
        hop_limit: u8,
        traffic_class: u8,
        flow_label in 0..=IPV6_MAX_FLOW_LABEL,
    ) -> Ipv6Repr {
        Ipv6Repr { src_addr, dst_addr, next_header, payload_len, hop_limit, traffic_class, flow_label }
    }
}

/// An option that the walk skips (padding, Router Alert, or an unknown
/// type whose top two bits say "skip"), from generated values.
fn skippable_option((which, n, v, kind): (u8, u8, u16, u8), data: &[u8]) -> Ipv6Option<'_> {
    match which % 4 {
        0 => Ipv6Option::Pad1,
        1 => Ipv6Option::PadN(n),
        2 => Ipv6Option::RouterAlert(v),
        _ => Ipv6Option::Unknown { kind: if kind == 5 { 6 } else { kind }, data },
    }
}

/// A link-local address with `a`'s interface identifier.
fn ll_target(a: Ipv6Addr) -> Ipv6Addr {
    Ipv6Addr::from((0xfe80u128 << 112) | (a.to_bits() & u128::from(u64::MAX)))
}

/// A neighbour discovery option that parses back as itself: data of
/// unknown and redirected-header options is a whole number of 8-byte units.
fn ndp_option(
    (which, mac, word, flags, prefix_len, prefix, kind): (u8, [u8; 6], u32, u8, u8, [u8; 16], u8),
    data: &[u8],
) -> NdpOption<'_> {
    let units = data.len() / 8;
    match which % 6 {
        0 => NdpOption::SourceLinkLayerAddr(EthernetAddress(mac)),
        1 => NdpOption::TargetLinkLayerAddr(EthernetAddress(mac)),
        2 => NdpOption::PrefixInfo(NdpPrefixInfo {
            prefix_len,
            on_link: flags & 1 != 0,
            autonomous: flags & 2 != 0,
            valid_lifetime: word,
            preferred_lifetime: word.rotate_left(7),
            prefix: Ipv6Addr::from(prefix),
        }),
        3 => NdpOption::RedirectedHeader(&data[..units * 8]),
        4 => NdpOption::Mtu(word),
        _ => NdpOption::Unknown { kind: kind.max(6), data: &data[..6 + units.saturating_sub(1) * 8] },
    }
}

fn ndp_seed() -> impl Strategy<Value = (u8, [u8; 6], u32, u8, u8, [u8; 16], u8)> {
    (any::<u8>(), any::<[u8; 6]>(), any::<u32>(), any::<u8>(), 0u8..=128, any::<[u8; 16]>(), any::<u8>())
}

prop_compose! {
    fn ipv4_repr(max_payload: usize)(
        src_addr in ipv4_addr(),
        dst_addr in ipv4_addr(),
        protocol in any::<u8>().prop_map(IpProtocol::from),
        payload_len in 0..=max_payload,
        ttl: u8,
        ident: u16,
        dont_frag: bool,
        more_frags: bool,
        frag_units in 0u16..8192,
        dscp_ecn: u8,
    ) -> Ipv4Repr {
        Ipv4Repr {
            src_addr, dst_addr, protocol, payload_len, ttl, ident, dont_frag, more_frags,
            frag_offset: frag_units * 8, dscp_ecn,
        }
    }
}

/// Sorted, packed SACK blocks: `n` leading `Some`s.
fn sack_ranges() -> impl Strategy<Value = [Option<(u32, u32)>; 4]> {
    (0usize..=4, any::<[(u32, u32); 4]>()).prop_map(|(n, blocks)| {
        let mut out = [None; 4];
        for (slot, b) in out.iter_mut().zip(blocks).take(n) {
            *slot = Some(b);
        }
        out
    })
}

prop_compose! {
    fn tcp_repr()(
        src_port: u16,
        dst_port: u16,
        seq: u32,
        ack in proptest::option::of(any::<u32>()),
        flag_bits in 0u16..0x200,
        window_len: u16,
        urgent_pointer: u16,
        max_seg_size in proptest::option::of(any::<u16>()),
        window_scale in proptest::option::of(any::<u8>()),
        sack_permitted: bool,
        sack_ranges in sack_ranges(),
        timestamp in proptest::option::of(any::<(u32, u32)>()),
        payload_len in 0usize..2000,
    ) -> TcpRepr {
        let mut flags = TcpFlags::from_bits_truncate(flag_bits);
        flags.set(TcpFlags::ACK, ack.is_some());
        TcpRepr {
            src_port, dst_port, seq_number: TcpSeqNumber(seq),
            ack_number: ack.map(TcpSeqNumber), flags, window_len, urgent_pointer,
            max_seg_size, window_scale, sack_permitted, sack_ranges, timestamp, payload_len,
        }
    }
}

/// The SACK blocks [`TcpRepr::emit_header`] keeps: as many as fit in the 40
/// option bytes after the other options.
fn expected_after_emit(mut r: TcpRepr) -> TcpRepr {
    let fixed = if r.max_seg_size.is_some() { 4 } else { 0 }
        + if r.timestamp.is_some() {
            12
        } else if r.sack_permitted {
            4
        } else {
            0
        }
        + if r.window_scale.is_some() { 4 } else { 0 };
    let room = (40 - fixed - 4) / 8;
    for slot in r.sack_ranges.iter_mut().skip(room) {
        *slot = None;
    }
    r
}

proptest! {
    #[test]
    fn ethernet(src_addr in mac(), dst_addr in mac(), et: u16, payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let repr = EthernetRepr { src_addr, dst_addr, ethertype: EtherType::from(et) };
        let mut buf = vec![0u8; repr.header_len() + payload.len()];
        repr.emit(&mut buf).unwrap();
        buf[14..].copy_from_slice(&payload);
        let frame = EthernetFrame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&frame).unwrap(), repr);
        prop_assert_eq!(frame.payload(), &payload[..]);
    }

    #[test]
    fn ethernet_address_text(a in mac()) {
        prop_assert_eq!(a.to_string().parse::<EthernetAddress>().unwrap(), a);
    }

    #[test]
    fn cidr_text(a in ipv4_addr(), p in 0u8..=32) {
        let c = Ipv4Cidr::new(a, p).unwrap();
        prop_assert_eq!(c.to_string().parse::<Ipv4Cidr>().unwrap(), c);
        prop_assert!(c.contains(c.network()));
        prop_assert!(c.contains(a));
        if let Some(b) = c.broadcast() {
            prop_assert!(c.contains(b));
        }
    }

    #[test]
    fn arp(op: u16, sha in mac(), spa in ipv4_addr(), tha in mac(), tpa in ipv4_addr()) {
        let repr = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::from(op),
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: tha,
            target_protocol_addr: tpa,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        let p = ArpPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(ArpRepr::parse(&p).unwrap(), repr);
    }

    #[test]
    fn ipv4(repr in ipv4_repr(IPV4_MAX_TOTAL_LEN - IPV4_HEADER_LEN), pad in 0usize..4) {
        let mut buf = vec![0u8; repr.buffer_len() + pad];
        repr.emit(&mut buf).unwrap();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Ipv4Repr::parse(&p, true).unwrap(), repr);
        prop_assert_eq!(p.payload().len(), repr.payload_len);
    }

    #[test]
    fn ipv6(repr in ipv6_repr(IPV6_MAX_PAYLOAD_LEN), pad in 0usize..4) {
        let mut buf = vec![0u8; repr.buffer_len() + pad];
        repr.emit(&mut buf).unwrap();
        let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv6Repr::parse(&p).unwrap(), repr);
        prop_assert_eq!(p.payload().len(), repr.payload_len);
    }

    #[test]
    fn ipv6_fragment(next: u8, units in 0u16..8192, more_frags: bool, ident: u32) {
        let repr = Ipv6FragmentRepr { next_header: IpProtocol::from(next), frag_offset: units * 8, more_frags, ident };
        let mut buf = [0u8; IPV6_FRAGMENT_HEADER_LEN];
        repr.emit(&mut buf).unwrap();
        let h = Ipv6FragmentHeader::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv6FragmentRepr::parse(&h).unwrap(), repr);
        let chain = Ipv6ExtChain::walk(IpProtocol::Ipv6Frag, &buf).unwrap();
        prop_assert_eq!(chain.fragment, Some((0, repr)));
        prop_assert_eq!(chain.offset, 8);
    }

    #[test]
    fn ipv6_options_header(
        data in proptest::collection::vec(any::<u8>(), 0..40),
        picks in proptest::collection::vec(any::<proptest::sample::Index>(), 0..12),
        seeds in proptest::collection::vec((0u8..4, any::<u8>(), any::<u16>(), 2u8..0x40), 12),
        next: u8,
        hop_by_hop: bool,
    ) {
        // Options built from the seeds; `picks` chooses how many and the data lengths.
        let options: Vec<Ipv6Option<'_>> =
            picks.iter().zip(&seeds).map(|(i, &seed)| skippable_option(seed, &data[..i.index(data.len() + 1)])).collect();
        let next_header = IpProtocol::from(next);
        let repr = Ipv6OptionsRepr { next_header, options: &options };
        let len = repr.buffer_len();
        prop_assert_eq!(len % 8, 0);
        let mut buf = vec![0u8; len];
        if len > IPV6_EXT_HEADER_MAX_LEN {
            prop_assert_eq!(repr.emit(&mut buf), Err(Error::Malformed));
            return Ok(());
        }
        repr.emit(&mut buf).unwrap();
        let h = Ipv6ExtHeader::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(h.header_len(), len);
        prop_assert_eq!(h.next_header(), next_header);
        let back: Vec<Ipv6Option<'_>> = h.options_iter().collect::<Result<_>>().unwrap();
        prop_assert_eq!(&back[..options.len()], &options[..]);
        for pad in &back[options.len()..] {
            prop_assert!(matches!(pad, Ipv6Option::Pad1 | Ipv6Option::PadN(_)));
        }
        prop_assert!(back.len() - options.len() <= 1);
        // The walk goes through it to whatever it names, unless that is
        // another extension header (then it runs out of bytes) or the
        // header is over the walk's byte limit.
        let first = if hop_by_hop { IpProtocol::HopByHop } else { IpProtocol::Ipv6Opts };
        match Ipv6ExtChain::walk(first, &buf) {
            Ok(c) => {
                prop_assert_eq!((c.upper, c.offset, c.headers, c.next_header_pointer), (next_header, len, 1, 40));
            }
            Err(Ipv6ExtError::TooLong) => prop_assert!(len > IPV6_EXT_MAX_LEN),
            Err(e) => prop_assert!(
                matches!(next_header, IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route | IpProtocol::Ipv6Frag),
                "{e:?}"
            ),
        }
    }

    #[test]
    fn ipv6_option(seed in (0u8..4, any::<u8>(), any::<u16>(), 2u8..0x40), data in proptest::collection::vec(any::<u8>(), 0..20)) {
        let opt = skippable_option(seed, &data);
        let mut buf = [0u8; 300];
        let left = opt.emit(&mut buf).unwrap().len();
        prop_assert_eq!(left, 300 - opt.buffer_len());
        let (rest, back) = Ipv6Option::parse(&buf[..opt.buffer_len()]).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(back, opt);
    }

    #[test]
    fn icmp_echo(reply: bool, ident: u16, seq_no: u16, data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let repr = if reply {
            Icmpv4Repr::EchoReply { ident, seq_no, data: &data }
        } else {
            Icmpv4Repr::EchoRequest { ident, seq_no, data: &data }
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Icmpv4Repr::parse(&p, true).unwrap(), repr);

        // Header emitted alone over a data checksum equals the contiguous one.
        let mut c = Checksum::new();
        for piece in data.chunks(7) {
            c.add_bytes(piece);
        }
        let mut hdr = [0u8; 8];
        Icmpv4EchoHeader { reply, ident, seq_no }.emit(&mut hdr, c).unwrap();
        prop_assert_eq!(&hdr[..], &buf[..8]);
    }

    #[test]
    fn icmp_errors(
        unreach: bool,
        code: u8,
        header in ipv4_repr(2000),
        data in proptest::collection::vec(any::<u8>(), 0..=8),
    ) {
        let repr = if unreach {
            Icmpv4Repr::DstUnreachable { reason: DstUnreachable::from(code), header, data: &data }
        } else {
            Icmpv4Repr::TimeExceeded { code, header, data: &data }
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Icmpv4Repr::parse(&p, true).unwrap(), repr);
    }

    #[test]
    fn icmpv6_echo(
        reply: bool, ident: u16, seq_no: u16,
        src in ipv6_addr(), dst in ipv6_addr(),
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let repr = if reply {
            Icmpv6Repr::EchoReply { ident, seq_no, data: &data }
        } else {
            Icmpv6Repr::EchoRequest { ident, seq_no, data: &data }
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, src, dst).unwrap();
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum(src, dst));
        prop_assert_eq!(Icmpv6Repr::parse(&p, src, dst, true).unwrap(), repr);

        // Header emitted alone over a data checksum equals the contiguous one.
        let mut c = Checksum::new();
        for piece in data.chunks(7) {
            c.add_bytes(piece);
        }
        let mut hdr = [0u8; 8];
        Icmpv6EchoHeader { reply, ident, seq_no }.emit(&mut hdr, data.len(), src, dst, c).unwrap();
        prop_assert_eq!(&hdr[..], &buf[..8]);
    }

    #[test]
    fn icmpv6_errors(
        kind in 0u8..4, code: u8, word: u32,
        src in ipv6_addr(), dst in ipv6_addr(),
        header in ipv6_repr(IPV6_MAX_PAYLOAD_LEN),
        data in proptest::collection::vec(any::<u8>(), 0..1200),
    ) {
        let repr = match kind {
            0 => Icmpv6Repr::DstUnreachable { reason: Icmpv6DstUnreachable::from(code), header, data: &data },
            1 => Icmpv6Repr::PacketTooBig { mtu: word, header, data: &data },
            2 => Icmpv6Repr::TimeExceeded { code, header, data: &data },
            _ => Icmpv6Repr::ParamProblem { reason: Icmpv6ParamProblem::from(code), pointer: word, header, data: &data },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, src, dst).unwrap();
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.msg_type().is_error());
        prop_assert_eq!(Icmpv6Repr::parse(&p, src, dst, true).unwrap(), repr);
    }

    #[test]
    fn ndp_option_alone(seed in ndp_seed(), data in proptest::collection::vec(any::<u8>(), 8..120)) {
        let opt = ndp_option(seed, &data);
        let mut buf = [0u8; 200];
        let left = opt.emit(&mut buf).unwrap().len();
        prop_assert_eq!(left, 200 - opt.buffer_len());
        prop_assert_eq!(opt.buffer_len() % 8, 0);
        let (rest, back) = NdpOption::parse(&buf[..opt.buffer_len()]).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(back, opt);
    }

    #[test]
    fn ndp_messages(
        which in 0u8..5,
        seeds in proptest::collection::vec(ndp_seed(), 0..6),
        data in proptest::collection::vec(any::<u8>(), 8..64),
        mac in proptest::option::of(any::<[u8; 6]>()),
        target in ipv6_addr().prop_filter("unicast", |a| !a.is_multicast()),
        dest in ipv6_addr().prop_filter("unicast", |a| !a.is_multicast()),
        ll_src in any::<u64>().prop_map(|iid| Ipv6Addr::from((0xfe80u128 << 112) | u128::from(iid))),
        dst in ipv6_addr(),
        (hop_limit, flags, router_lifetime, reachable_time, retrans_timer) in any::<(u8, u8, u16, u32, u32)>(),
    ) {
        let opts: Vec<NdpOption<'_>> = seeds.iter().map(|&s| ndp_option(s, &data)).collect();
        let mut options = vec![0u8; opts.iter().map(|o| o.buffer_len()).sum()];
        let mut rest = &mut options[..];
        for o in &opts {
            rest = o.emit(rest).unwrap();
        }
        let lladdr = mac.map(EthernetAddress);
        let repr = match which {
            0 => NdpRepr::RouterSolicit { lladdr },
            1 => NdpRepr::RouterAdvert {
                hop_limit, managed_flag: flags & 1 != 0, other_flag: flags & 2 != 0,
                router_lifetime, reachable_time, retrans_timer, options: &options,
            },
            2 => NdpRepr::NeighborSolicit { target, lladdr },
            3 => NdpRepr::NeighborAdvert {
                router_flag: flags & 1 != 0,
                solicited_flag: flags & 2 != 0 && !dst.is_multicast(),
                override_flag: flags & 4 != 0,
                target, lladdr,
            },
            _ => NdpRepr::Redirect { target: if flags & 8 != 0 { dest } else { ll_target(target) }, dest, options: &options },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, ll_src, dst).unwrap();
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum(ll_src, dst));
        prop_assert_eq!(p.msg_type(), repr.msg_type());
        prop_assert_eq!(NdpRepr::parse(&p, ll_src, dst, true).unwrap(), repr);
        if let NdpRepr::RouterAdvert { options, .. } | NdpRepr::Redirect { options, .. } = repr {
            let back: Vec<NdpOption<'_>> = NdpOptionsIter::new(options).collect::<Result<_>>().unwrap();
            prop_assert_eq!(back, opts);
        }
    }

    #[test]
    fn mld_report(
        recs in proptest::collection::vec((any::<u8>(), ipv6_addr(), 0usize..4, 0usize..3), 0..8),
        pool in proptest::collection::vec(any::<u8>(), 64 + 12),
        src in ipv6_addr(), dst in ipv6_addr(),
    ) {
        let records: Vec<MldAddressRecord<'_>> = recs.iter().map(|&(t, multicast_addr, n, aux)| MldAddressRecord {
            record_type: MldRecordType::from(t),
            multicast_addr,
            sources: &pool[..16 * n],
            aux_data: &pool[64..64 + 4 * aux],
        }).collect();
        let len: usize = 8 + records.iter().map(|r| r.buffer_len()).sum::<usize>();
        let mut buf = vec![0u8; len + 3];
        prop_assert_eq!(MldReportRepr::emit_records(&records, &mut buf, src, dst).unwrap(), len);
        let p = Icmpv6Packet::new_checked(&buf[..len]).unwrap();
        prop_assert!(p.verify_checksum(src, dst));
        let r = MldReportRepr::parse(&p, src, dst, true).unwrap();
        prop_assert_eq!(usize::from(r.num_records), records.len());
        let back: Vec<MldAddressRecord<'_>> = r.records().collect::<Result<_>>().unwrap();
        prop_assert_eq!(&back, &records);
        for (b, &(_, _, n, _)) in back.iter().zip(&recs) {
            prop_assert_eq!(b.sources().count(), n);
        }
        let mut again = vec![0u8; r.buffer_len()];
        r.emit(&mut again, src, dst).unwrap();
        prop_assert_eq!(&again[..], &buf[..len]);
    }

    #[test]
    fn udp(
        src_port: u16, dst_port: u16,
        src in ipv4_addr(), dst in ipv4_addr(),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
        cut in any::<proptest::sample::Index>(),
    ) {
        let repr = UdpRepr { src_port, dst_port };
        let mut buf = vec![0u8; UDP_HEADER_LEN + payload.len()];
        repr.emit(&mut buf, &payload, src, dst).unwrap();
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        prop_assert_ne!(p.checksum(), 0);
        prop_assert_eq!(UdpRepr::parse(&p, src, dst, true).unwrap(), repr);
        prop_assert_eq!(p.payload(), &payload[..]);

        // Header-only emit with the payload summed in two (maybe odd) pieces.
        let at = cut.index(payload.len() + 1);
        let mut c = Checksum::new();
        c.add_bytes(&payload[..at]);
        c.add_bytes(&payload[at..]);
        let mut hdr = [0u8; 8];
        repr.emit_header(&mut hdr, payload.len(), src, dst, c).unwrap();
        prop_assert_eq!(&hdr[..], &buf[..8]);
    }

    #[test]
    fn tcp(repr in tcp_repr(), src in ipv4_addr(), dst in ipv4_addr(), seed: u8) {
        let payload: Vec<u8> = (0..repr.payload_len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let hl = repr.header_len();
        prop_assert!(hl <= 60 && hl % 4 == 0);
        let mut buf = vec![0u8; hl + payload.len()];
        repr.emit(&mut buf, &payload, src, dst).unwrap();
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum(src, dst));
        prop_assert_eq!(p.header_len(), hl);
        prop_assert_eq!(TcpRepr::parse(&p, src, dst, true).unwrap(), expected_after_emit(repr));
        prop_assert_eq!(p.payload(), &payload[..]);

        let mut c = Checksum::new();
        c.add_bytes(&payload);
        let mut hdr = vec![0u8; hl];
        repr.emit_header(&mut hdr, src, dst, c).unwrap();
        prop_assert_eq!(&hdr[..], &buf[..hl]);
    }

    #[test]
    fn tcp_option(kind in 0u8..=9, v16: u16, v8: u8, a: u32, b: u32, sacks in sack_ranges(),
                  data in proptest::collection::vec(any::<u8>(), 0..=38)) {
        let opt = match kind {
            0 => TcpOption::EndOfList,
            1 => TcpOption::NoOperation,
            2 => TcpOption::MaxSegmentSize(v16),
            3 => TcpOption::WindowScale(v8),
            4 => TcpOption::SackPermitted,
            5 if sacks[0].is_some() => TcpOption::SackRange(sacks),
            8 => TcpOption::Timestamps { tsval: a, tsecr: b },
            _ => TcpOption::Unknown { kind: 200 + kind, data: &data },
        };
        let mut buf = [0u8; 40];
        let left = opt.emit(&mut buf).unwrap().len();
        prop_assert_eq!(left, 40 - opt.buffer_len());
        let (rest, back) = TcpOption::parse(&buf[..opt.buffer_len()]).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(back, opt);
    }

    #[test]
    fn seq_order_is_antisymmetric(a: u32, d in 1u32..0x8000_0000) {
        let x = TcpSeqNumber(a);
        let y = x + d as usize;
        prop_assert!(x < y);
        prop_assert!(y > x);
        prop_assert_eq!(y.partial_cmp(&x), Some(core::cmp::Ordering::Greater));
        prop_assert_eq!(y - x, d as i32);
    }
}
