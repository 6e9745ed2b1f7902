//! TCP options (RFC 9293, RFC 7323 window scale and timestamps, RFC 2018
//! SACK).

use crate::error::{Error, Result};

/// Kind numbers.
mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WS: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
}

/// One TCP option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// Kind 0: no more options follow.
    EndOfList,
    /// Kind 1: padding.
    NoOperation,
    /// Kind 2, length 4.
    MaxSegmentSize(u16),
    /// Kind 3, length 3: the shift count.
    WindowScale(u8),
    /// Kind 4, length 2.
    SackPermitted,
    /// Kind 5, length 2 + 8n (n in 1..=4): (left edge, right edge) blocks,
    /// packed at the front. On emit only the `Some` entries are written,
    /// and an option with none is not written at all.
    SackRange([Option<(u32, u32)>; 4]),
    /// Kind 8, length 10.
    Timestamps {
        /// Sender's timestamp value.
        tsval: u32,
        /// Echoed timestamp.
        tsecr: u32,
    },
    /// Any other kind; `data` excludes the kind and length bytes.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option contents after the length byte.
        data: &'a [u8],
    },
}

fn be_u16(b: &[u8]) -> Result<u16> {
    match b {
        &[a, c] => Ok(u16::from_be_bytes([a, c])),
        _ => Err(Error::Malformed),
    }
}

fn be_u32(b: &[u8]) -> Option<u32> {
    b.first_chunk::<4>().map(|a| u32::from_be_bytes(*a))
}

impl<'a> TcpOption<'a> {
    /// Parse the option at the start of `buf`, returning the bytes after it.
    ///
    /// `Err(Truncated)` if `buf` is empty. `Err(Malformed)` if the length
    /// byte is missing, below 2, runs past the end of `buf`, or does not
    /// fit the kind (MSS 4, window scale 3, SACK-permitted 2, timestamps 10,
    /// SACK 2 + 8n with n in 1..=4).
    pub fn parse(buf: &'a [u8]) -> Result<(&'a [u8], TcpOption<'a>)> {
        let (&k, after_kind) = buf.split_first().ok_or(Error::Truncated)?;
        match k {
            kind::EOL => return Ok((after_kind, TcpOption::EndOfList)),
            kind::NOP => return Ok((after_kind, TcpOption::NoOperation)),
            _ => {}
        }
        let len = usize::from(*after_kind.first().ok_or(Error::Malformed)?);
        if len < 2 {
            return Err(Error::Malformed);
        }
        let data = buf.get(2..len).ok_or(Error::Malformed)?;
        let rest = buf.get(len..).ok_or(Error::Malformed)?;
        let opt = match k {
            kind::MSS => TcpOption::MaxSegmentSize(be_u16(data)?),
            kind::WS => match data {
                &[shift] => TcpOption::WindowScale(shift),
                _ => return Err(Error::Malformed),
            },
            kind::SACK_PERMITTED if data.is_empty() => TcpOption::SackPermitted,
            kind::SACK_PERMITTED => return Err(Error::Malformed),
            kind::SACK => {
                if data.is_empty() || data.len() % 8 != 0 || data.len() > 32 {
                    return Err(Error::Malformed);
                }
                let mut ranges = [None; 4];
                for (slot, block) in ranges.iter_mut().zip(data.chunks_exact(8)) {
                    let left = be_u32(block).ok_or(Error::Malformed)?;
                    let right = block.get(4..).and_then(be_u32).ok_or(Error::Malformed)?;
                    *slot = Some((left, right));
                }
                TcpOption::SackRange(ranges)
            }
            kind::TIMESTAMPS => {
                if data.len() != 8 {
                    return Err(Error::Malformed);
                }
                let tsval = be_u32(data).ok_or(Error::Malformed)?;
                let tsecr = data.get(4..).and_then(be_u32).ok_or(Error::Malformed)?;
                TcpOption::Timestamps { tsval, tsecr }
            }
            _ => TcpOption::Unknown { kind: k, data },
        };
        Ok((rest, opt))
    }

    /// Bytes [`TcpOption::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::SackRange(r) => match r.iter().flatten().count() {
                0 => 0,
                n => 2 + 8 * n,
            },
            TcpOption::Timestamps { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option at the start of `buf` and return the rest of `buf`.
    ///
    /// `Err(Truncated)` if `buf` is too short; `Err(Malformed)` for an
    /// `Unknown` option whose data does not fit the length byte.
    pub fn emit<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8]> {
        let len = self.buffer_len();
        let len_byte = u8::try_from(len).map_err(|_| Error::Malformed)?;
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let (out, rest) = buf.split_at_mut(len);
        match *self {
            TcpOption::EndOfList => out.copy_from_slice(&[kind::EOL]),
            TcpOption::NoOperation => out.copy_from_slice(&[kind::NOP]),
            TcpOption::MaxSegmentSize(mss) => {
                let [a, b] = mss.to_be_bytes();
                out.copy_from_slice(&[kind::MSS, 4, a, b]);
            }
            TcpOption::WindowScale(shift) => out.copy_from_slice(&[kind::WS, 3, shift]),
            TcpOption::SackPermitted => out.copy_from_slice(&[kind::SACK_PERMITTED, 2]),
            TcpOption::SackRange(ranges) => {
                if let Some((head, blocks)) = out.split_first_chunk_mut::<2>() {
                    *head = [kind::SACK, len_byte];
                    for ((l, r), block) in ranges.iter().flatten().zip(blocks.chunks_exact_mut(8)) {
                        block[..4].copy_from_slice(&l.to_be_bytes());
                        block[4..].copy_from_slice(&r.to_be_bytes());
                    }
                }
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                out[0] = kind::TIMESTAMPS;
                out[1] = 10;
                out[2..6].copy_from_slice(&tsval.to_be_bytes());
                out[6..10].copy_from_slice(&tsecr.to_be_bytes());
            }
            TcpOption::Unknown { kind, data } => {
                out[0] = kind;
                out[1] = len_byte;
                out[2..].copy_from_slice(data);
            }
        }
        Ok(rest)
    }
}

/// Iterator over the options of a TCP header.
///
/// Yields `EndOfList` (if present) and then stops; a malformed option
/// yields one `Err` and then the iterator ends.
#[derive(Clone, Debug)]
pub struct TcpOptionsIter<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> TcpOptionsIter<'a> {
    /// Iterate over `options` (the bytes between the fixed header and the
    /// data offset).
    pub fn new(options: &'a [u8]) -> Self {
        TcpOptionsIter { rest: options, done: false }
    }
}

impl<'a> Iterator for TcpOptionsIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        match TcpOption::parse(self.rest) {
            Ok((rest, opt)) => {
                self.rest = rest;
                self.done = opt == TcpOption::EndOfList;
                Some(Ok(opt))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for TcpOptionsIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn all(b: &[u8]) -> Vec<Result<TcpOption<'_>>> {
        TcpOptionsIter::new(b).collect()
    }

    #[test]
    fn linux_syn_options() {
        // MSS 65495, SACK_PERM, TS 4001962558/0, NOP, WS 10 (Linux on lo).
        let b = [
            0x02, 0x04, 0xff, 0xd7, 0x04, 0x02, 0x08, 0x0a, 0xee, 0x89, 0x1a, 0x3e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03,
            0x03, 0x0a,
        ];
        assert_eq!(
            all(&b),
            [
                Ok(TcpOption::MaxSegmentSize(65495)),
                Ok(TcpOption::SackPermitted),
                Ok(TcpOption::Timestamps { tsval: 4001962558, tsecr: 0 }),
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::WindowScale(10)),
            ]
        );
    }

    #[test]
    fn stops_after_eol() {
        let b = [1, 0, 2, 4, 5, 0xb4];
        assert_eq!(all(&b), [Ok(TcpOption::NoOperation), Ok(TcpOption::EndOfList)]);
    }

    #[test]
    fn malformed_lengths() {
        let cases: &[&[u8]] = &[
            &[2],                         // length byte missing
            &[2, 0, 0, 0],                // length 0
            &[2, 1, 0, 0],                // length 1
            &[2, 4, 5],                   // runs past the end
            &[2, 3, 5],                   // MSS must be 4
            &[3, 4, 1, 1],                // WS must be 3
            &[4, 3, 0],                   // SACK-permitted must be 2
            &[8, 9, 0, 0, 0, 0, 0, 0, 0], // TS must be 10
            &[5, 2],                      // SACK with no blocks
            &[5, 6, 0, 0, 0, 0],          // SACK not 2+8n
        ];
        for c in cases {
            let mut it = TcpOptionsIter::new(c);
            assert_eq!(it.next(), Some(Err(Error::Malformed)), "{c:?}");
            assert_eq!(it.next(), None, "{c:?}");
        }
        let mut five = std::vec![5u8, 42];
        five.extend_from_slice(&[0u8; 40]);
        assert_eq!(all(&five), [Err(Error::Malformed)]);
        assert_eq!(TcpOption::parse(&[]), Err(Error::Truncated));
    }

    #[test]
    fn unknown_and_sack() {
        let b = [30, 4, 0xab, 0xcd, 1, 1, 5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4];
        assert_eq!(
            all(&b),
            [
                Ok(TcpOption::Unknown { kind: 30, data: &[0xab, 0xcd] }),
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::SackRange([Some((1, 2)), Some((3, 4)), None, None])),
            ]
        );
    }

    #[test]
    fn emit_roundtrip() {
        let opts = [
            TcpOption::EndOfList,
            TcpOption::NoOperation,
            TcpOption::MaxSegmentSize(1460),
            TcpOption::WindowScale(7),
            TcpOption::SackPermitted,
            TcpOption::SackRange([Some((1, 2)), Some((5, 9)), Some((10, 11)), Some((u32::MAX, 0))]),
            TcpOption::Timestamps { tsval: 0xdeadbeef, tsecr: 7 },
            TcpOption::Unknown { kind: 99, data: &[1, 2, 3] },
        ];
        for o in opts {
            let mut buf = [0u8; 40];
            let rest_len = o.emit(&mut buf).unwrap().len();
            assert_eq!(rest_len, 40 - o.buffer_len());
            let (rest, parsed) = TcpOption::parse(&buf[..o.buffer_len()]).unwrap();
            assert!(rest.is_empty());
            assert_eq!(parsed, o);
            assert_eq!(o.emit(&mut buf[..o.buffer_len() - 1]), Err(Error::Truncated));
        }
        let empty = TcpOption::SackRange([None; 4]);
        assert_eq!(empty.buffer_len(), 0);
        assert_eq!(empty.emit(&mut [0u8; 3]).unwrap().len(), 3);
        let big = [0u8; 254];
        assert_eq!(TcpOption::Unknown { kind: 99, data: &big }.emit(&mut [0u8; 300]), Err(Error::Malformed));
    }
}
