//! IPv6 extension headers (RFC 8200 section 4): hop-by-hop and destination
//! options, routing and fragment headers, and a bounded walk over a chain
//! of them to the upper-layer header.
//!
//! The walk reports what the RFCs tell a host to do with a header it cannot
//! process (an unknown option's action, a routing header with segments
//! left, hop-by-hop options after the first header) as a distinct
//! [`Ipv6ExtError`] with the ICMPv6 Parameter Problem pointer, and acts on
//! none of it: sending an ICMPv6 error is the caller's decision.

use core::fmt;

use crate::error::{Error, Result};
use crate::field;
use crate::ipv4::IpProtocol;
use crate::ipv6::IPV6_HEADER_LEN;

/// Most extension headers [`Ipv6ExtChain::walk`] goes through before
/// refusing the packet.
pub const IPV6_EXT_MAX_HEADERS: usize = 8;
/// Most extension header bytes [`Ipv6ExtChain::walk`] goes through before
/// refusing the packet.
pub const IPV6_EXT_MAX_LEN: usize = 1024;
/// The fragment header's length: it has no length field.
pub const IPV6_FRAGMENT_HEADER_LEN: usize = 8;
/// Largest hop-by-hop, destination options or routing header: a length
/// byte of 255 counts 256 units of 8 bytes.
pub const IPV6_EXT_HEADER_MAX_LEN: usize = 2048;

mod offs {
    pub const NEXT_HEADER: usize = 0;
    pub const LEN: usize = 1;
    pub const DATA: usize = 2;
    pub const ROUTING_TYPE: usize = 2;
    pub const SEGMENTS_LEFT: usize = 3;
    pub const FRAG_OFFSET_M: usize = 2;
    pub const FRAG_IDENT: usize = 4;
}

mod kind {
    pub const PAD1: u8 = 0;
    pub const PADN: u8 = 1;
    pub const ROUTER_ALERT: u8 = 5;
}

const FRAG_OFFSET_MASK: u16 = 0xfff8;
const FRAG_M: u16 = 0x0001;

/// A view of a hop-by-hop options, destination options or routing header:
/// next header, length in 8-byte units beyond the first 8, then data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6ExtHeader { buffer }
    }

    /// Wrap, requiring the whole header that the length byte announces
    /// (`Err(Truncated)` otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Ipv6ExtHeader { buffer };
        let len = h.buffer.as_ref().len();
        if len < offs::DATA || len < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// What follows this header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(field::u8_at(self.buffer.as_ref(), offs::NEXT_HEADER))
    }

    /// Header length in bytes, `(length byte + 1) * 8`.
    pub fn header_len(&self) -> usize {
        (usize::from(field::u8_at(self.buffer.as_ref(), offs::LEN)) + 1) * 8
    }

    /// Bytes after next header and length, up to `header_len`: the options
    /// of an options header, routing type onwards of a routing header.
    pub fn data(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), offs::DATA, self.header_len())
    }

    /// The options of a hop-by-hop or destination options header.
    pub fn options_iter(&self) -> Ipv6OptionsIter<'_> {
        Ipv6OptionsIter::new(self.data())
    }

    /// Routing type (routing header only).
    pub fn routing_type(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::ROUTING_TYPE)
    }

    /// Segments left (routing header only).
    pub fn segments_left(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::SEGMENTS_LEFT)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    /// Set the next header.
    pub fn set_next_header(&mut self, v: IpProtocol) {
        field::set_u8(self.buffer.as_mut(), offs::NEXT_HEADER, v.into());
    }

    /// Set the header length in bytes (stored as `len / 8 - 1`, so `len`
    /// should be a multiple of 8 from 8 to 2048).
    pub fn set_header_len(&mut self, len: usize) {
        let v = (len / 8).saturating_sub(1).min(255) as u8;
        field::set_u8(self.buffer.as_mut(), offs::LEN, v);
    }

    /// Mutable bytes after next header and length, up to `header_len`.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        field::slice_mut(self.buffer.as_mut(), offs::DATA, hl)
    }
}

/// What a node that does not recognise an option must do, from the top two
/// bits of its type (RFC 8200 section 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ipv6OptionAction {
    /// 00: skip the option and go on.
    Skip,
    /// 01: discard the packet.
    Discard,
    /// 10: discard the packet and send a Parameter Problem (code 2).
    DiscardAndIcmp,
    /// 11: discard, and send a Parameter Problem unless the destination is
    /// multicast.
    DiscardAndIcmpUnlessMulticast,
}

impl Ipv6OptionAction {
    /// The action encoded in an option type.
    pub const fn of(kind: u8) -> Self {
        match kind >> 6 {
            0 => Ipv6OptionAction::Skip,
            1 => Ipv6OptionAction::Discard,
            2 => Ipv6OptionAction::DiscardAndIcmp,
            _ => Ipv6OptionAction::DiscardAndIcmpUnlessMulticast,
        }
    }
}

/// An option of a hop-by-hop or destination options header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ipv6Option<'a> {
    /// Type 0: one byte of padding, no length.
    Pad1,
    /// Type 1: padding of `2 + n` bytes (`n` zero data bytes).
    PadN(u8),
    /// Type 5: Router Alert (RFC 2711), e.g. 0 for MLD.
    RouterAlert(u16),
    /// Any other type, with its data.
    Unknown {
        /// Option type; its top two bits give the [`Ipv6OptionAction`].
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl<'a> Ipv6Option<'a> {
    /// Parse the option at the start of `buf`, returning the bytes after it.
    ///
    /// `Err(Truncated)` if `buf` is empty. `Err(Malformed)` if the length
    /// byte is missing, the data runs past the end of `buf`, or a Router
    /// Alert's data is not 2 bytes. PadN data is not checked to be zero
    /// (RFC 8200 does not ask receivers to).
    pub fn parse(buf: &'a [u8]) -> Result<(&'a [u8], Ipv6Option<'a>)> {
        let (&k, after_kind) = buf.split_first().ok_or(Error::Truncated)?;
        if k == kind::PAD1 {
            return Ok((after_kind, Ipv6Option::Pad1));
        }
        let (&len, after_len) = after_kind.split_first().ok_or(Error::Malformed)?;
        let data = after_len.get(..usize::from(len)).ok_or(Error::Malformed)?;
        let rest = after_len.get(usize::from(len)..).ok_or(Error::Malformed)?;
        let opt = match k {
            kind::PADN => Ipv6Option::PadN(len),
            kind::ROUTER_ALERT => match *data {
                [a, b] => Ipv6Option::RouterAlert(u16::from_be_bytes([a, b])),
                _ => return Err(Error::Malformed),
            },
            _ => Ipv6Option::Unknown { kind: k, data },
        };
        Ok((rest, opt))
    }

    /// What to do with this option if it is not understood: always
    /// [`Ipv6OptionAction::Skip`] for the ones parsed here.
    pub fn action(&self) -> Ipv6OptionAction {
        match self {
            Ipv6Option::Unknown { kind, .. } => Ipv6OptionAction::of(*kind),
            _ => Ipv6OptionAction::Skip,
        }
    }

    /// Bytes [`Ipv6Option::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Ipv6Option::Pad1 => 1,
            Ipv6Option::PadN(n) => 2 + usize::from(*n),
            Ipv6Option::RouterAlert(_) => 4,
            Ipv6Option::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option at the start of `buf` and return the rest of `buf`.
    ///
    /// `Err(Truncated)` if `buf` is too short; `Err(Malformed)` for an
    /// `Unknown` option with more than 255 data bytes or of type 0 (Pad1,
    /// which has no length byte).
    pub fn emit<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8]> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let (out, rest) = buf.split_at_mut(len);
        match *self {
            Ipv6Option::Pad1 => out.copy_from_slice(&[kind::PAD1]),
            Ipv6Option::PadN(n) => {
                out.fill(0);
                out[0] = kind::PADN;
                out[1] = n;
            }
            Ipv6Option::RouterAlert(v) => {
                let [a, b] = v.to_be_bytes();
                out.copy_from_slice(&[kind::ROUTER_ALERT, 2, a, b]);
            }
            Ipv6Option::Unknown { kind, data } => {
                let n = u8::try_from(data.len()).map_err(|_| Error::Malformed)?;
                if kind == kind::PAD1 {
                    return Err(Error::Malformed);
                }
                out[0] = kind;
                out[1] = n;
                out[2..].copy_from_slice(data);
            }
        }
        Ok(rest)
    }
}

/// Iterator over the options of a hop-by-hop or destination options
/// header; a malformed option yields one `Err` and then the iterator ends.
#[derive(Clone, Debug)]
pub struct Ipv6OptionsIter<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> Ipv6OptionsIter<'a> {
    /// Iterate over `options` (a header's bytes after next header and
    /// length).
    pub fn new(options: &'a [u8]) -> Self {
        Ipv6OptionsIter { rest: options, done: false }
    }
}

impl<'a> Iterator for Ipv6OptionsIter<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        match Ipv6Option::parse(self.rest) {
            Ok((rest, opt)) => {
                self.rest = rest;
                Some(Ok(opt))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for Ipv6OptionsIter<'_> {}

/// A hop-by-hop or destination options header to emit: the options in
/// order, then Pad1 or PadN up to a multiple of 8 bytes.
///
/// Emit only: a received header is read with [`Ipv6ExtHeader::options_iter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6OptionsRepr<'a> {
    /// What follows this header.
    pub next_header: IpProtocol,
    /// The options, padding not included.
    pub options: &'a [Ipv6Option<'a>],
}

impl Ipv6OptionsRepr<'_> {
    /// Bytes [`Ipv6OptionsRepr::emit`] writes: 2 plus the options, rounded
    /// up to a multiple of 8.
    pub fn buffer_len(&self) -> usize {
        let used = self.options.iter().fold(offs::DATA, |n, o| n.saturating_add(o.buffer_len()));
        used.saturating_add(7) / 8 * 8
    }

    /// Write the header at the start of `buf`.
    ///
    /// `Err(Malformed)` if it would be longer than 2048 bytes or an option
    /// cannot be emitted; `Err(Truncated)` if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        if len > IPV6_EXT_HEADER_MAX_LEN {
            return Err(Error::Malformed);
        }
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut h = Ipv6ExtHeader::new_unchecked(&mut *buf);
        h.set_next_header(self.next_header);
        h.set_header_len(len);
        let mut rest = h.data_mut();
        for o in self.options {
            rest = o.emit(rest)?;
        }
        match rest.len() {
            0 => {}
            1 => {
                Ipv6Option::Pad1.emit(rest)?;
            }
            n => {
                Ipv6Option::PadN((n - 2) as u8).emit(rest)?;
            }
        }
        Ok(())
    }
}

/// A view of a fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6FragmentHeader { buffer }
    }

    /// Wrap, requiring 8 bytes (`Err(Truncated)` otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < IPV6_FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Ipv6FragmentHeader { buffer })
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// What the reassembled fragmentable part starts with.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(field::u8_at(self.buffer.as_ref(), offs::NEXT_HEADER))
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::FRAG_OFFSET_M) & FRAG_OFFSET_MASK
    }

    /// M flag: more fragments follow.
    pub fn more_frags(&self) -> bool {
        field::u16_at(self.buffer.as_ref(), offs::FRAG_OFFSET_M) & FRAG_M != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), offs::FRAG_IDENT)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    fn update_offset_m(&mut self, f: impl FnOnce(u16) -> u16) {
        let v = f(field::u16_at(self.buffer.as_ref(), offs::FRAG_OFFSET_M));
        field::set_u16(self.buffer.as_mut(), offs::FRAG_OFFSET_M, v);
    }

    /// Set the next header.
    pub fn set_next_header(&mut self, v: IpProtocol) {
        field::set_u8(self.buffer.as_mut(), offs::NEXT_HEADER, v.into());
    }

    /// Set the fragment offset in bytes; the low 3 bits are dropped.
    pub fn set_frag_offset(&mut self, bytes: u16) {
        self.update_offset_m(|v| (v & !FRAG_OFFSET_MASK) | (bytes & FRAG_OFFSET_MASK));
    }

    /// Set or clear the M flag.
    pub fn set_more_frags(&mut self, m: bool) {
        self.update_offset_m(|v| if m { v | FRAG_M } else { v & !FRAG_M });
    }

    /// Set the identification.
    pub fn set_ident(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), offs::FRAG_IDENT, v);
    }
}

/// A parsed fragment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    /// What the reassembled fragmentable part starts with.
    pub next_header: IpProtocol,
    /// Fragment offset in bytes; a multiple of 8.
    pub frag_offset: u16,
    /// More fragments follow.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    /// Parse a fragment header; `Err(Truncated)` if shorter than 8 bytes.
    /// The reserved bits are ignored.
    pub fn parse<T: AsRef<[u8]>>(header: &Ipv6FragmentHeader<T>) -> Result<Self> {
        if header.buffer.as_ref().len() < IPV6_FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Ipv6FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    /// An atomic fragment (RFC 6946): offset 0 and no more fragments, so
    /// the packet is whole and is processed on its own, without
    /// reassembly.
    pub const fn is_atomic(&self) -> bool {
        self.frag_offset == 0 && !self.more_frags
    }

    /// Bytes [`Ipv6FragmentRepr::emit`] writes: 8.
    pub const fn buffer_len(&self) -> usize {
        IPV6_FRAGMENT_HEADER_LEN
    }

    /// Write the 8-byte header at the start of `buf`, reserved bits zero.
    ///
    /// `Err(Malformed)` if `frag_offset` is not a multiple of 8;
    /// `Err(Truncated)` if `buf` is shorter than 8.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.frag_offset & 7 != 0 {
            return Err(Error::Malformed);
        }
        let h = buf.first_chunk_mut::<IPV6_FRAGMENT_HEADER_LEN>().ok_or(Error::Truncated)?;
        h.fill(0);
        let mut f = Ipv6FragmentHeader::new_unchecked(&mut h[..]);
        f.set_next_header(self.next_header);
        f.set_frag_offset(self.frag_offset);
        f.set_more_frags(self.more_frags);
        f.set_ident(self.ident);
        Ok(())
    }
}

/// Why [`Ipv6ExtChain::walk`] refused a packet.
///
/// `pointer` is an offset from the start of the IPv6 header, as an ICMPv6
/// Parameter Problem message carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ipv6ExtError {
    /// A header runs past the end of the payload.
    Truncated,
    /// More than [`IPV6_EXT_MAX_HEADERS`] extension headers.
    TooManyHeaders,
    /// More than [`IPV6_EXT_MAX_LEN`] bytes of extension headers.
    TooLong,
    /// A hop-by-hop options header other than directly after the IPv6
    /// header (RFC 8200 section 4.1); `pointer` is the Next Header field
    /// naming it (Parameter Problem code 1).
    HopByHopNotFirst {
        /// The Next Header field that holds 0.
        pointer: u32,
    },
    /// An option whose length runs past the end of its header.
    BadOption {
        /// The option's type byte.
        pointer: u32,
    },
    /// The first unrecognised option whose action is not
    /// [`Ipv6OptionAction::Skip`]: the packet is to be discarded, and an ICMPv6
    /// Parameter Problem (code 2) sent as `action` says.
    UnknownOption {
        /// What the option type asks for.
        action: Ipv6OptionAction,
        /// The option type.
        kind: u8,
        /// The option's type byte.
        pointer: u32,
    },
    /// A type 0 routing header with segments left (RFC 5095: handled as an
    /// unrecognised routing type, so Parameter Problem code 0).
    RoutingType0 {
        /// The Routing Type field.
        pointer: u32,
    },
    /// Any other routing header with segments left: a host forwards
    /// nothing, so Parameter Problem code 0 (RFC 8200 section 4.4).
    UnknownRoutingType {
        /// The routing type.
        routing_type: u8,
        /// The Routing Type field.
        pointer: u32,
    },
}

impl Ipv6ExtError {
    /// The Parameter Problem pointer, for the refusals that have one.
    pub fn pointer(&self) -> Option<u32> {
        match *self {
            Ipv6ExtError::Truncated | Ipv6ExtError::TooManyHeaders | Ipv6ExtError::TooLong => None,
            Ipv6ExtError::HopByHopNotFirst { pointer }
            | Ipv6ExtError::BadOption { pointer }
            | Ipv6ExtError::UnknownOption { pointer, .. }
            | Ipv6ExtError::RoutingType0 { pointer }
            | Ipv6ExtError::UnknownRoutingType { pointer, .. } => Some(pointer),
        }
    }
}

impl From<Ipv6ExtError> for Error {
    fn from(e: Ipv6ExtError) -> Self {
        match e {
            Ipv6ExtError::Truncated => Error::Truncated,
            Ipv6ExtError::TooManyHeaders
            | Ipv6ExtError::TooLong
            | Ipv6ExtError::UnknownOption { .. }
            | Ipv6ExtError::RoutingType0 { .. }
            | Ipv6ExtError::UnknownRoutingType { .. } => Error::Unsupported,
            Ipv6ExtError::HopByHopNotFirst { .. } | Ipv6ExtError::BadOption { .. } => Error::Malformed,
        }
    }
}

impl fmt::Display for Ipv6ExtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ipv6ExtError::Truncated => f.write_str("truncated extension header"),
            Ipv6ExtError::TooManyHeaders => f.write_str("too many extension headers"),
            Ipv6ExtError::TooLong => f.write_str("extension headers too long"),
            Ipv6ExtError::HopByHopNotFirst { pointer } => write!(f, "hop-by-hop options not first (at {pointer})"),
            Ipv6ExtError::BadOption { pointer } => write!(f, "malformed option at {pointer}"),
            Ipv6ExtError::UnknownOption { kind, pointer, .. } => write!(f, "unknown option {kind} at {pointer}"),
            Ipv6ExtError::RoutingType0 { pointer } => write!(f, "type 0 routing header at {pointer}"),
            Ipv6ExtError::UnknownRoutingType { routing_type, pointer } => {
                write!(f, "routing type {routing_type} with segments left at {pointer}")
            }
        }
    }
}

impl core::error::Error for Ipv6ExtError {}

/// Where the upper layer of an IPv6 packet starts, found by
/// [`Ipv6ExtChain::walk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6ExtChain {
    /// The first header that is not an extension header walked here: an
    /// upper-layer protocol, [`IpProtocol::Ipv6NoNxt`], or a header this
    /// crate does not walk (e.g. AH, ESP).
    pub upper: IpProtocol,
    /// Offset of `upper` in the IPv6 payload.
    pub offset: usize,
    /// The Next Header field holding `upper`, as an offset from the start
    /// of the IPv6 header: the pointer of a Parameter Problem (code 1) if
    /// `upper` is not recognised.
    pub next_header_pointer: u32,
    /// The fragment header, if one was walked, and its offset in the
    /// payload (the length of the unfragmentable part after the fixed
    /// header).
    pub fragment: Option<(usize, Ipv6FragmentRepr)>,
    /// Extension headers walked.
    pub headers: usize,
}

/// Offset in the IPv6 payload to an offset from the start of the IPv6
/// header, saturating (payloads are far below 4 GiB).
fn pointer(payload_offset: usize) -> u32 {
    u32::try_from(IPV6_HEADER_LEN.saturating_add(payload_offset)).unwrap_or(u32::MAX)
}

impl Ipv6ExtChain {
    /// Walk the extension headers at the start of `payload` (an IPv6
    /// payload), `next_header` being the fixed header's Next Header.
    ///
    /// Hop-by-hop options are allowed only first. Options are checked for
    /// shape; unknown ones are skipped or refused as their type says.
    /// Routing headers with segments left 0 are skipped whatever their type
    /// (RFC 8200 section 4.4). An atomic fragment header is walked through;
    /// any other fragment header ends the walk, since what follows it is
    /// fragment data: `upper` and `offset` then name what comes after the
    /// fragment header in this fragment, and after reassembly the caller
    /// walks the reassembled bytes again from the fragment's next header.
    /// That second walk takes its first header as coming straight after the
    /// IPv6 header, so it accepts hop-by-hop options there, which after a
    /// fragment header are refused (the caller checks the fragment's next
    /// header for that); its offsets and pointers count from the start of
    /// the reassembled bytes.
    ///
    /// At most [`IPV6_EXT_MAX_HEADERS`] headers and [`IPV6_EXT_MAX_LEN`]
    /// bytes are walked.
    pub fn walk(next_header: IpProtocol, payload: &[u8]) -> core::result::Result<Self, Ipv6ExtError> {
        let mut chain =
            Ipv6ExtChain { upper: next_header, offset: 0, next_header_pointer: 6, fragment: None, headers: 0 };
        loop {
            let nh = chain.upper;
            if !matches!(nh, IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route | IpProtocol::Ipv6Frag)
            {
                return Ok(chain);
            }
            if nh == IpProtocol::HopByHop && chain.headers != 0 {
                return Err(Ipv6ExtError::HopByHopNotFirst { pointer: chain.next_header_pointer });
            }
            if chain.headers == IPV6_EXT_MAX_HEADERS {
                return Err(Ipv6ExtError::TooManyHeaders);
            }
            let at = chain.offset;
            let rest = payload.get(at..).unwrap_or(&[]);
            let len = if nh == IpProtocol::Ipv6Frag {
                IPV6_FRAGMENT_HEADER_LEN
            } else {
                Ipv6ExtHeader::new_checked(rest).map_err(|_| Ipv6ExtError::Truncated)?.header_len()
            };
            if rest.len() < len {
                return Err(Ipv6ExtError::Truncated);
            }
            if at + len > IPV6_EXT_MAX_LEN {
                return Err(Ipv6ExtError::TooLong);
            }
            let header = rest.get(..len).unwrap_or(&[]);
            match nh {
                IpProtocol::Ipv6Frag => {
                    let f = Ipv6FragmentRepr::parse(&Ipv6FragmentHeader::new_unchecked(header))
                        .map_err(|_| Ipv6ExtError::Truncated)?;
                    chain.fragment = Some((at, f));
                }
                IpProtocol::Ipv6Route => {
                    let h = Ipv6ExtHeader::new_unchecked(header);
                    if h.segments_left() != 0 {
                        let p = pointer(at + offs::ROUTING_TYPE);
                        return Err(match h.routing_type() {
                            0 => Ipv6ExtError::RoutingType0 { pointer: p },
                            t => Ipv6ExtError::UnknownRoutingType { routing_type: t, pointer: p },
                        });
                    }
                }
                _ => check_options(Ipv6ExtHeader::new_unchecked(header).data(), at + offs::DATA)?,
            }
            chain.headers += 1;
            chain.next_header_pointer = pointer(at + offs::NEXT_HEADER);
            chain.upper = IpProtocol::from(field::u8_at(header, offs::NEXT_HEADER));
            chain.offset = at + len;
            if chain.fragment.is_some_and(|(o, f)| o == at && !f.is_atomic()) {
                return Ok(chain);
            }
        }
    }
}

/// Check the options of one header, `options` starting at `at` in the
/// payload: the first unknown option that is not to be skipped, or a
/// malformed one, refuses the packet.
fn check_options(options: &[u8], at: usize) -> core::result::Result<(), Ipv6ExtError> {
    let mut rest = options;
    while !rest.is_empty() {
        let here = at + (options.len() - rest.len());
        let (after, opt) = Ipv6Option::parse(rest).map_err(|_| Ipv6ExtError::BadOption { pointer: pointer(here) })?;
        if let Ipv6Option::Unknown { kind, .. } = opt {
            let action = Ipv6OptionAction::of(kind);
            if action != Ipv6OptionAction::Skip {
                return Err(Ipv6ExtError::UnknownOption { action, kind, pointer: pointer(here) });
            }
        }
        rest = after;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// A hop-by-hop header with a Router Alert for MLD, as MLDv2 reports
    /// carry it (RFC 3810 section 5): next header 58, length 0, Router
    /// Alert 0, PadN of 0 data bytes.
    const HBH_ROUTER_ALERT: [u8; 8] = [58, 0, 5, 2, 0, 0, 1, 0];

    fn header(next: u8, body: &[u8]) -> Vec<u8> {
        let total = (2 + body.len()).div_ceil(8) * 8;
        let mut v = std::vec![next, (total / 8 - 1) as u8];
        v.extend_from_slice(body);
        v.resize(total, 0);
        v
    }

    #[test]
    fn router_alert_header() {
        let h = Ipv6ExtHeader::new_checked(&HBH_ROUTER_ALERT[..]).unwrap();
        assert_eq!(h.next_header(), IpProtocol::Icmpv6);
        assert_eq!(h.header_len(), 8);
        let opts: Vec<_> = h.options_iter().collect();
        assert_eq!(opts, [Ok(Ipv6Option::RouterAlert(0)), Ok(Ipv6Option::PadN(0))]);
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Icmpv6, options: &[Ipv6Option::RouterAlert(0)] };
        assert_eq!(repr.buffer_len(), 8);
        let mut out = [0xffu8; 8];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, HBH_ROUTER_ALERT);
        let chain = Ipv6ExtChain::walk(IpProtocol::HopByHop, &HBH_ROUTER_ALERT).unwrap();
        assert_eq!(
            chain,
            Ipv6ExtChain { upper: IpProtocol::Icmpv6, offset: 8, next_header_pointer: 40, fragment: None, headers: 1 }
        );
    }

    #[test]
    fn options_padding() {
        // 2 + 5 = 7 bytes: one Pad1 completes the 8.
        let data = [0xaa, 0xbb, 0xcc];
        let opts = [Ipv6Option::Unknown { kind: 0x1e, data: &data }];
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Udp, options: &opts };
        let mut out = [0xffu8; 8];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, [17, 0, 0x1e, 3, 0xaa, 0xbb, 0xcc, 0]);
        // Nothing at all: PadN of 4.
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Tcp, options: &[] };
        repr.emit(&mut out).unwrap();
        assert_eq!(out, [6, 0, 1, 4, 0, 0, 0, 0]);
        // 2 + 8 = 10: 16 bytes, PadN of 4.
        let opts = [Ipv6Option::RouterAlert(7), Ipv6Option::RouterAlert(8)];
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Tcp, options: &opts };
        let mut out = [0xffu8; 16];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, [6, 1, 5, 2, 0, 7, 5, 2, 0, 8, 1, 4, 0, 0, 0, 0]);
        assert_eq!(repr.emit(&mut out[..15]), Err(Error::Truncated));
    }

    #[test]
    fn options_emit_rejects() {
        let big = [0u8; 256];
        let opts = [Ipv6Option::Unknown { kind: 0x1e, data: &big }];
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Udp, options: &opts };
        assert_eq!(repr.emit(&mut [0u8; 300]), Err(Error::Malformed));
        let opts = [Ipv6Option::Unknown { kind: 0, data: &[] }];
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Udp, options: &opts };
        assert_eq!(repr.emit(&mut [0u8; 8]), Err(Error::Malformed));
        let opts = [Ipv6Option::PadN(255); 9];
        let repr = Ipv6OptionsRepr { next_header: IpProtocol::Udp, options: &opts };
        assert!(repr.buffer_len() > IPV6_EXT_HEADER_MAX_LEN);
        assert_eq!(repr.emit(&mut [0u8; 4096]), Err(Error::Malformed));
    }

    #[test]
    fn option_parse_errors() {
        assert_eq!(Ipv6Option::parse(&[]), Err(Error::Truncated));
        assert_eq!(Ipv6Option::parse(&[1]), Err(Error::Malformed));
        assert_eq!(Ipv6Option::parse(&[1, 3, 0, 0]), Err(Error::Malformed));
        assert_eq!(Ipv6Option::parse(&[5, 3, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(Ipv6Option::parse(&[0, 9]), Ok((&[9u8][..], Ipv6Option::Pad1)));
        let mut it = Ipv6OptionsIter::new(&[0, 1, 0, 0xc2, 4, 0]);
        assert_eq!(it.next(), Some(Ok(Ipv6Option::Pad1)));
        assert_eq!(it.next(), Some(Ok(Ipv6Option::PadN(0))));
        assert_eq!(it.next(), Some(Err(Error::Malformed)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn option_actions() {
        assert_eq!(Ipv6OptionAction::of(0x1e), Ipv6OptionAction::Skip);
        assert_eq!(Ipv6OptionAction::of(0x5e), Ipv6OptionAction::Discard);
        assert_eq!(Ipv6OptionAction::of(0x9e), Ipv6OptionAction::DiscardAndIcmp);
        // Jumbo Payload (0xc2) is not supported: discard, ICMP unless multicast.
        assert_eq!(Ipv6OptionAction::of(0xc2), Ipv6OptionAction::DiscardAndIcmpUnlessMulticast);
        assert_eq!(Ipv6Option::RouterAlert(0).action(), Ipv6OptionAction::Skip);
        assert_eq!(Ipv6Option::Unknown { kind: 0x9e, data: &[] }.action(), Ipv6OptionAction::DiscardAndIcmp);
    }

    #[test]
    fn unknown_options_reported_by_action() {
        for (kind, action) in [
            (0x5e, Ipv6OptionAction::Discard),
            (0x9e, Ipv6OptionAction::DiscardAndIcmp),
            (0xde, Ipv6OptionAction::DiscardAndIcmpUnlessMulticast),
        ] {
            // Pad1, then the option at payload offset 3.
            let mut p = header(17, &[0, kind, 1, 0]);
            p.extend_from_slice(&[0; 8]);
            assert_eq!(
                Ipv6ExtChain::walk(IpProtocol::HopByHop, &p),
                Err(Ipv6ExtError::UnknownOption { action, kind, pointer: 43 })
            );
            // In a destination options header after a routing header.
            let mut p = header(60, &[0, 0, 0, 0, 0, 0]);
            p.extend(header(17, &[kind, 0]));
            assert_eq!(
                Ipv6ExtChain::walk(IpProtocol::Ipv6Route, &p),
                Err(Ipv6ExtError::UnknownOption { action, kind, pointer: 50 })
            );
        }
        // Skip-type unknown options are walked over.
        let p = header(17, &[0x1e, 1, 0]);
        let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &p).unwrap();
        assert_eq!((c.upper, c.offset, c.headers), (IpProtocol::Udp, 8, 1));
    }

    #[test]
    fn bad_option_length() {
        // PadN claiming 9 bytes in a 6-byte option area.
        let p = header(17, &[1, 9]);
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &p), Err(Ipv6ExtError::BadOption { pointer: 42 }));
    }

    #[test]
    fn hop_by_hop_only_first() {
        let mut p = header(0, &[]);
        p.extend(header(17, &[]));
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &p), Err(Ipv6ExtError::HopByHopNotFirst { pointer: 40 }));
        let c = Ipv6ExtChain::walk(IpProtocol::HopByHop, &p[8..]).unwrap();
        assert_eq!(c.upper, IpProtocol::Udp);
        // Hop-by-hop then hop-by-hop: the second is named by byte 0 of the first.
        let mut p = header(0, &[]);
        p.extend(header(17, &[]));
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::HopByHop, &p), Err(Ipv6ExtError::HopByHopNotFirst { pointer: 40 }));
    }

    #[test]
    fn routing_headers() {
        // Type 0 with 2 segments left: refused, pointer at the routing type.
        let mut p = header(6, &[0, 2, 0, 0, 0, 0]);
        p.extend_from_slice(&[0; 32]);
        p[1] = 4;
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Route, &p), Err(Ipv6ExtError::RoutingType0 { pointer: 42 }));
        // Segment routing (type 4) with segments left: also refused, distinctly.
        let mut q = p.clone();
        q[2] = 4;
        assert_eq!(
            Ipv6ExtChain::walk(IpProtocol::Ipv6Route, &q),
            Err(Ipv6ExtError::UnknownRoutingType { routing_type: 4, pointer: 42 })
        );
        // Segments left 0: skipped, whatever the type.
        for t in [0u8, 2, 4, 253] {
            let mut r = p.clone();
            r[2] = t;
            r[3] = 0;
            let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Route, &r).unwrap();
            assert_eq!((c.upper, c.offset, c.next_header_pointer), (IpProtocol::Tcp, 40, 40));
        }
        assert_eq!(Ipv6ExtError::RoutingType0 { pointer: 42 }.pointer(), Some(42));
    }

    #[test]
    fn fragments() {
        let first =
            Ipv6FragmentRepr { next_header: IpProtocol::Udp, frag_offset: 0, more_frags: true, ident: 0xdead_beef };
        let mut p = std::vec![0u8; 8];
        first.emit(&mut p).unwrap();
        assert_eq!(p, [17, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef]);
        p.extend_from_slice(&[0xaa; 16]);
        let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Frag, &p).unwrap();
        assert_eq!(c.fragment, Some((0, first)));
        assert_eq!((c.upper, c.offset), (IpProtocol::Udp, 8));
        assert!(!first.is_atomic());

        // A later fragment with destination options before it: the walk
        // stops at the fragment header even though its next header names
        // another extension header.
        let later =
            Ipv6FragmentRepr { next_header: IpProtocol::Ipv6Opts, frag_offset: 1448, more_frags: false, ident: 7 };
        let mut p = header(44, &[]);
        let mut f = [0u8; 8];
        later.emit(&mut f).unwrap();
        assert_eq!(f[2..4], [0x05, 0xa8]);
        p.extend_from_slice(&f);
        p.extend_from_slice(&[0xff; 8]);
        let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &p).unwrap();
        assert_eq!(c.fragment, Some((8, later)));
        assert_eq!((c.upper, c.offset, c.headers, c.next_header_pointer), (IpProtocol::Ipv6Opts, 16, 2, 48));
        assert!(!later.is_atomic());

        // Atomic fragment (RFC 6946): walked through to the upper layer.
        let atomic =
            Ipv6FragmentRepr { next_header: IpProtocol::Ipv6Opts, frag_offset: 0, more_frags: false, ident: 9 };
        assert!(atomic.is_atomic());
        let mut p = std::vec![0u8; 8];
        atomic.emit(&mut p).unwrap();
        p.extend(header(58, &[]));
        let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Frag, &p).unwrap();
        assert_eq!((c.upper, c.offset, c.headers, c.fragment), (IpProtocol::Icmpv6, 16, 2, Some((0, atomic))));

        let h = Ipv6FragmentHeader::new_checked(&f[..]).unwrap();
        assert_eq!(Ipv6FragmentRepr::parse(&h).unwrap(), later);
        assert_eq!(Ipv6FragmentHeader::new_checked(&f[..7]).unwrap_err(), Error::Truncated);
        let bad = Ipv6FragmentRepr { frag_offset: 9, ..later };
        assert_eq!(bad.emit(&mut f), Err(Error::Malformed));
        assert_eq!(later.emit(&mut f[..7]), Err(Error::Truncated));
    }

    #[test]
    fn fragment_setters_keep_neighbours() {
        let mut b = [0xffu8; 8];
        let mut h = Ipv6FragmentHeader::new_unchecked(&mut b[..]);
        h.set_more_frags(false);
        assert_eq!(h.frag_offset(), 0xfff8);
        h.set_frag_offset(8);
        assert!(!h.more_frags());
        assert_eq!(h.frag_offset(), 8);
        assert_eq!(b[3] & 0x06, 0x06); // reserved bits untouched
    }

    #[test]
    fn truncated_chains() {
        let mut p = header(17, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p.len(), 16);
        for n in 0..16 {
            assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &p[..n]), Err(Ipv6ExtError::Truncated), "{n}");
        }
        p.truncate(7);
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Frag, &p), Err(Ipv6ExtError::Truncated));
        // No extension header at all: nothing to read.
        let c = Ipv6ExtChain::walk(IpProtocol::Tcp, &[]).unwrap();
        assert_eq!((c.upper, c.offset, c.next_header_pointer, c.headers), (IpProtocol::Tcp, 0, 6, 0));
    }

    #[test]
    fn limits() {
        // Eight destination options headers: walked. Nine: refused.
        let mut p = Vec::new();
        for _ in 0..7 {
            p.extend(header(60, &[]));
        }
        p.extend(header(17, &[]));
        let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &p).unwrap();
        assert_eq!((c.upper, c.offset, c.headers), (IpProtocol::Udp, 64, 8));
        let mut q = header(60, &[]);
        q.extend_from_slice(&p);
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &q), Err(Ipv6ExtError::TooManyHeaders));
        // A chain that loops back (each header naming the next as options)
        // ends at the header limit, not the end of the buffer.
        let endless: Vec<u8> = (0..1000).flat_map(|_| header(60, &[])).collect();
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &endless), Err(Ipv6ExtError::TooManyHeaders));
        // Byte limit: one 1024-byte header (Pad1s) passes, 1032 does not.
        let mut at_limit = std::vec![17u8, 127];
        at_limit.resize(1024, 0);
        let c = Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &at_limit).unwrap();
        assert_eq!(c.offset, IPV6_EXT_MAX_LEN);
        let mut over = std::vec![17u8, 128];
        over.resize(1032, 0);
        assert_eq!(Ipv6ExtChain::walk(IpProtocol::Ipv6Opts, &over), Err(Ipv6ExtError::TooLong));
    }

    #[test]
    fn ext_header_view() {
        let b = header(6, &[0, 1]);
        let h = Ipv6ExtHeader::new_checked(&b[..]).unwrap();
        assert_eq!((h.routing_type(), h.segments_left(), h.data().len()), (0, 1, 6));
        assert_eq!(Ipv6ExtHeader::new_checked(&b[..7]).unwrap_err(), Error::Truncated);
        assert_eq!(Ipv6ExtHeader::new_checked(&b[..1]).unwrap_err(), Error::Truncated);
        let h = Ipv6ExtHeader::new_unchecked(&[][..]);
        assert_eq!((h.header_len(), h.data(), h.next_header()), (8, &[][..], IpProtocol::HopByHop));
        let mut b = [0u8; 4];
        let mut h = Ipv6ExtHeader::new_unchecked(&mut b[..]);
        h.set_header_len(16);
        assert_eq!(h.header_len(), 16);
        assert!(h.data_mut().is_empty());
    }

    #[test]
    fn errors_convert() {
        assert_eq!(Error::from(Ipv6ExtError::Truncated), Error::Truncated);
        assert_eq!(Error::from(Ipv6ExtError::BadOption { pointer: 1 }), Error::Malformed);
        assert_eq!(Error::from(Ipv6ExtError::TooLong), Error::Unsupported);
        assert_eq!(Ipv6ExtError::TooManyHeaders.pointer(), None);
    }
}
