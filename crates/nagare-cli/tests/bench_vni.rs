//! `nagare bench vni` with tiny settings: it runs (two processes on a
//! segment under /dev/shm, no root needed), prints its tables, and leaves
//! no segment behind.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn bench_vni_quick_prints_the_tables() {
    // Bounded: a hung bench is killed (by its pid) and the test fails.
    let run =
        run_bounded(Command::new(nagare()).args(["bench", "vni", "--quick", "--no-linux"]), Duration::from_secs(120));
    let (pid, out, err) = (run.pid, run.stdout, run.stderr);
    let status = run.status.unwrap_or_else(|| panic!("nagare bench vni --quick took over 120 s:\n{out}\n{err}"));
    assert!(status.success(), "bench failed:\n{out}\n{err}");
    for expected in [
        "SKIPPED: Linux veth iperf3 rows: --no-linux",
        "| UDP 1472-byte datagrams, MTU 1500, copied into the slot |",
        "| UDP 1472-byte datagrams, MTU 1500, frame built in the slot |",
        "| UDP 1472-byte datagrams, MTU 1500, segmentation offload (44 per send), copied |",
        "| UDP 1472-byte datagrams, MTU 1500, segmentation offload (44 per send), by reference |",
        "| TCP single stream, MTU 1500 |",
        "| TCP single stream, MTU 9000 |",
        "| polled | nagare VNI |",
        "| sleep + wake-up | nagare VNI |",
        "| 16 | 240 | 360.03 MiB |",
    ] {
        assert!(out.contains(expected), "no {expected:?} in:\n{out}\n{err}");
    }
    assert!(!out.contains("FAILED"), "a measurement failed:\n{out}\n{err}");
    // Every nagare figure is a number (no dash: each measurement ran).
    let rtt_row = |l: &str| {
        !l.starts_with("| mode")
            && !l.starts_with("| test")
            && l.split('|').nth(2).is_some_and(|c| c.trim() == "nagare VNI")
    };
    for line in out.lines().filter(|l| rtt_row(l) || l.starts_with("| UDP") || l.starts_with("| TCP")) {
        let cell = line.split('|').nth(if rtt_row(line) { 4 } else { 2 }).unwrap().trim();
        assert!(cell.parse::<f64>().is_ok_and(|v| v > 0.0), "no figure in {line:?}:\n{out}");
    }
    let leftovers: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("nagare-vni-nbv-{pid}-")))
        .collect();
    assert!(leftovers.is_empty(), "segments left behind: {leftovers:?}");
}
