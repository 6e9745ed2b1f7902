//! A host: one interface on one device, the services it runs, and the
//! step that moves frames between them.

use crate::services::Services;
use nagare_core::buf::PacketBuf;
use nagare_core::{Instant, Interface};
use nagare_dev::Device;
use std::io;

/// Frames taken from the device per step: enough to amortize the system
/// call, few enough to keep latency low while transmitting.
const RX_BATCH: usize = 64;

/// What one step did.
#[derive(Debug, Default, Clone, Copy)]
pub struct StepReport {
    pub received: usize,
    pub transmitted: usize,
}

impl StepReport {
    pub fn did_work(&self) -> bool {
        self.received > 0 || self.transmitted > 0
    }
}

pub struct Host<D: Device> {
    pub iface: Interface,
    pub device: D,
    rx: Vec<PacketBuf>,
    pub services: Services,
    pub device_errors: u64,
}

impl<D: Device> Host<D> {
    pub fn new(iface: Interface, device: D) -> Self {
        Host { iface, device, rx: Vec::with_capacity(RX_BATCH), services: Services::default(), device_errors: 0 }
    }

    /// Serves UDP echo (RFC 862) on port 7.
    pub fn enable_udp_echo(&mut self) -> Result<(), nagare_core::iface::Error> {
        self.services.enable_udp_echo(&mut self.iface)
    }

    /// Receives what the device has, runs the engine and the services, and
    /// transmits what the engine queued.
    pub fn step(&mut self, now: Instant) -> io::Result<StepReport> {
        let pool = self.iface.pool().clone();
        let received = self.device.receive_batch(&pool, &mut self.rx, RX_BATCH, now)?;
        self.iface.receive_batch(self.rx.drain(..), now);
        self.iface.poll(now);
        let served = self.services.serve(&mut self.iface, now);
        let transmitted = self.device.transmit_batch(self.iface.tx_queue(), now)?;
        Ok(StepReport { received, transmitted: transmitted + usize::from(served) })
    }

    /// When the host next needs a step without new input.
    pub fn poll_at(&self) -> Option<Instant> {
        earliest(self.iface.poll_at(), self.device.poll_at())
    }

    /// Whether frames wait for the device.
    pub fn has_pending_tx(&mut self) -> bool {
        !self.iface.tx_queue().is_empty()
    }
}

pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
