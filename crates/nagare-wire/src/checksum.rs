//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! [`Checksum`] accumulates the ones'-complement sum of a byte stream that
//! may arrive in pieces of any length, so a packet spread over a buffer chain
//! sums the same as if it were contiguous.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Running ones'-complement sum of 16-bit big-endian words.
///
/// Tracks the parity of the number of bytes added so far, so pieces of odd
/// length can follow each other.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Checksum {
    /// Folded sum; invariant `sum <= 0xffff`.
    sum: u32,
    /// An odd number of bytes has been added: the next byte is the low byte
    /// of a word.
    odd: bool,
}

/// Fold a wide sum to 16 bits with end-around carry.
///
/// Keeps the value's residue mod 0xffff and keeps non-zero values non-zero,
/// so the result equals the true 16-bit ones'-complement sum.
#[inline]
const fn fold(mut x: u64) -> u16 {
    while x > 0xffff {
        x = (x & 0xffff) + (x >> 16);
    }
    x as u16
}

/// Upper bound on bytes summed into one `u64` accumulator before folding:
/// each 8-byte step adds < 2^33, so 2^27 steps stay far below 2^64.
const BLOCK: usize = 1 << 30;

/// Sum of `data` as big-endian 16-bit words (a trailing odd byte is the high
/// byte of a zero-padded word), folded to 16 bits.
#[inline]
fn sum_be(data: &[u8]) -> u16 {
    let mut total: u64 = 0;
    for block in data.chunks(BLOCK) {
        total += u64::from(sum_block(block));
    }
    fold(total)
}

#[inline]
fn sum_block(data: &[u8]) -> u16 {
    // Words are read in native order because that is cheapest; the
    // ones'-complement sum commutes with byte swapping (a swap is a
    // multiplication by 2^8 modulo 0xffff), so swapping once at the end
    // yields the big-endian sum.
    // Each u64 is split into two u32 halves added into u64 lanes: no carries
    // are lost, and four independent lanes let the CPU (or the
    // autovectoriser) overlap the additions.
    let mut lanes = [0u64; 4];
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        for (lane, w) in lanes.iter_mut().zip(c.chunks_exact(8)) {
            if let Ok(w) = <[u8; 8]>::try_from(w) {
                let w = u64::from_ne_bytes(w);
                *lane += (w & 0xffff_ffff) + (w >> 32);
            }
        }
    }
    let mut rest = chunks.remainder();
    while let Some((w, r)) = rest.split_first_chunk::<8>() {
        let w = u64::from_ne_bytes(*w);
        lanes[0] += (w & 0xffff_ffff) + (w >> 32);
        rest = r;
    }
    let native = fold(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
    let mut be = u64::from(if cfg!(target_endian = "little") { native.swap_bytes() } else { native });
    // At most 7 bytes remain; sum them directly in big-endian order.
    while let Some((w, r)) = rest.split_first_chunk::<2>() {
        be += u64::from(u16::from_be_bytes(*w));
        rest = r;
    }
    if let Some(&last) = rest.first() {
        be += u64::from(last) << 8;
    }
    fold(be)
}

impl Checksum {
    /// An empty sum.
    pub const fn new() -> Self {
        Checksum { sum: 0, odd: false }
    }

    /// Add a 16-bit partial sum of bytes that start at an even offset
    /// relative to the beginning of their own piece.
    #[inline]
    fn add_even_sum(&mut self, s: u16) {
        // Bytes that land at an odd position swap roles (high <-> low), which
        // for a ones'-complement sum is the same as swapping the sum.
        let s = if self.odd { s.swap_bytes() } else { s };
        let t = self.sum + u32::from(s);
        self.sum = (t & 0xffff) + (t >> 16);
    }

    /// Add the next bytes of the stream. Any length is allowed at any point:
    /// consecutive calls sum exactly as one call over the concatenation.
    #[inline]
    pub fn add_bytes(&mut self, data: &[u8]) {
        self.add_even_sum(sum_be(data));
        self.odd ^= data.len() % 2 == 1;
    }

    /// Add a big-endian 16-bit word; the same as `add_bytes(&v.to_be_bytes())`.
    ///
    /// Meant for use at even offsets (header fields), but it is also correct
    /// at odd ones.
    #[inline]
    pub fn add_u16(&mut self, v: u16) {
        self.add_even_sum(v);
    }

    /// Add a big-endian 32-bit word; the same as `add_bytes(&v.to_be_bytes())`.
    #[inline]
    pub fn add_u32(&mut self, v: u32) {
        self.add_even_sum(fold(u64::from(v >> 16) + u64::from(v & 0xffff)));
    }

    /// Append a partial sum computed separately (starting from
    /// [`Checksum::new`]) over bytes that come directly after everything
    /// added to `self` so far.
    ///
    /// `other` must have been computed as if its first byte sat at an even
    /// offset, which is what a fresh accumulator assumes. If `self` currently
    /// holds an odd number of bytes, `other`'s bytes really sit at odd
    /// offsets and its sum is byte-swapped to account for that, so the result
    /// always equals summing the concatenated bytes with `add_bytes`.
    #[inline]
    pub fn add_checksum(&mut self, other: Checksum) {
        self.add_even_sum(other.folded());
        self.odd ^= other.odd;
    }

    /// Ones'-complement sum folded to 16 bits, not complemented.
    #[inline]
    pub fn folded(self) -> u16 {
        self.sum as u16
    }

    /// The value to store in a checksum field: `!folded()`.
    #[inline]
    pub fn finish(self) -> u16 {
        !self.folded()
    }

    /// Whether an odd number of bytes has been added.
    #[inline]
    pub fn is_odd(self) -> bool {
        self.odd
    }
}

/// Internet checksum of `data`, ready to store in a header field.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !sum_be(data)
}

/// Whether `data`, including its checksum field, sums to 0xffff.
#[inline]
pub fn verify(data: &[u8]) -> bool {
    sum_be(data) == 0xffff
}

/// Sum of the IPv4 pseudo header used by TCP and UDP (RFC 793, RFC 768).
///
/// `length` is the transport header plus payload length.
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> Checksum {
    let mut c = Checksum::new();
    c.add_u32(src.to_bits());
    c.add_u32(dst.to_bits());
    c.add_u16(u16::from(protocol));
    c.add_u16(length);
    c
}

/// Sum of the IPv6 pseudo header used by every upper-layer checksum over
/// IPv6 (RFC 8200 section 8.1): source, destination, the 32-bit upper-layer
/// packet length, three zero bytes and the next header value.
///
/// `length` is the upper-layer header plus payload length (not counting
/// extension headers before it); `next_header` is the upper-layer protocol,
/// not the value in the IPv6 header when extension headers come between.
#[inline]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> Checksum {
    let mut c = Checksum::new();
    c.add_bytes(&src.octets());
    c.add_bytes(&dst.octets());
    c.add_u32(length);
    c.add_u16(u16::from(next_header));
    c
}

/// The pseudo-header sum for either family: IPv4's when both addresses
/// are IPv4 (`length` up to 65535), IPv6's when both are IPv6; `None` when
/// the families differ or the length does not fit the family's field.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, length: usize) -> Option<Checksum> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some(pseudo_header_v4(s, d, protocol, u16::try_from(length).ok()?)),
        (IpAddr::V6(s), IpAddr::V6(d)) => Some(pseudo_header_v6(s, d, protocol, u32::try_from(length).ok()?)),
        _ => None,
    }
}

/// Incrementally update a checksum after a 16-bit field changed from
/// `old_field` to `new_field` (RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`).
///
/// Eqn. 3 (not eqn. 2) because it agrees with a full recomputation, which
/// never yields 0xffff for data with a non-zero word; all-zero data is the
/// only exception and does not occur in real headers.
#[inline]
pub fn update(old_checksum: u16, old_field: u16, new_field: u16) -> u16 {
    let s = u64::from(!old_checksum) + u64::from(!old_field) + u64::from(new_field);
    !fold(s)
}

/// [`update`] for a 32-bit field (e.g. an IPv4 address).
#[inline]
pub fn update_u32(old_checksum: u16, old: u32, new: u32) -> u16 {
    let s = u64::from(!old_checksum)
        + u64::from(!(old >> 16) as u16)
        + u64::from(!(old as u16))
        + u64::from(new >> 16)
        + u64::from(new & 0xffff);
    !fold(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    /// Straightforward RFC 1071 reference: byte pairs into a u64.
    fn naive(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            s += u64::from(u16::from_be_bytes([data[i], data[i + 1]]));
            i += 2;
        }
        if i < data.len() {
            s += u64::from(data[i]) << 8;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 worked example: sum 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        let mut c = Checksum::new();
        c.add_bytes(&d);
        assert_eq!(c.folded(), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // Wikipedia's IPv4 header checksum example, checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert!(verify(&h));
        h[11] = 0x62;
        assert!(!verify(&h));
    }

    #[test]
    fn edge_cases() {
        assert_eq!(checksum(&[]), 0xffff);
        assert_eq!(Checksum::new().folded(), 0);
        assert_eq!(checksum(&[0x12]), !0x1200);
        assert_eq!(checksum(&[0x12, 0x34, 0x56]), !(0x1234 + 0x5600));
        // All ones: sum of any number of 0xffff words is 0xffff (never 0).
        for n in [1usize, 2, 3, 7, 8, 9, 31, 32, 33, 64, 1500, 1501] {
            let d = std::vec![0xffu8; n];
            // An odd trailing 0xff adds 0xff00 to "negative zero" 0xffff.
            let expect = if n % 2 == 1 { 0xff00 } else { 0xffff };
            assert_eq!(sum_be(&d), expect, "len {n}");
            assert_eq!(sum_be(&d), naive(&d), "len {n}");
        }
        // Carries out of every lane.
        let d = std::vec![0xfeu8; 4099];
        assert_eq!(sum_be(&d), naive(&d));
        // Zeros stay zero (not 0xffff).
        assert_eq!(sum_be(&[0u8; 100]), 0);
    }

    #[test]
    fn odd_pieces_sum_as_whole() {
        let data: Vec<u8> = (0..1001u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = checksum(&data);
        for split in [1usize, 3, 5, 7, 9, 33, 999] {
            let mut c = Checksum::new();
            for piece in data.chunks(split) {
                c.add_bytes(piece);
            }
            assert_eq!(c.finish(), whole, "pieces of {split}");
        }
        // Three odd pieces: 3 + 5 + 993.
        let mut c = Checksum::new();
        c.add_bytes(&data[..3]);
        c.add_bytes(&data[3..8]);
        c.add_bytes(&data[8..]);
        assert_eq!(c.finish(), whole);
        assert!(c.is_odd());
    }

    #[test]
    fn add_checksum_after_odd_prefix() {
        let data: Vec<u8> = (0..77u8).map(|i| i.wrapping_mul(37)).collect();
        let mut head = Checksum::new();
        head.add_bytes(&data[..13]);
        let mut tail = Checksum::new();
        tail.add_bytes(&data[13..]);
        head.add_checksum(tail);
        assert_eq!(head.finish(), checksum(&data));
        assert!(head.is_odd()); // 77 bytes
    }

    #[test]
    fn pseudo_header_matches_bytes() {
        let src = Ipv4Addr::new(192, 168, 1, 10);
        let dst = Ipv4Addr::new(8, 8, 4, 4);
        let bytes = [192, 168, 1, 10, 8, 8, 4, 4, 0, 17, 0x01, 0x2c];
        assert_eq!(pseudo_header_v4(src, dst, 17, 300).finish(), checksum(&bytes));
    }

    #[test]
    fn pseudo_header_v6_matches_bytes() {
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0211, 0x22ff, 0xfe33, 0x4455);
        let dst = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff33, 0x4455);
        let mut bytes = std::vec::Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&[0x00, 0x01, 0x02, 0x03, 0, 0, 0, 58]);
        assert_eq!(pseudo_header_v6(src, dst, 58, 0x0001_0203).finish(), checksum(&bytes));
    }

    #[test]
    fn update_known() {
        // RFC 1624 section 4 example: HC=0xdd2f, m=0x5555 -> m'=0x3285,
        // eqn. 3 gives 0x0000.
        assert_eq!(update(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    fn words_to_bytes(words: &[u16]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    proptest! {
        #[test]
        fn fast_equals_naive(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
            prop_assert_eq!(sum_be(&data), naive(&data));
        }

        #[test]
        fn pieces_equal_whole(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(0usize..600, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut c = Checksum::new();
            let mut joined = Checksum::new();
            let mut prev = 0;
            for &cut in cuts.iter().chain(core::iter::once(&data.len())) {
                c.add_bytes(&data[prev..cut]);
                let mut part = Checksum::new();
                part.add_bytes(&data[prev..cut]);
                joined.add_checksum(part);
                prev = cut;
            }
            prop_assert_eq!(c.finish(), checksum(&data));
            prop_assert_eq!(joined.finish(), checksum(&data));
            prop_assert_eq!(c.is_odd(), data.len() % 2 == 1);
        }

        #[test]
        fn add_u16_u32_equal_bytes(prefix in proptest::collection::vec(any::<u8>(), 0..5), a: u16, b: u32) {
            let mut x = Checksum::new();
            x.add_bytes(&prefix);
            x.add_u16(a);
            x.add_u32(b);
            let mut y = Checksum::new();
            y.add_bytes(&prefix);
            y.add_bytes(&a.to_be_bytes());
            y.add_bytes(&b.to_be_bytes());
            prop_assert_eq!(x, y);
        }

        #[test]
        fn rfc1624_update_equals_recompute(
            mut words in proptest::collection::vec(any::<u16>(), 2..40),
            idx: proptest::sample::Index,
            new: u16,
        ) {
            // A real header always has a non-zero word (version/IHL etc.);
            // RFC 1624 eqn. 3 is exact except for all-zero data.
            words[0] |= 0x4500;
            let i = 1 + idx.index(words.len() - 1);
            let old_ck = checksum(&words_to_bytes(&words));
            let old = words[i];
            words[i] = new;
            let full = checksum(&words_to_bytes(&words));
            prop_assert_eq!(update(old_ck, old, new), full);
        }

        #[test]
        fn rfc1624_update_u32_equals_recompute(
            mut words in proptest::collection::vec(any::<u16>(), 3..40),
            idx: proptest::sample::Index,
            new: u32,
        ) {
            words[0] |= 0x4500;
            let i = 1 + idx.index(words.len() - 2);
            let old_ck = checksum(&words_to_bytes(&words));
            let old = (u32::from(words[i]) << 16) | u32::from(words[i + 1]);
            words[i] = (new >> 16) as u16;
            words[i + 1] = new as u16;
            let full = checksum(&words_to_bytes(&words));
            prop_assert_eq!(update_u32(old_ck, old, new), full);
        }
    }
}
