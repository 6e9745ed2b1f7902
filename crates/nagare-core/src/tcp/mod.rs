//! TCP (RFC 9293) in the sans-IO engine.

pub mod assembler;
pub mod congestion;
pub mod rtt;
pub mod scoreboard;
pub mod send_queue;
pub mod isn;
pub mod config;
pub mod connection;
