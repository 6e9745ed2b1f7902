//! Services a host runs on its own engine (as inetd's internal services):
//! echo (RFC 862) and discard (RFC 863) on TCP and UDP, and a static
//! HTTP/1.1 file server.

use crate::http::server::HttpConnection;
use nagare_core::buf::PacketBuf;
use nagare_core::iface::Error;
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{Instant, Interface, UdpHandle};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
use std::path::PathBuf;

pub const ECHO_PORT: u16 = 7;
pub const DISCARD_PORT: u16 = 9;
pub const HTTP_PORT: u16 = 80;

/// Connections a listener may have waiting for accept.
const BACKLOG: usize = 128;
/// Bytes taken from a connection per step, so one busy client cannot
/// starve the others.
const RECV_QUANTUM: usize = 256 * 1024;

/// Which services a host runs.
#[derive(Clone, Debug, Default)]
pub struct ServiceConfig {
    /// TCP and UDP echo on port 7.
    pub echo: bool,
    /// TCP and UDP discard on port 9.
    pub discard: bool,
    /// Serve the files under this directory over HTTP/1.1 on port 80.
    pub http: Option<PathBuf>,
    /// UDP echo on port 7 even without `echo`.
    pub udp_echo: bool,
}

impl ServiceConfig {
    /// Starts them on `iface`; returns what is offered, for a start-up
    /// line ("ping" first: the engine always answers it).
    pub fn enable(&self, services: &mut Services, iface: &mut Interface) -> io::Result<Vec<String>> {
        let engine = |e: Error| io::Error::other(e.to_string());
        let mut offered = vec!["ping".to_string()];
        if self.echo {
            services.enable_echo(iface).map_err(engine)?;
            offered.push(format!("TCP+UDP echo on {ECHO_PORT}"));
        } else if self.udp_echo {
            services.enable_udp_echo(iface).map_err(engine)?;
            offered.push(format!("UDP echo on {ECHO_PORT}"));
        }
        if self.discard {
            services.enable_discard(iface).map_err(engine)?;
            offered.push(format!("TCP+UDP discard on {DISCARD_PORT}"));
        }
        if let Some(root) = &self.http {
            if !root.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("--http {}: not a directory", root.display()),
                ));
            }
            services.enable_http(iface, root.clone()).map_err(engine)?;
            offered.push(format!("HTTP on {HTTP_PORT} from {}", root.display()));
        }
        Ok(offered)
    }
}

/// What the services did.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServiceStats {
    pub udp_echoed: u64,
    pub udp_discarded: u64,
    pub udp_failed: u64,
    pub tcp_accepted: u64,
    pub tcp_echoed_bytes: u64,
    pub tcp_discarded_bytes: u64,
    pub http_requests: u64,
    pub http_bytes_sent: u64,
}

enum Kind {
    Echo { pending: PacketBuf },
    Discard,
    Http(Box<HttpConnection>),
}

struct Served {
    handle: TcpHandle,
    kind: Kind,
    /// Our side has sent its FIN.
    shut: bool,
}

#[derive(Default)]
pub struct Services {
    udp_echo: Option<UdpHandle>,
    udp_discard: Option<UdpHandle>,
    tcp_echo: Option<TcpListenerHandle>,
    tcp_discard: Option<TcpListenerHandle>,
    http: Option<(TcpListenerHandle, PathBuf)>,
    connections: Vec<Served>,
    pub stats: ServiceStats,
}

fn any(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)
}

/// Every address of either family: a TCP listener here is dual stack.
fn any_family(port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0)
}

impl Services {
    /// Echo on TCP and UDP port 7 (TCP over either family).
    pub fn enable_echo(&mut self, iface: &mut Interface) -> Result<(), Error> {
        self.udp_echo = Some(iface.udp().bind(any(ECHO_PORT))?);
        self.tcp_echo = Some(iface.tcp().listen(any_family(ECHO_PORT), BACKLOG)?);
        Ok(())
    }

    /// UDP echo only (what `nagare up` always offers).
    pub fn enable_udp_echo(&mut self, iface: &mut Interface) -> Result<(), Error> {
        self.udp_echo = Some(iface.udp().bind(any(ECHO_PORT))?);
        Ok(())
    }

    /// Discard on TCP and UDP port 9 (TCP over either family).
    pub fn enable_discard(&mut self, iface: &mut Interface) -> Result<(), Error> {
        self.udp_discard = Some(iface.udp().bind(any(DISCARD_PORT))?);
        self.tcp_discard = Some(iface.tcp().listen(any_family(DISCARD_PORT), BACKLOG)?);
        Ok(())
    }

    /// Static files from `root` over HTTP/1.1 on port 80, over either
    /// family.
    pub fn enable_http(&mut self, iface: &mut Interface, root: PathBuf) -> Result<(), Error> {
        self.http = Some((iface.tcp().listen(any_family(HTTP_PORT), BACKLOG)?, root));
        Ok(())
    }

    /// Runs every service once; returns whether anything happened.
    pub fn serve(&mut self, iface: &mut Interface, now: Instant) -> bool {
        let mut busy = self.serve_udp(iface, now);
        busy |= self.accept(iface);
        let mut index = 0;
        while index < self.connections.len() {
            let (progress, done) = serve_connection(&mut self.connections[index], iface, &mut self.stats, now);
            busy |= progress;
            if done {
                let served = self.connections.swap_remove(index);
                let _ = iface.tcp().close(served.handle, now);
            } else {
                index += 1;
            }
        }
        busy
    }

    fn serve_udp(&mut self, iface: &mut Interface, now: Instant) -> bool {
        let mut busy = false;
        if let Some(echo) = self.udp_echo {
            // The echoed datagram is the received one: its buffers go back
            // out with new headers written into the headroom the old ones left.
            while let Ok(Some(datagram)) = iface.udp().recv(echo) {
                busy = true;
                match iface.udp().send_buf(echo, datagram.payload, datagram.source, now) {
                    Ok(()) => self.stats.udp_echoed += 1,
                    Err(_) => self.stats.udp_failed += 1,
                }
            }
        }
        if let Some(discard) = self.udp_discard {
            while let Ok(Some(_)) = iface.udp().recv(discard) {
                busy = true;
                self.stats.udp_discarded += 1;
            }
        }
        busy
    }

    fn accept(&mut self, iface: &mut Interface) -> bool {
        let mut busy = false;
        let listeners =
            [self.tcp_echo.map(|l| (l, 0)), self.tcp_discard.map(|l| (l, 1)), self.http.as_ref().map(|(l, _)| (*l, 2))];
        for (listener, which) in listeners.into_iter().flatten() {
            while let Ok(Some(handle)) = iface.tcp().accept(listener) {
                busy = true;
                self.stats.tcp_accepted += 1;
                let kind = match which {
                    0 => Kind::Echo { pending: PacketBuf::new() },
                    1 => Kind::Discard,
                    _ => match &self.http {
                        Some((_, root)) => Kind::Http(Box::new(HttpConnection::new(root.clone()))),
                        None => Kind::Discard,
                    },
                };
                let _ = iface.tcp().set_nodelay(handle, true);
                self.connections.push(Served { handle, kind, shut: false });
            }
        }
        busy
    }
}

/// Serves one connection; returns (did something, finished).
fn serve_connection(
    served: &mut Served,
    iface: &mut Interface,
    stats: &mut ServiceStats,
    now: Instant,
) -> (bool, bool) {
    let handle = served.handle;
    let mut busy = false;
    match &mut served.kind {
        Kind::Echo { pending } => {
            // Send back what is waiting before taking more: the receive
            // window then throttles a client that will not read its echo.
            if !pending.is_empty() {
                match iface.tcp().send_buf(handle, std::mem::take(pending), now) {
                    Ok(rest) => {
                        busy |= rest.len() < pending.len() || rest.is_empty();
                        *pending = rest;
                    }
                    Err(_) => return (true, true),
                }
            }
            if pending.is_empty() {
                match iface.tcp().recv_buf(handle, RECV_QUANTUM, now) {
                    Ok(Some(data)) => {
                        busy = true;
                        stats.tcp_echoed_bytes += data.len() as u64;
                        match iface.tcp().send_buf(handle, data, now) {
                            Ok(rest) => *pending = rest,
                            Err(_) => return (true, true),
                        }
                    }
                    Ok(None) => {
                        if !served.shut {
                            served.shut = true;
                            let _ = iface.tcp().shutdown(handle, now);
                        }
                        return (true, finished(iface, handle));
                    }
                    Err(Error::WouldBlock) => {}
                    Err(_) => return (true, true),
                }
            }
        }
        Kind::Discard => loop {
            match iface.tcp().recv_buf(handle, RECV_QUANTUM, now) {
                Ok(Some(data)) => {
                    busy = true;
                    stats.tcp_discarded_bytes += data.len() as u64;
                }
                Ok(None) => {
                    if !served.shut {
                        served.shut = true;
                        let _ = iface.tcp().shutdown(handle, now);
                    }
                    return (true, finished(iface, handle));
                }
                Err(Error::WouldBlock) => break,
                Err(_) => return (true, true),
            }
        },
        Kind::Http(http) => {
            let outcome = http.serve(iface, handle, now);
            stats.http_requests += outcome.requests;
            stats.http_bytes_sent += outcome.bytes_sent;
            busy |= outcome.progress;
            if outcome.close && !served.shut {
                served.shut = true;
                let _ = iface.tcp().shutdown(handle, now);
            }
            if outcome.failed {
                return (true, true);
            }
            if served.shut {
                return (busy, finished(iface, handle));
            }
        }
    }
    (busy, false)
}

/// Whether a connection we have shut down is done with (the peer closed
/// too, or it failed).
fn finished(iface: &Interface, handle: TcpHandle) -> bool {
    use nagare_core::tcp::connection::State;
    match iface.tcp_ref().state(handle) {
        Ok(State::Closed | State::TimeWait | State::LastAck | State::Closing) => true,
        Ok(State::FinWait2) => iface.tcp_ref().connection(handle).is_some_and(|c| c.at_eof()),
        Ok(_) => false,
        Err(_) => true,
    }
}
