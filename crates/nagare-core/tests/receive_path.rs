//! Hostile input on the whole receive path: arbitrary frames, and valid
//! frames with arbitrary damage and arbitrary offload claims (checksum
//! state, TCP or UDP segment size, as a VNI peer may make), go into an
//! interface. Nothing may panic, every frame must leave a trace in some
//! counter, and no buffer may leak.

use nagare_core::buf::{BufferPool, ChecksumState, Offload, Segmentation};
use nagare_core::{Capabilities, Counters, Instant, Interface, InterfaceConfig};
use nagare_wire::{ArpOperation, IpProtocol, Ipv4Addr};
use proptest::prelude::*;

mod common;
use common::*;
use std::net::SocketAddrV4;

fn interface() -> Interface {
    let config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 8192));
    iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    iface.icmp().echo_open(0x1234).unwrap();
    iface
}

/// Everything a frame can cause, summed: each frame must move it.
fn outcomes(c: &Counters) -> u64 {
    c.iter().filter(|(name, _)| !name.starts_with("rx_") && !name.starts_with("tx_")).map(|(_, v)| v).sum()
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
        (payload.clone(), 0u16..200, any::<bool>(), 0u16..4).prop_map(|(p, unit, more, ident)| ipv4(
            IpProtocol::Udp,
            &p,
            unit * 8,
            more,
            ident
        )),
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

/// What a device may claim about a frame: any checksum state, and any
/// segment size of a TCP super-segment or a UDP super-frame.
fn offload() -> impl Strategy<Value = Offload> {
    let checksum =
        prop_oneof![Just(ChecksumState::Complete), Just(ChecksumState::Partial), Just(ChecksumState::Verified)];
    let segmentation = prop_oneof![Just(Segmentation::Tcp), Just(Segmentation::Udp)];
    let segment_size = prop_oneof![Just(0u16), 1u16..16, 1u16..1500, any::<u16>()];
    (checksum, segment_size, segmentation).prop_map(|(checksum, segment_size, segmentation)| Offload {
        checksum,
        segment_size,
        segmentation,
    })
}

fn check_frames(frames: Vec<(Vec<u8>, usize, Offload)>) {
    let mut iface = interface();
    let mut now = Instant::from_secs(1);
    for (frame, chunk, offload) in frames {
        let before = outcomes(iface.counters());
        feed_with(&mut iface, &frame, chunk, offload, now);
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
        check_frames(frames.into_iter().map(|(f, chunk)| (f, chunk, Offload::NONE)).collect());
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
                (f, chunk, Offload::NONE)
            })
            .collect();
        check_frames(frames);
    }

    #[test]
    fn any_offload_claim_on_valid_or_damaged_frames_never_panics(frames in proptest::collection::vec(
        (valid_frame(), proptest::collection::vec(damage(), 0..2), 1usize..2000, offload()), 1..16)) {
        let frames = frames
            .into_iter()
            .map(|(mut f, damages, chunk, offload)| {
                for d in &damages {
                    apply(&mut f, d);
                }
                (f, chunk, offload)
            })
            .collect();
        check_frames(frames);
    }
}

#[test]
fn buffers_return_when_sockets_are_drained() {
    let config = InterfaceConfig::new(OUR_MAC, "10.0.0.1/24".parse().unwrap());
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 64));
    let echo = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let now = Instant::from_secs(1);
    for frame in [udp(7, b"hello"), icmp(8, &[1; 100]), arp(ArpOperation::Request), udp(9, b"closed")] {
        feed(&mut iface, &frame, 2000, now);
    }
    let c = iface.counters().clone();
    assert_eq!((c.udp_delivered, c.icmp_echo_replies_sent, c.arp_replies_sent, c.icmp_errors_sent), (1, 1, 1, 1));
    let datagram = iface.udp().recv(echo).unwrap().unwrap();
    assert_eq!(datagram.payload.to_vec(), b"hello");
    assert_eq!(datagram.source, SocketAddrV4::new(PEER_IP, 5555));
    drop(datagram);
    iface.tx_queue().clear();
    assert_eq!(iface.pool().in_use(), 0, "every buffer is back in the pool");
}
