//! A minimal HTTP/1.1 server and client on nagare-tokio's `TcpListener`
//! and `TcpStream` with `tokio::io`: the server answers every request
//! with "hello from nagare", and the client fetches it once and prints
//! it. Written directly on the sockets, without hyper or axum: those would
//! add minutes to every build of the workspace's tests.
//!
//! ```text
//! NAGARE_NETD=/tmp/nagare-netd.sock cargo run -p nagare-tokio --example hello_http -- 10.0.0.1:8080
//! ```
//!
//! The address (default 10.0.0.1:8080) is netd's own, where the server
//! listens and the client connects. The tests run [`run`] against a netd
//! of their own.

use nagare_tokio::{Session, TcpListener, TcpStream};
use std::io;
use std::net::SocketAddr;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// What the server answers.
pub const BODY: &str = "hello from nagare";

/// The longest request head the server reads.
const MAX_HEAD: usize = 8 << 10;

/// Serves `BODY` on `addr` through `session`, fetches it once, and
/// returns the body the client got.
pub async fn run(session: &Session, addr: SocketAddr) -> io::Result<String> {
    let listener = TcpListener::bind(session, addr).await?;
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await?;
        serve(stream).await
    });
    let body = fetch(session, addr).await?;
    server.await.map_err(io::Error::other)??;
    Ok(body)
}

/// Answers one request on `stream` (the head up to its empty line) with
/// `BODY`, and closes.
async fn serve(stream: TcpStream) -> io::Result<()> {
    let mut stream = BufReader::new(stream);
    let mut head = 0;
    loop {
        let mut line = String::new();
        let n = stream.read_line(&mut line).await?;
        head += n;
        if n == 0 || line == "\r\n" || line == "\n" || head > MAX_HEAD {
            break;
        }
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let stream = stream.get_mut();
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// GETs `/` from `addr` and returns the body of a 200 answer.
async fn fetch(session: &Session, addr: SocketAddr) -> io::Result<String> {
    let mut stream = TcpStream::connect(session, addr).await?;
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| io::Error::other("no end of the head"))?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(io::Error::other(format!("not a 200: {head}")));
    }
    Ok(body.to_owned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> io::Result<()> {
    let addr = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{a}: {e}")))?,
        None => SocketAddr::from(([10, 0, 0, 1], 8080)),
    };
    let session = Session::connect_default()?;
    let body = run(&session, addr).await?;
    println!("{body}");
    Ok(())
}
