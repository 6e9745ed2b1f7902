//! Local delivery: datagrams to one of our own addresses or to the
//! loopback network, 127.0.0.0/8, never reach the link. As on Linux, where
//! all of 127.0.0.0/8 is local on `lo`, any address in it may be bound
//! and sent to, and 127.0.0.1 is the source of what goes to one. A
//! datagram from the link to or from 127.0.0.0/8 is a martian (RFC 1122
//! 3.2.1.3), dropped by the IPv4 input; one from 127.0.0.0/8 to an
//! address that is not local is refused by `Interface::send_ip`, so none
//! ever leaves.
//!
//! A local datagram waits whole (no link, so no MTU and no fragments) in
//! a bounded queue, and the next [`Interface::poll`] receives it: never
//! the send that made it, which may run in the middle of receiving.

use super::{Error, Interface};
use crate::buf::PacketBuf;
use crate::time::Instant;
use core::net::Ipv4Addr;
use nagare_wire::{Ipv4Repr, IPV4_HEADER_LEN};

/// Local datagrams that may wait for the next poll; past these a send
/// fails with [`Error::NoBuffer`] and is counted in
/// `drop_local_queue_full`.
pub(super) const LOCAL_QUEUE_LIMIT: usize = 4096;

/// The source of datagrams to the loopback network, as Linux's `lo`
/// (127.0.0.1/8) gives them.
pub(super) const LOOPBACK_SOURCE: Ipv4Addr = Ipv4Addr::LOCALHOST;

impl Interface {
    /// Whether `ip` is local: one of the interface's addresses, or any
    /// address of the loopback network 127.0.0.0/8. Local addresses may be
    /// bound, and what is sent to one is delivered here.
    pub fn is_local(&self, ip: Ipv4Addr) -> bool {
        ip.is_loopback() || self.has_address(ip)
    }

    /// Queues a datagram to a local address for the next poll; `repr`'s
    /// ident and lengths are already filled in.
    pub(super) fn send_local(&mut self, repr: Ipv4Repr, mut payload: PacketBuf) -> Result<(), Error> {
        if self.local.len() >= LOCAL_QUEUE_LIMIT {
            self.counters.drop_local_queue_full += 1;
            return Err(Error::NoBuffer);
        }
        let Ok(header) = payload.prepend(&self.pool, IPV4_HEADER_LEN) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        repr.emit(header).map_err(|_| Error::MessageTooLong)?;
        self.local.push_back(payload);
        Ok(())
    }

    /// Receives the local datagrams waiting now. What they make (ACKs,
    /// replies) waits for the next poll, so two local sockets cannot keep
    /// one poll busy.
    pub(super) fn receive_local(&mut self, now: Instant) {
        for _ in 0..self.local.len() {
            let Some(packet) = self.local.pop_front() else { break };
            self.counters.local_delivered += 1;
            self.receive_ipv4(packet, now, true);
        }
    }
}
