//! `nagare fetch URL -o FILE`: an HTTP/1.1 download through nagare, on a
//! host of its own (a TAP device or a VNI port) or through a running netd.

use anyhow::{bail, Context, Result};
use nagare_core::iface::Error;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use nagare_core::Instant;
use nagare_dev::MonotonicClock;
use nagare_host::http::client::{ResponseReader, Url};
use nagare_host::{link, realtime, LinkSpec};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::IpAddr;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

/// A download into a file, with a progress line.
struct Download {
    request: Vec<u8>,
    sent: usize,
    response: ResponseReader,
    out: BufWriter<File>,
    error: Option<String>,
    started: Option<Instant>,
    last_report: Option<Instant>,
}

impl Download {
    /// A download of `target` into `file`.
    fn new(target: &Url, file: File) -> Download {
        Download {
            request: target.request(),
            sent: 0,
            response: ResponseReader::default(),
            out: BufWriter::with_capacity(1 << 20, file),
            error: None,
            started: None,
            last_report: None,
        }
    }

    fn finished(&self) -> bool {
        self.error.is_some() || self.response.is_done()
    }

    /// Takes the next bytes of the response.
    fn feed(&mut self, bytes: &[u8]) {
        let out = &mut self.out;
        let mut write_error = None;
        let fed = self.response.feed(bytes, |body| {
            if write_error.is_none() {
                write_error = out.write_all(body).err();
            }
        });
        if let Some(e) = write_error {
            self.error = Some(format!("writing the file: {e}"));
        } else if let Err(e) = fed {
            self.error = Some(e.to_string());
        }
    }

    /// The server closed.
    fn at_eof(&mut self) {
        if let Err(e) = self.response.at_eof() {
            self.error.get_or_insert(e.to_string());
        }
    }

    /// A progress line every half second.
    fn report(&mut self, now: Instant) {
        let received = self.response.received();
        let report_due = self.last_report.is_none_or(|t| now.saturating_since(t) >= Duration::from_millis(500));
        if report_due && received > 0 {
            self.last_report = Some(now);
            let secs = now.saturating_since(self.started.unwrap_or(now)).as_secs_f64().max(1e-6);
            let total = self.response.total().map(|t| format!(" of {t}")).unwrap_or_default();
            eprint!("\r  {received} bytes{total}, {:.1} Mbit/s   ", received as f64 * 8.0 / secs / 1e6);
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
        let status = self.response.status().unwrap_or(0);
        let received = self.response.received();
        println!(
            "{url}: HTTP {status}, {received} bytes in {:.3} s ({:.1} Mbit/s) -> {}",
            elapsed.as_secs_f64(),
            received as f64 * 8.0 / elapsed.as_secs_f64().max(1e-6) / 1e6,
            output.display()
        );
        if !(200..300).contains(&status) {
            bail!("fetch {url}: the server answered {status}");
        }
        Ok(())
    }

    /// One turn on the engine: send what is left of the request, take
    /// what arrived.
    fn tick(
        &mut self,
        iface: &mut nagare_core::Interface,
        handle: TcpHandle,
        now: Instant,
    ) -> ControlFlow<(), Option<Instant>> {
        self.started.get_or_insert(now);
        if self.finished() {
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
                    if self.finished() {
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

/// Downloads `url` into `output` through a host of its own on `link`.
pub fn run(link: &LinkSpec, url: &str, output: &Path, timeout: Duration) -> Result<()> {
    let target: Url = url.parse().map_err(anyhow::Error::msg)?;
    if let (IpAddr::V4(dst), None) = (target.host, link.addr) {
        bail!("fetching from {dst} needs an IPv4 --addr: without one the host does not speak IPv4");
    }
    let stop = realtime::stop_flag()?;
    let clock = MonotonicClock::new();
    let mut host = link::open_host(link, None, &clock)?;
    if let IpAddr::V6(dst) = target.host {
        if link.ipv6.is_empty() {
            bail!("fetching from {dst} needs an IPv6 --addr: without one the host does not speak IPv6");
        }
        let ready = realtime::wait_for_ipv6_source(&mut host, &clock, &stop, dst, realtime::IPV6_SOURCE_WAIT)?;
        if !ready {
            bail!("no IPv6 address of {dst}'s scope passed duplicate address detection");
        }
    }
    let handle = host.iface.tcp().connect(target.server(), 0, clock.now()).map_err(anyhow::Error::msg)?;
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
        host.step(clock.now());
        std::thread::sleep(Duration::from_millis(2));
    }
    download.finish(url, output, elapsed)
}

/// Downloads through a running `nagare netd` (its rendezvous socket): the
/// stack is netd's, and this program is one of its applications.
pub fn run_via(socket: &Path, url: &str, output: &Path, timeout: Duration) -> Result<()> {
    let target: Url = url.parse().map_err(anyhow::Error::msg)?;
    let clock = MonotonicClock::new();
    let netd = nagare::Session::connect(socket)?;
    let peer = target.server();
    let mut stream = nagare::net::TcpStream::connect_timeout_via(&netd, &peer, timeout)
        .with_context(|| format!("connecting to {peer} through netd"))?;
    let file = File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut download = Download::new(&target, file);
    download.started = Some(clock.now());
    stream.write_all(&download.request).context("sending the request")?;
    let deadline = clock.now() + timeout;
    let mut buf = vec![0u8; 64 * 1024];
    while !download.finished() {
        // Each read waits at most until the deadline (netd's death ends it
        // within a second).
        let left = deadline.saturating_since(clock.now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            download.error = Some(format!("timed out after {timeout:?}"));
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => {
                download.at_eof();
                break;
            }
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
