//! One client's socket table: the ids the client names its sockets by, the
//! engine handle behind each, and the local port each one holds.
//!
//! Invariant: an id names one engine socket of this client and no other
//! client's; an id is never 0 (a `CONNECT` on socket 0 asks for a new
//! connection). A socket's local port is registered with steering while,
//! and only while, the socket is in the table: claimed when the socket
//! gets one, unbound when the socket leaves ([`ClientSockets::remove`],
//! [`ClientSockets::drain`]). Its memory charge (`crate::memory`) goes
//! with it the same way.
//!
//! A request finds the socket it names with one lookup of the kind it
//! needs ([`ClientSockets::udp`], [`ClientSockets::tcp`], ...): no such id
//! is `EBADF`, a socket of another kind `EOPNOTSUPP` (`EINVAL` for an
//! accept, as `accept(2)` on a socket that does not listen).

use crate::memory::Memory;
use crate::parked::Events;
use crate::steering::Steering;
use crate::wakes::Wakes;
use hashbrown::HashMap;
use nagare_core::iface::Error as EngineError;
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{EchoHandle, Instant, Interface, UdpHandle};
use std::rc::Rc;

/// A socket of one client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Sock {
    Udp(UdpHandle),
    Tcp(TcpHandle),
    Listener(TcpListenerHandle),
    Echo(EchoHandle),
}

impl Sock {
    /// Closes it as the client's `CLOSE` asks: a connection sends what it
    /// has queued and its FIN.
    pub fn close(self, iface: &mut Interface, now: Instant) -> Result<(), EngineError> {
        match self {
            Sock::Udp(h) => iface.udp().close(h),
            Sock::Tcp(h) => iface.tcp().close(h, now),
            Sock::Listener(l) => iface.tcp().listener_close(l, now),
            Sock::Echo(h) => iface.icmp().echo_close(h),
        }
    }

    /// Lets it go with its client, which can no longer read or write it: a
    /// connection is reset.
    pub fn reset(self, iface: &mut Interface, now: Instant) -> Result<(), EngineError> {
        match self {
            Sock::Tcp(h) => iface.tcp().abort(h, now),
            other => other.close(iface, now),
        }
    }
}

/// How many sockets of each kind a client holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SocketCounts {
    pub tcp: usize,
    pub listeners: usize,
    pub udp: usize,
    pub echo: usize,
}

/// What one socket's receives delivered to its client, and what the
/// client says it took of that (payload bytes, each since the socket
/// opened).
#[derive(Clone, Copy, Debug, Default)]
struct Reads {
    delivered: u64,
    consumed: u64,
}

/// The engine's last lists of events, of any client's sockets
/// (`crate::wakes`).
impl Events for ClientSockets {
    fn listed(&self) -> usize {
        self.wakes.listed()
    }

    fn each_listed(&self, f: &mut dyn FnMut(Sock)) {
        self.wakes.each_listed(f)
    }

    fn had_event(&self, sock: Sock) -> bool {
        self.wakes.had_event(sock)
    }
}

/// One client's sockets, by the ids it names them by.
pub(crate) struct ClientSockets {
    /// The client's key, which steering knows its ports by.
    key: u64,
    sockets: HashMap<u32, Sock>,
    /// The local port of each socket that has one: (protocol, port).
    ports: HashMap<u32, (u8, u16)>,
    /// The priority of each socket whose own option sets one.
    priorities: HashMap<u32, u8>,
    /// What each socket's receives delivered and the client took of it.
    reads: HashMap<u32, Reads>,
    next: u32,
    /// The accounts its sockets are charged in.
    memory: Rc<Memory>,
    /// Where the clients holding each socket are found by its events.
    wakes: Rc<Wakes>,
}

impl ClientSockets {
    /// An empty table for client `key`, whose sockets are charged in
    /// `memory` and indexed in `wakes`.
    pub fn new(key: u64, memory: Rc<Memory>, wakes: Rc<Wakes>) -> ClientSockets {
        ClientSockets {
            key,
            sockets: HashMap::new(),
            ports: HashMap::new(),
            priorities: HashMap::new(),
            reads: HashMap::new(),
            next: 1,
            memory,
            wakes,
        }
    }

    /// Sockets held.
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    /// Socket `id`, of any kind.
    pub fn get(&self, id: u32) -> Option<Sock> {
        self.sockets.get(&id).copied()
    }

    /// Socket `id` if `pick` takes its kind: `EBADF` if there is no such
    /// socket, `wrong` if it is of another kind.
    fn of_kind<T>(&self, id: u32, wrong: i32, pick: impl FnOnce(Sock) -> Option<T>) -> Result<T, i32> {
        match self.sockets.get(&id) {
            Some(s) => pick(*s).ok_or(wrong),
            None => Err(libc::EBADF),
        }
    }

    /// UDP socket `id`.
    pub fn udp(&self, id: u32) -> Result<UdpHandle, i32> {
        self.of_kind(id, libc::EOPNOTSUPP, |s| if let Sock::Udp(h) = s { Some(h) } else { None })
    }

    /// TCP connection `id`.
    pub fn tcp(&self, id: u32) -> Result<TcpHandle, i32> {
        self.of_kind(id, libc::EOPNOTSUPP, |s| if let Sock::Tcp(h) = s { Some(h) } else { None })
    }

    /// TCP listener `id`.
    pub fn listener(&self, id: u32) -> Result<TcpListenerHandle, i32> {
        self.of_kind(id, libc::EINVAL, |s| if let Sock::Listener(l) = s { Some(l) } else { None })
    }

    /// Echo (ping) socket `id`.
    pub fn echo(&self, id: u32) -> Result<EchoHandle, i32> {
        self.of_kind(id, libc::EOPNOTSUPP, |s| if let Sock::Echo(h) = s { Some(h) } else { None })
    }

    /// `EMFILE` if the table holds `max` sockets already.
    pub fn room(&self, max: usize) -> Result<(), i32> {
        if self.sockets.len() >= max {
            return Err(libc::EMFILE);
        }
        Ok(())
    }

    /// Adds `s` under a new id, if the table holds fewer than `max`.
    pub fn add(&mut self, s: Sock, max: usize) -> Result<u32, i32> {
        self.room(max)?;
        // Fewer than `max` ids are taken, so a free one comes soon.
        loop {
            let id = self.next;
            self.next = self.next.checked_add(1).unwrap_or(1);
            if id != 0 && !self.sockets.contains_key(&id) {
                self.sockets.insert(id, s);
                self.wakes.watch(s, self.key);
                return Ok(id);
            }
        }
    }

    /// Socket `id` is on local `port` of `proto`: that port's frames may be
    /// steered into this client's region.
    pub fn claim_port(&mut self, steering: &Steering, id: u32, proto: u8, port: u16) {
        if port != 0 && self.ports.insert(id, (proto, port)).is_none() {
            steering.bind(proto, port, self.key);
        }
    }

    /// The local port socket `id` holds, if any: (protocol, port).
    pub fn port(&self, id: u32) -> Option<(u8, u16)> {
        self.ports.get(&id).copied()
    }

    /// Sets socket `id`'s own priority (`None`: its client's again).
    pub fn set_priority(&mut self, id: u32, priority: Option<u8>) {
        match priority {
            Some(p) if self.sockets.contains_key(&id) => {
                self.priorities.insert(id, p);
            }
            _ => {
                self.priorities.remove(&id);
            }
        }
    }

    /// Socket `id`'s own priority, if its option sets one.
    pub fn priority(&self, id: u32) -> Option<u8> {
        self.priorities.get(&id).copied()
    }

    /// Socket `id`'s receive completed with `bytes` of payload.
    pub fn note_delivered(&mut self, id: u32, bytes: u64) {
        if self.sockets.contains_key(&id) {
            let r = self.reads.entry(id).or_default();
            r.delivered = r.delivered.wrapping_add(bytes);
        }
    }

    /// The client says it has taken `bytes` of socket `id`'s payload so
    /// far (a receive's `aux[0]`); a lower count, in a receive another of
    /// its threads posted first and netd took later, does not take it
    /// back.
    pub fn note_consumed(&mut self, id: u32, bytes: u64) {
        if self.sockets.contains_key(&id) {
            let r = self.reads.entry(id).or_default();
            r.consumed = r.consumed.max(bytes);
        }
    }

    /// Socket `id`'s receiving side is shut: the client holds nothing of
    /// it unread from now on.
    pub fn note_read_shut(&mut self, id: u32) {
        if let Some(r) = self.reads.get_mut(&id) {
            r.consumed = r.consumed.max(r.delivered);
        }
    }

    /// The payload bytes socket `id`'s receives delivered that the client
    /// had not taken when it last posted one: what its application has
    /// yet to read, give or take what it read since.
    pub fn unread_in_client(&self, id: u32) -> u64 {
        self.reads.get(&id).map_or(0, |r| r.delivered.saturating_sub(r.consumed))
    }

    /// The accounts its sockets are charged in.
    pub fn memory(&self) -> Rc<Memory> {
        Rc::clone(&self.memory)
    }

    /// Takes socket `id` out of the table, its port out of steering and
    /// its charge out of its client's account.
    pub fn remove(&mut self, steering: &Steering, id: u32) -> Option<Sock> {
        self.priorities.remove(&id);
        self.reads.remove(&id);
        if let Some((proto, port)) = self.ports.remove(&id) {
            steering.unbind(proto, port);
        }
        self.memory.release(self.key, id);
        let sock = self.sockets.remove(&id)?;
        self.wakes.unwatch(sock, self.key);
        Some(sock)
    }

    /// Takes every socket out, with its id (every port out of steering and
    /// every charge out of the account first).
    pub fn drain(&mut self, steering: &Steering) -> impl Iterator<Item = (u32, Sock)> + '_ {
        self.priorities.clear();
        self.reads.clear();
        for (_, (proto, port)) in self.ports.drain() {
            steering.unbind(proto, port);
        }
        self.memory.release_all(self.key);
        for &sock in self.sockets.values() {
            self.wakes.unwatch(sock, self.key);
        }
        self.sockets.drain()
    }

    /// Every socket, by id, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, Sock)> + '_ {
        self.sockets.iter().map(|(&id, &s)| (id, s))
    }

    /// How many of each kind.
    pub fn counts(&self) -> SocketCounts {
        let mut c = SocketCounts::default();
        for s in self.sockets.values() {
            match s {
                Sock::Tcp(_) => c.tcp += 1,
                Sock::Listener(_) => c.listeners += 1,
                Sock::Udp(_) => c.udp += 1,
                Sock::Echo(_) => c.echo += 1,
            }
        }
        c
    }
}
