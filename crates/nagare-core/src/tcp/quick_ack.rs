//! When not to delay an ACK, as Linux's quick-ACK mode decides: the first
//! segments of data a connection receives, and the first after an idle
//! time longer than the RTO, are acknowledged at once. A sender in slow
//! start then grows its window by every segment, and a small first
//! exchange never waits for the delayed-ACK timer (the stall of a request
//! written in two pieces behind Nagle's algorithm).
//!
//! A connection that sends data within the delay after data came in is
//! interactive (Linux's ping-pong mode): its ACKs wait to ride on its
//! replies, quick or not, until a delayed ACK's timer fires with no reply
//! to carry it.

use crate::time::Instant;
use core::time::Duration;

/// The most ACKs sent at once in one quick-ACK mode (Linux's
/// `TCP_MAX_QUICKACKS`).
pub const MAX_QUICK_ACKS: u32 = 16;

/// The quick-ACK state of one connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuickAck {
    /// ACKs of new data still to send at once.
    left: u32,
    /// Replies follow the data received within the delay.
    interactive: bool,
    /// When in-order data last came.
    last_data: Option<Instant>,
}

impl QuickAck {
    /// In-order data came at `now`. At a connection's first data, or the
    /// first after an idle time past `rto`, quick-ACK mode starts: as many
    /// ACKs at once as half the receive `window` holds segments of `mss`,
    /// from 2 to [`MAX_QUICK_ACKS`].
    pub fn data_received(&mut self, now: Instant, window: usize, mss: usize, rto: Duration) {
        let idle = self.last_data.is_none_or(|t| now.saturating_since(t) > rto);
        if idle {
            let count = (window / (2 * mss.max(1))).clamp(2, MAX_QUICK_ACKS as usize) as u32;
            self.left = self.left.max(count);
        }
        self.last_data = Some(now);
    }

    /// Whether the data just received is acknowledged at once.
    pub fn ack_at_once(&self) -> bool {
        self.left > 0 && !self.interactive
    }

    /// Data was sent at `now`: within `delay` of the last data received,
    /// the connection is interactive.
    pub fn data_sent(&mut self, now: Instant, delay: Duration) {
        if self.last_data.is_some_and(|t| now.saturating_since(t) < delay) {
            self.interactive = true;
        }
    }

    /// A segment carrying an ACK went; `new_data` if it acknowledged data
    /// not acknowledged before.
    pub fn ack_sent(&mut self, new_data: bool) {
        if new_data {
            self.left = self.left.saturating_sub(1);
        }
    }

    /// The delayed-ACK timer fired: no reply carried the ACK in time, so
    /// the connection is not interactive.
    pub fn delayed_ack_fired(&mut self) {
        self.interactive = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1460;
    const RTO: Duration = Duration::from_millis(200);
    const DELAY: Duration = Duration::from_millis(40);

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn the_first_data_is_acknowledged_at_once_as_many_times_as_the_window_allows() {
        let mut q = QuickAck::default();
        assert!(!q.ack_at_once(), "nothing received yet");
        q.data_received(at(0), 256 * 1024, MSS, RTO);
        for _ in 0..MAX_QUICK_ACKS {
            assert!(q.ack_at_once());
            q.ack_sent(true);
        }
        assert!(!q.ack_at_once(), "the count is spent");
        q.data_received(at(1), 256 * 1024, MSS, RTO);
        assert!(!q.ack_at_once(), "data that keeps coming starts no new mode");

        // A small window: two at least.
        let mut q = QuickAck::default();
        q.data_received(at(0), 1000, MSS, RTO);
        q.ack_sent(true);
        assert!(q.ack_at_once());
        q.ack_sent(true);
        assert!(!q.ack_at_once());
    }

    #[test]
    fn an_ack_of_nothing_new_spends_nothing() {
        let mut q = QuickAck::default();
        q.data_received(at(0), 4 * MSS, MSS, RTO);
        q.ack_sent(false);
        q.ack_sent(false);
        q.ack_sent(true);
        assert!(q.ack_at_once(), "one of two spent");
    }

    #[test]
    fn data_after_an_idle_time_past_the_rto_starts_quick_acks_again() {
        let mut q = QuickAck::default();
        q.data_received(at(0), 4 * MSS, MSS, RTO);
        q.ack_sent(true);
        q.ack_sent(true);
        q.data_received(at(150), 4 * MSS, MSS, RTO);
        assert!(!q.ack_at_once(), "150 ms is within the RTO");
        q.data_received(at(400), 4 * MSS, MSS, RTO);
        assert!(q.ack_at_once(), "250 ms idle is past it");
    }

    #[test]
    fn a_reply_within_the_delay_makes_acks_wait_until_the_timer_fires_alone() {
        let mut q = QuickAck::default();
        q.data_sent(at(0), DELAY);
        q.data_received(at(10), 256 * 1024, MSS, RTO);
        assert!(q.ack_at_once(), "a send before any data says nothing");
        q.data_sent(at(60), DELAY);
        assert!(q.ack_at_once(), "a reply 50 ms on is not within the delay");
        q.data_received(at(70), 256 * 1024, MSS, RTO);
        q.data_sent(at(75), DELAY);
        assert!(!q.ack_at_once(), "interactive: the ACK rides on the reply");
        q.delayed_ack_fired();
        assert!(q.ack_at_once(), "no reply came in time");
    }
}
