//! One TCP stream from A to B over the in-memory link: bulk throughput of
//! two nagare engines in one thread.

use crate::net::{err, pair, LinkKind, Pair, PairConfig, B_IP};
use nagare_core::buf::PacketBuf;
use nagare_core::iface::Error;
use nagare_core::tcp::config::TcpConfig;
use nagare_core::tcp::TcpHandle;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const PORT: u16 = 5001;
/// Bytes handed to one send call.
pub const WRITE_SIZE: usize = 64 * 1024;

/// How the sender hands bytes to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// `tcp_send(&[u8])`: one copy into pool buffers.
    Copy,
    /// `tcp_send_buf(PacketBuf)`: a 64 KiB chain built once and handed
    /// over again and again (its buffers are shared, never copied).
    ZeroCopy,
}

/// What one stream did.
#[derive(Debug, Clone, Copy)]
pub struct BulkResult {
    /// Payload bytes the receiver took out of its socket.
    pub bytes: u64,
    pub elapsed: Duration,
    /// TCP segments each side received (data at B, ACKs at A).
    pub segments_b: u64,
    pub segments_a: u64,
    /// Times virtual time had to jump to a timer because nothing moved.
    pub idle_jumps: u64,
    /// Virtual time the transfer took.
    pub virtual_time: Duration,
}

impl BulkResult {
    pub fn gbps(&self) -> f64 {
        crate::report::gbps(self.bytes, self.elapsed)
    }
}

/// Socket settings of the bulk stream: `buffer` bytes of send and receive
/// buffer, both fixed (as after SO_SNDBUF and SO_RCVBUF, so that the peers
/// measured beside it get the same), everything else as a Linux user gets
/// it.
pub fn bulk_tcp_config(buffer: usize) -> TcpConfig {
    let mut config = TcpConfig::default();
    config.set_send_buffer(buffer);
    config.set_recv_buffer(buffer);
    config
}

/// An established connection A -> B on a fresh pair (ARP resolved, not
/// timed).
fn connected(buffer: usize, link: LinkKind) -> Result<(Pair, TcpHandle, TcpHandle), String> {
    // Enough buffers for a full window in each direction plus headers.
    let segments = buffer / 1000 + 1024;
    let config = PairConfig { pool_buffers: 4 * segments, prewarm_buffers: 0, tcp: bulk_tcp_config(buffer), link };
    let mut pair = pair(&config);
    let listener = pair.b.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), 8).map_err(err)?;
    let ha = pair.a.iface.tcp().connect(SocketAddrV4::new(B_IP, PORT), 0, pair.now).map_err(err)?;
    let mut hb = None;
    for _ in 0..100 {
        pair.settle().map_err(err)?;
        hb = pair.b.iface.tcp().accept(listener).map_err(err)?;
        if hb.is_some() {
            break;
        }
        pair.advance(Duration::from_millis(100)).map_err(err)?;
    }
    let hb = hb.ok_or("no connection accepted")?;
    pair.b.iface.tcp().listener_close(listener, pair.now).map_err(err)?;
    Ok((pair, ha, hb))
}

/// Moves `bytes` from A to B with `buffer`-byte socket buffers over
/// `link`, giving up after `time_limit` of wall-clock time.
pub fn nagare_bulk(
    bytes: u64,
    mode: SendMode,
    buffer: usize,
    link: LinkKind,
    time_limit: Duration,
) -> Result<BulkResult, String> {
    let (mut pair, ha, hb) = connected(buffer, link)?;
    let chunk = vec![0x5au8; WRITE_SIZE];
    // Full pool buffers, no headroom: TCP puts headers in buffers of their
    // own in front of payload it shares.
    let chain = PacketBuf::from_slice(pair.a.iface.pool(), 0, &chunk).map_err(|_| "pool exhausted")?;
    let seg_a0 = pair.a.iface.counters().tcp_segments_received;
    let seg_b0 = pair.b.iface.counters().tcp_segments_received;
    let virtual_start = pair.now;
    let (mut sent, mut received) = (0u64, 0u64);
    let mut pending = PacketBuf::new();
    let started = Instant::now();
    let mut rounds: u64 = 0;
    while received < bytes {
        rounds += 1;
        if rounds.is_multiple_of(256) && started.elapsed() > time_limit {
            return Err(format!("bulk stream: {received} of {bytes} bytes after {time_limit:?}"));
        }
        // The sender writes while the stack takes bytes.
        while sent < bytes {
            let want = (bytes - sent).min(WRITE_SIZE as u64) as usize;
            let now = pair.now;
            match mode {
                SendMode::Copy => match pair.a.iface.tcp().send(ha, &chunk[..want], now) {
                    Ok(0) | Err(Error::WouldBlock) => break,
                    Ok(n) => sent += n as u64,
                    Err(e) => return Err(format!("tcp_send: {e}")),
                },
                SendMode::ZeroCopy => {
                    if pending.is_empty() {
                        pending =
                            if want == WRITE_SIZE { chain.clone() } else { chain.slice(0, want).ok_or("slice")? };
                    }
                    let before = pending.len();
                    pending =
                        pair.a.iface.tcp().send_buf(ha, pending, now).map_err(|e| format!("tcp_send_buf: {e}"))?;
                    sent += (before - pending.len()) as u64;
                    if !pending.is_empty() {
                        break;
                    }
                }
            }
        }
        let moved = pair.step().map_err(err)?;
        // The receiver takes what arrived, without copying.
        let mut took = false;
        loop {
            match pair.b.iface.tcp().recv_buf(hb, usize::MAX, pair.now) {
                Ok(Some(data)) => {
                    received += data.len() as u64;
                    took = true;
                }
                Ok(None) => return Err("unexpected end of stream".into()),
                Err(Error::WouldBlock) => break,
                Err(e) => return Err(format!("tcp_recv_buf: {e}")),
            }
        }
        if !moved && !took && received < bytes && !pair.idle_jump(Duration::from_secs(10)) {
            return Err(format!("bulk stream stalled at {received} of {bytes} bytes"));
        }
    }
    let elapsed = started.elapsed();
    Ok(BulkResult {
        bytes: received,
        elapsed,
        segments_b: pair.b.iface.counters().tcp_segments_received - seg_b0,
        segments_a: pair.a.iface.counters().tcp_segments_received - seg_a0,
        idle_jumps: pair.idle_jumps,
        virtual_time: pair.now - virtual_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_send_modes_move_every_byte() {
        for (mode, link) in
            [(SendMode::Copy, LinkKind::Sim), (SendMode::ZeroCopy, LinkKind::Sim), (SendMode::ZeroCopy, LinkKind::Fifo)]
        {
            let r = nagare_bulk(3 << 20, mode, 1 << 20, link, Duration::from_secs(60)).unwrap();
            assert_eq!(r.bytes, 3 << 20, "{mode:?}");
            assert!(r.segments_b >= (3 << 20) / 1460, "{mode:?}: {r:?}");
        }
    }
}
