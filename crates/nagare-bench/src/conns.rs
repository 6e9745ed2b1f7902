//! Many established connections in one instance: heap bytes per idle
//! connection, and the cost of a small write on a random connection.
//!
//! A connects `n` times to one listener on B (ephemeral ports), so each
//! instance holds `n` established connections. Every socket has
//! `TCP_NODELAY` and no delayed ACK, so a round is exactly: A sends one
//! small segment on a connection picked at random, B receives it and
//! acknowledges it at once, A takes the ACK, B's application reads the
//! bytes. Virtual time moves 10 µs per round, so retransmission timers
//! are armed, cancelled and popped as on a live host.

use crate::alloc_count;
use crate::net::{err, pair, LinkKind, Pair, PairConfig, B_IP};
use nagare_core::tcp::config::TcpConfig;
use nagare_core::tcp::connection::State;
use nagare_core::tcp::TcpHandle;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const PORT: u16 = 5001;
/// Connections opened between two settles.
const CONNECT_BATCH: usize = 128;
/// Virtual time per round.
const ROUND_TICK: Duration = Duration::from_micros(10);

/// Socket settings: defaults (256 KiB buffer limits, which an idle
/// connection does not fill), with Nagle and delayed ACK off.
pub fn conns_tcp_config() -> TcpConfig {
    TcpConfig { nagle: false, delayed_ack: None, ..TcpConfig::default() }
}

/// `n` established connections and what they cost.
pub struct Established {
    pub pair: Pair,
    pub a: Vec<TcpHandle>,
    pub b: Vec<TcpHandle>,
    /// Heap bytes the two instances gained while the connections were
    /// opened and settled (both sides together).
    pub heap_bytes: usize,
    /// Pool buffers still held once idle (A, B): what idle connections
    /// keep in their send and receive queues.
    pub buffers_in_use: (usize, usize),
}

impl Established {
    /// Heap bytes per connection per instance.
    pub fn bytes_per_connection(&self) -> f64 {
        self.heap_bytes as f64 / (2 * self.a.len()) as f64
    }
}

/// Opens `n` connections from A to B and lets them go idle.
pub fn establish(n: usize) -> Result<Established, String> {
    if n == 0 || n > 16000 {
        return Err(format!("{n} connections: 1..=16000 (ephemeral ports)"));
    }
    let config =
        PairConfig { pool_buffers: 16384, prewarm_buffers: 2048, tcp: conns_tcp_config(), link: LinkKind::Sim };
    let mut pair = pair(&config);
    let listener = pair.b.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), n + 1).map_err(err)?;
    // One connection first, not counted: ARP, the listener's queue, the
    // tables' first allocations.
    let warm = pair.a.iface.tcp().connect(SocketAddrV4::new(B_IP, PORT), 0, pair.now).map_err(err)?;
    pair.advance(Duration::from_millis(10)).map_err(err)?;
    let warm_b = pair.b.iface.tcp().accept(listener).map_err(err)?.ok_or("warm-up connection not accepted")?;
    let mut a = Vec::with_capacity(n);
    let mut b = Vec::with_capacity(n);
    let baseline = alloc_count::live_bytes();
    let remote = SocketAddrV4::new(B_IP, PORT);
    while a.len() < n {
        for _ in 0..CONNECT_BATCH.min(n - a.len()) {
            a.push(pair.a.iface.tcp().connect(remote, 0, pair.now).map_err(err)?);
        }
        pair.settle().map_err(err)?;
        while let Some(h) = pair.b.iface.tcp().accept(listener).map_err(err)? {
            b.push(h);
        }
        pair.now += Duration::from_micros(100);
    }
    // Past every handshake timer, so only what idle connections keep is
    // left (stale timer entries popped).
    pair.advance(Duration::from_secs(5)).map_err(err)?;
    while let Some(h) = pair.b.iface.tcp().accept(listener).map_err(err)? {
        b.push(h);
    }
    let heap_bytes = alloc_count::live_bytes().saturating_sub(baseline);
    if b.len() != n {
        return Err(format!("{} of {n} connections accepted", b.len()));
    }
    for (&ha, &hb) in a.iter().zip(&b) {
        let (sa, sb) = (pair.a.iface.tcp_ref().state(ha).map_err(err)?, pair.b.iface.tcp_ref().state(hb).map_err(err)?);
        if sa != State::Established || sb != State::Established {
            return Err(format!("not established: {sa:?} / {sb:?}"));
        }
    }
    // The warm-up connection stays open (it is in both baselines).
    let _ = (warm, warm_b);
    let buffers_in_use = (pair.a.iface.pool().in_use(), pair.b.iface.pool().in_use());
    Ok(Established { pair, a, b, heap_bytes, buffers_in_use })
}

/// What the rounds cost.
#[derive(Debug, Clone, Copy)]
pub struct RoundsResult {
    pub rounds: u64,
    /// TCP segments received by either side during the rounds (each one
    /// was sent by the other side).
    pub segments: u64,
    pub elapsed: Duration,
}

impl RoundsResult {
    pub fn ns_per_round(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.rounds as f64
    }
    pub fn ns_per_segment(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.segments.max(1) as f64
    }
}

/// `rounds` small writes of `payload` bytes, each on a connection picked
/// at random, each carried across and acknowledged.
pub fn rounds(
    est: &mut Established,
    rounds: u64,
    payload: usize,
    seed: u64,
    time_limit: Duration,
) -> Result<RoundsResult, String> {
    let data = vec![0x42u8; payload];
    let mut buf = vec![0u8; payload.max(1) * 4];
    let mut rng = seed | 1;
    let n = est.a.len() as u64;
    let pair = &mut est.pair;
    let segments = |p: &Pair| p.a.iface.counters().tcp_segments_received + p.b.iface.counters().tcp_segments_received;
    let seg0 = segments(pair);
    let started = Instant::now();
    for r in 0..rounds {
        if r % 1024 == 1023 && started.elapsed() > time_limit {
            return Err(format!("{r} of {rounds} rounds after {time_limit:?}"));
        }
        // xorshift64
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = (rng % n) as usize;
        pair.now += ROUND_TICK;
        let sent = pair.a.iface.tcp().send(est.a[i], &data, pair.now).map_err(err)?;
        if sent != payload {
            return Err(format!("round {r}: sent {sent} of {payload}"));
        }
        pair.settle().map_err(err)?;
        let got = pair.b.iface.tcp().recv(est.b[i], &mut buf, pair.now).map_err(err)?;
        if got != payload {
            return Err(format!("round {r}: received {got} of {payload}"));
        }
    }
    let elapsed = started.elapsed();
    Ok(RoundsResult { rounds, segments: segments(pair) - seg0, elapsed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_connections_take_rounds_and_hold_no_buffers() {
        let mut est = establish(10).unwrap();
        assert_eq!(est.a.len(), 10);
        assert_eq!(est.buffers_in_use, (0, 0), "idle connections hold no buffers");
        let r = rounds(&mut est, 1000, 64, 7, Duration::from_secs(60)).unwrap();
        // Data one way, an ACK the other: two segments a round.
        assert_eq!(r.segments, 2000, "{r:?}");
    }
}
