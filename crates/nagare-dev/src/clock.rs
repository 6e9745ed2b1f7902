//! The real clock, as the engine sees it.

use std::time::{SystemTime, UNIX_EPOCH};

use nagare_core::Instant;

/// A monotonic clock giving [`Instant`]s counted from its creation.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: std::time::Instant,
    epoch_micros: u64,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        let origin = std::time::Instant::now();
        let epoch_micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        MonotonicClock { origin, epoch_micros }
    }

    /// Time since the clock was created.
    pub fn now(&self) -> Instant {
        let elapsed = self.origin.elapsed();
        Instant::from_micros(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
    }

    /// Microseconds since the Unix epoch at the clock's origin (wall-clock
    /// time, for stamping captures: see [`crate::PcapWriter::new`]).
    pub fn unix_epoch_micros(&self) -> u64 {
        self.epoch_micros
    }

    /// The `std` instant corresponding to `t` on this clock (for sleeping
    /// until a deadline).
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.origin + std::time::Duration::from_micros(t.total_micros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn starts_near_zero_and_advances() {
        let clock = MonotonicClock::new();
        let a = clock.now();
        assert!(a.total_micros() < 1_000_000);
        std::thread::sleep(Duration::from_millis(5));
        let b = clock.now();
        assert!(b.saturating_since(a) >= Duration::from_millis(5));
        // Somewhere after 2020 and before 2100.
        let secs = clock.unix_epoch_micros() / 1_000_000;
        assert!((1_577_836_800..4_102_444_800).contains(&secs), "{secs}");
        let deadline = clock.to_std(b + Duration::from_millis(1));
        assert!(deadline > std::time::Instant::now() - Duration::from_secs(1));
    }
}
