//! `nagare bench packetflow` with tiny settings (root: it makes network
//! namespaces, a TAP and a veth pair): it prints Figure 3's table with
//! figures for `none`, `filter`, netd's default and Linux, and Figure 6's
//! with `none`, `mm` and Linux, writes its CSV
//! file, reports a module set netd refuses as "not available" instead of
//! failing, and leaves no namespace behind.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

/// Runs the bench with `args`, bounded (a hung bench is killed by its
/// pid and the test fails); its pid, success, stdout and stderr.
fn bench(args: &[&str]) -> (u32, bool, String, String) {
    let run = run_bounded(Command::new(nagare()).args(["bench", "packetflow"]).args(args), Duration::from_secs(180));
    let (out, err) = (run.stdout, run.stderr);
    let status = run.status.unwrap_or_else(|| panic!("nagare bench packetflow took over 180 s:\n{out}\n{err}"));
    (run.pid, status.success(), out, err)
}

/// The bench's namespaces still there.
fn namespaces_left(pid: u32) -> Vec<String> {
    let list = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("nagare-pf-{pid}-")))
        .map(str::to_string)
        .collect()
}

/// The cells of the table row that starts with `| first |`.
fn row<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("no row {first:?}:\n{out}"));
    line.trim_matches('|').split('|').map(str::trim).skip(1).collect()
}

#[test]
fn figure_3_has_figures_for_the_sets_netd_takes() {
    if let Some(reason) = interop_unavailable(&["nice"]) {
        return skip("figure_3_has_figures_for_the_sets_netd_takes", &reason);
    }
    let dir = std::env::temp_dir().join(format!("nagare-test-packetflow-{}", std::process::id()));
    let dir_arg = dir.display().to_string();
    let (pid, ok, out, err) =
        bench(&["--figures", "3,6", "--time", "0.5", "--saturation", "30000", "--csv-dir", &dir_arg]);
    let csv = std::fs::read_to_string(dir.join("fig3.csv")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "the bench failed:\n{out}\n{err}");
    assert!(namespaces_left(pid).is_empty(), "namespaces left: {:?}", namespaces_left(pid));
    let header = row(&out, "receiver");
    assert_eq!(header, ["none", "filter", "scheduler", "filter,scheduler", "default", "Linux"], "{out}");
    for nice in ["nice 0", "nice 5", "nice 10", "all three"] {
        let cells = row(&out, nice);
        for (set, cell) in header.iter().zip(&cells) {
            // "12345 (98.7 %)": a figure, or "—" for a set netd refused,
            // which a note names.
            let figure = cell.split(" (").next().is_some_and(|n| n.parse::<f64>().is_ok()) && cell.ends_with("%)");
            let refused = *cell == "—" && out.contains(&format!("- {set}: not available: "));
            assert!(figure || refused, "{nice}, {set}: {cell:?}:\n{out}");
            if ["none", "filter", "default", "Linux"].contains(set) {
                assert!(figure, "{nice}, {set}: no figure:\n{out}");
            }
        }
    }
    assert!(csv.starts_with("column,nice,offered_per_s,received_per_s,received_percent\n"), "{csv}");
    for set in ["none", "filter", "Linux"] {
        assert_eq!(csv.lines().filter(|l| l.starts_with(&format!("{set},"))).count(), 3, "{set} in:\n{csv}");
    }
    // Figure 6: the memory manager alone beside the original and Linux.
    let six = out.split("### Figure 6").nth(1).unwrap_or_else(|| panic!("no Figure 6:\n{out}"));
    assert_eq!(row(six, "receiver"), ["none", "mm", "Linux"], "{out}");
    for nice in ["nice 0", "nice 5", "nice 10"] {
        for cell in row(six, nice) {
            assert!(cell.split(" (").next().is_some_and(|n| n.parse::<f64>().is_ok()), "{nice}: {cell:?}:\n{out}");
        }
    }
}

#[test]
fn a_set_netd_refuses_is_not_available_not_a_failure() {
    if let Some(reason) = interop_unavailable(&["nice"]) {
        return skip("a_set_netd_refuses_is_not_available_not_a_failure", &reason);
    }
    // An argument every netd refuses: each netd column is "not available"
    // with netd's own words, and the bench still ends well.
    let (pid, ok, out, err) =
        bench(&["--figures", "6", "--time", "0.5", "--saturation", "30000", "--netd-arg=--no-such-netd-option"]);
    assert!(ok, "the bench failed:\n{out}\n{err}");
    assert!(namespaces_left(pid).is_empty(), "namespaces left: {:?}", namespaces_left(pid));
    for set in ["none", "mm"] {
        let note = out
            .lines()
            .find(|l| l.starts_with(&format!("- {set}: not available: ")))
            .unwrap_or_else(|| panic!("no note for {set}:\n{out}"));
        // netd's own words, from its stderr.
        assert!(note.contains("error: unexpected argument '--no-such-netd-option'"), "{note}");
    }
    let cells = row(&out, "nice 0");
    assert_eq!(cells[..2], ["—", "—"], "{out}");
    // Linux's column is measured whatever netd refuses.
    assert!(cells.get(2).is_some_and(|c| c.ends_with("%)")), "{out}");
}

/// Why `--sender-cpu` cannot be tried here, if it cannot: no namespaces
/// or `nice`, or one CPU, none to give the senders alone.
fn no_sender_cpu() -> Option<String> {
    if let Some(reason) = interop_unavailable(&["nice"]) {
        return Some(reason);
    }
    (std::thread::available_parallelism().map_or(1, |n| n.get()) < 2)
        .then(|| String::from("one CPU: none to give the senders alone"))
}

#[test]
fn senders_may_have_a_cpu_of_their_own() {
    if let Some(reason) = no_sender_cpu() {
        return skip("senders_may_have_a_cpu_of_their_own", &reason);
    }
    let (pid, ok, out, err) = bench(&["--figures", "6", "--time", "0.5", "--saturation", "30000", "--sender-cpu", "0"]);
    assert!(ok, "the bench failed:\n{out}\n{err}");
    assert!(namespaces_left(pid).is_empty(), "namespaces left: {:?}", namespaces_left(pid));
    assert!(out.contains("(senders on CPU 0, netd, receivers and Linux's receive path on 1"), "{out}");
    let cells = row(&out, "nice 0");
    assert!(cells.iter().all(|c| c.ends_with("%)")), "{out}");
    // A CPU this machine does not have is refused before anything starts.
    let (pid, ok, out, err) = bench(&["--figures", "6", "--time", "0.5", "--sender-cpu", "4095"]);
    assert!(!ok, "{out}");
    assert!(err.contains("--sender-cpu 4095: this process may run on CPUs"), "{err}");
    assert!(namespaces_left(pid).is_empty());
}

/// Figure 4 under `--sender-cpu` measures its transfers and says that its
/// senders, three on one CPU, are what each transfer waits for.
#[test]
fn figure_four_says_when_its_senders_share_one_cpu() {
    if let Some(reason) = no_sender_cpu() {
        return skip("figure_four_says_when_its_senders_share_one_cpu", &reason);
    }
    let (pid, ok, out, err) = bench(&["--figures", "4", "--segments", "2000", "--sender-cpu", "0"]);
    assert!(ok, "the bench failed:\n{out}\n{err}");
    assert!(namespaces_left(pid).is_empty(), "namespaces left: {:?}", namespaces_left(pid));
    assert!(out.contains("The three senders share CPU 0, a third of it each"), "{out}");
    for nice in ["nice 0", "nice 5", "nice 10"] {
        assert!(row(&out, nice).iter().all(|c| c.ends_with(" s")), "{out}");
    }
}
