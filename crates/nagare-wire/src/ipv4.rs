//! IPv4 header (RFC 791). Options are carried and skipped, not interpreted.

use core::fmt;
use core::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Error, Result};
use crate::field;

/// Minimum header length: no options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Largest value of the total length field.
pub const IPV4_MAX_TOTAL_LEN: usize = 65535;

mod offs {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_MASK: u16 = 0x1fff;

/// The IPv4 protocol / IPv6 next header number (IANA "Assigned Internet
/// Protocol Numbers", one registry for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// 0: IPv6 hop-by-hop options header.
    HopByHop,
    /// 1
    Icmp,
    /// 6
    Tcp,
    /// 17
    Udp,
    /// 43: IPv6 routing header.
    Ipv6Route,
    /// 44: IPv6 fragment header.
    Ipv6Frag,
    /// 58
    Icmpv6,
    /// 59: no next header (nothing follows).
    Ipv6NoNxt,
    /// 60: IPv6 destination options header.
    Ipv6Opts,
    /// Anything else (never one of the values above).
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> Self {
        match v {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(other) => other,
        }
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::HopByHop => f.write_str("IPv6 hop-by-hop options"),
            IpProtocol::Icmp => f.write_str("ICMP"),
            IpProtocol::Tcp => f.write_str("TCP"),
            IpProtocol::Udp => f.write_str("UDP"),
            IpProtocol::Ipv6Route => f.write_str("IPv6 routing"),
            IpProtocol::Ipv6Frag => f.write_str("IPv6 fragment"),
            IpProtocol::Icmpv6 => f.write_str("ICMPv6"),
            IpProtocol::Ipv6NoNxt => f.write_str("IPv6 no next header"),
            IpProtocol::Ipv6Opts => f.write_str("IPv6 destination options"),
            IpProtocol::Unknown(v) => write!(f, "protocol {v}"),
        }
    }
}

/// A view of an IPv4 packet in a buffer.
///
/// The buffer may extend past `total_len` (e.g. Ethernet padding); those
/// bytes belong to neither header nor payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap without any validation.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wrap after validating the length fields against each other and the
    /// buffer: `Err(Truncated)` if the buffer is shorter than 20 bytes or
    /// than `total_len`; `Err(Malformed)` if the version is not 4, IHL < 5,
    /// or the header is longer than `total_len`.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Ipv4Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < IPV4_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 || self.header_len() < IPV4_HEADER_LEN {
            return Err(Error::Malformed);
        }
        let total = usize::from(self.total_len());
        if self.header_len() > total {
            return Err(Error::Malformed);
        }
        if total > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version (4 for a valid packet).
    pub fn version(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::VER_IHL) >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(field::u8_at(self.buffer.as_ref(), offs::VER_IHL) & 0x0f) * 4
    }

    /// DSCP (upper 6 bits) and ECN (lower 2 bits).
    pub fn dscp_ecn(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::DSCP_ECN)
    }

    /// Header plus payload length.
    pub fn total_len(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::TOTAL_LEN)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::IDENT)
    }

    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        field::u16_at(self.buffer.as_ref(), offs::FLAGS_FRAG) & FLAG_DF != 0
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        field::u16_at(self.buffer.as_ref(), offs::FLAGS_FRAG) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (field::u16_at(self.buffer.as_ref(), offs::FLAGS_FRAG) & FRAG_MASK) << 3
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), offs::TTL)
    }

    /// Alias of [`Ipv4Packet::ttl`].
    pub fn hop_limit(&self) -> u8 {
        self.ttl()
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(field::u8_at(self.buffer.as_ref(), offs::PROTOCOL))
    }

    /// Alias of [`Ipv4Packet::protocol`].
    pub fn next_header(&self) -> IpProtocol {
        self.protocol()
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        field::ipv4_at(self.buffer.as_ref(), offs::SRC)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        field::ipv4_at(self.buffer.as_ref(), offs::DST)
    }

    /// Whether the header checksum verifies (false if the header is not all
    /// inside the buffer).
    pub fn verify_checksum(&self) -> bool {
        self.buffer.as_ref().get(..self.header_len()).is_some_and(checksum::verify)
    }

    /// Option bytes: between the fixed header and `header_len`.
    pub fn options(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), IPV4_HEADER_LEN, self.header_len())
    }

    /// Bytes `header_len..total_len` (empty if that range is not valid).
    pub fn payload(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), self.header_len(), usize::from(self.total_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn update_u8(&mut self, off: usize, f: impl FnOnce(u8) -> u8) {
        let v = f(field::u8_at(self.buffer.as_ref(), off));
        field::set_u8(self.buffer.as_mut(), off, v);
    }

    fn update_flags_frag(&mut self, f: impl FnOnce(u16) -> u16) {
        let v = f(field::u16_at(self.buffer.as_ref(), offs::FLAGS_FRAG));
        field::set_u16(self.buffer.as_mut(), offs::FLAGS_FRAG, v);
    }

    /// Set the version nibble.
    pub fn set_version(&mut self, v: u8) {
        self.update_u8(offs::VER_IHL, |b| (b & 0x0f) | (v << 4));
    }

    /// Set the header length in bytes (stored as `len / 4`).
    pub fn set_header_len(&mut self, len: usize) {
        let ihl = ((len / 4) & 0x0f) as u8;
        self.update_u8(offs::VER_IHL, |b| (b & 0xf0) | ihl);
    }

    /// Set DSCP and ECN.
    pub fn set_dscp_ecn(&mut self, v: u8) {
        field::set_u8(self.buffer.as_mut(), offs::DSCP_ECN, v);
    }

    /// Set the total length.
    pub fn set_total_len(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::TOTAL_LEN, v);
    }

    /// Set the identification.
    pub fn set_ident(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::IDENT, v);
    }

    /// Clear all flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        field::set_u16(self.buffer.as_mut(), offs::FLAGS_FRAG, 0);
    }

    /// Set or clear Don't Fragment.
    pub fn set_dont_frag(&mut self, v: bool) {
        self.update_flags_frag(|f| if v { f | FLAG_DF } else { f & !FLAG_DF });
    }

    /// Set or clear More Fragments.
    pub fn set_more_frags(&mut self, v: bool) {
        self.update_flags_frag(|f| if v { f | FLAG_MF } else { f & !FLAG_MF });
    }

    /// Set the fragment offset in bytes; the low 3 bits are dropped.
    pub fn set_frag_offset(&mut self, bytes: u16) {
        self.update_flags_frag(|f| (f & !FRAG_MASK) | (bytes >> 3));
    }

    /// Set the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        field::set_u8(self.buffer.as_mut(), offs::TTL, v);
    }

    /// Alias of [`Ipv4Packet::set_ttl`].
    pub fn set_hop_limit(&mut self, v: u8) {
        self.set_ttl(v);
    }

    /// Set the payload protocol.
    pub fn set_protocol(&mut self, v: IpProtocol) {
        field::set_u8(self.buffer.as_mut(), offs::PROTOCOL, v.into());
    }

    /// Alias of [`Ipv4Packet::set_protocol`].
    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.set_protocol(v);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::CHECKSUM, v);
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        field::set_u32(self.buffer.as_mut(), offs::SRC, a.to_bits());
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        field::set_u32(self.buffer.as_mut(), offs::DST, a.to_bits());
    }

    /// Compute and store the header checksum over `header_len` bytes.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(field::slice(self.buffer.as_ref(), 0, hl));
        self.set_checksum(c);
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        field::slice_mut(self.buffer.as_mut(), IPV4_HEADER_LEN, hl)
    }

    /// Mutable payload (`header_len..total_len`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        field::slice_mut(self.buffer.as_mut(), hl, tl)
    }
}

/// A parsed IPv4 header (options dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// `total_len - header_len`.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes; a multiple of 8.
    pub frag_offset: u16,
    /// DSCP and ECN byte.
    pub dscp_ecn: u8,
}

impl Ipv4Repr {
    /// A whole (unfragmented) datagram's header: no DF, DSCP/ECN 0, ident 0
    /// (the sender fills it in).
    pub const fn new(
        src_addr: Ipv4Addr,
        dst_addr: Ipv4Addr,
        protocol: IpProtocol,
        payload_len: usize,
        ttl: u8,
    ) -> Self {
        Ipv4Repr {
            src_addr,
            dst_addr,
            protocol,
            payload_len,
            ttl,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            dscp_ecn: 0,
        }
    }

    /// Parse a packet, validating it as [`Ipv4Packet::new_checked`] does;
    /// `Err(Checksum)` if `verify_checksum` and the header checksum is wrong.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>, verify_checksum: bool) -> Result<Self> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Self::from_fields(packet))
    }

    /// Parse the header quoted inside an ICMP error: only the fixed header
    /// must be present, options are skipped by IHL, and `total_len` may
    /// disagree with the (truncated) quote. Returns the repr and the quoted
    /// bytes after the header. The checksum is not checked.
    pub(crate) fn parse_quoted(data: &[u8]) -> Result<(Self, &[u8])> {
        let p = Ipv4Packet::new_unchecked(data);
        if data.len() < IPV4_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if p.version() != 4 || p.header_len() < IPV4_HEADER_LEN {
            return Err(Error::Malformed);
        }
        let rest = data.get(p.header_len()..).ok_or(Error::Truncated)?;
        Ok((Self::from_fields(&p), rest))
    }

    fn from_fields<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Self {
        Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()).saturating_sub(packet.header_len()),
            ttl: packet.ttl(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
            dscp_ecn: packet.dscp_ecn(),
        }
    }

    /// Header length written by [`Ipv4Repr::emit`]: 20.
    pub const fn header_len(&self) -> usize {
        IPV4_HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        IPV4_HEADER_LEN + self.payload_len
    }

    /// Write a 20-byte header, checksum included, at the start of `header`.
    ///
    /// `Err(Malformed)` if the total length exceeds 65535 or `frag_offset` is
    /// not a multiple of 8; `Err(Truncated)` if `header` is too short.
    pub fn emit(&self, header: &mut [u8]) -> Result<()> {
        let total = self
            .payload_len
            .checked_add(IPV4_HEADER_LEN)
            .filter(|&t| t <= IPV4_MAX_TOTAL_LEN)
            .ok_or(Error::Malformed)?;
        if self.frag_offset & 7 != 0 {
            return Err(Error::Malformed);
        }
        let h = header.get_mut(..IPV4_HEADER_LEN).ok_or(Error::Truncated)?;
        let mut p = Ipv4Packet::new_unchecked(h);
        p.set_version(4);
        p.set_header_len(IPV4_HEADER_LEN);
        p.set_dscp_ecn(self.dscp_ecn);
        p.set_total_len(total as u16);
        p.set_ident(self.ident);
        let mut flags = self.frag_offset >> 3;
        if self.dont_frag {
            flags |= FLAG_DF;
        }
        if self.more_frags {
            flags |= FLAG_MF;
        }
        field::set_u16(p.buffer, offs::FLAGS_FRAG, flags);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header of an ICMP echo request captured on Linux `lo` (`ping -s 16
    /// 127.0.0.1`): total 44 = 20 + 24, ident 0xc060, DF, TTL 64, checksum
    /// 0x7c6e (confirmed by tshark).
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x2c, 0xc0, 0x60, 0x40, 0x00, 0x40, 0x01, 0x7c, 0x6e, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00,
        0x00, 0x01,
    ];

    fn packet() -> [u8; 44] {
        let mut b = [0u8; 44];
        b[..20].copy_from_slice(&HEADER);
        b
    }

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::LOCALHOST,
            dst_addr: Ipv4Addr::LOCALHOST,
            protocol: IpProtocol::Icmp,
            payload_len: 24,
            ttl: 64,
            ident: 0xc060,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            dscp_ecn: 0,
        }
    }

    #[test]
    fn parse_known() {
        let b = packet();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0x7c6e);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.payload().len(), 24);
        assert_eq!(Ipv4Repr::parse(&p, true).unwrap(), repr());
    }

    #[test]
    fn emit_known() {
        let mut out = [0u8; 20];
        repr().emit(&mut out).unwrap();
        assert_eq!(out, HEADER);
    }

    #[test]
    fn bad_checksum() {
        let mut b = packet();
        b[11] ^= 1;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, true), Err(Error::Checksum));
        assert!(Ipv4Repr::parse(&p, false).is_ok());
    }

    #[test]
    fn validation() {
        let b = packet();
        assert_eq!(Ipv4Packet::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
        assert_eq!(Ipv4Packet::new_checked(&b[..43]).unwrap_err(), Error::Truncated);
        let mut v6 = packet();
        v6[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&v6[..]).unwrap_err(), Error::Malformed);
        let mut short_ihl = packet();
        short_ihl[0] = 0x44;
        assert_eq!(Ipv4Packet::new_checked(&short_ihl[..]).unwrap_err(), Error::Malformed);
        let mut tl = packet();
        tl[3] = 19;
        assert_eq!(Ipv4Packet::new_checked(&tl[..]).unwrap_err(), Error::Malformed);
        // Ethernet padding after total_len is allowed and excluded.
        let mut padded = [0u8; 60];
        padded[..44].copy_from_slice(&packet());
        let p = Ipv4Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload().len(), 24);
    }

    #[test]
    fn options_are_skipped() {
        // IHL 6 with a 4-byte Router Alert option; payload follows it.
        let mut b = [0u8; 28];
        b[0] = 0x46;
        b[3] = 28;
        b[9] = 17;
        b[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]);
        b[24] = 0xaa;
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.options(), &[0x94, 0x04, 0, 0]);
        assert_eq!(p.payload()[0], 0xaa);
        let r = Ipv4Repr::parse(&p, true).unwrap();
        assert_eq!(r.payload_len, 4);
        assert_eq!(r.protocol, IpProtocol::Udp);
    }

    #[test]
    fn emit_rejects() {
        let mut out = [0u8; 20];
        let mut r = repr();
        r.payload_len = 65515;
        assert!(r.emit(&mut out).is_ok());
        r.payload_len = 65516;
        assert_eq!(r.emit(&mut out), Err(Error::Malformed));
        r.payload_len = usize::MAX;
        assert_eq!(r.emit(&mut out), Err(Error::Malformed));
        let mut r = repr();
        r.frag_offset = 12;
        assert_eq!(r.emit(&mut out), Err(Error::Malformed));
        assert_eq!(repr().emit(&mut out[..19]), Err(Error::Truncated));
    }

    #[test]
    fn fragment_fields() {
        let mut r = repr();
        r.dont_frag = false;
        r.more_frags = true;
        r.frag_offset = 8 * 0x1fff;
        r.payload_len = 8;
        let mut b = [0u8; 28];
        r.emit(&mut b).unwrap();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.frag_offset(), 65528);
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(Ipv4Repr::parse(&p, true).unwrap(), r);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_dont_frag(true);
        p.set_more_frags(false);
        p.set_frag_offset(16);
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.frag_offset(), 16);
    }

    #[test]
    fn protocol_numbers() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
        assert_eq!(IpProtocol::from(6), IpProtocol::Tcp);
        assert_eq!(IpProtocol::from(58), IpProtocol::Icmpv6);
        assert_eq!(IpProtocol::from(44), IpProtocol::Ipv6Frag);
        assert_eq!(IpProtocol::from(200), IpProtocol::Unknown(200));
    }
}
