//! Single-stream TCP bulk throughput in one process over an in-memory link
//! at MTU 1500: nagare -> nagare beside smoltcp -> smoltcp, same bytes,
//! same run. `cargo bench -p nagare-bench --bench tcp_memory`.
//!
//! Environment: `NAGARE_BENCH_BYTES` (default 1 GiB), `NAGARE_BENCH_RUNS`
//! (default 3), `NAGARE_BENCH_BUFFER` (socket buffers, default 4 MiB),
//! `NAGARE_BENCH_CSV` (a file to write the figures to).

#[path = "peer/smoltcp.rs"]
mod smoltcp_peer;

use nagare_bench::bulk::{nagare_bulk, BulkResult, SendMode, WRITE_SIZE};
use nagare_bench::net::LinkKind;
use nagare_bench::report::{env_or, gbps, load_average, median_by};
use smoltcp_peer::{smoltcp_loopback_as_shipped, smoltcp_two_interfaces, SmolResult};
use std::io::Write;
use std::time::Duration;

const TIME_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    // `cargo bench` passes `--bench`; a filter or `--list` is ignored.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs benches without `--bench`: the
        // crate's unit tests exercise the same routines, small.
        println!("tcp_memory: measured only under `cargo bench`");
        return;
    }
    let bytes: u64 = env_or("NAGARE_BENCH_BYTES", 1u64 << 30);
    let runs: usize = env_or("NAGARE_BENCH_RUNS", 3usize).max(1);
    let buffer: usize = env_or("NAGARE_BENCH_BUFFER", 4usize << 20);
    println!(
        "tcp_memory: {} MiB per stream, socket buffers {} KiB, median of {runs} runs (interleaved); load average {} before",
        bytes >> 20,
        buffer >> 10,
        load_average()
    );
    println!("  nagare: two Interfaces on a pair of in-memory FIFO frame queues (MTU 1500), and on nagare-dev's SimLink (zero latency,");
    println!(
        "          unlimited bandwidth, MTU 1500; frames held in a delivery-time heap), one thread, virtual clock;"
    );
    println!("          sender writes {} KiB per call (Tcp::send copies; Tcp::send_buf hands over a shared chain), receiver Tcp::recv_buf;", WRITE_SIZE >> 10);
    println!("  smoltcp 0.14: two Interfaces on a pair of in-memory frame queues (MTU 1500, checksums on), one thread, wall clock;");
    println!("  smoltcp, set_ack_delay(None): the same with the receiver's delayed ACK off;");
    println!("  smoltcp as shipped: its loopback_benchmark example (one Interface on Loopback, MTU 65535, no checksums, 64 KiB buffers).\n");

    // For profiling: `NAGARE_BENCH_ONLY=zero|copy|zero-sim|copy-sim` runs one nagare stream
    // and nothing else.
    if let Ok(only) = std::env::var("NAGARE_BENCH_ONLY") {
        let mode = if only.contains("copy") && !only.contains("zero") { SendMode::Copy } else { SendMode::ZeroCopy };
        let link = if only.contains("sim") { LinkKind::Sim } else { LinkKind::Fifo };
        let r = nagare_bulk(bytes, mode, buffer, link, TIME_LIMIT).expect("nagare");
        println!("nagare {mode:?} {link:?}: {:.2} Gbit/s, {r:?}", r.gbps());
        return;
    }
    let warm = (bytes / 8).max(1 << 20);
    let _ = nagare_bulk(warm, SendMode::ZeroCopy, buffer, LinkKind::Fifo, TIME_LIMIT).expect("warm-up");
    let _ = smoltcp_two_interfaces(warm, 1500, buffer, false, TIME_LIMIT).expect("warm-up");

    let mut zero: Vec<BulkResult> = Vec::new();
    let mut copy: Vec<BulkResult> = Vec::new();
    let mut sim: Vec<BulkResult> = Vec::new();
    let mut smol: Vec<SmolResult> = Vec::new();
    let mut quick: Vec<SmolResult> = Vec::new();
    let mut shipped: Vec<SmolResult> = Vec::new();
    for run in 0..runs {
        zero.push(
            nagare_bulk(bytes, SendMode::ZeroCopy, buffer, LinkKind::Fifo, TIME_LIMIT).expect("nagare zero copy"),
        );
        copy.push(nagare_bulk(bytes, SendMode::Copy, buffer, LinkKind::Fifo, TIME_LIMIT).expect("nagare copy"));
        sim.push(nagare_bulk(bytes, SendMode::ZeroCopy, buffer, LinkKind::Sim, TIME_LIMIT).expect("nagare on SimLink"));
        smol.push(smoltcp_two_interfaces(bytes, 1500, buffer, false, TIME_LIMIT).expect("smoltcp"));
        quick.push(smoltcp_two_interfaces(bytes, 1500, buffer, true, TIME_LIMIT).expect("smoltcp, no delayed ACK"));
        shipped.push(smoltcp_loopback_as_shipped(bytes, TIME_LIMIT).expect("smoltcp loopback"));
        eprintln!(
            "  run {}: nagare zero copy {:.2}, copy {:.2}, zero copy on SimLink {:.2}, smoltcp {:.2}, smoltcp ACK every segment {:.2}, smoltcp as shipped {:.2} Gbit/s",
            run + 1,
            zero[run].gbps(),
            copy[run].gbps(),
            sim[run].gbps(),
            gbps(smol[run].bytes, smol[run].elapsed),
            gbps(quick[run].bytes, quick[run].elapsed),
            gbps(shipped[run].bytes, shipped[run].elapsed)
        );
    }
    let z = median_by(&zero, BulkResult::gbps);
    let c = median_by(&copy, BulkResult::gbps);
    let m = median_by(&sim, BulkResult::gbps);
    let s = median_by(&smol, |r| gbps(r.bytes, r.elapsed));
    let q = median_by(&quick, |r| gbps(r.bytes, r.elapsed));
    let qg = gbps(q.bytes, q.elapsed);
    let l = median_by(&shipped, |r| gbps(r.bytes, r.elapsed));
    let sg = gbps(s.bytes, s.elapsed);
    let lg = gbps(l.bytes, l.elapsed);

    println!("| stack | link | send call | MTU | Gbit/s | ns per data segment | ratio to smoltcp (MTU 1500) |");
    println!("|---|---|---|---:|---:|---:|---:|");
    for (link, call, r) in [
        ("FIFO queues", "Tcp::send_buf (zero copy)", z),
        ("FIFO queues", "Tcp::send (one copy)", c),
        ("SimLink", "Tcp::send_buf (zero copy)", m),
    ] {
        println!(
            "| nagare | {link} | {call} | 1500 | {:.2} | {:.0} | **{:.2}** |",
            r.gbps(),
            r.elapsed.as_nanos() as f64 / r.segments_b.max(1) as f64,
            r.gbps() / sg
        );
    }
    println!(
        "| smoltcp | FIFO queues | send(closure) | 1500 | {sg:.2} | {:.0} | 1.00 |",
        s.elapsed.as_nanos() as f64 / s.frames_ab.max(1) as f64
    );
    println!(
        "| smoltcp, `set_ack_delay(None)` | FIFO queues | send(closure) | 1500 | {qg:.2} | {:.0} | {:.2} |",
        q.elapsed.as_nanos() as f64 / q.frames_ab.max(1) as f64,
        qg / sg
    );
    println!(
        "| smoltcp, loopback_benchmark as shipped | Loopback | send(closure) | 65535 | {lg:.2} | | {:.2} |",
        lg / sg
    );
    println!(
        "\nnagare zero copy (FIFO): {} data segments at B, {} segments (ACKs) at A, {} idle jumps of the virtual clock, {:?} of virtual time.",
        z.segments_b, z.segments_a, z.idle_jumps, z.virtual_time
    );
    println!(
        "smoltcp: {} frames A->B (longest {} bytes), {} frames B->A (ACKs); with set_ack_delay(None) {} and {}.",
        s.frames_ab, s.max_frame, s.frames_ba, q.frames_ab, q.frames_ba
    );
    println!("load average {} after", load_average());

    if let Ok(path) = std::env::var("NAGARE_BENCH_CSV") {
        let mut f = std::fs::File::create(&path).expect("csv file");
        writeln!(f, "stack,gbps").unwrap();
        writeln!(f, "nagare zero copy,{:.4}", z.gbps()).unwrap();
        writeln!(f, "nagare copy,{:.4}", c.gbps()).unwrap();
        writeln!(f, "nagare zero copy on SimLink,{:.4}", m.gbps()).unwrap();
        writeln!(f, "smoltcp,{sg:.4}").unwrap();
        writeln!(f, "smoltcp ack every segment,{qg:.4}").unwrap();
        writeln!(f, "smoltcp as shipped,{lg:.4}").unwrap();
        println!("CSV written to {path}");
    }
}
