//! netd's loop: it only takes turns. A turn admits new clients and looks
//! after the driver (every housekeeping period), takes frames in from the
//! device or driver, runs the engine's timers, serves every client's
//! requests, hands the engine's frames out, settles the buffers the
//! engine let go of, and lets doomed clients go. With nothing to do, netd
//! polls on for at least the spin period, longer while work keeps coming
//! (`nagare_host::BusyPoll`), then sleeps until a client, the device, the
//! driver, a new client or a timer needs it.
//!
//! Each phase is one call, so the device receive, the engine's poll and
//! the transmit can be swapped for another host step without touching the
//! others; what each phase does lives with its job (`clients`,
//! `requests`, `frames`, `returns`).
//!
//! With PacketFlow's scheduler, clients are served in priority order (set
//! again every housekeeping period), a boosted client lifted in it and
//! given a larger batch of requests.

use crate::clients::Clients;
use crate::config::NetdConfig;
use crate::driver::{DriverLink, DriverLinkStats, Placement};
use crate::frames::FramePath;
use crate::lending::Lending;
use crate::memory::{Memory, BUFFER_FLOOR};
use crate::ops::Context;
use crate::packetflow::{Filter, Holds, Inbound, Load, MemoryManager, Pause, ReceiveDrops, Receivers, Scheduler};
use crate::report::{ClientLine, Report};
use crate::requests::{answer_stat_requests, serve_client, waits_for_stat, REQ_BATCH};
use crate::session::{Session, GONE};
use crate::sharing::Sharing;
use crate::sockets::Sock;
use crate::stats::NetdStats;
use crate::steering::Steering;
use crate::tap_queues::TapQueues;
use crate::wakes::Wakes;
use hashbrown::HashSet;
use nagare_core::ipv6::addr::AddrState;
use nagare_core::{Instant, Interface};
use nagare_dev::{Device, MonotonicClock, TapDevice, UdpShed, MAX_LOCAL6};
use nagare_host::{earliest, BusyPoll, Host, ServiceConfig, Services};
use std::io;
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Longest sleep, so a stop request and timers are noticed.
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// How often a busy loop looks for new clients and dead ones; the period
/// over which PacketFlow's filter measures the receive path's drops.
const HOUSEKEEPING: Duration = Duration::from_millis(20);

/// How often netd, polling on between bursts, looks whether a client
/// waits at the listener. A sleeping netd is woken by one; a polling one
/// would otherwise admit it only when it next sleeps or at housekeeping,
/// and a `fork` of a program with sockets waits for its child's session
/// (`docs/benchmarks.md`, "A fork, step by step"). A look is one `poll`
/// of the listener, a fraction of a microsecond.
const ADMISSION_LOOK: Duration = Duration::from_micros(100);

/// Tells `steering` netd's own addresses, the only ones frames are
/// steered for: the first IPv4 address configured (without one, the
/// unspecified address, to which the engine takes no frame), and the IPv6 ones the
/// engine holds past duplicate address detection (its link-local one
/// first, then the configured ones, then those SLAAC forms; the first
/// [`MAX_LOCAL6`]). Others reach the engine through netd's own queue. The
/// same addresses again change nothing, so it is cheap to call every turn.
fn steer_local_addresses(iface: &Interface, steering: &Steering) {
    let ip = iface.config().addresses.first().map_or(Ipv4Addr::UNSPECIFIED, |c| c.address());
    let mut ip6 = [[0u8; 16]; MAX_LOCAL6];
    let mut n = 0;
    for (slot, a) in ip6.iter_mut().zip(iface.ipv6_addresses().filter(|a| a.state == AddrState::Preferred)) {
        *slot = a.address().octets();
        n += 1;
    }
    steering.set_local(iface.config().mac.0, ip.octets(), &ip6[..n]);
}

/// The inet server.
pub struct Netd {
    /// The engine on its frame path, and the services built into netd.
    host: Host<FramePath>,
    placement: Placement,
    lending: Rc<Lending>,
    steering: Rc<Steering>,
    /// What each client's sockets are charged.
    memory: Rc<Memory>,
    /// The clients holding each socket, found by its events.
    wakes: Rc<Wakes>,
    /// The clients one of whose sockets had an event, this turn.
    woken: HashSet<u64>,
    /// Every client's waiting requests run again next turn.
    wake_all: bool,
    clock: MonotonicClock,
    clients: Clients,
    config: NetdConfig,
    scratch: Vec<u8>,
    /// Room for one client's requests of a turn (`Context::descriptors`).
    descriptors: Vec<nagare_ipc::Descriptor>,
    stats: NetdStats,
    /// PacketFlow's filter and memory manager on the frame path, if
    /// either runs; the memory manager, if it runs; the receivers they ask
    /// about (kept either way); the receive path's drops, which the filter
    /// reads.
    inbound: Option<Inbound>,
    mm: Option<MemoryManager>,
    receivers: Receivers,
    /// Sockets held by several clients, and their watched descriptors.
    sharing: Sharing,
    receive_drops: ReceiveDrops,
    /// PacketFlow's scheduler, if it runs, and its weighing's storage.
    scheduler: Option<Scheduler>,
    loads: Vec<Load>,
    /// The device left unread while the filter finds every frame for a
    /// full queue (`packetflow::Pause`).
    pause: Pause,
    /// The clients whose TAP queues are left unread while a socket of
    /// theirs is full (`packetflow::Holds`).
    holds: Holds,
    /// What the device sheds now, and whether it can (unknown until
    /// first asked).
    shed: UdpShed,
    device_sheds: Option<bool>,
    /// The TAP whose descriptor and queues netd handed its driver, held
    /// open (and unread) while netd runs.
    pub(crate) held_tap: Option<TapDevice>,
    started: std::time::Instant,
}

impl Netd {
    /// A server over `iface` and `device` (called from netd's own loop),
    /// listening on `config.socket`.
    pub fn new(
        iface: Interface,
        device: Box<dyn Device>,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let config = NetdConfig { receive_pool: 0, ..config };
        let steering = Rc::new(Steering::new(false));
        Self::build(
            iface,
            FramePath::Inline(device),
            Placement::Inline,
            Rc::new(Lending::default()),
            steering,
            clock,
            config,
        )
    }

    /// A server over `iface` reading the multi-queue TAP of `queues`
    /// itself, each client's queue into its region; `steering` is the
    /// table `queues` was made with.
    pub(crate) fn with_tap_queues(
        iface: Interface,
        queues: TapQueues,
        steering: Rc<Steering>,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let frames = FramePath::Queues(Box::new(queues));
        Self::build(iface, frames, Placement::Inline, Rc::new(Lending::default()), steering, clock, config)
    }

    /// A server over `iface` whose frames go through `driver` (started
    /// with [`DriverLink::start`]; `placement` says whether it is a process
    /// or a thread, for the report).
    pub fn with_driver(
        iface: Interface,
        driver: DriverLink,
        placement: Placement,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let (lending, steering) = (driver.lending(), driver.steering());
        Self::build(iface, FramePath::Driver(Box::new(driver)), placement, lending, steering, clock, config)
    }

    fn build(
        mut iface: Interface,
        frames: FramePath,
        placement: Placement,
        lending: Rc<Lending>,
        steering: Rc<Steering>,
        clock: MonotonicClock,
        config: NetdConfig,
    ) -> io::Result<Netd> {
        let clients = Clients::listen(&config)?;
        receive_buffers_grow_when_granted(&mut iface, config.tcp_recv_buffer, config.tcp_recv_buffer_max);
        iface.tcp().set_max_connections(config.max_connections);
        let pool = iface.pool().stats();
        let memory = Rc::new(Memory::new(&config, pool.capacity * pool.buf_size));
        steer_local_addresses(&iface, &steering);
        // The filter's draws need no secrecy; a fixed seed serves if the
        // system's source fails.
        let filter = config
            .packetflow
            .filter
            .then(|| Filter::new(nagare_host::secrets::random_u64().unwrap_or(0x9e37_79b9_7f4a_7c15)));
        let mm = config.packetflow.mm.then(|| MemoryManager::new(config.mm_default));
        let receive_drops = ReceiveDrops::new(config.link_drops.clone());
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let scheduler = config.packetflow.scheduler.then(|| Scheduler::new(config.boost, cpus));
        Ok(Netd {
            host: Host::with_rx_batch(iface, frames, config.rx_batch),
            inbound: Inbound::new(filter, mm),
            mm,
            scheduler,
            loads: Vec::new(),
            pause: Pause::default(),
            holds: Holds::default(),
            shed: UdpShed::default(),
            device_sheds: None,
            receivers: Receivers::default(),
            sharing: Sharing::new(Some(&nagare_request::share_watch_path(&config.socket)), &config),
            receive_drops,
            placement,
            lending,
            steering,
            memory,
            wakes: Rc::default(),
            woken: HashSet::new(),
            wake_all: false,
            clock,
            clients,
            config,
            scratch: Vec::new(),
            descriptors: Vec::new(),
            stats: NetdStats::default(),
            held_tap: None,
            started: std::time::Instant::now(),
        })
    }

    /// The engine.
    pub fn iface(&self) -> &Interface {
        &self.host.iface
    }

    /// Starts the services built into netd (as inetd's internal
    /// services) on its engine; returns what is offered, for a start-up
    /// line.
    pub fn enable_services(&mut self, services: &ServiceConfig) -> io::Result<Vec<String>> {
        services.enable(&mut self.host.services, &mut self.host.iface)
    }

    /// What the built-in services did.
    pub fn services(&self) -> &Services {
        &self.host.services
    }

    /// The counters.
    pub fn stats(&self) -> NetdStats {
        self.stats
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.clients.sessions.len()
    }

    /// The driver link's counters, if frames go through a driver.
    pub fn driver_stats(&self) -> Option<DriverLinkStats> {
        self.host.device.driver().map(|d| d.link_stats())
    }

    /// Runs until `stop` is raised; then every client is disconnected.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        self.run_with(stop, |_, _| false)
    }

    /// [`Netd::run`] with `local` run once per turn on the engine: services
    /// built into the inet server itself (as inetd's internal services),
    /// beside its clients. `local` returns whether it did anything.
    pub fn run_with(
        &mut self,
        stop: &AtomicBool,
        mut local: impl FnMut(&mut Interface, Instant) -> bool,
    ) -> io::Result<()> {
        // netd polls on between bursts wherever it has a CPU besides its
        // own, and so does its driver (a thread or a process of its own):
        // a frame after a pause finds both still looking.
        let mut busy = BusyPoll::with_base(self.config.spin);
        let mut last_housekeeping = std::time::Instant::now();
        let mut last_admission_look = last_housekeeping;
        let mut listener_ready = true;
        while !stop.load(Ordering::Relaxed) {
            let housekeeping = listener_ready || last_housekeeping.elapsed() >= HOUSEKEEPING;
            if housekeeping {
                last_housekeeping = std::time::Instant::now();
            }
            let work = self.turn_with(housekeeping, &mut local);
            let now = std::time::Instant::now();
            listener_ready = now.duration_since(last_admission_look) >= ADMISSION_LOOK && {
                last_admission_look = now;
                self.clients.client_waiting()
            };
            if work {
                busy.work(now);
                continue;
            }
            if listener_ready {
                continue;
            }
            // A paused device has nothing to poll for: sleep until a
            // client needs netd or the pause ends.
            if self.pause.until().is_none() && busy.keep_polling(now) {
                // The driver and the applications may be waiting for a CPU.
                // Beside a driver, netd polls on only while nobody else
                // wants its CPU ([`BusyPoll::yield_cpu`]); alone, it polls
                // on as work comes.
                if self.placement == Placement::Inline {
                    std::thread::yield_now();
                } else {
                    busy.yield_cpu();
                }
                continue;
            }
            listener_ready = self.sleep()?;
        }
        let gone: Vec<Session> = self.clients.sessions.drain(..).collect();
        for s in gone {
            self.disconnect(s, "netd stopping");
        }
        Ok(())
    }

    /// One turn: new clients and the driver's health (if `housekeeping`),
    /// the device, the engine's timers, every client's requests, the
    /// transmission, the lent buffers and the clients that must go.
    /// Returns whether anything happened.
    pub fn turn(&mut self, housekeeping: bool) -> bool {
        self.turn_with(housekeeping, &mut |_, _| false)
    }

    fn turn_with(&mut self, housekeeping: bool, local: &mut dyn FnMut(&mut Interface, Instant) -> bool) -> bool {
        let mut work = false;
        if housekeeping {
            work |= self.housekeeping();
        }
        let now = self.clock.now();
        work |= self.receive(now);
        self.host.poll(now);
        // The engine's timers are what make an address usable (duplicate
        // address detection) or take one away (its lifetime).
        steer_local_addresses(&self.host.iface, &self.steering);
        work |= self.host.services.serve(&mut self.host.iface, now);
        work |= local(&mut self.host.iface, now);
        work |= self.serve_clients(now, housekeeping);
        work |= self.transmit(now);
        work |=
            crate::returns::settle(&self.lending, &mut self.host.device, &mut self.clients.sessions, &mut self.stats);
        work |= self.let_doomed_go();
        work
    }

    /// New clients, clients that have gone, a driver that died, queues
    /// above the maximum a priority that fell gives them, and the end of a
    /// period of PacketFlow's filter.
    fn housekeeping(&mut self) -> bool {
        let (lending, steering, frames) = (&self.lending, &self.steering, &mut self.host.device);
        let mut work = self.clients.accept_all(&mut self.stats, &self.memory, &self.wakes, |s| {
            lending.add_client(s.key(), &s.pool);
            let receive_pool = s.take_receive_pool();
            steering.add_client(s.key(), s.pool.area_base(), s.pool.buffer_size() as usize, receive_pool);
            frames.attach(s);
        });
        self.clients.notice_gone();
        let ended = self.sharing.ended();
        if !ended.is_empty() {
            // No client holds them and no process a descriptor for them.
            let now = self.clock.now();
            for (token, sock) in ended {
                if let Sock::Udp(h) = sock {
                    self.receivers.remove(h);
                }
                let charged = self.memory.end_watched(token);
                // A connection that lingers stays charged, as an orphan of
                // the client that left it, or is reset past the orphans'
                // cap, as a close is.
                let iface = &mut self.host.iface;
                match (sock, charged) {
                    (Sock::Tcp(h), Some((owner, bytes))) if !self.memory.orphans_full(iface) => {
                        let _ = sock.close(iface, now);
                        self.memory.keep_orphan(iface, owner, h, bytes);
                    }
                    (Sock::Tcp(_), Some(_)) => {
                        self.stats.orphans_reset += 1;
                        let _ = sock.reset(iface, now);
                    }
                    _ => {
                        let _ = sock.close(iface, now);
                    }
                }
            }
            work = true;
        }
        self.memory.settle(&self.host.iface);
        for s in &self.clients.sessions {
            self.receivers.set_client(s.key(), s.priority.get().value);
        }
        if let Some(mm) = self.mm.filter(|_| self.receivers.take_refit()) {
            let mut above = false;
            for (h, dest) in self.receivers.iter() {
                above |= mm.fit(&mut self.host.iface, &self.memory, h, &dest);
            }
            if above {
                self.receivers.refit_later();
            }
        }
        work |= self.host.device.check_driver(&self.clients.sessions);
        self.end_filter_period();
        self.end_scheduler_period();
        work
    }

    /// Ends a period of PacketFlow's scheduler: every client weighed, the
    /// boosts it chose begun, those run out ended.
    fn end_scheduler_period(&mut self) {
        let Some(scheduler) = &mut self.scheduler else { return };
        let iface = &self.host.iface;
        self.loads.clear();
        self.loads
            .extend(self.clients.sessions.iter_mut().filter(|s| s.doomed.is_none()).filter_map(|s| s.load(iface)));
        let changes = scheduler.period(&self.loads, std::time::Instant::now());
        for (client, lift) in changes.start {
            self.receivers.set_boosted(client, true);
            self.stats.boosts += 1;
            // A process is lifted by one of its sessions at a time.
            let lifted = self.clients.lifted_pids();
            let Some(s) = self.clients.sessions.iter_mut().find(|s| s.key() == client) else { continue };
            if lifted.contains(&s.conn.cred.pid) {
                continue;
            }
            if let Err(e) = s.priority.lift(lift) {
                self.stats.lifts_refused += 1;
                log::debug!("client {client} (pid {}) boosted, its process not lifted: {e}", s.conn.cred.pid);
            }
        }
        for client in changes.end {
            self.receivers.set_boosted(client, false);
            if let Some(s) = self.clients.sessions.iter_mut().find(|s| s.key() == client) {
                s.priority.unlift();
            }
        }
        // Served in priority order from now on; a client without a
        // receiving socket last.
        let loads = &self.loads;
        let priority = |key: u64| loads.iter().find(|l| l.client == key).map_or(u8::MAX, |l| l.priority);
        self.clients.sessions.sort_by_key(|s| scheduler.rank(s.key(), priority(s.key())));
        // And their frames read in that order, where each has a queue.
        let ranks = self.clients.sessions.iter().map(|s| (s.key(), scheduler.rank(s.key(), priority(s.key()))));
        self.host.device.rank_clients(ranks);
    }

    /// Ends a period of PacketFlow's filter with the receive path's drops
    /// in it (frames the device or the driver had no buffer for, and those
    /// the link dropped on their way to netd) and the clients that
    /// received TCP in it among its receivers.
    fn end_filter_period(&mut self) {
        let Some(filter) = self.inbound.as_mut().and_then(Inbound::filter_mut) else { return };
        for s in &mut self.clients.sessions {
            if let Some((priority, segments)) = s.tcp_received(&self.host.iface) {
                filter.note_receiver(priority, segments);
            }
        }
        let device = self.host.device.stats().rx_dropped_no_buffer;
        let driver = self.host.device.driver().map_or(0, |d| d.driver_counters().rx_dropped);
        filter.end_period(self.receive_drops.since_last(device.saturating_add(driver)));
        // The device sheds the period's low-priority datagrams itself
        // where it can (a TAP, before its ring); its drops count among the
        // link's, which keeps the drop rate while it sheds.
        if self.device_sheds == Some(false) {
            return;
        }
        let shed = filter.shed(&self.receivers, &self.host.iface);
        if shed == self.shed {
            return;
        }
        // With a driver, the TAP netd holds takes the program for every
        // queue of it, the driver's included.
        let applied = match &mut self.held_tap {
            Some(tap) => tap.set_udp_shed(&shed),
            None => self.host.device.set_udp_shed(&shed),
        };
        match applied {
            Ok(()) => {
                self.device_sheds = Some(true);
                filter.set_shed_by_device(!shed.ports.is_empty());
                self.shed = shed;
            }
            Err(e) => {
                // Not asked again: netd's own B1 drops for the device.
                if e.kind() != io::ErrorKind::Unsupported {
                    log::warn!("the device would not shed datagrams: {e}; netd drops them itself");
                }
                self.device_sheds = Some(false);
                filter.set_shed_by_device(false);
                self.shed = UdpShed::default();
            }
        }
    }

    /// Frames from the device or driver into the engine, through
    /// PacketFlow's filter and memory manager if they run.
    fn receive(&mut self, now: Instant) -> bool {
        if self.receive_paused() {
            return false;
        }
        let received = match &mut self.inbound {
            None if self.scheduler.is_some() && self.host.device.has_client_queues() => {
                // No filter or memory manager to see each datagram: the
                // engine's own drops for full queues start the holds.
                let held = self.holds.update(&self.host.iface, std::time::Instant::now());
                self.host.device.hold_clients(held);
                let dropped = self.host.iface.counters().drop_udp_queue_full;
                let n = self.host.receive(now);
                if self.host.iface.counters().drop_udp_queue_full > dropped {
                    self.hold_full_receivers();
                }
                n
            }
            None => self.host.receive(now),
            Some(inbound) => {
                let held = self.holds.update(&self.host.iface, std::time::Instant::now());
                self.host.device.hold_clients(held);
                inbound.begin_batch();
                let (receivers, memory, stats) = (&mut self.receivers, &self.memory, &mut self.stats);
                let n = self
                    .host
                    .receive_filtered(now, |iface, frame| inbound.keep(iface, receivers, memory, stats, frame));
                if let (Some(n @ 1..), Some(filter)) = (n, inbound.filter_mut()) {
                    filter.note_read(n >= self.host.rx_batch());
                }
                // A client whose socket overflowed has its own queue held
                // (where it has one), which the frames behind wait in.
                let when = std::time::Instant::now();
                for &h in inbound.batch_overflowed() {
                    let Some(d) = self.receivers.destination(h) else { continue };
                    if self.host.device.has_client_queues() && self.holds.start(d.client, h, when) {
                        self.stats.queue_holds += 1;
                    }
                }
                if let Some(full) = inbound.batch_wasted().filter(|_| n.is_some_and(|n| n >= self.host.rx_batch())) {
                    if self.pause.start(full, std::time::Instant::now()) {
                        self.stats.receive_pauses += 1;
                    }
                }
                n
            }
        };
        match received {
            Some(n) => n > 0,
            None => {
                self.stats.device_errors += 1;
                false
            }
        }
    }

    /// Holds the TAP queue of each client with a UDP socket the engine
    /// found full (`packetflow::Holds`): at seven eighths of its queue or
    /// more, as the one it just dropped a datagram for is.
    fn hold_full_receivers(&mut self) {
        let when = std::time::Instant::now();
        let udp = self.host.iface.udp_ref();
        for (h, d) in self.receivers.iter() {
            let full = udp.socket(h).is_some_and(|u| {
                let (datagrams, bytes) = u.queue_limits();
                u.queued() >= datagrams || u.queued_bytes().saturating_mul(8) >= bytes.saturating_mul(7)
            });
            if full && self.holds.start(d.client, h, when) {
                self.stats.queue_holds += 1;
            }
        }
    }

    /// Whether the device is left unread now (`packetflow::Pause`).
    fn receive_paused(&mut self) -> bool {
        self.pause.active(&self.host.iface, std::time::Instant::now())
    }

    /// The engine's frames out to the device or driver.
    fn transmit(&mut self, now: Instant) -> bool {
        match self.host.transmit(now) {
            Some(n) => n > 0,
            None => {
                self.stats.device_errors += 1;
                false
            }
        }
    }

    /// Every client's turn, in the sessions' order (priority order with
    /// PacketFlow's scheduler; those it boosted with twice the batch), then
    /// the waiting `STAT` requests. A client's waiting requests run again
    /// if one of its sockets had an event since the last turn, and every
    /// client's at housekeeping, after a change events do not tell
    /// (`Context::wake_all`) and after a client left (the sockets it
    /// shared). An event a client's turn notes (its own sends and
    /// receives, a buffer grown for it) reaches the other holders of a
    /// shared socket that were served before it at the next turn: a turn
    /// that moved data counts as work and comes at once, and the one
    /// change a turn without work can make, a receive buffer grown for a
    /// waiting receive, changes nothing another holder waits for.
    fn serve_clients(&mut self, now: Instant, housekeeping: bool) -> bool {
        let mut work = false;
        self.woken.clear();
        self.wakes.take(&mut self.host.iface, &mut self.woken);
        let all = housekeeping || std::mem::take(&mut self.wake_all);
        let mut cx = Context {
            iface: &mut self.host.iface,
            now,
            scratch: &mut self.scratch,
            descriptors: &mut self.descriptors,
            wake_all: &mut self.wake_all,
            config: &self.config,
            lending: &self.lending,
            steering: &self.steering,
            memory: &self.memory,
            stats: &mut self.stats,
            receivers: &mut self.receivers,
            mm: self.mm,
            sharing: &mut self.sharing,
        };
        for s in &mut self.clients.sessions {
            let batch = if cx.receivers.is_boosted(s.key()) { 2 * REQ_BATCH } else { REQ_BATCH };
            let had_event = all || self.woken.contains(&s.key());
            work |= serve_client(s, &mut cx, batch, had_event, all);
        }
        if self.clients.sessions.iter().any(waits_for_stat) {
            let text = self.report(self.config.buffer_size as usize);
            answer_stat_requests(self.clients.sessions.iter_mut(), &text, &mut self.stats);
            work = true;
        }
        work
    }

    /// Lets go of every doomed client.
    fn let_doomed_go(&mut self) -> bool {
        let mut work = false;
        while let Some((s, why)) = self.clients.next_doomed() {
            self.disconnect(s, why);
            // What it shared is the other holders' alone.
            self.wake_all = true;
            work = true;
        }
        work
    }

    /// What `nagare stat` shows, at most `limit` bytes.
    pub fn report(&mut self, limit: usize) -> String {
        let iface = &self.host.iface;
        let clients: Vec<ClientLine> = self
            .clients
            .sessions
            .iter()
            .map(|s| s.client_line(&self.steering, &self.memory, iface, &self.receivers, self.mm, &self.sharing.shares))
            .collect();
        let counters = self.host.iface.counters().clone();
        let mut engine = counters.iter();
        Report {
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            placement: self.placement.name(),
            driver: self.host.device.report(),
            queues: self.host.device.queue_report(),
            link: &self.config.link,
            clients: &clients,
            stats: self.stats,
            memory: self.memory.line(),
            connections: (self.host.iface.tcp_ref().connection_count(), self.config.max_connections),
            engine: &mut engine,
            engine_buffers: self.host.iface.pool().stats(),
            filter: self.inbound.as_ref().and_then(Inbound::filter).map(Filter::last_period),
            shed_ports: self.shed.ports.len(),
            shed_percent: self.inbound.as_ref().and_then(Inbound::filter).map_or(0, |f| (f.probability() * 100) >> 32),
            mm: self.mm.map(|mm| mm.default_size()),
            scheduler: self.scheduler.as_ref().map(|s| (s.boosted(), self.config.boost)),
        }
        .render(limit)
    }

    /// Sleeps until a client, the device, a new client or a timer needs us.
    /// Returns whether the listener (or the driver's control socket) is
    /// readable: housekeeping now.
    fn sleep(&mut self) -> io::Result<bool> {
        let paused = self.receive_paused();
        if !paused && self.host.device.prepare_sleep() {
            return Ok(false);
        }
        for s in &mut self.clients.sessions {
            if s.prepare_sleep() {
                return Ok(false);
            }
        }
        let now = self.clock.now();
        let next = self.host.poll_at();
        let deadline = self.clients.sessions.iter().filter_map(|s| s.next_deadline()).min();
        let next = earliest(next, deadline);
        let mut timeout = next.map_or(MAX_SLEEP, |t| t.saturating_since(now)).min(MAX_SLEEP);
        if !self.host.iface.tx_queue().is_empty() {
            timeout = timeout.min(Duration::from_millis(1));
        }
        if paused {
            // Its queues drain as clients are served: look again soon.
            timeout = timeout.min(Duration::from_millis(1));
        }
        if self.sharing.watching() {
            // A watched descriptor's hang-up is looked for at housekeeping.
            timeout = timeout.min(HOUSEKEEPING);
        }
        if timeout.is_zero() {
            return Ok(false);
        }
        // [frames, frames, listener, then each client's wake-up and
        // liveness socket].
        let mut fds = Vec::with_capacity(3 + 2 * self.clients.sessions.len());
        let pfd = |fd: i32| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // A paused device is not watched (its first descriptor, the
        // frames'); a driver's control socket still is.
        let [frames, control] = self.host.device.sleep_fds();
        fds.extend([if paused { -1 } else { frames }, control].map(pfd));
        fds.push(pfd(self.clients.listener_fd()));
        for s in &self.clients.sessions {
            fds.extend(s.sleep_fds().map(pfd));
        }
        let millis = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        self.stats.sleeps += 1;
        crate::os::poll(&mut fds, millis)?;
        let fired = |i: usize| fds.get(i).is_some_and(|f| f.revents != 0);
        self.host.device.after_sleep(fired(0));
        for (k, s) in self.clients.sessions.iter_mut().enumerate() {
            s.after_sleep(fired(3 + 2 * k), fired(4 + 2 * k));
        }
        // The driver's control socket hung up: it died; housekeeping now.
        Ok(fired(2) || fired(1))
    }

    /// A client leaves (exit, death, broken rings, netd stopping): its
    /// sockets are reset or closed, its buffers return, its region goes.
    fn disconnect(&mut self, mut s: Session, why: &str) {
        let now = self.clock.now();
        // A UDP socket another client holds too stays open for it: its
        // datagrams are that client's to PacketFlow from now on.
        for (id, sock) in s.sockets.iter() {
            if let Sock::Udp(h) = sock {
                let other = self.sharing.shares.other_holder(s.key(), id);
                self.receivers.hand_over(h, (s.key(), id), other);
            }
        }
        let exited = why == GONE;
        let gone = s.leave(&mut self.host.iface, &self.lending, &self.steering, &mut self.sharing, exited, now);
        s.priority.unlift();
        if let Some(scheduler) = &mut self.scheduler {
            scheduler.forget(s.key());
        }
        self.receivers.forget_client(s.key());
        self.holds.forget(s.key());
        self.host.device.detach(s.key());
        self.memory.client_gone(s.key());
        self.sharing.exclusive.forget_client(s.key());
        self.stats.sockets_reclaimed += gone.sockets as u64;
        self.stats.buffers_reclaimed += u64::from(gone.reclaimed);
        self.stats.buffers_leaked += u64::from(gone.leaked);
        self.stats.orphans_reset += u64::from(gone.orphans_reset);
        if exited {
            self.stats.clients_gone += 1;
        } else if why != "netd stopping" {
            self.stats.clients_broken += 1;
        }
        log::info!(
            "client {} (pid {}) {why}: {} sockets closed, {} buffers reclaimed, {} lent to the stack, {} in use",
            s.key(),
            s.conn.cred.pid,
            gone.sockets,
            gone.reclaimed,
            gone.lent,
            gone.leaked
        );
        // Flush what the engine sent (FINs, RSTs) before the session's
        // region goes.
        let _ = self.host.transmit(now);
        drop(s);
    }
}

/// TCP receive buffers start at `start` (`NetdConfig::tcp_recv_buffer`)
/// and autotuning may grow them up to `max`, the size the window scale is
/// chosen for, but only as far as netd grants: a client is charged its
/// buffers' ceilings (`crate::memory`), so each connection's ceiling
/// starts at its buffer and rises when autotuning wants more and the
/// client has room (`ops::tcp`). An application that sets its buffer
/// (SO_RCVBUF) gets that size as far as its budget goes, for good.
fn receive_buffers_grow_when_granted(iface: &mut Interface, start: usize, max: usize) {
    let defaults = iface.tcp().defaults_mut();
    let largest = nagare_request::MAX_SOCKET_BUFFER as usize;
    defaults.recv_buffer = start.clamp(BUFFER_FLOOR, largest);
    defaults.recv_buffer_max = max.clamp(defaults.recv_buffer, largest);
    defaults.recv_autotune = defaults.recv_buffer_max > defaults.recv_buffer;
}
