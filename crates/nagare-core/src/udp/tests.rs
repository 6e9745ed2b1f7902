//! Segmented sends and UDP super-frames: two interfaces joined by moving
//! their transmit queues, the frames between them read back with
//! `nagare_wire`'s parsers.

use super::UDP_MAX_SEGMENTS;
use crate::buf::{BufferPool, ChecksumState, Offload, PacketBuf, TxOffloads};
use crate::iface::Error;
use crate::{Capabilities, Instant, Interface, InterfaceConfig, UdpHandle};
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};
use nagare_wire::{EthernetAddress, EthernetFrame, Ipv4Cidr, Ipv4Packet, UdpPacket};

const A: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 1);
const B: Ipv4Addr = Ipv4Addr::new(192, 168, 9, 2);
const SINK: u16 = 9;
const NOW: Instant = Instant::from_secs(100);
/// A device that completes checksums and takes UDP super-frames.
const USO: TxOffloads = TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 65535 };

fn iface(mac: u8, ip: Ipv4Addr, tx_offloads: TxOffloads) -> Interface {
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), Ipv4Cidr::new(ip, 24).unwrap());
    Interface::new(config, Capabilities { mtu: 1500, tx_offloads }, BufferPool::new(2048, 1024))
}

/// A sender on `offloads` and a receiver with a socket on [`SINK`], ARP
/// already resolved both ways.
fn pair(offloads: TxOffloads) -> (Interface, Interface, UdpHandle, UdpHandle) {
    let (mut a, mut b) = (iface(1, A, offloads), iface(2, B, offloads));
    let tx = a.udp().bind(SocketAddrV4::new(A, 4000)).unwrap();
    let rx = b.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SINK)).unwrap();
    a.udp().send_to(tx, b"hello", SocketAddrV4::new(B, SINK), NOW).unwrap();
    move_frames(&mut a, &mut b);
    assert!(b.udp().recv(rx).unwrap().is_some(), "ARP resolved and the first datagram through");
    (a, b, tx, rx)
}

/// Moves frames both ways until both queues are empty.
fn move_frames(a: &mut Interface, b: &mut Interface) {
    for _ in 0..100 {
        let from_a: Vec<_> = a.tx_queue().drain(..).collect();
        let from_b: Vec<_> = b.tx_queue().drain(..).collect();
        if from_a.is_empty() && from_b.is_empty() {
            return;
        }
        from_a.into_iter().for_each(|f| b.receive(f, NOW));
        from_b.into_iter().for_each(|f| a.receive(f, NOW));
    }
    panic!("frames kept flowing");
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn received(b: &mut Interface, rx: UdpHandle) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(d) = b.udp().recv(rx).unwrap() {
        assert_eq!(d.source, SocketAddrV4::new(A, 4000));
        out.push(d.payload.to_vec());
    }
    out
}

/// The IPv4 identification, UDP length and payload of a frame that is a
/// complete UDP datagram from A to B, its checksums verified.
fn parse_datagram(frame: &PacketBuf) -> (u16, u16, Vec<u8>) {
    let bytes = frame.to_vec();
    let eth = EthernetFrame::new_checked(&bytes[..]).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum(), "IP header checksum");
    assert!(!ip.more_frags() && ip.frag_offset() == 0, "not a fragment");
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(usize::from(udp.len()), ip.payload().len(), "UDP length is the IP payload's");
    assert!(udp.checksum() != 0 && udp.verify_checksum(A, B), "UDP checksum complete and right");
    (ip.ident(), udp.len(), udp.payload().to_vec())
}

#[test]
fn without_the_offload_the_engine_cuts_into_ordinary_datagrams() {
    let (mut a, mut b, tx, rx) = pair(TxOffloads::NONE);
    let sent = data(5000);
    a.udp().send_to_segmented(tx, &sent, 1472, SocketAddrV4::new(B, SINK), NOW).unwrap();
    let frames: Vec<_> = a.tx_queue().drain(..).collect();
    assert_eq!(frames.len(), 4, "5000 bytes in 1472-byte datagrams");
    let mut idents = Vec::new();
    let mut joined = Vec::new();
    for (k, frame) in frames.iter().enumerate() {
        assert_eq!(frame.offload(), Offload::NONE);
        let (ident, len, payload) = parse_datagram(frame);
        let want = if k == 3 { 5000 - 3 * 1472 } else { 1472 };
        assert_eq!((usize::from(len), payload.len()), (8 + want, want), "datagram {k}");
        idents.push(ident);
        joined.extend_from_slice(&payload);
    }
    assert_eq!(joined, sent);
    idents.dedup();
    assert_eq!(idents.len(), 4, "each datagram its own IP identification");
    frames.into_iter().for_each(|f| b.receive(f, NOW));
    let got = received(&mut b, rx);
    assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), [1472, 1472, 1472, 584]);
    assert_eq!(got.concat(), sent);
    assert_eq!(a.counters().udp_sent, 1 + 4);
}

#[test]
fn with_the_offload_one_frame_carries_every_datagram() {
    let (mut a, mut b, tx, rx) = pair(USO);
    let sent = data(65_000);
    a.udp().send_to_segmented(tx, &sent, 1472, SocketAddrV4::new(B, SINK), NOW).unwrap();
    let frames: Vec<_> = a.tx_queue().drain(..).collect();
    assert_eq!(frames.len(), 1);
    let frame = &frames[0];
    assert_eq!(frame.offload(), Offload::udp_segments(1472));
    let bytes = frame.to_vec();
    let ip = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
    assert_eq!(usize::from(ip.total_len()), 20 + 8 + 65_000);
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(usize::from(udp.len()), 8 + 65_000);
    assert_eq!(udp.payload(), &sent[..]);
    assert_eq!(a.counters().udp_super_frames_sent, 1);

    b.receive(frames.into_iter().next().unwrap(), NOW);
    let got = received(&mut b, rx);
    let datagrams = 65_000usize.div_ceil(1472);
    assert_eq!(got.len(), datagrams, "one recv per datagram");
    assert!(got[..datagrams - 1].iter().all(|d| d.len() == 1472));
    assert_eq!(got[datagrams - 1].len(), 65_000 - (datagrams - 1) * 1472, "the last one short");
    assert_eq!(got.concat(), sent);
    assert_eq!(b.counters().udp_super_frames_received, 1);
    assert_eq!(b.counters().udp_delivered, 1 + datagrams as u64);
}

#[test]
fn segment_sizes_a_send_cannot_use_are_refused() {
    let (mut a, _b, tx, _rx) = pair(USO);
    let dst = SocketAddrV4::new(B, SINK);
    let mut udp = a.udp();
    assert_eq!(udp.send_to_segmented(tx, &data(3000), 1473, dst, NOW), Err(Error::MessageTooLong), "over the MTU");
    let many = data(UDP_MAX_SEGMENTS * 10 + 1);
    assert_eq!(udp.send_to_segmented(tx, &many, 10, dst, NOW), Err(Error::MessageTooLong), "too many datagrams");
    assert_eq!(udp.send_to_segmented(tx, &data(65_508), 1472, dst, NOW), Err(Error::MessageTooLong));
    assert!(a.tx_queue().is_empty());
    // No segment size, or one the payload does not exceed: one datagram.
    let mut udp = a.udp();
    udp.send_to_segmented(tx, &data(1000), 0, dst, NOW).unwrap();
    udp.send_to_segmented(tx, &data(1000), 1000, dst, NOW).unwrap();
    let frames: Vec<_> = a.tx_queue().drain(..).collect();
    assert_eq!(frames.len(), 2);
    assert!(frames.iter().all(|f| f.offload().segment_size == 0));
}

/// A UDP super-frame as [`with_the_offload_one_frame_carries_every_datagram`]
/// sends it, of `len` payload bytes.
fn super_frame(len: usize, segment_size: u16) -> (Interface, UdpHandle, Vec<u8>) {
    let (mut a, b, tx, rx) = pair(USO);
    a.udp().send_to_segmented(tx, &data(len), usize::from(segment_size), SocketAddrV4::new(B, SINK), NOW).unwrap();
    let frame = a.tx_queue().pop_front().unwrap();
    assert_eq!(frame.offload(), Offload::udp_segments(segment_size));
    (b, rx, frame.to_vec())
}

fn deliver(b: &mut Interface, bytes: &[u8], offload: Offload) {
    let mut frame = PacketBuf::from_slice(b.pool(), 0, bytes).unwrap();
    frame.set_offload(offload);
    b.receive(frame, NOW);
}

#[test]
fn hostile_udp_super_frames_are_counted_and_dropped() {
    let (mut b, rx, bytes) = super_frame(10_000, 1000);
    let partial = |size| Offload::udp_segments(size);
    let cases: [(&str, Vec<u8>, Offload); 5] = [
        ("segment size past the payload", bytes.clone(), partial(10_001)),
        ("more datagrams than allowed", bytes.clone(), partial(10)),
        ("a checksum to verify", bytes.clone(), Offload { checksum: ChecksumState::Complete, ..partial(1000) }),
        ("UDP length short of the IP payload", with_udp_len(&bytes, 8 + 5000), partial(1000)),
        ("UDP length of the header alone", with_udp_len(&bytes, 8), partial(1000)),
    ];
    for (k, (what, bytes, offload)) in cases.into_iter().enumerate() {
        deliver(&mut b, &bytes, offload);
        assert_eq!(b.counters().drop_udp_bad_segmentation, k as u64 + 1, "{what}");
        assert!(received(&mut b, rx).is_empty(), "{what}");
    }
    // A UDP length past the packet is malformed, as on any datagram.
    deliver(&mut b, &with_udp_len(&bytes, 8 + 10_001), partial(1000));
    assert_eq!(b.counters().drop_udp_malformed, 1);
    // The frame as sent still splits.
    deliver(&mut b, &bytes, partial(1000));
    assert_eq!(received(&mut b, rx).len(), 10);
    // A segment size equal to the payload is one datagram.
    deliver(&mut b, &bytes, partial(10_000));
    assert_eq!(received(&mut b, rx).iter().map(Vec::len).collect::<Vec<_>>(), [10_000]);
}

/// `frame` with its UDP length field set to `len`.
fn with_udp_len(frame: &[u8], len: u16) -> Vec<u8> {
    let mut bytes = frame.to_vec();
    bytes[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&len.to_be_bytes());
    bytes
}

#[test]
fn a_super_frame_to_a_port_without_a_socket_counts_every_datagram() {
    let (mut b, rx, bytes) = super_frame(3000, 1000);
    b.udp().close(rx).unwrap();
    deliver(&mut b, &bytes, Offload::udp_segments(1000));
    assert_eq!(b.counters().drop_udp_no_socket, 3);
    assert_eq!(b.counters().icmp_errors_sent, 1, "one port unreachable for the frame");
}

#[test]
fn a_receive_queue_limit_set_on_a_socket_bounds_what_it_holds() {
    let (mut a, mut b, tx, rx) = pair(TxOffloads::default());
    assert_eq!(b.udp_ref().socket(rx).unwrap().queue_limits().1, 4 << 20, "the engine's default");
    assert_eq!(b.udp().set_recv_queue_limit(rx, 1000), Ok(1000));
    for _ in 0..3 {
        a.udp().send_to(tx, &data(400), SocketAddrV4::new(B, SINK), NOW).unwrap();
    }
    move_frames(&mut a, &mut b);
    let socket = b.udp_ref().socket(rx).unwrap();
    assert_eq!((socket.queued(), socket.dropped()), (2, 1), "800 bytes fit in 1000, a third 400 does not");
    // It shrinks no lower than what it holds.
    assert_eq!(b.udp().set_recv_queue_limit(rx, 10), Ok(800));
    assert_eq!(received(&mut b, rx).len(), 2);
}

#[test]
fn a_look_at_the_receiver_ahead_of_delivery_agrees_with_it() {
    let mut a = iface(1, A, TxOffloads::NONE);
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 2]), Ipv4Cidr::new(B, 24).unwrap());
    (config.udp_rx_queue_packets, config.udp_rx_queue_bytes) = (16, 4000);
    let mut b = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024));
    let tx = a.udp().bind(SocketAddrV4::new(A, 4000)).unwrap();
    let rx = b.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SINK)).unwrap();
    let dst = SocketAddrV4::new(B, SINK);
    assert_eq!(b.udp_ref().receiver_of(dst).map(|(h, _)| h), Some(rx));
    assert!(b.udp_ref().receiver_of(SocketAddrV4::new(B, SINK + 1)).is_none(), "no socket on that port");
    let bound = b.udp().bind(SocketAddrV4::new(B, 5000)).unwrap();
    assert_eq!(b.udp_ref().receiver_of(SocketAddrV4::new(B, 5000)).map(|(h, _)| h), Some(bound));
    let elsewhere = SocketAddrV4::new(Ipv4Addr::new(192, 168, 9, 255), 5000);
    assert!(b.udp_ref().receiver_of(elsewhere).is_none(), "bound to B: not for another address");

    let (limit, _) = b.udp_ref().socket(rx).unwrap().queue_limits();
    let mut sent = 0;
    while b.udp_ref().receiver_of(dst).unwrap().1.has_room_for(0, 0, 100) {
        assert!(sent < limit, "room past the limit");
        let (ahead, bytes) = (b.udp_ref().socket(rx).unwrap().queued(), b.udp_ref().socket(rx).unwrap().queued_bytes());
        assert_eq!((ahead, bytes), (sent, sent * 100));
        a.udp().send_to(tx, &data(100), dst, NOW).unwrap();
        move_frames(&mut a, &mut b);
        sent += 1;
    }
    assert_eq!(sent, limit, "room for exactly the limit");
    let socket = b.udp_ref().socket(rx).unwrap();
    assert!(!socket.has_room_for(0, 0, 0));
    assert_eq!(socket.dropped(), 0);
    a.udp().send_to(tx, &data(100), dst, NOW).unwrap();
    move_frames(&mut a, &mut b);
    assert_eq!(b.udp_ref().socket(rx).unwrap().dropped(), 1, "the one it had no room for is dropped");
    assert_eq!(b.counters().drop_udp_queue_full, 1);

    // Looking ahead: datagrams and bytes counted as if queued first.
    let _ = received(&mut b, rx);
    let socket = b.udp_ref().socket(rx).unwrap();
    assert!(socket.has_room_for(limit - 1, 0, 100));
    assert!(!socket.has_room_for(limit, 0, 100));
    let (_, bytes) = socket.queue_limits();
    assert!(socket.has_room_for(0, bytes - 100, 100));
    assert!(!socket.has_room_for(0, bytes - 99, 100));
}

#[test]
fn a_socket_datagrams_came_to_is_listed_once_until_its_events_are_taken() {
    let (mut a, mut b, tx, rx) = pair(TxOffloads::NONE);
    let other = b.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SINK + 1)).unwrap();
    let mut events = Vec::new();
    b.udp().take_events(&mut events);
    events.clear();
    for _ in 0..3 {
        a.udp().send_to(tx, b"again", SocketAddrV4::new(B, SINK), NOW).unwrap();
    }
    move_frames(&mut a, &mut b);
    b.udp().take_events(&mut events);
    assert_eq!(events, [rx], "three datagrams, one event, none for the idle socket");
    events.clear();
    b.udp().take_events(&mut events);
    assert!(events.is_empty(), "nothing new");
    // A socket closed with its event not taken is left out.
    a.udp().send_to(tx, b"gone", SocketAddrV4::new(B, SINK + 1), NOW).unwrap();
    move_frames(&mut a, &mut b);
    b.udp().close(other).unwrap();
    b.udp().take_events(&mut events);
    assert!(events.is_empty(), "{events:?}");
}
