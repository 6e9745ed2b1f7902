//! The IPv6 addresses of an interface (RFC 4291, RFC 4862): a link-local
//! address it makes itself, configured ones, and the duplicate address
//! detection each goes through before it is used.
//!
//! An address starts tentative: it is not a source, and only neighbour
//! discovery about it is accepted. [`Ipv6Addresses::poll`] says when to
//! report the solicited-node groups joined (MLDv2) and when to send each
//! solicitation from `::`; after the last one and a retransmission time
//! with no answer the address is preferred. An advertisement for it, or
//! another node's solicitation from `::` for it, marks it duplicate: it is
//! never used.
//!
//! An address the interface makes itself (its link-local address, those
//! formed from routers' prefixes) takes its interface identifier from the
//! table's [`IidGenerator`]; when such an address with a stable opaque
//! identifier is found duplicate, [`Ipv6Addresses::retry_duplicate`] puts
//! the next one (RFC 7217 section 6) in its place, tentative again.
//!
//! An address formed from a router's prefix (`crate::ipv6::slaac`) has
//! lifetimes: past its preferred lifetime it is deprecated (still ours,
//! chosen as a source only when nothing else fits), past its valid
//! lifetime it is removed. Configured and link-local addresses last
//! forever.

use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv6Addr;
use core::str::FromStr;
use core::time::Duration;
use nagare_wire::{is_link_local, solicited_node, EthernetAddress};

use super::iid::IidGenerator;
use crate::time::Instant;

/// An IPv6 address with the length of its on-link prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Cidr {
    address: Ipv6Addr,
    prefix_len: u8,
}

impl Ipv6Cidr {
    /// `address/prefix_len`; `None` for a prefix longer than 128.
    pub const fn new(address: Ipv6Addr, prefix_len: u8) -> Option<Self> {
        if prefix_len > 128 {
            return None;
        }
        Some(Ipv6Cidr { address, prefix_len })
    }

    /// The address.
    pub const fn address(&self) -> Ipv6Addr {
        self.address
    }

    /// Leading bits that name the network.
    pub const fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Whether `ip` is on this network.
    pub fn contains(&self, ip: Ipv6Addr) -> bool {
        let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix_len)).unwrap_or(0);
        u128::from(self.address) & mask == u128::from(ip) & mask
    }
}

/// Why an `address/prefix` string did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6CidrParseError;

impl fmt::Display for Ipv6CidrParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("expected an IPv6 address and prefix length, as fd00::2/64")
    }
}

impl FromStr for Ipv6Cidr {
    type Err = Ipv6CidrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, len) = s.split_once('/').ok_or(Ipv6CidrParseError)?;
        let address = addr.parse().map_err(|_| Ipv6CidrParseError)?;
        let prefix_len = len.parse().map_err(|_| Ipv6CidrParseError)?;
        Ipv6Cidr::new(address, prefix_len).ok_or(Ipv6CidrParseError)
    }
}

impl fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

/// The link-local address of an Ethernet interface by its MAC: fe80::/64
/// with the modified EUI-64 interface identifier of `mac`
/// ([`super::iid::eui64`]).
pub fn link_local_from_mac(mac: EthernetAddress) -> Ipv6Addr {
    Ipv6Addr::from(LINK_LOCAL_PREFIX | u128::from(super::iid::eui64(mac)))
}

/// fe80::/64, the prefix of link-local addresses.
const LINK_LOCAL_PREFIX: u128 = 0xfe80 << 112;

/// The prefix the interface makes its link-local address in.
pub const LINK_LOCAL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0);

/// Where an address stands in duplicate address detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrState {
    /// Being checked: not yet ours to use.
    Tentative,
    /// Checked: ours.
    Preferred,
    /// Another node on the link has it: never used.
    Duplicate,
}

/// The scope of an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrScope {
    /// fe80::/10: this link only.
    LinkLocal,
    /// Anything wider (unique local, global).
    Global,
}

/// Progress of duplicate address detection for one tentative address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dad {
    /// Waiting for the first poll, which joins the group (and is all there
    /// is to do when no solicitation checks addresses).
    NotStarted,
    /// The group is joined; the first solicitation goes at `at`.
    Delaying { at: Instant },
    /// `sent` solicitations went; the next step is at `at`.
    Probing { sent: u32, at: Instant },
    /// No more to do.
    Done,
}

/// How long an address formed from a router's prefix lasts (RFC 4862
/// 5.5.3); `None` for forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// When it stops being preferred (deprecated).
    pub preferred_until: Option<Instant>,
    /// When it is removed.
    pub valid_until: Option<Instant>,
}

/// One address of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Address {
    /// The address and its prefix: the on-link network of a configured
    /// address; for one formed from a router's prefix, that prefix, which
    /// says nothing of what is on the link (the router's prefix list does).
    pub cidr: Ipv6Cidr,
    /// Its duplicate address detection state.
    pub state: AddrState,
    dad: Dad,
    /// `Some` for an address formed from a router's prefix.
    lifetimes: Option<Lifetimes>,
    /// Its preferred lifetime has run out.
    deprecated: bool,
    /// `Some` for an address the interface made itself: the DAD counter
    /// its interface identifier was made with.
    dad_counter: Option<u8>,
}

impl Ipv6Address {
    /// The address.
    pub fn address(&self) -> Ipv6Addr {
        self.cidr.address()
    }

    /// Whether it was formed from a router's prefix (and has lifetimes).
    pub fn is_autoconfigured(&self) -> bool {
        self.lifetimes.is_some()
    }

    /// Its lifetimes, if it was formed from a router's prefix.
    pub fn lifetimes(&self) -> Option<Lifetimes> {
        self.lifetimes
    }

    /// Whether its preferred lifetime ran out: still ours, but a source
    /// for new traffic only when no other address fits.
    pub fn is_deprecated(&self) -> bool {
        self.deprecated
    }

    /// For an address the interface made itself (not configured), the
    /// DAD counter of its interface identifier: 0, or the retries after
    /// duplicates.
    pub fn dad_counter(&self) -> Option<u8> {
        self.dad_counter
    }

    /// Its scope.
    pub fn scope(&self) -> AddrScope {
        if is_link_local(&self.cidr.address()) {
            AddrScope::LinkLocal
        } else {
            AddrScope::Global
        }
    }
}

/// What [`Ipv6Addresses::poll`] asks the interface to send.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DadWork {
    /// Report the solicited-node groups of the addresses (MLDv2).
    pub report_groups: bool,
    /// Send a duplicate address detection solicitation for each.
    pub solicit: Vec<Ipv6Addr>,
    /// Addresses that became preferred.
    pub preferred: Vec<Ipv6Addr>,
    /// Addresses whose preferred lifetime ran out.
    pub deprecated: Vec<Ipv6Addr>,
    /// Addresses whose valid lifetime ran out, removed.
    pub removed: Vec<Ipv6Addr>,
}

/// What [`Ipv6Addresses::retry_duplicate`] did with a duplicate address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Not one the interface made, or not made to be retried (EUI-64):
    /// it stays duplicate.
    NotRetried,
    /// Replaced by this address, with the next DAD counter, tentative.
    Replaced(Ipv6Addr),
    /// Every retry was spent: it stays duplicate, never used.
    Exhausted,
}

/// The addresses of an interface and their detection timers.
#[derive(Debug, Clone)]
pub struct Ipv6Addresses {
    addrs: Vec<Ipv6Address>,
    transmits: u32,
    retrans: Duration,
    max_delay: Duration,
    /// State of the generator the initial delays are drawn from.
    random: u64,
    /// Makes the interface identifiers of the addresses it makes.
    ids: IidGenerator,
}

/// Most addresses an interface holds.
pub const MAX_ADDRESSES: usize = 32;

/// Most addresses formed from routers' prefixes, within [`MAX_ADDRESSES`].
pub const MAX_AUTOCONFIGURED: usize = 16;

impl Ipv6Addresses {
    /// No addresses yet; `transmits` solicitations `retrans` apart check
    /// each, the first after a delay up to `max_delay` drawn from `seed`;
    /// `ids` makes those the interface makes itself.
    pub fn new(transmits: u32, retrans: Duration, max_delay: Duration, seed: u64, ids: IidGenerator) -> Self {
        Ipv6Addresses { addrs: Vec::new(), transmits, retrans, max_delay, random: seed, ids }
    }

    /// What makes the interface identifiers of the addresses made here.
    pub fn ids(&self) -> &IidGenerator {
        &self.ids
    }

    /// Makes an address in the 64-bit `prefix` and adds it as
    /// [`add`](Self::add) does (with `lifetimes`, as
    /// [`add_autoconfigured`](Self::add_autoconfigured) does, when it is
    /// formed from a router's prefix). Returns it, or `None` when it is
    /// there already or the table is full.
    pub fn add_generated(&mut self, prefix: Ipv6Addr, lifetimes: Option<Lifetimes>) -> Option<Ipv6Addr> {
        let (ip, counter) = self.ids.generate(prefix, 0)?;
        let cidr = Ipv6Cidr::new(ip, 64)?;
        let added = match lifetimes {
            Some(lifetimes) => self.add_autoconfigured(cidr, lifetimes),
            None => self.add(cidr),
        };
        let entry = self.addrs.last_mut().filter(|a| added && a.address() == ip)?;
        entry.dad_counter = Some(counter);
        Some(ip)
    }

    /// The address formed from the router's 64-bit `prefix`, if there is
    /// one (whatever its DAD counter).
    pub fn autoconfigured_in(&self, prefix: Ipv6Addr) -> Option<&Ipv6Address> {
        let net = |ip: Ipv6Addr| u128::from(ip) >> 64;
        self.addrs.iter().find(|a| a.is_autoconfigured() && net(a.address()) == net(prefix))
    }

    /// After `ip` was marked duplicate: if the interface made it with a
    /// stable opaque identifier, the address of the next DAD counter takes
    /// its place (its lifetimes kept), tentative and checked from the
    /// start, as long as [`IDGEN_RETRIES`](super::iid::IDGEN_RETRIES)
    /// allows.
    pub fn retry_duplicate(&mut self, ip: Ipv6Addr) -> Retry {
        let Some(i) = self.addrs.iter().position(|a| a.address() == ip && a.state == AddrState::Duplicate) else {
            return Retry::NotRetried;
        };
        let Some((counter, prefix_len)) = self.addrs.get(i).and_then(|a| Some((a.dad_counter?, a.cidr.prefix_len())))
        else {
            return Retry::NotRetried;
        };
        if self.ids.scheme() != super::iid::InterfaceIds::StableOpaque {
            return Retry::NotRetried;
        }
        let next = self
            .ids
            .generate(ip, counter.saturating_add(1))
            .filter(|(next, _)| self.get(*next).is_none())
            .and_then(|(next, c)| Some((Ipv6Cidr::new(next, prefix_len)?, c)));
        let (Some((cidr, counter)), Some(a)) = (next, self.addrs.get_mut(i)) else {
            return Retry::Exhausted;
        };
        a.cidr = cidr;
        a.dad_counter = Some(counter);
        a.state = if self.transmits == 0 { AddrState::Preferred } else { AddrState::Tentative };
        a.dad = Dad::NotStarted;
        Retry::Replaced(cidr.address())
    }

    /// Adds `cidr` as a tentative address (preferred at once if no
    /// solicitation is to check it). Returns false if it is already there
    /// or the table is full.
    pub fn add(&mut self, cidr: Ipv6Cidr) -> bool {
        self.insert(cidr, None)
    }

    /// Adds `cidr`, formed from a router's prefix, with `lifetimes`, as
    /// [`add`](Self::add) does; false also when [`MAX_AUTOCONFIGURED`]
    /// such addresses are there.
    pub fn add_autoconfigured(&mut self, cidr: Ipv6Cidr, lifetimes: Lifetimes) -> bool {
        if self.addrs.iter().filter(|a| a.is_autoconfigured()).count() >= MAX_AUTOCONFIGURED {
            return false;
        }
        self.insert(cidr, Some(lifetimes))
    }

    fn insert(&mut self, cidr: Ipv6Cidr, lifetimes: Option<Lifetimes>) -> bool {
        if self.addrs.len() >= MAX_ADDRESSES || self.get(cidr.address()).is_some() {
            return false;
        }
        let state = if self.transmits == 0 { AddrState::Preferred } else { AddrState::Tentative };
        self.addrs.push(Ipv6Address {
            cidr,
            state,
            dad: Dad::NotStarted,
            lifetimes,
            deprecated: false,
            dad_counter: None,
        });
        true
    }

    /// Removes `ip`; false if it is not one of ours.
    pub fn remove(&mut self, ip: Ipv6Addr) -> bool {
        let before = self.addrs.len();
        self.addrs.retain(|a| a.address() != ip);
        self.addrs.len() != before
    }

    /// Gives the autoconfigured address `ip` new lifetimes (preferred
    /// again if its preferred lifetime is extended); false if `ip` is not
    /// one.
    pub fn set_lifetimes(&mut self, ip: Ipv6Addr, lifetimes: Lifetimes, now: Instant) -> bool {
        match self.addrs.iter_mut().find(|a| a.address() == ip && a.is_autoconfigured()) {
            Some(a) => {
                a.lifetimes = Some(lifetimes);
                a.deprecated = lifetimes.preferred_until.is_some_and(|t| now >= t);
                true
            }
            None => false,
        }
    }

    /// Every address, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Ipv6Address> + '_ {
        self.addrs.iter()
    }

    /// The entry of `ip`, if it is one of ours (whatever its state).
    pub fn get(&self, ip: Ipv6Addr) -> Option<&Ipv6Address> {
        self.addrs.iter().find(|a| a.address() == ip)
    }

    /// The state of `ip`, if it is one of ours.
    pub fn state(&self, ip: Ipv6Addr) -> Option<AddrState> {
        self.get(ip).map(|a| a.state)
    }

    /// Whether `ip` is one of our preferred addresses.
    pub fn is_preferred(&self, ip: Ipv6Addr) -> bool {
        self.state(ip) == Some(AddrState::Preferred)
    }

    /// Whether `group` is the solicited-node group of one of our addresses
    /// that is not duplicate (joined from the moment an address is added).
    pub fn is_joined_solicited(&self, group: Ipv6Addr) -> bool {
        self.addrs.iter().any(|a| a.state != AddrState::Duplicate && solicited_node(&a.address()) == group)
    }

    /// The solicited-node groups of our addresses, each once.
    pub fn solicited_groups(&self) -> Vec<Ipv6Addr> {
        let mut groups: Vec<Ipv6Addr> = Vec::new();
        for a in self.addrs.iter().filter(|a| a.state != AddrState::Duplicate) {
            let g = solicited_node(&a.address());
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        groups
    }

    /// The source for a packet to `dst` (RFC 6724 section 5, rules 1, 2,
    /// 3 and 8): among addresses past duplicate address detection, `dst`
    /// itself; then the smallest scope that reaches `dst` (the largest
    /// when none does); then one not deprecated; then the longest prefix
    /// in common with `dst` (over the first 64 bits); then the first added.
    pub fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let dst_scope = scope_of(dst);
        let rank = |a: &Ipv6Address| {
            let scope = scope_of(a.address());
            let fits = if scope >= dst_scope { (1, u8::MAX - scope) } else { (0, scope) };
            (a.address() == dst, fits, !a.deprecated, common_prefix_len(a.address(), dst).min(64))
        };
        let mut best: Option<&Ipv6Address> = None;
        for a in self.addrs.iter().filter(|a| a.state == AddrState::Preferred) {
            if best.is_none_or(|b| rank(a) > rank(b)) {
                best = Some(a);
            }
        }
        best.map(|a| a.address())
    }

    /// Whether `dst` is on the link by our addresses: link-local, or on
    /// the network of one of our configured addresses (an autoconfigured
    /// one's prefix is on the link only if a router says so).
    pub fn is_on_link(&self, dst: Ipv6Addr) -> bool {
        is_link_local(&dst)
            || self
                .addrs
                .iter()
                .any(|a| a.state != AddrState::Duplicate && !a.is_autoconfigured() && a.cidr.contains(dst))
    }

    /// Marks `ip` duplicate if it is still tentative; returns whether it
    /// was.
    pub fn mark_duplicate(&mut self, ip: Ipv6Addr) -> bool {
        match self.addrs.iter_mut().find(|a| a.address() == ip && a.state == AddrState::Tentative) {
            Some(a) => {
                a.state = AddrState::Duplicate;
                a.dad = Dad::Done;
                true
            }
            None => false,
        }
    }

    /// Runs the detection timers.
    pub fn poll(&mut self, now: Instant) -> DadWork {
        let mut work = DadWork::default();
        for i in 0..self.addrs.len() {
            let Some(dad) = self.addrs.get(i).map(|a| a.dad) else { break };
            let next = match dad {
                Dad::NotStarted => {
                    work.report_groups = true;
                    if self.transmits == 0 {
                        Dad::Done
                    } else {
                        Dad::Delaying { at: now + self.draw_delay() }
                    }
                }
                Dad::Delaying { at } if now >= at => {
                    work.solicit.extend(self.addrs.get(i).map(|a| a.address()));
                    Dad::Probing { sent: 1, at: now + self.retrans }
                }
                Dad::Probing { sent, at } if now >= at && sent < self.transmits => {
                    work.solicit.extend(self.addrs.get(i).map(|a| a.address()));
                    Dad::Probing { sent: sent + 1, at: now + self.retrans }
                }
                Dad::Probing { at, .. } if now >= at => {
                    if let Some(a) = self.addrs.get_mut(i) {
                        a.state = AddrState::Preferred;
                        work.preferred.push(a.address());
                    }
                    Dad::Done
                }
                other => other,
            };
            if let Some(a) = self.addrs.get_mut(i) {
                a.dad = next;
            }
        }
        self.addrs.retain(|a| {
            let Some(lifetimes) = a.lifetimes else { return true };
            if lifetimes.valid_until.is_some_and(|t| now >= t) {
                work.removed.push(a.address());
                return false;
            }
            true
        });
        for a in self.addrs.iter_mut() {
            let ends = a.lifetimes.and_then(|l| l.preferred_until);
            if !a.deprecated && ends.is_some_and(|t| now >= t) {
                a.deprecated = true;
                work.deprecated.push(a.address());
            }
        }
        work
    }

    /// When [`poll`](Self::poll) next has work: a detection step, or a
    /// lifetime running out.
    pub fn poll_at(&self) -> Option<Instant> {
        self.addrs
            .iter()
            .flat_map(|a| {
                let dad = match a.dad {
                    Dad::NotStarted => Some(Instant::ZERO),
                    Dad::Delaying { at } | Dad::Probing { at, .. } => Some(at),
                    Dad::Done => None,
                };
                let preferred = a.lifetimes.and_then(|l| l.preferred_until).filter(|_| !a.deprecated);
                let valid = a.lifetimes.and_then(|l| l.valid_until);
                [dad, preferred, valid]
            })
            .flatten()
            .min()
    }

    /// A delay in `[0, max_delay]`, from a splitmix64 generator over the
    /// seed.
    fn draw_delay(&mut self) -> Duration {
        self.random = self.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let span = u64::try_from(self.max_delay.as_micros()).unwrap_or(u64::MAX).saturating_add(1);
        Duration::from_micros(z % span)
    }
}

/// The scope of an address as RFC 6724 section 3.1 orders them: a
/// multicast address's own scope field; 2 for link-local unicast (and the
/// unspecified address), 14 (global) for the rest, unique local included.
fn scope_of(ip: Ipv6Addr) -> u8 {
    if ip.is_multicast() {
        ip.octets()[1] & 0x0f
    } else if is_link_local(&ip) || ip.is_unspecified() || ip.is_loopback() {
        2
    } else {
        14
    }
}

/// Leading bits `a` and `b` have in common.
fn common_prefix_len(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (u128::from(a) ^ u128::from(b)).leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::SipKey;
    use crate::ipv6::iid::{InterfaceIds, IDGEN_RETRIES};

    fn cidr(s: &str) -> Ipv6Cidr {
        s.parse().unwrap()
    }

    const MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x20, 0x30]);

    fn eui64_ids() -> IidGenerator {
        IidGenerator::new(InterfaceIds::Eui64, SipKey::from_seed(1), MAC)
    }

    fn stable_ids() -> IidGenerator {
        IidGenerator::new(InterfaceIds::StableOpaque, SipKey::from_seed(1), MAC)
    }

    #[test]
    fn link_local_is_modified_eui64() {
        // RFC 4291 appendix A's rule on a locally administered MAC: the
        // universal/local bit flips from 1 to 0.
        let mac = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x20, 0x30]);
        assert_eq!(link_local_from_mac(mac), "fe80::5eff:fe10:2030".parse::<Ipv6Addr>().unwrap());
        let mac = EthernetAddress([0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e]);
        assert_eq!(link_local_from_mac(mac), "fe80::21b:21ff:fe3c:4d5e".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn cidr_parses_contains_and_refuses_nonsense() {
        let c = cidr("fd00::2/64");
        assert_eq!(c.prefix_len(), 64);
        assert!(c.contains("fd00::99".parse().unwrap()));
        assert!(!c.contains("fd00:0:0:1::2".parse().unwrap()));
        assert!(cidr("::/0").contains("2001:db8::1".parse().unwrap()));
        assert!("fd00::2/129".parse::<Ipv6Cidr>().is_err());
        assert!("fd00::2".parse::<Ipv6Cidr>().is_err());
        assert!("10.0.0.1/24".parse::<Ipv6Cidr>().is_err());
        assert_eq!(alloc::format!("{c}"), "fd00::2/64");
    }

    #[test]
    fn detection_joins_delays_solicits_then_prefers() {
        let mut t = Ipv6Addresses::new(1, Duration::from_secs(1), Duration::from_secs(1), 7, eui64_ids());
        let ip = cidr("fd00::2/64");
        assert!(t.add(ip));
        assert!(!t.add(ip), "once");
        assert_eq!(t.state(ip.address()), Some(AddrState::Tentative));
        assert!(t.is_joined_solicited(solicited_node(&ip.address())));
        assert_eq!(t.source_for("fd00::1".parse().unwrap()), None, "a tentative address is no source");
        let t0 = Instant::from_secs(10);
        assert_eq!(t.poll_at(), Some(Instant::ZERO));
        let w = t.poll(t0);
        assert!(w.report_groups && w.solicit.is_empty());
        let first = t.poll_at().unwrap();
        assert!(first >= t0 && first <= t0 + Duration::from_secs(1), "{first:?}");
        assert_eq!(t.poll(first).solicit, [ip.address()]);
        assert_eq!(t.poll_at(), Some(first + Duration::from_secs(1)));
        assert!(t.poll(first + Duration::from_millis(999)).preferred.is_empty());
        assert_eq!(t.poll(first + Duration::from_secs(1)).preferred, [ip.address()]);
        assert!(t.is_preferred(ip.address()));
        assert_eq!(t.poll_at(), None);
        assert_eq!(t.source_for("fd00::1".parse().unwrap()), Some(ip.address()));
    }

    #[test]
    fn a_duplicate_is_never_preferred_nor_a_source() {
        let mut t = Ipv6Addresses::new(2, Duration::from_secs(1), Duration::ZERO, 0, eui64_ids());
        let ip = cidr("fd00::2/64");
        t.add(ip);
        let t0 = Instant::from_secs(1);
        t.poll(t0);
        assert_eq!(t.poll(t0).solicit.len(), 1, "no delay drawn from a zero maximum");
        assert!(t.mark_duplicate(ip.address()));
        assert!(!t.mark_duplicate(ip.address()), "only a tentative address turns duplicate");
        assert_eq!(t.poll(t0 + Duration::from_secs(5)), DadWork::default());
        assert_eq!(t.state(ip.address()), Some(AddrState::Duplicate));
        assert_eq!(t.source_for("fd00::1".parse().unwrap()), None);
        assert!(!t.is_joined_solicited(solicited_node(&ip.address())));
    }

    #[test]
    fn source_selection_prefers_scope_then_prefix() {
        let mut t = Ipv6Addresses::new(0, Duration::from_secs(1), Duration::ZERO, 0, eui64_ids());
        let ll = cidr("fe80::1/64");
        t.add(ll);
        assert!(t.is_preferred(ll.address()), "no detection: preferred at once");
        assert!(t.poll(Instant::ZERO).report_groups, "the groups are still reported");
        assert_eq!(t.poll_at(), None);
        t.add(cidr("fd00::2/64"));
        t.add(cidr("fd01::2/64"));
        assert_eq!(t.source_for("fe80::9".parse().unwrap()), Some(ll.address()));
        assert_eq!(t.source_for("ff02::1".parse().unwrap()), Some(ll.address()));
        assert_eq!(t.source_for("fd01::9".parse().unwrap()), Some("fd01::2".parse().unwrap()));
        assert_eq!(t.source_for("2001:db8::1".parse().unwrap()), Some("fd00::2".parse().unwrap()));
        assert!(t.is_on_link("fd01::9".parse().unwrap()) && !t.is_on_link("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn an_autoconfigured_address_runs_out_and_says_nothing_of_the_link() {
        let mut t = Ipv6Addresses::new(0, Duration::from_secs(1), Duration::ZERO, 0, eui64_ids());
        let t0 = Instant::from_secs(10);
        let ip = cidr("2001:db8::1/64");
        let secs = Duration::from_secs;
        let lifetimes = Lifetimes { preferred_until: Some(t0 + secs(5)), valid_until: Some(t0 + secs(10)) };
        assert!(t.add_autoconfigured(ip, lifetimes));
        assert!(!t.is_on_link("2001:db8::9".parse().unwrap()), "a router's prefix list says what is on the link");
        t.poll(t0);
        assert_eq!(t.poll_at(), Some(t0 + secs(5)));
        assert_eq!(t.poll(t0 + secs(5)).deprecated, [ip.address()]);
        assert!(t.get(ip.address()).is_some_and(|a| a.is_deprecated() && a.state == AddrState::Preferred));
        assert_eq!(t.source_for("2001:db8::9".parse().unwrap()), Some(ip.address()), "alone, still a source");
        assert_eq!(t.poll_at(), Some(t0 + secs(10)));
        assert_eq!(t.poll(t0 + secs(10)).removed, [ip.address()]);
        assert_eq!(t.get(ip.address()), None);
        assert_eq!(t.poll_at(), None);
        for i in 0..40u16 {
            t.add_autoconfigured(Ipv6Cidr::new(Ipv6Addr::new(0x2001, 0xdb8, i, 0, 0, 0, 0, 1), 64).unwrap(), lifetimes);
        }
        assert_eq!(t.iter().count(), MAX_AUTOCONFIGURED);
    }

    #[test]
    fn a_duplicate_made_address_is_retried_with_the_next_counter_a_bounded_number_of_times() {
        let mut t = Ipv6Addresses::new(1, Duration::from_secs(1), Duration::ZERO, 0, stable_ids());
        let prefix: Ipv6Addr = "2001:db8::".parse().unwrap();
        let lifetimes = Lifetimes { preferred_until: None, valid_until: Some(Instant::from_secs(100)) };
        let first = t.add_generated(prefix, Some(lifetimes)).unwrap();
        assert_eq!(t.ids().generate(prefix, 0), Some((first, 0)));
        assert_eq!(t.autoconfigured_in(prefix).map(|a| (a.address(), a.dad_counter())), Some((first, Some(0))));
        let configured = cidr("2001:db8::5/64");
        t.add(configured);
        t.poll(Instant::ZERO);
        let mut current = first;
        for counter in 1..=IDGEN_RETRIES {
            assert!(t.mark_duplicate(current));
            let Retry::Replaced(next) = t.retry_duplicate(current) else { panic!("retry {counter}") };
            assert_eq!(t.ids().generate(prefix, counter), Some((next, counter)));
            assert_eq!(t.get(current), None, "the duplicate is gone");
            let a = t.get(next).unwrap();
            assert_eq!(
                (a.state, a.dad_counter(), a.lifetimes()),
                (AddrState::Tentative, Some(counter), Some(lifetimes))
            );
            assert_eq!(t.autoconfigured_in(prefix).map(|a| a.address()), Some(next));
            assert!(t.poll(Instant::from_secs(1)).report_groups, "its group is reported, its check starts again");
            assert_eq!(t.poll(Instant::from_secs(1)).solicit, [next]);
            current = next;
        }
        assert!(t.mark_duplicate(current));
        assert_eq!(t.retry_duplicate(current), Retry::Exhausted);
        assert_eq!(t.state(current), Some(AddrState::Duplicate));
        // A configured address is never replaced.
        assert!(t.mark_duplicate(configured.address()));
        assert_eq!(t.retry_duplicate(configured.address()), Retry::NotRetried);
        assert_eq!(t.state(configured.address()), Some(AddrState::Duplicate));
    }

    #[test]
    fn an_eui64_address_found_duplicate_stays_so() {
        let mut t = Ipv6Addresses::new(1, Duration::from_secs(1), Duration::ZERO, 0, eui64_ids());
        let ll = t.add_generated(LINK_LOCAL, None).unwrap();
        assert_eq!(ll, link_local_from_mac(MAC));
        assert!(t.mark_duplicate(ll));
        assert_eq!(t.retry_duplicate(ll), Retry::NotRetried);
        assert_eq!(t.state(ll), Some(AddrState::Duplicate));
    }
}
