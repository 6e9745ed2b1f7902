//! `nagare perf client`: connect, agree on a test, run one end of it,
//! and sum it up.

use super::net::Net;
use super::protocol::{Message, Mode, Proto, Start};
use super::report::{Progress, Summary};
use super::roles::{Ctl, End, Poll, Role, RoleSetup};
use super::Task;
use anyhow::{bail, Result};
use nagare_core::Instant;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Duration;

/// How long connecting and agreeing on a test may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait, after a test, for the last bytes to be acknowledged.
const LINGER: Duration = Duration::from_secs(2);

pub struct ClientConfig {
    pub server: SocketAddr,
    pub start: Start,
    /// The whole run's limit.
    pub timeout: Duration,
    pub progress: bool,
    /// Datagrams per UDP send call.
    pub udp_batch: usize,
}

enum State<N: Net> {
    Init,
    Connecting {
        conn: N::Conn,
        since: Instant,
    },
    Handshake {
        ctl: Ctl<N::Conn>,
        since: Instant,
        udp: Option<N::Udp>,
    },
    Running {
        ctl: Ctl<N::Conn>,
        role: Role<N>,
    },
    /// Over; waiting (briefly) until our last bytes are acknowledged.
    Lingering {
        conn: N::Conn,
        until: Instant,
    },
    Done,
}

pub struct Client<N: Net> {
    config: ClientConfig,
    state: State<N>,
    progress: Progress,
    deadline: Option<Instant>,
    /// This end of the control connection, once it is up.
    local: Option<SocketAddr>,
    pub summary: Option<Summary>,
}

impl<N: Net> Client<N> {
    pub fn new(config: ClientConfig) -> Client<N> {
        let progress = Progress::new(config.progress);
        Client { config, state: State::Init, progress, deadline: None, local: None, summary: None }
    }

    fn summarize(&self, role: &Role<N>, now: Instant) -> Result<Summary> {
        let start = &self.config.start;
        let outcome = role.outcome(now);
        let summary = Summary {
            server: self.config.server.to_string(),
            client: self.local.map(|a| a.to_string()).unwrap_or_default(),
            proto: start.proto,
            mode: start.mode,
            len: start.len,
            sender: outcome.sent,
            receiver: outcome.received,
            lost: outcome.sent.packets.saturating_sub(outcome.received.packets),
            out_of_order: outcome.out_of_order,
            latency: outcome.latency.map(|l| l.summary()),
        };
        match (start.proto, start.mode) {
            (Proto::Tcp, Mode::Rr) => {
                let theirs = role.peer_transactions().unwrap_or(0);
                if theirs != summary.receiver.packets {
                    bail!("the server answered {theirs} transactions, the client counted {}", summary.receiver.packets);
                }
            }
            (Proto::Udp, Mode::Rr) => {
                // Responses can be lost after the server sent them, never
                // answered without it.
                let theirs = role.peer_transactions().unwrap_or(0);
                if theirs < summary.receiver.packets {
                    bail!("the server answered {theirs} requests, the client counted {}", summary.receiver.packets);
                }
            }
            (Proto::Tcp, _) => {
                if summary.sender.bytes != summary.receiver.bytes {
                    bail!("{} bytes sent but {} received", summary.sender.bytes, summary.receiver.bytes);
                }
                if start.bytes > 0 && summary.receiver.bytes != start.bytes {
                    bail!("{} bytes asked for but {} moved", start.bytes, summary.receiver.bytes);
                }
            }
            (Proto::Udp, _) => {}
        }
        Ok(summary)
    }

    fn step(&mut self, net: &mut N, now: Instant) -> Result<ControlFlow<(), Option<Instant>>> {
        let deadline = *self.deadline.get_or_insert(now + self.config.timeout);
        if now >= deadline && !matches!(self.state, State::Lingering { .. }) {
            bail!("the test did not finish within {:?}", self.config.timeout);
        }
        let wake = |w: Option<Instant>| Some(w.map_or(deadline, |w| w.min(deadline)));
        match std::mem::replace(&mut self.state, State::Done) {
            State::Init => {
                let conn = net.tcp_connect(self.config.server)?;
                self.state = State::Connecting { conn, since: now };
                Ok(ControlFlow::Continue(Some(now)))
            }
            State::Connecting { conn, since } => {
                if !net.tcp_established(conn)? {
                    if now.saturating_since(since) > HANDSHAKE_TIMEOUT {
                        net.tcp_close(conn);
                        bail!("could not connect to {} within {HANDSHAKE_TIMEOUT:?}", self.config.server);
                    }
                    self.state = State::Connecting { conn, since };
                    return Ok(ControlFlow::Continue(wake(Some(since + HANDSHAKE_TIMEOUT))));
                }
                self.local = net.tcp_local(conn);
                let udp = match self.config.start.proto {
                    Proto::Udp => Some(net.udp_bind(0)?),
                    Proto::Tcp => None,
                };
                let mut start = self.config.start;
                start.client_udp_port = udp.map_or(0, |u| net.udp_local_port(u));
                let mut ctl = Ctl::new(conn);
                ctl.queue(&Message::Start(start));
                ctl.flush(net)?;
                self.state = State::Handshake { ctl, since: now, udp };
                Ok(ControlFlow::Continue(Some(now)))
            }
            State::Handshake { mut ctl, since, udp } => {
                ctl.flush(net)?;
                match ctl.poll(net)? {
                    Some(Message::Accept(accept)) => {
                        let server_udp = SocketAddr::new(self.config.server.ip(), accept.udp_port);
                        let setup = RoleSetup {
                            end: End::Client,
                            cookie: accept.cookie,
                            udp: udp.map(|u| (u, server_udp)),
                            udp_batch: self.config.udp_batch,
                            work: Duration::ZERO,
                        };
                        let role = Role::new(&self.config.start, setup, now)?;
                        self.progress.begin(now);
                        self.state = State::Running { ctl, role };
                        Ok(ControlFlow::Continue(Some(now)))
                    }
                    Some(other) => bail!("the server answered {other:?} instead of Accept"),
                    None if ctl.eof => bail!("the server closed the connection without answering"),
                    None if now.saturating_since(since) > HANDSHAKE_TIMEOUT => {
                        bail!("the server did not answer within {HANDSHAKE_TIMEOUT:?}")
                    }
                    None => {
                        self.state = State::Handshake { ctl, since, udp };
                        Ok(ControlFlow::Continue(wake(Some(since + HANDSHAKE_TIMEOUT))))
                    }
                }
            }
            State::Running { mut ctl, mut role } => {
                let poll = role.tick(net, &mut ctl, now)?;
                self.progress.update(now, role.progress());
                match poll {
                    Poll::Finished => {
                        self.progress.finish();
                        self.summary = Some(self.summarize(&role, now)?);
                        let _ = net.tcp_shutdown(ctl.conn);
                        self.state = State::Lingering { conn: ctl.conn, until: now + LINGER };
                        Ok(ControlFlow::Continue(Some(now)))
                    }
                    Poll::Busy => {
                        self.state = State::Running { ctl, role };
                        Ok(ControlFlow::Continue(Some(now)))
                    }
                    Poll::Idle(at) => {
                        let at = match (at, self.progress.due()) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                        self.state = State::Running { ctl, role };
                        Ok(ControlFlow::Continue(wake(at)))
                    }
                }
            }
            State::Lingering { conn, until } => {
                if net.tcp_flushed(conn) || now >= until {
                    net.tcp_close(conn);
                    return Ok(ControlFlow::Break(()));
                }
                self.state = State::Lingering { conn, until };
                Ok(ControlFlow::Continue(Some(until)))
            }
            State::Done => Ok(ControlFlow::Break(())),
        }
    }
}

impl<N: Net> Task<N> for Client<N> {
    fn tick(&mut self, net: &mut N, now: Instant) -> Result<ControlFlow<(), Option<Instant>>> {
        let r = self.step(net, now);
        if r.is_err() {
            self.progress.finish();
        }
        r
    }
}
