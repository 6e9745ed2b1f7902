//! Hostile input on the whole receive path: arbitrary frames, and valid
//! frames with arbitrary damage, go into an interface. Nothing may panic,
//! every frame must leave a trace in some counter, and no buffer may leak.

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::{Counters, Instant, Interface, InterfaceConfig};
use nagare_wire::{
    ArpOperation, ArpRepr, EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Addr, Ipv4Repr,
    UdpRepr,
};
use proptest::prelude::*;
use std::net::SocketAddrV4;

const OUR_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn interface() -> Interface {
    let config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    let mut iface = Interface::new(config, BufferPool::new(2048, 8192));
    iface.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    iface.echo_open(0x1234).unwrap();
    iface
}

/// Everything a frame can cause, summed: each frame must move it.
fn outcomes(c: &Counters) -> u64 {
    c.iter()
        .filter(|(name, _)| !name.starts_with("rx_") && !name.starts_with("tx_"))
        .map(|(_, v)| v)
        .sum()
}

fn ethernet(ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; 14];
    EthernetRepr {
        src_addr: PEER_MAC,
        dst_addr: OUR_MAC,
        ethertype,
    }
    .emit(&mut frame)
    .unwrap();
    frame.extend_from_slice(payload);
    frame
}

fn ipv4(protocol: IpProtocol, payload: &[u8], frag_offset: u16, more_frags: bool, ident: u16) -> Vec<u8> {
    let mut packet = vec![0u8; 20];
    Ipv4Repr {
        src_addr: PEER_IP,
        dst_addr: OUR_IP,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        ident,
        dont_frag: false,
        more_frags,
        frag_offset,
        dscp_ecn: 0,
    }
    .emit(&mut packet)
    .unwrap();
    packet.extend_from_slice(payload);
    ethernet(EtherType::Ipv4, &packet)
}

fn udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut datagram = vec![0u8; 8 + payload.len()];
    UdpRepr { src_port: 5555, dst_port }
        .emit(&mut datagram, payload, PEER_IP, OUR_IP)
        .unwrap();
    ipv4(IpProtocol::Udp, &datagram, 0, false, 1)
}

fn icmp(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut message = vec![kind, 0, 0, 0, 0x12, 0x34, 0, 1];
    message.extend_from_slice(payload);
    let sum = nagare_wire::checksum(&message);
    message[2..4].copy_from_slice(&sum.to_be_bytes());
    ipv4(IpProtocol::Icmp, &message, 0, false, 2)
}

fn arp(operation: ArpOperation) -> Vec<u8> {
    let mut body = vec![0u8; 28];
    ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: PEER_MAC,
        source_protocol_addr: PEER_IP,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: OUR_IP,
    }
    .emit(&mut body)
    .unwrap();
    ethernet(EtherType::Arp, &body)
}

fn valid_frame() -> impl Strategy<Value = Vec<u8>> {
    let payload = proptest::collection::vec(any::<u8>(), 0..1400);
    prop_oneof![
        payload.clone().prop_map(|p| udp(7, &p)),
        payload.clone().prop_map(|p| udp(9, &p)),
        payload.clone().prop_map(|p| icmp(8, &p)),
        payload.clone().prop_map(|p| icmp(0, &p)),
        payload.clone().prop_map(|p| icmp(3, &p)),
        Just(arp(ArpOperation::Request)),
        Just(arp(ArpOperation::Reply)),
        (payload.clone(), 0u16..200, any::<bool>(), 0u16..4)
            .prop_map(|(p, unit, more, ident)| ipv4(IpProtocol::Udp, &p, unit * 8, more, ident)),
        payload.prop_map(|p| ipv4(IpProtocol::Tcp, &p, 0, false, 3)),
    ]
}

#[derive(Debug, Clone)]
enum Damage {
    Flip { at: usize, mask: u8 },
    Truncate(usize),
    Extend(Vec<u8>),
    SetByte { at: usize, value: u8 },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Damage::Flip { at, mask }),
        any::<usize>().prop_map(Damage::Truncate),
        proptest::collection::vec(any::<u8>(), 1..64).prop_map(Damage::Extend),
        (0usize..64, any::<u8>()).prop_map(|(at, value)| Damage::SetByte { at, value }),
    ]
}

fn apply(frame: &mut Vec<u8>, damage: &Damage) {
    match damage {
        Damage::Flip { at, mask } if !frame.is_empty() => {
            let i = at % frame.len();
            frame[i] ^= mask;
        }
        Damage::Truncate(n) if !frame.is_empty() => frame.truncate(n % frame.len()),
        Damage::Extend(tail) => frame.extend_from_slice(tail),
        Damage::SetByte { at, value } if *at < frame.len() => frame[*at] = *value,
        _ => {}
    }
}

/// Feeds a frame split into pieces of `chunk` bytes, so headers straddle
/// buffers as they may after reassembly or from a device that gathers.
fn feed(iface: &mut Interface, frame: &[u8], chunk: usize, now: Instant) {
    let pool = iface.pool().clone();
    let mut packet = PacketBuf::new();
    for piece in frame.chunks(chunk.max(1)) {
        let piece = PacketBuf::from_slice(&pool, 0, piece).expect("the test's pool holds every frame");
        packet.append(piece);
    }
    iface.receive(packet, now);
}

fn check_frames(frames: Vec<(Vec<u8>, usize)>) {
    let mut iface = interface();
    let mut now = Instant::from_secs(1);
    for (frame, chunk) in frames {
        let before = outcomes(iface.counters());
        feed(&mut iface, &frame, chunk, now);
        let after = outcomes(iface.counters());
        assert!(after > before, "a frame left no trace in any counter: {frame:02x?}");
        iface.tx_queue().clear();
        now += std::time::Duration::from_millis(7);
    }
    // Let every timer fire; then only socket queues may hold buffers.
    iface.poll(Instant::from_secs(1000));
    iface.tx_queue().clear();
    assert_eq!(iface.reassembly_pending(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(frames in proptest::collection::vec(
        (proptest::collection::vec(any::<u8>(), 0..1600), 1usize..64), 1..16)) {
        check_frames(frames);
    }

    #[test]
    fn damaged_valid_frames_never_panic(frames in proptest::collection::vec(
        (valid_frame(), proptest::collection::vec(damage(), 0..4), 1usize..2000), 1..16)) {
        let frames = frames
            .into_iter()
            .map(|(mut f, damages, chunk)| {
                for d in &damages {
                    apply(&mut f, d);
                }
                (f, chunk)
            })
            .collect();
        check_frames(frames);
    }
}

#[test]
fn buffers_return_when_sockets_are_drained() {
    let config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    let mut iface = Interface::new(config, BufferPool::new(2048, 64));
    let echo = iface.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let now = Instant::from_secs(1);
    for frame in [udp(7, b"hello"), icmp(8, &[1; 100]), arp(ArpOperation::Request), udp(9, b"closed")] {
        feed(&mut iface, &frame, 2000, now);
    }
    let c = iface.counters().clone();
    assert_eq!((c.udp_delivered, c.icmp_echo_replies_sent, c.arp_replies_sent, c.icmp_errors_sent), (1, 1, 1, 1));
    let datagram = iface.udp_recv(echo).unwrap().unwrap();
    assert_eq!(datagram.payload.to_vec(), b"hello");
    assert_eq!(datagram.source, SocketAddrV4::new(PEER_IP, 5555));
    drop(datagram);
    iface.tx_queue().clear();
    assert_eq!(iface.pool().in_use(), 0, "every buffer is back in the pool");
}
