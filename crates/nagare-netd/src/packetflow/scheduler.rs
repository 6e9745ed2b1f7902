//! PacketFlow's scheduler: which clients netd boosts. Once a period each
//! client that has a receiving socket (a TCP connection, a bound UDP
//! socket) is weighed by its priority (its best socket's) and its fill
//! (its fullest receive buffer, in percent). A client that made requests
//! in the period (it is awake, as the paper weighs a process when it
//! wakes) and whose fill is above the threshold T is falling behind: its
//! data waits for it, a UDP socket is about to drop and a TCP window to
//! close. One that made none is not reading at all, and is never boosted.
//!
//! The paper's rule (`--boost N`) boosts the best N such clients by
//! priority that are not of the best priority among the receivers (the
//! best, it reasons, the kernel's scheduler runs first anyway). Both
//! halves fail in netd's world. A fixed N is wrong, as the paper found
//! (§4.5): with one high-priority receiver among low-priority floods, its
//! second boost went to a flood. And the best receiver is not run first
//! when it competes with processes that are not netd's clients (on a
//! small machine, the very senders that flood it): it gets its fair
//! share and no more. So the rule `auto`, the default, boosts a falling
//! behind client of any priority but the worst class of receivers
//! (lifting the worst over better ones only inverts priority; when every
//! receiver is of one priority, that class is also the best, and may be
//! boosted), the best first, no more of them than netd's CPUs, which can
//! run that many processes at once. A boost lasts the boost time from the
//! last period that chose the client, and ends sooner when the client has
//! no receiving socket left, or when the clients chosen since leave no
//! room beside it: no more than N (under `auto`, the CPUs) are boosted at
//! once, those chosen last first, then the best.
//!
//! What a boost does is netd's (`crate::netd`): netd serves clients in
//! priority order and the client is lifted in it ([`Scheduler::rank`]),
//! with a larger batch; the filter counts it as high priority; and its
//! process's nice value is lowered by up to the lift, never to a priority
//! better than that of a better receiving client.

use core::fmt;
use core::str::FromStr;
use hashbrown::HashMap;
use std::time::{Duration, Instant};

/// How many candidates are boosted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoostCount {
    /// The best N by priority (the paper's rule).
    Fixed(u8),
    /// Those better than the worst receiving client, at most one per CPU.
    Auto,
}

impl FromStr for BoostCount {
    type Err = String;

    fn from_str(s: &str) -> Result<BoostCount, String> {
        if s == "auto" {
            return Ok(BoostCount::Auto);
        }
        s.parse().map(BoostCount::Fixed).map_err(|_| format!("{s:?}: a number of clients (0 to 255) or auto"))
    }
}

impl fmt::Display for BoostCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoostCount::Fixed(n) => write!(f, "{n}"),
            BoostCount::Auto => f.write_str("auto"),
        }
    }
}

/// The scheduler's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoostConfig {
    /// The fill above which a client is a candidate, percent (T).
    pub threshold: u8,
    /// How many candidates are boosted (N).
    pub count: BoostCount,
    /// How long a boost lasts after the last period that chose it.
    pub time: Duration,
    /// Nice steps a boosted process is lifted by at most (0: netd never
    /// changes a process's nice value).
    pub lift: u8,
}

impl Default for BoostConfig {
    /// The paper's T (50 %) and lift (5); N `auto`; boosts of 100 ms, five
    /// housekeeping periods.
    fn default() -> Self {
        BoostConfig { threshold: 50, count: BoostCount::Auto, time: Duration::from_millis(100), lift: 5 }
    }
}

/// A receiving client as the scheduler weighs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Load {
    pub client: u64,
    /// Its best socket's priority (100 highest .. 139 lowest).
    pub priority: u8,
    /// Its fullest receive buffer, percent.
    pub fill: u8,
    /// It made a request in the period: it is awake and taking data. A
    /// client that leaves its data unread is not falling behind, it is
    /// not reading, and a boost would only lift it for nothing.
    pub awake: bool,
}

/// The clients to boost among `loads`, best priority first, by `config`'s
/// rule with `cpus` CPUs.
pub(crate) fn select(loads: &[Load], config: &BoostConfig, cpus: usize) -> Vec<Load> {
    let (Some(best), Some(worst)) = (loads.iter().map(|l| l.priority).min(), loads.iter().map(|l| l.priority).max())
    else {
        return Vec::new();
    };
    let mut chosen: Vec<Load> = loads.iter().filter(|l| l.awake && l.fill > config.threshold).copied().collect();
    chosen.sort_by_key(|l| (l.priority, l.client));
    let n = match config.count {
        BoostCount::Fixed(n) => {
            chosen.retain(|l| l.priority > best);
            usize::from(n)
        }
        BoostCount::Auto => {
            chosen.retain(|l| l.priority < worst || l.priority == best);
            cpus.max(1)
        }
    };
    chosen.truncate(n);
    chosen
}

/// The nice steps to lift a client of `priority` by, at most `most`:
/// never to a priority better than that of the nearest better receiving
/// client among `loads`.
fn lift(loads: &[Load], priority: u8, most: u8) -> u8 {
    let nearest_better = loads.iter().map(|l| l.priority).filter(|&p| p < priority).max();
    nearest_better.map_or(most, |p| most.min(priority - p))
}

/// What a period changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    /// Clients boosted from now on, with the nice steps to lift their
    /// process by.
    pub start: Vec<(u64, u8)>,
    /// Clients whose boost ends.
    pub end: Vec<u64>,
}

/// The boosts under way, each with the time it ends and its lift.
#[derive(Debug)]
pub(crate) struct Scheduler {
    config: BoostConfig,
    cpus: usize,
    boosted: HashMap<u64, (Instant, u8)>,
}

impl Scheduler {
    /// A scheduler by `config` on `cpus` CPUs, nothing boosted.
    pub fn new(config: BoostConfig, cpus: usize) -> Scheduler {
        Scheduler { config, cpus, boosted: HashMap::new() }
    }

    /// Ends a period at `now` in which the receiving clients weighed
    /// `loads`: the chosen are boosted (again) until the boost time from
    /// now; the others' boosts end once their time has passed or they
    /// have no receiving socket.
    pub fn period(&mut self, loads: &[Load], now: Instant) -> Changes {
        let mut changes = Changes::default();
        let chosen = select(loads, &self.config, self.cpus);
        let until = now.checked_add(self.config.time).unwrap_or(now);
        // Boosts still running that this period did not choose, best
        // first: as many stay as the count leaves room for beside the
        // chosen.
        let priority = |client: u64| loads.iter().find(|l| l.client == client).map(|l| l.priority);
        let mut others: Vec<(u8, u64)> = self
            .boosted
            .iter()
            .filter(|(client, (end, _))| *end > now && !chosen.iter().any(|l| l.client == **client))
            .filter_map(|(&client, _)| priority(client).map(|p| (p, client)))
            .collect();
        others.sort_unstable();
        others.truncate(self.cap().saturating_sub(chosen.len()));
        self.boosted.retain(|client, _| {
            let keep = chosen.iter().any(|l| l.client == *client) || others.iter().any(|&(_, c)| c == *client);
            if !keep {
                changes.end.push(*client);
            }
            keep
        });
        for l in &chosen {
            match self.boosted.get_mut(&l.client) {
                // Renewed: its lift stays what its process was given.
                Some((end, _)) => *end = until,
                None => {
                    let steps = lift(loads, l.priority, self.config.lift);
                    self.boosted.insert(l.client, (until, steps));
                    changes.start.push((l.client, steps));
                }
            }
        }
        changes.end.sort_unstable();
        changes
    }

    /// The most clients boosted at once: N, or the CPUs under `auto`.
    fn cap(&self) -> usize {
        match self.config.count {
            BoostCount::Fixed(n) => usize::from(n),
            BoostCount::Auto => self.cpus.max(1),
        }
    }

    /// Client `client` has gone: its boost ends with it.
    pub fn forget(&mut self, client: u64) {
        self.boosted.remove(&client);
    }

    /// Where client `client`, whose priority is `priority`, comes in the
    /// order netd serves clients: by its priority lifted by its boost, a
    /// client there by its own priority before one lifted there.
    pub fn rank(&self, client: u64, priority: u8) -> (u8, u8) {
        let steps = self.boosted.get(&client).map_or(0, |&(_, steps)| steps);
        (priority.saturating_sub(steps), priority)
    }

    /// Clients boosted now.
    pub fn boosted(&self) -> usize {
        self.boosted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(client: u64, priority: u8, fill: u8) -> Load {
        Load { client, priority, fill, awake: true }
    }

    fn clients(chosen: &[Load]) -> Vec<u64> {
        chosen.iter().map(|l| l.client).collect()
    }

    fn config(count: BoostCount) -> BoostConfig {
        BoostConfig { count, ..BoostConfig::default() }
    }

    #[test]
    fn the_papers_candidate_is_fuller_than_the_threshold_and_not_of_the_best_priority() {
        let fixed = config(BoostCount::Fixed(8));
        // Above T, not best: chosen. At T exactly, or best: not.
        let loads = [load(1, 120, 100), load(2, 125, 51), load(3, 125, 50), load(4, 130, 90), load(5, 120, 10)];
        assert_eq!(clients(&select(&loads, &fixed, 2)), [2, 4]);
        // Everyone of one priority: nobody has anyone to catch up with.
        let equal = [load(1, 120, 100), load(2, 120, 100)];
        assert!(select(&equal, &fixed, 2).is_empty());
        assert!(select(&[], &fixed, 2).is_empty());
    }

    #[test]
    fn a_fixed_count_takes_the_best_candidates_by_priority() {
        let loads = [load(1, 120, 0), load(2, 130, 90), load(3, 125, 90), load(4, 139, 90), load(5, 125, 60)];
        assert_eq!(clients(&select(&loads, &config(BoostCount::Fixed(2)), 2)), [3, 5]);
        assert_eq!(clients(&select(&loads, &config(BoostCount::Fixed(3)), 2)), [3, 5, 2]);
        assert!(select(&loads, &config(BoostCount::Fixed(0)), 2).is_empty());
    }

    #[test]
    fn auto_never_lifts_the_worst_receivers_and_takes_no_more_than_the_cpus() {
        let auto = config(BoostCount::Auto);
        // The paper's mixed load: one receiver of high priority, floods of
        // low priority that are full. A fixed 2 boosts two floods and not
        // the receiver; auto the receiver alone.
        let mixed = [load(1, 120, 90), load(2, 130, 100), load(3, 130, 100), load(4, 130, 100)];
        assert_eq!(clients(&select(&mixed, &config(BoostCount::Fixed(2)), 2)), [2, 3]);
        assert_eq!(clients(&select(&mixed, &auto, 2)), [1]);
        // Three priorities: all but the worst, the best first.
        let three = [load(3, 130, 90), load(2, 125, 90), load(1, 120, 90)];
        assert_eq!(clients(&select(&three, &auto, 2)), [1, 2]);
        assert_eq!(clients(&select(&three, &auto, 1)), [1]);
        // Many of the middle: as many as there are CPUs.
        let many = [load(1, 110, 0), load(2, 121, 90), load(3, 122, 90), load(4, 123, 90), load(5, 139, 90)];
        assert_eq!(clients(&select(&many, &auto, 2)), [2, 3]);
        assert_eq!(clients(&select(&many, &auto, 0)), [2], "at least one");
        // One priority for all: the worst class is the best too.
        let equal = [load(1, 120, 100), load(2, 120, 100), load(3, 120, 10)];
        assert_eq!(clients(&select(&equal, &auto, 2)), [1, 2]);
        // Nobody full: nobody. Full but not reading: nobody.
        assert!(select(&[load(1, 120, 50), load(2, 130, 0)], &auto, 2).is_empty());
        let asleep = Load { awake: false, ..load(1, 120, 100) };
        assert!(select(&[asleep, load(2, 130, 0)], &auto, 2).is_empty());
        assert!(select(&[asleep, load(2, 130, 100)], &config(BoostCount::Fixed(2)), 2).len() == 1);
    }

    #[test]
    fn a_lift_never_passes_a_better_receiver() {
        let loads = [load(1, 120, 0), load(2, 122, 0), load(3, 130, 0)];
        assert_eq!(lift(&loads, 120, 5), 5, "the best: the whole lift");
        assert_eq!(lift(&loads, 122, 5), 2);
        assert_eq!(lift(&loads, 130, 5), 5);
        assert_eq!(lift(&loads, 130, 0), 0);
    }

    #[test]
    fn a_boost_lasts_its_time_from_the_last_choice_and_ends_with_the_clients_sockets() {
        let mut s = Scheduler::new(BoostConfig { count: BoostCount::Fixed(2), ..BoostConfig::default() }, 2);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let full = [load(1, 120, 0), load(2, 125, 90), load(3, 139, 90)];
        // Lifted by 5 steps, or less where that passes the best.
        assert_eq!(s.period(&full, t0), Changes { start: vec![(2, 5), (3, 5)], end: vec![] });
        assert_eq!(s.boosted(), 2);
        assert_eq!([s.rank(1, 120), s.rank(2, 125), s.rank(3, 139)], [(120, 120), (120, 125), (134, 139)]);
        // Chosen again: renewed, nothing new to do.
        assert_eq!(s.period(&full, ms(60)), Changes::default());
        // No longer full: the boosts run out 100 ms after the last choice.
        let drained = [load(1, 120, 0), load(2, 125, 10), load(3, 139, 10)];
        assert_eq!(s.period(&drained, ms(140)), Changes::default());
        assert_eq!(s.period(&drained, ms(160)), Changes { start: vec![], end: vec![2, 3] });
        // A client without receiving sockets loses its boost at once.
        s.period(&full, ms(200));
        assert_eq!(s.period(&[load(1, 120, 0), load(3, 139, 90)], ms(220)), Changes { start: vec![], end: vec![2] });
        s.forget(3);
        assert_eq!((s.boosted(), s.rank(3, 139)), (0, (139, 139)));
        let close = [load(1, 120, 0), load(2, 122, 90)];
        assert_eq!(s.period(&close, ms(240)).start, [(2, 2)], "lifted no further than a better one");
    }

    #[test]
    fn no_more_than_the_count_are_boosted_at_once() {
        let mut s = Scheduler::new(BoostConfig { count: BoostCount::Fixed(1), ..BoostConfig::default() }, 2);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let asleep = |l: Load| Load { awake: false, ..l };
        // 125 is chosen; then, while it sleeps, 130: 125's boost gives way.
        assert_eq!(s.period(&[load(1, 120, 0), load(2, 125, 90), load(3, 130, 90)], t0).start, [(2, 5)]);
        let changes = s.period(&[load(1, 120, 0), asleep(load(2, 125, 90)), load(3, 130, 90)], ms(20));
        assert_eq!(changes, Changes { start: vec![(3, 5)], end: vec![2] });
        assert_eq!(s.boosted(), 1);
        // Under auto, one per CPU: the best of those not chosen stay.
        let mut s = Scheduler::new(BoostConfig::default(), 2);
        let all = [load(1, 120, 90), load(2, 121, 90), load(3, 122, 90), load(4, 130, 0)];
        assert_eq!(s.period(&all, t0).start, [(1, 5), (2, 1)]);
        let changes = s.period(&[asleep(all[0]), asleep(all[1]), all[2], all[3]], ms(20));
        assert_eq!(changes, Changes { start: vec![(3, 1)], end: vec![2] });
        assert_eq!(s.boosted(), 2);
    }

    #[test]
    fn the_count_is_a_number_or_auto() {
        assert_eq!("auto".parse(), Ok(BoostCount::Auto));
        assert_eq!("2".parse(), Ok(BoostCount::Fixed(2)));
        for bad in ["", "-1", "256", "Auto", "two"] {
            assert!(bad.parse::<BoostCount>().is_err(), "{bad:?}");
        }
        assert_eq!(BoostCount::Fixed(3).to_string(), "3");
        assert_eq!(BoostCount::Auto.to_string(), "auto");
    }
}
