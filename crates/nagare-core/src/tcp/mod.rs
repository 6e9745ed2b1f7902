//! TCP (RFC 9293) in the sans-IO engine.

pub mod assembler;
pub mod config;
pub mod congestion;
pub mod connection;
pub mod isn;
pub mod rtt;
pub mod scoreboard;
pub mod send_queue;
