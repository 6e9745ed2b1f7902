//! The UDP header of a datagram sent over IPv6: its checksum, over the
//! IPv6 pseudo header, is mandatory, and one that computes to 0 is sent as
//! 0xffff (RFC 8200 8.1, RFC 768).

use core::net::Ipv6Addr;
use nagare_wire::{pseudo_header_v6, Checksum, IpProtocol, UDP_HEADER_LEN};

/// The UDP header from `(src, src_port)` to `(dst, dst_port)` over IPv6
/// for `payload_len` bytes of payload whose sum is `payload_sum`; `None`
/// when the length does not fit the header's field.
pub(super) fn udp6_header(
    (src, src_port): (Ipv6Addr, u16),
    (dst, dst_port): (Ipv6Addr, u16),
    payload_len: usize,
    payload_sum: Checksum,
) -> Option<[u8; UDP_HEADER_LEN]> {
    let length = u16::try_from(payload_len + UDP_HEADER_LEN).ok()?;
    let mut header = [0u8; UDP_HEADER_LEN];
    header[0..2].copy_from_slice(&src_port.to_be_bytes());
    header[2..4].copy_from_slice(&dst_port.to_be_bytes());
    header[4..6].copy_from_slice(&length.to_be_bytes());
    let mut sum = pseudo_header_v6(src, dst, IpProtocol::Udp.into(), u32::from(length));
    sum.add_bytes(&header);
    sum.add_checksum(payload_sum);
    let checksum = match sum.finish() {
        0 => 0xffff,
        c => c,
    };
    header[6..8].copy_from_slice(&checksum.to_be_bytes());
    Some(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The sum over pseudo header, UDP header and payload, folded: 0xffff
    /// when the checksum is right.
    fn verify(src: Ipv6Addr, dst: Ipv6Addr, header: &[u8; UDP_HEADER_LEN], payload: &[u8]) -> u16 {
        let len = (header.len() + payload.len()) as u32;
        let mut sum = pseudo_header_v6(src, dst, 17, len);
        sum.add_bytes(header);
        sum.add_bytes(payload);
        sum.folded()
    }

    #[test]
    fn the_header_carries_ports_length_and_a_checksum_that_verifies() {
        let (src, dst) = (ip("fe80::1"), ip("fe80::2"));
        let payload = b"hello over six";
        let mut sum = Checksum::default();
        sum.add_bytes(payload);
        let header = udp6_header((src, 4000), (dst, 53), payload.len(), sum).unwrap();
        assert_eq!(&header[..6], &[0x0f, 0xa0, 0, 53, 0, 22]);
        assert_eq!(verify(src, dst, &header, payload), 0xffff);
    }

    #[test]
    fn a_checksum_that_computes_to_zero_is_sent_as_ffff() {
        let (src, dst) = (ip("fd00::1"), ip("fd00::2"));
        // Two payload bytes chosen so that the whole sum folds to 0xffff,
        // whose complement is 0.
        let header0 = udp6_header((src, 1), (dst, 2), 2, Checksum::default()).unwrap();
        let mut partial = pseudo_header_v6(src, dst, 17, 10);
        partial.add_bytes(&[&header0[..6], &[0, 0]].concat());
        let word = !partial.folded();
        let payload = word.to_be_bytes();
        let mut sum = Checksum::default();
        sum.add_bytes(&payload);
        let header = udp6_header((src, 1), (dst, 2), 2, sum).unwrap();
        assert_eq!(&header[6..8], &[0xff, 0xff]);
        assert_eq!(verify(src, dst, &header, &payload), 0xffff);
    }

    #[test]
    fn a_payload_past_the_length_field_is_refused() {
        let (src, dst) = (ip("fd00::1"), ip("fd00::2"));
        assert!(udp6_header((src, 1), (dst, 2), 65535 - 8, Checksum::default()).is_some());
        assert!(udp6_header((src, 1), (dst, 2), 65535 - 7, Checksum::default()).is_none());
    }
}
