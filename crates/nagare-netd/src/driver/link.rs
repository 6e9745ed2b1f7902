//! netd's side of the driver: starts it (a process or a thread, through a
//! launcher the caller provides), feeds its transmit ring, takes its
//! receive ring, and starts it again when it dies.
//!
//! The engine keeps all protocol state, so a driver's death loses only the
//! frames in flight: TCP retransmits them once the new driver is up.
//! Completions the dead driver was to post (`RETURN`s it never confirmed)
//! are posted by netd instead; an application may then see one twice and
//! drops the second (it no longer waits for that request id).

use super::messages::{
    control_pair, offload_of, offload_word, Control, CONTROL_LEN, KEY, MAX_PIECES, MORE, RETURN, RETURNED,
    RX_CLIENT_FREE, RX_CLIENT_PIECE, RX_FREE, RX_PIECE, STAGES, STEERED, TRACE_AT, TX_CLIENT_PIECE, TX_DONE, TX_PIECE,
    UNDELIVERED,
};
use super::run::poll_in;
use crate::lending::Lending;
use crate::steering::{Steered, Steering};
use crate::view::{Release, View};
use nagare_core::buf::{BufferPool, PacketBuf, TxOffloads};
use nagare_core::{Capabilities, Instant};
use nagare_dev::{Device, DeviceStats, PortSteering, RX_HEADROOM};
use nagare_ipc::fdpass::{recv_with_fds, send_with_fds};
use nagare_ipc::{eventfd, Consumer, Descriptor, Notifier, Pool, Producer, Region, RegionConfig, Waiter};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

/// Slots of each driver-region ring.
const RING_SLOTS: u32 = 1024;
/// Buffers of the driver region: half netd's (transmit), half the driver's
/// (receive).
const BUFFERS: u32 = 512;
/// Size of one driver-region buffer.
const BUFFER_SIZE: u32 = 16384;
/// How long a new driver has to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// Least time between two starts, so a driver that dies at once does not
/// make netd spin.
const RESTART_BACKOFF: Duration = Duration::from_millis(200);
/// How long a stopping driver has to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// Receive buffers of the driver the engine may hold at once (of 256):
/// beyond it frames are copied, so a slow reader's queue cannot starve the
/// driver of buffers.
const RX_LEND_LIMIT: usize = 128;
/// Receive buffers of one client's region the driver holds at once (the
/// rest of netd's pool there waits for the engine and the application).
const RX_CLIENT_AT_DRIVER: usize = 48;

/// A receive buffer of the driver region lent to the engine: back to the
/// driver when the engine lets go (if that driver still runs).
struct LentRx {
    index: u32,
    generation: u64,
    released: Rc<std::cell::RefCell<Vec<(u64, u32)>>>,
}

impl Release for LentRx {
    fn release(&mut self) {
        self.released.borrow_mut().push((self.generation, self.index));
    }
}

/// A running driver.
pub enum DriverHandle {
    /// `nagare driver`, a process of its own (split placement).
    Process(std::process::Child),
    /// A thread of netd (single placement).
    Thread(std::thread::JoinHandle<()>),
}

/// Starts a driver on the given end of its control socket.
pub type Launcher = Box<dyn FnMut(OwnedFd) -> io::Result<DriverHandle>>;

/// Counters of netd's side of the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverLinkStats {
    /// Drivers started (the first and every restart).
    pub starts: u64,
    /// Drivers found dead.
    pub deaths: u64,
    /// Frames handed to the driver.
    pub tx_frames: u64,
    /// Bytes of them copied into the driver region (headers, TCP data).
    pub tx_bytes_copied: u64,
    /// Bytes of them named in place in an application's region.
    pub tx_bytes_in_place: u64,
    /// Frames dropped while no driver was running.
    pub tx_dropped_down: u64,
    /// Frames dropped for having too many pieces.
    pub tx_dropped_bad: u64,
    /// Frames received from the driver.
    pub rx_frames: u64,
    /// Bytes copied out of the driver region into the engine.
    pub rx_bytes_copied: u64,
    /// Bytes received in place: the driver's buffer, or a steered frame's
    /// payload in its application's region, lent to the engine.
    pub rx_bytes_in_place: u64,
    /// Frames the driver steered into an application's region.
    pub rx_steered: u64,
    /// Steered frames refused: their headers named another client's port
    /// (rewritten by the application), or junk.
    pub rx_steer_refused: u64,
    /// Receive descriptors that made no sense (dropped).
    pub rx_bad: u64,
    /// `RETURN`s posted.
    pub returns_posted: u64,
    /// Of those, confirmed by the driver (completions it posted directly).
    pub returns_confirmed: u64,
    /// Completions netd posted itself: their driver died, or did not know
    /// the client.
    pub returns_orphaned: u64,
    /// Queues of a multi-queue TAP beside the first, each carrying one
    /// client's steered frames (0: not a multi-queue TAP, or no steering).
    pub tap_queues: u64,
}

struct Incarnation {
    handle: DriverHandle,
    pid: u32,
    control: OwnedFd,
    _region: Region,
    to_driver: Producer,
    from_driver: Consumer,
    pool: Pool,
    notifier: Notifier,
    waiter: Waiter,
    /// Steering changes not sent yet (the control socket was full).
    control_backlog: Vec<Control>,
    /// `RETURN`s not yet confirmed: (client key, request id) → completion.
    returns: HashMap<(u64, u64), Descriptor>,
    /// Clients the driver confirmed it mapped, and those it could not.
    attached: std::collections::HashSet<u64>,
    refused: std::collections::HashSet<u64>,
    /// Clients sent to the driver and not yet answered: while there are
    /// any, every receive looks at the control socket, so a new client's
    /// receive buffers reach the driver before its first frames do, however
    /// long netd polls between sleeps.
    attaching: std::collections::HashSet<u64>,
    /// The control socket ended (or broke the protocol) while read outside
    /// `check`, which then treats the driver as dead.
    control_closed: bool,
    out: VecDeque<Descriptor>,
}

/// A driver started and not yet ready.
struct Starting {
    handle: DriverHandle,
    control: OwnedFd,
    region: Region,
    netd_efd: OwnedFd,
    driver_efd: OwnedFd,
    deadline: std::time::Instant,
}

/// The driver's `READY`: pid, MTU, offloads.
fn read_ready(s: &Starting) -> io::Result<(u32, u32, u64)> {
    let mut buf = [0u8; CONTROL_LEN];
    let got = recv_with_fds(s.control.as_fd(), &mut buf, libc::MSG_DONTWAIT)?;
    match Control::decode(&buf[..got.len]) {
        Some(Control::Ready { pid, mtu, offloads }) if got.fds.is_empty() => Ok((pid, mtu, offloads)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "the driver did not start (no ready message)")),
    }
}

/// netd's link to its driver, a [`Device`] to the engine.
pub struct DriverLink {
    launcher: Launcher,
    device_fd: Option<OwnedFd>,
    /// A multi-queue TAP's queues beside `device_fd`, one per client
    /// (passed to each driver with a freshly loaded steering program).
    rx_queues: Vec<OwnedFd>,
    /// The steering program the running driver's map belongs to.
    port_steering: Option<PortSteering>,
    lending: Rc<Lending>,
    steering: Rc<Steering>,
    up: Option<Incarnation>,
    /// A new driver that has not said it is ready yet.
    starting: Option<Starting>,
    generation: u64,
    mtu: usize,
    offloads: TxOffloads,
    last_start: std::time::Instant,
    stats: DriverLinkStats,
    device_stats: DeviceStats,
    orphans: Vec<(u64, Descriptor)>,
    /// The running driver's counters, as it last reported them.
    driver_counters: super::DriverStats,
    rx_partial: Vec<u8>,
    rx_offload: u64,
    rx_pieces: usize,
    /// The steered frame being put together: its pieces so far, its first
    /// descriptor's aux words, whether it broke the rules.
    rx_client_pieces: Vec<(u32, u32, u32)>,
    rx_client_first: [u64; 4],
    rx_client_bad: bool,
    /// Receive buffers the engine holds, and those it let go of.
    rx_lent: usize,
    rx_released: Rc<std::cell::RefCell<Vec<(u64, u32)>>>,
}

impl DriverLink {
    /// Starts the first driver with `launcher`; `device_fd` (a TAP's) is
    /// passed to every driver started, and so are `rx_queues`, more queues
    /// of a multi-queue TAP (at most [`super::MAX_RX_QUEUES`]), with a
    /// steering program that puts each client's ports on a queue of its
    /// own. Where that program cannot be loaded (no `CAP_BPF`) the queues
    /// are closed, and every frame is read from the first. The device's
    /// MTU and offloads are then known ([`Device::capabilities`]), for the
    /// engine's interface.
    pub fn start(
        launcher: Launcher,
        device_fd: Option<OwnedFd>,
        mut rx_queues: Vec<OwnedFd>,
    ) -> io::Result<DriverLink> {
        let lending = Rc::new(Lending::default());
        if device_fd.is_none() || rx_queues.len() > super::MAX_RX_QUEUES {
            rx_queues.clear();
        }
        let mut link = DriverLink {
            launcher,
            device_fd,
            rx_queues,
            port_steering: None,
            lending,
            steering: Rc::new(Steering::new(true)),
            up: None,
            starting: None,
            generation: 0,
            mtu: 0,
            offloads: TxOffloads::NONE,
            last_start: std::time::Instant::now(),
            stats: DriverLinkStats::default(),
            device_stats: DeviceStats::default(),
            orphans: Vec::new(),
            driver_counters: super::DriverStats::default(),
            rx_partial: Vec::new(),
            rx_offload: 0,
            rx_pieces: 0,
            rx_client_pieces: Vec::new(),
            rx_client_first: [0; 4],
            rx_client_bad: false,
            rx_lent: 0,
            rx_released: Rc::default(),
        };
        let (inc, mtu, offloads) = link.launch()?;
        link.mtu = mtu;
        link.offloads = offloads;
        link.up = Some(inc);
        Ok(link)
    }

    /// Starts a driver and waits (at most `READY_TIMEOUT`) for it: the
    /// first start, whose MTU and offloads the engine is built with.
    fn launch(&mut self) -> io::Result<(Incarnation, usize, TxOffloads)> {
        let starting = self.begin()?;
        let ready = match poll_in(starting.control.as_raw_fd(), READY_TIMEOUT) {
            Ok(0) => Err(io::Error::new(io::ErrorKind::TimedOut, "the driver did not say it was ready")),
            Ok(_) => read_ready(&starting),
            Err(e) => Err(e),
        };
        match ready {
            Ok(r) => self.finish(starting, r),
            Err(e) => {
                stop_driver(starting.handle, starting.control, Duration::ZERO);
                Err(e)
            }
        }
    }

    /// Starts a driver process or thread and sends it its hello; it says
    /// it is ready later (`finish`).
    fn begin(&mut self) -> io::Result<Starting> {
        self.last_start = std::time::Instant::now();
        self.stats.starts += 1;
        let (ours, theirs) = control_pair()?;
        let config = RegionConfig {
            rings: 2,
            attacher_produces: 0b10,
            ring_slots: RING_SLOTS,
            buffers: BUFFERS,
            buffer_size: BUFFER_SIZE,
            creator_buffers: BUFFERS / 2,
        };
        let region = Region::create("nagare-driver", config).map_err(io::Error::other)?;
        let netd_efd = eventfd()?;
        let driver_efd = eventfd()?;
        let handle = (self.launcher)(theirs)?;
        let mut fds = vec![region.fd(), netd_efd.as_fd(), driver_efd.as_fd()];
        if let Some(d) = &self.device_fd {
            fds.push(d.as_fd());
        }
        if let Err(e) = send_with_fds(ours.as_fd(), &Control::Hello.encode(), &fds) {
            stop_driver(handle, ours, Duration::ZERO);
            return Err(e);
        }
        self.pass_rx_queues(&ours);
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        Ok(Starting { handle, control: ours, region, netd_efd, driver_efd, deadline })
    }

    /// Loads a fresh steering program into the TAP (an empty port map: the
    /// new driver writes the ports netd steers) and passes the map and the
    /// extra queues to the driver. A failure closes the queues for good,
    /// since frames the kernel put on a queue nobody reads would be lost.
    fn pass_rx_queues(&mut self, control: &OwnedFd) {
        let Some(tap) = &self.device_fd else { return };
        if self.rx_queues.is_empty() {
            return;
        }
        let steering = PortSteering::load().and_then(|s| s.attach(tap.as_fd()).map(|()| s));
        let sent = steering.and_then(|s| {
            let mut fds = vec![s.map().fd()];
            fds.extend(self.rx_queues.iter().map(|q| q.as_fd()));
            let m = Control::RxQueues { count: self.rx_queues.len() as u32 };
            send_with_fds(control.as_fd(), &m.encode(), &fds)?;
            Ok(s)
        });
        match sent {
            Ok(s) => {
                self.port_steering = Some(s);
                self.stats.tap_queues = self.rx_queues.len() as u64;
            }
            Err(e) => {
                log::warn!("receive steering on the TAP is off ({e}); received payload is copied once");
                self.rx_queues.clear();
                self.port_steering = None;
                self.stats.tap_queues = 0;
            }
        }
    }

    /// The driver said it is ready: its incarnation, MTU and offloads.
    fn finish(&mut self, s: Starting, ready: (u32, u32, u64)) -> io::Result<(Incarnation, usize, TxOffloads)> {
        let (pid, mtu, offloads) = ready;
        let Starting { handle, control, region, netd_efd, driver_efd, .. } = s;
        let ends = (|| -> io::Result<_> {
            crate::os::set_nonblocking(control.as_raw_fd())?;
            let to_driver = region.producer(0).map_err(io::Error::other)?;
            let from_driver = region.consumer(1).map_err(io::Error::other)?;
            let pool = region.pool().map_err(io::Error::other)?;
            Ok((to_driver, from_driver, pool))
        })();
        let (to_driver, from_driver, pool) = match ends {
            Ok(e) => e,
            Err(e) => {
                stop_driver(handle, control, Duration::ZERO);
                return Err(e);
            }
        };
        // The driver's word carries checksum and TCP segmentation: UDP
        // super-frames are cut by the engine before they reach a driver.
        let offloads = TxOffloads {
            checksum: offloads & 1 != 0,
            tcp_segmentation: (offloads >> 16) as usize,
            udp_segmentation: 0,
        };
        self.generation += 1;
        let inc = Incarnation {
            handle,
            pid,
            control,
            to_driver,
            from_driver,
            pool,
            _region: region,
            notifier: Notifier::new(driver_efd),
            waiter: Waiter::new(netd_efd, Duration::ZERO),
            returns: HashMap::new(),
            control_backlog: Vec::new(),
            attached: Default::default(),
            refused: Default::default(),
            attaching: Default::default(),
            control_closed: false,
            out: VecDeque::new(),
        };
        Ok((inc, mtu as usize, offloads))
    }

    pub(crate) fn lending(&self) -> Rc<Lending> {
        self.lending.clone()
    }

    pub(crate) fn steering(&self) -> Rc<Steering> {
        self.steering.clone()
    }

    /// The generation of the running driver, if one runs.
    pub(crate) fn generation(&self) -> Option<u64> {
        self.up.as_ref().map(|_| self.generation)
    }

    /// The running driver's process id (netd's own in single placement).
    pub fn pid(&self) -> Option<u32> {
        self.up.as_ref().map(|i| i.pid)
    }

    /// The counters.
    pub fn link_stats(&self) -> DriverLinkStats {
        self.stats
    }

    /// The running driver's own counters, as it last reported them.
    pub fn driver_counters(&self) -> super::DriverStats {
        self.driver_counters
    }

    /// Tells the driver about client `key`: its region (of `shape`) and
    /// eventfd.
    pub(crate) fn attach(&mut self, key: u64, region: BorrowedFd<'_>, shape: RegionConfig, wakeup: BorrowedFd<'_>) {
        if let Some(inc) = &mut self.up {
            inc.attaching.insert(key);
            let m = Control::Attach {
                key,
                ring_slots: shape.ring_slots,
                buffers: shape.buffers,
                buffer_size: shape.buffer_size,
            };
            // A failure shows as the driver's death (handled by `check`), or
            // as a RETURN the driver cannot deliver (posted by netd).
            let _ = send_with_fds(inc.control.as_fd(), &m.encode(), &[region, wakeup]);
        }
    }

    /// Tells the driver client `key` is gone.
    pub(crate) fn detach(&mut self, key: u64) {
        if let Some(inc) = &mut self.up {
            inc.attached.remove(&key);
            inc.refused.remove(&key);
            inc.attaching.remove(&key);
            // In order behind whatever waits (a full control socket keeps
            // it for the next turn, rather than losing it).
            inc.control_backlog.push(Control::Detach { key });
        }
    }

    /// Queues `completion` for client `key` behind every frame handed over
    /// so far; the driver posts it (direct return). False if no driver
    /// runs: netd posts it itself.
    pub(crate) fn post_return(&mut self, key: u64, completion: Descriptor) -> bool {
        let Some(inc) = self.up.as_mut() else { return false };
        let mut d = Descriptor {
            kind: RETURN,
            flags: completion.flags,
            id: completion.id,
            buffer: completion.buffer,
            offset: completion.offset,
            len: completion.len,
            status: completion.status,
            aux: [0; 4],
        };
        d.aux[STAGES] = completion.aux[1];
        d.aux[KEY] = key;
        d.aux[2] = u64::from(completion.kind);
        d.aux[3] = completion.aux[0];
        inc.returns.insert((key, completion.id), completion);
        inc.out.push_back(d);
        self.stats.returns_posted += 1;
        flush(inc);
        true
    }

    /// Completions netd must post itself (their driver died).
    pub(crate) fn take_orphans(&mut self) -> Vec<(u64, Descriptor)> {
        std::mem::take(&mut self.orphans)
    }

    /// Notices a dead driver and starts a new one (at most once per
    /// backoff period), attaching every client in `clients`. Returns
    /// whether anything changed.
    pub(crate) fn check<'a>(
        &mut self,
        clients: impl Iterator<Item = (u64, BorrowedFd<'a>, RegionConfig, BorrowedFd<'a>)>,
    ) -> bool {
        let mut changed = false;
        if let Some(inc) = &mut self.up {
            let exited = match &mut inc.handle {
                DriverHandle::Process(c) => !matches!(c.try_wait(), Ok(None)),
                DriverHandle::Thread(t) => t.is_finished(),
            };
            if exited
                || inc.control_closed
                || read_control(
                    inc.control.as_fd(),
                    &mut self.driver_counters,
                    &mut inc.attached,
                    &mut inc.refused,
                    &self.steering,
                )
            {
                if let Some(inc) = self.up.take() {
                    let Incarnation { handle, control, returns, pid, .. } = inc;
                    // Ended before anything it held is netd's again: a
                    // thread declared dead may still be running.
                    stop_driver(handle, control, Duration::ZERO);
                    self.stats.deaths += 1;
                    self.stats.returns_orphaned += returns.len() as u64;
                    self.orphans.extend(returns.into_iter().map(|((key, _), c)| (key, c)));
                    log::warn!("driver (pid {pid}) died; starting another");
                }
                self.rx_partial.clear();
                self.rx_pieces = 0;
                self.rx_client_pieces.clear();
                self.rx_client_bad = false;
                self.steering.driver_lost();
                changed = true;
            }
        }
        if self.up.is_none() {
            changed |= self.restart(clients);
        }
        changed
    }

    /// Moves a restart on, without waiting: starts a driver (at most once
    /// per backoff period), or takes its ready message, or gives up on one
    /// that did not send it in time.
    fn restart<'a>(
        &mut self,
        clients: impl Iterator<Item = (u64, BorrowedFd<'a>, RegionConfig, BorrowedFd<'a>)>,
    ) -> bool {
        let Some(s) = self.starting.take() else {
            if self.last_start.elapsed() >= RESTART_BACKOFF {
                match self.begin() {
                    Ok(s) => self.starting = Some(s),
                    Err(e) => log::warn!("starting the driver: {e}"),
                }
                return true;
            }
            return false;
        };
        match poll_in(s.control.as_raw_fd(), Duration::ZERO) {
            Ok(0) if std::time::Instant::now() < s.deadline => {
                self.starting = Some(s);
                return false;
            }
            Ok(0) => {
                log::warn!("the new driver did not say it was ready; starting another");
                stop_driver(s.handle, s.control, Duration::ZERO);
                return true;
            }
            Ok(_) => {}
            Err(e) => {
                log::warn!("starting the driver: {e}");
                stop_driver(s.handle, s.control, Duration::ZERO);
                return true;
            }
        }
        let started = read_ready(&s).and_then(|r| self.finish(s, r));
        match started {
            Ok((inc, mtu, _)) => {
                self.driver_counters = super::DriverStats::default();
                if mtu != self.mtu {
                    log::warn!("the new driver's MTU is {mtu}, not {}", self.mtu);
                }
                log::info!("driver started again (pid {})", inc.pid);
                self.up = Some(inc);
                for (key, region, shape, wakeup) in clients {
                    self.attach(key, region, shape, wakeup);
                }
                // The whole table, which supersedes the changes made
                // while no driver ran.
                if let Some(inc) = self.up.as_mut() {
                    let table = self.steering.table();
                    inc.out.extend(self.steering.descriptors(&table));
                }
            }
            Err(e) => log::warn!("starting the driver: {e}"),
        }
        true
    }

    /// Before netd sleeps: asks for a wake-up on the receive ring. True if
    /// something arrived meanwhile (do not sleep).
    pub(crate) fn prepare_sleep(&mut self) -> bool {
        match self.up.as_mut() {
            Some(inc) => !inc.out.is_empty() || !matches!(inc.waiter.prepare_sleep(&mut inc.from_driver), Ok(None)),
            None => false,
        }
    }

    /// The descriptors netd's sleep watches: the receive ring's eventfd
    /// and the control socket (hang-up: the driver died).
    pub(crate) fn sleep_fds(&self) -> [i32; 2] {
        match (&self.up, &self.starting) {
            (Some(inc), _) => [inc.waiter.fd().as_raw_fd(), inc.control.as_raw_fd()],
            // Its ready message wakes netd to take it.
            (None, Some(s)) => [-1, s.control.as_raw_fd()],
            (None, None) => [-1, -1],
        }
    }

    /// After netd's sleep; `woken`: the eventfd was readable.
    pub(crate) fn after_sleep(&mut self, woken: bool) {
        if let Some(inc) = self.up.as_mut() {
            if woken {
                let _ = inc.waiter.woke(&inc.from_driver);
            } else {
                inc.waiter.set_polling(&inc.from_driver);
            }
        }
    }

    /// Queues the steering changes made since the driver was last told,
    /// on ring 0: ahead of every frame queued after them.
    fn push_steering(&mut self) {
        if let Some(inc) = self.up.as_mut() {
            let changes = self.steering.take_updates();
            inc.out.extend(self.steering.descriptors(&changes));
        }
    }

    /// Keeps the driver's view of steering current: table changes, control
    /// messages waiting, and spare receive buffers of every client it has
    /// mapped.
    fn feed_steering(&mut self) {
        self.steering.settle();
        self.push_steering();
        let Some(inc) = self.up.as_mut() else { return };
        let mut sent = 0;
        for m in &inc.control_backlog {
            // Full: the rest waits for the next turn, in order.
            if send_with_fds(inc.control.as_fd(), &m.encode(), &[]).is_err() {
                break;
            }
            sent += 1;
        }
        inc.control_backlog.drain(..sent);
        if self.steering.take_spare_changed() {
            for &key in &inc.attached {
                for index in self.steering.to_post(key, RX_CLIENT_AT_DRIVER) {
                    let mut d = Descriptor { kind: RX_CLIENT_FREE, buffer: index, ..Default::default() };
                    d.aux[KEY] = key;
                    inc.out.push_back(d);
                }
            }
        }
    }

    /// Reads the driver's answers while a client's attach is unanswered.
    fn take_attach_answers(&mut self) {
        let Some(inc) = self.up.as_mut() else { return };
        if inc.attaching.is_empty() || inc.control_closed {
            return;
        }
        inc.control_closed = read_control(
            inc.control.as_fd(),
            &mut self.driver_counters,
            &mut inc.attached,
            &mut inc.refused,
            &self.steering,
        );
        let (attached, refused) = (&inc.attached, &inc.refused);
        inc.attaching.retain(|k| !attached.contains(k) && !refused.contains(k));
    }

    /// Hands receive buffers the engine let go of back to their driver
    /// (those of a driver that died went with its region).
    fn return_rx(&mut self) {
        let released: Vec<(u64, u32)> = std::mem::take(&mut *self.rx_released.borrow_mut());
        for (generation, index) in released {
            self.rx_lent = self.rx_lent.saturating_sub(1);
            if let (Some(inc), true) = (self.up.as_mut(), generation == self.generation) {
                if inc.pool.give(index).is_ok() {
                    inc.out.push_back(Descriptor { kind: RX_FREE, buffer: index, ..Default::default() });
                }
            }
        }
    }

    /// Turns one frame into descriptors: pieces of netd's bytes copied into
    /// driver buffers, pieces of lent application buffers named in place.
    /// `None` (buffers released) if the driver region is out of buffers.
    fn encode(&mut self, frame: &PacketBuf, out: &mut Vec<Descriptor>) -> Result<(), ()> {
        let generation = self.generation;
        let Some(inc) = self.up.as_mut() else { return Err(()) };
        let size = inc.pool.buffer_size() as usize;
        let mut open: Option<(u32, usize)> = None;
        let close = |open: &mut Option<(u32, usize)>, out: &mut Vec<Descriptor>| {
            if let Some((index, used)) = open.take() {
                out.push(Descriptor { kind: TX_PIECE, buffer: index, len: used as u32, ..Default::default() });
            }
        };
        let mut copied = 0;
        let mut in_place = 0;
        let mut failed = false;
        // A frame of many small slices (a super-segment of many small lent
        // sends) is copied whole rather than named piece by piece: it
        // would not fit in a frame's pieces.
        let by_reference = frame.slice_count() < MAX_PIECES;
        'chunks: for chunk in frame.chunks() {
            let lent = if by_reference { self.lending.locate(chunk.as_ptr() as usize, chunk.len()) } else { None };
            // Named in place only once the driver has the client's region.
            let lent = lent.filter(|&(key, _, _)| {
                if inc.attached.contains(&key) || inc.refused.contains(&key) {
                    return inc.attached.contains(&key);
                }
                let _ = read_control(
                    inc.control.as_fd(),
                    &mut self.driver_counters,
                    &mut inc.attached,
                    &mut inc.refused,
                    &self.steering,
                );
                inc.attached.contains(&key)
            });
            if let Some((key, index, offset)) = lent {
                let at = self.lending.mark_handed(key, index, generation);
                close(&mut open, out);
                let mut d = Descriptor {
                    kind: TX_CLIENT_PIECE,
                    buffer: index,
                    offset,
                    len: chunk.len() as u32,
                    ..Default::default()
                };
                d.aux[KEY] = key;
                d.aux[TRACE_AT] = at;
                out.push(d);
                in_place += chunk.len();
                continue;
            }
            let mut rest = chunk;
            while !rest.is_empty() {
                let (index, used) = match open {
                    Some((i, u)) if u < size => (i, u),
                    _ => {
                        close(&mut open, out);
                        match inc.pool.alloc() {
                            Some(i) => (i, 0),
                            None => {
                                failed = true;
                                break 'chunks;
                            }
                        }
                    }
                };
                let n = rest.len().min(size - used);
                let _ = inc.pool.write(index, used as u32, &rest[..n]);
                open = Some((index, used + n));
                rest = &rest[n..];
                copied += n;
            }
        }
        if failed {
            if let Some((index, _)) = open {
                let _ = inc.pool.release(index);
            }
            for d in out.iter().filter(|d| d.kind == TX_PIECE) {
                let _ = inc.pool.release(d.buffer);
            }
            out.clear();
            return Err(());
        }
        close(&mut open, out);
        let last = out.len().saturating_sub(1);
        for (k, d) in out.iter_mut().enumerate() {
            if k < last {
                d.flags |= MORE;
            }
        }
        if let Some(first) = out.first_mut() {
            first.aux[0] = offload_word(frame.offload());
        }
        self.stats.tx_bytes_copied += copied as u64;
        self.stats.tx_bytes_in_place += in_place as u64;
        Ok(())
    }
}

impl Device for DriverLink {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        _now: Instant,
    ) -> io::Result<usize> {
        self.return_rx();
        self.take_attach_answers();
        self.feed_steering();
        let Some(inc) = self.up.as_mut() else { return Ok(0) };
        let mut frames = 0;
        while frames < max {
            let d = match inc.from_driver.pop() {
                Ok(Some(d)) => d,
                Ok(None) => break,
                // Shows as the driver's death at the next check.
                Err(_) => break,
            };
            match d.kind {
                RX_PIECE => {
                    let Ok(Some(b)) = inc.pool.take(&d) else {
                        self.stats.rx_bad += 1;
                        continue;
                    };
                    // A whole frame in one buffer: lent to the engine as it
                    // is (no copy), while the driver has buffers to spare.
                    if self.rx_pieces == 0 && d.flags & MORE == 0 && self.rx_lent < RX_LEND_LIMIT {
                        let size = inc.pool.buffer_size();
                        let (Some(offload), Ok(bytes)) = (offload_of(d.aux[0]), inc.pool.shared(b.index, 0, size))
                        else {
                            // Nonsense from the driver: the buffer goes back.
                            self.stats.rx_bad += 1;
                            if inc.pool.give(b.index).is_ok() {
                                inc.out.push_back(Descriptor { kind: RX_FREE, buffer: b.index, ..Default::default() });
                            }
                            continue;
                        };
                        // From here the buffer returns through `LentRx`'s
                        // drop, whatever becomes of the frame.
                        self.rx_lent += 1;
                        let lent =
                            LentRx { index: b.index, generation: self.generation, released: self.rx_released.clone() };
                        let start = b.offset as usize;
                        match View::packet(bytes, lent, start, start + b.len as usize) {
                            Some(mut p) => {
                                p.set_offload(offload);
                                self.stats.rx_frames += 1;
                                self.stats.rx_bytes_in_place += u64::from(b.len);
                                self.device_stats.rx_frames += 1;
                                self.device_stats.rx_bytes += u64::from(b.len);
                                out.push(p);
                                frames += 1;
                            }
                            None => self.stats.rx_bad += 1,
                        }
                        continue;
                    }
                    if self.rx_pieces == 0 {
                        self.rx_offload = d.aux[0];
                    }
                    self.rx_pieces += 1;
                    let start = self.rx_partial.len();
                    self.rx_partial.resize(start + b.len as usize, 0);
                    let read = inc.pool.read(b.index, b.offset, &mut self.rx_partial[start..]);
                    if inc.pool.give(b.index).is_ok() {
                        inc.out.push_back(Descriptor { kind: RX_FREE, buffer: b.index, ..Default::default() });
                    }
                    if read.is_err() || self.rx_pieces > MAX_PIECES {
                        self.stats.rx_bad += 1;
                    }
                    if d.flags & MORE != 0 && self.rx_pieces <= MAX_PIECES {
                        continue;
                    }
                    let whole = self.rx_pieces <= MAX_PIECES && read.is_ok();
                    self.rx_pieces = 0;
                    let offload = offload_of(self.rx_offload);
                    if let (true, Some(offload)) = (whole, offload) {
                        if let Ok(mut p) = PacketBuf::from_slice(pool, RX_HEADROOM, &self.rx_partial) {
                            p.set_offload(offload);
                            self.stats.rx_frames += 1;
                            self.stats.rx_bytes_copied += self.rx_partial.len() as u64;
                            self.device_stats.rx_frames += 1;
                            self.device_stats.rx_bytes += self.rx_partial.len() as u64;
                            out.push(p);
                            frames += 1;
                        } else {
                            self.device_stats.rx_dropped_no_buffer += 1;
                        }
                    }
                    self.rx_partial.clear();
                }
                TX_DONE => match inc.pool.take(&d) {
                    Ok(Some(b)) => {
                        let _ = inc.pool.release(b.index);
                    }
                    _ => self.stats.rx_bad += 1,
                },
                RX_CLIENT_PIECE => {
                    // A frame's pieces come in a row, the first with its
                    // offload bits; all of one client. A frame that breaks
                    // that is swallowed to its last piece, each buffer
                    // given back to its own client unread.
                    if self.rx_client_pieces.is_empty() && !self.rx_client_bad {
                        self.rx_client_first = d.aux;
                    }
                    if d.aux[KEY] != self.rx_client_first[KEY] || self.rx_client_pieces.len() >= MAX_PIECES {
                        self.rx_client_bad = true;
                    }
                    if self.rx_client_bad {
                        self.steering.give_back(d.aux[KEY], d.buffer);
                    } else {
                        self.rx_client_pieces.push((d.buffer, d.offset, d.len));
                    }
                    if d.flags & MORE != 0 {
                        continue;
                    }
                    let pieces = std::mem::take(&mut self.rx_client_pieces);
                    let key = self.rx_client_first[KEY];
                    if std::mem::take(&mut self.rx_client_bad) {
                        for &(index, _, _) in &pieces {
                            self.steering.give_back(key, index);
                        }
                        self.stats.rx_bad += 1;
                        continue;
                    }
                    // Every named buffer goes back to netd's pool, whatever
                    // becomes of the frame.
                    let steered = self.steering.receive(pool, key, &pieces);
                    let Some(offload) = offload_of(self.rx_client_first[0]) else {
                        self.stats.rx_bad += 1;
                        continue;
                    };
                    let mut p = match steered {
                        Steered::InPlace(p) => {
                            let headers = p.chunks().next().map_or(0, <[u8]>::len);
                            self.stats.rx_bytes_copied += headers as u64;
                            self.stats.rx_bytes_in_place += (p.len() - headers) as u64;
                            p
                        }
                        Steered::Copied(p) => {
                            self.stats.rx_bytes_copied += p.len() as u64;
                            p
                        }
                        Steered::Refused => {
                            self.stats.rx_steer_refused += 1;
                            continue;
                        }
                    };
                    p.set_offload(offload);
                    self.stats.rx_steered += 1;
                    self.stats.rx_frames += 1;
                    self.device_stats.rx_frames += 1;
                    self.device_stats.rx_bytes += p.len() as u64;
                    out.push(p);
                    frames += 1;
                }
                STEERED => self.steering.applied(d.aux[0]),
                RETURNED => {
                    if let Some(c) = inc.returns.remove(&(d.aux[KEY], d.id)) {
                        if d.aux[0] == UNDELIVERED {
                            self.orphans.push((d.aux[KEY], c));
                            self.stats.returns_orphaned += 1;
                        } else {
                            self.stats.returns_confirmed += 1;
                        }
                    }
                }
                _ => self.stats.rx_bad += 1,
            }
        }
        flush(inc);
        Ok(frames)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, _now: Instant) -> io::Result<usize> {
        self.return_rx();
        // A port that changed hands is steered anew before any frame sent
        // since (a new owner's SYN): its replies cannot reach the old one.
        self.push_steering();
        if self.up.is_none() {
            let n = frames.len();
            frames.clear();
            self.stats.tx_dropped_down += n as u64;
            self.device_stats.tx_dropped += n as u64;
            return Ok(n);
        }
        let mut done = 0;
        let mut descs = Vec::with_capacity(MAX_PIECES);
        while let Some(frame) = frames.front() {
            descs.clear();
            if self.encode(frame, &mut descs).is_err() {
                break;
            }
            let Some(inc) = self.up.as_mut() else { break };
            let free = (inc.to_driver.free().unwrap_or(0) as usize).saturating_sub(inc.out.len());
            let len = frame.len() as u64;
            if descs.len() > MAX_PIECES {
                for d in descs.iter().filter(|d| d.kind == TX_PIECE) {
                    let _ = inc.pool.release(d.buffer);
                }
                self.stats.tx_dropped_bad += 1;
                self.device_stats.tx_errors += 1;
            } else if descs.len() > free {
                for d in descs.iter().filter(|d| d.kind == TX_PIECE) {
                    let _ = inc.pool.release(d.buffer);
                }
                break;
            } else {
                for d in descs.iter().filter(|d| d.kind == TX_PIECE) {
                    let _ = inc.pool.give(d.buffer);
                }
                inc.out.extend(descs.iter().copied());
                self.stats.tx_frames += 1;
                self.device_stats.tx_frames += 1;
                self.device_stats.tx_bytes += len;
            }
            frames.pop_front();
            done += 1;
        }
        if let Some(inc) = self.up.as_mut() {
            flush(inc);
        }
        Ok(done)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { mtu: self.mtu, tx_offloads: self.offloads }
    }

    fn stats(&self) -> DeviceStats {
        self.device_stats
    }
}

impl Drop for DriverLink {
    fn drop(&mut self) {
        if let Some(s) = self.starting.take() {
            stop_driver(s.handle, s.control, Duration::ZERO);
        }
        if let Some(inc) = self.up.take() {
            let Incarnation { handle, control, .. } = inc;
            stop_driver(handle, control, STOP_GRACE);
        }
    }
}

/// Posts what is queued for the driver.
fn flush(inc: &mut Incarnation) {
    if inc.out.is_empty() {
        return;
    }
    inc.out.make_contiguous();
    let (a, _) = inc.out.as_slices();
    if let Ok(n) = inc.notifier.push_batch(&mut inc.to_driver, a) {
        inc.out.drain(..n);
    }
}

/// Ends a driver for good, so that nothing it held changes once netd
/// takes it back: its control socket is closed (a driver stops on that),
/// a process given `grace` to exit and then killed (by its id) and reaped,
/// a thread joined.
fn stop_driver(handle: DriverHandle, control: OwnedFd, grace: Duration) {
    drop(control);
    match handle {
        DriverHandle::Process(mut c) => {
            let deadline = std::time::Instant::now() + grace;
            while std::time::Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        DriverHandle::Thread(t) => {
            let _ = t.join();
        }
    }
}

/// Takes the driver's messages (counter reports, attach answers); true once
/// its end of the control socket is closed (or sends what it must not).
fn read_control(
    fd: BorrowedFd<'_>,
    counters: &mut super::DriverStats,
    attached: &mut std::collections::HashSet<u64>,
    refused: &mut std::collections::HashSet<u64>,
    steering: &Steering,
) -> bool {
    loop {
        let mut buf = [0u8; CONTROL_LEN];
        match recv_with_fds(fd, &mut buf, libc::MSG_DONTWAIT) {
            Ok(got) if got.len == 0 => return true,
            Ok(got) if !got.fds.is_empty() => return true,
            Ok(got) => match Control::decode(&buf[..got.len]) {
                Some(Control::Counter { id, value }) => counters.set(id, value),
                Some(Control::Attached { key, ok: true }) => {
                    attached.insert(key);
                    // Its receive buffers can go to the driver now.
                    steering.spare_changed();
                }
                Some(Control::Attached { key, ok: false }) => {
                    refused.insert(key);
                }
                _ => return true,
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_dev::loopback::Loopback;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    /// A driver thread netd gives up on (it sent what no driver may) has
    /// ended by the time netd takes back the receive buffers it held: one
    /// still running could write a frame into a buffer netd hands out
    /// again.
    #[test]
    fn a_driver_thread_given_up_on_has_ended_before_netd_goes_on() {
        let ended = Arc::new(AtomicBool::new(false));
        let driver_end: Arc<Mutex<Option<OwnedFd>>> = Arc::default();
        let (ended_in, end_in) = (ended.clone(), driver_end.clone());
        let launcher: Launcher = Box::new(move |control: OwnedFd| {
            if let Ok(mut end) = end_in.lock() {
                end.get_or_insert(control.try_clone()?);
            }
            let ended = ended_in.clone();
            let thread = std::thread::spawn(move || {
                let stop = AtomicBool::new(false);
                let device = |_| Ok(Box::new(Loopback::new(1500, 64)) as Box<dyn Device>);
                let _ = super::super::serve(control, Duration::ZERO, device, &stop);
                // Work it finishes after netd closed its control socket.
                std::thread::sleep(Duration::from_millis(100));
                ended.store(true, Ordering::SeqCst);
            });
            Ok(DriverHandle::Thread(thread))
        });
        let mut link = DriverLink::start(launcher, None, Vec::new()).unwrap();
        let end = driver_end.lock().unwrap().take().unwrap();
        send_with_fds(end.as_fd(), &[0xff; CONTROL_LEN], &[]).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while link.stats.deaths == 0 {
            assert!(std::time::Instant::now() < deadline, "netd never gave up on the driver");
            link.check(std::iter::empty());
        }
        assert!(ended.load(Ordering::SeqCst), "the driver thread still ran when netd went on");
    }
}
