//! Multicast Listener Discovery version 2 (RFC 3810) for the
//! solicited-node groups of our IPv6 addresses: reporting the groups
//! joined, leaving a group no address of ours needs any more, and sending
//! each change's report again as the Robustness Variable asks (the
//! records owed and their timer are `crate::ipv6::mld`).

use super::{Interface, HEADROOM};
use crate::buf::PacketBuf;
use crate::ipv6::addr::AddrState;
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv6Addr;
use nagare_wire::{
    multicast_mac, solicited_node, IpProtocol, Ipv6Option, Ipv6OptionsRepr, Ipv6Repr, MldAddressRecord, MldReportRepr,
    IPV6_ALL_MLDV2_ROUTERS,
};

impl Interface {
    /// Reports the solicited-node groups of our addresses joined (RFC 3810
    /// section 5.2), and owes the report its retransmissions.
    pub(super) fn send_mld_report(&mut self) {
        let Some(v6) = &self.v6 else { return };
        let groups = v6.addrs.solicited_groups();
        self.send_mld_change(&groups, true);
    }

    /// Reports leaving `groups`, solicited-node groups no address of ours
    /// needs any more: a change to include no source (RFC 3810 6.1); the
    /// report is owed its retransmissions.
    fn send_mld_leave(&mut self, groups: &[Ipv6Addr]) {
        if groups.is_empty() {
            return;
        }
        if self.send_mld_change(groups, false) {
            self.counters.mld_groups_left += groups.len() as u64;
        }
    }

    /// Sends at once the report that `groups` were joined (or left),
    /// with the other records still owed retransmissions (RFC 3810 6.1
    /// merges a change with the pending report), and owes the change its
    /// own: it goes again as the Robustness Variable asks, once a poll
    /// has drawn when (`crate::ipv6::mld`). Returns whether it went out.
    fn send_mld_change(&mut self, groups: &[Ipv6Addr], joined: bool) -> bool {
        let Some(v6) = self.v6.as_mut() else { return false };
        for group in groups {
            if v6.mld.changed(*group, joined) {
                self.counters.mld_retransmissions_dropped += 1;
            }
        }
        let carried = v6.mld.carry_pending(groups);
        let change = |g: &Ipv6Addr| if joined { MldAddressRecord::join(*g) } else { MldAddressRecord::leave(*g) };
        let records: Vec<MldAddressRecord<'_>> = groups
            .iter()
            .map(change)
            .chain(carried.iter().map(|c| {
                if c.joined {
                    MldAddressRecord::join(c.group)
                } else {
                    MldAddressRecord::leave(c.group)
                }
            }))
            .collect();
        self.send_mld_records(&records)
    }

    /// Sends the retransmission of the MLDv2 records owed one, when due.
    pub(super) fn poll_mld(&mut self, now: Instant) {
        let Some(v6) = self.v6.as_mut() else { return };
        let changes = v6.mld.poll(now);
        if changes.is_empty() {
            return;
        }
        let records: Vec<MldAddressRecord<'_>> = changes
            .iter()
            .map(|c| if c.joined { MldAddressRecord::join(c.group) } else { MldAddressRecord::leave(c.group) })
            .collect();
        if self.send_mld_records(&records) {
            self.counters.mld_reports_retransmitted += 1;
        }
    }

    /// Sends an MLDv2 report of `records` (at most one per address): to
    /// ff02::16 with hop limit 1 behind a hop-by-hop Router Alert, from our
    /// link-local address once it is preferred and from `::` before
    /// (RFC 4862 5.4.2). Returns whether it went out.
    fn send_mld_records(&mut self, records: &[MldAddressRecord<'_>]) -> bool {
        let Some(v6) = &self.v6 else { return false };
        let src = v6
            .addrs
            .iter()
            .find(|a| a.state == AddrState::Preferred && nagare_wire::is_link_local(&a.address()))
            .map_or(Ipv6Addr::UNSPECIFIED, |a| a.address());
        let hop_by_hop = Ipv6OptionsRepr { next_header: IpProtocol::Icmpv6, options: &[Ipv6Option::RouterAlert(0)] };
        let ext_len = hop_by_hop.buffer_len();
        let mut bytes = [0u8; 8 + 8 + 20 * crate::ipv6::addr::MAX_ADDRESSES];
        let Some((ext, report)) = bytes.split_at_mut_checked(ext_len) else { return false };
        if hop_by_hop.emit(ext).is_err() {
            return false;
        }
        let Ok(report_len) = MldReportRepr::emit_records(records, report, src, IPV6_ALL_MLDV2_ROUTERS) else {
            return false;
        };
        let Some(body) = bytes.get(..ext_len + report_len) else { return false };
        let Ok(packet) = PacketBuf::from_slice(&self.pool, HEADROOM, body) else {
            self.counters.drop_no_buffer += 1;
            return false;
        };
        let Some(mac) = multicast_mac(&IPV6_ALL_MLDV2_ROUTERS) else { return false };
        let repr = Ipv6Repr::new(src, IPV6_ALL_MLDV2_ROUTERS, IpProtocol::HopByHop, packet.len(), 1);
        let sent = self.emit_ipv6(repr, packet, mac);
        if sent {
            self.counters.mld_reports_sent += 1;
        }
        sent
    }

    /// Our addresses in `removed` are gone: the solicited-node groups none
    /// of the remaining ones shares are left, and the link told so.
    pub(super) fn leave_solicited_groups(&mut self, removed: &[Ipv6Addr]) {
        let Some(v6) = &self.v6 else { return };
        let mut left: Vec<Ipv6Addr> = Vec::new();
        for ip in removed {
            let group = solicited_node(ip);
            if !v6.addrs.is_joined_solicited(group) && !left.contains(&group) {
                left.push(group);
            }
        }
        self.send_mld_leave(&left);
    }
}
