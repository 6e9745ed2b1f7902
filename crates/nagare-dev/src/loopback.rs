//! A loopback device: every frame transmitted is received back.

use std::collections::VecDeque;
use std::io;

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::{Capabilities, Instant};

use crate::device::{Device, DeviceStats, DEFAULT_MTU};
use nagare_wire::ETHERNET_HEADER_LEN;

/// Frames a loopback holds unless told otherwise.
pub const DEFAULT_LOOPBACK_QUEUE: usize = 1024;

/// Transmitted frames come back out of `receive_batch`, in order and without
/// copying. The queue is bounded: when it is full, `transmit_batch` leaves
/// the remaining frames with the caller, as a full device ring would.
#[derive(Debug)]
pub struct Loopback {
    queue: VecDeque<PacketBuf>,
    limit: usize,
    mtu: usize,
    /// When the queue last went from empty to non-empty.
    ready_since: Instant,
    stats: DeviceStats,
}

impl Default for Loopback {
    fn default() -> Self {
        Loopback::new(DEFAULT_MTU, DEFAULT_LOOPBACK_QUEUE)
    }
}

impl Loopback {
    /// A loopback carrying IP packets of up to `mtu` bytes and holding at
    /// most `queue_limit` frames.
    pub fn new(mtu: usize, queue_limit: usize) -> Self {
        Loopback {
            queue: VecDeque::new(),
            limit: queue_limit,
            mtu,
            ready_since: Instant::ZERO,
            stats: DeviceStats::default(),
        }
    }

    /// Frames waiting to be received.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

impl Device for Loopback {
    fn receive_batch(
        &mut self,
        _pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        _now: Instant,
    ) -> io::Result<usize> {
        let n = max.min(self.queue.len());
        for frame in self.queue.drain(..n) {
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += frame.len() as u64;
            out.push(frame);
        }
        Ok(n)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        let mut taken = 0;
        while let Some(frame) = frames.front() {
            if frame.is_empty() || frame.len() > self.mtu + ETHERNET_HEADER_LEN {
                frames.pop_front();
                self.stats.tx_errors += 1;
                taken += 1;
                continue;
            }
            if self.queue.len() >= self.limit {
                break;
            }
            let Some(frame) = frames.pop_front() else {
                break;
            };
            if self.queue.is_empty() {
                self.ready_since = now;
            }
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += frame.len() as u64;
            self.queue.push_back(frame);
            taken += 1;
        }
        Ok(taken)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { mtu: self.mtu, ..Capabilities::default() }
    }

    fn poll_at(&self) -> Option<Instant> {
        // Queued frames are deliverable as soon as they were sent.
        (!self.queue.is_empty()).then_some(self.ready_since)
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_in_order_without_copying_and_queue_is_bounded() {
        let pool = BufferPool::new(2048, 16);
        let mut lo = Loopback::new(100, 3);
        let mut q: VecDeque<PacketBuf> = (0u8..5).map(|i| PacketBuf::from_slice(&pool, 0, &[i; 20]).unwrap()).collect();
        let now = Instant::from_millis(3);
        assert_eq!(pool.in_use(), 5);
        assert_eq!(lo.poll_at(), None);
        assert_eq!(lo.transmit_batch(&mut q, now).unwrap(), 3);
        assert_eq!(q.len(), 2, "the rest stays with the caller");
        assert_eq!(lo.poll_at(), Some(now));
        let mut out = Vec::new();
        assert_eq!(lo.receive_batch(&pool, &mut out, 2, now).unwrap(), 2);
        assert_eq!(lo.transmit_batch(&mut q, now).unwrap(), 2);
        assert_eq!(lo.receive_batch(&pool, &mut out, 10, now).unwrap(), 3);
        assert_eq!(out.iter().map(|f| f.to_vec()[0]).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(pool.in_use(), 5, "no copies were made");
        let s = lo.stats();
        assert_eq!((s.tx_frames, s.rx_frames, s.tx_bytes, s.rx_bytes), (5, 5, 100, 100));
        drop(out);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn oversize_and_empty_frames_are_refused() {
        let pool = BufferPool::new(2048, 16);
        let mut lo = Loopback::new(100, 8);
        let mut q = VecDeque::new();
        q.push_back(PacketBuf::from_slice(&pool, 0, &[0; 115]).unwrap());
        q.push_back(PacketBuf::new());
        q.push_back(PacketBuf::from_slice(&pool, 0, &[0; 114]).unwrap());
        assert_eq!(lo.transmit_batch(&mut q, Instant::ZERO).unwrap(), 3);
        assert_eq!(lo.stats().tx_errors, 2);
        assert_eq!(lo.queued(), 1);
        let mut out = Vec::new();
        lo.receive_batch(&pool, &mut out, 8, Instant::ZERO).unwrap();
        assert_eq!(out[0].len(), 114);
        drop(out);
        assert_eq!(pool.in_use(), 0);
    }
}
