//! Choosing the next hop for a destination.

use crate::config::Route;
use core::net::Ipv4Addr;
use nagare_wire::Ipv4Cidr;

/// Where a packet for a destination goes on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop {
    /// Delivered to this address on the link (resolved with ARP).
    Unicast(Ipv4Addr),
    /// Sent to every station on the link.
    Broadcast,
}

/// The next hop for `dst`: an attached network first, then the longest
/// matching route, then the default gateway.
pub fn next_hop(addresses: &[Ipv4Cidr], routes: &[Route], gateway: Option<Ipv4Addr>, dst: Ipv4Addr) -> Option<NextHop> {
    if dst.is_broadcast() || addresses.iter().any(|c| c.broadcast() == Some(dst)) {
        return Some(NextHop::Broadcast);
    }
    if addresses.iter().any(|c| c.contains(dst)) {
        return Some(NextHop::Unicast(dst));
    }
    let best = routes.iter().filter(|r| r.destination.contains(dst)).max_by_key(|r| r.destination.prefix_len());
    if let Some(route) = best {
        return Some(NextHop::Unicast(route.via));
    }
    gateway.map(NextHop::Unicast)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn attached_then_longest_route_then_gateway() {
        let addrs = [cidr("10.0.0.1/24")];
        let routes = [
            Route { destination: cidr("192.168.0.0/16"), via: Ipv4Addr::new(10, 0, 0, 5) },
            Route { destination: cidr("192.168.7.0/24"), via: Ipv4Addr::new(10, 0, 0, 6) },
        ];
        let gw = Some(Ipv4Addr::new(10, 0, 0, 254));
        let hop = |d| next_hop(&addrs, &routes, gw, d);
        assert_eq!(hop(Ipv4Addr::new(10, 0, 0, 9)), Some(NextHop::Unicast(Ipv4Addr::new(10, 0, 0, 9))));
        assert_eq!(hop(Ipv4Addr::new(10, 0, 0, 255)), Some(NextHop::Broadcast));
        assert_eq!(hop(Ipv4Addr::BROADCAST), Some(NextHop::Broadcast));
        assert_eq!(hop(Ipv4Addr::new(192, 168, 7, 1)), Some(NextHop::Unicast(Ipv4Addr::new(10, 0, 0, 6))));
        assert_eq!(hop(Ipv4Addr::new(192, 168, 8, 1)), Some(NextHop::Unicast(Ipv4Addr::new(10, 0, 0, 5))));
        assert_eq!(hop(Ipv4Addr::new(8, 8, 8, 8)), gw.map(NextHop::Unicast));
        assert_eq!(next_hop(&addrs, &[], None, Ipv4Addr::new(8, 8, 8, 8)), None);
    }
}
