//! Shared-memory IPC for nagare's microkernel placement (issue 4, item 1).
//!
//! The pieces, one per module:
//!
//! - [`region`]: a `memfd` region created by one process (the *creator*, the
//!   trusted inet server) and mapped once by each side; a layout header the
//!   attacher validates; size seals so a peer cannot truncate it under us.
//! - [`ring`]: single-producer single-consumer rings of 64-byte
//!   [`Descriptor`]s inside a region; every index read from the peer is
//!   validated, and a bad one marks the ring broken (never a panic).
//! - [`pool`]: fixed-size buffers inside the region, addressed by index, whose
//!   ownership moves with descriptors; each side keeps its own private
//!   ownership table and rejects a buffer the peer does not own.
//! - [`notify`]: spin for a bounded time, then sleep on an eventfd; the
//!   producer wakes the consumer only on an empty-to-non-empty edge and only
//!   when the consumer is not polling.
//! - [`rendezvous`]: a Unix stream socket where a client connects, the server
//!   reads its credentials (`SO_PEERCRED`) and passes the region and eventfds
//!   (`SCM_RIGHTS`) with a hello carrying the layout version; the socket then
//!   stays open as a liveness signal.
//!
//! The peer is untrusted. Nothing here creates a Rust reference to memory the
//! peer can write, except references to atomics (which are made for
//! concurrent modification); plain data crosses by atomic loads and stores or
//! by raw copies into private memory, and is validated after the copy, so the
//! peer cannot change a value between its check and its use. `docs/ipc.md`
//! describes the layout and the protocol.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod fdpass;
pub mod notify;
pub mod pool;
pub mod region;
pub mod rendezvous;
pub mod ring;
pub mod shared;
mod sys;

pub use notify::{eventfd, Notifier, NotifyStats, WaitError, WaitOutcome, WaitStats, Waiter, DEFAULT_SPIN};
pub use pool::{BufRef, Pool, PoolError, PoolStats};
pub use region::{Layout, Region, RegionConfig, RegionError, RingDir, Side, HEADER_LEN, LAYOUT_VERSION};
pub use rendezvous::{Client, Listener, PeerCred, RendezvousError, ServerConn};
pub use ring::{Consumer, Descriptor, Producer, RingError, NO_BUFFER};
pub use shared::SharedBytes;

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the
/// machine, so times taken by an application, netd and its driver compare
/// (how a traced send is timed stage by stage).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}
