//! Initial sequence numbers (RFC 6528) and SYN cookies.
//!
//! ISN = M + F(local, remote, secret): M is a clock ticking every 4 µs so
//! consecutive incarnations of a connection move forward, F a keyed hash so
//! an off-path attacker cannot predict the ISN of a connection it cannot see.

use super::sockets::four_tuple_hasher;
use crate::hash::SipKey;
use crate::time::Instant;
use core::hash::Hasher;
use core::net::SocketAddr;
use nagare_wire::TcpSeqNumber;

fn four_tuple_hash(key: SipKey, local: SocketAddr, remote: SocketAddr, extra: u32) -> u32 {
    let mut h = four_tuple_hasher(key, local, remote);
    h.write(&extra.to_be_bytes());
    h.finish() as u32
}

/// RFC 6528's initial sequence number for a connection.
pub fn initial_sequence_number(key: SipKey, local: SocketAddr, remote: SocketAddr, now: Instant) -> TcpSeqNumber {
    let m = (now.total_micros() / 4) as u32;
    TcpSeqNumber(m.wrapping_add(four_tuple_hash(key, local, remote, 0)))
}

/// MSS values a SYN cookie can encode (3 bits), from the common ones up.
const COOKIE_MSS: [u16; 8] = [536, 1220, 1300, 1440, 1460, 4312, 8960, 65495];

/// The cookie clock: one tick every 64 seconds; a cookie is valid for the
/// tick it was made in and the one before.
fn cookie_tick(now: Instant) -> u32 {
    (now.total_micros() / 64_000_000) as u32
}

/// What a SYN cookie remembers of the SYN it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieContents {
    /// The peer's MSS, rounded down to a value the cookie can encode.
    pub mss: u16,
}

/// The ISN of a SYN-ACK sent without keeping state (the SYN queue is
/// full): 24 bits of keyed hash over the four-tuple, the peer's ISN and
/// the time, 5 bits of time and 3 bits of MSS index.
pub fn make_syn_cookie(
    key: SipKey,
    local: SocketAddr,
    remote: SocketAddr,
    peer_isn: TcpSeqNumber,
    peer_mss: u16,
    now: Instant,
) -> TcpSeqNumber {
    let tick = cookie_tick(now);
    let mss_index = COOKIE_MSS.iter().rposition(|&m| m <= peer_mss).unwrap_or(0) as u32;
    let mac = four_tuple_hash(key, local, remote, peer_isn.0 ^ tick.rotate_left(16)) & 0x00ff_ffff;
    TcpSeqNumber(((tick & 0x1f) << 27) | (mss_index << 24) | mac)
}

/// Checks the cookie acknowledged by `ack` (our ISN + 1) for the
/// connection whose peer ISN was `ack_seq - 1`.
pub fn check_syn_cookie(
    key: SipKey,
    local: SocketAddr,
    remote: SocketAddr,
    peer_isn: TcpSeqNumber,
    cookie: TcpSeqNumber,
    now: Instant,
) -> Option<CookieContents> {
    let now_tick = cookie_tick(now);
    let cookie_tick_bits = cookie.0 >> 27;
    let mss_index = ((cookie.0 >> 24) & 0x7) as usize;
    for age in 0..2u32 {
        let tick = now_tick.wrapping_sub(age);
        if tick & 0x1f != cookie_tick_bits {
            continue;
        }
        let mac = four_tuple_hash(key, local, remote, peer_isn.0 ^ tick.rotate_left(16)) & 0x00ff_ffff;
        if mac == cookie.0 & 0x00ff_ffff {
            return COOKIE_MSS.get(mss_index).map(|&mss| CookieContents { mss });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4};

    fn ends() -> (SocketAddr, SocketAddr) {
        let local = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
        (local.into(), SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000).into())
    }

    #[test]
    fn isn_moves_with_time_and_depends_on_tuple_and_key() {
        let (l, r) = ends();
        let key = SipKey::from_seed(1);
        let a = initial_sequence_number(key, l, r, Instant::from_micros(0));
        let b = initial_sequence_number(key, l, r, Instant::from_micros(400));
        assert_eq!(b.0.wrapping_sub(a.0), 100);
        let other_port = SocketAddr::new(r.ip(), 40001);
        assert_ne!(initial_sequence_number(key, l, other_port, Instant::ZERO), a);
        assert_ne!(initial_sequence_number(SipKey::from_seed(2), l, r, Instant::ZERO), a);
    }

    #[test]
    fn cookies_round_trip_and_expire() {
        let (l, r) = ends();
        let key = SipKey::from_seed(9);
        let peer = TcpSeqNumber(123_456);
        let t0 = Instant::from_secs(1000);
        let cookie = make_syn_cookie(key, l, r, peer, 1460, t0);
        assert_eq!(check_syn_cookie(key, l, r, peer, cookie, t0), Some(CookieContents { mss: 1460 }));
        assert_eq!(
            check_syn_cookie(key, l, r, peer, cookie, Instant::from_secs(1000 + 64)),
            Some(CookieContents { mss: 1460 })
        );
        assert_eq!(check_syn_cookie(key, l, r, peer, cookie, Instant::from_secs(1000 + 200)), None);
        assert_eq!(check_syn_cookie(key, l, r, TcpSeqNumber(1), cookie, t0), None);
        assert_eq!(check_syn_cookie(key, l, r, peer, cookie + 1, t0), None);
        let small = make_syn_cookie(key, l, r, peer, 1000, t0);
        assert_eq!(check_syn_cookie(key, l, r, peer, small, t0), Some(CookieContents { mss: 536 }));
    }

    #[test]
    fn ipv6_four_tuples_get_cookies_of_their_own() {
        let (l4, r4) = ends();
        let l: SocketAddr = (Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 80).into();
        let r: SocketAddr = (Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2), 40000).into();
        let key = SipKey::from_seed(9);
        let peer = TcpSeqNumber(7);
        let t0 = Instant::from_secs(50);
        let cookie = make_syn_cookie(key, l, r, peer, 1220, t0);
        assert_eq!(check_syn_cookie(key, l, r, peer, cookie, t0), Some(CookieContents { mss: 1220 }));
        assert_eq!(check_syn_cookie(key, l4, r4, peer, cookie, t0), None);
        let other: SocketAddr = (Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3), 40000).into();
        assert_eq!(check_syn_cookie(key, l, other, peer, cookie, t0), None);
        assert_ne!(initial_sequence_number(key, l, r, t0), initial_sequence_number(key, l, other, t0));
    }
}
