//! A spoofed SYN flood (hping3) against `nagare up --http` over a TAP, with
//! legitimate fetches (ApacheBench) from the kernel side during it: the SYN
//! guard engages, the TAP's filter drops the flood in the sender's system
//! call, and at least 99 % of the fetches succeed. The flood stays inside
//! the namespace the test makes and is bounded in time.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

const FLOOD_SECS: u64 = 10;

/// Complete and failed requests of one ApacheBench run.
fn ab(ns: &Netns, args: &[&str], url: &str) -> (usize, usize, String) {
    let out = ns.command("timeout").arg("30").arg("ab").args(args).arg(url).output().expect("running ab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let field = |name: &str| -> usize {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("Complete requests:"), field("Failed requests:"), text)
}

/// Frames the kernel queued for the TAP's reader, and frames it dropped
/// on the way (the filter's drops, and a full queue's).
fn tap_tx(ns: &Netns, dev: &str) -> (u64, u64) {
    let out = run_ok(ns.command("ip").args(["-s", "link", "show", dev]));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().skip_while(|l| !l.trim_start().starts_with("TX:"));
    lines.next();
    let fields: Vec<u64> =
        lines.next().map(|l| l.split_whitespace().filter_map(|v| v.parse().ok()).collect()).unwrap_or_default();
    (fields.get(1).copied().unwrap_or(0), fields.get(3).copied().unwrap_or(0))
}

#[test]
fn fetches_go_on_during_a_spoofed_syn_flood() {
    if let Some(reason) = interop_unavailable(&["ab", "hping3", "timeout"]) {
        skip("fetches_go_on_during_a_spoofed_syn_flood", &reason);
        return;
    }
    let root = std::env::temp_dir().join(format!("nagare-synflood-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("index.html"), pattern(4096, 3)).unwrap();
    let ns = Netns::new("synflood");
    ns.tap("tapsf", "10.86.0.1/24");
    let log = root.join("nagare.log");
    let mut up = Process::spawn(
        ns.command(nagare())
            .args(["up", "--tap", "tapsf", "--addr", "10.86.0.2/24", "--gateway", "10.86.0.1", "--http"])
            .arg(&root)
            .env("NAGARE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap()),
    );
    assert!(answers_ping(&ns, "10.86.0.2"), "nagare up did not come up");
    let url = "http://10.86.0.2/index.html";
    let (done, failed, text) = ab(&ns, &["-n", "200", "-c", "1", "-s", "5"], url);
    assert_eq!((done, failed), (200, 0), "quiet fetches failed:\n{text}");

    let (queued_before, dropped_before) = tap_tx(&ns, "tapsf");
    let mut flood = Process::spawn(
        ns.command("timeout")
            .args([&FLOOD_SECS.to_string(), "hping3", "--flood", "--rand-source", "-S", "-p", "80", "10.86.0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    std::thread::sleep(Duration::from_secs(1));
    let (done, failed, text) = ab(&ns, &["-t", "5", "-n", "1000000", "-c", "2", "-s", "5"], url);
    let (queued_after, dropped_after) = tap_tx(&ns, "tapsf");
    let (queued, dropped) = (queued_after - queued_before, dropped_after - dropped_before);
    flood.terminate(Duration::from_secs(5));

    assert!(done >= 100, "only {done} fetches completed during the flood:\n{text}");
    assert!(failed * 100 <= done, "{failed} of {done} fetches failed during the flood:\n{text}");
    // The flood reached the TAP and most of it never reached nagare's
    // queue. Without the filter nagare reads nearly all of it (a full
    // queue drops a few per cent).
    assert!(dropped > 50_000, "the TAP dropped only {dropped} frames");
    assert!(queued * 2 < dropped, "{queued} frames queued for nagare, {dropped} dropped");

    // Once the flood is over the guard lets go, and fetches go on.
    std::thread::sleep(Duration::from_secs(2));
    let (done, failed, text) = ab(&ns, &["-n", "100", "-c", "1", "-s", "5"], url);
    assert_eq!((done, failed), (100, 0), "fetches after the flood failed:\n{text}");

    up.terminate(Duration::from_secs(5));
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("SYN flood on port(s) [80]"), "the guard never engaged:\n{logged}");
    assert!(logged.contains("filtered in the device"), "the TAP did not take the filter:\n{logged}");
    assert!(logged.contains("SYN flood over"), "the guard never let go:\n{logged}");
    let _ = Command::new("rm").arg("-rf").arg(&root).status();
}
