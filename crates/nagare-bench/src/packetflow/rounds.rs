//! One round of traffic on a column: a sender per receiver, started
//! together, each waited for with a bound; what each receiver got.

use super::bed::Column;
use super::procs::{pause, stop_all, Proc};
use super::table::Report;
use std::time::{Duration, Instant};

/// Bytes per datagram the UDP senders send.
pub const DATAGRAM_LEN: usize = 256;
/// Bytes of a full TCP segment on the bench's links (MTU 1500, options
/// of 12 bytes): a transfer of N segments is N times this.
pub const SEGMENT: u64 = 1448;

/// What one sender's test gave: its summary, or why there is none.
pub type Outcome = Result<Report, String>;

fn udp_args(mbit: f64, secs: f64) -> Vec<String> {
    vec![
        "--udp".into(),
        "--len".into(),
        DATAGRAM_LEN.to_string(),
        "--udp-rate".into(),
        format!("{mbit:.3}"),
        "--time".into(),
        format!("{secs}"),
        "--timeout".into(),
        format!("{}", secs + 20.0),
        "--json".into(),
        "--quiet".into(),
    ]
}

fn tcp_args(segments: u64, limit: Duration) -> Vec<String> {
    vec![
        "--tcp".into(),
        "--mode".into(),
        "stream".into(),
        "--bytes".into(),
        (segments * SEGMENT).to_string(),
        "--timeout".into(),
        format!("{}", limit.as_secs_f64()),
        "--json".into(),
        "--quiet".into(),
    ]
}

/// Starts one sender per port; a sender that cannot start is an outcome
/// already.
fn start(column: &Column, ports: &[u16], args: &[String]) -> Vec<Result<Proc, String>> {
    ports.iter().map(|&port| column.sender(port, args).map_err(|e| format!("{e:#}"))).collect()
}

fn reports(senders: Vec<Result<Proc, String>>, deadline: Instant) -> Vec<Outcome> {
    senders
        .into_iter()
        .map(|s| match s {
            Ok(mut p) => p.report(deadline),
            Err(e) => Err(e),
        })
        .collect()
}

/// `mbit` Mbit/s of 256-byte datagrams to each port for `secs`.
pub fn udp(column: &Column, ports: &[u16], mbit: f64, secs: f64) -> Vec<Outcome> {
    let senders = start(column, ports, &udp_args(mbit, secs));
    reports(senders, Instant::now() + Duration::from_secs_f64(secs + 30.0))
}

/// `segments` full segments to each port at once, each transfer bounded
/// by `limit`.
pub fn tcp(column: &Column, ports: &[u16], segments: u64, limit: Duration) -> Vec<Outcome> {
    let senders = start(column, ports, &tcp_args(segments, limit));
    reports(senders, Instant::now() + limit + Duration::from_secs(5))
}

/// `segments` full segments to `tcp_port` while `mbit` Mbit/s of datagrams go to
/// each of `udp_ports` (started half a second before, stopped when the
/// TCP receiver is done); the TCP outcome.
pub fn tcp_under_flood(
    column: &Column,
    tcp_port: u16,
    udp_ports: &[u16],
    mbit: f64,
    segments: u64,
    limit: Duration,
) -> Outcome {
    let flood_secs = limit.as_secs_f64() + 1.0;
    let mut flood: Vec<Proc> = Vec::new();
    for &port in udp_ports {
        match column.sender(port, &udp_args(mbit, flood_secs)) {
            Ok(p) => flood.push(p),
            Err(e) => return Err(format!("a UDP sender: {e:#}")),
        }
    }
    pause(Duration::from_millis(500)).map_err(|e| e.to_string())?;
    let outcome = tcp(column, &[tcp_port], segments, limit).pop().unwrap_or_else(|| Err("no TCP sender".into()));
    stop_all(&mut flood);
    outcome
}
