//! `nagare bench vni`: the VNI beside Linux veth, in the form of Table 2
//! of the Mint paper plus latency, every figure measured in one run.
//!
//! **nagare rows: two processes.** For every measurement the bench
//! creates a two-port segment (`nbv-PID-K` under /dev/shm), starts a
//! *peer*: this same binary re-run as `nagare bench vni --peer SEGMENT`
//! (a hidden mode), which attaches port 1 as 10.213.0.2 and serves a UDP
//! sink and a TCP sink on port 9 and UDP echo on port 7. The bench process
//! itself attaches port 0 as 10.213.0.1 and drives the test. The peer
//! counts what its sinks received (bytes, first and last arrival) and
//! prints it as one `report` line when it is stopped with SIGTERM (sent
//! to its pid); its receive side is what is reported, as iperf3 reports
//! its receiver.
//!
//! - UDP: 1472-byte datagrams (1514-byte frames) with `Udp::send_to`, as
//!   fast as the ring takes them (a full ring holds the sender back): the
//!   engine builds each frame in pool buffers and the port copies it into
//!   the slot. *Frame built in the slot* (zero-copy send): the bench
//!   writes each frame, headers and payload, straight into a reserved
//!   ring slot (`VniPort::slot_batch`, `SlotWriter`), computing the UDP
//!   checksum over the payload as the engine does, and commits it; the
//!   engine is not on this path (it is stepped only while the ring is
//!   full). The same peer and sink count both. *Segmentation offload*:
//!   the same 1472-byte datagrams sent [`GSO_SEGMENTS`] at a time (64 768
//!   bytes per call, as a Linux sender with `UDP_SEGMENT`), *copied* with
//!   `Udp::send_to_segmented` or *by reference* with
//!   `Udp::send_buf_segmented` (one buffer chain filled once, no copy on
//!   the sending side, as the TCP row sends): each call crosses the
//!   segment as one super-frame in consecutive slots, and the peer's
//!   engine splits it into the datagrams its sink reads one by one; the
//!   figure is, as in the other rows, payload bytes read from the sink's
//!   socket per second.
//! - TCP: one connection, the sender queues references to one 256 KiB
//!   buffer (`Tcp::send_buf`, no copy on the sending side, as `nagare perf`
//!   does) into a send buffer of 4 MiB (what Linux's autotuning allows the
//!   iperf3 sender); the sink takes the data with `Tcp::recv_buf` (no copy
//!   out). Both engines use the port's offloads: the sender leaves
//!   checksums partial and sends super-segments of up to 64 KiB, which
//!   cross the segment in consecutive slots.
//! - RTT: 64-byte UDP datagrams to the echo port, one at a time. *Polled*:
//!   both processes spin (never sleep, the port in busy-poll mode so
//!   senders need not ring); *sleep*: both sleep in `poll(2)` on the
//!   port's eventfd when idle and are woken by the doorbell; *sleep, one
//!   CPU*: the same with both pinned to one CPU (no wake-up crosses CPUs).
//! - Throughput tests run with both sides sleeping when idle, as
//!   `nagare up` does.
//!
//! **Linux rows: veth between two network namespaces** (`nbv-PID-a` and
//! `nbv-PID-b`, 10.214.0.1 and 10.214.0.2) that the bench creates and
//! removes (a guard deletes them on any exit), with `iperf3` (UDP
//! `-u -b 0 -l 1472`, TCP single stream at the veth MTU) and
//! `sockperf ping-pong -m 64 --full-rtt` (blocking; `--nonblocked` with a
//! busy `recvfrom` server as the polled row; under `taskset` for the
//! one-CPU row). Without root, `ip`,
//! `iperf3` or `sockperf` those rows print SKIPPED with the reason; the
//! nagare rows still run.
//!
//! Every loop is bounded in time; helper processes are ended by pid (and
//! the peer also dies with its parent: `PR_SET_PDEATHSIG`).

use anyhow::{anyhow, bail, ensure, Context, Result};
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::iface::{Error as IfError, HEADROOM};
use nagare_core::tcp::connection::State;
use nagare_core::udp::UDP_MAX_SEGMENTS;
use nagare_core::{Interface, InterfaceConfig};
use nagare_dev::vni::{default_slots, format_size, segment_size, Segment, VniPort};
use nagare_dev::{Device, MonotonicClock};
use nagare_host::realtime::{self, wait_for};
use nagare_host::Host;
use nagare_wire::{Checksum, IpProtocol, Ipv4Repr, UdpRepr};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
const LINUX_A: &str = "10.214.0.1";
const LINUX_B: &str = "10.214.0.2";
const SINK_PORT: u16 = 9;
const ECHO_PORT: u16 = 7;
const IPERF_PORT: u16 = 5291;
const SOCKPERF_PORT: u16 = 11291;
/// As `nagare up`: 2 KiB buffers (larger frames are chains), 16 Ki of them.
const POOL_BUFFERS: usize = 16384;
const BUFFER_SIZE: usize = 2048;
/// UDP payload of a 1500-byte IP packet.
const UDP_LEN: usize = 1472;
/// Payload of a round-trip datagram.
const PING_LEN: usize = 64;
/// Frames the UDP sender keeps queued for the device.
const UDP_BACKLOG: usize = 512;
/// Datagrams per segmented send: the most 1472-byte ones one IPv4 packet
/// holds (44 × 1472 = 64 768 bytes).
const GSO_SEGMENTS: usize = 44;
/// Super-frames the segmented UDP sender keeps queued for the device
/// (about as many bytes as [`UDP_BACKLOG`] frames).
const GSO_BACKLOG: usize = 12;
/// Frames built in slots per published batch (zero-copy UDP sender).
const SLOT_BATCH: usize = 64;
/// Source port of the datagrams built in slots.
const SLOT_SRC_PORT: u16 = 40_009;
/// The TCP sender's buffer, handed out by reference.
const FILL_LEN: usize = 256 * 1024;
/// The TCP sender's send buffer: the most Linux's autotuning gives the
/// iperf3 sender it is compared with (the maximum of `tcp_wmem`, 4 MiB by
/// default). The engine's own default, 256 KiB, would hold a sender on
/// the segment to 256 KiB per round trip.
const SEND_BUFFER: usize = 4 << 20;
/// Longest a peer lives, whatever happens to its parent.
const PEER_LIFETIME: Duration = Duration::from_secs(600);
/// How long to wait for a peer to attach, and for its report.
const PEER_START: Duration = Duration::from_secs(10);
const PEER_REPORT: Duration = Duration::from_secs(10);
/// A round trip not answered within this is counted lost.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct VniBenchArgs {
    /// Seconds per throughput measurement.
    pub time: f64,
    /// Round trips per latency measurement (each also ends after --time x 2).
    pub pings: usize,
    /// Runs of each measurement, interleaved; the median is reported.
    pub runs: usize,
    /// Slots per ring of the segments (`None`: `vni::default_slots` for
    /// each MTU).
    pub slots: Option<usize>,
    /// Tiny settings for a smoke test: 0.2 s, 200 round trips, one run.
    pub quick: bool,
    /// Run only these measurements (udp, tcp1500, tcp9000, rtt), e.g.
    /// --only udp,rtt (default: all).
    pub only: Vec<Only>,
    /// Leave out the Linux veth peers.
    pub no_linux: bool,
    /// (internal) Run as the peer on this segment.
    pub peer: Option<String>,
    /// (internal) The peer spins instead of sleeping when idle.
    pub peer_poll: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    Udp,
    Tcp1500,
    Tcp9000,
    Rtt,
}

// ---- hosts on a VNI port ------------------------------------------------

fn vni_host(seg: Arc<Segment>, addr: Ipv4Addr) -> Result<Host<VniPort>> {
    vni_host_with(seg, addr, |_| {})
}

/// A host on a port of `seg`, its configuration changed by `edit`.
fn vni_host_with(seg: Arc<Segment>, addr: Ipv4Addr, edit: impl FnOnce(&mut InterfaceConfig)) -> Result<Host<VniPort>> {
    let port = VniPort::attach(seg, None).context("attaching to the bench segment")?;
    let mut config =
        InterfaceConfig::new(EthernetAddress(port.mac()), Ipv4Cidr::new(addr, 24).map_err(|e| anyhow!("{e}"))?);
    edit(&mut config);
    nagare_host::secrets::randomize(&mut config)?;
    let iface = Interface::new(config, port.capabilities(), BufferPool::new(BUFFER_SIZE, POOL_BUFFERS));
    Ok(Host::new(iface, port))
}

fn eng(e: IfError) -> anyhow::Error {
    anyhow!("{e}")
}

// ---- the peer process -----------------------------------------------------

/// What the peer's sinks saw.
#[derive(Default)]
struct Sink {
    packets: u64,
    bytes: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Sink {
    fn add(&mut self, bytes: usize, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.packets += 1;
        self.bytes += bytes as u64;
    }

    fn nanos(&self) -> u128 {
        match (self.first, self.last) {
            (Some(a), Some(b)) => b.duration_since(a).as_nanos(),
            _ => 0,
        }
    }
}

/// `nagare bench vni --peer SEGMENT [--peer-poll]`: attach, say `ready`,
/// serve until SIGTERM (or [`PEER_LIFETIME`]), say `report ...`.
fn run_peer(segment: &str, poll: bool) -> Result<()> {
    // Die with the bench, whatever becomes of it.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let seg = Arc::new(Segment::open(segment).with_context(|| format!("opening VNI {segment}"))?);
    // The sink's socket holds the datagrams of one receive batch of UDP
    // super-frames (64 × 44), as a Linux receiver raises SO_RCVBUF; the
    // default (1024 datagrams) would drop what one step delivers.
    let mut host = vni_host_with(seg, B_ADDR, |c| {
        c.udp_rx_queue_packets = nagare_host::host::RX_BATCH * UDP_MAX_SEGMENTS;
        c.udp_rx_queue_bytes = 16 << 20;
    })?;
    host.device.set_busy_poll(poll);
    let any = |port| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    let udp_sink = host.iface.udp().bind(any(SINK_PORT)).map_err(eng)?;
    let echo = host.iface.udp().bind(any(ECHO_PORT)).map_err(eng)?;
    let listener = host.iface.tcp().listen(any(SINK_PORT), 4).map_err(eng)?;
    let (mut udp, mut tcp) = (Sink::default(), Sink::default());
    let mut conns = Vec::new();
    let mut echoed = 0u64;
    let mut errors = 0u64;
    println!("ready");
    let end = Instant::now() + PEER_LIFETIME;
    while !realtime::stopped(&stop) && Instant::now() < end {
        let now = clock.now();
        let report = host.step(now);
        if report.device_error {
            errors += 1;
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let mut worked = report.did_work();
        // One clock read per step that received anything.
        let stamp = if report.received > 0 { Instant::now() } else { end };
        while let Some(d) = host.iface.udp().recv(udp_sink).map_err(eng)? {
            udp.add(d.payload.len(), stamp);
            worked = true;
        }
        while let Some(d) = host.iface.udp().recv(echo).map_err(eng)? {
            if host.iface.udp().send_buf(echo, d.payload, d.source, now).is_ok() {
                echoed += 1;
            }
            worked = true;
        }
        while let Some(c) = host.iface.tcp().accept(listener).map_err(eng)? {
            conns.push(c);
            worked = true;
        }
        conns.retain(|&c| loop {
            match host.iface.tcp().recv_buf(c, 1 << 20, now) {
                Ok(Some(data)) => {
                    tcp.add(data.len(), stamp);
                    worked = true;
                }
                Ok(None) => {
                    let _ = host.iface.tcp().close(c, now);
                    break false;
                }
                Err(IfError::WouldBlock) => break true,
                Err(_) => break false,
            }
        });
        if poll || worked || host.has_pending_tx() {
            continue;
        }
        let now = clock.now();
        let timeout = host.poll_at().map_or(Duration::from_millis(100), |t| t.saturating_since(now));
        if !timeout.is_zero() {
            wait_for(host.device.raw_fd(), false, timeout)?;
        }
    }
    let v = host.device.vni_stats();
    let s = host.device.stats();
    println!(
        "report udp_packets={} udp_bytes={} udp_ns={} tcp_bytes={} tcp_ns={} echoed={} rx_frames={} rx_errors={} rx_no_buffer={} \
         doorbells_rung={} doorbells_masked={} doorbells_elided={} step_errors={errors}",
        udp.packets,
        udp.bytes,
        udp.nanos(),
        tcp.bytes,
        tcp.nanos(),
        echoed,
        s.rx_frames,
        s.rx_errors,
        s.rx_dropped_no_buffer,
        v.doorbells_rung,
        v.doorbells_masked,
        v.doorbells_elided,
    );
    Ok(())
}

// ---- guards: segment, child processes, namespaces --------------------------

static SEGMENTS: AtomicUsize = AtomicUsize::new(0);

/// A segment of this bench, removed on drop.
struct SegmentGuard {
    name: String,
    seg: Arc<Segment>,
}

impl SegmentGuard {
    fn create(mtu: usize, slots: usize) -> Result<SegmentGuard> {
        let name = format!("nbv-{}-{}", std::process::id(), SEGMENTS.fetch_add(1, Ordering::Relaxed));
        let seg = Segment::create(&name, 2, mtu, slots).with_context(|| format!("creating VNI {name}"))?;
        Ok(SegmentGuard { name, seg: Arc::new(seg) })
    }
}

impl Drop for SegmentGuard {
    fn drop(&mut self) {
        let _ = nagare_dev::vni::destroy(&self.name);
    }
}

/// A child process, ended by its pid on drop: SIGTERM, then SIGKILL.
struct Proc {
    child: Option<Child>,
    lines: Option<Receiver<String>>,
}

impl Proc {
    fn spawn(mut cmd: Command, read_lines: bool) -> Result<Proc> {
        cmd.stdin(Stdio::null());
        cmd.stdout(if read_lines { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
        let lines = if read_lines {
            let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            Some(rx)
        } else {
            None
        };
        Ok(Proc { child: Some(child), lines })
    }

    /// The next line starting with `prefix`, within `limit`.
    fn line(&self, prefix: &str, limit: Duration) -> Result<String> {
        let rx = self.lines.as_ref().ok_or_else(|| anyhow!("output not captured"))?;
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(_) => {}
                Err(_) => bail!("no {prefix:?} line within {limit:?}"),
            }
        }
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(child) = &self.child {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill(2) on our own child's pid (positive).
                unsafe { libc::kill(pid, sig) };
            }
        }
    }

    /// SIGTERM, and wait up to `limit` for the exit; SIGKILL after that.
    fn stop(&mut self, limit: Duration) {
        if self.child.as_mut().is_none_or(|c| matches!(c.try_wait(), Ok(Some(_)))) {
            self.child = None;
            return;
        }
        self.signal(libc::SIGTERM);
        let Some(mut child) = self.child.take() else { return };
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(1));
    }
}

/// The nagare peer on a segment.
struct Peer {
    proc_: Proc,
}

impl Peer {
    fn start(segment: &str, poll: bool) -> Result<Peer> {
        let exe = std::env::current_exe().context("finding the nagare binary")?;
        let mut cmd = Command::new(exe);
        cmd.args(["bench", "vni", "--peer", segment]);
        if poll {
            cmd.arg("--peer-poll");
        }
        let proc_ = Proc::spawn(cmd, true)?;
        proc_.line("ready", PEER_START).context("the peer did not attach")?;
        Ok(Peer { proc_ })
    }

    /// Stops the peer and returns its counters.
    fn finish(mut self) -> Result<HashMap<String, u64>> {
        self.proc_.signal(libc::SIGTERM);
        let line = self.proc_.line("report", PEER_REPORT).context("the peer did not report")?;
        self.proc_.stop(Duration::from_secs(2));
        Ok(line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| v.parse().ok().map(|v| (k.to_string(), v)))
            .collect())
    }
}

fn get(report: &HashMap<String, u64>, key: &str) -> u64 {
    report.get(key).copied().unwrap_or(0)
}

// ---- the nagare measurements --------------------------------------------

/// A throughput measurement at the receiver.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    bytes: u64,
    secs: f64,
    sent: u64,
    received: u64,
}

impl Rate {
    fn gbps(&self) -> f64 {
        if self.secs > 0.0 {
            self.bytes as f64 * 8.0 / self.secs / 1e9
        } else {
            0.0
        }
    }
    fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }
}

/// Round-trip times in microseconds: min, median, mean, 99th percentile,
/// max, and round trips without an answer.
#[derive(Debug, Clone, Copy)]
struct Rtt {
    min: f64,
    p50: f64,
    avg: f64,
    p99: f64,
    max: f64,
    lost: u64,
}

impl Rtt {
    /// The summary of measured round trips (None if there are none).
    fn of(mut samples: Vec<f64>, lost: u64) -> Option<Rtt> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let pct = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
        Some(Rtt {
            min: samples[0],
            p50: pct(0.5),
            avg: samples.iter().sum::<f64>() / samples.len() as f64,
            p99: pct(0.99),
            max: samples[samples.len() - 1],
            lost,
        })
    }
}

/// One step of the bench's own host; device errors are fatal here.
fn step(host: &mut Host<VniPort>, clock: &MonotonicClock) -> Result<bool> {
    let report = host.step(clock.now());
    if let Some(e) = host.take_device_error().filter(|_| report.device_error) {
        bail!("stepping the bench host: {e}");
    }
    Ok(report.did_work())
}

/// Sleeps on the port's doorbell until something may have arrived.
fn idle(host: &Host<VniPort>, clock: &MonotonicClock, cap: Duration) -> Result<()> {
    let now = clock.now();
    let timeout = host.poll_at().map_or(cap, |t| t.saturating_since(now)).min(cap);
    if !timeout.is_zero() {
        wait_for(host.device.raw_fd(), false, timeout)?;
    }
    Ok(())
}

/// The bench side of one measurement: a segment, the peer, our host, ARP
/// resolved (one echo answered).
struct Setup {
    host: Host<VniPort>,
    peer: Peer,
    clock: MonotonicClock,
    _seg: SegmentGuard,
}

impl Setup {
    /// Ends a UDP run of `sent` datagrams: what is queued goes out, the
    /// peer drains its ring and reports what its sink received.
    fn udp_rate(mut self, sent: u64) -> Result<Rate> {
        self.flush(Duration::from_secs(2))?;
        std::thread::sleep(Duration::from_millis(50));
        let r = self.peer.finish()?;
        Ok(Rate {
            bytes: get(&r, "udp_bytes"),
            secs: get(&r, "udp_ns") as f64 / 1e9,
            sent,
            received: get(&r, "udp_packets"),
        })
    }

    fn new(mtu: usize, slots: usize, poll: bool) -> Result<Setup> {
        let seg = SegmentGuard::create(mtu, slots)?;
        let peer = Peer::start(&seg.name, poll)?;
        let clock = MonotonicClock::new();
        let mut host = vni_host(Arc::clone(&seg.seg), A_ADDR)?;
        host.device.set_busy_poll(poll);
        let mut s = Setup { host, peer, clock, _seg: seg };
        let sock = s.host.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(eng)?;
        let mut answered = false;
        let end = Instant::now() + Duration::from_secs(5);
        while !answered && Instant::now() < end {
            s.host
                .iface
                .udp()
                .send_to(sock, b"warm", SocketAddrV4::new(B_ADDR, ECHO_PORT), s.clock.now())
                .map_err(eng)?;
            let until = Instant::now() + Duration::from_millis(200);
            while Instant::now() < until {
                step(&mut s.host, &s.clock)?;
                if s.host.iface.udp().recv(sock).map_err(eng)?.is_some() {
                    answered = true;
                    break;
                }
                idle(&s.host, &s.clock, Duration::from_millis(5))?;
            }
        }
        s.host.iface.udp().close(sock).map_err(eng)?;
        ensure!(answered, "the peer did not answer on the segment within 5 s");
        Ok(s)
    }

    /// Steps until the transmit queue is empty (bounded).
    fn flush(&mut self, limit: Duration) -> Result<()> {
        let end = Instant::now() + limit;
        while self.host.has_pending_tx() && Instant::now() < end {
            step(&mut self.host, &self.clock)?;
        }
        Ok(())
    }
}

fn nagare_udp(secs: f64, slots: usize) -> Result<Rate> {
    let mut s = Setup::new(1500, slots, false)?;
    let sock = s.host.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(eng)?;
    let payload = vec![0x5au8; UDP_LEN];
    let dst = SocketAddrV4::new(B_ADDR, SINK_PORT);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while Instant::now() < end && !interrupted() {
        let now = s.clock.now();
        while s.host.iface.tx_queue().len() < UDP_BACKLOG {
            match s.host.iface.udp().send_to(sock, &payload, dst, now) {
                Ok(()) => sent += 1,
                Err(IfError::NoBuffer) => break,
                Err(e) => return Err(eng(e)),
            }
        }
        step(&mut s.host, &s.clock)?;
    }
    s.udp_rate(sent)
}

/// UDP with segmentation offload: [`GSO_SEGMENTS`] datagrams of
/// [`UDP_LEN`] bytes per call, each call one super-frame across the
/// segment, split by the peer's engine. The payload is copied into packet
/// buffers on every call (`Udp::send_to_segmented`), or, `by_reference`,
/// filled once and handed over by reference (`Udp::send_buf_segmented`,
/// as the TCP row hands its buffer to `Tcp::send_buf`).
fn nagare_udp_gso(secs: f64, slots: usize, by_reference: bool) -> Result<Rate> {
    let mut s = Setup::new(1500, slots, false)?;
    ensure!(
        s.host.iface.capabilities().tx_offloads.udp_segmentation >= UDP_LEN * GSO_SEGMENTS + 28,
        "the port does not take UDP super-frames of {GSO_SEGMENTS} datagrams (--slots too small?)"
    );
    let sock = s.host.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(eng)?;
    let payload = vec![0x5au8; UDP_LEN * GSO_SEGMENTS];
    let filled = PacketBuf::from_slice(s.host.iface.pool(), HEADROOM, &payload)
        .map_err(|_| anyhow!("no packet buffers for the payload"))?;
    let dst = SocketAddrV4::new(B_ADDR, SINK_PORT);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while Instant::now() < end && !interrupted() {
        let now = s.clock.now();
        while s.host.iface.tx_queue().len() < GSO_BACKLOG {
            let mut udp = s.host.iface.udp();
            let result = if by_reference {
                udp.send_buf_segmented(sock, filled.clone(), UDP_LEN, dst, now)
            } else {
                udp.send_to_segmented(sock, &payload, UDP_LEN, dst, now)
            };
            match result {
                Ok(()) => sent += GSO_SEGMENTS as u64,
                Err(IfError::NoBuffer) => break,
                Err(e) => return Err(eng(e)),
            }
        }
        step(&mut s.host, &s.clock)?;
    }
    s.udp_rate(sent)
}

/// UDP with every frame built in a ring slot: Ethernet, IPv4 and UDP
/// headers (42 bytes, made on the stack) and the 1472-byte payload are
/// written into the slot, the one copy of the payload on the sending
/// side; the checksum is summed over the payload as `Udp::send_to` does.
fn nagare_udp_in_slot(secs: f64, slots: usize) -> Result<Rate> {
    let mut s = Setup::new(1500, slots, false)?;
    s.host.device.refresh().context("refreshing the bench port")?;
    let dst_mac =
        s.host.device.peer_links().iter().find(|l| l.up).map(|l| l.mac).context("the peer's port is not up")?;
    let payload = vec![0x5au8; UDP_LEN];
    let frame_len = 14 + 20 + 8 + UDP_LEN;
    let mut header = [0u8; 42];
    header[..6].copy_from_slice(&dst_mac);
    header[6..12].copy_from_slice(&s.host.device.mac());
    header[12..14].copy_from_slice(&[0x08, 0x00]);
    let udp = UdpRepr { src_port: SLOT_SRC_PORT, dst_port: SINK_PORT };
    let mut ip = Ipv4Repr::new(A_ADDR, B_ADDR, IpProtocol::Udp, 8 + UDP_LEN, 64);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while Instant::now() < end && !interrupted() {
        let mut full = false;
        {
            let mut batch = s.host.device.slot_batch().context("building in the bench port's slots")?;
            for _ in 0..SLOT_BATCH {
                let mut w = match batch.reserve_slot(dst_mac) {
                    Ok(w) => w,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        full = true;
                        break;
                    }
                    Err(e) => return Err(e).context("reserving a slot"),
                };
                let mut sum = Checksum::new();
                sum.add_bytes(&payload);
                ip.ident = ip.ident.wrapping_add(1);
                ip.emit(&mut header[14..34]).map_err(|e| anyhow!("{e}"))?;
                udp.emit_header(&mut header[34..42], UDP_LEN, A_ADDR, B_ADDR, sum).map_err(|e| anyhow!("{e}"))?;
                w.write(0, &header)?;
                w.write(header.len(), &payload)?;
                w.commit(frame_len)?;
                sent += 1;
            }
        }
        if full {
            // While the ring is full, let the engine read what came in.
            step(&mut s.host, &s.clock)?;
        }
    }
    s.udp_rate(sent)
}

fn nagare_tcp(mtu: usize, secs: f64, slots: usize) -> Result<Rate> {
    let mut s = Setup::new(mtu, slots, false)?;
    let filler = PacketBuf::from_slice(s.host.iface.pool(), HEADROOM, &vec![0u8; FILL_LEN])
        .map_err(|_| anyhow!("no packet buffers for the send buffer"))?;
    let conn = s.host.iface.tcp().connect(SocketAddrV4::new(B_ADDR, SINK_PORT), 0, s.clock.now()).map_err(eng)?;
    s.host.iface.tcp().set_send_buffer(conn, SEND_BUFFER, s.clock.now()).map_err(eng)?;
    let end = Instant::now() + Duration::from_secs(5);
    while matches!(s.host.iface.tcp_ref().state(conn).map_err(eng)?, State::SynSent | State::SynReceived) {
        ensure!(Instant::now() < end, "TCP connection to the peer not established within 5 s");
        step(&mut s.host, &s.clock)?;
    }
    let mut sent = 0u64;
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end && !interrupted() {
        let now = s.clock.now();
        for _ in 0..16 {
            let rest = s.host.iface.tcp().send_buf(conn, filler.clone(), now).map_err(eng)?;
            let taken = FILL_LEN - rest.len();
            sent += taken as u64;
            if !rest.is_empty() {
                break;
            }
        }
        step(&mut s.host, &s.clock)?;
    }
    s.host.iface.tcp().shutdown(conn, s.clock.now()).map_err(eng)?;
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        let state = s.host.iface.tcp_ref().state(conn);
        if !matches!(
            state,
            Ok(State::Established | State::FinWait1 | State::CloseWait | State::Closing | State::LastAck)
        ) {
            break;
        }
        if !step(&mut s.host, &s.clock)? {
            idle(&s.host, &s.clock, Duration::from_millis(1))?;
        }
    }
    let _ = s.host.iface.tcp().close(conn, s.clock.now());
    let r = s.peer.finish()?;
    let received = get(&r, "tcp_bytes");
    if received != sent {
        log::warn!("TCP at MTU {mtu}: {sent} bytes sent, the peer counted {received}");
    }
    Ok(Rate { bytes: received, secs: get(&r, "tcp_ns") as f64 / 1e9, sent, received })
}

/// How the two ends of a round trip wait.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Both spin.
    Polled,
    /// Both sleep when idle, on any CPU.
    Sleep,
    /// Both sleep when idle, pinned to one CPU (no cross-CPU wake-up).
    SleepOneCpu,
}

/// The CPU both ends are pinned to in [`Wait::SleepOneCpu`].
fn pin_cpu() -> usize {
    std::thread::available_parallelism().map_or(0, |n| usize::from(n.get() > 1))
}

/// Pins this thread (and the processes it starts meanwhile) to one CPU;
/// the previous mask comes back on drop.
struct Pinned(Option<libc::cpu_set_t>);

impl Pinned {
    fn to(cpu: Option<usize>) -> Result<Pinned> {
        let Some(cpu) = cpu else { return Ok(Pinned(None)) };
        // SAFETY: cpu_set_t is plain data; the calls get its exact size.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            ensure!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) == 0,
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            );
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            ensure!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) == 0,
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            );
            Ok(Pinned(Some(old)))
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: restores a mask read by sched_getaffinity.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old) };
        }
    }
}

fn nagare_rtt(wait: Wait, pings: usize, limit: Duration, slots: usize) -> Result<Option<Rtt>> {
    let poll = wait == Wait::Polled;
    let _pinned = Pinned::to((wait == Wait::SleepOneCpu).then(pin_cpu))?;
    let mut s = Setup::new(1500, slots, poll)?;
    let sock = s.host.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(eng)?;
    let payload = [0x5au8; PING_LEN];
    let dst = SocketAddrV4::new(B_ADDR, ECHO_PORT);
    let (mut samples, mut lost) = (Vec::with_capacity(pings), 0u64);
    let end = Instant::now() + limit;
    // A few unmeasured round trips first (caches, page faults).
    for i in 0..pings + pings / 10 {
        if Instant::now() >= end || interrupted() {
            break;
        }
        let t0 = Instant::now();
        s.host.iface.udp().send_to(sock, &payload, dst, s.clock.now()).map_err(eng)?;
        let got = loop {
            let worked = step(&mut s.host, &s.clock)?;
            if s.host.iface.udp().recv(sock).map_err(eng)?.is_some() {
                break true;
            }
            if t0.elapsed() > PING_TIMEOUT {
                break false;
            }
            if !poll && !worked && !s.host.has_pending_tx() {
                idle(&s.host, &s.clock, Duration::from_millis(100))?;
            }
        };
        let t = t0.elapsed();
        if i < pings / 10 {
            continue;
        }
        if got {
            samples.push(t.as_secs_f64() * 1e6);
        } else {
            lost += 1;
        }
    }
    s.peer.finish()?;
    Ok(Rtt::of(samples, lost))
}

// ---- the Linux peers over veth ------------------------------------------

/// Two namespaces joined by a veth pair, deleted on drop.
struct Veth {
    a: String,
    b: String,
    made: Vec<String>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().context("running ip")?;
    ensure!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    Ok(())
}

impl Veth {
    fn create() -> Result<Veth> {
        let pid = std::process::id();
        let mut v = Veth { a: format!("nbv-{pid}-a"), b: format!("nbv-{pid}-b"), made: Vec::new() };
        let (ifa, ifb) = (format!("nbv{pid}a"), format!("nbv{pid}b"));
        for ns in [v.a.clone(), v.b.clone()] {
            ip(&["netns", "add", &ns])?;
            v.made.push(ns);
        }
        ip(&["link", "add", &ifa, "netns", &v.a, "type", "veth", "peer", "name", &ifb, "netns", &v.b])?;
        ip(&["-n", &v.a, "addr", "add", &format!("{LINUX_A}/24"), "dev", &ifa])?;
        ip(&["-n", &v.b, "addr", "add", &format!("{LINUX_B}/24"), "dev", &ifb])?;
        for (ns, dev) in [(&v.a, &ifa), (&v.b, &ifb)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(v)
    }

    fn set_mtu(&self, mtu: usize) -> Result<()> {
        let pid = std::process::id();
        ip(&["-n", &self.a, "link", "set", &format!("nbv{pid}a"), "mtu", &mtu.to_string()])?;
        ip(&["-n", &self.b, "link", "set", &format!("nbv{pid}b"), "mtu", &mtu.to_string()])
    }

    /// `timeout LIMIT ip netns exec NS PROGRAM ARGS...`
    fn exec(&self, ns: &str, limit: Duration, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "2", &format!("{}", limit.as_secs().max(1))]);
        cmd.args(["ip", "netns", "exec", ns, program]).args(args);
        cmd
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        for ns in self.made.drain(..) {
            let _ = Command::new("ip").args(["netns", "delete", &ns]).stdin(Stdio::null()).output();
        }
    }
}

/// Why the Linux rows cannot run here, if they cannot.
fn linux_missing(program: &str) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces and veth need CAP_NET_ADMIN)".into());
    }
    for p in ["ip", "timeout", program] {
        let found =
            std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()));
        if !found {
            return Some(format!("{p} is not installed (scripts/install-test-deps.sh installs it)"));
        }
    }
    None
}

/// The first object named `name` in `value`, depth first (iperf3 puts
/// `sum_received` under `end`).
fn find_object<'a>(value: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => {
            map.get(name).filter(|v| v.is_object()).or_else(|| map.values().find_map(|v| find_object(v, name)))
        }
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_object(v, name)),
        _ => None,
    }
}

fn iperf3(veth: &Veth, udp: bool, secs: f64) -> Result<Rate> {
    let t = (secs.round() as u64).max(1);
    let limit = Duration::from_secs(t + 20);
    let port = IPERF_PORT.to_string();
    let _server = Proc::spawn(veth.exec(&veth.b, limit, "iperf3", &["-s", "-1", "-B", LINUX_B, "-p", &port]), false)?;
    let mut args = vec!["-c", LINUX_B, "-p", &port, "-J"];
    let t_s = t.to_string();
    args.extend(["-t", &t_s]);
    if udp {
        args.extend(["-u", "-b", "0", "-l", "1472"]);
    }
    let mut out = None;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        let o = veth.exec(&veth.a, limit, "iperf3", &args).stdin(Stdio::null()).output().context("running iperf3")?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.success() {
            out = Some(text);
            break;
        }
        if !text.contains("connect") {
            bail!("iperf3 failed: {}", text.lines().filter(|l| l.contains("error")).collect::<Vec<_>>().join(" "));
        }
    }
    let text = out.ok_or_else(|| anyhow!("iperf3 could not reach its server"))?;
    let report: serde_json::Value = serde_json::from_str(&text).context("iperf3's output is not JSON")?;
    let received = find_object(&report, "sum_received").ok_or_else(|| anyhow!("no sum_received in iperf3's output"))?;
    let number = |key: &str| received.get(key).and_then(serde_json::Value::as_f64);
    let bps = number("bits_per_second").ok_or_else(|| anyhow!("no bits_per_second in iperf3's sum_received"))?;
    let secs = number("seconds").unwrap_or(0.0);
    let bytes = number("bytes").unwrap_or(0.0) as u64;
    let (sent, received) = if udp {
        let packets = number("packets").unwrap_or(0.0) as u64;
        let lost = number("lost_packets").unwrap_or(0.0) as u64;
        (packets, packets.saturating_sub(lost))
    } else {
        (bytes, bytes)
    };
    // Reported as iperf3 computes it (bytes over its own interval).
    let secs = if bps > 0.0 { bytes as f64 * 8.0 / bps } else { secs };
    Ok(Rate { bytes, secs, sent, received })
}

fn sockperf(veth: &Veth, wait: Wait, secs: f64) -> Result<Option<Rtt>> {
    let poll = wait == Wait::Polled;
    let cpu = pin_cpu().to_string();
    // taskset -c CPU sockperf ... (pinned) or sockperf ...
    let (program, pin): (&str, Vec<&str>) =
        if wait == Wait::SleepOneCpu { ("taskset", vec!["-c", &cpu, "sockperf"]) } else { ("sockperf", vec![]) };
    let t = (secs.round() as u64).max(1);
    let limit = Duration::from_secs(t + 20);
    let port = SOCKPERF_PORT.to_string();
    // Polled: a busy recvfrom loop on a non-blocking socket, which
    // sockperf offers only with a feed file (-f) naming the socket.
    let feed = FileGuard(std::env::temp_dir().join(format!("nbv-{}.feed", std::process::id())));
    let feed_path = feed.0.to_string_lossy().into_owned();
    let mut sargs = pin.clone();
    sargs.push("sr");
    if poll {
        std::fs::write(&feed.0, format!("U:{LINUX_B}:{port}\n")).context("writing sockperf's feed file")?;
        sargs.extend(["-f", &feed_path, "-F", "r", "--nonblocked"]);
    } else {
        sargs.extend(["-i", LINUX_B, "-p", &port]);
    }
    let _server = Proc::spawn(veth.exec(&veth.b, limit, program, &sargs), false)?;
    std::thread::sleep(Duration::from_millis(300));
    let t_s = t.to_string();
    let mut args = pin.clone();
    args.extend(["pp", "-i", LINUX_B, "-p", &port, "-m", "64", "-t", &t_s, "--full-rtt"]);
    if poll {
        args.push("--nonblocked");
    }
    let o = veth.exec(&veth.a, limit, program, &args).stdin(Stdio::null()).output().context("running sockperf")?;
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    ensure!(o.status.success(), "sockperf failed: {}", text.lines().last().unwrap_or(""));
    let after = |key: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.contains(key))?;
        let rest = &line[line.find(key)? + key.len()..];
        rest.trim_start_matches([' ', '='])
            .split_whitespace()
            .next()?
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok()
    };
    let avg = after("Round trip is")
        .ok_or_else(|| anyhow!("no summary in sockperf's output: {}", text.lines().last().unwrap_or("")))?;
    // sockperf gives a summary, not samples: take its figures.
    let figure = |key: &str| after(key).unwrap_or(f64::NAN);
    Ok(Some(Rtt {
        min: figure("<MIN> observation"),
        p50: figure("percentile 50.000"),
        avg,
        p99: figure("percentile 99.000"),
        max: figure("<MAX> observation"),
        lost: after("# dropped messages").unwrap_or(0.0) as u64,
    }))
}

/// A file removed on drop.
struct FileGuard(std::path::PathBuf);

impl Drop for FileGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn median_rate(mut v: Vec<Rate>) -> Option<Rate> {
    v.sort_by(|a, b| a.gbps().total_cmp(&b.gbps()));
    v.get(v.len() / 2).copied()
}

/// The run with the median p50.
fn median_rtt(mut v: Vec<Rtt>) -> Option<Rtt> {
    v.sort_by(|a, b| a.p50.total_cmp(&b.p50));
    v.get(v.len() / 2).copied()
}

/// Raised by SIGINT or SIGTERM: the bench stops between (and inside)
/// measurements and still removes what it made.
static INTERRUPTED: std::sync::OnceLock<Arc<std::sync::atomic::AtomicBool>> = std::sync::OnceLock::new();

fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| realtime::stopped(f))
}

/// Runs `f`, or notes why it could not and returns None.
fn attempt<T>(what: &str, skipped: &mut Vec<String>, f: impl FnOnce() -> Result<T>) -> Option<T> {
    if interrupted() {
        return None;
    }
    match f() {
        Ok(v) => Some(v),
        Err(e) => {
            let line = format!("{what}: FAILED: {e:#}");
            eprintln!("  {line}");
            skipped.push(line);
            None
        }
    }
}

pub fn run(args: VniBenchArgs) -> Result<()> {
    if let Some(segment) = &args.peer {
        return run_peer(segment, args.peer_poll);
    }
    let (secs, pings, runs) = if args.quick { (0.2, 200, 1) } else { (args.time, args.pings, args.runs) };
    ensure!(secs.is_finite() && secs > 0.0 && secs <= 600.0, "--time {secs}: give seconds above 0, at most 600");
    ensure!(runs >= 1 && pings >= 1, "--runs and --pings must be at least 1");
    if let Some(slots) = args.slots {
        ensure!(
            slots.is_power_of_two() && (4..=65536).contains(&slots),
            "--slots {slots}: a power of two from 4 to 65536"
        );
    }
    let slots = |mtu| args.slots.unwrap_or_else(|| default_slots(mtu));
    let _ = INTERRUPTED.set(realtime::stop_flag()?);
    let rtt_limit = Duration::from_secs_f64((secs * 2.0).max(1.0));
    let mut notes = Vec::new();
    let (iperf_skip, sockperf_skip) = if args.no_linux {
        (Some("--no-linux".to_string()), Some("--no-linux".to_string()))
    } else {
        (linux_missing("iperf3"), linux_missing("sockperf"))
    };
    let veth = if iperf_skip.is_none() || sockperf_skip.is_none() {
        match Veth::create() {
            Ok(v) => Some(v),
            Err(e) => {
                notes.push(format!("veth: FAILED: {e:#}"));
                None
            }
        }
    } else {
        None
    };
    for (what, skip) in [("iperf3 rows", &iperf_skip), ("sockperf rows", &sockperf_skip)] {
        if let Some(reason) = skip {
            let line = format!("SKIPPED: Linux veth {what}: {reason}");
            println!("*** {line} ***");
            eprintln!("*** {line} ***");
        }
    }
    let iperf_ok = iperf_skip.is_none() && veth.is_some();
    let sockperf_ok = sockperf_skip.is_none() && veth.is_some();

    println!(
        "nagare bench vni: {secs} s per throughput run, {pings} round trips per latency run, median of {runs} run(s); ring slots {} at MTU 1500, {} at 9000; load average {}",
        slots(1500),
        slots(9000),
        load_average()
    );
    println!("  nagare: two processes on a 2-port VNI segment (this one, 10.213.0.1, and a peer, 10.213.0.2)");
    println!("  Linux:  two network namespaces joined by veth (10.214.0.1, 10.214.0.2), iperf3 and sockperf");

    let mut udp = (Vec::new(), Vec::new());
    let mut udp_slot = (Vec::new(), Vec::new());
    let mut udp_gso = (Vec::new(), Vec::new());
    let mut udp_gso_ref = (Vec::new(), Vec::new());
    let mut tcp1500 = (Vec::new(), Vec::new());
    let mut tcp9000 = (Vec::new(), Vec::new());
    let waits =
        [(Wait::Polled, "polled"), (Wait::Sleep, "sleep + wake-up"), (Wait::SleepOneCpu, "sleep + wake-up, one CPU")];
    let mut rtts: Vec<(Vec<Rtt>, Vec<Rtt>)> = waits.iter().map(|_| (Vec::new(), Vec::new())).collect();
    let want = |t: Only| args.only.is_empty() || args.only.contains(&t);
    for run in 0..runs {
        let n = &mut notes;
        if want(Only::Udp) {
            udp.0.extend(attempt("nagare UDP", n, || nagare_udp(secs, slots(1500))));
            udp_slot.0.extend(attempt("nagare UDP built in the slot", n, || nagare_udp_in_slot(secs, slots(1500))));
            udp_gso
                .0
                .extend(attempt("nagare UDP segmentation offload", n, || nagare_udp_gso(secs, slots(1500), false)));
            udp_gso_ref.0.extend(attempt("nagare UDP segmentation offload, by reference", n, || {
                nagare_udp_gso(secs, slots(1500), true)
            }));
        }
        if let (true, true, Some(v)) = (want(Only::Udp), iperf_ok, &veth) {
            let _ = v.set_mtu(1500);
            udp.1.extend(attempt("Linux UDP", n, || iperf3(v, true, secs)));
        }
        if want(Only::Tcp1500) {
            tcp1500.0.extend(attempt("nagare TCP 1500", n, || nagare_tcp(1500, secs, slots(1500))));
        }
        if let (true, true, Some(v)) = (want(Only::Tcp1500), iperf_ok, &veth) {
            tcp1500.1.extend(attempt("Linux TCP 1500", n, || iperf3(v, false, secs)));
        }
        if want(Only::Tcp9000) {
            tcp9000.0.extend(attempt("nagare TCP 9000", n, || nagare_tcp(9000, secs, slots(9000))));
        }
        if let (true, true, Some(v)) = (want(Only::Tcp9000), iperf_ok, &veth) {
            let r = attempt("Linux TCP 9000", n, || {
                v.set_mtu(9000)?;
                iperf3(v, false, secs)
            });
            tcp9000.1.extend(r);
            let _ = v.set_mtu(1500);
        }
        for (k, &(wait, name)) in waits.iter().enumerate() {
            if !want(Only::Rtt) {
                break;
            }
            rtts[k].0.extend(
                attempt(&format!("nagare RTT {name}"), n, || nagare_rtt(wait, pings, rtt_limit, slots(1500))).flatten(),
            );
            if let (true, Some(v)) = (sockperf_ok, &veth) {
                rtts[k].1.extend(attempt(&format!("Linux RTT {name}"), n, || sockperf(v, wait, secs)).flatten());
            }
        }
        if interrupted() {
            notes.push("interrupted: the figures are from the measurements that finished".into());
            break;
        }
        eprintln!("  ... run {} of {runs} done", run + 1);
    }
    drop(veth);

    let cell = |r: Option<Rate>| r.map_or("–".to_string(), |r| format!("{:.2}", r.gbps()));
    let ratio = |a: Option<Rate>, b: Option<Rate>| match (a, b) {
        (Some(a), Some(b)) if b.gbps() > 0.0 => format!("**{:.2}**", a.gbps() / b.gbps()),
        _ => "–".to_string(),
    };
    let lost = |r: Option<Rate>, udp: bool| {
        r.map_or("–".to_string(), |r| if udp { format!("{}", r.lost()) } else { "–".into() })
    };
    // One veth figure serves both UDP rows (Linux has no such mode); the
    // iperf3 run sends no UDP super-frames, so the segmentation row has
    // no Linux figure.
    udp_slot.1 = udp.1.clone();

    let rows: Vec<_> = [
        (Only::Udp, "UDP 1472-byte datagrams, MTU 1500, copied into the slot", udp, true),
        (Only::Udp, "UDP 1472-byte datagrams, MTU 1500, frame built in the slot", udp_slot, true),
        (Only::Udp, "UDP 1472-byte datagrams, MTU 1500, segmentation offload (44 per send), copied", udp_gso, true),
        (
            Only::Udp,
            "UDP 1472-byte datagrams, MTU 1500, segmentation offload (44 per send), by reference",
            udp_gso_ref,
            true,
        ),
        (Only::Tcp1500, "TCP single stream, MTU 1500", tcp1500, false),
        (Only::Tcp9000, "TCP single stream, MTU 9000", tcp9000, false),
    ]
    .into_iter()
    .filter(|row| want(row.0))
    .collect();
    if !rows.is_empty() {
        println!();
        println!(
            "Throughput (Gbit/s of UDP or TCP payload at the receiver; lost: UDP datagrams sent and not received):\n"
        );
        println!("| test | nagare VNI | Linux veth | nagare / Linux | nagare lost | Linux lost |");
        println!("|---|---:|---:|---:|---:|---:|");
    }
    for (_, name, pair, is_udp) in rows {
        let (a, b) = (median_rate(pair.0), median_rate(pair.1));
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            cell(a),
            cell(b),
            ratio(a, b),
            lost(a, is_udp),
            lost(b, is_udp)
        );
    }

    if want(Only::Rtt) {
        print_rtts(&waits, rtts);
    }
    println!();
    println!(
        "Segment memory ({} slots per ring at MTU 1500, {} at 9000; `vni::segment_size`):\n",
        slots(1500),
        slots(9000)
    );
    println!("| ports | rings | MTU 1500 | MTU 9000 |");
    println!("|---:|---:|---:|---:|");
    for n in [2usize, 4, 8, 16] {
        let size = |mtu| segment_size(n, mtu, slots(mtu)).map_or("–".to_string(), format_size);
        println!("| {n} | {} | {} | {} |", n * (n - 1), size(1500), size(9000));
    }
    if !notes.is_empty() {
        println!();
        for note in &notes {
            println!("note: {note}");
        }
    }
    println!("\nload average after: {}", load_average());
    Ok(())
}

fn print_rtts(waits: &[(Wait, &str)], rtts: Vec<(Vec<Rtt>, Vec<Rtt>)>) {
    println!();
    println!("64-byte UDP round trip (µs; nagare: every round trip timed; Linux: sockperf's summary):\n");
    println!("| mode | path | min | p50 | avg | p99 | max | lost |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (&(_, mode), (ours, linux)) in waits.iter().zip(rtts) {
        for (path, r) in [("nagare VNI", median_rtt(ours)), ("Linux veth", median_rtt(linux))] {
            match r {
                Some(r) => println!(
                    "| {mode} | {path} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
                    r.min, r.p50, r.avg, r.p99, r.max, r.lost
                ),
                None => println!("| {mode} | {path} | – | – | – | – | – | – |"),
            }
        }
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_sum_received_is_found_under_end() {
        let report: serde_json::Value = serde_json::from_str(
            r#"{"start":{"sum_received":"not an object"},"intervals":[{"sum":{"bytes":1}}],
               "end":{"streams":[],"sum_sent":{"bytes":9},"sum_received":{"bytes":7,"bits_per_second":56.0}}}"#,
        )
        .unwrap();
        let received = find_object(&report, "sum_received").unwrap();
        assert_eq!(received["bytes"], 7);
        assert_eq!(find_object(&report, "nothing"), None);
    }
}
