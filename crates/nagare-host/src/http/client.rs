//! The client side of a download: the URL, the request, and a reader that
//! turns the response's bytes, however they are cut, into body bytes.

use super::chunked::ChunkedDecoder;
use super::{find_head_end, parse_response, Framing};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;

/// An `http://` URL whose host is an address: IPv4, or IPv6 in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// The server's address.
    pub host: IpAddr,
    /// Its port (80 unless given).
    pub port: u16,
    /// The path and query, starting with `/`.
    pub path: String,
}

impl std::str::FromStr for Url {
    type Err = String;

    /// `http://A.B.C.D[:port][/path]` or `http://[IPv6][:port][/path]`
    /// (RFC 3986 3.2.2): the host is an address (nagare has no resolver).
    fn from_str(url: &str) -> Result<Url, String> {
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!("{url}: only http:// URLs are supported"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (host, after) = bracketed.split_once(']').ok_or_else(|| format!("{url}: no ']' after '['"))?;
                let host = host.parse::<Ipv6Addr>().map_err(|_| format!("{url}: {host:?} is not an IPv6 address"))?;
                (IpAddr::V6(host), after)
            }
            None => {
                let (host, after) = match authority.find(':') {
                    Some(i) => authority.split_at(i),
                    None => (authority, ""),
                };
                let host = host.parse::<Ipv4Addr>().map_err(|_| {
                    format!("{url}: the host must be an IPv4 address or an IPv6 one in brackets (nagare has no DNS resolver)")
                })?;
                (IpAddr::V4(host), after)
            }
        };
        let port = match port.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| format!("{url}: bad port {p:?}"))?,
            None if port.is_empty() => 80,
            None => return Err(format!("{url}: {port:?} after the host")),
        };
        Ok(Url { host, port, path: path.to_string() })
    }
}

impl Url {
    /// The server's socket address.
    pub fn server(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.port)
    }

    /// The GET request for this URL, asking the server to close after it.
    pub fn request(&self) -> Vec<u8> {
        let host = match self.host {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        };
        let host = if self.port == 80 { host } else { format!("{host}:{}", self.port) };
        format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: nagare-fetch\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            self.path
        )
        .into_bytes()
    }
}

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseError(pub String);

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ResponseError {}

/// Reads one response to a GET: the head, then the body in whatever
/// framing the head announced.
#[derive(Debug, Default)]
pub struct ResponseReader {
    head: Vec<u8>,
    /// How far `head` was searched for the end of a head.
    scanned: usize,
    status: Option<u16>,
    framing: Option<Framing>,
    chunked: ChunkedDecoder,
    received: u64,
    done: bool,
}

impl ResponseReader {
    /// The status code, once the head is in.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Body bytes so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The body's length, when the head gave it.
    pub fn total(&self) -> Option<u64> {
        match self.framing {
            Some(Framing::Length(n)) => Some(n),
            _ => None,
        }
    }

    /// Whether the whole response has been read.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Takes the next bytes from the server, handing body bytes to `body`.
    /// Bytes past the end of the response are ignored.
    pub fn feed(&mut self, mut bytes: &[u8], mut body: impl FnMut(&[u8])) -> Result<(), ResponseError> {
        while self.framing.is_none() {
            let before = self.head.len();
            self.head.extend_from_slice(&bytes[..bytes.len().min(MAX_HEAD + 1 - before.min(MAX_HEAD))]);
            // Parsed only once its end is there: a head that arrives a
            // byte at a time costs a search of each byte, not a parse.
            let complete = find_head_end(&self.head, self.scanned).is_some();
            self.scanned = self.head.len();
            let parsed = if complete || self.head.len() > MAX_HEAD { parse_response(&self.head) } else { Ok(None) };
            match parsed.map_err(|e| ResponseError(e.to_string()))? {
                None if self.head.len() > MAX_HEAD => return Err(ResponseError("response head too long".into())),
                None => return Ok(()),
                Some((head, len)) => {
                    bytes = &bytes[len.saturating_sub(before)..];
                    self.head = Vec::new();
                    self.scanned = 0;
                    // An interim response (100 Continue, 103 Early Hints)
                    // comes before the final one (RFC 9110 §15.2).
                    if (100..200).contains(&head.status) && head.status != 101 {
                        if bytes.is_empty() {
                            return Ok(());
                        }
                        continue;
                    }
                    self.status = Some(head.status);
                    self.framing = Some(head.body);
                    self.done = head.body == Framing::Empty || head.body == Framing::Length(0);
                }
            }
        }
        if self.done {
            return Ok(());
        }
        let already = self.received;
        let received = &mut self.received;
        let mut deliver = |b: &[u8]| {
            *received += b.len() as u64;
            body(b);
        };
        match self.framing {
            Some(Framing::Chunked) => {
                self.chunked.feed(bytes, &mut deliver).map_err(|e| ResponseError(e.to_string()))?;
                self.done = self.chunked.is_done();
            }
            Some(Framing::Length(total)) => {
                let n = usize::try_from(total.saturating_sub(already)).unwrap_or(usize::MAX).min(bytes.len());
                deliver(&bytes[..n]);
                self.done = self.received >= total;
            }
            _ => deliver(bytes),
        }
        Ok(())
    }

    /// The server closed: a body that runs to the close is complete, any
    /// other unfinished one is cut short.
    pub fn at_eof(&mut self) -> Result<(), ResponseError> {
        if self.framing == Some(Framing::UntilClose) {
            self.done = true;
        }
        if self.done {
            Ok(())
        } else {
            Err(ResponseError(format!("the server closed after {} bytes", self.received)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let u: Url = "http://10.0.0.1:8000/a/b?c".parse().unwrap();
        assert_eq!((u.host, u.port, u.path.as_str()), (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 8000, "/a/b?c"));
        let u: Url = "http://10.0.0.1".parse().unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        assert!("https://10.0.0.1/".parse::<Url>().is_err());
        assert!("http://example.com/".parse::<Url>().is_err());
        assert!("http://10.0.0.1:99999/".parse::<Url>().is_err());
    }

    #[test]
    fn ipv6_hosts_come_in_brackets() {
        let u: Url = "http://[fd00::1]:8080/x".parse().unwrap();
        assert_eq!(u.server(), "[fd00::1]:8080".parse::<SocketAddr>().unwrap());
        assert_eq!(u.path, "/x");
        let request = String::from_utf8(u.request()).unwrap();
        assert!(request.contains("\r\nHost: [fd00::1]:8080\r\n"), "{request}");
        let u: Url = "http://[fe80::2]".parse().unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        assert!(String::from_utf8(u.request()).unwrap().contains("Host: [fe80::2]\r\n"));
        assert!("http://fd00::1/".parse::<Url>().is_err(), "an IPv6 host needs brackets");
        assert!("http://[fd00::1/".parse::<Url>().is_err());
        assert!("http://[10.0.0.1]/".parse::<Url>().is_err());
        assert!("http://[fd00::1]x/".parse::<Url>().is_err());
        assert!("http://[fd00::1]:/".parse::<Url>().is_err());
    }

    fn read_in_pieces(response: &[u8], piece: usize, eof: bool) -> Result<(Vec<u8>, Option<u16>), ResponseError> {
        let mut reader = ResponseReader::default();
        let mut body = Vec::new();
        for chunk in response.chunks(piece) {
            reader.feed(chunk, |b| body.extend_from_slice(b))?;
        }
        if eof {
            reader.at_eof()?;
        }
        assert!(reader.is_done());
        assert_eq!(reader.received(), body.len() as u64);
        Ok((body, reader.status()))
    }

    #[test]
    fn bodies_are_read_in_every_framing_however_cut() {
        let length = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n";
        let close = b"HTTP/1.0 404 Not Found\r\n\r\nhello";
        for piece in 1..40 {
            assert_eq!(read_in_pieces(length, piece, false).unwrap(), (b"hello".to_vec(), Some(200)));
            assert_eq!(read_in_pieces(chunked, piece, false).unwrap(), (b"hello".to_vec(), Some(200)));
            assert_eq!(read_in_pieces(close, piece, true).unwrap(), (b"hello".to_vec(), Some(404)));
        }
    }

    #[test]
    fn interim_responses_are_passed_over() {
        let response = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        for piece in 1..response.len() {
            assert_eq!(read_in_pieces(response, piece, false).unwrap(), (b"ok".to_vec(), Some(200)), "piece {piece}");
        }
    }

    #[test]
    fn a_short_body_or_a_huge_head_is_an_error() {
        let mut reader = ResponseReader::default();
        reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", |_| {}).unwrap();
        assert_eq!(reader.at_eof(), Err(ResponseError("the server closed after 3 bytes".into())));
        let mut reader = ResponseReader::default();
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        head.resize(MAX_HEAD + 10, b'a');
        assert!(reader.feed(&head, |_| {}).is_err());
    }
}
