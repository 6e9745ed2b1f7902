//! PacketFlow's memory manager: a UDP socket's receive queue sized by its
//! priority and by how full it runs. Its largest queue is
//!
//! SB_max = default × (140 − prio) / 20
//!
//! (prio 100..139, the socket's own or its client's; `default` the size
//! at nice 0, `NetdConfig::mm_default`; never below
//! `memory::BUFFER_FLOOR`), the rule by which Linux gives time slices.
//! A socket starts at [`START`] (or its SB_max, if less) and its queue
//! doubles only when a datagram would not fit, up to SB_max and as far as
//! its client's budget and netd's cap allow (`Memory::room`), each growth
//! charged to its client. A queue its application sized (`SO_RCVBUF`)
//! is left as sized, as Linux leaves a buffer its application locked. A
//! priority that falls lowers SB_max: a queue above it is cut back to it,
//! never below what it holds.

use super::receivers::Destination;
use crate::memory::{Memory, BUFFER_FLOOR};
use crate::priority;
use crate::stats::NetdStats;
use nagare_core::{Interface, UdpHandle};

/// The queue a socket starts with: it holds the largest UDP datagram
/// (65,507 bytes), so no datagram needs a growth to be taken at all, and
/// a socket that never fills is charged a quarter of the fixed queue
/// netd gives without the memory manager (`memory::UDP_RECV_QUEUE`).
pub(crate) const START: usize = 64 * 1024;

/// The default SB_max at nice 0: the paper's 500 KB.
pub(crate) const DEFAULT_SIZE: usize = 512 * 1024;

/// What became of a queue that would not take a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Growth {
    /// Grown to this many bytes.
    Grown(usize),
    /// At its SB_max already, or sized by its application.
    AtMax,
    /// Below its SB_max, but its client's budget or netd's cap has no
    /// room for more.
    Refused,
}

/// The memory manager: the size at nice 0 its maxima scale from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemoryManager {
    default: usize,
}

impl MemoryManager {
    /// Maxima scaled from `default` bytes at nice 0 (at least the floor).
    pub fn new(default: usize) -> MemoryManager {
        MemoryManager { default: default.max(BUFFER_FLOOR) }
    }

    /// The size at nice 0.
    pub fn default_size(&self) -> usize {
        self.default
    }

    /// SB_max of a socket of priority `prio` (clamped to 100..=139).
    pub fn max_for(&self, prio: u8) -> usize {
        let prio = prio.clamp(priority::HIGHEST, priority::LOWEST);
        (self.default.saturating_mul(usize::from(140 - prio)) / 20).max(BUFFER_FLOOR)
    }

    /// The queue a new socket of priority `prio` starts with.
    pub fn start(&self, prio: u8) -> usize {
        START.min(self.max_for(prio))
    }

    /// The queue of socket `h` (at `dest`), of which `needed` bytes would
    /// not fit: doubled until they fit, capped at SB_max and at the room
    /// its client's budget and netd's cap leave; the new size charged.
    pub fn grow(
        &self,
        iface: &mut Interface,
        memory: &Memory,
        h: UdpHandle,
        dest: &Destination,
        needed: usize,
    ) -> Growth {
        let Some(limit) = iface.udp_ref().socket(h).map(|u| u.queue_limits().1) else { return Growth::AtMax };
        let max = self.max_for(dest.priority);
        if dest.sized || limit >= max {
            return Growth::AtMax;
        }
        let room = memory.room_of(dest.client, dest.socket);
        if room <= limit {
            return Growth::Refused;
        }
        let mut target = limit.max(1).saturating_mul(2);
        while target < needed && target < max {
            target = target.saturating_mul(2);
        }
        let Ok(in_force) = iface.udp().set_recv_queue_limit(h, target.min(max).min(room)) else { return Growth::AtMax };
        memory.charge(dest.client, dest.socket, in_force);
        Growth::Grown(in_force)
    }

    /// Grows the queue of socket `h` (at `dest`) if one more datagram of
    /// `len` bytes would not fit in its bytes, counting `ahead` datagrams
    /// of `ahead_bytes` already on their way to it, while its count of
    /// datagrams has room: whether it grew (counted in `stats`).
    #[allow(clippy::too_many_arguments)]
    pub fn grow_for(
        &self,
        iface: &mut Interface,
        memory: &Memory,
        stats: &mut NetdStats,
        h: UdpHandle,
        dest: &Destination,
        (ahead, ahead_bytes): (usize, usize),
        len: usize,
    ) -> bool {
        // Full in bytes with room for one more datagram: a larger queue
        // would take it.
        let needed = iface.udp_ref().socket(h).and_then(|u| {
            let (packets, bytes) = u.queue_limits();
            let needed = u.queued_bytes().saturating_add(ahead_bytes).saturating_add(len);
            (needed > bytes && u.queued().saturating_add(ahead) < packets).then_some(needed)
        });
        let Some(needed) = needed else { return false };
        match self.grow(iface, memory, h, dest, needed) {
            Growth::Grown(_) => {
                stats.mm_grown += 1;
                true
            }
            Growth::Refused => {
                stats.mm_refused += 1;
                false
            }
            Growth::AtMax => false,
        }
    }

    /// Socket `h` (at `dest`) after its priority changed: a queue above
    /// its SB_max is cut back to it, no lower than what it holds, and
    /// charged what is left. Returns whether it is still above.
    pub fn fit(&self, iface: &mut Interface, memory: &Memory, h: UdpHandle, dest: &Destination) -> bool {
        let Some(limit) = iface.udp_ref().socket(h).map(|u| u.queue_limits().1) else { return false };
        let max = self.max_for(dest.priority);
        if dest.sized || limit <= max {
            return false;
        }
        let Ok(in_force) = iface.udp().set_recv_queue_limit(h, max) else { return false };
        memory.charge(dest.client, dest.socket, in_force);
        in_force > max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_queue_scales_with_priority_as_time_slices_do() {
        let mm = MemoryManager::new(DEFAULT_SIZE);
        assert_eq!(mm.max_for(priority::DEFAULT), DEFAULT_SIZE, "nice 0: the default");
        assert_eq!(mm.max_for(125), DEFAULT_SIZE * 15 / 20, "nice 5");
        assert_eq!(mm.max_for(130), DEFAULT_SIZE / 2, "nice 10");
        assert_eq!(mm.max_for(priority::HIGHEST), 2 * DEFAULT_SIZE, "nice -20");
        assert_eq!(mm.max_for(priority::LOWEST), DEFAULT_SIZE / 20, "nice 19");
        // Out of range: clamped to 100..=139.
        assert_eq!(mm.max_for(0), 2 * DEFAULT_SIZE);
        assert_eq!(mm.max_for(255), DEFAULT_SIZE / 20);
        // Never below the floor, whatever the default.
        let small = MemoryManager::new(100 * 1024);
        assert_eq!(small.max_for(priority::LOWEST), BUFFER_FLOOR, "5 KiB raised to the floor");
        assert_eq!(MemoryManager::new(0).default_size(), BUFFER_FLOOR);
        assert_eq!(MemoryManager::new(0).max_for(priority::HIGHEST), 2 * BUFFER_FLOOR);
        // A socket starts at 64 KiB, or at its maximum when that is less.
        assert_eq!(mm.start(priority::DEFAULT), START);
        assert_eq!(mm.start(priority::LOWEST), DEFAULT_SIZE / 20);
    }
}
