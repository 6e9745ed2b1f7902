//! What TCP sockets are ready for: as a level (`poll(2)`) and as edge
//! events (epoll's `EPOLLET`), each socket listed at most once until its
//! events are taken.

use super::sockets::{TcpHandle, TcpListenerHandle, TcpSocket, TcpSockets};
use crate::iface::Error;
use alloc::vec::Vec;

/// What a TCP socket is ready for, as `poll(2)` would say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness {
    /// A receive call returns data, the end of the stream or an error (for
    /// a listener: [`Tcp::accept`](super::Tcp::accept) returns a
    /// connection).
    pub readable: bool,
    /// A send call accepts bytes now.
    pub writable: bool,
    /// The connection is over (closed, reset or timed out): nothing more
    /// will change.
    pub closed: bool,
}

/// One readiness event: the socket and what it is ready for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpEvent {
    /// Which socket.
    pub socket: TcpSocket,
    /// Its readiness when the events were taken.
    pub readiness: Readiness,
}

impl TcpSockets {
    /// What connection `h` is ready for now.
    pub fn readiness(&self, h: TcpHandle) -> Result<Readiness, Error> {
        let entry = match self.conns.get(h.0) {
            Some(entry) if !entry.released => entry,
            _ => return Err(Error::InvalidHandle),
        };
        let conn = &entry.conn;
        Ok(Readiness { readable: conn.can_recv(), writable: conn.can_send(), closed: conn.is_closed() })
    }

    /// What listener `l` is ready for now (readable: a connection waits
    /// to be accepted).
    pub fn listener_readiness(&self, l: TcpListenerHandle) -> Result<Readiness, Error> {
        let listener = self.listeners.get(l.0).ok_or(Error::InvalidHandle)?;
        Ok(Readiness { readable: !listener.accept_queue.is_empty(), writable: false, closed: false })
    }

    /// How many established connections wait on listener `l` to be
    /// accepted.
    pub fn accept_queue_len(&self, l: TcpListenerHandle) -> Result<usize, Error> {
        Ok(self.listeners.get(l.0).ok_or(Error::InvalidHandle)?.accept_queue.len())
    }

    /// Notes that a connection's readiness may have changed. Connections
    /// the application does not hold (not yet accepted, or released) have
    /// no one to tell.
    pub(super) fn note_event(&mut self, handle: TcpHandle) {
        let Some(entry) = self.conns.get_mut(handle.0) else {
            return;
        };
        if entry.event_pending || entry.released || entry.listener.is_some() {
            return;
        }
        entry.event_pending = true;
        self.events.push(TcpSocket::Connection(handle));
        self.compact_events();
    }

    /// Keeps the event list within the number of live sockets: entries of
    /// sockets forgotten before the application took their events would
    /// otherwise pile up for an application that never takes them.
    fn compact_events(&mut self) {
        let live = self.conns.len() + self.listeners.len();
        if self.events.len() <= 2 * live + 64 {
            return;
        }
        let (conns, listeners) = (&self.conns, &self.listeners);
        self.events.retain(|socket| match socket {
            TcpSocket::Connection(h) => conns.get(h.0).is_some_and(|e| e.event_pending),
            TcpSocket::Listener(l) => listeners.get(l.0).is_some_and(|l| l.event_pending),
        });
    }

    /// Appends to `out` every socket whose readiness may have changed
    /// since the last call, with its readiness now. Sockets closed and
    /// released since are left out.
    pub(super) fn take_events(&mut self, out: &mut Vec<TcpEvent>) {
        let mut events = core::mem::take(&mut self.events);
        for socket in events.drain(..) {
            let readiness = match socket {
                TcpSocket::Connection(h) => {
                    match self.conns.get_mut(h.0) {
                        Some(entry) => entry.event_pending = false,
                        None => continue,
                    }
                    self.readiness(h)
                }
                TcpSocket::Listener(l) => {
                    match self.listeners.get_mut(l.0) {
                        Some(listener) => listener.event_pending = false,
                        None => continue,
                    }
                    self.listener_readiness(l)
                }
            };
            if let Ok(readiness) = readiness {
                out.push(TcpEvent { socket, readiness });
            }
        }
        self.events = events;
    }
}
