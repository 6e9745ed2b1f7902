//! The `nagare` command.

mod bench;
mod bench_copies;
mod bench_handover;
mod bench_netd;
mod bench_netns;
mod bench_sendpath;
mod bench_vni;
mod demo;
mod driver;
mod fetch;
mod host;
mod http_server;
mod netd;
mod perf;
mod ping;
mod realtime;
mod services;
mod sim_pair;
mod stat;
mod up;
mod vni;
mod vni_bridge;

use anyhow::Result;
use clap::{Parser, Subcommand};
use nagare_dev::Impairment;
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::net::Ipv4Addr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "nagare", version, about = "A user-space TCP/IP stack")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Two instances on a simulated link in this process: ARP, ping both
    /// ways, fragmented UDP echo, and a UDP stream; no root needed.
    Demo {
        /// Save host A's traffic as a pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Seed of the simulated link.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Datagrams in the closing UDP stream.
        #[arg(long, default_value_t = 50_000)]
        stream: usize,
    },
    /// Run a host on a TAP device or a VNI port: answers ping and serves
    /// UDP echo on port 7, and the services asked for.
    Up {
        #[command(flatten)]
        link: UpLinkArgs,
        /// Save the traffic as a pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        #[command(flatten)]
        services: services::ServiceArgs,
    },
    /// The inet server: one stack on a TAP device or a VNI port, serving
    /// applications (the `nagare` crate) over shared-memory regions.
    Netd {
        #[command(flatten)]
        link: UpLinkArgs,
        /// The rendezvous socket clients connect to.
        #[arg(long, default_value = nagare_netd::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Services built into the inet server.
        #[command(flatten)]
        services: services::ServiceArgs,
        /// Where the device runs: `split`, a driver process of its own
        /// (restarted when it dies); `single`, the same driver as a thread
        /// of netd; `inline`, called from netd's loop.
        #[arg(long, default_value = "split", value_parser = parse_placement)]
        placement: nagare_netd::Placement,
        /// Microseconds netd and its driver poll after their last work
        /// before they sleep (yielding the CPU between looks).
        #[arg(long, default_value_t = 50)]
        spin_us: u64,
    },
    /// netd's driver process (started by `nagare netd`, not by hand).
    #[command(hide = true)]
    Driver(driver::DriverArgs),
    /// Download a URL over HTTP/1.1 through nagare on a TAP device or a
    /// VNI port.
    Fetch {
        #[command(flatten)]
        link: OptionalTapArgs,
        /// Through a running `nagare netd` (its rendezvous socket) instead
        /// of a stack of its own.
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// http://A.B.C.D[:PORT]/PATH
        url: String,
        /// Where to write the body.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
    /// Ping from nagare: over a TAP device or a VNI port, or (without
    /// either) to a nagare peer on a simulated link in this process.
    Ping {
        #[command(flatten)]
        link: OptionalTapArgs,
        /// Through a running `nagare netd` (its rendezvous socket) instead
        /// of a stack of its own.
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// Address to ping.
        destination: Ipv4Addr,
        /// Stop after this many requests.
        #[arg(short = 'c', long = "count")]
        count: Option<u32>,
        /// Bytes of echo data.
        #[arg(short = 's', long = "size", default_value_t = 56)]
        size: usize,
        /// Seconds between requests.
        #[arg(short = 'i', long = "interval", default_value_t = 1.0)]
        interval: f64,
        /// Seconds to wait for the last reply.
        #[arg(short = 'W', long = "timeout", default_value_t = 2.0)]
        timeout: f64,
        /// Print only the summary.
        #[arg(short = 'q', long = "quiet")]
        quiet: bool,
    },
    /// A running netd's clients, sockets, buffers per region, counters and
    /// request round trip.
    Stat {
        /// The netd's rendezvous socket.
        #[arg(long, default_value = nagare_netd::DEFAULT_SOCKET)]
        via: PathBuf,
        /// Requests timed for the round trip.
        #[arg(long, default_value_t = 1000)]
        samples: usize,
    },
    /// Speed figures, each beside a Linux kernel peer measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// TCP/UDP throughput and TCP request/response latency between nagare
    /// and another nagare or the kernel (iperf-like).
    #[command(subcommand)]
    Perf(perf::PerfCommand),
    /// VNI segments: a shared-memory Ethernet between nagare instances on
    /// this machine.
    #[command(subcommand)]
    Vni(vni::VniCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
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
    /// The VNI beside Linux veth (Table 2 of the Mint paper plus latency):
    /// UDP and TCP throughput, UDP round trip, segment memory.
    Vni(bench_vni::VniBenchArgs),
    /// A 64-byte UDP round trip between two applications through one netd,
    /// beside Linux loopback UDP; and an empty request's round trip.
    Netd(bench_netd::NetdBenchArgs),
    /// Where a UDP sendto spends its time, stage by stage (Table 3 of the
    /// AnT paper): split, single and inline placement beside Linux's
    /// sendto on a TAP. Needs root.
    Sendpath(bench_sendpath::SendPathArgs),
    /// Copies per payload byte on the send and receive paths through netd
    /// and its driver, counted by the code, for the std-shaped and the
    /// zero-copy calls.
    Copies(bench_copies::CopiesBenchArgs),
    /// The cost of handing a buffer to another process: remapping pages per
    /// transfer against nagare's premapped regions (Table 3 of the AnT MMU
    /// paper), with a system call and a process switch for scale.
    Handover(bench_handover::HandoverBenchArgs),
}

/// The link of `nagare up` and `nagare fetch`: a TAP device or a VNI segment.
#[derive(clap::Args, Clone)]
struct UpLinkArgs {
    /// TAP device to use (created if it does not exist).
    #[arg(long, required_unless_present = "vni")]
    tap: Option<String>,
    /// VNI segment to attach to (a free port of it; see `nagare vni create`).
    #[arg(long, conflicts_with = "tap")]
    vni: Option<String>,
    /// Address and prefix, e.g. 10.0.0.2/24.
    #[arg(long)]
    addr: Ipv4Cidr,
    /// Default gateway.
    #[arg(long)]
    gateway: Option<Ipv4Addr>,
    /// Ethernet address (default: derived from the IP address).
    #[arg(long)]
    mac: Option<EthernetAddress>,
    /// Impair traffic both ways, e.g. loss=3%,delay=2ms,reorder=10%,dup=1%,corrupt=0.1%.
    #[arg(long)]
    impair: Option<Impairment>,
    /// Plain frames: no checksum or TCP segmentation offload on the TAP.
    #[arg(long, conflicts_with = "vni")]
    no_offload: bool,
}

fn parse_placement(s: &str) -> Result<nagare_netd::Placement, String> {
    use nagare_netd::Placement;
    match s {
        "split" => Ok(Placement::Split),
        "single" => Ok(Placement::Single),
        "inline" => Ok(Placement::Inline),
        _ => Err(format!("{s}: placement is split, single or inline")),
    }
}

impl UpLinkArgs {
    fn into_link(self) -> up::Link {
        match (self.tap, self.vni) {
            (Some(tap), _) => up::Link::Tap(up::TapLink {
                tap,
                addr: self.addr,
                gateway: self.gateway,
                mac: self.mac,
                impair: self.impair,
                offload: !self.no_offload,
            }),
            (None, vni) => up::Link::Vni(up::VniLink {
                vni: vni.unwrap_or_default(),
                addr: self.addr,
                gateway: self.gateway,
                mac: self.mac,
                impair: self.impair,
            }),
        }
    }
}

#[derive(clap::Args, Clone)]
struct OptionalTapArgs {
    /// TAP device to use (created if it does not exist).
    #[arg(long, requires = "addr")]
    tap: Option<String>,
    /// VNI segment to attach to, instead of a TAP device.
    #[arg(long, requires = "addr", conflicts_with = "tap")]
    vni: Option<String>,
    /// Address and prefix, e.g. 10.0.0.2/24.
    #[arg(long)]
    addr: Option<Ipv4Cidr>,
    /// Default gateway.
    #[arg(long)]
    gateway: Option<Ipv4Addr>,
    /// Ethernet address (default: derived from the IP address).
    #[arg(long)]
    mac: Option<EthernetAddress>,
    /// Impair traffic both ways.
    #[arg(long)]
    impair: Option<Impairment>,
    /// Plain frames: no checksum or TCP segmentation offload on the TAP.
    #[arg(long)]
    no_offload: bool,
}

impl OptionalTapArgs {
    /// The TAP or VNI link asked for, if any (with an address).
    fn to_link(&self) -> Option<up::Link> {
        let addr = self.addr?;
        if let Some(tap) = &self.tap {
            return Some(up::Link::Tap(up::TapLink {
                tap: tap.clone(),
                addr,
                gateway: self.gateway,
                mac: self.mac,
                impair: self.impair,
                offload: !self.no_offload,
            }));
        }
        let vni = self.vni.clone()?;
        Some(up::Link::Vni(up::VniLink { vni, addr, gateway: self.gateway, mac: self.mac, impair: self.impair }))
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo { pcap, seed, stream } => demo::run(demo::DemoArgs { pcap, seed, stream_datagrams: stream }),
        Command::Up { link, pcap, services } => up::run(up::UpArgs { link: link.into_link(), pcap, services }),
        Command::Netd { link, socket, services, placement, spin_us } => netd::run(
            link.into_link(),
            socket,
            &services,
            placement,
            std::time::Duration::from_micros(spin_us.min(1_000_000)),
        ),
        Command::Driver(args) => driver::run(args),
        Command::Fetch { link, via, url, output, timeout } => {
            let timeout = std::time::Duration::from_secs(timeout);
            match (via, link.to_link()) {
                (Some(socket), _) => fetch::run_via(&socket, &url, &output, timeout),
                (None, Some(link)) => fetch::run(link, &url, &output, timeout),
                (None, None) => anyhow::bail!("nagare fetch needs --tap or --vni with --addr, or --via SOCKET"),
            }
        }
        Command::Ping { link, via, destination, count, size, interval, timeout, quiet } => {
            let seconds = |name: &str, value: f64| {
                std::time::Duration::try_from_secs_f64(value).map_err(|_| {
                    anyhow::anyhow!("{name} must be a number of seconds from 0 to about 1.8e19, not {value}")
                })
            };
            if size > ping::MAX_PING_SIZE {
                anyhow::bail!("-s {size}: at most {} bytes fit in one IPv4 datagram", ping::MAX_PING_SIZE);
            }
            let options = ping::PingOptions {
                destination,
                count,
                size,
                interval: seconds("-i", interval)?,
                timeout: seconds("-W", timeout)?,
                quiet,
            };
            let code = match (via, link.to_link()) {
                (Some(socket), _) => ping::run_via(&socket, options)?,
                (None, Some(real)) => ping::run_link(real, options)?,
                (None, None) => ping::run_simulated(link.addr, options)?,
            };
            std::process::exit(code);
        }
        Command::Stat { via, samples } => stat::run(&via, samples),
        Command::Perf(command) => perf::run(command),
        Command::Vni(command) => vni::run(command),
        Command::Bench(BenchCommand::Vni(args)) => bench_vni::run(args),
        Command::Bench(BenchCommand::Netd(args)) => bench_netd::run(args),
        Command::Bench(BenchCommand::Sendpath(args)) => bench_sendpath::run(args),
        Command::Bench(BenchCommand::Copies(args)) => bench_copies::run(args),
        Command::Bench(BenchCommand::Handover(args)) => bench_handover::run(args),
        Command::Bench(BenchCommand::Udp { datagrams, sizes, runs, csv }) => {
            bench::run_udp(bench::UdpBenchArgs { datagrams, sizes, runs, csv })
        }
    }
}
