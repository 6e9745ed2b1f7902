//! Fixed-size buffers inside a region, addressed by index, whose ownership
//! moves with descriptors.
//!
//! Each side keeps its own ownership table in private memory (never in the
//! region, where the peer could rewrite it): every buffer is `Free` (ours, in
//! our free list), `InUse` (ours, allocated) or `Peer` (handed over). A
//! buffer starts owned by the creator if its index is below
//! `creator_buffers`, by the attacher otherwise. Handing a buffer over is
//! [`Pool::give`] before pushing the descriptor that names it; receiving one
//! is [`Pool::take`] on a popped descriptor, which accepts it only if the
//! index is in range, the buffer is currently the peer's, and
//! `offset + len` lies inside the buffer. A rejected descriptor changes
//! nothing and is counted by reason. When the peer dies,
//! [`Pool::reclaim_peer`] takes every buffer it held back.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::descriptor::{Descriptor, NO_BUFFER};
use crate::mapping::Mapping;
use crate::shared::SharedBytes;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    InUse,
    Peer,
}

/// A buffer received from the peer: its index and the data's extent in it,
/// all validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufRef {
    /// Buffer index.
    pub index: u32,
    /// Offset of the data in the buffer.
    pub offset: u32,
    /// Length of the data.
    pub len: u32,
}

/// Why a buffer operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// No buffer with this index.
    OutOfRange(u32),
    /// The peer named a buffer it does not own.
    NotPeerOwned(u32),
    /// We tried to use or hand over a buffer we have not allocated.
    NotOwned(u32),
    /// `offset + len` runs past the end of the buffer.
    BadExtent {
        /// Buffer index.
        index: u32,
        /// Offset.
        offset: u32,
        /// Length.
        len: u32,
    },
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PoolError::OutOfRange(i) => write!(f, "pool: buffer {i} out of range"),
            PoolError::NotPeerOwned(i) => write!(f, "pool: peer handed over buffer {i}, which it does not own"),
            PoolError::NotOwned(i) => write!(f, "pool: buffer {i} is not allocated by us"),
            PoolError::BadExtent { index, offset, len } => {
                write!(f, "pool: extent {offset}+{len} outside buffer {index}")
            }
        }
    }
}

impl std::error::Error for PoolError {}

/// Counters of one side's pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed to the peer.
    pub given: u64,
    /// Buffers received from the peer.
    pub taken: u64,
    /// Descriptors naming a buffer index out of range.
    pub rejected_range: u64,
    /// Descriptors naming a buffer the peer did not own.
    pub rejected_owner: u64,
    /// Descriptors whose offset and length run outside the buffer.
    pub rejected_extent: u64,
    /// Buffers taken back from a dead peer.
    pub reclaimed: u64,
}

/// One side's view of the buffer area.
#[derive(Debug)]
pub struct Pool {
    /// Keeps the mapping alive as long as `base` is used.
    _map: Arc<Mapping>,
    base: *mut u8,
    count: u32,
    size: u32,
    state: Vec<State>,
    free: Vec<u32>,
    in_use: u32,
    peer: u32,
    stats: PoolStats,
}

// SAFETY: `base` points into the mapping the `Arc` keeps alive, which may be
// used from any thread; the pool accesses it only through raw copies.
unsafe impl Send for Pool {}

impl Pool {
    /// This side's view of `count` buffers of `size` bytes at `offset` in
    /// `map`, of which those in `ours` start owned by this side and the
    /// rest by the peer.
    pub(crate) fn new(map: Arc<Mapping>, offset: u64, count: u32, size: u32, ours: Range<u32>) -> Pool {
        let len = u64::from(count) * u64::from(size);
        let inside =
            usize::try_from(offset).ok().zip(usize::try_from(len).ok()).is_some_and(|(o, l)| map.contains(o, l));
        assert!(inside, "buffer area at {offset} of {count} x {size} bytes outside the mapping");
        let base = map.at(offset);
        let state: Vec<State> = (0..count).map(|i| if ours.contains(&i) { State::Free } else { State::Peer }).collect();
        // Reverse, so `alloc` hands out low indices first.
        let free: Vec<u32> = (0..count).rev().filter(|i| ours.contains(i)).collect();
        let peer = count - free.len() as u32;
        Pool { _map: map, base, count, size, state, free, in_use: 0, peer, stats: PoolStats::default() }
    }

    /// Number of buffers in the area.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True if the area has no buffers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size of one buffer.
    pub fn buffer_size(&self) -> u32 {
        self.size
    }

    /// Buffers free, allocated, and held by the peer.
    pub fn counts(&self) -> (u32, u32, u32) {
        (self.free.len() as u32, self.in_use, self.peer)
    }

    /// The counters.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Allocates one of our free buffers.
    pub fn alloc(&mut self) -> Option<u32> {
        let i = self.free.pop()?;
        self.state[i as usize] = State::InUse;
        self.in_use += 1;
        Some(i)
    }

    fn owned(&self, index: u32) -> Result<(), PoolError> {
        match self.state.get(index as usize) {
            None => Err(PoolError::OutOfRange(index)),
            Some(State::InUse) => Ok(()),
            Some(_) => Err(PoolError::NotOwned(index)),
        }
    }

    /// Whether buffer `index` is ours (allocated, not the peer's or free).
    pub fn holds(&self, index: u32) -> bool {
        self.owned(index).is_ok()
    }

    /// Returns an allocated buffer to our free list.
    pub fn release(&mut self, index: u32) -> Result<(), PoolError> {
        self.owned(index)?;
        self.state[index as usize] = State::Free;
        self.in_use -= 1;
        self.free.push(index);
        Ok(())
    }

    /// Hands an allocated buffer to the peer; call before pushing the
    /// descriptor that names it. From then on we must not touch it.
    pub fn give(&mut self, index: u32) -> Result<(), PoolError> {
        self.owned(index)?;
        self.state[index as usize] = State::Peer;
        self.in_use -= 1;
        self.peer += 1;
        self.stats.given += 1;
        Ok(())
    }

    /// Checks a descriptor's buffer fields against the ownership table
    /// without changing anything. `Ok(None)` if it names no buffer.
    pub fn validate(&self, d: &Descriptor) -> Result<Option<BufRef>, PoolError> {
        if d.buffer == NO_BUFFER {
            return Ok(None);
        }
        let index = d.buffer;
        match self.state.get(index as usize) {
            None => return Err(PoolError::OutOfRange(index)),
            Some(State::Peer) => {}
            Some(_) => return Err(PoolError::NotPeerOwned(index)),
        }
        if d.offset > self.size || d.len > self.size - d.offset {
            return Err(PoolError::BadExtent { index, offset: d.offset, len: d.len });
        }
        Ok(Some(BufRef { index, offset: d.offset, len: d.len }))
    }

    /// Receives the buffer a popped descriptor hands over: validated as in
    /// [`Pool::validate`], then ours (allocated). A rejection is counted.
    pub fn take(&mut self, d: &Descriptor) -> Result<Option<BufRef>, PoolError> {
        match self.validate(d) {
            Ok(Some(b)) => {
                self.state[b.index as usize] = State::InUse;
                self.peer -= 1;
                self.in_use += 1;
                self.stats.taken += 1;
                Ok(Some(b))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                match e {
                    PoolError::OutOfRange(_) => self.stats.rejected_range += 1,
                    PoolError::NotPeerOwned(_) => self.stats.rejected_owner += 1,
                    PoolError::BadExtent { .. } => self.stats.rejected_extent += 1,
                    PoolError::NotOwned(_) => {}
                }
                Err(e)
            }
        }
    }

    /// The peer is gone: every buffer it held becomes free again. Returns
    /// how many.
    pub fn reclaim_peer(&mut self) -> u32 {
        let mut n = 0;
        for (i, s) in self.state.iter_mut().enumerate() {
            if *s == State::Peer {
                *s = State::Free;
                self.free.push(i as u32);
                n += 1;
            }
        }
        self.peer = 0;
        self.stats.reclaimed += u64::from(n);
        n
    }

    fn extent(&self, index: u32, offset: u32, len: usize) -> Result<*mut u8, PoolError> {
        self.owned(index)?;
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        if offset > self.size || len32 > self.size - offset {
            return Err(PoolError::BadExtent { index, offset, len: len32 });
        }
        let at = index as usize * self.size as usize + offset as usize;
        // SAFETY: `index < count` (owned() found its state) and
        // `offset + len <= size`, so `at + len` is inside the buffer area,
        // which the layout placed inside the mapping.
        Ok(unsafe { self.base.add(at) })
    }

    /// Copies `data` into an allocated buffer at `offset`.
    pub fn write(&mut self, index: u32, offset: u32, data: &[u8]) -> Result<(), PoolError> {
        let p = self.extent(index, offset, data.len())?;
        // SAFETY: `p..p + data.len()` is inside the buffer (checked by
        // `extent`); `data` is private memory, so the two do not overlap.
        // A raw copy creates no reference to the shared bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// Copies bytes out of an allocated buffer at `offset` into `out`. The
    /// copy is private: a peer that writes the buffer meanwhile (which it
    /// must not) can change what is copied, never the copy afterwards.
    pub fn read(&self, index: u32, offset: u32, out: &mut [u8]) -> Result<(), PoolError> {
        let p = self.extent(index, offset, out.len())?;
        // SAFETY: as in `write`, the other way round.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// A view of `len` bytes at `offset` of a buffer we hold, for zero-copy
    /// hand-over (see [`SharedBytes`]). The view keeps the mapping alive, so
    /// it may outlive the pool.
    pub fn shared(&self, index: u32, offset: u32, len: u32) -> Result<SharedBytes, PoolError> {
        let p = self.extent(index, offset, len as usize)?;
        Ok(SharedBytes::new(self._map.clone(), p, len as usize))
    }

    /// The address of the buffer area (buffer `i` starts `i × size` bytes
    /// in): how a view handed to the engine is recognised again when it
    /// comes back as a slice of a frame.
    pub fn area_base(&self) -> usize {
        self.base as usize
    }

    /// The address of an allocated buffer, for zero-copy access. The bytes
    /// are shared with the peer: use raw copies or volatile accesses, never
    /// a Rust reference that assumes nobody else writes them.
    pub fn buffer_ptr(&self, index: u32) -> Result<*mut u8, PoolError> {
        self.extent(index, 0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::scratch;

    /// The two sides' pools over one area of 8 buffers of 256 bytes, split
    /// in halves (the creator's and the attacher's, as a region splits it).
    fn pools() -> (Pool, Pool) {
        let map = scratch(4096);
        (Pool::new(map.clone(), 1024, 8, 256, 0..4), Pool::new(map, 1024, 8, 256, 4..8))
    }

    fn desc(buffer: u32, offset: u32, len: u32) -> Descriptor {
        Descriptor { buffer, offset, len, ..Default::default() }
    }

    #[test]
    fn initial_split() {
        let (pc, pa) = pools();
        assert_eq!(pc.counts(), (4, 0, 4));
        assert_eq!(pa.counts(), (4, 0, 4));
    }

    #[test]
    fn a_buffer_travels_and_its_bytes_with_it() {
        let (mut pc, mut pa) = pools();
        let i = pa.alloc().unwrap();
        assert!(i >= 4);
        pa.write(i, 10, b"hello").unwrap();
        pa.give(i).unwrap();
        assert_eq!(pa.write(i, 0, b"x"), Err(PoolError::NotOwned(i)));
        let b = pc.take(&desc(i, 10, 5)).unwrap().unwrap();
        let mut out = [0u8; 5];
        pc.read(b.index, b.offset, &mut out).unwrap();
        assert_eq!(&out, b"hello");
        // Handing it back.
        pc.give(i).unwrap();
        assert_eq!(pa.take(&desc(i, 0, 256)).unwrap().unwrap().len, 256);
        pa.release(i).unwrap();
        assert_eq!(pa.counts(), (4, 0, 4));
    }

    #[test]
    fn hostile_descriptors_are_rejected_and_counted() {
        let (mut pc, _pa) = pools();
        let own = pc.alloc().unwrap();
        assert_eq!(pc.take(&desc(8, 0, 0)), Err(PoolError::OutOfRange(8)));
        assert_eq!(pc.take(&desc(u32::MAX - 1, 0, 0)), Err(PoolError::OutOfRange(u32::MAX - 1)));
        assert_eq!(pc.take(&desc(own, 0, 0)), Err(PoolError::NotPeerOwned(own)));
        assert_eq!(pc.take(&desc(1, 0, 0)), Err(PoolError::NotPeerOwned(1)));
        assert!(matches!(pc.take(&desc(5, 200, 57)), Err(PoolError::BadExtent { .. })));
        assert!(matches!(pc.take(&desc(5, u32::MAX, 2)), Err(PoolError::BadExtent { .. })));
        assert!(matches!(pc.take(&desc(5, 2, u32::MAX)), Err(PoolError::BadExtent { .. })));
        assert_eq!(pc.take(&desc(NO_BUFFER, 9, 9)), Ok(None));
        let s = pc.stats();
        assert_eq!((s.rejected_range, s.rejected_owner, s.rejected_extent, s.taken), (2, 2, 3, 0));
        // The same buffer cannot be handed over twice.
        assert!(pc.take(&desc(5, 200, 56)).is_ok());
        assert_eq!(pc.take(&desc(5, 0, 0)), Err(PoolError::NotPeerOwned(5)));
    }

    #[test]
    fn reclaim_returns_everything_the_peer_held() {
        let (mut pc, _pa) = pools();
        let i = pc.alloc().unwrap();
        pc.give(i).unwrap();
        assert_eq!(pc.reclaim_peer(), 5);
        assert_eq!(pc.counts(), (8, 0, 0));
    }

    #[test]
    fn local_accesses_are_bounded() {
        let (mut pc, _pa) = pools();
        let i = pc.alloc().unwrap();
        assert!(pc.write(i, 250, &[0; 6]).is_ok());
        assert!(pc.write(i, 250, &[0; 7]).is_err());
        assert!(pc.read(i, 257, &mut []).is_err());
        assert_eq!(pc.buffer_ptr(99), Err(PoolError::OutOfRange(99)));
    }
}
