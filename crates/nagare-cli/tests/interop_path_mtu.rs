//! Path MTU discovery against a Linux router, inside network namespaces
//! the test creates and removes: `nagare up` on a TAP of a router
//! namespace (forwarding IPv4 and IPv6), whose far side, a veth to a third
//! namespace, carries 1280 bytes (and IPv4 1000, by its route's MTU).
//! curl in the third namespace downloads 20 MB from nagare over IPv4 and
//! over IPv6: nagare's full-sized segments draw "fragmentation needed" and
//! "packet too big" from the router, its segment size follows, and the
//! files arrive whole. Run with the TAP's offloads (the kernel cuts
//! nagare's super-segments at the size nagare gives) and without. Needs
//! root, curl, sysctl and sha256sum; says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::time::Duration;

/// How long nagare's IPv6 address may take to pass duplicate address
/// detection.
const DAD_LIMIT: Duration = Duration::from_secs(15);

fn sysctl(ns: &Netns, setting: &str) {
    run_ok(ns.command("sysctl").args(["-q", "-w", setting]));
}

/// The router namespace (TAP `tap0` toward nagare: 10.95.0.1/24 and
/// fd00:95::1/64; veth `rfar` toward the far namespace: 10.96.0.1/24 and
/// fd00:96::1/64, MTU 1280, IPv4 routed at 1000) and the far namespace
/// (10.96.0.2/24 and fd00:96::2/64 on a 1500-byte veth end, so that its
/// SYNs announce the MSS of 1500 and nagare's full segments meet the
/// router's narrower link).
fn router_and_far(k: usize) -> (Netns, Netns) {
    let router = Netns::new(&format!("pmtur{k}"));
    let far = Netns::new(&format!("pmtuf{k}"));
    sysctl(&router, "net.ipv4.ip_forward=1");
    sysctl(&router, "net.ipv6.conf.all.forwarding=1");
    sysctl(&router, "net.ipv6.conf.default.accept_dad=0");
    sysctl(&far, "net.ipv6.conf.default.accept_dad=0");

    router.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"]);
    sysctl(&router, "net.ipv6.conf.tap0.accept_dad=0");
    router.ip(&["addr", "add", "10.95.0.1/24", "dev", "tap0"]);
    router.ip(&["-6", "addr", "add", "fd00:95::1/64", "dev", "tap0", "nodad"]);
    router.ip(&["link", "set", "tap0", "up"]);

    router.ip(&["link", "add", "rfar", "type", "veth", "peer", "name", "far0", "netns", &far.name]);
    router.ip(&["link", "set", "rfar", "mtu", "1280"]);
    router.ip(&["addr", "add", "10.96.0.1/24", "dev", "rfar"]);
    router.ip(&["-6", "addr", "add", "fd00:96::1/64", "dev", "rfar", "nodad"]);
    router.ip(&["link", "set", "rfar", "up"]);
    // A forwarding router honours its route's MTU: IPv4 to the far side
    // leaves at 1000 bytes.
    router.ip(&["route", "replace", "10.96.0.0/24", "dev", "rfar", "src", "10.96.0.1", "mtu", "1000"]);

    far.ip(&["link", "set", "far0", "mtu", "1500"]);
    far.ip(&["addr", "add", "10.96.0.2/24", "dev", "far0"]);
    far.ip(&["-6", "addr", "add", "fd00:96::2/64", "dev", "far0", "nodad"]);
    far.ip(&["link", "set", "far0", "up"]);
    far.ip(&["route", "add", "default", "via", "10.96.0.1"]);
    far.ip(&["-6", "route", "add", "default", "via", "fd00:96::1"]);
    (router, far)
}

#[test]
fn curl_downloads_through_a_narrower_router_over_ipv4_and_ipv6() {
    let test = "curl_downloads_through_a_narrower_router_over_ipv4_and_ipv6";
    if let Some(reason) = interop_unavailable(&["curl", "sysctl", "sha256sum"]) {
        return skip(test, &reason);
    }
    let root = web_root("pmtu", 20 << 20);
    let expected = sha256(&root.join("big.bin"));
    for (k, offload) in [(0, true), (1, false)] {
        let (router, far) = router_and_far(k);
        let mut args: Vec<&std::ffi::OsStr> = ["--tap", "tap0", "--addr", "10.95.0.2/24", "--addr", "fd00:95::2/64"]
            .into_iter()
            .chain(["--gateway", "10.95.0.1", "--gateway", "fd00:95::1", "--http"])
            .map(std::ffi::OsStr::new)
            .collect();
        args.push(root.as_os_str());
        if !offload {
            args.push("--no-offload".as_ref());
        }
        let mut up = Up::start(&router, &args);
        let preferred = up.wait_for(DAD_LIMIT, |l| l == "nagare up: fd00:95::2/64 preferred");
        assert!(preferred.is_some(), "fd00:95::2 never became preferred: {:?}", up.seen);

        for (family, url) in [("-4", "http://10.95.0.2/big.bin"), ("-6", "http://[fd00:95::2]/big.bin")] {
            let download = root.join(format!("download{k}{family}.bin"));
            let curl = far
                .command("curl")
                .args([family, "-g", "-s", "-S", "--fail", "--max-time", "120", "-o"])
                .arg(&download)
                .arg(url)
                .output()
                .unwrap();
            assert!(curl.status.success(), "curl {family} (offload {offload}): {}", text(&curl));
            assert_eq!(sha256(&download), expected, "20 MB over {family}, offload {offload}");
            let _ = std::fs::remove_file(&download);
        }

        let summary = up.stop();
        let shown: Vec<&str> =
            summary.lines().filter(|l| l.trim_start().starts_with("pmtu") || l.contains("path_mss")).collect();
        eprintln!("offload {offload}: {}", shown.join(";"));
        // One lowering per family: IPv4 to 1000, IPv6 to 1280.
        assert!(summary_counter(&summary, "pmtu_lowered") >= 2, "offload {offload}: {summary}");
        assert!(summary_counter(&summary, "tcp_path_mss_lowered") >= 2, "offload {offload}: {summary}");
        assert_eq!(summary_counter(&summary, "drop_pmtu_unverified"), 0, "offload {offload}: {summary}");
        assert_eq!(summary_counter(&summary, "drop_tcp_checksum"), 0, "offload {offload}: {summary}");
        drop((router, far));
    }
    let _ = std::fs::remove_dir_all(&root);
}
