//! UDP (RFC 768) over IPv4.
//!
//! The header can be emitted separately from the payload: the caller passes
//! a [`Checksum`] over the payload bytes, wherever they are.

use core::net::Ipv4Addr;

use crate::checksum::{self, Checksum};
use crate::error::{Error, Result};
use crate::field;

/// Source port, destination port, length, checksum.
pub const UDP_HEADER_LEN: usize = 8;

const PROTO_UDP: u8 = 17;

mod offs {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LEN: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A view of a UDP datagram; the buffer may extend past the length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wrap after checking `Err(Truncated)` if the buffer is shorter than 8
    /// bytes or than the length field, `Err(Malformed)` if the length field
    /// is below 8.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = UdpPacket { buffer };
        p.check_len()?;
        Ok(p)
    }

    fn check_len(&self) -> Result<()> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < UDP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < UDP_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > buf_len {
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

    /// Length field: header plus payload.
    pub fn len(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::LEN)
    }

    /// Whether the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= UDP_HEADER_LEN
    }

    /// Checksum field (0: not computed).
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Bytes `8..len` (empty if that range is not valid).
    pub fn payload(&self) -> &[u8] {
        field::slice(self.buffer.as_ref(), UDP_HEADER_LEN, usize::from(self.len()))
    }

    /// Whether the checksum over pseudo header and `len` bytes verifies.
    /// A zero checksum field (none sent) counts as valid.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let Some(bytes) = self.buffer.as_ref().get(..usize::from(len)) else {
            return false;
        };
        let mut c = checksum::pseudo_header_v4(src, dst, PROTO_UDP, len);
        c.add_bytes(bytes);
        c.folded() == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::SRC_PORT, v);
    }

    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::DST_PORT, v);
    }

    /// Set the length field.
    pub fn set_len(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::LEN, v);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), offs::CHECKSUM, v);
    }

    /// Mutable payload (`8..len`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        field::slice_mut(self.buffer.as_mut(), UDP_HEADER_LEN, len)
    }

    /// Compute and store the checksum over pseudo header and `len` bytes
    /// (a computed 0 is stored as 0xffff).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = self.len();
        let mut c = checksum::pseudo_header_v4(src, dst, PROTO_UDP, len);
        c.add_bytes(field::slice(self.buffer.as_ref(), 0, usize::from(len)));
        self.set_checksum(nonzero(c.finish()));
    }
}

/// In UDP a zero checksum means "none", so a computed 0 goes out as its
/// ones'-complement twin 0xffff (RFC 768).
fn nonzero(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// A parsed UDP header. The payload is `UdpPacket::payload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parse, validating as [`UdpPacket::new_checked`] does; with
    /// `verify_checksum`, a non-zero checksum must verify over the pseudo
    /// header and `len` bytes (`Err(Checksum)` otherwise).
    pub fn parse<T: AsRef<[u8]>>(
        packet: &UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(UdpRepr { src_port: packet.src_port(), dst_port: packet.dst_port() })
    }

    /// Always 8.
    pub const fn header_len(&self) -> usize {
        UDP_HEADER_LEN
    }

    /// Write the 8-byte header at the start of `header`, with the length
    /// field `8 + payload_len` and the checksum over pseudo header, header
    /// and `payload_checksum` (a [`Checksum`] over the payload bytes).
    ///
    /// `Err(Malformed)` if `8 + payload_len > 65535`; `Err(Truncated)` if
    /// `header` is shorter than 8.
    pub fn emit_header(
        &self,
        header: &mut [u8],
        payload_len: usize,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_checksum: Checksum,
    ) -> Result<()> {
        let (h, len) = self.emit_fields(header, payload_len)?;
        let mut c = checksum::pseudo_header_v4(src, dst, PROTO_UDP, len);
        c.add_bytes(&h[..]);
        c.add_checksum(payload_checksum);
        UdpPacket::new_unchecked(&mut h[..]).set_checksum(nonzero(c.finish()));
        Ok(())
    }

    /// Write the 8-byte header as [`emit_header`](Self::emit_header) does,
    /// but with the checksum left partial for the device to complete
    /// (checksum offload): the field holds the pseudo-header sum, folded
    /// and not complemented, so that the checksum of the header and
    /// payload with the field in place is the datagram's checksum.
    pub fn emit_header_partial(
        &self,
        header: &mut [u8],
        payload_len: usize,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<()> {
        let (h, len) = self.emit_fields(header, payload_len)?;
        UdpPacket::new_unchecked(&mut h[..])
            .set_checksum(checksum::pseudo_header_v4(src, dst, PROTO_UDP, len).folded());
        Ok(())
    }

    /// Writes the ports and the length of a datagram of `payload_len`
    /// bytes, and a zero checksum, into the first 8 bytes of `header`;
    /// those bytes and the length.
    fn emit_fields<'h>(&self, header: &'h mut [u8], payload_len: usize) -> Result<(&'h mut [u8; UDP_HEADER_LEN], u16)> {
        let len =
            payload_len.checked_add(UDP_HEADER_LEN).and_then(|l| u16::try_from(l).ok()).ok_or(Error::Malformed)?;
        let h = header.first_chunk_mut::<UDP_HEADER_LEN>().ok_or(Error::Truncated)?;
        let mut p = UdpPacket::new_unchecked(&mut h[..]);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(0);
        Ok((h, len))
    }

    /// Write header and `payload` contiguously at the start of `buf`;
    /// `Err(Truncated)` if `buf` is shorter than `8 + payload.len()`.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<()> {
        let total = payload.len().checked_add(UDP_HEADER_LEN).ok_or(Error::Malformed)?;
        if total > usize::from(u16::MAX) {
            return Err(Error::Malformed);
        }
        let buf = buf.get_mut(..total).ok_or(Error::Truncated)?;
        let (header, body) = buf.split_at_mut(UDP_HEADER_LEN);
        body.copy_from_slice(payload);
        let mut c = Checksum::new();
        c.add_bytes(payload);
        self.emit_header(header, payload.len(), src, dst, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "nagare" sent to 127.0.0.1:9 from port 60259, captured on Linux `lo`.
    /// `lo` leaves the checksum partial (0xfe21), so the field holds the
    /// full checksum 0xce3a instead, as confirmed by tshark.
    const DGRAM: [u8; 14] = [0xeb, 0x63, 0x00, 0x09, 0x00, 0x0e, 0xce, 0x3a, 0x6e, 0x61, 0x67, 0x61, 0x72, 0x65];
    const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

    #[test]
    fn parse_known() {
        let p = UdpPacket::new_checked(&DGRAM[..]).unwrap();
        assert_eq!(p.payload(), b"nagare");
        assert!(p.verify_checksum(LO, LO));
        let r = UdpRepr::parse(&p, LO, LO, true).unwrap();
        assert_eq!(r, UdpRepr { src_port: 60259, dst_port: 9 });
        // A different pseudo header must fail.
        let other = Ipv4Addr::new(127, 0, 0, 2);
        assert_eq!(UdpRepr::parse(&p, LO, other, true), Err(Error::Checksum));
    }

    #[test]
    fn emit_known() {
        let mut out = [0u8; 14];
        UdpRepr { src_port: 60259, dst_port: 9 }.emit(&mut out, b"nagare", LO, LO).unwrap();
        assert_eq!(out, DGRAM);
    }

    #[test]
    fn emit_partial_leaves_what_lo_leaves() {
        let mut out = DGRAM;
        UdpRepr { src_port: 60259, dst_port: 9 }.emit_header_partial(&mut out, 6, LO, LO).unwrap();
        assert_eq!(out[..6], DGRAM[..6]);
        assert_eq!(u16::from_be_bytes([out[6], out[7]]), 0xfe21);
        // Completing it (the sum over header and payload) gives the full checksum.
        assert_eq!(checksum::checksum(&out), 0xce3a);
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut b = DGRAM;
        b[6] = 0;
        b[7] = 0;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(UdpRepr::parse(&p, LO, LO, true).is_ok());
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the source port so that the full sum is 0xffff (checksum 0).
        let mut probe = [0u8; 8];
        let r = UdpRepr { src_port: 0, dst_port: 0 };
        r.emit_header(&mut probe, 0, LO, LO, Checksum::new()).unwrap();
        let ck0 = u16::from_be_bytes([probe[6], probe[7]]);
        // Raising src_port by ck0 lowers the checksum by ck0 to 0.
        let r = UdpRepr { src_port: ck0, dst_port: 0 };
        r.emit_header(&mut probe, 0, LO, LO, Checksum::new()).unwrap();
        assert_eq!(&probe[6..8], &[0xff, 0xff]);
        let p = UdpPacket::new_checked(&probe[..]).unwrap();
        assert!(p.verify_checksum(LO, LO));
    }

    #[test]
    fn lengths() {
        assert_eq!(UdpPacket::new_checked(&DGRAM[..7]).unwrap_err(), Error::Truncated);
        assert_eq!(UdpPacket::new_checked(&DGRAM[..13]).unwrap_err(), Error::Truncated);
        let mut b = DGRAM;
        b[5] = 7;
        assert_eq!(UdpPacket::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        // Trailing bytes past the length field are not payload.
        let mut long = [0u8; 20];
        long[..14].copy_from_slice(&DGRAM);
        let p = UdpPacket::new_checked(&long[..]).unwrap();
        assert_eq!(p.payload(), b"nagare");
        assert!(UdpRepr::parse(&p, LO, LO, true).is_ok());
        let r = UdpRepr { src_port: 1, dst_port: 2 };
        assert_eq!(r.emit_header(&mut [0u8; 8], 65528, LO, LO, Checksum::new()), Err(Error::Malformed));
        assert!(r.emit_header(&mut [0u8; 8], 65527, LO, LO, Checksum::new()).is_ok());
        assert_eq!(r.emit_header(&mut [0u8; 7], 0, LO, LO, Checksum::new()), Err(Error::Truncated));
        assert_eq!(r.emit(&mut [0u8; 13], b"nagare", LO, LO), Err(Error::Truncated));
    }
}
