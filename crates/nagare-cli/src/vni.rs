//! `nagare vni create|info|destroy`, and opening a VNI port for a host.

use anyhow::{Context, Result};
use clap::Subcommand;
use nagare_dev::vni::layout::{STATE_ATTACHED, STATE_CLAIMING, STATE_FREE};
use nagare_dev::vni::{format_mac, segment_path, segment_size, Segment, VniPort, DEFAULT_SLOTS};
use nagare_dev::DEFAULT_MTU;
use nagare_wire::EthernetAddress;
use std::sync::Arc;

#[derive(Subcommand)]
pub enum VniCommand {
    /// Create a segment: a shared-memory Ethernet of N ports under /dev/shm.
    Create {
        /// Segment name: 1 to 32 of A-Z a-z 0-9 _ -.
        name: String,
        /// Ports (2 to 64); memory grows as the square of this.
        #[arg(long)]
        ports: usize,
        /// IP MTU of the segment (1500, 9000, 65535 or anything from 68).
        #[arg(long, default_value_t = DEFAULT_MTU)]
        mtu: usize,
        /// Slots per ring (a power of two from 4 to 65536).
        #[arg(long, default_value_t = DEFAULT_SLOTS)]
        slots: usize,
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

pub fn run(command: VniCommand) -> Result<()> {
    match command {
        VniCommand::Create { name, ports, mtu, slots } => {
            let seg = Segment::create(&name, ports, mtu, slots)?;
            let geo = seg.geometry();
            println!(
                "nagare vni: created {} ({} ports, MTU {}, {} slots of {} B per ring, {} rings, {})",
                segment_path(&name)?.display(),
                geo.ports,
                geo.mtu,
                geo.slot_count,
                geo.slot_size,
                geo.ring_count(),
                human(geo.total)
            );
            Ok(())
        }
        VniCommand::Info { name } => info(&name),
        VniCommand::Bridge { name, tap, mac } => {
            crate::vni_bridge::run(crate::vni_bridge::BridgeArgs { name, tap, mac: mac.map(|m| m.0) })
        }
        VniCommand::Destroy { name } => {
            nagare_dev::vni::destroy(&name)?;
            println!("nagare vni: destroyed {name}");
            Ok(())
        }
    }
}

fn human(bytes: usize) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.2} MiB", b / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

fn info(name: &str) -> Result<()> {
    let seg = Segment::open(name)?;
    let geo = *seg.geometry();
    println!("segment  {}", segment_path(name)?.display());
    println!("ports    {}", geo.ports);
    println!("mtu      {} (slots of {} B, {} per ring)", geo.mtu, geo.slot_size, geo.slot_count);
    println!("rings    {} (one per ordered pair of ports)", geo.ring_count());
    println!("memory   {} ({} B)", human(geo.total), geo.total);
    let growth: Vec<String> = [2, 4, 8, 16, 32]
        .iter()
        .filter_map(|&n| segment_size(n, geo.mtu, geo.slot_count).ok().map(|s| format!("{n} ports {}", human(s))))
        .collect();
    println!("growth   {} (O(n^2))", growth.join(", "));
    let mut attached = 0;
    println!("port  state      pid       gen  mac                polling  backlog-in");
    for i in 0..geo.ports {
        let Some(p) = seg.port_info(i) else { continue };
        let state = match p.state {
            STATE_FREE => "free",
            STATE_CLAIMING => "claiming",
            STATE_ATTACHED if p.is_live() => {
                attached += 1;
                "attached"
            }
            STATE_ATTACHED => "dead",
            _ => "garbage",
        };
        let backlog: u64 =
            (0..geo.ports).filter(|&j| j != i).filter_map(|j| seg.ring_backlog(j, i)).map(u64::from).sum();
        if p.state == STATE_FREE {
            println!("{i:<5} {state:<10} {:<9} {:<4} {:<18} {:<8} {backlog}", "-", p.generation, "-", "-");
        } else {
            println!(
                "{i:<5} {state:<10} {:<9} {:<4} {:<18} {:<8} {backlog}",
                p.pid,
                p.generation,
                format_mac(p.mac),
                if p.polling { "yes" } else { "no" }
            );
        }
    }
    println!("attached {attached} of {}", geo.ports);
    Ok(())
}

/// Opens segment `name` and attaches to a free port with `mac`.
pub fn open_port(name: &str, mac: EthernetAddress) -> Result<VniPort> {
    let seg = Arc::new(Segment::open(name).with_context(|| format!("opening VNI {name}"))?);
    let port = VniPort::attach(seg, Some(mac.0)).with_context(|| format!("attaching to VNI {name}"))?;
    eprintln!("nagare: attached to port {} of VNI {name}", port.index());
    Ok(port)
}
