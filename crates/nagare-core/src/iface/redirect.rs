//! ICMPv6 redirects on the interface (RFC 4861 8): a router that is our
//! first hop for a destination tells us of a better one on the link, or
//! that the destination itself is on it. The wire crate's parse has
//! checked most of 8.1 (a link-local source, code 0, at least 40 bytes,
//! a destination that is not multicast, a target that is link-local or
//! the destination, options that parse); `ndp.rs` checks the hop limit;
//! here the source must be the destination's current first hop, and
//! neither target nor destination one of our addresses. A
//! redirect that passes changes the destination's next hop
//! (`crate::ipv6::redirect`, bounded) and enters its target link-layer
//! address option in the neighbour cache (8.3). The change lasts
//! `Ipv6Config::redirect_lifetime`, less if its next hop leaves the
//! default router list or fails neighbour discovery.
//!
//! IPv4 ICMP redirects are not taken (they fall under unknown ICMP
//! types): Linux hosts accept them by default, but many deployments turn
//! that off, and a host on a network that needs them is better
//! configured with its routes.

use super::Interface;
use crate::time::Instant;
use core::net::Ipv6Addr;
use nagare_wire::{EtherType, NdpOption, NdpOptionsIter};

impl Interface {
    /// A redirect from `src` (link-local, hop limit 255 and the wire's
    /// checks passed) saying packets to `dest` go to `target`; `options`
    /// each parse.
    pub(super) fn receive_redirect(
        &mut self,
        src: Ipv6Addr,
        target: Ipv6Addr,
        dest: Ipv6Addr,
        options: &[u8],
        now: Instant,
    ) {
        if !self.config.ipv6.as_ref().is_some_and(|c| c.accept_redirects) {
            self.counters.ndp_redirects_ignored += 1;
            return;
        }
        let Some(v6) = self.v6.as_mut() else { return };
        if v6.addrs.get(target).is_some() || v6.addrs.get(dest).is_some() {
            // Our own address is nobody's better first hop, and packets
            // to it never leave us.
            self.counters.drop_ndp_malformed += 1;
            self.counters.drop_ndp_redirect_invalid += 1;
            return;
        }
        if v6.next_hop(dest) != Some(src) {
            // RFC 4861 8.1: only the router we would send through may
            // send us elsewhere.
            self.counters.drop_ndp_redirect_not_first_hop += 1;
            self.counters.drop_ndp_redirect_invalid += 1;
            return;
        }
        self.counters.ndp_redirects_received += 1;
        if v6.redirects.redirected(dest, target, now) {
            self.counters.ndp_redirects_evicted += 1;
        }
        let lladdr = NdpOptionsIter::new(options).flatten().find_map(|o| match o {
            NdpOption::TargetLinkLayerAddr(mac) => Some(mac),
            _ => None,
        });
        if let Some(mac) = lladdr {
            // RFC 4861 8.3: entered as a solicitation's source would be,
            // STALE when new or changed.
            for packet in v6.neighbors.solicited_by(target, mac, now) {
                self.emit_ethernet(packet, mac, EtherType::Ipv6);
            }
        }
    }

    /// Sends the destinations redirected to `gone` (a default router that
    /// left the list, a neighbour that stopped answering) back to the
    /// router lists (RFC 4861 6.3.5, 7.3.3).
    pub(super) fn forget_redirects_through(&mut self, gone: Ipv6Addr) {
        let Some(v6) = self.v6.as_mut() else { return };
        self.counters.ndp_redirects_next_hop_gone += v6.redirects.forget_next_hop(gone) as u64;
    }

    /// Sends the destinations whose redirect's lifetime ended by `now`
    /// back to the router lists.
    pub(super) fn expire_redirects(&mut self, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        self.counters.ndp_redirects_expired += v6.redirects.expire(now) as u64;
    }

    /// Destinations whose first hop a redirect changed.
    pub fn ipv6_redirects_len(&self) -> usize {
        self.v6.as_ref().map_or(0, |v6| v6.redirects.len())
    }
}
