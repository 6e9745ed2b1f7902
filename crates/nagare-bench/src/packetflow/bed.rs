//! The bench's network and the stacks measured on it. Namespace N holds
//! `nagare netd --tap tap0 --addr 10.97.0.2/24` (one netd per module set,
//! started and stopped column by column; netd makes the TAP) and, on the
//! TAP's kernel side (10.97.0.1/24), the kernel senders; the receivers are
//! `nagare perf server --via` processes at their nice values. Namespaces
//! B and C are the Linux peer: a veth pair, the same senders in B
//! (10.97.1.1/24), kernel `nagare perf server`s at the same nice values in
//! C (10.97.1.2/24). Everything is removed however the bench ends.
//!
//! With a sender CPU ([`Cpus`]), the senders run on that CPU alone and
//! everything else on the others: the bench itself, so every netd and
//! receiver it starts, and Linux's receive processing, which the veth in C
//! hands to the other CPUs by RPS (over veth it would otherwise run in the
//! sender's system call). The senders then stand in for other machines, as
//! in the paper's testbed, instead of taking the receiving side's CPU. So
//! that one CPU can offer several times what the receiving side takes,
//! its UDP senders send [`SENDER_BATCH`] datagrams per system call (the
//! kernel's UDP segmentation offload cuts them).

use super::procs::{interrupted, Proc};
use crate::netns::{Namespace, NetdProcess};
use anyhow::{bail, Context, Result};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const TAP: &str = "tap0";
const NETD_ADDR: &str = "10.97.0.2/24";
const NETD_IP: Ipv4Addr = Ipv4Addr::new(10, 97, 0, 2);
const TAP_KERNEL_SIDE: &str = "10.97.0.1/24";
const LINUX_SENDER: &str = "10.97.1.1/24";
const LINUX_RECEIVER: &str = "10.97.1.2/24";
const LINUX_RECEIVER_IP: Ipv4Addr = Ipv4Addr::new(10, 97, 1, 2);

/// Datagrams per send call of a UDP sender on a CPU of its own.
pub const SENDER_BATCH: usize = 64;

/// What a column measures: a netd with a PacketFlow module set (as given
/// to `--packetflow`; none: netd's default), or Linux.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stack {
    Netd(Option<String>),
    Linux,
}

impl Stack {
    pub fn netd(set: &str) -> Stack {
        Stack::Netd(Some(set.to_string()))
    }

    /// The column's name in tables and CSV files.
    pub fn label(&self) -> String {
        match self {
            Stack::Netd(Some(set)) => set.clone(),
            Stack::Netd(None) => "default".to_string(),
            Stack::Linux => "Linux".to_string(),
        }
    }
}

/// Why a column has no figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Down {
    /// netd refused its module set (or would not start with it).
    NotAvailable(String),
    /// Something else failed.
    Failed(String),
}

impl fmt::Display for Down {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Down::NotAvailable(why) => write!(f, "not available: {why}"),
            Down::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// The bench's folder for the processes' output, removed at the end.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Which CPUs the senders and the receiving side run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cpus {
    /// Every process on every CPU.
    Shared,
    /// The senders on `sender`, everything else on `receiving`.
    Split { sender: usize, receiving: Vec<usize> },
}

impl fmt::Display for Cpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cpus::Shared => f.write_str("senders and receivers share them"),
            Cpus::Split { sender, receiving } => {
                let rest: Vec<String> = receiving.iter().map(usize::to_string).collect();
                write!(f, "senders on CPU {sender}, netd, receivers and Linux's receive path on {}", rest.join(","))
            }
        }
    }
}

impl Cpus {
    /// The senders on `sender`, the rest of this process's CPUs for the
    /// receiving side, which this thread (and so every process it starts
    /// afterwards) moves to.
    fn split(sender: usize) -> Result<Cpus> {
        // SAFETY: a zeroed cpu_set_t is an empty set; the calls get its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `set` is a cpu_set_t of `size` bytes.
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
            bail!("sched_getaffinity: {}", std::io::Error::last_os_error());
        }
        // SAFETY: CPU_ISSET reads the set within its size.
        let allowed: Vec<usize> =
            (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
        if !allowed.contains(&sender) {
            bail!("--sender-cpu {sender}: this process may run on CPUs {allowed:?}");
        }
        let receiving: Vec<usize> = allowed.into_iter().filter(|&c| c != sender).collect();
        if receiving.is_empty() {
            bail!("--sender-cpu {sender}: no other CPU is left for the receiving side");
        }
        set_affinity(&receiving)?;
        Ok(Cpus::Split { sender, receiving })
    }

    /// The receiving CPUs as an RPS mask (hexadecimal, CPUs below 64).
    fn rps_mask(receiving: &[usize]) -> String {
        let mask = receiving.iter().filter(|&&c| c < 64).fold(0u64, |m, &c| m | 1 << c);
        format!("{mask:x}")
    }
}

/// Moves the calling thread to `cpus`.
fn set_affinity(cpus: &[usize]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET writes within the set; `c` is below CPU_SETSIZE
        // (it came from CPU_ISSET's range or was checked against it).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a cpu_set_t of the size given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        bail!("sched_setaffinity {cpus:?}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// The namespaces, the veth pair, the work folder.
pub struct Bed {
    n: Namespace,
    b: Namespace,
    c: Namespace,
    work: WorkDir,
    exe: PathBuf,
    netd_args: Vec<String>,
    /// Module sets netd refused, and what it said.
    refused: RefCell<HashMap<String, String>>,
    started: Cell<u32>,
    cpus: Cpus,
    /// The TCP senders' nice value, if set.
    tcp_sender_nice: Option<i32>,
    /// Microseconds of CPU time each receiver spends on a datagram.
    receiver_work_us: u64,
}

impl Bed {
    /// Makes the namespaces and the veth pair; `netd_args` go to every
    /// netd; with `sender_cpu`, the senders run on it alone ([`Cpus`]);
    /// with `tcp_sender_nice`, TCP senders run at that nice value (ahead
    /// of the UDP senders on their CPU, as a sender on a machine of its
    /// own would be); each receiver spends `receiver_work_us` of CPU time
    /// on a datagram. Needs root.
    pub fn create(
        netd_args: Vec<String>,
        sender_cpu: Option<usize>,
        tcp_sender_nice: Option<i32>,
        receiver_work_us: u64,
    ) -> Result<Bed> {
        let cpus = match sender_cpu {
            Some(cpu) => Cpus::split(cpu)?,
            None => Cpus::Shared,
        };
        let pid = std::process::id();
        let work = std::env::temp_dir().join(format!("nagare-bench-packetflow-{pid}"));
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let work = WorkDir(work);
        let n = Namespace::create(format!("nagare-pf-{pid}-n"))?;
        let b = Namespace::create(format!("nagare-pf-{pid}-b"))?;
        let c = Namespace::create(format!("nagare-pf-{pid}-c"))?;
        let (vb, vc) = (format!("pf{pid}b"), format!("pf{pid}c"));
        let out = Command::new("ip")
            .args(["link", "add", &vb, "netns", &b.0, "type", "veth", "peer", "name", &vc, "netns", &c.0])
            .stdin(Stdio::null())
            .output()
            .context("running ip")?;
        if !out.status.success() {
            bail!("ip link add (veth): {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        b.ip(&["addr", "add", LINUX_SENDER, "dev", &vb])?;
        c.ip(&["addr", "add", LINUX_RECEIVER, "dev", &vc])?;
        b.ip(&["link", "set", &vb, "up"])?;
        c.ip(&["link", "set", &vc, "up"])?;
        if let Cpus::Split { receiving, .. } = &cpus {
            let path = format!("/sys/class/net/{vc}/queues/rx-0/rps_cpus");
            let out = Command::new("ip")
                .args(["netns", "exec", &c.0, "sh", "-c", &format!("echo {} > {path}", Cpus::rps_mask(receiving))])
                .stdin(Stdio::null())
                .output()
                .context("running ip")?;
            if !out.status.success() {
                bail!("setting RPS on {vc}: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
        }
        let exe = std::env::current_exe()?;
        let (refused, started) = (RefCell::default(), Cell::new(0));
        Ok(Bed { n, b, c, work, exe, netd_args, refused, started, cpus, tcp_sender_nice, receiver_work_us })
    }

    /// Where the senders and the receiving side run.
    pub fn cpus(&self) -> &Cpus {
        &self.cpus
    }

    /// A name for a helper's output files, new each time.
    fn name(&self, what: &str) -> String {
        let i = self.started.get();
        self.started.set(i + 1);
        format!("{i:04}-{what}")
    }

    /// Brings `stack` up with one receiver per `(port, nice)`, each
    /// waited for until it listens.
    pub fn column(&self, stack: &Stack, receivers: &[(u16, i32)]) -> Result<Column<'_>, Down> {
        if interrupted() {
            return Err(Down::Failed("interrupted".into()));
        }
        let netd = match stack {
            Stack::Netd(set) => Some(self.start_netd(set.as_deref())?),
            Stack::Linux => None,
        };
        let mut column = Column { receivers: Vec::new(), netd, bed: self, stack: stack.clone() };
        for &(port, nice) in receivers {
            let p = column.start_receiver(port, nice).map_err(|e| Down::Failed(format!("{e:#}")))?;
            column.receivers.push(p);
        }
        Ok(column)
    }

    fn start_netd(&self, set: Option<&str>) -> Result<NetdProcess, Down> {
        if let Some(why) = set.and_then(|s| self.refused.borrow().get(s).cloned()) {
            return Err(Down::NotAvailable(why));
        }
        let mut extra: Vec<&str> = Vec::new();
        if let Some(set) = set {
            extra.extend(["--packetflow", set]);
        }
        extra.extend(self.netd_args.iter().map(String::as_str));
        let netd = match self.n.start_netd(TAP, NETD_ADDR, &extra, "bench-packetflow") {
            Ok(netd) => netd,
            Err(e) => {
                let why = format!("{e:#}");
                if let Some(set) = set {
                    self.refused.borrow_mut().insert(set.to_string(), why.clone());
                }
                return Err(Down::NotAvailable(why));
            }
        };
        let link = (|| {
            self.n.ip(&["addr", "replace", TAP_KERNEL_SIDE, "dev", TAP])?;
            self.n.ip(&["link", "set", TAP, "up"])
        })();
        link.map_err(|e| Down::Failed(format!("the TAP's kernel side: {e:#}")))?;
        Ok(netd)
    }
}

/// A stack up, with its receivers; dropped, the receivers stop, then
/// netd.
pub struct Column<'a> {
    receivers: Vec<Proc>,
    netd: Option<NetdProcess>,
    bed: &'a Bed,
    stack: Stack,
}

impl Column<'_> {
    fn start_receiver(&self, port: u16, nice: i32) -> Result<Proc> {
        let bed = self.bed;
        let mut args: Vec<String> = Vec::new();
        let exe = bed.exe.display().to_string();
        // netd's receivers need no namespace (the socket is a file); the
        // Linux peer's are in C.
        let program = match &self.netd {
            Some(netd) => {
                args.extend(["-n".into(), nice.to_string(), exe]);
                args.extend(["perf".into(), "server".into(), "--via".into(), netd.socket.display().to_string()]);
                "nice"
            }
            None => {
                args.extend(["netns".into(), "exec".into(), bed.c.0.clone(), "nice".into(), "-n".into()]);
                args.extend([nice.to_string(), exe, "perf".into(), "server".into()]);
                "ip"
            }
        };
        args.extend(["--port".into(), port.to_string()]);
        if bed.receiver_work_us > 0 {
            args.extend(["--work-us".into(), bed.receiver_work_us.to_string()]);
        }
        let name = bed.name(&format!("{}-server-{port}", self.stack.label().replace(',', "+")));
        let mut p = Proc::spawn(&bed.work.0, &name, std::path::Path::new(program), &args)?;
        p.wait_for_output("listening", Duration::from_secs(10))?;
        Ok(p)
    }

    /// Starts `nagare perf client` to the receiver on `port` from this
    /// stack's sending side, with `args` after the address and port.
    pub fn sender(&self, port: u16, args: &[String]) -> Result<Proc> {
        let bed = self.bed;
        let (ns, server) = match self.stack {
            Stack::Netd(_) => (&bed.n, NETD_IP),
            Stack::Linux => (&bed.b, LINUX_RECEIVER_IP),
        };
        let cpu = match bed.cpus {
            Cpus::Split { sender, .. } => Some(sender),
            Cpus::Shared => None,
        };
        let mut all: Vec<String> = vec!["netns".into(), "exec".into(), ns.0.clone()];
        if let Some(nice) = bed.tcp_sender_nice.filter(|_| args.iter().any(|a| a == "--tcp")) {
            all.extend(["nice".into(), "-n".into(), nice.to_string()]);
        }
        all.push(bed.exe.display().to_string());
        all.extend(["perf".into(), "client".into(), server.to_string(), "--port".into(), port.to_string()]);
        all.extend(args.iter().cloned());
        let name = bed.name(&format!("{}-client-{port}", self.stack.label().replace(',', "+")));
        if cpu.is_some() && args.iter().any(|a| a == "--udp") {
            all.extend(["--udp-batch".into(), SENDER_BATCH.to_string()]);
        }
        Proc::spawn_on(&bed.work.0, &name, std::path::Path::new("ip"), &all, cpu)
    }
}

impl Drop for Column<'_> {
    fn drop(&mut self) {
        super::procs::stop_all(&mut self.receivers);
        self.netd.take();
    }
}
