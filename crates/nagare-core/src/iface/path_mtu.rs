//! Path MTU discovery on the interface (RFC 1191, RFC 8201): ICMP
//! "fragmentation needed" and ICMPv6 "packet too big" messages, checked
//! against what we sent (RFC 5927), lower the path MTU cache's entry for
//! the quoted destination, never below the family's floor nor above the
//! link MTU; TCP connections to it follow, and datagrams to it are
//! fragmented to fit it. An entry expires a while after its last
//! decrease (`InterfaceConfig::pmtu_expiry`, RFC 1191 6.3, RFC 8201 4):
//! the path MTU is the link's again, and TCP connections follow it up.

use super::quote::Quoted6;
use super::read::be16;
use super::Interface;
use crate::buf::PacketBuf;
use crate::icmp::ICMP_ECHO_REQUEST;
use crate::pmtu::{plateau_below, IPV4_MIN_PATH_MTU};
use crate::time::Instant;
use core::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use nagare_wire::{
    Icmpv6Message, IpProtocol, Ipv4Packet, TcpSeqNumber, ICMPV4_HEADER_LEN, IPV4_HEADER_LEN, IPV6_MIN_MTU,
};

/// The big-endian `u32` at `at`, or 0 past the end of `bytes`.
fn be32(bytes: &[u8], at: usize) -> u32 {
    match bytes.get(at..at + 4) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

impl Interface {
    /// The MTU of the path to `dst`: the link's for its family, or lower
    /// where a router said so within the last
    /// [`PMTU_EXPIRY`](crate::pmtu::PMTU_EXPIRY).
    pub fn path_mtu(&self, dst: IpAddr, now: Instant) -> usize {
        let link = self.link_mtu(dst);
        self.pmtu.get(dst, now).map_or(link, |mtu| mtu.min(link))
    }

    /// Destinations in the path MTU cache.
    pub fn path_mtu_cache_len(&self) -> usize {
        self.pmtu.len()
    }

    /// The link MTU for `dst`'s family (for IPv6, a router may have
    /// lowered it).
    fn link_mtu(&self, dst: IpAddr) -> usize {
        match dst {
            IpAddr::V4(_) => self.caps.mtu,
            IpAddr::V6(_) => self.ipv6_mtu(),
        }
    }

    /// An ICMP "fragmentation needed and DF set" (type 3, code 4) whose
    /// 8-byte `header` carries the next hop's MTU, in `message` (header
    /// and quote). A router that leaves the MTU out (0, before RFC 1191)
    /// is taken to mean the plateau below the quoted datagram's length.
    pub(crate) fn receive_frag_needed(&mut self, header: &[u8; 8], message: &PacketBuf, now: Instant) {
        let mut quote = [0u8; 60 + 8];
        let n = message.copy_out(ICMPV4_HEADER_LEN, &mut quote);
        let quote = &quote[..n];
        let view = Ipv4Packet::new_unchecked(quote);
        let header_len = view.header_len();
        if n < IPV4_HEADER_LEN || view.version() != 4 || header_len < IPV4_HEADER_LEN || n < header_len + 8 {
            self.counters.drop_pmtu_unverified += 1;
            return;
        }
        let (src, dst) = (view.src_addr(), view.dst_addr());
        // Only datagrams sent with DF draw this message, and only a first
        // fragment shows whose it was.
        let ours = self.has_address(src)
            && view.dont_frag()
            && view.frag_offset() == 0
            && self.quote_is_ours(IpAddr::V4(src), IpAddr::V4(dst), view.protocol(), &quote[header_len..]);
        if !ours {
            self.counters.drop_pmtu_unverified += 1;
            return;
        }
        let claim = match be16(header, 6) {
            0 => plateau_below(usize::from(view.total_len())),
            mtu => usize::from(mtu),
        };
        if claim < IPV4_MIN_PATH_MTU {
            self.counters.drop_pmtu_below_floor += 1;
            return;
        }
        self.lower_path_mtu(IpAddr::V4(dst), claim, now);
    }

    /// An ICMPv6 "packet too big" whose 8-byte `header` carries the next
    /// hop's MTU, in `message` (header and quote). A claim below IPv6's
    /// minimum MTU is taken as that minimum, which every link carries
    /// (RFC 8201 4).
    pub(super) fn receive_packet_too_big(&mut self, header: &[u8; 8], message: &PacketBuf, now: Instant) {
        let ours = Quoted6::read(message).filter(|q| {
            // Our own fragments: only the first shows the transport header.
            let own_source = self.v6.as_ref().is_some_and(|v6| v6.addrs.get(q.src).is_some());
            let (src, dst, protocol) = (IpAddr::V6(q.src), IpAddr::V6(q.dst), IpProtocol::from(q.next_header));
            own_source && q.first && self.quote_is_ours(src, dst, protocol, q.transport())
        });
        let Some(Quoted6 { dst, .. }) = ours else {
            self.counters.drop_pmtu_unverified += 1;
            return;
        };
        let claim = usize::try_from(be32(header, 4)).unwrap_or(usize::MAX);
        if claim < IPV6_MIN_MTU {
            self.counters.pmtu_raised_to_minimum += 1;
        }
        self.lower_path_mtu(IpAddr::V6(dst), claim.max(IPV6_MIN_MTU), now);
    }

    /// Whether the quoted `transport` header (at least its first 8
    /// bytes), sent from `src` to `dst` over `protocol`, is one we sent:
    /// for TCP a connection between them with the quoted sequence number
    /// in flight, for UDP a socket bound to the source port, for an echo
    /// request an echo socket with its identifier.
    fn quote_is_ours(&self, src: IpAddr, dst: IpAddr, protocol: IpProtocol, transport: &[u8]) -> bool {
        if transport.len() < 8 {
            return false;
        }
        let (src_port, dst_port) = (be16(transport, 0), be16(transport, 2));
        match (protocol, src, dst) {
            (IpProtocol::Tcp, src, dst) => {
                let seq = TcpSeqNumber(be32(transport, 4));
                self.tcp_quote_in_flight(SocketAddr::new(src, src_port), SocketAddr::new(dst, dst_port), seq)
            }
            (IpProtocol::Udp, IpAddr::V4(src), _) => self.udp.receiver_of(SocketAddrV4::new(src, src_port)).is_some(),
            (IpProtocol::Udp, IpAddr::V6(src), _) => {
                self.udp.receiver_of6(SocketAddrV6::new(src, src_port, 0, 0)).is_some()
            }
            (IpProtocol::Icmp, IpAddr::V4(_), _) => {
                transport[0] == ICMP_ECHO_REQUEST && self.icmp.has_ident(be16(transport, 4))
            }
            (IpProtocol::Icmpv6, IpAddr::V6(_), _) => {
                transport[0] == u8::from(Icmpv6Message::EchoRequest) && self.icmp.has_ident(be16(transport, 4))
            }
            _ => false,
        }
    }

    /// A checked message says the path to `dst` carries `mtu` bytes: if
    /// that is below what we know (the link MTU at most, so a claim above
    /// it changes nothing), the cache keeps it and TCP follows.
    fn lower_path_mtu(&mut self, dst: IpAddr, mtu: usize, now: Instant) {
        // An entry past its time whose poll has not come yet is taken out
        // first, so that its connections are raised before being lowered
        // again from the link's size.
        self.expire_path_mtus(now);
        if mtu >= self.path_mtu(dst, now) {
            self.counters.pmtu_not_lower += 1;
            return;
        }
        self.pmtu.lower(dst, mtu, now);
        self.counters.pmtu_lowered += 1;
        self.tcp_path_mtu_lowered(dst, mtu, now);
    }

    /// Takes out the path MTUs that expired by `now`: each destination's
    /// path MTU is the link's again, and the TCP connections to it send
    /// segments as large as that and the peer allow.
    pub(super) fn expire_path_mtus(&mut self, now: Instant) {
        for dst in self.pmtu.expire(now) {
            self.counters.pmtu_expired += 1;
            let mtu = self.path_mtu(dst, now);
            self.tcp_path_mtu_raised(dst, mtu);
        }
    }
}
