//! Small helpers for printing results.

use std::time::Duration;

/// The 1-minute load average, as `/proc/loadavg` has it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The element with the median key (the upper one of an even count).
pub fn median_by<T: Clone>(items: &[T], key: impl Fn(&T) -> f64) -> T {
    assert!(!items.is_empty(), "median of nothing");
    let mut sorted: Vec<T> = items.to_vec();
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    sorted[sorted.len() / 2].clone()
}

/// Gbit/s for `bytes` in `elapsed`.
pub fn gbps(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 * 8.0 / elapsed.as_secs_f64().max(1e-9) / 1e9
}

/// An environment variable parsed, or a default.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
