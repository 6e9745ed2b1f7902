//! IPv4 fragmentation on output: each fragment refers to its part of the
//! payload's buffers, so only the headers are new bytes.

use crate::buf::PacketBuf;
use nagare_wire::{Ipv4Repr, IPV4_HEADER_LEN};

/// Largest fragment payload for `mtu`: what fits beside a 20-byte header,
/// rounded down to the 8-byte unit of the fragment offset field.
pub fn fragment_payload_size(mtu: usize) -> usize {
    mtu.saturating_sub(IPV4_HEADER_LEN) & !7
}

/// Splits `payload` into fragments for `mtu`. Returns `None` when the
/// MTU cannot carry even one 8-byte unit.
pub fn fragment(repr: &Ipv4Repr, payload: &PacketBuf, mtu: usize) -> Option<alloc::vec::Vec<(Ipv4Repr, PacketBuf)>> {
    let unit = fragment_payload_size(mtu);
    if unit == 0 {
        return None;
    }
    let total = payload.len();
    let mut out = alloc::vec::Vec::with_capacity(total.div_ceil(unit));
    let mut offset = 0;
    while offset < total {
        let len = unit.min(total - offset);
        let piece = payload.slice(offset, len)?;
        let fragment = Ipv4Repr {
            payload_len: len,
            more_frags: offset + len < total || repr.more_frags,
            frag_offset: u16::try_from(usize::from(repr.frag_offset) + offset).ok()?,
            ..*repr
        };
        out.push((fragment, piece));
        offset += len;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use core::net::Ipv4Addr;
    use nagare_wire::IpProtocol;

    #[test]
    fn fragments_tile_the_payload_in_units_of_eight() {
        let pool = BufferPool::new(8192, 8);
        let data: alloc::vec::Vec<u8> = (0..5008).map(|i| i as u8).collect();
        let payload = PacketBuf::from_slice(&pool, 0, &data).unwrap();
        let repr = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: data.len(),
            ttl: 64,
            ident: 1,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            dscp_ecn: 0,
        };
        let pieces = fragment(&repr, &payload, 1500).unwrap();
        let lens: alloc::vec::Vec<_> =
            pieces.iter().map(|(r, p)| (r.frag_offset, r.payload_len, p.len(), r.more_frags)).collect();
        assert_eq!(
            lens,
            [(0, 1480, 1480, true), (1480, 1480, 1480, true), (2960, 1480, 1480, true), (4440, 568, 568, false)]
        );
        assert_eq!(pool.in_use(), 1, "fragments share the payload's buffer");
        let mut joined = alloc::vec::Vec::new();
        for (_, p) in &pieces {
            joined.extend(p.to_vec());
        }
        assert_eq!(joined, data);
        assert!(fragment(&repr, &payload, 27).is_none());
    }
}
