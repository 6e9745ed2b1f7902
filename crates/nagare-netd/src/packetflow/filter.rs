//! The PacketFlow filter: at the earliest point netd sees a received
//! frame, before the engine processes any of its batch, a UDP datagram is
//! dropped
//!
//! - for a receiver that is not of high priority, with the filter's drop
//!   probability, while the receive path is dropping (the paper's
//!   conditions A and B1), and
//! - for a socket whose queue would not take it (B2, whether or not the
//!   receive path drops: A adds nothing there): the engine
//!   would drop it there anyway, after the work of getting it there.
//!
//! TCP is never dropped here: a dropped segment comes back as a
//! retransmission, more work and not less. High priority is the highest
//! (numerically least) priority among the UDP sockets datagrams came to
//! and the clients whose TCP connections received segments, in this
//! period or the last, or a client the scheduler has boosted.
//!
//! The paper drops with the last period's drop rate. Under heavy overload
//! that rate is most of what is sent, and it drops low-priority traffic
//! even when that frees nothing for the high-priority receivers (their own
//! process is what holds them back): the total delivered fell to what the
//! best receiver alone took (a device shedding before its ring, whose own
//! drops count among the receive path's, kept the rate there). So the
//! probability is a controller of its own, adjusted once a period: it
//! grows by a quarter of what is left (at least a 64th) while the receive
//! path drops, netd is saturated (at least seven reads of the device in
//! eight that find frames find a full batch) and the high-priority receivers take what
//! reaches them (fewer than one of their datagrams in 16 finds its queue
//! full), to sixty-three sixty-fourths at most (a low-priority receiver
//! keeps a 64th of its traffic); otherwise it loses a quarter, and under a
//! 64th it is none. It
//! settles where netd just keeps up, or where the best receiver takes all
//! it can: netd works at capacity, and what it cannot take is
//! low-priority traffic. While a high-priority client receives TCP in
//! bulk (at least [`BULK_SEGMENTS`] segments in the period) and the receive
//! path drops, the probability is at least [`BULK_SHED`] from the end of
//! that period on, netd saturated or not: TCP takes whatever CPU and netd
//! time the shed frees (the low-priority receivers' processes share its
//! CPUs), while a low-priority receiver still gets a sixteenth of what is
//! sent to it. Held by that rule alone, the shed is left off one period in
//! [`BULK_PROBE_EVERY`] + 1, and comes back only if that period drops too:
//! a device's shed counts among the receive path's drops, and would
//! otherwise keep itself on. A device that sheds (a TAP, before its ring) is
//! given the low-priority sockets' ports with that probability, and netd's
//! own B1 stands aside for the datagrams it sheds.
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

/// A probability of one, in the filter's 2^-32 units.
const ONE: u64 = 1 << 32;

/// The smallest step of the drop probability (a 64th): below it, none.
const STEP: u64 = ONE >> 6;

/// Segments a client's TCP connections receive in a period for it to
/// count as receiving in bulk (64 in a 20 ms period: about 4.6 MB/s of
/// full segments); an interactive connection stays below.
pub(crate) const BULK_SEGMENTS: u64 = 64;

/// The most the drop probability grows to: a low-priority receiver is
/// never starved to nothing by the filter, but keeps a 64th of what is
/// sent to it.
const CEILING: u64 = ONE - STEP;

/// The least drop probability while a bulk TCP receiver drives it:
/// fifteen sixteenths, so that a low-priority receiver keeps a sixteenth
/// of its traffic.
const BULK_SHED: u64 = ONE - (ONE >> 4);

/// Periods the bulk TCP rule alone holds its shed before one period
/// without it (25: 20 ms in every half second). On a TAP the shed's own
/// drops count among the receive path's, so only a period without it says
/// whether the load still calls for it.
pub(crate) const BULK_PROBE_EVERY: u32 = 25;

/// The filter's state: the drop probability of this period, the draw,
/// the receivers' best priority.
#[derive(Debug)]
pub(crate) struct Filter {
    /// The drop probability for condition B1, in 2^-32 units (2^32: every
    /// one); the device sheds with it too.
    probability: u64,
    /// Drops and frames seen in the last period, for the report.
    rate: (u64, u64),
    /// Frames seen in this period.
    seen: u64,
    /// xorshift64* state (never 0).
    state: u64,
    /// The best priority among receivers in this period and the last.
    best_now: u8,
    best_before: u8,
    /// The best priority among clients receiving TCP in bulk in this
    /// period.
    bulk_tcp: u8,
    /// Periods in a row the bulk TCP rule alone has held the shed.
    bulk_held: u32,
    /// The device sheds this period's low-priority datagrams itself (a
    /// TAP, before its ring): B1 is not applied a second time here.
    shed_by_device: bool,
    /// Reads of the device in this period, and those that found a full
    /// batch.
    reads: u64,
    full_reads: u64,
    /// Datagrams for high-priority receivers in this period, and those of
    /// them whose queue was full.
    high_seen: u64,
    high_overflows: u64,
}

impl Filter {
    /// A filter drawing from `seed`, with the receive path not dropping.
    pub fn new(seed: u64) -> Filter {
        Filter {
            probability: 0,
            rate: (0, 0),
            seen: 0,
            state: seed | 1,
            best_now: NO_PRIORITY,
            best_before: NO_PRIORITY,
            bulk_tcp: NO_PRIORITY,
            bulk_held: 0,
            shed_by_device: false,
            reads: 0,
            full_reads: 0,
            high_seen: 0,
            high_overflows: 0,
        }
    }

    /// netd read frames from the device, a full batch of them if `full`
    /// (the device may hold more). A read that finds nothing is not
    /// counted: it says nothing of how much netd keeps up under load.
    pub fn note_read(&mut self, full: bool) {
        self.reads += 1;
        self.full_reads += u64::from(full);
    }

    /// A datagram for the receiver at `dest` found its queue full.
    pub fn note_overflow(&mut self, dest: Destination) {
        if self.is_high(dest) {
            self.high_seen += 1;
            self.high_overflows += 1;
        }
    }

    /// A receiver of `priority` (a client whose TCP connections received
    /// `segments` segments) was seen in this period.
    pub fn note_receiver(&mut self, priority: u8, segments: u64) {
        self.best_now = self.best_now.min(priority);
        if segments >= BULK_SEGMENTS {
            self.bulk_tcp = self.bulk_tcp.min(priority);
        }
    }

    /// Ends a period in which the receive path dropped `drops` frames,
    /// and adjusts the drop probability of the next (see the module's
    /// documentation).
    pub fn end_period(&mut self, drops: u64) {
        self.rate = (drops, self.seen);
        let saturated = self.reads > 0 && self.full_reads.saturating_mul(8) >= self.reads.saturating_mul(7);
        let high_keep_up = self.high_overflows.saturating_mul(16) < self.high_seen.max(1);
        let bulk = self.bulk_tcp != NO_PRIORITY && self.bulk_tcp <= self.best_now.min(self.best_before);
        let p = self.probability;
        // Nothing grows while the receive path keeps everything or the
        // best receivers lose at their own queues.
        let dropping = drops > 0 && high_keep_up;
        let bulk_shed = if bulk { BULK_SHED } else { 0 };
        let mut next = match (dropping, saturated, bulk) {
            // Towards where netd just keeps up.
            (true, true, _) => (p + ((ONE - p) / 4).max(STEP)).min(CEILING).max(bulk_shed),
            // The shed a bulk TCP receiver calls for, at once: a ramp would
            // only leave it the CPU later (a transfer of 100 000 segments
            // takes three periods here).
            (true, false, true) => (p - p / 4).max(BULK_SHED),
            _ if p - p / 4 < STEP => 0,
            _ => p - p / 4,
        };
        if dropping && !saturated && bulk {
            self.bulk_held += 1;
            if self.bulk_held > BULK_PROBE_EVERY {
                // A period without the shed: its drops are the load's.
                self.bulk_held = 0;
                next = 0;
            }
        } else {
            self.bulk_held = 0;
        }
        self.probability = next;
        (self.reads, self.full_reads, self.high_seen, self.high_overflows) = (0, 0, 0, 0);
        self.seen = 0;
        self.best_before = self.best_now;
        self.best_now = NO_PRIORITY;
        self.bulk_tcp = NO_PRIORITY;
    }

    /// Whether a receiver at `dest` is of high priority: boosted, or of
    /// the best priority receiving in this period or the last.
    fn is_high(&self, dest: Destination) -> bool {
        dest.boosted || dest.priority <= self.best_now.min(self.best_before)
    }

    /// The last period's drops and frames seen.
    pub fn last_period(&self) -> (u64, u64) {
        self.rate
    }

    /// The drop probability, in 2^-32 units.
    pub fn probability(&self) -> u64 {
        self.probability
    }

    /// Sets the drop probability, as periods of overload would.
    #[cfg(test)]
    pub fn set_probability(&mut self, p: u64) {
        self.probability = p.min(ONE);
    }

    /// A frame is seen (every frame of the period counts, whatever it
    /// is).
    pub fn see(&mut self) {
        self.seen += 1;
    }

    /// Whether a datagram for a receiver at `dest`, which its queue would
    /// take, is dropped for its low priority while the receive path drops
    /// (A and B1); its priority counts towards the best of the period.
    /// None is while a device sheds ([`Filter::set_shed_by_device`]): its
    /// program reads every datagram the filter does (IPv4 unfragmented,
    /// IPv6 with the UDP header after the fixed header) and drew for it.
    pub fn drops_low_priority(&mut self, dest: Destination) -> bool {
        self.best_now = self.best_now.min(dest.priority);
        let high = self.is_high(dest);
        self.high_seen += u64::from(high);
        !high && !self.shed_by_device && self.probability > 0 && u64::from(self.draw()) < self.probability
    }

    /// What the device may shed this period, just begun
    /// ([`Filter::end_period`]): the ports of the UDP sockets not of high
    /// priority, each shed with the drop probability (the rest admitted,
    /// rounded to a 64th, so that a device is not given a new program each
    /// period for a probability that barely moved); nothing while that is
    /// none, or when more sockets are of low priority than a device lists
    /// (netd's own B1 then drops for them all).
    pub fn shed(&self, receivers: &Receivers, iface: &Interface) -> UdpShed {
        if self.probability == 0 {
            return UdpShed::default();
        }
        let admit = ((ONE - self.probability) / STEP * STEP).min(u64::from(u32::MAX)) as u32;
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
