//! An ICMP echo socket (for ping): an identifier and a bounded queue of
//! the replies and errors that came for it.

use crate::time::Instant;
use alloc::collections::VecDeque;
use core::net::{Ipv4Addr, Ipv6Addr};

/// An error an ICMP message reported about a datagram we sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpError {
    /// Destination unreachable, with its code.
    Unreachable {
        /// Who reported it.
        from: Ipv4Addr,
        /// ICMP code (3 = port unreachable, 4 = fragmentation needed, ...).
        code: u8,
    },
    /// Time exceeded in transit or in reassembly.
    TimeExceeded {
        /// Who reported it.
        from: Ipv4Addr,
        /// ICMP code.
        code: u8,
    },
    /// ICMPv6 destination unreachable, with its code.
    Unreachable6 {
        /// Who reported it.
        from: Ipv6Addr,
        /// ICMPv6 code (0 = no route, 1 = administratively prohibited,
        /// 3 = address unreachable, 4 = port unreachable, ...).
        code: u8,
    },
    /// ICMPv6 time exceeded (hop limit, or fragment reassembly).
    TimeExceeded6 {
        /// Who reported it.
        from: Ipv6Addr,
        /// ICMPv6 code.
        code: u8,
    },
    /// ICMPv6 packet too big: the path's MTU is `mtu` (the engine has
    /// lowered its path MTU already).
    PacketTooBig6 {
        /// Who reported it.
        from: Ipv6Addr,
        /// The MTU it gave.
        mtu: u32,
    },
}

/// An echo reply (or error about an echo request) received by an echo socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EchoEvent {
    /// A reply arrived.
    Reply {
        /// Who answered.
        from: Ipv4Addr,
        /// Sequence number echoed.
        seq_no: u16,
        /// Bytes of echo data.
        data_len: usize,
        /// TTL of the reply.
        ttl: u8,
        /// When it arrived.
        at: Instant,
    },
    /// An ICMP error quoting one of our requests.
    Error {
        /// Sequence number of the request it quotes.
        seq_no: u16,
        /// The error.
        error: IcmpError,
    },
}

/// An ICMPv6 echo reply received by an echo socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Echo6Event {
    /// A reply arrived.
    Reply {
        /// Who answered.
        from: Ipv6Addr,
        /// Sequence number echoed.
        seq_no: u16,
        /// Bytes of echo data.
        data_len: usize,
        /// Hop limit of the reply.
        hop_limit: u8,
        /// When it arrived.
        at: Instant,
    },
}

/// A socket that sends echo requests with one identifier and receives the
/// replies carrying it.
#[derive(Debug)]
pub struct EchoSocket {
    pub(crate) ident: u16,
    pub(crate) events: VecDeque<EchoEvent>,
    /// ICMPv6 replies, apart from the IPv4 events.
    pub(crate) events6: VecDeque<Echo6Event>,
    pub(crate) limit: usize,
}

impl EchoSocket {
    pub(crate) fn new(ident: u16, limit: usize) -> Self {
        EchoSocket { ident, events: VecDeque::new(), events6: VecDeque::new(), limit }
    }

    pub(crate) fn push(&mut self, event: EchoEvent) -> bool {
        if self.events.len() >= self.limit {
            return false;
        }
        self.events.push_back(event);
        true
    }

    pub(crate) fn push6(&mut self, event: Echo6Event) -> bool {
        if self.events6.len() >= self.limit {
            return false;
        }
        self.events6.push_back(event);
        true
    }

    /// The ICMP identifier of this socket.
    pub fn ident(&self) -> u16 {
        self.ident
    }

    /// Replies and errors waiting to be received.
    pub fn queued(&self) -> usize {
        self.events.len()
    }

    /// ICMPv6 replies waiting to be received.
    pub fn queued6(&self) -> usize {
        self.events6.len()
    }
}
