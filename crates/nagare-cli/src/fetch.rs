//! `nagare fetch URL -o FILE`: an HTTP/1.1 download through nagare, on a
//! TAP device or a VNI port.

use crate::realtime;
use crate::up::{open_link, Link};
use anyhow::{bail, Context, Result};
use nagare_core::iface::Error;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use nagare_core::Instant;
use nagare_dev::MonotonicClock;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

pub struct Url {
    pub host: Ipv4Addr,
    pub port: u16,
    pub path: String,
}

/// `http://A.B.C.D[:port][/path]`: no DNS in nagare yet, so the host is an
/// address.
pub fn parse_url(url: &str) -> Result<Url> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("{url}: only http:// URLs are supported");
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().with_context(|| format!("{url}: bad port {p:?}"))?),
        None => (authority, 80),
    };
    let host = host
        .parse()
        .with_context(|| format!("{url}: the host must be an IPv4 address (nagare has no DNS resolver yet)"))?;
    Ok(Url { host, port, path: path.to_string() })
}

#[derive(PartialEq)]
enum Body {
    Length(u64),
    Chunked,
    UntilClose,
}

struct Download {
    request: Vec<u8>,
    sent: usize,
    head: Vec<u8>,
    status: Option<u16>,
    body: Option<Body>,
    received: u64,
    chunk_left: u64,
    chunk_buf: Vec<u8>,
    done: bool,
    out: BufWriter<File>,
    error: Option<String>,
    started: Option<Instant>,
    last_report: Option<Instant>,
}

fn parse_head(head: &[u8]) -> Result<(u16, Body), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut body = Body::UntilClose;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                body = Body::Length(value.parse().map_err(|_| format!("bad Content-Length {value:?}"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
                body = Body::Chunked;
            }
        }
    }
    Ok((status, body))
}

impl Download {
    /// A download of `target` into `file`.
    fn new(target: &Url, file: File) -> Download {
        let host_header =
            if target.port == 80 { target.host.to_string() } else { format!("{}:{}", target.host, target.port) };
        Download {
            request: format!(
                "GET {} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: nagare-fetch\r\nAccept: */*\r\nConnection: close\r\n\r\n",
                target.path
            )
            .into_bytes(),
            sent: 0,
            head: Vec::new(),
            status: None,
            body: None,
            received: 0,
            chunk_left: 0,
            chunk_buf: Vec::new(),
            done: false,
            out: BufWriter::with_capacity(1 << 20, file),
            error: None,
            started: None,
            last_report: None,
        }
    }

    /// Takes the next bytes of the response: the head, then the body.
    fn feed(&mut self, chunk: &[u8]) {
        if self.body.is_some() {
            self.body_bytes(chunk);
            return;
        }
        self.head.extend_from_slice(chunk);
        if let Some(end) = self.head.windows(4).position(|w| w == b"\r\n\r\n") {
            let body_start = self.head.split_off(end + 4);
            match parse_head(&self.head) {
                Ok((status, body)) => {
                    self.status = Some(status);
                    if body == Body::Length(0) {
                        self.done = true;
                    }
                    self.body = Some(body);
                }
                Err(e) => self.error = Some(e),
            }
            self.body_bytes(&body_start);
        } else if self.head.len() > MAX_HEAD {
            self.error = Some("response head too long".into());
        }
    }

    /// The server closed: a body that runs to the close is complete, any
    /// other is cut short.
    fn at_eof(&mut self) {
        if self.body == Some(Body::UntilClose) {
            self.done = true;
        } else if !self.done {
            self.error = Some(format!("the server closed after {} bytes", self.received));
        }
    }

    /// A progress line every half second.
    fn report(&mut self, now: Instant) {
        let report_due = self.last_report.is_none_or(|t| now.saturating_since(t) >= Duration::from_millis(500));
        if report_due && self.received > 0 {
            self.last_report = Some(now);
            let secs = now.saturating_since(self.started.unwrap_or(now)).as_secs_f64().max(1e-6);
            let total = match self.body {
                Some(Body::Length(t)) => format!(" of {t}"),
                _ => String::new(),
            };
            eprint!("\r  {} bytes{total}, {:.1} Mbit/s   ", self.received, self.received as f64 * 8.0 / secs / 1e6);
        }
    }

    /// Flushes the file and prints the summary; an error if the download
    /// failed or the server did not answer 2xx.
    fn finish(mut self, url: &str, output: &Path, elapsed: Duration) -> Result<()> {
        self.out.flush().context("writing the file")?;
        eprintln!();
        if let Some(e) = self.error {
            bail!("fetch {url}: {e}");
        }
        let status = self.status.unwrap_or(0);
        println!(
            "{url}: HTTP {status}, {} bytes in {:.3} s ({:.1} Mbit/s) -> {}",
            self.received,
            elapsed.as_secs_f64(),
            self.received as f64 * 8.0 / elapsed.as_secs_f64().max(1e-6) / 1e6,
            output.display()
        );
        if !(200..300).contains(&status) {
            bail!("fetch {url}: the server answered {status}");
        }
        Ok(())
    }

    fn write(&mut self, data: &[u8]) {
        if let Err(e) = self.out.write_all(data) {
            self.error = Some(format!("writing the file: {e}"));
        }
        self.received += data.len() as u64;
    }

    /// Feeds body bytes, decoding chunked transfer coding if used.
    fn body_bytes(&mut self, mut data: &[u8]) {
        match self.body {
            Some(Body::Chunked) => {
                while !data.is_empty() && !self.done {
                    if self.chunk_left > 0 {
                        let n = (self.chunk_left as usize).min(data.len());
                        let piece = data[..n].to_vec();
                        self.write(&piece);
                        self.chunk_left -= n as u64;
                        // The CRLF after a chunk is skipped with the next size line.
                        data = &data[n..];
                        continue;
                    }
                    self.chunk_buf.extend_from_slice(data);
                    // Size lines: skip a leading CRLF left from the previous chunk.
                    while self.chunk_buf.starts_with(b"\r\n") {
                        self.chunk_buf.drain(..2);
                    }
                    let Some(end) = self.chunk_buf.windows(2).position(|w| w == b"\r\n") else {
                        if self.chunk_buf.len() > 1024 {
                            self.error = Some("chunk size line too long".into());
                        }
                        return;
                    };
                    let line = String::from_utf8_lossy(&self.chunk_buf[..end]).to_string();
                    let size_text = line.split(';').next().unwrap_or("").trim();
                    let Ok(size) = u64::from_str_radix(size_text, 16) else {
                        self.error = Some(format!("bad chunk size {line:?}"));
                        return;
                    };
                    let rest: Vec<u8> = self.chunk_buf.drain(..end + 2).skip(end + 2).collect();
                    let rest = [rest, std::mem::take(&mut self.chunk_buf)].concat();
                    if size == 0 {
                        self.done = true;
                        return;
                    }
                    self.chunk_left = size;
                    self.body_bytes(&rest);
                    return;
                }
            }
            Some(Body::Length(total)) => {
                let n = ((total - self.received) as usize).min(data.len());
                self.write(&data[..n]);
                if self.received >= total {
                    self.done = true;
                }
            }
            _ => self.write(data),
        }
    }

    fn tick(
        &mut self,
        iface: &mut nagare_core::Interface,
        handle: TcpHandle,
        now: Instant,
    ) -> ControlFlow<(), Option<Instant>> {
        self.started.get_or_insert(now);
        if self.error.is_some() || self.done {
            return ControlFlow::Break(());
        }
        match iface.tcp_ref().state(handle) {
            Ok(State::SynSent | State::SynReceived) => return ControlFlow::Continue(None),
            Ok(_) => {}
            Err(_) => {
                self.error = Some("the connection is gone".into());
                return ControlFlow::Break(());
            }
        }
        while self.sent < self.request.len() {
            match iface.tcp().send(handle, &self.request[self.sent..], now) {
                Ok(0) | Err(Error::WouldBlock) => break,
                Ok(n) => self.sent += n,
                Err(e) => {
                    self.error = Some(format!("sending the request: {e}"));
                    return ControlFlow::Break(());
                }
            }
        }
        loop {
            match iface.tcp().recv_buf(handle, usize::MAX, now) {
                Ok(Some(data)) => {
                    for chunk in data.chunks() {
                        self.feed(chunk);
                    }
                    if self.error.is_some() || self.done {
                        return ControlFlow::Break(());
                    }
                }
                Ok(None) => {
                    self.at_eof();
                    return ControlFlow::Break(());
                }
                Err(Error::WouldBlock) => break,
                Err(e) => {
                    self.error = Some(format!("receiving: {e}"));
                    return ControlFlow::Break(());
                }
            }
        }
        self.report(now);
        ControlFlow::Continue(Some(now + Duration::from_millis(500)))
    }
}

pub fn run(link: Link, url: &str, output: &Path, timeout: Duration) -> Result<()> {
    let target = parse_url(url)?;
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = open_link(&link, None, &clock)?;
    let handle = host
        .iface
        .tcp()
        .connect(SocketAddrV4::new(target.host, target.port), 0, clock.now())
        .map_err(anyhow::Error::msg)?;
    let file = File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut download = Download::new(&target, file);
    let deadline = clock.now() + timeout;
    realtime::run(&mut host, &clock, &stop, |host, now| {
        if now >= deadline {
            download.error = Some(format!("timed out after {timeout:?}"));
            return ControlFlow::Break(());
        }
        download.tick(&mut host.iface, handle, now)
    })?;
    let elapsed = clock.now().saturating_since(download.started.unwrap_or(Instant::ZERO));
    let _ = host.iface.tcp().close(handle, clock.now());
    // Let the FIN go out before the device closes.
    for _ in 0..10 {
        let now = clock.now();
        let _ = host.step(now);
        std::thread::sleep(Duration::from_millis(2));
    }
    download.finish(url, output, elapsed)
}

/// Downloads through a running `nagare netd` (`--via SOCKET`): the stack
/// is netd's, and this program is one of its applications.
pub fn run_via(socket: &Path, url: &str, output: &Path, timeout: Duration) -> Result<()> {
    let target = parse_url(url)?;
    let clock = MonotonicClock::new();
    let netd = nagare::Netd::connect(socket).with_context(|| format!("connecting to netd at {}", socket.display()))?;
    let peer = std::net::SocketAddr::V4(SocketAddrV4::new(target.host, target.port));
    let mut stream = nagare::net::TcpStream::connect_timeout_via(&netd, &peer, timeout)
        .with_context(|| format!("connecting to {peer} through netd"))?;
    let file = File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut download = Download::new(&target, file);
    download.started = Some(clock.now());
    stream.write_all(&download.request).context("sending the request")?;
    let deadline = clock.now() + timeout;
    let mut buf = vec![0u8; 64 * 1024];
    while !download.done && download.error.is_none() {
        // Each read waits at most until the deadline (netd's death ends it
        // within a second).
        let left = deadline.saturating_since(clock.now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            download.error = Some(format!("timed out after {timeout:?}"));
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => download.at_eof(),
            Ok(n) => download.feed(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                download.error = Some(format!("timed out after {timeout:?}"));
            }
            Err(e) => download.error = Some(format!("receiving: {e}")),
        }
        download.report(clock.now());
    }
    let elapsed = clock.now().saturating_since(download.started.unwrap_or(Instant::ZERO));
    drop(stream);
    download.finish(url, output, elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let u = parse_url("http://10.0.0.1:8000/a/b?c").unwrap();
        assert_eq!((u.host, u.port, u.path.as_str()), (Ipv4Addr::new(10, 0, 0, 1), 8000, "/a/b?c"));
        let u = parse_url("http://10.0.0.1").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        assert!(parse_url("https://10.0.0.1/").is_err());
        assert!(parse_url("http://example.com/").is_err());
    }

    #[test]
    fn heads_parse() {
        let (s, b) = parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n").unwrap();
        assert!(s == 200 && b == Body::Length(12));
        let (_, b) = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n").unwrap();
        assert!(b == Body::Chunked);
        assert!(parse_head(b"garbage").is_err());
    }
}
