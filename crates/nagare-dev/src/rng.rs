//! A small deterministic pseudo-random generator for simulations.
//!
//! xoshiro256** (Blackman and Vigna), seeded through SplitMix64 so that any
//! 64-bit seed, including 0, gives a well-mixed state. Not for cryptography:
//! its only job is to make simulated impairments reproducible from a seed.

/// One step of SplitMix64: advances `state` and returns the next output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A xoshiro256** generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// A generator whose whole output sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        SimRng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform value in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `p` (clamped to `[0, 1]`). Draws nothing when
    /// `p <= 0`, so an unimpaired link consumes no randomness.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 || p.is_nan() {
            return false;
        }
        if p >= 1.0 {
            // Still draw, so the sequence does not depend on where p sits.
            self.next_u64();
            return true;
        }
        self.next_f64() < p
    }

    /// A uniform value in `[0, n)`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform value in `[lo, hi]` (inclusive); `lo` when `hi <= lo`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_values() {
        // First outputs of SplitMix64 seeded with 1234567 (reference C code).
        let mut s = 1234567u64;
        assert_eq!(splitmix64(&mut s), 6457827717110365317);
        assert_eq!(splitmix64(&mut s), 3203168211198807973);
        assert_eq!(splitmix64(&mut s), 9817491932198370423);
    }

    #[test]
    fn same_seed_same_sequence_different_seed_different() {
        let a: Vec<u64> = {
            let mut r = SimRng::new(42);
            (0..16).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SimRng::new(42);
            (0..16).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = SimRng::new(43);
            (0..16).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().any(|&x| x != 0));
    }

    #[test]
    fn uniform_helpers_stay_in_range_and_are_roughly_uniform() {
        let mut r = SimRng::new(7);
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            buckets[(f * 10.0) as usize] += 1;
            let b = r.below(6);
            assert!(b < 6);
            let w = r.between(10, 12);
            assert!((10..=12).contains(&w));
        }
        for &n in &buckets {
            assert!((9_400..10_600).contains(&n), "bucket count {n}");
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.between(5, 5), 5);
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        let hits = (0..100_000).filter(|_| r.chance(0.25)).count();
        assert!((24_000..26_000).contains(&hits), "{hits}");
    }
}
