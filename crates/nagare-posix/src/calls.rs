//! The calls that make, name, join and end sockets: `socket`, `bind`,
//! `listen`, `accept4`, `connect`, `shutdown`, `close`, `dup`, `fcntl`,
//! `ioctl`, `getsockname`, `getpeername`. Each is a request to netd or
//! none (see `nagare::net`).

use crate::addr::{family, read_addr, write_addr};
use crate::errors::{errno, say_once};
use crate::session::session;
use crate::sock::{apply_stream_options, bind_datagram, Proto, Sock, State};
use crate::{table, Entered, Res};
use nagare::net::{TcpListener, TcpStream};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr};
use std::sync::Arc;

/// A kernel placeholder for a socket of `proto`, close-on-exec if asked.
fn reserve(proto: Proto, cloexec: bool) -> Res<i32> {
    let ty = match proto {
        Proto::Tcp => libc::SOCK_STREAM,
        Proto::Udp => libc::SOCK_DGRAM,
    };
    let flags = if cloexec { libc::SOCK_CLOEXEC } else { 0 };
    let fd = unsafe { libc::socket(libc::AF_UNIX, ty | flags, 0) };
    if fd < 0 {
        return Err(last_errno());
    }
    Ok(fd)
}

pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// `socket(domain, ty, protocol)`: for `AF_INET` or `AF_INET6`, a TCP or
/// UDP socket. `SOCK_NONBLOCK` and `SOCK_CLOEXEC` are taken;
/// `EPROTONOSUPPORT` for any other kind (raw sockets included: nothing of
/// this process's IP reaches the kernel's stack), `ENETDOWN` when netd
/// cannot be reached.
pub fn socket(domain: i32, ty: i32, protocol: i32) -> Res<i32> {
    let _in = Entered::new();
    let kind = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let proto = match (kind, protocol) {
        (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) => Proto::Tcp,
        (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => Proto::Udp,
        _ => {
            say_once(&format!("IP socket of type {kind} protocol {protocol} refused: TCP and UDP only"));
            return Err(libc::EPROTONOSUPPORT);
        }
    };
    let six = match domain {
        libc::AF_INET => false,
        libc::AF_INET6 => true,
        _ => return Err(libc::EAFNOSUPPORT),
    };
    session()?;
    let fd = reserve(proto, ty & libc::SOCK_CLOEXEC != 0)?;
    let sock = Sock::new(proto, State::Fresh, ty & libc::SOCK_NONBLOCK != 0).in_family(six);
    table::insert(fd, Arc::new(sock));
    Ok(fd)
}

/// `bind`: a UDP socket is bound in netd now; a TCP socket keeps the
/// address for its `listen` (so a port taken shows there, not here).
///
/// # Safety
/// `addr` points to `len` readable bytes.
pub unsafe fn bind(fd: i32, addr: *const libc::sockaddr, len: libc::socklen_t) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let at = unsafe { read_addr(addr, len, s.is_six()) }?;
    let mut g = s.lock()?;
    if !matches!(g.state, State::Fresh) || g.bound.is_some() {
        return Err(libc::EINVAL);
    }
    if s.proto == Proto::Udp {
        let d = bind_datagram(at, &g.options, s.is_nonblocking())?;
        g.state = State::Datagram(Arc::new(d));
    }
    g.bound = Some(at);
    Ok(())
}

/// `listen`: the TCP socket becomes a listener on its bound address (a
/// second `listen` keeps the first backlog). A listener needs a port:
/// `EINVAL` without one.
pub fn listen(fd: i32, backlog: i32) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    if s.proto != Proto::Tcp {
        return Err(libc::EOPNOTSUPP);
    }
    let mut g = s.lock()?;
    match g.state {
        State::Fresh => {}
        State::Listener(_) => return Ok(()),
        _ => return Err(libc::EINVAL),
    }
    let Some(at) = g.bound.filter(|a| a.port() != 0) else {
        say_once("listen on a socket without a port is refused: bind one first");
        return Err(libc::EINVAL);
    };
    let backlog = u32::try_from(backlog).unwrap_or(1);
    let l = match at {
        SocketAddr::V6(six) if g.options.v6_only => TcpListener::listen_v6_only_via(&session()?, six, backlog),
        _ => TcpListener::listen_via(&session()?, at, backlog),
    }
    .map_err(|e| errno(&e))?;
    l.set_nonblocking(s.is_nonblocking()).map_err(|e| errno(&e))?;
    g.state = State::Listener(Arc::new(l));
    Ok(())
}

/// `accept4`: the listener's next connection under a new number
/// (`SOCK_NONBLOCK`, `SOCK_CLOEXEC` taken), its peer written to `addr`.
///
/// # Safety
/// `addr` is null or `len` is valid and `addr` has `*len` writable bytes.
pub unsafe fn accept4(fd: i32, addr: *mut libc::sockaddr, len: *mut libc::socklen_t, flags: i32) -> Res<i32> {
    let _in = Entered::new();
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return Err(libc::EINVAL);
    }
    let s = table::get(fd)?;
    s.touch();
    let (l, options) = {
        let g = s.lock()?;
        match &g.state {
            State::Listener(l) => (l.clone(), copy_options(&g.options)),
            _ => return Err(libc::EINVAL),
        }
    };
    let (stream, peer) = l.accept().map_err(|e| errno(&e))?;
    let nonblocking = flags & libc::SOCK_NONBLOCK != 0;
    apply_stream_options(&stream, &options, nonblocking)?;
    let new = reserve(Proto::Tcp, flags & libc::SOCK_CLOEXEC != 0)?;
    let sock = Sock::new(Proto::Tcp, State::Stream(Arc::new(stream)), nonblocking)
        .in_family(s.is_six())
        .with_applied_options(options);
    table::insert(new, Arc::new(sock));
    if let Err(e) = unsafe { write_addr(peer, s.is_six(), addr, len) } {
        let _ = close(new);
        return Err(e);
    }
    Ok(new)
}

/// The options a listener passes on to the connections it accepts.
fn copy_options(o: &crate::sock::Options) -> crate::sock::Options {
    crate::sock::Options {
        nodelay: o.nodelay,
        keepalive: o.keepalive,
        keepalive_params: o.keepalive_params,
        ..Default::default()
    }
}

/// `connect`. TCP: a blocking socket waits for the handshake (within
/// `SO_SNDTIMEO`, if set); a non-blocking one gives `EINPROGRESS` and is
/// writable once netd answers, `SO_ERROR` then saying how it went (a
/// second `connect` meanwhile gives `EALREADY`). UDP: sets the peer
/// (`AF_UNSPEC` clears it), binding the socket first if it is not, in
/// netd too, which then reports ICMP errors about datagrams to it as
/// Linux does to a connected socket (the next call fails with a port
/// unreachable's `ECONNREFUSED`, or `SO_ERROR` gives it).
///
/// # Safety
/// `addr` points to `len` readable bytes.
pub unsafe fn connect(fd: i32, addr: *const libc::sockaddr, len: libc::socklen_t) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    if s.proto == Proto::Udp {
        if unsafe { family(addr, len) } == Some(libc::AF_UNSPEC) {
            if let State::Datagram(d) = &s.lock()?.state {
                d.disconnect().map_err(|e| errno(&e))?;
            }
            s.lock()?.peer = None;
            return Ok(());
        }
        let to = unsafe { read_addr(addr, len, s.is_six()) }?;
        let (d, _) = s.datagram()?;
        d.connect(to).map_err(|e| errno(&e))?;
        s.lock()?.peer = Some(to);
        return Ok(());
    }
    let to = unsafe { read_addr(addr, len, s.is_six()) }?;
    let options = {
        let mut g = s.lock()?;
        if let Some(e) = Sock::take_failure(&mut g) {
            return Err(e);
        }
        match g.state {
            State::Fresh => {}
            State::Stream(_) => return Err(libc::EISCONN),
            State::Connecting(_) => return Err(libc::EALREADY),
            _ => return Err(libc::EINVAL),
        }
        if g.bound.is_some_and(|b| b.port() != 0) {
            say_once("bind before connect: the port bound is not used, netd picks the connection's own");
        }
        g.options.clone()
    };
    let netd = session()?;
    if s.is_nonblocking() {
        let pending = TcpStream::connect_start_via(&netd, to).map_err(|e| errno(&e))?;
        let mut g = s.lock()?;
        if !matches!(g.state, State::Fresh) {
            return Err(libc::EALREADY);
        }
        g.state = State::Connecting(Box::new(pending));
        return Err(libc::EINPROGRESS);
    }
    let stream = match options.send_timeout {
        Some(limit) => TcpStream::connect_timeout_via(&netd, &to, limit),
        None => TcpStream::connect_via(&netd, to),
    }
    .map_err(|e| match errno(&e) {
        libc::EAGAIN => libc::ETIMEDOUT,
        n => n,
    })?;
    apply_stream_options(&stream, &options, s.is_nonblocking())?;
    let mut g = s.lock()?;
    if !matches!(g.state, State::Fresh) {
        // Another thread connected it meanwhile.
        return Err(libc::EISCONN);
    }
    g.state = State::Stream(Arc::new(stream));
    // Unless another thread set them while it connected.
    g.keepalive_in_netd =
        g.options.keepalive == options.keepalive && g.options.keepalive_params == options.keepalive_params;
    Ok(())
}

/// `shutdown` of a connected stream (`SHUT_RD`, `SHUT_WR`, `SHUT_RDWR`).
pub fn shutdown(fd: i32, how: i32) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let how = match how {
        libc::SHUT_RD => Shutdown::Read,
        libc::SHUT_WR => Shutdown::Write,
        libc::SHUT_RDWR => Shutdown::Both,
        _ => return Err(libc::EINVAL),
    };
    s.stream()?.shutdown(how).map_err(|e| errno(&e))
}

/// `close`: the number goes back to the kernel; the socket closes in netd
/// with its last number (a stream sends what it queued, then its FIN).
/// In a child after `fork`, an inherited socket it never used is let go:
/// what was adopted for it is closed in netd, and its placeholder's close
/// ends netd's watch if no other process holds it.
pub fn close(fd: i32) -> Res<()> {
    let _in = Entered::new();
    crate::epoll::forget(fd);
    let sock = table::remove(fd);
    if let Some(s) = sock {
        if !s.is_here() {
            crate::fork::let_go_unused(s);
        }
    }
    if unsafe { libc::close(fd) } < 0 {
        return Err(last_errno());
    }
    Ok(())
}

/// `close_range(first, last, flags)`, and `closefrom(first)` as
/// `close_range(first, ~0, 0)`: the nagare sockets in the range close as
/// `close` closes them, then the kernel closes the rest, sparing the
/// descriptors the library's own sessions keep open (a program that
/// closes every number above its standard ones must not take netd from
/// the sockets it keeps below them). With `CLOSE_RANGE_CLOEXEC` nothing
/// closes: the kernel marks the range close-on-exec, as it would.
pub fn close_range(first: u32, last: u32, flags: u32) -> Res<()> {
    let _in = Entered::new();
    if first > last || flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 {
        // The kernel refuses flags it does not know before closing
        // anything; so does this, before any socket closes.
        return Err(libc::EINVAL);
    }
    if flags & CLOSE_RANGE_CLOEXEC != 0 {
        return kernel_close_range(first, last, flags);
    }
    if flags & CLOSE_RANGE_UNSHARE != 0 {
        // The kernel would unshare the table before closing anything, so
        // that a process sharing it (`CLONE_FILES`) keeps its numbers:
        // unshare first here too, before any socket closes.
        // SAFETY: a flag word; no memory passed.
        if unsafe { libc::unshare(libc::CLONE_FILES) } < 0 {
            return Err(last_errno());
        }
    }
    let flags = flags & !CLOSE_RANGE_UNSHARE;
    // Descriptor numbers are below `i32::MAX` (the kernel's own bound).
    let top = i32::try_from(last).unwrap_or(i32::MAX);
    let Ok(bottom) = i32::try_from(first) else { return kernel_close_range(first, last, flags) };
    for fd in crate::table::in_range(bottom, top) {
        let _ = close(fd);
    }
    crate::epoll::forget_range(bottom, top);
    let mut from = first;
    for spared in crate::session::own_descriptors() {
        let Ok(spared) = u32::try_from(spared) else { continue };
        if !(first..=last).contains(&spared) {
            continue;
        }
        if spared > from {
            kernel_close_range(from, spared - 1, flags)?;
        }
        from = spared.saturating_add(1);
        if spared == u32::MAX {
            return Ok(());
        }
    }
    if from <= last {
        kernel_close_range(from, last, flags)?;
    }
    Ok(())
}

/// `close_range`'s flag that unshares the descriptor table first.
const CLOSE_RANGE_UNSHARE: u32 = 1 << 1;
/// `close_range`'s flag that marks the range close-on-exec instead.
const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;

/// The kernel's `close_range` system call itself, or on a kernel without
/// it (before 5.9: `ENOSYS`) the same done one descriptor at a time, as
/// glibc's `closefrom` does there.
fn kernel_close_range(first: u32, last: u32, flags: u32) -> Res<()> {
    // SAFETY: the system call takes three integers; it touches no memory
    // of ours.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) };
    if r < 0 {
        let e = last_errno();
        if e == libc::ENOSYS && flags & !(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE) == 0 {
            if flags & CLOSE_RANGE_UNSHARE != 0 {
                // SAFETY: a flag word; no memory passed.
                if unsafe { libc::unshare(libc::CLONE_FILES) } < 0 {
                    return Err(last_errno());
                }
            }
            each_open(first, last, flags & CLOSE_RANGE_CLOEXEC != 0);
            return Ok(());
        }
        return Err(e);
    }
    Ok(())
}

/// Closes (or, with `cloexec`, marks close-on-exec) every descriptor this
/// process has open from `first` to `last`: those `/proc/self/fd` lists,
/// or, without `/proc`, every number below the descriptor limit.
fn each_open(first: u32, last: u32, cloexec: bool) {
    let act = |fd: u32| {
        let Ok(fd) = i32::try_from(fd) else { return };
        // SAFETY: a close or a flag change on a number; no memory passed.
        unsafe {
            if cloexec {
                let f = libc::fcntl(fd, libc::F_GETFD);
                if f >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, f | libc::FD_CLOEXEC);
                }
            } else {
                libc::close(fd);
            }
        }
    };
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        // Listed first, closed after: the listing's own descriptor is
        // among the numbers and must not close under it.
        let open: Vec<u32> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|fd| (first..=last).contains(fd))
            .collect();
        open.into_iter().for_each(act);
        return;
    }
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a whole rlimit to write.
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        u32::try_from(lim.rlim_cur.saturating_sub(1)).unwrap_or(1 << 20)
    } else {
        1023
    };
    // Bounded by the limit the kernel itself enforces on numbers.
    for fd in first..=last.min(top) {
        act(fd);
    }
}

/// `dup`, or `fcntl(F_DUPFD[_CLOEXEC], min)`: a second number, at least
/// `min`, for the same socket.
pub fn dup(fd: i32, min: i32, cloexec: bool) -> Res<i32> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    let new = unsafe { libc::fcntl(fd, cmd, min) };
    if new < 0 {
        return Err(last_errno());
    }
    table::insert(new, s);
    Ok(new)
}

/// `dup2`/`dup3(old, new, flags)` where either number is ours: `new`
/// names what `old` names (a socket of ours that `new` named before is
/// closed, as the kernel closes a file).
pub fn dup3(old: i32, new: i32, flags: i32) -> Res<i32> {
    let _in = Entered::new();
    let s = table::get(old).ok();
    if old == new {
        // dup2 of a number onto itself; dup3 refuses it.
        return if flags == 0 && (s.is_some() || unsafe { libc::fcntl(old, libc::F_GETFD) } >= 0) {
            Ok(new)
        } else if flags == 0 {
            Err(libc::EBADF)
        } else {
            Err(libc::EINVAL)
        };
    }
    if let Some(gone) = table::remove(new) {
        if !gone.is_here() {
            crate::fork::let_go_unused(gone);
        }
    }
    let r = unsafe { libc::dup3(old, new, flags) };
    if r < 0 {
        return Err(last_errno());
    }
    if let Some(s) = s {
        table::insert(new, s);
    }
    Ok(new)
}

/// `fcntl` on a socket of ours: `F_GETFL`/`F_SETFL` (`O_NONBLOCK`), the
/// `F_DUPFD` pair; anything else goes to the placeholder (`F_GETFD`,
/// `F_SETFD` and close-on-exec among them).
pub fn fcntl(fd: i32, cmd: i32, arg: libc::c_ulong) -> Res<i32> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    match cmd {
        libc::F_GETFL => Ok(libc::O_RDWR | if s.is_nonblocking() { libc::O_NONBLOCK } else { 0 }),
        libc::F_SETFL => s.set_nonblocking(arg as i32 & libc::O_NONBLOCK != 0).map(|()| 0),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            dup(fd, i32::try_from(arg).map_err(|_| libc::EINVAL)?, cmd == libc::F_DUPFD_CLOEXEC)
        }
        _ => {
            let r = unsafe { libc::fcntl(fd, cmd, arg) };
            if r < 0 {
                Err(last_errno())
            } else {
                Ok(r)
            }
        }
    }
}

/// `ioctl`: `FIONBIO` and `FIONREAD` (the unread bytes of a stream, the
/// next datagram's length), and `FIOCLEX` and `FIONCLEX` (close-on-exec,
/// the placeholder's, which take no argument); `ENOTTY` for the rest.
///
/// # Safety
/// `arg` points to an `int`, readable for `FIONBIO`, writable for
/// `FIONREAD`.
pub unsafe fn ioctl(fd: i32, request: libc::c_ulong, arg: *mut libc::c_int) -> Res<i32> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    if request == libc::FIOCLEX || request == libc::FIONCLEX {
        // SAFETY: flag requests on a descriptor of ours; no argument.
        if unsafe { libc::ioctl(fd, request) } < 0 {
            return Err(last_errno());
        }
        return Ok(0);
    }
    if arg.is_null() {
        return Err(libc::EFAULT);
    }
    match request {
        libc::FIONBIO => s.set_nonblocking(unsafe { *arg } != 0).map(|()| 0),
        libc::FIONREAD => {
            let n = match &s.lock()?.state {
                State::Stream(st) => st.unread().map_err(|e| errno(&e))?,
                // The next datagram's length, as Linux says (0: none).
                State::Datagram(d) => d.next_datagram_len().map_err(|e| errno(&e))?,
                _ => 0,
            };
            unsafe { *arg = i32::try_from(n).unwrap_or(i32::MAX) };
            Ok(0)
        }
        _ => Err(libc::ENOTTY),
    }
}

/// `getsockname`: the address the socket is bound to (`0.0.0.0:0`, or
/// `[::]:0`, before it is).
///
/// # Safety
/// As [`accept4`]'s `addr` and `len`.
pub unsafe fn getsockname(fd: i32, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let local = {
        let g = s.lock()?;
        let r = match &g.state {
            State::Fresh | State::Connecting(_) | State::Failed(_) => {
                let any =
                    if s.is_six() { IpAddr::V6(Ipv6Addr::UNSPECIFIED) } else { IpAddr::V4(Ipv4Addr::UNSPECIFIED) };
                Ok(g.bound.unwrap_or(SocketAddr::new(any, 0)))
            }
            State::Listener(l) => l.local_addr(),
            State::Stream(st) => st.local_addr(),
            State::Datagram(d) => d.local_addr(),
        };
        r.map_err(|e| errno(&e))?
    };
    unsafe { write_addr(local, s.is_six(), addr, len) }
}

/// `getpeername`: a stream's peer, or a UDP socket's `connect`ed one.
///
/// # Safety
/// As [`accept4`]'s `addr` and `len`.
pub unsafe fn getpeername(fd: i32, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let peer = {
        let g = s.lock()?;
        match &g.state {
            State::Stream(st) => st.peer_addr().map_err(|e| errno(&e))?,
            State::Datagram(_) if g.peer.is_some() => g.peer.ok_or(libc::ENOTCONN)?,
            _ => return Err(libc::ENOTCONN),
        }
    };
    unsafe { write_addr(peer, s.is_six(), addr, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `FIOCLEX` and `FIONCLEX` (what python's `os.set_inheritable` asks)
    /// take no argument and set the placeholder's close-on-exec.
    #[test]
    fn close_on_exec_by_ioctl_needs_no_argument() {
        let fd = reserve(Proto::Udp, true).expect("a placeholder");
        table::insert(fd, Arc::new(Sock::new(Proto::Udp, State::Fresh, false)));
        let cloexec = || unsafe { libc::fcntl(fd, libc::F_GETFD) } & libc::FD_CLOEXEC != 0;
        assert!(cloexec());
        assert_eq!(unsafe { ioctl(fd, libc::FIONCLEX, std::ptr::null_mut()) }, Ok(0));
        assert!(!cloexec(), "inheritable");
        assert_eq!(unsafe { ioctl(fd, libc::FIOCLEX, std::ptr::null_mut()) }, Ok(0));
        assert!(cloexec(), "close-on-exec again");
        assert_eq!(unsafe { ioctl(fd, libc::FIONBIO, std::ptr::null_mut()) }, Err(libc::EFAULT));
        table::remove(fd);
        unsafe { libc::close(fd) };
    }

    /// Where the kernel has no `close_range`, the range is closed (or
    /// marked close-on-exec) one open descriptor at a time, and only the
    /// range: the numbers just past either end stay open.
    #[test]
    fn without_the_system_call_each_open_number_in_the_range_is_acted_on() {
        let mut p = [0; 2];
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        let at = |n: i32| unsafe { libc::dup2(p[0], n) };
        for n in [900, 901, 903, 904] {
            assert_eq!(at(n), n);
        }
        let open = |n: i32| unsafe { libc::fcntl(n, libc::F_GETFD) } >= 0;
        let cloexec = |n: i32| unsafe { libc::fcntl(n, libc::F_GETFD) } & libc::FD_CLOEXEC != 0;
        each_open(903, 903, true);
        assert!(cloexec(903) && !cloexec(904));
        each_open(900, 902, false);
        assert!(!open(900) && !open(901));
        assert!(open(903) && open(904) && open(p[0]) && open(p[1]));
        for n in [903, 904, p[0], p[1]] {
            unsafe { libc::close(n) };
        }
    }

    /// Flags the kernel does not know are refused before anything closes,
    /// a nagare socket in the range included.
    #[test]
    fn a_range_with_unknown_flags_is_refused_and_nothing_closes() {
        let fd = reserve(Proto::Udp, true).expect("a placeholder");
        table::insert(fd, Arc::new(Sock::new(Proto::Udp, State::Fresh, false)));
        let n = u32::try_from(fd).unwrap();
        assert_eq!(close_range(n, n, 1 << 5), Err(libc::EINVAL));
        assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0, "still open");
        assert!(table::get(fd).is_ok(), "still a nagare socket");
        table::remove(fd);
        unsafe { libc::close(fd) };
    }
}
