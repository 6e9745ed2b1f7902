//! `nagare netd`: the inet server on a TAP device or a VNI port, serving
//! client applications (the `nagare` crate) over shared-memory regions
//! until SIGINT or SIGTERM.

use crate::realtime;
use crate::up::{open_link, Link};
use anyhow::{Context, Result};
use nagare_dev::MonotonicClock;
use nagare_netd::{Netd, NetdConfig};
use std::path::PathBuf;

pub fn run(link: Link, socket: PathBuf) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let host = open_link(&link, None, &clock)?;
    let mac = host.iface.config().mac;
    let config = NetdConfig { socket: socket.clone(), ..NetdConfig::default() };
    let mut netd = Netd::new(host.iface, host.device, clock, config)
        .with_context(|| format!("listening on {}", socket.display()))?;
    println!(
        "nagare netd: {} on {} (mac {mac}); clients at {}; placement single; Ctrl-C stops",
        link.addr(),
        link.describe(),
        socket.display()
    );
    netd.run(&stop)?;
    println!("nagare netd: stopping");
    println!("  {:?}", netd.stats());
    for (name, value) in netd.iface().counters().iter().filter(|(_, v)| *v != 0) {
        println!("  {name:<28} {value}");
    }
    Ok(())
}
