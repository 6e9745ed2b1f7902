//! `TcpStream`, `TcpListener` and `UdpSocket` with `std::net`'s shapes,
//! over a running netd. TCP over IPv4 and IPv6 (a listener on `[::]`
//! takes both, as Linux's does; an IPv6 socket reports IPv4 peers as
//! IPv4-mapped addresses, as `std::net`'s does); UDP over both too (a
//! socket on `[::]` receives IPv4 datagrams, from IPv4-mapped senders, and
//! sends to IPv4 ones).

use crate::path::{Ask, Kind};
use crate::readyfd::{ReadinessFd, ReadyFd};
use crate::{request, set_wait_limit, Data, Session};
use nagare_request::{
    decode_accepted, decode_addr, decode_addr6, encode_addr, encode_addr6, Op, Request, SockOption, ADDR_ELSEWHERE,
    NAME_LOCAL, NAME_PEER, SHUT_READ, SHUT_WRITE, V6_ONLY,
};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub(crate) fn v4(addr: impl ToSocketAddrs) -> io::Result<SocketAddrV4> {
    for a in addr.to_socket_addrs()? {
        if let SocketAddr::V4(a) = a {
            return Ok(a);
        }
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, "nagare speaks IPv4 only"))
}

pub(crate) fn addr_of(w: u64) -> SocketAddr {
    SocketAddr::V4(decode_addr(w).unwrap_or(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)))
}

/// The first address `addr` resolves to, of either family.
fn first_addr(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the address resolved to nothing"))
}

/// `a` as a socket of IPv6 (`six`) reports it: an IPv4 address mapped
/// (`::ffff:a.b.c.d`); as one of IPv4, an IPv4-mapped address unmapped.
pub(crate) fn in_family(a: SocketAddr, six: bool) -> SocketAddr {
    match (a, six) {
        (SocketAddr::V4(v4), true) => SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0)),
        (SocketAddr::V6(v6), false) => match v6.ip().to_ipv4_mapped() {
            Some(ip) => SocketAddr::V4(SocketAddrV4::new(ip, v6.port())),
            None => a,
        },
        _ => a,
    }
}

/// An address of socket `id` (`which`: [`NAME_LOCAL`] or [`NAME_PEER`]),
/// asked of netd (`Op::Name`): how a socket of IPv6, whose addresses do
/// not fit a completion's word, learns them.
pub(crate) fn name_of(netd: &Session, id: u32, which: u64) -> io::Result<SocketAddr> {
    let mut r = request(Op::Name, id);
    r.aux[0] = which;
    let (c, _) = netd.call(r, Data::None)?;
    Ok(SocketAddr::V6(decode_addr6([c.aux[0], c.aux[1], c.aux[2]])))
}

/// The address a completion's word `w` gives for socket `id`: the IPv4
/// one in it, or, for [`ADDR_ELSEWHERE`], the one netd names
/// ([`name_of`]); in the family of a socket of IPv6 (`six`) or IPv4.
pub(crate) fn addr_in(netd: &Session, id: u32, w: u64, which: u64, six: bool) -> io::Result<SocketAddr> {
    let a = if w == ADDR_ELSEWHERE { name_of(netd, id, which)? } else { addr_of(w) };
    Ok(in_family(a, six))
}

/// The request that opens a connection to `remote` from an ephemeral
/// port: `CONNECT` for IPv4, `CONNECT6` for IPv6.
fn connect_request(remote: SocketAddr) -> Request {
    match remote {
        SocketAddr::V4(a) => {
            let mut r = request(Op::Connect, 0);
            r.aux[0] = encode_addr(a);
            r
        }
        SocketAddr::V6(a) => {
            let mut r = request(Op::Connect6, 0);
            let [hi, lo, port] = encode_addr6(a);
            r.aux[..3].copy_from_slice(&[hi, lo, port]);
            r
        }
    }
}

/// Closes a socket id on drop.
pub(crate) struct Handle {
    pub(crate) netd: Session,
    pub(crate) id: u32,
    /// The descriptor lent by `readiness_fd`, made on the first call
    /// (`readyfd.rs`).
    ready: OnceLock<Arc<ReadyFd>>,
}

impl Handle {
    pub(crate) fn new(netd: &Session, id: u32) -> Handle {
        Handle { netd: netd.clone(), id, ready: OnceLock::new() }
    }

    /// The socket's descriptor, made on the first call.
    pub(crate) fn ready_fd(&self) -> io::Result<ReadinessFd> {
        if let Some(fd) = self.ready.get() {
            // The session's call: it starts this process's watcher if it
            // needs one (a child made by `fork`).
            self.netd.lock()?.lends_readiness(self.id)?;
            return Ok(ReadinessFd(Arc::clone(fd)));
        }
        let fd = self.netd.ready_fd(self.id)?;
        // Another thread's, if it was first, is the same one.
        let _ = self.ready.set(Arc::clone(&fd));
        Ok(ReadinessFd(fd))
    }

    /// Gives the socket the descriptor `fd` made ahead
    /// (`Session::spare_ready_fd`), unless it has one.
    fn lend(&self, fd: Arc<ReadyFd>) -> io::Result<ReadinessFd> {
        if self.ready.get().is_none() {
            self.netd.lend_ready_fd(self.id, &fd)?;
            let _ = self.ready.set(fd);
        }
        self.ready_fd()
    }

    /// Passes `out` through after a call on the socket, with its
    /// descriptor, if it has one, set to the readiness the call left (a
    /// read that took the last data, a write that filled the send buffer).
    pub(crate) fn settle<T>(&self, out: T) -> T {
        if self.ready.get().is_some() {
            if let Ok(mut c) = self.netd.lock() {
                c.publish(self.id);
                c.publish_starved();
                c.watch_unposted();
            }
        }
        out
    }

    /// Sets option `option` to `value`; the value in force.
    fn set_option(&self, option: SockOption, value: u64) -> io::Result<u64> {
        let mut r = request(Op::SetOption, self.id);
        r.aux = [option as u64, value, 0, 0];
        self.netd.call(r, Data::None).map(|(c, _)| c.aux[0])
    }

    /// The value of option `option`.
    fn option(&self, option: SockOption) -> io::Result<u64> {
        let mut r = request(Op::GetOption, self.id);
        r.aux[0] = option as u64;
        self.netd.call(r, Data::None).map(|(c, _)| c.aux[0])
    }

    /// Sets the socket's own priority (`None`: its process's again).
    fn set_priority(&self, priority: Option<u8>) -> io::Result<()> {
        let value = match priority {
            None => 0,
            Some(p) if SockOption::Priority.admits(u64::from(p)) && p != 0 => u64::from(p),
            Some(_) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        self.set_option(SockOption::Priority, value).map(|_| ())
    }

    /// The socket's priority in force.
    fn priority(&self) -> io::Result<u8> {
        let p = self.option(SockOption::Priority)?;
        u8::try_from(p).map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))
    }

    /// Opens the socket's data path (`send_buffer`, `recv_buffer`: the
    /// sizes netd gave its buffers, 0 if none).
    fn open_path(&self, kind: Kind, send_buffer: u64, recv_buffer: u64) -> io::Result<()> {
        self.netd.lock()?.open_path(self.id, kind, send_buffer, recv_buffer)
    }
}

impl Drop for Handle {
    /// Closes the socket: netd closes it after the sends already queued on
    /// it (a stream sends them, then its FIN; a stream whose received data
    /// was not all read is reset instead, and so is one whose linger time
    /// is zero, by netd), and its port is free for another socket, of any
    /// client, once this returns.
    fn drop(&mut self) {
        // The descriptor is this process's own, abandoned session or not.
        if let Ok(mut c) = self.netd.lock() {
            c.ready_fds.remove(&self.id);
            c.starved.get_mut().remove(&self.id);
        }
        if self.netd.is_abandoned() {
            return;
        }
        let unread = self.netd.lock().is_ok_and(|mut c| {
            c.close_listen_path(self.id);
            c.close_path(self.id)
        });
        let mut r = request(Op::Close, self.id);
        if unread {
            r.aux[0] = nagare_request::CLOSE_RESET;
        }
        let _ = self.netd.call(r, Data::None);
    }
}

/// A time limit set by `set_read_timeout` or `set_write_timeout`, in
/// microseconds (0: none), shared by every reference to the socket.
#[derive(Default)]
pub(crate) struct Limit(AtomicU64);

impl Limit {
    pub(crate) fn set(&self, limit: Option<Duration>) -> io::Result<()> {
        if limit == Some(Duration::ZERO) {
            // As std::net: a zero timeout is an error, not "none".
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot set a 0 duration timeout"));
        }
        let micros = limit.map_or(0, |d| d.as_micros().clamp(1, u128::from(nagare_request::MAX_WAIT_MICROS)) as u64);
        self.0.store(micros, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn get(&self) -> Option<Duration> {
        let micros = self.0.load(Ordering::Relaxed);
        (micros != 0).then(|| Duration::from_micros(micros))
    }
}

/// Non-blocking mode, set by `set_nonblocking`.
#[derive(Default)]
pub(crate) struct Mode(AtomicBool);

impl Mode {
    /// `r` with this mode's flag.
    pub(crate) fn apply(&self, mut r: Request) -> Request {
        if self.0.load(Ordering::Relaxed) {
            r.flags |= nagare_request::NONBLOCK;
        }
        r
    }

    fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }

    pub(crate) fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A TCP connection through netd.
pub struct TcpStream {
    pub(crate) h: Handle,
    local: SocketAddr,
    peer: SocketAddr,
    pub(crate) read_limit: Limit,
    pub(crate) write_limit: Limit,
    pub(crate) mode: Mode,
}

impl TcpStream {
    /// Connects through the default netd (`NAGARE_NETD`).
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        TcpStream::connect_via(&Session::connect_default()?, addr)
    }

    /// Connects through `netd`. The handshake is waited for without
    /// holding the session: other threads' calls go on meanwhile.
    pub fn connect_via(netd: &Session, addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        TcpStream::connect_waiting(netd, first_addr(addr)?, None)
    }

    /// Connects through `netd`, giving up with `TimedOut` after `limit`.
    pub fn connect_timeout_via(netd: &Session, addr: &SocketAddr, limit: Duration) -> io::Result<TcpStream> {
        TcpStream::connect_waiting(netd, *addr, Some(limit))
    }

    /// Posts a connect (netd bounds its wait by `limit`) and waits for
    /// netd's answer in the session's slices, letting the session go
    /// between them.
    fn connect_waiting(netd: &Session, remote: SocketAddr, limit: Option<Duration>) -> io::Result<TcpStream> {
        let mut r = connect_request(remote);
        set_wait_limit(&mut r, limit);
        let ticket = netd.submit_async(r, Data::None)?;
        let mut pending = Connecting::new(netd, ticket.into_id(), remote);
        let id = pending.id;
        let comp = netd.until(false, None, |c| c.take_arrived(id))?;
        pending.done = true;
        let comp = comp.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        comp.result().map_err(io::Error::from_raw_os_error)?;
        TcpStream::connected(netd, &comp, remote)
    }

    /// The stream a connect's completion names, to `remote`: its local
    /// address from the completion, or from netd for IPv6.
    fn connected(netd: &Session, comp: &nagare_request::Completion, remote: SocketAddr) -> io::Result<TcpStream> {
        let six = remote.is_ipv6();
        let local = addr_in(netd, comp.aux[0] as u32, comp.aux[1], NAME_LOCAL, six)?;
        TcpStream::opened(netd, comp, local, remote)
    }

    /// Starts a connection through `netd` and returns at once (a
    /// non-blocking socket's `connect`, which gives `EINPROGRESS`): the
    /// handshake goes on in netd. [`Connecting::is_done`] says, without a
    /// request, whether netd has answered; [`Connecting::try_finish`] then
    /// gives the stream or the error.
    pub fn connect_start_via(netd: &Session, addr: impl ToSocketAddrs) -> io::Result<Connecting> {
        let remote = first_addr(addr)?;
        let ticket = netd.submit_async(connect_request(remote), Data::None)?;
        Ok(Connecting::new(netd, ticket.into_id(), remote))
    }

    /// The stream a connect or accept completion names (`aux[0]` its id,
    /// `aux[2]` and `aux[3]` its send and receive buffers), with its data
    /// path open.
    fn opened(
        netd: &Session,
        c: &nagare_request::Completion,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> io::Result<TcpStream> {
        let s = TcpStream::new(Handle::new(netd, c.aux[0] as u32), local, peer);
        s.h.open_path(Kind::Stream, c.aux[2], c.aux[3])?;
        Ok(s)
    }

    pub(crate) fn from_handle(h: Handle, local: SocketAddr, peer: SocketAddr) -> TcpStream {
        TcpStream::new(h, local, peer)
    }

    fn new(h: Handle, local: SocketAddr, peer: SocketAddr) -> TcpStream {
        TcpStream { h, local, peer, read_limit: Limit::default(), write_limit: Limit::default(), mode: Mode::default() }
    }

    /// In non-blocking mode reads and writes that would wait fail with
    /// `WouldBlock` instead; [`crate::poll::poll`] says when to try again.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.mode.set(on);
        Ok(())
    }

    /// The id netd knows this socket by (for [`crate::poll::poll`]).
    pub fn socket_id(&self) -> u32 {
        self.h.id
    }

    /// Reads fail with `WouldBlock` after waiting this long (`None`: wait
    /// as long as it takes).
    pub fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        self.read_limit.set(limit)
    }

    /// The read time limit.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.read_limit.get())
    }

    /// Writes fail with `WouldBlock` after waiting this long for room.
    pub fn set_write_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        self.write_limit.set(limit)
    }

    /// The write time limit.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.write_limit.get())
    }

    /// Our address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.peer)
    }

    /// Closes the receiving side (`Read`: data queued and data arriving
    /// later is acknowledged and dropped, reads return 0), the sending side
    /// (`Write`: a FIN after what is queued), or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let mut r = request(Op::Shutdown, self.h.id);
        r.aux[0] = match how {
            Shutdown::Read => SHUT_READ,
            Shutdown::Write => SHUT_WRITE,
            Shutdown::Both => SHUT_READ | SHUT_WRITE,
        };
        self.h.netd.call(r, Data::None)?;
        let mut c = self.h.netd.lock()?;
        if how != Shutdown::Write {
            c.shut_path_read(self.h.id);
        }
        if how != Shutdown::Read {
            c.shut_path_write(self.h.id);
        }
        c.publish(self.h.id);
        Ok(())
    }

    fn set_option(&self, option: SockOption, value: u64) -> io::Result<u64> {
        self.h.set_option(option, value)
    }

    fn option(&self, option: SockOption) -> io::Result<u64> {
        self.h.option(option)
    }

    /// Sets the stream's priority on the kernel's scale, 100 (highest,
    /// nice -20) to 139 (lowest, nice 19), in place of the one netd reads
    /// from this process's nice value (`None`: that one again), as
    /// `SO_PRIORITY` is set per socket.
    pub fn set_priority(&self, priority: Option<u8>) -> io::Result<()> {
        self.h.set_priority(priority)
    }

    /// The stream's priority in force (its own, or this process's).
    pub fn priority(&self) -> io::Result<u8> {
        self.h.priority()
    }

    /// Sets the send buffer (`SO_SNDBUF`), in bytes (1 to 64 MiB): it grows
    /// at once and shrinks no lower than the bytes queued. Unlike Linux the
    /// size is taken as given, not doubled.
    pub fn set_send_buffer_size(&self, bytes: usize) -> io::Result<()> {
        let in_force = self.set_option(SockOption::SendBuffer, buffer_size(bytes)?)?;
        let mut c = self.h.netd.lock()?;
        c.set_path_send_buffer(self.h.id, in_force);
        c.publish(self.h.id);
        Ok(())
    }

    /// The send buffer's size in bytes.
    pub fn send_buffer_size(&self) -> io::Result<usize> {
        self.option(SockOption::SendBuffer).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Sets the receive buffer (`SO_RCVBUF`), in bytes (1 to 64 MiB), which
    /// bounds the window offered to the peer: a larger one is advertised
    /// at once; it shrinks no lower than what is held and already offered.
    /// The receives the stream keeps posted with netd follow it.
    pub fn set_recv_buffer_size(&self, bytes: usize) -> io::Result<()> {
        let in_force = self.set_option(SockOption::RecvBuffer, buffer_size(bytes)?)?;
        self.h.netd.lock()?.set_path_recv_buffer(self.h.id, in_force)
    }

    /// The receive buffer's size in bytes.
    pub fn recv_buffer_size(&self) -> io::Result<usize> {
        self.option(SockOption::RecvBuffer).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Sets how long sent data may stay unacknowledged before the
    /// connection fails with `TimedOut` (`TCP_USER_TIMEOUT`, RFC 5482), to
    /// the millisecond; `None` (or zero) leaves it to the retransmission
    /// count.
    pub fn set_user_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        let ms = limit.map_or(0, |d| d.as_millis().max(u128::from(!d.is_zero())));
        let ms = u64::try_from(ms)
            .ok()
            .filter(|&ms| ms <= u64::from(u32::MAX))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a user timeout longer than u32::MAX ms"))?;
        self.set_option(SockOption::UserTimeout, ms).map(|_| ())
    }

    /// The user timeout (`None`: none set).
    pub fn user_timeout(&self) -> io::Result<Option<Duration>> {
        self.option(SockOption::UserTimeout).map(|ms| (ms != 0).then(|| Duration::from_millis(ms)))
    }

    /// What closing the stream does (`SO_LINGER`): with `Some(ZERO)` it
    /// resets the connection, what was queued dropped, as Linux's close
    /// with a zero linger time; with any other value, or `None`, it sends
    /// what was queued and then its FIN, without waiting for them.
    /// netd keeps it with the connection, so a close by any process that
    /// holds it, or the exit of one that never closed it, resets too.
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        self.h.set_option(SockOption::ResetOnClose, u64::from(linger == Some(Duration::ZERO))).map(|_| ())
    }

    /// Turns Nagle's algorithm off (`true`) or on (`TCP_NODELAY`).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.set_option(SockOption::NoDelay, u64::from(nodelay)).map(|_| ())
    }

    /// The error the connection met since the last call that reported one
    /// (a reset, a timeout), taken (`SO_ERROR`); `None` if there is none.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let mut c = self.h.netd.lock()?;
        let e = c.path_error(self.h.id);
        c.publish(self.h.id);
        e
    }

    /// Bytes that arrived and were not read yet (what `FIONREAD` says);
    /// a read of at least this many takes them without waiting.
    pub fn unread(&self) -> io::Result<usize> {
        let mut c = self.h.netd.lock()?;
        c.collect()?;
        c.unread(self.h.id).ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    /// Keepalive probes after `idle` without a segment from the peer
    /// (`None`: none), as `SO_KEEPALIVE` with `TCP_KEEPIDLE` (whole
    /// seconds, at most `nagare_request::MAX_KEEPALIVE_SECS`).
    pub fn set_keepalive(&self, idle: Option<Duration>) -> io::Result<()> {
        let secs = idle.map_or(0, |d| d.as_secs().clamp(1, nagare_request::MAX_KEEPALIVE_SECS));
        self.h.set_option(SockOption::KeepIdle, secs).map(|_| ())
    }

    /// The keepalive idle time in force (`None`: no probes).
    pub fn keepalive(&self) -> io::Result<Option<Duration>> {
        self.h.option(SockOption::KeepIdle).map(|s| (s > 0).then(|| Duration::from_secs(s)))
    }

    /// The time between keepalive probes and how many go unanswered
    /// before the connection fails (`TCP_KEEPINTVL`, `TCP_KEEPCNT`).
    pub fn set_keepalive_probes(&self, interval: Duration, count: u32) -> io::Result<()> {
        let secs = interval.as_secs().clamp(1, nagare_request::MAX_KEEPALIVE_SECS);
        self.h.set_option(SockOption::KeepInterval, secs)?;
        let count = u64::from(count).clamp(1, nagare_request::MAX_KEEPALIVE_PROBES);
        self.h.set_option(SockOption::KeepCount, count).map(|_| ())
    }

    /// Whether Nagle's algorithm is off.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.option(SockOption::NoDelay).map(|v| v != 0)
    }

    /// How a read waits, given the caller's `may_wait`: whether the wait
    /// here is non-blocking, and the read's `Ask` (`Conn::read_ask`).
    pub(crate) fn read_mode(&self, may_wait: bool) -> io::Result<(bool, Ask)> {
        Ok(self.h.netd.lock()?.read_ask(self.h.id, may_wait && !self.mode.is_on()))
    }

    /// As `read`, and with `may_wait` false it never waits, whatever the
    /// socket's mode (`recv`'s `MSG_DONTWAIT`): `WouldBlock` when nothing
    /// arrived.
    pub fn read_with(&self, buf: &mut [u8], may_wait: bool) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let id = self.h.id;
        let (nonblocking, mut ask) = self.read_mode(may_wait)?;
        self.h.settle(self.h.netd.until(nonblocking, self.read_limit.get(), |c| c.read_stream(id, buf, &mut ask)))
    }

    /// As [`TcpStream::read_with`], leaving the bytes to be read again
    /// (`recv`'s `MSG_PEEK`).
    pub fn peek_with(&self, buf: &mut [u8], may_wait: bool) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let id = self.h.id;
        let (nonblocking, mut ask) = self.read_mode(may_wait)?;
        self.h.netd.until(nonblocking, self.read_limit.get(), |c| c.peek_stream(id, buf, &mut ask))
    }

    /// As `write`, and with `may_wait` false it never waits, whatever the
    /// socket's mode: `WouldBlock` when the send buffer is full.
    pub fn write_with(&self, buf: &[u8], may_wait: bool) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let id = self.h.id;
        let nonblocking = self.mode.is_on() || !may_wait;
        if self.h.netd.lock()?.is_shared(id) {
            // Another process holds the stream too: each write is in the
            // engine before it returns (not queued here, where it could
            // follow another holder's later write, or be lost with this
            // process), so the holders' writes keep their order.
            let mut r = request(Op::Send, id);
            if nonblocking {
                r.flags |= nagare_request::NONBLOCK;
            } else {
                set_wait_limit(&mut r, self.write_limit.get());
            }
            let n = buf.len().min(self.h.netd.max_chunk());
            let (c, _) = self.h.netd.call(r, Data::Send(&buf[..n]))?;
            return Ok(c.aux[0] as usize);
        }
        let template = request(Op::Send, id);
        self.h.settle(self.h.netd.until(nonblocking, self.write_limit.get(), |c| c.queue_stream(id, buf, &template)))
    }

    /// Takes what netd already delivered (see `crate::path`), waiting for
    /// data unless non-blocking.
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(buf, true)
    }

    /// Queues what the send buffer has room for and returns, waiting for
    /// room unless non-blocking.
    fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.write_with(buf, true)
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection being made (see [`TcpStream::connect_start_via`]).
/// Dropped before it is finished, the connection it makes is closed (by
/// the session's next call after netd answers, if it had not yet).
pub struct Connecting {
    netd: Session,
    id: u64,
    remote: SocketAddr,
    done: bool,
    /// The descriptor lent by `readiness_fd`, made on the first call.
    ready: OnceLock<Arc<ReadyFd>>,
}

impl Connecting {
    fn new(netd: &Session, id: u64, remote: SocketAddr) -> Connecting {
        Connecting { netd: netd.clone(), id, remote, done: false, ready: OnceLock::new() }
    }

    /// Whether netd has answered (the connection is made, or failed):
    /// [`Connecting::try_finish`] then gives it without waiting.
    pub fn is_done(&self) -> io::Result<bool> {
        if self.done {
            return Ok(true);
        }
        let mut c = self.netd.lock()?;
        c.check_alive()?;
        c.collect()?;
        Ok(c.arrived.contains_key(&self.id))
    }

    /// The stream once netd has answered (`None` before), or the error the
    /// connection met; once only.
    pub fn try_finish(&mut self) -> io::Result<Option<TcpStream>> {
        if self.done {
            return Err(io::Error::from_raw_os_error(libc::EALREADY));
        }
        let Some(comp) = self.netd.lock()?.take_arrived(self.id)? else { return Ok(None) };
        self.done = true;
        if let Ok(mut c) = self.netd.lock() {
            // The descriptor stays as it was set, for whoever still polls
            // it; the stream has its own.
            c.answer_fds.remove(&self.id);
        }
        let comp = comp.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        comp.result().map_err(io::Error::from_raw_os_error)?;
        TcpStream::connected(&self.netd, &comp, self.remote).map(Some)
    }
}

impl Connecting {
    /// A descriptor that becomes writable once netd answered (a
    /// connection made; readable too when it failed), as a non-blocking
    /// kernel socket's does when its connect ends: for a program's own
    /// `poll` or `epoll` (`readyfd.rs`). It is not the socket (see
    /// [`ReadinessFd`]). Made on the first call; the stream
    /// [`Connecting::try_finish`] gives has its own.
    pub fn readiness_fd(&self) -> io::Result<ReadinessFd> {
        if let Some(fd) = self.ready.get() {
            return Ok(ReadinessFd(Arc::clone(fd)));
        }
        let fd = self.netd.answer_fd(self.id)?;
        let _ = self.ready.set(Arc::clone(&fd));
        Ok(ReadinessFd(fd))
    }
}

impl Drop for Connecting {
    fn drop(&mut self) {
        if let Ok(mut c) = self.netd.lock() {
            c.answer_fds.remove(&self.id);
            if !self.done {
                c.abandon_connect(self.id);
            }
        }
    }
}

/// A TCP listener through netd.
pub struct TcpListener {
    pub(crate) h: Handle,
    local: SocketAddr,
    mode: Mode,
}

impl TcpListener {
    /// Listens through the default netd.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::bind_via(&Session::connect_default()?, addr)
    }

    /// Listens through `netd` (backlog 128).
    pub fn bind_via(netd: &Session, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::listen_via(netd, addr, 128)
    }

    /// Listens through `netd` with an accept queue of `backlog`
    /// connections (`listen(2)`'s, held to 1 to
    /// [`nagare_request::MAX_BACKLOG`]).
    pub fn listen_via(netd: &Session, addr: impl ToSocketAddrs, backlog: u32) -> io::Result<TcpListener> {
        TcpListener::listen_as(netd, first_addr(addr)?, backlog, false)
    }

    /// Listens through `netd` on an IPv6 address for IPv6 connections
    /// only (`IPV6_V6ONLY`): on `[::]` an IPv4 listener may then hold
    /// the same port.
    pub fn listen_v6_only_via(netd: &Session, addr: SocketAddrV6, backlog: u32) -> io::Result<TcpListener> {
        TcpListener::listen_as(netd, SocketAddr::V6(addr), backlog, true)
    }

    fn listen_as(netd: &Session, local: SocketAddr, backlog: u32, v6_only: bool) -> io::Result<TcpListener> {
        let backlog = u64::from(backlog).clamp(1, nagare_request::MAX_BACKLOG);
        let r = match local {
            SocketAddr::V4(a) => {
                let mut r = request(Op::Listen, 0);
                r.aux[0] = encode_addr(a);
                r.aux[1] = backlog;
                r
            }
            SocketAddr::V6(a) => {
                let mut r = request(Op::Listen6, 0);
                let [hi, lo, port] = encode_addr6(a);
                let only = if v6_only { nagare_request::V6_ONLY } else { 0 };
                r.aux = [hi, lo, port | only, backlog];
                r
            }
        };
        let (c, _) = netd.call(r, Data::None)?;
        let l = TcpListener::from_handle(Handle::new(netd, c.aux[0] as u32), local);
        netd.lock()?.open_listen_path(l.h.id, false)?;
        Ok(l)
    }

    pub(crate) fn from_handle(h: Handle, local: SocketAddr) -> TcpListener {
        TcpListener { h, local, mode: Mode::default() }
    }

    /// In non-blocking mode `accept` fails with `WouldBlock` when no
    /// connection is waiting. The connections it returns start blocking.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.mode.set(on);
        Ok(())
    }

    /// The id netd knows this socket by (for [`crate::poll::poll`]).
    pub fn socket_id(&self) -> u32 {
        self.h.id
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// Takes the next connection, waiting for one unless non-blocking.
    /// netd accepts ahead of the application (`accept.rs`): a connection
    /// that is already accepted is taken without a request.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let id = self.h.id;
        let may_wait = !self.mode.is_on();
        let shared = self.h.netd.lock()?.is_shared_listener(id);
        let mut ask = Ask::new(may_wait, shared);
        let c =
            self.h.settle(self.h.netd.until(!may_wait && !shared, None, |conn| conn.take_accepted(id, &mut ask)))?;
        let six = self.local.is_ipv6();
        let (new_id, ip) = decode_accepted(c.aux[0]);
        let (local, peer) = if c.aux[1] == ADDR_ELSEWHERE {
            // An IPv6 connection: netd names its addresses.
            let netd = &self.h.netd;
            (name_of(netd, new_id, NAME_LOCAL)?, name_of(netd, new_id, NAME_PEER)?)
        } else {
            // The address the peer reached, which a listener on 0.0.0.0
            // does not know; the port is the listener's.
            (SocketAddr::V4(SocketAddrV4::new(ip, self.local.port())), addr_of(c.aux[1]))
        };
        let (local, peer) = (in_family(local, six), in_family(peer, six));
        let s = TcpStream::opened(&self.h.netd, &c, local, peer)?;
        Ok((s, peer))
    }

    /// [`TcpListener::accept`], with the stream's
    /// [`readiness_fd`](TcpStream::readiness_fd): the descriptor is made
    /// before the connection is taken, so that when it cannot be (no
    /// descriptors left) the connection stays queued for a later accept
    /// rather than being taken and reset.
    pub fn accept_with_readiness_fd(&self) -> io::Result<(TcpStream, SocketAddr, ReadinessFd)> {
        let spare = self.h.netd.spare_ready_fd()?;
        let (s, peer) = self.accept()?;
        let fd = s.h.lend(spare)?;
        Ok((s, peer, fd))
    }
}

/// A UDP socket through netd.
pub struct UdpSocket {
    pub(crate) h: Handle,
    local: SocketAddr,
    /// The peer `connect` set, in the socket's family.
    peer: Mutex<Option<SocketAddr>>,
    pub(crate) read_limit: Limit,
    pub(crate) mode: Mode,
}

impl UdpSocket {
    /// Sets the socket's priority on the kernel's scale, 100 (highest) to
    /// 139 (lowest), in place of the one netd reads from this process's
    /// nice value (`None`: that one again).
    pub fn set_priority(&self, priority: Option<u8>) -> io::Result<()> {
        self.h.set_priority(priority)
    }

    /// The socket's priority in force (its own, or this process's).
    pub fn priority(&self) -> io::Result<u8> {
        self.h.priority()
    }

    /// Binds through the default netd (port 0: ephemeral).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        UdpSocket::bind_via(&Session::connect_default()?, addr)
    }

    /// Binds through `netd`, to an IPv4 address or an IPv6 one; on `[::]`
    /// the socket takes IPv4 datagrams to its port too (dual stack, as
    /// Linux's without `IPV6_V6ONLY`).
    pub fn bind_via(netd: &Session, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        UdpSocket::bind_as(netd, first_addr(addr)?, false)
    }

    /// Binds through `netd` to an IPv6 address, IPv6 datagrams only (as
    /// with `IPV6_V6ONLY`): on `[::]` the port stays free for IPv4.
    pub fn bind_v6_only_via(netd: &Session, addr: SocketAddrV6) -> io::Result<UdpSocket> {
        UdpSocket::bind_as(netd, SocketAddr::V6(addr), true)
    }

    fn bind_as(netd: &Session, local: SocketAddr, v6_only: bool) -> io::Result<UdpSocket> {
        let r = match local {
            SocketAddr::V4(a) => {
                let mut r = request(Op::UdpBind, 0);
                r.aux[0] = encode_addr(a);
                r
            }
            SocketAddr::V6(a) => {
                let mut r = request(Op::UdpBind6, 0);
                let [hi, lo, port] = encode_addr6(a);
                r.aux[..3].copy_from_slice(&[hi, lo, port | if v6_only { V6_ONLY } else { 0 }]);
                r
            }
        };
        let (c, _) = netd.call(r, Data::None)?;
        let h = Handle::new(netd, c.aux[0] as u32);
        let local = addr_in(netd, h.id, c.aux[1], NAME_LOCAL, local.is_ipv6())?;
        let s = UdpSocket::from_handle(h, local);
        s.h.open_path(Kind::Datagram, 0, 0)?;
        Ok(s)
    }

    /// Whether the socket is of IPv6 (its senders IPv6 ones, an IPv4
    /// one's mapped).
    fn is_six(&self) -> bool {
        self.local.is_ipv6()
    }

    /// Whether the socket is of IPv6 and bound to an IPv4-mapped address:
    /// netd bound it to that IPv4 address, as Linux does.
    fn is_mapped(&self) -> bool {
        matches!(self.local, SocketAddr::V6(six) if six.ip().to_ipv4_mapped().is_some())
    }

    /// The request that sends to `addr` from this socket: `SENDTO` from
    /// one of IPv4 (an IPv4-mapped address unmapped), `SENDTO6` from one
    /// of IPv6 (an IPv4 address mapped, which a dual-stack socket sends
    /// over IPv4); an IPv6 address from one bound to an IPv4-mapped
    /// address is refused (`EAFNOSUPPORT`, as Linux says).
    pub(crate) fn send_request(&self, addr: impl ToSocketAddrs) -> io::Result<Request> {
        match in_family(first_addr(addr)?, self.is_six()) {
            SocketAddr::V4(a) => {
                let mut r = request(Op::SendTo, self.h.id);
                r.aux[0] = encode_addr(a);
                Ok(r)
            }
            // Bound to an IPv4-mapped address, the socket is IPv4's alone.
            SocketAddr::V6(a) if self.is_six() && a.ip().to_ipv4_mapped().is_none() && self.is_mapped() => {
                Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT))
            }
            SocketAddr::V6(a) if self.is_six() => {
                let mut r = request(Op::SendTo6, self.h.id);
                let [hi, lo, port] = encode_addr6(a);
                r.aux[..3].copy_from_slice(&[hi, lo, port]);
                Ok(r)
            }
            SocketAddr::V6(_) => Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
        }
    }

    /// In non-blocking mode `recv_from` fails with `WouldBlock` when no
    /// datagram is waiting.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.mode.set(on);
        Ok(())
    }

    /// The id netd knows this socket by (for [`crate::poll::poll`]).
    pub fn socket_id(&self) -> u32 {
        self.h.id
    }

    pub(crate) fn from_handle(h: Handle, local: SocketAddr) -> UdpSocket {
        UdpSocket { h, local, peer: Mutex::new(None), read_limit: Limit::default(), mode: Mode::default() }
    }

    /// How a receive waits, given the caller's `may_wait`: whether the
    /// wait here is non-blocking, and the read's `Ask` (`Conn::read_ask`).
    pub(crate) fn read_mode(&self, may_wait: bool) -> io::Result<(bool, Ask)> {
        Ok(self.h.netd.lock()?.read_ask(self.h.id, may_wait && !self.mode.is_on()))
    }

    /// Receives fail with `WouldBlock` after waiting this long (`None`:
    /// wait as long as it takes).
    pub fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        self.read_limit.set(limit)
    }

    /// The receive time limit.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.read_limit.get())
    }

    /// Sets the receive queue (`SO_RCVBUF`), in bytes (1 to 64 MiB): what
    /// netd holds for this socket until it is read, beyond which
    /// datagrams are dropped. netd grants what its client's memory allows,
    /// and PacketFlow's memory manager leaves a queue sized so, as Linux
    /// leaves a buffer its application sized.
    pub fn set_recv_buffer_size(&self, bytes: usize) -> io::Result<()> {
        self.h.set_option(SockOption::RecvBuffer, buffer_size(bytes)?).map(|_| ())
    }

    /// The receive queue's size in bytes.
    pub fn recv_buffer_size(&self) -> io::Result<usize> {
        self.h.option(SockOption::RecvBuffer).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// The error a datagram sent earlier met (an unreachable host; for a
    /// connected socket, an ICMP error about a datagram to its peer, as
    /// [`UdpSocket::connect`] says), taken (`SO_ERROR`); `None` if there
    /// is none.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let mut c = self.h.netd.lock()?;
        let e = c.path_error(self.h.id);
        c.publish(self.h.id);
        e
    }

    /// Connects the socket to `addr`, as `std::net::UdpSocket::connect`:
    /// [`send`](Self::send) goes there and [`recv`](Self::recv) takes
    /// its datagrams only, and netd reports ICMP errors about datagrams
    /// sent there as Linux does to a connected socket: the hard ones (a
    /// closed port gives `ConnectionRefused`; an unreachable network or
    /// host, which may pass, none) fail the socket's next call once, or
    /// are taken by [`take_error`](Self::take_error). An unconnected
    /// socket is told of none. An IPv4 peer of a v6-only socket fails
    /// with `ENETUNREACH`, an IPv6 one of an IPv4 socket with
    /// `EAFNOSUPPORT`.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let peer = first_addr(addr)?;
        let SocketAddr::V6(six) = in_family(peer, true) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        if six.port() == 0 || six.ip().is_unspecified() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.connect_request(encode_addr6(six))?;
        *self.peer.lock().map_err(|_| io::Error::other("a thread panicked holding the peer"))? =
            Some(in_family(peer, self.is_six()));
        Ok(())
    }

    /// Takes the socket's peer away (as `connect` with `AF_UNSPEC`).
    pub fn disconnect(&self) -> io::Result<()> {
        self.connect_request([0; 3])?;
        *self.peer.lock().map_err(|_| io::Error::other("a thread panicked holding the peer"))? = None;
        Ok(())
    }

    fn connect_request(&self, words: [u64; 3]) -> io::Result<()> {
        let mut r = request(Op::UdpConnect, self.h.id);
        r.aux[..3].copy_from_slice(&words);
        self.h.netd.call(r, Data::None)?;
        Ok(())
    }

    /// The peer [`connect`](Self::connect) set; `ENOTCONN` without one.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOTCONN))
    }

    fn peer(&self) -> Option<SocketAddr> {
        self.peer.lock().map_or(None, |p| *p)
    }

    /// Sends one datagram to the peer (`EDESTADDRREQ` without one), as
    /// [`send_to`](Self::send_to).
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let peer = self.peer().ok_or_else(|| io::Error::from_raw_os_error(libc::EDESTADDRREQ))?;
        self.send_to(buf, peer)
    }

    /// Waits for one datagram from the peer (`ENOTCONN` without one); a
    /// datagram from another sender is dropped. A longer one is
    /// truncated to `buf`.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let peer = self.peer_addr()?;
        loop {
            let (n, from) = self.recv_from(buf)?;
            if from == peer {
                return Ok(n);
            }
        }
    }

    /// Sends one datagram (at most one region buffer, 64 KiB by default).
    /// The bytes are copied once, into a region buffer that is lent to the
    /// stack, and the call returns once the datagram is queued with netd;
    /// the buffer comes back once it is on the device. An error netd meets
    /// later (an unreachable host) is returned by the socket's next call.
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        self.send_to_with(buf, addr, true)
    }

    /// As [`UdpSocket::send_to`], and with `may_wait` false it never
    /// waits, whatever the socket's mode (`MSG_DONTWAIT`).
    pub fn send_to_with(&self, buf: &[u8], addr: impl ToSocketAddrs, may_wait: bool) -> io::Result<usize> {
        if buf.len() > self.h.netd.max_chunk() {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        let id = self.h.id;
        let template = self.send_request(addr)?;
        let nonblocking = self.mode.is_on() || !may_wait;
        self.h.settle(self.h.netd.until(nonblocking, None, |c| c.queue_datagram(id, buf, &template)))
    }

    /// [`UdpSocket::send_to`] by the zero-copy path (netd lends the buffer
    /// to the engine, as `send_buf_to`), timed stage by stage (AnT's send
    /// path, what `nagare bench sendpath` measures): netd and its driver
    /// stamp the request on its way.
    pub fn send_to_traced(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<(usize, SendTrace)> {
        if buf.len() > self.h.netd.max_chunk() {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        let mut r = self.mode.apply(request(Op::SendTo, self.h.id));
        r.aux[0] = encode_addr(v4(addr)?);
        // The path AnT times: the buffer lent, named in place to the driver.
        r.flags |= nagare_request::TRACE | nagare_request::LEND;
        let (c, _) = self.h.netd.call(r, Data::Send(buf))?;
        let done = nagare_ipc::monotonic_ns();
        let stages = nagare_request::SendStages::of(&c);
        let posted = c.aux[3];
        Ok((sent_count(c.aux[0], buf.len())?, SendTrace { stages, total_ns: done.saturating_sub(posted) }))
    }

    /// Waits for one datagram; a longer one is truncated to `buf`.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from_trunc(buf).map(|(n, _, from)| (n, from))
    }

    /// As [`UdpSocket::recv_from`], with the datagram's whole length too
    /// (as Linux's `MSG_TRUNC`): bytes copied, bytes sent, sender.
    pub fn recv_from_trunc(&self, buf: &mut [u8]) -> io::Result<(usize, usize, SocketAddr)> {
        self.recv_from_with(buf, true)
    }

    /// As [`UdpSocket::recv_from_trunc`], and with `may_wait` false it
    /// never waits, whatever the socket's mode (`MSG_DONTWAIT`).
    pub fn recv_from_with(&self, buf: &mut [u8], may_wait: bool) -> io::Result<(usize, usize, SocketAddr)> {
        let id = self.h.id;
        let (nonblocking, mut ask) = self.read_mode(may_wait)?;
        let (n, whole, from) = self
            .h
            .settle(self.h.netd.until(nonblocking, self.read_limit.get(), |c| c.read_datagram(id, buf, &mut ask)))?;
        Ok((n, whole, in_family(from, self.is_six())))
    }

    /// As [`UdpSocket::recv_from_with`], leaving the datagram to be read
    /// again (`MSG_PEEK`); with an empty `buf`, its whole length alone.
    pub fn peek_from_with(&self, buf: &mut [u8], may_wait: bool) -> io::Result<(usize, usize, SocketAddr)> {
        let id = self.h.id;
        let (nonblocking, mut ask) = self.read_mode(may_wait)?;
        let (n, whole, from) =
            self.h.netd.until(nonblocking, self.read_limit.get(), |c| c.peek_datagram(id, buf, &mut ask))?;
        Ok((n, whole, in_family(from, self.is_six())))
    }

    /// The whole length of the next datagram waiting to be read, 0 with
    /// none (what `FIONREAD` says); never waits. An error the socket holds
    /// (`SO_ERROR`) is left for the next receive, as Linux's `SIOCINQ`
    /// leaves it.
    pub fn next_datagram_len(&self) -> io::Result<usize> {
        let id = self.h.id;
        let (_, mut ask) = self.read_mode(false)?;
        match self.h.netd.until(true, None, |c| c.next_datagram_len(id, &mut ask).map(Some)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }
}

/// A buffer size as an option's value: 1 to 64 MiB.
fn buffer_size(bytes: usize) -> io::Result<u64> {
    u64::try_from(bytes)
        .ok()
        .filter(|n| (1..=nagare_request::MAX_SOCKET_BUFFER).contains(n))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a buffer size outside 1 byte to 64 MiB"))
}

/// The byte count a send completion claims, if it is one the request could
/// have produced (a netd that claims more would make `write_all` slice out
/// of bounds).
pub(crate) fn sent_count(claimed: u64, offered: usize) -> io::Result<usize> {
    usize::try_from(claimed).ok().filter(|&n| n <= offered).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, format!("netd claims {claimed} bytes sent of {offered}"))
    })
}

/// Where one traced send spent its time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendTrace {
    /// The stages netd and the driver measured.
    pub stages: nagare_request::SendStages,
    /// From posting the request to taking its completion, in ns.
    pub total_ns: u64,
}

impl SendTrace {
    /// The completion reaching the application: what the total leaves
    /// after the measured stages.
    pub fn return_ns(&self) -> u64 {
        let s = &self.stages;
        let measured = s.to_netd + s.protocol + s.to_driver_post + s.to_driver + s.device + s.return_post;
        self.total_ns.saturating_sub(measured)
    }
}

/// `readiness_fd` for a socket type with a handle.
macro_rules! lends_readiness_fd {
    ($($t:ty),*) => {$(
        impl $t {
            /// A descriptor whose readiness follows this socket's, **not
            /// the socket** ([`ReadinessFd`]), for a program's own `poll`,
            /// `epoll`, mio or tokio `AsyncFd` beside kernel descriptors
            /// (`readyfd.rs`, docs/netd.md): readable while a read (or an
            /// accept) would not wait: data, the end of the stream, an
            /// error, a connection to take; writable while a write would
            /// queue something: room in the send buffer and a free region
            /// buffer. Level-triggered, and truthful after every call on
            /// the socket: a read that takes the last data makes it not
            /// readable. Each rise is an edge (for `EPOLLET`, mio, tokio);
            /// a call that would block while another thread's call on the
            /// socket is under way may leave it ready with no edge to
            /// come, so look at its level (a `poll` without waiting)
            /// before sleeping on an edge. Made on the first call (a Unix
            /// socket pair, and the session's watcher thread with the
            /// first of the session); the same one after. Only poll it:
            /// reading or writing it changes what it says. Fails when no
            /// descriptor or thread can be made, and with
            /// `ErrorKind::Unsupported` for a socket shared with another
            /// process (`share`, or adopted), whose readiness netd alone
            /// knows; a descriptor lent before the socket was shared says
            /// readable and writable from the share on.
            pub fn readiness_fd(&self) -> io::Result<ReadinessFd> {
                self.h.ready_fd()
            }
        }
    )*};
}

lends_readiness_fd!(TcpStream, TcpListener, UdpSocket);
