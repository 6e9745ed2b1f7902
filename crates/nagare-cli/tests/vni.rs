//! `nagare vni` and `nagare up --vni`: separate processes on one segment
//! under /dev/shm (no root needed), with IPv4 addresses and with IPv6 ones
//! only.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn nagare() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nagare"))
}

fn run(args: &[&str]) -> Output {
    nagare().args(args).output().expect("running nagare")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A segment removed, and `nagare up` children killed (by their pid),
/// even when the test fails.
struct Fixture {
    name: String,
    children: Vec<Child>,
}

impl Fixture {
    fn up(&mut self, addr: &str) -> usize {
        let child = nagare()
            .args(["up", "--vni", &self.name, "--addr", addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nagare up");
        self.children.push(child);
        self.children.len() - 1
    }

    fn info(&self) -> String {
        let out = run(&["vni", "info", &self.name]);
        assert!(out.status.success(), "{}", text(&out));
        text(&out)
    }

    /// Waits until `vni info` contains `needle`.
    fn wait_for_info(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = self.info();
            if info.contains(needle) {
                return info;
            }
            assert!(Instant::now() < deadline, "no {needle:?} in:\n{info}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn ping(&self, from: &str, to: &str) -> Output {
        run(&["ping", "--vni", &self.name, "--addr", from, "-c", "3", "-i", "0.05", "-W", "2", to])
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = run(&["vni", "destroy", &self.name]);
    }
}

#[test]
fn instances_in_separate_processes_reach_each_other() {
    let name = format!("clitest-{}", std::process::id());
    let _ = run(&["vni", "destroy", &name]);
    let out = run(&["vni", "create", &name, "--ports", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("4 ports, MTU 1500"), "{}", text(&out));
    let mut f = Fixture { name: name.clone(), children: Vec::new() };

    let info = f.info();
    assert!(info.contains("attached 0 of 4"), "{info}");
    assert!(info.contains("16 ports"), "memory growth is reported: {info}");

    f.up("10.77.0.1/24");
    f.up("10.77.0.2/24");
    let info = f.wait_for_info("attached 2 of 4");
    assert!(info.contains("02:6e:0a:4d:00:01") && info.contains("02:6e:0a:4d:00:02"), "{info}");

    // A third instance pings both.
    for to in ["10.77.0.1", "10.77.0.2"] {
        let out = f.ping("10.77.0.3/24", to);
        assert!(out.status.success(), "ping {to}: {}", text(&out));
        assert!(text(&out).contains("3 received"), "{}", text(&out));
    }

    // kill -9 the first: its port shows dead, a new instance reclaims it
    // and is reachable; the second instance keeps working.
    f.children[0].kill().unwrap();
    f.children[0].wait().unwrap();
    f.wait_for_info(" dead ");
    let out = f.ping("10.77.0.3/24", "10.77.0.1");
    assert!(!out.status.success(), "the killed instance answered: {}", text(&out));
    f.up("10.77.0.4/24");
    f.wait_for_info("attached 2 of 4");
    for to in ["10.77.0.4", "10.77.0.2"] {
        let out = f.ping("10.77.0.3/24", to);
        assert!(out.status.success(), "ping {to}: {}", text(&out));
    }

    // Errors are clear.
    let out = run(&["vni", "create", &name, "--ports", "4"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("exists"), "{}", text(&out));
    let out = run(&["vni", "create", "bad/name", "--ports", "2"]);
    assert!(!out.status.success() && text(&out).contains("invalid VNI name"), "{}", text(&out));
    let out = run(&["vni", "create", "x", "--ports", "2", "--slots", "100"]);
    assert!(!out.status.success() && text(&out).contains("power of two"), "{}", text(&out));
    let out = run(&["up", "--vni", "no-such-segment", "--addr", "10.77.0.9/24"]);
    assert!(!out.status.success() && text(&out).contains("no-such-segment"), "{}", text(&out));
    let out = run(&["up", "--vni", &name, "--tap", "t0", "--addr", "10.77.0.9/24"]);
    assert!(!out.status.success());
    let out = run(&["vni", "bridge", "no-such-segment", "--tap", "t0"]);
    assert!(!out.status.success() && text(&out).contains("no-such-segment"), "{}", text(&out));
    let out =
        run(&["fetch", "--vni", "no-such-segment", "--addr", "10.77.0.9/24", "http://10.77.0.1/", "-o", "/dev/null"]);
    assert!(!out.status.success() && text(&out).contains("no-such-segment"), "{}", text(&out));

    drop(f);
    assert!(!run(&["vni", "info", &name]).status.success(), "destroyed");
}

/// Instances with IPv6 addresses only (their MACs made from them) reach
/// each other and a dual-stack one over IPv6, beside IPv4 on the segment.
#[test]
fn ipv6_only_instances_reach_each_other() {
    let name = format!("clitest6-{}", std::process::id());
    let _ = run(&["vni", "destroy", &name]);
    let out = run(&["vni", "create", &name, "--ports", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    let mut f = Fixture { name: name.clone(), children: Vec::new() };
    f.up("fd00:77::1/64");
    let child = nagare()
        .args(["up", "--vni", &name, "--addr", "10.77.0.2/24", "--addr", "fd00:77::2/64"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting nagare up");
    f.children.push(child);
    let info = f.wait_for_info("attached 2 of 4");
    assert!(info.contains("02:6e:00:00:00:01") && info.contains("02:6e:0a:4d:00:02"), "{info}");

    // The instances' addresses pass duplicate address detection in about
    // two seconds: a ping before that finds nobody, so each is tried
    // until it answers, ten times and ten seconds at most.
    for to in ["fd00:77::1", "fd00:77::2"] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut out = f.ping("fd00:77::3/64", to);
        for _ in 0..10 {
            if out.status.success() || Instant::now() >= deadline {
                break;
            }
            out = f.ping("fd00:77::3/64", to);
        }
        assert!(out.status.success(), "ping {to}: {}", text(&out));
        assert!(text(&out).contains("3 received"), "{}", text(&out));
    }
    let out = f.ping("10.77.0.3/24", "10.77.0.2");
    assert!(out.status.success(), "ping 10.77.0.2: {}", text(&out));
    drop(f);
}
