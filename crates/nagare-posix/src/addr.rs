//! `struct sockaddr_in` and `struct sockaddr_in6` in and out, within the
//! lengths the caller gives.

use crate::Res;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

const SIN_LEN: usize = std::mem::size_of::<libc::sockaddr_in>();
const SIN6_LEN: usize = std::mem::size_of::<libc::sockaddr_in6>();

/// The IPv4 address at `addr` (`len` bytes): `EINVAL` if too short or
/// null, `EAFNOSUPPORT` if of another family.
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
pub(crate) unsafe fn read_v4(addr: *const libc::sockaddr, len: libc::socklen_t) -> Res<SocketAddrV4> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    let family = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) };
    if i32::from(family) != libc::AF_INET {
        return Err(libc::EAFNOSUPPORT);
    }
    if (len as usize) < SIN_LEN {
        return Err(libc::EINVAL);
    }
    let sin = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
    Ok(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port)))
}

/// The address at `addr` (`len` bytes) for a socket of family `AF_INET6`
/// (`six`: a `sockaddr_in6`, whose flow label and scope are ignored) or
/// `AF_INET` (a `sockaddr_in`): `EINVAL` if too short or null,
/// `EAFNOSUPPORT` if of the other family.
///
/// # Safety
/// As [`read_v4`].
pub(crate) unsafe fn read_addr(addr: *const libc::sockaddr, len: libc::socklen_t, six: bool) -> Res<SocketAddr> {
    if !six {
        return unsafe { read_v4(addr, len) }.map(SocketAddr::V4);
    }
    if unsafe { family(addr, len) }.ok_or(libc::EINVAL)? != libc::AF_INET6 {
        return Err(libc::EAFNOSUPPORT);
    }
    if (len as usize) < SIN6_LEN {
        return Err(libc::EINVAL);
    }
    let sin6 = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
    let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
    Ok(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), 0, 0)))
}

/// Writes `a` as a socket of family `AF_INET6` (`six`) reports it: a
/// `sockaddr_in6`, an IPv4 address mapped; otherwise as [`write_v4`].
///
/// # Safety
/// As [`write_v4`].
pub(crate) unsafe fn write_addr(
    a: SocketAddr,
    six: bool,
    out: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> Res<()> {
    if !six {
        return unsafe { write_v4(a, out, len) };
    }
    if out.is_null() {
        return Ok(());
    }
    if len.is_null() {
        return Err(libc::EFAULT);
    }
    let (ip, port) = match a {
        SocketAddr::V4(a) => (a.ip().to_ipv6_mapped(), a.port()),
        SocketAddr::V6(a) => (*a.ip(), a.port()),
    };
    // SAFETY: sockaddr_in6 is plain data; all-zero is a valid value.
    let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_port = port.to_be();
    sin6.sin6_addr.s6_addr = ip.octets();
    let room = unsafe { *len } as usize;
    let n = room.min(SIN6_LEN);
    unsafe {
        std::ptr::copy_nonoverlapping((&raw const sin6).cast::<u8>(), out.cast::<u8>(), n);
        *len = SIN6_LEN as libc::socklen_t;
    }
    Ok(())
}

/// The family at `addr`, if `len` holds one.
///
/// # Safety
/// As [`read_v4`].
pub(crate) unsafe fn family(addr: *const libc::sockaddr, len: libc::socklen_t) -> Option<i32> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    Some(i32::from(unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) }))
}

/// Writes `a` to `out` as `getsockname` does: at most `*len` bytes, and
/// `*len` set to the whole address's length. Null `out` writes nothing.
///
/// # Safety
/// `out` is null, or `len` is valid and `out` has `*len` writable bytes.
pub(crate) unsafe fn write_v4(a: SocketAddr, out: *mut libc::sockaddr, len: *mut libc::socklen_t) -> Res<()> {
    if out.is_null() {
        return Ok(());
    }
    if len.is_null() {
        return Err(libc::EFAULT);
    }
    let a = match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => return Err(libc::EAFNOSUPPORT),
    };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    };
    let room = unsafe { *len } as usize;
    let n = room.min(SIN_LEN);
    unsafe {
        std::ptr::copy_nonoverlapping((&raw const sin).cast::<u8>(), out.cast::<u8>(), n);
        *len = SIN_LEN as libc::socklen_t;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_goes_out_and_comes_back() {
        let a: SocketAddrV4 = "10.1.2.3:8080".parse().unwrap();
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        unsafe { write_v4(SocketAddr::V4(a), (&raw mut storage).cast(), &mut len).unwrap() };
        assert_eq!(len as usize, SIN_LEN);
        assert_eq!(unsafe { read_v4((&raw const storage).cast(), len) }, Ok(a));
    }

    #[test]
    fn short_foreign_and_null_addresses_are_refused() {
        let a: SocketAddrV4 = "10.1.2.3:80".parse().unwrap();
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = SIN_LEN as libc::socklen_t;
        unsafe { write_v4(SocketAddr::V4(a), (&raw mut storage).cast(), &mut len).unwrap() };
        assert_eq!(unsafe { read_v4((&raw const storage).cast(), 8) }, Err(libc::EINVAL));
        assert_eq!(unsafe { read_v4(std::ptr::null(), 16) }, Err(libc::EINVAL));
        storage.ss_family = libc::AF_INET6 as libc::sa_family_t;
        assert_eq!(unsafe { read_v4((&raw const storage).cast(), 28) }, Err(libc::EAFNOSUPPORT));
    }

    #[test]
    fn ipv6_addresses_go_out_and_come_back_and_ipv4_ones_go_out_mapped() {
        let a: SocketAddr = "[fd00::7]:8443".parse().unwrap();
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        unsafe { write_addr(a, true, (&raw mut storage).cast(), &mut len).unwrap() };
        assert_eq!(len as usize, SIN6_LEN);
        assert_eq!(unsafe { read_addr((&raw const storage).cast(), len, true) }, Ok(a));
        assert_eq!(unsafe { read_addr((&raw const storage).cast(), 24, true) }, Err(libc::EINVAL), "short");
        assert_eq!(unsafe { read_addr((&raw const storage).cast(), len, false) }, Err(libc::EAFNOSUPPORT));
        let four: SocketAddr = "10.1.2.3:80".parse().unwrap();
        unsafe { write_addr(four, true, (&raw mut storage).cast(), &mut len).unwrap() };
        let back = unsafe { read_addr((&raw const storage).cast(), len, true) }.unwrap();
        assert_eq!(back, "[::ffff:10.1.2.3]:80".parse::<SocketAddr>().unwrap());
        unsafe { write_addr(four, false, (&raw mut storage).cast(), &mut len).unwrap() };
        assert_eq!(unsafe { read_addr((&raw const storage).cast(), len, true) }, Err(libc::EAFNOSUPPORT));
    }

    #[test]
    fn a_short_buffer_gets_part_of_the_address_and_the_whole_length() {
        let a: SocketAddrV4 = "10.1.2.3:80".parse().unwrap();
        let mut out = [0xAAu8; 4];
        let mut len = 4 as libc::socklen_t;
        unsafe { write_v4(SocketAddr::V4(a), out.as_mut_ptr().cast(), &mut len).unwrap() };
        assert_eq!(len as usize, SIN_LEN);
        assert_eq!(&out[2..4], &80u16.to_be_bytes());
    }
}
