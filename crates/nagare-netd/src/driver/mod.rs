//! The driver: the device's half of the stack, a process of its own
//! beside netd (split placement) or a thread of netd (single placement),
//! sharing a region with netd.
//!
//! - [`messages`]: what netd and the driver say to each other: the driver
//!   region's descriptors and the control socket's messages.
//! - [`run`]: the driver itself ([`serve`]).
//! - [`queues`]: the extra receive queues of a multi-queue TAP, one per
//!   client, that the kernel reads each client's frames into.
//! - [`launch`]: starting a driver, as a process or a thread, and the
//!   driver process's own start.
//! - [`link`]: netd's side: a [`DriverLink`] the engine sees as its device,
//!   which starts the driver and starts it again when it dies.

pub mod launch;
pub mod link;
pub mod messages;
pub mod queues;
pub mod run;

pub use link::{DriverHandle, DriverLink, DriverLinkStats, Launcher};
pub use queues::MAX_RX_QUEUES;
pub use run::{serve, DriverStats, STEER_DELAY_VAR};

/// Where the device runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The driver is a process of its own (`nagare driver`), started again
    /// when it dies.
    Split,
    /// The same driver code in a thread of netd.
    Single,
    /// No driver: the device is called from netd's loop (the baseline).
    Inline,
}

impl Placement {
    /// The placement that is fastest with `cpus` CPUs to run on. netd and
    /// a driver both poll while work keeps coming (`nagare_host::BusyPoll`),
    /// and the applications and the kernel's side of the link need a CPU
    /// too: with two CPUs or fewer a driver beside netd leaves three loops
    /// to share them, and every hand-over between netd and the driver
    /// waits for one of them to get a CPU, so the device in netd's own loop
    /// (`Inline`) is fastest there (measured in `docs/benchmarks.md`,
    /// "Through netd"); with more, the driver is a process of its own (`Split`),
    /// polling on a CPU of its own, where a fault in the device's half
    /// cannot take netd down.
    pub fn for_cpus(cpus: usize) -> Placement {
        if cpus <= 2 {
            Placement::Inline
        } else {
            Placement::Split
        }
    }

    /// [`Placement::for_cpus`] for the CPUs this process may run on.
    pub fn for_this_machine() -> Placement {
        Placement::for_cpus(nagare_host::busy_poll::cpus())
    }

    /// The name `--placement` takes and `nagare stat` shows.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Split => "split",
            Placement::Single => "single",
            Placement::Inline => "inline",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Placement;

    #[test]
    fn a_driver_of_its_own_only_where_the_cpus_leave_it_one() {
        assert_eq!(Placement::for_cpus(1), Placement::Inline);
        assert_eq!(Placement::for_cpus(2), Placement::Inline);
        assert_eq!(Placement::for_cpus(3), Placement::Split);
        assert_eq!(Placement::for_cpus(64), Placement::Split);
    }
}
