//! nagare's benchmarks, each figure measured beside a peer in the same run
//! (the Linux kernel, smoltcp, the other placement), and `nagare perf`.
//!
//! The `nagare bench …` subcommands and `nagare perf` call into this
//! library; the TCP programs in `benches/` (`cargo bench -p nagare-bench
//! --bench tcp_memory | tcp_connections | tcp_setup | tcp_tap`) use its
//! routines too, so that unit tests can run each of them small.
//!
//! In-memory TCP, two engines in one thread:
//! - [`net`]: two nagare interfaces joined by an in-memory link;
//! - [`bulk`]: one TCP stream moving many bytes from A to B;
//! - [`conns`]: many idle established connections, their heap bytes, and
//!   the cost of one small write on a random connection;
//! - [`setup`]: connection set-up and tear-down, nagare and the kernel;
//! - [`alloc_count`]: a counting global allocator for heap figures;
//! - [`report`]: load average, medians.
//!
//! The `nagare bench` subcommands:
//! - [`udp`]: UDP between two engines on a simulated link, beside kernel
//!   UDP over loopback;
//! - [`sim_tcp`]: tail loss probes and receive-buffer autotuning on the
//!   simulated link in virtual time, each beside the engine without it;
//! - [`vni`]: the VNI beside Linux veth (Mint, Table 2);
//! - [`netd`]: a UDP round trip through one netd beside Linux loopback;
//! - [`sendpath`]: a UDP `sendto` stage by stage in each placement (AnT,
//!   Table 3);
//! - [`copies`]: copies per payload byte through netd and its driver;
//! - [`handover`]: handing a buffer to another process, remapped against
//!   premapped (the AnT MMU paper, Table 3);
//! - [`stages`]: a request through 1 to 4 stages, its completion returned
//!   directly or stage by stage (the AnT paper, Figure 7);
//! - [`packetflow`]: the PacketFlow paper's Figures 3 to 6, netd with
//!   each module set beside Linux, receivers at nice 0, 5 and 10;
//! - [`netns`]: the network namespaces and netd processes they start.
//!
//! [`perf`]: iperf-like throughput and latency between any two stacks.
//!
//! Every loop here is bounded in count and in wall-clock time. Benchmarks
//! that start helper processes run the program they are in again (the
//! `nagare` binary) and end those processes by their id.

pub mod alloc_count;
pub mod bulk;
pub mod conns;
pub mod copies;
pub mod handover;
pub mod net;
pub mod netd;
pub mod netns;
pub mod packetflow;
pub mod perf;
pub mod report;
pub mod sendpath;
pub mod setup;
pub mod sim_tcp;
pub mod stages;
pub mod udp;
pub mod vni;
