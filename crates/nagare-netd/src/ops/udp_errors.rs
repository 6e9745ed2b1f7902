//! The ICMP errors the engine keeps for a UDP socket, as the errno its
//! next call fails with: Linux's choice for a socket without
//! `IP_RECVERR` (`__udp4_lib_err`, `__udp6_lib_err`), which reports only
//! a hard error, and only to a connected socket. A soft one (network or
//! host unreachable, time exceeded, an unreachable code it does not know
//! over IPv4) is dropped, as Linux leaves it to the error queue nobody
//! reads.

use nagare_core::icmp::IcmpError;

/// The errno a connected socket reports for `error`, if it is a hard one.
pub(super) fn hard_errno(error: IcmpError) -> Option<i32> {
    match error {
        IcmpError::Unreachable { code, .. } => unreachable4(code),
        IcmpError::Unreachable6 { code, .. } => unreachable6(code),
        // A path MTU lowered: hard while path MTU discovery is on, as it
        // is by default.
        IcmpError::PacketTooBig6 { .. } => Some(libc::EMSGSIZE),
        IcmpError::TimeExceeded { .. } | IcmpError::TimeExceeded6 { .. } => None,
    }
}

/// ICMP destination unreachable, by code (Linux's `icmp_err_convert`,
/// its fatal entries; fragmentation needed is `EMSGSIZE`, hard while
/// path MTU discovery is on).
fn unreachable4(code: u8) -> Option<i32> {
    Some(match code {
        2 => libc::ENOPROTOOPT,
        3 => libc::ECONNREFUSED,
        4 => libc::EMSGSIZE,
        6 | 9 => libc::ENETUNREACH,
        7 => libc::EHOSTDOWN,
        8 => libc::ENONET,
        10 | 13..=15 => libc::EHOSTUNREACH,
        // Network or host unreachable (for its type of service too), a
        // source route failed, and codes past the table: soft.
        _ => return None,
    })
}

/// ICMPv6 destination unreachable, by code (Linux's
/// `icmpv6_err_convert`: a code past its table is `EPROTO`, hard).
fn unreachable6(code: u8) -> Option<i32> {
    Some(match code {
        // No route, beyond the source's scope, address unreachable: soft.
        0 | 2 | 3 => return None,
        1 | 5 | 6 => libc::EACCES,
        4 => libc::ECONNREFUSED,
        _ => libc::EPROTO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const FROM: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const FROM6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

    #[test]
    fn port_unreachable_is_refused_in_both_families() {
        assert_eq!(hard_errno(IcmpError::Unreachable { from: FROM, code: 3 }), Some(libc::ECONNREFUSED));
        assert_eq!(hard_errno(IcmpError::Unreachable6 { from: FROM6, code: 4 }), Some(libc::ECONNREFUSED));
    }

    #[test]
    fn soft_errors_are_not_reported() {
        for code in [0, 1, 5, 11, 12, 16, 255] {
            assert_eq!(hard_errno(IcmpError::Unreachable { from: FROM, code }), None, "code {code}");
        }
        for code in [0, 2, 3] {
            assert_eq!(hard_errno(IcmpError::Unreachable6 { from: FROM6, code }), None, "code {code}");
        }
        assert_eq!(hard_errno(IcmpError::TimeExceeded { from: FROM, code: 0 }), None);
        assert_eq!(hard_errno(IcmpError::TimeExceeded6 { from: FROM6, code: 0 }), None);
    }

    #[test]
    fn hard_errors_map_as_linux_maps_them() {
        let four = [
            (2, libc::ENOPROTOOPT),
            (4, libc::EMSGSIZE),
            (6, libc::ENETUNREACH),
            (7, libc::EHOSTDOWN),
            (8, libc::ENONET),
            (9, libc::ENETUNREACH),
            (10, libc::EHOSTUNREACH),
            (13, libc::EHOSTUNREACH),
            (15, libc::EHOSTUNREACH),
        ];
        for (code, errno) in four {
            assert_eq!(hard_errno(IcmpError::Unreachable { from: FROM, code }), Some(errno), "code {code}");
        }
        for (code, errno) in [(1, libc::EACCES), (5, libc::EACCES), (6, libc::EACCES), (7, libc::EPROTO)] {
            assert_eq!(hard_errno(IcmpError::Unreachable6 { from: FROM6, code }), Some(errno), "code {code}");
        }
        assert_eq!(hard_errno(IcmpError::PacketTooBig6 { from: FROM6, mtu: 1280 }), Some(libc::EMSGSIZE));
    }
}
