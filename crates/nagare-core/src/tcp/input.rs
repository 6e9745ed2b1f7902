//! Received TCP segments: checked, then handed to the connection of their
//! four-tuple or the listener of their port (handshakes, SYN cookies), or
//! answered with a reset. SYNs that would get a cookie pass the SYN guard
//! first (`syn_guard.rs`).

use super::connection::{Connection, Processed, State};
use super::isn::{check_syn_cookie, initial_sequence_number, make_syn_cookie};
use super::path_mtu::cached_path_mss;
use super::sockets::{local_mss, FourTuple, TcpHandle, TcpListenerHandle};
use crate::buf::{Offload, PacketBuf};
use crate::hash::{siphash, SipKey};
use crate::iface::read::linear_prefix;
use crate::iface::Interface;
use crate::time::Instant;
use core::net::{IpAddr, SocketAddr};
use nagare_wire::{IpProtocol, Ipv4Repr, Ipv6Repr, TcpFlags, TcpPacket, TcpRepr, TcpSeqNumber};

/// How a received segment came.
#[derive(Clone, Copy)]
struct Route {
    /// To one host at both layers (not to a broadcast or multicast
    /// address).
    point_to_point: bool,
    /// In a packet a device's SYN filter reads
    /// (`syn_guard::SynFilter`): IPv4 whose first fragment (or whole
    /// packet) held the TCP header up to the flags, or IPv6 with the TCP
    /// header right after the fixed header, as received.
    device_read: bool,
}

/// A RST answering `seg`, which reached no connection (RFC 9293 3.10.7.1).
fn reset_for(seg: &TcpRepr, payload_len: usize) -> TcpRepr {
    let (seq, ack) = match seg.ack_number {
        Some(ack) => (ack, None),
        None => {
            let len = payload_len
                + usize::from(seg.flags.contains(TcpFlags::SYN))
                + usize::from(seg.flags.contains(TcpFlags::FIN));
            (TcpSeqNumber(0), Some(seg.seq_number + len))
        }
    };
    TcpRepr::bare(seg.dst_port, seg.src_port, seq, ack, TcpFlags::RST)
}

impl Interface {
    /// A TCP segment over IPv4 (`payload`: header and data) for one of our
    /// addresses, under IP header `ip`; `device_read`: a device's SYN
    /// filter read its TCP header up to the flags, in the packet as
    /// received or in its first fragment (one rebuilt from a first
    /// fragment that ended before the flags passed the filter undrawn).
    pub(crate) fn receive_tcp(&mut self, ip: &Ipv4Repr, payload: PacketBuf, device_read: bool, now: Instant) {
        let point_to_point = !(self.rx_link_broadcast || self.is_broadcast(ip.dst_addr));
        let route = Route { point_to_point, device_read };
        self.receive_tcp_segment(ip.src_addr.into(), ip.dst_addr.into(), route, payload, now);
    }

    /// A TCP segment over IPv6 (`payload`: header and data) for one of our
    /// addresses, under IP header `ip`; `link_multicast`: the frame came
    /// to a link-layer group address; `after_fixed_header`: the TCP header
    /// followed the fixed IPv6 header of the packet received (no extension
    /// header, no reassembly), where a device's SYN filter reads it.
    pub(crate) fn receive_tcp6(
        &mut self,
        ip: &Ipv6Repr,
        payload: PacketBuf,
        link_multicast: bool,
        after_fixed_header: bool,
        now: Instant,
    ) {
        let point_to_point = !(link_multicast || ip.dst_addr.is_multicast());
        let route = Route { point_to_point, device_read: after_fixed_header };
        self.receive_tcp_segment(ip.src_addr.into(), ip.dst_addr.into(), route, payload, now);
    }

    /// A TCP segment from `src` to `dst` (both of one family) that came
    /// by `route`; a segment that did not come point to point is dropped.
    fn receive_tcp_segment(&mut self, src: IpAddr, dst: IpAddr, route: Route, mut payload: PacketBuf, now: Instant) {
        let mut scratch = [0u8; 60];
        let Some(fixed) = linear_prefix(&payload, 20, &mut scratch) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        let header_len = usize::from(fixed[12] >> 4) * 4;
        if header_len < 20 || header_len > payload.len() || payload.len() > usize::from(u16::MAX) {
            self.counters.drop_tcp_malformed += 1;
            return;
        }
        if !payload.offload().checksum.trusted() {
            let Some(mut sum) = nagare_wire::pseudo_header(src, dst, IpProtocol::Tcp.into(), payload.len()) else {
                self.counters.drop_tcp_malformed += 1;
                return;
            };
            sum.add_checksum(payload.checksum());
            if sum.folded() != 0xffff {
                self.counters.drop_tcp_checksum += 1;
                return;
            }
        }
        // The promise was about this frame; its payload may travel on.
        payload.set_offload(Offload::NONE);
        let mut scratch = [0u8; 60];
        let Some(header) = linear_prefix(&payload, header_len, &mut scratch) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        let Ok(mut repr) = TcpRepr::parse(&TcpPacket::new_unchecked(header), src, dst, false) else {
            self.counters.drop_tcp_malformed += 1;
            return;
        };
        if !route.point_to_point {
            self.counters.drop_tcp_broadcast += 1;
            return;
        }
        payload.trim_front(header_len);
        repr.payload_len = payload.len();
        self.counters.tcp_segments_received += 1;
        self.counters.tcp6_segments_received += u64::from(dst.is_ipv6());
        let local = SocketAddr::new(dst, repr.dst_port);
        let remote = SocketAddr::new(src, repr.src_port);

        if let Some(&handle) = self.tcp.by_tuple.get(&FourTuple(local, remote)) {
            let reuse = repr.flags.contains(TcpFlags::SYN)
                && !repr.flags.contains(TcpFlags::ACK)
                && self.tcp.conns.get(handle.0).is_some_and(|e| e.conn.time_wait_accepts(&repr));
            if !reuse {
                self.segment_to_connection(handle, &repr, payload, now);
                return;
            }
            // RFC 6191: a new incarnation replaces the one in TIME-WAIT.
            self.tcp.forget(handle);
            self.counters.tcp_time_wait_reused += 1;
        }
        match self.tcp.listener_for(local) {
            Some(l) => self.segment_to_listener(l, local, remote, &repr, payload, route.device_read, now),
            None => {
                self.counters.drop_tcp_no_socket += 1;
                if !repr.flags.contains(TcpFlags::RST) {
                    self.send_tcp_reset(local, remote, &repr, payload.len(), now);
                }
            }
        }
    }

    fn send_tcp_reset(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &TcpRepr,
        payload_len: usize,
        now: Instant,
    ) {
        let rst = reset_for(seg, payload_len);
        if self.send_tcp_control(local, remote, rst, now).is_ok() {
            self.counters.tcp_resets_sent += 1;
        }
    }

    fn segment_to_connection(&mut self, handle: TcpHandle, repr: &TcpRepr, payload: PacketBuf, now: Instant) {
        let payload_len = payload.len();
        let Some(entry) = self.tcp.conns.get_mut(handle.0) else {
            return;
        };
        let state_before = entry.conn.state();
        let result: Processed = entry.conn.process(repr, payload, now);
        let (local, remote) = (entry.conn.local(), entry.conn.remote());
        if let Some(seq) = result.reset_reply {
            let mut rst = reset_for(repr, payload_len);
            rst.seq_number = seq;
            rst.ack_number = None;
            if self.send_tcp_control(local, remote, rst, now).is_ok() {
                self.counters.tcp_resets_sent += 1;
            }
        }
        if result.established && state_before == State::SynReceived {
            self.tcp.hand_to_listener(handle, now);
        }
        if result.challenged {
            self.counters.tcp_challenged += 1;
        }
        self.tcp_run_after_input(handle, now);
    }

    /// Lets a connection send what a segment made due: now, or inside a
    /// receive batch once at its end, so that a burst of segments gets one
    /// ACK (and one round of new data) instead of one per segment or two.
    fn tcp_run_after_input(&mut self, handle: TcpHandle, now: Instant) {
        // At once all the same when the connection just closed (so its
        // four-tuple is free for the rest of the batch) or holds data out
        // of order (each such segment owes its own duplicate ACK, RFC 5681
        // 4.2, which fast retransmit counts on).
        let urgent = self.tcp.conns.get(handle.0).is_some_and(|e| e.conn.is_closed() || e.conn.has_out_of_order_data());
        if !self.tcp.deferring || urgent {
            self.tcp_run(handle, now);
            return;
        }
        if let Some(entry) = self.tcp.conns.get_mut(handle.0) {
            if !entry.run_deferred {
                entry.run_deferred = true;
                self.tcp.deferred.push(handle);
            }
        }
    }

    /// Runs the connections a receive batch touched.
    pub(crate) fn tcp_run_deferred(&mut self, now: Instant) {
        let mut deferred = core::mem::take(&mut self.tcp.deferred);
        for handle in deferred.drain(..) {
            match self.tcp.conns.get_mut(handle.0) {
                Some(entry) if entry.run_deferred => entry.run_deferred = false,
                _ => continue,
            }
            self.tcp_run(handle, now);
        }
        self.tcp.deferred = deferred;
    }

    /// A segment to listener `l`; `device_read`: its packet is one a
    /// device's SYN filter reads (`Route`).
    #[allow(clippy::too_many_arguments)]
    fn segment_to_listener(
        &mut self,
        l: TcpListenerHandle,
        local: SocketAddr,
        remote: SocketAddr,
        repr: &TcpRepr,
        payload: PacketBuf,
        device_read: bool,
        now: Instant,
    ) {
        let flags = repr.flags;
        if flags.contains(TcpFlags::RST) {
            self.counters.drop_tcp_listener_rst += 1;
            return;
        }
        let Some(listener) = self.tcp.listeners.get(l.0) else {
            return;
        };
        if let Some(ack) = repr.ack_number {
            // Perhaps the last step of a handshake answered with a cookie.
            let cookies_live = listener.cookies_until.is_some_and(|t| now <= t);
            if cookies_live && !flags.contains(TcpFlags::SYN) {
                let iss = ack - 1;
                let irs = repr.seq_number - 1;
                if let Some(contents) = check_syn_cookie(self.tcp.key, local, remote, irs, iss, now) {
                    if self.tcp.at_connection_limit() {
                        // As a SYN past the limit: the peer tries again.
                        self.counters.drop_tcp_connection_limit += 1;
                        return;
                    }
                    if listener.accept_queue.len() >= listener.backlog {
                        // No room to queue it: drop the ACK, as Linux does
                        // on a listen overflow. The peer sends again (its
                        // data or ACK), and the cookie is still good then.
                        // Without this bound, completed cookie handshakes
                        // would grow the accept queue without limit.
                        self.counters.drop_tcp_backlog_full += 1;
                        return;
                    }
                    let config = listener.config.clone();
                    let mss = local_mss(self, remote);
                    let mut conn =
                        Connection::from_cookie(config, local, remote, mss, iss, irs, contents.mss, repr, now);
                    if let Some(mss) = cached_path_mss(self, remote, now) {
                        conn.path_mss_lowered(mss);
                    }
                    let handle = self.tcp.insert(conn, Some(l));
                    self.counters.tcp_syn_cookies_accepted += 1;
                    self.tcp.hand_to_listener(handle, now);
                    self.segment_to_connection(handle, repr, payload, now);
                    return;
                }
                self.counters.drop_tcp_bad_cookie += 1;
            }
            self.counters.drop_tcp_no_socket += 1;
            self.send_tcp_reset(local, remote, repr, payload.len(), now);
            return;
        }
        if !flags.contains(TcpFlags::SYN) {
            self.counters.drop_tcp_no_socket += 1;
            return;
        }
        if self.tcp.at_connection_limit() {
            // No answer: the peer retries, as after a lost SYN.
            self.counters.drop_tcp_connection_limit += 1;
            return;
        }
        if listener.accept_queue.len() >= listener.backlog {
            // The application is not accepting: drop the SYN and let the
            // peer retry, as Linux does.
            self.counters.drop_tcp_backlog_full += 1;
            return;
        }
        if listener.half_open >= listener.backlog {
            let draw = syn_draw(self.tcp.key, remote, repr.seq_number, now);
            if !self.tcp.syn_guard.admit(remote.ip(), local.port(), draw, device_read, now) {
                self.counters.drop_tcp_syn_guard += 1;
                return;
            }
            self.send_syn_cookie(l, local, remote, repr, now);
            return;
        }
        let config = listener.config.clone();
        let iss = initial_sequence_number(self.tcp.key, local, remote, now);
        let mut conn = Connection::accept_syn(config, local, remote, local_mss(self, remote), iss, repr, now);
        if let Some(mss) = cached_path_mss(self, remote, now) {
            conn.path_mss_lowered(mss);
        }
        conn.set_timestamp_offset(self.tcp.timestamp_offset(local, remote));
        if let Some(listener) = self.tcp.listeners.get_mut(l.0) {
            listener.half_open += 1;
        }
        let handle = self.tcp.insert(conn, Some(l));
        self.tcp_run(handle, now);
    }

    fn send_syn_cookie(
        &mut self,
        l: TcpListenerHandle,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        now: Instant,
    ) {
        let peer_mss = syn.max_seg_size.unwrap_or(536);
        let cookie = make_syn_cookie(self.tcp.key, local, remote, syn.seq_number, peer_mss, now);
        let window = self.tcp.listeners.get(l.0).map_or(65535, |l| l.config.recv_buffer.min(65535));
        let synack = TcpRepr {
            window_len: window as u16,
            max_seg_size: Some(local_mss(self, remote).min(65535) as u16),
            ..TcpRepr::bare(
                local.port(),
                remote.port(),
                cookie,
                Some(syn.seq_number + 1),
                TcpFlags::SYN | TcpFlags::ACK,
            )
        };
        if let Some(listener) = self.tcp.listeners.get_mut(l.0) {
            // Cookies stay checkable for two cookie ticks.
            listener.cookies_until = Some(now + core::time::Duration::from_secs(128));
        }
        if self.send_tcp_control(local, remote, synack, now).is_ok() {
            self.counters.tcp_syn_cookies_sent += 1;
        }
    }
}

/// The guard's draw for one SYN: unpredictable without the key, and new
/// for a retransmission (the time is part of it). A leading tag keeps its
/// inputs apart from those the same key hashes for ISNs and cookies.
fn syn_draw(key: SipKey, remote: SocketAddr, seq: TcpSeqNumber, now: Instant) -> u32 {
    let mut bytes = [0u8; 31];
    bytes[0] = b'G';
    let ip_len = match remote.ip() {
        IpAddr::V4(ip) => {
            bytes[1..5].copy_from_slice(&ip.octets());
            4
        }
        IpAddr::V6(ip) => {
            bytes[1..17].copy_from_slice(&ip.octets());
            16
        }
    };
    let rest = &mut bytes[1 + ip_len..];
    rest[..2].copy_from_slice(&remote.port().to_be_bytes());
    rest[2..6].copy_from_slice(&seq.0.to_be_bytes());
    rest[6..14].copy_from_slice(&now.total_micros().to_be_bytes());
    siphash(key, &bytes[..15 + ip_len]) as u32
}
