//! The redirects a host has taken (RFC 4861 8.3): for a destination, a
//! better first hop than the one the router lists give, or the
//! destination itself when a router says it is on the link. They are the
//! destination cache's only entries that routing alone would not
//! rebuild, so they are kept here, consulted before the router lists
//! (5.2), bounded in number ([`MAX_REDIRECTS`]): a new destination past
//! the bound replaces the one redirected longest ago, which goes back
//! to its router and its router's next redirect, so a flood of redirects
//! grows nothing.
//!
//! An entry lasts a while after the redirect that set it
//! ([`Ipv6Config::redirect_lifetime`](crate::Ipv6Config::redirect_lifetime),
//! [`REDIRECT_LIFETIME`] by default), and goes sooner when its next hop
//! does: a default router that left the list, a neighbour that stopped
//! answering (7.3.3). RFC 4861 leaves how long a destination cache entry
//! holds to the host; one that outlived its router would send the
//! destination's packets into the void, and one forgotten too soon costs
//! only a packet through the first router, which redirects again.

use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv6Addr;
use core::time::Duration;

/// Destinations whose first hop a redirect changed, at most.
pub const MAX_REDIRECTS: usize = 64;

/// How long a redirect holds after it came, by default: ten minutes, as
/// long as a lowered path MTU ([`PMTU_EXPIRY`](crate::pmtu::PMTU_EXPIRY)),
/// the destination cache's other entry.
pub const REDIRECT_LIFETIME: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Entry {
    dest: Ipv6Addr,
    next_hop: Ipv6Addr,
    learnt: Instant,
}

/// The first hops redirects gave, per destination.
#[derive(Debug, Clone)]
pub struct Redirects {
    entries: Vec<Entry>,
    /// How long an entry holds after its redirect.
    lifetime: Duration,
}

impl Default for Redirects {
    fn default() -> Self {
        Redirects::new(REDIRECT_LIFETIME)
    }
}

impl Redirects {
    /// No redirect yet; each taken holds for `lifetime`.
    pub fn new(lifetime: Duration) -> Self {
        Redirects { entries: Vec::new(), lifetime }
    }

    /// The first hop a redirect gave for `dest`, if any.
    pub fn next_hop(&self, dest: Ipv6Addr) -> Option<Ipv6Addr> {
        self.entries.iter().find(|e| e.dest == dest).map(|e| e.next_hop)
    }

    /// Packets to `dest` go to `next_hop` (`dest` itself: on the link).
    /// Returns whether an entry for another destination made room.
    pub fn redirected(&mut self, dest: Ipv6Addr, next_hop: Ipv6Addr, now: Instant) -> bool {
        if let Some(e) = self.entries.iter_mut().find(|e| e.dest == dest) {
            *e = Entry { dest, next_hop, learnt: now };
            return false;
        }
        let mut evicted = false;
        if self.entries.len() >= MAX_REDIRECTS {
            let oldest = self.entries.iter().enumerate().min_by_key(|(_, e)| e.learnt).map(|(i, _)| i);
            if let Some(i) = oldest {
                self.entries.swap_remove(i);
                evicted = true;
            }
        }
        self.entries.push(Entry { dest, next_hop, learnt: now });
        evicted
    }

    /// Takes out the entries whose lifetime ended by `now`; returns how
    /// many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let lifetime = self.lifetime;
        let before = self.entries.len();
        self.entries.retain(|e| now.saturating_since(e.learnt) < lifetime);
        before - self.entries.len()
    }

    /// Takes out the entries whose next hop is `gone` (a router that left
    /// the list, a neighbour that stopped answering); returns how many.
    pub fn forget_next_hop(&mut self, gone: Ipv6Addr) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| e.next_hop != gone);
        before - self.entries.len()
    }

    /// When the next entry's lifetime ends, if any is held.
    pub fn poll_at(&self) -> Option<Instant> {
        self.entries.iter().map(|e| e.learnt + self.lifetime).min()
    }

    /// Destinations redirected.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no destination is redirected.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(i: u16) -> Ipv6Addr {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i)
    }

    fn at(s: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(s)
    }

    #[test]
    fn a_redirect_replaces_the_first_hop_and_the_oldest_makes_room() {
        let mut r = Redirects::default();
        let (r1, r2) = ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        assert!(!r.redirected(dest(0), r1, at(0)));
        assert!(!r.redirected(dest(0), r2, at(1)));
        assert_eq!((r.next_hop(dest(0)), r.len()), (Some(r2), 1));
        for i in 1..MAX_REDIRECTS as u16 {
            assert!(!r.redirected(dest(i), dest(i), at(u64::from(i) + 1)));
        }
        assert!(r.redirected(dest(1000), r1, at(1000)));
        assert_eq!(r.len(), MAX_REDIRECTS);
        assert_eq!(r.next_hop(dest(0)), None, "the oldest made room");
        assert_eq!(r.next_hop(dest(1)), Some(dest(1)));
        assert_eq!(r.next_hop(dest(1000)), Some(r1));
    }

    #[test]
    fn entries_end_with_their_lifetime_or_their_next_hop() {
        let mut r = Redirects::new(Duration::from_secs(100));
        let (r1, r2): (Ipv6Addr, Ipv6Addr) = ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        assert_eq!(r.poll_at(), None);
        r.redirected(dest(0), r1, at(0));
        r.redirected(dest(1), r2, at(10));
        r.redirected(dest(2), r2, at(20));
        assert_eq!(r.poll_at(), Some(at(100)));
        // A second redirect for a destination starts its lifetime again.
        r.redirected(dest(0), r1, at(50));
        assert_eq!(r.poll_at(), Some(at(110)));
        assert_eq!(r.expire(at(109)), 0);
        assert_eq!(r.expire(at(110)), 1);
        assert_eq!((r.next_hop(dest(1)), r.next_hop(dest(2))), (None, Some(r2)));
        assert_eq!(r.forget_next_hop(r2), 1);
        assert_eq!(r.forget_next_hop(r2), 0);
        assert_eq!((r.len(), r.next_hop(dest(0))), (1, Some(r1)));
        assert_eq!(r.expire(at(150)), 1);
        assert!(r.is_empty());
        assert_eq!(r.poll_at(), None);
    }
}
