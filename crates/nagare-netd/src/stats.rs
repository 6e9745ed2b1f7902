//! netd's counters: what it served, what it refused, and what it took back
//! from clients that left. Each counts one kind of event and only grows;
//! `nagare stat` shows every one of them.

/// Operation numbers [`NetdStats::requests_by_op`] has room for (those
/// of [`nagare_request::Op`] are 1 to 30).
pub const OPS: usize = 32;

/// netd's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetdStats {
    /// Clients admitted.
    pub clients_accepted: u64,
    /// Rendezvous that failed or were refused.
    pub clients_refused: u64,
    /// Clients whose socket closed (exit or death).
    pub clients_gone: u64,
    /// Clients disconnected for breaking a ring or too many bad descriptors.
    pub clients_broken: u64,
    /// Requests decoded and run.
    pub requests: u64,
    /// The same, by operation: index `n` counts operation `n`
    /// ([`nagare_request::Op`]), so `nagare stat` shows what a program's
    /// calls cost in requests.
    pub requests_by_op: [u64; OPS],
    /// Waiting requests run again (a receive or accept whose socket has
    /// nothing for it is not).
    pub waits_rerun: u64,
    /// Waiting requests whose socket was looked at again to see whether
    /// they may run (a receive or accept parked on a socket that had no
    /// event is not).
    pub waits_checked: u64,
    /// Completions posted.
    pub completions: u64,
    /// Descriptors refused by the protocol check.
    pub bad_descriptors: u64,
    /// Descriptors naming a buffer the client does not own, or a bad extent.
    pub bad_buffers: u64,
    /// Sockets closed or reset because their client went away.
    pub sockets_reclaimed: u64,
    /// Buffers returned from departed clients.
    pub buffers_reclaimed: u64,
    /// Buffers a departed client's table still showed in use (should be 0).
    pub buffers_leaked: u64,
    /// Device errors (counted and waited out).
    pub device_errors: u64,
    /// Times the loop slept.
    pub sleeps: u64,
    /// ICMP errors a connected UDP socket's send or receive failed with.
    pub udp_errors_reported: u64,
    /// Datagrams sent without a copy: the application's buffer lent to the
    /// engine and named in place to the driver.
    pub sends_in_place: u64,
    /// Payload bytes copied on the way out (TCP, ping, local datagrams).
    pub tx_payload_copied: u64,
    /// Payload bytes sent without a copy.
    pub tx_payload_in_place: u64,
    /// Payload bytes copied into applications' buffers on the way in.
    pub rx_payload_copied: u64,
    /// Payload bytes received without a copy: steered into the client's
    /// region by the driver and handed over in the buffer they lie in.
    pub rx_payload_in_place: u64,
    /// Binds to a port another client had, answered only once the driver
    /// had applied the port's change of hands.
    pub binds_held: u64,
    /// Binds to a port below the unprivileged start refused (`EACCES`):
    /// the client lacks `CAP_NET_BIND_SERVICE`.
    pub ports_refused: u64,
    /// Sockets refused (`ENOBUFS`) because their client's budget or netd's
    /// cap had no room for buffers at the floor.
    pub memory_refused: u64,
    /// Sockets given smaller buffers than they asked for, to fit a
    /// budget (new connections and resizes).
    pub buffers_shrunk: u64,
    /// TCP receive buffers granted more room for their autotuning.
    pub recv_buffers_grown: u64,
    /// Growths a TCP receive buffer's autotuning wanted that its client's
    /// budget or netd's cap had no room for.
    pub recv_buffer_growth_refused: u64,
    /// TCP send buffers granted more room for their autotuning.
    pub send_buffers_grown: u64,
    /// Growths a TCP send buffer's autotuning wanted that its client's
    /// budget or netd's cap had no room for.
    pub send_buffer_growth_refused: u64,
    /// Closes that reset their connection because `max_orphans` closed
    /// connections were still held.
    pub orphans_reset: u64,
    /// Requests a client posted before it went away, run as netd let it
    /// go.
    pub last_requests: u64,
    /// Connects refused (`ENFILE`) at the engine's connection limit.
    pub connections_refused: u64,
    /// UDP datagrams PacketFlow's filter dropped for a receiver of less
    /// than high priority while the receive path was dropping.
    pub filter_dropped_low_priority: u64,
    /// UDP datagrams PacketFlow's filter dropped for a socket whose queue
    /// would not take them.
    pub filter_dropped_overflow: u64,
    /// Pauses of the device's reads after a full batch whose datagrams
    /// were all for full queues.
    pub receive_pauses: u64,
    /// Holds of a client's TAP queue after a datagram for its full
    /// socket.
    pub queue_holds: u64,
    /// Boosts PacketFlow's scheduler began.
    pub boosts: u64,
    /// Boosts whose process netd could not lift (no `CAP_SYS_NICE`): the
    /// client was still lifted in netd's own order.
    pub lifts_refused: u64,
    /// UDP receive queues PacketFlow's memory manager grew, each when a
    /// datagram would not fit.
    pub mm_grown: u64,
    /// Growths the memory manager refused a full queue below its maximum
    /// because its client's budget or netd's cap had no room.
    pub mm_refused: u64,
}

#[cfg(test)]
mod tests {
    use super::OPS;
    use nagare_request::Op;

    #[test]
    fn every_operation_has_its_count() {
        let ops: Vec<Op> = (0..=u16::MAX).filter_map(Op::from_u16).collect();
        assert!(ops.len() >= 30, "{} operations", ops.len());
        for op in ops {
            assert!((op as usize) < OPS, "{op:?} is past the {OPS} counts");
        }
    }
}
