//! The sans-IO protocol engine of nagare.
//!
//! No threads, no system calls, no clock: frames and time go in, frames and
//! socket events come out, and [`iface::Interface::poll_at`] says when the
//! engine next needs to run. That is what makes the same engine run embedded
//! in an application, inside the inet server, and under a simulation with
//! virtual time.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod arp;
pub mod buf;
pub mod capabilities;
pub mod config;
pub mod counters;
pub mod hash;
pub mod icmp;
pub mod iface;
pub mod ipv4;
pub mod ipv6;
pub mod pmtu;
pub mod ratelimit;
pub mod reassembly;
pub mod socket;
pub mod tcp;
pub mod time;
pub mod udp;

pub use capabilities::Capabilities;
pub use config::{InterfaceConfig, Ipv6Config, NdpConfig, Route, Secrets};
pub use counters::Counters;
pub use icmp::EchoHandle;
pub use iface::Interface;
pub use time::Instant;
pub use udp::UdpHandle;
