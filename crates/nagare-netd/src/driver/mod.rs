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
    /// The name `--placement` takes and `nagare stat` shows.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Split => "split",
            Placement::Single => "single",
            Placement::Inline => "inline",
        }
    }
}
