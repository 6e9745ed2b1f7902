//! The PacketFlow filter: at the earliest point netd sees a received
//! frame, before the engine processes any of its batch, a UDP datagram is
//! dropped
//!
//! - for a receiver that is not of high priority, with the probability of
//!   the last period's receive-path drop rate, while the receive path is
//!   dropping (the paper's conditions A and B1), and
//! - for a socket whose queue would not take it (A and B2): the engine
//!   would drop it there anyway, after the work of getting it there.
//!
//! TCP is never dropped here: a dropped segment comes back as a
//! retransmission, more work and not less. High priority is the highest
//! (numerically least) priority among the UDP sockets datagrams came to
//! and the clients whose TCP connections received segments, in this
//! period or the last, or a client the scheduler has boosted.
//!
//! A frame costs a peek at its headers (its first 34 bytes and the 8 of
//! the UDP header, copied onto the stack), one hash lookup in the
//! engine's port map, two in the receiver table and one in the batch's
//! tally (whose capacity is kept); nothing is allocated. A frame
//! the filter cannot read as an unfragmented UDP datagram to one of
//! netd's addresses on its MAC address passes to the engine, which counts
//! and drops what is malformed.

use super::receivers::Receivers;
use crate::stats::NetdStats;
use hashbrown::HashMap;
use nagare_core::buf::PacketBuf;
use nagare_core::{Interface, UdpHandle};
use std::net::{Ipv4Addr, SocketAddrV4};

const ETHERNET_HEADER: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const IPV4_MIN_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
const PROTOCOL_UDP: u8 = 17;
/// No receiver seen in a period.
const NO_PRIORITY: u8 = u8::MAX;
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
    /// Dropped: its socket's queue would not take it (A and B2).
    Overflow(UdpHandle),
}

/// A UDP datagram as the filter reads it from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Datagram {
    dst: SocketAddrV4,
    /// Datagrams the frame stands for (more than one for a UDP
    /// super-frame), their payload bytes in all, and the smallest.
    count: usize,
    bytes: usize,
    smallest: usize,
}

/// The filter's state: the drop probability of this period, the draw,
/// the receivers' best priority, and the datagrams of the batch under way
/// that it let through.
#[derive(Debug)]
pub(crate) struct Filter {
    /// The drop probability for condition B1, in 2^-32 units (2^32: every
    /// one).
    threshold: u64,
    /// Drops and frames seen in the last period, for the report.
    rate: (u64, u64),
    /// Frames seen in this period.
    seen: u64,
    /// xorshift64* state (never 0).
    state: u64,
    /// The best priority among receivers in this period and the last.
    best_now: u8,
    best_before: u8,
    /// Datagrams and payload bytes let through to each socket in this
    /// batch, which the engine has not delivered yet.
    batch: HashMap<UdpHandle, (usize, usize)>,
    /// Frames of this batch let through, and dropped for their socket's
    /// full queue.
    batch_passed: usize,
    batch_overflow: usize,
}

impl Filter {
    /// A filter drawing from `seed`, with the receive path not dropping.
    pub fn new(seed: u64) -> Filter {
        Filter {
            threshold: 0,
            rate: (0, 0),
            seen: 0,
            state: seed | 1,
            best_now: NO_PRIORITY,
            best_before: NO_PRIORITY,
            batch: HashMap::with_capacity(BATCH_SOCKETS),
            batch_passed: 0,
            batch_overflow: 0,
        }
    }

    /// A receiver of `priority` (a client whose TCP connections received
    /// segments) was seen in this period.
    pub fn note_receiver(&mut self, priority: u8) {
        self.best_now = self.best_now.min(priority);
    }

    /// Ends a period in which the receive path dropped `drops` frames:
    /// the next period drops datagrams for receivers of less than high
    /// priority with probability drops / (drops + frames seen).
    pub fn end_period(&mut self, drops: u64) {
        let total = drops.saturating_add(self.seen);
        self.threshold = if total == 0 { 0 } else { ((u128::from(drops) << 32) / u128::from(total)) as u64 };
        self.rate = (drops, self.seen);
        self.seen = 0;
        self.best_before = self.best_now;
        self.best_now = NO_PRIORITY;
    }

    /// The last period's drops and frames seen.
    pub fn last_period(&self) -> (u64, u64) {
        self.rate
    }

    /// A new batch of frames, none of it delivered by the engine yet.
    pub fn begin_batch(&mut self) {
        self.batch.clear();
        self.batch_passed = 0;
        self.batch_overflow = 0;
    }

    /// Whether every frame of the batch was a datagram for a full queue
    /// and at least one was: what netd reads next is likely as wasted
    /// until the receivers catch up.
    pub fn batch_wasted(&self) -> bool {
        self.batch_passed == 0 && self.batch_overflow > 0
    }

    /// What becomes of `frame`, one of the batch under way, given the
    /// engine's sockets (`iface`) and their receivers.
    pub fn judge(&mut self, iface: &Interface, receivers: &Receivers, frame: &PacketBuf) -> Verdict {
        self.seen += 1;
        let Some(d) = read_datagram(frame, &iface.config().mac.0) else { return Verdict::Pass };
        if !iface.has_address(*d.dst.ip()) {
            return Verdict::Pass;
        }
        let Some((h, socket)) = iface.udp_ref().receiver_of(d.dst) else { return Verdict::Pass };
        let (ahead, ahead_bytes) = self.batch.get(&h).copied().unwrap_or((0, 0));
        if !socket.has_room_for(ahead, ahead_bytes, d.smallest) {
            return Verdict::Overflow(h);
        }
        if let Some(dest) = receivers.destination(h) {
            self.best_now = self.best_now.min(dest.priority);
            let high = dest.boosted || dest.priority <= self.best_now.min(self.best_before);
            if !high && self.threshold > 0 && u64::from(self.draw()) < self.threshold {
                return Verdict::LowPriority(h);
            }
        }
        let tally = self.batch.entry(h).or_insert((0, 0));
        *tally = (tally.0.saturating_add(d.count), tally.1.saturating_add(d.bytes));
        Verdict::Pass
    }

    /// Whether `frame` goes on to the engine ([`Filter::judge`]); a drop is
    /// counted in `stats` and for its socket.
    pub fn keep(
        &mut self,
        iface: &Interface,
        receivers: &mut Receivers,
        stats: &mut NetdStats,
        frame: &PacketBuf,
    ) -> bool {
        let h = match self.judge(iface, receivers, frame) {
            Verdict::Pass => {
                self.batch_passed += 1;
                return true;
            }
            Verdict::LowPriority(h) => {
                stats.filter_dropped_low_priority += 1;
                h
            }
            Verdict::Overflow(h) => {
                stats.filter_dropped_overflow += 1;
                self.batch_overflow += 1;
                h
            }
        };
        receivers.count_drop(h);
        false
    }

    /// The next pseudo-random 32 bits (xorshift64*; not for secrets).
    fn draw(&mut self) -> u32 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// `frame` as an unfragmented UDP datagram sent to `mac`, if it is one
/// whose headers hold together.
fn read_datagram(frame: &PacketBuf, mac: &[u8; 6]) -> Option<Datagram> {
    let mut head = [0u8; ETHERNET_HEADER + IPV4_MIN_HEADER];
    if frame.copy_out(0, &mut head) != head.len() || head[..6] != mac[..] {
        return None;
    }
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let ip = &head[ETHERNET_HEADER..];
    if be16(&head, 12) != ETHERTYPE_IPV4 || ip[0] >> 4 != 4 || ip[9] != PROTOCOL_UDP {
        return None;
    }
    let header_len = usize::from(ip[0] & 0x0f) * 4;
    let total_len = usize::from(be16(ip, 2));
    // More fragments, or an offset: only the first fragment has the UDP
    // header, and the datagram's fate is decided once it is whole.
    if header_len < IPV4_MIN_HEADER || be16(ip, 6) & 0x3fff != 0 {
        return None;
    }
    let mut udp = [0u8; UDP_HEADER];
    if frame.copy_out(ETHERNET_HEADER + header_len, &mut udp) != UDP_HEADER {
        return None;
    }
    let udp_len = usize::from(be16(&udp, 4));
    let ip_payload = total_len.checked_sub(header_len)?;
    let in_frame = frame.len().checked_sub(ETHERNET_HEADER + header_len)?;
    if udp_len < UDP_HEADER || udp_len > ip_payload || udp_len > in_frame {
        return None;
    }
    let dst = SocketAddrV4::new(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]), be16(&udp, 2));
    let bytes = udp_len - UDP_HEADER;
    let offload = frame.offload();
    if !offload.is_udp_segmented() {
        return Some(Datagram { dst, count: 1, bytes, smallest: bytes });
    }
    // A super-frame: full segments and a last one of what is left.
    let segment = usize::from(offload.segment_size);
    if bytes == 0 {
        return None;
    }
    let count = bytes.div_ceil(segment);
    Some(Datagram { dst, count, bytes, smallest: bytes - (count - 1) * segment })
}

#[cfg(test)]
mod tests;
