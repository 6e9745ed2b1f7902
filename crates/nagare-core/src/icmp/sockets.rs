//! The echo sockets of an interface: the table that holds them and the
//! identifier map that demultiplexes replies and errors to them.

use super::socket::{Echo6Event, EchoEvent, EchoSocket};
use crate::iface::Error;
use crate::socket::{SocketHandle, SocketTable};
use hashbrown::HashMap;

/// Events an echo socket can hold before new ones are dropped.
const ECHO_QUEUE_LIMIT: usize = 1024;

/// Names an ICMP echo socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EchoHandle(SocketHandle);

/// Every ICMP socket of an interface, found by handle or by identifier.
#[derive(Debug, Default)]
pub struct IcmpSockets {
    echo: SocketTable<EchoSocket>,
    idents: HashMap<u16, EchoHandle>,
}

impl IcmpSockets {
    /// An echo socket, to look at.
    pub fn echo_socket(&self, handle: EchoHandle) -> Option<&EchoSocket> {
        self.echo.get(handle.0)
    }

    pub(super) fn echo_socket_mut(&mut self, handle: EchoHandle) -> Option<&mut EchoSocket> {
        self.echo.get_mut(handle.0)
    }

    /// Opens an echo socket with identifier `ident`.
    pub(super) fn open(&mut self, ident: u16) -> Result<EchoHandle, Error> {
        if self.idents.contains_key(&ident) {
            return Err(Error::AddrInUse);
        }
        let handle = EchoHandle(self.echo.insert(EchoSocket::new(ident, ECHO_QUEUE_LIMIT)));
        self.idents.insert(ident, handle);
        Ok(handle)
    }

    /// Removes an echo socket and frees its identifier.
    pub(super) fn close(&mut self, handle: EchoHandle) -> Result<(), Error> {
        let socket = self.echo.remove(handle.0).ok_or(Error::InvalidHandle)?;
        self.idents.remove(&socket.ident);
        Ok(())
    }

    /// Whether an echo socket has identifier `ident`.
    pub(crate) fn has_ident(&self, ident: u16) -> bool {
        self.idents.contains_key(&ident)
    }

    /// Queues `event` on the echo socket with identifier `ident`: `None`
    /// when there is none, `Some(false)` when its queue is full.
    pub(super) fn deliver(&mut self, ident: u16, event: EchoEvent) -> Option<bool> {
        let handle = self.idents.get(&ident).copied()?;
        self.echo.get_mut(handle.0).map(|s| s.push(event))
    }

    /// Queues the ICMPv6 `event` on the echo socket with identifier
    /// `ident`, as [`deliver`](Self::deliver) does.
    pub(crate) fn deliver6(&mut self, ident: u16, event: Echo6Event) -> Option<bool> {
        let handle = self.idents.get(&ident).copied()?;
        self.echo.get_mut(handle.0).map(|s| s.push6(event))
    }
}
