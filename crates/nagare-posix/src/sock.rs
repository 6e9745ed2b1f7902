//! One socket as a program sees it: TCP or UDP, over IPv4 or IPv6, and
//! how far it has come.
//! A TCP socket is *fresh* until `listen` or `connect` makes it a listener
//! or a stream in netd (a non-blocking `connect` makes it *connecting*
//! until netd answers, then a stream or *failed*); a UDP socket until
//! `bind`, `connect` or its first `sendto` binds it. The client library's objects sit behind `Arc`s, so
//! that a call that waits (a `read`, an `accept`) holds no lock.

use crate::errors::errno;
use crate::session::session;
use crate::Res;
use nagare::net::{Connecting, TcpListener, TcpStream, UdpSocket};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The protocol a socket was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

/// How far a socket has come.
pub(crate) enum State {
    Fresh,
    Listener(Arc<TcpListener>),
    /// A non-blocking `connect` netd has not answered yet.
    Connecting(Box<Connecting>),
    Stream(Arc<TcpStream>),
    /// The error a non-blocking `connect` met, until `SO_ERROR` or a call
    /// reports it (the socket is then fresh again, as Linux's is).
    Failed(i32),
    Datagram(Arc<UdpSocket>),
}

/// Options a program set, kept for a socket that is not in netd yet (and
/// for those netd has no notion of).
#[derive(Clone)]
pub(crate) struct Options {
    pub(crate) send_buffer: Option<usize>,
    pub(crate) recv_buffer: Option<usize>,
    pub(crate) nodelay: bool,
    pub(crate) reuse_addr: bool,
    pub(crate) reuse_port: bool,
    pub(crate) keepalive: bool,
    /// `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT` (Linux's defaults).
    pub(crate) keepalive_params: [i32; 3],
    pub(crate) linger: Option<libc::linger>,
    pub(crate) tos: i32,
    /// `IPV6_V6ONLY`: an `AF_INET6` listener or UDP socket on `::` takes
    /// IPv6 connections or datagrams only.
    pub(crate) v6_only: bool,
    pub(crate) max_segment: Option<i32>,
    pub(crate) recv_timeout: Option<Duration>,
    pub(crate) send_timeout: Option<Duration>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            send_buffer: None,
            recv_buffer: None,
            nodelay: false,
            reuse_addr: false,
            reuse_port: false,
            keepalive: false,
            keepalive_params: [7200, 75, 9],
            linger: None,
            tos: 0,
            v6_only: false,
            max_segment: None,
            recv_timeout: None,
            send_timeout: None,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) state: State,
    /// The address `bind` asked for (of the socket's family).
    pub(crate) bound: Option<SocketAddr>,
    /// A UDP socket's peer, set by `connect` (of the socket's family).
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) options: Options,
    /// netd's connection has the keepalive `options` says (its idle time
    /// while on, the probes' interval and count): so for a stream this
    /// process made (`connect`, `accept`), whose `setsockopt`s then ask
    /// netd only for a change; not for one taken over from another
    /// process, which may have set them since.
    pub(crate) keepalive_in_netd: bool,
    /// A non-blocking `connect` finished here and no write has tried the
    /// stream since: it counts as writable, the answer its caller polls
    /// for after `EINPROGRESS`, even while every buffer of the session is
    /// held by other sockets' queued sends (a write then says `EAGAIN`,
    /// as Linux's does under memory pressure).
    pub(crate) connect_done: bool,
}

/// A socket under one or more descriptor numbers.
pub(crate) struct Sock {
    pub(crate) proto: Proto,
    /// An `AF_INET6` socket: its addresses are IPv6 ones, an IPv4 peer's
    /// IPv4-mapped. Set when it is made, or when a socket
    /// found after `exec` is adopted with IPv6 addresses.
    pub(crate) six: AtomicBool,
    /// The process whose session holds it (0: none yet, a socket found
    /// after `exec`). Another process (a child after `fork`) adopts it
    /// through its token on first use (`crate::fork`).
    pub(crate) pid: AtomicU32,
    /// Its token in netd once it was shared (0: never).
    pub(crate) token: AtomicU64,
    /// Its placeholder is connected to netd's watch socket.
    pub(crate) watched: AtomicBool,
    pub(crate) nonblocking: AtomicBool,
    /// Data calls made on it (reads, writes, accepts): an `epoll` set's
    /// edge-triggered watch reports readiness again after one.
    pub(crate) calls: AtomicU64,
    inner: Mutex<Inner>,
}

impl Sock {
    pub(crate) fn new(proto: Proto, state: State, nonblocking: bool) -> Sock {
        Sock {
            proto,
            six: AtomicBool::new(false),
            pid: AtomicU32::new(crate::pid::current()),
            token: AtomicU64::new(0),
            watched: AtomicBool::new(false),
            nonblocking: AtomicBool::new(nonblocking),
            calls: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                state,
                bound: None,
                peer: None,
                options: Options::default(),
                keepalive_in_netd: false,
                connect_done: false,
            }),
        }
    }

    /// A socket whose netd state is another process's: held by its token,
    /// or never shared. `token` 0 means no token.
    pub(crate) fn inherited(proto: Proto, token: u64) -> Sock {
        let s = Sock::new(proto, State::Fresh, false);
        s.pid.store(0, Ordering::Relaxed);
        s.token.store(token, Ordering::Relaxed);
        s.watched.store(token != 0, Ordering::Relaxed);
        s
    }

    /// The stream, made here, with `options` applied to it
    /// ([`apply_stream_options`]): netd has them.
    pub(crate) fn with_applied_options(self, options: Options) -> Sock {
        {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            g.options = options;
            g.keepalive_in_netd = true;
        }
        self
    }

    /// The socket made for family `AF_INET6` (`six`) or `AF_INET`.
    pub(crate) fn in_family(self, six: bool) -> Sock {
        self.six.store(six, Ordering::Relaxed);
        self
    }

    /// Whether it is an `AF_INET6` socket.
    pub(crate) fn is_six(&self) -> bool {
        self.six.load(Ordering::Relaxed)
    }

    /// Whether this process's session holds it.
    pub(crate) fn is_here(&self) -> bool {
        self.pid.load(Ordering::Acquire) == crate::pid::current()
    }

    /// The socket's state, for this process: a socket another process
    /// shared is adopted here first (`crate::fork`); one it held without
    /// sharing gives `EBADF`. A shared one is taken back as this
    /// process's alone once every other process known to hold it is gone
    /// (`crate::fork::reclaim_if_alone`).
    /// A connecting socket whose connect netd has answered becomes a
    /// stream or failed here, so every call sees where it stands.
    pub(crate) fn lock(&self) -> Res<MutexGuard<'_, Inner>> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !self.is_here() {
            crate::fork::take_over(self, &mut g)?;
        }
        if self.token.load(Ordering::Relaxed) != 0 {
            // Shared: taken back once the other holders are gone.
            crate::fork::reclaim_if_alone(self, &g);
        }
        if let State::Connecting(c) = &mut g.state {
            match c.try_finish() {
                Ok(None) => {}
                Ok(Some(stream)) => {
                    g.state = match apply_stream_options(&stream, &g.options, self.is_nonblocking()) {
                        Ok(()) => State::Stream(Arc::new(stream)),
                        Err(e) => State::Failed(e),
                    };
                    g.keepalive_in_netd = matches!(g.state, State::Stream(_));
                    g.connect_done = matches!(g.state, State::Stream(_));
                }
                Err(e) => g.state = State::Failed(errno(&e)),
            }
        }
        Ok(g)
    }

    /// The error a failed connect left, taken (the socket is fresh again).
    pub(crate) fn take_failure(g: &mut Inner) -> Option<i32> {
        match g.state {
            State::Failed(e) => {
                g.state = State::Fresh;
                Some(e)
            }
            _ => None,
        }
    }

    /// Counts a data call made on the socket.
    pub(crate) fn touch(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn is_nonblocking(&self) -> bool {
        self.nonblocking.load(Ordering::Relaxed)
    }

    /// Sets non-blocking mode, on the netd socket too if there is one.
    pub(crate) fn set_nonblocking(&self, on: bool) -> Res<()> {
        self.nonblocking.store(on, Ordering::Relaxed);
        let g = self.lock()?;
        let r = match &g.state {
            State::Fresh | State::Connecting(_) | State::Failed(_) => Ok(()),
            State::Listener(l) => l.set_nonblocking(on),
            State::Stream(s) => s.set_nonblocking(on),
            State::Datagram(d) => d.set_nonblocking(on),
        };
        r.map_err(|e| errno(&e))
    }

    /// The connected stream: `EAGAIN` while it connects, the error a
    /// connect met, else `ENOTCONN` if there is none.
    pub(crate) fn stream(&self) -> Res<Arc<TcpStream>> {
        self.stream_taking(false)
    }

    /// [`Sock::stream`] for a write, which answers for its own room from
    /// then on ([`Inner::connect_done`] is taken).
    pub(crate) fn stream_to_write(&self) -> Res<Arc<TcpStream>> {
        self.stream_taking(true)
    }

    fn stream_taking(&self, write: bool) -> Res<Arc<TcpStream>> {
        let mut g = self.lock()?;
        if let Some(e) = Sock::take_failure(&mut g) {
            return Err(e);
        }
        if write {
            g.connect_done = false;
        }
        match &g.state {
            State::Stream(s) => Ok(s.clone()),
            State::Connecting(_) => Err(libc::EAGAIN),
            _ => Err(libc::ENOTCONN),
        }
    }

    /// The UDP socket, bound now to an ephemeral port if it was not yet
    /// (as Linux binds one on the first `sendto`), and its peer.
    pub(crate) fn datagram(&self) -> Res<(Arc<UdpSocket>, Option<SocketAddr>)> {
        let mut g = self.lock()?;
        if let State::Datagram(d) = &g.state {
            return Ok((d.clone(), g.peer));
        }
        let any = if self.is_six() { IpAddr::V6(Ipv6Addr::UNSPECIFIED) } else { IpAddr::V4(Ipv4Addr::UNSPECIFIED) };
        let at = g.bound.unwrap_or(SocketAddr::new(any, 0));
        let d = Arc::new(bind_datagram(at, &g.options, self.is_nonblocking())?);
        g.state = State::Datagram(d.clone());
        Ok((d, g.peer))
    }
}

/// A UDP socket bound in netd at `at` (on `::`, dual stack unless
/// `IPV6_V6ONLY`), with the options set so far.
pub(crate) fn bind_datagram(at: SocketAddr, o: &Options, nonblocking: bool) -> Res<UdpSocket> {
    let d = match at {
        SocketAddr::V6(six) if o.v6_only => UdpSocket::bind_v6_only_via(&session()?, six),
        _ => UdpSocket::bind_via(&session()?, at),
    }
    .map_err(|e| errno(&e))?;
    apply_datagram_options(&d, o, nonblocking)?;
    Ok(d)
}

/// Applies the options set before a UDP socket was in netd (or in this
/// process's session) to it.
pub(crate) fn apply_datagram_options(d: &UdpSocket, o: &Options, nonblocking: bool) -> Res<()> {
    d.set_nonblocking(nonblocking).map_err(|e| errno(&e))?;
    if o.recv_timeout.is_some() {
        d.set_read_timeout(o.recv_timeout).map_err(|e| errno(&e))?;
    }
    if let Some(n) = o.recv_buffer {
        d.set_recv_buffer_size(n).map_err(|e| errno(&e))?;
    }
    Ok(())
}

/// Applies the options set before a stream existed to it, a connection
/// netd just made (`connect`, `accept`): those this process keeps
/// ([`apply_own_stream_options`]) and, in netd, those that differ from
/// what a new connection starts with. netd's connection then has what
/// `o` says ([`Inner::keepalive_in_netd`]).
pub(crate) fn apply_stream_options(s: &TcpStream, o: &Options, nonblocking: bool) -> Res<()> {
    let r = (|| {
        if o.nodelay {
            s.set_nodelay(true)?;
        }
        let [_, interval, count] = o.keepalive_params;
        if [interval, count] != NEW_CONNECTION_PROBES {
            apply_keepalive_probes(s, o)?;
        }
        if o.keepalive {
            apply_keepalive_idle(s, o)?;
        }
        if let Some(l) = &o.linger {
            s.set_linger(crate::options::linger_of(l))?;
        }
        Ok(())
    })();
    r.map_err(|e: std::io::Error| errno(&e))?;
    apply_own_stream_options(s, o, nonblocking)
}

/// Applies the options this process's objects for stream `s` keep (its
/// blocking mode, its time limits, the buffer sizes its paths are kept
/// within, each size asked of netd again for the size in force) to
/// them: all a process needs when it takes over a connection another
/// process set up, whose other options netd has with the connection.
pub(crate) fn apply_own_stream_options(s: &TcpStream, o: &Options, nonblocking: bool) -> Res<()> {
    let r = (|| {
        s.set_nonblocking(nonblocking)?;
        if let Some(n) = o.send_buffer {
            s.set_send_buffer_size(n)?;
        }
        if let Some(n) = o.recv_buffer {
            s.set_recv_buffer_size(n)?;
        }
        if o.recv_timeout.is_some() {
            s.set_read_timeout(o.recv_timeout)?;
        }
        if o.send_timeout.is_some() {
            s.set_write_timeout(o.send_timeout)?;
        }
        Ok(())
    })();
    r.map_err(|e: std::io::Error| errno(&e))
}

/// `TCP_KEEPINTVL` and `TCP_KEEPCNT` a connection netd makes starts
/// with (Linux's defaults, and the engine's).
const NEW_CONNECTION_PROBES: [i32; 2] = [75, 9];

/// Keepalive on or off on a stream as the options say: `TCP_KEEPIDLE`
/// after `SO_KEEPALIVE`, or none.
pub(crate) fn apply_keepalive_idle(s: &TcpStream, o: &Options) -> std::io::Result<()> {
    if !o.keepalive {
        return s.set_keepalive(None);
    }
    s.set_keepalive(Some(Duration::from_secs(u64::try_from(o.keepalive_params[0]).unwrap_or(1))))
}

/// The probes' interval and count on a stream as the options say.
pub(crate) fn apply_keepalive_probes(s: &TcpStream, o: &Options) -> std::io::Result<()> {
    let [_, interval, count] = o.keepalive_params.map(|v| u64::try_from(v).unwrap_or(1));
    s.set_keepalive_probes(Duration::from_secs(interval), u32::try_from(count).unwrap_or(u32::MAX))
}
