//! `struct sockaddr_in` in and out, within the lengths the caller gives.

use crate::Res;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

const SIN_LEN: usize = std::mem::size_of::<libc::sockaddr_in>();

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
    fn a_short_buffer_gets_part_of_the_address_and_the_whole_length() {
        let a: SocketAddrV4 = "10.1.2.3:80".parse().unwrap();
        let mut out = [0xAAu8; 4];
        let mut len = 4 as libc::socklen_t;
        unsafe { write_v4(SocketAddr::V4(a), out.as_mut_ptr().cast(), &mut len).unwrap() };
        assert_eq!(len as usize, SIN_LEN);
        assert_eq!(&out[2..4], &80u16.to_be_bytes());
    }
}
