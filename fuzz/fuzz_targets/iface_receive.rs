//! The whole receive path: the input is cut into frames (two length bytes,
//! one slice-size byte, then the frame) that go into one interface with
//! sockets open, with time advancing between them. Any panic is a bug, and
//! so is a frame that moves no counter.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{EthernetAddress, Ipv4Addr};
use std::net::SocketAddrV4;
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
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096));
    iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    iface.icmp().echo_open(0x1234).unwrap();
    let pool = iface.pool().clone();
    let mut now = Instant::from_secs(1);
    let mut rest = data;
    while rest.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])) % 2048;
        let chunk = usize::from(rest[2]).max(1);
        rest = &rest[3..];
        let frame = &rest[..len.min(rest.len())];
        rest = &rest[frame.len()..];
        let mut packet = PacketBuf::new();
        for piece in frame.chunks(chunk) {
            match PacketBuf::from_slice(&pool, 0, piece) {
                Ok(p) => packet.append(p),
                Err(_) => return,
            }
        }
        let before = outcomes(&iface);
        iface.receive(packet, now);
        assert!(outcomes(&iface) > before, "a frame moved no counter");
        iface.tx_queue().clear();
        now += Duration::from_millis(u64::from(chunk as u8));
        iface.poll(now);
    }
});
