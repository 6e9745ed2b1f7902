//! IPv4 address with prefix length ("10.0.0.1/24").

use core::fmt;
use core::net::Ipv4Addr;
use core::str::FromStr;

use crate::error::{Error, Result};

/// An IPv4 interface address or network: an address plus a prefix length.
///
/// The host bits of `address` are kept as given, so the same type serves for
/// "my address on this subnet" and for plain networks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    address: Ipv4Addr,
    prefix_len: u8,
}

impl Ipv4Cidr {
    /// `Err(Malformed)` if `prefix_len > 32`.
    pub fn new(address: Ipv4Addr, prefix_len: u8) -> Result<Self> {
        if prefix_len > 32 {
            return Err(Error::Malformed);
        }
        Ok(Ipv4Cidr { address, prefix_len })
    }

    /// The address as given, host bits included.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// Number of leading network bits.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    fn mask_bits(&self) -> u32 {
        // checked_shl: a shift by 32 (prefix 0) would overflow.
        u32::MAX.checked_shl(32 - u32::from(self.prefix_len)).unwrap_or(0)
    }

    /// e.g. 255.255.255.0 for /24.
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.mask_bits())
    }

    /// The address with its host bits cleared.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.address.to_bits() & self.mask_bits())
    }

    /// Directed broadcast address; `None` for /31 (RFC 3021) and /32, which
    /// have none.
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        if self.prefix_len >= 31 {
            return None;
        }
        Some(Ipv4Addr::from(self.address.to_bits() | !self.mask_bits()))
    }

    /// Whether `addr` lies in this network.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        let m = self.mask_bits();
        addr.to_bits() & m == self.address.to_bits() & m
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = Error;

    /// Parses "a.b.c.d/p" with `p` in 0..=32 written in decimal.
    fn from_str(s: &str) -> Result<Self> {
        let (addr, prefix) = s.split_once('/').ok_or(Error::Malformed)?;
        let address = Ipv4Addr::from_str(addr).map_err(|_| Error::Malformed)?;
        // u8::from_str would also accept "+24"; only plain digits are valid.
        if prefix.is_empty() || prefix.len() > 2 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::Malformed);
        }
        let prefix_len = u8::from_str(prefix).map_err(|_| Error::Malformed)?;
        Ipv4Cidr::new(address, prefix_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn a(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn basics() {
        let c: Ipv4Cidr = "10.0.0.1/24".parse().unwrap();
        assert_eq!(c.address(), a("10.0.0.1"));
        assert_eq!(c.prefix_len(), 24);
        assert_eq!(c.netmask(), a("255.255.255.0"));
        assert_eq!(c.network(), a("10.0.0.0"));
        assert_eq!(c.broadcast(), Some(a("10.0.0.255")));
        assert!(c.contains(a("10.0.0.200")));
        assert!(!c.contains(a("10.0.1.1")));
        assert_eq!(c.to_string(), "10.0.0.1/24");
    }

    #[test]
    fn extremes() {
        let all = Ipv4Cidr::new(a("1.2.3.4"), 0).unwrap();
        assert_eq!(all.netmask(), a("0.0.0.0"));
        assert_eq!(all.network(), a("0.0.0.0"));
        assert_eq!(all.broadcast(), Some(a("255.255.255.255")));
        assert!(all.contains(a("200.1.1.1")));
        let host = Ipv4Cidr::new(a("1.2.3.4"), 32).unwrap();
        assert_eq!(host.netmask(), a("255.255.255.255"));
        assert_eq!(host.broadcast(), None);
        assert!(host.contains(a("1.2.3.4")));
        assert!(!host.contains(a("1.2.3.5")));
        let p2p = Ipv4Cidr::new(a("1.2.3.4"), 31).unwrap();
        assert_eq!(p2p.broadcast(), None);
        assert!(p2p.contains(a("1.2.3.5")));
        assert_eq!(Ipv4Cidr::new(a("1.2.3.4"), 33), Err(Error::Malformed));
        let odd = Ipv4Cidr::new(a("172.16.5.4"), 12).unwrap();
        assert_eq!(odd.netmask(), a("255.240.0.0"));
        assert_eq!(odd.network(), a("172.16.0.0"));
        assert_eq!(odd.broadcast(), Some(a("172.31.255.255")));
    }

    #[test]
    fn bad_strings() {
        for s in [
            "",
            "10.0.0.1",
            "10.0.0.1/",
            "10.0.0.1/33",
            "10.0.0.1/+4",
            "10.0.0/24",
            "10.0.0.1/2 4",
            "10.0.0.1/024",
            "/24",
            "10.0.0.1/24/1",
        ] {
            assert_eq!(s.parse::<Ipv4Cidr>(), Err(Error::Malformed), "{s:?}");
        }
    }
}
