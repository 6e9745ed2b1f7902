//! netd's wiring: from a link (a TAP device or a VNI port) and a placement
//! to a running [`Netd`] on its own device, driver thread or driver
//! process, with the services built into it.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use nagare_host::{DeviceSpec, LinkSpec};
//! use nagare_netd::{NetdBuilder, Placement};
//! let link = LinkSpec {
//!     device: DeviceSpec::Tap { name: "tap0".into(), offload: true },
//!     addr: Some("10.0.0.2/24".parse().map_err(std::io::Error::other)?),
//!     ipv6: Vec::new(),
//!     gateway: None,
//!     gateway6: None,
//!     mac: None,
//!     impair: None,
//!     syn_budget: None,
//! };
//! let built = NetdBuilder::new(link).placement(Placement::Single).build()?;
//! let stop = std::sync::atomic::AtomicBool::new(false);
//! let mut netd = built.netd;
//! netd.run(&stop)?;
//! # Ok(())
//! # }
//! ```
//!
//! With a TAP, netd opens it multi-queue when it can (one receive queue
//! per client for receive steering; not with an impairment, which applies
//! to the first queue only): with a driver, netd holds the TAP while it
//! runs and hands the driver its descriptor and the queues; inline, netd
//! reads the queues itself (`crate::tap_queues`). A VNI port is attached
//! by whoever drives it: netd inline, the driver otherwise.

use crate::driver::launch::{launcher, DriverDevice, DriverSpec};
use crate::driver::{DriverLink, MAX_RX_QUEUES};
use crate::priority;
use crate::steering::Steering;
use crate::tap_queues::TapQueues;
use crate::{BoostConfig, Netd, NetdConfig, PacketFlow, Placement};
use nagare_dev::{MonotonicClock, TapDevice};
use nagare_host::link::{interface_on, open_host};
use nagare_host::{DeviceSpec, LinkSpec, ServiceConfig};
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

/// How to build a netd; every setting has a default but the link.
#[derive(Debug, Clone)]
pub struct NetdBuilder {
    link: LinkSpec,
    placement: Placement,
    config: NetdConfig,
    services: ServiceConfig,
    driver_program: Option<PathBuf>,
    nice: Option<i32>,
    realtime: Option<i32>,
}

/// A netd and what was made for it.
pub struct Built {
    /// The server, ready to run.
    pub netd: Netd,
    /// The services it offers, for a start-up line ("ping" first).
    pub offered: Vec<String>,
    /// The driver process's id (split placement).
    pub driver_pid: Option<u32>,
}

impl NetdBuilder {
    /// A netd on `link`: the placement that fits this machine
    /// ([`Placement::for_this_machine`]), the default socket and sizes, no
    /// services but ping.
    pub fn new(link: LinkSpec) -> NetdBuilder {
        let config = NetdConfig { link: link.describe(), ..NetdConfig::default() };
        NetdBuilder {
            link,
            placement: Placement::for_this_machine(),
            config,
            services: ServiceConfig::default(),
            driver_program: None,
            nice: None,
            realtime: None,
        }
    }

    /// Where the device runs.
    pub fn placement(mut self, placement: Placement) -> NetdBuilder {
        self.placement = placement;
        self
    }

    /// The nice value netd and its driver run at (default: the caller's).
    /// Set when netd is built, on the building thread (Linux keeps a nice
    /// value per thread), before the driver starts, so the driver has it
    /// too; [`Netd::run`] has it on that thread or on threads it starts
    /// afterwards. Where the kernel refuses, netd keeps its own and says
    /// so.
    pub fn nice(mut self, nice: i32) -> NetdBuilder {
        self.nice = Some(nice);
        self
    }

    /// netd and its driver run under `SCHED_FIFO` at `priority` (1 to
    /// 99), ahead of every process of the normal scheduler, as the
    /// kernel's own network processing runs ahead of them. Set as
    /// [`NetdBuilder::nice`] is; where the kernel refuses, netd keeps its
    /// scheduling and says so.
    pub fn realtime(mut self, priority: i32) -> NetdBuilder {
        self.realtime = Some(priority);
        self
    }

    /// The rendezvous socket clients connect to.
    pub fn socket(mut self, socket: PathBuf) -> NetdBuilder {
        self.config.socket = socket;
        self
    }

    /// Opens the rendezvous socket (and the watch socket beside it) to
    /// others than netd's user: permission bits `mode` (e.g. `0o660`, or
    /// `0o666` for every user) and, if set, group `group`.
    pub fn socket_access(mut self, mode: Option<u32>, group: Option<u32>) -> NetdBuilder {
        self.config.socket_mode = mode;
        self.config.socket_group = group;
        self
    }

    /// The first port a client may bind without `CAP_NET_BIND_SERVICE`
    /// (default 1024; [`crate::kernel_unprivileged_port_start`] reads the
    /// kernel's).
    pub fn unprivileged_port_start(mut self, port: u16) -> NetdBuilder {
        self.config.unprivileged_port_start = port;
        self
    }

    /// How long netd and its driver poll after their last work before they
    /// sleep.
    pub fn spin(mut self, spin: Duration) -> NetdBuilder {
        self.config.spin = spin;
        self
    }

    /// Bytes of engine buffers each client's sockets may be charged.
    pub fn client_memory(mut self, bytes: usize) -> NetdBuilder {
        self.config.client_memory = bytes;
        self
    }

    /// Bytes of buffers every client's sockets may hold together (at most
    /// the engine's pool less an eighth, the default).
    pub fn memory_cap(mut self, bytes: usize) -> NetdBuilder {
        self.config.memory_cap = Some(bytes);
        self
    }

    /// Closed connections the engine may keep for their FIN exchange.
    pub fn max_orphans(mut self, max: usize) -> NetdBuilder {
        self.config.max_orphans = max;
        self
    }

    /// A new TCP connection's receive buffer (default 256 KiB).
    pub fn tcp_recv_buffer(mut self, bytes: usize) -> NetdBuilder {
        self.config.tcp_recv_buffer = bytes;
        self
    }

    /// The largest a TCP connection's receive buffer grows to (default
    /// 4 MiB; at or below the starting size, none grows).
    pub fn tcp_recv_buffer_max(mut self, bytes: usize) -> NetdBuilder {
        self.config.tcp_recv_buffer_max = bytes;
        self
    }

    /// TCP connections the engine holds at most.
    pub fn max_connections(mut self, max: usize) -> NetdBuilder {
        self.config.max_connections = max;
        self
    }

    /// Sizes and limits (the socket, spin and link name set here are kept
    /// unless set again).
    pub fn config(mut self, config: NetdConfig) -> NetdBuilder {
        self.config = config;
        self
    }

    /// The PacketFlow modules netd runs.
    pub fn packetflow(mut self, packetflow: PacketFlow) -> NetdBuilder {
        self.config.packetflow = packetflow;
        self
    }

    /// How PacketFlow's scheduler boosts clients.
    pub fn boost(mut self, boost: BoostConfig) -> NetdBuilder {
        self.config.boost = boost;
        self
    }

    /// Frames each queue of the TAP holds for netd (0: as it is).
    pub fn tap_queue_len(mut self, frames: u32) -> NetdBuilder {
        self.config.tap_queue_len = frames;
        self
    }

    /// The largest UDP receive queue at nice 0 under PacketFlow's memory
    /// manager.
    pub fn mm_default(mut self, bytes: usize) -> NetdBuilder {
        self.config.mm_default = bytes;
        self
    }

    /// The services built into netd (echo, discard, HTTP).
    pub fn services(mut self, services: ServiceConfig) -> NetdBuilder {
        self.services = services;
        self
    }

    /// The program run as `PROGRAM driver ARGS` in split placement (by
    /// default the running one, which must then be the `nagare` command).
    pub fn driver_program(mut self, program: PathBuf) -> NetdBuilder {
        self.driver_program = Some(program);
        self
    }

    /// The rendezvous socket, the link's name and the placement, for
    /// messages.
    pub fn describe(&self) -> (PathBuf, String, Placement) {
        (self.config.socket.clone(), self.link.describe(), self.placement)
    }

    /// Opens the link, starts the driver and the listener, enables the
    /// services.
    pub fn build(mut self) -> io::Result<Built> {
        if let Some(nice) = self.nice {
            if let Err(e) = priority::set_own_nice(nice) {
                log::warn!(
                    "netd keeps nice {} ({e}; a lower value needs CAP_SYS_NICE): it runs at the priority it was started with",
                    priority::own_nice().map_or_else(|| "unknown".to_string(), |n| n.to_string())
                );
            }
        }
        if let Some(priority) = self.realtime {
            match priority::set_own_realtime(priority) {
                Ok(()) => log::info!("netd runs under SCHED_FIFO at {}", priority::own_realtime().unwrap_or(priority)),
                Err(e) => {
                    log::warn!("netd is not real-time ({e}; SCHED_FIFO needs CAP_SYS_NICE): it runs as it was started")
                }
            }
        }
        // The TAP's kernel side transmits to netd: what it could not hand
        // over, netd did not read in time.
        if let DeviceSpec::Tap { name, .. } = &self.link.device {
            let counter = PathBuf::from(format!("/sys/class/net/{name}/statistics/tx_dropped"));
            self.config.link_drops.get_or_insert(counter);
        }
        let clock = MonotonicClock::new();
        let link = &self.link;
        let queue_len = self.config.tap_queue_len;
        if self.placement == Placement::Inline {
            let steering = Rc::new(Steering::new(true));
            let steered = match &link.device {
                DeviceSpec::Tap { name, offload } if link.impairment().is_none() => {
                    Some(open_tap_queues(name, *offload, steering.clone())?)
                }
                _ => None,
            };
            let mut netd = match steered {
                Some(Ok(queues)) => {
                    let iface = interface_on(&queues, link)?;
                    Netd::with_tap_queues(iface, queues, steering, clock, self.config)?
                }
                Some(Err(tap)) => {
                    let iface = interface_on(&tap, link)?;
                    Netd::new(iface, Box::new(tap), clock, self.config)?
                }
                None => {
                    let host = open_host(link, None, &clock)?;
                    Netd::new(host.iface, host.device, clock, self.config)?
                }
            };
            size_tap_queues(link, queue_len);
            let offered = netd.enable_services(&self.services)?;
            return Ok(Built { netd, offered, driver_pid: None });
        }
        // `tap`: netd keeps the TAP open (and unread) while it runs.
        let (device, tap) = match &link.device {
            DeviceSpec::Tap { name, offload } => {
                let tap = if link.impairment().is_none() {
                    TapDevice::open_multi_queue(name, *offload)
                } else {
                    TapDevice::open_with(name, *offload)
                };
                let tap = tap.map_err(|e| io::Error::new(e.kind(), format!("opening TAP device {name}: {e}")))?;
                size_tap_queues(link, queue_len);
                if !tap.multi_queue() && link.impairment().is_none() {
                    log::warn!(
                        "{name} is a single-queue TAP: received payload is copied once (make it with `ip tuntap add ... multi_queue` to steer)"
                    );
                }
                (DriverDevice::Tap { name: name.clone(), vnet_header: tap.vnet_header() }, Some(tap))
            }
            DeviceSpec::Vni { segment } => (DriverDevice::Vni { segment: segment.clone(), mac: link.mac() }, None),
        };
        let spec = DriverSpec { device, impair: link.impair, seed: u64::from(link.host_id()), spin: self.config.spin };
        let device_fd = tap.as_ref().map(|t| t.fd().try_clone_to_owned()).transpose()?;
        let mut rx_queues = Vec::new();
        if let Some(t) = tap.as_ref().filter(|t| t.multi_queue()) {
            for _ in 0..MAX_RX_QUEUES {
                rx_queues.push(t.open_queue()?);
            }
            // The steering program names queues by number: right only if
            // every queue of the TAP is ours (ours then come first, and
            // anyone attaching later comes after them).
            if t.queue_count().ok() != Some(1 + MAX_RX_QUEUES) {
                log::warn!(
                    "another process holds a queue of {}: receive steering is off; received payload is copied once",
                    t.name()
                );
                rx_queues.clear();
            }
        }
        let cpus = nagare_host::busy_poll::cpus();
        if Placement::for_cpus(cpus) == Placement::Inline {
            log::warn!(
                "{} placement with {cpus} CPU(s) to run on: netd, its driver and the applications share them, \
                 and every hand-over waits for a CPU; inline placement is faster here",
                self.placement.name()
            );
        }
        let program = match self.driver_program {
            Some(program) => program,
            None => std::env::current_exe()?,
        };
        let driver = DriverLink::start(launcher(self.placement, spec, program)?, device_fd, rx_queues)
            .map_err(|e| io::Error::new(e.kind(), format!("starting the driver: {e}")))?;
        let iface = interface_on(&driver, link)?;
        let driver_pid = driver.pid();
        let mut netd = Netd::with_driver(iface, driver, self.placement, clock, self.config)?;
        netd.held_tap = tap;
        let offered = netd.enable_services(&self.services)?;
        Ok(Built { netd, offered, driver_pid })
    }
}

/// Sets how many frames each queue of `link`'s TAP holds (0, or a link
/// that is no TAP: nothing). A TAP made for this user by root keeps its
/// length when netd may not change it: said once in the log.
fn size_tap_queues(link: &LinkSpec, frames: u32) {
    let DeviceSpec::Tap { name, .. } = &link.device else { return };
    if frames == 0 {
        return;
    }
    if let Err(e) = nagare_dev::tap::set_queue_len(name, frames) {
        log::warn!("{name} keeps its queue length ({e}): frames beyond it are dropped while netd is away");
    }
}

/// TAP `name`, opened multi-queue with its extra queues, for netd to read
/// itself with each client's flows steered to a queue of their own; the
/// TAP alone, opened as it is, where steering cannot be had (a
/// single-queue TAP, another process holding a queue, no `CAP_BPF`): its
/// received payload is then copied once more.
fn open_tap_queues(name: &str, offload: bool, steering: Rc<Steering>) -> io::Result<Result<TapQueues, TapDevice>> {
    let tap = TapDevice::open_multi_queue(name, offload)
        .map_err(|e| io::Error::new(e.kind(), format!("opening TAP device {name}: {e}")))?;
    log::info!("{} TAP device {name}", if tap.created() { "created" } else { "attached to" });
    if !tap.multi_queue() {
        log::warn!(
            "{name} is a single-queue TAP: received payload is copied once (make it with `ip tuntap add ... multi_queue` to steer)"
        );
        return Ok(Err(tap));
    }
    let mut extra = Vec::new();
    for _ in 0..MAX_RX_QUEUES {
        match tap.open_queue() {
            Ok(q) => extra.push(q),
            Err(e) => {
                log::warn!("receive steering on {name} is off ({e}); received payload is copied once");
                return Ok(Err(tap));
            }
        }
    }
    // The steering program names queues by number: right only if every
    // queue of the TAP is ours.
    if tap.queue_count().ok() != Some(1 + extra.len()) {
        log::warn!("another process holds a queue of {name}: receive steering is off; received payload is copied once");
        return Ok(Err(tap));
    }
    match TapQueues::prepare(&tap, extra) {
        Ok(parts) => Ok(Ok(TapQueues::new(tap, parts, steering))),
        Err(e) => {
            log::warn!("receive steering on {name} is off ({e}); received payload is copied once");
            Ok(Err(tap))
        }
    }
}
