//! Router discovery on the interface (RFC 4861 6.3) and stateless
//! address autoconfiguration (RFC 4862 5.5): router advertisements taken
//! into the default router list, the prefix list, the link MTU, the
//! neighbour cache and the host's parameters, their autonomous prefixes
//! forming addresses; router solicitations sent at start-up. The lists
//! are `crate::ipv6::router`, the addresses' rules `crate::ipv6::slaac`.
//!
//! The wire crate's parse has checked what RFC 4861 6.1.2 asks of an
//! advertisement but its hop limit (`ndp.rs` checks that): a link-local
//! source, code 0, options that parse with non-zero lengths.

use super::Interface;
use crate::config::Ipv6Config;
use crate::ipv6::addr::AddrState;
use crate::ipv6::router::{DefaultRouter, OnLinkPrefix, Routers, Update};
use crate::ipv6::slaac;
use crate::time::Instant;
use core::net::Ipv6Addr;
use core::time::Duration;
use nagare_wire::{
    is_link_local, multicast_mac, EtherType, IpProtocol, Ipv6Repr, NdpOption, NdpOptionsIter, NdpPrefixInfo, NdpRepr,
    IPV6_ALL_ROUTERS, NDP_HOP_LIMIT,
};

/// The fields of a router advertisement a host uses.
#[derive(Debug, Clone, Copy)]
pub(super) struct RouterAdvert<'a> {
    /// Cur Hop Limit (0: unspecified).
    pub hop_limit: u8,
    /// Seconds the sender is a default router (0: not one).
    pub router_lifetime: u16,
    /// Milliseconds (0: unspecified).
    pub reachable_time: u32,
    /// Milliseconds (0: unspecified).
    pub retrans_timer: u32,
    /// The options, each checked to parse.
    pub options: &'a [u8],
}

/// The router lists of an interface configured with `config`, the delay
/// before its first solicitation drawn from `seed`.
pub(super) fn routers_for(config: &Ipv6Config, seed: u64) -> Routers {
    let span = u64::try_from(config.router_solicitation_max_delay.as_micros()).unwrap_or(u64::MAX).saturating_add(1);
    let mixed = (seed ^ 0x7273_6f6c).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let first_delay = Duration::from_micros((mixed >> 11) % span);
    let solicitations = if config.accept_router_adverts { config.router_solicitations } else { 0 };
    Routers::new(config.gateway, solicitations, config.router_solicitation_interval, first_delay)
}

/// How a list's update is counted: (added, removed, refused).
fn count(update: Update) -> (u64, u64, u64) {
    match update {
        Update::Added => (1, 0, 0),
        Update::Removed => (0, 1, 0),
        Update::Full => (0, 0, 1),
        Update::Refreshed | Update::Unchanged => (0, 0, 0),
    }
}

impl Interface {
    /// The MTU of IPv6 packets sent: the device's, or the lower one a
    /// router advertised.
    pub fn ipv6_mtu(&self) -> usize {
        self.v6.as_ref().map_or(self.caps.mtu, |v6| v6.routers.mtu(self.caps.mtu))
    }

    /// The default routers learned from advertisements.
    pub fn ipv6_default_routers(&self) -> &[DefaultRouter] {
        self.v6.as_ref().map_or(&[], |v6| v6.routers.routers())
    }

    /// The on-link prefixes learned from advertisements.
    pub fn ipv6_on_link_prefixes(&self) -> &[OnLinkPrefix] {
        self.v6.as_ref().map_or(&[], |v6| v6.routers.prefixes())
    }

    /// The configured default router.
    pub fn ipv6_gateway(&self) -> Option<Ipv6Addr> {
        self.v6.as_ref().and_then(|v6| v6.routers.gateway())
    }

    /// The next hop of a packet to `dst`: the one a redirect gave, else
    /// `dst` itself on the link, a default router otherwise; `None`
    /// without a route.
    pub fn ipv6_next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        self.v6.as_ref()?.next_hop(dst)
    }

    /// A router advertisement from `src` (link-local, checked), hop limit
    /// and options checked (RFC 4861 6.3.4).
    pub(super) fn receive_router_advert(&mut self, src: Ipv6Addr, ra: &RouterAdvert<'_>, now: Instant) {
        let device_mtu = self.caps.mtu;
        let Some(v6) = self.v6.as_mut() else { return };
        if !self.config.ipv6.as_ref().is_some_and(|c| c.accept_router_adverts) {
            self.counters.ndp_ra_ignored += 1;
            return;
        }
        self.counters.ndp_ra_received += 1;
        if ra.hop_limit != 0 {
            v6.hop_limit = ra.hop_limit;
        }
        if ra.reachable_time != 0 {
            v6.neighbors.set_reachable_time(Duration::from_millis(u64::from(ra.reachable_time)));
        }
        if ra.retrans_timer != 0 {
            v6.neighbors.set_retrans_timer(Duration::from_millis(u64::from(ra.retrans_timer)));
        }
        let update = v6.routers.router_advertised(src, ra.router_lifetime, now);
        let (added, removed, refused) = count(update);
        self.counters.ndp_routers_added += added;
        self.counters.ndp_routers_removed += removed;
        self.counters.ndp_router_limit += refused;
        if update == Update::Removed {
            self.forget_redirects_through(src);
        }
        for option in NdpOptionsIter::new(ra.options).flatten() {
            let Some(v6) = self.v6.as_mut() else { return };
            match option {
                NdpOption::SourceLinkLayerAddr(mac) => {
                    // Recorded as a solicitation's would be: a new entry or
                    // a changed address STALE (RFC 4861 6.3.4).
                    for packet in v6.neighbors.solicited_by(src, mac, now) {
                        self.emit_ethernet(packet, mac, EtherType::Ipv6);
                    }
                }
                NdpOption::Mtu(mtu) => {
                    if v6.routers.mtu_advertised(mtu, device_mtu) {
                        self.counters.ndp_mtu_updates += 1;
                    } else {
                        self.counters.ndp_mtu_ignored += 1;
                    }
                }
                NdpOption::PrefixInfo(info) => self.receive_prefix_info(&info, now),
                _ => {}
            }
        }
    }

    /// A Prefix Information option: its on-link part (RFC 4861 6.3.4) and
    /// its autonomous part (RFC 4862 5.5.3).
    fn receive_prefix_info(&mut self, info: &NdpPrefixInfo, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        if info.on_link {
            let expires = slaac::deadline(info.valid_lifetime, now);
            let update = v6.routers.prefix_advertised(info.prefix, info.prefix_len, expires, info.valid_lifetime);
            let (added, removed, refused) = count(update);
            self.counters.ndp_prefixes_added += added;
            self.counters.ndp_prefixes_removed += removed;
            self.counters.ndp_prefix_limit += refused;
        }
        match slaac::check(info) {
            Ok(()) => {}
            Err(slaac::Refusal::NotAutonomous) => return,
            Err(_) => {
                self.counters.slaac_prefix_ignored += 1;
                return;
            }
        }
        // The address the prefix formed, whatever DAD counter it took.
        let formed = v6.addrs.autoconfigured_in(info.prefix).and_then(|a| Some((a.address(), a.lifetimes()?)));
        // The one it would form, configured by hand: it keeps lasting
        // forever.
        let configured = v6.addrs.ids().generate(info.prefix, 0).is_some_and(|(ip, _)| v6.addrs.get(ip).is_some());
        match formed {
            Some((ip, current)) => {
                let lifetimes = slaac::updated_lifetimes(current, info, now);
                v6.addrs.set_lifetimes(ip, lifetimes, now);
            }
            None if configured || info.valid_lifetime == 0 => {}
            None => {
                if v6.addrs.add_generated(info.prefix, Some(slaac::new_lifetimes(info, now))).is_some() {
                    self.counters.slaac_addresses += 1;
                } else {
                    self.counters.slaac_address_limit += 1;
                }
            }
        }
    }

    /// Asks the routers on the link to advertise (RFC 4861 6.3.7): from
    /// our link-local address with our link-layer address once it is
    /// preferred, from `::` without one before.
    fn send_router_solicit(&mut self) {
        let Some(v6) = &self.v6 else { return };
        let src = v6
            .addrs
            .iter()
            .find(|a| a.state == AddrState::Preferred && is_link_local(&a.address()))
            .map_or(Ipv6Addr::UNSPECIFIED, |a| a.address());
        let lladdr = (!src.is_unspecified()).then_some(self.config.mac);
        let solicit = NdpRepr::RouterSolicit { lladdr };
        let Some(message) = self.ndp_message(&solicit, src, IPV6_ALL_ROUTERS) else { return };
        let Some(mac) = multicast_mac(&IPV6_ALL_ROUTERS) else { return };
        let repr = Ipv6Repr::new(src, IPV6_ALL_ROUTERS, IpProtocol::Icmpv6, message.len(), NDP_HOP_LIMIT);
        if self.emit_ipv6(repr, message, mac) {
            self.counters.ndp_rs_sent += 1;
        }
    }

    /// Runs the routers' and prefixes' lifetimes and the solicitations.
    pub(super) fn poll_routers(&mut self, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        let work = v6.routers.poll(now);
        self.counters.ndp_routers_removed += work.routers_expired.len() as u64;
        self.counters.ndp_prefixes_removed += work.prefixes_expired as u64;
        for router in work.routers_expired {
            self.forget_redirects_through(router);
        }
        if work.solicit {
            self.send_router_solicit();
        }
    }
}
