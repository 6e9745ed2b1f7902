//! What netd lets each client make its engine hold (`docs/netd.md`,
//! "Memory accounting"): a client's later connections start at the floor
//! and grow with use, and past its budget get `ENOBUFS`, while another
//! goes on; closes past the orphan cap reset;
//! the connection limit holds for connects and SYNs; a client killed past
//! its budget gives every byte back.

mod support;

use nagare::net::TcpStream;
use nagare_netd::{encode_addr, Completion, NetdConfig, Op, Placement};
use nagare_request::{SockOption, CLOSE_RESET, NONBLOCK};
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};
use support::{stat_value, wait_for_report, NetdThread, RawClient, Wire, ECHO_PORT, LIMIT, NETD_ADDR, PEER_ADDR};

/// A connection's send and receive buffers as netd starts them.
const FULL: u64 = 256 * 1024;
/// Each buffer of a connection started past its client's first ones.
const FLOOR: u64 = 16 * 1024;
/// Bytes of one send.
const CHUNK: usize = 64 * 1024;

fn echo() -> SocketAddrV4 {
    SocketAddrV4::new(PEER_ADDR, ECHO_PORT)
}

fn at(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(NETD_ADDR, port)
}

fn connect(raw: &mut RawClient, to: SocketAddrV4, nonblocking: bool) -> Completion {
    let mut r = raw.request(Op::Connect);
    r.aux[0] = encode_addr(to);
    if nonblocking {
        r.flags |= NONBLOCK;
    }
    raw.call(r)
}

fn listen(raw: &mut RawClient, port: u16) -> u32 {
    let mut r = raw.request(Op::Listen);
    r.aux[0] = encode_addr(at(port));
    r.aux[1] = 8;
    raw.call(r).result().expect("listen") as u32
}

fn accept(raw: &mut RawClient, listener: u32) -> u32 {
    let mut r = raw.request(Op::Accept);
    r.socket = listener;
    raw.call(r).result().expect("accept") as u32
}

/// Sends copied chunks on `socket` without waiting until `target` bytes
/// are taken, trying again a millisecond later while none fits (at most
/// [`LIMIT`]); the bytes taken.
fn fill(raw: &mut RawClient, socket: u32, target: u64) -> u64 {
    let data = vec![0x5a; CHUNK];
    let deadline = Instant::now() + LIMIT;
    let mut taken = 0;
    while taken < target && Instant::now() < deadline {
        let mut r = raw.request(Op::Send);
        r.socket = socket;
        r.flags |= NONBLOCK;
        r.piece = Some(raw.give(&data, CHUNK as u32));
        match raw.call(r).result() {
            Ok(n) => taken += n,
            Err(libc::EAGAIN) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("a send failed with errno {e}"),
        }
    }
    taken
}

/// `SO_SNDBUF` of connection `socket` set to `bytes`: the size in force.
fn set_send_buffer(raw: &mut RawClient, socket: u32, bytes: u64) -> Result<u64, i32> {
    let mut r = raw.request(Op::SetOption);
    r.socket = socket;
    r.aux[0] = SockOption::SendBuffer as u64;
    r.aux[1] = bytes;
    raw.call(r).result()
}

fn close(raw: &mut RawClient, socket: u32, reset: bool) {
    let mut r = raw.request(Op::Close);
    r.socket = socket;
    r.aux[0] = if reset { CLOSE_RESET } else { 0 };
    raw.call(r).result().expect("close");
}

/// A receive on `socket` that does not wait: the bytes, or the errno.
fn recv_now(raw: &mut RawClient, socket: u32) -> Result<u64, i32> {
    let mut r = raw.request(Op::Recv);
    r.socket = socket;
    r.flags |= NONBLOCK;
    r.piece = Some(raw.give(&[], CHUNK as u32));
    raw.call(r).result()
}

/// The report's line of client `id`.
fn client_line(report: &str, id: u64) -> &str {
    let head = format!("client {id} ");
    report.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no line for client {id}:\n{report}"))
}

/// The line of socket `id` of client `client`.
fn socket_line(report: &str, client: u64, id: u32) -> &str {
    let head = format!("socket {id} client {client} ");
    report.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no line for socket {id}:\n{report}"))
}

/// 1 MiB through an echo on a fresh connection of `session`, byte for
/// byte; every read waits at most `LIMIT`.
fn transfer(session: &nagare::Session) {
    let mut s = TcpStream::connect_timeout_via(session, &SocketAddr::V4(echo()), LIMIT).expect("connect");
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let data: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 247) as u8).collect();
    for chunk in data.chunks(32 * 1024) {
        s.write_all(chunk).expect("write");
        let mut back = vec![0u8; chunk.len()];
        s.read_exact(&mut back).expect("the echo within its time limit");
        assert!(back == chunk, "the echo came back changed");
    }
}

/// A client's budget of eight connections with full buffers and 100 KiB
/// more: its first connection starts with full buffers (it takes at most
/// an eighth of the budget), each later one at the floor, until the room
/// is under two floors: then a connection and a UDP socket get `ENOBUFS`;
/// a send buffer grows only by what is left, and by what a shrink freed.
/// It fills every send buffer towards an echo it never reads back, and
/// another client still connects with full buffers and moves 1 MiB
/// through the same echo.
#[test]
fn a_client_past_its_budget_gets_smaller_buffers_then_enobufs_and_another_goes_on() {
    let budget = 8 * 2 * FULL + 100 * 1024;
    let netd = NetdThread::start_configured(Placement::Inline, Wire::PeerLink, move |c: &mut NetdConfig| {
        c.client_memory = budget as usize;
        c.max_sockets = 256;
    });
    let other = netd.connect();
    let mut greedy = RawClient::connect(&netd);
    let (mut sockets, mut sizes) = (Vec::new(), Vec::new());
    let mut expected = vec![FULL];
    expected.extend([FLOOR; 115]);
    for (i, &want) in expected.iter().enumerate() {
        let c = connect(&mut greedy, echo(), false);
        sockets.push(c.result().unwrap_or_else(|e| panic!("connection {i} within the budget: errno {e}")) as u32);
        sizes.push(c.aux[2]);
        assert_eq!([c.aux[2], c.aux[3]], [want, want], "connection {i}");
    }
    let left = budget - 2 * expected.iter().sum::<u64>();
    assert_eq!(left, 4096);
    assert_eq!(connect(&mut greedy, echo(), false).result(), Err(libc::ENOBUFS), "past the budget");
    let mut bind = greedy.request(Op::UdpBind);
    bind.aux[0] = encode_addr(at(0));
    assert_eq!(greedy.call(bind).result(), Err(libc::ENOBUFS), "a UDP socket");

    // A resize grows a buffer only as far as the budget goes: by what is
    // left, then by what a shrink freed.
    assert_eq!(set_send_buffer(&mut greedy, sockets[0], 1 << 20), Ok(FULL + left), "by what is left");
    assert_eq!(set_send_buffer(&mut greedy, sockets[0], FULL / 2), Ok(FULL / 2), "a shrink");
    assert_eq!(set_send_buffer(&mut greedy, sockets[0], 1 << 20), Ok(FULL + left), "what the shrink freed");
    for (&s, &size) in sockets.iter().zip(&sizes) {
        let sent = fill(&mut greedy, s, size);
        assert!(sent >= size, "the greedy client queued only {sent} bytes");
    }

    transfer(&other);
    let report = other.stat().unwrap();
    let line = client_line(&report, greedy.client.id);
    assert_eq!(stat_value(line, " memory "), Some(budget), "{report}");
    assert!(line.contains(&format!(" memory {budget} of {budget} ")), "{line}");
    assert!(socket_line(&report, greedy.client.id, sockets[1]).contains(" sndbuf 16384 rcvbuf 16384 "), "{report}");
    assert!(socket_line(&report, greedy.client.id, sockets[0]).contains(" sndbuf 266240 rcvbuf 262144 "), "{report}");
    assert_eq!(stat_value(&report, "netd memory_refused "), Some(2), "{report}");
    // Every connection after the first, and the two resizes that got less.
    assert_eq!(stat_value(&report, "netd buffers_shrunk "), Some(117), "{report}");
    drop((greedy, other));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// A connection that starts at the floor (its client holds two with full
/// buffers, an eighth of its 8 MiB budget) grows with use, as autotuning
/// wants and the budget allows: 4 MiB through an echo leave its send and
/// receive buffers above the floor.
#[test]
fn a_connection_started_at_the_floor_grows_with_use() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::PeerLink, |c: &mut NetdConfig| {
        c.client_memory = 8 << 20;
    });
    let session = netd.connect();
    let held: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect_timeout_via(&session, &SocketAddr::V4(echo()), LIMIT).expect("connect"))
        .collect();
    let mut s = TcpStream::connect_timeout_via(&session, &SocketAddr::V4(echo()), LIMIT).expect("connect");
    let head = format!("socket {} client ", s.socket_id());
    let line = |report: &str| report.lines().find(|l| l.starts_with(&head)).map(str::to_owned).unwrap_or_default();
    let report = session.stat().unwrap();
    assert!(line(&report).contains(" sndbuf 16384 rcvbuf 16384 "), "the third starts at the floor:\n{report}");
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let data: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    for chunk in data.chunks(256 * 1024) {
        s.write_all(chunk).expect("write");
        let mut back = vec![0u8; chunk.len()];
        s.read_exact(&mut back).expect("the echo within its time limit");
        assert!(back == chunk, "the echo came back changed");
    }
    let report = session.stat().unwrap();
    let l = line(&report);
    let (sndbuf, rcvbuf) = (stat_value(&l, " sndbuf "), stat_value(&l, " rcvbuf "));
    assert!(sndbuf > Some(FLOOR) && rcvbuf > Some(FLOOR), "the buffers never grew: {l}\n{report}");
    drop((s, held, session));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// Four connections between two clients of one netd, each with more
/// queued than the reader (which never reads) takes: with room for two
/// orphans, the first two closes leave orphans (charged to the client
/// that closed, then to netd alone once it has gone) and the last two
/// reset, which the reader sees. Once the reader resets its side, no
/// orphan and no charge is left.
#[test]
fn closes_past_the_orphan_cap_reset() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, |c: &mut NetdConfig| {
        c.max_orphans = 2;
    });
    let watcher = netd.connect();
    let mut reader = RawClient::connect(&netd);
    let mut writer = RawClient::connect(&netd);
    let listener = listen(&mut reader, 9800);
    let mut pairs = Vec::new();
    for _ in 0..4 {
        let w = connect(&mut writer, at(9800), false).result().expect("connect") as u32;
        pairs.push((w, accept(&mut reader, listener)));
    }
    for &(w, _) in &pairs {
        // The reader's window, then the writer's send buffer, fill.
        let sent = fill(&mut writer, w, FULL + CHUNK as u64);
        assert!(sent > FULL, "the writer queued only {sent} bytes");
    }
    for &(w, _) in &pairs {
        close(&mut writer, w, false);
    }
    let report = wait_for_report(&watcher, "two orphans kept, two closes reset", |r| {
        stat_value(r, "netd orphans_reset ") == Some(2) && stat_value(r, " orphans ") == Some(2)
    });
    let line = client_line(&report, writer.client.id);
    assert_eq!(stat_value(line, " sockets "), Some(0), "{report}");
    assert_eq!(stat_value(line, " memory "), Some(2 * 2 * FULL), "its orphans stay charged to it:\n{report}");
    for (i, &(_, r)) in pairs.iter().enumerate() {
        if i < 2 {
            let got = recv_now(&mut reader, r);
            assert!(got.is_ok_and(|n| n > 0), "orphan {i}: its data arrives ({got:?})");
            continue;
        }
        // What arrived before the reset is read first, then its error.
        let mut got = recv_now(&mut reader, r);
        for _ in 0..16 {
            if got.is_err() {
                break;
            }
            got = recv_now(&mut reader, r);
        }
        assert_eq!(got, Err(libc::ECONNRESET), "close {i} reset the connection");
    }
    drop(writer);
    let report = wait_for_report(&watcher, "the gone writer's orphans charged to netd alone", |r| {
        stat_value(r, "netd clients_gone ") == Some(1)
    });
    assert_eq!(stat_value(&report, " unowned "), Some(2 * 2 * FULL), "{report}");
    for &(_, r) in &pairs {
        close(&mut reader, r, true);
    }
    close(&mut reader, listener, false);
    wait_for_report(&watcher, "orphans and charges left after the reader's resets", |r| {
        stat_value(r, "memory charged ") == Some(0) && stat_value(r, " orphans ") == Some(0)
    });
    drop((reader, watcher));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// A connection its client closes with nothing queued, to a peer that
/// keeps its own side open: once its FIN is acknowledged (FIN-WAIT-2) it
/// holds no data, so it is no orphan and its charge comes back, while
/// the peer still holds the connection.
#[test]
fn a_closed_connection_waiting_only_for_the_peers_fin_is_not_charged() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, |_: &mut NetdConfig| {});
    let watcher = netd.connect();
    let mut reader = RawClient::connect(&netd);
    let mut writer = RawClient::connect(&netd);
    let listener = listen(&mut reader, 9810);
    let w = connect(&mut writer, at(9810), false).result().expect("connect") as u32;
    let r = accept(&mut reader, listener);
    close(&mut writer, w, false);
    let report = wait_for_report(&watcher, "the closed connection's charge back", |rep| {
        stat_value(client_line(rep, writer.client.id), " memory ") == Some(0) && stat_value(rep, " orphans ") == Some(0)
    });
    assert!(report.contains(" state close-wait "), "the peer still holds it:\n{report}");
    close(&mut reader, r, false);
    close(&mut reader, listener, false);
    drop((reader, writer, watcher));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// With room for five connections in the engine (both ends of a
/// connection between two clients count, and one reset by its peer until
/// its client closes it): two connections are made, a third's SYN finds
/// the limit and is not answered (counted), a fourth connect fails with
/// `ENFILE`; once two are reset, a connection is made again.
#[test]
fn the_connection_limit_holds_for_connects_and_syns() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, |c: &mut NetdConfig| {
        c.max_connections = 5;
    });
    let watcher = netd.connect();
    let mut server = RawClient::connect(&netd);
    let mut client = RawClient::connect(&netd);
    let listener = listen(&mut server, 9900);
    let first = connect(&mut client, at(9900), false).result().expect("the first") as u32;
    connect(&mut client, at(9900), false).result().expect("the second");
    for _ in 0..2 {
        accept(&mut server, listener);
    }
    let third = connect(&mut client, at(9900), true).result().expect("the third, not waited for") as u32;
    let report = wait_for_report(&watcher, "the third's SYN unanswered", |r| {
        stat_value(r, "engine drop_tcp_connection_limit ").is_some_and(|n| n >= 1)
    });
    assert_eq!(stat_value(&report, " connections "), Some(5), "{report}");
    assert_eq!(connect(&mut client, at(9900), false).result(), Err(libc::ENFILE), "the fourth");
    let report = watcher.stat().unwrap();
    assert_eq!(stat_value(&report, "netd connections_refused "), Some(1), "{report}");
    close(&mut client, third, true);
    close(&mut client, first, true);
    let again = connect(&mut client, at(9900), false);
    assert!(again.result().is_ok(), "a connect below the limit again: {again:?}");
    drop((client, server, watcher));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// With budgets larger than netd's cap (7 MiB of the engine's 8 MiB
/// pool), one client's connections, started at the floor once the cap's
/// room is short, take all of it and another's connect gets `ENOBUFS`; the first client is killed
/// with its buffers full, and every byte charged comes back: the other
/// connects with full buffers and moves 1 MiB.
#[test]
fn a_client_killed_past_the_cap_gives_every_byte_back() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::PeerLink, |c: &mut NetdConfig| {
        c.client_memory = 64 << 20;
        c.max_sockets = 128;
    });
    let other = netd.connect();
    let mut greedy = RawClient::connect(&netd);
    let mut sockets = Vec::new();
    for _ in 0..128 {
        match connect(&mut greedy, echo(), false).result() {
            Ok(id) => sockets.push(id as u32),
            Err(e) => {
                assert_eq!(e, libc::ENOBUFS);
                break;
            }
        }
    }
    assert_eq!(sockets.len(), 59, "11 connections with full buffers, 48 at the floor, then ENOBUFS");
    for &s in &sockets {
        fill(&mut greedy, s, CHUNK as u64);
    }
    let report = other.stat().unwrap();
    assert_eq!(stat_value(&report, "memory charged "), Some(7 << 20), "{report}");
    let refused = TcpStream::connect_timeout_via(&other, &SocketAddr::V4(echo()), LIMIT);
    assert_eq!(refused.err().and_then(|e| e.raw_os_error()), Some(libc::ENOBUFS), "netd's cap binds every client");

    drop(greedy);
    let report = wait_for_report(&other, "netd did not let the killed client go", |r| {
        stat_value(r, "netd clients_gone ") == Some(1)
    });
    assert_eq!(stat_value(&report, "memory charged "), Some(0), "{report}");
    assert_eq!(stat_value(&report, "netd buffers_leaked "), Some(0), "{report}");
    transfer(&other);
    // Its closed connection is an orphan until the FIN exchange is done.
    wait_for_report(&other, "the transfer's connection still charged", |r| {
        stat_value(client_line(r, report_client_id(r)), " memory ") == Some(0)
    });
    let s = TcpStream::connect_timeout_via(&other, &SocketAddr::V4(echo()), LIMIT).expect("connect");
    let report = other.stat().unwrap();
    let line = client_line(&report, report_client_id(&report));
    assert_eq!(stat_value(line, " memory "), Some(2 * FULL), "full buffers again:\n{report}");
    drop((s, other));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// A client that opens and closes connections one after another, faster
/// than housekeeping comes, with a budget whose eighth holds two
/// connections' worth, and so full buffers (the first connections' share)
/// only while at most one closed connection is still charged: each new
/// one gets full buffers all the same, for the closed ones that finished
/// their FIN exchange give their room back when a socket needs it, not
/// at the next housekeeping.
#[test]
fn closed_connections_give_their_room_back_when_the_next_needs_it() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::PeerLink, |c: &mut NetdConfig| {
        c.client_memory = 16 * 2 * FULL as usize;
    });
    let watcher = netd.connect();
    let mut raw = RawClient::connect(&netd);
    for round in 0..30 {
        let c = connect(&mut raw, echo(), false);
        let id = c.result().unwrap_or_else(|e| panic!("round {round}: connect failed with errno {e}")) as u32;
        close(&mut raw, id, false);
    }
    let report = watcher.stat().unwrap();
    assert_eq!(stat_value(&report, "netd memory_refused "), Some(0), "{report}");
    assert_eq!(stat_value(&report, "netd buffers_shrunk "), Some(0), "{report}");
    drop((raw, watcher));
    let done = netd.stop();
    assert_eq!(done.stats.buffers_leaked, 0, "{:?}", done.stats);
}

/// The id of the only client in the report.
fn report_client_id(report: &str) -> u64 {
    let lines: Vec<&str> = report.lines().filter(|l| l.starts_with("client ")).collect();
    assert_eq!(lines.len(), 1, "{report}");
    stat_value(lines[0], "client ").expect("a client id")
}

/// Connects waiting at once are bounded by the client's socket table, not
/// by the few requests without a buffer it may leave waiting: 20 connects
/// to an address nobody answers (more than the test's `max_pending` of
/// 16) all wait, and each ends with `ETIMEDOUT` at its time limit rather
/// than `ENOBUFS` at once.
#[test]
fn many_connects_wait_at_once() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let mut raw = RawClient::connect(&netd);
    let nobody = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 77, 0, 99), 9);
    let mut ids = Vec::new();
    for _ in 0..20 {
        let mut r = raw.request(Op::Connect);
        r.aux[0] = encode_addr(nobody);
        r.aux[nagare_request::WAIT_LIMIT] = 300_000;
        ids.push(r.id);
        raw.post(r.encode());
    }
    let mut results = Vec::new();
    while results.len() < ids.len() {
        let (id, c) = raw.next_completion();
        if ids.contains(&id) {
            results.push(c.result());
        }
    }
    assert!(results.iter().all(|r| *r == Err(libc::ETIMEDOUT)), "{results:?}");
}
