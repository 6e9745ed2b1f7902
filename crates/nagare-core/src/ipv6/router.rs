//! What a host learns from routers (RFC 4861 6.3): the default router
//! list, the prefix list that says what is on the link, the link MTU,
//! and when to solicit routers at start-up (6.3.7); and from them the
//! next hop of a destination (5.2).
//!
//! Every list is bounded ([`MAX_ROUTERS`], [`MAX_PREFIXES`]): an entry
//! past the bound is refused and reported, so that a flood of
//! advertisements grows nothing. Entries expire by their lifetimes in
//! [`Routers::poll`].

use super::addr::{Ipv6Addresses, Ipv6Cidr};
use super::neighbor::{NeighborCache, NeighborState};
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv6Addr;
use core::time::Duration;
use nagare_wire::{is_link_local, IPV6_MIN_MTU};

/// Most default routers held.
pub const MAX_ROUTERS: usize = 8;

/// Most on-link prefixes held.
pub const MAX_PREFIXES: usize = 16;

/// A router that advertised itself as a default router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultRouter {
    /// Its link-local address.
    pub address: Ipv6Addr,
    /// When its router lifetime ends.
    pub expires: Instant,
}

/// A prefix a router said is on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnLinkPrefix {
    /// The prefix (bits past its length cleared).
    pub prefix: Ipv6Cidr,
    /// When its valid lifetime ends; `None`: never.
    pub expires: Option<Instant>,
}

/// What an advertised entry did to its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// A new entry.
    Added,
    /// An entry already there got the new lifetime.
    Refreshed,
    /// A lifetime of 0 removed the entry.
    Removed,
    /// A lifetime of 0 for an entry not there: nothing to do.
    Unchanged,
    /// New, but the list is full: refused.
    Full,
}

/// What [`Routers::poll`] did and asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RouterWork {
    /// Send a router solicitation now.
    pub solicit: bool,
    /// Routers whose lifetime ended.
    pub routers_expired: Vec<Ipv6Addr>,
    /// Prefixes whose lifetime ended.
    pub prefixes_expired: usize,
}

/// The router solicitations of start-up (RFC 4861 6.3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Solicit {
    /// Waiting for the first poll, which draws the delay.
    NotStarted,
    /// `left` to send; the next at `at`.
    Sending { left: u32, at: Instant },
    /// All sent, or a router answered.
    Done,
}

/// The default router list, the prefix list and the link MTU learned
/// from routers, the configured default router, and the solicitations.
#[derive(Debug, Clone)]
pub struct Routers {
    routers: Vec<DefaultRouter>,
    prefixes: Vec<OnLinkPrefix>,
    /// The link MTU a router gave, if below the device's.
    link_mtu: Option<usize>,
    /// The default router configured, tried before learned ones.
    gateway: Option<Ipv6Addr>,
    solicit: Solicit,
    solicitations: u32,
    interval: Duration,
    /// The delay before the first solicitation.
    first_delay: Duration,
}

impl Routers {
    /// Nothing learned yet; `gateway` is the configured default router.
    /// `solicitations` router solicitations go `interval` apart, the first
    /// `first_delay` after the first poll.
    pub fn new(gateway: Option<Ipv6Addr>, solicitations: u32, interval: Duration, first_delay: Duration) -> Self {
        Routers {
            routers: Vec::new(),
            prefixes: Vec::new(),
            link_mtu: None,
            gateway,
            solicit: if solicitations == 0 { Solicit::Done } else { Solicit::NotStarted },
            solicitations,
            interval,
            first_delay,
        }
    }

    /// The default routers learned, in the order first advertised, but
    /// that one neighbour discovery gave up on goes last
    /// ([`unreachable`](Self::unreachable)).
    pub fn routers(&self) -> &[DefaultRouter] {
        &self.routers
    }

    /// The on-link prefixes learned.
    pub fn prefixes(&self) -> &[OnLinkPrefix] {
        &self.prefixes
    }

    /// The configured default router.
    pub fn gateway(&self) -> Option<Ipv6Addr> {
        self.gateway
    }

    /// A router advertisement from `address` with router lifetime
    /// `lifetime` seconds (RFC 4861 6.3.4). Any advertisement ends the
    /// solicitations when its lifetime is not 0.
    pub fn router_advertised(&mut self, address: Ipv6Addr, lifetime: u16, now: Instant) -> Update {
        if lifetime != 0 {
            self.solicit = Solicit::Done;
        }
        let at = self.routers.iter().position(|r| r.address == address);
        let expires = now + Duration::from_secs(u64::from(lifetime));
        match (at, lifetime) {
            (Some(i), 0) => {
                self.routers.remove(i);
                Update::Removed
            }
            (None, 0) => Update::Unchanged,
            (Some(i), _) => {
                if let Some(r) = self.routers.get_mut(i) {
                    r.expires = expires;
                }
                Update::Refreshed
            }
            (None, _) if self.routers.len() >= MAX_ROUTERS => Update::Full,
            (None, _) => {
                self.routers.push(DefaultRouter { address, expires });
                Update::Added
            }
        }
    }

    /// A prefix advertised on the link (the L flag set) with a valid
    /// lifetime of `valid` seconds, `expires` its end (`None`: never). A
    /// link-local prefix is always on the link: ignored.
    pub fn prefix_advertised(&mut self, prefix: Ipv6Addr, len: u8, expires: Option<Instant>, valid: u32) -> Update {
        let mask = u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0);
        let Some(prefix) = Ipv6Cidr::new(Ipv6Addr::from(u128::from(prefix) & mask), len) else {
            return Update::Unchanged;
        };
        if is_link_local(&prefix.address()) {
            return Update::Unchanged;
        }
        let at = self.prefixes.iter().position(|p| p.prefix == prefix);
        match (at, valid) {
            (Some(i), 0) => {
                self.prefixes.remove(i);
                Update::Removed
            }
            (None, 0) => Update::Unchanged,
            (Some(i), _) => {
                if let Some(p) = self.prefixes.get_mut(i) {
                    p.expires = expires;
                }
                Update::Refreshed
            }
            (None, _) if self.prefixes.len() >= MAX_PREFIXES => Update::Full,
            (None, _) => {
                self.prefixes.push(OnLinkPrefix { prefix, expires });
                Update::Added
            }
        }
    }

    /// A router's MTU option: taken as the link MTU if it is at least
    /// the minimum of 1280 and below `device_mtu` (RFC 4861 6.3.4); false
    /// if ignored.
    pub fn mtu_advertised(&mut self, mtu: u32, device_mtu: usize) -> bool {
        let Ok(mtu) = usize::try_from(mtu) else { return false };
        if mtu < IPV6_MIN_MTU || mtu > device_mtu {
            return false;
        }
        self.link_mtu = (mtu < device_mtu).then_some(mtu);
        true
    }

    /// The MTU of IPv6 packets on a device of `device_mtu`.
    pub fn mtu(&self, device_mtu: usize) -> usize {
        self.link_mtu.map_or(device_mtu, |m| m.min(device_mtu))
    }

    /// Whether a prefix in the list holds `dst`.
    pub fn is_on_link(&self, dst: Ipv6Addr) -> bool {
        self.prefixes.iter().any(|p| p.prefix.contains(dst))
    }

    /// The next hop of unicast `dst` (RFC 4861 5.2): `dst` itself when on
    /// the link (link-local, on the network of a configured address, or in
    /// the prefix list); else the configured default router; else a
    /// learned one, the first the neighbour cache holds as reachable or
    /// probably so (6.3.6), or the first of all, which is another one
    /// each time neighbour discovery gives up on it (round robin). `None`:
    /// no route.
    pub fn next_hop(&self, addrs: &Ipv6Addresses, neighbors: &NeighborCache, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if addrs.is_on_link(dst) || self.is_on_link(dst) {
            return Some(dst);
        }
        if self.gateway.is_some() {
            return self.gateway;
        }
        let known = |r: &&DefaultRouter| neighbors.state(r.address).is_some_and(|s| s != NeighborState::Incomplete);
        self.routers.iter().find(known).or_else(|| self.routers.first()).map(|r| r.address)
    }

    /// Neighbour discovery gave up on `address`: a default router there
    /// goes to the end of the list, so that while no router is known to
    /// be reachable the next choice is another (RFC 4861 6.3.6's round
    /// robin). Its lifetime is left as it is: it may yet answer.
    pub fn unreachable(&mut self, address: Ipv6Addr) {
        if let Some(i) = self.routers.iter().position(|r| r.address == address) {
            let r = self.routers.remove(i);
            self.routers.push(r);
        }
    }

    /// Runs the lifetimes out and says when to solicit.
    pub fn poll(&mut self, now: Instant) -> RouterWork {
        let mut work = RouterWork::default();
        self.routers.retain(|r| {
            let keep = now < r.expires;
            if !keep {
                work.routers_expired.push(r.address);
            }
            keep
        });
        let before = self.prefixes.len();
        self.prefixes.retain(|p| p.expires.is_none_or(|t| now < t));
        work.prefixes_expired = before - self.prefixes.len();
        self.solicit = match self.solicit {
            Solicit::NotStarted => Solicit::Sending { left: self.solicitations, at: now + self.first_delay },
            other => other,
        };
        if let Solicit::Sending { left, at } = self.solicit {
            if now >= at {
                work.solicit = true;
                let left = left.saturating_sub(1);
                self.solicit =
                    if left == 0 { Solicit::Done } else { Solicit::Sending { left, at: now + self.interval } };
            }
        }
        work
    }

    /// When [`poll`](Self::poll) next has work.
    pub fn poll_at(&self) -> Option<Instant> {
        let solicit = match self.solicit {
            Solicit::NotStarted => Some(Instant::ZERO),
            Solicit::Sending { at, .. } => Some(at),
            Solicit::Done => None,
        };
        let routers = self.routers.iter().map(|r| Some(r.expires));
        let prefixes = self.prefixes.iter().map(|p| p.expires);
        routers.chain(prefixes).chain([solicit]).flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NdpConfig;
    use crate::hash::SipKey;
    use crate::ipv6::iid::{IidGenerator, InterfaceIds};
    use nagare_wire::EthernetAddress;

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn solicits_three_times_after_the_delay_until_a_router_answers() {
        let mut r = Routers::new(None, 3, secs(4), Duration::from_millis(300));
        let t0 = Instant::from_secs(10);
        assert_eq!(r.poll_at(), Some(Instant::ZERO));
        assert!(!r.poll(t0).solicit);
        assert_eq!(r.poll_at(), Some(t0 + Duration::from_millis(300)));
        assert!(r.poll(t0 + Duration::from_millis(300)).solicit);
        assert!(!r.poll(t0 + secs(4)).solicit);
        assert!(r.poll(t0 + Duration::from_millis(4300)).solicit);
        assert!(r.poll(t0 + Duration::from_millis(8300)).solicit);
        assert_eq!(r.poll_at(), None, "three, then no more");
        let mut r = Routers::new(None, 3, secs(4), Duration::ZERO);
        assert!(r.poll(t0).solicit);
        r.router_advertised(ip("fe80::1"), 0, t0);
        assert!(r.poll_at().is_some(), "a lifetime of 0 does not answer");
        r.router_advertised(ip("fe80::1"), 600, t0);
        assert!(!r.poll(t0 + secs(4)).solicit);
        assert_eq!(r.poll_at(), Some(t0 + secs(600)), "only the router's lifetime is left");
    }

    #[test]
    fn lists_follow_their_lifetimes_and_bounds() {
        let mut r = Routers::new(None, 0, secs(4), Duration::ZERO);
        let t0 = Instant::from_secs(10);
        assert_eq!(r.router_advertised(ip("fe80::1"), 30, t0), Update::Added);
        assert_eq!(r.router_advertised(ip("fe80::1"), 60, t0), Update::Refreshed);
        assert_eq!(r.router_advertised(ip("fe80::2"), 0, t0), Update::Unchanged);
        for i in 2..20u16 {
            r.router_advertised(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, i), 30, t0);
        }
        assert_eq!(r.routers().len(), MAX_ROUTERS);
        assert_eq!(r.router_advertised(ip("fe80::99"), 30, t0), Update::Full);
        assert_eq!(r.router_advertised(ip("fe80::2"), 0, t0), Update::Removed);
        assert_eq!(r.poll(t0 + secs(30)).routers_expired.len(), MAX_ROUTERS - 2);
        assert_eq!(r.routers(), [DefaultRouter { address: ip("fe80::1"), expires: t0 + secs(60) }]);

        assert_eq!(r.prefix_advertised(ip("2001:db8::ff"), 64, Some(t0 + secs(5)), 5), Update::Added);
        assert_eq!(r.prefixes()[0].prefix.address(), ip("2001:db8::"), "bits past the length cleared");
        assert!(r.is_on_link(ip("2001:db8::7")) && !r.is_on_link(ip("2001:db9::7")));
        assert_eq!(r.prefix_advertised(ip("fe80::"), 64, None, 5), Update::Unchanged);
        for i in 0..100u16 {
            r.prefix_advertised(Ipv6Addr::new(0x2001, 0xdb9, i, 0, 0, 0, 0, 0), 64, None, u32::MAX);
        }
        assert_eq!(r.prefixes().len(), MAX_PREFIXES);
        assert_eq!(r.poll(t0 + secs(5)).prefixes_expired, 1);
        assert!(!r.is_on_link(ip("2001:db8::7")));
    }

    #[test]
    fn the_mtu_is_taken_only_between_the_minimum_and_the_device() {
        let mut r = Routers::new(None, 0, secs(4), Duration::ZERO);
        assert!(!r.mtu_advertised(1279, 1500));
        assert!(!r.mtu_advertised(9000, 1500));
        assert_eq!(r.mtu(1500), 1500);
        assert!(r.mtu_advertised(1400, 1500));
        assert_eq!(r.mtu(1500), 1400);
        assert!(r.mtu_advertised(1500, 1500));
        assert_eq!(r.mtu(1500), 1500);
    }

    #[test]
    fn next_hop_is_the_destination_on_link_else_a_router() {
        let ids = IidGenerator::new(InterfaceIds::Eui64, SipKey::from_seed(0), EthernetAddress([2, 0, 0, 0, 0, 1]));
        let mut addrs = Ipv6Addresses::new(0, secs(1), Duration::ZERO, 0, ids);
        addrs.add("fd00::2/64".parse().unwrap());
        let mut neighbors = NeighborCache::new(NdpConfig::default());
        let mut r = Routers::new(None, 0, secs(4), Duration::ZERO);
        let t0 = Instant::from_secs(10);
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("fd00::9")), Some(ip("fd00::9")));
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("fe80::9")), Some(ip("fe80::9")));
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("2001:db8::1")), None, "no router: no route");
        r.router_advertised(ip("fe80::1"), 30, t0);
        r.router_advertised(ip("fe80::2"), 30, t0);
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("2001:db8::1")), Some(ip("fe80::1")));
        neighbors.solicited_by(ip("fe80::2"), nagare_wire::EthernetAddress([2, 0, 0, 0, 0, 2]), t0);
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("2001:db8::1")), Some(ip("fe80::2")), "a known router first");
        r.prefix_advertised(ip("2001:db8::"), 64, None, u32::MAX);
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("2001:db8::1")), Some(ip("2001:db8::1")));
        let r = Routers::new(Some(ip("fd00::1")), 0, secs(4), Duration::ZERO);
        assert_eq!(r.next_hop(&addrs, &neighbors, ip("2001:db8::1")), Some(ip("fd00::1")));
    }
}
