//! Admission of SYNs during a flood.
//!
//! A listener whose SYN queue is full answers SYNs with cookies
//! (`isn.rs`), so a flood cannot fill memory; it can still fill the CPU,
//! since every spoofed SYN costs a read, a cookie and a SYN-ACK written
//! to the device. The guard bounds that work. It counts the SYNs that
//! would be answered with a cookie and come from a peer not proven
//! lately (a peer proves itself by completing a handshake: that takes
//! the SYN-ACK sent to the address it claims, which a spoofer never
//! sees). While they arrive faster than the budget, the guard is
//! engaged: proven peers always pass, and the others pass with the
//! fraction `budget / rate`, so the work spent on them stays near the
//! budget however fast the flood runs. A new client during a flood gets
//! through with that fraction per try; each SYN it retransmits is a new
//! draw. A proven peer is trusted with at most the budget on its own: one
//! that sends more SYNs than that is proven no longer (a host flooding
//! from its own address, or SYNs spoofed from a known client's).
//!
//! The engine decides; a device that can drop a frame before anyone
//! reads it (a TAP, with a socket filter run in the sender's system
//! call) applies the same decision earlier, from [`SynFilter`], and
//! then the engine does not draw a second time for the ports the filter
//! names, IPv4 and IPv6 alike. The filter lists the
//! [`MAX_FILTER_PROVEN`] most recently proven IPv4 peers and the
//! [`MAX_FILTER_PROVEN6`] most recently proven IPv6 ones (the guard
//! remembers [`MAX_PROVEN`] of both); it is republished at most once per
//! measuring window. Without such a device the engine drops
//! what the draw refuses before making a cookie.
//!
//! Memory is bounded: [`MAX_PROVEN`] peers, [`MAX_FILTER_PORTS`] ports.

use crate::hash::{KeyedState, SipKey};
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;
use hashbrown::HashMap;

/// Unproven SYNs per second above which the guard engages; it lets go
/// below half of it.
pub const DEFAULT_SYN_BUDGET: u32 = 10_000;

/// Peers the guard remembers as proven (the most recent).
pub const MAX_PROVEN: usize = 1024;

/// Proven peers a [`SynFilter`] lists at most (the most recent): what a
/// classic BPF program reaches with its one-byte jumps.
pub const MAX_FILTER_PROVEN: usize = 200;

/// Proven IPv6 peers a [`SynFilter`] lists at most (the most recent):
/// each costs a classic BPF program four comparisons of a word.
pub const MAX_FILTER_PROVEN6: usize = 64;

/// Listening ports a [`SynFilter`] lists at most.
pub const MAX_FILTER_PORTS: usize = 8;

/// The bytes of a TCP header up to and with its flags: a device's filter
/// reads a segment, or an IPv4 first fragment, whose IP payload holds at
/// least these ([`SynFilter`]).
pub const TCP_FLAGS_END: usize = 14;

/// How long a completed handshake keeps a peer proven.
pub const PROVEN_FOR: Duration = Duration::from_secs(300);

/// The span over which the offered rate is measured.
const WINDOW: Duration = Duration::from_millis(250);

/// The smallest fraction admitted, so the offered rate stays measurable
/// through a filter that drops most of it.
const MIN_ADMIT: u32 = u32::MAX / 4096;

/// What a device may apply before the engine reads a frame: a TCP SYN
/// (SYN set, ACK and RST clear) in an IPv4 packet that is not a later
/// fragment and holds the TCP header up to its flags
/// ([`TCP_FLAGS_END`] bytes), or in an IPv6 packet whose TCP header
/// follows the fixed header, to one of `ports`, from an address not in `proven` or
/// `proven6`, is dropped unless a fresh uniformly random `u32` is at most
/// `admit`. Everything else passes (an IPv6 SYN behind an extension
/// header, or an IPv4 one whose first fragment ends before the flags,
/// meets the engine's own draw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynFilter {
    /// Changes whenever anything below does; a device applies each
    /// generation once.
    pub generation: u64,
    /// Off: nothing is dropped (a device removes its filter).
    pub engaged: bool,
    /// Listening ports under the flood.
    pub ports: Vec<u16>,
    /// IPv4 peers that always pass, at most [`MAX_FILTER_PROVEN`].
    pub proven: Vec<Ipv4Addr>,
    /// IPv6 peers that always pass, at most [`MAX_FILTER_PROVEN6`].
    pub proven6: Vec<Ipv6Addr>,
    /// The admitted fraction of the rest, out of `u32::MAX`.
    pub admit: u32,
}

impl Default for SynFilter {
    fn default() -> Self {
        SynFilter {
            generation: 0,
            engaged: false,
            ports: Vec::new(),
            proven: Vec::new(),
            proven6: Vec::new(),
            admit: u32::MAX,
        }
    }
}

/// A proven peer.
#[derive(Debug, Clone, Copy)]
struct Proven {
    /// When it last completed a handshake.
    at: Instant,
    /// SYNs it sent in this window.
    syns: u32,
}

/// The guard of one interface's listeners.
#[derive(Debug)]
pub(super) struct SynGuard {
    /// Unproven SYNs per second that engage the guard (0: never); also
    /// what one proven peer may send.
    budget: u32,
    /// Proven peers, at most [`MAX_PROVEN`].
    proven: HashMap<IpAddr, Proven, KeyedState>,
    /// A peer was proven or demoted since the filter was published.
    proven_dirty: bool,
    window_start: Instant,
    /// Unproven SYNs that reached the engine in this window, to ports the
    /// device filters (they are what passed its draw) and to others.
    arrived_filtered: u64,
    arrived_unfiltered: u64,
    /// Their listening ports.
    ports_seen: Vec<u16>,
    filter: SynFilter,
    /// The device applies `filter` (the engine does not draw again for
    /// its ports).
    device_applies: bool,
    /// Times the guard engaged.
    engaged_count: u64,
}

impl SynGuard {
    /// A guard whose table of proven peers is keyed with `key`.
    pub(super) fn new(key: SipKey) -> Self {
        SynGuard {
            budget: DEFAULT_SYN_BUDGET,
            proven: HashMap::with_hasher(KeyedState(key)),
            proven_dirty: false,
            window_start: Instant::ZERO,
            arrived_filtered: 0,
            arrived_unfiltered: 0,
            ports_seen: Vec::new(),
            filter: SynFilter::default(),
            device_applies: false,
            engaged_count: 0,
        }
    }

    pub(super) fn set_budget(&mut self, per_second: u32) {
        self.budget = per_second;
    }

    pub(super) fn filter(&self) -> &SynFilter {
        &self.filter
    }

    pub(super) fn engaged_count(&self) -> u64 {
        self.engaged_count
    }

    pub(super) fn set_device_applies(&mut self, applies: bool) {
        self.device_applies = applies;
    }

    /// `peer` completed a handshake at `now`. The engine trusts it at
    /// once; the device's filter lists it from the next window.
    pub(super) fn prove(&mut self, peer: IpAddr, now: Instant) {
        if let Some(entry) = self.proven.get_mut(&peer) {
            entry.at = now;
            return;
        }
        if self.proven.len() >= MAX_PROVEN {
            // Rare (a handshake by a peer not yet known, with the table
            // full), so a scan for the oldest is cheap enough.
            if let Some(oldest) = self.proven.iter().min_by_key(|(_, p)| p.at).map(|(a, _)| *a) {
                self.proven.remove(&oldest);
            }
        }
        self.proven.insert(peer, Proven { at: now, syns: 0 });
        self.proven_dirty = true;
    }

    /// Whether `peer` is proven at `now`; counts its SYN, and demotes it
    /// once it sends more than the budget allows one peer in a window.
    fn proven_syn(&mut self, peer: IpAddr, now: Instant) -> bool {
        let cap = self.peer_cap();
        let Some(entry) = self.proven.get_mut(&peer) else {
            return false;
        };
        if now.saturating_since(entry.at) > PROVEN_FOR {
            return false;
        }
        entry.syns = entry.syns.saturating_add(1);
        if entry.syns <= cap {
            return true;
        }
        self.proven.remove(&peer);
        self.proven_dirty = true;
        false
    }

    /// SYNs one proven peer may send in a window: the budget's share of
    /// it, at least one.
    fn peer_cap(&self) -> u32 {
        let per_window = u128::from(self.budget) * WINDOW.as_micros() / 1_000_000;
        u32::try_from(per_window).unwrap_or(u32::MAX).max(1)
    }

    /// Decides on a SYN from `peer` to a listener on `port` whose SYN
    /// queue is full; `draw` is a uniformly distributed number the
    /// sender cannot predict. `device_read`: the SYN came in a packet the
    /// device's filter reads ([`SynFilter`]; not an IPv6 one whose TCP
    /// header lies behind an extension header or that was reassembled
    /// from fragments, nor an IPv4 one reassembled from a first fragment
    /// that ended before the flags), so the device drew for it when its
    /// filter names `port`.
    pub(super) fn admit(&mut self, peer: IpAddr, port: u16, draw: u32, device_read: bool, now: Instant) -> bool {
        self.roll(now);
        if self.proven_syn(peer, now) {
            return true;
        }
        if !self.ports_seen.contains(&port) && self.ports_seen.len() < MAX_FILTER_PORTS {
            self.ports_seen.push(port);
        }
        let filtered = device_read && self.filter.engaged && self.device_applies && self.filter.ports.contains(&port);
        if filtered {
            // The device drew for it already.
            self.arrived_filtered += 1;
            return true;
        }
        self.arrived_unfiltered += 1;
        !self.filter.engaged || draw <= self.filter.admit
    }

    /// When the guard next needs [`poll`](Self::poll): the end of the
    /// window, while engaged (so it lets go when the flood stops).
    pub(super) fn poll_at(&self) -> Option<Instant> {
        self.filter.engaged.then(|| self.window_start + WINDOW)
    }

    pub(super) fn poll(&mut self, now: Instant) {
        self.roll(now);
    }

    /// Closes the window if it has run: the rate it saw decides whether
    /// the guard is engaged and what fraction it admits.
    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_since(self.window_start);
        if elapsed < WINDOW {
            return;
        }
        let micros = elapsed.as_micros().max(1);
        // The device let only `admit` of the SYNs to its ports through.
        let filtered = u128::from(self.arrived_filtered) * (1u128 << 32) / (u128::from(self.filter.admit) + 1);
        let offered = (filtered + u128::from(self.arrived_unfiltered)) * 1_000_000 / micros;
        let budget = u128::from(self.budget);
        let engaged = budget > 0 && if self.filter.engaged { offered * 2 > budget } else { offered > budget };
        let admit = if engaged {
            let fraction = budget * (1u128 << 32) / offered.max(1);
            fraction.clamp(u128::from(MIN_ADMIT), u128::from(u32::MAX)) as u32
        } else {
            u32::MAX
        };
        let mut ports = core::mem::take(&mut self.ports_seen);
        if engaged {
            for port in &self.filter.ports {
                if !ports.contains(port) && ports.len() < MAX_FILTER_PORTS {
                    ports.push(*port);
                }
            }
            ports.sort_unstable();
        } else {
            ports.clear();
        }
        let before = self.proven.len();
        self.proven.retain(|_, p| now.saturating_since(p.at) <= PROVEN_FOR);
        self.proven_dirty |= self.proven.len() != before;
        for p in self.proven.values_mut() {
            p.syns = 0;
        }
        self.window_start = now;
        self.arrived_filtered = 0;
        self.arrived_unfiltered = 0;
        let moved = admit.abs_diff(self.filter.admit) > self.filter.admit / 4;
        let proven_changed = engaged && self.proven_dirty;
        if engaged != self.filter.engaged || ports != self.filter.ports || moved || proven_changed {
            if engaged && !self.filter.engaged {
                self.engaged_count += 1;
            }
            self.publish(engaged, ports, admit);
        }
    }

    fn publish(&mut self, engaged: bool, ports: Vec<u16>, admit: u32) {
        let (proven, proven6) = if engaged {
            let v4 = self.proven.iter().filter_map(|(a, p)| match a {
                IpAddr::V4(a) => Some((p.at, *a)),
                IpAddr::V6(_) => None,
            });
            let v6 = self.proven.iter().filter_map(|(a, p)| match a {
                IpAddr::V4(_) => None,
                IpAddr::V6(a) => Some((p.at, *a)),
            });
            (most_recent(v4, MAX_FILTER_PROVEN), most_recent(v6, MAX_FILTER_PROVEN6))
        } else {
            (Vec::new(), Vec::new())
        };
        self.proven_dirty = false;
        let generation = self.filter.generation + 1;
        self.filter = SynFilter { generation, engaged, ports, proven, proven6, admit };
    }
}

/// The `max` addresses of `peers` proven last, in address order.
fn most_recent<A: Ord + Copy>(peers: impl Iterator<Item = (Instant, A)>, max: usize) -> Vec<A> {
    let mut recent: Vec<(Instant, A)> = peers.collect();
    recent.sort_unstable_by(|x, y| y.cmp(x));
    recent.truncate(max);
    let mut listed: Vec<A> = recent.into_iter().map(|(_, a)| a).collect();
    listed.sort_unstable();
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const PEER: IpAddr = IpAddr::V4(PEER4);
    const KEY: SipKey = SipKey(1, 2);

    fn spoofed4(i: u32) -> Ipv4Addr {
        Ipv4Addr::from(0x5000_0000 + i)
    }

    fn spoofed(i: u32) -> IpAddr {
        IpAddr::V4(spoofed4(i))
    }

    /// Offers `per_second` unproven SYNs for `span`, drawing from a
    /// counter; returns how many were admitted, and when it stopped.
    fn flood(guard: &mut SynGuard, start: Instant, span: Duration, per_second: u64) -> (u64, Instant) {
        offer(guard, start, span, per_second, false)
    }

    /// As `flood`; with `device`, a device applies the guard's filter
    /// first (with draws of its own).
    fn offer(guard: &mut SynGuard, start: Instant, span: Duration, per_second: u64, device: bool) -> (u64, Instant) {
        let step = Duration::from_micros(1_000_000 / per_second);
        let mut now = start;
        let mut admitted = 0;
        let mut n = 0u32;
        while now < start + span {
            let draw = n.wrapping_mul(2_654_435_761); // spread over u32
            let device_draw = n.wrapping_mul(2_246_822_519).rotate_left(13);
            let filter = guard.filter();
            if device && filter.engaged && device_draw > filter.admit {
                n = n.wrapping_add(1);
                now += step;
                continue;
            }
            if guard.admit(spoofed(n), 80, draw, true, now) {
                admitted += 1;
            }
            n = n.wrapping_add(1);
            now += step;
        }
        (admitted, now)
    }

    #[test]
    fn stays_off_below_the_budget() {
        let mut guard = SynGuard::new(KEY);
        let (admitted, _) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(2), 5_000);
        assert_eq!(admitted, 10_000);
        assert!(!guard.filter().engaged);
        assert_eq!(guard.filter().generation, 0);
    }

    #[test]
    fn a_flood_is_cut_to_about_the_budget_and_proven_peers_always_pass() {
        let mut guard = SynGuard::new(KEY);
        guard.prove(PEER, Instant::from_secs(1));
        let (admitted, now) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(4), 200_000);
        let filter = guard.filter().clone();
        assert!(filter.engaged);
        assert_eq!(filter.ports, [80]);
        assert_eq!(filter.proven, [PEER4]);
        // 10,000 of 200,000 per second: a twentieth.
        let expected = u64::from(u32::MAX / 20);
        assert!(u64::from(filter.admit).abs_diff(expected) < expected / 5, "admit {}", filter.admit);
        // The first window passes everything; after it, about the budget.
        assert!((40_000..100_000).contains(&admitted), "admitted {admitted} of 800,000");
        for draw in [0, u32::MAX / 2, u32::MAX] {
            assert!(guard.admit(PEER, 80, draw, true, now));
        }
        assert_eq!(guard.engaged_count(), 1);
    }

    #[test]
    fn lets_go_when_the_flood_stops() {
        let mut guard = SynGuard::new(KEY);
        let (_, now) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(1), 100_000);
        assert!(guard.filter().engaged);
        // The window under way still holds part of the flood; the next
        // one is quiet.
        let mut at = now;
        for _ in 0..2 {
            at = guard.poll_at().expect("an engaged guard asks to be polled").max(at + WINDOW);
            guard.poll(at);
        }
        assert!(!guard.filter().engaged);
        assert_eq!(guard.filter().admit, u32::MAX);
        assert!(guard.filter().proven.is_empty() && guard.filter().ports.is_empty());
        assert_eq!(guard.poll_at(), None);
    }

    #[test]
    fn a_device_that_filters_keeps_the_estimate_of_the_whole_flood() {
        let mut guard = SynGuard::new(KEY);
        let start = Instant::from_secs(1);
        let (_, mut now) = flood(&mut guard, start, Duration::from_secs(1), 200_000);
        let admit = guard.filter().admit;
        guard.set_device_applies(true);
        // The device passes only about `admit` of the flood, and the
        // engine admits all it sees.
        let (admitted, later) = offer(&mut guard, now, Duration::from_secs(2), 200_000, true);
        now = later;
        assert!((16_000..24_000).contains(&admitted), "admitted {admitted} in 2 s");
        assert!(guard.filter().engaged);
        let drift = u64::from(guard.filter().admit).abs_diff(u64::from(admit));
        assert!(drift < u64::from(admit) / 5, "admit went from {admit} to {}", guard.filter().admit);
        guard.poll(now + WINDOW);
        guard.poll(now + WINDOW * 2);
        assert!(!guard.filter().engaged);
    }

    #[test]
    fn a_newly_proven_peer_passes_at_once_reaches_the_filter_next_window_and_expires() {
        let mut guard = SynGuard::new(KEY);
        let (_, now) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(1), 100_000);
        let before = guard.filter().generation;
        guard.prove(PEER, now);
        assert_eq!(guard.filter().generation, before, "no new filter per handshake");
        assert!(guard.admit(PEER, 80, u32::MAX, true, now));
        // The flood goes on past the window's end.
        let (_, now) = flood(&mut guard, now, WINDOW + Duration::from_millis(10), 100_000);
        assert!(guard.filter().engaged);
        assert!(guard.filter().generation > before);
        assert_eq!(guard.filter().proven, [PEER4]);
        assert!(guard.proven_syn(PEER, now + Duration::from_secs(1)));
        assert!(!guard.proven_syn(PEER, now + PROVEN_FOR + Duration::from_secs(1)), "proof expires");
    }

    #[test]
    fn the_proven_table_is_bounded_and_the_filter_lists_the_most_recent() {
        let mut guard = SynGuard::new(KEY);
        let total = MAX_PROVEN as u32 + 10;
        for i in 0..total {
            guard.prove(spoofed(i), Instant::from_millis(u64::from(i) + 1));
        }
        assert_eq!(guard.proven.len(), MAX_PROVEN);
        assert!(!guard.proven.contains_key(&spoofed(0)), "the oldest went first");
        assert!(guard.proven.contains_key(&spoofed(total - 1)));
        let (_, _) = flood(&mut guard, Instant::from_secs(2), Duration::from_secs(1), 100_000);
        let listed = &guard.filter().proven;
        assert_eq!(listed.len(), MAX_FILTER_PROVEN);
        assert!(listed.contains(&spoofed4(total - 1)));
        assert!(!listed.contains(&spoofed4(total - 1 - MAX_FILTER_PROVEN as u32)));
    }

    #[test]
    fn a_proven_peer_that_floods_is_proven_no_longer() {
        let mut guard = SynGuard::new(KEY);
        guard.set_budget(1_000);
        let start = Instant::from_secs(1);
        guard.prove(PEER, start);
        // 250 SYNs in a window are its share of a 1,000-a-second budget.
        let mut now = start;
        for _ in 0..250 {
            assert!(guard.admit(PEER, 80, u32::MAX, true, now));
            now += Duration::from_micros(100);
        }
        assert!(guard.proven.contains_key(&PEER));
        assert!(guard.admit(PEER, 80, u32::MAX, true, now), "not engaged: everything passes");
        assert!(!guard.proven.contains_key(&PEER), "the 251st demotes it");
        // A handshake proves it again.
        guard.prove(PEER, now);
        assert!(guard.proven.contains_key(&PEER));
    }

    #[test]
    fn the_engine_draws_for_ports_the_device_does_not_filter() {
        let mut guard = SynGuard::new(KEY);
        let (_, now) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(1), 200_000);
        assert_eq!(guard.filter().ports, [80]);
        guard.set_device_applies(true);
        // Port 80 is the device's: what reaches the engine passed its draw.
        assert!(guard.admit(spoofed(1), 80, u32::MAX, true, now));
        // Port 81 is not in the filter: the engine draws.
        assert!(!guard.admit(spoofed(2), 81, u32::MAX, true, now));
        assert!(guard.admit(spoofed(3), 81, 0, true, now));
    }

    #[test]
    fn a_zero_budget_never_engages() {
        let mut guard = SynGuard::new(KEY);
        guard.set_budget(0);
        let (admitted, _) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(1), 200_000);
        assert_eq!(admitted, 200_000);
        assert!(!guard.filter().engaged);
    }

    #[test]
    fn the_device_draws_for_ipv6_syns_it_reads_and_the_engine_for_those_it_does_not() {
        let mut guard = SynGuard::new(KEY);
        guard.set_device_applies(true);
        let (_, now) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(1), 200_000);
        assert!(guard.filter().engaged && guard.filter().ports.contains(&80));
        let six = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 9));
        assert!(guard.admit(six, 80, u32::MAX, true, now), "an IPv6 SYN passed the device's draw");
        assert!(!guard.admit(six, 80, u32::MAX, false, now), "behind an extension header: the engine draws");
        assert!(guard.admit(six, 80, 0, false, now));
        assert!(!guard.admit(six, 81, u32::MAX, true, now), "a port the device does not filter");
        assert!(guard.admit(spoofed(7), 80, u32::MAX, true, now), "an IPv4 SYN passed the device's draw");
        guard.prove(six, now);
        assert!(guard.admit(six, 80, u32::MAX, false, now), "a proven IPv6 peer passes");
    }

    #[test]
    fn the_filter_lists_the_most_recently_proven_ipv6_peers_beside_the_ipv4_ones() {
        let mut guard = SynGuard::new(KEY);
        let six = |i: u16| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, i);
        let total = MAX_FILTER_PROVEN6 as u16 + 5;
        for i in 0..total {
            guard.prove(IpAddr::V6(six(i)), Instant::from_millis(u64::from(i) + 1));
        }
        guard.prove(PEER, Instant::from_millis(500));
        let (_, _) = flood(&mut guard, Instant::from_secs(1), Duration::from_secs(1), 100_000);
        let filter = guard.filter();
        assert!(filter.engaged);
        assert_eq!(filter.proven, [PEER4]);
        let expected: Vec<Ipv6Addr> = (5..total).map(six).collect();
        assert_eq!(filter.proven6, expected, "the most recent, in address order");
        let (_, now) = flood(&mut guard, Instant::from_secs(2), Duration::from_secs(1), 100_000);
        guard.poll(now + WINDOW);
        guard.poll(now + WINDOW * 2);
        assert!(!guard.filter().engaged);
        assert!(guard.filter().proven6.is_empty());
    }
}
