//! Property tests: whatever a peer puts in a descriptor or a ring index, the
//! checks agree with a simple model and never panic.

use nagare_ipc::{Descriptor, PoolError, Region, RegionConfig, RingError, NO_BUFFER};
use proptest::prelude::*;

const BUFFERS: u32 = 16;
const SIZE: u32 = 512;

fn region() -> (Region, Region) {
    let r = Region::create("prop", RegionConfig::pair(8, BUFFERS, SIZE)).unwrap();
    let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
    (r, a)
}

/// Descriptor buffer fields drawn to hit the edges often.
fn field(limit: u32) -> impl Strategy<Value = u32> {
    prop_oneof![0..=limit + 1, Just(limit), Just(u32::MAX), Just(NO_BUFFER - 1), any::<u32>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `take` accepts a descriptor exactly when the model says the peer owns
    /// the buffer and the extent fits, and moves ownership only then.
    #[test]
    fn take_agrees_with_the_ownership_model(
        gives in proptest::collection::vec(0..BUFFERS, 0..12),
        descs in proptest::collection::vec((field(BUFFERS), field(SIZE), field(SIZE)), 1..40),
    ) {
        let (r, _a) = region();
        let mut pool = r.pool().unwrap();
        // Model: true = the peer owns it. The creator starts with the low half.
        let mut peer: Vec<bool> = (0..BUFFERS).map(|i| i >= BUFFERS / 2).collect();
        // Lend some of ours to the peer.
        let mut mine = Vec::new();
        while let Some(b) = pool.alloc() { mine.push(b); }
        for g in gives {
            if let Some(pos) = mine.iter().position(|&b| b == g) {
                pool.give(g).unwrap();
                peer[g as usize] = true;
                mine.remove(pos);
            }
        }
        let before = pool.stats();
        let mut rejected = 0;
        for (buffer, offset, len) in descs {
            let d = Descriptor { buffer, offset, len, ..Default::default() };
            let res = pool.take(&d);
            if buffer == NO_BUFFER {
                prop_assert_eq!(res, Ok(None));
            } else if buffer >= BUFFERS {
                prop_assert_eq!(res, Err(PoolError::OutOfRange(buffer)));
                rejected += 1;
            } else if !peer[buffer as usize] {
                prop_assert_eq!(res, Err(PoolError::NotPeerOwned(buffer)));
                rejected += 1;
            } else if u64::from(offset) + u64::from(len) > u64::from(SIZE) {
                let bad_extent = matches!(res, Err(PoolError::BadExtent { .. }));
                prop_assert!(bad_extent);
                rejected += 1;
            } else {
                let b = res.unwrap().unwrap();
                prop_assert_eq!((b.index, b.offset, b.len), (buffer, offset, len));
                peer[buffer as usize] = false;
            }
        }
        let after = pool.stats();
        let counted = (after.rejected_range + after.rejected_owner + after.rejected_extent)
            - (before.rejected_range + before.rejected_owner + before.rejected_extent);
        prop_assert_eq!(counted, rejected);
        let (_, _, held) = pool.counts();
        prop_assert_eq!(held as usize, peer.iter().filter(|&&p| p).count());
    }

    /// Random heads and tails written by the peer, mixed with honest
    /// traffic: every value the ends accept keeps the ring within its
    /// capacity, every other one is an error, and a broken ring stays broken.
    #[test]
    fn ring_indices_from_the_peer_are_checked(ops in proptest::collection::vec((0u8..6, any::<u32>()), 1..200)) {
        let (r, a) = region();
        let mut p = a.producer(0).unwrap();
        let mut c = r.consumer(0).unwrap();
        let mut pushed = 0u64;
        let mut popped = 0u64;
        let mut scribbled = false;
        for (op, v) in ops {
            match op {
                0 | 1 => {
                    if let Ok(true) = p.push(&Descriptor { id: pushed, ..Default::default() }) { pushed += 1; }
                }
                2 | 3 => {
                    match c.pop() {
                        Ok(Some(d)) => {
                            if !scribbled { prop_assert_eq!(d.id, popped); }
                            popped += 1;
                        }
                        Ok(None) => {}
                        Err(e) => prop_assert!(scribbled || e == RingError::Broken, "{e:?}"),
                    }
                }
                4 => { p.scribble_head(v); scribbled = true; }
                _ => { c.scribble_tail(v); scribbled = true; }
            }
            if let Ok(n) = c.available() { prop_assert!(n <= c.capacity()); }
            if let Ok(n) = p.free() { prop_assert!(n <= p.capacity()); }
            if c.broken().is_some() { prop_assert_eq!(c.pop(), Err(RingError::Broken)); }
            if p.broken().is_some() { prop_assert_eq!(p.push(&Descriptor::default()), Err(RingError::Broken)); }
            if !scribbled { prop_assert!(c.broken().is_none() && p.broken().is_none()); }
        }
    }
}
