//! `nagare bench`: speed figures, each beside a peer measured in the same
//! run.
//!
//! `nagare bench udp` streams datagrams between two nagare instances on a
//! simulated link in this process (zero latency, unlimited bandwidth, so
//! only the two engines' send and receive paths cost anything) and, as the
//! peer, between two kernel UDP sockets on 127.0.0.1. It prints a markdown
//! table of goodput (UDP payload bytes) and datagram rate with the ratio
//! nagare / Linux, and can write the same figures as CSV.

use crate::sim_pair::{host_config, new_host, sim_ports, SimPair};
use anyhow::{ensure, Context, Result};
use nagare_dev::{Device, LinkConfig};
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SINK_PORT: u16 = 9;
/// Datagrams sent before the stack is stepped (nagare) or the receiver
/// drains (Linux, one thread).
const BATCH: usize = 32;
/// Receive buffer asked of the kernel for the Linux peer.
const LINUX_RCVBUF: usize = 256 << 20;
/// How long a Linux receiver waits for a datagram before counting the
/// rest as lost.
const LINUX_IDLE: Duration = Duration::from_millis(500);
/// Longest a Linux stream may take before the run is abandoned.
const LINUX_DEADLINE: Duration = Duration::from_secs(120);

pub struct UdpBenchArgs {
    pub datagrams: usize,
    /// Payload sizes; empty means the default set.
    pub sizes: Vec<usize>,
    pub runs: usize,
    pub csv: Option<PathBuf>,
}

/// Default payload sizes: minimum-ish, the largest unfragmented one on a
/// 1500-byte MTU, and one that nagare fragments into six.
pub const DEFAULT_SIZES: [usize; 3] = [64, 1472, 8000];

/// What one stream achieved.
#[derive(Debug, Clone, Copy)]
pub struct StreamResult {
    pub sent: usize,
    pub received: usize,
    pub bytes: usize,
    pub elapsed: Duration,
}

impl StreamResult {
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e9
    }
    pub fn mpps(&self) -> f64 {
        self.received as f64 / self.elapsed.as_secs_f64() / 1e6
    }
    pub fn lost(&self) -> usize {
        self.sent - self.received
    }
}

/// Sends `count` datagrams of `size` bytes from A to a sink on B, stepping
/// both hosts after every batch, and measures the wall clock: the cost of
/// both engines' send and receive paths on one core. B must be reachable
/// at 10.0.0.2.
pub fn udp_stream<A: Device, B: Device>(pair: &mut SimPair<A, B>, count: usize, size: usize) -> Result<StreamResult> {
    let sink =
        pair.b.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SINK_PORT)).map_err(anyhow::Error::msg)?;
    let source = pair.a.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(anyhow::Error::msg)?;
    let payload = vec![0x5au8; size];
    let dst = SocketAddrV4::new(B_ADDR, SINK_PORT);
    let mut received = 0usize;
    let mut received_bytes = 0usize;
    let started = Instant::now();
    let mut sent = 0usize;
    while sent < count {
        let now = pair.now;
        for _ in 0..BATCH.min(count - sent) {
            pair.a.iface.udp().send_to(source, &payload, dst, now).map_err(anyhow::Error::msg)?;
            sent += 1;
        }
        pair.run_until(Duration::from_millis(10), |p| {
            while let Ok(Some(d)) = p.b.iface.udp().recv(sink) {
                received += 1;
                received_bytes += d.payload.len();
            }
            received == sent
        })?;
    }
    let elapsed = started.elapsed();
    ensure!(received == count, "UDP stream lost datagrams: {received} of {count}");
    pair.a.iface.udp().close(source).map_err(anyhow::Error::msg)?;
    pair.b.iface.udp().close(sink).map_err(anyhow::Error::msg)?;
    Ok(StreamResult { sent, received, bytes: received_bytes, elapsed })
}

/// A fresh pair on a zero-latency, unlimited-bandwidth link, with ARP
/// resolved (one datagram sent and received) so the stream measures only
/// the data path.
fn nagare_stream(count: usize, size: usize) -> Result<StreamResult> {
    let (port_a, port_b) = sim_ports(LinkConfig::default(), 1);
    let a = new_host(host_config(0x0a, "10.0.0.1/24".parse()?, 0xa), port_a);
    let b = new_host(host_config(0x0b, "10.0.0.2/24".parse()?, 0xb), port_b);
    let mut pair = SimPair::new(a, b);
    let warm = udp_stream(&mut pair, 1, size).context("warming up (ARP)")?;
    ensure!(warm.received == 1, "warm-up datagram lost");
    udp_stream(&mut pair, count, size)
}

// ---- the Linux peer ----------------------------------------------------

fn rcvbuf(socket: &UdpSocket) -> io::Result<usize> {
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `got` and `len` live on the stack for the call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
}

/// Raises the receive buffer, past `net.core.rmem_max` when privileged
/// (SO_RCVBUFFORCE); returns what the kernel granted.
fn set_rcvbuf(socket: &UdpSocket, bytes: usize) -> io::Result<usize> {
    let value = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: `value` lives on the stack for the call and `len` is its size.
        let rc = unsafe {
            libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, option, (&value as *const libc::c_int).cast(), len)
        };
        if rc == 0 {
            break;
        }
    }
    rcvbuf(socket)
}

fn linux_pair() -> Result<(UdpSocket, UdpSocket)> {
    let rx = UdpSocket::bind("127.0.0.1:0").context("binding the Linux receiver")?;
    set_rcvbuf(&rx, LINUX_RCVBUF).context("raising SO_RCVBUF")?;
    rx.set_read_timeout(Some(LINUX_IDLE))?;
    let tx = UdpSocket::bind("127.0.0.1:0").context("binding the Linux sender")?;
    tx.connect(rx.local_addr()?)?;
    Ok((tx, rx))
}

fn recv_one(rx: &UdpSocket, buf: &mut [u8]) -> Result<Option<usize>> {
    match rx.recv(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Kernel UDP over loopback in one thread, shaped like the nagare stream:
/// send a batch, then receive it, so both use one core.
fn linux_one_thread(count: usize, size: usize) -> Result<StreamResult> {
    let (tx, rx) = linux_pair()?;
    let payload = vec![0x5au8; size];
    let mut buf = vec![0u8; size.max(1) + 1];
    let (mut sent, mut received, mut bytes) = (0usize, 0usize, 0usize);
    // Datagrams still awaited; one that does not come within LINUX_IDLE
    // is given up on (a late one is still counted when it arrives).
    let mut owed = 0usize;
    let started = Instant::now();
    while sent < count {
        ensure!(started.elapsed() < LINUX_DEADLINE, "Linux one-thread stream took over {LINUX_DEADLINE:?}");
        let batch = BATCH.min(count - sent);
        for _ in 0..batch {
            tx.send(&payload)?;
        }
        sent += batch;
        owed += batch;
        while owed > 0 {
            match recv_one(&rx, &mut buf)? {
                Some(n) => {
                    received += 1;
                    bytes += n;
                    owed -= 1;
                }
                None => owed = 0,
            }
        }
    }
    Ok(StreamResult { sent, received, bytes, elapsed: started.elapsed() })
}

/// Kernel UDP over loopback with a sending and a receiving thread (both
/// cores); the time runs from the first send to the last receive.
fn linux_two_threads(count: usize, size: usize) -> Result<StreamResult> {
    let (tx, rx) = linux_pair()?;
    let started = Instant::now();
    let receiver = std::thread::spawn(move || -> Result<(usize, usize, Instant)> {
        let mut buf = vec![0u8; size.max(1) + 1];
        let (mut received, mut bytes, mut last) = (0usize, 0usize, Instant::now());
        while received < count {
            match recv_one(&rx, &mut buf)? {
                Some(n) => {
                    received += 1;
                    bytes += n;
                    last = Instant::now();
                }
                None => break,
            }
        }
        Ok((received, bytes, last))
    });
    let payload = vec![0x5au8; size];
    let mut sent = 0usize;
    let mut send_error = None;
    while sent < count {
        if let Err(e) = tx.send(&payload) {
            send_error = Some(e);
            break;
        }
        sent += 1;
    }
    let (received, bytes, last) = receiver.join().map_err(|_| anyhow::anyhow!("Linux receiver thread panicked"))??;
    if let Some(e) = send_error {
        return Err(e).context("sending on loopback");
    }
    Ok(StreamResult {
        sent,
        received,
        bytes,
        elapsed: last.saturating_duration_since(started).max(Duration::from_nanos(1)),
    })
}

/// The run with the median goodput.
fn median(mut runs: Vec<StreamResult>) -> StreamResult {
    runs.sort_by(|a, b| a.gbps().total_cmp(&b.gbps()));
    runs[runs.len() / 2]
}

struct Row {
    size: usize,
    nagare: StreamResult,
    linux1: StreamResult,
    linux2: StreamResult,
}

pub fn run_udp(args: UdpBenchArgs) -> Result<()> {
    ensure!(args.datagrams > 0, "--datagrams must be at least 1");
    ensure!(args.runs > 0, "--runs must be at least 1");
    let sizes = if args.sizes.is_empty() { DEFAULT_SIZES.to_vec() } else { args.sizes.clone() };
    for &size in &sizes {
        ensure!((1..=65507).contains(&size), "UDP payload size {size} is not in 1..=65507");
    }
    let granted = rcvbuf(&linux_pair()?.1)?;
    println!(
        "nagare bench udp: {} datagrams per run, median of {} runs; Linux receiver SO_RCVBUF {} MiB",
        args.datagrams,
        args.runs,
        granted >> 20
    );
    println!("  nagare:   two instances, simulated link (zero latency, unlimited bandwidth, MTU 1500), one thread, batches of {BATCH}");
    println!("  Linux 1t: two kernel UDP sockets on 127.0.0.1 (lo MTU applies), one thread, batches of {BATCH}");
    println!("  Linux 2t: the same with a sending and a receiving thread");
    println!("  Gbit/s counts UDP payload bytes received; Mpps counts datagrams received.\n");

    // One untimed round first: page faults in the pools, socket buffers
    // and CPU frequency should not land on the first size measured.
    let warm_count = (args.datagrams / 10).max(1);
    nagare_stream(warm_count, sizes[0]).context("warm-up")?;
    linux_one_thread(warm_count, sizes[0]).context("warm-up")?;
    linux_two_threads(warm_count, sizes[0]).context("warm-up")?;

    let mut rows = Vec::new();
    for &size in &sizes {
        let mut nagare = Vec::new();
        let mut linux1 = Vec::new();
        let mut linux2 = Vec::new();
        // Interleaved, so drifting machine load touches all three alike.
        for _ in 0..args.runs {
            nagare.push(
                nagare_stream(args.datagrams, size)
                    .with_context(|| format!("nagare stream of {size}-byte datagrams"))?,
            );
            linux1.push(
                linux_one_thread(args.datagrams, size)
                    .with_context(|| format!("Linux one-thread stream of {size}-byte datagrams"))?,
            );
            linux2.push(
                linux_two_threads(args.datagrams, size)
                    .with_context(|| format!("Linux two-thread stream of {size}-byte datagrams"))?,
            );
        }
        rows.push(Row { size, nagare: median(nagare), linux1: median(linux1), linux2: median(linux2) });
        eprintln!("  ... {size} bytes done");
    }

    println!("| size (B) | nagare Gbit/s | nagare Mpps | Linux 1t Gbit/s | Linux 1t Mpps | 1t lost | nagare / Linux 1t | Linux 2t Gbit/s | Linux 2t Mpps | 2t lost | nagare / Linux 2t |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.2} | {:.3} | {:.2} | {:.3} | {} | {:.2} | {:.2} | {:.3} | {} | {:.2} |",
            r.size,
            r.nagare.gbps(),
            r.nagare.mpps(),
            r.linux1.gbps(),
            r.linux1.mpps(),
            r.linux1.lost(),
            r.nagare.gbps() / r.linux1.gbps(),
            r.linux2.gbps(),
            r.linux2.mpps(),
            r.linux2.lost(),
            r.nagare.gbps() / r.linux2.gbps(),
        );
    }

    if let Some(path) = &args.csv {
        let mut out =
            io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?);
        writeln!(
            out,
            "size,datagrams,nagare_gbps,nagare_mpps,linux1_gbps,linux1_mpps,linux1_lost,linux2_gbps,linux2_mpps,linux2_lost"
        )?;
        for r in &rows {
            writeln!(
                out,
                "{},{},{:.4},{:.4},{:.4},{:.4},{},{:.4},{:.4},{}",
                r.size,
                args.datagrams,
                r.nagare.gbps(),
                r.nagare.mpps(),
                r.linux1.gbps(),
                r.linux1.mpps(),
                r.linux1.lost(),
                r.linux2.gbps(),
                r.linux2.mpps(),
                r.linux2.lost()
            )?;
        }
        out.flush()?;
        println!("\nCSV written to {}", path.display());
    }
    Ok(())
}
