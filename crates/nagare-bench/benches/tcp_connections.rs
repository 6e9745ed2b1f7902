//! 10 to 10 000 concurrent established connections in one instance: heap
//! bytes per idle connection and the cost of a small write on a random
//! connection. `cargo bench -p nagare-bench --bench tcp_connections`.
//!
//! Environment: `NAGARE_BENCH_COUNTS` (default `10,100,1000,10000`),
//! `NAGARE_BENCH_ROUNDS` (default 200 000), `NAGARE_BENCH_RUNS` (rounds
//! measured this many times per count, median shown; default 3).

use nagare_bench::alloc_count::{self, CountingAlloc};
use nagare_bench::conns::{establish, rounds, RoundsResult};
use nagare_bench::report::{env_or, load_average, median_by};
use nagare_core::tcp::config::TcpConfig;
use nagare_core::tcp::connection::Connection;
use std::time::Duration;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const PAYLOAD: usize = 64;
const TIME_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs benches without `--bench`: the
        // crate's unit tests exercise the same routines, small.
        println!("tcp_connections: measured only under `cargo bench`");
        return;
    }
    let counts: Vec<usize> = std::env::var("NAGARE_BENCH_COUNTS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 100, 1000, 10_000]);
    let n_rounds: u64 = env_or("NAGARE_BENCH_ROUNDS", 200_000u64);
    let runs: usize = env_or("NAGARE_BENCH_RUNS", 3usize).max(1);
    println!(
        "tcp_connections: two nagare Interfaces on the simulated link; A opens N connections to one listener on B; \
         {n_rounds} rounds of one {PAYLOAD}-byte write on a random connection (TCP_NODELAY, no delayed ACK), median of {runs}; \
         load average {} before",
        load_average()
    );
    println!(
        "  size_of::<Connection>() = {} B, of which TcpConfig = {} B; heap bytes counted by a #[global_allocator] (sizes requested, not allocator overhead)\n",
        std::mem::size_of::<Connection>(),
        std::mem::size_of::<TcpConfig>()
    );
    assert!(alloc_count::installed(), "the counting allocator is not installed");

    struct Row {
        n: usize,
        per_conn: f64,
        heap: usize,
        buffers: (usize, usize),
        r: RoundsResult,
    }
    let mut rows: Vec<Row> = Vec::new();
    for &n in &counts {
        let mut est = establish(n).expect("establishing");
        let (per_conn, heap, buffers) = (est.bytes_per_connection(), est.heap_bytes, est.buffers_in_use);
        // A short untimed pass brings the touched state into cache the way
        // a running host has it.
        rounds(&mut est, (n_rounds / 10).max(1), PAYLOAD, 1, TIME_LIMIT).expect("warm-up rounds");
        let results: Vec<RoundsResult> = (0..runs)
            .map(|i| rounds(&mut est, n_rounds, PAYLOAD, 0x9e37_79b9 + i as u64, TIME_LIMIT).expect("rounds"))
            .collect();
        let r = median_by(&results, RoundsResult::ns_per_round);
        eprintln!("  {n} connections: {per_conn:.0} B each, {:.0} ns per round", r.ns_per_round());
        rows.push(Row { n, per_conn, heap, buffers, r });
        drop(est);
    }

    println!("| connections per instance | heap bytes, both instances | bytes per idle connection | marginal bytes per connection | pool buffers held when idle (A, B) | ns per round | segments per round | ns per segment (sent + received) |");
    println!("|---:|---:|---:|---:|---|---:|---:|---:|");
    let mut prev: Option<&Row> = None;
    for row in &rows {
        let marginal = prev
            .map(|p| format!("{:.0}", (row.heap as f64 - p.heap as f64) / (2.0 * (row.n - p.n) as f64)))
            .unwrap_or_default();
        println!(
            "| {} | {} | {:.0} | {} | {}, {} | {:.0} | {:.2} | {:.0} |",
            row.n,
            row.heap,
            row.per_conn,
            marginal,
            row.buffers.0,
            row.buffers.1,
            row.r.ns_per_round(),
            row.r.segments as f64 / row.r.rounds as f64,
            row.r.ns_per_segment()
        );
        prev = Some(row);
    }
    println!("\nload average {} after", load_average());
}
