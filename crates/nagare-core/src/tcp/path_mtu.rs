//! TCP's part in path MTU discovery: checking that a "fragmentation
//! needed" or "packet too big" message quotes a segment one of our
//! connections has in flight (RFC 5927 4.1), lowering the send MSS of
//! every connection to a destination whose path MTU went down, and
//! raising it again when that path MTU expires.

use super::sockets::{FourTuple, TcpHandle};
use crate::iface::Interface;
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};
use nagare_wire::{TcpSeqNumber, IPV4_HEADER_LEN, IPV6_HEADER_LEN, TCP_HEADER_LEN};

/// The segment payload and options a path of `mtu` carries to `dst`.
fn mss_for_path_mtu(dst: IpAddr, mtu: usize) -> usize {
    let ip_header = if dst.is_ipv6() { IPV6_HEADER_LEN } else { IPV4_HEADER_LEN };
    mtu.saturating_sub(ip_header + TCP_HEADER_LEN)
}

impl Interface {
    /// Whether `local`'s connection to `remote` exists and has sent
    /// `seq` without its acknowledgement yet.
    pub(crate) fn tcp_quote_in_flight(&self, local: SocketAddr, remote: SocketAddr, seq: TcpSeqNumber) -> bool {
        let Some(&handle) = self.tcp.by_tuple.get(&FourTuple(local, remote)) else {
            return false;
        };
        self.tcp.conns.get(handle.0).is_some_and(|e| e.conn.sent_unacknowledged(seq))
    }

    /// The path MTU to `dst` went down to `mtu`: each connection to it
    /// sends smaller segments from now on, what it had in flight again.
    /// The connections are found by a scan of the table, which only a
    /// checked message that lowered the cache starts, once per lowering.
    pub(crate) fn tcp_path_mtu_lowered(&mut self, dst: IpAddr, mtu: usize, now: Instant) {
        let mss = mss_for_path_mtu(dst, mtu);
        let handles: Vec<TcpHandle> =
            self.tcp.by_tuple.iter().filter(|(FourTuple(_, remote), _)| remote.ip() == dst).map(|(_, &h)| h).collect();
        for handle in handles {
            let lowered = self.tcp.conns.get_mut(handle.0).is_some_and(|e| e.conn.path_mss_lowered(mss));
            if lowered {
                self.counters.tcp_path_mss_lowered += 1;
                self.tcp_run(handle, now);
            }
        }
    }
}

impl Interface {
    /// The path MTU to `dst` is `mtu` again (a lowered one expired): each
    /// connection to it may send segments that large from now on, as far
    /// as the peer's MSS allows. Found by a scan of the table, once per
    /// expired entry.
    pub(crate) fn tcp_path_mtu_raised(&mut self, dst: IpAddr, mtu: usize) {
        let mss = mss_for_path_mtu(dst, mtu);
        let handles: Vec<TcpHandle> =
            self.tcp.by_tuple.iter().filter(|(FourTuple(_, remote), _)| remote.ip() == dst).map(|(_, &h)| h).collect();
        for handle in handles {
            if self.tcp.conns.get_mut(handle.0).is_some_and(|e| e.conn.path_mss_raised(mss)) {
                self.counters.tcp_path_mss_raised += 1;
            }
        }
    }
}

/// The send MSS limit a new connection to `remote` starts with: what the
/// path MTU cache holds for its address, if anything.
pub(super) fn cached_path_mss(iface: &Interface, remote: SocketAddr, now: Instant) -> Option<usize> {
    iface.pmtu.get(remote.ip(), now).map(|mtu| mss_for_path_mtu(remote.ip(), mtu))
}
