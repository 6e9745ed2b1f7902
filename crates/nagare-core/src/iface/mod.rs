//! The interface: one Ethernet link with its addresses, running ARP and
//! IPv4 over it (and IPv6 with neighbour discovery, when configured) and
//! holding the sockets of the protocols above.
//!
//! Frames come in through [`Interface::receive`] as buffer chains and are
//! processed to the end at once; frames to send collect in a queue the caller
//! drains ([`Interface::tx_queue`]); timers run in [`Interface::poll`], and
//! [`Interface::poll_at`] says when that must next happen. Payload is never
//! copied: headers are stripped by moving offsets, written into headroom,
//! and an echo reply is the request's own buffer with two bytes changed.
//!
//! Each protocol's input, demultiplexing and socket calls live beside it
//! (`crate::icmp`, `crate::udp`, `crate::tcp`); applications reach the
//! sockets through one short-lived borrow per protocol: [`Interface::udp`],
//! [`Interface::tcp`] and [`Interface::icmp`] for calls, and
//! [`Interface::udp_ref`], [`Interface::tcp_ref`] and
//! [`Interface::icmp_ref`] to look without changing anything.

mod arp;
mod error;
mod ethernet;
mod icmpv6;
pub(crate) mod ipv4;
mod ipv6;
mod local;
mod mld;
mod ndp;
mod path_mtu;
mod quote;
pub(crate) mod read;
mod redirect;
mod router;

pub use error::Error;

use crate::arp::ArpCache;
use crate::buf::{BufferPool, PacketBuf};
use crate::capabilities::Capabilities;
use crate::config::InterfaceConfig;
use crate::counters::Counters;
use crate::icmp::{Icmp, IcmpSockets, ICMP_CODE_REASSEMBLY_TIMEOUT, ICMP_TIME_EXCEEDED};
use crate::ipv4::reassembly::Reassembler;
use crate::ipv6::addr::{AddrState, Ipv6Address, Ipv6Cidr};
use crate::ipv6::neighbor::NeighborState;
use crate::pmtu::PathMtuCache;
use crate::ratelimit::TokenBucket;
use crate::tcp::{Tcp, TcpSockets};
use crate::time::Instant;
use crate::udp::{Udp, UdpSockets};
use alloc::collections::VecDeque;
use core::net::{Ipv4Addr, Ipv6Addr};
use ipv6::Ipv6State;
use nagare_wire::EthernetAddress;

/// Room to leave in front of payload written by applications, so every
/// header of the way down (TCP or UDP, IPv4 with options, Ethernet) is
/// written in place.
pub const HEADROOM: usize = 128;

/// Datagrams dropped for a next hop known to fail ARP that may wait for
/// the next poll to tell their senders; beyond these they are only
/// counted.
const UNREACHABLE_QUEUE_LIMIT: usize = 64;

/// One Ethernet interface running ARP and IPv4 (and IPv6, when
/// configured), with the ICMP, UDP and TCP sockets over it.
#[derive(Debug)]
pub struct Interface {
    pub(crate) config: InterfaceConfig,
    pub(crate) caps: Capabilities,
    pub(crate) pool: BufferPool,
    arp: ArpCache,
    /// IPv6 addresses and neighbours, when the configuration asks for IPv6.
    v6: Option<Ipv6State>,
    reassembler: Reassembler,
    /// Path MTUs below the link's, learnt from routers (`path_mtu.rs`).
    pub(crate) pmtu: PathMtuCache,
    pub(crate) udp: UdpSockets,
    pub(crate) icmp: IcmpSockets,
    pub(crate) tcp: TcpSockets,
    pub(crate) icmp_errors: TokenBucket,
    tx: VecDeque<PacketBuf>,
    /// IP datagrams sent to a local address (ours, or 127.0.0.0/8), which
    /// the next [`Interface::poll`] receives (`local.rs`).
    local: VecDeque<PacketBuf>,
    /// Datagrams dropped because their next hop failed ARP lately, whose
    /// senders the next [`Interface::poll`] tells.
    unreachable: VecDeque<PacketBuf>,
    pub(crate) counters: Counters,
    next_ident: u16,
    /// The frame being processed came to the link's broadcast address: no
    /// ICMP error may answer it (RFC 1122 3.2.2), whatever its IP header says.
    pub(crate) rx_link_broadcast: bool,
}

impl Interface {
    /// An interface with `config` over a device with `caps` (ask the device:
    /// `nagare_dev::Device::capabilities`), taking packet buffers from
    /// `pool`.
    pub fn new(config: InterfaceConfig, caps: Capabilities, pool: BufferPool) -> Self {
        let seed = config.seed;
        Interface {
            arp: ArpCache::new(config.arp.clone()),
            v6: config.ipv6.as_ref().map(|v6| Ipv6State::new(v6, config.mac, seed, &config.secrets)),
            reassembler: Reassembler::new(config.reassembly.clone()),
            pmtu: PathMtuCache::new(config.pmtu_expiry),
            icmp_errors: TokenBucket::new(config.icmp_error_rate, config.icmp_error_burst),
            udp: UdpSockets::new(seed),
            icmp: IcmpSockets::default(),
            tcp: TcpSockets::new(seed, &config.secrets),
            tx: VecDeque::new(),
            local: VecDeque::new(),
            unreachable: VecDeque::new(),
            counters: Counters::default(),
            next_ident: (seed >> 16) as u16,
            rx_link_broadcast: false,
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

    /// The IPv6 addresses of the interface (none without IPv6): its
    /// link-local address first, each with its state.
    pub fn ipv6_addresses(&self) -> impl Iterator<Item = &Ipv6Address> + '_ {
        self.v6.iter().flat_map(|v6| v6.addrs.iter())
    }

    /// The state of our IPv6 address `ip`, if it is one.
    pub fn ipv6_address_state(&self, ip: Ipv6Addr) -> Option<AddrState> {
        self.v6.as_ref().and_then(|v6| v6.addrs.state(ip))
    }

    /// The link-local address the interface made, if it speaks IPv6.
    pub fn ipv6_link_local(&self) -> Option<Ipv6Addr> {
        self.ipv6_addresses().next().map(|a| a.address())
    }

    /// Adds an IPv6 address; it is tentative until duplicate address
    /// detection, which the next [`poll`](Self::poll) starts, has checked
    /// it. Fails with [`Error::AddrNotAvailable`] on an interface without
    /// IPv6, and with [`Error::AddrInUse`] if the address is there already
    /// or the interface holds as many as it may.
    pub fn add_ipv6_address(&mut self, cidr: Ipv6Cidr) -> Result<(), Error> {
        let v6 = self.v6.as_mut().ok_or(Error::AddrNotAvailable)?;
        if cidr.address().is_multicast() || cidr.address().is_unspecified() || cidr.address().is_loopback() {
            return Err(Error::Unaddressable);
        }
        if v6.addrs.add(cidr) {
            Ok(())
        } else {
            Err(Error::AddrInUse)
        }
    }

    /// Removes our IPv6 address `ip`: it is no longer a source nor a
    /// destination, and its solicited-node group is left (an MLDv2 report
    /// says so) unless another of our addresses shares it. Fails with
    /// [`Error::AddrNotAvailable`] if `ip` is not one of ours, and with
    /// [`Error::Unaddressable`] for the link-local address the interface
    /// made, which neighbour discovery needs.
    pub fn remove_ipv6_address(&mut self, ip: Ipv6Addr) -> Result<(), Error> {
        if self.ipv6_link_local() == Some(ip) {
            return Err(Error::Unaddressable);
        }
        let v6 = self.v6.as_mut().ok_or(Error::AddrNotAvailable)?;
        if !v6.addrs.remove(ip) {
            return Err(Error::AddrNotAvailable);
        }
        self.leave_solicited_groups(&[ip]);
        Ok(())
    }

    /// The state of the neighbour cache's entry for `ip`, if it has one.
    pub fn neighbor_state(&self, ip: Ipv6Addr) -> Option<NeighborState> {
        self.v6.as_ref().and_then(|v6| v6.neighbors.state(ip))
    }

    /// The link-layer address the neighbour cache holds for `ip`.
    pub fn neighbor_lookup(&self, ip: Ipv6Addr) -> Option<EthernetAddress> {
        self.v6.as_ref().and_then(|v6| v6.neighbors.lookup(ip))
    }

    /// Entries in the neighbour cache, unresolved ones included.
    pub fn neighbor_cache_len(&self) -> usize {
        self.v6.as_ref().map_or(0, |v6| v6.neighbors.len())
    }

    /// Packets waiting in the neighbour cache for `ip` to be resolved.
    pub fn neighbor_queued(&self, ip: Ipv6Addr) -> usize {
        self.v6.as_ref().map_or(0, |v6| v6.neighbors.queued(ip))
    }

    /// Partial IPv4 datagrams held for reassembly.
    pub fn reassembly_pending(&self) -> usize {
        self.reassembler.len()
    }

    /// Partial IPv6 datagrams held for reassembly, and the bytes of buffer
    /// they pin.
    pub fn ipv6_reassembly_pending(&self) -> (usize, usize) {
        self.v6.as_ref().map_or((0, 0), |v6| (v6.reassembler.len(), v6.reassembler.footprint_bytes()))
    }

    /// Whether the interface speaks IPv4 on its link: it has an IPv4
    /// address.
    pub fn speaks_ipv4(&self) -> bool {
        !self.config.addresses.is_empty()
    }

    /// Whether `ip` is one of this interface's addresses.
    pub fn has_address(&self, ip: Ipv4Addr) -> bool {
        self.config.addresses.iter().any(|c| c.address() == ip)
    }

    /// Whether `ip` is the limited broadcast or one of our networks'.
    pub(crate) fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast() || self.config.addresses.iter().any(|c| c.broadcast() == Some(ip))
    }

    // ---- sockets, per protocol -------------------------------------------

    /// The UDP socket calls.
    pub fn udp(&mut self) -> Udp<'_> {
        Udp::new(self)
    }

    /// The UDP sockets, to look at.
    pub fn udp_ref(&self) -> &UdpSockets {
        &self.udp
    }

    /// The TCP socket calls.
    pub fn tcp(&mut self) -> Tcp<'_> {
        Tcp::new(self)
    }

    /// The TCP sockets, to look at (state, readiness, counters).
    pub fn tcp_ref(&self) -> &TcpSockets {
        &self.tcp
    }

    /// The ICMP (echo) socket calls.
    pub fn icmp(&mut self) -> Icmp<'_> {
        Icmp::new(self)
    }

    /// The ICMP (echo) sockets, to look at.
    pub fn icmp_ref(&self) -> &IcmpSockets {
        &self.icmp
    }

    // ---- input and timers ----------------------------------------------------

    /// Runs the timers: ARP retries and give-ups, IPv6 duplicate address
    /// detection, address, router and redirect lifetimes, router
    /// solicitations, MLDv2 report retransmissions and neighbour
    /// discovery, IPv4 and IPv6 reassembly
    /// timeouts, path MTU expiry, TCP; and
    /// receives the datagrams sent to local addresses.
    pub fn poll(&mut self, now: Instant) {
        self.receive_local(now);
        self.poll_ipv6(now);
        let (retry, dropped) = self.arp.poll(now);
        self.counters.drop_arp_unresolved += dropped.len() as u64;
        for ip_packet in dropped {
            self.neighbour_unreachable(&ip_packet, now);
        }
        for _ in 0..self.unreachable.len() {
            let Some(ip_packet) = self.unreachable.pop_front() else { break };
            self.neighbour_unreachable(&ip_packet, now);
        }
        for ip in retry {
            self.send_arp_request(ip, now);
        }
        self.tcp.poll_syn_guard(now);
        self.poll_ipv6_reassembly(now);
        let (expired, first_fragments) = self.reassembler.poll(now);
        self.counters.drop_frag_timeout += expired as u64;
        for (header, payload) in first_fragments {
            self.rx_link_broadcast = false;
            self.send_icmp_error(ICMP_TIME_EXCEEDED, ICMP_CODE_REASSEMBLY_TIMEOUT, &header, &payload, now);
        }
        self.expire_path_mtus(now);
        self.tcp_poll(now);
    }

    /// When [`poll`](Self::poll) next has work; `None` if only new input can
    /// create work. Frames in the transmit queue are the caller's to send
    /// now, whatever this says.
    pub fn poll_at(&self) -> Option<Instant> {
        let local = (!self.local.is_empty() || !self.unreachable.is_empty()).then_some(Instant::ZERO);
        let v6 = self.v6.as_ref().and_then(|v6| {
            let timers = [
                v6.addrs.poll_at(),
                v6.neighbors.poll_at(),
                v6.reassembler.poll_at(),
                v6.routers.poll_at(),
                v6.redirects.poll_at(),
                v6.mld.poll_at(),
            ];
            timers.into_iter().flatten().min()
        });
        [local, self.arp.poll_at(), v6, self.reassembler.poll_at(), self.pmtu.poll_at(), self.tcp.poll_at()]
            .into_iter()
            .flatten()
            .min()
    }

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
}
