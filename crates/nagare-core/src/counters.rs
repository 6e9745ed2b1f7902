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
        /// Dropped: EtherType we do not speak (IPv6 included).
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
        /// TCP segments received and handed on.
        tcp_segments_received,
        /// TCP segments sent by connections.
        tcp_segments_sent,
        /// Dropped: TCP header truncated or options malformed.
        drop_tcp_malformed,
        /// Dropped: TCP checksum wrong.
        drop_tcp_checksum,
        /// Dropped: TCP to a broadcast address.
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
