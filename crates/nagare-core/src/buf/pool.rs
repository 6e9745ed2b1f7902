//! A bounded pool of fixed-size buffers.
//!
//! Buffers are reference counted so that a packet can be split into pieces
//! that keep pointing at the same bytes. A buffer is writable only while a
//! single handle refers to it, which is what lets headers be written into
//! headroom in place without ever aliasing bytes another packet can see.
//! When the last handle goes away the storage returns to the pool's free list
//! instead of the allocator, so steady-state packet processing never calls
//! `malloc`, and the pool's capacity bounds the memory packets can hold.

use alloc::rc::{Rc, Weak};
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::fmt;

/// The pool has handed out all the buffers it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolExhausted;

impl fmt::Display for PoolExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("buffer pool exhausted")
    }
}

struct PoolShared {
    buf_size: usize,
    capacity: usize,
    /// Buffers ever allocated from the heap; never exceeds `capacity`.
    created: Cell<usize>,
    free: RefCell<Vec<Rc<Storage>>>,
    allocs: Cell<u64>,
    exhausted: Cell<u64>,
}

struct Storage {
    pool: Weak<PoolShared>,
    bytes: Bytes,
}

/// Where a buffer's bytes live.
enum Bytes {
    /// The heap, recycled through a pool.
    Heap(alloc::boxed::Box<[u8]>),
    /// Somewhere else, released when the last handle goes.
    External(alloc::boxed::Box<dyn ExternalBytes>),
}

/// Bytes a [`Buffer`] can refer to besides the heap: memory an inet server
/// shares with an application, say, whose buffer is handed to the engine
/// without a copy. Dropping the value is the release: the implementation
/// hands the bytes back to their owner there (the application gets its
/// buffer back once the engine no longer refers to it).
///
/// The engine reads and writes them only through these two calls, and
/// writes only while it holds the one handle (as with pool buffers).
pub trait ExternalBytes {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, for writing.
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl Bytes {
    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Heap(b) => b,
            Bytes::External(e) => e.bytes(),
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Bytes::Heap(b) => b,
            Bytes::External(e) => e.bytes_mut(),
        }
    }
}

/// A pool of `capacity` buffers of `buf_size` bytes each, created on demand.
#[derive(Clone)]
pub struct BufferPool {
    shared: Rc<PoolShared>,
}

/// Counters describing a pool's use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Size of every buffer in bytes.
    pub buf_size: usize,
    /// Most buffers the pool will ever hold.
    pub capacity: usize,
    /// Buffers currently held by packets.
    pub in_use: usize,
    /// Successful allocations since creation.
    pub allocs: u64,
    /// Allocations refused because every buffer was in use.
    pub exhausted: u64,
}

impl BufferPool {
    /// A pool of at most `capacity` buffers of `buf_size` bytes.
    pub fn new(buf_size: usize, capacity: usize) -> Self {
        BufferPool {
            shared: Rc::new(PoolShared {
                buf_size,
                capacity,
                created: Cell::new(0),
                free: RefCell::new(Vec::new()),
                allocs: Cell::new(0),
                exhausted: Cell::new(0),
            }),
        }
    }

    /// Size of each buffer in bytes.
    pub fn buf_size(&self) -> usize {
        self.shared.buf_size
    }

    /// Takes a buffer from the pool. Its contents are whatever the previous
    /// user left there: callers write before they read.
    pub fn alloc(&self) -> Result<Buffer, PoolExhausted> {
        let shared = &self.shared;
        let recycled = shared.free.borrow_mut().pop();
        let storage = match recycled {
            Some(storage) => storage,
            None if shared.created.get() < shared.capacity => {
                shared.created.set(shared.created.get() + 1);
                Rc::new(Storage {
                    pool: Rc::downgrade(shared),
                    bytes: Bytes::Heap(vec![0u8; shared.buf_size].into_boxed_slice()),
                })
            }
            None => {
                shared.exhausted.set(shared.exhausted.get() + 1);
                return Err(PoolExhausted);
            }
        };
        shared.allocs.set(shared.allocs.get() + 1);
        Ok(Buffer { storage })
    }

    /// Counters of this pool.
    pub fn stats(&self) -> PoolStats {
        let shared = &self.shared;
        PoolStats {
            buf_size: shared.buf_size,
            capacity: shared.capacity,
            in_use: shared.created.get() - shared.free.borrow().len(),
            allocs: shared.allocs.get(),
            exhausted: shared.exhausted.get(),
        }
    }

    /// Buffers currently held by packets.
    pub fn in_use(&self) -> usize {
        self.stats().in_use
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.stats().fmt(f)
    }
}

/// A counted reference to one pool buffer.
pub struct Buffer {
    storage: Rc<Storage>,
}

impl Buffer {
    /// A buffer over `bytes` from outside any pool; the last handle's drop
    /// drops `bytes`, which releases them to their owner.
    pub fn external(bytes: alloc::boxed::Box<dyn ExternalBytes>) -> Buffer {
        Buffer { storage: Rc::new(Storage { pool: Weak::new(), bytes: Bytes::External(bytes) }) }
    }

    /// Size of the buffer in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.storage.bytes.as_slice().len()
    }

    /// The buffer's bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.storage.bytes.as_slice()
    }

    /// The buffer's bytes for writing, if this is the only handle to it.
    #[inline]
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        Rc::get_mut(&mut self.storage).map(|s| s.bytes.as_mut_slice())
    }

    /// Whether no other handle refers to this buffer.
    #[inline]
    pub fn is_unique(&self) -> bool {
        Rc::strong_count(&self.storage) == 1
    }

    /// Whether two handles refer to the same buffer.
    #[inline]
    pub fn same_buffer(&self, other: &Buffer) -> bool {
        Rc::ptr_eq(&self.storage, &other.storage)
    }

    /// Whether this buffer came from `pool` (and returns to it).
    #[inline]
    pub fn belongs_to(&self, pool: &BufferPool) -> bool {
        core::ptr::eq(self.storage.pool.as_ptr(), Rc::as_ptr(&pool.shared))
    }
}

impl Clone for Buffer {
    #[inline]
    fn clone(&self) -> Self {
        Buffer { storage: Rc::clone(&self.storage) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if Rc::strong_count(&self.storage) != 1 {
            return;
        }
        if let Some(pool) = self.storage.pool.upgrade() {
            // The free list takes its own reference; ours is released right
            // after, leaving the list as the only owner.
            pool.free.borrow_mut().push(Rc::clone(&self.storage));
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({} bytes)", self.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_to_the_pool_and_capacity_bounds_allocation() {
        let pool = BufferPool::new(64, 2);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        assert_eq!(pool.alloc().unwrap_err(), PoolExhausted);
        assert_eq!(pool.in_use(), 2);
        let a2 = a.clone();
        drop(a);
        assert_eq!(pool.in_use(), 2, "a clone still holds the buffer");
        drop(a2);
        drop(b);
        assert_eq!(pool.in_use(), 0);
        assert!(pool.alloc().is_ok());
        assert_eq!(pool.stats().exhausted, 1);
    }

    #[test]
    fn only_a_unique_handle_may_write() {
        let pool = BufferPool::new(16, 4);
        let mut a = pool.alloc().unwrap();
        assert!(a.as_mut_slice().is_some());
        let b = a.clone();
        assert!(a.as_mut_slice().is_none());
        drop(b);
        a.as_mut_slice().unwrap()[0] = 7;
        assert_eq!(a.as_slice()[0], 7);
    }

    /// External bytes that count their releases.
    struct Lent {
        bytes: Vec<u8>,
        released: Rc<Cell<u32>>,
    }

    impl ExternalBytes for Lent {
        fn bytes(&self) -> &[u8] {
            &self.bytes
        }
        fn bytes_mut(&mut self) -> &mut [u8] {
            &mut self.bytes
        }
    }

    impl Drop for Lent {
        fn drop(&mut self) {
            self.released.set(self.released.get() + 1);
        }
    }

    #[test]
    fn external_bytes_are_used_in_place_and_released_by_the_last_handle() {
        use crate::buf::PacketBuf;
        let released = Rc::new(Cell::new(0));
        let lent = Lent { bytes: vec![1, 2, 3, 4, 5, 6, 7, 8], released: released.clone() };
        let mut buf = Buffer::external(alloc::boxed::Box::new(lent));
        assert_eq!(buf.capacity(), 8);
        buf.as_mut_slice().unwrap()[0] = 9;
        let packet = PacketBuf::from_buffer(buf, 0, 8).unwrap();
        assert_eq!(packet.to_vec(), vec![9, 2, 3, 4, 5, 6, 7, 8], "the bytes are used where they are");
        let tail = packet.slice(4, 4).unwrap();
        let pool = BufferPool::new(16, 1);
        assert!(!tail.chunks().any(|c| c.is_empty()));
        drop(packet);
        assert_eq!(released.get(), 0, "a slice still refers to the bytes");
        assert_eq!(tail.to_vec(), vec![5, 6, 7, 8]);
        drop(tail);
        assert_eq!(released.get(), 1, "released once, by the last handle");
        assert_eq!(pool.in_use(), 0, "no pool is involved");
    }

    #[test]
    fn buffers_outliving_their_pool_are_freed() {
        let pool = BufferPool::new(16, 4);
        let a = pool.alloc().unwrap();
        drop(pool);
        assert_eq!(a.capacity(), 16);
        drop(a);
    }
}
