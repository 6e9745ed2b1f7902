//! A UDP socket: a bound local endpoint, IPv4 or IPv6, and a bounded queue
//! of received datagrams kept as buffer chains (delivered without copying).

use crate::buf::PacketBuf;
use alloc::collections::VecDeque;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A datagram waiting to be read.
#[derive(Debug)]
pub struct UdpDatagram {
    /// Who sent it.
    pub source: SocketAddrV4,
    /// To which of our addresses it came.
    pub destination: SocketAddrV4,
    /// Its payload.
    pub payload: PacketBuf,
}

/// A datagram received over IPv6, waiting to be read.
#[derive(Debug)]
pub struct UdpDatagram6 {
    /// Who sent it.
    pub source: SocketAddrV6,
    /// To which of our addresses it came.
    pub destination: SocketAddrV6,
    /// Its payload.
    pub payload: PacketBuf,
}

/// A datagram in a socket's queue: an IPv4 socket's are all IPv4, an IPv6
/// socket's all IPv6.
#[derive(Debug)]
pub(crate) enum Queued {
    V4(UdpDatagram),
    V6(UdpDatagram6),
}

impl Queued {
    fn payload_len(&self) -> usize {
        match self {
            Queued::V4(d) => d.payload.len(),
            Queued::V6(d) => d.payload.len(),
        }
    }
}

/// A UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    pub(crate) local: SocketAddr,
    /// An IPv6 socket on `::` that takes IPv4 datagrams to its port too
    /// (held in both families' port maps), as a Linux socket without
    /// `IPV6_V6ONLY` does.
    pub(crate) dual_stack: bool,
    pub(crate) rx: VecDeque<Queued>,
    pub(crate) rx_bytes: usize,
    pub(crate) rx_limit_packets: usize,
    pub(crate) rx_limit_bytes: usize,
    pub(crate) rx_dropped: u64,
    /// The last ICMP error reported for a datagram this socket sent (to
    /// its peer, once it has one).
    pub(crate) error: Option<crate::icmp::IcmpError>,
    /// The peer it is connected to, an IPv4-mapped one as IPv4.
    pub(crate) peer: Option<SocketAddr>,
    /// Listed among the events not yet taken (`Udp::take_events`).
    pub(crate) event_pending: bool,
}

impl UdpSocket {
    pub(crate) fn new(local: SocketAddr, limit_packets: usize, limit_bytes: usize) -> Self {
        UdpSocket {
            local,
            dual_stack: false,
            rx: VecDeque::new(),
            rx_bytes: 0,
            rx_limit_packets: limit_packets,
            rx_limit_bytes: limit_bytes,
            rx_dropped: 0,
            event_pending: false,
            error: None,
            peer: None,
        }
    }

    /// Queues a received datagram, or refuses it when the queue is full.
    pub(crate) fn enqueue(&mut self, datagram: Queued) -> bool {
        let len = datagram.payload_len();
        if !self.has_room_for(0, 0, len) {
            self.rx_dropped += 1;
            return false;
        }
        self.rx_bytes += len;
        self.rx.push_back(datagram);
        true
    }

    /// The next IPv4 datagram, if one is first in the queue.
    pub(crate) fn dequeue(&mut self) -> Option<UdpDatagram> {
        match self.rx.pop_front()? {
            Queued::V4(d) => {
                self.rx_bytes -= d.payload.len();
                Some(d)
            }
            other => {
                self.rx.push_front(other);
                None
            }
        }
    }

    /// The next IPv6 datagram, if one is first in the queue.
    pub(crate) fn dequeue6(&mut self) -> Option<UdpDatagram6> {
        match self.rx.pop_front()? {
            Queued::V6(d) => {
                self.rx_bytes -= d.payload.len();
                Some(d)
            }
            other => {
                self.rx.push_front(other);
                None
            }
        }
    }

    /// The next datagram of either family (a dual-stack socket's queue
    /// holds both): its sender and payload.
    pub(crate) fn dequeue_any(&mut self) -> Option<(SocketAddr, PacketBuf)> {
        let d = self.rx.pop_front()?;
        self.rx_bytes -= d.payload_len();
        Some(match d {
            Queued::V4(d) => (SocketAddr::V4(d.source), d.payload),
            Queued::V6(d) => (SocketAddr::V6(d.source), d.payload),
        })
    }

    /// Whether a datagram sent to `dst` (on this socket's port) is for
    /// this socket: an IPv4 socket bound to any address, or to `dst`'s; a
    /// dual-stack IPv6 socket.
    pub(crate) fn takes(&self, dst: SocketAddrV4) -> bool {
        match self.local {
            SocketAddr::V4(local) => local.ip().is_unspecified() || local.ip() == dst.ip(),
            SocketAddr::V6(_) => self.dual_stack,
        }
    }

    /// Whether the socket takes IPv4 datagrams to its port too (an IPv6
    /// socket on `::` without `IPV6_V6ONLY`).
    pub fn is_dual_stack(&self) -> bool {
        self.dual_stack
    }

    /// Whether a datagram sent over IPv6 to `dst` (on this socket's port)
    /// is for this socket: an IPv6 socket bound to any address, or to
    /// `dst`'s.
    pub(crate) fn takes6(&self, dst: SocketAddrV6) -> bool {
        match self.local {
            SocketAddr::V6(local) => local.ip().is_unspecified() || local.ip() == dst.ip(),
            SocketAddr::V4(_) => false,
        }
    }

    /// The bound local endpoint of an IPv4 socket (address 0.0.0.0 means
    /// any of ours); an IPv6 socket's port with address 0.0.0.0. For both
    /// families, see [`local_addr`](Self::local_addr).
    pub fn local(&self) -> SocketAddrV4 {
        match self.local {
            SocketAddr::V4(local) => local,
            SocketAddr::V6(local) => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, local.port()),
        }
    }

    /// The bound local endpoint, IPv4 or IPv6 (an unspecified address
    /// means any of ours of that family).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The peer the socket is connected to ([`Udp::connect`]), an
    /// IPv4-mapped one as IPv4.
    ///
    /// [`Udp::connect`]: super::Udp::connect
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Whether an ICMP error about a datagram sent to `to` is this
    /// socket's: any is while it has no peer, only one about its peer once
    /// it has one (as a connected Linux socket is found for an error only
    /// by its peer's address and port).
    pub(crate) fn owns_error_about(&self, to: SocketAddr) -> bool {
        self.peer.is_none_or(|peer| peer == canonical(to))
    }

    /// Whether an ICMP error waits to be taken (`Udp::take_error`).
    pub fn has_error(&self) -> bool {
        self.error.is_some()
    }

    /// The ICMP error waiting to be taken, left in place.
    pub fn error(&self) -> Option<crate::icmp::IcmpError> {
        self.error
    }

    /// Datagrams waiting to be read.
    pub fn queued(&self) -> usize {
        self.rx.len()
    }

    /// The payload length of the next datagram to be read, if one waits.
    pub fn next_len(&self) -> Option<usize> {
        self.rx.front().map(Queued::payload_len)
    }

    /// Payload bytes of the datagrams waiting to be read.
    pub fn queued_bytes(&self) -> usize {
        self.rx_bytes
    }

    /// Whether the queue, with `datagrams` more of `bytes` in all queued
    /// first, would take a datagram of `len` payload bytes: the test a
    /// received datagram meets, for a caller that looks ahead (netd's
    /// PacketFlow filter, which sees a batch of frames before the engine
    /// delivers any).
    pub fn has_room_for(&self, datagrams: usize, bytes: usize, len: usize) -> bool {
        self.rx.len().saturating_add(datagrams) < self.rx_limit_packets
            && self.rx_bytes.saturating_add(bytes).saturating_add(len) <= self.rx_limit_bytes
    }

    /// The queue's limits: datagrams, and payload bytes in all.
    pub fn queue_limits(&self) -> (usize, usize) {
        (self.rx_limit_packets, self.rx_limit_bytes)
    }

    /// Datagrams dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.rx_dropped
    }
}

/// `a` with an IPv4-mapped IPv6 address as its IPv4 address: the one form
/// a socket's peer is kept and compared in.
pub(crate) fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(six) => match six.ip().to_ipv4_mapped() {
            Some(ip) => SocketAddr::V4(SocketAddrV4::new(ip, six.port())),
            None => a,
        },
        a => a,
    }
}
