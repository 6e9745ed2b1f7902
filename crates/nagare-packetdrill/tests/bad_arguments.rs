//! Everything the shim reads from C is checked: bad pointers, lengths and
//! descriptors come back as -1 with errno, never a crash.

mod common;
use common::*;

use libc::{c_int, c_void, iovec, pollfd, sockaddr, socklen_t};
use nagare_packetdrill::abi::PacketdrillInterface;
use nagare_packetdrill::packetdrill_interface_init;
use std::ffi::CString;
use std::net::SocketAddrV4;
use std::ptr::{null, null_mut};

#[test]
fn bad_descriptors_are_ebadf() {
    let pd = Pd::new("");
    for fd in [-1, 0, 1, 2, 3, 99, c_int::MAX] {
        assert_eq!(pd.read(fd, 10), Err(libc::EBADF), "read {fd}");
        assert_eq!(pd.write(fd, b"x"), Err(libc::EBADF), "write {fd}");
        assert_eq!(pd.close(fd), Err(libc::EBADF), "close {fd}");
        assert_eq!(pd.listen(fd, 1), Err(libc::EBADF), "listen {fd}");
        assert_eq!(pd.accept(fd), Err(libc::EBADF), "accept {fd}");
        assert_eq!(pd.get_flags(fd), Err(libc::EBADF), "fcntl {fd}");
        assert_eq!(pd.getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR), Err(libc::EBADF));
    }
    // poll reports a bad descriptor in revents, and ignores a negative one.
    assert_eq!(pd.poll1(77, libc::POLLIN, 0).unwrap(), (1, libc::POLLNVAL));
    assert_eq!(pd.poll1(-1, libc::POLLIN, 0).unwrap(), (0, 0));
}

#[test]
fn null_pointers_and_short_lengths_are_refused() {
    let pd = Pd::new("");
    let ud = pd.ud();
    let fd = pd.socket().unwrap();
    let ifc = &pd.ifc;
    // SAFETY (whole block): every call passes deliberately bad pointers or
    // lengths that the shim must check before touching memory; none of them
    // points at anything invalid that is non-null.
    unsafe {
        assert_eq!((ifc.bind.unwrap())(ud, fd, null(), 16), -1);
        assert_eq!(errno(), libc::EFAULT);
        let sin = sockaddr_of(SocketAddrV4::new(LOCAL, 80));
        assert_eq!((ifc.bind.unwrap())(ud, fd, (&raw const sin).cast::<sockaddr>(), 8), -1);
        assert_eq!(errno(), libc::EINVAL);
        // An IPv6 family with an IPv4 address's length is short.
        let mut short6 = sin;
        short6.sin_family = libc::AF_INET6 as libc::sa_family_t;
        assert_eq!((ifc.connect.unwrap())(ud, fd, (&raw const short6).cast::<sockaddr>(), 16), -1);
        assert_eq!(errno(), libc::EINVAL);
        // A whole IPv6 address on an IPv4 socket, and a family no socket has.
        let mut sin6: libc::sockaddr_in6 = std::mem::zeroed();
        sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sin6.sin6_port = 80u16.to_be();
        sin6.sin6_addr.s6_addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets();
        let len6 = size_of::<libc::sockaddr_in6>() as socklen_t;
        assert_eq!((ifc.connect.unwrap())(ud, fd, (&raw const sin6).cast::<sockaddr>(), len6), -1);
        assert_eq!(errno(), libc::EAFNOSUPPORT);
        let mut unix = sin;
        unix.sin_family = libc::AF_UNIX as libc::sa_family_t;
        assert_eq!((ifc.connect.unwrap())(ud, fd, (&raw const unix).cast::<sockaddr>(), 16), -1);
        assert_eq!(errno(), libc::EAFNOSUPPORT);

        assert_eq!((ifc.read.unwrap())(ud, fd, null_mut(), 10), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!((ifc.write.unwrap())(ud, fd, null(), 10), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!((ifc.writev.unwrap())(ud, fd, null(), 2), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!((ifc.readv.unwrap())(ud, fd, null(), -1), -1);
        assert_eq!(errno(), libc::EINVAL);
        let iov = [iovec { iov_base: null_mut(), iov_len: 5 }];
        assert_eq!((ifc.writev.unwrap())(ud, fd, iov.as_ptr(), 1), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!((ifc.recvmsg.unwrap())(ud, fd, null_mut(), 0), -1);
        assert_eq!(errno(), libc::EFAULT);

        // getsockopt: null value, null length, length too short.
        let mut v: c_int = 0;
        let mut len: socklen_t = 4;
        assert_eq!((ifc.getsockopt.unwrap())(ud, fd, libc::SOL_SOCKET, libc::SO_ERROR, null_mut(), &mut len), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(
            (ifc.getsockopt.unwrap())(ud, fd, libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut v).cast(), null_mut()),
            -1
        );
        assert_eq!(errno(), libc::EFAULT);
        len = 2;
        assert_eq!(
            (ifc.getsockopt.unwrap())(ud, fd, libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut v).cast(), &mut len),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!((ifc.setsockopt.unwrap())(ud, fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, null(), 4), -1);
        assert_eq!(errno(), libc::EFAULT);
        let one: c_int = 1;
        assert_eq!(
            (ifc.setsockopt.unwrap())(ud, fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&raw const one).cast(), 2),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);

        // poll: null array with entries.
        assert_eq!((ifc.poll.unwrap())(ud, null_mut::<pollfd>(), 3, 0), -1);
        assert_eq!(errno(), libc::EFAULT);

        // The device: null buffers, nothing, packets shorter than their
        // version's header, a version that is neither 4 nor 6.
        assert_eq!((ifc.netdev_send.unwrap())(ud, null(), 40), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!((ifc.netdev_send.unwrap())(ud, b"abc".as_ptr().cast(), 0), -1);
        assert_eq!(errno(), libc::EINVAL);
        let short = [0x45u8, 0, 0];
        assert_eq!((ifc.netdev_send.unwrap())(ud, short.as_ptr().cast(), short.len()), -1);
        assert_eq!(errno(), libc::EINVAL);
        let short6 = [0x60u8; 39];
        assert_eq!((ifc.netdev_send.unwrap())(ud, short6.as_ptr().cast(), short6.len()), -1);
        assert_eq!(errno(), libc::EINVAL);
        let v7 = [0x70u8; 60];
        assert_eq!((ifc.netdev_send.unwrap())(ud, v7.as_ptr().cast(), v7.len()), -1);
        assert_eq!(errno(), libc::EINVAL);
        let mut t: i64 = 0;
        assert_eq!((ifc.netdev_receive.unwrap())(ud, null_mut(), null_mut(), &mut t), -1);
        assert_eq!(errno(), libc::EFAULT);
        let mut count: usize = 100;
        assert_eq!((ifc.netdev_receive.unwrap())(ud, null_mut(), &mut count, &mut t), -1);
        assert_eq!(errno(), libc::EFAULT);

        // A null userdata is refused by every call.
        assert_eq!((ifc.socket.unwrap())(null_mut(), libc::AF_INET, libc::SOCK_STREAM, 0), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!((ifc.close.unwrap())(null_mut::<c_void>(), fd), -1);
        assert_eq!(errno(), libc::EINVAL);
        (ifc.free.unwrap())(null_mut());
    }
    // The stack is unharmed.
    assert_eq!(pd.close(fd), Ok(()));
    let (p, _) = Pd::new("sniff_timeout_usecs=1000").sniff();
    assert!(p.is_empty(), "garbage injected nothing");
}

#[test]
fn unsupported_calls_and_options_say_so() {
    let pd = Pd::new("");
    let ud = pd.ud();
    let fd = pd.socket().unwrap();
    assert_eq!(pd.socket_of(libc::AF_UNIX, libc::SOCK_STREAM, 0), Err(libc::EAFNOSUPPORT));
    assert_eq!(pd.socket_of(libc::AF_INET6, libc::SOCK_DGRAM, 0), Err(libc::EPROTONOSUPPORT));
    // IPV6_V6ONLY belongs to AF_INET6 sockets.
    assert_eq!(pd.setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1), Err(libc::ENOPROTOOPT));
    assert_eq!(pd.getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY), Err(libc::ENOPROTOOPT));
    assert_eq!(pd.socket_of(libc::AF_INET, libc::SOCK_DGRAM, 0), Err(libc::EPROTONOSUPPORT));
    assert_eq!(pd.socket_of(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_UDP), Err(libc::EPROTONOSUPPORT));
    assert_eq!(pd.getsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION), Err(libc::ENOPROTOOPT));
    assert_eq!(pd.setsockopt_int(fd, libc::SOL_IP, libc::IP_TOS, 1), Err(libc::ENOPROTOOPT));
    assert_eq!(pd.shutdown(fd, 7), Err(libc::EINVAL));
    assert_eq!(pd.shutdown(fd, libc::SHUT_WR), Err(libc::ENOTCONN));
    assert_eq!(pd.read(fd, 1), Err(libc::ENOTCONN));
    let ifc = &pd.ifc;
    // SAFETY (whole block): calls the shim must refuse without reading
    // their pointer arguments.
    unsafe {
        assert_eq!((ifc.epoll_create.unwrap())(ud, 1), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!((ifc.epoll_ctl.unwrap())(ud, 5, 1, fd, null_mut()), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!((ifc.epoll_wait.unwrap())(ud, 5, null_mut(), 1, 0), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let mut fds = [0 as c_int; 2];
        assert_eq!((ifc.pipe.unwrap())(ud, fds.as_mut_ptr()), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!((ifc.splice.unwrap())(ud, 3, null_mut(), 4, null_mut(), 10, 0), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!((ifc.ioctl.unwrap())(ud, fd, libc::SIOCGIFMTU as libc::c_ulong, null_mut::<c_void>()), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!((ifc.ioctl.unwrap())(ud, fd, libc::FIONREAD as libc::c_ulong, null_mut::<c_void>()), -1);
        assert_eq!(errno(), libc::EFAULT);
        let mut n: c_int = -1;
        assert_eq!((ifc.ioctl.unwrap())(ud, fd, libc::FIONREAD as libc::c_ulong, &raw mut n), 0);
        assert_eq!(n, 0);
        assert_eq!((ifc.fcntl.unwrap())(ud, fd, libc::F_DUPFD, 10), -1);
        assert_eq!(errno(), libc::EINVAL);
        let mut flags = [0u8; 8];
        assert_eq!((ifc.recv.unwrap())(ud, fd, flags.as_mut_ptr().cast(), 8, libc::MSG_PEEK), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }
}

#[test]
fn init_refuses_bad_flags_and_null_table() {
    let mut ifc = PacketdrillInterface::zeroed();
    let flags = CString::new("local_ip=not-an-address").unwrap();
    // SAFETY: valid string, writable table.
    unsafe { packetdrill_interface_init(flags.as_ptr(), &mut ifc) };
    assert!(ifc.userdata.is_null() && ifc.socket.is_none(), "bad flags leave the table empty");
    let flags = CString::new("no_such_key=1").unwrap();
    // SAFETY: as above.
    unsafe { packetdrill_interface_init(flags.as_ptr(), &mut ifc) };
    assert!(ifc.socket.is_none());
    // SAFETY: null table and null flags are checked for.
    unsafe { packetdrill_interface_init(null(), null_mut()) };
    // Null flags mean the defaults.
    // SAFETY: writable table.
    unsafe { packetdrill_interface_init(null(), &mut ifc) };
    assert!(ifc.socket.is_some());
    // SAFETY: the userdata just created, freed once.
    unsafe { (ifc.free.unwrap())(ifc.userdata) };
}

#[test]
fn accept_with_a_short_address_buffer_truncates_like_the_kernel() {
    let pd = Pd::new("");
    let lfd = listener(&pd, 8080);
    handshake(&pd, 40000, 8080, 1);
    let mut buf = [0xaau8; 16];
    let mut len: socklen_t = 4;
    // SAFETY: `buf` has 16 bytes, `len` says 4.
    let fd = unsafe { (pd.ifc.accept.unwrap())(pd.ud(), lfd, buf.as_mut_ptr().cast(), &mut len) };
    assert!(fd >= 0);
    assert_eq!(len, 16, "full length reported");
    assert_eq!(&buf[2..4], &40000u16.to_be_bytes(), "port written");
    assert_eq!(buf[4], 0xaa, "nothing past the room given");
    // A null address with a length is fine; an address without one is not.
    handshake(&pd, 40001, 8080, 1);
    // SAFETY: null address and length.
    assert!(unsafe { (pd.ifc.accept.unwrap())(pd.ud(), lfd, null_mut(), null_mut()) } >= 0);
    // SAFETY: an address with a null length must be refused unread.
    assert_eq!(unsafe { (pd.ifc.accept.unwrap())(pd.ud(), lfd, buf.as_mut_ptr().cast(), null_mut()) }, -1);
    assert_eq!(errno(), libc::EFAULT);
}
