//! Each socket's data path through a netd driven in a thread of the test:
//! writes queue without waiting for netd and stop at a full send buffer
//! (blocking or not), data that arrived is read and polled without a
//! request, an error met later is reported by the next call, and a close
//! waits behind the stream's sends.

mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare::poll::{poll, PollEntry, READABLE, WRITABLE};
use nagare_netd::Placement;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};
use support::{stat_value, NetdThread, Wire, ECHO_PORT, LIMIT, NETD_ADDR, PEER_ADDR};

fn at(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(NETD_ADDR, port)
}

/// A connected pair of streams through one netd, each end a client of its
/// own: (writer, reader, their sessions).
fn pair(netd: &NetdThread, port: u16) -> (TcpStream, TcpStream, nagare::Session, nagare::Session) {
    let (a, b) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&b, at(port)).expect("listen");
    let writer = TcpStream::connect_timeout_via(&a, &SocketAddr::V4(at(port)), LIMIT).expect("connect");
    let (reader, _) = listener.accept().expect("accept");
    (writer, reader, a, b)
}

/// Writes to `writer`, non-blocking, the bytes `next` gives for what was
/// written so far, until its send buffer and its reader's window are full:
/// once writes have failed for 100 ms on end (acknowledgements of what the
/// reader's side still takes free room meanwhile). The bytes written.
fn write_until_full<'a>(writer: &TcpStream, next: impl Fn(usize) -> &'a [u8]) -> usize {
    writer.set_nonblocking(true).unwrap();
    let mut written = 0usize;
    let deadline = Instant::now() + LIMIT;
    let mut refused = 0;
    while refused < 5 {
        match (&*writer).write(next(written)) {
            Ok(n) => {
                written += n;
                refused = 0;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("write: {e}"),
        }
        assert!(Instant::now() < deadline && written < 64 << 20, "writes never stopped: {written} bytes");
    }
    written
}

/// The requests netd has taken so far.
fn requests(session: &nagare::Session) -> u64 {
    stat_value(&session.stat().expect("stat"), "netd requests ").expect("a request count")
}

/// A writer whose reader does not read: non-blocking writes queue until
/// the send buffer and the reader's window are full, then fail with
/// `WouldBlock`; a blocking write waits, up to its time limit, and goes on
/// once the reader reads. Every byte arrives in order.
#[test]
fn a_full_send_buffer_blocks_a_writer_or_says_would_block() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, mut reader, a, _b) = pair(&netd, 9400);
    let pattern = |i: usize| (i % 253) as u8;
    let chunk: Vec<u8> = (0..253 * 66).map(pattern).collect();
    let written = write_until_full(&writer, |written| &chunk[written % 253..][..16384]);
    // The send buffer (256 KiB) and what the reader's side holds.
    assert!(written >= 256 << 10, "only {written} bytes queued");
    // The report shows the bytes each end's engine socket holds: the
    // reader's, not yet taken by a receive.
    let report = a.stat().expect("stat");
    let line = |part: &str| -> &str {
        report
            .lines()
            .find(|l| l.starts_with("socket ") && l.contains(part))
            .unwrap_or_else(|| panic!("no socket line with {part:?}:\n{report}"))
    };
    let (w, r) = (line(&format!(" remote {} ", at(9400))), line(&format!(" tcp local {} ", at(9400))));
    // (On this link the reader's segments hold the writer's lent buffers
    // themselves, so the writer's engine has them acknowledged.)
    assert!(w.contains(" state established "), "{w}");
    assert!(stat_value(r, " recv_queued ").unwrap() > 0, "{r}");
    assert_eq!(stat_value(r, " waiting "), Some(0), "the reader's receives all hold data: {r}");
    writer.set_nonblocking(false).unwrap();
    writer.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    let t = Instant::now();
    let e = (&writer).write(&chunk[written % 253..][..16384]).expect_err("a full send buffer took more");
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    assert!(t.elapsed() >= Duration::from_millis(150), "the blocking write gave up after {:?}", t.elapsed());

    // A blocking writer waits for the reader, then finishes.
    writer.set_write_timeout(None).unwrap();
    let more = 1 << 20;
    let sender = std::thread::spawn(move || {
        let tail: Vec<u8> = (written..written + more).map(pattern).collect();
        (&writer).write_all(&tail).map(|()| writer)
    });
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = vec![0u8; written + more];
    reader.read_exact(&mut got).expect("every byte arrives");
    assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(i)), "the stream's bytes differ");
    sender.join().unwrap().expect("the blocked writer finished");
}

/// Data that already arrived is polled and read without a request to
/// netd: its request count does not move while a reader polls and reads
/// what is there, and a poll with nothing ready waits for the data.
#[test]
fn readiness_and_reads_of_arrived_data_need_no_request() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, reader, _a, b) = pair(&netd, 9401);
    reader.set_nonblocking(true).unwrap();
    let mut entries = [PollEntry { socket: reader.socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&b, &mut entries, Some(Duration::ZERO)).unwrap(), 0, "readable before anything was sent");
    let e = (&reader).read(&mut [0u8; 8]).expect_err("read before anything was sent");
    assert_eq!(e.kind(), ErrorKind::WouldBlock);

    // A poll that waits sees the data arrive (the edge).
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        (&writer).write_all(b"ready now").unwrap();
        writer
    });
    assert_eq!(poll(&b, &mut entries, Some(LIMIT)).unwrap(), 1, "the data never made the stream readable");
    assert_eq!(entries[0].ready, READABLE);
    let writer = t.join().unwrap();

    let before = requests(&b);
    entries[0].interest = READABLE | WRITABLE;
    assert_eq!(poll(&b, &mut entries, Some(Duration::ZERO)).unwrap(), 1);
    assert_eq!(entries[0].ready, READABLE | WRITABLE);
    let mut buf = [0u8; 64];
    let n = (&reader).read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"ready now");
    // Taken in between: the stat of `requests` itself, and the receive
    // the read posted in place of the buffer it emptied, which nothing
    // waits for. The poll and the read themselves asked netd nothing.
    assert_eq!(requests(&b), before + 2, "a poll or a read of arrived data asked netd");
    // Drained: not readable until more comes.
    entries[0].interest = READABLE;
    assert_eq!(poll(&b, &mut entries, Some(Duration::ZERO)).unwrap(), 0, "readable after it was drained");
    drop(writer);
}

/// A poll over a ready stream and a socket whose readiness only netd
/// knows (an echo socket) waits for nothing: one request, which does not
/// wait, fills in the echo socket's entry.
#[test]
fn a_ready_stream_beside_a_socket_netd_answers_for_takes_one_request() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, reader, _a, b) = pair(&netd, 9403);
    let echo = nagare::ping::PingSocket::open_via(&b, 0x5a5a).expect("an echo socket");
    (&writer).write_all(b"here").unwrap();
    let mut entries = [
        PollEntry { socket: echo.socket_id(), interest: READABLE, ready: 0 },
        PollEntry { socket: reader.socket_id(), interest: READABLE, ready: 0 },
    ];
    let started = Instant::now();
    while poll(&b, &mut entries[1..], Some(Duration::ZERO)).unwrap() == 0 {
        assert!(started.elapsed() < LIMIT, "the data never came");
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = requests(&b);
    assert_eq!(poll(&b, &mut entries, Some(LIMIT)).unwrap(), 1);
    assert_eq!((entries[0].ready, entries[1].ready), (0, READABLE));
    // The stat of `requests` itself, and the poll's one request.
    assert_eq!(requests(&b), before + 2, "the poll asked netd more than once");
}

/// A connection reset while its writer had queued data: the error is the
/// next call's (`take_error` or a read), reported once; then writes fail
/// with `EPIPE` and reads see the end.
#[test]
fn a_reset_is_reported_by_the_next_call() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, reader, _a, _b) = pair(&netd, 9402);
    (&writer).write_all(b"never read").unwrap();
    // Closed with unread data: a reset.
    std::thread::sleep(Duration::from_millis(50));
    drop(reader);
    let deadline = Instant::now() + LIMIT;
    let e = loop {
        if let Some(e) = writer.take_error().unwrap() {
            break e;
        }
        assert!(Instant::now() < deadline, "the reset never reached the writer");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(e.raw_os_error(), Some(libc::ECONNRESET), "{e}");
    assert!(writer.take_error().unwrap().is_none(), "the error is reported once");
    let e = (&writer).write(b"more").expect_err("a write after a reset");
    assert_eq!(e.raw_os_error(), Some(libc::EPIPE), "{e}");
    assert_eq!((&writer).read(&mut [0u8; 8]).unwrap(), 0, "a read after a reset");
}

/// A datagram to an address without a route is queued and the call
/// returns; the error is the socket's next call's.
#[test]
fn an_unroutable_datagram_is_reported_by_the_next_call() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let client = netd.connect();
    let udp = UdpSocket::bind_via(&client, at(0)).expect("bind");
    let nowhere = SocketAddrV4::new(std::net::Ipv4Addr::new(192, 0, 2, 1), 9);
    assert_eq!(udp.send_to(b"to nowhere", nowhere).expect("queued"), 10);
    udp.set_read_timeout(Some(LIMIT)).unwrap();
    let e = udp.recv_from(&mut [0u8; 64]).expect_err("a datagram from nowhere");
    assert_eq!(e.raw_os_error(), Some(libc::EHOSTUNREACH), "{e}");
    let e = udp.recv_from(&mut [0u8; 64]).expect_err("still nothing");
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "the error is reported once: {e}");
}

/// A raw client's stream to a listener of another client at `port`: the
/// raw client, its stream's id and the accepted end.
fn raw_stream(netd: &NetdThread, port: u16) -> (support::RawClient, u32, TcpStream) {
    use nagare_netd::{encode_addr, Op};
    let reader_session = netd.connect();
    let listener = TcpListener::bind_via(&reader_session, at(port)).expect("listen");
    let mut raw = support::RawClient::connect(netd);
    let mut connect = raw.request(Op::Connect);
    connect.aux[0] = encode_addr(at(port));
    let stream = raw.call(connect).result().expect("connect") as u32;
    let (reader, _) = listener.accept().expect("accept");
    (raw, stream, reader)
}

/// Copied sends of `chunk` on `stream`, not waiting, until the send
/// buffer and the reader's window are full: the bytes that went in.
fn fill_with_sends(raw: &mut support::RawClient, stream: u32, chunk: &[u8]) -> usize {
    use nagare_netd::Op;
    let mut sent = 0usize;
    for _ in 0..200 {
        let mut send = raw.request(Op::Send);
        send.socket = stream;
        send.flags = nagare_request::NONBLOCK;
        send.piece = Some(raw.give(chunk, chunk.len() as u32));
        match raw.call(send).result() {
            Ok(n) => sent += n as usize,
            Err(e) if e == libc::EAGAIN => break,
            Err(e) => panic!("send: errno {e}"),
        }
    }
    sent
}

/// Posts a send of `chunk` on `stream` that waits for room (lent: it goes
/// in whole or waits).
fn post_waiting_send(raw: &mut support::RawClient, stream: u32, chunk: &[u8]) {
    let mut waiting = raw.request(nagare_netd::Op::Send);
    waiting.socket = stream;
    waiting.flags = nagare_request::LEND;
    waiting.piece = Some(raw.give(chunk, chunk.len() as u32));
    raw.post(waiting.encode());
}

/// Reads `reader` until `expected` bytes came or the stream ended: how
/// many came.
fn read_up_to(reader: &mut TcpStream, expected: usize) -> usize {
    let mut got = 0usize;
    let mut buf = vec![0u8; 65536];
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    while got < expected {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => panic!("read after {got} of {expected} bytes: {e}"),
        }
    }
    got
}

/// A lent send the library marked as its own copy (`COPY_SHORT`, what a
/// `write` posts) is copied into the send buffer when short, and its
/// buffer comes back with its completion; a longer one, or one the
/// application lent (the zero-copy calls), goes in place.
#[test]
fn a_short_write_is_copied_and_a_lent_or_long_one_goes_in_place() {
    use nagare_netd::Op;
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (mut raw, stream, mut reader) = raw_stream(&netd, 9407);
    let watcher = netd.connect();
    let stats = || {
        let text = watcher.stat().expect("stat");
        let value = |key| stat_value(&text, key).expect("a count");
        (value("netd tx_payload_copied "), value("netd tx_payload_in_place "))
    };
    let mut sent = 0;
    for (len, flags, copied) in [
        (100u32, nagare_request::LEND | nagare_request::COPY_SHORT, true),
        (nagare_request::SHORT_SEND, nagare_request::LEND | nagare_request::COPY_SHORT, true),
        (nagare_request::SHORT_SEND + 1, nagare_request::LEND | nagare_request::COPY_SHORT, false),
        (100, nagare_request::LEND, false),
    ] {
        let before = stats();
        let mut send = raw.request(Op::Send);
        send.socket = stream;
        send.flags = flags;
        send.piece = Some(raw.give(&vec![0x42; len as usize], len));
        assert_eq!(raw.call(send).result(), Ok(u64::from(len)), "{len} bytes, flags {flags:#x}");
        sent += len as usize;
        let after = stats();
        let expected =
            if copied { (before.0 + u64::from(len), before.1) } else { (before.0, before.1 + u64::from(len)) };
        assert_eq!(after, expected, "{len} bytes, flags {flags:#x}: (copied, in place)");
    }
    assert_eq!(read_up_to(&mut reader, sent), sent, "every byte arrives");
}

/// A short write is copied only while its connection's send buffer holds
/// at most a reply's worth: behind bytes the peer has not acknowledged
/// it is lent, so that the client, which counts a send until it
/// completes, keeps counting it.
#[test]
fn a_short_write_behind_unacknowledged_bytes_is_lent() {
    use nagare_netd::Op;
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (mut raw, stream, reader) = raw_stream(&netd, 9409);
    // The reader does not read: its window closes after about 80 KiB.
    reader.set_recv_buffer_size(16 << 10).expect("SO_RCVBUF");
    let mut option = raw.request(Op::SetOption);
    option.socket = stream;
    option.aux = [nagare_request::SockOption::SendBuffer as u64, 1 << 20, 0, 0];
    assert!(raw.call(option).result().is_ok());
    let chunk = vec![0x17u8; 64 << 10];
    for _ in 0..8 {
        post_waiting_send(&mut raw, stream, &chunk);
    }
    let watcher = netd.connect();
    let value = |key| stat_value(&watcher.stat().expect("stat"), key).expect("a count");
    let deadline = Instant::now() + LIMIT;
    while value("netd tx_payload_in_place ") < 8 * chunk.len() as u64 {
        assert!(Instant::now() < deadline, "the lent sends did not go in");
        std::thread::sleep(Duration::from_millis(5));
    }
    let copied = value("netd tx_payload_copied ");
    let mut send = raw.request(Op::Send);
    send.socket = stream;
    send.flags = nagare_request::LEND | nagare_request::COPY_SHORT;
    send.piece = Some(raw.give(&[0x18; 100], 100));
    raw.post(send.encode());
    let nop = raw.request(Op::Nop);
    let nop_id = nop.id;
    raw.post(nop.encode());
    raw.wait_for(nop_id);
    assert_eq!(value("netd tx_payload_in_place "), 8 * chunk.len() as u64 + 100, "the short send went in lent");
    assert_eq!(value("netd tx_payload_copied "), copied);
    drop(reader);
}

/// A close behind a send that waits for room still waits for it, however
/// many other requests of its client wait: the stream's bytes go out, then
/// the close is done, rather than failing and leaving the socket open.
#[test]
fn a_close_behind_a_waiting_send_waits_even_when_the_pending_list_is_full() {
    use nagare_netd::{encode_addr, Op};
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (mut raw, stream, mut reader) = raw_stream(&netd, 9403);
    let chunk = vec![0x5au8; 16384];
    let sent = fill_with_sends(&mut raw, stream, &chunk);
    assert!(sent >= 256 << 10, "only {sent} bytes went in");
    // One that waits for room, then buffer-less requests that wait
    // (accepts nobody will answer) until the pending list is full.
    post_waiting_send(&mut raw, stream, &chunk);
    let mut listen = raw.request(Op::Listen);
    listen.aux[0] = encode_addr(at(9404));
    listen.aux[1] = 4;
    let idle = raw.call(listen).result().expect("listen") as u32;
    for _ in 0..20 {
        let mut accept = raw.request(Op::Accept);
        accept.socket = idle;
        raw.post(accept.encode());
    }
    let mut close = raw.request(Op::Close);
    close.socket = stream;
    let close_id = close.id;
    raw.post(close.encode());
    // The reader takes everything; the waiting send goes in, then the close.
    let expected = sent + chunk.len();
    assert_eq!(read_up_to(&mut reader, expected), expected, "every byte written before the close arrives");
    let done = raw.wait_for(close_id);
    assert_eq!(done.result(), Ok(0), "the close was done, not refused");
    assert_eq!(reader.read(&mut [0u8; 16]).expect("the end of the stream"), 0, "a FIN after the data");
}

/// A receive parked on a stream (it found nothing there) whose close
/// waited behind a send ends with the close's next turn: the close leaves
/// no event of the engine's, and the receive would otherwise wait for
/// housekeeping. Its completion comes before that of a request made once
/// the close's had come.
#[test]
fn a_receive_parked_on_a_stream_ends_the_turn_after_its_close() {
    use nagare_netd::Op;
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (mut raw, stream, mut reader) = raw_stream(&netd, 9405);
    let mut recv = raw.request(Op::Recv);
    recv.socket = stream;
    recv.piece = Some(raw.give(&[], 65536));
    let recv_id = recv.id;
    raw.post(recv.encode());
    // Turns pass with it waiting: parked.
    for _ in 0..3 {
        let nop = raw.request(Op::Nop);
        raw.call(nop);
    }
    let chunk = vec![0x5au8; 16384];
    let sent = fill_with_sends(&mut raw, stream, &chunk);
    post_waiting_send(&mut raw, stream, &chunk);
    let mut close = raw.request(Op::Close);
    close.socket = stream;
    let close_id = close.id;
    raw.post(close.encode());
    let expected = sent + chunk.len();
    assert_eq!(read_up_to(&mut reader, expected), expected, "every byte written before the close arrives");
    let mut received = None;
    loop {
        let (id, c) = raw.next_completion();
        if id == recv_id {
            received = Some(c.result());
        }
        if id == close_id {
            assert_eq!(c.result(), Ok(0), "the close was done");
            break;
        }
    }
    let nop = raw.request(Op::Nop);
    let nop_id = nop.id;
    raw.post(nop.encode());
    while received.is_none() {
        let (id, c) = raw.next_completion();
        if id == recv_id {
            received = Some(c.result());
        }
        assert!(id != nop_id || received.is_some(), "the request made after the close ended before the receive");
    }
    assert_eq!(received, Some(Err(libc::EBADF)), "the receive ends with its socket");
}

/// A stream keeps its receive buffer's worth of receives posted (4
/// buffers of 64 KiB for the default 256 KiB), so that netd can take a
/// whole window out of the engine before the application reads; a larger
/// receive buffer posts more, up to 4 MiB's worth and a quarter of the
/// region's buffers.
#[test]
fn a_stream_keeps_its_receive_buffers_worth_of_receives_posted() {
    // A region as netd's own, then one of 256 buffers, whose quarter (64)
    // a 4 MiB buffer's 64 receives would pass.
    let defaults = nagare_netd::NetdConfig::default();
    for (buffers, most) in [(defaults.buffers, 64), (256, 60)] {
        let netd = NetdThread::start_with_region(Placement::Inline, Wire::Loopback, defaults.ring_slots, buffers);
        let s = netd.connect();
        let listener = TcpListener::bind_via(&s, at(9460)).expect("listen");
        let writer = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9460)), LIMIT).expect("connect");
        let (reader, _) = listener.accept().expect("accept");
        let pending = || {
            let report = s.stat().expect("stat");
            let line = report.lines().find(|l| l.starts_with("client ")).expect("a client line").to_owned();
            stat_value(&line, " pending ").expect("a pending count")
        };
        assert_eq!(reader.recv_buffer_size().unwrap(), 256 << 10);
        // Both ends' receives, the listener's accept posted ahead, and the
        // stat itself.
        assert_eq!(pending(), 4 + 4 + 1 + 1);
        reader.set_recv_buffer_size(512 << 10).unwrap();
        assert_eq!(pending(), 4 + 8 + 1 + 1);
        // 64 buffers' worth, within a quarter of the pool for all streams
        // together.
        reader.set_recv_buffer_size(4 << 20).unwrap();
        assert_eq!(pending(), 4 + most + 1 + 1, "a region of {buffers} buffers");
        // No more than 4 MiB for one stream, the most netd takes back if it
        // is shared.
        reader.set_recv_buffer_size(8 << 20).unwrap();
        assert!(reader.recv_buffer_size().unwrap() > 4 << 20);
        assert_eq!(pending(), 4 + most + 1 + 1, "a region of {buffers} buffers");
        // Data still flows through them.
        (&writer).write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        (&reader).read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&b| b == 7));
    }
}

/// Receives kept posted on an idle socket, and a listener's accept, wait
/// in netd without being run again on every turn: another client's
/// thousand round trips through netd leave them alone, so that netd's
/// turn does not cost more for every idle socket of every client.
#[test]
fn idle_sockets_receives_are_not_run_again_every_turn() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (idle, busy) = (netd.connect(), netd.connect());
    let _udp = UdpSocket::bind_via(&idle, at(9480)).expect("bind");
    let _listener = TcpListener::bind_via(&idle, at(9481)).expect("listen");
    let (_writer, _reader, _a, _b) = pair(&netd, 9482);
    let rerun = |s: &nagare::Session| stat_value(&s.stat().expect("stat"), "netd waits_rerun ").expect("a count");
    let before = rerun(&busy);
    for _ in 0..1000 {
        busy.nop().expect("nop");
    }
    let after = rerun(&busy);
    assert!(after - before < 100, "{} waiting requests run again over 1000 turns", after - before);
}

/// `n` one-byte round trips from `writer` to `reader` and back.
fn round_trips(writer: &TcpStream, reader: &TcpStream, n: u32) {
    let mut one = [0u8; 1];
    for i in 0..n {
        (&*writer).write_all(&[i as u8]).unwrap();
        (&*reader).read_exact(&mut one).unwrap();
        (&*reader).write_all(&one).unwrap();
        (&*writer).read_exact(&mut one).unwrap();
        assert_eq!(one[0], i as u8);
    }
}

/// A busy client's idle sockets cost its turns nothing either: their
/// receives, each parked on its socket once it found nothing there, are
/// not looked at again while a stream of the same client makes two
/// hundred round trips, though each of its turns runs its waits again.
#[test]
fn a_busy_clients_idle_receives_are_not_looked_at_every_turn() {
    let netd = NetdThread::start_with_region(Placement::Inline, Wire::Loopback, 1024, 256);
    let (writer, reader, a, _b) = pair(&netd, 9690);
    // Thirty datagram sockets of the writer's client, with their receives
    // posted ahead.
    let idle: Vec<UdpSocket> = (0..30).map(|i| UdpSocket::bind_via(&a, at(9700 + i)).expect("bind")).collect();
    let checked = || stat_value(&a.stat().expect("stat"), "netd waits_checked ").expect("a count");
    let before = checked();
    let started = Instant::now();
    round_trips(&writer, &reader, 200);
    let looked = checked() - before;
    // The idle sockets hold some eighty receives: looked at on every
    // turn, they alone would be tens of thousands. They are looked at
    // once per housekeeping (every 20 ms), and the stream's own receives
    // some times per round trip (each of its turns).
    let housekeepings = started.elapsed().as_millis() as u64 / 20 + 2;
    let allowed = 200 * 40 + housekeepings * 100;
    assert!(looked < allowed, "waiting requests looked at {looked} times over 200 round trips");
    drop(idle);
}

/// A stream's receives are taken in order: once one of them finds
/// nothing, the others waiting on the same socket in that turn are not
/// looked at, so a reader with dozens of receives posted ahead costs
/// each of netd's turns one look, not one per receive.
#[test]
fn a_streams_receives_posted_ahead_are_looked_at_once_a_turn() {
    let netd = NetdThread::start_with_region(Placement::Inline, Wire::Loopback, 1024, 256);
    let (writer, reader, a, _b) = pair(&netd, 9760);
    // A receive buffer of 2 MiB: its client keeps 32 receives of 64 KiB
    // posted.
    reader.set_recv_buffer_size(2 << 20).expect("SO_RCVBUF");
    let posted = || {
        let report = a.stat().expect("stat");
        let key = format!(" local {} ", at(9760));
        let line = report.lines().find(|l| l.contains(&key) && l.contains(" established "))?.to_owned();
        stat_value(&line, " waiting ")
    };
    let checked = || stat_value(&a.stat().expect("stat"), "netd waits_checked ").expect("a count");
    let before = checked();
    round_trips(&writer, &reader, 200);
    let looked = checked() - before;
    assert!(posted().is_some_and(|n| n >= 16), "the reader keeps its receives posted");
    // Each round trip is a few turns, each looking once at each stream;
    // each of the reader's receives posted ahead, looked at on every
    // turn, would be some hundred looks per round trip.
    assert!(looked < 200 * 40, "waiting requests looked at {looked} times over 200 round trips");
}

/// The line of the socket whose local address is `local` in `report`.
fn socket_line(report: &str, local: SocketAddrV4) -> Option<String> {
    let key = format!(" local {local} ");
    report.lines().find(|l| l.starts_with("socket ") && l.contains(&key)).map(str::to_owned)
}

/// What a socket's receives delivered into its client's region and the
/// application has not read shows in `nagare stat` as `client_unread`,
/// beside what the engine still holds (`recv_queued`): together what
/// arrived and was not read. Once the application reads it all, the next
/// receive the client posts says so and it is 0 again.
#[test]
fn bytes_delivered_to_a_client_and_not_read_show_in_its_socket_s_line() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, reader, a, b) = pair(&netd, 9470);
    const SENT: u64 = 100_000;
    (&writer).write_all(&[3u8; SENT as usize]).unwrap();
    let unread = |r: &str, key: &str| socket_line(r, at(9470)).and_then(|l| stat_value(&l, key));
    let report =
        support::wait_for_report(&b, "the stream's bytes delivered", |r| unread(r, " client_unread ") == Some(SENT));
    assert_eq!(unread(&report, " recv_queued "), Some(0), "{report}");
    let mut got = vec![0u8; SENT as usize];
    (&reader).read_exact(&mut got).unwrap();
    let report = b.stat().expect("stat");
    assert_eq!(unread(&report, " client_unread "), Some(0), "{report}");

    let sender = UdpSocket::bind_via(&a, at(9471)).expect("bind");
    let receiver = UdpSocket::bind_via(&b, at(9472)).expect("bind");
    for i in 0..3u8 {
        sender.send_to(&[i; 1000], at(9472)).unwrap();
    }
    let report = support::wait_for_report(&b, "the datagrams delivered", |r| {
        socket_line(r, at(9472)).and_then(|l| stat_value(&l, " client_unread ")) == Some(3000)
    });
    assert!(socket_line(&report, at(9472)).is_some_and(|l| l.contains(" recv_queued 0 ")), "{report}");
    let mut buf = [0u8; 2000];
    for i in 0..3u8 {
        let (n, _) = receiver.recv_from(&mut buf).expect("a datagram");
        assert_eq!(&buf[..n], &[i; 1000][..]);
    }
    let report = b.stat().expect("stat");
    assert_eq!(socket_line(&report, at(9472)).and_then(|l| stat_value(&l, " client_unread ")), Some(0), "{report}");

    // A receiving side shut with bytes unread drops them: none are left.
    (&writer).write_all(&[4u8; 5000]).unwrap();
    support::wait_for_report(&b, "the bytes before the shutdown", |r| unread(r, " client_unread ") == Some(5000));
    reader.shutdown(std::net::Shutdown::Read).unwrap();
    let report = b.stat().expect("stat");
    assert_eq!(unread(&report, " client_unread "), Some(0), "{report}");
}

/// Datagrams that wait in netd while their reader does not read come, once
/// it reads, several to a receive: the reader posts a handful of receives
/// for fifty datagrams, and reads each whole, in order, with its sender.
#[test]
fn waiting_datagrams_come_several_to_a_receive() {
    // Without PacketFlow the queue keeps its fixed 256 KiB, which holds
    // them all.
    let tune = support::Tune { packetflow: Some(nagare_netd::PacketFlow::NONE), ..support::Tune::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::Loopback, tune, |_| {});
    let (a, b) = (netd.connect(), netd.connect());
    let sender = UdpSocket::bind_via(&a, at(9500)).expect("bind");
    let reader = UdpSocket::bind_via(&b, at(9501)).expect("bind");
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    // Some larger than a third of a region buffer, so that a buffer ends
    // before a datagram that would not fit whole.
    let datagram = |i: usize| vec![i as u8; if i % 10 == 9 { 30_000 } else { (i * 29) % 1400 + 1 }];
    const SENT: usize = 50;
    for i in 0..SENT {
        sender.send_to(&datagram(i), at(9501)).unwrap();
    }
    // Every datagram is in netd (queued in the engine or delivered to the
    // receives the reader had posted) before it reads.
    support::wait_for_report(&b, "the datagrams in", |r| {
        stat_value(r, "engine udp_delivered ").is_some_and(|n| n >= SENT as u64)
    });
    let before = requests(&b);
    let mut buf = vec![0u8; 65536];
    for i in 0..SENT {
        let (n, from) = reader.recv_from(&mut buf).expect("a datagram");
        assert_eq!((&buf[..n], from), (&datagram(i)[..], SocketAddr::V4(at(9500))), "datagram {i}");
    }
    // The requests the reads posted, and the stat request itself.
    let posted = requests(&b) - before;
    assert!(posted <= 12, "{posted} requests for {SENT} datagrams");
}

/// An event loop of its own sleeps on the session's eventfd beside its
/// own descriptors: netd signals it when data arrives. What arrived can
/// then be counted, peeked at and read again, and a read that may not
/// wait says `WouldBlock` once it is taken.
#[test]
fn an_outside_loop_is_woken_and_arrived_data_is_peeked_counted_and_read() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (mut writer, reader, _a, b) = pair(&netd, 9420);
    assert_eq!(reader.unread().unwrap(), 0);
    let mut buf = [0u8; 64];
    assert_eq!(reader.read_with(&mut buf, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    let fd = b.prepare_wait().unwrap().expect("nothing arrived: sleep");
    writer.write_all(b"hello world").unwrap();
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    assert_eq!(unsafe { libc::poll(&mut p, 1, 5000) }, 1, "netd never signalled the eventfd");
    b.finish_wait().unwrap();
    let deadline = Instant::now() + LIMIT;
    while reader.unread().unwrap() < 11 {
        assert!(Instant::now() < deadline, "the bytes never arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(reader.peek_with(&mut buf[..5], false).unwrap(), 5);
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(reader.unread().unwrap(), 11, "a peek takes nothing");
    assert_eq!(reader.read_with(&mut buf, false).unwrap(), 11);
    assert_eq!(&buf[..11], b"hello world");
    assert_eq!(reader.read_with(&mut buf, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(reader.peek_with(&mut buf, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(reader.unread().unwrap(), 0);
}

/// A listener keeps an accept posted: connections netd accepts wait in
/// the client's queue, so readiness and a non-blocking accept need no
/// request, and a listener closed with a connection nobody took resets it
/// (its peer sees the reset).
#[test]
fn a_listener_accepts_ahead_and_resets_what_nobody_took() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (a, b) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&b, at(9480)).expect("listen");
    listener.set_nonblocking(true).unwrap();
    let ready = |limit: Duration| {
        let mut entries = [PollEntry { socket: listener.socket_id(), interest: READABLE, ready: 0 }];
        poll(&b, &mut entries, Some(limit)).unwrap() == 1
    };
    assert!(!ready(Duration::ZERO));
    let connect = || TcpStream::connect_timeout_via(&a, &SocketAddr::V4(at(9480)), LIMIT).expect("connect");
    let (first, _second) = (connect(), connect());
    let mut taken = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while taken.len() < 2 {
        assert!(Instant::now() < deadline, "the connections never came");
        if ready(LIMIT) {
            taken.push(listener.accept().expect("ready: a connection waits").0);
        }
    }
    // Nothing waits: looking and trying ask netd nothing.
    let before = requests(&b);
    for _ in 0..100 {
        assert!(!ready(Duration::ZERO));
        assert!(matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
    }
    assert_eq!(requests(&b) - before, 1, "only the stat's own request");
    (&first).write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    (&taken[0]).read_exact(&mut one).unwrap();

    // A third connection netd accepts and the application never takes.
    let third = connect();
    assert!(ready(LIMIT), "the third connection never waited");
    drop(listener);
    third.set_read_timeout(Some(LIMIT)).unwrap();
    let mut buf = [0u8; 8];
    let r = (&third).read(&mut buf);
    assert!(matches!(&r, Err(e) if e.kind() == ErrorKind::ConnectionReset), "the unclaimed connection: {r:?}");
}

/// An outside event loop that found nothing ready is not put to sleep
/// over a completion already on the ring (it may have made a socket
/// ready): `prepare_wait` leaves it there and says to look again.
#[test]
fn a_completion_on_the_ring_keeps_an_outside_loop_awake() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (mut writer, reader, _a, b) = pair(&netd, 9490);
    let mut buf = [0u8; 8];
    assert_eq!(reader.read_with(&mut buf, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    writer.write_all(b"x").unwrap();
    // Time for netd to complete the reader's posted receive; the reader's
    // session is not touched meanwhile, so the completion waits on its ring.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(b.prepare_wait().unwrap(), None, "asked to sleep over a waiting completion");
    assert_eq!(reader.read_with(&mut buf, false).unwrap(), 1);
}

/// A connect started without waiting: netd's answer arrives as a
/// completion, and the stream it gives carries bytes; a `Connecting`
/// dropped before it is finished has its connection closed by the
/// session's next call once netd answered (the accepted side reads the
/// end or a reset), so nothing is left behind in netd.
#[test]
fn a_connect_started_without_waiting_is_finished_or_closed() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (a, b) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&b, at(9500)).expect("listen");
    let mut pending = TcpStream::connect_start_via(&a, at(9500)).expect("connect started");
    let deadline = Instant::now() + LIMIT;
    while !pending.is_done().unwrap() {
        assert!(Instant::now() < deadline, "netd never answered the connect");
        std::thread::sleep(Duration::from_millis(1));
    }
    let stream = pending.try_finish().unwrap().expect("done: the stream");
    assert!(pending.try_finish().is_err(), "finished once only");
    let (accepted, _) = listener.accept().unwrap();
    (&stream).write_all(b"ok").unwrap();
    let mut two = [0u8; 2];
    (&accepted).read_exact(&mut two).unwrap();
    assert_eq!(&two, b"ok");

    drop(TcpStream::connect_start_via(&a, at(9500)).expect("a second connect started"));
    let (orphan, _) = listener.accept().expect("netd still accepts it");
    // netd's answer to the dropped connect has come (the connection is
    // established); the session's next call takes it and closes it.
    std::thread::sleep(Duration::from_millis(100));
    a.nop().unwrap();
    orphan.set_read_timeout(Some(LIMIT)).unwrap();
    let mut buf = [0u8; 4];
    let r = (&orphan).read(&mut buf);
    assert!(
        matches!(r, Ok(0)) || matches!(&r, Err(e) if e.kind() == ErrorKind::ConnectionReset),
        "the abandoned connection stayed open: {r:?}"
    );
}

/// A client with many streams has their receives posted (they hold its
/// buffers): they do not use up the waiting requests a connect or an
/// accept needs, so its twentieth stream connects and is accepted.
#[test]
fn many_streams_posted_receives_leave_room_for_a_connect() {
    // Memory for every stream's buffers (64 MiB of engine pool, 32 MiB a
    // client), so that only the waiting requests are in question.
    let tune = support::Tune { engine_buffers: Some(32768), ..support::Tune::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::Loopback, tune, |c| c.client_memory = 32 << 20);
    let (a, b) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&b, at(9510)).expect("listen");
    let mut held = Vec::new();
    for i in 0..20 {
        let s = TcpStream::connect_timeout_via(&a, &SocketAddr::V4(at(9510)), LIMIT)
            .unwrap_or_else(|e| panic!("connect {i}: {e}"));
        let (t, _) = listener.accept().unwrap_or_else(|e| panic!("accept {i}: {e}"));
        held.push((s, t));
    }
    let (s, t) = &held[19];
    (&*s).write_all(b"last").unwrap();
    let mut four = [0u8; 4];
    (&*t).read_exact(&mut four).unwrap();
    assert_eq!(&four, b"last");
}

/// A client with more streams than its pool keeps receives posted for
/// (thirty to an echo, on a pool of 32 buffers whose receives posted
/// ahead leave a quarter free): a byte written on each, without waiting,
/// still finds a buffer to queue in, and the unposted streams are read
/// through netd, so `poll` finds every one readable once its echo came
/// back and each read takes its byte. Once twelve are closed, every
/// stream left has a receive posted ahead again.
#[test]
fn streams_past_the_pools_receives_are_read_through_netd() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::PeerLink, |c| c.client_memory = 32 << 20);
    let s = netd.connect();
    let echo = SocketAddr::V4(SocketAddrV4::new(PEER_ADDR, ECHO_PORT));
    let streams: Vec<TcpStream> = (0..30)
        .map(|i| TcpStream::connect_timeout_via(&s, &echo, LIMIT).unwrap_or_else(|e| panic!("connect {i}: {e}")))
        .collect();
    for (i, t) in streams.iter().enumerate() {
        let deadline = Instant::now() + LIMIT;
        let written = loop {
            match t.write_with(&[i as u8], false) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("stream {i}: no buffer to queue its byte in: {e}"),
            }
        };
        assert_eq!(written, 1);
        t.set_nonblocking(true).unwrap();
    }
    let deadline = Instant::now() + LIMIT;
    let mut unread: Vec<usize> = (0..streams.len()).collect();
    while !unread.is_empty() && Instant::now() < deadline {
        let mut asked: Vec<PollEntry> = unread
            .iter()
            .map(|&i| PollEntry { socket: streams[i].socket_id(), interest: READABLE, ready: 0 })
            .collect();
        poll(&s, &mut asked, Some(Duration::from_millis(100))).expect("poll");
        for (e, i) in asked.iter().zip(unread.clone()) {
            if e.ready & READABLE == 0 {
                continue;
            }
            let mut one = [0u8; 1];
            match (&streams[i]).read(&mut one) {
                Ok(1) => {
                    assert_eq!(one[0], i as u8, "stream {i}");
                    unread.retain(|&u| u != i);
                }
                Ok(n) => panic!("stream {i}: a read of {n}"),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("stream {i}: {e}"),
            }
        }
    }
    assert!(unread.is_empty(), "never read, though their echoes came: {unread:?}");

    let left: Vec<TcpStream> = streams.into_iter().skip(12).collect();
    let posted_ahead = |report: &str| {
        left.iter().all(|t| {
            let head = format!("socket {} client ", t.socket_id());
            report.lines().find(|l| l.starts_with(&head)).and_then(|l| stat_value(l, " waiting ")).unwrap_or(0) >= 1
        })
    };
    let deadline = Instant::now() + LIMIT;
    let mut report = s.stat().expect("stat");
    while !posted_ahead(&report) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        report = s.stat().expect("stat");
    }
    assert!(posted_ahead(&report), "a stream left without a receive posted ahead:\n{report}");
}

/// Which of `events` (`POLLIN`, `POLLOUT`) `poll` finds on `fd` within
/// `millis`.
fn fd_events(fd: std::os::fd::RawFd, events: i16, millis: i32) -> i16 {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, millis) };
    assert!(n >= 0, "{}", std::io::Error::last_os_error());
    p.revents & events
}

/// An unposted stream's readiness descriptor (`readiness_fd`, what
/// nagare-tokio waits on) says what netd says of its reads: not readable
/// while nothing waits in netd, readable once its echo came back, and not
/// again once a read found nothing, so that a task waiting on an idle
/// one sleeps. It is writable while the stream's send buffer has room.
#[test]
fn an_unposted_streams_descriptor_is_readable_only_while_netd_holds_data() {
    use std::os::fd::AsRawFd;
    let netd = NetdThread::start(Placement::Inline, Wire::PeerLink);
    let s = netd.connect();
    let echo = SocketAddr::V4(SocketAddrV4::new(PEER_ADDR, ECHO_PORT));
    let streams: Vec<TcpStream> = (0..30)
        .map(|i| TcpStream::connect_timeout_via(&s, &echo, LIMIT).unwrap_or_else(|e| panic!("connect {i}: {e}")))
        .collect();
    let t = streams.iter().find(|t| t.readiness_from_netd()).expect("an unposted stream among thirty on 32 buffers");
    t.set_nonblocking(true).unwrap();
    let lent = t.readiness_fd().expect("a descriptor");
    let fd = lent.as_raw_fd();
    // Longer than a watch waits in netd before it is made again.
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(fd_events(fd, libc::POLLIN | libc::POLLOUT, 0), libc::POLLOUT, "idle: writable, not readable");
    for round in 0..3u8 {
        assert_eq!(t.write_with(&[round], false).expect("a byte queued"), 1);
        assert_eq!(
            fd_events(fd, libc::POLLIN, 5000),
            libc::POLLIN,
            "round {round}: never readable, though the echo came"
        );
        let mut one = [0u8; 1];
        let deadline = Instant::now() + LIMIT;
        loop {
            match (&*t).read(&mut one) {
                Ok(1) => break,
                Ok(n) => panic!("a read of {n}"),
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        assert_eq!(one[0], round);
        assert_eq!((&*t).read(&mut one).map_err(|e| e.kind()).err(), Some(ErrorKind::WouldBlock));
        let after = fd_events(fd, libc::POLLIN | libc::POLLOUT, 0);
        assert_eq!(after, libc::POLLOUT, "round {round}: readable after a read found nothing");
    }
}

/// A connect waiting for an answer that does not come (a host that never
/// answers ARP) does not hold the session: another thread's call on it
/// goes through meanwhile, and the connect gives up at its limit.
#[test]
fn a_connect_waiting_for_its_answer_holds_up_no_other_call() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let s = netd.connect();
    let waiting = s.clone();
    let nobody = SocketAddr::V4(SocketAddrV4::new(std::net::Ipv4Addr::new(10, 77, 0, 99), 80));
    let connect = std::thread::spawn(move || TcpStream::connect_timeout_via(&waiting, &nobody, Duration::from_secs(2)));
    std::thread::sleep(Duration::from_millis(300));
    s.nop().expect("a call beside the waiting connect");
    // Behind the connect, the call would have returned only once the
    // connect gave up.
    assert!(!connect.is_finished(), "the call waited behind the connect, or the connect did not wait");
    assert!(connect.join().expect("the connecting thread").is_err(), "nobody answered");
}

/// The zero-copy send calls never wait when asked not to: while every
/// send buffer is lent to a stream whose reader does not read,
/// `alloc_tx_with(false)` says `WouldBlock`; once the reader reads, a
/// buffer comes back and every lent byte arrives in order.
#[test]
fn a_zero_copy_sender_that_may_not_wait_is_told_would_block() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, mut reader, a, _b) = pair(&netd, 9410);
    let deadline = Instant::now() + LIMIT;
    let mut lent = 0usize;
    let refused = loop {
        match a.alloc_tx_with(false) {
            Ok(mut tx) => {
                let n = tx.len().min(8192);
                for (i, b) in tx[..n].iter_mut().enumerate() {
                    *b = ((lent + i) % 251) as u8;
                }
                lent += writer.send_buf(tx, n).expect("send_buf");
            }
            Err(e) => break e,
        }
        assert!(Instant::now() < deadline && lent < 64 << 20, "buffers never ran out: {lent} bytes lent");
    };
    assert_eq!(refused.kind(), ErrorKind::WouldBlock, "{refused}");
    assert!(lent > 0, "nothing was lent before the refusal");
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = vec![0u8; lent];
    reader.read_exact(&mut got).expect("every lent byte arrives");
    assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "the stream's bytes differ");
    let back = (0..200).find_map(|_| match a.alloc_tx_with(false) {
        Ok(tx) => Some(tx),
        Err(_) => {
            std::thread::sleep(Duration::from_millis(10));
            None
        }
    });
    assert!(back.is_some(), "no send buffer came back once the reader read");
}

/// A thread waiting for a completion does not hold the session: while one
/// thread waits on the ticket of a lent send that the reader's full window
/// holds back, another thread's call on the same session is answered.
#[test]
fn a_thread_waiting_for_a_completion_holds_up_no_other_call() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (writer, mut reader, a, _b) = pair(&netd, 9420);
    let chunk = vec![7u8; 16384];
    let written = write_until_full(&writer, |_| &chunk);
    let mut tx = a.alloc_tx().expect("a send buffer");
    let lent = tx.len().min(8192);
    tx[..lent].fill(7);
    let ticket = writer.send_buf_async(tx, lent).expect("send_buf_async");
    let waiting = std::thread::spawn(move || ticket.wait());
    let (told, answer) = std::sync::mpsc::channel();
    let other = a.clone();
    std::thread::spawn(move || {
        let _ = told.send(other.stat().map(|r| r.len()));
    });
    let stat = answer.recv_timeout(LIMIT).expect("the other thread's call was held up by the waiting one");
    assert!(stat.expect("stat") > 0);
    assert!(!waiting.is_finished(), "the lent send completed before the reader read");
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = vec![0u8; written + lent];
    reader.read_exact(&mut got).expect("every byte arrives");
    waiting.join().unwrap().expect("the lent send completes once the reader read");
}

/// netd's TCP receive buffer is configurable: a connection starts with it
/// (as its stat line says), and its application keeps that much posted.
#[test]
fn a_configured_receive_buffer_is_every_new_connection_s() {
    let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, |c| c.tcp_recv_buffer = 1 << 20);
    let s = netd.connect();
    let listener = TcpListener::bind_via(&s, at(9470)).expect("listen");
    let writer = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9470)), LIMIT).expect("connect");
    let (reader, _) = listener.accept().expect("accept");
    assert_eq!(reader.recv_buffer_size().unwrap(), 1 << 20);
    assert_eq!(writer.recv_buffer_size().unwrap(), 1 << 20);
    let report = s.stat().expect("stat");
    let line = report.lines().find(|l| l.contains(" tcp local ") && l.contains(&at(9470).to_string())).expect("a line");
    assert_eq!(stat_value(line, " rcvbuf "), Some(1 << 20), "{line}");
}

/// A connection whose application reads as fast as data comes gets a
/// wider receive buffer, granted and charged to its client; one started
/// at the floor by a client charged past a quarter of its budget there
/// stays at it.
#[test]
fn a_receive_buffer_grows_as_far_as_its_client_s_budget_goes() {
    for (budget, grows) in [(8 << 20, true), (200 << 10, false)] {
        let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, move |c| {
            c.tcp_recv_buffer = 64 << 10;
            c.tcp_recv_buffer_max = 2 << 20;
            c.client_memory = budget;
        });
        let s = netd.connect();
        let listener = TcpListener::bind_via(&s, at(9475)).expect("listen");
        let writer = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9475)), LIMIT).expect("connect");
        let (mut reader, _) = listener.accept().expect("accept");
        let total = if grows { 16 << 20 } else { 2 << 20 };
        let sender = std::thread::spawn(move || (&writer).write_all(&vec![5u8; total]).map(move |()| writer));
        reader.set_read_timeout(Some(LIMIT)).unwrap();
        let mut got = vec![0u8; total];
        reader.read_exact(&mut got).expect("every byte arrives");
        let _writer = sender.join().unwrap().expect("the writer finished");
        let report = s.stat().expect("stat");
        let line = report
            .lines()
            .find(|l| l.contains(" tcp local ") && l.contains(&format!("local {}", at(9475))))
            .expect("the reader's line");
        let rcvbuf = stat_value(line, " rcvbuf ").unwrap();
        let rcvbuf_max = stat_value(line, " rcvbuf_max ").unwrap();
        let grown = stat_value(&report, "netd recv_buffers_grown ").unwrap();
        let charged = stat_value(&report, " memory ").unwrap();
        if grows {
            assert_eq!(rcvbuf_max, 2 << 20, "{line}");
            assert!(rcvbuf > 64 << 10, "{line}");
            // The reader keeps receives posted for the grown buffer, not
            // the one 64 KiB buffer it started with.
            assert!(stat_value(line, " waiting ").unwrap() > 1, "{line}");
            assert!(grown > 0, "{report}");
            // The client is charged the grant: both send buffers and the
            // writer's receive buffer besides the reader's.
            assert!(charged >= rcvbuf + 3 * (16 << 10), "{report}");
        } else {
            // The connections of a 200 KiB client start at the floor (an
            // eighth of its budget is less than their 320 KiB each), and
            // the four floors are more than a quarter of it: no growth.
            assert_eq!(rcvbuf, 16 << 10, "{line}");
            assert_eq!(rcvbuf_max, 2 << 20, "autotuning still runs: {line}");
            assert_eq!(grown, 0, "{report}");
            assert!(stat_value(&report, "netd recv_buffer_growth_refused ").unwrap() > 0, "{report}");
            assert!(charged <= 200 << 10, "{report}");
        }
    }
}

/// A connection whose application writes faster than its send buffer
/// drains gets a larger one, granted and charged to its client, as far as
/// the client's budget goes: a client already charged a quarter of it is
/// refused the growth (and the transfer still completes), and one whose
/// connections started at the floor grows them within that quarter.
#[test]
fn a_send_buffer_grows_as_far_as_its_client_s_budget_goes() {
    enum Case {
        Grows,
        Refused,
        StartedSmall,
    }
    for (budget, case) in [(16 << 20, Case::Grows), (200 << 10, Case::Refused), (400 << 10, Case::StartedSmall)] {
        let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, move |c| {
            c.client_memory = budget;
        });
        let s = netd.connect();
        let listener = TcpListener::bind_via(&s, at(9477)).expect("listen");
        let writer = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9477)), LIMIT).expect("connect");
        let (mut reader, _) = listener.accept().expect("accept");
        let start = writer.send_buffer_size().unwrap() as u64;
        let total = if matches!(case, Case::Grows) { 32 << 20 } else { 2 << 20 };
        let sender = std::thread::spawn(move || (&writer).write_all(&vec![6u8; total]).map(move |()| writer));
        reader.set_read_timeout(Some(LIMIT)).unwrap();
        let mut got = vec![0u8; total];
        reader.read_exact(&mut got).expect("every byte arrives");
        let writer = sender.join().unwrap().expect("the writer finished");
        let report = s.stat().expect("stat");
        let line = report
            .lines()
            .find(|l| l.contains(" tcp local ") && l.contains(&format!("remote {}", at(9477))))
            .expect("the writer's line");
        let sndbuf = stat_value(line, " sndbuf ").unwrap();
        let grown = stat_value(&report, "netd send_buffers_grown ").unwrap();
        let refused = stat_value(&report, "netd send_buffer_growth_refused ").unwrap();
        let charged = stat_value(&report, " memory ").unwrap();
        assert_eq!(writer.send_buffer_size().unwrap() as u64, sndbuf, "SO_SNDBUF is the size in force");
        match case {
            Case::Grows => {
                assert!(sndbuf > start, "{line}");
                assert!(grown > 0, "{report}");
                // The client is charged the grant besides its other buffers.
                assert!(charged >= sndbuf + 3 * (16 << 10), "{report}");
            }
            Case::Refused => {
                // Both connections start at the floor (an eighth of 200
                // KiB is less than their 512 KiB each), and their four
                // floors are more than a quarter of it: no growth.
                assert_eq!(start, 16 << 10, "{line}");
                assert_eq!(sndbuf, start, "{line}");
                assert_eq!(grown, 0, "{report}");
                assert!(refused > 0, "{report}");
                assert!(charged <= 200 << 10, "{report}");
            }
            Case::StartedSmall => {
                // Started at the floor, grown within a quarter of 400 KiB.
                assert_eq!(start, 16 << 10, "{line}");
                assert!(sndbuf > start, "{line}");
                assert!(grown > 0, "{report}");
                assert!(charged <= 400 << 10, "{report}");
            }
        }
    }
}

/// A poll is ended by a signal whose handler runs while it waits, as
/// `poll(2)` is, also when another thread of its session is the one
/// asleep on the session's eventfd.
#[test]
fn a_signal_ends_the_poll_of_a_second_waiting_thread() {
    extern "C" fn on_signal(_: libc::c_int) {}
    // SAFETY: a handler that does nothing, installed without SA_RESTART
    // for a signal no other test uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let s = netd.connect();
    let listener = TcpListener::bind_via(&s, at(9480)).expect("listen");
    let one = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9480)), LIMIT).expect("connect");
    let two = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(at(9480)), LIMIT).expect("connect");
    let (quiet_one, _) = listener.accept().expect("accept");
    let (quiet_two, _) = listener.accept().expect("accept");
    let first = {
        let s = s.clone();
        let id = quiet_one.socket_id();
        std::thread::spawn(move || poll(&s, &mut [PollEntry { socket: id, interest: READABLE, ready: 0 }], Some(LIMIT)))
    };
    // The first thread is the one asleep on the eventfd by now.
    std::thread::sleep(Duration::from_millis(200));
    let (told, answer) = std::sync::mpsc::channel();
    let second = {
        let s = s.clone();
        let id = quiet_two.socket_id();
        std::thread::spawn(move || {
            // SAFETY: the calling thread's own handle and number.
            let _ = told.send(unsafe { (libc::pthread_self(), libc::gettid()) });
            poll(&s, &mut [PollEntry { socket: id, interest: READABLE, ready: 0 }], Some(LIMIT))
        })
    };
    let (thread, tid) = answer.recv_timeout(LIMIT).expect("the second thread started");
    // Once the poll sleeps it holds signals back until it returns, so a
    // signal sent from then on cannot slip in between two of its sleeps
    // (sent before the poll began, its handler runs before, as with
    // `poll(2)`).
    let waited = Instant::now();
    // Where the kernel does not say, a fifth of a second stands in.
    while !in_ppoll(tid).unwrap_or(waited.elapsed() > Duration::from_millis(200)) {
        assert!(waited.elapsed() < LIMIT, "the second poll never slept");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: a live thread of this process, a signal with a handler.
    assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR2) }, 0);
    let started = Instant::now();
    let ended = second.join().expect("the second thread");
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::Interrupted), "after {:?}", started.elapsed());
    (&one).write_all(b"x").unwrap();
    assert_eq!(first.join().expect("the first thread").expect("the first poll"), 1);
    drop(two);
}

/// Whether thread `tid` of this process is in the `ppoll` system call
/// (`None` where `/proc` does not say).
fn in_ppoll(tid: libc::pid_t) -> Option<bool> {
    let now = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    Some(now.split_whitespace().next().and_then(|n| n.parse::<libc::c_long>().ok()) == Some(libc::SYS_ppoll))
}

/// A call that waits for a free buffer of its region (every one taken:
/// sends queued to a reader whose window is full, the rest held by the
/// application) lets the session go while it waits: another thread's call
/// goes through meanwhile, and the waiting one is done once buffers come
/// back.
#[test]
fn a_call_waiting_for_a_free_buffer_holds_up_no_other_call() {
    // Seven buffers: none kept back from sends; a small window, so that
    // the reader takes few of them.
    let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, |c| {
        c.buffers = 7;
        c.tcp_recv_buffer = 16 * 1024;
    });
    let (writer, mut reader, a, _b) = pair(&netd, 9740);
    let chunk = vec![0x5au8; 64 << 10];
    let written = write_until_full(&writer, |_| &chunk);
    // Every buffer that is free, or comes back while the window closes.
    let mut held = Vec::new();
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        match a.alloc_tx_with(false) {
            Ok(b) => held.push(b),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let (asked, said) = std::sync::mpsc::channel();
    let waiting = {
        let a = a.clone();
        std::thread::spawn(move || {
            let _ = asked.send(a.stat().map(|_| ()));
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(said.try_recv().is_err(), "the call found a free buffer: the test holds none back");
    let (nop_done, nop_said) = std::sync::mpsc::channel();
    {
        let a = a.clone();
        std::thread::spawn(move || {
            let _ = nop_done.send(a.nop());
        });
    }
    let Ok(nop) = nop_said.recv_timeout(LIMIT) else {
        // The session is held by the waiting call: what would let it go
        // cannot run here either.
        std::mem::forget((held, writer, a));
        panic!("another thread's call was held up by a call waiting for a buffer");
    };
    nop.expect("nop");
    drop(held);
    said.recv_timeout(LIMIT).expect("the waiting call is done once buffers are free").expect("stat");
    waiting.join().unwrap();
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = vec![0u8; written];
    reader.read_exact(&mut got).expect("every byte written");
    assert!(got.iter().all(|&b| b == 0x5a));
}
