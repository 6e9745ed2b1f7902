//! A hostile client: a re-run of this test binary connects, then
//!
//! 1. pushes well-formed ring traffic whose descriptors name buffers in
//!    every wrong way (out of range, not its own, handed over twice, bad
//!    extents) beside valid hand-overs, and tells the server how many of
//!    each it sent: the server must have accepted and rejected exactly those;
//! 2. writes random bytes into the ring heads and tails, the descriptor
//!    slots, the buffers and the region header, then dies.
//!
//! The server must get errors (never a panic, never an access outside the
//! region), see its rings marked broken, refuse to re-attach the damaged
//! header, and get every buffer back once the client is gone.

mod common;

use std::time::{Duration, Instant};

use common::{child_sock, role, sock_path, spawn_child, Rng};
use nagare_ipc::{
    Client, Descriptor, Listener, Notifier, RegionConfig, RegionError, RingError, WaitOutcome, Waiter, NO_BUFFER,
};

const END: u32 = 99;
const ACK: u32 = 98;
const BUFFERS: u32 = 256;
const BUF_SIZE: u32 = 2048;
const SLOTS: u32 = 64;

fn run_hostile() {
    let c = Client::connect(child_sock()).expect("connect");
    let mut tx = c.region.producer(0).unwrap();
    let mut rx = c.region.consumer(1).unwrap();
    let mut pool = c.region.pool().unwrap();
    let mut notifier = Notifier::new(c.server_wakeup.try_clone().unwrap());
    let mut waiter = Waiter::new(c.client_wakeup.try_clone().unwrap(), Duration::from_micros(20));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()));
    let mut given = Vec::new();
    // [valid, out of range, not owned, bad extent, no buffer]
    let mut tally = [0u64; 5];
    let mut push = |tx: &mut nagare_ipc::Producer, d: Descriptor| {
        while notifier.push_batch(tx, &[d]).expect("phase 1 ring") == 0 {
            std::thread::yield_now();
        }
    };
    for i in 0..20_000u64 {
        let mut d = Descriptor { kind: 1, id: i, aux: [rng.next(), rng.next(), 0, 0], ..Default::default() };
        match rng.below(5) {
            0 => {
                let Some(b) = pool.alloc() else { continue };
                let off = rng.below(u64::from(BUF_SIZE) + 1) as u32;
                let len = rng.below(u64::from(BUF_SIZE - off) + 1) as u32;
                pool.write(b, 0, &i.to_le_bytes()).unwrap();
                pool.give(b).unwrap();
                given.push(b);
                (d.buffer, d.offset, d.len) = (b, off, len);
                tally[0] += 1;
            }
            1 => {
                d.buffer = BUFFERS + rng.below(u64::from(NO_BUFFER - BUFFERS)) as u32;
                tally[1] += 1;
            }
            2 => {
                // The server's half, or a buffer already handed over.
                d.buffer = if given.is_empty() || rng.below(2) == 0 {
                    rng.below(u64::from(BUFFERS / 2)) as u32
                } else {
                    given[rng.below(given.len() as u64) as usize]
                };
                tally[2] += 1;
            }
            3 => {
                let Some(b) = pool.alloc() else { continue };
                d.buffer = b;
                if rng.below(2) == 0 {
                    d.offset = BUF_SIZE + 1 + rng.below(u64::from(u32::MAX - BUF_SIZE - 1)) as u32;
                    d.len = rng.next() as u32;
                } else {
                    d.offset = rng.below(u64::from(BUF_SIZE) + 1) as u32;
                    d.len = BUF_SIZE - d.offset + 1 + rng.below(u64::from(u32::MAX - BUF_SIZE)) as u32;
                }
                // Rejected, so still ours.
                pool.release(b).unwrap();
                tally[3] += 1;
            }
            _ => {
                d.buffer = NO_BUFFER;
                d.offset = rng.next() as u32;
                d.len = rng.next() as u32;
                tally[4] += 1;
            }
        }
        push(&mut tx, d);
        // Drain the server's replies so its ring never fills.
        while rx.pop().expect("phase 1 replies").is_some() {}
    }
    push(
        &mut tx,
        Descriptor {
            kind: END,
            aux: [tally[0], tally[1], tally[2], tally[3]],
            len: tally[4] as u32,
            buffer: NO_BUFFER,
            ..Default::default()
        },
    );
    // Wait for the server to acknowledge phase 1 before breaking things.
    let deadline = Instant::now() + Duration::from_secs(20);
    'ack: loop {
        assert!(Instant::now() < deadline, "no ack");
        if let WaitOutcome::Ready(_) = waiter.wait(&mut rx, Some(Duration::from_millis(100))).unwrap() {
            while let Some(d) = rx.pop().unwrap() {
                if d.kind == ACK {
                    break 'ack;
                }
            }
        }
    }

    // Phase 2: garbage everywhere, for a while.
    let layout = *c.region.layout();
    let ring0 = layout.ring_offsets[0];
    let ring1 = layout.ring_offsets[1];
    let end = Instant::now() + Duration::from_millis(300);
    let mut bytes = [0u8; 64];
    while Instant::now() < end {
        for b in bytes.iter_mut() {
            *b = rng.next() as u8;
        }
        match rng.below(100) {
            0..=49 => {
                // A descriptor published properly, then overwritten with garbage.
                let _ = tx.push(&Descriptor::default());
                let slot = u64::from(tx.head().wrapping_sub(1) & (SLOTS - 1));
                c.region.scribble_bytes(ring0 + 128 + slot * 64, &bytes);
            }
            50..=69 => c.region.scribble_bytes(rng.below(128), &bytes[..1 + rng.below(8) as usize]),
            70..=89 => c.region.scribble_bytes(layout.buffer_offset + rng.below(u64::from(BUFFERS * BUF_SIZE)), &bytes),
            90..=94 => tx.scribble_head(rng.next() as u32),
            95..=97 => rx.scribble_tail(rng.next() as u32),
            _ => {
                // Random bytes over a whole control line.
                let ring = if rng.below(2) == 0 { ring0 } else { ring1 };
                c.region.scribble_bytes(ring + 64 * rng.below(2), &bytes);
            }
        }
        if rng.below(16) == 0 {
            std::thread::sleep(Duration::from_micros(10));
        }
    }
    // The header is certainly garbage when we leave.
    c.region.scribble_bytes(0, &[0xa5; 8]);
    // Die without saying goodbye.
    std::process::exit(0);
}

#[test]
fn a_hostile_client_gets_errors_and_the_server_survives() {
    if role().as_deref() == Some("hostile") {
        return run_hostile();
    }
    let path = sock_path("hostile");
    let mut l = Listener::bind(&path, RegionConfig::pair(SLOTS, BUFFERS, BUF_SIZE)).unwrap();
    let mut child = spawn_child("a_hostile_client_gets_errors_and_the_server_survives", "hostile", &path);
    let s = l.accept().expect("accept");
    let mut rx = s.region.consumer(0).unwrap();
    let mut tx = s.region.producer(1).unwrap();
    let mut pool = s.region.pool().unwrap();
    let mut notifier = Notifier::new(s.client_wakeup.try_clone().unwrap());
    let mut waiter = Waiter::new(s.server_wakeup.try_clone().unwrap(), Duration::from_micros(20));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [Descriptor::default(); 16];
    let mut rx_err: Option<RingError> = None;
    let mut tx_err: Option<RingError> = None;
    let mut accepted = 0u64;
    let mut none = 0u64;
    let mut phase1_done = false;
    let mut garbage_accepted = 0u64;
    let mut gone_at: Option<Instant> = None;
    loop {
        assert!(Instant::now() < deadline, "server loop did not end");
        if gone_at.is_none() && s.peer_gone() {
            gone_at = Some(Instant::now());
        }
        // Keep going a little after the client died: the rings must still only give errors.
        if gone_at.is_some_and(|t| t.elapsed() > Duration::from_millis(50)) {
            break;
        }
        if rx_err.is_none() {
            let _ = waiter.wait(&mut rx, Some(Duration::from_millis(10)));
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
        let n = match rx.pop_batch(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                // The first violation may have been met inside `wait`.
                rx_err.get_or_insert(rx.broken().unwrap_or(e));
                assert_eq!(rx.pop_batch(&mut buf), Err(RingError::Broken));
                0
            }
        };
        let mut replies = Vec::new();
        for d in &buf[..n] {
            if !phase1_done && d.kind == END {
                let st = pool.stats();
                assert_eq!(accepted, d.aux[0], "valid hand-overs accepted");
                assert_eq!(st.rejected_range, d.aux[1], "out-of-range indices rejected");
                assert_eq!(st.rejected_owner, d.aux[2], "buffers not the client's rejected");
                assert_eq!(st.rejected_extent, d.aux[3], "bad extents rejected");
                assert_eq!(none, u64::from(d.len), "descriptors without a buffer");
                phase1_done = true;
                replies.push(Descriptor { kind: ACK, buffer: NO_BUFFER, ..Default::default() });
                continue;
            }
            match pool.take(d) {
                Ok(Some(b)) => {
                    if phase1_done {
                        garbage_accepted += 1;
                    } else {
                        accepted += 1;
                    }
                    // Read what the descriptor claims, bounded by the validated extent.
                    let mut tmp = vec![0u8; b.len as usize];
                    pool.read(b.index, b.offset, &mut tmp).unwrap();
                    pool.release(b.index).unwrap();
                }
                Ok(None) => {
                    if !phase1_done {
                        none += 1;
                    }
                }
                Err(_) => {}
            }
            replies.push(Descriptor { kind: 2, id: d.id, buffer: NO_BUFFER, ..Default::default() });
        }
        if tx_err.is_none() {
            // `free` reads (and validates) the client's tail every time.
            let r = tx.free().and_then(|_| notifier.push_batch(&mut tx, &replies));
            if let Err(e) = r {
                tx_err = Some(e);
                assert_eq!(tx.push(&Descriptor::default()), Err(RingError::Broken));
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "hostile child failed before phase 2: {status}");
    assert!(phase1_done, "phase 1 never ended");
    eprintln!("server: rx {rx_err:?}, tx {tx_err:?}, garbage accepted {garbage_accepted}, pool {:?}", pool.stats());
    assert!(
        matches!(rx_err, Some(e) if e != RingError::Broken),
        "random heads must break the request ring: {rx_err:?}"
    );
    assert!(tx_err.is_some(), "random tails must break the reply ring");
    // The damaged header is refused by a fresh attach.
    let again = nagare_ipc::Region::attach(s.region.fd().try_clone_to_owned().unwrap());
    assert!(matches!(again, Err(RegionError::BadMagic(_) | RegionError::BadHeader(_))), "{again:?}");
    // The client is gone: every buffer comes back.
    pool.reclaim_peer();
    assert_eq!(pool.counts(), (BUFFERS, 0, 0));
}
