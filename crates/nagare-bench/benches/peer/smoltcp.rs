//! smoltcp moving the same bytes, the peer of `tcp_memory`.
//!
//! Shaped like smoltcp's own `examples/loopback_benchmark.rs` (a listening
//! socket and a connecting one, `iface.poll` on the wall clock, the sender
//! claiming its whole free buffer with `send(|b| (b.len(), ()))`, the
//! receiver taking everything with `recv(|b| (b.len(), b.len()))`), but
//! with two interfaces joined by a pair of in-memory frame queues at
//! MTU 1500 (1514-byte Ethernet frames), checksums computed and checked as
//! nagare does, and frame buffers recycled (no allocation per frame).
//! [`smoltcp_loopback_as_shipped`] is the example itself: one interface
//! on smoltcp's `Loopback` (MTU 65535, checksums ignored, 64 KiB buffers).

use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Loopback, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{EthernetAddress, IpAddress, IpCidr};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Wire {
    frames: VecDeque<Vec<u8>>,
    /// Frames that went through, and the longest.
    count: u64,
    max_len: usize,
}

/// One end of an in-memory Ethernet cable.
pub struct QueueDevice {
    tx: Rc<RefCell<Wire>>,
    rx: Rc<RefCell<Wire>>,
    free: Rc<RefCell<Vec<Vec<u8>>>>,
    mtu: usize,
}

/// A cable: two devices whose transmit queue is the other's receive queue.
pub fn queue_pair(mtu: usize) -> (QueueDevice, QueueDevice) {
    let ab = Rc::new(RefCell::new(Wire::default()));
    let ba = Rc::new(RefCell::new(Wire::default()));
    let free = Rc::new(RefCell::new(Vec::new()));
    let a = QueueDevice { tx: ab.clone(), rx: ba.clone(), free: free.clone(), mtu };
    let b = QueueDevice { tx: ba, rx: ab, free, mtu };
    (a, b)
}

pub struct QueueRx {
    frame: Vec<u8>,
    free: Rc<RefCell<Vec<Vec<u8>>>>,
}

pub struct QueueTx<'a> {
    tx: &'a RefCell<Wire>,
    free: &'a RefCell<Vec<Vec<u8>>>,
}

impl phy::RxToken for QueueRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(&self.frame);
        self.free.borrow_mut().push(self.frame);
        r
    }
}

impl phy::TxToken for QueueTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = self.free.borrow_mut().pop().unwrap_or_default();
        // smoltcp writes every byte of the frame: no need to clear it.
        if frame.len() < len {
            frame.resize(len, 0);
        } else {
            frame.truncate(len);
        }
        let r = f(&mut frame);
        let mut wire = self.tx.borrow_mut();
        wire.count += 1;
        wire.max_len = wire.max_len.max(len);
        wire.frames.push_back(frame);
        r
    }
}

impl Device for QueueDevice {
    type RxToken<'a> = QueueRx;
    type TxToken<'a> = QueueTx<'a>;

    fn receive(&mut self, _timestamp: SmolInstant) -> Option<(QueueRx, QueueTx<'_>)> {
        let frame = self.rx.borrow_mut().frames.pop_front()?;
        Some((QueueRx { frame, free: self.free.clone() }, QueueTx { tx: &self.tx, free: &self.free }))
    }

    fn transmit(&mut self, _timestamp: SmolInstant) -> Option<QueueTx<'_>> {
        Some(QueueTx { tx: &self.tx, free: &self.free })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        // For Ethernet, smoltcp counts the 14-byte header in the MTU.
        caps.max_transmission_unit = self.mtu + 14;
        caps
    }
}

/// What one smoltcp stream did.
#[derive(Debug, Clone, Copy)]
pub struct SmolResult {
    pub bytes: u64,
    pub elapsed: Duration,
    /// Frames A sent to B during the transfer and the longest (0 for the
    /// loopback example, which does not count).
    pub frames_ab: u64,
    pub frames_ba: u64,
    pub max_frame: usize,
}

fn socket(buffer: usize) -> tcp::Socket<'static> {
    tcp::Socket::new(tcp::SocketBuffer::new(vec![0; buffer]), tcp::SocketBuffer::new(vec![0; buffer]))
}

fn iface(device: &mut impl Device, mac: u8, ip: [u8; 4], prefix: u8) -> Interface {
    let config = Config::new(EthernetAddress([0x02, 0, 0, 0, 0, mac]).into());
    let mut iface = Interface::new(config, device, SmolInstant::now());
    iface.update_ip_addrs(|addrs| {
        addrs.push(IpCidr::new(IpAddress::v4(ip[0], ip[1], ip[2], ip[3]), prefix)).expect("one address");
    });
    iface
}

/// `bytes` from a socket on one interface to a socket on another, over
/// the in-memory cable at `mtu`, with `buffer`-byte socket buffers.
/// `quick_ack` turns smoltcp's delayed ACK (10 ms by default) off, so the
/// receiver acknowledges every segment.
pub fn smoltcp_two_interfaces(
    bytes: u64,
    mtu: usize,
    buffer: usize,
    quick_ack: bool,
    time_limit: Duration,
) -> Result<SmolResult, String> {
    let (mut dev_a, mut dev_b) = queue_pair(mtu);
    let mut iface_a = iface(&mut dev_a, 1, [10, 0, 0, 1], 24);
    let mut iface_b = iface(&mut dev_b, 2, [10, 0, 0, 2], 24);
    let mut sockets_a = SocketSet::new(vec![]);
    let mut sockets_b = SocketSet::new(vec![]);
    let client = sockets_a.add(socket(buffer));
    let mut server_socket = socket(buffer);
    if quick_ack {
        server_socket.set_ack_delay(None);
    }
    let server = sockets_b.add(server_socket);
    sockets_b.get_mut::<tcp::Socket>(server).listen(1234).map_err(|e| format!("listen: {e}"))?;
    sockets_a
        .get_mut::<tcp::Socket>(client)
        .connect(iface_a.context(), (IpAddress::v4(10, 0, 0, 2), 1234), 65000)
        .map_err(|e| format!("connect: {e}"))?;
    // Handshake (and ARP), untimed.
    let setup_deadline = Instant::now() + Duration::from_secs(5);
    while !sockets_a.get::<tcp::Socket>(client).may_send() {
        if Instant::now() > setup_deadline {
            return Err("smoltcp: no connection".into());
        }
        let now = SmolInstant::now();
        iface_a.poll(now, &mut dev_a, &mut sockets_a);
        iface_b.poll(now, &mut dev_b, &mut sockets_b);
    }
    let (ab0, ba0) = (dev_a.tx.borrow().count, dev_b.tx.borrow().count);
    let (mut sent, mut received) = (0u64, 0u64);
    let started = Instant::now();
    let mut rounds: u64 = 0;
    while received < bytes {
        rounds += 1;
        if rounds.is_multiple_of(256) && started.elapsed() > time_limit {
            return Err(format!("smoltcp: {received} of {bytes} bytes after {time_limit:?}"));
        }
        let now = SmolInstant::now();
        iface_b.poll(now, &mut dev_b, &mut sockets_b);
        let s = sockets_b.get_mut::<tcp::Socket>(server);
        while s.can_recv() {
            received += s.recv(|b| (b.len(), b.len())).map_err(|e| format!("recv: {e}"))? as u64;
        }
        iface_a.poll(now, &mut dev_a, &mut sockets_a);
        let c = sockets_a.get_mut::<tcp::Socket>(client);
        while c.can_send() && sent < bytes {
            let left = bytes - sent;
            sent += c
                .send(|b| {
                    let n = b.len().min(left as usize);
                    (n, n)
                })
                .map_err(|e| format!("send: {e}"))? as u64;
        }
    }
    let elapsed = started.elapsed();
    let frames_ab = dev_a.tx.borrow().count - ab0;
    let frames_ba = dev_b.tx.borrow().count - ba0;
    let max_frame = dev_a.tx.borrow().max_len;
    Ok(SmolResult { bytes: received, elapsed, frames_ab, frames_ba, max_frame })
}

/// smoltcp's `loopback_benchmark` example as it ships: one interface on
/// `Loopback` (MTU 65535, checksums ignored), 64 KiB buffers, 127.0.0.1.
pub fn smoltcp_loopback_as_shipped(bytes: u64, time_limit: Duration) -> Result<SmolResult, String> {
    let mut device = Loopback::new(Medium::Ethernet);
    let mut iface = iface(&mut device, 1, [127, 0, 0, 1], 8);
    let mut sockets = SocketSet::new(vec![]);
    let server = sockets.add(socket(65536));
    let client = sockets.add(socket(65536));
    sockets.get_mut::<tcp::Socket>(server).listen(1234).map_err(|e| format!("listen: {e}"))?;
    sockets
        .get_mut::<tcp::Socket>(client)
        .connect(iface.context(), (IpAddress::v4(127, 0, 0, 1), 1234), 65000)
        .map_err(|e| format!("connect: {e}"))?;
    let (mut sent, mut received) = (0u64, 0u64);
    let started = Instant::now();
    let mut rounds: u64 = 0;
    while received < bytes {
        rounds += 1;
        if rounds.is_multiple_of(256) && started.elapsed() > time_limit {
            return Err(format!("smoltcp loopback: {received} of {bytes} bytes after {time_limit:?}"));
        }
        iface.poll(SmolInstant::now(), &mut device, &mut sockets);
        let s = sockets.get_mut::<tcp::Socket>(server);
        while s.can_recv() {
            received += s.recv(|b| (b.len(), b.len())).map_err(|e| format!("recv: {e}"))? as u64;
        }
        let c = sockets.get_mut::<tcp::Socket>(client);
        while c.can_send() && sent < bytes {
            let left = bytes - sent;
            sent += c
                .send(|b| {
                    let n = b.len().min(left as usize);
                    (n, n)
                })
                .map_err(|e| format!("send: {e}"))? as u64;
        }
    }
    Ok(SmolResult { bytes: received, elapsed: started.elapsed(), frames_ab: 0, frames_ba: 0, max_frame: 0 })
}
