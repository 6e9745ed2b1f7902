//! The `nagare` command: parses its arguments and calls the library that
//! does the job (`nagare-tools`, `nagare-bench`).

mod args;
mod bench_args;
mod logger;

use anyhow::Result;
use args::{LinkArgs, OptionalLinkArgs, ServiceArgs};
use bench_args::{BenchCommand, PerfCommand};
use clap::{Parser, Subcommand};
use nagare_dev::Impairment;
use nagare_netd::driver::launch::{run_process, DriverArgs};
use nagare_netd::NetdBuilder;
use nagare_tools::{demo, fetch, netd, ping, run, stat, up, vni};
use nagare_wire::EthernetAddress;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

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
        link: LinkArgs,
        /// Save the traffic as a pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        #[command(flatten)]
        services: ServiceArgs,
    },
    /// The inet server: one stack on a TAP device or a VNI port, serving
    /// applications (the `nagare` crate) over shared-memory regions.
    Netd {
        #[command(flatten)]
        link: LinkArgs,
        /// The rendezvous socket clients connect to.
        #[arg(long, default_value = nagare_netd::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Permission bits of the rendezvous socket, in octal (default:
        /// netd's user's alone, 700, or 660 with --socket-group). A program
        /// reaches netd only with write permission on it: 660 with
        /// --socket-group opens it to a group, 666 to every user. Each
        /// client's buffers stay its own either way.
        #[arg(long, value_parser = args::parse_mode)]
        socket_mode: Option<u32>,
        /// The group the rendezvous socket belongs to (a name or a number).
        #[arg(long)]
        socket_group: Option<String>,
        /// The first port a program may bind through netd without
        /// CAP_NET_BIND_SERVICE (netd reads the program's capabilities as
        /// it binds). Default: the kernel's
        /// net.ipv4.ip_unprivileged_port_start where netd runs (1024 unless
        /// set); 0: any port is anyone's.
        #[arg(long)]
        unprivileged_port_start: Option<u16>,
        /// Services built into the inet server.
        #[command(flatten)]
        services: ServiceArgs,
        /// Where the device runs: `split`, a driver process of its own
        /// (restarted when it dies); `single`, the same driver as a thread
        /// of netd; `inline`, called from netd's loop. Default: the fastest
        /// for the CPUs netd may run on: `inline` on two or fewer (a driver
        /// beside netd would leave three polling loops, with the
        /// applications and the kernel, to share them), `split` on more.
        #[arg(long, value_parser = args::parse_placement)]
        placement: Option<nagare_netd::Placement>,
        /// Microseconds netd and its driver poll after their last work at
        /// least before they sleep (yielding the CPU between looks); while
        /// work keeps coming they poll up to 5 ms.
        #[arg(long, default_value_t = 50)]
        spin_us: u64,
        /// The nice value netd and its driver run at (default: the one it
        /// was started with). netd does for every client what the
        /// kernel's network processing does ahead of any process; with
        /// more weight than its clients (-5 or -10) the scheduler keeps
        /// them off netd's CPU, which on a machine with fewer CPUs than
        /// busy clients speeds many clients' request/response but slows
        /// a lone client's sends and makes bulk shares less even. A value
        /// below the one netd started with needs CAP_SYS_NICE; without it
        /// netd keeps its own.
        #[arg(long, value_parser = clap::value_parser!(i32).range(-20..=19), allow_negative_numbers = true)]
        nice: Option<i32>,
        /// Run netd and its driver under SCHED_FIFO at this priority (1 to
        /// 99), ahead of every ordinary process, as the kernel's own
        /// network processing runs ahead of them. Needs CAP_SYS_NICE;
        /// without it netd runs as it was started.
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..=99))]
        realtime: Option<i32>,
        /// Bytes of buffers each client's sockets may hold in netd (TCP
        /// send and receive buffers, UDP receive queues): past an eighth
        /// of it a new connection starts with 16 KiB buffers that grow
        /// with use, and past it a new socket fails with ENOBUFS.
        #[arg(long, default_value_t = nagare_netd::DEFAULT_CLIENT_MEMORY)]
        client_memory: usize,
        /// Bytes of buffers all clients' sockets may hold in netd together
        /// (PacketFlow's global cap): past it connections get smaller
        /// buffers, then ENOBUFS, and no UDP queue grows. Default and
        /// most: netd's buffer pool less the eighth kept for frames in
        /// flight; at least 32768 (two 16 KiB buffers, the least a
        /// connection takes).
        #[arg(long, value_parser = clap::value_parser!(u64).range(32768..))]
        memory_cap: Option<u64>,
        /// Connections closed by their applications that netd keeps for
        /// their FIN exchange at once; a close past it resets.
        #[arg(long, default_value_t = 1024)]
        max_orphans: usize,
        /// A new TCP connection's receive buffer in bytes (16 KiB to
        /// 64 MiB), the window it offers first; its application keeps as
        /// much posted for receives. It is charged to the client's memory.
        #[arg(long, default_value_t = 256 << 10, value_parser = clap::value_parser!(u64).range(16 << 10..=64 << 20))]
        tcp_recv_buffer: u64,
        /// The largest a TCP connection's receive buffer grows to (16 KiB
        /// to 64 MiB): it grows while its application reads fast enough
        /// to use a wider window and its client's memory has room, each
        /// growth charged to the client; at or below --tcp-recv-buffer,
        /// none grows.
        #[arg(long, default_value_t = 4 << 20, value_parser = clap::value_parser!(u64).range(16 << 10..=64 << 20))]
        tcp_recv_buffer_max: u64,
        /// Frames each queue of the TAP holds while netd is away from it
        /// (set when netd opens the TAP; 0 leaves it as it is). The
        /// kernel's 1000 lasts 3 ms at 300 000 frames a second, less than
        /// one turn of the scheduler on a machine whose CPUs netd shares,
        /// and what does not fit is dropped before netd sees it.
        #[arg(long, default_value_t = nagare_netd::DEFAULT_TAP_QUEUE_LEN)]
        tap_queue_len: u32,
        /// TCP connections netd's engine holds at most, every client's
        /// together: past it a connect fails with ENFILE and SYNs to
        /// listeners are not answered.
        #[arg(long, default_value_t = 16384)]
        max_connections: usize,
        /// The PacketFlow modules netd runs, a comma-separated list, or
        /// `none`: `filter` drops UDP before the engine for receivers of
        /// low priority while the receive path drops and for sockets whose
        /// queue is full; `scheduler` serves clients in priority order and
        /// boosts those whose receive buffers fill; `mm` grows a
        /// UDP socket's receive queue while it is full, up to a size its
        /// priority sets. Default: every module.
        #[arg(long, value_parser = args::parse_packetflow, default_value_t = nagare_netd::PacketFlow::ALL)]
        packetflow: nagare_netd::PacketFlow,
        /// The scheduler's threshold T: a client whose fullest receive
        /// buffer is fuller than this (percent) is falling behind, a
        /// candidate for a boost.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
        boost_threshold: u8,
        /// How many candidates the scheduler boosts: a number (the paper's
        /// rule: the best N by priority not of the best priority), or
        /// `auto`: any but those of the worst priority among receiving
        /// clients, best first, at most one per CPU.
        #[arg(long, default_value = "auto")]
        boost: nagare_netd::BoostCount,
        /// Milliseconds a boost lasts after the last period (20 ms) that
        /// chose it.
        #[arg(long, default_value_t = 100)]
        boost_time_ms: u64,
        /// Nice steps netd lowers a boosted client's process by at most,
        /// never past a better receiving client's priority, and gives back
        /// when the boost ends (needs CAP_SYS_NICE; 0: netd never changes a
        /// process). A boosted client is lifted in netd's own order either way.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=39))]
        boost_lift: u8,
        /// The largest receive queue PacketFlow's memory manager grows a
        /// UDP socket of nice 0 to, in bytes; priority p gets this ×
        /// (140 − p) / 20, never under 16 KiB.
        #[arg(long, default_value_t = 512 * 1024)]
        mm_default: usize,
    },
    /// netd's driver process (started by `nagare netd`, not by hand).
    #[command(hide = true)]
    Driver {
        /// The inherited control socket netd started us with.
        #[arg(long)]
        control_fd: i32,
        /// The TAP netd opened (its descriptor comes over the control socket).
        #[arg(long, required_unless_present = "vni")]
        tap: Option<String>,
        /// The TAP was attached with virtio-net headers.
        #[arg(long, requires = "tap")]
        vnet_header: bool,
        /// A VNI segment to attach a port of.
        #[arg(long, conflicts_with = "tap")]
        vni: Option<String>,
        /// The port's Ethernet address (netd's), needed with --vni.
        #[arg(long)]
        mac: Option<EthernetAddress>,
        /// Seeds the impairment (netd's, from its address).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Impair traffic both ways (as netd was asked to).
        #[arg(long)]
        impair: Option<Impairment>,
        /// Microseconds to poll after the last work at least before
        /// sleeping (up to 5 ms while work keeps coming).
        #[arg(long, default_value_t = 50)]
        spin_us: u64,
    },
    /// Download a URL over HTTP/1.1 through nagare on a TAP device or a
    /// VNI port.
    Fetch {
        #[command(flatten)]
        link: OptionalLinkArgs,
        /// Through a running `nagare netd` (its rendezvous socket) instead
        /// of a stack of its own.
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// http://A.B.C.D[:PORT]/PATH, or http://[IPv6][:PORT]/PATH
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
        link: OptionalLinkArgs,
        /// Through a running `nagare netd` (its rendezvous socket) instead
        /// of a stack of its own.
        #[arg(long, conflicts_with_all = ["tap", "vni", "addr"])]
        via: Option<PathBuf>,
        /// Address to ping: IPv4, or IPv6 over a TAP device, a VNI port or
        /// a netd with an IPv6 address (a link-local one needs no zone: a nagare host has one
        /// interface, and `fe80::1%tap0` is taken as `fe80::1`).
        #[arg(value_parser = args::parse_destination)]
        destination: IpAddr,
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
    /// Run a program with its AF_INET and AF_INET6 sockets through a running
    /// netd: the preload library (libnagare_preload.so, beside this binary or
    /// named by NAGARE_PRELOAD) stands in for libc's socket calls; files,
    /// pipes and Unix sockets stay the kernel's.
    Run {
        /// The netd's rendezvous socket (default: NAGARE_NETD, else the
        /// default socket).
        #[arg(long)]
        via: Option<PathBuf>,
        /// A name server for the program's lookups (asked through netd);
        /// repeat for more. Default: those of /etc/resolv.conf.
        #[arg(long)]
        dns: Vec<Ipv4Addr>,
        /// The program.
        program: std::ffi::OsString,
        /// Its arguments (after `--` when they start with a dash).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Speed figures, each beside a Linux kernel peer measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// TCP/UDP throughput and TCP/UDP request/response latency between nagare
    /// and another nagare or the kernel (iperf-like).
    #[command(subcommand)]
    Perf(PerfCommand),
    /// VNI segments: a shared-memory Ethernet between nagare instances on
    /// this machine.
    #[command(subcommand)]
    Vni(VniCommand),
}

#[derive(Subcommand)]
enum VniCommand {
    /// Create a segment: a shared-memory Ethernet of N ports under /dev/shm.
    Create {
        /// Segment name: 1 to 32 of A-Z a-z 0-9 _ -.
        name: String,
        /// Ports (2 to 64); memory grows as the square of this.
        #[arg(long)]
        ports: usize,
        /// IP MTU of the segment (1500, 9000, 65535 or anything from 68).
        #[arg(long, default_value_t = nagare_dev::DEFAULT_MTU)]
        mtu: usize,
        /// Slots per ring (a power of two from 4 to 65536; default: about
        /// 1.5 MiB of slots per ring, at least 256: 1024 at MTU 1500).
        #[arg(long)]
        slots: Option<usize>,
    },
    /// Show a segment: its shape, memory, and who is attached.
    Info { name: String },
    /// Remove a segment (processes attached to it keep their mapping).
    Destroy { name: String },
    /// Join a segment to a TAP device (a two-port learning bridge), so
    /// programs on the kernel's stack reach the instances on the segment.
    Bridge {
        name: String,
        /// TAP device (created if it does not exist; plain frames).
        #[arg(long)]
        tap: String,
        /// MAC of the bridge's VNI port (default: derived from the port).
        #[arg(long)]
        mac: Option<EthernetAddress>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    logger::init(match &cli.command {
        Command::Netd { .. } => "nagare netd",
        Command::Driver { .. } => "nagare driver",
        Command::Perf(_) => "nagare perf",
        Command::Vni(VniCommand::Bridge { .. }) => "nagare vni bridge",
        _ => "nagare",
    });
    match cli.command {
        Command::Demo { pcap, seed, stream } => demo::run(demo::DemoArgs { pcap, seed, stream_datagrams: stream }),
        Command::Up { link, pcap, services } => up::run(&link.spec()?, pcap.as_deref(), &services.config(true)),
        Command::Netd {
            link,
            socket,
            socket_mode,
            socket_group,
            unprivileged_port_start,
            services,
            placement,
            spin_us,
            nice,
            realtime,
            client_memory,
            memory_cap,
            max_orphans,
            tcp_recv_buffer,
            tcp_recv_buffer_max,
            max_connections,
            tap_queue_len,
            packetflow,
            boost_threshold,
            boost,
            boost_time_ms,
            boost_lift,
            mm_default,
        } => {
            let group = match socket_group {
                Some(name) => {
                    Some(nagare_netd::group_id(&name).map_err(|e| anyhow::anyhow!("--socket-group {name}: {e}"))?)
                }
                None => None,
            };
            let ports = unprivileged_port_start.unwrap_or_else(nagare_netd::kernel_unprivileged_port_start);
            let mut builder = NetdBuilder::new(link.spec()?)
                .socket(socket)
                .socket_access(socket_mode, group)
                .unprivileged_port_start(ports)
                .services(services.config(false))
                .client_memory(client_memory)
                .max_orphans(max_orphans)
                .tcp_recv_buffer(tcp_recv_buffer as usize)
                .tcp_recv_buffer_max(tcp_recv_buffer_max as usize)
                .max_connections(max_connections)
                .tap_queue_len(tap_queue_len)
                .packetflow(packetflow)
                .boost(nagare_netd::BoostConfig {
                    threshold: boost_threshold,
                    count: boost,
                    time: Duration::from_millis(boost_time_ms.min(3_600_000)),
                    lift: boost_lift,
                })
                .mm_default(mm_default);
            if let Some(placement) = placement {
                builder = builder.placement(placement);
            }
            if let Some(nice) = nice {
                builder = builder.nice(nice);
            }
            if let Some(priority) = realtime {
                builder = builder.realtime(priority);
            }
            if let Some(cap) = memory_cap {
                builder = builder.memory_cap(usize::try_from(cap).unwrap_or(usize::MAX));
            }
            netd::run(builder.spin(Duration::from_micros(spin_us.min(1_000_000))))
        }
        Command::Driver { control_fd, tap, vnet_header, vni, mac, seed, impair, spin_us } => {
            Ok(run_process(DriverArgs {
                control_fd,
                tap,
                vnet_header,
                vni,
                mac,
                seed,
                impair,
                spin: Duration::from_micros(spin_us.min(1_000_000)),
            })?)
        }
        Command::Fetch { link, via, url, output, timeout } => {
            let timeout = Duration::from_secs(timeout);
            match (via, link.spec()?) {
                (Some(socket), _) => fetch::run_via(&socket, &url, &output, timeout),
                (None, Some(spec)) => fetch::run(&spec, &url, &output, timeout),
                (None, None) => anyhow::bail!("nagare fetch needs --tap or --vni with --addr, or --via SOCKET"),
            }
        }
        Command::Ping { link, via, destination, count, size, interval, timeout, quiet } => {
            let (max, family) = match destination {
                IpAddr::V4(_) => (ping::MAX_PING_SIZE, "IPv4"),
                IpAddr::V6(_) => (ping::MAX_PING6_SIZE, "IPv6"),
            };
            if size > max {
                anyhow::bail!("-s {size}: at most {max} bytes fit in one {family} datagram");
            }
            let options = ping::PingOptions {
                destination,
                count,
                size,
                interval: args::seconds("-i", interval)?,
                timeout: args::seconds("-W", timeout)?,
                quiet,
            };
            let code = match (via, link.spec()?) {
                (Some(socket), _) => ping::run_via(&socket, options)?,
                (None, Some(spec)) => ping::run_link(&spec, options)?,
                (None, None) => ping::run_simulated(link.ipv4()?, options)?,
            };
            std::process::exit(code);
        }
        Command::Stat { via, samples } => stat::run(&via, samples),
        Command::Run { via, dns, program, args } => run::run(via.as_deref(), &dns, &program, &args),
        Command::Perf(command) => command.run(),
        Command::Bench(command) => command.run(),
        Command::Vni(VniCommand::Create { name, ports, mtu, slots }) => vni::create(&name, ports, mtu, slots),
        Command::Vni(VniCommand::Info { name }) => vni::info(&name),
        Command::Vni(VniCommand::Destroy { name }) => vni::destroy(&name),
        Command::Vni(VniCommand::Bridge { name, tap, mac }) => vni::bridge(&name, &tap, mac.map(|m| m.0)),
    }
}
