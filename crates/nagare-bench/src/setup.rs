//! Connection set-up and tear-down, one connection at a time: connect,
//! accept, one byte each way, the client closes, the server reads the end
//! of stream and closes. nagare between two instances in memory, and the
//! Linux kernel on 127.0.0.1 through `std::net`, the same steps.
//!
//! nagare's client keeps each connection in TIME-WAIT for
//! [`NAGARE_TIME_WAIT`] of virtual time while the clock moves
//! [`NAGARE_TICK`] per connection, so a few thousand connections sit in
//! TIME-WAIT at any moment and are reaped by the timer heap as the run
//! goes (on Linux, `net.ipv4.tcp_tw_reuse = 2` lets loopback connections
//! reuse ports held in TIME-WAIT).

use crate::net::{err, pair, LinkKind, Pair, PairConfig, B_IP};
use nagare_core::iface::Error;
use nagare_core::tcp::config::TcpConfig;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const PORT: u16 = 5001;
/// TIME-WAIT of nagare's sockets in this benchmark (virtual time).
pub const NAGARE_TIME_WAIT: Duration = Duration::from_millis(50);
/// Virtual time that passes per connection.
pub const NAGARE_TICK: Duration = Duration::from_micros(10);

/// What a run of set-ups did.
#[derive(Debug, Clone, Copy)]
pub struct SetupResult {
    pub connections: u64,
    pub elapsed: Duration,
    /// Most connections held at once by the client (TIME-WAIT included).
    pub peak_held: usize,
    /// Virtual-time jumps to a timer (nagare only).
    pub idle_jumps: u64,
}

impl SetupResult {
    pub fn per_second(&self) -> f64 {
        self.connections as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn us_per_connection(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / self.connections.max(1) as f64
    }
}

/// Socket settings: defaults with a short TIME-WAIT.
pub fn setup_tcp_config() -> TcpConfig {
    TcpConfig { time_wait: NAGARE_TIME_WAIT, ..TcpConfig::default() }
}

/// Steps the pair at this instant until `done` holds, jumping to timers
/// when both sides are idle (each jump counted); bounded.
fn until(pair: &mut Pair, what: &str, mut done: impl FnMut(&mut Pair) -> Result<bool, String>) -> Result<(), String> {
    for _ in 0..10_000 {
        pair.settle().map_err(err)?;
        if done(pair)? {
            return Ok(());
        }
        if !pair.idle_jump(Duration::from_secs(5)) {
            break;
        }
    }
    Err(format!("{what}: did not happen at {:?}", pair.now))
}

/// `count` connections, one after the other, between two nagare instances.
pub fn nagare_setup(count: u64, time_limit: Duration) -> Result<SetupResult, String> {
    let config =
        PairConfig { pool_buffers: 16384, prewarm_buffers: 1024, tcp: setup_tcp_config(), link: LinkKind::Sim };
    let mut pair = pair(&config);
    let listener = pair.b.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), 64).map_err(err)?;
    let remote = SocketAddrV4::new(B_IP, PORT);
    let mut buf = [0u8; 16];
    let mut peak_held = 0;
    let mut run = |pair: &mut Pair| -> Result<(), String> {
        let ha = pair.a.iface.tcp().connect(remote, 0, pair.now).map_err(err)?;
        let mut hb = None;
        until(pair, "accept", |p| {
            hb = p.b.iface.tcp().accept(listener).map_err(err)?;
            Ok(hb.is_some())
        })?;
        let hb = hb.expect("accepted");
        let now = pair.now;
        if pair.a.iface.tcp().send(ha, &[1], now).map_err(err)? != 1 {
            return Err("client send".into());
        }
        until(pair, "server read", |p| match p.b.iface.tcp().recv(hb, &mut buf, p.now) {
            Ok(1) => Ok(true),
            Err(Error::WouldBlock) => Ok(false),
            other => Err(format!("server read: {other:?}")),
        })?;
        let now = pair.now;
        if pair.b.iface.tcp().send(hb, &[2], now).map_err(err)? != 1 {
            return Err("server send".into());
        }
        until(pair, "client read", |p| match p.a.iface.tcp().recv(ha, &mut buf, p.now) {
            Ok(1) => Ok(true),
            Err(Error::WouldBlock) => Ok(false),
            other => Err(format!("client read: {other:?}")),
        })?;
        let now = pair.now;
        pair.a.iface.tcp().close(ha, now).map_err(err)?;
        until(pair, "server end of stream", |p| match p.b.iface.tcp().recv(hb, &mut buf, p.now) {
            Ok(0) => Ok(true),
            Err(Error::WouldBlock) => Ok(false),
            other => Err(format!("server end of stream: {other:?}")),
        })?;
        let now = pair.now;
        pair.b.iface.tcp().close(hb, now).map_err(err)?;
        pair.settle().map_err(err)?;
        pair.now += NAGARE_TICK;
        Ok(())
    };
    // Warm-up, untimed: ARP and the tables' first allocations.
    run(&mut pair)?;
    let jumps0 = pair.idle_jumps;
    let started = Instant::now();
    for i in 0..count {
        if i % 256 == 255 && started.elapsed() > time_limit {
            return Err(format!("{i} of {count} connections after {time_limit:?}"));
        }
        run(&mut pair)?;
        peak_held = peak_held.max(pair.a.iface.tcp_ref().connection_count());
    }
    let elapsed = started.elapsed();
    let idle_jumps = pair.idle_jumps - jumps0;
    // Every TIME-WAIT ends and the server holds nothing.
    if pair.b.iface.tcp_ref().connection_count() != 0 {
        return Err(format!("server still holds {} connections", pair.b.iface.tcp_ref().connection_count()));
    }
    pair.advance(NAGARE_TIME_WAIT * 2).map_err(err)?;
    if pair.a.iface.tcp_ref().connection_count() != 0 {
        return Err(format!(
            "client still holds {} connections after TIME-WAIT",
            pair.a.iface.tcp_ref().connection_count()
        ));
    }
    Ok(SetupResult { connections: count, elapsed, peak_held, idle_jumps })
}

/// The same steps on the kernel's loopback, in one thread.
pub fn linux_setup(count: u64, time_limit: Duration) -> Result<SetupResult, String> {
    let e = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    let listener = TcpListener::bind("127.0.0.1:0").map_err(e("bind"))?;
    let addr = listener.local_addr().map_err(e("local_addr"))?;
    let mut buf = [0u8; 16];
    let run = |buf: &mut [u8; 16]| -> Result<(), String> {
        let mut c = TcpStream::connect(addr).map_err(e("connect"))?;
        let (mut s, _) = listener.accept().map_err(e("accept"))?;
        c.write_all(&[1]).map_err(e("client write"))?;
        s.read_exact(&mut buf[..1]).map_err(e("server read"))?;
        s.write_all(&[2]).map_err(e("server write"))?;
        c.read_exact(&mut buf[..1]).map_err(e("client read"))?;
        drop(c);
        if s.read(buf).map_err(e("server end of stream"))? != 0 {
            return Err("server: data after the byte".into());
        }
        drop(s);
        Ok(())
    };
    run(&mut buf)?;
    let started = Instant::now();
    for i in 0..count {
        if i % 256 == 255 && started.elapsed() > time_limit {
            return Err(format!("{i} of {count} connections after {time_limit:?}"));
        }
        run(&mut buf)?;
    }
    Ok(SetupResult { connections: count, elapsed: started.elapsed(), peak_held: 0, idle_jumps: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_nagare_connections_open_and_close() {
        let r = nagare_setup(10, Duration::from_secs(30)).unwrap();
        assert_eq!(r.connections, 10);
        assert!(r.peak_held >= 1);
    }

    #[test]
    fn ten_linux_connections_open_and_close() {
        let r = linux_setup(10, Duration::from_secs(30)).unwrap();
        assert_eq!(r.connections, 10);
    }
}
