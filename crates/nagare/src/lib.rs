//! nagare's client library: `std::net`-shaped sockets over a running
//! `nagare netd`.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! // NAGARE_NETD=/path/to/socket, or the default /tmp/nagare-netd.sock
//! let mut s = nagare::net::TcpStream::connect("10.0.0.1:7")?;
//! s.write_all(b"hello")?;
//! let mut buf = [0u8; 5];
//! s.read_exact(&mut buf)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Control calls (connect, bind, listen, close, options) are one request
//! into the region's request ring and a wait (spin, then sleep on the
//! eventfd) for its completion. Data calls do not wait for netd: each
//! socket has a data path (`path.rs`): a write queues and returns, and
//! receives are posted ahead, so reads and polls take what has arrived;
//! a listener keeps an accept posted ahead (`accept.rs`), so `accept`
//! takes a connection netd already accepted.
//! Each socket lends a descriptor (`readiness_fd`, not the socket) whose
//! readiness follows the socket's, for a program's own `poll`, `epoll` or async
//! runtime beside kernel descriptors (`readyfd.rs`; a watcher thread per
//! session keeps them, `watcher.rs`).
//! Waits are cut into slices of [`LIVENESS_SLICE`]; between slices the
//! rendezvous socket is checked, so when netd dies every call fails within
//! a second (`ErrorKind::ConnectionAborted`).

#![warn(missing_docs)]

mod accept;
#[cfg(feature = "embedded")]
pub mod embedded;
mod errors;
mod fork;
pub mod net;
mod path;
pub mod ping;
pub mod poll;
mod readyfd;
pub mod share;
pub mod signals;
mod watcher;
pub mod zerocopy;

pub use fork::ForkHold;
use hashbrown::{HashMap, HashSet};
use nagare_ipc::{BufRef, Client, Consumer, Descriptor, Notifier, Pool, Producer, Waiter, DEFAULT_SPIN, NO_BUFFER};
use nagare_request::{Completion, Op, Piece, Request};
use path::Role;
pub use path::RECV_AHEAD;
pub use readyfd::ReadinessFd;
use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable naming netd's socket.
pub const NETD_ENV: &str = "NAGARE_NETD";

/// The environment variable that sets how long a call polls for its
/// completion before it sleeps, in microseconds (default 20 where the
/// process may run on more than one CPU, 0 on one: there polling would
/// only keep netd, which it waits for, off the CPU).
pub const SPIN_ENV: &str = "NAGARE_SPIN_US";

fn spin_from_env() -> Duration {
    // Asked once per process: the answer reads the cgroup's limits from
    // /proc (a dozen system calls), and a program that forks makes a
    // session for every child.
    static CPUS: OnceLock<usize> = OnceLock::new();
    let cpus = *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let default = if cpus > 1 { DEFAULT_SPIN } else { Duration::ZERO };
    std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(default, |us| Duration::from_micros(us.min(1_000_000)))
}

/// How long a call waits before it checks that netd is alive.
pub const LIVENESS_SLICE: Duration = Duration::from_millis(100);

/// How long a call made by a signal handler that interrupted its own
/// thread's sleep on the eventfd naps first between looks at the rings;
/// each nap of one wait is twice the last, up to [`HANDLER_NAP_MAX`], so a
/// quick answer is seen soon and a long wait costs a wake-up a
/// millisecond, not twenty.
const HANDLER_NAP: Duration = Duration::from_micros(50);

/// The longest nap of a call made by such a handler.
const HANDLER_NAP_MAX: Duration = Duration::from_millis(1);

/// The nap after one of `nap`.
fn next_nap(nap: Duration) -> Duration {
    nap.saturating_mul(2).min(HANDLER_NAP_MAX)
}

/// The calling thread's kernel id.
fn this_thread() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// This application's session with a running netd (netd keeps the other
/// side of it): a region of our own, its rings and buffers. Cheap to clone
/// (shared). Threads take turns at the session only while they touch its
/// rings and tables; none holds it while it waits (see [`Session::until`]).
#[derive(Clone)]
pub struct Session {
    inner: Arc<Shared>,
}

/// What the clones of a session share.
///
/// Waiting: of the threads that wait for netd, one at a time (the
/// *sleeper*, `Conn::sleeper`) sleeps on the session's eventfd without
/// holding `conn`; the others wait on `woken`, which the sleeper signals
/// once it wakes. Every waiter then takes what arrived and looks again, so
/// a completion taken by one thread is seen by the thread it is for.
struct Shared {
    conn: Mutex<Conn>,
    woken: Condvar,
    /// A second descriptor for the eventfd netd signals, slept on while
    /// `conn` is let go.
    wake: nagare_ipc::EventFd,
    /// The thread that sets the sockets' descriptors, started with the
    /// first (`watcher.rs`).
    watcher: Mutex<Option<watcher::Watcher>>,
    /// The rendezvous socket's number and its file's device and inode,
    /// read without `conn` ([`Session::let_go_copy`]).
    liveness: std::os::fd::RawFd,
    liveness_file: Option<(u64, u64)>,
}

struct Conn {
    client: Client,
    requests: Producer,
    completions: Consumer,
    /// Completions the driver posts directly (direct return).
    direct: Consumer,
    pool: Pool,
    notifier: Notifier,
    waiter: Waiter,
    next_id: u64,
    dead: bool,
    /// Asynchronous requests posted and not yet completed.
    in_flight: HashMap<u64, InFlight>,
    /// Their completions, taken while waiting for another.
    arrived: HashMap<u64, Taken>,
    /// Sends queued on socket paths and not yet completed: their buffers
    /// come back with their completions.
    queued_total: usize,
    /// netd's socket, for the error that says it is gone.
    socket: PathBuf,
    /// Each socket's data path, by socket id.
    paths: HashMap<u32, path::SockPath>,
    /// Each listener's queue of accepted connections, by socket id.
    listeners: HashMap<u32, accept::ListenPath>,
    /// Receives posted ahead on every path.
    posted_total: usize,
    /// When netd was last seen alive by a call that does not wait for it.
    alive_at: Instant,
    /// A thread sleeps on the eventfd for every waiter (see [`Shared`]).
    sleeper: bool,
    /// Which thread (its kernel id): a call a signal handler makes on that
    /// thread while it sleeps must not wait for the sleeper to wake it.
    sleeper_thread: libc::pid_t,
    /// That thread is the watcher (`watcher.rs`), which asked netd for
    /// signals and sleeps with no time limit.
    watcher_sleeps: bool,
    /// Outside loops that sleep on the eventfd ([`Session::prepare_wait`]
    /// gave it, [`Session::finish_wait`] not called yet; several threads
    /// may each run one): while any does, the watcher leaves the eventfd
    /// for them to reset.
    outside_waits: usize,
    /// The watcher waits (on `woken`) for that loop's `finish_wait`.
    watcher_waits: bool,
    /// Another process uses the session now ([`Session::abandon`]): this
    /// one touches nothing it shares with netd.
    abandoned: bool,
    /// The requests of [`poll::wake_when_ready`] made and perhaps still in
    /// flight, each with the list it asked about.
    armed: Vec<(u64, Vec<u8>)>,
    /// How many completions were taken off the rings so far
    /// ([`Session::prepare_wait_after`]).
    collected: u64,
    /// The descriptors lent by sockets' `readiness_fd`, by socket id
    /// (`readyfd.rs`).
    ready_fds: HashMap<u32, Arc<readyfd::ReadyFd>>,
    /// The descriptors lent by connects under way (`Connecting`), by
    /// request id.
    answer_fds: HashMap<u64, Arc<readyfd::ReadyFd>>,
    /// Sockets whose descriptors were set not writable for want of a free
    /// buffer of the pool alone: set again when one comes back
    /// (`Conn::publish_starved`).
    starved: RefCell<HashSet<u32>>,
    /// The sockets whose paths are unposted (`path.rs`): no receive could
    /// be posted ahead for want of a free buffer (more sockets than the
    /// pool holds receives for) when the socket had none posted and held
    /// no data. Until one is posted ahead, such a socket is read as a
    /// shared one is (a read posts one receive of its own, whose data it
    /// holds until read) and its readiness is netd's to say. Tried again
    /// as buffers come back (`Conn::repost_unposted`), in turn from
    /// `repost_from` on. Each with what netd said of its readiness, which
    /// a descriptor it lent shows (`readyfd.rs`).
    unposted: std::collections::BTreeMap<u32, path::Unposted>,
    repost_from: u32,
    /// The requests that watch unposted sockets' readiness for their
    /// descriptors (`Conn::watch_unposted`), in flight.
    watches: Vec<u64>,
    /// An unposted socket with a descriptor may have no watch for it.
    watch_wanted: std::cell::Cell<bool>,
    /// The session's sockets lent descriptors and no watcher runs for them
    /// in this process (its thread ended, or this process is a child made
    /// by `fork`): the next call starts one ([`Session::lock`]).
    start_watcher: bool,
}

/// What a request carries in its buffer.
pub(crate) enum Data<'a> {
    None,
    Send(&'a [u8]),
    Recv(&'a mut [u8]),
    /// Sent, and read back from the completion (a poll list).
    InOut(&'a mut [u8]),
    /// A buffer of ours the caller filled (`TxBuf`).
    Owned {
        index: u32,
        len: u32,
    },
}

impl Session {
    /// Connects to netd at `path`. An error says what went wrong and what
    /// to do (start netd, point `NAGARE_NETD` elsewhere, match releases).
    pub fn connect(path: impl AsRef<Path>) -> io::Result<Session> {
        let socket = path.as_ref().to_path_buf();
        let client = Client::connect(&socket).map_err(|e| errors::connect_error(&socket, e))?;
        let unusable = |e: nagare_ipc::RegionError| errors::unusable_region(&socket, e);
        let requests = client.region.producer(0).map_err(unusable)?;
        let completions = client.region.consumer(1).map_err(unusable)?;
        let direct = client.region.consumer(2).map_err(unusable)?;
        let pool = client.region.pool().map_err(unusable)?;
        let notifier = Notifier::new(client.server_wakeup.try_clone()?);
        let waiter = Waiter::new(client.client_wakeup.try_clone()?, spin_from_env());
        let wake = nagare_ipc::EventFd::from_owned(client.client_wakeup.try_clone()?);
        let conn = Conn {
            client,
            requests,
            completions,
            direct,
            pool,
            notifier,
            waiter,
            next_id: 1,
            dead: false,
            in_flight: HashMap::new(),
            arrived: HashMap::new(),
            queued_total: 0,
            socket,
            paths: HashMap::new(),
            listeners: HashMap::new(),
            posted_total: 0,
            alive_at: Instant::now(),
            sleeper: false,
            sleeper_thread: 0,
            watcher_sleeps: false,
            outside_waits: 0,
            watcher_waits: false,
            abandoned: false,
            armed: Vec::new(),
            collected: 0,
            ready_fds: HashMap::new(),
            answer_fds: HashMap::new(),
            starved: RefCell::new(HashSet::new()),
            unposted: std::collections::BTreeMap::new(),
            repost_from: 0,
            watches: Vec::new(),
            watch_wanted: std::cell::Cell::new(false),
            start_watcher: false,
        };
        let liveness = std::os::fd::AsRawFd::as_raw_fd(&conn.client.liveness_fd());
        let liveness_file = fork::file_of(liveness);
        let shared = Shared {
            conn: Mutex::new(conn),
            woken: Condvar::new(),
            wake,
            watcher: Mutex::new(None),
            liveness,
            liveness_file,
        };
        Ok(Session { inner: Arc::new(shared) })
    }

    /// The process-wide connection to the netd named by `NAGARE_NETD`
    /// (default `/tmp/nagare-netd.sock`), made on first use and made again
    /// after netd went away.
    pub fn connect_default() -> io::Result<Session> {
        static DEFAULT: OnceLock<Mutex<Option<Session>>> = OnceLock::new();
        let mut slot = DEFAULT.get_or_init(|| Mutex::new(None)).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = slot.as_ref() {
            if !n.is_dead() {
                return Ok(n.clone());
            }
        }
        let path =
            std::env::var_os(NETD_ENV).map_or_else(|| PathBuf::from(nagare_request::DEFAULT_SOCKET), PathBuf::from);
        let n = Session::connect(path)?;
        *slot = Some(n.clone());
        Ok(n)
    }

    /// Whether [`Session::abandon`] left it to another process.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.lock().map_or(true, |c| c.abandoned)
    }

    fn is_dead(&self) -> bool {
        self.lock().map_or(true, |c| c.dead)
    }

    /// Whether netd let this session go, or went away: a call found it,
    /// or its rendezvous socket hung up (asked without a request).
    pub fn netd_gone(&self) -> bool {
        self.lock().map_or(true, |c| c.dead || c.client.peer_gone())
    }

    /// A request that does nothing: one round trip through the rings (what
    /// `nagare stat` times as the IPC latency).
    pub fn nop(&self) -> io::Result<()> {
        self.call(Request::new(Op::Nop, 0), Data::None).map(|_| ())
    }

    /// netd's report (clients, sockets, buffers per region, counters), as
    /// `nagare stat` shows it.
    pub fn stat(&self) -> io::Result<String> {
        let mut text = vec![0u8; self.max_chunk()];
        let (_, n) = self.call(Request::new(Op::Stat, 0), Data::Recv(&mut text))?;
        text.truncate(n);
        String::from_utf8(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// How long a call polls for its completion before it sleeps
    /// (default 20 µs, 0 on one CPU, or `NAGARE_SPIN_US`).
    pub fn set_spin(&self, spin: Duration) {
        if let Ok(mut c) = self.lock() {
            c.waiter.set_spin(spin);
        }
    }

    /// Whether a call that spins for its completion gives the CPU up
    /// between looks (`sched_yield`, the default) or only spins: for a
    /// process whose system calls may be filtered (a library standing in
    /// for libc cannot know whether its program will install a seccomp
    /// filter, as `sshd`'s children do, under which `sched_yield` kills).
    pub fn set_spin_yields(&self, yields: bool) {
        if let Ok(mut c) = self.lock() {
            c.waiter.set_yields(yields);
        }
    }

    /// The kernel descriptors this session keeps open in this process:
    /// its rendezvous socket, its region, the eventfds and their copies,
    /// its watcher's, and the descriptors its sockets lend. A library that
    /// stands in for libc spares them when the program closes a range of
    /// numbers (`closefrom`, `close_range`).
    pub fn descriptors(&self) -> Vec<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let mut fds = vec![self.inner.wake.as_raw_fd()];
        if let Ok(c) = self.inner.conn.lock() {
            fds.extend([
                c.client.liveness_fd().as_raw_fd(),
                c.client.region.fd().as_raw_fd(),
                c.client.client_wakeup.as_raw_fd(),
                c.client.server_wakeup.as_raw_fd(),
                c.notifier.fd().as_raw_fd(),
                c.waiter.fd().as_raw_fd(),
            ]);
            for r in c.ready_fds.values().chain(c.answer_fds.values()) {
                fds.extend(r.descriptors());
            }
        }
        if let Ok(w) = self.inner.watcher.lock() {
            if let Some(w) = w.as_ref() {
                fds.extend(w.descriptors());
            }
        }
        fds
    }

    /// For an event loop that sleeps in its own `poll` (or `epoll`) beside
    /// other descriptors, after it found nothing ready: asks netd to
    /// signal the session's eventfd on its next completion. `Some(fd)`:
    /// sleep until `fd` (valid while the session lives) or one of the
    /// loop's own descriptors is readable, then call
    /// [`Session::finish_wait`]; `None`: completions are waiting (they may
    /// make a socket ready), so look at readiness again without sleeping.
    /// Either way readiness is then read with [`crate::poll::poll`] and a
    /// zero limit. netd's death does not signal the fd: sleep in slices
    /// (say [`LIVENESS_SLICE`]).
    pub fn prepare_wait(&self) -> io::Result<Option<std::os::fd::RawFd>> {
        self.prepare_wait_inner(None)
    }

    /// [`Session::prepare_wait`] for a loop that took [`Session::collected`]
    /// right after its look at readiness: `None` also when completions
    /// were taken off the rings since (by a call of this thread on the way
    /// to its sleep, such as [`crate::poll::wake_when_ready`], or by
    /// another thread's), for they may have made a socket ready after the
    /// look, and are no longer on the rings to be found.
    pub fn prepare_wait_after(&self, collected: u64) -> io::Result<Option<std::os::fd::RawFd>> {
        self.prepare_wait_inner(Some(collected))
    }

    /// How many completions this process has taken off the session's rings
    /// so far (see [`Session::prepare_wait_after`]).
    pub fn collected(&self) -> io::Result<u64> {
        Ok(self.lock()?.collected)
    }

    fn prepare_wait_inner(&self, seen: Option<u64>) -> io::Result<Option<std::os::fd::RawFd>> {
        use std::os::fd::AsRawFd;
        let mut c = self.lock()?;
        c.check_alive()?;
        if seen.is_some_and(|n| n != c.collected) {
            return Ok(None);
        }
        // Completions are left on the rings: taking one here could make a
        // socket ready that the caller already looked at.
        if c.watcher_sleeps {
            // The watcher asked for signals and sleeps on the eventfd:
            // the rings stay as it left them (marked awake, they would
            // need it woken, and the wake-up would wake this loop too).
            // What is on them signalled the eventfd when it came.
            let Conn { completions, direct, .. } = &mut *c;
            let waiting = completions.available().map_err(io::Error::other)? > 0
                || direct.available().map_err(io::Error::other)? > 0;
            if !waiting {
                c.outside_waits += 1;
            }
            return Ok((!waiting).then(|| c.waiter.fd().as_raw_fd()));
        }
        let Conn { waiter, completions, direct, .. } = &mut *c;
        let arrived = waiter.prepare_sleep_any(&mut [completions, direct]).map_err(io::Error::other)?;
        if !arrived {
            c.outside_waits += 1;
        }
        Ok((!arrived).then(|| c.waiter.fd().as_raw_fd()))
    }

    /// After [`Session::prepare_wait`] gave a descriptor and the loop slept
    /// (or did not): resets the eventfd and stops netd's signals. Called
    /// once for each descriptor `prepare_wait` gave.
    pub fn finish_wait(&self) -> io::Result<()> {
        let mut c = self.lock()?;
        c.outside_waits = c.outside_waits.saturating_sub(1);
        if c.watcher_waits {
            // It waits for this reset (`watcher.rs`).
            self.inner.woken.notify_all();
        }
        if c.watcher_sleeps {
            // The rings stay asking for signals, for the watcher: what
            // arrived is taken here instead (its descriptors set, its
            // waiters told), and the eventfd reset, so that neither the
            // watcher nor this loop wakes for it again. A completion that
            // comes after the last one taken signals the eventfd.
            self.inner.wake.drain()?;
            c.collect()?;
            self.inner.woken.notify_all();
            return Ok(());
        }
        let Conn { waiter, completions, direct, .. } = &mut *c;
        waiter.woke_any(&[completions, direct])?;
        c.rouse_sleeper();
        Ok(())
    }

    /// Socket `id`'s descriptor (`readyfd.rs`): the one it has, or one
    /// made here, set to the socket's readiness, with the session's
    /// watcher started if it is not running in this process.
    pub(crate) fn ready_fd(&self, id: u32) -> io::Result<Arc<readyfd::ReadyFd>> {
        self.lock()?.lends_readiness(id)?;
        watcher::ensure(&self.inner)?;
        let mut c = self.lock()?;
        if let Some(fd) = c.ready_fds.get(&id) {
            return Ok(Arc::clone(fd));
        }
        let fd = Arc::new(readyfd::ReadyFd::new()?);
        c.ready_fds.insert(id, Arc::clone(&fd));
        c.publish(id);
        c.watch_unposted();
        Ok(fd)
    }

    /// A descriptor for a socket not made yet ([`Session::lend_ready_fd`]
    /// gives it to one), with the session's watcher started if it is not
    /// running in this process: what can fail about a socket's
    /// descriptor, done before the socket is taken.
    pub(crate) fn spare_ready_fd(&self) -> io::Result<Arc<readyfd::ReadyFd>> {
        watcher::ensure(&self.inner)?;
        Ok(Arc::new(readyfd::ReadyFd::new()?))
    }

    /// Gives socket `id` the descriptor `fd` ([`Session::spare_ready_fd`]),
    /// set to its readiness.
    pub(crate) fn lend_ready_fd(&self, id: u32, fd: &Arc<readyfd::ReadyFd>) -> io::Result<()> {
        let mut c = self.lock()?;
        c.ready_fds.insert(id, Arc::clone(fd));
        c.publish(id);
        c.watch_unposted();
        Ok(())
    }

    /// The descriptor of the connect whose request is `id` (`Connecting`):
    /// the one it has, or one made here, set to whether netd answered.
    pub(crate) fn answer_fd(&self, id: u64) -> io::Result<Arc<readyfd::ReadyFd>> {
        watcher::ensure(&self.inner)?;
        let mut c = self.lock()?;
        if let Some(fd) = c.answer_fds.get(&id) {
            return Ok(Arc::clone(fd));
        }
        let fd = Arc::new(readyfd::ReadyFd::new()?);
        c.answer_fds.insert(id, Arc::clone(&fd));
        c.publish_answer(id);
        Ok(fd)
    }

    /// The largest payload one call moves (one region buffer).
    pub fn max_chunk(&self) -> usize {
        self.lock().map_or(0, |c| c.pool.buffer_size() as usize)
    }

    /// Sends one request and waits for its completion. With a buffer, the
    /// data is written into one of our region buffers (`Send`), or the
    /// completion's bytes are read out of it (`Recv`, `InOut`), or a buffer
    /// the caller filled is sent (`Owned`). Returns the completion and, for
    /// a receive, the bytes received.
    pub(crate) fn call(&self, mut req: Request, mut data: Data<'_>) -> io::Result<(Completion, usize)> {
        let (buffer, posted) = {
            let (buffer, mut c) = self.fill_waiting(&mut req, &data)?;
            let posted = c.submit(&mut req, buffer)?;
            c.in_flight.insert(req.id, InFlight { buffer, abandoned: false, role: Role::Call });
            (buffer, posted)
        };
        let id = req.id;
        let ((comp, back), mut c) = self.until_locked(false, None, OnSignal::Restart, |c| {
            Ok(c.complete(id, buffer)?.inspect(|_| {
                c.in_flight.remove(&id);
            }))
        })?;
        let mut got = 0;
        if let Some(b) = back {
            let mut read = Ok(());
            if let Data::Recv(out) | Data::InOut(out) = &mut data {
                let n = (b.len as usize).min(out.len());
                read = c.pool.read(b.index, b.offset, &mut out[..n]);
                got = n;
            }
            let _ = c.pool.release(b.index);
            read.map_err(io::Error::other)?;
        }
        let comp = comp.map(|mut x| {
            if posted != 0 {
                x.aux[3] = posted;
            }
            x
        });
        finish(comp, got)
    }

    /// Posts a request with a buffer the caller filled and returns at once:
    /// the ticket's [`Ticket::wait`] takes the completion (asynchronous
    /// requests; several may be in flight).
    pub(crate) fn submit_owned(&self, req: Request, index: u32, len: u32) -> io::Result<Ticket> {
        self.submit_async(req, Data::Owned { index, len })
    }

    /// Posts a request with `data` (a filled buffer, or room to receive
    /// into) and returns at once with its ticket.
    pub(crate) fn submit_async(&self, mut req: Request, data: Data<'_>) -> io::Result<Ticket> {
        let (buffer, mut c) = self.fill_waiting(&mut req, &data)?;
        c.submit(&mut req, buffer)?;
        c.in_flight.insert(req.id, InFlight { buffer, abandoned: false, role: Role::Call });
        Ok(Ticket { netd: self.clone(), id: req.id, done: false })
    }

    /// Puts the request's data into a region buffer ([`Conn::fill`]) and
    /// returns the buffer with the session taken. When every buffer is in
    /// use and some hold sends queued on socket paths, waits for them to
    /// come back (as a socket's send waits for room in its buffer) without
    /// holding the session, so that other threads' calls go on meanwhile:
    /// within the request's time limit (`EAGAIN` past it, and at once for a
    /// non-blocking request).
    pub(crate) fn fill_waiting(
        &self,
        req: &mut Request,
        data: &Data<'_>,
    ) -> io::Result<(Option<u32>, MutexGuard<'_, Conn>)> {
        let limit = req.wait_limit();
        let may_wait = !req.nonblocking();
        self.until_locked(false, limit, OnSignal::Restart, |c| match c.fill(req, data) {
            Ok(b) => Ok(Some(b)),
            Err(e) if may_wait && e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        })
    }

    /// Runs `attempt` on the session until it gives a result: at once when
    /// `nonblocking` (`EAGAIN` if it gives none), else after each
    /// completion that arrives, failing with `EAGAIN` once `limit` has
    /// passed. The session is let go while the thread waits, so other
    /// threads' calls go on meanwhile.
    pub(crate) fn until<T>(
        &self,
        nonblocking: bool,
        limit: Option<Duration>,
        attempt: impl FnMut(&mut Conn) -> io::Result<Option<T>>,
    ) -> io::Result<T> {
        self.until_locked(nonblocking, limit, OnSignal::Restart, attempt).map(|(x, _)| x)
    }

    /// [`Session::until`] that a signal handler running while this thread
    /// sleeps ends with `ErrorKind::Interrupted`, as it ends `poll(2)`;
    /// `mask`, if given, is the thread's signal mask while it sleeps.
    pub(crate) fn until_or_signal<T>(
        &self,
        limit: Option<Duration>,
        mask: Option<&libc::sigset_t>,
        attempt: impl FnMut(&mut Conn) -> io::Result<Option<T>>,
    ) -> io::Result<T> {
        self.until_locked(false, limit, OnSignal::Interrupt(mask), attempt).map(|(x, _)| x)
    }

    /// [`Session::until`], returning the session still taken with the
    /// result.
    fn until_locked<T>(
        &self,
        nonblocking: bool,
        limit: Option<Duration>,
        signals: OnSignal<'_>,
        mut attempt: impl FnMut(&mut Conn) -> io::Result<Option<T>>,
    ) -> io::Result<(T, MutexGuard<'_, Conn>)> {
        let deadline = limit.map(|l| Instant::now() + l);
        let mut held = None;
        let mut nap = HANDLER_NAP;
        let mut c = self.lock()?;
        loop {
            c.check_alive()?;
            c.collect()?;
            if let Some(x) = attempt(&mut c)? {
                return Ok((x, c));
            }
            if nonblocking || deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            let signals = match signals {
                OnSignal::Interrupt(mask) => match &held {
                    // A handler that runs from here on must end the sleep:
                    // signals wait, and the attempt is made once more.
                    None => {
                        held = Some(signals::hold(mask)?);
                        continue;
                    }
                    // One ran in a wait that went on (`signals::nap`).
                    Some(_) if signals::take_handled() => return Err(io::ErrorKind::Interrupted.into()),
                    Some(h) => OnSignal::Interrupt(Some(h.mask())),
                },
                OnSignal::Restart => OnSignal::Restart,
            };
            c = self.wait_turn(c, deadline, signals, &mut nap)?;
        }
    }

    /// Waits, without holding the session, until netd may have posted a
    /// completion, `deadline` passes, or a liveness slice ends; returns
    /// the session taken again, with what arrived not yet taken. The first
    /// waiter polls the rings for the spin time and then sleeps on the
    /// eventfd; a thread that finds another already asleep waits to be
    /// woken by it. `signals` says what a signal handler that runs while
    /// this thread sleeps does to the wait; `nap` is the next nap of a
    /// handler's call that cannot sleep (below).
    fn wait_turn<'a>(
        &'a self,
        mut c: MutexGuard<'a, Conn>,
        deadline: Option<Instant>,
        signals: OnSignal<'_>,
        nap: &mut Duration,
    ) -> io::Result<MutexGuard<'a, Conn>> {
        let slice =
            deadline.map_or(LIVENESS_SLICE, |d| d.saturating_duration_since(Instant::now()).min(LIVENESS_SLICE));
        if c.sleeper && c.sleeper_thread == this_thread() {
            // The sleeper is this thread, in a signal handler that called
            // in (a fork's handlers share the sockets): it cannot wake
            // itself, so this wait polls the rings in short naps. They
            // leave the signal mask as the handler has it: a nap with the
            // call's mask would let another handler in, which would meet
            // this call's locks.
            drop(c);
            std::thread::sleep((*nap).min(slice));
            *nap = next_nap(*nap);
            return self.lock();
        }
        if c.sleeper {
            if let OnSignal::Interrupt(mask) = signals {
                // A wait a signal must end cannot sleep on the condvar (a
                // handler does not wake it): it watches the eventfd too,
                // which the sleeper drains once it has woken.
                drop(c);
                let r = self.inner.wake.wait_readable_or_signal(Some(slice), mask);
                let c = self.lock()?;
                r?;
                return Ok(c);
            }
            let (c, _) = self.inner.woken.wait_timeout(c, slice).map_err(|_| poisoned())?;
            return Ok(c);
        }
        if c.spin_for_completion()? {
            return Ok(c);
        }
        let Conn { waiter, completions, direct, .. } = &mut *c;
        if waiter.prepare_sleep_any(&mut [completions, direct]).map_err(io::Error::other)? {
            return Ok(c);
        }
        c.sleeper = true;
        c.sleeper_thread = this_thread();
        drop(c);
        let slept = match (signals, signals::held_mask()) {
            (OnSignal::Restart, None) => self.inner.wake.wait_readable(Some(slice)),
            // Inside a call that holds signals: a handler runs, and that
            // call learns of it (`signals::take_handled`).
            (OnSignal::Restart, Some(mask)) => {
                match self.inner.wake.wait_readable_or_signal(Some(slice), Some(&mask)) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                        signals::note_handled();
                        Ok(false)
                    }
                    r => r,
                }
            }
            (OnSignal::Interrupt(mask), _) => self.inner.wake.wait_readable_or_signal(Some(slice), mask),
        };
        let mut c = self.lock()?;
        c.sleeper = false;
        self.inner.woken.notify_all();
        let Conn { waiter, completions, direct, .. } = &mut *c;
        waiter.woke_any(&[completions, direct])?;
        slept?;
        Ok(c)
    }

    pub(crate) fn lock(&self) -> io::Result<MutexGuard<'_, Conn>> {
        let mut c = self.inner.conn.lock().map_err(|_| poisoned())?;
        if c.start_watcher && !c.dead && !c.abandoned {
            c.start_watcher = false;
            drop(c);
            // Failing, the next call tries again.
            if watcher::ensure(&self.inner).is_err() {
                self.inner.conn.lock().map_err(|_| poisoned())?.start_watcher = true;
            }
            c = self.inner.conn.lock().map_err(|_| poisoned())?;
        }
        Ok(c)
    }
}

/// An asynchronous request in flight (see `UdpSocket::send_buf_to_async`).
/// Dropping it without waiting lets the request complete unobserved; its
/// buffer still comes back to the pool.
pub struct Ticket {
    netd: Session,
    id: u64,
    done: bool,
}

impl Ticket {
    /// Waits for the completion; the request's result (bytes sent).
    pub fn wait(mut self) -> io::Result<u64> {
        self.take(true).map(|r| r.unwrap_or(0))
    }

    /// The result if the completion has arrived, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<u64>> {
        self.take(false)
    }

    fn take(&mut self, wait: bool) -> io::Result<Option<u64>> {
        Ok(self.take_keep(wait, false)?.map(|(c, _)| c.aux[0]))
    }

    /// The completion and, when `keep` and the request succeeded, its
    /// buffer (else the buffer goes back to the pool).
    pub(crate) fn take_keep(&mut self, wait: bool, keep: bool) -> io::Result<Option<(Completion, Option<BufRef>)>> {
        if self.done {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ticket already completed"));
        }
        let id = self.id;
        let netd = self.netd.clone();
        let mut c = netd.lock()?;
        let buffer = c.in_flight.get(&id).and_then(|f| f.buffer);
        let taken = match c.complete(id, buffer)? {
            Some(t) => Some(t),
            None if wait => {
                drop(c);
                let (t, again) = netd.until_locked(false, None, OnSignal::Restart, |c| c.complete(id, buffer))?;
                c = again;
                Some(t)
            }
            None => None,
        };
        let Some((comp, back)) = taken else {
            return Ok(None);
        };
        c.in_flight.remove(&self.id);
        self.done = true;
        let ok = comp.as_ref().is_ok_and(|x| x.result().is_ok());
        let kept = match back {
            Some(b) if keep && ok => Some(b),
            Some(b) => {
                let _ = c.pool.release(b.index);
                None
            }
            None => None,
        };
        drop(c);
        let (comp, _) = finish(comp, 0)?;
        Ok(Some((comp, kept)))
    }
}

impl Ticket {
    /// The request's id, the ticket given up: its completion is left for
    /// whoever takes it by id (`Conn::take_arrived`).
    pub(crate) fn into_id(self) -> u64 {
        let id = self.id;
        std::mem::forget(self);
        id
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            if let Ok(mut c) = self.netd.lock() {
                if let Some(f) = c.in_flight.get_mut(&self.id) {
                    f.abandoned = true;
                }
            }
        }
    }
}

/// An asynchronous request's buffer, until its completion is taken.
pub(crate) struct InFlight {
    buffer: Option<u32>,
    /// Its ticket was dropped: the completion only returns the buffer.
    abandoned: bool,
    /// Whose completion it is: a caller's, or a socket path's.
    role: Role,
}

type Taken = (Result<Completion, nagare_request::ProtoError>, Option<BufRef>);

/// What a signal handler that runs while a call sleeps does to the call.
#[derive(Clone, Copy)]
pub(crate) enum OnSignal<'a> {
    /// The call goes on (as a read restarts under `SA_RESTART`).
    Restart,
    /// The call ends with `ErrorKind::Interrupted` (as `poll(2)` does);
    /// with a mask, the thread's signal mask while it sleeps (`ppoll(2)`'s).
    Interrupt(Option<&'a libc::sigset_t>),
}

fn poisoned() -> io::Error {
    io::Error::other("netd connection poisoned")
}

impl Conn {
    fn gone(&self) -> io::Error {
        errors::netd_gone(&self.socket)
    }

    /// Polls the rings for the waiter's spin time: whether a completion
    /// arrived meanwhile.
    fn spin_for_completion(&mut self) -> io::Result<bool> {
        let Conn { waiter, completions, direct, .. } = self;
        let spin = waiter.spin();
        Ok(waiter.spin_any(&mut [completions, direct], spin).map_err(io::Error::other)?.is_some())
    }

    /// A wait made holding the session marks the rings awake, so netd
    /// stops signalling the eventfd that another thread may be asleep on
    /// (the sleeper): that thread is woken to look again.
    fn rouse_sleeper(&self) {
        if self.sleeper {
            let _ = self.waiter.nudge();
        }
    }

    /// Fails once netd is gone: known already, or seen on the rendezvous
    /// socket, which is looked at once per liveness slice (calls that only
    /// queue or take what arrived never wait for netd, so this is where
    /// they learn of its death).
    fn check_alive(&mut self) -> io::Result<()> {
        if !self.dead && self.alive_at.elapsed() >= LIVENESS_SLICE {
            self.dead = self.client.peer_gone();
            self.alive_at = Instant::now();
        }
        if self.dead {
            return Err(self.gone());
        }
        Ok(())
    }

    /// Puts the request's data into a region buffer (or takes the one the
    /// caller filled), without waiting for one ([`Conn::alloc`]); the
    /// buffer, if any.
    fn fill(&mut self, req: &mut Request, data: &Data<'_>) -> io::Result<Option<u32>> {
        if self.dead {
            return Err(self.gone());
        }
        let size = self.pool.buffer_size() as usize;
        let (b, len) = match data {
            Data::None => return Ok(None),
            Data::Send(_) | Data::InOut(_) => {
                let bytes: &[u8] = match data {
                    Data::Send(b) => b,
                    Data::InOut(b) => b,
                    _ => &[],
                };
                if matches!(data, Data::InOut(_)) && bytes.len() > size {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, "more than one region buffer"));
                }
                let b = self.alloc()?;
                let n = bytes.len().min(size);
                if let Err(e) = self.pool.write(b, 0, &bytes[..n]) {
                    let _ = self.pool.release(b);
                    return Err(io::Error::other(e));
                }
                (b, n)
            }
            Data::Recv(out) => (self.alloc()?, out.len().min(size)),
            Data::Owned { index, len } => (*index, (*len as usize).min(size)),
        };
        req.piece = Some(Piece { buffer: b, offset: 0, len: len as u32 });
        Ok(Some(b))
    }

    /// Gives the buffer to netd and posts the request; the post time of a
    /// traced one (else 0).
    fn submit(&mut self, req: &mut Request, buffer: Option<u32>) -> io::Result<u64> {
        req.id = self.next_id;
        self.next_id += 1;
        if let Some(b) = buffer {
            if let Err(e) = self.pool.give(b) {
                let _ = self.pool.release(b);
                return Err(io::Error::other(e));
            }
        }
        // A traced request's post time; its completion carries it back in
        // `aux[3]` for the caller.
        let mut posted = 0;
        if req.flags & nagare_request::TRACE != 0 {
            posted = nagare_ipc::monotonic_ns();
            req.aux[nagare_request::TRACE_TIME] = posted;
        }
        let desc = req.encode();
        loop {
            match self.notifier.push_batch(&mut self.requests, &[desc]) {
                Ok(1) => return Ok(posted),
                Ok(_) => {
                    // Full: only while earlier asynchronous requests are
                    // in flight; wait for netd to take some. Their
                    // completions are taken meanwhile, so that netd, which
                    // takes requests only while it has room to complete
                    // them, is not kept waiting on us.
                    if self.client.peer_gone() {
                        self.mark_dead();
                        return Err(self.gone());
                    }
                    while let Some(d) = self.pop(None)? {
                        self.set_aside(d);
                    }
                    signals::nap(Duration::from_micros(50));
                }
                Err(_) => {
                    self.mark_dead();
                    return Err(self.gone());
                }
            }
        }
    }

    /// A free buffer of the pool, without waiting: `EAGAIN` when every
    /// buffer is in use and some hold sends queued on socket paths, which
    /// come back with their completions ([`Session::fill_waiting`] waits
    /// for them), `ENOBUFS` when none is on its way back.
    fn alloc(&mut self) -> io::Result<u32> {
        if let Some(b) = self.pool.alloc() {
            return Ok(b);
        }
        let e = if self.queued_total > 0 { libc::EAGAIN } else { libc::ENOBUFS };
        Err(io::Error::from_raw_os_error(e))
    }

    /// The next completion from either ring. With `wait`, waits for one up
    /// to that long, at most a liveness slice (`None`: none came, netd is
    /// alive).
    fn pop(&mut self, wait: Option<Duration>) -> io::Result<Option<Descriptor>> {
        let mut waited = false;
        loop {
            match self.completions.pop().and_then(|d| match d {
                Some(d) => Ok(Some(d)),
                None => self.direct.pop(),
            }) {
                Ok(Some(d)) => {
                    self.collected = self.collected.wrapping_add(1);
                    return Ok(Some(d));
                }
                Ok(None) if wait.is_none() || waited => return Ok(None),
                Ok(None) => {}
                Err(_) => {
                    self.mark_dead();
                    return Err(self.gone());
                }
            }
            let slice = wait.unwrap_or(LIVENESS_SLICE).min(LIVENESS_SLICE);
            match self.waiter.wait_any(&mut [&mut self.completions, &mut self.direct], Some(slice)) {
                Ok(nagare_ipc::WaitOutcome::Ready(_)) => {}
                Ok(nagare_ipc::WaitOutcome::TimedOut) if !self.client.peer_gone() => {}
                _ => {
                    self.mark_dead();
                    return Err(self.gone());
                }
            }
            waited = true;
        }
    }

    /// The completion of request `id` (whose buffer was `buffer`): already
    /// taken and set aside, or found on either ring without waiting; others
    /// met on the way are set aside. `None` when it has not arrived.
    fn complete(&mut self, id: u64, buffer: Option<u32>) -> io::Result<Option<Taken>> {
        if let Some(t) = self.arrived.remove(&id) {
            return Ok(Some(t));
        }
        loop {
            let Some(d) = self.pop(None)? else {
                return Ok(None);
            };
            if d.id == id {
                // The buffer comes back with the completion: the request's
                // own, or, for a receive netd completed in place, the one
                // the data lies in (netd keeps the request's in its place).
                // The pool takes only a buffer netd holds.
                let back =
                    if buffer.is_some() && d.buffer != NO_BUFFER { self.pool.take(&d).ok().flatten() } else { None };
                return Ok(Some((Completion::decode(&d), back)));
            }
            self.set_aside(d);
        }
    }

    /// The completion of request `id` if it has arrived (its in-flight
    /// record goes with it), without waiting.
    pub(crate) fn take_arrived(
        &mut self,
        id: u64,
    ) -> io::Result<Option<Result<Completion, nagare_request::ProtoError>>> {
        self.collect()?;
        let Some((comp, back)) = self.arrived.remove(&id) else { return Ok(None) };
        self.in_flight.remove(&id);
        if let Some(b) = back {
            let _ = self.pool.release(b.index);
        }
        Ok(Some(comp))
    }

    /// Gives up request `id`, a connect: a connection it made (or makes)
    /// is closed.
    pub(crate) fn abandon_connect(&mut self, id: u64) {
        let _ = self.collect();
        match self.take_arrived(id) {
            Ok(Some(Ok(c))) if c.result().is_ok() => self.close_unclaimed(c.aux[0] as u32),
            Ok(Some(_)) => {}
            _ => {
                if let Some(f) = self.in_flight.get_mut(&id) {
                    f.role = Role::AbandonedConnect;
                }
            }
        }
    }

    /// A completion of a request nobody is waiting for right now: kept for
    /// its ticket, or, when nobody will take it, its buffer goes back to
    /// the pool; dropped when it is a second completion of a request
    /// already completed.
    fn set_aside(&mut self, d: Descriptor) {
        // A second completion of an earlier request (netd posts what a
        // driver that died may already have posted): its buffer is no
        // longer that request's to take.
        let Some(f) = self.in_flight.get(&d.id) else { return };
        let back = if f.buffer.is_some() && d.buffer != NO_BUFFER { self.pool.take(&d).ok().flatten() } else { None };
        if f.role != Role::Call {
            let role = f.role;
            self.in_flight.remove(&d.id);
            self.deliver(d.id, role, Completion::decode(&d), back);
            return;
        }
        if f.abandoned {
            self.in_flight.remove(&d.id);
            if let Some(b) = back {
                let _ = self.pool.release(b.index);
            }
            return;
        }
        match self.arrived.entry(d.id) {
            // A second copy (netd's, after a driver died): the buffer comes
            // back with one of the two, kept with the first.
            hashbrown::hash_map::Entry::Occupied(mut o) => {
                if o.get().1.is_none() {
                    o.get_mut().1 = back;
                }
            }
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert((Completion::decode(&d), back));
                self.publish_answer(d.id);
            }
        }
    }
}

fn finish(comp: Result<Completion, nagare_request::ProtoError>, got: usize) -> io::Result<(Completion, usize)> {
    let comp = comp.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match comp.result() {
        Ok(_) => Ok((comp, got)),
        Err(errno) => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Puts a time limit on a request that may wait (`None`: none).
pub(crate) fn set_wait_limit(r: &mut Request, limit: Option<Duration>) {
    if let Some(limit) = limit {
        // 0 would mean "no limit": the shortest limit is 1 µs.
        let micros = limit.as_micros().min(u128::from(nagare_request::MAX_WAIT_MICROS)) as u64;
        r.aux[nagare_request::WAIT_LIMIT] = micros.max(1);
    }
}

/// A request of `op` on `socket`.
pub(crate) fn request(op: Op, socket: u32) -> Request {
    let mut r = Request::new(op, 0);
    r.socket = socket;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handlers_naps_double_up_to_a_millisecond() {
        let naps: Vec<u128> =
            std::iter::successors(Some(HANDLER_NAP), |&n| Some(next_nap(n))).take(7).map(|n| n.as_micros()).collect();
        assert_eq!(naps, [50, 100, 200, 400, 800, 1000, 1000]);
    }
}
