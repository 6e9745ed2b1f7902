//! `nagare perf server|client`: TCP and UDP throughput and TCP
//! request/response latency between nagare and anything that speaks the
//! same small protocol (`protocol.rs`): nagare over TAP, or the kernel
//! through `std::net` when no `--tap` is given.
//!
//! - `protocol.rs`: the control protocol (frames, checks).
//! - `net.rs`: what a test needs from a stack; `engine.rs` (nagare),
//!   `via.rs` (an application of a running netd) and `kernel.rs` (Linux)
//!   provide it.
//! - `roles.rs`: the sending and receiving ends of each kind of test.
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
mod report;
mod roles;
mod server;
mod via;

use crate::realtime;
use crate::up::{open_link, Link};
use crate::OptionalTapArgs;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use nagare_core::Instant;
use nagare_dev::MonotonicClock;
use net::Net;
use protocol::{Mode, Proto, Start};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Subcommand)]
pub enum PerfCommand {
    /// Serve tests until Ctrl-C or SIGTERM: on nagare with --tap or --vni, else on
    /// the kernel's stack.
    Server {
        #[command(flatten)]
        link: OptionalTapArgs,
        /// Through a running `nagare netd` (its rendezvous socket).
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// TCP port for control and data, UDP port for datagrams.
        #[arg(long, default_value_t = protocol::DEFAULT_PORT)]
        port: u16,
        /// Exit after one test (status 1 if it failed).
        #[arg(long)]
        once: bool,
    },
    /// Run one test against a perf server: on nagare with --tap or --vni, else on
    /// the kernel's stack.
    Client {
        #[command(flatten)]
        link: OptionalTapArgs,
        /// Through a running `nagare netd` (its rendezvous socket).
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// The server's address.
        server: Ipv4Addr,
        #[arg(long, default_value_t = protocol::DEFAULT_PORT)]
        port: u16,
        /// TCP (the default).
        #[arg(long, conflicts_with = "udp")]
        tcp: bool,
        /// UDP datagrams (stream and reverse).
        #[arg(long)]
        udp: bool,
        /// stream: the client sends; reverse: the server sends; rr:
        /// request/response of --len bytes each way (TCP).
        #[arg(long, value_enum, default_value_t = ModeArg::Stream)]
        mode: ModeArg,
        /// Seconds to run (default 10).
        #[arg(long, conflicts_with = "bytes")]
        time: Option<f64>,
        /// Bytes to move instead of a time, e.g. 100M or 1G (rr: request
        /// bytes; UDP: rounded up to whole datagrams).
        #[arg(long, value_parser = parse_bytes)]
        bytes: Option<u64>,
        /// Bytes per write (TCP stream, default 128K), per request and per
        /// response (rr, default 1), or per datagram (UDP, default 1472).
        #[arg(long, value_parser = parse_bytes)]
        len: Option<u64>,
        /// UDP sending rate in Mbit/s (default: as fast as possible).
        #[arg(long, value_name = "MBIT")]
        udp_rate: Option<f64>,
        /// Give up after this many seconds (default: the test time + 30 s,
        /// or 600 s for --bytes).
        #[arg(long)]
        timeout: Option<f64>,
        /// Print the summary as one JSON object.
        #[arg(long)]
        json: bool,
        /// No progress line.
        #[arg(short, long)]
        quiet: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Stream,
    Reverse,
    Rr,
}

/// `123`, `64K`, `10M`, `2G` (powers of 1024).
fn parse_bytes(s: &str) -> Result<u64, String> {
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

fn tap_link(link: &OptionalTapArgs) -> Option<Link> {
    link.to_link()
}

fn check_link(link: &OptionalTapArgs) -> Result<()> {
    if link.tap.is_none()
        && link.vni.is_none()
        && (link.addr.is_some() || link.gateway.is_some() || link.mac.is_some() || link.impair.is_some())
    {
        bail!("--addr, --gateway, --mac and --impair need --tap or --vni (without them the kernel's stack is used)");
    }
    Ok(())
}

pub fn run(command: PerfCommand) -> Result<()> {
    match command {
        PerfCommand::Server { link, via, port, once } => run_server(&link, via.as_deref(), port, once),
        PerfCommand::Client {
            link,
            via,
            server,
            port,
            tcp: _,
            udp,
            mode,
            time,
            bytes,
            len,
            udp_rate,
            timeout,
            json,
            quiet,
        } => {
            check_link(&link)?;
            let proto = if udp { Proto::Udp } else { Proto::Tcp };
            let mode = match mode {
                ModeArg::Stream => Mode::Stream,
                ModeArg::Reverse => Mode::Reverse,
                ModeArg::Rr => Mode::Rr,
            };
            let len = len.unwrap_or(match (proto, mode) {
                (Proto::Udp, _) => 1472,
                (Proto::Tcp, Mode::Rr) => 1,
                (Proto::Tcp, _) => 128 * 1024,
            });
            let duration_ms = match (time, bytes) {
                (_, Some(_)) => 0,
                (Some(t), None) => {
                    if !(t.is_finite() && t > 0.0 && t * 1000.0 <= f64::from(protocol::MAX_DURATION_MS)) {
                        bail!("--time {t}: give a number of seconds above 0 and at most 3600");
                    }
                    ((t * 1000.0).round() as u32).max(1)
                }
                (None, None) => 10_000,
            };
            if bytes == Some(0) {
                bail!("--bytes 0: nothing to measure");
            }
            let udp_rate_kbit = match udp_rate {
                None => 0,
                Some(r) if r.is_finite() && r > 0.0 && r * 1000.0 < f64::from(u32::MAX) => {
                    ((r * 1000.0).round() as u32).max(1)
                }
                Some(r) => bail!("--udp-rate {r}: give Mbit/s above 0 and below 4 million"),
            };
            if udp_rate.is_some() && proto != Proto::Udp {
                bail!("--udp-rate is for --udp tests");
            }
            let start = Start {
                proto,
                mode,
                len: u32::try_from(len).map_err(|_| anyhow!("--len {len} is too large"))?,
                duration_ms,
                bytes: bytes.unwrap_or(0),
                udp_rate_kbit,
                // Filled in once the client's UDP socket is bound.
                client_udp_port: u16::from(proto == Proto::Udp && mode == Mode::Reverse),
            };
            start.validate().map_err(|e| anyhow!("{e}"))?;
            let timeout = match timeout {
                Some(t) => {
                    Duration::try_from_secs_f64(t).map_err(|_| anyhow!("--timeout {t}: not a number of seconds"))?
                }
                None if duration_ms > 0 => Duration::from_millis(u64::from(duration_ms)) + Duration::from_secs(30),
                None => Duration::from_secs(600),
            };
            let config =
                client::ClientConfig { server: SocketAddrV4::new(server, port), start, timeout, progress: !quiet };
            run_client(&link, via.as_deref(), config, json)
        }
    }
}

fn run_server(link: &OptionalTapArgs, via: Option<&Path>, port: u16, once: bool) -> Result<()> {
    check_link(link)?;
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let seed = clock.unix_epoch_micros() ^ (u64::from(std::process::id()) << 32);
    let failures = match (via, tap_link(link)) {
        (Some(socket), _) => {
            let mut net = via::ViaNet::connect(socket)?;
            let stack = format!("nagare through netd at {}", socket.display());
            let mut server = server::Server::new(server::ServerConfig { port, once, stack }, seed);
            drive(&mut net, &mut server, &clock, &stop)?;
            server.failures
        }
        (None, Some(tap)) => {
            let host = open_link(&tap, None, &clock)?;
            let mut net = engine::EngineNet::new(host)?;
            let stack = format!("nagare on {} as {}", tap.describe(), tap.addr());
            let mut server = server::Server::new(server::ServerConfig { port, once, stack }, seed);
            drive(&mut net, &mut server, &clock, &stop)?;
            net.linger(&clock, Duration::from_millis(500));
            if let Some(line) = net.stats_line() {
                eprintln!("nagare: {line}");
            }
            server.failures
        }
        (None, None) => {
            let mut net = kernel::KernelNet::default();
            let stack = "the kernel's stack".to_string();
            let mut server = server::Server::new(server::ServerConfig { port, once, stack }, seed);
            drive(&mut net, &mut server, &clock, &stop)?;
            server.failures
        }
    };
    println!("nagare perf server: stopping");
    if once && failures > 0 {
        bail!("the test failed");
    }
    Ok(())
}

fn run_client(link: &OptionalTapArgs, via: Option<&Path>, config: client::ClientConfig, json: bool) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let server = config.server;
    let (finished, summary, stats) = match (via, tap_link(link)) {
        (Some(socket), _) => {
            let mut net = via::ViaNet::connect(socket)?;
            let mut client = client::Client::new(config);
            let result = drive(&mut net, &mut client, &clock, &stop);
            (result, client.summary, None)
        }
        (None, Some(tap)) => {
            let host = open_link(&tap, None, &clock)?;
            let mut net = engine::EngineNet::new(host)?;
            let mut client = client::Client::new(config);
            let result = drive(&mut net, &mut client, &clock, &stop);
            net.linger(&clock, Duration::from_millis(300));
            (result, client.summary, net.stats_line())
        }
        (None, None) => {
            let mut net = kernel::KernelNet::default();
            let mut client = client::Client::new(config);
            let result = drive(&mut net, &mut client, &clock, &stop);
            (result, client.summary, None)
        }
    };
    if let Some(line) = stats.filter(|l| !l.is_empty()) {
        eprintln!("nagare: {line}");
    }
    let finished = finished.with_context(|| format!("perf test with {server}"))?;
    let Some(summary) = summary else {
        if finished {
            bail!("the test ended without a result");
        }
        bail!("interrupted");
    };
    if json {
        println!("{}", summary.json());
    } else {
        print!("{}", summary.text());
    }
    Ok(())
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
}
