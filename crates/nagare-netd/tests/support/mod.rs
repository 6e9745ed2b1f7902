//! A netd in a thread of the test, and clients for it: the client library
//! (`nagare`) and a raw client that writes request descriptors itself.
//!
//! netd's device is a loopback device (frames netd sends come back to it;
//! two clients of one netd talk through its own address, which the engine
//! delivers locally) or one end of a simulated link whose other end is a
//! peer engine stepped from netd's own loop (`Netd::run_with`), or with a
//! driver whenever the driver uses its device (`PeerDevice`), answering
//! UDP and TCP on its port 7 with what it got (TCP over IPv6 too, where
//! the test gives both engines IPv6 addresses: `Tune::ipv6`). In driver placement the
//! driver is a thread of the test too. Nothing needs root, a binary or a
//! network namespace; every wait is bounded.

#![allow(dead_code)]

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{Capabilities, Instant as EngineInstant, Interface, InterfaceConfig, UdpHandle};
use nagare_dev::{Device, LinkConfig, Loopback, MonotonicClock, SimLink, SimPort};
use nagare_ipc::rendezvous::Client;
use nagare_ipc::{Consumer, Descriptor, Notifier, Pool, Producer, Waiter};
use nagare_netd::driver::{serve, DriverHandle, DriverLink};
use nagare_netd::{Completion, Netd, NetdConfig, NetdStats, PacketFlow, Piece, Placement, Request};
use nagare_wire::EthernetAddress;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// netd's address.
pub const NETD_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The peer's address, at the other end of the simulated link.
pub const PEER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// netd's IPv6 address.
pub const NETD_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 1);
/// The peer's IPv6 address.
pub const PEER_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 2);
/// The peer's echo port (UDP and TCP).
pub const ECHO_PORT: u16 = 7;
/// Buffers of each client region, and of them netd's receive pool in
/// driver placement (none inline).
pub const BUFFERS: u32 = 32;
pub const RECEIVE_POOL: u32 = 8;
/// Slots of each client ring.
pub const RING_SLOTS: u32 = 64;
/// The longest any step of a test waits.
pub const LIMIT: Duration = Duration::from_secs(5);

/// What netd sends its frames into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// A loopback device.
    Loopback,
    /// A simulated link to an echoing peer, stepped from netd's loop
    /// (inline) or from the driver's, as part of its device
    /// ([`PeerDevice`]: single placement).
    PeerLink,
}

/// Settings a test changes from the defaults netd and its engine get.
#[derive(Clone, Debug, Default)]
pub struct Tune {
    /// Datagrams each of the engine's UDP sockets queues.
    pub udp_rx_queue_packets: Option<usize>,
    /// The PacketFlow modules netd runs.
    pub packetflow: Option<PacketFlow>,
    /// The file netd reads the link's drops from.
    pub link_drops: Option<PathBuf>,
    /// The engine's 2 KiB buffers (4096 unless set), from which netd's
    /// cap on all sockets' buffers is drawn.
    pub engine_buffers: Option<usize>,
    /// netd's engine and the peer's have IPv6 addresses too
    /// ([`NETD_ADDR6`], [`PEER_ADDR6`]); without, neither sends a frame of
    /// IPv6's own (neighbour discovery, MLD).
    pub ipv6: bool,
}

/// What netd's thread reports once its loop has stopped.
#[derive(Debug)]
pub struct Final {
    pub stats: NetdStats,
    pub engine_in_use: usize,
    pub clients: usize,
}

/// A netd running in a thread of the test, stopped when dropped.
pub struct NetdThread {
    pub socket: PathBuf,
    pub placement: Placement,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Final, String>>>,
}

impl NetdThread {
    /// Starts netd (`Placement::Single`: with a driver thread) and waits
    /// until it listens.
    pub fn start(placement: Placement, wire: Wire) -> NetdThread {
        NetdThread::start_with_region(placement, wire, RING_SLOTS, BUFFERS)
    }

    /// As [`NetdThread::start`], with rings of `ring_slots` and `buffers`
    /// in each client's region.
    pub fn start_with_region(placement: Placement, wire: Wire, ring_slots: u32, buffers: u32) -> NetdThread {
        NetdThread::start_configured(placement, wire, move |c| {
            c.ring_slots = ring_slots;
            c.buffers = buffers;
        })
    }

    /// As [`NetdThread::start`], with the test's configuration changed by
    /// `tweak` (limits, budgets).
    pub fn start_configured(
        placement: Placement,
        wire: Wire,
        tweak: impl FnOnce(&mut NetdConfig) + Send + 'static,
    ) -> NetdThread {
        NetdThread::start_tuned(placement, wire, Tune::default(), tweak)
    }

    /// As [`NetdThread::start_configured`], with `tune`'s settings of the
    /// engine and of netd's PacketFlow modules too.
    pub fn start_tuned(
        placement: Placement,
        wire: Wire,
        tune: Tune,
        tweak: impl FnOnce(&mut NetdConfig) + Send + 'static,
    ) -> NetdThread {
        assert!(placement != Placement::Split, "a driver process needs the nagare binary");
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let socket = std::env::temp_dir().join(format!("nagare-netd-test-{}-{n}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = {
            let (socket, stop) = (socket.clone(), Arc::clone(&stop));
            std::thread::Builder::new()
                .name(String::from("netd"))
                .spawn(move || -> Result<Final, String> {
                    let started = build(socket, placement, wire, tune, tweak);
                    let (mut netd, mut peer) = match started {
                        Ok(x) => {
                            let _ = ready_tx.send(Ok(()));
                            x
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return Err(e.to_string());
                        }
                    };
                    let run = match peer.as_mut() {
                        Some(peer) => netd.run_with(&stop, |_, now| peer.step(now)),
                        None => netd.run(&stop),
                    };
                    run.map_err(|e| format!("netd's loop failed: {e}"))?;
                    Ok(Final {
                        stats: netd.stats(),
                        engine_in_use: netd.iface().pool().in_use(),
                        clients: netd.clients(),
                    })
                })
                .expect("netd's thread")
        };
        match ready_rx.recv_timeout(LIMIT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("netd did not start: {e}"),
            Err(_) => panic!("netd did not start within {LIMIT:?}"),
        }
        NetdThread { socket, placement, stop, thread: Some(thread) }
    }

    /// A client-library connection to it.
    pub fn connect(&self) -> nagare::Session {
        let netd = nagare::Session::connect(&self.socket).expect("a client connects");
        netd.set_spin(Duration::ZERO);
        netd
    }

    /// Whether netd's thread is still running.
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops netd and returns what its thread reported.
    pub fn stop(mut self) -> Final {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("netd's thread");
        let deadline = Instant::now() + LIMIT;
        while !thread.is_finished() {
            assert!(Instant::now() < deadline, "netd did not stop within {LIMIT:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
        match thread.join() {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("netd's thread panicked"),
        }
    }
}

impl Drop for NetdThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // Bounded: the loop looks at `stop` at least every 100 ms.
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// An engine with `addr` and, if given, the IPv6 `addr6`, which it takes
/// at once (no duplicate address detection: nothing else is on these
/// links).
fn engine(
    mac: EthernetAddress,
    (addr, addr6): (Ipv4Addr, Option<Ipv6Addr>),
    udp_rx_queue_packets: Option<usize>,
    buffers: usize,
) -> Interface {
    let mut config = InterfaceConfig::new(mac, format!("{addr}/24").parse().expect("cidr"));
    config.ipv6 = addr6.map(|addr6| nagare_core::Ipv6Config {
        addresses: vec![format!("{addr6}/64").parse().expect("cidr")],
        dad_transmits: 0,
        router_solicitations: 0,
        ..nagare_core::Ipv6Config::default()
    });
    if let Some(n) = udp_rx_queue_packets {
        config.udp_rx_queue_packets = n;
    }
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, buffers))
}

fn build(
    socket: PathBuf,
    placement: Placement,
    wire: Wire,
    tune: Tune,
    tweak: impl FnOnce(&mut NetdConfig),
) -> std::io::Result<(Netd, Option<Peer>)> {
    let buffers = tune.engine_buffers.unwrap_or(4096);
    let ipv6 = tune.ipv6;
    let ends = (NETD_ADDR, ipv6.then_some(NETD_ADDR6));
    let iface = engine(EthernetAddress([2, 0, 0, 0x77, 0, 1]), ends, tune.udp_rx_queue_packets, buffers);
    let mut config = NetdConfig {
        socket,
        ring_slots: RING_SLOTS,
        buffers: BUFFERS,
        receive_pool: RECEIVE_POOL,
        max_pending: 16,
        max_sockets: 32,
        max_bad: 64,
        link: String::from("netd test"),
        packetflow: tune.packetflow.unwrap_or_default(),
        link_drops: tune.link_drops,
        ..NetdConfig::default()
    };
    tweak(&mut config);
    match (placement, wire) {
        (Placement::Single, _) => {
            let launcher = Box::new(move |control| {
                let thread = std::thread::Builder::new().name(String::from("netd-driver")).spawn(move || {
                    let stop = AtomicBool::new(false);
                    let _ = serve(
                        control,
                        Duration::from_micros(50),
                        |_| match wire {
                            Wire::Loopback => Ok(Box::new(Loopback::new(1500, 256)) as Box<dyn Device>),
                            Wire::PeerLink => Ok(Box::new(PeerDevice::new(ipv6)) as Box<dyn Device>),
                        },
                        &stop,
                    );
                })?;
                Ok(DriverHandle::Thread(thread))
            });
            let link = DriverLink::start(launcher, None, Vec::new())?;
            Ok((Netd::with_driver(iface, link, Placement::Single, MonotonicClock::new(), config)?, None))
        }
        (_, Wire::Loopback) => {
            Ok((Netd::new(iface, Box::new(Loopback::new(1500, 256)), MonotonicClock::new(), config)?, None))
        }
        (_, Wire::PeerLink) => {
            let (ours, theirs) = SimLink::new(LinkConfig::default(), 7);
            let netd = Netd::new(iface, Box::new(ours), MonotonicClock::new(), config)?;
            Ok((netd, Some(Peer::new(theirs, ipv6))))
        }
    }
}

/// Our end of a simulated link with the echoing peer at the other, which
/// runs whenever the device is used: a device for a driver thread, which
/// has no turn of netd's to step the peer in.
struct PeerDevice {
    ours: SimPort,
    peer: Peer,
}

impl PeerDevice {
    fn new(ipv6: bool) -> PeerDevice {
        let (ours, theirs) = SimLink::new(LinkConfig::default(), 7);
        PeerDevice { ours, peer: Peer::new(theirs, ipv6) }
    }
}

impl Device for PeerDevice {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: EngineInstant,
    ) -> std::io::Result<usize> {
        self.peer.step(now);
        self.ours.receive_batch(pool, out, max, now)
    }

    fn transmit_batch(
        &mut self,
        frames: &mut std::collections::VecDeque<PacketBuf>,
        now: EngineInstant,
    ) -> std::io::Result<usize> {
        let n = self.ours.transmit_batch(frames, now)?;
        self.peer.step(now);
        Ok(n)
    }

    fn capabilities(&self) -> Capabilities {
        self.ours.capabilities()
    }

    fn poll_at(&self) -> Option<EngineInstant> {
        self.ours.poll_at()
    }

    fn stats(&self) -> nagare_dev::DeviceStats {
        self.ours.stats()
    }
}

/// An engine at the other end of the simulated link, stepped from netd's
/// loop: it echoes datagrams and stream bytes sent to its port 7.
struct Peer {
    iface: Interface,
    port: SimPort,
    rx: Vec<PacketBuf>,
    udp: UdpHandle,
    /// Its IPv6 one, on port 7 of its IPv6 address.
    udp6: Option<UdpHandle>,
    /// On port 7 of its IPv4 address (and of its IPv6 one).
    listeners: Vec<TcpListenerHandle>,
    /// Each connection and the bytes it has to send back.
    conns: Vec<(TcpHandle, Vec<u8>)>,
    buf: Vec<u8>,
}

impl Peer {
    fn new(port: SimPort, ipv6: bool) -> Peer {
        let ends = (PEER_ADDR, ipv6.then_some(PEER_ADDR6));
        let mut iface = engine(EthernetAddress([2, 0, 0, 0x77, 0, 2]), ends, None, 4096);
        let local = SocketAddrV4::new(PEER_ADDR, ECHO_PORT);
        let udp = iface.udp().bind(local).expect("the peer's UDP socket");
        let mut listeners = vec![iface.tcp().listen(local, 16).expect("the peer's listener")];
        let mut udp6 = None;
        if ipv6 {
            let local6 = SocketAddrV6::new(PEER_ADDR6, ECHO_PORT, 0, 0);
            listeners.push(iface.tcp().listen_v6_only(local6, 16).expect("the peer's IPv6 listener"));
            udp6 = Some(iface.udp().bind6(local6).expect("the peer's IPv6 UDP socket"));
        }
        Peer { iface, port, rx: Vec::new(), udp, udp6, listeners, conns: Vec::new(), buf: vec![0; 65536] }
    }

    /// One turn of the peer; whether it did anything.
    fn step(&mut self, now: EngineInstant) -> bool {
        let pool = self.iface.pool().clone();
        let received = self.port.receive_batch(&pool, &mut self.rx, 64, now).unwrap_or(0);
        self.iface.receive_batch(self.rx.drain(..), now);
        self.iface.poll(now);
        let mut work = received > 0;
        while let Ok(Some((n, from))) = self.iface.udp().recv_from(self.udp, &mut self.buf) {
            let _ = self.iface.udp().send_to(self.udp, &self.buf[..n], from, now);
            work = true;
        }
        if let Some(udp6) = self.udp6 {
            while let Ok(Some((n, from))) = self.iface.udp().recv_from6(udp6, &mut self.buf) {
                let _ = self.iface.udp().send_to6(udp6, &self.buf[..n], from, now);
                work = true;
            }
        }
        for &l in &self.listeners {
            while let Ok(Some(h)) = self.iface.tcp().accept(l) {
                self.conns.push((h, Vec::new()));
                work = true;
            }
        }
        let iface = &mut self.iface;
        let buf = &mut self.buf;
        self.conns.retain_mut(|(h, backlog)| {
            if !backlog.is_empty() {
                match iface.tcp().send(*h, backlog, now) {
                    Ok(n) => {
                        backlog.drain(..n);
                        work |= n > 0;
                    }
                    Err(_) => return iface.tcp().close(*h, now).is_err(),
                }
            }
            if backlog.is_empty() {
                match iface.tcp().recv(*h, buf, now) {
                    Ok(0) => {
                        // The end of the stream: ours ends too.
                        let _ = iface.tcp().close(*h, now);
                        work = true;
                        return false;
                    }
                    Ok(n) => {
                        backlog.extend_from_slice(&buf[..n]);
                        work = true;
                    }
                    Err(nagare_core::iface::Error::WouldBlock) => {}
                    Err(_) => {
                        let _ = iface.tcp().close(*h, now);
                        return false;
                    }
                }
            }
            true
        });
        let _ = self.port.transmit_batch(self.iface.tx_queue(), now);
        work
    }
}

/// A client that writes request descriptors itself, as a hostile one
/// would: nothing checks what it asks.
pub struct RawClient {
    pub client: Client,
    requests: Producer,
    completions: Consumer,
    pub pool: Pool,
    notifier: Notifier,
    waiter: Waiter,
    next_id: u64,
}

impl RawClient {
    pub fn connect(netd: &NetdThread) -> RawClient {
        let client = Client::connect(&netd.socket).expect("a raw client connects");
        let requests = client.region.producer(0).expect("request ring");
        let completions = client.region.consumer(1).expect("completion ring");
        let pool = client.region.pool().expect("pool");
        let notifier = Notifier::new(client.server_wakeup.try_clone().expect("eventfd"));
        let waiter = Waiter::new(client.client_wakeup.try_clone().expect("eventfd"), Duration::ZERO);
        RawClient { client, requests, completions, pool, notifier, waiter, next_id: 1 }
    }

    /// A request of `op` with a fresh id.
    pub fn request(&mut self, op: nagare_netd::Op) -> Request {
        let id = self.next_id;
        self.next_id += 1;
        Request::new(op, id)
    }

    /// A buffer of ours holding `bytes`, handed to netd, as a piece of
    /// `len` bytes (the room, for a receive).
    pub fn give(&mut self, bytes: &[u8], len: u32) -> Piece {
        let b = self.pool.alloc().expect("a free buffer");
        self.pool.write(b, 0, bytes).expect("write");
        self.pool.give(b).expect("give");
        Piece { buffer: b, offset: 0, len }
    }

    /// Posts `d` without waiting.
    pub fn post(&mut self, d: Descriptor) {
        let n = self.notifier.push_batch(&mut self.requests, &[d]).expect("the request ring");
        assert_eq!(n, 1, "the request ring is full");
    }

    /// Completions netd posted that this client has not taken.
    pub fn completions_waiting(&mut self) -> u32 {
        self.completions.available().expect("the completion ring")
    }

    /// The completion ring's slots.
    pub fn completion_capacity(&self) -> u32 {
        self.completions.capacity()
    }

    /// Posts `d` without waking netd (it takes it when it next looks).
    pub fn post_quietly(&mut self, d: Descriptor) {
        let n = self.requests.push_batch(&[d]).expect("the request ring");
        assert_eq!(n, 1, "the request ring is full");
    }

    /// Posts `d` and waits (at most [`LIMIT`]) for the completion with its
    /// id; a buffer it hands back is ours again, and its first bytes are
    /// returned with it.
    pub fn call_raw(&mut self, d: Descriptor) -> (Completion, Vec<u8>) {
        self.post(d);
        self.completion_of(d.id, d.kind)
    }

    /// Waits (at most [`LIMIT`]) for the completion of the request posted
    /// with id `id`; completions of others met on the way are dropped.
    pub fn wait_for(&mut self, id: u64) -> Completion {
        self.completion_of(id, 0).0
    }

    /// Waits (at most [`LIMIT`]) for the next completion, whatever its
    /// request: its id and the completion (a buffer it hands back is ours
    /// again).
    pub fn next_completion(&mut self) -> (u64, Completion) {
        let deadline = Instant::now() + LIMIT;
        loop {
            assert!(Instant::now() < deadline, "no completion came");
            if let Some(c) = self.completions.pop().expect("the completion ring") {
                if let Ok(Some(b)) = self.pool.take(&c) {
                    self.pool.release(b.index).expect("release");
                }
                return (c.id, Completion::decode(&c).expect("a completion that decodes"));
            }
            let _ = self.waiter.wait(&mut self.completions, Some(Duration::from_millis(10)));
        }
    }

    fn completion_of(&mut self, id: u64, kind: u32) -> (Completion, Vec<u8>) {
        let deadline = Instant::now() + LIMIT;
        loop {
            assert!(Instant::now() < deadline, "no completion for request {id} (op {kind:#x})");
            if let Some(c) = self.completions.pop().expect("the completion ring") {
                if c.id == id {
                    let mut bytes = Vec::new();
                    if let Ok(Some(b)) = self.pool.take(&c) {
                        bytes = vec![0; b.len as usize];
                        self.pool.read(b.index, b.offset, &mut bytes).expect("read");
                        self.pool.release(b.index).expect("release");
                    }
                    return (Completion::decode(&c).expect("a completion that decodes"), bytes);
                }
                continue;
            }
            let _ = self.waiter.wait(&mut self.completions, Some(Duration::from_millis(10)));
        }
    }

    /// [`RawClient::call_raw`] of a request.
    pub fn call(&mut self, r: Request) -> Completion {
        self.call_raw(r.encode()).0
    }

    /// Buffers of the region that are ours now.
    pub fn buffers_held(&self) -> u32 {
        let (free, in_use, _) = self.pool.counts();
        free + in_use
    }
}

/// The number after `key` in netd's report.
pub fn stat_value(report: &str, key: &str) -> Option<u64> {
    let at = report.find(key)? + key.len();
    report[at..].split_whitespace().next()?.parse().ok()
}

/// Asks for netd's report until `until` holds (at most [`LIMIT`]); the
/// report that did.
pub fn wait_for_report(netd: &nagare::Session, what: &str, until: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + LIMIT;
    loop {
        let report = netd.stat().expect("stat");
        if until(&report) {
            return report;
        }
        assert!(Instant::now() < deadline, "{what}:\n{report}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
