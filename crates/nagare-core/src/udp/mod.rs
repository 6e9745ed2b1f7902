//! UDP over IPv4 and IPv6: the sockets, their demultiplexing and their
//! calls.
//!
//! The interface hands every UDP datagram for one of its addresses to this
//! module (`input.rs`, over IPv6 `input6.rs`), which finds the socket by a
//! hash lookup on the destination port and family ([`UdpSockets`]). The
//! checksum over IPv6 is written by `output6.rs`. Applications make their
//! calls through [`Udp`] ([`Interface::udp`](crate::Interface::udp)) and look at
//! sockets through [`UdpSockets`]
//! ([`Interface::udp_ref`](crate::Interface::udp_ref)).

mod api;
mod input;
mod input6;
mod output6;
mod socket;
mod sockets;

pub use api::Udp;
pub use socket::{UdpDatagram, UdpDatagram6, UdpSocket};
pub use sockets::{UdpHandle, UdpSockets};

use crate::buf::PacketBuf;
use crate::iface::read::be16;
use nagare_wire::{IPV4_HEADER_LEN, UDP_HEADER_LEN};

/// Largest UDP payload in one IPv4 datagram.
pub const UDP_MAX_PAYLOAD: usize = 65535 - IPV4_HEADER_LEN - UDP_HEADER_LEN;

/// Largest UDP payload over IPv6: what the UDP length field holds (no
/// jumbograms).
pub const UDP6_MAX_PAYLOAD: usize = 65535 - UDP_HEADER_LEN;

/// Most datagrams one segmented send, or one received UDP super-frame,
/// stands for (Linux's `UDP_MAX_SEGMENTS`): a tiny segment size cannot
/// make one frame into thousands of datagrams.
pub const UDP_MAX_SEGMENTS: usize = 128;

/// A received datagram's UDP header, read from the front of `payload`:
/// source port, destination port, length and checksum, or `None` when the
/// header is cut short or its length is below the header's or past what
/// arrived. Both families' inputs read it alike.
fn read_header(payload: &PacketBuf) -> Option<(u16, u16, usize, u16)> {
    let header = payload.header::<UDP_HEADER_LEN>()?;
    let length = usize::from(be16(&header, 4));
    if length < UDP_HEADER_LEN || length > payload.len() {
        return None;
    }
    Some((be16(&header, 0), be16(&header, 2), length, be16(&header, 6)))
}

#[cfg(test)]
mod tests;
