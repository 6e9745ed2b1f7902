//! Received UDP datagrams: the header and checksum checked, then handed to
//! the socket bound to their port, or answered with ICMP port unreachable.
//! A UDP super-frame from a device that carries them is split into the
//! datagrams it stands for, each delivered on its own.

use super::socket::{Queued, UdpDatagram};
use super::UDP_MAX_SEGMENTS;
use crate::buf::{Offload, PacketBuf};
use crate::icmp::{ICMP_CODE_PORT_UNREACHABLE, ICMP_DST_UNREACHABLE};
use crate::iface::Interface;
use crate::time::Instant;
use core::net::SocketAddrV4;
use nagare_wire::{IpProtocol, Ipv4Repr, UDP_HEADER_LEN};

impl Interface {
    /// A UDP datagram (`payload`: header and data) for one of our
    /// addresses, under IP header `ip`.
    pub(crate) fn receive_udp(&mut self, ip: &Ipv4Repr, mut payload: PacketBuf, now: Instant) {
        let Some((src_port, dst_port, length, checksum)) = super::read_header(&payload) else {
            self.counters.drop_udp_malformed += 1;
            return;
        };
        let offload = payload.offload();
        if offload.is_udp_segmented() {
            self.receive_udp_super_frame(ip, payload, (src_port, dst_port), length, now);
            return;
        }
        payload.truncate(length);
        if checksum != 0 && !offload.checksum.trusted() {
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
        if socket.enqueue(Queued::V4(datagram)) {
            self.counters.udp_delivered += 1;
        } else {
            self.counters.drop_udp_queue_full += 1;
        }
    }

    /// A UDP super-frame (`payload`: one header over the data of every
    /// datagram it stands for), split into those datagrams, each delivered
    /// on its own. It is taken only as a device in this memory makes one:
    /// the UDP length is the whole IP payload's, the checksum is one the
    /// receiver need not verify, and the segment size makes at least one
    /// and at most [`UDP_MAX_SEGMENTS`] datagrams. The datagrams share the
    /// frame's buffers; nothing is copied.
    fn receive_udp_super_frame(
        &mut self,
        ip: &Ipv4Repr,
        payload: PacketBuf,
        (src_port, dst_port): (u16, u16),
        length: usize,
        now: Instant,
    ) {
        let offload = payload.offload();
        let segment_size = usize::from(offload.segment_size);
        let data = length - UDP_HEADER_LEN;
        if length != payload.len()
            || !offload.checksum.trusted()
            || segment_size > data
            || data.div_ceil(segment_size) > UDP_MAX_SEGMENTS
        {
            self.counters.drop_udp_bad_segmentation += 1;
            return;
        }
        self.counters.udp_super_frames_received += 1;
        let datagrams = data.div_ceil(segment_size);
        let broadcast = self.is_broadcast(ip.dst_addr);
        let source = SocketAddrV4::new(ip.src_addr, src_port);
        let destination = SocketAddrV4::new(ip.dst_addr, dst_port);
        let Some(socket) = self.udp.receiver(destination) else {
            self.counters.drop_udp_no_socket += datagrams as u64;
            if !broadcast {
                self.send_icmp_error(ICMP_DST_UNREACHABLE, ICMP_CODE_PORT_UNREACHABLE, ip, &payload, now);
            }
            return;
        };
        let (mut delivered, mut full) = (0u64, 0u64);
        for piece in payload.pieces(UDP_HEADER_LEN, segment_size) {
            if socket.enqueue(Queued::V4(UdpDatagram { source, destination, payload: piece })) {
                delivered += 1;
            } else {
                full += 1;
            }
        }
        self.counters.udp_delivered += delivered;
        self.counters.drop_udp_queue_full += full;
    }
}
