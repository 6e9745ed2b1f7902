//! The sender's SACK scoreboard and the loss recovery queries of RFC 6675.
//!
//! The scoreboard keeps what the peer reported with SACK (RFC 2018) as a
//! short sorted list of sequence ranges above `snd_una`, never per segment,
//! so that `IsLost`, `SetPipe` and `NextSeg` are a pass over at most
//! [`MAX_RANGES`] ranges however large the window is. Blocks come from the
//! network and are validated before they are believed; a first block that
//! reports a duplicate (D-SACK, RFC 2883) is returned to the caller rather
//! than recorded.
//!
//! Sequence numbers are handled as offsets from `snd_una`: every stored
//! range lies within `(snd_una, snd_nxt]`, a span far below 2^31, so the
//! offsets are exact and wrapping never matters.
//!
//! In the RFC, HighRxt, RescueRxt and RecoveryPoint name the highest octet
//! of something. Here, like `snd_nxt`, they are the sequence number just
//! past it, so "S <= HighRxt" reads `s < high_rxt` and "HighACK >
//! RescueRxt" reads `snd_una > rescue_rxt`.

use alloc::vec::Vec;
use core::fmt;
use nagare_wire::TcpSeqNumber;

/// Most ranges kept. A receiver reports at most four blocks per ACK, and
/// more than this many holes in one window is either pathological loss or
/// a peer trying to make the sender do work; forgetting the highest ranges
/// costs only extra retransmissions.
pub const MAX_RANGES: usize = 32;

/// How far below `snd_una` a D-SACK block may lie: the largest window
/// (RFC 7323). Anything further is not a duplicate of data still in the
/// network, and believing it would let garbage pass for a D-SACK.
const MAX_DSACK_DISTANCE: u32 = 1 << 30;

/// A capacity the scoreboard keeps when it empties; anything larger is
/// given back so that idle connections hold nothing for past losses.
const KEEP_CAPACITY: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq)]
struct Range {
    start: TcpSeqNumber,
    end: TcpSeqNumber,
}

impl Range {
    #[inline]
    fn len(&self) -> usize {
        self.end.0.wrapping_sub(self.start.0) as usize
    }
}

/// What one ACK's SACK blocks changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackUpdate {
    /// Bytes SACKed now that were not before (what RFC 6937 counts as
    /// delivered beside the cumulative ACK). A range forgotten because of
    /// [`MAX_RANGES`] reduces it: the count is the scoreboard's growth.
    pub newly_sacked: usize,
    /// The first block, if it reported data received twice (RFC 2883
    /// section 4): a hint that a retransmission was spurious.
    pub dsack: Option<(u32, u32)>,
}

/// What to send next in loss recovery (RFC 6675 section 4, `NextSeg()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextSeg {
    /// Retransmit `len` bytes (at most one MSS, none of them SACKed) from
    /// `seq` (rules 1 and 3). The caller then moves HighRxt to `seq + len`.
    Retransmit { seq: TcpSeqNumber, len: usize },
    /// Send new data (rule 2).
    NewData,
    /// The rescue retransmission of rule 4: `len` bytes from `seq`, ending
    /// at the highest unSACKed byte. The caller must not move HighRxt, and
    /// must call [`Scoreboard::set_rescue_rxt`] with RecoveryPoint.
    Rescue { seq: TcpSeqNumber, len: usize },
}

/// The SACK scoreboard of one connection.
#[derive(Clone, Default)]
pub struct Scoreboard {
    /// Sorted, disjoint and never adjacent. Empty holds no allocation.
    ranges: Vec<Range>,
    sacked: usize,
    /// RFC 6675 RescueRxt (`None` is "undefined").
    rescue_rxt: Option<TcpSeqNumber>,
    /// Every unSACKed byte below this is lost, whatever IsLost says: set
    /// when a time-based rule (RACK, RFC 8985) proved it.
    lost_mark: Option<TcpSeqNumber>,
}

/// `seq - base` for a `seq` known not to lie below `base`.
#[inline]
fn off(seq: TcpSeqNumber, base: TcpSeqNumber) -> u32 {
    seq.0.wrapping_sub(base.0)
}

/// Bytes from `snd_una` to `snd_nxt`, 0 if they are not in that order.
#[inline]
fn flight(snd_una: TcpSeqNumber, snd_nxt: TcpSeqNumber) -> u32 {
    u32::try_from(snd_nxt - snd_una).unwrap_or(0)
}

/// `seq - snd_una` clamped into `0..=flight`.
#[inline]
fn clamp_off(seq: TcpSeqNumber, snd_una: TcpSeqNumber, flight: u32) -> u32 {
    u32::try_from(seq - snd_una).unwrap_or(0).min(flight)
}

impl Scoreboard {
    /// An empty scoreboard.
    pub fn new() -> Self {
        Scoreboard::default()
    }

    /// Whether nothing is SACKed.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Bytes SACKed above `snd_una`.
    pub fn sacked_bytes(&self) -> usize {
        self.sacked
    }

    /// Ranges held (at most [`MAX_RANGES`]).
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }

    /// Forgets everything, RescueRxt included (after a retransmission
    /// timeout, RFC 2018 section 5.1 and RFC 6675 section 5.1).
    pub fn clear(&mut self) {
        self.ranges = Vec::new();
        self.sacked = 0;
        self.rescue_rxt = None;
        self.lost_mark = None;
    }

    /// RescueRxt, as the sequence number just past it.
    pub fn rescue_rxt(&self) -> Option<TcpSeqNumber> {
        self.rescue_rxt
    }

    /// Sets RescueRxt. RFC 6675 section 5 sets it twice: on entering
    /// recovery to the end of the first retransmission (step 4.3, which
    /// keeps the rescue from coming too early), and to RecoveryPoint (the
    /// `snd_nxt` of the moment recovery began) once a [`NextSeg::Rescue`]
    /// has been sent, which allows one rescue per recovery episode.
    pub fn set_rescue_rxt(&mut self, seq: Option<TcpSeqNumber>) {
        self.rescue_rxt = seq;
    }

    /// Marks every unSACKed byte below `seq` lost, beside what IsLost
    /// finds (RFC 8985's RACK marks losses by time, not by count). The
    /// mark is forgotten once `snd_una` passes it or the scoreboard clears.
    pub fn mark_lost_below(&mut self, seq: TcpSeqNumber) {
        if self.lost_mark.is_none_or(|m| m - seq < 0) {
            self.lost_mark = Some(seq);
        }
    }

    /// Records the SACK blocks of an ACK.
    ///
    /// `snd_una` is the cumulative acknowledgment after this ACK and
    /// `snd_nxt` the highest sequence number sent plus one. A block is
    /// believed only if it lies within `(snd_una, snd_nxt]` and is not
    /// empty; anything else is ignored, since a peer (or an attacker) could
    /// otherwise make the sender skip data that never arrived. The first
    /// block is a D-SACK if it lies below `snd_una` (no more than a maximal
    /// window below) or inside the second block (RFC 2883 section 4).
    pub fn update(&mut self, blocks: &[(u32, u32)], snd_una: TcpSeqNumber, snd_nxt: TcpSeqNumber) -> SackUpdate {
        self.advance(snd_una);
        let flight = flight(snd_una, snd_nxt);
        let valid = |(left, right): (u32, u32)| {
            let lo = left.wrapping_sub(snd_una.0);
            let hi = right.wrapping_sub(snd_una.0);
            (lo > 0 && lo < hi && hi <= flight).then_some((lo, hi))
        };
        let mut out = SackUpdate::default();
        let mut rest = blocks;
        if let Some((&first, tail)) = blocks.split_first() {
            let below = {
                let (depth, len) = (snd_una.0.wrapping_sub(first.0), first.1.wrapping_sub(first.0));
                len > 0 && len <= depth && depth <= MAX_DSACK_DISTANCE
            };
            let inside = match (valid(first), tail.first().and_then(|&b| valid(b))) {
                (Some((lo1, hi1)), Some((lo2, hi2))) => lo2 <= lo1 && hi1 <= hi2,
                _ => false,
            };
            if below || inside {
                out.dsack = Some(first);
                rest = tail;
            }
        }
        let before = self.sacked;
        for &block in rest {
            if let Some((lo, hi)) = valid(block) {
                self.insert(snd_una, lo, hi);
            }
        }
        out.newly_sacked = self.sacked.saturating_sub(before);
        out
    }

    /// Adds `snd_una + lo .. snd_una + hi`, joining the ranges it touches.
    fn insert(&mut self, snd_una: TcpSeqNumber, lo: u32, hi: u32) {
        let i = self.ranges.partition_point(|r| off(r.end, snd_una) < lo);
        let j = self.ranges.partition_point(|r| off(r.start, snd_una) <= hi).max(i);
        if i == j {
            if self.ranges.len() >= MAX_RANGES {
                // Full: whichever range is highest, the new one included,
                // is the one to forget.
                if i >= self.ranges.len() {
                    return;
                }
                if let Some(last) = self.ranges.pop() {
                    self.sacked = self.sacked.saturating_sub(last.len());
                }
            }
            self.ranges.insert(i, Range { start: snd_una + lo as usize, end: snd_una + hi as usize });
            self.sacked += (hi - lo) as usize;
            return;
        }
        let covered: usize = self.ranges.get(i..j).unwrap_or_default().iter().map(Range::len).sum();
        let start = self.ranges.get(i).map_or(lo, |r| off(r.start, snd_una).min(lo));
        let end = self.ranges.get(j - 1).map_or(hi, |r| off(r.end, snd_una).max(hi));
        if let Some(first) = self.ranges.get_mut(i) {
            first.start = snd_una + start as usize;
            first.end = snd_una + end as usize;
        }
        self.ranges.drain(i + 1..j);
        self.sacked = self.sacked.saturating_sub(covered) + end.saturating_sub(start) as usize;
    }

    /// Forgets what lies below the new `snd_una`.
    pub fn advance(&mut self, snd_una: TcpSeqNumber) {
        let gone = self.ranges.iter().take_while(|r| r.end - snd_una <= 0).count();
        if gone > 0 {
            let bytes: usize = self.ranges.get(..gone).unwrap_or_default().iter().map(Range::len).sum();
            self.sacked = self.sacked.saturating_sub(bytes);
            self.ranges.drain(..gone);
        }
        if let Some(first) = self.ranges.first_mut() {
            if first.start - snd_una < 0 {
                let cut = off(snd_una, first.start) as usize;
                first.start = snd_una;
                self.sacked = self.sacked.saturating_sub(cut);
            }
        }
        if self.ranges.is_empty() && self.ranges.capacity() > KEEP_CAPACITY {
            self.ranges = Vec::new();
        }
        // Once passed, RescueRxt allows a rescue exactly as if undefined;
        // forgetting it keeps a stale value from coming back into range
        // when sequence numbers wrap.
        if self.rescue_rxt.is_some_and(|r| snd_una > r) {
            self.rescue_rxt = None;
        }
        if self.lost_mark.is_some_and(|m| m - snd_una <= 0) {
            self.lost_mark = None;
        }
    }

    /// Whether the byte `seq` has been SACKed.
    pub fn is_sacked(&self, seq: TcpSeqNumber) -> bool {
        let Some(base) = self.ranges.first().map(|r| r.start) else {
            return false;
        };
        // Offsets from the lowest range: a `seq` below it wraps to a huge
        // offset and correctly matches nothing.
        let at = off(seq, base);
        let k = self.ranges.partition_point(|r| off(r.end, base) <= at);
        self.ranges.get(k).is_some_and(|r| off(r.start, base) <= at)
    }

    /// The sequence number just past the highest SACKed byte.
    pub fn highest_sacked(&self) -> Option<TcpSeqNumber> {
        self.ranges.last().map(|r| r.end)
    }

    /// RFC 6675 `IsLost(SeqNum)`: true when `dup_thresh` discontiguous
    /// SACKed ranges lie above `seq`, or more than `(dup_thresh - 1) * mss`
    /// SACKed bytes do.
    ///
    /// The scoreboard does not keep segment boundaries, so "discontiguous
    /// SACKed sequences" are counted as separate ranges; SACKed segments
    /// that are contiguous are caught by the byte rule instead, which
    /// for full-sized segments says the same.
    pub fn is_lost(&self, seq: TcpSeqNumber, mss: usize, dup_thresh: usize) -> bool {
        let dup_thresh = dup_thresh.max(1);
        let threshold = (dup_thresh - 1).saturating_mul(mss);
        let (mut count, mut bytes) = (0usize, 0usize);
        for r in self.ranges.iter().rev() {
            // Bytes of this range with sequence numbers greater than `seq`.
            let above = i64::from(r.end - seq) - 1;
            if above <= 0 {
                break;
            }
            count += 1;
            bytes += (above.min(r.len() as i64)) as usize;
            if count >= dup_thresh || bytes > threshold {
                return true;
            }
        }
        false
    }

    /// Offset from `snd_una` below which every unSACKed byte is lost: by
    /// IsLost, or by the mark of [`mark_lost_below`](Self::mark_lost_below).
    ///
    /// IsLost only becomes more true further down, and is the same for
    /// every byte of a hole, so losses are exactly the holes below some
    /// range's start: the highest range at which the SACKed data above
    /// meets the threshold.
    fn lost_below(&self, snd_una: TcpSeqNumber, flight: u32, mss: usize, dup_thresh: usize) -> u32 {
        let marked = self.lost_mark.map_or(0, |m| clamp_off(m, snd_una, flight));
        self.counted_lost_below(snd_una, flight, mss, dup_thresh).max(marked)
    }

    /// [`lost_below`](Self::lost_below) by IsLost's count alone.
    fn counted_lost_below(&self, snd_una: TcpSeqNumber, flight: u32, mss: usize, dup_thresh: usize) -> u32 {
        let dup_thresh = dup_thresh.max(1);
        let threshold = (dup_thresh - 1).saturating_mul(mss);
        let (mut count, mut bytes) = (0usize, 0usize);
        for r in self.ranges.iter().rev() {
            count += 1;
            bytes += r.len();
            if count >= dup_thresh || bytes > threshold {
                return off(r.start, snd_una).min(flight);
            }
        }
        0
    }

    /// SACKed bytes at offsets `a..b` from `snd_una`.
    fn sacked_in(&self, snd_una: TcpSeqNumber, a: u32, b: u32) -> u32 {
        self.ranges
            .iter()
            .map(|r| {
                let (s, e) = (off(r.start, snd_una).max(a), off(r.end, snd_una).min(b));
                e.saturating_sub(s)
            })
            .sum()
    }

    /// Unsacked bytes at offsets `a..b` from `snd_una`.
    fn unsacked_in(&self, snd_una: TcpSeqNumber, a: u32, b: u32) -> u32 {
        b.saturating_sub(a).saturating_sub(self.sacked_in(snd_una, a, b))
    }

    /// RFC 6675 `SetPipe()`: the bytes estimated in the network. Every
    /// unSACKed byte in `snd_una..snd_nxt` counts once if not lost, and
    /// once more if it was retransmitted (lies below `high_rxt`, the
    /// sequence number just past HighRxt).
    pub fn pipe(
        &self,
        snd_una: TcpSeqNumber,
        snd_nxt: TcpSeqNumber,
        high_rxt: TcpSeqNumber,
        mss: usize,
        dup_thresh: usize,
    ) -> usize {
        let flight = flight(snd_una, snd_nxt);
        let high_rxt = clamp_off(high_rxt, snd_una, flight);
        let lost = self.lost_below(snd_una, flight, mss, dup_thresh);
        let in_network = self.unsacked_in(snd_una, lost, flight);
        let retransmitted = self.unsacked_in(snd_una, 0, high_rxt);
        in_network as usize + retransmitted as usize
    }

    /// The first unSACKed offset at or above `from` and the end of the
    /// hole it lies in (both at most `flight`).
    fn hole_from(&self, snd_una: TcpSeqNumber, from: u32, flight: u32) -> (u32, u32) {
        let mut at = from;
        let mut k = self.ranges.partition_point(|r| off(r.end, snd_una) <= at);
        if let Some(r) = self.ranges.get(k) {
            if off(r.start, snd_una) <= at {
                at = off(r.end, snd_una);
                k += 1;
            }
        }
        let end = self.ranges.get(k).map_or(flight, |r| off(r.start, snd_una));
        (at.min(flight), end.min(flight))
    }

    /// The highest hole below `flight`, as offsets.
    fn last_hole(&self, snd_una: TcpSeqNumber, flight: u32) -> Option<(u32, u32)> {
        let mut hole_end = flight;
        for r in self.ranges.iter().rev() {
            let (s, e) = (off(r.start, snd_una).min(flight), off(r.end, snd_una).min(flight));
            if e < hole_end {
                return Some((e, hole_end));
            }
            hole_end = hole_end.min(s);
        }
        (hole_end > 0).then_some((0, hole_end))
    }

    /// RFC 6675 `NextSeg()`: what to send next while in recovery (the
    /// caller checks that pipe leaves room in cwnd first).
    ///
    /// `high_rxt` is the sequence number just past HighRxt (`snd_una` when
    /// nothing was retransmitted yet), `snd_nxt` the highest sequence number
    /// sent plus one, and `can_send_new` whether unsent data exists and the
    /// peer's window admits it. Rule 4 consults RescueRxt (see
    /// [`set_rescue_rxt`](Self::set_rescue_rxt)).
    pub fn next_seg(
        &self,
        snd_una: TcpSeqNumber,
        snd_nxt: TcpSeqNumber,
        high_rxt: TcpSeqNumber,
        mss: usize,
        dup_thresh: usize,
        can_send_new: bool,
    ) -> Option<NextSeg> {
        let flight = flight(snd_una, snd_nxt);
        let mss = u32::try_from(mss.max(1)).unwrap_or(u32::MAX);
        let from = clamp_off(high_rxt, snd_una, flight);
        // (1.b) and rule 3: only holes below the highest SACKed byte.
        let highest = self.ranges.last().map_or(0, |r| off(r.end, snd_una).min(flight));
        let (at, hole_end) = self.hole_from(snd_una, from, flight);
        let retransmit =
            NextSeg::Retransmit { seq: snd_una + at as usize, len: hole_end.saturating_sub(at).min(mss) as usize };
        if at < highest && at < self.lost_below(snd_una, flight, mss as usize, dup_thresh) {
            return Some(retransmit);
        }
        if can_send_new {
            return Some(NextSeg::NewData);
        }
        if at < highest {
            return Some(retransmit);
        }
        if self.rescue_rxt.is_none_or(|r| snd_una > r) {
            if let Some((start, end)) = self.last_hole(snd_una, flight) {
                let seq = end.saturating_sub(mss).max(start);
                return Some(NextSeg::Rescue { seq: snd_una + seq as usize, len: (end - seq) as usize });
            }
        }
        None
    }
}

impl fmt::Debug for Scoreboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for r in &self.ranges {
            list.entry(&(r.start.0, r.end.0));
        }
        list.finish()?;
        write!(f, " {} bytes SACKed, RescueRxt {:?}", self.sacked, self.rescue_rxt.map(|s| s.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn s(n: u32) -> TcpSeqNumber {
        TcpSeqNumber(n)
    }

    fn ranges(sb: &Scoreboard) -> Vec<(u32, u32)> {
        sb.ranges.iter().map(|r| (r.start.0, r.end.0)).collect()
    }

    #[test]
    fn empty_scoreboard_is_small_and_holds_no_allocation() {
        let sb = Scoreboard::new();
        assert_eq!(sb.ranges.capacity(), 0);
        assert!(core::mem::size_of::<Scoreboard>() <= 48);
        assert!(!sb.is_lost(s(0), 1460, 3));
        assert_eq!(sb.pipe(s(0), s(1000), s(0), 100, 3), 1000);
        assert_eq!(sb.next_seg(s(0), s(1000), s(0), 100, 3, true), Some(NextSeg::NewData));
    }

    #[test]
    fn a_lost_mark_takes_the_holes_below_it_out_of_the_pipe() {
        let mut sb = Scoreboard::new();
        let (una, nxt) = (s(0), s(5000));
        sb.update(&[(4000, 5000)], una, nxt);
        // One SACKed segment is not enough for IsLost: all 4000 unSACKed
        // bytes count as in the network.
        assert_eq!(sb.pipe(una, nxt, una, 1000, 3), 4000);
        assert_eq!(sb.next_seg(una, nxt, una, 1000, 3, true), Some(NextSeg::NewData));
        sb.mark_lost_below(s(4000));
        sb.mark_lost_below(s(2000));
        assert_eq!(sb.pipe(una, nxt, una, 1000, 3), 0);
        // Rule 1: a lost hole goes before new data.
        assert_eq!(sb.next_seg(una, nxt, una, 1000, 3, true), Some(NextSeg::Retransmit { seq: s(0), len: 1000 }));
        assert_eq!(sb.pipe(una, nxt, s(1000), 1000, 3), 1000);
        // Still in force when snd_una moves up to it, gone after a clear.
        sb.advance(s(1000));
        assert_eq!(sb.pipe(s(1000), nxt, s(1000), 1000, 3), 0);
        sb.clear();
        sb.update(&[(4000, 5000)], s(1000), nxt);
        assert_eq!(sb.pipe(s(1000), nxt, s(1000), 1000, 3), 3000);
    }

    #[test]
    fn merges_and_counts_only_new_bytes() {
        let mut sb = Scoreboard::new();
        let (una, nxt) = (s(1000), s(5000));
        assert_eq!(sb.update(&[(2000, 2500)], una, nxt).newly_sacked, 500);
        assert_eq!(sb.update(&[(3000, 3500), (2000, 2500)], una, nxt).newly_sacked, 500);
        // Adjacent on the left, overlapping on the right: one range.
        assert_eq!(sb.update(&[(1500, 2000), (2400, 3100)], una, nxt).newly_sacked, 500 + 500);
        assert_eq!(ranges(&sb), [(1500, 3500)]);
        assert_eq!(sb.sacked_bytes(), 2000);
        assert!(sb.is_sacked(s(1500)) && sb.is_sacked(s(3499)));
        assert!(!sb.is_sacked(s(1499)) && !sb.is_sacked(s(3500)) && !sb.is_sacked(s(999_999)));
        assert_eq!(sb.highest_sacked(), Some(s(3500)));
    }

    #[test]
    fn hostile_blocks_are_ignored() {
        let mut sb = Scoreboard::new();
        let (una, nxt) = (s(10_000), s(20_000));
        let hostile: [(u32, u32); 8] = [
            (9_000, 11_000),              // starts below snd_una
            (10_000, 11_000),             // starts at snd_una: it would be acknowledged
            (19_000, 20_001),             // ends past snd_nxt
            (15_000, 14_000),             // inverted
            (15_000, 15_000),             // empty
            (10_001, 10_000 + (1 << 31)), // huge
            (u32::MAX, 5),                // wraps, far outside
            (0x8000_0000 + 10_000, 0x8000_0000 + 12_000),
        ];
        for pair in hostile.chunks(2) {
            let u = sb.update(pair, una, nxt);
            assert_eq!(u.newly_sacked, 0, "{pair:?}");
        }
        assert!(sb.is_empty());
        // Nonsense flight (snd_nxt behind snd_una) accepts nothing.
        assert_eq!(sb.update(&[(20, 30)], s(100), s(10)).newly_sacked, 0);
        assert_eq!(sb.pipe(s(100), s(10), s(100), 10, 3), 0);
        assert_eq!(sb.next_seg(s(100), s(10), s(100), 10, 3, false), None);
    }

    #[test]
    fn blocks_across_the_wrap() {
        let mut sb = Scoreboard::new();
        let una = s(u32::MAX - 999);
        let nxt = una + 3000;
        let u = sb.update(&[(u32::MAX - 499, 500), (1000, 1500)], una, nxt);
        assert_eq!(u.newly_sacked, 1500);
        assert_eq!(ranges(&sb), [(u32::MAX - 499, 500), (1000, 1500)]);
        assert!(sb.is_sacked(s(u32::MAX)) && sb.is_sacked(s(0)) && !sb.is_sacked(s(600)));
        sb.advance(s(100));
        assert_eq!(ranges(&sb), [(100, 500), (1000, 1500)]);
        assert_eq!(sb.sacked_bytes(), 900);
    }

    #[test]
    fn bounded_and_drops_the_highest() {
        let mut sb = Scoreboard::new();
        let una = s(0);
        let nxt = s(100_000);
        for k in 0..40u32 {
            sb.update(&[(1000 + k * 100, 1050 + k * 100)], una, nxt);
        }
        assert_eq!(sb.ranges(), MAX_RANGES);
        assert_eq!(sb.highest_sacked(), Some(s(1000 + 31 * 100 + 50)));
        // A lower range displaces the highest one.
        sb.update(&[(500, 550)], una, nxt);
        assert_eq!(sb.ranges(), MAX_RANGES);
        assert_eq!(sb.highest_sacked(), Some(s(1000 + 30 * 100 + 50)));
        assert_eq!(sb.sacked_bytes(), MAX_RANGES * 50);
        sb.advance(s(100_000));
        assert!(sb.is_empty());
        assert_eq!(sb.sacked_bytes(), 0);
        assert_eq!(sb.ranges.capacity(), 0, "an emptied scoreboard gives back its memory");
    }

    /// RFC 2883 section 4.1.1: the ACK for 3000-3499 and 3500-3999 was lost
    /// and 3000-3499 was sent again.
    #[test]
    fn dsack_below_the_cumulative_ack() {
        let mut sb = Scoreboard::new();
        let u = sb.update(&[(3000, 3500)], s(4000), s(4000));
        assert_eq!(u, SackUpdate { newly_sacked: 0, dsack: Some((3000, 3500)) });
        assert!(sb.is_empty());
    }

    /// RFC 2883 section 4.1.2: a duplicate and an out-of-order segment.
    #[test]
    fn dsack_with_an_out_of_order_block() {
        let mut sb = Scoreboard::new();
        assert_eq!(sb.update(&[(4500, 5000)], s(4000), s(5000)).newly_sacked, 500);
        let u = sb.update(&[(3000, 3500), (4500, 5000)], s(4000), s(5000));
        assert_eq!(u, SackUpdate { newly_sacked: 0, dsack: Some((3000, 3500)) });
        assert_eq!(ranges(&sb), [(4500, 5000)]);
    }

    /// RFC 2883 section 4.1.3: a duplicate of an out-of-order segment,
    /// reported inside the second block.
    #[test]
    fn dsack_inside_the_second_block() {
        let mut sb = Scoreboard::new();
        sb.update(&[(4500, 5000)], s(4000), s(5500));
        sb.update(&[(4500, 5500)], s(4000), s(5500));
        let u = sb.update(&[(4500, 5000), (4500, 5500)], s(4000), s(5500));
        assert_eq!(u, SackUpdate { newly_sacked: 0, dsack: Some((4500, 5000)) });
        assert_eq!(ranges(&sb), [(4500, 5500)]);
    }

    /// RFC 2883 section 4.2.1: a duplicate sub-segment, reported after the
    /// cumulative ACK passed it.
    #[test]
    fn dsack_of_a_subsegment() {
        let mut sb = Scoreboard::new();
        sb.update(&[(2000, 2500)], s(1000), s(2500));
        let u = sb.update(&[(1000, 1500)], s(2500), s(2500));
        assert_eq!(u.dsack, Some((1000, 1500)));
        assert!(sb.is_empty());
    }

    #[test]
    fn not_dsack() {
        let mut sb = Scoreboard::new();
        // Two ordinary blocks, the first not inside the second.
        let u = sb.update(&[(5000, 5500), (4500, 5000)], s(4000), s(6000));
        assert_eq!(u, SackUpdate { newly_sacked: 1000, dsack: None });
        // Straddling snd_una: neither a D-SACK nor believable.
        let u = sb.update(&[(3500, 4500)], s(4000), s(6000));
        assert_eq!(u, SackUpdate::default());
        // Inverted or far below snd_una: garbage, not a D-SACK.
        assert_eq!(sb.update(&[(3500, 3000)], s(4000), s(6000)).dsack, None);
        let far = 4000u32.wrapping_sub(1 << 31);
        assert_eq!(sb.update(&[(far, far + 10)], s(4000), s(6000)).dsack, None);
        let far = 4000u32.wrapping_sub((1 << 30) + 100);
        assert_eq!(sb.update(&[(far, far + 10)], s(4000), s(6000)).dsack, None);
        // A first block inside an invalid second block is not a D-SACK.
        assert_eq!(sb.update(&[(4600, 4700), (4500, 7000)], s(4000), s(6000)).dsack, None);
    }

    /// Ten 100-byte segments from 1000; 1000, 1300 and 1600 lost, the rest
    /// SACKed up to 1800; 1800-1999 still in flight.
    fn three_holes() -> Scoreboard {
        let mut sb = Scoreboard::new();
        let u = sb.update(&[(1700, 1800), (1400, 1600), (1100, 1300)], s(1000), s(2000));
        assert_eq!(u.newly_sacked, 500);
        sb
    }

    #[test]
    fn is_lost_by_ranges_and_by_bytes() {
        let sb = three_holes();
        assert!(sb.is_lost(s(1000), 100, 3), "three ranges above");
        assert!(sb.is_lost(s(1300), 100, 3), "300 bytes above > 2 * SMSS");
        assert!(!sb.is_lost(s(1600), 100, 3), "one segment above");
        assert!(!sb.is_lost(s(1800), 100, 3));
        // With a larger MSS the byte rule stops firing for 1300.
        assert!(!sb.is_lost(s(1300), 1000, 3));
        assert!(sb.is_lost(s(1000), 1000, 3), "the range count still does");
        // Exactly (DupThresh - 1) * SMSS above is not "more than".
        assert!(!sb.is_lost(s(1300), 150, 3));
        assert!(sb.is_lost(s(1300), 149, 3));
        assert_eq!(sb.pipe(s(1000), s(2000), s(1000), 150, 3), 400);
        assert_eq!(sb.pipe(s(1000), s(2000), s(1000), 149, 3), 300);
        // DupThresh 1: anything below a SACKed byte.
        assert!(sb.is_lost(s(1600), 1000, 1));
    }

    #[test]
    fn pipe_counts_unlost_and_retransmitted_bytes() {
        let sb = three_holes();
        // Lost: 1000-1099 and 1300-1399. In the network: 1600-1699 and
        // 1800-1999.
        assert_eq!(sb.pipe(s(1000), s(2000), s(1000), 100, 3), 300);
        // After retransmitting both lost holes (HighRxt just below 1400).
        assert_eq!(sb.pipe(s(1000), s(2000), s(1400), 100, 3), 500);
        // HighRxt past everything counts 1600-1699 twice as well.
        assert_eq!(sb.pipe(s(1000), s(2000), s(1700), 100, 3), 600);
        // Before enough SACKs arrive nothing is lost: all unSACKed count.
        assert_eq!(sb.pipe(s(1000), s(2000), s(1000), 1000, 4), 500);
    }

    #[test]
    fn next_seg_walks_the_rules() {
        let mut sb = three_holes();
        let (una, nxt) = (s(1000), s(2000));
        let rtx = |seq, len| Some(NextSeg::Retransmit { seq: s(seq), len });
        // Rule 1, first the lowest lost hole, then the next one.
        assert_eq!(sb.next_seg(una, nxt, s(1000), 100, 3, true), rtx(1000, 100));
        assert_eq!(sb.next_seg(una, nxt, s(1050), 100, 3, true), rtx(1050, 50));
        assert_eq!(sb.next_seg(una, nxt, s(1100), 100, 3, true), rtx(1300, 100));
        // 1600 is not lost: rule 2 prefers new data...
        assert_eq!(sb.next_seg(una, nxt, s(1400), 100, 3, true), Some(NextSeg::NewData));
        // ...and rule 3 retransmits it when there is none.
        assert_eq!(sb.next_seg(una, nxt, s(1400), 100, 3, false), rtx(1600, 100));
        // A retransmission never covers SACKed bytes, even with a big MSS.
        assert_eq!(sb.next_seg(una, nxt, s(1000), 1460, 3, false), rtx(1000, 100));
        // Rule 4: one rescue, ending at the highest unSACKed byte.
        let rescue = sb.next_seg(una, nxt, s(1700), 100, 3, false);
        assert_eq!(rescue, Some(NextSeg::Rescue { seq: s(1900), len: 100 }));
        assert_eq!(sb.next_seg(una, nxt, s(1700), 150, 3, false), Some(NextSeg::Rescue { seq: s(1850), len: 150 }));
        // The caller records RescueRxt = RecoveryPoint; no second rescue.
        sb.set_rescue_rxt(Some(nxt));
        assert_eq!(sb.next_seg(una, nxt, s(1700), 100, 3, false), None);
        // A rescue allowed again once the cumulative ACK passes it.
        sb.advance(s(2001));
        assert_eq!(sb.rescue_rxt(), None);
    }

    #[test]
    fn rescue_targets_the_last_hole_below_a_final_sack() {
        let mut sb = Scoreboard::new();
        sb.update(&[(1500, 2000)], s(1000), s(2000));
        // Step 4.3: RescueRxt is the end of the first retransmission.
        sb.set_rescue_rxt(Some(s(1100)));
        assert_eq!(sb.next_seg(s(1000), s(2000), s(1500), 100, 3, false), None, "HighACK not past RescueRxt");
        sb.advance(s(1200));
        assert_eq!(
            sb.next_seg(s(1200), s(2000), s(1500), 100, 3, false),
            Some(NextSeg::Rescue { seq: s(1400), len: 100 })
        );
    }

    #[test]
    fn advance_trims_and_forgets() {
        let mut sb = three_holes();
        sb.advance(s(1150));
        assert_eq!(ranges(&sb), [(1150, 1300), (1400, 1600), (1700, 1800)]);
        assert_eq!(sb.sacked_bytes(), 450);
        sb.advance(s(1650));
        assert_eq!(ranges(&sb), [(1700, 1800)]);
        assert_eq!(sb.sacked_bytes(), 100);
        // An old snd_una changes nothing.
        sb.advance(s(1000));
        assert_eq!(sb.sacked_bytes(), 100);
        sb.clear();
        assert!(sb.is_empty() && sb.sacked_bytes() == 0);
    }

    // Reference model: one flag per byte of the window, and RFC 6675's
    // definitions applied octet by octet, as the RFC states them.
    struct Model {
        una: u32,
        sacked: Vec<bool>,
    }

    impl Model {
        fn runs(&self) -> Vec<(usize, usize)> {
            let mut out = Vec::new();
            let mut k = 0;
            while k < self.sacked.len() {
                if self.sacked[k] {
                    let start = k;
                    while k < self.sacked.len() && self.sacked[k] {
                        k += 1;
                    }
                    out.push((start, k));
                } else {
                    k += 1;
                }
            }
            out
        }

        fn add(&mut self, lo: usize, hi: usize) {
            for b in &mut self.sacked[lo..hi] {
                *b = true;
            }
            let runs = self.runs();
            if runs.len() > MAX_RANGES {
                let (a, b) = runs[runs.len() - 1];
                for x in &mut self.sacked[a..b] {
                    *x = false;
                }
            }
        }

        fn advance(&mut self, n: usize) {
            let n = n.min(self.sacked.len());
            self.sacked.drain(..n);
            self.una = self.una.wrapping_add(n as u32);
        }

        /// IsLost for every byte, from the top down: what lies above `k`
        /// is counted before `k` itself joins it.
        fn lost(&self, mss: usize, dt: usize) -> Vec<bool> {
            let n = self.sacked.len();
            let mut out = vec![false; n];
            let (mut runs, mut bytes) = (0, 0);
            for k in (0..n).rev() {
                out[k] = runs >= dt || bytes > (dt - 1) * mss;
                if self.sacked[k] {
                    bytes += 1;
                    if k + 1 == n || !self.sacked[k + 1] {
                        runs += 1;
                    }
                }
            }
            out
        }

        fn pipe(&self, lost: &[bool], hr: usize) -> usize {
            (0..self.sacked.len())
                .filter(|&k| !self.sacked[k])
                .map(|k| usize::from(!lost[k]) + usize::from(k < hr))
                .sum()
        }

        fn next_seg(&self, lost: &[bool], hr: usize, mss: usize, new: bool) -> Option<(u8, usize, usize)> {
            let flight = self.sacked.len();
            let highest = self.runs().last().map_or(0, |&(_, e)| e);
            let hole = |from: usize| {
                let mut end = from;
                while end < flight && !self.sacked[end] && end - from < mss {
                    end += 1;
                }
                end - from
            };
            let s2 = (hr..highest).find(|&k| !self.sacked[k]);
            if let Some(k) = s2.filter(|&k| lost[k]) {
                return Some((1, k, hole(k)));
            }
            if new {
                return Some((2, 0, 0));
            }
            if let Some(k) = s2 {
                return Some((3, k, hole(k)));
            }
            let last = (0..flight).rev().find(|&k| !self.sacked[k])?;
            let mut start = last;
            while start > 0 && !self.sacked[start - 1] && last + 1 - start < mss {
                start -= 1;
            }
            Some((4, start, last + 1 - start))
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Ack(Vec<(i64, i64)>),
        Advance(usize),
        Send(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Edges on a 100-byte grid make SACKed amounts land exactly on the
        // (DupThresh - 1) * SMSS threshold when the MSS is 100.
        let edge = prop_oneof![
            5 => (-3i64..23).prop_map(|k| k * 100),
            4 => -300i64..2300,
            1 => any::<u32>().prop_map(i64::from),
        ];
        prop_oneof![
            6 => proptest::collection::vec((edge.clone(), edge), 1..5).prop_map(Op::Ack),
            1 => (0usize..400).prop_map(Op::Advance),
            1 => (0usize..200).prop_map(Op::Send),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_per_byte_model(
            una in prop_oneof![Just(u32::MAX - 500), any::<u32>()],
            ops in proptest::collection::vec(op(), 1..60),
            mss in prop_oneof![Just(100usize), 1usize..300],
            dt in 1usize..5,
        ) {
            let mut sb = Scoreboard::new();
            let mut m = Model { una, sacked: vec![false; 2000] };
            for op in ops {
                let snd_una = s(m.una);
                let flight = m.sacked.len();
                let snd_nxt = snd_una + flight;
                match op {
                    Op::Ack(raw) => {
                        let blocks: Vec<(u32, u32)> = raw
                            .iter()
                            .map(|&(l, r)| (m.una.wrapping_add(l as u32), m.una.wrapping_add(r as u32)))
                            .collect();
                        let before = sb.sacked_bytes();
                        let u = sb.update(&blocks, snd_una, snd_nxt);
                        let m_una = m.una;
                        let valid = |&(l, r): &(u32, u32)| {
                            let (lo, hi) = (l.wrapping_sub(m_una) as usize, r.wrapping_sub(m_una) as usize);
                            (lo > 0 && lo < hi && hi <= flight).then_some((lo, hi))
                        };
                        let mut skip = u.dsack.is_some();
                        if let (Some(a), Some(b)) = (blocks.first().and_then(valid), blocks.get(1).and_then(valid)) {
                            let inside = b.0 <= a.0 && a.1 <= b.1;
                            prop_assert_eq!(skip, inside);
                            skip = inside;
                        }
                        for (k, b) in blocks.iter().enumerate() {
                            if k == 0 && skip { continue; }
                            if let Some((lo, hi)) = valid(b) { m.add(lo, hi); }
                        }
                        prop_assert_eq!(u.newly_sacked, sb.sacked_bytes().saturating_sub(before));
                    }
                    Op::Advance(n) => {
                        m.advance(n);
                        sb.advance(s(m.una));
                    }
                    Op::Send(n) => m.sacked.extend(core::iter::repeat_n(false, n)),
                }
                let snd_una = s(m.una);
                let flight = m.sacked.len();
                let snd_nxt = snd_una + flight;
                let runs = m.runs();
                prop_assert_eq!(ranges(&sb), runs.iter().map(|&(a, b)| (m.una.wrapping_add(a as u32), m.una.wrapping_add(b as u32))).collect::<Vec<_>>());
                prop_assert!(sb.ranges() <= MAX_RANGES);
                prop_assert_eq!(sb.sacked_bytes(), m.sacked.iter().filter(|&&b| b).count());
                let lost = m.lost(mss, dt);
                for k in (0..flight).step_by(7) {
                    prop_assert_eq!(sb.is_sacked(snd_una + k), m.sacked[k]);
                    prop_assert_eq!(sb.is_lost(snd_una + k, mss, dt), lost[k], "is_lost {}", k);
                }
                let mut hrs: Vec<usize> = runs.iter().flat_map(|&(a, b)| [a, b, b + 1]).collect();
                hrs.extend([0, flight / 3, flight]);
                for hr in hrs.into_iter().filter(|&h| h <= flight) {
                    prop_assert_eq!(sb.pipe(snd_una, snd_nxt, snd_una + hr, mss, dt), m.pipe(&lost, hr));
                    for new in [false, true] {
                        let got = sb.next_seg(snd_una, snd_nxt, snd_una + hr, mss, dt, new).map(|n| match n {
                            NextSeg::Retransmit { seq, len } => (0, (seq - snd_una) as usize, len),
                            NextSeg::NewData => (2, 0, 0),
                            NextSeg::Rescue { seq, len } => (4, (seq - snd_una) as usize, len),
                        });
                        // Rules 1 and 3 give the same kind of answer.
                        let want = m.next_seg(&lost, hr, mss, new).map(|(rule, at, len)| (if rule == 1 || rule == 3 { 0 } else { rule }, at, len));
                        prop_assert_eq!(got, want, "hr {} new {}", hr, new);
                    }
                }
            }
        }
    }
}
