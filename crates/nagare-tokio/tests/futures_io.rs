//! `TcpStream` through `futures_io`'s traits (the `futures-io` feature),
//! against a netd running in a thread of the test: a client writes 256 KiB
//! with `AsyncWrite::poll_write`, closes with `poll_close`, and reads the
//! echo back with `AsyncRead::poll_read`, byte for byte, to the end.

#[path = "../../nagare-netd/tests/support/mod.rs"]
mod support;

use futures_io::{AsyncRead, AsyncWrite};
use nagare_netd::Placement;
use nagare_tokio::{Session, TcpListener, TcpStream};
use std::future::poll_fn;
use std::net::{SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::time::Duration;
use support::{NetdThread, Wire, NETD_ADDR};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

const BYTES: usize = 256 << 10;

#[test]
fn a_stream_echoes_through_futures_io_traits() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        timeout(Duration::from_secs(60), echo(&netd)).await.expect("the test's time limit");
    });
}

async fn echo(netd: &NetdThread) {
    let at = SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, 7400));
    let (server, client) = (Session::new(netd.connect()), Session::new(netd.connect()));
    let listener = TcpListener::bind(&server, at).await.expect("listen");
    let echo = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut all = Vec::new();
        stream.read_to_end(&mut all).await.expect("read the client's bytes");
        stream.write_all(&all).await.expect("echo them");
        stream.shutdown().await.expect("the echo's FIN");
    });
    let mut stream = TcpStream::connect(&client, at).await.expect("connect");
    let data: Vec<u8> = (0..BYTES).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut sent = 0;
    while sent < BYTES {
        let end = (sent + 10_000).min(BYTES);
        let n = poll_fn(|cx| AsyncWrite::poll_write(Pin::new(&mut stream), cx, &data[sent..end]))
            .await
            .expect("poll_write");
        assert!(n > 0, "a write took nothing");
        sent += n;
    }
    poll_fn(|cx| AsyncWrite::poll_close(Pin::new(&mut stream), cx)).await.expect("poll_close");
    let mut back = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        let n = poll_fn(|cx| AsyncRead::poll_read(Pin::new(&mut stream), cx, &mut buf)).await.expect("poll_read");
        if n == 0 {
            break;
        }
        back.extend_from_slice(&buf[..n]);
    }
    assert_eq!(back.len(), BYTES);
    assert!(back == data, "the echo differs");
    echo.await.expect("the echo task");
}
