//! The Linux kernel's stack through non-blocking `std::net` sockets, for
//! the side of a test that is not nagare. Listeners and UDP sockets are
//! bound to `[::]`, which takes IPv4 too while `net.ipv6.bindv6only` is 0
//! (Linux's default), and to `0.0.0.0` where the kernel has no IPv6.

use super::net::{canonical, insert, Net, Recv};
use anyhow::{bail, Context, Result};
use nagare_core::Instant;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long a kernel `connect` may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest sleep in one wait.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Socket buffer asked for UDP sockets (the kernel caps it at rmem_max).
const UDP_SOCKET_BUFFER: libc::c_int = 4 << 20;
const SCRATCH: usize = 256 * 1024;
/// How long a listener that had nothing to accept is left alone unless a
/// wait finds it readable first. A failed `accept` is no cheap call: the
/// kernel makes and frees a socket file for it, which costs a server loop
/// that tried one on every turn as much as its own request/response work.
const ACCEPT_RETRY: Duration = Duration::from_millis(5);

struct Stream {
    stream: TcpStream,
    want_write: bool,
}

struct Listener {
    listener: TcpListener,
    /// When an `accept` found the queue empty, until a wait finds the
    /// listener readable (`None`: worth trying).
    empty_at: Option<std::time::Instant>,
}

struct Udp {
    socket: UdpSocket,
    /// Bound to `[::]`: IPv4 destinations are given IPv4-mapped.
    v6: bool,
    /// The segment size set with `UDP_SEGMENT` (0: none): a send of more
    /// is cut into datagrams of it by the kernel.
    segment: usize,
}

pub struct KernelNet {
    streams: Vec<Option<Stream>>,
    listeners: Vec<Listener>,
    udps: Vec<Option<Udp>>,
    /// Zeros to send and room to read into.
    scratch: Vec<u8>,
}

impl Default for KernelNet {
    fn default() -> Self {
        KernelNet { streams: Vec::new(), listeners: Vec::new(), udps: Vec::new(), scratch: vec![0; SCRATCH] }
    }
}

/// Binds `port` on `[::]` (both families), or on `0.0.0.0` if the kernel
/// has no IPv6.
fn bind_any<T>(port: u16, bind: impl Fn(SocketAddr) -> io::Result<T>) -> io::Result<T> {
    match bind((Ipv6Addr::UNSPECIFIED, port).into()) {
        Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) || e.kind() == io::ErrorKind::AddrNotAvailable => {
            bind((Ipv4Addr::UNSPECIFIED, port).into())
        }
        other => other,
    }
}

/// `to` as an IPv6 socket (`v6`) or an IPv4 one takes it: an IPv4
/// destination of an IPv6 socket as its IPv4-mapped address.
fn destination_for(v6: bool, to: SocketAddr) -> SocketAddr {
    match to {
        SocketAddr::V4(v4) if v6 => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        _ => to,
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

fn set_buffer(socket: &UdpSocket, option: libc::c_int) {
    let value = UDP_SOCKET_BUFFER;
    // SAFETY: a valid socket and a c_int option value of the right size.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

impl KernelNet {
    fn stream(&mut self, c: usize) -> Result<&mut Stream> {
        match self.streams.get_mut(c) {
            Some(Some(s)) => Ok(s),
            _ => bail!("no such connection"),
        }
    }

    fn udp(&self, u: usize) -> Result<&Udp> {
        match self.udps.get(u) {
            Some(Some(s)) => Ok(s),
            _ => bail!("no such UDP socket"),
        }
    }

    fn add_stream(&mut self, stream: TcpStream) -> Result<usize> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(insert(&mut self.streams, Stream { stream, want_write: false }))
    }

    fn read(&mut self, c: usize, len: usize) -> Result<Recv> {
        let len = len.min(self.scratch.len());
        let Some(Some(s)) = self.streams.get_mut(c) else {
            bail!("no such connection");
        };
        read_into(&mut s.stream, &mut self.scratch[..len])
    }
}

fn read_into(stream: &mut TcpStream, buf: &mut [u8]) -> Result<Recv> {
    if buf.is_empty() {
        return Ok(Recv::WouldBlock);
    }
    match stream.read(buf) {
        Ok(0) => Ok(Recv::Eof),
        Ok(n) => Ok(Recv::Data(n)),
        Err(e) if would_block(&e) => Ok(Recv::WouldBlock),
        Err(e) => Err(e).context("receiving"),
    }
}

impl Net for KernelNet {
    type Conn = usize;
    type Listener = usize;
    type Udp = usize;

    fn tcp_connect(&mut self, to: SocketAddr) -> Result<usize> {
        let stream = TcpStream::connect_timeout(&to, CONNECT_TIMEOUT).with_context(|| format!("connecting to {to}"))?;
        self.add_stream(stream)
    }

    fn tcp_established(&mut self, c: usize) -> Result<bool> {
        self.stream(c).map(|_| true)
    }

    fn tcp_listen(&mut self, port: u16) -> Result<usize> {
        let listener = bind_any(port, TcpListener::bind).with_context(|| format!("listening on TCP port {port}"))?;
        listener.set_nonblocking(true)?;
        self.listeners.push(Listener { listener, empty_at: None });
        Ok(self.listeners.len() - 1)
    }

    fn tcp_accept(&mut self, l: usize) -> Result<Option<(usize, SocketAddr)>> {
        let Some(listener) = self.listeners.get_mut(l) else {
            bail!("no such listener");
        };
        if listener.empty_at.is_some_and(|at| at.elapsed() < ACCEPT_RETRY) {
            return Ok(None);
        }
        match listener.listener.accept() {
            Ok((stream, peer)) => Ok(Some((self.add_stream(stream)?, canonical(peer)))),
            Err(e) if would_block(&e) => {
                listener.empty_at = Some(std::time::Instant::now());
                Ok(None)
            }
            // A connection that died in the queue is not the listener's failure.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => Ok(None),
            Err(e) => Err(e).context("accepting"),
        }
    }

    fn tcp_local(&mut self, c: usize) -> Option<SocketAddr> {
        self.stream(c).ok()?.stream.local_addr().ok().map(canonical)
    }

    fn tcp_send(&mut self, c: usize, data: &[u8]) -> Result<usize> {
        let s = self.stream(c)?;
        match s.stream.write(data) {
            Ok(n) => Ok(n),
            Err(e) if would_block(&e) => {
                s.want_write = true;
                Ok(0)
            }
            Err(e) => Err(e).context("sending"),
        }
    }

    fn tcp_send_fill(&mut self, c: usize, max: u64) -> Result<usize> {
        let n = (max.min(self.scratch.len() as u64)) as usize;
        let Some(Some(s)) = self.streams.get_mut(c) else {
            bail!("no such connection");
        };
        match s.stream.write(&self.scratch[..n]) {
            Ok(n) => Ok(n),
            Err(e) if would_block(&e) => {
                s.want_write = true;
                Ok(0)
            }
            Err(e) => Err(e).context("sending"),
        }
    }

    fn tcp_recv(&mut self, c: usize, buf: &mut [u8]) -> Result<Recv> {
        let s = self.stream(c)?;
        read_into(&mut s.stream, buf)
    }

    fn tcp_recv_discard(&mut self, c: usize, max: usize) -> Result<Recv> {
        self.read(c, max)
    }

    fn tcp_shutdown(&mut self, c: usize) -> Result<()> {
        self.stream(c)?.stream.shutdown(Shutdown::Write).context("shutting down")
    }

    fn tcp_close(&mut self, c: usize) {
        if let Some(slot) = self.streams.get_mut(c) {
            *slot = None;
        }
    }

    fn udp_bind(&mut self, port: u16) -> Result<usize> {
        let socket = bind_any(port, UdpSocket::bind).with_context(|| format!("binding UDP port {port}"))?;
        socket.set_nonblocking(true)?;
        set_buffer(&socket, libc::SO_RCVBUF);
        set_buffer(&socket, libc::SO_SNDBUF);
        let v6 = socket.local_addr().is_ok_and(|a| a.is_ipv6());
        Ok(insert(&mut self.udps, Udp { socket, v6, segment: 0 }))
    }

    fn udp_local_port(&self, u: usize) -> u16 {
        self.udp(u).ok().and_then(|u| u.socket.local_addr().ok()).map_or(0, |a| a.port())
    }

    fn udp_send(&mut self, u: usize, data: &[u8], to: SocketAddr) -> Result<bool> {
        let udp = self.udp(u)?;
        match udp.socket.send_to(data, destination_for(udp.v6, to)) {
            Ok(_) => Ok(true),
            Err(e) if would_block(&e) || e.raw_os_error() == Some(libc::ENOBUFS) => Ok(false),
            // An ICMP error from an earlier datagram; the loss shows in the counts.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(true),
            Err(e) => Err(e).context("sending a datagram"),
        }
    }

    /// One `sendto` for the lot, cut by the kernel's UDP segmentation
    /// offload (`UDP_SEGMENT`, set on the socket once per size).
    fn udp_send_segments(&mut self, u: usize, data: &[u8], segment: usize, to: SocketAddr) -> Result<usize> {
        let udp = self.udps.get_mut(u).and_then(Option::as_mut).context("no such UDP socket")?;
        let Ok(size) = libc::c_int::try_from(segment) else { bail!("segment of {segment} bytes") };
        if udp.segment != segment {
            // SAFETY: setsockopt with an int of the size given, on a socket
            // this struct owns.
            let rc = unsafe {
                libc::setsockopt(
                    udp.socket.as_raw_fd(),
                    libc::SOL_UDP,
                    libc::UDP_SEGMENT,
                    std::ptr::from_ref(&size).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error()).context("setting UDP_SEGMENT (UDP segmentation offload)");
            }
            udp.segment = segment;
        }
        match udp.socket.send_to(data, destination_for(udp.v6, to)) {
            Ok(_) => Ok(data.len().div_ceil(segment.max(1))),
            Err(e) if would_block(&e) || e.raw_os_error() == Some(libc::ENOBUFS) => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(data.len().div_ceil(segment.max(1))),
            Err(e) => Err(e).context("sending datagrams"),
        }
    }

    fn udp_recv(&mut self, u: usize, buf: &mut [u8]) -> Result<Option<(usize, SocketAddr)>> {
        let Some(Some(Udp { socket, .. })) = self.udps.get(u) else {
            bail!("no such UDP socket");
        };
        match socket.recv_from(&mut self.scratch) {
            Ok((n, from)) => {
                let copy = n.min(buf.len());
                buf[..copy].copy_from_slice(&self.scratch[..copy]);
                Ok(Some((n, canonical(from))))
            }
            Err(e) if would_block(&e) || e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
            Err(e) => Err(e).context("receiving a datagram"),
        }
    }

    fn step(&mut self, _now: Instant) -> Result<bool> {
        Ok(false)
    }

    fn wait(&mut self, until: Option<Instant>, now: Instant) -> Result<()> {
        let timeout = until.map_or(MAX_WAIT, |t| t.saturating_since(now)).min(MAX_WAIT);
        if timeout.is_zero() {
            return Ok(());
        }
        let mut fds: Vec<libc::pollfd> =
            Vec::with_capacity(self.streams.len() + self.listeners.len() + self.udps.len());
        let mut add = |fd, events| fds.push(libc::pollfd { fd, events, revents: 0 });
        for l in &self.listeners {
            add(l.listener.as_raw_fd(), libc::POLLIN);
        }
        for s in self.streams.iter_mut().flatten() {
            let events = if s.want_write { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
            s.want_write = false;
            add(s.stream.as_raw_fd(), events);
        }
        for u in self.udps.iter().flatten() {
            add(u.socket.as_raw_fd(), libc::POLLIN);
        }
        // Round up: a timeout under a millisecond must sleep, not spin.
        let millis = timeout.as_micros().div_ceil(1000) as libc::c_int;
        if fds.is_empty() {
            std::thread::sleep(timeout);
            return Ok(());
        }
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e).context("poll");
            }
        }
        // The listeners come first in `fds`.
        for (l, fd) in self.listeners.iter_mut().zip(&fds) {
            if fd.revents != 0 {
                l.empty_at = None;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that had nothing to accept is left alone until a wait
    /// finds it readable, and then gives the connection that came.
    #[test]
    fn an_empty_listener_is_tried_again_once_a_wait_finds_it_readable() {
        let mut net = KernelNet::default();
        let l = net.tcp_listen(0).unwrap();
        let port = net.listeners[l].listener.local_addr().unwrap().port();
        assert!(net.tcp_accept(l).unwrap().is_none());
        assert!(net.listeners[l].empty_at.is_some(), "an empty queue is remembered");
        let _client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        let start = nagare_core::Instant::from_millis(0);
        net.wait(Some(start + Duration::from_secs(5)), start).unwrap();
        assert!(net.listeners[l].empty_at.is_none(), "the wait found it readable");
        let (c, peer) = net.tcp_accept(l).unwrap().expect("the connection");
        assert_eq!(peer.ip(), std::net::IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(net.tcp_established(c).unwrap());
    }
}
