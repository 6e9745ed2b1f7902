//! nagare's client library: `std::net`-shaped sockets over a running
//! `nagare netd` (issue 4, item 4).
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
//! Every call is synchronous: one request into the region's request ring,
//! then a wait (spin, then sleep on the eventfd) for its completion. The
//! wait is cut into slices of [`LIVENESS_SLICE`]; between slices the
//! rendezvous socket is checked, so when netd dies every call fails within
//! a second (`ErrorKind::ConnectionAborted`).

#![warn(missing_docs)]

pub mod net;
pub mod ping;
pub mod poll;

use nagare_ipc::{Client, Consumer, Notifier, Pool, Producer, Waiter, DEFAULT_SPIN};
use nagare_request::{Completion, Op, Piece, Request};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The environment variable naming netd's socket.
pub const NETD_ENV: &str = "NAGARE_NETD";

/// The environment variable that sets how long a call polls for its
/// completion before it sleeps, in microseconds (default 20).
pub const SPIN_ENV: &str = "NAGARE_SPIN_US";

fn spin_from_env() -> Duration {
    std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(DEFAULT_SPIN, |us| Duration::from_micros(us.min(1_000_000)))
}

/// How long a call waits before it checks that netd is alive.
pub const LIVENESS_SLICE: Duration = Duration::from_millis(100);

/// A connection to a running netd: a region of our own, its rings and
/// buffers. Cheap to clone (shared); calls from several threads are
/// serialized.
#[derive(Clone)]
pub struct Netd {
    inner: Arc<Mutex<Conn>>,
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
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "nagare netd is gone")
}

/// What a request carries in its buffer.
pub(crate) enum Data<'a> {
    None,
    Send(&'a [u8]),
    Recv(&'a mut [u8]),
    /// Sent, and read back from the completion (a poll list).
    InOut(&'a mut [u8]),
}

impl Netd {
    /// Connects to netd at `path`.
    pub fn connect(path: impl AsRef<Path>) -> io::Result<Netd> {
        let client = Client::connect(path.as_ref()).map_err(|e| match e {
            nagare_ipc::RendezvousError::Io(e) => e,
            e => io::Error::new(io::ErrorKind::ConnectionRefused, e.to_string()),
        })?;
        let requests = client.region.producer(0).map_err(io::Error::other)?;
        let completions = client.region.consumer(1).map_err(io::Error::other)?;
        let direct = client.region.consumer(2).map_err(io::Error::other)?;
        let pool = client.region.pool().map_err(io::Error::other)?;
        let notifier = Notifier::new(client.server_wakeup.try_clone()?);
        let waiter = Waiter::new(client.client_wakeup.try_clone()?, spin_from_env());
        let conn = Conn { client, requests, completions, direct, pool, notifier, waiter, next_id: 1, dead: false };
        Ok(Netd { inner: Arc::new(Mutex::new(conn)) })
    }

    /// The process-wide connection to the netd named by `NAGARE_NETD`
    /// (default `/tmp/nagare-netd.sock`), made on first use and made again
    /// after netd went away.
    pub fn default_netd() -> io::Result<Netd> {
        static DEFAULT: OnceLock<Mutex<Option<Netd>>> = OnceLock::new();
        let mut slot = DEFAULT.get_or_init(|| Mutex::new(None)).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = slot.as_ref() {
            if !n.is_dead() {
                return Ok(n.clone());
            }
        }
        let path = std::env::var_os(NETD_ENV).map_or_else(|| PathBuf::from(nagare_request::DEFAULT_SOCKET), PathBuf::from);
        let n = Netd::connect(path)?;
        *slot = Some(n.clone());
        Ok(n)
    }

    fn is_dead(&self) -> bool {
        self.inner.lock().map_or(true, |c| c.dead)
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
    /// (default 20 µs, or `NAGARE_SPIN_US`).
    pub fn set_spin(&self, spin: Duration) {
        if let Ok(mut c) = self.inner.lock() {
            c.waiter.set_spin(spin);
        }
    }

    /// The largest payload one call moves (one region buffer).
    pub fn max_chunk(&self) -> usize {
        self.inner.lock().map_or(0, |c| c.pool.buffer_size() as usize)
    }

    /// Sends one request and waits for its completion. With a buffer, the
    /// data is written into one of our region buffers (`Send`) or the
    /// completion's bytes are read out of it (`Recv`). Returns the
    /// completion and, for a receive, the bytes received.
    pub(crate) fn call(&self, mut req: Request, mut data: Data<'_>) -> io::Result<(Completion, usize)> {
        let mut c = self.inner.lock().map_err(|_| io::Error::other("netd connection poisoned"))?;
        if c.dead {
            return Err(gone());
        }
        req.id = c.next_id;
        c.next_id += 1;
        let size = c.pool.buffer_size() as usize;
        let buffer = match &data {
            Data::None => None,
            Data::Send(bytes) => {
                let b = c.pool.alloc().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOBUFS))?;
                let n = bytes.len().min(size);
                if let Err(e) = c.pool.write(b, 0, &bytes[..n]) {
                    let _ = c.pool.release(b);
                    return Err(io::Error::other(e));
                }
                req.piece = Some(Piece { buffer: b, offset: 0, len: n as u32 });
                Some(b)
            }
            Data::Recv(out) => {
                let b = c.pool.alloc().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOBUFS))?;
                req.piece = Some(Piece { buffer: b, offset: 0, len: out.len().min(size) as u32 });
                Some(b)
            }
            Data::InOut(bytes) => {
                if bytes.len() > size {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, "more than one region buffer"));
                }
                let b = c.pool.alloc().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOBUFS))?;
                if let Err(e) = c.pool.write(b, 0, bytes) {
                    let _ = c.pool.release(b);
                    return Err(io::Error::other(e));
                }
                req.piece = Some(Piece { buffer: b, offset: 0, len: bytes.len() as u32 });
                Some(b)
            }
        };
        if let Some(b) = buffer {
            if let Err(e) = c.pool.give(b) {
                let _ = c.pool.release(b);
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
        let conn = &mut *c;
        loop {
            match conn.notifier.push_batch(&mut conn.requests, &[desc]) {
                Ok(1) => break,
                Ok(_) => {
                    // Full (only if completions of earlier calls were left
                    // unread): wait for netd to take some.
                    if conn.client.peer_gone() {
                        conn.dead = true;
                        return Err(gone());
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                Err(_) => {
                    conn.dead = true;
                    return Err(gone());
                }
            }
        }
        loop {
            let ring = match conn.waiter.wait_any(&mut [&mut conn.completions, &mut conn.direct], Some(LIVENESS_SLICE)) {
                Ok(nagare_ipc::WaitOutcome::Ready(i)) => i,
                Ok(nagare_ipc::WaitOutcome::TimedOut) => {
                    if conn.client.peer_gone() {
                        conn.dead = true;
                        return Err(gone());
                    }
                    continue;
                }
                Err(_) => {
                    conn.dead = true;
                    return Err(gone());
                }
            };
            let from = if ring == 0 { &mut conn.completions } else { &mut conn.direct };
            let d = match from.pop() {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(_) => {
                    conn.dead = true;
                    return Err(gone());
                }
            };
            let comp = Completion::decode(&d);
            let mine = matches!(&comp, Ok(comp) if comp.id == req.id);
            if !mine {
                // A second completion of an earlier request (netd posts
                // what a driver that died may already have posted): its
                // buffer, if any, is no longer this request's to take.
                continue;
            }
            // The buffer comes back with the completion.
            let back = if d.buffer == buffer.unwrap_or(nagare_ipc::NO_BUFFER) { conn.pool.take(&d).ok().flatten() } else { None };
            let mut got = 0;
            if let Some(b) = back {
                let mut read = Ok(());
                if let Data::Recv(out) | Data::InOut(out) = &mut data {
                    let n = (b.len as usize).min(out.len());
                    read = conn.pool.read(b.index, b.offset, &mut out[..n]);
                    got = n;
                }
                let _ = conn.pool.release(b.index);
                read.map_err(io::Error::other)?;
            }
            let comp = comp.map(|mut c| {
                if posted != 0 {
                    c.aux[3] = posted;
                }
                c
            });
            return finish(comp, got);
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
