//! TCP bulk throughput between a user-space stack and the Linux kernel over
//! a TAP device, both directions: nagare (with and without TAP offloads)
//! beside smoltcp 0.14 driven the same way, in one run.
//! `cargo bench -p nagare-bench --bench tcp_tap` (needs root).
//!
//! The program makes a network namespace of its own (`nagare-bench-<pid>`),
//! moves its only thread into it with `setns(2)` before anything else runs,
//! and deletes it when it ends (also on error, by a guard). In it, three
//! TAP devices:
//!
//! - `nb-off`: nagare with `IFF_VNET_HDR`, checksum and TCP segmentation
//!   offload (64 KiB super-segments each way); kernel side 10.77.0.1/24,
//!   nagare 10.77.0.2;
//! - `nb-plain`: nagare with plain 1514-byte frames; 10.77.1.1 / 10.77.1.2;
//! - `nb-smol`: smoltcp's own `TunTapInterface` (plain frames, the only kind
//!   it knows); 10.78.0.1 / 10.78.0.2.
//!
//! The Linux side of every transfer is a child process (this program again,
//! with `--tap-peer`): a `std::net` listener that either reads everything
//! until end of stream (sink) or writes (source). The user-space stack
//! connects to it, and runs in this process's one thread as a busy-poll
//! loop (read a batch of frames, run the stack, write what it queued; never
//! sleep). The sender, whichever side it is, sends until at least
//! `NAGARE_BENCH_BYTES` (default 1 GiB) are out *and* `NAGARE_BENCH_SECS`
//! (default 3) seconds have passed, then closes. Throughput is measured on
//! the user-space stack's side, from the first byte to the last: sending,
//! from the first byte the stack accepts to the peer's FIN (sent once it
//! has read the last byte); receiving, from the first byte received to the
//! last.
//!
//! Environment: `NAGARE_BENCH_BYTES`, `NAGARE_BENCH_SECS`,
//! `NAGARE_BENCH_RUNS` (default 3; the median is shown),
//! `NAGARE_BENCH_BUFFER` (socket buffers of both user-space stacks,
//! default 4 MiB).

use nagare_bench::report::{env_or, gbps, load_average, median_by};
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::iface::Error as NagareError;
use nagare_core::tcp::connection::State as NagareState;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Interface, InterfaceConfig};
use nagare_dev::{Device, MonotonicClock, TapDevice};
use nagare_host::Host;
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use smoltcp::iface::{Config as SmolConfig, Interface as SmolInterface, SocketHandle, SocketSet};
use smoltcp::phy::{Medium, TunTapInterface};
use smoltcp::socket::tcp as smol_tcp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{EthernetAddress as SmolMac, IpAddress, IpCidr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest any one transfer may take, set-up and close included.
const TRANSFER_LIMIT: Duration = Duration::from_secs(90);
/// No sender ever sends more than this, whatever the time rule says.
const MAX_BYTES: u64 = 64 << 30;
/// Bytes handed to the stack per send call (nagare: one shared chain).
const WRITE_SIZE: usize = 64 * 1024;
/// nagare's packet buffers: 2 KiB each, 16384 of them (32 MiB).
const POOL_BUFFER_SIZE: usize = 2048;
const POOL_BUFFERS: usize = 16384;

type Res<T> = Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--tap-peer") {
        std::process::exit(match peer_main(&args[2..]) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("tcp_tap peer: {e}");
                1
            }
        });
    }
    // `cargo bench` passes `--bench`; a filter or `--list` is ignored.
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs benches without `--bench`.
        println!("tcp_tap: measured only under `cargo bench`");
        return;
    }
    if let Err(reason) = preflight() {
        println!("\n==============================================================");
        println!("SKIPPED: tcp_tap: {reason}");
        println!("==============================================================\n");
        return;
    }
    let name = format!("nagare-bench-{}", std::process::id());
    let code = match Netns::enter(&name) {
        Err(reason) => {
            println!("\n==============================================================");
            println!("SKIPPED: tcp_tap: {reason}");
            println!("==============================================================\n");
            0
        }
        Ok(netns) => {
            let result = run();
            drop(netns);
            match result {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("tcp_tap: {e}");
                    1
                }
            }
        }
    };
    std::process::exit(code);
}

/// Why the benchmark cannot run here, if it cannot.
fn preflight() -> Res<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (network namespaces and TAP devices); try `sudo -E cargo bench -p nagare-bench --bench tcp_tap`".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err("/dev/net/tun does not exist (no TUN/TAP support)".into());
    }
    match Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => Ok(()),
        _ => Err("the `ip` command (iproute2) is missing".into()),
    }
}

/// Runs `ip ARGS` (in the current network namespace), failing on a
/// non-zero exit.
fn ip(args: &[&str]) -> Res<()> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

/// A network namespace this program made and entered; deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` and moves the calling thread (the only one)
    /// into it.
    fn enter(name: &str) -> Res<Netns> {
        ip(&["netns", "add", name])?;
        // From here on the guard deletes the namespace, whatever happens.
        let ns = Netns { name: name.to_owned() };
        let path = format!("/var/run/netns/{name}");
        let file = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: plain system call on an open namespace file; the process
        // has one thread, so every later thread and child starts inside.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", io::Error::last_os_error()));
        }
        ip(&["link", "set", "lo", "up"])?;
        // No IPv6 chatter (router solicitations) into idle TAPs.
        for key in ["all", "default"] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6"), "1");
        }
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        match Command::new("ip").args(["netns", "del", &self.name]).status() {
            Ok(s) if s.success() => {}
            _ => eprintln!("tcp_tap: could not delete network namespace {} (`ip netns del {}`)", self.name, self.name),
        }
    }
}

// ---- the Linux peer (a child process) ---------------------------------------

/// What the sender must send: at least `min_bytes` and for at least
/// `min_time`, never more than `MAX_BYTES`.
#[derive(Clone, Copy)]
struct Amount {
    min_bytes: u64,
    min_time: Duration,
}

impl Amount {
    fn more(&self, sent: u64, since: Option<Instant>) -> bool {
        sent < MAX_BYTES && (sent < self.min_bytes || since.is_none_or(|t| t.elapsed() < self.min_time))
    }
}

/// `--tap-peer sink|source MIN_BYTES MIN_SECS`: listens on 0.0.0.0 (an
/// ephemeral port, printed as `READY <port>`), takes one connection, reads
/// it to the end (sink) or writes (source), and prints `DONE <bytes>
/// <seconds>` from its first byte to its last.
fn peer_main(args: &[String]) -> Res<()> {
    let [mode, min_bytes, min_secs] = args else {
        return Err("usage: --tap-peer sink|source MIN_BYTES MIN_SECS".into());
    };
    let amount = Amount {
        min_bytes: min_bytes.parse().map_err(|_| "bad MIN_BYTES")?,
        min_time: Duration::from_secs_f64(min_secs.parse().map_err(|_| "bad MIN_SECS")?),
    };
    let deadline = Instant::now() + TRANSFER_LIMIT;
    let listener = TcpListener::bind("0.0.0.0:0").map_err(|e| format!("bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    println!("READY {port}");
    io::stdout().flush().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err("no connection".into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut buf = vec![0x5au8; 1 << 20];
    let mut total = 0u64;
    let (mut first, mut last) = (None, Instant::now());
    match mode.as_str() {
        "sink" => loop {
            if Instant::now() > deadline {
                return Err(format!("sink: {total} bytes, then out of time"));
            }
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    last = Instant::now();
                    first.get_or_insert(last);
                    total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("sink read after {total} bytes: {e}")),
            }
        },
        "source" => {
            while amount.more(total, first) {
                if Instant::now() > deadline {
                    return Err(format!("source: {total} bytes, then out of time"));
                }
                stream.write_all(&buf).map_err(|e| format!("source write after {total} bytes: {e}"))?;
                first.get_or_insert_with(Instant::now);
                total += buf.len() as u64;
            }
            last = Instant::now();
            stream.shutdown(Shutdown::Write).map_err(|e| e.to_string())?;
            // Wait for the stack's FIN, so the close is orderly.
            while Instant::now() < deadline {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        _ => return Err(format!("unknown mode {mode:?}")),
    }
    drop(stream);
    let secs = first.map_or(0.0, |f| last.saturating_duration_since(f).as_secs_f64());
    println!("DONE {total} {secs:.6}");
    Ok(())
}

/// A peer process; killed by its pid if it is still running when dropped.
struct Peer {
    child: Child,
    port: u16,
    output: String,
}

impl Peer {
    fn start(sink: bool, amount: Amount) -> Res<Peer> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let child = Command::new(exe)
            .args([
                "--tap-peer",
                if sink { "sink" } else { "source" },
                &amount.min_bytes.to_string(),
                &amount.min_time.as_secs_f64().to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the peer: {e}"))?;
        let mut peer = Peer { child, port: 0, output: String::new() };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !peer.output.contains('\n') {
            if Instant::now() > deadline || !peer.read_some(deadline)? {
                return Err(format!("the peer did not start (said {:?})", peer.output));
            }
        }
        let line = peer.output.lines().next().unwrap_or("");
        peer.port = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| format!("the peer said {line:?}"))?;
        Ok(peer)
    }

    /// Reads what the peer printed, waiting at most until `deadline`;
    /// false at end of output.
    fn read_some(&mut self, deadline: Instant) -> Res<bool> {
        let Some(stdout) = self.child.stdout.as_mut() else { return Ok(false) };
        let millis = deadline.saturating_duration_since(Instant::now()).as_millis().min(1000) as i32;
        let mut pfd = libc::pollfd { fd: stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd on the stack for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, millis) };
        if rc <= 0 {
            return Ok(rc == 0 || io::Error::last_os_error().kind() == io::ErrorKind::Interrupted);
        }
        let mut buf = [0u8; 256];
        let n = stdout.read(&mut buf).map_err(|e| format!("reading the peer: {e}"))?;
        self.output.push_str(&String::from_utf8_lossy(&buf[..n]));
        Ok(n > 0)
    }

    /// Waits for the peer to finish; its own count of bytes and
    /// first-to-last-byte time.
    fn finish(mut self) -> Res<(u64, f64)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && self.read_some(deadline)? {}
        let status = loop {
            match self.child.try_wait().map_err(|e| e.to_string())? {
                Some(status) => break status,
                None if Instant::now() > deadline => return Err("the peer did not exit".into()),
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        let done = self.output.lines().find_map(|l| l.strip_prefix("DONE ")).map(str::to_owned);
        let parsed = done.as_deref().and_then(|d| {
            let mut it = d.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        });
        match parsed {
            Some(p) if status.success() => Ok(p),
            _ => Err(format!("the peer failed ({status}): {:?}", self.output)),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Child::kill sends SIGKILL to this child's pid.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---- one transfer -------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    /// The user-space stack sends, Linux reads.
    ToLinux,
    /// Linux sends, the user-space stack reads.
    FromLinux,
}

#[derive(Clone, Copy, Debug)]
struct Transfer {
    bytes: u64,
    elapsed: Duration,
    /// The Linux peer's own view (its first to last byte).
    peer_gbps: f64,
    /// TCP segments the kernel received and sent during the transfer (in
    /// the namespace; after GRO, before GSO), and retransmitted.
    linux: TcpSegs,
}

/// The namespace's TCP counters from `/proc/net/snmp`.
#[derive(Clone, Copy, Debug, Default)]
struct TcpSegs {
    in_segs: u64,
    out_segs: u64,
    retrans: u64,
}

impl TcpSegs {
    fn read() -> TcpSegs {
        let text = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default();
        let mut lines = text.lines().filter(|l| l.starts_with("Tcp:"));
        let (Some(names), Some(values)) = (lines.next(), lines.next()) else { return TcpSegs::default() };
        let get = |key: &str| {
            names
                .split_whitespace()
                .zip(values.split_whitespace())
                .find(|(n, _)| *n == key)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0)
        };
        TcpSegs { in_segs: get("InSegs"), out_segs: get("OutSegs"), retrans: get("RetransSegs") }
    }

    fn since(self, before: TcpSegs) -> TcpSegs {
        TcpSegs {
            in_segs: self.in_segs.saturating_sub(before.in_segs),
            out_segs: self.out_segs.saturating_sub(before.out_segs),
            retrans: self.retrans.saturating_sub(before.retrans),
        }
    }
}

impl Transfer {
    fn gbps(&self) -> f64 {
        gbps(self.bytes, self.elapsed)
    }
}

/// A user-space stack on a TAP.
trait Stack {
    fn label(&self) -> &'static str;
    /// Connects to the peer at `port`, moves the bytes, closes; returns
    /// the stack's count and first-to-last-byte time.
    fn transfer(&mut self, port: u16, dir: Direction, amount: Amount, deadline: Instant) -> Res<(u64, Duration)>;
}

fn measure(stack: &mut dyn Stack, dir: Direction, amount: Amount) -> Res<Transfer> {
    let peer = Peer::start(dir == Direction::ToLinux, amount)?;
    let deadline = Instant::now() + TRANSFER_LIMIT;
    let before = TcpSegs::read();
    let (bytes, elapsed) =
        stack.transfer(peer.port, dir, amount, deadline).map_err(|e| format!("{} {dir:?}: {e}", stack.label()))?;
    let (peer_bytes, peer_secs) = peer.finish().map_err(|e| format!("{} {dir:?}: {e}", stack.label()))?;
    if peer_bytes != bytes {
        return Err(format!("{} {dir:?}: the stack counted {bytes} bytes, Linux {peer_bytes}", stack.label()));
    }
    let linux = TcpSegs::read().since(before);
    Ok(Transfer { bytes, elapsed, peer_gbps: gbps(peer_bytes, Duration::from_secs_f64(peer_secs.max(1e-9))), linux })
}

// ---- nagare -------------------------------------------------------------------

struct NagareStack {
    label: &'static str,
    host: Host<TapDevice>,
    clock: MonotonicClock,
    kernel_ip: Ipv4Addr,
    /// 64 KiB in pool buffers, handed to `Tcp::send_buf` again and again
    /// (its buffers are shared, never copied).
    chain: PacketBuf,
    /// With `NAGARE_BENCH_SEND=copy`: 64 MiB of application data sent
    /// round and round with `Tcp::send` (one copy, data not in cache).
    copy_source: Option<Vec<u8>>,
}

impl NagareStack {
    fn open(label: &'static str, tap_name: &str, offload: bool, net: [u8; 3], buffer: usize) -> Res<NagareStack> {
        let tap = TapDevice::open_with(tap_name, offload).map_err(|e| format!("TAP {tap_name}: {e}"))?;
        let kernel_ip = Ipv4Addr::new(net[0], net[1], net[2], 1);
        let ours = Ipv4Addr::new(net[0], net[1], net[2], 2);
        ip(&["addr", "add", &format!("{kernel_ip}/24"), "dev", tap_name])?;
        ip(&["link", "set", "dev", tap_name, "up"])?;
        let clock = MonotonicClock::new();
        let mac = EthernetAddress([0x02, 0x6e, net[0], net[1], net[2], 2]);
        let mut config = InterfaceConfig::new(mac, Ipv4Cidr::new(ours, 24).map_err(|e| format!("{e:?}"))?);
        nagare_host::secrets::randomize(&mut config).map_err(|e| e.to_string())?;
        let mut iface = Interface::new(config, tap.capabilities(), BufferPool::new(POOL_BUFFER_SIZE, POOL_BUFFERS));
        let defaults = iface.tcp().defaults_mut();
        // The size under test, fixed (as after SO_SNDBUF and SO_RCVBUF).
        defaults.set_send_buffer(buffer);
        defaults.set_recv_buffer(buffer);
        let chain = PacketBuf::from_slice(iface.pool(), 0, &vec![0x5au8; WRITE_SIZE]).map_err(|_| "pool exhausted")?;
        let copy_source = (std::env::var("NAGARE_BENCH_SEND").as_deref() == Ok("copy"))
            .then(|| (0..64usize << 20).map(|i| (i * 7 + i / 4093) as u8).collect());
        let host = Host::new(iface, tap);
        Ok(NagareStack { label, host, clock, kernel_ip, chain, copy_source })
    }

    /// One turn of the busy-poll loop: the host step (read a batch, run
    /// the engine and its timers, write what it queued).
    fn step(&mut self) -> Res<()> {
        let report = self.host.step(self.clock.now());
        match self.host.take_device_error() {
            Some(e) if report.device_error => Err(format!("TAP: {e}")),
            _ => Ok(()),
        }
    }

    /// Steps for `time` more, so closes and final ACKs go out.
    fn linger(&mut self, time: Duration) -> Res<()> {
        let until = Instant::now() + time;
        while Instant::now() < until {
            self.step()?;
        }
        Ok(())
    }

    fn connect(&mut self, port: u16, deadline: Instant) -> Res<TcpHandle> {
        let h = self
            .host
            .iface
            .tcp()
            .connect(SocketAddrV4::new(self.kernel_ip, port), 0, self.clock.now())
            .map_err(|e| format!("tcp_connect: {e}"))?;
        loop {
            self.step()?;
            match self.host.iface.tcp_ref().state(h) {
                Ok(NagareState::Established) => return Ok(h),
                Ok(NagareState::SynSent | NagareState::SynReceived) => {}
                other => return Err(format!("connecting: {other:?}")),
            }
            if Instant::now() > deadline {
                return Err("connecting: out of time".into());
            }
        }
    }
}

impl Stack for NagareStack {
    fn label(&self) -> &'static str {
        self.label
    }

    fn transfer(&mut self, port: u16, dir: Direction, amount: Amount, deadline: Instant) -> Res<(u64, Duration)> {
        let h = self.connect(port, deadline)?;
        let (mut bytes, mut first, mut last) = (0u64, None::<Instant>, Instant::now());
        let mut pending = PacketBuf::new();
        let mut shut = false;
        let mut turns = 0u64;
        loop {
            turns += 1;
            if turns.is_multiple_of(1024) && Instant::now() > deadline {
                return Err(format!("{bytes} bytes, then out of time"));
            }
            let now = self.clock.now();
            if dir == Direction::ToLinux && self.copy_source.is_some() {
                while !shut {
                    if !amount.more(bytes, first) {
                        self.host.iface.tcp().shutdown(h, now).map_err(|e| format!("tcp_shutdown: {e}"))?;
                        shut = true;
                        break;
                    }
                    let source = self.copy_source.as_deref().unwrap_or_default();
                    let at = (bytes % source.len() as u64) as usize;
                    let end = (at + WRITE_SIZE).min(source.len());
                    match self.host.iface.tcp().send(h, &source[at..end], now) {
                        Ok(0) | Err(NagareError::WouldBlock) => break,
                        Ok(n) => {
                            first.get_or_insert_with(Instant::now);
                            bytes += n as u64;
                        }
                        Err(e) => return Err(format!("tcp_send: {e}")),
                    }
                }
            } else if dir == Direction::ToLinux {
                while !shut {
                    if pending.is_empty() {
                        if !amount.more(bytes, first) {
                            self.host.iface.tcp().shutdown(h, now).map_err(|e| format!("tcp_shutdown: {e}"))?;
                            shut = true;
                            break;
                        }
                        pending = self.chain.clone();
                    }
                    let before = pending.len();
                    pending =
                        self.host.iface.tcp().send_buf(h, pending, now).map_err(|e| format!("tcp_send_buf: {e}"))?;
                    let took = (before - pending.len()) as u64;
                    if took > 0 {
                        first.get_or_insert_with(Instant::now);
                        bytes += took;
                    }
                    if !pending.is_empty() {
                        break;
                    }
                }
            }
            self.step()?;
            let now = self.clock.now();
            loop {
                match self.host.iface.tcp().recv_buf(h, usize::MAX, now) {
                    Ok(Some(data)) => {
                        if dir == Direction::FromLinux {
                            last = Instant::now();
                            first.get_or_insert(last);
                            bytes += data.len() as u64;
                        }
                    }
                    Ok(None) => {
                        if dir == Direction::ToLinux {
                            // The sink read the last byte and closed.
                            last = Instant::now();
                        }
                        self.host.iface.tcp().close(h, now).map_err(|e| format!("tcp_close: {e}"))?;
                        self.linger(Duration::from_millis(20))?;
                        let first = first.ok_or("no byte moved")?;
                        return Ok((bytes, last.saturating_duration_since(first)));
                    }
                    Err(NagareError::WouldBlock) => break,
                    Err(e) => return Err(format!("tcp_recv_buf after {bytes} bytes: {e}")),
                }
            }
        }
    }
}

// ---- smoltcp ------------------------------------------------------------------

struct SmolStack {
    device: TunTapInterface,
    iface: SmolInterface,
    sockets: SocketSet<'static>,
    kernel_ip: Ipv4Addr,
    buffer: usize,
    next_port: u16,
}

impl SmolStack {
    fn open(tap_name: &str, net: [u8; 3], buffer: usize) -> Res<SmolStack> {
        let mut device =
            TunTapInterface::new(tap_name, Medium::Ethernet).map_err(|e| format!("TAP {tap_name}: {e}"))?;
        let kernel_ip = Ipv4Addr::new(net[0], net[1], net[2], 1);
        ip(&["addr", "add", &format!("{kernel_ip}/24"), "dev", tap_name])?;
        ip(&["link", "set", "dev", tap_name, "up"])?;
        let mut config = SmolConfig::new(SmolMac([0x02, 0x5c, net[0], net[1], net[2], 2]).into());
        config.random_seed = u64::from(std::process::id());
        let mut iface = SmolInterface::new(config, &mut device, SmolInstant::now());
        iface.update_ip_addrs(|addrs| {
            let _ = addrs.push(IpCidr::new(IpAddress::v4(net[0], net[1], net[2], 2), 24));
        });
        Ok(SmolStack { device, iface, sockets: SocketSet::new(vec![]), kernel_ip, buffer, next_port: 49152 })
    }

    fn poll(&mut self) {
        self.iface.poll(SmolInstant::now(), &mut self.device, &mut self.sockets);
    }

    fn socket(&mut self, h: SocketHandle) -> &mut smol_tcp::Socket<'static> {
        self.sockets.get_mut::<smol_tcp::Socket>(h)
    }

    fn run(
        &mut self,
        h: SocketHandle,
        port: u16,
        dir: Direction,
        amount: Amount,
        deadline: Instant,
    ) -> Res<(u64, Duration)> {
        let [a, b, c, d] = self.kernel_ip.octets();
        let local = self.next_port;
        self.next_port = if local == u16::MAX { 49152 } else { local + 1 };
        let cx = self.iface.context();
        self.sockets
            .get_mut::<smol_tcp::Socket>(h)
            .connect(cx, (IpAddress::v4(a, b, c, d), port), local)
            .map_err(|e| format!("connect: {e}"))?;
        loop {
            self.poll();
            match self.socket(h).state() {
                smol_tcp::State::Established => break,
                smol_tcp::State::SynSent | smol_tcp::State::SynReceived => {}
                other => return Err(format!("connecting: {other}")),
            }
            if Instant::now() > deadline {
                return Err("connecting: out of time".into());
            }
        }
        let (mut bytes, mut first, mut last) = (0u64, None::<Instant>, Instant::now());
        let mut closed = false;
        let mut turns = 0u64;
        loop {
            turns += 1;
            if turns.is_multiple_of(1024) && Instant::now() > deadline {
                return Err(format!("{bytes} bytes, then out of time"));
            }
            self.poll();
            let socket = self.socket(h);
            if dir == Direction::ToLinux && !closed {
                // As smoltcp's examples/benchmark.rs: claim free buffer space
                // without writing it (the application's copy is left out, as
                // nagare's tcp_send_buf leaves it out).
                while socket.can_send() {
                    if !amount.more(bytes, first) {
                        socket.close();
                        closed = true;
                        break;
                    }
                    let n = socket.send(|buf| (buf.len(), buf.len())).map_err(|e| format!("send: {e}"))?;
                    if n > 0 {
                        first.get_or_insert_with(Instant::now);
                        bytes += n as u64;
                    }
                }
            }
            loop {
                match socket.recv(|buf| (buf.len(), buf.len())) {
                    Ok(0) => break,
                    Ok(n) => {
                        if dir == Direction::FromLinux {
                            last = Instant::now();
                            first.get_or_insert(last);
                            bytes += n as u64;
                        }
                    }
                    Err(smol_tcp::RecvError::Finished) => {
                        if dir == Direction::ToLinux {
                            last = Instant::now();
                        }
                        socket.close();
                        let first = first.ok_or("no byte moved")?;
                        return Ok((bytes, last.saturating_duration_since(first)));
                    }
                    Err(e) => return Err(format!("recv after {bytes} bytes ({}): {e}", socket.state())),
                }
            }
        }
    }
}

impl Stack for SmolStack {
    fn label(&self) -> &'static str {
        "smoltcp"
    }

    fn transfer(&mut self, port: u16, dir: Direction, amount: Amount, deadline: Instant) -> Res<(u64, Duration)> {
        let socket = smol_tcp::Socket::new(
            smol_tcp::SocketBuffer::new(vec![0; self.buffer]),
            smol_tcp::SocketBuffer::new(vec![0x5a; self.buffer]),
        );
        let h = self.sockets.add(socket);
        let result = self.run(h, port, dir, amount, deadline);
        // Let the FIN and the last ACKs go out, then forget the socket.
        let until = Instant::now() + Duration::from_millis(20);
        while Instant::now() < until {
            self.poll();
        }
        self.sockets.remove(h);
        result
    }
}

// ---- the run ----------------------------------------------------------------------

fn run() -> Res<()> {
    let min_bytes: u64 = env_or("NAGARE_BENCH_BYTES", 1u64 << 30);
    let min_secs: f64 = env_or("NAGARE_BENCH_SECS", 3.0f64);
    let runs: usize = env_or("NAGARE_BENCH_RUNS", 3usize).max(1);
    let buffer: usize = env_or("NAGARE_BENCH_BUFFER", 4usize << 20);
    let amount = Amount { min_bytes, min_time: Duration::from_secs_f64(min_secs.max(0.0)) };

    let mut offload = NagareStack::open("nagare (offload)", "nb-off", true, [10, 77, 0], buffer)?;
    let plain = NagareStack::open("nagare (plain frames)", "nb-plain", false, [10, 77, 1], buffer)?;
    let smol = SmolStack::open("nb-smol", [10, 78, 0], buffer)?;
    let granted = offload.host.device.offloads();
    if granted.tcp_segmentation == 0 {
        offload.label = "nagare (offload REFUSED: plain frames)";
    }
    println!(
        "tcp_tap: TCP bulk throughput over TAP against the Linux kernel, in network namespace nagare-bench-{}; load average {} before",
        std::process::id(),
        load_average()
    );
    println!(
        "  each transfer: at least {} MiB and {:.1} s, socket buffers {} KiB (user-space stacks), median of {runs} runs (interleaved);",
        min_bytes >> 20,
        min_secs,
        buffer >> 10
    );
    println!("  Linux peer: a std::net process in the namespace reading or writing 1 MiB per call; stacks connect to it and busy-poll;");
    println!(
        "  nagare (offload): IFF_VNET_HDR, checksum {} / TSO up to {} B, IP MTU {}; nagare (plain): MTU {}; smoltcp: TunTapInterface, MTU 1500;",
        granted.checksum,
        granted.tcp_segmentation,
        offload.host.device.capabilities().mtu,
        plain.host.device.capabilities().mtu
    );
    if std::env::var("NAGARE_BENCH_SEND").as_deref() == Ok("copy") {
        println!("  nagare sends with tcp_send from 64 MiB of application data (one copy; NAGARE_BENCH_SEND=copy) and takes tcp_recv_buf;");
    } else {
        println!("  nagare sends one 64 KiB chain of pool buffers again and again with tcp_send_buf (no copy) and takes tcp_recv_buf;");
    }
    println!("  smoltcp claims and releases buffer space with send/recv closures, without copying (as its examples/benchmark.rs).\n");

    let mut stacks: Vec<Box<dyn Stack>> = vec![Box::new(offload), Box::new(plain), Box::new(smol)];
    let warm = Amount { min_bytes: (min_bytes / 16).max(1 << 20), min_time: Duration::ZERO };
    for stack in stacks.iter_mut() {
        for dir in [Direction::ToLinux, Direction::FromLinux] {
            measure(stack.as_mut(), dir, warm)?;
        }
    }
    // results[stack][direction] = the runs.
    let mut results: Vec<[Vec<Transfer>; 2]> = stacks.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for run in 0..runs {
        for (i, stack) in stacks.iter_mut().enumerate() {
            for (d, dir) in [Direction::ToLinux, Direction::FromLinux].into_iter().enumerate() {
                let t = measure(stack.as_mut(), dir, amount)?;
                let mib = (t.bytes >> 20).max(1) as f64;
                println!(
                    "  run {}: {:<22} {:<8} {:>6} MiB in {:.3} s: {:>6.2} Gbit/s (Linux's clock {:>6.2}); Linux TCP segs/MiB in {:>6.1} out {:>6.1}, retrans {}; load {}",
                    run + 1,
                    stack.label(),
                    if dir == Direction::ToLinux { "-> Linux" } else { "<- Linux" },
                    t.bytes >> 20,
                    t.elapsed.as_secs_f64(),
                    t.gbps(),
                    t.peer_gbps,
                    t.linux.in_segs as f64 / mib,
                    t.linux.out_segs as f64 / mib,
                    t.linux.retrans,
                    load_average()
                );
                results[i][d].push(t);
            }
        }
    }
    let medians: Vec<[Transfer; 2]> =
        results.iter().map(|r| [median_by(&r[0], Transfer::gbps), median_by(&r[1], Transfer::gbps)]).collect();
    let smol = medians.last().copied().ok_or("no stacks")?;
    println!(
        "\nMedian of {runs} (Gbit/s of TCP payload, measured on the user-space stack's side); load average {} after:\n",
        load_average()
    );
    println!("| stack | stack -> Linux Gbit/s | Linux -> stack Gbit/s | -> Linux / smoltcp | <- Linux / smoltcp |");
    println!("|---|---:|---:|---:|---:|");
    for (stack, m) in stacks.iter().zip(&medians) {
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            stack.label(),
            m[0].gbps(),
            m[1].gbps(),
            m[0].gbps() / smol[0].gbps().max(1e-9),
            m[1].gbps() / smol[1].gbps().max(1e-9)
        );
    }
    println!();
    Ok(())
}
