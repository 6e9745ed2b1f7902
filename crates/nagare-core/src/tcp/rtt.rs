//! The retransmission timer's duration: RFC 6298's estimator, with the
//! per-ACK sampling RFC 7323 allows when timestamps are in use.
//!
//! The estimator only turns RTT samples into an RTO. Deciding which ACKs may
//! give a sample is the connection's job, and Karn's algorithm (RFC 6298
//! section 3) binds it: a segment that was retransmitted must not be sampled,
//! because its ACK cannot say which transmission it answers, unless the
//! sample comes from a timestamp echo (RFC 7323 section 4.1), which does say.

use core::time::Duration;

/// Bounds and constants of the RTO computation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RttConfig {
    /// RTO before the first sample (RFC 6298 (2.1): 1 s).
    pub initial_rto: Duration,
    /// Lower bound on RTO. RFC 6298 (2.4) asks for 1 s; 200 ms, as Linux
    /// uses, is the default because 1 s stalls a loss on a LAN for ages and
    /// delayed ACKs (at most 200 ms, RFC 9293) are what the bound protects.
    pub min_rto: Duration,
    /// Upper bound on RTO, backoff included (RFC 6298 (2.5): at least 60 s).
    pub max_rto: Duration,
    /// The clock granularity G of RFC 6298: the variance term never counts
    /// for less, so an RTT with no measured jitter still gets some slack.
    pub clock_granularity: Duration,
}

impl Default for RttConfig {
    fn default() -> Self {
        RttConfig {
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(120),
            clock_granularity: Duration::from_millis(1),
        }
    }
}

/// RFC 6298 (5.7): after a SYN timed out, data transmission must not start
/// with an RTO under 3 s, since the path has just shown it can take that long.
const SYN_TIMEOUT_RTO: Duration = Duration::from_secs(3);

/// Samples beyond this are clamped: no real path takes an hour per round trip,
/// and the bound keeps every product below in range of `u64` nanoseconds.
const MAX_SAMPLE_NS: u64 = 3_600 * 1_000_000_000;

/// SRTT, RTTVAR, the backoff and the minimum RTT of one connection.
///
/// Kept to 32 bytes since every connection carries one. Values are held in
/// nanoseconds so that the gains of scaled sampling (as small as 1/8 over the
/// number of samples per window) still move the estimate.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt_ns: u64,
    rttvar_ns: u64,
    /// `u64::MAX` until the first sample.
    min_rtt_ns: u64,
    backoff: u32,
    has_sample: bool,
    syn_timed_out: bool,
}

impl RttEstimator {
    /// An estimator with no sample yet: its RTO is `config.initial_rto`.
    pub fn new(config: &RttConfig) -> Self {
        // The configuration only matters when an RTO is asked for; taking it
        // here keeps construction symmetric with the other calls.
        let _ = config;
        RttEstimator {
            srtt_ns: 0,
            rttvar_ns: 0,
            min_rtt_ns: u64::MAX,
            backoff: 0,
            has_sample: false,
            syn_timed_out: false,
        }
    }

    /// Takes one RTT measurement, with RFC 6298's gains (alpha 1/8, beta 1/4).
    ///
    /// The sample also clears the backoff: a measurement means the path
    /// delivers again, and RFC 6298 section 5 expects the recomputed RTO to
    /// collapse the backed-off one. Callers must respect Karn's algorithm (see
    /// the module documentation): never sample a retransmitted segment except
    /// through a timestamp echo.
    pub fn sample(&mut self, rtt: Duration, config: &RttConfig) {
        self.sample_scaled(rtt, 1, config);
    }

    /// Takes one of several RTT measurements expected in the same window.
    ///
    /// With timestamps every ACK yields a sample, so the estimator would
    /// forget history `expected_samples` times faster than RFC 6298 intends.
    /// RFC 7323 appendix G divides alpha and beta by
    /// `expected_samples = ceil(FlightSize / (2 * SMSS))` (the 2 for delayed
    /// ACKs), which the caller computes; 0 counts as 1.
    pub fn sample_scaled(&mut self, rtt: Duration, expected_samples: u32, config: &RttConfig) {
        let _ = config;
        let r = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX).min(MAX_SAMPLE_NS);
        self.min_rtt_ns = self.min_rtt_ns.min(r);
        self.backoff = 0;
        if !self.has_sample {
            // RFC 6298 (2.2).
            self.srtt_ns = r;
            self.rttvar_ns = r / 2;
            self.has_sample = true;
            return;
        }
        // RFC 6298 (2.3), RTTVAR first since it uses the old SRTT. All
        // operands are at most MAX_SAMPLE_NS, far from i64's range.
        let n = i64::from(expected_samples.max(1));
        let srtt = to_i64(self.srtt_ns);
        let rttvar = to_i64(self.rttvar_ns);
        let sample = to_i64(r);
        let err = (srtt - sample).abs();
        self.rttvar_ns = to_u64(rttvar + (err - rttvar) / (4 * n));
        self.srtt_ns = to_u64(srtt + (sample - srtt) / (8 * n));
    }

    /// The retransmission timeout, backoff applied and capped at `max_rto`.
    pub fn rto(&self, config: &RttConfig) -> Duration {
        let base = if self.has_sample {
            // RFC 6298 (2.3) and section 4: the variance term is never less
            // than G, so a perfectly steady RTT still leaves room for a tick.
            let var = self.rttvar_ns.saturating_mul(4);
            let g = u64::try_from(config.clock_granularity.as_nanos()).unwrap_or(u64::MAX);
            Duration::from_nanos(self.srtt_ns.saturating_add(var.max(g)))
        } else if self.syn_timed_out {
            config.initial_rto.max(SYN_TIMEOUT_RTO)
        } else {
            config.initial_rto
        };
        // max then min, not clamp: a configuration with min above max must
        // not panic, and the ceiling is the bound that keeps timers finite.
        let base = base.max(config.min_rto).min(config.max_rto);
        let factor = 1u128.checked_shl(self.backoff).unwrap_or(u128::MAX);
        let backed_off = base.as_nanos().saturating_mul(factor);
        if backed_off >= config.max_rto.as_nanos() {
            config.max_rto
        } else {
            // Below max_rto, which is a Duration, so it fits.
            Duration::from_nanos(u64::try_from(backed_off).unwrap_or(u64::MAX))
        }
    }

    /// Doubles the RTO: the timer expired (RFC 6298 (5.5)).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// Forgets the backoff, as when an ACK for new data arrives without a
    /// usable sample but the connection judges the path healthy again.
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// How many times the RTO was doubled since the last sample or reset:
    /// the count of consecutive timeouts, which decides when to give up.
    pub fn backoff_count(&self) -> u32 {
        self.backoff
    }

    /// The handshake completed after at least one SYN timeout: without a
    /// sample, the RTO becomes at least 3 s (RFC 6298 (5.7)), and the backoff
    /// accumulated on the SYN stops counting against data.
    pub fn on_handshake_complete(&mut self) {
        if self.backoff > 0 {
            self.syn_timed_out = true;
        }
        self.backoff = 0;
    }

    /// The smoothed RTT, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.has_sample.then(|| Duration::from_nanos(self.srtt_ns))
    }

    /// The RTT variation (zero before the first sample).
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar_ns)
    }

    /// The smallest RTT ever sampled on this connection: the best estimate
    /// of the path's propagation delay, for delay-based heuristics.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.has_sample.then(|| Duration::from_nanos(self.min_rtt_ns))
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn lax() -> RttConfig {
        // No floor, so the RFC's arithmetic shows through unclamped.
        RttConfig { min_rto: Duration::ZERO, ..RttConfig::default() }
    }

    #[test]
    fn fits_in_32_bytes() {
        assert!(core::mem::size_of::<RttEstimator>() <= 32);
    }

    #[test]
    fn initial_rto_before_any_sample() {
        let c = RttConfig::default();
        let e = RttEstimator::new(&c);
        assert_eq!(e.rto(&c), Duration::from_secs(1));
        assert_eq!(e.srtt(), None);
        assert_eq!(e.min_rtt(), None);
        assert_eq!(e.rttvar(), Duration::ZERO);
    }

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let c = lax();
        let mut e = RttEstimator::new(&c);
        e.sample(ms(100), &c);
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        // SRTT + 4 * RTTVAR = 100 + 200.
        assert_eq!(e.rto(&c), ms(300));
    }

    #[test]
    fn later_samples_use_alpha_eighth_and_beta_quarter() {
        let c = lax();
        let mut e = RttEstimator::new(&c);
        e.sample(ms(100), &c);
        e.sample(ms(200), &c);
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200.
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(&c), Duration::from_micros(112_500 + 250_000));
        e.sample(ms(100), &c);
        // RTTVAR = 3/4 * 62.5 + 1/4 * 12.5; SRTT = 7/8 * 112.5 + 1/8 * 100.
        assert_eq!(e.rttvar(), Duration::from_micros(50_000));
        assert_eq!(e.srtt(), Some(Duration::from_nanos(110_937_500)));
    }

    #[test]
    fn rto_is_clamped_to_min_and_max() {
        let c = RttConfig::default();
        let mut e = RttEstimator::new(&c);
        e.sample(ms(1), &c);
        assert_eq!(e.rto(&c), ms(200));
        let mut slow = RttEstimator::new(&c);
        slow.sample(Duration::from_secs(100), &c);
        assert_eq!(slow.rto(&c), Duration::from_secs(120));
        // An inverted configuration yields the ceiling rather than panicking.
        let odd =
            RttConfig { min_rto: Duration::from_secs(10), max_rto: Duration::from_secs(2), ..RttConfig::default() };
        assert_eq!(e.rto(&odd), Duration::from_secs(2));
    }

    #[test]
    fn backoff_doubles_until_the_cap_and_a_sample_resets_it() {
        let c = RttConfig::default();
        let mut e = RttEstimator::new(&c);
        for (n, want) in [1u64, 2, 4, 8, 16, 32, 64, 120, 120].into_iter().enumerate() {
            assert_eq!(e.backoff_count(), u32::try_from(n).unwrap_or(0));
            assert_eq!(e.rto(&c), Duration::from_secs(want));
            e.back_off();
        }
        for _ in 0..1000 {
            e.back_off();
        }
        assert_eq!(e.rto(&c), Duration::from_secs(120));
        e.sample(ms(100), &c);
        assert_eq!(e.backoff_count(), 0);
        assert_eq!(e.rto(&c), ms(300));
        e.back_off();
        assert_eq!(e.rto(&c), ms(600));
        e.reset_backoff();
        assert_eq!(e.rto(&c), ms(300));
    }

    #[test]
    fn backoff_saturates() {
        let c = RttConfig::default();
        let mut e = RttEstimator::new(&c);
        e.backoff = u32::MAX;
        e.back_off();
        assert_eq!(e.backoff_count(), u32::MAX);
        assert_eq!(e.rto(&c), c.max_rto);
    }

    #[test]
    fn granularity_floors_the_variance_term() {
        let c = RttConfig { min_rto: Duration::ZERO, clock_granularity: ms(10), ..RttConfig::default() };
        let mut e = RttEstimator::new(&c);
        e.sample(ms(50), &c);
        for _ in 0..200 {
            e.sample(ms(50), &c);
        }
        // A steady RTT drives RTTVAR to nothing; G keeps the timer above SRTT.
        assert!(e.rttvar() < Duration::from_micros(1));
        assert_eq!(e.rto(&c), ms(60));
        let coarse = RttConfig { clock_granularity: ms(500), ..c };
        assert_eq!(e.rto(&coarse), ms(550));
    }

    #[test]
    fn scaled_sampling_converges_more_slowly_per_sample() {
        let c = lax();
        let mut plain = RttEstimator::new(&c);
        let mut scaled = RttEstimator::new(&c);
        plain.sample(ms(100), &c);
        scaled.sample_scaled(ms(100), 10, &c);
        // The first sample initialises both the same way.
        assert_eq!(scaled.srtt(), Some(ms(100)));
        for _ in 0..10 {
            plain.sample(ms(200), &c);
            scaled.sample_scaled(ms(200), 10, &c);
        }
        let p = plain.srtt().unwrap_or_default();
        let s = scaled.srtt().unwrap_or_default();
        assert!(p > ms(170), "{p:?}");
        // Ten samples at 1/80 each are worth about one sample at 1/8.
        assert!(s > ms(110) && s < ms(114), "{s:?}");
        // 0 counts as 1.
        let mut zero = RttEstimator::new(&c);
        zero.sample_scaled(ms(100), 0, &c);
        zero.sample_scaled(ms(200), 0, &c);
        assert_eq!(zero.srtt(), Some(Duration::from_micros(112_500)));
        // With huge expected counts, the estimate still moves (no stall at
        // integer resolution for realistic differences).
        let mut many = RttEstimator::new(&c);
        many.sample_scaled(ms(100), 1, &c);
        many.sample_scaled(ms(200), 10_000, &c);
        assert!(many.srtt().unwrap_or_default() > ms(100));
    }

    #[test]
    fn min_rtt_tracks_the_smallest_sample() {
        let c = RttConfig::default();
        let mut e = RttEstimator::new(&c);
        for v in [30, 20, 50, 25] {
            e.sample(ms(v), &c);
        }
        assert_eq!(e.min_rtt(), Some(ms(20)));
    }

    #[test]
    fn absurd_samples_do_not_overflow() {
        let c = RttConfig::default();
        let mut e = RttEstimator::new(&c);
        e.sample(Duration::MAX, &c);
        e.sample(Duration::ZERO, &c);
        e.sample_scaled(Duration::MAX, u32::MAX, &c);
        assert_eq!(e.rto(&c), c.max_rto);
        let huge = RttConfig {
            max_rto: Duration::MAX,
            min_rto: Duration::MAX,
            initial_rto: Duration::MAX,
            clock_granularity: Duration::MAX,
        };
        e.back_off();
        assert_eq!(e.rto(&huge), Duration::MAX);
        assert_eq!(RttEstimator::new(&huge).rto(&huge), Duration::MAX);
    }

    #[test]
    fn syn_timeout_raises_the_rto_until_a_sample() {
        let c = RttConfig::default();
        let mut e = RttEstimator::new(&c);
        e.on_handshake_complete();
        assert_eq!(e.rto(&c), Duration::from_secs(1));
        e.back_off();
        e.on_handshake_complete();
        assert_eq!(e.backoff_count(), 0);
        assert_eq!(e.rto(&c), Duration::from_secs(3));
        e.sample(ms(100), &c);
        assert_eq!(e.rto(&c), ms(300));
    }
}
