//! PacketFlow: receive processing that honours the priority of the
//! process a frame is for. netd runs two of its three modules: the filter
//! (`filter`: UDP datagrams dropped before the engine sees them, for
//! receivers of low priority while the receive path is dropping and for
//! sockets whose queue is full) and the scheduler (`scheduler`: clients
//! whose receive buffers fill while better ones wait are boosted); the
//! memory manager is not built. `receivers` maps the engine's UDP sockets
//! to their clients and priorities and publishes the boosts; `drops`
//! measures the receive path's drops per period. `docs/netd.md`, section
//! "PacketFlow", describes them.

mod drops;
mod filter;
mod receivers;
mod scheduler;

pub(crate) use drops::ReceiveDrops;
pub(crate) use filter::Filter;
pub(crate) use receivers::Receivers;
pub use scheduler::{BoostConfig, BoostCount};
pub(crate) use scheduler::{Load, Scheduler};

use std::fmt;
use std::str::FromStr;

/// Which PacketFlow modules netd runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketFlow {
    /// The filter: UDP dropped early for low-priority receivers while the
    /// receive path drops, and for sockets already overflowing.
    pub filter: bool,
    /// The scheduler: clients whose receive buffers fill while better
    /// ones wait are served first and their processes lifted.
    pub scheduler: bool,
}

impl PacketFlow {
    /// Every module built.
    pub const ALL: PacketFlow = PacketFlow { filter: true, scheduler: true };
    /// None: frames reach the engine as they come, clients are served in
    /// turn.
    pub const NONE: PacketFlow = PacketFlow { filter: false, scheduler: false };
}

impl Default for PacketFlow {
    fn default() -> Self {
        PacketFlow::ALL
    }
}

impl FromStr for PacketFlow {
    type Err = String;

    /// A comma-separated list of modules (`filter`, `scheduler`), or
    /// `none`; the memory manager (`mm`) is refused as not built yet.
    fn from_str(s: &str) -> Result<PacketFlow, String> {
        if s == "none" {
            return Ok(PacketFlow::NONE);
        }
        let mut on = PacketFlow::NONE;
        for name in s.split(',') {
            match name {
                "filter" => on.filter = true,
                "scheduler" => on.scheduler = true,
                "mm" => {
                    return Err(format!("{name}: this PacketFlow module is not built yet (built: filter, scheduler)"))
                }
                "none" => return Err(String::from("none: alone, not in a list of modules")),
                _ => return Err(format!("{name:?}: PacketFlow modules are filter, scheduler and mm, or none")),
            }
        }
        Ok(on)
    }
}

impl fmt::Display for PacketFlow {
    /// The modules on, as a list `--packetflow` takes, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<&str> = [(self.filter, "filter"), (self.scheduler, "scheduler")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        if on.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&on.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modules_are_named_in_a_list_or_none() {
        let filter = PacketFlow { filter: true, scheduler: false };
        let scheduler = PacketFlow { filter: false, scheduler: true };
        assert_eq!("filter".parse(), Ok(filter));
        assert_eq!("filter,filter".parse(), Ok(filter));
        assert_eq!("scheduler".parse(), Ok(scheduler));
        assert_eq!("scheduler,filter".parse(), Ok(PacketFlow::ALL));
        assert_eq!("none".parse(), Ok(PacketFlow::NONE));
        assert_eq!(PacketFlow::default(), PacketFlow::ALL);
        for unbuilt in ["mm", "filter,scheduler,mm"] {
            let e = unbuilt.parse::<PacketFlow>().unwrap_err();
            assert!(e.contains("not built yet"), "{unbuilt}: {e}");
        }
        for bad in ["", "filter,", "Filter", "none,filter", "filter,none", "all"] {
            assert!(bad.parse::<PacketFlow>().is_err(), "{bad:?}");
        }
        assert_eq!(PacketFlow::ALL.to_string(), "filter,scheduler");
        assert_eq!(scheduler.to_string(), "scheduler");
        assert_eq!(PacketFlow::NONE.to_string(), "none");
        for p in [PacketFlow::ALL, PacketFlow::NONE, filter, scheduler] {
            assert_eq!(p.to_string().parse(), Ok(p), "{p}");
        }
    }
}
