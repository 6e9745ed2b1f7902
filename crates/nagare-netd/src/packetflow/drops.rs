//! The receive path's drops, the signal of the filter's first condition:
//! frames lost before the engine could take them because netd did not
//! keep up. netd counts some itself (a device or driver with no buffer
//! for a frame); the link may count others where netd cannot see them (on
//! a TAP, the kernel's side transmits to netd and counts in `tx_dropped`
//! the frames it dropped because netd did not read in time). Read once per
//! housekeeping period, as the increase since the last.

use std::io::Read;
use std::path::PathBuf;

/// The receive path's drop counters, read as increases.
#[derive(Debug)]
pub(crate) struct ReceiveDrops {
    /// A file holding the link's count of frames it dropped on the way to
    /// netd (a TAP's `/sys/class/net/NAME/statistics/tx_dropped`).
    link_counter: Option<PathBuf>,
    last_counted: Option<u64>,
    last_link: Option<u64>,
}

impl ReceiveDrops {
    /// Drops read from netd's own counters and from `link_counter`, if
    /// given.
    pub fn new(link_counter: Option<PathBuf>) -> ReceiveDrops {
        ReceiveDrops { link_counter, last_counted: None, last_link: None }
    }

    /// The drops since the last call, given netd's own count of them now
    /// (`counted`); the link's counter is read now. The first call, and a
    /// counter that went back or could not be read, count none.
    pub fn since_last(&mut self, counted: u64) -> u64 {
        let own = increase(&mut self.last_counted, Some(counted));
        let link = self.link_counter.as_ref().and_then(|p| read_counter(p));
        own.saturating_add(increase(&mut self.last_link, link))
    }
}

/// `now - last`, `last` set to `now`; 0 when either is unknown or the
/// counter went back (a device made again).
fn increase(last: &mut Option<u64>, now: Option<u64>) -> u64 {
    let Some(now) = now else { return 0 };
    let up = last.map_or(0, |l| now.saturating_sub(l));
    *last = Some(now);
    up
}

/// The decimal number a counter file holds, if it can be read.
fn read_counter(path: &std::path::Path) -> Option<u64> {
    let mut buf = [0u8; 32];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut buf)).ok()?;
    std::str::from_utf8(buf.get(..n)?).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_counted_as_increases_of_netds_counters_and_the_links() {
        let path = std::env::temp_dir().join(format!("nagare-receive-drops-{}", std::process::id()));
        std::fs::write(&path, "7\n").unwrap();
        let mut drops = ReceiveDrops::new(Some(path.clone()));
        assert_eq!(drops.since_last(3), 0, "the first reading is where counting starts");
        assert_eq!(drops.since_last(3), 0);
        assert_eq!(drops.since_last(5), 2);
        std::fs::write(&path, "17\n").unwrap();
        assert_eq!(drops.since_last(6), 11);
        std::fs::write(&path, "junk").unwrap();
        assert_eq!(drops.since_last(6), 0, "an unreadable counter counts nothing");
        std::fs::write(&path, "20").unwrap();
        assert_eq!(drops.since_last(6), 3);
        std::fs::write(&path, "1").unwrap();
        assert_eq!(drops.since_last(1), 0, "counters that went back count nothing");
        assert_eq!(drops.since_last(2), 1);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(drops.since_last(4), 2, "netd's own still count without the link's");
        assert_eq!(ReceiveDrops::new(None).since_last(9), 0);
    }
}
