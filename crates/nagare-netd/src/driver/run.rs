//! The driver: the device's half of the stack, in a process of its own
//! (`nagare driver`, split placement) or a thread of netd (single
//! placement), the same code either way.
//!
//! It takes frames from netd's transmit ring as chains of pieces, some in
//! the driver region (headers, netd's own data), some in an application's
//! region (its payload, never copied), hands them to the device, and then
//! posts `RETURN`ed completions straight into the application's
//! driver-completion ring (direct return). Frames from the device go to
//! netd in receive buffers of the driver region, or, when the device lets
//! the driver read their headers first and netd steers their port to an
//! application, straight into a buffer of that application's region
//! (`crate::steering`). A multi-queue TAP does the same with a queue per
//! client, which the kernel picks by port and reads into the client's
//! buffers ([`super::queues`]).

use super::messages::{
    offload_of, offload_word, Control, SteerChange, CONTROL_LEN, KEY, LOCAL, MAX_PIECES, MORE, RETURN, RETURNED,
    RX_CLIENT_FREE, RX_CLIENT_PIECE, RX_FREE, RX_PIECE, STAGES, STEER, STEERED, TRACE_AT, TX_CLIENT_PIECE, TX_DONE,
    TX_PIECE, UNDELIVERED,
};
use super::queues::{RxQueues, MAX_RX_QUEUES};
use crate::steering::{flow_of, is_for, Local, HEAD_LEN};
use crate::view::{Release, View};
use nagare_core::buf::{BufferPool, Offload, PacketBuf};
use nagare_dev::{Device, FrameInPlace, MonotonicClock, PortMap, MAX_LOCAL6, RX_HEADROOM};
use nagare_host::BusyPoll;
use nagare_ipc::fdpass::{recv_with_fds, send_with_fds};
use nagare_ipc::{Consumer, Descriptor, Notifier, Pool, Producer, Region, Waiter};
use nagare_request::pack_stages;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the driver waits for netd's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Descriptors taken from netd per turn.
const BATCH: usize = 256;
/// Frames taken from the device per turn.
const RX_BATCH: usize = 64;
/// Longest sleep.
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// Heap buffers for frames from the device (copied into the region at once).
const HEAP_BUFFERS: usize = 256;
const HEAP_BUFFER_SIZE: usize = 2048;

/// The driver's counters, printed when it stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Frames put on the device.
    pub tx_frames: u64,
    /// Pieces of those in an application's region (payload not copied).
    pub tx_client_pieces: u64,
    /// Frames dropped: a bad descriptor, an unknown client, too many pieces.
    pub tx_bad: u64,
    /// Completions posted straight to applications.
    pub direct_returns: u64,
    /// Frames from the device handed to netd.
    pub rx_frames: u64,
    /// Frames from the device dropped for want of a receive buffer.
    pub rx_dropped: u64,
    /// Bytes of them copied from the device's buffers into the region.
    pub rx_bytes_copied: u64,
    /// Clients attached.
    pub clients_attached: u64,
    /// Control messages or descriptors that made no sense.
    pub bad_messages: u64,
    /// Frames of them put straight into an application's region (steered).
    pub rx_steered: u64,
}

impl DriverStats {
    /// The counters with their names, in the order `Control::Counter`
    /// numbers them.
    pub fn named(&self) -> [(&'static str, u64); 10] {
        [
            ("tx_frames", self.tx_frames),
            ("tx_client_pieces", self.tx_client_pieces),
            ("tx_bad", self.tx_bad),
            ("direct_returns", self.direct_returns),
            ("rx_frames", self.rx_frames),
            ("rx_dropped", self.rx_dropped),
            ("rx_bytes_copied", self.rx_bytes_copied),
            ("clients_attached", self.clients_attached),
            ("bad_messages", self.bad_messages),
            ("rx_steered", self.rx_steered),
        ]
    }

    /// Sets counter `id` (as numbered by [`DriverStats::named`]).
    pub fn set(&mut self, id: u32, value: u64) {
        let field = match id {
            0 => &mut self.tx_frames,
            1 => &mut self.tx_client_pieces,
            2 => &mut self.tx_bad,
            3 => &mut self.direct_returns,
            4 => &mut self.rx_frames,
            5 => &mut self.rx_dropped,
            6 => &mut self.rx_bytes_copied,
            7 => &mut self.clients_attached,
            8 => &mut self.bad_messages,
            9 => &mut self.rx_steered,
            _ => return,
        };
        *field = value;
    }
}

/// How often the driver reports its counters to netd.
const REPORT_EVERY: Duration = Duration::from_millis(250);

/// A transmit buffer of the driver region: handed back to netd when the
/// device is done with the last frame that refers to it.
struct NetdBuffer {
    index: u32,
    done: Rc<RefCell<Vec<u32>>>,
}

impl Release for NetdBuffer {
    fn release(&mut self) {
        self.done.borrow_mut().push(self.index);
    }
}

/// Counts the views of each application buffer the device may still use,
/// so that its completion goes back only when none is left (a device that
/// holds frames after taking them, a delay line, must not see the buffer
/// reused under it).
type ClientRefs = Rc<RefCell<HashMap<(u64, u32), usize>>>;

/// An application's payload in a frame: counted while the device may
/// still use it.
struct ClientPayload {
    key: (u64, u32),
    refs: ClientRefs,
}

impl ClientPayload {
    fn new(key: (u64, u32), refs: &ClientRefs) -> ClientPayload {
        *refs.borrow_mut().entry(key).or_insert(0) += 1;
        ClientPayload { key, refs: refs.clone() }
    }
}

impl Release for ClientPayload {
    fn release(&mut self) {
        let mut refs = self.refs.borrow_mut();
        if let Some(n) = refs.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                refs.remove(&self.key);
            }
        }
    }
}

/// An application attached to the driver: its region (as netd's delegate)
/// and its driver-completion ring.
struct ClientPort {
    region: Region,
    completions: Producer,
    notifier: Notifier,
    backlog: VecDeque<Descriptor>,
    /// Buffers of its region netd gave us for its steered frames.
    rx_free: Vec<u32>,
}

/// A completion due once `after` frames have left the device.
struct Due {
    after: u64,
    key: u64,
    completion: Descriptor,
    /// A traced send's frame: when netd handed it over, when we took it.
    trace: Option<(u64, u64)>,
}

struct Driver {
    control: OwnedFd,
    _region: Region,
    from_netd: Consumer,
    to_netd: Producer,
    pool: Pool,
    notifier: Notifier,
    waiter: Waiter,
    device: Box<dyn Device>,
    clients: HashMap<u64, ClientPort>,
    heap: BufferPool,
    tx: VecDeque<PacketBuf>,
    frame: Vec<PacketBuf>,
    frame_offload: Offload,
    frame_bad: bool,
    /// The frame being put together carries a traced send: (handed, taken).
    frame_trace: Option<(u64, u64)>,
    /// The last traced frame queued, for the `RETURN` behind it.
    last_traced: Option<(u64, u64)>,
    due: VecDeque<Due>,
    frames_queued: u64,
    frames_done: u64,
    done: Rc<RefCell<Vec<u32>>>,
    client_refs: ClientRefs,
    out: VecDeque<Descriptor>,
    rx: Vec<PacketBuf>,
    stats: DriverStats,
    clock: MonotonicClock,
    netd_gone: bool,
    /// The device reads frames straight into our buffers (until it says
    /// it cannot).
    direct_rx: bool,
    /// Views of the buffers of one such read (kept for their capacity).
    rx_views: Vec<nagare_ipc::SharedBytes>,
    /// The device shows frames before they are copied (until it says it
    /// cannot): they are steered.
    placed_rx: bool,
    /// Local ports whose frames go to a client's region: (protocol, port)
    /// → client key.
    steer: HashMap<(u8, u16), u64>,
    /// A multi-queue TAP's queues beside the first, one per client.
    queues: Option<RxQueues>,
    /// netd's Ethernet and IP addresses: only frames to them are
    /// steered (none until netd says).
    local: Option<Local>,
    /// The serial of the last steering change applied, and of the last
    /// one netd was told is in force (`STEERED`).
    steer_applied: u64,
    steer_confirmed: u64,
    /// Tests only ([`STEER_DELAY_VAR`]): how long steering changes wait
    /// before they apply, and those waiting (when, change, serial).
    steer_delay: Option<Duration>,
    steer_delayed: VecDeque<(std::time::Instant, SteerChange, u64)>,
}

/// A fault for tests: a driver that applies each steering change this
/// many milliseconds late, as one held off the CPU would, while it goes on
/// receiving with the table it has. Only a debug build (as tests run)
/// honours it.
pub const STEER_DELAY_VAR: &str = "NAGARE_TEST_DRIVER_STEER_DELAY_MS";

/// What holds input at the start of a turn ([`Driver::ready`]): hang-ups
/// and errors count, so that a read finds them.
struct Ready {
    control: bool,
    /// Bit k: extra queue k (a queue past the 32nd is always read).
    queues: u32,
}

/// Runs the driver on the control socket `control` until netd closes it or
/// `stop` is raised. `open` opens the device, given the descriptor netd
/// passed with its hello (a TAP's), if any. After the last work the driver
/// polls (yielding the CPU between looks) for at least `spin`, longer while
/// work keeps coming ([`BusyPoll`]), then sleeps.
pub fn serve(
    control: OwnedFd,
    spin: Duration,
    open: impl FnOnce(Option<OwnedFd>) -> io::Result<Box<dyn Device>>,
    stop: &AtomicBool,
) -> io::Result<DriverStats> {
    let mut buf = [0u8; CONTROL_LEN];
    if poll_in(control.as_raw_fd(), HELLO_TIMEOUT)? == 0 {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "no hello from netd"));
    }
    let got = recv_with_fds(control.as_fd(), &mut buf, 0)?;
    if got.len != CONTROL_LEN || Control::decode(&buf) != Some(Control::Hello) || got.fds.len() < 3 || got.fds.len() > 4
    {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad hello from netd"));
    }
    let mut fds = got.fds.into_iter();
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "bad hello from netd");
    let memfd = fds.next().ok_or_else(bad)?;
    let netd_efd = fds.next().ok_or_else(bad)?;
    let driver_efd = fds.next().ok_or_else(bad)?;
    let device = open(fds.next())?;
    let region = Region::attach(memfd).map_err(io::Error::other)?;
    let from_netd = region.consumer(0).map_err(io::Error::other)?;
    let to_netd = region.producer(1).map_err(io::Error::other)?;
    let pool = region.pool().map_err(io::Error::other)?;
    let caps = device.capabilities();
    let offloads = caps.tx_offloads;
    let ready = Control::Ready {
        pid: std::process::id(),
        mtu: u32::try_from(caps.mtu).unwrap_or(0),
        offloads: u64::from(offloads.checksum) | (offloads.tcp_segmentation as u64) << 16,
    };
    send_with_fds(control.as_fd(), &ready.encode(), &[])?;
    // From now on neither side may block the other: reports that do not
    // fit are dropped (the next one carries the same counters).
    crate::os::set_nonblocking(control.as_raw_fd())?;
    let mut d = Driver {
        control,
        _region: region,
        from_netd,
        to_netd,
        pool,
        notifier: Notifier::new(netd_efd),
        waiter: Waiter::new(driver_efd, Duration::ZERO),
        device,
        clients: HashMap::new(),
        heap: BufferPool::new(HEAP_BUFFER_SIZE, HEAP_BUFFERS),
        tx: VecDeque::new(),
        frame: Vec::new(),
        frame_offload: Offload::NONE,
        frame_bad: false,
        frame_trace: None,
        last_traced: None,
        due: VecDeque::new(),
        frames_queued: 0,
        frames_done: 0,
        done: Rc::new(RefCell::new(Vec::new())),
        client_refs: Rc::default(),
        out: VecDeque::new(),
        rx: Vec::with_capacity(RX_BATCH),
        stats: DriverStats::default(),
        clock: MonotonicClock::new(),
        netd_gone: false,
        direct_rx: true,
        rx_views: Vec::with_capacity(MAX_PIECES),
        placed_rx: true,
        steer: HashMap::new(),
        queues: None,
        local: None,
        steer_applied: 0,
        steer_confirmed: 0,
        // Tests only: a release build ignores it, since changes that do
        // not travel in line with frames let a reused port's first answer
        // reach its old owner.
        steer_delay: std::env::var(STEER_DELAY_VAR)
            .ok()
            .filter(|_| cfg!(debug_assertions))
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis),
        steer_delayed: VecDeque::new(),
    };
    // netd and the driver both poll on between bursts, so that a frame
    // after a pause finds neither asleep.
    let mut busy = BusyPoll::with_base(spin);
    let mut reported = (std::time::Instant::now(), DriverStats::default());
    while !stop.load(Ordering::Relaxed) && !d.netd_gone {
        if reported.0.elapsed() >= REPORT_EVERY && reported.1 != d.stats {
            reported = (std::time::Instant::now(), d.stats);
            d.report();
        }
        if d.turn()? {
            busy.work(std::time::Instant::now());
        } else if !busy.keep_polling(std::time::Instant::now()) {
            d.sleep()?;
        } else {
            // Netd and the application may be waiting for a CPU.
            busy.yield_cpu();
        }
    }
    Ok(d.stats)
}

impl Driver {
    /// Sends netd every counter (it shows them in `nagare stat`).
    fn report(&self) {
        for (id, (_, value)) in self.stats.named().iter().enumerate() {
            let m = Control::Counter { id: id as u32, value: *value };
            if send_with_fds(self.control.as_fd(), &m.encode(), &[]).is_err() {
                return;
            }
        }
    }

    /// One batch: control messages, netd's descriptors, the device both
    /// ways, completions and returns. Whether anything happened.
    fn turn(&mut self) -> io::Result<bool> {
        let ready = self.ready();
        let mut work = ready.control && self.control_messages();
        work |= self.take_from_netd()?;
        self.apply_delayed_steering();
        let now = self.clock.now();
        if !self.tx.is_empty() {
            let (taken, sent) = match self.device.transmit_batch(&mut self.tx, now) {
                Ok(n) => (n, n),
                Err(_) => {
                    // A hard error on the frame in front: dropped (as a
                    // NIC drops what it cannot send), so what is behind it
                    // and the returns queued after it go on.
                    self.tx.pop_front();
                    self.stats.tx_bad += 1;
                    (1, 0)
                }
            };
            self.frames_done += taken as u64;
            self.stats.tx_frames += sent as u64;
            work |= taken > 0;
        }
        work |= self.post_returns();
        for index in self.done.borrow_mut().drain(..) {
            if self.pool.give(index).is_ok() {
                self.out.push_back(Descriptor { kind: TX_DONE, buffer: index, ..Default::default() });
            }
        }
        work |= self.receive(now, &ready);
        self.confirm_steering();
        work |= self.flush()?;
        Ok(work)
    }

    /// Attaches and detaches clients; notices netd's end.
    fn control_messages(&mut self) -> bool {
        let mut work = false;
        loop {
            let mut buf = [0u8; CONTROL_LEN];
            let got = match recv_with_fds(self.control.as_fd(), &mut buf, libc::MSG_DONTWAIT) {
                Ok(g) => g,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return work,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.netd_gone = true;
                    return true;
                }
            };
            work = true;
            if got.len == 0 {
                self.netd_gone = true;
                return true;
            }
            match (Control::decode(&buf[..got.len]), got.fds.len()) {
                (Some(Control::Attach { key, ring_slots, buffers, buffer_size }), 2) => {
                    let mut fds = got.fds.into_iter();
                    let (Some(memfd), Some(efd)) = (fds.next(), fds.next()) else { continue };
                    let ok = match attach_client(memfd, efd, (ring_slots, buffers, buffer_size)) {
                        Ok(port) => {
                            self.clients.insert(key, port);
                            self.stats.clients_attached += 1;
                            true
                        }
                        Err(e) => {
                            log::warn!("client {key}: {e}");
                            self.stats.bad_messages += 1;
                            false
                        }
                    };
                    // netd names the client's bytes only after this answer.
                    let _ = send_with_fds(self.control.as_fd(), &Control::Attached { key, ok }.encode(), &[]);
                }
                (Some(Control::Detach { key }), 0) => {
                    self.clients.remove(&key);
                    if let Some(q) = &mut self.queues {
                        q.detach(key);
                    }
                }
                (Some(Control::RxQueues { count }), n) if n == count as usize + 1 && n <= MAX_RX_QUEUES + 1 => {
                    self.take_queues(got.fds);
                }
                _ => self.stats.bad_messages += 1,
            }
        }
    }

    /// A steering change from netd: the port table (and the TAP's map, if
    /// the driver reads its queues), or netd's own addresses.
    fn steer_change(&mut self, change: SteerChange, serial: u64) {
        let written = match change {
            SteerChange::Port { proto, port, key: Some(key) } => {
                self.steer.insert((proto, port), key);
                self.queues.as_mut().map_or(Ok(()), |q| q.steer(proto, port, key, serial))
            }
            SteerChange::Port { proto, port, key: None } => {
                self.steer.remove(&(proto, port));
                self.queues.as_mut().map_or(Ok(()), |q| q.forget(proto, port, serial))
            }
            SteerChange::Local { mac, ip, slot, ip6 } => {
                let mut six = self.local.map_or([None; MAX_LOCAL6], |(_, _, six)| six);
                if let Some(s) = six.get_mut(usize::from(slot)) {
                    *s = ip6;
                }
                self.local = Some((mac, ip, six));
                self.queues.as_mut().map_or(Ok(()), |q| q.set_local(ip, usize::from(slot), ip6))
            }
        };
        if written.is_err() {
            self.stats.bad_messages += 1;
        }
    }

    /// Applies steering change number `serial`.
    fn apply_steering(&mut self, change: SteerChange, serial: u64) {
        self.steer_change(change, serial);
        self.steer_applied = self.steer_applied.max(serial);
    }

    /// Applies the delayed steering changes whose time has come, in order.
    fn apply_delayed_steering(&mut self) {
        let now = std::time::Instant::now();
        while let Some(&(due, change, serial)) = self.steer_delayed.front() {
            if due > now {
                break;
            }
            self.steer_delayed.pop_front();
            self.apply_steering(change, serial);
        }
    }

    /// Tells netd which steering changes are in force: those applied
    /// before the oldest whose queue fence is still draining, since
    /// nothing steered by the table before them can still reach a
    /// client's region. A busy queue that keeps draining holds back only
    /// the changes that fenced it and later ones, never for good: each
    /// drain ends after a bounded number of frames.
    fn confirm_steering(&mut self) {
        let in_force = match self.queues.as_ref().and_then(RxQueues::oldest_pending) {
            Some(pending) => self.steer_applied.min(pending.saturating_sub(1)),
            None => self.steer_applied,
        };
        if in_force > self.steer_confirmed {
            let mut d = Descriptor { kind: STEERED, ..Default::default() };
            d.aux[0] = in_force;
            self.out.push_back(d);
            self.steer_confirmed = in_force;
        }
    }

    /// The TAP's extra queues and its port map, from netd: the ports
    /// steered so far are written into the map.
    fn take_queues(&mut self, fds: Vec<OwnedFd>) {
        let mut fds = fds.into_iter();
        let Some(map) = fds.next() else { return };
        let mut devices = Vec::new();
        for fd in fds {
            match self.device.rx_queue(fd) {
                Ok(d) => devices.push(d),
                Err(e) => {
                    // netd passes queues only for a plain TAP, whose
                    // queues this device can read.
                    log::warn!("a receive queue netd passed cannot be read: {e}");
                    self.stats.bad_messages += 1;
                    return;
                }
            }
        }
        let mut queues = RxQueues::new(Box::new(PortMap::from_fd(map)), devices);
        if let Some((_, ip, ip6)) = self.local {
            for (slot, ip6) in ip6.into_iter().enumerate() {
                if queues.set_local(ip, slot, ip6).is_err() {
                    self.stats.bad_messages += 1;
                }
            }
        }
        for (&(proto, port), &key) in &self.steer {
            if queues.steer(proto, port, key, 0).is_err() {
                self.stats.bad_messages += 1;
            }
        }
        self.queues = Some(queues);
    }

    /// Takes netd's descriptors: frames into the device queue, returns in
    /// line behind them, receive buffers back.
    fn take_from_netd(&mut self) -> io::Result<bool> {
        let mut descs = [Descriptor::default(); BATCH];
        let n = self.from_netd.pop_batch(&mut descs).map_err(io::Error::other)?;
        for d in &descs[..n] {
            match d.kind {
                TX_PIECE | TX_CLIENT_PIECE => self.piece(d),
                RETURN => {
                    let completion = Descriptor {
                        kind: d.aux[2] as u32,
                        flags: d.flags,
                        id: d.id,
                        buffer: d.buffer,
                        offset: d.offset,
                        len: d.len,
                        status: d.status,
                        aux: [d.aux[3], d.aux[STAGES], 0, 0],
                    };
                    let trace = if d.aux[STAGES] != 0 { self.last_traced.take() } else { None };
                    self.due.push_back(Due { after: self.frames_queued, key: d.aux[KEY], completion, trace });
                }
                RX_CLIENT_FREE => match self.clients.get_mut(&d.aux[KEY]) {
                    Some(c) if d.buffer < c.region.layout().config.buffers => c.rx_free.push(d.buffer),
                    // A client detached meanwhile: netd forgot the buffer.
                    _ => self.stats.bad_messages += 1,
                },
                STEER | LOCAL => match SteerChange::of(d) {
                    Some(change) => match self.steer_delay {
                        None => self.apply_steering(change, d.id),
                        Some(delay) => self.steer_delayed.push_back((std::time::Instant::now() + delay, change, d.id)),
                    },
                    None => self.stats.bad_messages += 1,
                },
                RX_FREE => match self.pool.take(d) {
                    Ok(Some(b)) => {
                        let _ = self.pool.release(b.index);
                    }
                    _ => self.stats.bad_messages += 1,
                },
                _ => self.stats.bad_messages += 1,
            }
        }
        Ok(n > 0)
    }

    /// Adds one piece to the frame being put together.
    fn piece(&mut self, d: &Descriptor) {
        if self.frame.is_empty() && !self.frame_bad {
            match offload_of(d.aux[0]) {
                Some(o) => self.frame_offload = o,
                None => self.frame_bad = true,
            }
        }
        let piece = match d.kind {
            TX_PIECE => match self.pool.take(d) {
                Ok(Some(b)) => match self.pool.shared(b.index, b.offset, b.len) {
                    Ok(bytes) => {
                        View::packet(bytes, NetdBuffer { index: b.index, done: self.done.clone() }, 0, b.len as usize)
                    }
                    Err(_) => {
                        // Ours now, unusable: straight back.
                        self.done.borrow_mut().push(b.index);
                        None
                    }
                },
                _ => None,
            },
            _ => self
                .clients
                .get(&d.aux[KEY])
                .and_then(|c| c.region.shared_bytes(d.buffer, d.offset, d.len).ok())
                .and_then(|bytes| {
                    self.stats.tx_client_pieces += 1;
                    if d.aux[TRACE_AT] != 0 {
                        self.frame_trace = Some((d.aux[TRACE_AT], nagare_ipc::monotonic_ns()));
                    }
                    View::packet(
                        bytes,
                        ClientPayload::new((d.aux[KEY], d.buffer), &self.client_refs),
                        0,
                        d.len as usize,
                    )
                }),
        };
        match piece {
            Some(p) if self.frame.len() < MAX_PIECES => self.frame.push(p),
            _ => self.frame_bad = true,
        }
        if d.flags & MORE == 0 {
            let pieces = std::mem::take(&mut self.frame);
            if std::mem::take(&mut self.frame_bad) || pieces.is_empty() {
                self.frame_trace = None;
                self.stats.tx_bad += 1;
                return;
            }
            let mut frame = PacketBuf::new();
            for p in pieces {
                frame.append(p);
            }
            frame.set_offload(self.frame_offload);
            if let Some(t) = self.frame_trace.take() {
                self.last_traced = Some(t);
            }
            self.tx.push_back(frame);
            self.frames_queued += 1;
        }
    }

    /// Posts the completions whose frames have all left (direct return),
    /// and tells netd.
    fn post_returns(&mut self) -> bool {
        let mut work = false;
        let mut i = 0;
        while i < self.due.len() {
            // Due once the frames before it were taken by the device and no
            // frame the device still holds uses its buffer.
            let ready = self.due.get(i).is_some_and(|r| {
                r.after <= self.frames_done && !self.client_refs.borrow().contains_key(&(r.key, r.completion.buffer))
            });
            if !ready {
                i += 1;
                continue;
            }
            let Some(mut r) = self.due.remove(i) else { break };
            work = true;
            if let Some((handed, taken)) = r.trace {
                let written = nagare_ipc::monotonic_ns();
                let posting = nagare_ipc::monotonic_ns();
                r.completion.aux[2] = pack_stages(
                    taken.saturating_sub(handed),
                    written.saturating_sub(taken),
                    posting.saturating_sub(written),
                );
            }
            match self.clients.get_mut(&r.key) {
                Some(c) => c.backlog.push_back(r.completion),
                // An unknown client (its attach failed): netd posts it.
                None => self.out.push_back(returned(r.key, r.completion.id, UNDELIVERED)),
            }
        }
        for (&key, c) in self.clients.iter_mut() {
            if c.backlog.is_empty() {
                continue;
            }
            c.backlog.make_contiguous();
            let (a, _) = c.backlog.as_slices();
            // netd learns of a completion once it is on the ring, so that a
            // driver dying with some in its backlog leaves them to netd.
            let (posted, undelivered) = match c.notifier.push_batch(&mut c.completions, a) {
                Ok(n) => (n, 0),
                // The application broke its ring: netd posts them instead.
                Err(_) => (0, c.backlog.len()),
            };
            for d in c.backlog.drain(..posted) {
                self.stats.direct_returns += 1;
                self.out.push_back(returned(key, d.id, 0));
            }
            for d in c.backlog.drain(..undelivered) {
                self.out.push_back(returned(key, d.id, UNDELIVERED));
            }
        }
        work
    }

    /// Frames from the device into receive buffers, for netd.
    fn receive(&mut self, now: nagare_core::Instant, ready: &Ready) -> bool {
        let size = self.pool.buffer_size() as usize;
        let room = self.to_netd.free().unwrap_or(0) as usize;
        // Leave room for transmit buffers and returns coming back.
        let max = room.saturating_sub(self.out.len() + BATCH) / 2;
        if max == 0 {
            return false;
        }
        let steered = self.receive_queues(max.min(RX_BATCH), ready.queues, now);
        let max = max - steered;
        if max == 0 {
            return true;
        }
        if self.placed_rx {
            if let Some(work) = self.receive_placed(max.min(RX_BATCH), now) {
                return work || steered > 0;
            }
        }
        if self.direct_rx {
            if let Some(work) = self.receive_direct(max.min(RX_BATCH), now) {
                return work || steered > 0;
            }
        }
        if self.device.receive_batch(&self.heap, &mut self.rx, max.min(RX_BATCH), now).is_err() {
            return steered > 0;
        }
        let work = !self.rx.is_empty() || steered > 0;
        for frame in std::mem::take(&mut self.rx) {
            // The frame starts RX_HEADROOM bytes into its first buffer, so
            // the engine, given the buffer itself, can put headers in front
            // (a reply built in place).
            let end = RX_HEADROOM + frame.len();
            let pieces = end.div_ceil(size).max(1);
            if pieces > MAX_PIECES || self.pool.counts().0 < pieces as u32 {
                self.stats.rx_dropped += 1;
                continue;
            }
            let mut indices = [0u32; MAX_PIECES];
            for slot in indices.iter_mut().take(pieces) {
                *slot = self.pool.alloc().unwrap_or(u32::MAX);
            }
            let mut at = RX_HEADROOM;
            for chunk in frame.chunks() {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let (k, off) = (at / size, at % size);
                    let n = rest.len().min(size - off);
                    let Some(&index) = indices.get(k) else { break };
                    let _ = self.pool.write(index, off as u32, &rest[..n]);
                    rest = &rest[n..];
                    at += n;
                }
            }
            let total = frame.len();
            post_frame(&mut self.pool, &mut self.out, &mut self.stats, &indices[..pieces], total, frame.offload());
            self.stats.rx_bytes_copied += total as u64;
        }
        work
    }

    /// Frames read by the device straight into receive buffers (a TAP's
    /// `readv` into the region: no copy here); `None` if the device cannot.
    fn receive_direct(&mut self, max: usize, now: nagare_core::Instant) -> Option<bool> {
        let Driver { device, pool, rx_views, out, stats, .. } = self;
        let got = read_direct(device.as_mut(), pool, rx_views, out, stats, max, now);
        if got.is_none() {
            self.direct_rx = false;
        }
        got
    }

    /// Frames from a multi-queue TAP's extra queues: each queue's straight
    /// into buffers of its client's region (the kernel's copy is the only
    /// one), or into the driver region while the client has none to spare
    /// or the queue none. How many frames were read.
    fn receive_queues(&mut self, max: usize, ready: u32, now: nagare_core::Instant) -> usize {
        let Driver { queues, clients, pool, rx_views, out, stats, .. } = self;
        let Some(queues) = queues else { return 0 };
        let mut frames = 0;
        let count = queues.queues.len();
        let start = queues.next;
        queues.next = (start + 1) % count.max(1);
        for at in (0..count).map(|k| (start + k) % count) {
            let Some(q) = queues.queues.get_mut(at) else { continue };
            let was_draining = q.draining();
            // A queue the kernel says holds nothing reads empty: not read.
            let holds = at >= 32 || ready & (1 << at) != 0;
            let mut emptied = !holds;
            while holds && frames < max {
                let client = q.reader().and_then(|k| clients.get_mut(&k).map(|c| (k, c)));
                let got = match client {
                    Some((key, c)) if client_pieces(q.device.as_ref(), c).is_some_and(|n| c.rx_free.len() >= n) => {
                        read_steered(q.device.as_mut(), key, c, rx_views, out, stats, now)
                    }
                    _ => {
                        // Out of driver buffers, a read that finds nothing
                        // says nothing of the queue being empty.
                        if (pool.counts().0 as usize) < direct_pieces(q.device.as_ref(), pool) {
                            break;
                        }
                        read_direct(q.device.as_mut(), pool, rx_views, out, stats, 1, now).filter(|&w| w)
                    }
                };
                match got {
                    Some(_) => {
                        frames += 1;
                        if q.draining() && q.drained_one() {
                            emptied = true;
                            break;
                        }
                    }
                    None => {
                        emptied = true;
                        break;
                    }
                }
            }
            if was_draining && emptied && queues.drained(at).is_err() {
                stats.bad_messages += 1;
            }
        }
        frames
    }

    /// Frames the device shows before copying them (a VNI slot): those
    /// for a steered port go straight into a buffer of the client that owns
    /// it, the others into receive buffers of the driver region; one copy
    /// either way, the device's. `None` if the device cannot.
    fn receive_placed(&mut self, max: usize, now: nagare_core::Instant) -> Option<bool> {
        let Driver { device, pool, clients, steer, out, stats, local, .. } = self;
        let local = *local;
        let size = pool.buffer_size() as usize;
        let mut place = |frame: &dyn FrameInPlace| {
            let len = frame.len();
            let mut head = [0u8; HEAD_LEN];
            let n = len.min(HEAD_LEN);
            // Only frames sent to netd itself: a VNI floods frames for
            // other stations to every port.
            let flow = if frame.copy_out(0, &mut head[..n]) { flow_of(&head[..n]) } else { None }
                .filter(|_| local.is_some_and(|(mac, ip, ip6)| is_for(&head[..n], mac, ip, &ip6)));
            let key = flow.and_then(|f| steer.get(&(f.proto, f.port)).copied());
            if let Some((key, c)) = key.and_then(|k| clients.get_mut(&k).map(|c| (k, c))) {
                // One client buffer, or several in a row for a frame
                // larger than one (a super-segment), as a steered read.
                let csize = c.region.layout().config.buffer_size as usize;
                let pieces = if csize > RX_HEADROOM { (RX_HEADROOM + len).div_ceil(csize) } else { usize::MAX };
                if pieces <= MAX_PIECES && c.rx_free.len() >= pieces {
                    let first = c.rx_free.len() - pieces;
                    let mut taken = [0u32; MAX_PIECES];
                    for (slot, index) in taken.iter_mut().zip(c.rx_free.drain(first..)) {
                        *slot = index;
                    }
                    let indices = &taken[..pieces];
                    // Piece k holds frame bytes [k * csize - RX_HEADROOM, ...)
                    // (the first from RX_HEADROOM into its buffer).
                    let range = |k: usize| {
                        let start = (k * csize).saturating_sub(RX_HEADROOM);
                        (start, ((k + 1) * csize - RX_HEADROOM).min(len))
                    };
                    let copied = indices.iter().enumerate().all(|(k, &index)| {
                        let offset = if k == 0 { RX_HEADROOM } else { 0 };
                        let (start, end) = range(k);
                        c.region.shared_bytes(index, offset as u32, (end - start) as u32).is_ok_and(|mut bytes| {
                            // SAFETY: a buffer netd handed us for this
                            // client: nobody in this process uses it; the
                            // client writing it spoils only its own frame
                            // (netd parses its own copy of the headers).
                            frame.copy_out(start, unsafe { bytes.as_mut_slice() })
                        })
                    });
                    if copied {
                        for (k, &index) in indices.iter().enumerate() {
                            let (start, end) = range(k);
                            out.push_back(Descriptor {
                                kind: RX_CLIENT_PIECE,
                                flags: if k + 1 < pieces { MORE } else { 0 },
                                buffer: index,
                                offset: if k == 0 { RX_HEADROOM as u32 } else { 0 },
                                len: (end - start) as u32,
                                aux: [if k == 0 { offload_word(frame.offload()) } else { 0 }, key, 0, 0],
                                ..Default::default()
                            });
                        }
                        stats.rx_frames += 1;
                        stats.rx_steered += 1;
                        return;
                    }
                    c.rx_free.extend_from_slice(indices);
                }
            }
            // Not steered (or no buffer of its client left): into ours.
            let pieces = (RX_HEADROOM + len).div_ceil(size).max(1);
            if pieces > MAX_PIECES || (pool.counts().0 as usize) < pieces {
                stats.rx_dropped += 1;
                return;
            }
            let mut indices = [0u32; MAX_PIECES];
            let mut ok = true;
            for (k, slot) in indices.iter_mut().take(pieces).enumerate() {
                *slot = pool.alloc().unwrap_or(u32::MAX);
                let start = if k == 0 { 0 } else { k * size - RX_HEADROOM };
                let end = ((k + 1) * size - RX_HEADROOM).min(len);
                let offset = if k == 0 { RX_HEADROOM as u32 } else { 0 };
                ok &= pool.shared(*slot, offset, (end - start) as u32).is_ok_and(|mut bytes| {
                    // SAFETY: just allocated: ours alone.
                    frame.copy_out(start, unsafe { bytes.as_mut_slice() })
                });
            }
            if !ok {
                for &index in &indices[..pieces] {
                    let _ = pool.release(index);
                }
                stats.rx_dropped += 1;
                return;
            }
            post_frame(pool, out, stats, &indices[..pieces], len, frame.offload());
        };
        match device.receive_placed(max, now, &mut place) {
            Ok(n) => Some(n > 0),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                self.placed_rx = false;
                None
            }
            Err(_) => Some(false),
        }
    }

    /// Posts what is waiting for netd.
    fn flush(&mut self) -> io::Result<bool> {
        if self.out.is_empty() {
            return Ok(false);
        }
        self.out.make_contiguous();
        let (a, _) = self.out.as_slices();
        let n = self.notifier.push_batch(&mut self.to_netd, a).map_err(io::Error::other)?;
        self.out.drain(..n);
        Ok(n > 0)
    }

    /// What holds input now, from one `poll` that does not wait: the
    /// control socket and each extra queue (bit k for queue k), one system
    /// call instead of a read of each that finds nothing; everything where
    /// the kernel will not say (a queue without a descriptor, a failed
    /// `poll`). The device itself is read every turn: its descriptor need
    /// not be readable while it holds frames (a VNI port's doorbell rings
    /// only for a sleeper; an impaired link holds frames back).
    fn ready(&self) -> Ready {
        let pfd = |fd: i32| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let mut fds = [pfd(-1); 1 + MAX_RX_QUEUES];
        fds[0] = pfd(self.control.as_raw_fd());
        let mut count = 1;
        if let Some(q) = &self.queues {
            for (slot, q) in fds[1..].iter_mut().zip(&q.queues) {
                *slot = pfd(q.device.raw_fd().unwrap_or(-1));
                count += 1;
            }
        }
        // SAFETY: `fds` is a live array of pollfd of at least `count`
        // entries; a zero timeout does not block.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), count as libc::nfds_t, 0) };
        if rc < 0 {
            return Ready { control: true, queues: u32::MAX };
        }
        // A descriptor poll skips (-1) is read every turn; a hang-up or an
        // error counts as input, for the read to find it.
        let held = |f: &libc::pollfd| f.fd < 0 || f.revents != 0;
        let polled = fds[1..count].iter().enumerate().filter(|(_, f)| held(f)).fold(0u32, |bits, (k, _)| bits | 1 << k);
        // Queues past those polled (none while netd passes at most
        // `MAX_RX_QUEUES`) are read every turn.
        let unpolled = u32::MAX.checked_shl((count - 1) as u32).unwrap_or(0);
        Ready { control: held(&fds[0]), queues: polled | unpolled }
    }

    /// Sleeps until netd, the device or the control socket needs us.
    fn sleep(&mut self) -> io::Result<()> {
        if self.waiter.prepare_sleep(&mut self.from_netd).map_err(io::Error::other)?.is_some() {
            return Ok(());
        }
        let busy = !self.tx.is_empty()
            || !self.out.is_empty()
            || !self.steer_delayed.is_empty()
            || self.clients.values().any(|c| !c.backlog.is_empty());
        let now = self.clock.now();
        let mut timeout = self.device.poll_at().map_or(MAX_SLEEP, |t| t.saturating_since(now)).min(MAX_SLEEP);
        if busy {
            timeout = timeout.min(Duration::from_millis(1));
        }
        let pfd = |fd: i32| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // Unused slots have descriptor -1, which poll skips.
        let mut fds = [pfd(-1); 3 + MAX_RX_QUEUES];
        fds[0] = pfd(self.waiter.fd().as_raw_fd());
        fds[1] = pfd(self.device.raw_fd().unwrap_or(-1));
        fds[2] = pfd(self.control.as_raw_fd());
        if let Some(q) = &self.queues {
            for (slot, fd) in fds[3..].iter_mut().zip(q.fds()) {
                *slot = pfd(fd);
            }
        }
        let millis = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if fds[0].revents != 0 {
            self.waiter.woke(&self.from_netd)?;
        } else {
            self.waiter.set_polling(&self.from_netd);
        }
        Ok(())
    }
}

/// Up to `max` frames read by `device` straight into receive buffers of
/// the driver region (a TAP's `readv`: no copy here); whether any came, or
/// `None` if the device cannot.
fn read_direct(
    device: &mut dyn Device,
    pool: &mut Pool,
    rx_views: &mut Vec<nagare_ipc::SharedBytes>,
    out: &mut VecDeque<Descriptor>,
    stats: &mut DriverStats,
    max: usize,
    now: nagare_core::Instant,
) -> Option<bool> {
    let size = pool.buffer_size() as usize;
    let pieces = direct_pieces(device, pool);
    let mut work = false;
    for _ in 0..max {
        if (pool.counts().0 as usize) < pieces {
            break;
        }
        let mut indices = [0u32; MAX_PIECES];
        let mut allocated = 0;
        rx_views.clear();
        for (k, slot) in indices.iter_mut().take(pieces).enumerate() {
            let Some(index) = pool.alloc() else { break };
            *slot = index;
            allocated += 1;
            let offset = if k == 0 { RX_HEADROOM as u32 } else { 0 };
            if let Ok(v) = pool.shared(index, offset, size as u32 - offset) {
                rx_views.push(v);
            }
        }
        let got = if rx_views.len() == pieces {
            // SAFETY: the buffers were just allocated: ours alone, netd
            // does not touch them, and each view is of a different buffer.
            unsafe { read_into(device, rx_views, now) }
        } else {
            Ok(None)
        };
        rx_views.clear();
        let indices = &indices[..allocated];
        let (len, offload) = match got {
            Ok(Some((len, offload))) if len > 0 => (len, offload),
            other => {
                for &index in indices {
                    let _ = pool.release(index);
                }
                match other {
                    Err(e) if e.kind() == io::ErrorKind::Unsupported => return None,
                    Ok(Some(_)) => {
                        stats.rx_dropped += 1;
                        work = true;
                        continue;
                    }
                    _ => break,
                }
            }
        };
        work = true;
        let used = (RX_HEADROOM + len).div_ceil(size);
        for &index in &indices[used.min(indices.len())..] {
            let _ = pool.release(index);
        }
        post_frame(pool, out, stats, &indices[..used.min(indices.len())], len, offload);
    }
    Some(work)
}

/// `device.receive_into` the buffers `views` show (at most
/// [`MAX_PIECES`]).
///
/// # Safety
/// Each view must be of a different buffer that nothing else in this
/// process reads or writes until the call returns.
unsafe fn read_into(
    device: &mut dyn Device,
    views: &mut [nagare_ipc::SharedBytes],
    now: nagare_core::Instant,
) -> io::Result<Option<(usize, Offload)>> {
    let mut slices: [&mut [u8]; MAX_PIECES] = Default::default();
    let n = views.len().min(MAX_PIECES);
    for (slot, v) in slices.iter_mut().zip(views.iter_mut()) {
        // SAFETY: the caller's promise, buffer by buffer.
        *slot = unsafe { v.as_mut_slice() };
    }
    device.receive_into(&mut slices[..n], now)
}

/// Room for the largest frame `device` may deliver: a super-segment when
/// it does segmentation offload.
fn largest_frame(device: &dyn Device) -> usize {
    let caps = device.capabilities();
    if caps.tx_offloads.tcp_segmentation > 0 {
        65535 + 18
    } else {
        caps.mtu + 18
    }
}

/// Buffers of the driver region one read from `device` takes.
fn direct_pieces(device: &dyn Device, pool: &Pool) -> usize {
    (RX_HEADROOM + largest_frame(device)).div_ceil(pool.buffer_size().max(1) as usize).clamp(1, MAX_PIECES)
}

/// Buffers of client `c`'s region one read from `device` needs; `None`
/// if [`MAX_PIECES`] of them cannot hold its largest frame (its frames
/// then go into the driver region).
fn client_pieces(device: &dyn Device, c: &ClientPort) -> Option<usize> {
    pieces_of(device, c.region.layout().config.buffer_size as usize)
}

/// Buffers of `size` bytes one read from `device` needs (the first after
/// the receive headroom); `None` if [`MAX_PIECES`] of them cannot hold its
/// largest frame.
pub(crate) fn pieces_of(device: &dyn Device, size: usize) -> Option<usize> {
    if size <= RX_HEADROOM {
        return None;
    }
    let pieces = (RX_HEADROOM + largest_frame(device)).div_ceil(size).max(1);
    (pieces <= MAX_PIECES).then_some(pieces)
}

/// One frame read by `device` (a queue of client `key`'s) straight into
/// buffers netd gave us in the client's region, handed to netd as
/// `RX_CLIENT_PIECE`s: `Some(true)` a frame, `Some(false)` one dropped,
/// `None` nothing to read. The caller made sure enough buffers are free.
fn read_steered(
    device: &mut dyn Device,
    key: u64,
    c: &mut ClientPort,
    views: &mut Vec<nagare_ipc::SharedBytes>,
    out: &mut VecDeque<Descriptor>,
    stats: &mut DriverStats,
    now: nagare_core::Instant,
) -> Option<bool> {
    let size = c.region.layout().config.buffer_size as usize;
    let pieces = client_pieces(device, c)?;
    let first = c.rx_free.len().checked_sub(pieces)?;
    let mut taken = [0u32; MAX_PIECES];
    for (slot, index) in taken.iter_mut().zip(c.rx_free.drain(first..)) {
        *slot = index;
    }
    let indices = &taken[..pieces];
    views.clear();
    for (k, &index) in indices.iter().enumerate() {
        let offset = if k == 0 { RX_HEADROOM } else { 0 };
        match c.region.shared_bytes(index, offset as u32, (size - offset) as u32) {
            Ok(v) => views.push(v),
            Err(_) => break,
        }
    }
    let got = if views.len() == pieces {
        // SAFETY: buffers netd handed us for this client, each once: nobody
        // in this process uses them; the client writing them spoils only
        // its own frame (netd parses its own copy of the headers).
        unsafe { read_into(device, views, now) }
    } else {
        Ok(None)
    };
    views.clear();
    let (len, offload) = match got {
        Ok(Some((len, offload))) if len > 0 => (len, offload),
        other => {
            c.rx_free.extend_from_slice(indices);
            return match other {
                Ok(Some(_)) => {
                    stats.rx_dropped += 1;
                    Some(false)
                }
                _ => None,
            };
        }
    };
    let end = RX_HEADROOM + len;
    let used = end.div_ceil(size).clamp(1, indices.len());
    c.rx_free.extend_from_slice(&indices[used..]);
    for (k, &index) in indices[..used].iter().enumerate() {
        let offset = if k == 0 { RX_HEADROOM } else { 0 };
        out.push_back(Descriptor {
            kind: RX_CLIENT_PIECE,
            flags: if k + 1 < used { MORE } else { 0 },
            buffer: index,
            offset: offset as u32,
            len: (end.min((k + 1) * size) - k * size - offset) as u32,
            aux: [if k == 0 { offload_word(offload) } else { 0 }, key, 0, 0],
            ..Default::default()
        });
    }
    stats.rx_frames += 1;
    stats.rx_steered += 1;
    Some(true)
}

/// Hands netd a received frame of `len` bytes filling `indices` (starting
/// `RX_HEADROOM` into the first), one `RX_PIECE` a buffer.
fn post_frame(
    pool: &mut Pool,
    out: &mut VecDeque<Descriptor>,
    stats: &mut DriverStats,
    indices: &[u32],
    len: usize,
    offload: Offload,
) {
    let size = pool.buffer_size() as usize;
    let end = RX_HEADROOM + len;
    for (k, &index) in indices.iter().enumerate() {
        let offset = if k == 0 { RX_HEADROOM } else { 0 };
        let piece = end.min((k + 1) * size) - k * size - offset;
        let _ = pool.give(index);
        out.push_back(Descriptor {
            kind: RX_PIECE,
            flags: if k + 1 < indices.len() { MORE } else { 0 },
            buffer: index,
            offset: offset as u32,
            len: piece as u32,
            aux: [if k == 0 { offload_word(offload) } else { 0 }, 0, 0, 0],
            ..Default::default()
        });
    }
    stats.rx_frames += 1;
}

/// A `RETURNED` for client `key`'s request `id` (`how`: 0 posted, or
/// [`UNDELIVERED`]).
fn returned(key: u64, id: u64, how: u64) -> Descriptor {
    Descriptor { kind: RETURNED, id, aux: [how, key, 0, 0], ..Default::default() }
}

fn attach_client(memfd: OwnedFd, efd: OwnedFd, shape: (u32, u32, u32)) -> Result<ClientPort, String> {
    let region = Region::attach_delegate(memfd).map_err(|e| e.to_string())?;
    let c = region.layout().config;
    if (c.rings, c.ring_slots, c.buffers, c.buffer_size) != (3, shape.0, shape.1, shape.2) {
        // A header the client rewrote (consistently, or attach would have
        // refused it): its traffic through the driver goes nowhere.
        return Err(String::from("region shape differs from netd's"));
    }
    // Carries on after a driver that died, whose head the application saw.
    let completions = region.resume_producer(2).map_err(|e| e.to_string())?;
    Ok(ClientPort { region, completions, notifier: Notifier::new(efd), backlog: VecDeque::new(), rx_free: Vec::new() })
}

/// Waits up to `timeout` for `fd` to become readable; the number of ready
/// descriptors (0 or 1).
pub(crate) fn poll_in(fd: i32, timeout: Duration) -> io::Result<i32> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: one live pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, millis) };
        if rc >= 0 {
            return Ok(rc);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
