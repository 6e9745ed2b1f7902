//! A UDP socket: a bound local endpoint and a bounded queue of received
//! datagrams kept as buffer chains (delivered without copying).

use crate::buf::PacketBuf;
use alloc::collections::VecDeque;
use core::net::SocketAddrV4;

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

/// A UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    pub(crate) local: SocketAddrV4,
    pub(crate) rx: VecDeque<UdpDatagram>,
    pub(crate) rx_bytes: usize,
    pub(crate) rx_limit_packets: usize,
    pub(crate) rx_limit_bytes: usize,
    pub(crate) rx_dropped: u64,
    /// The last ICMP error reported for a datagram this socket sent.
    pub(crate) error: Option<crate::icmp::IcmpError>,
}

impl UdpSocket {
    pub(crate) fn new(local: SocketAddrV4, limit_packets: usize, limit_bytes: usize) -> Self {
        UdpSocket {
            local,
            rx: VecDeque::new(),
            rx_bytes: 0,
            rx_limit_packets: limit_packets,
            rx_limit_bytes: limit_bytes,
            rx_dropped: 0,
            error: None,
        }
    }

    /// Queues a received datagram, or refuses it when the queue is full.
    pub(crate) fn enqueue(&mut self, datagram: UdpDatagram) -> bool {
        let len = datagram.payload.len();
        if !self.has_room_for(0, 0, len) {
            self.rx_dropped += 1;
            return false;
        }
        self.rx_bytes += len;
        self.rx.push_back(datagram);
        true
    }

    pub(crate) fn dequeue(&mut self) -> Option<UdpDatagram> {
        let d = self.rx.pop_front()?;
        self.rx_bytes -= d.payload.len();
        Some(d)
    }

    /// Whether a datagram sent to `dst` (on this socket's port) is for
    /// this socket: bound to any address, or to `dst`'s.
    pub(crate) fn takes(&self, dst: SocketAddrV4) -> bool {
        let bound = *self.local.ip();
        bound.is_unspecified() || bound == *dst.ip()
    }

    /// The bound local endpoint (address 0.0.0.0 means any of ours).
    pub fn local(&self) -> SocketAddrV4 {
        self.local
    }

    /// Datagrams waiting to be read.
    pub fn queued(&self) -> usize {
        self.rx.len()
    }

    /// The payload length of the next datagram to be read, if one waits.
    pub fn next_len(&self) -> Option<usize> {
        self.rx.front().map(|d| d.payload.len())
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
