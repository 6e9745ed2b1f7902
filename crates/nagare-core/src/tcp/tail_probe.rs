//! Tail loss probes (RFC 8985 section 7) and the losses a probe reveals.
//!
//! A segment lost at the end of a flight has no later segments behind it
//! to bring duplicate ACKs or SACK blocks, so fast retransmit never learns
//! of it and only the retransmission timeout (200 ms at least, and often
//! far more than a round trip) would repair it. The probe timeout (PTO)
//! fires about two round trips after the last transmission instead. The
//! probe is one segment of new data if there is some and the peer's window
//! admits it, else the last segment sent, again; the peer's answer either
//! acknowledges everything (the probe repaired a single loss) or SACKs the
//! probe and shows the holes below it, which starts SACK loss recovery.
//!
//! Invariants:
//! - A probe is armed only while data is outstanding in the open state:
//!   the caller says whether the connection is eligible (no loss recovery,
//!   nothing SACKed beyond `snd_una`, no retransmission timeout since the
//!   last new acknowledgment), and no earlier probe is unresolved.
//! - PTO = 2 SRTT, plus the peer's worst-case delayed ACK when one
//!   segment is in flight, at least [`MIN_PTO`], 1 s without an SRTT.
//! - The probe never fires after the retransmission timer would
//!   (PTO = min(PTO, RTO), RFC 8985 7.2), and the caller re-arms the RTO
//!   when a probe goes, so the RTO stays the last resort.
//! - At most one probe per tail: from the probe until an ACK resolves it
//!   (`outstanding`), no other probe is armed (RFC 8985 7.3).
//! - A probe revealing a hole is RACK's rule (RFC 8985 6.2), not a guess:
//!   every segment sent before the probe was sent at least one PTO
//!   (2 SRTT) before it, so once the probe is SACKed, RACK.rtt plus any
//!   reordering window (at most SRTT, RFC 8985 6.2 step 4) has passed for
//!   each unSACKed segment below it: every one of them is lost.
//! - A probe that resent data and whose loss repair is confirmed (an ACK
//!   beyond it, no D-SACK of it) is reported once, so the caller reduces
//!   the congestion window as fast recovery would (RFC 8985 7.4).

use crate::time::Instant;
use core::time::Duration;
use nagare_wire::TcpSeqNumber;

/// The worst-case delay of an ACK the peer delays (RFC 8985 7.2's
/// WCDelAckT): added when only one segment is in flight, since a lone
/// segment's ACK may be held that long.
pub const WORST_CASE_DELAYED_ACK: Duration = Duration::from_millis(200);

/// The PTO when no RTT has been measured (RFC 8985 7.2).
pub const PTO_WITHOUT_RTT: Duration = Duration::from_secs(1);

/// The shortest PTO (as Linux): on a path of a few microseconds, twice
/// the SRTT is shorter than the time the peer takes to answer at all.
pub const MIN_PTO: Duration = Duration::from_millis(10);

/// What a probe sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// One segment of new data, past the congestion window if need be.
    NewData,
    /// The last segment sent again, from `seq` to the highest sequence
    /// number sent.
    Retransmit {
        /// Where the retransmission starts.
        seq: TcpSeqNumber,
    },
}

/// A probe not yet resolved by an ACK (RFC 8985's TLP.end_seq and
/// TLP.is_retrans).
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    start: TcpSeqNumber,
    /// The highest sequence number sent, plus one, once the probe went.
    end: TcpSeqNumber,
    retransmission: bool,
}

/// The tail loss probe of one connection.
#[derive(Debug, Clone)]
pub struct TailLossProbe {
    enabled: bool,
    probe_at: Option<Instant>,
    outstanding: Option<Outstanding>,
    /// A new-data probe waits for the next dispatch.
    allowance: bool,
}

fn seq_lt(a: TcpSeqNumber, b: TcpSeqNumber) -> bool {
    (a - b) < 0
}

impl TailLossProbe {
    /// A probe machine, doing nothing unless `enabled`.
    pub fn new(enabled: bool) -> Self {
        TailLossProbe { enabled, probe_at: None, outstanding: None, allowance: false }
    }

    /// When the probe fires, if armed.
    pub fn probe_at(&self) -> Option<Instant> {
        self.probe_at
    }

    /// Whether the probe is due.
    pub fn due(&self, now: Instant) -> bool {
        self.probe_at.is_some_and(|t| t <= now)
    }

    /// Whether a probe was sent and no ACK has resolved it yet.
    pub fn is_outstanding(&self) -> bool {
        self.outstanding.is_some()
    }

    /// (Re)arms the probe after new data went out or new data was
    /// acknowledged (RFC 8985 7.2), or disarms it when the connection is not
    /// `eligible`, nothing is in flight or a probe is unresolved. `flight`
    /// is the bytes outstanding, `segment` the size of one segment and
    /// `rto_at` when the retransmission timer fires.
    pub fn arm(
        &mut self,
        now: Instant,
        eligible: bool,
        srtt: Option<Duration>,
        flight: usize,
        segment: usize,
        rto_at: Option<Instant>,
    ) {
        if !self.enabled || !eligible || flight == 0 || self.outstanding.is_some() {
            self.probe_at = None;
            return;
        }
        let pto = match srtt {
            Some(srtt) if flight <= segment => srtt * 2 + WORST_CASE_DELAYED_ACK,
            Some(srtt) => srtt * 2,
            None => PTO_WITHOUT_RTT,
        };
        let at = now + pto.max(MIN_PTO);
        self.probe_at = Some(rto_at.map_or(at, |rto| at.min(rto)));
    }

    /// Forgets the timer and any unresolved probe (a retransmission
    /// timeout or loss recovery takes over).
    pub fn forget(&mut self) {
        self.probe_at = None;
        self.outstanding = None;
        self.allowance = false;
    }

    /// The probe timer fired: what to send, if anything. `eligible` is as
    /// for [`arm`](Self::arm), checked again since things may have changed;
    /// `new_len` is how many bytes of new data the peer's window admits
    /// (at most one segment, 0 if none), `segment` the size of one.
    pub fn fire(
        &mut self,
        eligible: bool,
        snd_una: TcpSeqNumber,
        snd_max: TcpSeqNumber,
        new_len: usize,
        segment: usize,
    ) -> Option<Probe> {
        self.probe_at = None;
        if !self.enabled || !eligible || self.outstanding.is_some() || !seq_lt(snd_una, snd_max) {
            return None;
        }
        if new_len > 0 {
            self.outstanding = Some(Outstanding { start: snd_max, end: snd_max + new_len, retransmission: false });
            self.allowance = true;
            return Some(Probe::NewData);
        }
        let back = usize::try_from(snd_max - snd_una).unwrap_or(0).min(segment.max(1));
        let seq = snd_max - back;
        self.outstanding = Some(Outstanding { start: seq, end: snd_max, retransmission: true });
        Some(Probe::Retransmit { seq })
    }

    /// Room past the congestion window for the one segment of a new-data
    /// probe: `segment` once after [`Probe::NewData`], then 0.
    pub fn take_allowance(&mut self, segment: usize) -> usize {
        if core::mem::take(&mut self.allowance) {
            segment
        } else {
            0
        }
    }

    /// Whether the SACK information shows the probe delivered: then by
    /// RACK's rule every unSACKed byte below the probe is lost (see the
    /// invariants above), and this is where the probe starts.
    /// `highest_sacked` is the sequence number just past the highest
    /// SACKed byte.
    pub fn revealed_loss(&self, highest_sacked: Option<TcpSeqNumber>) -> Option<TcpSeqNumber> {
        match (self.outstanding, highest_sacked) {
            (Some(probe), Some(high)) if seq_lt(probe.start, high) => Some(probe.start),
            _ => None,
        }
    }

    /// Resolves the probe with an ACK of `ack` (RFC 8985 7.4, as Linux's
    /// tcp_process_tlp_ack). `advanced`: the ACK acknowledged new data;
    /// `sacked`: its SACK blocks covered new data; `dsack`: its D-SACK
    /// block, if any. True when the probe repaired a loss, so the caller
    /// must respond as to a congestion event.
    pub fn on_ack(&mut self, ack: TcpSeqNumber, advanced: bool, sacked: bool, dsack: Option<(u32, u32)>) -> bool {
        let Some(probe) = self.outstanding else {
            return false;
        };
        if seq_lt(ack, probe.end) {
            return false;
        }
        if !probe.retransmission {
            // New data was delivered: nothing was repaired.
            self.outstanding = None;
            return false;
        }
        let probe_duplicated = dsack.is_some_and(|(left, right)| {
            let (left, right) = (TcpSeqNumber(left), TcpSeqNumber(right));
            seq_lt(left, probe.end) && seq_lt(probe.start, right)
        });
        if probe_duplicated {
            // The original and the probe both arrived.
            self.outstanding = None;
            return false;
        }
        if seq_lt(probe.end, ack) {
            // Acknowledged beyond the probe with no D-SACK for it: the
            // probe was what arrived, so it repaired a loss.
            self.outstanding = None;
            return true;
        }
        if !advanced && !sacked {
            // A pure duplicate ACK at the probe's end: the original had
            // arrived already and the probe made the peer say so again.
            self.outstanding = None;
        }
        false
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

    const MSS: usize = 1000;

    #[test]
    fn pto_is_two_srtt_bounded_by_the_rto() {
        let mut tlp = TailLossProbe::new(true);
        let srtt = Some(Duration::from_millis(20));
        tlp.arm(at(0), true, srtt, 5 * MSS, MSS, Some(at(300)));
        assert_eq!(tlp.probe_at(), Some(at(40)));
        // One segment in flight: the peer may delay its ACK.
        tlp.arm(at(0), true, srtt, MSS, MSS, Some(at(300)));
        assert_eq!(tlp.probe_at(), Some(at(240)));
        // Never after the RTO.
        tlp.arm(at(0), true, srtt, MSS, MSS, Some(at(210)));
        assert_eq!(tlp.probe_at(), Some(at(210)));
        // No RTT yet: one second.
        tlp.arm(at(0), true, None, 5 * MSS, MSS, None);
        assert_eq!(tlp.probe_at(), Some(at(1000)));
        // A path of microseconds: the floor.
        tlp.arm(at(0), true, Some(Duration::from_micros(30)), 5 * MSS, MSS, None);
        assert_eq!(tlp.probe_at(), Some(at(0) + MIN_PTO));
    }

    #[test]
    fn not_armed_when_ineligible_idle_disabled_or_unresolved() {
        let srtt = Some(Duration::from_millis(20));
        let mut tlp = TailLossProbe::new(true);
        tlp.arm(at(0), false, srtt, 5 * MSS, MSS, None);
        assert_eq!(tlp.probe_at(), None);
        tlp.arm(at(0), true, srtt, 0, MSS, None);
        assert_eq!(tlp.probe_at(), None);
        let mut off = TailLossProbe::new(false);
        off.arm(at(0), true, srtt, 5 * MSS, MSS, None);
        assert_eq!(off.probe_at(), None);
        assert_eq!(off.fire(true, s(0), s(5000), 0, MSS), None);
        tlp.arm(at(0), true, srtt, 5 * MSS, MSS, None);
        assert!(tlp.due(at(40)) && !tlp.due(at(39)));
        assert_eq!(tlp.fire(true, s(0), s(5000), 0, MSS), Some(Probe::Retransmit { seq: s(4000) }));
        // One probe per tail.
        tlp.arm(at(50), true, srtt, 5 * MSS, MSS, None);
        assert_eq!(tlp.probe_at(), None);
        assert_eq!(tlp.fire(true, s(0), s(5000), 0, MSS), None);
    }

    #[test]
    fn new_data_goes_first_with_one_segment_of_allowance() {
        let mut tlp = TailLossProbe::new(true);
        assert_eq!(tlp.fire(true, s(0), s(5000), MSS, MSS), Some(Probe::NewData));
        assert_eq!(tlp.take_allowance(MSS), MSS);
        assert_eq!(tlp.take_allowance(MSS), 0);
        // Delivered new data resolves it without a congestion response.
        assert!(!tlp.on_ack(s(6000), true, false, None));
        assert!(!tlp.is_outstanding());
    }

    #[test]
    fn a_short_flight_is_resent_whole() {
        let mut tlp = TailLossProbe::new(true);
        assert_eq!(tlp.fire(true, s(100), s(600), 0, MSS), Some(Probe::Retransmit { seq: s(100) }));
    }

    #[test]
    fn a_repair_is_reported_once_a_duplicate_never() {
        let mut tlp = TailLossProbe::new(true);
        tlp.fire(true, s(0), s(5000), 0, MSS);
        // Below the probe's end: unresolved.
        assert!(!tlp.on_ack(s(3000), true, false, None));
        assert!(tlp.is_outstanding());
        // At its end, by a cumulative ACK: still ambiguous.
        assert!(!tlp.on_ack(s(5000), true, false, None));
        assert!(tlp.is_outstanding());
        // Beyond it: the probe repaired the tail.
        assert!(tlp.on_ack(s(6000), true, false, None));
        assert!(!tlp.on_ack(s(7000), true, false, None));

        // A D-SACK of the probe: both copies arrived, no loss.
        let mut tlp = TailLossProbe::new(true);
        tlp.fire(true, s(0), s(5000), 0, MSS);
        assert!(!tlp.on_ack(s(6000), true, false, Some((4000, 5000))));
        assert!(!tlp.is_outstanding());

        // A pure duplicate ACK at the end: both arrived.
        let mut tlp = TailLossProbe::new(true);
        tlp.fire(true, s(0), s(5000), 0, MSS);
        assert!(!tlp.on_ack(s(5000), false, false, None));
        assert!(!tlp.is_outstanding());
    }

    #[test]
    fn a_sacked_probe_reveals_the_holes_below_it() {
        let mut tlp = TailLossProbe::new(true);
        assert_eq!(tlp.revealed_loss(Some(s(5000))), None);
        tlp.fire(true, s(0), s(5000), 0, MSS);
        assert_eq!(tlp.revealed_loss(None), None);
        assert_eq!(tlp.revealed_loss(Some(s(3000))), None);
        assert_eq!(tlp.revealed_loss(Some(s(5000))), Some(s(4000)));
        tlp.forget();
        assert_eq!(tlp.revealed_loss(Some(s(5000))), None);
    }
}
