//! TCP benchmarks of nagare, each measured beside a peer in the same run.
//!
//! The benchmark programs are in `benches/` (`cargo bench -p nagare-bench
//! --bench tcp_memory | tcp_connections | tcp_setup`); this library holds
//! their core routines so that the unit tests can run each of them small:
//!
//! - [`net`]: two nagare interfaces joined by the in-memory simulated link,
//!   stepped in one thread;
//! - [`bulk`]: one TCP stream moving many bytes from A to B;
//! - [`conns`]: many idle established connections, their heap bytes, and
//!   the cost of one small write on a random connection;
//! - [`setup`]: connection set-up and tear-down, nagare and the kernel;
//! - [`alloc_count`]: a counting global allocator for heap figures;
//! - [`report`]: load average, medians.
//!
//! Every loop here is bounded in count and in wall-clock time.

pub mod alloc_count;
pub mod bulk;
pub mod conns;
pub mod net;
pub mod report;
pub mod setup;
