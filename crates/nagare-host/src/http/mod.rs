//! HTTP/1.1 (RFC 9112) as much as nagare's file server and its download
//! client need: message heads parsed by `httparse`, the framing rules
//! that say where a body ends (§6), and whether a connection persists
//! (§9.3).
//!
//! - [`server`]: a static file server over the engine's TCP.
//! - [`client`]: URLs, the request a download sends, and a reader that
//!   turns response bytes into body bytes.
//! - [`chunked`]: the chunked transfer coding, decoded incrementally.

pub mod chunked;
pub mod client;
pub mod server;

/// Headers a head may have; more is an error ([`HeadError::TooManyHeaders`]).
pub const MAX_HEADERS: usize = 64;

/// Where a message body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// This many bytes (Content-Length).
    Length(u64),
    /// Chunked transfer coding, ending with a zero-size chunk.
    Chunked,
    /// The body runs until the connection closes (responses only).
    UntilClose,
}

/// Why a head is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// Not HTTP/1.x syntax.
    Malformed(String),
    /// More than [`MAX_HEADERS`] header fields.
    TooManyHeaders,
    /// Content-Length fields that disagree or are not a number.
    BadContentLength,
    /// A transfer coding other than chunked last, chunked twice, an empty
    /// coding, a transfer coding in HTTP/1.0 (requests), or
    /// Transfer-Encoding together with Content-Length (requests: the
    /// smuggling case RFC 9112 §6.3 lets a server refuse).
    BadTransferEncoding,
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::Malformed(why) => write!(f, "malformed head: {why}"),
            HeadError::TooManyHeaders => write!(f, "more than {MAX_HEADERS} header fields"),
            HeadError::BadContentLength => f.write_str("bad or conflicting Content-Length"),
            HeadError::BadTransferEncoding => f.write_str("unsupported Transfer-Encoding"),
        }
    }
}

impl std::error::Error for HeadError {}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// GET, HEAD, ...
    pub method: String,
    /// The request target as sent.
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Whether the connection persists after the response (§9.3).
    pub keep_alive: bool,
    /// Where the request's body ends.
    pub body: Framing,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// Where the response's body ends (for a response to a request other
    /// than HEAD).
    pub body: Framing,
}

fn malformed(e: httparse::Error) -> HeadError {
    match e {
        httparse::Error::TooManyHeaders => HeadError::TooManyHeaders,
        e => HeadError::Malformed(e.to_string()),
    }
}

/// Parses a request head at the start of `buf`: `None` while it is
/// incomplete, else the head and its length in bytes.
pub fn parse_request(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let len = match request.parse(buf).map_err(malformed)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    let (Some(method), Some(target), Some(minor_version)) = (request.method, request.path, request.version) else {
        return Err(HeadError::Malformed("incomplete request line".into()));
    };
    let fields = Fields(request.headers);
    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host.
    if minor_version >= 1 && !fields.one_host() {
        return Err(HeadError::Malformed("an HTTP/1.1 request needs one Host field".into()));
    }
    let body = match (fields.transfer_coding_chunked(), fields.content_length()?) {
        (Some(_), Some(_)) => return Err(HeadError::BadTransferEncoding),
        // §6.1: HTTP/1.0 has no transfer codings; its framing is faulty.
        (Some(_), None) if minor_version == 0 => return Err(HeadError::BadTransferEncoding),
        (Some(true), None) => Framing::Chunked,
        (Some(false), None) => return Err(HeadError::BadTransferEncoding),
        (None, Some(0) | None) => Framing::Empty,
        (None, Some(n)) => Framing::Length(n),
    };
    let keep_alive = if fields.connection_has("close") {
        false
    } else if minor_version >= 1 {
        true
    } else {
        fields.connection_has("keep-alive")
    };
    Ok(Some((
        RequestHead { method: method.to_string(), target: target.to_string(), minor_version, keep_alive, body },
        len,
    )))
}

/// Parses a response head at the start of `buf`: `None` while it is
/// incomplete, else the head and its length in bytes.
pub fn parse_response(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf).map_err(malformed)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    let Some(status) = response.code else {
        return Err(HeadError::Malformed("no status code".into()));
    };
    let fields = Fields(response.headers);
    // RFC 9112 §6.3: 1xx, 204 and 304 have no body; a transfer coding
    // wins over Content-Length; chunked must be the last coding, else the
    // body runs to the close.
    let body = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else {
        match fields.transfer_coding_chunked() {
            Some(true) => Framing::Chunked,
            Some(false) => Framing::UntilClose,
            None => match fields.content_length()? {
                Some(n) => Framing::Length(n),
                None => Framing::UntilClose,
            },
        }
    };
    Ok(Some((ResponseHead { status, body }, len)))
}

/// Where the head that starts `buf` ends (an empty line, CRLF or bare
/// LF), if its end is there; the search starts a little before `from`
/// (bytes already searched).
pub(crate) fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(2).min(buf.len());
    let tail = &buf[start..];
    tail.iter().enumerate().find_map(|(i, &b)| {
        let blank = match (b, tail.get(i + 1), tail.get(i + 2)) {
            (b'\n', Some(b'\n'), _) => Some(2),
            (b'\n', Some(b'\r'), Some(b'\n')) => Some(3),
            _ => None,
        };
        blank.map(|n| start + i + n)
    })
}

/// The header fields of one head.
struct Fields<'h, 'b>(&'h [httparse::Header<'b>]);

impl Fields<'_, '_> {
    /// The comma-separated elements of every field named `name`, trimmed,
    /// empty ones included (a field with an empty value is one empty
    /// element); `None` for a value that is not text.
    fn elements<'a>(&'a self, name: &'a str) -> impl Iterator<Item = Option<&'a str>> + 'a {
        self.0.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).flat_map(|h| {
            let text = std::str::from_utf8(h.value).ok();
            let parts: Box<dyn Iterator<Item = Option<&str>>> = match text {
                Some(t) => Box::new(t.split(',').map(|e| Some(e.trim_matches([' ', '\t'])))),
                None => Box::new(std::iter::once(None)),
            };
            parts
        })
    }

    /// The Content-Length, if any: every value (several fields, or a list
    /// in one) must be the same number (RFC 9110 §8.6); an empty one is
    /// refused.
    fn content_length(&self) -> Result<Option<u64>, HeadError> {
        let mut length = None;
        for value in self.elements("content-length") {
            let value = value.ok_or(HeadError::BadContentLength)?;
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HeadError::BadContentLength);
            }
            let n: u64 = value.parse().map_err(|_| HeadError::BadContentLength)?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError::BadContentLength);
            }
            length = Some(n);
        }
        Ok(length)
    }

    /// `None` without Transfer-Encoding; else whether chunked is the last
    /// coding of the list and applied once (RFC 9112 §6.1). A field that
    /// lists no coding, or an empty element, makes it `Some(false)`.
    fn transfer_coding_chunked(&self) -> Option<bool> {
        let mut seen = false;
        let mut chunked = 0;
        let mut last_chunked = false;
        let mut well_formed = true;
        for coding in self.elements("transfer-encoding") {
            seen = true;
            match coding {
                Some(c) if !c.is_empty() => {
                    last_chunked = c.eq_ignore_ascii_case("chunked");
                    chunked += usize::from(last_chunked);
                }
                _ => well_formed = false,
            }
        }
        seen.then_some(well_formed && last_chunked && chunked == 1)
    }

    /// Whether the Connection field lists `option`.
    fn connection_has(&self, option: &str) -> bool {
        self.elements("connection").any(|o| o.is_some_and(|o| o.eq_ignore_ascii_case(option)))
    }

    /// Whether there is exactly one Host field.
    fn one_host(&self) -> bool {
        self.0.iter().filter(|h| h.name.eq_ignore_ascii_case("host")).count() == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text`, with a Host field added to an HTTP/1.1 request
    /// that has none.
    fn request(text: &str) -> Result<Option<RequestHead>, HeadError> {
        let text = if text.contains(" HTTP/1.1\r\n") && !text.contains("\nHost:") {
            text.replacen("\r\n", "\r\nHost: x\r\n", 1)
        } else {
            text.to_string()
        };
        parse_request(text.as_bytes()).map(|r| r.map(|(h, _)| h))
    }

    #[test]
    fn the_end_of_a_head_is_found_from_where_the_search_stopped() {
        let head = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest";
        assert_eq!(find_head_end(head, 0), Some(27));
        // A search that stopped at `from` saw no complete end: `from` <= 26.
        for from in 0..=26 {
            assert_eq!(find_head_end(head, from), Some(27), "from {from}");
        }
        assert_eq!(find_head_end(b"GET / HTTP/1.0\n\nx", 0), Some(16));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
        assert_eq!(find_head_end(b"", 5), None);
    }

    #[test]
    fn a_request_head_is_found_and_measured() {
        let text = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nrest";
        let (head, len) = parse_request(text).unwrap().unwrap();
        assert_eq!(len, 28);
        assert_eq!((head.method.as_str(), head.target.as_str(), head.minor_version), ("GET", "/a", 1));
        assert!(head.keep_alive);
        assert_eq!(head.body, Framing::Empty);
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap(), None);
    }

    #[test]
    fn persistence_follows_version_and_connection_options() {
        assert!(!request("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap().keep_alive);
        assert!(request("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap().keep_alive);
        assert!(!request("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap().unwrap().keep_alive);
        assert!(!request("GET / HTTP/1.1\r\nConnection: upgrade, Close\r\n\r\n").unwrap().unwrap().keep_alive);
        assert!(request("GET / HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\n").unwrap().unwrap().keep_alive);
    }

    #[test]
    fn content_length_must_agree_with_itself() {
        let h = request("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, Framing::Length(5));
        let h = request("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, Framing::Length(5));
        assert_eq!(
            request("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            Err(HeadError::BadContentLength)
        );
        assert_eq!(request("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n"), Err(HeadError::BadContentLength));
        assert_eq!(
            request("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            Err(HeadError::BadContentLength)
        );
    }

    #[test]
    fn transfer_encoding_lists_end_in_chunked_or_are_refused() {
        let h = request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, Framing::Chunked);
        let h = request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: CHUNKED\r\n\r\n");
        assert_eq!(h.unwrap().unwrap().body, Framing::Chunked);
        assert_eq!(
            request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            Err(HeadError::BadTransferEncoding)
        );
        assert_eq!(
            request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            Err(HeadError::BadTransferEncoding)
        );
    }

    #[test]
    fn empty_lengths_and_codings_are_refused() {
        assert_eq!(request("POST / HTTP/1.1\r\nContent-Length:\r\n\r\nabc"), Err(HeadError::BadContentLength));
        assert_eq!(request("POST / HTTP/1.1\r\nContent-Length: 3,\r\n\r\nabc"), Err(HeadError::BadContentLength));
        for te in ["", ",", "chunked,", "chunked, chunked"] {
            assert_eq!(
                request(&format!("POST / HTTP/1.1\r\nTransfer-Encoding: {te}\r\n\r\n")),
                Err(HeadError::BadTransferEncoding),
                "{te:?}"
            );
            assert_eq!(
                request(&format!("POST / HTTP/1.1\r\nTransfer-Encoding: {te}\r\nContent-Length: 5\r\n\r\n")),
                Err(HeadError::BadTransferEncoding),
                "{te:?} with a length"
            );
        }
        assert_eq!(
            request("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HeadError::BadTransferEncoding)
        );
        let empty_length = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n");
        assert_eq!(empty_length, Err(HeadError::BadContentLength));
    }

    #[test]
    fn an_http_1_1_request_has_one_host() {
        assert!(matches!(parse_request(b"GET / HTTP/1.1\r\n\r\n"), Err(HeadError::Malformed(_))));
        assert!(matches!(parse_request(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), Err(HeadError::Malformed(_))));
        assert!(parse_request(b"GET / HTTP/1.0\r\n\r\n").unwrap().is_some());
    }

    #[test]
    fn a_get_body_is_framed_not_taken_for_the_next_request() {
        let h = request("GET / HTTP/1.1\r\nContent-Length: 10\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, Framing::Length(10));
    }

    #[test]
    fn bad_heads_are_refused() {
        assert!(matches!(request("GET / FTP/1.1\r\n\r\n"), Err(HeadError::Malformed(_))));
        assert!(matches!(request("G E T / HTTP/1.1\r\n\r\n"), Err(HeadError::Malformed(_))));
        let many: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(request(&format!("GET / HTTP/1.1\r\n{many}\r\n")), Err(HeadError::TooManyHeaders));
    }

    #[test]
    fn response_framing() {
        let body = |t: &str| parse_response(t.as_bytes()).unwrap().unwrap().0.body;
        assert_eq!(body("HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\n"), Framing::Length(12));
        assert_eq!(body("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), Framing::Chunked);
        assert_eq!(
            body("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
            Framing::Chunked
        );
        assert_eq!(body("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"), Framing::UntilClose);
        assert_eq!(body("HTTP/1.1 200 OK\r\n\r\n"), Framing::UntilClose);
        assert_eq!(body("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n"), Framing::Empty);
        assert_eq!(body("HTTP/1.1 304 Not Modified\r\n\r\n"), Framing::Empty);
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(HeadError::BadContentLength)
        );
    }
}
