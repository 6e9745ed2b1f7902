//! The ARP cache and the packets that wait on it.
//!
//! Bounded everywhere: a fixed number of entries (oldest evicted), a fixed
//! number of addresses under resolution, a fixed queue per address and a
//! fixed number of waiting packets in all, and at most one request per
//! address per `request_interval`. An address that
//! never answered is remembered as failed for `failed_lifetime` (at most
//! `pending_addresses` of them): packets to it are given back at once as
//! unreachable, and a packet after that starts a new resolution.

use crate::buf::PacketBuf;
use crate::config::ArpConfig;
use crate::time::Instant;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::Ipv4Addr;
use hashbrown::HashMap;
use nagare_wire::EthernetAddress;

#[derive(Debug, Clone, Copy)]
struct Entry {
    mac: EthernetAddress,
    expires_at: Instant,
}

#[derive(Debug)]
struct Pending {
    /// Packets (IPv4 datagrams with their header) waiting for the address.
    packets: VecDeque<PacketBuf>,
    last_request_at: Option<Instant>,
    requests_sent: u32,
}

/// What the cache asks its owner to do after a lookup or a timer.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The address is known.
    Known(EthernetAddress),
    /// Unknown; the packet waits and an ARP request should be sent now.
    SendRequest,
    /// Unknown; the packet waits, a request went out recently.
    Waiting,
    /// Unknown and no room to wait: the packet was dropped.
    QueueFull,
    /// The address failed to answer lately: the packet is given back, to
    /// be dropped and its sender told.
    Unreachable,
}

/// ARP cache with pending-resolution queues.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    entries: HashMap<Ipv4Addr, Entry>,
    pending: HashMap<Ipv4Addr, Pending>,
    /// Addresses that never answered, with when they may be tried again.
    failed: HashMap<Ipv4Addr, Instant>,
}

impl ArpCache {
    /// An empty cache with the given limits.
    pub fn new(config: ArpConfig) -> Self {
        ArpCache { config, entries: HashMap::new(), pending: HashMap::new(), failed: HashMap::new() }
    }

    /// The address `ip` maps to, if known and not expired.
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<EthernetAddress> {
        self.entries.get(&ip).filter(|e| e.expires_at > now).map(|e| e.mac)
    }

    /// Number of valid and expired-but-not-yet-evicted entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `ip` has an entry (RFC 826's merge rule updates only those,
    /// unless the request was meant for us).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.entries.contains_key(&ip)
    }

    /// Whether `ip` failed to answer and is not yet to be tried again.
    pub fn is_failed(&self, ip: Ipv4Addr, now: Instant) -> bool {
        self.failed.get(&ip).is_some_and(|until| now < *until)
    }

    /// Records `ip` at `mac` and returns the packets that were waiting for it.
    pub fn insert(&mut self, ip: Ipv4Addr, mac: EthernetAddress, now: Instant) -> VecDeque<PacketBuf> {
        self.failed.remove(&ip);
        if !self.entries.contains_key(&ip) && self.entries.len() >= self.config.cache_size {
            self.evict_one(now);
        }
        if self.config.cache_size > 0 {
            self.entries.insert(ip, Entry { mac, expires_at: now + self.config.entry_lifetime });
        }
        self.pending.remove(&ip).map(|p| p.packets).unwrap_or_default()
    }

    fn evict_one(&mut self, now: Instant) {
        // An expired entry if there is one, else the one closest to expiry;
        // a scan bounded by `cache_size`, done only when the cache is full.
        let victim = self.entries.iter().min_by_key(|(_, e)| (e.expires_at > now, e.expires_at)).map(|(ip, _)| *ip);
        if let Some(ip) = victim {
            self.entries.remove(&ip);
        }
    }

    /// Resolves `ip` for `packet`, queueing the packet if the address is not
    /// known yet.
    pub fn resolve(&mut self, ip: Ipv4Addr, packet: PacketBuf, now: Instant) -> (Resolution, Option<PacketBuf>) {
        if let Some(mac) = self.lookup(ip, now) {
            return (Resolution::Known(mac), Some(packet));
        }
        if self.is_failed(ip, now) {
            return (Resolution::Unreachable, Some(packet));
        }
        self.failed.remove(&ip);
        if !self.pending.contains_key(&ip) && self.pending.len() >= self.config.pending_addresses {
            return (Resolution::QueueFull, None);
        }
        if self.pending.values().map(|p| p.packets.len()).sum::<usize>() >= self.config.pending_total {
            return (Resolution::QueueFull, None);
        }
        let interval = self.config.request_interval;
        let pending = self.pending.entry(ip).or_insert_with(|| Pending {
            packets: VecDeque::new(),
            last_request_at: None,
            requests_sent: 0,
        });
        if pending.packets.len() >= self.config.pending_per_address {
            return (Resolution::QueueFull, None);
        }
        pending.packets.push_back(packet);
        let due = match pending.last_request_at {
            None => true,
            Some(at) => now >= at + interval,
        };
        if due {
            pending.last_request_at = Some(now);
            pending.requests_sent += 1;
            (Resolution::SendRequest, None)
        } else {
            (Resolution::Waiting, None)
        }
    }

    /// Runs the retry timer: returns the addresses to send a request for now,
    /// and the packets given up on because their address never answered.
    pub fn poll(&mut self, now: Instant) -> (Vec<Ipv4Addr>, Vec<PacketBuf>) {
        let mut retry = Vec::new();
        let mut dropped = Vec::new();
        if !self.failed.is_empty() {
            self.failed.retain(|_, until| now < *until);
        }
        if self.pending.is_empty() {
            return (retry, dropped);
        }
        let interval = self.config.request_interval;
        let max = self.config.max_requests;
        let mut gave_up = Vec::new();
        self.pending.retain(|ip, pending| {
            let due = pending.last_request_at.is_none_or(|at| now >= at + interval);
            if !due {
                return true;
            }
            if pending.requests_sent >= max {
                dropped.extend(pending.packets.drain(..));
                gave_up.push(*ip);
                return false;
            }
            pending.last_request_at = Some(now);
            pending.requests_sent += 1;
            retry.push(*ip);
            true
        });
        for ip in gave_up {
            self.remember_failed(ip, now);
        }
        (retry, dropped)
    }

    fn remember_failed(&mut self, ip: Ipv4Addr, now: Instant) {
        if self.config.failed_lifetime.is_zero() {
            return;
        }
        if !self.failed.contains_key(&ip) && self.failed.len() >= self.config.pending_addresses.max(1) {
            // The one to be retried soonest makes room; a scan bounded by
            // `pending_addresses`, only when that many failed at once.
            let soonest = self.failed.iter().min_by_key(|(_, until)| **until).map(|(ip, _)| *ip);
            if let Some(old) = soonest {
                self.failed.remove(&old);
            }
        }
        self.failed.insert(ip, now + self.config.failed_lifetime);
    }

    /// When `poll` next has work to do.
    pub fn poll_at(&self) -> Option<Instant> {
        let interval = self.config.request_interval;
        self.pending.values().map(|p| p.last_request_at.map_or(Instant::ZERO, |at| at + interval)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use core::time::Duration;

    const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    fn packet(pool: &BufferPool) -> PacketBuf {
        PacketBuf::from_slice(pool, 0, b"ip").unwrap()
    }

    #[test]
    fn one_request_per_interval_then_give_up() {
        let pool = BufferPool::new(64, 64);
        let mut arp = ArpCache::new(ArpConfig::default());
        let t0 = Instant::from_secs(10);
        assert_eq!(arp.resolve(IP, packet(&pool), t0).0, Resolution::SendRequest);
        assert_eq!(arp.resolve(IP, packet(&pool), t0 + Duration::from_millis(500)).0, Resolution::Waiting);
        assert_eq!(arp.poll_at(), Some(t0 + Duration::from_secs(1)));
        assert!(arp.poll(t0 + Duration::from_millis(999)).0.is_empty());
        assert_eq!(arp.poll(t0 + Duration::from_secs(1)).0, alloc::vec![IP]);
        assert_eq!(arp.poll(t0 + Duration::from_secs(2)).0, alloc::vec![IP]);
        let (retry, dropped) = arp.poll(t0 + Duration::from_secs(3));
        assert!(retry.is_empty());
        assert_eq!(dropped.len(), 2);
        drop(dropped);
        assert_eq!(pool.in_use(), 0, "dropped packets return their buffers");
        assert_eq!(arp.poll_at(), None);
    }

    #[test]
    fn an_address_that_never_answered_fails_fast_until_its_time_is_up() {
        let pool = BufferPool::new(64, 64);
        let mut arp = ArpCache::new(ArpConfig::default());
        let t0 = Instant::from_secs(10);
        assert_eq!(arp.resolve(IP, packet(&pool), t0).0, Resolution::SendRequest);
        arp.poll(t0 + Duration::from_secs(1));
        arp.poll(t0 + Duration::from_secs(2));
        let t3 = t0 + Duration::from_secs(3);
        assert_eq!(arp.poll(t3).1.len(), 1);
        assert!(arp.is_failed(IP, t3));
        let (r, back) = arp.resolve(IP, packet(&pool), t3 + Duration::from_secs(1));
        assert_eq!(r, Resolution::Unreachable);
        assert!(back.is_some(), "the packet comes back to be reported");
        assert_eq!(arp.poll_at(), None, "nothing waits on a failed address");
        let later = t3 + ArpConfig::default().failed_lifetime;
        assert_eq!(arp.resolve(IP, packet(&pool), later).0, Resolution::SendRequest, "tried again once expired");
        arp.poll(t3 + Duration::from_millis(3500));
        assert_eq!(arp.insert(IP, MAC, later).len(), 1);
        assert!(!arp.is_failed(IP, later));
    }

    #[test]
    fn reply_releases_waiting_packets_and_entries_expire() {
        let pool = BufferPool::new(64, 64);
        let mut arp = ArpCache::new(ArpConfig::default());
        let t0 = Instant::from_secs(1);
        arp.resolve(IP, packet(&pool), t0);
        arp.resolve(IP, packet(&pool), t0);
        assert_eq!(arp.insert(IP, MAC, t0).len(), 2);
        assert_eq!(arp.lookup(IP, t0 + Duration::from_secs(59)), Some(MAC));
        assert_eq!(arp.lookup(IP, t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn queues_and_cache_are_bounded() {
        let pool = BufferPool::new(64, 256);
        let config = ArpConfig { cache_size: 4, pending_per_address: 2, pending_addresses: 2, ..ArpConfig::default() };
        let mut arp = ArpCache::new(config);
        let t = Instant::from_secs(1);
        arp.resolve(IP, packet(&pool), t);
        arp.resolve(IP, packet(&pool), t);
        assert_eq!(arp.resolve(IP, packet(&pool), t).0, Resolution::QueueFull);
        arp.resolve(Ipv4Addr::new(10, 0, 0, 3), packet(&pool), t);
        assert_eq!(arp.resolve(Ipv4Addr::new(10, 0, 0, 4), packet(&pool), t).0, Resolution::QueueFull);
        for i in 0..10u8 {
            arp.insert(Ipv4Addr::new(10, 1, 0, i), MAC, t + Duration::from_secs(u64::from(i)));
        }
        assert_eq!(arp.len(), 4);
        assert!(arp.contains(Ipv4Addr::new(10, 1, 0, 9)));
    }

    #[test]
    fn a_large_datagram_s_fragments_wait_whole_within_the_total() {
        let pool = BufferPool::new(64, 512);
        let mut arp = ArpCache::new(ArpConfig::default());
        let t = Instant::from_secs(1);
        // 65 535 bytes at an MTU of 1500: 45 fragments to one new neighbour.
        for _ in 0..45 {
            assert!(arp.resolve(IP, packet(&pool), t).0 != Resolution::QueueFull);
        }
        let config = ArpConfig { pending_per_address: 4, pending_total: 6, ..ArpConfig::default() };
        let mut arp = ArpCache::new(config);
        for i in 0..6u8 {
            assert!(arp.resolve(Ipv4Addr::new(10, 2, 0, i / 3), packet(&pool), t).0 != Resolution::QueueFull);
        }
        let third = Ipv4Addr::new(10, 2, 0, 9);
        assert_eq!(arp.resolve(third, packet(&pool), t).0, Resolution::QueueFull, "six wait in all at most");
    }
}
