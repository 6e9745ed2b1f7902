//! IPv6 fragmentation on output (RFC 8200 4.5): each fragment refers to
//! its part of the payload's buffers, so only the headers (the IPv6
//! header and a fragment header) are new bytes. Nothing we send has an
//! unfragmentable extension header, so the whole payload is fragmentable.

use crate::buf::PacketBuf;
use alloc::vec::Vec;
use nagare_wire::{IpProtocol, Ipv6FragmentRepr, Ipv6Repr, IPV6_FRAGMENT_HEADER_LEN, IPV6_HEADER_LEN};

/// Largest fragment payload for `mtu`: what fits beside the IPv6 and
/// fragment headers, rounded down to the 8-byte unit of the offset field.
pub fn fragment_payload_size(mtu: usize) -> usize {
    mtu.saturating_sub(IPV6_HEADER_LEN + IPV6_FRAGMENT_HEADER_LEN) & !7
}

/// Splits `payload`, the payload of the packet with header `repr`, into
/// fragments for `mtu` with identification `ident`: each one's IPv6
/// header, fragment header and data. `None` when the MTU cannot carry an
/// 8-byte unit or the payload is past what offsets can reach.
pub fn fragment(
    repr: &Ipv6Repr,
    payload: &PacketBuf,
    mtu: usize,
    ident: u32,
) -> Option<Vec<(Ipv6Repr, Ipv6FragmentRepr, PacketBuf)>> {
    let unit = fragment_payload_size(mtu);
    if unit == 0 {
        return None;
    }
    let total = payload.len();
    let mut out = Vec::with_capacity(total.div_ceil(unit));
    let mut offset = 0;
    while offset < total {
        let len = unit.min(total - offset);
        let piece = payload.slice(offset, len)?;
        let header =
            Ipv6Repr { next_header: IpProtocol::Ipv6Frag, payload_len: IPV6_FRAGMENT_HEADER_LEN + len, ..*repr };
        let fragment = Ipv6FragmentRepr {
            next_header: repr.next_header,
            frag_offset: u16::try_from(offset).ok()?,
            more_frags: offset + len < total,
            ident,
        };
        out.push((header, fragment, piece));
        offset += len;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use core::net::Ipv6Addr;

    #[test]
    fn fragments_tile_the_payload_in_units_of_eight() {
        let pool = BufferPool::new(8192, 8);
        let data: Vec<u8> = (0..5008).map(|i| i as u8).collect();
        let payload = PacketBuf::from_slice(&pool, 0, &data).unwrap();
        let a = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        let b = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
        let repr = Ipv6Repr::new(a, b, IpProtocol::Icmpv6, data.len(), 64);
        let pieces = fragment(&repr, &payload, 1500, 77).unwrap();
        let shape: Vec<_> =
            pieces.iter().map(|(h, f, p)| (f.frag_offset, h.payload_len, p.len(), f.more_frags)).collect();
        assert_eq!(
            shape,
            [(0, 1456, 1448, true), (1448, 1456, 1448, true), (2896, 1456, 1448, true), (4344, 672, 664, false)]
        );
        for (h, f, _) in &pieces {
            assert_eq!((h.next_header, f.next_header, f.ident), (IpProtocol::Ipv6Frag, IpProtocol::Icmpv6, 77));
            assert_eq!((h.src_addr, h.dst_addr, h.hop_limit), (a, b, 64));
        }
        assert_eq!(pool.in_use(), 1, "fragments share the payload's buffer");
        let joined: Vec<u8> = pieces.iter().flat_map(|(_, _, p)| p.to_vec()).collect();
        assert_eq!(joined, data);
        assert!(fragment(&repr, &payload, 55, 1).is_none());
    }
}
