//! `nagare up`: a host on a TAP device or a VNI port that answers ping and
//! runs the services asked for until SIGINT or SIGTERM, and says when each
//! of its IPv6 addresses is usable, deprecated, found a duplicate or gone.

use anyhow::Result;
use nagare_core::ipv6::addr::{AddrState, Ipv6Cidr};
use nagare_core::Interface;
use nagare_dev::MonotonicClock;
use nagare_host::{link, realtime, LinkSpec, ServiceConfig};
use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::path::Path;

/// What `nagare up` says of an IPv6 address of its interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// In use.
    Preferred,
    /// Its preferred lifetime ran out: a source only where no other fits.
    Deprecated,
    /// Another node has it; never used.
    Duplicate,
}

/// Prints what changed of the IPv6 addresses of `iface` since the last
/// call (`told` holds what was said).
fn report_ipv6(iface: &Interface, told: &mut HashMap<Ipv6Addr, (Ipv6Cidr, Said)>) {
    let now: Vec<(Ipv6Cidr, Option<Said>)> = iface
        .ipv6_addresses()
        .map(|a| {
            let said = match a.state {
                AddrState::Tentative => None,
                AddrState::Preferred if a.is_deprecated() => Some(Said::Deprecated),
                AddrState::Preferred => Some(Said::Preferred),
                AddrState::Duplicate => Some(Said::Duplicate),
            };
            (a.cidr, said)
        })
        .collect();
    for line in ipv6_news(&now, told) {
        println!("{line}");
    }
}

/// The lines that say what changed, given each address the interface has
/// `now` (with what holds of it; `None` while duplicate address detection
/// runs) and what was said before (`told`, brought up to date): when an
/// address is `preferred` (in use), `deprecated`, `duplicate`, and when it
/// is `removed` (its valid lifetime ran out, or a duplicate gave way to
/// the next identifier).
fn ipv6_news(now: &[(Ipv6Cidr, Option<Said>)], told: &mut HashMap<Ipv6Addr, (Ipv6Cidr, Said)>) -> Vec<String> {
    let mut lines = Vec::new();
    for &(cidr, said) in now {
        let Some(said) = said else { continue };
        if told.get(&cidr.address()).map(|&(_, s)| s) == Some(said) {
            continue;
        }
        lines.push(match said {
            Said::Preferred => format!("nagare up: {cidr} preferred"),
            Said::Deprecated => format!("nagare up: {cidr} deprecated: a source only where no other address fits"),
            Said::Duplicate => format!("nagare up: {cidr} duplicate: another node has it; not used"),
        });
        told.insert(cidr.address(), (cidr, said));
    }
    let mut gone: Vec<Ipv6Cidr> = told
        .values()
        .map(|&(cidr, _)| cidr)
        .filter(|cidr| !now.iter().any(|(c, _)| c.address() == cidr.address()))
        .collect();
    gone.sort_by_key(|c| c.address());
    for cidr in gone {
        told.remove(&cidr.address());
        lines.push(format!("nagare up: {cidr} removed"));
    }
    lines
}

/// Runs the host on `spec`, capturing into `pcap` if given; prints its
/// counters when it stops.
pub fn run(spec: &LinkSpec, pcap: Option<&Path>, services: &ServiceConfig) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = link::open_host(spec, pcap, &clock)?;
    let offered = services.enable(&mut host.services, &mut host.iface)?;
    let v6: Vec<String> = host.iface.ipv6_addresses().map(|a| a.cidr.to_string()).collect();
    let tentative = (!v6.is_empty()).then(|| format!("tentative: {}", v6.join(" ")));
    let addresses = match (spec.addr, tentative) {
        (Some(v4), Some(v6)) => format!("{v4} ({v6})"),
        (Some(v4), None) => v4.to_string(),
        (None, v6) => v6.unwrap_or_default(),
    };
    println!(
        "nagare up: {addresses} on {} (mac {}); {}; Ctrl-C stops",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv6Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn each_change_of_an_address_is_said_once() {
        let (a, b) = (cidr("fd00::2/64"), cidr("2001:db8::5/64"));
        let mut told = HashMap::new();
        assert!(ipv6_news(&[(a, None), (b, None)], &mut told).is_empty(), "tentative: nothing yet");
        let lines = ipv6_news(&[(a, Some(Said::Preferred)), (b, None)], &mut told);
        assert_eq!(lines, ["nagare up: fd00::2/64 preferred"]);
        assert!(ipv6_news(&[(a, Some(Said::Preferred)), (b, None)], &mut told).is_empty(), "said once");
        let lines = ipv6_news(&[(a, Some(Said::Preferred)), (b, Some(Said::Deprecated))], &mut told);
        assert_eq!(lines, ["nagare up: 2001:db8::5/64 deprecated: a source only where no other address fits"]);
        let lines = ipv6_news(&[(a, Some(Said::Preferred))], &mut told);
        assert_eq!(lines, ["nagare up: 2001:db8::5/64 removed"]);
        let lines = ipv6_news(&[(a, Some(Said::Duplicate))], &mut told);
        assert_eq!(lines, ["nagare up: fd00::2/64 duplicate: another node has it; not used"]);
        assert!(ipv6_news(&[(a, Some(Said::Duplicate))], &mut told).is_empty());
    }
}
