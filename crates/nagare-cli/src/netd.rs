//! `nagare netd`: the inet server on a TAP device or a VNI port, serving
//! client applications (the `nagare` crate) over shared-memory regions
//! until SIGINT or SIGTERM, with `nagare up`'s services built in if asked.

use crate::realtime;
use crate::services::{ServiceArgs, Services};
use crate::up::{open_link, Link};
use anyhow::{Context, Result};
use nagare_dev::MonotonicClock;
use nagare_netd::{Netd, NetdConfig};
use std::path::PathBuf;

pub fn run(link: Link, socket: PathBuf, built_in: &ServiceArgs) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = open_link(&link, None, &clock)?;
    let mac = host.iface.config().mac;
    let mut services = Services::default();
    let offered = built_in.enable(&mut services, &mut host.iface, false)?;
    let config = NetdConfig { socket: socket.clone(), link: link.describe(), ..NetdConfig::default() };
    let mut netd = Netd::new(host.iface, host.device, clock, config)
        .with_context(|| format!("listening on {}", socket.display()))?;
    println!(
        "nagare netd: {} on {} (mac {mac}); clients at {}; placement single; built in: {}; Ctrl-C stops",
        link.addr(),
        link.describe(),
        socket.display(),
        offered.join(", ")
    );
    netd.run_with(&stop, |iface, now| services.serve(iface, now))?;
    println!("nagare netd: stopping");
    println!("  {:?}", netd.stats());
    for (name, value) in netd.iface().counters().iter().filter(|(_, v)| *v != 0) {
        println!("  {name:<28} {value}");
    }
    println!("  {:?}", services.stats);
    Ok(())
}
