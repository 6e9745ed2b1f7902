//! IPv6 on the interface: validating received packets, walking their
//! extension headers and handing ICMPv6, UDP and TCP to their inputs
//! (`icmpv6.rs`, `crate::udp`, `crate::tcp`); choosing the source of
//! packets we send and resolving their next hop through the neighbour
//! cache (`ndp.rs`).
//!
//! What is accepted: packets to one of our addresses, to the all-nodes
//! group, or to the solicited-node group of one of our addresses. What is
//! refused and counted: a payload length past the frame, a multicast or
//! loopback source, an extension header chain the walk refuses (answered
//! with a parameter problem where RFC 8200 asks for one). Fragments are
//! reassembled (`crate::ipv6::reassembly`) and the whole datagram walked
//! and handed on as if it had come so; packets past the MTU (the link's,
//! lowered by a router's MTU option) are sent in fragments, identified
//! per destination (`crate::ipv6::frag_ident`). Nothing is forwarded;
//! an off-link destination is sent to a default router
//! (`crate::ipv6::router` chooses the next hop).

use super::{Error, Interface};
use crate::buf::PacketBuf;
use crate::config::{Ipv6Config, Secrets};
use crate::ipv6::addr::{AddrState, Ipv6Addresses, LINK_LOCAL};
use crate::ipv6::frag_ident::FragIdents;
use crate::ipv6::fragment::fragment;
use crate::ipv6::iid::IidGenerator;
use crate::ipv6::mld::StateChanges;
use crate::ipv6::neighbor::{NeighborCache, Resolution};
use crate::ipv6::reassembly::{holds_header_chain, DropReason, Outcome, Reassembler};
use crate::ipv6::redirect::Redirects;
use crate::ipv6::router::Routers;
use crate::time::Instant;
use core::net::{IpAddr, Ipv6Addr};
use nagare_wire::{
    multicast_mac, solicited_node, EtherType, EthernetAddress, Icmpv6Message, Icmpv6ParamProblem, IpProtocol,
    Ipv6ExtChain, Ipv6ExtError, Ipv6FragmentRepr, Ipv6OptionAction, Ipv6Packet, Ipv6Repr, IPV6_ALL_NODES,
    IPV6_EXT_HEADER_MAX_LEN, IPV6_EXT_MAX_HEADERS, IPV6_EXT_MAX_LEN, IPV6_FRAGMENT_HEADER_LEN, IPV6_HEADER_LEN,
    IPV6_MAX_PAYLOAD_LEN,
};

/// ICMPv6 Parameter Problem code 3: the first fragment lacks part of the
/// header chain (RFC 7112 5).
const PARAM_PROBLEM_INCOMPLETE_CHAIN: u8 = 3;
/// ICMPv6 Time Exceeded code 1: fragment reassembly time exceeded.
const TIME_EXCEEDED_REASSEMBLY: u8 = 1;

/// Extension header bytes copied out of a packet that straddles buffers:
/// enough for the walk to reach its length limit with a whole header.
const EXT_WALK_LEN: usize = IPV6_EXT_MAX_LEN + IPV6_EXT_HEADER_MAX_LEN;

/// The IPv6 state of an interface that speaks it.
#[derive(Debug)]
pub(crate) struct Ipv6State {
    pub(super) addrs: Ipv6Addresses,
    pub(super) neighbors: NeighborCache,
    pub(super) reassembler: Reassembler,
    /// Default routers, on-link prefixes and the link MTU (`router.rs`).
    pub(super) routers: Routers,
    /// First hops redirects gave (`redirect.rs`), before the router lists.
    pub(super) redirects: Redirects,
    /// The MLDv2 records of groups joined and left that are owed
    /// retransmissions (`crate::ipv6::mld`).
    pub(super) mld: StateChanges,
    pub(super) hop_limit: u8,
    /// Identifications of datagrams sent in fragments, per destination
    /// and keyed, so that they cannot be guessed from outside.
    frag_idents: FragIdents,
}

impl Ipv6State {
    /// The link-local address the interface makes (its interface
    /// identifier as `config.interface_ids` says), then the configured
    /// ones, all tentative.
    pub(super) fn new(config: &Ipv6Config, mac: EthernetAddress, seed: u64, secrets: &Secrets) -> Self {
        let ids = IidGenerator::new(config.interface_ids, secrets.stable_iid, mac);
        let mut addrs = Ipv6Addresses::new(
            config.dad_transmits,
            config.ndp.retrans_timer,
            config.dad_max_delay,
            seed ^ 0x6e64,
            ids,
        );
        addrs.add_generated(LINK_LOCAL, None);
        for cidr in &config.addresses {
            addrs.add(*cidr);
        }
        Ipv6State {
            addrs,
            neighbors: NeighborCache::new(config.ndp.clone()),
            reassembler: Reassembler::new(config.reassembly.clone()),
            routers: super::router::routers_for(config, seed),
            redirects: Redirects::new(config.redirect_lifetime),
            mld: StateChanges::new(config.mld_robustness, config.mld_unsolicited_report_interval, seed ^ 0x6d6c_6476),
            hop_limit: config.hop_limit,
            frag_idents: FragIdents::new(secrets.frag_ident),
        }
    }

    /// The next hop of a packet to `dst` (RFC 4861 5.2): the group itself
    /// for a multicast one, else what a redirect gave, else what the
    /// router lists give; `None` without a route.
    pub(super) fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if dst.is_multicast() {
            return Some(dst);
        }
        self.redirects.next_hop(dst).or_else(|| self.routers.next_hop(&self.addrs, &self.neighbors, dst))
    }
}

/// How a refused extension header chain is counted.
fn ext_error_counter<'a>(c: &'a mut crate::counters::Counters, e: &Ipv6ExtError) -> &'a mut u64 {
    match e {
        Ipv6ExtError::Truncated => &mut c.drop_ip6_ext_truncated,
        Ipv6ExtError::TooManyHeaders => &mut c.drop_ip6_ext_too_many,
        Ipv6ExtError::TooLong => &mut c.drop_ip6_ext_too_long,
        Ipv6ExtError::HopByHopNotFirst { .. } => &mut c.drop_ip6_ext_hop_by_hop_not_first,
        Ipv6ExtError::BadOption { .. } => &mut c.drop_ip6_ext_bad_option,
        Ipv6ExtError::UnknownOption { .. } => &mut c.drop_ip6_ext_unknown_option,
        Ipv6ExtError::RoutingType0 { .. } | Ipv6ExtError::UnknownRoutingType { .. } => &mut c.drop_ip6_ext_routing,
    }
}

/// Whether the upper layer of an IPv6 payload whose walk was refused is an
/// ICMPv6 error message, found by skipping extension headers by their
/// length alone (at most as many as the walk goes through). Unsure (past
/// the bytes, behind a fragment that is not the first) counts as no.
fn carries_icmp6_error(next_header: IpProtocol, payload: &[u8]) -> bool {
    let mut next = next_header;
    let mut at = 0usize;
    for _ in 0..=IPV6_EXT_MAX_HEADERS {
        let (Some(&nh), Some(&len)) = (payload.get(at), payload.get(at + 1)) else {
            return false;
        };
        match next {
            IpProtocol::Icmpv6 => return nh < 128,
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route => {
                at += (usize::from(len) + 1) * 8;
            }
            IpProtocol::Ipv6Frag => {
                let first = payload.get(at + 2..at + 4).is_some_and(|o| o[0] == 0 && o[1] & 0xf8 == 0);
                if !first {
                    return false;
                }
                at += IPV6_FRAGMENT_HEADER_LEN;
            }
            _ => return false,
        }
        next = IpProtocol::from(nh);
    }
    false
}

impl Interface {
    /// Whether the Ethernet multicast `mac` is one of a group we joined:
    /// all-nodes, or the solicited-node group of one of our addresses.
    pub(super) fn joined_link_group(&self, mac: EthernetAddress) -> bool {
        let Some(v6) = &self.v6 else { return false };
        multicast_mac(&IPV6_ALL_NODES) == Some(mac)
            || v6
                .addrs
                .iter()
                .any(|a| a.state != AddrState::Duplicate && multicast_mac(&solicited_node(&a.address())) == Some(mac))
    }

    /// The source for a packet to `dst`: a preferred address of its scope
    /// (`dst` itself when it is ours), `::1` for `::1`.
    pub fn ipv6_source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let v6 = self.v6.as_ref()?;
        if dst.is_loopback() {
            return Some(Ipv6Addr::LOCALHOST);
        }
        v6.addrs.source_for(dst)
    }

    /// An IPv6 packet sent to a local address (`local.rs`), from its
    /// header on: neither its source (ours, or `::1`) nor its destination
    /// (`::1`) is refused as one from the link would be.
    pub(super) fn receive_ipv6_local(&mut self, packet: PacketBuf, now: Instant) {
        let Some(v6) = &self.v6 else { return };
        self.counters.ip6_received += 1;
        let Some(fixed) = packet.header::<IPV6_HEADER_LEN>() else {
            self.counters.drop_ip6_truncated += 1;
            return;
        };
        let view = Ipv6Packet::new_unchecked(&fixed[..]);
        let repr = Ipv6Repr {
            src_addr: view.src_addr(),
            dst_addr: view.dst_addr(),
            next_header: view.next_header(),
            payload_len: usize::from(view.payload_len()),
            hop_limit: view.hop_limit(),
            traffic_class: view.traffic_class(),
            flow_label: view.flow_label(),
        };
        let dst_state = v6.addrs.state(repr.dst_addr);
        self.receive_ipv6_payload(&repr, dst_state, packet, false, false, now);
    }

    /// An IPv6 packet (Ethernet header stripped); `link_multicast`: the
    /// frame came to a link-layer group or broadcast address.
    pub(super) fn receive_ipv6(&mut self, mut packet: PacketBuf, now: Instant, link_multicast: bool) {
        let Some(v6) = &self.v6 else {
            self.counters.drop_eth_unknown_type += 1;
            return;
        };
        self.counters.ip6_received += 1;
        let Some(fixed) = packet.header::<IPV6_HEADER_LEN>() else {
            self.counters.drop_ip6_truncated += 1;
            return;
        };
        let view = Ipv6Packet::new_unchecked(&fixed[..]);
        if view.version() != 6 {
            self.counters.drop_ip6_bad_version += 1;
            return;
        }
        let repr = Ipv6Repr {
            src_addr: view.src_addr(),
            dst_addr: view.dst_addr(),
            next_header: view.next_header(),
            payload_len: usize::from(view.payload_len()),
            hop_limit: view.hop_limit(),
            traffic_class: view.traffic_class(),
            flow_label: view.flow_label(),
        };
        let total_len = IPV6_HEADER_LEN + repr.payload_len;
        if total_len > packet.len() {
            self.counters.drop_ip6_truncated += 1;
            return;
        }
        let (src, dst) = (repr.src_addr, repr.dst_addr);
        // One of our preferred addresses as the source is a loop or a lie;
        // a tentative one is how another node defends it in detection.
        if src.is_multicast() || src.is_loopback() || dst.is_loopback() || v6.addrs.is_preferred(src) {
            self.counters.drop_ip6_bad_source += 1;
            return;
        }
        let dst_state = v6.addrs.state(dst);
        let for_us = match dst_state {
            Some(state) => state != AddrState::Duplicate,
            None => dst == IPV6_ALL_NODES || v6.addrs.is_joined_solicited(dst),
        };
        if !for_us {
            self.counters.drop_ip6_not_for_us += 1;
            return;
        }
        // Drop the link layer's padding.
        packet.truncate(total_len);
        self.receive_ipv6_payload(&repr, dst_state, packet, link_multicast, false, now);
    }

    /// An IPv6 packet for us (from its fixed header on, `repr` that
    /// header's): its extension headers walked, then a fragment to
    /// reassembly or the upper layer to its input. `reassembled`: the
    /// packet is a datagram put together from fragments, which may not
    /// hold another fragment.
    fn receive_ipv6_payload(
        &mut self,
        repr: &Ipv6Repr,
        dst_state: Option<AddrState>,
        mut packet: PacketBuf,
        link_multicast: bool,
        reassembled: bool,
        now: Instant,
    ) {
        // The chain is walked where it lies; copied out (a stack buffer
        // filled only then) when it straddles buffers.
        let walk = |bytes: &[u8]| {
            let walked = Ipv6ExtChain::walk(repr.next_header, bytes);
            let about_error = walked.is_err() && carries_icmp6_error(repr.next_header, bytes);
            (walked, about_error)
        };
        let walk_len = repr.payload_len.min(EXT_WALK_LEN);
        let walked = match packet.contiguous_prefix(IPV6_HEADER_LEN + walk_len) {
            Some(b) => walk(b.get(IPV6_HEADER_LEN..).unwrap_or(&[])),
            None => {
                let mut scratch = [0u8; EXT_WALK_LEN];
                let out = scratch.get_mut(..walk_len).unwrap_or(&mut []);
                let n = packet.copy_out(IPV6_HEADER_LEN, out);
                walk(out.get(..n).unwrap_or(&[]))
            }
        };
        let chain = match walked {
            (Ok(chain), _) => chain,
            (Err(e), about_error) => {
                *ext_error_counter(&mut self.counters, &e) += 1;
                // RFC 4443 2.4 (e.1): no error about an error.
                let answer = Icmpv6ParamProblem::for_ext_error(&e).filter(|_| !about_error);
                if let Some((code, pointer)) = answer {
                    // RFC 4443 2.4 (e.3): an unknown option of type 10xxxxxx
                    // is reported even to a multicast destination.
                    let even_multicast =
                        matches!(e, Ipv6ExtError::UnknownOption { action: Ipv6OptionAction::DiscardAndIcmp, .. });
                    let kind = (Icmpv6Message::ParamProblem, u8::from(code), pointer);
                    self.send_icmp6_error(kind, repr, &packet, link_multicast, even_multicast, now);
                }
                return;
            }
        };
        let tentative = dst_state == Some(AddrState::Tentative);
        if let Some((_, fragment)) = chain.fragment.filter(|(_, f)| !f.is_atomic()) {
            if reassembled {
                self.counters.drop_ip6_frag_nested += 1;
            } else if tentative {
                // Only neighbour discovery reaches a tentative address, and
                // it is never fragmented.
                self.counters.drop_ip6_tentative_destination += 1;
            } else {
                self.receive_ipv6_fragment(repr, &fragment, packet, chain.offset, link_multicast, now);
            }
            return;
        }
        if tentative && chain.upper != IpProtocol::Icmpv6 {
            self.counters.drop_ip6_tentative_destination += 1;
            return;
        }
        match chain.upper {
            IpProtocol::Icmpv6 => {
                packet.trim_front(IPV6_HEADER_LEN + chain.offset);
                self.receive_icmpv6(repr, packet, tentative, now);
            }
            IpProtocol::Udp => {
                self.receive_udp6(repr, packet, IPV6_HEADER_LEN + chain.offset, link_multicast, now);
            }
            IpProtocol::Tcp => {
                packet.trim_front(IPV6_HEADER_LEN + chain.offset);
                let after_fixed_header = chain.offset == 0 && !reassembled;
                self.receive_tcp6(repr, packet, link_multicast, after_fixed_header, now);
            }
            IpProtocol::Ipv6NoNxt => self.counters.drop_ip6_no_next_header += 1,
            _ => {
                self.counters.drop_ip6_unknown_next_header += 1;
                let code = u8::from(Icmpv6ParamProblem::UnrecognizedNextHeader);
                let kind = (Icmpv6Message::ParamProblem, code, chain.next_header_pointer);
                self.send_icmp6_error(kind, repr, &packet, link_multicast, false, now);
            }
        }
    }

    /// A fragment for us: `packet` from its IPv6 header on, the fragment's
    /// data `data_at` bytes into the IPv6 payload. A first fragment without
    /// the whole header chain is refused (RFC 7112); a datagram made whole
    /// goes through the walk again under a header made from its first
    /// fragment's.
    fn receive_ipv6_fragment(
        &mut self,
        repr: &Ipv6Repr,
        fragment: &Ipv6FragmentRepr,
        mut packet: PacketBuf,
        data_at: usize,
        link_multicast: bool,
        now: Instant,
    ) {
        self.counters.ip6_frag_received += 1;
        let data_start = IPV6_HEADER_LEN + data_at;
        if fragment.frag_offset == 0 {
            let whole_chain = packet
                .slice(data_start, packet.len().saturating_sub(data_start))
                .is_some_and(|data| holds_header_chain(fragment.next_header, &data));
            if !whole_chain {
                self.counters.drop_ip6_frag_incomplete_chain += 1;
                let kind = (Icmpv6Message::ParamProblem, PARAM_PROBLEM_INCOMPLETE_CHAIN, 0);
                self.send_icmp6_error(kind, repr, &packet, link_multicast, false, now);
                return;
            }
        }
        packet.trim_front(data_start);
        let Some(v6) = self.v6.as_mut() else { return };
        let outcome = v6.reassembler.input(repr, fragment, packet, now);
        self.counters.drop_ip6_frag_evicted += v6.reassembler.take_evictions() as u64;
        let (whole, mut payload) = match outcome {
            Outcome::Complete(whole, payload) => (whole, payload),
            Outcome::Held => return,
            Outcome::Dropped(reason) => {
                *match reason {
                    DropReason::Overlap => &mut self.counters.drop_ip6_frag_overlap,
                    DropReason::Oversize => &mut self.counters.drop_ip6_frag_oversize,
                    DropReason::Malformed => &mut self.counters.drop_ip6_frag_malformed,
                    DropReason::Duplicate => &mut self.counters.drop_ip6_frag_duplicate,
                    DropReason::Memory => &mut self.counters.drop_ip6_frag_memory,
                } += 1;
                return;
            }
        };
        self.counters.ip6_frag_reassembled += 1;
        // Hop-by-hop options come only straight after the IPv6 header,
        // never after a fragment header (RFC 8200 4.1).
        if whole.next_header == IpProtocol::HopByHop {
            self.counters.drop_ip6_frag_nested += 1;
            return;
        }
        let dst_state = v6.addrs.state(whole.dst_addr);
        let emitted = match payload.prepend(&self.pool, IPV6_HEADER_LEN) {
            Ok(header) => whole.emit(header).is_ok(),
            Err(_) => false,
        };
        if !emitted {
            self.counters.drop_no_buffer += 1;
            return;
        }
        if dst_state.is_none_or(|s| s == AddrState::Duplicate) && !whole.dst_addr.is_multicast() {
            self.counters.drop_ip6_not_for_us += 1;
            return;
        }
        self.receive_ipv6_payload(&whole, dst_state, payload, link_multicast, true, now);
    }

    /// Discards partial datagrams whose time ran out, telling the sender
    /// of each whose first fragment came (ICMPv6 Time Exceeded, code 1,
    /// quoting that fragment).
    pub(super) fn poll_ipv6_reassembly(&mut self, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        let (expired, firsts) = v6.reassembler.poll(now);
        self.counters.drop_ip6_frag_timeout += expired as u64;
        for first in firsts {
            let mut quote = first.data;
            let written = match quote.prepend(&self.pool, IPV6_HEADER_LEN + IPV6_FRAGMENT_HEADER_LEN) {
                Ok(headers) => {
                    let (ip, frag) = headers.split_at_mut(IPV6_HEADER_LEN);
                    first.header.emit(ip).is_ok() && first.fragment.emit(frag).is_ok()
                }
                Err(_) => false,
            };
            if !written {
                self.counters.drop_no_buffer += 1;
                continue;
            }
            let kind = (Icmpv6Message::TimeExceeded, TIME_EXCEEDED_REASSEMBLY, 0);
            self.send_icmp6_error(kind, &first.header, &quote, false, false, now);
        }
    }

    /// Sends an IPv6 packet: `payload` (the upper-layer header and data)
    /// behind a header from `src` (chosen for `dst` when `None`: a
    /// preferred address of `dst`'s scope) with `hop_limit` (the
    /// configured one when `None`). Multicast goes to its 33:33 group
    /// address; unicast to its next hop (the destination on the link, a
    /// default router otherwise), resolved through the neighbour cache,
    /// waiting there if need be. A packet past the path MTU of `dst` (the
    /// link's unless a router said less) goes in fragments
    /// (each on the same way), all of them or none, unless its offload asks
    /// the device to cut it. One to a local address (`::1`, or ours past
    /// duplicate address detection; its source `dst` itself when `None`)
    /// is delivered here, whole, by the next poll (`local.rs`); one to an
    /// address of ours still tentative or found duplicate is refused, and
    /// so is one from `::1` to an address that is not local.
    pub fn send_ipv6(
        &mut self,
        src: Option<Ipv6Addr>,
        dst: Ipv6Addr,
        next_header: IpProtocol,
        mut payload: PacketBuf,
        hop_limit: Option<u8>,
        now: Instant,
    ) -> Result<(), Error> {
        if self.is_local6(dst) {
            if payload.len() > IPV6_MAX_PAYLOAD_LEN {
                return Err(Error::MessageTooLong);
            }
            let v6 = self.v6.as_ref().ok_or(Error::Unaddressable)?;
            let src = src.unwrap_or(dst);
            let repr = Ipv6Repr::new(src, dst, next_header, payload.len(), hop_limit.unwrap_or(v6.hop_limit));
            return self.send_local6(repr, payload);
        }
        let v6 = self.v6.as_ref().ok_or(Error::Unaddressable)?;
        if dst.is_unspecified() || dst.is_loopback() || v6.addrs.get(dst).is_some() {
            return Err(Error::Unaddressable);
        }
        if src.is_some_and(|s| s.is_loopback()) {
            // `::1` never appears on the link (RFC 4291 2.5.3).
            return Err(Error::Unaddressable);
        }
        let src = match src {
            Some(src) => src,
            None => v6.addrs.source_for(dst).ok_or(Error::AddrNotAvailable)?,
        };
        let Some(next_hop) = v6.next_hop(dst) else {
            self.counters.drop_ip6_no_route += 1;
            return Err(Error::NoRoute);
        };
        let mtu = self.path_mtu(IpAddr::V6(dst), now);
        if payload.len() > IPV6_MAX_PAYLOAD_LEN {
            return Err(Error::MessageTooLong);
        }
        let repr = Ipv6Repr::new(src, dst, next_header, payload.len(), hop_limit.unwrap_or(v6.hop_limit));
        // A super-segment (a segment size in its offload) is the device's
        // to cut, never fragmented.
        if payload.len() + IPV6_HEADER_LEN > mtu && payload.offload().segment_size == 0 {
            return self.send_ipv6_fragments(&repr, payload, (next_hop, mtu), now);
        }
        let Ok(header) = payload.prepend(&self.pool, IPV6_HEADER_LEN) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        repr.emit(header).map_err(|_| Error::MessageTooLong)?;
        match multicast_mac(&dst) {
            Some(group) => self.emit_ethernet(payload, group, EtherType::Ipv6),
            None => self.send_to_neighbor(next_hop, payload, now),
        }
        Ok(())
    }

    /// Sends the packet with header `repr` and `payload` to `next_hop` in
    /// fragments that fit `mtu`. Headers for every fragment are written
    /// first: a datagram goes out whole or not at all, never as a prefix
    /// the receiver can only time out on.
    fn send_ipv6_fragments(
        &mut self,
        repr: &Ipv6Repr,
        payload: PacketBuf,
        (next_hop, mtu): (Ipv6Addr, usize),
        now: Instant,
    ) -> Result<(), Error> {
        let v6 = self.v6.as_mut().ok_or(Error::Unaddressable)?;
        let ident = v6.frag_idents.next(repr.src_addr, repr.dst_addr);
        let mut pieces = fragment(repr, &payload, mtu, ident).ok_or(Error::MessageTooLong)?;
        drop(payload);
        for (header, frag, piece) in pieces.iter_mut() {
            let Ok(headers) = piece.prepend(&self.pool, IPV6_HEADER_LEN + IPV6_FRAGMENT_HEADER_LEN) else {
                self.counters.drop_no_buffer += 1;
                return Err(Error::NoBuffer);
            };
            let (ip, fh) = headers.split_at_mut(IPV6_HEADER_LEN);
            header.emit(ip).map_err(|_| Error::MessageTooLong)?;
            frag.emit(fh).map_err(|_| Error::MessageTooLong)?;
        }
        let group = multicast_mac(&repr.dst_addr);
        for (_, _, piece) in pieces {
            self.counters.ip6_frag_sent += 1;
            match group {
                Some(group) => self.emit_ethernet(piece, group, EtherType::Ipv6),
                None => self.send_to_neighbor(next_hop, piece, now),
            }
        }
        Ok(())
    }

    /// Hands an IPv6 packet to the link once the neighbour cache knows
    /// `next_hop`'s link-layer address.
    fn send_to_neighbor(&mut self, next_hop: Ipv6Addr, packet: PacketBuf, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        match v6.neighbors.resolve(next_hop, packet, now) {
            (Resolution::Known(mac), Some(packet)) => self.emit_ethernet(packet, mac, EtherType::Ipv6),
            (Resolution::Solicit, _) => self.send_neighbor_solicit(next_hop, None),
            (Resolution::QueueFull, _) => self.counters.drop_ndp_queue_full += 1,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_icmpv6_error_is_found_behind_extension_headers() {
        let opts = |next: u8| [next, 0, 0x9e, 4, 0, 0, 0, 0];
        let mut p = opts(60).to_vec();
        p.extend(opts(58));
        p.extend([1, 4, 0, 0, 0, 0, 0, 0]);
        assert!(carries_icmp6_error(IpProtocol::Ipv6Opts, &p));
        let echo = [128, 0, 0, 0, 0, 0, 0, 0];
        assert!(!carries_icmp6_error(IpProtocol::Ipv6Opts, &[&opts(58)[..], &echo].concat()));
        // A first fragment shows it; a later one does not.
        let first = [58, 0, 0, 1, 0, 0, 0, 9];
        assert!(carries_icmp6_error(IpProtocol::Ipv6Frag, &[&first[..], &[3, 0, 0, 0]].concat()));
        let later = [58, 0, 0, 9, 0, 0, 0, 9];
        assert!(!carries_icmp6_error(IpProtocol::Ipv6Frag, &[&later[..], &[3, 0, 0, 0]].concat()));
        // Cut short, or past the walk's count of headers: no.
        assert!(!carries_icmp6_error(IpProtocol::Ipv6Opts, &opts(58)));
        let deep: alloc::vec::Vec<u8> = (0..9).flat_map(|_| opts(60)).collect();
        assert!(!carries_icmp6_error(IpProtocol::Ipv6Opts, &deep));
    }
}
