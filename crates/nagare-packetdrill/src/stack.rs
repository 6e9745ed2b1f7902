//! The safe half of the shim: one nagare engine, a table of file
//! descriptors over its TCP sockets, a virtual clock, and the queue of
//! packets the engine sent that packetdrill has not sniffed yet.
//!
//! Nothing here touches a raw pointer; `ffi.rs` validates what C hands in
//! and calls these methods. Errors are `errno` values.

use libc::{
    EADDRINUSE, EADDRNOTAVAIL, EAFNOSUPPORT, EAGAIN, EALREADY, EBADF, ECONNREFUSED, ECONNRESET, EHOSTUNREACH,
    EINPROGRESS, EINVAL, EISCONN, EMFILE, EMSGSIZE, ENETUNREACH, ENOBUFS, ENOPROTOOPT, ENOTCONN, EOPNOTSUPP, EPIPE,
    EPROTONOSUPPORT, ETIMEDOUT,
};
use nagare_core::buf::{BufferPool, PacketBuf, TxOffloads};
use nagare_core::iface::Error;
use nagare_core::ipv6::addr::Ipv6Cidr;
use nagare_core::ipv6::neighbor::NeighborState;
use nagare_core::tcp::connection::{State, TcpError};
use nagare_core::tcp::{TcpHandle, TcpListenerHandle};
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config, NdpConfig};
use nagare_wire::{
    EthernetAddress, IpProtocol, Ipv4Addr, Ipv4Cidr, Ipv6Addr, Ipv6Repr, NdpRepr, ETHERNET_HEADER_LEN, IPV6_HEADER_LEN,
    NDP_HOP_LIMIT,
};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

/// An `errno` value.
pub type Errno = i32;

/// The engine's Ethernet address (locally administered).
pub const LOCAL_MAC: [u8; 6] = [0x02, 0x6e, 0x61, 0x67, 0x00, 0x01];
/// The Ethernet address the script's remote end is given.
pub const REMOTE_MAC: [u8; 6] = [0x02, 0x6e, 0x61, 0x67, 0x00, 0x02];

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
/// The remote end's link-local address: the engine's IPv6 router, through
/// which every IPv6 packet off the local network goes.
pub const REMOTE_LINK_LOCAL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
/// Largest IP packet (an IPv6 one counts its fixed header besides its
/// 65535-byte payload).
pub const MAX_IP_PACKET: usize = 65535 + IPV6_HEADER_LEN;
/// Smallest packet of each version: its fixed header.
const MIN_IPV4_PACKET: usize = 20;
/// Descriptors 0, 1 and 2 are never handed out, as in a process.
const FIRST_FD: usize = 3;
/// Most descriptors open at once.
pub const MAX_FDS: usize = 1024;
/// Packets the engine sent that may wait for packetdrill to sniff them.
const OUTBOUND_LIMIT: usize = 4096;
/// Timer rounds at one instant before the clock is moved on regardless
/// (only an engine that keeps asking for "now" would need it).
const MAX_POLLS_AT_ONE_INSTANT: u32 = 64;
/// Ephemeral ports for `bind` to port 0 and `listen` on an unbound socket.
const EPHEMERAL_FIRST: u16 = 40000;
const EPHEMERAL_LAST: u16 = 48999;

/// Settings, from packetdrill's `--so_flags` (space- or comma-separated
/// `key=value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The engine's address (`local_ip=`). packetdrill picks a random one
    /// in 192.168.0.0/16 unless run with `--local_ip`; a `bind` to another
    /// address before any socket is in use moves the engine there.
    pub local_ip: Ipv4Addr,
    /// Prefix length of the local network (`prefix_len=`).
    pub prefix_len: u8,
    /// The script's remote end (`remote_ip=`); every packet to another
    /// network is sent to it as the gateway, so any remote address works.
    pub remote_ip: Ipv4Addr,
    /// The engine's IPv6 address (`local_ip=` with an IPv6 address).
    /// packetdrill run with `--ip_version=ipv6` picks a random one in
    /// fd3d:fa7b:d17d::/48; a `bind` moves the engine there as for IPv4.
    pub local_ip6: Ipv6Addr,
    /// Prefix length of the local IPv6 network (`prefix_len6=`).
    pub prefix_len6: u8,
    /// The script's remote end over IPv6 (`remote_ip=` with an IPv6
    /// address); every IPv6 packet to another network goes to the remote
    /// end's link-local address, [`REMOTE_LINK_LOCAL`], as the router.
    pub remote_ip6: Ipv6Addr,
    /// Link MTU (`mtu=`).
    pub mtu: usize,
    /// Where the virtual clock starts, in microseconds since the epoch
    /// (`start_usecs=`).
    pub start_usecs: u64,
    /// How far each `gettimeofday` moves the clock (`tick_usecs=`), so
    /// packetdrill's spin loops end.
    pub tick_usecs: u64,
    /// How long `netdev_receive` lets virtual time run waiting for a packet
    /// before it reports none (`sniff_timeout_usecs=`).
    pub sniff_timeout_usecs: u64,
    /// Real milliseconds a blocking call waits for another thread to move
    /// the stack before it lets virtual time run itself (`block_idle_ms=`).
    pub block_idle_ms: u64,
    /// Seed of the engine's ISNs, ports and identifications (`seed=`).
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            local_ip: Ipv4Addr::new(192, 168, 0, 1),
            prefix_len: 16,
            remote_ip: Ipv4Addr::new(192, 0, 2, 1),
            // packetdrill's own IPv6 defaults (its `config.c`).
            local_ip6: Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 1),
            prefix_len6: 48,
            remote_ip6: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            mtu: 1500,
            // 2023-11-14 22:13:20 UTC: fixed, so runs are reproducible.
            start_usecs: 1_700_000_000_000_000,
            tick_usecs: 1,
            sniff_timeout_usecs: 130_000_000,
            block_idle_ms: 50,
            seed: 0x7061_636b_6574_6472,
        }
    }
}

impl Config {
    /// Parses `--so_flags`; an unknown key or a bad value is an error.
    pub fn parse(flags: &str) -> Result<Config, String> {
        let mut c = Config::default();
        for item in flags.split(|ch: char| ch == ',' || ch.is_whitespace()).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("so_flags: `{item}` is not key=value"))?;
            let bad = |what: &str| format!("so_flags: bad {what} `{value}`");
            match key {
                "local_ip" => match value.parse().map_err(|_| bad("address"))? {
                    IpAddr::V4(ip) => c.local_ip = ip,
                    IpAddr::V6(ip) => c.local_ip6 = ip,
                },
                "remote_ip" => match value.parse().map_err(|_| bad("address"))? {
                    IpAddr::V4(ip) => c.remote_ip = ip,
                    IpAddr::V6(ip) => c.remote_ip6 = ip,
                },
                "prefix_len" => {
                    c.prefix_len = value.parse().ok().filter(|p| *p <= 32).ok_or_else(|| bad("prefix length"))?
                }
                "prefix_len6" => {
                    c.prefix_len6 =
                        value.parse().ok().filter(|p| (1..=128).contains(p)).ok_or_else(|| bad("prefix length"))?
                }
                "mtu" => c.mtu = value.parse().ok().filter(|m| (68..=65535).contains(m)).ok_or_else(|| bad("mtu"))?,
                "start_usecs" => c.start_usecs = value.parse().map_err(|_| bad("number"))?,
                "tick_usecs" => c.tick_usecs = value.parse().map_err(|_| bad("number"))?,
                "sniff_timeout_usecs" => c.sniff_timeout_usecs = value.parse().map_err(|_| bad("number"))?,
                "block_idle_ms" => c.block_idle_ms = value.parse().map_err(|_| bad("number"))?,
                "seed" => c.seed = value.parse().map_err(|_| bad("number"))?,
                _ => return Err(format!("so_flags: unknown key `{key}`")),
            }
        }
        if c.local_ip == c.remote_ip || c.local_ip6 == c.remote_ip6 {
            return Err("so_flags: local_ip and remote_ip are the same".into());
        }
        if !usable_ipv6(c.local_ip6) {
            return Err(format!("so_flags: {} cannot be the engine's IPv6 address", c.local_ip6));
        }
        Ok(c)
    }
}

/// Whether `ip` can be the engine's own IPv6 address: a unicast one
/// beyond the link (the link-local one the engine makes itself).
fn usable_ipv6(ip: Ipv6Addr) -> bool {
    !ip.is_unspecified() && !ip.is_loopback() && !ip.is_multicast() && !ip.is_unicast_link_local()
}

/// What a descriptor is.
#[derive(Debug)]
enum Kind {
    /// From `socket`, maybe bound (to the address the engine listens on:
    /// an IPv4-mapped IPv6 address is its IPv4 one), not yet listening or
    /// connected.
    Fresh { bound: Option<SocketAddr> },
    /// Listening; `ready` holds connections taken from the engine's accept
    /// queue (by `poll`) that `accept` has not handed out yet.
    Listener { handle: TcpListenerHandle, ready: VecDeque<TcpHandle> },
    /// A connection, active or accepted.
    Conn {
        handle: TcpHandle,
        /// `connect` was called and its outcome not yet reported by a
        /// second `connect`.
        connecting: bool,
    },
}

/// Per-descriptor state.
#[derive(Debug)]
struct Sock {
    kind: Kind,
    /// Made `AF_INET6`: addresses go in and out as IPv6 ones, an IPv4 peer
    /// as its IPv4-mapped address.
    six: bool,
    /// `IPV6_V6ONLY`: a listener on `::` takes no IPv4 connections, and
    /// IPv4-mapped addresses are refused.
    v6_only: bool,
    nonblocking: bool,
    nodelay: bool,
    reuseaddr: bool,
    /// `SO_LINGER` with a zero timeout: `close` resets.
    linger_zero: bool,
    send_buffer: Option<usize>,
    recv_buffer: Option<usize>,
    /// `TCP_USER_TIMEOUT` in ms (0: none); a connection gets it when it is
    /// made, and an accepted one from its listener.
    user_timeout: u32,
    shut_rd: bool,
    shut_wr: bool,
    /// The connection's error was reported once (by a call or `SO_ERROR`);
    /// afterwards reads see end of stream and writes `EPIPE`, as on Linux.
    error_reported: bool,
}

impl Sock {
    fn new(kind: Kind, six: bool) -> Sock {
        Sock {
            kind,
            six,
            v6_only: false,
            nonblocking: false,
            nodelay: false,
            reuseaddr: false,
            linger_zero: false,
            send_buffer: None,
            recv_buffer: None,
            user_timeout: 0,
            shut_rd: false,
            shut_wr: false,
            error_reported: false,
        }
    }
}

/// Socket options the shim knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockOpt {
    /// `SOL_SOCKET/SO_REUSEADDR`.
    ReuseAddr,
    /// `SOL_SOCKET/SO_REUSEPORT`.
    ReusePort,
    /// `SOL_SOCKET/SO_ERROR` (read only).
    Error,
    /// `SOL_SOCKET/SO_TYPE` (read only).
    Type,
    /// `SOL_SOCKET/SO_SNDBUF`.
    SendBuffer,
    /// `SOL_SOCKET/SO_RCVBUF`.
    RecvBuffer,
    /// `SOL_SOCKET/SO_KEEPALIVE` (accepted, without effect).
    KeepAlive,
    /// `IPPROTO_TCP/TCP_NODELAY`.
    NoDelay,
    /// `IPPROTO_TCP/TCP_USER_TIMEOUT` (ms).
    UserTimeout,
    /// `IPPROTO_IPV6/IPV6_V6ONLY`, on an `AF_INET6` socket.
    V6Only,
}

/// Readiness bits, as `poll` defines them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    pub readable: bool,
    pub writable: bool,
    pub error: bool,
    pub hangup: bool,
    pub read_hangup: bool,
}

/// One engine and everything around it.
#[derive(Debug)]
pub struct Stack {
    config: Config,
    iface: Interface,
    /// Virtual time, in microseconds since the epoch.
    now: u64,
    fds: Vec<Option<Sock>>,
    /// Packets the engine sent (IP header first) with the time they left.
    outbound: VecDeque<(Vec<u8>, u64)>,
    /// Packets dropped because `outbound` was full.
    pub outbound_dropped: u64,
    /// Frames of the link's own traffic the engine sent (ARP, neighbour
    /// discovery, MLD reports), not passed on: a script tests TCP.
    pub link_frames: u64,
    next_ephemeral: u16,
    /// Moves whenever anything changes, so blocked callers know to retry.
    generation: u64,
}

fn errno_of(e: Error) -> Errno {
    match e {
        Error::InvalidHandle => EBADF,
        Error::AddrInUse => EADDRINUSE,
        Error::AddrNotAvailable | Error::NoPortAvailable => EADDRNOTAVAIL,
        Error::NoRoute => ENETUNREACH,
        Error::Unaddressable => EINVAL,
        Error::MessageTooLong => EMSGSIZE,
        Error::NoBuffer => ENOBUFS,
        Error::WouldBlock => EAGAIN,
        Error::NotConnected => ENOTCONN,
        Error::ConnectionReset => ECONNRESET,
        Error::ConnectionRefused => ECONNREFUSED,
        Error::TimedOut => ETIMEDOUT,
        Error::HostUnreachable => EHOSTUNREACH,
    }
}

/// A `TCP_USER_TIMEOUT` in ms as the engine takes it (0: none).
fn user_ms(ms: u32) -> Option<Duration> {
    (ms != 0).then(|| Duration::from_millis(u64::from(ms)))
}

fn errno_of_tcp(e: TcpError) -> Errno {
    match e {
        TcpError::Refused => ECONNREFUSED,
        TcpError::Reset => ECONNRESET,
        TcpError::TimedOut => ETIMEDOUT,
        TcpError::HostUnreachable => EHOSTUNREACH,
    }
}

/// Entries that never expire, in ARP's cache and the neighbour cache:
/// address resolution is not part of what a script tests.
const FOREVER: Duration = Duration::from_secs(u32::MAX as u64);

fn build_engine(config: &Config, now: Instant) -> Result<Interface, Errno> {
    let cidr = Ipv4Cidr::new(config.local_ip, config.prefix_len).map_err(|_| EINVAL)?;
    let mut ic = InterfaceConfig::new(EthernetAddress(LOCAL_MAC), cidr);
    // Everything off the local network goes to the remote end, so the one
    // neighbour entry below is all the engine ever has to resolve.
    ic.gateway = Some(config.remote_ip);
    ic.seed = config.seed;
    ic.secrets = nagare_core::Secrets::from_seed(config.seed);
    ic.arp.entry_lifetime = FOREVER;
    // IPv6 beside it, on a link with no router but the remote end: the
    // address is taken at once (no duplicate address detection), nothing
    // is solicited, and the remote end stays REACHABLE once confirmed.
    let cidr6 = Ipv6Cidr::new(config.local_ip6, config.prefix_len6).ok_or(EINVAL)?;
    ic.ipv6 = Some(Ipv6Config {
        addresses: vec![cidr6],
        dad_transmits: 0,
        gateway: Some(REMOTE_LINK_LOCAL),
        accept_router_adverts: false,
        accept_redirects: false,
        router_solicitations: 0,
        ndp: NdpConfig { reachable_time: FOREVER, ..NdpConfig::default() },
        ..Ipv6Config::default()
    });
    ic.tx_queue_limit = OUTBOUND_LIMIT;
    // The script's link: its MTU, and no offloads, so that every segment
    // reaches packetdrill as it would cross a wire.
    let caps = Capabilities { mtu: config.mtu, tx_offloads: TxOffloads::NONE };
    let mut iface = Interface::new(ic, caps, BufferPool::new(2048, 16384));
    // Teach the engine the remote end's Ethernet address the way RFC 826
    // lets any host learn a neighbour: the neighbour asks for us. The
    // engine's answer is dropped with the rest of the link layer.
    let request = arp_request(config.remote_ip, config.local_ip);
    let frame = PacketBuf::from_slice(iface.pool(), 0, &request).map_err(|_| ENOBUFS)?;
    iface.receive(frame, now);
    // The same over IPv6 (RFC 4861 7.2.3 and 7.2.5): the router's
    // solicitation for our address enters it STALE, and its solicited
    // advertisement of itself makes it REACHABLE.
    let solicit = NdpRepr::NeighborSolicit { target: config.local_ip6, lladdr: Some(EthernetAddress(REMOTE_MAC)) };
    let advert = NdpRepr::NeighborAdvert {
        router_flag: true,
        solicited_flag: true,
        override_flag: true,
        target: REMOTE_LINK_LOCAL,
        lladdr: Some(EthernetAddress(REMOTE_MAC)),
    };
    for message in [solicit, advert] {
        let frame = ndp_frame(&message, REMOTE_LINK_LOCAL, config.local_ip6).ok_or(EINVAL)?;
        let frame = PacketBuf::from_slice(iface.pool(), 0, &frame).map_err(|_| ENOBUFS)?;
        iface.receive(frame, now);
    }
    iface.tx_queue().clear();
    if iface.arp_lookup(config.remote_ip, now).is_none()
        || iface.neighbor_state(REMOTE_LINK_LOCAL) != Some(NeighborState::Reachable)
    {
        return Err(EADDRNOTAVAIL);
    }
    Ok(iface)
}

/// An Ethernet frame with an ARP request from the remote end for `target`.
fn arp_request(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&REMOTE_MAC);
    f.extend_from_slice(&ETHERTYPE_ARP);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet, IPv4, request
    f.extend_from_slice(&REMOTE_MAC);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f
}

/// An Ethernet frame with a neighbour discovery message from the remote
/// end (`src`) to `dst`.
fn ndp_frame(message: &NdpRepr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Option<Vec<u8>> {
    let len = message.buffer_len();
    let ip = Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, len, NDP_HOP_LIMIT);
    let mut f = vec![0; ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + len];
    f.get_mut(..6)?.copy_from_slice(&LOCAL_MAC);
    f.get_mut(6..12)?.copy_from_slice(&REMOTE_MAC);
    f.get_mut(12..14)?.copy_from_slice(&ETHERTYPE_IPV6);
    let (header, body) = f.get_mut(ETHERNET_HEADER_LEN..)?.split_at_mut(IPV6_HEADER_LEN);
    ip.emit(header).ok()?;
    message.emit(body, src, dst).ok()?;
    Some(f)
}

/// Whether an IPv6 packet the engine sent is the link's own traffic:
/// neighbour discovery and MLD (ICMPv6 types 130 to 143, and MLD reports
/// behind their hop-by-hop header).
fn is_link_traffic6(ip: &[u8]) -> bool {
    match (ip.get(6).copied().map(IpProtocol::from), ip.get(IPV6_HEADER_LEN)) {
        (Some(IpProtocol::HopByHop), _) => true,
        (Some(IpProtocol::Icmpv6), Some(&ty)) => (130..=143).contains(&ty),
        _ => false,
    }
}

impl Stack {
    /// A stack at the configured address with the clock at its start.
    pub fn new(config: Config) -> Result<Stack, Errno> {
        let now = config.start_usecs;
        let iface = build_engine(&config, Instant::from_micros(now))?;
        Ok(Stack {
            next_ephemeral: EPHEMERAL_FIRST + (config.seed % u64::from(EPHEMERAL_LAST - EPHEMERAL_FIRST + 1)) as u16,
            config,
            iface,
            now,
            fds: Vec::new(),
            outbound: VecDeque::new(),
            outbound_dropped: 0,
            link_frames: 0,
            generation: 0,
        })
    }

    /// The settings in force (the local address may have moved).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The engine, for inspection.
    pub fn engine(&self) -> &Interface {
        &self.iface
    }

    /// Changes whenever the state does.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Virtual time, microseconds since the epoch.
    pub fn now_usecs(&self) -> u64 {
        self.now
    }

    fn instant(&self) -> Instant {
        Instant::from_micros(self.now)
    }

    fn touch(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    // ---- time and the link ------------------------------------------------

    /// Moves frames from the engine's queue to `outbound`, without their
    /// Ethernet header.
    fn collect(&mut self) {
        while let Some(frame) = self.iface.pop_transmit() {
            self.touch();
            let bytes = frame.to_vec();
            match (bytes.get(12..14), bytes.get(ETHERNET_HEADER_LEN..)) {
                (Some(t), Some(ip)) if t == ETHERTYPE_IPV4 || (t == ETHERTYPE_IPV6 && !is_link_traffic6(ip)) => {
                    if self.outbound.len() >= OUTBOUND_LIMIT {
                        self.outbound_dropped += 1;
                    } else {
                        self.outbound.push_back((ip.to_vec(), self.now));
                    }
                }
                _ => self.link_frames += 1,
            }
        }
    }

    /// Runs the engine's timers up to `target`, each at its own instant.
    pub fn advance_to(&mut self, target: u64) {
        let mut polls_here = 0u32;
        loop {
            let due = self.iface.poll_at().map(Instant::total_micros);
            match due {
                Some(t) if t <= self.now && polls_here < MAX_POLLS_AT_ONE_INSTANT => polls_here += 1,
                Some(t) if t > self.now && t <= target => {
                    self.now = t;
                    polls_here = 1;
                }
                _ => break,
            }
            let now = self.instant();
            self.iface.poll(now);
            self.collect();
        }
        if target > self.now {
            self.now = target;
            self.touch();
        }
    }

    /// `usleep`: lets `usecs` of virtual time pass.
    pub fn sleep(&mut self, usecs: u64) {
        self.advance_to(self.now.saturating_add(usecs));
    }

    /// `gettimeofday`: one tick passes, then the time is read.
    pub fn tick(&mut self) -> u64 {
        self.advance_to(self.now.saturating_add(self.config.tick_usecs));
        self.now
    }

    /// Runs the timers due next, up to `limit`; false when none is due
    /// before it (the clock then stands at `limit`).
    pub fn advance_to_next_timer(&mut self, limit: u64) -> bool {
        match self.iface.poll_at().map(Instant::total_micros) {
            Some(t) if t <= limit => {
                self.advance_to(t.max(self.now));
                true
            }
            _ => {
                self.advance_to(limit);
                false
            }
        }
    }

    /// `netdev_send`: a packet from the remote end, IP header first.
    pub fn inject(&mut self, packet: &[u8]) -> Result<(), Errno> {
        let Some(&first) = packet.first() else {
            return Err(EINVAL);
        };
        let (ethertype, least) = match first >> 4 {
            4 => (ETHERTYPE_IPV4, MIN_IPV4_PACKET),
            6 => (ETHERTYPE_IPV6, IPV6_HEADER_LEN),
            _ => return Err(EINVAL),
        };
        if packet.len() < least || packet.len() > MAX_IP_PACKET {
            return Err(EINVAL);
        }
        let mut frame = Vec::with_capacity(ETHERNET_HEADER_LEN + packet.len());
        frame.extend_from_slice(&LOCAL_MAC);
        frame.extend_from_slice(&REMOTE_MAC);
        frame.extend_from_slice(&ethertype);
        frame.extend_from_slice(packet);
        let frame = PacketBuf::from_slice(self.iface.pool(), 0, &frame).map_err(|_| ENOBUFS)?;
        let now = self.instant();
        self.iface.receive(frame, now);
        self.touch();
        self.collect();
        Ok(())
    }

    /// The oldest packet the engine sent and not yet taken, with its time.
    pub fn take_outbound(&mut self) -> Option<(Vec<u8>, u64)> {
        let p = self.outbound.pop_front();
        if p.is_some() {
            self.touch();
        }
        p
    }

    /// `netdev_receive`: the next packet, letting virtual time run (timer
    /// by timer) up to the sniff timeout while none is there.
    pub fn sniff(&mut self) -> Option<(Vec<u8>, u64)> {
        let limit = self.now.saturating_add(self.config.sniff_timeout_usecs);
        loop {
            if let Some(p) = self.take_outbound() {
                return Some(p);
            }
            if !self.advance_to_next_timer(limit) {
                return self.take_outbound();
            }
        }
    }

    // ---- descriptors --------------------------------------------------------

    fn sock(&self, fd: i32) -> Result<&Sock, Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        self.fds.get(i).and_then(Option::as_ref).ok_or(EBADF)
    }

    fn sock_mut(&mut self, fd: i32) -> Result<&mut Sock, Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        self.fds.get_mut(i).and_then(Option::as_mut).ok_or(EBADF)
    }

    fn alloc_fd(&mut self, sock: Sock) -> Result<i32, Errno> {
        if self.fds.len() < FIRST_FD {
            self.fds.resize_with(FIRST_FD, || None);
        }
        let free = (FIRST_FD..self.fds.len()).find(|&i| self.fds[i].is_none());
        let i = match free {
            Some(i) => i,
            None if self.fds.len() < MAX_FDS => {
                self.fds.push(None);
                self.fds.len() - 1
            }
            None => return Err(EMFILE),
        };
        self.fds[i] = Some(sock);
        self.touch();
        i32::try_from(i).map_err(|_| EMFILE)
    }

    /// Whether a call on `fd` that cannot go on now should wait.
    pub fn is_blocking(&self, fd: i32) -> bool {
        self.sock(fd).map(|s| !s.nonblocking).unwrap_or(false)
    }

    /// `socket(AF_INET or AF_INET6, SOCK_STREAM[|SOCK_NONBLOCK|SOCK_CLOEXEC], 0 or IPPROTO_TCP)`.
    pub fn socket(&mut self, domain: i32, ty: i32, protocol: i32) -> Result<i32, Errno> {
        let six = match domain {
            libc::AF_INET => false,
            libc::AF_INET6 => true,
            _ => return Err(EAFNOSUPPORT),
        };
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        if ty & !flags != libc::SOCK_STREAM {
            return Err(EPROTONOSUPPORT);
        }
        if protocol != 0 && protocol != libc::IPPROTO_TCP {
            return Err(EPROTONOSUPPORT);
        }
        let mut sock = Sock::new(Kind::Fresh { bound: None }, six);
        sock.nonblocking = ty & libc::SOCK_NONBLOCK != 0;
        self.alloc_fd(sock)
    }

    fn port_taken(&self, port: u16) -> bool {
        // Listeners and connections hold their ports in the engine, which
        // refuses a second listener itself.
        self.fds.iter().flatten().any(|s| matches!(s.kind, Kind::Fresh { bound: Some(a) } if a.port() == port))
    }

    fn ephemeral_port(&mut self) -> Result<u16, Errno> {
        let span = EPHEMERAL_LAST - EPHEMERAL_FIRST + 1;
        for _ in 0..span {
            let p = self.next_ephemeral;
            self.next_ephemeral = if p >= EPHEMERAL_LAST { EPHEMERAL_FIRST } else { p + 1 };
            if !self.port_taken(p) {
                return Ok(p);
            }
        }
        Err(EADDRINUSE)
    }

    /// Whether the engine holds no TCP socket at all, so its address can
    /// still move.
    fn engine_idle(&self) -> bool {
        self.iface.tcp_ref().connection_count() == 0
            && !self.fds.iter().flatten().any(|s| !matches!(s.kind, Kind::Fresh { .. }))
    }

    /// The address an `AF_INET6` socket's call names, as the engine takes
    /// it: an IPv4-mapped one is its IPv4 address (`EAFNOSUPPORT` for an
    /// address of the other family than the socket's, `v4_refused` for a
    /// mapped one on an `IPV6_V6ONLY` socket).
    fn engine_addr(&self, fd: i32, addr: SocketAddr, v4_refused: Errno) -> Result<SocketAddr, Errno> {
        let sock = self.sock(fd)?;
        match (sock.six, addr) {
            (false, SocketAddr::V4(_)) => Ok(addr),
            (true, SocketAddr::V6(v6)) => match v6.ip().to_ipv4_mapped() {
                Some(_) if sock.v6_only => Err(v4_refused),
                Some(v4) => Ok(SocketAddr::V4(SocketAddrV4::new(v4, v6.port()))),
                None => Ok(addr),
            },
            _ => Err(EAFNOSUPPORT),
        }
    }

    /// An address as a call on `fd` gives it back: an IPv4 one as its
    /// IPv4-mapped address on an `AF_INET6` socket.
    fn user_addr(&self, fd: i32, addr: SocketAddr) -> Result<SocketAddr, Errno> {
        match (self.sock(fd)?.six, addr) {
            (true, SocketAddr::V4(v4)) => {
                Ok(SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0)))
            }
            (false, SocketAddr::V6(_)) => Err(EAFNOSUPPORT),
            _ => Ok(addr),
        }
    }

    /// `bind`. An address that is not the engine's is adopted while no
    /// socket is in use: packetdrill chooses the local address at random
    /// and tells the shared object nothing but what the script binds to.
    pub fn bind(&mut self, fd: i32, addr: SocketAddr) -> Result<(), Errno> {
        match self.sock(fd)?.kind {
            Kind::Fresh { bound: None } => {}
            _ => return Err(EINVAL),
        }
        let addr = self.engine_addr(fd, addr, EINVAL)?;
        let mut config = self.config.clone();
        match addr.ip() {
            IpAddr::V4(ip) if !ip.is_unspecified() && ip != self.config.local_ip => {
                let usable =
                    !ip.is_multicast() && !ip.is_broadcast() && !ip.is_loopback() && ip != self.config.remote_ip;
                if !usable {
                    return Err(EADDRNOTAVAIL);
                }
                config.local_ip = ip;
            }
            IpAddr::V6(ip) if !ip.is_unspecified() && ip != self.config.local_ip6 => {
                if !usable_ipv6(ip) || ip == self.config.remote_ip6 {
                    return Err(EADDRNOTAVAIL);
                }
                config.local_ip6 = ip;
            }
            _ => {}
        }
        if config != self.config {
            if !self.engine_idle() {
                return Err(EADDRNOTAVAIL);
            }
            self.iface = build_engine(&config, self.instant())?;
            self.config = config;
        }
        let port = match addr.port() {
            0 => self.ephemeral_port()?,
            p => p,
        };
        let reuse = self.sock(fd)?.reuseaddr;
        if self.port_taken(port) && !reuse {
            return Err(EADDRINUSE);
        }
        self.sock_mut(fd)?.kind = Kind::Fresh { bound: Some(SocketAddr::new(addr.ip(), port)) };
        self.touch();
        Ok(())
    }

    /// Runs `f` with the engine's per-socket defaults set to what `fd`
    /// asked for, then puts them back.
    fn with_buffers<T>(&mut self, fd: i32, f: impl FnOnce(&mut Self) -> T) -> Result<T, Errno> {
        let (snd, rcv) = {
            let s = self.sock(fd)?;
            (s.send_buffer, s.recv_buffer)
        };
        let d = self.iface.tcp().defaults_mut();
        let saved = (d.send_buffer, d.recv_buffer, d.recv_autotune, d.send_autotune);
        if let Some(n) = snd {
            // A socket given SO_SNDBUF keeps that size too.
            d.set_send_buffer(n);
        }
        if let Some(n) = rcv {
            // As in Linux, a socket given SO_RCVBUF keeps that size.
            d.set_recv_buffer(n);
        }
        let out = f(self);
        let d = self.iface.tcp().defaults_mut();
        d.send_buffer = saved.0;
        d.recv_buffer = saved.1;
        d.recv_autotune = saved.2;
        d.send_autotune = saved.3;
        Ok(out)
    }

    /// `listen`.
    pub fn listen(&mut self, fd: i32, backlog: i32) -> Result<(), Errno> {
        let (bound, six, v6_only) = match self.sock(fd)? {
            Sock { kind: Kind::Fresh { bound }, six, v6_only, .. } => (*bound, *six, *v6_only),
            Sock { kind: Kind::Listener { .. }, .. } => return Ok(()),
            Sock { kind: Kind::Conn { .. }, .. } => return Err(EINVAL),
        };
        let local = match bound {
            Some(a) => a,
            None if six => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), self.ephemeral_port()?),
            None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), self.ephemeral_port()?),
        };
        let backlog = usize::try_from(backlog).unwrap_or(0).clamp(1, 4096);
        // An AF_INET6 listener takes IPv4 connections too (on `::`), unless
        // it is IPV6_V6ONLY, as Linux's.
        let handle = self
            .with_buffers(fd, |s| match local {
                SocketAddr::V6(v6) if v6_only => s.iface.tcp().listen_v6_only(v6, backlog),
                _ => s.iface.tcp().listen(local, backlog),
            })?
            .map_err(errno_of)?;
        self.sock_mut(fd)?.kind = Kind::Listener { handle, ready: VecDeque::new() };
        self.touch();
        Ok(())
    }

    /// Takes what the engine's accept queue holds for a listener.
    fn pull_accepted(&mut self, fd: i32) -> Result<(), Errno> {
        let Some(Sock { kind: Kind::Listener { handle, ready }, .. }) =
            self.fds.get_mut(usize::try_from(fd).map_err(|_| EBADF)?).and_then(Option::as_mut)
        else {
            return Ok(());
        };
        while let Ok(Some(conn)) = self.iface.tcp().accept(*handle) {
            ready.push_back(conn);
            self.generation = self.generation.wrapping_add(1);
        }
        Ok(())
    }

    /// `accept`: the new descriptor and the peer's address; `EAGAIN` when
    /// none is ready.
    pub fn accept(&mut self, fd: i32) -> Result<(i32, SocketAddr), Errno> {
        self.pull_accepted(fd)?;
        let sock = self.sock_mut(fd)?;
        let (nodelay, user_timeout, six) = (sock.nodelay, sock.user_timeout, sock.six);
        let Kind::Listener { ready, .. } = &mut sock.kind else {
            return Err(EINVAL);
        };
        let Some(handle) = ready.pop_front() else {
            return Err(EAGAIN);
        };
        let remote = match self.iface.tcp_ref().connection(handle) {
            Some(c) => self.user_addr(fd, c.remote())?,
            None => return Err(ECONNRESET),
        };
        if nodelay {
            self.iface.tcp().set_nodelay(handle, true).map_err(errno_of)?;
        }
        self.iface.tcp().set_user_timeout(handle, user_ms(user_timeout)).map_err(errno_of)?;
        let mut conn = Sock::new(Kind::Conn { handle, connecting: false }, six);
        conn.nodelay = nodelay;
        conn.user_timeout = user_timeout;
        let fd = self.alloc_fd(conn)?;
        Ok((fd, remote))
    }

    /// `connect`: starts the handshake (`EINPROGRESS`); called again, says
    /// how it went (`EALREADY`, `EISCONN`, or the error once).
    pub fn connect(&mut self, fd: i32, remote: SocketAddr) -> Result<(), Errno> {
        match self.sock(fd)?.kind {
            Kind::Fresh { bound } => {
                let remote = self.engine_addr(fd, remote, ENETUNREACH)?;
                let port = bound.map_or(0, |a| a.port());
                let now = self.instant();
                let handle = self.with_buffers(fd, |s| s.iface.tcp().connect(remote, port, now))?.map_err(errno_of)?;
                let sock = self.sock_mut(fd)?;
                sock.kind = Kind::Conn { handle, connecting: true };
                let user_timeout = user_ms(sock.user_timeout);
                if sock.nodelay {
                    self.iface.tcp().set_nodelay(handle, true).map_err(errno_of)?;
                }
                self.iface.tcp().set_user_timeout(handle, user_timeout).map_err(errno_of)?;
                self.touch();
                self.collect();
                Err(EINPROGRESS)
            }
            Kind::Listener { .. } => Err(EISCONN),
            Kind::Conn { handle, connecting } => {
                let (state, error) = match self.iface.tcp_ref().connection(handle) {
                    Some(c) => (c.state(), c.error()),
                    None => (State::Closed, None),
                };
                let sock = self.sock_mut(fd)?;
                if let Some(e) = error {
                    if !sock.error_reported {
                        sock.error_reported = true;
                        return Err(errno_of_tcp(e));
                    }
                }
                match state {
                    State::SynSent | State::SynReceived if error.is_none() => Err(EALREADY),
                    _ if connecting => {
                        if let Kind::Conn { connecting, .. } = &mut sock.kind {
                            *connecting = false;
                        }
                        if error.is_some() {
                            Err(ECONNREFUSED)
                        } else {
                            Ok(())
                        }
                    }
                    _ => Err(EISCONN),
                }
            }
        }
    }

    /// The peer of a connection (for `accept`, `recvfrom`, `recvmsg`).
    pub fn peer(&self, fd: i32) -> Result<SocketAddr, Errno> {
        match self.sock(fd)?.kind {
            Kind::Conn { handle, .. } => {
                let remote = self.iface.tcp_ref().connection(handle).map(|c| c.remote()).ok_or(ENOTCONN)?;
                self.user_addr(fd, remote)
            }
            _ => Err(ENOTCONN),
        }
    }

    /// Whether the handshake `connect` started has finished (either way).
    pub fn connect_settled(&self, fd: i32) -> bool {
        match self.sock(fd).map(|s| &s.kind) {
            Ok(Kind::Conn { handle, .. }) => match self.iface.tcp_ref().connection(*handle) {
                Some(c) => c.error().is_some() || !matches!(c.state(), State::SynSent | State::SynReceived),
                None => true,
            },
            _ => true,
        }
    }

    fn conn(&mut self, fd: i32) -> Result<(TcpHandle, &mut Sock), Errno> {
        let sock = self.sock_mut(fd)?;
        match sock.kind {
            Kind::Conn { handle, .. } => Ok((handle, sock)),
            _ => Err(ENOTCONN),
        }
    }

    /// `read`/`recv`: `Ok(0)` at end of stream, `EAGAIN` when nothing yet.
    pub fn recv(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        let (handle, sock) = self.conn(fd)?;
        if sock.shut_rd || sock.error_reported {
            return Ok(0);
        }
        let now = self.instant();
        let r = self.iface.tcp().recv(handle, buf, now);
        self.touch();
        self.collect();
        match r {
            Ok(n) => Ok(n),
            Err(Error::WouldBlock) => Err(EAGAIN),
            Err(e) => {
                if matches!(
                    e,
                    Error::ConnectionReset | Error::ConnectionRefused | Error::TimedOut | Error::HostUnreachable
                ) {
                    self.sock_mut(fd)?.error_reported = true;
                }
                Err(errno_of(e))
            }
        }
    }

    /// `write`/`send`: bytes taken (maybe fewer than given); `EAGAIN` when
    /// none fit.
    pub fn send(&mut self, fd: i32, data: &[u8]) -> Result<usize, Errno> {
        let (handle, sock) = self.conn(fd)?;
        if sock.shut_wr || sock.error_reported {
            return Err(EPIPE);
        }
        let (state, error) = match self.iface.tcp_ref().connection(handle) {
            Some(c) => (c.state(), c.error()),
            None => return Err(EPIPE),
        };
        if let Some(e) = error {
            self.sock_mut(fd)?.error_reported = true;
            return Err(errno_of_tcp(e));
        }
        match state {
            // Data waits for the handshake, as a kernel without TFO does.
            State::SynSent | State::SynReceived => return Err(EAGAIN),
            State::Established | State::CloseWait => {}
            _ => return Err(EPIPE),
        }
        if data.is_empty() {
            return Ok(0);
        }
        let now = self.instant();
        let r = self.iface.tcp().send(handle, data, now);
        self.touch();
        self.collect();
        match r {
            Ok(0) => Err(EAGAIN),
            Ok(n) => Ok(n),
            Err(Error::NotConnected) => Err(EPIPE),
            Err(e) => Err(errno_of(e)),
        }
    }

    /// `shutdown` (`SHUT_RD`, `SHUT_WR`, `SHUT_RDWR`).
    pub fn shutdown(&mut self, fd: i32, how: i32) -> Result<(), Errno> {
        let (rd, wr) = match how {
            libc::SHUT_RD => (true, false),
            libc::SHUT_WR => (false, true),
            libc::SHUT_RDWR => (true, true),
            _ => return Err(EINVAL),
        };
        let (handle, sock) = self.conn(fd)?;
        let drop_input = rd && !sock.shut_rd;
        sock.shut_rd |= rd;
        let send_fin = wr && !sock.shut_wr;
        sock.shut_wr |= wr;
        if drop_input {
            let now = self.instant();
            self.iface.tcp().shutdown_read(handle, now).map_err(errno_of)?;
        }
        if send_fin {
            let now = self.instant();
            self.iface.tcp().shutdown(handle, now).map_err(errno_of)?;
        }
        self.touch();
        self.collect();
        Ok(())
    }

    /// `close`: a connection closes gracefully (or resets with a zero
    /// linger); a listener resets the connections nobody accepted.
    pub fn close(&mut self, fd: i32) -> Result<(), Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        let sock = self.fds.get_mut(i).and_then(Option::take).ok_or(EBADF)?;
        let now = self.instant();
        match sock.kind {
            Kind::Fresh { .. } => {}
            Kind::Listener { handle, ready } => {
                for conn in ready {
                    let _ = self.iface.tcp().abort(conn, now);
                }
                let _ = self.iface.tcp().listener_close(handle, now);
            }
            Kind::Conn { handle, .. } => {
                // The engine may already have let go of a reset connection.
                let _ = if sock.linger_zero {
                    self.iface.tcp().abort(handle, now)
                } else {
                    self.iface.tcp().close(handle, now)
                };
            }
        }
        self.touch();
        self.collect();
        Ok(())
    }

    /// `fcntl(F_GETFL)`.
    pub fn get_flags(&self, fd: i32) -> Result<i32, Errno> {
        let s = self.sock(fd)?;
        Ok(libc::O_RDWR | if s.nonblocking { libc::O_NONBLOCK } else { 0 })
    }

    /// `fcntl(F_SETFL)`: only `O_NONBLOCK` means anything.
    pub fn set_flags(&mut self, fd: i32, flags: i32) -> Result<(), Errno> {
        self.sock_mut(fd)?.nonblocking = flags & libc::O_NONBLOCK != 0;
        self.touch();
        Ok(())
    }

    /// Whether `fd` is open (for `F_GETFD`/`F_SETFD`).
    pub fn check_fd(&self, fd: i32) -> Result<(), Errno> {
        self.sock(fd).map(|_| ())
    }

    /// Bytes ready to read (`FIONREAD`).
    pub fn readable_bytes(&self, fd: i32) -> Result<usize, Errno> {
        match self.sock(fd)?.kind {
            Kind::Conn { handle, .. } => Ok(self.iface.tcp_ref().connection(handle).map_or(0, |c| c.recv_queued())),
            Kind::Listener { .. } => Err(EINVAL),
            Kind::Fresh { .. } => Ok(0),
        }
    }

    /// `setsockopt` with an `int` value.
    pub fn set_option(&mut self, fd: i32, opt: SockOpt, value: i32) -> Result<(), Errno> {
        let on = value != 0;
        let handle = match self.sock(fd)?.kind {
            Kind::Conn { handle, .. } => Some(handle),
            _ => None,
        };
        let sock = self.sock_mut(fd)?;
        match opt {
            SockOpt::ReuseAddr | SockOpt::ReusePort => sock.reuseaddr = on,
            SockOpt::KeepAlive => {}
            SockOpt::NoDelay => {
                sock.nodelay = on;
                if let Some(h) = handle {
                    self.iface.tcp().set_nodelay(h, on).map_err(errno_of)?;
                    self.collect();
                }
            }
            SockOpt::SendBuffer | SockOpt::RecvBuffer => {
                let mut n = usize::try_from(value).map_err(|_| EINVAL)?.clamp(2048, 64 << 20);
                if let Some(h) = handle {
                    // An open connection resizes at once (no lower than
                    // what it holds).
                    let now = self.instant();
                    let mut tcp = self.iface.tcp();
                    let r = if opt == SockOpt::SendBuffer {
                        tcp.set_send_buffer(h, n, now)
                    } else {
                        tcp.set_recv_buffer(h, n, now)
                    };
                    n = r.map_err(errno_of)?;
                    self.collect();
                }
                let sock = self.sock_mut(fd)?;
                if opt == SockOpt::SendBuffer {
                    sock.send_buffer = Some(n);
                } else {
                    sock.recv_buffer = Some(n);
                }
            }
            SockOpt::UserTimeout => {
                // As Linux: a negative timeout is refused, 0 is none.
                let ms = u32::try_from(value).map_err(|_| EINVAL)?;
                sock.user_timeout = ms;
                if let Some(h) = handle {
                    self.iface.tcp().set_user_timeout(h, user_ms(ms)).map_err(errno_of)?;
                }
            }
            SockOpt::V6Only => {
                // As Linux: only an AF_INET6 socket has it, and only
                // before it is bound or used.
                if !sock.six {
                    return Err(ENOPROTOOPT);
                }
                if !matches!(sock.kind, Kind::Fresh { bound: None }) {
                    return Err(EINVAL);
                }
                sock.v6_only = on;
            }
            SockOpt::Error | SockOpt::Type => return Err(ENOPROTOOPT),
        }
        self.touch();
        Ok(())
    }

    /// `setsockopt(SO_LINGER)`.
    pub fn set_linger(&mut self, fd: i32, on: bool, secs: i32) -> Result<(), Errno> {
        self.sock_mut(fd)?.linger_zero = on && secs == 0;
        Ok(())
    }

    /// `getsockopt` of an `int` value; `SO_ERROR` reports (and clears) a
    /// connection's error.
    pub fn get_option(&mut self, fd: i32, opt: SockOpt) -> Result<i32, Errno> {
        let defaults = (self.iface.tcp().defaults_mut().send_buffer, self.iface.tcp().defaults_mut().recv_buffer);
        let conn = match self.sock(fd)?.kind {
            Kind::Conn { handle, .. } => self.iface.tcp_ref().connection(handle),
            _ => None,
        };
        let error = conn.and_then(|c| c.error());
        // An open connection's buffers as they are now.
        let config = conn.map(|c| (c.send_buffer(), c.recv_buffer()));
        let sock = self.sock_mut(fd)?;
        let as_int = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        Ok(match opt {
            SockOpt::ReuseAddr | SockOpt::ReusePort => i32::from(sock.reuseaddr),
            SockOpt::NoDelay => i32::from(sock.nodelay),
            SockOpt::KeepAlive => 0,
            SockOpt::Type => libc::SOCK_STREAM,
            SockOpt::SendBuffer => as_int(config.map_or(sock.send_buffer.unwrap_or(defaults.0), |c| c.0)),
            SockOpt::RecvBuffer => as_int(config.map_or(sock.recv_buffer.unwrap_or(defaults.1), |c| c.1)),
            SockOpt::UserTimeout => as_int(sock.user_timeout as usize),
            SockOpt::V6Only if !sock.six => return Err(ENOPROTOOPT),
            SockOpt::V6Only => i32::from(sock.v6_only),
            SockOpt::Error => match error {
                Some(e) if !sock.error_reported => {
                    sock.error_reported = true;
                    errno_of_tcp(e)
                }
                _ => 0,
            },
        })
    }

    /// What `poll` would report for `fd`; `None` for a descriptor that is
    /// not open (`POLLNVAL`).
    pub fn readiness(&mut self, fd: i32) -> Option<Ready> {
        self.pull_accepted(fd).ok()?;
        let sock = self.sock(fd).ok()?;
        let mut r = Ready::default();
        match &sock.kind {
            // As Linux reports a socket that is neither listening nor
            // connected.
            Kind::Fresh { .. } => {
                r.writable = true;
                r.hangup = true;
            }
            Kind::Listener { ready, .. } => r.readable = !ready.is_empty(),
            Kind::Conn { handle, .. } => {
                let Some(c) = self.iface.tcp_ref().connection(*handle) else {
                    r.hangup = true;
                    r.readable = true;
                    return Some(r);
                };
                if c.error().is_some() {
                    r.error = !sock.error_reported;
                    r.hangup = true;
                    r.readable = true;
                    r.writable = true;
                    return Some(r);
                }
                let synchronized = !matches!(c.state(), State::SynSent | State::SynReceived | State::Closed);
                r.readable = synchronized && (c.can_recv() || sock.shut_rd);
                r.read_hangup = c.at_eof();
                r.writable =
                    matches!(c.state(), State::Established | State::CloseWait) && c.can_send() && !sock.shut_wr;
                r.hangup = (c.at_eof() && sock.shut_wr) || c.state() == State::Closed;
            }
        }
        Some(r)
    }

    /// Whether any descriptor is open.
    pub fn open_fds(&self) -> usize {
        self.fds.iter().flatten().count()
    }

    /// An error for calls the shim does not implement.
    pub fn unsupported() -> Errno {
        EOPNOTSUPP
    }
}
