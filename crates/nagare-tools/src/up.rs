//! `nagare up`: a host on a TAP device or a VNI port that answers ping and
//! runs the services asked for until SIGINT or SIGTERM, and says when each
//! of its IPv6 addresses is usable (or found a duplicate).

use anyhow::Result;
use nagare_core::ipv6::addr::AddrState;
use nagare_core::Interface;
use nagare_dev::MonotonicClock;
use nagare_host::{link, realtime, LinkSpec, ServiceConfig};
use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::path::Path;

/// Prints each IPv6 address of `iface` whose duplicate address detection
/// ended since the last call: `preferred` (in use) or `duplicate` (another
/// node has it; never used). `told` holds what was printed.
fn report_ipv6(iface: &Interface, told: &mut HashMap<Ipv6Addr, AddrState>) {
    for a in iface.ipv6_addresses() {
        if told.get(&a.address()) == Some(&a.state) {
            continue;
        }
        match a.state {
            AddrState::Tentative => continue,
            AddrState::Preferred => println!("nagare up: {} preferred", a.cidr),
            AddrState::Duplicate => println!("nagare up: {} duplicate: another node has it; not used", a.cidr),
        }
        told.insert(a.address(), a.state);
    }
}

/// Runs the host on `spec`, capturing into `pcap` if given; prints its
/// counters when it stops.
pub fn run(spec: &LinkSpec, pcap: Option<&Path>, services: &ServiceConfig) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = link::open_host(spec, pcap, &clock)?;
    let offered = services.enable(&mut host.services, &mut host.iface)?;
    let v6: Vec<String> = host.iface.ipv6_addresses().map(|a| format!(" {}", a.cidr)).collect();
    let tentative = if v6.is_empty() { String::new() } else { format!(" (tentative:{})", v6.concat()) };
    println!(
        "nagare up: {}{tentative} on {} (mac {}); {}; Ctrl-C stops",
        spec.addr,
        spec.describe(),
        host.iface.config().mac,
        offered.join(", ")
    );
    let mut told = HashMap::new();
    realtime::run(&mut host, &clock, &stop, |host, _| {
        report_ipv6(&host.iface, &mut told);
        std::ops::ControlFlow::Continue(None)
    })?;
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
