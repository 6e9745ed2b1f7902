//! What `nagare perf` shows: the progress line while a test runs, the
//! latency figures of request/response, and the summary (text or JSON).

use super::protocol::{Mode, Proto};
use nagare_core::Instant;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::Duration;

pub fn gbit_per_s(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / secs / 1e9
}

/// Once a second: elapsed time, bytes in that second and its rate. On a
/// terminal the line is rewritten in place; otherwise one line a second.
pub struct Progress {
    start: Option<Instant>,
    next: Instant,
    last_bytes: u64,
    tty: bool,
    printed: bool,
    enabled: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            start: None,
            next: Instant::ZERO,
            last_bytes: 0,
            tty: std::io::stderr().is_terminal(),
            printed: false,
            enabled,
        }
    }

    pub fn begin(&mut self, now: Instant) {
        self.start = Some(now);
        self.next = now + Duration::from_secs(1);
    }

    /// When the next line is due.
    pub fn due(&self) -> Option<Instant> {
        self.start.map(|_| self.next).filter(|_| self.enabled)
    }

    pub fn update(&mut self, now: Instant, total_bytes: u64) {
        let Some(start) = self.start else { return };
        if !self.enabled || now < self.next {
            return;
        }
        let elapsed = now.saturating_since(start).as_secs_f64();
        let second = (self.next.saturating_since(start).as_secs_f64() - 1.0).max(0.0);
        let bytes = total_bytes.saturating_sub(self.last_bytes);
        let line = format!(
            "{:6.2}-{:<6.2} s  {:>14} bytes  {:8.3} Gbit/s  (total {} bytes)",
            second,
            elapsed,
            bytes,
            gbit_per_s(bytes, elapsed - second),
            total_bytes
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r{line}  ");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.printed = true;
        self.last_bytes = total_bytes;
        // Skip seconds missed (a stalled loop prints one line, not many).
        while self.next <= now {
            self.next += Duration::from_secs(1);
        }
    }

    pub fn finish(&mut self) {
        if self.tty && self.printed {
            eprintln!();
        }
        self.printed = false;
    }
}

/// Most latency samples kept for percentiles; past it a uniform sample
/// of all of them is kept (reservoir sampling), so memory stays bounded.
const MAX_SAMPLES: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct Latency {
    count: u64,
    sum_ns: u128,
    max_ns: u64,
    samples: Vec<u64>,
    rng: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { count: 0, sum_ns: 0, max_ns: 0, samples: Vec::new(), rng: 0x9e37_79b9_7f4a_7c15 }
    }
}

impl Latency {
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(ns);
        } else {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let at = self.rng % self.count;
            if (at as usize) < MAX_SAMPLES {
                self.samples[at as usize] = ns;
            }
        }
    }

    pub fn summary(&self) -> LatencySummary {
        if self.count == 0 {
            return LatencySummary::default();
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let pick = |q: f64| {
            let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[i] as f64 / 1e3
        };
        LatencySummary {
            count: self.count,
            mean_us: (self.sum_ns / u128::from(self.count)) as f64 / 1e3,
            p50_us: pick(0.50),
            p99_us: pick(0.99),
            max_us: self.max_ns as f64 / 1e3,
        }
    }
}

/// One side's view of the bytes it moved.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Side {
    pub bytes: u64,
    pub packets: u64,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The server's endpoint, as the client reached it.
    pub server: String,
    /// The client's end of the control connection (empty if the stack
    /// could not say).
    pub client: String,
    pub proto: Proto,
    pub mode: Mode,
    pub len: u32,
    pub sender: Side,
    pub receiver: Side,
    /// UDP: datagrams sent and not received (rr: requests not answered in
    /// time).
    pub lost: u64,
    pub out_of_order: u64,
    pub latency: Option<LatencySummary>,
}

impl Summary {
    pub fn lost_percent(&self) -> f64 {
        if self.sender.packets == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / self.sender.packets as f64
        }
    }

    pub fn transactions_per_sec(&self) -> f64 {
        if self.receiver.secs <= 0.0 {
            0.0
        } else {
            self.receiver.packets as f64 / self.receiver.secs
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "nagare perf: {} {} with {}{}, {} bytes per {}",
            self.proto.name(),
            self.mode.name(),
            self.server,
            if self.client.is_empty() { String::new() } else { format!(" from {}", self.client) },
            self.len,
            match (self.proto, self.mode) {
                (_, Mode::Rr) => "request and response",
                (Proto::Udp, _) => "datagram",
                _ => "write",
            }
        );
        let side = |s: &mut String, name: &str, side: &Side, datagrams: bool| {
            let packets = if datagrams { format!("{} datagrams, ", side.packets) } else { String::new() };
            let _ = writeln!(
                s,
                "  {name:<9} {packets}{} bytes in {:.3} s = {:.3} Gbit/s",
                side.bytes,
                side.secs,
                gbit_per_s(side.bytes, side.secs)
            );
        };
        match (self.proto, self.mode) {
            (_, Mode::Rr) => {
                let _ = writeln!(
                    s,
                    "  rr        {} transactions in {:.3} s = {:.0} transactions/s",
                    self.receiver.packets,
                    self.receiver.secs,
                    self.transactions_per_sec()
                );
                if let Some(l) = self.latency {
                    let _ = writeln!(
                        s,
                        "  latency   count {} mean {:.1} us, p50 {:.1} us, p99 {:.1} us, max {:.1} us",
                        l.count, l.mean_us, l.p50_us, l.p99_us, l.max_us
                    );
                }
                if self.proto == Proto::Udp {
                    let _ = writeln!(
                        s,
                        "  lost      {} of {} requests ({:.3} %) not answered within {} ms",
                        self.lost,
                        self.sender.packets,
                        self.lost_percent(),
                        super::udp_rr::RESPONSE_TIMEOUT.as_millis()
                    );
                }
            }
            (Proto::Tcp, _) => {
                side(&mut s, "sender", &self.sender, false);
                side(&mut s, "receiver", &self.receiver, false);
            }
            (Proto::Udp, _) => {
                side(&mut s, "sender", &self.sender, true);
                side(&mut s, "receiver", &self.receiver, true);
                let _ = writeln!(
                    s,
                    "  lost      {} of {} datagrams ({:.3} %), {} out of order",
                    self.lost,
                    self.sender.packets,
                    self.lost_percent(),
                    self.out_of_order
                );
            }
        }
        s
    }

    /// The summary as one JSON object.
    pub fn json(&self) -> String {
        let side = |side: &Side| JsonSide {
            bytes: side.bytes,
            packets: side.packets,
            seconds: side.secs,
            gbit_per_s: gbit_per_s(side.bytes, side.secs),
        };
        let udp = self.proto == Proto::Udp;
        let json = JsonSummary {
            server: &self.server,
            client: (!self.client.is_empty()).then_some(self.client.as_str()),
            protocol: self.proto.name(),
            mode: self.mode.name(),
            len: self.len,
            sender: side(&self.sender),
            receiver: side(&self.receiver),
            lost: udp.then_some(self.lost),
            lost_percent: udp.then(|| self.lost_percent()),
            out_of_order: udp.then_some(self.out_of_order),
            transactions: self.latency.map(|_| self.receiver.packets),
            transactions_per_s: self.latency.map(|_| self.transactions_per_sec()),
            latency_us: self.latency.map(|l| JsonLatency {
                count: l.count,
                mean: l.mean_us,
                p50: l.p50_us,
                p99: l.p99_us,
                max: l.max_us,
            }),
        };
        serde_json::to_string(&json).unwrap_or_default()
    }
}

/// The JSON form of a summary: absent fields are left out.
#[derive(serde::Serialize)]
struct JsonSummary<'a> {
    server: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    protocol: &'static str,
    mode: &'static str,
    len: u32,
    sender: JsonSide,
    receiver: JsonSide,
    #[serde(skip_serializing_if = "Option::is_none")]
    lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lost_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    out_of_order: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transactions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transactions_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_us: Option<JsonLatency>,
}

#[derive(serde::Serialize)]
struct JsonSide {
    bytes: u64,
    packets: u64,
    seconds: f64,
    gbit_per_s: f64,
}

#[derive(serde::Serialize)]
struct JsonLatency {
    count: u64,
    mean: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_percentiles() {
        let mut l = Latency::default();
        for us in 1..=100u64 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.count, 100);
        assert_eq!(s.p50_us, 50.0);
        assert_eq!(s.p99_us, 99.0);
        assert_eq!(s.max_us, 100.0);
        assert!((s.mean_us - 50.5).abs() < 1e-9);
        assert_eq!(Latency::default().summary(), LatencySummary::default());
    }

    #[test]
    fn latency_memory_is_bounded() {
        let mut l = Latency::default();
        for i in 0..(MAX_SAMPLES as u64 + 1000) {
            l.record(Duration::from_nanos(i));
        }
        assert_eq!(l.samples.len(), MAX_SAMPLES);
        assert_eq!(l.summary().count, MAX_SAMPLES as u64 + 1000);
    }

    #[test]
    fn summaries_render() {
        let summary = Summary {
            server: "10.0.0.1:5201".into(),
            client: String::new(),
            proto: Proto::Udp,
            mode: Mode::Stream,
            len: 1472,
            sender: Side { bytes: 14720, packets: 10, secs: 1.0 },
            receiver: Side { bytes: 13248, packets: 9, secs: 1.0 },
            lost: 1,
            out_of_order: 0,
            latency: None,
        };
        let text = summary.text();
        assert!(text.contains("lost      1 of 10 datagrams (10.000 %)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
        assert_eq!(json["lost"], 1);
        assert_eq!(json["sender"]["packets"], 10);
        assert_eq!(json["server"], "10.0.0.1:5201");
        assert!(json.get("client").is_none());
        assert!(json.get("latency_us").is_none());
    }

    #[test]
    fn udp_request_response_renders_as_rr_with_its_losses() {
        let latency = LatencySummary { count: 8, mean_us: 30.0, p50_us: 25.0, p99_us: 90.0, max_us: 95.0 };
        let summary = Summary {
            server: "[fd00::1]:5201".into(),
            client: "[fd00::2]:49152".into(),
            proto: Proto::Udp,
            mode: Mode::Rr,
            len: 64,
            sender: Side { bytes: 640, packets: 10, secs: 2.0 },
            receiver: Side { bytes: 512, packets: 8, secs: 2.0 },
            lost: 2,
            out_of_order: 0,
            latency: Some(latency),
        };
        let text = summary.text();
        assert!(text.contains("udp rr with [fd00::1]:5201 from [fd00::2]:49152, 64 bytes"), "{text}");
        assert!(text.contains("rr        8 transactions in 2.000 s = 4 transactions/s"), "{text}");
        assert!(text.contains("p50 25.0 us, p99 90.0 us"), "{text}");
        assert!(text.contains("lost      2 of 10 requests (20.000 %) not answered within 200 ms"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
        assert_eq!(json["transactions"], 8);
        assert_eq!(json["transactions_per_s"], 4.0);
        assert_eq!(json["latency_us"]["p99"], 90.0);
        assert_eq!(json["lost"], 2);
        assert_eq!((&json["server"], &json["client"]), (&"[fd00::1]:5201".into(), &"[fd00::2]:49152".into()));
    }
}
