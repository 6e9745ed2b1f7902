//! RACK's time-based loss detection (RFC 8985 section 6), for data in its
//! first transmission.
//!
//! A segment is lost once a segment sent after it has been delivered and
//! more than a reordering window has passed since: precisely, when
//! `xmit_ts(S) + RACK.rtt + reo_wnd <= now`, where RACK.rtt is the round
//! trip of the most recently sent segment that was delivered (SACKed), sent
//! at RACK.xmit_ts. Unlike RFC 6675's count of SACKed segments, this
//! notices the loss of a segment with only one or two segments after it,
//! and the reordering timer notices it when no further ACK comes.
//!
//! Invariants:
//! - The log holds the send times of first transmissions only, as
//!   contiguous ranges from `snd_una` up in sequence order, so their times
//!   never decrease along it (new data leaves in sequence order). That is
//!   what makes every verdict a prefix, "every unSACKed byte below `seq`
//!   is lost", which is the one form the scoreboard takes
//!   ([`Scoreboard::mark_lost_below`](super::scoreboard::Scoreboard::mark_lost_below)).
//! - Retransmissions are not logged: a delivered retransmission counts as
//!   its first transmission, which is older, so RACK.xmit_ts and the
//!   verdicts only come later than the RFC's, never sooner (no spurious
//!   loss from it). Lost retransmissions are left to the RTO.
//! - RACK.xmit_ts only moves forward, and RACK.rtt is taken with it.
//! - Bounded: at most [`MAX_RANGES`] ranges. Segments sent at one instant
//!   share a range, and when the log is full a new range joins the last
//!   one, which then takes the later time: coarser, but again only later
//!   verdicts. An empty log gives its memory back.
//! - reo_wnd is a quarter of the minimum RTT, never more than the SRTT
//!   (RFC 8985 6.2 step 4, without its adaptation to D-SACKs).

use crate::time::Instant;
use alloc::collections::VecDeque;
use core::time::Duration;
use nagare_wire::TcpSeqNumber;

/// Most send-time ranges kept per connection.
pub const MAX_RANGES: usize = 1024;

/// Capacity an emptied log keeps; anything larger is given back, so an
/// idle connection holds little for its past flights.
const KEEP_CAPACITY: usize = 4;

fn seq_lt(a: TcpSeqNumber, b: TcpSeqNumber) -> bool {
    (a - b) < 0
}

fn seq_le(a: TcpSeqNumber, b: TcpSeqNumber) -> bool {
    (a - b) <= 0
}

/// Data from the end of the range before (or `snd_una`) up to `end`,
/// first sent at `at`.
#[derive(Debug, Clone, Copy)]
struct Sent {
    end: TcpSeqNumber,
    at: Instant,
}

/// RACK's state for one connection.
#[derive(Debug, Clone)]
pub struct Rack {
    enabled: bool,
    sent: VecDeque<Sent>,
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent delivered data.
    latest: Option<(Instant, TcpSeqNumber)>,
    /// RACK.rtt.
    rtt: Duration,
    /// The reordering timer: when the next verdict falls due.
    timer_at: Option<Instant>,
}

impl Rack {
    /// Loss detection by time, doing nothing unless `enabled`.
    pub fn new(enabled: bool) -> Self {
        Rack { enabled, sent: VecDeque::new(), latest: None, rtt: Duration::ZERO, timer_at: None }
    }

    /// When the reordering timer fires, if armed.
    pub fn timer_at(&self) -> Option<Instant> {
        self.timer_at
    }

    /// Whether the reordering timer is due.
    pub fn timer_due(&self, now: Instant) -> bool {
        self.timer_at.is_some_and(|t| t <= now)
    }

    /// Ranges held.
    pub fn ranges(&self) -> usize {
        self.sent.len()
    }

    /// New data up to `end` went out for the first time at `now`.
    pub fn on_sent(&mut self, end: TcpSeqNumber, now: Instant) {
        if !self.enabled {
            return;
        }
        let full = self.sent.len() >= MAX_RANGES;
        if let Some(last) = self.sent.back_mut() {
            if !seq_lt(last.end, end) {
                return;
            }
            if last.at == now || full {
                *last = Sent { end, at: now };
                return;
            }
        }
        self.sent.push_back(Sent { end, at: now });
    }

    /// Forgets what lies below the new `snd_una`.
    pub fn advance(&mut self, snd_una: TcpSeqNumber) {
        while self.sent.front().is_some_and(|s| seq_le(s.end, snd_una)) {
            self.sent.pop_front();
        }
        if self.sent.is_empty() {
            self.timer_at = None;
            if self.sent.capacity() > KEEP_CAPACITY {
                self.sent = VecDeque::new();
            }
        }
    }

    /// Forgets everything (after a retransmission timeout, which resends
    /// it all).
    pub fn clear(&mut self) {
        *self = Rack::new(self.enabled);
    }

    /// When the byte `seq` was first sent, if it is in the log.
    fn sent_at(&self, seq: TcpSeqNumber) -> Option<Instant> {
        let k = self.sent.partition_point(|s| seq_le(s.end, seq));
        self.sent.get(k).map(|s| s.at)
    }

    /// An ACK arrived at `now` whose SACK information reaches up to
    /// `highest_sacked` (just past the highest SACKed byte): updates
    /// RACK.xmit_ts and RACK.rtt and returns the verdict, the sequence
    /// number below which every unSACKed byte is lost (if any is).
    pub fn on_ack(
        &mut self,
        now: Instant,
        snd_una: TcpSeqNumber,
        highest_sacked: Option<TcpSeqNumber>,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
    ) -> Option<TcpSeqNumber> {
        if !self.enabled {
            return None;
        }
        if let Some(high) = highest_sacked {
            if let Some(at) = self.sent_at(high - 1) {
                if self.latest.is_none_or(|(t, end)| at > t || (at == t && seq_lt(end, high))) {
                    self.latest = Some((at, high));
                    self.rtt = now.saturating_since(at);
                }
            }
        }
        self.detect(now, snd_una, min_rtt, srtt)
    }

    /// The reordering timer fired: the verdict now.
    pub fn on_timer(
        &mut self,
        now: Instant,
        snd_una: TcpSeqNumber,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
    ) -> Option<TcpSeqNumber> {
        self.timer_at = None;
        if !self.enabled {
            return None;
        }
        self.detect(now, snd_una, min_rtt, srtt)
    }

    /// RFC 8985 6.2's RACK_detect_loss over the log: every range sent
    /// before RACK's segment whose time is up is lost; the first whose time
    /// is not up yet arms the timer.
    fn detect(
        &mut self,
        now: Instant,
        snd_una: TcpSeqNumber,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
    ) -> Option<TcpSeqNumber> {
        self.timer_at = None;
        let (xmit_ts, rack_end) = self.latest?;
        let reo_wnd = match (min_rtt, srtt) {
            (Some(min), Some(srtt)) => (min / 4).min(srtt),
            (Some(min), None) => min / 4,
            _ => Duration::ZERO,
        };
        let mut lost_below = None;
        for s in &self.sent {
            if s.at > xmit_ts {
                break;
            }
            // Sent at the same instant as RACK's segment: only the bytes
            // below it were sent before it.
            let end = if s.at == xmit_ts && seq_lt(rack_end, s.end) { rack_end } else { s.end };
            let deadline = s.at + self.rtt + reo_wnd;
            if deadline > now {
                self.timer_at = Some(deadline);
                break;
            }
            lost_below = Some(end);
            if end != s.end {
                break;
            }
        }
        lost_below.filter(|&seq| seq_lt(snd_una, seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u32) -> TcpSeqNumber {
        TcpSeqNumber(n)
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    const RTT: Option<Duration> = Some(Duration::from_millis(20));

    /// Ten 1000-byte segments from 0, one each millisecond from t = 0.
    fn flight() -> Rack {
        let mut rack = Rack::new(true);
        for k in 0..10u32 {
            rack.on_sent(s((k + 1) * 1000), at(u64::from(k)));
        }
        rack
    }

    #[test]
    fn a_later_segment_delivered_after_the_reordering_window_marks_the_earlier_lost() {
        let mut rack = flight();
        // Segment 2 (sent at 2 ms) SACKed at 22 ms: RACK.rtt 20 ms,
        // reo_wnd 5 ms. Segments 0 and 1 are due at 25 and 26 ms.
        assert_eq!(rack.on_ack(at(22), s(0), Some(s(3000)), RTT, RTT), None);
        assert_eq!(rack.timer_at(), Some(at(25)));
        assert!(!rack.timer_due(at(24)) && rack.timer_due(at(25)));
        assert_eq!(rack.on_timer(at(25), s(0), RTT, RTT), Some(s(1000)));
        assert_eq!(rack.timer_at(), Some(at(26)));
        // Segment 8 SACKed at 28: everything sent by 3 ms is lost now.
        assert_eq!(rack.on_ack(at(28), s(0), Some(s(9000)), RTT, RTT), Some(s(4000)));
        assert_eq!(rack.timer_at(), Some(at(29)));
    }

    #[test]
    fn nothing_sent_after_the_delivered_segment_is_judged() {
        let mut rack = flight();
        // Segment 4 (sent at 4 ms) SACKed at 100 ms: RACK.rtt 96 ms.
        assert_eq!(rack.on_ack(at(100), s(0), Some(s(5000)), RTT, RTT), None);
        assert_eq!(rack.timer_at(), Some(at(101)));
        // However long after, segments 5 to 9 were sent after it.
        assert_eq!(rack.on_timer(at(500), s(0), RTT, RTT), Some(s(5000)));
        assert_eq!(rack.timer_at(), None);
        // An older delivery reported again does not move RACK back.
        assert_eq!(rack.on_ack(at(600), s(0), Some(s(2000)), RTT, RTT), Some(s(5000)));
        // Nor is anything judged below snd_una.
        assert_eq!(rack.on_ack(at(600), s(5000), Some(s(2000)), RTT, RTT), None);
    }

    #[test]
    fn a_burst_sent_at_one_instant_is_one_range_judged_below_the_delivered_bytes() {
        let mut rack = Rack::new(true);
        rack.on_sent(s(1000), at(0));
        rack.on_sent(s(2000), at(0));
        rack.on_sent(s(3000), at(0));
        assert_eq!(rack.ranges(), 1);
        // The last segment delivered 20 ms later; reo_wnd 5 ms.
        assert_eq!(rack.on_ack(at(20), s(0), Some(s(3000)), RTT, RTT), None);
        assert_eq!(rack.on_timer(at(25), s(0), RTT, RTT), Some(s(3000)));
    }

    #[test]
    fn bounded_cleared_and_off() {
        let mut rack = Rack::new(true);
        for k in 0..(MAX_RANGES as u32 + 100) {
            rack.on_sent(s((k + 1) * 100), at(u64::from(k)));
        }
        assert_eq!(rack.ranges(), MAX_RANGES);
        rack.advance(s((MAX_RANGES as u32 + 100) * 100));
        assert_eq!(rack.ranges(), 0);
        assert_eq!(rack.sent.capacity(), 0);
        let mut rack = flight();
        rack.on_ack(at(22), s(0), Some(s(3000)), RTT, RTT);
        rack.clear();
        assert_eq!((rack.ranges(), rack.timer_at()), (0, None));
        let mut off = Rack::new(false);
        off.on_sent(s(1000), at(0));
        assert_eq!(off.ranges(), 0);
        assert_eq!(off.on_ack(at(100), s(0), Some(s(1000)), RTT, RTT), None);
    }
}
