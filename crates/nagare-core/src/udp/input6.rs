//! Received UDP datagrams over IPv6: the header and checksum checked (the
//! checksum is mandatory over IPv6, RFC 8200 8.1: zero is refused), then
//! handed to the IPv6 socket bound to their port, or answered with ICMPv6
//! port unreachable.

use super::socket::{Queued, UdpDatagram6};
use crate::buf::{Offload, PacketBuf};
use crate::iface::Interface;
use crate::time::Instant;
use core::net::SocketAddrV6;
use nagare_wire::{pseudo_header_v6, Icmpv6DstUnreachable, Icmpv6Message, IpProtocol, Ipv6Repr, UDP_HEADER_LEN};

impl Interface {
    /// A UDP datagram over IPv6 for us: `packet` from its IPv6 header
    /// (`ip`) on, the UDP header `udp_at` bytes into it; `link_multicast`:
    /// the frame came to a link-layer group or broadcast address.
    pub(crate) fn receive_udp6(
        &mut self,
        ip: &Ipv6Repr,
        packet: PacketBuf,
        udp_at: usize,
        link_multicast: bool,
        now: Instant,
    ) {
        // What the device said of the frame: the slice below starts
        // without it.
        let offload = packet.offload();
        let Some(mut payload) = packet.slice(udp_at, packet.len().saturating_sub(udp_at)) else {
            self.counters.drop_udp6_malformed += 1;
            return;
        };
        let Some((src_port, dst_port, length, checksum)) = super::read_header(&payload) else {
            self.counters.drop_udp6_malformed += 1;
            return;
        };
        if offload.is_udp_segmented() {
            self.counters.drop_udp_bad_segmentation += 1;
            return;
        }
        payload.truncate(length);
        if checksum == 0 {
            self.counters.drop_udp6_zero_checksum += 1;
            return;
        }
        if !offload.checksum.trusted() {
            let mut sum = pseudo_header_v6(ip.src_addr, ip.dst_addr, IpProtocol::Udp.into(), length as u32);
            sum.add_checksum(payload.checksum());
            if sum.folded() != 0xffff {
                self.counters.drop_udp6_checksum += 1;
                return;
            }
        }
        payload.set_offload(Offload::NONE);
        let destination = SocketAddrV6::new(ip.dst_addr, dst_port, 0, 0);
        let Some(socket) = self.udp.receiver6(destination) else {
            self.counters.drop_udp6_no_socket += 1;
            let port_unreachable = u8::from(Icmpv6DstUnreachable::PortUnreachable);
            let kind = (Icmpv6Message::DstUnreachable, port_unreachable, 0);
            self.send_icmp6_error(kind, ip, &packet, link_multicast, false, now);
            return;
        };
        payload.trim_front(UDP_HEADER_LEN);
        let source = SocketAddrV6::new(ip.src_addr, src_port, 0, 0);
        if socket.enqueue(Queued::V6(UdpDatagram6 { source, destination, payload })) {
            self.counters.udp6_delivered += 1;
        } else {
            self.counters.drop_udp6_queue_full += 1;
        }
    }
}
