//! `setsockopt` and `getsockopt`: the options programs set, as a table.
//! Options a socket not yet in netd cannot take are kept and applied when
//! it gets there (`connect`, `accept`, `bind`).
//!
//! | level, option | set | get |
//! |---|---|---|
//! | `SO_REUSEADDR`, `SO_REUSEPORT`, `SO_BROADCAST` | kept (netd binds as if set) | kept |
//! | `SO_KEEPALIVE` | netd's keepalive probes, after `TCP_KEEPIDLE` | kept |
//! | `SO_SNDBUF`, `SO_RCVBUF` | a stream's buffers in netd, a datagram socket's receive queue (`SO_RCVBUF`); kept before | netd's size, doubled as Linux reports |
//! | `SO_RCVTIMEO`, `SO_SNDTIMEO` | the read and write (and connect) limits | kept |
//! | `SO_LINGER` | on with a zero time: netd resets the stream at its close (and at the program's exit); otherwise a close sends what was queued, without waiting; kept | kept |
//! | `SO_ERROR` | – | the pending error, taken |
//! | `SO_TYPE`, `SO_DOMAIN`, `SO_PROTOCOL`, `SO_ACCEPTCONN` | – | what the socket is |
//! | `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT` | netd's, while `SO_KEEPALIVE` is on; kept | kept |
//! | `TCP_NODELAY` | netd's Nagle switch | netd's |
//! | `TCP_USER_TIMEOUT` | netd's | kept |
//! | `TCP_MAXSEG` | kept (netd's segments follow the path) | kept, else 1460 |
//! | `TCP_CONGESTION` | `cubic` taken, others `ENOENT` | `cubic` |
//! | `TCP_INFO` | – | the state (established or not); counters 0 |
//! | `IP_TOS` | kept | kept |
//! | `IPV6_V6ONLY` (`AF_INET6` sockets) | a listener on `::` without IPv4, before `listen` | kept |
//!
//! Anything else is `ENOPROTOOPT`, said once per option (on stderr, unless
//! `NAGARE_LOG` is `off` or `error`).

use crate::errors::{errno, say_once};
use crate::sock::{apply_keepalive_idle, apply_keepalive_probes, Inner, Proto, Sock, State};
use crate::{table, Entered, Res};
use std::time::Duration;

/// `SO_LINGER`'s value as a linger time (`None` when off). A negative
/// time is a very long one, as Linux reads it (unsigned).
pub(crate) fn linger_of(l: &libc::linger) -> Option<Duration> {
    (l.l_onoff != 0).then(|| Duration::from_secs(u64::try_from(l.l_linger).unwrap_or(u64::MAX)))
}

/// The congestion control netd's connections run (the engine's default).
const CONGESTION: &[u8] = b"cubic";

/// The segment size reported before one is set (Ethernet's, less the
/// IPv4 and TCP headers).
const DEFAULT_MSS: i32 = 1460;

/// Linux's default socket buffer (`net.core.rmem_default`), reported for
/// a socket that has no size of its own yet.
const DEFAULT_BUFFER: usize = 212_992;

fn refused(level: i32, name: i32) -> i32 {
    say_once(&format!("socket option level {level} name {name} is not supported (ENOPROTOOPT)"));
    libc::ENOPROTOOPT
}

/// Where `TCP_KEEPIDLE`, `TCP_KEEPINTVL` or `TCP_KEEPCNT` is kept.
fn keepalive_slot(name: i32) -> usize {
    match name {
        libc::TCP_KEEPIDLE => 0,
        libc::TCP_KEEPINTVL => 1,
        _ => 2,
    }
}

/// # Safety
/// `value` has `len` readable bytes.
unsafe fn read_value<T: Copy>(value: *const libc::c_void, len: libc::socklen_t) -> Res<T> {
    if value.is_null() || (len as usize) < std::mem::size_of::<T>() {
        return Err(libc::EINVAL);
    }
    Ok(unsafe { std::ptr::read_unaligned(value.cast::<T>()) })
}

fn duration_of(tv: libc::timeval) -> Res<Option<Duration>> {
    if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
        return Err(libc::EDOM);
    }
    let d = Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64);
    Ok((!d.is_zero()).then_some(d))
}

fn timeval_of(d: Option<Duration>) -> libc::timeval {
    let d = d.unwrap_or_default();
    libc::timeval { tv_sec: d.as_secs() as libc::time_t, tv_usec: d.subsec_micros() as libc::suseconds_t }
}

/// `setsockopt`.
///
/// # Safety
/// `value` has `len` readable bytes.
pub unsafe fn setsockopt(fd: i32, level: i32, name: i32, value: *const libc::c_void, len: libc::socklen_t) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    let int = || unsafe { read_value::<libc::c_int>(value, len) };
    let mut g = s.lock()?;
    let Inner { state, options: o, keepalive_in_netd, .. } = &mut *g;
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuse_addr = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => o.reuse_port = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_BROADCAST) => {
            int()?;
        }
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
            o.keepalive = int()? != 0;
            if let State::Stream(st) = &*state {
                // The probes' interval and count too, unless netd has them.
                if !*keepalive_in_netd {
                    apply_keepalive_probes(st, o).map_err(|e| errno(&e))?;
                }
                apply_keepalive_idle(st, o).map_err(|e| errno(&e))?;
                *keepalive_in_netd = true;
            }
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            let l = unsafe { read_value::<libc::linger>(value, len) }?;
            o.linger = Some(l);
            if let State::Stream(st) = &*state {
                st.set_linger(linger_of(&l)).map_err(|e| errno(&e))?;
            }
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) | (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => {
            let d = duration_of(unsafe { read_value::<libc::timeval>(value, len) }?)?;
            let recv = name == libc::SO_RCVTIMEO;
            if recv {
                o.recv_timeout = d;
            } else {
                o.send_timeout = d;
            }
            let r = match &*state {
                State::Stream(st) if recv => st.set_read_timeout(d),
                State::Stream(st) => st.set_write_timeout(d),
                State::Datagram(dg) if recv => dg.set_read_timeout(d),
                _ => Ok(()),
            };
            r.map_err(|e| errno(&e))?;
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) | (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            let n = usize::try_from(int()?.max(1)).unwrap_or(1).min(nagare_request::MAX_SOCKET_BUFFER as usize);
            let send = name == libc::SO_SNDBUF;
            if send {
                o.send_buffer = Some(n);
            } else {
                o.recv_buffer = Some(n);
            }
            let r = match &*state {
                State::Stream(st) if send => st.set_send_buffer_size(n),
                State::Stream(st) => st.set_recv_buffer_size(n),
                State::Datagram(dg) if !send => dg.set_recv_buffer_size(n),
                _ => Ok(()),
            };
            r.map_err(|e| errno(&e))?;
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) if s.proto == Proto::Tcp => {
            o.nodelay = int()? != 0;
            if let State::Stream(st) = &*state {
                st.set_nodelay(o.nodelay).map_err(|e| errno(&e))?;
            }
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT) if s.proto == Proto::Tcp => {
            let v = int()?;
            if v < 1 {
                return Err(libc::EINVAL);
            }
            let slot = keepalive_slot(name);
            let was = std::mem::replace(&mut o.keepalive_params[slot], v);
            // Where netd's connection has what the options said, only a
            // change is a request, and the idle time only while keepalive
            // is on.
            if let State::Stream(st) = &*state {
                let r = match slot {
                    _ if was == v && *keepalive_in_netd => Ok(()),
                    0 if o.keepalive => apply_keepalive_idle(st, o),
                    0 => Ok(()),
                    _ => apply_keepalive_probes(st, o),
                };
                if let Err(e) = r {
                    o.keepalive_params[slot] = was;
                    return Err(errno(&e));
                }
            }
        }
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) if s.proto == Proto::Tcp => {
            let ms = u64::try_from(int()?).map_err(|_| libc::EINVAL)?;
            let d = (ms > 0).then(|| Duration::from_millis(ms));
            match &*state {
                State::Stream(st) => st.set_user_timeout(d).map_err(|e| errno(&e))?,
                _ => return Err(refused(level, name)),
            }
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) if s.proto == Proto::Tcp => {
            let v = int()?;
            if !(88..=32767).contains(&v) {
                return Err(libc::EINVAL);
            }
            o.max_segment = Some(v);
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) if s.proto == Proto::Tcp => {
            let name = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len as usize) };
            if value.is_null() || name.split(|&b| b == 0).next() != Some(CONGESTION) {
                return Err(libc::ENOENT);
            }
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => o.tos = int()? & 0xff,
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.is_six() => {
            // As Linux: only before the socket listens or connects.
            if !matches!(state, State::Fresh) {
                return Err(libc::EINVAL);
            }
            o.v6_only = int()? != 0;
        }
        _ => return Err(refused(level, name)),
    }
    Ok(())
}

/// `getsockopt`.
///
/// # Safety
/// `len` is valid and `value` has `*len` writable bytes.
pub unsafe fn getsockopt(
    fd: i32,
    level: i32,
    name: i32,
    value: *mut libc::c_void,
    len: *mut libc::socklen_t,
) -> Res<()> {
    let _in = Entered::new();
    let s = table::get(fd)?;
    if value.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    let mut g = s.lock()?;
    let o = &g.options.clone();
    let buffer = |n: Res<usize>| n.map(|n| i32::try_from(n.saturating_mul(2)).unwrap_or(i32::MAX));
    let int: i32 = match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuse_addr.into(),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => o.reuse_port.into(),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive.into(),
        (libc::SOL_SOCKET, libc::SO_TYPE) => match s.proto {
            Proto::Tcp => libc::SOCK_STREAM,
            Proto::Udp => libc::SOCK_DGRAM,
        },
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => {
            if s.is_six() {
                libc::AF_INET6
            } else {
                libc::AF_INET
            }
        }
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => match s.proto {
            Proto::Tcp => libc::IPPROTO_TCP,
            Proto::Udp => libc::IPPROTO_UDP,
        },
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => matches!(g.state, State::Listener(_)).into(),
        (libc::SOL_SOCKET, libc::SO_ERROR) => {
            if let Some(e) = Sock::take_failure(&mut g) {
                return unsafe { write_value(&e, value, len) };
            }
            let e = match &g.state {
                State::Stream(st) => st.take_error(),
                State::Datagram(d) => d.take_error(),
                _ => Ok(None),
            };
            match e {
                Ok(Some(e)) | Err(e) => errno(&e),
                Ok(None) => 0,
            }
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => buffer(match &g.state {
            State::Stream(st) => st.send_buffer_size().map_err(|e| errno(&e)),
            _ => Ok(o.send_buffer.unwrap_or(DEFAULT_BUFFER / 2)),
        })?,
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => buffer(match &g.state {
            State::Stream(st) => st.recv_buffer_size().map_err(|e| errno(&e)),
            State::Datagram(dg) => dg.recv_buffer_size().map_err(|e| errno(&e)),
            _ => Ok(o.recv_buffer.unwrap_or(DEFAULT_BUFFER / 2)),
        })?,
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            let l = o.linger.unwrap_or(libc::linger { l_onoff: 0, l_linger: 0 });
            return unsafe { write_value(&l, value, len) };
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => {
            return unsafe { write_value(&timeval_of(o.recv_timeout), value, len) }
        }
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => {
            return unsafe { write_value(&timeval_of(o.send_timeout), value, len) }
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) if s.proto == Proto::Tcp => match &g.state {
            State::Stream(st) => st.nodelay().map_err(|e| errno(&e))?.into(),
            _ => o.nodelay.into(),
        },
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT) if s.proto == Proto::Tcp => {
            o.keepalive_params[keepalive_slot(name)]
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) if s.proto == Proto::Tcp => o.max_segment.unwrap_or(DEFAULT_MSS),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) if s.proto == Proto::Tcp => {
            let mut name = [0u8; 16];
            name[..CONGESTION.len()].copy_from_slice(CONGESTION);
            return unsafe { write_value(&name, value, len) };
        }
        (libc::IPPROTO_TCP, libc::TCP_INFO) if s.proto == Proto::Tcp => {
            let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
            // Linux's TCP_ESTABLISHED, TCP_SYN_SENT and TCP_CLOSE.
            info.tcpi_state = match g.state {
                State::Stream(_) => 1,
                State::Connecting(_) => 2,
                _ => 7,
            };
            return unsafe { write_value(&info, value, len) };
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => o.tos,
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.is_six() => o.v6_only.into(),
        _ => return Err(refused(level, name)),
    };
    unsafe { write_value(&int, value, len) }
}

/// Writes `v` as `getsockopt` does: at most `*len` bytes, `*len` set to
/// the bytes written.
///
/// # Safety
/// `len` is valid and `value` has `*len` writable bytes.
unsafe fn write_value<T: Copy>(v: &T, value: *mut libc::c_void, len: *mut libc::socklen_t) -> Res<()> {
    let n = (unsafe { *len } as usize).min(std::mem::size_of::<T>());
    unsafe {
        std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), value.cast::<u8>(), n);
        *len = n as libc::socklen_t;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linger_time_is_off_zero_or_long() {
        let l = |l_onoff, l_linger| linger_of(&libc::linger { l_onoff, l_linger });
        assert_eq!(l(0, 0), None);
        assert_eq!(l(0, 5), None);
        assert_eq!(l(1, 0), Some(Duration::ZERO));
        assert_eq!(l(1, 5), Some(Duration::from_secs(5)));
        assert!(l(1, -1).is_some_and(|d| d > Duration::from_secs(1 << 30)), "negative is long");
    }

    #[test]
    fn timeouts_convert_both_ways_and_zero_means_none() {
        let tv = libc::timeval { tv_sec: 2, tv_usec: 500_000 };
        assert_eq!(duration_of(tv), Ok(Some(Duration::from_millis(2500))));
        assert_eq!(duration_of(libc::timeval { tv_sec: 0, tv_usec: 0 }), Ok(None));
        assert_eq!(duration_of(libc::timeval { tv_sec: 0, tv_usec: 1_000_000 }), Err(libc::EDOM));
        let back = timeval_of(Some(Duration::from_millis(2500)));
        assert_eq!((back.tv_sec, back.tv_usec), (2, 500_000));
    }

    #[test]
    fn a_short_value_is_refused_and_a_short_buffer_gets_a_short_write() {
        let one: u8 = 1;
        assert_eq!(unsafe { read_value::<libc::c_int>((&raw const one).cast(), 1) }, Err(libc::EINVAL));
        let mut out = [0u8; 2];
        let mut len = 2 as libc::socklen_t;
        unsafe { write_value(&0x0102_0304i32, out.as_mut_ptr().cast(), &mut len).unwrap() };
        assert_eq!(len, 2);
        assert_eq!(out, [0x04, 0x03]);
    }
}
