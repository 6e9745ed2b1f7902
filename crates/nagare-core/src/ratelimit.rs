//! A token bucket, for ICMP errors (RFC 1812 section 4.3.2.8 asks routers
//! and hosts alike to limit them).

use crate::time::Instant;

/// Allows `rate` events per second on average and `burst` at once.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_sec: u64,
    burst: u64,
    /// Tokens in millionths, so sub-token refills accumulate exactly.
    micro_tokens: u64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate_per_sec: u32, burst: u32) -> Self {
        TokenBucket {
            rate_per_sec: u64::from(rate_per_sec),
            burst: u64::from(burst),
            micro_tokens: u64::from(burst) * 1_000_000,
            updated: Instant::ZERO,
        }
    }

    /// Takes a token if one is there.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let elapsed = now.total_micros().saturating_sub(self.updated.total_micros());
        self.updated = self.updated.max(now);
        let cap = self.burst * 1_000_000;
        self.micro_tokens = self.micro_tokens.saturating_add(elapsed.saturating_mul(self.rate_per_sec)).min(cap);
        if self.micro_tokens >= 1_000_000 {
            self.micro_tokens -= 1_000_000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let mut b = TokenBucket::new(10, 3);
        let t = Instant::from_secs(100);
        assert_eq!((0..5).filter(|_| b.try_take(t)).count(), 3);
        assert!(!b.try_take(Instant::from_micros(t.total_micros() + 99_999)));
        assert!(b.try_take(Instant::from_micros(t.total_micros() + 100_000)));
        let later = Instant::from_secs(200);
        assert_eq!((0..10).filter(|_| b.try_take(later)).count(), 3);
    }
}
