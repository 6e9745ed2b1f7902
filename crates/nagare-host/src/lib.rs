//! A nagare engine on a device, and what runs on it.
//!
//! - [`host`]: [`Host`], an engine on a device, and the one step that moves
//!   frames between them (receive, timers, services, transmit).
//! - [`realtime`]: a host on the wall clock, sleeping in `poll(2)` until
//!   the device is readable or the engine's next timer; SIGINT and SIGTERM
//!   as a stop flag.
//! - [`busy_poll`]: how long a loop polls after work before it sleeps.
//! - [`sim`]: two hosts on a simulated link in virtual time.
//! - [`link`]: a TAP device or a VNI port with its addressing, and the
//!   opening of a host on it.
//! - [`services`]: echo, discard and a static HTTP file server on the
//!   host's own engine; [`http`]: the HTTP/1.1 heads, bodies and download
//!   client they share.
//! - [`bridge`]: a learning bridge between a VNI segment and a TAP device.
//! - [`secrets`]: the engine's keys and seed from the operating system's
//!   random source, for a host on a real network.
//!
//! Diagnostics go through the `log` crate; the program chooses where they
//! go.

pub mod bridge;
pub mod busy_poll;
pub mod host;
pub mod http;
pub mod link;
pub mod realtime;
pub mod secrets;
pub mod services;
pub mod sim;

pub use busy_poll::BusyPoll;
pub use host::{earliest, Host, StepReport};
pub use link::{DeviceSpec, LinkSpec};
pub use services::{ServiceConfig, Services};
pub use sim::SimPair;
