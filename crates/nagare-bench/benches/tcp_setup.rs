//! Connection set-up and tear-down rate: two nagare instances in memory
//! beside the Linux kernel on 127.0.0.1, same steps, same run.
//! `cargo bench -p nagare-bench --bench tcp_setup`.
//!
//! Environment: `NAGARE_BENCH_CONNECTIONS` (per run, default 20 000),
//! `NAGARE_BENCH_RUNS` (default 3, interleaved, median shown).

use nagare_bench::report::{env_or, load_average, median_by};
use nagare_bench::setup::{linux_setup, nagare_setup, SetupResult, NAGARE_TICK, NAGARE_TIME_WAIT};
use std::time::Duration;

const TIME_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs benches without `--bench`: the
        // crate's unit tests exercise the same routines, small.
        println!("tcp_setup: measured only under `cargo bench`");
        return;
    }
    let count: u64 = env_or("NAGARE_BENCH_CONNECTIONS", 20_000u64);
    let runs: usize = env_or("NAGARE_BENCH_RUNS", 3usize).max(1);
    println!(
        "tcp_setup: {count} connections per run, one at a time (connect, accept, 1 byte each way, client closes, server reads EOF and closes), \
         median of {runs} runs (interleaved); load average {} before",
        load_average()
    );
    println!(
        "  nagare: two Interfaces on the simulated link, one thread, virtual clock {NAGARE_TICK:?} per connection, TIME-WAIT {NAGARE_TIME_WAIT:?} (virtual)"
    );
    println!("  Linux: std::net TcpStream/TcpListener on 127.0.0.1, one thread (blocking calls)\n");
    nagare_setup(count / 10 + 1, TIME_LIMIT).expect("warm-up");
    linux_setup(count / 10 + 1, TIME_LIMIT).expect("warm-up");
    let mut nagare = Vec::new();
    let mut linux = Vec::new();
    for run in 0..runs {
        nagare.push(nagare_setup(count, TIME_LIMIT).expect("nagare"));
        linux.push(linux_setup(count, TIME_LIMIT).expect("linux"));
        eprintln!(
            "  run {}: nagare {:.0}/s, Linux {:.0}/s",
            run + 1,
            nagare[run].per_second(),
            linux[run].per_second()
        );
    }
    let n = median_by(&nagare, SetupResult::per_second);
    let l = median_by(&linux, SetupResult::per_second);
    println!("| stack | connections per second | µs per connection | nagare / Linux |");
    println!("|---|---:|---:|---:|");
    println!(
        "| nagare (in memory) | {:.0} | {:.2} | **{:.1}** |",
        n.per_second(),
        n.us_per_connection(),
        n.per_second() / l.per_second()
    );
    println!("| Linux (127.0.0.1) | {:.0} | {:.2} | |", l.per_second(), l.us_per_connection());
    println!(
        "\nnagare: at most {} connections held by the client at once (TIME-WAIT included), {} idle jumps of the virtual clock in the median run.",
        n.peak_held, n.idle_jumps
    );
    println!("load average {} after", load_average());
}
