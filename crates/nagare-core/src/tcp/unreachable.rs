//! ICMP destination-unreachable errors about a connection's segments
//! (RFC 1122 4.2.3.9, RFC 5461): checked against what the connection has
//! in flight (RFC 5927), they fail a connection still opening, with
//! "refused" for an unreachable port or protocol and "host unreachable"
//! for the rest; one already open rides them out as soft errors, its
//! retransmissions asking again.

use super::connection::TcpError;
use crate::iface::Interface;
use crate::time::Instant;
use core::net::SocketAddr;
use nagare_wire::TcpSeqNumber;

impl Interface {
    /// An ICMP error said the segment of `local`'s connection to `remote`
    /// with sequence number `seq` could not reach it, its port or protocol
    /// (`refused`) or its destination. One that quotes nothing in flight
    /// is counted and ignored.
    pub(crate) fn tcp_icmp_unreachable(
        &mut self,
        (local, remote): (SocketAddr, SocketAddr),
        seq: TcpSeqNumber,
        refused: bool,
        now: Instant,
    ) {
        if !self.tcp_quote_in_flight(local, remote, seq) {
            self.counters.drop_icmp_tcp_unverified += 1;
            return;
        }
        let error = if refused { TcpError::Refused } else { TcpError::HostUnreachable };
        self.tcp_unreachable(local, remote, error, now);
    }
}
