//! nagare-tokio's sockets in tokio runtimes (multi-thread and
//! current-thread), through a netd running in a thread of the test: many
//! streams echoed at once, UDP ping-pong, a read woken by data that comes
//! later and not by another stream's traffic, a write that waits for a
//! free region buffer, a read cancelled while it waits, the end of a
//! stream, and the HTTP examples (one on the sockets directly, one with hyper).

#[path = "../../nagare-netd/tests/support/mod.rs"]
mod support;

#[path = "../examples/hello_http.rs"]
#[allow(dead_code)]
mod hello_http;

#[path = "../examples/hyper_hello.rs"]
#[allow(dead_code)]
mod hyper_hello;

use nagare_netd::Placement;
use nagare_tokio::{Session, TcpListener, TcpStream, UdpSocket};
use std::future::Future;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};
use support::{NetdThread, Wire, NETD_ADDR};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// The longest any test's whole run takes.
const LIMIT: Duration = Duration::from_secs(120);
/// The longest one step waits.
const STEP: Duration = Duration::from_secs(20);

const CLIENTS: usize = 20;
const BYTES: usize = 1 << 20;

fn at(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, port))
}

/// A netd with its own defaults for a client's region (1024 slots per
/// ring, 256 buffers) and sockets (1024) where the test's support sets
/// smaller ones, and an engine pool (64 MiB) that holds 40 connections'
/// default buffers.
fn start_netd() -> NetdThread {
    let tune = support::Tune { engine_buffers: Some(32 << 10), ..support::Tune::default() };
    NetdThread::start_tuned(Placement::Inline, Wire::Loopback, tune, |c| {
        let d = nagare_netd::NetdConfig::default();
        c.ring_slots = d.ring_slots;
        c.buffers = d.buffers;
        c.max_sockets = d.max_sockets;
    })
}

/// Runs `scenario` against a netd of its own, on a multi-thread runtime
/// (two workers) or a current-thread one.
fn run_on<F, Fut>(multi_thread: bool, scenario: F)
where
    F: FnOnce(NetdThread) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with(start_netd(), multi_thread, scenario);
}

/// [`run_on`] against `netd`.
fn run_with<F, Fut>(netd: NetdThread, multi_thread: bool, scenario: F)
where
    F: FnOnce(NetdThread) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut builder = if multi_thread {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2);
        b
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let rt = builder.enable_all().build().expect("a runtime");
    rt.block_on(async { timeout(LIMIT, scenario(netd)).await.expect("the test's time limit") });
}

/// The byte at `offset` of client `client`'s stream.
fn pattern(client: usize, offset: usize) -> u8 {
    ((client * 7 + offset * 13 + offset / 251) % 256) as u8
}

/// A small xorshift for chunk sizes: the same run every time.
struct Chunks(u64);

impl Chunks {
    fn next(&mut self, max: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        1 + (self.0 % max as u64) as usize
    }
}

/// 20 clients at once, each writing 1 MB in chunks of random sizes and
/// reading it all back, byte for byte, from a server task that echoes
/// each with `tokio::io::copy`. The clients share one session, the
/// server another.
async fn echo_twenty(netd: NetdThread) {
    let server = Session::new(netd.connect());
    let clients = Session::new(netd.connect());
    let listener = TcpListener::bind(&server, at(7100)).await.expect("listen");
    let acceptor = tokio::spawn(async move {
        let mut echoes = Vec::new();
        for _ in 0..CLIENTS {
            let (stream, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
            echoes.push(tokio::spawn(async move {
                let (mut from, mut to) = tokio::io::split(stream);
                let n = tokio::io::copy(&mut from, &mut to).await.expect("echo");
                to.shutdown().await.expect("the echo's FIN");
                n
            }));
        }
        let mut total = 0;
        for e in echoes {
            total += e.await.expect("an echo task");
        }
        total
    });
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let clients = clients.clone();
        tasks.push(tokio::spawn(async move {
            let stream = timeout(STEP, TcpStream::connect(&clients, at(7100))).await.expect("a connect in time");
            let (mut from, mut to) = tokio::io::split(stream.expect("connect"));
            let writer = tokio::spawn(async move {
                let mut chunks = Chunks(0x9e37_79b9_7f4a_7c15 ^ client as u64);
                let mut sent = 0;
                while sent < BYTES {
                    let n = chunks.next(40_000).min(BYTES - sent);
                    let chunk: Vec<u8> = (sent..sent + n).map(|o| pattern(client, o)).collect();
                    to.write_all(&chunk).await.expect("write");
                    sent += n;
                }
                to.shutdown().await.expect("FIN");
                to
            });
            let mut back = Vec::with_capacity(BYTES);
            timeout(STEP, from.read_to_end(&mut back)).await.expect("the echo in time").expect("read");
            let _to = writer.await.expect("the writer");
            assert_eq!(back.len(), BYTES, "client {client}'s echo length");
            let first_wrong = back.iter().enumerate().position(|(o, &b)| b != pattern(client, o));
            assert_eq!(first_wrong, None, "client {client}'s echo differs");
        }));
    }
    for t in tasks {
        t.await.expect("a client task");
    }
    let total = timeout(STEP, acceptor).await.expect("the server in time").expect("the server task");
    assert_eq!(total, (CLIENTS * BYTES) as u64);
}

/// 100 datagrams there and back, each answered before the next is sent.
async fn udp_ping_pong(netd: NetdThread) {
    let session = Session::new(netd.connect());
    let pinger = UdpSocket::bind(&session, at(7200)).await.expect("bind");
    let ponger = UdpSocket::bind(&session, at(7201)).await.expect("bind");
    let echo = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        for _ in 0..100 {
            let (n, from) = timeout(STEP, ponger.recv_from(&mut buf)).await.expect("a ping in time").expect("recv");
            ponger.send_to(&buf[..n], from).await.expect("pong");
        }
    });
    let mut buf = [0u8; 64];
    for i in 0..100u32 {
        let ping = format!("ping {i}");
        pinger.send_to(ping.as_bytes(), at(7201)).await.expect("ping");
        let (n, from) = timeout(STEP, pinger.recv_from(&mut buf)).await.expect("a pong in time").expect("recv");
        assert_eq!(&buf[..n], ping.as_bytes());
        assert_eq!(from, at(7201));
    }
    echo.await.expect("the echo task");
}

/// A read that starts before its data is written 200 ms later is woken by
/// netd's completion: with slices longer than the whole test, only the
/// eventfd can wake it, and it tries again a handful of times, not in a
/// loop.
async fn read_woken_by_later_data(netd: NetdThread) {
    let readers = Session::new(netd.connect());
    let writers = Session::new(netd.connect());
    let listener = TcpListener::bind(&readers, at(7300)).await.expect("listen");
    let mut writer = TcpStream::connect(&writers, at(7300)).await.expect("connect");
    let (mut reader, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    let before = readers.retries();
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        writer.write_all(b"late").await.expect("write");
        writer
    });
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = timeout(Duration::from_secs(5), reader.read(&mut buf)).await.expect("woken in time").expect("read");
    assert_eq!(&buf[..n], b"late");
    assert!(started.elapsed() >= Duration::from_millis(150), "the read did not wait for the data");
    let retries = readers.retries() - before;
    assert!(retries < 50, "the read tried {retries} times: it spun");
    drop(late.await.expect("the writer"));
}

/// A task waiting on one stream is not woken by another stream's
/// traffic on the same session: while it waits, a thread streams 8 MiB
/// over a second stream of the session (with the client library's
/// blocking calls, which count no retries here), whose completions wake
/// nothing of the first stream's; the waiting read tries a few times at
/// most, and reads its own data when it comes.
async fn wait_sleeps_through_other_traffic(netd: NetdThread) {
    const OTHER: usize = 8 << 20;
    let readers = Session::new(netd.connect());
    let writers = Session::new(netd.connect());
    let listener = TcpListener::bind(&writers, at(7400)).await.expect("listen");
    let mut waiter = TcpStream::connect(&readers, at(7400)).await.expect("connect");
    let (mut waiter_peer, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    let before = readers.retries();
    let waiting = tokio::spawn(async move {
        let mut buf = [0u8; 16];
        let n = timeout(STEP, waiter.read(&mut buf)).await.expect("woken in time").expect("read");
        buf[..n].to_vec()
    });
    let session = readers.inner().clone();
    let other = std::thread::spawn(move || {
        let mut s = nagare::net::TcpStream::connect_timeout_via(&session, &at(7400), STEP).expect("connect");
        std::io::Write::write_all(&mut s, &vec![5u8; OTHER]).expect("stream");
        s
    });
    let (mut other_peer, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    let mut buf = vec![0u8; 64 << 10];
    let mut got = 0;
    while got < OTHER {
        let n = timeout(STEP, other_peer.read(&mut buf)).await.expect("in time").expect("read");
        assert!(n > 0, "the stream ended after {got}");
        got += n;
    }
    let other = other.join().expect("the streaming thread");
    let during = readers.retries() - before;
    waiter_peer.write_all(b"mine").await.expect("write");
    assert_eq!(waiting.await.expect("the waiting task"), b"mine");
    assert!(during < 20, "the waiting read tried {during} times while another stream moved {OTHER} bytes");
    drop(other);
}

/// A write that waits for a free buffer of the session's pool sleeps:
/// a stream whose peer does not read takes every free buffer (of the
/// test's small pool, 32), and another stream's write (its own send
/// buffer empty) then waits, trying a few times at most, and ends once
/// that peer reads and buffers come back.
async fn write_waits_for_a_free_buffer(netd: NetdThread) {
    let client = Session::new(netd.connect());
    let server = Session::new(netd.connect());
    let listener = TcpListener::bind(&server, at(7600)).await.expect("listen");
    let mut hog = TcpStream::connect(&client, at(7600)).await.expect("connect");
    let (mut hog_peer, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    let mut healthy = TcpStream::connect(&client, at(7600)).await.expect("connect");
    let (_healthy_peer, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    hog.get_ref().expect("the stream").set_send_buffer_size(64 << 20).expect("a large send buffer");
    // The peer does not read: the write waits, its sends holding every
    // free buffer of the pool.
    let big = vec![3u8; 64 << 20];
    assert!(timeout(Duration::from_millis(300), hog.write_all(&big)).await.is_err(), "the hog's write waits");
    let before = client.retries();
    assert!(timeout(Duration::from_millis(300), healthy.write_all(b"x")).await.is_err(), "no free buffer: it waits");
    let during = client.retries() - before;
    assert!(during < 20, "the waiting write tried {during} times in 300 ms");
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(Ok(n)) = timeout(STEP, hog_peer.read(&mut buf)).await {
            if n == 0 {
                break;
            }
        }
    });
    timeout(STEP, healthy.write_all(b"x")).await.expect("buffers came back: the write ends").expect("write");
    drop(hog);
    timeout(STEP, reader).await.expect("the reader ends").expect("the reader");
}

/// Reading a stream whose peer closed gives what was sent, then 0.
async fn read_after_peer_closed(netd: NetdThread) {
    let session = Session::new(netd.connect());
    let listener = TcpListener::bind(&session, at(7400)).await.expect("listen");
    let mut client = TcpStream::connect(&session, at(7400)).await.expect("connect");
    let (mut server, peer) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    assert_eq!(peer, client.local_addr().expect("local"));
    assert_eq!(client.peer_addr().expect("peer"), at(7400));
    server.write_all(b"bye").await.expect("write");
    drop(server);
    let mut all = Vec::new();
    timeout(STEP, client.read_to_end(&mut all)).await.expect("the end in time").expect("read");
    assert_eq!(all, b"bye");
    let mut buf = [0u8; 8];
    assert_eq!(timeout(STEP, client.read(&mut buf)).await.expect("in time").expect("read"), 0);
}

/// A pending read cancelled (its future dropped by a timeout) loses
/// nothing and wedges nothing: the bytes written after it arrive whole at
/// the next read, and another task's read on the same session is woken
/// meanwhile.
async fn cancelled_read(netd: NetdThread) {
    let session = Session::new(netd.connect());
    let listener = TcpListener::bind(&session, at(7500)).await.expect("listen");
    let mut client = TcpStream::connect(&session, at(7500)).await.expect("connect");
    let (mut server, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    let mut other = TcpStream::connect(&session, at(7500)).await.expect("connect");
    let (mut other_server, _) = timeout(STEP, listener.accept()).await.expect("an accept in time").expect("accept");
    let mut buf = [0u8; 16];
    for _ in 0..5 {
        assert!(timeout(Duration::from_millis(30), client.read(&mut buf)).await.is_err(), "no data: it waits");
    }
    let woken = tokio::spawn(async move {
        let mut b = [0u8; 8];
        let n = timeout(STEP, other.read(&mut b)).await.expect("the other read in time").expect("read");
        b[..n].to_vec()
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    other_server.write_all(b"other").await.expect("write");
    assert_eq!(woken.await.expect("the other reader"), b"other");
    server.write_all(b"after cancel").await.expect("write");
    let mut got = Vec::new();
    while got.len() < 12 {
        let n = timeout(STEP, client.read(&mut buf)).await.expect("in time").expect("read");
        assert!(n > 0, "the stream ended");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"after cancel");
}

/// The example's server and client, through the test's netd.
async fn hello_http(netd: NetdThread) {
    let session = Session::new(netd.connect());
    let body = timeout(STEP, hello_http::run(&session, at(8080))).await.expect("in time").expect("the exchange");
    assert_eq!(body, hello_http::BODY);
}

/// hyper's server and client (the `hyper_hello` example) over the
/// crate's streams, through the test's netd.
async fn hyper_over_nagare(netd: NetdThread) {
    let session = Session::new(netd.connect());
    let body = timeout(STEP, hyper_hello::run(&session, at(8081))).await.expect("in time").expect("the exchange");
    assert_eq!(body, hyper_hello::BODY);
}

macro_rules! on_both {
    ($multi:ident, $current:ident, $scenario:ident) => {
        #[test]
        fn $multi() {
            run_on(true, $scenario);
        }

        #[test]
        fn $current() {
            run_on(false, $scenario);
        }
    };
}

on_both!(echo_twenty_multi_thread, echo_twenty_current_thread, echo_twenty);
on_both!(udp_ping_pong_multi_thread, udp_ping_pong_current_thread, udp_ping_pong);
on_both!(read_woken_multi_thread, read_woken_current_thread, read_woken_by_later_data);
on_both!(other_traffic_multi_thread, other_traffic_current_thread, wait_sleeps_through_other_traffic);

#[test]
fn free_buffer_multi_thread() {
    run_with(NetdThread::start(Placement::Inline, Wire::Loopback), true, write_waits_for_a_free_buffer);
}

#[test]
fn free_buffer_current_thread() {
    run_with(NetdThread::start(Placement::Inline, Wire::Loopback), false, write_waits_for_a_free_buffer);
}
on_both!(peer_closed_multi_thread, peer_closed_current_thread, read_after_peer_closed);
on_both!(hello_http_multi_thread, hello_http_current_thread, hello_http);
on_both!(cancelled_read_multi_thread, cancelled_read_current_thread, cancelled_read);
on_both!(hyper_multi_thread, hyper_current_thread, hyper_over_nagare);
