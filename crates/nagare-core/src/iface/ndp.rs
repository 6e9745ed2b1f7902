//! Neighbour discovery on the link (RFC 4861) and duplicate address
//! detection (RFC 4862 5.4): router discovery's messages handed to
//! `router.rs`, redirects to `redirect.rs`, answering solicitations for
//! our addresses, learning neighbours from solicitations and
//! advertisements, asking for the ones packets wait on, and checking our
//! own addresses before using them, after joining their solicited-node
//! groups (the MLDv2 reports are `mld.rs`'s). The IPv6 timers run from
//! here. The cache itself is `crate::ipv6::neighbor`, the address table
//! `crate::ipv6::addr`.

use super::router::RouterAdvert;
use super::{Interface, HEADROOM};
use crate::buf::PacketBuf;
use crate::ipv6::addr::{AddrState, Retry};
use crate::tcp::connection::TcpError;
use crate::time::Instant;
use core::net::{IpAddr, Ipv6Addr, SocketAddr};
use nagare_wire::{
    multicast_mac, solicited_node, EtherType, EthernetAddress, Icmpv6Message, Icmpv6Packet, IpProtocol, Ipv6Repr,
    NdpRepr, IPV6_ALL_NODES, IPV6_HEADER_LEN, NDP_HOP_LIMIT,
};

/// Longest neighbour discovery message read when it straddles buffers.
const NDP_MAX_LEN: usize = 1280;

/// A neighbour solicitation or advertisement with a link-layer address
/// option: 24 bytes and 8.
const NEIGHBOR_MESSAGE_MAX_LEN: usize = 32;

impl Interface {
    /// A neighbour or router discovery message or a redirect (ICMPv6
    /// message, checksum verified) under IPv6 header `ip`.
    pub(super) fn receive_ndp(&mut self, ip: &Ipv6Repr, message: &PacketBuf, now: Instant) {
        let kind = message.header::<1>().map(|t| Icmpv6Message::from(t[0]));
        let router_advert = u64::from(kind == Some(Icmpv6Message::RouterAdvert));
        let redirect = u64::from(kind == Some(Icmpv6Message::Redirect));
        if ip.hop_limit != NDP_HOP_LIMIT {
            // RFC 4861 6.1.2, 7.1.1, 7.1.2, 8.1: only a message from the
            // link itself.
            self.counters.drop_ndp_hop_limit += 1;
            self.counters.drop_ndp_ra_invalid += router_advert;
            self.counters.drop_ndp_redirect_invalid += redirect;
            return;
        }
        let mut scratch = [0u8; NDP_MAX_LEN];
        let parsed = super::read::linear_prefix(message, message.len(), &mut scratch).and_then(|bytes| {
            NdpRepr::parse(&Icmpv6Packet::new_unchecked(bytes), ip.src_addr, ip.dst_addr, false).ok()
        });
        let Some(repr) = parsed else {
            self.counters.drop_ndp_malformed += 1;
            self.counters.drop_ndp_ra_invalid += router_advert;
            self.counters.drop_ndp_redirect_invalid += redirect;
            return;
        };
        match repr {
            NdpRepr::RouterAdvert { hop_limit, router_lifetime, reachable_time, retrans_timer, options, .. } => {
                let advert = RouterAdvert { hop_limit, router_lifetime, reachable_time, retrans_timer, options };
                self.receive_router_advert(ip.src_addr, &advert, now);
            }
            // A host answers none (RFC 4861 6.2.6 is for routers).
            NdpRepr::RouterSolicit { .. } => self.counters.ndp_rs_ignored += 1,
            NdpRepr::NeighborSolicit { target, lladdr } => {
                self.counters.ndp_solicits_received += 1;
                self.receive_neighbor_solicit(ip, target, lladdr, now);
            }
            NdpRepr::NeighborAdvert { solicited_flag, override_flag, target, lladdr, .. } => {
                self.counters.ndp_adverts_received += 1;
                self.receive_neighbor_advert(target, lladdr, solicited_flag, override_flag, now);
            }
            NdpRepr::Redirect { target, dest, options } => {
                self.receive_redirect(ip.src_addr, target, dest, options, now)
            }
        }
    }

    fn receive_neighbor_solicit(
        &mut self,
        ip: &Ipv6Repr,
        target: Ipv6Addr,
        lladdr: Option<EthernetAddress>,
        now: Instant,
    ) {
        let Some(v6) = self.v6.as_mut() else { return };
        let from_dad = ip.src_addr.is_unspecified();
        match v6.addrs.state(target) {
            None | Some(AddrState::Duplicate) => {
                self.counters.drop_ndp_not_for_us += 1;
                return;
            }
            Some(AddrState::Tentative) => {
                // Another node checks the address we check: neither may
                // have it (RFC 4862 5.4.3). A solicitation from a unicast
                // source resolves an address that is not ours yet: ignored.
                if !from_dad {
                    self.counters.drop_ndp_tentative_target += 1;
                } else if v6.addrs.mark_duplicate(target) {
                    self.counters.dad_duplicates += 1;
                    self.retry_duplicate(target);
                }
                return;
            }
            Some(AddrState::Preferred) => {}
        }
        if let (false, Some(mac)) = (from_dad, lladdr) {
            let waiting = v6.neighbors.solicited_by(ip.src_addr, mac, now);
            for packet in waiting {
                self.emit_ethernet(packet, mac, EtherType::Ipv6);
            }
        }
        // RFC 4861 7.2.4: to the solicitor, solicited; to all nodes for a
        // solicitation from `::`, unsolicited.
        let dst = if from_dad { IPV6_ALL_NODES } else { ip.src_addr };
        let advert = NdpRepr::NeighborAdvert {
            router_flag: false,
            solicited_flag: !from_dad,
            override_flag: true,
            target,
            lladdr: Some(self.config.mac),
        };
        let Some(message) = self.ndp_message(&advert, target, dst) else { return };
        if self.send_ipv6(Some(target), dst, IpProtocol::Icmpv6, message, Some(NDP_HOP_LIMIT), now).is_ok() {
            self.counters.ndp_adverts_sent += 1;
        }
    }

    fn receive_neighbor_advert(
        &mut self,
        target: Ipv6Addr,
        lladdr: Option<EthernetAddress>,
        solicited: bool,
        override_flag: bool,
        now: Instant,
    ) {
        let Some(v6) = self.v6.as_mut() else { return };
        if v6.addrs.get(target).is_some() {
            // Someone else has an address we check (RFC 4862 5.4.4); one
            // already ours is kept and never cached as a neighbour.
            if v6.addrs.mark_duplicate(target) {
                self.counters.dad_duplicates += 1;
                self.retry_duplicate(target);
            } else {
                self.counters.drop_ndp_address_conflict += 1;
            }
            return;
        }
        let waiting = v6.neighbors.advertised(target, lladdr, solicited, override_flag, now);
        let Some(mac) = v6.neighbors.lookup(target) else { return };
        for packet in waiting {
            self.emit_ethernet(packet, mac, EtherType::Ipv6);
        }
    }

    /// After `ip` was found duplicate: an address the interface made with
    /// a stable opaque identifier gives way to the next one (RFC 7217
    /// section 6), which the next poll checks.
    fn retry_duplicate(&mut self, ip: Ipv6Addr) {
        let Some(v6) = self.v6.as_mut() else { return };
        match v6.addrs.retry_duplicate(ip) {
            Retry::Replaced(_) => self.counters.dad_iid_retries += 1,
            Retry::Exhausted => self.counters.dad_iid_retries_exhausted += 1,
            Retry::NotRetried => {}
        }
    }

    /// An NDP message from `src` to `dst` in a fresh buffer.
    pub(super) fn ndp_message(&mut self, repr: &NdpRepr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Option<PacketBuf> {
        let mut bytes = [0u8; NEIGHBOR_MESSAGE_MAX_LEN];
        let len = repr.buffer_len();
        let out = bytes.get_mut(..len)?;
        repr.emit(out, src, dst).ok()?;
        match PacketBuf::from_slice(&self.pool, HEADROOM, out) {
            Ok(p) => Some(p),
            Err(_) => {
                self.counters.drop_no_buffer += 1;
                None
            }
        }
    }

    /// Asks the link for `target`'s link-layer address: to its
    /// solicited-node group, or to `unicast` when probing an address
    /// already known (RFC 4861 7.2.2, 7.3.3).
    pub(super) fn send_neighbor_solicit(&mut self, target: Ipv6Addr, unicast: Option<EthernetAddress>) {
        let Some(v6) = &self.v6 else { return };
        let Some(src) = v6.addrs.source_for(target) else { return };
        let dst = if unicast.is_some() { target } else { solicited_node(&target) };
        let solicit = NdpRepr::NeighborSolicit { target, lladdr: Some(self.config.mac) };
        let Some(message) = self.ndp_message(&solicit, src, dst) else { return };
        let mac = unicast.or_else(|| multicast_mac(&dst));
        if let Some(mac) = mac {
            let repr = Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, message.len(), NDP_HOP_LIMIT);
            if self.emit_ipv6(repr, message, mac) {
                self.counters.ndp_solicits_sent += 1;
            }
        }
    }

    /// Duplicate address detection's solicitation for our tentative
    /// `target`: from `::`, without a link-layer address, to its
    /// solicited-node group (RFC 4862 5.4.2).
    fn send_dad_solicit(&mut self, target: Ipv6Addr) {
        let dst = solicited_node(&target);
        let solicit = NdpRepr::NeighborSolicit { target, lladdr: None };
        let Some(message) = self.ndp_message(&solicit, Ipv6Addr::UNSPECIFIED, dst) else { return };
        let Some(mac) = multicast_mac(&dst) else { return };
        let repr = Ipv6Repr::new(Ipv6Addr::UNSPECIFIED, dst, IpProtocol::Icmpv6, message.len(), NDP_HOP_LIMIT);
        if self.emit_ipv6(repr, message, mac) {
            self.counters.ndp_solicits_sent += 1;
        }
    }

    /// Puts `repr` in front of `payload` and queues it for `mac`, with no
    /// resolution.
    pub(super) fn emit_ipv6(&mut self, repr: Ipv6Repr, mut payload: PacketBuf, mac: EthernetAddress) -> bool {
        let written = match payload.prepend(&self.pool, IPV6_HEADER_LEN) {
            Ok(header) => repr.emit(header).is_ok(),
            Err(_) => false,
        };
        if !written {
            self.counters.drop_no_buffer += 1;
            return false;
        }
        self.emit_ethernet(payload, mac, EtherType::Ipv6);
        true
    }

    /// Runs the IPv6 timers: duplicate address detection and address
    /// lifetimes, routers' lifetimes and solicitations, then the neighbour
    /// cache's retransmissions, state changes and give-ups.
    pub(super) fn poll_ipv6(&mut self, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        let dad = v6.addrs.poll(now);
        let neighbors = v6.neighbors.poll(now);
        self.counters.dad_succeeded += dad.preferred.len() as u64;
        self.counters.slaac_addresses_deprecated += dad.deprecated.len() as u64;
        self.counters.slaac_addresses_removed += dad.removed.len() as u64;
        self.poll_routers(now);
        self.leave_solicited_groups(&dad.removed);
        if dad.report_groups {
            self.send_mld_report();
        }
        self.poll_mld(now);
        for target in dad.solicit {
            self.send_dad_solicit(target);
        }
        self.counters.ndp_neighbors_failed += neighbors.failed.len() as u64;
        for neighbor in neighbors.failed {
            self.forget_redirects_through(neighbor);
            if let Some(v6) = self.v6.as_mut() {
                v6.routers.unreachable(neighbor);
            }
        }
        self.expire_redirects(now);
        self.counters.drop_ndp_unresolved += neighbors.dropped.len() as u64;
        for packet in &neighbors.dropped {
            self.neighbour6_unreachable(packet, now);
        }
        for (target, unicast) in neighbors.solicit {
            self.send_neighbor_solicit(target, unicast);
        }
    }

    /// An IPv6 packet of ours (from its fixed header on) was dropped: its
    /// next hop never answered neighbour discovery. A TCP connection still
    /// opening fails with host unreachable, as over IPv4 when ARP gives up
    /// (one already open rides it out: its retransmissions ask again).
    fn neighbour6_unreachable(&mut self, packet: &PacketBuf, now: Instant) {
        let mut head = [0u8; IPV6_HEADER_LEN + 4];
        if packet.copy_out(0, &mut head) < head.len() || head[6] != u8::from(IpProtocol::Tcp) {
            return;
        }
        let addr = |at: usize| {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&head[at..at + 16]);
            IpAddr::V6(Ipv6Addr::from(octets))
        };
        let port = |at: usize| u16::from_be_bytes([head[at], head[at + 1]]);
        let local = SocketAddr::new(addr(8), port(IPV6_HEADER_LEN));
        let remote = SocketAddr::new(addr(24), port(IPV6_HEADER_LEN + 2));
        self.tcp_unreachable(local, remote, TcpError::HostUnreachable, now);
    }
}
