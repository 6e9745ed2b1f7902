//! A perf test's stack as an application of a running netd (`--via`):
//! the `nagare` client library in non-blocking mode, waiting in one
//! `poll` request over every socket. TCP bulk data goes through the
//! std-shaped calls (`write`, `read`: one copy each in the application)
//! or, with `zero_copy`, through `alloc_tx`/`send_buf`/`recv_buf`, as the
//! engine's own perf stack lends and takes its buffers.

use super::net::{canonical, insert, Net, Recv};
use anyhow::{bail, Context, Result};
use nagare::net::{TcpListener, TcpStream, UdpSocket};
use nagare::poll::{poll, PollEntry, READABLE, WRITABLE};
use nagare::Session;
use nagare_core::Instant;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait in one poll, so a stop request is noticed.
const MAX_WAIT: Duration = Duration::from_millis(50);

struct Stream {
    stream: TcpStream,
    want_write: bool,
}

pub struct ViaNet {
    netd: Session,
    streams: Vec<Option<Stream>>,
    listeners: Vec<TcpListener>,
    udps: Vec<Option<UdpSocket>>,
    /// Zeros to send and room to read into: one region buffer.
    scratch: Vec<u8>,
    /// TCP bulk data through the zero-copy calls.
    zero_copy: bool,
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

/// `to` if it is IPv4's: through netd a perf test speaks IPv4 only.
fn ipv4_only(to: SocketAddr) -> Result<SocketAddrV4> {
    match canonical(to) {
        SocketAddr::V4(to) => Ok(to),
        SocketAddr::V6(to) => bail!("{to}: perf through netd (--via) reaches IPv4 destinations only"),
    }
}

impl ViaNet {
    pub fn connect(socket: &Path, zero_copy: bool) -> Result<ViaNet> {
        let netd = Session::connect(socket)?;
        let scratch = vec![0; netd.max_chunk()];
        Ok(ViaNet { netd, streams: Vec::new(), listeners: Vec::new(), udps: Vec::new(), scratch, zero_copy })
    }

    fn stream(&mut self, c: usize) -> Result<&mut Stream> {
        match self.streams.get_mut(c) {
            Some(Some(s)) => Ok(s),
            _ => bail!("no such connection"),
        }
    }

    fn udp(&self, u: usize) -> Result<&UdpSocket> {
        match self.udps.get(u) {
            Some(Some(s)) => Ok(s),
            _ => bail!("no such UDP socket"),
        }
    }

    fn add_stream(&mut self, stream: TcpStream) -> Result<usize> {
        stream.set_nonblocking(true)?;
        Ok(insert(&mut self.streams, Stream { stream, want_write: false }))
    }

    fn write(&mut self, c: usize, data: Option<&[u8]>, max: usize) -> Result<usize> {
        let Some(Some(s)) = self.streams.get_mut(c) else {
            bail!("no such connection");
        };
        let bytes = data.unwrap_or(&self.scratch[..max.min(self.scratch.len())]);
        match s.stream.write(bytes) {
            Ok(n) => Ok(n),
            Err(e) if would_block(&e) => {
                s.want_write = true;
                Ok(0)
            }
            Err(e) => Err(e).context("sending"),
        }
    }

    fn read(&mut self, c: usize, into: Option<&mut [u8]>, max: usize) -> Result<Recv> {
        let Some(Some(s)) = self.streams.get_mut(c) else {
            bail!("no such connection");
        };
        let buf = match into {
            Some(b) => b,
            None => {
                let n = max.min(self.scratch.len());
                &mut self.scratch[..n]
            }
        };
        if buf.is_empty() {
            return Ok(Recv::WouldBlock);
        }
        match s.stream.read(buf) {
            Ok(0) => Ok(Recv::Eof),
            Ok(n) => Ok(Recv::Data(n)),
            Err(e) if would_block(&e) => Ok(Recv::WouldBlock),
            Err(e) => Err(e).context("receiving"),
        }
    }

    /// Sends up to `max` bytes of whatever a region buffer holds, lent
    /// without a copy.
    fn lend(&mut self, c: usize, max: usize) -> Result<usize> {
        let Some(Some(s)) = self.streams.get_mut(c) else {
            bail!("no such connection");
        };
        let buf = match self.netd.alloc_tx_with(false) {
            Ok(b) => b,
            Err(e) if would_block(&e) => {
                s.want_write = true;
                return Ok(0);
            }
            Err(e) => return Err(e).context("taking a send buffer"),
        };
        let n = max.min(buf.len());
        match s.stream.send_buf(buf, n) {
            Ok(n) => Ok(n),
            Err(e) if would_block(&e) => {
                s.want_write = true;
                Ok(0)
            }
            Err(e) => Err(e).context("sending"),
        }
    }

    /// Takes up to `max` received bytes where netd put them, and drops them.
    fn take(&mut self, c: usize, max: usize) -> Result<Recv> {
        match self.stream(c)?.stream.recv_buf(max) {
            Ok(b) if b.is_empty() => Ok(Recv::Eof),
            Ok(b) => Ok(Recv::Data(b.len())),
            Err(e) if would_block(&e) => Ok(Recv::WouldBlock),
            Err(e) => Err(e).context("receiving"),
        }
    }
}

impl Net for ViaNet {
    type Conn = usize;
    type Listener = usize;
    type Udp = usize;

    fn tcp_connect(&mut self, to: SocketAddr) -> Result<usize> {
        let to = ipv4_only(to)?;
        let stream = TcpStream::connect_timeout_via(&self.netd, &SocketAddr::V4(to), CONNECT_TIMEOUT)
            .with_context(|| format!("connecting to {to} through netd"))?;
        self.add_stream(stream)
    }

    fn tcp_established(&mut self, c: usize) -> Result<bool> {
        self.stream(c).map(|_| true)
    }

    fn tcp_listen(&mut self, port: u16) -> Result<usize> {
        let l = TcpListener::bind_via(&self.netd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .with_context(|| format!("listening on TCP port {port} through netd"))?;
        l.set_nonblocking(true)?;
        self.listeners.push(l);
        Ok(self.listeners.len() - 1)
    }

    fn tcp_accept(&mut self, l: usize) -> Result<Option<(usize, SocketAddr)>> {
        let Some(listener) = self.listeners.get(l) else {
            bail!("no such listener");
        };
        match listener.accept() {
            Ok((stream, peer)) => Ok(Some((self.add_stream(stream)?, canonical(peer)))),
            Err(e) if would_block(&e) => Ok(None),
            Err(e) => Err(e).context("accepting"),
        }
    }

    fn tcp_local(&mut self, c: usize) -> Option<SocketAddr> {
        self.stream(c).ok()?.stream.local_addr().ok().map(canonical)
    }

    fn tcp_send(&mut self, c: usize, data: &[u8]) -> Result<usize> {
        self.write(c, Some(data), data.len())
    }

    fn tcp_send_fill(&mut self, c: usize, max: u64) -> Result<usize> {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        if self.zero_copy {
            self.lend(c, max)
        } else {
            self.write(c, None, max)
        }
    }

    fn tcp_recv(&mut self, c: usize, buf: &mut [u8]) -> Result<Recv> {
        let max = buf.len();
        self.read(c, Some(buf), max)
    }

    fn tcp_recv_discard(&mut self, c: usize, max: usize) -> Result<Recv> {
        if self.zero_copy {
            self.take(c, max)
        } else {
            self.read(c, None, max)
        }
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
        let socket = UdpSocket::bind_via(&self.netd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .with_context(|| format!("binding UDP port {port} through netd"))?;
        socket.set_nonblocking(true)?;
        Ok(insert(&mut self.udps, socket))
    }

    fn udp_local_port(&self, u: usize) -> u16 {
        self.udp(u).ok().and_then(|s| s.local_addr().ok()).map_or(0, |a| a.port())
    }

    fn udp_send(&mut self, u: usize, data: &[u8], to: SocketAddr) -> Result<bool> {
        match self.udp(u)?.send_to(data, ipv4_only(to)?) {
            Ok(_) => Ok(true),
            Err(e) if would_block(&e) || e.raw_os_error() == Some(libc::ENOBUFS) => Ok(false),
            Err(e) => Err(e).context("sending a datagram"),
        }
    }

    fn udp_recv(&mut self, u: usize, buf: &mut [u8]) -> Result<Option<(usize, SocketAddr)>> {
        match self.udp(u)?.recv_from_trunc(buf) {
            Ok((_, whole, from)) => Ok(Some((whole, canonical(from)))),
            Err(e) if would_block(&e) => Ok(None),
            Err(e) => Err(e).context("receiving a datagram"),
        }
    }

    fn step(&mut self, _now: Instant) -> Result<bool> {
        Ok(false)
    }

    fn wait(&mut self, until: Option<Instant>, now: Instant) -> Result<()> {
        let limit = until.map_or(MAX_WAIT, |t| t.saturating_since(now)).min(MAX_WAIT);
        if limit.is_zero() {
            return Ok(());
        }
        let mut entries: Vec<PollEntry> = Vec::new();
        let mut add = |socket, interest| entries.push(PollEntry { socket, interest, ready: 0 });
        for l in &self.listeners {
            add(l.socket_id(), READABLE);
        }
        for s in self.streams.iter_mut().flatten() {
            add(s.stream.socket_id(), if s.want_write { READABLE | WRITABLE } else { READABLE });
            s.want_write = false;
        }
        for u in self.udps.iter().flatten() {
            add(u.socket_id(), READABLE);
        }
        if entries.is_empty() {
            std::thread::sleep(limit);
            return Ok(());
        }
        poll(&self.netd, &mut entries, Some(limit)).context("waiting through netd")?;
        Ok(())
    }
}
