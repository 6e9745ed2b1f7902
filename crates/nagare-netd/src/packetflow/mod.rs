//! PacketFlow: receive processing that honours the priority of the
//! process a frame is for, in three modules, each of which netd runs or
//! not: the filter (`filter`: UDP datagrams dropped before the engine sees
//! them, for receivers of low priority while the receive path is dropping
//! and for sockets whose queue is full), the scheduler (`scheduler`:
//! clients served in priority order, those whose receive buffers fill
//! boosted)
//! and the memory manager (`mm`: a UDP socket's queue grows while it is
//! full, up to a size its priority sets). `inbound` reads each received
//! frame once (`peek`) for the filter and the memory manager; `pause`
//! leaves the device unread while every frame would only be dropped for a
//! full queue, and `hold` one client's TAP queue while its socket is full;
//! `receivers`
//! maps the engine's UDP sockets to their clients and priorities and
//! publishes the boosts; `drops` measures the receive path's drops per
//! period. `docs/netd.md`, section "PacketFlow", describes them.

mod drops;
mod filter;
mod hold;
mod inbound;
mod mm;
mod pause;
mod peek;
#[cfg(test)]
pub(crate) mod queued;
mod receivers;
mod scheduler;

pub(crate) use drops::ReceiveDrops;
pub(crate) use filter::Filter;
pub(crate) use hold::Holds;
pub(crate) use inbound::Inbound;
pub(crate) use mm::{MemoryManager, DEFAULT_SIZE as MM_DEFAULT};
pub(crate) use pause::Pause;
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
    /// The memory manager: a UDP socket's queue grows while it is full,
    /// up to a size its priority sets.
    pub mm: bool,
    /// The scheduler: clients are served in priority order, and those
    /// whose receive buffers fill are lifted in it, with their processes.
    pub scheduler: bool,
}

impl PacketFlow {
    /// Every module.
    pub const ALL: PacketFlow = PacketFlow { filter: true, mm: true, scheduler: true };
    /// None: frames reach the engine as they come, queues keep their
    /// size, clients are served in turn.
    pub const NONE: PacketFlow = PacketFlow { filter: false, mm: false, scheduler: false };
}

impl Default for PacketFlow {
    fn default() -> Self {
        PacketFlow::ALL
    }
}

impl FromStr for PacketFlow {
    type Err = String;

    /// A comma-separated list of modules (`filter`, `scheduler`, `mm`),
    /// or `none`.
    fn from_str(s: &str) -> Result<PacketFlow, String> {
        if s == "none" {
            return Ok(PacketFlow::NONE);
        }
        let mut on = PacketFlow::NONE;
        for name in s.split(',') {
            match name {
                "filter" => on.filter = true,
                "mm" => on.mm = true,
                "scheduler" => on.scheduler = true,
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
        let on: Vec<&str> = [(self.filter, "filter"), (self.scheduler, "scheduler"), (self.mm, "mm")]
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
        let only = |filter, scheduler, mm| PacketFlow { filter, scheduler, mm };
        assert_eq!("filter,scheduler,mm".parse(), Ok(PacketFlow::ALL));
        assert_eq!("mm,filter,scheduler,filter".parse(), Ok(PacketFlow::ALL));
        assert_eq!("filter".parse(), Ok(only(true, false, false)));
        assert_eq!("scheduler".parse(), Ok(only(false, true, false)));
        assert_eq!("mm".parse(), Ok(only(false, false, true)));
        assert_eq!("filter,scheduler".parse(), Ok(only(true, true, false)));
        assert_eq!("none".parse(), Ok(PacketFlow::NONE));
        assert_eq!(PacketFlow::default(), PacketFlow::ALL);
        for bad in ["", "filter,", "Filter", "none,filter", "filter,none", "all", "sched"] {
            assert!(bad.parse::<PacketFlow>().is_err(), "{bad:?}");
        }
        assert_eq!(PacketFlow::ALL.to_string(), "filter,scheduler,mm");
        assert_eq!(only(false, true, true).to_string(), "scheduler,mm");
        assert_eq!(PacketFlow::NONE.to_string(), "none");
        for a in [false, true] {
            for b in [false, true] {
                for c in [false, true] {
                    let each = only(a, b, c);
                    assert_eq!(each.to_string().parse(), Ok(each), "{each}");
                }
            }
        }
    }
}
