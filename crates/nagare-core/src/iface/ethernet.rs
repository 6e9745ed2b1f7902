//! Ethernet: the frames the interface takes (to our address, broadcast,
//! or an IPv6 group we joined, from a unicast source; ARP and IPv4 only
//! with an IPv4 address, IPv6 only on an interface that speaks it) and the
//! header on every frame it sends.

use super::Interface;
use crate::buf::PacketBuf;
use crate::time::Instant;
use nagare_wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, ETHERNET_HEADER_LEN};

impl Interface {
    /// Processes one received Ethernet frame.
    pub fn receive(&mut self, mut frame: PacketBuf, now: Instant) {
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += frame.len() as u64;
        let Some(header) = frame.header::<ETHERNET_HEADER_LEN>() else {
            self.counters.drop_eth_truncated += 1;
            return;
        };
        let eth = EthernetFrame::new_unchecked(&header[..]);
        let dst = eth.dst_addr();
        if dst != self.config.mac && !dst.is_broadcast() && !self.joined_link_group(dst) {
            self.counters.drop_eth_not_for_us += 1;
            return;
        }
        if !eth.src_addr().is_unicast() {
            self.counters.drop_eth_bad_source += 1;
            return;
        }
        let ethertype = eth.ethertype();
        frame.trim_front(ETHERNET_HEADER_LEN);
        self.rx_link_broadcast = dst.is_broadcast();
        match ethertype {
            EtherType::Arp | EtherType::Ipv4 if !self.speaks_ipv4() => self.counters.drop_eth_unknown_type += 1,
            EtherType::Arp => self.receive_arp(&frame, now),
            EtherType::Ipv4 => self.receive_ipv4(frame, now, false),
            EtherType::Ipv6 => self.receive_ipv6(frame, now, dst.is_multicast()),
            _ => self.counters.drop_eth_unknown_type += 1,
        }
    }

    /// Queues `packet` for the device behind an Ethernet header to `dst`.
    pub(super) fn emit_ethernet(&mut self, mut packet: PacketBuf, dst: EthernetAddress, ethertype: EtherType) {
        let repr = EthernetRepr { src_addr: self.config.mac, dst_addr: dst, ethertype };
        let written = match packet.prepend(&self.pool, ETHERNET_HEADER_LEN) {
            Ok(header) => repr.emit(header).is_ok(),
            Err(_) => false,
        };
        if !written {
            self.counters.drop_no_buffer += 1;
            return;
        }
        if self.tx.len() >= self.config.tx_queue_limit {
            self.counters.drop_tx_queue_full += 1;
            return;
        }
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += packet.len() as u64;
        self.tx.push_back(packet);
    }
}
