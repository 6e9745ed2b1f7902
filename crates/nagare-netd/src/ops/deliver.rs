//! Received data into the client's buffer: handed over in place when it
//! already lies in one of netd's receive buffers in the client's region,
//! copied otherwise.
//!
//! Invariant: a buffer handed over in place is netd's to give (it is in
//! the client's pool as netd's, and steering has it with the engine) and
//! nothing else holds it; the buffer the request brought takes its place
//! in netd's receive pool, so the pool keeps its size. A copy writes at
//! most the request's piece.

use super::Caller;
use crate::steering::Steering;
use nagare_core::buf::PacketBuf;
use nagare_ipc::{BufRef, Pool};

/// Copies a received chain into the client's buffer (the one copy on
/// receive); returns the bytes copied (at most the buffer piece's length).
pub(super) fn copy_to_region(pool: &mut Pool, b: BufRef, data: &PacketBuf) -> Result<u32, i32> {
    let mut at = 0u32;
    for chunk in data.chunks() {
        let room = (b.len - at) as usize;
        if room == 0 {
            break;
        }
        let n = chunk.len().min(room);
        pool.write(b.index, b.offset + at, &chunk[..n]).map_err(|_| libc::EFAULT)?;
        at += n as u32;
    }
    Ok(at)
}

/// Received data that already lies in one of netd's receive buffers in
/// this client's region (steered there by the driver), which nothing else
/// holds: that buffer goes to the client as it is, and `posted`, the
/// buffer the receive brought, joins netd's receive pool in its place. The
/// data back if it is not so.
pub(super) fn received_in_place(
    c: &mut Caller<'_>,
    steering: &Steering,
    posted: BufRef,
    data: PacketBuf,
) -> Result<BufRef, PacketBuf> {
    if data.slice_count() != 1 || !data.holds_buffers_alone() || !steering.enabled() {
        return Err(data);
    }
    let Some((addr, len)) = data.chunks().next().map(|c| (c.as_ptr() as usize, c.len())) else { return Err(data) };
    let Some((index, offset)) = steering.locate(c.key, addr, len) else { return Err(data) };
    // The completion gives the buffer to the client: it must be netd's to
    // give (it is, while steering has it in the engine), or it would be
    // stranded, in no pool.
    if !c.pool.holds(index) {
        return Err(data);
    }
    let Ok(view) = c.pool.shared(posted.index, 0, c.pool.buffer_size()) else { return Err(data) };
    steering.swap(c.key, index, (posted.index, view));
    // The engine's hold goes; the buffer is the client's with the
    // completion.
    drop(data);
    let len = (len as u32).min(posted.len);
    Ok(BufRef { index, offset, len })
}
