//! Arguments several commands share: the link a host is on, and the
//! services it runs.

use anyhow::{bail, Result};
use nagare_core::ipv6::addr::Ipv6Cidr;
use nagare_dev::Impairment;
use nagare_host::{DeviceSpec, LinkSpec, ServiceConfig};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::str::FromStr;

/// One `--addr`: an IPv4 or an IPv6 address with its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostAddr {
    /// e.g. 10.0.0.2/24.
    V4(Ipv4Cidr),
    /// e.g. fd00::2/64.
    V6(Ipv6Cidr),
}

impl FromStr for HostAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.contains(':') {
            s.parse().map(HostAddr::V6).map_err(|e| format!("{s}: {e}"))
        } else {
            s.parse()
                .map(HostAddr::V4)
                .map_err(|e| format!("{s}: {e:?}; expected an address and prefix, as 10.0.0.2/24"))
        }
    }
}

/// The addresses of `--addr`, given once or more: the IPv4 one, and the
/// IPv6 ones.
fn split_addrs(addrs: &[HostAddr]) -> Result<(Option<Ipv4Cidr>, Vec<Ipv6Cidr>)> {
    let mut v4 = None;
    let mut v6 = Vec::new();
    for addr in addrs {
        match *addr {
            HostAddr::V4(a) if v4.is_some() => bail!("one IPv4 --addr at most (given {} and {a})", v4.unwrap_or(a)),
            HostAddr::V4(a) => v4 = Some(a),
            HostAddr::V6(a) => v6.push(a),
        }
    }
    Ok((v4, v6))
}

/// The gateways of `--gateway`: one IPv4 and one IPv6 at most.
fn split_gateways(gateways: &[IpAddr]) -> Result<(Option<Ipv4Addr>, Option<Ipv6Addr>)> {
    let (mut v4, mut v6) = (None, None);
    for gateway in gateways {
        match *gateway {
            IpAddr::V4(a) if v4.is_some() => bail!("one IPv4 --gateway at most (given {} and {a})", v4.unwrap_or(a)),
            IpAddr::V4(a) => v4 = Some(a),
            IpAddr::V6(a) if v6.is_some() => bail!("one IPv6 --gateway at most (given {} and {a})", v6.unwrap_or(a)),
            IpAddr::V6(a) => v6 = Some(a),
        }
    }
    Ok((v4, v6))
}

/// The IPv4 address of `--addr`, and the IPv6 ones: one of either family
/// at least (a host without an IPv4 address speaks IPv6 only, one without
/// an IPv6 address IPv4 only).
fn link_addrs(addrs: &[HostAddr]) -> Result<(Option<Ipv4Cidr>, Vec<Ipv6Cidr>)> {
    let (v4, v6) = split_addrs(addrs)?;
    if v4.is_none() && v6.is_empty() {
        bail!("--addr is needed: an IPv4 address (10.0.0.2/24), an IPv6 one (fd00::2/64), or one of each");
    }
    Ok((v4, v6))
}

/// A destination to ping: an IPv4 or IPv6 address; an IPv6 one may carry
/// a zone (`fe80::1%tap0`), which is dropped: a nagare host has one
/// interface.
pub fn parse_destination(s: &str) -> Result<IpAddr, String> {
    let addr = match s.split_once('%') {
        Some((v6, _zone)) if v6.contains(':') => v6,
        _ => s,
    };
    addr.parse().map_err(|e| format!("{s}: {e}"))
}

/// A TAP device or a VNI segment, with the host's addressing.
#[derive(clap::Args, Clone)]
pub struct LinkArgs {
    /// TAP device to use (created if it does not exist).
    #[arg(long, required_unless_present = "vni")]
    tap: Option<String>,
    /// VNI segment to attach to (a free port of it; see `nagare vni create`).
    #[arg(long, conflicts_with = "tap")]
    vni: Option<String>,
    /// Address and prefix: IPv4 (10.0.0.2/24), IPv6 (fd00::2/64), or
    /// both, repeating --addr (one IPv4 address at most, IPv6 ones as
    /// many as wanted). The host speaks the families it has an address of.
    #[arg(long, required = true, value_name = "CIDR")]
    addr: Vec<HostAddr>,
    /// Plain frames: no checksum or TCP segmentation offload on the TAP.
    #[arg(long, conflicts_with = "vni")]
    no_offload: bool,
    #[command(flatten)]
    more: LinkExtras,
}

/// The same, all optional: without `--tap` or `--vni` the command uses
/// another stack (the kernel's, or a simulated peer).
#[derive(clap::Args, Clone)]
pub struct OptionalLinkArgs {
    /// TAP device to use (created if it does not exist).
    #[arg(long, requires = "addr")]
    pub tap: Option<String>,
    /// VNI segment to attach to, instead of a TAP device.
    #[arg(long, requires = "addr", conflicts_with = "tap")]
    pub vni: Option<String>,
    /// Address and prefix: IPv4 (10.0.0.2/24), IPv6 (fd00::2/64), or
    /// both, repeating --addr (one IPv4 address at most). The host speaks
    /// the families it has an address of.
    #[arg(long, value_name = "CIDR")]
    addr: Vec<HostAddr>,
    /// Plain frames: no checksum or TCP segmentation offload on the TAP.
    #[arg(long)]
    no_offload: bool,
    #[command(flatten)]
    more: LinkExtras,
}

/// What a link may add to its device and address.
#[derive(clap::Args, Clone)]
struct LinkExtras {
    /// Default gateway: an IPv4 address (with an IPv4 --addr), an IPv6 one
    /// (a router on the link, tried before those that advertise
    /// themselves), or one of each: repeat --gateway.
    #[arg(long, value_name = "ADDR")]
    gateway: Vec<IpAddr>,
    /// Ethernet address (default: derived from the IP address).
    #[arg(long)]
    mac: Option<EthernetAddress>,
    /// Impair traffic both ways, e.g. loss=3%,delay=2ms,reorder=10%,dup=1%,corrupt=0.1%.
    #[arg(long)]
    impair: Option<Impairment>,
    /// SYNs per second from peers without a completed handshake, to a full
    /// SYN queue, above which the SYN guard engages (0: never; default 10000).
    #[arg(long)]
    syn_budget: Option<u32>,
}

impl LinkExtras {
    fn spec(
        &self,
        tap: Option<&String>,
        vni: Option<&String>,
        (addr, ipv6): (Option<Ipv4Cidr>, Vec<Ipv6Cidr>),
        offload: bool,
    ) -> Result<LinkSpec> {
        let device = match (tap, vni) {
            (Some(name), _) => DeviceSpec::Tap { name: name.clone(), offload },
            (None, segment) => DeviceSpec::Vni { segment: segment.cloned().unwrap_or_default() },
        };
        let (gateway, gateway6) = split_gateways(&self.gateway)?;
        if let (Some(gateway), None) = (gateway, addr) {
            bail!("--gateway {gateway} needs an IPv4 --addr: without one the host speaks no IPv4");
        }
        Ok(LinkSpec {
            device,
            addr,
            ipv6,
            gateway,
            gateway6,
            mac: self.mac,
            impair: self.impair,
            syn_budget: self.syn_budget,
        })
    }

    fn any(&self) -> bool {
        !self.gateway.is_empty() || self.mac.is_some() || self.impair.is_some() || self.syn_budget.is_some()
    }
}

impl LinkArgs {
    /// The link asked for.
    pub fn spec(&self) -> Result<LinkSpec> {
        let addrs = link_addrs(&self.addr)?;
        self.more.spec(self.tap.as_ref(), self.vni.as_ref(), addrs, !self.no_offload)
    }
}

impl OptionalLinkArgs {
    /// The TAP or VNI link asked for, if any (with an address).
    pub fn spec(&self) -> Result<Option<LinkSpec>> {
        if self.addr.is_empty() || (self.tap.is_none() && self.vni.is_none()) {
            return Ok(None);
        }
        let addrs = link_addrs(&self.addr)?;
        self.more.spec(self.tap.as_ref(), self.vni.as_ref(), addrs, !self.no_offload).map(Some)
    }

    /// The IPv4 `--addr`, if given.
    pub fn ipv4(&self) -> Result<Option<Ipv4Cidr>> {
        Ok(split_addrs(&self.addr)?.0)
    }

    /// An error if link options are given without a device.
    pub fn check_device(&self) -> Result<()> {
        if self.tap.is_none() && self.vni.is_none() && (!self.addr.is_empty() || self.more.any()) {
            bail!(
                "--addr, --gateway, --mac, --impair and --syn-budget need --tap or --vni (without them the kernel's stack is used)"
            );
        }
        Ok(())
    }
}

/// The services of `nagare up` and `nagare netd`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ServiceArgs {
    /// TCP and UDP echo on port 7.
    #[arg(long)]
    echo: bool,
    /// TCP and UDP discard on port 9.
    #[arg(long)]
    discard: bool,
    /// Serve the files under DIR over HTTP/1.1 on port 80.
    #[arg(long, value_name = "DIR")]
    http: Option<PathBuf>,
}

impl ServiceArgs {
    /// The services, with UDP echo on port 7 even without `--echo` if
    /// `udp_echo`.
    pub fn config(&self, udp_echo: bool) -> ServiceConfig {
        ServiceConfig { echo: self.echo, discard: self.discard, http: self.http.clone(), udp_echo }
    }
}

/// Permission bits in octal (`660`, `0666`, `0o666`).
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 => Ok(mode),
        _ => Err(format!("{s}: permission bits are up to three octal digits, e.g. 660 or 666")),
    }
}

/// `split`, `single` or `inline`.
pub fn parse_placement(s: &str) -> Result<nagare_netd::Placement, String> {
    use nagare_netd::Placement;
    match s {
        "split" => Ok(Placement::Split),
        "single" => Ok(Placement::Single),
        "inline" => Ok(Placement::Inline),
        _ => Err(format!("{s}: placement is split, single or inline")),
    }
}

/// A list of PacketFlow modules (`filter`, `scheduler`, `mm`), or `none`.
pub fn parse_packetflow(s: &str) -> Result<nagare_netd::PacketFlow, String> {
    s.parse()
}

/// A number of seconds as a duration, or a clear error naming the option.
pub fn seconds(option: &str, value: f64) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("{option} must be a number of seconds from 0 to about 1.8e19, not {value}"))
}
