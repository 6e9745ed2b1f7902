//! nagare's IPv6 against the Linux kernel's over a TAP device, inside a
//! network namespace each test creates and removes: Linux pings nagare's
//! link-local and configured addresses (5000-byte requests fragmented by
//! Linux and replies fragmented by nagare), nagare pings Linux, and
//! duplicate address detection finds an address the kernel side already
//! has. Needs root and `ping`; says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::process::{Output, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long addresses may take to pass duplicate address detection: about
/// two seconds for nagare (a random delay of up to one, then one second
/// for an answer), with room for a slow machine.
const DAD_LIMIT: Duration = Duration::from_secs(15);

/// `nagare up` in a namespace, its standard output read line by line as
/// it runs.
struct Up {
    process: Process,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Up {
    fn start(ns: &Netns, tap: &str, addrs: &[&str]) -> Up {
        let mut command = ns.command(nagare());
        command.args(["up", "--tap", tap]);
        for addr in addrs {
            command.args(["--addr", addr]);
        }
        let mut process = Process::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped()));
        let stdout = process.child.as_mut().and_then(|c| c.stdout.take()).expect("nagare up's stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Up { process, lines, seen: Vec::new() }
    }

    /// The first line seen that `wanted` accepts, waiting at most `limit`.
    fn wait_for(&mut self, limit: Duration, wanted: impl Fn(&str) -> bool) -> Option<String> {
        if let Some(line) = self.seen.iter().find(|l| wanted(l)) {
            return Some(line.clone());
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return Some(line);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Stops nagare up with SIGTERM; everything it printed.
    fn stop(mut self) -> String {
        let output = self.process.terminate(Duration::from_secs(5)).expect("nagare up stops on SIGTERM");
        assert!(output.status.success(), "nagare up exited with {}", output.status);
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
        self.seen.join("\n")
    }
}

/// The address of a `nagare up: ADDR/LEN preferred` line.
fn preferred_address(line: &str) -> String {
    let cidr = line.trim_start_matches("nagare up: ").trim_end_matches(" preferred");
    cidr.split('/').next().unwrap_or_default().to_string()
}

fn ping6(ns: &Netns, args: &[&str]) -> Output {
    ns.command("ping").arg("-6").args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A TAP whose kernel side has `v4` and `v6` (taken at once: no duplicate
/// address detection on the kernel side).
fn tap(ns: &Netns, name: &str, v4: &str, v6: &str) {
    ns.ip(&["tuntap", "add", "dev", name, "mode", "tap"]);
    run_ok(ns.command("sysctl").args(["-q", "-w", &format!("net.ipv6.conf.{name}.accept_dad=0")]));
    ns.ip(&["addr", "add", v4, "dev", name]);
    ns.ip(&["-6", "addr", "add", v6, "dev", name, "nodad"]);
    ns.ip(&["link", "set", name, "up"]);
}

fn unavailable(test: &str) -> bool {
    let missing = interop_unavailable(&["ping", "sysctl"]);
    if let Some(reason) = &missing {
        skip(test, reason);
    }
    missing.is_some()
}

#[test]
fn linux_pings_nagare_over_ipv6() {
    if unavailable("linux_pings_nagare_over_ipv6") {
        return;
    }
    let ns = Netns::new("v6up");
    tap(&ns, "tap0", "10.80.0.1/24", "fd00:80::1/64");
    let mut up = Up::start(&ns, "tap0", &["10.80.0.2/24", "fd00:80::2/64"]);
    let ll = up.wait_for(DAD_LIMIT, |l| l.starts_with("nagare up: fe80:") && l.ends_with(" preferred"));
    let ll = preferred_address(&ll.expect("nagare's link-local address never became preferred"));
    let configured = up.wait_for(DAD_LIMIT, |l| l == "nagare up: fd00:80::2/64 preferred");
    assert!(configured.is_some(), "fd00:80::2 never became preferred: {:?}", up.seen);

    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", &format!("{ll}%tap0")]);
    assert_eq!(ping_received(&out), Some(3), "link-local {ll}: {}", text(&out));
    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "fd00:80::2"]);
    assert_eq!(ping_received(&out), Some(3), "{}", text(&out));
    // 5000 bytes: Linux sends its requests in fragments, nagare its replies.
    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "-s", "5000", "fd00:80::2"]);
    assert_eq!(ping_received(&out), Some(3), "{}", text(&out));
    assert!(text(&out).contains("5008 bytes from fd00:80::2"), "{}", text(&out));

    let summary = up.stop();
    let counter = |name: &str| -> u64 {
        let line = summary.lines().find(|l| l.split_whitespace().next() == Some(name));
        line.and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    assert_eq!(counter("ip6_frag_reassembled"), 3, "{summary}");
    assert!(counter("ip6_frag_sent") >= 12, "4 fragments per reply: {summary}");
    assert!(counter("icmp6_echo_replies_sent") >= 9, "{summary}");
}

#[test]
fn nagare_pings_linux_over_ipv6() {
    if unavailable("nagare_pings_linux_over_ipv6") {
        return;
    }
    let ns = Netns::new("v6ping");
    tap(&ns, "tap1", "10.81.0.1/24", "fd00:81::1/64");
    let ping = |destination: &str, extra: &[&str]| {
        let mut command = ns.command(nagare());
        command.args(["ping", "--tap", "tap1", "--addr", "10.81.0.2/24", "--addr", "fd00:81::2/64"]);
        command.args(["-c", "3", "-i", "0.2", "-W", "2"]).args(extra).arg(destination);
        run_bounded(&mut command, Duration::from_secs(30))
    };
    for extra in [&[][..], &["-s", "5000"][..]] {
        let out = ping("fd00:81::1", extra);
        assert_eq!(out.status.and_then(|s| s.code()), Some(0), "nagare ping {extra:?}:\n{}{}", out.stdout, out.stderr);
        assert!(out.stdout.contains("3 packets transmitted, 3 received, 0% packet loss"), "{}", out.stdout);
    }
    // The kernel side's link-local address (made once the TAP had a
    // carrier), with a zone that nagare drops.
    let shown = run_ok(ns.command("ip").args(["-6", "-o", "addr", "show", "dev", "tap1", "scope", "link"]));
    let shown = String::from_utf8_lossy(&shown.stdout);
    let ll = shown.split_whitespace().skip_while(|w| *w != "inet6").nth(1).and_then(|c| c.split('/').next());
    let ll = ll.unwrap_or_else(|| panic!("no link-local address on tap1: {shown}")).to_string();
    let out = ping(&format!("{ll}%tap1"), &[]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(0), "nagare ping {ll}:\n{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains(&format!("bytes from {ll}: icmp_seq=3")), "{}", out.stdout);
}

#[test]
fn nagare_finds_its_address_taken_by_the_kernel_side() {
    if unavailable("nagare_finds_its_address_taken_by_the_kernel_side") {
        return;
    }
    let ns = Netns::new("v6dad");
    // The kernel side holds fd00:82::2, the address nagare is given.
    tap(&ns, "tap2", "10.82.0.1/24", "fd00:82::2/64");
    let mut up = Up::start(&ns, "tap2", &["10.82.0.2/24", "fd00:82::2/64"]);
    let duplicate = up.wait_for(DAD_LIMIT, |l| l.starts_with("nagare up: fd00:82::2/64 "));
    assert_eq!(
        duplicate.as_deref(),
        Some("nagare up: fd00:82::2/64 duplicate: another node has it; not used"),
        "{:?}",
        up.seen
    );
    // The link-local address, which nobody else has, is nagare's and
    // answers.
    let ll = up.wait_for(DAD_LIMIT, |l| l.starts_with("nagare up: fe80:") && l.ends_with(" preferred"));
    let ll = preferred_address(&ll.expect("nagare's link-local address never became preferred"));
    let out = ping6(&ns, &["-c", "2", "-i", "0.2", "-W", "2", &format!("{ll}%tap2")]);
    assert_eq!(ping_received(&out), Some(2), "{}", text(&out));
    let summary = up.stop();
    assert!(summary.contains("dad_duplicates"), "{summary}");
    assert!(!summary.contains("fd00:82::2/64 preferred"), "{summary}");
}
