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
    let out = nagare().args(["up", "--tap", "t0", "--addr", "10.0.0.1/24", "--impair", "loss=3"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--impair"));
    for (option, value) in [
        ("--packetflow", "filter,"),
        ("--packetflow", "none,mm"),
        ("--packetflow", "fast"),
        ("--mm-default", "lots"),
        ("--boost", "many"),
        ("--memory-cap", "1000"),
        ("--socket-mode", "888"),
        ("--socket-mode", "1777"),
        ("--socket-group", "no-such-group-of-nagare"),
        ("--unprivileged-port-start", "65536"),
        ("--realtime", "0"),
        ("--realtime", "100"),
    ] {
        let err = refused(&["netd", "--vni", "nagare-cli-test-none", "--addr", "10.0.0.1/24", option, value]);
        assert!(err.contains(option), "{option} {value}: {err}");
    }
}

/// Runs nagare with `args`, which must fail, and returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = nagare().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn ipv6_addresses_are_taken_where_they_are_served() {
    // IPv6 addresses alone are taken: what stops these is the missing
    // segment, past the arguments.
    for command in ["up", "netd"] {
        let err = refused(&[command, "--vni", "nagare-cli-test-none", "--addr", "fd00::2/64", "--addr", "fd01::2/64"]);
        assert!(err.contains("VNI") && err.contains("nagare-cli-test-none"), "{command}: {err}");
        assert!(!err.contains("--addr"), "{command}: {err}");
    }
    // No address at all is refused, as an IPv4 gateway without an IPv4
    // address.
    let err = refused(&["up", "--vni", "nagare-cli-test-none"]);
    assert!(err.contains("--addr"), "{err}");
    let err = refused(&["ping", "-c", "1", "--tap", "nagare-none0", "--gateway", "fd00::1", "fd00::1"]);
    assert!(err.contains("--addr"), "{err}");
    let err = refused(&["up", "--vni", "nagare-cli-test-none", "--addr", "fd00::2/64", "--gateway", "10.0.0.1"]);
    assert!(err.contains("--gateway 10.0.0.1 needs an IPv4 --addr"), "{err}");
    let err = refused(&["ping", "-c", "1", "--tap", "nagare-none0", "--addr", "fd00::2/64", "10.0.0.1"]);
    assert!(err.contains("pinging 10.0.0.1 needs an IPv4 --addr"), "{err}");
    let err =
        refused(&["fetch", "--tap", "nagare-none0", "--addr", "fd00::2/64", "http://10.0.0.1/", "-o", "/dev/null"]);
    assert!(err.contains("fetching from 10.0.0.1 needs an IPv4 --addr"), "{err}");
    let err = refused(&["up", "--tap", "nagare-none0", "--addr", "10.0.0.1/24", "--addr", "10.0.0.2/24"]);
    assert!(err.contains("one IPv4 --addr at most"), "{err}");
    let err = refused(&["up", "--tap", "nagare-none0", "--addr", "10.0.0.1/24", "--addr", "fd00::2/129"]);
    assert!(err.contains("--addr") && err.contains("fd00::2/129"), "{err}");
    // An IPv6 destination: a zone is dropped; it needs a link with IPv6.
    let err = refused(&["ping", "-c", "1", "fe80::1%tap0"]);
    assert!(err.contains("a simulated peer is IPv4 only: ping fe80::1 over"), "{err}");
    let err = refused(&["ping", "-c", "1", "--tap", "nagare-none0", "--addr", "10.0.0.1/24", "fd00::1"]);
    assert!(err.contains("needs an IPv6 --addr"), "{err}");
    let err = refused(&["ping", "-s", "65500", "fd00::1"]);
    assert!(err.contains("at most 65487 bytes fit in one IPv6 datagram"), "{err}");
}

#[test]
fn an_ipv6_gateway_is_taken_beside_the_ipv4_one_where_ipv6_is_served() {
    let up = ["up", "--tap", "nagare-none0", "--addr", "10.0.0.1/24", "--gateway"];
    let err = refused(&[&up[..], &["fd00::1", "--gateway", "fd00::2"]].concat());
    assert!(err.contains("one IPv6 --gateway at most"), "{err}");
    let err = refused(&[&up[..], &["10.0.0.9", "--gateway", "10.0.0.8"]].concat());
    assert!(err.contains("one IPv4 --gateway at most"), "{err}");
    let err = refused(&[&up[..], &["fd00::1::2"]].concat());
    assert!(err.contains("--gateway"), "{err}");
}

#[test]
fn commands_through_a_missing_netd_say_how_to_start_one() {
    let dir = std::env::temp_dir().join(format!("nagare-cli-no-netd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("netd.sock");
    let socket_arg = socket.to_str().unwrap();
    let body = dir.join("body");
    let commands: [&[&str]; 3] = [
        &["stat", "--via", socket_arg],
        &["ping", "--via", socket_arg, "-c", "1", "10.0.0.1"],
        &["fetch", "--via", socket_arg, "http://10.0.0.1/", "-o", body.to_str().unwrap()],
    ];
    for args in commands {
        let out = nagare().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded without a netd");
        for needle in [
            format!("no nagare netd answers at {}", socket.display()),
            format!("`nagare netd --tap TAP --addr ADDRESS/PREFIX --socket {}`", socket.display()),
            String::from("NAGARE_NETD"),
        ] {
            assert!(stderr.contains(&needle), "{args:?}: {needle:?} missing from: {stderr}");
        }
        assert_eq!(
            stderr.matches(socket_arg).count(),
            2,
            "{args:?}: the path said once, and once in the hint: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nagare perf server` on the kernel's stack, ended by pid with SIGTERM.
struct PerfServer {
    child: Option<std::process::Child>,
    lines: std::sync::mpsc::Receiver<String>,
    port: u16,
}

impl PerfServer {
    fn start() -> PerfServer {
        use std::io::BufRead;
        // A port free for TCP and UDP right now.
        let port = loop {
            let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = tcp.local_addr().unwrap().port();
            if std::net::UdpSocket::bind(("0.0.0.0", port)).is_ok() {
                break port;
            }
        };
        let mut child = nagare()
            .args(["perf", "server", "--port", &port.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let server = PerfServer { child: Some(child), lines, port };
        let first = server.lines.recv_timeout(std::time::Duration::from_secs(10)).expect("perf server starts");
        assert!(first.contains("listening on TCP and UDP port"), "{first}");
        server
    }

    fn client(&self, args: &[&str]) -> String {
        self.client_of("127.0.0.1", args)
    }

    /// A test with the server at `addr`.
    fn client_of(&self, addr: &str, args: &[&str]) -> String {
        let port = self.port.to_string();
        let out = nagare()
            .args(["perf", "client", addr, "--port", &port, "--timeout", "60", "-q"])
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "perf client {args:?} failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
        text
    }

    /// SIGTERM by pid; returns the server's log.
    fn stop(mut self) -> Vec<String> {
        let mut child = self.child.take().unwrap();
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let status = child.wait().unwrap();
        assert!(status.success(), "perf server exit: {status}");
        // Every line up to the pipe's end: the reader thread may not have
        // passed on the last ones yet when the server has exited.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            lines.push(line);
        }
        lines
    }
}

impl Drop for PerfServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The number before `suffix` on the line that starts (after spaces) with `label`.
fn figure(text: &str, label: &str, suffix: &str) -> u64 {
    let line =
        text.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} line:\n{text}"));
    let before = &line[..line.find(suffix).unwrap_or_else(|| panic!("no {suffix:?} in {line:?}"))];
    before.split_whitespace().last().unwrap().parse().unwrap()
}

#[test]
fn perf_client_and_server_on_the_kernel() {
    let server = PerfServer::start();

    let text = server.client(&["--bytes", "20M"]);
    assert!(text.contains("tcp stream"), "{text}");
    assert_eq!(figure(&text, "sender", " bytes in"), 20 << 20, "{text}");
    assert_eq!(figure(&text, "receiver", " bytes in"), 20 << 20, "{text}");
    assert!(text.contains("Gbit/s"), "{text}");

    let text = server.client(&["--mode", "reverse", "--bytes", "20M", "--len", "1000"]);
    assert!(text.contains("tcp reverse"), "{text}");
    assert_eq!(figure(&text, "receiver", " bytes in"), 20 << 20, "{text}");

    let text = server.client(&["--mode", "rr", "--bytes", "1000", "--len", "100"]);
    assert_eq!(figure(&text, "rr", " transactions in"), 10, "{text}");
    assert!(text.contains("latency   count 10 mean"), "{text}");
    assert!(text.contains("p99") && text.contains("transactions/s"), "{text}");

    let text = server.client(&["--udp", "--bytes", "1M", "--len", "1000", "--udp-rate", "100"]);
    assert_eq!(figure(&text, "sender", " datagrams"), 1049, "{text}");
    let received = figure(&text, "receiver", " datagrams");
    assert!(received > 0 && received <= 1049, "{text}");
    assert_eq!(figure(&text, "lost", " of 1049"), 1049 - received, "{text}");

    let json = server.client(&["--udp", "--mode", "reverse", "--bytes", "100K", "--udp-rate", "50", "--json"]);
    let json = json.trim();
    assert!(json.starts_with('{') && json.ends_with('}'), "{json}");
    assert!(json.contains("\"protocol\":\"udp\",\"mode\":\"reverse\",\"len\":1472"), "{json}");
    // 100 KiB in 1472-byte datagrams, rounded up.
    assert!(json.contains("\"sender\":{\"bytes\":103040,\"packets\":70,"), "{json}");
    assert!(json.contains("\"lost\":") && json.contains("\"out_of_order\":"), "{json}");

    // A peer that is not a perf client gets an Error frame and the server
    // carries on.
    {
        use std::io::{Read, Write};
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        raw.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        raw.write_all(b"NP\x09\x01\x00\x00\x00\x20").unwrap();
        let mut reply = Vec::new();
        let _ = raw.read_to_end(&mut reply);
        assert_eq!(&reply[..4], b"NP\x01\x03", "{reply:?}");
        assert!(String::from_utf8_lossy(&reply).contains("version 9"), "{reply:?}");
    }
    let text = server.client(&["--bytes", "1M"]);
    assert_eq!(figure(&text, "receiver", " bytes in"), 1 << 20, "{text}");

    let json = server.client(&["--udp", "--mode", "rr", "--bytes", "6400", "--len", "64", "--json"]);
    assert!(json.contains("\"protocol\":\"udp\",\"mode\":\"rr\",\"len\":64"), "{json}");
    assert!(json.contains("\"lost\":0,") && json.contains("\"transactions\":100,"), "{json}");
    assert!(json.contains("\"transactions_per_s\":") && json.contains("\"p99\":"), "{json}");

    // The same server over IPv6, where loopback has it.
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    if ipv6 {
        let json = server.client_of("::1", &["--bytes", "1M", "--json"]);
        assert!(json.contains(&format!("\"server\":\"[::1]:{}\",\"client\":\"[::1]:", server.port)), "{json}");
        assert!(json.contains("\"receiver\":{\"bytes\":1048576,"), "{json}");
    } else {
        eprintln!("\n*** SKIPPED the IPv6 part of perf_client_and_server_on_the_kernel: no ::1 ***\n");
    }

    let log = server.stop().join("\n");
    assert!(log.contains("test 1 from 127.0.0.1"), "{log}");
    assert!(log.contains("test 6 from") && log.contains("failed: bad message from the peer"), "{log}");
    assert!(log.contains("test 7 from"), "{log}");
    assert!(log.contains("test 8 from") && log.contains("udp rr len 64: 100 transactions"), "{log}");
    assert!(!ipv6 || log.contains("test 9 from [::1]:"), "{log}");
    assert!(log.contains("nagare perf server: stopping"), "{log}");
}

#[test]
fn perf_client_rejects_bad_arguments() {
    for (args, expect) in [
        (&["--udp", "--mode", "rr", "--len", "0"][..], "UDP request length 0"),
        (&["--udp", "--mode", "rr", "--udp-rate", "10"][..], "--udp-rate is for --udp stream and reverse"),
        (&["--len", "0"][..], "TCP length 0"),
        (&["--udp", "--len", "8"][..], "UDP length 8"),
        (&["--time", "0"][..], "--time"),
        (&["--udp-rate", "10"][..], "--udp-rate is for --udp"),
        (&["--addr", "10.0.0.2/24"][..], "need --tap"),
    ] {
        let out = nagare().args(["perf", "client", "127.0.0.1"]).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

#[test]
fn perf_client_takes_ipv6_servers_where_it_can_reach_them() {
    let err = refused(&["perf", "client", "::1", "--via", "/nonexistent/netd.sock"]);
    assert!(err.contains("through netd (--via) reaches IPv4 servers only"), "{err}");
    let err = refused(&["perf", "client", "fd00::1", "--tap", "nagare-none0", "--addr", "10.0.0.2/24"]);
    assert!(err.contains("needs an IPv6 --addr: without one the host does not speak IPv6"), "{err}");
    let err = refused(&["perf", "client", "10.0.0.1", "--tap", "nagare-none0", "--addr", "fd00::2/64"]);
    assert!(err.contains("needs an IPv4 --addr: without one the host does not speak IPv4"), "{err}");
}
