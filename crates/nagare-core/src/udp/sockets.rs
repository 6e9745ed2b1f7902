//! The UDP sockets of an interface: the table that holds them, IPv4 and
//! IPv6 alike, the port maps (one per family) that demultiplex datagrams
//! to them, and the choice of ephemeral ports. A port is bound once per
//! family: an IPv4 and an IPv6 socket may share it.

use super::socket::UdpSocket;
use crate::icmp::IcmpError;
use crate::iface::Error;
use crate::socket::{SocketHandle, SocketTable, EPHEMERAL_PORTS};
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use hashbrown::HashMap;

/// Names a UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHandle(SocketHandle);

/// Every UDP socket of an interface, found by handle or by local port and
/// family.
#[derive(Debug)]
pub struct UdpSockets {
    table: SocketTable<UdpSocket>,
    /// IPv4 sockets by port.
    ports: HashMap<u16, UdpHandle>,
    /// IPv6 sockets by port.
    ports6: HashMap<u16, UdpHandle>,
    next_ephemeral: u16,
    /// Sockets a datagram or an error came to since the events were last
    /// taken, each once.
    events: Vec<UdpHandle>,
}

impl UdpSockets {
    /// An empty set; `seed` picks where the search for ephemeral ports
    /// starts.
    pub(crate) fn new(seed: u64) -> Self {
        let span = u64::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        UdpSockets {
            table: SocketTable::default(),
            ports: HashMap::new(),
            ports6: HashMap::new(),
            next_ephemeral: EPHEMERAL_PORTS.start() + (seed % span) as u16,
            events: Vec::new(),
        }
    }

    /// Notes that a datagram or an error came to socket `handle`.
    fn note_event(&mut self, handle: UdpHandle) {
        let Some(socket) = self.table.get_mut(handle.0) else { return };
        if socket.event_pending {
            return;
        }
        socket.event_pending = true;
        self.events.push(handle);
        // Entries of sockets closed before their events were taken would
        // otherwise pile up where nobody takes them.
        if self.events.len() > 2 * self.table.len() + 64 {
            let table = &self.table;
            self.events.retain(|h| table.get(h.0).is_some_and(|s| s.event_pending));
        }
    }

    /// Appends to `out` every socket a datagram or an error came to since
    /// the last call (whether it was queued or dropped for a full queue),
    /// each once; sockets closed since are left out.
    pub(super) fn take_events(&mut self, out: &mut Vec<UdpHandle>) {
        let table = &mut self.table;
        for h in self.events.drain(..) {
            if let Some(socket) = table.get_mut(h.0).filter(|s| s.event_pending) {
                socket.event_pending = false;
                out.push(h);
            }
        }
    }

    /// The socket `handle` names.
    pub fn socket(&self, handle: UdpHandle) -> Option<&UdpSocket> {
        self.table.get(handle.0)
    }

    pub(super) fn socket_mut(&mut self, handle: UdpHandle) -> Option<&mut UdpSocket> {
        self.table.get_mut(handle.0)
    }

    /// Binds a socket to `ip` and `port` (0: a free ephemeral port of
    /// `ip`'s family), with room for `limit_packets` datagrams of
    /// `limit_bytes` in all.
    pub(super) fn bind(
        &mut self,
        ip: IpAddr,
        port: u16,
        limit_packets: usize,
        limit_bytes: usize,
    ) -> Result<UdpHandle, Error> {
        let port = match port {
            0 => self.pick_ephemeral_port(ip.is_ipv6())?,
            port if self.ports_of(ip.is_ipv6()).contains_key(&port) => return Err(Error::AddrInUse),
            port => port,
        };
        let socket = UdpSocket::new(SocketAddr::new(ip, port), limit_packets, limit_bytes);
        let handle = UdpHandle(self.table.insert(socket));
        self.ports_of_mut(ip.is_ipv6()).insert(port, handle);
        Ok(handle)
    }

    /// Binds an IPv6 socket to `::` and `port` (0: an ephemeral port free
    /// in both families) that takes IPv4 datagrams to the port too: the
    /// port must be free in both families, and is held in both.
    pub(super) fn bind_dual_stack(
        &mut self,
        port: u16,
        limit_packets: usize,
        limit_bytes: usize,
    ) -> Result<UdpHandle, Error> {
        let port = match port {
            0 => self.pick_ephemeral_port_of_both()?,
            port if self.ports.contains_key(&port) || self.ports6.contains_key(&port) => return Err(Error::AddrInUse),
            port => port,
        };
        let mut socket =
            UdpSocket::new(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port), limit_packets, limit_bytes);
        socket.dual_stack = true;
        let handle = UdpHandle(self.table.insert(socket));
        self.ports.insert(port, handle);
        self.ports6.insert(port, handle);
        Ok(handle)
    }

    /// The port map of IPv6 sockets if `v6`, else of IPv4 ones.
    fn ports_of(&self, v6: bool) -> &HashMap<u16, UdpHandle> {
        if v6 {
            &self.ports6
        } else {
            &self.ports
        }
    }

    fn ports_of_mut(&mut self, v6: bool) -> &mut HashMap<u16, UdpHandle> {
        if v6 {
            &mut self.ports6
        } else {
            &mut self.ports
        }
    }

    fn pick_ephemeral_port(&mut self, v6: bool) -> Result<u16, Error> {
        let span = usize::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        for _ in 0..span {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == *EPHEMERAL_PORTS.end() { *EPHEMERAL_PORTS.start() } else { port + 1 };
            if !self.ports_of(v6).contains_key(&port) {
                return Ok(port);
            }
        }
        Err(Error::NoPortAvailable)
    }

    /// An ephemeral port free in both families' maps.
    fn pick_ephemeral_port_of_both(&mut self) -> Result<u16, Error> {
        let span = usize::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        for _ in 0..span {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == *EPHEMERAL_PORTS.end() { *EPHEMERAL_PORTS.start() } else { port + 1 };
            if !self.ports.contains_key(&port) && !self.ports6.contains_key(&port) {
                return Ok(port);
            }
        }
        Err(Error::NoPortAvailable)
    }

    /// Removes a socket and frees its port (in both families for a
    /// dual-stack one).
    pub(super) fn close(&mut self, handle: UdpHandle) -> Result<(), Error> {
        let socket = self.table.remove(handle.0).ok_or(Error::InvalidHandle)?;
        self.ports_of_mut(socket.local.is_ipv6()).remove(&socket.local.port());
        if socket.dual_stack {
            self.ports.remove(&socket.local.port());
        }
        Ok(())
    }

    /// The IPv4 socket that receives datagrams sent to `dst`: the one bound
    /// to its port, if that one is bound to any address or to `dst`'s. As on
    /// Linux, a socket bound to one unicast address gets only datagrams for
    /// that address; broadcasts go to wildcard sockets.
    pub(super) fn receiver(&mut self, dst: SocketAddrV4) -> Option<&mut UdpSocket> {
        let handle = self.ports.get(&dst.port()).copied()?;
        if !self.table.get(handle.0).is_some_and(|s| s.takes(dst)) {
            return None;
        }
        self.note_event(handle);
        self.table.get_mut(handle.0)
    }

    /// The IPv4 socket a datagram sent to `dst` would be delivered to, and
    /// its handle, to look at: the choice delivery makes, with one hash
    /// lookup.
    pub fn receiver_of(&self, dst: SocketAddrV4) -> Option<(UdpHandle, &UdpSocket)> {
        let handle = self.ports.get(&dst.port()).copied()?;
        self.table.get(handle.0).filter(|s| s.takes(dst)).map(|s| (handle, s))
    }

    /// The IPv6 socket that receives datagrams sent to `dst`: the one
    /// bound to its port, if that one is bound to any address or to
    /// `dst`'s.
    pub(super) fn receiver6(&mut self, dst: SocketAddrV6) -> Option<&mut UdpSocket> {
        let handle = self.ports6.get(&dst.port()).copied()?;
        if !self.table.get(handle.0).is_some_and(|s| s.takes6(dst)) {
            return None;
        }
        self.note_event(handle);
        self.table.get_mut(handle.0)
    }

    /// The IPv6 socket a datagram sent to `dst` would be delivered to, and
    /// its handle, to look at.
    pub fn receiver_of6(&self, dst: SocketAddrV6) -> Option<(UdpHandle, &UdpSocket)> {
        let handle = self.ports6.get(&dst.port()).copied()?;
        self.table.get(handle.0).filter(|s| s.takes6(dst)).map(|s| (handle, s))
    }

    /// Keeps `error` for the IPv4 socket bound to `port` (or the
    /// dual-stack IPv6 one), which sent the datagram to `to` the error
    /// quotes; a socket connected to another peer is not told.
    pub(crate) fn report_error(&mut self, port: u16, to: SocketAddrV4, error: IcmpError) {
        let Some(handle) = self.ports.get(&port).copied() else { return };
        if let Some(socket) = self.table.get_mut(handle.0) {
            if socket.owns_error_about(SocketAddr::V4(to)) {
                socket.error = Some(error);
                self.note_event(handle);
            }
        }
    }

    /// Keeps `error` for the IPv6 socket bound to `port`, which sent the
    /// datagram to `to` the error quotes; a socket connected to another
    /// peer is not told.
    pub(crate) fn report_error6(&mut self, port: u16, to: SocketAddrV6, error: IcmpError) {
        let Some(handle) = self.ports6.get(&port).copied() else { return };
        if let Some(socket) = self.table.get_mut(handle.0) {
            if socket.owns_error_about(SocketAddr::V6(to)) {
                socket.error = Some(error);
                self.note_event(handle);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    const V4_ANY: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    const V6_ANY: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

    #[test]
    fn each_family_has_its_own_ports() {
        let mut sockets = UdpSockets::new(0);
        let v4 = sockets.bind(V4_ANY, 53, 8, 1 << 16).unwrap();
        let v6 = sockets.bind(V6_ANY, 53, 8, 1 << 16).unwrap();
        assert_eq!(sockets.bind(V6_ANY, 53, 8, 1 << 16), Err(Error::AddrInUse));
        assert_eq!(sockets.bind(V4_ANY, 53, 8, 1 << 16), Err(Error::AddrInUse));
        let to4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 53);
        let to6 = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 53, 0, 0);
        assert_eq!(sockets.receiver_of(to4).map(|(h, _)| h), Some(v4));
        assert_eq!(sockets.receiver_of6(to6).map(|(h, _)| h), Some(v6));
        // Closing the IPv6 socket frees its port, and only its family's.
        sockets.close(v6).unwrap();
        assert!(sockets.receiver_of6(to6).is_none());
        assert_eq!(sockets.receiver_of(to4).map(|(h, _)| h), Some(v4));
        assert!(sockets.bind(V6_ANY, 53, 8, 1 << 16).is_ok());
    }

    #[test]
    fn an_ephemeral_port_is_free_in_its_own_family() {
        let mut sockets = UdpSockets::new(0);
        let first = *EPHEMERAL_PORTS.start();
        sockets.bind(V6_ANY, first, 8, 1 << 16).unwrap();
        // The search starts at the first ephemeral port: taken over IPv6,
        // free over IPv4.
        let v4 = sockets.bind(V4_ANY, 0, 8, 1 << 16).unwrap();
        assert_eq!(sockets.socket(v4).map(|s| s.local.port()), Some(first));
        let v6 = sockets.bind(V6_ANY, 0, 8, 1 << 16).unwrap();
        assert_eq!(sockets.socket(v6).map(|s| s.local.port()), Some(first + 1));
    }

    #[test]
    fn a_dual_stack_socket_holds_its_port_in_both_families_until_it_closes() {
        let mut sockets = UdpSockets::new(0);
        sockets.bind(V4_ANY, 53, 8, 1 << 16).unwrap();
        assert_eq!(sockets.bind_dual_stack(53, 8, 1 << 16), Err(Error::AddrInUse), "IPv4 holds it");
        let dual = sockets.bind_dual_stack(54, 8, 1 << 16).unwrap();
        assert_eq!(sockets.bind(V4_ANY, 54, 8, 1 << 16), Err(Error::AddrInUse));
        assert_eq!(sockets.bind(V6_ANY, 54, 8, 1 << 16), Err(Error::AddrInUse));
        let to4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 54);
        let to6 = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 54, 0, 0);
        assert_eq!(sockets.receiver_of(to4).map(|(h, _)| h), Some(dual));
        assert_eq!(sockets.receiver_of6(to6).map(|(h, _)| h), Some(dual));
        sockets.close(dual).unwrap();
        assert!(sockets.receiver_of(to4).is_none());
        assert!(sockets.bind(V4_ANY, 54, 8, 1 << 16).is_ok());
        assert!(sockets.bind(V6_ANY, 54, 8, 1 << 16).is_ok());
        // An ephemeral port is one free in both: the first is taken over
        // IPv4 here.
        let first = *EPHEMERAL_PORTS.start();
        let mut sockets = UdpSockets::new(0);
        sockets.bind(V4_ANY, first, 8, 1 << 16).unwrap();
        let dual = sockets.bind_dual_stack(0, 8, 1 << 16).unwrap();
        assert_eq!(sockets.socket(dual).map(|s| s.local.port()), Some(first + 1));
    }
}
