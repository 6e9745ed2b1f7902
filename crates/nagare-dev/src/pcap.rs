//! Packet capture in the classic pcap format, readable by tcpdump and
//! Wireshark, on any device.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::RawFd;

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::Instant;

use crate::device::{Device, DeviceStats};

/// The classic pcap magic number (microsecond timestamps).
pub const PCAP_MAGIC: u32 = 0xa1b2_c3d4;
/// Largest number of bytes of a frame recorded.
pub const PCAP_SNAPLEN: u32 = 262_144;
/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Size of the file header.
pub const PCAP_FILE_HEADER_LEN: usize = 24;
/// Size of each record header.
pub const PCAP_RECORD_HEADER_LEN: usize = 16;

/// Frames offered to the wrapped device per call by a [`PcapDevice`].
const PCAP_TX_BATCH: usize = 256;

/// Writes frames to a pcap stream. The file is little-endian (readers
/// detect the byte order from the magic number).
///
/// Timestamps are `epoch_offset_micros + ts`: with a
/// [`crate::MonotonicClock`], pass its [`crate::MonotonicClock::unix_epoch_micros`]
/// to get wall-clock dates; under virtual time, any fixed offset gives
/// readable dates.
pub struct PcapWriter<W: Write> {
    out: W,
    epoch_offset_micros: u64,
    packets: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `out`.
    pub fn new(mut out: W, epoch_offset_micros: u64) -> io::Result<Self> {
        let mut header = [0u8; PCAP_FILE_HEADER_LEN];
        header[0..4].copy_from_slice(&PCAP_MAGIC.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone (8..12) and sigfigs (12..16) are zero.
        header[16..20].copy_from_slice(&PCAP_SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out, epoch_offset_micros, packets: 0 })
    }

    /// Records one frame seen at `ts`, writing its slices as they are
    /// (no gathering copy). Frames longer than the snap length are cut.
    pub fn write_packet(&mut self, ts: Instant, frame: &PacketBuf) -> io::Result<()> {
        let micros = self.epoch_offset_micros.saturating_add(ts.total_micros());
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = len.min(PCAP_SNAPLEN);
        let mut header = [0u8; PCAP_RECORD_HEADER_LEN];
        // Seconds wrap in 2106, as in every classic pcap file.
        header[0..4].copy_from_slice(&((micros / 1_000_000) as u32).to_le_bytes());
        header[4..8].copy_from_slice(&((micros % 1_000_000) as u32).to_le_bytes());
        header[8..12].copy_from_slice(&incl.to_le_bytes());
        header[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&header)?;
        let mut left = incl as usize;
        for chunk in frame.chunks() {
            if left == 0 {
                break;
            }
            let take = chunk.len().min(left);
            self.out.write_all(&chunk[..take])?;
            left -= take;
        }
        self.packets += 1;
        Ok(())
    }

    /// Frames recorded so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, mutably.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Unwraps the writer (not flushed).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Wraps a device and records every frame it receives and transmits.
///
/// A capture write error does not disturb traffic: capturing stops, and the
/// error is kept for [`PcapDevice::capture_error`].
pub struct PcapDevice<D: Device, W: Write> {
    inner: D,
    writer: PcapWriter<W>,
    error: Option<io::Error>,
    /// Shared handles to frames offered for transmission, so that those the
    /// inner device takes can be recorded afterwards.
    offered: Vec<PacketBuf>,
}

impl<D: Device, W: Write> PcapDevice<D, W> {
    /// Records the traffic of `inner` to `writer`.
    pub fn new(inner: D, writer: PcapWriter<W>) -> Self {
        PcapDevice { inner, writer, error: None, offered: Vec::new() }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The capture.
    pub fn writer(&self) -> &PcapWriter<W> {
        &self.writer
    }

    /// The capture, mutably (to flush it, for example).
    pub fn writer_mut(&mut self) -> &mut PcapWriter<W> {
        &mut self.writer
    }

    /// The error that stopped the capture, if any.
    pub fn capture_error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Unwraps the device and the capture (not flushed).
    pub fn into_parts(self) -> (D, PcapWriter<W>) {
        (self.inner, self.writer)
    }

    fn record(&mut self, ts: Instant, frame: &PacketBuf) {
        if self.error.is_none() {
            if let Err(e) = self.writer.write_packet(ts, frame) {
                self.error = Some(e);
            }
        }
    }
}

impl<D: Device, W: Write> Device for PcapDevice<D, W> {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        let before = out.len();
        let result = self.inner.receive_batch(pool, out, max, now);
        for frame in out.get(before..).unwrap_or(&[]) {
            self.record(now, frame);
        }
        result
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        if self.error.is_some() {
            return self.inner.transmit_batch(frames, now);
        }
        // Offer the frames in bounded batches, keeping a shared handle to
        // each so that the ones the inner device takes can be recorded.
        let mut offered = std::mem::take(&mut self.offered);
        let mut batch = VecDeque::new();
        let mut total = 0;
        let mut result = Ok(());
        while !frames.is_empty() {
            let n = frames.len().min(PCAP_TX_BATCH);
            batch.extend(frames.drain(..n));
            offered.clear();
            offered.extend(batch.iter().cloned());
            let taken = match self.inner.transmit_batch(&mut batch, now) {
                Ok(taken) => taken,
                Err(e) => {
                    result = Err(e);
                    0
                }
            };
            // A refused frame (counted in tx_errors) is recorded too: it is
            // what the stack tried to send.
            for frame in offered.iter().take(taken) {
                self.record(now, frame);
            }
            total += taken;
            let all_taken = batch.is_empty();
            while let Some(frame) = batch.pop_back() {
                frames.push_front(frame);
            }
            if !all_taken || result.is_err() {
                break;
            }
        }
        offered.clear();
        self.offered = offered;
        match result {
            Err(e) if total == 0 => Err(e),
            _ => Ok(total),
        }
    }

    /// Frames the filter drops never reach the capture.
    fn set_syn_filter(&mut self, filter: &nagare_core::tcp::syn_guard::SynFilter) -> io::Result<()> {
        self.inner.set_syn_filter(filter)
    }

    fn set_udp_shed(&mut self, shed: &crate::device::UdpShed) -> io::Result<()> {
        self.inner.set_udp_shed(shed)
    }

    fn capabilities(&self) -> nagare_core::Capabilities {
        self.inner.capabilities()
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.inner.raw_fd()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopback::Loopback;

    #[test]
    fn writes_exact_header_and_record_bytes_from_a_chain() {
        let pool = BufferPool::new(8, 16);
        // 20 bytes over three 8-byte buffers (2 bytes of headroom first).
        let data: Vec<u8> = (0u8..20).collect();
        let frame = PacketBuf::from_slice(&pool, 2, &data).unwrap();
        assert_eq!(frame.slice_count(), 3);
        let mut w = PcapWriter::new(Vec::new(), 1_700_000_000_000_000).unwrap();
        w.write_packet(Instant::from_micros(2_500_001), &frame).unwrap();
        assert_eq!(w.packets(), 1);
        let bytes = w.into_inner();
        let mut expected =
            vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x04, 0x00, 1, 0, 0, 0];
        expected.extend_from_slice(&1_700_000_002u32.to_le_bytes());
        expected.extend_from_slice(&500_001u32.to_le_bytes());
        expected.extend_from_slice(&20u32.to_le_bytes());
        expected.extend_from_slice(&20u32.to_le_bytes());
        expected.extend_from_slice(&data);
        assert_eq!(bytes, expected);
    }

    struct FailingWriter {
        budget: usize,
    }

    impl Write for FailingWriter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.budget < buf.len() {
                return Err(io::Error::other("disk full"));
            }
            self.budget -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn device_records_both_directions_and_survives_capture_errors() {
        let pool = BufferPool::new(2048, 16);
        let writer = PcapWriter::new(Vec::new(), 0).unwrap();
        let mut dev = PcapDevice::new(Loopback::new(1500, 2), writer);
        let mut q: VecDeque<PacketBuf> = (0u8..3).map(|i| PacketBuf::from_slice(&pool, 0, &[i; 60]).unwrap()).collect();
        // The loopback takes two; only those are recorded.
        assert_eq!(dev.transmit_batch(&mut q, Instant::from_micros(5)).unwrap(), 2);
        assert_eq!(q.len(), 1);
        assert_eq!(dev.writer().packets(), 2);
        let mut out = Vec::new();
        assert_eq!(dev.receive_batch(&pool, &mut out, 8, Instant::from_micros(9)).unwrap(), 2);
        assert_eq!(dev.writer().packets(), 4);
        assert_eq!(dev.transmit_batch(&mut q, Instant::from_micros(11)).unwrap(), 1);
        assert_eq!(dev.writer().packets(), 5);
        let (lo, w) = dev.into_parts();
        assert_eq!(w.get_ref().len(), PCAP_FILE_HEADER_LEN + 5 * (PCAP_RECORD_HEADER_LEN + 60));
        drop((q, out));
        assert_eq!(pool.in_use(), 1, "the loopback still holds the last frame");
        drop(lo);
        assert_eq!(pool.in_use(), 0);

        // Room for the header and one record only: traffic goes on.
        let writer = PcapWriter::new(FailingWriter { budget: 24 + 16 + 60 }, 0).unwrap();
        let mut dev = PcapDevice::new(Loopback::new(1500, 8), writer);
        let mut q: VecDeque<PacketBuf> = (0u8..3).map(|i| PacketBuf::from_slice(&pool, 0, &[i; 60]).unwrap()).collect();
        assert_eq!(dev.transmit_batch(&mut q, Instant::ZERO).unwrap(), 3);
        assert_eq!(dev.writer().packets(), 1);
        assert!(dev.capture_error().is_some());
        let mut out = Vec::new();
        assert_eq!(dev.receive_batch(&pool, &mut out, 8, Instant::ZERO).unwrap(), 3);
        assert_eq!(dev.inner().stats().tx_frames, 3);
    }

    #[test]
    fn long_queues_are_offered_in_batches_and_all_recorded() {
        let pool = BufferPool::new(2048, 1024);
        let writer = PcapWriter::new(Vec::new(), 0).unwrap();
        let mut dev = PcapDevice::new(Loopback::new(1500, 600), writer);
        let mut q: VecDeque<PacketBuf> =
            (0..700u32).map(|i| PacketBuf::from_slice(&pool, 0, &i.to_be_bytes().repeat(15)).unwrap()).collect();
        assert_eq!(dev.transmit_batch(&mut q, Instant::ZERO).unwrap(), 600);
        assert_eq!(dev.writer().packets(), 600);
        assert_eq!(q.len(), 100);
        assert_eq!(q.front().unwrap().header::<4>().unwrap(), 600u32.to_be_bytes(), "order kept");
        let mut out = Vec::new();
        dev.receive_batch(&pool, &mut out, 1000, Instant::ZERO).unwrap();
        assert!(out.iter().enumerate().all(|(i, f)| f.header::<4>().unwrap() == (i as u32).to_be_bytes()));
    }
}
