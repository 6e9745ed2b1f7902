//! IPv4 reassembly (RFC 791, RFC 815) that refuses the classic attacks.
//!
//! Fragments are kept as buffer chains sorted by offset and joined by moving
//! references. A fragment that overlaps another one discards the whole
//! datagram (teardrop and its relatives: RFC 5722 makes the same choice for
//! IPv6), one that would end past 65535 bytes discards it too (ping of
//! death), and every partial datagram is bounded in time, in fragments and
//! in the memory its buffers pin. One source holds at most a quarter of the
//! partial datagrams: past it, its oldest partial makes room for its newest.

use crate::buf::PacketBuf;
use crate::config::ReassemblyConfig;
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv4Addr;
use hashbrown::HashMap;
use nagare_wire::{IpProtocol, Ipv4Repr, IPV4_HEADER_LEN, IPV4_MAX_TOTAL_LEN};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    ident: u16,
}

#[derive(Debug)]
struct Fragment {
    offset: usize,
    payload: PacketBuf,
}

impl Fragment {
    fn end(&self) -> usize {
        self.offset + self.payload.len()
    }
}

#[derive(Debug)]
struct Partial {
    fragments: Vec<Fragment>,
    /// Payload length, known once the last fragment arrived.
    total_len: Option<usize>,
    received: usize,
    footprint: usize,
    deadline: Instant,
    ttl: u8,
    dscp_ecn: u8,
}

/// What became of a fragment.
#[derive(Debug)]
pub enum Outcome {
    /// The datagram is whole: its header (as if never fragmented) and payload.
    Complete(Ipv4Repr, PacketBuf),
    /// Held until the rest arrives.
    Held,
    /// Dropped, and why.
    Dropped(DropReason),
}

/// Why a fragment was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Overlaps a fragment already held; the datagram is discarded.
    Overlap,
    /// Would end past the largest IPv4 datagram; the datagram is discarded.
    Oversize,
    /// Lengths or offsets inconsistent; the datagram is discarded.
    Malformed,
    /// Same offset and length as a fragment already held.
    Duplicate,
    /// Memory, datagram or fragment limit reached.
    Memory,
}

/// Partial datagrams waiting for their fragments.
#[derive(Debug)]
pub struct Reassembler {
    config: ReassemblyConfig,
    partials: HashMap<Key, Partial>,
    footprint: usize,
    /// Partial datagrams discarded to make room, not yet reported.
    evicted: usize,
}

/// Memory a fragment pins: the buffers it refers to, not just its bytes, so
/// that a flood of tiny fragments cannot hold many full buffers cheaply.
fn footprint(payload: &PacketBuf) -> usize {
    payload.footprint().max(payload.len())
}

impl Reassembler {
    /// An empty reassembler with the given limits.
    pub fn new(config: ReassemblyConfig) -> Self {
        Reassembler { config, partials: HashMap::new(), footprint: 0, evicted: 0 }
    }

    /// Partial datagrams discarded to make room since the last call.
    pub fn take_evictions(&mut self) -> usize {
        core::mem::take(&mut self.evicted)
    }

    /// Discards the partial datagram closest to its timeout, other than
    /// `keep`, among those from `source` (or among all with `None`): under
    /// pressure the oldest goes first (as Linux's evictor), so a flood of
    /// never-completed fragments cannot lock reassembly out.
    fn evict_oldest(&mut self, keep: &Key, source: Option<Ipv4Addr>) -> bool {
        let victim = self
            .partials
            .iter()
            .filter(|(k, _)| *k != keep && source.is_none_or(|src| k.src == src))
            .min_by_key(|(_, p)| p.deadline)
            .map(|(k, _)| *k);
        match victim {
            Some(key) => {
                self.discard(&key);
                self.evicted += 1;
                true
            }
            None => false,
        }
    }

    /// Partial datagrams held for `source`, and the bytes they pin.
    fn held_by(&self, source: Ipv4Addr) -> (usize, usize) {
        self.partials
            .iter()
            .filter(|(k, _)| k.src == source)
            .fold((0, 0), |(n, bytes), (_, p)| (n + 1, bytes + p.footprint))
    }

    /// Partial datagrams held.
    pub fn len(&self) -> usize {
        self.partials.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.partials.is_empty()
    }

    /// Bytes of buffer pinned by held fragments.
    pub fn footprint_bytes(&self) -> usize {
        self.footprint
    }

    fn discard(&mut self, key: &Key) {
        if let Some(partial) = self.partials.remove(key) {
            self.footprint -= partial.footprint;
        }
    }

    /// Takes one fragment (`repr` is its header, `payload` its data).
    pub fn input(&mut self, repr: &Ipv4Repr, payload: PacketBuf, now: Instant) -> Outcome {
        let key = Key { src: repr.src_addr, dst: repr.dst_addr, protocol: repr.protocol.into(), ident: repr.ident };
        let offset = usize::from(repr.frag_offset);
        let len = payload.len();
        let end = offset + len;
        if end + IPV4_HEADER_LEN > IPV4_MAX_TOTAL_LEN {
            self.discard(&key);
            return Outcome::Dropped(DropReason::Oversize);
        }
        if repr.more_frags && (len == 0 || !len.is_multiple_of(8)) {
            self.discard(&key);
            return Outcome::Dropped(DropReason::Malformed);
        }
        let size = footprint(&payload);
        if size > self.config.max_bytes {
            return Outcome::Dropped(DropReason::Memory);
        }
        // One source may hold only a share of the table: a source at its
        // share makes room from its own partials, the oldest first, so that
        // its new datagrams go through as soon as a flood of fragments stops
        // while the flood never pushes out another source's datagrams.
        let per_source_datagrams = (self.config.max_datagrams / 4).max(1);
        let per_source_bytes = self.config.max_bytes / 4;
        if !self.partials.contains_key(&key) {
            while self.held_by(key.src).0 >= per_source_datagrams {
                if !self.evict_oldest(&key, Some(key.src)) {
                    return Outcome::Dropped(DropReason::Memory);
                }
            }
            while self.partials.len() >= self.config.max_datagrams {
                if !self.evict_oldest(&key, None) {
                    return Outcome::Dropped(DropReason::Memory);
                }
            }
        }
        while self.footprint + size > self.config.max_bytes {
            // Short of memory, a source past its share of the bytes gives up
            // its own partials and nobody else's.
            let own = self.held_by(key.src).1 + size > per_source_bytes;
            if !self.evict_oldest(&key, own.then_some(key.src)) {
                return Outcome::Dropped(DropReason::Memory);
            }
        }
        let timeout = self.config.timeout;
        let max_fragments = self.config.max_fragments_per_datagram;
        let partial = self.partials.entry(key).or_insert_with(|| Partial {
            fragments: Vec::new(),
            total_len: None,
            received: 0,
            footprint: 0,
            deadline: now + timeout,
            ttl: repr.ttl,
            dscp_ecn: repr.dscp_ecn,
        });

        let verdict = check_fragment(partial, offset, end, repr.more_frags);
        match verdict {
            Err(DropReason::Duplicate) => return Outcome::Dropped(DropReason::Duplicate),
            Err(reason) => {
                self.discard(&key);
                return Outcome::Dropped(reason);
            }
            Ok(_) if partial.fragments.len() >= max_fragments => {
                self.discard(&key);
                return Outcome::Dropped(DropReason::Memory);
            }
            Ok(index) => {
                if !repr.more_frags {
                    partial.total_len = Some(end);
                }
                if offset == 0 {
                    partial.ttl = repr.ttl;
                    partial.dscp_ecn = repr.dscp_ecn;
                }
                partial.fragments.insert(index, Fragment { offset, payload });
                partial.received += len;
                partial.footprint += size;
                self.footprint += size;
            }
        }

        if partial.total_len != Some(partial.received) {
            return Outcome::Held;
        }
        // No overlaps and every byte in 0..total counted once: the fragments
        // tile the datagram exactly.
        let Some(whole) = self.partials.remove(&key) else {
            return Outcome::Held;
        };
        self.footprint -= whole.footprint;
        let mut payload = PacketBuf::new();
        for fragment in whole.fragments {
            payload.append(fragment.payload);
        }
        let header = Ipv4Repr {
            src_addr: key.src,
            dst_addr: key.dst,
            protocol: IpProtocol::from(key.protocol),
            payload_len: payload.len(),
            ttl: whole.ttl,
            ident: key.ident,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            dscp_ecn: whole.dscp_ecn,
        };
        Outcome::Complete(header, payload)
    }

    /// Discards partial datagrams whose time ran out. Returns how many, and
    /// for those whose first fragment had arrived, that fragment (as a
    /// header and payload) so the caller can send ICMP Time Exceeded
    /// (RFC 1122 3.3.2).
    pub fn poll(&mut self, now: Instant) -> (usize, Vec<(Ipv4Repr, PacketBuf)>) {
        let mut first_fragments = Vec::new();
        if self.partials.is_empty() {
            return (0, first_fragments);
        }
        let before = self.partials.len();
        let mut freed = 0;
        self.partials.retain(|key, p| {
            let keep = p.deadline > now;
            if !keep {
                freed += p.footprint;
                if let Some(first) = p.fragments.first().filter(|f| f.offset == 0) {
                    let header = Ipv4Repr {
                        src_addr: key.src,
                        dst_addr: key.dst,
                        protocol: IpProtocol::from(key.protocol),
                        payload_len: first.payload.len(),
                        ttl: p.ttl,
                        ident: key.ident,
                        dont_frag: false,
                        more_frags: true,
                        frag_offset: 0,
                        dscp_ecn: p.dscp_ecn,
                    };
                    first_fragments.push((header, first.payload.clone()));
                }
            }
            keep
        });
        self.footprint -= freed;
        (before - self.partials.len(), first_fragments)
    }

    /// When the earliest partial datagram times out.
    pub fn poll_at(&self) -> Option<Instant> {
        self.partials.values().map(|p| p.deadline).min()
    }
}

/// Where a fragment `offset..end` goes among those held, or why it cannot.
fn check_fragment(partial: &Partial, offset: usize, end: usize, more_frags: bool) -> Result<usize, DropReason> {
    if let Some(total) = partial.total_len {
        if end > total || (!more_frags && end != total) {
            return Err(DropReason::Malformed);
        }
    }
    if !more_frags && partial.fragments.last().is_some_and(|f| f.end() > end) {
        return Err(DropReason::Malformed);
    }
    let index = partial.fragments.partition_point(|f| f.offset < offset);
    if let Some(next) = partial.fragments.get(index) {
        if next.offset == offset && next.end() == end {
            return Err(DropReason::Duplicate);
        }
        if next.offset < end {
            return Err(DropReason::Overlap);
        }
    }
    if let Some(prev) = index.checked_sub(1).and_then(|i| partial.fragments.get(i)) {
        if prev.end() > offset {
            return Err(DropReason::Overlap);
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use core::time::Duration;

    fn repr(offset: u16, more: bool) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: 0,
            ttl: 64,
            ident: 7,
            dont_frag: false,
            more_frags: more,
            frag_offset: offset,
            dscp_ecn: 0,
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 253) as u8).collect()
    }

    fn feed(r: &mut Reassembler, pool: &BufferPool, whole: &[u8], offset: usize, len: usize, more: bool) -> Outcome {
        let p = PacketBuf::from_slice(pool, 0, &whole[offset..offset + len]).unwrap();
        r.input(&repr(offset as u16, more), p, Instant::ZERO)
    }

    #[test]
    fn reassembles_in_any_order() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(5000);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        assert!(matches!(feed(&mut r, &pool, &whole, 4440, 560, false), Outcome::Held));
        assert!(matches!(feed(&mut r, &pool, &whole, 0, 1480, true), Outcome::Held));
        assert!(matches!(feed(&mut r, &pool, &whole, 2960, 1480, true), Outcome::Held));
        match feed(&mut r, &pool, &whole, 1480, 1480, true) {
            Outcome::Complete(header, payload) => {
                assert_eq!(payload.to_vec(), whole);
                assert_eq!(header.payload_len, 5000);
                assert!(!header.more_frags);
            }
            other => panic!("not complete: {other:?}"),
        }
        assert!(r.is_empty());
        assert_eq!(r.footprint_bytes(), 0);
    }

    #[test]
    fn overlap_discards_the_datagram() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(3000);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        feed(&mut r, &pool, &whole, 0, 1480, true);
        // Teardrop: the second fragment starts inside the first.
        assert!(matches!(feed(&mut r, &pool, &whole, 1000, 1000, false), Outcome::Dropped(DropReason::Overlap)));
        assert!(r.is_empty());
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn exact_duplicate_is_dropped_but_datagram_kept() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(2000);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        feed(&mut r, &pool, &whole, 0, 1480, true);
        assert!(matches!(feed(&mut r, &pool, &whole, 0, 1480, true), Outcome::Dropped(DropReason::Duplicate)));
        assert!(matches!(feed(&mut r, &pool, &whole, 1480, 520, false), Outcome::Complete(..)));
    }

    #[test]
    fn ping_of_death_is_rejected() {
        let pool = BufferPool::new(2048, 64);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let p = PacketBuf::from_slice(&pool, 0, &[0u8; 100]).unwrap();
        // 65528 + 100 + 20 > 65535.
        let out = r.input(&repr(65528, false), p, Instant::ZERO);
        assert!(matches!(out, Outcome::Dropped(DropReason::Oversize)));
    }

    #[test]
    fn inconsistent_lengths_are_malformed() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(3000);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        assert!(matches!(feed(&mut r, &pool, &whole, 0, 1001, true), Outcome::Dropped(DropReason::Malformed)));
        feed(&mut r, &pool, &whole, 0, 1480, true);
        feed(&mut r, &pool, &whole, 2000, 100, false);
        assert!(matches!(feed(&mut r, &pool, &whole, 2400, 8, true), Outcome::Dropped(DropReason::Malformed)));
        assert!(r.is_empty());
    }

    #[test]
    fn timeout_and_memory_cap() {
        let pool = BufferPool::new(2048, 64);
        let config = ReassemblyConfig { max_bytes: 5000, ..ReassemblyConfig::default() };
        let mut r = Reassembler::new(config);
        let whole = data(8000);
        feed(&mut r, &pool, &whole, 0, 1480, true);
        feed(&mut r, &pool, &whole, 1480, 1480, true);
        // The datagram itself is what exceeds the cap: nothing to evict.
        assert!(matches!(feed(&mut r, &pool, &whole, 2960, 1480, true), Outcome::Dropped(DropReason::Memory)));
        assert_eq!(r.poll_at(), Some(Instant::ZERO + Duration::from_secs(30)));
        assert_eq!(r.poll(Instant::from_secs(29)).0, 0);
        let (expired, firsts) = r.poll(Instant::from_secs(30));
        assert_eq!((expired, firsts.len()), (1, 1));
        drop(firsts);
        assert_eq!(r.footprint_bytes(), 0);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn a_flood_of_first_fragments_cannot_lock_others_out() {
        let pool = BufferPool::new(64, 2048);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        for ident in 0..1000u16 {
            let p = PacketBuf::from_slice(&pool, 0, &[0u8; 8]).unwrap();
            let flood = Ipv4Repr { ident, src_addr: Ipv4Addr::new(6, 6, 6, 6), ..repr(0, true) };
            r.input(&flood, p, Instant::from_millis(u64::from(ident)));
        }
        assert!(r.len() <= 64, "one source holds at most a quarter of the table");
        // Other sources fill the rest; the oldest partials make room.
        for i in 0..300u16 {
            let p = PacketBuf::from_slice(&pool, 0, &[0u8; 8]).unwrap();
            let src = Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8);
            let other = Ipv4Repr { src_addr: src, ident: i, ..repr(0, true) };
            r.input(&other, p, Instant::from_secs(2));
        }
        assert!(r.take_evictions() > 0);
        let whole = data(2000);
        feed(&mut r, &pool, &whole, 0, 1480, true);
        assert!(matches!(feed(&mut r, &pool, &whole, 1480, 520, false), Outcome::Complete(..)));
    }

    fn first_fragment(pool: &BufferPool, src: Ipv4Addr, ident: u16, len: usize) -> (Ipv4Repr, PacketBuf) {
        let p = PacketBuf::from_slice(pool, 0, &data(len)).unwrap();
        (Ipv4Repr { src_addr: src, ident, ..repr(0, true) }, p)
    }

    #[test]
    fn a_source_at_its_share_evicts_its_own_oldest() {
        let pool = BufferPool::new(2048, 512);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let flooder = Ipv4Addr::new(10, 0, 0, 1);
        for ident in 0..3000u16 {
            let (header, p) = first_fragment(&pool, flooder, ident.wrapping_add(100), 8);
            r.input(&header, p, Instant::from_millis(u64::from(ident)));
        }
        assert_eq!(r.len(), 64, "the source keeps a quarter of the table");
        assert_eq!(r.take_evictions(), 3000 - 64);
        // The same source's next datagram (ident 7) is whole at once, well
        // before the flood's partials time out.
        let whole = data(4008);
        let later = Instant::from_secs(4);
        for (offset, len, more) in [(0, 1480, true), (1480, 1480, true), (2960, 1048, false)] {
            let p = PacketBuf::from_slice(&pool, 0, &whole[offset..offset + len]).unwrap();
            let outcome = r.input(&repr(offset as u16, more), p, later);
            if more {
                assert!(matches!(outcome, Outcome::Held), "{outcome:?}");
            } else {
                assert!(matches!(outcome, Outcome::Complete(_, ref payload) if payload.to_vec() == whole));
            }
        }
        assert_eq!(r.take_evictions(), 1, "the source's oldest partial made room");
        assert_eq!(r.len(), 63);
    }

    #[test]
    fn a_flood_never_evicts_another_source() {
        let pool = BufferPool::new(2048, 512);
        let config = ReassemblyConfig { max_bytes: 64 * 2048, ..ReassemblyConfig::default() };
        let mut r = Reassembler::new(config);
        let victim = Ipv4Addr::new(10, 0, 0, 1);
        let whole = data(2000);
        let (header, p) = first_fragment(&pool, victim, 7, 1480);
        assert!(matches!(r.input(&header, p, Instant::ZERO), Outcome::Held));
        // Large first fragments from one flooder: past its share of the
        // datagrams and of the memory, it recycles its own partials.
        let flooder = Ipv4Addr::new(6, 6, 6, 6);
        for ident in 0..3000u16 {
            let (header, p) = first_fragment(&pool, flooder, ident, 1480);
            r.input(&header, p, Instant::from_millis(1 + u64::from(ident)));
        }
        assert!(r.footprint_bytes() <= 64 * 2048);
        let p = PacketBuf::from_slice(&pool, 0, &whole[1480..]).unwrap();
        let last = Ipv4Repr { src_addr: victim, ..repr(1480, false) };
        assert!(matches!(r.input(&last, p, Instant::from_secs(5)), Outcome::Complete(..)));
    }
}
