//! `nagare up` and `nagare netd` run by a user without privileges (`nobody`, through
//! `setpriv`), inside a network namespace each test creates and removes:
//! without a TAP made for that user it says so and how to get one; with
//! one (made and set up by root) it runs. Needs root to set the scene;
//! says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

const NOBODY: &str = "65534";

/// `nagare` with `args`, in `ns`, as user and group `nobody`. Where
/// /dev/net/tun is closed to other users (as in some containers, where
/// distributions leave it open), the command gets an open node of its own
/// in a mount namespace of its own, so that what it meets is the kernel's
/// rule for TAP devices, not the node's mode.
fn as_nobody(ns: &Netns, args: &[&str]) -> Command {
    let open_to_all = std::fs::metadata("/dev/net/tun").is_ok_and(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o006 == 0o006
    });
    let open_node = if open_to_all {
        ""
    } else {
        "mount --make-rprivate / && mount -t tmpfs -o mode=755 none /mnt && mknod -m 666 /mnt/tun c 10 200 && \
         mount --bind /mnt/tun /dev/net/tun && "
    };
    let script = format!("{open_node}exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups -- \"$@\"");
    let mut command = ns.command("unshare");
    command.args(["--mount", "sh", "-c", &script, "sh", nagare()]).args(args);
    command
}

#[test]
fn up_without_a_tap_of_ones_own_says_how_to_get_one() {
    if let Some(reason) = interop_unavailable(&["setpriv", "unshare", "mknod"]) {
        return skip("up_without_a_tap_of_ones_own_says_how_to_get_one", &reason);
    }
    let ns = Netns::new("nobody");
    let out = as_nobody(&ns, &["up", "--tap", "tapn", "--addr", "10.87.0.2/24"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "nagare up ran as nobody without a TAP: {stderr}");
    for needle in
        ["opening TAP device tapn", "needs root or CAP_NET_ADMIN", "ip tuntap add dev tapn mode tap user 65534"]
    {
        assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
    }
}

#[test]
fn up_and_netd_run_unprivileged_on_a_tap_made_for_their_user() {
    if let Some(reason) = interop_unavailable(&["setpriv", "unshare", "mknod", "ping"]) {
        return skip("up_and_netd_run_unprivileged_on_a_tap_made_for_their_user", &reason);
    }
    let ns = Netns::new("nobody-tap");
    ns.ip(&["tuntap", "add", "dev", "tapu", "mode", "tap", "user", NOBODY]);
    ns.ip(&["addr", "add", "10.87.0.1/24", "dev", "tapu"]);
    ns.ip(&["link", "set", "tapu", "up"]);
    let mut up = Process::spawn(
        as_nobody(&ns, &["up", "--tap", "tapu", "--addr", "10.87.0.2/24"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let answered = answers_ping(&ns, "10.87.0.2");
    let output = up.terminate(Duration::from_secs(5));
    let stderr = output.as_ref().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
    assert!(answered, "nagare up as nobody on its own TAP never answered a ping: {stderr}");

    // netd too, with its driver process, and its socket where nobody may
    // write.
    let (_paths, socket, _) = TempPaths::netd("nobody");
    let mut netd = Process::spawn(
        as_nobody(
            &ns,
            &[
                "netd",
                "--tap",
                "tapu",
                "--addr",
                "10.87.0.2/24",
                "--placement",
                "split",
                "--socket",
                socket.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()),
    );
    let answered = answers_ping(&ns, "10.87.0.2");
    let output = netd.terminate(Duration::from_secs(5));
    let stderr = output.as_ref().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
    assert!(answered, "nagare netd as nobody on its own TAP never answered a ping: {stderr}");
    // The queue length is root's to set on a TAP made for another user.
    assert!(stderr.contains("tapu keeps its queue length"), "{stderr}");
}
