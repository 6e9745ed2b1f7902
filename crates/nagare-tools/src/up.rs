//! `nagare up`: a host on a TAP device or a VNI port that answers ping and
//! runs the services asked for until SIGINT or SIGTERM.

use anyhow::Result;
use nagare_dev::MonotonicClock;
use nagare_host::{link, realtime, LinkSpec, ServiceConfig};
use std::path::Path;

/// Runs the host on `spec`, capturing into `pcap` if given; prints its
/// counters when it stops.
pub fn run(spec: &LinkSpec, pcap: Option<&Path>, services: &ServiceConfig) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = link::open_host(spec, pcap, &clock)?;
    let offered = services.enable(&mut host.services, &mut host.iface)?;
    println!(
        "nagare up: {} on {} (mac {}); {}; Ctrl-C stops",
        spec.addr,
        spec.describe(),
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
