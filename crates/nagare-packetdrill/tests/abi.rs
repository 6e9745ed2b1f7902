//! The shim driven through its C ABI, call by call, as packetdrill drives it.

mod common;
use common::*;

use std::net::{Ipv4Addr, SocketAddrV4};

const RPORT: u16 = 40000;
const LPORT: u16 = 8080;

fn remote() -> SocketAddrV4 {
    SocketAddrV4::new(REMOTE, RPORT)
}

fn local() -> SocketAddrV4 {
    SocketAddrV4::new(LOCAL, LPORT)
}

#[test]
fn passive_open_data_both_ways_and_close() {
    let pd = Pd::new("");
    let lfd = listener(&pd, LPORT);
    assert_eq!(lfd, 3, "descriptors start at 3, as in a process");
    pd.set_nonblocking(lfd).unwrap();
    assert_eq!(pd.accept(lfd), Err(libc::EAGAIN), "nothing to accept yet");
    assert_eq!(pd.poll1(lfd, libc::POLLIN, 0).unwrap(), (0, 0));

    // SYN in, SYN-ACK out: addresses, ports, ACK and MSS as the script
    // would expect, stamped with the virtual time it left at.
    let t0 = pd.now();
    pd.inject(&Seg::new(remote(), local(), 1000, 0, SYN).mss(1000).build()).unwrap();
    let synack = pd.expect();
    assert_eq!((synack.src, synack.dst), (local().into(), remote().into()));
    assert_eq!(synack.flags, SYN | ACK);
    assert_eq!(synack.ack, 1001);
    assert!(synack.mss_option().is_some_and(|m| m >= 536), "SYN-ACK carries an MSS: {synack:?}");
    assert!(synack.payload.is_empty());
    assert!(synack.at as u64 >= t0 && (synack.at as u64) < t0 + 1000, "sent when the SYN came");
    let iss = synack.seq;

    // The handshake completes; the listener becomes readable; accept.
    pd.inject(&Seg::new(remote(), local(), 1001, iss + 1, ACK).build()).unwrap();
    let (n, revents) = pd.poll1(lfd, libc::POLLIN, 0).unwrap();
    assert_eq!((n, revents), (1, libc::POLLIN));
    let (fd, peer) = pd.accept(lfd).unwrap();
    assert_eq!(fd, 4);
    assert_eq!(peer, remote());
    pd.set_nonblocking(fd).unwrap();
    assert_eq!(pd.read(fd, 100), Err(libc::EAGAIN));
    assert_eq!(pd.poll1(fd, libc::POLLIN | libc::POLLOUT, 0).unwrap(), (1, libc::POLLOUT));

    // Data in: readable, read back, acknowledged (delayed ACK: the sniff
    // lets virtual time run to the timer).
    pd.inject(&Seg::new(remote(), local(), 1001, iss + 1, ACK | PSH).data(b"hello").build()).unwrap();
    assert_eq!(pd.poll1(fd, libc::POLLIN, 0).unwrap(), (1, libc::POLLIN));
    assert_eq!(pd.read(fd, 100).unwrap(), b"hello");
    let ack = pd.expect();
    assert_eq!(ack.flags & (ACK | SYN | FIN | RST), ACK);
    assert_eq!(ack.ack, 1006);
    assert!(ack.payload.is_empty());

    // Data out: one segment with exactly the bytes written.
    assert_eq!(pd.write(fd, b"world!").unwrap(), 6);
    let data = pd.expect();
    assert_eq!(data.seq, iss + 1);
    assert_eq!(data.ack, 1006);
    assert_eq!(data.payload, b"world!");
    pd.inject(&Seg::new(remote(), local(), 1006, iss + 7, ACK).build()).unwrap();

    // Our close: FIN; the peer's FIN+ACK; our last ACK.
    pd.close(fd).unwrap();
    let fin = pd.expect();
    assert_eq!(fin.flags & FIN, FIN);
    assert_eq!(fin.seq, iss + 7);
    pd.inject(&Seg::new(remote(), local(), 1006, iss + 8, FIN | ACK).build()).unwrap();
    let last = pd.expect();
    assert_eq!(last.flags & (ACK | FIN | RST), ACK);
    assert_eq!((last.seq, last.ack), (iss + 8, 1007));
    assert_eq!(pd.read(fd, 1), Err(libc::EBADF), "closed descriptor");
    pd.close(lfd).unwrap();
}

#[test]
fn peer_close_gives_end_of_stream_and_shutdown_sends_fin() {
    let pd = Pd::new("");
    let lfd = listener(&pd, LPORT);
    let iss = handshake(&pd, RPORT, LPORT, 5000);
    let (fd, _) = pd.accept(lfd).unwrap();
    pd.inject(&Seg::new(remote(), local(), 5001, iss + 1, FIN | ACK).build()).unwrap();
    let ack = pd.expect();
    assert_eq!(ack.ack, 5002, "FIN acknowledged");
    assert_eq!(pd.read(fd, 10).unwrap(), b"", "end of stream");
    pd.shutdown(fd, libc::SHUT_WR).unwrap();
    let fin = pd.expect();
    assert_eq!(fin.flags & FIN, FIN);
    assert_eq!(pd.write(fd, b"x"), Err(libc::EPIPE), "no writes after SHUT_WR");
}

#[test]
fn active_open_nonblocking_connect() {
    let pd = Pd::new("");
    let fd = pd.socket().unwrap();
    pd.setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1).unwrap();
    assert_eq!(pd.getsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY).unwrap(), 1);
    pd.set_nonblocking(fd).unwrap();
    assert_ne!(pd.get_flags(fd).unwrap() & libc::O_NONBLOCK, 0);
    let server = SocketAddrV4::new(REMOTE, 8080);
    assert_eq!(pd.connect(fd, server), Err(libc::EINPROGRESS));
    assert_eq!(pd.connect(fd, server), Err(libc::EALREADY));
    assert_eq!(pd.write(fd, b"early"), Err(libc::EAGAIN), "no data before the handshake");
    let syn = pd.expect();
    assert_eq!(syn.flags, SYN);
    assert!(syn.payload.is_empty());
    assert_eq!(syn.dst, server.into());
    assert_eq!(syn.src.ip(), std::net::IpAddr::V4(LOCAL));
    assert_eq!(pd.poll1(fd, libc::POLLOUT, 0).unwrap(), (0, 0), "not writable while connecting");

    pd.inject(&Seg::new(server, syn.src, 7000, syn.seq + 1, SYN | ACK).mss(1200).build()).unwrap();
    let ack = pd.expect();
    assert_eq!(ack.flags & (SYN | ACK), ACK);
    assert_eq!(ack.ack, 7001);
    assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR).unwrap(), 0);
    assert_eq!(pd.poll1(fd, libc::POLLOUT, 0).unwrap(), (1, libc::POLLOUT));
    assert_eq!(pd.connect(fd, server), Ok(()), "the second connect reports success");
    assert_eq!(pd.connect(fd, server), Err(libc::EISCONN));

    // The peer resets: the error is reported once, then end of stream.
    pd.inject(&Seg::new(server, syn.src, 7001, syn.seq + 1, RST | ACK).build()).unwrap();
    assert_eq!(pd.read(fd, 10), Err(libc::ECONNRESET));
    assert_eq!(pd.read(fd, 10).unwrap(), b"");
    pd.close(fd).unwrap();
}

#[test]
fn refused_connect_reports_econnrefused_through_so_error() {
    let pd = Pd::new("");
    let fd = pd.socket_of(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, libc::IPPROTO_TCP).unwrap();
    let server = SocketAddrV4::new(REMOTE, 9);
    assert_eq!(pd.connect(fd, server), Err(libc::EINPROGRESS));
    let syn = pd.expect();
    pd.inject(&Seg::new(server, syn.src, 0, syn.seq + 1, RST | ACK).build()).unwrap();
    let (n, revents) = pd.poll1(fd, libc::POLLOUT, 0).unwrap();
    assert_eq!(n, 1);
    assert_ne!(revents & libc::POLLERR, 0, "error pending: {revents:#x}");
    assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR).unwrap(), libc::ECONNREFUSED);
    assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR).unwrap(), 0, "reported once");
}

#[test]
fn virtual_clock_starts_fixed_and_moves_on_every_call() {
    let pd = Pd::new("");
    let t1 = pd.now();
    let t2 = pd.now();
    assert_eq!(t1, START_USECS + 1, "starts at the fixed value, one tick per call");
    assert_eq!(t2, t1 + 1);
    pd.usleep(250_000);
    assert_eq!(pd.now(), t2 + 250_000 + 1);

    // tick_usecs and start_usecs come from --so_flags.
    let other = Pd::new("start_usecs=5000000,tick_usecs=10");
    assert_eq!(other.now(), 5_000_010);

    // Timers run in virtual time while packetdrill waits for a packet: an
    // unanswered SYN is sent again one initial RTO (1 s) later.
    let fd = pd.socket().unwrap();
    pd.set_nonblocking(fd).unwrap();
    assert_eq!(pd.connect(fd, SocketAddrV4::new(REMOTE, 8080)), Err(libc::EINPROGRESS));
    let first = pd.expect();
    let again = pd.expect();
    assert_eq!(first.flags, SYN);
    assert_eq!(again.flags, SYN);
    assert_eq!(again.seq, first.seq);
    assert_eq!(again.at - first.at, 1_000_000, "retransmitted exactly at the RTO");
    assert!(pd.now() >= again.at as u64, "the clock moved with the timers");

    // usleep runs the timers it passes, each at its own instant.
    pd.usleep(2_500_000);
    let third = pd.expect();
    assert_eq!(third.at - again.at, 2_000_000, "backed off RTO, sent during the sleep");
}

#[test]
fn blocking_accept_from_a_second_thread_like_packetdrills_syscall_thread() {
    let pd = Pd::new("");
    let lfd = listener(&pd, LPORT);
    std::thread::scope(|s| {
        let blocked = s.spawn(|| pd.accept(lfd));
        let iss = handshake(&pd, RPORT, LPORT, 100);
        let (fd, peer) = blocked.join().expect("no panic").expect("accept returns the connection");
        assert_eq!(peer, remote());
        assert_eq!(pd.write(fd, b"abc").unwrap(), 3);
        let seg = pd.expect();
        assert_eq!((seg.seq, seg.payload.as_slice()), (iss + 1, &b"abc"[..]));
    });
}

#[test]
fn blocking_connect_waits_for_the_handshake() {
    let pd = Pd::new("");
    let fd = pd.socket().unwrap();
    let server = SocketAddrV4::new(REMOTE, 8080);
    std::thread::scope(|s| {
        let blocked = s.spawn(|| pd.connect(fd, server));
        let syn = pd.expect();
        pd.inject(&Seg::new(server, syn.src, 1, syn.seq + 1, SYN | ACK).build()).unwrap();
        assert_eq!(blocked.join().expect("no panic"), Ok(()));
        assert_eq!(pd.expect().flags & (SYN | ACK), ACK);
    });
}

#[test]
fn bind_adopts_packetdrills_random_local_address() {
    let pd = Pd::new("");
    let addr = SocketAddrV4::new(Ipv4Addr::new(192, 168, 77, 9), LPORT);
    let fd = pd.socket().unwrap();
    pd.bind(fd, addr).unwrap();
    pd.listen(fd, 4).unwrap();
    pd.inject(&Seg::new(remote(), addr, 1, 0, SYN).build()).unwrap();
    let synack = pd.expect();
    assert_eq!(synack.src, addr.into());
    assert_eq!(synack.flags, SYN | ACK);
    // Once a socket is in use, the address stays.
    let other = pd.socket().unwrap();
    assert_eq!(pd.bind(other, SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 1), 80)), Err(libc::EADDRNOTAVAIL));
}

#[test]
fn nothing_to_sniff_is_a_zero_length_packet_not_a_hang() {
    let pd = Pd::new("sniff_timeout_usecs=3000000");
    let before = pd.now();
    let (p, at) = pd.sniff();
    assert!(p.is_empty());
    assert_eq!(at as u64, before + 3_000_000, "waited out the sniff timeout in virtual time");
}

/// SO_RCVBUF and SO_SNDBUF on an accepted connection resize it (the wider
/// window is advertised at once), getsockopt reads them back, and
/// TCP_USER_TIMEOUT is taken (negative: EINVAL) and read back.
#[test]
fn buffer_options_on_an_open_connection_take_effect() {
    let pd = Pd::new("");
    let lfd = pd.socket().unwrap();
    pd.setsockopt_int(lfd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4000).unwrap();
    pd.bind(lfd, local()).unwrap();
    pd.listen(lfd, 1).unwrap();
    let iss = handshake(&pd, RPORT, LPORT, 1000);
    let (fd, _) = pd.accept(lfd).unwrap();
    assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF), Ok(4000));
    pd.inject(&Seg::new(remote(), local(), 1001, iss + 1, ACK).data(&[5; 3000]).build()).unwrap();
    let ack = pd.expect();
    assert_eq!((ack.ack, ack.window), (4001, 1000), "the small buffer nearly full: {ack:?}");

    pd.setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 60_000).unwrap();
    let update = pd.expect();
    assert_eq!((update.ack, update.window), (4001, 57_000), "the wider window at once: {update:?}");
    assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF), Ok(60_000));
    pd.setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 1 << 20).unwrap();
    assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF), Ok(1 << 20));

    assert_eq!(pd.getsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), Ok(0));
    pd.setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 1500).unwrap();
    assert_eq!(pd.getsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), Ok(1500));
    assert_eq!(pd.setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, -1), Err(libc::EINVAL));
}

/// TCP_USER_TIMEOUT drops a connection whose data stays unacknowledged
/// that long: a read then fails with ETIMEDOUT.
#[test]
fn user_timeout_fails_a_silent_connection() {
    let pd = Pd::new("");
    let lfd = listener(&pd, LPORT);
    handshake(&pd, RPORT, LPORT, 1000);
    let (fd, _) = pd.accept(lfd).unwrap();
    pd.set_nonblocking(fd).unwrap();
    pd.setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 2000).unwrap();
    assert_eq!(pd.write(fd, b"anyone?").unwrap(), 7);
    pd.usleep(1_900_000);
    assert_eq!(pd.read(fd, 10), Err(libc::EAGAIN), "not yet");
    pd.usleep(200_000);
    assert_eq!(pd.read(fd, 10), Err(libc::ETIMEDOUT));
}

/// SHUT_RD: reads return 0, data queued and data arriving later is
/// acknowledged and dropped with the window kept open, and close sends a
/// FIN rather than a RST over unread data.
#[test]
fn shut_rd_drops_input_and_close_is_orderly() {
    let pd = Pd::new("");
    let lfd = pd.socket().unwrap();
    pd.setsockopt_int(lfd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4000).unwrap();
    pd.bind(lfd, local()).unwrap();
    pd.listen(lfd, 1).unwrap();
    let iss = handshake(&pd, RPORT, LPORT, 1000);
    let (fd, _) = pd.accept(lfd).unwrap();
    pd.inject(&Seg::new(remote(), local(), 1001, iss + 1, ACK).data(&[1; 3000]).build()).unwrap();
    assert_eq!(pd.expect().window, 1000);
    pd.shutdown(fd, libc::SHUT_RD).unwrap();
    let update = pd.expect();
    assert_eq!((update.ack, update.window), (4001, 4000), "the dropped bytes' room offered again");
    assert_eq!(pd.read(fd, 100).unwrap(), b"");
    let mut seq = 4001;
    for _ in 0..5 {
        pd.inject(&Seg::new(remote(), local(), seq, iss + 1, ACK).data(&[2; 3000]).build()).unwrap();
        seq += 3000;
        let ack = pd.expect();
        assert_eq!(ack.ack, seq, "acknowledged");
        assert!(ack.window >= 3000, "the window stays open: {ack:?}");
    }
    assert_eq!(pd.read(fd, 100).unwrap(), b"");
    pd.close(fd).unwrap();
    let fin = pd.expect();
    assert_eq!(fin.flags & (FIN | RST), FIN, "{fin:?}");
}
