//! The kernel's stack reaches nagare instances on a VNI segment through
//! `nagare vni bridge`: inside a network namespace each test makes and
//! removes, `ping` answers from two `nagare up --vni` instances and `curl`
//! downloads a file from one, over IPv4 and over IPv6 (neighbour
//! discovery's multicast crossing the segment and the bridge); over IPv6
//! one instance also downloads from the other across the segment alone.
//! Needs root; says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KERNEL: &str = "10.78.0.1";
const A: &str = "10.78.0.2";
const B: &str = "10.78.0.3";
/// Bytes of the file curl downloads.
const FILE_SIZE: usize = 16 << 20;

/// A segment destroyed when dropped, even when the test fails.
struct Vni(String);

impl Drop for Vni {
    fn drop(&mut self) {
        let _ = Command::new(nagare()).args(["vni", "destroy", &self.0]).output();
    }
}

fn ping_received(output: &std::process::Output) -> Option<u32> {
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find(|l| l.contains("packets transmitted"))?;
    line.split(", ").nth(1)?.split_whitespace().next()?.parse().ok()
}

fn up(vni: &str, addr: &str, root: &Path) -> Process {
    up_with(vni, &[&format!("{addr}/24")], root)
}

/// `nagare up` on `vni` with `addrs`, serving `root` over HTTP.
fn up_with(vni: &str, addrs: &[&str], root: &Path) -> Process {
    let mut command = Command::new(nagare());
    command.args(["up", "--vni", vni]);
    for addr in addrs {
        command.args(["--addr", addr]);
    }
    Process::spawn(command.arg("--http").arg(root).stdout(Stdio::null()).stderr(Stdio::null()))
}

#[test]
fn kernel_pings_and_curls_vni_instances_through_the_bridge() {
    let test = "kernel_pings_and_curls_vni_instances_through_the_bridge";
    if let Some(reason) = interop_unavailable(&["ping", "curl", "sha256sum"]) {
        return skip(test, &reason);
    }
    let started = Instant::now();
    let name = format!("bridge-{}", std::process::id());
    let _ = Command::new(nagare()).args(["vni", "destroy", &name]).output();
    run_ok(Command::new(nagare()).args(["vni", "create", &name, "--ports", "4"]));
    let _vni = Vni(name.clone());

    let dir: PathBuf = std::env::temp_dir().join(format!("nagare-vni-interop-{}", std::process::id()));
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.bin"), pattern(FILE_SIZE, 0x5eed)).unwrap();
    std::fs::write(root.join("index.html"), "<h1>VNI</h1>\n").unwrap();

    let ns = Netns::new("vnibr");
    ns.tap("vtap0", &format!("{KERNEL}/24"));
    let mut bridge = Process::spawn(
        ns.command(nagare())
            .args(["vni", "bridge", &name, "--tap", "vtap0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let _a = up(&name, A, &root);
    let _b = up(&name, B, &root);

    // Both instances answer the kernel's ping through the bridge.
    for addr in [A, B] {
        assert!(answers_ping(&ns, addr), "{addr} never answered a ping through the bridge");
        let out = ns.command("ping").args(["-c", "20", "-i", "0.01", "-W", "2", addr]).output().unwrap();
        assert_eq!(ping_received(&out), Some(20), "{}", String::from_utf8_lossy(&out.stdout));
    }
    // Fragmented pings cross too (the bridge moves frames, not packets).
    let out = ns.command("ping").args(["-c", "3", "-i", "0.05", "-s", "4000", "-W", "2", B]).output().unwrap();
    assert_eq!(ping_received(&out), Some(3), "{}", String::from_utf8_lossy(&out.stdout));

    // curl downloads from A, byte-exact; a small page from B.
    let download = dir.join("download.bin");
    let status = ns
        .command("curl")
        .args(["-s", "-S", "--max-time", "60", "-o"])
        .arg(&download)
        .arg(format!("http://{A}/big.bin"))
        .status()
        .unwrap();
    assert!(status.success(), "curl through the bridge failed: {status}");
    assert_eq!(sha256(&download), sha256(&root.join("big.bin")), "download through the bridge corrupted");
    let page = ns.command("curl").args(["-s", "--max-time", "10", &format!("http://{B}/index.html")]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&page.stdout), "<h1>VNI</h1>\n");

    // The bridge holds a port of its own: three of four attached.
    let info = run_ok(Command::new(nagare()).args(["vni", "info", &name]));
    assert!(
        String::from_utf8_lossy(&info.stdout).contains("attached 3 of 4"),
        "{}",
        String::from_utf8_lossy(&info.stdout)
    );

    // SIGTERM stops the bridge cleanly, with its counters.
    let out = bridge.terminate(Duration::from_secs(5)).expect("the bridge stops on SIGTERM");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bridge exited with {}: {text}{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("tap -> vni") && text.contains("vni -> tap") && text.contains("mac table"), "{text}");
    let forwarded = |dir: &str| -> u64 {
        let line = text.lines().find(|l| l.contains(dir)).unwrap_or("");
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .iter()
            .position(|w| *w == "forwarded")
            .and_then(|i| words.get(i + 1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(forwarded("vni -> tap") > (FILE_SIZE / 1514) as u64, "{text}");
    assert!(forwarded("tap -> vni") > 100, "{text}");
    eprintln!("{text}");
    eprintln!("{test}: {:.1} s", started.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn instances_and_the_kernel_reach_each_other_over_ipv6_on_a_segment() {
    let test = "instances_and_the_kernel_reach_each_other_over_ipv6_on_a_segment";
    if let Some(reason) = interop_unavailable(&["ping", "curl", "sha256sum", "sysctl"]) {
        return skip(test, &reason);
    }
    let name = format!("bridge6-{}", std::process::id());
    let _ = Command::new(nagare()).args(["vni", "destroy", &name]).output();
    run_ok(Command::new(nagare()).args(["vni", "create", &name, "--ports", "4"]));
    let _vni = Vni(name.clone());
    let dir: PathBuf = std::env::temp_dir().join(format!("nagare-vni-interop6-{}", std::process::id()));
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.bin"), pattern(FILE_SIZE, 0x5eed6)).unwrap();

    let ns = Netns::new("vnibr6");
    ns.tap("vtap6", &format!("{KERNEL}/24"));
    run_ok(ns.command("sysctl").args(["-q", "-w", "net.ipv6.conf.vtap6.accept_dad=0"]));
    ns.ip(&["-6", "addr", "add", "fd00:78::1/64", "dev", "vtap6", "nodad"]);
    let _bridge = Process::spawn(
        ns.command(nagare())
            .args(["vni", "bridge", &name, "--tap", "vtap6"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let _a = up_with(&name, &[&format!("{A}/24"), "fd00:78::2/64"], &root);
    let answers = wait_until(Duration::from_secs(15), || {
        let out = ns.command("ping").args(["-6", "-c", "1", "-W", "1", "fd00:78::2"]).output().unwrap();
        ping_received(&out) == Some(1)
    });
    assert!(answers, "fd00:78::2 never answered ping -6 through the bridge");

    let download = dir.join("download6.bin");
    let curl = ns
        .command("curl")
        .args(["-6", "-g", "-s", "-S", "--max-time", "60", "-o"])
        .arg(&download)
        .arg("http://[fd00:78::2]/big.bin")
        .output()
        .unwrap();
    assert!(curl.status.success(), "curl -6 through the bridge: {}", String::from_utf8_lossy(&curl.stderr));
    assert_eq!(sha256(&download), sha256(&root.join("big.bin")), "IPv6 download through the bridge corrupted");

    // One instance from the other, across the segment alone.
    let fetched = dir.join("fetched6.bin");
    let mut fetch = Command::new(nagare());
    fetch.args(["fetch", "--vni", &name, "--addr", &format!("{B}/24"), "--addr", "fd00:78::3/64"]);
    fetch.args(["--timeout", "60", "http://[fd00:78::2]/big.bin", "-o"]).arg(&fetched);
    let result = run_bounded(&mut fetch, Duration::from_secs(90));
    assert_eq!(result.status.and_then(|s| s.code()), Some(0), "{}{}", result.stdout, result.stderr);
    assert_eq!(sha256(&fetched), sha256(&root.join("big.bin")), "IPv6 fetch across the segment corrupted");
    let _ = std::fs::remove_dir_all(&dir);
}
