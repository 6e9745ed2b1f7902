//! `nagare bench …` and `nagare perf …`: their arguments, turned into the
//! options of `nagare-bench`.

use crate::args::OptionalLinkArgs;
use anyhow::Result;
use clap::{Subcommand, ValueEnum};
use nagare_bench::perf::{self, ClientOptions, Mode, Proto, Stack};
use nagare_host::realtime;
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// UDP throughput between two nagare instances on a simulated link in
    /// this process, beside kernel UDP over 127.0.0.1.
    Udp {
        /// Datagrams per stream.
        #[arg(long, default_value_t = 200_000)]
        datagrams: usize,
        /// Payload sizes in bytes, e.g. --size 1472 or --size 64,1472,8000
        /// (default: 64, 1472 and 8000).
        #[arg(long = "size", value_delimiter = ',')]
        sizes: Vec<usize>,
        /// Runs of each stream; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Also write the figures to this CSV file.
        #[arg(long)]
        csv: Option<PathBuf>,
    },
    /// TCP on a simulated link in virtual time: a lost tail with tail loss
    /// probes and with the RTO alone; a 10 Gbit/s, 20 ms path with the
    /// receive buffer autotuned and fixed at 256 KiB.
    SimTcp {
        /// Bytes of the large-window transfer.
        #[arg(long, default_value_t = 64 << 20)]
        bytes: usize,
    },
    /// The VNI beside Linux veth (Table 2 of the Mint paper plus latency):
    /// UDP and TCP throughput, UDP round trip, segment memory.
    Vni {
        /// Seconds per throughput measurement.
        #[arg(long, default_value_t = 3.0)]
        time: f64,
        /// Round trips per latency measurement (each also ends after --time x 2).
        #[arg(long, default_value_t = 20_000)]
        pings: usize,
        /// Runs of each measurement, interleaved; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Slots per ring of the segments (default: as `nagare vni create`
        /// for each MTU).
        #[arg(long)]
        slots: Option<usize>,
        /// Tiny settings for a smoke test: 0.2 s, 200 round trips, one run.
        #[arg(long)]
        quick: bool,
        /// Run only these measurements (udp, tcp1500, tcp9000, rtt), e.g.
        /// --only udp,rtt (default: all).
        #[arg(long, value_delimiter = ',', value_enum)]
        only: Vec<VniMeasurement>,
        /// Leave out the Linux veth peers.
        #[arg(long)]
        no_linux: bool,
        /// (internal) Run as the peer on this segment.
        #[arg(long, hide = true, value_name = "SEGMENT")]
        peer: Option<String>,
        /// (internal) The peer spins instead of sleeping when idle.
        #[arg(long, hide = true)]
        peer_poll: bool,
    },
    /// A 64-byte UDP round trip between two applications through one netd,
    /// beside Linux loopback UDP; and an empty request's round trip.
    Netd {
        /// Round trips per measurement.
        #[arg(long, default_value_t = 20_000)]
        round_trips: usize,
        /// Bytes per request and per response.
        #[arg(long, default_value_t = 64)]
        size: usize,
    },
    /// Where a UDP sendto spends its time, stage by stage (Table 3 of the
    /// AnT paper): split, single and inline placement beside Linux's
    /// sendto on a TAP. Needs root.
    Sendpath {
        /// Sends per payload size and placement.
        #[arg(long, default_value_t = 5000)]
        count: usize,
        /// Microseconds netd, its driver and the application poll after their
        /// last work before they sleep (yielding the CPU between looks).
        #[arg(long, default_value_t = 50)]
        spin_us: u64,
        /// Payload sizes (bytes).
        #[arg(long = "size", value_delimiter = ',', default_values_t = [256usize, 512, 768, 1024, 1472])]
        sizes: Vec<usize>,
        /// An argument for every netd (repeat it), e.g. --netd-arg=--nice
        /// --netd-arg=-10.
        #[arg(long = "netd-arg", value_name = "ARG", allow_hyphen_values = true)]
        netd_args: Vec<String>,
    },
    /// Copies per payload byte on the send and receive paths through netd
    /// and its driver, counted by the code, for the std-shaped and the
    /// zero-copy calls.
    Copies {
        /// Payload bytes per run.
        #[arg(long, default_value_t = 8 << 20)]
        bytes: usize,
        /// On a TAP with Linux as the echo peer, multi-queue (steered) and
        /// single-queue, not on a VNI segment (root).
        #[arg(long)]
        tap: bool,
    },
    /// The cost of handing a buffer to another process: remapping pages per
    /// transfer against nagare's premapped regions (Table 3 of the AnT MMU
    /// paper), with a system call and a process switch for scale.
    Handover {
        /// Bytes per buffer handed over (rounded up to whole pages).
        #[arg(long, default_value_t = 16384)]
        size: usize,
        /// Hand-overs per timed batch.
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
        /// Timed batches; the median is reported.
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// A request through 1 to 4 stages (threads over nagare-ipc rings) and
    /// its completion, returned straight from the last stage or passed back
    /// stage by stage (Figure 7 of the AnT paper).
    Stages {
        /// Timed requests per stage count and way of return.
        #[arg(long, default_value_t = 20000)]
        requests: usize,
        /// Stages, from 1 to this (at most 8).
        #[arg(long, default_value_t = 4)]
        max_stages: usize,
        /// Microseconds a waiting stage polls its rings before it sleeps.
        #[arg(long, default_value_t = 0)]
        spin_us: u64,
        /// Every stage on CPU 0 (the AnT paper's machine had one CPU).
        #[arg(long)]
        one_cpu: bool,
    },
    /// The PacketFlow paper's Figures 3 to 6 and a load sweep: UDP and TCP
    /// receivers at nice 0, 5 and 10 through netd with each PacketFlow
    /// module set (`--packetflow`), beside Linux over veth. Needs root.
    Packetflow {
        /// Seconds per UDP run.
        #[arg(long, default_value_t = 5.0)]
        time: f64,
        /// Each UDP sender's rate in Mbit/s of 256-byte datagrams in
        /// Figures 3, 5 and 6 (default: twice netd's saturation in all).
        #[arg(long, value_name = "MBIT")]
        rate: Option<f64>,
        /// Full segments (1448 bytes) each TCP receiver takes in Figures 4
        /// and 5.
        #[arg(long, default_value_t = 100_000)]
        segments: u64,
        /// Datagrams/s in all at which netd saturates, for the sweep
        /// (default: from --rate, else measured by a short ramp).
        #[arg(long, value_name = "PER_S")]
        saturation: Option<f64>,
        /// The figures to measure, e.g. --figures 3,sweep (3, 4, 5, 6,
        /// sweep; default: all).
        #[arg(long, value_delimiter = ',', value_parser = parse_figure)]
        figures: Vec<nagare_bench::packetflow::Fig>,
        /// Write one CSV file per figure into this folder (for
        /// scripts/bench/plot_packetflow.py).
        #[arg(long)]
        csv_dir: Option<PathBuf>,
        /// An argument for every netd besides --packetflow (repeat it),
        /// e.g. --netd-arg=--boost --netd-arg=auto.
        #[arg(long = "netd-arg", value_name = "ARG", allow_hyphen_values = true)]
        netd_args: Vec<String>,
        /// Run the senders on this CPU alone and everything else (netd,
        /// the receivers, Linux's receive processing by RPS) on the
        /// others, so the senders stand in for other machines instead of
        /// taking the receiving side's CPU time.
        #[arg(long, value_name = "CPU")]
        sender_cpu: Option<usize>,
        /// Run the TCP senders of Figures 4 and 5 at this nice value (-20
        /// to 19): with --sender-cpu, ahead of the UDP senders on that
        /// CPU, as a sender on a machine of its own would be, so a flood's
        /// senders do not slow the TCP sender itself (default: -20 with
        /// --sender-cpu, the senders' own nice value without it)
        #[arg(long, value_name = "NICE", allow_negative_numbers = true)]
        tcp_sender_nice: Option<i32>,
        /// Microseconds of CPU time each UDP receiver spends on every
        /// datagram (a busy loop; at most 10000), for receivers whose own
        /// CPU time is what they lack, where the scheduler's lift of a
        /// process decides what it gets
        #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000))]
        receiver_work_us: u64,
    },
}

fn parse_figure(s: &str) -> Result<nagare_bench::packetflow::Fig, String> {
    s.parse()
}

/// One measurement of `nagare bench vni`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VniMeasurement {
    Udp,
    Tcp1500,
    Tcp9000,
    Rtt,
}

impl BenchCommand {
    pub fn run(self) -> Result<()> {
        use nagare_bench::*;
        match self {
            BenchCommand::Udp { datagrams, sizes, runs, csv } => {
                udp::run_udp(udp::UdpBenchArgs { datagrams, sizes, runs, csv })
            }
            BenchCommand::SimTcp { bytes } => sim_tcp::run(sim_tcp::SimTcpArgs { bytes }),
            BenchCommand::Vni { time, pings, runs, slots, quick, only, no_linux, peer, peer_poll } => {
                let only = only
                    .into_iter()
                    .map(|m| match m {
                        VniMeasurement::Udp => vni::Only::Udp,
                        VniMeasurement::Tcp1500 => vni::Only::Tcp1500,
                        VniMeasurement::Tcp9000 => vni::Only::Tcp9000,
                        VniMeasurement::Rtt => vni::Only::Rtt,
                    })
                    .collect();
                vni::run(vni::VniBenchArgs { time, pings, runs, slots, quick, only, no_linux, peer, peer_poll })
            }
            BenchCommand::Netd { round_trips, size } => netd::run(netd::NetdBenchArgs { round_trips, size }),
            BenchCommand::Sendpath { count, spin_us, sizes, netd_args } => {
                sendpath::run(sendpath::SendPathArgs { count, spin_us, sizes, netd_args })
            }
            BenchCommand::Copies { bytes, tap } => copies::run(copies::CopiesBenchArgs { bytes, tap }),
            BenchCommand::Handover { size, iterations, runs } => {
                handover::run(handover::HandoverBenchArgs { size, iterations, runs })
            }
            BenchCommand::Packetflow {
                time,
                rate,
                segments,
                saturation,
                figures,
                csv_dir,
                netd_args,
                sender_cpu,
                tcp_sender_nice,
                receiver_work_us,
            } => packetflow::run(packetflow::PacketFlowArgs {
                time,
                rate,
                segments,
                saturation,
                figures,
                csv_dir,
                netd_args,
                sender_cpu,
                tcp_sender_nice,
                receiver_work_us,
            }),
            BenchCommand::Stages { requests, max_stages, spin_us, one_cpu } => stages::run(stages::StagesArgs {
                requests,
                max_stages,
                spin: std::time::Duration::from_micros(spin_us.min(1_000_000)),
                one_cpu,
            }),
        }
    }
}

#[derive(Subcommand)]
pub enum PerfCommand {
    /// Serve tests until Ctrl-C or SIGTERM: on nagare with --tap or --vni, else on
    /// the kernel's stack; to IPv4 and IPv6 clients (with nagare, those of the
    /// IP versions it has an --addr of).
    Server {
        #[command(flatten)]
        link: OptionalLinkArgs,
        /// Through a running `nagare netd` (its rendezvous socket); IPv4 only.
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// With --via: TCP bulk data through the client library's zero-copy
        /// calls (`alloc_tx`, `send_buf`, `recv_buf`) instead of `write` and
        /// `read`.
        #[arg(long, requires = "via")]
        zero_copy: bool,
        /// TCP port for control and data, UDP port for datagrams.
        #[arg(long, default_value_t = perf::DEFAULT_PORT)]
        port: u16,
        /// Exit after one test (status 1 if it failed).
        #[arg(long)]
        once: bool,
        /// Microseconds of CPU time (a busy loop) spent on each datagram
        /// of a UDP test received, as an application that does work per
        /// datagram would (at most 10000).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000))]
        work_us: u64,
    },
    /// Run one test against a perf server: on nagare with --tap or --vni, else on
    /// the kernel's stack; over IPv4 or IPv6 (with nagare, each needs an --addr
    /// of its version; through --via, IPv4 only).
    Client {
        #[command(flatten)]
        link: OptionalLinkArgs,
        /// Through a running `nagare netd` (its rendezvous socket); IPv4 only.
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// With --via: TCP bulk data through the client library's zero-copy
        /// calls (`alloc_tx`, `send_buf`, `recv_buf`) instead of `write` and
        /// `read`.
        #[arg(long, requires = "via")]
        zero_copy: bool,
        /// The server's address: IPv4 (10.0.0.1) or IPv6 (fd00::1).
        server: IpAddr,
        #[arg(long, default_value_t = perf::DEFAULT_PORT)]
        port: u16,
        /// TCP (the default).
        #[arg(long, conflicts_with = "udp")]
        tcp: bool,
        /// UDP datagrams (stream, reverse and rr).
        #[arg(long)]
        udp: bool,
        /// stream: the client sends; reverse: the server sends; rr:
        /// request/response of --len bytes each way, one in flight (UDP: a
        /// request not answered within 200 ms counts as lost).
        #[arg(long, value_enum, default_value_t = ModeArg::Stream)]
        mode: ModeArg,
        /// Seconds to run (default 10).
        #[arg(long, conflicts_with = "bytes")]
        time: Option<f64>,
        /// Bytes to move instead of a time, e.g. 100M or 1G (rr: request
        /// bytes; UDP: rounded up to whole datagrams).
        #[arg(long, value_parser = perf::parse_bytes)]
        bytes: Option<u64>,
        /// Bytes per write (TCP stream, default 128K), per request and per
        /// response (rr, default 1), or per datagram (UDP stream and
        /// reverse, default 1472, over IPv6 1452: one 1500-byte frame).
        #[arg(long, value_parser = perf::parse_bytes)]
        len: Option<u64>,
        /// UDP sending rate in Mbit/s (stream and reverse; default: as fast
        /// as possible).
        #[arg(long, value_name = "MBIT")]
        udp_rate: Option<f64>,
        /// Datagrams per send call in a UDP stream test (1 to 64, default
        /// 1): the kernel's stack cuts each call's bytes into datagrams
        /// (UDP segmentation offload); other stacks send them one by one.
        #[arg(long, value_name = "N")]
        udp_batch: Option<usize>,
        /// Give up after this many seconds (default: the test time + 30 s,
        /// or 600 s for --bytes).
        #[arg(long)]
        timeout: Option<f64>,
        /// Print the summary as one JSON object.
        #[arg(long)]
        json: bool,
        /// No progress line.
        #[arg(short, long)]
        quiet: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Stream,
    Reverse,
    Rr,
}

/// The stack `--via`, `--tap`/`--vni` or neither asks for.
fn stack(link: &OptionalLinkArgs, via: Option<PathBuf>, zero_copy: bool) -> Result<Stack> {
    link.check_device()?;
    Ok(match (via, link.spec()?) {
        (Some(socket), _) => Stack::Via { socket, zero_copy },
        (None, Some(spec)) => Stack::Engine(spec),
        (None, None) => Stack::Kernel,
    })
}

impl PerfCommand {
    pub fn run(self) -> Result<()> {
        match self {
            PerfCommand::Server { link, via, zero_copy, port, once, work_us } => perf::run_server(
                &stack(&link, via, zero_copy)?,
                port,
                once,
                std::time::Duration::from_micros(work_us),
                &*realtime::stop_flag()?,
            ),
            PerfCommand::Client {
                link,
                via,
                zero_copy,
                server,
                port,
                tcp: _,
                udp,
                mode,
                time,
                bytes,
                len,
                udp_rate,
                udp_batch,
                timeout,
                json,
                quiet,
            } => {
                let options = ClientOptions {
                    server,
                    port,
                    proto: if udp { Proto::Udp } else { Proto::Tcp },
                    mode: match mode {
                        ModeArg::Stream => Mode::Stream,
                        ModeArg::Reverse => Mode::Reverse,
                        ModeArg::Rr => Mode::Rr,
                    },
                    time,
                    bytes,
                    len,
                    udp_rate,
                    udp_batch,
                    timeout,
                    json,
                    quiet,
                };
                perf::run_client(&stack(&link, via, zero_copy)?, &options, &*realtime::stop_flag()?)
            }
        }
    }
}
