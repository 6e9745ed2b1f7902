//! One TCP stream's throughput, on tokio: the sender writes 128 KiB at a
//! time for some seconds, then shuts down; the receiver (always tokio on
//! the kernel's sockets) reads to the end and prints the Gbit/s from its
//! first byte to its last. The sender runs on nagare-tokio through netd
//! (`--via SOCKET`) or on tokio's own kernel sockets, so that
//! `scripts/bench/tokio.sh` measures both in one run.
//!
//! ```text
//! stream_bench sink ADDR                 # the kernel's receiver; prints "gbit_per_s BYTES SECONDS GBIT"
//! stream_bench send ADDR SECONDS [--via SOCKET]
//! ```

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes per write.
const CHUNK: usize = 128 << 10;

fn usage() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "usage: stream_bench sink ADDR | stream_bench send ADDR SECONDS [--via SOCKET]",
    )
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr: SocketAddr = args.get(1).and_then(|a| a.parse().ok()).ok_or_else(usage)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match args.first().map(String::as_str) {
        Some("sink") => runtime.block_on(sink(addr)),
        Some("send") => {
            let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).ok_or_else(usage)?;
            let via = match args.get(3).map(String::as_str) {
                Some("--via") => Some(args.get(4).ok_or_else(usage)?.clone()),
                None => None,
                Some(_) => return Err(usage()),
            };
            runtime.block_on(send(addr, Duration::from_secs(secs), via))
        }
        _ => Err(usage()),
    }
}

/// Accepts one connection, reads it to the end, prints the figure.
async fn sink(addr: SocketAddr) -> io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening");
    let (mut s, _) = listener.accept().await?;
    let mut buf = vec![0u8; CHUNK];
    let mut bytes = 0u64;
    let mut first = None;
    let mut last = Instant::now();
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        bytes += n as u64;
    }
    let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    let gbit = if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e9 } else { 0.0 };
    println!("gbit_per_s {bytes} {secs:.3} {gbit:.3}");
    Ok(())
}

/// Writes to `addr` for `time`, through netd when `via` names its socket.
async fn send(addr: SocketAddr, time: Duration, via: Option<String>) -> io::Result<()> {
    match via {
        Some(socket) => {
            let session = nagare_tokio::Session::connect(&socket)?;
            let s = nagare_tokio::TcpStream::connect(&session, addr).await?;
            write_for(s, time).await
        }
        None => write_for(tokio::net::TcpStream::connect(addr).await?, time).await,
    }
}

async fn write_for(mut s: impl AsyncWrite + Unpin, time: Duration) -> io::Result<()> {
    let chunk = vec![0x5au8; CHUNK];
    let end = Instant::now() + time;
    while Instant::now() < end {
        s.write_all(&chunk).await?;
    }
    s.shutdown().await
}
