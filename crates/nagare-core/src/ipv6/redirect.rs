//! The redirects a host has taken (RFC 4861 8.3): for a destination, a
//! better first hop than the one the router lists give, or the
//! destination itself when a router says it is on the link. They are the
//! destination cache's only entries that routing alone would not
//! rebuild, so they are kept here, consulted before the router lists
//! (5.2), bounded in number ([`MAX_REDIRECTS`]): a new destination past
//! the bound replaces the one redirected longest ago, which goes back
//! to its router and its router's next redirect, so a flood of redirects
//! grows nothing.

use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv6Addr;

/// Destinations whose first hop a redirect changed, at most.
pub const MAX_REDIRECTS: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Entry {
    dest: Ipv6Addr,
    next_hop: Ipv6Addr,
    learnt: Instant,
}

/// The first hops redirects gave, per destination.
#[derive(Debug, Clone, Default)]
pub struct Redirects {
    entries: Vec<Entry>,
}

impl Redirects {
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
    use core::time::Duration;

    fn dest(i: u16) -> Ipv6Addr {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i)
    }

    #[test]
    fn a_redirect_replaces_the_first_hop_and_the_oldest_makes_room() {
        let mut r = Redirects::default();
        let (r1, r2) = ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        let at = |s: u64| Instant::ZERO + Duration::from_secs(s);
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
}
