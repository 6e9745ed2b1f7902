//! The commands that need no root, run as a user would run them.

use std::process::Command;

fn nagare() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nagare"))
}

#[test]
fn demo_runs_every_step_and_leaks_no_buffer() {
    let dir = std::env::temp_dir().join(format!("nagare-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("demo.pcap");
    let out = nagare().args(["demo", "--stream", "2000", "--pcap"]).arg(&pcap).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "demo failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for expected in [
        "ping A -> B, 56 bytes x4",
        "4 replies",
        "3 replies",
        "byte-exact",
        "frag_reassembled",
        "buffers in use after the run: A 0 / B 0",
    ] {
        assert!(text.contains(expected), "demo output lacks {expected:?}:\n{text}");
    }
    let capture = std::fs::read(&pcap).unwrap();
    assert_eq!(&capture[..4], &0xa1b2_c3d4u32.to_le_bytes(), "pcap magic");
    assert!(capture.len() > 100_000, "capture holds the run ({} bytes)", capture.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ping_without_tap_reaches_a_simulated_peer() {
    let out = nagare().args(["ping", "-c", "3", "-s", "3000", "10.9.0.2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("3008 bytes from 10.9.0.2: icmp_seq=3"), "{text}");
    assert!(text.contains("3 packets transmitted, 3 received, 0% packet loss"), "{text}");
}

#[test]
fn bad_arguments_get_clear_errors() {
    let out = nagare().args(["up", "--tap", "t0", "--addr", "10.0.0.300/24"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--addr"));
    let out = nagare()
        .args(["up", "--tap", "t0", "--addr", "10.0.0.1/24", "--impair", "loss=3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--impair"));
}
