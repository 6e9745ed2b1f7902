//! The UDP sockets of an interface: the table that holds them, the port
//! map that demultiplexes datagrams to them, and the choice of ephemeral
//! ports.

use super::socket::UdpSocket;
use crate::icmp::IcmpError;
use crate::iface::Error;
use crate::socket::{SocketHandle, SocketTable, EPHEMERAL_PORTS};
use core::net::{Ipv4Addr, SocketAddrV4};
use hashbrown::HashMap;

/// Names a UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHandle(SocketHandle);

/// Every UDP socket of an interface, found by handle or by local port.
#[derive(Debug)]
pub struct UdpSockets {
    table: SocketTable<UdpSocket>,
    ports: HashMap<u16, UdpHandle>,
    next_ephemeral: u16,
}

impl UdpSockets {
    /// An empty set; `seed` picks where the search for ephemeral ports
    /// starts.
    pub(crate) fn new(seed: u64) -> Self {
        let span = u64::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        UdpSockets {
            table: SocketTable::default(),
            ports: HashMap::new(),
            next_ephemeral: EPHEMERAL_PORTS.start() + (seed % span) as u16,
        }
    }

    /// The socket `handle` names.
    pub fn socket(&self, handle: UdpHandle) -> Option<&UdpSocket> {
        self.table.get(handle.0)
    }

    pub(super) fn socket_mut(&mut self, handle: UdpHandle) -> Option<&mut UdpSocket> {
        self.table.get_mut(handle.0)
    }

    /// Binds a socket to `ip` and `port` (0: a free ephemeral port), with
    /// room for `limit_packets` datagrams of `limit_bytes` in all.
    pub(super) fn bind(
        &mut self,
        ip: Ipv4Addr,
        port: u16,
        limit_packets: usize,
        limit_bytes: usize,
    ) -> Result<UdpHandle, Error> {
        let port = match port {
            0 => self.pick_ephemeral_port()?,
            port if self.ports.contains_key(&port) => return Err(Error::AddrInUse),
            port => port,
        };
        let socket = UdpSocket::new(SocketAddrV4::new(ip, port), limit_packets, limit_bytes);
        let handle = UdpHandle(self.table.insert(socket));
        self.ports.insert(port, handle);
        Ok(handle)
    }

    fn pick_ephemeral_port(&mut self) -> Result<u16, Error> {
        let span = usize::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        for _ in 0..span {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == *EPHEMERAL_PORTS.end() { *EPHEMERAL_PORTS.start() } else { port + 1 };
            if !self.ports.contains_key(&port) {
                return Ok(port);
            }
        }
        Err(Error::NoPortAvailable)
    }

    /// Removes a socket and frees its port.
    pub(super) fn close(&mut self, handle: UdpHandle) -> Result<(), Error> {
        let socket = self.table.remove(handle.0).ok_or(Error::InvalidHandle)?;
        self.ports.remove(&socket.local.port());
        Ok(())
    }

    /// The socket that receives datagrams sent to `dst`: the one bound to
    /// its port, if that one is bound to any address or to `dst`'s. As on
    /// Linux, a socket bound to one unicast address gets only datagrams for
    /// that address; broadcasts go to wildcard sockets.
    pub(super) fn receiver(&mut self, dst: SocketAddrV4) -> Option<&mut UdpSocket> {
        let handle = self.ports.get(&dst.port()).copied()?;
        self.table.get_mut(handle.0).filter(|s| s.takes(dst))
    }

    /// The socket a datagram sent to `dst` would be delivered to, and its
    /// handle, to look at: the choice delivery makes, with one hash
    /// lookup.
    pub fn receiver_of(&self, dst: SocketAddrV4) -> Option<(UdpHandle, &UdpSocket)> {
        let handle = self.ports.get(&dst.port()).copied()?;
        self.table.get(handle.0).filter(|s| s.takes(dst)).map(|s| (handle, s))
    }

    /// Keeps `error` for the socket bound to `port`, which sent the
    /// datagram the error quotes.
    pub(crate) fn report_error(&mut self, port: u16, error: IcmpError) {
        if let Some(socket) = self.ports.get(&port).copied().and_then(|h| self.table.get_mut(h.0)) {
            socket.error = Some(error);
        }
    }
}
