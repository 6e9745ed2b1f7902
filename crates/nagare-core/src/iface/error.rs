//! Why a call on an interface or one of its sockets failed.

use crate::buf::PoolExhausted;
use core::fmt;

/// Why a socket call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The handle names no open socket.
    InvalidHandle,
    /// The port or identifier is already bound.
    AddrInUse,
    /// The address is not one of this interface's.
    AddrNotAvailable,
    /// No ephemeral port is free.
    NoPortAvailable,
    /// No route leads to the destination.
    NoRoute,
    /// The destination address or port cannot be sent to.
    Unaddressable,
    /// The payload does not fit in one datagram.
    MessageTooLong,
    /// No packet buffer is free.
    NoBuffer,
    /// Nothing to read or no room to write yet.
    WouldBlock,
    /// The socket is not (or no longer) connected.
    NotConnected,
    /// The peer reset the connection.
    ConnectionReset,
    /// The peer refused the connection.
    ConnectionRefused,
    /// The peer stopped answering.
    TimedOut,
    /// The next hop on the link never answered address resolution.
    HostUnreachable,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::InvalidHandle => "no such socket",
            Error::AddrInUse => "address already in use",
            Error::AddrNotAvailable => "address not available on this interface",
            Error::NoPortAvailable => "no ephemeral port available",
            Error::NoRoute => "no route to host",
            Error::Unaddressable => "destination cannot be addressed",
            Error::MessageTooLong => "message too long",
            Error::NoBuffer => "no packet buffer available",
            Error::WouldBlock => "operation would block",
            Error::NotConnected => "not connected",
            Error::ConnectionReset => "connection reset by peer",
            Error::ConnectionRefused => "connection refused",
            Error::TimedOut => "connection timed out",
            Error::HostUnreachable => "host unreachable",
        })
    }
}

impl From<PoolExhausted> for Error {
    fn from(_: PoolExhausted) -> Self {
        Error::NoBuffer
    }
}
