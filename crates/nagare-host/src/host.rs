//! A host: one engine on one device, the services it runs, and the step
//! that moves frames between them.
//!
//! The step has three phases, which a caller with work of its own between
//! them (the inet server serving its clients) calls one by one:
//! [`Host::receive`] (device to engine), [`Host::poll`] (the engine's
//! timers), [`Host::transmit`] (engine to device). [`Host::step`] is the
//! three with the services in the middle.

use crate::services::Services;
use nagare_core::buf::PacketBuf;
use nagare_core::{Instant, Interface};
use nagare_dev::Device;

/// Frames taken from the device per receive by default: enough to
/// amortize the system call, few enough to keep latency low while
/// transmitting.
pub const RX_BATCH: usize = 64;

/// What one step did.
#[derive(Debug, Default, Clone, Copy)]
pub struct StepReport {
    /// Frames the device delivered.
    pub received: usize,
    /// Frames the device took, plus one if a service did anything.
    pub transmitted: usize,
    /// The device failed a call (counted in [`Host::device_errors`]).
    pub device_error: bool,
}

impl StepReport {
    /// Whether anything moved.
    pub fn did_work(&self) -> bool {
        self.received > 0 || self.transmitted > 0
    }
}

/// An engine on a device.
pub struct Host<D: Device> {
    /// The engine.
    pub iface: Interface,
    /// Where its frames go.
    pub device: D,
    /// Echo, discard and HTTP, if enabled.
    pub services: Services,
    /// Device calls that failed (a link going down, a frame the kernel
    /// refused); they are counted, logged now and then, and waited out.
    pub device_errors: u64,
    last_device_error: Option<std::io::Error>,
    rx: Vec<PacketBuf>,
    rx_batch: usize,
    /// The generation of the engine's SYN filter last given to the device.
    syn_filter_generation: u64,
    /// Whether that filter was engaged (to log the change).
    syn_filter_engaged: bool,
}

impl<D: Device> Host<D> {
    /// A host taking up to [`RX_BATCH`] frames per receive.
    pub fn new(iface: Interface, device: D) -> Self {
        Self::with_rx_batch(iface, device, RX_BATCH)
    }

    /// A host taking up to `rx_batch` frames per receive.
    pub fn with_rx_batch(iface: Interface, device: D, rx_batch: usize) -> Self {
        let rx_batch = rx_batch.max(1);
        Host {
            iface,
            device,
            services: Services::default(),
            device_errors: 0,
            last_device_error: None,
            rx: Vec::with_capacity(rx_batch),
            rx_batch,
            syn_filter_generation: 0,
            syn_filter_engaged: false,
        }
    }

    /// Receives what the device has, runs the engine and the services, and
    /// transmits what the engine queued.
    pub fn step(&mut self, now: Instant) -> StepReport {
        let received = self.receive(now);
        self.poll(now);
        let served = self.services.serve(&mut self.iface, now);
        let transmitted = self.transmit(now);
        StepReport {
            received: received.unwrap_or(0),
            transmitted: transmitted.unwrap_or(0) + usize::from(served),
            device_error: received.is_none() || transmitted.is_none(),
        }
    }

    /// Hands one batch of the device's frames to the engine; how many, or
    /// `None` if the device failed.
    pub fn receive(&mut self, now: Instant) -> Option<usize> {
        self.receive_filtered(now, |_, _| true)
    }

    /// [`Host::receive`] with `keep` asked about each frame of the batch
    /// before the engine sees any of it: a frame it refuses is dropped
    /// there (an early filter, which may look at the engine and change
    /// its sockets' queue limits before any frame of the batch meets
    /// them). Returns how many frames the device delivered, kept or not.
    pub fn receive_filtered(
        &mut self,
        now: Instant,
        mut keep: impl FnMut(&mut Interface, &PacketBuf) -> bool,
    ) -> Option<usize> {
        let pool = self.iface.pool().clone();
        match self.device.receive_batch(&pool, &mut self.rx, self.rx_batch, now) {
            Ok(n) => {
                let iface = &mut self.iface;
                self.rx.retain(|frame| keep(iface, frame));
                self.iface.receive_batch(self.rx.drain(..), now);
                Some(n)
            }
            Err(e) => {
                self.rx.clear();
                self.device_failed(e);
                None
            }
        }
    }

    /// The most frames one receive takes.
    pub fn rx_batch(&self) -> usize {
        self.rx_batch
    }

    /// Runs the engine's timers, and gives the device the engine's SYN
    /// filter when it changed.
    pub fn poll(&mut self, now: Instant) {
        self.iface.poll(now);
        self.apply_syn_filter();
    }

    /// Hands a new generation of the engine's SYN filter to the device,
    /// and tells the engine whether the device applies it (if not, the
    /// engine does).
    fn apply_syn_filter(&mut self) {
        let filter = self.iface.tcp_ref().syn_filter();
        if filter.generation == self.syn_filter_generation {
            return;
        }
        self.syn_filter_generation = filter.generation;
        let engaged = filter.engaged;
        let applied = match self.device.set_syn_filter(filter) {
            Ok(()) => engaged,
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => false,
            Err(e) => {
                log::warn!("the device refused the SYN filter, the engine applies it: {e}");
                false
            }
        };
        if engaged != self.syn_filter_engaged {
            self.syn_filter_engaged = engaged;
            let filter = self.iface.tcp_ref().syn_filter();
            if engaged {
                let percent = f64::from(filter.admit) / f64::from(u32::MAX) * 100.0;
                let place = if applied { "in the device" } else { "in the engine" };
                log::warn!(
                    "SYN flood on port(s) {:?}: SYNs from peers without a completed handshake pass at {percent:.1} %, filtered {place}",
                    filter.ports
                );
            } else {
                log::info!("SYN flood over: every SYN passes again");
            }
        }
        self.iface.tcp().set_syn_filter_applied(applied);
    }

    /// Offers the engine's queued frames to the device; how many it took,
    /// or `None` if it failed.
    pub fn transmit(&mut self, now: Instant) -> Option<usize> {
        match self.device.transmit_batch(self.iface.tx_queue(), now) {
            Ok(n) => Some(n),
            Err(e) => {
                self.device_failed(e);
                None
            }
        }
    }

    fn device_failed(&mut self, e: std::io::Error) {
        self.device_errors += 1;
        if self.device_errors.is_power_of_two() {
            log::warn!("device error ({} so far): {e}", self.device_errors);
        }
        self.last_device_error = Some(e);
    }

    /// The last error of the device, taken (`None` after it is taken).
    pub fn take_device_error(&mut self) -> Option<std::io::Error> {
        self.last_device_error.take()
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

/// The earlier of two optional instants.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::buf::BufferPool;
    use nagare_core::{Capabilities, InterfaceConfig};
    use nagare_dev::{LinkConfig, SimLink, SimPort};
    use nagare_wire::{EthernetAddress, Ipv4Cidr};
    use std::net::{Ipv4Addr, SocketAddrV4};

    const A: Ipv4Addr = Ipv4Addr::new(10, 8, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 8, 0, 2);
    const NOW: Instant = Instant::from_secs(1);

    fn host(port: SimPort, mac: u8, ip: Ipv4Addr) -> Host<SimPort> {
        let config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), Ipv4Cidr::new(ip, 24).unwrap());
        Host::new(Interface::new(config, Capabilities::default(), BufferPool::new(2048, 256)), port)
    }

    #[test]
    fn a_filter_sees_every_frame_before_the_engine_and_what_it_refuses_never_reaches_it() {
        let (pa, pb) = SimLink::new(LinkConfig::default(), 1);
        let (mut a, mut b) = (host(pa, 1, A), host(pb, 2, B));
        let tx = a.iface.udp().bind(SocketAddrV4::new(A, 4000)).unwrap();
        let rx = b.iface.udp().bind(SocketAddrV4::new(B, 9)).unwrap();
        let to = SocketAddrV4::new(B, 9);
        a.iface.udp().send_to(tx, b"0", to, NOW).unwrap();
        for _ in 0..4 {
            a.transmit(NOW);
            b.receive(NOW);
            b.transmit(NOW);
            a.receive(NOW);
        }
        assert!(b.iface.udp().recv(rx).unwrap().is_some(), "ARP resolved and the first datagram through");

        for word in [b"1", b"2", b"3"] {
            a.iface.udp().send_to(tx, word, to, NOW).unwrap();
        }
        assert_eq!(a.transmit(NOW), Some(3));
        let mut seen = 0;
        let received = b.receive_filtered(NOW, |iface, _| {
            // Nothing of the batch has reached the engine yet.
            assert_eq!(iface.udp_ref().socket(rx).unwrap().queued(), 0);
            seen += 1;
            seen != 2
        });
        assert_eq!((received, seen), (Some(3), 3));
        let mut got = Vec::new();
        while let Some(d) = b.iface.udp().recv(rx).unwrap() {
            got.push(d.payload.to_vec());
        }
        assert_eq!(got, [b"1".to_vec(), b"3".to_vec()]);
    }
}
