//! Received UDP datagrams: the header and checksum checked, then handed to
//! the socket bound to their port, or answered with ICMP port unreachable.

use super::socket::UdpDatagram;
use crate::buf::{Offload, PacketBuf};
use crate::icmp::{ICMP_CODE_PORT_UNREACHABLE, ICMP_DST_UNREACHABLE};
use crate::iface::read::be16;
use crate::iface::Interface;
use crate::time::Instant;
use core::net::SocketAddrV4;
use nagare_wire::{IpProtocol, Ipv4Repr, UDP_HEADER_LEN};

impl Interface {
    /// A UDP datagram (`payload`: header and data) for one of our
    /// addresses, under IP header `ip`.
    pub(crate) fn receive_udp(&mut self, ip: &Ipv4Repr, mut payload: PacketBuf, now: Instant) {
        let Some(header) = payload.header::<UDP_HEADER_LEN>() else {
            self.counters.drop_udp_malformed += 1;
            return;
        };
        let src_port = be16(&header, 0);
        let dst_port = be16(&header, 2);
        let length = usize::from(be16(&header, 4));
        let checksum = be16(&header, 6);
        if length < UDP_HEADER_LEN || length > payload.len() {
            self.counters.drop_udp_malformed += 1;
            return;
        }
        payload.truncate(length);
        if checksum != 0 && !payload.offload().checksum.trusted() {
            let mut sum =
                nagare_wire::pseudo_header_v4(ip.src_addr, ip.dst_addr, IpProtocol::Udp.into(), length as u16);
            sum.add_checksum(payload.checksum());
            if sum.folded() != 0xffff {
                self.counters.drop_udp_checksum += 1;
                return;
            }
        }
        // The promise was about this frame; its payload may travel on.
        payload.set_offload(Offload::NONE);
        let broadcast = self.is_broadcast(ip.dst_addr);
        let destination = SocketAddrV4::new(ip.dst_addr, dst_port);
        let Some(socket) = self.udp.receiver(destination) else {
            self.counters.drop_udp_no_socket += 1;
            if !broadcast {
                self.send_icmp_error(ICMP_DST_UNREACHABLE, ICMP_CODE_PORT_UNREACHABLE, ip, &payload, now);
            }
            return;
        };
        payload.trim_front(UDP_HEADER_LEN);
        let datagram = UdpDatagram { source: SocketAddrV4::new(ip.src_addr, src_port), destination, payload };
        if socket.enqueue(datagram) {
            self.counters.udp_delivered += 1;
        } else {
            self.counters.drop_udp_queue_full += 1;
        }
    }
}
