//! What the device under an interface carries and completes. The interface
//! reads it once, when it is made ([`Interface::new`]), from the device
//! itself (`nagare_dev::Device::capabilities`), so no caller restates it.
//!
//! [`Interface::new`]: crate::iface::Interface::new

use crate::buf::TxOffloads;

/// A device's capabilities, as the interface over it needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Largest IP packet the link carries.
    pub mtu: usize,
    /// What the device completes on transmit (checksums, TCP
    /// segmentation), so that the engine can leave it undone.
    pub tx_offloads: TxOffloads,
}

impl Default for Capabilities {
    /// An Ethernet link of MTU 1500 that completes nothing.
    fn default() -> Self {
        Capabilities { mtu: 1500, tx_offloads: TxOffloads::NONE }
    }
}
