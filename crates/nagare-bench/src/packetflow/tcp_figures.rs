//! The TCP figures: the time three receivers at nice 0, 5 and 10 take for
//! N full segments each (the paper's 100,000 by default), at once (Figure 4); the time one receiver at
//! nice 0 takes while three UDP receivers at nice 10 are flooded, beside
//! its time alone (Figure 5).

use super::bed::{Bed, Cpus, Stack};
use super::output::Figure;
use super::rounds::{self, Outcome, SEGMENT};
use super::table::{datagrams_per_s, field, ratio, Table};
use super::udp_figures::RECEIVERS;
use std::time::Duration;

/// The seconds the receiver took for all of `segments`; none if it did
/// not get them all.
fn seconds(outcome: &Outcome, segments: u64) -> Option<f64> {
    outcome.as_ref().ok().filter(|r| r.received_bytes >= segments * SEGMENT).map(|r| r.received_secs)
}

/// A cell for a TCP time: seconds, or why there is none.
fn time_cell(outcome: &Outcome, segments: u64) -> String {
    match (outcome, seconds(outcome, segments)) {
        (_, Some(s)) => format!("{s:.2} s"),
        (Ok(r), None) => format!("{} of {segments} segments", r.received_bytes / SEGMENT),
        (Err(_), None) => "failed".into(),
    }
}

/// Figure 4 on each of `stacks`, each transfer bounded by `limit`.
pub fn three_streams(bed: &Bed, stacks: &[Stack], segments: u64, limit: Duration) -> Figure {
    let labels: Vec<String> = stacks.iter().map(Stack::label).collect();
    let mut header = vec!["receiver"];
    header.extend(labels.iter().map(String::as_str));
    let mut fig = Figure::new(
        "fig4",
        "Figure 4: TCP, three receivers at nice 0, 5 and 10 at once".into(),
        Table::new(&header),
        &["column", "nice", "seconds"],
    );
    fig.lines.push(format!(
        "Three kernel senders, one per receiver, each {segments} segments of {SEGMENT} bytes ({} bytes); \
         each cell: the receiver's time from its first byte to its last (each transfer bounded by {} s).",
        segments * SEGMENT,
        limit.as_secs()
    ));
    if let Cpus::Split { sender, .. } = bed.cpus() {
        fig.lines.push(format!(
            "The three senders share CPU {sender}, a third of it each, and that is what each transfer waits for: \
             the receivers' priorities show only where the receiving side is what the senders wait for \
             (`--figures 4` without `--sender-cpu`)."
        ));
    }
    let mut columns: Vec<Option<Vec<Outcome>>> = Vec::new();
    for (stack, label) in stacks.iter().zip(&labels) {
        eprintln!("  fig4: {label}");
        let ports: Vec<u16> = RECEIVERS.iter().map(|r| r.0).collect();
        let outcomes = match bed.column(stack, &RECEIVERS) {
            Ok(column) => rounds::tcp(&column, &ports, segments, limit),
            Err(down) => {
                fig.notes.push(format!("{label}: {down}"));
                columns.push(None);
                continue;
            }
        };
        for (o, &(_, nice)) in outcomes.iter().zip(&RECEIVERS) {
            if let Err(e) = o {
                fig.notes.push(format!("{label}, nice {nice}: {e}"));
            }
            fig.csv_rows.push(vec![label.clone(), nice.to_string(), field(seconds(o, segments))]);
        }
        columns.push(Some(outcomes));
    }
    for (i, &(_, nice)) in RECEIVERS.iter().enumerate() {
        let mut row = vec![format!("nice {nice}")];
        row.extend(
            columns.iter().map(|c| c.as_ref().and_then(|o| o.get(i)).map_or("—".into(), |o| time_cell(o, segments))),
        );
        fig.table.row(row);
    }
    fig
}

/// The TCP receiver of Figure 5 and the UDP receivers flooded beside it.
const TCP_RECEIVER: (u16, i32) = (5310, 0);
const FLOODED: [(u16, i32); 3] = [(5311, 10), (5312, 10), (5313, 10)];

/// Figure 5 on each of `stacks`: the TCP receiver alone, then under a
/// flood of `mbit` Mbit/s to each UDP receiver.
pub fn under_flood(bed: &Bed, stacks: &[Stack], mbit: f64, segments: u64, limit: Duration) -> Figure {
    let mut fig = Figure::new(
        "fig5",
        "Figure 5: a TCP receiver at nice 0 while three UDP receivers at nice 10 are flooded".into(),
        Table::new(&["column", "quiet", "UDP flood", "flood / quiet"]),
        &["column", "quiet_seconds", "flooded_seconds", "ratio"],
    );
    fig.lines.push(format!(
        "{segments} segments of {SEGMENT} bytes to the receiver at nice 0, alone (quiet) and while three senders \
         send {mbit:.1} Mbit/s each ({:.0} datagrams/s of {} bytes) to the receivers at nice 10; the TCP \
         receiver's time from its first byte to its last (bounded by {} s).",
        datagrams_per_s(mbit, rounds::DATAGRAM_LEN),
        rounds::DATAGRAM_LEN,
        limit.as_secs()
    ));
    let mut receivers = vec![TCP_RECEIVER];
    receivers.extend(FLOODED);
    let flooded_ports: Vec<u16> = FLOODED.iter().map(|r| r.0).collect();
    for stack in stacks {
        let label = stack.label();
        eprintln!("  fig5: {label}");
        let column = match bed.column(stack, &receivers) {
            Ok(c) => c,
            Err(down) => {
                fig.notes.push(format!("{label}: {down}"));
                fig.table.row(vec![label, "—".into(), "—".into(), "—".into()]);
                continue;
            }
        };
        let quiet =
            rounds::tcp(&column, &[TCP_RECEIVER.0], segments, limit).pop().unwrap_or_else(|| Err("no sender".into()));
        let flooded = rounds::tcp_under_flood(&column, TCP_RECEIVER.0, &flooded_ports, mbit, segments, limit);
        for (what, o) in [("quiet", &quiet), ("flooded", &flooded)] {
            if let Err(e) = o {
                fig.notes.push(format!("{label}, {what}: {e}"));
            }
        }
        let (q, f) = (seconds(&quiet, segments), seconds(&flooded, segments));
        let r = f.zip(q).and_then(|(f, q)| ratio(f, q));
        fig.table.row(vec![
            label.clone(),
            time_cell(&quiet, segments),
            time_cell(&flooded, segments),
            r.map_or("—".into(), |r| format!("{r:.2}×")),
        ]);
        fig.csv_rows.push(vec![label, field(q), field(f), field(r)]);
    }
    fig
}
