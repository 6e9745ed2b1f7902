//! Packets as chains of `(buffer, offset, len)` slices.
//!
//! Splitting a packet (IP fragmentation, TCP segmentation) and joining pieces
//! (reassembly) move references, never payload bytes. Headers are written
//! into the headroom in front of the first slice when that buffer is not
//! shared, and into a fresh buffer put in front of the chain otherwise.

use super::offload::Offload;
use super::pool::{Buffer, BufferPool, PoolExhausted};
use core::fmt;
use nagare_wire::Checksum;
use smallvec::SmallVec;

/// One piece of a packet: `len` bytes of `buf` starting at `start`.
#[derive(Clone)]
struct Slice {
    buf: Buffer,
    start: u32,
    end: u32,
}

impl Slice {
    #[inline]
    fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        // start <= end <= capacity is kept by every constructor.
        &self.buf.as_slice()[self.start as usize..self.end as usize]
    }
}

/// Most packets are one frame or a handful of fragments: keep that many
/// slices inline so that splitting and joining do not allocate.
const INLINE_SLICES: usize = 4;

/// A packet: a sequence of byte slices over pool buffers.
#[derive(Clone, Default)]
pub struct PacketBuf {
    slices: SmallVec<[Slice; INLINE_SLICES]>,
    len: usize,
    offload: Offload,
}

impl PacketBuf {
    /// An empty packet.
    pub fn new() -> Self {
        PacketBuf::default()
    }

    /// A packet made of bytes `start..end` of `buf`, or `None` if the range
    /// does not lie inside the buffer.
    pub fn from_buffer(buf: Buffer, start: usize, end: usize) -> Option<Self> {
        if start > end || end > buf.capacity() || end > u32::MAX as usize {
            return None;
        }
        let mut packet = PacketBuf::new();
        packet.push_slice(Slice { buf, start: start as u32, end: end as u32 });
        Some(packet)
    }

    /// Copies `data` into buffers from `pool`, leaving `headroom` bytes free
    /// in front of the first one for headers. This is the one copy at an
    /// edge where bytes enter from outside the pool.
    pub fn from_slice(pool: &BufferPool, headroom: usize, data: &[u8]) -> Result<Self, PoolExhausted> {
        let mut packet = PacketBuf::new();
        let size = pool.buf_size();
        let first_room = size.saturating_sub(headroom);
        if first_room == 0 && !data.is_empty() {
            return Err(PoolExhausted);
        }
        let mut rest = data;
        let mut offset = headroom.min(size);
        loop {
            let take = rest.len().min(size - offset);
            let mut buf = pool.alloc()?;
            let bytes = buf.as_mut_slice().ok_or(PoolExhausted)?;
            bytes[offset..offset + take].copy_from_slice(&rest[..take]);
            packet.push_slice(Slice { buf, start: offset as u32, end: (offset + take) as u32 });
            rest = &rest[take..];
            offset = 0;
            if rest.is_empty() {
                return Ok(packet);
            }
        }
    }

    #[inline]
    fn push_slice(&mut self, slice: Slice) {
        if slice.len() == 0 {
            return;
        }
        self.len += slice.len();
        self.slices.push(slice);
    }

    /// Offload metadata: what a device did, or is asked to do, for this
    /// frame's checksum and segmentation.
    #[inline]
    pub fn offload(&self) -> Offload {
        self.offload
    }

    /// Sets the offload metadata.
    #[inline]
    pub fn set_offload(&mut self, offload: Offload) {
        self.offload = offload;
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the packet holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slices in the chain.
    #[inline]
    pub fn slice_count(&self) -> usize {
        self.slices.len()
    }

    /// Whether no other handle refers to any of this packet's buffers (it
    /// could hand them on whole).
    pub fn holds_buffers_alone(&self) -> bool {
        self.slices.iter().all(|s| s.buf.is_unique())
    }

    /// Bytes of buffer this packet keeps from returning to the pool (each
    /// buffer counted once per slice that refers to it).
    pub fn footprint(&self) -> usize {
        self.slices.iter().map(|s| s.buf.capacity()).sum()
    }

    /// The packet's bytes, slice by slice.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.slices.iter().map(Slice::bytes)
    }

    /// The first `n` bytes if the first slice holds them all.
    #[inline]
    pub fn contiguous_prefix(&self, n: usize) -> Option<&[u8]> {
        self.slices.first().and_then(|s| s.bytes().get(..n))
    }

    /// The whole packet as one slice if it is one slice.
    pub fn as_contiguous(&self) -> Option<&[u8]> {
        match self.slices.len() {
            0 => Some(&[]),
            1 => self.slices.first().map(Slice::bytes),
            _ => None,
        }
    }

    /// Copies bytes starting at `offset` into `out`; returns how many were
    /// copied (fewer than `out.len()` only at the end of the packet).
    pub fn copy_out(&self, mut offset: usize, out: &mut [u8]) -> usize {
        let mut written = 0;
        for chunk in self.chunks() {
            if written == out.len() {
                break;
            }
            if offset >= chunk.len() {
                offset -= chunk.len();
                continue;
            }
            let part = &chunk[offset..];
            let take = part.len().min(out.len() - written);
            out[written..written + take].copy_from_slice(&part[..take]);
            written += take;
            offset = 0;
        }
        written
    }

    /// The first `N` bytes copied into an array, for parsing a header that
    /// may straddle slices.
    pub fn header<const N: usize>(&self) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        (self.copy_out(0, &mut out) == N).then_some(out)
    }

    /// The packet's bytes gathered into one vector (for tests, tools and
    /// the rare consumer that needs contiguous memory).
    pub fn to_vec(&self) -> alloc::vec::Vec<u8> {
        let mut out = alloc::vec::Vec::with_capacity(self.len);
        for chunk in self.chunks() {
            out.extend_from_slice(chunk);
        }
        out
    }

    /// The Internet checksum accumulated over the whole packet.
    pub fn checksum(&self) -> Checksum {
        let mut sum = Checksum::new();
        for chunk in self.chunks() {
            sum.add_bytes(chunk);
        }
        sum
    }

    /// The checksum accumulated over `offset..offset + len`.
    pub fn checksum_range(&self, offset: usize, len: usize) -> Checksum {
        let mut sum = Checksum::new();
        let mut skip = offset;
        let mut left = len;
        for chunk in self.chunks() {
            if left == 0 {
                break;
            }
            if skip >= chunk.len() {
                skip -= chunk.len();
                continue;
            }
            let part = &chunk[skip..];
            let take = part.len().min(left);
            sum.add_bytes(&part[..take]);
            left -= take;
            skip = 0;
        }
        sum
    }

    /// Drops `n` bytes from the front (for example a header just parsed).
    pub fn trim_front(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        let mut drop_count = 0;
        for slice in self.slices.iter_mut() {
            if n == 0 {
                break;
            }
            let here = slice.len();
            if n >= here {
                n -= here;
                drop_count += 1;
            } else {
                slice.start += n as u32;
                n = 0;
            }
        }
        if drop_count > 0 {
            self.slices.drain(..drop_count);
        }
    }

    /// Keeps only the first `len` bytes (for example to drop Ethernet
    /// padding after an IP datagram).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let mut kept = 0;
        let mut keep_slices = 0;
        for slice in self.slices.iter_mut() {
            if kept == len {
                break;
            }
            let here = slice.len();
            keep_slices += 1;
            if kept + here > len {
                slice.end = slice.start + (len - kept) as u32;
                kept = len;
            } else {
                kept += here;
            }
        }
        self.slices.truncate(keep_slices);
        self.len = len;
    }

    /// A new packet that refers to bytes `offset..offset + len` of this one,
    /// sharing the buffers. `None` if the range is out of bounds.
    pub fn slice(&self, offset: usize, len: usize) -> Option<PacketBuf> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        let mut out = PacketBuf::new();
        let mut pos = 0usize;
        for slice in &self.slices {
            let here = slice.len();
            let (s_begin, s_end) = (pos, pos + here);
            pos = s_end;
            if s_end <= offset {
                continue;
            }
            if s_begin >= end {
                break;
            }
            let from = offset.max(s_begin) - s_begin;
            let to = end.min(s_end) - s_begin;
            out.push_slice(Slice {
                buf: slice.buf.clone(),
                start: slice.start + from as u32,
                end: slice.start + to as u32,
            });
        }
        Some(out)
    }

    /// Bytes `offset..` as packets of `size` bytes each, the last shorter
    /// if `size` does not divide them, sharing the buffers (a UDP
    /// super-frame's datagrams). One pass over the slices however many
    /// pieces, where a [`slice`](Self::slice) per piece walks from the
    /// front each time. Nothing if `size` is 0 or `offset` is not before
    /// the end.
    pub fn pieces(&self, offset: usize, size: usize) -> Pieces<'_> {
        let mut pieces = Pieces { slices: &self.slices, index: 0, at: 0, left: 0, size };
        if size == 0 || offset >= self.len {
            return pieces;
        }
        pieces.left = self.len - offset;
        let mut skip = offset;
        for (index, slice) in self.slices.iter().enumerate() {
            if skip < slice.len() {
                pieces.index = index;
                pieces.at = slice.start + skip as u32;
                break;
            }
            skip -= slice.len();
        }
        pieces
    }

    /// Splits the packet in two at `at`: `self` keeps `..at` and the rest
    /// is returned. `at` past the end leaves `self` whole and returns an
    /// empty packet.
    pub fn split_off(&mut self, at: usize) -> PacketBuf {
        if at >= self.len {
            return PacketBuf::new();
        }
        let mut pos = 0usize;
        let mut index = 0usize;
        while let Some(slice) = self.slices.get(index) {
            if pos + slice.len() > at {
                break;
            }
            pos += slice.len();
            index += 1;
        }
        let mut tail = PacketBuf::new();
        let inner = at - pos;
        if inner > 0 {
            // `at` falls inside this slice: both halves share its buffer.
            if let Some(slice) = self.slices.get_mut(index) {
                let cut = slice.start + inner as u32;
                tail.push_slice(Slice { buf: slice.buf.clone(), start: cut, end: slice.end });
                slice.end = cut;
            }
            index += 1;
        }
        for slice in self.slices.drain(index..) {
            tail.push_slice(slice);
        }
        self.len = at;
        tail
    }

    /// Appends `other` after this packet's bytes.
    pub fn append(&mut self, other: PacketBuf) {
        self.len += other.len;
        self.slices.extend(other.slices);
    }

    /// Makes room for an `n`-byte header in front of the packet and returns
    /// it for writing. Uses the headroom of the first buffer when no other
    /// packet shares it; otherwise puts a new buffer from `pool` in front.
    pub fn prepend(&mut self, pool: &BufferPool, n: usize) -> Result<&mut [u8], PoolExhausted> {
        let in_place = match self.slices.first() {
            Some(first) => first.start as usize >= n && first.buf.is_unique(),
            None => false,
        };
        if !in_place {
            let size = pool.buf_size();
            if n > size {
                return Err(PoolExhausted);
            }
            let buf = pool.alloc()?;
            // Put the header at the end of the new buffer so later headers
            // (IP, then Ethernet) find headroom in front of it.
            self.slices.insert(0, Slice { buf, start: size as u32, end: size as u32 });
        }
        self.len += n;
        let first = self.slices.first_mut().ok_or(PoolExhausted)?;
        first.start -= n as u32;
        let (start, end) = (first.start as usize, first.start as usize + n);
        let bytes = first.buf.as_mut_slice().ok_or(PoolExhausted)?;
        Ok(&mut bytes[start..end])
    }

    /// Bytes of the first slice for writing in place, if its buffer is not
    /// shared (for example to turn an echo request into a reply).
    pub fn first_chunk_mut(&mut self) -> Option<&mut [u8]> {
        let first = self.slices.first_mut()?;
        let (start, end) = (first.start as usize, first.end as usize);
        first.buf.as_mut_slice().map(|b| &mut b[start..end])
    }

    /// Headroom in front of the first slice that can be written in place.
    pub fn headroom(&self) -> usize {
        match self.slices.first() {
            Some(first) if first.buf.is_unique() => first.start as usize,
            _ => 0,
        }
    }
}

/// Growing a packet in place and cutting it at slice boundaries, for queues
/// that hold a stream (the TCP send queue).
impl PacketBuf {
    /// Bytes that can be written in place right after the packet's last
    /// byte: the rest of the last slice's buffer, or 0 when another handle
    /// refers to that buffer, since a packet sharing it could otherwise see
    /// bytes change under it.
    pub fn tail_room(&self) -> usize {
        match self.slices.last() {
            Some(last) if last.buf.is_unique() => {
                // Slice ends are u32: a buffer larger than that is not grown.
                let cap = last.buf.capacity().min(u32::MAX as usize);
                cap.saturating_sub(last.end as usize)
            }
            _ => 0,
        }
    }

    /// Copies as much of `data` as [`tail_room`](Self::tail_room) allows
    /// after the packet's last byte, in its last buffer; returns how many
    /// bytes were taken.
    pub fn extend_in_place(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.tail_room());
        if n == 0 {
            return 0;
        }
        let Some(last) = self.slices.last_mut() else {
            return 0;
        };
        let (from, to) = (last.end as usize, last.end as usize + n);
        let Some(dst) = last.buf.as_mut_slice().and_then(|b| b.get_mut(from..to)) else {
            return 0;
        };
        let Some(src) = data.get(..n) else {
            return 0;
        };
        dst.copy_from_slice(src);
        last.end = to as u32;
        self.len += n;
        n
    }

    /// Splits the packet into packets of at most `max_slices` slices each
    /// (at least one), in order, moving the references.
    pub fn into_pieces(self, max_slices: usize) -> impl Iterator<Item = PacketBuf> {
        let max_slices = max_slices.max(1);
        let mut slices = self.slices.into_iter();
        core::iter::from_fn(move || {
            let mut piece = PacketBuf::new();
            // Empty slices (a zero-length prepend leaves one) must not end
            // the iteration early, so count only the slices kept.
            while piece.slices.len() < max_slices {
                match slices.next() {
                    Some(slice) => piece.push_slice(slice),
                    None => break,
                }
            }
            (!piece.is_empty()).then_some(piece)
        })
    }
}

impl fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PacketBuf({} bytes in {} slices)", self.len, self.slices.len())
    }
}

impl PartialEq for PacketBuf {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.to_vec() == other.to_vec()
    }
}

/// The pieces of a packet, in order ([`PacketBuf::pieces`]).
pub struct Pieces<'a> {
    slices: &'a [Slice],
    /// The slice the next piece starts in, and where in its buffer.
    index: usize,
    at: u32,
    /// Bytes not yet handed out.
    left: usize,
    size: usize,
}

impl Iterator for Pieces<'_> {
    type Item = PacketBuf;

    fn next(&mut self) -> Option<PacketBuf> {
        let mut want = self.size.min(self.left);
        if want == 0 {
            return None;
        }
        self.left -= want;
        let mut piece = PacketBuf::new();
        while want > 0 {
            let slice = self.slices.get(self.index)?;
            let take = ((slice.end - self.at) as usize).min(want);
            piece.push_slice(Slice { buf: slice.buf.clone(), start: self.at, end: self.at + take as u32 });
            want -= take;
            self.at += take as u32;
            if self.at == slice.end {
                self.index += 1;
                self.at = self.slices.get(self.index).map_or(0, |s| s.start);
            }
        }
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn from_slice_spans_buffers_and_keeps_headroom() {
        let pool = BufferPool::new(100, 64);
        let data = pattern(450);
        let p = PacketBuf::from_slice(&pool, 40, &data).unwrap();
        assert_eq!(p.len(), 450);
        assert_eq!(p.to_vec(), data);
        assert_eq!(p.slice_count(), 5); // 60 + 100*3 + 90
        assert_eq!(p.headroom(), 40);
    }

    #[test]
    fn pieces_cut_a_chain_in_one_pass() {
        let pool = BufferPool::new(100, 64);
        let data = pattern(450);
        // Slices of 60, 100, 100, 100 and 90 bytes.
        let p = PacketBuf::from_slice(&pool, 40, &data).unwrap();
        for (offset, size) in [(0, 1), (0, 100), (8, 37), (59, 60), (60, 100), (8, 442), (8, 1000), (449, 3)] {
            let pieces: Vec<_> = p.pieces(offset, size).collect();
            let want: Vec<_> = data[offset..].chunks(size).collect();
            assert_eq!(pieces.len(), want.len(), "offset {offset}, size {size}");
            for (got, want) in pieces.iter().zip(want) {
                assert_eq!(got.len(), want.len());
                assert_eq!(got.to_vec(), want, "offset {offset}, size {size}");
                assert_eq!(got.offload(), Offload::NONE);
            }
        }
        assert_eq!(p.pieces(0, 0).count(), 0);
        assert_eq!(p.pieces(450, 10).count(), 0);
        assert_eq!(p.pieces(451, 10).count(), 0);
        assert_eq!(PacketBuf::new().pieces(0, 10).count(), 0);
    }

    #[test]
    fn split_and_join_share_buffers() {
        let pool = BufferPool::new(8192, 8);
        let data = pattern(5000);
        let mut p = PacketBuf::from_slice(&pool, 0, &data).unwrap();
        let in_use = pool.in_use();
        let mut parts = Vec::new();
        for _ in 0..3 {
            let rest = p.split_off(1500);
            parts.push(core::mem::replace(&mut p, rest));
        }
        parts.push(p);
        assert_eq!(pool.in_use(), in_use, "splitting allocates no buffer");
        assert_eq!(parts.iter().map(PacketBuf::len).collect::<Vec<_>>(), [1500, 1500, 1500, 500]);
        let mut joined = PacketBuf::new();
        for part in parts {
            joined.append(part);
        }
        assert_eq!(joined.to_vec(), data);
    }

    #[test]
    fn prepend_uses_headroom_only_when_unshared() {
        let pool = BufferPool::new(256, 8);
        let mut p = PacketBuf::from_slice(&pool, 64, b"payload").unwrap();
        p.prepend(&pool, 8).unwrap().copy_from_slice(b"HEADER01");
        assert_eq!(p.slice_count(), 1);
        assert_eq!(p.to_vec(), b"HEADER01payload");
        let shared = p.clone();
        p.prepend(&pool, 4).unwrap().copy_from_slice(b"ETH!");
        assert_eq!(p.slice_count(), 2, "a shared buffer is never written");
        assert_eq!(shared.to_vec(), b"HEADER01payload");
        assert_eq!(p.to_vec(), b"ETH!HEADER01payload");
    }

    #[test]
    fn slice_trim_truncate_and_copy_out() {
        let pool = BufferPool::new(64, 16);
        let data = pattern(300);
        let p = PacketBuf::from_slice(&pool, 10, &data).unwrap();
        let s = p.slice(50, 100).unwrap();
        assert_eq!(s.to_vec(), &data[50..150]);
        assert!(p.slice(250, 51).is_none());
        let mut t = p.clone();
        t.trim_front(70);
        t.truncate(200);
        assert_eq!(t.to_vec(), &data[70..270]);
        let mut out = [0u8; 10];
        assert_eq!(p.copy_out(295, &mut out), 5);
        assert_eq!(&out[..5], &data[295..]);
        assert_eq!(p.header::<4>().unwrap(), [data[0], data[1], data[2], data[3]]);
    }

    #[test]
    fn checksum_over_chain_equals_contiguous() {
        let pool = BufferPool::new(33, 64);
        let data = pattern(1001);
        let p = PacketBuf::from_slice(&pool, 3, &data).unwrap();
        assert!(p.slice_count() > 1);
        assert_eq!(p.checksum().finish(), nagare_wire::checksum(&data));
        let mut whole = Checksum::new();
        whole.add_bytes(&data[17..917]);
        assert_eq!(p.checksum_range(17, 900).finish(), whole.finish());
    }
}
