//! nagare's router discovery and address autoconfiguration against
//! Linux's radvd over a TAP device, inside a network namespace the test
//! creates and removes: radvd advertises fd00:77::/64 and the kernel side
//! as the default router; `nagare up`, given only a link-local IPv6
//! address, forms an address in that prefix (with a stable opaque
//! interface identifier, read from its `preferred` line), which the
//! kernel side pings, from its on-link address and from one off nagare's
//! link (the replies go through the router). Needs root, `ping` and
//! `radvd`; says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::process::{Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// nagare's MAC, and the address its modified EUI-64 would form, which
/// the stable opaque identifier is not.
const MAC: &str = "02:00:00:00:77:02";
const EUI64_FORMED: &str = "fd00:77::ff:fe00:7702";

/// How long the address may take: radvd's first advertisements come
/// within seconds of the TAP's carrier, then duplicate address detection
/// takes about two; room for a slow machine.
const FORM_LIMIT: Duration = Duration::from_secs(40);

fn unavailable(test: &str) -> bool {
    let missing = interop_unavailable(&["ping", "sysctl", "radvd"]);
    if let Some(reason) = &missing {
        skip(test, reason);
    }
    missing.is_some()
}

fn ping6(ns: &Netns, args: &[&str]) -> Output {
    ns.command("ping").arg("-6").args(args).output().unwrap()
}

/// The lines `lines` gives within `limit`, up to the first that `wanted`
/// accepts, which is returned.
fn wait_for_line(
    lines: &Receiver<String>,
    seen: &mut Vec<String>,
    limit: Duration,
    wanted: impl Fn(&str) -> bool,
) -> Option<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let line = lines.recv_timeout(left).ok()?;
        seen.push(line.clone());
        if wanted(&line) {
            return Some(line);
        }
    }
}

/// radvd's configuration file, removed on drop.
struct Config(std::path::PathBuf);

impl Drop for Config {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn nagare_forms_an_address_from_radvds_prefix_and_answers_on_it() {
    if unavailable("nagare_forms_an_address_from_radvds_prefix_and_answers_on_it") {
        return;
    }
    let ns = Netns::new("slaac");
    ns.ip(&["tuntap", "add", "dev", "tap7", "mode", "tap"]);
    for setting in ["net.ipv6.conf.tap7.accept_dad=0", "net.ipv6.conf.all.forwarding=1"] {
        run_ok(ns.command("sysctl").args(["-q", "-w", setting]));
    }
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "tap7"]);
    ns.ip(&["-6", "addr", "add", "fd00:77::1/64", "dev", "tap7", "nodad"]);
    // An address of the kernel side off nagare's link: nagare reaches it
    // only through the router.
    ns.ip(&["-6", "addr", "add", "fd00:78::1/128", "dev", "lo"]);
    ns.ip(&["link", "set", "tap7", "up"]);

    let dir = std::env::temp_dir();
    let config = Config(dir.join(format!("nagare-radvd-{}.conf", std::process::id())));
    let pidfile = dir.join(format!("nagare-radvd-{}.pid", std::process::id()));
    std::fs::write(
        &config.0,
        "interface tap7 {\n  AdvSendAdvert on;\n  MinRtrAdvInterval 3;\n  MaxRtrAdvInterval 4;\n  \
         AdvDefaultLifetime 60;\n  prefix fd00:77::/64 {\n    AdvOnLink on;\n    AdvAutonomous on;\n  };\n};\n",
    )
    .unwrap();
    let mut radvd = Process::spawn(
        ns.command("radvd")
            .args(["--nodaemon", "--logmethod", "stderr", "--config"])
            .arg(&config.0)
            .arg("--pidfile")
            .arg(&pidfile)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );

    let mut up = Process::spawn(
        ns.command(nagare())
            .args(["up", "--tap", "tap7", "--mac", MAC, "--addr", "10.77.0.2/24", "--addr", "fe80::2/64"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    // nagare up's standard output, line by line as it runs.
    let stdout = up.child.as_mut().and_then(|c| c.stdout.take()).expect("nagare up's stdout");
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
    let mut seen = Vec::new();
    let preferred = wait_for_line(&lines, &mut seen, FORM_LIMIT, |l| {
        l.starts_with("nagare up: fd00:77:") && l.ends_with("/64 preferred")
    });
    let formed_addr = preferred
        .as_deref()
        .map(|l| l.trim_start_matches("nagare up: ").trim_end_matches("/64 preferred").to_string())
        .unwrap_or_default();
    let formed = !formed_addr.is_empty()
        && wait_until(FORM_LIMIT, || {
            let ping =
                ns.command("ping").args(["-6", "-c", "1", "-W", "1", &formed_addr]).stdout(Stdio::null()).status();
            ping.is_ok_and(|s| s.success())
        });
    let still_running = radvd.child.as_mut().is_some_and(|c| c.try_wait().is_ok_and(|s| s.is_none()));
    let out = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", &formed_addr]);
    let off_link = ping6(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "-I", "fd00:78::1", &formed_addr]);
    let stderr = up.terminate(Duration::from_secs(5)).map(|o| text(&o)).unwrap_or_default();
    // The rest of its output, the summary among it, once it has ended.
    wait_for_line(&lines, &mut seen, Duration::from_secs(5), |_| false);
    let summary = format!("{}\n{stderr}", seen.join("\n"));
    let radvd_log = radvd.terminate(Duration::from_secs(5)).map(|o| text(&o)).unwrap_or_default();
    let _ = std::fs::remove_file(&pidfile);

    assert!(still_running, "radvd stopped: {radvd_log}");
    assert!(preferred.is_some(), "no address in fd00:77::/64 preferred;\nnagare up:\n{summary}\nradvd:\n{radvd_log}");
    assert_ne!(formed_addr, EUI64_FORMED, "a stable opaque identifier, not the MAC's");
    assert!(formed, "{formed_addr} never answered;\nnagare up:\n{summary}\nradvd:\n{radvd_log}");
    assert_eq!(ping_received(&out), Some(3), "{}", text(&out));
    assert_eq!(ping_received(&off_link), Some(3), "from fd00:78::1, off nagare's link: {}", text(&off_link));
    assert!(summary_counter(&summary, "ndp_ra_received") >= 1, "{summary}");
    assert_eq!(summary_counter(&summary, "slaac_addresses"), 1, "{summary}");
    assert_eq!(summary_counter(&summary, "ndp_routers_added"), 1, "{summary}");
    assert_eq!(summary_counter(&summary, "drop_ip6_no_route"), 0, "{summary}");
}
