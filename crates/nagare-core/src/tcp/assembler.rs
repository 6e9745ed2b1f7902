//! Out-of-order data waiting for the hole in front of it (RFC 9293 section
//! 3.10.7.4 allows keeping it; RFC 2018 says how to report it with SACK).
//!
//! Stored data is kept as blocks: maximal contiguous runs of sequence space,
//! each one chain of the buffers the segments arrived in, sorted by sequence
//! number. A new segment fills only the gaps between the blocks it touches,
//! so the bytes that arrived first win and nothing is copied; touching
//! blocks are joined into one. Every block also remembers when it last
//! received a segment, which is the order RFC 2018 wants SACK blocks in.
//!
//! Sequence numbers come from the peer, so everything is computed as signed
//! 64-bit offsets from `rcv_nxt` after the window has clipped the segment:
//! no arithmetic on them can overflow, whatever the peer sends.

use crate::buf::PacketBuf;
use alloc::vec::Vec;
use core::fmt;
use nagare_wire::TcpSeqNumber;
use smallvec::SmallVec;

/// The largest window TCP can advertise (RFC 7323 section 2.3). A window
/// end further than this from `rcv_nxt` is a caller bug; clamping it keeps
/// every stored offset far from the 2^31 ambiguity of sequence comparison.
const MAX_WINDOW: i64 = 1 << 30;

/// Bounds on what the assembler keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssemblerLimits {
    /// Most blocks (contiguous runs, that is holes plus one) kept at once.
    pub max_segments: usize,
    /// Most bytes of data kept. The pool buffers that data pins (see
    /// [`PacketBuf::footprint`]) are bounded too, to [`FOOTPRINT_FACTOR`]
    /// times this.
    pub max_bytes: usize,
}

/// How much pool buffer stored data may pin, as a multiple of
/// `max_bytes`. Without such a bound a peer sending one-byte segments could
/// hold a whole buffer per byte of window; with it, ordinary segments (a
/// 1460-byte payload in a 2048-byte buffer, or even 536 bytes) still fill
/// the whole window.
pub const FOOTPRINT_FACTOR: usize = 4;

impl AssemblerLimits {
    fn admit(&self, blocks: usize, bytes: usize, footprint: usize) -> bool {
        blocks <= self.max_segments
            && bytes <= self.max_bytes
            && footprint <= self.max_bytes.saturating_mul(FOOTPRINT_FACTOR)
    }
}

/// What [`Assembler::insert`] did with a segment's bytes. Every byte of the
/// segment is counted in exactly one of `stored`, `duplicate`,
/// `outside_window` and `dropped_for_limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InsertOutcome {
    /// Bytes newly stored.
    pub stored: usize,
    /// Bytes already received: before `rcv_nxt`, or already stored (the
    /// stored copy is kept).
    pub duplicate: usize,
    /// Bytes at or beyond the window's end, trimmed.
    pub outside_window: usize,
    /// New bytes not stored because the limits would not allow it.
    pub dropped_for_limits: usize,
    /// Stored bytes (of earlier segments) discarded to make room for this
    /// one, which lies closer to `rcv_nxt`. This is reneging, which RFC 2018
    /// section 8 allows when buffers run short: the peer keeps SACKed data
    /// until it is acknowledged cumulatively and sends it again.
    pub evicted: usize,
}

struct Block {
    seq: TcpSeqNumber,
    /// Value of the assembler's clock when a segment last landed in or
    /// merged into this block.
    stamp: u32,
    data: PacketBuf,
}

/// Out-of-order segments, bounded in count and memory.
pub struct Assembler {
    /// Sorted by sequence number, never empty, overlapping or adjacent: any
    /// two blocks have a hole between them. Empty holds no allocation.
    blocks: Vec<Block>,
    limits: AssemblerLimits,
    bytes: usize,
    footprint: usize,
    clock: u32,
}

/// A gap filled by a new segment, tagged with the index of the block it
/// goes in front of.
type Gaps = SmallVec<[(usize, PacketBuf); 2]>;

/// Bytes held and bytes of buffer pinned by `blocks`.
fn usage(blocks: &[Block]) -> (usize, usize) {
    blocks.iter().fold((0, 0), |(bytes, footprint), b| (bytes + b.data.len(), footprint + b.data.footprint()))
}

impl Assembler {
    /// An empty assembler.
    pub fn new(limits: AssemblerLimits) -> Self {
        Assembler { blocks: Vec::new(), limits, bytes: 0, footprint: 0, clock: 0 }
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Bytes stored.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of pool buffer the stored data pins.
    pub fn footprint(&self) -> usize {
        self.footprint
    }

    /// Contiguous blocks stored (what `max_segments` bounds).
    pub fn segments(&self) -> usize {
        self.blocks.len()
    }

    /// The limits in force.
    pub fn limits(&self) -> AssemblerLimits {
        self.limits
    }

    /// Changes the limits. What is stored beyond lowered limits stays; only
    /// new segments are held to them.
    pub fn set_limits(&mut self, limits: AssemblerLimits) {
        self.limits = limits;
    }

    /// Raises the byte limit (a receive buffer that grew); never lowers it,
    /// so what is stored always stays within the limits.
    pub fn raise_max_bytes(&mut self, max_bytes: usize) {
        self.limits.max_bytes = self.limits.max_bytes.max(max_bytes);
    }

    /// Drops everything stored.
    pub fn clear(&mut self) {
        self.blocks = Vec::new();
        self.bytes = 0;
        self.footprint = 0;
    }

    fn tick(&mut self) -> u32 {
        self.clock = self.clock.wrapping_add(1);
        self.clock
    }

    #[inline]
    fn rel(seq: TcpSeqNumber, rcv_nxt: TcpSeqNumber) -> i64 {
        i64::from(seq - rcv_nxt)
    }

    fn forget(&mut self, block: &Block) {
        self.bytes = self.bytes.saturating_sub(block.data.len());
        self.footprint = self.footprint.saturating_sub(block.data.footprint());
    }

    /// Discards stored data the caller has already delivered past, which
    /// happens when an in-order segment overlapped a stored block.
    fn purge(&mut self, rcv_nxt: TcpSeqNumber) {
        let mut stale = 0;
        for block in &self.blocks {
            let end = Self::rel(block.seq, rcv_nxt) + block.data.len() as i64;
            if end > 0 {
                break;
            }
            stale += 1;
        }
        if stale > 0 {
            let gone: SmallVec<[Block; 2]> = self.blocks.drain(..stale).collect();
            for block in &gone {
                self.forget(block);
            }
        }
        if let Some(first) = self.blocks.first_mut() {
            let start = Self::rel(first.seq, rcv_nxt);
            if start < 0 {
                let before = (first.data.len(), first.data.footprint());
                first.data.trim_front(start.unsigned_abs() as usize);
                first.seq = rcv_nxt;
                self.bytes = self.bytes.saturating_sub(before.0 - first.data.len());
                self.footprint = self.footprint.saturating_sub(before.1.saturating_sub(first.data.footprint()));
            }
        }
        if self.blocks.is_empty() {
            self.blocks = Vec::new();
        }
    }

    /// Stores the out-of-order segment `data` that starts at `seq`.
    ///
    /// Everything before `rcv_nxt` has been delivered and the receive window
    /// ends at `window_end`: bytes outside `rcv_nxt..window_end` are
    /// trimmed, and bytes already stored keep their first copy. When a limit
    /// would be exceeded, stored blocks beyond the new data are evicted
    /// starting from the furthest, since data closest to `rcv_nxt` is what
    /// lets the stream advance; if the new data lies in front of the blocks
    /// it overlaps, those go too. If no eviction can make room the new bytes
    /// are dropped instead.
    pub fn insert(
        &mut self,
        seq: TcpSeqNumber,
        mut data: PacketBuf,
        rcv_nxt: TcpSeqNumber,
        window_end: TcpSeqNumber,
    ) -> InsertOutcome {
        let mut out = InsertOutcome::default();
        if data.is_empty() {
            return out;
        }
        self.purge(rcv_nxt);
        let total = data.len();
        let len = i64::try_from(total).unwrap_or(i64::MAX);
        let win = Self::rel(window_end, rcv_nxt).clamp(0, MAX_WINDOW);
        let a0 = Self::rel(seq, rcv_nxt);
        let b0 = a0.saturating_add(len);
        let before = (b0.min(0) - a0).clamp(0, len);
        let after = (b0 - a0.max(win)).clamp(0, len - before);
        let kept = len - before - after;
        out.duplicate = before as usize;
        out.outside_window = after as usize;
        if kept == 0 {
            return out;
        }
        data.trim_front(before as usize);
        data.truncate(kept as usize);
        let a = a0.max(0);
        let b = a + kept;

        // Blocks i..j overlap or touch a..b.
        let i = self.blocks.partition_point(|blk| Self::rel(blk.seq, rcv_nxt) + (blk.data.len() as i64) < a);
        let j = self.blocks.partition_point(|blk| Self::rel(blk.seq, rcv_nxt) <= b);
        let j = j.max(i);

        // The gaps between those blocks that the new data fills.
        let mut gaps = Gaps::new();
        let mut cursor = a;
        for k in i..j {
            let Some(blk) = self.blocks.get(k) else { break };
            let start = Self::rel(blk.seq, rcv_nxt);
            if start > cursor {
                let piece = data.slice((cursor - a) as usize, (start.min(b) - cursor) as usize);
                gaps.extend(piece.map(|p| (k, p)));
            }
            cursor = cursor.max(start + blk.data.len() as i64);
        }
        if b > cursor {
            gaps.extend(data.slice((cursor - a) as usize, (b - cursor) as usize).map(|p| (j, p)));
        }
        let new_bytes: usize = gaps.iter().map(|(_, p)| p.len()).sum();
        let new_footprint: usize = gaps.iter().map(|(_, p)| p.footprint()).sum();
        let overlap = (kept as usize).saturating_sub(new_bytes);
        let stamp = self.tick();
        if new_bytes == 0 {
            // A pure duplicate still names the block that triggers the ACK
            // (RFC 2018 section 4: the first SACK block covers it).
            if let Some(blk) = self.blocks.get_mut(i) {
                blk.stamp = stamp;
            }
            out.duplicate += overlap;
            return out;
        }

        let new_block = i == j;
        if !self.make_room(j, usize::from(new_block), new_bytes, new_footprint, &mut out) {
            // The blocks this data touches cannot be kept together with it.
            // If it lies in front of all of them, it is worth more than they
            // are: replace them (and everything beyond) with it. This is
            // what keeps the stream moving when the data at rcv_nxt itself
            // arrives with the buffer full of later data.
            drop(gaps);
            let first_start = self.blocks.get(i).map_or(a, |blk| Self::rel(blk.seq, rcv_nxt));
            if !new_block && a <= first_start && self.replace_from(i, data, rcv_nxt + a as usize, stamp, &mut out) {
                out.stored = kept as usize;
            } else {
                out.duplicate += overlap;
                out.dropped_for_limits = new_bytes;
            }
            return out;
        }
        drop(data);
        self.bytes += new_bytes;
        self.footprint += new_footprint;
        out.stored = new_bytes;
        out.duplicate += overlap;

        if new_block {
            let data = gaps.into_iter().map(|(_, p)| p).next().unwrap_or_default();
            self.blocks.insert(i, Block { seq: rcv_nxt + a as usize, stamp, data });
            return out;
        }
        let block_start = self.blocks.get(i).map_or(a, |blk| Self::rel(blk.seq, rcv_nxt)).min(a);
        let mut merged = PacketBuf::new();
        let mut gaps = gaps.into_iter().peekable();
        for k in i..j {
            while let Some((_, piece)) = gaps.next_if(|(slot, _)| *slot == k) {
                merged.append(piece);
            }
            if let Some(blk) = self.blocks.get_mut(k) {
                merged.append(core::mem::take(&mut blk.data));
            }
        }
        for (_, piece) in gaps {
            merged.append(piece);
        }
        if let Some(first) = self.blocks.get_mut(i) {
            first.seq = rcv_nxt + block_start as usize;
            first.stamp = stamp;
            first.data = merged;
        }
        self.blocks.drain(i + 1..j);
        out
    }

    /// Evicts every block from index `i` on and stores `data` alone in
    /// their place, if that respects the limits; otherwise changes nothing.
    fn replace_from(
        &mut self,
        i: usize,
        data: PacketBuf,
        seq: TcpSeqNumber,
        stamp: u32,
        out: &mut InsertOutcome,
    ) -> bool {
        let footprint = data.footprint();
        let (head_bytes, head_footprint) = usage(self.blocks.get(..i).unwrap_or_default());
        let admitted = self.limits.admit(
            i.saturating_add(1),
            head_bytes.saturating_add(data.len()),
            head_footprint.saturating_add(footprint),
        );
        if !admitted {
            return false;
        }
        while self.blocks.len() > i {
            if let Some(victim) = self.blocks.pop() {
                self.forget(&victim);
                out.evicted += victim.data.len();
            }
        }
        self.bytes += data.len();
        self.footprint += footprint;
        self.blocks.push(Block { seq, stamp, data });
        true
    }

    /// Makes room for `extra_blocks` more blocks holding `extra_bytes` more
    /// bytes in `extra_footprint` more bytes of buffer, by evicting blocks
    /// from index `keep` on, furthest first. Evicts nothing and returns
    /// false if even evicting all of those would not do.
    fn make_room(
        &mut self,
        keep: usize,
        extra_blocks: usize,
        extra_bytes: usize,
        extra_footprint: usize,
        out: &mut InsertOutcome,
    ) -> bool {
        let fits = |blocks: usize, bytes: usize, footprint: usize, limits: &AssemblerLimits| {
            limits.admit(
                blocks.saturating_add(extra_blocks),
                bytes.saturating_add(extra_bytes),
                footprint.saturating_add(extra_footprint),
            )
        };
        if fits(self.blocks.len(), self.bytes, self.footprint, &self.limits) {
            return true;
        }
        let (tail_bytes, tail_footprint) = usage(self.blocks.get(keep..).unwrap_or_default());
        let kept_blocks = keep.min(self.blocks.len());
        if !fits(
            kept_blocks,
            self.bytes.saturating_sub(tail_bytes),
            self.footprint.saturating_sub(tail_footprint),
            &self.limits,
        ) {
            return false;
        }
        while !fits(self.blocks.len(), self.bytes, self.footprint, &self.limits) && self.blocks.len() > keep {
            if let Some(victim) = self.blocks.pop() {
                self.forget(&victim);
                out.evicted += victim.data.len();
            }
        }
        true
    }

    /// Removes and returns the stored data that starts at `rcv_nxt`: the
    /// whole contiguous run, as one chain. Stored data before `rcv_nxt`
    /// (already delivered by an overlapping in-order segment) is dropped.
    pub fn take_contiguous(&mut self, rcv_nxt: TcpSeqNumber) -> Option<PacketBuf> {
        self.purge(rcv_nxt);
        if self.blocks.first()?.seq != rcv_nxt {
            return None;
        }
        let block = self.blocks.remove(0);
        self.forget(&block);
        if self.blocks.is_empty() {
            self.blocks = Vec::new();
        }
        Some(block.data)
    }

    /// SACK blocks to advertise, as `(left edge, right edge)` pairs, and how
    /// many of the four slots are used (at most `max`).
    ///
    /// RFC 2018 section 4: the first block is the one holding the segment
    /// that arrived last, and the others follow in the order they were last
    /// reported first, which is the order they last received data in.
    pub fn sack_blocks(&self, max: usize) -> ([(u32, u32); 4], usize) {
        let mut out = [(0u32, 0u32); 4];
        let max = max.min(out.len());
        let mut count = 0;
        // Ages are distinct unless the 2^32 clock wrapped; the index breaks
        // such ties so that no block is reported twice.
        let mut last: Option<(u32, usize)> = None;
        while count < max {
            let next = self
                .blocks
                .iter()
                .enumerate()
                .map(|(idx, blk)| (self.clock.wrapping_sub(blk.stamp), idx))
                .filter(|key| last.is_none_or(|l| *key > l))
                .min();
            let Some(key) = next else { break };
            if let (Some(blk), Some(slot)) = (self.blocks.get(key.1), out.get_mut(count)) {
                *slot = (blk.seq.0, (blk.seq + blk.data.len()).0);
            }
            last = Some(key);
            count += 1;
        }
        (out, count)
    }
}

impl fmt::Debug for Assembler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for blk in &self.blocks {
            list.entry(&(blk.seq.0, (blk.seq + blk.data.len()).0));
        }
        list.finish()?;
        write!(f, " {} bytes, footprint {}", self.bytes, self.footprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    const BIG: AssemblerLimits = AssemblerLimits { max_segments: 64, max_bytes: 1 << 24 };

    fn byte_at(i: u32) -> u8 {
        (i.wrapping_mul(131) ^ (i >> 9)) as u8
    }

    /// The stream's bytes `seq..seq + len`, the same whatever the segment.
    fn seg(pool: &BufferPool, seq: u32, len: usize) -> PacketBuf {
        let data: Vec<u8> = (0..len as u32).map(|k| byte_at(seq.wrapping_add(k))).collect();
        PacketBuf::from_slice(pool, 0, &data).unwrap()
    }

    fn s(n: u32) -> TcpSeqNumber {
        TcpSeqNumber(n)
    }

    fn check_invariants(asm: &Assembler, rcv_nxt: TcpSeqNumber) {
        let mut prev_end: Option<i64> = None;
        let (mut bytes, mut fp) = (0, 0);
        for blk in &asm.blocks {
            let start = Assembler::rel(blk.seq, rcv_nxt);
            assert!(!blk.data.is_empty());
            assert!(start >= 0, "nothing before rcv_nxt is kept");
            if let Some(end) = prev_end {
                assert!(start > end, "blocks are sorted with holes between them");
            }
            prev_end = Some(start + blk.data.len() as i64);
            let expect: Vec<u8> = (0..blk.data.len() as u32).map(|k| byte_at(blk.seq.0.wrapping_add(k))).collect();
            assert_eq!(blk.data.to_vec(), expect);
            bytes += blk.data.len();
            fp += blk.data.footprint();
        }
        assert_eq!(asm.bytes(), bytes);
        assert_eq!(asm.footprint(), fp);
        assert!(asm.segments() <= asm.limits.max_segments);
        assert!(asm.bytes() <= asm.limits.max_bytes);
        assert!(asm.footprint() <= asm.limits.max_bytes * FOOTPRINT_FACTOR);
    }

    #[test]
    fn empty_assembler_is_small_and_holds_no_allocation() {
        let asm = Assembler::new(BIG);
        assert_eq!(asm.blocks.capacity(), 0);
        assert!(core::mem::size_of::<Assembler>() <= 64);
        assert_eq!(asm.sack_blocks(4).1, 0);
    }

    #[test]
    fn fills_a_hole_and_delivers_in_order() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        let nxt = s(1000);
        let end = s(1000 + 65535);
        assert_eq!(asm.insert(s(1200), seg(&pool, 1200, 100), nxt, end).stored, 100);
        assert_eq!(asm.insert(s(1100), seg(&pool, 1100, 100), nxt, end).stored, 100);
        assert_eq!(asm.segments(), 1, "adjacent pieces join");
        assert!(asm.take_contiguous(nxt).is_none());
        let o = asm.insert(s(1000), seg(&pool, 1000, 150), nxt, end);
        assert_eq!((o.stored, o.duplicate), (100, 50));
        let got = asm.take_contiguous(nxt).unwrap();
        assert_eq!(got, seg(&pool, 1000, 300));
        assert!(asm.is_empty());
        assert_eq!(asm.blocks.capacity(), 0, "a drained assembler gives its memory back");
        drop(got);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn first_copy_wins_on_overlap() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        let nxt = s(0);
        asm.insert(s(10), seg(&pool, 10, 10), nxt, s(1000));
        let forged = PacketBuf::from_slice(&pool, 0, &[0xee; 30]).unwrap();
        let o = asm.insert(s(5), forged, nxt, s(1000));
        assert_eq!((o.stored, o.duplicate), (20, 10));
        let block = &asm.blocks[0];
        let bytes = block.data.to_vec();
        assert_eq!(&bytes[..5], &[0xee; 5]);
        assert_eq!(&bytes[5..15], &seg(&pool, 10, 10).to_vec()[..]);
        assert_eq!(&bytes[15..], &[0xee; 15]);
    }

    #[test]
    fn window_trims_both_ends() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        let o = asm.insert(s(90), seg(&pool, 90, 40), s(100), s(120));
        assert_eq!(
            o,
            InsertOutcome { stored: 20, duplicate: 10, outside_window: 10, dropped_for_limits: 0, evicted: 0 }
        );
        let o = asm.insert(s(200), seg(&pool, 200, 40), s(100), s(120));
        assert_eq!(o.outside_window, 40);
        let o = asm.insert(s(50), seg(&pool, 50, 40), s(100), s(120));
        assert_eq!(o.duplicate, 40);
        // A window end behind rcv_nxt is a zero window.
        let o = asm.insert(s(105), seg(&pool, 105, 5), s(100), s(90));
        assert_eq!(o.outside_window, 5);
        assert_eq!(asm.bytes(), 20);
        check_invariants(&asm, s(100));
    }

    #[test]
    fn hostile_sequence_numbers_do_not_panic() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        for seq in [0u32, 1, 0x7fff_ffff, 0x8000_0000, 0x8000_0001, u32::MAX, u32::MAX - 5] {
            for (nxt, end) in [(0u32, u32::MAX), (u32::MAX, 0), (0x8000_0000, 0x7fff_ffff), (5, 5)] {
                let _ = asm.insert(s(seq), seg(&pool, seq, 10), s(nxt), s(end));
                let _ = asm.take_contiguous(s(nxt));
                let _ = asm.sack_blocks(usize::MAX);
            }
        }
    }

    #[test]
    fn wraps_around_the_sequence_space() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        let nxt = s(u32::MAX - 99);
        let end = nxt + 10_000;
        asm.insert(s(50), seg(&pool, 50, 100), nxt, end);
        asm.insert(s(u32::MAX - 49), seg(&pool, u32::MAX - 49, 100), nxt, end);
        assert_eq!(asm.segments(), 1, "pieces either side of zero join");
        assert_eq!(asm.sack_blocks(4), ([(u32::MAX - 49, 150), (0, 0), (0, 0), (0, 0)], 1));
        asm.insert(nxt, seg(&pool, nxt.0, 50), nxt, end);
        let got = asm.take_contiguous(nxt).unwrap();
        assert_eq!(got.len(), 250);
        assert_eq!(got, seg(&pool, nxt.0, 250));
    }

    #[test]
    fn in_order_delivery_past_stored_data_purges_it() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        asm.insert(s(100), seg(&pool, 100, 100), s(0), s(1000));
        asm.insert(s(300), seg(&pool, 300, 100), s(0), s(1000));
        // The caller delivered 0..150 straight from a segment.
        let got = asm.take_contiguous(s(150)).unwrap();
        assert_eq!(got, seg(&pool, 150, 50));
        assert_eq!(asm.bytes(), 100);
        // Then 200..350: the rest of the block at 300 follows.
        assert_eq!(asm.take_contiguous(s(350)).unwrap(), seg(&pool, 350, 50));
        assert!(asm.is_empty());
        assert_eq!(asm.footprint(), 0);
    }

    /// RFC 2018 section 5, third case: eight 500-byte segments from 5000,
    /// the 2nd, 4th, 6th and 8th are lost.
    #[test]
    fn sack_order_follows_rfc2018_example() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        let mut nxt = s(5000);
        let end = s(5000 + 65535);
        let expect = |asm: &mut Assembler, nxt: &mut TcpSeqNumber, seq: u32, blocks: &[(u32, u32)]| {
            let o = asm.insert(s(seq), seg(&pool, seq, 500), *nxt, end);
            assert_eq!(o.stored, 500);
            if let Some(d) = asm.take_contiguous(*nxt) {
                *nxt += d.len();
            }
            let (got, n) = asm.sack_blocks(3);
            assert_eq!(&got[..n], blocks, "after segment {seq}");
        };
        expect(&mut asm, &mut nxt, 5000, &[]);
        assert_eq!(nxt, s(5500));
        expect(&mut asm, &mut nxt, 6000, &[(6000, 6500)]);
        expect(&mut asm, &mut nxt, 7000, &[(7000, 7500), (6000, 6500)]);
        expect(&mut asm, &mut nxt, 8000, &[(8000, 8500), (7000, 7500), (6000, 6500)]);
        // The 4th segment arrives late and joins two blocks.
        expect(&mut asm, &mut nxt, 6500, &[(6000, 7500), (8000, 8500)]);
        // The 2nd fills the first hole: ACK 7500, SACK 8000-8500.
        expect(&mut asm, &mut nxt, 5500, &[(8000, 8500)]);
        assert_eq!(nxt, s(7500));
    }

    #[test]
    fn sack_blocks_most_recent_first_and_capped() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        for k in 1..=5u32 {
            asm.insert(s(k * 100), seg(&pool, k * 100, 10), s(0), s(10_000));
        }
        // A duplicate of an old block makes it the first one reported.
        asm.insert(s(200), seg(&pool, 200, 10), s(0), s(10_000));
        let (b, n) = asm.sack_blocks(4);
        assert_eq!(&b[..n], &[(200, 210), (500, 510), (400, 410), (300, 310)]);
        assert_eq!(asm.sack_blocks(3).1, 3);
        assert_eq!(asm.sack_blocks(0).1, 0);
        assert_eq!(asm.sack_blocks(99).1, 4);
    }

    #[test]
    fn block_limit_evicts_furthest_or_drops_new() {
        let pool = BufferPool::new(2048, 64);
        let limits = AssemblerLimits { max_segments: 3, max_bytes: 1 << 20 };
        let mut asm = Assembler::new(limits);
        for k in [2u32, 4, 6] {
            assert_eq!(asm.insert(s(k * 100), seg(&pool, k * 100, 10), s(0), s(10_000)).stored, 10);
        }
        // Further than everything stored: dropped.
        let o = asm.insert(s(800), seg(&pool, 800, 10), s(0), s(10_000));
        assert_eq!((o.stored, o.dropped_for_limits, o.evicted), (0, 10, 0));
        // Closer to rcv_nxt: the furthest block makes room.
        let o = asm.insert(s(100), seg(&pool, 100, 10), s(0), s(10_000));
        assert_eq!((o.stored, o.dropped_for_limits, o.evicted), (10, 0, 10));
        assert_eq!(asm.sack_blocks(4).0[..3], [(100, 110), (400, 410), (200, 210)]);
        // Extending an existing block needs no new slot.
        assert_eq!(asm.insert(s(410), seg(&pool, 410, 10), s(0), s(10_000)).stored, 10);
        check_invariants(&asm, s(0));
    }

    #[test]
    fn memory_limit_counts_pinned_buffers() {
        let pool = BufferPool::new(1024, 256);
        let limits = AssemblerLimits { max_segments: 64, max_bytes: 8 * 1024 };
        let mut asm = Assembler::new(limits);
        // One-byte segments, each in its own buffer, contiguous: a single
        // block, but each byte pins a whole buffer.
        let mut stored = 0;
        for k in 0..64u32 {
            stored += asm.insert(s(10 + k), seg(&pool, 10 + k, 1), s(0), s(10_000)).stored;
        }
        assert_eq!(stored, 8 * FOOTPRINT_FACTOR);
        assert_eq!(asm.segments(), 1);
        assert_eq!(asm.footprint(), 8 * 1024 * FOOTPRINT_FACTOR);
        assert_eq!(pool.in_use(), 8 * FOOTPRINT_FACTOR);
        check_invariants(&asm, s(0));
        asm.clear();
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn byte_limit_bounds_stored_data() {
        let pool = BufferPool::new(2048, 256);
        let limits = AssemblerLimits { max_segments: 64, max_bytes: 3500 };
        let mut asm = Assembler::new(limits);
        let mut stored = 0;
        for k in 0..4u32 {
            let o = asm.insert(s(1000 + k * 2000), seg(&pool, 1000 + k * 2000, 1460), s(0), s(100_000));
            stored += o.stored;
            assert_eq!(o.stored + o.dropped_for_limits, 1460);
        }
        assert_eq!(stored, 2 * 1460, "a third segment would pass 3500 bytes");
        // The in-order segment joins the first block and evicts the
        // furthest one to fit.
        let o = asm.insert(s(0), seg(&pool, 0, 1000), s(0), s(100_000));
        assert_eq!((o.stored, o.evicted), (1000, 1460));
        check_invariants(&asm, s(0));
        assert_eq!(asm.take_contiguous(s(0)).unwrap(), seg(&pool, 0, 2460));
    }

    proptest! {
        #[test]
        fn delivers_the_stream_in_order(
            base in prop_oneof![Just(u32::MAX - 3000), Just(0x7fff_f000u32), any::<u32>()],
            segs in proptest::collection::vec((0u32..6000, 1usize..900), 1..80),
            direct in proptest::collection::vec(any::<bool>(), 80),
            max_segments in 1usize..10,
            max_kib in 2usize..64,
            buf_size in prop_oneof![Just(64usize), Just(512), Just(2048)],
        ) {
            let stream_len = 5000u32;
            let pool = BufferPool::new(buf_size, 100_000);
            let limits = AssemblerLimits { max_segments, max_bytes: max_kib * 1024 };
            let mut asm = Assembler::new(limits);
            let mut nxt = s(base);
            let window = 4000usize;
            let mut delivered: Vec<u8> = Vec::new();
            let deliver = |asm: &mut Assembler, nxt: &mut TcpSeqNumber, delivered: &mut Vec<u8>| {
                while let Some(d) = asm.take_contiguous(*nxt) {
                    assert!(!d.is_empty());
                    *nxt += d.len();
                    delivered.extend(d.to_vec());
                }
            };
            // The random segments, then the whole stream in order so that
            // everything must come out in the end.
            let tail = (0..stream_len).step_by(700).map(|o| (o, 700usize));
            for (n, (off, len)) in segs.into_iter().chain(tail).enumerate() {
                let len = len.min((stream_len - off.min(stream_len)) as usize);
                if len == 0 { continue; }
                let seq = s(base.wrapping_add(off));
                let data = seg(&pool, seq.0, len);
                let end = nxt + window;
                let rel = seq - nxt;
                if direct.get(n).copied().unwrap_or(false) && rel <= 0 && rel + len as i32 > 0 {
                    // The caller takes an in-order segment itself.
                    let mut d = data;
                    d.trim_front(rel.unsigned_abs() as usize);
                    d.truncate(window);
                    nxt += d.len();
                    delivered.extend(d.to_vec());
                } else {
                    let o = asm.insert(seq, data, nxt, end);
                    prop_assert_eq!(o.stored + o.duplicate + o.outside_window + o.dropped_for_limits, len);
                    prop_assert!(o.evicted == 0 || o.stored > 0);
                }
                deliver(&mut asm, &mut nxt, &mut delivered);
                check_invariants(&asm, nxt);
                let (blocks, count) = asm.sack_blocks(4);
                prop_assert_eq!(count, asm.segments().min(4));
                for &(l, r) in &blocks[..count] {
                    prop_assert!(s(l) > nxt && s(r) <= nxt + window && s(l) < s(r));
                }
            }
            let expect: Vec<u8> = (0..stream_len).map(|k| byte_at(base.wrapping_add(k))).collect();
            prop_assert_eq!(delivered, expect);
            prop_assert!(asm.is_empty());
            prop_assert_eq!(pool.in_use(), 0);
        }
    }

    #[test]
    fn outcome_accounts_for_every_byte() {
        let pool = BufferPool::new(2048, 64);
        let mut asm = Assembler::new(BIG);
        asm.insert(s(100), seg(&pool, 100, 50), s(0), s(1000));
        asm.insert(s(300), seg(&pool, 300, 50), s(0), s(1000));
        let o = asm.insert(s(50), seg(&pool, 50, 1000), s(0), s(1000));
        assert_eq!(o.stored + o.duplicate + o.outside_window, 1000);
        assert_eq!(
            o,
            InsertOutcome { stored: 850, duplicate: 100, outside_window: 50, dropped_for_limits: 0, evicted: 0 }
        );
        assert_eq!(asm.segments(), 1);
        assert_eq!(asm.blocks[0].data, seg(&pool, 50, 950));
    }
}
