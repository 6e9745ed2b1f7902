//! `nagare ping`: echo requests from nagare, IPv4 or (over a link with
//! IPv6 addresses) ICMPv6, with the output and summary of iputils' ping.

use anyhow::{bail, Context, Result};
use nagare_core::icmp::{Echo6Event, EchoEvent, IcmpError};
use nagare_core::{EchoHandle, Instant, Interface};
use nagare_dev::{LinkConfig, MonotonicClock};
use nagare_host::sim::{host_config, new_host, sim_ports};
use nagare_host::{link, realtime, LinkSpec, SimPair};
use nagare_wire::Ipv4Cidr;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::ControlFlow;
use std::time::Duration;

/// Largest echo payload: 65535 minus the IPv4 and ICMP headers.
pub const MAX_PING_SIZE: usize = 65535 - 20 - 8;
/// Largest ICMPv6 echo payload, as the engine takes it: 65535 minus the
/// IPv6 and ICMPv6 headers.
pub const MAX_PING6_SIZE: usize = 65535 - 40 - 8;

pub struct PingOptions {
    pub destination: IpAddr,
    pub count: Option<u32>,
    pub size: usize,
    pub interval: Duration,
    pub timeout: Duration,
    pub quiet: bool,
}

/// Where echo requests go out: the engine in this process, or netd.
trait EchoSender {
    fn send(&mut self, to: IpAddr, seq: u16, data: &[u8], now: Instant) -> Result<(), String>;
}

/// What came back for a request, ICMP or ICMPv6.
enum PingEvent {
    Reply { from: IpAddr, seq_no: u16, data_len: usize, ttl: u8, at: Instant },
    Error { from: IpAddr, seq_no: u16, what: &'static str },
}

impl From<EchoEvent> for PingEvent {
    fn from(event: EchoEvent) -> Self {
        match event {
            EchoEvent::Reply { from, seq_no, data_len, ttl, at } => {
                PingEvent::Reply { from: from.into(), seq_no, data_len, ttl, at }
            }
            EchoEvent::Error { seq_no, error } => {
                let (from, what): (IpAddr, _) = match error {
                    IcmpError::Unreachable { from, code } => (from.into(), unreachable_text(code)),
                    IcmpError::TimeExceeded { from, .. } => (from.into(), "Time to live exceeded"),
                    // An echo socket's errors are about its IPv4 requests;
                    // these come only to UDP sockets.
                    IcmpError::Unreachable6 { from, .. } => (from.into(), "Destination unreachable"),
                    IcmpError::TimeExceeded6 { from, .. } => (from.into(), "Time exceeded"),
                    IcmpError::PacketTooBig6 { from, .. } => (from.into(), "Packet too big"),
                };
                PingEvent::Error { from, seq_no, what }
            }
        }
    }
}

impl From<Echo6Event> for PingEvent {
    fn from(event: Echo6Event) -> Self {
        let Echo6Event::Reply { from, seq_no, data_len, hop_limit, at } = event;
        PingEvent::Reply { from: from.into(), seq_no, data_len, ttl: hop_limit, at }
    }
}

/// An echo socket of an engine in this process.
struct EngineEcho<'a> {
    iface: &'a mut Interface,
    handle: EchoHandle,
}

impl EchoSender for EngineEcho<'_> {
    fn send(&mut self, to: IpAddr, seq: u16, data: &[u8], now: Instant) -> Result<(), String> {
        let sent = match to {
            IpAddr::V4(to) => self.iface.icmp().echo_send(self.handle, to, seq, data, now),
            IpAddr::V6(to) => self.iface.icmp().echo6_send(self.handle, to, seq, data, now),
        };
        sent.map_err(|e| e.to_string())
    }
}

impl EchoSender for nagare::ping::PingSocket {
    fn send(&mut self, to: IpAddr, seq: u16, data: &[u8], _now: Instant) -> Result<(), String> {
        nagare::ping::PingSocket::send(self, to, seq, data).map(|_| ()).map_err(|e| e.to_string())
    }
}

struct PingSession {
    options: PingOptions,
    data: Vec<u8>,
    next_seq: u16,
    sent: u32,
    received: u32,
    errors: u32,
    outstanding: HashMap<u16, Instant>,
    rtts_ms: Vec<f64>,
    next_send: Instant,
    last_send: Option<Instant>,
    started: Option<Instant>,
}

impl PingSession {
    fn new(options: PingOptions) -> Result<Self> {
        let data = (0..options.size).map(|i| (i % 256) as u8).collect();
        match options.destination {
            IpAddr::V4(d) => println!("PING {d} ({d}) {0}({1}) bytes of data.", options.size, options.size + 28),
            IpAddr::V6(d) => println!("PING {d}({d}) {} data bytes", options.size),
        }
        Ok(PingSession {
            options,
            data,
            next_seq: 1,
            sent: 0,
            received: 0,
            errors: 0,
            outstanding: HashMap::new(),
            rtts_ms: Vec::new(),
            next_send: Instant::ZERO,
            last_send: None,
            started: None,
        })
    }

    fn all_sent(&self) -> bool {
        self.options.count.is_some_and(|c| self.sent >= c)
    }

    /// Sends what is due; says when to come back, or that ping is done.
    /// Events must have been handed to [`PingSession::on_event`] first.
    fn tick(&mut self, sender: &mut dyn EchoSender, now: Instant) -> ControlFlow<(), Option<Instant>> {
        self.started.get_or_insert(now);
        if self.all_sent() {
            let answered = self.received + self.errors >= self.sent;
            let waited_out = self.last_send.is_some_and(|t| now >= t + self.options.timeout);
            if answered || waited_out {
                return ControlFlow::Break(());
            }
            return ControlFlow::Continue(self.last_send.map(|t| t + self.options.timeout));
        }
        if now >= self.next_send {
            let seq = self.next_seq;
            match sender.send(self.options.destination, seq, &self.data, now) {
                Ok(()) => {
                    self.outstanding.insert(seq, now);
                }
                Err(e) => eprintln!("ping: sendmsg: {e}"),
            }
            self.sent += 1;
            self.next_seq = self.next_seq.wrapping_add(1);
            self.last_send = Some(now);
            self.next_send = now + self.options.interval;
        }
        ControlFlow::Continue(Some(self.next_send))
    }

    fn on_event(&mut self, event: PingEvent) {
        match event {
            PingEvent::Reply { from, seq_no, data_len, ttl, at } => {
                let Some(sent_at) = self.outstanding.remove(&seq_no) else {
                    return;
                };
                let rtt = (at - sent_at).as_secs_f64() * 1e3;
                self.received += 1;
                self.rtts_ms.push(rtt);
                if !self.options.quiet {
                    println!("{} bytes from {from}: icmp_seq={seq_no} ttl={ttl} time={rtt:.3} ms", data_len + 8);
                }
            }
            PingEvent::Error { from, seq_no, what } => {
                if self.outstanding.remove(&seq_no).is_none() {
                    return;
                }
                self.errors += 1;
                if !self.options.quiet {
                    println!("From {from} icmp_seq={seq_no} {what}");
                }
            }
        }
    }

    /// Prints the summary and returns ping's exit code: 0 if any reply
    /// came back, 1 otherwise.
    fn finish(&self, now: Instant) -> i32 {
        let elapsed = self.started.map_or(Duration::ZERO, |s| now - s);
        let lost = self.sent.saturating_sub(self.received);
        let loss = if self.sent == 0 { 0.0 } else { f64::from(lost) * 100.0 / f64::from(self.sent) };
        println!("\n--- {} ping statistics ---", self.options.destination);
        let errors = if self.errors > 0 { format!(", +{} errors", self.errors) } else { String::new() };
        println!(
            "{} packets transmitted, {} received{errors}, {loss:.0}% packet loss, time {}ms",
            self.sent,
            self.received,
            elapsed.as_millis()
        );
        if !self.rtts_ms.is_empty() {
            let n = self.rtts_ms.len() as f64;
            let min = self.rtts_ms.iter().copied().fold(f64::INFINITY, f64::min);
            let max = self.rtts_ms.iter().copied().fold(0.0, f64::max);
            let avg = self.rtts_ms.iter().sum::<f64>() / n;
            let mdev = (self.rtts_ms.iter().map(|r| (r - avg).powi(2)).sum::<f64>() / n).sqrt();
            println!("rtt min/avg/max/mdev = {min:.3}/{avg:.3}/{max:.3}/{mdev:.3} ms");
        }
        if self.received > 0 {
            0
        } else {
            1
        }
    }
}

fn unreachable_text(code: u8) -> &'static str {
    match code {
        0 => "Destination Net Unreachable",
        1 => "Destination Host Unreachable",
        2 => "Destination Protocol Unreachable",
        3 => "Destination Port Unreachable",
        4 => "Frag needed and DF set",
        _ => "Destination Unreachable",
    }
}

/// Pings over a TAP device or a VNI port on the wall clock. A destination
/// needs an address of its family on the link; for an IPv6 one pinging
/// waits until one of the destination's scope has passed duplicate address
/// detection.
pub fn run_link(spec: &LinkSpec, options: PingOptions) -> Result<i32> {
    if options.destination.is_ipv6() && spec.ipv6.is_empty() {
        bail!("pinging {} needs an IPv6 --addr: without one the host does not speak IPv6", options.destination);
    }
    if options.destination.is_ipv4() && spec.addr.is_none() {
        bail!("pinging {} needs an IPv4 --addr: without one the host does not speak IPv4", options.destination);
    }
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = link::open_host(spec, None, &clock)?;
    if let IpAddr::V6(dst) = options.destination {
        let ready = realtime::wait_for_ipv6_source(&mut host, &clock, &stop, dst, realtime::IPV6_SOURCE_WAIT)?;
        if !ready && !realtime::stopped(&stop) {
            bail!("no IPv6 address of {dst}'s scope passed duplicate address detection");
        }
    }
    let handle = host.iface.icmp().echo_open(own_ident()).map_err(anyhow::Error::msg)?;
    let mut session = PingSession::new(options)?;
    realtime::run(&mut host, &clock, &stop, |host, now| engine_tick(&mut session, &mut host.iface, handle, now))?;
    Ok(session.finish(clock.now()))
}

/// The identifier iputils' ping uses: our pid.
fn own_ident() -> u16 {
    (std::process::id() & 0xffff) as u16
}

fn engine_tick(
    session: &mut PingSession,
    iface: &mut Interface,
    handle: EchoHandle,
    now: Instant,
) -> ControlFlow<(), Option<Instant>> {
    while let Ok(Some(event)) = iface.icmp().echo_recv(handle) {
        session.on_event(event.into());
    }
    while let Ok(Some(event)) = iface.icmp().echo6_recv(handle) {
        session.on_event(event.into());
    }
    session.tick(&mut EngineEcho { iface, handle }, now)
}

/// Pings through a running netd (its rendezvous socket `via`), as one of
/// its applications: the requests leave from netd's stack. Round trips are
/// timed here, so they include the two hops to netd and back.
pub fn run_via(via: &std::path::Path, options: PingOptions) -> Result<i32> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let netd = nagare::Session::connect(via)?;
    let mut socket =
        nagare::ping::PingSocket::open_via(&netd, own_ident()).context("opening an echo socket in netd")?;
    let mut session = PingSession::new(options)?;
    while !realtime::stopped(&stop) {
        let now = clock.now();
        let wake = match session.tick(&mut socket, now) {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(wake) => wake.unwrap_or(now + Duration::from_secs(1)),
        };
        // Short waits, so Ctrl-C is noticed.
        let limit = wake.saturating_since(clock.now()).clamp(Duration::from_micros(1), VIA_MAX_WAIT);
        if let Some(event) = socket.recv_timeout(Some(limit)).context("receiving through netd")? {
            session.on_event(echo_event(event, clock.now()));
        }
    }
    Ok(session.finish(clock.now()))
}

/// Longest wait for a reply between looks at the stop flag.
const VIA_MAX_WAIT: Duration = Duration::from_millis(200);

fn echo_event(event: nagare::ping::PingEvent, at: Instant) -> PingEvent {
    use nagare::ping::PingEvent as Netd;
    match event {
        Netd::Reply { from, seq, len, ttl } => PingEvent::Reply { from, seq_no: seq, data_len: len, ttl, at },
        Netd::Unreachable { from, seq, code } => PingEvent::Error { from, seq_no: seq, what: unreachable_text(code) },
        Netd::TimeExceeded { from, seq, .. } => PingEvent::Error { from, seq_no: seq, what: "Time to live exceeded" },
    }
}

/// Pings a nagare peer on a simulated link in this process, in virtual
/// time: the peer takes `destination`, we take `addr` (default: the next
/// address on the same /24).
pub fn run_simulated(addr: Option<Ipv4Cidr>, options: PingOptions) -> Result<i32> {
    let IpAddr::V4(dst) = options.destination else {
        bail!("a simulated peer is IPv4 only: ping {} over --tap or --vni", options.destination);
    };
    let local = match addr {
        Some(a) => a,
        None => {
            let [a, b, c, d] = dst.octets();
            let mine = if d == 1 { 2 } else { 1 };
            Ipv4Cidr::new(Ipv4Addr::new(a, b, c, mine), 24).map_err(|e| anyhow::anyhow!("{e}"))?
        }
    };
    let Ok(peer_cidr) = Ipv4Cidr::new(dst, local.prefix_len()) else {
        bail!("bad prefix");
    };
    if !local.contains(dst) || local.address() == dst {
        bail!("{dst} must be another address on {local}'s network to ping a simulated peer");
    }
    println!("(no --tap: pinging a nagare peer at {dst} on a simulated link, virtual time, 50 us each way)");
    let link = LinkConfig { latency: Duration::from_micros(50), ..LinkConfig::default() };
    let (port_a, port_b) = sim_ports(link, 7);
    let mut pair = SimPair::new(
        new_host(host_config(0x0a, local, 0xa), port_a),
        new_host(host_config(0x0b, peer_cidr, 0xb), port_b),
    );
    let handle = pair.a.iface.icmp().echo_open(own_ident()).map_err(anyhow::Error::msg)?;
    let mut session = PingSession::new(options)?;
    loop {
        pair.settle()?;
        let now = pair.now;
        match engine_tick(&mut session, &mut pair.a.iface, handle, now) {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(wake) => {
                let until = wake.unwrap_or(now + Duration::from_secs(1));
                pair.run_until(until.saturating_since(now), |_| false)?;
            }
        }
    }
    Ok(session.finish(pair.now))
}
