//! The HTTP file server of a host, driven from a second host on a
//! simulated link in virtual time: persistence (HTTP/1.1 by default,
//! HTTP/1.0 only when asked and then said in the response), request bodies
//! skipped rather than read as the next request, and heads that a real
//! parser refuses.

use nagare_core::iface::Error;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use nagare_dev::LinkConfig;
use nagare_host::sim::{host_config, new_host, sim_ports};
use nagare_host::{ServiceConfig, SimPair};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

struct Site {
    root: PathBuf,
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn site(name: &str) -> Site {
    let root = std::env::temp_dir().join(format!("nagare-http-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), b"hello\n").unwrap();
    Site { root }
}

/// A client host (A) and a server host (B) serving `root` over HTTP.
fn pair(root: &std::path::Path) -> SimPair {
    let (pa, pb) = sim_ports(LinkConfig::default(), 3);
    let mut pair = SimPair::new(
        new_host(host_config(1, "10.0.0.1/24".parse().unwrap(), 1), pa),
        new_host(host_config(2, "10.0.0.2/24".parse().unwrap(), 2), pb),
    );
    let config = ServiceConfig { http: Some(root.to_path_buf()), ..ServiceConfig::default() };
    let b = &mut pair.b;
    config.enable(&mut b.services, &mut b.iface).unwrap();
    pair
}

fn connect(pair: &mut SimPair) -> TcpHandle {
    let now = pair.now;
    let h = pair.a.iface.tcp().connect(SocketAddrV4::new(SERVER, 80), 0, now).unwrap();
    let established =
        pair.run_until(Duration::from_secs(5), |p| p.a.iface.tcp_ref().state(h) == Ok(State::Established)).unwrap();
    assert!(established);
    h
}

/// Sends `request` and reads for a second of virtual time: what came
/// back, and whether the server closed.
fn exchange(pair: &mut SimPair, h: TcpHandle, request: &[u8]) -> (String, bool) {
    let now = pair.now;
    assert_eq!(pair.a.iface.tcp().send(h, request, now), Ok(request.len()));
    let mut got = Vec::new();
    let mut closed = false;
    for _ in 0..100 {
        pair.advance(Duration::from_millis(10)).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            let now = pair.now;
            match pair.a.iface.tcp().recv(h, &mut buf, now) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("receiving: {e}"),
            }
        }
        if closed {
            break;
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

#[test]
fn http_1_0_keep_alive_is_answered_and_kept() {
    let site = site("keepalive10");
    let mut pair = pair(&site.root);
    let h = connect(&mut pair);
    let (first, closed) = exchange(&mut pair, h, b"GET /a.txt HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert!(first.contains("\r\nConnection: keep-alive\r\n"), "{first}");
    assert!(first.ends_with("\r\n\r\nhello\n"), "{first}");
    assert!(!closed, "an HTTP/1.0 keep-alive connection was closed");
    let (second, closed) = exchange(&mut pair, h, b"GET /a.txt HTTP/1.0\r\n\r\n");
    assert!(second.contains("\r\nConnection: close\r\n") && second.ends_with("hello\n"), "{second}");
    assert!(closed, "a plain HTTP/1.0 request must end the connection");
}

#[test]
fn http_1_1_persists_without_saying_so() {
    let site = site("keepalive11");
    let mut pair = pair(&site.root);
    let h = connect(&mut pair);
    let (first, closed) = exchange(&mut pair, h, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n") && !first.contains("Connection:"), "{first}");
    assert!(!closed);
    let (missing, closed) = exchange(&mut pair, h, b"HEAD /nothing HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(missing.starts_with("HTTP/1.1 404 Not Found\r\n"), "{missing}");
    assert!(missing.ends_with("\r\n\r\n"), "a HEAD response carries no body: {missing:?}");
    assert!(!closed);
}

#[test]
fn a_request_body_is_skipped_not_taken_for_the_next_request() {
    let site = site("body");
    let mut pair = pair(&site.root);
    let h = connect(&mut pair);
    // The body looks like a request; it must not be answered as one.
    let body = "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n";
    let request = format!(
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        body.len()
    );
    let (text, closed) = exchange(&mut pair, h, request.as_bytes());
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(!text.contains("404"), "{text}");
    assert!(!closed);
    // The same with the body chunked, in two chunks.
    let chunked = format!(
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        &body[..5],
        body.len() - 5,
        &body[5..]
    );
    let (text, closed) = exchange(&mut pair, h, chunked.as_bytes());
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(!text.contains("404"), "{text}");
    assert!(!closed);
}

#[test]
fn nothing_after_a_closing_request_is_processed() {
    let site = site("close");
    let mut pair = pair(&site.root);
    let h = connect(&mut pair);
    let request = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    let (text, closed) = exchange(&mut pair, h, request);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 1, "{text}");
    assert!(text.ends_with("hello\n"), "{text}");
    assert!(closed);
    assert_eq!(pair.b.services.stats.http_requests, 1);
}

#[test]
fn conflicting_lengths_and_smuggled_encodings_are_refused_and_closed() {
    let site = site("bad");
    for request in [
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\nContent-Length: 3\r\n\r\nabc",
        "GET /a.txt HTTP/1.1\r\n\r\n",
        "GET /a.txt FTP/1.1\r\n\r\n",
    ] {
        let mut pair = pair(&site.root);
        let h = connect(&mut pair);
        let (text, closed) = exchange(&mut pair, h, request.as_bytes());
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{request:?}: {text}");
        assert!(text.contains("Connection: close"), "{request:?}: {text}");
        assert!(closed, "{request:?}: the connection stayed open");
    }
}

#[test]
fn other_methods_are_refused_with_allow() {
    let site = site("method");
    let mut pair = pair(&site.root);
    let h = connect(&mut pair);
    let (text, closed) = exchange(&mut pair, h, b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{text}");
    assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
    assert!(!closed);
}
