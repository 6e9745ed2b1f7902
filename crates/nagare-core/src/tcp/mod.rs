//! TCP (RFC 9293) in the sans-IO engine.
//!
//! One [`Connection`](connection::Connection) per four-tuple, with the
//! machinery it is made of (send queue, assembler, scoreboard, RTT
//! estimator, congestion control, ISNs and SYN cookies, and the guard that
//! bounds the work a SYN flood makes). Beside it, the
//! sockets of an interface ([`TcpSockets`]): the interface hands every TCP
//! segment for one of its addresses to this module (`input.rs`), which
//! finds the connection by a keyed hash of the four-tuple or the listener
//! by port; `output.rs` sends what connections have due and runs their
//! timers. Applications make their calls through [`Tcp`]
//! ([`Interface::tcp`](crate::Interface::tcp)) and look at sockets through
//! [`TcpSockets`] ([`Interface::tcp_ref`](crate::Interface::tcp_ref)).

pub mod assembler;
pub mod config;
pub mod congestion;
pub mod connection;
pub mod grown_buffer;
pub mod isn;
pub mod quick_ack;
pub mod rack;
pub mod recv_tuning;
pub mod rtt;
pub mod scoreboard;
pub mod send_queue;
pub mod send_tuning;
pub mod syn_guard;
pub mod tail_probe;

mod api;
mod events;
mod input;
mod output;
mod path_mtu;
mod sockets;
mod unreachable;

pub use api::Tcp;
pub use events::{Readiness, TcpEvent};
pub use sockets::{TcpHandle, TcpListenerHandle, TcpSocket, TcpSockets};
