//! TCP header (RFC 9293) with options. The state machine lives elsewhere.

use core::cmp::Ordering;
use core::fmt;
use core::net::IpAddr;
use core::ops;

use crate::checksum::{self, Checksum};
use crate::error::{Error, Result};
use crate::field;

mod options;
pub use options::{TcpOption, TcpOptionsIter};

/// Fixed header length (data offset 5).
pub const TCP_HEADER_LEN: usize = 20;
/// Largest header length (data offset 15).
pub const TCP_MAX_HEADER_LEN: usize = 60;
/// Room for options in the largest header.
const MAX_OPTIONS_LEN: usize = TCP_MAX_HEADER_LEN - TCP_HEADER_LEN;

const PROTO_TCP: u8 = 6;

mod offs {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// A sequence number, compared modulo 2^32.
///
/// `a < b` iff `(a - b) as i32 < 0` (RFC 1982 style). Two numbers exactly
/// 2^31 apart are unordered (`partial_cmp` is `None`), which keeps the
/// comparison antisymmetric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TcpSeqNumber(pub u32);

impl TcpSeqNumber {
    /// The later of the two (`self` if unordered).
    pub fn max(self, other: Self) -> Self {
        if self < other {
            other
        } else {
            self
        }
    }

    /// The earlier of the two (`self` if unordered).
    pub fn min(self, other: Self) -> Self {
        if other < self {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for TcpSeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl ops::Add<usize> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    /// Wrapping; `rhs` is taken modulo 2^32.
    fn add(self, rhs: usize) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl ops::Sub<usize> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    /// Wrapping; `rhs` is taken modulo 2^32.
    fn sub(self, rhs: usize) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_sub(rhs as u32))
    }
}

impl ops::AddAssign<usize> for TcpSeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl ops::SubAssign<usize> for TcpSeqNumber {
    fn sub_assign(&mut self, rhs: usize) {
        *self = *self - rhs;
    }
}

impl ops::Sub for TcpSeqNumber {
    type Output = i32;
    /// Signed distance `self - rhs`, wrapping.
    fn sub(self, rhs: TcpSeqNumber) -> i32 {
        self.0.wrapping_sub(rhs.0) as i32
    }
}

impl PartialOrd for TcpSeqNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match *self - *other {
            0 => Some(Ordering::Equal),
            i32::MIN => None,
            d if d < 0 => Some(Ordering::Less),
            _ => Some(Ordering::Greater),
        }
    }
}

/// TCP control bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// Reset.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// Acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// Urgent pointer significant.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECN echo.
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// Former ECN nonce bit, now AE (accurate ECN).
    pub const NS: TcpFlags = TcpFlags(0x100);

    /// Bits a header can carry here.
    const MASK: u16 = 0x1ff;

    /// No flags.
    pub const fn empty() -> Self {
        TcpFlags(0)
    }

    /// From raw bits; bits outside the 9 flag bits are dropped.
    pub const fn from_bits_truncate(bits: u16) -> Self {
        TcpFlags(bits & Self::MASK)
    }

    /// Raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag in `other` is set.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Set the flags in `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clear the flags in `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// Set or clear the flags in `other`.
    pub fn set(&mut self, other: TcpFlags, on: bool) {
        if on {
            self.insert(other)
        } else {
            self.remove(other)
        }
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(TcpFlags, &str); 9] = [
            (TcpFlags::FIN, "FIN"),
            (TcpFlags::SYN, "SYN"),
            (TcpFlags::RST, "RST"),
            (TcpFlags::PSH, "PSH"),
            (TcpFlags::ACK, "ACK"),
            (TcpFlags::URG, "URG"),
            (TcpFlags::ECE, "ECE"),
            (TcpFlags::CWR, "CWR"),
            (TcpFlags::NS, "NS"),
        ];
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("(none)")?;
        }
        Ok(())
    }
}

impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A view of a TCP segment. The buffer must be exactly the segment (the IPv4
/// payload), since the checksum and payload extend to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wrap after checking: `Err(Truncated)` if the buffer is shorter than
    /// 20 bytes or than the data offset, `Err(Malformed)` if the data offset
    /// is below 5.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = TcpPacket { buffer };
        p.check_len()?;
        Ok(p)
    }

    fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < TCP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < TCP_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if hl > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(field::u32_at(self.buffer.as_ref(), offs::SEQ))
    }

    /// Acknowledgment number (meaningful only with ACK).
    pub fn ack_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(field::u32_at(self.buffer.as_ref(), offs::ACK))
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(field::u8_at(self.buffer.as_ref(), offs::OFF_FLAGS) >> 4) * 4
    }

    /// Control bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(field::u16_at(self.buffer.as_ref(), offs::OFF_FLAGS))
    }

    /// Window field (unscaled).
    pub fn window_len(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::WINDOW)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::URGENT)
    }

    /// Option bytes (`20..header_len`).
    pub fn options(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), TCP_HEADER_LEN, self.header_len())
    }

    /// Iterator over the options.
    pub fn options_iter(&self) -> TcpOptionsIter<'_> {
        TcpOptionsIter::new(self.options())
    }

    /// Bytes after the header.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(self.header_len()..).unwrap_or(&[])
    }

    /// Whether the checksum over the pseudo header of `src` and `dst` (both
    /// IPv4 or both IPv6) and the whole buffer verifies (false for buffers
    /// longer than 65535 bytes and for addresses of two families).
    pub fn verify_checksum(&self, src: impl Into<IpAddr>, dst: impl Into<IpAddr>) -> bool {
        let buf = self.buffer.as_ref();
        if buf.len() > usize::from(u16::MAX) {
            return false;
        }
        let Some(mut c) = checksum::pseudo_header(src.into(), dst.into(), PROTO_TCP, buf.len()) else {
            return false;
        };
        c.add_bytes(buf);
        c.folded() == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::SRC_PORT, v);
    }

    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::DST_PORT, v);
    }

    /// Set the sequence number.
    pub fn set_seq_number(&mut self, v: TcpSeqNumber) {
        field::set_u32(self.buffer.as_mut(), offs::SEQ, v.0);
    }

    /// Set the acknowledgment number.
    pub fn set_ack_number(&mut self, v: TcpSeqNumber) {
        field::set_u32(self.buffer.as_mut(), offs::ACK, v.0);
    }

    /// Set the header length in bytes (stored as `len / 4`), keeping flags.
    pub fn set_header_len(&mut self, len: usize) {
        let off = ((len / 4) & 0x0f) as u16;
        let v = field::u16_at(self.buffer.as_ref(), offs::OFF_FLAGS);
        field::set_u16(self.buffer.as_mut(), offs::OFF_FLAGS, (v & 0x0fff) | (off << 12));
    }

    /// Set the control bits, keeping the data offset (reserved bits are
    /// cleared).
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let v = field::u16_at(self.buffer.as_ref(), offs::OFF_FLAGS);
        field::set_u16(self.buffer.as_mut(), offs::OFF_FLAGS, (v & 0xf000) | flags.bits());
    }

    /// Set the window field.
    pub fn set_window_len(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::WINDOW, v);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::CHECKSUM, v);
    }

    /// Set the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::URGENT, v);
    }

    /// Mutable option bytes (`20..header_len`).
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        field::slice_mut(self.buffer.as_mut(), TCP_HEADER_LEN, hl)
    }

    /// Mutable bytes after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        self.buffer.as_mut().get_mut(hl..).unwrap_or(&mut [])
    }

    /// Compute and store the checksum over pseudo header and whole buffer;
    /// `Err(Malformed)` (the field left zero) for a buffer longer than
    /// 65535 bytes or addresses of two families.
    pub fn fill_checksum(&mut self, src: impl Into<IpAddr>, dst: impl Into<IpAddr>) -> Result<()> {
        self.set_checksum(0);
        let buf = self.buffer.as_ref();
        if buf.len() > usize::from(u16::MAX) {
            return Err(Error::Malformed);
        }
        let mut c = checksum::pseudo_header(src.into(), dst.into(), PROTO_TCP, buf.len()).ok_or(Error::Malformed)?;
        c.add_bytes(buf);
        self.set_checksum(c.finish());
        Ok(())
    }
}

/// A parsed TCP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: TcpSeqNumber,
    /// `Some` iff the ACK flag is set. On emit this decides the ACK bit.
    pub ack_number: Option<TcpSeqNumber>,
    /// All control bits as on the wire, ACK included.
    pub flags: TcpFlags,
    /// Window field (unscaled).
    pub window_len: u16,
    /// Urgent pointer field.
    pub urgent_pointer: u16,
    /// MSS option.
    pub max_seg_size: Option<u16>,
    /// Window scale option (shift count as received, not clamped).
    pub window_scale: Option<u8>,
    /// SACK-permitted option.
    pub sack_permitted: bool,
    /// SACK blocks, packed at the front. On emit, blocks that do not fit in
    /// the 40 option bytes next to the other options are dropped.
    pub sack_ranges: [Option<(u32, u32)>; 4],
    /// Timestamps option: (tsval, tsecr).
    pub timestamp: Option<(u32, u32)>,
    /// Payload length.
    pub payload_len: usize,
}

/// Where [`TcpRepr::emit_header`] puts the options: each group is padded
/// with leading NOPs to a multiple of 4, in the order Linux uses
/// (MSS, SACK-permitted + timestamps, window scale, SACK blocks).
struct OptionsLayout {
    len: usize,
    sack_blocks: usize,
}

impl TcpRepr {
    /// A segment with no options and no payload (an ACK, a RST, a FIN), a
    /// zero window and no urgent data; callers set what differs.
    pub const fn bare(
        src_port: u16,
        dst_port: u16,
        seq_number: TcpSeqNumber,
        ack_number: Option<TcpSeqNumber>,
        flags: TcpFlags,
    ) -> Self {
        TcpRepr {
            src_port,
            dst_port,
            seq_number,
            ack_number,
            flags,
            window_len: 0,
            urgent_pointer: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            payload_len: 0,
        }
    }

    /// Parse a segment, validating as [`TcpPacket::new_checked`] does;
    /// `Err(Checksum)` if `verify_checksum` and the checksum is wrong,
    /// `Err(Malformed)` if the option list is malformed. Unknown options are
    /// skipped.
    pub fn parse<T: AsRef<[u8]>>(
        packet: &TcpPacket<T>,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        verify_checksum: bool,
    ) -> Result<Self> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let flags = packet.flags();
        let mut repr = TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: flags.contains(TcpFlags::ACK).then(|| packet.ack_number()),
            flags,
            window_len: packet.window_len(),
            urgent_pointer: packet.urgent_at(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            payload_len: packet.payload().len(),
        };
        for opt in packet.options_iter() {
            match opt.map_err(|_| Error::Malformed)? {
                TcpOption::EndOfList | TcpOption::NoOperation => {}
                TcpOption::MaxSegmentSize(v) => repr.max_seg_size = Some(v),
                TcpOption::WindowScale(v) => repr.window_scale = Some(v),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::SackRange(r) => repr.sack_ranges = r,
                TcpOption::Timestamps { tsval, tsecr } => repr.timestamp = Some((tsval, tsecr)),
                TcpOption::Unknown { .. } => {}
            }
        }
        Ok(repr)
    }

    fn options_layout(&self) -> OptionsLayout {
        let mut len = 0;
        if self.max_seg_size.is_some() {
            len += 4;
        }
        if self.timestamp.is_some() {
            // SACK-permitted (2) + TS (10), or NOP NOP + TS.
            len += 12;
        } else if self.sack_permitted {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        let wanted = self.sack_ranges.iter().flatten().count();
        let room = MAX_OPTIONS_LEN.saturating_sub(len + 4) / 8;
        let sack_blocks = wanted.min(room);
        if sack_blocks > 0 {
            len += 4 + 8 * sack_blocks;
        }
        OptionsLayout { len, sack_blocks }
    }

    /// Header length with options: 20 + options padded to a multiple of 4
    /// (at most 60).
    pub fn header_len(&self) -> usize {
        TCP_HEADER_LEN + self.options_layout().len
    }

    /// Header plus payload length.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Sequence space the segment occupies: payload plus one each for SYN
    /// and FIN.
    pub fn sequence_len(&self) -> usize {
        self.payload_len
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }

    /// Write [`TcpRepr::header_len`] bytes at the start of `header`,
    /// options included, with the checksum over pseudo header, header and
    /// `payload_checksum` (a [`Checksum`] over the `payload_len` payload
    /// bytes).
    ///
    /// The ACK bit is set iff `ack_number` is `Some`; other flags are written
    /// as given. `Err(Truncated)` if `header` is too short; `Err(Malformed)`
    /// if header plus payload exceed 65535 bytes or `src` and `dst` are of
    /// two families (the pseudo header is IPv4's or IPv6's, by theirs).
    pub fn emit_header(
        &self,
        header: &mut [u8],
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        payload_checksum: Checksum,
    ) -> Result<()> {
        let (pseudo, h) = self.emit_header_fields(header, src, dst)?;
        let mut c = pseudo;
        c.add_bytes(h);
        c.add_checksum(payload_checksum);
        TcpPacket::new_unchecked(h).set_checksum(c.finish());
        Ok(())
    }

    /// Like [`emit_header`](Self::emit_header), for checksum offload: the
    /// checksum field gets only the pseudo-header sum, folded and not
    /// complemented, which a device completes by summing from the TCP
    /// header to the end of the segment (Linux's `CHECKSUM_PARTIAL`).
    pub fn emit_header_partial(&self, header: &mut [u8], src: impl Into<IpAddr>, dst: impl Into<IpAddr>) -> Result<()> {
        let (pseudo, h) = self.emit_header_fields(header, src, dst)?;
        TcpPacket::new_unchecked(h).set_checksum(pseudo.folded());
        Ok(())
    }

    /// Writes every header field but the checksum (left zero); returns the
    /// pseudo-header sum and the header bytes written.
    fn emit_header_fields<'h>(
        &self,
        header: &'h mut [u8],
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
    ) -> Result<(Checksum, &'h mut [u8])> {
        let layout = self.options_layout();
        let hl = TCP_HEADER_LEN + layout.len;
        let seg_len = hl.checked_add(self.payload_len).and_then(|l| u16::try_from(l).ok()).ok_or(Error::Malformed)?;
        let h = header.get_mut(..hl).ok_or(Error::Truncated)?;
        let (fixed, opts) = h.split_at_mut(TCP_HEADER_LEN);
        let mut p = TcpPacket::new_unchecked(&mut *fixed);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number.unwrap_or_default());
        let mut flags = self.flags;
        flags.set(TcpFlags::ACK, self.ack_number.is_some());
        p.set_header_len(hl);
        p.set_flags(flags);
        p.set_window_len(self.window_len);
        p.set_checksum(0);
        p.set_urgent_at(self.urgent_pointer);
        self.emit_options(opts, layout.sack_blocks)?;
        let pseudo = checksum::pseudo_header(src.into(), dst.into(), PROTO_TCP, usize::from(seg_len));
        Ok((pseudo.ok_or(Error::Malformed)?, h))
    }

    fn emit_options(&self, mut buf: &mut [u8], sack_blocks: usize) -> Result<()> {
        const NOP: TcpOption<'static> = TcpOption::NoOperation;
        if let Some(mss) = self.max_seg_size {
            buf = TcpOption::MaxSegmentSize(mss).emit(buf)?;
        }
        if let Some((tsval, tsecr)) = self.timestamp {
            if self.sack_permitted {
                buf = TcpOption::SackPermitted.emit(buf)?;
            } else {
                buf = NOP.emit(NOP.emit(buf)?)?;
            }
            buf = TcpOption::Timestamps { tsval, tsecr }.emit(buf)?;
        } else if self.sack_permitted {
            buf = TcpOption::SackPermitted.emit(NOP.emit(NOP.emit(buf)?)?)?;
        }
        if let Some(shift) = self.window_scale {
            buf = TcpOption::WindowScale(shift).emit(NOP.emit(buf)?)?;
        }
        if sack_blocks > 0 {
            let mut ranges = [None; 4];
            for (slot, r) in ranges.iter_mut().zip(self.sack_ranges.iter().flatten()).take(sack_blocks) {
                *slot = Some(*r);
            }
            buf = TcpOption::SackRange(ranges).emit(NOP.emit(NOP.emit(buf)?)?)?;
        }
        // The layout leaves no room, but fill any anyway rather than leave
        // stale bytes.
        buf.fill(0);
        Ok(())
    }

    /// Write header and `payload` contiguously at the start of `buf`
    /// (`payload.len()` overrides `payload_len`).
    pub fn emit(&self, buf: &mut [u8], payload: &[u8], src: impl Into<IpAddr>, dst: impl Into<IpAddr>) -> Result<()> {
        let repr = TcpRepr { payload_len: payload.len(), ..*self };
        let hl = repr.header_len();
        let total = hl.checked_add(payload.len()).ok_or(Error::Malformed)?;
        if total > usize::from(u16::MAX) {
            return Err(Error::Malformed);
        }
        let buf = buf.get_mut(..total).ok_or(Error::Truncated)?;
        let (header, body) = buf.split_at_mut(hl);
        body.copy_from_slice(payload);
        let mut c = Checksum::new();
        c.add_bytes(payload);
        repr.emit_header(header, src, dst, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

    /// SYN from `connect()` to 127.0.0.1 captured on Linux `lo` (options:
    /// MSS, SACK_PERM, TS, NOP, WS as Linux sends them). `lo` leaves the
    /// checksum partial, so the field holds the full checksum 0x177b,
    /// confirmed by tshark.
    const SYN: [u8; 40] = [
        0xb1, 0x5a, 0x81, 0x37, 0x44, 0xaf, 0xb8, 0x7a, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xff, 0xd7, 0x17, 0x7b,
        0x00, 0x00, 0x02, 0x04, 0xff, 0xd7, 0x04, 0x02, 0x08, 0x0a, 0xee, 0x89, 0x1a, 0x3e, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x03, 0x03, 0x0a,
    ];

    /// The following PSH|ACK carrying "hello" (NOP NOP TS), same capture;
    /// checksum 0x1d23.
    const DATA: [u8; 37] = [
        0xb1, 0x5a, 0x81, 0x37, 0x44, 0xaf, 0xb8, 0x7b, 0xb7, 0xe2, 0x08, 0xd1, 0x80, 0x18, 0x00, 0x40, 0x1d, 0x23,
        0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0xee, 0x89, 0x1a, 0x3e, 0xcc, 0xd8, 0x51, 0x67, 0x68, 0x65, 0x6c, 0x6c,
        0x6f,
    ];

    fn syn_repr() -> TcpRepr {
        TcpRepr {
            src_port: 45402,
            dst_port: 33079,
            seq_number: TcpSeqNumber(1152366714),
            ack_number: None,
            flags: TcpFlags::SYN,
            window_len: 65495,
            urgent_pointer: 0,
            max_seg_size: Some(65495),
            window_scale: Some(10),
            sack_permitted: true,
            sack_ranges: [None; 4],
            timestamp: Some((4001962558, 0)),
            payload_len: 0,
        }
    }

    #[test]
    fn parse_captured_syn() {
        let p = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(p.header_len(), 40);
        assert!(p.verify_checksum(LO, LO));
        assert_eq!(TcpRepr::parse(&p, LO, LO, true).unwrap(), syn_repr());
    }

    #[test]
    fn emit_matches_captured_syn() {
        let r = syn_repr();
        assert_eq!(r.header_len(), 40);
        let mut out = [0u8; 40];
        r.emit_header(&mut out, LO, LO, Checksum::new()).unwrap();
        assert_eq!(out, SYN);
    }

    #[test]
    fn captured_data_segment() {
        let p = TcpPacket::new_checked(&DATA[..]).unwrap();
        let r = TcpRepr::parse(&p, LO, LO, true).unwrap();
        assert_eq!(r.flags, TcpFlags::PSH | TcpFlags::ACK);
        assert_eq!(r.ack_number, Some(TcpSeqNumber(3085043921)));
        assert_eq!(r.timestamp, Some((4001962558, 3436728679)));
        assert_eq!(r.payload_len, 5);
        assert_eq!(p.payload(), b"hello");
        let mut out = [0u8; 37];
        r.emit(&mut out, b"hello", LO, LO).unwrap();
        assert_eq!(out, DATA);
        // Header alone with the payload summed separately in odd pieces.
        let mut c = Checksum::new();
        c.add_bytes(b"hel");
        c.add_bytes(b"lo");
        let mut hdr = [0u8; 32];
        r.emit_header(&mut hdr, LO, LO, c).unwrap();
        assert_eq!(hdr, DATA[..32]);
    }

    #[test]
    fn checksum_and_validation_errors() {
        let mut b = SYN;
        b[5] ^= 1;
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, LO, LO, true), Err(Error::Checksum));
        assert_eq!(TcpPacket::new_checked(&SYN[..19]).unwrap_err(), Error::Truncated);
        assert_eq!(TcpPacket::new_checked(&SYN[..39]).unwrap_err(), Error::Truncated);
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        // Window scale option with a wrong length.
        let mut b = SYN;
        b[38] = 4;
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, LO, LO, false), Err(Error::Malformed));
    }

    #[test]
    fn options_layouts() {
        let mut r = syn_repr();
        r.sack_ranges = [Some((1, 2)), Some((3, 4)), Some((5, 6)), Some((7, 8))];
        // MSS 4 + SACKOK/TS 12 + WS 4 leaves 20 bytes: 2 SACK blocks.
        assert_eq!(r.header_len(), 60);
        let mut out = [0u8; 60];
        r.emit_header(&mut out, LO, LO, Checksum::new()).unwrap();
        let p = TcpPacket::new_checked(&out[..]).unwrap();
        let back = TcpRepr::parse(&p, LO, LO, true).unwrap();
        assert_eq!(back.sack_ranges, [Some((1, 2)), Some((3, 4)), None, None]);
        // Timestamps only (Linux data segment): 3 blocks fit.
        r.max_seg_size = None;
        r.window_scale = None;
        r.sack_permitted = false;
        assert_eq!(r.header_len(), 20 + 12 + 4 + 24);
        // Nothing else: all 4 blocks.
        r.timestamp = None;
        assert_eq!(r.header_len(), 20 + 4 + 32);
        r.sack_ranges = [None; 4];
        assert_eq!(r.header_len(), 20);
        r.sack_permitted = true;
        assert_eq!(r.header_len(), 24);
        let mut out = [0u8; 24];
        r.emit_header(&mut out, LO, LO, Checksum::new()).unwrap();
        assert_eq!(&out[20..], &[1, 1, 4, 2]);
        assert_eq!(r.emit_header(&mut out[..23], LO, LO, Checksum::new()), Err(Error::Truncated));
        r.payload_len = 65535 - 24;
        assert!(r.emit_header(&mut out, LO, LO, Checksum::new()).is_ok());
        r.payload_len += 1;
        assert_eq!(r.emit_header(&mut out, LO, LO, Checksum::new()), Err(Error::Malformed));
    }

    #[test]
    fn ack_number_decides_ack_bit() {
        let mut r = syn_repr();
        r.ack_number = Some(TcpSeqNumber(5));
        let mut out = [0u8; 40];
        r.emit_header(&mut out, LO, LO, Checksum::new()).unwrap();
        let p = TcpPacket::new_checked(&out[..]).unwrap();
        assert_eq!(p.flags(), TcpFlags::SYN | TcpFlags::ACK);
        let mut r = syn_repr();
        r.flags = TcpFlags::ACK | TcpFlags::FIN;
        r.emit_header(&mut out, LO, LO, Checksum::new()).unwrap();
        let p = TcpPacket::new_checked(&out[..]).unwrap();
        assert_eq!(p.flags(), TcpFlags::FIN);
        assert_eq!(p.ack_number(), TcpSeqNumber(0));
    }

    #[test]
    fn seq_wrapping_compare() {
        let a = TcpSeqNumber(0xffff_fff0);
        let b = a + 0x20;
        assert_eq!(b, TcpSeqNumber(0x10));
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - a, 0x20);
        assert_eq!(a - b, -0x20);
        assert_eq!(b - 0x20usize, a);
        assert_eq!(a.max(b), b);
        assert_eq!(b.min(a), a);
        assert!(TcpSeqNumber(5) <= TcpSeqNumber(5));
        // Just under half the space apart: ordered; exactly half: unordered.
        let c = TcpSeqNumber(0);
        assert!(c < TcpSeqNumber(0x7fff_ffff));
        assert!(c > TcpSeqNumber(0x8000_0001));
        let h = TcpSeqNumber(0x8000_0000);
        assert_eq!(c.partial_cmp(&h), None);
        assert_eq!(h.partial_cmp(&c), None);
        assert!(!c.lt(&h) && !h.lt(&c) && !c.gt(&h));
        let mut d = c;
        d += 3;
        d -= 1;
        assert_eq!(d, TcpSeqNumber(2));
    }

    #[test]
    fn flags_ops() {
        let mut f = TcpFlags::SYN | TcpFlags::ACK;
        assert!(f.contains(TcpFlags::SYN));
        assert!(!f.contains(TcpFlags::SYN | TcpFlags::FIN));
        assert!(f.intersects(TcpFlags::SYN | TcpFlags::FIN));
        f.insert(TcpFlags::FIN);
        f.remove(TcpFlags::SYN);
        assert_eq!(f.bits(), 0x011);
        assert_eq!(std::format!("{f:?}"), "FIN|ACK");
        assert_eq!(std::format!("{:?}", TcpFlags::empty()), "(none)");
        assert_eq!(TcpFlags::from_bits_truncate(0xffff).bits(), 0x1ff);
        let r = syn_repr();
        assert_eq!(r.sequence_len(), 1);
    }

    #[test]
    fn setters_keep_neighbours() {
        let mut b = SYN;
        let mut p = TcpPacket::new_checked(&mut b[..]).unwrap();
        p.set_flags(TcpFlags::RST);
        assert_eq!(p.header_len(), 40);
        p.set_header_len(24);
        assert_eq!(p.flags(), TcpFlags::RST);
        p.set_header_len(40);
        p.fill_checksum(LO, LO).unwrap();
        assert!(p.verify_checksum(LO, LO));
    }

    #[test]
    fn over_ipv6_the_checksum_covers_the_ipv6_pseudo_header() {
        let src: Ipv6Addr = "fd00::1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::2".parse().unwrap();
        let repr = syn_repr();
        let mut buf = [0u8; 64];
        repr.emit(&mut buf, b"six", src, dst).unwrap();
        let len = repr.header_len() + 3;
        let p = TcpPacket::new_checked(&buf[..len]).unwrap();
        assert!(p.verify_checksum(src, dst));
        assert!(!p.verify_checksum(dst, Ipv6Addr::LOCALHOST));
        // The same sum by hand: IPv6 pseudo header (32-bit length) and segment.
        let mut c = checksum::pseudo_header_v6(src, dst, PROTO_TCP, len as u32);
        c.add_bytes(&buf[..len]);
        assert_eq!(c.folded(), 0xffff);
        let parsed = TcpRepr::parse(&p, src, dst, true).unwrap();
        assert_eq!(parsed.max_seg_size, repr.max_seg_size);
        assert_eq!(TcpRepr::parse(&p, LO, LO, true), Err(Error::Checksum));
    }

    #[test]
    fn addresses_of_two_families_are_refused() {
        let six = Ipv6Addr::LOCALHOST;
        let mut buf = [0u8; 64];
        assert_eq!(syn_repr().emit(&mut buf, b"", LO, six), Err(Error::Malformed));
        assert_eq!(syn_repr().emit_header_partial(&mut buf, six, LO), Err(Error::Malformed));
        syn_repr().emit(&mut buf, b"", LO, LO).unwrap();
        let mut p = TcpPacket::new_unchecked(&mut buf[..syn_repr().header_len()]);
        assert!(!p.verify_checksum(LO, six));
        assert_eq!(p.fill_checksum(six, LO), Err(Error::Malformed));
    }
}
