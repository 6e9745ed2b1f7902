//! `nagare perf` between nagare over TAP and the Linux kernel (and between
//! two nagare instances on a bridge), inside a network namespace each test
//! makes and removes: TCP stream both ways, TCP request/response, UDP
//! streams both ways, with byte counts checked; and nagare against the
//! kernel over IPv6, with the TAP's offloads and without.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

const KERNEL: &str = "10.83.0.1";
const NAGARE: &str = "10.83.0.2";

/// A perf server in `ns` whose stdout lines arrive on the receiver.
fn perf_server(ns: &Netns, args: &[&str]) -> (Process, Receiver<String>) {
    let mut cmd = ns.command(nagare());
    cmd.args(["perf", "server"]).args(args).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut process = Process::spawn(&mut cmd);
    let stdout = process.child.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10)).expect("the perf server starts");
    assert!(first.contains("listening on TCP and UDP port 5201"), "{first}");
    (process, rx)
}

fn client(ns: &Netns, tap: Option<(&str, &str)>, server: &str, args: &[&str]) -> String {
    let mut cmd = ns.command(nagare());
    cmd.args(["perf", "client", server, "--timeout", "60", "-q"]);
    if let Some((tap, addr)) = tap {
        cmd.args(["--tap", tap, "--addr", addr]);
    }
    let out: Output = cmd.args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "perf client {args:?} failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("perf client {args:?}:\n{text}");
    text
}

/// The number before `suffix` on the line that starts with `label`.
fn figure(text: &str, label: &str, suffix: &str) -> f64 {
    let line =
        text.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} line:\n{text}"));
    let before = &line[..line.find(suffix).unwrap_or_else(|| panic!("no {suffix:?} in {line:?}"))];
    before.split_whitespace().last().unwrap().parse().unwrap()
}

/// Runs the same set of tests whichever side is nagare, and checks them.
fn run_suite(ns: &Netns, tap: Option<(&str, &str)>, server: &str) {
    const MB100: f64 = (100u64 << 20) as f64;
    let text = client(ns, tap, server, &["--bytes", "100M"]);
    assert_eq!(figure(&text, "sender", " bytes in"), MB100, "{text}");
    assert_eq!(figure(&text, "receiver", " bytes in"), MB100, "{text}");
    assert!(figure(&text, "receiver", " Gbit/s") > 0.05, "{text}");

    let text = client(ns, tap, server, &["--mode", "reverse", "--bytes", "100M"]);
    assert_eq!(figure(&text, "receiver", " bytes in"), MB100, "{text}");
    assert!(figure(&text, "receiver", " Gbit/s") > 0.05, "{text}");

    // A timed stream too: it ends on time and both ends agree.
    let text = client(ns, tap, server, &["--time", "1"]);
    let secs = figure(&text, "receiver", " s =");
    assert!((0.5..3.0).contains(&secs), "{text}");
    assert_eq!(figure(&text, "sender", " bytes in"), figure(&text, "receiver", " bytes in"), "{text}");

    let text = client(ns, tap, server, &["--mode", "rr", "--bytes", "20000", "--len", "100"]);
    assert_eq!(figure(&text, "rr", " transactions in"), 200.0, "{text}");
    let line = text.lines().find(|l| l.contains("latency")).unwrap();
    let p99: f64 = line.split("p99 ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(p99 > 0.0 && p99 < 200_000.0, "{text}");

    for mode in ["stream", "reverse"] {
        let text = client(ns, tap, server, &["--udp", "--mode", mode, "--bytes", "10M", "--udp-rate", "200"]);
        // 10 MiB in 1472-byte datagrams, rounded up.
        let sent = figure(&text, "sender", " datagrams");
        assert_eq!(sent, 7124.0, "{text}");
        let received = figure(&text, "receiver", " datagrams");
        assert!(received >= sent * 0.5 && received <= sent, "UDP {mode}: {received} of {sent}:\n{text}");
        assert_eq!(figure(&text, "lost", " of 7124"), sent - received, "{text}");
    }
}

fn server_log(mut server: Process, lines: Receiver<String>) -> String {
    let output = server.terminate(Duration::from_secs(5)).expect("the perf server stops on SIGTERM");
    assert!(output.status.success(), "perf server: {:?}", output.status);
    // To the pipe's end: the reader may not have passed on the last lines.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut log = Vec::new();
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        log.push(line);
    }
    log.join("\n")
}

fn check_server_log(log: &str) {
    assert!(log.contains("test 6 from"), "{log}");
    assert!(!log.contains("failed"), "{log}");
    assert!(log.contains("tcp stream len 131072: 104857600 bytes"), "{log}");
    assert!(log.contains("tcp rr len 100: 200 transactions"), "{log}");
}

#[test]
fn nagare_client_against_a_kernel_perf_server() {
    if let Some(reason) = interop_unavailable(&[]) {
        return skip("nagare_client_against_a_kernel_perf_server", &reason);
    }
    let ns = Netns::new("perfc");
    ns.tap("tap0", &format!("{KERNEL}/24"));
    // The kernel's side: `nagare perf server` without --tap, in the namespace.
    let (server, lines) = perf_server(&ns, &[]);
    run_suite(&ns, Some(("tap0", &format!("{NAGARE}/24"))), KERNEL);
    let log = server_log(server, lines);
    check_server_log(&log);
    assert!(log.contains(&format!("from {NAGARE}:")), "{log}");
}

#[test]
fn kernel_client_against_a_nagare_perf_server() {
    if let Some(reason) = interop_unavailable(&["ping"]) {
        return skip("kernel_client_against_a_nagare_perf_server", &reason);
    }
    let ns = Netns::new("perfs");
    ns.tap("tap0", &format!("{KERNEL}/24"));
    let (server, lines) = perf_server(&ns, &["--tap", "tap0", "--addr", &format!("{NAGARE}/24")]);
    assert!(answers_ping(&ns, NAGARE), "the nagare perf server never answered a ping");
    run_suite(&ns, None, NAGARE);
    let log = server_log(server, lines);
    check_server_log(&log);
    assert!(log.contains(&format!("from {KERNEL}:")), "{log}");
}

#[test]
fn nagare_to_nagare_over_a_bridge() {
    if let Some(reason) = interop_unavailable(&[]) {
        return skip("nagare_to_nagare_over_a_bridge", &reason);
    }
    let ns = Netns::new("perfn");
    ns.ip(&["link", "add", "br0", "type", "bridge"]);
    for tap in ["tap1", "tap2"] {
        ns.ip(&["tuntap", "add", "dev", tap, "mode", "tap"]);
        ns.ip(&["link", "set", tap, "master", "br0"]);
        ns.ip(&["link", "set", tap, "up"]);
    }
    ns.ip(&["link", "set", "br0", "up"]);
    let (server, lines) = perf_server(&ns, &["--tap", "tap1", "--addr", "10.84.0.2/24"]);
    run_suite(&ns, Some(("tap2", "10.84.0.3/24")), "10.84.0.2");
    let log = server_log(server, lines);
    check_server_log(&log);
}

const KERNEL6: &str = "fd00:83::1";
const NAGARE6: &str = "fd00:83::2";

/// `nagare perf client --tap` over IPv6 (its IPv6 address beside the IPv4
/// one) against the kernel's perf server, one short test of each kind,
/// with `flags` (`--no-offload` or none); the JSON summaries.
fn ipv6_suite(ns: &Netns, flags: &[&str]) -> Vec<serde_json::Value> {
    let nagare_v4 = format!("{NAGARE}/24");
    let nagare_v6 = format!("{NAGARE6}/64");
    let tests: [&[&str]; 4] = [
        &["--mode", "stream"],
        &["--mode", "reverse"],
        &["--mode", "rr", "--len", "64"],
        // Datagrams small enough for one frame, which the kernel sends
        // with a partial checksum where the TAP has offloads.
        &["--udp", "--mode", "reverse", "--len", "64", "--udp-rate", "20"],
    ];
    let mut summaries = Vec::new();
    for test in tests {
        let mut args = vec!["--addr", &nagare_v6, "--time", "1", "--json"];
        args.extend_from_slice(flags);
        args.extend_from_slice(test);
        let text = client(ns, Some(("tap0", &nagare_v4)), KERNEL6, &args);
        let json: serde_json::Value = serde_json::from_str(text.trim().lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{test:?} {flags:?}: not JSON ({e}):\n{text}"));
        assert_eq!(json["server"], format!("[{KERNEL6}]:5201"), "{test:?} {flags:?}: {json}");
        let local = json["client"].as_str().unwrap_or_default();
        assert!(local.starts_with(&format!("[{NAGARE6}]:")), "{test:?} {flags:?}: {json}");
        let received = json["receiver"]["bytes"].as_u64().unwrap_or(0);
        assert!(received > 0, "{test:?} {flags:?}: nothing moved: {json}");
        summaries.push(json);
    }
    summaries
}

#[test]
fn nagare_client_against_a_kernel_perf_server_over_ipv6() {
    if let Some(reason) = interop_unavailable(&["sysctl"]) {
        return skip("nagare_client_against_a_kernel_perf_server_over_ipv6", &reason);
    }
    let ns = Netns::new("perf6");
    ns.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"]);
    // The kernel's address is taken at once: no duplicate address
    // detection on its side.
    run_ok(ns.command("sysctl").args(["-q", "-w", "net.ipv6.conf.tap0.accept_dad=0"]));
    ns.ip(&["addr", "add", &format!("{KERNEL}/24"), "dev", "tap0"]);
    ns.ip(&["-6", "addr", "add", &format!("{KERNEL6}/64"), "dev", "tap0", "nodad"]);
    ns.ip(&["link", "set", "tap0", "up"]);
    let (server, lines) = perf_server(&ns, &[]);
    let with_offload = ipv6_suite(&ns, &[]);
    let without = ipv6_suite(&ns, &["--no-offload"]);
    let log = server_log(server, lines);
    assert!(log.contains("test 8 from"), "{log}");
    assert!(!log.contains("failed"), "{log}");
    assert_eq!(log.matches(&format!("from [{NAGARE6}]:")).count(), 8, "{log}");
    // The kernel's datagrams arrive, those it sent with a partial checksum
    // (offload) too: at 20 Mbit/s over a TAP hardly any is lost.
    for json in [&with_offload[3], &without[3]] {
        assert!(json["lost_percent"].as_f64().is_some_and(|l| l < 50.0), "{json}");
    }
}
