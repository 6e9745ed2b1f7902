//! Hostile IPv6 input on the whole receive path: arbitrary frames, and
//! valid IPv6 frames (echo, neighbour discovery, extension header chains,
//! fragments, MLD) with arbitrary damage, split anywhere, go into an
//! interface that speaks IPv6. Nothing may panic, every frame must leave a
//! trace in some counter, and once every timer has fired no buffer is
//! held.

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::{Capabilities, Counters, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    multicast_mac, solicited_node, EtherType, EthernetAddress, EthernetRepr, Icmpv6Repr, IpProtocol, Ipv6Addr,
    Ipv6Option, Ipv6OptionsRepr, Ipv6Repr, MldAddressRecord, MldReportRepr, NdpRepr,
};
use proptest::prelude::*;
use std::time::Duration;

const OUR_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const US: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const PEER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

fn interface() -> Interface {
    let mut config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    let addresses = vec!["fd00::1/64".parse().unwrap()];
    config.ipv6 = Some(Ipv6Config { addresses, dad_transmits: 0, ..Ipv6Config::default() });
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 8192))
}

fn outcomes(c: &Counters) -> u64 {
    c.iter().filter(|(name, _)| !name.starts_with("rx_") && !name.starts_with("tx_")).map(|(_, v)| v).sum()
}

fn frame(src: Ipv6Addr, dst: Ipv6Addr, next: IpProtocol, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    let dst_mac = multicast_mac(&dst).unwrap_or(OUR_MAC);
    EthernetRepr { src_addr: PEER_MAC, dst_addr: dst_mac, ethertype: EtherType::Ipv6 }.emit(&mut f).unwrap();
    Ipv6Repr::new(src, dst, next, payload.len(), hop_limit).emit(&mut f[14..]).unwrap();
    f.extend_from_slice(payload);
    f
}

fn echo(data: &[u8], dst: Ipv6Addr) -> Vec<u8> {
    let repr = Icmpv6Repr::EchoRequest { ident: 1, seq_no: 2, data };
    let mut m = vec![0u8; repr.buffer_len()];
    repr.emit(&mut m, PEER, dst).unwrap();
    m
}

fn ndp(repr: NdpRepr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut m = vec![0u8; repr.buffer_len()];
    repr.emit(&mut m, src, dst).unwrap();
    m
}

/// A destination options header with one option of type `kind` (Pad1,
/// PadN and Router Alert, which have shapes of their own, become 0x1e).
fn options(next: IpProtocol, kind: u8, data: &[u8]) -> Vec<u8> {
    let kind = if matches!(kind, 0 | 1 | 5) { 0x1e } else { kind };
    let option = Ipv6Option::Unknown { kind, data };
    let repr = Ipv6OptionsRepr { next_header: next, options: &[option] };
    let mut h = vec![0u8; repr.buffer_len()];
    repr.emit(&mut h).unwrap();
    h
}

fn valid_frame() -> impl Strategy<Value = Vec<u8>> {
    let data = proptest::collection::vec(any::<u8>(), 0..1300);
    let group = solicited_node(&US);
    let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    prop_oneof![
        data.clone().prop_map(|d| frame(PEER, US, IpProtocol::Icmpv6, 64, &echo(&d, US))),
        data.clone().prop_map(move |d| frame(PEER, all, IpProtocol::Icmpv6, 64, &echo(&d, all))),
        any::<bool>().prop_map(move |dad| {
            let (src, lladdr) = if dad { (Ipv6Addr::UNSPECIFIED, None) } else { (PEER, Some(PEER_MAC)) };
            frame(
                src,
                group,
                IpProtocol::Icmpv6,
                255,
                &ndp(NdpRepr::NeighborSolicit { target: US, lladdr }, src, group),
            )
        }),
        (any::<bool>(), any::<bool>()).prop_map(|(solicited_flag, override_flag)| {
            let na = NdpRepr::NeighborAdvert {
                router_flag: false,
                solicited_flag,
                override_flag,
                target: PEER,
                lladdr: Some(PEER_MAC),
            };
            frame(PEER, US, IpProtocol::Icmpv6, 255, &ndp(na, PEER, US))
        }),
        (any::<u8>(), data.clone()).prop_map(|(kind, d)| {
            let mut p = options(IpProtocol::Icmpv6, kind, &d[..d.len().min(200)]);
            p.extend(echo(b"behind options", US));
            frame(PEER, US, IpProtocol::Ipv6Opts, 64, &p)
        }),
        (0u16..8192, any::<bool>(), data.clone()).prop_map(|(offset, more, d)| {
            let word = (offset << 3) | u16::from(more);
            let mut p = vec![58, 0];
            p.extend_from_slice(&word.to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, 9]);
            p.extend(echo(&d, US));
            frame(PEER, US, IpProtocol::Ipv6Frag, 64, &p)
        }),
        (0usize..12).prop_map(|n| {
            let mut p = Vec::new();
            for i in 0..n {
                let next = if i + 1 == n { IpProtocol::Icmpv6 } else { IpProtocol::Ipv6Opts };
                p.extend(options(next, 0x1e, &[0; 4]));
            }
            p.extend(echo(b"deep", US));
            let first = if n == 0 { IpProtocol::Icmpv6 } else { IpProtocol::Ipv6Opts };
            frame(PEER, US, first, 64, &p)
        }),
        Just({
            let mld = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
            let mut m = vec![0u8; 64];
            let n = MldReportRepr::emit_records(&[MldAddressRecord::join(group)], &mut m, PEER, mld).unwrap();
            m.truncate(n);
            frame(PEER, all, IpProtocol::Icmpv6, 1, &m)
        }),
        data.prop_map(|d| frame(PEER, US, IpProtocol::Unknown(200), 64, &d)),
    ]
}

fn damage(frame: &mut Vec<u8>, at: usize, value: u8, cut: Option<usize>) {
    if !frame.is_empty() {
        let i = at % frame.len();
        frame[i] = value;
    }
    if let Some(n) = cut {
        frame.truncate(n);
    }
}

fn check_frames(frames: Vec<(Vec<u8>, usize)>) {
    let mut iface = interface();
    let mut now = Instant::from_secs(1);
    for (frame, chunk) in frames {
        let before = outcomes(iface.counters());
        let pool = iface.pool().clone();
        let mut packet = PacketBuf::new();
        for piece in frame.chunks(chunk.max(1)) {
            packet.append(PacketBuf::from_slice(&pool, 0, piece).unwrap());
        }
        iface.receive(packet, now);
        assert!(outcomes(iface.counters()) > before, "a frame left no trace in any counter: {frame:02x?}");
        iface.tx_queue().clear();
        now += Duration::from_millis(7);
    }
    for _ in 0..100 {
        let Some(at) = iface.poll_at() else { break };
        now = now.max(at);
        iface.poll(now);
        iface.tx_queue().clear();
    }
    assert_eq!(iface.poll_at(), None);
    assert_eq!(iface.pool().in_use(), 0, "every buffer is back in the pool");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_ipv6_frames_never_panic(frames in proptest::collection::vec(
        (proptest::collection::vec(any::<u8>(), 0..1600), 1usize..64), 1..16)) {
        let frames = frames
            .into_iter()
            .map(|(body, chunk)| {
                let mut f = vec![0u8; 14];
                EthernetRepr { src_addr: PEER_MAC, dst_addr: OUR_MAC, ethertype: EtherType::Ipv6 }.emit(&mut f).unwrap();
                f.extend(body);
                (f, chunk)
            })
            .collect();
        check_frames(frames);
    }

    #[test]
    fn damaged_valid_ipv6_frames_never_panic(frames in proptest::collection::vec(
        (valid_frame(), proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
         proptest::option::of(0usize..1400), 1usize..2000), 1..16)) {
        let frames = frames
            .into_iter()
            .map(|(mut f, damages, cut, chunk)| {
                for (i, (at, value)) in damages.iter().enumerate() {
                    damage(&mut f, *at, *value, if i == 0 { cut } else { None });
                }
                (f, chunk)
            })
            .collect();
        check_frames(frames);
    }
}
