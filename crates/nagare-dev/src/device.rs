//! The device trait: batched, non-blocking frame input and output.
//!
//! A device moves whole Ethernet frames (no preamble, no FCS) between the
//! engine and a link. Every call is non-blocking and handles a batch, so one
//! system call or one lock round trip is shared by many frames. Time is
//! passed in, as everywhere in nagare: simulated devices run on virtual time
//! and real ones simply ignore it or stamp captures with it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

use nagare_core::buf::{BufferPool, Offload, PacketBuf, TxOffloads};
use nagare_core::tcp::syn_guard::SynFilter;
use nagare_core::{Capabilities, Instant};
use nagare_wire::ETHERNET_HEADER_LEN;

/// Bytes left free in front of every frame a device reads from outside into
/// a pool buffer, so the engine can later prepend headers to the same buffer
/// (for example turn a received echo request into a reply in place).
pub const RX_HEADROOM: usize = 64;

/// The IP MTU of a device unless configured otherwise. A device with IP MTU
/// `m` carries frames of up to `m + ETHERNET_HEADER_LEN` bytes.
pub const DEFAULT_MTU: usize = 1500;

/// Counters kept by every device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceStats {
    /// Frames handed to the caller by `receive_batch`.
    pub rx_frames: u64,
    /// Bytes in those frames.
    pub rx_bytes: u64,
    /// Frames taken from the caller by `transmit_batch` and put on the link.
    pub tx_frames: u64,
    /// Bytes in those frames.
    pub tx_bytes: u64,
    /// Frames that arrived but were dropped because the pool had no buffer.
    pub rx_dropped_no_buffer: u64,
    /// Frames that arrived but were larger than a pool buffer (or the MTU).
    pub rx_dropped_oversize: u64,
    /// Receive errors reported by the operating system.
    pub rx_errors: u64,
    /// Frames accepted for transmission but dropped by the device (a full
    /// queue on a simulated link, for example).
    pub tx_dropped: u64,
    /// Frames refused: larger than the MTU, empty, or rejected by the
    /// operating system. They are removed from the queue.
    pub tx_errors: u64,
}

/// A received frame still in the device's memory (a VNI slot), shown to
/// [`Device::receive_placed`]'s caller. The memory may be shared with the
/// sender, so the frame is only ever copied out, never borrowed: two reads
/// need not agree, and the caller parses only its own copy.
pub trait FrameInPlace {
    /// The frame's length in bytes.
    fn len(&self) -> usize;

    /// Whether the frame is empty (never, for a frame a device shows).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..offset + out.len()` of the frame into `out`;
    /// false, with nothing copied, if that runs past the frame's end.
    fn copy_out(&self, offset: usize, out: &mut [u8]) -> bool;

    /// The frame's offload metadata as the device reports it (a partial
    /// or verified checksum, a super-segment's segment size); nothing
    /// (the default) for a device that reports none.
    fn offload(&self) -> Offload {
        Offload::NONE
    }
}

/// UDP datagrams a device drops before its reader takes them
/// ([`Device::set_udp_shed`]): to each port listed, all but the fraction
/// `admit` (out of `u32::MAX`) of them. A reader that sheds the traffic
/// of its receivers of low priority while it cannot keep up keeps the
/// device's queue for what it must not lose.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdpShed {
    /// (destination port, admitted fraction out of `u32::MAX`).
    pub ports: Vec<(u16, u32)>,
}

/// A network device carrying Ethernet frames.
///
/// Received frames that enter from outside the process (TAP) start at
/// offset [`RX_HEADROOM`] of a buffer taken from the pool given to
/// [`Device::receive_batch`]. In-memory devices (loopback, simulated link)
/// hand over the very `PacketBuf` that was transmitted, without copying.
pub trait Device {
    /// Receives up to `max` frames without blocking, appending them to
    /// `out`; returns how many.
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize>;

    /// Transmits frames from the front of `frames` without blocking.
    /// Removes the frames it has dealt with from the front of the queue and
    /// returns how many it removed; the rest stay queued (for example when
    /// the kernel says `EAGAIN`). A removed frame was either sent or refused;
    /// refused frames (too large, empty) are counted in
    /// [`DeviceStats::tx_errors`].
    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize>;

    /// Reads one frame straight into `bufs` (in order), for a caller with
    /// memory of its own (netd's driver reads into the region it shares
    /// with netd): the frame's length and offload metadata, `Ok(None)` when
    /// no frame waits. A frame that does not fit is dropped and counted,
    /// and reported as length 0. Devices that cannot say
    /// `ErrorKind::Unsupported` (the default); the caller then uses
    /// [`Device::receive_batch`].
    fn receive_into(&mut self, bufs: &mut [&mut [u8]], now: Instant) -> io::Result<Option<(usize, Offload)>> {
        let _ = (bufs, now);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Receives up to `max` frames without a pool: each is shown to
    /// `place` where the device holds it ([`FrameInPlace`]), which copies
    /// it wherever it chooses after reading its headers (netd's driver
    /// puts a flow's frames straight into the region of the application
    /// that owns the flow, as a NIC's receive steering does), or drops it.
    /// Returns how many frames were shown. Devices whose frames cannot be
    /// looked at before they are copied (a TAP's `read`) say
    /// `ErrorKind::Unsupported` (the default).
    fn receive_placed(
        &mut self,
        max: usize,
        now: Instant,
        place: &mut dyn FnMut(&dyn FrameInPlace),
    ) -> io::Result<usize> {
        let _ = (max, now, place);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Another receive queue of this device, over `fd` (a queue of the
    /// same multi-queue TAP, opened elsewhere and passed on), read like
    /// the device itself. Devices without queues say
    /// `ErrorKind::Unsupported` (the default).
    fn rx_queue(&self, fd: OwnedFd) -> io::Result<Box<dyn Device>> {
        drop(fd);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Frames the kernel may hold for this device's reader before it
    /// drops (a TAP queue's `tx_queue_len`); `None` when the device cannot
    /// say (the default).
    fn queue_capacity(&self) -> Option<usize> {
        None
    }

    /// Applies the engine's SYN filter before frames are read (a TAP runs
    /// it in the sender's system call), so what it drops costs this
    /// process nothing; a filter that is not engaged removes it. Devices
    /// that cannot say `ErrorKind::Unsupported` (the default), and the
    /// engine then applies the filter itself
    /// (`nagare_core::tcp::syn_guard`).
    fn set_syn_filter(&mut self, filter: &SynFilter) -> io::Result<()> {
        let _ = filter;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Sheds UDP datagrams before frames are read (a TAP drops them in
    /// the sender's system call, before its ring): to each listed port,
    /// all but the fraction it admits; an empty list sheds nothing.
    /// Devices that cannot say `ErrorKind::Unsupported` (the default).
    fn set_udp_shed(&mut self, shed: &UdpShed) -> io::Result<()> {
        let _ = shed;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// What the device carries and completes: the largest IP packet the
    /// link carries ([`DEFAULT_MTU`] unless configured otherwise) and what
    /// the device completes on transmit (checksums, TCP segmentation). An
    /// interface reads it from its device when it is made
    /// (`nagare_core::Interface::new`), as smoltcp's
    /// `phy::Device::capabilities`; it is the one place a device says
    /// either.
    fn capabilities(&self) -> Capabilities;

    /// A file descriptor that becomes readable when frames arrive, for
    /// poll/epoll (`None` for in-memory devices).
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }

    /// The earliest time at which this device will have something to
    /// deliver without outside input (simulated latency, held-back frames);
    /// `None` if nothing is pending.
    fn poll_at(&self) -> Option<Instant> {
        None
    }

    /// Counters.
    fn stats(&self) -> DeviceStats;
}

impl<D: Device + ?Sized> Device for Box<D> {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        (**self).receive_batch(pool, out, max, now)
    }
    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        (**self).transmit_batch(frames, now)
    }
    fn receive_into(&mut self, bufs: &mut [&mut [u8]], now: Instant) -> io::Result<Option<(usize, Offload)>> {
        (**self).receive_into(bufs, now)
    }
    fn receive_placed(
        &mut self,
        max: usize,
        now: Instant,
        place: &mut dyn FnMut(&dyn FrameInPlace),
    ) -> io::Result<usize> {
        (**self).receive_placed(max, now, place)
    }
    fn rx_queue(&self, fd: OwnedFd) -> io::Result<Box<dyn Device>> {
        (**self).rx_queue(fd)
    }
    fn queue_capacity(&self) -> Option<usize> {
        (**self).queue_capacity()
    }
    fn set_syn_filter(&mut self, filter: &SynFilter) -> io::Result<()> {
        (**self).set_syn_filter(filter)
    }
    fn set_udp_shed(&mut self, shed: &UdpShed) -> io::Result<()> {
        (**self).set_udp_shed(shed)
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        (**self).raw_fd()
    }
    fn poll_at(&self) -> Option<Instant> {
        (**self).poll_at()
    }
    fn stats(&self) -> DeviceStats {
        (**self).stats()
    }
}

impl<D: Device + ?Sized> Device for &mut D {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        (**self).receive_batch(pool, out, max, now)
    }
    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        (**self).transmit_batch(frames, now)
    }
    fn receive_into(&mut self, bufs: &mut [&mut [u8]], now: Instant) -> io::Result<Option<(usize, Offload)>> {
        (**self).receive_into(bufs, now)
    }
    fn receive_placed(
        &mut self,
        max: usize,
        now: Instant,
        place: &mut dyn FnMut(&dyn FrameInPlace),
    ) -> io::Result<usize> {
        (**self).receive_placed(max, now, place)
    }
    fn rx_queue(&self, fd: OwnedFd) -> io::Result<Box<dyn Device>> {
        (**self).rx_queue(fd)
    }
    fn queue_capacity(&self) -> Option<usize> {
        (**self).queue_capacity()
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        (**self).raw_fd()
    }
    fn poll_at(&self) -> Option<Instant> {
        (**self).poll_at()
    }
    fn stats(&self) -> DeviceStats {
        (**self).stats()
    }
}

/// Whether a link with `mtu` and `offloads` carries `frame`: an Ethernet
/// header and at most an MTU of packet, or a TCP or UDP super-frame the
/// device cuts up itself. A UDP super-frame stands for several datagrams
/// however short it is, so only a device that cuts them carries one.
pub fn frame_fits(frame: &PacketBuf, mtu: usize, offloads: TxOffloads) -> bool {
    let len = frame.len();
    if len < ETHERNET_HEADER_LEN {
        return false;
    }
    let offload = frame.offload();
    let super_frame_fits = len <= offloads.super_frame_limit(offload) + ETHERNET_HEADER_LEN;
    if offload.is_udp_segmented() {
        return super_frame_fits;
    }
    len <= mtu + ETHERNET_HEADER_LEN || super_frame_fits
}

/// The earlier of two optional deadlines.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Copies `frame` into one fresh buffer from `pool` at [`RX_HEADROOM`] (or
/// into a chain if it does not fit one buffer), applying `edit` to the copy
/// before it is sealed. `None` if the pool is exhausted.
pub(crate) fn copy_into_pool(pool: &BufferPool, frame: &PacketBuf, edit: impl FnOnce(&mut [u8])) -> Option<PacketBuf> {
    let len = frame.len();
    if RX_HEADROOM + len <= pool.buf_size() {
        let mut buf = pool.alloc().ok()?;
        let bytes = buf.as_mut_slice()?;
        let dst = &mut bytes[RX_HEADROOM..RX_HEADROOM + len];
        frame.copy_out(0, dst);
        edit(dst);
        PacketBuf::from_buffer(buf, RX_HEADROOM, RX_HEADROOM + len)
    } else {
        let mut bytes = frame.to_vec();
        edit(&mut bytes);
        PacketBuf::from_slice(pool, RX_HEADROOM.min(pool.buf_size() / 2), &bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_into_pool_places_frame_at_headroom_and_edits_copy_only() {
        let pool = BufferPool::new(2048, 4);
        let original = PacketBuf::from_slice(&pool, 0, b"hello world").unwrap();
        let copy = copy_into_pool(&pool, &original, |b| b[0] ^= 0x20).unwrap();
        assert_eq!(copy.to_vec(), b"Hello world");
        assert_eq!(original.to_vec(), b"hello world");
        assert_eq!(copy.headroom(), RX_HEADROOM);
        assert_eq!(copy.slice_count(), 1);
        drop((original, copy));
        assert_eq!(pool.in_use(), 0);

        // Larger than one buffer: a chain.
        let small = BufferPool::new(128, 16);
        let big = PacketBuf::from_slice(&small, 0, &[7u8; 300]).unwrap();
        let copy = copy_into_pool(&small, &big, |_| {}).unwrap();
        assert_eq!(copy.to_vec(), vec![7u8; 300]);
        drop((big, copy));
        assert_eq!(small.in_use(), 0);

        let tiny = BufferPool::new(2048, 1);
        let held = tiny.alloc().unwrap();
        assert!(copy_into_pool(&tiny, &PacketBuf::new(), |_| {}).is_none());
        drop(held);
    }

    #[test]
    fn boxed_and_borrowed_devices_are_devices() {
        fn roundtrip(mut dev: impl Device, pool: &BufferPool) -> usize {
            let mut q = VecDeque::from([PacketBuf::from_slice(pool, 0, &[1u8; 60]).unwrap()]);
            dev.transmit_batch(&mut q, Instant::ZERO).unwrap();
            let mut out = Vec::new();
            dev.receive_batch(pool, &mut out, 8, Instant::ZERO).unwrap()
        }
        let pool = BufferPool::new(2048, 4);
        let mut boxed: Box<dyn Device> = Box::new(crate::Loopback::new(1500, 4));
        assert_eq!(roundtrip(&mut boxed, &pool), 1);
        assert_eq!(roundtrip(&mut *boxed, &pool), 1);
        assert_eq!(boxed.capabilities().mtu, 1500);
        assert_eq!(boxed.stats().rx_frames, 2);
        assert!(boxed.raw_fd().is_none());
        assert_eq!(roundtrip(boxed, &pool), 1);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn earliest_picks_the_minimum() {
        let a = Some(Instant::from_micros(5));
        let b = Some(Instant::from_micros(3));
        assert_eq!(earliest(a, b), b);
        assert_eq!(earliest(a, None), a);
        assert_eq!(earliest(None, b), b);
        assert_eq!(earliest(None, None), None);
    }
}
