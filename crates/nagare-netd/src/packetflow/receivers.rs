//! The receivers PacketFlow's modules ask about: each of the engine's UDP
//! sockets that a client holds, the client it belongs to, its id there
//! (what its memory is charged under), its own priority if its option
//! sets one and whether its application sized its queue (`SO_RCVBUF`,
//! which the memory manager leaves alone); each client's priority; the
//! clients the scheduler has boosted; and the filter's drops per socket.
//!
//! The table follows the socket manager: a UDP socket enters when a
//! client binds it and leaves when it is closed or its client goes (one
//! several clients hold passes to another holder instead); a
//! client's priority is set again at every housekeeping (its nice value is
//! read again each second). A frame's lookup is one hash lookup for the
//! socket and one for its client.

use crate::priority;
use hashbrown::{HashMap, HashSet};
use nagare_core::UdpHandle;

/// A UDP socket of a client.
#[derive(Debug)]
struct Receiver {
    client: u64,
    socket: u32,
    own: Option<u8>,
    sized: bool,
    /// Datagrams the filter dropped for it: for its low priority (B1),
    /// for its full queue (B2).
    drops: [u64; 2],
}

/// What PacketFlow knows of a datagram's receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    /// The socket's priority (100 highest .. 139 lowest).
    pub priority: u8,
    /// Its client is boosted: high priority whatever its value.
    pub boosted: bool,
    /// Its client's key and its id there.
    pub client: u64,
    pub socket: u32,
    /// Its application sized its queue: the memory manager leaves it.
    pub sized: bool,
}

/// Every client's UDP sockets, by engine handle.
#[derive(Debug, Default)]
pub(crate) struct Receivers {
    sockets: HashMap<UdpHandle, Receiver>,
    clients: HashMap<u64, u8>,
    boosted: HashSet<u64>,
    /// A priority changed, or a queue was left above its maximum, since
    /// the memory manager last fitted the queues to their maxima.
    refit: bool,
}

impl Receivers {
    /// Client `client` holds UDP socket `h`, its socket `socket`.
    pub fn add(&mut self, h: UdpHandle, client: u64, socket: u32) {
        self.sockets.insert(h, Receiver { client, socket, own: None, sized: false, drops: [0; 2] });
    }

    /// Socket `h`'s application sized its queue.
    pub fn set_sized(&mut self, h: UdpHandle) {
        if let Some(r) = self.sockets.get_mut(&h) {
            r.sized = true;
        }
    }

    /// Holder `from` (client key, socket id) of socket `h`, a socket
    /// several clients hold, lets it go: if the socket is that holder's
    /// here, it becomes `to`'s (its own priority and sizing kept), or
    /// leaves the table when no holder is left.
    pub fn hand_over(&mut self, h: UdpHandle, from: (u64, u32), to: Option<(u64, u32)>) {
        let Some(r) = self.sockets.get_mut(&h) else { return };
        if (r.client, r.socket) != from {
            return;
        }
        match to {
            Some((client, socket)) => {
                r.client = client;
                r.socket = socket;
                self.refit = true;
            }
            None => {
                self.sockets.remove(&h);
            }
        }
    }

    /// Socket `h` is closed.
    pub fn remove(&mut self, h: UdpHandle) {
        self.sockets.remove(&h);
    }

    /// Socket `h`'s own priority (`None`: its client's).
    pub fn set_own(&mut self, h: UdpHandle, own: Option<u8>) {
        if let Some(r) = self.sockets.get_mut(&h) {
            r.own = own;
            self.refit = true;
        }
    }

    /// Client `client`'s priority.
    pub fn set_client(&mut self, client: u64, priority: u8) {
        self.refit |= self.clients.insert(client, priority).is_some_and(|before| before != priority);
    }

    /// Whether the queues are due to be fitted to their maxima (a
    /// priority changed, or [`Receivers::refit_later`] was called, since
    /// the last time this said so).
    pub fn take_refit(&mut self) -> bool {
        std::mem::take(&mut self.refit)
    }

    /// A queue is still above its maximum: fit the queues again later.
    pub fn refit_later(&mut self) {
        self.refit = true;
    }

    /// Client `client` is gone, and its sockets with it.
    pub fn forget_client(&mut self, client: u64) {
        self.sockets.retain(|_, r| r.client != client);
        self.clients.remove(&client);
        self.boosted.remove(&client);
    }

    /// Marks client `client` as boosted (the scheduler's choice: a process
    /// it runs first counts as high priority), or not.
    pub fn set_boosted(&mut self, client: u64, boosted: bool) {
        if boosted {
            self.boosted.insert(client);
        } else {
            self.boosted.remove(&client);
        }
    }

    /// Whether client `client` is boosted.
    pub fn is_boosted(&self, client: u64) -> bool {
        !self.boosted.is_empty() && self.boosted.contains(&client)
    }

    /// Socket `h`'s priority, whether its client is boosted, whose it is
    /// and whether its application sized it, if a client holds it.
    pub fn destination(&self, h: UdpHandle) -> Option<Destination> {
        self.sockets.get(&h).map(|r| self.destination_of(r))
    }

    /// Every socket a client holds, and what is known of it.
    pub fn iter(&self) -> impl Iterator<Item = (UdpHandle, Destination)> + '_ {
        self.sockets.iter().map(|(&h, r)| (h, self.destination_of(r)))
    }

    fn destination_of(&self, r: &Receiver) -> Destination {
        let priority = r.own.unwrap_or_else(|| self.clients.get(&r.client).copied().unwrap_or(priority::DEFAULT));
        let boosted = self.is_boosted(r.client);
        Destination { priority, boosted, client: r.client, socket: r.socket, sized: r.sized }
    }

    /// The filter dropped a datagram for socket `h`: for its full queue
    /// (`overflow`), or for its low priority.
    pub fn count_drop(&mut self, h: UdpHandle, overflow: bool) {
        if let Some(r) = self.sockets.get_mut(&h) {
            r.drops[usize::from(overflow)] += 1;
        }
    }

    /// Datagrams the filter dropped for socket `h`: for its low priority,
    /// and for its full queue.
    pub fn filter_drops(&self, h: UdpHandle) -> (u64, u64) {
        self.sockets.get(&h).map_or((0, 0), |r| (r.drops[0], r.drops[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::buf::BufferPool;
    use nagare_core::{Capabilities, Interface, InterfaceConfig};
    use nagare_wire::{EthernetAddress, Ipv4Cidr};
    use std::net::{Ipv4Addr, SocketAddrV4};

    #[test]
    fn a_socket_has_its_own_priority_or_its_clients_until_it_or_its_client_goes() {
        let ip = Ipv4Addr::new(10, 0, 0, 1);
        let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), Ipv4Cidr::new(ip, 24).unwrap());
        let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 16));
        let [a, b, c] = [1, 2, 3].map(|port| iface.udp().bind(SocketAddrV4::new(ip, port)).unwrap());
        let mut r = Receivers::default();
        r.add(a, 7, 1);
        r.add(b, 7, 2);
        r.add(c, 8, 1);
        let at = |priority, boosted| Some((priority, boosted));
        let r_at = |r: &Receivers, h| r.destination(h).map(|d| (d.priority, d.boosted));
        assert_eq!(r_at(&r, a), at(priority::DEFAULT, false), "a client not yet known: the default");
        r.set_client(7, 125);
        r.set_client(8, 110);
        r.set_own(b, Some(101));
        assert_eq!((r_at(&r, a), r_at(&r, b), r_at(&r, c)), (at(125, false), at(101, false), at(110, false)));
        r.set_boosted(7, true);
        assert_eq!((r_at(&r, a), r_at(&r, c)), (at(125, true), at(110, false)));
        r.set_own(b, None);
        assert_eq!(r_at(&r, b), at(125, true));
        r.count_drop(a, false);
        r.count_drop(a, true);
        r.count_drop(a, false);
        assert_eq!((r.filter_drops(a), r.filter_drops(b)), ((2, 1), (0, 0)));
        let d = r.destination(b).unwrap();
        assert_eq!((d.client, d.socket, d.sized), (7, 2, false));
        r.set_sized(b);
        assert!(r.destination(b).unwrap().sized);
        assert_eq!(r.iter().count(), 3);
        // Priorities that change (and only they) make the queues due for
        // fitting to their maxima.
        assert!(r.take_refit(), "options were set");
        assert!(!r.take_refit());
        r.set_client(8, 110);
        assert!(!r.take_refit(), "the same priority");
        r.set_client(8, 111);
        assert!(r.take_refit());
        r.set_client(8, 110);
        assert!(r.take_refit());
        r.refit_later();
        assert!(r.take_refit() && !r.take_refit());
        r.remove(a);
        assert_eq!((r_at(&r, a), r.filter_drops(a)), (None, (0, 0)));
        r.forget_client(7);
        assert_eq!((r_at(&r, b), r_at(&r, c)), (None, at(110, false)));
        r.add(b, 7, 2);
        assert_eq!(r_at(&r, b), at(priority::DEFAULT, false), "nothing of the gone client is left");
    }
}
