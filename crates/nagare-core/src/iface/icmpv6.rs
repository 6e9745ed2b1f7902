//! ICMPv6 on the interface (RFC 4443): echo requests to our addresses
//! answered in place, echo replies handed to the echo socket with their
//! identifier, neighbour and router discovery and redirects to `ndp.rs`, errors about
//! our packets to what sent them (packet too big to path MTU discovery
//! and the UDP socket, destination unreachable to a TCP connection or
//! the UDP socket, time exceeded to the UDP socket), and the errors we send
//! about packets we received (never about an error, nor to a multicast
//! destination save RFC 4443 2.4 (e.3)'s exception, rate limited).

use super::quote::Quoted6;
use super::read::be16;
use super::Interface;
use crate::buf::PacketBuf;
use crate::icmp::{Echo6Event, IcmpError};
use crate::time::Instant;
use core::net::{IpAddr, SocketAddr, SocketAddrV6};
use nagare_wire::{
    pseudo_header_v6, Checksum, Icmpv6DstUnreachable, Icmpv6EchoHeader, Icmpv6Message, IpProtocol, Ipv6Repr,
    TcpSeqNumber, ICMPV6_ERROR_MAX_LEN, ICMPV6_HEADER_LEN, IPV6_HEADER_LEN,
};

/// The ICMPv6 protocol number, as the pseudo header carries it.
const PROTO_ICMPV6: u8 = 58;

/// The ICMPv6 checksum's sum over the pseudo header and `message`; 0xffff
/// folded when the checksum is right.
pub(super) fn icmp6_sum(repr: &Ipv6Repr, message: &PacketBuf) -> Checksum {
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    let mut sum = pseudo_header_v6(repr.src_addr, repr.dst_addr, PROTO_ICMPV6, len);
    sum.add_checksum(message.checksum());
    sum
}

impl Interface {
    /// An ICMPv6 message (`payload`: header and body) under IPv6 header
    /// `ip`; `tentative`: to one of our addresses still tentative, where
    /// only neighbour discovery is taken.
    pub(super) fn receive_icmpv6(&mut self, ip: &Ipv6Repr, mut payload: PacketBuf, tentative: bool, now: Instant) {
        let Some(header) = payload.header::<ICMPV6_HEADER_LEN>() else {
            self.counters.drop_icmp6_truncated += 1;
            return;
        };
        if icmp6_sum(ip, &payload).folded() != 0xffff {
            self.counters.drop_icmp6_checksum += 1;
            return;
        }
        let kind = Icmpv6Message::from(header[0]);
        if tentative && !matches!(kind, Icmpv6Message::NeighborSolicit | Icmpv6Message::NeighborAdvert) {
            self.counters.drop_ip6_tentative_destination += 1;
            return;
        }
        match kind {
            Icmpv6Message::EchoRequest => {
                if ip.dst_addr.is_multicast() {
                    self.counters.drop_icmp6_multicast_echo += 1;
                    return;
                }
                self.send_echo6_reply(ip, &mut payload, &header, now);
            }
            Icmpv6Message::EchoReply => {
                let reply = Echo6Event::Reply {
                    from: ip.src_addr,
                    seq_no: be16(&header, 6),
                    data_len: payload.len() - ICMPV6_HEADER_LEN,
                    hop_limit: ip.hop_limit,
                    at: now,
                };
                match self.icmp.deliver6(be16(&header, 4), reply) {
                    Some(true) => self.counters.icmp6_echo_replies_received += 1,
                    Some(false) => self.counters.drop_icmp_socket_full += 1,
                    None => self.counters.drop_icmp6_unmatched_reply += 1,
                }
            }
            Icmpv6Message::NeighborSolicit
            | Icmpv6Message::NeighborAdvert
            | Icmpv6Message::RouterSolicit
            | Icmpv6Message::RouterAdvert
            | Icmpv6Message::Redirect => self.receive_ndp(ip, &payload, now),
            Icmpv6Message::PacketTooBig => {
                self.counters.icmp6_errors_received += 1;
                self.receive_packet_too_big(&header, &payload, now);
                let mtu = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
                self.report_udp6_error(ip, &payload, IcmpError::PacketTooBig6 { from: ip.src_addr, mtu });
            }
            Icmpv6Message::DstUnreachable => {
                self.counters.icmp6_errors_received += 1;
                self.receive_dst_unreachable6(header[1], &payload, now);
                self.report_udp6_error(ip, &payload, IcmpError::Unreachable6 { from: ip.src_addr, code: header[1] });
            }
            Icmpv6Message::TimeExceeded => {
                self.counters.icmp6_errors_received += 1;
                self.report_udp6_error(ip, &payload, IcmpError::TimeExceeded6 { from: ip.src_addr, code: header[1] });
            }
            kind if kind.is_error() => self.counters.icmp6_errors_received += 1,
            _ => self.counters.drop_icmp6_unhandled_type += 1,
        }
    }

    /// An ICMPv6 destination unreachable with `code`, in `message` (header
    /// and quote): about a TCP segment of ours, it goes to its connection
    /// (`tcp/unreachable.rs`; code 4, port unreachable, is "refused").
    fn receive_dst_unreachable6(&mut self, code: u8, message: &PacketBuf, now: Instant) {
        let Some(q) = Quoted6::read(message) else { return };
        let own_source = self.v6.as_ref().is_some_and(|v6| v6.addrs.get(q.src).is_some());
        let t = q.transport();
        if !own_source || !q.first || q.next_header != u8::from(IpProtocol::Tcp) || t.len() < 8 {
            return;
        }
        let local = SocketAddr::new(IpAddr::V6(q.src), be16(t, 0));
        let remote = SocketAddr::new(IpAddr::V6(q.dst), be16(t, 2));
        let seq = TcpSeqNumber(u32::from_be_bytes([t[4], t[5], t[6], t[7]]));
        let refused = Icmpv6DstUnreachable::from(code) == Icmpv6DstUnreachable::PortUnreachable;
        self.tcp_icmp_unreachable((local, remote), seq, refused, now);
    }

    /// Hands `error` to the UDP socket that sent the datagram `message`
    /// (an ICMPv6 error under header `ip`: its header, then the quote)
    /// quotes: one of ours (from `::1` only in an error to `::1`, which
    /// never comes from the link), its first fragment, to the socket bound
    /// to its source port (unless it is connected to another peer than the
    /// datagram's destination).
    fn report_udp6_error(&mut self, ip: &Ipv6Repr, message: &PacketBuf, error: IcmpError) {
        let Some(q) = Quoted6::read(message) else { return };
        let own_source = if q.src.is_loopback() {
            ip.dst_addr.is_loopback()
        } else {
            self.v6.as_ref().is_some_and(|v6| v6.addrs.get(q.src).is_some())
        };
        let t = q.transport();
        if !own_source || !q.first || q.next_header != u8::from(IpProtocol::Udp) || t.len() < 4 {
            return;
        }
        let to = SocketAddrV6::new(q.dst, be16(t, 2), 0, 0);
        self.udp.report_error6(be16(t, 0), to, error);
    }

    /// Answers an echo request with the request itself, its type changed:
    /// the pseudo header's sum does not change when source and destination
    /// swap, so the checksum is patched as the type is (RFC 1624).
    fn send_echo6_reply(&mut self, ip: &Ipv6Repr, payload: &mut PacketBuf, header: &[u8; 8], now: Instant) {
        if ip.src_addr.is_unspecified() {
            self.counters.drop_ip6_bad_source += 1;
            return;
        }
        let request_word = u16::from_be_bytes([header[0], header[1]]);
        let reply_type = u8::from(Icmpv6Message::EchoReply);
        let reply_word = u16::from_be_bytes([reply_type, header[1]]);
        let patched = match payload.first_chunk_mut() {
            Some(first) if first.len() >= 4 => {
                let old_checksum = u16::from_be_bytes([first[2], first[3]]);
                let new_checksum = nagare_wire::update(old_checksum, request_word, reply_word);
                first[0] = reply_type;
                first[2..4].copy_from_slice(&new_checksum.to_be_bytes());
                true
            }
            _ => false,
        };
        if !patched {
            payload.trim_front(ICMPV6_HEADER_LEN);
            let data_len = payload.len();
            let data_sum = payload.checksum();
            let reply = Icmpv6EchoHeader { reply: true, ident: be16(header, 4), seq_no: be16(header, 6) };
            let written = match payload.prepend(&self.pool, ICMPV6_HEADER_LEN) {
                Ok(h) => reply.emit(h, data_len, ip.dst_addr, ip.src_addr, data_sum).is_ok(),
                Err(_) => false,
            };
            if !written {
                self.counters.drop_no_buffer += 1;
                return;
            }
        }
        let message = core::mem::take(payload);
        if self.send_ipv6(Some(ip.dst_addr), ip.src_addr, IpProtocol::Icmpv6, message, None, now).is_ok() {
            self.counters.icmp6_echo_replies_sent += 1;
        }
    }

    /// Sends the ICMPv6 error `(type, code, word)` about `offending` (the
    /// packet from its IPv6 header on, under header `ip`), quoting as much
    /// as fits the minimum MTU, rate limited by the interface's ICMP token
    /// bucket. Never to an unspecified or multicast source, nor about a
    /// packet to a multicast address (or a link-layer group) unless
    /// `even_multicast` (RFC 4443 2.4 (e)).
    pub(crate) fn send_icmp6_error(
        &mut self,
        (kind, code, word): (Icmpv6Message, u8, u32),
        ip: &Ipv6Repr,
        offending: &PacketBuf,
        link_multicast: bool,
        even_multicast: bool,
        now: Instant,
    ) {
        let Some(v6) = &self.v6 else { return };
        if ip.src_addr.is_unspecified() || ip.src_addr.is_multicast() {
            return;
        }
        if (ip.dst_addr.is_multicast() || link_multicast) && !even_multicast {
            return;
        }
        let src = if v6.addrs.is_preferred(ip.dst_addr) || ip.dst_addr.is_loopback() {
            Some(ip.dst_addr)
        } else {
            v6.addrs.source_for(ip.src_addr)
        };
        let Some(src) = src else { return };
        if !self.icmp_errors.try_take(now) {
            self.counters.icmp6_errors_rate_limited += 1;
            return;
        }
        let quote_len = offending.len().min(ICMPV6_ERROR_MAX_LEN - ICMPV6_HEADER_LEN);
        let Some(mut message) = offending.slice(0, quote_len) else { return };
        let body_sum = message.checksum();
        let len = u32::try_from(quote_len + ICMPV6_HEADER_LEN).unwrap_or(u32::MAX);
        let Ok(header) = message.prepend(&self.pool, ICMPV6_HEADER_LEN) else {
            self.counters.drop_no_buffer += 1;
            return;
        };
        header.fill(0);
        header[0] = u8::from(kind);
        header[1] = code;
        header[4..8].copy_from_slice(&word.to_be_bytes());
        let mut sum = pseudo_header_v6(src, ip.src_addr, PROTO_ICMPV6, len);
        sum.add_bytes(header);
        sum.add_checksum(body_sum);
        header[2..4].copy_from_slice(&sum.finish().to_be_bytes());
        if self.send_ipv6(Some(src), ip.src_addr, IpProtocol::Icmpv6, message, None, now).is_ok() {
            self.counters.icmp6_errors_sent += 1;
        }
    }
}

/// The quote of an ICMPv6 error always leaves room for our own headers.
const _: () = assert!(ICMPV6_ERROR_MAX_LEN + IPV6_HEADER_LEN <= nagare_wire::IPV6_MIN_MTU);
