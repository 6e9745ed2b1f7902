//! One `MAP_SHARED` mapping of a file: made and unmapped here, and read and
//! written through checked accessors.
//!
//! Everything built on shared memory sits on top of this module: the
//! descriptor rings, the buffer pool and [`crate::SharedBytes`] here, the
//! region that lays them out, and the VNI's segment in `nagare-dev`. A
//! mapping hands out three kinds of access, none of them a Rust reference
//! to plain data that another process may write:
//!
//! - atomics ([`Mapping::u32_at`], [`Mapping::u64_at`]), which are made for
//!   concurrent writers;
//! - raw copies into and out of private memory ([`Mapping::read_bytes`],
//!   [`Mapping::write_bytes`]), after which only the private copy is
//!   validated and used;
//! - raw pointers ([`Mapping::at`]) for the views above, which keep the
//!   mapping alive through an `Arc` for as long as they point into it.
//!
//! Offsets given to these accessors come from a layout the caller computed
//! or validated in private memory, never straight from shared memory; the
//! bounds and alignment checks here catch the caller's own mistakes (a
//! panic) or, for the byte copies, refuse a range outright.
//!
//! What the mapping cannot defend against by itself: a file that shrinks
//! under it turns accesses to the lost pages into `SIGBUS`. The region seals
//! its memfd against that; the VNI's `/dev/shm` file cannot be sealed and
//! says so in its documentation.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// A shared, readable and writable mapping of a whole file, unmapped on
/// drop. Rings, pools and byte views hold it through an `Arc`, so the memory
/// they point into outlives them.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory valid for its whole lifetime in any
// thread; all accesses through it are atomics or raw copies (never references
// to plain data), which is what the peer process forces on us anyway.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `fd`, shared, readable and writable.
    /// The caller checked that the file is at least `len` bytes long.
    pub fn map(fd: BorrowedFd<'_>, len: u64) -> io::Result<Mapping> {
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        if len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: a fresh shared mapping of `len` bytes of `fd` at an address
        // the kernel chooses; it aliases no Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping { ptr, len })
    }

    /// Bytes mapped.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: an empty mapping is refused.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `len` bytes at `off` lie inside the mapping.
    #[inline]
    pub fn contains(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The address `offset` bytes in (at most the end). Callers pass
    /// offsets from a layout they validated, and stay inside the mapping
    /// with whatever they derive from the pointer.
    #[inline]
    pub fn at(&self, offset: u64) -> *mut u8 {
        assert!(offset <= self.len as u64, "offset {offset} outside the mapping");
        // SAFETY: `offset` is within the mapping (asserted), so the result
        // stays inside the same allocation (or one past its end).
        unsafe { self.ptr.as_ptr().add(offset as usize) }
    }

    /// The 32-bit atomic word at `off`: an offset from the caller's own
    /// layout, never from shared memory, so a misaligned or out-of-range
    /// one is the caller's bug and panics.
    #[inline]
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && self.contains(off, 4), "offset {off} is no u32 of the mapping");
        // SAFETY: `off` is 4-aligned (and the mapping page-aligned) and the
        // four bytes lie inside the mapping, which lives as long as `self`.
        // `AtomicU32` has the size and alignment of `u32`, every bit pattern
        // is valid, and it may be modified concurrently by anyone, the peer
        // included.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// The 64-bit atomic word at `off` (see [`Mapping::u32_at`]).
    #[inline]
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && self.contains(off, 8), "offset {off} is no u64 of the mapping");
        // SAFETY: as for `u32_at`, with 8-byte alignment and size.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Copies `dst.len()` bytes at `off` into `dst`; `false` (nothing
    /// copied) if that range is not inside the mapping.
    #[inline]
    pub fn read_bytes(&self, off: usize, dst: &mut [u8]) -> bool {
        if !self.contains(off, dst.len()) {
            return false;
        }
        // SAFETY: the source range lies inside the mapping (checked above)
        // and cannot overlap `dst`, which is private memory. Another process
        // may change the bytes while we copy: no Rust reference to them
        // exists, they are read once, into `dst`, and the caller validates
        // the copy; at worst it holds a mix of old and new bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) };
        true
    }

    /// Copies `src` in at `off`; `false` (nothing copied) if that range is
    /// not inside the mapping.
    #[inline]
    pub fn write_bytes(&self, off: usize, src: &[u8]) -> bool {
        if !self.contains(off, src.len()) {
            return false;
        }
        // SAFETY: the destination range lies inside the mapping (checked
        // above), which is writable and shared; `src` is private memory, so
        // they do not overlap. The copy makes no reference to shared bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len()) };
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap and nothing else
        // unmaps them; every view into the mapping holds an `Arc` to this
        // value or borrows it, so none is left when it drops.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A fresh memfd of `len` bytes, mapped: memory laid out by the tests of the
/// modules below the region, without one.
#[cfg(test)]
pub(crate) fn scratch(len: u64) -> std::sync::Arc<Mapping> {
    use std::os::fd::AsFd;
    let fd = crate::sys::memfd_create(c"nagare-ipc-scratch").unwrap();
    crate::sys::ftruncate(fd.as_fd(), len).unwrap();
    std::sync::Arc::new(Mapping::map(fd.as_fd(), len).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_stay_inside() {
        let m = scratch(4096);
        assert_eq!(m.len(), 4096);
        assert!(m.contains(4092, 4) && !m.contains(4093, 4) && !m.contains(usize::MAX, 2));
        m.u32_at(4092).store(7, std::sync::atomic::Ordering::Relaxed);
        let mut b = [0u8; 4];
        assert!(m.read_bytes(4092, &mut b));
        assert_eq!(u32::from_le_bytes(b), 7);
        assert!(!m.read_bytes(4093, &mut b));
        assert!(!m.write_bytes(4095, &[1, 2]));
        assert!(m.write_bytes(4094, &[1, 2]));
        assert_eq!(m.at(4096) as usize - m.at(0) as usize, 4096);
    }

    #[test]
    #[should_panic(expected = "no u32")]
    fn a_misaligned_word_is_a_bug() {
        let m = scratch(4096);
        m.u32_at(2);
    }

    #[test]
    #[should_panic(expected = "no u64")]
    fn a_word_past_the_end_is_a_bug() {
        let m = scratch(4096);
        m.u64_at(4096);
    }
}
