//! nagare's inet server: many client applications, each with a
//! shared-memory region of its own (`nagare-ipc`), send socket requests as
//! 64-byte descriptors (`nagare-request`); netd runs them against one
//! engine (`nagare-core`) whose frames go to a device (`nagare-dev`) or a
//! driver, and posts completions.
//!
//! Each job has its own module:
//!
//! - the wiring: `builder` ([`NetdBuilder`]: a link and a placement to a
//!   netd with its device, driver thread or driver process);
//! - the loop, which only takes turns: `netd` ([`Netd`]);
//! - the request manager: `clients` (the listener, admitting clients),
//!   `session` (one client's rings, buffers, waiting requests and
//!   completions), `memory` (what each client's sockets are charged),
//!   `requests` (one client's turn: what becomes of each
//!   request);
//! - the socket manager: `sockets` (client socket ids to engine handles);
//! - the operations, one function each: `ops` (`udp`, `tcp`, `icmp`,
//!   `control`, and `deliver` for received data);
//! - the protocol manager's edges: `frames` (a device called inline, or
//!   a [`driver`]), `lending` and `returns` (client buffers lent to the
//!   engine and their completions), `steering` (received frames placed in
//!   their client's region), `view` (a region buffer as engine bytes);
//! - what netd says about itself: `stats` ([`NetdStats`]) and `report`
//!   (the text of `nagare stat`); its settings: `config` ([`NetdConfig`]);
//! - PacketFlow, receive processing that honours the receiver's
//!   priority: `packetflow` (the filter and the scheduler; [`PacketFlow`]
//!   says which modules run, [`BoostConfig`] how the scheduler boosts).
//!
//! `docs/netd.md` describes the design.

#![warn(missing_docs)]

mod access;
mod builder;
mod clients;
mod config;
pub mod driver;
mod exclusive;
mod frames;
mod lending;
mod memory;
mod netd;
mod ops;
mod os;
mod packetflow;
mod parked;
mod priority;
mod report;
mod requests;
mod returns;
mod session;
mod shares;
mod sharing;
mod sockets;
mod stats;
mod steering;
mod tap_queues;
mod view;
mod wakes;
mod watches;

pub use access::{group_id, kernel_unprivileged_port_start};
pub use builder::{Built, NetdBuilder};
pub use config::{NetdConfig, DEFAULT_CLIENT_MEMORY, DEFAULT_TAP_QUEUE_LEN};
pub use driver::{DriverLink, DriverLinkStats, Placement};
pub use nagare_request::{decode_addr, encode_addr, Completion, Op, Piece, ProtoError, Request, DEFAULT_SOCKET};
pub use netd::Netd;
pub use packetflow::{BoostConfig, BoostCount, PacketFlow};
pub use stats::NetdStats;
