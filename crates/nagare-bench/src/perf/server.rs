//! `nagare perf server`: tests one after another, each agreed on the
//! control connection. A client that arrives during a test waits (up to
//! three seconds, eight clients at most) and is then told the server is
//! busy.

use super::net::Net;
use super::protocol::{Accept, Message, Mode, Proto, Start, ERR_BAD_REQUEST, ERR_BUSY, MAX_DURATION_MS};
use super::report::gbit_per_s;
use super::roles::{Ctl, End, Poll, Role, RoleSetup};
use super::Task;
use anyhow::Result;
use nagare_core::Instant;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Duration;

/// How long a client may take to send Start.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A test in which nothing moves this long is given up.
const IDLE_TIMEOUT: Duration = Duration::from_secs(15);
/// Time past a test's duration before it is given up.
const GRACE: Duration = Duration::from_secs(15);
/// Connections accepted per tick.
const ACCEPTS_PER_TICK: usize = 16;
/// Connections that may wait for the test under way, and for how long;
/// past either they are told the server is busy.
const MAX_WAITING: usize = 8;
const BUSY_WAIT: Duration = Duration::from_secs(3);
/// Stray datagrams drained per tick between UDP tests.
const DRAIN_PER_TICK: usize = 256;

pub struct ServerConfig {
    pub port: u16,
    pub once: bool,
    /// Said in the "listening" line: which stack serves.
    pub stack: String,
    /// CPU time spent on each datagram of a UDP test received.
    pub work: Duration,
}

enum State<N: Net> {
    Idle,
    Handshake {
        ctl: Ctl<N::Conn>,
        peer: SocketAddr,
        since: Instant,
    },
    Running {
        ctl: Ctl<N::Conn>,
        role: Role<N>,
        peer: SocketAddr,
        start: Start,
        deadline: Instant,
        moved: (u64, Instant),
    },
}

pub struct Server<N: Net> {
    config: ServerConfig,
    listener: Option<N::Listener>,
    udp: Option<N::Udp>,
    state: State<N>,
    waiting: VecDeque<(N::Conn, SocketAddr, Instant)>,
    tests: u64,
    pub failures: u64,
    cookie: u64,
}

/// One test at a time: says so and closes (the few bytes fit the send
/// buffer of any new connection).
fn reject_busy<N: Net>(net: &mut N, conn: N::Conn) {
    let mut ctl = Ctl::new(conn);
    ctl.queue(&Message::Error { code: ERR_BUSY, text: "busy: another test is running".into() });
    let _ = ctl.flush(net);
    net.tcp_close(conn);
}

impl<N: Net> Server<N> {
    pub fn new(config: ServerConfig, seed: u64) -> Server<N> {
        Server {
            config,
            listener: None,
            udp: None,
            state: State::Idle,
            waiting: VecDeque::new(),
            tests: 0,
            failures: 0,
            cookie: seed | 1,
        }
    }

    fn next_cookie(&mut self) -> u32 {
        self.cookie ^= self.cookie << 13;
        self.cookie ^= self.cookie >> 7;
        self.cookie ^= self.cookie << 17;
        (self.cookie >> 16) as u32
    }

    /// Logs a finished or failed test; says whether to stop (`--once`).
    fn end_test(&mut self, peer: SocketAddr, what: Result<String>) -> bool {
        self.tests += 1;
        match what {
            Ok(line) => println!("nagare perf server: test {} from {peer}: {line}", self.tests),
            Err(e) => {
                self.failures += 1;
                println!("nagare perf server: test {} from {peer} failed: {e:#}", self.tests);
            }
        }
        self.config.once
    }

    fn describe(start: &Start, role: &Role<N>, now: Instant) -> String {
        let o = role.outcome(now);
        let head = format!("{} {} len {}", start.proto.name(), start.mode.name(), start.len);
        match (start.proto, start.mode) {
            (_, Mode::Rr) => format!(
                "{head}: {} transactions in {:.3} s = {:.0}/s",
                o.received.packets,
                o.received.secs,
                o.received.packets as f64 / o.received.secs.max(1e-9)
            ),
            (Proto::Tcp, _) => format!(
                "{head}: {} bytes in {:.3} s = {:.3} Gbit/s",
                o.received.bytes,
                o.received.secs,
                gbit_per_s(o.received.bytes, o.received.secs)
            ),
            (Proto::Udp, _) => format!(
                "{head}: {} of {} datagrams received ({} bytes in {:.3} s = {:.3} Gbit/s), {} out of order",
                o.received.packets,
                o.sent.packets,
                o.received.bytes,
                o.received.secs,
                gbit_per_s(o.received.bytes, o.received.secs),
                o.out_of_order
            ),
        }
    }

    /// Answers a Start: Accept and a role, or an Error for the client.
    fn begin(&mut self, start: &Start, peer: SocketAddr, now: Instant) -> Result<(Role<N>, u32), String> {
        let udp = match start.proto {
            Proto::Tcp => None,
            Proto::Udp => {
                let Some(udp) = self.udp else {
                    return Err("this server has no UDP socket".into());
                };
                Some((udp, SocketAddr::new(peer.ip(), start.client_udp_port)))
            }
        };
        let cookie = self.next_cookie();
        let setup = RoleSetup { end: End::Server, cookie, udp, udp_batch: 1, work: self.config.work };
        let role = Role::new(start, setup, now).map_err(|e| e.to_string())?;
        Ok((role, cookie))
    }

    fn step(&mut self, net: &mut N, now: Instant) -> Result<ControlFlow<(), Option<Instant>>> {
        let listener = match self.listener {
            Some(l) => l,
            None => {
                let l = net.tcp_listen(self.config.port)?;
                self.udp = Some(net.udp_bind(self.config.port)?);
                self.listener = Some(l);
                println!(
                    "nagare perf server: listening on TCP and UDP port {} ({}); Ctrl-C stops",
                    self.config.port, self.config.stack
                );
                l
            }
        };
        let mut busy = false;
        let mut wake = None;
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle => {}
            State::Handshake { mut ctl, peer, since } => match ctl.poll(net) {
                Ok(Some(Message::Start(start))) => match self.begin(&start, peer, now) {
                    Ok((role, cookie)) => {
                        let udp_port = self.udp.map_or(0, |u| net.udp_local_port(u));
                        ctl.queue(&Message::Accept(Accept { cookie, udp_port }));
                        if let Err(e) = ctl.flush(net) {
                            // The client went away right after asking: its
                            // test ends, the server goes on.
                            net.tcp_close(ctl.conn);
                            if self.end_test(peer, Err(e)) {
                                return Ok(ControlFlow::Break(()));
                            }
                            return Ok(ControlFlow::Continue(wake));
                        }
                        let limit = if start.duration_ms > 0 {
                            Duration::from_millis(u64::from(start.duration_ms))
                        } else {
                            Duration::from_millis(u64::from(MAX_DURATION_MS))
                        };
                        self.state =
                            State::Running { ctl, role, peer, start, deadline: now + limit + GRACE, moved: (0, now) };
                        busy = true;
                    }
                    Err(text) => {
                        ctl.queue(&Message::Error { code: ERR_BAD_REQUEST, text: text.clone() });
                        let _ = ctl.flush(net);
                        net.tcp_close(ctl.conn);
                        if self.end_test(peer, Err(anyhow::anyhow!(text))) {
                            return Ok(ControlFlow::Break(()));
                        }
                    }
                },
                Ok(Some(other)) => {
                    net.tcp_close(ctl.conn);
                    if self.end_test(peer, Err(anyhow::anyhow!("expected Start, got {other:?}"))) {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(None) if ctl.eof || now.saturating_since(since) > HANDSHAKE_TIMEOUT => {
                    net.tcp_close(ctl.conn);
                    let why = if ctl.eof { "closed before Start" } else { "sent no Start in time" };
                    if self.end_test(peer, Err(anyhow::anyhow!(why))) {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(None) => {
                    wake = Some(since + HANDSHAKE_TIMEOUT);
                    self.state = State::Handshake { ctl, peer, since };
                }
                Err(e) => {
                    // A malformed Start: tell the client why, then close.
                    ctl.queue(&Message::Error { code: ERR_BAD_REQUEST, text: format!("{e:#}") });
                    let _ = ctl.flush(net);
                    net.tcp_close(ctl.conn);
                    if self.end_test(peer, Err(e)) {
                        return Ok(ControlFlow::Break(()));
                    }
                }
            },
            State::Running { mut ctl, mut role, peer, start, deadline, mut moved } => {
                let result = role.tick(net, &mut ctl, now);
                let progress = role.progress();
                if progress != moved.0 {
                    moved = (progress, now);
                }
                let outcome = match result {
                    Ok(Poll::Finished) => Some(Ok(Self::describe(&start, &role, now))),
                    Err(e) => Some(Err(e)),
                    Ok(_) if now >= deadline => Some(Err(anyhow::anyhow!("the test ran past its time"))),
                    Ok(_) if now.saturating_since(moved.1) >= IDLE_TIMEOUT => {
                        Some(Err(anyhow::anyhow!("nothing moved for {IDLE_TIMEOUT:?}")))
                    }
                    Ok(Poll::Busy) => {
                        busy = true;
                        None
                    }
                    Ok(Poll::Idle(at)) => {
                        wake = Some(at.map_or(deadline, |a| a.min(deadline)).min(moved.1 + IDLE_TIMEOUT));
                        None
                    }
                };
                match outcome {
                    Some(what) => {
                        net.tcp_close(ctl.conn);
                        if self.end_test(peer, what) {
                            return Ok(ControlFlow::Break(()));
                        }
                    }
                    None => self.state = State::Running { ctl, role, peer, start, deadline, moved },
                }
            }
        }
        // New connections wait (a few, briefly) for the test under way to
        // end; they are looked at after it, so one that has just ended
        // frees the server first.
        for _ in 0..ACCEPTS_PER_TICK {
            let Some((conn, peer)) = net.tcp_accept(listener)? else { break };
            busy = true;
            if self.waiting.len() < MAX_WAITING {
                self.waiting.push_back((conn, peer, now));
            } else {
                reject_busy(net, conn);
            }
        }
        while let Some(&(conn, _, since)) = self.waiting.front() {
            if now.saturating_since(since) < BUSY_WAIT {
                break;
            }
            self.waiting.pop_front();
            reject_busy(net, conn);
        }
        if matches!(self.state, State::Idle) {
            if let Some((conn, peer, _)) = self.waiting.pop_front() {
                self.state = State::Handshake { ctl: Ctl::new(conn), peer, since: now };
                busy = true;
            }
        }
        if let Some(&(_, _, since)) = self.waiting.front() {
            let at = since + BUSY_WAIT;
            wake = Some(wake.map_or(at, |w: Instant| w.min(at)));
        }
        // Between UDP tests (and during TCP ones) stray datagrams are dropped.
        let receiving_udp = matches!(&self.state, State::Running { role: Role::UdpRecv(_) | Role::UdpRrServer(_), .. });
        if let (Some(udp), false) = (self.udp, receiving_udp) {
            let mut scratch = [0u8; 16];
            for _ in 0..DRAIN_PER_TICK {
                if net.udp_recv(udp, &mut scratch)?.is_none() {
                    break;
                }
                busy = true;
            }
        }
        Ok(ControlFlow::Continue(if busy { Some(now) } else { wake }))
    }
}

impl<N: Net> Task<N> for Server<N> {
    fn tick(&mut self, net: &mut N, now: Instant) -> Result<ControlFlow<(), Option<Instant>>> {
        self.step(net, now)
    }
}
