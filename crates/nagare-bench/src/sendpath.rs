//! `nagare bench sendpath`: where a UDP `sendto` spends its time, stage by
//! stage, in the form of Table 3 of the AnT paper: the request reaching
//! netd, the engine (UDP, IP, Ethernet), the frame posted to the driver and
//! reaching it, the device write, the completion posted and reaching the
//! application (direct return); and, beside them, what a plain `send_to`
//! costs the application, which returns once the datagram is queued on
//! its socket's path (the stages go on without it). For split placement (the driver a process),
//! single (a thread) and inline (no driver), beside the Linux kernel's
//! `sendto()` on a socket whose route leaves by the same TAP; payloads of
//! 256 to 1472 bytes.
//!
//! Each placement is a `nagare netd --tap` started inside a network
//! namespace the bench creates and deletes; the datagrams go to the
//! kernel's side of the TAP (10.77.0.1, port 9: nobody listens, the kernel
//! drops them, its port-unreachable replies are rate-limited). Needs root.

use crate::netns::{Namespace, NetdProcess};
use anyhow::{bail, Context, Result};
use nagare::net::{SendTrace, UdpSocket};
use nagare::Session;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SendPathArgs {
    /// Sends per payload size and placement.
    pub count: usize,
    /// Microseconds netd, its driver and the application poll after their
    /// last work before they sleep (yielding the CPU between looks).
    pub spin_us: u64,
    /// Payload sizes (bytes).
    pub sizes: Vec<usize>,
    /// More arguments for every netd (e.g. `--nice -10`).
    pub netd_args: Vec<String>,
}

const KERNEL: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const NETD_ADDR: &str = "10.77.0.2/24";
const TAP: &str = "nsp0";
const SINK_PORT: u16 = 9;

/// Starts `nagare netd --tap` in `placement` inside `ns` and gives the
/// kernel's side of the TAP its address.
fn start_netd(ns: &Namespace, placement: &str, spin_us: u64, more: &[String]) -> Result<NetdProcess> {
    let spin = spin_us.to_string();
    let mut args = vec!["--placement", placement, "--spin-us", &spin];
    args.extend(more.iter().map(String::as_str));
    let p = ns.start_netd(TAP, NETD_ADDR, &args, "sendpath")?;
    ns.ip(&["addr", "add", &format!("{KERNEL}/24"), "dev", TAP])?;
    Ok(p)
}

/// Stage times of one placement and payload size: medians over the sends,
/// in ns.
#[derive(Clone, Copy, Default)]
struct Row {
    to_netd: u64,
    protocol: u64,
    to_driver_post: u64,
    to_driver: u64,
    device: u64,
    return_post: u64,
    returned: u64,
    total: u64,
    /// What the application waits in a plain `send_to`, which returns once
    /// the datagram is queued on the socket's path.
    app_cost: u64,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn row_of(traces: &[SendTrace]) -> Row {
    let m = |f: fn(&SendTrace) -> u64| median(traces.iter().map(f).collect());
    Row {
        to_netd: m(|t| t.stages.to_netd),
        protocol: m(|t| t.stages.protocol),
        to_driver_post: m(|t| t.stages.to_driver_post),
        to_driver: m(|t| t.stages.to_driver),
        device: m(|t| t.stages.device),
        return_post: m(|t| t.stages.return_post),
        returned: m(|t| t.return_ns()),
        total: m(|t| t.total_ns),
        app_cost: 0,
    }
}

/// Traced sends of every size through the netd at `socket`.
fn measure_nagare(socket: &Path, sizes: &[usize], count: usize, spin: Duration) -> Result<Vec<Row>> {
    let netd = Session::connect(socket).context("connecting to netd")?;
    netd.set_spin(spin);
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0")?;
    let to = SocketAddrV4::new(KERNEL, SINK_PORT);
    // The first sends wait for ARP; then the path is warm.
    let deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..2000 {
        if Instant::now() > deadline {
            break;
        }
        udp.send_to(&[0u8; 64], to)?;
    }
    let mut rows = Vec::new();
    for &size in sizes {
        let payload = vec![0xa5u8; size];
        let mut traces = Vec::with_capacity(count);
        for _ in 0..count {
            traces.push(udp.send_to_traced(&payload, to)?.1);
        }
        let mut costs = Vec::with_capacity(count);
        for _ in 0..count {
            let t = nagare_ipc::monotonic_ns();
            udp.send_to(&payload, to)?;
            costs.push(nagare_ipc::monotonic_ns() - t);
        }
        rows.push(Row { app_cost: median(costs), ..row_of(&traces) });
    }
    Ok(rows)
}

/// The kernel's `sendto()` from its side of the TAP, timed call by call
/// (a thread moved into the namespace; the frames go to netd).
fn measure_linux(ns: &Namespace, sizes: &[usize], count: usize) -> Result<Vec<u64>> {
    let sizes = sizes.to_vec();
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<Vec<u64>> {
                ns.enter()?;
                let sock = std::net::UdpSocket::bind((KERNEL, 0))?;
                let to = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), SINK_PORT);
                for _ in 0..2000 {
                    let _ = sock.send_to(&[0u8; 64], to);
                }
                let mut out = Vec::new();
                for size in sizes {
                    let payload = vec![0x5au8; size];
                    let mut times = Vec::with_capacity(count);
                    for _ in 0..count {
                        let t = nagare_ipc::monotonic_ns();
                        sock.send_to(&payload, to)?;
                        times.push(nagare_ipc::monotonic_ns() - t);
                    }
                    out.push(median(times));
                }
                Ok(out)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the Linux measurement panicked"))?
    })
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

pub fn run(args: SendPathArgs) -> Result<()> {
    if args.count == 0 || args.sizes.iter().any(|&s| s == 0 || s > 1472) {
        bail!("--count must be positive and sizes within 1..=1472");
    }
    let ns = Namespace::create(format!("nagare-sendpath-{}", std::process::id()))?;
    let mut results: Vec<(&str, Vec<Row>)> = Vec::new();
    let mut linux = Vec::new();
    for placement in ["split", "single", "inline"] {
        let netd = start_netd(&ns, placement, args.spin_us, &args.netd_args)?;
        let rows = measure_nagare(&netd.socket, &args.sizes, args.count, Duration::from_micros(args.spin_us))?;
        if placement == "split" {
            linux = measure_linux(&ns, &args.sizes, args.count)?;
        }
        results.push((placement, rows));
        drop(netd);
    }
    println!(
        "nagare bench sendpath: median µs per stage of a UDP sendto, {} sends per cell, through a TAP; polling {} µs before sleeping{}",
        args.count,
        args.spin_us,
        if args.netd_args.is_empty() { String::new() } else { format!("; netd {}", args.netd_args.join(" ")) }
    );
    let header: String = args.sizes.iter().map(|s| format!("{s:>9}")).collect();
    for (placement, rows) in &results {
        println!("\n{placement} placement{:>26}{header}", "payload B:");
        let line = |name: &str, f: fn(&Row) -> u64| {
            let cells: String = rows.iter().map(|r| format!("{:>9}", us(f(r)))).collect();
            println!("  {name:<34}{cells}");
        };
        line("request to netd", |r| r.to_netd);
        line("engine: UDP, IP, Ethernet", |r| r.protocol);
        if *placement == "inline" {
            line("device write (netd)", |r| r.to_driver_post);
        } else {
            line("post to the driver", |r| r.to_driver_post);
            line("request to the driver", |r| r.to_driver);
            line("device write", |r| r.device);
            line("direct return: post", |r| r.return_post);
        }
        line("completion to the application", |r| r.returned);
        line("total (median of totals)", |r| r.total);
        line("application's cost: send_to queues", |r| r.app_cost);
    }
    let cells: String = linux.iter().map(|&t| format!("{:>9}", us(t))).collect();
    println!("\nLinux sendto() on the TAP's kernel side{:>5}{cells}", "");
    Ok(())
}
