//! Where a host's frames go: a TAP device or a port of a VNI segment, with
//! its addressing, and the opening of a host on it (with the optional
//! impairment and capture layers around the device).

use crate::host::Host;
use nagare_core::buf::BufferPool;
use nagare_core::ipv6::addr::Ipv6Cidr;
use nagare_core::{Interface, InterfaceConfig, Ipv6Config};
use nagare_dev::vni::{Segment, VniPort};
use nagare_dev::{Device, Impaired, Impairment, MonotonicClock, PcapDevice, PcapWriter, TapDevice};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

/// Buffers for a real device: bursts of a few thousand frames in flight,
/// and the sockets of an inet server's every client (`nagare netd`
/// charges them within seven eighths of it). Made as they are first
/// needed: an instance that never fills it never holds it.
const POOL_BUFFERS: usize = 65536;
/// One Ethernet frame plus the device's headroom fits in a buffer.
const BUFFER_SIZE: usize = 2048;

/// The device a host is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// A TAP device, created if it does not exist.
    Tap {
        /// Its name.
        name: String,
        /// Checksum and TCP segmentation offload, where the kernel allows.
        offload: bool,
    },
    /// A free port of a VNI segment.
    Vni {
        /// The segment's name.
        segment: String,
    },
}

/// A host's link: its device and its addressing.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// The device.
    pub device: DeviceSpec,
    /// IPv4 address and prefix; without one the host speaks no IPv4 on
    /// the link (IPv6 only: it needs an `ipv6` address or a `gateway6`).
    pub addr: Option<Ipv4Cidr>,
    /// IPv6 addresses with their prefixes, beside the link-local one the
    /// engine makes from the MAC and those it forms from routers'
    /// prefixes; empty, with no `gateway6` either: the host does not speak
    /// IPv6.
    pub ipv6: Vec<Ipv6Cidr>,
    /// Default gateway.
    pub gateway: Option<Ipv4Addr>,
    /// Default IPv6 router, tried before those routers advertise.
    pub gateway6: Option<Ipv6Addr>,
    /// Ethernet address; [`default_mac`] of [`LinkSpec::host_id`] if not
    /// given.
    pub mac: Option<EthernetAddress>,
    /// Loss, delay, reordering, duplication or corruption both ways.
    pub impair: Option<Impairment>,
    /// Unproven SYNs per second above which the engine's SYN guard
    /// engages (0: never); `None` keeps the engine's default
    /// (`nagare_core::tcp::syn_guard::DEFAULT_SYN_BUDGET`).
    pub syn_budget: Option<u32>,
}

impl LinkSpec {
    /// The Ethernet address the host uses.
    pub fn mac(&self) -> EthernetAddress {
        self.mac.unwrap_or_else(|| default_mac(self.host_id()))
    }

    /// Four bytes that tell the host from others on its link, the same
    /// every run: its IPv4 address, else the last four bytes of its first
    /// IPv6 one (0 without either). They make the default MAC and seed the
    /// impairment.
    pub fn host_id(&self) -> u32 {
        match (self.addr, self.ipv6.first()) {
            (Some(v4), _) => v4.address().to_bits(),
            (None, Some(v6)) => v6.address().to_bits() as u32,
            (None, None) => 0,
        }
    }

    /// The impairment, unless it does nothing.
    pub fn impairment(&self) -> Option<Impairment> {
        self.impair.filter(|i| !i.is_none())
    }

    /// "tap0" or "VNI seg".
    pub fn describe(&self) -> String {
        match &self.device {
            DeviceSpec::Tap { name, .. } => name.clone(),
            DeviceSpec::Vni { segment } => format!("VNI {segment}"),
        }
    }
}

/// A locally administered unicast address made from a host's
/// [`LinkSpec::host_id`] (its IPv4 address, as 02:6e:0a:00:00:02 for
/// 10.0.0.2), so the same host gets the same MAC every run.
pub fn default_mac(host_id: u32) -> EthernetAddress {
    let [a, b, c, d] = host_id.to_be_bytes();
    EthernetAddress([0x02, 0x6e, a, b, c, d])
}

/// `e` with `what` in front of its message.
pub(crate) fn context(e: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Opens TAP device `name` (creating it if it does not exist).
pub fn open_tap(name: &str, offload: bool) -> io::Result<TapDevice> {
    let tap = TapDevice::open_with(name, offload).map_err(|e| context(e, format_args!("opening TAP device {name}")))?;
    log::info!("{} TAP device {name}", if tap.created() { "created" } else { "attached to" });
    Ok(tap)
}

/// Opens segment `name` and attaches to a free port of it with `mac`.
pub fn open_vni_port(name: &str, mac: EthernetAddress) -> io::Result<VniPort> {
    let seg = Segment::open(name).map_err(|e| context(e, format_args!("opening VNI {name}")))?;
    let port =
        VniPort::attach(Arc::new(seg), Some(mac.0)).map_err(|e| context(e, format_args!("attaching to VNI {name}")))?;
    log::info!("attached to port {} of VNI {name}", port.index());
    Ok(port)
}

/// Opens the link's device, with the impairment and a capture into `pcap`
/// around it if asked.
pub fn open_device(link: &LinkSpec, pcap: Option<&Path>, clock: &MonotonicClock) -> io::Result<Box<dyn Device>> {
    let mut device: Box<dyn Device> = match &link.device {
        DeviceSpec::Tap { name, offload } => Box::new(open_tap(name, *offload)?),
        DeviceSpec::Vni { segment } => Box::new(open_vni_port(segment, link.mac())?),
    };
    if let Some(impairment) = link.impairment() {
        device = Box::new(Impaired::new(device, impairment, u64::from(link.host_id())));
    }
    if let Some(path) = pcap {
        let file = File::create(path).map_err(|e| context(e, format_args!("creating {}", path.display())))?;
        let writer = PcapWriter::new(BufWriter::new(file), clock.unix_epoch_micros())?;
        device = Box::new(PcapDevice::new(device, writer));
    }
    Ok(device)
}

/// Opens the link and builds a host on it.
pub fn open_host(link: &LinkSpec, pcap: Option<&Path>, clock: &MonotonicClock) -> io::Result<Host<Box<dyn Device>>> {
    let device = open_device(link, pcap, clock)?;
    let iface = interface_on(device.as_ref(), link)?;
    Ok(Host::new(iface, device))
}

/// An engine with the link's addressing (IPv4 when the link has an IPv4
/// address, IPv6 when it has an IPv6 address or router), configured for
/// `device` (its MTU and offloads), its keys and seed from the operating
/// system's random source ([`crate::secrets`]). A link with neither is
/// refused.
pub fn interface_on(device: &dyn Device, link: &LinkSpec) -> io::Result<Interface> {
    let ipv6 = (!link.ipv6.is_empty() || link.gateway6.is_some()).then(|| Ipv6Config {
        addresses: link.ipv6.clone(),
        gateway: link.gateway6,
        ..Ipv6Config::default()
    });
    let mut config = match (link.addr, ipv6) {
        (Some(addr), ipv6) => InterfaceConfig { ipv6, ..InterfaceConfig::new(link.mac(), addr) },
        (None, Some(ipv6)) => InterfaceConfig::ipv6_only(link.mac(), ipv6),
        (None, None) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: a link needs an IPv4 or IPv6 address, or an IPv6 router", link.describe()),
            ))
        }
    };
    config.gateway = link.gateway;
    crate::secrets::randomize(&mut config)?;
    let mut iface = Interface::new(config, device.capabilities(), BufferPool::new(BUFFER_SIZE, POOL_BUFFERS));
    if let Some(budget) = link.syn_budget {
        iface.tcp().set_syn_budget(budget);
    }
    Ok(iface)
}
