//! For tests (the pause's, the hold's, the wake index's): an engine with
//! a UDP socket whose queue takes 1000 bytes, holding datagrams of 100
//! bytes another engine sent it.

use nagare_core::buf::BufferPool;
use nagare_core::{Capabilities, Interface, InterfaceConfig, UdpHandle};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::net::{Ipv4Addr, SocketAddrV4};

const NOW: nagare_core::Instant = nagare_core::Instant::from_secs(1);

fn engine(mac: u8, ip: Ipv4Addr) -> Interface {
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), Ipv4Cidr::new(ip, 24).unwrap());
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 64))
}

/// An engine and its socket (a queue of 1000 bytes) holding `count`
/// datagrams of 100 bytes.
pub(crate) fn socket_holding(count: usize) -> (Interface, UdpHandle) {
    let (ours, theirs) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let (mut us, mut peer) = (engine(1, ours), engine(2, theirs));
    let h = us.udp().bind(SocketAddrV4::new(ours, 9)).unwrap();
    us.udp().set_recv_queue_limit(h, 1000).unwrap();
    let from = peer.udp().bind(SocketAddrV4::new(theirs, 7)).unwrap();
    for _ in 0..count {
        peer.udp().send_to(from, &[0; 100], SocketAddrV4::new(ours, 9), NOW).unwrap();
    }
    // The datagrams, and the ARP exchange before them.
    for _ in 0..10 {
        let there: Vec<_> = peer.tx_queue().drain(..).collect();
        let back: Vec<_> = us.tx_queue().drain(..).collect();
        there.into_iter().for_each(|f| us.receive(f, NOW));
        back.into_iter().for_each(|f| peer.receive(f, NOW));
    }
    assert_eq!(us.udp_ref().socket(h).unwrap().queued_bytes(), 100 * count);
    (us, h)
}
