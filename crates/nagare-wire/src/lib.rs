//! Wire formats for the nagare TCP/IP stack: Ethernet, ARP, IPv4, ICMPv4,
//! UDP and TCP, and IPv6 with its extension headers, ICMPv6, neighbour
//! discovery and MLDv2 reports.
//!
//! Every protocol comes in two layers:
//!
//! * a zero-copy *view* (`EthernetFrame`, `Ipv4Packet`, ...) over any
//!   `AsRef<[u8]>` buffer, with field getters and setters. `new_checked`
//!   validates lengths once; getters on a view built with `new_unchecked`
//!   over a too-short buffer return zero / empty slices instead of panicking,
//!   and setters silently do nothing for bytes that are not there.
//! * a *representation* (`EthernetRepr`, `Ipv4Repr`, ...) holding the parsed,
//!   validated field values, with `parse` and `emit`.
//!
//! No input of any length or content makes a parser panic.
//! Transport headers can be emitted separately from their payload, taking a
//! [`Checksum`] over the payload so the payload may live in a buffer chain.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

mod field;

pub mod arp;
pub mod checksum;
pub mod cidr;
pub mod error;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod mld;
pub mod ndp;
pub mod tcp;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket, ArpRepr, ARP_ETHERNET_IPV4_LEN};
pub use checksum::{checksum, pseudo_header, pseudo_header_v4, pseudo_header_v6, update, update_u32, verify, Checksum};
pub use cidr::Ipv4Cidr;
pub use error::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, ETHERNET_HEADER_LEN};
pub use icmpv4::{DstUnreachable, Icmpv4EchoHeader, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, ICMPV4_HEADER_LEN};
pub use icmpv6::{
    Icmpv6DstUnreachable, Icmpv6EchoHeader, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr,
    ICMPV6_ERROR_MAX_LEN, ICMPV6_HEADER_LEN,
};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr, IPV4_HEADER_LEN, IPV4_MAX_TOTAL_LEN};
pub use ipv6::{
    is_link_local, is_solicited_node, multicast_mac, solicited_node, Ipv6Packet, Ipv6Repr, IPV6_ALL_MLDV2_ROUTERS,
    IPV6_ALL_NODES, IPV6_ALL_ROUTERS, IPV6_HEADER_LEN, IPV6_MAX_FLOW_LABEL, IPV6_MAX_PAYLOAD_LEN, IPV6_MIN_MTU,
};
pub use ipv6ext::{
    Ipv6ExtChain, Ipv6ExtError, Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6FragmentRepr, Ipv6Option, Ipv6OptionAction,
    Ipv6OptionsIter, Ipv6OptionsRepr, IPV6_EXT_HEADER_MAX_LEN, IPV6_EXT_MAX_HEADERS, IPV6_EXT_MAX_LEN,
    IPV6_FRAGMENT_HEADER_LEN,
};
pub use mld::{
    MldAddressRecord, MldRecordType, MldRecordsIter, MldReportRepr, MLD_RECORD_HEADER_LEN, MLD_REPORT_HEADER_LEN,
};
pub use ndp::{NdpOption, NdpOptionsIter, NdpPrefixInfo, NdpRepr, NDP_HOP_LIMIT};
pub use tcp::{
    TcpFlags, TcpOption, TcpOptionsIter, TcpPacket, TcpRepr, TcpSeqNumber, TCP_HEADER_LEN, TCP_MAX_HEADER_LEN,
};
pub use udp::{UdpPacket, UdpRepr, UDP_HEADER_LEN};

/// Re-exported so users need not import `core::net` themselves.
pub use core::net::{Ipv4Addr, Ipv6Addr};
