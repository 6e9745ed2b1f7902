//! `nagare up`: a host on a TAP device or a VNI port that answers ping and
//! serves UDP echo until it is told to stop.

use crate::host::Host;
use crate::realtime;
use crate::services::ServiceArgs;
use anyhow::{Context, Result};
use nagare_core::buf::BufferPool;
use nagare_core::{Interface, InterfaceConfig};
use nagare_dev::{Device, Impaired, Impairment, MonotonicClock, PcapDevice, PcapWriter, TapDevice};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::fs::File;
use std::io::BufWriter;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// Buffers for a real device: bursts of a few thousand frames in flight.
const POOL_BUFFERS: usize = 16384;
const BUFFER_SIZE: usize = 2048;

pub struct TapLink {
    pub tap: String,
    pub addr: Ipv4Cidr,
    pub gateway: Option<Ipv4Addr>,
    pub mac: Option<EthernetAddress>,
    pub impair: Option<Impairment>,
    /// Checksum and TCP segmentation offload on the TAP, where the kernel
    /// allows.
    pub offload: bool,
}

/// A host on a port of a VNI segment.
pub struct VniLink {
    pub vni: String,
    pub addr: Ipv4Cidr,
    pub gateway: Option<Ipv4Addr>,
    pub mac: Option<EthernetAddress>,
    pub impair: Option<Impairment>,
}

/// Where a host's frames go.
pub enum Link {
    Tap(TapLink),
    Vni(VniLink),
}

impl Link {
    pub fn addr(&self) -> Ipv4Cidr {
        match self {
            Link::Tap(t) => t.addr,
            Link::Vni(v) => v.addr,
        }
    }

    /// "tap0" or "VNI seg".
    pub fn describe(&self) -> String {
        match self {
            Link::Tap(t) => t.tap.clone(),
            Link::Vni(v) => format!("VNI {}", v.vni),
        }
    }
}

pub struct UpArgs {
    pub link: Link,
    pub pcap: Option<PathBuf>,
    pub services: ServiceArgs,
}

/// A locally administered unicast address made from the IP address, so
/// the same host gets the same MAC every run.
pub fn default_mac(ip: Ipv4Addr) -> EthernetAddress {
    let [a, b, c, d] = ip.octets();
    EthernetAddress([0x02, 0x6e, a, b, c, d])
}

/// Opens the TAP device and builds a host on it, with the optional
/// impairment and capture layers around the device.
pub fn open_host(link: &TapLink, pcap: Option<&Path>, clock: &MonotonicClock) -> Result<Host<Box<dyn Device>>> {
    let tap =
        TapDevice::open_with(&link.tap, link.offload).with_context(|| format!("opening TAP device {}", link.tap))?;
    eprintln!("nagare: {} TAP device {}", if tap.created() { "created" } else { "attached to" }, link.tap);
    build_host(Box::new(tap), link.addr, link.gateway, link.mac, link.impair, pcap, clock)
}

/// Opens the link (TAP or VNI) and builds a host on it.
pub fn open_link(link: &Link, pcap: Option<&Path>, clock: &MonotonicClock) -> Result<Host<Box<dyn Device>>> {
    match link {
        Link::Tap(tap) => open_host(tap, pcap, clock),
        Link::Vni(v) => {
            let mac = v.mac.unwrap_or_else(|| default_mac(v.addr.address()));
            let port = crate::vni::open_port(&v.vni, mac)?;
            build_host(Box::new(port), v.addr, v.gateway, Some(mac), v.impair, pcap, clock)
        }
    }
}

/// A host on `device`, with the optional impairment and capture layers.
fn build_host(
    mut device: Box<dyn Device>,
    addr: Ipv4Cidr,
    gateway: Option<Ipv4Addr>,
    mac: Option<EthernetAddress>,
    impair: Option<Impairment>,
    pcap: Option<&Path>,
    clock: &MonotonicClock,
) -> Result<Host<Box<dyn Device>>> {
    if let Some(impairment) = impair.filter(|i| !i.is_none()) {
        device = Box::new(Impaired::new(device, impairment, u64::from(addr.address().to_bits())));
    }
    if let Some(path) = pcap {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let writer = PcapWriter::new(BufWriter::new(file), clock.unix_epoch_micros())?;
        device = Box::new(PcapDevice::new(device, writer));
    }
    let iface = interface_on(device.as_ref(), addr, gateway, mac, clock);
    Ok(Host::new(iface, device))
}

/// An engine configured for `device` (its MTU and offloads).
pub fn interface_on(
    device: &dyn Device,
    addr: Ipv4Cidr,
    gateway: Option<Ipv4Addr>,
    mac: Option<EthernetAddress>,
    clock: &MonotonicClock,
) -> Interface {
    let mac = mac.unwrap_or_else(|| default_mac(addr.address()));
    let mut config = InterfaceConfig::new(mac, addr);
    config.gateway = gateway;
    config.seed = clock.unix_epoch_micros() ^ u64::from(std::process::id());
    Interface::new(config, device.capabilities(), BufferPool::new(BUFFER_SIZE, POOL_BUFFERS))
}

pub fn run(args: UpArgs) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let link = args.link;
    let mut host = open_link(&link, args.pcap.as_deref(), &clock)?;
    let offered = args.services.enable(&mut host.services, &mut host.iface, true)?;
    println!(
        "nagare up: {} on {} (mac {}); {}; Ctrl-C stops",
        link.addr(),
        link.describe(),
        host.iface.config().mac,
        offered.join(", ")
    );
    realtime::run(&mut host, &clock, &stop, |_, _| std::ops::ControlFlow::Continue(None))?;
    println!("nagare up: stopping");
    for (name, value) in host.iface.counters().iter().filter(|(_, v)| *v != 0) {
        println!("  {name:<28} {value}");
    }
    println!("  {:?}", host.services.stats);
    if host.device_errors > 0 {
        println!("  device_errors                {}", host.device_errors);
    }
    Ok(())
}
