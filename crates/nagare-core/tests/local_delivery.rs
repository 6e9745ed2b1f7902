//! Datagrams to one of our own addresses never reach the link: they are
//! received by the next poll, so two applications of one stack (netd's
//! clients) can talk to each other by its address.

use nagare_core::buf::BufferPool;
use nagare_core::icmp::EchoEvent;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{EthernetAddress, Ipv4Addr};
use std::net::SocketAddrV4;
use std::time::Duration;

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

fn interface() -> Interface {
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096))
}

/// Polls until nothing local is left (a few rounds), then checks the link
/// saw nothing.
fn settle(iface: &mut Interface, now: Instant) {
    for _ in 0..16 {
        iface.poll(now);
    }
    assert!(iface.tx_queue().is_empty(), "a datagram to ourselves went to the link");
}

#[test]
fn udp_and_ping_to_ourselves() {
    let mut iface = interface();
    let now = Instant::from_secs(1);
    let a = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000)).unwrap();
    let b = iface.udp().bind(SocketAddrV4::new(OURS, 6000)).unwrap();
    let big: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
    iface.udp().send_to(a, b"hi", SocketAddrV4::new(OURS, 6000), now).unwrap();
    iface.udp().send_to(a, &big, SocketAddrV4::new(OURS, 6000), now).unwrap();
    assert!(iface.udp().recv(b).unwrap().is_none(), "delivered inside the send");
    settle(&mut iface, now);
    let mut buf = vec![0u8; 10000];
    assert_eq!(iface.udp().recv_from(b, &mut buf).unwrap(), Some((2, SocketAddrV4::new(OURS, 5000))));
    let (n, _) = iface.udp().recv_from(b, &mut buf).unwrap().unwrap();
    assert_eq!(&buf[..n], &big[..], "a datagram above the MTU arrives whole");
    assert_eq!(iface.counters().frag_sent, 0);

    let echo = iface.icmp().echo_open(77).unwrap();
    iface.icmp().echo_send(echo, OURS, 1, b"me", now).unwrap();
    settle(&mut iface, now);
    assert!(matches!(
        iface.icmp().echo_recv(echo).unwrap(),
        Some(EchoEvent::Reply { from: OURS, seq_no: 1, data_len: 2, .. })
    ));
    assert!(iface.counters().local_delivered >= 4);
    assert_eq!(iface.counters().drop_ip_bad_source, 0);
}

#[test]
fn tcp_to_ourselves_is_byte_exact() {
    tcp_to_ourselves(interface());
}

/// With checksum and segmentation offload (as on a TAP): the segments to
/// ourselves are super-segments with partial checksums, received as they are.
#[test]
fn tcp_to_ourselves_with_offloads_is_byte_exact() {
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1/24".parse().unwrap());
    let offloads = nagare_core::buf::TxOffloads { checksum: true, tcp_segmentation: 65535, udp_segmentation: 0 };
    let caps = Capabilities { tx_offloads: offloads, ..Capabilities::default() };
    tcp_to_ourselves(Interface::new(config, caps, BufferPool::new(2048, 4096)));
}

fn tcp_to_ourselves(mut iface: Interface) {
    let mut now = Instant::from_secs(1);
    let listener = iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    let client = iface.tcp().connect(SocketAddrV4::new(OURS, 80), 0, now).unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let mut server = None;
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..100_000 {
        if server.is_none() {
            server = iface.tcp().accept(listener).unwrap();
        }
        if sent < data.len() {
            sent += iface.tcp().send(client, &data[sent..], now).unwrap_or(0);
        }
        if let Some(s) = server {
            while let Ok(n) = iface.tcp().recv(s, &mut buf, now) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == data.len() {
            break;
        }
        iface.poll(now);
        now += Duration::from_micros(10);
    }
    assert!(got == data, "received {} of {} bytes, or wrong ones", got.len(), data.len());
    assert!(iface.tx_queue().is_empty(), "a segment to ourselves went to the link");
}
