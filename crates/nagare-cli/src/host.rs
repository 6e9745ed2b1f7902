//! A host: one interface on one device, the services it runs, and the
//! step that moves frames between them.

use nagare_core::buf::PacketBuf;
use nagare_core::{Instant, Interface, UdpHandle};
use nagare_dev::Device;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

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
    udp_echo: Option<UdpHandle>,
    pub udp_echoed: u64,
    pub udp_echo_failed: u64,
    pub device_errors: u64,
}

impl<D: Device> Host<D> {
    pub fn new(iface: Interface, device: D) -> Self {
        Host {
            iface,
            device,
            rx: Vec::with_capacity(RX_BATCH),
            udp_echo: None,
            udp_echoed: 0,
            udp_echo_failed: 0,
            device_errors: 0,
        }
    }

    /// Serves UDP echo (RFC 862) on `port`.
    pub fn enable_udp_echo(&mut self, port: u16) -> Result<(), nagare_core::iface::Error> {
        self.udp_echo = Some(self.iface.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?);
        Ok(())
    }

    /// Receives what the device has, runs the engine and the services, and
    /// transmits what the engine queued.
    pub fn step(&mut self, now: Instant) -> io::Result<StepReport> {
        let pool = self.iface.pool().clone();
        let received = self.device.receive_batch(&pool, &mut self.rx, RX_BATCH, now)?;
        for frame in self.rx.drain(..) {
            self.iface.receive(frame, now);
        }
        self.iface.poll(now);
        self.serve(now);
        let transmitted = self.device.transmit_batch(self.iface.tx_queue(), now)?;
        Ok(StepReport { received, transmitted })
    }

    fn serve(&mut self, now: Instant) {
        let Some(echo) = self.udp_echo else {
            return;
        };
        // The echoed datagram is the received one: its buffers go back out
        // with new headers written into the headroom the old ones left.
        while let Ok(Some(datagram)) = self.iface.udp_recv(echo) {
            match self.iface.udp_send_buf(echo, datagram.payload, datagram.source, now) {
                Ok(()) => self.udp_echoed += 1,
                Err(_) => self.udp_echo_failed += 1,
            }
        }
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
