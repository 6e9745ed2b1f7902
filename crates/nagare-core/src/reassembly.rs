//! The table of partial datagrams that IPv4 and IPv6 reassembly share
//! (`ipv4/reassembly.rs`, `ipv6/reassembly.rs`): fragments kept as buffer
//! chains sorted by offset and joined by moving references, and the
//! bounds that refuse the classic attacks.
//!
//! A fragment that overlaps another one discards the whole datagram
//! (teardrop and its relatives; RFC 5722 for IPv6), one that would end
//! past the largest datagram discards it too (ping of death), and every
//! partial datagram is bounded in time, in fragments and in the memory its
//! buffers pin. One source holds at most a quarter of the partial
//! datagrams: past it, its oldest partial makes room for its newest.
//!
//! Each protocol keys its datagrams ([`FragmentKey`]) and keeps a little
//! of the headers beside them (`M`): what the whole datagram's header is
//! made from, taken from the first fragment (offset 0).

use crate::buf::PacketBuf;
use crate::config::ReassemblyConfig;
use crate::time::Instant;
use alloc::vec::Vec;
use core::hash::Hash;
use hashbrown::HashMap;

/// What names one datagram in reassembly, and the source it came from.
pub trait FragmentKey: Copy + Eq + Hash {
    /// The sender, whose share of the table is bounded.
    type Source: Copy + Eq;
    /// The sender of the datagram.
    fn source(&self) -> Self::Source;
}

/// Why a fragment was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Overlaps a fragment already held; the datagram is discarded.
    Overlap,
    /// Would end past the largest datagram; the datagram is discarded.
    Oversize,
    /// Lengths or offsets inconsistent; the datagram is discarded.
    Malformed,
    /// Same offset and length as a fragment already held.
    Duplicate,
    /// Memory, datagram or fragment limit reached.
    Memory,
}

/// What became of a fragment given to [`FragmentTable::input`].
#[derive(Debug)]
pub enum Verdict<M> {
    /// The datagram is whole: the first fragment's headers and the payload.
    Complete(M, PacketBuf),
    /// Held until the rest arrives.
    Held,
    /// Dropped, and why.
    Dropped(DropReason),
}

/// A fragment: where its payload goes in the datagram, whether more
/// follow, and the headers it came with.
#[derive(Debug)]
pub struct FragmentIn<M> {
    /// Offset of the payload in the datagram's, in bytes.
    pub offset: usize,
    /// More fragments follow this one.
    pub more: bool,
    /// The headers kept for the whole datagram (those of the fragment at
    /// offset 0 win).
    pub meta: M,
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
struct Partial<M> {
    fragments: Vec<Fragment>,
    /// Payload length, known once the last fragment arrived.
    total_len: Option<usize>,
    received: usize,
    footprint: usize,
    deadline: Instant,
    meta: M,
}

/// Memory a fragment pins: the buffers it refers to, not just its bytes, so
/// that a flood of tiny fragments cannot hold many full buffers cheaply.
fn footprint(payload: &PacketBuf) -> usize {
    payload.footprint().max(payload.len())
}

/// Partial datagrams waiting for their fragments.
#[derive(Debug)]
pub struct FragmentTable<K, M> {
    config: ReassemblyConfig,
    /// Largest payload a whole datagram may have.
    max_len: usize,
    partials: HashMap<K, Partial<M>>,
    footprint: usize,
    /// Partial datagrams discarded to make room, not yet reported.
    evicted: usize,
}

impl<K: FragmentKey, M: Copy> FragmentTable<K, M> {
    /// An empty table with the given limits, for datagrams whose payload
    /// is at most `max_len` bytes.
    pub fn new(config: ReassemblyConfig, max_len: usize) -> Self {
        FragmentTable { config, max_len, partials: HashMap::new(), footprint: 0, evicted: 0 }
    }

    /// Partial datagrams discarded to make room since the last call.
    pub fn take_evictions(&mut self) -> usize {
        core::mem::take(&mut self.evicted)
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

    /// When the earliest partial datagram times out.
    pub fn poll_at(&self) -> Option<Instant> {
        self.partials.values().map(|p| p.deadline).min()
    }

    /// Discards the partial datagram closest to its timeout, other than
    /// `keep`, among those from `source` (or among all with `None`): under
    /// pressure the oldest goes first (as Linux's evictor), so a flood of
    /// never-completed fragments cannot lock reassembly out.
    fn evict_oldest(&mut self, keep: &K, source: Option<K::Source>) -> bool {
        let victim = self
            .partials
            .iter()
            .filter(|(k, _)| *k != keep && source.is_none_or(|src| k.source() == src))
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
    fn held_by(&self, source: K::Source) -> (usize, usize) {
        self.partials
            .iter()
            .filter(|(k, _)| k.source() == source)
            .fold((0, 0), |(n, bytes), (_, p)| (n + 1, bytes + p.footprint))
    }

    /// Discards the partial datagram `key`, if held.
    pub fn discard(&mut self, key: &K) {
        if let Some(partial) = self.partials.remove(key) {
            self.footprint -= partial.footprint;
        }
    }

    /// Takes one fragment of datagram `key`.
    pub fn input(&mut self, key: K, fragment: FragmentIn<M>, payload: PacketBuf, now: Instant) -> Verdict<M> {
        let FragmentIn { offset, more, meta } = fragment;
        let len = payload.len();
        let end = offset + len;
        if end > self.max_len {
            self.discard(&key);
            return Verdict::Dropped(DropReason::Oversize);
        }
        if more && (len == 0 || !len.is_multiple_of(8)) {
            self.discard(&key);
            return Verdict::Dropped(DropReason::Malformed);
        }
        let size = footprint(&payload);
        if size > self.config.max_bytes {
            return Verdict::Dropped(DropReason::Memory);
        }
        // One source may hold only a share of the table: a source at its
        // share makes room from its own partials, the oldest first, so that
        // its new datagrams go through as soon as a flood of fragments stops
        // while the flood never pushes out another source's datagrams.
        let per_source_datagrams = (self.config.max_datagrams / 4).max(1);
        let per_source_bytes = self.config.max_bytes / 4;
        let source = key.source();
        if !self.partials.contains_key(&key) {
            while self.held_by(source).0 >= per_source_datagrams {
                if !self.evict_oldest(&key, Some(source)) {
                    return Verdict::Dropped(DropReason::Memory);
                }
            }
            while self.partials.len() >= self.config.max_datagrams {
                if !self.evict_oldest(&key, None) {
                    return Verdict::Dropped(DropReason::Memory);
                }
            }
        }
        while self.footprint + size > self.config.max_bytes {
            // Short of memory, a source past its share of the bytes gives up
            // its own partials and nobody else's.
            let own = self.held_by(source).1 + size > per_source_bytes;
            if !self.evict_oldest(&key, own.then_some(source)) {
                return Verdict::Dropped(DropReason::Memory);
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
            meta,
        });

        match check_fragment(partial, offset, end, more) {
            Err(DropReason::Duplicate) => return Verdict::Dropped(DropReason::Duplicate),
            Err(reason) => {
                self.discard(&key);
                return Verdict::Dropped(reason);
            }
            Ok(_) if partial.fragments.len() >= max_fragments => {
                self.discard(&key);
                return Verdict::Dropped(DropReason::Memory);
            }
            Ok(index) => {
                if !more {
                    partial.total_len = Some(end);
                }
                if offset == 0 {
                    partial.meta = meta;
                }
                partial.fragments.insert(index, Fragment { offset, payload });
                partial.received += len;
                partial.footprint += size;
                self.footprint += size;
            }
        }

        if partial.total_len != Some(partial.received) {
            return Verdict::Held;
        }
        // No overlaps and every byte in 0..total counted once: the fragments
        // tile the datagram exactly.
        let Some(whole) = self.partials.remove(&key) else {
            return Verdict::Held;
        };
        self.footprint -= whole.footprint;
        let mut payload = PacketBuf::new();
        for fragment in whole.fragments {
            payload.append(fragment.payload);
        }
        Verdict::Complete(whole.meta, payload)
    }

    /// Discards partial datagrams whose time ran out. Returns how many, and
    /// for those whose first fragment (offset 0) had arrived, its key,
    /// headers and payload, so the caller can tell the sender.
    pub fn poll(&mut self, now: Instant) -> (usize, Vec<(K, M, PacketBuf)>) {
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
                    first_fragments.push((*key, p.meta, first.payload.clone()));
                }
            }
            keep
        });
        self.footprint -= freed;
        (before - self.partials.len(), first_fragments)
    }
}

/// Where a fragment `offset..end` goes among those held, or why it cannot.
fn check_fragment<M>(partial: &Partial<M>, offset: usize, end: usize, more: bool) -> Result<usize, DropReason> {
    if let Some(total) = partial.total_len {
        if end > total || (!more && end != total) {
            return Err(DropReason::Malformed);
        }
    }
    if !more && partial.fragments.last().is_some_and(|f| f.end() > end) {
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
