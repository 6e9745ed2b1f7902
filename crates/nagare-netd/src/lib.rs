//! nagare's inet server (issue 4, item 2): many client applications, each
//! with a shared-memory region of its own (`nagare-ipc`), send socket
//! requests as 64-byte descriptors; netd runs them against one engine
//! (`nagare-core`) on one device (`nagare-dev`) and posts completions.
//!
//! - [`proto`]: the request/completion protocol, every field validated.
//! - [`server`]: sessions (request manager), the socket table (socket
//!   manager), the engine and device (protocol manager) and the loop.
//!
//! `docs/netd.md` has the plan and what exists.

#![warn(missing_docs)]

/// The request protocol (its own crate, so that clients need not build
/// the engine).
pub use nagare_request as proto;
mod config;
pub mod driver;
mod lending;
mod report;
pub mod server;
mod stats;
mod steering;
mod view;

pub use config::NetdConfig;
pub use driver::{DriverLink, Placement};
pub use proto::DEFAULT_SOCKET;
pub use proto::{Completion, Op, Piece, ProtoError, Request};
pub use server::Netd;
pub use stats::NetdStats;
