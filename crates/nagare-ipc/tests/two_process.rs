//! Two processes over one region: the parent is the server (creator), a
//! re-run of this test binary is the client (attacher). One million
//! descriptors go out through ring 1 and come back through ring 0, each
//! carrying a buffer whose ownership moves with it and whose bytes are
//! checked on both sides.

mod common;

use std::time::{Duration, Instant};

use common::{child_sock, role, sock_path, spawn_child, PARENT};
use nagare_ipc::{Client, Descriptor, Listener, Notifier, PeerCred, RegionConfig, WaitOutcome, Waiter};

const N: u64 = 1_000_000;
const BATCH: usize = 32;
const TIMEOUT: Duration = Duration::from_secs(20);

fn expected(i: u64) -> Descriptor {
    Descriptor {
        kind: 1,
        flags: (i % 3) as u32,
        id: i,
        buffer: 0, // filled in by the sender
        offset: (i % 64) as u32,
        len: 8,
        status: -(i as i32 % 100),
        aux: [i, i.wrapping_mul(3), !i, i ^ 0x5555],
    }
}

fn reply_of(d: &Descriptor) -> Descriptor {
    Descriptor { kind: 2, status: 0, aux: [d.aux[0] + 1, d.aux[1], d.aux[2], d.aux[3]], ..*d }
}

/// The client: checks each descriptor and its bytes, answers in the same buffer.
fn run_client() {
    let c = Client::connect(child_sock()).expect("connect");
    let parent: i32 = std::env::var(PARENT).unwrap().parse().unwrap();
    assert_eq!(c.server_cred.pid, parent, "SO_PEERCRED names the parent");
    assert_eq!(c.server_cred.uid, PeerCred::current().uid);
    let mut rx = c.region.consumer(1).unwrap();
    let mut tx = c.region.producer(0).unwrap();
    let mut pool = c.region.pool().unwrap();
    let mut waiter = Waiter::new(c.client_wakeup.try_clone().unwrap(), Duration::from_micros(50));
    let mut notifier = Notifier::new(c.server_wakeup.try_clone().unwrap());
    let mut got = 0u64;
    let mut buf = [Descriptor::default(); BATCH];
    let mut out = Vec::with_capacity(BATCH);
    while got < N {
        match waiter.wait(&mut rx, Some(TIMEOUT)).expect("wait") {
            WaitOutcome::Ready(_) => {}
            WaitOutcome::TimedOut => panic!("client: nothing for {TIMEOUT:?} after {got}"),
        }
        let n = rx.pop_batch(&mut buf).expect("pop");
        out.clear();
        for d in &buf[..n] {
            let want = Descriptor { buffer: d.buffer, ..expected(got) };
            assert_eq!(*d, want, "descriptor {got}");
            let b = pool.take(d).expect("valid hand-over").expect("a buffer");
            let mut bytes = [0u8; 8];
            pool.read(b.index, b.offset, &mut bytes).unwrap();
            assert_eq!(u64::from_le_bytes(bytes), got, "payload of {got}");
            pool.write(b.index, b.offset, &(!got).to_le_bytes()).unwrap();
            pool.give(b.index).unwrap();
            out.push(reply_of(d));
            got += 1;
        }
        let mut sent = 0;
        while sent < out.len() {
            sent += notifier.push_batch(&mut tx, &out[sent..]).expect("push");
        }
    }
    // Everything went back to the server.
    assert_eq!(pool.counts(), (128, 0, 128));
    eprintln!("client: waits {:?}, wake-ups sent {:?}", waiter.stats(), notifier.stats());
}

#[test]
fn a_million_descriptors_cross_two_processes() {
    if role().as_deref() == Some("client") {
        return run_client();
    }
    let path = sock_path("million");
    let mut l = Listener::bind(&path, RegionConfig::pair(256, 256, 2048)).unwrap();
    let mut child = spawn_child("a_million_descriptors_cross_two_processes", "client", &path);
    let s = l.accept().expect("accept");
    assert_eq!(s.cred.pid, child.id() as i32, "SO_PEERCRED names the child");
    assert_eq!(s.cred.uid, PeerCred::current().uid);

    let mut tx = s.region.producer(1).unwrap();
    let mut rx = s.region.consumer(0).unwrap();
    let mut pool = s.region.pool().unwrap();
    let mut notifier = Notifier::new(s.client_wakeup.try_clone().unwrap());
    let mut waiter = Waiter::new(s.server_wakeup.try_clone().unwrap(), Duration::from_micros(50));
    let (mut sent, mut recvd) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(BATCH);
    let mut buf = [Descriptor::default(); BATCH];
    let start = Instant::now();
    while recvd < N {
        // Send what buffers and ring space allow.
        let room = tx.free().unwrap() as usize;
        batch.clear();
        while sent + (batch.len() as u64) < N && batch.len() < room.min(BATCH) {
            let Some(b) = pool.alloc() else { break };
            let i = sent + batch.len() as u64;
            let d = Descriptor { buffer: b, ..expected(i) };
            pool.write(b, d.offset, &i.to_le_bytes()).unwrap();
            pool.give(b).unwrap();
            batch.push(d);
        }
        if !batch.is_empty() {
            assert_eq!(notifier.push_batch(&mut tx, &batch).unwrap(), batch.len());
            sent += batch.len() as u64;
        }
        // Collect replies; sleep only when nothing more can be sent.
        let n = rx.pop_batch(&mut buf).unwrap();
        if n == 0 && (sent == N || pool.counts().0 == 0) {
            if let WaitOutcome::TimedOut = waiter.wait(&mut rx, Some(TIMEOUT)).unwrap() {
                let _ = child.kill();
                panic!("server: no reply for {TIMEOUT:?} at {recvd}");
            }
        }
        for d in &buf[..n] {
            let want = reply_of(&Descriptor { buffer: d.buffer, ..expected(recvd) });
            assert_eq!(*d, want, "reply {recvd}");
            let b = pool.take(d).unwrap().unwrap();
            let mut bytes = [0u8; 8];
            pool.read(b.index, b.offset, &mut bytes).unwrap();
            assert_eq!(u64::from_le_bytes(bytes), !recvd);
            pool.release(b.index).unwrap();
            recvd += 1;
        }
    }
    let elapsed = start.elapsed();
    let status = child.wait().unwrap();
    assert!(status.success(), "client failed: {status}");
    // The client is gone: the rendezvous socket says so.
    assert!(s.peer_gone());
    // Every buffer the server lent came back; the client's own half was never touched.
    assert_eq!(pool.counts(), (128, 0, 128));
    assert_eq!(pool.stats().rejected_owner + pool.stats().rejected_range + pool.stats().rejected_extent, 0);
    eprintln!(
        "server: {N} round trips in {elapsed:?} ({:.0} ns each); wake-ups {:?}; waits {:?}",
        elapsed.as_nanos() as f64 / N as f64,
        notifier.stats(),
        waiter.stats()
    );
}

/// The child is the server here; it is killed with SIGKILL while the client
/// is connected, and the client learns it from the rendezvous socket.
#[test]
fn server_death_is_seen_through_the_socket() {
    if role().as_deref() == Some("server") {
        let mut l = Listener::bind(child_sock(), RegionConfig::pair(16, 16, 256)).unwrap();
        let _conn = l.accept().expect("accept");
        // Wait to be killed.
        std::thread::sleep(Duration::from_secs(60));
        panic!("not killed");
    }
    let path = sock_path("death");
    let _ = std::fs::remove_file(&path);
    let mut child = spawn_child("server_death_is_seen_through_the_socket", "server", &path);
    let start = Instant::now();
    let c = loop {
        match Client::connect(&path) {
            Ok(c) => break c,
            Err(e) => {
                assert!(start.elapsed() < TIMEOUT, "cannot connect: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    assert_eq!(c.server_cred.pid, child.id() as i32);
    assert!(!c.peer_gone());
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    while !c.peer_gone() {
        assert!(killed.elapsed() < Duration::from_secs(1), "server death not seen within 1 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The region stays mapped and usable on our side; only the peer is gone.
    let mut tx = c.region.producer(0).unwrap();
    assert!(tx.push(&Descriptor::default()).unwrap());
    let _ = std::fs::remove_file(&path);
}
