//! Configuration of an interface and the limits that bound its memory.

use crate::hash::SipKey;
use crate::ipv6::addr::Ipv6Cidr;
use crate::ipv6::iid::InterfaceIds;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::time::Duration;
use nagare_wire::{EthernetAddress, Ipv4Cidr};

/// A route: packets for `destination` go through `via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination network.
    pub destination: Ipv4Cidr,
    /// Next hop, which must be on a directly attached network.
    pub via: Ipv4Addr,
}

/// Limits of the ARP cache.
#[derive(Debug, Clone)]
pub struct ArpConfig {
    /// Most entries held; the oldest is evicted to make room.
    pub cache_size: usize,
    /// How long a learned entry stays valid.
    pub entry_lifetime: Duration,
    /// Least time between two requests for the same address.
    pub request_interval: Duration,
    /// Requests sent before the packets waiting on an address are dropped.
    pub max_requests: u32,
    /// How long an address that never answered is remembered as such
    /// (Linux's FAILED state): packets to it are dropped at once and their
    /// senders told, instead of waiting through another resolution.
    pub failed_lifetime: Duration,
    /// Packets that may wait for the resolution of one address: by
    /// default the fragments of a 64 KiB datagram at an MTU of 1500 (45)
    /// fit, so one large datagram to a new neighbour is not cut short.
    pub pending_per_address: usize,
    /// Addresses that may be under resolution at once.
    pub pending_addresses: usize,
    /// Packets that may wait for resolution in all (each holds a buffer
    /// of the pool).
    pub pending_total: usize,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            cache_size: 1024,
            entry_lifetime: Duration::from_secs(60),
            request_interval: Duration::from_secs(1),
            max_requests: 3,
            failed_lifetime: Duration::from_secs(3),
            pending_per_address: 64,
            pending_addresses: 64,
            pending_total: 1024,
        }
    }
}

/// Limits of reassembly (IPv4's and IPv6's each have their own).
#[derive(Debug, Clone)]
pub struct ReassemblyConfig {
    /// Time a partial datagram may wait for its missing fragments.
    pub timeout: Duration,
    /// Payload bytes held in all partial datagrams together.
    pub max_bytes: usize,
    /// Partial datagrams held at once.
    pub max_datagrams: usize,
    /// Fragments held for one datagram.
    pub max_fragments_per_datagram: usize,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            timeout: Duration::from_secs(30),
            max_bytes: 4 << 20,
            max_datagrams: 256,
            max_fragments_per_datagram: 64,
        }
    }
}

/// Limits and timers of the IPv6 neighbour cache (RFC 4861 section 10
/// gives the timers' values).
#[derive(Debug, Clone)]
pub struct NdpConfig {
    /// Most entries held, unresolved ones included.
    pub cache_size: usize,
    /// Packets that may wait for the resolution of one address: by
    /// default the fragments of a 64 KiB datagram at an MTU of 1500 (46)
    /// fit, so one large datagram to a new neighbour is not cut short.
    pub pending_per_address: usize,
    /// Addresses that may be under resolution (INCOMPLETE) at once.
    pub pending_addresses: usize,
    /// Packets that may wait for resolution in all (each holds a buffer
    /// of the pool).
    pub pending_total: usize,
    /// Time between two solicitations for the same address
    /// (RetransTimer).
    pub retrans_timer: Duration,
    /// Multicast solicitations sent before an unresolved address fails
    /// (MAX_MULTICAST_SOLICIT).
    pub max_multicast_solicit: u32,
    /// Unicast probes sent before a known neighbour fails
    /// (MAX_UNICAST_SOLICIT).
    pub max_unicast_solicit: u32,
    /// How long a confirmed neighbour stays REACHABLE (ReachableTime).
    pub reachable_time: Duration,
    /// How long a STALE neighbour that was sent to waits in DELAY for
    /// confirmation before it is probed (DELAY_FIRST_PROBE_TIME).
    pub delay_first_probe: Duration,
}

impl Default for NdpConfig {
    fn default() -> Self {
        NdpConfig {
            cache_size: 1024,
            pending_per_address: 64,
            pending_addresses: 64,
            pending_total: 1024,
            retrans_timer: Duration::from_secs(1),
            max_multicast_solicit: 3,
            max_unicast_solicit: 3,
            reachable_time: Duration::from_secs(30),
            delay_first_probe: Duration::from_secs(5),
        }
    }
}

/// IPv6 on an interface: its configured addresses (a link-local address
/// the interface makes is always added) and neighbour discovery.
#[derive(Debug, Clone)]
pub struct Ipv6Config {
    /// Addresses beside the link-local one, with the prefix of their
    /// directly attached network (e.g. `fd00::2/64`); an interface holds
    /// [`MAX_ADDRESSES`](crate::ipv6::addr::MAX_ADDRESSES) in all, and the
    /// ones past that are left out.
    pub addresses: Vec<Ipv6Cidr>,
    /// Hop limit of packets we originate (neighbour discovery uses 255,
    /// MLD 1, whatever this says).
    pub hop_limit: u8,
    /// Neighbour solicitations sent for duplicate address detection before
    /// a tentative address is taken (DupAddrDetectTransmits, RFC 4862); 0
    /// takes addresses at once.
    pub dad_transmits: u32,
    /// Longest random delay before the first solicitation of duplicate
    /// address detection (MAX_RTR_SOLICITATION_DELAY, RFC 4862 5.4.2);
    /// the delay is drawn from the interface's seed.
    pub dad_max_delay: Duration,
    /// The neighbour cache.
    pub ndp: NdpConfig,
    /// Reassembly limits; partial datagrams wait 60 s (RFC 8200 4.5).
    pub reassembly: ReassemblyConfig,
    /// Where packets for other networks go, before any router learned
    /// from advertisements (the IPv6 side of
    /// [`InterfaceConfig::gateway`]); resolved through the neighbour
    /// cache, so on the link.
    pub gateway: Option<Ipv6Addr>,
    /// Router advertisements are taken (default routers, on-link
    /// prefixes, the link MTU and addresses formed from their prefixes);
    /// without it they are counted and ignored.
    pub accept_router_adverts: bool,
    /// Redirects (RFC 4861 8) that pass 8.1's checks change the first hop
    /// of their destination; without it they are counted and ignored.
    pub accept_redirects: bool,
    /// How long a redirect's first hop holds after the redirect came
    /// ([`REDIRECT_LIFETIME`](crate::ipv6::redirect::REDIRECT_LIFETIME):
    /// ten minutes); it goes sooner when the default router list drops
    /// its next hop or neighbour discovery finds it unreachable.
    pub redirect_lifetime: Duration,
    /// How many times an MLDv2 report of a group joined or left goes
    /// (the Robustness Variable, RFC 3810 9.1: 2); 1 sends each once.
    pub mld_robustness: u8,
    /// Longest random interval between a report and its retransmission
    /// (the Unsolicited Report Interval, RFC 3810 9.11: 1 s); drawn from
    /// the interface's seed.
    pub mld_unsolicited_report_interval: Duration,
    /// How the interface identifiers of the link-local address and of
    /// addresses formed from routers' prefixes are made: stable and
    /// opaque (RFC 7217, keyed by [`Secrets::stable_iid`]; a duplicate is
    /// retried with the next DAD counter) by default, or
    /// [`InterfaceIds::Eui64`], the modified EUI-64 of the MAC, the same
    /// in every prefix. Configured addresses are taken as they are.
    pub interface_ids: InterfaceIds,
    /// Router solicitations sent at start-up (MAX_RTR_SOLICITATIONS,
    /// RFC 4861 10: 3); 0 sends none.
    pub router_solicitations: u32,
    /// Time between them (RTR_SOLICITATION_INTERVAL: 4 s).
    pub router_solicitation_interval: Duration,
    /// Longest random delay before the first (MAX_RTR_SOLICITATION_DELAY:
    /// 1 s); the delay is drawn from the interface's seed.
    pub router_solicitation_max_delay: Duration,
}

impl Default for Ipv6Config {
    fn default() -> Self {
        Ipv6Config {
            addresses: Vec::new(),
            hop_limit: 64,
            dad_transmits: 1,
            dad_max_delay: Duration::from_secs(1),
            ndp: NdpConfig::default(),
            reassembly: ReassemblyConfig { timeout: Duration::from_secs(60), ..ReassemblyConfig::default() },
            gateway: None,
            accept_router_adverts: true,
            accept_redirects: true,
            redirect_lifetime: crate::ipv6::redirect::REDIRECT_LIFETIME,
            mld_robustness: crate::ipv6::mld::MLD_ROBUSTNESS,
            mld_unsolicited_report_interval: crate::ipv6::mld::MLD_UNSOLICITED_REPORT_INTERVAL,
            interface_ids: InterfaceIds::StableOpaque,
            router_solicitations: 3,
            router_solicitation_interval: Duration::from_secs(4),
            router_solicitation_max_delay: Duration::from_secs(1),
        }
    }
}

/// Everything an [`Interface`](crate::iface::Interface) needs to start,
/// besides what its device says of itself
/// ([`Capabilities`](crate::Capabilities)).
#[derive(Debug, Clone)]
pub struct InterfaceConfig {
    /// The interface's Ethernet address.
    pub mac: EthernetAddress,
    /// Addresses with the prefix of their directly attached network;
    /// empty, the interface speaks no IPv4 on its link: ARP and IPv4
    /// frames are dropped as an unknown EtherType and nothing IPv4 is sent
    /// (the loopback network 127.0.0.0/8 still works).
    pub addresses: Vec<Ipv4Cidr>,
    /// Where packets for other networks go when no route matches.
    pub gateway: Option<Ipv4Addr>,
    /// More specific routes, tried before the gateway (longest prefix wins).
    pub routes: Vec<Route>,
    /// TTL of packets we originate.
    pub ttl: u8,
    /// ARP limits.
    pub arp: ArpConfig,
    /// IPv4 reassembly limits (IPv6's are in `ipv6`).
    pub reassembly: ReassemblyConfig,
    /// IPv6, if the interface speaks it: without it, IPv6 frames are
    /// dropped as an unknown EtherType and nothing IPv6 is sent.
    pub ipv6: Option<Ipv6Config>,
    /// ICMP error messages allowed per second on average.
    pub icmp_error_rate: u32,
    /// ICMP error messages allowed in a burst.
    pub icmp_error_burst: u32,
    /// Datagrams a UDP socket may hold unread.
    pub udp_rx_queue_packets: usize,
    /// Bytes a UDP socket may hold unread.
    pub udp_rx_queue_bytes: usize,
    /// Frames waiting for the device before new ones are dropped.
    pub tx_queue_limit: usize,
    /// How long a path MTU lowered by "fragmentation needed" or "packet
    /// too big" holds after its last decrease before the link MTU is tried
    /// again ([`PMTU_EXPIRY`](crate::pmtu::PMTU_EXPIRY), ten minutes, as
    /// RFC 8201 4 recommends; RFC 1191 6.3 and RFC 8201 forbid less than
    /// five).
    pub pmtu_expiry: Duration,
    /// Seeds the choice of IP identifications and ephemeral ports.
    pub seed: u64,
    /// The keys of the engine's keyed hashes.
    pub secrets: Secrets,
}

/// The keys an engine must keep from the network: one for RFC 6528 initial
/// sequence numbers and SYN cookies, one for the hash of the connection
/// table, one for RFC 7217 interface identifiers and one for RFC 7739
/// IPv6 fragment identifications, each independent, so that none can be
/// learned through another.
///
/// The engine takes them as input, being without a random source of its
/// own: a host on a real network gives it keys from the operating system's
/// random source (`nagare_host::secrets` on Linux); simulations and tests
/// derive them from a seed ([`Secrets::from_seed`]) so that a run repeats.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Secrets {
    /// Keys initial sequence numbers and SYN cookies.
    pub isn: SipKey,
    /// Keys the hash of the connection table.
    pub table: SipKey,
    /// The secret_key of RFC 7217's stable opaque interface identifiers:
    /// a host's addresses in a prefix stay the same as long as it does.
    pub stable_iid: SipKey,
    /// Keys the per-destination part of IPv6 fragment identifications
    /// (RFC 7739).
    pub frag_ident: SipKey,
}

impl Secrets {
    /// Keys derived from `seed`, the same for the same seed: for simulation
    /// and tests only, since whoever knows or guesses the seed knows them.
    pub fn from_seed(seed: u64) -> Secrets {
        Secrets {
            isn: SipKey::from_seed(seed ^ 0x7463_7073_6563_7265),
            table: SipKey::from_seed(seed ^ 0x0064_656d_7578),
            stable_iid: SipKey::from_seed(seed ^ 0x7374_6162_6c65),
            frag_ident: SipKey::from_seed(seed ^ 0x6672_6167_6964),
        }
    }
}

/// Shows that keys are there, never the keys.
impl core::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Secrets { .. }")
    }
}

/// The seed of [`InterfaceConfig::new`].
const DEFAULT_SEED: u64 = 0x6e61_6761_7265;

impl InterfaceConfig {
    /// A configuration with one address and default limits. Its seed and
    /// secrets are fixed, as simulations and tests want them; a host on a
    /// real network replaces both with values from the operating system's
    /// random source (`nagare_host::secrets::randomize`).
    pub fn new(mac: EthernetAddress, address: Ipv4Cidr) -> Self {
        Self::with_addresses(mac, alloc::vec![address], None)
    }

    /// A configuration that speaks IPv6 as `ipv6` says and no IPv4 on its
    /// link (no IPv4 address), with the defaults of [`InterfaceConfig::new`].
    pub fn ipv6_only(mac: EthernetAddress, ipv6: Ipv6Config) -> Self {
        Self::with_addresses(mac, Vec::new(), Some(ipv6))
    }

    fn with_addresses(mac: EthernetAddress, addresses: Vec<Ipv4Cidr>, ipv6: Option<Ipv6Config>) -> Self {
        InterfaceConfig {
            mac,
            addresses,
            gateway: None,
            routes: Vec::new(),
            ttl: 64,
            arp: ArpConfig::default(),
            reassembly: ReassemblyConfig::default(),
            ipv6,
            icmp_error_rate: 100,
            icmp_error_burst: 50,
            udp_rx_queue_packets: 1024,
            udp_rx_queue_bytes: 4 << 20,
            tx_queue_limit: 4096,
            pmtu_expiry: crate::pmtu::PMTU_EXPIRY,
            seed: DEFAULT_SEED,
            secrets: Secrets::from_seed(DEFAULT_SEED),
        }
    }
}
