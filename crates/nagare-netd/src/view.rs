//! A region buffer handed to the engine or a device as a `Buffer`'s bytes,
//! with what must happen when the last handle goes.
//!
//! Four kinds exist: an application's payload lent to the engine (netd),
//! a driver receive buffer lent to the engine (netd), netd's transmit
//! buffer and an application's payload in a frame (the driver). They
//! differ only in their release, so the one `unsafe` view lives here.

use nagare_core::buf::{Buffer, ExternalBytes, PacketBuf};
use nagare_ipc::SharedBytes;

/// What a view does when the engine or device lets go of it.
pub(crate) trait Release {
    fn release(&mut self);
}

/// A region buffer as the bytes of an engine [`Buffer`].
///
/// Who else can write the bytes while the view lives: for netd's own and
/// the driver's buffers, nobody (the other side does not touch a buffer
/// it handed over until it comes back); for an application's payload, the
/// application, which only changes its own outgoing data that way, as the
/// engine and the devices treat payload as opaque bytes (summed, copied,
/// written). The engine writes only through its one handle and only into
/// head or tail room, which an application's view does not have.
pub(crate) struct View<R: Release> {
    bytes: SharedBytes,
    release: R,
}

impl<R: Release + 'static> View<R> {
    /// `bytes` as a packet of `start..end` of them.
    pub fn packet(bytes: SharedBytes, release: R, start: usize, end: usize) -> Option<PacketBuf> {
        PacketBuf::from_buffer(Buffer::external(Box::new(View { bytes, release })), start, end)
    }
}

impl<R: Release> ExternalBytes for View<R> {
    fn bytes(&self) -> &[u8] {
        // SAFETY: see the type's documentation: the bytes are only ever
        // treated as opaque payload, so a concurrent writer can change at
        // most its own data.
        unsafe { self.bytes.as_slice() }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; `&mut self` is the engine's one handle.
        unsafe { self.bytes.as_mut_slice() }
    }
}

impl<R: Release> Drop for View<R> {
    fn drop(&mut self) {
        self.release.release();
    }
}
