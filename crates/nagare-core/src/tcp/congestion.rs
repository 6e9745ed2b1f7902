//! Congestion control: how much a connection may have in flight.
//!
//! The connection detects losses and runs recovery (which segments to
//! resend, NewReno partial ACKs, the SACK pipe); a controller only owns
//! `cwnd` and `ssthresh` and is told about the events that move them. Two
//! controllers: NewReno (RFC 5681 with RFC 3465 byte counting, the window
//! rules RFC 6582 relies on) and CUBIC (RFC 9438).
//!
//! Windows are held as `u32` bytes: TCP's largest window is 2^30 bytes, and
//! halving the state matters when ten thousand connections each carry one.
//! Every input is saturated into that range, so no value from the network
//! can overflow the arithmetic.

use crate::time::Instant;
use alloc::string::String;
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

/// What a congestion controller must handle.
///
/// Sizes are in bytes. The connection calls these in the order events
/// happen; `on_congestion_event` and `on_rto` once per loss episode, not per
/// lost segment (a new episode starts only after recovery ends).
pub trait CongestionControl {
    /// Bytes that may be in flight.
    fn cwnd(&self) -> usize;
    /// The slow-start threshold; `usize::MAX` until a loss sets one.
    fn ssthresh(&self) -> usize;
    /// Whether the window grows exponentially (RFC 5681 section 3.1).
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }
    /// New data was acknowledged outside loss recovery, or after an RTO
    /// (slow start resumes through here).
    ///
    /// `acked` bytes newly acknowledged; `flight` bytes in flight before
    /// this ACK; `app_limited` when the sender had nothing more to send;
    /// `rtt` a sample if this ACK gave one. The window does not grow while
    /// the sender is application-limited and leaves at least a segment of
    /// it unused (RFC 7661): growth there would be credit never tested
    /// against the path.
    fn on_ack(&mut self, acked: usize, flight: usize, app_limited: bool, rtt: Option<Duration>, now: Instant);
    /// A loss found by duplicate ACKs or SACK, entering fast recovery.
    fn on_congestion_event(&mut self, flight: usize, now: Instant);
    /// The retransmission timer expired: the window falls to one segment.
    fn on_rto(&mut self, flight: usize, now: Instant);
    /// The last congestion event or RTO proved spurious (RFC 4015, RFC
    /// 5682): the window returns to what it was before it. The saved values
    /// are kept, so a second call changes nothing.
    fn undo(&mut self);
    /// The connection was idle for longer than an RTO (RFC 5681 section
    /// 4.1): the window restarts at `min(IW, cwnd)`.
    fn on_idle_restart(&mut self, now: Instant);
    /// The sender's maximum segment size changed.
    fn set_mss(&mut self, mss: usize);
}

/// RFC 6928's initial window: `min(10 * MSS, max(2 * MSS, 14600))`.
pub fn initial_window(mss: usize) -> usize {
    let mss = mss.max(1);
    mss.saturating_mul(10).min(mss.saturating_mul(2).max(14_600))
}

/// The MSS option is 16 bits; clamping here bounds every product below.
fn clamp_mss(mss: usize) -> u16 {
    u16::try_from(mss.clamp(1, usize::from(u16::MAX))).unwrap_or(u16::MAX)
}

fn sat32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn sat32_64(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn to_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// `v * num / den` without overflow, saturated to `u32`.
fn scale(v: usize, num: u64, den: u64) -> u32 {
    let v = u64::try_from(v).unwrap_or(u64::MAX);
    sat32_64(u64::try_from(u128::from(v) * u128::from(num) / u128::from(den)).unwrap_or(u64::MAX))
}

/// The state both controllers share: the window, its threshold, and what
/// an undo needs.
#[derive(Debug, Clone)]
struct Window {
    cwnd: u32,
    /// `u32::MAX` stands for "no threshold yet".
    ssthresh: u32,
    /// 16 bits like the MSS option, which keeps CUBIC within 64 bytes.
    mss16: u16,
    /// Bytes acknowledged towards the next increase in congestion avoidance.
    ca_acked: u32,
    prior_cwnd: u32,
    prior_ssthresh: u32,
    /// An RTO fired and no new data was acknowledged since: a further RTO
    /// is the same segment timing out again, and RFC 5681 (section 3.1)
    /// then holds ssthresh instead of lowering it once more.
    rto_pending: bool,
}

impl Window {
    fn new(mss: usize) -> Self {
        let mss = clamp_mss(mss);
        let cwnd = sat32(initial_window(usize::from(mss)));
        Window {
            cwnd,
            ssthresh: u32::MAX,
            mss16: mss,
            ca_acked: 0,
            prior_cwnd: cwnd,
            prior_ssthresh: u32::MAX,
            rto_pending: false,
        }
    }

    fn mss(&self) -> u32 {
        u32::from(self.mss16)
    }

    fn ssthresh(&self) -> usize {
        if self.ssthresh == u32::MAX {
            usize::MAX
        } else {
            to_usize(self.ssthresh)
        }
    }

    fn may_grow(&self, flight: usize, app_limited: bool) -> bool {
        !app_limited || flight.saturating_add(to_usize(self.mss())) > to_usize(self.cwnd)
    }

    /// Slow start with appropriate byte counting (RFC 3465, L = 2): a
    /// stretch ACK counts for at most two segments, so ACK division or
    /// a huge cumulative ACK cannot cause a burst. Returns the bytes left
    /// over once ssthresh is reached, which belong to congestion avoidance.
    fn slow_start(&mut self, acked: u32) -> u32 {
        let inc = acked.min(self.mss().saturating_mul(2));
        let room = self.ssthresh.saturating_sub(self.cwnd);
        if inc < room {
            self.cwnd += inc;
            0
        } else {
            self.cwnd = self.cwnd.max(self.ssthresh);
            acked.saturating_sub(room)
        }
    }

    /// RFC 5681's congestion avoidance, counting bytes rather than ACKs
    /// (RFC 3465) so delayed ACKs do not halve the growth rate: one segment
    /// per window's worth of acknowledged bytes.
    fn reno_avoidance(&mut self, acked: u32) {
        self.ca_acked = self.ca_acked.saturating_add(acked);
        if self.ca_acked >= self.cwnd {
            self.ca_acked -= self.cwnd;
            self.cwnd = self.cwnd.saturating_add(self.mss());
            // One segment per ACK at most: leftover credit from a stretch
            // ACK carries over but cannot pile up into a burst later.
            self.ca_acked = self.ca_acked.min(self.cwnd);
        }
    }

    fn save(&mut self) {
        self.prior_cwnd = self.cwnd;
        self.prior_ssthresh = self.ssthresh;
    }

    /// `ssthresh = max(flight * beta, 2 * SMSS)`.
    fn set_ssthresh(&mut self, flight: usize, beta_num: u64, beta_den: u64) {
        self.ssthresh = scale(flight, beta_num, beta_den).max(self.mss().saturating_mul(2));
    }

    /// The common part of an RTO. Returns whether this is the first
    /// timeout of the episode (the caller then sets ssthresh).
    fn rto(&mut self) -> bool {
        let first = !self.rto_pending;
        if first {
            self.save();
            self.rto_pending = true;
        }
        // The loss window of RFC 5681.
        self.cwnd = self.mss();
        self.ca_acked = 0;
        first
    }

    fn undo(&mut self) {
        // max, not assignment: if the window grew again since the event, an
        // undo must not shrink it.
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.ssthresh = self.ssthresh.max(self.prior_ssthresh);
        self.rto_pending = false;
    }

    fn idle_restart(&mut self) {
        self.cwnd = self.cwnd.min(sat32(initial_window(to_usize(self.mss()))));
        self.ca_acked = 0;
    }

    fn set_mss(&mut self, mss: usize) {
        let old_iw = sat32(initial_window(to_usize(self.mss())));
        self.mss16 = clamp_mss(mss);
        if self.cwnd == old_iw && self.ssthresh == u32::MAX {
            // Nothing has happened yet (typically the MSS was only learnt
            // from the SYN-ACK): start from the initial window of the real
            // MSS rather than the guess.
            self.cwnd = sat32(initial_window(to_usize(self.mss())));
        }
        self.cwnd = self.cwnd.max(self.mss());
        if self.ssthresh != u32::MAX {
            self.ssthresh = self.ssthresh.max(self.mss().saturating_mul(2));
        }
    }
}

/// NewReno's window rules (RFC 5681, RFC 6582): halve on loss, one segment
/// per round trip in congestion avoidance.
#[derive(Debug, Clone)]
pub struct NewReno {
    win: Window,
}

impl NewReno {
    /// A controller at the initial window for `mss`.
    pub fn new(mss: usize) -> Self {
        NewReno { win: Window::new(mss) }
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        to_usize(self.win.cwnd)
    }

    fn ssthresh(&self) -> usize {
        self.win.ssthresh()
    }

    fn on_ack(&mut self, acked: usize, flight: usize, app_limited: bool, _rtt: Option<Duration>, _now: Instant) {
        self.win.rto_pending = false;
        if !self.win.may_grow(flight, app_limited) {
            return;
        }
        let mut acked = sat32(acked);
        if self.win.cwnd < self.win.ssthresh {
            acked = self.win.slow_start(acked);
        }
        if acked > 0 {
            self.win.reno_avoidance(acked);
        }
    }

    fn on_congestion_event(&mut self, flight: usize, _now: Instant) {
        self.win.save();
        // RFC 5681 equation (4).
        self.win.set_ssthresh(flight, 1, 2);
        self.win.cwnd = self.win.ssthresh;
        self.win.ca_acked = 0;
    }

    fn on_rto(&mut self, flight: usize, _now: Instant) {
        if self.win.rto() {
            self.win.set_ssthresh(flight, 1, 2);
        }
    }

    fn undo(&mut self) {
        self.win.undo();
    }

    fn on_idle_restart(&mut self, _now: Instant) {
        self.win.idle_restart();
    }

    fn set_mss(&mut self, mss: usize) {
        self.win.set_mss(mss);
    }
}

/// RFC 9438's C, in segments per second cubed.
const CUBIC_C: f64 = 0.4;
/// RFC 9438's beta_cubic, as a fraction for exact integer scaling.
const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
/// alpha_cubic = 3 (1 - beta) / (1 + beta) = 0.9 / 1.7 = 9 / 17 exactly, so
/// the Reno-friendly estimate can grow by whole segments in integers.
const ALPHA_NUM: u64 = 9;
const ALPHA_DEN: u64 = 17;

/// CUBIC (RFC 9438): after a loss, the window climbs back to where the loss
/// happened along a cubic curve, flattening near it and probing beyond it
/// ever faster, never slower than Reno would.
///
/// Slow start is NewReno's; HyStart++ (RFC 9406) is not implemented, since
/// its per-round bookkeeping would not fit the state budget and the
/// controller cannot see sequence numbers to delimit rounds.
#[derive(Debug, Clone)]
pub struct Cubic {
    win: Window,
    /// W_max in bytes; 0 while undefined (no loss yet, or just after an
    /// RTO, when RFC 9438 section 4.8 takes the window at the start of
    /// congestion avoidance instead).
    w_max: u32,
    prior_w_max: u32,
    /// cwnd when ssthresh was last set: once W_est reaches it, the
    /// Reno-friendly estimate grows at Reno's full rate (RFC 9438 4.3).
    cwnd_prior: u32,
    /// W_est in bytes, and the acknowledged bytes towards its next segment.
    w_est: u32,
    est_acked: u32,
    /// K in microseconds (at most some minutes even for a 4 GB window).
    k_us: u32,
    /// A smoothed RTT in microseconds, 0 before any sample: the RTT of
    /// W_cubic(t + RTT).
    srtt_us: u32,
    epoch_start: Instant,
    epoch_valid: bool,
    /// The last ACK found the sender application-limited.
    app_limited: bool,
}

impl Cubic {
    /// A controller at the initial window for `mss`.
    pub fn new(mss: usize) -> Self {
        Cubic {
            win: Window::new(mss),
            w_max: 0,
            prior_w_max: 0,
            cwnd_prior: 0,
            w_est: 0,
            est_acked: 0,
            k_us: 0,
            srtt_us: 0,
            epoch_start: Instant::ZERO,
            epoch_valid: false,
            app_limited: false,
        }
    }

    /// W_max in bytes, if one is defined.
    pub fn w_max(&self) -> Option<usize> {
        (self.w_max != 0).then(|| to_usize(self.w_max))
    }

    /// K of the current epoch, if congestion avoidance has started.
    pub fn k(&self) -> Option<Duration> {
        self.epoch_valid.then(|| Duration::from_micros(u64::from(self.k_us)))
    }

    fn note_rtt(&mut self, rtt: Option<Duration>) {
        let Some(rtt) = rtt else { return };
        let r = u32::try_from(rtt.as_micros()).unwrap_or(u32::MAX).max(1);
        self.srtt_us = if self.srtt_us == 0 { r } else { (self.srtt_us - self.srtt_us / 8).saturating_add(r / 8) };
    }

    /// Starts a congestion-avoidance epoch (RFC 9438 section 4.2).
    fn start_epoch(&mut self, now: Instant) {
        let cwnd = self.win.cwnd;
        self.epoch_start = now;
        self.epoch_valid = true;
        if self.w_max <= cwnd {
            // No loss to return to (first CA, after an RTO, or already past
            // W_max): the curve starts flat at the current window (RFC 9438
            // sections 4.8 and 4.10).
            self.w_max = cwnd;
            self.k_us = 0;
        } else {
            let deficit = f64::from(self.w_max - cwnd) / f64::from(self.win.mss());
            let k = cube_root(deficit / CUBIC_C);
            // Saturating float-to-int conversion; K is finite and positive.
            self.k_us = (k * 1e6) as u32;
        }
        self.w_est = cwnd;
        self.est_acked = 0;
        self.win.ca_acked = 0;
    }

    fn avoidance(&mut self, acked: u32, now: Instant) {
        if !self.epoch_valid {
            self.start_epoch(now);
        }
        let mss = self.win.mss();
        let cwnd = self.win.cwnd;
        // A window's worth at most: more than that in one ACK (the end of a
        // recovery, or nonsense) says nothing about how fast to grow.
        let acked = acked.min(cwnd);

        // The Reno-friendly estimate: alpha_cubic segments per window of
        // acknowledged bytes, or a full segment once W_est has reached the
        // window of the last reduction.
        self.est_acked = self.est_acked.saturating_add(acked);
        let (num, den) = if self.w_est >= self.cwnd_prior { (1, 1) } else { (ALPHA_NUM, ALPHA_DEN) };
        let per_segment = (u64::from(cwnd) * den / num).max(1);
        let steps = u64::from(self.est_acked) / per_segment;
        if steps > 0 {
            let grown = u64::from(self.w_est).saturating_add(steps.saturating_mul(u64::from(mss)));
            self.w_est = sat32_64(grown);
            self.est_acked = sat32_64(u64::from(self.est_acked) % per_segment);
        }

        let t = now.saturating_since(self.epoch_start).as_secs_f64();
        let k = f64::from(self.k_us) / 1e6;
        let rtt = f64::from(self.srtt_us) / 1e6;
        let seg = f64::from(mss);
        let w_max = f64::from(self.w_max) / seg;
        let w_cubic = |t: f64| {
            let d = t - k;
            (CUBIC_C * d * d * d + w_max) * seg
        };

        if w_cubic(t) < f64::from(self.w_est) {
            // Reno-friendly region: CUBIC is never slower than Reno.
            self.win.cwnd = cwnd.max(self.w_est);
            return;
        }

        // Concave and convex regions alike: cwnd moves by
        // (target - cwnd) / cwnd segments per acknowledged segment, the target
        // one RTT ahead on the curve and at most half a window away.
        let cwnd_f = f64::from(cwnd);
        let target = w_cubic(t + rtt).max(cwnd_f).min(1.5 * cwnd_f);
        if target <= cwnd_f {
            return;
        }
        // One segment per `cwnd * mss / (target - cwnd)` bytes acknowledged.
        // target - cwnd <= cwnd / 2 keeps this at two segments or more.
        let per_segment = ((cwnd_f * seg / (target - cwnd_f)) as u64).max(1);
        self.win.ca_acked = self.win.ca_acked.saturating_add(acked);
        let steps = u64::from(self.win.ca_acked) / per_segment;
        if steps > 0 {
            self.win.ca_acked = sat32_64(u64::from(self.win.ca_acked) % per_segment);
            let grown = u64::from(cwnd).saturating_add(steps.saturating_mul(u64::from(mss)));
            // A stretch ACK may not carry the window past the target.
            let ceiling = (target as u64).max(u64::from(cwnd) + u64::from(mss));
            self.win.cwnd = sat32_64(grown.min(ceiling));
        }
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        to_usize(self.win.cwnd)
    }

    fn ssthresh(&self) -> usize {
        self.win.ssthresh()
    }

    fn on_ack(&mut self, acked: usize, flight: usize, app_limited: bool, rtt: Option<Duration>, now: Instant) {
        self.win.rto_pending = false;
        self.note_rtt(rtt);
        if !self.win.may_grow(flight, app_limited) {
            self.app_limited = true;
            return;
        }
        if self.app_limited {
            // RFC 9438 section 5.8: t must not include time spent
            // application-limited, or the window would leap along the curve
            // when the sender resumes. A fresh epoch from the current window
            // keeps the same W_max, hence the same plateau.
            self.app_limited = false;
            self.epoch_valid = false;
        }
        let mut acked = sat32(acked);
        if self.win.cwnd < self.win.ssthresh {
            acked = self.win.slow_start(acked);
        }
        if acked > 0 {
            self.avoidance(acked, now);
        }
    }

    fn on_congestion_event(&mut self, flight: usize, _now: Instant) {
        self.win.save();
        self.prior_w_max = self.w_max;
        let cwnd = self.win.cwnd;
        // Fast convergence (RFC 9438 section 4.7): a loss below the last
        // W_max means a new flow is taking bandwidth, so release some.
        self.w_max = if cwnd < self.w_max { scale(to_usize(cwnd), 17, 20) } else { cwnd };
        self.cwnd_prior = cwnd;
        self.win.set_ssthresh(flight, BETA_NUM, BETA_DEN);
        self.win.cwnd = self.win.ssthresh;
        self.win.ca_acked = 0;
        self.epoch_valid = false;
    }

    fn on_rto(&mut self, flight: usize, _now: Instant) {
        let cwnd = self.win.cwnd;
        if self.win.rto() {
            self.prior_w_max = self.w_max;
            self.cwnd_prior = cwnd;
            self.win.set_ssthresh(flight, BETA_NUM, BETA_DEN);
            // RFC 9438 section 4.8: the first congestion avoidance after a
            // timeout starts its own curve (K = 0, W_max = cwnd_epoch).
            self.w_max = 0;
        }
        self.epoch_valid = false;
    }

    fn undo(&mut self) {
        self.win.undo();
        self.w_max = self.prior_w_max;
        // A new epoch recomputes K from the restored W_max and window.
        self.epoch_valid = false;
    }

    fn on_idle_restart(&mut self, _now: Instant) {
        self.win.idle_restart();
        self.epoch_valid = false;
    }

    fn set_mss(&mut self, mss: usize) {
        self.win.set_mss(mss);
        // K is in segments of the old size.
        self.epoch_valid = false;
    }
}

/// The cube root, by Newton's iteration: `core` has no `cbrt`.
pub fn cube_root(x: f64) -> f64 {
    if x == 0.0 || x.is_nan() || x.is_infinite() {
        return x;
    }
    let (neg, a) = if x < 0.0 { (true, -x) } else { (false, x) };
    // Dividing the exponent by three lands within a factor of two or so:
    // the bits of 1.0 are 0x3FF0..., and two thirds of them are 0x2AA0....
    let mut y = f64::from_bits(a.to_bits() / 3 + 0x2AA0_0000_0000_0000);
    for _ in 0..100 {
        let next = (2.0 * y + a / (y * y)) / 3.0;
        let diff = if next > y { next - y } else { y - next };
        y = next;
        if diff <= next * 1e-15 {
            break;
        }
    }
    if neg {
        -y
    } else {
        y
    }
}

/// The congestion controllers a connection can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CongestionAlgorithm {
    /// RFC 5681 / RFC 6582.
    NewReno,
    /// RFC 9438, as most hosts run by default.
    #[default]
    Cubic,
}

impl fmt::Display for CongestionAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CongestionAlgorithm::NewReno => "newreno",
            CongestionAlgorithm::Cubic => "cubic",
        })
    }
}

/// A congestion controller name that is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAlgorithm {
    name: String,
}

impl fmt::Display for UnknownAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown congestion control algorithm {:?} (expected \"cubic\", \"newreno\" or \"reno\")", self.name)
    }
}

impl core::error::Error for UnknownAlgorithm {}

impl FromStr for CongestionAlgorithm {
    type Err = UnknownAlgorithm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("cubic") {
            Ok(CongestionAlgorithm::Cubic)
        } else if s.eq_ignore_ascii_case("newreno") || s.eq_ignore_ascii_case("reno") {
            Ok(CongestionAlgorithm::NewReno)
        } else {
            Err(UnknownAlgorithm { name: String::from(s) })
        }
    }
}

/// One connection's controller, dispatched without a box: it lives in
/// every connection, and an enum keeps it inline and the calls direct.
#[derive(Debug, Clone)]
pub enum Congestion {
    /// See [`NewReno`].
    NewReno(NewReno),
    /// See [`Cubic`].
    Cubic(Cubic),
}

impl Congestion {
    /// A controller of the given kind at the initial window for `mss`.
    pub fn new(algorithm: CongestionAlgorithm, mss: usize) -> Self {
        match algorithm {
            CongestionAlgorithm::NewReno => Congestion::NewReno(NewReno::new(mss)),
            CongestionAlgorithm::Cubic => Congestion::Cubic(Cubic::new(mss)),
        }
    }

    /// Which controller this is.
    pub fn algorithm(&self) -> CongestionAlgorithm {
        match self {
            Congestion::NewReno(_) => CongestionAlgorithm::NewReno,
            Congestion::Cubic(_) => CongestionAlgorithm::Cubic,
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Congestion::NewReno($c) => $e,
            Congestion::Cubic($c) => $e,
        }
    };
}

impl CongestionControl for Congestion {
    fn cwnd(&self) -> usize {
        dispatch!(self, c => c.cwnd())
    }

    fn ssthresh(&self) -> usize {
        dispatch!(self, c => c.ssthresh())
    }

    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }

    fn on_ack(&mut self, acked: usize, flight: usize, app_limited: bool, rtt: Option<Duration>, now: Instant) {
        dispatch!(self, c => c.on_ack(acked, flight, app_limited, rtt, now))
    }

    fn on_congestion_event(&mut self, flight: usize, now: Instant) {
        dispatch!(self, c => c.on_congestion_event(flight, now))
    }

    fn on_rto(&mut self, flight: usize, now: Instant) {
        dispatch!(self, c => c.on_rto(flight, now))
    }

    fn undo(&mut self) {
        dispatch!(self, c => c.undo())
    }

    fn on_idle_restart(&mut self, now: Instant) {
        dispatch!(self, c => c.on_idle_restart(now))
    }

    fn set_mss(&mut self, mss: usize) {
        dispatch!(self, c => c.set_mss(mss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec::Vec;

    const MSS: usize = 1460;

    fn segs(n: usize) -> usize {
        n * MSS
    }

    fn both() -> [Congestion; 2] {
        [Congestion::new(CongestionAlgorithm::NewReno, MSS), Congestion::new(CongestionAlgorithm::Cubic, MSS)]
    }

    /// One round trip of a sender that keeps its window full: the whole
    /// window is acknowledged in ACKs of `per_ack` bytes.
    fn round<C: CongestionControl>(cc: &mut C, per_ack: usize, rtt: Duration, now: Instant) {
        let mut left = cc.cwnd();
        while left > 0 {
            let a = left.min(per_ack);
            let flight = cc.cwnd();
            cc.on_ack(a, flight, false, Some(rtt), now);
            left -= a;
        }
    }

    /// A CUBIC controller in congestion avoidance at `n` segments.
    fn cubic_at(n: usize) -> Cubic {
        let mut c = Cubic::new(MSS);
        c.win.cwnd = sat32(segs(n));
        c.win.ssthresh = sat32(segs(n));
        c
    }

    fn newreno_at(n: usize) -> NewReno {
        let mut c = NewReno::new(MSS);
        c.win.cwnd = sat32(segs(n));
        c.win.ssthresh = sat32(segs(n));
        c
    }

    fn in_segs(bytes: usize) -> f64 {
        bytes as f64 / MSS as f64
    }

    #[test]
    fn sizes_stay_small() {
        assert!(core::mem::size_of::<Cubic>() <= 64, "{}", core::mem::size_of::<Cubic>());
        // The enum's tag hides in a niche of the CUBIC state.
        assert!(core::mem::size_of::<Congestion>() <= 64, "{}", core::mem::size_of::<Congestion>());
    }

    #[test]
    fn initial_window_follows_rfc_6928() {
        assert_eq!(initial_window(536), 5360);
        assert_eq!(initial_window(1460), 14_600);
        assert_eq!(initial_window(8960), 17_920);
        assert_eq!(initial_window(0), 10);
        assert_eq!(initial_window(usize::MAX), usize::MAX);
        for cc in both() {
            assert_eq!(cc.cwnd(), 14_600);
            assert!(cc.in_slow_start());
        }
    }

    #[test]
    fn slow_start_doubles_per_round_trip() {
        let rtt = Duration::from_millis(50);
        for per_ack in [MSS, 2 * MSS] {
            for mut cc in both() {
                let mut now = Instant::ZERO;
                for want in [20, 40, 80, 160] {
                    now += rtt;
                    round(&mut cc, per_ack, rtt, now);
                    assert_eq!(cc.cwnd(), segs(want), "{:?} acks of {per_ack}", cc.algorithm());
                }
            }
        }
    }

    #[test]
    fn slow_start_counts_at_most_two_segments_per_ack() {
        for mut cc in both() {
            cc.on_ack(segs(10), segs(10), false, None, Instant::ZERO);
            assert_eq!(cc.cwnd(), segs(12));
        }
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_passes_the_rest_on() {
        let mut c = NewReno::new(MSS);
        c.win.ssthresh = sat32(segs(11));
        c.on_ack(segs(2), segs(10), false, None, Instant::ZERO);
        assert_eq!(c.cwnd(), segs(11));
        assert!(!c.in_slow_start());
        assert_eq!(to_usize(c.win.ca_acked), segs(1));
    }

    #[test]
    fn newreno_avoidance_adds_one_segment_per_round_trip() {
        let rtt = Duration::from_millis(50);
        for per_ack in [MSS, 2 * MSS] {
            let mut c = newreno_at(20);
            let mut now = Instant::ZERO;
            for n in 21..40 {
                now += rtt;
                round(&mut c, per_ack, rtt, now);
                assert_eq!(c.cwnd(), segs(n));
            }
        }
    }

    #[test]
    fn congestion_event_halves_newreno_and_takes_cubic_to_seven_tenths() {
        let mut r = newreno_at(100);
        r.on_congestion_event(segs(100), Instant::ZERO);
        assert_eq!(r.ssthresh(), segs(50));
        assert_eq!(r.cwnd(), segs(50));
        let mut c = cubic_at(100);
        c.on_congestion_event(segs(100), Instant::ZERO);
        assert_eq!(c.ssthresh(), segs(70));
        assert_eq!(c.cwnd(), segs(70));
        assert_eq!(c.w_max(), Some(segs(100)));
        // The floor of two segments.
        for mut cc in both() {
            cc.on_congestion_event(MSS, Instant::ZERO);
            assert_eq!(cc.ssthresh(), segs(2));
            assert_eq!(cc.cwnd(), segs(2));
        }
    }

    #[test]
    fn rto_drops_to_one_segment_and_a_repeat_holds_ssthresh() {
        for mut cc in both() {
            cc.on_ack(MSS, segs(10), false, None, Instant::ZERO);
            cc.on_rto(segs(40), Instant::ZERO);
            assert_eq!(cc.cwnd(), MSS);
            let ss = cc.ssthresh();
            let want = match cc.algorithm() {
                CongestionAlgorithm::NewReno => segs(20),
                CongestionAlgorithm::Cubic => segs(28),
            };
            assert_eq!(ss, want);
            // The same segment times out again, with little in flight.
            cc.on_rto(MSS, Instant::ZERO);
            assert_eq!(cc.ssthresh(), ss);
            assert_eq!(cc.cwnd(), MSS);
            // After new data is acknowledged, a timeout is a new episode.
            cc.on_ack(MSS, MSS, false, None, Instant::ZERO);
            cc.on_rto(MSS, Instant::ZERO);
            assert_eq!(cc.ssthresh(), segs(2));
        }
    }

    #[test]
    fn undo_restores_the_window_before_the_event() {
        for mut cc in both() {
            let now = Instant::from_secs(1);
            round(&mut cc, MSS, Duration::from_millis(10), now);
            let (cwnd, ss) = (cc.cwnd(), cc.ssthresh());
            cc.on_congestion_event(cwnd, now);
            assert!(cc.cwnd() < cwnd);
            cc.undo();
            assert_eq!((cc.cwnd(), cc.ssthresh()), (cwnd, ss));
            cc.on_rto(cwnd, now);
            cc.on_rto(cwnd, now);
            cc.undo();
            assert_eq!((cc.cwnd(), cc.ssthresh()), (cwnd, ss));
            // Saved values are kept: undoing twice is harmless.
            cc.undo();
            assert_eq!((cc.cwnd(), cc.ssthresh()), (cwnd, ss));
        }
        let mut c = cubic_at(100);
        c.on_congestion_event(segs(100), Instant::ZERO);
        c.on_congestion_event(segs(70), Instant::ZERO);
        c.undo();
        assert_eq!(c.cwnd(), segs(70));
        assert_eq!(c.w_max(), Some(segs(100)));
    }

    #[test]
    fn application_limited_acks_do_not_grow_the_window() {
        for mut cc in [
            Congestion::NewReno(newreno_at(20)),
            Congestion::Cubic(cubic_at(20)),
            Congestion::new(CongestionAlgorithm::NewReno, MSS),
            Congestion::new(CongestionAlgorithm::Cubic, MSS),
        ] {
            let before = cc.cwnd();
            let mut now = Instant::ZERO;
            for _ in 0..1000 {
                now += Duration::from_millis(10);
                cc.on_ack(MSS, segs(3), true, Some(Duration::from_millis(10)), now);
            }
            assert_eq!(cc.cwnd(), before, "{:?}", cc.algorithm());
            // A sender with nothing queued but a full window still probes.
            let full = cc.cwnd();
            for _ in 0..100 {
                now += Duration::from_millis(10);
                cc.on_ack(MSS, full, true, Some(Duration::from_millis(10)), now);
            }
            assert!(cc.cwnd() > before, "{:?}", cc.algorithm());
        }
    }

    #[test]
    fn idle_restart_returns_to_the_initial_window() {
        for mut cc in both() {
            for _ in 0..3 {
                round(&mut cc, MSS, Duration::from_millis(10), Instant::ZERO);
            }
            assert!(cc.cwnd() > segs(10));
            cc.on_idle_restart(Instant::from_secs(10));
            assert_eq!(cc.cwnd(), segs(10));
            cc.on_congestion_event(segs(4), Instant::ZERO);
            cc.on_idle_restart(Instant::from_secs(20));
            assert!(cc.cwnd() < segs(10));
        }
    }

    #[test]
    fn mss_change_before_any_traffic_moves_the_initial_window() {
        for mut cc in
            [Congestion::new(CongestionAlgorithm::NewReno, 536), Congestion::new(CongestionAlgorithm::Cubic, 536)]
        {
            assert_eq!(cc.cwnd(), 5360);
            cc.set_mss(1460);
            assert_eq!(cc.cwnd(), 14_600);
            cc.on_ack(1460, 14_600, false, None, Instant::ZERO);
            cc.set_mss(536);
            assert_eq!(cc.cwnd(), 14_600 + 1460);
            cc.set_mss(0);
            cc.set_mss(usize::MAX);
            assert!(cc.cwnd() >= 65_535);
        }
    }

    #[test]
    fn cube_root_matches_known_values() {
        let cases = [
            (27.0, 3.0),
            (-8.0, -2.0),
            (2.0, 1.259_921_049_894_873_2),
            (75.0, 4.217_163_326_508_746),
            (750.0, 9.085_602_964_160_698),
            (1e-9, 1e-3),
            (1e300, 1e100),
            (0.001, 0.1),
        ];
        for (x, want) in cases {
            let got = cube_root(x);
            let err = (got - want) / want;
            assert!(err < 1e-14 && err > -1e-14, "cbrt({x}) = {got}, want {want}");
        }
        assert_eq!(cube_root(0.0), 0.0);
        assert!(cube_root(f64::NAN).is_nan());
        assert_eq!(cube_root(f64::INFINITY), f64::INFINITY);
        let tiny = cube_root(f64::MIN_POSITIVE / 1e10);
        let back = tiny * tiny * tiny / (f64::MIN_POSITIVE / 1e10);
        assert!(back > 0.999 && back < 1.001, "{back}");
    }

    /// Runs a CUBIC flow after a loss at `w_max` segments, one round per
    /// `rtt`, and returns (seconds since the epoch began, cwnd in segments).
    fn cubic_recovery(w_max: usize, rtt: Duration, rounds: usize) -> (Cubic, Vec<(f64, f64)>) {
        let mut c = cubic_at(w_max);
        let start = Instant::from_secs(100);
        c.on_congestion_event(segs(w_max), start);
        let mut now = start;
        let mut trace = Vec::new();
        for _ in 0..rounds {
            now += rtt;
            round(&mut c, MSS, rtt, now);
            let t = (now - start).as_secs_f64() - rtt.as_secs_f64();
            trace.push((t, in_segs(c.cwnd())));
        }
        (c, trace)
    }

    fn at(trace: &[(f64, f64)], t: f64) -> f64 {
        trace.iter().find(|(s, _)| *s >= t).map_or(0.0, |p| p.1)
    }

    #[test]
    fn cubic_returns_to_w_max_at_k_and_grows_convex_beyond() {
        let rtt = Duration::from_millis(100);
        let (c, trace) = cubic_recovery(100, rtt, 80);
        // K = cbrt(100 * 0.3 / 0.4) = 4.217 s.
        let k = c.k().map_or(0.0, |k| k.as_secs_f64());
        assert!((k - 4.217).abs() < 0.001, "K = {k}");
        assert!((at(&trace, 0.0) - 70.0).abs() < 1.5);
        let near = at(&trace, k);
        assert!((97.0..=103.0).contains(&near), "cwnd at K: {near}");
        // Concave before K: growth slows.
        let early = at(&trace, 1.5) - at(&trace, 0.5);
        let late = at(&trace, 3.5) - at(&trace, 2.5);
        assert!(early > 2.0 * late, "{early} vs {late}");
        // Convex after K: growth accelerates, and W_cubic(K + 3) = 110.8.
        let first = at(&trace, k + 2.0) - at(&trace, k + 1.0);
        let second = at(&trace, k + 3.0) - at(&trace, k + 2.0);
        assert!(second > 1.5 * first, "{first} vs {second}");
        let w = at(&trace, k + 3.0);
        assert!((106.0..=116.0).contains(&w), "cwnd at K + 3 s: {w}");
        // Monotone: an ACK never shrinks the window.
        assert!(trace.windows(2).all(|p| p[1].1 >= p[0].1));
    }

    #[test]
    fn cubic_is_reno_friendly_at_small_bdp() {
        let rtt = Duration::from_millis(1);
        let (c, trace) = cubic_recovery(20, rtt, 10);
        // The cubic curve alone would still be at about 14 segments: K is 2.47 s.
        let k = c.k().map_or(0.0, |k| k.as_secs_f64());
        let t = trace.last().map_or(0.0, |p| p.0);
        let w_cubic = 0.4 * (t - k) * (t - k) * (t - k) + 20.0;
        assert!(w_cubic < 14.2, "{w_cubic}");
        // Reno at alpha_cubic = 9/17 segment per round: about 14 + 5.
        let cwnd = in_segs(c.cwnd());
        assert!((17.0..=20.0).contains(&cwnd), "{cwnd}");
        // And once past the previous window, at Reno's full rate.
        let (c, _) = cubic_recovery(20, rtt, 40);
        let w = in_segs(c.cwnd());
        assert!(w >= 30.0, "{w}");
    }

    #[test]
    fn fast_convergence_lowers_w_max_below_the_last_one() {
        let mut c = cubic_at(100);
        c.on_congestion_event(segs(100), Instant::ZERO);
        assert_eq!(c.w_max(), Some(segs(100)));
        c.win.cwnd = sat32(segs(90));
        c.on_congestion_event(segs(90), Instant::ZERO);
        // 90 * (1 + 0.7) / 2.
        assert_eq!(c.w_max(), Some(segs(90) * 17 / 20));
        // A loss above the last W_max takes the window as it is.
        c.win.cwnd = sat32(segs(120));
        c.on_congestion_event(segs(120), Instant::ZERO);
        assert_eq!(c.w_max(), Some(segs(120)));
    }

    #[test]
    fn cubic_after_rto_starts_a_flat_curve() {
        let mut c = cubic_at(100);
        c.on_rto(segs(100), Instant::ZERO);
        assert_eq!(c.w_max(), None);
        let rtt = Duration::from_millis(100);
        let mut now = Instant::ZERO;
        while c.in_slow_start() {
            now += rtt;
            round(&mut c, MSS, rtt, now);
        }
        now += rtt;
        round(&mut c, MSS, rtt, now);
        assert_eq!(c.k(), Some(Duration::ZERO));
        assert!(c.w_max().is_some_and(|w| w >= segs(70)));
    }

    #[test]
    fn huge_and_tiny_windows_do_not_overflow() {
        let gig = 1usize << 30;
        let far = Instant::from_micros(u64::MAX);
        for mut cc in both() {
            match &mut cc {
                Congestion::NewReno(c) => c.win.cwnd = sat32(gig),
                Congestion::Cubic(c) => c.win.cwnd = sat32(gig),
            }
            cc.on_congestion_event(gig, Instant::from_secs(1));
            for i in 0..100 {
                cc.on_ack(1 << 16, cc.cwnd(), false, Some(Duration::from_millis(100)), Instant::from_secs(2 + i));
            }
            assert!(cc.cwnd() >= gig / 2 && cc.cwnd() < gig * 2, "{}", cc.cwnd());
            // Hours later, with absurd inputs.
            cc.on_ack(usize::MAX, usize::MAX, false, Some(Duration::MAX), far);
            cc.on_ack(usize::MAX, usize::MAX, false, Some(Duration::ZERO), far);
            assert!(cc.cwnd() <= u32::MAX as usize);
            cc.on_congestion_event(usize::MAX, far);
            assert!(cc.ssthresh() >= u32::MAX as usize);
            cc.on_rto(usize::MAX, far);
            cc.undo();
            cc.on_idle_restart(far);
            cc.on_ack(usize::MAX, 0, false, None, Instant::ZERO);
            assert!(cc.cwnd() >= MSS);
        }
        for alg in [CongestionAlgorithm::NewReno, CongestionAlgorithm::Cubic] {
            let mut cc = Congestion::new(alg, 1);
            assert_eq!(cc.cwnd(), 10);
            cc.on_congestion_event(0, Instant::ZERO);
            assert_eq!((cc.cwnd(), cc.ssthresh()), (2, 2));
            cc.on_rto(0, Instant::ZERO);
            assert_eq!(cc.cwnd(), 1);
            let mut now = Instant::ZERO;
            for _ in 0..1000 {
                now += Duration::from_millis(1);
                cc.on_ack(1, cc.cwnd(), false, Some(Duration::from_millis(1)), now);
            }
            assert!(cc.cwnd() > 2 && cc.cwnd() < 1000, "{}", cc.cwnd());
        }
        // A single huge ACK in avoidance cannot jump past the target.
        let mut c = cubic_at(100);
        c.on_congestion_event(segs(100), Instant::ZERO);
        c.on_ack(usize::MAX, segs(70), false, Some(Duration::from_millis(100)), Instant::from_secs(1));
        c.on_ack(usize::MAX, segs(70), false, Some(Duration::from_millis(100)), Instant::from_secs(2));
        assert!(c.cwnd() <= segs(100), "{}", in_segs(c.cwnd()));
    }

    /// A fluid model of one flow through a bottleneck of `capacity`
    /// segments: each round trip acknowledges the whole window in delayed
    /// ACKs, and a round that ends above capacity loses a segment.
    fn simulate(alg: CongestionAlgorithm, capacity: usize, rounds: usize) -> (Vec<f64>, usize) {
        let rtt = Duration::from_millis(100);
        let mut cc = Congestion::new(alg, MSS);
        let mut now = Instant::ZERO;
        let mut trace = Vec::new();
        let mut losses = 0;
        for _ in 0..rounds {
            now += rtt;
            round(&mut cc, 2 * MSS, rtt, now);
            if cc.cwnd() > segs(capacity) {
                cc.on_congestion_event(cc.cwnd(), now);
                losses += 1;
            }
            trace.push(in_segs(cc.cwnd()));
        }
        (trace, losses)
    }

    #[test]
    fn fluid_model_shows_reno_sawtooth_and_cubic_plateau() {
        let cap = 500.0;
        let (reno, reno_losses) = simulate(CongestionAlgorithm::NewReno, 500, 2000);
        let (cubic, cubic_losses) = simulate(CongestionAlgorithm::Cubic, 500, 2000);
        let steady = |t: &[f64]| t[500..].to_vec();
        let (reno, cubic) = (steady(&reno), steady(&cubic));
        let min = |t: &[f64]| t.iter().copied().fold(f64::MAX, f64::min);
        let max = |t: &[f64]| t.iter().copied().fold(0.0, f64::max);
        let share =
            |t: &[f64], keep: &dyn Fn(f64) -> bool| t.iter().filter(|w| keep(**w)).count() as f64 / t.len() as f64;
        let mean = |t: &[f64]| t.iter().sum::<f64>() / t.len() as f64;
        // Round trips in which the window was nearly flat (less than half a
        // segment of growth, losses aside).
        let flat = |t: &[f64]| {
            let d: Vec<f64> = t.windows(2).map(|p| p[1] - p[0]).filter(|d| *d >= 0.0).collect();
            d.iter().filter(|d| **d < 0.5).count() as f64 / d.len() as f64
        };

        // NewReno: halves to capacity / 2 and climbs one segment per round
        // trip, so a tooth is 250 round trips long and never flat.
        assert!((0.49 * cap..=0.51 * cap).contains(&min(&reno)), "{}", min(&reno));
        assert!(max(&reno) <= cap);
        assert!((8..=10).contains(&reno_losses), "{reno_losses}");
        assert!(share(&reno, &|w| w >= 0.8 * cap) < 0.45);
        assert!(flat(&reno) < 0.01, "{}", flat(&reno));

        // CUBIC: drops to 0.7 and spends most of its time flat near the
        // window of the last loss. With one flow, fast convergence makes
        // every other plateau sit at 0.85 of the capacity, hence the 0.8.
        assert!(min(&cubic) >= 0.69 * cap, "{}", min(&cubic));
        assert!(max(&cubic) <= cap);
        let near = share(&cubic, &|w| w >= 0.8 * cap);
        assert!(near > 0.75, "{near}");
        assert!(flat(&cubic) > 0.2, "{}", flat(&cubic));
        assert!(cubic_losses > 2 * reno_losses, "{cubic_losses}");
        assert!(mean(&cubic) > mean(&reno) + 0.08 * cap, "{} vs {}", mean(&cubic), mean(&reno));
    }

    #[test]
    fn algorithm_names_parse_and_print() {
        assert_eq!("cubic".parse(), Ok(CongestionAlgorithm::Cubic));
        assert_eq!("CUBIC".parse(), Ok(CongestionAlgorithm::Cubic));
        assert_eq!("NewReno".parse(), Ok(CongestionAlgorithm::NewReno));
        assert_eq!(" reno ".parse(), Ok(CongestionAlgorithm::NewReno));
        let err = "bbr".parse::<CongestionAlgorithm>().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("unknown congestion control algorithm \"bbr\" (expected \"cubic\", \"newreno\" or \"reno\")")
        );
        assert_eq!(CongestionAlgorithm::default(), CongestionAlgorithm::Cubic);
        for alg in [CongestionAlgorithm::NewReno, CongestionAlgorithm::Cubic] {
            assert_eq!(alg.to_string().parse(), Ok(alg));
            assert_eq!(Congestion::new(alg, MSS).algorithm(), alg);
        }
    }
}
