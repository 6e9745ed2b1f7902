//! nagare's IPv6 against the Linux kernel's over a TAP device, inside a
//! network namespace each test creates and removes: Linux pings nagare's
//! link-local and configured addresses (5000-byte requests fragmented by
//! Linux and replies fragmented by nagare), nagare pings Linux, duplicate
//! address detection finds an address the kernel side already has, curl
//! and nc reach `nagare up`'s dual-stack services over IPv6 and IPv4, and
//! `nagare fetch` downloads from a kernel server over IPv6, each transfer
//! with the TAP's offloads and without; `nagare up` and `nagare netd` with
//! IPv6 addresses only answer ping, curl and nc over IPv6 and nothing over
//! IPv4. Needs root and `ping` (and curl, nc, python3 and sha256sum for
//! TCP); says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

/// How long addresses may take to pass duplicate address detection: about
/// two seconds for nagare (a random delay of up to one, then one second
/// for an answer), with room for a slow machine.
const DAD_LIMIT: Duration = Duration::from_secs(15);

/// `nagare up` on `tap` with `addrs` and `more` arguments.
fn up_on(ns: &Netns, tap: &str, addrs: &[&str], more: &[&std::ffi::OsStr]) -> Up {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--tap".as_ref(), tap.as_ref()];
    for addr in addrs {
        args.push("--addr".as_ref());
        args.push(addr.as_ref());
    }
    args.extend_from_slice(more);
    Up::start(ns, &args)
}

/// The address of a `nagare up: ADDR/LEN preferred` line.
fn preferred_address(line: &str) -> String {
    let cidr = line.trim_start_matches("nagare up: ").trim_end_matches(" preferred");
    cidr.split('/').next().unwrap_or_default().to_string()
}

fn ping6(ns: &Netns, args: &[&str]) -> Output {
    ns.command("ping").arg("-6").args(args).output().unwrap()
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
    let mut up = up_on(&ns, "tap0", &["10.80.0.2/24", "fd00:80::2/64"], &[]);
    let ll = up.wait_for(DAD_LIMIT, |l| l.starts_with("nagare up: fe80:") && l.ends_with(" preferred"));
    let ll = preferred_address(&ll.expect("nagare's link-local address never became preferred"));
    let configured = up.wait_for(DAD_LIMIT, |l| l == "nagare up: fd00:80::2/64 preferred");
    assert!(configured.is_some(), "fd00:80::2 never became preferred: {:?}", up.seen);

    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", &format!("{ll}%tap0")]);
    assert_eq!(ping_received(&out), Some(3), "link-local {ll}: {}", text(&out));
    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "fd00:80::2"]);
    assert_eq!(ping_received(&out), Some(3), "{}", text(&out));
    // 5000 bytes: Linux sends its requests in fragments, nagare its
    // replies; to the global address and to the link-local one.
    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "-s", "5000", "fd00:80::2"]);
    assert_eq!(ping_received(&out), Some(3), "{}", text(&out));
    assert!(text(&out).contains("5008 bytes from fd00:80::2"), "{}", text(&out));
    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "-s", "5000", &format!("{ll}%tap0")]);
    assert_eq!(ping_received(&out), Some(3), "link-local {ll}, 5000 bytes: {}", text(&out));
    assert!(text(&out).contains("5008 bytes from fe80:"), "{}", text(&out));

    let summary = up.stop();
    let counter = |name: &str| summary_counter(&summary, name);
    assert_eq!(counter("ip6_frag_reassembled"), 6, "{summary}");
    assert!(counter("ip6_frag_sent") >= 24, "4 fragments per reply: {summary}");
    assert!(counter("icmp6_echo_replies_sent") >= 12, "{summary}");
}

#[test]
fn nagare_s_link_local_address_is_the_same_after_a_restart() {
    if unavailable("nagare_s_link_local_address_is_the_same_after_a_restart") {
        return;
    }
    if std::fs::read_to_string("/etc/machine-id").map_or(true, |id| id.trim().len() != 32) {
        skip("nagare_s_link_local_address_is_the_same_after_a_restart", "no /etc/machine-id to key addresses with");
        return;
    }
    let ns = Netns::new("v6again");
    tap(&ns, "tap0", "10.79.0.1/24", "fd00:79::1/64");
    let mut link_local = Vec::new();
    for _ in 0..2 {
        let mut up = up_on(&ns, "tap0", &["10.79.0.2/24", "fd00:79::2/64"], &[]);
        let ll = up.wait_for(DAD_LIMIT, |l| l.starts_with("nagare up: fe80:") && l.ends_with(" preferred"));
        link_local.push(preferred_address(&ll.expect("nagare's link-local address never became preferred")));
        up.stop();
    }
    // A stable opaque identifier (RFC 7217) is keyed by the machine, not
    // by the run.
    assert_eq!(link_local[0], link_local[1]);
    assert_ne!(link_local[0], "fe80::6e:aff:fe4f:2", "not the MAC's EUI-64");
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
    let mut up = up_on(&ns, "tap2", &["10.82.0.2/24", "fd00:82::2/64"], &[]);
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

/// `python3 -m http.server` on the kernel's side, on port 8000 of IPv6
/// address `addr`, serving `root`; once it answers.
fn kernel_http_server6(ns: &Netns, root: &std::path::Path, addr: &str) -> Process {
    let server = Process::spawn(
        ns.command("python3")
            .args(["-m", "http.server", "8000", "--bind", addr, "--directory"])
            .arg(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let url = format!("http://[{addr}]:8000/index.html");
    let ready = wait_until(Duration::from_secs(10), || {
        ns.command("curl").args(["-6", "-g", "-s", "-o", "/dev/null", &url]).status().is_ok_and(|s| s.success())
    });
    assert!(ready, "python3 -m http.server did not start on {addr}");
    server
}

fn tcp_unavailable(test: &str) -> bool {
    let missing = interop_unavailable(&["ping", "sysctl", "curl", "nc", "python3", "sha256sum"]);
    if let Some(reason) = &missing {
        skip(test, reason);
    }
    missing.is_some()
}

#[test]
fn curl_and_nc_reach_nagare_up_over_ipv6_and_ipv4_on_one_listener() {
    if tcp_unavailable("curl_and_nc_reach_nagare_up_over_ipv6_and_ipv4_on_one_listener") {
        return;
    }
    let root = web_root("v6up", 100 << 20);
    for (k, offload) in [(0, true), (1, false)] {
        let ns = Netns::new(&format!("v6tcp{k}"));
        tap(&ns, "tap3", "10.83.0.1/24", "fd00:83::1/64");
        let mut more = vec![std::ffi::OsStr::new("--echo"), "--http".as_ref(), root.as_os_str()];
        if !offload {
            more.push("--no-offload".as_ref());
        }
        let mut up = up_on(&ns, "tap3", &["10.83.0.2/24", "fd00:83::2/64"], &more);
        let preferred = up.wait_for(DAD_LIMIT, |l| l == "nagare up: fd00:83::2/64 preferred");
        assert!(preferred.is_some(), "fd00:83::2 never became preferred: {:?}", up.seen);

        let download = root.join(format!("download{k}.bin"));
        let curl = ns
            .command("curl")
            .args(["-6", "-g", "-s", "-S", "--fail", "--max-time", "120", "-o"])
            .arg(&download)
            .arg("http://[fd00:83::2]/big.bin")
            .output()
            .unwrap();
        assert!(curl.status.success(), "curl -6 (offload {offload}): {}", text(&curl));
        assert_eq!(sha256(&download), sha256(&root.join("big.bin")), "100 MB over IPv6, offload {offload}");
        let _ = std::fs::remove_file(&download);
        // The same listener takes IPv4.
        let page = ns.command("curl").args(["-4", "-s", "--max-time", "10", "http://10.83.0.2/"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&page.stdout), "<h1>nagare</h1>\n", "{}", text(&page));

        let mut nc = ns
            .command("nc")
            .args(["-6", "-N", "-w", "5", "fd00:83::2", "7"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut input = nc.stdin.take().unwrap();
            input.write_all(b"hello over six\n").unwrap();
        }
        let echoed = nc.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&echoed.stdout), "hello over six\n");

        let summary = up.stop();
        // The segments received are curl's ACKs of 100 MB, as many as
        // the kernel's ACK coalescing makes: hundreds, not a fixed count.
        assert!(summary_counter(&summary, "tcp6_segments_received") > 100, "{summary}");
        assert!(summary_counter(&summary, "tcp6_segments_sent") > 100, "{summary}");
        assert_eq!(summary_counter(&summary, "drop_tcp_checksum"), 0, "{summary}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn nagare_fetch_downloads_from_a_kernel_server_over_ipv6() {
    if tcp_unavailable("nagare_fetch_downloads_from_a_kernel_server_over_ipv6") {
        return;
    }
    let root = web_root("v6fetch", 100 << 20);
    let ns = Netns::new("v6fetch");
    tap(&ns, "tap4", "10.84.0.1/24", "fd00:84::1/64");
    let _server = kernel_http_server6(&ns, &root, "fd00:84::1");
    for offload in [true, false] {
        let out = root.join("fetched.bin");
        let mut command = ns.command(nagare());
        command.args(["fetch", "--tap", "tap4", "--addr", "10.84.0.2/24", "--addr", "fd00:84::2/64"]);
        if !offload {
            command.arg("--no-offload");
        }
        command.args(["--timeout", "120", "http://[fd00:84::1]:8000/big.bin", "-o"]).arg(&out);
        let result = run_bounded(&mut command, Duration::from_secs(150));
        assert_eq!(result.status.and_then(|s| s.code()), Some(0), "{}{}", result.stdout, result.stderr);
        assert!(result.stdout.contains("HTTP 200, 104857600 bytes"), "{}", result.stdout);
        assert_eq!(sha256(&out), sha256(&root.join("big.bin")), "100 MB fetched over IPv6, offload {offload}");
        let _ = std::fs::remove_file(&out);
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// `nagare netd` with an IPv6 address beside its IPv4 one, inline and in
/// split placement: curl downloads from its HTTP service over IPv6,
/// `nagare fetch --via`, one of its clients, downloads from a kernel
/// server over IPv6 (`CONNECT6` and `NAME` through netd), and `nagare ping
/// --via` pings the kernel over ICMPv6 (`ECHO_SEND6`).
#[test]
fn netd_serves_and_fetches_over_ipv6() {
    if tcp_unavailable("netd_serves_and_fetches_over_ipv6") {
        return;
    }
    let root = web_root("v6netd", 20 << 20);
    for (k, placement) in ["inline", "split"].into_iter().enumerate() {
        let ns = Netns::new(&format!("v6netd{k}"));
        tap(&ns, "tap5", "10.85.0.1/24", "fd00:85::1/64");
        let socket = std::env::temp_dir().join(format!("nagare-v6netd-{}-{k}.sock", std::process::id()));
        let addrs = ["--addr", "10.85.0.2/24", "--addr", "fd00:85::2/64"];
        let netd = netd_serving_ipv6(&ns, "tap5", &addrs, placement, &root, &socket, "fd00:85::2");
        curl6_from_netd(&ns, &root, "fd00:85::2", placement, k);

        let _server = kernel_http_server6(&ns, &root, "fd00:85::1");
        let fetched = root.join(format!("fetched{k}.bin"));
        let mut fetch = ns.command(nagare());
        fetch.args(["fetch", "--via"]).arg(&socket);
        fetch.args(["--timeout", "60", "http://[fd00:85::1]:8000/big.bin", "-o"]).arg(&fetched);
        let result = run_bounded(&mut fetch, Duration::from_secs(90));
        assert_eq!(result.status.and_then(|s| s.code()), Some(0), "{}{}", result.stdout, result.stderr);
        assert_eq!(sha256(&fetched), sha256(&root.join("big.bin")), "fetched through netd ({placement})");
        let _ = std::fs::remove_file(&fetched);

        let mut ping = ns.command(nagare());
        ping.args(["ping", "--via"]).arg(&socket).args(["-c", "3", "-i", "0.1", "fd00:85::1"]);
        let out = run_bounded(&mut ping, Duration::from_secs(20));
        assert_eq!(out.status.and_then(|s| s.code()), Some(0), "nagare ping --via ({placement}): {}", out.stdout);
        assert!(out.stdout.contains("3 packets transmitted, 3 received"), "{placement}: {}", out.stdout);
        // netd, killed, leaves its socket and its watch socket beside it.
        drop(netd);
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(socket.with_extension("sock.share"));
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// What `nc -6` gets back from port 7 of `addr` for `line`.
fn nc6_echo(ns: &Netns, addr: &str, line: &str) -> String {
    let mut nc = ns
        .command("nc")
        .args(["-6", "-N", "-w", "5", addr, "7"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut input = nc.stdin.take().unwrap();
        input.write_all(line.as_bytes()).unwrap();
    }
    String::from_utf8_lossy(&nc.wait_with_output().unwrap().stdout).into_owned()
}

/// `nagare up` with an IPv6 address and no IPv4 one, on a TAP whose
/// kernel side has both: Linux's ping -6, curl -6 and nc -6 reach it; its
/// ARP requests and IPv4 pings get no answer and are counted as frames of
/// a type nagare does not speak.
#[test]
fn an_ipv6_only_nagare_up_serves_over_ipv6_and_ignores_ipv4() {
    if tcp_unavailable("an_ipv6_only_nagare_up_serves_over_ipv6_and_ignores_ipv4") {
        return;
    }
    let root = web_root("v6only", 1 << 20);
    let _root = TempPaths::dir(&root);
    let ns = Netns::new("v6only");
    tap(&ns, "tap6", "10.96.0.1/24", "fd00:96::1/64");
    let more = [std::ffi::OsStr::new("--echo"), "--http".as_ref(), root.as_os_str()];
    let mut up = up_on(&ns, "tap6", &["fd00:96::2/64"], &more);
    let started = up.wait_for(DAD_LIMIT, |l| l.contains(" on tap6 (mac "));
    let started = started.unwrap_or_else(|| panic!("nagare up did not start: {:?}", up.seen));
    assert!(started.starts_with("nagare up: tentative: fe80:"), "{started}");
    assert!(started.contains("fd00:96::2/64 on tap6 (mac 02:6e:00:00:00:02)"), "{started}");
    let preferred = up.wait_for(DAD_LIMIT, |l| l == "nagare up: fd00:96::2/64 preferred");
    assert!(preferred.is_some(), "fd00:96::2 never became preferred: {:?}", up.seen);

    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "fd00:96::2"]);
    assert_eq!(ping_received(&out), Some(3), "{}", text(&out));
    let download = root.join("download.bin");
    let curl = ns
        .command("curl")
        .args(["-6", "-g", "-s", "-S", "--fail", "--max-time", "60", "-o"])
        .arg(&download)
        .arg("http://[fd00:96::2]/big.bin")
        .output()
        .unwrap();
    assert!(curl.status.success(), "curl -6: {}", text(&curl));
    assert_eq!(sha256(&download), sha256(&root.join("big.bin")), "1 MB over IPv6");
    assert_eq!(nc6_echo(&ns, "fd00:96::2", "only six\n"), "only six\n");

    // IPv4 to the MAC nagare has: the kernel's ARP requests go unanswered,
    // so its pings never leave.
    let out = ns.command("ping").args(["-4", "-c", "2", "-i", "0.2", "-W", "1", "10.96.0.2"]).output().unwrap();
    assert_eq!(ping_received(&out), Some(0), "{}", text(&out));

    let summary = up.stop();
    assert!(summary_counter(&summary, "drop_eth_unknown_type") >= 1, "the ARP requests: {summary}");
    assert_eq!(summary_counter(&summary, "arp_replies_sent"), 0, "{summary}");
    assert_eq!(summary_counter(&summary, "arp_requests_sent"), 0, "{summary}");
    assert!(summary_counter(&summary, "icmp6_echo_replies_sent") >= 3, "{summary}");
}

/// `nagare netd` with an IPv6 address and no IPv4 one, inline and in
/// split placement (its driver process seeded without an IPv4 address):
/// ping -6 and curl -6 reach its HTTP service, and `nagare ping --via`
/// pings the kernel over ICMPv6.
#[test]
fn an_ipv6_only_netd_serves_and_pings_over_ipv6() {
    if tcp_unavailable("an_ipv6_only_netd_serves_and_pings_over_ipv6") {
        return;
    }
    let root = web_root("v6onlynetd", 1 << 20);
    let _root = TempPaths::dir(&root);
    for (k, placement) in ["inline", "split"].into_iter().enumerate() {
        let ns = Netns::new(&format!("v6onlynetd{k}"));
        tap(&ns, "tap7", "10.97.0.1/24", "fd00:97::1/64");
        let (_paths, socket, _) = TempPaths::netd(&format!("v6onlynetd{k}"));
        let netd =
            netd_serving_ipv6(&ns, "tap7", &["--addr", "fd00:97::2/64"], placement, &root, &socket, "fd00:97::2");
        curl6_from_netd(&ns, &root, "fd00:97::2", placement, k);

        let mut ping = ns.command(nagare());
        ping.args(["ping", "--via"]).arg(&socket).args(["-c", "3", "-i", "0.1", "fd00:97::1"]);
        let out = run_bounded(&mut ping, Duration::from_secs(20));
        assert_eq!(out.status.and_then(|s| s.code()), Some(0), "nagare ping --via ({placement}): {}", out.stdout);
        assert!(out.stdout.contains("3 packets transmitted, 3 received"), "{placement}: {}", out.stdout);
        let out = ns.command("ping").args(["-4", "-c", "1", "-W", "1", "10.97.0.2"]).output().unwrap();
        assert_eq!(ping_received(&out), Some(0), "netd ({placement}) has no IPv4 address: {}", text(&out));
        drop(netd);
    }
}

/// `nagare netd` on `tap` in `ns` with `addrs` (`--addr` arguments) in
/// `placement`, serving `root` over HTTP at `socket`, once it answers
/// `ping -6` at `addr6`.
fn netd_serving_ipv6(
    ns: &Netns,
    tap: &str,
    addrs: &[&str],
    placement: &str,
    root: &Path,
    socket: &Path,
    addr6: &str,
) -> Process {
    let netd = Process::spawn(
        ns.command(nagare())
            .args(["netd", "--tap", tap])
            .args(addrs)
            .args(["--placement", placement, "--http"])
            .arg(root)
            .arg("--socket")
            .arg(socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let answers = wait_until(DAD_LIMIT, || ping_received(&ping6(ns, &["-c", "1", "-W", "1", addr6])) == Some(1));
    assert!(answers, "netd ({placement}) never answered ping -6");
    netd
}

/// The kernel's `curl -6` downloads `root`'s `big.bin` from netd's HTTP
/// service at `addr6`, byte-exact.
fn curl6_from_netd(ns: &Netns, root: &Path, addr6: &str, placement: &str, k: usize) {
    let download = root.join(format!("curl{k}.bin"));
    let curl = ns
        .command("curl")
        .args(["-6", "-g", "-s", "-S", "--fail", "--max-time", "60", "-o"])
        .arg(&download)
        .arg(format!("http://[{addr6}]/big.bin"))
        .output()
        .unwrap();
    assert!(curl.status.success(), "curl -6 from netd ({placement}): {}", text(&curl));
    assert_eq!(sha256(&download), sha256(&root.join("big.bin")), "{placement}");
    let _ = std::fs::remove_file(&download);
}
