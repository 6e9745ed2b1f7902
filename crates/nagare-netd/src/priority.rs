//! Priorities, on the kernel's scale that PacketFlow reads: 100 (the
//! highest, nice -20) to 139 (the lowest, nice 19), 120 for nice 0.
//!
//! A client's priority comes from its process's nice value, read by the
//! pid the rendezvous's credentials give and read again at most once a
//! [`REREAD`] (a `renice` takes effect within it). A socket's is its
//! client's unless the socket's own option (`SockOption::Priority`, as
//! `SO_PRIORITY` is per socket) overrides it.

use std::time::{Duration, Instant};

/// The highest priority (nice -20).
pub const HIGHEST: u8 = 100;
/// The lowest priority (nice 19).
pub const LOWEST: u8 = 139;
/// A process of nice 0, and a client whose nice value cannot be read.
pub const DEFAULT: u8 = 120;

/// How often a client's nice value is read again.
pub const REREAD: Duration = Duration::from_secs(1);

/// The priority of nice value `nice` (clamped to -20..=19).
pub fn from_nice(nice: i32) -> u8 {
    (i32::from(DEFAULT) + nice.clamp(-20, 19)) as u8
}

/// Where a priority comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The client's nice value.
    Nice,
    /// The nice value could not be read (the process is gone, or in
    /// another pid namespace): [`DEFAULT`].
    Unknown,
    /// The socket's own option.
    Option,
}

impl Source {
    /// The word `nagare stat` shows.
    pub fn name(self) -> &'static str {
        match self {
            Source::Nice => "nice",
            Source::Unknown => "unknown",
            Source::Option => "option",
        }
    }
}

/// A priority and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub value: u8,
    pub source: Source,
}

/// A client's priority, from its process.
#[derive(Debug)]
pub struct ClientPriority {
    pid: i32,
    nice: Option<i32>,
    read_at: Instant,
}

impl ClientPriority {
    /// The priority of process `pid`, read now.
    pub fn of_process(pid: i32) -> ClientPriority {
        ClientPriority { pid, nice: read_nice(pid), read_at: Instant::now() }
    }

    /// Reads the nice value again if it was read longer than [`REREAD`]
    /// ago.
    pub fn refresh(&mut self, now: Instant) {
        if now.saturating_duration_since(self.read_at) >= REREAD {
            self.nice = read_nice(self.pid);
            self.read_at = now;
        }
    }

    /// The nice value last read, if it could be.
    pub fn nice(&self) -> Option<i32> {
        self.nice
    }

    /// The client's priority.
    pub fn get(&self) -> Priority {
        match self.nice {
            Some(n) => Priority { value: from_nice(n), source: Source::Nice },
            None => Priority { value: DEFAULT, source: Source::Unknown },
        }
    }
}

/// The nice value of process `pid`, if it can be read.
fn read_nice(pid: i32) -> Option<i32> {
    let pid = libc::id_t::try_from(pid).ok().filter(|&p| p != 0)?;
    // getpriority returns -1 both as a nice value and as an error: errno
    // tells them apart, so it is cleared first.
    // SAFETY: __errno_location returns this thread's errno; getpriority
    // has no memory preconditions.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, pid);
        if nice == -1 && *libc::__errno_location() != 0 {
            return None;
        }
        Some(nice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_values_map_onto_the_kernels_scale() {
        assert_eq!(from_nice(0), 120);
        assert_eq!(from_nice(-20), HIGHEST);
        assert_eq!(from_nice(19), LOWEST);
        assert_eq!(from_nice(-100), HIGHEST);
        assert_eq!(from_nice(100), LOWEST);
        assert_eq!(from_nice(5), 125);
    }

    #[test]
    fn this_process_has_the_priority_of_its_nice_value() {
        // SAFETY: getpriority has no memory preconditions.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let p = ClientPriority::of_process(std::process::id() as i32);
        assert_eq!(p.nice(), Some(nice));
        assert_eq!(p.get(), Priority { value: from_nice(nice), source: Source::Nice });
    }

    #[test]
    fn a_process_that_does_not_exist_has_the_default() {
        // Above the kernel's largest pid (4,194,304).
        let p = ClientPriority::of_process(i32::MAX);
        assert_eq!(p.get(), Priority { value: DEFAULT, source: Source::Unknown });
        assert_eq!(ClientPriority::of_process(0).get().source, Source::Unknown, "pid 0 is not a client");
    }
}
