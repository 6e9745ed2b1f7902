//! What the TAP tests share: why they cannot run here, a loud skip, the
//! `ip` command, and a guard that removes an interface.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};

/// Why a TAP test cannot run here (not root, no /dev/net/tun, no `ip`).
pub fn skip_reason() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .unwrap_or("?");
    if euid != "0" {
        return Some(format!("not running as root (euid {euid})"));
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun does not exist".into());
    }
    let ip = Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !matches!(ip, Ok(s) if s.success()) {
        return Some("the `ip` command (iproute2) is not available".into());
    }
    None
}

/// Returns from the test, saying SKIPPED loudly, if it cannot run here.
#[macro_export]
macro_rules! require_tap {
    () => {
        if let Some(reason) = common::skip_reason() {
            // Straight to the terminal: the test harness captures eprintln!, and a
            // skip must be seen even when the test passes.
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("\n******** SKIPPED: {reason} ********\n\n"),
            );
            return;
        }
    };
}

/// Deletes the interface (and whatever sits on it, a VLAN) when dropped,
/// also when the test panics.
pub struct LinkGuard(pub String);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}

/// Runs `ip` with `args`; the test fails if it does.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}
