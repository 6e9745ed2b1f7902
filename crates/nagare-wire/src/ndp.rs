//! Neighbour discovery (RFC 4861): router and neighbour solicitations and
//! advertisements, redirects, and their options, carried in ICMPv6.
//!
//! A received message is also to be dropped unless its IPv6 hop limit is
//! 255 ([`NDP_HOP_LIMIT`]); the IPv6 header is not part of this view, so
//! that check is the caller's.

use core::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::ethernet::EthernetAddress;
use crate::field;
use crate::icmpv6::{Icmpv6Message, Icmpv6Packet};
use crate::ipv6::{is_link_local, is_solicited_node};

/// The hop limit every neighbour discovery message is sent with, and the
/// only one a receiver accepts (it proves the sender is on the link).
pub const NDP_HOP_LIMIT: u8 = 255;

mod offs {
    // Router advertisement.
    pub const CUR_HOP_LIMIT: usize = 4;
    pub const RA_FLAGS: usize = 5;
    pub const ROUTER_LIFETIME: usize = 6;
    pub const REACHABLE_TIME: usize = 8;
    pub const RETRANS_TIMER: usize = 12;
    // Neighbour advertisement.
    pub const NA_FLAGS: usize = 4;
    // Neighbour solicitation and advertisement, redirect.
    pub const TARGET: usize = 8;
    // Redirect.
    pub const DEST: usize = 24;
}

/// Where each message's options start (its fixed part's length).
mod options_at {
    pub const ROUTER_SOLICIT: usize = 8;
    pub const ROUTER_ADVERT: usize = 16;
    pub const NEIGHBOR: usize = 24;
    pub const REDIRECT: usize = 40;
}

const RA_MANAGED: u8 = 0x80;
const RA_OTHER: u8 = 0x40;
const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;

mod kind {
    pub const SOURCE_LL_ADDR: u8 = 1;
    pub const TARGET_LL_ADDR: u8 = 2;
    pub const PREFIX_INFO: u8 = 3;
    pub const REDIRECTED_HEADER: u8 = 4;
    pub const MTU: u8 = 5;
}

const PREFIX_ON_LINK: u8 = 0x80;
const PREFIX_AUTONOMOUS: u8 = 0x40;
/// Option type and length, then 6 reserved bytes (redirected header).
const REDIRECTED_HEADER_FIXED: usize = 8;
const LL_ADDR_OPTION_LEN: usize = 8;
const PREFIX_INFO_OPTION_LEN: usize = 32;
const MTU_OPTION_LEN: usize = 8;
/// Option lengths count 8-byte units in one byte.
const OPTION_MAX_LEN: usize = 255 * 8;

/// The Prefix Information option's content (RFC 4861 section 4.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NdpPrefixInfo {
    /// Leading bits of `prefix` that are valid (0 to 128).
    pub prefix_len: u8,
    /// L flag: the prefix is on link.
    pub on_link: bool,
    /// A flag: addresses may be formed from the prefix (SLAAC).
    pub autonomous: bool,
    /// Seconds the prefix stays valid (0xffffffff: forever).
    pub valid_lifetime: u32,
    /// Seconds addresses from the prefix stay preferred.
    pub preferred_lifetime: u32,
    /// The prefix; bits past `prefix_len` are to be ignored.
    pub prefix: Ipv6Addr,
}

/// A neighbour discovery option (RFC 4861 section 4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NdpOption<'a> {
    /// Type 1: the sender's link-layer address.
    SourceLinkLayerAddr(EthernetAddress),
    /// Type 2: the target's link-layer address.
    TargetLinkLayerAddr(EthernetAddress),
    /// Type 3.
    PrefixInfo(NdpPrefixInfo),
    /// Type 4: as much of the redirected packet as fits, from its IPv6
    /// header on (with the zero padding to 8 bytes when parsed).
    RedirectedHeader(&'a [u8]),
    /// Type 5: the link MTU.
    Mtu(u32),
    /// Any other type, skipped by receivers (RFC 4861 section 4.6).
    Unknown {
        /// Option type.
        kind: u8,
        /// The bytes after type and length (with the zero padding to 8
        /// bytes when emitted).
        data: &'a [u8],
    },
}

impl<'a> NdpOption<'a> {
    /// Parse the option at the start of `buf`, returning the bytes after it.
    ///
    /// `Err(Truncated)` if `buf` is shorter than 2 bytes or than the
    /// length byte says. `Err(Malformed)` if the length byte is 0 (RFC 4861
    /// section 4.6: the packet must be discarded) or does not fit the type
    /// (link-layer addresses are Ethernet's 6 bytes: 8 in all).
    pub fn parse(buf: &'a [u8]) -> Result<(&'a [u8], NdpOption<'a>)> {
        let [k, units] = *buf.first_chunk::<2>().ok_or(Error::Truncated)?;
        let len = usize::from(units) * 8;
        if len == 0 {
            return Err(Error::Malformed);
        }
        let body = buf.get(2..len).ok_or(Error::Truncated)?;
        let rest = buf.get(len..).ok_or(Error::Truncated)?;
        let opt = match k {
            kind::SOURCE_LL_ADDR | kind::TARGET_LL_ADDR => {
                if len != LL_ADDR_OPTION_LEN {
                    return Err(Error::Malformed);
                }
                let addr = EthernetAddress::from_bytes(body)?;
                if k == kind::SOURCE_LL_ADDR {
                    NdpOption::SourceLinkLayerAddr(addr)
                } else {
                    NdpOption::TargetLinkLayerAddr(addr)
                }
            }
            kind::PREFIX_INFO => {
                if len != PREFIX_INFO_OPTION_LEN {
                    return Err(Error::Malformed);
                }
                let flags = field::u8_at(buf, 3);
                NdpOption::PrefixInfo(NdpPrefixInfo {
                    prefix_len: field::u8_at(buf, 2),
                    on_link: flags & PREFIX_ON_LINK != 0,
                    autonomous: flags & PREFIX_AUTONOMOUS != 0,
                    valid_lifetime: field::u32_at(buf, 4),
                    preferred_lifetime: field::u32_at(buf, 8),
                    prefix: field::ipv6_at(buf, 16),
                })
            }
            kind::MTU => {
                if len != MTU_OPTION_LEN {
                    return Err(Error::Malformed);
                }
                NdpOption::Mtu(field::u32_at(buf, 4))
            }
            kind::REDIRECTED_HEADER => {
                NdpOption::RedirectedHeader(buf.get(REDIRECTED_HEADER_FIXED..len).ok_or(Error::Malformed)?)
            }
            _ => NdpOption::Unknown { kind: k, data: body },
        };
        Ok((rest, opt))
    }

    /// Bytes [`NdpOption::emit`] writes: always a multiple of 8.
    pub fn buffer_len(&self) -> usize {
        match self {
            NdpOption::SourceLinkLayerAddr(_) | NdpOption::TargetLinkLayerAddr(_) => LL_ADDR_OPTION_LEN,
            NdpOption::PrefixInfo(_) => PREFIX_INFO_OPTION_LEN,
            NdpOption::Mtu(_) => MTU_OPTION_LEN,
            NdpOption::RedirectedHeader(data) => (REDIRECTED_HEADER_FIXED + data.len()).div_ceil(8) * 8,
            NdpOption::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Write the option at the start of `buf`, zero-padded to a multiple
    /// of 8 bytes, and return the rest of `buf`.
    ///
    /// `Err(Truncated)` if `buf` is too short; `Err(Malformed)` if the
    /// option would be longer than 2040 bytes.
    pub fn emit<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8]> {
        let len = self.buffer_len();
        if len > OPTION_MAX_LEN {
            return Err(Error::Malformed);
        }
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let (out, rest) = buf.split_at_mut(len);
        out.fill(0);
        let k = match *self {
            NdpOption::SourceLinkLayerAddr(a) | NdpOption::TargetLinkLayerAddr(a) => {
                field::set_bytes(out, 2, a.as_bytes());
                if matches!(self, NdpOption::SourceLinkLayerAddr(_)) {
                    kind::SOURCE_LL_ADDR
                } else {
                    kind::TARGET_LL_ADDR
                }
            }
            NdpOption::PrefixInfo(p) => {
                let mut flags = 0;
                if p.on_link {
                    flags |= PREFIX_ON_LINK;
                }
                if p.autonomous {
                    flags |= PREFIX_AUTONOMOUS;
                }
                field::set_u8(out, 2, p.prefix_len);
                field::set_u8(out, 3, flags);
                field::set_u32(out, 4, p.valid_lifetime);
                field::set_u32(out, 8, p.preferred_lifetime);
                field::set_bytes(out, 16, &p.prefix.octets());
                kind::PREFIX_INFO
            }
            NdpOption::Mtu(mtu) => {
                field::set_u32(out, 4, mtu);
                kind::MTU
            }
            NdpOption::RedirectedHeader(data) => {
                field::set_bytes(out, REDIRECTED_HEADER_FIXED, data);
                kind::REDIRECTED_HEADER
            }
            NdpOption::Unknown { kind, data } => {
                field::set_bytes(out, 2, data);
                kind
            }
        };
        field::set_u8(out, 0, k);
        field::set_u8(out, 1, (len / 8) as u8);
        Ok(rest)
    }
}

/// Iterator over neighbour discovery options; a malformed option (length
/// 0, running past the end, or the wrong length for its type) yields one
/// `Err` and then the iterator ends.
#[derive(Clone, Debug)]
pub struct NdpOptionsIter<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> NdpOptionsIter<'a> {
    /// Iterate over `options` (a message's bytes after its fixed part).
    pub fn new(options: &'a [u8]) -> Self {
        NdpOptionsIter { rest: options, done: false }
    }
}

impl<'a> Iterator for NdpOptionsIter<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        match NdpOption::parse(self.rest) {
            Ok((rest, opt)) => {
                self.rest = rest;
                Some(Ok(opt))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for NdpOptionsIter<'_> {}

/// A parsed neighbour discovery message.
///
/// Solicitations and neighbour advertisements keep only the link-layer
/// address option they are about (source for solicitations, target for
/// advertisements), since that is the only one they carry to a host; other
/// options are checked and skipped. Router advertisements and redirects
/// keep their whole option area, read with [`NdpOptionsIter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NdpRepr<'a> {
    /// Type 133.
    RouterSolicit {
        /// Source link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Type 134.
    RouterAdvert {
        /// Hop limit to use (0: unspecified).
        hop_limit: u8,
        /// M flag: addresses are available by DHCPv6.
        managed_flag: bool,
        /// O flag: other configuration is available by DHCPv6.
        other_flag: bool,
        /// Seconds the sender stays a default router (0: not one).
        router_lifetime: u16,
        /// Milliseconds a neighbour stays reachable after confirmation (0:
        /// unspecified).
        reachable_time: u32,
        /// Milliseconds between retransmitted solicitations (0:
        /// unspecified).
        retrans_timer: u32,
        /// The options, each already checked to parse.
        options: &'a [u8],
    },
    /// Type 135.
    NeighborSolicit {
        /// The address whose link-layer address is asked for.
        target: Ipv6Addr,
        /// Source link-layer address option (absent in duplicate address
        /// detection, from the unspecified address).
        lladdr: Option<EthernetAddress>,
    },
    /// Type 136.
    NeighborAdvert {
        /// R flag: the sender is a router.
        router_flag: bool,
        /// S flag: the answer to a solicitation.
        solicited_flag: bool,
        /// O flag: override a cached link-layer address.
        override_flag: bool,
        /// The address advertised.
        target: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Type 137.
    Redirect {
        /// A better first hop for `dest` (or `dest` itself, on link).
        target: Ipv6Addr,
        /// The destination redirected.
        dest: Ipv6Addr,
        /// The options, each already checked to parse.
        options: &'a [u8],
    },
}

/// Check every option of `options`; the first link-layer address option
/// of `kind` (source or target) if any.
fn scan_options(options: &[u8], want: u8) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    for o in NdpOptionsIter::new(options) {
        match (o?, want) {
            (NdpOption::SourceLinkLayerAddr(a), kind::SOURCE_LL_ADDR)
            | (NdpOption::TargetLinkLayerAddr(a), kind::TARGET_LL_ADDR) => {
                found = found.or(Some(a));
            }
            _ => {}
        }
    }
    Ok(found)
}

impl<'a> NdpRepr<'a> {
    /// Parse a neighbour discovery message.
    ///
    /// `Err(Checksum)` if `verify_checksum` and the ICMPv6 checksum over the
    /// pseudo header of `src` and `dst` is wrong; `Err(Unsupported)` for
    /// another ICMPv6 type; `Err(Truncated)` if shorter than the message's
    /// fixed part. `Err(Malformed)` for what RFC 4861 (sections 6.1, 7.1,
    /// 8.1) tells a receiver to discard, the hop limit aside: a code other
    /// than 0, a malformed option (length 0 included), a multicast target,
    /// a router advertisement or redirect not from a link-local address, a
    /// solicitation from the unspecified address with a source link-layer
    /// address (or a neighbour solicitation from it to anything but a
    /// solicited-node group), a solicited advertisement to a multicast
    /// address, a
    /// redirect of a multicast destination or to a target that is neither
    /// link-local nor the destination itself.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        let buf: &'a [u8] = <T as AsRef<[u8]>>::as_ref(packet.into_inner());
        let fixed = match packet.msg_type() {
            Icmpv6Message::RouterSolicit => options_at::ROUTER_SOLICIT,
            Icmpv6Message::RouterAdvert => options_at::ROUTER_ADVERT,
            Icmpv6Message::NeighborSolicit | Icmpv6Message::NeighborAdvert => options_at::NEIGHBOR,
            Icmpv6Message::Redirect => options_at::REDIRECT,
            _ => return Err(Error::Unsupported),
        };
        let options = buf.get(fixed..).ok_or(Error::Truncated)?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        if packet.msg_code() != 0 {
            return Err(Error::Malformed);
        }
        let target = field::ipv6_at(buf, offs::TARGET);
        match packet.msg_type() {
            Icmpv6Message::RouterSolicit => {
                let lladdr = scan_options(options, kind::SOURCE_LL_ADDR)?;
                if src.is_unspecified() && lladdr.is_some() {
                    return Err(Error::Malformed);
                }
                Ok(NdpRepr::RouterSolicit { lladdr })
            }
            Icmpv6Message::RouterAdvert => {
                if !is_link_local(&src) {
                    return Err(Error::Malformed);
                }
                scan_options(options, 0)?;
                let flags = field::u8_at(buf, offs::RA_FLAGS);
                Ok(NdpRepr::RouterAdvert {
                    hop_limit: field::u8_at(buf, offs::CUR_HOP_LIMIT),
                    managed_flag: flags & RA_MANAGED != 0,
                    other_flag: flags & RA_OTHER != 0,
                    router_lifetime: field::u16_at(buf, offs::ROUTER_LIFETIME),
                    reachable_time: field::u32_at(buf, offs::REACHABLE_TIME),
                    retrans_timer: field::u32_at(buf, offs::RETRANS_TIMER),
                    options,
                })
            }
            Icmpv6Message::NeighborSolicit => {
                let lladdr = scan_options(options, kind::SOURCE_LL_ADDR)?;
                // From the unspecified address (duplicate address detection):
                // no source link-layer address, and only to a solicited-node group.
                if target.is_multicast() || (src.is_unspecified() && (lladdr.is_some() || !is_solicited_node(&dst))) {
                    return Err(Error::Malformed);
                }
                Ok(NdpRepr::NeighborSolicit { target, lladdr })
            }
            Icmpv6Message::NeighborAdvert => {
                let lladdr = scan_options(options, kind::TARGET_LL_ADDR)?;
                let flags = field::u8_at(buf, offs::NA_FLAGS);
                let solicited_flag = flags & NA_SOLICITED != 0;
                if target.is_multicast() || (solicited_flag && dst.is_multicast()) {
                    return Err(Error::Malformed);
                }
                Ok(NdpRepr::NeighborAdvert {
                    router_flag: flags & NA_ROUTER != 0,
                    solicited_flag,
                    override_flag: flags & NA_OVERRIDE != 0,
                    target,
                    lladdr,
                })
            }
            _ => {
                let dest = field::ipv6_at(buf, offs::DEST);
                if !is_link_local(&src) || dest.is_multicast() || !(is_link_local(&target) || target == dest) {
                    return Err(Error::Malformed);
                }
                scan_options(options, 0)?;
                Ok(NdpRepr::Redirect { target, dest, options })
            }
        }
    }

    fn lladdr_option(&self) -> Option<NdpOption<'static>> {
        match *self {
            NdpRepr::RouterSolicit { lladdr } | NdpRepr::NeighborSolicit { lladdr, .. } => {
                lladdr.map(NdpOption::SourceLinkLayerAddr)
            }
            NdpRepr::NeighborAdvert { lladdr, .. } => lladdr.map(NdpOption::TargetLinkLayerAddr),
            NdpRepr::RouterAdvert { .. } | NdpRepr::Redirect { .. } => None,
        }
    }

    /// The ICMPv6 type.
    pub fn msg_type(&self) -> Icmpv6Message {
        match self {
            NdpRepr::RouterSolicit { .. } => Icmpv6Message::RouterSolicit,
            NdpRepr::RouterAdvert { .. } => Icmpv6Message::RouterAdvert,
            NdpRepr::NeighborSolicit { .. } => Icmpv6Message::NeighborSolicit,
            NdpRepr::NeighborAdvert { .. } => Icmpv6Message::NeighborAdvert,
            NdpRepr::Redirect { .. } => Icmpv6Message::Redirect,
        }
    }

    /// Bytes [`NdpRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let (fixed, options) = match self {
            NdpRepr::RouterSolicit { .. } => (options_at::ROUTER_SOLICIT, 0),
            NdpRepr::RouterAdvert { options, .. } => (options_at::ROUTER_ADVERT, options.len()),
            NdpRepr::NeighborSolicit { .. } | NdpRepr::NeighborAdvert { .. } => (options_at::NEIGHBOR, 0),
            NdpRepr::Redirect { options, .. } => (options_at::REDIRECT, options.len()),
        };
        fixed + options + self.lladdr_option().map_or(0, |o| o.buffer_len())
    }

    /// Write the whole message, checksum over the pseudo header of `src`
    /// and `dst` included, at the start of `buf`. Reserved bits are zero;
    /// the option bytes of advertisements and redirects are copied as they
    /// are.
    ///
    /// `Err(Truncated)` if `buf` is shorter than [`NdpRepr::buffer_len`].
    pub fn emit(&self, buf: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        let buf = buf.get_mut(..self.buffer_len()).ok_or(Error::Truncated)?;
        buf.fill(0);
        let mut p = Icmpv6Packet::new_unchecked(&mut *buf);
        p.set_msg_type(self.msg_type());
        let buf = p.into_inner();
        let (fixed, options): (usize, &[u8]) = match *self {
            NdpRepr::RouterSolicit { .. } => (options_at::ROUTER_SOLICIT, &[]),
            NdpRepr::RouterAdvert {
                hop_limit,
                managed_flag,
                other_flag,
                router_lifetime,
                reachable_time,
                retrans_timer,
                options,
            } => {
                let mut flags = 0;
                if managed_flag {
                    flags |= RA_MANAGED;
                }
                if other_flag {
                    flags |= RA_OTHER;
                }
                field::set_u8(buf, offs::CUR_HOP_LIMIT, hop_limit);
                field::set_u8(buf, offs::RA_FLAGS, flags);
                field::set_u16(buf, offs::ROUTER_LIFETIME, router_lifetime);
                field::set_u32(buf, offs::REACHABLE_TIME, reachable_time);
                field::set_u32(buf, offs::RETRANS_TIMER, retrans_timer);
                (options_at::ROUTER_ADVERT, options)
            }
            NdpRepr::NeighborSolicit { target, .. } => {
                field::set_bytes(buf, offs::TARGET, &target.octets());
                (options_at::NEIGHBOR, &[])
            }
            NdpRepr::NeighborAdvert { router_flag, solicited_flag, override_flag, target, .. } => {
                let mut flags = 0;
                if router_flag {
                    flags |= NA_ROUTER;
                }
                if solicited_flag {
                    flags |= NA_SOLICITED;
                }
                if override_flag {
                    flags |= NA_OVERRIDE;
                }
                field::set_u8(buf, offs::NA_FLAGS, flags);
                field::set_bytes(buf, offs::TARGET, &target.octets());
                (options_at::NEIGHBOR, &[])
            }
            NdpRepr::Redirect { target, dest, options } => {
                field::set_bytes(buf, offs::TARGET, &target.octets());
                field::set_bytes(buf, offs::DEST, &dest.octets());
                (options_at::REDIRECT, options)
            }
        };
        let rest = buf.get_mut(fixed..).ok_or(Error::Truncated)?;
        match self.lladdr_option() {
            Some(o) => {
                o.emit(rest)?;
            }
            None => field::set_bytes(rest, 0, options),
        }
        Icmpv6Packet::new_unchecked(buf).fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::{solicited_node, IPV6_ALL_NODES, IPV6_ALL_ROUTERS};
    use std::vec::Vec;

    const MAC_A: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x00, 0x53, 0x01]);
    const LL_A: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe00, 0x5301);
    const LL_B: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe00, 0x5302);
    const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

    fn emit(r: &NdpRepr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
        let mut b = std::vec![0xaau8; r.buffer_len()];
        r.emit(&mut b, src, dst).unwrap();
        b
    }

    fn parse(b: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<NdpRepr<'_>> {
        let p = Icmpv6Packet::new_unchecked(b);
        NdpRepr::parse(&p, src, dst, true)
    }

    /// A neighbour solicitation for LL_B from LL_A, with LL_A's MAC, laid
    /// out by hand from RFC 4861 sections 4.3 and 4.6.1, to its solicited-node
    /// address; checksum 0x1695
    /// computed apart from this crate (Python's `struct`).
    const NS: [u8; 32] = [
        0x87, 0x00, 0x16, 0x95, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0x5e, 0xff, 0xfe, 0x00, 0x53, 0x02,
        0x01, 0x01, 0x02, 0x00, 0x5e, 0x00, 0x53, 0x01,
    ];

    #[test]
    fn neighbor_solicit_known() {
        let dst = solicited_node(&LL_B);
        let r = NdpRepr::NeighborSolicit { target: LL_B, lladdr: Some(MAC_A) };
        assert_eq!(emit(&r, LL_A, dst), NS);
        assert_eq!(parse(&NS, LL_A, dst).unwrap(), r);
        assert_eq!(parse(&NS, LL_B, dst), Err(Error::Checksum));
    }

    #[test]
    fn neighbor_solicit_rules() {
        // Duplicate address detection: from ::, no source link-layer address.
        let dad = NdpRepr::NeighborSolicit { target: LL_A, lladdr: None };
        let dst = solicited_node(&LL_A);
        let b = emit(&dad, Ipv6Addr::UNSPECIFIED, dst);
        assert_eq!(b.len(), 24);
        assert_eq!(parse(&b, Ipv6Addr::UNSPECIFIED, dst).unwrap(), dad);
        let with_ll = NdpRepr::NeighborSolicit { target: LL_A, lladdr: Some(MAC_A) };
        let b = emit(&with_ll, Ipv6Addr::UNSPECIFIED, dst);
        assert_eq!(parse(&b, Ipv6Addr::UNSPECIFIED, dst), Err(Error::Malformed));
        // From :: only to the target's solicited-node group (RFC 4861 section 7.1.1).
        let b = emit(&dad, Ipv6Addr::UNSPECIFIED, LL_B);
        assert_eq!(parse(&b, Ipv6Addr::UNSPECIFIED, LL_B), Err(Error::Malformed));
        let b = emit(&dad, Ipv6Addr::UNSPECIFIED, IPV6_ALL_NODES);
        assert_eq!(parse(&b, Ipv6Addr::UNSPECIFIED, IPV6_ALL_NODES), Err(Error::Malformed));
        let multicast = NdpRepr::NeighborSolicit { target: IPV6_ALL_NODES, lladdr: None };
        let b = emit(&multicast, LL_A, dst);
        assert_eq!(parse(&b, LL_A, dst), Err(Error::Malformed));
    }

    #[test]
    fn neighbor_advert_flags() {
        for bits in 0..8u8 {
            let r = NdpRepr::NeighborAdvert {
                router_flag: bits & 4 != 0,
                solicited_flag: bits & 2 != 0,
                override_flag: bits & 1 != 0,
                target: LL_B,
                lladdr: Some(MAC_A),
            };
            let b = emit(&r, LL_B, LL_A);
            assert_eq!(b.len(), 32);
            assert_eq!(b[4], bits << 5);
            assert_eq!(b[24..26], [2, 1]);
            assert_eq!(parse(&b, LL_B, LL_A).unwrap(), r);
            // Solicited advertisements never go to a multicast address.
            let b = emit(&r, LL_B, IPV6_ALL_NODES);
            let to_all = parse(&b, LL_B, IPV6_ALL_NODES);
            if bits & 2 != 0 {
                assert_eq!(to_all, Err(Error::Malformed));
            } else {
                assert_eq!(to_all.unwrap(), r);
            }
        }
    }

    #[test]
    fn router_solicit() {
        let r = NdpRepr::RouterSolicit { lladdr: Some(MAC_A) };
        let b = emit(&r, LL_A, IPV6_ALL_ROUTERS);
        assert_eq!(b.len(), 16);
        assert_eq!(b[..2], [133, 0]);
        assert_eq!(parse(&b, LL_A, IPV6_ALL_ROUTERS).unwrap(), r);
        let r = NdpRepr::RouterSolicit { lladdr: None };
        let b = emit(&r, Ipv6Addr::UNSPECIFIED, IPV6_ALL_ROUTERS);
        assert_eq!(parse(&b, Ipv6Addr::UNSPECIFIED, IPV6_ALL_ROUTERS).unwrap(), r);
        // From the unspecified address, no source link-layer address (RFC 4861 section 6.1.1).
        let r = NdpRepr::RouterSolicit { lladdr: Some(MAC_A) };
        let b = emit(&r, Ipv6Addr::UNSPECIFIED, IPV6_ALL_ROUTERS);
        assert_eq!(parse(&b, Ipv6Addr::UNSPECIFIED, IPV6_ALL_ROUTERS), Err(Error::Malformed));
    }

    fn ra_options() -> Vec<u8> {
        let prefix = NdpPrefixInfo {
            prefix_len: 64,
            on_link: true,
            autonomous: true,
            valid_lifetime: 2_592_000,
            preferred_lifetime: 604_800,
            prefix: Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 0),
        };
        let opts = [
            NdpOption::SourceLinkLayerAddr(MAC_A),
            NdpOption::Mtu(1500),
            NdpOption::PrefixInfo(prefix),
            NdpOption::PrefixInfo(NdpPrefixInfo { on_link: false, autonomous: false, prefix_len: 48, ..prefix }),
            NdpOption::Unknown { kind: 25, data: &[0, 0, 0, 0, 0, 60, 0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0] },
        ];
        let mut v = std::vec![0u8; opts.iter().map(|o| o.buffer_len()).sum()];
        let mut rest = &mut v[..];
        for o in &opts {
            rest = o.emit(rest).unwrap();
        }
        v
    }

    #[test]
    fn router_advert() {
        let options = ra_options();
        let r = NdpRepr::RouterAdvert {
            hop_limit: 64,
            managed_flag: false,
            other_flag: true,
            router_lifetime: 1800,
            reachable_time: 30_000,
            retrans_timer: 1000,
            options: &options,
        };
        let b = emit(&r, ROUTER, IPV6_ALL_NODES);
        assert_eq!(b[..8], [134, 0, b[2], b[3], 64, 0x40, 0x07, 0x08]);
        assert_eq!(b[8..16], [0, 0, 0x75, 0x30, 0, 0, 0x03, 0xe8]);
        let back = parse(&b, ROUTER, IPV6_ALL_NODES).unwrap();
        assert_eq!(back, r);
        let NdpRepr::RouterAdvert { options, .. } = back else { panic!() };
        let opts: Vec<_> = NdpOptionsIter::new(options).map(|o| o.unwrap()).collect();
        assert_eq!(opts.len(), 5);
        assert_eq!(opts[0], NdpOption::SourceLinkLayerAddr(MAC_A));
        assert_eq!(opts[1], NdpOption::Mtu(1500));
        let NdpOption::PrefixInfo(p) = opts[2] else { panic!() };
        assert_eq!((p.prefix_len, p.on_link, p.autonomous), (64, true, true));
        assert_eq!((p.valid_lifetime, p.preferred_lifetime), (2_592_000, 604_800));
        let NdpOption::PrefixInfo(p) = opts[3] else { panic!() };
        assert_eq!((p.prefix_len, p.on_link, p.autonomous), (48, false, false));
        assert!(matches!(opts[4], NdpOption::Unknown { kind: 25, data } if data.len() == 14));
        // Only from a link-local address.
        let b = emit(&r, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), IPV6_ALL_NODES);
        assert_eq!(parse(&b, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), IPV6_ALL_NODES), Err(Error::Malformed));
    }

    #[test]
    fn prefix_option_layout() {
        let p = NdpPrefixInfo {
            prefix_len: 64,
            on_link: true,
            autonomous: false,
            valid_lifetime: 0x0102_0304,
            preferred_lifetime: 0x0506_0708,
            prefix: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        };
        let mut b = [0xffu8; 32];
        NdpOption::PrefixInfo(p).emit(&mut b).unwrap();
        assert_eq!(b[..16], [3, 4, 64, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0]);
        assert_eq!(b[16..20], [0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(NdpOption::parse(&b).unwrap(), (&[][..], NdpOption::PrefixInfo(p)));
    }

    #[test]
    fn option_length_zero_is_malformed() {
        // RFC 4861 section 4.6: a zero length option means the packet is discarded.
        let mut b = emit(&NdpRepr::NeighborSolicit { target: LL_B, lladdr: Some(MAC_A) }, LL_A, LL_B);
        b[25] = 0;
        let p = Icmpv6Packet::new_unchecked(&b[..]);
        assert_eq!(NdpRepr::parse(&p, LL_A, LL_B, false), Err(Error::Malformed));
        assert_eq!(NdpOption::parse(&[1, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        // The iterator stops there, even with options after it.
        let mut opts = [0u8; 24];
        NdpOption::Mtu(1280).emit(&mut opts).unwrap();
        opts[8] = 99;
        NdpOption::Mtu(9000).emit(&mut opts[16..]).unwrap();
        let got: Vec<_> = NdpOptionsIter::new(&opts).collect();
        assert_eq!(got, [Ok(NdpOption::Mtu(1280)), Err(Error::Malformed)]);
    }

    #[test]
    fn option_errors() {
        assert_eq!(NdpOption::parse(&[1]), Err(Error::Truncated));
        assert_eq!(NdpOption::parse(&[1, 2, 0, 0, 0, 0, 0, 0]), Err(Error::Truncated));
        // Link-layer address of another length (not Ethernet), MTU of 16 bytes.
        assert_eq!(NdpOption::parse(&[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(NdpOption::parse(&[5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(NdpOption::parse(&[3, 1, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        // Unknown options are skipped whatever their content.
        let (rest, o) = NdpOption::parse(&[200, 1, 1, 2, 3, 4, 5, 6, 0xee]).unwrap();
        assert_eq!((rest, o), (&[0xeeu8][..], NdpOption::Unknown { kind: 200, data: &[1, 2, 3, 4, 5, 6] }));
        let big = [0u8; 2040];
        assert_eq!(NdpOption::Unknown { kind: 200, data: &big }.emit(&mut [0u8; 4096]), Err(Error::Malformed));
        assert_eq!(NdpOption::Mtu(1).emit(&mut [0u8; 7]), Err(Error::Truncated));
    }

    #[test]
    fn redirect() {
        let mut quoted = [0u8; 48];
        quoted[0] = 0x60;
        let mut options = [0u8; 64];
        let n = NdpOption::RedirectedHeader(&quoted).buffer_len();
        assert_eq!(n, 56);
        let rest = NdpOption::RedirectedHeader(&quoted).emit(&mut options).unwrap();
        NdpOption::TargetLinkLayerAddr(MAC_A).emit(rest).unwrap();
        let dest = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);
        let r = NdpRepr::Redirect { target: LL_B, dest, options: &options };
        let b = emit(&r, ROUTER, LL_A);
        assert_eq!(b.len(), 104);
        assert_eq!(parse(&b, ROUTER, LL_A).unwrap(), r);
        let opts: Vec<_> = NdpOptionsIter::new(&options).collect();
        assert_eq!(opts, [Ok(NdpOption::RedirectedHeader(&quoted)), Ok(NdpOption::TargetLinkLayerAddr(MAC_A))]);
        let to_multicast = NdpRepr::Redirect { target: LL_B, dest: IPV6_ALL_NODES, options: &[] };
        let b = emit(&to_multicast, ROUTER, LL_A);
        assert_eq!(parse(&b, ROUTER, LL_A), Err(Error::Malformed));
        // The destination is on link: target and destination are the same global address.
        let on_link = NdpRepr::Redirect { target: dest, dest, options: &[] };
        let b = emit(&on_link, ROUTER, LL_A);
        assert_eq!(parse(&b, ROUTER, LL_A).unwrap(), on_link);
        // A global target other than the destination is not a router's (link-local) address.
        let other = NdpRepr::Redirect { target: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 8), dest, options: &[] };
        let b = emit(&other, ROUTER, LL_A);
        assert_eq!(parse(&b, ROUTER, LL_A), Err(Error::Malformed));
    }

    #[test]
    fn message_errors() {
        let b = emit(&NdpRepr::NeighborSolicit { target: LL_B, lladdr: None }, LL_A, LL_B);
        assert_eq!(parse(&b[..23], LL_A, LL_B), Err(Error::Truncated));
        let mut c = b.clone();
        c[1] = 1;
        let p = Icmpv6Packet::new_unchecked(&c[..]);
        assert_eq!(NdpRepr::parse(&p, LL_A, LL_B, false), Err(Error::Malformed));
        c[0] = 128;
        let p = Icmpv6Packet::new_unchecked(&c[..]);
        assert_eq!(NdpRepr::parse(&p, LL_A, LL_B, false), Err(Error::Unsupported));
        let r = NdpRepr::NeighborAdvert {
            router_flag: false,
            solicited_flag: false,
            override_flag: false,
            target: LL_A,
            lladdr: None,
        };
        assert_eq!(r.emit(&mut [0u8; 23], LL_A, LL_B), Err(Error::Truncated));
    }
}
