//! Sockets held by several clients, as a child after `fork` holds its
//! parent's: a listener shared by one client and adopted by another
//! accepts there and stays open until its last holder closes it; a
//! stream handed over with bytes its first holder's receives had taken
//! loses none of them, in order, and outlives the client that shared it;
//! a UDP socket's holders each read whole datagrams, none twice, and send
//! from its address, and the socket passes to the adopter, PacketFlow's
//! view of it included, once its sharer is gone; a holder left alone,
//! with no other process's watched descriptor and no given-back bytes
//! waiting, takes its socket back, and its token names nothing then.

mod support;

use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare::poll::{poll, PollEntry, EXCLUSIVE, READABLE};
use nagare_netd::{PacketFlow, Placement};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;
use support::{stat_value, wait_for_report, NetdThread, Tune, Wire, LIMIT, NETD_ADDR};

fn at(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(NETD_ADDR, port)
}

/// A listener shared by one client and adopted by another accepts in the
/// adopter after the sharer closed its copy, and closes with the last.
#[test]
fn a_shared_listener_accepts_in_its_adopter_and_closes_with_the_last_holder() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9600)).expect("listen");
    let token = listener.share().expect("share");
    assert_ne!(token, 0);
    assert_eq!(listener.share().expect("a second share"), token, "one token per socket");
    let adopted = TcpListener::adopt_via(&child, token).expect("adopt");
    assert_eq!(adopted.local_addr().unwrap(), SocketAddr::V4(at(9600)));
    let report = child.stat().expect("stat");
    assert!(report.lines().any(|l| l.contains(" listener local ") && l.ends_with(" holders 2")), "{report}");
    drop(listener);
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9600)), LIMIT).expect("connect");
    let (mut inside, from) = adopted.accept().expect("the adopter accepts");
    assert_eq!(from, out.local_addr().unwrap());
    out.write_all(b"ping").unwrap();
    let mut got = [0u8; 4];
    inside.set_read_timeout(Some(LIMIT)).unwrap();
    inside.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
    drop(adopted);
    let refused = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9600)), LIMIT).err().expect("closed");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
}

/// A stream whose first holder's receives already took bytes is handed
/// over whole: the adopter reads those bytes first, then what comes
/// later, and keeps the connection after the sharing client is gone.
#[test]
fn a_shared_stream_loses_no_byte_and_outlives_its_sharer() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9610)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9610)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    out.write_all(b"hello").unwrap();
    // The bytes are in the parent's receives, not in netd.
    let mut e = [PollEntry { socket: inside.socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&parent, &mut e, Some(LIMIT)).expect("poll"), 1);
    assert_eq!(inside.unread().unwrap(), 5);
    let token = inside.share().expect("share");
    assert_eq!(inside.unread().unwrap(), 0, "the unread bytes went back to netd");
    let mut adopted = TcpStream::adopt_via(&child, token).expect("adopt");
    assert_eq!(adopted.peer_addr().unwrap(), out.local_addr().unwrap());
    assert_eq!(adopted.local_addr().unwrap(), SocketAddr::V4(at(9610)));
    // The sharing client goes, with every socket it had.
    drop((inside, listener, parent));
    std::thread::sleep(Duration::from_millis(200));
    out.write_all(b" world").unwrap();
    out.shutdown(std::net::Shutdown::Write).unwrap();
    adopted.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = String::new();
    adopted.read_to_string(&mut got).expect("read to the end");
    assert_eq!(got, "hello world");
    adopted.write_all(b"bye").unwrap();
    let mut back = [0u8; 3];
    out.set_read_timeout(Some(LIMIT)).unwrap();
    out.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"bye");
    let report = child.stat().expect("stat");
    assert_eq!(stat_value(&report, "netd clients_gone ").map(|n| n >= 1), Some(true), "{report}");
}

/// A token names nothing after its socket closed, and a listener's token
/// makes no stream.
#[test]
fn tokens_are_checked() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (a, b) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&a, at(9620)).expect("listen");
    let token = listener.share().expect("share");
    let wrong = TcpStream::adopt_via(&b, token).err().expect("a listener is no stream");
    assert_eq!(wrong.raw_os_error(), Some(libc::ENOTSOCK), "{wrong}");
    drop(listener);
    let gone = TcpListener::adopt_via(&b, token).err().expect("closed");
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT), "{gone}");
}

/// A descriptor for the socket connected to netd's watch socket, with
/// the token sent: what a process holding a shared socket's placeholder
/// does (the preload layer connects the placeholder itself).
fn watch(netd: &NetdThread, token: u64) -> std::os::unix::net::UnixStream {
    let mut w = std::os::unix::net::UnixStream::connect(nagare_request::share_watch_path(&netd.socket))
        .expect("netd's watch socket");
    w.write_all(&token.to_le_bytes()).unwrap();
    w
}

/// A shared stream whose every client let it go stays open while a
/// watched descriptor names it (a child that has not adopted it yet),
/// is adopted then, and closes with its FIN once the last holder closed
/// it and the descriptor was closed.
#[test]
fn a_watched_descriptor_keeps_a_shared_stream_until_it_is_closed() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9630)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9630)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let token = inside.share().expect("share");
    let placeholder = watch(&netd, token);
    // The parent lets go before the child adopts: the socket stays
    // charged to it meanwhile.
    drop(inside);
    let report = wait_for_report(&peer, "the parent let go", |r| {
        r.lines().any(|l| l.starts_with("client ") && l.contains(" tcp 0 listeners 1 "))
    });
    let parent_line = report.lines().find(|l| l.starts_with("client ") && l.contains(" listeners 1 ")).unwrap();
    let kept = stat_value(parent_line, " memory ").unwrap();
    assert!(kept > 0, "{report}");
    // Gone, the parent leaves it to netd.
    drop((listener, parent));
    wait_for_report(&peer, "the parent's charge became netd's", |r| stat_value(r, " unowned ") == Some(kept));
    let mut adopted = TcpStream::adopt_via(&child, token).expect("adopted after its sharer let go");
    out.write_all(b"still here").unwrap();
    let mut got = [0u8; 10];
    adopted.set_read_timeout(Some(LIMIT)).unwrap();
    adopted.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"still here");
    // Adopted from no holder, it is charged to its adopter, and once to
    // netd.
    let report = peer.stat().expect("stat");
    let socket = report
        .lines()
        .find(|l| l.starts_with("socket ") && l.contains(" tcp local ") && l.contains(":9630 remote"))
        .expect("its line");
    let client = stat_value(socket, " client ").expect("its client");
    let adopter = report.lines().find(|l| l.starts_with(&format!("client {client} "))).expect("the adopter's line");
    assert_eq!(stat_value(adopter, " memory "), Some(kept), "{report}");
    assert_eq!(stat_value(&report, " unowned "), Some(0), "the adopter pays now:\n{report}");
    let clients: u64 =
        report.lines().filter(|l| l.starts_with("client ")).filter_map(|l| stat_value(l, " memory ")).sum();
    assert_eq!(stat_value(&report, "memory charged "), Some(clients), "{report}");
    drop(adopted);
    // Closed by its last holder, the socket waits for the descriptor.
    out.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut byte = [0u8; 1];
    let early = out.read(&mut byte).expect_err("no FIN while a descriptor names the socket");
    assert_eq!(early.kind(), ErrorKind::WouldBlock, "{early}");
    drop(placeholder);
    out.set_read_timeout(Some(LIMIT)).unwrap();
    assert_eq!(out.read(&mut byte).expect("the FIN"), 0, "the socket closed once nothing named it");
    drop(out);
    wait_for_report(&peer, "every byte charged comes back", |r| stat_value(r, "memory charged ") == Some(0));
}

/// A watch with a token nobody shared holds nothing open: the socket
/// closes with its last holder.
#[test]
fn a_watch_for_an_unknown_token_holds_nothing() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, peer) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9640)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9640)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let token = inside.share().expect("share");
    let _stray = watch(&netd, token ^ 1);
    drop(inside);
    out.set_read_timeout(Some(LIMIT)).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(out.read(&mut byte).expect("the FIN"), 0);
}

/// A connection still being made is not shared (it may yet be refused or
/// time out, which takes it out of its table without a close).
#[test]
fn a_connection_still_being_made_is_not_shared() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let mut raw = support::RawClient::connect(&netd);
    let mut connect = raw.request(nagare_netd::Op::Connect);
    connect.aux[0] = nagare_netd::encode_addr(SocketAddrV4::new(std::net::Ipv4Addr::new(10, 77, 0, 99), 9));
    connect.flags |= nagare_request::NONBLOCK;
    let id = raw.call(connect).result().expect("a connect under way") as u32;
    let mut share = raw.request(nagare_netd::Op::Share);
    share.socket = id;
    assert_eq!(raw.call(share).result(), Err(libc::ENOTCONN));
}

/// A `CONNECT` naming a shared connection that has ended (its FINs
/// exchanged) fails and leaves it to its holder's close: the sharer takes
/// it back once that holder has closed it, as after any other holder's.
#[test]
fn a_connect_naming_an_ended_shared_connection_leaves_it_to_its_close() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, peer) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&peer, at(9694)).expect("listen");
    let stream = TcpStream::connect_timeout_via(&parent, &SocketAddr::V4(at(9694)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let mut raw = support::RawClient::connect(&netd);
    let mut adopt = raw.request(nagare_netd::Op::Adopt);
    adopt.aux[0] = stream.share().expect("share");
    let id = raw.call(adopt).result().expect("adopt") as u32;
    // The peer's FIN, then the raw holder's.
    drop(inside);
    let ended = |state: &'static str| {
        move |r: &str| r.lines().any(|l| l.contains(" tcp local ") && l.contains(":9694 state ") && l.contains(state))
    };
    wait_for_report(&peer, "the peer's FIN came", ended(" state close-wait "));
    let mut shutdown = raw.request(nagare_netd::Op::Shutdown);
    shutdown.socket = id;
    shutdown.aux[0] = nagare_request::SHUT_WRITE;
    assert_eq!(raw.call(shutdown).result(), Ok(0));
    wait_for_report(&peer, "the connection ended", ended(" state closed "));
    let mut connect = raw.request(nagare_netd::Op::Connect);
    connect.socket = id;
    connect.aux[0] = nagare_netd::encode_addr(at(9694));
    let asked = raw.call(connect).result();
    assert!(asked.is_err() && asked != Err(libc::EINVAL), "{asked:?}");
    assert!(!stream.reclaim().expect("a reclaim"), "the raw client holds it still");
    let mut close = raw.request(nagare_netd::Op::Close);
    close.socket = id;
    assert_eq!(raw.call(close).result(), Ok(0), "its holder closes it");
    assert!(reclaimed_soon(|| stream.reclaim()), "the sharer takes it back");
}

/// A shared connection whose last holder goes away without closing it
/// (its process exited) ends with a FIN, as a close would, not a reset.
#[test]
fn a_shared_connection_s_last_holder_leaving_ends_it_with_a_fin() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, peer) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9650)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9650)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let token = inside.share().expect("share");
    let mut child = support::RawClient::connect(&netd);
    let mut adopt = child.request(nagare_netd::Op::Adopt);
    adopt.aux[0] = token;
    child.call(adopt).result().expect("adopted");
    drop((inside, listener, parent));
    // The child goes without a close.
    drop(child);
    out.set_read_timeout(Some(LIMIT)).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(out.read(&mut byte).expect("an end, not a reset"), 0);
}

/// A UDP socket shared by one client and adopted by another: each holder
/// receives whole datagrams, none twice, one that may not wait finds
/// nothing without waiting, both send from the socket's address, and the
/// socket stays the adopter's once its sharer is gone.
#[test]
fn a_shared_udp_socket_serves_both_holders_and_outlives_its_sharer() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let sock = UdpSocket::bind_via(&parent, at(9660)).expect("bind");
    let out = UdpSocket::bind_via(&peer, at(9661)).expect("the peer's");
    out.set_read_timeout(Some(LIMIT)).unwrap();
    let token = sock.share().expect("share");
    assert_eq!(sock.share().expect("a second share"), token, "one token per socket");
    let adopted = UdpSocket::adopt_via(&child, token).expect("adopt");
    assert!(TcpStream::adopt_via(&child, token).is_err(), "a UDP socket is no stream");
    assert_eq!(adopted.local_addr().unwrap(), SocketAddr::V4(at(9660)));
    assert!(sock.is_shared() && adopted.is_shared());
    let report = child.stat().expect("stat");
    assert!(report.lines().any(|l| l.contains(" udp local ") && l.ends_with(" holders 2")), "{report}");
    sock.set_read_timeout(Some(LIMIT)).unwrap();
    adopted.set_read_timeout(Some(LIMIT)).unwrap();
    let mut buf = [0u8; 2048];
    let big: Vec<u8> = (0..1500u32).map(|i| (i * 7 + i / 256) as u8).collect();
    for (i, reader) in [&adopted, &sock, &adopted].into_iter().enumerate() {
        let said = [&big[..], &[i as u8; 3][..]].concat();
        out.send_to(&said, at(9660)).unwrap();
        let (n, from) = reader.recv_from(&mut buf).expect("a datagram");
        assert_eq!(&buf[..n], &said[..], "datagram {i}");
        assert_eq!(from, SocketAddr::V4(at(9661)));
    }
    // Nothing is there: a receive that may not wait says so, in either.
    for holder in [&sock, &adopted] {
        let none = holder.recv_from_with(&mut buf, false).expect_err("nothing to read");
        assert_eq!(none.kind(), ErrorKind::WouldBlock, "{none}");
    }
    for (holder, said) in [(&adopted, &b"from the child"[..]), (&sock, &b"from the parent"[..])] {
        holder.send_to(said, at(9661)).unwrap();
        let (n, from) = out.recv_from(&mut buf).expect("a datagram from a holder");
        assert_eq!((&buf[..n], from), (said, SocketAddr::V4(at(9660))));
    }
    drop((sock, parent));
    std::thread::sleep(Duration::from_millis(200));
    out.send_to(b"after", at(9660)).unwrap();
    let (n, _) = adopted.recv_from(&mut buf).expect("the adopter keeps it");
    assert_eq!(&buf[..n], b"after");
}

/// With PacketFlow's memory manager, a shared UDP socket is its sharer's
/// receiver, and once the sharer let go (closed it, or left without a
/// close) its adopter's: its queue may still grow to its priority's
/// maximum (a socket no client is known to hold keeps its size).
#[test]
fn a_shared_udp_socket_passes_to_its_adopter_in_packetflow() {
    let tune = Tune { packetflow: Some(PacketFlow::ALL), ..Tune::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::Loopback, tune, |_| {});
    let (closer, child) = (netd.connect(), netd.connect());
    let closed = UdpSocket::bind_via(&closer, at(9670)).expect("bind");
    let first = UdpSocket::adopt_via(&child, closed.share().expect("share")).expect("adopt");
    // A sharer that leaves without closing its socket.
    let mut leaver = support::RawClient::connect(&netd);
    let mut bind = leaver.request(nagare_netd::Op::UdpBind);
    bind.aux[0] = nagare_netd::encode_addr(at(9671));
    let id = leaver.call(bind).result().expect("bind") as u32;
    let mut share = leaver.request(nagare_netd::Op::Share);
    share.socket = id;
    let token = leaver.call(share).result().expect("share");
    let second = UdpSocket::adopt_via(&child, token).expect("adopt");
    let line = |s: &nagare::Session, port: u16| {
        let report = s.stat().expect("stat");
        let local = format!(" udp local {NETD_ADDR}:{port} ");
        let line = report.lines().find(|l| l.contains(&local)).map(str::to_owned);
        line.unwrap_or_else(|| panic!("no line for UDP port {port}: {report}"))
    };
    let grows = |l: &str| stat_value(l, " rcvbuf_max ") > stat_value(l, " rcvbuf ");
    assert!(grows(&line(&closer, 9670)), "{}", line(&closer, 9670));
    drop((closed, closer));
    drop(leaver);
    std::thread::sleep(Duration::from_millis(200));
    for port in [9670, 9671] {
        let after = line(&child, port);
        assert!(!after.contains(" holders "), "held by the adopter alone: {after}");
        assert!(grows(&after), "the adopter is the socket's receiver now: {after}");
    }
    drop((first, second));
}

/// Two threads read one shared stream: one waits for data while the other
/// keeps reading without waiting. netd's answers of nothing to the second
/// are its reads' alone: the waiting read goes on waiting, and gets the
/// bytes once they come.
#[test]
fn a_waiting_read_of_a_shared_stream_is_not_ended_by_another_thread_s_answer_of_nothing() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9680)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9680)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let adopted = std::sync::Arc::new(TcpStream::adopt_via(&child, inside.share().expect("share")).expect("adopt"));
    adopted.set_read_timeout(Some(LIMIT)).unwrap();
    let waiter = {
        let s = adopted.clone();
        std::thread::spawn(move || {
            let mut got = [0u8; 4];
            s.read_with(&mut got, true).map(|n| got[..n].to_vec())
        })
    };
    let until = std::time::Instant::now() + Duration::from_millis(300);
    let mut nothing = 0;
    while std::time::Instant::now() < until {
        let e = adopted.read_with(&mut [0u8; 4], false).expect_err("nothing to read yet");
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        nothing += 1;
    }
    assert!(nothing > 0);
    out.write_all(b"data").unwrap();
    let got = waiter.join().expect("the waiting thread");
    assert_eq!(got.expect("the waiting read gets the bytes"), b"data");
}

/// Two threads of one session sleep over different shared sockets: each
/// has netd answer when its own is ready (`wake_when_ready`), so data for
/// the second wakes the session's sleep though the first's is still
/// asked about.
#[test]
fn wake_when_ready_for_two_lists_wakes_for_either() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9690)).expect("listen");
    let mut outs = Vec::new();
    let mut adopted = Vec::new();
    for _ in 0..2 {
        let out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9690)), LIMIT).expect("connect");
        let (inside, _) = listener.accept().expect("accept");
        adopted.push(TcpStream::adopt_via(&child, inside.share().expect("share")).expect("adopt"));
        outs.push(out);
    }
    let long = Duration::from_secs(30);
    for s in &adopted {
        let entry = PollEntry { socket: s.socket_id(), interest: READABLE, ready: 0 };
        nagare::poll::wake_when_ready(&child, &[entry], long).expect("wake when ready");
    }
    outs[1].write_all(b"second").unwrap();
    if let Some(fd) = child.prepare_wait().expect("prepare") {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd, valid for the call.
        let n = unsafe { libc::poll(&mut p, 1, LIMIT.as_millis() as i32) };
        assert_eq!(n, 1, "the session's sleep was not woken by data for the second list");
    }
    child.finish_wait().expect("finish");
    let mut e = [PollEntry { socket: adopted[1].socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&child, &mut e, Some(Duration::ZERO)).expect("poll"), 1);
}

/// A wait prepared after a look at readiness is not made when completions
/// were taken off the rings since the look: one that delivered data to a
/// socket with a path (taken by `wake_when_ready` on its way, or by a
/// call of another thread) is no longer there for `prepare_wait` to find,
/// so a loop that slept then would sleep past the data (an event loop
/// over a shared listener and its own connections, as nginx's workers
/// are).
#[test]
fn a_wait_prepared_after_a_look_is_not_made_when_completions_were_taken_since() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, worker, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9697)).expect("listen");
    let adopted = TcpListener::adopt_via(&worker, listener.share().expect("share")).expect("adopt");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9697)), LIMIT).expect("connect");
    let (inside, _) = adopted.accept().expect("accept");
    let mut e = [PollEntry { socket: inside.socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&worker, &mut e, Some(Duration::ZERO)).expect("poll"), 0, "nothing to read yet");
    // The look, and its count.
    let seen = worker.collected().expect("count");
    out.write_all(b"request").unwrap();
    // The data's completion is taken on the way to the sleep (as a
    // `wake_when_ready` or another thread's call would): here by a look
    // at another socket, until it came.
    let mut other = [PollEntry { socket: adopted.socket_id(), interest: READABLE, ready: 0 }];
    let deadline = std::time::Instant::now() + LIMIT;
    while inside.unread().unwrap() == 0 {
        assert!(std::time::Instant::now() < deadline, "the data's completion never came");
        poll(&worker, &mut other, Some(Duration::ZERO)).expect("poll");
    }
    assert!(worker.collected().expect("count") != seen);
    assert_eq!(worker.prepare_wait_after(seen).expect("prepare"), None, "a sleep past the data");
    let now = worker.collected().expect("count");
    let fd = worker.prepare_wait_after(now).expect("prepare");
    assert!(fd.is_some(), "nothing was taken since: the wait is made");
    worker.finish_wait().expect("finish");
    assert_eq!(poll(&worker, &mut e, Some(Duration::ZERO)).expect("poll"), 1, "the data is there to read");
}

/// Two clients holding a listener on `port` that a third shared, each
/// with a thread waiting in a `POLL` of it with `EXCLUSIVE`, as two
/// workers' epoll sets watching it with `EPOLLEXCLUSIVE` (each thread
/// sends its index and its poll's answer on `answers`), and a fourth
/// client to connect from. The holders' sessions are kept (`workers`), so
/// that a holder that lets its listener go stays a client.
struct TwoWaiting {
    peer: nagare::Session,
    workers: [nagare::Session; 2],
    adopted: [Option<TcpListener>; 2],
    answers: std::sync::mpsc::Receiver<(usize, std::io::Result<usize>)>,
}

fn two_waiting(netd: &NetdThread, port: u16) -> TwoWaiting {
    let (parent, peer) = (netd.connect(), netd.connect());
    let workers = [netd.connect(), netd.connect()];
    let listener = TcpListener::bind_via(&parent, at(port)).expect("listen");
    let token = listener.share().expect("share");
    let adopted = workers.each_ref().map(|w| Some(TcpListener::adopt_via(w, token).expect("adopt")));
    drop(listener);
    let (tell, answers) = std::sync::mpsc::channel();
    for (i, (w, l)) in workers.iter().cloned().zip(adopted.iter().flatten()).enumerate() {
        l.set_nonblocking(true).unwrap();
        let mut entry = [PollEntry { socket: l.socket_id(), interest: READABLE | EXCLUSIVE, ready: 0 }];
        let tell = tell.clone();
        std::thread::spawn(move || tell.send((i, poll(&w, &mut entry, Some(Duration::from_secs(30))))));
    }
    TwoWaiting { peer, workers, adopted, answers }
}

/// The index of the poll answered next, within `limit` (`None`: none),
/// which must have found the listener ready.
fn answered(answers: &std::sync::mpsc::Receiver<(usize, std::io::Result<usize>)>, limit: Duration) -> Option<usize> {
    let (i, ready) = answers.recv_timeout(limit).ok()?;
    assert_eq!(ready.expect("the poll"), 1, "poll {i} was answered with nothing ready");
    Some(i)
}

/// Two holders of a shared listener wait on it with `EXCLUSIVE`: one
/// connection wakes one of them, which accepts it, and the next
/// connection wakes the other, still waiting.
#[test]
fn a_connection_to_a_shared_listener_wakes_one_exclusive_wait() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let TwoWaiting { peer, adopted, answers, .. } = two_waiting(&netd, 9695);
    let adopted = adopted.map(|l| l.expect("a copy"));
    let first = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9695)), LIMIT).expect("connect");
    let woke = answered(&answers, LIMIT).expect("neither holder was woken");
    // The other is given time to be woken too, wrongly.
    assert_eq!(answered(&answers, Duration::from_millis(300)), None, "one connection woke both holders");
    let (_, from) = adopted[woke].accept().expect("the woken holder accepts");
    assert_eq!(from, first.local_addr().unwrap());
    // The other still waits, and the next connection is its.
    let second = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9695)), LIMIT).expect("connect");
    let other = answered(&answers, LIMIT).expect("the second connection did not wake the holder still waiting");
    assert_eq!(other, 1 - woke);
    let (_, from) = adopted[other].accept().expect("the other holder accepts");
    assert_eq!(from, second.local_addr().unwrap());
}

/// A holder woken for a connection that closes its copy of the listener
/// instead of accepting (an old worker leaving) leaves the connection to
/// the other holder, which is woken for it.
#[test]
fn a_woken_holder_that_lets_the_listener_go_leaves_its_connection_to_another() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let TwoWaiting { peer, workers: _kept, mut adopted, answers } = two_waiting(&netd, 9696);
    let out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9696)), LIMIT).expect("connect");
    let woke = answered(&answers, LIMIT).expect("neither holder was woken");
    drop(adopted[woke].take());
    let other = answered(&answers, LIMIT).expect("the other holder was not woken for the connection left");
    assert_eq!(other, 1 - woke);
    let l = adopted[other].as_ref().expect("the other's copy");
    let (_, from) = l.accept().expect("the other holder accepts");
    assert_eq!(from, out.local_addr().unwrap());
}

/// Two threads accept on one shared listener: one waits while the other
/// (the listener made non-blocking meanwhile) keeps accepting without
/// waiting. Each accept has netd's answer to its own `ACCEPT`: the
/// non-blocking ones say `WouldBlock` at once rather than wait behind the
/// waiting one, and their answers of nothing do not end the waiting one,
/// which gets the connection once it comes.
#[test]
fn a_waiting_accept_and_non_blocking_ones_on_a_shared_listener_each_get_their_own_answer() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9700)).expect("listen");
    let adopted = std::sync::Arc::new(TcpListener::adopt_via(&child, listener.share().expect("share")).expect("adopt"));
    drop(listener);
    let (accepted, waited) = std::sync::mpsc::channel();
    {
        let l = adopted.clone();
        std::thread::spawn(move || accepted.send(l.accept().map(|(_, from)| from)));
    }
    std::thread::sleep(Duration::from_millis(50));
    adopted.set_nonblocking(true).unwrap();
    let (looked, nothing) = std::sync::mpsc::channel();
    {
        let l = adopted.clone();
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + Duration::from_millis(300);
            let mut answers = Vec::new();
            while std::time::Instant::now() < until {
                answers.push(l.accept().err().map(|e| e.kind()));
            }
            looked.send(answers)
        });
    }
    let answers = nothing.recv_timeout(LIMIT).expect("non-blocking accepts waited behind the waiting one");
    assert!(!answers.is_empty() && answers.iter().all(|a| *a == Some(ErrorKind::WouldBlock)), "{answers:?}");
    let out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9700)), LIMIT).expect("connect");
    let from = waited.recv_timeout(LIMIT).expect("the waiting accept is done");
    assert_eq!(from.expect("the waiting accept gets the connection"), out.local_addr().unwrap());
}

/// Reads of a shared stream that give up waiting (a read time limit)
/// leave at most one receive waiting in netd, which the next read waits
/// on and which gets the data once it comes: timed-out reads do not each
/// leave a receive, and its buffer, behind.
#[test]
fn reads_of_a_shared_stream_that_time_out_leave_one_receive_waiting() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9710)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9710)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let mut adopted = TcpStream::adopt_via(&child, inside.share().expect("share")).expect("adopt");
    // The adopter's is then the only line of a socket on port 9710.
    drop((inside, listener, parent));
    let waiting_in_netd = || {
        let report = child.stat().expect("stat");
        let on = format!(" tcp local {NETD_ADDR}:9710 ");
        let line = report.lines().find(|l| l.contains(&on)).map(str::to_owned);
        let line = line.unwrap_or_else(|| panic!("no line for the adopter's socket: {report}"));
        stat_value(&line, " waiting ").expect("requests waiting")
    };
    adopted.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = [0u8; 16];
    for _ in 0..10 {
        let e = adopted.read(&mut buf).expect_err("nothing comes");
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    }
    let waiting = waiting_in_netd();
    assert_eq!(waiting, 1, "receives waiting in netd after 10 timed-out reads");
    out.write_all(b"late").unwrap();
    adopted.set_read_timeout(Some(LIMIT)).unwrap();
    let n = adopted.read(&mut buf).expect("the data");
    assert_eq!(&buf[..n], b"late");
}

/// A shared connection whose send buffer grows as one holder writes is
/// charged at its grown size to every holder, as adopting it charged
/// each: the holder that stays is not left charged less than the
/// connection may hold once the writer lets go.
#[test]
fn a_shared_connection_s_growth_is_charged_to_every_holder() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&peer, at(9690)).expect("listen");
    let writer = TcpStream::connect_timeout_via(&parent, &SocketAddr::V4(at(9690)), LIMIT).expect("connect");
    let (mut reader, _) = listener.accept().expect("accept");
    let token = writer.share().expect("share");
    let adopted = TcpStream::adopt_via(&child, token).expect("adopt");
    let start = writer.send_buffer_size().unwrap() as u64;
    let total = 16 << 20;
    let sender = std::thread::spawn(move || (&writer).write_all(&vec![8u8; total]).map(move |()| writer));
    reader.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = vec![0u8; total];
    reader.read_exact(&mut got).expect("every byte arrives");
    let writer = sender.join().unwrap().expect("the writer finished");
    let report = peer.stat().expect("stat");
    let holders: Vec<&str> = report.lines().filter(|l| l.starts_with("socket ") && l.ends_with(" holders 2")).collect();
    assert_eq!(holders.len(), 2, "{report}");
    let sndbuf = stat_value(holders[0], " sndbuf ").unwrap();
    assert!(sndbuf > start, "the send buffer grew: {report}");
    // Each holder holds that one socket alone: charged the same.
    let charged: Vec<u64> = holders
        .iter()
        .map(|l| {
            let client = stat_value(l, " client ").unwrap();
            let line = report.lines().find(|c| c.starts_with(&format!("client {client} "))).expect("its client");
            stat_value(line, " memory ").unwrap()
        })
        .collect();
    assert_eq!(charged[0], charged[1], "{report}");
    assert!(charged[0] >= sndbuf, "{report}");
    // netd holds the connection's buffers once, whoever holds it: the
    // peer's client line has its own side.
    let peer_line = report.lines().find(|l| l.starts_with("client ") && l.contains(" listeners 1 ")).expect("the peer");
    let netd_charged =
        stat_value(report.lines().find(|l| l.starts_with("memory charged ")).unwrap(), "memory charged ");
    assert_eq!(netd_charged, Some(charged[0] + stat_value(peer_line, " memory ").unwrap()), "{report}");
    drop((writer, adopted));
}

/// A holder's resize of a shared connection fits every holder's room:
/// the adopter, whose budget a wide UDP queue has taken, holds back the
/// send buffer its sharer asks for, as it would hold back its own.
#[test]
fn a_shared_connections_resize_fits_every_holders_room() {
    const BUDGET: usize = 2 << 20;
    let netd = NetdThread::start_configured(Placement::Inline, Wire::Loopback, |c| c.client_memory = BUDGET);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&peer, at(9691)).expect("listen");
    let stream = TcpStream::connect_timeout_via(&parent, &SocketAddr::V4(at(9691)), LIMIT).expect("connect");
    let _accepted = listener.accept().expect("accept");
    let adopted = TcpStream::adopt_via(&child, stream.share().expect("share")).expect("adopt");
    let before = stream.send_buffer_size().unwrap();
    let queue = UdpSocket::bind_via(&child, at(9692)).expect("bind");
    queue.set_recv_buffer_size(BUDGET).expect("the child's queue takes its room");
    stream.set_send_buffer_size(BUDGET / 2).expect("a resize");
    let after = stream.send_buffer_size().unwrap();
    assert!(after < BUDGET / 2 && after >= before, "{before} -> {after}");
    let report = peer.stat().expect("stat");
    for line in report.lines().filter(|l| l.starts_with("client ")) {
        assert!(stat_value(line, " memory ").unwrap() <= BUDGET as u64, "{report}");
    }
    drop((stream, adopted, queue));
}

/// Asks `reclaim` until it is granted, at most a bounded number of times
/// (another client's close or departure, or a descriptor's hang-up, is
/// seen by netd at its own pace): whether it was.
fn reclaimed_soon(reclaim: impl Fn() -> std::io::Result<bool>) -> bool {
    for _ in 0..200 {
        if reclaim().expect("a reclaim") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A shared stream's sharer takes it back only once its adopter let go;
/// its token names nothing then, its stat line has no holders, and the
/// stream serves on, read ahead again (a readiness descriptor is lent).
#[test]
fn a_holder_left_alone_takes_its_stream_back() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9720)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9720)), LIMIT).expect("connect");
    let (mut inside, _) = listener.accept().expect("accept");
    let not_shared = inside.reclaim().expect_err("never shared");
    assert_eq!(not_shared.raw_os_error(), Some(libc::EINVAL), "{not_shared}");
    let token = inside.share().expect("share");
    let adopted = TcpStream::adopt_via(&child, token).expect("adopt");
    assert!(!inside.reclaim().expect("asked"), "refused while the adopter holds it");
    assert!(!inside.reclaim().expect("asked"), "a refusal changes nothing");
    assert_eq!(inside.readiness_fd().err().map(|e| e.kind()), Some(ErrorKind::Unsupported), "still shared");
    drop(adopted);
    assert!(reclaimed_soon(|| inside.reclaim()), "granted once the adopter let go");
    assert!(!inside.is_shared());
    inside.readiness_fd().expect("a readiness descriptor, as a socket never shared has");
    let gone = TcpStream::adopt_via(&child, token).err().expect("the token names nothing");
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT), "{gone}");
    let report = parent.stat().expect("stat");
    assert!(!report.lines().any(|l| l.contains(" holders ")), "{report}");
    out.write_all(b"ahead").unwrap();
    // Read ahead: the bytes come to this process without a read.
    let mut e = [PollEntry { socket: inside.socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&parent, &mut e, Some(LIMIT)).expect("poll"), 1);
    assert_eq!(inside.unread().unwrap(), 5, "received ahead");
    let mut got = [0u8; 5];
    inside.set_read_timeout(Some(LIMIT)).unwrap();
    inside.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ahead");
    inside.write_all(b"back").unwrap();
    out.set_read_timeout(Some(LIMIT)).unwrap();
    out.read_exact(&mut got[..4]).unwrap();
    assert_eq!(&got[..4], b"back");
    let again = inside.share().expect("shared again");
    assert_ne!(again, token, "a fresh token");
}

/// A token watched by two descriptors (two processes that hold the
/// socket's placeholder) keeps its socket shared until one hangs up; the
/// grant ends the last watch.
#[test]
fn a_reclaim_waits_for_all_but_one_watched_descriptor() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, peer) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9730)).expect("listen");
    let _out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9730)), LIMIT).expect("connect");
    let (inside, _) = listener.accept().expect("accept");
    let token = inside.share().expect("share");
    let mut mine = watch(&netd, token);
    let theirs = watch(&netd, token);
    assert!(!inside.reclaim().expect("asked"), "refused while two descriptors are watched");
    drop(theirs);
    assert!(reclaimed_soon(|| inside.reclaim()), "granted once one hung up");
    mine.set_read_timeout(Some(LIMIT)).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(mine.read(&mut byte).expect("the watch's end"), 0, "netd ended the watch");
}

/// A listener taken back accepts ahead again: its readiness descriptor
/// says a connection waits.
#[test]
fn a_listener_taken_back_accepts_ahead_again() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9740)).expect("listen");
    let token = listener.share().expect("share");
    let adopted = TcpListener::adopt_via(&child, token).expect("adopt");
    assert!(!listener.reclaim().expect("asked"));
    drop((adopted, child));
    assert!(reclaimed_soon(|| listener.reclaim()), "granted once the adopter's client went");
    assert!(!listener.is_shared());
    listener.readiness_fd().expect("a readiness descriptor");
    let _out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9740)), LIMIT).expect("connect");
    let mut e = [PollEntry { socket: listener.socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&parent, &mut e, Some(LIMIT)).expect("poll"), 1);
    listener.set_nonblocking(true).unwrap();
    listener.accept().expect("accepted ahead");
}

/// Bytes given back at the share are not lost by a reclaim: granted
/// while they wait, they are still read first, then the stream's own, in
/// order.
#[test]
fn given_back_bytes_come_first_across_a_reclaim() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, peer) = (netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9750)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &SocketAddr::V4(at(9750)), LIMIT).expect("connect");
    let (mut inside, _) = listener.accept().expect("accept");
    out.write_all(b"hello").unwrap();
    let mut e = [PollEntry { socket: inside.socket_id(), interest: READABLE, ready: 0 }];
    assert_eq!(poll(&parent, &mut e, Some(LIMIT)).expect("poll"), 1);
    assert_eq!(inside.unread().unwrap(), 5);
    inside.share().expect("share");
    assert_eq!(inside.unread().unwrap(), 0, "given back");
    out.write_all(b" world").unwrap();
    assert!(inside.reclaim().expect("asked"), "granted with given-back bytes waiting");
    out.write_all(b"!").unwrap();
    let mut got = [0u8; 12];
    inside.set_read_timeout(Some(LIMIT)).unwrap();
    inside.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello world!");
}
