//! The TCP socket calls.

use super::config::TcpConfig;
use super::connection::{Connection, State, TcpError};
use super::events::TcpEvent;
use super::isn::initial_sequence_number;
use super::path_mtu::cached_path_mss;
use super::sockets::{local_mss, FourTuple, Listener, TcpHandle, TcpListenerHandle};
use crate::buf::PacketBuf;
use crate::iface::{Error, Interface, HEADROOM};
use crate::time::Instant;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr, SocketAddrV6};
use core::time::Duration;

/// The TCP socket calls of one interface, borrowed from it
/// ([`Interface::tcp`]) for as long as the calls take. To look at sockets
/// without changing anything (state, readiness, counters), see
/// [`Interface::tcp_ref`].
#[derive(Debug)]
pub struct Tcp<'a> {
    iface: &'a mut Interface,
}

fn connection_error(e: TcpError) -> Error {
    match e {
        TcpError::Refused => Error::ConnectionRefused,
        TcpError::Reset => Error::ConnectionReset,
        TcpError::TimedOut => Error::TimedOut,
        TcpError::HostUnreachable => Error::HostUnreachable,
    }
}

impl<'a> Tcp<'a> {
    pub(crate) fn new(iface: &'a mut Interface) -> Self {
        Tcp { iface }
    }

    /// Unproven SYNs per second, arriving at listeners whose SYN queue is
    /// full, above which the SYN guard engages
    /// ([`DEFAULT_SYN_BUDGET`](super::syn_guard::DEFAULT_SYN_BUDGET)
    /// unless set; 0: never).
    pub fn set_syn_budget(&mut self, per_second: u32) {
        self.iface.tcp.syn_guard.set_budget(per_second);
    }

    /// Says whether the device applies the current
    /// [`syn_filter`](super::TcpSockets::syn_filter) before frames reach
    /// the engine; while it does, the engine admits every SYN it sees,
    /// and while it does not, the engine draws itself.
    pub fn set_syn_filter_applied(&mut self, applied: bool) {
        self.iface.tcp.syn_guard.set_device_applies(applied);
    }

    /// Connections held at most, in every state: past it a SYN to a
    /// listener is dropped unanswered (counted in
    /// `drop_tcp_connection_limit`) and [`connect`](Self::connect) fails
    /// with [`Error::NoBuffer`]. Unlimited unless set.
    pub fn set_max_connections(&mut self, max: usize) {
        self.iface.tcp.max_connections = max;
    }

    /// Settings new TCP sockets start with, lent for as long as the
    /// interface is (this takes the API object).
    pub fn defaults_mut(self) -> &'a mut TcpConfig {
        &mut self.iface.tcp.defaults
    }

    /// Listens on `local` (a local address: ours or one of 127.0.0.0/8;
    /// 0.0.0.0 or `::`: every local address of the family), with an accept
    /// queue of `backlog` connections; when as many handshakes are half
    /// open, further SYNs are answered with SYN cookies. A listener on `::`
    /// takes IPv4 connections to its port as well (dual stack, Linux's
    /// default); [`listen_v6_only`](Self::listen_v6_only) makes one that
    /// does not. One listener per port and family: a dual-stack one holds
    /// its port in both.
    pub fn listen(&mut self, local: impl Into<SocketAddr>, backlog: usize) -> Result<TcpListenerHandle, Error> {
        self.open_listener(local.into(), backlog, false)
    }

    /// Listens on `local` as [`listen`](Self::listen) does, for IPv6
    /// connections only (`IPV6_V6ONLY`): an IPv4 listener may hold the
    /// same port.
    pub fn listen_v6_only(&mut self, local: SocketAddrV6, backlog: usize) -> Result<TcpListenerHandle, Error> {
        self.open_listener(local.into(), backlog, true)
    }

    fn open_listener(&mut self, local: SocketAddr, backlog: usize, v6_only: bool) -> Result<TcpListenerHandle, Error> {
        let iface = &mut *self.iface;
        let ours = match local.ip() {
            IpAddr::V4(ip) => iface.is_local(ip),
            IpAddr::V6(ip) => iface.ipv6_address_state(ip).is_some() || iface.is_local6(ip),
        };
        if !local.ip().is_unspecified() && !ours {
            return Err(Error::AddrNotAvailable);
        }
        if local.port() == 0 {
            return Err(Error::Unaddressable);
        }
        if iface.tcp.listen_conflicts(local, v6_only) {
            return Err(Error::AddrInUse);
        }
        let listener = Listener {
            local,
            v6_only,
            backlog: backlog.max(1),
            half_open: 0,
            accept_queue: VecDeque::new(),
            config: iface.tcp.socket_config(&iface.caps),
            cookies_until: None,
            event_pending: false,
        };
        let handle = TcpListenerHandle(iface.tcp.listeners.insert(listener));
        match local {
            SocketAddr::V4(_) => iface.tcp.by_port.insert(local.port(), handle),
            SocketAddr::V6(_) => iface.tcp.by_port6.insert(local.port(), handle),
        };
        Ok(handle)
    }

    /// Takes the next established connection from a listener.
    pub fn accept(&mut self, l: TcpListenerHandle) -> Result<Option<TcpHandle>, Error> {
        let tcp = &mut self.iface.tcp;
        let listener = tcp.listeners.get_mut(l.0).ok_or(Error::InvalidHandle)?;
        let Some(handle) = listener.accept_queue.pop_front() else {
            return Ok(None);
        };
        if let Some(entry) = tcp.conns.get_mut(handle.0) {
            entry.listener = None;
        }
        // As epoll reports a socket's readiness when it is added: data that
        // came with the handshake must not wait for a later edge.
        tcp.note_event(handle);
        Ok(Some(handle))
    }

    /// Stops listening; connections not yet accepted are reset.
    pub fn listener_close(&mut self, l: TcpListenerHandle, now: Instant) -> Result<(), Error> {
        let iface = &mut *self.iface;
        let listener = iface.tcp.listeners.remove(l.0).ok_or(Error::InvalidHandle)?;
        let by_port = if listener.local.is_ipv4() { &mut iface.tcp.by_port } else { &mut iface.tcp.by_port6 };
        if by_port.get(&listener.local.port()) == Some(&l) {
            by_port.remove(&listener.local.port());
        }
        let pending: Vec<TcpHandle> =
            iface.tcp.conns_with_listener(l).into_iter().chain(listener.accept_queue.iter().copied()).collect();
        for handle in pending {
            if let Some(entry) = iface.tcp.conns.get_mut(handle.0) {
                entry.listener = None;
                entry.released = true;
                entry.conn.abort();
            }
            iface.tcp_run(handle, now);
        }
        Ok(())
    }

    /// Opens a connection to `remote` from `local_port` (0: ephemeral),
    /// over the family of `remote`; an IPv4-mapped IPv6 address
    /// (`::ffff:a.b.c.d`) is its IPv4 address. The source is an address of
    /// ours that reaches `remote` (over IPv6: a preferred one of its
    /// scope).
    pub fn connect(
        &mut self,
        remote: impl Into<SocketAddr>,
        local_port: u16,
        now: Instant,
    ) -> Result<TcpHandle, Error> {
        let iface = &mut *self.iface;
        let remote = unmapped(remote.into());
        let unaddressable = match remote.ip() {
            IpAddr::V4(ip) => ip.is_unspecified() || ip.is_multicast() || iface.is_broadcast(ip),
            // Local (`::1`, or ours past duplicate address detection) is
            // delivered here; an address of ours not yet usable is not.
            IpAddr::V6(ip) => {
                ip.is_unspecified()
                    || ip.is_multicast()
                    || (iface.ipv6_address_state(ip).is_some() && !iface.is_local6(ip))
            }
        };
        if remote.port() == 0 || unaddressable {
            return Err(Error::Unaddressable);
        }
        if iface.tcp.at_connection_limit() {
            return Err(Error::NoBuffer);
        }
        let src = match remote.ip() {
            IpAddr::V4(ip) => iface.source_for(ip).map(IpAddr::V4),
            IpAddr::V6(ip) => iface.ipv6_source_for(ip).map(IpAddr::V6),
        }
        .ok_or(Error::NoRoute)?;
        let port = match local_port {
            0 => iface.tcp.pick_port(src, remote)?,
            p => {
                if iface.tcp.by_tuple.contains_key(&FourTuple(SocketAddr::new(src, p), remote)) {
                    return Err(Error::AddrInUse);
                }
                p
            }
        };
        let local = SocketAddr::new(src, port);
        let iss = initial_sequence_number(iface.tcp.key, local, remote, now);
        let config = iface.tcp.socket_config(&iface.caps);
        let mut conn = Connection::connect(config, local, remote, local_mss(iface, remote), iss, now);
        if let Some(mss) = cached_path_mss(iface, remote, now) {
            conn.path_mss_lowered(mss);
        }
        conn.set_timestamp_offset(iface.tcp.timestamp_offset(local, remote));
        let handle = iface.tcp.insert(conn, None);
        iface.counters.tcp_connects += 1;
        iface.tcp_run(handle, now);
        Ok(handle)
    }

    /// Turns Nagle's algorithm off (`true`) or on, like TCP_NODELAY.
    pub fn set_nodelay(&mut self, h: TcpHandle, nodelay: bool) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.set_nagle(!nodelay);
        Ok(())
    }

    /// Makes a close of the connection reset it, what was queued dropped
    /// (`SO_LINGER` with a zero time), or (`false`) send it and a FIN.
    pub fn set_reset_on_close(&mut self, h: TcpHandle, reset: bool) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.set_reset_on_close(reset);
        Ok(())
    }

    /// Sets a connection's send buffer (SO_SNDBUF): it grows at once and
    /// shrinks no lower than the bytes queued. Returns the size in force.
    pub fn set_send_buffer(&mut self, h: TcpHandle, bytes: usize, now: Instant) -> Result<usize, Error> {
        let size = self.iface.tcp.entry_mut(h)?.conn.set_send_buffer(bytes);
        self.iface.tcp_run(h, now);
        Ok(size)
    }

    /// Sets a connection's receive buffer (SO_RCVBUF), which bounds the
    /// window it offers: it grows at once (the wider window is advertised)
    /// and shrinks no lower than what is held (a window already offered
    /// closes as data fills it; its edge never moves left). The one
    /// place an application sizes the receive buffer: an explicit size is
    /// the application's choice from then on. Returns the size in force.
    pub fn set_recv_buffer(&mut self, h: TcpHandle, bytes: usize, now: Instant) -> Result<usize, Error> {
        let size = self.iface.tcp.entry_mut(h)?.conn.set_recv_buffer(bytes);
        self.iface.tcp_run(h, now);
        Ok(size)
    }

    /// Starts a new connection's send and receive buffers smaller than
    /// its configuration said, autotuning still on within ceilings at the
    /// new sizes (for an owner that grants buffers from a budget; see
    /// [`Connection::start_buffers`]). Returns the sizes in force.
    pub fn start_buffers(
        &mut self,
        h: TcpHandle,
        send: usize,
        recv: usize,
        now: Instant,
    ) -> Result<(usize, usize), Error> {
        let sizes = self.iface.tcp.entry_mut(h)?.conn.start_buffers(send, recv);
        self.iface.tcp_run(h, now);
        Ok(sizes)
    }

    /// Moves how far autotuning may grow a connection's receive buffer
    /// (for an owner that charges buffers to someone and grants growth as
    /// far as their budget goes): a growth held back happens at once, its
    /// wider window offered. Never below the buffer, never past the
    /// largest its window scale can offer; a buffer whose size was set
    /// (SO_RCVBUF) keeps it. Returns the ceiling in force. A ceiling that
    /// moves nothing (the one in force, or one the window scale caps)
    /// leaves the connection as it was: no event is listed for it.
    pub fn set_recv_buffer_ceiling(&mut self, h: TcpHandle, bytes: usize, now: Instant) -> Result<usize, Error> {
        let conn = &mut self.iface.tcp.entry_mut(h)?.conn;
        let before = (conn.recv_buffer_ceiling(), conn.recv_buffer());
        let ceiling = conn.set_recv_buffer_ceiling(bytes);
        if (ceiling, conn.recv_buffer()) != before {
            self.iface.tcp_run(h, now);
        }
        Ok(ceiling)
    }

    /// Moves how far autotuning may grow a connection's send buffer (for
    /// an owner that charges buffers to someone and grants growth as far
    /// as their budget goes): a growth held back happens at once. Never
    /// below the buffer; a buffer whose size was set (SO_SNDBUF) keeps it.
    /// Returns the ceiling in force. A ceiling that moves nothing leaves
    /// the connection as it was: no event is listed for it.
    pub fn set_send_buffer_ceiling(&mut self, h: TcpHandle, bytes: usize, now: Instant) -> Result<usize, Error> {
        let conn = &mut self.iface.tcp.entry_mut(h)?.conn;
        let before = (conn.send_buffer_ceiling(), conn.send_buffer());
        let ceiling = conn.set_send_buffer_ceiling(bytes);
        if (ceiling, conn.send_buffer()) != before {
            self.iface.tcp_run(h, now);
        }
        Ok(ceiling)
    }

    /// Refuses the receive buffer growth a connection's autotuning wanted
    /// past its ceiling (for an owner whose budget had no room): it is
    /// asked for again at the next measurement, a round trip on, if the
    /// application still reads at least half as fast.
    pub fn refuse_recv_buffer_growth(&mut self, h: TcpHandle) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.refuse_recv_buffer_growth();
        Ok(())
    }

    /// [`Tcp::refuse_recv_buffer_growth`] for the send buffer: asked for
    /// again on a pressed ACK once a buffer's worth of bytes has been
    /// acknowledged.
    pub fn refuse_send_buffer_growth(&mut self, h: TcpHandle) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.refuse_send_buffer_growth();
        Ok(())
    }

    /// Tells a connection that a writer waits for room in its send buffer
    /// (for an owner that checks the room before sending, so that no send
    /// of its finds the buffer full): autotuning weighs it on the next
    /// ACK, as a send refused for want of room.
    pub fn note_send_blocked(&mut self, h: TcpHandle) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.note_send_blocked();
        Ok(())
    }

    /// Sets how long sent data may stay unacknowledged before the
    /// connection is dropped with [`Error::TimedOut`] (TCP_USER_TIMEOUT,
    /// RFC 5482); `None` (or zero) gives up after the retransmission count
    /// (`TcpConfig::max_retransmissions`).
    pub fn set_user_timeout(&mut self, h: TcpHandle, limit: Option<Duration>) -> Result<(), Error> {
        let limit = limit.filter(|d| !d.is_zero());
        self.iface.tcp.entry_mut(h)?.conn.set_user_timeout(limit);
        Ok(())
    }

    /// Sets a connection's keepalive (see `Connection::set_keepalive`).
    pub fn set_keepalive(
        &mut self,
        h: TcpHandle,
        idle: Option<Duration>,
        interval: Duration,
        probes: u32,
    ) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.set_keepalive(idle.filter(|d| !d.is_zero()), interval, probes);
        Ok(())
    }

    /// Queues bytes for sending, copying them once into packet buffers;
    /// returns how many were taken (fewer when the send buffer fills).
    pub fn send(&mut self, h: TcpHandle, data: &[u8], now: Instant) -> Result<usize, Error> {
        let iface = &mut *self.iface;
        let entry = iface.tcp.entry_mut(h)?;
        if let Some(e) = entry.conn.error() {
            return Err(connection_error(e));
        }
        if !entry.conn.can_send() && !data.is_empty() {
            return match entry.conn.state() {
                State::Established | State::CloseWait | State::SynSent | State::SynReceived => {
                    // Refused for room: the writer waits on the buffer.
                    if !entry.conn.send_closed() {
                        entry.conn.note_send_blocked();
                    }
                    Err(Error::WouldBlock)
                }
                _ => Err(Error::NotConnected),
            };
        }
        let taken = entry.conn.send(&iface.pool, HEADROOM, data)?;
        iface.tcp_run(h, now);
        Ok(taken)
    }

    /// Queues a chain for sending without copying; returns what did not fit.
    pub fn send_buf(&mut self, h: TcpHandle, data: PacketBuf, now: Instant) -> Result<PacketBuf, Error> {
        let entry = self.iface.tcp.entry_mut(h)?;
        if let Some(e) = entry.conn.error() {
            return Err(connection_error(e));
        }
        let rest = entry.conn.send_buf(data);
        self.iface.tcp_run(h, now);
        Ok(rest)
    }

    /// Copies received bytes into `buf`: `Ok(n)` with n > 0 for data,
    /// `Ok(0)` at end of stream, `Err(WouldBlock)` when nothing is there yet.
    pub fn recv(&mut self, h: TcpHandle, buf: &mut [u8], now: Instant) -> Result<usize, Error> {
        let entry = self.iface.tcp.entry_mut(h)?;
        let n = entry.conn.recv(buf);
        if n > 0 || buf.is_empty() {
            self.iface.tcp_run(h, now);
            return Ok(n);
        }
        if let Some(e) = entry.conn.error() {
            return Err(connection_error(e));
        }
        if entry.conn.at_eof() {
            return Ok(0);
        }
        Err(Error::WouldBlock)
    }

    /// Takes up to `max` received bytes without copying: `Ok(Some)` data,
    /// `Ok(None)` end of stream, `Err(WouldBlock)` nothing yet.
    pub fn recv_buf(&mut self, h: TcpHandle, max: usize, now: Instant) -> Result<Option<PacketBuf>, Error> {
        let entry = self.iface.tcp.entry_mut(h)?;
        if let Some(data) = entry.conn.recv_buf(max) {
            self.iface.tcp_run(h, now);
            return Ok(Some(data));
        }
        if let Some(e) = entry.conn.error() {
            return Err(connection_error(e));
        }
        if entry.conn.at_eof() {
            return Ok(None);
        }
        Err(Error::WouldBlock)
    }

    /// Closes the receiving side (SHUT_RD): data queued and data arriving
    /// later are acknowledged and dropped, and reads return end of stream.
    pub fn shutdown_read(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.shutdown_read();
        self.iface.tcp_run(h, now);
        Ok(())
    }

    /// Closes the sending side (FIN after the queued data).
    pub fn shutdown(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        self.iface.tcp.entry_mut(h)?.conn.shutdown();
        self.iface.tcp_run(h, now);
        Ok(())
    }

    /// Closes the connection and lets go of the handle; the FIN exchange
    /// and TIME-WAIT go on without the application.
    pub fn close(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        let entry = self.iface.tcp.entry_mut(h)?;
        entry.conn.close(now);
        entry.released = true;
        if entry.conn.is_closed() {
            self.iface.tcp.forget(h);
            return Ok(());
        }
        self.iface.tcp_run(h, now);
        Ok(())
    }

    /// Resets the connection and lets go of the handle.
    pub fn abort(&mut self, h: TcpHandle, now: Instant) -> Result<(), Error> {
        let entry = self.iface.tcp.entry_mut(h)?;
        entry.conn.abort();
        entry.released = true;
        self.iface.tcp_run(h, now);
        // A RST went out, or there was nothing to reset: either way gone.
        self.iface.tcp.forget(h);
        Ok(())
    }

    /// Appends to `out` every socket whose readiness may have changed
    /// since the last call, with its readiness now (edge-triggered, as
    /// epoll: a socket that stays ready is not listed again until
    /// something happens to it). Sockets closed and released since are
    /// left out.
    pub fn take_events(&mut self, out: &mut Vec<TcpEvent>) {
        self.iface.tcp.take_events(out);
    }
}

/// `addr` with an IPv4-mapped IPv6 address made the IPv4 address it
/// carries.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(ip) => SocketAddr::new(IpAddr::V4(ip), v6.port()),
            None => addr,
        },
        SocketAddr::V4(_) => addr,
    }
}
