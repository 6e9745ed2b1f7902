//! Feed arbitrary bytes to every parser in nagare-wire, at every layer.
//! Any panic is a bug; parsed representations must also re-emit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_wire::*;

fn transports(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let _ = p.verify_checksum();
        let _ = Icmpv4EchoHeader::parse(&p);
        if let Ok(r) = Icmpv4Repr::parse(&p, false) {
            let mut out = vec![0u8; r.buffer_len()];
            let _ = r.emit(&mut out);
        }
    }
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = UdpRepr::parse(&p, src, dst, true);
        let r = UdpRepr::parse(&p, src, dst, false).expect("checked UDP parses");
        let mut out = vec![0u8; UDP_HEADER_LEN + p.payload().len()];
        r.emit(&mut out, p.payload(), src, dst).expect("re-emit UDP");
        assert!(UdpPacket::new_checked(&out[..]).unwrap().verify_checksum(src, dst));
    }
    if let Ok(p) = TcpPacket::new_checked(data) {
        for _ in p.options_iter() {}
        let _ = TcpRepr::parse(&p, src, dst, true);
        if let Ok(r) = TcpRepr::parse(&p, src, dst, false) {
            // Re-emitting needs the segment length to fit the pseudo header.
            if r.buffer_len() <= usize::from(u16::MAX) {
                let mut out = vec![0u8; r.buffer_len()];
                r.emit(&mut out, p.payload(), src, dst).expect("re-emit TCP");
                let q = TcpPacket::new_checked(&out[..]).expect("emitted TCP is valid");
                assert!(q.verify_checksum(src, dst));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // Raw checksum: pieces must sum like the whole.
    let mid = data.len() / 3;
    let mut c = Checksum::new();
    c.add_bytes(&data[..mid]);
    c.add_bytes(&data[mid..]);
    assert_eq!(c.finish(), checksum(data));

    // Options area alone.
    for _ in TcpOptionsIter::new(data) {}

    // As an Ethernet frame and as each layer on its own.
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = EthernetRepr::parse(&f);
        match f.ethertype() {
            EtherType::Arp => {
                if let Ok(p) = ArpPacket::new_checked(f.payload()) {
                    let _ = ArpRepr::parse(&p);
                }
            }
            EtherType::Ipv4 => {
                if let Ok(p) = Ipv4Packet::new_checked(f.payload()) {
                    let _ = Ipv4Repr::parse(&p, true);
                    transports(p.payload(), p.src_addr(), p.dst_addr());
                }
            }
            _ => {}
        }
    }
    if let Ok(p) = ArpPacket::new_checked(data) {
        let _ = ArpRepr::parse(&p);
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = Ipv4Repr::parse(&p, true);
        if let Ok(r) = Ipv4Repr::parse(&p, false) {
            let mut out = [0u8; IPV4_HEADER_LEN];
            r.emit(&mut out).expect("re-emit IPv4");
        }
        transports(p.payload(), p.src_addr(), p.dst_addr());
    }
    transports(data, Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(198, 51, 100, 7));

    if let Ok(s) = core::str::from_utf8(data) {
        let _ = s.parse::<Ipv4Cidr>();
        let _ = s.parse::<EthernetAddress>();
    }
});
