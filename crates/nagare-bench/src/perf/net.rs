//! What a perf test needs from a network stack, non-blocking, so the same
//! test code runs on nagare ([`super::engine`]) and on the kernel through
//! `std::net` ([`super::kernel`]). Addresses are IPv4 or IPv6: listeners
//! and UDP sockets take both families where the stack can, and a peer
//! reached over IPv4 is always named by its IPv4 address (never an
//! IPv4-mapped IPv6 one), so an address compares equal whichever socket
//! reported it.

use anyhow::Result;
use nagare_core::Instant;
use std::net::SocketAddr;

/// Puts `item` in the first free slot of a socket table; returns its
/// index (the handle the test holds).
pub fn insert<T>(slots: &mut Vec<Option<T>>, item: T) -> usize {
    if let Some(i) = slots.iter().position(Option::is_none) {
        slots[i] = Some(item);
        return i;
    }
    slots.push(Some(item));
    slots.len() - 1
}

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, how a
/// dual-stack socket names an IPv4 peer) as the IPv4 address it maps.
pub fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// The outcome of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recv {
    Data(usize),
    WouldBlock,
    Eof,
}

pub trait Net {
    type Conn: Copy + std::fmt::Debug;
    type Listener: Copy;
    type Udp: Copy;

    /// Starts a connection; [`Net::tcp_established`] says when it is up.
    fn tcp_connect(&mut self, to: SocketAddr) -> Result<Self::Conn>;
    /// `Ok(true)` once established, `Ok(false)` while connecting, an error
    /// if it failed.
    fn tcp_established(&mut self, c: Self::Conn) -> Result<bool>;
    /// Listens on `port` for IPv4 and IPv6 connections (IPv4 only where
    /// the stack has no IPv6).
    fn tcp_listen(&mut self, port: u16) -> Result<Self::Listener>;
    /// The next connection and its peer.
    fn tcp_accept(&mut self, l: Self::Listener) -> Result<Option<(Self::Conn, SocketAddr)>>;
    /// The local end of a connection.
    fn tcp_local(&mut self, c: Self::Conn) -> Option<SocketAddr>;
    /// Queues bytes; returns how many were taken (0: no room now).
    fn tcp_send(&mut self, c: Self::Conn, data: &[u8]) -> Result<usize>;
    /// Queues up to `max` bytes of filler without copying where the stack
    /// allows; returns how many were taken.
    fn tcp_send_fill(&mut self, c: Self::Conn, max: u64) -> Result<usize>;
    fn tcp_recv(&mut self, c: Self::Conn, buf: &mut [u8]) -> Result<Recv>;
    /// Takes up to `max` received bytes and throws them away.
    fn tcp_recv_discard(&mut self, c: Self::Conn, max: usize) -> Result<Recv>;
    /// Sends FIN after what is queued.
    fn tcp_shutdown(&mut self, c: Self::Conn) -> Result<()>;
    /// Whether everything this end sent, FIN included, has been
    /// acknowledged (or the connection is gone): safe to exit.
    fn tcp_flushed(&mut self, _c: Self::Conn) -> bool {
        true
    }
    /// Lets go of the connection (a graceful close).
    fn tcp_close(&mut self, c: Self::Conn);

    /// Binds `port` (0: a free one) for datagrams of both families (IPv4
    /// only where the stack has no IPv6).
    fn udp_bind(&mut self, port: u16) -> Result<Self::Udp>;
    fn udp_local_port(&self, u: Self::Udp) -> u16;
    /// `Ok(false)` when the datagram could not be queued now (no buffer).
    fn udp_send(&mut self, u: Self::Udp, data: &[u8], to: SocketAddr) -> Result<bool>;
    /// Sends `data` as datagrams of `segment` bytes each (the last may be
    /// shorter); returns how many were queued, from the first (0: none
    /// now). A stack that can queue them in one call (the kernel's UDP
    /// segmentation offload) does.
    fn udp_send_segments(&mut self, u: Self::Udp, data: &[u8], segment: usize, to: SocketAddr) -> Result<usize> {
        let mut sent = 0;
        for d in data.chunks(segment.max(1)) {
            if !self.udp_send(u, d, to)? {
                break;
            }
            sent += 1;
        }
        Ok(sent)
    }
    /// Copies the start of the next datagram into `buf`; returns the
    /// datagram's whole length and its sender.
    fn udp_recv(&mut self, u: Self::Udp, buf: &mut [u8]) -> Result<Option<(usize, SocketAddr)>>;

    /// Moves frames (nagare) or does nothing (kernel); returns whether
    /// anything happened.
    fn step(&mut self, now: Instant) -> Result<bool>;
    /// Sleeps until there may be something to do, `until` at the latest,
    /// and never long (a stop request is checked between waits).
    fn wait(&mut self, until: Option<Instant>, now: Instant) -> Result<()>;
    /// A line of stack counters worth showing after a run, if any.
    fn stats_line(&self) -> Option<String> {
        None
    }
}
