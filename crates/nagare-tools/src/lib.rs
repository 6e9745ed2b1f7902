//! The jobs of the `nagare` command, as library functions: the command
//! parses its arguments and calls one of these.
//!
//! - [`demo`]: two instances on a simulated link.
//! - [`up`]: a host on a TAP device or a VNI port with its services.
//! - [`ping`]: echo requests from a host of its own, a simulated peer or
//!   through netd, with ping's output.
//! - [`fetch`]: an HTTP download, on a host of its own or through netd.
//! - [`netd`]: the inet server, as `nagare_netd::NetdBuilder` builds it.
//! - [`stat`]: a running netd's report.
//! - [`run`]: a program whose `AF_INET` sockets go through netd.
//! - [`vni`]: VNI segments and the bridge to a TAP device.
//!
//! What they print is the command's output (on stdout, but for a download's
//! progress line and ping's per-request errors, on stderr as iputils'
//! ping prints them); diagnostics go through the `log` crate.

pub mod demo;
pub mod fetch;
pub mod netd;
pub mod ping;
pub mod run;
pub mod stat;
pub mod up;
pub mod vni;
