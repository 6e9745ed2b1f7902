//! `nagare netd`: the inet server on a TAP device or a VNI port, serving
//! client applications (the `nagare` crate) over shared-memory regions
//! until SIGINT or SIGTERM, with `nagare up`'s services built in if asked.

use crate::realtime;
use crate::services::{Services, DISCARD_PORT, ECHO_PORT, HTTP_PORT};
use crate::up::{open_link, Link};
use anyhow::{bail, Context, Result};
use nagare_dev::MonotonicClock;
use nagare_netd::{Netd, NetdConfig};
use std::path::PathBuf;

/// Services the inet server runs itself, beside its clients.
pub struct BuiltIn {
    pub echo: bool,
    pub discard: bool,
    pub http: Option<PathBuf>,
}

pub fn run(link: Link, socket: PathBuf, built_in: BuiltIn) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = open_link(&link, None, &clock)?;
    let mac = host.iface.config().mac;
    let mut services = Services::default();
    let mut offered = vec!["ping".to_string()];
    if built_in.echo {
        services.enable_echo(&mut host.iface).map_err(anyhow::Error::msg)?;
        offered.push(format!("TCP+UDP echo on {ECHO_PORT}"));
    }
    if built_in.discard {
        services.enable_discard(&mut host.iface).map_err(anyhow::Error::msg)?;
        offered.push(format!("TCP+UDP discard on {DISCARD_PORT}"));
    }
    if let Some(root) = built_in.http {
        if !root.is_dir() {
            bail!("--http {}: not a directory", root.display());
        }
        offered.push(format!("HTTP on {HTTP_PORT} from {}", root.display()));
        services.enable_http(&mut host.iface, root).map_err(anyhow::Error::msg)?;
    }
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
