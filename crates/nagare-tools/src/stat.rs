//! `nagare stat --via SOCKET`: a running netd's clients, sockets, buffers
//! per region and counters (drops by reason among them), and the round
//! trip of a request through its rings, timed here.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

pub fn run(via: &Path, samples: usize) -> Result<()> {
    let netd = nagare::Session::connect(via)?;
    // Timed before the report, so the report counts this client too.
    let mut rtts: Vec<Duration> = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        netd.nop().context("timing a request")?;
        rtts.push(t.elapsed());
    }
    let mut text = netd.stat().context("asking for the report")?;
    if let Some(line) = latency_line(&mut rtts) {
        text.push_str(&line);
        text.push('\n');
    }
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `ipc round_trip_us min .. median .. p99 .. samples N`, or nothing
/// without samples.
fn latency_line(rtts: &mut [Duration]) -> Option<String> {
    if rtts.is_empty() {
        return None;
    }
    rtts.sort_unstable();
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e6;
    Some(format!(
        "ipc round_trip_us min {:.2} median {:.2} p99 {:.2} samples {}",
        at(0.0),
        at(0.5),
        at(0.99),
        rtts.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles() {
        assert_eq!(latency_line(&mut []), None);
        let mut r: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        assert_eq!(latency_line(&mut r).unwrap(), "ipc round_trip_us min 1.00 median 51.00 p99 99.00 samples 100");
    }
}
