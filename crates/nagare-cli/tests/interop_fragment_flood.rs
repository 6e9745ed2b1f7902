//! A flood of first fragments from the Linux side, then fragmented pings
//! from the same address: `nagare up` answers them at once, as Linux does,
//! instead of refusing the source's new datagrams until the flood's partial
//! datagrams time out. Runs over a TAP in a network namespace the test
//! makes; needs root and says SKIPPED loudly otherwise.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

const KERNEL: &str = "10.86.0.1";
const NAGARE: &str = "10.86.0.2";
const FLOOD: usize = 3000;

/// Sends `FLOOD` first fragments (more-fragments set, offset 0, 8 bytes of
/// an ICMP echo header each, every one its own datagram) from `KERNEL` to
/// `NAGARE` through a raw socket with the IP header included.
fn flood_script() -> String {
    format!(
        r#"
import socket, struct
def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
src, dst = socket.inet_aton("{KERNEL}"), socket.inet_aton("{NAGARE}")
sent = 0
for i in range({FLOOD}):
    ident = 20000 + i
    payload = struct.pack("!BBHHH", 8, 0, 0, ident, 1)
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0x2000, 64, 1, 0, src, dst)
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    try:
        s.sendto(header + payload, ("{NAGARE}", 0))
        sent += 1
    except OSError:
        pass
print(sent)
"#
    )
}

#[test]
fn fragmented_pings_pass_right_after_a_fragment_flood() {
    if let Some(reason) = interop_unavailable(&["ping", "python3", "timeout"]) {
        return skip("fragmented_pings_pass_right_after_a_fragment_flood", &reason);
    }
    let ns = Netns::new("fragflood");
    ns.tap("tapff", &format!("{KERNEL}/24"));
    let mut up = Process::spawn(
        ns.command(nagare())
            .args(["up", "--tap", "tapff", "--addr", &format!("{NAGARE}/24")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    assert!(answers_ping(&ns, NAGARE), "nagare up never answered a ping");

    let out = ns.command("timeout").args(["30", "python3", "-c", &flood_script()]).output().unwrap();
    let sent: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    assert!(sent >= 1000, "the flood sent {sent} fragments: {}", String::from_utf8_lossy(&out.stderr));
    // Let nagare read what the TAP queued before the pings.
    std::thread::sleep(Duration::from_millis(300));

    // Well inside the flood's 30-second reassembly timeout.
    let out = ns.command("ping").args(["-c", "5", "-i", "0.2", "-s", "4000", "-W", "2", NAGARE]).output().unwrap();
    let received = ping_received(&out).unwrap_or(0);

    let output = up.terminate(Duration::from_secs(5)).expect("nagare up stops on SIGTERM");
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(
        received >= 4,
        "{received} of 5 fragmented pings answered after the flood:\n{}\n{summary}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The flood's partial datagrams made room for the pings' by eviction.
    assert!(summary.contains("drop_frag_evicted"), "{summary}");
}
