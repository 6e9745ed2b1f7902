//! The IPv6 neighbour cache (RFC 4861 section 7.3) and the packets that
//! wait on it.
//!
//! Each entry is INCOMPLETE (being resolved with multicast solicitations),
//! REACHABLE (confirmed within `reachable_time`), STALE (known, not
//! confirmed lately), DELAY (STALE and sent to: waiting `delay_first_probe`
//! for upper layers to confirm it) or PROBE (asked again with unicast
//! solicitations). Bounded as the ARP cache is: a fixed number of entries
//! (the least recently used resolved one evicted), a fixed number under
//! resolution, a fixed queue per address; an address that never answers
//! is given up after `max_multicast_solicit` solicitations a
//! `retrans_timer` apart, and its waiting packets are given back to be
//! dropped and counted.

use crate::buf::PacketBuf;
use crate::config::NdpConfig;
use crate::time::Instant;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::Ipv6Addr;
use hashbrown::HashMap;
use nagare_wire::EthernetAddress;

/// The state of a neighbour (RFC 4861 section 7.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighborState {
    /// Resolution is under way; packets wait.
    Incomplete,
    /// Confirmed lately.
    Reachable,
    /// Known but not confirmed lately.
    Stale,
    /// Sent to while STALE; waiting for a confirmation before probing.
    Delay,
    /// Being asked again with unicast solicitations.
    Probe,
}

#[derive(Debug)]
struct Entry {
    state: NeighborState,
    /// `None` only while INCOMPLETE.
    mac: Option<EthernetAddress>,
    /// When the state's timer runs out (none for STALE).
    timer: Option<Instant>,
    /// Solicitations sent in this INCOMPLETE or PROBE state.
    probes: u32,
    /// Packets (IPv6 packets with their header) waiting for resolution.
    queue: VecDeque<PacketBuf>,
    /// Last sent to or confirmed, to choose what to evict.
    used: Instant,
}

/// What the cache asks its owner to do with a packet to send.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The address is known: the packet is given back to be sent there.
    Known(EthernetAddress),
    /// Unknown; the packet waits, and a multicast solicitation is to be
    /// sent now.
    Solicit,
    /// Unknown; the packet waits for the solicitation already sent.
    Waiting,
    /// No room to wait: the packet was dropped.
    QueueFull,
}

/// What [`NeighborCache::poll`] asks its owner to do.
#[derive(Debug, Default)]
pub struct NeighborWork {
    /// Solicitations to send: multicast when no address is given, unicast
    /// to it otherwise.
    pub solicit: Vec<(Ipv6Addr, Option<EthernetAddress>)>,
    /// Packets given up on: their neighbour never answered.
    pub dropped: Vec<PacketBuf>,
    /// Addresses whose entry failed (resolution or probing gave up).
    pub failed: Vec<Ipv6Addr>,
}

/// Neighbour cache with the queues of packets waiting on it.
#[derive(Debug)]
pub struct NeighborCache {
    config: NdpConfig,
    entries: HashMap<Ipv6Addr, Entry>,
}

impl NeighborCache {
    /// An empty cache with the given limits and timers.
    pub fn new(config: NdpConfig) -> Self {
        NeighborCache { config, entries: HashMap::new() }
    }

    /// Sets how long a confirmed neighbour stays REACHABLE (a router's
    /// Reachable Time, RFC 4861 6.3.4), from the next confirmation on.
    pub fn set_reachable_time(&mut self, reachable_time: core::time::Duration) {
        self.config.reachable_time = reachable_time;
    }

    /// Sets the time between solicitations (a router's Retrans Timer),
    /// from the next one on.
    pub fn set_retrans_timer(&mut self, retrans_timer: core::time::Duration) {
        self.config.retrans_timer = retrans_timer;
    }

    /// Entries held, unresolved ones included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The state of `ip`'s entry, if it has one.
    pub fn state(&self, ip: Ipv6Addr) -> Option<NeighborState> {
        self.entries.get(&ip).map(|e| e.state)
    }

    /// The link-layer address cached for `ip`, if any.
    pub fn lookup(&self, ip: Ipv6Addr) -> Option<EthernetAddress> {
        self.entries.get(&ip).and_then(|e| e.mac)
    }

    /// Packets waiting for `ip`.
    pub fn queued(&self, ip: Ipv6Addr) -> usize {
        self.entries.get(&ip).map_or(0, |e| e.queue.len())
    }

    /// Resolves `ip` for `packet` (RFC 4861 section 7.2.2 and 7.3.3): a
    /// known address gives the packet back, sending to a STALE entry
    /// starts its DELAY, an unknown one queues the packet.
    pub fn resolve(&mut self, ip: Ipv6Addr, packet: PacketBuf, now: Instant) -> (Resolution, Option<PacketBuf>) {
        let delay = self.config.delay_first_probe;
        if let Some(entry) = self.entries.get_mut(&ip) {
            if let Some(mac) = entry.mac {
                entry.used = now;
                let expired = entry.state == NeighborState::Reachable && entry.timer.is_some_and(|t| now >= t);
                if entry.state == NeighborState::Stale || expired {
                    entry.state = NeighborState::Delay;
                    entry.timer = Some(now + delay);
                }
                return (Resolution::Known(mac), Some(packet));
            }
            if entry.queue.len() >= self.config.pending_per_address {
                return (Resolution::QueueFull, None);
            }
        }
        if self.entries.values().map(|e| e.queue.len()).sum::<usize>() >= self.config.pending_total {
            return (Resolution::QueueFull, None);
        }
        if let Some(entry) = self.entries.get_mut(&ip) {
            entry.queue.push_back(packet);
            return (Resolution::Waiting, None);
        }
        let incomplete = self.entries.values().filter(|e| e.state == NeighborState::Incomplete).count();
        if incomplete >= self.config.pending_addresses || self.config.pending_per_address == 0 || !self.make_room() {
            return (Resolution::QueueFull, None);
        }
        let mut queue = VecDeque::new();
        queue.push_back(packet);
        let entry = Entry {
            state: NeighborState::Incomplete,
            mac: None,
            timer: Some(now + self.config.retrans_timer),
            probes: 1,
            queue,
            used: now,
        };
        self.entries.insert(ip, entry);
        (Resolution::Solicit, None)
    }

    /// Makes room for one more entry, evicting the least recently used
    /// resolved one if the cache is full (a scan bounded by `cache_size`,
    /// only when full); false if every entry is still being resolved.
    fn make_room(&mut self) -> bool {
        if self.entries.len() < self.config.cache_size {
            return true;
        }
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| e.state != NeighborState::Incomplete)
            .min_by_key(|(_, e)| (e.state != NeighborState::Stale, e.used))
            .map(|(ip, _)| *ip);
        victim.is_some_and(|ip| self.entries.remove(&ip).is_some())
    }

    /// A solicitation from `ip` carried its link-layer address `mac`
    /// (RFC 4861 section 7.2.3): an unknown sender is entered STALE, a
    /// changed address replaces the cached one and makes it STALE. Returns
    /// the packets that waited for it, to be sent to `mac`.
    pub fn solicited_by(&mut self, ip: Ipv6Addr, mac: EthernetAddress, now: Instant) -> VecDeque<PacketBuf> {
        let delay = self.config.delay_first_probe;
        if let Some(entry) = self.entries.get_mut(&ip) {
            if entry.mac != Some(mac) {
                entry.mac = Some(mac);
                entry.state = NeighborState::Stale;
                entry.timer = None;
                entry.probes = 0;
            }
            let waiting = core::mem::take(&mut entry.queue);
            if !waiting.is_empty() {
                // Sending to a STALE entry starts its DELAY.
                entry.state = NeighborState::Delay;
                entry.timer = Some(now + delay);
                entry.used = now;
            }
            return waiting;
        }
        if self.make_room() {
            let entry = Entry {
                state: NeighborState::Stale,
                mac: Some(mac),
                timer: None,
                probes: 0,
                queue: VecDeque::new(),
                used: now,
            };
            self.entries.insert(ip, entry);
        }
        VecDeque::new()
    }

    /// An advertisement for `ip` (RFC 4861 section 7.2.5), with the target
    /// link-layer address it carried if any. Only an entry that exists is
    /// changed. Returns the packets that waited for it, to be sent to the
    /// address now cached.
    pub fn advertised(
        &mut self,
        ip: Ipv6Addr,
        lladdr: Option<EthernetAddress>,
        solicited: bool,
        override_flag: bool,
        now: Instant,
    ) -> VecDeque<PacketBuf> {
        let reachable = self.config.reachable_time;
        let delay = self.config.delay_first_probe;
        let Some(entry) = self.entries.get_mut(&ip) else {
            return VecDeque::new();
        };
        if entry.state == NeighborState::Incomplete {
            let Some(mac) = lladdr else {
                return VecDeque::new();
            };
            entry.mac = Some(mac);
            entry.probes = 0;
            entry.used = now;
            let waiting = core::mem::take(&mut entry.queue);
            if solicited {
                entry.state = NeighborState::Reachable;
                entry.timer = Some(now + reachable);
            } else if waiting.is_empty() {
                entry.state = NeighborState::Stale;
                entry.timer = None;
            } else {
                entry.state = NeighborState::Delay;
                entry.timer = Some(now + delay);
            }
            return waiting;
        }
        let differs = lladdr.is_some_and(|m| Some(m) != entry.mac);
        if !override_flag && differs {
            // Keep the address we know; doubt it if it was confirmed.
            if entry.state == NeighborState::Reachable {
                entry.state = NeighborState::Stale;
                entry.timer = None;
            }
            return VecDeque::new();
        }
        if let Some(mac) = lladdr {
            entry.mac = Some(mac);
        }
        if solicited {
            entry.state = NeighborState::Reachable;
            entry.timer = Some(now + reachable);
            entry.probes = 0;
            entry.used = now;
        } else if differs {
            entry.state = NeighborState::Stale;
            entry.timer = None;
            entry.probes = 0;
        }
        VecDeque::new()
    }

    /// Runs the timers: retransmitted solicitations, REACHABLE turning
    /// STALE, DELAY turning PROBE, and entries given up.
    pub fn poll(&mut self, now: Instant) -> NeighborWork {
        let mut work = NeighborWork::default();
        let config = &self.config;
        self.entries.retain(|ip, e| {
            if e.timer.is_none_or(|t| now < t) {
                return true;
            }
            match e.state {
                NeighborState::Incomplete | NeighborState::Probe => {
                    let max = if e.state == NeighborState::Incomplete {
                        config.max_multicast_solicit
                    } else {
                        config.max_unicast_solicit
                    };
                    if e.probes >= max {
                        work.dropped.extend(e.queue.drain(..));
                        work.failed.push(*ip);
                        return false;
                    }
                    e.probes += 1;
                    e.timer = Some(now + config.retrans_timer);
                    work.solicit.push((*ip, e.mac));
                }
                NeighborState::Reachable => {
                    e.state = NeighborState::Stale;
                    e.timer = None;
                }
                NeighborState::Delay => {
                    e.state = NeighborState::Probe;
                    e.probes = 1;
                    e.timer = Some(now + config.retrans_timer);
                    work.solicit.push((*ip, e.mac));
                }
                NeighborState::Stale => e.timer = None,
            }
            true
        });
        work
    }

    /// When [`poll`](Self::poll) next has work.
    pub fn poll_at(&self) -> Option<Instant> {
        self.entries.values().filter_map(|e| e.timer).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use core::time::Duration;

    const IP: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    const OTHER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 3]);

    fn packet(pool: &BufferPool) -> PacketBuf {
        PacketBuf::from_slice(pool, 0, b"ip6").unwrap()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn unanswered_resolution_solicits_three_times_then_drops_its_queue() {
        let pool = BufferPool::new(64, 64);
        let mut c = NeighborCache::new(NdpConfig::default());
        let t0 = Instant::from_secs(10);
        assert_eq!(c.resolve(IP, packet(&pool), t0).0, Resolution::Solicit);
        assert_eq!(c.resolve(IP, packet(&pool), t0).0, Resolution::Waiting);
        assert_eq!(c.state(IP), Some(NeighborState::Incomplete));
        assert_eq!(c.poll_at(), Some(t0 + secs(1)));
        assert!(c.poll(t0 + Duration::from_millis(999)).solicit.is_empty());
        assert_eq!(c.poll(t0 + secs(1)).solicit, [(IP, None)]);
        assert_eq!(c.poll(t0 + secs(2)).solicit, [(IP, None)]);
        let w = c.poll(t0 + secs(3));
        assert!(w.solicit.is_empty());
        assert_eq!((w.dropped.len(), w.failed.as_slice()), (2, &[IP][..]));
        drop(w);
        assert_eq!(pool.in_use(), 0);
        assert_eq!(c.state(IP), None);
        assert_eq!(c.poll_at(), None);
    }

    #[test]
    fn states_follow_rfc4861_over_time() {
        let pool = BufferPool::new(64, 64);
        let mut c = NeighborCache::new(NdpConfig::default());
        let t0 = Instant::from_secs(10);
        c.resolve(IP, packet(&pool), t0);
        // An unsolicited advertisement leaves a STALE entry; a solicited one
        // a REACHABLE one.
        assert_eq!(c.advertised(IP, Some(MAC), true, true, t0).len(), 1);
        assert_eq!(c.state(IP), Some(NeighborState::Reachable));
        c.poll(t0 + secs(29));
        assert_eq!(c.state(IP), Some(NeighborState::Reachable));
        c.poll(t0 + secs(30));
        assert_eq!(c.state(IP), Some(NeighborState::Stale));
        let t1 = t0 + secs(40);
        assert_eq!(c.resolve(IP, packet(&pool), t1).0, Resolution::Known(MAC));
        assert_eq!(c.state(IP), Some(NeighborState::Delay));
        c.poll(t1 + secs(4));
        assert_eq!(c.state(IP), Some(NeighborState::Delay));
        assert_eq!(c.poll(t1 + secs(5)).solicit, [(IP, Some(MAC))], "a unicast probe");
        assert_eq!(c.state(IP), Some(NeighborState::Probe));
        // A solicited advertisement confirms it.
        c.advertised(IP, None, true, false, t1 + secs(6));
        assert_eq!(c.state(IP), Some(NeighborState::Reachable));
        // Expired, sent to, never confirmed: three probes, then gone.
        let t2 = t1 + secs(100);
        assert_eq!(c.resolve(IP, packet(&pool), t2).0, Resolution::Known(MAC));
        assert_eq!(c.state(IP), Some(NeighborState::Delay));
        assert_eq!(c.poll(t2 + secs(5)).solicit.len(), 1);
        assert_eq!(c.poll(t2 + secs(6)).solicit.len(), 1);
        assert_eq!(c.poll(t2 + secs(7)).solicit.len(), 1);
        assert_eq!(c.poll(t2 + secs(8)).failed, [IP]);
        assert_eq!(c.state(IP), None);
    }

    #[test]
    fn advertisements_follow_rfc4861_7_2_5() {
        let mut c = NeighborCache::new(NdpConfig::default());
        let t = Instant::from_secs(1);
        c.advertised(IP, Some(MAC), true, true, t);
        assert_eq!(c.state(IP), None, "an advertisement creates no entry");
        c.solicited_by(IP, MAC, t);
        assert_eq!((c.state(IP), c.lookup(IP)), (Some(NeighborState::Stale), Some(MAC)));
        c.advertised(IP, Some(MAC), true, false, t);
        assert_eq!(c.state(IP), Some(NeighborState::Reachable));
        // Without override a different address is not taken; REACHABLE
        // turns STALE.
        c.advertised(IP, Some(OTHER_MAC), true, false, t);
        assert_eq!((c.state(IP), c.lookup(IP)), (Some(NeighborState::Stale), Some(MAC)));
        // With override it is, and an unsolicited one leaves it STALE.
        c.advertised(IP, Some(OTHER_MAC), false, true, t);
        assert_eq!((c.state(IP), c.lookup(IP)), (Some(NeighborState::Stale), Some(OTHER_MAC)));
        // A solicitation with a new address replaces it too.
        c.advertised(IP, None, true, false, t);
        c.solicited_by(IP, MAC, t);
        assert_eq!((c.state(IP), c.lookup(IP)), (Some(NeighborState::Stale), Some(MAC)));
    }

    #[test]
    fn entries_and_queues_are_bounded() {
        let pool = BufferPool::new(64, 256);
        let config = NdpConfig { cache_size: 4, pending_per_address: 2, pending_addresses: 2, ..NdpConfig::default() };
        let mut c = NeighborCache::new(config);
        let t = Instant::from_secs(1);
        let ip = |i: u16| Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, i);
        c.resolve(ip(1), packet(&pool), t);
        c.resolve(ip(1), packet(&pool), t);
        assert_eq!(c.resolve(ip(1), packet(&pool), t).0, Resolution::QueueFull);
        c.resolve(ip(2), packet(&pool), t);
        assert_eq!(c.resolve(ip(3), packet(&pool), t).0, Resolution::QueueFull, "two under resolution at most");
        for i in 10..20 {
            c.solicited_by(ip(i), MAC, t + secs(u64::from(i)));
        }
        assert_eq!(c.len(), 4);
        assert_eq!(c.state(ip(1)), Some(NeighborState::Incomplete), "resolutions are never evicted");
        assert_eq!(c.state(ip(19)), Some(NeighborState::Stale));
        assert_eq!(c.state(ip(10)), None, "the least recently used went");
        assert_eq!(pool.in_use(), 3);
    }

    #[test]
    fn a_large_datagram_s_fragments_wait_whole_within_the_total() {
        let pool = BufferPool::new(64, 512);
        let t = Instant::from_secs(1);
        let ip = |i: u16| Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, i);
        let mut c = NeighborCache::new(NdpConfig::default());
        // 65 535 bytes at an MTU of 1500: 46 fragments to one new neighbour.
        for _ in 0..46 {
            assert!(c.resolve(ip(1), packet(&pool), t).0 != Resolution::QueueFull);
        }
        let config = NdpConfig { pending_per_address: 4, pending_total: 6, ..NdpConfig::default() };
        let mut c = NeighborCache::new(config);
        for i in 0..6u16 {
            assert!(c.resolve(ip(1 + i / 3), packet(&pool), t).0 != Resolution::QueueFull);
        }
        assert_eq!(c.resolve(ip(2), packet(&pool), t).0, Resolution::QueueFull, "six wait in all at most");
        assert_eq!(c.resolve(ip(9), packet(&pool), t).0, Resolution::QueueFull);
    }
}
