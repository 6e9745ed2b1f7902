//! Exclusive wake-ups on a listener several clients hold: what the
//! kernel's `EPOLLEXCLUSIVE` gives a server whose worker processes all
//! watch one listening socket. Each worker sleeps in its `epoll_wait` with
//! a `POLL` of netd waiting on the shared listener (whose readiness is
//! netd's alone); answered for every connection, each such poll would wake
//! its worker, and all workers but one would find nothing to accept.
//!
//! The invariant: for each listener, the wake-ups out are at most the
//! connections its accept queue held at the last look of a waiting
//! exclusive poll, one per client. A waiting poll whose entry asks for
//! `EXCLUSIVE` gets the listener readable only with a wake-up of its
//! client's own, handed out while the queue holds more connections than
//! wake-ups are out. A wake-up is spent when a connection is accepted from
//! the listener (by any holder: the woken one may lose the race to another
//! that looked on its own), when its client waits on the listener again,
//! when the queue shrinks below the wake-ups out (a queued connection
//! reset or timed out: the oldest go), when its client lets the listener
//! go or goes itself, or when the listener closes. As with the kernel's, a
//! woken client that does not accept leaves the connection waiting until
//! another comes, which wakes the next one, or until a holder's loop looks
//! on its own (a poll that does not wait sees the listener as it is). A
//! client's poll is answered whether or not its thread sleeps by then: one
//! made just before a sleep (the preload layer's) is often looked at
//! first, and a wake-up held back from it would wait for a turn of netd
//! that nothing asks for. The wake-ups are a client's, not a request's: a
//! client's several waits on the listener (threads) wake together.

use hashbrown::HashMap;
use nagare_core::tcp::TcpListenerHandle;

/// The wake-ups out, by listener: the clients they went to, oldest first.
/// Each list holds a client at most once and is no longer than its
/// listener's accept queue at the last look (the invariant above), and a
/// listener with none has no entry.
#[derive(Default)]
pub(crate) struct ExclusiveWakes {
    handed: HashMap<TcpListenerHandle, Vec<u64>>,
}

impl ExclusiveWakes {
    /// Whether a waiting poll of client `key` is to be answered for
    /// listener `l`, whose accept queue holds `queued` connections; if so,
    /// the wake-up is handed to it. A wake-up the client held already is
    /// spent first (it waits again), and so are the oldest past `queued`.
    pub fn take(&mut self, l: TcpListenerHandle, key: u64, queued: usize) -> bool {
        if queued == 0 {
            // Nothing to wake for, and none out: the common look.
            self.handed.remove(&l);
            return false;
        }
        let list = self.handed.entry(l).or_default();
        list.retain(|&k| k != key);
        if list.len() > queued {
            let past = list.len() - queued;
            list.drain(..past);
        }
        let free = list.len() < queued;
        if free {
            list.push(key);
        } else if list.is_empty() {
            self.handed.remove(&l);
        }
        free
    }

    /// A connection was accepted from listener `l` by client `key`: one
    /// wake-up is spent, that client's if it holds one, else the oldest.
    pub fn accepted(&mut self, l: TcpListenerHandle, key: u64) {
        let Some(list) = self.handed.get_mut(&l) else { return };
        let at = list.iter().position(|&k| k == key).unwrap_or(0);
        if at < list.len() {
            list.remove(at);
        }
        if list.is_empty() {
            self.handed.remove(&l);
        }
    }

    /// Client `key` lets listener `l` go: its wake-up there is spent.
    pub fn let_go(&mut self, l: TcpListenerHandle, key: u64) {
        let Some(list) = self.handed.get_mut(&l) else { return };
        list.retain(|&k| k != key);
        if list.is_empty() {
            self.handed.remove(&l);
        }
    }

    /// Client `key` is gone: its wake-ups are spent.
    pub fn forget_client(&mut self, key: u64) {
        self.handed.retain(|_, list| {
            list.retain(|&k| k != key);
            !list.is_empty()
        });
    }

    /// Listener `l` is closed: its wake-ups are spent.
    pub fn forget_listener(&mut self, l: TcpListenerHandle) {
        self.handed.remove(&l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::buf::BufferPool;
    use nagare_core::{Capabilities, Interface, InterfaceConfig};
    use nagare_wire::{EthernetAddress, Ipv4Cidr};
    use std::net::{Ipv4Addr, SocketAddrV4};

    /// Two listeners' handles, from an engine of their own.
    fn listeners() -> (TcpListenerHandle, TcpListenerHandle) {
        let ip = Ipv4Addr::new(10, 0, 0, 1);
        let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), Ipv4Cidr::new(ip, 24).expect("prefix"));
        let mut iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 16));
        let a = iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).expect("listen");
        let b = iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 81), 8).expect("listen");
        (a, b)
    }

    #[test]
    fn one_connection_wakes_one_poll() {
        let (l, other) = listeners();
        let mut w = ExclusiveWakes::default();
        assert!(!w.take(l, 1, 0), "nothing queued: nobody is woken");
        assert!(w.take(l, 1, 1), "the first waiting poll takes the connection's wake-up");
        assert!(!w.take(l, 2, 1), "the second does not: one wake-up a connection");
        assert!(w.take(other, 2, 1), "another listener's are its own");
        assert!(w.take(l, 2, 2), "a second connection wakes the second poll");
        assert!(!w.take(l, 3, 2));
    }

    #[test]
    fn an_accept_or_a_wait_again_spends_a_wake_up() {
        let (l, _) = listeners();
        let mut w = ExclusiveWakes::default();
        assert!(w.take(l, 1, 1));
        // Client 2 accepted on its own: client 1's wake-up is spent, and a
        // later connection wakes a poll again.
        w.accepted(l, 2);
        assert!(w.take(l, 3, 1));
        assert!(!w.take(l, 4, 1), "client 3 holds the wake-up");
        // Client 3 waits again without accepting: its wake-up is spent,
        // and it takes the connection's again, ahead of no one.
        assert!(w.take(l, 3, 1));
        assert!(!w.take(l, 4, 1));
        // The accepting client's own wake-up is the one spent.
        assert!(w.take(l, 5, 2));
        w.accepted(l, 5);
        assert!(!w.take(l, 6, 1), "client 3's still counts");
    }

    #[test]
    fn a_shrunk_queue_spends_the_oldest_wake_ups() {
        let (l, _) = listeners();
        let mut w = ExclusiveWakes::default();
        assert!(w.take(l, 2, 1));
        assert!(w.take(l, 3, 2));
        // Both connections went (reset in the queue, never accepted): the
        // wake-ups for them are spent, the oldest first.
        assert!(!w.take(l, 4, 1), "one connection left, one wake-up out");
        assert!(!w.take(l, 2, 1), "client 2's went first: client 3 holds the one left");
        assert!(w.take(l, 3, 1), "client 3 waits again: it takes it again");
        assert!(!w.take(l, 4, 0), "none left");
        assert!(w.handed.is_empty(), "an empty queue keeps no wake-up");
    }

    #[test]
    fn a_holder_that_lets_go_spends_its_wake_up() {
        let (l, _) = listeners();
        let mut w = ExclusiveWakes::default();
        assert!(w.take(l, 1, 1));
        assert!(!w.take(l, 2, 1));
        w.let_go(l, 1);
        assert!(w.take(l, 2, 1), "client 1 closed its copy: the connection wakes client 2");
        w.let_go(l, 2);
        assert!(w.handed.is_empty());
    }

    #[test]
    fn a_gone_client_or_a_closed_listener_spends_its_wake_ups() {
        let (l, other) = listeners();
        let mut w = ExclusiveWakes::default();
        assert!(w.take(l, 1, 1));
        assert!(w.take(other, 1, 1));
        assert!(w.take(other, 2, 2));
        w.forget_client(1);
        assert!(w.take(l, 2, 1), "client 1's wake-up went with it");
        assert!(w.take(other, 3, 2), "on both listeners");
        assert!(!w.take(other, 4, 2), "client 2's still counts");
        w.forget_listener(other);
        assert!(w.take(other, 4, 1));
        w.forget_client(2);
        w.forget_client(4);
        w.accepted(other, 9);
        w.forget_client(3);
        assert!(w.handed.is_empty(), "no entry is kept for a listener with none out: {}", w.handed.len());
    }
}
