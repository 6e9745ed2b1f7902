//! nagare on a TAP device as the stack under a perf test.

use super::net::{canonical, Net, Recv};
use anyhow::{anyhow, bail, Result};
use nagare_core::buf::PacketBuf;
use nagare_core::iface::{Error, HEADROOM};
use nagare_core::tcp::connection::State;
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{Instant, UdpHandle};
use nagare_dev::Device;
use nagare_host::realtime::wait_for;
use nagare_host::{earliest, Host};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

/// Longest sleep in one wait.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Filler queued per send call: the payload is one chain in packet buffers
/// made once, and every send hands out references to it, never copies.
const FILL_LEN: usize = 256 * 1024;
/// Frames waiting for the device past which UDP sends report "no room"
/// instead of queueing more (the pool must keep buffers for receiving).
const MAX_TX_BACKLOG: usize = 1024;
const LISTEN_BACKLOG: usize = 16;

pub struct EngineNet {
    pub host: Host<Box<dyn Device>>,
    now: Instant,
    filler: PacketBuf,
    last_transmitted: usize,
}

/// A perf socket for datagrams of both families: the engine's UDP sockets
/// are of one family each, so one of each on the same port.
#[derive(Debug, Clone, Copy)]
pub struct DualUdp {
    v4: UdpHandle,
    v6: UdpHandle,
}

fn engine(e: Error) -> anyhow::Error {
    anyhow!("{e}")
}

impl EngineNet {
    pub fn new(host: Host<Box<dyn Device>>) -> Result<EngineNet> {
        let filler = PacketBuf::from_slice(host.iface.pool(), HEADROOM, &vec![0u8; FILL_LEN])
            .map_err(|_| anyhow!("no packet buffers for the send filler"))?;
        Ok(EngineNet { host, now: Instant::ZERO, filler, last_transmitted: 0 })
    }
}

impl EngineNet {
    /// Steps the host a little longer so the last segments (a FIN, an
    /// acknowledgement, a retransmission) go out before the device closes.
    pub fn linger(&mut self, clock: &nagare_dev::MonotonicClock, limit: Duration) {
        let end = clock.now() + limit;
        loop {
            let now = clock.now();
            if now >= end {
                return;
            }
            let worked = self.step(now).unwrap_or(false);
            if !worked && self.host.iface.tcp_ref().connection_count() == 0 && !self.host.has_pending_tx() {
                return;
            }
            if !worked {
                let _ = self.wait(Some(now + Duration::from_millis(5)), now);
            }
        }
    }
}

impl Net for EngineNet {
    type Conn = TcpHandle;
    type Listener = TcpListenerHandle;
    type Udp = DualUdp;

    fn tcp_connect(&mut self, to: SocketAddr) -> Result<TcpHandle> {
        let h = self.host.iface.tcp().connect(to, 0, self.now).map_err(engine)?;
        self.host.iface.tcp().set_nodelay(h, true).map_err(engine)?;
        Ok(h)
    }

    fn tcp_established(&mut self, c: TcpHandle) -> Result<bool> {
        match self.host.iface.tcp_ref().state(c).map_err(engine)? {
            State::SynSent | State::SynReceived => Ok(false),
            State::Closed => match self.host.iface.tcp_ref().connection(c).and_then(|conn| conn.error()) {
                Some(e) => bail!("connection failed: {e:?}"),
                None => bail!("connection closed"),
            },
            _ => Ok(true),
        }
    }

    /// On `[::]`: the engine's listener there takes IPv4 connections too.
    fn tcp_listen(&mut self, port: u16) -> Result<TcpListenerHandle> {
        self.host.iface.tcp().listen((Ipv6Addr::UNSPECIFIED, port), LISTEN_BACKLOG).map_err(engine)
    }

    fn tcp_accept(&mut self, l: TcpListenerHandle) -> Result<Option<(TcpHandle, SocketAddr)>> {
        let Some(h) = self.host.iface.tcp().accept(l).map_err(engine)? else {
            return Ok(None);
        };
        let _ = self.host.iface.tcp().set_nodelay(h, true);
        let Some(peer) = self.host.iface.tcp_ref().connection(h).map(|c| canonical(c.remote())) else {
            bail!("an accepted connection without its endpoints");
        };
        Ok(Some((h, peer)))
    }

    fn tcp_local(&mut self, c: TcpHandle) -> Option<SocketAddr> {
        self.host.iface.tcp_ref().connection(c).map(|c| canonical(c.local()))
    }

    fn tcp_send(&mut self, c: TcpHandle, data: &[u8]) -> Result<usize> {
        match self.host.iface.tcp().send(c, data, self.now) {
            Ok(n) => Ok(n),
            Err(Error::WouldBlock) => Ok(0),
            Err(e) => Err(engine(e)),
        }
    }

    fn tcp_send_fill(&mut self, c: TcpHandle, max: u64) -> Result<usize> {
        let n = max.min(self.filler.len() as u64) as usize;
        let Some(chunk) = self.filler.slice(0, n) else {
            bail!("filler slice out of range");
        };
        let rest = self.host.iface.tcp().send_buf(c, chunk, self.now).map_err(engine)?;
        Ok(n - rest.len())
    }

    fn tcp_recv(&mut self, c: TcpHandle, buf: &mut [u8]) -> Result<Recv> {
        if buf.is_empty() {
            return Ok(Recv::WouldBlock);
        }
        match self.host.iface.tcp().recv(c, buf, self.now) {
            Ok(0) => Ok(Recv::Eof),
            Ok(n) => Ok(Recv::Data(n)),
            Err(Error::WouldBlock) => Ok(Recv::WouldBlock),
            Err(e) => Err(engine(e)),
        }
    }

    fn tcp_recv_discard(&mut self, c: TcpHandle, max: usize) -> Result<Recv> {
        if max == 0 {
            return Ok(Recv::WouldBlock);
        }
        match self.host.iface.tcp().recv_buf(c, max, self.now) {
            Ok(Some(data)) => Ok(Recv::Data(data.len())),
            Ok(None) => Ok(Recv::Eof),
            Err(Error::WouldBlock) => Ok(Recv::WouldBlock),
            Err(e) => Err(engine(e)),
        }
    }

    fn tcp_shutdown(&mut self, c: TcpHandle) -> Result<()> {
        self.host.iface.tcp().shutdown(c, self.now).map_err(engine)
    }

    fn tcp_flushed(&mut self, c: TcpHandle) -> bool {
        !matches!(
            self.host.iface.tcp_ref().state(c),
            Ok(State::SynSent
                | State::SynReceived
                | State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck)
        )
    }

    fn tcp_close(&mut self, c: TcpHandle) {
        let _ = self.host.iface.tcp().close(c, self.now);
    }

    /// The IPv4 socket on `port` (or a free one), the IPv6 one on the
    /// same port: each family's ports are its own.
    fn udp_bind(&mut self, port: u16) -> Result<DualUdp> {
        let v4 = self.host.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).map_err(engine)?;
        let port = self.host.iface.udp_ref().socket(v4).map_or(port, |s| s.local().port());
        match self.host.iface.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0)) {
            Ok(v6) => Ok(DualUdp { v4, v6 }),
            Err(e) => {
                let _ = self.host.iface.udp().close(v4);
                Err(anyhow!("binding UDP port {port} over IPv6: {e}"))
            }
        }
    }

    fn udp_local_port(&self, u: DualUdp) -> u16 {
        self.host.iface.udp_ref().socket(u.v4).map_or(0, |s| s.local().port())
    }

    fn udp_send(&mut self, u: DualUdp, data: &[u8], to: SocketAddr) -> Result<bool> {
        if self.host.iface.tx_queue().len() >= MAX_TX_BACKLOG {
            return Ok(false);
        }
        let sent = match canonical(to) {
            SocketAddr::V4(to) => self.host.iface.udp().send_to(u.v4, data, to, self.now),
            SocketAddr::V6(to) => self.host.iface.udp().send_to6(u.v6, data, to, self.now),
        };
        match sent {
            Ok(()) => Ok(true),
            Err(Error::NoBuffer) => Ok(false),
            Err(e) => Err(engine(e)),
        }
    }

    /// IPv4's datagrams first, then IPv6's: a test uses one family, and
    /// stray datagrams of the other are drained as well.
    fn udp_recv(&mut self, u: DualUdp, buf: &mut [u8]) -> Result<Option<(usize, SocketAddr)>> {
        if let Some(d) = self.host.iface.udp().recv(u.v4).map_err(engine)? {
            d.payload.copy_out(0, buf);
            return Ok(Some((d.payload.len(), SocketAddr::V4(d.source))));
        }
        Ok(self.host.iface.udp().recv6(u.v6).map_err(engine)?.map(|d| {
            d.payload.copy_out(0, buf);
            (d.payload.len(), SocketAddr::V6(d.source))
        }))
    }

    fn step(&mut self, now: Instant) -> Result<bool> {
        self.now = now;
        let report = self.host.step(now);
        if report.device_error {
            // A failing device (the kernel refused a frame, the link went
            // down) is waited out, as `nagare up` does; the host logs it.
            std::thread::sleep(Duration::from_millis(1));
            self.last_transmitted = 0;
            return Ok(false);
        }
        self.last_transmitted = report.transmitted;
        Ok(report.did_work())
    }

    fn wait(&mut self, until: Option<Instant>, now: Instant) -> Result<()> {
        let next = earliest(self.host.poll_at(), until);
        let timeout = next.map_or(MAX_WAIT, |t| t.saturating_since(now)).min(MAX_WAIT);
        if timeout.is_zero() {
            return Ok(());
        }
        // Wait for POLLOUT only if the last transmit made progress: after
        // ENOBUFS a TAP stays writable, and polling for it would spin.
        let pending_tx = self.host.has_pending_tx();
        if pending_tx && self.last_transmitted == 0 {
            std::thread::sleep(Duration::from_micros(200).min(timeout));
            return Ok(());
        }
        wait_for(self.host.device.raw_fd(), pending_tx, timeout)?;
        Ok(())
    }

    fn stats_line(&self) -> Option<String> {
        let counters = self.host.iface.counters();
        let shown: Vec<String> = counters
            .iter()
            .filter(|(name, value)| {
                *value != 0
                    && (name.starts_with("drop_")
                        || matches!(
                            *name,
                            "tcp_segments_sent" | "tcp_segments_received" | "udp_sent" | "udp_delivered"
                        ))
            })
            .map(|(name, value)| format!("{name} {value}"))
            .collect();
        let mut line = shown.join(", ");
        if self.host.device_errors > 0 {
            line.push_str(&format!(", device_errors {}", self.host.device_errors));
        }
        Some(line)
    }
}
