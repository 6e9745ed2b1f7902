//! The interface: one Ethernet link with its addresses, and the receive and
//! send paths of ARP, IPv4, ICMP and UDP over it.
//!
//! Frames come in through [`Interface::receive`] as buffer chains and are
//! processed to the end at once; frames to send collect in a queue the caller
//! drains ([`Interface::tx_queue`]); timers run in [`Interface::poll`], and
//! [`Interface::poll_at`] says when that must next happen. Payload is never
//! copied: headers are stripped by moving offsets, written into headroom,
//! and an echo reply is the request's own buffer with two bytes changed.

use crate::arp::{ArpCache, Resolution};
use crate::buf::{BufferPool, Offload, PacketBuf, PoolExhausted};
use crate::capabilities::Capabilities;
use crate::config::InterfaceConfig;
use crate::counters::Counters;
use crate::icmp::{EchoEvent, EchoSocket, IcmpError};
use crate::ipv4::fragment::fragment;
use crate::ipv4::reassembly::{DropReason, Outcome, Reassembler};
use crate::ipv4::route::{next_hop, NextHop};
use crate::ratelimit::TokenBucket;
use crate::socket::{SocketHandle, SocketTable};
use crate::time::Instant;
use crate::udp::{UdpDatagram, UdpSocket};
use alloc::collections::VecDeque;

mod tcp;
use core::fmt;
use core::net::{Ipv4Addr, SocketAddrV4};
use hashbrown::HashMap;
use nagare_wire::{
    ArpOperation, ArpPacket, ArpRepr, Checksum, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol,
    Ipv4Packet, Ipv4Repr, ARP_ETHERNET_IPV4_LEN, ETHERNET_HEADER_LEN, ICMPV4_HEADER_LEN, IPV4_HEADER_LEN,
    UDP_HEADER_LEN,
};
pub use tcp::{Readiness, TcpEvent, TcpHandle, TcpListenerHandle, TcpSocket};

/// Room to leave in front of payload written by applications, so every
/// header of the way down (TCP or UDP, IPv4 with options, Ethernet) is
/// written in place.
pub const HEADROOM: usize = 128;

/// Largest UDP payload in one IPv4 datagram.
pub const UDP_MAX_PAYLOAD: usize = 65535 - IPV4_HEADER_LEN - UDP_HEADER_LEN;

/// Largest ICMP error message: RFC 1812 asks for as much of the offending
/// datagram as fits in 576 bytes.
const ICMP_ERROR_MAX_LEN: usize = 576;

const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_DST_UNREACHABLE: u8 = 3;
const ICMP_ECHO_REQUEST: u8 = 8;
const ICMP_TIME_EXCEEDED: u8 = 11;
const ICMP_CODE_HOST_UNREACHABLE: u8 = 1;
const ICMP_CODE_PROTO_UNREACHABLE: u8 = 2;
const ICMP_CODE_PORT_UNREACHABLE: u8 = 3;
const ICMP_CODE_REASSEMBLY_TIMEOUT: u8 = 1;

/// Ephemeral ports as IANA and RFC 6335 define them.
const EPHEMERAL_PORTS: core::ops::RangeInclusive<u16> = 49152..=65535;

/// Events an echo socket can hold before new ones are dropped.
const ECHO_QUEUE_LIMIT: usize = 1024;

/// Why a socket call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The handle names no open socket.
    InvalidHandle,
    /// The port or identifier is already bound.
    AddrInUse,
    /// The address is not one of this interface's.
    AddrNotAvailable,
    /// No ephemeral port is free.
    NoPortAvailable,
    /// No route leads to the destination.
    NoRoute,
    /// The destination address or port cannot be sent to.
    Unaddressable,
    /// The payload does not fit in one datagram.
    MessageTooLong,
    /// No packet buffer is free.
    NoBuffer,
    /// Nothing to read or no room to write yet.
    WouldBlock,
    /// The socket is not (or no longer) connected.
    NotConnected,
    /// The peer reset the connection.
    ConnectionReset,
    /// The peer refused the connection.
    ConnectionRefused,
    /// The peer stopped answering.
    TimedOut,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::InvalidHandle => "no such socket",
            Error::AddrInUse => "address already in use",
            Error::AddrNotAvailable => "address not available on this interface",
            Error::NoPortAvailable => "no ephemeral port available",
            Error::NoRoute => "no route to host",
            Error::Unaddressable => "destination cannot be addressed",
            Error::MessageTooLong => "message too long",
            Error::NoBuffer => "no packet buffer available",
            Error::WouldBlock => "operation would block",
            Error::NotConnected => "not connected",
            Error::ConnectionReset => "connection reset by peer",
            Error::ConnectionRefused => "connection refused",
            Error::TimedOut => "connection timed out",
        })
    }
}

impl From<PoolExhausted> for Error {
    fn from(_: PoolExhausted) -> Self {
        Error::NoBuffer
    }
}

/// Names a UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHandle(SocketHandle);

/// Names an ICMP echo socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EchoHandle(SocketHandle);

/// One Ethernet interface running ARP, IPv4, ICMP and UDP.
#[derive(Debug)]
pub struct Interface {
    config: InterfaceConfig,
    caps: Capabilities,
    pool: BufferPool,
    arp: ArpCache,
    reassembler: Reassembler,
    udp: SocketTable<UdpSocket>,
    udp_ports: HashMap<u16, UdpHandle>,
    echo: SocketTable<EchoSocket>,
    echo_idents: HashMap<u16, EchoHandle>,
    icmp_errors: TokenBucket,
    tx: VecDeque<PacketBuf>,
    /// IP datagrams sent to one of our own addresses, received by the next
    /// [`Interface::poll`] (never inside the send that made them, which may
    /// run in the middle of receiving).
    local: VecDeque<PacketBuf>,
    counters: Counters,
    next_ident: u16,
    next_ephemeral: u16,
    /// The frame being processed came to the link's broadcast address: no
    /// ICMP error may answer it (RFC 1122 3.2.2), whatever its IP header says.
    rx_link_broadcast: bool,
    tcp: tcp::TcpSockets,
}

/// Datagrams to ourselves that may wait for the next poll.
const LOCAL_QUEUE_LIMIT: usize = 4096;

/// Reads the first `len` bytes of `packet` as one slice, copying into
/// `scratch` only when they straddle buffers.
fn linear_prefix<'a>(packet: &'a PacketBuf, len: usize, scratch: &'a mut [u8]) -> Option<&'a [u8]> {
    if let Some(bytes) = packet.contiguous_prefix(len) {
        return Some(bytes);
    }
    let out = scratch.get_mut(..len)?;
    (packet.copy_out(0, out) == len).then_some(&*out)
}

/// Sources that do not name a single host (RFC 1122 3.2.1.3): this host,
/// loopback, multicast, reserved class E and limited broadcast.
fn is_martian_source(src: Ipv4Addr) -> bool {
    src.is_unspecified() || src.is_loopback() || src.is_multicast() || src.octets()[0] >= 240
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    match bytes.get(at..at + 2) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => 0,
    }
}

impl Interface {
    /// An interface with `config` over a device with `caps` (ask the device:
    /// `nagare_dev::Device::capabilities`), taking packet buffers from
    /// `pool`.
    pub fn new(config: InterfaceConfig, caps: Capabilities, pool: BufferPool) -> Self {
        let seed = config.seed;
        let span = u64::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        Interface {
            arp: ArpCache::new(config.arp.clone()),
            reassembler: Reassembler::new(config.reassembly.clone()),
            icmp_errors: TokenBucket::new(config.icmp_error_rate, config.icmp_error_burst),
            udp: SocketTable::default(),
            udp_ports: HashMap::new(),
            echo: SocketTable::default(),
            echo_idents: HashMap::new(),
            tx: VecDeque::new(),
            local: VecDeque::new(),
            counters: Counters::default(),
            next_ident: (seed >> 16) as u16,
            next_ephemeral: EPHEMERAL_PORTS.start() + (seed % span) as u16,
            rx_link_broadcast: false,
            tcp: tcp::TcpSockets::new(seed),
            config,
            caps,
            pool,
        }
    }

    /// The configuration the interface runs with.
    pub fn config(&self) -> &InterfaceConfig {
        &self.config
    }

    /// What the device under the interface carries and completes.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// The pool packet buffers come from.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// What the interface has done so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Frames waiting to be sent; the caller removes what the device took.
    pub fn tx_queue(&mut self) -> &mut VecDeque<PacketBuf> {
        &mut self.tx
    }

    /// The next frame to send.
    pub fn pop_transmit(&mut self) -> Option<PacketBuf> {
        self.tx.pop_front()
    }

    /// Entries in the ARP cache.
    pub fn arp_cache_len(&self) -> usize {
        self.arp.len()
    }

    /// The Ethernet address `ip` resolves to, if known.
    pub fn arp_lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<EthernetAddress> {
        self.arp.lookup(ip, now)
    }

    /// Partial datagrams held for reassembly.
    pub fn reassembly_pending(&self) -> usize {
        self.reassembler.len()
    }

    /// Whether `ip` is one of this interface's addresses.
    pub fn has_address(&self, ip: Ipv4Addr) -> bool {
        self.config.addresses.iter().any(|c| c.address() == ip)
    }

    fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast() || self.config.addresses.iter().any(|c| c.broadcast() == Some(ip))
    }

    /// Runs the timers: ARP retries and give-ups, reassembly timeouts; and
    /// receives the datagrams we sent ourselves.
    pub fn poll(&mut self, now: Instant) {
        // Only those waiting now: what they make (ACKs, replies) waits for
        // the next poll, so two local sockets cannot keep one poll busy.
        for _ in 0..self.local.len() {
            let Some(packet) = self.local.pop_front() else { break };
            self.counters.local_delivered += 1;
            self.receive_ipv4(packet, now, true);
        }
        let (retry, dropped) = self.arp.poll(now);
        self.counters.drop_arp_unresolved += dropped.len() as u64;
        for ip_packet in dropped {
            // What the kernel tells a socket whose neighbour never answered.
            let error = IcmpError::Unreachable {
                from: self.config.addresses.first().map_or(Ipv4Addr::UNSPECIFIED, |c| c.address()),
                code: ICMP_CODE_HOST_UNREACHABLE,
            };
            self.report_error_about(&ip_packet, 0, error);
        }
        for ip in retry {
            self.send_arp_request(ip, now);
        }
        let (expired, first_fragments) = self.reassembler.poll(now);
        self.counters.drop_frag_timeout += expired as u64;
        for (header, payload) in first_fragments {
            self.rx_link_broadcast = false;
            self.send_icmp_error(ICMP_TIME_EXCEEDED, ICMP_CODE_REASSEMBLY_TIMEOUT, &header, &payload, now);
        }
        self.tcp_poll(now);
    }

    /// When [`poll`](Self::poll) next has work; `None` if only new input can
    /// create work. Frames in the transmit queue are the caller's to send
    /// now, whatever this says.
    pub fn poll_at(&self) -> Option<Instant> {
        let local = (!self.local.is_empty()).then_some(Instant::ZERO);
        [local, self.arp.poll_at(), self.reassembler.poll_at(), self.tcp.poll_at()].into_iter().flatten().min()
    }

    // ---- receive path ----------------------------------------------------

    /// Processes a batch of received frames, as [`receive`](Self::receive)
    /// does each, except that TCP connections send what the batch made due
    /// once, after its last frame: a burst of segments gets one ACK, and
    /// the data its ACKs let out goes in one run. Give it what one device
    /// read returned.
    pub fn receive_batch(&mut self, frames: impl IntoIterator<Item = PacketBuf>, now: Instant) {
        self.tcp.deferring = true;
        for frame in frames {
            self.receive(frame, now);
        }
        self.tcp.deferring = false;
        self.tcp_run_deferred(now);
    }

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
        if dst != self.config.mac && !dst.is_broadcast() {
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
            EtherType::Arp => self.receive_arp(&frame, now),
            EtherType::Ipv4 => self.receive_ipv4(frame, now, false),
            _ => self.counters.drop_eth_unknown_type += 1,
        }
    }

    fn receive_arp(&mut self, packet: &PacketBuf, now: Instant) {
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

    /// `from_self`: sent by us to one of our addresses (its source is ours).
    fn receive_ipv4(&mut self, mut packet: PacketBuf, now: Instant, from_self: bool) {
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
        if !self.has_address(repr.dst_addr) && !self.is_broadcast(repr.dst_addr) {
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
                Outcome::Complete(whole, payload) => {
                    self.counters.frag_reassembled += 1;
                    self.receive_datagram(whole, payload, now);
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
            self.receive_datagram(repr, packet, now);
        }
    }

    fn receive_datagram(&mut self, ip: Ipv4Repr, payload: PacketBuf, now: Instant) {
        match ip.protocol {
            IpProtocol::Icmp => self.receive_icmp(&ip, payload, now),
            IpProtocol::Udp => self.receive_udp(&ip, payload, now),
            IpProtocol::Tcp => self.receive_tcp(&ip, payload, now),
            _ => {
                self.counters.drop_ip_unknown_protocol += 1;
                self.send_icmp_error(ICMP_DST_UNREACHABLE, ICMP_CODE_PROTO_UNREACHABLE, &ip, &payload, now);
            }
        }
    }

    fn receive_icmp(&mut self, ip: &Ipv4Repr, mut payload: PacketBuf, now: Instant) {
        let Some(header) = payload.header::<ICMPV4_HEADER_LEN>() else {
            self.counters.drop_icmp_malformed += 1;
            return;
        };
        if payload.checksum().folded() != 0xffff {
            self.counters.drop_icmp_checksum += 1;
            return;
        }
        let ident = be16(&header, 4);
        let seq_no = be16(&header, 6);
        match header[0] {
            ICMP_ECHO_REQUEST => {
                if self.is_broadcast(ip.dst_addr) {
                    self.counters.drop_icmp_broadcast_echo += 1;
                    return;
                }
                if header[1] != 0 {
                    self.counters.drop_icmp_malformed += 1;
                    return;
                }
                self.send_echo_reply(ip, &mut payload, &header, now);
            }
            ICMP_ECHO_REPLY => {
                let delivered = self.echo_idents.get(&ident).copied().and_then(|h| self.echo.get_mut(h.0)).map(|s| {
                    s.push(EchoEvent::Reply {
                        from: ip.src_addr,
                        seq_no,
                        data_len: payload.len() - ICMPV4_HEADER_LEN,
                        ttl: ip.ttl,
                        at: now,
                    })
                });
                match delivered {
                    Some(true) => self.counters.icmp_echo_replies_received += 1,
                    Some(false) => self.counters.drop_icmp_socket_full += 1,
                    None => self.counters.drop_icmp_unmatched_reply += 1,
                }
            }
            kind @ (ICMP_DST_UNREACHABLE | ICMP_TIME_EXCEEDED) => {
                self.counters.icmp_errors_received += 1;
                let code = header[1];
                let error = if kind == ICMP_DST_UNREACHABLE {
                    IcmpError::Unreachable { from: ip.src_addr, code }
                } else {
                    IcmpError::TimeExceeded { from: ip.src_addr, code }
                };
                self.report_icmp_error(&payload, error);
            }
            _ => self.counters.drop_icmp_unknown_type += 1,
        }
    }

    /// Hands an ICMP error to the socket whose datagram it quotes.
    fn report_icmp_error(&mut self, message: &PacketBuf, error: IcmpError) {
        if !self.report_error_about(message, ICMPV4_HEADER_LEN, error) {
            self.counters.drop_icmp_malformed += 1;
        }
    }

    /// Hands `error` to the socket that sent the datagram found at `offset`
    /// of `packet` (an IPv4 header and at least 8 bytes after it). Returns
    /// false when no such datagram can be read there.
    fn report_error_about(&mut self, packet: &PacketBuf, offset: usize, error: IcmpError) -> bool {
        let mut quote = [0u8; 60 + 8];
        let n = packet.copy_out(offset, &mut quote);
        let quote = &quote[..n];
        let view = Ipv4Packet::new_unchecked(quote);
        let header_len = view.header_len();
        if n < IPV4_HEADER_LEN || view.version() != 4 || header_len < IPV4_HEADER_LEN || n < header_len + 8 {
            return false;
        }
        if !self.has_address(view.src_addr()) {
            return true;
        }
        if view.frag_offset() != 0 {
            // Only the first fragment carries the transport header.
            return true;
        }
        let transport = &quote[header_len..];
        match view.protocol() {
            IpProtocol::Udp => {
                let port = be16(transport, 0);
                if let Some(socket) = self.udp_ports.get(&port).copied().and_then(|h| self.udp.get_mut(h.0)) {
                    socket.error = Some(error);
                }
            }
            IpProtocol::Icmp if transport.first() == Some(&ICMP_ECHO_REQUEST) => {
                let ident = be16(transport, 4);
                let seq_no = be16(transport, 6);
                if let Some(socket) = self.echo_idents.get(&ident).copied().and_then(|h| self.echo.get_mut(h.0)) {
                    if !socket.push(EchoEvent::Error { seq_no, error }) {
                        self.counters.drop_icmp_socket_full += 1;
                    }
                }
            }
            _ => {}
        }
        true
    }

    fn send_echo_reply(&mut self, ip: &Ipv4Repr, payload: &mut PacketBuf, header: &[u8; 8], now: Instant) {
        let request_word = u16::from_be_bytes([header[0], header[1]]);
        let reply_word = u16::from_be_bytes([ICMP_ECHO_REPLY, header[1]]);
        let patched = match payload.first_chunk_mut() {
            Some(first) if first.len() >= 4 => {
                // The reply is the request with its type changed: patch the
                // type and fix the checksum incrementally (RFC 1624).
                let old_checksum = u16::from_be_bytes([first[2], first[3]]);
                let new_checksum = nagare_wire::update(old_checksum, request_word, reply_word);
                first[0] = ICMP_ECHO_REPLY;
                first[2..4].copy_from_slice(&new_checksum.to_be_bytes());
                true
            }
            _ => false,
        };
        if !patched {
            payload.trim_front(ICMPV4_HEADER_LEN);
            let data_sum = payload.checksum();
            let reply = nagare_wire::Icmpv4EchoHeader { reply: true, ident: be16(header, 4), seq_no: be16(header, 6) };
            match payload.prepend(&self.pool, ICMPV4_HEADER_LEN) {
                Ok(h) => {
                    if reply.emit(h, data_sum).is_err() {
                        self.counters.drop_icmp_malformed += 1;
                        return;
                    }
                }
                Err(_) => {
                    self.counters.drop_no_buffer += 1;
                    return;
                }
            }
        }
        let reply_ip = Ipv4Repr {
            dscp_ecn: ip.dscp_ecn,
            ..Ipv4Repr::new(ip.dst_addr, ip.src_addr, IpProtocol::Icmp, payload.len(), self.config.ttl)
        };
        if self.send_ip(reply_ip, core::mem::take(payload), now).is_ok() {
            self.counters.icmp_echo_replies_sent += 1;
        }
    }

    fn receive_udp(&mut self, ip: &Ipv4Repr, mut payload: PacketBuf, now: Instant) {
        let Some(header) = payload.header::<UDP_HEADER_LEN>() else {
            self.counters.drop_udp_malformed += 1;
            return;
        };
        let src_port = be16(&header, 0);
        let dst_port = be16(&header, 2);
        let length = usize::from(be16(&header, 4));
        let checksum = be16(&header, 6);
        if length < UDP_HEADER_LEN || length > payload.len() {
            self.counters.drop_udp_malformed += 1;
            return;
        }
        payload.truncate(length);
        if checksum != 0 && !payload.offload().checksum.trusted() {
            let mut sum =
                nagare_wire::pseudo_header_v4(ip.src_addr, ip.dst_addr, IpProtocol::Udp.into(), length as u16);
            sum.add_checksum(payload.checksum());
            if sum.folded() != 0xffff {
                self.counters.drop_udp_checksum += 1;
                return;
            }
        }
        // The promise was about this frame; its payload may travel on.
        payload.set_offload(Offload::NONE);
        let broadcast = self.is_broadcast(ip.dst_addr);
        let handle = self.udp_ports.get(&dst_port).copied();
        let socket = handle.and_then(|h| self.udp.get_mut(h.0)).filter(|s| {
            let bound = *s.local.ip();
            // As Linux: a socket bound to one unicast address gets only
            // datagrams for that address, broadcasts go to wildcard sockets.
            bound.is_unspecified() || bound == ip.dst_addr
        });
        let Some(socket) = socket else {
            self.counters.drop_udp_no_socket += 1;
            if !broadcast {
                self.send_icmp_error(ICMP_DST_UNREACHABLE, ICMP_CODE_PORT_UNREACHABLE, ip, &payload, now);
            }
            return;
        };
        payload.trim_front(UDP_HEADER_LEN);
        let datagram = UdpDatagram {
            source: SocketAddrV4::new(ip.src_addr, src_port),
            destination: SocketAddrV4::new(ip.dst_addr, dst_port),
            payload,
        };
        if socket.enqueue(datagram) {
            self.counters.udp_delivered += 1;
        } else {
            self.counters.drop_udp_queue_full += 1;
        }
    }

    // ---- send path -------------------------------------------------------

    /// Sends an ICMP error about a datagram we received (`ip` and its
    /// `payload`), quoting as much of it as RFC 1812 allows, rate limited.
    fn send_icmp_error(&mut self, kind: u8, code: u8, ip: &Ipv4Repr, payload: &PacketBuf, now: Instant) {
        let src = ip.src_addr;
        if self.rx_link_broadcast || self.is_broadcast(ip.dst_addr) || is_martian_source(src) || self.is_broadcast(src)
        {
            return;
        }
        if !self.icmp_errors.try_take(now) {
            self.counters.icmp_errors_rate_limited += 1;
            return;
        }
        let quote_len = payload.len().min(ICMP_ERROR_MAX_LEN - IPV4_HEADER_LEN - ICMPV4_HEADER_LEN - IPV4_HEADER_LEN);
        let Some(mut message) = payload.slice(0, quote_len) else {
            return;
        };
        let result = (|| -> Result<(), Error> {
            let quoted_header = message.prepend(&self.pool, IPV4_HEADER_LEN)?;
            ip.emit(quoted_header).map_err(|_| Error::MessageTooLong)?;
            let body_sum = message.checksum();
            let header = message.prepend(&self.pool, ICMPV4_HEADER_LEN)?;
            header.fill(0);
            header[0] = kind;
            header[1] = code;
            let mut sum = Checksum::new();
            sum.add_bytes(header);
            sum.add_checksum(body_sum);
            header[2..4].copy_from_slice(&sum.finish().to_be_bytes());
            Ok(())
        })();
        if result.is_err() {
            self.counters.drop_no_buffer += 1;
            return;
        }
        let reply = Ipv4Repr::new(ip.dst_addr, src, IpProtocol::Icmp, message.len(), self.config.ttl);
        if self.send_ip(reply, message, now).is_ok() {
            self.counters.icmp_errors_sent += 1;
        }
    }

    /// The address to send from towards `dst`: the one on the same network
    /// as the next hop, else the first.
    fn source_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
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
    /// data. Fragments when the payload does not fit the MTU.
    pub fn send_ip(&mut self, mut repr: Ipv4Repr, mut payload: PacketBuf, now: Instant) -> Result<(), Error> {
        let Some(hop) = next_hop(&self.config.addresses, &self.config.routes, self.config.gateway, repr.dst_addr)
        else {
            self.counters.drop_ip_no_route += 1;
            return Err(Error::NoRoute);
        };
        if payload.len() + IPV4_HEADER_LEN > nagare_wire::IPV4_MAX_TOTAL_LEN {
            return Err(Error::MessageTooLong);
        }
        repr.payload_len = payload.len();
        repr.ident = self.next_ident;
        self.next_ident = self.next_ident.wrapping_add(1);
        repr.more_frags = false;
        repr.frag_offset = 0;
        if self.has_address(repr.dst_addr) {
            return self.send_to_self(repr, payload);
        }
        let mtu = self.caps.mtu;
        let packet_len = payload.len() + IPV4_HEADER_LEN;
        // A TCP super-segment goes whole: the device cuts it into MTU-sized
        // segments.
        let super_segment = payload.offload().segment_size != 0 && packet_len <= self.caps.tx_offloads.tcp_segmentation;
        if packet_len <= mtu || super_segment {
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

    /// A datagram to one of our own addresses: whole (no link, so no MTU),
    /// queued for the next poll to receive.
    fn send_to_self(&mut self, repr: Ipv4Repr, mut payload: PacketBuf) -> Result<(), Error> {
        if self.local.len() >= LOCAL_QUEUE_LIMIT {
            self.counters.drop_local_queue_full += 1;
            return Err(Error::NoBuffer);
        }
        let Ok(header) = payload.prepend(&self.pool, IPV4_HEADER_LEN) else {
            self.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        repr.emit(header).map_err(|_| Error::MessageTooLong)?;
        self.local.push_back(payload);
        Ok(())
    }

    fn send_to_link(&mut self, ip_packet: PacketBuf, hop: NextHop, now: Instant) {
        match hop {
            NextHop::Broadcast => self.emit_ethernet(ip_packet, EthernetAddress::BROADCAST, EtherType::Ipv4),
            NextHop::Unicast(ip) => match self.arp.resolve(ip, ip_packet, now) {
                (Resolution::Known(mac), Some(packet)) => self.emit_ethernet(packet, mac, EtherType::Ipv4),
                (Resolution::SendRequest, _) => self.send_arp_request(ip, now),
                (Resolution::QueueFull, _) => self.counters.drop_arp_queue_full += 1,
                _ => {}
            },
        }
    }

    fn send_arp_request(&mut self, ip: Ipv4Addr, _now: Instant) {
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

    fn emit_ethernet(&mut self, mut packet: PacketBuf, dst: EthernetAddress, ethertype: EtherType) {
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

    // ---- UDP sockets -----------------------------------------------------

    /// Binds a UDP socket to `local`; port 0 picks a free ephemeral port,
    /// address 0.0.0.0 receives on any of ours.
    pub fn udp_bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, Error> {
        let ip = *local.ip();
        if !ip.is_unspecified() && !self.has_address(ip) {
            return Err(Error::AddrNotAvailable);
        }
        let port = match local.port() {
            0 => self.pick_ephemeral_port()?,
            port if self.udp_ports.contains_key(&port) => return Err(Error::AddrInUse),
            port => port,
        };
        let socket = UdpSocket::new(
            SocketAddrV4::new(ip, port),
            self.config.udp_rx_queue_packets,
            self.config.udp_rx_queue_bytes,
        );
        let handle = UdpHandle(self.udp.insert(socket));
        self.udp_ports.insert(port, handle);
        Ok(handle)
    }

    fn pick_ephemeral_port(&mut self) -> Result<u16, Error> {
        let span = usize::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
        for _ in 0..span {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == *EPHEMERAL_PORTS.end() { *EPHEMERAL_PORTS.start() } else { port + 1 };
            if !self.udp_ports.contains_key(&port) {
                return Ok(port);
            }
        }
        Err(Error::NoPortAvailable)
    }

    /// The socket `handle` names.
    pub fn udp_socket(&self, handle: UdpHandle) -> Option<&UdpSocket> {
        self.udp.get(handle.0)
    }

    /// Closes a UDP socket, dropping what it had not read.
    pub fn udp_close(&mut self, handle: UdpHandle) -> Result<(), Error> {
        let socket = self.udp.remove(handle.0).ok_or(Error::InvalidHandle)?;
        self.udp_ports.remove(&socket.local.port());
        Ok(())
    }

    /// Sends `data` to `dst`, copying it once into packet buffers.
    pub fn udp_send_to(
        &mut self,
        handle: UdpHandle,
        data: &[u8],
        dst: SocketAddrV4,
        now: Instant,
    ) -> Result<(), Error> {
        if data.len() > UDP_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        let payload = PacketBuf::from_slice(&self.pool, HEADROOM, data)?;
        self.udp_send_buf(handle, payload, dst, now)
    }

    /// Sends a payload that is already in packet buffers, without copying.
    pub fn udp_send_buf(
        &mut self,
        handle: UdpHandle,
        mut payload: PacketBuf,
        dst: SocketAddrV4,
        now: Instant,
    ) -> Result<(), Error> {
        let local = self.udp.get(handle.0).ok_or(Error::InvalidHandle)?.local;
        // Whatever a chain promised before, this datagram's checksum is
        // computed here, in full.
        payload.set_offload(Offload::NONE);
        if payload.len() > UDP_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        if dst.port() == 0 || dst.ip().is_unspecified() || dst.ip().is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src =
            if local.ip().is_unspecified() { self.source_for(*dst.ip()).ok_or(Error::NoRoute)? } else { *local.ip() };
        let payload_len = payload.len();
        let payload_sum = payload.checksum();
        let header = payload.prepend(&self.pool, UDP_HEADER_LEN)?;
        let repr = nagare_wire::UdpRepr { src_port: local.port(), dst_port: dst.port() };
        repr.emit_header(header, payload_len, src, *dst.ip(), payload_sum).map_err(|_| Error::MessageTooLong)?;
        let ip = Ipv4Repr::new(src, *dst.ip(), IpProtocol::Udp, payload.len(), self.config.ttl);
        self.send_ip(ip, payload, now)?;
        self.counters.udp_sent += 1;
        Ok(())
    }

    /// The next datagram received on `handle`, without copying its payload.
    pub fn udp_recv(&mut self, handle: UdpHandle) -> Result<Option<UdpDatagram>, Error> {
        let socket = self.udp.get_mut(handle.0).ok_or(Error::InvalidHandle)?;
        Ok(socket.dequeue())
    }

    /// Copies the next datagram into `buf`; returns its length (truncated
    /// to `buf`, as `recv_from` does) and sender.
    pub fn udp_recv_from(&mut self, handle: UdpHandle, buf: &mut [u8]) -> Result<Option<(usize, SocketAddrV4)>, Error> {
        Ok(self.udp_recv(handle)?.map(|d| (d.payload.copy_out(0, buf), d.source)))
    }

    /// Takes the last ICMP error reported for this socket's datagrams.
    pub fn udp_take_error(&mut self, handle: UdpHandle) -> Result<Option<IcmpError>, Error> {
        let socket = self.udp.get_mut(handle.0).ok_or(Error::InvalidHandle)?;
        Ok(socket.error.take())
    }

    // ---- ICMP echo sockets -----------------------------------------------

    /// Opens an echo socket with ICMP identifier `ident`.
    pub fn echo_open(&mut self, ident: u16) -> Result<EchoHandle, Error> {
        if self.echo_idents.contains_key(&ident) {
            return Err(Error::AddrInUse);
        }
        let handle = EchoHandle(self.echo.insert(EchoSocket::new(ident, ECHO_QUEUE_LIMIT)));
        self.echo_idents.insert(ident, handle);
        Ok(handle)
    }

    /// An echo socket, to look at.
    pub fn echo_socket(&self, handle: EchoHandle) -> Option<&EchoSocket> {
        self.echo.get(handle.0)
    }

    /// Closes an echo socket.
    pub fn echo_close(&mut self, handle: EchoHandle) -> Result<(), Error> {
        let socket = self.echo.remove(handle.0).ok_or(Error::InvalidHandle)?;
        self.echo_idents.remove(&socket.ident);
        Ok(())
    }

    /// Sends an echo request with `data` as its payload.
    pub fn echo_send(
        &mut self,
        handle: EchoHandle,
        dst: Ipv4Addr,
        seq_no: u16,
        data: &[u8],
        now: Instant,
    ) -> Result<(), Error> {
        let ident = self.echo.get(handle.0).ok_or(Error::InvalidHandle)?.ident;
        if data.len() > 65535 - IPV4_HEADER_LEN - ICMPV4_HEADER_LEN {
            return Err(Error::MessageTooLong);
        }
        if dst.is_unspecified() || dst.is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src = self.source_for(dst).ok_or(Error::NoRoute)?;
        let mut payload = PacketBuf::from_slice(&self.pool, HEADROOM, data)?;
        let data_sum = payload.checksum();
        let header = payload.prepend(&self.pool, ICMPV4_HEADER_LEN)?;
        let echo = nagare_wire::Icmpv4EchoHeader { reply: false, ident, seq_no };
        echo.emit(header, data_sum).map_err(|_| Error::MessageTooLong)?;
        let ip = Ipv4Repr::new(src, dst, IpProtocol::Icmp, payload.len(), self.config.ttl);
        self.send_ip(ip, payload, now)
    }

    /// The next reply or error received on an echo socket.
    pub fn echo_recv(&mut self, handle: EchoHandle) -> Result<Option<EchoEvent>, Error> {
        let socket = self.echo.get_mut(handle.0).ok_or(Error::InvalidHandle)?;
        Ok(socket.events.pop_front())
    }
}
