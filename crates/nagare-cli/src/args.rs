//! Arguments several commands share: the link a host is on, and the
//! services it runs.

use anyhow::{bail, Result};
use nagare_dev::Impairment;
use nagare_host::{DeviceSpec, LinkSpec, ServiceConfig};
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// A TAP device or a VNI segment, with the host's addressing.
#[derive(clap::Args, Clone)]
pub struct LinkArgs {
    /// TAP device to use (created if it does not exist).
    #[arg(long, required_unless_present = "vni")]
    tap: Option<String>,
    /// VNI segment to attach to (a free port of it; see `nagare vni create`).
    #[arg(long, conflicts_with = "tap")]
    vni: Option<String>,
    /// Address and prefix, e.g. 10.0.0.2/24.
    #[arg(long)]
    addr: Ipv4Cidr,
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
    /// Address and prefix, e.g. 10.0.0.2/24.
    #[arg(long)]
    pub addr: Option<Ipv4Cidr>,
    /// Plain frames: no checksum or TCP segmentation offload on the TAP.
    #[arg(long)]
    no_offload: bool,
    #[command(flatten)]
    more: LinkExtras,
}

/// What a link may add to its device and address.
#[derive(clap::Args, Clone)]
struct LinkExtras {
    /// Default gateway.
    #[arg(long)]
    gateway: Option<Ipv4Addr>,
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
    fn spec(&self, tap: Option<&String>, vni: Option<&String>, addr: Ipv4Cidr, offload: bool) -> LinkSpec {
        let device = match (tap, vni) {
            (Some(name), _) => DeviceSpec::Tap { name: name.clone(), offload },
            (None, segment) => DeviceSpec::Vni { segment: segment.cloned().unwrap_or_default() },
        };
        LinkSpec {
            device,
            addr,
            gateway: self.gateway,
            mac: self.mac,
            impair: self.impair,
            syn_budget: self.syn_budget,
        }
    }

    fn any(&self) -> bool {
        self.gateway.is_some() || self.mac.is_some() || self.impair.is_some() || self.syn_budget.is_some()
    }
}

impl LinkArgs {
    /// The link asked for.
    pub fn spec(&self) -> LinkSpec {
        self.more.spec(self.tap.as_ref(), self.vni.as_ref(), self.addr, !self.no_offload)
    }
}

impl OptionalLinkArgs {
    /// The TAP or VNI link asked for, if any (with an address).
    pub fn spec(&self) -> Option<LinkSpec> {
        let addr = self.addr?;
        (self.tap.is_some() || self.vni.is_some())
            .then(|| self.more.spec(self.tap.as_ref(), self.vni.as_ref(), addr, !self.no_offload))
    }

    /// An error if link options are given without a device.
    pub fn check_device(&self) -> Result<()> {
        if self.tap.is_none() && self.vni.is_none() && (self.addr.is_some() || self.more.any()) {
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
