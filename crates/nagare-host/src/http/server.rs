//! A small static HTTP/1.1 file server: GET and HEAD, persistent
//! connections (HTTP/1.1 by default, HTTP/1.0 when asked), pipelining,
//! Content-Length, files streamed from disk straight into packet buffers
//! (the read is the only copy).

use super::chunked::ChunkedDecoder;
use super::{find_head_end, parse_request, Framing, HeadError, RequestHead};
use nagare_core::buf::PacketBuf;
use nagare_core::iface::Error;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Instant, Interface};
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Largest request head accepted (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Largest request body skipped to keep the connection; a larger one
/// ends the connection after the response.
const MAX_DISCARD: u64 = 1 << 20;
/// Body bytes read from the file before one send call.
const SEND_CHAIN_BYTES: usize = 64 * 1024;

#[derive(Debug, Default)]
pub struct Outcome {
    pub progress: bool,
    pub requests: u64,
    pub bytes_sent: u64,
    /// Our side should close after what was sent.
    pub close: bool,
    /// The connection failed; drop it.
    pub failed: bool,
}

struct Response {
    head: Vec<u8>,
    head_sent: usize,
    body: Option<File>,
    remaining: u64,
    /// A chunk read from the file that the send queue had no room for.
    pending: PacketBuf,
}

/// The body of the last request, being read past.
#[derive(Debug)]
enum Skip {
    /// No body, or all of it read.
    Done,
    /// This many bytes of a Content-Length body left.
    Length(u64),
    /// A chunked body, and how many data bytes of it were read.
    Chunked(ChunkedDecoder, u64),
}

/// One connection of the file server.
pub struct HttpConnection {
    root: PathBuf,
    /// Bytes received and not yet used: a head being read, or the start
    /// of a body to skip.
    head: Vec<u8>,
    /// How far `head` was searched for the end of a head, so a head that
    /// arrives a byte at a time is not searched again from the start.
    scanned: usize,
    response: Option<Response>,
    close_after: bool,
    peer_done: bool,
    skip: Skip,
}

impl HttpConnection {
    /// A connection serving the files under `root`.
    pub fn new(root: PathBuf) -> Self {
        HttpConnection {
            root,
            head: Vec::new(),
            scanned: 0,
            response: None,
            close_after: false,
            peer_done: false,
            skip: Skip::Done,
        }
    }

    pub fn serve(&mut self, iface: &mut Interface, handle: TcpHandle, now: Instant) -> Outcome {
        let mut out = Outcome::default();
        // Bounded: a pipelining client is served a few requests per step.
        for _ in 0..8 {
            if self.response.is_some() {
                match self.send_response(iface, handle, now, &mut out) {
                    Ok(true) => {
                        self.response = None;
                        if self.close_after {
                            out.close = true;
                            return out;
                        }
                    }
                    Ok(false) => return out,
                    Err(()) => {
                        out.failed = true;
                        return out;
                    }
                }
            }
            if !self.read_request(iface, handle, now, &mut out) {
                return out;
            }
        }
        out
    }

    /// Reads until a whole request head is there (past the body of the
    /// request before it) and prepares its response; returns whether a
    /// response is ready.
    fn read_request(&mut self, iface: &mut Interface, handle: TcpHandle, now: Instant, out: &mut Outcome) -> bool {
        if self.close_after {
            // RFC 9112 §9.6: nothing after the request that ends the
            // connection is processed. What still arrives is read and
            // dropped (a lingering close), so that unread data does not
            // turn our close into a reset before the client has read the
            // response.
            self.head.clear();
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = iface.tcp().recv(handle, &mut buf, now) {
                out.progress |= n > 0;
            }
            out.close = true;
            return false;
        }
        loop {
            if self.skip_body() {
                let end = find_head_end(&self.head, self.scanned);
                self.scanned = self.head.len();
                if end.is_some() || self.head.len() >= MAX_HEAD {
                    self.scanned = 0;
                    match parse_request(&self.head) {
                        Ok(Some((head, len))) => {
                            self.head.drain(..len);
                            out.requests += 1;
                            out.progress = true;
                            self.response = Some(self.respond(&head));
                            return true;
                        }
                        Ok(None) if self.head.len() < MAX_HEAD => {}
                        Ok(None) | Err(HeadError::TooManyHeaders) => {
                            self.close_after = true;
                            self.response = Some(simple(431, "Request Header Fields Too Large", Persist::Close, false));
                            return true;
                        }
                        Err(_) => {
                            self.close_after = true;
                            self.response = Some(simple(400, "Bad Request", Persist::Close, false));
                            return true;
                        }
                    }
                }
            }
            if self.close_after {
                // A body that cannot be skipped ends the connection.
                out.close = true;
                return false;
            }
            if self.peer_done {
                out.close = true;
                return false;
            }
            let mut buf = [0u8; 4096];
            let room = (MAX_HEAD - self.head.len().min(MAX_HEAD)).clamp(1, buf.len());
            match iface.tcp().recv(handle, &mut buf[..room], now) {
                Ok(0) => {
                    self.peer_done = true;
                    if self.head.is_empty() {
                        out.close = true;
                        return false;
                    }
                }
                Ok(n) => {
                    out.progress = true;
                    self.head.extend_from_slice(&buf[..n]);
                }
                Err(Error::WouldBlock) => return false,
                Err(_) => {
                    out.failed = true;
                    return false;
                }
            }
        }
    }

    /// Drops what the last request's body has in `head`; whether all of
    /// it is gone (else more must be read, or, past [`MAX_DISCARD`], the
    /// connection ends: `close_after`).
    fn skip_body(&mut self) -> bool {
        if !matches!(self.skip, Skip::Done) {
            // What is left of `head` afterwards starts a new head.
            self.scanned = 0;
        }
        match &mut self.skip {
            Skip::Done => true,
            Skip::Length(left) => {
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(self.head.len());
                self.head.drain(..n);
                *left -= n as u64;
                if *left == 0 {
                    self.skip = Skip::Done;
                }
                matches!(self.skip, Skip::Done)
            }
            Skip::Chunked(decoder, seen) => {
                let mut data = 0;
                match decoder.feed(&self.head, |d| data += d.len()) {
                    Ok(used) => {
                        self.head.drain(..used);
                        *seen += data as u64;
                        if decoder.is_done() {
                            self.skip = Skip::Done;
                            return true;
                        }
                        if *seen > MAX_DISCARD {
                            self.close_after = true;
                        }
                        false
                    }
                    Err(_) => {
                        self.close_after = true;
                        false
                    }
                }
            }
        }
    }

    fn respond(&mut self, request: &RequestHead) -> Response {
        // A body the request carries is read past before the next request:
        // small ones are skipped, the rest end the connection instead.
        match request.body {
            Framing::Length(n) if n <= MAX_DISCARD => self.skip = Skip::Length(n),
            Framing::Chunked => self.skip = Skip::Chunked(ChunkedDecoder::default(), 0),
            Framing::Empty => {}
            _ => self.close_after = true,
        }
        self.close_after |= !request.keep_alive;
        let persist = match (self.close_after, request.minor_version) {
            (true, _) => Persist::Close,
            // An HTTP/1.0 client keeps the connection only if told so.
            (false, 0) => Persist::KeepAlive,
            (false, _) => Persist::Default,
        };
        let head_only = match request.method.as_str() {
            "GET" => false,
            "HEAD" => true,
            _ => return simple(405, "Method Not Allowed", persist, false),
        };
        let Some(path) = resolve(&self.root, &request.target) else {
            return simple(404, "Not Found", persist, head_only);
        };
        let path = if path.is_dir() { path.join("index.html") } else { path };
        let (file, len) = match File::open(&path).and_then(|f| f.metadata().map(|m| (f, m))) {
            Ok((f, m)) if m.is_file() => (f, m.len()),
            _ => return simple(404, "Not Found", persist, head_only),
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nServer: nagare\r\nContent-Type: {}\r\nContent-Length: {len}\r\n{}\r\n",
            content_type(&path),
            persist.header()
        );
        Response {
            head: head.into_bytes(),
            head_sent: 0,
            body: (!head_only).then_some(file),
            remaining: if head_only { 0 } else { len },
            pending: PacketBuf::new(),
        }
    }

    /// Pushes the response into the send queue as far as it goes; returns
    /// whether it is all queued.
    fn send_response(
        &mut self,
        iface: &mut Interface,
        handle: TcpHandle,
        now: Instant,
        out: &mut Outcome,
    ) -> Result<bool, ()> {
        let Some(response) = self.response.as_mut() else {
            return Ok(true);
        };
        while response.head_sent < response.head.len() {
            match iface.tcp().send(handle, &response.head[response.head_sent..], now) {
                Ok(0) | Err(Error::WouldBlock) => return Ok(false),
                Ok(n) => {
                    response.head_sent += n;
                    out.progress = true;
                }
                Err(_) => return Err(()),
            }
        }
        loop {
            if !response.pending.is_empty() {
                let len = response.pending.len();
                let rest = iface.tcp().send_buf(handle, std::mem::take(&mut response.pending), now).map_err(|_| ())?;
                out.bytes_sent += (len - rest.len()) as u64;
                out.progress |= rest.len() < len;
                response.pending = rest;
                if !response.pending.is_empty() {
                    return Ok(false);
                }
            }
            if response.remaining == 0 {
                return Ok(true);
            }
            let Some(file) = response.body.as_mut() else {
                return Ok(true);
            };
            // Read straight into pool buffers: the send queue takes them
            // without another copy. A chain of up to 64 KiB per send lets
            // the engine build one super-segment from it where the device
            // offloads segmentation, instead of one segment per buffer.
            let pool = iface.pool().clone();
            while response.pending.len() < SEND_CHAIN_BYTES && response.remaining > 0 {
                let Ok(mut buffer) = pool.alloc() else {
                    break;
                };
                let Some(bytes) = buffer.as_mut_slice() else {
                    return Err(());
                };
                let want = (bytes.len() as u64).min(response.remaining) as usize;
                let n = match file.read(&mut bytes[..want]) {
                    Ok(0) | Err(_) => return Err(()),
                    Ok(n) => n,
                };
                response.remaining -= n as u64;
                response.pending.append(PacketBuf::from_buffer(buffer, 0, n).ok_or(())?);
            }
            if response.pending.is_empty() {
                return Ok(false);
            }
        }
    }
}

/// What a response says of the connection (RFC 9112 §9.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persist {
    /// It closes after this response.
    Close,
    /// It stays open, said for an HTTP/1.0 client that asked.
    KeepAlive,
    /// It stays open, as HTTP/1.1 does without saying.
    Default,
}

impl Persist {
    fn header(self) -> &'static str {
        match self {
            Persist::Close => "Connection: close\r\n",
            Persist::KeepAlive => "Connection: keep-alive\r\n",
            Persist::Default => "",
        }
    }
}

/// A short text response (without its body when answering HEAD).
fn simple(code: u16, reason: &str, persist: Persist, head_only: bool) -> Response {
    let body = format!("{code} {reason}\n");
    let allow = if code == 405 { "Allow: GET, HEAD\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nServer: nagare\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{allow}{}\r\n{}",
        body.len(),
        persist.header(),
        if head_only { "" } else { body.as_str() }
    );
    Response { head: head.into_bytes(), head_sent: 0, body: None, remaining: 0, pending: PacketBuf::new() }
}

/// Maps a request target to a file under `root`, refusing anything that
/// would leave it.
fn resolve(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next()?;
    let decoded = percent_decode(path)?;
    let relative = Path::new(decoded.trim_start_matches('/'));
    let mut out = root.to_path_buf();
    for component in relative.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.contains('\0'))
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_never_leave_the_root() {
        let root = Path::new("/srv");
        assert_eq!(resolve(root, "/a/b.txt?x=1"), Some(PathBuf::from("/srv/a/b.txt")));
        assert_eq!(resolve(root, "/a%20b"), Some(PathBuf::from("/srv/a b")));
        assert_eq!(resolve(root, "/../etc/passwd"), None);
        assert_eq!(resolve(root, "/a/%2e%2e/%2e%2e/etc"), None);
        assert_eq!(resolve(root, "/%zz"), None);
        assert_eq!(resolve(root, "/a%00b"), None);
    }
}
