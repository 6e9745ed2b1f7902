//! The interface identifiers of the addresses an interface makes itself
//! (its link-local address, those formed from routers' prefixes): stable
//! and opaque by default (RFC 7217), or the modified EUI-64 of the MAC.
//!
//! A stable opaque identifier is a keyed hash (SipHash-2-4 under
//! [`Secrets::stable_iid`](crate::Secrets::stable_iid)) of the prefix, the
//! interface (its MAC, the "Net_Iface" of RFC 7217 section 5; no
//! Network_ID is used) and a DAD counter: the same in the same prefix
//! while the key stays, different in every other prefix, and telling
//! nothing of the MAC, so that a host cannot be followed from network to
//! network. When duplicate address detection finds the address taken, the
//! next counter gives another ([`IDGEN_RETRIES`] times at most). An
//! identifier RFC 5453 reserves is skipped the same way.

use crate::hash::{siphash, SipKey};
use core::net::Ipv6Addr;
use nagare_wire::EthernetAddress;

/// Further identifiers tried after duplicate address detection finds one
/// taken (RFC 7217 section 6's IDGEN_RETRIES).
pub const IDGEN_RETRIES: u8 = 3;

/// How an interface makes the interface identifiers of its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterfaceIds {
    /// Stable opaque identifiers (RFC 7217), retried with the next DAD
    /// counter when found duplicate.
    #[default]
    StableOpaque,
    /// The modified EUI-64 of the MAC (RFC 4291 appendix A): the same in
    /// every prefix, and never retried.
    Eui64,
}

/// Makes the addresses of an interface in a 64-bit prefix.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IidGenerator {
    scheme: InterfaceIds,
    key: SipKey,
    mac: EthernetAddress,
}

/// Shows the scheme and the MAC, never the key.
impl core::fmt::Debug for IidGenerator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IidGenerator").field("scheme", &self.scheme).field("mac", &self.mac).finish_non_exhaustive()
    }
}

impl IidGenerator {
    /// Identifiers by `scheme` for the interface with `mac`, keyed with
    /// `key` when stable and opaque.
    pub fn new(scheme: InterfaceIds, key: SipKey, mac: EthernetAddress) -> Self {
        IidGenerator { scheme, key, mac }
    }

    /// How it makes them.
    pub fn scheme(&self) -> InterfaceIds {
        self.scheme
    }

    /// The first address in `prefix` (its first 64 bits) at a DAD counter
    /// from `from` to [`IDGEN_RETRIES`], with that counter: `None` when
    /// none is left (an EUI-64 identifier has one, at counter 0).
    pub fn generate(&self, prefix: Ipv6Addr, from: u8) -> Option<(Ipv6Addr, u8)> {
        let last = match self.scheme {
            InterfaceIds::StableOpaque => IDGEN_RETRIES,
            InterfaceIds::Eui64 => 0,
        };
        (from..=last).find_map(|counter| {
            let iid = match self.scheme {
                InterfaceIds::StableOpaque => self.stable_iid(prefix, counter),
                InterfaceIds::Eui64 => eui64(self.mac),
            };
            let net = u128::from(prefix) & !u128::from(u64::MAX);
            (!is_reserved(iid)).then(|| (Ipv6Addr::from(net | u128::from(iid)), counter))
        })
    }

    /// RFC 7217's F(Prefix, Net_Iface, Network_ID, DAD_Counter,
    /// secret_key), Network_ID left out: SipHash's 64 bits are the
    /// identifier.
    fn stable_iid(&self, prefix: Ipv6Addr, counter: u8) -> u64 {
        let mut input = [0u8; 15];
        let (net, rest) = input.split_at_mut(8);
        net.copy_from_slice(&prefix.octets()[..8]);
        let (iface, dad) = rest.split_at_mut(6);
        iface.copy_from_slice(&self.mac.0);
        dad[0] = counter;
        siphash(self.key, &input)
    }
}

/// The modified EUI-64 interface identifier of `mac` (RFC 4291 appendix
/// A, RFC 2464 section 4): ff:fe in the middle, the universal/local bit
/// inverted.
pub fn eui64(mac: EthernetAddress) -> u64 {
    let m = mac.0;
    u64::from_be_bytes([m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
}

/// Whether RFC 5453 reserves `iid`: the subnet-router anycast identifier
/// (zero), 0200:5eff:fe00:0 to 0200:5eff:feff:ffff, and the subnet
/// anycast identifiers fdff:ffff:ffff:ff80 to fdff:ffff:ffff:ffff.
pub fn is_reserved(iid: u64) -> bool {
    iid == 0
        || (0x0200_5eff_fe00_0000..=0x0200_5eff_feff_ffff).contains(&iid)
        || (0xfdff_ffff_ffff_ff80..=0xfdff_ffff_ffff_ffff).contains(&iid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x20, 0x30]);

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn iid(a: Ipv6Addr) -> u64 {
        u128::from(a) as u64
    }

    #[test]
    fn eui64_joins_the_prefix_and_the_mac_and_has_no_retry() {
        let g = IidGenerator::new(InterfaceIds::Eui64, SipKey::from_seed(1), MAC);
        assert_eq!(g.generate(ip("2001:db8:1:2:ffff::"), 0), Some((ip("2001:db8:1:2:0:5eff:fe10:2030"), 0)));
        assert_eq!(g.generate(ip("fe80::"), 0), Some((ip("fe80::5eff:fe10:2030"), 0)));
        assert_eq!(g.generate(ip("fe80::"), 1), None);
    }

    #[test]
    fn a_stable_identifier_is_stable_per_prefix_and_key_and_opaque() {
        let key = SipKey::from_seed(7);
        let g = IidGenerator::new(InterfaceIds::StableOpaque, key, MAC);
        let (a, counter) = g.generate(ip("2001:db8:1:2::"), 0).unwrap();
        assert_eq!(counter, 0);
        assert_eq!(u128::from(a) >> 64, u128::from(ip("2001:db8:1:2::")) >> 64, "in the prefix");
        assert_eq!(g.generate(ip("2001:db8:1:2:ffff::"), 0), Some((a, 0)), "the prefix's first 64 bits only");
        assert_eq!(
            IidGenerator::new(InterfaceIds::StableOpaque, key, MAC).generate(ip("2001:db8:1:2::"), 0),
            Some((a, 0))
        );
        assert_ne!(iid(a), eui64(MAC), "nothing of the MAC shows");
        // Another prefix, key, interface or counter: another identifier.
        let other = |g: IidGenerator, prefix: &str, counter: u8| iid(g.generate(ip(prefix), counter).unwrap().0);
        assert_ne!(other(g, "2001:db8:1:3::", 0), iid(a));
        let rekeyed = IidGenerator::new(InterfaceIds::StableOpaque, SipKey::from_seed(8), MAC);
        assert_ne!(other(rekeyed, "2001:db8:1:2::", 0), iid(a));
        let other_mac = IidGenerator::new(InterfaceIds::StableOpaque, key, EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert_ne!(other(other_mac, "2001:db8:1:2::", 0), iid(a));
        let retried = g.generate(ip("2001:db8:1:2::"), 1).unwrap();
        assert_eq!(retried.1, 1);
        assert_ne!(iid(retried.0), iid(a));
        assert!(g.generate(ip("2001:db8:1:2::"), IDGEN_RETRIES).is_some());
        assert_eq!(g.generate(ip("2001:db8:1:2::"), IDGEN_RETRIES + 1), None, "the retries are bounded");
    }

    #[test]
    fn reserved_identifiers_are_known() {
        assert!(is_reserved(0));
        assert!(is_reserved(0x0200_5eff_fe00_5213));
        assert!(
            is_reserved(0xfdff_ffff_ffff_ff80)
                && is_reserved(u64::from_be_bytes([0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))
        );
        assert!(!is_reserved(0xfdff_ffff_ffff_ff7f));
        assert!(!is_reserved(eui64(MAC)));
    }
}
