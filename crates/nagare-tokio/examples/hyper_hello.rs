//! hyper's HTTP/1.1 server and client over nagare-tokio's streams: the
//! server answers every request with "hello from hyper over nagare", the
//! client fetches it once and prints it. hyper-util's `TokioIo` adapts the
//! crate's `TcpStream` (tokio's `AsyncRead`/`AsyncWrite`) to hyper's I/O
//! traits, as it adapts tokio's own.
//!
//! ```text
//! NAGARE_NETD=/tmp/nagare-netd.sock cargo run -p nagare-tokio --example hyper_hello -- 10.0.0.1:8081
//! ```
//!
//! The address (default 10.0.0.1:8081) is netd's own, where the server
//! listens and the client connects. The tests run [`run`] against a netd
//! of their own.

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use nagare_tokio::{Session, TcpListener, TcpStream};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;

/// What the server answers.
pub const BODY: &str = "hello from hyper over nagare";

/// Serves `BODY` on `addr` through `session` with hyper, fetches it once
/// with hyper's client, and returns the body the client got.
pub async fn run(session: &Session, addr: SocketAddr) -> io::Result<String> {
    let listener = TcpListener::bind(session, addr).await?;
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await?;
        let service = hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(BODY.as_bytes()))))
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await
            .map_err(io::Error::other)
    });
    let stream = TcpStream::connect(session, addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(io::Error::other)?;
    let driver = tokio::spawn(conn);
    let req = Request::get(format!("http://{addr}/")).body(Empty::<Bytes>::new()).map_err(io::Error::other)?;
    let res = sender.send_request(req).await.map_err(io::Error::other)?;
    if !res.status().is_success() {
        return Err(io::Error::other(format!("status {}", res.status())));
    }
    let body = res.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
    // The client's end closes the connection, and the server's ends.
    drop(sender);
    let _ = driver.await;
    server.await.map_err(io::Error::other)??;
    String::from_utf8(body.to_vec()).map_err(io::Error::other)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> io::Result<()> {
    let addr: SocketAddr =
        std::env::args().nth(1).as_deref().unwrap_or("10.0.0.1:8081").parse().map_err(io::Error::other)?;
    let session = Session::connect_default()?;
    println!("{}", run(&session, addr).await?);
    Ok(())
}
