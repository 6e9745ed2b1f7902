//! Devices for nagare: where frames enter and leave the engine.
//!
//! - [`TapDevice`]: a Linux TAP interface, the way to the kernel's stack and
//!   real programs;
//! - [`SimLink`]: a simulated cable with latency, bandwidth, a bounded
//!   queue and impairments, running on virtual time;
//! - [`Impaired`]: the same impairments around any device;
//! - [`Loopback`]: what is sent comes back;
//! - [`VniPort`]: a port on a VNI segment, a shared-memory Ethernet
//!   between nagare instances on one machine (Mint);
//! - [`PcapDevice`]: a pcap capture of any device;
//! - [`MonotonicClock`]: real time in the engine's [`nagare_core::Instant`];
//! - [`software_offload`]: checksums and TCP segmentation done in software
//!   for a device that does neither.
//!
//! Everything implements [`Device`], a batched, non-blocking interface that
//! takes the current time as an argument. Devices are single-threaded, like
//! the buffer pool they draw from.

pub mod clock;
pub mod device;
pub mod impair;
mod ip_headers;
pub mod loopback;
pub mod pcap;
pub mod rng;
pub mod sim;
pub mod software_offload;
pub mod tap;
pub mod tap_filter;
pub mod tap_steering;
pub mod vnet;
pub mod vni;

pub use clock::MonotonicClock;
pub use device::{frame_fits, Device, DeviceStats, FrameInPlace, UdpShed, DEFAULT_MTU, RX_HEADROOM};
pub use impair::{ImpairStats, Impaired, ImpairedStats, Impairment, ParseImpairmentError};
pub use loopback::Loopback;
pub use pcap::{PcapDevice, PcapWriter, LINKTYPE_ETHERNET, PCAP_MAGIC, PCAP_SNAPLEN};
pub use rng::SimRng;
pub use sim::{LinkConfig, SimLink, SimLinkStats, SimPort};
pub use tap::TapDevice;
pub use tap_steering::{PortMap, PortSteering, MAX_LOCAL6, MAX_STEERED_PORTS};
pub use vni::{Segment as VniSegment, VniPort, VniStats};
