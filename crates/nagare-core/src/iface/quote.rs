//! What an ICMPv6 error quotes of a packet we sent: its addresses and the
//! start of its transport header, past a fragment header if the packet
//! was one of our fragments. Read from bytes another node sent, so
//! nothing here trusts a length.

use super::read::be16;
use crate::buf::PacketBuf;
use core::net::Ipv6Addr;
use nagare_wire::{ICMPV6_HEADER_LEN, IPV6_HEADER_LEN};

/// The Fragment header's next-header value.
const NEXT_HEADER_FRAGMENT: u8 = 44;

/// The quoted packet of an ICMPv6 error.
pub(super) struct Quoted6 {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// The transport protocol (a fragment header skipped).
    pub next_header: u8,
    /// The first 8 bytes of the transport header, or fewer if the quote
    /// ends sooner.
    pub transport: [u8; 8],
    pub transport_len: usize,
    /// The quote is of a packet that holds the transport header: not a
    /// later fragment.
    pub first: bool,
}

impl Quoted6 {
    /// The quote in `message` (an ICMPv6 error: its header, then the
    /// packet), if it holds an IPv6 header.
    pub(super) fn read(message: &PacketBuf) -> Option<Quoted6> {
        let mut quote = [0u8; IPV6_HEADER_LEN + 8 + 8];
        let n = message.copy_out(ICMPV6_HEADER_LEN, &mut quote);
        let quote = quote.get(..n)?;
        if quote.first().is_none_or(|b| b >> 4 != 6) {
            return None;
        }
        let (src, dst) = (ipv6_at(quote, 8)?, ipv6_at(quote, 24)?);
        let mut next_header = *quote.get(6)?;
        let mut transport = quote.get(IPV6_HEADER_LEN..).unwrap_or(&[]);
        let mut first = true;
        if next_header == NEXT_HEADER_FRAGMENT {
            first = be16(transport, 2) & !7 == 0;
            next_header = transport.first().copied().unwrap_or(0);
            transport = transport.get(8..).unwrap_or(&[]);
        }
        let mut bytes = [0u8; 8];
        let transport_len = transport.len().min(8);
        bytes[..transport_len].copy_from_slice(&transport[..transport_len]);
        Some(Quoted6 { src, dst, next_header, transport: bytes, transport_len, first })
    }

    /// The quoted transport header's bytes.
    pub(super) fn transport(&self) -> &[u8] {
        &self.transport[..self.transport_len]
    }
}

fn ipv6_at(bytes: &[u8], at: usize) -> Option<Ipv6Addr> {
    let octets: [u8; 16] = bytes.get(at..at + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(octets))
}
