//! A hostile client against an inet server running in this process: the
//! input bytes are read as a script of requests with hostile arguments
//! (real operations on sockets, buffers and addresses it does not own,
//! pieces past their buffers, unknown flags), raw descriptors, writes
//! anywhere in the client's own region (rings, buffers netd holds) and
//! broken ring indices. Then the client goes, and the checks run:
//!
//! - netd's thread did not panic and its loop returned no error;
//! - a client that threw its request ring's head out of range was
//!   disconnected by netd;
//! - netd let the client go and serves a well-behaved client afterwards (a
//!   UDP datagram from one of its sockets to another arrives intact);
//! - every port the script could have bound or listened on is free again;
//! - no buffer was lost: netd counts none leaked, and the engine's pool
//!   holds no more buffers than before the hostile client came.
//!
//! Shared by `tests/hostile_requests.rs` (property test, run by the suite)
//! and the fuzz target `netd_requests` (`fuzz/`), which includes this file
//! by path.

use nagare_core::buf::BufferPool;
use nagare_core::{Capabilities, Interface, InterfaceConfig};
use nagare_dev::{Device, Loopback, MonotonicClock};
use nagare_ipc::rendezvous::Client;
use nagare_ipc::{Consumer, Descriptor, Notifier, Pool, Producer, NO_BUFFER};
use nagare_netd::driver::{serve, DriverHandle, DriverLink};
use nagare_netd::{NetdConfig, NetdStats, Placement};
use nagare_request::{
    encode_addr, Op, Piece, PollEntry, Request, COMPLETE_ON_ACCEPT, COPY_SHORT, LEND, NONBLOCK, TRACE, TRACE_TIME,
    WAIT_LIMIT,
};
use nagare_wire::EthernetAddress;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// netd's address; the hostile client aims at it, at a neighbour and at
/// raw words.
const NETD_ADDR: Ipv4Addr = Ipv4Addr::new(10, 66, 0, 1);
const NEIGHBOUR: Ipv4Addr = Ipv4Addr::new(10, 66, 0, 2);
const NETD_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd66, 0, 0, 0, 0, 0, 0, 1);
const NEIGHBOUR6: Ipv6Addr = Ipv6Addr::new(0xfd66, 0, 0, 0, 0, 0, 0, 2);
/// The ports the script binds, listens on and sends to (0: any).
const PORTS: [u16; 4] = [0, 7, 9000, 9001];
/// The longest a patient client's drain waits for netd, and the silence
/// after which it takes netd to have answered all it will answer now.
const CATCH_UP: Duration = Duration::from_secs(1);
const QUIET: Duration = Duration::from_millis(20);
/// Small regions keep a case fast and make pools and rings run full.
const RING_SLOTS: u32 = 32;
const BUFFERS: u32 = 32;
const BUFFER_SIZE: u32 = 2048;
/// Most script steps one input runs.
const MAX_STEPS: usize = 256;
/// How long netd gets to notice the client has gone, and to answer the
/// well-behaved one.
const SETTLE: Duration = Duration::from_secs(5);

/// What netd's thread reports after its loop has stopped.
struct Final {
    stats: NetdStats,
    engine_in_use: usize,
    clients: usize,
}

/// Reads the script: bytes run out as zeros, so every input is a script.
struct Script<'a> {
    bytes: &'a [u8],
}

impl Script<'_> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.bytes.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.bytes = rest;
        first
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// True for one byte value in `n`.
    fn one_in(&mut self, n: u8) -> bool {
        self.byte().is_multiple_of(n)
    }

    fn done(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// The hostile client's ends of its region.
struct Hostile {
    client: Client,
    requests: Producer,
    completions: Consumer,
    direct: Option<Consumer>,
    pool: Pool,
    notifier: Notifier,
    /// Socket ids netd has handed out, to be used (and misused) again.
    sockets: Vec<u32>,
    /// Tokens its shares were given.
    tokens: Vec<u64>,
    /// Buffers recently named in requests, to be named again.
    named: Vec<u32>,
    next_id: u64,
    /// The script threw the request ring's head out of range: netd must
    /// disconnect the client, and the script ends there.
    broke_requests: bool,
    /// Whether a drain, and a step that breaks the request ring, first
    /// wait for netd to take what is on the ring.
    patient: bool,
    /// netd's watch socket, and the watched descriptors the script holds
    /// (each sent a token: what a process between `fork` and `exec` holds).
    watch_path: PathBuf,
    watches: Vec<std::os::unix::net::UnixStream>,
}

impl Hostile {
    fn connect(socket: &Path, patient: bool) -> Hostile {
        let client = Client::connect(socket).expect("the hostile client connects");
        let requests = client.region.producer(0).expect("request ring");
        let completions = client.region.consumer(1).expect("completion ring");
        let direct = client.region.consumer(2).ok();
        let pool = client.region.pool().expect("pool");
        let notifier = Notifier::new(client.server_wakeup.try_clone().expect("eventfd"));
        Hostile {
            client,
            requests,
            completions,
            direct,
            pool,
            notifier,
            sockets: Vec::new(),
            tokens: Vec::new(),
            named: Vec::new(),
            next_id: 1,
            broke_requests: false,
            patient,
            watch_path: nagare_request::share_watch_path(socket),
            watches: Vec::new(),
        }
    }

    /// Pushes one descriptor, draining completions while the ring is full
    /// (netd takes no request it has no room to complete).
    fn push(&mut self, d: Descriptor) {
        for _ in 0..100 {
            match self.notifier.push_batch(&mut self.requests, &[d]) {
                Ok(1) => return,
                Ok(_) => {
                    self.drain();
                    std::thread::sleep(Duration::from_micros(200));
                }
                // The script broke its own ring: netd will disconnect it.
                Err(_) => return,
            }
        }
    }

    /// Signals netd's eventfd, as a client that wants it to look does.
    fn wake_netd(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live array to an eventfd we hold.
        unsafe { libc::write(self.client.server_wakeup.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Takes every completion: buffers handed back are taken (or refused,
    /// if the completion is itself bad), socket ids are kept. A patient
    /// client first lets netd take every request on the ring and goes on
    /// taking completions until none has come for [`QUIET`] (at most
    /// [`CATCH_UP`] in all), so that what its script does after a drain
    /// does not depend on how loaded the machine is: a socket id it takes
    /// from a completion is there whether netd's thread ran at once or late.
    fn drain(&mut self) {
        self.take_completions();
        if !self.patient {
            return;
        }
        let deadline = Instant::now() + CATCH_UP;
        let mut last = Instant::now();
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
            if self.take_completions() > 0 {
                last = Instant::now();
            }
            let waiting = matches!(self.requests.free(), Ok(free) if free < self.requests.capacity());
            if !waiting && last.elapsed() >= QUIET {
                return;
            }
        }
    }

    /// Takes the completions on the rings now; how many.
    fn take_completions(&mut self) -> usize {
        let mut popped = Vec::new();
        for ring in std::iter::once(&mut self.completions).chain(self.direct.as_mut()) {
            while let Ok(Some(c)) = ring.pop() {
                popped.push(c);
            }
        }
        let n = popped.len();
        for c in popped {
            // Taken back and freed, so that later steps hand it over again.
            if let Ok(Some(b)) = self.pool.take(&c) {
                let _ = self.pool.release(b.index);
            }
            if c.status == 0 && c.kind & 0xffff == Op::Share as u32 && self.tokens.len() < 16 {
                self.tokens.push(c.aux[0]);
            }
            let creates = [
                Op::UdpBind,
                Op::UdpBind6,
                Op::Listen,
                Op::Listen6,
                Op::Connect,
                Op::Connect6,
                Op::Accept,
                Op::EchoOpen,
                Op::Adopt,
            ]
            .map(|op| op as u32);
            if c.status == 0 && creates.contains(&(c.kind & 0xffff)) && self.sockets.len() < 64 {
                // An accepted connection's word carries its local address
                // above the id.
                let id = if c.kind & 0xffff == Op::Accept as u32 {
                    Ok(nagare_request::decode_accepted(c.aux[0]).0)
                } else {
                    u32::try_from(c.aux[0])
                };
                if let Ok(id) = id {
                    self.sockets.push(id);
                }
            }
        }
        n
    }

    /// A socket id: one netd handed out (perhaps closed since), or any.
    fn socket(&mut self, s: &mut Script) -> u32 {
        match s.byte() % 4 {
            0 if !self.sockets.is_empty() => self.sockets[self.sockets.len() - 1],
            1 | 2 if !self.sockets.is_empty() => self.sockets[usize::from(s.byte()) % self.sockets.len()],
            _ => 1 + s.u32() % 64,
        }
    }

    fn address(s: &mut Script, port_zero: bool) -> u64 {
        let port = if port_zero { 0 } else { PORTS[usize::from(s.byte()) % PORTS.len()] };
        match s.byte() % 8 {
            0..=3 => encode_addr(SocketAddrV4::new(NETD_ADDR, port)),
            4 => encode_addr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)),
            5 => encode_addr(SocketAddrV4::new(NEIGHBOUR, port)),
            6 => encode_addr(SocketAddrV4::new(Ipv4Addr::new(10, 66, 0, 255), port)),
            _ => s.u64(),
        }
    }

    /// An IPv6 address and port as `LISTEN6`, `CONNECT6`, `UDP_BIND6` and
    /// `SENDTO6` carry them (three words), the third's bits above the port
    /// left 0.
    fn address6(s: &mut Script) -> [u64; 3] {
        let port = PORTS[usize::from(s.byte()) % PORTS.len()];
        let ip = match s.byte() % 8 {
            0..=2 => NETD_ADDR6,
            3 => Ipv6Addr::UNSPECIFIED,
            4 => NEIGHBOUR6,
            5 => NETD_ADDR.to_ipv6_mapped(),
            6 => Ipv6Addr::LOCALHOST,
            _ => return [s.u64(), s.u64(), s.u64()],
        };
        nagare_request::encode_addr6(SocketAddrV6::new(ip, port, 0, 0))
    }

    /// A buffer piece: one of ours, filled from the script and handed over
    /// as the protocol says (or not), one named before (perhaps still
    /// netd's), or any index; extents inside, at the edge of and past the
    /// buffer. A poll's piece holds entries for known sockets.
    fn piece(&mut self, s: &mut Script, op: Op) -> Option<Piece> {
        let buffer = match s.byte() % 8 {
            0..=4 => match self.pool.alloc() {
                Some(b) => {
                    let fill: Vec<u8> = if op == Op::Poll {
                        let n = 1 + usize::from(s.byte() % 4);
                        (0..n)
                            .flat_map(|_| {
                                let entry =
                                    PollEntry { socket: self.socket(s), interest: u16::from(s.byte() % 4), ready: 0 };
                                entry.to_bytes()
                            })
                            .collect()
                    } else {
                        (0..usize::from(s.byte())).map(|i| i as u8).collect()
                    };
                    let _ = self.pool.write(b, 0, &fill);
                    if !s.one_in(16) {
                        let _ = self.pool.give(b);
                    }
                    if op == Op::Poll {
                        let len = if s.one_in(8) { s.u32() } else { fill.len() as u32 };
                        return Some(Piece { buffer: b, offset: 0, len });
                    }
                    b
                }
                None => u32::from(s.byte()) % BUFFERS,
            },
            5 | 6 if !self.named.is_empty() => self.named[usize::from(s.byte()) % self.named.len()],
            _ => u32::from(s.byte()) % (BUFFERS + 2),
        };
        if self.named.len() < 16 {
            self.named.push(buffer);
        } else {
            self.named[usize::from(s.byte()) % 16] = buffer;
        }
        let (offset, len) = match s.byte() % 8 {
            0..=3 => (0, u32::from(s.byte()) * 8),
            4 => (0, BUFFER_SIZE),
            5 => (u32::from(s.byte()), BUFFER_SIZE - u32::from(s.byte())),
            6 => (BUFFER_SIZE, 0),
            _ => (s.u32(), s.u32()),
        };
        Some(Piece { buffer, offset, len })
    }

    /// A request that decodes, mostly: the right fields for its op, with
    /// sockets, buffers and addresses that may not be the client's or may
    /// not exist. One in sixteen breaks a rule of the encoding.
    fn request(&mut self, s: &mut Script) -> Descriptor {
        // Ops 1..=16, the options (17, 18), sharing (19..=21), IPv6's
        // (22..=27), a forked child's pid (28) and a UDP socket's peer (29)
        // for the top bytes; 0 gives a second chance to bind, which most
        // scripts need before anything else works.
        let b = s.byte();
        let op = match b {
            0xf0.. => 17 + u16::from(b & 1),
            0xef => 30,
            0xe8.. => 19 + u16::from(b % 3),
            0xe7 => 29,
            0xe6 => 28,
            0xe0.. => 22 + u16::from(b % 6),
            _ => u16::from(b % 17),
        };
        let op = Op::from_u16(op).unwrap_or(Op::UdpBind);
        let id = self.next_id;
        self.next_id += 1;
        let mut r = Request::new(op, id);
        let sends = matches!(op, Op::Send | Op::SendTo | Op::SendTo6);
        let f = s.byte();
        r.flags = match f % 16 {
            0 | 1 | 8 | 9 => NONBLOCK,
            2 | 10 if sends => LEND,
            3 | 11 if sends => LEND | COMPLETE_ON_ACCEPT,
            4 | 12 if op == Op::SendTo => TRACE,
            15 if sends => LEND | COPY_SHORT,
            _ => 0,
        };
        if op.needs_socket() {
            r.socket = self.socket(s);
        }
        if op.needs_buffer() {
            r.piece = self.piece(s, op);
        }
        match op {
            Op::UdpBind | Op::SendTo => r.aux[0] = Self::address(s, false),
            Op::Listen => {
                r.aux[0] = Self::address(s, false);
                r.aux[1] = 1 + u64::from(s.byte() % 8);
            }
            Op::Connect => {
                r.aux[0] = Self::address(s, false);
                r.aux[1] = u64::from(s.byte() % 2) * 9001;
            }
            Op::Listen6 => {
                let [hi, lo, port] = Self::address6(s);
                let only = if s.one_in(2) { nagare_request::V6_ONLY } else { 0 };
                r.aux = [hi, lo, port | only, 1 + u64::from(s.byte() % 8)];
            }
            Op::Connect6 => {
                let [hi, lo, port] = Self::address6(s);
                r.aux[..3].copy_from_slice(&[hi, lo, port | ((u64::from(s.byte() % 2) * 9001) << 16)]);
            }
            Op::Name => r.aux[0] = u64::from(s.byte() % 3),
            Op::UdpBind6 => {
                let [hi, lo, port] = Self::address6(s);
                let only = if s.one_in(2) { nagare_request::V6_ONLY } else { 0 };
                r.aux[..3].copy_from_slice(&[hi, lo, port | only]);
            }
            Op::SendTo6 => {
                let [hi, lo, port] = Self::address6(s);
                r.aux[..3].copy_from_slice(&[hi, lo, port]);
            }
            // A peer of either family (IPv4 mapped), or, one time in four,
            // none (all zero).
            Op::UdpConnect if !s.one_in(4) => {
                let [hi, lo, port] = Self::address6(s);
                r.aux[..3].copy_from_slice(&[hi, lo, port]);
            }
            // Its own pid (not a child of itself), or any word.
            Op::Pid => r.aux[0] = if s.one_in(2) { u64::from(std::process::id()) } else { s.u64() },
            // The address's port word is the sequence number.
            Op::EchoSend6 => {
                let [hi, lo, _] = Self::address6(s);
                r.aux[..3].copy_from_slice(&[hi, lo, u64::from(s.byte())]);
            }
            Op::EchoOpen => r.aux[0] = u64::from(s.byte()),
            // A plain close, a reset, or a flag that does not exist (from
            // the flags byte's high bits).
            Op::Close => r.aux[0] = u64::from(f / 8 % 3),
            Op::SetOption => {
                r.aux[0] = u64::from(s.byte() % 6);
                r.aux[1] = match s.byte() % 4 {
                    0 => 0,
                    1 => u64::from(s.byte()),
                    2 => u64::from(s.u32()),
                    _ => s.u64(),
                };
            }
            Op::GetOption => r.aux[0] = u64::from(s.byte() % 6),
            // A token a share gave this client, or any word.
            Op::Adopt => {
                r.aux[0] = match self.tokens.len() {
                    0 => s.u64(),
                    n => self.tokens[usize::from(s.byte()) % n],
                }
            }
            Op::EchoSend => {
                r.aux[0] = Self::address(s, true);
                r.aux[1] = u64::from(s.byte());
            }
            _ => {}
        }
        if r.flags & TRACE != 0 {
            r.aux[TRACE_TIME] = 1 + u64::from(s.byte());
        }
        if op.can_wait() && s.one_in(4) {
            r.aux[WAIT_LIMIT] = u64::from(s.byte()) * 100;
        }
        let mut d = r.encode();
        if s.one_in(16) {
            match s.byte() % 4 {
                0 => d.kind ^= 1 << (s.byte() % 32),
                1 => d.flags = s.u32(),
                2 => d.aux[usize::from(s.byte() % 4)] = s.u64(),
                _ => d.status = s.u32() as i32,
            }
        }
        d
    }

    fn raw(s: &mut Script) -> Descriptor {
        let w: Vec<u64> = (0..8).map(|_| s.u64()).collect();
        Descriptor {
            kind: w[0] as u32 % 32,
            flags: (w[0] >> 32) as u32,
            id: w[1],
            buffer: if w[2] & 1 == 0 { NO_BUFFER } else { (w[2] >> 1) as u32 % (BUFFERS + 2) },
            offset: (w[2] >> 32) as u32,
            len: w[3] as u32,
            status: (w[3] >> 32) as i32,
            aux: [w[4], w[5], w[6], w[7]],
        }
    }

    /// Bytes written anywhere in the region: payloads and poll entries in
    /// buffers, and damage to rings and to buffers netd holds.
    fn scribble(&mut self, s: &mut Script) {
        let total = self.client.region.layout().total_len;
        let buffers = self.client.region.layout().buffer_offset;
        let offset =
            if s.one_in(4) { u64::from(s.u32()) % total } else { buffers + u64::from(s.u32()) % (total - buffers) };
        let len = usize::from(s.byte() % 64).min((total - offset) as usize);
        let bytes: Vec<u8> = (0..len).map(|_| s.byte()).collect();
        self.client.region.scribble_bytes(offset, &bytes);
    }

    fn step(&mut self, s: &mut Script) {
        match s.byte() % 10 {
            0..=3 => {
                let d = self.request(s);
                self.push(d);
            }
            4 => {
                let d = Self::raw(s);
                self.push(d);
            }
            5 => self.scribble(s),
            6 => match s.byte() % 16 {
                0 => {
                    let head = s.u32();
                    if self.patient {
                        // What the script asked for before breaking the
                        // ring is done first, however late netd runs.
                        self.drain();
                    }
                    self.requests.scribble_head(head);
                    self.wake_netd();
                    // Out of range whatever netd's tail is (at most a ring
                    // behind our own head); a later push would mend it.
                    let ahead = head.wrapping_sub(self.requests.head());
                    self.broke_requests = ahead > RING_SLOTS && ahead < RING_SLOTS.wrapping_neg();
                }
                1 => {
                    self.completions.scribble_tail(s.u32());
                    self.wake_netd();
                }
                // A descriptor watched under one of its tokens (or any
                // number), kept open; then one closed.
                2 if self.watches.len() < 8 => {
                    let pick = usize::from(s.byte());
                    let token = if self.tokens.is_empty() { s.u64() } else { self.tokens[pick % self.tokens.len()] };
                    if let Ok(mut w) = std::os::unix::net::UnixStream::connect(&self.watch_path) {
                        if w.write_all(&token.to_le_bytes()).is_ok() {
                            self.watches.push(w);
                        }
                    }
                }
                3 if !self.watches.is_empty() => {
                    let at = usize::from(s.byte()) % self.watches.len();
                    drop(self.watches.swap_remove(at));
                }
                _ => {}
            },
            7 | 8 => self.drain(),
            // A pause, taking nothing: completions may pile up.
            _ => std::thread::sleep(Duration::from_micros(u64::from(s.byte()) * 8)),
        }
    }
}

fn socket_path() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("nagare-hostile-{}-{n}.sock", std::process::id()))
}

/// The engine and, in single placement, a driver thread over a loopback
/// device; inline otherwise.
fn start_netd(socket: PathBuf, single: bool) -> std::io::Result<nagare_netd::Netd> {
    let mac = EthernetAddress([2, 0, 0, 0x66, 0, 1]);
    let mut config = InterfaceConfig::new(mac, format!("{NETD_ADDR}/24").parse().expect("cidr"));
    // The neighbour never answers (the loopback device returns our own
    // ARP requests): give up on it in 40 ms, so that what waits for it is
    // let go within a case, not after 3 s.
    config.arp.request_interval = Duration::from_millis(20);
    config.arp.max_requests = 2;
    // IPv6 beside it, taken at once; neighbour discovery, which the
    // loopback never answers either, gives up as fast.
    config.ipv6 = Some(nagare_core::Ipv6Config {
        addresses: vec![format!("{NETD_ADDR6}/64").parse().expect("cidr")],
        dad_transmits: 0,
        router_solicitations: 0,
        ndp: nagare_core::NdpConfig {
            retrans_timer: Duration::from_millis(20),
            max_multicast_solicit: 2,
            ..nagare_core::NdpConfig::default()
        },
        ..nagare_core::Ipv6Config::default()
    });
    let iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 4096));
    let netd_config = NetdConfig {
        socket,
        ring_slots: RING_SLOTS,
        buffers: BUFFERS,
        receive_pool: 8,
        buffer_size: BUFFER_SIZE,
        max_pending: 16,
        max_sockets: 32,
        max_bad: 64,
        link: String::from("hostile test"),
        ..NetdConfig::default()
    };
    if single {
        let launcher = Box::new(|control| {
            let thread = std::thread::Builder::new().name(String::from("hostile-driver")).spawn(move || {
                let stop = AtomicBool::new(false);
                let _ = serve(
                    control,
                    Duration::from_micros(50),
                    |_| Ok(Box::new(Loopback::new(1500, 256)) as Box<dyn Device>),
                    &stop,
                );
            })?;
            Ok(DriverHandle::Thread(thread))
        });
        let link = DriverLink::start(launcher, None, Vec::new())?;
        nagare_netd::Netd::with_driver(iface, link, Placement::Single, MonotonicClock::new(), netd_config)
    } else {
        nagare_netd::Netd::new(iface, Box::new(Loopback::new(1500, 256)), MonotonicClock::new(), netd_config)
    }
}

/// The first port the script could have taken that `good` cannot take,
/// and what it got; `None` if every one is free.
fn port_taken(good: &nagare::Session) -> Option<String> {
    for port in PORTS.into_iter().filter(|&p| p != 0) {
        // A dual-stack UDP socket needs the port free in both families.
        let dual = nagare::net::UdpSocket::bind_via(good, SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0));
        if let Err(e) = dual {
            return Some(format!("UDP port {port} in both families: {e}"));
        }
        drop(dual);
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        if let Err(e) = nagare::net::UdpSocket::bind_via(good, any) {
            return Some(format!("UDP port {port}: {e}"));
        }
        if let Err(e) = nagare::net::TcpListener::bind_via(good, any) {
            return Some(format!("TCP port {port}: {e}"));
        }
    }
    None
}

/// Waits until `ok` holds, for at most [`SETTLE`], while netd's thread
/// runs.
fn settle<T>(server: &JoinHandle<T>, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + SETTLE;
    while !ok() {
        assert!(!server.is_finished(), "netd's thread has ended (a panic, or its loop failed)");
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A number in `netd`'s stat text: the word after `key`.
fn stat_value(text: &str, key: &str) -> Option<u64> {
    let at = text.find(key)? + key.len();
    text[at..].split_whitespace().next()?.parse().ok()
}

/// Runs one script (see the module's comment); panics when a check fails.
/// Returns netd's counters after it stopped, for scripts written to reach
/// one place to show they reached it.
pub fn run(input: &[u8]) -> NetdStats {
    run_with(input, false)
}

/// As [`run`], with a client whose drains wait for netd to take every
/// request on the ring first: for scripts written by hand, whose later
/// steps name the sockets earlier ones made.
#[allow(dead_code)]
pub fn run_patient(input: &[u8]) -> NetdStats {
    run_with(input, true)
}

fn run_with(input: &[u8], patient: bool) -> NetdStats {
    let mut script = Script { bytes: input };
    let single = script.byte() % 2 == 1;
    let socket = socket_path();
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = {
        let (socket, stop) = (socket.clone(), Arc::clone(&stop));
        std::thread::Builder::new()
            .name(String::from("hostile-netd"))
            .spawn(move || -> Result<Final, String> {
                let mut netd = start_netd(socket, single).map_err(|e| format!("netd did not start: {e}"))?;
                let _ = ready_tx.send(());
                netd.run(&stop).map_err(|e| format!("netd's loop failed: {e}"))?;
                Ok(Final { stats: netd.stats(), engine_in_use: netd.iface().pool().in_use(), clients: netd.clients() })
            })
            .expect("thread")
    };
    let _stopper = Stopper { stop: Arc::clone(&stop), socket: socket.clone() };
    ready_rx.recv_timeout(SETTLE).expect("netd started");

    let good = nagare::Session::connect(&socket).expect("the well-behaved client connects");
    good.set_spin(Duration::ZERO);
    let baseline = stat_value(&good.stat().expect("stat"), "engine buffers in_use ").expect("engine buffers in stat");

    let mut hostile = Hostile::connect(&socket, patient);
    let mut steps = 0;
    while !script.done() && steps < MAX_STEPS && !hostile.broke_requests {
        hostile.step(&mut script);
        steps += 1;
    }
    if hostile.broke_requests {
        settle(&server, "netd did not disconnect a client whose request ring is broken", || hostile.client.peer_gone());
    }
    hostile.drain();
    drop(hostile);

    settle(&server, "netd still counts the hostile client", || {
        good.stat().ok().and_then(|t| stat_value(&t, " clients ")) == Some(1)
    });
    {
        let a = nagare::net::UdpSocket::bind_via(&good, SocketAddrV4::new(NETD_ADDR, 9100))
            .expect("bind after the hostile client");
        let b = nagare::net::UdpSocket::bind_via(&good, SocketAddrV4::new(NETD_ADDR, 0)).expect("bind");
        a.set_read_timeout(Some(SETTLE)).expect("timeout");
        b.send_to(b"after the hostile client", SocketAddrV4::new(NETD_ADDR, 9100)).expect("send");
        let mut got = [0u8; 64];
        let (n, _) = a.recv_from(&mut got).expect("netd serves after the hostile client");
        assert_eq!(&got[..n], b"after the hostile client");
        // Every port the script could have taken is free again: the
        // client's sockets were closed, not left behind (one its watched
        // descriptor kept, once netd has seen the descriptor's hang-up).
        let mut taken = None;
        settle(&server, "a port the hostile client took stays taken", || {
            taken = port_taken(&good);
            taken.is_none()
        });
        assert_eq!(taken, None);
    }
    // Closed connections may still hold frames for a moment (a reset on
    // its way out), and those the client's exit closed with a FIN send
    // theirs until their peers answer (netd's orphans, which then stop
    // sending); what stays is lost.
    settle(&server, "the engine's pool holds buffers the hostile client left", || {
        let Ok(text) = good.stat() else { return false };
        let in_use = stat_value(&text, "engine buffers in_use ");
        assert!(in_use.is_some(), "the stat report lost its engine buffers line:\n{text}");
        in_use.is_some_and(|n| n <= baseline) && stat_value(&text, " orphans ") == Some(0)
    });
    // The well-behaved client holds nothing now: every byte the hostile
    // one was charged has come back.
    settle(&server, "netd's accounts still charge what the hostile client held", || {
        good.stat().ok().is_some_and(|t| stat_value(&t, "memory charged ") == Some(0))
    });
    drop(good);

    stop.store(true, Ordering::Relaxed);
    let done = server.join().unwrap_or_else(|_| panic!("netd panicked (script of {} bytes)", input.len()));
    let done = done.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(done.stats.buffers_leaked, 0, "netd leaked buffers: {:?}", done.stats);
    assert!(done.engine_in_use as u64 <= baseline, "engine buffers in use {} > {baseline}", done.engine_in_use);
    assert_eq!(done.clients, 0, "sessions left after netd stopped");
    done.stats
}

/// Stops netd's loop and removes its socket however a case ends, so that a
/// failing case (and proptest's shrinking after it) leaves no server
/// running behind.
struct Stopper {
    stop: Arc<AtomicBool>,
    socket: PathBuf,
}

impl Drop for Stopper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_file(&self.socket);
    }
}
