//! `nagare bench packetflow`: the experiments of the PacketFlow paper
//! (§4.3–4.6, Figures 3 to 6) on this machine, netd with each PacketFlow
//! module set beside Linux in the same run. Needs root.
//!
//! Each column is a module set, the string given to `nagare netd
//! --packetflow` (`none`, `filter`, `scheduler`, `filter,scheduler`,
//! `mm`, or netd's default when none is given); a set netd refuses is
//! reported as "not available: <netd's error>" and its column skipped.
//! The receivers are `nagare perf server` processes at nice 0, 5 and 10
//! (with `--receiver-work-us`, each spends that much CPU time on every
//! datagram, so the CPU each gets decides what it takes), the senders
//! kernel `nagare perf client`s (`bed.rs` has the network).
//!
//! - `bed.rs`: the namespaces, one netd per column, the Linux peer;
//! - `procs.rs`: the helper processes, ended by pid, every wait bounded;
//! - `rounds.rs`: one round of UDP or TCP traffic;
//! - `udp_figures.rs`: Figures 3 and 6, the saturation ramp, the sweep;
//! - `tcp_figures.rs`: Figures 4 and 5;
//! - `output.rs`, `table.rs`: printing, CSV, the arithmetic.

mod bed;
mod output;
mod procs;
mod rounds;
mod table;
mod tcp_figures;
mod udp_figures;

use anyhow::{ensure, Result};
use bed::{Bed, Stack};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;
use table::{datagrams_per_s, mbit_per_s};

/// One of the bench's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fig {
    /// UDP receive rates under overload, nice 0/5/10, per module set.
    Three,
    /// TCP, three receivers at once.
    Four,
    /// TCP at nice 0 beside a UDP flood to nice 10.
    Five,
    /// UDP receive rates with the memory manager alone.
    Six,
    /// Delivered datagrams/s from half to four times saturation.
    Sweep,
}

impl FromStr for Fig {
    type Err = String;

    fn from_str(s: &str) -> Result<Fig, String> {
        Ok(match s.trim() {
            "3" => Fig::Three,
            "4" => Fig::Four,
            "5" => Fig::Five,
            "6" => Fig::Six,
            "sweep" => Fig::Sweep,
            other => return Err(format!("{other:?}: the figures are 3, 4, 5, 6 and sweep")),
        })
    }
}

#[derive(Debug, Clone)]
pub struct PacketFlowArgs {
    /// Seconds per UDP run.
    pub time: f64,
    /// Each UDP sender's rate in Mbit/s in Figures 3, 5 and 6 (default:
    /// twice saturation in all, from the ramp).
    pub rate: Option<f64>,
    /// Full segments each TCP receiver takes in Figures 4 and 5.
    pub segments: u64,
    /// Datagrams/s in all at which netd saturates (default: 2/3 of three
    /// senders at `rate`, else measured by a ramp).
    pub saturation: Option<f64>,
    /// The figures to measure (empty: all).
    pub figures: Vec<Fig>,
    /// Where to write one CSV file per figure.
    pub csv_dir: Option<PathBuf>,
    /// Arguments given to every netd besides `--packetflow`.
    pub netd_args: Vec<String>,
    /// The one CPU the senders run on, the rest being the receiving
    /// side's (`bed::Cpus`); `None`: everything shares every CPU.
    pub sender_cpu: Option<usize>,
    /// The nice value the TCP senders (Figures 4 and 5) run at; unset,
    /// -20 with `sender_cpu` (ahead of the UDP senders on that CPU, as a
    /// sender on a machine of its own would be) and their own without.
    pub tcp_sender_nice: Option<i32>,
    /// Microseconds of CPU time each UDP receiver spends on a datagram
    /// (0: none), for receivers whose own CPU time is what they lack.
    pub receiver_work_us: u64,
}

/// Figures 3, 4 and 5: the original, each module, both, netd as it runs
/// by default (every module, the memory manager too), and Linux.
fn main_stacks() -> Vec<Stack> {
    vec![
        Stack::netd("none"),
        Stack::netd("filter"),
        Stack::netd("scheduler"),
        Stack::netd("filter,scheduler"),
        Stack::Netd(None),
        Stack::Linux,
    ]
}

pub fn run(args: PacketFlowArgs) -> Result<()> {
    ensure!((1..=100_000_000).contains(&args.segments), "--segments: from 1 to 100,000,000");
    ensure!(args.time.is_finite() && args.time > 0.0 && args.time <= 120.0, "--time: seconds above 0, at most 120");
    for (name, v) in [("--rate", args.rate), ("--saturation", args.saturation)] {
        ensure!(v.is_none_or(|v| v.is_finite() && v > 0.0), "{name} must be above 0");
    }
    let figures = if args.figures.is_empty() {
        vec![Fig::Three, Fig::Sweep, Fig::Four, Fig::Five, Fig::Six]
    } else {
        args.figures.clone()
    };
    let wants = |f: Fig| figures.contains(&f);
    procs::catch_signals()?;
    // Counted before the bed may move this thread to fewer of them.
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    ensure!(args.tcp_sender_nice.is_none_or(|n| (-20..=19).contains(&n)), "--tcp-sender-nice: from -20 to 19");
    // Senders that stand for other machines: the TCP one is not slowed by
    // the flood's on their shared CPU unless asked.
    let tcp_sender_nice = args.tcp_sender_nice.or(args.sender_cpu.map(|_| -20));
    ensure!(args.receiver_work_us <= 10_000, "--receiver-work-us: at most 10000");
    let bed = Bed::create(args.netd_args.clone(), args.sender_cpu, tcp_sender_nice, args.receiver_work_us)?;
    let csv = args.csv_dir.as_deref();
    let secs = args.time;
    let tcp_limit = Duration::from_secs_f64((secs * 12.0).max(60.0));
    println!("## PacketFlow (nagare bench packetflow)");
    println!();
    println!(
        "{} CPUs ({}), load average {} at the start; netd arguments besides --packetflow: {}{}{}",
        cpus,
        bed.cpus(),
        crate::report::load_average(),
        if args.netd_args.is_empty() { "none".to_string() } else { args.netd_args.join(" ") },
        tcp_sender_nice.map_or(String::new(), |n| format!("; TCP senders at nice {n}")),
        if args.receiver_work_us > 0 {
            format!("; UDP receivers spend {} µs of CPU time on each datagram", args.receiver_work_us)
        } else {
            String::new()
        }
    );

    // Saturation and the overload rate: given, or from the ramp.
    let per_sender = |total: f64| total / udp_figures::RECEIVERS.len() as f64;
    let needs_rate = [Fig::Three, Fig::Five, Fig::Six].iter().any(|&f| wants(f));
    let saturation = match (args.saturation, args.rate) {
        (Some(s), _) => Some(s),
        (None, Some(rate)) => Some(datagrams_per_s(rate, rounds::DATAGRAM_LEN) * 3.0 / 2.0),
        (None, None) if needs_rate || wants(Fig::Sweep) => {
            eprintln!("packetflow: finding netd's saturation (ramp, no PacketFlow module)");
            let (s, lines) = udp_figures::saturation(&bed, secs.min(1.0))?;
            println!();
            println!("Saturation ramp (netd --packetflow none, three receivers): {}", lines.join("; "));
            Some(s)
        }
        (None, None) => None,
    };
    let rate = args.rate.or(saturation.map(|s| mbit_per_s(per_sender(2.0 * s), rounds::DATAGRAM_LEN)));
    if let Some(s) = saturation {
        println!();
        println!(
            "Saturation: {s:.0} datagrams/s in all. Overload (Figures 3, 5, 6): {:.1} Mbit/s per sender.",
            rate.unwrap_or(0.0)
        );
    }

    let mut notes = Vec::new();
    // A figure cut short by Ctrl-C is not printed.
    let mut emit = |fig: output::Figure| {
        if procs::interrupted() {
            return;
        }
        if let Err(e) = fig.emit(csv) {
            notes.push(format!("{}: {e:#}", fig.name));
        }
    };
    if let (true, Some(mbit)) = (wants(Fig::Three), rate) {
        emit(udp_figures::receive_rates(
            &bed,
            "fig3",
            "Figure 3: UDP receive rates under overload, receivers at nice 0, 5 and 10",
            &main_stacks(),
            mbit,
            secs,
        ));
    }
    if let (true, Some(s)) = (wants(Fig::Sweep), saturation) {
        emit(udp_figures::sweep(&bed, s, secs));
    }
    if wants(Fig::Four) {
        emit(tcp_figures::three_streams(&bed, &main_stacks(), args.segments, tcp_limit));
    }
    if let (true, Some(mbit)) = (wants(Fig::Five), rate) {
        emit(tcp_figures::under_flood(&bed, &main_stacks(), mbit, args.segments, tcp_limit));
    }
    if let (true, Some(mbit)) = (wants(Fig::Six), rate) {
        emit(udp_figures::receive_rates(
            &bed,
            "fig6",
            "Figure 6: the memory manager alone, UDP receive rates at nice 0, 5 and 10",
            &[Stack::netd("none"), Stack::netd("mm"), Stack::Linux],
            mbit,
            secs,
        ));
    }
    println!();
    println!("Load average at the end: {}", crate::report::load_average());
    ensure!(!procs::interrupted(), "interrupted");
    ensure!(notes.is_empty(), "{}", notes.join("; "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_named_by_number_or_sweep() {
        assert_eq!("3".parse(), Ok(Fig::Three));
        assert_eq!(" sweep".parse(), Ok(Fig::Sweep));
        assert_eq!("6".parse(), Ok(Fig::Six));
        assert!("7".parse::<Fig>().is_err());
        assert!("".parse::<Fig>().is_err());
    }
}
