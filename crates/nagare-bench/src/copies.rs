//! `nagare bench copies`: how many times each payload byte is copied on
//! its way through the stack, counted by the code (netd's and its driver's
//! counters in `nagare stat`), for datagrams and a TCP stream, with the
//! std-shaped calls (`send_to`/`recv_from`, `write`/`read`) and the
//! zero-copy ones (`alloc_tx` + `send_buf*`, `recv_buf*`).
//!
//! A `nagare netd --vni` in split placement (its driver a process) and a
//! `nagare up --echo` peer on a 2-port VNI segment; every byte sent comes
//! back, so each run measures a send path and a receive path. With `--tap`
//! (root), netd runs on a multi-queue TAP in a network namespace the bench
//! creates and deletes, and the Linux kernel echoes (threads of the bench
//! moved into the namespace); then the same on a single-queue TAP, which
//! netd cannot steer.

use crate::netns::Namespace;
use anyhow::{bail, Context, Result};
use nagare::net::{TcpStream, UdpSocket};
use nagare::Session;
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct CopiesBenchArgs {
    /// Payload bytes per run.
    pub bytes: usize,
    /// On a TAP with Linux as the echo peer, multi-queue (steered) and
    /// single-queue, not on a VNI segment (root).
    pub tap: bool,
}

const PEER: &str = "10.98.0.1";
/// The TAP of `--tap`, made by netd inside the bench's namespace.
const TAP: &str = "ncp0";

/// The segment and both processes, removed (by pid) however the bench ends.
struct Setup {
    segment: String,
    socket: PathBuf,
    children: Vec<Child>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = nagare_dev::vni::destroy(&self.segment);
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn counters(netd: &Session) -> Result<HashMap<String, u64>> {
    let text = netd.stat()?;
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut words: Vec<&str> = line.split_whitespace().collect();
        if let Some(v) = words.pop().and_then(|v| v.parse().ok()) {
            if matches!(words.first(), Some(&"netd") | Some(&"driver")) {
                out.insert(words.join(" "), v);
            }
        }
    }
    Ok(out)
}

/// Copies per payload byte at each place, between two counter snapshots.
struct Copies {
    name: &'static str,
    client_send: f64,
    netd_send: f64,
    driver_link_send: f64,
    device_to_region: f64,
    region_to_engine: f64,
    engine_to_client: f64,
    client_recv: f64,
    /// Not a copy: payload handed to the application in the buffer the
    /// device put it in (steered), per payload byte.
    handed_in_place: f64,
}

impl Copies {
    fn send(&self) -> f64 {
        self.client_send + self.netd_send + self.driver_link_send
    }
    fn recv(&self) -> f64 {
        self.device_to_region + self.region_to_engine + self.engine_to_client + self.client_recv
    }
}

fn delta(a: &HashMap<String, u64>, b: &HashMap<String, u64>, key: &str) -> f64 {
    (b.get(key).copied().unwrap_or(0).saturating_sub(a.get(key).copied().unwrap_or(0))) as f64
}

fn measure(
    netd: &Session,
    name: &'static str,
    lib_copies: f64,
    bytes: usize,
    run: impl FnOnce() -> Result<()>,
) -> Result<Copies> {
    let before = counters(netd)?;
    run()?;
    // The driver reports its own counters every 250 ms.
    std::thread::sleep(Duration::from_millis(600));
    let after = counters(netd)?;
    let per = |key: &str| delta(&before, &after, key) / bytes as f64;
    Ok(Copies {
        name,
        client_send: lib_copies,
        netd_send: per("netd tx_payload_copied"),
        driver_link_send: per("driver tx_bytes_copied"),
        device_to_region: per("driver reported rx_bytes_copied"),
        region_to_engine: per("driver rx_bytes_copied"),
        engine_to_client: per("netd rx_payload_copied"),
        client_recv: lib_copies,
        handed_in_place: per("netd rx_payload_in_place"),
    })
}

pub fn run(args: CopiesBenchArgs) -> Result<()> {
    let bytes = args.bytes.max(1 << 20);
    let pid = std::process::id();
    if args.tap {
        // Steered (a queue per client) and, for the ratio, the same on a
        // single-queue TAP made beforehand, which netd cannot steer.
        run_on_tap(bytes, true)?;
        println!();
        return run_on_tap(bytes, false);
    }
    let exe = std::env::current_exe()?;
    let mut setup = Setup {
        segment: format!("bench-copies-{pid}"),
        socket: std::env::temp_dir().join(format!("nagare-bench-copies-{pid}.sock")),
        children: Vec::new(),
    };
    nagare_dev::vni::Segment::create(&setup.segment, 2, 1500, 256).context("creating the VNI segment")?;
    let spawn = |args: &[&str]| Command::new(&exe).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    setup.children.push(spawn(&["up", "--vni", &setup.segment, "--addr", &format!("{PEER}/24"), "--echo"])?);
    let socket = setup.socket.to_string_lossy().into_owned();
    setup.children.push(spawn(&[
        "netd",
        "--vni",
        &setup.segment,
        "--addr",
        "10.98.0.2/24",
        "--placement",
        "split",
        "--socket",
        &socket,
    ])?);
    measure_all(&setup.socket, bytes, "split placement on a VNI segment")
}

/// The four runs through a netd on a TAP in a namespace of our own, Linux
/// echoing; `multi_queue`: a TAP netd makes (and steers), else a
/// single-queue one made first with `ip tuntap add`.
fn run_on_tap(bytes: usize, multi_queue: bool) -> Result<()> {
    let ns = Namespace::create(format!("nagare-copies-{}-{multi_queue}", std::process::id()))?;
    if !multi_queue {
        ns.ip(&["tuntap", "add", "dev", TAP, "mode", "tap"])?;
    }
    let netd = ns.start_netd(TAP, "10.98.0.2/24", &["--placement", "split"], "bench-copies")?;
    ns.ip(&["addr", "add", &format!("{PEER}/24"), "dev", TAP])?;
    let stop = AtomicBool::new(false);
    let what = if multi_queue {
        "split placement on a multi-queue TAP (steered), Linux echoing"
    } else {
        "split placement on a single-queue TAP (not steered), Linux echoing"
    };
    std::thread::scope(|scope| {
        let (bound, ready) = std::sync::mpsc::channel();
        let udp_bound = bound.clone();
        let udp = scope.spawn(|| linux_udp_echo(&ns, &stop, udp_bound));
        let tcp = scope.spawn(|| linux_tcp_echo(&ns, &stop, bound));
        // Both echoes listen before the first datagram goes (one sent
        // earlier is answered with a port unreachable, and lost).
        let listening =
            ready.recv_timeout(Duration::from_secs(10)).is_ok() && ready.recv_timeout(Duration::from_secs(10)).is_ok();
        let result = if listening {
            measure_all(&netd.socket, bytes, what)
        } else {
            Err(anyhow::anyhow!("Linux's echo did not start"))
        };
        stop.store(true, Ordering::Relaxed);
        for echo in [udp, tcp] {
            echo.join().map_err(|_| anyhow::anyhow!("an echo thread panicked"))??;
        }
        result
    })
}

/// Linux's UDP echo (port 7) on its side of the TAP, until `stop`; says
/// on `bound` when it listens.
fn linux_udp_echo(ns: &Namespace, stop: &AtomicBool, bound: std::sync::mpsc::Sender<()>) -> Result<()> {
    ns.enter()?;
    let sock = std::net::UdpSocket::bind((PEER, 7))?;
    let _ = bound.send(());
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(&buf[..n], from);
        }
    }
    Ok(())
}

/// Linux's TCP echo (port 7), one connection at a time, until `stop`;
/// says on `bound` when it listens.
fn linux_tcp_echo(ns: &Namespace, stop: &AtomicBool, bound: std::sync::mpsc::Sender<()>) -> Result<()> {
    ns.enter()?;
    let listener = std::net::TcpListener::bind((PEER, 7))?;
    let _ = bound.send(());
    listener.set_nonblocking(true)?;
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut conn, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(Duration::from_millis(50)))?;
        while !stop.load(Ordering::Relaxed) {
            match conn.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => conn.write_all(&buf[..n])?,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// The four runs through the netd at `socket`, and their table.
fn measure_all(socket: &std::path::Path, bytes: usize, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let netd = loop {
        match Session::connect(socket) {
            Ok(n) => break n,
            Err(e) if Instant::now() > deadline => bail!("netd does not answer: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0")?;
    udp.set_read_timeout(Some(Duration::from_secs(2)))?;
    let dgram = 1400;
    let count = bytes / dgram;
    let payload = vec![0x5au8; dgram];
    let mut buf = vec![0u8; 2048];
    // Datagrams one at a time (each echo read before the next send), so
    // none is lost to a full queue and every byte is counted both ways.
    let udp_std = measure(&netd, "UDP send_to / recv_from", 1.0, count * dgram, || {
        for _ in 0..count {
            udp.send_to(&payload, (PEER, 7))?;
            udp.recv_from(&mut buf)?;
        }
        Ok(())
    })?;
    let udp_zc = measure(&netd, "UDP send_buf_to / recv_buf_from", 0.0, count * dgram, || {
        for _ in 0..count {
            let mut tx = netd.alloc_tx()?;
            tx[..dgram].fill(0xa5);
            udp.send_buf_to(tx, dgram, (PEER, 7))?;
            drop(udp.recv_buf_from()?);
        }
        Ok(())
    })?;
    let mut tcp = TcpStream::connect_via(&netd, (PEER, 7))?;
    let chunk = vec![0x3cu8; 16_000];
    let mut back = vec![0u8; 16_000];
    let rounds = bytes / chunk.len();
    let tcp_std = measure(&netd, "TCP write / read", 1.0, rounds * chunk.len(), || {
        for _ in 0..rounds {
            tcp.write_all(&chunk)?;
            tcp.read_exact(&mut back)?;
        }
        Ok(())
    })?;
    tcp.set_nonblocking(true)?;
    let tcp_zc = measure(&netd, "TCP send_buf / recv_buf (lent)", 0.0, rounds * chunk.len(), || {
        let total = rounds * chunk.len();
        let (mut posted, mut echoed) = (0, 0);
        let mut tickets = VecDeque::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while echoed < total || !tickets.is_empty() {
            if Instant::now() > deadline {
                bail!("lent TCP sends stalled");
            }
            while tickets.len() < 8 && posted < total {
                let mut tx = netd.alloc_tx()?;
                tx[..chunk.len()].fill(0x3c);
                tickets.push_back(tcp.send_buf_async(tx, chunk.len())?);
                posted += chunk.len();
            }
            if let Some(t) = tickets.front_mut() {
                if t.try_wait()?.is_some() {
                    tickets.pop_front();
                }
            }
            // Read what has arrived, as a non-blocking reader does (a
            // received segment comes back one to a call).
            while echoed < total {
                match tcp.recv_buf(65536) {
                    Ok(rx) if rx.is_empty() => bail!("the echo stream ended early"),
                    Ok(rx) => echoed += rx.len(),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::yield_now();
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    })?;
    println!("nagare bench copies: copies per payload byte, {what}, {bytes} B each way per run");
    println!("(driver-link and device columns count whole frames, headers included; \"in place\" is");
    println!(" received payload handed over in the buffer the device put it in, not a copy)\n");
    println!(
        "{:<34}{:>8}{:>8}{:>8}{:>8} |{:>8}{:>8}{:>8}{:>8}{:>8} |{:>9}",
        "", "lib", "netd", "link", "send", "driver", "link", "client", "lib", "recv", "in place"
    );
    for c in [udp_std, udp_zc, tcp_std, tcp_zc] {
        println!(
            "{:<34}{:>8.2}{:>8.2}{:>8.2}{:>8.2} |{:>8.2}{:>8.2}{:>8.2}{:>8.2}{:>8.2} |{:>9.2}",
            c.name,
            c.client_send,
            c.netd_send,
            c.driver_link_send,
            c.send(),
            c.device_to_region,
            c.region_to_engine,
            c.engine_to_client,
            c.client_recv,
            c.recv(),
            c.handed_in_place
        );
    }
    Ok(())
}
