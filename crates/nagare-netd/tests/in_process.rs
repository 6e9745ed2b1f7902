//! netd driven in a thread of the test (`support`), inline and with a
//! driver thread: clients of one netd talk to each other, a client that
//! dies is cleaned up after, bad requests get their errno, the report
//! tells the truth, and frames cross a simulated link to a peer.

mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare_netd::{encode_addr, Op, Placement};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4};
use std::time::Duration;
use support::{
    stat_value, wait_for_report, NetdThread, RawClient, Wire, BUFFERS, ECHO_PORT, LIMIT, NETD_ADDR, PEER_ADDR,
    RECEIVE_POOL, RING_SLOTS,
};

const PLACEMENTS: [Placement; 2] = [Placement::Inline, Placement::Single];

fn at(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(NETD_ADDR, port)
}

/// Two clients of one netd, each with a UDP socket: a datagram goes one
/// way and its answer the other, byte for byte, each from the sender's
/// address.
#[test]
fn a_datagram_goes_between_two_clients_and_back() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::Loopback);
        let (one, two) = (netd.connect(), netd.connect());
        let a = UdpSocket::bind_via(&one, at(0)).expect("bind a");
        let b = UdpSocket::bind_via(&two, at(9300)).expect("bind b");
        a.set_read_timeout(Some(LIMIT)).unwrap();
        b.set_read_timeout(Some(LIMIT)).unwrap();
        let question: Vec<u8> = (0..1200u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(a.send_to(&question, at(9300)).expect("send"), question.len());
        let mut got = [0u8; 2048];
        let (n, from) = b.recv_from(&mut got).expect("b receives");
        assert_eq!(&got[..n], &question[..], "{placement:?}");
        assert_eq!(from, a.local_addr().unwrap(), "{placement:?}");
        b.send_to(b"answer", from).expect("answer");
        let (n, from) = a.recv_from(&mut got).expect("a receives the answer");
        assert_eq!(&got[..n], b"answer", "{placement:?}");
        assert_eq!(from, SocketAddr::V4(at(9300)), "{placement:?}");
        drop((a, b, one, two));
        let done = netd.stop();
        assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
        assert_eq!(done.clients, 0);
    }
}

/// Two clients of one netd: one listens and accepts, the other connects;
/// 256 KiB go one way and come back, byte for byte; the connecting side
/// shuts down, the accepting side reads the end of the stream, and both
/// close.
#[test]
fn a_stream_connects_carries_bytes_both_ways_and_closes() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::Loopback);
        let (server_side, client_side) = (netd.connect(), netd.connect());
        let listener = TcpListener::bind_via(&server_side, at(9400)).expect("listen");
        let server = std::thread::spawn(move || -> std::io::Result<(Vec<u8>, SocketAddr)> {
            let (mut s, peer) = listener.accept()?;
            s.set_read_timeout(Some(LIMIT))?;
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                s.write_all(&buf[..n])?;
            }
            s.shutdown(Shutdown::Write)?;
            Ok((got, peer))
        });
        let mut c = TcpStream::connect_timeout_via(&client_side, &SocketAddr::V4(at(9400)), LIMIT).expect("connect");
        c.set_read_timeout(Some(LIMIT)).unwrap();
        let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
        let mut echoed = Vec::new();
        for chunk in data.chunks(16 * 1024) {
            c.write_all(chunk).expect("write");
            // Each chunk back before the next, so that neither side's
            // buffers fill while the other writes.
            let mut back = vec![0u8; chunk.len()];
            c.read_exact(&mut back).expect("read the echo");
            echoed.extend_from_slice(&back);
        }
        c.shutdown(Shutdown::Write).expect("shutdown");
        let mut rest = [0u8; 16];
        assert_eq!(c.read(&mut rest).expect("the end of the stream"), 0, "{placement:?}");
        let (got, peer) = server.join().expect("the accepting thread").expect("the accepting side");
        assert_eq!(got.len(), data.len(), "{placement:?}");
        assert!(got == data, "the accepting side got other bytes ({placement:?})");
        assert!(echoed == data, "the connecting side got other bytes back ({placement:?})");
        assert_eq!(peer, c.local_addr().unwrap(), "{placement:?}");
        drop(c);
        // Both sockets are closed: the stat shows none left.
        let report = wait_for_report(&client_side, "sockets left after both closed", |r| {
            r.lines().filter(|l| l.starts_with("client ")).all(|l| stat_value(l, " sockets ") == Some(0))
        });
        assert_eq!(stat_value(&report, " clients "), Some(2), "{report}");
        drop((server_side, client_side));
        let done = netd.stop();
        assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
    }
}

/// A stream closed with a zero linger time resets its connection (its
/// peer reads `ECONNRESET`), as Linux's close with `SO_LINGER` so set;
/// with any other time it sends its FIN (the peer reads the end).
#[test]
fn a_zero_linger_time_makes_close_reset() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server, client) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server, at(9520)).expect("listen");
    for (linger, reset) in [(Some(Duration::ZERO), true), (Some(Duration::from_secs(5)), false), (None, false)] {
        let stream = TcpStream::connect_via(&client, at(9520)).expect("connect");
        let (mut peer, _) = listener.accept().expect("accept");
        peer.set_read_timeout(Some(LIMIT)).unwrap();
        stream.set_linger(linger).unwrap();
        drop(stream);
        let mut buf = [0u8; 16];
        let r = peer.read(&mut buf);
        let was_reset = matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
        assert_eq!(was_reset, reset, "linger {linger:?}: {r:?}");
        if !reset {
            assert_eq!(r.ok(), Some(0), "linger {linger:?}: the end");
        }
    }
}

/// A client that dies with a send posted that netd had not taken yet
/// (its completion ring full of answers it never took, so netd could
/// not take more): netd runs it as it lets the client go and ends the connection as an exit closes it, so the peer reads
/// every byte and then the end, as a process's last write before it
/// exits reaches its peer on Linux. A connection with data the dead
/// client never read is reset instead, and so is one it gave a zero
/// linger time.
#[test]
fn a_dead_clients_last_send_goes_out_before_its_fin() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::Loopback);
        let good = netd.connect();
        let listener = TcpListener::bind_via(&good, at(9510)).expect("listen");
        let mut doomed = RawClient::connect(&netd);
        let connect = |doomed: &mut RawClient| {
            let mut connect = doomed.request(Op::Connect);
            connect.aux[0] = encode_addr(at(9510));
            let id = doomed.call(connect).result().expect("connect") as u32;
            let (peer, _) = listener.accept().expect("accept");
            peer.set_read_timeout(Some(LIMIT)).unwrap();
            (id, peer)
        };
        let (written, mut reader) = connect(&mut doomed);
        let (_, mut unread) = connect(&mut doomed);
        unread.write_all(b"never read").unwrap();
        let (lingers, mut reset_by_option) = connect(&mut doomed);
        let mut option = doomed.request(Op::SetOption);
        option.socket = lingers;
        option.aux = [nagare_request::SockOption::ResetOnClose as u64, 1, 0, 0];
        assert_eq!(doomed.call(option).result(), Ok(1), "{placement:?}");
        // Answers it does not take fill its completion ring, so netd takes
        // no more of its requests (none would have room to complete): the
        // send waits on the ring, whatever netd does meanwhile.
        let room = doomed.completion_capacity();
        for _ in 0..room {
            let nop = doomed.request(Op::Nop);
            doomed.post(nop.encode());
        }
        let deadline = std::time::Instant::now() + LIMIT;
        while doomed.completions_waiting() < room && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(doomed.completions_waiting(), room, "{placement:?}: the completion ring never filled");
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let mut send = doomed.request(Op::Send);
        send.socket = written;
        send.piece = Some(doomed.give(&data, data.len() as u32));
        doomed.post_quietly(send.encode());
        drop(doomed);

        let mut got = Vec::new();
        let r = reader.read_to_end(&mut got);
        assert!(r.is_ok(), "{placement:?}: {r:?} after {} bytes", got.len());
        assert_eq!(got, data, "{placement:?}");
        let mut buf = [0u8; 16];
        let r = unread.read(&mut buf);
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{placement:?}: the connection with unread data ended with {r:?}"
        );
        let r = reset_by_option.read(&mut buf);
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{placement:?}: the connection with a zero linger time ended with {r:?}"
        );
        let report = wait_for_report(&good, "the dead client let go", |r| stat_value(r, " clients ") == Some(1));
        assert_eq!(stat_value(&report, "netd buffers_leaked "), Some(0), "{report}");
        assert_eq!(stat_value(&report, "netd last_requests "), Some(1), "the send ran as netd let go:\n{report}");
        drop((reader, unread, reset_by_option, listener));
        wait_for_report(&good, "every byte charged comes back", |r| stat_value(r, "memory charged ") == Some(0));
        drop(good);
        let done = netd.stop();
        assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
    }
}

/// A client that dies with sends waiting for room in its connection's
/// send buffer (its peer reads nothing, so the buffer is full) and its
/// close behind them: its program's writes had returned, so netd makes
/// room for them as it lets the client go, and the peer reads every byte
/// and then the end, as a process's queued bytes reach their peer after
/// its exit on Linux.
#[test]
fn a_dead_clients_sends_waiting_for_room_go_out_before_its_fin() {
    for placement in PLACEMENTS {
        let (r, got, written) = die_with_sends_waiting(placement, None);
        assert!(r.is_ok(), "{placement:?}: {r:?} after {} of {} bytes", got.len(), written.len());
        assert!(got == written, "{placement:?}: {} bytes read of {} written", got.len(), written.len());
    }
}

/// As above, with a budget that has no room for the sends that wait
/// (40 KiB: the connection's two 16 KiB buffers and half again): the
/// connection is reset, and the peer learns that what was written did
/// not all arrive.
#[test]
fn a_dead_clients_sends_without_room_in_its_budget_reset_the_connection() {
    for placement in PLACEMENTS {
        let (r, got, written) = die_with_sends_waiting(placement, Some(40 * 1024));
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{placement:?}: {r:?} after {} of {} bytes",
            got.len(),
            written.len()
        );
    }
}

/// A raw client of a netd (each client's budget `client_memory`, or the
/// default) connects to a listener of another, fills its peer's receive
/// buffer and its own send buffer with lent sends, leaves two more and
/// its close waiting, and dies; once netd let it go, the peer reads to
/// the end. What the read gave, the bytes read, and the bytes written.
fn die_with_sends_waiting(
    placement: Placement,
    client_memory: Option<usize>,
) -> (std::io::Result<usize>, Vec<u8>, Vec<u8>) {
    // Between two clients of one netd the receiver's queue holds the
    // sender's buffers themselves: enough for a full window.
    let netd = NetdThread::start_configured(placement, Wire::Loopback, move |c| {
        c.ring_slots = RING_SLOTS;
        c.buffers = 128;
        if let Some(bytes) = client_memory {
            c.client_memory = bytes;
        }
    });
    let good = netd.connect();
    let listener = TcpListener::bind_via(&good, at(9530)).expect("listen");
    let mut doomed = RawClient::connect(&netd);
    let mut connect = doomed.request(Op::Connect);
    connect.aux[0] = encode_addr(at(9530));
    let id = doomed.call(connect).result().expect("connect") as u32;
    let (mut peer, _) = listener.accept().expect("accept");
    peer.set_read_timeout(Some(LIMIT)).unwrap();
    // Small buffers both ways, not autotuned.
    peer.set_recv_buffer_size(65536).unwrap();
    let mut option = doomed.request(Op::SetOption);
    option.socket = id;
    option.aux = [nagare_request::SockOption::SendBuffer as u64, 16384, 0, 0];
    doomed.call(option).result().expect("a small send buffer");
    // Lent sends, each whole or waiting, until the peer's receive buffer
    // is full (but for less than a segment) and a send waits, for good
    // (nothing reads); then one more.
    let size = doomed.pool.buffer_size().min(8192);
    let stuck = |r: &str| {
        let line = |end: &str| {
            r.lines().find(|l| l.starts_with("socket ") && l.contains(" tcp ") && l.contains(end)).unwrap_or("")
        };
        // The peer's line has the listener's port as its local end, the
        // dead client's as its remote end.
        let fill = line(":9530 remote").split(" fill ").nth(1).and_then(|f| f.split('%').next()?.parse::<u32>().ok());
        fill.is_some_and(|f| f >= 90) && stat_value(line(":9530 state"), " waiting ").is_some_and(|n| n > 0)
    };
    let mut written = Vec::new();
    let mut full = false;
    for k in 0..400u32 {
        // Sends acknowledged give their buffers back.
        while doomed.completions_waiting() > 0 {
            let (_, c) = doomed.next_completion();
            assert!(c.result().is_ok(), "{placement:?}: {c:?}");
        }
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + k * 13) as u8).collect();
        let mut send = doomed.request(Op::Send);
        send.socket = id;
        send.flags |= nagare_request::LEND;
        send.piece = Some(doomed.give(&data, size));
        doomed.post(send.encode());
        written.extend_from_slice(&data);
        if full {
            break;
        }
        let deadline = std::time::Instant::now() + Duration::from_millis(50);
        while !full && std::time::Instant::now() < deadline {
            full = stuck(&good.stat().expect("stat"));
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(full, "{placement:?}: the peer's buffer never filled:\n{}", good.stat().expect("stat"));
    // Both sends wait when the client goes, and its close behind them (a
    // program's write, close and exit).
    let mut close = doomed.request(Op::Close);
    close.socket = id;
    doomed.post(close.encode());
    wait_for_report(&good, "the last send and the close did not wait", |r| {
        let line = r.lines().find(|l| l.starts_with("socket ") && l.contains(":9530 state")).unwrap_or("");
        stat_value(line, " waiting ") == Some(3)
    });
    drop(doomed);
    // The peer reads only once netd let the client go.
    let report = wait_for_report(&good, "the dead client let go", |r| stat_value(r, " clients ") == Some(1));
    assert_eq!(stat_value(&report, "netd buffers_leaked "), Some(0), "{report}");

    let mut got = Vec::new();
    let r = peer.read_to_end(&mut got);
    drop((peer, listener));
    wait_for_report(&good, "every byte charged comes back", |r| stat_value(r, "memory charged ") == Some(0));
    drop(good);
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
    (r, got, written)
}

/// A client binds a UDP port, listens on a TCP port, connects to it, and
/// leaves a receive waiting with one of its buffers; then it dies (its
/// connection drops, nothing closed). netd counts it gone, closes its 3
/// sockets, takes back every buffer it held (none leaked) and, once its
/// closed connection is gone too, every byte its sockets were charged;
/// the ports can be bound again, and the engine's pool is back where it
/// was.
#[test]
fn a_client_that_dies_leaves_nothing_behind() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::Loopback);
        let good = netd.connect();
        let baseline = stat_value(&good.stat().unwrap(), "engine buffers in_use ").expect("engine buffers");

        let mut doomed = RawClient::connect(&netd);
        let ours = BUFFERS - if placement == Placement::Inline { 0 } else { RECEIVE_POOL };
        assert_eq!(doomed.buffers_held(), ours, "{placement:?}");
        let mut bind = doomed.request(Op::UdpBind);
        bind.aux[0] = encode_addr(at(9500));
        let udp = doomed.call(bind).result().expect("bind") as u32;
        let mut listen = doomed.request(Op::Listen);
        listen.aux[0] = encode_addr(at(9501));
        listen.aux[1] = 4;
        doomed.call(listen).result().expect("listen");
        let mut connect = doomed.request(Op::Connect);
        connect.aux[0] = encode_addr(at(9501));
        doomed.call(connect).result().expect("connect");
        let mut recv = doomed.request(Op::RecvFrom);
        recv.socket = udp;
        recv.piece = Some(doomed.give(&[], 2048));
        doomed.post(recv.encode());
        let report = wait_for_report(&good, "the doomed client's receive did not wait", |r| {
            r.lines().any(|l| {
                l.starts_with("client ")
                    && stat_value(l, " sockets ") == Some(3)
                    && stat_value(l, " pending ") == Some(1)
            })
        });
        // Its connection's buffers and its UDP socket's receive queue (as
        // PacketFlow's memory manager starts it).
        assert_eq!(stat_value(&report, "memory charged "), Some(2 * 262144 + 65536), "{report}");
        drop(doomed);

        let report = wait_for_report(&good, "netd did not let the dead client go", |r| {
            stat_value(r, " clients ") == Some(1) && stat_value(r, "netd clients_gone ") == Some(1)
        });
        assert_eq!(stat_value(&report, "netd sockets_reclaimed "), Some(3), "{report}");
        // Its buffers: every one the client held, and the one its waiting
        // receive had given netd.
        assert_eq!(stat_value(&report, "netd buffers_reclaimed "), Some(u64::from(ours)), "{report}");
        assert_eq!(stat_value(&report, "netd buffers_leaked "), Some(0), "{report}");
        // Its connection, closed as its exit closes it, is charged to netd
        // until the reset from its listener's close ends it.
        wait_for_report(&good, "every byte charged comes back", |r| stat_value(r, "memory charged ") == Some(0));
        let udp = UdpSocket::bind_via(&good, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9500));
        assert!(udp.is_ok(), "UDP port 9500 still taken: {:?}", udp.err());
        let tcp = TcpListener::bind_via(&good, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9501));
        assert!(tcp.is_ok(), "TCP port 9501 still taken: {:?}", tcp.err());
        wait_for_report(&good, "the engine's pool holds what the dead client left", |r| {
            stat_value(r, "engine buffers in_use ").is_some_and(|n| n <= baseline)
        });
        drop((udp, tcp));
        // Stopped with the well-behaved client still connected: only the
        // dead one is counted gone.
        let done = netd.stop();
        drop(good);
        assert_eq!(done.stats.clients_gone, 1, "{:?}", done.stats);
        assert_eq!(done.clients, 0, "sessions left after netd stopped");
        assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
        assert!(done.engine_in_use as u64 <= baseline, "engine buffers in use {} > {baseline}", done.engine_in_use);
    }
}

/// Requests that name no socket of the client, a socket of the wrong kind,
/// a buffer the client did not hand over, a port in use, or an op that
/// does not exist: each gets its errno (and its buffer back), the client
/// stays connected, and netd goes on serving it and others.
#[test]
fn a_bad_request_gets_its_errno_and_netd_keeps_serving() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::Loopback);
        let mut raw = RawClient::connect(&netd);
        let held = raw.buffers_held();

        let mut recv = raw.request(Op::RecvFrom);
        recv.socket = 4242;
        recv.piece = Some(raw.give(&[], 512));
        let (c, _) = raw.call_raw(recv.encode());
        assert_eq!(c.result(), Err(libc::EBADF), "a receive on no socket");
        assert!(c.piece.is_some(), "the buffer comes back with the refusal");
        let mut close = raw.request(Op::Close);
        close.socket = 4242;
        assert_eq!(raw.call(close).result(), Err(libc::EBADF), "a close of no socket");

        let mut bind = raw.request(Op::UdpBind);
        bind.aux[0] = encode_addr(at(9600));
        let udp = raw.call(bind).result().expect("bind") as u32;
        let mut again = raw.request(Op::UdpBind);
        again.aux[0] = encode_addr(at(9600));
        assert_eq!(raw.call(again).result(), Err(libc::EADDRINUSE), "a second bind to one port");
        for (op, errno) in [
            (Op::Recv, libc::EOPNOTSUPP),
            (Op::Shutdown, libc::EOPNOTSUPP),
            (Op::Accept, libc::EINVAL),
            (Op::EchoRecv, libc::EOPNOTSUPP),
            (Op::SetOption, libc::EOPNOTSUPP),
            (Op::GetOption, libc::EOPNOTSUPP),
        ] {
            let mut r = raw.request(op);
            r.socket = udp;
            match op {
                Op::Recv => r.piece = Some(raw.give(&[], 512)),
                Op::Shutdown => r.aux[0] = nagare_request::SHUT_WRITE,
                Op::SetOption => r.aux = [nagare_request::SockOption::SendBuffer as u64, 4096, 0, 0],
                Op::GetOption => r.aux[0] = nagare_request::SockOption::SendBuffer as u64,
                _ => {}
            }
            assert_eq!(raw.call(r).result(), Err(errno), "{op:?} on a UDP socket");
        }
        // Buffers the client cannot hand over: one past its region, and an
        // extent past a buffer's end.
        let size = nagare_netd::NetdConfig::default().buffer_size;
        for (buffer, offset, len) in [(BUFFERS + 5, 0, 4), (0, size - 384, 1000)] {
            let mut send = raw.request(Op::SendTo);
            send.socket = udp;
            send.aux[0] = encode_addr(at(9600));
            send.piece = Some(nagare_netd::Piece { buffer, offset, len });
            assert_eq!(raw.call(send).result(), Err(libc::EFAULT), "buffer {buffer} at {offset} for {len}");
        }
        // An op that does not exist, as a raw descriptor.
        let mut junk = raw.request(Op::Nop).encode();
        junk.kind = 0x7777;
        let (c, _) = raw.call_raw(junk);
        assert_eq!(c.result(), Err(libc::EOPNOTSUPP), "an unknown op");

        // The client is served still: a datagram to itself.
        let mut send = raw.request(Op::SendTo);
        send.socket = udp;
        send.aux[0] = encode_addr(at(9600));
        send.piece = Some(raw.give(b"still here", 10));
        assert_eq!(raw.call(send).result(), Ok(10));
        let mut recv = raw.request(Op::RecvFrom);
        recv.socket = udp;
        recv.piece = Some(raw.give(&[], 512));
        let (c, bytes) = raw.call_raw(recv.encode());
        assert_eq!(c.result(), Ok(10));
        assert_eq!(bytes, b"still here");
        assert_eq!(raw.buffers_held(), held, "every buffer came back");
        // And so is another client, and the report counts what was bad.
        let other = netd.connect();
        let report = other.stat().expect("stat");
        assert_eq!(stat_value(&report, "netd bad_descriptors "), Some(1), "{report}");
        assert_eq!(stat_value(&report, "netd bad_buffers "), Some(2), "{report}");
        assert_eq!(stat_value(&report, "netd clients_broken "), Some(0), "{report}");
        let line = report.lines().find(|l| l.contains(" sockets 1 ")).expect("the raw client's line");
        assert_eq!(stat_value(line, " bad "), Some(3), "{line}");
        assert!(netd.running());
        drop((raw, other));
        netd.stop();
    }
}

/// The report: netd's placement and link, one line per client with its
/// sockets by kind, and the counters.
#[test]
fn the_report_shows_clients_sockets_and_counters() {
    for placement in PLACEMENTS {
        let netd = NetdThread::start(placement, Wire::Loopback);
        let client = netd.connect();
        let _udp = UdpSocket::bind_via(&client, at(9700)).expect("bind");
        let _listener = TcpListener::bind_via(&client, at(9701)).expect("listen");
        let report = client.stat().expect("stat");
        let name = if placement == Placement::Inline { "inline" } else { "single" };
        assert!(
            report.starts_with(&format!("netd pid {} ", std::process::id())),
            "netd runs in this process:\n{report}"
        );
        assert!(report.contains(&format!(" placement {name} link netd test clients 1\n")), "{report}");
        let line = report.lines().find(|l| l.starts_with("client ")).expect("a client line");
        // Waiting: the stat, the receives the UDP socket keeps posted and
        // the listener's accept posted ahead.
        let pending = 1 + nagare::RECV_AHEAD + 1;
        assert!(line.contains(&format!(" sockets 2 tcp 0 listeners 1 udp 1 echo 0 pending {pending} ")), "{line}");
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        assert_eq!(stat_value(line, " uid "), Some(u64::from(uid)), "{line}");
        // The bind, the posted receives, the listen, its accept and this
        // stat.
        assert_eq!(stat_value(&report, "netd requests "), Some(3 + pending as u64 - 1), "{report}");
        assert_eq!(report.contains("\ndriver pid "), placement == Placement::Single, "{report}");
        assert!(report.contains("\nengine buffers in_use "), "{report}");
    }
}

/// netd's frames cross a simulated link (ARP, then IPv4) to a peer engine
/// that echoes on port 7: a datagram and a stream come back intact, so
/// the loop's device receive and transmit carry both ways.
#[test]
fn frames_cross_a_simulated_link_to_a_peer_and_back() {
    let netd = NetdThread::start(Placement::Inline, Wire::PeerLink);
    let client = netd.connect();
    let echo = SocketAddrV4::new(PEER_ADDR, ECHO_PORT);
    let udp = UdpSocket::bind_via(&client, at(0)).expect("bind");
    udp.set_read_timeout(Some(LIMIT)).unwrap();
    let datagram: Vec<u8> = (0..3000u32).map(|i| (i % 253) as u8).collect();
    udp.send_to(&datagram, echo).expect("send");
    let mut got = vec![0u8; 4096];
    let (n, from) = udp.recv_from(&mut got).expect("the echo");
    assert_eq!(&got[..n], &datagram[..], "a fragmented datagram comes back whole");
    assert_eq!(from, SocketAddr::V4(echo));

    let mut stream = TcpStream::connect_timeout_via(&client, &SocketAddr::V4(echo), LIMIT).expect("connect");
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 249) as u8).collect();
    stream.write_all(&data).expect("write");
    let mut back = vec![0u8; data.len()];
    stream.read_exact(&mut back).expect("the echoed stream");
    assert!(back == data, "the stream came back changed");
    stream.shutdown(Shutdown::Write).unwrap();
    let mut rest = [0u8; 16];
    assert_eq!(stream.read(&mut rest).expect("the end of the stream"), 0);

    let report = client.stat().unwrap();
    assert!(stat_value(&report, "engine rx_frames ").is_some_and(|n| n > 40), "{report}");
    drop((udp, stream, client));
    let done = netd.stop();
    assert_eq!(done.stats.device_errors, 0, "{:?}", done.stats);
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// A connection's options through netd: the buffers and the user timeout
/// set on a connected and an accepted socket read back as set; a read
/// shutdown makes reads return 0 and drops what arrives (acknowledged: a
/// writer sends far more than the reader's small buffer without waiting),
/// and the reader's close afterwards is a FIN, not a reset.
#[test]
fn connection_options_and_a_read_shutdown_reach_the_engine() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (server_side, client_side) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&server_side, at(9700)).expect("listen");
    let mut c = TcpStream::connect_timeout_via(&client_side, &SocketAddr::V4(at(9700)), LIMIT).expect("connect");
    let (mut s, _) = listener.accept().expect("accept");
    c.set_send_buffer_size(1 << 20).unwrap();
    assert_eq!(c.send_buffer_size().unwrap(), 1 << 20);
    c.set_recv_buffer_size(3 << 20).unwrap();
    assert_eq!(c.recv_buffer_size().unwrap(), 3 << 20);
    assert_eq!(c.user_timeout().unwrap(), None);
    c.set_user_timeout(Some(std::time::Duration::from_millis(7500))).unwrap();
    assert_eq!(c.user_timeout().unwrap(), Some(std::time::Duration::from_millis(7500)));
    c.set_user_timeout(None).unwrap();
    assert_eq!(c.user_timeout().unwrap(), None);
    c.set_nodelay(true).unwrap();
    assert!(c.nodelay().unwrap());
    assert!(c.set_recv_buffer_size(0).is_err(), "a zero buffer is refused");

    s.set_recv_buffer_size(4096).unwrap();
    assert_eq!(s.recv_buffer_size().unwrap(), 4096);
    s.set_read_timeout(Some(LIMIT)).unwrap();
    c.write_all(b"before").unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).expect("the first bytes");
    assert_eq!(&buf[..n], b"before");
    c.write_all(b"queued, never read").unwrap();
    s.shutdown(Shutdown::Read).unwrap();
    assert_eq!(s.read(&mut buf).expect("a read after the shutdown"), 0);
    // Far more than the reader's buffer and the writer's: only data that
    // is acknowledged and dropped lets it all through in time.
    c.set_write_timeout(Some(LIMIT)).unwrap();
    let lots = vec![7u8; 3 << 20];
    c.write_all(&lots).expect("the writer is never held up by the shut reader");
    assert_eq!(s.read(&mut buf).unwrap(), 0);
    drop(s);
    c.set_read_timeout(Some(LIMIT)).unwrap();
    assert_eq!(c.read(&mut buf).expect("an orderly end, not a reset"), 0);
    drop((c, listener, server_side, client_side));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// A connect to an address on the link that nobody has fails once ARP
/// gives up, with `EHOSTUNREACH` (`HostUnreachable`), in seconds rather
/// than after the SYN retries; a second try at once fails at once.
#[test]
fn a_connect_to_an_unused_address_on_the_link_is_host_unreachable() {
    let netd = NetdThread::start(Placement::Inline, Wire::PeerLink);
    let client = netd.connect();
    let nobody = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 99), 80));
    let t0 = std::time::Instant::now();
    let e = TcpStream::connect_timeout_via(&client, &nobody, 4 * LIMIT).err().expect("nobody answers");
    let took = t0.elapsed();
    assert_eq!(e.raw_os_error(), Some(libc::EHOSTUNREACH), "{e}");
    assert_eq!(e.kind(), std::io::ErrorKind::HostUnreachable);
    assert!(took < 2 * LIMIT, "took {took:?}");
    let t1 = std::time::Instant::now();
    let e = TcpStream::connect_timeout_via(&client, &nobody, 4 * LIMIT).err().expect("still nobody");
    assert_eq!(e.kind(), std::io::ErrorKind::HostUnreachable);
    assert!(t1.elapsed() < std::time::Duration::from_secs(1), "the failure was remembered: {:?}", t1.elapsed());
    drop(client);
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// Whether process `pid`'s effective capabilities hold
/// `CAP_NET_BIND_SERVICE` (`None`: its status could not be read).
fn may_bind_privileged(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok().map(|caps| caps & (1 << 10) != 0)
}

/// A session that moves to a child without `CAP_NET_BIND_SERVICE` (a
/// forked child that dropped it) loses the right to bind a port below
/// the unprivileged start, which the process that connected had.
#[test]
fn a_session_moved_to_a_child_without_the_capability_binds_no_privileged_port() {
    let name = "a_session_moved_to_a_child_without_the_capability_binds_no_privileged_port";
    if may_bind_privileged(std::process::id()) != Some(true) {
        eprintln!("*** SKIPPED {name}: this process lacks CAP_NET_BIND_SERVICE (run the tests as root) ***");
        return;
    }
    let spawned =
        std::process::Command::new("setpriv").args(["--bounding-set", "-net_bind_service", "sleep", "30"]).spawn();
    let Ok(child) = spawned else {
        eprintln!("*** SKIPPED {name}: setpriv (util-linux) cannot be run ***");
        return;
    };
    // Ended by its pid however the test ends.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Reaped(child);
    let pid = child.0.id();
    // setpriv drops the capability, then runs sleep in the same process.
    let deadline = std::time::Instant::now() + LIMIT;
    while may_bind_privileged(pid) != Some(false) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if may_bind_privileged(pid) != Some(false) {
        // Kept through the inheritable or ambient set (some containers).
        eprintln!("*** SKIPPED {name}: setpriv could not drop CAP_NET_BIND_SERVICE here ***");
        return;
    }
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let mut raw = RawClient::connect(&netd);
    let listen = |raw: &mut RawClient, port: u16| {
        let mut r = raw.request(Op::Listen);
        r.aux[0] = encode_addr(at(port));
        r.aux[1] = 4;
        raw.call(r).result()
    };
    let before = listen(&mut raw, 81);
    let mut moved = raw.request(Op::Pid);
    moved.aux[0] = u64::from(pid);
    let moved = raw.call(moved).result();
    let after = listen(&mut raw, 82);
    let unprivileged = listen(&mut raw, 8082);
    drop(child);
    assert!(before.is_ok(), "{before:?}");
    assert_eq!(moved, Ok(0));
    assert_eq!(after, Err(libc::EACCES));
    assert!(unprivileged.is_ok(), "{unprivileged:?}");
}
