//! `nagare netd`: the inet server on a TAP device or a VNI port, serving
//! client applications (the `nagare` crate) over shared-memory regions
//! until SIGINT or SIGTERM, with `nagare up`'s services built in if asked.

use crate::driver::{launcher, DriverDevice, DriverSpec};
use anyhow::{Context, Result};
use nagare_dev::{MonotonicClock, TapDevice};
use nagare_host::link::{interface_on, open_host};
use nagare_host::{realtime, DeviceSpec, LinkSpec, ServiceConfig, Services};
use nagare_netd::driver::MAX_RX_QUEUES;
use nagare_netd::{DriverLink, Netd, NetdConfig, Placement};
use std::path::PathBuf;

pub fn run(
    link: &LinkSpec,
    socket: PathBuf,
    built_in: &ServiceConfig,
    placement: Placement,
    spin: std::time::Duration,
) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let config = NetdConfig { socket: socket.clone(), link: link.describe(), spin, ..NetdConfig::default() };
    let mut services = Services::default();
    // `_tap`: netd keeps the TAP open (and unread) while it runs.
    let (netd, mac, offered, _tap) = if placement == Placement::Inline {
        let mut host = open_host(link, None, &clock)?;
        let mac = host.iface.config().mac;
        let offered = built_in.enable(&mut services, &mut host.iface)?;
        let netd = Netd::new(host.iface, host.device, clock, config);
        (netd, mac, offered, None)
    } else {
        let (device, tap) = match &link.device {
            DeviceSpec::Tap { name, offload } => {
                // Receive steering needs queues of their own for clients:
                // a multi-queue TAP (not with an impairment, which the
                // driver applies to the first queue only).
                let tap = if link.impair.is_none() {
                    TapDevice::open_multi_queue(name, *offload)
                } else {
                    TapDevice::open_with(name, *offload)
                };
                let tap = tap.with_context(|| format!("opening TAP device {name}"))?;
                if !tap.multi_queue() && link.impair.is_none() {
                    log::warn!(
                        "{name} is a single-queue TAP: received payload is copied once (make it with `ip tuntap add ... multi_queue` to steer)"
                    );
                }
                (DriverDevice::Tap { name: name.clone(), vnet_header: tap.vnet_header() }, Some(tap))
            }
            DeviceSpec::Vni { segment } => (DriverDevice::Vni { segment: segment.clone(), mac: link.mac() }, None),
        };
        let impair = link.impair;
        let spec = DriverSpec { device, impair, addr: link.addr, spin };
        let device_fd = tap.as_ref().map(|t| t.fd().try_clone_to_owned()).transpose()?;
        let mut rx_queues = Vec::new();
        if let Some(t) = tap.as_ref().filter(|t| t.multi_queue()) {
            for _ in 0..MAX_RX_QUEUES {
                rx_queues.push(t.open_queue().context("opening a queue of the TAP")?);
            }
            // The steering program names queues by number: right only if
            // every queue of the TAP is ours (ours then come first, and
            // anyone attaching later comes after them).
            if t.queue_count().ok() != Some(1 + MAX_RX_QUEUES) {
                log::warn!(
                    "another process holds a queue of {}: receive steering is off; received payload is copied once",
                    t.name()
                );
                rx_queues.clear();
            }
        }
        let driver =
            DriverLink::start(launcher(placement, spec)?, device_fd, rx_queues).context("starting the driver")?;
        let mut iface = interface_on(&driver, link, &clock);
        let mac = iface.config().mac;
        let offered = built_in.enable(&mut services, &mut iface)?;
        let pid = driver.pid().unwrap_or(0);
        let netd = Netd::with_driver(iface, driver, placement, clock, config);
        log::info!("driver pid {pid}");
        (netd, mac, offered, tap)
    };
    let mut netd = netd.with_context(|| format!("listening on {}", socket.display()))?;
    println!(
        "nagare netd: {} on {} (mac {mac}); clients at {}; placement {}; built in: {}; Ctrl-C stops",
        link.addr,
        link.describe(),
        socket.display(),
        placement.name(),
        offered.join(", ")
    );
    netd.run_with(&stop, |iface, now| services.serve(iface, now))?;
    println!("nagare netd: stopping");
    println!("  {:?}", netd.stats());
    if let Some(d) = netd.driver_stats() {
        println!("  {d:?}");
    }
    for (name, value) in netd.iface().counters().iter().filter(|(_, v)| *v != 0) {
        println!("  {name:<28} {value}");
    }
    println!("  {:?}", services.stats);
    Ok(())
}
