//! `getaddrinfo`, `freeaddrinfo`, `getnameinfo`, `gethostbyname`,
//! `gethostbyaddr` and their `_r` forms for IPv4 over [`super::lookup`]
//! and [`super::reverse`]. A request this
//! resolver does not answer (another family, an IPv6 literal) is left to
//! libc (`None`) when it needs no DNS; an IPv6 name has no address here
//! (libc would ask DNS over the kernel's IPv4). The lists it makes are its own to
//! free: `freeaddrinfo` knows them by their first entry.

use super::{lookup, numeric, reverse, Failure};
use crate::Entered;
use libc::{addrinfo, c_char, c_int, hostent, sockaddr_in, socklen_t};
use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::net::Ipv4Addr;
use std::sync::Mutex;

extern "C" {
    fn __h_errno_location() -> *mut c_int;
    fn getservbyname_r(
        name: *const c_char,
        proto: *const c_char,
        ret: *mut libc::servent,
        buf: *mut c_char,
        buflen: usize,
        result: *mut *mut libc::servent,
    ) -> c_int;
}

/// `netdb.h`'s `h_errno` values.
const HOST_NOT_FOUND: c_int = 1;
const TRY_AGAIN: c_int = 2;
const NO_RECOVERY: c_int = 3;

/// One entry of a list this resolver made: the C entry and its address.
#[repr(C)]
struct Entry {
    ai: addrinfo,
    sin: sockaddr_in,
}

/// The first entries of the lists this resolver made and has not freed.
static LISTS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn gai_error(f: Failure) -> c_int {
    match f {
        Failure::NoName => libc::EAI_NONAME,
        Failure::Again => libc::EAI_AGAIN,
        Failure::Fail => libc::EAI_FAIL,
    }
}

/// The port `service` names for `proto` ("tcp" or "udp"): a number, or a
/// name `/etc/services` knows.
fn port_of(service: &CStr, proto: &CStr, numeric_only: bool) -> Result<u16, c_int> {
    let s = service.to_str().map_err(|_| libc::EAI_SERVICE)?;
    if let Ok(p) = s.parse::<u16>() {
        return Ok(p);
    }
    if numeric_only {
        return Err(libc::EAI_NONAME);
    }
    let mut ent: libc::servent = unsafe { std::mem::zeroed() };
    let mut buf = [0 as c_char; 1024];
    let mut result: *mut libc::servent = std::ptr::null_mut();
    let r = unsafe {
        getservbyname_r(service.as_ptr(), proto.as_ptr(), &mut ent, buf.as_mut_ptr(), buf.len(), &mut result)
    };
    if r != 0 || result.is_null() {
        return Err(libc::EAI_SERVICE);
    }
    Ok(u16::from_be(ent.s_port as u16))
}

/// `getaddrinfo` for IPv4: `Some(code)` (0 with `*res` set), or `None` to
/// leave the request to libc.
///
/// # Safety
/// `node` and `service` are null or C strings; `hints` is null or valid;
/// `res` is valid.
pub unsafe fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> Option<c_int> {
    let _in = Entered::new();
    let hints = unsafe { hints.as_ref() };
    let (family, socktype, protocol, flags) =
        hints.map_or((libc::AF_UNSPEC, 0, 0, 0), |h| (h.ai_family, h.ai_socktype, h.ai_protocol, h.ai_flags));
    let node = unsafe { node.as_ref() }.map(|n| unsafe { CStr::from_ptr(n) });
    let service = unsafe { service.as_ref() }.map(|s| unsafe { CStr::from_ptr(s) });
    if family != libc::AF_INET && family != libc::AF_UNSPEC {
        // Another family's literal or wildcard needs no DNS: libc's. A
        // name would be asked of DNS over the kernel's IPv4: it has none.
        let literal = node.is_none_or(|n| n.to_str().is_ok_and(|n| n.parse::<std::net::Ipv6Addr>().is_ok()));
        return (family == libc::AF_INET6 && !literal && flags & libc::AI_NUMERICHOST == 0).then_some(libc::EAI_NONAME);
    }
    if node.is_none() && service.is_none() {
        return Some(libc::EAI_NONAME);
    }
    if res.is_null() {
        return Some(libc::EAI_FAIL);
    }
    let found = match node.map(|n| n.to_str()) {
        None if flags & libc::AI_PASSIVE != 0 => (String::new(), vec![Ipv4Addr::UNSPECIFIED]),
        None => (String::new(), vec![Ipv4Addr::LOCALHOST]),
        Some(Err(_)) => return Some(libc::EAI_NONAME),
        Some(Ok(name)) if flags & libc::AI_NUMERICHOST != 0 => match numeric(name) {
            Some(a) => (name.to_string(), vec![a]),
            // An IPv6 literal under AF_UNSPEC: libc's.
            None if family == libc::AF_UNSPEC && name.parse::<std::net::Ipv6Addr>().is_ok() => return None,
            None => return Some(libc::EAI_NONAME),
        },
        Some(Ok(name)) if family == libc::AF_UNSPEC && name.parse::<std::net::Ipv6Addr>().is_ok() => return None,
        Some(Ok(name)) => match lookup(name) {
            Ok(f) => (f.canonical, f.addrs),
            Err(f) => return Some(gai_error(f)),
        },
    };
    let kinds: Vec<(c_int, c_int, &CStr)> =
        [(libc::SOCK_STREAM, libc::IPPROTO_TCP, c"tcp"), (libc::SOCK_DGRAM, libc::IPPROTO_UDP, c"udp")]
            .into_iter()
            .filter(|&(t, p, _)| (socktype == 0 || socktype == t) && (protocol == 0 || protocol == p))
            .collect();
    if kinds.is_empty() {
        return Some(libc::EAI_SOCKTYPE);
    }
    let mut entries: Vec<Box<Entry>> = Vec::new();
    for addr in &found.1 {
        for &(t, p, name) in &kinds {
            let port = match service {
                None => 0,
                Some(s) => match port_of(s, name, flags & libc::AI_NUMERICSERV != 0) {
                    Ok(port) => port,
                    // A service one protocol lacks leaves that protocol out.
                    Err(e) if kinds.len() > 1 && e == libc::EAI_SERVICE => continue,
                    Err(e) => return Some(e),
                },
            };
            let mut e = Box::new(Entry {
                ai: unsafe { std::mem::zeroed() },
                sin: sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from(*addr).to_be() },
                    sin_zero: [0; 8],
                },
            });
            e.ai.ai_family = libc::AF_INET;
            e.ai.ai_socktype = t;
            e.ai.ai_protocol = p;
            e.ai.ai_addrlen = std::mem::size_of::<sockaddr_in>() as socklen_t;
            entries.push(e);
        }
    }
    if entries.is_empty() {
        return Some(libc::EAI_SERVICE);
    }
    if flags & libc::AI_CANONNAME != 0 {
        let canonical = if found.0.is_empty() { "localhost".to_string() } else { found.0 };
        entries[0].ai.ai_canonname = CString::new(canonical).map_or(std::ptr::null_mut(), CString::into_raw);
    }
    // Link them, last to first; each entry's address is its own.
    let mut next: *mut addrinfo = std::ptr::null_mut();
    for mut e in entries.into_iter().rev() {
        e.ai.ai_next = next;
        let raw = Box::into_raw(e);
        unsafe { (*raw).ai.ai_addr = (&raw mut (*raw).sin).cast() };
        next = raw.cast();
    }
    LISTS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashSet::new).insert(next as usize);
    unsafe { *res = next };
    Some(0)
}

/// `freeaddrinfo` of a list this resolver made: `true` when it was one
/// (and is freed), `false` to leave it to libc.
///
/// # Safety
/// `list` is what a `getaddrinfo` gave.
pub unsafe fn freeaddrinfo(list: *mut addrinfo) -> bool {
    let _in = Entered::new();
    if !LISTS.lock().unwrap_or_else(|e| e.into_inner()).as_mut().is_some_and(|l| l.remove(&(list as usize))) {
        return false;
    }
    let mut at = list;
    while !at.is_null() {
        let e = unsafe { Box::from_raw(at.cast::<Entry>()) };
        if !e.ai.ai_canonname.is_null() {
            drop(unsafe { CString::from_raw(e.ai.ai_canonname) });
        }
        at = e.ai.ai_next;
    }
    true
}

/// `getnameinfo` of an IPv4 address: its host part from `/etc/hosts`, else
/// DNS through netd (a `PTR` question; failing that, the numeric form, or
/// the failure under `NI_NAMEREQD`), its service part from libc (numeric
/// or `/etc/services`). `None` for another family (libc's).
///
/// # Safety
/// As `getnameinfo(3)`'s arguments.
pub unsafe fn getnameinfo(
    sa: *const libc::sockaddr,
    salen: socklen_t,
    host: *mut c_char,
    hostlen: socklen_t,
    serv: *mut c_char,
    servlen: socklen_t,
    flags: c_int,
) -> Option<c_int> {
    let _in = Entered::new();
    let a = match unsafe { crate::addr::read_v4(sa, salen) } {
        Ok(a) => a,
        Err(libc::EAFNOSUPPORT) => return None,
        Err(_) => return Some(libc::EAI_FAMILY),
    };
    if !serv.is_null() && servlen > 0 {
        let r = unsafe { libc::getnameinfo(sa, salen, std::ptr::null_mut(), 0, serv, servlen, flags) };
        if r != 0 {
            return Some(r);
        }
    }
    if !host.is_null() && hostlen > 0 {
        let name = if flags & libc::NI_NUMERICHOST != 0 { Err(Failure::NoName) } else { reverse(*a.ip()) };
        let name = match name {
            Ok(n) => n,
            Err(f) if flags & libc::NI_NAMEREQD != 0 => return Some(gai_error(f)),
            Err(_) => a.ip().to_string(),
        };
        if name.len() >= hostlen as usize {
            return Some(libc::EAI_OVERFLOW);
        }
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), host.cast::<u8>(), name.len());
            *host.add(name.len()) = 0;
        }
    }
    Some(0)
}

/// The `hostent` of `name`'s addresses laid out in `buf`: the name, a null
/// alias list, the addresses and their pointer list. `Err(ERANGE)` when
/// `buf` is too small; `Ok(Err(h_errno))` when the name has no address.
fn fill_hostent(name: &str, ret: &mut hostent, buf: &mut [u8]) -> Result<Result<(), c_int>, c_int> {
    match lookup(name) {
        Ok(found) => layout_hostent(&found, ret, buf).map(Ok),
        Err(f) => Ok(Err(h_error(f))),
    }
}

/// `netdb.h`'s `h_errno` for a failure.
fn h_error(f: Failure) -> c_int {
    match f {
        Failure::NoName => HOST_NOT_FOUND,
        Failure::Again => TRY_AGAIN,
        Failure::Fail => NO_RECOVERY,
    }
}

/// `found` laid out in `buf` as a `hostent` (see [`fill_hostent`]).
fn layout_hostent(found: &super::Found, ret: &mut hostent, buf: &mut [u8]) -> Result<(), c_int> {
    let ptr = std::mem::size_of::<*mut c_char>();
    let n = found.addrs.len();
    // Pointer lists first (aligned), then the addresses, then the name.
    let start = buf.as_ptr().align_offset(ptr);
    let need = start + ptr * (1 + n + 1) + 4 * n + found.canonical.len() + 1;
    if buf.len() < need {
        return Err(libc::ERANGE);
    }
    let base = buf.as_mut_ptr();
    unsafe {
        let aliases = base.add(start).cast::<*mut c_char>();
        *aliases = std::ptr::null_mut();
        let list = aliases.add(1);
        let addrs = base.add(start + ptr * (n + 2));
        for (i, a) in found.addrs.iter().enumerate() {
            std::ptr::copy_nonoverlapping(a.octets().as_ptr(), addrs.add(4 * i), 4);
            *list.add(i) = addrs.add(4 * i).cast();
        }
        *list.add(n) = std::ptr::null_mut();
        let text = addrs.add(4 * n);
        std::ptr::copy_nonoverlapping(found.canonical.as_ptr(), text, found.canonical.len());
        *text.add(found.canonical.len()) = 0;
        ret.h_name = text.cast();
        ret.h_aliases = aliases;
        ret.h_addrtype = libc::AF_INET;
        ret.h_length = 4;
        ret.h_addr_list = list;
    }
    Ok(())
}

/// `gethostbyname_r`: 0 with `*result` set, or `ERANGE`, or 0 with
/// `*result` null and `*h_errnop` saying why.
///
/// # Safety
/// As `gethostbyname_r(3)`'s arguments.
pub unsafe fn gethostbyname_r(
    name: *const c_char,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: usize,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    let _in = Entered::new();
    if name.is_null() || ret.is_null() || result.is_null() || (buf.is_null() && buflen > 0) {
        return libc::EINVAL;
    }
    unsafe { *result = std::ptr::null_mut() };
    let Ok(name) = unsafe { CStr::from_ptr(name) }.to_str() else {
        if let Some(h) = unsafe { h_errnop.as_mut() } {
            *h = HOST_NOT_FOUND;
        }
        return 0;
    };
    let bytes = if buflen == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(buf.cast(), buflen) } };
    match fill_hostent(name, unsafe { &mut *ret }, bytes) {
        Err(e) => e,
        Ok(Err(h)) => {
            if let Some(p) = unsafe { h_errnop.as_mut() } {
                *p = h;
            }
            0
        }
        Ok(Ok(())) => {
            unsafe { *result = ret };
            0
        }
    }
}

/// `gethostbyaddr_r` of an IPv4 address (`len` 4, `AF_INET`): its name
/// from `/etc/hosts` or DNS through netd, as `gethostbyname_r` answers.
/// `None` for another family (libc's).
///
/// # Safety
/// As `gethostbyaddr_r(3)`'s arguments.
// libc's signature.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gethostbyaddr_r(
    addr: *const libc::c_void,
    len: socklen_t,
    family: c_int,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: usize,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> Option<c_int> {
    let _in = Entered::new();
    if family != libc::AF_INET {
        return None;
    }
    if addr.is_null() || len != 4 || ret.is_null() || result.is_null() || (buf.is_null() && buflen > 0) {
        return Some(libc::EINVAL);
    }
    unsafe { *result = std::ptr::null_mut() };
    let mut octets = [0u8; 4];
    unsafe { std::ptr::copy_nonoverlapping(addr.cast::<u8>(), octets.as_mut_ptr(), 4) };
    let ip = Ipv4Addr::from(octets);
    let bytes = if buflen == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(buf.cast(), buflen) } };
    let laid = match reverse(ip) {
        Ok(name) => layout_hostent(&super::Found { canonical: name, addrs: vec![ip] }, unsafe { &mut *ret }, bytes),
        Err(f) => {
            if let Some(h) = unsafe { h_errnop.as_mut() } {
                *h = h_error(f);
            }
            return Some(0);
        }
    };
    match laid {
        Err(e) => Some(e),
        Ok(()) => {
            unsafe { *result = ret };
            Some(0)
        }
    }
}

thread_local! {
    static HOSTENT: std::cell::RefCell<(hostent, Vec<u8>)> =
        std::cell::RefCell::new((unsafe { std::mem::zeroed() }, vec![0; 2048]));
}

/// `gethostbyname`: the calling thread's `hostent`, good until its next
/// call, or null with `h_errno` set.
///
/// # Safety
/// `name` is a C string.
pub unsafe fn gethostbyname(name: *const c_char) -> *mut hostent {
    HOSTENT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (ent, buf) = &mut *slot;
        let mut result = std::ptr::null_mut();
        let mut h = 0;
        let r = unsafe { gethostbyname_r(name, ent, buf.as_mut_ptr().cast(), buf.len(), &mut result, &mut h) };
        if r != 0 || result.is_null() {
            unsafe { *__h_errno_location() = if r != 0 { NO_RECOVERY } else { h } };
            return std::ptr::null_mut();
        }
        result
    })
}

/// `gethostbyaddr`: the calling thread's `hostent`, good until its next
/// call, or null with `h_errno` set; `None` for another family (libc's).
///
/// # Safety
/// `addr` has `len` readable bytes.
pub unsafe fn gethostbyaddr(addr: *const libc::c_void, len: socklen_t, family: c_int) -> Option<*mut hostent> {
    if family != libc::AF_INET {
        return None;
    }
    Some(HOSTENT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (ent, buf) = &mut *slot;
        let mut result = std::ptr::null_mut();
        let mut h = 0;
        let r =
            unsafe { gethostbyaddr_r(addr, len, family, ent, buf.as_mut_ptr().cast(), buf.len(), &mut result, &mut h) };
        if r != Some(0) || result.is_null() {
            unsafe { *__h_errno_location() = if r == Some(0) { h } else { NO_RECOVERY } };
            return std::ptr::null_mut();
        }
        result
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of a list, as (family, socktype, protocol, address, port).
    fn entries(list: *mut addrinfo) -> Vec<(c_int, c_int, c_int, Ipv4Addr, u16)> {
        let mut v = Vec::new();
        let mut at = list;
        while let Some(ai) = unsafe { at.as_ref() } {
            let sin = unsafe { &*ai.ai_addr.cast::<sockaddr_in>() };
            let a = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            v.push((ai.ai_family, ai.ai_socktype, ai.ai_protocol, a, u16::from_be(sin.sin_port)));
            at = ai.ai_next;
        }
        v
    }

    #[test]
    fn a_numeric_host_and_service_give_a_stream_and_a_datagram_entry() {
        let mut res = std::ptr::null_mut();
        let r = unsafe { getaddrinfo(c"10.1.2.3".as_ptr(), c"8080".as_ptr(), std::ptr::null(), &mut res) };
        assert_eq!(r, Some(0));
        let a = Ipv4Addr::new(10, 1, 2, 3);
        assert_eq!(
            entries(res),
            [
                (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP, a, 8080),
                (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDP, a, 8080)
            ]
        );
        assert!(unsafe { freeaddrinfo(res) });
        assert!(!unsafe { freeaddrinfo(res) }, "freed once, then not ours");
    }

    #[test]
    fn hints_choose_the_kind_and_passive_gives_the_wildcard() {
        let mut hints: addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_socktype = libc::SOCK_STREAM;
        hints.ai_flags = libc::AI_PASSIVE | libc::AI_CANONNAME;
        let mut res = std::ptr::null_mut();
        assert_eq!(unsafe { getaddrinfo(std::ptr::null(), c"80".as_ptr(), &hints, &mut res) }, Some(0));
        assert_eq!(entries(res), [(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP, Ipv4Addr::UNSPECIFIED, 80)]);
        assert!(!unsafe { (*res).ai_canonname }.is_null());
        unsafe { freeaddrinfo(res) };
        hints.ai_flags = libc::AI_NUMERICHOST;
        assert_eq!(
            unsafe { getaddrinfo(c"not-numeric".as_ptr(), std::ptr::null(), &hints, &mut res) },
            Some(libc::EAI_NONAME)
        );
        hints.ai_flags = libc::AI_NUMERICSERV;
        assert_eq!(
            unsafe { getaddrinfo(c"10.0.0.1".as_ptr(), c"http".as_ptr(), &hints, &mut res) },
            Some(libc::EAI_NONAME)
        );
    }

    #[test]
    fn ipv6_literals_are_left_to_libc_and_ipv6_names_have_no_address() {
        let mut hints: addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_family = libc::AF_INET6;
        let mut res = std::ptr::null_mut();
        assert_eq!(unsafe { getaddrinfo(c"::1".as_ptr(), std::ptr::null(), &hints, &mut res) }, None);
        assert_eq!(unsafe { getaddrinfo(std::ptr::null(), c"80".as_ptr(), &hints, &mut res) }, None);
        assert_eq!(
            unsafe { getaddrinfo(c"example.com".as_ptr(), std::ptr::null(), &hints, &mut res) },
            Some(libc::EAI_NONAME),
            "no DNS over the kernel's IPv4"
        );
        assert_eq!(unsafe { getaddrinfo(c"::1".as_ptr(), std::ptr::null(), std::ptr::null(), &mut res) }, None);
        hints.ai_family = libc::AF_UNIX;
        assert_eq!(unsafe { getaddrinfo(c"x".as_ptr(), std::ptr::null(), &hints, &mut res) }, None);
    }

    #[test]
    fn a_hostent_is_laid_out_in_the_buffer_or_erange() {
        let mut ent: hostent = unsafe { std::mem::zeroed() };
        let mut buf = [0u8; 256];
        assert_eq!(fill_hostent("10.9.8.7", &mut ent, &mut buf), Ok(Ok(())));
        let first = unsafe { std::slice::from_raw_parts((*ent.h_addr_list).cast::<u8>(), 4) };
        assert_eq!(first, [10, 9, 8, 7]);
        assert!(unsafe { (*ent.h_addr_list.add(1)).is_null() });
        assert_eq!(unsafe { CStr::from_ptr(ent.h_name) }.to_str(), Ok("10.9.8.7"));
        assert_eq!(fill_hostent("10.9.8.7", &mut ent, &mut buf[..16]), Err(libc::ERANGE));
    }
}
