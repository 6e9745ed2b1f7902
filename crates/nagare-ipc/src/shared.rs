//! A view of bytes in a region, for zero-copy hand-over of payload.
//!
//! The rest of the crate never makes a Rust reference to shared plain data:
//! it copies in and out with raw copies. Zero copy needs one exception: the
//! engine sums and transmits an application's payload in place, and the
//! device takes it as a slice. [`SharedBytes`] is that exception, kept in
//! one place. Its slice accessors are `unsafe` because the peer can write
//! the bytes while we read them; a caller may use them only for bytes it
//! never interprets (payload that is summed, copied or written to a device),
//! so that a racing peer can change at most its own outgoing data.

use crate::mapping::Mapping;
use std::fmt;
use std::sync::Arc;

/// `len` bytes inside a mapped region, kept mapped while the view lives.
pub struct SharedBytes {
    _map: Arc<Mapping>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is into a mapping the `Arc` keeps alive, usable from
// any thread; the view itself has no thread affinity.
unsafe impl Send for SharedBytes {}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBytes").field("len", &self.len).finish()
    }
}

impl SharedBytes {
    /// A view of `len` bytes at `ptr`, which must lie inside `map`.
    pub(crate) fn new(map: Arc<Mapping>, ptr: *mut u8, len: usize) -> SharedBytes {
        SharedBytes { _map: map, ptr, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes as a slice.
    ///
    /// # Safety
    /// The peer may write these bytes concurrently. The caller must treat
    /// them as opaque payload (sum them, copy them, hand them to a device)
    /// and must not rely on two reads agreeing.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is inside the mapping the `Arc` keeps
        // alive (checked where the view was made); the caller accepts that
        // the contents may change under the reference.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes as a mutable slice.
    ///
    /// # Safety
    /// As [`SharedBytes::as_slice`]; besides, the caller must hold the only
    /// view of these bytes in this process.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` and the caller's promise
        // keep this the only reference in the process.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// A view of `len` bytes at `at` of this one (kept mapped the same
    /// way); `None` if they do not lie inside it.
    pub fn sub(&self, at: usize, len: usize) -> Option<SharedBytes> {
        if at > self.len || len > self.len - at {
            return None;
        }
        // SAFETY: `at + len <= self.len`, so the result stays inside the
        // view, which lies inside the mapping.
        Some(SharedBytes { _map: self._map.clone(), ptr: unsafe { self.ptr.add(at) }, len })
    }

    /// Where the bytes start in this process's address space: how a view
    /// handed to the engine is recognised when it comes back in a packet.
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Copies `src` in at `at`; false (nothing copied) if it does not fit.
    pub fn write(&mut self, at: usize, src: &[u8]) -> bool {
        if at > self.len || src.len() > self.len - at {
            return false;
        }
        // SAFETY: `at + src.len() <= len`, inside the view; `src` is private
        // memory. A raw copy makes no reference to the shared bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(at), src.len()) };
        true
    }
}
