//! Priorities, on the kernel's scale that PacketFlow reads: 100 (the
//! highest, nice -20) to 139 (the lowest, nice 19), 120 for nice 0.
//!
//! A client's priority comes from its process's nice value, read by the
//! pid the rendezvous's credentials give and read again at most once a
//! [`REREAD`] (a `renice` takes effect within it). A socket's is its
//! client's unless the socket's own option (`SockOption::Priority`, as
//! `SO_PRIORITY` is per socket) overrides it.
//!
//! PacketFlow's scheduler may lift a client's process: netd lowers its
//! nice value for the boost and sets it back after (at the latest when
//! the client's session is dropped). While lifted, the client keeps the
//! priority of its own nice value; a nice value changed by someone else
//! meanwhile becomes its own, and is left as it is. A process with
//! several sessions is lifted by one at a time, and the others keep its
//! own nice value meanwhile (`Clients::notice_gone`). `setpriority` on a
//! pid changes that thread alone: a process that receives in other
//! threads than its first has only that one lifted.

use std::io;
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
    /// The process's own nice value, as last read.
    nice: Option<i32>,
    read_at: Instant,
    /// The nice value netd gave the process while it is lifted.
    lifted: Option<i32>,
}

impl ClientPriority {
    /// The priority of process `pid`, read now.
    pub fn of_process(pid: i32) -> ClientPriority {
        ClientPriority { pid, nice: read_nice(pid), read_at: Instant::now(), lifted: None }
    }

    /// Reads the nice value again if it was read longer than [`REREAD`]
    /// ago.
    pub fn refresh(&mut self, now: Instant) {
        if now.saturating_duration_since(self.read_at) >= REREAD {
            let read = read_nice(self.pid);
            if self.lifted.is_none() || read != self.lifted {
                self.nice = read;
                self.lifted = None;
            }
            self.read_at = now;
        }
    }

    /// Lowers the process's nice value by `steps` (to no less than -20)
    /// until [`ClientPriority::unlift`]. Nothing to do for 0 steps, an
    /// unknown nice value or a process lifted already; an error where the
    /// kernel refuses (netd without `CAP_SYS_NICE` may only raise nice
    /// values).
    pub fn lift(&mut self, steps: u8) -> io::Result<()> {
        let Some(own) = self.nice.filter(|_| steps > 0 && self.lifted.is_none()) else { return Ok(()) };
        let to = (own - i32::from(steps)).max(-20);
        set_nice(self.pid, to)?;
        self.lifted = Some(to);
        Ok(())
    }

    /// Gives the process its own nice value back, if netd lifted it and
    /// nobody changed it since.
    pub fn unlift(&mut self) {
        let (Some(lifted), Some(own)) = (self.lifted.take(), self.nice) else { return };
        if read_nice(self.pid) == Some(lifted) {
            // A process that has gone meanwhile needs nothing back.
            let _ = set_nice(self.pid, own);
        }
    }

    /// The nice value netd gave the process, while it is lifted.
    pub fn lifted(&self) -> Option<i32> {
        self.lifted
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

impl Drop for ClientPriority {
    /// A client that goes however netd lets go of it (a disconnect, netd
    /// stopping, an error or a panic unwinding netd's loop) gets its nice
    /// value back.
    fn drop(&mut self) {
        self.unlift();
    }
}

/// Sets the calling thread's nice value to `nice` (clamped to -20..=19);
/// threads and processes it starts afterwards inherit it. A lower value
/// needs `CAP_SYS_NICE` (or `RLIMIT_NICE`): the kernel's refusal is the
/// error.
pub fn set_own_nice(nice: i32) -> io::Result<()> {
    set_nice_of(0, nice.clamp(-20, 19))
}

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1 to 99,
/// clamped); threads and processes it starts afterwards inherit it. Needs
/// `CAP_SYS_NICE` (or `RLIMIT_RTPRIO`): the kernel's refusal is the error.
pub fn set_own_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority.clamp(1, 99) };
    // SAFETY: `param` is a live sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's real-time priority, 0 when it is not real-time.
pub fn own_realtime() -> Option<i32> {
    // SAFETY: sched_getscheduler has no memory preconditions.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return None;
    }
    if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
        return Some(0);
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a live sched_param.
    (unsafe { libc::sched_getparam(0, &mut param) } == 0).then_some(param.sched_priority)
}

/// The calling thread's nice value.
pub fn own_nice() -> Option<i32> {
    read_nice_of(0)
}

/// Sets process `pid`'s nice value to `nice`.
fn set_nice(pid: i32, nice: i32) -> io::Result<()> {
    let pid = libc::id_t::try_from(pid).ok().filter(|&p| p != 0).ok_or(io::ErrorKind::InvalidInput)?;
    set_nice_of(pid, nice)
}

/// Sets the nice value of `who` (0: the calling thread) to `nice`.
fn set_nice_of(who: libc::id_t, nice: i32) -> io::Result<()> {
    // SAFETY: setpriority has no memory preconditions.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, who, nice) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The nice value of process `pid`, if it can be read.
fn read_nice(pid: i32) -> Option<i32> {
    libc::id_t::try_from(pid).ok().filter(|&p| p != 0).and_then(read_nice_of)
}

/// The nice value of `who` (0: the calling thread), if it can be read.
fn read_nice_of(who: libc::id_t) -> Option<i32> {
    // getpriority returns -1 both as a nice value and as an error: errno
    // tells them apart, so it is cleared first.
    // SAFETY: __errno_location returns this thread's errno; getpriority
    // has no memory preconditions.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, who);
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
    fn own_nice_is_the_calling_threads_and_threads_it_starts_inherit_it() {
        // A higher nice value needs no privilege; a thread of its own, so
        // the test's thread keeps its own.
        let Some((own, inherited, other)) = std::thread::spawn(|| {
            let before = own_nice().expect("own nice value");
            if before > 16 {
                return None;
            }
            let to = before + 3;
            set_own_nice(to).expect("a higher nice value is always allowed");
            let inherited = std::thread::spawn(own_nice).join().expect("child thread");
            Some((own_nice().map(|n| (n, to)), inherited, before))
        })
        .join()
        .expect("thread") else {
            eprintln!("*** SKIPPED own_nice_is_the_calling_threads...: this test runs at nice 17 or more, and may not go up 3 ***");
            return;
        };
        let (own, to) = own.expect("own nice value");
        assert_eq!(own, to);
        assert_eq!(inherited, Some(to));
        assert_eq!(own_nice(), Some(other), "only the calling thread changed");
    }

    #[test]
    fn realtime_is_the_calling_threads_and_threads_it_starts_inherit_it() {
        // A thread of its own, which ends at once: the test's thread and
        // the others keep the normal scheduler.
        let (set, own, inherited) = std::thread::spawn(|| {
            let set = set_own_realtime(3);
            let inherited = std::thread::spawn(own_realtime).join().expect("child thread");
            (set, own_realtime(), inherited)
        })
        .join()
        .expect("thread");
        match set {
            Ok(()) => {
                assert_eq!(own, Some(3));
                assert_eq!(inherited, Some(3));
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EPERM), "refused for want of CAP_SYS_NICE only");
                assert_eq!(own, Some(0), "left as it was");
            }
        }
        assert_eq!(own_realtime(), Some(0), "only that thread changed");
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
    fn a_lifted_process_keeps_its_own_priority_and_gets_its_nice_value_back() {
        // A child at nice 10, which this test may lift only as root.
        let mut child =
            std::process::Command::new("nice").args(["-n", "10", "sleep", "10"]).spawn().expect("nice sleep");
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(5);
        while read_nice(pid) != Some(10) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut p = ClientPriority::of_process(pid);
        assert_eq!(p.get().value, 130);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match p.lift(4) {
            Ok(()) => {
                assert!(root, "only root lowers a nice value");
                assert_eq!((read_nice(pid), p.lifted()), (Some(6), Some(6)));
                p.lift(4).expect("lifted already: nothing to do");
                assert_eq!(read_nice(pid), Some(6));
                p.refresh(Instant::now() + REREAD);
                assert_eq!(p.get().value, 130, "its own nice value, not the lifted one");
                p.unlift();
                assert_eq!((read_nice(pid), p.lifted()), (Some(10), None));
                // Reniced by someone else while lifted: that is its own.
                p.lift(15).expect("lift");
                assert_eq!(read_nice(pid), Some(-5));
                set_nice(pid, 3).expect("renice");
                p.refresh(Instant::now() + 2 * REREAD);
                assert_eq!((p.get().value, p.lifted()), (123, None));
                p.unlift();
                assert_eq!(read_nice(pid), Some(3), "left as it was set");
            }
            Err(e) => {
                assert!(!root, "root may lift: {e}");
                assert_eq!((read_nice(pid), p.lifted()), (Some(10), None));
                eprintln!("SKIPPED: lifting a process needs root (CAP_SYS_NICE); the refusal was checked");
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_process_that_does_not_exist_has_the_default() {
        // Above the kernel's largest pid (4,194,304).
        let p = ClientPriority::of_process(i32::MAX);
        assert_eq!(p.get(), Priority { value: DEFAULT, source: Source::Unknown });
        assert_eq!(ClientPriority::of_process(0).get().source, Source::Unknown, "pid 0 is not a client");
    }
}
