//! The Identification of the IPv6 datagrams an interface sends in
//! fragments, unpredictable from outside (RFC 7739 section 5.3's
//! hash-based algorithm): a keyed hash of the source and destination
//! gives a per-pair offset and picks one of a table of counters, and the
//! Identification is their sum, the counter then stepped. An off-path
//! node that learns the identifications it receives learns nothing of
//! those sent to another destination (another offset, most likely another
//! counter), and datagrams to one destination still take successive
//! values, so that their fragments never mix in reassembly.

use crate::hash::{siphash, SipKey};
use core::net::Ipv6Addr;

/// Counters the destinations share (RFC 7739's TABLE_LENGTH).
pub const TABLE_LEN: usize = 64;

/// The identifications of one interface.
#[derive(Clone)]
pub struct FragIdents {
    key: SipKey,
    counters: [u32; TABLE_LEN],
}

/// Shows that a key is there, never the key.
impl core::fmt::Debug for FragIdents {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FragIdents { .. }")
    }
}

impl FragIdents {
    /// Identifications keyed by `key`, each counter starting at 0 (the
    /// offsets are what is secret).
    pub fn new(key: SipKey) -> Self {
        FragIdents { key, counters: [0; TABLE_LEN] }
    }

    /// The Identification of the next datagram from `src` to `dst` sent in
    /// fragments.
    pub fn next(&mut self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let mut pair = [0u8; 32];
        let (s, d) = pair.split_at_mut(16);
        s.copy_from_slice(&src.octets());
        d.copy_from_slice(&dst.octets());
        let h = siphash(self.key, &pair);
        // The low half is the offset; the high half picks the counter.
        let offset = h as u32;
        let index = ((h >> 32) % TABLE_LEN as u64) as usize;
        let Some(counter) = self.counters.get_mut(index) else { return offset };
        let ident = offset.wrapping_add(*counter);
        *counter = counter.wrapping_add(1);
        ident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn one_destination_steps_and_destinations_differ_unpredictably() {
        let mut ids = FragIdents::new(SipKey::from_seed(3));
        let src = ip("fd00::1");
        let a = ids.next(src, ip("fd00::2"));
        assert_eq!(ids.next(src, ip("fd00::2")), a.wrapping_add(1), "one destination's ids differ, in turn");
        let b = ids.next(src, ip("fd00::3"));
        assert!(b.wrapping_sub(a) > 16 && a.wrapping_sub(b) > 16, "{a:#x} and {b:#x} are far apart");
        // Another key: other values for the same pair.
        let mut other = FragIdents::new(SipKey::from_seed(4));
        assert_ne!(other.next(src, ip("fd00::2")), a);
    }
}
