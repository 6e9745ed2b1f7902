//! `nagare netd`: the inet server on a TAP device or a VNI port, serving
//! client applications (the `nagare` crate) over shared-memory regions
//! until SIGINT or SIGTERM, with `nagare up`'s services built in if asked.

use crate::driver::{launcher, DriverDevice, DriverSpec};
use crate::realtime;
use crate::services::{ServiceArgs, Services};
use crate::up::{default_mac, interface_on, open_link, Link};
use anyhow::{Context, Result};
use nagare_dev::{MonotonicClock, TapDevice};
use nagare_netd::driver::MAX_RX_QUEUES;
use nagare_netd::{DriverLink, Netd, NetdConfig, Placement};
use std::path::PathBuf;

pub fn run(
    link: Link,
    socket: PathBuf,
    built_in: &ServiceArgs,
    placement: Placement,
    spin: std::time::Duration,
) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let config = NetdConfig { socket: socket.clone(), link: link.describe(), spin, ..NetdConfig::default() };
    let mut services = Services::default();
    // `_tap`: netd keeps the TAP open (and unread) while it runs.
    let (netd, mac, offered, _tap) = if placement == Placement::Inline {
        let mut host = open_link(&link, None, &clock)?;
        let mac = host.iface.config().mac;
        let offered = built_in.enable(&mut services, &mut host.iface, false)?;
        let netd = Netd::new(host.iface, host.device, clock, config);
        (netd, mac, offered, None)
    } else {
        let (device, tap, impair, gateway, mac) = match &link {
            Link::Tap(t) => {
                // Receive steering needs queues of their own for clients:
                // a multi-queue TAP (not with an impairment, which the
                // driver applies to the first queue only).
                let tap = if t.impair.is_none() {
                    TapDevice::open_multi_queue(&t.tap, t.offload)
                } else {
                    TapDevice::open_with(&t.tap, t.offload)
                };
                let tap = tap.with_context(|| format!("opening TAP device {}", t.tap))?;
                if !tap.multi_queue() && t.impair.is_none() {
                    eprintln!(
                        "nagare netd: {} is a single-queue TAP: received payload is copied once (make it with `ip tuntap add ... multi_queue` to steer)",
                        t.tap
                    );
                }
                let device = DriverDevice::Tap { name: t.tap.clone(), vnet_header: tap.vnet_header() };
                (device, Some(tap), t.impair, t.gateway, t.mac)
            }
            Link::Vni(v) => {
                let mac = v.mac.unwrap_or_else(|| default_mac(v.addr.address()));
                (DriverDevice::Vni { segment: v.vni.clone(), mac }, None, v.impair, v.gateway, Some(mac))
            }
        };
        let spec = DriverSpec { device, impair, addr: link.addr(), spin };
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
                eprintln!("nagare netd: another process holds a queue of {}: receive steering is off; received payload is copied once", t.name());
                rx_queues.clear();
            }
        }
        let driver =
            DriverLink::start(launcher(placement, spec)?, device_fd, rx_queues).context("starting the driver")?;
        let mut iface = interface_on(&driver, link.addr(), gateway, mac, &clock);
        let mac = iface.config().mac;
        let offered = built_in.enable(&mut services, &mut iface, false)?;
        let pid = driver.pid().unwrap_or(0);
        let netd = Netd::with_driver(iface, driver, placement, clock, config);
        eprintln!("nagare netd: driver pid {pid}");
        (netd, mac, offered, tap)
    };
    let mut netd = netd.with_context(|| format!("listening on {}", socket.display()))?;
    println!(
        "nagare netd: {} on {} (mac {mac}); clients at {}; placement {}; built in: {}; Ctrl-C stops",
        link.addr(),
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
