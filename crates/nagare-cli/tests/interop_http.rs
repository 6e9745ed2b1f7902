//! ApacheBench (`ab`) against `nagare up --http` over a TAP in a network
//! namespace the test makes: without keep-alive every request is a
//! connection of its own; with `-k` (HTTP/1.0 and `Connection:
//! Keep-Alive`) every request but the first of each connection reuses it,
//! which works only if the response says `Connection: keep-alive`.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

const REQUESTS: usize = 2000;
const CONCURRENCY: usize = 20;

/// The value of `ab`'s summary line `name:`, as a number.
fn field(report: &str, name: &str) -> Option<usize> {
    let line = report.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

fn ab(ns: &Netns, keep_alive: bool, url: &str) -> String {
    let (n, c) = (REQUESTS.to_string(), CONCURRENCY.to_string());
    let mut args = vec!["60", "ab", "-q", "-s", "10", "-n", &n, "-c", &c];
    if keep_alive {
        args.push("-k");
    }
    args.push(url);
    // `timeout` bounds the whole run: a hang fails the test instead of
    // blocking the suite.
    let out = ns.command("timeout").args(&args).stdin(Stdio::null()).output().expect("running ab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ab {args:?} failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn apachebench_with_and_without_keep_alive() {
    if let Some(reason) = interop_unavailable(&["ab", "timeout"]) {
        skip("apachebench_with_and_without_keep_alive", &reason);
        return;
    }
    let root = std::env::temp_dir().join(format!("nagare-ab-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("index.html"), pattern(4096, 7)).unwrap();
    let ns = Netns::new("ab");
    ns.tap("tapab", "10.79.0.1/24");
    let mut up = Process::spawn(
        ns.command(nagare())
            .args(["up", "--tap", "tapab", "--addr", "10.79.0.2/24", "--http"])
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    assert!(answers_ping(&ns, "10.79.0.2"), "nagare up did not come up");

    let url = "http://10.79.0.2/index.html";
    let plain = ab(&ns, false, url);
    assert_eq!(field(&plain, "Complete requests:"), Some(REQUESTS), "{plain}");
    assert_eq!(field(&plain, "Failed requests:"), Some(0), "{plain}");
    assert_eq!(field(&plain, "Document Length:"), Some(4096), "{plain}");

    let kept = ab(&ns, true, url);
    assert_eq!(field(&kept, "Complete requests:"), Some(REQUESTS), "{kept}");
    assert_eq!(field(&kept, "Failed requests:"), Some(0), "{kept}");
    // Every request after the first on each connection went over a kept one.
    let reused = field(&kept, "Keep-Alive requests:").unwrap_or(0);
    assert!(reused >= REQUESTS - CONCURRENCY, "only {reused} of {REQUESTS} requests were kept alive:\n{kept}");

    up.terminate(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&root);
}
