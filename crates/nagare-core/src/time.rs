//! Time as the engine sees it: a point on a clock the caller owns.
//!
//! The engine never reads a clock. Every entry point takes `now`, which may
//! come from the monotonic clock of a real host or from a simulation's
//! virtual clock; the engine only compares and adds.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// A point in time, in microseconds since an origin chosen by the caller.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The caller's origin of time.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }

    /// `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Instant { micros: millis.saturating_mul(1000) }
    }

    /// `secs` seconds after the origin.
    pub const fn from_secs(secs: u64) -> Self {
        Instant { micros: secs.saturating_mul(1_000_000) }
    }

    /// Microseconds since the origin.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// Milliseconds since the origin, rounded down.
    pub const fn total_millis(self) -> u64 {
        self.micros / 1000
    }

    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant { micros: self.micros.saturating_add(duration_micros(rhs)) }
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant { micros: self.micros.saturating_sub(duration_micros(rhs)) }
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.micros / 1_000_000, self.micros % 1_000_000)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_micros(7), Instant::from_micros(5007));
        assert_eq!(t - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(Instant::from_micros(u64::MAX) + Duration::from_secs(1), Instant::from_micros(u64::MAX));
    }
}
