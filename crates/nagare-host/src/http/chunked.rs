//! The chunked transfer coding (RFC 9112 §7.1), decoded as bytes arrive:
//! size lines (extensions ignored), chunk data handed out in place, the
//! CRLF after each chunk, and trailer fields skipped. Lines are bounded, so
//! a peer cannot make the decoder hold more than [`MAX_LINE`] bytes.

/// Longest size line or trailer field line accepted.
pub const MAX_LINE: usize = 1024;
/// Most trailer bytes accepted after the last chunk.
pub const MAX_TRAILER: usize = 8 * 1024;

/// Why a chunked body is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkError {
    /// A size line that is not a hexadecimal number (or overflows).
    BadSize(String),
    /// Chunk data not followed by CRLF.
    MissingCrlf,
    /// A line longer than [`MAX_LINE`], or trailers past [`MAX_TRAILER`].
    TooLong,
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkError::BadSize(line) => write!(f, "bad chunk size {line:?}"),
            ChunkError::MissingCrlf => f.write_str("chunk data not followed by CRLF"),
            ChunkError::TooLong => f.write_str("chunk size or trailer line too long"),
        }
    }
}

impl std::error::Error for ChunkError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a size line.
    Size,
    /// This many data bytes left in the chunk.
    Data(u64),
    /// Reading the empty line after a chunk's data.
    DataEnd,
    /// Reading trailer lines after the last chunk.
    Trailer,
    /// The body has ended.
    Done,
}

/// An incremental decoder of one chunked body.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    line: Vec<u8>,
    trailer_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder { state: State::Size, line: Vec::new(), trailer_bytes: 0 }
    }
}

impl ChunkedDecoder {
    /// Whether the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input`, handing each piece of chunk data to `data`;
    /// returns how many bytes of `input` belong to the body (bytes after
    /// its end are left for whoever reads next).
    pub fn feed(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, ChunkError> {
        let mut at = 0;
        while at < input.len() {
            match self.state {
                State::Done => break,
                State::Data(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len() - at);
                    data(&input[at..at + n]);
                    at += n;
                    let left = left - n as u64;
                    self.state = if left == 0 { State::DataEnd } else { State::Data(left) };
                }
                State::Size | State::DataEnd | State::Trailer => {
                    let Some(line_len) = self.take_line(&input[at..])? else {
                        return Ok(input.len());
                    };
                    at += line_len;
                    self.end_line()?;
                }
            }
        }
        Ok(at)
    }

    /// Adds bytes of `input` to the line being read, up to and including
    /// its LF; how many were taken if the line is complete.
    fn take_line(&mut self, input: &[u8]) -> Result<Option<usize>, ChunkError> {
        let (piece, complete) = match input.iter().position(|&b| b == b'\n') {
            Some(i) => (&input[..=i], true),
            None => (input, false),
        };
        if self.line.len() + piece.len() > MAX_LINE {
            return Err(ChunkError::TooLong);
        }
        if self.state == State::DataEnd && piece.iter().any(|&b| b != b'\r' && b != b'\n') {
            return Err(ChunkError::MissingCrlf);
        }
        if self.state == State::Trailer {
            self.trailer_bytes += piece.len();
            if self.trailer_bytes > MAX_TRAILER {
                return Err(ChunkError::TooLong);
            }
        }
        self.line.extend_from_slice(piece);
        Ok(complete.then_some(piece.len()))
    }

    /// Acts on the complete line just read.
    fn end_line(&mut self) -> Result<(), ChunkError> {
        let line = std::mem::take(&mut self.line);
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        self.state = match self.state {
            State::Size => {
                let size = text.split(|&b| b == b';').next().unwrap_or_default();
                let size = std::str::from_utf8(size).unwrap_or("").trim_matches([' ', '\t']);
                let bad = || ChunkError::BadSize(String::from_utf8_lossy(text).into_owned());
                if size.is_empty() || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad());
                }
                match u64::from_str_radix(size, 16).map_err(|_| bad())? {
                    0 => State::Trailer,
                    n => State::Data(n),
                }
            }
            State::DataEnd if text.is_empty() => State::Size,
            State::DataEnd => return Err(ChunkError::MissingCrlf),
            State::Trailer if text.is_empty() => State::Done,
            State::Trailer => State::Trailer,
            state => state,
        };
        self.line = line;
        self.line.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(body: &[u8], piece: usize) -> Result<(Vec<u8>, usize, bool), ChunkError> {
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        let mut used = 0;
        for chunk in body.chunks(piece) {
            used += d.feed(chunk, |b| out.extend_from_slice(b))?;
            if d.is_done() {
                break;
            }
        }
        Ok((out, used, d.is_done()))
    }

    #[test]
    fn chunks_decode_however_the_bytes_are_cut() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: y\r\n\r\nGET /next";
        for piece in 1..body.len() {
            let (out, used, done) = decode_in_pieces(body, piece).unwrap();
            assert_eq!(out, b"hello, world", "piece {piece}");
            assert!(done);
            assert_eq!(&body[used..], b"GET /next", "piece {piece}");
        }
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert!(matches!(decode_in_pieces(b"zz\r\n", 4), Err(ChunkError::BadSize(_))));
        assert!(matches!(decode_in_pieces(b"\r\n", 4), Err(ChunkError::BadSize(_))));
        assert!(matches!(decode_in_pieces(b"-1\r\n", 4), Err(ChunkError::BadSize(_))));
        assert!(matches!(decode_in_pieces(b"11111111111111111\r\n", 64), Err(ChunkError::BadSize(_))));
        assert_eq!(decode_in_pieces(b"2\r\nabXY", 64), Err(ChunkError::MissingCrlf));
        let long = vec![b'1'; MAX_LINE + 1];
        assert_eq!(decode_in_pieces(&long, 7), Err(ChunkError::TooLong));
        let mut trailers = b"0\r\n".to_vec();
        for _ in 0..MAX_TRAILER / 10 + 1 {
            trailers.extend_from_slice(b"X-A: bbb\r\n");
        }
        assert_eq!(decode_in_pieces(&trailers, 100), Err(ChunkError::TooLong));
    }
}
