//! ICMPv4 (RFC 792): echo and the two error messages a host needs.
//!
//! Headers can be emitted on their own, given a [`Checksum`] over the data,
//! so echo payloads can stay in a buffer chain.

use crate::checksum::{self, Checksum};
use crate::error::{Error, Result};
use crate::field;
use crate::ipv4::{Ipv4Repr, IPV4_HEADER_LEN};

/// Type, code, checksum and the 4-byte "rest of header".
pub const ICMPV4_HEADER_LEN: usize = 8;

mod offs {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const IDENT: usize = 4;
    pub const SEQ: usize = 6;
    pub const MTU: usize = 6;
}

/// ICMPv4 message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv4Message {
    /// 0
    EchoReply,
    /// 3
    DstUnreachable,
    /// 11
    TimeExceeded,
    /// 8
    EchoRequest,
    /// Anything else (never 0, 3, 8 or 11).
    Unknown(u8),
}

impl From<u8> for Icmpv4Message {
    fn from(v: u8) -> Self {
        match v {
            0 => Icmpv4Message::EchoReply,
            3 => Icmpv4Message::DstUnreachable,
            11 => Icmpv4Message::TimeExceeded,
            8 => Icmpv4Message::EchoRequest,
            other => Icmpv4Message::Unknown(other),
        }
    }
}

impl From<Icmpv4Message> for u8 {
    fn from(v: Icmpv4Message) -> Self {
        match v {
            Icmpv4Message::EchoReply => 0,
            Icmpv4Message::DstUnreachable => 3,
            Icmpv4Message::TimeExceeded => 11,
            Icmpv4Message::EchoRequest => 8,
            Icmpv4Message::Unknown(other) => other,
        }
    }
}

/// Destination Unreachable codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DstUnreachable {
    /// 0
    NetUnreachable,
    /// 1
    HostUnreachable,
    /// 2
    ProtoUnreachable,
    /// 3
    PortUnreachable,
    /// 4: fragmentation needed and DF set (next-hop MTU in bytes 6..8).
    FragRequired,
    /// Any other code (never 0..=4).
    Other(u8),
}

impl From<u8> for DstUnreachable {
    fn from(v: u8) -> Self {
        match v {
            0 => DstUnreachable::NetUnreachable,
            1 => DstUnreachable::HostUnreachable,
            2 => DstUnreachable::ProtoUnreachable,
            3 => DstUnreachable::PortUnreachable,
            4 => DstUnreachable::FragRequired,
            other => DstUnreachable::Other(other),
        }
    }
}

impl From<DstUnreachable> for u8 {
    fn from(v: DstUnreachable) -> Self {
        match v {
            DstUnreachable::NetUnreachable => 0,
            DstUnreachable::HostUnreachable => 1,
            DstUnreachable::ProtoUnreachable => 2,
            DstUnreachable::PortUnreachable => 3,
            DstUnreachable::FragRequired => 4,
            DstUnreachable::Other(other) => other,
        }
    }
}

/// A view of an ICMPv4 message; the buffer is the whole message (the IPv4
/// payload), since the checksum covers all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wrap, requiring the 8-byte header (`Err(Truncated)` otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < ICMPV4_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(field::u8_at(self.buffer.as_ref(), offs::TYPE))
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::CODE)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Echo identifier (echo messages only).
    pub fn echo_ident(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::IDENT)
    }

    /// Echo sequence number (echo messages only).
    pub fn echo_seq_no(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::SEQ)
    }

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191).
    pub fn next_hop_mtu(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::MTU)
    }

    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        self.buffer.as_ref().get(ICMPV4_HEADER_LEN..).unwrap_or(&[])
    }

    /// Whether the checksum over the whole buffer verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Set the message type.
    pub fn set_msg_type(&mut self, v: Icmpv4Message) {
        field::set_u8(self.buffer.as_mut(), offs::TYPE, v.into());
    }

    /// Set the message code.
    pub fn set_msg_code(&mut self, v: u8) {
        field::set_u8(self.buffer.as_mut(), offs::CODE, v);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::CHECKSUM, v);
    }

    /// Set the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::IDENT, v);
    }

    /// Set the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::SEQ, v);
    }

    /// Set the next-hop MTU (bytes 4..6 are left alone).
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::MTU, v);
    }

    /// Mutable bytes after the header.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut().get_mut(ICMPV4_HEADER_LEN..).unwrap_or(&mut [])
    }

    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed ICMPv4 message borrowing its data from the packet buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    /// Type 8.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo payload.
        data: &'a [u8],
    },
    /// Type 0.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo payload.
        data: &'a [u8],
    },
    /// Type 3.
    DstUnreachable {
        /// The code.
        reason: DstUnreachable,
        /// The quoted header of the offending packet.
        header: Ipv4Repr,
        /// Quoted bytes after that header: at least the first 8 bytes of its
        /// payload when emitting; on parse, everything that was quoted.
        data: &'a [u8],
    },
    /// Type 11.
    TimeExceeded {
        /// 0: TTL exceeded in transit, 1: reassembly time exceeded.
        code: u8,
        /// The quoted header of the offending packet.
        header: Ipv4Repr,
        /// Quoted bytes after that header.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parse a message; `Err(Checksum)` if `verify_checksum` and the
    /// checksum over the whole buffer is wrong, `Err(Unsupported)` for other
    /// message types.
    ///
    /// Echo codes are not checked. For error messages the quoted IPv4 header
    /// may carry options (skipped by IHL) and its `total_len` need not match
    /// the truncated quote; `header.payload_len` is taken from the quoted
    /// `total_len` (0 if it is smaller than the quoted header length).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &'a Icmpv4Packet<&'a T>, verify_checksum: bool) -> Result<Self> {
        let buf: &'a [u8] = <T as AsRef<[u8]>>::as_ref(packet.buffer);
        if buf.len() < ICMPV4_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if verify_checksum && !checksum::verify(buf) {
            return Err(Error::Checksum);
        }
        let data = buf.get(ICMPV4_HEADER_LEN..).unwrap_or(&[]);
        match packet.msg_type() {
            Icmpv4Message::EchoRequest => {
                Ok(Icmpv4Repr::EchoRequest { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data })
            }
            Icmpv4Message::EchoReply => {
                Ok(Icmpv4Repr::EchoReply { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data })
            }
            Icmpv4Message::DstUnreachable => {
                let (header, data) = Ipv4Repr::parse_quoted(data)?;
                Ok(Icmpv4Repr::DstUnreachable { reason: DstUnreachable::from(packet.msg_code()), header, data })
            }
            Icmpv4Message::TimeExceeded => {
                let (header, data) = Ipv4Repr::parse_quoted(data)?;
                Ok(Icmpv4Repr::TimeExceeded { code: packet.msg_code(), header, data })
            }
            Icmpv4Message::Unknown(_) => Err(Error::Unsupported),
        }
    }

    /// Bytes [`Icmpv4Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => ICMPV4_HEADER_LEN + data.len(),
            Icmpv4Repr::DstUnreachable { data, .. } | Icmpv4Repr::TimeExceeded { data, .. } => {
                ICMPV4_HEADER_LEN + IPV4_HEADER_LEN + data.len()
            }
        }
    }

    /// Write the whole message, checksum included, at the start of `buf`.
    ///
    /// `Err(Truncated)` if `buf` is shorter than [`Icmpv4Repr::buffer_len`];
    /// `Err(Malformed)` if a quoted header cannot be emitted.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let buf = buf.get_mut(..self.buffer_len()).ok_or(Error::Truncated)?;
        let (head, rest) = buf.split_at_mut(ICMPV4_HEADER_LEN);
        let mut p = Icmpv4Packet::new_unchecked(head);
        let data = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } | Icmpv4Repr::EchoReply { ident, seq_no, data } => {
                let ty = if matches!(self, Icmpv4Repr::EchoRequest { .. }) {
                    Icmpv4Message::EchoRequest
                } else {
                    Icmpv4Message::EchoReply
                };
                p.set_msg_type(ty);
                p.set_msg_code(0);
                p.set_echo_ident(ident);
                p.set_echo_seq_no(seq_no);
                data
            }
            Icmpv4Repr::DstUnreachable { reason, ref header, data } => {
                p.set_msg_type(Icmpv4Message::DstUnreachable);
                p.set_msg_code(reason.into());
                p.set_echo_ident(0);
                p.set_echo_seq_no(0);
                header.emit(rest)?;
                data
            }
            Icmpv4Repr::TimeExceeded { code, ref header, data } => {
                p.set_msg_type(Icmpv4Message::TimeExceeded);
                p.set_msg_code(code);
                p.set_echo_ident(0);
                p.set_echo_seq_no(0);
                header.emit(rest)?;
                data
            }
        };
        // `rest` has exactly room for the quoted header (if any) and `data`.
        let off = rest.len() - data.len();
        if let Some(d) = rest.get_mut(off..) {
            d.copy_from_slice(data);
        }
        let mut p = Icmpv4Packet::new_unchecked(buf);
        p.fill_checksum();
        Ok(())
    }
}

/// An echo request/reply header to be emitted in front of data held
/// elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Icmpv4EchoHeader {
    /// Reply (type 0) rather than request (type 8).
    pub reply: bool,
    /// Identifier.
    pub ident: u16,
    /// Sequence number.
    pub seq_no: u16,
}

impl Icmpv4EchoHeader {
    /// Read the echo header of a packet; `Err(Unsupported)` if it is not an
    /// echo message. The checksum is not checked here.
    pub fn parse<T: AsRef<[u8]>>(packet: &Icmpv4Packet<T>) -> Result<Self> {
        if packet.buffer.as_ref().len() < ICMPV4_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let reply = match packet.msg_type() {
            Icmpv4Message::EchoReply => true,
            Icmpv4Message::EchoRequest => false,
            _ => return Err(Error::Unsupported),
        };
        Ok(Icmpv4EchoHeader { reply, ident: packet.echo_ident(), seq_no: packet.echo_seq_no() })
    }

    /// Write the 8-byte header at the start of `header`, with the checksum
    /// over the header plus `data_checksum` (a [`Checksum`] over the data
    /// that follows it). `Err(Truncated)` if `header` is shorter than 8.
    pub fn emit(&self, header: &mut [u8], data_checksum: Checksum) -> Result<()> {
        let h = header.first_chunk_mut::<ICMPV4_HEADER_LEN>().ok_or(Error::Truncated)?;
        let mut p = Icmpv4Packet::new_unchecked(&mut h[..]);
        p.set_msg_type(if self.reply { Icmpv4Message::EchoReply } else { Icmpv4Message::EchoRequest });
        p.set_msg_code(0);
        p.set_checksum(0);
        p.set_echo_ident(self.ident);
        p.set_echo_seq_no(self.seq_no);
        let mut c = Checksum::new();
        c.add_bytes(&h[..]);
        c.add_checksum(data_checksum);
        let mut p = Icmpv4Packet::new_unchecked(&mut h[..]);
        p.set_checksum(c.finish());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::IpProtocol;
    use core::net::Ipv4Addr;

    /// ICMP part of `ping -s 16 127.0.0.1` captured on Linux `lo`;
    /// checksum 0xedde (confirmed by tshark).
    const ECHO: [u8; 24] = [
        0x08, 0x00, 0xed, 0xde, 0x0e, 0xfc, 0x00, 0x01, 0x75, 0x50, 0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0x7e, 0x68,
        0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    /// Port unreachable generated by the Linux kernel for a UDP datagram
    /// to 127.0.0.1:9, quoting the whole datagram; checksum 0xcb37.
    const PORT_UNREACH: [u8; 42] = [
        0x03, 0x03, 0xcb, 0x37, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x22, 0x74, 0x61, 0x40, 0x00, 0x40, 0x11,
        0xc8, 0x67, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x01, 0xeb, 0x63, 0x00, 0x09, 0x00, 0x0e, 0xfe, 0x21,
        0x6e, 0x61, 0x67, 0x61, 0x72, 0x65,
    ];

    #[test]
    fn parse_captured_echo() {
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.msg_type(), Icmpv4Message::EchoRequest);
        let r = Icmpv4Repr::parse(&p, true).unwrap();
        assert_eq!(r, Icmpv4Repr::EchoRequest { ident: 0x0efc, seq_no: 1, data: &ECHO[8..] });
        let mut out = [0u8; 24];
        r.emit(&mut out).unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn echo_header_with_split_data() {
        let h = Icmpv4EchoHeader { reply: false, ident: 0x0efc, seq_no: 1 };
        let mut c = Checksum::new();
        // Data summed in odd-length pieces, as from a buffer chain.
        c.add_bytes(&ECHO[8..11]);
        c.add_bytes(&ECHO[11..24]);
        let mut out = [0u8; 8];
        h.emit(&mut out, c).unwrap();
        assert_eq!(out, ECHO[..8]);
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(Icmpv4EchoHeader::parse(&p).unwrap(), h);
        assert_eq!(h.emit(&mut [0u8; 7], c), Err(Error::Truncated));
    }

    #[test]
    fn bad_checksum() {
        let mut b = ECHO;
        b[20] ^= 0x40;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, true), Err(Error::Checksum));
        assert!(Icmpv4Repr::parse(&p, false).is_ok());
    }

    fn quoted() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::LOCALHOST,
            dst_addr: Ipv4Addr::LOCALHOST,
            protocol: IpProtocol::Udp,
            payload_len: 14,
            ttl: 64,
            ident: 0x7461,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            dscp_ecn: 0,
        }
    }

    #[test]
    fn parse_captured_port_unreachable() {
        let p = Icmpv4Packet::new_checked(&PORT_UNREACH[..]).unwrap();
        let r = Icmpv4Repr::parse(&p, true).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::DstUnreachable {
                reason: DstUnreachable::PortUnreachable,
                header: quoted(),
                data: &PORT_UNREACH[28..],
            }
        );
        let mut out = [0u8; 42];
        r.emit(&mut out).unwrap();
        assert_eq!(out, PORT_UNREACH);
    }

    #[test]
    fn quote_with_options_and_short_total_len() {
        // Quoted header with IHL 6 (one 4-byte option) whose total_len says
        // 1000 although only 8 payload bytes were quoted.
        let mut msg = [0u8; 8 + 24 + 8];
        msg[0] = 11;
        msg[8] = 0x46;
        msg[10..12].copy_from_slice(&1000u16.to_be_bytes());
        msg[16] = 1; // ttl
        msg[17] = 6;
        msg[32..40].copy_from_slice(b"tcphead!");
        let mut p = Icmpv4Packet::new_checked(&mut msg[..]).unwrap();
        p.fill_checksum();
        let p = Icmpv4Packet::new_checked(&msg[..]).unwrap();
        match Icmpv4Repr::parse(&p, true).unwrap() {
            Icmpv4Repr::TimeExceeded { code: 0, header, data } => {
                assert_eq!(header.payload_len, 1000 - 24);
                assert_eq!(header.protocol, IpProtocol::Tcp);
                assert_eq!(data, b"tcphead!");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_quotes() {
        let mut msg = [0u8; 8 + 19];
        msg[0] = 3;
        msg[8] = 0x45;
        let p = Icmpv4Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, false), Err(Error::Truncated));
        let mut msg = [0u8; 8 + 20];
        msg[0] = 3;
        msg[8] = 0x65;
        let p = Icmpv4Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, false), Err(Error::Malformed));
        msg[8] = 0x46; // IHL says 24 but only 20 quoted
        let p = Icmpv4Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, false), Err(Error::Truncated));
        msg[0] = 13; // timestamp request
        let p = Icmpv4Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, false), Err(Error::Unsupported));
        assert_eq!(Icmpv4Packet::new_checked(&msg[..7]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn emit_errors() {
        let r = Icmpv4Repr::EchoReply { ident: 1, seq_no: 2, data: b"abc" };
        assert_eq!(r.buffer_len(), 11);
        assert_eq!(r.emit(&mut [0u8; 10]), Err(Error::Truncated));
        let mut bad = quoted();
        bad.frag_offset = 3;
        let r = Icmpv4Repr::TimeExceeded { code: 0, header: bad, data: &[] };
        assert_eq!(r.emit(&mut [0u8; 64]), Err(Error::Malformed));
    }

    #[test]
    fn codes() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(DstUnreachable::from(v)), v);
            assert_eq!(u8::from(Icmpv4Message::from(v)), v);
        }
    }
}
