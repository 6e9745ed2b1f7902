//! ICMP errors: those the interface sends about datagrams it received
//! (rate limited, quoting what RFC 1812 allows), and those it receives or
//! makes up about datagrams it sent, handed to the socket that sent them.

use super::socket::{EchoEvent, IcmpError};
use super::{ICMP_CODE_FRAG_NEEDED, ICMP_CODE_PORT_UNREACHABLE, ICMP_CODE_PROTO_UNREACHABLE, ICMP_ECHO_REQUEST};
use crate::buf::PacketBuf;
use crate::iface::ipv4::is_martian_source;
use crate::iface::read::be16;
use crate::iface::{Error, Interface};
use crate::time::Instant;
use core::net::{SocketAddr, SocketAddrV4};
use nagare_wire::{Checksum, IpProtocol, Ipv4Packet, Ipv4Repr, TcpSeqNumber, ICMPV4_HEADER_LEN, IPV4_HEADER_LEN};

/// Largest ICMP error message: RFC 1812 asks for as much of the offending
/// datagram as fits in 576 bytes.
const ICMP_ERROR_MAX_LEN: usize = 576;

impl Interface {
    /// Sends an ICMP error about a datagram we received (`ip` and its
    /// `payload`), quoting as much of it as RFC 1812 allows, rate limited.
    pub(crate) fn send_icmp_error(&mut self, kind: u8, code: u8, ip: &Ipv4Repr, payload: &PacketBuf, now: Instant) {
        let src = ip.src_addr;
        if self.rx_link_broadcast || self.is_broadcast(ip.dst_addr) || is_martian_source(src) || self.is_broadcast(src)
        {
            return;
        }
        if !self.icmp_errors.try_take(now) {
            self.counters.icmp_errors_rate_limited += 1;
            return;
        }
        let quote_len = payload.len().min(ICMP_ERROR_MAX_LEN - IPV4_HEADER_LEN - ICMPV4_HEADER_LEN - IPV4_HEADER_LEN);
        let Some(mut message) = payload.slice(0, quote_len) else {
            return;
        };
        let result = (|| -> Result<(), Error> {
            let quoted_header = message.prepend(&self.pool, IPV4_HEADER_LEN)?;
            ip.emit(quoted_header).map_err(|_| Error::MessageTooLong)?;
            let body_sum = message.checksum();
            let header = message.prepend(&self.pool, ICMPV4_HEADER_LEN)?;
            header.fill(0);
            header[0] = kind;
            header[1] = code;
            let mut sum = Checksum::new();
            sum.add_bytes(header);
            sum.add_checksum(body_sum);
            header[2..4].copy_from_slice(&sum.finish().to_be_bytes());
            Ok(())
        })();
        if result.is_err() {
            self.counters.drop_no_buffer += 1;
            return;
        }
        let reply = Ipv4Repr::new(ip.dst_addr, src, IpProtocol::Icmp, message.len(), self.config.ttl);
        if self.send_ip(reply, message, now).is_ok() {
            self.counters.icmp_errors_sent += 1;
        }
    }

    /// Hands `error` to the socket that sent the datagram found at `offset`
    /// of `packet` (an IPv4 header and at least 8 bytes after it): the UDP
    /// socket bound to its source port (unless it is connected to another
    /// peer than the datagram's destination), the echo socket with its
    /// identifier, or, for a destination unreachable, the TCP connection
    /// whose segment it is (`tcp/unreachable.rs`). Returns false when no
    /// such datagram can be read there.
    pub(crate) fn report_error_about(
        &mut self,
        packet: &PacketBuf,
        offset: usize,
        error: IcmpError,
        now: Instant,
    ) -> bool {
        let mut quote = [0u8; 60 + 8];
        let n = packet.copy_out(offset, &mut quote);
        let quote = &quote[..n];
        let view = Ipv4Packet::new_unchecked(quote);
        let header_len = view.header_len();
        if n < IPV4_HEADER_LEN || view.version() != 4 || header_len < IPV4_HEADER_LEN || n < header_len + 8 {
            return false;
        }
        if !self.has_address(view.src_addr()) {
            return true;
        }
        if view.frag_offset() != 0 {
            // Only the first fragment carries the transport header.
            return true;
        }
        let transport = &quote[header_len..];
        match view.protocol() {
            IpProtocol::Udp => {
                let to = SocketAddrV4::new(view.dst_addr(), be16(transport, 2));
                self.udp.report_error(be16(transport, 0), to, error)
            }
            // "Fragmentation needed" is path MTU discovery's.
            IpProtocol::Tcp => match error {
                IcmpError::Unreachable { code, .. } if code != ICMP_CODE_FRAG_NEEDED => {
                    let (src, dst) = (view.src_addr(), view.dst_addr());
                    let ends = (
                        SocketAddr::new(src.into(), be16(transport, 0)),
                        SocketAddr::new(dst.into(), be16(transport, 2)),
                    );
                    let seq =
                        TcpSeqNumber(u32::from_be_bytes([transport[4], transport[5], transport[6], transport[7]]));
                    let refused = matches!(code, ICMP_CODE_PROTO_UNREACHABLE | ICMP_CODE_PORT_UNREACHABLE);
                    self.tcp_icmp_unreachable(ends, seq, refused, now);
                }
                _ => {}
            },
            IpProtocol::Icmp if transport.first() == Some(&ICMP_ECHO_REQUEST) => {
                let ident = be16(transport, 4);
                let seq_no = be16(transport, 6);
                if self.icmp.deliver(ident, EchoEvent::Error { seq_no, error }) == Some(false) {
                    self.counters.drop_icmp_socket_full += 1;
                }
            }
            _ => {}
        }
        true
    }
}
