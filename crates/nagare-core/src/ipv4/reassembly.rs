//! IPv4 reassembly (RFC 791, RFC 815) that refuses the classic attacks.
//!
//! The table of partial datagrams and its bounds are shared with IPv6
//! (`crate::reassembly`): an overlap discards the whole datagram (as RFC
//! 5722 asks of IPv6), one that would end past 65535 bytes discards it too
//! (ping of death), and every partial datagram is bounded in time, in
//! fragments and in the memory its buffers pin. Datagrams are keyed by
//! source, destination, protocol and identification; the TTL and DSCP/ECN
//! of the first fragment make the whole datagram's header.

use crate::buf::PacketBuf;
use crate::config::ReassemblyConfig;
use crate::reassembly::{FragmentIn, FragmentKey, FragmentTable, Verdict};
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv4Addr;
use nagare_wire::{IpProtocol, Ipv4Repr, IPV4_HEADER_LEN, IPV4_MAX_TOTAL_LEN};

pub use crate::reassembly::DropReason;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    ident: u16,
}

impl FragmentKey for Key {
    type Source = Ipv4Addr;
    fn source(&self) -> Ipv4Addr {
        self.src
    }
}

/// What the whole datagram keeps of the first fragment: its header's
/// TTL and DSCP/ECN, and how many payload bytes it held.
#[derive(Debug, Clone, Copy)]
struct Meta {
    ttl: u8,
    dscp_ecn: u8,
    first_len: usize,
}

/// What became of a fragment.
#[derive(Debug)]
pub enum Outcome {
    /// The datagram is whole: its header (as if never fragmented), its
    /// payload, and how many bytes of the payload its first fragment held
    /// (what a device that reads first fragments saw of it).
    Complete(Ipv4Repr, PacketBuf, usize),
    /// Held until the rest arrives.
    Held,
    /// Dropped, and why.
    Dropped(DropReason),
}

/// Partial IPv4 datagrams waiting for their fragments.
#[derive(Debug)]
pub struct Reassembler {
    table: FragmentTable<Key, Meta>,
}

/// The header of a datagram `key` with `payload_len` bytes of payload.
fn header(key: &Key, meta: Meta, payload_len: usize, more_frags: bool) -> Ipv4Repr {
    Ipv4Repr {
        src_addr: key.src,
        dst_addr: key.dst,
        protocol: IpProtocol::from(key.protocol),
        payload_len,
        ttl: meta.ttl,
        ident: key.ident,
        dont_frag: false,
        more_frags,
        frag_offset: 0,
        dscp_ecn: meta.dscp_ecn,
    }
}

impl Reassembler {
    /// An empty reassembler with the given limits.
    pub fn new(config: ReassemblyConfig) -> Self {
        Reassembler { table: FragmentTable::new(config, IPV4_MAX_TOTAL_LEN - IPV4_HEADER_LEN) }
    }

    /// Partial datagrams discarded to make room since the last call.
    pub fn take_evictions(&mut self) -> usize {
        self.table.take_evictions()
    }

    /// Partial datagrams held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Bytes of buffer pinned by held fragments.
    pub fn footprint_bytes(&self) -> usize {
        self.table.footprint_bytes()
    }

    /// Takes one fragment (`repr` is its header, `payload` its data).
    pub fn input(&mut self, repr: &Ipv4Repr, payload: PacketBuf, now: Instant) -> Outcome {
        let key = Key { src: repr.src_addr, dst: repr.dst_addr, protocol: repr.protocol.into(), ident: repr.ident };
        let fragment = FragmentIn {
            offset: usize::from(repr.frag_offset),
            more: repr.more_frags,
            meta: Meta { ttl: repr.ttl, dscp_ecn: repr.dscp_ecn, first_len: payload.len() },
        };
        match self.table.input(key, fragment, payload, now) {
            Verdict::Complete(meta, payload) => {
                Outcome::Complete(header(&key, meta, payload.len(), false), payload, meta.first_len)
            }
            Verdict::Held => Outcome::Held,
            Verdict::Dropped(reason) => Outcome::Dropped(reason),
        }
    }

    /// Discards partial datagrams whose time ran out. Returns how many, and
    /// for those whose first fragment had arrived, that fragment (as a
    /// header and payload) so the caller can send ICMP Time Exceeded
    /// (RFC 1122 3.3.2).
    pub fn poll(&mut self, now: Instant) -> (usize, Vec<(Ipv4Repr, PacketBuf)>) {
        let (expired, firsts) = self.table.poll(now);
        let firsts = firsts.into_iter().map(|(key, meta, p)| (header(&key, meta, p.len(), true), p)).collect();
        (expired, firsts)
    }

    /// When the earliest partial datagram times out.
    pub fn poll_at(&self) -> Option<Instant> {
        self.table.poll_at()
    }
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
            Outcome::Complete(header, payload, first_len) => {
                assert_eq!(first_len, 1480, "the first fragment's payload");
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
                assert!(matches!(outcome, Outcome::Complete(_, ref payload, _) if payload.to_vec() == whole));
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
