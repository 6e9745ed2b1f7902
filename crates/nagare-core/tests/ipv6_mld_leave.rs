//! Leaving solicited-node groups (RFC 3810, RFC 4861 7.2.1): when one of
//! our IPv6 addresses is removed, by the configuration or at the end of
//! its valid lifetime, the interface stops taking its solicited-node
//! group and sends an MLDv2 report changing it to include nothing,
//! unless another address of ours is in the same group. A join's report
//! and a leave's go again as the Robustness Variable asks (RFC 3810
//! 6.1), a random time within the Unsolicited Report Interval apart; a
//! change's report carries the records still owed, merged with it.

mod common;

use common::feed;
use nagare_core::buf::BufferPool;
use nagare_core::iface::Error;
use nagare_core::ipv6::addr::AddrState;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig, Ipv6Config};
use nagare_wire::{
    multicast_mac, solicited_node, EtherType, EthernetAddress, EthernetRepr, Icmpv6Packet, IpProtocol, Ipv4Addr,
    Ipv6Addr, Ipv6Packet, Ipv6Repr, MldRecordType, MldReportRepr, NdpOption, NdpPrefixInfo, NdpRepr,
};
use std::time::Duration;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const MAC_P: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// A with `addresses` (and its link-local one), past detection, its
/// transmit queue empty.
fn host(addresses: &[&str]) -> (Interface, Instant) {
    host_with(addresses, Ipv6Config::default().mld_robustness, 0)
}

/// A as [`host`] says, with MLD's Robustness Variable `robustness` and
/// `seed`.
fn host_with(addresses: &[&str], robustness: u8, seed: u64) -> (Interface, Instant) {
    let v4 = nagare_wire::Ipv4Cidr::new(Ipv4Addr::new(192, 168, 9, 1), 24).unwrap();
    let mut c = InterfaceConfig::new(MAC_A, v4);
    c.seed = seed;
    c.ipv6 = Some(Ipv6Config {
        addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        router_solicitations: 0,
        mld_robustness: robustness,
        ..Ipv6Config::default()
    });
    let mut a = Interface::new(c, Capabilities::default(), BufferPool::new(2048, 256));
    let now = run(&mut a, Instant::ZERO, Duration::from_secs(3));
    assert!(a.ipv6_addresses().all(|x| x.state == AddrState::Preferred));
    a.tx_queue().clear();
    (a, now)
}

/// Runs A's timers from `from` for `by`; returns the time reached.
fn run(a: &mut Interface, from: Instant, by: Duration) -> Instant {
    let (end, mut now) = (from + by, from);
    for _ in 0..1000 {
        a.poll(now);
        match a.poll_at() {
            Some(t) if t > now && t <= end => now = t,
            _ => break,
        }
    }
    a.poll(end);
    end
}

/// The MLDv2 records of the reports A queued, each as (type, group).
fn mld_records(a: &mut Interface) -> Vec<Report> {
    let frames: Vec<Vec<u8>> = a.tx_queue().drain(..).map(|f| f.to_vec()).collect();
    let mut reports = Vec::new();
    for f in &frames {
        if f[12..14] != [0x86, 0xdd] || f[14 + 6] != 0 {
            continue;
        }
        let ip6 = Ipv6Packet::new_unchecked(&f[14..]);
        assert_eq!(ip6.dst_addr(), ip("ff02::16"));
        assert_eq!(ip6.hop_limit(), 1);
        let ext = (usize::from(f[14 + 40 + 1]) + 1) * 8;
        let icmp = &f[14 + 40 + ext..];
        let report = MldReportRepr::parse(&Icmpv6Packet::new_unchecked(icmp), ip6.src_addr(), ip6.dst_addr(), true)
            .expect("an MLDv2 report");
        reports.push(report.records().map(|r| r.unwrap()).map(|r| (r.record_type, r.multicast_addr)).collect());
    }
    reports
}

/// A neighbour solicitation for `target` to its solicited-node group,
/// from another node.
fn solicit(target: Ipv6Addr) -> Vec<u8> {
    let (src, dst) = (ip("fe80::99"), solicited_node(&target));
    let ns = NdpRepr::NeighborSolicit { target, lladdr: Some(MAC_P) };
    let mut msg = vec![0u8; ns.buffer_len()];
    ns.emit(&mut msg, src, dst).unwrap();
    let mut f = vec![0u8; 14 + 40];
    let eth = EthernetRepr { src_addr: MAC_P, dst_addr: multicast_mac(&dst).unwrap(), ethertype: EtherType::Ipv6 };
    eth.emit(&mut f).unwrap();
    Ipv6Repr::new(src, dst, IpProtocol::Icmpv6, msg.len(), 255).emit(&mut f[14..]).unwrap();
    f.extend(msg);
    f
}

/// Whether A answers a solicitation for `target` sent to its group.
fn answers(a: &mut Interface, target: Ipv6Addr, now: Instant) -> bool {
    let before = a.counters().ndp_adverts_sent;
    feed(a, &solicit(target), 2048, now);
    a.tx_queue().clear();
    a.counters().ndp_adverts_sent > before
}

#[test]
fn removing_the_last_address_of_a_group_leaves_it_and_says_so() {
    // fd00::1 and fd01::1 share ff02::1:ff00:1; fd00::2 has its own.
    let (mut a, now) = host(&["fd00::1/64", "fd01::1/64", "fd00::2/64"]);
    let (shared, own) = (solicited_node(&ip("fd00::1")), solicited_node(&ip("fd00::2")));
    assert_eq!(solicited_node(&ip("fd01::1")), shared);
    assert!(answers(&mut a, ip("fd01::1"), now));

    a.remove_ipv6_address(ip("fd00::1")).unwrap();
    assert_eq!(a.ipv6_address_state(ip("fd00::1")), None);
    assert!(mld_records(&mut a).is_empty(), "fd01::1 still needs the group");
    assert!(answers(&mut a, ip("fd01::1"), now), "the group is still taken");
    assert_eq!(a.counters().mld_groups_left, 0);

    a.remove_ipv6_address(ip("fd01::1")).unwrap();
    assert_eq!(mld_records(&mut a), [vec![(MldRecordType::ChangeToInclude, shared)]]);
    assert_eq!(a.counters().mld_groups_left, 1);
    let not_for_us = a.counters().drop_eth_not_for_us;
    assert!(!answers(&mut a, ip("fd01::1"), now));
    assert_eq!(a.counters().drop_eth_not_for_us, not_for_us + 1, "the group's frames are no longer taken");

    a.remove_ipv6_address(ip("fd00::2")).unwrap();
    // With the shared group's leave, still owed its retransmission.
    let leaves = vec![(MldRecordType::ChangeToInclude, own), (MldRecordType::ChangeToInclude, shared)];
    assert_eq!(mld_records(&mut a), [leaves]);
    assert_eq!(a.remove_ipv6_address(ip("fd00::2")), Err(Error::AddrNotAvailable));
    let ll = a.ipv6_link_local().unwrap();
    assert_eq!(a.remove_ipv6_address(ll), Err(Error::Unaddressable), "neighbour discovery needs it");
    assert_eq!(a.counters().mld_groups_left, 2);
}

/// A router advertisement from fe80::1 with an autonomous /64 prefix.
fn advert(prefix: &str, valid: u32, preferred: u32) -> Vec<u8> {
    let option = NdpOption::PrefixInfo(NdpPrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: valid,
        preferred_lifetime: preferred,
        prefix: ip(prefix),
    });
    common::router_advert(ip("fe80::1"), MAC_P, 0, &[option])
}

#[test]
fn an_autoconfigured_address_whose_valid_lifetime_ends_leaves_its_group() {
    let (mut a, now) = host(&[]);
    feed(&mut a, &advert("2001:db8:1::", 60, 20), 2048, now);
    let formed = a.ipv6_addresses().find(|x| x.is_autoconfigured()).expect("an address formed").address();
    let group = solicited_node(&formed);
    let now = run(&mut a, now, Duration::from_secs(5));
    assert_eq!(a.ipv6_address_state(formed), Some(AddrState::Preferred));
    let joins = mld_records(&mut a);
    assert!(joins.iter().flatten().any(|&(t, g)| t == MldRecordType::ChangeToExclude && g == group), "joined");

    // Deprecated, it is still ours: the group stays.
    let now = run(&mut a, now, Duration::from_secs(20));
    assert!(a.ipv6_addresses().any(|x| x.address() == formed && x.is_deprecated()));
    assert!(mld_records(&mut a).is_empty());
    assert!(answers(&mut a, formed, now));

    // Past its valid lifetime, it is removed and its group left.
    let now = run(&mut a, now, Duration::from_secs(40));
    assert_eq!(a.ipv6_address_state(formed), None);
    assert_eq!(a.counters().slaac_addresses_removed, 1);
    // Reported, and reported again within the second.
    assert_eq!(mld_records(&mut a), vec![vec![(MldRecordType::ChangeToInclude, group)]; 2]);
    assert_eq!(a.counters().mld_groups_left, 1);
    assert!(!answers(&mut a, formed, now));
}

/// An MLDv2 report's records, each as (type, group).
type Report = Vec<(MldRecordType, Ipv6Addr)>;

/// The MLDv2 reports A sends over `by` from `from` (its timers run at
/// each deadline), each with when it went.
fn reports_over(a: &mut Interface, from: Instant, by: Duration) -> Vec<(Instant, Report)> {
    let (end, mut now) = (from + by, from);
    let mut reports = Vec::new();
    for _ in 0..1000 {
        a.poll(now);
        reports.extend(mld_records(a).into_iter().map(|r| (now, r)));
        match a.poll_at() {
            Some(t) if t <= end => now = now.max(t),
            _ => break,
        }
    }
    reports
}

#[test]
fn a_join_is_reported_again_within_the_unsolicited_report_interval() {
    let interval = Ipv6Config::default().mld_unsolicited_report_interval;
    assert_eq!((Ipv6Config::default().mld_robustness, interval), (2, Duration::from_secs(1)));
    for seed in 0..8 {
        let (mut a, now) = host_with(&["fd00::1/64"], 2, seed);
        // Start-up's join went twice already.
        assert_eq!(a.counters().mld_reports_retransmitted, 1);
        a.add_ipv6_address("fd00::2/64".parse().unwrap()).unwrap();
        let reports = reports_over(&mut a, now, Duration::from_secs(30));
        let joined = (MldRecordType::ChangeToExclude, solicited_node(&ip("fd00::2")));
        assert_eq!(reports.len(), 2, "seed {seed}: {reports:?}");
        assert!(reports.iter().all(|(_, r)| r.contains(&joined)));
        assert_eq!(reports[0].0, now, "the first at once");
        assert!(reports[1].0 <= now + interval, "seed {seed}: the second within the interval");
        assert_eq!(a.counters().mld_reports_retransmitted, 2);
        assert_eq!(a.ipv6_address_state(ip("fd00::2")), Some(AddrState::Preferred));
    }
}

#[test]
fn a_leave_is_reported_robustness_times() {
    for robustness in [1u8, 2, 3] {
        let (mut a, now) = host_with(&["fd00::1/64", "fd00::2/64"], robustness, 5);
        a.remove_ipv6_address(ip("fd00::2")).unwrap();
        let left = vec![(MldRecordType::ChangeToInclude, solicited_node(&ip("fd00::2")))];
        assert_eq!(mld_records(&mut a), std::slice::from_ref(&left), "the first at once");
        let reports = reports_over(&mut a, now, Duration::from_secs(30));
        assert_eq!(reports.len(), usize::from(robustness - 1), "robustness {robustness}");
        let mut last = now;
        for (at, records) in &reports {
            assert_eq!(records, &left);
            assert!(*at >= last && *at <= last + Duration::from_secs(1));
            last = *at;
        }
        assert_eq!(a.counters().mld_groups_left, 1);
    }
}

#[test]
fn rejoining_a_group_owes_the_join_and_not_the_leave() {
    let (mut a, now) = host(&["fd00::1/64", "fd00::2/64"]);
    a.remove_ipv6_address(ip("fd00::2")).unwrap();
    a.add_ipv6_address("fd00::2/64".parse().unwrap()).unwrap();
    let group = solicited_node(&ip("fd00::2"));
    let reports = reports_over(&mut a, now, Duration::from_secs(30));
    let records: Vec<_> = reports.iter().flat_map(|(_, r)| r.iter().filter(|(_, g)| *g == group)).collect();
    // The leave at once, the join at the next poll and once again; the
    // leave is not repeated.
    let (leave, join) = ((MldRecordType::ChangeToInclude, group), (MldRecordType::ChangeToExclude, group));
    assert_eq!(records, [&leave, &join, &join], "{reports:?}");
}

#[test]
fn a_change_s_report_carries_the_records_still_owed() {
    let (mut a, now) = host(&["fd00::1/64", "fd00::2/64", "fd00::3/64"]);
    let left = |addr: &str| (MldRecordType::ChangeToInclude, solicited_node(&ip(addr)));
    a.remove_ipv6_address(ip("fd00::2")).unwrap();
    assert_eq!(mld_records(&mut a), [vec![left("fd00::2")]]);
    // Before the first leave's retransmission: the second leave's report
    // carries it, and that is its retransmission.
    a.remove_ipv6_address(ip("fd00::3")).unwrap();
    assert_eq!(mld_records(&mut a), [vec![left("fd00::3"), left("fd00::2")]]);
    let reports = reports_over(&mut a, now, Duration::from_secs(30));
    let reports: Vec<_> = reports.into_iter().map(|(_, r)| r).collect();
    assert_eq!(reports, [vec![left("fd00::3")]]);
    assert_eq!(a.counters().mld_groups_left, 2);
}
