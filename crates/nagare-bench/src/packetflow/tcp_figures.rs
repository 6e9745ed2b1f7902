//! The TCP figures: the time three receivers at nice 0, 5 and 10 take for
//! 100,000 segments each, at once (Figure 4); the time one receiver at
//! nice 0 takes while three UDP receivers at nice 10 are flooded, beside
//! its time alone (Figure 5).

use super::bed::{Bed, Stack};
use super::output::Figure;
use super::rounds::{self, Outcome, TCP_BYTES, TCP_SEGMENTS};
use super::table::{datagrams_per_s, field, ratio, Table};
use super::udp_figures::RECEIVERS;
use std::time::Duration;

/// The seconds the receiver took for all of [`TCP_BYTES`]; none if it
/// did not get them all.
fn seconds(outcome: &Outcome) -> Option<f64> {
    outcome.as_ref().ok().filter(|r| r.received_bytes >= TCP_BYTES).map(|r| r.received_secs)
}

/// A cell for a TCP time: seconds, or why there is none.
fn time_cell(outcome: &Outcome) -> String {
    match (outcome, seconds(outcome)) {
        (_, Some(s)) => format!("{s:.2} s"),
        (Ok(r), None) => format!("{} of {TCP_SEGMENTS} segments", r.received_bytes / 1448),
        (Err(_), None) => "failed".into(),
    }
}

/// Figure 4 on each of `stacks`, each transfer bounded by `limit`.
pub fn three_streams(bed: &Bed, stacks: &[Stack], limit: Duration) -> Figure {
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
        "Three kernel senders, one per receiver, each {TCP_SEGMENTS} segments of 1448 bytes ({TCP_BYTES} bytes); \
         each cell: the receiver's time from its first byte to its last (each transfer bounded by {} s).",
        limit.as_secs()
    ));
    let mut columns: Vec<Option<Vec<Outcome>>> = Vec::new();
    for (stack, label) in stacks.iter().zip(&labels) {
        eprintln!("  fig4: {label}");
        let ports: Vec<u16> = RECEIVERS.iter().map(|r| r.0).collect();
        let outcomes = match bed.column(stack, &RECEIVERS) {
            Ok(column) => rounds::tcp(&column, &ports, limit),
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
            fig.csv_rows.push(vec![label.clone(), nice.to_string(), field(seconds(o))]);
        }
        columns.push(Some(outcomes));
    }
    for (i, &(_, nice)) in RECEIVERS.iter().enumerate() {
        let mut row = vec![format!("nice {nice}")];
        row.extend(columns.iter().map(|c| c.as_ref().and_then(|o| o.get(i)).map_or("—".into(), time_cell)));
        fig.table.row(row);
    }
    fig
}

/// The TCP receiver of Figure 5 and the UDP receivers flooded beside it.
const TCP_RECEIVER: (u16, i32) = (5310, 0);
const FLOODED: [(u16, i32); 3] = [(5311, 10), (5312, 10), (5313, 10)];

/// Figure 5 on each of `stacks`: the TCP receiver alone, then under a
/// flood of `mbit` Mbit/s to each UDP receiver.
pub fn under_flood(bed: &Bed, stacks: &[Stack], mbit: f64, limit: Duration) -> Figure {
    let mut fig = Figure::new(
        "fig5",
        "Figure 5: a TCP receiver at nice 0 while three UDP receivers at nice 10 are flooded".into(),
        Table::new(&["column", "quiet", "UDP flood", "flood / quiet"]),
        &["column", "quiet_seconds", "flooded_seconds", "ratio"],
    );
    fig.lines.push(format!(
        "{TCP_SEGMENTS} segments of 1448 bytes to the receiver at nice 0, alone (quiet) and while three senders \
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
        let quiet = rounds::tcp(&column, &[TCP_RECEIVER.0], limit).pop().unwrap_or_else(|| Err("no sender".into()));
        let flooded = rounds::tcp_under_flood(&column, TCP_RECEIVER.0, &flooded_ports, mbit, limit);
        for (what, o) in [("quiet", &quiet), ("flooded", &flooded)] {
            if let Err(e) = o {
                fig.notes.push(format!("{label}, {what}: {e}"));
            }
        }
        let r = seconds(&flooded).zip(seconds(&quiet)).and_then(|(f, q)| ratio(f, q));
        fig.table.row(vec![
            label.clone(),
            time_cell(&quiet),
            time_cell(&flooded),
            r.map_or("—".into(), |r| format!("{r:.2}×")),
        ]);
        fig.csv_rows.push(vec![label, field(seconds(&quiet)), field(seconds(&flooded)), field(r)]);
    }
    fig
}
