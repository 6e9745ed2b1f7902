//! The VNI: segments under /dev/shm, ports in this process exchanging
//! frames, re-attachment, a hostile peer scribbling over the rings, and two
//! engines talking ARP, ICMP and TCP over it.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nagare_core::buf::{BufferPool, ChecksumState, Offload, PacketBuf};
use nagare_core::icmp::EchoEvent;
use nagare_core::iface::Error;
use nagare_core::tcp::TcpHandle;
use nagare_core::{Instant, Interface, InterfaceConfig};
use nagare_dev::vni::layout::{self, Geometry};
use nagare_dev::vni::{segment_size, Segment, VniPort};
use nagare_dev::{Device, MonotonicClock, SimRng, RX_HEADROOM};
use nagare_wire::{EthernetAddress, Ipv4Addr, Ipv4Cidr};

/// A segment with a name of its own, removed when dropped.
struct TestSegment {
    name: String,
    seg: Arc<Segment>,
}

impl TestSegment {
    fn new(ports: usize, mtu: usize, slots: usize) -> TestSegment {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let name = format!("test-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let _ = nagare_dev::vni::destroy(&name);
        let seg = Arc::new(Segment::create(&name, ports, mtu, slots).unwrap());
        TestSegment { name, seg }
    }

    fn attach(&self, mac: u8) -> VniPort {
        VniPort::attach(Arc::clone(&self.seg), Some([2, 0, 0, 0, 0, mac])).unwrap()
    }
}

impl Drop for TestSegment {
    fn drop(&mut self) {
        let _ = nagare_dev::vni::destroy(&self.name);
    }
}

fn mac(n: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, n]
}

/// An Ethernet frame from `src` to `dst` with EtherType 0x88b5 (local
/// experimental) and `payload`.
fn frame(pool: &BufferPool, dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> PacketBuf {
    let mut bytes = Vec::with_capacity(14 + payload.len());
    bytes.extend_from_slice(&dst);
    bytes.extend_from_slice(&src);
    bytes.extend_from_slice(&[0x88, 0xb5]);
    bytes.extend_from_slice(payload);
    PacketBuf::from_slice(pool, 64, &bytes).unwrap()
}

fn send(port: &mut VniPort, frames: Vec<PacketBuf>) -> usize {
    let mut q: VecDeque<PacketBuf> = frames.into();
    let n = port.transmit_batch(&mut q, Instant::ZERO).unwrap();
    assert!(q.is_empty(), "frames left queued");
    n
}

fn recv_all(port: &mut VniPort, pool: &BufferPool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut batch = Vec::new();
        let n = port.receive_batch(pool, &mut batch, 64, Instant::ZERO).unwrap();
        out.extend(batch.iter().map(|f| f.to_vec()));
        if n == 0 {
            return out;
        }
    }
}

#[test]
fn sizes_grow_as_the_square_of_the_ports() {
    let g2 = Geometry::new(2, 1500, 256).unwrap();
    assert_eq!(g2.slot_size, 1536);
    assert_eq!(g2.ring_stride, 128 + 256 * 1536);
    for n in [2, 4, 8, 16] {
        let g = Geometry::new(n, 1500, 256).unwrap();
        assert_eq!(g.total, g.ring_offset + n * (n - 1) * g.ring_stride);
        assert_eq!(segment_size(n, 1500, 256).unwrap(), g.total);
    }
    assert!(segment_size(16, 1500, 256).unwrap() > 100 * segment_size(2, 1500, 256).unwrap());
    assert_eq!(Geometry::new(2, 9000, 64).unwrap().slot_size, 9024);
    assert_eq!(Geometry::new(2, 65535, 64).unwrap().slot_size, 65600);
    // Refused shapes.
    assert!(Geometry::new(1, 1500, 256).is_err());
    assert!(Geometry::new(65, 1500, 256).is_err());
    assert!(Geometry::new(2, 1500, 100).is_err());
    assert!(Geometry::new(2, 1500, 2).is_err());
    assert!(Geometry::new(2, 67, 256).is_err());
    assert!(Geometry::new(2, 65536, 256).is_err());
    assert!(Geometry::new(64, 65535, 65536).is_err(), "over the size cap");
}

#[test]
fn headers_are_validated() {
    let g = Geometry::new(4, 9000, 64).unwrap();
    let ok = |magic, version, ports: u32, slot_size: u32, total: u64, file: u64| {
        Geometry::from_header(
            magic,
            version,
            ports,
            9000,
            slot_size,
            64,
            g.ring_offset as u64,
            g.ring_stride as u64,
            total,
            file,
        )
    };
    let t = g.total as u64;
    assert_eq!(ok(layout::MAGIC, layout::VERSION, 4, 9024, t, t).unwrap(), g);
    assert!(ok(0, layout::VERSION, 4, 9024, t, t).is_err());
    assert!(ok(layout::MAGIC, layout::VERSION + 1, 4, 9024, t, t).is_err());
    assert!(ok(layout::MAGIC, 1, 4, 9024, t, t).is_err(), "slots without offload words");
    assert!(ok(layout::MAGIC, layout::VERSION, 5, 9024, t, t).is_err());
    assert!(ok(layout::MAGIC, layout::VERSION, 4, 9088, t, t).is_err());
    assert!(ok(layout::MAGIC, layout::VERSION, 4, 9024, t + 64, t + 64).is_err());
    assert!(ok(layout::MAGIC, layout::VERSION, 4, 9024, t, t - 1).is_err());
    assert!(ok(layout::MAGIC, layout::VERSION, u32::MAX, 9024, t, t).is_err());

    // Names.
    for bad in ["", "a/b", "..", "a b", "x".repeat(33).as_str(), "é"] {
        assert!(Segment::open(bad).is_err(), "{bad:?}");
        assert!(Segment::create(bad, 2, 1500, 8).is_err(), "{bad:?}");
    }

    // A segment whose header was scribbled on is refused; so is a missing one.
    let t = TestSegment::new(2, 1500, 8);
    assert!(Segment::open(&t.name).is_ok());
    assert!(Segment::create(&t.name, 2, 1500, 8).is_err(), "exists");
    t.seg.scribble(layout::H_PORTS, 4, |_| 0xff);
    assert!(Segment::open(&t.name).is_err());
    t.seg.scribble(layout::H_PORTS, 4, |i| [2, 0, 0, 0][i - layout::H_PORTS]);
    assert!(Segment::open(&t.name).is_ok());
    t.seg.scribble(layout::H_MAGIC, 1, |_| 0);
    assert!(Segment::open(&t.name).is_err());
    assert!(Segment::open("no-such-segment-here").is_err());
}

#[test]
fn two_ports_both_ways() {
    let t = TestSegment::new(2, 1500, 16);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    assert_eq!((a.index(), b.index()), (0, 1));
    assert!(VniPort::attach(Arc::clone(&t.seg), Some(mac(3))).is_err(), "all ports taken");
    // Raw fds are distinct eventfds, MTU comes from the segment.
    assert_ne!(a.raw_fd(), b.raw_fd());
    assert_eq!(a.capabilities().mtu, 1500);

    let big = vec![0x5a; 1500];
    let sent = send(&mut a, vec![frame(&pool, mac(2), mac(1), b"hello"), frame(&pool, mac(2), mac(1), &big)]);
    assert_eq!(sent, 2);
    let got = recv_all(&mut b, &pool);
    assert_eq!(got.len(), 2);
    assert_eq!(&got[0][14..], b"hello");
    assert_eq!(&got[1][14..], &big[..]);
    send(&mut b, vec![frame(&pool, mac(1), mac(2), b"back")]);
    let got = recv_all(&mut a, &pool);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][14..], b"back");
    assert!(recv_all(&mut a, &pool).is_empty());

    // Received frames sit at the headroom of one pool buffer.
    send(&mut a, vec![frame(&pool, mac(2), mac(1), b"x")]);
    let mut out = Vec::new();
    b.receive_batch(&pool, &mut out, 8, Instant::ZERO).unwrap();
    assert_eq!(out[0].headroom(), RX_HEADROOM);
    assert_eq!(out[0].slice_count(), 1);
    drop(out);

    // Too big and too small frames are refused.
    let mut q =
        VecDeque::from([frame(&pool, mac(2), mac(1), &[0; 1501]), PacketBuf::from_slice(&pool, 0, &[1; 10]).unwrap()]);
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 2);
    assert_eq!(a.stats().tx_errors, 2);
    assert!(recv_all(&mut b, &pool).is_empty());

    // Back pressure: a full ring keeps frames queued.
    let mut q: VecDeque<PacketBuf> = (0..20u8).map(|i| frame(&pool, mac(2), mac(1), &[i])).collect();
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 16);
    assert_eq!(q.len(), 4);
    let got = recv_all(&mut b, &pool);
    assert_eq!(got.len(), 16);
    assert!(got.iter().enumerate().all(|(i, f)| f[14] == i as u8), "in order");
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 4);
    assert_eq!(recv_all(&mut b, &pool).len(), 4);

    assert_eq!(b.stats().rx_errors, 0);
    assert!(a.vni_stats().doorbells_rung >= 1);
    drop((a, b));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn jumbo_frames_span_pool_buffers() {
    let t = TestSegment::new(2, 9000, 8);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let payload: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
    send(&mut a, vec![frame(&pool, mac(2), mac(1), &payload)]);
    let mut out = Vec::new();
    b.receive_batch(&pool, &mut out, 8, Instant::ZERO).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].len(), 9014);
    assert!(out[0].slice_count() >= 5);
    assert_eq!(&out[0].to_vec()[14..], &payload[..]);
}

/// A frame of `len` bytes whose payload counts up from `seed`, with `offload`.
fn offload_frame(pool: &BufferPool, len: usize, seed: u8, offload: Offload) -> PacketBuf {
    let payload: Vec<u8> = (0..len - 14).map(|i| (i as u8).wrapping_add(seed)).collect();
    let mut f = frame(pool, mac(2), mac(1), &payload);
    f.set_offload(offload);
    f
}

fn recv_with_offload(port: &mut VniPort, pool: &BufferPool) -> Vec<(Vec<u8>, Offload)> {
    let mut out = Vec::new();
    for _ in 0..4 {
        port.receive_batch(pool, &mut out, 64, Instant::ZERO).unwrap();
    }
    out.iter().map(|f| (f.to_vec(), f.offload())).collect()
}

#[test]
fn offload_metadata_and_super_segments_cross_the_segment() {
    let t = TestSegment::new(2, 1500, 64);
    let pool = BufferPool::new(2048, 1024);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let caps = a.capabilities();
    assert!(caps.tx_offloads.checksum);
    assert_eq!(caps.tx_offloads.tcp_segmentation, 32 * 1528 - 14, "half the ring");
    let partial = Offload::checksum(ChecksumState::Partial);
    let verified = Offload::checksum(ChecksumState::Verified);
    let tso = Offload::tcp_segments(1448);
    let uso = Offload::udp_segments(1472);
    assert_eq!(caps.tx_offloads.udp_segmentation, caps.tx_offloads.tcp_segmentation);
    // Plain frames keep their checksum state; super-frames of 20000 bytes
    // fill 14 slots each, and five of them wrap the 64-slot ring; TCP and
    // UDP super-frames keep their kind.
    let mut sent = vec![
        offload_frame(&pool, 100, 1, Offload::NONE),
        offload_frame(&pool, 1514, 2, partial),
        offload_frame(&pool, 60, 3, verified),
    ];
    for round in 0..10u8 {
        sent.push(offload_frame(&pool, 20_000 + usize::from(round), round, if round % 2 == 0 { tso } else { uso }));
        sent.push(offload_frame(&pool, 64, round, partial));
    }
    let want: Vec<(Vec<u8>, Offload)> = sent.iter().map(|f| (f.to_vec(), f.offload())).collect();
    let mut q: VecDeque<PacketBuf> = sent.into();
    let mut got = Vec::new();
    for _ in 0..64 {
        a.transmit_batch(&mut q, Instant::ZERO).unwrap();
        got.extend(recv_with_offload(&mut b, &pool));
        if q.is_empty() && got.len() == want.len() {
            break;
        }
    }
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.1, w.1, "offload of frame {i}");
        assert!(g.0 == w.0, "bytes of frame {i} ({} bytes, want {})", g.0.len(), w.0.len());
    }
    assert_eq!(b.stats().rx_errors, 0);
    assert_eq!(a.stats().tx_errors, 0);

    // Shown in place (netd's driver), a super-segment reads across its
    // slots and carries its offload.
    let mut q = VecDeque::from([offload_frame(&pool, 30_000, 7, tso)]);
    a.transmit_batch(&mut q, Instant::ZERO).unwrap();
    let mut seen = Vec::new();
    b.receive_placed(8, Instant::ZERO, &mut |f| {
        let mut bytes = vec![0u8; f.len()];
        assert!(f.copy_out(0, &mut bytes));
        assert!(!f.copy_out(1, &mut bytes), "past the end");
        seen.push((bytes, f.offload()));
    })
    .unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1, tso);
    assert!(seen[0].0 == offload_frame(&pool, 30_000, 7, tso).to_vec());

    // A super-segment past what the ring carries, or a frame past the MTU
    // that is not one, is refused by the sender.
    let mut q = VecDeque::from([offload_frame(&pool, 32 * 1528 + 1, 1, tso), offload_frame(&pool, 1515, 1, partial)]);
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 2);
    assert_eq!(a.stats().tx_errors, 2);
    assert!(recv_all(&mut b, &pool).is_empty());
    drop((a, b, got));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn hostile_offload_words_and_lengths_are_counted_and_dropped() {
    let t = TestSegment::new(2, 1500, 16);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let geo = *t.seg.geometry();
    let ring = geo.ring_offset_of(0, 1);
    let slot = |k: usize| geo.slot_offset(ring, k % 16);
    let word = |v: u32| v.to_le_bytes();
    let partial_tso = (1u32 << 16) | 1448;
    // (length, offload word) a hostile sender may leave in a published
    // slot, the counter it lands in, and how many of the two frames
    // published arrive: a bad word drops the frame it claims (one slot, or
    // two for 3000 bytes), a length past the published slots skips one.
    let udp = 1u32 << 18;
    let cases: [(u32, u32, &str, usize); 10] = [
        (100, 1 << 20, "bad_metadata", 1),                 // reserved bit
        (100, 3 << 16, "bad_metadata", 1),                 // no such checksum state
        (100, 1448, "bad_metadata", 1),                    // segments, checksum complete
        (3000, 1 << 16, "bad_metadata", 0),                // past the MTU, not a super-segment
        (3000, (1 << 16) | 1461, "bad_metadata", 0),       // segments past the MTU
        (6000, partial_tso, "bad_slots", 1),               // more slots than were published
        (100, udp | 1 << 16, "bad_metadata", 1),           // UDP segmentation without a size
        (100, udp | 1472, "bad_metadata", 1),              // UDP datagrams, checksum complete
        (3000, udp | (1 << 16) | 1473, "bad_metadata", 0), // UDP datagrams past the MTU
        (3000, udp | 1 << 16, "bad_metadata", 0),          // UDP past the MTU, no size
    ];
    let mut pos = 0;
    for (len, meta, counter, arrive) in cases {
        let before = b.vni_stats();
        send(&mut a, (0..2).map(|_| frame(&pool, mac(2), mac(1), &[0xab; 86])).collect());
        let k = pos;
        pos += 2;
        // The sender's bytes are published; a hostile writer changes them.
        let (l, m) = (word(len), word(meta));
        t.seg.scribble(slot(k), 8, |i| if i - slot(k) < 4 { l[i - slot(k)] } else { m[i - slot(k) - 4] });
        assert_eq!(recv_all(&mut b, &pool).len(), arrive, "{len} {meta:#x}");
        let after = b.vni_stats();
        let counted = match counter {
            "bad_metadata" => after.bad_metadata - before.bad_metadata,
            _ => after.bad_slots - before.bad_slots,
        };
        assert_eq!(counted, 1, "{len} {meta:#x}: {counter}");
        // The ring is whole: the next frame arrives.
        send(&mut a, vec![frame(&pool, mac(2), mac(1), b"next")]);
        pos += 1;
        let got = recv_all(&mut b, &pool);
        assert_eq!(got.len(), 1);
        assert_eq!(&got[0][14..], b"next");
    }
    assert_eq!(b.stats().rx_errors, 10);
    drop((a, b));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn slots_go_back_to_the_sender_while_a_batch_is_read() {
    let t = TestSegment::new(2, 1500, 16);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    send(&mut a, (0..12u8).map(|i| frame(&pool, mac(2), mac(1), &[i])).collect());
    let mut in_use = Vec::new();
    let seg = Arc::clone(&t.seg);
    let n = b.receive_placed(64, Instant::ZERO, &mut |_| in_use.push(seg.ring_backlog(0, 1).unwrap())).unwrap();
    assert_eq!(n, 12);
    assert_eq!(in_use[0], 12);
    // An eighth of the ring (2 slots) is handed back at a time, not the
    // whole batch at its end: the sender can refill while we read.
    assert_eq!(in_use[11], 2, "slots in use as each frame was shown: {in_use:?}");
    assert_eq!(t.seg.ring_backlog(0, 1), Some(0));
}

#[test]
fn four_ports_unicast_and_broadcast() {
    let t = TestSegment::new(4, 1500, 32);
    let pool = BufferPool::new(2048, 1024);
    let mut ports: Vec<VniPort> = (1..=4).map(|m| t.attach(m)).collect();
    for p in &mut ports {
        p.refresh().unwrap();
        assert!(p.peer_links().iter().all(|l| l.up), "{:?}", p.peer_links());
    }
    // Every port sends one unicast to every other and one broadcast.
    for (i, port) in ports.iter_mut().enumerate() {
        let me = mac(i as u8 + 1);
        let mut frames: Vec<PacketBuf> = (0..4)
            .filter(|&j| j != i)
            .map(|j| frame(&pool, mac(j as u8 + 1), me, format!("{i}->{j}").as_bytes()))
            .collect();
        frames.push(frame(&pool, [0xff; 6], me, format!("{i}->all").as_bytes()));
        send(port, frames);
    }
    for (j, port) in ports.iter_mut().enumerate() {
        let mut got: Vec<String> =
            recv_all(port, &pool).iter().map(|f| String::from_utf8(f[14..].to_vec()).unwrap()).collect();
        got.sort();
        let mut want: Vec<String> =
            (0..4).filter(|&i| i != j).flat_map(|i| [format!("{i}->{j}"), format!("{i}->all")]).collect();
        want.sort();
        assert_eq!(got, want, "port {j}");
    }
    // Multicast goes everywhere too; unknown unicast is flooded.
    send(
        &mut ports[0],
        vec![frame(&pool, [0x01, 0, 0x5e, 0, 0, 1], mac(1), b"m"), frame(&pool, mac(99), mac(1), b"u")],
    );
    for port in &mut ports[1..] {
        assert_eq!(recv_all(port, &pool).len(), 2);
    }
    assert_eq!(ports[0].vni_stats().flooded, 1);
    // A detached peer is skipped: its link goes down, nothing is queued for it.
    let gone = ports.remove(3);
    drop(gone);
    send(&mut ports[0], vec![frame(&pool, [0xff; 6], mac(1), b"after")]);
    assert!(!ports[0].peer_links()[2].up);
    assert_eq!(recv_all(&mut ports[1], &pool).len(), 1);
    assert_eq!(t.seg.ring_backlog(0, 3), Some(0));
}

#[test]
fn a_reattached_port_gets_fresh_rings() {
    let t = TestSegment::new(3, 1500, 16);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let b = t.attach(2);
    let gen_before = b.generation();
    // Frames for b that b never reads; b goes away.
    send(&mut a, (0..5u8).map(|i| frame(&pool, mac(2), mac(1), &[i])).collect());
    assert_eq!(t.seg.ring_backlog(0, 1), Some(5));
    drop(b);
    a.refresh().unwrap();
    assert!(!a.peer_links()[0].up, "b detached: link down");
    // Sent while b is gone (and port 2 was never attached): no peer is
    // up, so the frame is dropped, not queued.
    send(&mut a, vec![frame(&pool, mac(2), mac(1), b"lost")]);
    assert_eq!(a.stats().tx_dropped, 1);
    assert_eq!(t.seg.ring_backlog(0, 1), Some(5), "nothing added for a port that is down");

    let mut b2 = VniPort::attach(Arc::clone(&t.seg), Some(mac(12))).unwrap();
    assert_eq!(b2.index(), 1, "the freed port is reused");
    assert_ne!(b2.generation(), gen_before);
    assert_eq!(t.seg.ring_backlog(0, 1), Some(0), "stale frames are gone");
    assert!(recv_all(&mut b2, &pool).is_empty());
    a.refresh().unwrap();
    assert_eq!(a.peer_links()[0].mac, mac(12), "the new MAC is learnt");
    send(&mut a, vec![frame(&pool, mac(12), mac(1), b"fresh")]);
    let got = recv_all(&mut b2, &pool);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][14..], b"fresh");
    send(&mut b2, vec![frame(&pool, mac(1), mac(12), b"hi")]);
    assert_eq!(recv_all(&mut a, &pool).len(), 1);
}

#[test]
fn a_sender_that_takes_its_port_over_withdraws_unread_frames_without_breaking_the_ring() {
    let t = TestSegment::new(2, 1500, 16);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    send(&mut a, (0..5u8).map(|i| frame(&pool, mac(2), mac(1), &[i])).collect());
    // b sees all five (it accepts the head) but takes only two.
    let mut got = Vec::new();
    assert_eq!(b.receive_batch(&pool, &mut got, 2, Instant::ZERO).unwrap(), 2);
    // a goes away and a new process takes port 0 over: its head moves back
    // to b's tail, withdrawing the three frames b has not read.
    drop(a);
    let mut a2 = t.attach(11);
    assert_eq!(a2.index(), 0);
    assert_eq!(t.seg.ring_backlog(0, 1), Some(0));
    assert!(recv_all(&mut b, &pool).is_empty(), "withdrawn frames are not delivered");
    send(&mut a2, vec![frame(&pool, mac(2), mac(11), b"new")]);
    let after = recv_all(&mut b, &pool);
    assert_eq!(after.len(), 1);
    assert_eq!(&after[0][14..], b"new");
    assert_eq!(b.vni_stats().broken_rings, 0, "a withdrawal is not a broken ring");
    assert_eq!(b.stats().rx_errors, 0);
    drop((got, after));
}

#[test]
fn a_dead_owner_is_detected_and_its_port_reclaimed() {
    let t = TestSegment::new(2, 1500, 8);
    let pool = BufferPool::new(2048, 64);
    let mut a = t.attach(1);
    // Port 1 claimed by a process that has exited.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let word = layout::owner_word(layout::STATE_ATTACHED, dead).to_le_bytes();
    let off = t.seg.geometry().port_offset(1) + layout::P_OWNER;
    t.seg.scribble(off, 8, |i| word[i - off]);
    let gen_off = t.seg.geometry().port_offset(1) + layout::P_GENERATION;
    t.seg.scribble(gen_off, 1, |_| 7);
    a.refresh().unwrap();
    assert!(!a.peer_links()[0].up, "a dead pid is link down");
    send(&mut a, vec![frame(&pool, [0xff; 6], mac(1), b"nobody")]);
    assert_eq!(a.stats().tx_dropped, 1);
    let mut b = t.attach(2);
    assert_eq!(b.index(), 1);
    send(&mut a, vec![frame(&pool, mac(2), mac(1), b"you")]);
    assert_eq!(recv_all(&mut b, &pool).len(), 1);
}

#[test]
fn garbage_in_the_rings_is_counted_never_fatal() {
    let t = TestSegment::new(3, 1500, 16);
    let pool = BufferPool::new(2048, 512);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let mut c = t.attach(3);
    let geo = *t.seg.geometry();
    let ring_ab = geo.ring_offset_of(0, 1);
    let ring_ba = geo.ring_offset_of(1, 0);
    let mut rng = SimRng::new(5);
    for round in 0..300 {
        send(&mut a, (0..3u8).map(|i| frame(&pool, mac(2), mac(1), &[round as u8, i])).collect());
        // A hostile peer writes random bytes over slots, head and tail of
        // both rings between a and b, and over b's port record.
        for _ in 0..(1 + rng.next_u64() % 4) {
            let ring = if rng.next_u64().is_multiple_of(2) { ring_ab } else { ring_ba };
            let (off, len) = match rng.next_u64() % 4 {
                0 => (ring + layout::R_TAIL, 4),
                1 => (ring + layout::R_HEAD, 4),
                2 => (geo.slot_offset(ring, (rng.next_u64() % 16) as usize), 8 + (rng.next_u64() % 64) as usize),
                _ => (geo.port_offset(1) + layout::P_DOORBELL, 4),
            };
            let mut bytes = rng.next_u64().to_le_bytes().repeat(12).into_iter();
            t.seg.scribble(off, len, |_| bytes.next().unwrap_or(0xee));
        }
        // Whatever arrives, nothing panics and nothing leaks.
        let _ = recv_all(&mut b, &pool);
        let _ = recv_all(&mut a, &pool);
        let mut q: VecDeque<PacketBuf> = (0..3u8).map(|i| frame(&pool, mac(1), mac(2), &[i])).collect();
        let _ = b.transmit_batch(&mut q, Instant::ZERO).unwrap();
    }
    let bad = b.stats().rx_errors + a.stats().rx_errors;
    assert!(bad > 0, "garbage was noticed: {:?} {:?}", b.vni_stats(), a.vni_stats());
    assert!(b.vni_stats().bad_slots + a.vni_stats().bad_slots > 0);
    assert!(b.vni_stats().broken_rings + a.vni_stats().broken_rings > 0);
    // After the scribbling stops the rings resynchronise: the second
    // batch arrives whole.
    for _ in 0..2 {
        send(&mut a, (0..3u8).map(|i| frame(&pool, mac(2), mac(1), &[0xc0, i])).collect());
        let _ = recv_all(&mut b, &pool);
    }
    send(&mut a, (0..3u8).map(|i| frame(&pool, mac(2), mac(1), &[0xd0, i])).collect());
    let got = recv_all(&mut b, &pool);
    assert_eq!(
        got.iter().map(|f| f[14..].to_vec()).collect::<Vec<_>>(),
        vec![vec![0xd0, 0], vec![0xd0, 1], vec![0xd0, 2]]
    );
    // The third port saw none of it.
    assert_eq!(c.stats().rx_errors, 0);
    send(&mut c, vec![frame(&pool, mac(1), mac(3), b"c")]);
    assert!(recv_all(&mut a, &pool).iter().any(|f| &f[14..] == b"c"));
    // Re-attaching b resets its rings completely.
    drop(b);
    let mut b = t.attach(2);
    send(&mut a, vec![frame(&pool, mac(2), mac(1), b"clean")]);
    let got = recv_all(&mut b, &pool);
    assert_eq!(got.len(), 1);
    drop((a, b, c, got));
    assert_eq!(pool.in_use(), 0);
}

/// FNV-1a over a stream.
fn fnv(hash: &mut u64, data: &[u8]) {
    for &b in data {
        *hash = (*hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
}

struct Host {
    iface: Interface,
    port: VniPort,
    rx: Vec<PacketBuf>,
    /// The longest frame received.
    largest_rx: usize,
}

impl Host {
    fn new(t: &TestSegment, ip: Ipv4Addr, m: u8) -> Host {
        let port = t.attach(m);
        let mut config = InterfaceConfig::new(EthernetAddress(mac(m)), Ipv4Cidr::new(ip, 24).unwrap());
        config.seed = u64::from(m);
        config.secrets = nagare_core::Secrets::from_seed(config.seed);
        Host {
            iface: Interface::new(config, port.capabilities(), BufferPool::new(2048, 8192)),
            port,
            rx: Vec::new(),
            largest_rx: 0,
        }
    }

    fn step(&mut self, now: Instant) -> bool {
        let pool = self.iface.pool().clone();
        let got = self.port.receive_batch(&pool, &mut self.rx, 64, now).unwrap();
        self.largest_rx = self.rx.iter().map(PacketBuf::len).fold(self.largest_rx, usize::max);
        self.iface.receive_batch(self.rx.drain(..), now);
        self.iface.poll(now);
        let sent = self.port.transmit_batch(self.iface.tx_queue(), now).unwrap();
        got > 0 || sent > 0
    }
}

#[test]
fn engines_ping_and_move_megabytes_over_tcp() {
    let t = TestSegment::new(2, 1500, 256);
    let a_ip = Ipv4Addr::new(10, 9, 0, 1);
    let b_ip = Ipv4Addr::new(10, 9, 0, 2);
    let mut a = Host::new(&t, a_ip, 1);
    let mut b = Host::new(&t, b_ip, 2);
    let clock = MonotonicClock::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);

    // ARP and ping.
    let echo = a.iface.icmp().echo_open(0x1234).unwrap();
    a.iface.icmp().echo_send(echo, b_ip, 1, b"over shared memory", clock.now()).unwrap();
    let reply = loop {
        assert!(std::time::Instant::now() < deadline, "no echo reply");
        let now = clock.now();
        a.step(now);
        b.step(now);
        if let Some(ev) = a.iface.icmp().echo_recv(echo).unwrap() {
            break ev;
        }
    };
    match reply {
        EchoEvent::Reply { from, seq_no, data_len, .. } => assert_eq!((from, seq_no, data_len), (b_ip, 1, 18)),
        other => panic!("{other:?}"),
    }
    assert!(a.iface.arp_lookup(b_ip, clock.now()).is_some());

    // 4 MB from a to b over TCP, content checked.
    const TOTAL: usize = 4 << 20;
    let listener = b.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001), 4).unwrap();
    let ha = a.iface.tcp().connect(SocketAddrV4::new(b_ip, 5001), 0, clock.now()).unwrap();
    let mut hb: Option<TcpHandle> = None;
    let mut rng = SimRng::new(9);
    let data: Vec<u8> = (0..TOTAL).map(|_| rng.next_u64() as u8).collect();
    let mut want = 0xcbf2_9ce4_8422_2325u64;
    fnv(&mut want, &data);
    let (mut sent, mut closed) = (0, false);
    let (mut got_hash, mut got_len, mut eof) = (0xcbf2_9ce4_8422_2325u64, 0usize, false);
    while !eof {
        assert!(std::time::Instant::now() < deadline, "transfer stalled at {got_len} of {TOTAL} bytes");
        let now = clock.now();
        a.step(now);
        b.step(now);
        while sent < TOTAL {
            match a.iface.tcp().send(ha, &data[sent..(sent + 65536).min(TOTAL)], now) {
                Ok(0) | Err(Error::WouldBlock) => break,
                Ok(n) => sent += n,
                Err(e) => panic!("send: {e}"),
            }
        }
        if sent == TOTAL && !closed {
            a.iface.tcp().shutdown(ha, now).unwrap();
            closed = true;
        }
        if hb.is_none() {
            hb = b.iface.tcp().accept(listener).unwrap();
        }
        if let Some(h) = hb {
            loop {
                match b.iface.tcp().recv_buf(h, usize::MAX, now) {
                    Ok(Some(buf)) => {
                        for chunk in buf.chunks() {
                            fnv(&mut got_hash, chunk);
                        }
                        got_len += buf.len();
                    }
                    Ok(None) => {
                        eof = true;
                        break;
                    }
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("recv: {e}"),
                }
            }
        }
    }
    assert_eq!(got_len, TOTAL);
    assert_eq!(got_hash, want, "content differs");
    assert_eq!(a.port.stats().rx_errors + b.port.stats().rx_errors, 0);
    // With the port's offloads the sender's engine neither cut nor summed
    // per MTU: super-segments crossed whole.
    assert!(b.port.stats().rx_bytes > TOTAL as u64);
    assert!(b.largest_rx > 1514 * 8, "largest frame {} bytes", b.largest_rx);
    assert!(b.port.stats().rx_frames < (TOTAL / 1448 / 4) as u64, "{} frames", b.port.stats().rx_frames);
}

/// Segmented UDP sends between two engines: each crosses the segment as
/// one super-frame, and the receiver's socket gets the exact datagrams.
#[test]
fn segmented_udp_sends_arrive_as_their_datagrams() {
    let t = TestSegment::new(2, 1500, 256);
    let a_ip = Ipv4Addr::new(10, 9, 1, 1);
    let b_ip = Ipv4Addr::new(10, 9, 1, 2);
    let mut a = Host::new(&t, a_ip, 1);
    let mut b = Host::new(&t, b_ip, 2);
    assert!(a.iface.capabilities().tx_offloads.udp_segmentation >= 65_535);
    let clock = MonotonicClock::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let sink = b.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    let tx = a.iface.udp().bind(SocketAddrV4::new(a_ip, 4000)).unwrap();
    let dst = SocketAddrV4::new(b_ip, 9);
    // ARP first, with one plain datagram.
    a.iface.udp().send_to(tx, b"first", dst, clock.now()).unwrap();
    let mut got: Vec<Vec<u8>> = Vec::new();
    while got.is_empty() {
        assert!(std::time::Instant::now() < deadline, "no first datagram");
        let now = clock.now();
        a.step(now);
        b.step(now);
        while let Some(d) = b.iface.udp().recv(sink).unwrap() {
            got.push(d.payload.to_vec());
        }
    }
    assert_eq!(got, [b"first".to_vec()]);
    got.clear();

    let mut rng = SimRng::new(3);
    let sends: Vec<(Vec<u8>, usize)> = [(60_000, 1472), (5000, 1000), (2944, 1472), (65_000, 1400)]
        .iter()
        .map(|&(len, size)| ((0..len).map(|_| rng.next_u64() as u8).collect(), size))
        .collect();
    let mut want = Vec::new();
    for (data, size) in &sends {
        a.iface.udp().send_to_segmented(tx, data, *size, dst, clock.now()).unwrap();
        want.extend(data.chunks(*size).map(<[u8]>::to_vec));
    }
    assert_eq!(a.iface.tx_queue().len(), sends.len(), "one frame per send");
    while got.len() < want.len() {
        assert!(std::time::Instant::now() < deadline, "{} of {} datagrams", got.len(), want.len());
        let now = clock.now();
        a.step(now);
        b.step(now);
        while let Some(d) = b.iface.udp().recv(sink).unwrap() {
            assert_eq!(d.source, SocketAddrV4::new(a_ip, 4000));
            got.push(d.payload.to_vec());
        }
    }
    assert!(got == want, "the datagrams, in order, byte for byte");
    assert_eq!(b.iface.counters().udp_super_frames_received, sends.len() as u64);
    assert!(b.largest_rx > 60_000, "the super-frames crossed whole ({} bytes)", b.largest_rx);
    assert_eq!(a.port.stats().tx_errors + b.port.stats().rx_errors, 0);
}

/// Whether `fd` is readable right now (the doorbell has been rung).
fn rung(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd on the stack, zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn doorbells_ring_on_the_edge_and_not_while_busy_polling() {
    let t = TestSegment::new(2, 1500, 16);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let fd = b.raw_fd().unwrap();
    let one = |pool: &BufferPool, n: u8| vec![frame(pool, mac(2), mac(1), &[n])];

    // Idle receiver: the first frame rings; it wakes, drains, and after an
    // empty batch its doorbell is quiet again.
    send(&mut a, one(&pool, 0));
    assert!(rung(fd));
    assert_eq!(recv_all(&mut b, &pool).len(), 1);
    assert!(!rung(fd), "drained before reporting empty");
    let rung_before = a.vni_stats().doorbells_rung;
    assert!(rung_before >= 1);

    // Busy-poll mode: senders never ring, frames still arrive, and no
    // frame is lost when the mode ends.
    b.set_busy_poll(true);
    assert!(b.busy_poll());
    for i in 0..5 {
        send(&mut a, one(&pool, i));
        let mut out = Vec::new();
        assert_eq!(b.receive_batch(&pool, &mut out, 8, Instant::ZERO).unwrap(), 1);
        let mut none = Vec::new();
        assert_eq!(b.receive_batch(&pool, &mut none, 8, Instant::ZERO).unwrap(), 0);
    }
    assert!(!rung(fd));
    assert_eq!(a.vni_stats().doorbells_rung, rung_before);
    assert!(a.vni_stats().doorbells_masked >= 5);
    send(&mut a, one(&pool, 9));
    b.set_busy_poll(false);
    assert_eq!(recv_all(&mut b, &pool).len(), 1, "the frame sent while masked");

    // Back to normal: the empty-to-non-empty edge rings again.
    send(&mut a, one(&pool, 10));
    assert!(rung(fd));
    assert_eq!(a.vni_stats().doorbells_rung, rung_before + 1);
    assert_eq!(recv_all(&mut b, &pool).len(), 1);
    assert!(!rung(fd));
    drop((a, b));
    assert_eq!(pool.in_use(), 0);
}

// ---- zero-copy send: frames built in the slot ---------------------------

/// The bytes of an Ethernet frame (EtherType 0x88b5) from `src` to `dst`.
fn frame_bytes(dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(14 + payload.len());
    bytes.extend_from_slice(&dst);
    bytes.extend_from_slice(&src);
    bytes.extend_from_slice(&[0x88, 0xb5]);
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn frames_built_in_the_slot_arrive_byte_exact() {
    for mtu in [1500, 9000] {
        let t = TestSegment::new(2, mtu, 16);
        let pool = BufferPool::new(2048, 256);
        let mut a = t.attach(1);
        let mut b = t.attach(2);
        let mut rng = SimRng::new(mtu as u64);
        let mut want = Vec::new();
        {
            let mut batch = a.slot_batch().unwrap();
            for len in [14, 60, 1514.min(mtu + 14), mtu + 14] {
                let payload: Vec<u8> = (0..len - 14).map(|_| rng.next_u64() as u8).collect();
                let bytes = frame_bytes(mac(2), mac(1), &payload);
                let mut w = batch.reserve_slot(mac(2)).unwrap();
                assert_eq!(w.capacity(), mtu + 14);
                assert_eq!(w.peer_mac(), mac(2));
                // Built out of order, in pieces: the payload first, then
                // the header, as a sender that fills in lengths last does.
                let mid = 14 + (len - 14) / 2;
                w.write(mid, &bytes[mid..]).unwrap();
                w.write(14, &bytes[14..mid]).unwrap();
                w.write(0, &bytes[..14]).unwrap();
                assert_eq!(w.written(), len);
                w.commit(len).unwrap();
                want.push(bytes);
            }
            assert_eq!(batch.committed(), 4);
            // Nothing is visible before the batch is published.
            assert_eq!(t.seg.ring_backlog(0, 1), Some(0));
            assert_eq!(batch.publish(), 4);
        }
        assert_eq!(t.seg.ring_backlog(0, 1), Some(4));
        let got = recv_all(&mut b, &pool);
        assert_eq!(got, want, "MTU {mtu}: byte-exact, in order");
        assert_eq!(a.vni_stats().slots_committed, 4);
        assert_eq!(a.stats().tx_frames, 4);
        assert_eq!(a.stats().tx_bytes, want.iter().map(|f| f.len() as u64).sum::<u64>());
        assert_eq!(b.stats().rx_errors, 0);
        // Dropping the batch publishes too, and rings the sleeping receiver.
        {
            let mut batch = a.slot_batch().unwrap();
            let mut w = batch.reserve_slot(mac(2)).unwrap();
            w.write(0, &frame_bytes(mac(2), mac(1), b"dropped batch")).unwrap();
            w.commit(27).unwrap();
        }
        assert_eq!(recv_all(&mut b, &pool), vec![frame_bytes(mac(2), mac(1), b"dropped batch")]);
        drop((a, b));
        assert_eq!(pool.in_use(), 0);
    }
}

#[test]
fn slot_commits_are_checked_and_the_ring_stays_whole() {
    let t = TestSegment::new(3, 1500, 8);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let _c = t.attach(3);
    let good = frame_bytes(mac(2), mac(1), b"good");
    {
        let mut batch = a.slot_batch().unwrap();
        // Group and unknown addresses cannot be built in one slot.
        assert_eq!(batch.reserve_slot([0xff; 6]).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(batch.reserve_slot([1, 0, 0x5e, 0, 0, 1]).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(batch.reserve_slot(mac(99)).unwrap_err().kind(), std::io::ErrorKind::NotFound);
        // Writes past the slot, and lengths that are too short, too long
        // or longer than what was written, are refused.
        let mut w = batch.reserve_slot(mac(2)).unwrap();
        assert!(w.write(1515, &[0]).is_err());
        assert!(w.write(1500, &[0; 15]).is_err());
        assert!(w.write(usize::MAX, &[0; 2]).is_err());
        assert_eq!(w.written(), 0);
        w.write(0, &good).unwrap();
        assert_eq!(w.commit(13).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        let mut w = batch.reserve_slot(mac(2)).unwrap();
        w.write(0, &[0; 1514]).unwrap();
        assert!(w.commit(1515).is_err());
        let mut w = batch.reserve_slot(mac(2)).unwrap();
        w.write(0, &good).unwrap();
        assert!(w.commit(good.len() + 1).is_err(), "not written that far");
        // A writer dropped without a commit sends nothing either.
        {
            let mut w = batch.reserve_slot(mac(2)).unwrap();
            w.write(0, &good).unwrap();
        }
        assert_eq!(batch.committed(), 0);
        // The slot is still the next one: a good commit uses it.
        let mut w = batch.reserve_slot(mac(2)).unwrap();
        w.write(0, &good).unwrap();
        w.commit(good.len()).unwrap();
    }
    assert_eq!(a.stats().tx_frames, 1);
    assert_eq!(recv_all(&mut b, &pool), vec![good.clone()]);
    assert_eq!(t.seg.ring_backlog(0, 1), Some(0));
    assert_eq!(t.seg.ring_backlog(0, 2), Some(0), "nothing went to the third port");

    // A full ring: exactly `slots` frames, then WouldBlock, and the
    // published tail is never more than a ring ahead of the head.
    let mut n = 0u8;
    {
        let mut batch = a.slot_batch().unwrap();
        loop {
            match batch.reserve_slot(mac(2)) {
                Ok(mut w) => {
                    w.write(0, &frame_bytes(mac(2), mac(1), &[n])).unwrap();
                    w.commit(15).unwrap();
                    n += 1;
                }
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
                    break;
                }
            }
            assert!(n <= 8);
        }
    }
    assert_eq!(n, 8);
    assert_eq!(t.seg.ring_backlog(0, 1), Some(8));
    // The copying path sees the same full ring: back pressure.
    let mut q = VecDeque::from([frame(&pool, mac(2), mac(1), &[100])]);
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 0);
    let got = recv_all(&mut b, &pool);
    assert!(got.iter().enumerate().all(|(i, f)| f[14] == i as u8 && f.len() == 15), "in order");
    assert_eq!(got.len(), 8);
    // Both paths interleave in one ring, in call order.
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 1);
    {
        let mut batch = a.slot_batch().unwrap();
        let mut w = batch.reserve_slot(mac(2)).unwrap();
        w.write(0, &frame_bytes(mac(2), mac(1), &[101])).unwrap();
        w.commit(15).unwrap();
    }
    send(&mut a, vec![frame(&pool, mac(2), mac(1), &[102])]);
    let got = recv_all(&mut b, &pool);
    assert_eq!(got.iter().map(|f| f[14]).collect::<Vec<_>>(), vec![100, 101, 102]);
    assert_eq!(b.stats().rx_errors, 0);
    assert_eq!(a.vni_stats().broken_rings + b.vni_stats().broken_rings, 0);
    assert_eq!(t.seg.ring_backlog(0, 1), Some(0));

    // A port that is no longer ours builds nothing.
    drop(b);
    t.seg.scribble(layout::HEADER_LEN + layout::P_GENERATION, 4, |_| 0x77);
    assert_eq!(a.slot_batch().unwrap_err().kind(), std::io::ErrorKind::NotConnected);
}

// ---- per-peer source-MAC learning ---------------------------------------

#[test]
fn stations_behind_a_port_are_learned_and_get_unicast() {
    let t = TestSegment::new(3, 1500, 64);
    let pool = BufferPool::new(2048, 1024);
    let mut a = t.attach(1);
    let mut bridge = t.attach(2);
    let mut c = t.attach(3);
    let station = [2, 0, 0, 0, 0, 50];
    // Before anything is learned, a frame to the station is flooded.
    send(&mut a, vec![frame(&pool, station, mac(1), b"who?")]);
    assert_eq!(recv_all(&mut bridge, &pool).len(), 1);
    assert_eq!(recv_all(&mut c, &pool).len(), 1);
    assert_eq!(a.vni_stats().flooded, 1);
    assert!(a.slot_batch().unwrap().reserve_slot(station).is_err(), "unknown: cannot be built in place");

    // The station, behind the bridge's port, talks to a.
    send(&mut bridge, vec![frame(&pool, mac(1), station, b"from behind the bridge")]);
    assert_eq!(recv_all(&mut a, &pool).len(), 1);
    assert_eq!(a.stations(), vec![(station, 1)]);
    assert_eq!(a.vni_stats().stations_learned, 1);
    // Frames from a port's own MAC are not entries.
    send(&mut c, vec![frame(&pool, mac(1), mac(3), b"c itself")]);
    assert_eq!(recv_all(&mut a, &pool).len(), 1);
    assert_eq!(a.stations().len(), 1);

    // Unicast to the station now goes to the bridge's port alone.
    send(&mut a, vec![frame(&pool, station, mac(1), b"reply")]);
    let got = recv_all(&mut bridge, &pool);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][14..], b"reply");
    assert!(recv_all(&mut c, &pool).is_empty(), "not flooded");
    assert_eq!(a.vni_stats().flooded, 1);
    assert_eq!(a.vni_stats().learned_unicast, 1);
    // So does a frame built in place.
    {
        let mut batch = a.slot_batch().unwrap();
        let mut w = batch.reserve_slot(station).unwrap();
        assert_eq!(w.peer_mac(), mac(2));
        w.write(0, &frame_bytes(station, mac(1), b"in place")).unwrap();
        w.commit(22).unwrap();
    }
    assert_eq!(recv_all(&mut bridge, &pool), vec![frame_bytes(station, mac(1), b"in place")]);
    assert!(recv_all(&mut c, &pool).is_empty());
    // Broadcast still goes everywhere.
    send(&mut a, vec![frame(&pool, [0xff; 6], mac(1), b"all")]);
    assert_eq!((recv_all(&mut bridge, &pool).len(), recv_all(&mut c, &pool).len()), (1, 1));

    // Another peer sending with the station's address at once does not
    // steal it (it could be a peer hijacking the station's frames)...
    send(&mut c, vec![frame(&pool, mac(1), station, b"mine now")]);
    recv_all(&mut a, &pool);
    assert_eq!(a.stations(), vec![(station, 1)], "a station heard just now stays where it is");
    // ...but a station silent behind its old peer for a while moves.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    send(&mut c, vec![frame(&pool, mac(1), station, b"moved")]);
    recv_all(&mut a, &pool);
    assert_eq!(a.stations(), vec![(station, 2)]);
    send(&mut a, vec![frame(&pool, station, mac(1), b"to c")]);
    assert!(recv_all(&mut bridge, &pool).is_empty());
    assert_eq!(recv_all(&mut c, &pool).len(), 1);

    // A station whose port re-attached (a new generation, maybe no bridge
    // any more) is unknown again: flooded.
    drop(c);
    let mut c2 = t.attach(4);
    send(&mut a, vec![frame(&pool, station, mac(1), b"again?")]);
    assert_eq!(a.vni_stats().flooded, 2);
    assert_eq!(recv_all(&mut bridge, &pool).len(), 1);
    assert_eq!(recv_all(&mut c2, &pool).len(), 1);

    // A port's MAC always wins over a station claiming it.
    send(&mut bridge, vec![frame(&pool, mac(1), mac(4), b"spoof")]);
    recv_all(&mut a, &pool);
    send(&mut a, vec![frame(&pool, mac(4), mac(1), b"to c2")]);
    assert!(recv_all(&mut bridge, &pool).is_empty());
    assert_eq!(recv_all(&mut c2, &pool).len(), 1);
    // Group and zero sources are not learned.
    let before = a.vni_stats().stations_learned;
    send(&mut bridge, vec![frame(&pool, mac(1), [3, 0, 0, 0, 0, 1], b"g"), frame(&pool, mac(1), [0; 6], b"z")]);
    recv_all(&mut a, &pool);
    assert_eq!(a.vni_stats().stations_learned, before);
}

#[test]
fn the_station_table_is_bounded() {
    let t = TestSegment::new(2, 1500, 64);
    let pool = BufferPool::new(2048, 1024);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let total = nagare_dev::vni::STATION_CAPACITY + 100;
    for chunk in (0..total).collect::<Vec<_>>().chunks(64) {
        let frames = chunk.iter().map(|&i| frame(&pool, mac(1), [2, 1, 0, 0, (i >> 8) as u8, i as u8], b"s")).collect();
        send(&mut b, frames);
        recv_all(&mut a, &pool);
    }
    assert_eq!(a.stations().len(), nagare_dev::vni::STATION_CAPACITY);
    assert_eq!(a.vni_stats().stations_evicted, 100);
    // The newest are kept.
    let last = total - 1;
    assert!(a.stations().iter().any(|(m, _)| *m == [2, 1, 0, 0, (last >> 8) as u8, last as u8]));
}

/// A frame whose offload word the receivers would refuse (`meta::decode`)
/// is refused by the sender, counted there, and never published: no
/// receiver counts bad metadata, and the ring goes on whole.
#[test]
fn offloads_that_do_not_fit_their_frame_are_refused_by_the_sender() {
    let t = TestSegment::new(2, 1500, 64);
    let pool = BufferPool::new(2048, 256);
    let mut a = t.attach(1);
    let mut b = t.attach(2);
    let complete_tso = Offload { checksum: ChecksumState::Complete, ..Offload::tcp_segments(1448) };
    let bad = [
        offload_frame(&pool, 3000, 1, Offload::tcp_segments(1461)), // segments past the MTU
        offload_frame(&pool, 3000, 2, Offload::udp_segments(1473)), // datagrams past the MTU
        offload_frame(&pool, 100, 3, Offload::tcp_segments(1461)),  // the same, in one slot
        offload_frame(&pool, 3000, 4, complete_tso),                // segments, checksum complete
        offload_frame(&pool, 100, 5, complete_tso),
    ];
    let good = offload_frame(&pool, 3000, 6, Offload::tcp_segments(1448));
    let want = good.to_vec();
    let mut q: VecDeque<PacketBuf> = bad.into_iter().chain([good]).collect();
    assert_eq!(a.transmit_batch(&mut q, Instant::ZERO).unwrap(), 6);
    assert!(q.is_empty());
    assert_eq!(a.stats().tx_errors, 5);
    assert_eq!(a.vni_stats().tx_bad_metadata, 5);
    assert_eq!(a.stats().tx_frames, 1);
    let got = recv_with_offload(&mut b, &pool);
    assert_eq!(got.len(), 1);
    assert!(got[0].0 == want);
    assert_eq!(got[0].1, Offload::tcp_segments(1448));
    assert_eq!(b.vni_stats().bad_metadata, 0);
    assert_eq!(b.stats().rx_errors, 0);
    drop((a, b, got));
    assert_eq!(pool.in_use(), 0);
}
