//! PacketFlow: receive processing that honours the priority of the
//! process a frame is for. Of its three modules netd runs the filter
//! (`filter`: UDP datagrams dropped before the engine sees them, for
//! receivers of low priority while the receive path is dropping and for
//! sockets whose queue is full) and the memory manager (`mm`: a UDP
//! socket's queue grows while it is full, up to a size its priority
//! sets); the scheduler is not built. `inbound` reads each received frame
//! once (`peek`) for the modules that are on; `receivers` maps the
//! engine's UDP sockets to their clients and priorities; `drops` measures
//! the receive path's drops per period. `docs/netd.md`, sections
//! "PacketFlow filter" and "PacketFlow memory manager", describe them.

mod drops;
mod filter;
mod inbound;
mod mm;
mod peek;
mod receivers;

pub(crate) use drops::ReceiveDrops;
pub(crate) use filter::Filter;
pub(crate) use inbound::Inbound;
pub(crate) use mm::{MemoryManager, DEFAULT_SIZE as MM_DEFAULT};
pub(crate) use receivers::Receivers;

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
}

impl PacketFlow {
    /// Every module built.
    pub const ALL: PacketFlow = PacketFlow { filter: true, mm: true };
    /// None: frames reach the engine as they come.
    pub const NONE: PacketFlow = PacketFlow { filter: false, mm: false };
}

impl Default for PacketFlow {
    fn default() -> Self {
        PacketFlow::ALL
    }
}

impl FromStr for PacketFlow {
    type Err = String;

    /// A comma-separated list of modules (`filter`, `mm`), or `none`; the
    /// scheduler (`scheduler`) is refused as not built yet.
    fn from_str(s: &str) -> Result<PacketFlow, String> {
        if s == "none" {
            return Ok(PacketFlow::NONE);
        }
        let mut on = PacketFlow::NONE;
        for name in s.split(',') {
            match name {
                "filter" => on.filter = true,
                "mm" => on.mm = true,
                "scheduler" => {
                    return Err(format!("{name}: this PacketFlow module is not built yet (built: filter, mm)"))
                }
                "none" => return Err(String::from("none: alone, not in a list of modules")),
                _ => return Err(format!("{name:?}: PacketFlow modules are filter, scheduler and mm, or none")),
            }
        }
        Ok(on)
    }
}

impl fmt::Display for PacketFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        for (on, name) in [(self.filter, "filter"), (self.mm, "mm")] {
            if on {
                f.write_str(sep)?;
                f.write_str(name)?;
                sep = ",";
            }
        }
        if sep.is_empty() {
            f.write_str("none")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modules_are_named_in_a_list_or_none() {
        assert_eq!("filter,mm".parse(), Ok(PacketFlow::ALL));
        assert_eq!("mm,filter,filter".parse(), Ok(PacketFlow::ALL));
        assert_eq!("filter".parse(), Ok(PacketFlow { mm: false, ..PacketFlow::ALL }));
        assert_eq!("mm".parse(), Ok(PacketFlow { filter: false, ..PacketFlow::ALL }));
        assert_eq!("none".parse(), Ok(PacketFlow::NONE));
        assert_eq!(PacketFlow::default(), PacketFlow::ALL);
        for unbuilt in ["scheduler", "filter,scheduler,mm"] {
            let e = unbuilt.parse::<PacketFlow>().unwrap_err();
            assert!(e.contains("not built yet"), "{unbuilt}: {e}");
        }
        for bad in ["", "filter,", "Filter", "none,filter", "filter,none", "all"] {
            assert!(bad.parse::<PacketFlow>().is_err(), "{bad:?}");
        }
        assert_eq!(PacketFlow::ALL.to_string(), "filter,mm");
        assert_eq!(PacketFlow { filter: false, ..PacketFlow::ALL }.to_string(), "mm");
        assert_eq!(PacketFlow::NONE.to_string(), "none");
        for each in [PacketFlow::ALL, PacketFlow::NONE, PacketFlow { mm: false, ..PacketFlow::ALL }] {
            assert_eq!(each.to_string().parse(), Ok(each), "{each}");
        }
    }
}
