//! IPv4 on the interface: validating received datagrams, reassembling
//! fragments and handing each datagram to its protocol's input
//! (`crate::icmp`, `crate::udp`, `crate::tcp`); choosing the source and
//! next hop of datagrams we send and fragmenting them above the MTU;
//! datagrams to local addresses go to `local.rs` instead of the link.

use super::local::LOOPBACK_SOURCE;
use super::read::linear_prefix;
use super::{Error, Interface, UNREACHABLE_QUEUE_LIMIT};
use crate::arp::Resolution;
use crate::buf::PacketBuf;
use crate::icmp::{ICMP_CODE_PROTO_UNREACHABLE, ICMP_DST_UNREACHABLE};
use crate::ipv4::fragment::fragment;
use crate::ipv4::reassembly::{DropReason, Outcome};
use crate::ipv4::route::{next_hop, NextHop};
use crate::tcp::syn_guard::TCP_FLAGS_END;
use crate::time::Instant;
use core::net::{IpAddr, Ipv4Addr};
use nagare_wire::{EtherType, EthernetAddress, IpProtocol, Ipv4Packet, Ipv4Repr, IPV4_HEADER_LEN};

/// Sources that do not name a single host (RFC 1122 3.2.1.3): this host,
/// loopback, multicast, reserved class E and limited broadcast.
pub(crate) fn is_martian_source(src: Ipv4Addr) -> bool {
    src.is_unspecified() || src.is_loopback() || src.is_multicast() || src.octets()[0] >= 240
}

impl Interface {
    /// `from_self`: sent by us to one of our addresses (its source is ours).
    pub(super) fn receive_ipv4(&mut self, mut packet: PacketBuf, now: Instant, from_self: bool) {
        let mut scratch = [0u8; 60];
        let Some(fixed) = linear_prefix(&packet, IPV4_HEADER_LEN, &mut scratch) else {
            self.counters.drop_ip_truncated += 1;
            return;
        };
        let view = Ipv4Packet::new_unchecked(fixed);
        let header_len = view.header_len();
        let total_len = usize::from(view.total_len());
        if view.version() != 4 || header_len < IPV4_HEADER_LEN || total_len < header_len {
            self.counters.drop_ip_malformed += 1;
            return;
        }
        if total_len > packet.len() {
            self.counters.drop_ip_truncated += 1;
            return;
        }
        let mut scratch = [0u8; 60];
        let Some(header) = linear_prefix(&packet, header_len, &mut scratch) else {
            self.counters.drop_ip_truncated += 1;
            return;
        };
        if !nagare_wire::verify(header) {
            self.counters.drop_ip_checksum += 1;
            return;
        }
        let view = Ipv4Packet::new_unchecked(header);
        let repr = Ipv4Repr {
            src_addr: view.src_addr(),
            dst_addr: view.dst_addr(),
            protocol: view.protocol(),
            payload_len: total_len - header_len,
            ttl: view.ttl(),
            ident: view.ident(),
            dont_frag: view.dont_frag(),
            more_frags: view.more_frags(),
            frag_offset: view.frag_offset(),
            dscp_ecn: view.dscp_ecn(),
        };
        // A host does not drop a datagram for its TTL (RFC 1122 3.2.1.7):
        // TTL only matters to routers.
        let src = repr.src_addr;
        let dhcp_style = src.is_unspecified() && self.is_broadcast(repr.dst_addr);
        let bad_source = (is_martian_source(src) && !dhcp_style) || self.is_broadcast(src) || self.has_address(src);
        if bad_source && !from_self {
            self.counters.drop_ip_bad_source += 1;
            return;
        }
        if repr.dst_addr.is_loopback() && !from_self {
            self.counters.drop_ip_martian_destination += 1;
            return;
        }
        if !self.is_local(repr.dst_addr) && !self.is_broadcast(repr.dst_addr) {
            self.counters.drop_ip_not_for_us += 1;
            return;
        }
        // Drop the link layer's padding, then the header.
        packet.truncate(total_len);
        packet.trim_front(header_len);

        if repr.more_frags || repr.frag_offset != 0 {
            self.counters.frag_received += 1;
            let outcome = self.reassembler.input(&repr, packet, now);
            self.counters.drop_frag_evicted += self.reassembler.take_evictions() as u64;
            match outcome {
                Outcome::Complete(whole, payload, first_len) => {
                    self.counters.frag_reassembled += 1;
                    // A device's SYN filter read the first fragment if it
                    // held the TCP header up to the flags.
                    self.receive_datagram(whole, payload, first_len >= TCP_FLAGS_END, now);
                }
                Outcome::Held => {}
                Outcome::Dropped(reason) => {
                    let counter = match reason {
                        DropReason::Overlap => &mut self.counters.drop_frag_overlap,
                        DropReason::Oversize => &mut self.counters.drop_frag_oversize,
                        DropReason::Malformed => &mut self.counters.drop_frag_malformed,
                        DropReason::Duplicate => &mut self.counters.drop_frag_duplicate,
                        DropReason::Memory => &mut self.counters.drop_frag_memory,
                    };
                    *counter += 1;
                }
            }
        } else {
            self.receive_datagram(repr, packet, true, now);
        }
    }

    /// A whole datagram for us, to its protocol's input; `device_read`:
    /// a device's SYN filter read its TCP header up to the flags (false
    /// for one rebuilt from a first fragment that ended before them).
    fn receive_datagram(&mut self, ip: Ipv4Repr, payload: PacketBuf, device_read: bool, now: Instant) {
        match ip.protocol {
            IpProtocol::Icmp => self.receive_icmp(&ip, payload, now),
            IpProtocol::Udp => self.receive_udp(&ip, payload, now),
            IpProtocol::Tcp => self.receive_tcp(&ip, payload, device_read, now),
            _ => {
                self.counters.drop_ip_unknown_protocol += 1;
                self.send_icmp_error(ICMP_DST_UNREACHABLE, ICMP_CODE_PROTO_UNREACHABLE, &ip, &payload, now);
            }
        }
    }

    /// The address to send from towards `dst`: 127.0.0.1 for the loopback
    /// network, else the one on the same network as the next hop, else the
    /// first.
    pub(crate) fn source_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if dst.is_loopback() {
            return Some(LOOPBACK_SOURCE);
        }
        let hop = match next_hop(&self.config.addresses, &self.config.routes, self.config.gateway, dst)? {
            NextHop::Unicast(hop) => hop,
            NextHop::Broadcast => dst,
        };
        self.config
            .addresses
            .iter()
            .find(|c| c.contains(hop) || c.broadcast() == Some(hop))
            .or(self.config.addresses.first())
            .map(|c| c.address())
    }

    /// Sends an IP datagram: `repr` gives addresses and protocol (its ident
    /// and lengths are filled in here), `payload` the transport header and
    /// data. A datagram to a local address waits whole for the next poll;
    /// one for the link is fragmented when it does not fit the MTU.
    pub fn send_ip(&mut self, mut repr: Ipv4Repr, mut payload: PacketBuf, now: Instant) -> Result<(), Error> {
        let local = self.is_local(repr.dst_addr);
        if repr.src_addr.is_loopback() && !local {
            // 127.0.0.0/8 never appears on the link (RFC 1122 3.2.1.3);
            // Linux refuses such a send with EINVAL too.
            return Err(Error::Unaddressable);
        }
        let hop = if local {
            None
        } else {
            // Without an IPv4 address nothing IPv4 goes on the link, the
            // limited broadcast included.
            let hop = next_hop(&self.config.addresses, &self.config.routes, self.config.gateway, repr.dst_addr)
                .filter(|_| self.speaks_ipv4());
            let Some(hop) = hop else {
                self.counters.drop_ip_no_route += 1;
                return Err(Error::NoRoute);
            };
            Some(hop)
        };
        if payload.len() + IPV4_HEADER_LEN > nagare_wire::IPV4_MAX_TOTAL_LEN {
            return Err(Error::MessageTooLong);
        }
        repr.payload_len = payload.len();
        repr.ident = self.next_ident;
        self.next_ident = self.next_ident.wrapping_add(1);
        repr.more_frags = false;
        repr.frag_offset = 0;
        let Some(hop) = hop else {
            return self.send_local(repr, payload);
        };
        // A datagram that routers may fragment goes in fragments that fit
        // the path; one with DF set is its sender's to size (TCP follows
        // the path MTU itself) and goes whole if the link takes it.
        let mtu = if repr.dont_frag { self.caps.mtu } else { self.path_mtu(IpAddr::V4(repr.dst_addr), now) };
        let packet_len = payload.len() + IPV4_HEADER_LEN;
        // A TCP or UDP super-frame goes whole: the device cuts it into
        // MTU-sized segments or datagrams.
        let super_frame = packet_len <= self.caps.tx_offloads.super_frame_limit(payload.offload());
        if packet_len <= mtu || super_frame {
            let Ok(header) = payload.prepend(&self.pool, IPV4_HEADER_LEN) else {
                self.counters.drop_no_buffer += 1;
                return Err(Error::NoBuffer);
            };
            repr.emit(header).map_err(|_| Error::MessageTooLong)?;
            self.send_to_link(payload, hop, now);
            return Ok(());
        }
        if repr.dont_frag {
            return Err(Error::MessageTooLong);
        }
        let mut pieces = fragment(&repr, &payload, mtu).ok_or(Error::MessageTooLong)?;
        drop(payload);
        // Headers for every fragment first: a datagram goes out whole or not
        // at all, never as a prefix the receiver can only time out on.
        for (piece_repr, piece) in pieces.iter_mut() {
            let Ok(header) = piece.prepend(&self.pool, IPV4_HEADER_LEN) else {
                self.counters.drop_no_buffer += 1;
                return Err(Error::NoBuffer);
            };
            piece_repr.emit(header).map_err(|_| Error::MessageTooLong)?;
        }
        for (_, piece) in pieces {
            self.counters.frag_sent += 1;
            self.send_to_link(piece, hop, now);
        }
        Ok(())
    }

    /// Hands an IP packet to the link: broadcast, or to the next hop's
    /// Ethernet address once ARP knows it.
    fn send_to_link(&mut self, ip_packet: PacketBuf, hop: NextHop, now: Instant) {
        match hop {
            NextHop::Broadcast => self.emit_ethernet(ip_packet, EthernetAddress::BROADCAST, EtherType::Ipv4),
            NextHop::Unicast(ip) => match self.arp.resolve(ip, ip_packet, now) {
                (Resolution::Known(mac), Some(packet)) => self.emit_ethernet(packet, mac, EtherType::Ipv4),
                (Resolution::SendRequest, _) => self.send_arp_request(ip, now),
                (Resolution::QueueFull, _) => self.counters.drop_arp_queue_full += 1,
                (Resolution::Unreachable, Some(packet)) => {
                    // Reported at the next poll, never inside the send that
                    // made it (which may be a socket's own call).
                    self.counters.drop_arp_unresolved += 1;
                    if self.unreachable.len() < UNREACHABLE_QUEUE_LIMIT {
                        self.unreachable.push_back(packet);
                    }
                }
                _ => {}
            },
        }
    }
}
