//! ICMP: echo sockets (for ping, over IPv4 and IPv6), answering echo
//! requests, and errors, both
//! those the interface sends about datagrams it received and those it
//! receives about datagrams it sent.
//!
//! The interface hands every ICMP message for one of its addresses to this
//! module (`input.rs`): echo requests are answered in place, echo replies
//! go to the echo socket with their identifier (a hash lookup in
//! [`IcmpSockets`]), and errors to the socket whose datagram they quote
//! (`error.rs`). Applications make their calls through [`Icmp`]
//! ([`Interface::icmp`](crate::Interface::icmp)) and look at sockets
//! through [`IcmpSockets`]
//! ([`Interface::icmp_ref`](crate::Interface::icmp_ref)).

mod api;
mod error;
mod input;
mod socket;
mod sockets;

pub use api::Icmp;
pub use socket::{Echo6Event, EchoEvent, EchoSocket, IcmpError};
pub use sockets::{EchoHandle, IcmpSockets};

pub(crate) const ICMP_ECHO_REPLY: u8 = 0;
pub(crate) const ICMP_DST_UNREACHABLE: u8 = 3;
pub(crate) const ICMP_ECHO_REQUEST: u8 = 8;
pub(crate) const ICMP_TIME_EXCEEDED: u8 = 11;
pub(crate) const ICMP_CODE_HOST_UNREACHABLE: u8 = 1;
pub(crate) const ICMP_CODE_PROTO_UNREACHABLE: u8 = 2;
pub(crate) const ICMP_CODE_PORT_UNREACHABLE: u8 = 3;
pub(crate) const ICMP_CODE_FRAG_NEEDED: u8 = 4;
pub(crate) const ICMP_CODE_REASSEMBLY_TIMEOUT: u8 = 1;
