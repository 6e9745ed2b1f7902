//! Notifier wake-up counts through the public API: the producer signals only
//! on an empty-to-non-empty edge, never while the consumer polls, and a
//! sleeping consumer is always woken.

use std::time::Duration;

use nagare_ipc::{eventfd, Descriptor, Notifier, NotifyStats, Region, RegionConfig, WaitOutcome, Waiter};

fn d(i: u64) -> Descriptor {
    Descriptor { id: i, ..Default::default() }
}

fn setup(spin: Duration) -> (Region, Region, Notifier, Waiter) {
    let r = Region::create("notify-it", RegionConfig::pair(1024, 0, 64)).unwrap();
    let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
    let efd = eventfd().unwrap();
    (r, a, Notifier::new(efd.try_clone().unwrap()), Waiter::new(efd, spin))
}

#[test]
fn a_burst_to_a_sleeper_costs_one_wakeup() {
    let (r, a, mut n, mut w) = setup(Duration::ZERO);
    let mut p = a.producer(0).unwrap();
    let mut c = r.consumer(0).unwrap();
    // The consumer is about to sleep: the ring is empty and it asks for wake-ups.
    assert_eq!(w.prepare_sleep(&mut c).unwrap(), None);
    for i in 0..1000 {
        n.push_batch(&mut p, &[d(i)]).unwrap();
    }
    assert_eq!(n.stats(), NotifyStats { sent: 1, suppressed_not_edge: 999, ..Default::default() });
    // The eventfd is readable: wait returns at once with the whole burst.
    assert_eq!(w.wait(&mut c, Some(Duration::from_secs(1))).unwrap(), WaitOutcome::Ready(1000));
    let mut buf = vec![Descriptor::default(); 1000];
    assert_eq!(c.pop_batch(&mut buf).unwrap(), 1000);
    assert!(buf.iter().enumerate().all(|(i, x)| x.id == i as u64));
}

#[test]
fn a_polling_consumer_gets_no_wakeups() {
    let (r, a, mut n, mut w) = setup(Duration::ZERO);
    let mut p = a.producer(0).unwrap();
    let mut c = r.consumer(0).unwrap();
    w.set_polling(&c);
    for i in 0..1000 {
        n.push_batch(&mut p, &[d(i)]).unwrap();
        assert_eq!(c.pop().unwrap(), Some(d(i)));
    }
    // Every push was an edge (the consumer had emptied the ring), none signalled.
    assert_eq!(n.stats(), NotifyStats { suppressed_polling: 1000, ..Default::default() });
}

#[test]
fn every_sleep_gets_exactly_one_wakeup() {
    let (r, a, mut n, mut w) = setup(Duration::ZERO);
    let mut p = a.producer(0).unwrap();
    let mut c = r.consumer(0).unwrap();
    const ROUNDS: u64 = 2000;
    let h = std::thread::spawn(move || {
        for i in 0..ROUNDS {
            let got = w.wait(&mut c, Some(Duration::from_secs(10))).unwrap();
            assert!(matches!(got, WaitOutcome::Ready(_)), "lost wake-up at {i}");
            assert_eq!(c.pop().unwrap(), Some(d(i)));
        }
        w.stats()
    });
    for i in 0..ROUNDS {
        n.push_batch(&mut p, &[d(i)]).unwrap();
        // Let the consumer empty the ring (and often fall asleep) before the next one.
        while p.free().unwrap() != p.capacity() {
            std::hint::spin_loop();
        }
        if i % 4 == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let ws = h.join().unwrap();
    let s = n.stats();
    // Each push found the ring empty: an edge, either signalled, masked, or
    // already taken by a consumer that was awake before the producer looked.
    assert_eq!(s.suppressed_not_edge, 0, "{s:?}");
    assert_eq!(s.sent + s.suppressed_polling + s.suppressed_taken, ROUNDS, "{s:?}");
    // No wake-up was wasted or lost: one per sleep, give or take the one a
    // consumer consumes after a wait that found the ring non-empty on re-check.
    assert!(s.sent >= ws.slept, "sent {} < slept {}", s.sent, ws.slept);
    assert!(ws.slept >= ROUNDS / 8, "the consumer should have slept often: {ws:?}");
    eprintln!("notifier {s:?}, waiter {ws:?}");
}
