//! Engines built for a real link take their keys from the operating
//! system's random source: two made by the same process in the same
//! microsecond still choose different initial sequence numbers for the same
//! connection, so one cannot be predicted from the other.

use nagare_core::buf::PacketBuf;
use nagare_core::{Instant, Interface};
use nagare_dev::Loopback;
use nagare_host::link::interface_on;
use nagare_host::{DeviceSpec, LinkSpec};
use nagare_wire::{EthernetFrame, Ipv4Packet, TcpPacket};
use std::net::{Ipv4Addr, SocketAddrV4};

const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 9];

fn link() -> LinkSpec {
    LinkSpec {
        device: DeviceSpec::Tap { name: "unused".into(), offload: false },
        addr: Some("10.0.0.1/24".parse().unwrap()),
        ipv6: Vec::new(),
        gateway: None,
        gateway6: None,
        mac: None,
        impair: None,
        syn_budget: None,
    }
}

/// The peer asks for our address, which teaches the engine the peer's.
fn arp_request() -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&PEER.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f
}

/// The sequence number of the SYN the engine sends for one fixed
/// connection (10.0.0.1:40000 to 10.0.0.9:80 at time zero).
fn syn_sequence_number(mut iface: Interface) -> u32 {
    let frame = PacketBuf::from_slice(iface.pool(), 0, &arp_request()).unwrap();
    iface.receive(frame, Instant::ZERO);
    iface.tx_queue().clear();
    iface.tcp().connect(SocketAddrV4::new(PEER, 80), 40000, Instant::ZERO).unwrap();
    iface.poll(Instant::ZERO);
    let frames: Vec<Vec<u8>> = iface.tx_queue().drain(..).map(|f| f.to_vec()).collect();
    for frame in frames {
        let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { continue };
        if ip.protocol() == nagare_wire::IpProtocol::Tcp {
            let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
            return tcp.seq_number().0;
        }
    }
    panic!("the engine sent no SYN");
}

#[test]
fn two_engines_made_at_once_choose_different_sequence_numbers() {
    let device = Loopback::default();
    let a = interface_on(&device, &link()).unwrap();
    let b = interface_on(&device, &link()).unwrap();
    assert_ne!(a.config().secrets, b.config().secrets);
    assert_ne!(syn_sequence_number(a), syn_sequence_number(b));
}
