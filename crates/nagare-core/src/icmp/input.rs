//! Received ICMP messages: echo requests answered in place, echo replies
//! handed to the echo socket with their identifier, errors to the socket
//! whose datagram they quote.

use super::socket::EchoEvent;
use super::socket::IcmpError;
use super::{ICMP_CODE_FRAG_NEEDED, ICMP_DST_UNREACHABLE, ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST, ICMP_TIME_EXCEEDED};
use crate::buf::PacketBuf;
use crate::iface::read::be16;
use crate::iface::Interface;
use crate::time::Instant;
use nagare_wire::{IpProtocol, Ipv4Repr, ICMPV4_HEADER_LEN};

impl Interface {
    /// An ICMP message (`payload`: header and body) for one of our
    /// addresses, under IP header `ip`.
    pub(crate) fn receive_icmp(&mut self, ip: &Ipv4Repr, mut payload: PacketBuf, now: Instant) {
        let Some(header) = payload.header::<ICMPV4_HEADER_LEN>() else {
            self.counters.drop_icmp_malformed += 1;
            return;
        };
        if payload.checksum().folded() != 0xffff {
            self.counters.drop_icmp_checksum += 1;
            return;
        }
        let ident = be16(&header, 4);
        let seq_no = be16(&header, 6);
        match header[0] {
            ICMP_ECHO_REQUEST => {
                if self.is_broadcast(ip.dst_addr) {
                    self.counters.drop_icmp_broadcast_echo += 1;
                    return;
                }
                if header[1] != 0 {
                    self.counters.drop_icmp_malformed += 1;
                    return;
                }
                self.send_echo_reply(ip, &mut payload, &header, now);
            }
            ICMP_ECHO_REPLY => {
                let reply = EchoEvent::Reply {
                    from: ip.src_addr,
                    seq_no,
                    data_len: payload.len() - ICMPV4_HEADER_LEN,
                    ttl: ip.ttl,
                    at: now,
                };
                match self.icmp.deliver(ident, reply) {
                    Some(true) => self.counters.icmp_echo_replies_received += 1,
                    Some(false) => self.counters.drop_icmp_socket_full += 1,
                    None => self.counters.drop_icmp_unmatched_reply += 1,
                }
            }
            kind @ (ICMP_DST_UNREACHABLE | ICMP_TIME_EXCEEDED) => {
                self.counters.icmp_errors_received += 1;
                let code = header[1];
                if kind == ICMP_DST_UNREACHABLE && code == ICMP_CODE_FRAG_NEEDED {
                    self.receive_frag_needed(&header, &payload, now);
                }
                let error = if kind == ICMP_DST_UNREACHABLE {
                    IcmpError::Unreachable { from: ip.src_addr, code }
                } else {
                    IcmpError::TimeExceeded { from: ip.src_addr, code }
                };
                if !self.report_error_about(&payload, ICMPV4_HEADER_LEN, error, now) {
                    self.counters.drop_icmp_malformed += 1;
                }
            }
            _ => self.counters.drop_icmp_unknown_type += 1,
        }
    }

    /// Answers an echo request with the request itself, its type changed.
    fn send_echo_reply(&mut self, ip: &Ipv4Repr, payload: &mut PacketBuf, header: &[u8; 8], now: Instant) {
        let request_word = u16::from_be_bytes([header[0], header[1]]);
        let reply_word = u16::from_be_bytes([ICMP_ECHO_REPLY, header[1]]);
        let patched = match payload.first_chunk_mut() {
            Some(first) if first.len() >= 4 => {
                // The reply is the request with its type changed: patch the
                // type and fix the checksum incrementally (RFC 1624).
                let old_checksum = u16::from_be_bytes([first[2], first[3]]);
                let new_checksum = nagare_wire::update(old_checksum, request_word, reply_word);
                first[0] = ICMP_ECHO_REPLY;
                first[2..4].copy_from_slice(&new_checksum.to_be_bytes());
                true
            }
            _ => false,
        };
        if !patched {
            payload.trim_front(ICMPV4_HEADER_LEN);
            let data_sum = payload.checksum();
            let reply = nagare_wire::Icmpv4EchoHeader { reply: true, ident: be16(header, 4), seq_no: be16(header, 6) };
            match payload.prepend(&self.pool, ICMPV4_HEADER_LEN) {
                Ok(h) => {
                    if reply.emit(h, data_sum).is_err() {
                        self.counters.drop_icmp_malformed += 1;
                        return;
                    }
                }
                Err(_) => {
                    self.counters.drop_no_buffer += 1;
                    return;
                }
            }
        }
        let reply_ip = Ipv4Repr {
            dscp_ecn: ip.dscp_ecn,
            ..Ipv4Repr::new(ip.dst_addr, ip.src_addr, IpProtocol::Icmp, payload.len(), self.config.ttl)
        };
        if self.send_ip(reply_ip, core::mem::take(payload), now).is_ok() {
            self.counters.icmp_echo_replies_sent += 1;
        }
    }
}
