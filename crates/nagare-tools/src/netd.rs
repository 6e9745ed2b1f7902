//! `nagare netd`: the inet server on a TAP device or a VNI port, serving
//! client applications (the `nagare` crate) over shared-memory regions
//! until SIGINT or SIGTERM, with `nagare up`'s services built in if asked.

use anyhow::{Context, Result};
use nagare_host::realtime;
use nagare_netd::NetdBuilder;

/// Builds netd as `builder` says, runs it until a signal, prints its
/// counters.
pub fn run(builder: NetdBuilder) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let (socket, link, placement) = builder.describe();
    let built = builder.build().with_context(|| format!("starting netd on {link} at {}", socket.display()))?;
    if let Some(pid) = built.driver_pid {
        log::info!("driver pid {pid}");
    }
    let mut netd = built.netd;
    println!(
        "nagare netd: {} on {link} (mac {}); clients at {}; placement {}; built in: {}; Ctrl-C stops",
        netd.iface().config().addresses.first().map(|a| a.to_string()).unwrap_or_default(),
        netd.iface().config().mac,
        socket.display(),
        placement.name(),
        built.offered.join(", ")
    );
    netd.run(&stop)?;
    println!("nagare netd: stopping");
    println!("  {:?}", netd.stats());
    if let Some(d) = netd.driver_stats() {
        println!("  {d:?}");
    }
    for (name, value) in netd.iface().counters().iter().filter(|(_, v)| *v != 0) {
        println!("  {name:<28} {value}");
    }
    println!("  {:?}", netd.services().stats);
    Ok(())
}
