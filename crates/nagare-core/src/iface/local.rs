//! Local delivery: datagrams to one of our own addresses, to the loopback
//! network 127.0.0.0/8 or to `::1` never reach the link. As on Linux,
//! where all of 127.0.0.0/8 and `::1` are local on `lo`, any address in
//! 127.0.0.0/8 may be bound and sent to, and 127.0.0.1 is the source of
//! what goes to one; `::1` is its own source, as our IPv6 address is of
//! what goes to it. A datagram from the link to or from 127.0.0.0/8 or
//! `::1` is a martian (RFC 1122 3.2.1.3, RFC 4291 2.5.3), dropped by the
//! IP inputs; one from 127.0.0.0/8 or `::1` to an address that is not
//! local is refused by `Interface::send_ip` and `Interface::send_ipv6`,
//! so none ever leaves. IPv6 is local to an address of ours that passed
//! duplicate address detection: a tentative or duplicate one is not
//! ours to use yet.
//!
//! A local datagram waits whole (no link, so no MTU and no fragments) in
//! a bounded queue, IPv4 and IPv6 alike, and the next
//! [`Interface::poll`] receives it: never the send that made it, which
//! may run in the middle of receiving.

use super::{Error, Interface};
use crate::buf::PacketBuf;
use crate::ipv6::addr::AddrState;
use crate::time::Instant;
use core::net::{Ipv4Addr, Ipv6Addr};
use nagare_wire::{Ipv4Repr, Ipv6Repr, IPV4_HEADER_LEN, IPV6_HEADER_LEN};

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

    /// Whether `ip` is a local IPv6 address: `::1` (on an interface that
    /// speaks IPv6), or one of its addresses past duplicate address
    /// detection. What is sent to one is delivered here.
    pub fn is_local6(&self, ip: Ipv6Addr) -> bool {
        self.v6.as_ref().is_some_and(|v6| ip.is_loopback() || v6.addrs.state(ip) == Some(AddrState::Preferred))
    }

    /// Queues a datagram to a local address for the next poll; `repr`'s
    /// ident and lengths are already filled in.
    pub(super) fn send_local(&mut self, repr: Ipv4Repr, mut payload: PacketBuf) -> Result<(), Error> {
        self.local_room()?;
        let Ok(header) = payload.prepend(&self.pool, IPV4_HEADER_LEN) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        repr.emit(header).map_err(|_| Error::MessageTooLong)?;
        self.local.push_back(payload);
        Ok(())
    }

    /// Queues an IPv6 packet to a local address for the next poll.
    pub(super) fn send_local6(&mut self, repr: Ipv6Repr, mut payload: PacketBuf) -> Result<(), Error> {
        self.local_room()?;
        let Ok(header) = payload.prepend(&self.pool, IPV6_HEADER_LEN) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        repr.emit(header).map_err(|_| Error::MessageTooLong)?;
        self.local.push_back(payload);
        Ok(())
    }

    /// Whether the local queue has room for one more.
    fn local_room(&mut self) -> Result<(), Error> {
        if self.local.len() >= LOCAL_QUEUE_LIMIT {
            self.counters.drop_local_queue_full += 1;
            return Err(Error::NoBuffer);
        }
        Ok(())
    }

    /// Receives the local datagrams waiting now, each by its IP version
    /// (written here, by `send_local` or `send_local6`). What they make
    /// (ACKs, replies) waits for the next poll, so two local sockets
    /// cannot keep one poll busy.
    pub(super) fn receive_local(&mut self, now: Instant) {
        for _ in 0..self.local.len() {
            let Some(packet) = self.local.pop_front() else { break };
            self.counters.local_delivered += 1;
            // Never a link-layer broadcast, whatever the last frame from
            // the device was.
            self.rx_link_broadcast = false;
            match packet.header::<1>().map(|b| b[0] >> 4) {
                Some(6) => self.receive_ipv6_local(packet, now),
                _ => self.receive_ipv4(packet, now, true),
            }
        }
    }
}
