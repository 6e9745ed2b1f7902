//! ARP on the link: answering requests for our addresses, learning
//! neighbours (RFC 826's merge), and asking for the ones packets wait on.
//! The cache itself is `crate::arp`.

use super::{Interface, HEADROOM};
use crate::buf::PacketBuf;
use crate::icmp::{IcmpError, ICMP_CODE_HOST_UNREACHABLE};
use crate::time::Instant;
use core::net::Ipv4Addr;
use nagare_wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, ARP_ETHERNET_IPV4_LEN};

impl Interface {
    /// An ARP packet (Ethernet header stripped).
    pub(super) fn receive_arp(&mut self, packet: &PacketBuf, now: Instant) {
        let Some(bytes) = packet.header::<ARP_ETHERNET_IPV4_LEN>() else {
            self.counters.drop_arp_malformed += 1;
            return;
        };
        let parsed = ArpPacket::new_checked(&bytes[..]).and_then(|p| ArpRepr::parse(&p));
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        }) = parsed
        else {
            self.counters.drop_arp_malformed += 1;
            return;
        };
        if !source_hardware_addr.is_unicast() || self.is_broadcast(source_protocol_addr) {
            self.counters.drop_arp_malformed += 1;
            return;
        }
        if self.has_address(source_protocol_addr) {
            // Someone else claims our address: never cache it.
            self.counters.drop_arp_conflict += 1;
            return;
        }
        let for_us = self.has_address(target_protocol_addr);
        let known_sender = !source_protocol_addr.is_unspecified() && self.arp.contains(source_protocol_addr);
        // RFC 826's merge: refresh a sender we know; learn it if it asks us.
        if known_sender || (for_us && !source_protocol_addr.is_unspecified()) {
            let waiting = self.arp.insert(source_protocol_addr, source_hardware_addr, now);
            for ip_packet in waiting {
                self.emit_ethernet(ip_packet, source_hardware_addr, EtherType::Ipv4);
            }
        }
        if !for_us {
            self.counters.drop_arp_not_for_us += 1;
            return;
        }
        match operation {
            ArpOperation::Request => {}
            ArpOperation::Reply => {
                self.counters.arp_replies_received += 1;
                return;
            }
            ArpOperation::Unknown(_) => {
                self.counters.drop_arp_malformed += 1;
                return;
            }
        }
        {
            let reply = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: self.config.mac,
                source_protocol_addr: target_protocol_addr,
                target_hardware_addr: source_hardware_addr,
                target_protocol_addr: source_protocol_addr,
            };
            if self.emit_arp(&reply, source_hardware_addr) {
                self.counters.arp_replies_sent += 1;
            }
        }
    }

    /// Tells the sender of `ip_packet` (our own datagram, header first)
    /// that its next hop never answered ARP: what the kernel tells a
    /// socket then. UDP and echo sockets get a host-unreachable error to
    /// take; a connection still opening fails with it (a connection
    /// already open rides it out: its retransmissions ask again).
    pub(super) fn neighbour_unreachable(&mut self, ip_packet: &PacketBuf, now: Instant) {
        let error = IcmpError::Unreachable {
            from: self.config.addresses.first().map_or(Ipv4Addr::UNSPECIFIED, |c| c.address()),
            code: ICMP_CODE_HOST_UNREACHABLE,
        };
        self.report_error_about(ip_packet, 0, error, now);
    }

    /// Asks the link who has `ip`.
    pub(super) fn send_arp_request(&mut self, ip: Ipv4Addr, _now: Instant) {
        let Some(source) = self.source_for(ip) else {
            return;
        };
        let request = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: self.config.mac,
            source_protocol_addr: source,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: ip,
        };
        if self.emit_arp(&request, EthernetAddress::BROADCAST) {
            self.counters.arp_requests_sent += 1;
        }
    }

    fn emit_arp(&mut self, repr: &ArpRepr, dst: EthernetAddress) -> bool {
        let mut bytes = [0u8; ARP_ETHERNET_IPV4_LEN];
        if repr.emit(&mut bytes).is_err() {
            return false;
        }
        match PacketBuf::from_slice(&self.pool, HEADROOM, &bytes) {
            Ok(packet) => {
                self.emit_ethernet(packet, dst, EtherType::Arp);
                true
            }
            Err(_) => {
                self.counters.drop_no_buffer += 1;
                false
            }
        }
    }
}
