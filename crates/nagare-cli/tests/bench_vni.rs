//! `nagare bench vni` with tiny settings: it runs (two processes on a
//! segment under /dev/shm, no root needed), prints its tables, and leaves
//! no segment behind.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn bench_vni_quick_prints_the_tables() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nagare"))
        .args(["bench", "vni", "--quick", "--no-linux"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nagare bench vni");
    let pid = child.id();
    // Bounded: a hung bench is killed (by its pid) and the test fails.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = status.unwrap_or_else(|| panic!("nagare bench vni --quick took over 120 s:\n{out}\n{err}"));
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
