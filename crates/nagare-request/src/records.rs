//! Datagram records: how netd packs several received datagrams into the
//! one buffer of a `RECVFROM` that carries the [`BATCH`](crate::BATCH)
//! flag, so that one completion, and one wake-up of the application,
//! brings as many datagrams as the buffer holds.
//!
//! A record is a header and the payload, and the next record starts at
//! the next multiple of 8 bytes from the start of the receive's piece:
//!
//! | bytes | meaning |
//! |---|---|
//! | 0..8 | the sender's word, as [`encode_sender`](crate::encode_sender) gives it, little-endian |
//! | 8..12 | the datagram's whole length, little-endian |
//! | 12..16 | the payload bytes that follow (less than the whole length only for a first record cut to the buffer) |
//! | 16..32 | an IPv6 sender's address (the word has [`SENDER6`](crate::SENDER6)), its 16 bytes in network order; absent for an IPv4 sender |
//! | 16.. or 32.. | the payload |
//!
//! The completion's `aux[0]` is the number of records, `aux[2]`
//! [`RECORDS`](crate::RECORDS), and the piece's `len` the bytes they take
//! in all. A reader trusts none of it: [`Records`] checks every header
//! against the bytes there are.

/// Bytes of a record's header.
pub const RECORD_HEADER: usize = 16;

/// Bytes of an IPv6 sender's address, after the header.
pub const RECORD_ADDR6: usize = 16;

/// Bytes before the payload of a record whose sender's word is `from`:
/// the header, and an IPv6 sender's address.
pub fn record_head(from: u64) -> usize {
    if from & crate::SENDER6 != 0 {
        RECORD_HEADER + RECORD_ADDR6
    } else {
        RECORD_HEADER
    }
}

/// Where the record after one at `at` starts, from `from` (its sender's
/// word) with `payload` bytes.
pub fn next_record(at: usize, from: u64, payload: usize) -> usize {
    (at + record_head(from) + payload).next_multiple_of(8)
}

/// A record's header for a datagram from `from` (encoded) of `whole`
/// bytes, `copied` of which follow.
pub fn record_header(from: u64, whole: u32, copied: u32) -> [u8; RECORD_HEADER] {
    let mut h = [0u8; RECORD_HEADER];
    h[..8].copy_from_slice(&from.to_le_bytes());
    h[8..12].copy_from_slice(&whole.to_le_bytes());
    h[12..].copy_from_slice(&copied.to_le_bytes());
    h
}

/// A record read back: the sender's word, the datagram's whole length,
/// and where its payload (and an IPv6 sender's address) lies in the
/// buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The sender's word.
    pub from: u64,
    /// Where an IPv6 sender's address lies ([`RECORD_ADDR6`] bytes).
    pub addr6: Option<usize>,
    /// The datagram's whole length.
    pub whole: u32,
    /// Where its payload lies in the buffer.
    pub payload: core::ops::Range<usize>,
}

/// A header that does not fit what the buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadRecord {
    /// Where the record was to start.
    pub at: usize,
}

/// Reads the record at `at` of a buffer whose first `len` bytes are
/// records, given its header (read from there); the next record's offset
/// with it.
pub fn read_record(header: &[u8; RECORD_HEADER], at: usize, len: usize) -> Result<(Record, usize), BadRecord> {
    let u32_at = |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let mut from = [0u8; 8];
    from.copy_from_slice(&header[..8]);
    let (whole, copied) = (u32_at(8), u32_at(12));
    let from = u64::from_le_bytes(from);
    let start = at.checked_add(record_head(from)).ok_or(BadRecord { at })?;
    let end = start.checked_add(copied as usize).ok_or(BadRecord { at })?;
    if !at.is_multiple_of(8) || end > len || copied > whole {
        return Err(BadRecord { at });
    }
    let addr6 = (from & crate::SENDER6 != 0).then_some(at + RECORD_HEADER);
    let record = Record { from, addr6, whole, payload: start..end };
    Ok((record, next_record(at, from, copied as usize)))
}

/// The records of a buffer's first `len` bytes, `count` of them, read
/// one at a time; a bad header or a count the bytes do not hold ends
/// them with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Records {
    /// Where the next record starts.
    pub at: usize,
    /// Records not yet read.
    pub left: u32,
    /// Bytes of the buffer the records take.
    pub len: usize,
}

impl Records {
    /// `count` records in a buffer's first `len` bytes.
    pub fn new(count: u32, len: usize) -> Records {
        Records { at: 0, left: count, len }
    }

    /// Where the next record's header is, if one is left and the buffer
    /// holds a header there.
    pub fn next_header(&self) -> Result<Option<usize>, BadRecord> {
        if self.left == 0 {
            return Ok(None);
        }
        match self.at.checked_add(RECORD_HEADER) {
            Some(end) if end <= self.len => Ok(Some(self.at)),
            _ => Err(BadRecord { at: self.at }),
        }
    }

    /// Takes the next record, given the header read from
    /// [`Records::next_header`]'s offset.
    pub fn take(&mut self, header: &[u8; RECORD_HEADER]) -> Result<Record, BadRecord> {
        if self.left == 0 {
            return Err(BadRecord { at: self.at });
        }
        let (record, next) = read_record(header, self.at, self.len)?;
        self.at = next;
        self.left -= 1;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `datagrams` (sender, whole length, payload) as netd does (an
    /// IPv6 sender's address all 0xee).
    fn pack(datagrams: &[(u64, u32, &[u8])], size: usize) -> (Vec<u8>, usize) {
        let mut buf = vec![0u8; size];
        let mut at = 0;
        for &(from, whole, payload) in datagrams {
            buf[at..at + RECORD_HEADER].copy_from_slice(&record_header(from, whole, payload.len() as u32));
            let head = record_head(from);
            buf[at + RECORD_HEADER..at + head].fill(0xee);
            buf[at + head..at + head + payload.len()].copy_from_slice(payload);
            at = next_record(at, from, payload.len());
        }
        (buf, at)
    }

    fn unpack(buf: &[u8], count: u32, len: usize) -> Result<Vec<(u64, u32, Vec<u8>)>, BadRecord> {
        let mut records = Records::new(count, len);
        let mut out = Vec::new();
        while let Some(at) = records.next_header()? {
            let header: [u8; RECORD_HEADER] = buf[at..at + RECORD_HEADER].try_into().unwrap();
            let r = records.take(&header)?;
            out.push((r.from, r.whole, buf[r.payload].to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn records_read_back_as_they_were_packed() {
        let datagrams: [(u64, u32, &[u8]); 4] =
            [(7, 3, b"abc"), (8, 0, b""), (u64::MAX >> 1, 9, b"123456789"), (1, 20, b"cut to the buffer")];
        let (buf, len) = pack(&datagrams, 256);
        assert_eq!(len, 24 + 16 + 32 + 40);
        let back = unpack(&buf, 4, len).unwrap();
        let expected: Vec<(u64, u32, Vec<u8>)> = datagrams.iter().map(|&(f, w, p)| (f, w, p.to_vec())).collect();
        assert_eq!(back, expected);
        // Fewer records than there are: the rest unread.
        assert_eq!(unpack(&buf, 2, len).unwrap().len(), 2);
        // One more taken than counted: an error, not a wrap.
        let mut records = Records::new(0, len);
        let header: [u8; RECORD_HEADER] = buf[..RECORD_HEADER].try_into().unwrap();
        assert_eq!(records.take(&header), Err(BadRecord { at: 0 }));
    }

    #[test]
    fn ipv6_senders_take_their_address_after_the_header() {
        let six = crate::SENDER6 | 53;
        let datagrams: [(u64, u32, &[u8]); 3] = [(six, 3, b"abc"), (7, 2, b"de"), (six, 0, b"")];
        let (buf, len) = pack(&datagrams, 256);
        assert_eq!(len, 40 + 24 + 32);
        let mut records = Records::new(3, len);
        let mut addrs = Vec::new();
        while let Some(at) = records.next_header().unwrap() {
            let header: [u8; RECORD_HEADER] = buf[at..at + RECORD_HEADER].try_into().unwrap();
            let r = records.take(&header).unwrap();
            addrs.push(r.addr6);
            if let Some(a) = r.addr6 {
                assert!(buf[a..a + RECORD_ADDR6].iter().all(|&b| b == 0xee));
            }
        }
        assert_eq!(addrs, [Some(16), None, Some(64 + 16)]);
        // An IPv6 record whose address would pass the end.
        assert_eq!(unpack(&buf, 1, 20), Err(BadRecord { at: 0 }));
    }

    #[test]
    fn headers_that_do_not_fit_the_bytes_are_refused() {
        let (mut buf, len) = pack(&[(7, 3, b"abc")], 64);
        // More records than the bytes hold.
        assert_eq!(unpack(&buf, 2, len), Err(BadRecord { at: 24 }));
        // A payload past the end, or more than the whole.
        buf[12..16].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(unpack(&buf, 1, len), Err(BadRecord { at: 0 }));
        buf[12..16].copy_from_slice(&4u32.to_le_bytes());
        assert_eq!(unpack(&buf, 1, len), Err(BadRecord { at: 0 }));
        buf[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        buf[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(unpack(&buf, 1, len), Err(BadRecord { at: 0 }));
        // A length shorter than one header.
        assert_eq!(unpack(&buf, 1, 10), Err(BadRecord { at: 0 }));
        assert_eq!(read_record(&[0; RECORD_HEADER], usize::MAX - 4, usize::MAX), Err(BadRecord { at: usize::MAX - 4 }));
        assert_eq!(read_record(&[0; RECORD_HEADER], 4, 64), Err(BadRecord { at: 4 }), "not on a multiple of 8");
    }

    #[test]
    fn any_bytes_read_as_records_or_an_error_never_a_panic() {
        // A deterministic walk over many headers: small xorshift.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut buf = [0u8; 96];
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (x.rotate_left(i as u32 * 7) & 0xff) as u8;
                if i % 16 >= 13 {
                    // Mostly small lengths, so that some records are whole.
                    *b = 0;
                }
            }
            let len = (x >> 56) as usize % 97;
            let count = (x >> 48) as u32 % 8;
            if let Ok(records) = unpack(&buf, count, len) {
                assert_eq!(records.len(), count as usize);
            }
        }
    }
}
