//! The retransmissions of MLDv2 state change reports (RFC 3810 6.1): a
//! report saying a group was joined or left may be lost on its way to
//! the routers, so its record goes again [Robustness Variable] − 1 more
//! times, each after a random interval in [0, Unsolicited Report
//! Interval]. The interface sends the first report at once and tells
//! this table of each record in it; the table says when the next
//! retransmission is due and which records it carries (every one still
//! owed, in one report).
//!
//! A later change to a group replaces its record (a leave after a join
//! owes the leave only) and owes its retransmissions again. The report a
//! change sends at once carries the other records still owed too, as RFC
//! 3810 6.1 merges a change with the pending report
//! ([`carry_pending`](StateChanges::carry_pending)): each of them goes
//! out once more there, which counts as one of its retransmissions. The
//! records owed are bounded ([`MAX_PENDING_RECORDS`], what one report
//! carries): past the bound the oldest is dropped, having gone out at
//! least once.
//!
//! Time and randomness come from outside: the interval after a change
//! is drawn at the first [`poll`](StateChanges::poll) after it (its
//! [`poll_at`](StateChanges::poll_at) asks for one at once), from a
//! splitmix64 generator over the interface's seed.

use super::addr::MAX_ADDRESSES;
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv6Addr;
use core::time::Duration;

/// Records owed retransmissions, at most: as many as one report carries
/// (one per address of ours).
pub const MAX_PENDING_RECORDS: usize = MAX_ADDRESSES;

/// The Robustness Variable's default (RFC 3810 9.1): a change is reported
/// twice in all.
pub const MLD_ROBUSTNESS: u8 = 2;

/// The Unsolicited Report Interval's default (RFC 3810 9.11): 1 s.
pub const MLD_UNSOLICITED_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// A record owed its retransmissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    group: Ipv6Addr,
    /// Joined (a change to exclude no source); else left.
    joined: bool,
    /// Retransmissions still owed.
    remaining: u8,
}

/// When the next retransmission goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Nothing owed.
    Idle,
    /// A change came; the next poll draws the interval.
    Draw,
    /// At this time.
    At(Instant),
}

/// A record a retransmission carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The group.
    pub group: Ipv6Addr,
    /// Joined; else left.
    pub joined: bool,
}

/// The state change records owed retransmissions, and when the next goes.
#[derive(Debug, Clone)]
pub struct StateChanges {
    pending: Vec<Pending>,
    next: Next,
    /// Retransmissions of each record: the Robustness Variable − 1.
    retransmissions: u8,
    interval: Duration,
    random: u64,
}

impl StateChanges {
    /// Nothing owed; each change goes `robustness` times in all (the
    /// first by the interface), the retransmissions a random time in
    /// `[0, interval]` apart, drawn from `seed`.
    pub fn new(robustness: u8, interval: Duration, seed: u64) -> Self {
        StateChanges {
            pending: Vec::new(),
            next: Next::Idle,
            retransmissions: robustness.saturating_sub(1),
            interval,
            random: seed,
        }
    }

    /// A report just said `group` was joined (or left, `joined` false): its
    /// retransmissions are owed. Returns whether the oldest record owed
    /// was dropped to make room.
    pub fn changed(&mut self, group: Ipv6Addr, joined: bool) -> bool {
        if self.retransmissions == 0 {
            return false;
        }
        self.pending.retain(|p| p.group != group);
        let mut dropped = false;
        if self.pending.len() >= MAX_PENDING_RECORDS {
            self.pending.remove(0);
            dropped = true;
        }
        self.pending.push(Pending { group, joined, remaining: self.retransmissions });
        if self.next == Next::Idle {
            self.next = Next::Draw;
        }
        dropped
    }

    /// The records still owed besides those of `changed` (groups whose
    /// change a report is about to say at once), for that report to
    /// carry too (RFC 3810 6.1): each counts as retransmitted once, and
    /// one owed nothing more is done with. With those of `changed`, at
    /// most [`MAX_PENDING_RECORDS`].
    pub fn carry_pending(&mut self, changed: &[Ipv6Addr]) -> Vec<Change> {
        let mut carried = Vec::new();
        for p in self.pending.iter_mut().filter(|p| !changed.contains(&p.group)) {
            carried.push(Change { group: p.group, joined: p.joined });
            p.remaining = p.remaining.saturating_sub(1);
        }
        self.pending.retain(|p| p.remaining > 0);
        if self.pending.is_empty() {
            self.next = Next::Idle;
        }
        carried
    }

    /// Runs the timer: the records of a retransmission due by `now` (empty
    /// when none is), each owed one fewer; the next is drawn.
    pub fn poll(&mut self, now: Instant) -> Vec<Change> {
        let due = match self.next {
            Next::Idle => return Vec::new(),
            Next::Draw => false,
            Next::At(at) => now >= at,
        };
        if !due {
            if self.next == Next::Draw {
                self.next = Next::At(now + self.draw_interval());
            }
            return Vec::new();
        }
        let changes = self.pending.iter().map(|p| Change { group: p.group, joined: p.joined }).collect();
        for p in self.pending.iter_mut() {
            p.remaining = p.remaining.saturating_sub(1);
        }
        self.pending.retain(|p| p.remaining > 0);
        self.next = if self.pending.is_empty() { Next::Idle } else { Next::At(now + self.draw_interval()) };
        changes
    }

    /// When [`poll`](Self::poll) next has work: at once after a change
    /// (to draw the interval), then at the retransmission.
    pub fn poll_at(&self) -> Option<Instant> {
        match self.next {
            Next::Idle => None,
            Next::Draw => Some(Instant::ZERO),
            Next::At(at) => Some(at),
        }
    }

    /// Records owed retransmissions.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no record is owed.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// An interval in `[0, interval]`, from a splitmix64 generator over
    /// the seed.
    fn draw_interval(&mut self) -> Duration {
        self.random = self.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let span = u64::try_from(self.interval.as_micros()).unwrap_or(u64::MAX).saturating_add(1);
        Duration::from_micros(z % span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(i: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, i)
    }

    /// Polls at every deadline up to `until`; the records sent, with when.
    fn run(s: &mut StateChanges, from: Instant, until: Instant) -> Vec<(Instant, Vec<Change>)> {
        let mut sent = Vec::new();
        let mut now = from;
        for _ in 0..100 {
            let changes = s.poll(now);
            if !changes.is_empty() {
                sent.push((now, changes));
            }
            match s.poll_at() {
                Some(t) if t <= until => now = now.max(t),
                _ => break,
            }
        }
        sent
    }

    #[test]
    fn each_change_goes_robustness_minus_one_more_times_within_the_interval() {
        let t0 = Instant::from_secs(5);
        for robustness in 1..=4u8 {
            for seed in 0..20 {
                let mut s = StateChanges::new(robustness, Duration::from_secs(1), seed);
                assert_eq!(s.poll_at(), None);
                s.changed(group(1), true);
                let sent = run(&mut s, t0, t0 + Duration::from_secs(100));
                assert_eq!(sent.len(), usize::from(robustness - 1), "robustness {robustness}");
                let mut at = t0;
                for (t, changes) in &sent {
                    assert!(*t >= at && *t <= at + Duration::from_secs(1));
                    assert_eq!(changes, &[Change { group: group(1), joined: true }]);
                    at = *t;
                }
                assert_eq!((s.poll_at(), s.len()), (None, 0));
            }
        }
    }

    #[test]
    fn a_change_s_report_carries_the_other_records_owed_as_one_retransmission() {
        let t0 = Instant::from_secs(5);
        let mut s = StateChanges::new(3, Duration::from_secs(1), 7);
        s.changed(group(1), true);
        s.changed(group(2), false);
        assert_eq!(s.carry_pending(&[group(1), group(2)]), [], "the first change: nothing else owed");
        // Group 3 changes while both are owed two more: its report
        // carries them, which leaves each owed one.
        s.changed(group(3), true);
        let carried = s.carry_pending(&[group(3)]);
        assert_eq!(carried, [Change { group: group(1), joined: true }, Change { group: group(2), joined: false }]);
        let sent = run(&mut s, t0, t0 + Duration::from_secs(100));
        let per_group = |g: Ipv6Addr| sent.iter().filter(|(_, c)| c.iter().any(|c| c.group == g)).count();
        assert_eq!((per_group(group(1)), per_group(group(2)), per_group(group(3))), (1, 1, 2));
        // Carried to the last, a record is done with.
        let mut s = StateChanges::new(2, Duration::from_secs(1), 7);
        s.changed(group(1), true);
        s.changed(group(2), true);
        assert_eq!(s.carry_pending(&[group(2)]), [Change { group: group(1), joined: true }]);
        assert_eq!(s.len(), 1);
        assert_eq!(s.carry_pending(&[]), [Change { group: group(2), joined: true }]);
        assert_eq!((s.len(), s.poll_at()), (0, None));
        // Nothing owed with a Robustness Variable of 1.
        let mut s = StateChanges::new(1, Duration::from_secs(1), 7);
        s.changed(group(1), true);
        assert_eq!(s.carry_pending(&[]), []);
    }

    #[test]
    fn a_later_change_replaces_a_group_record_and_records_are_bounded() {
        let t0 = Instant::from_secs(5);
        let mut s = StateChanges::new(3, Duration::from_secs(1), 7);
        s.changed(group(1), true);
        s.changed(group(2), true);
        assert_eq!(s.poll(t0), []);
        let at = s.poll_at().unwrap();
        let first = s.poll(at);
        assert_eq!(first.len(), 2);
        s.changed(group(1), false);
        let sent = run(&mut s, at, at + Duration::from_secs(100));
        // Group 2's last; group 1's leave twice.
        let leave = Change { group: group(1), joined: false };
        assert_eq!(sent[0].1, [Change { group: group(2), joined: true }, leave]);
        assert_eq!(sent[1].1, [leave]);
        assert_eq!(sent.len(), 2);

        for i in 0..(3 * MAX_PENDING_RECORDS as u16) {
            let dropped = s.changed(group(i), i % 2 == 0);
            assert_eq!(dropped, usize::from(i) >= MAX_PENDING_RECORDS);
        }
        assert_eq!(s.len(), MAX_PENDING_RECORDS);
        let sent = run(&mut s, at, at + Duration::from_secs(100));
        assert!(sent.iter().all(|(_, c)| c.len() == MAX_PENDING_RECORDS));
        assert_eq!(sent[0].1[0].group, group(2 * MAX_PENDING_RECORDS as u16), "the latest are kept");
    }
}
