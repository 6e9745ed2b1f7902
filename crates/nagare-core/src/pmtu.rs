//! Path MTU discovery's memory (RFC 1191 for IPv4, RFC 8201 for IPv6):
//! the MTU learnt for each destination from the routers' "fragmentation
//! needed" and "packet too big" messages, bounded in entries, each
//! forgotten a while after its last decrease so that a path that grew is
//! tried again: the interface's [`poll`](crate::iface::Interface::poll)
//! takes the expired entries out and raises the connections to them back
//! to the link MTU (RFC 1191 6.3, RFC 8201 4).
//!
//! The cache holds only what a message said; the interface validates the
//! message first (the quoted packet must be one it sent, RFC 5927) and
//! clamps the claim between the family's floor and the link MTU.

use crate::time::Instant;
use alloc::vec::Vec;
use core::net::IpAddr;
use core::time::Duration;

/// Destinations the cache remembers; a new one replaces the oldest.
pub const PMTU_CACHE_ENTRIES: usize = 64;

/// How long a lowered path MTU holds after its last decrease before the
/// link MTU is tried again: the default of
/// [`InterfaceConfig::pmtu_expiry`](crate::InterfaceConfig::pmtu_expiry).
/// RFC 1191 6.3 and RFC 8201 4 recommend ten minutes and forbid less than
/// five.
pub const PMTU_EXPIRY: Duration = Duration::from_secs(600);

/// The lowest path MTU an IPv4 message may set: 512 bytes of payload
/// behind IPv4 and TCP headers (Linux's `min_pmtu`). Claims below are
/// ignored: no real path is that narrow, and a forged one would make
/// every segment tiny.
pub const IPV4_MIN_PATH_MTU: usize = 552;

/// RFC 1191 7's plateaus: the MTUs of common links, from the largest
/// down, for a router that sends "fragmentation needed" without the next
/// hop's MTU.
const PLATEAUS: [usize; 11] = [65535, 32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];

/// The plateau below a datagram of `total_len` bytes that a router
/// found too big (RFC 1191 5), or 68 below the last.
pub fn plateau_below(total_len: usize) -> usize {
    PLATEAUS.iter().copied().find(|&p| p < total_len).unwrap_or(68)
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    dst: IpAddr,
    mtu: usize,
    learnt: Instant,
}

/// Path MTUs lower than the link's, per destination address.
#[derive(Debug)]
pub struct PathMtuCache {
    entries: Vec<Entry>,
    /// How long an entry holds after its last decrease.
    expiry: Duration,
}

impl Default for PathMtuCache {
    fn default() -> Self {
        PathMtuCache::new(PMTU_EXPIRY)
    }
}

impl PathMtuCache {
    /// An empty cache whose entries hold for `expiry` after their last
    /// decrease.
    pub fn new(expiry: Duration) -> Self {
        PathMtuCache { entries: Vec::new(), expiry }
    }

    /// The path MTU learnt for `dst`, unless it has expired.
    pub fn get(&self, dst: IpAddr, now: Instant) -> Option<usize> {
        self.entries.iter().find(|e| e.dst == dst && !self.expired(e, now)).map(|e| e.mtu)
    }

    /// Records `mtu` for `dst` if it is lower than what the cache holds
    /// (an expired entry holds nothing); the oldest entry makes room for a
    /// new destination when the cache is full. Returns whether it lowered.
    pub fn lower(&mut self, dst: IpAddr, mtu: usize, now: Instant) -> bool {
        if let Some(e) = self.entries.iter_mut().find(|e| e.dst == dst) {
            if now.saturating_since(e.learnt) < self.expiry && e.mtu <= mtu {
                return false;
            }
            *e = Entry { dst, mtu, learnt: now };
            return true;
        }
        if self.entries.len() >= PMTU_CACHE_ENTRIES {
            let oldest = self.entries.iter().enumerate().min_by_key(|(_, e)| e.learnt).map(|(i, _)| i);
            if let Some(i) = oldest {
                self.entries.swap_remove(i);
            }
        }
        self.entries.push(Entry { dst, mtu, learnt: now });
        true
    }

    /// Takes out the entries that have expired by `now` and returns their
    /// destinations, whose path MTU is the link's again.
    pub fn expire(&mut self, now: Instant) -> Vec<IpAddr> {
        let mut gone = Vec::new();
        let expiry = self.expiry;
        self.entries.retain(|e| {
            let keep = now.saturating_since(e.learnt) < expiry;
            if !keep {
                gone.push(e.dst);
            }
            keep
        });
        gone
    }

    /// When the next entry expires, if the cache holds any.
    pub fn poll_at(&self) -> Option<Instant> {
        self.entries.iter().map(|e| e.learnt + self.expiry).min()
    }

    /// Destinations held, expired ones included until taken out.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn expired(&self, e: &Entry, now: Instant) -> bool {
        now.saturating_since(e.learnt) >= self.expiry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn at(secs: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(secs)
    }

    #[test]
    fn a_path_mtu_only_goes_down_until_it_expires() {
        let mut c = PathMtuCache::default();
        let dst = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        assert!(c.lower(dst, 1400, at(0)));
        assert!(!c.lower(dst, 1450, at(1)));
        assert!(c.lower(dst, 1300, at(2)));
        assert_eq!(c.get(dst, at(601)), Some(1300));
        assert_eq!(c.get(dst, at(602)), None);
        // Expired, it takes a higher value again.
        assert!(c.lower(dst, 1450, at(700)));
        assert_eq!(c.get(dst, at(700)), Some(1450));
    }

    #[test]
    fn expiry_counts_from_the_last_decrease_and_takes_the_entry_out() {
        let mut c = PathMtuCache::new(Duration::from_secs(600));
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
        assert_eq!(c.poll_at(), None);
        assert!(c.lower(a, 1400, at(0)));
        assert!(c.lower(b, 1400, at(100)));
        assert!(c.lower(a, 1300, at(200)));
        assert_eq!(c.poll_at(), Some(at(700)));
        assert!(c.expire(at(699)).is_empty());
        assert_eq!(c.expire(at(700)), [b]);
        assert_eq!(c.poll_at(), Some(at(800)));
        assert!(c.expire(at(799)).is_empty());
        assert_eq!(c.expire(at(800)), [a]);
        assert!(c.is_empty());
        assert_eq!(c.poll_at(), None);
    }

    #[test]
    fn the_cache_is_bounded_and_replaces_its_oldest() {
        let mut c = PathMtuCache::default();
        let dst = |i: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i));
        for i in 0..=PMTU_CACHE_ENTRIES as u16 {
            assert!(c.lower(dst(i), 1280 + usize::from(i), at(u64::from(i))));
        }
        assert_eq!(c.len(), PMTU_CACHE_ENTRIES);
        assert_eq!(c.get(dst(0), at(100)), None);
        assert_eq!(c.get(dst(1), at(100)), Some(1281));
        assert_eq!(c.get(dst(PMTU_CACHE_ENTRIES as u16), at(100)), Some(1280 + PMTU_CACHE_ENTRIES));
    }

    #[test]
    fn plateaus_step_below_the_datagram() {
        assert_eq!(plateau_below(1500), 1492);
        assert_eq!(plateau_below(1492), 1006);
        assert_eq!(plateau_below(1006), 508);
        assert_eq!(plateau_below(20), 68);
    }
}
