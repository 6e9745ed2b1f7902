//! What TCP connections send, and their timers: every path that changes a
//! connection (input, timers, socket calls) ends in `tcp_run`, which sends
//! what the connection has due and files its next deadline in the timer
//! heap.

use super::connection::{State, TcpError};
use super::sockets::{FourTuple, TcpHandle};
use crate::buf::{Offload, PacketBuf};
use crate::iface::{Error, Interface};
use crate::time::Instant;
use core::cmp::Reverse;
use core::net::{IpAddr, SocketAddr};
use nagare_wire::{Checksum, IpProtocol, Ipv4Repr, TcpRepr};

impl Interface {
    /// Sends what a connection has due, then files its next timer, and
    /// forgets it once it is closed and nobody holds it.
    pub(super) fn tcp_run(&mut self, handle: TcpHandle, now: Instant) {
        // Every path that changes a connection (input, timers, socket
        // calls) ends here.
        self.tcp.note_event(handle);
        let mut outbox = core::mem::take(&mut self.tcp.outbox);
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            self.tcp.outbox = outbox;
            return;
        };
        entry.conn.dispatch(now, &mut |repr, payload| outbox.push((repr, payload)));
        let (local, remote) = (entry.conn.local(), entry.conn.remote());
        let segment_size = entry.conn.segment_payload_limit();
        for (repr, payload) in outbox.drain(..) {
            match self.send_tcp_segment(local, remote, repr, payload, segment_size, now) {
                Ok(()) => {
                    self.counters.tcp_segments_sent += 1;
                    self.counters.tcp6_segments_sent += u64::from(remote.is_ipv6());
                }
                Err(_) => self.counters.drop_tcp_send_failed += 1,
            }
        }
        self.tcp.outbox = outbox;
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            return;
        };
        if entry.conn.is_closed() {
            if entry.released || entry.listener.is_some() {
                self.tcp.forget(handle);
            } else {
                // The application still holds it (to read the error).
                let tuple = FourTuple(entry.conn.local(), entry.conn.remote());
                if self.tcp.by_tuple.get(&tuple) == Some(&handle) {
                    self.tcp.by_tuple.remove(&tuple);
                }
            }
            return;
        }
        match entry.conn.poll_at(now) {
            Some(at) if entry.scheduled.is_none_or(|s| at < s) => {
                entry.scheduled = Some(at);
                self.tcp.timers.push(Reverse((at, handle.0)));
            }
            _ => {}
        }
    }

    /// Runs the TCP timers that are due. Entries filed while this runs wait
    /// for the next call, so a connection that keeps asking for "now"
    /// cannot keep one call going.
    pub(crate) fn tcp_poll(&mut self, now: Instant) {
        let mut due = core::mem::take(&mut self.tcp.due);
        while let Some(&Reverse((at, slot))) = self.tcp.timers.peek() {
            if at > now || due.len() >= 4096 {
                break;
            }
            self.tcp.timers.pop();
            let handle = TcpHandle(slot);
            match self.tcp.conns.get_mut(handle.0) {
                // A stale entry: another one stands for this connection.
                Some(entry) if entry.scheduled == Some(at) => {
                    entry.scheduled = None;
                    due.push(handle);
                }
                _ => {}
            }
        }
        for handle in due.drain(..) {
            let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
                continue;
            };
            let was_synrecv = entry.conn.state() == State::SynReceived;
            entry.conn.on_timer(now);
            if was_synrecv && entry.conn.is_closed() {
                self.counters.tcp_handshake_timeouts += 1;
            }
            self.tcp_run(handle, now);
        }
        self.tcp.due = due;
    }

    /// `local`'s connection to `remote` cannot reach it (its next hop never
    /// answered address resolution, or a checked ICMP error said so): one
    /// still opening fails with `error`.
    pub(crate) fn tcp_unreachable(&mut self, local: SocketAddr, remote: SocketAddr, error: TcpError, now: Instant) {
        let Some(&handle) = self.tcp.by_tuple.get(&FourTuple(local, remote)) else {
            return;
        };
        let failed = self.tcp.conns.get_mut(handle.0).is_some_and(|e| e.conn.unreachable(error));
        if failed {
            self.counters.tcp_connects_unreachable += 1;
            self.tcp_run(handle, now);
        }
    }

    /// Sends a segment without payload (RST, SYN-ACK) for `local`.
    pub(super) fn send_tcp_control(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        repr: TcpRepr,
        now: Instant,
    ) -> Result<(), Error> {
        self.send_tcp_segment(local, remote, repr, PacketBuf::new(), 0, now)
    }

    /// Sends one segment of `local`'s connection to `remote`; a payload
    /// longer than `segment_size` goes as a super-segment the device cuts.
    fn send_tcp_segment(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        repr: TcpRepr,
        mut payload: PacketBuf,
        segment_size: usize,
        now: Instant,
    ) -> Result<(), Error> {
        let offload_checksum = self.caps.tx_offloads.checksum;
        let payload_sum = if offload_checksum { Checksum::default() } else { payload.checksum() };
        let header_len = repr.header_len();
        let payload_len = payload.len();
        let Ok(header) = payload.prepend(&self.pool, header_len) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        if offload_checksum {
            repr.emit_header_partial(header, local.ip(), remote.ip())
        } else {
            repr.emit_header(header, local.ip(), remote.ip(), payload_sum)
        }
        .map_err(|_| Error::MessageTooLong)?;
        if offload_checksum {
            let segment_size = if payload_len > segment_size {
                u16::try_from(segment_size).map_err(|_| Error::MessageTooLong)?
            } else {
                0
            };
            payload.set_offload(Offload::tcp_segments(segment_size));
        }
        match (local.ip(), remote.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let ip = Ipv4Repr {
                    // Path MTU discovery needs DF (RFC 1191); segments fit the MSS.
                    dont_frag: true,
                    ..Ipv4Repr::new(src, dst, IpProtocol::Tcp, payload.len(), self.config.ttl)
                };
                self.send_ip(ip, payload, now)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => self.send_ipv6(Some(src), dst, IpProtocol::Tcp, payload, None, now),
            _ => Err(Error::Unaddressable),
        }
    }
}
