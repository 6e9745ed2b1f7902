//! SipHash-2-4, keyed: the hash for tables an attacker can fill (TCP
//! four-tuples) and for RFC 6528 initial sequence numbers and SYN cookies.
//! A keyed hash makes collisions unpredictable, so demultiplexing stays a
//! constant-time lookup under a flood, and sequence numbers cannot be
//! guessed from earlier ones.

use core::hash::{BuildHasher, Hasher};

/// A 128-bit key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SipKey(pub u64, pub u64);

impl SipKey {
    /// Derives a key from a seed by running SplitMix64 twice; the caller
    /// supplies real randomness in the seed.
    pub fn from_seed(seed: u64) -> SipKey {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        SipKey(next(), next())
    }
}

/// SipHash-2-4 as a streaming [`Hasher`].
#[derive(Clone, Debug)]
pub struct SipHasher24 {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
    tail: u64,
    tail_len: usize,
    total_len: u64,
}

#[inline]
fn sip_round(v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64) {
    *v0 = v0.wrapping_add(*v1);
    *v1 = v1.rotate_left(13);
    *v1 ^= *v0;
    *v0 = v0.rotate_left(32);
    *v2 = v2.wrapping_add(*v3);
    *v3 = v3.rotate_left(16);
    *v3 ^= *v2;
    *v0 = v0.wrapping_add(*v3);
    *v3 = v3.rotate_left(21);
    *v3 ^= *v0;
    *v2 = v2.wrapping_add(*v1);
    *v1 = v1.rotate_left(17);
    *v1 ^= *v2;
    *v2 = v2.rotate_left(32);
}

impl SipHasher24 {
    /// A hasher keyed with `key`.
    pub fn new(key: SipKey) -> Self {
        SipHasher24 {
            v0: key.0 ^ 0x736f_6d65_7073_6575,
            v1: key.1 ^ 0x646f_7261_6e64_6f6d,
            v2: key.0 ^ 0x6c79_6765_6e65_7261,
            v3: key.1 ^ 0x7465_6462_7974_6573,
            tail: 0,
            tail_len: 0,
            total_len: 0,
        }
    }

    fn compress(&mut self, m: u64) {
        self.v3 ^= m;
        sip_round(&mut self.v0, &mut self.v1, &mut self.v2, &mut self.v3);
        sip_round(&mut self.v0, &mut self.v1, &mut self.v2, &mut self.v3);
        self.v0 ^= m;
    }
}

impl Hasher for SipHasher24 {
    fn write(&mut self, bytes: &[u8]) {
        self.total_len = self.total_len.wrapping_add(bytes.len() as u64);
        for &byte in bytes {
            self.tail |= u64::from(byte) << (8 * self.tail_len);
            self.tail_len += 1;
            if self.tail_len == 8 {
                let m = self.tail;
                self.compress(m);
                self.tail = 0;
                self.tail_len = 0;
            }
        }
    }

    fn finish(&self) -> u64 {
        let mut s = self.clone();
        let b = ((s.total_len & 0xff) << 56) | s.tail;
        s.compress(b);
        s.v2 ^= 0xff;
        for _ in 0..4 {
            sip_round(&mut s.v0, &mut s.v1, &mut s.v2, &mut s.v3);
        }
        s.v0 ^ s.v1 ^ s.v2 ^ s.v3
    }
}

/// Builds keyed SipHash hashers for hash maps.
#[derive(Clone, Copy, Debug)]
pub struct KeyedState(pub SipKey);

impl BuildHasher for KeyedState {
    type Hasher = SipHasher24;
    fn build_hasher(&self) -> SipHasher24 {
        SipHasher24::new(self.0)
    }
}

/// SipHash-2-4 of `bytes` under `key`.
pub fn siphash(key: SipKey, bytes: &[u8]) -> u64 {
    let mut h = SipHasher24::new(key);
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_vectors() {
        // The reference implementation's key 00..0f and messages 00..(n-1).
        let key =
            SipKey(u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]), u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]));
        let message: alloc::vec::Vec<u8> = (0..64u8).collect();
        assert_eq!(siphash(key, &message[..0]), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash(key, &message[..1]), 0x74f8_39c5_93dc_67fd);
        assert_eq!(siphash(key, &message[..8]), 0x93f5_f579_9a93_2462);
        assert_eq!(siphash(key, &message[..15]), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash(key, &message[..63]), 0x958a_324c_eb06_4572);
    }

    #[test]
    fn streaming_equals_one_shot_and_keys_matter() {
        let key = SipKey::from_seed(42);
        let mut h = SipHasher24::new(key);
        h.write(b"hello ");
        h.write(b"world, in pieces");
        assert_eq!(h.finish(), siphash(key, b"hello world, in pieces"));
        assert_ne!(siphash(SipKey::from_seed(43), b"x"), siphash(key, b"x"));
    }
}
