//! `nagare bench sim-tcp`: what the tail loss probe and receive-buffer
//! autotuning change, shown on the simulated link in virtual time (so every
//! figure is exact and the same on every machine and every run).
//!
//! - Tail loss: a connection over a 20 ms round trip, after one small
//!   request, writes ten full segments at once and the first transmissions
//!   of the last one, two or three are dropped; the figure is the virtual
//!   time from the write until the receiver has read the last byte, with
//!   tail loss probes and with the retransmission timeout alone.
//! - Large windows: a bulk transfer over 10 Gbit/s and a 20 ms round trip,
//!   with the receive buffer autotuned (window scale for 6 MiB) and fixed at
//!   256 KiB (`set_recv_buffer`, window scale 3): the goodput in virtual
//!   time and the largest window the receiver advertised. Both senders get
//!   a send buffer of 8 MiB, so only the receive side differs.

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::tcp::connection::ConnectionStats;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_dev::{Device, DeviceStats, LinkConfig, SimLink, SimPort};
use nagare_host::{Host, SimPair};
use nagare_wire::{EtherType, EthernetAddress, EthernetFrame, IpProtocol, Ipv4Cidr, Ipv4Packet, TcpFlags, TcpPacket};
use std::collections::{HashSet, VecDeque};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

/// The sender's address (it connects).
const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The receiver's address (it listens).
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5001;
/// Pool buffers per host: a 6 MiB window in flight in 1448-byte segments,
/// each with a header buffer, and an 8 MiB send queue fit.
const POOL_BUFFERS: usize = 1 << 15;
const BUFFER_SIZE: usize = 2048;
/// The send buffer of the large-window transfer.
const SEND_BUFFER: usize = 8 << 20;
/// The fixed receive buffer the autotuned one is compared with.
pub const FIXED_RECV_BUFFER: usize = 256 << 10;
/// Bound on virtual time of any one run.
const TIME_LIMIT: Duration = Duration::from_secs(600);

/// One tail-loss run.
#[derive(Debug, Clone, Copy)]
pub struct TailLoss {
    /// Virtual time from the write until the last byte was read.
    pub completion: Duration,
    /// Virtual time from the first retransmission (the probe, or what the
    /// RTO sent) until the last byte was read.
    pub repair: Duration,
    /// The sender's counters.
    pub stats: ConnectionStats,
}

/// One large-window run.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Bytes moved.
    pub bytes: usize,
    /// Virtual time from the first write until the last byte was read.
    pub elapsed: Duration,
    /// The largest window the receiver advertised, in bytes.
    pub max_window: usize,
    /// The receiver's window scale.
    pub shift: u8,
}

impl Window {
    /// Goodput in Gbit/s of virtual time.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e9
    }
}

/// The sender's port of the link, dropping the first transmission of every
/// data segment that starts in `from..to` (bytes into the stream).
struct TailDrop {
    inner: SimPort,
    from: u32,
    to: u32,
    isn: Option<u32>,
    seen: HashSet<u32>,
    dropped: u64,
    /// When a dropped segment was first sent again.
    resent_at: Option<Instant>,
}

/// The sequence number, flags and payload length of a TCP segment in an
/// Ethernet frame of IPv4 (the frames of a short transfer: copied whole).
fn tcp_fields(frame: &PacketBuf) -> Option<(u32, TcpFlags, usize)> {
    let bytes = frame.to_vec();
    let eth = EthernetFrame::new_checked(&bytes[..]).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != IpProtocol::Tcp {
        return None;
    }
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    Some((tcp.seq_number().0, tcp.flags(), tcp.payload().len()))
}

impl TailDrop {
    fn drops(&mut self, frame: &PacketBuf, now: Instant) -> bool {
        let Some((seq, flags, len)) = tcp_fields(frame) else {
            return false;
        };
        if flags.contains(TcpFlags::SYN) {
            self.isn = Some(seq);
            return false;
        }
        let Some(isn) = self.isn else {
            return false;
        };
        let offset = seq.wrapping_sub(isn).wrapping_sub(1);
        if len == 0 || offset < self.from || offset >= self.to {
            return false;
        }
        if self.seen.insert(seq) {
            return true;
        }
        self.resent_at.get_or_insert(now);
        false
    }
}

impl Device for TailDrop {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        self.inner.receive_batch(pool, out, max, now)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        let before = frames.len();
        let mut kept = VecDeque::with_capacity(before);
        for frame in frames.drain(..) {
            if !self.drops(&frame, now) {
                kept.push_back(frame);
            }
        }
        let dropped = before - kept.len();
        self.dropped += dropped as u64;
        *frames = kept;
        Ok(self.inner.transmit_batch(frames, now)? + dropped)
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

fn host<D: Device>(mac: u8, ip: Ipv4Addr, device: D) -> Host<D> {
    let mut config =
        InterfaceConfig::new(EthernetAddress([0x02, 0x6e, 0x67, 0, 0, mac]), Ipv4Cidr::new(ip, 24).expect("a /24"));
    config.seed = u64::from(mac);
    Host::new(Interface::new(config, device.capabilities(), BufferPool::new(BUFFER_SIZE, POOL_BUFFERS)), device)
}

fn engine(e: nagare_core::iface::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// A connected pair: A's connection to B and B's accepted one.
fn connect<A: Device, B: Device>(pair: &mut SimPair<A, B>) -> io::Result<(TcpHandle, TcpHandle)> {
    let listener = pair.b.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), 1).map_err(engine)?;
    let ha = pair.a.iface.tcp().connect(SocketAddrV4::new(B_IP, PORT), 0, pair.now).map_err(engine)?;
    let mut hb = None;
    pair.run_until(Duration::from_secs(5), |p| {
        hb = p.b.iface.tcp().accept(listener).ok().flatten();
        hb.is_some()
    })?;
    let hb = hb.ok_or_else(|| io::Error::other("no connection within 5 s"))?;
    Ok((ha, hb))
}

/// Reads everything readable on B's `h`; the bytes read.
fn drain(iface: &mut Interface, h: TcpHandle, now: Instant) -> usize {
    let mut n = 0;
    while let Ok(Some(data)) = iface.tcp().recv_buf(h, usize::MAX, now) {
        n += data.len();
    }
    n
}

/// The link of both scenarios: 10 ms each way, room for a 6 MiB window of
/// frames in flight.
fn link(bandwidth_bps: u64) -> LinkConfig {
    LinkConfig {
        latency: Duration::from_millis(10),
        bandwidth_bps: Some(bandwidth_bps),
        queue_limit: 1 << 15,
        ..LinkConfig::default()
    }
}

/// Segments written at once in [`flight_loss`].
pub const SEGMENTS: usize = 10;

/// [`flight_loss`] of the last `lost` segments.
pub fn tail_loss(rack_tlp: bool, lost: usize) -> io::Result<TailLoss> {
    flight_loss(rack_tlp, SEGMENTS - lost.min(SEGMENTS)..SEGMENTS)
}

/// Ten full segments written at once, after one small request, on a
/// connection over a 1 Gbit/s link with a 20 ms round trip, the first
/// transmission of the segments `lost` (0-based) dropped; with RACK-TLP or
/// without.
pub fn flight_loss(rack_tlp: bool, lost: std::ops::Range<usize>) -> io::Result<TailLoss> {
    let (pa, pb) = SimLink::new(link(1_000_000_000), 1);
    let mut a = host(
        1,
        A_IP,
        TailDrop {
            inner: pa,
            from: u32::MAX,
            to: u32::MAX,
            isn: None,
            seen: HashSet::new(),
            dropped: 0,
            resent_at: None,
        },
    );
    let mut b = host(2, B_IP, pb);
    for h in [&mut a.iface, &mut b.iface] {
        h.tcp().defaults_mut().rack_tlp = rack_tlp;
    }
    let mut pair = SimPair::new(a, b);
    let (ha, hb) = connect(&mut pair)?;
    // A request and its answer first, as on a connection that serves
    // requests, so that the SRTT is the path's (the handshake's sample
    // also counts the address resolution before the SYN).
    let mut read = 0;
    pair.a.iface.tcp().send(ha, &[1; 100], pair.now).map_err(engine)?;
    pair.run_until(Duration::from_secs(1), |p| {
        read += drain(&mut p.b.iface, hb, p.now);
        read >= 100
    })?;
    pair.advance(Duration::from_millis(100))?;
    let mss = pair.a.iface.tcp_ref().connection(ha).map(|c| c.segment_payload_limit()).unwrap_or(0);
    let total = SEGMENTS * mss;
    let offset = |k: usize| u32::try_from(100 + k.min(SEGMENTS) * mss).unwrap_or(u32::MAX);
    (pair.a.device.from, pair.a.device.to) = (offset(lost.start), offset(lost.end));
    let lost = lost.len();
    let start = pair.now;
    let data = vec![0x5a; total];
    let written = pair.a.iface.tcp().send(ha, &data, start).map_err(engine)?;
    if written != total {
        return Err(io::Error::other(format!("the send buffer took {written} of {total} bytes")));
    }
    let mut read = 0;
    let mut done_at = None;
    pair.run_until(TIME_LIMIT, |p| {
        read += drain(&mut p.b.iface, hb, p.now);
        if read >= total && done_at.is_none() {
            done_at = Some(p.now);
        }
        done_at.is_some()
    })?;
    let done_at = done_at.ok_or_else(|| io::Error::other(format!("{read} of {total} bytes arrived")))?;
    if pair.a.device.dropped != lost as u64 {
        return Err(io::Error::other(format!("{} frames dropped, not {lost}", pair.a.device.dropped)));
    }
    let stats = pair.a.iface.tcp_ref().connection(ha).map(|c| c.stats()).unwrap_or_default();
    let resent_at = pair.a.device.resent_at.unwrap_or(done_at);
    Ok(TailLoss { completion: done_at.saturating_since(start), repair: done_at.saturating_since(resent_at), stats })
}

/// `bytes` from A to B over 10 Gbit/s with a 20 ms round trip, B's
/// receive buffer autotuned or fixed at [`FIXED_RECV_BUFFER`].
pub fn large_window(autotune: bool, bytes: usize) -> io::Result<Window> {
    let (pa, pb) = SimLink::new(link(10_000_000_000), 2);
    let mut a = host(1, A_IP, pa);
    let mut b = host(2, B_IP, pb);
    for h in [&mut a.iface, &mut b.iface] {
        let d = h.tcp().defaults_mut();
        d.send_buffer = SEND_BUFFER;
        if !autotune {
            d.set_recv_buffer(FIXED_RECV_BUFFER);
        }
    }
    let mut pair = SimPair::new(a, b);
    let (ha, hb) = connect(&mut pair)?;
    let start = pair.now;
    let chunk = vec![0xa5; 1 << 20];
    let (mut written, mut read, mut max_window) = (0, 0, 0);
    let mut done_at = None;
    pair.run_until(TIME_LIMIT, |p| {
        while written < bytes {
            let n = chunk.len().min(bytes - written);
            match p.a.iface.tcp().send(ha, &chunk[..n], p.now) {
                Ok(0) | Err(_) => break,
                Ok(k) => written += k,
            }
        }
        read += drain(&mut p.b.iface, hb, p.now);
        if let Some(c) = p.a.iface.tcp_ref().connection(ha) {
            max_window = max_window.max(c.send_window());
        }
        if read >= bytes && done_at.is_none() {
            done_at = Some(p.now);
        }
        done_at.is_some()
    })?;
    let done_at = done_at.ok_or_else(|| io::Error::other(format!("{read} of {bytes} bytes arrived")))?;
    let shift = pair.b.iface.tcp_ref().connection(hb).map_or(0, |c| c.negotiated().3);
    Ok(Window { bytes, elapsed: done_at.saturating_since(start), max_window, shift })
}

/// Options of `nagare bench sim-tcp`.
pub struct SimTcpArgs {
    /// Bytes of the large-window transfer.
    pub bytes: usize,
}

/// Prints both comparisons.
pub fn run(args: SimTcpArgs) -> anyhow::Result<()> {
    println!("nagare bench sim-tcp: simulated link, virtual time (exact, the same on every run)");
    println!();
    println!("Loss at the end of a flight: 10 full segments written at once after one small request, 1 Gbit/s,");
    println!(
        "20 ms round trip, the first transmission of some dropped; time from the write until the last byte is read,"
    );
    println!("with RACK-TLP and without (RFC 6675's count of SACKed segments, and the RTO):");
    println!();
    println!("| segments lost | RACK-TLP | without | first retransmission to the end (with / without) | probes | retransmission timeouts (with / without) |");
    println!("|---|---|---|---|---|---|");
    let cases = [("the last", 9..10), ("the last 2", 8..10), ("the last 3", 7..10), ("the 8th (2 after it)", 7..8)];
    for (name, lost) in cases {
        let with = flight_loss(true, lost.clone())?;
        let without = flight_loss(false, lost)?;
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} / {:.1} ms | {} | {} / {} |",
            with.completion.as_secs_f64() * 1e3,
            without.completion.as_secs_f64() * 1e3,
            with.repair.as_secs_f64() * 1e3,
            without.repair.as_secs_f64() * 1e3,
            with.stats.tail_loss_probes,
            with.stats.timeouts,
            without.stats.timeouts
        );
    }
    println!();
    println!("Large windows: {} MiB over 10 Gbit/s with a 20 ms round trip, send buffer 8 MiB:", args.bytes >> 20);
    println!();
    println!("| receive buffer | window scale | largest window advertised | goodput (virtual time) | time |");
    println!("|---|---|---|---|---|");
    let auto = large_window(true, args.bytes)?;
    let fixed = large_window(false, args.bytes)?;
    for (name, w) in [("autotuned, up to 6 MiB", auto), ("fixed 256 KiB", fixed)] {
        println!(
            "| {name} | {} | {} KiB | {:.2} Gbit/s | {:.3} s |",
            w.shift,
            w.max_window >> 10,
            w.gbps(),
            w.elapsed.as_secs_f64()
        );
    }
    println!();
    println!("autotuned / fixed goodput: {:.1}x", auto.gbps() / fixed.gbps());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_repairs_a_lost_tail_well_before_the_rto() {
        for lost in [2, 3] {
            let with = tail_loss(true, lost).unwrap();
            let without = tail_loss(false, lost).unwrap();
            // The probe goes 2 SRTT after the last ACK and its SACK starts
            // recovery of every hole below it; the RTO alone waits 200 ms
            // after that ACK.
            assert_eq!((with.stats.timeouts, with.stats.tail_loss_probes), (0, 1), "{with:?}");
            assert_eq!((without.stats.timeouts, without.stats.tail_loss_probes), (1, 0), "{without:?}");
            assert_eq!(with.stats.retransmits, lost as u64, "the probe and the holes, once each: {with:?}");
            assert!(with.completion < Duration::from_millis(200), "{lost} lost: {with:?}");
            assert!(with.completion + Duration::from_millis(100) < without.completion, "{with:?} {without:?}");
        }
    }

    #[test]
    fn every_hole_below_a_sacked_probe_is_resent_at_once() {
        // RACK's rule marks both holes below the probe lost: they go out
        // together as soon as the probe's SACK arrives, so the repair takes
        // a round trip and a half (20 ms, then 10 ms), as for one hole.
        for lost in [2, 3] {
            let t = tail_loss(true, lost).unwrap();
            assert!(t.repair < Duration::from_millis(31), "{lost} lost: {t:?}");
        }
    }

    #[test]
    fn rack_repairs_a_loss_with_two_segments_after_it_before_the_rto() {
        let with = flight_loss(true, 7..8).unwrap();
        let without = flight_loss(false, 7..8).unwrap();
        assert_eq!((with.stats.timeouts, with.stats.fast_recoveries, with.stats.retransmits), (0, 1, 1), "{with:?}");
        assert_eq!(without.stats.timeouts, 1, "{without:?}");
        assert!(with.completion + Duration::from_millis(100) < without.completion, "{with:?} {without:?}");
    }

    #[test]
    fn autotuning_opens_the_window_past_512_kib_and_beats_a_fixed_buffer() {
        let bytes = 16 << 20;
        let auto = large_window(true, bytes).unwrap();
        let fixed = large_window(false, bytes).unwrap();
        assert_eq!((auto.shift, fixed.shift), (7, 3));
        assert!(auto.max_window > 512 << 10, "{auto:?}");
        assert!(fixed.max_window <= FIXED_RECV_BUFFER, "{fixed:?}");
        assert!(auto.gbps() > 3.0 * fixed.gbps(), "autotuned {auto:?}, fixed {fixed:?}");
    }
}
