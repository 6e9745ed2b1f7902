//! The send queue: bytes the application wrote that the peer has not yet
//! acknowledged.
//!
//! Data stays in pool buffers from the moment it is written until it is
//! acknowledged; segments and retransmissions are views into it built by
//! moving references. The queue is a ring of chunks, each a short chain
//! tagged with its position in the stream, so that finding the bytes of a
//! retransmission deep in a large window is a binary search rather than a
//! walk from the front, and dropping acknowledged bytes touches only the
//! chunks that go.

use crate::buf::{BufferPool, PacketBuf, PoolExhausted};
use alloc::collections::VecDeque;
use core::fmt;

/// Slices per chunk. Matches what a `PacketBuf` keeps inline, so a chunk
/// never allocates on its own, and bounds the walk inside a chunk.
const CHUNK_SLICES: usize = 4;

/// Above this many chunks of spare capacity a queue that has drained gives
/// memory back, so that one burst does not pin a large ring for the rest
/// of an idle connection's life.
const SHRINK_ABOVE: usize = 64;

struct Chunk {
    /// Stream position of the chunk's first byte. Only differences between
    /// positions are ever used, so it may wrap.
    start: u64,
    data: PacketBuf,
}

impl Chunk {
    #[inline]
    fn end(&self) -> u64 {
        self.start.wrapping_add(self.data.len() as u64)
    }
}

/// Bytes written by the application and not yet acknowledged.
pub struct SendQueue {
    /// Contiguous in stream order; the front chunk's `start` is the first
    /// unacknowledged byte. An empty ring holds no allocation.
    chunks: VecDeque<Chunk>,
    limit: usize,
}

impl SendQueue {
    /// An empty queue that accepts up to `limit` bytes.
    pub fn new(limit: usize) -> Self {
        SendQueue { chunks: VecDeque::new(), limit }
    }

    /// Stream position of the first unacknowledged byte.
    #[inline]
    fn base(&self) -> u64 {
        self.chunks.front().map_or(0, |c| c.start)
    }

    /// Bytes queued.
    #[inline]
    pub fn len(&self) -> usize {
        match (self.chunks.front(), self.chunks.back()) {
            (Some(front), Some(back)) => back.end().wrapping_sub(front.start) as usize,
            _ => 0,
        }
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Most bytes the queue accepts.
    #[inline]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Changes the limit. Bytes already queued beyond a lowered limit stay:
    /// they may be in flight, and the queue only refuses new ones.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Bytes the queue still accepts.
    #[inline]
    pub fn free(&self) -> usize {
        self.limit.saturating_sub(self.len())
    }

    /// Appends as much of `data` as fits, without copying; returns the part
    /// that did not fit (empty when all of it did).
    pub fn push(&mut self, mut data: PacketBuf) -> PacketBuf {
        let rest = data.split_off(self.free());
        self.append(data);
        rest
    }

    /// Copies up to [`free`](Self::free) bytes of `data` into the queue.
    ///
    /// Bytes go first into the room left in the last buffer when no segment
    /// or other packet still refers to it, so a stream of small writes packs
    /// into few buffers instead of pinning one each. The rest goes into new
    /// buffers from `pool`, each with `headroom` bytes left free in front.
    /// Returns the bytes taken, which is fewer than asked when the queue is
    /// full or the pool runs dry; `Err` only if the pool is exhausted before
    /// any byte was taken.
    pub fn push_bytes(&mut self, pool: &BufferPool, headroom: usize, data: &[u8]) -> Result<usize, PoolExhausted> {
        let want = data.len().min(self.free());
        let mut rest = data.get(..want).unwrap_or_default();
        let mut taken = 0;
        if let Some(last) = self.chunks.back_mut() {
            let n = last.data.extend_in_place(rest);
            taken += n;
            rest = rest.get(n..).unwrap_or_default();
        }
        let room = pool.buf_size().saturating_sub(headroom);
        while !rest.is_empty() {
            let n = rest.len().min(room);
            let piece = match rest.get(..n) {
                Some(bytes) if n > 0 => PacketBuf::from_slice(pool, headroom, bytes),
                _ => Err(PoolExhausted),
            };
            match piece {
                Ok(piece) => {
                    self.append(piece);
                    taken += n;
                    rest = rest.get(n..).unwrap_or_default();
                }
                Err(e) if taken == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(taken)
    }

    /// Adds `data` at the end, regardless of the limit.
    fn append(&mut self, data: PacketBuf) {
        if data.is_empty() {
            return;
        }
        let mut start = match self.chunks.back_mut() {
            Some(last) if last.data.slice_count() + data.slice_count() <= CHUNK_SLICES => {
                last.data.append(data);
                return;
            }
            Some(last) => last.end(),
            None => 0,
        };
        for piece in data.into_pieces(CHUNK_SLICES) {
            let len = piece.len() as u64;
            self.chunks.push_back(Chunk { start, data: piece });
            start = start.wrapping_add(len);
        }
    }

    /// A view of bytes `offset..offset + len` counted from the first
    /// unacknowledged byte, sharing the queue's buffers; `None` if the range
    /// is not all queued.
    ///
    /// Finding the first chunk is a binary search, so the cost depends on
    /// how many chunks the range covers, not on how deep it lies.
    pub fn slice(&self, offset: usize, len: usize) -> Option<PacketBuf> {
        let end = offset.checked_add(len)?;
        if end > self.len() {
            return None;
        }
        let mut out = PacketBuf::new();
        if len == 0 {
            return Some(out);
        }
        let base = self.base();
        let rel = |pos: u64| pos.wrapping_sub(base) as usize;
        let first = self.chunks.partition_point(|c| rel(c.end()) <= offset);
        for chunk in self.chunks.range(first..) {
            let (c_start, c_end) = (rel(chunk.start), rel(chunk.end()));
            let from = offset.saturating_sub(c_start);
            let to = end.min(c_end).saturating_sub(c_start);
            out.append(chunk.data.slice(from, to.saturating_sub(from))?);
            if c_end >= end {
                break;
            }
        }
        Some(out)
    }

    /// Drops `n` acknowledged bytes from the front (all of them if `n` is
    /// larger than the queue), releasing buffers nothing else refers to.
    pub fn consume(&mut self, n: usize) {
        let mut n = n.min(self.len());
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let here = front.data.len();
            if n >= here {
                self.chunks.pop_front();
                n -= here;
            } else {
                front.data.trim_front(n);
                front.start = front.start.wrapping_add(n as u64);
                n = 0;
            }
        }
        if self.chunks.is_empty() {
            // An idle connection should not keep the ring of its last burst.
            self.chunks = VecDeque::new();
        } else if self.chunks.capacity() > SHRINK_ABOVE && self.chunks.len() < self.chunks.capacity() / 4 {
            self.chunks.shrink_to(self.chunks.len() * 2);
        }
    }
}

impl fmt::Debug for SendQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendQueue")
            .field("len", &self.len())
            .field("limit", &self.limit)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn pattern(start: usize, n: usize) -> Vec<u8> {
        (start..start + n).map(|i| (i * 31 + i / 253) as u8).collect()
    }

    #[test]
    fn empty_queue_holds_no_allocation_and_is_small() {
        let q = SendQueue::new(1 << 20);
        assert_eq!(q.chunks.capacity(), 0);
        assert!(core::mem::size_of::<SendQueue>() <= 48);
        assert!(q.is_empty());
        assert_eq!(q.free(), 1 << 20);
        assert_eq!(q.slice(0, 0), Some(PacketBuf::new()));
        assert!(q.slice(0, 1).is_none());
    }

    #[test]
    fn push_respects_limit_and_returns_rest() {
        let pool = BufferPool::new(256, 64);
        let mut q = SendQueue::new(1000);
        let data = pattern(0, 1500);
        let p = PacketBuf::from_slice(&pool, 0, &data).unwrap();
        let rest = q.push(p);
        assert_eq!(q.len(), 1000);
        assert_eq!(q.free(), 0);
        assert_eq!(rest.to_vec(), &data[1000..]);
        assert_eq!(q.slice(0, 1000).unwrap().to_vec(), &data[..1000]);
        let again = q.push(rest);
        assert_eq!(again.len(), 500, "a full queue takes nothing");
        assert_eq!(q.push_bytes(&pool, 0, b"xyz"), Ok(0));
        q.consume(300);
        assert_eq!(q.free(), 300);
        assert_eq!(q.push_bytes(&pool, 0, &data[1000..]), Ok(300));
        assert_eq!(q.slice(0, 1000).unwrap().to_vec(), &data[300..1300]);
        q.set_limit(10);
        assert_eq!(q.free(), 0);
        assert_eq!(q.len(), 1000, "lowering the limit keeps what is queued");
    }

    #[test]
    fn small_writes_coalesce_into_few_buffers() {
        let pool = BufferPool::new(512, 1024);
        let mut q = SendQueue::new(1 << 20);
        let data = pattern(0, 10_000);
        for b in &data {
            assert_eq!(q.push_bytes(&pool, 40, core::slice::from_ref(b)), Ok(1));
        }
        assert_eq!(q.len(), 10_000);
        // Every buffer keeps its headroom and is otherwise packed full.
        let per_buf = 512 - 40;
        assert_eq!(pool.in_use(), 10_000_usize.div_ceil(per_buf));
        assert_eq!(q.slice(0, 10_000).unwrap().to_vec(), data);
        q.consume(usize::MAX);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn shared_tail_is_never_written() {
        let pool = BufferPool::new(256, 16);
        let mut q = SendQueue::new(4096);
        q.push_bytes(&pool, 0, b"hello").unwrap();
        let mut segment = q.slice(0, 5).unwrap();
        assert_eq!(segment.tail_room(), 0, "a view shares the buffer");
        assert!(segment.first_chunk_mut().is_none(), "a view is never writable");
        assert_eq!(segment.headroom(), 0);
        assert_eq!(pool.in_use(), 1);
        q.push_bytes(&pool, 0, b" world").unwrap();
        assert_eq!(pool.in_use(), 2, "bytes after a shared slice go to a new buffer");
        assert_eq!(segment.to_vec(), b"hello");
        assert_eq!(q.slice(0, 11).unwrap().to_vec(), b"hello world");
        drop(segment);
        // Once the segment is gone the last buffer is the queue's alone again.
        q.push_bytes(&pool, 0, b"!").unwrap();
        assert_eq!(pool.in_use(), 2);
        assert_eq!(q.slice(0, 12).unwrap().to_vec(), b"hello world!");
    }

    #[test]
    fn zero_copy_push_of_a_shared_packet_is_not_written_through() {
        let pool = BufferPool::new(256, 16);
        let mut q = SendQueue::new(4096);
        let app = PacketBuf::from_slice(&pool, 0, b"abc").unwrap();
        let kept = app.clone();
        assert!(q.push(app).is_empty());
        q.push_bytes(&pool, 0, b"def").unwrap();
        assert_eq!(kept.to_vec(), b"abc");
        assert_eq!(pool.in_use(), 2);
        assert_eq!(q.slice(0, 6).unwrap().to_vec(), b"abcdef");
    }

    #[test]
    fn pool_exhaustion_takes_what_fits() {
        let pool = BufferPool::new(100, 2);
        let mut q = SendQueue::new(10_000);
        let data = pattern(0, 500);
        assert_eq!(q.push_bytes(&pool, 0, &data), Ok(200));
        assert_eq!(q.push_bytes(&pool, 0, &data[200..]), Err(PoolExhausted));
        assert_eq!(q.len(), 200);
        let mut q2 = SendQueue::new(10_000);
        assert_eq!(q2.push_bytes(&pool, 100, b"x"), Err(PoolExhausted), "no room after headroom");
        q.consume(200);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn slice_deep_in_a_large_queue_and_consume_frees_buffers() {
        let pool = BufferPool::new(1460, 4096);
        let mut q = SendQueue::new(8 << 20);
        let data = pattern(7, 4 << 20);
        for seg in data.chunks(1460) {
            let p = PacketBuf::from_slice(&pool, 0, seg).unwrap();
            assert!(q.push(p).is_empty());
        }
        // Pushed packets are grouped, never one chunk per tiny piece.
        assert!(q.chunks.len() <= data.len().div_ceil(1460).div_ceil(CHUNK_SLICES) + 1);
        let off = 3_999_000;
        assert_eq!(q.slice(off, 1460).unwrap().to_vec(), &data[off..off + 1460]);
        assert!(q.slice(data.len() - 10, 11).is_none());
        assert!(q.slice(usize::MAX, 2).is_none());
        q.consume(off);
        assert_eq!(q.slice(0, 1460).unwrap().to_vec(), &data[off..off + 1460]);
        q.consume(usize::MAX);
        assert!(q.is_empty());
        assert_eq!(pool.in_use(), 0);
        assert_eq!(q.chunks.capacity(), 0);
    }

    #[test]
    fn a_pushed_chain_of_many_slices_is_split_into_chunks() {
        let pool = BufferPool::new(10, 256);
        let data = pattern(3, 1000);
        let p = PacketBuf::from_slice(&pool, 0, &data).unwrap();
        assert_eq!(p.slice_count(), 100);
        let mut q = SendQueue::new(2000);
        assert!(q.push(p).is_empty());
        assert_eq!(q.chunks.len(), 25);
        for off in [0, 5, 39, 40, 41, 555, 990] {
            let n = 10.min(1000 - off);
            assert_eq!(q.slice(off, n).unwrap().to_vec(), &data[off..off + n]);
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(usize),
        PushBytes(usize),
        Slice(usize, usize),
        Consume(usize),
        Hold(usize, usize),
        Release,
        Limit(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1usize..700).prop_map(Op::Push),
            (1usize..300).prop_map(Op::PushBytes),
            (0usize..3000, 0usize..800).prop_map(|(o, l)| Op::Slice(o, l)),
            (0usize..900).prop_map(Op::Consume),
            (0usize..3000, 0usize..400).prop_map(|(o, l)| Op::Hold(o, l)),
            Just(Op::Release),
            (0usize..4000).prop_map(Op::Limit),
        ]
    }

    proptest! {
        #[test]
        fn behaves_like_a_byte_vector(ops in proptest::collection::vec(op(), 1..120), buf_size in 16usize..200) {
            let pool = BufferPool::new(buf_size, 100_000);
            let mut q = SendQueue::new(2500);
            let mut model: Vec<u8> = Vec::new();
            let mut limit = 2500usize;
            let mut written = 0usize;
            let mut held: Vec<(PacketBuf, Vec<u8>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Push(n) => {
                        let data = pattern(written, n);
                        let p = PacketBuf::from_slice(&pool, 3, &data).unwrap();
                        let rest = q.push(p);
                        let took = n - rest.len();
                        prop_assert_eq!(took, n.min(limit.saturating_sub(model.len())));
                        prop_assert_eq!(rest.to_vec(), &data[took..]);
                        model.extend_from_slice(&data[..took]);
                        written += took;
                    }
                    Op::PushBytes(n) => {
                        let data = pattern(written, n);
                        let took = q.push_bytes(&pool, 5, &data).unwrap();
                        prop_assert_eq!(took, n.min(limit.saturating_sub(model.len())));
                        model.extend_from_slice(&data[..took]);
                        written += took;
                    }
                    Op::Slice(o, l) => {
                        let got = q.slice(o, l);
                        if o + l <= model.len() {
                            let got = got.unwrap();
                            prop_assert_eq!(got.len(), l);
                            prop_assert_eq!(got.to_vec(), &model[o..o + l]);
                        } else {
                            prop_assert!(got.is_none());
                        }
                    }
                    Op::Hold(o, l) => {
                        if let Some(p) = q.slice(o, l) {
                            prop_assert_eq!(p.tail_room(), 0);
                            held.push((p, model[o..o + l].to_vec()));
                        }
                    }
                    Op::Release => held.clear(),
                    Op::Consume(n) => {
                        q.consume(n);
                        model.drain(..n.min(model.len()));
                    }
                    Op::Limit(l) => {
                        q.set_limit(l);
                        limit = l;
                    }
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.is_empty(), model.is_empty());
                prop_assert_eq!(q.free(), limit.saturating_sub(model.len()));
                // Held views must never see later writes.
                for (p, bytes) in &held {
                    prop_assert_eq!(&p.to_vec(), bytes);
                }
                // Chunks are contiguous in stream order.
                let mut pos = q.base();
                for c in &q.chunks {
                    prop_assert_eq!(c.start, pos);
                    prop_assert!(!c.data.is_empty());
                    prop_assert!(c.data.slice_count() <= CHUNK_SLICES);
                    pos = c.end();
                }
            }
            prop_assert_eq!(q.slice(0, model.len()).unwrap().to_vec(), model);
            held.clear();
            q.consume(usize::MAX);
            prop_assert_eq!(pool.in_use(), 0);
        }
    }
}
