//! `nagare bench netd`: the round trip of a 64-byte UDP request and its
//! response between two applications through one inet server (both are
//! clients of the same netd; the datagrams go to netd's own address and
//! never reach the link), beside two sockets on Linux loopback in the same
//! run; and the round trip of an empty request through the rings (Nop).
//!
//! The two applications are threads of this process, each with its own
//! region and connection: the hand-overs are the same shared-memory rings
//! and eventfd wake-ups as between processes.

use anyhow::{Context, Result};
use nagare::net::UdpSocket;
use nagare::Session;
use nagare_host::{DeviceSpec, LinkSpec};
use nagare_netd::{Built, NetdBuilder, Placement};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct NetdBenchArgs {
    /// Round trips per measurement.
    pub round_trips: usize,
    /// Bytes per request and per response.
    pub size: usize,
}

const RESPONDER_PORT: u16 = 7000;
const ADDR: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);

/// Median and 99th percentile of round trips, in microseconds.
struct Figures {
    median: f64,
    p99: f64,
}

fn figures(mut rtts: Vec<Duration>) -> Figures {
    rtts.sort_unstable();
    let at = |q: f64| {
        rtts.get(((rtts.len().saturating_sub(1)) as f64 * q).round() as usize)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
    };
    Figures { median: at(0.5), p99: at(0.99) }
}

/// Removes the bench's segment and stops its netd however the run ends.
struct Cleanup {
    segment: String,
    stop: Arc<AtomicBool>,
    socket: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = nagare_dev::vni::destroy(&self.segment);
        let _ = std::fs::remove_file(&self.socket);
    }
}

pub fn run(args: NetdBenchArgs) -> Result<()> {
    let size = args.size.clamp(1, 1472);
    let n = args.round_trips.max(100);
    let pid = std::process::id();
    let segment = format!("bench-netd-{pid}");
    let socket = std::env::temp_dir().join(format!("nagare-bench-netd-{pid}.sock"));
    let stop = Arc::new(AtomicBool::new(false));
    let cleanup = Cleanup { segment: segment.clone(), stop: Arc::clone(&stop), socket: socket.clone() };
    nagare_dev::vni::Segment::create(&segment, 2, 1500, 256).context("creating the bench's VNI segment")?;

    // The inet server, on a thread of its own (the engine is not Send, so
    // it is made there).
    let link = LinkSpec {
        device: DeviceSpec::Vni { segment: segment.clone() },
        addr: Some(format!("{ADDR}/24").parse().map_err(|e| anyhow::anyhow!("{e:?}"))?),
        ipv6: Vec::new(),
        gateway: None,
        gateway6: None,
        mac: None,
        impair: None,
        syn_budget: None,
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let netd_stop = Arc::clone(&stop);
    let netd_socket = socket.clone();
    let server = std::thread::spawn(move || {
        let made = NetdBuilder::new(link).placement(Placement::Inline).socket(netd_socket).build();
        match made {
            Ok(Built { mut netd, .. }) => {
                let _ = ready_tx.send(Ok(()));
                let _ = netd.run(&netd_stop);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e.into()));
            }
        }
    });
    ready_rx.recv().context("the netd thread ended")??;

    // The responding application.
    let responder_netd = Session::connect(&socket)?;
    let responder = UdpSocket::bind_via(&responder_netd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, RESPONDER_PORT))?;
    responder.set_read_timeout(Some(Duration::from_millis(100)))?;
    let responder_stop = Arc::clone(&stop);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        while !responder_stop.load(Ordering::Relaxed) {
            if let Ok((k, from)) = responder.recv_from(&mut buf) {
                let _ = responder.send_to(&buf[..k], from);
            }
        }
    });

    // The requesting application.
    let requester_netd = Session::connect(&socket)?;
    let requester = UdpSocket::bind_via(&requester_netd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    requester.set_read_timeout(Some(Duration::from_secs(2)))?;
    let request = vec![0x5au8; size];
    let mut buf = vec![0u8; 2048];
    let to = SocketAddrV4::new(ADDR, RESPONDER_PORT);
    let mut nagare_rtts = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        requester.send_to(&request, to)?;
        let (k, _) = requester.recv_from(&mut buf).context("a response through netd")?;
        if k != size {
            anyhow::bail!("a response of {k} bytes to a request of {size}");
        }
        if i >= n / 10 {
            nagare_rtts.push(t.elapsed());
        }
    }
    let mut nop_rtts = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        requester_netd.nop()?;
        nop_rtts.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    drop(requester);
    drop(requester_netd);
    drop(responder_netd);
    let _ = server.join();

    let linux_rtts = linux_loopback(size, n, false)?;
    let polled_rtts = linux_loopback(size, n, true)?;
    drop(cleanup);

    let nagare = figures(nagare_rtts);
    let linux = figures(linux_rtts);
    let polled = figures(polled_rtts);
    let nop = figures(nop_rtts);
    println!("{size}-byte UDP request/response between two applications, {n} round trips, microseconds");
    println!("                                      median      p99");
    println!("nagare: both clients of one netd   {:>9.2} {:>8.2}", nagare.median, nagare.p99);
    println!("Linux: two sockets on 127.0.0.1    {:>9.2} {:>8.2}", linux.median, linux.p99);
    println!("Linux, polled (non-blocking, yield) {:>8.2} {:>8.2}", polled.median, polled.p99);
    println!(
        "ratio Linux/nagare (median): {:.2}x blocking, {:.2}x polled",
        linux.median / nagare.median,
        polled.median / nagare.median
    );
    println!("empty request to netd and back     {:>9.2} {:>8.2}", nop.median, nop.p99);
    Ok(())
}

/// The same exchange between two kernel UDP sockets on loopback: blocking
/// receives (they sleep), or `polled`: non-blocking receives retried with
/// a yield of the CPU, as nagare's netd and client library poll.
fn linux_loopback(size: usize, n: usize, polled: bool) -> Result<Vec<Duration>> {
    let server = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let addr = server.local_addr()?;
    server.set_read_timeout(Some(Duration::from_millis(100)))?;
    server.set_nonblocking(polled)?;
    let stop = Arc::new(AtomicBool::new(false));
    let echo_stop = Arc::clone(&stop);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        while !echo_stop.load(Ordering::Relaxed) {
            match server.recv_from(&mut buf) {
                Ok((k, from)) => {
                    let _ = server.send_to(&buf[..k], from);
                }
                Err(_) if polled => std::thread::yield_now(),
                Err(_) => {}
            }
        }
    });
    let client = std::net::UdpSocket::bind("127.0.0.1:0")?;
    client.set_read_timeout(Some(Duration::from_secs(2)))?;
    client.set_nonblocking(polled)?;
    let request = vec![0x5au8; size];
    let mut buf = vec![0u8; 2048];
    let mut rtts = Vec::with_capacity(n);
    let result = (|| -> Result<()> {
        for i in 0..n + n / 10 {
            let t = Instant::now();
            client.send_to(&request, addr)?;
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                match client.recv_from(&mut buf) {
                    Ok(_) => break,
                    Err(e) if polled && e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                        std::thread::yield_now()
                    }
                    Err(e) => return Err(e).context("a response on loopback"),
                }
            }
            if i >= n / 10 {
                rtts.push(t.elapsed());
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    result.map(|()| rtts)
}
