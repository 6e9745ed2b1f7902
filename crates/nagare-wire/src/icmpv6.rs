//! ICMPv6 (RFC 4443): echo and the four error messages.
//!
//! The checksum covers the IPv6 pseudo header ([`pseudo_header_v6`]), so
//! verifying and filling it take the source and destination addresses.
//! Neighbour discovery ([`crate::ndp`]) and MLD ([`crate::mld`]) messages
//! share this view and checksum; [`Icmpv6Repr::parse`] answers
//! `Err(Unsupported)` for them.

use core::net::Ipv6Addr;

use crate::checksum::{pseudo_header_v6, Checksum};
use crate::error::{Error, Result};
use crate::field;
use crate::ipv6::{Ipv6Repr, IPV6_HEADER_LEN, IPV6_MIN_MTU};
use crate::ipv6ext::{Ipv6ExtError, Ipv6OptionAction};

/// Type, code, checksum and the 4-byte message body that every message has.
pub const ICMPV6_HEADER_LEN: usize = 8;
/// Longest error message: the invoking packet is quoted only so far that
/// the IPv6 packet carrying the error fits the minimum MTU (RFC 4443
/// section 2.4 (c)).
pub const ICMPV6_ERROR_MAX_LEN: usize = IPV6_MIN_MTU - IPV6_HEADER_LEN;

const PROTO_ICMPV6: u8 = 58;

mod offs {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const IDENT: usize = 4;
    pub const SEQ: usize = 6;
    pub const MTU: usize = 4;
    pub const POINTER: usize = 4;
}

/// ICMPv6 message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv6Message {
    /// 1
    DstUnreachable,
    /// 2
    PacketTooBig,
    /// 3
    TimeExceeded,
    /// 4
    ParamProblem,
    /// 128
    EchoRequest,
    /// 129
    EchoReply,
    /// 130: multicast listener query (MLDv1 and MLDv2).
    MldQuery,
    /// 131: MLDv1 report.
    MldReport,
    /// 132: MLDv1 done.
    MldDone,
    /// 133
    RouterSolicit,
    /// 134
    RouterAdvert,
    /// 135
    NeighborSolicit,
    /// 136
    NeighborAdvert,
    /// 137
    Redirect,
    /// 143: MLDv2 listener report (RFC 3810).
    MldV2Report,
    /// Anything else (never one of the values above).
    Unknown(u8),
}

impl Icmpv6Message {
    /// Error messages have types 0 to 127 (RFC 4443 section 2.1); no error
    /// is ever sent about one.
    pub fn is_error(self) -> bool {
        u8::from(self) < 128
    }
}

impl From<u8> for Icmpv6Message {
    fn from(v: u8) -> Self {
        match v {
            1 => Icmpv6Message::DstUnreachable,
            2 => Icmpv6Message::PacketTooBig,
            3 => Icmpv6Message::TimeExceeded,
            4 => Icmpv6Message::ParamProblem,
            128 => Icmpv6Message::EchoRequest,
            129 => Icmpv6Message::EchoReply,
            130 => Icmpv6Message::MldQuery,
            131 => Icmpv6Message::MldReport,
            132 => Icmpv6Message::MldDone,
            133 => Icmpv6Message::RouterSolicit,
            134 => Icmpv6Message::RouterAdvert,
            135 => Icmpv6Message::NeighborSolicit,
            136 => Icmpv6Message::NeighborAdvert,
            137 => Icmpv6Message::Redirect,
            143 => Icmpv6Message::MldV2Report,
            other => Icmpv6Message::Unknown(other),
        }
    }
}

impl From<Icmpv6Message> for u8 {
    fn from(v: Icmpv6Message) -> Self {
        match v {
            Icmpv6Message::DstUnreachable => 1,
            Icmpv6Message::PacketTooBig => 2,
            Icmpv6Message::TimeExceeded => 3,
            Icmpv6Message::ParamProblem => 4,
            Icmpv6Message::EchoRequest => 128,
            Icmpv6Message::EchoReply => 129,
            Icmpv6Message::MldQuery => 130,
            Icmpv6Message::MldReport => 131,
            Icmpv6Message::MldDone => 132,
            Icmpv6Message::RouterSolicit => 133,
            Icmpv6Message::RouterAdvert => 134,
            Icmpv6Message::NeighborSolicit => 135,
            Icmpv6Message::NeighborAdvert => 136,
            Icmpv6Message::Redirect => 137,
            Icmpv6Message::MldV2Report => 143,
            Icmpv6Message::Unknown(other) => other,
        }
    }
}

/// Destination Unreachable codes (RFC 4443 section 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv6DstUnreachable {
    /// 0
    NoRoute,
    /// 1: communication administratively prohibited.
    AdminProhibited,
    /// 2: beyond the scope of the source address.
    BeyondScope,
    /// 3
    AddrUnreachable,
    /// 4
    PortUnreachable,
    /// 5: source address failed ingress/egress policy.
    FailedPolicy,
    /// 6: reject route to destination.
    RejectRoute,
    /// Any other code (never 0..=6).
    Other(u8),
}

impl From<u8> for Icmpv6DstUnreachable {
    fn from(v: u8) -> Self {
        match v {
            0 => Icmpv6DstUnreachable::NoRoute,
            1 => Icmpv6DstUnreachable::AdminProhibited,
            2 => Icmpv6DstUnreachable::BeyondScope,
            3 => Icmpv6DstUnreachable::AddrUnreachable,
            4 => Icmpv6DstUnreachable::PortUnreachable,
            5 => Icmpv6DstUnreachable::FailedPolicy,
            6 => Icmpv6DstUnreachable::RejectRoute,
            other => Icmpv6DstUnreachable::Other(other),
        }
    }
}

impl From<Icmpv6DstUnreachable> for u8 {
    fn from(v: Icmpv6DstUnreachable) -> Self {
        match v {
            Icmpv6DstUnreachable::NoRoute => 0,
            Icmpv6DstUnreachable::AdminProhibited => 1,
            Icmpv6DstUnreachable::BeyondScope => 2,
            Icmpv6DstUnreachable::AddrUnreachable => 3,
            Icmpv6DstUnreachable::PortUnreachable => 4,
            Icmpv6DstUnreachable::FailedPolicy => 5,
            Icmpv6DstUnreachable::RejectRoute => 6,
            Icmpv6DstUnreachable::Other(other) => other,
        }
    }
}

/// Parameter Problem codes (RFC 4443 section 3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv6ParamProblem {
    /// 0: erroneous header field encountered.
    ErroneousHeaderField,
    /// 1: unrecognised Next Header type.
    UnrecognizedNextHeader,
    /// 2: unrecognised IPv6 option.
    UnrecognizedOption,
    /// Any other code (never 0..=2).
    Other(u8),
}

impl Icmpv6ParamProblem {
    /// The Parameter Problem an extension header refusal calls for, with
    /// its pointer; `None` where the packet is dropped silently (truncated,
    /// over the walk's limits, a malformed option, or an unknown option
    /// whose action is plain discard).
    ///
    /// For [`Ipv6OptionAction::DiscardAndIcmpUnlessMulticast`] the caller still
    /// checks the destination: no error goes back for a multicast one.
    pub fn for_ext_error(e: &Ipv6ExtError) -> Option<(Self, u32)> {
        match *e {
            Ipv6ExtError::HopByHopNotFirst { pointer } => Some((Icmpv6ParamProblem::UnrecognizedNextHeader, pointer)),
            Ipv6ExtError::UnknownOption { action, pointer, .. } => match action {
                Ipv6OptionAction::DiscardAndIcmp | Ipv6OptionAction::DiscardAndIcmpUnlessMulticast => {
                    Some((Icmpv6ParamProblem::UnrecognizedOption, pointer))
                }
                Ipv6OptionAction::Skip | Ipv6OptionAction::Discard => None,
            },
            Ipv6ExtError::RoutingType0 { pointer } | Ipv6ExtError::UnknownRoutingType { pointer, .. } => {
                Some((Icmpv6ParamProblem::ErroneousHeaderField, pointer))
            }
            Ipv6ExtError::Truncated
            | Ipv6ExtError::TooManyHeaders
            | Ipv6ExtError::TooLong
            | Ipv6ExtError::BadOption { .. } => None,
        }
    }
}

impl From<u8> for Icmpv6ParamProblem {
    fn from(v: u8) -> Self {
        match v {
            0 => Icmpv6ParamProblem::ErroneousHeaderField,
            1 => Icmpv6ParamProblem::UnrecognizedNextHeader,
            2 => Icmpv6ParamProblem::UnrecognizedOption,
            other => Icmpv6ParamProblem::Other(other),
        }
    }
}

impl From<Icmpv6ParamProblem> for u8 {
    fn from(v: Icmpv6ParamProblem) -> Self {
        match v {
            Icmpv6ParamProblem::ErroneousHeaderField => 0,
            Icmpv6ParamProblem::UnrecognizedNextHeader => 1,
            Icmpv6ParamProblem::UnrecognizedOption => 2,
            Icmpv6ParamProblem::Other(other) => other,
        }
    }
}

/// Sum of pseudo header and message; `None` if the message is longer than
/// the 32-bit length field.
fn message_sum(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> Option<Checksum> {
    let len = u32::try_from(message.len()).ok()?;
    let mut c = pseudo_header_v6(src, dst, PROTO_ICMPV6, len);
    c.add_bytes(message);
    Some(c)
}

/// A view of an ICMPv6 message; the buffer is the whole message (the
/// upper-layer part of the IPv6 payload), since the checksum covers all of
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wrap, requiring the 8-byte header (`Err(Truncated)` otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < ICMPV6_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message::from(field::u8_at(self.buffer.as_ref(), offs::TYPE))
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

    /// MTU of a Packet Too Big message.
    pub fn mtu(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), offs::MTU)
    }

    /// Pointer of a Parameter Problem message.
    pub fn pointer(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), offs::POINTER)
    }

    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        self.buffer.as_ref().get(ICMPV6_HEADER_LEN..).unwrap_or(&[])
    }

    /// Whether the checksum over pseudo header and the whole buffer
    /// verifies.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        message_sum(src, dst, self.buffer.as_ref()).is_some_and(|c| c.folded() == 0xffff)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Set the message type.
    pub fn set_msg_type(&mut self, v: Icmpv6Message) {
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

    /// Set the MTU of a Packet Too Big message.
    pub fn set_mtu(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), offs::MTU, v);
    }

    /// Set the pointer of a Parameter Problem message.
    pub fn set_pointer(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), offs::POINTER, v);
    }

    /// Mutable bytes after the header.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut().get_mut(ICMPV6_HEADER_LEN..).unwrap_or(&mut [])
    }

    /// Compute and store the checksum over pseudo header and the whole
    /// buffer.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        if let Some(c) = message_sum(src, dst, self.buffer.as_ref()) {
            self.set_checksum(c.finish());
        }
    }
}

/// A parsed ICMPv6 echo or error message borrowing its data from the
/// packet buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv6Repr<'a> {
    /// Type 128.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo payload.
        data: &'a [u8],
    },
    /// Type 129.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo payload.
        data: &'a [u8],
    },
    /// Type 1.
    DstUnreachable {
        /// The code.
        reason: Icmpv6DstUnreachable,
        /// The quoted header of the offending packet.
        header: Ipv6Repr,
        /// Quoted bytes after that header.
        data: &'a [u8],
    },
    /// Type 2.
    PacketTooBig {
        /// The MTU of the next-hop link.
        mtu: u32,
        /// The quoted header of the offending packet.
        header: Ipv6Repr,
        /// Quoted bytes after that header.
        data: &'a [u8],
    },
    /// Type 3.
    TimeExceeded {
        /// 0: hop limit exceeded in transit, 1: reassembly time exceeded.
        code: u8,
        /// The quoted header of the offending packet.
        header: Ipv6Repr,
        /// Quoted bytes after that header.
        data: &'a [u8],
    },
    /// Type 4.
    ParamProblem {
        /// The code.
        reason: Icmpv6ParamProblem,
        /// Offset in the offending packet, from the start of its IPv6
        /// header, of the byte found wrong.
        pointer: u32,
        /// The quoted header of the offending packet.
        header: Ipv6Repr,
        /// Quoted bytes after that header.
        data: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parse a message; `Err(Checksum)` if `verify_checksum` and the
    /// checksum over pseudo header and buffer is wrong, `Err(Unsupported)`
    /// for other message types (neighbour discovery and MLD included).
    ///
    /// Echo codes are not checked. For error messages the quoted IPv6
    /// header must be whole (40 bytes, version 6); its `payload_len` need
    /// not match the truncated quote and is reported as quoted.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        let buf: &'a [u8] = <T as AsRef<[u8]>>::as_ref(packet.buffer);
        if buf.len() < ICMPV6_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let data = buf.get(ICMPV6_HEADER_LEN..).unwrap_or(&[]);
        let code = packet.msg_code();
        match packet.msg_type() {
            Icmpv6Message::EchoRequest => {
                Ok(Icmpv6Repr::EchoRequest { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data })
            }
            Icmpv6Message::EchoReply => {
                Ok(Icmpv6Repr::EchoReply { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data })
            }
            Icmpv6Message::DstUnreachable => {
                let (header, data) = Ipv6Repr::parse_quoted(data)?;
                Ok(Icmpv6Repr::DstUnreachable { reason: code.into(), header, data })
            }
            Icmpv6Message::PacketTooBig => {
                let (header, data) = Ipv6Repr::parse_quoted(data)?;
                Ok(Icmpv6Repr::PacketTooBig { mtu: packet.mtu(), header, data })
            }
            Icmpv6Message::TimeExceeded => {
                let (header, data) = Ipv6Repr::parse_quoted(data)?;
                Ok(Icmpv6Repr::TimeExceeded { code, header, data })
            }
            Icmpv6Message::ParamProblem => {
                let (header, data) = Ipv6Repr::parse_quoted(data)?;
                Ok(Icmpv6Repr::ParamProblem { reason: code.into(), pointer: packet.pointer(), header, data })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// Bytes [`Icmpv6Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => ICMPV6_HEADER_LEN + data.len(),
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. } => ICMPV6_HEADER_LEN + IPV6_HEADER_LEN + data.len(),
        }
    }

    /// Write the whole message, checksum included, at the start of `buf`.
    ///
    /// `Err(Truncated)` if `buf` is shorter than [`Icmpv6Repr::buffer_len`];
    /// `Err(Malformed)` if a quoted header cannot be emitted. Keeping an
    /// error within [`ICMPV6_ERROR_MAX_LEN`] is the caller's choice of
    /// `data`.
    pub fn emit(&self, buf: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        let buf = buf.get_mut(..self.buffer_len()).ok_or(Error::Truncated)?;
        let (head, rest) = buf.split_at_mut(ICMPV6_HEADER_LEN);
        let mut p = Icmpv6Packet::new_unchecked(head);
        p.set_checksum(0);
        let (ty, code, word, quoted, data) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => {
                (Icmpv6Message::EchoRequest, 0, (u32::from(ident) << 16) | u32::from(seq_no), None, data)
            }
            Icmpv6Repr::EchoReply { ident, seq_no, data } => {
                (Icmpv6Message::EchoReply, 0, (u32::from(ident) << 16) | u32::from(seq_no), None, data)
            }
            Icmpv6Repr::DstUnreachable { reason, ref header, data } => {
                (Icmpv6Message::DstUnreachable, reason.into(), 0, Some(header), data)
            }
            Icmpv6Repr::PacketTooBig { mtu, ref header, data } => {
                (Icmpv6Message::PacketTooBig, 0, mtu, Some(header), data)
            }
            Icmpv6Repr::TimeExceeded { code, ref header, data } => {
                (Icmpv6Message::TimeExceeded, code, 0, Some(header), data)
            }
            Icmpv6Repr::ParamProblem { reason, pointer, ref header, data } => {
                (Icmpv6Message::ParamProblem, reason.into(), pointer, Some(header), data)
            }
        };
        p.set_msg_type(ty);
        p.set_msg_code(code);
        field::set_u32(p.buffer, offs::MTU, word);
        if let Some(h) = quoted {
            h.emit(rest)?;
        }
        // `rest` has exactly room for the quoted header (if any) and `data`.
        let off = rest.len() - data.len();
        if let Some(d) = rest.get_mut(off..) {
            d.copy_from_slice(data);
        }
        Icmpv6Packet::new_unchecked(buf).fill_checksum(src, dst);
        Ok(())
    }
}

/// An echo request/reply header to be emitted in front of data held
/// elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Icmpv6EchoHeader {
    /// Reply (type 129) rather than request (type 128).
    pub reply: bool,
    /// Identifier.
    pub ident: u16,
    /// Sequence number.
    pub seq_no: u16,
}

impl Icmpv6EchoHeader {
    /// Read the echo header of a packet; `Err(Unsupported)` if it is not an
    /// echo message. The checksum is not checked here.
    pub fn parse<T: AsRef<[u8]>>(packet: &Icmpv6Packet<T>) -> Result<Self> {
        if packet.buffer.as_ref().len() < ICMPV6_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let reply = match packet.msg_type() {
            Icmpv6Message::EchoReply => true,
            Icmpv6Message::EchoRequest => false,
            _ => return Err(Error::Unsupported),
        };
        Ok(Icmpv6EchoHeader { reply, ident: packet.echo_ident(), seq_no: packet.echo_seq_no() })
    }

    /// Write the 8-byte header at the start of `header`, with the checksum
    /// over pseudo header, header and `data_checksum` (a [`Checksum`] over
    /// the `data_len` bytes that follow it).
    ///
    /// `Err(Truncated)` if `header` is shorter than 8; `Err(Malformed)` if
    /// the message would be longer than the pseudo header's length field.
    pub fn emit(
        &self,
        header: &mut [u8],
        data_len: usize,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        data_checksum: Checksum,
    ) -> Result<()> {
        let len =
            data_len.checked_add(ICMPV6_HEADER_LEN).and_then(|n| u32::try_from(n).ok()).ok_or(Error::Malformed)?;
        let h = header.first_chunk_mut::<ICMPV6_HEADER_LEN>().ok_or(Error::Truncated)?;
        let mut p = Icmpv6Packet::new_unchecked(&mut h[..]);
        p.set_msg_type(if self.reply { Icmpv6Message::EchoReply } else { Icmpv6Message::EchoRequest });
        p.set_msg_code(0);
        p.set_checksum(0);
        p.set_echo_ident(self.ident);
        p.set_echo_seq_no(self.seq_no);
        let mut c = pseudo_header_v6(src, dst, PROTO_ICMPV6, len);
        c.add_bytes(&h[..]);
        c.add_checksum(data_checksum);
        Icmpv6Packet::new_unchecked(&mut h[..]).set_checksum(c.finish());
        Ok(())
    }
}

/// The pseudo header laid out as bytes and summed with `checksum::verify`,
/// to compare [`pseudo_header_v6`] against.
#[cfg(test)]
fn verify_plain(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> bool {
    let mut pseudo = std::vec::Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(message.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, PROTO_ICMPV6]);
    pseudo.extend_from_slice(message);
    crate::checksum::verify(&pseudo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::IpProtocol;

    const LL_A: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0x5eff, 0xfe00, 0x5301);
    const LL_B: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0x5eff, 0xfe00, 0x5302);

    /// An echo request from LL_A to LL_B, ident 0x1234, seq 1, data
    /// "nagare"; checksum 0xc453 computed apart from this crate (Python's
    /// `struct` over the RFC 8200 section 8.1 pseudo header and message).
    const ECHO: [u8; 14] = [0x80, 0x00, 0xc4, 0x53, 0x12, 0x34, 0x00, 0x01, b'n', b'a', b'g', b'a', b'r', b'e'];

    #[test]
    fn echo_known() {
        let p = Icmpv6Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum(LL_A, LL_B));
        assert!(verify_plain(LL_A, LL_B, &ECHO));
        assert!(!p.verify_checksum(LL_B, Ipv6Addr::LOCALHOST));
        let r = Icmpv6Repr::parse(&p, LL_A, LL_B, true).unwrap();
        assert_eq!(r, Icmpv6Repr::EchoRequest { ident: 0x1234, seq_no: 1, data: b"nagare" });
        let mut out = [0u8; 14];
        r.emit(&mut out, LL_A, LL_B).unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn echo_header_with_split_data() {
        let h = Icmpv6EchoHeader { reply: false, ident: 0x1234, seq_no: 1 };
        let mut c = Checksum::new();
        c.add_bytes(&ECHO[8..11]);
        c.add_bytes(&ECHO[11..]);
        let mut out = [0u8; 8];
        h.emit(&mut out, 6, LL_A, LL_B, c).unwrap();
        assert_eq!(out, ECHO[..8]);
        let p = Icmpv6Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(Icmpv6EchoHeader::parse(&p).unwrap(), h);
        assert_eq!(h.emit(&mut [0u8; 7], 6, LL_A, LL_B, c), Err(Error::Truncated));
        assert_eq!(h.emit(&mut out, usize::MAX, LL_A, LL_B, c), Err(Error::Malformed));
    }

    #[test]
    fn bad_checksum() {
        let mut b = ECHO;
        b[9] ^= 0x20;
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p, LL_A, LL_B, true), Err(Error::Checksum));
        assert!(Icmpv6Repr::parse(&p, LL_A, LL_B, false).is_ok());
    }

    fn quoted() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: LL_B,
            dst_addr: LL_A,
            next_header: IpProtocol::Udp,
            payload_len: 1452,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x54321,
        }
    }

    #[test]
    fn errors_round_trip() {
        let udp = [0xeb, 0x63, 0x00, 0x09, 0x05, 0xac, 0x12, 0x34];
        let header = quoted();
        for r in [
            Icmpv6Repr::DstUnreachable { reason: Icmpv6DstUnreachable::PortUnreachable, header, data: &udp },
            Icmpv6Repr::PacketTooBig { mtu: 1280, header, data: &udp },
            Icmpv6Repr::TimeExceeded { code: 1, header, data: &udp },
            Icmpv6Repr::ParamProblem {
                reason: Icmpv6ParamProblem::UnrecognizedNextHeader,
                pointer: 6,
                header,
                data: &udp,
            },
        ] {
            let mut out = [0u8; 56];
            assert_eq!(r.buffer_len(), 56);
            r.emit(&mut out, LL_A, LL_B).unwrap();
            let p = Icmpv6Packet::new_checked(&out[..]).unwrap();
            assert!(p.msg_type().is_error());
            assert!(verify_plain(LL_A, LL_B, &out));
            assert_eq!(Icmpv6Repr::parse(&p, LL_A, LL_B, true).unwrap(), r);
            assert_eq!(&out[8..12], &[0x60, 0x05, 0x43, 0x21]);
        }
        let r = Icmpv6Repr::PacketTooBig { mtu: 0x0102_0304, header, data: &[] };
        let mut out = [0u8; 48];
        r.emit(&mut out, LL_A, LL_B).unwrap();
        assert_eq!(out[..2], [2, 0]);
        assert_eq!(out[4..8], [1, 2, 3, 4]);
        let r =
            Icmpv6Repr::ParamProblem { reason: Icmpv6ParamProblem::Other(9), pointer: 0xa0b0c0d0, header, data: &[] };
        r.emit(&mut out, LL_A, LL_B).unwrap();
        assert_eq!(out[..2], [4, 9]);
        assert_eq!(out[4..8], [0xa0, 0xb0, 0xc0, 0xd0]);
    }

    #[test]
    fn malformed_quotes() {
        let mut msg = [0u8; 8 + 39];
        msg[0] = 1;
        msg[8] = 0x60;
        let p = Icmpv6Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p, LL_A, LL_B, false), Err(Error::Truncated));
        let mut msg = [0u8; 8 + 40];
        msg[0] = 3;
        msg[8] = 0x45;
        let p = Icmpv6Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p, LL_A, LL_B, false), Err(Error::Malformed));
        for ty in [133u8, 135, 143, 200] {
            msg[0] = ty;
            let p = Icmpv6Packet::new_checked(&msg[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&p, LL_A, LL_B, false), Err(Error::Unsupported));
        }
        assert_eq!(Icmpv6Packet::new_checked(&msg[..7]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn emit_errors() {
        let r = Icmpv6Repr::EchoReply { ident: 1, seq_no: 2, data: b"abc" };
        assert_eq!(r.buffer_len(), 11);
        assert_eq!(r.emit(&mut [0u8; 10], LL_A, LL_B), Err(Error::Truncated));
        let bad = Ipv6Repr { flow_label: 1 << 20, ..quoted() };
        let r = Icmpv6Repr::TimeExceeded { code: 0, header: bad, data: &[] };
        assert_eq!(r.emit(&mut [0u8; 64], LL_A, LL_B), Err(Error::Malformed));
    }

    #[test]
    fn param_problem_for_ext_errors() {
        use Icmpv6ParamProblem as P;
        let cases = [
            (Ipv6ExtError::HopByHopNotFirst { pointer: 40 }, Some((P::UnrecognizedNextHeader, 40))),
            (Ipv6ExtError::RoutingType0 { pointer: 42 }, Some((P::ErroneousHeaderField, 42))),
            (Ipv6ExtError::UnknownRoutingType { routing_type: 3, pointer: 50 }, Some((P::ErroneousHeaderField, 50))),
            (
                Ipv6ExtError::UnknownOption { action: Ipv6OptionAction::DiscardAndIcmp, kind: 0x9e, pointer: 43 },
                Some((P::UnrecognizedOption, 43)),
            ),
            (
                Ipv6ExtError::UnknownOption {
                    action: Ipv6OptionAction::DiscardAndIcmpUnlessMulticast,
                    kind: 0xc2,
                    pointer: 44,
                },
                Some((P::UnrecognizedOption, 44)),
            ),
            (Ipv6ExtError::UnknownOption { action: Ipv6OptionAction::Discard, kind: 0x5e, pointer: 43 }, None),
            (Ipv6ExtError::BadOption { pointer: 42 }, None),
            (Ipv6ExtError::Truncated, None),
            (Ipv6ExtError::TooManyHeaders, None),
            (Ipv6ExtError::TooLong, None),
        ];
        for (e, want) in cases {
            assert_eq!(P::for_ext_error(&e), want, "{e:?}");
        }
    }

    #[test]
    fn codes() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(Icmpv6DstUnreachable::from(v)), v);
            assert_eq!(u8::from(Icmpv6ParamProblem::from(v)), v);
            assert_eq!(u8::from(Icmpv6Message::from(v)), v);
            assert_eq!(Icmpv6Message::from(v).is_error(), v < 128);
        }
        assert_eq!(Icmpv6Message::from(135), Icmpv6Message::NeighborSolicit);
    }

    #[test]
    fn unchecked_short_buffer() {
        let p = Icmpv6Packet::new_unchecked(&[0x80u8, 0, 1][..]);
        assert_eq!((p.checksum(), p.mtu(), p.pointer(), p.data()), (0, 0, 0, &[][..]));
        let mut b = [0u8; 5];
        let mut p = Icmpv6Packet::new_unchecked(&mut b[..]);
        p.set_mtu(1500);
        p.fill_checksum(LL_A, LL_B);
        assert!(p.verify_checksum(LL_A, LL_B));
        assert!(p.data_mut().is_empty());
    }
}
