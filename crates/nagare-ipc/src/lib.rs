//! Shared-memory IPC for nagare's microkernel placement.
//!
//! The pieces, one per module, each using only those listed before it:
//!
//! - [`mapping`]: one `MAP_SHARED` mapping of a file, unmapped when its last
//!   holder lets go, with bounds-checked atomics and raw copies.
//! - [`spsc`]: the index protocol of every single-producer single-consumer
//!   ring in shared memory (positions, publication order, validation of
//!   the peer's position); the descriptor rings here and the VNI's frame
//!   rings in `nagare-dev` both run on it.
//! - [`descriptor`]: the 64-byte [`Descriptor`] and its encoding.
//! - [`ring`]: rings of descriptors inside a mapping; every index read from
//!   the peer is validated, and a bad one marks the ring broken (never a
//!   panic).
//! - [`shared`]: [`SharedBytes`], the one view of shared bytes handed out as
//!   a slice (zero-copy payload).
//! - [`pool`]: fixed-size buffers inside a mapping, addressed by index,
//!   whose ownership moves with descriptors; each side keeps its own
//!   private ownership table and rejects a buffer the peer does not own.
//! - [`notify`]: the wake-up primitive (an eventfd, the consumer's polling
//!   flag, the producer's edge decision), also used by the VNI, and the
//!   descriptor rings' notifier and waiter: spin for a bounded time, then
//!   sleep; the producer wakes the consumer only on an empty-to-non-empty
//!   edge and only when the consumer is not polling.
//! - [`region`]: a `memfd` region created by one process (the *creator*, the
//!   trusted inet server) and mapped once by each side, which lays out the
//!   rings and the pool; a layout header the attacher validates; size seals
//!   so a peer cannot truncate it under us.
//! - [`rendezvous`] (with [`fdpass`]): a Unix stream socket where a client
//!   connects, the server reads its credentials (`SO_PEERCRED`) and passes
//!   the region and eventfds (`SCM_RIGHTS`) with a hello carrying the
//!   layout version; the socket then stays open as a liveness signal.
//!
//! The peer is untrusted. Nothing here creates a Rust reference to memory the
//! peer can write, except references to atomics (which are made for
//! concurrent modification); plain data crosses by atomic loads and stores or
//! by raw copies into private memory, and is validated after the copy, so the
//! peer cannot change a value between its check and its use. `docs/ipc.md`
//! describes the layout and the protocol.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod descriptor;
pub mod fdpass;
pub mod mapping;
pub mod notify;
pub mod pool;
pub mod region;
pub mod rendezvous;
pub mod ring;
pub mod shared;
pub mod spsc;
mod sys;

pub use descriptor::{Descriptor, NO_BUFFER};
pub use mapping::Mapping;
pub use notify::{eventfd, EventFd, Notifier, NotifyStats, WaitError, WaitOutcome, WaitStats, Waiter, DEFAULT_SPIN};
pub use pool::{BufRef, Pool, PoolError, PoolStats};
pub use region::{Layout, Region, RegionConfig, RegionError, RingDir, Side, HEADER_LEN, LAYOUT_VERSION};
pub use rendezvous::{bind_private, Client, Listener, PeerCred, RendezvousError, ServerConn};
pub use ring::{Consumer, Producer, RingError};
pub use shared::SharedBytes;
pub use sys::unix_addr;

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the
/// machine, so times taken by an application, netd and its driver compare
/// (how a traced send is timed stage by stage).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}
