//! The PacketFlow filter: at the earliest point netd sees a received
//! frame, before the engine processes any of its batch, a UDP datagram is
//! dropped
//!
//! - for a receiver that is not of high priority, with the probability of
//!   the last period's receive-path drop rate, while the receive path is
//!   dropping (the paper's conditions A and B1), and
//! - for a socket whose queue would not take it (A and B2): the engine
//!   would drop it there anyway, after the work of getting it there.
//!
//! TCP is never dropped here: a dropped segment comes back as a
//! retransmission, more work and not less. High priority is the highest
//! (numerically least) priority among the UDP sockets datagrams came to
//! and the clients whose TCP connections received segments, in this
//! period or the last, or a client the scheduler has boosted.
//!
//! The frame's datagram, its socket and the datagrams of the batch ahead
//! of it are found once for every module (`super::inbound`); the filter
//! keeps the drop probability and the best priority, and draws.

use super::receivers::{Destination, Receivers};
use nagare_core::Interface;
use nagare_dev::tap_filter::MAX_SHED_PORTS;
use nagare_dev::UdpShed;

/// No receiver seen in a period.
const NO_PRIORITY: u8 = u8::MAX;

/// The filter's state: the drop probability of this period, the draw,
/// the receivers' best priority.
#[derive(Debug)]
pub(crate) struct Filter {
    /// The drop probability for condition B1, in 2^-32 units (2^32: every
    /// one).
    threshold: u64,
    /// Drops and frames seen in the last period, for the report.
    rate: (u64, u64),
    /// Frames seen in this period.
    seen: u64,
    /// xorshift64* state (never 0).
    state: u64,
    /// The best priority among receivers in this period and the last.
    best_now: u8,
    best_before: u8,
    /// The device sheds this period's low-priority datagrams itself (a
    /// TAP, before its ring): B1 is not applied a second time here.
    shed_by_device: bool,
}

impl Filter {
    /// A filter drawing from `seed`, with the receive path not dropping.
    pub fn new(seed: u64) -> Filter {
        Filter {
            threshold: 0,
            rate: (0, 0),
            seen: 0,
            state: seed | 1,
            best_now: NO_PRIORITY,
            best_before: NO_PRIORITY,
            shed_by_device: false,
        }
    }

    /// A receiver of `priority` (a client whose TCP connections received
    /// segments) was seen in this period.
    pub fn note_receiver(&mut self, priority: u8) {
        self.best_now = self.best_now.min(priority);
    }

    /// Ends a period in which the receive path dropped `drops` frames:
    /// the next period drops datagrams for receivers of less than high
    /// priority with probability drops / (drops + frames seen).
    pub fn end_period(&mut self, drops: u64) {
        let total = drops.saturating_add(self.seen);
        self.threshold = if total == 0 { 0 } else { ((u128::from(drops) << 32) / u128::from(total)) as u64 };
        self.rate = (drops, self.seen);
        self.seen = 0;
        self.best_before = self.best_now;
        self.best_now = NO_PRIORITY;
    }

    /// The last period's drops and frames seen.
    pub fn last_period(&self) -> (u64, u64) {
        self.rate
    }

    /// A frame is seen (every frame of the period counts, whatever it
    /// is).
    pub fn see(&mut self) {
        self.seen += 1;
    }

    /// Whether a datagram for a receiver at `dest`, which its queue would
    /// take, is dropped for its low priority while the receive path drops
    /// (A and B1); its priority counts towards the best of the period.
    /// `shed_there`: a device that sheds ([`Filter::set_shed_by_device`])
    /// sheds datagrams of this kind (its program reads IPv4 alone, so an
    /// IPv6 datagram is B1's here whatever the device does).
    pub fn drops_low_priority(&mut self, dest: Destination, shed_there: bool) -> bool {
        self.best_now = self.best_now.min(dest.priority);
        let high = dest.boosted || dest.priority <= self.best_now.min(self.best_before);
        let device_sheds = self.shed_by_device && shed_there;
        !high && !device_sheds && self.threshold > 0 && u64::from(self.draw()) < self.threshold
    }

    /// What the device may shed this period, just begun
    /// ([`Filter::end_period`]): the ports of the UDP sockets not of high
    /// priority, each shedding a quarter more than the drop probability
    /// (the rest it admits rounded to a 64th, so that a device is not
    /// given a new program each period for a drop rate that barely
    /// moved); nothing while the receive path
    /// does not drop, or when more sockets are of low priority than a
    /// device lists (netd's own B1 then drops for them all).
    pub fn shed(&self, receivers: &Receivers, iface: &Interface) -> UdpShed {
        if self.threshold == 0 {
            return UdpShed::default();
        }
        const STEP: u64 = 1 << 26;
        // A quarter more than the drop rate: shedding exactly it would
        // bring the ring to just full, where the frames that must not be
        // lost (TCP, high priority) still are.
        let shed = (self.threshold + self.threshold / 4).min(1 << 32);
        let admit = (((1u64 << 32) - shed) / STEP * STEP).min(u64::from(u32::MAX)) as u32;
        let mut low: Vec<(u8, u16)> = receivers
            .iter()
            .filter(|(_, dest)| !dest.boosted && dest.priority > self.best_before)
            .filter_map(|(h, dest)| iface.udp_ref().socket(h).map(|u| (dest.priority, u.local().port())))
            .collect();
        if low.len() > MAX_SHED_PORTS {
            return UdpShed::default();
        }
        low.sort_unstable();
        low.dedup_by_key(|&mut (_, port)| port);
        UdpShed { ports: low.into_iter().map(|(_, port)| (port, admit)).collect() }
    }

    /// Whether the device sheds for this filter ([`Filter::shed`]).
    pub fn set_shed_by_device(&mut self, on: bool) {
        self.shed_by_device = on;
    }

    /// The next pseudo-random 32 bits (xorshift64*; not for secrets).
    fn draw(&mut self) -> u32 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}
