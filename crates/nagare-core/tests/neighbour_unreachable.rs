//! A next hop on the link that never answers ARP, in virtual time: a
//! connect to it fails with host unreachable once resolution gives up
//! (three requests a second apart), not after the SYN retries; the failure
//! is remembered for a while, so a retry fails at once; then resolution
//! is tried again.

use nagare_core::buf::BufferPool;
use nagare_core::icmp::IcmpError;
use nagare_core::iface::Error;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{EthernetAddress, Ipv4Addr};
use std::net::SocketAddrV4;
use std::time::Duration;

const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// On the link, and nobody has it.
const NOBODY: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);

fn iface() -> Interface {
    let cidr = nagare_wire::Ipv4Cidr::new(US, 24).unwrap();
    let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), cidr);
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

/// Frames sent that are ARP requests (the rest are dropped unanswered).
fn arp_requests(iface: &mut Interface) -> usize {
    iface.tx_queue().drain(..).filter(|f| f.to_vec().get(12..14) == Some(&[0x08, 0x06][..])).count()
}

/// Runs the interface's timers until `h` closes or `limit` passes; returns
/// when it closed and the ARP requests sent meanwhile.
fn run_until_closed(iface: &mut Interface, h: TcpHandle, now: &mut Instant, limit: Duration) -> (Instant, usize) {
    let end = *now + limit;
    let mut requests = arp_requests(iface);
    for _ in 0..100_000 {
        iface.poll(*now);
        requests += arp_requests(iface);
        if iface.tcp_ref().state(h) == Ok(State::Closed) {
            return (*now, requests);
        }
        match iface.poll_at() {
            Some(t) if t <= end => *now = (*now).max(t),
            _ => break,
        }
    }
    panic!("still {:?} at {now:?}", iface.tcp_ref().state(h));
}

#[test]
fn connect_to_a_silent_neighbour_fails_with_host_unreachable() {
    let mut iface = iface();
    let t0 = Instant::from_secs(100);
    let mut now = t0;
    let remote = SocketAddrV4::new(NOBODY, 80);
    let h = iface.tcp().connect(remote, 0, now).unwrap();
    let (closed_at, requests) = run_until_closed(&mut iface, h, &mut now, Duration::from_secs(200));
    let took = closed_at.saturating_since(t0);
    assert!(took >= Duration::from_secs(3) && took <= Duration::from_secs(4), "gave up after {took:?}");
    assert_eq!(requests, 3, "three ARP requests a second apart");
    let mut buf = [0u8; 8];
    assert_eq!(iface.tcp().recv(h, &mut buf, now), Err(Error::HostUnreachable));
    assert_eq!(iface.tcp().send(h, b"x", now), Err(Error::HostUnreachable));
    assert_eq!(iface.counters().tcp_connects_unreachable, 1);
    iface.tcp().close(h, now).unwrap();

    // A retry while the failure is remembered fails at once, without
    // asking the link again.
    now += Duration::from_secs(1);
    let again = iface.tcp().connect(remote, 0, now).unwrap();
    let (closed_at, requests) = run_until_closed(&mut iface, again, &mut now, Duration::from_secs(200));
    assert_eq!(closed_at, t0 + Duration::from_secs(4), "failed in the same instant");
    assert_eq!(requests, 0);
    assert_eq!(iface.tcp().send(again, b"x", now), Err(Error::HostUnreachable));
    iface.tcp().close(again, now).unwrap();

    // A UDP datagram meanwhile is dropped at once and its socket told.
    let u = iface.udp().bind(SocketAddrV4::new(US, 5000)).unwrap();
    iface.udp().send_to(u, b"hello", SocketAddrV4::new(NOBODY, 53), now).unwrap();
    iface.poll(now);
    assert_eq!(arp_requests(&mut iface), 0);
    assert!(matches!(iface.udp().take_error(u), Ok(Some(IcmpError::Unreachable { code: 1, .. }))));

    // Once the failure is forgotten, resolution is tried again.
    now = t0 + Duration::from_secs(3) + iface.config().arp.failed_lifetime;
    let third = iface.tcp().connect(remote, 0, now).unwrap();
    assert_eq!(arp_requests(&mut iface), 1, "asked again");
    iface.poll(now);
    assert_eq!(iface.tcp_ref().state(third), Ok(State::SynSent));
    let start = now;
    let (closed_at, requests) = run_until_closed(&mut iface, third, &mut now, Duration::from_secs(200));
    assert_eq!(closed_at.saturating_since(start), Duration::from_secs(3));
    assert_eq!(requests, 2, "two more requests, then give up");
}
