//! Frame builders shared by the engine's integration tests.
#![allow(dead_code)]

pub mod wire;

use nagare_core::buf::PacketBuf;
use nagare_core::{Instant, Interface};
use nagare_wire::{
    multicast_mac, ArpOperation, ArpRepr, EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Addr, Ipv4Repr,
    Ipv6Addr, Ipv6Repr, NdpOption, NdpRepr, UdpRepr,
};

pub const OUR_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
pub const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
pub const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn ethernet(ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; 14];
    EthernetRepr { src_addr: PEER_MAC, dst_addr: OUR_MAC, ethertype }.emit(&mut frame).unwrap();
    frame.extend_from_slice(payload);
    frame
}

pub fn ipv4(protocol: IpProtocol, payload: &[u8], frag_offset: u16, more_frags: bool, ident: u16) -> Vec<u8> {
    ipv4_fragment_from(PEER_IP, protocol, payload, frag_offset, more_frags, ident)
}

/// As [`ipv4`], from `src`.
pub fn ipv4_fragment_from(
    src: Ipv4Addr,
    protocol: IpProtocol,
    payload: &[u8],
    frag_offset: u16,
    more_frags: bool,
    ident: u16,
) -> Vec<u8> {
    let mut packet = vec![0u8; 20];
    Ipv4Repr {
        src_addr: src,
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

/// An IPv4 datagram with a chosen source and TTL, in a frame to us.
pub fn ipv4_from(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let mut packet = vec![0u8; 20];
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol,
        payload_len: payload.len(),
        ttl,
        ident: 9,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        dscp_ecn: 0,
    }
    .emit(&mut packet)
    .unwrap();
    packet.extend_from_slice(payload);
    ethernet(EtherType::Ipv4, &packet)
}

/// A UDP datagram (header and payload) from `src` to `dst`.
pub fn udp_datagram(src: Ipv4Addr, dst: Ipv4Addr, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut datagram = vec![0u8; 8 + payload.len()];
    UdpRepr { src_port: 5555, dst_port }.emit(&mut datagram, payload, src, dst).unwrap();
    datagram
}

/// The frame sent to the Ethernet broadcast address instead of ours.
pub fn to_link_broadcast(mut frame: Vec<u8>) -> Vec<u8> {
    frame[..6].copy_from_slice(&[0xff; 6]);
    frame
}

pub fn udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut datagram = vec![0u8; 8 + payload.len()];
    UdpRepr { src_port: 5555, dst_port }.emit(&mut datagram, payload, PEER_IP, OUR_IP).unwrap();
    ipv4(IpProtocol::Udp, &datagram, 0, false, 1)
}

pub fn icmp(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut message = vec![kind, 0, 0, 0, 0x12, 0x34, 0, 1];
    message.extend_from_slice(payload);
    let sum = nagare_wire::checksum(&message);
    message[2..4].copy_from_slice(&sum.to_be_bytes());
    ipv4(IpProtocol::Icmp, &message, 0, false, 2)
}

pub fn arp(operation: ArpOperation) -> Vec<u8> {
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

/// Feeds a frame split into pieces of `chunk` bytes, so headers straddle
/// buffers as they may after reassembly or from a device that gathers.
pub fn feed(iface: &mut Interface, frame: &[u8], chunk: usize, now: Instant) {
    feed_with(iface, frame, chunk, nagare_core::buf::Offload::NONE, now);
}

/// [`feed`] with what the device claims about the frame.
pub fn feed_with(iface: &mut Interface, frame: &[u8], chunk: usize, offload: nagare_core::buf::Offload, now: Instant) {
    let pool = iface.pool().clone();
    let mut packet = PacketBuf::new();
    for piece in frame.chunks(chunk.max(1)) {
        let piece = PacketBuf::from_slice(&pool, 0, piece).expect("the test's pool holds every frame");
        packet.append(piece);
    }
    packet.set_offload(offload);
    iface.receive(packet, now);
}

/// A router advertisement from `src` (MAC `mac`) to all nodes (ff02::1),
/// hop limit 255, router lifetime `lifetime` seconds, with `options`.
pub fn router_advert(src: Ipv6Addr, mac: EthernetAddress, lifetime: u16, options: &[NdpOption]) -> Vec<u8> {
    let mut opts = vec![0u8; options.iter().map(|o| o.buffer_len()).sum()];
    let mut at = 0;
    for o in options {
        o.emit(&mut opts[at..]).unwrap();
        at += o.buffer_len();
    }
    let ra = NdpRepr::RouterAdvert {
        hop_limit: 0,
        managed_flag: false,
        other_flag: false,
        router_lifetime: lifetime,
        reachable_time: 0,
        retrans_timer: 0,
        options: &opts,
    };
    let dst = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    let mut msg = vec![0u8; ra.buffer_len()];
    ra.emit(&mut msg, src, dst).unwrap();
    let mut f = vec![0u8; 14 + 40];
    let eth = EthernetRepr { src_addr: mac, dst_addr: multicast_mac(&dst).unwrap(), ethertype: EtherType::Ipv6 };
    eth.emit(&mut f).unwrap();
    Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, msg.len(), 255).emit(&mut f[14..]).unwrap();
    f.extend(msg);
    f
}
