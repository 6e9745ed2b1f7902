//! Named counters for everything the engine does, above all for every
//! reason it drops a packet: a drop that is not counted cannot be debugged.

macro_rules! counters {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[doc = $doc:expr])* $field:ident,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[doc = $doc])* pub $field: u64,)*
        }

        impl $name {
            /// Every counter by name, in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$((stringify!($field), self.$field),)*].into_iter()
            }
        }
    };
}

counters! {
    /// What the interface has seen and done since it was created.
    pub struct Counters {
        /// Frames handed to `receive`.
        rx_frames,
        /// Bytes handed to `receive`.
        rx_bytes,
        /// Frames queued for transmission.
        tx_frames,
        /// Bytes queued for transmission.
        tx_bytes,
        /// Dropped: frame shorter than an Ethernet header.
        drop_eth_truncated,
        /// Dropped: addressed to another station.
        drop_eth_not_for_us,
        /// Dropped: source address is multicast or broadcast.
        drop_eth_bad_source,
        /// Dropped: EtherType we do not speak (IPv6 too, on an interface
        /// without it; ARP and IPv4, on one without an IPv4 address).
        drop_eth_unknown_type,
        /// Dropped: ARP packet too short, or not Ethernet/IPv4.
        drop_arp_malformed,
        /// Dropped: ARP from another station claiming one of our addresses.
        drop_arp_conflict,
        /// Dropped: ARP for an address that is not ours.
        drop_arp_not_for_us,
        /// ARP requests answered.
        arp_replies_sent,
        /// ARP replies received for one of our addresses.
        arp_replies_received,
        /// ARP requests sent.
        arp_requests_sent,
        /// Dropped: packet waited for an ARP reply that never came.
        drop_arp_unresolved,
        /// Dropped: the queue of packets waiting for ARP was full.
        drop_arp_queue_full,
        /// Dropped: IPv4 header shorter than 20 bytes or than its IHL.
        drop_ip_truncated,
        /// Dropped: IPv4 version, IHL or total length inconsistent.
        drop_ip_malformed,
        /// Dropped: IPv4 header checksum wrong.
        drop_ip_checksum,
        /// Dropped: source address not a single host (RFC 1122 3.2.1.3) or ours.
        drop_ip_bad_source,
        /// Dropped: destination is not one of our addresses (we do not forward).
        drop_ip_not_for_us,
        /// Dropped: from the link to 127.0.0.0/8, which never leaves a host
        /// (RFC 1122 3.2.1.3).
        drop_ip_martian_destination,
        /// Dropped: transport protocol we do not serve.
        drop_ip_unknown_protocol,
        /// Dropped on output: no route to the destination.
        drop_ip_no_route,
        /// Fragments received.
        frag_received,
        /// Datagrams reassembled from fragments.
        frag_reassembled,
        /// Dropped: fragment overlapping another one (teardrop).
        drop_frag_overlap,
        /// Dropped: fragments ending past 65535 bytes (ping of death).
        drop_frag_oversize,
        /// Dropped: fragment offset/length inconsistent (non-final length not a multiple of 8, data past a known end).
        drop_frag_malformed,
        /// Dropped: exact duplicate of a fragment already held.
        drop_frag_duplicate,
        /// Dropped: reassembly memory or datagram limit reached.
        drop_frag_memory,
        /// Dropped: a partial datagram discarded to make room for others.
        drop_frag_evicted,
        /// Dropped: fragments of a datagram not completed in time.
        drop_frag_timeout,
        /// Fragments sent.
        frag_sent,
        /// Datagrams sent to a local address (ours, or 127.0.0.0/8) and received here.
        local_delivered,
        /// Dropped on output: too many datagrams to local addresses waiting.
        drop_local_queue_full,
        /// Dropped: ICMP message too short or malformed.
        drop_icmp_malformed,
        /// Dropped: ICMP checksum wrong.
        drop_icmp_checksum,
        /// Dropped: echo request to a broadcast address (ignored, as Linux does).
        drop_icmp_broadcast_echo,
        /// Echo requests answered.
        icmp_echo_replies_sent,
        /// Echo replies delivered to an echo socket.
        icmp_echo_replies_received,
        /// Echo replies received for no ICMP socket.
        drop_icmp_unmatched_reply,
        /// Dropped: an echo socket's queue was full.
        drop_icmp_socket_full,
        /// Destination-unreachable and time-exceeded messages received.
        icmp_errors_received,
        /// ICMP error messages sent.
        icmp_errors_sent,
        /// ICMP errors not sent because of the rate limit.
        icmp_errors_rate_limited,
        /// Dropped: ICMP type we do not handle.
        drop_icmp_unknown_type,
        /// Dropped: UDP header truncated or length field inconsistent.
        drop_udp_malformed,
        /// Dropped: UDP checksum wrong.
        drop_udp_checksum,
        /// Dropped: no socket bound to the port.
        drop_udp_no_socket,
        /// Dropped: the socket's receive queue was full.
        drop_udp_queue_full,
        /// Dropped: a UDP super-frame whose segment size, length or
        /// checksum state does not make datagrams of it.
        drop_udp_bad_segmentation,
        /// UDP datagrams delivered to sockets.
        udp_delivered,
        /// UDP datagrams sent (each datagram a super-frame stands for).
        udp_sent,
        /// UDP super-frames received and split into their datagrams.
        udp_super_frames_received,
        /// UDP super-frames sent whole to a device that cuts them.
        udp_super_frames_sent,
        /// Dropped: UDP over IPv6 with its header truncated or its length
        /// field inconsistent.
        drop_udp6_malformed,
        /// Dropped: UDP over IPv6 with a zero checksum, which IPv6 does
        /// not allow (RFC 8200 8.1).
        drop_udp6_zero_checksum,
        /// Dropped: UDP over IPv6 with a wrong checksum.
        drop_udp6_checksum,
        /// Dropped: UDP over IPv6 to a port no IPv6 socket is bound to.
        drop_udp6_no_socket,
        /// Dropped: UDP over IPv6 for a socket whose receive queue was full.
        drop_udp6_queue_full,
        /// UDP datagrams over IPv6 delivered to sockets.
        udp6_delivered,
        /// UDP datagrams sent over IPv6.
        udp6_sent,
        /// TCP segments received and handed on, over either family.
        tcp_segments_received,
        /// TCP segments sent by connections, over either family.
        tcp_segments_sent,
        /// Ignored: an ICMP or ICMPv6 destination unreachable quoting a TCP
        /// segment that no connection has in flight.
        drop_icmp_tcp_unverified,
        /// Of `tcp_segments_received`, those over IPv6.
        tcp6_segments_received,
        /// Of `tcp_segments_sent`, those over IPv6.
        tcp6_segments_sent,
        /// Dropped: TCP header truncated or options malformed.
        drop_tcp_malformed,
        /// Dropped: TCP checksum wrong.
        drop_tcp_checksum,
        /// Dropped: TCP to a broadcast address, or to a multicast one (or a
        /// link-layer group) over IPv6.
        drop_tcp_broadcast,
        /// Dropped: no connection or listener for the segment (answered with RST).
        drop_tcp_no_socket,
        /// Dropped: a segment a connection produced could not be sent.
        drop_tcp_send_failed,
        /// Dropped: RST to a listener.
        drop_tcp_listener_rst,
        /// RSTs sent for segments that reached no connection.
        tcp_resets_sent,
        /// Segments answered with an RFC 5961 challenge ACK.
        tcp_challenged,
        /// Active opens.
        tcp_connects,
        /// Active opens failed because their next hop never answered ARP.
        tcp_connects_unreachable,
        /// SYNs answered with a SYN cookie (SYN queue full).
        tcp_syn_cookies_sent,
        /// Connections made from a valid SYN cookie.
        tcp_syn_cookies_accepted,
        /// Dropped: a SYN from an unproven peer that the SYN guard refused
        /// during a flood (drops a device made for the guard are not seen).
        drop_tcp_syn_guard,
        /// Dropped: an ACK to a listener with an invalid cookie.
        drop_tcp_bad_cookie,
        /// Dropped: a SYN while the accept queue was full.
        drop_tcp_backlog_full,
        /// Dropped: a SYN (or a cookie's ACK) that would have made a
        /// connection past the interface's connection limit.
        drop_tcp_connection_limit,
        /// Handshakes given up in SYN-RECEIVED.
        tcp_handshake_timeouts,
        /// Connections in TIME-WAIT replaced by a new SYN (RFC 6191).
        tcp_time_wait_reused,
        /// IPv6 packets handed to the IPv6 input.
        ip6_received,
        /// Dropped: shorter than the IPv6 header, or than its payload
        /// length says.
        drop_ip6_truncated,
        /// Dropped: IP version other than 6 in an IPv6 frame.
        drop_ip6_bad_version,
        /// Dropped: multicast or loopback source, one of our preferred
        /// addresses as the source, or a loopback destination (RFC 4291
        /// 2.5.3, 2.7).
        drop_ip6_bad_source,
        /// Dropped: destination neither one of our addresses nor a group we
        /// joined.
        drop_ip6_not_for_us,
        /// Dropped: to one of our addresses still tentative (RFC 4862 5.4),
        /// other than neighbour discovery.
        drop_ip6_tentative_destination,
        /// Dropped: an extension header runs past the packet.
        drop_ip6_ext_truncated,
        /// Dropped: more extension headers than the walk goes through.
        drop_ip6_ext_too_many,
        /// Dropped: more extension header bytes than the walk goes through.
        drop_ip6_ext_too_long,
        /// Dropped: hop-by-hop options other than first (parameter problem
        /// sent).
        drop_ip6_ext_hop_by_hop_not_first,
        /// Dropped: an option's length runs past its header.
        drop_ip6_ext_bad_option,
        /// Dropped: an unknown option whose type says discard (with or
        /// without a parameter problem).
        drop_ip6_ext_unknown_option,
        /// Dropped: a routing header with segments left (parameter problem
        /// sent).
        drop_ip6_ext_routing,
        /// IPv6 fragments received (atomic fragments, which are whole, not
        /// counted).
        ip6_frag_received,
        /// IPv6 datagrams reassembled from fragments.
        ip6_frag_reassembled,
        /// Dropped: IPv6 fragment overlapping another one (RFC 5722); the
        /// datagram is discarded.
        drop_ip6_frag_overlap,
        /// Dropped: IPv6 fragments ending past 65535 bytes.
        drop_ip6_frag_oversize,
        /// Dropped: IPv6 fragment offset or length inconsistent (a length
        /// not a multiple of 8 with more to follow, data past a known end).
        drop_ip6_frag_malformed,
        /// Dropped: exact duplicate of an IPv6 fragment already held.
        drop_ip6_frag_duplicate,
        /// Dropped: IPv6 reassembly memory, datagram or fragment limit
        /// reached.
        drop_ip6_frag_memory,
        /// Partial IPv6 datagrams discarded to make room for newer ones.
        drop_ip6_frag_evicted,
        /// Dropped: fragments of an IPv6 datagram not completed in time.
        drop_ip6_frag_timeout,
        /// Dropped: a first fragment without the whole header chain up to
        /// the upper-layer header (RFC 7112; parameter problem sent).
        drop_ip6_frag_incomplete_chain,
        /// Dropped: a reassembled datagram holding another fragment header,
        /// or starting with hop-by-hop options.
        drop_ip6_frag_nested,
        /// IPv6 fragments sent.
        ip6_frag_sent,
        /// Dropped: an unknown next header (parameter problem sent).
        drop_ip6_unknown_next_header,
        /// Dropped: no next header (59) after the extension headers.
        drop_ip6_no_next_header,
        /// Dropped on output: the destination is not on the link.
        drop_ip6_no_route,
        /// Dropped: ICMPv6 message shorter than its header.
        drop_icmp6_truncated,
        /// Dropped: ICMPv6 checksum wrong.
        drop_icmp6_checksum,
        /// Dropped: echo request to a multicast group.
        drop_icmp6_multicast_echo,
        /// Dropped: ICMPv6 echo reply for no echo socket.
        drop_icmp6_unmatched_reply,
        /// Dropped: ICMPv6 informational type we do not serve (MLD
        /// included), or a neighbour discovery type a host does not take.
        drop_icmp6_unhandled_type,
        /// ICMPv6 echo requests answered.
        icmp6_echo_replies_sent,
        /// ICMPv6 echo requests sent by echo sockets.
        icmp6_echo_requests_sent,
        /// ICMPv6 echo replies delivered to echo sockets.
        icmp6_echo_replies_received,
        /// ICMPv6 error messages received.
        icmp6_errors_received,
        /// Path MTUs lowered by a checked "fragmentation needed" or
        /// "packet too big" message.
        pmtu_lowered,
        /// Checked path MTU messages ignored: they claimed no less than
        /// the path MTU already known (or the link's).
        pmtu_not_lower,
        /// Ignored: a path MTU message quoting no packet we have sent
        /// (another source, no such socket, a TCP sequence number outside
        /// what is in flight), RFC 5927.
        drop_pmtu_unverified,
        /// Ignored: a "fragmentation needed" claiming less than IPv4's
        /// path MTU floor (552).
        drop_pmtu_below_floor,
        /// "Packet too big" messages claiming less than 1280, taken as
        /// 1280.
        pmtu_raised_to_minimum,
        /// TCP connections whose send MSS went down with their path MTU.
        tcp_path_mss_lowered,
        /// Lowered path MTUs that expired (`InterfaceConfig::pmtu_expiry`
        /// after their last decrease): the link MTU is tried again.
        pmtu_expired,
        /// TCP connections whose send MSS went back up when their path
        /// MTU expired.
        tcp_path_mss_raised,
        /// ICMPv6 error messages sent.
        icmp6_errors_sent,
        /// ICMPv6 errors not sent because of the rate limit.
        icmp6_errors_rate_limited,
        /// Dropped: neighbour discovery with a hop limit other than 255
        /// (RFC 4861 7.1).
        drop_ndp_hop_limit,
        /// Dropped: neighbour discovery that fails RFC 4861's checks.
        drop_ndp_malformed,
        /// Dropped: neighbour solicitation for an address not ours.
        drop_ndp_not_for_us,
        /// Dropped: neighbour solicitation from a unicast source for one of
        /// our addresses still tentative (RFC 4862 5.4.3).
        drop_ndp_tentative_target,
        /// Dropped: neighbour advertisement from another node for one of our
        /// preferred addresses (the address is kept).
        drop_ndp_address_conflict,
        /// Neighbour solicitations received.
        ndp_solicits_received,
        /// Neighbour advertisements received.
        ndp_adverts_received,
        /// Neighbour solicitations sent (resolution, probes and duplicate
        /// address detection).
        ndp_solicits_sent,
        /// Neighbour advertisements sent.
        ndp_adverts_sent,
        /// Dropped: packet waited for a neighbour that never answered.
        drop_ndp_unresolved,
        /// Dropped: the queue of packets waiting for a neighbour was full.
        drop_ndp_queue_full,
        /// Neighbour entries given up (resolution or probing unanswered).
        ndp_neighbors_failed,
        /// Router advertisements taken (RFC 4861 6.1.2 checks passed).
        ndp_ra_received,
        /// Dropped: router advertisement failing RFC 4861 6.1.2 (a source
        /// not link-local, a hop limit other than 255, a code other than 0,
        /// a bad option); the reason's own counter counts it too.
        drop_ndp_ra_invalid,
        /// Router advertisements ignored: the configuration takes none.
        ndp_ra_ignored,
        /// Redirects taken (RFC 4861 8.1 checks passed): their destination's
        /// first hop changed.
        ndp_redirects_received,
        /// Dropped: redirect failing RFC 4861 8.1 (a hop limit other than
        /// 255, a source not link-local, a code other than 0, shorter than
        /// 40 bytes, a multicast destination, a target neither link-local
        /// nor the destination, a bad option, our own address as target
        /// or destination, or a source that is not the destination's first
        /// hop); the reason's own counter counts it too.
        drop_ndp_redirect_invalid,
        /// Dropped: redirect from another node than the destination's
        /// current first hop.
        drop_ndp_redirect_not_first_hop,
        /// Redirected destinations forgotten to make room for a new one
        /// (`MAX_REDIRECTS`).
        ndp_redirects_evicted,
        /// Redirects ignored: the configuration takes none.
        ndp_redirects_ignored,
        /// Redirected destinations whose lifetime ended
        /// (`Ipv6Config::redirect_lifetime`): back to the router lists.
        ndp_redirects_expired,
        /// Redirected destinations whose next hop went (a default router
        /// that left the list, a neighbour that stopped answering): back to
        /// the router lists.
        ndp_redirects_next_hop_gone,
        /// Router solicitations sent.
        ndp_rs_sent,
        /// Router solicitations received and ignored (a host answers none).
        ndp_rs_ignored,
        /// Default routers learned.
        ndp_routers_added,
        /// Default routers whose lifetime ended, or that advertised 0.
        ndp_routers_removed,
        /// New default routers refused: the list was full.
        ndp_router_limit,
        /// On-link prefixes learned.
        ndp_prefixes_added,
        /// On-link prefixes whose lifetime ended, or that advertised 0.
        ndp_prefixes_removed,
        /// New on-link prefixes refused: the list was full.
        ndp_prefix_limit,
        /// Link MTUs taken from router advertisements.
        ndp_mtu_updates,
        /// MTU options ignored: below 1280 or above the device's MTU.
        ndp_mtu_ignored,
        /// Addresses formed from routers' prefixes (RFC 4862 5.5.3).
        slaac_addresses,
        /// Autonomous prefixes forming no address: not 64 bits long,
        /// link-local, or a preferred lifetime past the valid one.
        slaac_prefix_ignored,
        /// New addresses from prefixes refused: the table was full.
        slaac_address_limit,
        /// Formed addresses whose preferred lifetime ended.
        slaac_addresses_deprecated,
        /// Formed addresses whose valid lifetime ended, removed.
        slaac_addresses_removed,
        /// MLDv2 reports sent (joins and leaves, retransmissions included).
        mld_reports_sent,
        /// MLDv2 reports sent again: the records of groups whose
        /// retransmissions are still owed, repeated as the Robustness
        /// Variable asks (RFC 3810 6.1).
        mld_reports_retransmitted,
        /// Records of groups joined or left dropped before all their
        /// retransmissions went, to bound the records owed
        /// (`MAX_PENDING_RECORDS`).
        mld_retransmissions_dropped,
        /// Solicited-node groups left (an MLDv2 change to include nothing)
        /// when the last address of ours in them was removed.
        mld_groups_left,
        /// Addresses that passed duplicate address detection.
        dad_succeeded,
        /// Addresses found duplicate (RFC 4862 5.4.5), never used.
        dad_duplicates,
        /// Duplicate addresses the interface made replaced by the next
        /// stable opaque identifier (RFC 7217 section 6).
        dad_iid_retries,
        /// Duplicate addresses the interface made left duplicate: every
        /// retry was spent.
        dad_iid_retries_exhausted,
        /// Dropped: the transmit queue was full.
        drop_tx_queue_full,
        /// Dropped: no packet buffer was free.
        drop_no_buffer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iter_names_every_counter() {
        let c = Counters { drop_ip_checksum: 3, ..Counters::default() };
        let found: alloc::vec::Vec<_> = c.iter().filter(|(_, v)| *v != 0).collect();
        assert_eq!(found, [("drop_ip_checksum", 3)]);
        assert!(c.iter().count() > 40);
    }
}
