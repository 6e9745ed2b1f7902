//! The shim over IPv6, driven through its C ABI as packetdrill drives it
//! with `--ip_version=ipv6` (AF_INET6 sockets, IPv6 on the wire) and
//! `--ip_version=ipv4-mapped-ipv6` (AF_INET6 sockets, IPv4 on the wire).

mod common;
use common::*;

use nagare_packetdrill::{Config, Stack};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

const RPORT: u16 = 40000;
const LPORT: u16 = 8080;

fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

fn v4(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, port))
}

/// An AF_INET6 stream socket.
fn socket6(pd: &Pd) -> i32 {
    pd.socket_of(libc::AF_INET6, libc::SOCK_STREAM, 0).expect("AF_INET6 socket")
}

#[test]
fn an_ipv6_passive_open_carries_data_both_ways_at_the_ipv6_mss() {
    let pd = Pd::new("");
    // packetdrill's random address in its /48: the engine moves there.
    let local = v6(Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0x1234, 0x5678), LPORT);
    let remote = v6(REMOTE6, RPORT);
    let lfd = socket6(&pd);
    pd.bind_to(lfd, local).unwrap();
    pd.listen(lfd, 1).unwrap();

    pd.inject(&Seg::new(remote, local, 5000, 0, SYN).mss(1440).build()).unwrap();
    let synack = pd.expect();
    assert_eq!((synack.src, synack.dst), (local, remote), "IPv6 both ways: {synack:?}");
    assert_eq!(synack.flags, SYN | ACK);
    assert_eq!(synack.ack, 5001);
    // 1500 less the IPv6 and TCP headers, where IPv4 would offer 1460.
    assert_eq!(synack.mss_option(), Some(1440));
    pd.inject(&Seg::new(remote, local, 5001, synack.seq + 1, ACK).build()).unwrap();

    let (fd, peer, len) = pd.accept_any(lfd).unwrap();
    assert_eq!((peer, len), (remote, SIN6_LEN), "a sockaddr_in6 for an IPv6 peer");
    pd.inject(&Seg::new(remote, local, 5001, synack.seq + 1, ACK | PSH).data(b"over six").build()).unwrap();
    assert_eq!(pd.read(fd, 100).unwrap(), b"over six");
    let ack = pd.expect();
    assert_eq!((ack.dst, ack.ack), (remote, 5009));
    assert_eq!(pd.write(fd, b"and back").unwrap(), 8);
    let out = pd.expect();
    assert_eq!((out.src, out.dst, out.payload.as_slice()), (local, remote, &b"and back"[..]));
}

#[test]
fn an_ipv6_listener_on_the_any_address_takes_ipv4_as_mapped_unless_v6_only() {
    let remote = v4(REMOTE, RPORT);
    let local = v4(LOCAL, LPORT);

    // Dual stack, as Linux's default: the IPv4 peer is given back as
    // ::ffff:192.0.2.1 in a sockaddr_in6.
    let pd = Pd::new("");
    let lfd = socket6(&pd);
    assert_eq!(pd.getsockopt_int(lfd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY), Ok(0));
    pd.bind_to(lfd, v6(Ipv6Addr::UNSPECIFIED, LPORT)).unwrap();
    pd.listen(lfd, 1).unwrap();
    handshake_between(&pd, remote, local, 100);
    let (_, peer, len) = pd.accept_any(lfd).unwrap();
    assert_eq!((peer, len), (v6(REMOTE.to_ipv6_mapped(), RPORT), SIN6_LEN));

    // IPV6_V6ONLY: nobody listens on IPv4, so the SYN is reset.
    let pd = Pd::new("");
    let lfd = socket6(&pd);
    pd.setsockopt_int(lfd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1).unwrap();
    assert_eq!(pd.getsockopt_int(lfd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY), Ok(1));
    pd.bind_to(lfd, v6(Ipv6Addr::UNSPECIFIED, LPORT)).unwrap();
    pd.listen(lfd, 1).unwrap();
    assert_eq!(
        pd.setsockopt_int(lfd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0),
        Err(libc::EINVAL),
        "fixed once the socket is in use"
    );
    pd.inject(&Seg::new(remote, local, 100, 0, SYN).mss(1000).build()).unwrap();
    let reset = pd.expect();
    assert_eq!(reset.flags & RST, RST, "{reset:?}");
    assert_eq!(reset.dst, remote);
}

#[test]
fn an_ipv6_active_open_goes_to_the_remote_end_and_a_mapped_one_over_ipv4() {
    let pd = Pd::new("");
    let fd = socket6(&pd);
    pd.set_nonblocking(fd).unwrap();
    let server = v6(REMOTE6, 8080);
    assert_eq!(pd.connect_to(fd, server), Err(libc::EINPROGRESS));
    let syn = pd.expect();
    assert_eq!(syn.flags, SYN);
    assert_eq!((syn.src.ip(), syn.dst), (IpAddr::V6(LOCAL6), server));
    pd.inject(&Seg::new(server, syn.src, 9000, syn.seq + 1, SYN | ACK).mss(1440).build()).unwrap();
    assert_eq!(pd.expect().flags & (SYN | ACK), ACK, "the handshake's last ACK");
    assert_eq!(pd.connect_to(fd, server), Ok(()), "connected");

    // An IPv4-mapped destination is reached over IPv4.
    let mapped = pd.socket_of(libc::AF_INET6, libc::SOCK_STREAM, 0).unwrap();
    pd.set_nonblocking(mapped).unwrap();
    assert_eq!(pd.connect_to(mapped, v6(REMOTE.to_ipv6_mapped(), 8081)), Err(libc::EINPROGRESS));
    let syn = pd.expect();
    assert_eq!((syn.src.ip(), syn.dst), (IpAddr::V4(LOCAL), v4(REMOTE, 8081)));

    // Not on an IPV6_V6ONLY socket, and no IPv4 address on an AF_INET6
    // socket nor IPv6 on an AF_INET one.
    let only = socket6(&pd);
    pd.setsockopt_int(only, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1).unwrap();
    assert_eq!(pd.connect_to(only, v6(REMOTE.to_ipv6_mapped(), 8082)), Err(libc::ENETUNREACH));
    assert_eq!(pd.connect_to(only, v4(REMOTE, 8082)), Err(libc::EAFNOSUPPORT));
    let four = pd.socket().unwrap();
    assert_eq!(pd.connect_to(four, server), Err(libc::EAFNOSUPPORT));
}

#[test]
fn neighbour_discovery_and_mld_stay_off_the_scripts_wire() {
    // Left alone, the engine reports its multicast groups (MLD) and would
    // solicit its neighbours; none of it reaches packetdrill, which
    // expects only what its script says.
    let mut stack = Stack::new(Config { sniff_timeout_usecs: 10_000_000, ..Config::default() }).unwrap();
    assert_eq!(stack.sniff(), None, "nothing but the script's own traffic");
    assert!(stack.link_frames > 0, "the engine did send its link's traffic, which was held back");
}

#[test]
fn an_ipv6_bind_moves_the_engine_only_to_an_address_it_can_hold() {
    let pd = Pd::new("");
    let fd = socket6(&pd);
    for bad in [
        Ipv6Addr::LOCALHOST,
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 9),
        REMOTE6,
    ] {
        assert_eq!(pd.bind_to(fd, v6(bad, 80)), Err(libc::EADDRNOTAVAIL), "{bad}");
    }
    // A mapped address is its IPv4 one, which the engine takes as for an
    // AF_INET socket.
    pd.bind_to(fd, v6(Ipv4Addr::new(192, 168, 9, 9).to_ipv6_mapped(), LPORT)).unwrap();
    pd.listen(fd, 1).unwrap();
    let (remote, local) = (v4(REMOTE, RPORT), v4(Ipv4Addr::new(192, 168, 9, 9), LPORT));
    pd.inject(&Seg::new(remote, local, 1, 0, SYN).mss(1000).build()).unwrap();
    assert_eq!(pd.expect().src, local, "the engine answers from the mapped address's IPv4 one");
}
