//! The PacketFlow modules that look at each received frame, before the
//! engine processes any of its batch: the filter and the memory manager,
//! whichever are on. A frame is read once for both (`peek`: its datagram
//! and the engine's socket for it), its receiver looked up once, and the
//! datagrams of the same batch already let through to that socket, which
//! the engine has not delivered yet, counted as queued.
//!
//! For a datagram whose socket's queue would not take it, the memory
//! manager grows the queue if it can, and the filter does not drop that
//! datagram: while a socket's buffer can still be increased, the filter
//! does not drop for its being full. Otherwise the filter drops it if it
//! still would not fit (the paper's B2), and drops any other with
//! the receive path's drop rate if its receiver is not of high priority
//! (A and B1). A queue that keeps up is never full and so never grows; it
//! is not spared B1 for the room it could grow to.
//!
//! A frame costs a copy of its headers onto the stack, one hash lookup in
//! the engine's port map, one in the receiver table (and one in its
//! client table) and one in the batch's tally, whose capacity is kept;
//! nothing is allocated.

use super::peek::arrival;
use super::receivers::Receivers;
use super::{Filter, MemoryManager};
use crate::memory::Memory;
use crate::stats::NetdStats;
use hashbrown::HashMap;
use nagare_core::buf::PacketBuf;
use nagare_core::{Interface, UdpHandle};

/// Sockets one batch's tally holds without growing (a batch has at most
/// this many frames by default: `nagare_host::RX_BATCH`).
const BATCH_SOCKETS: usize = 64;

/// What becomes of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// On to the engine.
    Pass,
    /// Dropped: its receiver is not of high priority and the receive path
    /// is dropping (A and B1).
    LowPriority(UdpHandle),
    /// Dropped: its socket's queue would not take it (B2).
    Overflow(UdpHandle),
}

/// The modules that are on, and the datagrams of the batch under way let
/// through to each socket.
#[derive(Debug)]
pub(crate) struct Inbound {
    filter: Option<Filter>,
    mm: Option<MemoryManager>,
    batch: HashMap<UdpHandle, (usize, usize)>,
    /// Frames of this batch let through, and the sockets the filter
    /// dropped frames for, their queues being full.
    batch_passed: usize,
    batch_full: Vec<UdpHandle>,
}

impl Inbound {
    /// The frame path of `filter` and `mm`; `None` when both are off.
    pub fn new(filter: Option<Filter>, mm: Option<MemoryManager>) -> Option<Inbound> {
        let batch = HashMap::with_capacity(BATCH_SOCKETS);
        let batch_full = Vec::with_capacity(BATCH_SOCKETS);
        (filter.is_some() || mm.is_some()).then(|| Inbound { filter, mm, batch, batch_passed: 0, batch_full })
    }

    /// The filter, if it is on.
    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    pub fn filter_mut(&mut self) -> Option<&mut Filter> {
        self.filter.as_mut()
    }

    /// A new batch of frames, none of it delivered by the engine yet.
    pub fn begin_batch(&mut self) {
        self.batch.clear();
        self.batch_passed = 0;
        self.batch_full.clear();
    }

    /// If every frame of the batch was a datagram the filter dropped for a
    /// full queue, those queues' sockets: what netd reads next is likely
    /// as wasted until their receivers catch up.
    pub fn batch_wasted(&self) -> Option<&[UdpHandle]> {
        (self.batch_passed == 0 && !self.batch_full.is_empty()).then_some(&self.batch_full[..])
    }

    /// The sockets the batch under way dropped datagrams for, their
    /// queues being full (at most a batch's worth of them).
    pub fn batch_overflowed(&self) -> &[UdpHandle] {
        &self.batch_full
    }

    /// What becomes of `frame`, one of the batch under way, given the
    /// engine (`iface`, whose queues the memory manager grows), the
    /// sockets' receivers and the accounts growths are charged to; growths
    /// are counted in `stats`.
    pub fn judge(
        &mut self,
        iface: &mut Interface,
        receivers: &Receivers,
        memory: &Memory,
        stats: &mut NetdStats,
        frame: &PacketBuf,
    ) -> Verdict {
        if let Some(filter) = &mut self.filter {
            filter.see();
        }
        let Some((h, d)) = arrival(iface, frame) else { return Verdict::Pass };
        let dest = receivers.destination(h);
        let (ahead, ahead_bytes) = self.batch.get(&h).copied().unwrap_or((0, 0));
        let grown = match (&self.mm, &dest) {
            (Some(mm), Some(dest)) => mm.grow_for(iface, memory, stats, h, dest, (ahead, ahead_bytes), d.bytes),
            _ => false,
        };
        let fits = iface.udp_ref().socket(h).is_some_and(|u| u.has_room_for(ahead, ahead_bytes, d.smallest));
        if !fits {
            let Some(filter) = &mut self.filter else {
                // Without the filter the engine drops it.
                return Verdict::Pass;
            };
            if let Some(dest) = dest {
                filter.note_overflow(dest);
            }
            return Verdict::Overflow(h);
        }
        if let (Some(filter), Some(dest)) = (&mut self.filter, &dest) {
            // The datagram that grew its queue is the memory manager's to
            // keep: the filter does not drop for a socket it grows.
            if filter.drops_low_priority(*dest) && !grown {
                return Verdict::LowPriority(h);
            }
        }
        let tally = self.batch.entry(h).or_insert((0, 0));
        *tally = (tally.0.saturating_add(d.count), tally.1.saturating_add(d.bytes));
        Verdict::Pass
    }

    /// Whether `frame` goes on to the engine ([`Inbound::judge`]); a drop
    /// is counted in `stats` and for its socket.
    pub fn keep(
        &mut self,
        iface: &mut Interface,
        receivers: &mut Receivers,
        memory: &Memory,
        stats: &mut NetdStats,
        frame: &PacketBuf,
    ) -> bool {
        let (h, overflow) = match self.judge(iface, receivers, memory, stats, frame) {
            Verdict::Pass => {
                self.batch_passed += 1;
                return true;
            }
            Verdict::LowPriority(h) => {
                stats.filter_dropped_low_priority += 1;
                (h, false)
            }
            Verdict::Overflow(h) => {
                stats.filter_dropped_overflow += 1;
                if !self.batch_full.contains(&h) {
                    self.batch_full.push(h);
                }
                (h, true)
            }
        };
        receivers.count_drop(h, overflow);
        false
    }
}

#[cfg(test)]
mod tests;
