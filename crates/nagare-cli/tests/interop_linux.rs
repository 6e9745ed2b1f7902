//! nagare against the Linux kernel's stack over a TAP device, inside a
//! network namespace each test creates and removes. Needs root; says
//! SKIPPED loudly otherwise.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

const KERNEL: &str = "10.77.0.1";
const NAGARE: &str = "10.77.0.2";

fn start_up(ns: &Netns, pcap: &std::path::Path) -> Process {
    let process = Process::spawn(
        ns.command(nagare())
            .args(["up", "--tap", "tap0", "--addr", &format!("{NAGARE}/24"), "--pcap"])
            .arg(pcap)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    // Ready once it answers ARP: a single ping gets through.
    assert!(answers_ping(ns, NAGARE), "nagare up never answered a ping");
    process
}

#[test]
fn linux_pings_nagare_and_uses_its_udp_echo() {
    if let Some(reason) = interop_unavailable(&["ping", "nc", "python3"]) {
        return skip("linux_pings_nagare_and_uses_its_udp_echo", &reason);
    }
    let ns = Netns::new("up");
    ns.tap("tap0", &format!("{KERNEL}/24"));
    let dir = std::env::temp_dir().join(format!("nagare-interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("up.pcap");
    let mut up = start_up(&ns, &pcap);

    // 100 pings, 10 ms apart: every one answered.
    let out = ns.command("ping").args(["-c", "100", "-i", "0.01", "-W", "2", NAGARE]).output().unwrap();
    assert_eq!(ping_received(&out), Some(100), "{}", String::from_utf8_lossy(&out.stdout));

    // 5000-byte pings: fragmented on the way in and on the way back.
    let out = ns.command("ping").args(["-c", "5", "-i", "0.05", "-s", "5000", "-W", "2", NAGARE]).output().unwrap();
    assert_eq!(ping_received(&out), Some(5), "{}", String::from_utf8_lossy(&out.stdout));

    // nc sends one datagram to the echo service and prints the answer.
    let mut nc = ns
        .command("nc")
        .args(["-u", "-w", "1", NAGARE, "7"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = nc.stdin.take().unwrap();
        stdin.write_all(b"hello from the kernel\n").unwrap();
    }
    let out = nc.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from the kernel\n");

    // Datagrams of many sizes, fragmented ones among them, come back
    // byte-exact (a kernel socket checks the payload).
    let script = format!(
        r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for size in [1, 100, 1472, 1473, 4000, 9000, 30000, 65507]:
    data = bytes((i * 7 + size) % 256 for i in range(size))
    s.sendto(data, ("{NAGARE}", 7))
    echo, peer = s.recvfrom(70000)
    assert echo == data, (size, len(echo))
print("ok")
"#
    );
    let out = ns.command("python3").args(["-c", &script]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{}", String::from_utf8_lossy(&out.stderr));

    // A closed port answers with ICMP port unreachable: the kernel socket
    // sees ECONNREFUSED.
    let script = format!(
        r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("{NAGARE}", 9999))
s.settimeout(2)
s.send(b"x")
try:
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print("refused")
"#
    );
    let out = ns.command("python3").args(["-c", &script]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "refused");

    let output = up.terminate(Duration::from_secs(5)).expect("nagare up stops on SIGTERM");
    assert!(output.status.success(), "nagare up exited with {}", output.status);
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("icmp_echo_replies_sent"), "{summary}");

    check_capture(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
}

fn check_capture(pcap: &std::path::Path) {
    let bytes = std::fs::read(pcap).unwrap();
    assert!(bytes.len() > 24 + 100 * 98, "capture too small: {} bytes", bytes.len());
    if !has_tool("tshark") {
        return skip("tshark check of the capture", "tshark is not installed");
    }
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(pcap)
        .args(["-Y", "_ws.malformed || _ws.expert.severity >= error"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "", "tshark found malformed packets");
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(pcap)
        .args(["-Y", "icmp.type == 0"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let replies = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(replies >= 100, "tshark decoded only {replies} echo replies");
}

#[test]
fn nagare_pings_linux() {
    if let Some(reason) = interop_unavailable(&[]) {
        return skip("nagare_pings_linux", &reason);
    }
    let ns = Netns::new("ping");
    ns.tap("tap1", "10.78.0.1/24");
    let ping = |extra: &[&str]| {
        ns.command(nagare())
            .args(["ping", "--tap", "tap1", "--addr", "10.78.0.2/24", "-c", "5", "-i", "0.05"])
            .args(extra)
            .arg("10.78.0.1")
            .output()
            .unwrap()
    };
    for extra in [&[][..], &["-s", "5000"][..]] {
        let out = ping(extra);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "nagare ping {extra:?} failed:\n{text}");
        assert!(text.contains("5 packets transmitted, 5 received, 0% packet loss"), "{text}");
        assert!(text.contains("rtt min/avg/max/mdev"), "{text}");
    }
    // Nobody at .9: no reply, exit code 1 as ping's.
    let out = ns
        .command(nagare())
        .args(["ping", "--tap", "tap1", "--addr", "10.78.0.2/24", "-c", "2", "-i", "0.1", "-W", "1", "10.78.0.9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn up_creates_its_tap_and_removes_it_on_sigterm() {
    if let Some(reason) = interop_unavailable(&["ping"]) {
        return skip("up_creates_its_tap_and_removes_it_on_sigterm", &reason);
    }
    let ns = Netns::new("create");
    let exists = || {
        ns.command("ip")
            .args(["link", "show", "tapc"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(!exists());
    let mut up = Process::spawn(
        ns.command(nagare())
            .args(["up", "--tap", "tapc", "--addr", "10.79.0.2/24"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    assert!(wait_until(Duration::from_secs(10), exists), "nagare up did not create tapc");
    ns.ip(&["addr", "add", "10.79.0.1/24", "dev", "tapc"]);
    ns.ip(&["link", "set", "tapc", "up"]);
    let out = ns.command("ping").args(["-c", "3", "-i", "0.05", "-W", "2", "10.79.0.2"]).output().unwrap();
    assert_eq!(ping_received(&out), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    let output = up.terminate(Duration::from_secs(5)).expect("nagare up stops on SIGTERM");
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("created TAP device tapc"));
    assert!(wait_until(Duration::from_secs(3), || !exists()), "tapc outlived nagare up");
}

/// netd sets how many frames each queue of its TAP holds for it: 4096 by
/// default (the kernel's own is 1000), the number given with
/// `--tap-queue-len`, in every placement. A driver placement on a machine
/// of two CPUs or fewer is warned about: inline is faster there.
#[test]
fn netd_sizes_its_tap_queues() {
    if let Some(reason) = interop_unavailable(&["ping"]) {
        return skip("netd_sizes_its_tap_queues", &reason);
    }
    for (placement, given, expected) in [("inline", None, "4096"), ("split", Some("3000"), "3000")] {
        let ns = Netns::new(&format!("qlen-{placement}"));
        let (_paths, socket, _) = TempPaths::netd(&format!("qlen-{placement}"));
        let mut args = vec!["netd", "--tap", "tapq", "--addr", "10.79.1.2/24", "--placement", placement];
        args.extend(["--socket", socket.to_str().unwrap()]);
        if let Some(frames) = given {
            args.extend(["--tap-queue-len", frames]);
        }
        let mut netd = Process::spawn(ns.command(nagare()).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()));
        let length = || {
            let out = ns.command("cat").arg("/sys/class/net/tapq/tx_queue_len").output().ok();
            out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
        };
        let sized = wait_until(Duration::from_secs(10), || socket.exists() && length() == expected);
        let seen = length();
        let output = netd.terminate(Duration::from_secs(5));
        let stderr = output.as_ref().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
        assert!(sized, "{placement}: tapq holds {seen} frames a queue, not {expected}: {stderr}");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let warned = stderr.contains("inline placement is faster here");
        assert_eq!(warned, placement == "split" && cpus <= 2, "{placement} on {cpus} CPUs: {stderr}");
    }
}

/// PacketFlow's queue hold, on a multi-queue TAP netd reads itself: a
/// burst of 3000 datagrams from Linux to a receiver through netd whose
/// socket holds 81 (`SO_RCVBUF` 16384, which reads back doubled, as on
/// Linux) and which reads slower than they come. Each time its socket
/// overflows, its TAP queue is held until it has read half: the rest of
/// the burst waits in the kernel's ring instead of being read only to be
/// dropped at the socket, and most of it arrives (about 2600; a quarter
/// of that without the hold), with the filter and with the scheduler
/// alone.
#[test]
fn a_burst_for_a_full_socket_waits_in_its_tap_queue() {
    if let Some(reason) = interop_unavailable(&["ping", "python3"]) {
        return skip("a_burst_for_a_full_socket_waits_in_its_tap_queue", &reason);
    }
    // The filter sees the full socket itself; with the scheduler alone,
    // the engine's drops say so.
    for set in ["filter", "scheduler"] {
        burst_waits_in_its_tap_queue(set);
    }
}

/// [`a_burst_for_a_full_socket_waits_in_its_tap_queue`] with netd's
/// PacketFlow modules `set`.
fn burst_waits_in_its_tap_queue(set: &str) {
    const BURST: usize = 3000;
    let ns = Netns::new(&format!("hold-{set}"));
    let (_paths, socket, _) = TempPaths::netd(&format!("hold-{set}"));
    let mut netd = Process::spawn(
        ns.command(nagare())
            .args(["netd", "--tap", "tap0", "--addr", &format!("{NAGARE}/24"), "--packetflow", set, "--socket"])
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    assert!(wait_until(Duration::from_secs(10), || socket.exists()), "netd never made its socket");
    ns.ip(&["addr", "add", &format!("{KERNEL}/24"), "dev", "tap0"]);
    ns.ip(&["link", "set", "tap0", "up"]);
    assert!(answers_ping(&ns, NAGARE), "netd never answered a ping");
    let stat = || {
        let out = ns.command(nagare()).args(["stat", "--via"]).arg(&socket).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Reads 64, then sleeps a millisecond: about 50 000 a second.
    let receiver = "import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)\n\
         s.bind(('0.0.0.0', 9310))\n\
         print(s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), flush=True)\n\
         s.settimeout(20); s.recv(2048); got = 1\n\
         s.settimeout(1)\n\
         try:\n\
         \x20   while True:\n\
         \x20       s.recv(2048); got += 1\n\
         \x20       if got % 64 == 0: time.sleep(0.001)\n\
         except socket.timeout: pass\n\
         print(got)\n";
    let mut reader = Process::spawn(
        ns.command(nagare())
            .args(["run", "--via"])
            .arg(&socket)
            .args(["--", "python3", "-c", receiver])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    assert!(
        wait_until(Duration::from_secs(10), || stat().contains("udp local 0.0.0.0:9310 ")),
        "the receiver never bound: {}",
        stat()
    );
    let sender = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         for i in range({BURST}): s.sendto(b'x' * 200, ({NAGARE:?}, 9310))\n"
    );
    run_ok(ns.command("python3").args(["-c", &sender]));
    let out = reader.wait(Duration::from_secs(30)).expect("the receiver ends a second after the burst");
    let report = stat();
    let _ = netd.terminate(Duration::from_secs(5));
    let said = String::from_utf8_lossy(&out.stdout);
    let mut lines = said.lines();
    // netd's queue size, doubled as Linux reports it.
    assert_eq!(lines.next(), Some("32768"), "SO_RCVBUF: {said}");
    let got: usize = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    let holds = report.lines().find_map(|l| l.strip_prefix("netd queue_holds ")).unwrap_or("0");
    assert!(holds != "0", "{set}: no hold: {report}");
    assert!(
        got >= BURST * 3 / 4,
        "{set}: {got} of {BURST} arrived; {}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
}
