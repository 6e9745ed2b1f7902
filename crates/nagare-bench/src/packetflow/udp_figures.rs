//! The UDP figures: receive rates of three receivers at nice 0, 5 and 10
//! under overload (Figures 3 and 6), the ramp that finds the load netd
//! saturates at, and the load sweep ("no collapse").

use super::bed::{Bed, Down, Stack};
use super::output::Figure;
use super::rounds::{self, Outcome, DATAGRAM_LEN};
use super::table::{cell, datagrams_per_s, field, mbit_per_s, of_most, percent, Table};
use anyhow::{bail, Result};

/// The three UDP receivers: port and nice value.
pub const RECEIVERS: [(u16, i32); 3] = [(5301, 0), (5302, 5), (5303, 10)];

fn ports() -> Vec<u16> {
    RECEIVERS.iter().map(|r| r.0).collect()
}

/// What one receiver got in a round: offered and received datagrams/s
/// (a sender that failed counts as offered at its nominal rate and
/// received 0).
#[derive(Debug, Clone, Copy)]
struct Got {
    offered: f64,
    received: f64,
}

fn got(outcome: &Outcome, nominal: f64) -> Got {
    match outcome {
        Ok(r) => Got { offered: r.offered_per_s(), received: r.received_per_s() },
        Err(_) => Got { offered: nominal, received: 0.0 },
    }
}

/// Figure 3 or 6: three senders at `mbit` Mbit/s each, one per receiver,
/// for `secs`, on each of `stacks`.
pub fn receive_rates(bed: &Bed, name: &'static str, title: &str, stacks: &[Stack], mbit: f64, secs: f64) -> Figure {
    let labels: Vec<String> = stacks.iter().map(Stack::label).collect();
    let mut header = vec!["receiver"];
    header.extend(labels.iter().map(String::as_str));
    let mut fig = Figure::new(
        name,
        title.to_string(),
        Table::new(&header),
        &["column", "nice", "offered_per_s", "received_per_s", "received_percent"],
    );
    let nominal = datagrams_per_s(mbit, DATAGRAM_LEN);
    fig.lines.push(format!(
        "Three senders of {DATAGRAM_LEN}-byte datagrams, {mbit:.1} Mbit/s each ({nominal:.0} datagrams/s, {:.0} in all), \
         {secs} s per run; each cell: datagrams/s received (% of those sent to it).",
        nominal * 3.0
    ));
    let mut columns: Vec<Option<Vec<Got>>> = Vec::new();
    for (stack, label) in stacks.iter().zip(&labels) {
        eprintln!("  {name}: {label}");
        let outcomes = match bed.column(stack, &RECEIVERS) {
            Ok(column) => rounds::udp(&column, &ports(), mbit, secs),
            Err(down) => {
                fig.notes.push(format!("{label}: {down}"));
                columns.push(None);
                continue;
            }
        };
        let mut gots = Vec::new();
        for (o, &(_, nice)) in outcomes.iter().zip(&RECEIVERS) {
            if let Err(e) = o {
                fig.notes.push(format!("{label}, nice {nice}: counted 0: {e}"));
            }
            let g = got(o, nominal);
            fig.csv_rows.push(vec![
                label.clone(),
                nice.to_string(),
                field(Some(g.offered)),
                field(Some(g.received)),
                field(percent(g.received, g.offered)),
            ]);
            gots.push(g);
        }
        columns.push(Some(gots));
    }
    let rate = |g: Got| format!("{:.0} ({})", g.received, cell(percent(g.received, g.offered), 1) + " %");
    for (i, &(_, nice)) in RECEIVERS.iter().enumerate() {
        let mut row = vec![format!("nice {nice}")];
        row.extend(columns.iter().map(|c| c.as_ref().and_then(|g| g.get(i)).map_or("—".into(), |&g| rate(g))));
        fig.table.row(row);
    }
    let mut total = vec!["all three".to_string()];
    total.extend(columns.iter().map(|c| {
        c.as_ref().map_or("—".into(), |g| {
            rate(Got { offered: g.iter().map(|g| g.offered).sum(), received: g.iter().map(|g| g.received).sum() })
        })
    }));
    fig.table.row(total);
    fig
}

/// The total datagrams/s netd (with no PacketFlow module) delivers at
/// most to the three receivers: a ramp of `step_secs` runs from 20 000
/// datagrams/s in all, doubling until the receivers get under 80 % of
/// what was sent or the senders cannot send what was asked. The most
/// delivered, and a line per step.
pub fn saturation(bed: &Bed, step_secs: f64) -> Result<(f64, Vec<String>)> {
    let column = match bed.column(&Stack::netd("none"), &RECEIVERS) {
        Ok(c) => c,
        Err(Down::NotAvailable(why) | Down::Failed(why)) => bail!("the saturation ramp: {why}"),
    };
    let mut most: f64 = 0.0;
    let mut lines = Vec::new();
    let mut total = 20_000.0;
    for _ in 0..8 {
        let each = total / RECEIVERS.len() as f64;
        let outcomes = rounds::udp(&column, &ports(), mbit_per_s(each, DATAGRAM_LEN), step_secs);
        let gots: Vec<Got> = outcomes.iter().map(|o| got(o, each)).collect();
        let offered: f64 = gots.iter().map(|g| g.offered).sum();
        let delivered: f64 = gots.iter().map(|g| g.received).sum();
        most = most.max(delivered);
        lines.push(format!("asked {total:.0}/s, sent {offered:.0}/s, delivered {delivered:.0}/s"));
        eprintln!("  ramp: {}", lines.last().map_or("", String::as_str));
        if super::procs::interrupted() {
            bail!("interrupted");
        }
        if delivered < 0.8 * offered || offered < 0.8 * total {
            break;
        }
        total *= 2.0;
    }
    if most <= 0.0 {
        bail!("the saturation ramp: netd delivered nothing ({})", lines.join("; "));
    }
    Ok((most, lines))
}

/// The offered loads of the sweep, as multiples of saturation.
pub const LOADS: [f64; 4] = [0.5, 1.0, 2.0, 4.0];

/// Total datagrams/s delivered at each of [`LOADS`] × `saturation` for
/// netd with no module, with its default set, and Linux.
pub fn sweep(bed: &Bed, saturation: f64, secs: f64) -> Figure {
    let stacks = [Stack::netd("none"), Stack::Netd(None), Stack::Linux];
    let labels: Vec<String> = stacks.iter().map(Stack::label).collect();
    let mut header = vec!["offered load (datagrams/s asked)"];
    header.extend(labels.iter().map(String::as_str));
    let mut fig = Figure::new(
        "sweep",
        "Load sweep: delivered datagrams/s as the load grows past saturation".into(),
        Table::new(&header),
        &["column", "load", "asked_per_s", "offered_per_s", "delivered_per_s"],
    );
    fig.lines.push(format!(
        "Saturation: {saturation:.0} datagrams/s in all; three senders of {DATAGRAM_LEN}-byte datagrams share each \
         load, {secs} s per run; each cell: datagrams/s delivered to the three receivers (sent)."
    ));
    let mut columns: Vec<Option<Vec<(f64, f64)>>> = Vec::new();
    for (stack, label) in stacks.iter().zip(&labels) {
        eprintln!("  sweep: {label}");
        let column = match bed.column(stack, &RECEIVERS) {
            Ok(c) => c,
            Err(down) => {
                fig.notes.push(format!("{label}: {down}"));
                columns.push(None);
                continue;
            }
        };
        let mut points = Vec::new();
        for load in LOADS {
            let each = load * saturation / RECEIVERS.len() as f64;
            let outcomes = rounds::udp(&column, &ports(), mbit_per_s(each, DATAGRAM_LEN), secs);
            for (o, &(_, nice)) in outcomes.iter().zip(&RECEIVERS) {
                if let Err(e) = o {
                    fig.notes.push(format!("{label}, {load}×, nice {nice}: counted 0: {e}"));
                }
            }
            let gots: Vec<Got> = outcomes.iter().map(|o| got(o, each)).collect();
            let offered: f64 = gots.iter().map(|g| g.offered).sum();
            let delivered: f64 = gots.iter().map(|g| g.received).sum();
            fig.csv_rows.push(vec![
                label.clone(),
                format!("{load}"),
                field(Some(load * saturation)),
                field(Some(offered)),
                field(Some(delivered)),
            ]);
            points.push((offered, delivered));
        }
        columns.push(Some(points));
    }
    for (i, load) in LOADS.iter().enumerate() {
        let mut row = vec![format!("{load}× ({:.0})", load * saturation)];
        row.extend(
            columns
                .iter()
                .map(|c| c.as_ref().and_then(|p| p.get(i)).map_or("—".into(), |(o, d)| format!("{d:.0} ({o:.0})"))),
        );
        fig.table.row(row);
    }
    for load in [2.0, 4.0] {
        let Some(i) = LOADS.iter().position(|&l| l == load) else { continue };
        let mut row = vec![format!("{load}× as % of the most delivered")];
        row.extend(columns.iter().map(|c| {
            c.as_ref().map_or("—".into(), |p| {
                let delivered: Vec<f64> = p.iter().map(|&(_, d)| d).collect();
                cell(of_most(&delivered, i), 1) + " %"
            })
        }));
        fig.table.row(row);
    }
    fig
}
