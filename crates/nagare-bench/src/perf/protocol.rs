//! The `nagare perf` control protocol, version 1.
//!
//! One TCP connection (default port 5201) carries a test. Every control
//! message is a *frame*: an 8-byte header and a body whose length the
//! header gives, all integers big-endian:
//!
//! ```text
//! header   0..2  magic 0x4e50 ("NP")
//!          2     version (1)
//!          3     kind
//!          4..8  body length (u32), exactly the kind's length
//!                (Error: 2 to 2 + MAX_ERROR_TEXT)
//!
//! Start  (1, client -> server, 32 bytes)
//!          0     protocol: 1 TCP, 2 UDP
//!          1     mode: 1 stream (client sends), 2 reverse (server sends),
//!                3 rr (request/response)
//!          2..4  reserved, 0
//!          4..8  len: bytes per write, per request and response, or per
//!                datagram (TCP 1..=1 MiB; UDP rr 1..=65507; other UDP
//!                16..=65507)
//!          8..12 duration in milliseconds (0: limited by bytes)
//!          12..20 bytes to move (0: limited by time); exactly one of the two
//!          20..24 UDP sending rate in kbit/s (0: as fast as possible)
//!          24..26 the client's UDP port (UDP reverse and rr: where to send)
//!          26..32 reserved, 0
//! Accept (2, server -> client, 8 bytes)
//!          0..4  cookie: tags this test's UDP datagrams
//!          4..6  the server's UDP port
//!          6..8  reserved, 0
//! Error  (3, either way, 2 + text bytes)
//!          0..2  code (ERR_*), then UTF-8 text
//! Done   (4, the UDP sender or rr client -> the receiver or rr server,
//!          24 bytes)
//!          0..8  datagrams sent, 8..16 payload bytes sent,
//!          16..24 microseconds from the first datagram sent to the last
//! Result (5, the receiver -> the sender, 40 bytes)
//!          0..8  bytes received (rr: request bytes answered)
//!          8..16 datagrams received (rr: transactions; TCP stream: 0)
//!          16..24 microseconds from the first byte received to the last
//!          24..32 datagrams that arrived out of order
//!          32..40 reserved, 0
//! ```
//!
//! A test runs: client sends Start; server answers Accept (or Error and
//! closes). Then, on the same connection for TCP:
//!
//! - stream: the client sends raw bytes and shuts down its side (FIN); the
//!   server counts to the end of stream, sends Result and closes.
//! - reverse: the server sends raw bytes and its FIN; the client counts to
//!   the end of stream, sends Result and closes.
//! - rr: the client sends `len` bytes, the server answers `len` bytes, and
//!   so on, one transaction at a time; after the last answer the client
//!   shuts down its side, and the server sends Result and closes.
//!
//! For UDP the data goes in datagrams between the two UDP ports:
//!
//! - stream and reverse: each datagram begins with a 16-byte
//!   [`DatagramHeader`] (cookie, 4 reserved bytes, sequence number); the
//!   sender then sends Done on the control connection and the receiver,
//!   after a short drain, answers Result.
//! - rr: the client sends a request of `len` bytes from its UDP port and
//!   the server sends the same bytes back, one request in flight; a
//!   request carries its tag ([`rr_tag`]: the header, or for fewer than 16
//!   bytes the low bytes of the sequence number), so a late answer is not
//!   taken for the next one. The server answers only datagrams of `len`
//!   bytes from the client's address and UDP port. After the last request
//!   (answered or given up on), the client sends Done, and the server
//!   answers Result (packets: requests answered) and closes.
//!
//! Everything read from the peer is checked here: magic, version, kind,
//! the exact body length, reserved bytes, every enumerated field and every
//! limit. Nothing read can make us allocate more than one frame
//! ([`MAX_FRAME`] bytes).

use std::fmt;

pub const MAGIC: u16 = 0x4e50;
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 8;
pub const DEFAULT_PORT: u16 = 5201;

pub const START_LEN: usize = 32;
pub const ACCEPT_LEN: usize = 8;
pub const DONE_LEN: usize = 24;
pub const RESULT_LEN: usize = 40;
/// Longest error text carried.
pub const MAX_ERROR_TEXT: usize = 256;
/// The longest frame of any kind.
pub const MAX_FRAME: usize = HEADER_LEN + 2 + MAX_ERROR_TEXT;

/// Largest TCP write / request size.
pub const MAX_TCP_LEN: u32 = 1 << 20;
/// A UDP datagram carries at least its header.
pub const MIN_UDP_LEN: u32 = DATAGRAM_HEADER_LEN as u32;
/// Largest UDP payload in one IPv4 datagram.
pub const MAX_UDP_LEN: u32 = 65507;
/// Longest test: one hour.
pub const MAX_DURATION_MS: u32 = 3_600_000;
/// Most bytes in one test: 1 TiB.
pub const MAX_BYTES: u64 = 1 << 40;

pub const DATAGRAM_HEADER_LEN: usize = 16;

/// Error codes.
pub const ERR_BAD_REQUEST: u16 = 1;
pub const ERR_BUSY: u16 = 2;

const KIND_START: u8 = 1;
const KIND_ACCEPT: u8 = 2;
const KIND_ERROR: u8 = 3;
const KIND_DONE: u8 = 4;
const KIND_RESULT: u8 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The client sends.
    Stream,
    /// The server sends.
    Reverse,
    /// Request/response.
    Rr,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stream => "stream",
            Mode::Reverse => "reverse",
            Mode::Rr => "rr",
        }
    }
}

/// What a test should do, as the client asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub proto: Proto,
    pub mode: Mode,
    pub len: u32,
    /// Milliseconds; 0 when `bytes` limits the test.
    pub duration_ms: u32,
    /// 0 when `duration_ms` limits the test.
    pub bytes: u64,
    pub udp_rate_kbit: u32,
    pub client_udp_port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accept {
    pub cookie: u32,
    pub udp_port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Done {
    pub packets: u64,
    pub bytes: u64,
    pub micros: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestResult {
    pub bytes: u64,
    pub packets: u64,
    pub micros: u64,
    pub out_of_order: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Start(Start),
    Accept(Accept),
    Error { code: u16, text: String },
    Done(Done),
    Result(TestResult),
}

/// Why bytes from the peer are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtoError {
    BadMagic(u16),
    BadVersion(u8),
    UnknownKind(u8),
    BadLength { kind: u8, len: u32 },
    Reserved(&'static str),
    BadField(String),
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::BadMagic(m) => write!(f, "not a nagare perf peer (magic {m:#06x}, expected {MAGIC:#06x})"),
            ProtoError::BadVersion(v) => write!(f, "peer speaks protocol version {v}; this nagare speaks {VERSION}"),
            ProtoError::UnknownKind(k) => write!(f, "unknown message kind {k}"),
            ProtoError::BadLength { kind, len } => write!(f, "message kind {kind} with a body of {len} bytes"),
            ProtoError::Reserved(what) => write!(f, "reserved bytes of {what} are not zero"),
            ProtoError::BadField(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for ProtoError {}

/// A checked header: the kind and the body length that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub len: usize,
}

/// Checks a header: magic, version, a known kind and a body length that
/// kind allows.
pub fn decode_header(bytes: &[u8; HEADER_LEN]) -> Result<Header, ProtoError> {
    let magic = u16::from_be_bytes([bytes[0], bytes[1]]);
    if magic != MAGIC {
        return Err(ProtoError::BadMagic(magic));
    }
    if bytes[2] != VERSION {
        return Err(ProtoError::BadVersion(bytes[2]));
    }
    let kind = bytes[3];
    let len = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let ok = match kind {
        KIND_START => len as usize == START_LEN,
        KIND_ACCEPT => len as usize == ACCEPT_LEN,
        KIND_ERROR => (2..=2 + MAX_ERROR_TEXT as u32).contains(&len),
        KIND_DONE => len as usize == DONE_LEN,
        KIND_RESULT => len as usize == RESULT_LEN,
        _ => return Err(ProtoError::UnknownKind(kind)),
    };
    if !ok {
        return Err(ProtoError::BadLength { kind, len });
    }
    Ok(Header { kind, len: len as usize })
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

fn zero(b: &[u8], what: &'static str) -> Result<(), ProtoError> {
    if b.iter().all(|&x| x == 0) {
        Ok(())
    } else {
        Err(ProtoError::Reserved(what))
    }
}

/// Decodes a body after [`decode_header`] accepted its header.
pub fn decode_body(header: Header, body: &[u8]) -> Result<Message, ProtoError> {
    if body.len() != header.len {
        return Err(ProtoError::BadLength { kind: header.kind, len: body.len() as u32 });
    }
    match header.kind {
        KIND_START => {
            let proto = match body[0] {
                1 => Proto::Tcp,
                2 => Proto::Udp,
                p => return Err(ProtoError::BadField(format!("unknown protocol {p}"))),
            };
            let mode = match body[1] {
                1 => Mode::Stream,
                2 => Mode::Reverse,
                3 => Mode::Rr,
                m => return Err(ProtoError::BadField(format!("unknown mode {m}"))),
            };
            zero(&body[2..4], "Start")?;
            zero(&body[26..32], "Start")?;
            let start = Start {
                proto,
                mode,
                len: u32_at(body, 4),
                duration_ms: u32_at(body, 8),
                bytes: u64_at(body, 12),
                udp_rate_kbit: u32_at(body, 20),
                client_udp_port: u16_at(body, 24),
            };
            start.validate()?;
            Ok(Message::Start(start))
        }
        KIND_ACCEPT => {
            zero(&body[6..8], "Accept")?;
            Ok(Message::Accept(Accept { cookie: u32_at(body, 0), udp_port: u16_at(body, 4) }))
        }
        KIND_ERROR => {
            let text =
                std::str::from_utf8(&body[2..]).map_err(|_| ProtoError::BadField("error text is not UTF-8".into()))?;
            Ok(Message::Error { code: u16_at(body, 0), text: text.to_string() })
        }
        KIND_DONE => {
            Ok(Message::Done(Done { packets: u64_at(body, 0), bytes: u64_at(body, 8), micros: u64_at(body, 16) }))
        }
        KIND_RESULT => {
            zero(&body[32..40], "Result")?;
            Ok(Message::Result(TestResult {
                bytes: u64_at(body, 0),
                packets: u64_at(body, 8),
                micros: u64_at(body, 16),
                out_of_order: u64_at(body, 24),
            }))
        }
        kind => Err(ProtoError::UnknownKind(kind)),
    }
}

impl Start {
    /// The limits a test must keep: a known combination, a size in range,
    /// exactly one of duration and bytes, both bounded.
    pub fn validate(&self) -> Result<(), ProtoError> {
        let bad = |s: String| Err(ProtoError::BadField(s));
        match (self.proto, self.mode) {
            (Proto::Udp, Mode::Rr) if self.len == 0 || self.len > MAX_UDP_LEN => {
                return bad(format!("UDP request length {} is not in 1..={MAX_UDP_LEN}", self.len));
            }
            (Proto::Udp, Mode::Rr) => {}
            (Proto::Tcp, _) if self.len == 0 || self.len > MAX_TCP_LEN => {
                return bad(format!("TCP length {} is not in 1..={MAX_TCP_LEN}", self.len));
            }
            (Proto::Udp, _) if !(MIN_UDP_LEN..=MAX_UDP_LEN).contains(&self.len) => {
                return bad(format!("UDP length {} is not in {MIN_UDP_LEN}..={MAX_UDP_LEN}", self.len));
            }
            _ => {}
        }
        match (self.duration_ms, self.bytes) {
            (0, 0) => bad("neither a duration nor a byte count".into()),
            (d, b) if d != 0 && b != 0 => bad(format!("both a duration ({d} ms) and a byte count ({b})")),
            (d, _) if d > MAX_DURATION_MS => bad(format!("duration {d} ms is over {MAX_DURATION_MS} ms")),
            (_, b) if b > MAX_BYTES => bad(format!("byte count {b} is over {MAX_BYTES}")),
            _ => {
                if self.proto == Proto::Udp && self.mode != Mode::Stream && self.client_udp_port == 0 {
                    return bad(format!("UDP {} without the client's UDP port", self.mode.name()));
                }
                Ok(())
            }
        }
    }
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The frame for a message (error text is cut to [`MAX_ERROR_TEXT`] bytes
/// at a character boundary).
pub fn encode(message: &Message) -> Vec<u8> {
    match message {
        Message::Start(s) => {
            let mut b = [0u8; START_LEN];
            b[0] = match s.proto {
                Proto::Tcp => 1,
                Proto::Udp => 2,
            };
            b[1] = match s.mode {
                Mode::Stream => 1,
                Mode::Reverse => 2,
                Mode::Rr => 3,
            };
            b[4..8].copy_from_slice(&s.len.to_be_bytes());
            b[8..12].copy_from_slice(&s.duration_ms.to_be_bytes());
            b[12..20].copy_from_slice(&s.bytes.to_be_bytes());
            b[20..24].copy_from_slice(&s.udp_rate_kbit.to_be_bytes());
            b[24..26].copy_from_slice(&s.client_udp_port.to_be_bytes());
            frame(KIND_START, &b)
        }
        Message::Accept(a) => {
            let mut b = [0u8; ACCEPT_LEN];
            b[0..4].copy_from_slice(&a.cookie.to_be_bytes());
            b[4..6].copy_from_slice(&a.udp_port.to_be_bytes());
            frame(KIND_ACCEPT, &b)
        }
        Message::Error { code, text } => {
            let mut end = text.len().min(MAX_ERROR_TEXT);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let mut b = code.to_be_bytes().to_vec();
            b.extend_from_slice(&text.as_bytes()[..end]);
            frame(KIND_ERROR, &b)
        }
        Message::Done(d) => {
            let mut b = [0u8; DONE_LEN];
            b[0..8].copy_from_slice(&d.packets.to_be_bytes());
            b[8..16].copy_from_slice(&d.bytes.to_be_bytes());
            b[16..24].copy_from_slice(&d.micros.to_be_bytes());
            frame(KIND_DONE, &b)
        }
        Message::Result(r) => {
            let mut b = [0u8; RESULT_LEN];
            b[0..8].copy_from_slice(&r.bytes.to_be_bytes());
            b[8..16].copy_from_slice(&r.packets.to_be_bytes());
            b[16..24].copy_from_slice(&r.micros.to_be_bytes());
            b[24..32].copy_from_slice(&r.out_of_order.to_be_bytes());
            frame(KIND_RESULT, &b)
        }
    }
}

/// Reassembles one frame from a byte stream read in pieces. It asks for
/// exactly the bytes the frame still lacks ([`FrameReader::want`]), so it
/// never reads past the frame into the data that follows it, and it holds
/// at most [`MAX_FRAME`] bytes.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    header: Option<Header>,
}

impl FrameReader {
    /// How many more bytes the frame needs (never 0).
    pub fn want(&self) -> usize {
        match self.header {
            None => HEADER_LEN - self.buf.len(),
            Some(h) => h.len - self.buf.len(),
        }
        .max(1)
    }

    /// Takes bytes (at most [`FrameReader::want`] of them); returns the
    /// message once complete, and starts over for the next.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<Message>, ProtoError> {
        let mut bytes = bytes;
        while !bytes.is_empty() {
            let need = match self.header {
                None => HEADER_LEN - self.buf.len(),
                Some(h) => h.len - self.buf.len(),
            };
            let n = need.min(bytes.len());
            self.buf.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.is_none() && self.buf.len() == HEADER_LEN {
                let header = decode_header(self.buf[..].try_into().expect("a full header"))?;
                self.buf.clear();
                self.header = Some(header);
            }
            if let Some(header) = self.header {
                if self.buf.len() == header.len {
                    let message = decode_body(header, &self.buf);
                    self.buf.clear();
                    self.header = None;
                    if !bytes.is_empty() {
                        return Err(ProtoError::BadField("bytes past the end of a frame".into()));
                    }
                    return message.map(Some);
                }
            }
        }
        Ok(None)
    }

    /// Whether part of a frame has been read.
    pub fn partial(&self) -> bool {
        self.header.is_some() || !self.buf.is_empty()
    }
}

/// Writes the tag of UDP request `seq` into `request` (all of it): the
/// [`DatagramHeader`] where it fits, otherwise the sequence number's low
/// bytes, big-endian; the rest of the request is left as it is. An answer
/// is the request's if it is as long and begins with the same tag.
pub fn rr_tag(request: &mut [u8], cookie: u32, seq: u64) {
    if request.len() >= DATAGRAM_HEADER_LEN {
        DatagramHeader { cookie, seq }.write(request);
    } else {
        let bytes = seq.to_be_bytes();
        let n = request.len().min(bytes.len());
        request[..n].copy_from_slice(&bytes[bytes.len() - n..]);
    }
}

/// How many leading bytes of a UDP request [`rr_tag`] writes.
pub fn rr_tag_len(len: usize) -> usize {
    if len >= DATAGRAM_HEADER_LEN {
        DATAGRAM_HEADER_LEN
    } else {
        len.min(8)
    }
}

/// The first bytes of every data datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramHeader {
    pub cookie: u32,
    pub seq: u64,
}

impl DatagramHeader {
    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.cookie.to_be_bytes());
        out[4..8].fill(0);
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// `None` for a datagram too short to be ours.
    pub fn read(bytes: &[u8]) -> Option<DatagramHeader> {
        if bytes.len() < DATAGRAM_HEADER_LEN {
            return None;
        }
        Some(DatagramHeader { cookie: u32_at(bytes, 0), seq: u64_at(bytes, 8) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> Start {
        Start {
            proto: Proto::Tcp,
            mode: Mode::Rr,
            len: 100,
            duration_ms: 0,
            bytes: 12345,
            udp_rate_kbit: 0,
            client_udp_port: 0,
        }
    }

    fn all_messages() -> Vec<Message> {
        vec![
            Message::Start(start()),
            Message::Start(Start {
                proto: Proto::Udp,
                mode: Mode::Reverse,
                len: 1472,
                duration_ms: 10_000,
                bytes: 0,
                udp_rate_kbit: 100_000,
                client_udp_port: 40000,
            }),
            Message::Accept(Accept { cookie: 0xdead_beef, udp_port: 5201 }),
            Message::Error { code: ERR_BUSY, text: "busy: another test is running".into() },
            Message::Error { code: ERR_BAD_REQUEST, text: String::new() },
            Message::Done(Done { packets: 7, bytes: 7 * 1472, micros: 99 }),
            Message::Result(TestResult { bytes: u64::MAX, packets: 1, micros: 2, out_of_order: 3 }),
        ]
    }

    fn decode_all(bytes: &[u8]) -> Result<Message, ProtoError> {
        let mut reader = FrameReader::default();
        reader.push(bytes).map(|m| m.expect("a whole frame"))
    }

    #[test]
    fn every_message_round_trips_whole_and_byte_by_byte() {
        for message in all_messages() {
            let bytes = encode(&message);
            assert_eq!(decode_all(&bytes).unwrap(), message);
            let mut reader = FrameReader::default();
            let mut got = None;
            for (i, b) in bytes.iter().enumerate() {
                assert!(reader.want() >= 1);
                let out = reader.push(std::slice::from_ref(b)).unwrap();
                if i + 1 < bytes.len() {
                    assert!(out.is_none());
                } else {
                    got = out;
                }
            }
            assert_eq!(got, Some(message));
            assert!(!reader.partial());
        }
    }

    #[test]
    fn the_reader_asks_for_exactly_one_frame() {
        let bytes = encode(&Message::Start(start()));
        let mut reader = FrameReader::default();
        assert_eq!(reader.want(), HEADER_LEN);
        assert!(reader.push(&bytes[..HEADER_LEN]).unwrap().is_none());
        assert_eq!(reader.want(), START_LEN);
        assert!(reader.push(&bytes[HEADER_LEN..]).unwrap().is_some());
        // Trailing bytes in one push are refused, not silently read.
        let mut twice = bytes.clone();
        twice.extend_from_slice(&bytes);
        assert!(FrameReader::default().push(&twice).is_err());
    }

    #[test]
    fn long_error_text_is_cut_at_a_character() {
        let text = "é".repeat(200); // 400 bytes
        let bytes = encode(&Message::Error { code: 9, text });
        assert!(bytes.len() <= MAX_FRAME);
        match decode_all(&bytes).unwrap() {
            Message::Error { code: 9, text } => assert_eq!(text.len(), MAX_ERROR_TEXT),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_headers_are_rejected() {
        let good = encode(&Message::Start(start()));
        let header = |f: &dyn Fn(&mut [u8; 8])| {
            let mut h: [u8; 8] = good[..8].try_into().unwrap();
            f(&mut h);
            decode_header(&h)
        };
        assert!(header(&|_| {}).is_ok());
        assert_eq!(header(&|h| h[0] = b'X'), Err(ProtoError::BadMagic(0x5850)));
        assert_eq!(header(&|h| h[2] = 2), Err(ProtoError::BadVersion(2)));
        assert_eq!(header(&|h| h[2] = 0), Err(ProtoError::BadVersion(0)));
        for kind in [0u8, 6, 0x7f, 0xff] {
            assert_eq!(header(&|h| h[3] = kind), Err(ProtoError::UnknownKind(kind)));
        }
        // Every kind with every wrong length near its own, and huge ones.
        for (kind, len) in [(1u8, START_LEN), (2, ACCEPT_LEN), (4, DONE_LEN), (5, RESULT_LEN)] {
            for bad in [0, len - 1, len + 1, 0xffff_ffff] {
                let got = header(&|h| {
                    h[3] = kind;
                    h[4..8].copy_from_slice(&(bad as u32).to_be_bytes());
                });
                assert_eq!(got, Err(ProtoError::BadLength { kind, len: bad as u32 }), "kind {kind} len {bad}");
            }
        }
        for bad in [0u32, 1, 2 + MAX_ERROR_TEXT as u32 + 1, u32::MAX] {
            let got = header(&|h| {
                h[3] = 3;
                h[4..8].copy_from_slice(&bad.to_be_bytes());
            });
            assert!(matches!(got, Err(ProtoError::BadLength { kind: 3, .. })), "error len {bad}");
        }
        // Messages display as sentences, for the user.
        assert!(ProtoError::BadVersion(7).to_string().contains("version 7"));
    }

    #[test]
    fn bad_bodies_are_rejected() {
        let body = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = encode(&Message::Start(start()));
            f(&mut bytes);
            decode_all(&bytes)
        };
        assert!(body(&|_| {}).is_ok());
        let set_u32 = |b: &mut Vec<u8>, at: usize, v: u32| b[8 + at..8 + at + 4].copy_from_slice(&v.to_be_bytes());
        let set_u64 = |b: &mut Vec<u8>, at: usize, v: u64| b[8 + at..8 + at + 8].copy_from_slice(&v.to_be_bytes());
        type Mutation = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("protocol 0", Box::new(|b| b[8] = 0)),
            ("protocol 3", Box::new(|b| b[8] = 3)),
            ("mode 0", Box::new(|b| b[9] = 0)),
            ("mode 4", Box::new(|b| b[9] = 4)),
            ("reserved 2", Box::new(|b| b[10] = 1)),
            ("reserved 31", Box::new(|b| b[8 + 31] = 1)),
            ("len 0", Box::new(move |b| set_u32(b, 4, 0))),
            ("len too big", Box::new(move |b| set_u32(b, 4, MAX_TCP_LEN + 1))),
            ("udp rr without a port", Box::new(|b| b[8] = 2)),
            ("neither limit", Box::new(move |b| set_u64(b, 12, 0))),
            ("both limits", Box::new(move |b| set_u32(b, 8, 1000))),
            ("too many bytes", Box::new(move |b| set_u64(b, 12, MAX_BYTES + 1))),
            (
                "too long",
                Box::new(move |b| {
                    set_u64(b, 12, 0);
                    set_u32(b, 8, MAX_DURATION_MS + 1)
                }),
            ),
            (
                "udp datagram too small",
                Box::new(move |b| {
                    b[8] = 2;
                    b[9] = 1;
                    set_u32(b, 4, MIN_UDP_LEN - 1)
                }),
            ),
            (
                "udp datagram too big",
                Box::new(move |b| {
                    b[8] = 2;
                    b[9] = 1;
                    set_u32(b, 4, MAX_UDP_LEN + 1)
                }),
            ),
            (
                "udp rr of 0 bytes",
                Box::new(move |b| {
                    b[8] = 2;
                    b[8 + 25] = 9;
                    set_u32(b, 4, 0)
                }),
            ),
            (
                "udp rr too big",
                Box::new(move |b| {
                    b[8] = 2;
                    b[8 + 25] = 9;
                    set_u32(b, 4, MAX_UDP_LEN + 1)
                }),
            ),
            (
                "udp reverse without a port",
                Box::new(|b| {
                    b[8] = 2;
                    b[9] = 2;
                }),
            ),
        ];
        for (name, mutate) in cases {
            assert!(
                matches!(body(&*mutate), Err(ProtoError::BadField(_) | ProtoError::Reserved(_))),
                "{name} accepted"
            );
        }
        // Reserved bytes of Accept and Result; error text that is not UTF-8.
        let mut accept = encode(&Message::Accept(Accept { cookie: 1, udp_port: 2 }));
        accept[8 + 7] = 1;
        assert_eq!(decode_all(&accept), Err(ProtoError::Reserved("Accept")));
        let mut result = encode(&Message::Result(TestResult::default()));
        result[8 + 39] = 1;
        assert_eq!(decode_all(&result), Err(ProtoError::Reserved("Result")));
        let mut error = encode(&Message::Error { code: 1, text: "ab".into() });
        error[8 + 2] = 0xff;
        assert!(matches!(decode_all(&error), Err(ProtoError::BadField(_))));
        // A body of the wrong length given straight to decode_body.
        let header = Header { kind: 1, len: START_LEN };
        assert!(decode_body(header, &[0; 3]).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic_or_grow_the_reader() {
        let mut state = 0x1234_5678_9abc_def0u64;
        for round in 0..20_000 {
            let mut bytes = if round % 3 == 0 {
                let all = all_messages();
                encode(&all[round % all.len()])
            } else {
                Vec::new()
            };
            let extra = (state % 64) as usize;
            for _ in 0..extra {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                bytes.push(state as u8);
            }
            if !bytes.is_empty() {
                let at = (state as usize) % bytes.len();
                bytes[at] ^= (state >> 8) as u8;
            }
            let mut reader = FrameReader::default();
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let n = reader.want().min(rest.len());
                match reader.push(&rest[..n]) {
                    Ok(_) => {}
                    Err(_) => break,
                }
                assert!(reader.buf.capacity() <= MAX_FRAME.next_power_of_two());
                rest = &rest[n..];
            }
        }
    }

    #[test]
    fn udp_request_response_is_accepted_from_one_byte_with_a_port() {
        for len in [1, 15, 16, 64, MAX_UDP_LEN] {
            let start = Start { proto: Proto::Udp, len, client_udp_port: 40000, ..start() };
            assert_eq!(start.validate(), Ok(()), "len {len}");
            assert_eq!(decode_all(&encode(&Message::Start(start))), Ok(Message::Start(start)));
        }
    }

    #[test]
    fn rr_tags_tell_requests_apart() {
        let tag = |len: usize, seq: u64| {
            let mut b = vec![0xaau8; len];
            rr_tag(&mut b, 7, seq);
            b
        };
        assert_eq!(tag(1, 0x1234), [0x34]);
        assert_eq!(tag(3, 0x1234), [0x00, 0x12, 0x34]);
        assert_eq!(tag(10, 1)[..10], [0, 0, 0, 0, 0, 0, 0, 1, 0xaa, 0xaa]);
        assert_eq!(rr_tag_len(10), 8);
        let long = tag(64, 5);
        assert_eq!(DatagramHeader::read(&long), Some(DatagramHeader { cookie: 7, seq: 5 }));
        assert_eq!(long[16..], [0xaa; 48]);
        assert_eq!(rr_tag_len(64), 16);
        assert_ne!(tag(1, 1), tag(1, 2));
    }

    #[test]
    fn datagram_headers_round_trip() {
        let mut b = [0xffu8; 20];
        let h = DatagramHeader { cookie: 0xabcd_0123, seq: 1 << 40 };
        h.write(&mut b);
        assert_eq!(DatagramHeader::read(&b), Some(h));
        assert_eq!(DatagramHeader::read(&b[..15]), None);
    }
}
