//! Name lookups: IPv4 ones are `nagare_posix`'s (its resolver asks DNS
//! through netd); the rest are libc's.

use crate::next::next;
use libc::{addrinfo, c_char, c_int, hostent, sockaddr, socklen_t};
use nagare_posix as posix;

#[no_mangle]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> c_int {
    if !posix::Entered::inside() {
        if let Some(code) = unsafe { posix::getaddrinfo(node, service, hints, res) } {
            return code;
        }
    }
    unsafe {
        next!(getaddrinfo: fn(*const c_char, *const c_char, *const addrinfo, *mut *mut addrinfo) -> c_int)(
            node, service, hints, res,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn freeaddrinfo(list: *mut addrinfo) {
    if list.is_null() || unsafe { posix::freeaddrinfo(list) } {
        return;
    }
    unsafe { next!(freeaddrinfo: fn(*mut addrinfo) -> ())(list) }
}

#[no_mangle]
pub unsafe extern "C" fn getnameinfo(
    sa: *const sockaddr,
    salen: socklen_t,
    host: *mut c_char,
    hostlen: socklen_t,
    serv: *mut c_char,
    servlen: socklen_t,
    flags: c_int,
) -> c_int {
    if !posix::Entered::inside() {
        if let Some(code) = unsafe { posix::getnameinfo(sa, salen, host, hostlen, serv, servlen, flags) } {
            return code;
        }
    }
    unsafe {
        next!(getnameinfo: fn(*const sockaddr, socklen_t, *mut c_char, socklen_t, *mut c_char, socklen_t, c_int) -> c_int)(
            sa, salen, host, hostlen, serv, servlen, flags,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn gethostbyname(name: *const c_char) -> *mut hostent {
    unsafe { posix::gethostbyname(name) }
}

#[no_mangle]
pub unsafe extern "C" fn gethostbyname_r(
    name: *const c_char,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: libc::size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    unsafe { posix::gethostbyname_r(name, ret, buf, buflen, result, h_errnop) }
}

extern "C" {
    fn __h_errno_location() -> *mut c_int;
}

/// `netdb.h`'s `HOST_NOT_FOUND`.
const HOST_NOT_FOUND: c_int = 1;

/// Whether `name` is an IPv6 literal (which libc turns into an address
/// without DNS).
unsafe fn ipv6_literal(name: *const c_char) -> bool {
    !name.is_null()
        && unsafe { std::ffi::CStr::from_ptr(name) }.to_str().is_ok_and(|n| n.parse::<std::net::Ipv6Addr>().is_ok())
}

// An IPv6 name has no address here: libc would ask DNS over the kernel's
// IPv4. Another family's literal is libc's.

#[no_mangle]
pub unsafe extern "C" fn gethostbyname2(name: *const c_char, af: c_int) -> *mut hostent {
    if af == libc::AF_INET6 && !unsafe { ipv6_literal(name) } {
        unsafe { *__h_errno_location() = HOST_NOT_FOUND };
        return std::ptr::null_mut();
    }
    if af != libc::AF_INET {
        return unsafe { next!(gethostbyname2: fn(*const c_char, c_int) -> *mut hostent)(name, af) };
    }
    unsafe { posix::gethostbyname(name) }
}

#[no_mangle]
pub unsafe extern "C" fn gethostbyname2_r(
    name: *const c_char,
    af: c_int,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: libc::size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    if af == libc::AF_INET6 && !unsafe { ipv6_literal(name) } {
        if let Some(h) = unsafe { h_errnop.as_mut() } {
            *h = HOST_NOT_FOUND;
        }
        if let Some(r) = unsafe { result.as_mut() } {
            *r = std::ptr::null_mut();
        }
        return 0;
    }
    if af != libc::AF_INET {
        return unsafe {
            next!(gethostbyname2_r: fn(*const c_char, c_int, *mut hostent, *mut c_char, libc::size_t, *mut *mut hostent, *mut c_int) -> c_int)(
                name, af, ret, buf, buflen, result, h_errnop,
            )
        };
    }
    unsafe { posix::gethostbyname_r(name, ret, buf, buflen, result, h_errnop) }
}

#[no_mangle]
pub unsafe extern "C" fn gethostbyaddr(addr: *const libc::c_void, len: socklen_t, family: c_int) -> *mut hostent {
    if !posix::Entered::inside() {
        if let Some(ent) = unsafe { posix::gethostbyaddr(addr, len, family) } {
            return ent;
        }
    }
    unsafe { next!(gethostbyaddr: fn(*const libc::c_void, socklen_t, c_int) -> *mut hostent)(addr, len, family) }
}

#[no_mangle]
pub unsafe extern "C" fn gethostbyaddr_r(
    addr: *const libc::c_void,
    len: socklen_t,
    family: c_int,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: libc::size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    if !posix::Entered::inside() {
        if let Some(code) = unsafe { posix::gethostbyaddr_r(addr, len, family, ret, buf, buflen, result, h_errnop) } {
            return code;
        }
    }
    unsafe {
        next!(gethostbyaddr_r: fn(*const libc::c_void, socklen_t, c_int, *mut hostent, *mut c_char, libc::size_t, *mut *mut hostent, *mut c_int) -> c_int)(
            addr, len, family, ret, buf, buflen, result, h_errnop,
        )
    }
}
