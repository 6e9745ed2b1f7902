//! Doorbells: an eventfd per receiving port, and a sender's copy of it.
//!
//! The receiver creates a non-blocking eventfd and publishes its number
//! and its pid in its port record. A sender fetches the descriptor from
//! the receiver's fd table once (pidfd_open + pidfd_getfd, Linux 5.6),
//! checks it really is an eventfd (the number came from shared memory),
//! and keeps it for that attach generation. Ringing is one 8-byte write.
//! Both ends are `nagare_ipc::EventFd`, the eventfd of the inet server's
//! notifier; what is particular to the VNI is how the sender gets it (from
//! a number in shared memory, not over a socket) and the checks that
//! number needs.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use nagare_ipc::EventFd;

/// The doorbells of this process's own ports. A record naming our own pid
/// may only name one of these: any other eventfd of ours (an embedding
/// application's waker, say) is not a peer's doorbell to ring.
static OUR_DOORBELLS: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

fn our_doorbells() -> std::sync::MutexGuard<'static, Vec<RawFd>> {
    OUR_DOORBELLS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The receiving side: our own eventfd.
#[derive(Debug)]
pub struct Doorbell {
    fd: EventFd,
}

impl Doorbell {
    /// A fresh non-blocking, close-on-exec eventfd.
    pub fn new() -> io::Result<Doorbell> {
        let fd = EventFd::new()?;
        our_doorbells().push(fd.as_raw_fd());
        Ok(Doorbell { fd })
    }

    /// The descriptor to poll.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Clears the doorbell; whether it had been rung.
    pub fn drain(&self) -> bool {
        self.fd.drain().is_ok_and(|n| n > 0)
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        let fd = self.fd.as_raw_fd();
        our_doorbells().retain(|&d| d != fd);
    }
}

/// A sender's duplicate of a receiver's eventfd.
#[derive(Debug)]
pub struct RemoteBell {
    fd: EventFd,
}

fn cvt(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A pid as the kernel's pid_t, if it could name a single process
/// (0 and negative values mean process groups to kill(2)).
fn as_pid(pid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)
}

/// Whether process `pid` exists (a pid from shared memory: anything).
pub fn process_alive(pid: u32) -> bool {
    let Some(pid) = as_pid(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists and may be
    // signalled; `pid` is positive, so it names one process.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether `fd` (ours) is an eventfd.
fn is_eventfd(fd: RawFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|target| target.as_os_str() == "anon_inode:[eventfd]")
}

impl RemoteBell {
    /// Fetches descriptor `fd` of process `pid` (both read from shared
    /// memory) and checks it is an eventfd.
    pub fn fetch(pid: u32, fd: u32) -> io::Result<RemoteBell> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("doorbell of pid {pid}: {what}"));
        let Some(pid_t) = as_pid(pid) else { return Err(bad("invalid pid")) };
        let Ok(target_fd) = libc::c_int::try_from(fd) else { return Err(bad("invalid fd number")) };
        if pid == std::process::id() && !our_doorbells().contains(&target_fd) {
            return Err(bad("names one of our descriptors that is not a port's doorbell"));
        }
        // SAFETY: pidfd_open(pid, 0) takes two integers and returns a new
        // descriptor or -1.
        let pidfd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid_t, 0) })?;
        // SAFETY: the descriptor was just created and is ours alone.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        // SAFETY: pidfd_getfd(pidfd, fd, 0) takes three integers and
        // returns a new descriptor (a duplicate of the target's) or -1.
        let got = cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) })?;
        // SAFETY: a new descriptor in our table, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(got as RawFd) };
        if !is_eventfd(fd.as_raw_fd()) {
            return Err(bad("the published descriptor is not an eventfd"));
        }
        Ok(RemoteBell { fd: EventFd::from_owned(fd) })
    }

    /// Rings: adds one to the receiver's eventfd. A full counter (never
    /// read for 2^64 - 2 rings) already means "rung", so EAGAIN is fine.
    pub fn ring(&self) -> io::Result<()> {
        self.fd.signal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_own_doorbell_through_pidfd() {
        let bell = Doorbell::new().unwrap();
        assert!(!bell.drain());
        let remote = RemoteBell::fetch(std::process::id(), bell.raw_fd() as u32).unwrap();
        remote.ring().unwrap();
        remote.ring().unwrap();
        assert!(bell.drain());
        assert!(!bell.drain());
    }

    #[test]
    fn hostile_doorbell_numbers_are_refused() {
        let me = std::process::id();
        // stdin is not an eventfd; fd 1 << 30 does not exist.
        assert!(RemoteBell::fetch(me, 0).is_err());
        assert!(RemoteBell::fetch(me, 1 << 30).is_err());
        assert!(RemoteBell::fetch(me, u32::MAX).is_err());
        assert!(RemoteBell::fetch(0, 3).is_err());
        assert!(RemoteBell::fetch(u32::MAX, 3).is_err());
        assert!(!process_alive(0));
        assert!(!process_alive(u32::MAX));
        assert!(process_alive(me));
    }

    #[test]
    fn our_own_pid_may_name_only_our_doorbells() {
        let me = std::process::id();
        let bell = Doorbell::new().unwrap();
        let remote = RemoteBell::fetch(me, bell.raw_fd() as u32).expect("a port's doorbell in this process");
        remote.ring().unwrap();
        assert!(bell.drain(), "rung through the fetched copy");
        // Some other eventfd of ours: refused although it is an eventfd.
        // SAFETY (test): plain system call.
        let other = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(other >= 0);
        // SAFETY (test): just created, ours alone.
        let other = unsafe { OwnedFd::from_raw_fd(other) };
        let e = RemoteBell::fetch(me, other.as_raw_fd() as u32).unwrap_err();
        assert!(e.to_string().contains("not a port's doorbell"), "{e}");
        let fd = bell.raw_fd();
        drop(bell);
        assert!(!our_doorbells().contains(&fd), "a dropped doorbell is forgotten");
    }
}
