//! nagare's inet server: many client applications, each with a
//! shared-memory region of its own (`nagare-ipc`), send socket requests as
//! 64-byte descriptors (`nagare-request`, whose types this crate
//! re-exports); netd runs them against one engine (`nagare-core`) whose
//! frames go to a device (`nagare-dev`) or a driver, and posts completions.
//!
//! - [`server`]: sessions (request manager), the socket table (socket
//!   manager), the engine and its frames (protocol manager) and the loop.
//! - [`driver`]: the driver and netd's side of it.
//!
//! `docs/netd.md` describes the design.

#![warn(missing_docs)]

mod config;
pub mod driver;
mod lending;
mod report;
pub mod server;
mod stats;
mod steering;
mod view;

pub use config::NetdConfig;
pub use driver::{DriverLink, DriverLinkStats, Placement};
pub use nagare_request::{decode_addr, encode_addr, Completion, Op, Piece, ProtoError, Request, DEFAULT_SOCKET};
pub use server::Netd;
pub use stats::NetdStats;
