//! Descriptors whose readiness follows a socket's: what a socket's
//! `readiness_fd` gives ([`ReadinessFd`]), so that a program can wait for a nagare socket
//! in its own `poll`, `epoll`, mio or tokio `AsyncFd`, beside kernel
//! descriptors.
//!
//! A socket's readiness lives in this process (its data path, `path.rs`;
//! a listener's queue, `accept.rs`), made from completions that netd
//! posts on the session's rings. Each socket asked for a descriptor gets
//! one [`ReadyFd`]: one end of a Unix stream socket pair, set to the
//! socket's readiness by the library (both of its directions: an eventfd
//! or a pipe can be made not readable, but an eventfd is never both not
//! readable and not writable, and a pipe's end is only one of the two).
//! Readable: a byte waits on it. Not writable: its own send buffer is
//! filled with bytes the other end holds unread. Set readable and
//! writable when the socket is *closed* (an error, or the stream failed)
//! and when netd is gone: a call then returns at once with the error.
//!
//! Who sets it: the readiness only rises when completions are taken off
//! the rings (`Conn::deliver`), and only falls through a call on the
//! socket itself (a read, a write, an accept). So the descriptor is set
//! after every completion delivered to its socket and after every call
//! on the socket; in between it stays as it is (level: readable while
//! data waits, until a read takes the last of it). The completions must
//! be taken off the rings while the program sleeps in its own `poll` on
//! these descriptors alone: the session's *watcher*, a thread started
//! with the first descriptor, sleeps on the session's eventfd (and on
//! netd's rendezvous socket, so netd's death wakes it) as one of the
//! session's waiters (`lib.rs`, `Shared`), takes what arrives, and sets
//! the descriptors. A program's thread that sleeps on one socket's
//! descriptor is thus woken by that socket's readiness only, never by
//! another socket's completion.
//!
//! Why not two other shapes. An epoll descriptor per socket holding
//! the session's eventfd beside the socket's own needs no thread, but
//! every socket's descriptor would then wake on any completion of the
//! session, and an epoll descriptor is never writable. netd writing a
//! per-socket eventfd the client passed it would wake only the socket's
//! waiter, but netd does not see every completion (a driver posts its
//! direct returns itself), a path's readiness is made here from the
//! completions this process takes (receives posted ahead, sends queued),
//! each signal would be a system call in netd's loop, and netd would take
//! one more descriptor from every client to check. The watcher keeps all
//! of it in the client: netd sees nothing of these descriptors.

use crate::path::Role;
use crate::InFlight;
use nagare_request::{Op, Piece, PollEntry, Request, CLOSED, INVALID, MAX_POLL, READABLE, WRITABLE};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};

/// How long a watch of unposted sockets waits in netd for one to be
/// ready before it comes back and its sockets are watched again (with
/// those that joined meanwhile, if [`MOST_WATCHES`] were out: they wait
/// that long at most).
const WATCH_LIMIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Watches of unposted sockets in flight at once: netd looks at each
/// again on every turn of the client's, so a socket that joins alone gets
/// a watch of its own only up to this many.
const MOST_WATCHES: usize = 8;

/// The state set on the descriptor: readable.
const IN: u8 = 1;
/// The state set on the descriptor: writable.
const OUT: u8 = 2;

/// Bytes moved per read or write while a direction is set: more than the
/// send buffer holds (`SO_SNDBUF` as small as the kernel allows, a few
/// KiB), so that one system call fills it or empties it.
const CHUNK: usize = 16 << 10;

/// The most reads or writes one change of a direction makes (more than
/// one only where the program grew the send buffer).
const MOST_STEPS: usize = 64;

/// What fills the send buffer.
static JUNK: [u8; CHUNK] = [0; CHUNK];

/// One socket's descriptor: the end the program polls and the end the
/// library writes.
#[derive(Debug)]
pub(crate) struct ReadyFd {
    /// Lent to the program: readable while a byte from `kept` waits on
    /// it, writable while its send buffer has room.
    given: OwnedFd,
    /// Writes the byte that makes `given` readable, and holds the bytes
    /// that fill `given`'s send buffer.
    kept: OwnedFd,
    /// What was set on `given` last ([`IN`], [`OUT`]); changed only with
    /// the session taken.
    state: AtomicU8,
}

impl ReadyFd {
    /// Both ends' numbers.
    pub(crate) fn descriptors(&self) -> [std::os::fd::RawFd; 2] {
        [self.given.as_raw_fd(), self.kept.as_raw_fd()]
    }

    /// A descriptor that is writable and not readable.
    pub(crate) fn new() -> io::Result<ReadyFd> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: socketpair succeeded: both are open and ours alone.
        let (given, kept) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // The smallest send buffer the kernel gives (it raises 0 to its
        // floor): a few KiB fill it.
        let zero: libc::c_int = 0;
        // SAFETY: a valid socket and an int option of the right size.
        let r = unsafe {
            libc::setsockopt(
                given.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&zero as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ReadyFd { given, kept, state: AtomicU8::new(OUT) })
    }

    /// Sets the descriptor to `ready` (the socket's `READABLE`,
    /// `WRITABLE`, `CLOSED`, as `Conn::readiness` gives it): a system call
    /// only for a direction that changes. Called with the session taken,
    /// so that two settings never cross.
    pub(crate) fn set(&self, ready: u16) {
        let mut want = 0;
        if ready & (READABLE | CLOSED) != 0 {
            want |= IN;
        }
        if ready & (WRITABLE | CLOSED) != 0 {
            want |= OUT;
        }
        let had = self.state.load(Ordering::Relaxed);
        if want == had {
            return;
        }
        if (want ^ had) & IN != 0 {
            if want & IN != 0 {
                let _ = write_some(self.kept.as_fd(), &[1]);
            } else {
                drain(self.given.as_fd());
            }
        }
        if (want ^ had) & OUT != 0 {
            if want & OUT != 0 {
                drain(self.kept.as_fd());
            } else {
                fill(self.given.as_fd());
            }
        }
        self.state.store(want, Ordering::Relaxed);
    }
}

impl crate::Conn {
    /// Sets socket `id`'s descriptor, if it has one, to its readiness
    /// (`readyfd.rs`): `CLOSED` once netd is gone; readable and writable
    /// for a shared socket, whose readiness netd alone knows, so that its
    /// caller calls and learns it there. An unposted socket's (`path.rs`)
    /// is its path's, readable too where netd said so since its last read
    /// found nothing; while netd has not, a watch asks netd to say
    /// (`Conn::watch_unposted`).
    /// Not once another process holds the session (`Session::abandon`):
    /// a child made by `fork` shares the descriptors.
    pub(crate) fn publish(&self, id: u32) {
        if self.abandoned {
            return;
        }
        let Some(fd) = self.ready_fds.get(&id) else { return };
        let unposted = self.unposted.get(&id).filter(|_| !self.is_shared(id));
        let ready = if self.dead {
            CLOSED
        } else if !self.tracks_readiness(id) && unposted.is_none() {
            READABLE | WRITABLE
        } else {
            let mut ready = self.readiness(id).unwrap_or(CLOSED);
            if let Some(u) = unposted {
                ready |= u.said;
                if u.said == 0 && u.watch == 0 {
                    self.watch_wanted.set(true);
                }
            }
            if ready & WRITABLE == 0 && self.writable_but_for_the_pool(id) {
                self.starved.borrow_mut().insert(id);
            }
            ready
        };
        fd.set(ready);
    }

    /// Whether socket `id` would be writable if a buffer of the pool were
    /// free.
    fn writable_but_for_the_pool(&self, id: u32) -> bool {
        self.paths.get(&id).is_some_and(|p| p.may_queue()) && !self.send_buffer_free()
    }

    /// Sets again the descriptors set not writable for want of a free
    /// buffer alone, once one is free: a buffer coming back (a send's
    /// completion, a read that emptied one) makes them writable.
    pub(crate) fn publish_starved(&mut self) {
        if self.starved.get_mut().is_empty() || !self.send_buffer_free() {
            return;
        }
        for id in std::mem::take(self.starved.get_mut()) {
            self.publish(id);
        }
    }

    /// Sets the descriptor of the connect whose request is `id`, if it
    /// has one: writable once netd answered with a connection, readable
    /// and writable once it answered with an error or is gone (as a
    /// kernel socket's connect ends), neither before.
    pub(crate) fn publish_answer(&self, id: u64) {
        if self.abandoned {
            return;
        }
        let Some(fd) = self.answer_fds.get(&id) else { return };
        let ready = match self.arrived.get(&id) {
            _ if self.dead => CLOSED,
            Some((Ok(c), _)) if c.result().is_ok() => WRITABLE,
            Some(_) => CLOSED,
            None => 0,
        };
        fd.set(ready);
    }

    /// Sets every socket's descriptor (`Conn::publish`), and every
    /// connect's (`Conn::publish_answer`).
    pub(crate) fn publish_all(&self) {
        for &id in self.ready_fds.keys() {
            self.publish(id);
        }
        for &id in self.answer_fds.keys() {
            self.publish_answer(id);
        }
    }

    /// Asks netd, without waiting, to answer once one of the unposted
    /// sockets that lent descriptors, that netd has not said are ready
    /// and that no watch in flight lists, is readable or closed, or
    /// [`WATCH_LIMIT`] has passed: its answer ([`Conn::take_watch`]) sets
    /// their descriptors, as completions set other sockets'. Their data
    /// waits in netd, which signals nothing else when it comes. So each
    /// such socket is in one watch: those that join (a read found
    /// nothing) get one of their own while fewer than [`MOST_WATCHES`]
    /// are in flight, else when one comes back. A watch keeps the
    /// sixteenth of the pool unposted sockets' reads leave: with no more
    /// free, it is made once a buffer comes back (`Conn::collect`).
    pub(crate) fn watch_unposted(&mut self) {
        if !self.watch_wanted.get() || self.dead || self.abandoned || self.watches.len() >= MOST_WATCHES {
            return;
        }
        if self.pool.counts().0 <= self.pool.len() * crate::path::UNPOSTED_RESERVE_SIXTEENTHS / 16 {
            return;
        }
        let most = (self.pool.buffer_size() as usize / PollEntry::SIZE).min(MAX_POLL as usize);
        let listed: Vec<u32> = self
            .unposted
            .iter()
            .filter(|&(id, u)| {
                u.said == 0
                    && u.watch == 0
                    && self.ready_fds.contains_key(id)
                    && self.paths.get(id).is_some_and(|p| !p.is_shared())
            })
            .map(|(&id, _)| id)
            .take(most)
            .collect();
        // Those past `most` wait for the next watch.
        self.watch_wanted.set(listed.len() == most);
        if listed.is_empty() {
            return;
        }
        let Some(b) = self.pool.alloc() else {
            self.watch_wanted.set(true);
            return;
        };
        for (n, &id) in listed.iter().enumerate() {
            let entry = PollEntry { socket: id, interest: READABLE, ready: 0 };
            if self.pool.write(b, (n * PollEntry::SIZE) as u32, &entry.to_bytes()).is_err() {
                let _ = self.pool.release(b);
                self.watch_wanted.set(true);
                return;
            }
        }
        let mut req = Request::new(Op::Poll, 0);
        crate::set_wait_limit(&mut req, Some(WATCH_LIMIT));
        req.piece = Some(Piece { buffer: b, offset: 0, len: (listed.len() * PollEntry::SIZE) as u32 });
        // A buffer `submit` could not give is released there; one given
        // comes back with the completion (or with netd, if it is gone).
        if self.submit(&mut req, Some(b)).is_err() {
            self.watch_wanted.set(true);
            return;
        }
        self.in_flight.insert(req.id, InFlight { buffer: Some(b), abandoned: false, role: Role::WatchUnposted });
        self.watches.push(req.id);
        for id in listed {
            if let Some(u) = self.unposted.get_mut(&id) {
                u.watch = req.id;
            }
        }
    }

    /// Takes netd's answer to watch `rid` ([`Conn::watch_unposted`]):
    /// each socket it says is readable or closed (or no longer knows, so
    /// that a call finds out), and still unposted, is so until a read
    /// finds nothing; the others it listed are watched again.
    pub(crate) fn take_watch(
        &mut self,
        rid: u64,
        comp: Result<nagare_request::Completion, nagare_request::ProtoError>,
        back: Option<nagare_ipc::BufRef>,
    ) {
        self.watches.retain(|&w| w != rid);
        for u in self.unposted.values_mut().filter(|u| u.watch == rid) {
            u.watch = 0;
        }
        self.watch_wanted.set(true);
        let Some(b) = back else { return };
        if comp.is_ok_and(|c| c.result().is_ok()) {
            for i in 0..b.len as usize / PollEntry::SIZE {
                let mut bytes = [0u8; PollEntry::SIZE];
                if self.pool.read(b.index, b.offset + (i * PollEntry::SIZE) as u32, &mut bytes).is_err() {
                    break;
                }
                let entry = PollEntry::from_bytes(bytes);
                let mut said = entry.ready & (READABLE | CLOSED);
                if entry.ready & INVALID != 0 {
                    said |= CLOSED;
                }
                if said == 0 {
                    continue;
                }
                if let Some(u) = self.unposted.get_mut(&entry.socket) {
                    u.said |= said;
                    self.publish(entry.socket);
                }
            }
        }
        let _ = self.pool.release(b.index);
    }

    /// `Ok` where socket `id` may lend a descriptor: not a socket shared
    /// with another process, whose readiness netd alone knows
    /// (`ErrorKind::Unsupported`: a descriptor could only say "ready"
    /// always, and a level-triggered waiter would spin on it).
    pub(crate) fn lends_readiness(&self, id: u32) -> io::Result<()> {
        if self.paths.get(&id).is_some_and(|p| p.is_shared()) || self.is_shared_listener(id) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a socket shared with another process has no readiness descriptor: netd alone knows its readiness",
            ));
        }
        Ok(())
    }

    /// Marks the session dead (netd is gone, or its rings broke) and sets
    /// every descriptor readable and writable, for their calls to fail:
    /// every path that finds the session dead goes through here.
    pub(crate) fn mark_dead(&mut self) {
        self.dead = true;
        self.publish_all();
    }
}

impl AsFd for ReadyFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.given.as_fd()
    }
}

/// A descriptor whose readiness follows a socket's, **not the socket**:
/// for a program's own `poll`, `epoll`, mio or tokio `AsyncFd` beside
/// kernel descriptors (what a socket's `readiness_fd` gives). Only poll
/// it: reading or writing it, or socket calls on it (`setsockopt`,
/// `getsockname`), act on a Unix socket pair of the library's, never on
/// the nagare socket. Clones name the same descriptor; it stays open
/// while the socket or a clone lives.
///
/// The sockets themselves lend no descriptor (`AsFd`, `AsRawFd`), so
/// that generic code acting on a socket's descriptor never gets this one:
///
/// ```compile_fail
/// use std::os::fd::AsRawFd;
/// fn lend(s: &nagare::net::TcpStream) -> std::os::fd::RawFd {
///     s.as_raw_fd()
/// }
/// ```
///
/// ```no_run
/// use std::os::fd::AsRawFd;
/// fn lend(s: &nagare::net::TcpStream) -> std::io::Result<std::os::fd::RawFd> {
///     Ok(s.readiness_fd()?.as_raw_fd())
/// }
/// ```
#[derive(Clone, Debug)]
pub struct ReadinessFd(pub(crate) std::sync::Arc<ReadyFd>);

impl AsFd for ReadinessFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for ReadinessFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// One non-blocking write; bytes written (0 when full).
fn write_some(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: `bytes` is valid for its length; the fd is open.
    let n = unsafe { libc::send(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock { Ok(0) } else { Err(e) };
    }
    Ok(n as usize)
}

/// Reads what waits on `fd` until nothing does (at most [`MOST_STEPS`]
/// reads): a read of a stream socket takes all that waits, up to its
/// length, so one shorter than asked emptied it.
fn drain(fd: BorrowedFd<'_>) {
    let mut buf = [0u8; CHUNK];
    for _ in 0..MOST_STEPS {
        // SAFETY: `buf` is valid for its length; the fd is open.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n < buf.len() as isize {
            return;
        }
    }
}

/// Writes from `fd` until its send buffer is full (at most
/// [`MOST_STEPS`] writes): a non-blocking write of a stream socket
/// writes until the buffer is full, so one shorter than asked filled it.
fn fill(fd: BorrowedFd<'_>) {
    for _ in 0..MOST_STEPS {
        match write_some(fd, &JUNK) {
            Ok(n) if n == JUNK.len() => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `poll`'s events on the lent end, without waiting.
    fn events(r: &ReadyFd) -> i16 {
        let mut p = libc::pollfd { fd: r.as_fd().as_raw_fd(), events: libc::POLLIN | libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        assert!(n >= 0, "{}", io::Error::last_os_error());
        p.revents & (libc::POLLIN | libc::POLLOUT)
    }

    #[test]
    fn every_state_shows_on_the_lent_end() {
        let r = ReadyFd::new().unwrap();
        assert_eq!(events(&r), libc::POLLOUT, "fresh: writable only");
        r.set(0);
        assert_eq!(events(&r), 0, "neither");
        r.set(READABLE);
        assert_eq!(events(&r), libc::POLLIN, "readable only");
        r.set(READABLE | WRITABLE);
        assert_eq!(events(&r), libc::POLLIN | libc::POLLOUT, "both");
        r.set(WRITABLE);
        assert_eq!(events(&r), libc::POLLOUT, "writable only");
        r.set(CLOSED);
        assert_eq!(events(&r), libc::POLLIN | libc::POLLOUT, "closed: both");
        for _ in 0..3 {
            r.set(0);
            assert_eq!(events(&r), 0, "neither, again");
            r.set(READABLE | WRITABLE);
            assert_eq!(events(&r), libc::POLLIN | libc::POLLOUT, "both, again");
        }
    }

    /// The events an edge-triggered epoll reports without waiting.
    fn edges(ep: &OwnedFd) -> u32 {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: room for four events.
        let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), ev.as_mut_ptr(), 4, 0) };
        assert!(n >= 0, "{}", io::Error::last_os_error());
        ev[..n as usize].iter().fold(0, |acc, e| acc | e.events) & (libc::EPOLLIN | libc::EPOLLOUT) as u32
    }

    #[test]
    fn every_rise_is_an_edge() {
        let r = ReadyFd::new().unwrap();
        // SAFETY: plain system calls on descriptors of this test.
        let ep = unsafe { OwnedFd::from_raw_fd(libc::epoll_create1(libc::EPOLL_CLOEXEC)) };
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32, u64: 1 };
        // SAFETY: valid descriptors and event.
        assert_eq!(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, r.as_fd().as_raw_fd(), &mut ev) }, 0);
        assert_eq!(edges(&ep), libc::EPOLLOUT as u32, "registered writable");
        assert_eq!(edges(&ep), 0, "no second edge");
        r.set(0);
        assert_eq!(edges(&ep), 0, "a fall is no edge");
        r.set(READABLE);
        assert_eq!(edges(&ep), libc::EPOLLIN as u32, "readable: an edge");
        r.set(READABLE | WRITABLE);
        assert_ne!(edges(&ep) & libc::EPOLLOUT as u32, 0, "writable: an edge");
        r.set(0);
        assert_eq!(edges(&ep), 0);
        r.set(WRITABLE);
        assert_eq!(edges(&ep), libc::EPOLLOUT as u32, "writable again: an edge");
        r.set(CLOSED);
        assert_ne!(edges(&ep) & libc::EPOLLIN as u32, 0, "closed: readable, an edge");
    }
}
