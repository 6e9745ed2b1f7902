//! The whole receive path: the input is cut into frames (two length bytes,
//! one slice-size byte, one offload byte, then the frame) that go into one
//! interface of both families (fd00::1/64 taken at once beside
//! 10.0.0.1/24) with sockets open (UDP on port 7 of each family, a
//! dual-stack TCP listener on port 80, an echo socket), with time
//! advancing between them. The
//! offload byte says what the device claims about the frame, as a VNI peer
//! may: its checksum state, and a segment size of a TCP super-segment or a
//! UDP super-frame. Any panic is a bug, and so is a frame that moves no
//! counter.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_core::buf::{BufferPool, ChecksumState, Offload, PacketBuf, Segmentation};
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{EthernetAddress, Ipv4Addr, Ipv6Addr};
use std::net::{SocketAddrV4, SocketAddrV6};
use std::time::Duration;

fn outcomes(iface: &Interface) -> u64 {
    iface
        .counters()
        .iter()
        .filter(|(name, _)| !name.starts_with("rx_") && !name.starts_with("tx_"))
        .map(|(_, v)| v)
        .sum()
}

fuzz_target!(|data: &[u8]| {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    config.ipv6 = Some(Ipv6Config {
        addresses: vec!["fd00::1/64".parse().unwrap()],
        dad_transmits: 0,
        router_solicitations: 0,
        ..Ipv6Config::default()
    });
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096));
    iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    iface.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 7, 0, 0)).unwrap();
    iface.tcp().listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 4).unwrap();
    iface.icmp().echo_open(0x1234).unwrap();
    let pool = iface.pool().clone();
    let mut now = Instant::from_secs(1);
    let mut rest = data;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])) % 2048;
        let chunk = usize::from(rest[2]).max(1);
        let offload = offload_of(rest[3]);
        rest = &rest[4..];
        let frame = &rest[..len.min(rest.len())];
        rest = &rest[frame.len()..];
        let mut packet = PacketBuf::new();
        for piece in frame.chunks(chunk) {
            match PacketBuf::from_slice(&pool, 0, piece) {
                Ok(p) => packet.append(p),
                Err(_) => return,
            }
        }
        packet.set_offload(offload);
        let before = outcomes(&iface);
        iface.receive(packet, now);
        assert!(outcomes(&iface) > before, "a frame moved no counter");
        iface.tx_queue().clear();
        now += Duration::from_millis(u64::from(chunk as u8));
        iface.poll(now);
    }
});

/// Bits 0..2 the checksum state, bit 2 UDP segmentation, bits 3..8 the
/// segment size in units of 8 bytes.
fn offload_of(byte: u8) -> Offload {
    let checksum = match byte & 3 {
        1 => ChecksumState::Partial,
        2 => ChecksumState::Verified,
        _ => ChecksumState::Complete,
    };
    let segmentation = if byte & 4 != 0 { Segmentation::Udp } else { Segmentation::Tcp };
    Offload { checksum, segment_size: u16::from(byte >> 3) * 8, segmentation }
}
