//! Which clients have a socket something happened to: the engine lists
//! the sockets whose state may have changed since it was last asked (TCP
//! connections and listeners, UDP sockets a datagram or an error came to),
//! and this index names the clients holding each (more than one for a
//! shared socket). A client none of whose sockets is listed has nothing
//! new for the receives, accepts, sends and connects it has waiting, and
//! its turn leaves them alone (`requests::serve_client`), so a turn costs
//! what the busy sockets cost, not what every idle one does.
//!
//! The sockets the engine listed last are kept until the next list
//! ([`Wakes::had_event`]): of a client's waiting receives and accepts
//! parked on their sockets (`Pending::parked`), a turn runs again only
//! those whose own socket is among them or was named by a close, a
//! shutdown or a connect (and all of them at housekeeping), so that a
//! busy client's turn does not
//! cost what each of its idle sockets' receives does either.
//!
//! Invariant: every socket a client's table holds that the engine lists
//! events for (all but echo sockets) is indexed under that client's key
//! from when it enters the table until it leaves (`ClientSockets`).

use crate::sockets::Sock;
use hashbrown::{HashMap, HashSet};
use nagare_core::tcp::{TcpEvent, TcpHandle, TcpListenerHandle, TcpSocket};
use nagare_core::{Interface, UdpHandle};
use std::cell::RefCell;

/// An engine socket events are listed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Watched {
    Tcp(TcpHandle),
    Listener(TcpListenerHandle),
    Udp(UdpHandle),
}

impl Watched {
    fn of(sock: Sock) -> Option<Watched> {
        match sock {
            Sock::Tcp(h) => Some(Watched::Tcp(h)),
            Sock::Listener(l) => Some(Watched::Listener(l)),
            Sock::Udp(h) => Some(Watched::Udp(h)),
            Sock::Echo(_) => None,
        }
    }

    fn sock(self) -> Sock {
        match self {
            Watched::Tcp(h) => Sock::Tcp(h),
            Watched::Listener(l) => Sock::Listener(l),
            Watched::Udp(h) => Sock::Udp(h),
        }
    }
}

/// The clients holding each socket events are listed for.
#[derive(Default)]
pub(crate) struct Wakes {
    /// Each client holding the socket, with the ids it holds it by (a
    /// client may hold one socket under two ids: shared, then adopted).
    holders: RefCell<HashMap<Watched, Vec<(u64, u32)>>>,
    /// Scratch for the engine's lists, kept between turns.
    tcp: RefCell<Vec<TcpEvent>>,
    udp: RefCell<Vec<UdpHandle>>,
    /// The sockets of the engine's last lists.
    listed: RefCell<HashSet<Watched>>,
}

impl Wakes {
    /// Client `key` holds `sock` under one more id from now on.
    pub fn watch(&self, sock: Sock, key: u64) {
        let Some(w) = Watched::of(sock) else { return };
        let mut holders = self.holders.borrow_mut();
        let keys = holders.entry(w).or_default();
        match keys.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ids)) => *ids += 1,
            None => keys.push((key, 1)),
        }
    }

    /// Client `key` holds `sock` under one id fewer.
    pub fn unwatch(&self, sock: Sock, key: u64) {
        let Some(w) = Watched::of(sock) else { return };
        let mut holders = self.holders.borrow_mut();
        if let Some(keys) = holders.get_mut(&w) {
            if let Some((_, ids)) = keys.iter_mut().find(|(k, _)| *k == key) {
                *ids = ids.saturating_sub(1);
            }
            keys.retain(|&(_, ids)| ids > 0);
            if keys.is_empty() {
                holders.remove(&w);
            }
        }
    }

    /// Takes the engine's events and adds to `woken` the clients holding
    /// a socket they list.
    pub fn take(&self, iface: &mut Interface, woken: &mut HashSet<u64>) {
        let (mut tcp, mut udp) = (self.tcp.borrow_mut(), self.udp.borrow_mut());
        iface.tcp().take_events(&mut tcp);
        iface.udp().take_events(&mut udp);
        let holders = self.holders.borrow();
        let mut listed = self.listed.borrow_mut();
        listed.clear();
        let watched = tcp
            .drain(..)
            .map(|e| match e.socket {
                TcpSocket::Connection(h) => Watched::Tcp(h),
                TcpSocket::Listener(l) => Watched::Listener(l),
            })
            .chain(udp.drain(..).map(Watched::Udp));
        for w in watched {
            if let Some(keys) = holders.get(&w) {
                woken.extend(keys.iter().map(|&(k, _)| k));
            }
            listed.insert(w);
        }
    }

    /// Whether the engine's last lists ([`Wakes::take`]) named `sock`.
    pub fn had_event(&self, sock: Sock) -> bool {
        Watched::of(sock).is_some_and(|w| self.listed.borrow().contains(&w))
    }

    /// How many sockets the engine's last lists named.
    pub fn listed(&self) -> usize {
        self.listed.borrow().len()
    }

    /// Calls `f` with each socket the engine's last lists named.
    pub fn each_listed(&self, f: &mut dyn FnMut(Sock)) {
        self.listed.borrow().iter().for_each(|w| f(w.sock()));
    }

    /// Sockets indexed (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.holders.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    const NOW: nagare_core::Instant = nagare_core::Instant::from_secs(2);

    #[test]
    fn an_event_wakes_every_holder_of_its_socket_and_no_other_client() {
        let (mut iface, busy) = crate::packetflow::queued::socket_holding(3);
        let idle = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 10)).unwrap();
        let wakes = Wakes::default();
        wakes.watch(Sock::Udp(busy), 7);
        wakes.watch(Sock::Udp(busy), 9);
        wakes.watch(Sock::Udp(idle), 8);
        assert_eq!(wakes.len(), 2);
        let mut woken = HashSet::new();
        wakes.take(&mut iface, &mut woken);
        assert_eq!(woken, HashSet::from([7, 9]), "the holders of the socket the datagrams came to");
        assert!(wakes.had_event(Sock::Udp(busy)) && !wakes.had_event(Sock::Udp(idle)));
        let mut listed = Vec::new();
        wakes.each_listed(&mut |s| listed.push(s));
        assert_eq!((wakes.listed(), listed.as_slice()), (1, &[Sock::Udp(busy)][..]));
        woken.clear();
        wakes.take(&mut iface, &mut woken);
        assert!(woken.is_empty(), "nothing new since");
        assert!(!wakes.had_event(Sock::Udp(busy)), "the last list named nothing");
        assert_eq!(wakes.listed(), 0);
        wakes.unwatch(Sock::Udp(busy), 9);
        wakes.unwatch(Sock::Udp(idle), 8);
        assert_eq!(wakes.len(), 1);
        // A client holding the socket under two ids is woken until it
        // lets go of both.
        wakes.watch(Sock::Udp(busy), 7);
        wakes.unwatch(Sock::Udp(busy), 7);
        iface.udp().send_to(idle, &[1; 10], SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9), NOW).unwrap();
        iface.poll(NOW);
        wakes.take(&mut iface, &mut woken);
        assert_eq!(woken, HashSet::from([7]));
        wakes.unwatch(Sock::Udp(busy), 7);
        assert_eq!(wakes.len(), 0, "a socket nobody holds leaves the index");
    }
}
