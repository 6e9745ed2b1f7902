//! `nagare perf server|client`: TCP and UDP throughput and TCP and UDP
//! request/response latency between nagare and anything that speaks the
//! same small protocol (`protocol.rs`): nagare on a host of its own, an
//! application of a running netd, or the kernel through `std::net`; over
//! IPv4 or IPv6 (a server takes both; through netd, IPv4 only).
//!
//! - `protocol.rs`: the control protocol (frames, checks).
//! - `net.rs`: what a test needs from a stack; `engine.rs` (nagare),
//!   `via.rs` (an application of a running netd) and `kernel.rs` (Linux)
//!   provide it.
//! - `roles.rs`: the sending and receiving ends of each kind of test;
//!   `udp_rr.rs` the two ends of UDP request/response.
//! - `client.rs`, `server.rs`: agreeing on a test and running it.
//! - `report.rs`: the progress line, latency figures, the summary.
//!
//! Everything is one thread and non-blocking: the driver below steps the
//! stack, ticks the client or server, and sleeps in `poll(2)` when neither
//! has anything to do.

mod client;
mod engine;
mod kernel;
mod net;
pub mod protocol;
pub mod report;
mod roles;
mod server;
mod udp_rr;
mod via;

use anyhow::{anyhow, bail, Context, Result};
use nagare_core::Instant;
use nagare_dev::MonotonicClock;
use nagare_host::{link::open_host, realtime, LinkSpec};
use net::Net;
use protocol::Start;
pub use protocol::{Mode, Proto, DEFAULT_PORT};
pub use report::Summary;
use std::net::{IpAddr, SocketAddr};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The stack a test runs on.
#[derive(Debug, Clone)]
pub enum Stack {
    /// The kernel's, through `std::net`.
    Kernel,
    /// nagare on a host of its own.
    Engine(LinkSpec),
    /// A running netd (its rendezvous socket), as one of its applications;
    /// `zero_copy`: TCP bulk data through the zero-copy calls.
    Via { socket: PathBuf, zero_copy: bool },
}

/// One client test, as asked for; [`run_client`] checks it.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The server's address, IPv4 or IPv6.
    pub server: IpAddr,
    /// Its port.
    pub port: u16,
    /// TCP or UDP.
    pub proto: Proto,
    /// Who sends.
    pub mode: Mode,
    /// Seconds to run (default 10), unless `bytes` is given.
    pub time: Option<f64>,
    /// Bytes to move instead of a time.
    pub bytes: Option<u64>,
    /// Bytes per write, per request and response, or per datagram.
    pub len: Option<u64>,
    /// UDP sending rate in Mbit/s (stream and reverse; default: as fast
    /// as possible).
    pub udp_rate: Option<f64>,
    /// Datagrams per system call when this client sends UDP (stream):
    /// the kernel's UDP segmentation offload cuts them (default 1, a
    /// call each).
    pub udp_batch: Option<usize>,
    /// Seconds before giving up (default: the test time + 30 s, or 600 s
    /// for a byte count).
    pub timeout: Option<f64>,
    /// Print the summary as one JSON object.
    pub json: bool,
    /// No progress line.
    pub quiet: bool,
}

/// The most datagrams one UDP send call carries (the kernel takes at
/// most 64 segments in one send with UDP segmentation offload).
pub const MAX_UDP_BATCH: usize = 64;

/// `123`, `64K`, `10M`, `2G` (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 10),
        Some('M') => (&s[..s.len() - 1], 20),
        Some('G') => (&s[..s.len() - 1], 30),
        Some('T') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{s:?} is not a byte count (e.g. 1000, 64K, 10M, 1G)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s} is too large"))
}

/// A client or a server, ticked by [`drive`].
pub trait Task<N: Net> {
    /// Does what can be done now; `Continue(Some(t))` asks to be ticked
    /// again by `t` (now, when busy), `Continue(None)` on input only.
    fn tick(&mut self, net: &mut N, now: Instant) -> Result<ControlFlow<(), Option<Instant>>>;
}

/// Steps the stack and ticks the task until it ends (`Ok(true)`) or a
/// signal stops it (`Ok(false)`).
fn drive<N: Net>(net: &mut N, task: &mut impl Task<N>, clock: &MonotonicClock, stop: &AtomicBool) -> Result<bool> {
    loop {
        if realtime::stopped(stop) {
            return Ok(false);
        }
        let now = clock.now();
        let worked = net.step(now)?;
        let wake = match task.tick(net, now)? {
            ControlFlow::Break(()) => return Ok(true),
            ControlFlow::Continue(wake) => wake,
        };
        if worked || wake.is_some_and(|w| w <= now) {
            continue;
        }
        net.wait(wake, clock.now())?;
    }
}

impl ClientOptions {
    /// The test and its time limit, or why they cannot be run.
    fn config(&self) -> Result<client::ClientConfig> {
        let (proto, mode) = (self.proto, self.mode);
        let len = self.len.unwrap_or(match (proto, mode) {
            (_, Mode::Rr) => 1,
            // The most one 1500-byte frame holds: no fragments.
            (Proto::Udp, _) if self.server.is_ipv6() => 1452,
            (Proto::Udp, _) => 1472,
            (Proto::Tcp, _) => 128 * 1024,
        });
        let duration_ms = match (self.time, self.bytes) {
            (_, Some(_)) => 0,
            (Some(t), None) => {
                if !(t.is_finite() && t > 0.0 && t * 1000.0 <= f64::from(protocol::MAX_DURATION_MS)) {
                    bail!("--time {t}: give a number of seconds above 0 and at most 3600");
                }
                ((t * 1000.0).round() as u32).max(1)
            }
            (None, None) => 10_000,
        };
        if self.bytes == Some(0) {
            bail!("--bytes 0: nothing to measure");
        }
        let udp_rate_kbit = match self.udp_rate {
            None => 0,
            Some(r) if r.is_finite() && r > 0.0 && r * 1000.0 < f64::from(u32::MAX) => {
                ((r * 1000.0).round() as u32).max(1)
            }
            Some(r) => bail!("--udp-rate {r}: give Mbit/s above 0 and below 4 million"),
        };
        if self.udp_rate.is_some() && (proto != Proto::Udp || mode == Mode::Rr) {
            bail!("--udp-rate is for --udp stream and reverse tests");
        }
        let udp_batch = self.udp_batch.unwrap_or(1);
        if !(1..=MAX_UDP_BATCH).contains(&udp_batch) {
            bail!("--udp-batch {udp_batch}: from 1 to {MAX_UDP_BATCH} datagrams");
        }
        if udp_batch > 1 && (proto != Proto::Udp || mode != Mode::Stream) {
            bail!("--udp-batch is for --udp stream tests, where the client sends");
        }
        let start = Start {
            proto,
            mode,
            len: u32::try_from(len).map_err(|_| anyhow!("--len {len} is too large"))?,
            duration_ms,
            bytes: self.bytes.unwrap_or(0),
            udp_rate_kbit,
            // Filled in once the client's UDP socket is bound.
            client_udp_port: u16::from(proto == Proto::Udp && mode != Mode::Stream),
        };
        start.validate().map_err(|e| anyhow!("{e}"))?;
        let timeout = match self.timeout {
            Some(t) => Duration::try_from_secs_f64(t).map_err(|_| anyhow!("--timeout {t}: not a number of seconds"))?,
            None if duration_ms > 0 => Duration::from_millis(u64::from(duration_ms)) + Duration::from_secs(30),
            None => Duration::from_secs(600),
        };
        Ok(client::ClientConfig {
            server: SocketAddr::new(self.server, self.port),
            start,
            timeout,
            progress: !self.quiet,
            udp_batch,
        })
    }
}

/// The addresses a link was given, IPv4's first.
fn addresses(link: &LinkSpec) -> String {
    let mut all: Vec<String> = link.addr.iter().map(|a| a.to_string()).collect();
    all.extend(link.ipv6.iter().map(|a| a.to_string()));
    all.join(", ")
}

/// An error if `stack` cannot reach `server`: through netd only IPv4 is
/// spoken; nagare's own host needs an address of the server's family.
fn check_reach(stack: &Stack, server: IpAddr) -> Result<()> {
    match (stack, server) {
        (Stack::Via { .. }, IpAddr::V6(ip)) => {
            bail!("{ip}: perf through netd (--via) reaches IPv4 servers only; without --via the kernel's stack, or with --tap nagare's, reaches IPv6 ones")
        }
        (Stack::Engine(link), IpAddr::V6(ip)) if link.ipv6.is_empty() => {
            bail!("a test with {ip} needs an IPv6 --addr: without one the host does not speak IPv6")
        }
        (Stack::Engine(link), IpAddr::V4(ip)) if link.addr.is_none() => {
            bail!("a test with {ip} needs an IPv4 --addr: without one the host does not speak IPv4")
        }
        _ => Ok(()),
    }
}

/// Serves tests on `stack` and `port` until `stop` is raised (`once`:
/// one test, an error if it failed), spending `work` of CPU time on each
/// datagram of a UDP test it receives.
pub fn run_server(stack: &Stack, port: u16, once: bool, work: Duration, stop: &AtomicBool) -> Result<()> {
    let clock = MonotonicClock::new();
    let seed = nagare_host::secrets::random_u64()?;
    let failures = match stack {
        Stack::Via { socket, zero_copy } => {
            let mut net = via::ViaNet::connect(socket, *zero_copy)?;
            let stack = format!("nagare through netd at {}", socket.display());
            let mut server = server::Server::new(server::ServerConfig { port, once, stack, work }, seed);
            drive(&mut net, &mut server, &clock, stop)?;
            server.failures
        }
        Stack::Engine(link) => {
            let host = open_host(link, None, &clock)?;
            let mut net = engine::EngineNet::new(host)?;
            let stack = format!("nagare on {} as {}", link.describe(), addresses(link));
            let mut server = server::Server::new(server::ServerConfig { port, once, stack, work }, seed);
            drive(&mut net, &mut server, &clock, stop)?;
            net.linger(&clock, Duration::from_millis(500));
            if let Some(line) = net.stats_line() {
                log::info!("{line}");
            }
            server.failures
        }
        Stack::Kernel => {
            let mut net = kernel::KernelNet::default();
            let stack = "the kernel's stack".to_string();
            let mut server = server::Server::new(server::ServerConfig { port, once, stack, work }, seed);
            drive(&mut net, &mut server, &clock, stop)?;
            server.failures
        }
    };
    println!("nagare perf server: stopping");
    if once && failures > 0 {
        bail!("the test failed");
    }
    Ok(())
}

/// Runs one test against a perf server from `stack`; prints its summary.
pub fn run_client(stack: &Stack, options: &ClientOptions, stop: &AtomicBool) -> Result<()> {
    let summary = client(stack, options, stop)?;
    if options.json {
        println!("{}", summary.json());
    } else {
        print!("{}", summary.text());
    }
    Ok(())
}

/// Runs one test against a perf server from `stack` and returns what it
/// measured (the progress line, unless `options.quiet`, goes to stderr);
/// raising `stop` interrupts it.
pub fn client(stack: &Stack, options: &ClientOptions, stop: &AtomicBool) -> Result<Summary> {
    let config = options.config()?;
    check_reach(stack, options.server)?;
    let clock = MonotonicClock::new();
    let server = config.server;
    let (finished, summary, stats) = match stack {
        Stack::Via { socket, zero_copy } => {
            let mut net = via::ViaNet::connect(socket, *zero_copy)?;
            let mut client = client::Client::new(config);
            let result = drive(&mut net, &mut client, &clock, stop);
            (result, client.summary, None)
        }
        Stack::Engine(link) => {
            let mut host = open_host(link, None, &clock)?;
            if let IpAddr::V6(dst) = options.server {
                // A global address is tentative for about two seconds
                // (duplicate address detection); the test waits for one.
                let ready = realtime::wait_for_ipv6_source(&mut host, &clock, stop, dst, realtime::IPV6_SOURCE_WAIT)?;
                if realtime::stopped(stop) {
                    bail!("interrupted");
                }
                if !ready {
                    bail!("no IPv6 address of {dst}'s scope passed duplicate address detection");
                }
            }
            let mut net = engine::EngineNet::new(host)?;
            let mut client = client::Client::new(config);
            let result = drive(&mut net, &mut client, &clock, stop);
            net.linger(&clock, Duration::from_millis(300));
            (result, client.summary, net.stats_line())
        }
        Stack::Kernel => {
            let mut net = kernel::KernelNet::default();
            let mut client = client::Client::new(config);
            let result = drive(&mut net, &mut client, &clock, stop);
            (result, client.summary, None)
        }
    };
    if let Some(line) = stats.filter(|l| !l.is_empty()) {
        log::info!("{line}");
    }
    let finished = finished.with_context(|| format!("perf test with {server}"))?;
    match summary {
        Some(summary) => Ok(summary),
        None if finished => bail!("the test ended without a result"),
        None => bail!("interrupted"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("10m"), Ok(10 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    fn options(proto: Proto, mode: Mode) -> ClientOptions {
        ClientOptions {
            server: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            proto,
            mode,
            time: None,
            bytes: None,
            len: None,
            udp_rate: None,
            udp_batch: None,
            timeout: None,
            json: false,
            quiet: true,
        }
    }

    #[test]
    fn udp_request_response_is_asked_for_with_one_byte_and_no_rate() {
        let start = options(Proto::Udp, Mode::Rr).config().unwrap().start;
        assert_eq!((start.proto, start.mode, start.len, start.duration_ms), (Proto::Udp, Mode::Rr, 1, 10_000));
        assert_ne!(start.client_udp_port, 0);
        let len = ClientOptions { len: Some(64), ..options(Proto::Udp, Mode::Rr) };
        assert_eq!(len.config().unwrap().start.len, 64);
        let paced = ClientOptions { udp_rate: Some(10.0), ..options(Proto::Udp, Mode::Rr) };
        assert!(paced.config().is_err());
        let stream = ClientOptions { udp_rate: Some(10.0), ..options(Proto::Udp, Mode::Stream) };
        assert_eq!(stream.config().unwrap().start.len, 1472);
        let ipv6 = ClientOptions { server: "::1".parse().unwrap(), ..stream };
        assert_eq!(ipv6.config().unwrap().start.len, 1452, "one 1500-byte frame over IPv6");
    }
}
