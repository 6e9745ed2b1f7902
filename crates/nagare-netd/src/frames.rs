//! Where netd's frames go: a device netd calls from its own loop (a
//! multi-queue TAP among them, each client's queue read into its region),
//! or a driver (a process or a thread of its own) through the driver
//! region.
//!
//! Both are a `Device` to the host step netd runs (`nagare_host::Host`);
//! this adds what only a driver has (clients attached to it, completions
//! it posts, its death and restart) as calls that do nothing for a device
//! called inline.

use crate::driver::{DriverLink, DriverLinkStats, DriverStats};
use crate::session::Session;
use crate::tap_queues::{QueueStats, TapQueues};
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::tcp::syn_guard::SynFilter;
use nagare_core::{Capabilities, Instant};
use nagare_dev::{Device, DeviceStats, UdpShed};
use nagare_ipc::Descriptor;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, RawFd};

/// What netd sends and receives frames through.
pub(crate) enum FramePath {
    /// A device called from netd's loop.
    Inline(Box<dyn Device>),
    /// A multi-queue TAP netd reads itself, steering each client's flows
    /// into its region.
    Queues(Box<TapQueues>),
    /// A driver, a process or a thread of its own.
    Driver(Box<DriverLink>),
}

impl Device for FramePath {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        self.device_mut().receive_batch(pool, out, max, now)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        self.device_mut().transmit_batch(frames, now)
    }

    /// An inline TAP takes the filter; a driver does not (its device is
    /// in another process), and the engine applies the filter itself.
    fn set_syn_filter(&mut self, filter: &SynFilter) -> io::Result<()> {
        self.device_mut().set_syn_filter(filter)
    }

    /// An inline TAP sheds; a driver's link does not (netd gives the TAP
    /// it holds for the driver the program instead).
    fn set_udp_shed(&mut self, shed: &UdpShed) -> io::Result<()> {
        self.device_mut().set_udp_shed(shed)
    }

    fn capabilities(&self) -> Capabilities {
        self.device().capabilities()
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.device().raw_fd()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.device().poll_at()
    }

    fn stats(&self) -> DeviceStats {
        self.device().stats()
    }
}

impl FramePath {
    fn device(&self) -> &dyn Device {
        match self {
            FramePath::Inline(d) => d.as_ref(),
            FramePath::Queues(d) => d.as_ref(),
            FramePath::Driver(d) => d.as_ref(),
        }
    }

    fn device_mut(&mut self) -> &mut dyn Device {
        match self {
            FramePath::Inline(d) => d.as_mut(),
            FramePath::Queues(d) => d.as_mut(),
            FramePath::Driver(d) => d.as_mut(),
        }
    }

    /// The driver, if frames go through one.
    pub fn driver(&self) -> Option<&DriverLink> {
        match self {
            FramePath::Driver(d) => Some(d),
            FramePath::Inline(_) | FramePath::Queues(_) => None,
        }
    }

    /// Tells the driver about a new client (its region and wake-up).
    pub fn attach(&mut self, s: &Session) {
        if let FramePath::Driver(d) = self {
            d.attach(s.conn.id, s.conn.region.fd(), s.conn.region.layout().config, s.conn.client_wakeup.as_fd());
        }
    }

    /// Tells the driver a client is gone.
    pub fn detach(&mut self, key: u64) {
        if let FramePath::Driver(d) = self {
            d.detach(key);
        }
    }

    /// Notices a dead driver and starts another, attaching every client
    /// in `sessions`. Returns whether anything changed.
    pub fn check_driver(&mut self, sessions: &[Session]) -> bool {
        match self {
            FramePath::Driver(d) => {
                d.check(sessions.iter().map(|s| {
                    (s.conn.id, s.conn.region.fd(), s.conn.region.layout().config, s.conn.client_wakeup.as_fd())
                }))
            }
            FramePath::Inline(_) | FramePath::Queues(_) => false,
        }
    }

    /// Queues completion `c` of client `key` for the driver its frame was
    /// `handed` to (its generation) to post behind that frame (direct
    /// return); false if it was handed to none, or that driver no longer
    /// runs: netd posts it itself.
    pub fn post_return(&mut self, handed: Option<u64>, key: u64, c: Descriptor) -> bool {
        match self {
            FramePath::Driver(d) if handed.is_some() && d.generation() == handed => d.post_return(key, c),
            _ => false,
        }
    }

    /// Completions a dead driver left for netd to post.
    pub fn take_orphans(&mut self) -> Vec<(u64, Descriptor)> {
        match self {
            FramePath::Driver(d) => d.take_orphans(),
            FramePath::Inline(_) | FramePath::Queues(_) => Vec::new(),
        }
    }

    /// Before netd sleeps: true if something arrived meanwhile (do not
    /// sleep).
    pub fn prepare_sleep(&mut self) -> bool {
        match self {
            FramePath::Driver(d) => d.prepare_sleep(),
            FramePath::Queues(d) => d.busy(),
            FramePath::Inline(_) => false,
        }
    }

    /// What netd's sleep watches: the device's descriptor, or the driver's
    /// receive-ring eventfd and control socket (-1: nothing).
    pub fn sleep_fds(&self) -> [RawFd; 2] {
        match self {
            FramePath::Inline(d) => [d.raw_fd().unwrap_or(-1), -1],
            FramePath::Queues(d) => [d.raw_fd().unwrap_or(-1), -1],
            FramePath::Driver(d) => d.sleep_fds(),
        }
    }

    /// After netd's sleep; `woken`: the first of [`FramePath::sleep_fds`]
    /// was readable.
    pub fn after_sleep(&mut self, woken: bool) {
        if let FramePath::Driver(d) = self {
            d.after_sleep(woken);
        }
    }

    /// The driver's pid (none while it is being started again), netd's
    /// counters of it and its own, when frames go through a driver.
    pub fn report(&self) -> Option<(Option<u32>, DriverLinkStats, DriverStats)> {
        self.driver().map(|d| (d.pid(), d.link_stats(), d.driver_counters()))
    }

    /// Where netd reads a multi-queue TAP itself, its clients' queues are
    /// read in the order of `ranks` (client, rank; lowest first) from now
    /// on; nothing otherwise.
    pub fn rank_clients(&mut self, ranks: impl Iterator<Item = (u64, (u8, u8))>) {
        if let FramePath::Queues(d) = self {
            d.rank_clients(ranks);
        }
    }

    /// Where netd reads a multi-queue TAP itself, the queues of `clients`
    /// are left unread until the next call (PacketFlow's queue hold);
    /// nothing otherwise.
    pub fn hold_clients(&mut self, clients: impl Iterator<Item = u64>) {
        if let FramePath::Queues(d) = self {
            d.hold_clients(clients);
        }
    }

    /// Whether each client's frames come on a queue of their own that
    /// netd reads, which a hold can leave unread.
    pub fn has_client_queues(&self) -> bool {
        matches!(self, FramePath::Queues(_))
    }

    /// What steering did, when netd reads a multi-queue TAP itself.
    pub fn queue_report(&self) -> Option<QueueStats> {
        match self {
            FramePath::Queues(d) => Some(d.queue_stats()),
            _ => None,
        }
    }
}
