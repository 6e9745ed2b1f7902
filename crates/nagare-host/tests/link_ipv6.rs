//! A link's IPv6 addresses reach the engine: with them it speaks IPv6 (the
//! link-local address with a stable opaque interface identifier keyed by
//! the engine's secrets, then those given, each tentative until
//! duplicate address detection), or with an IPv6 gateway alone; without
//! either it does not. A link without an IPv4 address makes an engine
//! that speaks IPv6 only, its MAC made from its IPv6 address; a link with
//! no address at all is refused.

use nagare_core::ipv6::addr::AddrState;
use nagare_core::ipv6::iid::{IidGenerator, InterfaceIds};
use nagare_core::Interface;
use nagare_dev::Loopback;
use nagare_host::link::interface_on;
use nagare_host::{DeviceSpec, LinkSpec};
use std::net::Ipv6Addr;

const MAC: nagare_wire::EthernetAddress = nagare_wire::EthernetAddress([2, 0, 0, 0, 0, 1]);

/// The link-local address `iface` makes: a stable opaque identifier under
/// its secret key, never the MAC's EUI-64.
fn link_local(iface: &Interface) -> Ipv6Addr {
    let ids = IidGenerator::new(InterfaceIds::StableOpaque, iface.config().secrets.stable_iid, MAC);
    let (ll, _) = ids.generate(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 0).unwrap();
    assert_ne!(ll, "fe80::ff:fe00:1".parse::<Ipv6Addr>().unwrap());
    ll
}

fn link(ipv6: &[&str]) -> LinkSpec {
    LinkSpec {
        device: DeviceSpec::Tap { name: "unused".into(), offload: false },
        addr: Some("10.0.0.1/24".parse().unwrap()),
        ipv6: ipv6.iter().map(|a| a.parse().unwrap()).collect(),
        gateway: None,
        gateway6: None,
        mac: Some(MAC),
        impair: None,
        syn_budget: None,
    }
}

#[test]
fn ipv6_addresses_of_the_link_are_the_engines() {
    let device = Loopback::default();
    let iface = interface_on(&device, &link(&["fd00::2/64", "fd01::2/64"])).unwrap();
    let addrs: Vec<_> = iface.ipv6_addresses().map(|a| (a.cidr.to_string(), a.state)).collect();
    let ll = format!("{}/64", link_local(&iface));
    assert_eq!(
        addrs,
        [
            (ll, AddrState::Tentative),
            ("fd00::2/64".to_string(), AddrState::Tentative),
            ("fd01::2/64".to_string(), AddrState::Tentative)
        ]
    );
    assert!(iface.has_address("10.0.0.1".parse().unwrap()), "beside IPv4");
    let without = interface_on(&device, &link(&[])).unwrap();
    assert_eq!(without.ipv6_addresses().count(), 0);
    assert_eq!(without.ipv6_link_local(), None::<Ipv6Addr>);
}

#[test]
fn an_ipv6_gateway_alone_makes_the_engine_speak_ipv6_with_that_router() {
    let mut with_gateway = link(&[]);
    with_gateway.gateway6 = Some("fe80::1".parse().unwrap());
    let iface = interface_on(&Loopback::default(), &with_gateway).unwrap();
    assert_eq!(iface.ipv6_gateway(), with_gateway.gateway6);
    assert_eq!(iface.ipv6_link_local(), Some(link_local(&iface)));
    assert_eq!(iface.ipv6_next_hop("2001:db8::1".parse().unwrap()), with_gateway.gateway6);
}

#[test]
fn a_link_without_ipv4_makes_an_ipv6_only_engine() {
    let mut v6_only = link(&["fd00::2/64"]);
    v6_only.addr = None;
    v6_only.mac = None;
    assert_eq!(v6_only.mac().to_string(), "02:6e:00:00:00:02", "made from the IPv6 address");
    let iface = interface_on(&Loopback::default(), &v6_only).unwrap();
    assert!(!iface.speaks_ipv4());
    assert!(iface.config().addresses.is_empty());
    assert_eq!(iface.config().mac, v6_only.mac());
    let addrs: Vec<_> = iface.ipv6_addresses().map(|a| a.cidr.to_string()).collect();
    assert_eq!(addrs.len(), 2, "link-local and fd00::2: {addrs:?}");
    assert_eq!(addrs[1], "fd00::2/64");

    let mut dual = link(&["fd00::2/64"]);
    dual.mac = None;
    assert_eq!(dual.mac().to_string(), "02:6e:0a:00:00:01", "made from the IPv4 address");
    assert!(interface_on(&Loopback::default(), &dual).unwrap().speaks_ipv4());

    let mut none = link(&[]);
    none.addr = None;
    let Err(e) = interface_on(&Loopback::default(), &none) else { panic!("a link with no address was taken") };
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("needs an IPv4 or IPv6 address"), "{e}");
}
