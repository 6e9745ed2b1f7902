//! Deterministic TCP scenarios for the RFC cases, in virtual time.
//!
//! Two kinds of harness: [`Net`] wires two interfaces back to back by
//! moving their transmit queues, logs every TCP segment that crosses, and
//! lets a test drop any of them; [`Raw`] puts one interface opposite a
//! peer the test plays by hand, crafting each segment (a `TcpRepr` emitted
//! by nagare-wire, in IPv4 and Ethernet) and parsing what comes back.

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::iface::Error;
use nagare_core::tcp::config::TcpConfig;
use nagare_core::tcp::connection::{ConnectionStats, State};
use nagare_core::tcp::quick_ack::MAX_QUICK_ACKS;
use nagare_core::tcp::{Readiness, TcpEvent, TcpHandle, TcpListenerHandle, TcpSocket};
use nagare_core::{Capabilities, Instant, Interface, InterfaceConfig};
use nagare_wire::{ArpOperation, IpProtocol, Ipv4Addr, TcpFlags, TcpPacket, TcpRepr, TcpSeqNumber};
use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::Duration;

mod common;
use common::*;

const MS: Duration = Duration::from_millis(1);

// ---- segments on the wire ---------------------------------------------------

/// One TCP segment seen on the wire.
#[derive(Clone, Debug)]
struct Seg {
    at: Instant,
    from: Ipv4Addr,
    repr: TcpRepr,
    payload: Vec<u8>,
    /// The segment whose delivery made the sender emit this one (its
    /// sequence number and payload length), if any.
    cause: Option<(TcpSeqNumber, usize)>,
}

impl Seg {
    fn has(&self, flags: TcpFlags) -> bool {
        self.repr.flags.contains(flags)
    }
    fn seq(&self) -> u32 {
        self.repr.seq_number.0
    }
    fn ack(&self) -> Option<u32> {
        self.repr.ack_number.map(|a| a.0)
    }
    fn len(&self) -> usize {
        self.payload.len()
    }
    fn sacks(&self) -> Vec<(u32, u32)> {
        self.repr.sack_ranges.iter().flatten().copied().collect()
    }
    /// A segment with no payload, SYN or FIN (a pure ACK, a probe, a RST).
    fn is_bare(&self) -> bool {
        self.payload.is_empty() && !self.has(TcpFlags::SYN) && !self.has(TcpFlags::FIN)
    }
}

/// The TCP segment in an Ethernet frame, checked (checksum included).
fn parse_tcp(frame: &[u8]) -> Option<(Ipv4Addr, TcpRepr, Vec<u8>)> {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[14..];
    if ip[9] != 6 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let tcp = &ip[ihl..total];
    let packet = TcpPacket::new_checked(tcp).expect("a well-formed TCP header");
    let repr = TcpRepr::parse(&packet, src, dst, true).expect("a TCP segment with a right checksum");
    Some((src, repr, packet.payload().to_vec()))
}

/// A segment from the peer with no options and a full window.
fn repr(src_port: u16, dst_port: u16, seq: u32, ack: Option<u32>, flags: TcpFlags) -> TcpRepr {
    TcpRepr { window_len: 65535, ..TcpRepr::bare(src_port, dst_port, TcpSeqNumber(seq), ack.map(TcpSeqNumber), flags) }
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + usize::from(salt) * 13) % 251) as u8).collect()
}

fn interface(mac: u8, ip: Ipv4Addr, seed: u64) -> Interface {
    let mut config = InterfaceConfig::new(
        nagare_wire::EthernetAddress([2, 0, 0, 0, 0, mac]),
        nagare_wire::Ipv4Cidr::new(ip, 24).unwrap(),
    );
    config.seed = seed;
    config.secrets = nagare_core::Secrets::from_seed(seed);
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 8192))
}

// ---- two interfaces back to back --------------------------------------------

const A_IP: Ipv4Addr = OUR_IP;
const B_IP: Ipv4Addr = PEER_IP;

/// Which interface.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    A,
    B,
}

type Filter = Box<dyn FnMut(&Seg) -> bool>;
/// A frame on the wire and the segment whose delivery caused it.
type InFlight = (PacketBuf, Option<(TcpSeqNumber, usize)>);

struct Net {
    a: Interface,
    b: Interface,
    now: Instant,
    /// Every TCP segment either side sent, delivered or not.
    log: Vec<Seg>,
    /// Whether a segment is delivered (true) or lost.
    filter: Filter,
    /// Frames on the wire: from A, from B, each with its cause.
    wire: [VecDeque<InFlight>; 2],
}

impl Net {
    fn new() -> Net {
        Net {
            a: interface(1, A_IP, 0x1111),
            b: interface(2, B_IP, 0x2222),
            now: Instant::from_secs(1000),
            log: Vec::new(),
            filter: Box::new(|_| true),
            wire: [VecDeque::new(), VecDeque::new()],
        }
    }

    fn iface(&mut self, side: Side) -> &mut Interface {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    fn collect(&mut self, side: Side, cause: Option<(TcpSeqNumber, usize)>) {
        let frames: Vec<PacketBuf> = self.iface(side).tx_queue().drain(..).collect();
        let idx = side as usize;
        for f in frames {
            self.wire[idx].push_back((f, cause));
        }
    }

    /// Carries one frame from `side` to the other side, unless filtered.
    fn carry(&mut self, side: Side) -> bool {
        let Some((frame, cause)) = self.wire[side as usize].pop_front() else {
            return false;
        };
        let other = if side == Side::A { Side::B } else { Side::A };
        let bytes = frame.to_vec();
        let mut delivered_seg = None;
        if let Some((from, repr, payload)) = parse_tcp(&bytes) {
            let seg = Seg { at: self.now, from, repr, payload, cause };
            let pass = (self.filter)(&seg);
            let key = (seg.repr.seq_number, seg.payload.len());
            self.log.push(seg);
            if !pass {
                return true;
            }
            delivered_seg = Some(key);
        }
        let now = self.now;
        self.iface(other).receive(frame, now);
        self.collect(other, delivered_seg);
        true
    }

    /// Moves frames both ways until nothing is left on the wire.
    fn settle(&mut self) {
        for _ in 0..1_000_000 {
            self.collect(Side::A, None);
            self.collect(Side::B, None);
            let moved_a = self.carry(Side::A);
            let moved_b = self.carry(Side::B);
            if !moved_a && !moved_b {
                return;
            }
        }
        panic!("frames kept flowing at {:?}", self.now);
    }

    fn next_event(&self) -> Option<Instant> {
        [self.a.poll_at(), self.b.poll_at()].into_iter().flatten().min()
    }

    /// Runs timers and moves frames up to `end`, then sets the clock to it.
    fn run_until(&mut self, end: Instant) {
        let mut spins = 0;
        loop {
            self.settle();
            match self.next_event() {
                Some(t) if t <= end => {
                    if t <= self.now {
                        spins += 1;
                        assert!(spins < 10_000, "a timer due at {t:?} keeps firing at {:?}", self.now);
                    } else {
                        spins = 0;
                        self.now = t;
                    }
                    let now = self.now;
                    self.a.poll(now);
                    self.b.poll(now);
                }
                _ => {
                    self.now = end;
                    self.a.poll(end);
                    self.b.poll(end);
                    self.settle();
                    return;
                }
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        self.run_until(end);
    }

    /// Runs to the next timer event (at most `limit`); false if none.
    fn step(&mut self, limit: Instant) -> bool {
        self.settle();
        match self.next_event() {
            Some(t) if t <= limit => {
                self.now = self.now.max(t);
                let now = self.now;
                self.a.poll(now);
                self.b.poll(now);
                self.settle();
                true
            }
            _ => false,
        }
    }

    /// Segments sent by `side` since log index `from`.
    fn sent_by(&self, side: Side, from: usize) -> Vec<Seg> {
        let ip = if side == Side::A { A_IP } else { B_IP };
        self.log[from..].iter().filter(|s| s.from == ip).cloned().collect()
    }

    /// A listens on `port`; B connects; returns (A's accepted handle, B's).
    fn connect_pair(&mut self, port: u16) -> (TcpHandle, TcpHandle) {
        let l = self.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), 16).unwrap();
        let hb = self.b.tcp().connect(SocketAddrV4::new(A_IP, port), 0, self.now).unwrap();
        self.settle();
        let ha = self.a.tcp().accept(l).unwrap().expect("the handshake completed");
        assert_eq!(self.a.tcp_ref().state(ha), Ok(State::Established));
        assert_eq!(self.b.tcp_ref().state(hb), Ok(State::Established));
        (ha, hb)
    }

    /// Spends B's quick ACKs of a connection's first data: A sends full
    /// segments to B one at a time, B reads them, until B's ACK of one
    /// waits for the delayed-ACK timer. The data that follows meets the
    /// rules of a running connection.
    fn spend_quick_acks(&mut self, ha: TcpHandle, hb: TcpHandle) {
        for _ in 0..=MAX_QUICK_ACKS {
            let (mark, t) = (self.log.len(), self.now);
            self.a.tcp().send(ha, &[1u8; 1448], t).unwrap();
            self.run_for(Duration::from_millis(50));
            self.read_all(Side::B, hb, &mut Vec::new());
            if self.sent_by(Side::B, mark).first().is_some_and(|ack| ack.at > t) {
                return;
            }
        }
        panic!("every ACK went at once");
    }

    /// Reads everything readable on `h` into `out`; true at end of stream.
    fn read_all(&mut self, side: Side, h: TcpHandle, out: &mut Vec<u8>) -> bool {
        let now = self.now;
        let mut buf = [0u8; 4096];
        loop {
            match self.iface(side).tcp().recv(h, &mut buf, now) {
                Ok(0) => return true,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv on {side:?} failed: {e}"),
            }
        }
    }

    /// Sends `data` from `from` and reads it on the other side as it
    /// arrives, in virtual time up to `limit` from now; returns what arrived.
    fn transfer(&mut self, from: Side, hs: TcpHandle, hr: TcpHandle, data: &[u8], limit: Duration) -> Vec<u8> {
        let to = if from == Side::A { Side::B } else { Side::A };
        let end = self.now + limit;
        let mut sent = 0;
        let mut got = Vec::new();
        loop {
            while sent < data.len() {
                let now = self.now;
                match self.iface(from).tcp().send(hs, &data[sent..], now) {
                    Ok(0) | Err(Error::WouldBlock) => break,
                    Ok(n) => sent += n,
                    Err(e) => panic!("send failed: {e}"),
                }
            }
            self.settle();
            self.read_all(to, hr, &mut got);
            if got.len() >= data.len() {
                return got;
            }
            if !self.step(end) {
                panic!("transfer stalled at {:?}: {} of {} sent, {} received", self.now, sent, data.len(), got.len());
            }
        }
    }
}

// ---- one interface and a hand-played peer -----------------------------------

struct Raw {
    iface: Interface,
    now: Instant,
    ident: u16,
}

impl Raw {
    fn new() -> Raw {
        let mut iface = interface(1, OUR_IP, 0x5eed);
        let now = Instant::from_secs(1000);
        // The peer asks for us first, so we know its address (RFC 826).
        feed(&mut iface, &arp(ArpOperation::Request), 2048, now);
        iface.tx_queue().clear();
        Raw { iface, now, ident: 1 }
    }

    /// Sends one segment from the peer.
    fn send(&mut self, repr: TcpRepr, payload: &[u8]) {
        let frame = self.frame(repr, payload);
        let now = self.now;
        feed(&mut self.iface, &frame, 2048, now);
    }

    /// The Ethernet frame of one segment from the peer.
    fn frame(&mut self, repr: TcpRepr, payload: &[u8]) -> Vec<u8> {
        let repr = TcpRepr { payload_len: payload.len(), ..repr };
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut bytes, payload, PEER_IP, OUR_IP).unwrap();
        self.ident = self.ident.wrapping_add(1);
        ipv4(IpProtocol::Tcp, &bytes, 0, false, self.ident)
    }

    /// The TCP segments the interface sent since the last call.
    fn take(&mut self) -> Vec<Seg> {
        let now = self.now;
        let frames: Vec<PacketBuf> = self.iface.tx_queue().drain(..).collect();
        frames
            .iter()
            .filter_map(|f| parse_tcp(&f.to_vec()))
            .map(|(from, repr, payload)| Seg { at: now, from, repr, payload, cause: None })
            .collect()
    }

    /// Exactly one segment was sent; returns it.
    fn take_one(&mut self) -> Seg {
        let mut segs = self.take();
        assert_eq!(segs.len(), 1, "expected one segment, got {segs:#?}");
        segs.remove(0)
    }

    /// Runs the timers up to `end`, collecting what is sent on the way.
    fn run_until(&mut self, end: Instant) -> Vec<Seg> {
        let mut out = self.take();
        let mut spins = 0;
        while let Some(t) = self.iface.poll_at() {
            if t > end {
                break;
            }
            if t <= self.now {
                spins += 1;
                assert!(spins < 10_000, "a timer due at {t:?} keeps firing");
            } else {
                self.now = t;
            }
            let now = self.now;
            self.iface.poll(now);
            out.extend(self.take());
        }
        self.now = self.now.max(end);
        let now = self.now;
        self.iface.poll(now);
        out.extend(self.take());
        out
    }

    fn run_for(&mut self, d: Duration) -> Vec<Seg> {
        let end = self.now + d;
        self.run_until(end)
    }
}

/// The peer's side of one connection, played by the test.
struct Peer {
    raw: Raw,
    h: TcpHandle,
    /// Our port and the peer's.
    port: u16,
    peer_port: u16,
    /// The peer's next sequence number.
    seq: TcpSeqNumber,
    /// The next sequence number the peer expects from us.
    ack: TcpSeqNumber,
    /// The peer's timestamp clock, if timestamps are on.
    ts: Option<u32>,
    /// Last timestamp value we sent.
    our_ts: u32,
}

impl Peer {
    /// Our side connects; the peer answers with SYN-ACK (with timestamps if
    /// `ts`, and window scale 0 so windows read directly); established.
    fn connected(ts: bool) -> Peer {
        Peer::connected_with(ts, |_| {})
    }

    /// As `connected`, with our side's settings changed by `setup` first;
    /// the peer offers window scaling and SACK only if our SYN did.
    fn connected_with(ts: bool, setup: impl FnOnce(&mut TcpConfig)) -> Peer {
        let mut raw = Raw::new();
        setup(raw.iface.tcp().defaults_mut());
        let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 0, raw.now).unwrap();
        let syn = raw.take_one();
        let mut synack =
            repr(80, syn.repr.src_port, 70_000, Some(syn.seq().wrapping_add(1)), TcpFlags::SYN | TcpFlags::ACK);
        synack.max_seg_size = Some(1460);
        synack.window_scale = syn.repr.window_scale.map(|_| 0);
        synack.sack_permitted = syn.repr.sack_permitted;
        if ts {
            synack.timestamp = Some((5000, syn.repr.timestamp.unwrap().0));
        }
        raw.send(synack, &[]);
        let ack = raw.take_one();
        assert!(ack.has(TcpFlags::ACK) && !ack.has(TcpFlags::SYN));
        assert_eq!(raw.iface.tcp_ref().state(h), Ok(State::Established));
        Peer {
            port: syn.repr.src_port,
            peer_port: 80,
            seq: TcpSeqNumber(70_001),
            ack: TcpSeqNumber(syn.seq().wrapping_add(1)),
            ts: ts.then_some(5000),
            our_ts: ack.repr.timestamp.map_or(0, |t| t.0),
            raw,
            h,
        }
    }

    /// A segment from the peer at its current sequence, acknowledging
    /// everything we sent.
    fn seg(&self, flags: TcpFlags) -> TcpRepr {
        let mut r = repr(self.peer_port, self.port, self.seq.0, Some(self.ack.0), flags);
        if let Some(ts) = self.ts {
            r.timestamp = Some((ts, self.our_ts));
        }
        r
    }

    /// Sends `payload` (with `flags`) at the peer's sequence and moves it on.
    fn send(&mut self, flags: TcpFlags, payload: &[u8]) {
        let r = self.seg(flags);
        self.raw.send(r, payload);
        self.seq +=
            payload.len() + usize::from(flags.contains(TcpFlags::SYN)) + usize::from(flags.contains(TcpFlags::FIN));
    }

    fn tick(&mut self, d: Duration) -> Vec<Seg> {
        if let Some(ts) = &mut self.ts {
            *ts = ts.wrapping_add(d.as_millis() as u32);
        }
        self.raw.run_for(d)
    }

    /// Takes what we sent and notes our latest timestamp and sequence.
    fn take(&mut self) -> Vec<Seg> {
        let segs = self.raw.take();
        for s in &segs {
            if let Some((tsval, _)) = s.repr.timestamp {
                self.our_ts = tsval;
            }
        }
        segs
    }

    fn state(&self) -> Result<State, Error> {
        self.raw.iface.tcp_ref().state(self.h)
    }

    /// Spends our quick ACKs of the connection's first data: one-byte
    /// segments, read as they come, until one's ACK waits for the
    /// delayed-ACK timer, which then fires. The data that follows meets
    /// the rules of a running connection.
    fn spend_quick_acks(&mut self) {
        let mut buf = [0u8; 16];
        for _ in 0..=MAX_QUICK_ACKS {
            self.send(TcpFlags::ACK | TcpFlags::PSH, b"q");
            let now = self.raw.now;
            assert_eq!(self.raw.iface.tcp().recv(self.h, &mut buf, now), Ok(1));
            if self.take().is_empty() {
                assert_eq!(self.tick(MS * 50).len(), 1, "the delayed ACK");
                return;
            }
        }
        panic!("every ACK went at once");
    }

    fn rcv_nxt(&self) -> u32 {
        self.seq.0
    }
}

// ---- 1. three-way handshake ---------------------------------------------------

#[test]
fn active_open_offers_every_option_and_takes_the_peers() {
    let mut raw = Raw::new();
    let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 0, raw.now).unwrap();
    assert_eq!(raw.iface.tcp_ref().state(h), Ok(State::SynSent));
    let syn = raw.take_one();
    assert_eq!(syn.repr.flags, TcpFlags::SYN, "a SYN alone");
    assert_eq!(syn.repr.ack_number, None);
    assert_eq!(syn.repr.max_seg_size, Some(1460), "MSS = MTU - 40");
    // The 6 MiB that autotuning may grow the receive buffer to needs a
    // shift of 7 to be offered whole.
    assert_eq!(syn.repr.window_scale, Some(7));
    assert!(syn.repr.sack_permitted);
    let (tsval, tsecr) = syn.repr.timestamp.expect("timestamps offered");
    assert_eq!(tsecr, 0);
    assert_eq!(syn.repr.window_len, 65535, "the window of a SYN is not scaled");
    assert!(syn.payload.is_empty());

    let mut synack =
        repr(80, syn.repr.src_port, 4_000_000_000, Some(syn.seq().wrapping_add(1)), TcpFlags::SYN | TcpFlags::ACK);
    synack.max_seg_size = Some(1200);
    synack.window_scale = Some(7);
    synack.sack_permitted = true;
    synack.timestamp = Some((777, tsval));
    synack.window_len = 1000;
    raw.send(synack, &[]);
    let ack = raw.take_one();
    assert_eq!(ack.repr.flags, TcpFlags::ACK);
    assert_eq!(ack.seq(), syn.seq().wrapping_add(1));
    assert_eq!(ack.ack(), Some(4_000_000_001));
    assert_eq!(ack.repr.timestamp.map(|t| t.1), Some(777), "the peer's TSval echoed");
    assert_eq!(ack.repr.window_scale, None, "options of the SYN only in SYNs");
    assert_eq!(ack.repr.max_seg_size, None);
    assert_eq!(ack.repr.window_len, ((256 * 1024) >> 7) as u16, "the window is scaled from now on");

    assert_eq!(raw.iface.tcp_ref().state(h), Ok(State::Established));
    let c = raw.iface.tcp_ref().connection(h).unwrap();
    assert_eq!(c.negotiated(), (true, true, true, 7, 7));
    assert_eq!(c.send_mss(), 1200);
    // The SYN-ACK's window is not scaled; later ones are.
    assert_eq!(c.send_window(), 1000);
    let mut upd = repr(80, syn.repr.src_port, 4_000_000_001, Some(syn.seq().wrapping_add(1)), TcpFlags::ACK);
    upd.window_len = 1000;
    upd.timestamp = Some((778, tsval));
    raw.send(upd, &[]);
    assert_eq!(raw.iface.tcp_ref().connection(h).unwrap().send_window(), 1000 << 7);
}

#[test]
fn a_buffer_resized_before_the_syn_ack_keeps_the_window_scale_the_syn_offered() {
    let mut raw = Raw::new();
    let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 0, raw.now).unwrap();
    let syn = raw.take_one();
    assert_eq!(syn.repr.window_scale, Some(7));
    // Sized down while the SYN is out (as an inet server sizes a new
    // connection to its client's budget): 16 KiB alone would need no shift.
    raw.iface.tcp().set_recv_buffer(h, 16 * 1024, raw.now).unwrap();
    let mut synack =
        repr(80, syn.repr.src_port, 4_000_000_000, Some(syn.seq().wrapping_add(1)), TcpFlags::SYN | TcpFlags::ACK);
    synack.window_scale = Some(7);
    synack.window_len = 1000;
    raw.send(synack, &[]);
    let ack = raw.take_one();
    assert_eq!(raw.iface.tcp_ref().connection(h).unwrap().negotiated().3, 7, "the shift the SYN offered");
    // The peer multiplies the field by 2^7: what it reads must be the
    // window, not twice or 128 times it.
    assert_eq!(usize::from(ack.repr.window_len) << 7, 16 * 1024);
    // A peer that sends past that edge anyway has the excess counted and
    // dropped; the window's worth is kept.
    for i in 0..17u32 {
        let seg = repr(80, syn.repr.src_port, 4_000_000_001 + i * 1000, Some(syn.seq().wrapping_add(1)), TcpFlags::ACK);
        raw.send(seg, &[7u8; 1000]);
    }
    let c = raw.iface.tcp_ref().connection(h).unwrap();
    assert_eq!(c.stats().beyond_window_bytes, 17_000 - 16 * 1024);
    assert_eq!(c.recv_queued(), 16 * 1024);
}

#[test]
fn passive_open_answers_options_in_kind() {
    let mut raw = Raw::new();
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();

    // A SYN with every option.
    let mut syn = repr(40000, 80, 9000, None, TcpFlags::SYN);
    syn.max_seg_size = Some(1400);
    syn.window_scale = Some(2);
    syn.sack_permitted = true;
    syn.timestamp = Some((1000, 0));
    raw.send(syn, &[]);
    let synack = raw.take_one();
    assert_eq!(synack.repr.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(synack.ack(), Some(9001));
    assert_eq!(synack.repr.max_seg_size, Some(1460));
    assert_eq!(synack.repr.window_scale, Some(7));
    assert!(synack.repr.sack_permitted);
    assert_eq!(synack.repr.timestamp.map(|t| t.1), Some(1000), "TSecr echoes the SYN's TSval");
    assert!(raw.iface.tcp().accept(l).unwrap().is_none(), "not acceptable before the handshake completes");
    let mut ack = repr(40000, 80, 9001, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK);
    ack.timestamp = Some((1001, synack.repr.timestamp.unwrap().0));
    ack.window_len = 100;
    raw.send(ack, &[]);
    assert!(raw.take().is_empty(), "nothing to say to the final ACK");
    let h = raw.iface.tcp().accept(l).unwrap().expect("accepted");
    let c = raw.iface.tcp_ref().connection(h).unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.negotiated(), (true, true, true, 7, 2));
    assert_eq!(c.send_mss(), 1400);
    assert_eq!(c.send_window(), 400, "the ACK's window is scaled by the peer's shift");

    // A SYN with no option at all: none in the answer, RFC defaults.
    raw.send(repr(40001, 80, 5, None, TcpFlags::SYN), &[]);
    let synack = raw.take_one();
    assert_eq!(synack.repr.max_seg_size, Some(1460), "MSS is always sent");
    assert_eq!(synack.repr.window_scale, None);
    assert!(!synack.repr.sack_permitted);
    assert_eq!(synack.repr.timestamp, None);
    raw.send(repr(40001, 80, 6, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK), &[]);
    let h = raw.iface.tcp().accept(l).unwrap().expect("accepted");
    let c = raw.iface.tcp_ref().connection(h).unwrap();
    assert_eq!(c.negotiated(), (false, false, false, 0, 0));
    assert_eq!(c.send_mss(), 536, "RFC 9293's default MSS");
}

#[test]
fn handshake_between_two_stacks_negotiates_the_same_options() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    let syn = net.log.iter().find(|s| s.has(TcpFlags::SYN) && !s.has(TcpFlags::ACK)).unwrap().clone();
    let synack = net.log.iter().find(|s| s.has(TcpFlags::SYN) && s.has(TcpFlags::ACK)).unwrap().clone();
    assert_eq!(syn.from, B_IP);
    assert_eq!(synack.ack(), Some(syn.seq().wrapping_add(1)));
    assert_eq!(net.log.len(), 3, "three segments: {:#?}", net.log);
    let ca = net.a.tcp_ref().connection(ha).unwrap();
    let cb = net.b.tcp_ref().connection(hb).unwrap();
    assert_eq!(ca.negotiated(), (true, true, true, 7, 7));
    assert_eq!(cb.negotiated(), (true, true, true, 7, 7));
    assert_eq!(ca.send_mss(), 1460);
    assert_eq!(cb.send_mss(), 1460);
    // The handshake gave an RTT sample on both sides.
    assert!(ca.srtt().is_some() && cb.srtt().is_some());
    let data = pattern(100_000, 1);
    assert_eq!(net.transfer(Side::B, hb, ha, &data, Duration::from_secs(5)), data);
}

#[test]
fn isn_differs_per_four_tuple_and_follows_the_clock() {
    let mut raw = Raw::new();
    let now = raw.now;
    let mut isns = Vec::new();
    for port in [80, 81, 82] {
        raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, port), 50000, now).unwrap();
        isns.push(raw.take_one().seq());
    }
    let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 50001, now).unwrap();
    isns.push(raw.take_one().seq());
    for i in 0..isns.len() {
        for j in 0..i {
            assert_ne!(isns[i], isns[j], "two four-tuples got the same ISN");
            // A keyed hash, not a counter: far apart.
            assert!(isns[i].wrapping_sub(isns[j]).min(isns[j].wrapping_sub(isns[i])) > 1000);
        }
    }
    // The same four-tuple 400 us later: the clock part moved 100 ticks.
    raw.iface.tcp().abort(h, now).unwrap();
    raw.take();
    raw.now += Duration::from_micros(400);
    raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 50001, raw.now).unwrap();
    assert_eq!(raw.take_one().seq().wrapping_sub(isns[3]), 100);
    // So does the listener's SYN-ACK.
    raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 8).unwrap();
    raw.send(repr(40000, 7, 1, None, TcpFlags::SYN), &[]);
    let a = raw.take_one().seq();
    raw.send(repr(40001, 7, 1, None, TcpFlags::SYN), &[]);
    let b = raw.take_one().seq();
    assert_ne!(a, b);
}

#[test]
fn lost_synack_is_sent_again_when_the_syn_repeats() {
    let mut raw = Raw::new();
    raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    raw.send(repr(40000, 80, 9000, None, TcpFlags::SYN), &[]);
    let first = raw.take_one();
    // The SYN-ACK is lost; the peer's SYN comes again.
    raw.now += MS * 300;
    raw.send(repr(40000, 80, 9000, None, TcpFlags::SYN), &[]);
    let again = raw.take_one();
    assert_eq!(again.repr.flags, TcpFlags::SYN | TcpFlags::ACK, "a SYN-ACK, not a bare ACK: {again:?}");
    assert_eq!(again.seq(), first.seq());
    assert_eq!(again.ack(), Some(9001));
}

// ---- 2. simultaneous open -----------------------------------------------------

#[test]
fn simultaneous_open_reaches_established_on_both_sides() {
    let mut net = Net::new();
    let now = net.now;
    let ha = net.a.tcp().connect(SocketAddrV4::new(B_IP, 5000), 6000, now).unwrap();
    let hb = net.b.tcp().connect(SocketAddrV4::new(A_IP, 6000), 5000, now).unwrap();
    net.settle();
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Established));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Established));
    // Figure 8 of RFC 9293: two SYNs cross, then two SYN-ACKs.
    let syns: Vec<&Seg> = net.log.iter().filter(|s| s.repr.flags == TcpFlags::SYN).collect();
    let synacks: Vec<&Seg> = net.log.iter().filter(|s| s.repr.flags == TcpFlags::SYN | TcpFlags::ACK).collect();
    assert_eq!(syns.len(), 2, "{:#?}", net.log);
    assert_eq!(synacks.len(), 2, "{:#?}", net.log);
    for sa in &synacks {
        let own_syn = syns.iter().find(|s| s.from == sa.from).unwrap();
        let their_syn = syns.iter().find(|s| s.from != sa.from).unwrap();
        assert_eq!(sa.seq(), own_syn.seq(), "the SYN-ACK repeats the SYN's sequence number");
        assert_eq!(sa.ack(), Some(their_syn.seq().wrapping_add(1)));
    }
    assert!(net.log.iter().all(|s| !s.has(TcpFlags::RST)));
    for (c, _) in [(net.a.tcp_ref().connection(ha).unwrap(), 0), (net.b.tcp_ref().connection(hb).unwrap(), 0)] {
        assert_eq!(c.negotiated(), (true, true, true, 7, 7));
    }
    let ab = pattern(50_000, 2);
    let ba = pattern(30_000, 3);
    assert_eq!(net.transfer(Side::A, ha, hb, &ab, Duration::from_secs(5)), ab);
    assert_eq!(net.transfer(Side::B, hb, ha, &ba, Duration::from_secs(5)), ba);
}

// ---- 3. RST -------------------------------------------------------------------

#[test]
fn segments_to_a_closed_port_get_rst() {
    let mut raw = Raw::new();
    // A SYN: RST/ACK acknowledging it, sequence 0.
    raw.send(repr(40000, 81, 1000, None, TcpFlags::SYN), &[]);
    let rst = raw.take_one();
    assert_eq!(rst.repr.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!((rst.seq(), rst.ack()), (0, Some(1001)));
    assert_eq!((rst.repr.src_port, rst.repr.dst_port), (81, 40000));
    // Data and FIN without ACK: ack = seq + len (+1 for the FIN).
    raw.send(repr(40000, 81, 2000, None, TcpFlags::PSH | TcpFlags::FIN), &[1; 10]);
    let rst = raw.take_one();
    assert_eq!((rst.seq(), rst.ack()), (0, Some(2011)));
    // A segment with ACK: RST with seq = its ack, no ACK of ours.
    raw.send(repr(40000, 81, 3000, Some(7777), TcpFlags::ACK), &[2; 5]);
    let rst = raw.take_one();
    assert_eq!(rst.repr.flags, TcpFlags::RST);
    assert_eq!(rst.seq(), 7777);
    // A RST is never answered.
    raw.send(repr(40000, 81, 3000, Some(7777), TcpFlags::RST | TcpFlags::ACK), &[]);
    assert!(raw.take().is_empty());
    let c = raw.iface.counters();
    assert_eq!(c.tcp_resets_sent, 3);
    assert_eq!(c.drop_tcp_no_socket, 4);
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    let mut net = Net::new();
    let h = net.b.tcp().connect(SocketAddrV4::new(A_IP, 4444), 0, net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp_ref().state(h), Ok(State::Closed));
    let rst = net.log.iter().find(|s| s.has(TcpFlags::RST)).expect("a RST came back");
    assert_eq!(rst.from, A_IP);
    let mut buf = [0u8; 8];
    assert_eq!(net.b.tcp().recv(h, &mut buf, net.now), Err(Error::ConnectionRefused));
    assert_eq!(net.b.tcp().send(h, b"x", net.now), Err(Error::ConnectionRefused));
    // Nothing retransmits later.
    let before = net.log.len();
    net.run_for(Duration::from_secs(30));
    assert_eq!(net.log.len(), before);
    net.b.tcp().close(h, net.now).unwrap();
    assert_eq!(net.b.tcp_ref().connection_count(), 0);
}

#[test]
fn close_while_opening_deletes_the_connection_and_its_queued_data() {
    let mut raw = Raw::new();
    let before = raw.iface.pool().in_use();
    let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 0, raw.now).unwrap();
    raw.take_one();
    assert_eq!(raw.iface.tcp().send(h, &[7u8; 6000], raw.now), Ok(6000), "queued before the handshake");
    assert!(raw.iface.pool().in_use() > before);
    // RFC 9293 3.10.4, CLOSE in SYN-SENT: delete the TCB. Kept instead, it
    // held its data through minutes of SYN retries with no owner left.
    raw.iface.tcp().close(h, raw.now).unwrap();
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0);
    assert_eq!(raw.iface.pool().in_use(), before, "the queued data is let go");
    assert!(raw.take().is_empty(), "nothing is sent for a connection never opened");
}

#[test]
fn syn_sent_ignores_rst_without_an_acceptable_ack() {
    let mut raw = Raw::new();
    let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 80), 0, raw.now).unwrap();
    let syn = raw.take_one();
    let port = syn.repr.src_port;
    // RST without ACK, and RST acknowledging something else: ignored.
    raw.send(repr(80, port, 0, None, TcpFlags::RST), &[]);
    raw.send(repr(80, port, 0, Some(syn.seq().wrapping_add(5)), TcpFlags::RST | TcpFlags::ACK), &[]);
    assert_eq!(raw.iface.tcp_ref().state(h), Ok(State::SynSent));
    assert!(raw.take().is_empty());
    // An ACK of something never sent: RST with seq = that ack.
    raw.send(repr(80, port, 0, Some(syn.seq().wrapping_add(5)), TcpFlags::ACK), &[]);
    let rst = raw.take_one();
    assert_eq!(rst.repr.flags, TcpFlags::RST);
    assert_eq!(rst.seq(), syn.seq().wrapping_add(5));
    assert_eq!(raw.iface.tcp_ref().state(h), Ok(State::SynSent));
}

#[test]
fn rst_at_rcv_nxt_resets_the_connection() {
    let mut p = Peer::connected(true);
    let r = p.seg(TcpFlags::RST | TcpFlags::ACK);
    p.raw.send(r, &[]);
    assert!(p.take().is_empty(), "a RST is not answered");
    assert_eq!(p.state(), Ok(State::Closed));
    let now = p.raw.now;
    let mut buf = [0u8; 4];
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Err(Error::ConnectionReset));
    assert_eq!(p.raw.iface.tcp().send(p.h, b"x", now), Err(Error::ConnectionReset));
    // A RST with no ACK bit at rcv_nxt resets as well (RFC 9293 3.10.7.4).
    let mut p = Peer::connected(false);
    let r = repr(p.peer_port, p.port, p.rcv_nxt(), None, TcpFlags::RST);
    p.raw.send(r, &[]);
    assert_eq!(p.state(), Ok(State::Closed));
}

/// A RST that reaches a connection in TIME-WAIT (from a peer that has
/// forgotten it, answering a late ACK) ends the wait, not the stream: the
/// application still reads what arrived, then the end, as on Linux, where
/// the application's socket has left the connection by then.
#[test]
fn rst_in_time_wait_leaves_the_data_and_the_end_to_read() {
    let mut p = Peer::connected(false);
    let now = p.raw.now;
    p.raw.iface.tcp().shutdown(p.h, now).unwrap();
    assert!(p.take().iter().any(|s| s.has(TcpFlags::FIN)), "our FIN");
    p.ack += 1;
    p.send(TcpFlags::ACK, &pattern(1000, 3));
    p.send(TcpFlags::ACK | TcpFlags::FIN, &[]);
    p.take();
    assert_eq!(p.state(), Ok(State::TimeWait));
    let r = p.seg(TcpFlags::RST);
    p.raw.send(r, &[]);
    assert!(p.take().is_empty(), "a RST is not answered");
    let mut buf = [0u8; 2000];
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(1000));
    assert_eq!(&buf[..1000], &pattern(1000, 3)[..]);
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(0), "the end, not a reset");
}

#[test]
fn rst_in_window_but_not_at_rcv_nxt_gets_a_challenge_ack() {
    let mut p = Peer::connected(true);
    let r = repr(p.peer_port, p.port, p.rcv_nxt().wrapping_add(1000), None, TcpFlags::RST);
    p.raw.send(r, &[]);
    let ack = p.take().pop().expect("a challenge ACK");
    assert_eq!(ack.repr.flags, TcpFlags::ACK);
    assert_eq!(ack.ack(), Some(p.rcv_nxt()), "the challenge ACK tells the exact rcv_nxt");
    assert_eq!(ack.seq(), p.ack.0);
    assert_eq!(p.state(), Ok(State::Established));
    let c = p.raw.iface.tcp_ref().connection(p.h).unwrap();
    assert_eq!(c.stats().challenge_acks, 1);
    assert_eq!(p.raw.iface.counters().tcp_challenged, 1);
    // The connection still works both ways.
    p.send(TcpFlags::PSH | TcpFlags::ACK, b"still here");
    let now = p.raw.now;
    let mut buf = [0u8; 32];
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(10));
    // The attacker's blind guesses are rate-limited: a burst of 50 gets at
    // most one more ACK within the limit's interval.
    let before = p.raw.iface.tcp_ref().connection(p.h).unwrap().stats().challenge_acks;
    for k in 0..50u32 {
        let r = repr(p.peer_port, p.port, p.rcv_nxt().wrapping_add(100 + k), None, TcpFlags::RST);
        p.raw.send(r, &[]);
    }
    let after = p.raw.iface.tcp_ref().connection(p.h).unwrap().stats().challenge_acks;
    assert!(after - before <= 1, "{} challenge ACKs for a burst", after - before);
    assert_eq!(p.state(), Ok(State::Established));
}

#[test]
fn rst_outside_the_window_is_ignored() {
    let mut p = Peer::connected(true);
    for seq in [p.rcv_nxt().wrapping_sub(1), p.rcv_nxt().wrapping_add(10_000_000), p.rcv_nxt() ^ 0x8000_0000] {
        let r = repr(p.peer_port, p.port, seq, Some(p.ack.0), TcpFlags::RST | TcpFlags::ACK);
        p.raw.send(r, &[]);
        assert!(p.take().is_empty(), "nothing answers an out-of-window RST");
        assert_eq!(p.state(), Ok(State::Established));
    }
    assert_eq!(p.raw.iface.tcp_ref().connection(p.h).unwrap().stats().challenge_acks, 0);
}

#[test]
fn syn_on_an_established_connection_gets_a_challenge_ack() {
    let mut p = Peer::connected(true);
    // In the window and outside it: RFC 5961 4.2 challenges either way.
    for (k, seq) in [p.rcv_nxt().wrapping_add(5), p.rcv_nxt().wrapping_add(50_000_000)].into_iter().enumerate() {
        p.tick(MS * 100);
        let mut r = repr(p.peer_port, p.port, seq, None, TcpFlags::SYN);
        r.timestamp = p.ts.map(|t| (t, 0));
        p.raw.send(r, &[]);
        let segs = p.take();
        assert_eq!(segs.len(), 1, "case {k}: {segs:#?}");
        assert_eq!(segs[0].repr.flags, TcpFlags::ACK, "case {k}");
        assert_eq!(segs[0].ack(), Some(p.rcv_nxt()), "case {k}");
        assert_eq!(p.state(), Ok(State::Established), "case {k}");
    }
    assert!(p.raw.iface.counters().tcp_challenged >= 1);
}

#[test]
fn ack_of_unsent_data_is_dropped_and_answered() {
    let mut p = Peer::connected(true);
    let mut r = p.seg(TcpFlags::PSH | TcpFlags::ACK);
    r.ack_number = Some(p.ack + 1000);
    p.raw.send(r, b"data riding on a bogus ack");
    let segs = p.take();
    assert_eq!(segs.len(), 1, "{segs:#?}");
    assert_eq!(segs[0].ack(), Some(p.rcv_nxt()), "the data was not taken");
    let now = p.raw.now;
    let mut buf = [0u8; 64];
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Err(Error::WouldBlock));
    assert_eq!(p.state(), Ok(State::Established));
    // The same data with a right ACK goes through.
    p.send(TcpFlags::PSH | TcpFlags::ACK, b"data riding on a right ack");
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(26));
}

#[test]
fn abort_sends_rst_and_forgets_the_connection() {
    let mut p = Peer::connected(true);
    let now = p.raw.now;
    p.raw.iface.tcp().send(p.h, b"unacknowledged", now).unwrap();
    let data = p.take();
    assert_eq!(data.len(), 1);
    p.raw.iface.tcp().abort(p.h, now).unwrap();
    let rst = p.take();
    assert_eq!(rst.len(), 1, "{rst:#?}");
    assert!(rst[0].has(TcpFlags::RST));
    // Sequence just past what was sent: acceptable to the peer.
    assert_eq!(rst[0].seq(), p.ack.0.wrapping_add(14));
    assert_eq!(p.raw.iface.tcp_ref().connection_count(), 0);
    assert_eq!(p.raw.iface.tcp_ref().state(p.h), Err(Error::InvalidHandle));
    // Nothing follows: no retransmission, no timers.
    assert!(p.raw.run_for(Duration::from_secs(100)).is_empty());
    assert_eq!(p.raw.iface.poll_at(), None);
}

#[test]
fn rst_after_a_retransmission_timeout_uses_the_highest_sequence_sent() {
    let mut p = Peer::connected(false);
    let now = p.raw.now;
    p.raw.iface.tcp().send(p.h, &[5u8; 3000], now).unwrap();
    let first = p.take();
    assert_eq!(first.iter().map(Seg::len).sum::<usize>(), 3000);
    // Nothing is acknowledged; the RTO fires and goes back to snd_una.
    let rtx = p.tick(Duration::from_secs(1));
    assert!(!rtx.is_empty());
    p.raw.iface.tcp().abort(p.h, p.raw.now).unwrap();
    let rst = p.take();
    assert_eq!(rst.len(), 1);
    assert_eq!(rst[0].seq(), p.ack.0.wrapping_add(3000), "RST from snd_max, in the peer's window");
}

#[test]
fn rst_in_syn_received_drops_the_half_open_connection() {
    let mut raw = Raw::new();
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    raw.send(repr(40000, 80, 100, None, TcpFlags::SYN), &[]);
    raw.take_one();
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    raw.send(repr(40000, 80, 101, None, TcpFlags::RST), &[]);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0);
    // The half-open slot is free again: the next SYN is no cookie.
    raw.send(repr(40001, 80, 100, None, TcpFlags::SYN), &[]);
    let synack = raw.take_one();
    assert!(synack.repr.window_scale.is_none() && raw.iface.counters().tcp_syn_cookies_sent == 0);
    assert!(raw.iface.tcp().accept(l).unwrap().is_none());
}

#[test]
fn resets_carry_timestamps_when_the_connection_uses_them() {
    // An abort (RFC 7323 3.2: TSval from our clock, TSecr = TS.Recent).
    let mut p = Peer::connected(true);
    p.tick(MS * 10);
    p.send(TcpFlags::PSH | TcpFlags::ACK, b"hello");
    let peer_ts = p.ts.unwrap();
    let delayed = p.tick(MS * 50).pop().expect("the delayed ACK");
    let ack_ts = delayed.repr.timestamp.expect("timestamps in use").0;
    p.tick(MS * 7);
    let now = p.raw.now;
    p.raw.iface.tcp().abort(p.h, now).unwrap();
    let rst = p.take();
    assert_eq!(rst.len(), 1, "{rst:#?}");
    assert!(rst[0].has(TcpFlags::RST));
    let elapsed = now.saturating_since(delayed.at).as_millis() as u32;
    assert_eq!(rst[0].repr.timestamp, Some((ack_ts.wrapping_add(elapsed), peer_ts)));
    // Data that nobody will read, answered with a RST.
    let mut p = Peer::connected(true);
    let now = p.raw.now;
    p.raw.iface.tcp().close(p.h, now).unwrap();
    let fin = p.take();
    assert!(fin[0].has(TcpFlags::FIN));
    let fin_ts = p.our_ts;
    p.tick(MS * 3);
    p.send(TcpFlags::PSH | TcpFlags::ACK, b"too late");
    let rst = p.take();
    assert_eq!(rst.len(), 1, "{rst:#?}");
    assert!(rst[0].has(TcpFlags::RST));
    assert_eq!(rst[0].repr.timestamp, Some((fin_ts.wrapping_add(3), p.ts.unwrap())), "{rst:#?}");
    // Without timestamps, none.
    let mut p = Peer::connected(false);
    let now = p.raw.now;
    p.raw.iface.tcp().abort(p.h, now).unwrap();
    let rst = p.take();
    assert!(rst.len() == 1 && rst[0].has(TcpFlags::RST), "{rst:#?}");
    assert_eq!(rst[0].repr.timestamp, None);
}

// ---- 4. closing ----------------------------------------------------------------

#[test]
fn orderly_close_active_side_first() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.b.tcp().shutdown(hb, net.now).unwrap();
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::FinWait1));
    net.settle();
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::FinWait2));
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::CloseWait));
    let mut got = Vec::new();
    assert!(net.read_all(Side::A, ha, &mut got), "end of stream");
    // A may still send in CLOSE-WAIT.
    let data = pattern(5000, 4);
    net.a.tcp().send(ha, &data, net.now).unwrap();
    net.a.tcp().shutdown(ha, net.now).unwrap();
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::LastAck));
    net.settle();
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::TimeWait));
    let mut got = Vec::new();
    assert!(net.read_all(Side::B, hb, &mut got));
    assert_eq!(got, data);
    let fins: Vec<&Seg> = net.log.iter().filter(|s| s.has(TcpFlags::FIN)).collect();
    assert_eq!(fins.len(), 2, "one FIN each way, no retransmission");
    assert!(net.log.iter().all(|s| !s.has(TcpFlags::RST)));
}

#[test]
fn orderly_close_passive_side_first() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.a.tcp().close(ha, net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::CloseWait));
    net.b.tcp().close(hb, net.now).unwrap();
    net.settle();
    // B closed last: it is gone; A waits in TIME-WAIT.
    assert_eq!(net.b.tcp_ref().connection_count(), 0);
    assert_eq!(net.a.tcp_ref().connection_count(), 1);
    net.a.tcp().defaults_mut().time_wait = Duration::from_secs(60);
    net.run_for(Duration::from_secs(59));
    assert_eq!(net.a.tcp_ref().connection_count(), 1);
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.a.tcp_ref().connection_count(), 0);
    assert_eq!(net.a.poll_at(), None);
}

#[test]
fn half_close_keeps_the_other_direction_open() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.b.tcp().shutdown(hb, net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp().send(hb, b"more", net.now), Err(Error::NotConnected));
    // A sends a lot after B's FIN; B reads it all in FIN-WAIT-2.
    let data = pattern(300_000, 5);
    assert_eq!(net.transfer(Side::A, ha, hb, &data, Duration::from_secs(10)), data);
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::FinWait2));
    net.a.tcp().close(ha, net.now).unwrap();
    net.settle();
    let mut rest = Vec::new();
    assert!(net.read_all(Side::B, hb, &mut rest));
    assert!(rest.is_empty());
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::TimeWait));
}

#[test]
fn shutdown_during_connect_sends_the_queued_data_then_fin() {
    let mut net = Net::new();
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 81), 4).unwrap();
    let hb = net.b.tcp().connect(SocketAddrV4::new(A_IP, 81), 0, net.now).unwrap();
    let data = pattern(3000, 9);
    assert_eq!(net.b.tcp().send(hb, &data, net.now), Ok(3000));
    net.b.tcp().shutdown(hb, net.now).unwrap();
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::SynSent), "the handshake goes on");
    net.settle();
    let ha = net.a.tcp().accept(l).unwrap().expect("the handshake completed");
    let mut got = Vec::new();
    assert!(net.read_all(Side::A, ha, &mut got), "end of stream after the data");
    assert_eq!(got, data);
    // Nothing queued: shutting down while connecting just gives up.
    let hc = net.b.tcp().connect(SocketAddrV4::new(A_IP, 81), 0, net.now).unwrap();
    net.b.tcp().shutdown(hc, net.now).unwrap();
    assert_eq!(net.b.tcp_ref().state(hc), Ok(State::Closed));
}

#[test]
fn a_received_batch_is_acknowledged_once() {
    let mut peer = Peer::connected(false);
    peer.spend_quick_acks();
    let full = [7u8; 1460];
    // One by one, full segments get an ACK for every second (RFC 5681 4.2).
    for _ in 0..4 {
        peer.send(TcpFlags::ACK, &full);
    }
    let acks = peer.take();
    assert_eq!(acks.len(), 2, "{acks:#?}");
    // The same in one batch, as a device read returns it: one ACK, for all.
    let pool = peer.raw.iface.pool().clone();
    let mut frames = Vec::new();
    for _ in 0..4 {
        let repr = peer.seg(TcpFlags::ACK);
        let bytes = peer.raw.frame(repr, &full);
        frames.push(PacketBuf::from_slice(&pool, 64, &bytes).unwrap());
        peer.seq += full.len();
    }
    let now = peer.raw.now;
    peer.raw.iface.receive_batch(frames, now);
    let acks = peer.take();
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].ack(), Some(peer.rcv_nxt()));
}

#[test]
fn readiness_events_follow_the_connection() {
    let mut net = Net::new();
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 82), 4).unwrap();
    let hb = net.b.tcp().connect(SocketAddrV4::new(A_IP, 82), 0, net.now).unwrap();
    net.settle();
    let mut events = Vec::new();
    net.a.tcp().take_events(&mut events);
    let acceptable = Readiness { readable: true, writable: false, closed: false };
    assert!(events.contains(&TcpEvent { socket: TcpSocket::Listener(l), readiness: acceptable }), "{events:?}");
    let ha = net.a.tcp().accept(l).unwrap().expect("accepted");
    events.clear();
    net.a.tcp().take_events(&mut events);
    events.clear();
    net.a.tcp().take_events(&mut events);
    assert!(events.is_empty(), "nothing happened, nothing reported: {events:?}");
    // Ceilings that move nothing change nothing either; one that moves
    // does.
    let (recv, send, buffer) = net
        .a
        .tcp_ref()
        .connection(ha)
        .map(|c| (c.recv_buffer_ceiling(), c.send_buffer_ceiling(), c.send_buffer()))
        .unwrap();
    assert!(buffer < send, "room to move: {buffer} < {send}");
    assert_eq!(net.a.tcp().set_recv_buffer_ceiling(ha, recv, net.now), Ok(recv));
    assert_eq!(net.a.tcp().set_send_buffer_ceiling(ha, send, net.now), Ok(send));
    net.a.tcp().take_events(&mut events);
    assert!(events.is_empty(), "ceilings as they were: {events:?}");
    assert_eq!(net.a.tcp().set_send_buffer_ceiling(ha, buffer, net.now), Ok(buffer));
    net.a.tcp().take_events(&mut events);
    assert!(events.iter().any(|e| e.socket == TcpSocket::Connection(ha)), "a lower ceiling: {events:?}");
    events.clear();

    net.b.tcp().send(hb, b"hello", net.now).unwrap();
    net.settle();
    net.a.tcp().take_events(&mut events);
    let event = events.iter().find(|e| e.socket == TcpSocket::Connection(ha)).expect("an event for the receiver");
    assert_eq!(event.readiness, Readiness { readable: true, writable: true, closed: false });

    net.b.tcp().abort(hb, net.now).unwrap();
    net.settle();
    events.clear();
    net.a.tcp().take_events(&mut events);
    let event = events.iter().find(|e| e.socket == TcpSocket::Connection(ha)).expect("an event for the reset");
    assert!(event.readiness.closed && event.readiness.readable && !event.readiness.writable, "{event:?}");
    assert_eq!(net.a.tcp_ref().readiness(ha), Ok(event.readiness));
}

#[test]
fn a_reset_and_a_new_syn_in_one_batch_both_take_effect() {
    let mut raw = Raw::new();
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    raw.send(repr(40000, 80, 9000, None, TcpFlags::SYN), &[]);
    let synack = raw.take_one();
    raw.send(repr(40000, 80, 9001, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK), b"hi");
    let h = raw.iface.tcp().accept(l).unwrap().expect("accepted");
    raw.take();
    // The peer restarts: a RST, then a SYN from the same port, read from
    // the device together.
    let pool = raw.iface.pool().clone();
    let rst = raw.frame(repr(40000, 80, 9003, None, TcpFlags::RST), &[]);
    let syn = raw.frame(repr(40000, 80, 77_000, None, TcpFlags::SYN), &[]);
    let frames = [rst, syn].map(|f| PacketBuf::from_slice(&pool, 64, &f).unwrap());
    let now = raw.now;
    raw.iface.receive_batch(frames, now);
    assert!(matches!(raw.iface.tcp_ref().state(h), Ok(State::Closed)), "{:?}", raw.iface.tcp_ref().state(h));
    let answer = raw.take_one();
    assert_eq!(answer.repr.flags, TcpFlags::SYN | TcpFlags::ACK, "the new SYN reached the listener");
    assert_eq!(answer.ack(), Some(77_001));
}

#[test]
fn data_that_came_with_the_handshake_is_reported_on_accept() {
    let mut raw = Raw::new();
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    raw.send(repr(40002, 80, 100, None, TcpFlags::SYN), &[]);
    let synack = raw.take_one();
    raw.send(repr(40002, 80, 101, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK), b"GET /");
    let mut events = Vec::new();
    raw.iface.tcp().take_events(&mut events);
    assert!(
        events.iter().all(|e| matches!(e.socket, TcpSocket::Listener(_))),
        "no events for a connection not yet accepted: {events:?}"
    );
    let h = raw.iface.tcp().accept(l).unwrap().expect("accepted");
    events.clear();
    raw.iface.tcp().take_events(&mut events);
    assert_eq!(
        events,
        vec![TcpEvent {
            socket: TcpSocket::Connection(h),
            readiness: Readiness { readable: true, writable: true, closed: false }
        }]
    );
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    let now = net.now;
    net.a.tcp().shutdown(ha, now).unwrap();
    net.b.tcp().shutdown(hb, now).unwrap();
    // Both FINs are on the wire before either arrives.
    net.collect(Side::A, None);
    net.collect(Side::B, None);
    let fin_a = net.wire[0].pop_front().unwrap();
    let fin_b = net.wire[1].pop_front().unwrap();
    net.b.receive(fin_a.0, now);
    net.a.receive(fin_b.0, now);
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closing));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Closing));
    net.settle();
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::TimeWait));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::TimeWait));
    // Both wait out TIME-WAIT, then report closed.
    net.run_for(Duration::from_secs(61));
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Closed));
    let mut buf = [0u8; 4];
    assert_eq!(net.a.tcp().recv(ha, &mut buf, net.now), Ok(0));
}

#[test]
fn close_with_unread_data_sends_rst() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.b.tcp().send(hb, b"you will never read this", net.now).unwrap();
    net.settle();
    let before = net.log.len();
    net.a.tcp().close(ha, net.now).unwrap();
    net.settle();
    let sent = net.sent_by(Side::A, before);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert!(sent[0].has(TcpFlags::RST) && !sent[0].has(TcpFlags::FIN));
    assert_eq!(net.a.tcp_ref().connection_count(), 0);
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Closed));
    let mut buf = [0u8; 4];
    assert_eq!(net.b.tcp().recv(hb, &mut buf, net.now), Err(Error::ConnectionReset));
}

#[test]
fn data_after_close_is_answered_with_rst() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.a.tcp().close(ha, net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::CloseWait));
    net.b.tcp().send(hb, b"too late", net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Closed));
    let mut buf = [0u8; 4];
    assert_eq!(net.b.tcp().recv(hb, &mut buf, net.now), Err(Error::ConnectionReset));
    assert_eq!(net.a.tcp_ref().connection_count(), 0);
}

/// Our side (a listener's connection) closes first and ends in TIME-WAIT.
fn server_in_time_wait(ts: bool) -> (Raw, TcpListenerHandle, u32, Option<u32>, TcpSeqNumber) {
    let mut raw = Raw::new();
    raw.iface.tcp().defaults_mut().time_wait = Duration::from_secs(10);
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    let mut syn = repr(40000, 80, 1_000_000, None, TcpFlags::SYN);
    syn.timestamp = ts.then_some((100, 0));
    raw.send(syn, &[]);
    let synack = raw.take_one();
    let our_ts = synack.repr.timestamp.map(|t| t.0);
    let mut ack = repr(40000, 80, 1_000_001, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK);
    ack.timestamp = our_ts.map(|t| (101, t));
    raw.send(ack, &[]);
    let h = raw.iface.tcp().accept(l).unwrap().unwrap();
    raw.iface.tcp().close(h, raw.now).unwrap();
    let fin = raw.take_one();
    assert!(fin.has(TcpFlags::FIN));
    let our_next = synack.seq().wrapping_add(2);
    let mut finack = repr(40000, 80, 1_000_001, Some(our_next), TcpFlags::FIN | TcpFlags::ACK);
    finack.timestamp = fin.repr.timestamp.map(|t| (102, t.0));
    raw.send(finack, &[]);
    let last = raw.take_one();
    assert_eq!(last.repr.flags, TcpFlags::ACK);
    assert_eq!(last.ack(), Some(1_000_002));
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    (raw, l, our_next, our_ts, synack.repr.seq_number)
}

#[test]
fn time_wait_lasts_its_time_and_a_repeated_fin_restarts_it() {
    let (mut raw, _l, our_next, _, _) = server_in_time_wait(false);
    let start = raw.now;
    assert!(raw.run_until(start + Duration::from_secs(4)).is_empty());
    // The peer did not hear our last ACK: its FIN comes again.
    raw.send(repr(40000, 80, 1_000_001, Some(our_next), TcpFlags::FIN | TcpFlags::ACK), &[]);
    let ack = raw.take_one();
    assert_eq!(ack.repr.flags, TcpFlags::ACK);
    assert_eq!(ack.ack(), Some(1_000_002));
    assert_eq!(ack.seq(), our_next);
    // The 10 s start again from the repeated FIN.
    raw.run_until(start + Duration::from_secs(10) + MS);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1, "TIME-WAIT was restarted");
    raw.run_until(start + Duration::from_secs(14) - MS);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    raw.run_until(start + Duration::from_secs(14));
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0);
    assert_eq!(raw.iface.poll_at(), None);
    // A segment for the old connection now meets a RST.
    raw.send(repr(40000, 80, 1_000_002, Some(our_next), TcpFlags::ACK), &[]);
    assert!(raw.take_one().has(TcpFlags::RST));
}

/// Our side (a listener's connection) sends its FIN, which the peer
/// acknowledges without one of its own: FIN-WAIT-2, after `close` or
/// after `shutdown` alone. Returns the harness, the connection and our
/// next sequence number.
fn server_in_fin_wait_2(close: bool) -> (Raw, TcpHandle, u32) {
    let mut raw = Raw::new();
    raw.iface.tcp().defaults_mut().fin_timeout = Duration::from_secs(10);
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    raw.send(repr(40000, 80, 1_000_000, None, TcpFlags::SYN), &[]);
    let synack = raw.take_one();
    raw.send(repr(40000, 80, 1_000_001, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK), &[]);
    let h = raw.iface.tcp().accept(l).unwrap().unwrap();
    if close {
        raw.iface.tcp().close(h, raw.now).unwrap();
    } else {
        raw.iface.tcp().shutdown(h, raw.now).unwrap();
    }
    let fin = raw.take_one();
    assert!(fin.has(TcpFlags::FIN));
    let our_next = synack.seq().wrapping_add(2);
    raw.send(repr(40000, 80, 1_000_001, Some(our_next), TcpFlags::ACK), &[]);
    (raw, h, our_next)
}

#[test]
fn a_close_with_reset_on_close_resets_the_connection() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.a.tcp().set_reset_on_close(ha, true).unwrap();
    net.a.tcp().close(ha, net.now).unwrap();
    net.settle();
    let mut buf = [0u8; 16];
    assert_eq!(net.b.tcp().recv(hb, &mut buf, net.now), Err(Error::ConnectionReset));
    assert_eq!(net.a.tcp_ref().connection_count(), 0);
}

#[test]
fn a_closed_connection_waits_for_the_peers_fin_only_until_the_fin_timeout() {
    let (mut raw, _h, our_next) = server_in_fin_wait_2(true);
    let start = raw.now;
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    assert!(raw.run_until(start + Duration::from_secs(10) - MS).is_empty());
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1, "dropped before its time");
    // Dropped without a segment.
    assert!(raw.run_until(start + Duration::from_secs(10)).is_empty());
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0, "kept past the FIN timeout");
    assert_eq!(raw.iface.poll_at(), None);
    // The peer's late FIN meets a RST.
    raw.send(repr(40000, 80, 1_000_001, Some(our_next), TcpFlags::FIN | TcpFlags::ACK), &[]);
    assert!(raw.take_one().has(TcpFlags::RST));
}

#[test]
fn a_connection_only_shut_down_stays_in_fin_wait_2_for_its_application() {
    let (mut raw, h, _) = server_in_fin_wait_2(false);
    let start = raw.now;
    assert!(raw.run_until(start + Duration::from_secs(30)).is_empty());
    assert_eq!(raw.iface.tcp_ref().state(h), Ok(State::FinWait2), "the application still reads it");
    // Once closed, it waits the FIN timeout from the close.
    raw.iface.tcp().close(h, raw.now).unwrap();
    let closed = raw.now;
    assert!(raw.run_until(closed + Duration::from_secs(10) - MS).is_empty());
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    raw.run_until(closed + Duration::from_secs(10));
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0);
}

#[test]
fn time_wait_is_reused_by_a_newer_syn() {
    for ts in [true, false] {
        let (mut raw, l, _, _, _) = server_in_time_wait(ts);
        raw.now += Duration::from_secs(1);
        // An old duplicate SYN (lower sequence, lower timestamp): not a new
        // incarnation; TIME-WAIT stays.
        let mut old = repr(40000, 80, 999_000, None, TcpFlags::SYN);
        old.timestamp = ts.then_some((50, 0));
        raw.send(old, &[]);
        assert_eq!(raw.iface.counters().tcp_time_wait_reused, 0, "ts {ts}");
        assert!(raw.take().iter().all(|s| !s.has(TcpFlags::SYN)), "ts {ts}");
        // A new SYN, beyond the old connection in sequence and time.
        let mut syn = repr(40000, 80, 5_000_000, None, TcpFlags::SYN);
        syn.timestamp = ts.then_some((2000, 0));
        raw.send(syn, &[]);
        assert_eq!(raw.iface.counters().tcp_time_wait_reused, 1, "ts {ts}");
        let synack = raw.take_one();
        assert_eq!(synack.repr.flags, TcpFlags::SYN | TcpFlags::ACK, "ts {ts}");
        assert_eq!(synack.ack(), Some(5_000_001));
        let mut ack = repr(40000, 80, 5_000_001, Some(synack.seq().wrapping_add(1)), TcpFlags::ACK);
        ack.timestamp = synack.repr.timestamp.map(|t| (2001, t.0));
        raw.send(ack, b"hello again");
        let h = raw.iface.tcp().accept(l).unwrap().expect("the new incarnation is accepted");
        let mut buf = [0u8; 32];
        assert_eq!(raw.iface.tcp().recv(h, &mut buf, raw.now), Ok(11));
        assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    }
}

#[test]
fn time_wait_reuse_between_two_stacks() {
    // B reconnects from the same port again and again while A (the side
    // that closed first) still holds the previous connection in TIME-WAIT.
    let mut net = Net::new();
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    for round in 0..12u32 {
        let hb = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 40000, net.now).unwrap();
        net.settle();
        let ha = net
            .a
            .tcp()
            .accept(l)
            .unwrap()
            .unwrap_or_else(|| panic!("round {round}: not accepted: {:?}", net.b.tcp_ref().state(hb)));
        assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Established), "round {round}");
        net.a.tcp().send(ha, b"bye", net.now).unwrap();
        net.a.tcp().close(ha, net.now).unwrap();
        net.settle();
        let mut got = Vec::new();
        assert!(net.read_all(Side::B, hb, &mut got));
        assert_eq!(got, b"bye");
        net.b.tcp().close(hb, net.now).unwrap();
        net.settle();
        assert_eq!(net.b.tcp_ref().connection_count(), 0);
        assert_eq!(net.a.tcp_ref().connection_count(), 1, "A in TIME-WAIT");
        // Gaps from a millisecond to several seconds, all well inside
        // TIME-WAIT: the timestamps of successive incarnations must still
        // increase.
        net.run_for(MS * (1 + round * round * 97));
    }
    assert_eq!(net.a.counters().tcp_time_wait_reused, 11);
}

#[test]
fn time_wait_acknowledges_data_but_not_bare_acks() {
    let (mut raw, _l, our_next, _, _) = server_in_time_wait(false);
    let start = raw.now;
    assert!(raw.run_until(start + Duration::from_secs(2)).is_empty());
    // Data in the window, after the peer's FIN: acknowledged, so the peer
    // hears where the stream ended (RFC 9293 3.10.7.4).
    raw.send(repr(40000, 80, 1_000_002, Some(our_next), TcpFlags::PSH | TcpFlags::ACK), b"late");
    let ack = raw.take_one();
    assert_eq!(ack.repr.flags, TcpFlags::ACK);
    assert_eq!((ack.seq(), ack.ack()), (our_next, Some(1_000_002)));
    // A duplicate of data before the FIN (out of the window): acknowledged.
    raw.send(repr(40000, 80, 999_990, Some(our_next), TcpFlags::PSH | TcpFlags::ACK), b"0123456789");
    assert_eq!(raw.take_one().ack(), Some(1_000_002));
    // A bare ACK in the window is not answered: two ends must not
    // acknowledge each other's ACKs.
    raw.send(repr(40000, 80, 1_000_002, Some(our_next), TcpFlags::ACK), &[]);
    assert!(raw.take().is_empty());
    // Only a FIN restarts the 2 MSL: TIME-WAIT ends 10 s after it began.
    raw.run_until(start + Duration::from_secs(10) - MS);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    raw.run_until(start + Duration::from_secs(10));
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0);
}

// ---- 5. zero window ----------------------------------------------------------------

/// A sends to B, whose receive buffer is small and who does not read.
fn zero_window_setup(buffer: usize) -> (Net, TcpHandle, TcpHandle, Vec<u8>) {
    let mut net = Net::new();
    net.b.tcp().defaults_mut().set_recv_buffer(buffer);
    let (ha, hb) = net.connect_pair(80);
    let data = pattern(100_000, 6);
    let sent = net.a.tcp().send(ha, &data, net.now).unwrap();
    assert_eq!(sent, data.len());
    let t0 = net.now;
    net.run_for(MS * 50);
    let rest = buffer % 1448;
    if rest != 0 {
        // The last bytes of window are too small to be worth a segment
        // (sender-side SWS avoidance)...
        let last = net.log.iter().rev().find(|s| s.from == B_IP).unwrap().clone();
        assert_eq!(usize::from(last.repr.window_len), rest, "{last:?}");
        assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), buffer - rest);
        // ...until the persist timer's override sends them anyway.
        net.run_for(MS * 500);
        let tail = net.sent_by(Side::A, 0).into_iter().rfind(|s| !s.payload.is_empty()).unwrap();
        assert_eq!(tail.len(), rest);
        assert_eq!(tail.at.saturating_since(last.at), MS * 200, "one RTO after the window stalled");
        assert!(last.at.saturating_since(t0) <= MS * 40);
    }
    let wnd0 = net.log.iter().rev().find(|s| s.from == B_IP).unwrap().clone();
    assert_eq!(wnd0.repr.window_len, 0, "B's window closed: {wnd0:?}");
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), buffer);
    (net, ha, hb, data)
}

/// Zero-window probes from A in the log since `from`: bare segments.
fn probes(net: &Net, from: usize) -> Vec<Seg> {
    net.sent_by(Side::A, from).into_iter().filter(|s| s.is_bare() || s.len() <= 1).collect()
}

#[test]
fn zero_window_is_probed_with_backoff_and_reopens() {
    for buffer in [16 * 1024, 11 * 1448] {
        zero_window_probes(buffer);
    }
}

fn zero_window_probes(buffer: usize) {
    let (mut net, ha, hb, data) = zero_window_setup(buffer);
    let mark = net.log.len();
    let start = net.now;
    net.run_for(Duration::from_secs(20));
    let probes = probes(&net, mark);
    assert!(probes.len() >= 4, "{probes:#?}");
    let una = net.a.tcp_ref().connection(ha).unwrap();
    assert_eq!(una.send_window(), 0);
    // Each probe is answered with the (still closed) window.
    for p in &probes {
        let answer =
            net.log.iter().find(|s| s.from == B_IP && s.cause == Some((p.repr.seq_number, p.len())) && s.at == p.at);
        let answer = answer.unwrap_or_else(|| panic!("probe at {:?} unanswered", p.at));
        assert_eq!(answer.repr.window_len, 0);
    }
    // The intervals double (the persist timer backs off).
    let times: Vec<Duration> = std::iter::once(start)
        .chain(probes.iter().map(|p| p.at))
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1].saturating_since(w[0]))
        .collect();
    for w in times.windows(2).skip(1) {
        let ratio = w[1].as_secs_f64() / w[0].as_secs_f64();
        assert!((1.9..=2.1).contains(&ratio), "intervals {times:?}");
    }
    // B reads: a window update goes out at once, and the transfer finishes.
    let mut got = Vec::new();
    net.read_all(Side::B, hb, &mut got);
    let before = net.log.len();
    net.settle();
    let update = net.sent_by(Side::B, before);
    assert!(update.iter().any(|s| s.repr.window_len > 0), "window update {update:#?}");
    let rest = net.transfer(Side::A, ha, hb, &[], Duration::from_secs(1));
    got.extend(rest);
    while got.len() < data.len() {
        assert!(net.step(net.now + Duration::from_secs(5)), "stalled at {}", got.len());
        net.read_all(Side::B, hb, &mut got);
    }
    assert_eq!(got, data);
}

#[test]
fn lost_window_update_is_recovered_by_the_persist_timer() {
    let (mut net, ha, hb, data) = zero_window_setup(16 * 1024);
    net.run_for(MS * 500);
    // B reads, and its window update is lost.
    let mut got = Vec::new();
    net.read_all(Side::B, hb, &mut got);
    net.filter = Box::new(|s: &Seg| !(s.from == B_IP && s.is_bare() && s.repr.window_len > 0 && s.cause.is_none()));
    let before = net.log.len();
    net.settle();
    assert!(net.sent_by(Side::B, before).iter().any(|s| s.repr.window_len > 0), "an update was sent (and lost)");
    net.filter = Box::new(|_| true);
    // A's next probe brings the news; no byte is lost.
    let limit = net.now + Duration::from_secs(30);
    while got.len() < data.len() {
        assert!(net.step(limit), "stalled at {} of {}", got.len(), data.len());
        net.read_all(Side::B, hb, &mut got);
    }
    assert_eq!(got, data);
    assert_eq!(net.a.tcp_ref().connection(ha).unwrap().stats().timeouts, 0, "probes, not retransmission timeouts");
}

#[test]
fn reads_without_window_scaling_send_no_window_update_the_field_cannot_show() {
    // A buffer of 256 KiB, but without window scaling the field says at
    // most 65,535: reads that free space beyond it change nothing the
    // peer can see, and send nothing.
    let mut p = Peer::connected_with(false, |c| c.window_scaling = false);
    assert!(!p.raw.iface.tcp_ref().connection(p.h).unwrap().negotiated().0);
    p.spend_quick_acks();
    for k in 0..10 {
        p.send(TcpFlags::ACK, &pattern(1460, k));
    }
    let acks = p.take();
    assert_eq!(acks.len(), 5, "every second full segment: {acks:#?}");
    assert!(acks.iter().all(|s| s.repr.window_len == 65535), "{acks:#?}");
    let mut buf = [0u8; 100];
    let mut read = 0;
    let mut sent = Vec::new();
    loop {
        let now = p.raw.now;
        match p.raw.iface.tcp().recv(p.h, &mut buf, now) {
            Ok(n) => read += n,
            Err(Error::WouldBlock) => break,
            Err(e) => panic!("{e}"),
        }
        sent.extend(p.take());
    }
    assert_eq!(read, 14_600);
    assert!(sent.is_empty(), "{} ACKs the same as the last one, the first {:#?}", sent.len(), sent.first());
    assert!(p.tick(MS * 500).is_empty());
}

/// Once the peer's FIN is in, reads send no window update: the peer sends
/// nothing more. In TIME-WAIT the update reaches a peer that has already
/// closed and answers with a RST, which would end a cleanly closed stream
/// in a reset before its application read the end.
#[test]
fn reads_after_the_peers_fin_send_no_window_update() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.b.tcp().shutdown(hb, net.now).unwrap();
    net.settle();
    // More than half of B's window, unread until A has closed.
    let data = pattern(150_000, 9);
    assert_eq!(net.a.tcp().send(ha, &data, net.now), Ok(data.len()));
    net.a.tcp().shutdown(ha, net.now).unwrap();
    net.settle();
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::TimeWait));
    let before = net.log.len();
    let mut got = Vec::new();
    assert!(net.read_all(Side::B, hb, &mut got), "end of stream");
    net.settle();
    assert_eq!(got, data);
    let sent = net.sent_by(Side::B, before);
    assert!(sent.is_empty(), "B sent after A's FIN: {sent:#?}");
    assert!(net.log.iter().all(|s| !s.has(TcpFlags::RST)));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::TimeWait));
}

#[test]
fn a_window_opening_from_zero_is_advertised_in_sws_steps() {
    let buffer = 8 * 1460;
    let mut p = Peer::connected_with(false, |c| c.set_recv_buffer(buffer));
    for k in 0..8 {
        p.send(TcpFlags::ACK, &pattern(1460, k));
    }
    let acks = p.take();
    assert_eq!(acks.last().unwrap().repr.window_len, 0, "{acks:#?}");
    // Reads of 500 bytes: an update each time the window can at least
    // double and grow by two MSS over the one still open (beyond RFC 9293
    // 3.8.6.2.2's least step, min(buffer / 2, MSS)); the data the peer
    // then sends is acknowledged with the rest.
    let mut buf = [0u8; 500];
    let mut read = 0;
    let mut advertised = 0;
    let mut updates = Vec::new();
    loop {
        let now = p.raw.now;
        match p.raw.iface.tcp().recv(p.h, &mut buf, now) {
            Ok(n) => read += n,
            Err(Error::WouldBlock) => break,
            Err(e) => panic!("{e}"),
        }
        for s in p.take() {
            assert!(s.is_bare() && s.ack() == Some(p.rcv_nxt()), "{s:#?}");
            let wnd = usize::from(s.repr.window_len);
            assert_eq!(wnd, read, "the whole free space, after {read} bytes read");
            assert!(wnd >= advertised + 2 * 1460, "a step of {} after {advertised}", wnd - advertised);
            assert!(wnd >= 2 * advertised, "{wnd} after {advertised}: not a doubling");
            advertised = wnd;
            updates.push(wnd);
        }
    }
    assert_eq!(read, buffer);
    assert_eq!(updates, [3000, 6000]);
}

// ---- 6. loss recovery -----------------------------------------------------------

/// Warms a connection up, then sends `segments` full segments in one flight
/// with the first transmissions of segments `holes` (0-based) lost.
fn multi_hole_flight(sack: bool, holes: &[usize]) -> (Net, TcpHandle, TcpHandle) {
    let mut net = Net::new();
    for iface in [&mut net.a, &mut net.b] {
        let d = iface.tcp().defaults_mut();
        d.sack = sack;
        d.send_buffer = 1 << 20;
        d.recv_buffer = 1 << 20;
    }
    let (ha, hb) = net.connect_pair(80);
    // Grow cwnd with a loss-free transfer.
    let warm = pattern(400_000, 7);
    assert_eq!(net.transfer(Side::A, ha, hb, &warm, Duration::from_secs(5)), warm);
    net.run_for(MS * 100);
    let c = net.a.tcp_ref().connection(ha).unwrap();
    let mss = c.send_mss() - 12;
    assert!(c.cwnd() >= 40 * mss, "cwnd {} after warm-up", c.cwnd());
    let stats = c.stats();
    assert_eq!((stats.retransmits, stats.timeouts), (0, 0));
    let base = net.log.iter().rev().find(|s| s.from == B_IP).unwrap().ack().unwrap();
    let lost: Vec<u32> = holes.iter().map(|&k| base.wrapping_add((k * mss) as u32)).collect();
    let mut seen = std::collections::HashSet::new();
    net.filter = Box::new(move |s: &Seg| {
        if s.from == A_IP && !s.payload.is_empty() && lost.contains(&s.seq()) {
            // Only the first transmission is lost.
            return !seen.insert(s.seq());
        }
        true
    });
    (net, ha, hb)
}

#[test]
fn sack_recovers_three_holes_in_one_flight() {
    let holes = [4, 14, 24];
    let (mut net, ha, hb) = multi_hole_flight(true, &holes);
    let mark = net.log.len();
    let data = pattern(40 * 1448, 8);
    let got = net.transfer(Side::A, ha, hb, &data, Duration::from_secs(5));
    assert_eq!(got, data);
    let stats = net.a.tcp_ref().connection(ha).unwrap().stats();
    assert_eq!(stats.timeouts, 0, "no RTO: {stats:?}");
    assert_eq!(stats.retransmits, 3, "exactly the holes: {stats:?}");
    assert_eq!(stats.fast_recoveries, 1);
    // The retransmissions are the three holes.
    let sent = net.sent_by(Side::A, mark);
    let mut seqs = std::collections::HashMap::new();
    for s in sent.iter().filter(|s| !s.payload.is_empty()) {
        *seqs.entry(s.seq()).or_insert(0) += 1;
    }
    assert_eq!(seqs.values().filter(|&&n| n == 2).count(), 3);
    assert_eq!(seqs.values().filter(|&&n| n > 2).count(), 0);
    // B's ACKs carried SACK blocks, the block of the segment that caused
    // the ACK first (RFC 2018 4).
    let sack_acks: Vec<Seg> = net.sent_by(Side::B, mark).into_iter().filter(|s| !s.sacks().is_empty()).collect();
    assert!(sack_acks.len() >= 20, "{} ACKs with SACK", sack_acks.len());
    let max_blocks = sack_acks.iter().map(|s| s.sacks().len()).max().unwrap();
    assert_eq!(max_blocks, 3, "three holes, three blocks (timestamps leave room for three)");
    for s in &sack_acks {
        let (cseq, clen) = s.cause.expect("ACKs answer segments");
        let ack = s.ack().unwrap();
        if (cseq.0.wrapping_sub(ack) as i32) > 0 {
            let first = s.sacks()[0];
            assert!(
                (cseq.0.wrapping_sub(first.0) as i32) >= 0
                    && (first.1.wrapping_sub(cseq.0.wrapping_add(clen as u32)) as i32) >= 0,
                "first block {first:?} does not hold the segment {cseq:?}+{clen} that caused it: {:?}",
                s.sacks()
            );
        }
    }
}

#[test]
fn newreno_recovers_three_holes_without_sack() {
    let holes = [4, 14, 24];
    let (mut net, ha, hb) = multi_hole_flight(false, &holes);
    let mark = net.log.len();
    let data = pattern(40 * 1448, 9);
    let got = net.transfer(Side::A, ha, hb, &data, Duration::from_secs(5));
    assert_eq!(got, data);
    let stats = net.a.tcp_ref().connection(ha).unwrap().stats();
    assert_eq!(stats.timeouts, 0, "partial ACKs, no RTO: {stats:?}");
    assert_eq!(stats.fast_recoveries, 1, "one recovery for the flight (RFC 6582): {stats:?}");
    assert_eq!(stats.retransmits, 3, "{stats:?}");
    assert!(net.sent_by(Side::B, mark).iter().all(|s| s.sacks().is_empty()));
    assert!(!net.a.tcp_ref().connection(ha).unwrap().negotiated().2);
}

#[test]
fn limited_transmit_sends_new_data_on_the_first_two_duplicate_acks() {
    for sack in [true, false] {
        limited_transmit(sack);
    }
}

/// A window of three segments (after an RTO) with the first lost: its two
/// successors give only two duplicate ACKs. Each sends one new segment
/// (RFC 3042), whose duplicate ACK is the third: fast retransmit, not a
/// second RTO.
fn limited_transmit(sack: bool) {
    // The flight's loss is met by an RTO, not a tail probe.
    let mut p = Peer::connected_with(false, |c| {
        c.sack = sack;
        c.rack_tlp = false;
    });
    let mss = 1460;
    let data = pattern(20 * mss, 3);
    let now = p.raw.now;
    assert_eq!(p.raw.iface.tcp().send(p.h, &data, now), Ok(data.len()));
    assert_eq!(p.take().len(), 10, "the initial window");
    // Every ACK is lost: the RTO resends the first segment, with a cwnd of one.
    let rto = p.raw.iface.tcp_ref().connection(p.h).unwrap().rto();
    let rtx = p.tick(rto);
    assert_eq!(rtx.len(), 1, "{rtx:#?}");
    assert_eq!(rtx[0].seq(), p.ack.0);
    // The ACK of the whole flight: slow start takes cwnd to three segments.
    p.ack += 10 * mss;
    p.send(TcpFlags::ACK, &[]);
    let flight = p.take();
    let c = p.raw.iface.tcp_ref().connection(p.h).unwrap();
    let cwnd = c.cwnd();
    assert_eq!(cwnd, 3 * mss);
    assert_eq!(flight.len(), 3, "{flight:#?}");
    let una = p.ack.0;
    let seg_seq = |k: usize| una.wrapping_add((k * mss) as u32);
    // The first of the three is lost; each duplicate ACK releases one new
    // segment, cwnd as it was.
    for (dup, new) in [(1, 3), (2, 4)] {
        let mut r = p.seg(TcpFlags::ACK);
        if sack {
            r.sack_ranges[0] = Some((seg_seq(1), seg_seq(dup + 1)));
        }
        p.raw.send(r, &[]);
        let sent = p.take();
        assert_eq!(sent.len(), 1, "sack {sack}, duplicate ACK {dup}: {sent:#?}");
        assert_eq!((sent[0].seq(), sent[0].len()), (seg_seq(new), mss), "sack {sack}, duplicate ACK {dup}");
        assert_eq!(p.raw.iface.tcp_ref().connection(p.h).unwrap().cwnd(), cwnd);
    }
    // The first new segment arrives: the third duplicate ACK.
    let mut r = p.seg(TcpFlags::ACK);
    if sack {
        r.sack_ranges[0] = Some((seg_seq(1), seg_seq(4)));
    }
    p.raw.send(r, &[]);
    let sent = p.take();
    assert_eq!(sent.first().map(|s| (s.seq(), s.len())), Some((seg_seq(0), mss)), "sack {sack}: {sent:#?}");
    let c = p.raw.iface.tcp_ref().connection(p.h).unwrap();
    let stats = c.stats();
    assert_eq!((stats.timeouts, stats.fast_recoveries), (1, 1), "sack {sack}: {stats:?}");
    // ssthresh from the three segments outstanding before Limited Transmit
    // (RFC 5681 3.2 step 2), by CUBIC's beta of 0.7.
    assert_eq!(c.ssthresh(), 3 * mss * 7 / 10, "sack {sack}");
}

/// Our side sends its initial window of ten full segments; returns the
/// peer and the sequence number of segment `k` of the flight.
fn ten_in_flight() -> (Peer, impl Fn(usize) -> u32) {
    let mut p = Peer::connected_with(false, |c| c.rack_tlp = false);
    let mss = 1460;
    let data = pattern(10 * mss, 5);
    let now = p.raw.now;
    assert_eq!(p.raw.iface.tcp().send(p.h, &data, now), Ok(data.len()));
    assert_eq!(p.take().len(), 10, "the initial window");
    let una = p.ack.0;
    (p, move |k: usize| una.wrapping_add((k * mss) as u32))
}

#[test]
fn acks_that_sack_new_data_are_duplicate_acks_whatever_their_window() {
    // The first segment is lost; the receiver reads between its ACKs, so
    // each says a different window. RFC 5681 would not count them (the
    // window changed), RFC 6675 2 does: the third brings fast retransmit.
    let (mut p, seg_seq) = ten_in_flight();
    for k in 1..=3 {
        let mut r = p.seg(TcpFlags::ACK);
        r.window_len = 60_000 + 1000 * k as u16;
        r.sack_ranges[0] = Some((seg_seq(1), seg_seq(k + 1)));
        p.raw.send(r, &[]);
    }
    let sent = p.take();
    assert_eq!(sent.first().map(|s| (s.seq(), s.len())), Some((seg_seq(0), 1460)), "{sent:#?}");
    assert_eq!(p.raw.iface.tcp_ref().connection(p.h).unwrap().stats().fast_recoveries, 1);
}

#[test]
fn an_ack_that_moves_una_and_sacks_above_a_hole_starts_recovery() {
    // Segment 5 of ten is lost. One ACK acknowledges the five before it
    // and SACKs the four after it (a receiver that held its ACK until
    // the out-of-order data came): the hole is lost by RFC 6675's rule,
    // and resent at once.
    let (mut p, seg_seq) = ten_in_flight();
    p.ack = TcpSeqNumber(seg_seq(5));
    let mut r = p.seg(TcpFlags::ACK);
    r.sack_ranges[0] = Some((seg_seq(6), seg_seq(10)));
    p.raw.send(r, &[]);
    let sent = p.take();
    assert_eq!(sent.first().map(|s| (s.seq(), s.len())), Some((seg_seq(5), 1460)), "{sent:#?}");
    assert_eq!(p.raw.iface.tcp_ref().connection(p.h).unwrap().stats().fast_recoveries, 1);
}

#[test]
fn a_read_sends_a_delayed_ack_that_covers_more_than_one_segment() {
    // A full segment and a short one: one "full" segment, so the ACK is
    // delayed. The application reads them: the ACK goes at once (as in
    // Linux's tcp_cleanup_rbuf), not when the delayed-ACK timer fires.
    let mut p = Peer::connected(false);
    p.spend_quick_acks();
    p.send(TcpFlags::ACK, &pattern(1460, 1));
    p.send(TcpFlags::ACK | TcpFlags::PSH, &pattern(500, 2));
    assert!(p.take().is_empty(), "the ACK is delayed");
    let mut buf = [0u8; 4096];
    let now = p.raw.now;
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(1960));
    let acks = p.take();
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].ack(), Some(p.rcv_nxt()));
    // A read of less than a segment's worth leaves the ACK delayed.
    p.send(TcpFlags::ACK | TcpFlags::PSH, &pattern(700, 3));
    assert!(p.take().is_empty());
    let now = p.raw.now;
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(700));
    assert!(p.take().is_empty(), "one short segment's ACK waits for the timer");
}

/// A connection with a measured RTT, then one write of `segments` full
/// segments whose last `lost` segments lose their first transmission; the
/// write is read as it arrives. Returns the time from the write until
/// everything arrived, and A's counters.
fn tail_loss(sack: bool, probe: bool, segments: usize, lost: usize) -> (Duration, ConnectionStats) {
    flight_loss(sack, probe, segments, segments - lost..segments)
}

/// As [`tail_loss`], with the segments of `lost` (0-based) losing their
/// first transmission.
fn flight_loss(sack: bool, probe: bool, segments: usize, lost: std::ops::Range<usize>) -> (Duration, ConnectionStats) {
    let mut net = Net::new();
    for iface in [&mut net.a, &mut net.b] {
        let d = iface.tcp().defaults_mut();
        d.sack = sack;
        d.rack_tlp = probe;
    }
    let (ha, hb) = net.connect_pair(80);
    let warm = pattern(20_000, 3);
    assert_eq!(net.transfer(Side::A, ha, hb, &warm, Duration::from_secs(5)), warm);
    net.run_for(MS * 100);
    let c = net.a.tcp_ref().connection(ha).unwrap();
    let mss = c.send_mss() - 12;
    assert!(c.cwnd() >= segments * mss, "cwnd {} takes the whole write", c.cwnd());
    let base = net.log.iter().rev().find(|s| s.from == B_IP).unwrap().ack().unwrap();
    let end = base.wrapping_add((lost.end * mss) as u32);
    let tail_start = base.wrapping_add((lost.start * mss) as u32);
    let mut seen = std::collections::HashSet::new();
    net.filter = Box::new(move |s: &Seg| {
        let in_tail = s.seq().wrapping_sub(tail_start) < end.wrapping_sub(tail_start);
        if s.from == A_IP && !s.payload.is_empty() && in_tail {
            return !seen.insert(s.seq());
        }
        true
    });
    let t0 = net.now;
    let data = pattern(segments * mss, 4);
    assert_eq!(net.transfer(Side::A, ha, hb, &data, Duration::from_secs(10)), data);
    (net.now.saturating_since(t0), net.a.tcp_ref().connection(ha).unwrap().stats())
}

#[test]
fn tail_loss_probe_repairs_the_last_two_segments_before_the_rto() {
    // The probe goes 10 ms (the least PTO, on this RTT of microseconds)
    // after the ACKs of the first eight: the last segment again, which is
    // SACKed above the hole before it; that hole is resent at once.
    let (took, stats) = tail_loss(true, true, 10, 2);
    assert!(took < Duration::from_millis(50), "took {took:?}, {stats:?}");
    assert_eq!((stats.timeouts, stats.tail_loss_probes, stats.retransmits), (0, 1, 2), "{stats:?}");
    // Switched off, the RTO (200 ms) repairs it.
    let (took, stats) = tail_loss(true, false, 10, 2);
    assert!(took >= Duration::from_millis(200), "took {took:?}, {stats:?}");
    assert_eq!((stats.timeouts, stats.tail_loss_probes), (1, 0), "{stats:?}");
}

#[test]
fn rack_finds_a_loss_with_too_few_segments_after_it_for_duplicate_acks() {
    // The eighth of ten lost: two SACKed segments after it are not enough
    // for RFC 6675 (three, or more than two segments' worth), and with
    // SACKed data outstanding no tail loss probe is armed. RACK's
    // reordering timer finds it lost a quarter of the minimum RTT after
    // the SACK of the segments sent after it.
    let (took, stats) = flight_loss(true, true, 10, 7..8);
    assert!(took < Duration::from_millis(50), "took {took:?}, {stats:?}");
    assert_eq!((stats.timeouts, stats.fast_recoveries, stats.retransmits), (0, 1, 1), "{stats:?}");
    let (took, stats) = flight_loss(true, false, 10, 7..8);
    assert!(took >= Duration::from_millis(200), "took {took:?}, {stats:?}");
    assert_eq!(stats.timeouts, 1, "{stats:?}");
}

#[test]
fn tail_loss_probe_of_one_segment_in_flight_allows_for_a_delayed_ack() {
    for sack in [true, false] {
        // Nine segments, the last lost: the receiver acknowledges every
        // second, so once the first eight are acknowledged only the lost
        // one is in flight. Its ACK may be delayed by up to 200 ms (RFC
        // 8985 7.2), so the PTO is 2 SRTT + 200 ms, bounded by the RTO.
        // The probe goes when the RTO would have, instead of it, and
        // repairs the tail without collapsing the window.
        let (took, stats) = tail_loss(sack, true, 9, 1);
        assert!(took >= Duration::from_millis(200) && took < Duration::from_millis(250), "took {took:?}");
        assert_eq!((stats.timeouts, stats.tail_loss_probes, stats.retransmits), (0, 1, 1), "sack {sack}: {stats:?}");
    }
}

#[test]
fn tail_loss_probe_sacked_reveals_the_lost_segments_below_it() {
    // Three of ten lost at the end: the probe (the last segment again) is
    // SACKed above the other two holes, which RACK's rule then takes for
    // lost; SACK recovery resends them without waiting for the RTO.
    let (took, stats) = tail_loss(true, true, 10, 3);
    assert!(took < Duration::from_millis(100), "took {took:?}, {stats:?}");
    assert_eq!((stats.timeouts, stats.tail_loss_probes, stats.fast_recoveries), (0, 1, 1), "{stats:?}");
    assert_eq!(stats.retransmits, 3, "the probe and the two holes: {stats:?}");
    let (took, stats) = tail_loss(true, false, 10, 3);
    assert!(took >= Duration::from_millis(200), "took {took:?}, {stats:?}");
    assert_eq!(stats.timeouts, 1, "{stats:?}");
}

// ---- 7. retransmission timeouts --------------------------------------------------

#[test]
fn rto_backs_off_exponentially_to_max_rto_then_times_out() {
    let mut net = Net::new();
    for iface in [&mut net.a, &mut net.b] {
        let d = iface.tcp().defaults_mut();
        d.rtt.max_rto = Duration::from_secs(3);
        d.max_retransmissions = 6;
        // The RTO alone: a tail loss probe would go before the first.
        d.rack_tlp = false;
    }
    let (ha, hb) = net.connect_pair(80);
    let rto = net.a.tcp_ref().connection(ha).unwrap().rto();
    assert_eq!(rto, Duration::from_millis(200), "min_rto after a tiny RTT");
    // B drops off the net.
    net.filter = Box::new(|s: &Seg| s.from != A_IP);
    let mark = net.log.len();
    let t0 = net.now;
    net.a.tcp().send(ha, b"into the void", t0).unwrap();
    net.run_for(Duration::from_secs(60));
    let sent = net.sent_by(Side::A, mark);
    let times: Vec<Duration> = sent.iter().map(|s| s.at.saturating_since(t0)).collect();
    assert!(sent.iter().all(|s| s.seq() == sent[0].seq() && s.len() == 13), "{sent:#?}");
    // 0, then 0.2, 0.4, 0.8, 1.6, 3 (capped), 3 s apart.
    let expected: Vec<Duration> = [0, 200, 600, 1400, 3000, 6000, 9000].iter().map(|&ms| MS * ms).collect();
    assert_eq!(times, expected);
    // After max_retransmissions, the next timeout gives up.
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    assert_eq!(net.a.tcp().send(ha, b"x", net.now), Err(Error::TimedOut));
    let stats = net.a.tcp_ref().connection(ha).unwrap().stats();
    assert_eq!(stats.retransmits, 6);
    assert_eq!(stats.timeouts, 6);
    let _ = hb;
}

#[test]
fn syn_retries_back_off_then_connect_times_out() {
    let mut net = Net::new();
    net.b.tcp().defaults_mut().syn_retries = 3;
    net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    net.filter = Box::new(|s: &Seg| s.from != B_IP);
    let t0 = net.now;
    let hb = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, t0).unwrap();
    net.run_for(Duration::from_secs(60));
    let syns = net.sent_by(Side::B, 0);
    assert!(syns.iter().all(|s| s.repr.flags == TcpFlags::SYN));
    let times: Vec<u64> = syns.iter().map(|s| s.at.saturating_since(t0).as_millis() as u64).collect();
    assert_eq!(times, vec![0, 1000, 3000, 7000]);
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Closed));
    let mut buf = [0u8; 1];
    assert_eq!(net.b.tcp().recv(hb, &mut buf, net.now), Err(Error::TimedOut));
    assert_eq!(net.a.tcp_ref().connection_count(), 0);
}

#[test]
fn handshake_after_a_syn_timeout_starts_data_with_a_3s_rto() {
    let mut net = Net::new();
    net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8).unwrap();
    let mut dropped = false;
    net.filter = Box::new(move |s: &Seg| {
        if s.repr.flags == TcpFlags::SYN && !dropped {
            dropped = true;
            return false;
        }
        true
    });
    let hb = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.run_for(Duration::from_secs(2));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Established));
    // RFC 6298 5.7: no RTT sample (the SYN was repeated), RTO at least 3 s.
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().rto(), Duration::from_secs(3));
}

// ---- 8. keepalive --------------------------------------------------------------

#[test]
fn keepalive_probes_an_idle_connection_and_detects_a_dead_peer() {
    let mut net = Net::new();
    {
        let d = net.a.tcp().defaults_mut();
        d.keepalive = Some(Duration::from_secs(10));
        d.keepalive_interval = Duration::from_secs(2);
        d.keepalive_probes = 3;
    }
    let (ha, hb) = net.connect_pair(80);
    let t0 = net.now;
    let mark = net.log.len();
    assert!(net.a.poll_at().is_some(), "a keepalive timer is armed");
    net.run_for(Duration::from_secs(25));
    let from_a = net.sent_by(Side::A, mark);
    let from_b = net.sent_by(Side::B, mark);
    // Idle for 10 s: a probe; answered, so the next one 10 s later.
    let times: Vec<u64> = from_a.iter().map(|s| s.at.saturating_since(t0).as_secs()).collect();
    assert_eq!(times, vec![10, 20], "{from_a:#?}");
    let snd_nxt = net.log.iter().find(|s| s.from == A_IP && s.has(TcpFlags::SYN)).unwrap().seq().wrapping_add(1);
    for p in &from_a {
        assert!(p.is_bare());
        assert_eq!(p.seq(), snd_nxt.wrapping_sub(1), "a probe carries snd_una - 1");
    }
    assert_eq!(from_b.len(), 2, "each probe answered");
    for a in &from_b {
        assert_eq!(a.ack(), Some(snd_nxt));
    }
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Established));
    // B vanishes: probes at +10, +12, +14, then the connection is dropped.
    net.filter = Box::new(|s: &Seg| s.from != A_IP);
    let t1 = from_a[1].at;
    let mark = net.log.len();
    net.run_for(Duration::from_secs(30));
    let probes: Vec<u64> = net.sent_by(Side::A, mark).iter().map(|s| s.at.saturating_since(t1).as_secs()).collect();
    assert_eq!(probes, vec![10, 12, 14]);
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    let mut buf = [0u8; 1];
    assert_eq!(net.a.tcp().recv(ha, &mut buf, net.now), Err(Error::TimedOut));
    // B, without keepalive, never noticed.
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Established));
}

// ---- 9. SYN cookies --------------------------------------------------------------

#[test]
fn syn_cookies_take_over_when_the_syn_queue_is_full() {
    let mut raw = Raw::new();
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    let syn = |port: u16, seq: u32| {
        let mut s = repr(port, 80, seq, None, TcpFlags::SYN);
        s.max_seg_size = Some(1460);
        s.window_scale = Some(2);
        s.sack_permitted = true;
        s.timestamp = Some((1, 0));
        s
    };
    // The first SYN takes the one half-open slot.
    raw.send(syn(40001, 100), &[]);
    let normal = raw.take_one();
    assert!(normal.repr.window_scale.is_some());
    assert_eq!(raw.iface.counters().tcp_syn_cookies_sent, 0);
    // Further SYNs are answered statelessly, with cookies.
    let mut cookies = Vec::new();
    for (port, seq) in [(40002u16, 0x9000_0000u32), (40003, 0x1234), (40004, 0xffff_fff0)] {
        raw.send(syn(port, seq), &[]);
        let synack = raw.take_one();
        assert_eq!(synack.repr.flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(synack.ack(), Some(seq.wrapping_add(1)));
        assert_eq!(synack.repr.max_seg_size, Some(1460));
        // A cookie keeps no options beyond the MSS.
        assert_eq!(synack.repr.window_scale, None);
        assert!(!synack.repr.sack_permitted);
        assert_eq!(synack.repr.timestamp, None);
        cookies.push((port, seq, synack.seq()));
    }
    assert_eq!(raw.iface.counters().tcp_syn_cookies_sent, 3);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1, "cookies keep no state");

    // The right ACK completes the handshake: an accepted connection.
    let (port, seq, cookie) = cookies[0];
    let mut ack = repr(port, 80, seq.wrapping_add(1), Some(cookie.wrapping_add(1)), TcpFlags::ACK);
    ack.window_len = 30000;
    raw.send(ack, &[]);
    assert_eq!(raw.iface.counters().tcp_syn_cookies_accepted, 1);
    let h = raw.iface.tcp().accept(l).unwrap().expect("the cookie connection is accepted");
    let c = raw.iface.tcp_ref().connection(h).unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.send_mss(), 1460);
    assert_eq!(c.send_window(), 30000);
    // Data both ways.
    let mut data = repr(port, 80, seq.wrapping_add(1), Some(cookie.wrapping_add(1)), TcpFlags::ACK | TcpFlags::PSH);
    data.window_len = 30000;
    raw.send(data, b"GET / HTTP/1.0\r\n\r\n");
    let mut buf = [0u8; 64];
    assert_eq!(raw.iface.tcp().recv(h, &mut buf, raw.now), Ok(18));
    raw.take();
    raw.iface.tcp().send(h, b"HTTP/1.0 200 OK\r\n\r\n", raw.now).unwrap();
    let out = raw.take();
    let reply = out.iter().find(|s| !s.payload.is_empty()).unwrap_or_else(|| panic!("no data went out: {out:#?}"));
    assert_eq!(reply.seq(), cookie.wrapping_add(1));
    assert_eq!(reply.ack(), Some(seq.wrapping_add(19)));
    assert_eq!(reply.payload, b"HTTP/1.0 200 OK\r\n\r\n");

    // A wrong ACK: RST, and no connection.
    let (port, seq, cookie) = cookies[1];
    raw.send(repr(port, 80, seq.wrapping_add(1), Some(cookie.wrapping_add(2)), TcpFlags::ACK), &[]);
    let rst = raw.take_one();
    assert_eq!(rst.repr.flags, TcpFlags::RST);
    assert_eq!(rst.seq(), cookie.wrapping_add(2));
    assert_eq!(raw.iface.counters().drop_tcp_bad_cookie, 1);
    assert_eq!(raw.iface.counters().tcp_syn_cookies_accepted, 1);
    // A wrong peer sequence number fails as well.
    let (port, seq, cookie) = cookies[2];
    raw.send(repr(port, 80, seq.wrapping_add(2), Some(cookie.wrapping_add(1)), TcpFlags::ACK), &[]);
    assert!(raw.take_one().has(TcpFlags::RST));
    assert_eq!(raw.iface.counters().drop_tcp_bad_cookie, 2);
    assert!(raw.iface.tcp().accept(l).unwrap().is_none());
}

#[test]
fn syn_cookie_connection_between_two_stacks_carries_data() {
    let mut net = Net::new();
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    // Hold the first handshake half open by losing B's final ACK once.
    let mut lost = false;
    net.filter = Box::new(move |s: &Seg| {
        if s.from == B_IP && s.repr.flags == TcpFlags::ACK && !lost {
            lost = true;
            return false;
        }
        true
    });
    let h1 = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.settle();
    let h2 = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.settle();
    assert_eq!(net.a.counters().tcp_syn_cookies_sent, 1);
    assert_eq!(net.a.counters().tcp_syn_cookies_accepted, 1);
    let ha2 = net.a.tcp().accept(l).unwrap().expect("the cookie connection");
    let data = pattern(200_000, 10);
    assert_eq!(net.transfer(Side::B, h2, ha2, &data, Duration::from_secs(10)), data);
    let back = pattern(100_000, 11);
    assert_eq!(net.transfer(Side::A, ha2, h2, &back, Duration::from_secs(10)), back);
    // The first connection completes too once B sends anything.
    let small = b"first".to_vec();
    net.b.tcp().send(h1, &small, net.now).unwrap();
    net.run_for(Duration::from_secs(2));
    let ha1 = net.a.tcp().accept(l).unwrap().expect("the first connection");
    let mut got = Vec::new();
    net.read_all(Side::A, ha1, &mut got);
    assert_eq!(got, small);
}

// ---- 10. Nagle and delayed ACK ----------------------------------------------------

#[test]
fn nagle_coalesces_small_writes_and_nodelay_does_not() {
    for nodelay in [false, true] {
        let mut net = Net::new();
        let (ha, hb) = net.connect_pair(80);
        net.a.tcp().set_nodelay(ha, nodelay).unwrap();
        let mark = net.log.len();
        let now = net.now;
        net.a.tcp().send(ha, &[1u8; 100], now).unwrap();
        for _ in 0..10 {
            net.a.tcp().send(ha, &[2u8; 10], now).unwrap();
        }
        net.run_for(MS * 200);
        let data: Vec<usize> =
            net.sent_by(Side::A, mark).iter().filter(|s| !s.payload.is_empty()).map(Seg::len).collect();
        if nodelay {
            assert_eq!(data, [vec![100], vec![10; 10]].concat());
        } else {
            assert_eq!(data, vec![100, 100], "the ten small writes went as one segment");
        }
        let mut got = Vec::new();
        net.read_all(Side::B, hb, &mut got);
        assert_eq!(got.len(), 200);
    }
}

#[test]
fn nagle_lets_a_small_tail_follow_full_segments() {
    // Minshall's variant: a small segment waits only for an unacknowledged
    // small segment, so a write of 1.5 MSS goes out at once entirely.
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    let mark = net.log.len();
    let now = net.now;
    net.a.tcp().send(ha, &[3u8; 2000], now).unwrap();
    net.collect(Side::A, None);
    let lens: Vec<usize> =
        net.wire[0].iter().filter_map(|(f, _)| parse_tcp(&f.to_vec())).map(|(_, _, p)| p.len()).collect();
    assert_eq!(lens, vec![1448, 552]);
    net.settle();
    let _ = (hb, mark);
}

#[test]
fn delayed_ack_waits_for_one_small_segment_not_for_two_full_ones() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.run_for(Duration::from_secs(1));
    net.spend_quick_acks(ha, hb);
    // One small segment: the ACK waits 40 ms.
    let mark = net.log.len();
    let t0 = net.now;
    net.a.tcp().send(ha, b"ping", t0).unwrap();
    net.run_for(MS * 100);
    let acks = net.sent_by(Side::B, mark);
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].at.saturating_since(t0), MS * 40);
    // Two full segments: acknowledged at once, by one ACK.
    let mark = net.log.len();
    let t1 = net.now;
    net.a.tcp().send(ha, &[4u8; 2 * 1448], t1).unwrap();
    net.settle();
    let acks = net.sent_by(Side::B, mark);
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].at, t1);
    let sent = net.sent_by(Side::A, mark);
    assert_eq!(sent.len(), 2);
    assert_eq!(acks[0].ack(), Some(sent[1].seq().wrapping_add(1448)));
    // A reply piggybacks the ACK: no separate ACK after 40 ms.
    let mark = net.log.len();
    net.a.tcp().send(ha, b"request", net.now).unwrap();
    net.settle();
    let mut got = Vec::new();
    net.read_all(Side::B, hb, &mut got);
    net.b.tcp().send(hb, b"response", net.now).unwrap();
    net.run_for(MS * 100);
    let from_b = net.sent_by(Side::B, mark);
    assert_eq!(from_b.len(), 1, "{from_b:#?}");
    assert_eq!(from_b[0].payload, b"response");
}

#[test]
fn a_connection_s_first_data_is_acknowledged_at_once_then_every_second_segment() {
    // Quick ACKs (as Linux's quick-ACK mode): the first segments of data,
    // even a lone small one, are acknowledged as they come, as many as
    // half the window holds segments, at most 16; then the delayed-ACK
    // rules hold again.
    let mut p = Peer::connected(false);
    let t = p.raw.now;
    p.send(TcpFlags::ACK | TcpFlags::PSH, b"hello");
    let acks = p.take();
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!((acks[0].at, acks[0].ack()), (t, Some(p.rcv_nxt())), "at once, for the small segment");
    for k in 1..MAX_QUICK_ACKS {
        p.send(TcpFlags::ACK, &pattern(1460, k as u8));
        assert_eq!(p.take().len(), 1, "quick ACK {k}");
    }
    for k in 0..4 {
        p.send(TcpFlags::ACK, &pattern(1460, k));
    }
    assert_eq!(p.take().len(), 2, "every second full segment once the quick ACKs are spent");
    // After an idle time past the RTO, quick ACKs start again.
    p.tick(Duration::from_secs(2));
    let t = p.raw.now;
    p.send(TcpFlags::ACK | TcpFlags::PSH, b"again");
    let acks = p.take();
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].at, t);
}

#[test]
fn an_interactive_connection_s_acks_ride_on_its_replies() {
    // Once a side answers data within the delay, its ACKs wait for the
    // answer even while quick ACKs are left (Linux's ping-pong mode),
    // until a delayed ACK's timer fires with no reply to carry it.
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    // The first request is acknowledged at once, and answered.
    let mark = net.log.len();
    net.a.tcp().send(ha, b"request 1", net.now).unwrap();
    net.settle();
    let acks = net.sent_by(Side::B, mark);
    assert_eq!(acks.len(), 1, "a quick ACK: {acks:#?}");
    assert!(acks[0].payload.is_empty());
    net.read_all(Side::B, hb, &mut Vec::new());
    net.b.tcp().send(hb, b"response 1", net.now).unwrap();
    net.run_for(MS * 100);
    // B answered within the delay: the next request's ACK rides on the
    // response, no pure ACK before it.
    let mark = net.log.len();
    net.a.tcp().send(ha, b"request 2", net.now).unwrap();
    net.run_for(MS * 10);
    net.read_all(Side::B, hb, &mut Vec::new());
    net.b.tcp().send(hb, b"response 2", net.now).unwrap();
    net.run_for(MS * 100);
    let from_b = net.sent_by(Side::B, mark);
    assert_eq!(from_b.len(), 1, "{from_b:#?}");
    assert_eq!(from_b[0].payload, b"response 2");
    // No answer this time: the ACK waits for the timer, which ends the
    // interactive mode; the next request is acknowledged at once.
    let mark = net.log.len();
    let t = net.now;
    net.a.tcp().send(ha, b"request 3", t).unwrap();
    net.run_for(MS * 100);
    let acks = net.sent_by(Side::B, mark);
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].at.saturating_since(t), MS * 40);
    let mark = net.log.len();
    let t = net.now;
    net.a.tcp().send(ha, b"request 4", t).unwrap();
    net.settle();
    let acks = net.sent_by(Side::B, mark);
    assert_eq!(acks.len(), 1, "{acks:#?}");
    assert_eq!(acks[0].at, t, "quick again");
}

// ---- 11. PAWS --------------------------------------------------------------------

#[test]
fn paws_drops_a_segment_with_an_old_timestamp() {
    let mut p = Peer::connected(true);
    p.tick(MS * 10);
    p.send(TcpFlags::PSH | TcpFlags::ACK, b"fresh");
    p.tick(MS * 100);
    p.take();
    // An old duplicate: sequence in the window, timestamp from the past.
    let mut old = p.seg(TcpFlags::PSH | TcpFlags::ACK);
    old.timestamp = Some((p.ts.unwrap().wrapping_sub(1000), p.our_ts));
    p.raw.send(old, b"stale");
    let segs = p.take();
    assert_eq!(segs.len(), 1, "an ACK answers: {segs:#?}");
    assert_eq!(segs[0].ack(), Some(p.rcv_nxt()), "the stale data was not taken");
    let c = p.raw.iface.tcp_ref().connection(p.h).unwrap();
    assert_eq!(c.stats().paws_drops, 1);
    let mut buf = [0u8; 16];
    let now = p.raw.now;
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(5));
    assert_eq!(&buf[..5], b"fresh");
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Err(Error::WouldBlock));
    // A RST is not subject to PAWS (RFC 7323 5.3 R1 exempts it).
    let mut rst = p.seg(TcpFlags::RST | TcpFlags::ACK);
    rst.timestamp = Some((1, p.our_ts));
    p.raw.send(rst, &[]);
    assert_eq!(p.state(), Ok(State::Closed));
}

#[test]
fn a_segment_with_an_unacceptable_ack_does_not_move_ts_recent() {
    // An in-window segment from a blind attacker: its ACK is of data never
    // sent (too new) or older than any window (too old), and its TSval is
    // far ahead. It is dropped and answered with an ACK, and TS.Recent
    // stays, so PAWS still takes the real peer's next segment (RFC 5961
    // 5.2, RFC 7323 4.3).
    for too_new in [true, false] {
        let mut p = Peer::connected(true);
        p.tick(MS * 10);
        let mut blind = p.seg(TcpFlags::PSH | TcpFlags::ACK);
        blind.ack_number = Some(if too_new { p.ack + 100_000 } else { p.ack - 200_000 });
        let far = p.ts.unwrap().wrapping_add(0x4000_0000);
        blind.timestamp = Some((far, p.our_ts));
        p.raw.send(blind, b"blind");
        let segs = p.take();
        assert_eq!(segs.len(), 1, "too_new {too_new}: an ACK answers: {segs:#?}");
        assert_eq!(segs[0].ack(), Some(p.rcv_nxt()), "too_new {too_new}: the blind data was not taken");
        assert_ne!(segs[0].repr.timestamp.map(|t| t.1), Some(far), "too_new {too_new}: TS.Recent moved");
        // The real peer, on its own clock.
        p.tick(MS * 10);
        p.send(TcpFlags::PSH | TcpFlags::ACK, b"real data");
        let mut buf = [0u8; 32];
        let now = p.raw.now;
        assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, now), Ok(9), "too_new {too_new}");
        assert_eq!(&buf[..9], b"real data");
        assert_eq!(p.raw.iface.tcp_ref().connection(p.h).unwrap().stats().paws_drops, 0, "too_new {too_new}");
    }
}

// ---- 12. listen backlog ------------------------------------------------------------

#[test]
fn listen_backlog_bounds_the_accept_queue() {
    let mut net = Net::new();
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 2).unwrap();
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap());
        net.settle();
    }
    assert!(clients.iter().all(|&h| net.b.tcp_ref().state(h) == Ok(State::Established)));
    // The accept queue is full: the next SYN is dropped (the client retries).
    let late = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.settle();
    assert_eq!(net.a.counters().drop_tcp_backlog_full, 1);
    assert_eq!(net.b.tcp_ref().state(late), Ok(State::SynSent));
    assert_eq!(net.a.tcp_ref().connection_count(), 2);
    assert_eq!(net.a.tcp_ref().accept_queue_len(l), Ok(2));
    // accept() drains one; the retried SYN then gets in.
    let first = net.a.tcp().accept(l).unwrap().expect("queued");
    assert_eq!(net.a.tcp_ref().accept_queue_len(l), Ok(1));
    net.run_for(Duration::from_secs(2));
    assert_eq!(net.b.tcp_ref().state(late), Ok(State::Established));
    let second = net.a.tcp().accept(l).unwrap().expect("queued");
    let third = net.a.tcp().accept(l).unwrap().expect("the late one");
    assert!(net.a.tcp().accept(l).unwrap().is_none());
    assert_eq!(net.a.tcp_ref().accept_queue_len(l), Ok(0));
    let mut seen = Vec::new();
    for (i, &h) in clients.iter().chain([&late]).enumerate() {
        net.b.tcp().send(h, &[i as u8; 3], net.now).unwrap();
    }
    net.settle();
    for h in [first, second, third] {
        let mut got = Vec::new();
        net.read_all(Side::A, h, &mut got);
        assert_eq!(got.len(), 3);
        seen.push(got[0]);
    }
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2]);
}

#[test]
fn the_connection_limit_drops_syns_and_refuses_connects() {
    let mut net = Net::new();
    net.a.tcp().set_max_connections(1);
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 4).unwrap();
    let first = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp_ref().state(first), Ok(State::Established));
    // A holds one connection: the next SYN goes unanswered (the client
    // retries), and A's own connect fails.
    let late = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.settle();
    assert_eq!(net.a.counters().drop_tcp_connection_limit, 1);
    assert_eq!(net.b.tcp_ref().state(late), Ok(State::SynSent));
    assert_eq!(net.a.tcp().connect(SocketAddrV4::new(B_IP, 80), 0, net.now), Err(Error::NoBuffer));
    // Once the first is gone, the retried SYN gets in.
    let h = net.a.tcp().accept(l).unwrap().expect("queued");
    net.a.tcp().abort(h, net.now).unwrap();
    net.run_for(Duration::from_secs(2));
    assert_eq!(net.b.tcp_ref().state(late), Ok(State::Established));
}

#[test]
fn a_closed_connection_is_seen_released_until_the_engine_forgets_it() {
    let mut net = Net::new();
    let l = net.a.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 4).unwrap();
    let h = net.b.tcp().connect(SocketAddrV4::new(A_IP, 80), 0, net.now).unwrap();
    net.settle();
    let server = net.a.tcp().accept(l).unwrap().expect("queued");
    assert!(net.b.tcp_ref().released(h).is_none(), "held by its application");
    net.b.tcp().close(h, net.now).unwrap();
    assert!(net.b.tcp_ref().connection(h).is_none());
    assert_eq!(net.b.tcp_ref().released(h).map(|k| k.state()), Some(State::FinWait1));
    net.settle();
    assert_eq!(net.b.tcp_ref().released(h).map(|k| k.state()), Some(State::FinWait2));
    net.a.tcp().close(server, net.now).unwrap();
    net.settle();
    assert_eq!(net.b.tcp_ref().released(h).map(|k| k.state()), Some(State::TimeWait));
    net.run_for(Duration::from_secs(61));
    assert!(net.b.tcp_ref().released(h).is_none(), "forgotten after TIME-WAIT");
}

#[test]
fn cookie_handshakes_wait_for_room_in_the_accept_queue() {
    let mut raw = Raw::new();
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 2).unwrap();
    // Two half-open handshakes fill the SYN queue; two more get cookies.
    let mut synacks = Vec::new();
    for port in 40001..=40004u16 {
        raw.send(repr(port, 80, u32::from(port) * 1000, None, TcpFlags::SYN), &[]);
        synacks.push(raw.take_one().seq());
    }
    assert_eq!(raw.iface.counters().tcp_syn_cookies_sent, 2);
    let ack =
        |port: u16, isn: u32| repr(port, 80, u32::from(port) * 1000 + 1, Some(isn.wrapping_add(1)), TcpFlags::ACK);
    raw.send(ack(40001, synacks[0]), &[]);
    raw.send(ack(40002, synacks[1]), &[]);
    // The accept queue is full: the cookie's ACK is dropped, silently.
    raw.send(ack(40003, synacks[2]), b"req");
    assert!(raw.take().is_empty());
    assert_eq!(raw.iface.counters().drop_tcp_backlog_full, 1);
    assert_eq!(raw.iface.counters().tcp_syn_cookies_accepted, 0);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 2);
    // accept() makes room; the peer's retransmission gets in.
    let first = raw.iface.tcp().accept(l).unwrap().unwrap();
    raw.now += Duration::from_secs(1);
    raw.send(ack(40003, synacks[2]), b"req");
    assert_eq!(raw.iface.counters().tcp_syn_cookies_accepted, 1);
    let second = raw.iface.tcp().accept(l).unwrap().unwrap();
    let third = raw.iface.tcp().accept(l).unwrap().unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(raw.iface.tcp().recv(third, &mut buf, raw.now), Ok(3));
    assert_ne!(first, second);
    assert!(raw.iface.tcp().accept(l).unwrap().is_none());
}

#[test]
fn unanswered_synack_is_retried_then_the_half_open_connection_dropped() {
    let mut raw = Raw::new();
    raw.iface.tcp().defaults_mut().syn_retries = 2;
    let l = raw.iface.tcp().listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 1).unwrap();
    let t0 = raw.now;
    raw.send(repr(40000, 80, 1, None, TcpFlags::SYN), &[]);
    let segs = raw.run_for(Duration::from_secs(30));
    let times: Vec<u64> = segs.iter().map(|s| s.at.saturating_since(t0).as_millis() as u64).collect();
    assert!(segs.iter().all(|s| s.repr.flags == TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!(times, vec![0, 1000, 3000]);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 0);
    assert_eq!(raw.iface.counters().tcp_handshake_timeouts, 1);
    // The slot is free again: the next SYN is answered with state, not a cookie.
    raw.send(repr(40001, 80, 1, None, TcpFlags::SYN), &[]);
    raw.take_one();
    assert_eq!(raw.iface.counters().tcp_syn_cookies_sent, 0);
    assert_eq!(raw.iface.tcp_ref().connection_count(), 1);
    assert!(raw.iface.tcp().accept(l).unwrap().is_none());
}

#[test]
fn keepalive_resumes_after_traffic_on_both_sides() {
    let mut net = Net::new();
    for iface in [&mut net.a, &mut net.b] {
        let d = iface.tcp().defaults_mut();
        d.keepalive = Some(Duration::from_secs(30));
        d.keepalive_interval = Duration::from_secs(5);
        d.keepalive_probes = 2;
    }
    let (ha, hb) = net.connect_pair(80);
    net.run_for(Duration::from_secs(7));
    let data = pattern(20_000, 12);
    assert_eq!(net.transfer(Side::B, hb, ha, &data, Duration::from_secs(1)), data);
    assert_eq!(net.transfer(Side::A, ha, hb, &data, Duration::from_secs(1)), data);
    let t0 = net.now;
    let mark = net.log.len();
    net.run_for(Duration::from_secs(40));
    // Each side probes once, 30 s after the last segment it received
    // (the delayed ACK of the last transfer came 40 ms later for A).
    let probes: Vec<(Ipv4Addr, u64)> = net.log[mark..]
        .iter()
        .filter(|s| s.is_bare() && s.cause.is_none() && s.at > t0 + Duration::from_secs(1))
        .map(|s| (s.from, s.at.saturating_since(t0).as_secs()))
        .collect();
    assert_eq!(probes.len(), 2, "{probes:?}");
    assert!(probes.iter().all(|&(_, t)| t == 30), "{probes:?}");
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Established));
    assert_eq!(net.b.tcp_ref().state(hb), Ok(State::Established));
}

#[test]
fn window_closed_with_data_in_flight_is_probed_by_the_rto() {
    let mut p = Peer::connected(false);
    {
        let c = p.raw.iface.tcp_ref().connection(p.h).unwrap();
        assert_eq!(c.send_mss(), 1460);
    }
    let now = p.raw.now;
    p.raw.iface.tcp().send(p.h, &pattern(3000, 13), now).unwrap();
    let sent = p.take();
    assert_eq!(sent.iter().map(Seg::len).collect::<Vec<_>>(), vec![1460, 1460, 80]);
    // The peer takes the first segment and shuts its window (a shrink, or
    // an older ACK overtaking the update): two segments are in flight
    // beyond a zero window, and the ACK that would reopen it is lost.
    let mut r = p.seg(TcpFlags::ACK);
    r.ack_number = Some(p.ack + 1460);
    r.window_len = 0;
    p.raw.send(r, &[]);
    assert!(p.take().is_empty());
    // The RTO fires and probes with one byte at snd_una.
    let segs = p.tick(Duration::from_millis(1100));
    let probe = segs.iter().find(|s| !s.payload.is_empty()).unwrap_or_else(|| panic!("no retransmission: {segs:#?}"));
    assert_eq!(probe.seq(), p.ack.0.wrapping_add(1460));
    assert_eq!(probe.len(), 1, "a one-byte probe into the zero window");
    // The answer reopens the window: the rest goes out (one segment at a
    // time after the timeout: cwnd restarts at one segment).
    let mut r = p.seg(TcpFlags::ACK);
    r.ack_number = Some(p.ack + 1460);
    p.raw.send(r, &[]);
    let rest = p.raw.take_one();
    assert_eq!((rest.seq(), rest.len()), (p.ack.0.wrapping_add(1461), 1459));
    let mut r = p.seg(TcpFlags::ACK);
    r.ack_number = Some(p.ack + 2920);
    p.raw.send(r, &[]);
    let rest = p.take();
    assert_eq!(rest.iter().map(Seg::len).sum::<usize>(), 80, "{rest:#?}");
}

#[test]
fn a_peer_answering_into_a_closed_window_is_not_timed_out() {
    let mut p = {
        let mut raw = Raw::new();
        let d = raw.iface.tcp().defaults_mut();
        d.rtt.max_rto = Duration::from_secs(2);
        d.max_retransmissions = 3;
        let h = raw.iface.tcp().connect(SocketAddrV4::new(PEER_IP, 81), 0, raw.now).unwrap();
        let syn = raw.take_one();
        let synack = repr(81, syn.repr.src_port, 9_000, Some(syn.seq().wrapping_add(1)), TcpFlags::SYN | TcpFlags::ACK);
        raw.send(synack, &[]);
        raw.take();
        Peer {
            port: syn.repr.src_port,
            peer_port: 81,
            seq: TcpSeqNumber(9_001),
            ack: TcpSeqNumber(syn.seq().wrapping_add(1)),
            ts: None,
            our_ts: 0,
            raw,
            h,
        }
    };
    let now = p.raw.now;
    p.raw.iface.tcp().send(p.h, &pattern(2000, 14), now).unwrap();
    p.take();
    let mut r = p.seg(TcpFlags::ACK);
    r.window_len = 0;
    p.raw.send(r, &[]);
    // For a minute the peer answers every probe, window still shut.
    let mut probes = 0;
    for _ in 0..600 {
        let segs = p.tick(MS * 100);
        for s in segs.iter().filter(|s| !s.payload.is_empty()) {
            assert_eq!((s.seq(), s.len()), (p.ack.0, 1), "one-byte probes only");
            probes += 1;
            let mut r = p.seg(TcpFlags::ACK);
            r.window_len = 0;
            p.raw.send(r, &[]);
        }
    }
    assert!(probes >= 25, "{probes} probes");
    assert_eq!(p.state(), Ok(State::Established), "alive: it answers");
    let stats = p.raw.iface.tcp_ref().connection(p.h).unwrap().stats();
    assert_eq!(stats.fast_recoveries, 0, "answers to probes are no duplicate ACKs");
    // Then it goes silent: given up once silent for over 2 max_rto.
    p.tick(Duration::from_secs(10));
    assert_eq!(p.state(), Ok(State::Closed));
    let mut buf = [0u8; 1];
    assert_eq!(p.raw.iface.tcp().recv(p.h, &mut buf, p.raw.now), Err(Error::TimedOut));
}

// ---- socket options on an open connection -----------------------------------

#[test]
fn buffers_resize_on_an_open_connection_and_the_window_follows() {
    let mut net = Net::new();
    net.b.tcp().defaults_mut().set_recv_buffer(3 * 1448);
    let (ha, hb) = net.connect_pair(80);
    let data = pattern(200_000, 9);
    net.a.tcp().set_send_buffer(ha, data.len(), net.now).unwrap();
    assert_eq!(net.a.tcp().send(ha, &data, net.now), Ok(data.len()), "the grown send buffer takes it all");
    net.run_for(MS * 50);
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), 3 * 1448);
    let last = net.log.iter().rev().find(|s| s.from == B_IP).unwrap().clone();
    assert_eq!(last.repr.window_len, 0, "B's small window is full");

    // A wider receive buffer is advertised at once (the handshake fixed a
    // window scale of 0, so 65535 is the most B can offer).
    let mark = net.log.len();
    assert_eq!(net.b.tcp().set_recv_buffer(hb, 60_000, net.now), Ok(60_000));
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().config().recv_buffer, 60_000);
    net.settle();
    let update = net.sent_by(Side::B, mark).into_iter().next().expect("a window update");
    assert_eq!(usize::from(update.repr.window_len), 60_000 - 3 * 1448, "{update:?}");
    net.run_for(MS * 500);
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), 60_000, "the window filled to the new size");

    // Shrinking stops at what is held; the send buffer at what is queued.
    let held = net.b.tcp().set_recv_buffer(hb, 1000, net.now).unwrap();
    assert_eq!(held, 60_000);
    let queued = net.a.tcp_ref().connection(ha).unwrap().send_queued();
    assert!(queued > 0);
    assert_eq!(net.a.tcp().set_send_buffer(ha, 10, net.now), Ok(queued));
    let mut all = Vec::new();
    for _ in 0..1000 {
        net.read_all(Side::B, hb, &mut all);
        if all.len() >= data.len() {
            break;
        }
        net.run_for(MS * 10);
    }
    assert_eq!(all, data, "every byte arrived in order across the resizes");
    // Once drained, the send buffer can shrink all the way.
    net.run_for(MS * 100);
    assert_eq!(net.a.tcp().set_send_buffer(ha, 10, net.now), Ok(10));
    assert_eq!(net.a.tcp().set_send_buffer(ha, 1 << 20, net.now), Ok(1 << 20));

    // A receive buffer shrunk below the window offered: the window closes
    // as data fills it, its right edge never moving left.
    assert_eq!(net.b.tcp().set_recv_buffer(hb, 2 * 1448, net.now), Ok(2 * 1448));
    let mark = net.log.len();
    let more = pattern(80_000, 3);
    assert_eq!(net.a.tcp().send(ha, &more, net.now), Ok(more.len()));
    net.run_for(MS * 300);
    let edges: Vec<u32> = net
        .sent_by(Side::B, mark)
        .iter()
        .map(|s| s.ack().unwrap().wrapping_add(u32::from(s.repr.window_len)))
        .collect();
    assert!(edges.windows(2).all(|w| (w[1].wrapping_sub(w[0]) as i32) >= 0), "{edges:?}");
    let queued = net.b.tcp_ref().connection(hb).unwrap().recv_queued();
    assert!(queued <= 60_000, "at most the window offered before the shrink: {queued}");
    let last = net.log.iter().rev().find(|s| s.from == B_IP).unwrap().clone();
    assert_eq!(last.repr.window_len, 0, "the window closed once the small buffer was full: {last:?}");
}

#[test]
fn user_timeout_drops_the_connection_when_it_runs_out() {
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    net.a.tcp().set_user_timeout(ha, Some(Duration::from_secs(5))).unwrap();
    net.filter = Box::new(|s: &Seg| s.from != A_IP);
    let t0 = net.now;
    net.a.tcp().send(ha, b"into the void", t0).unwrap();
    net.run_until(t0 + MS * 4990);
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Established));
    // Retransmissions at 0.2, 0.6, 1.4, 3.0 s; the next would be at 6.2 s,
    // but the user timeout is checked when it runs out.
    net.run_until(t0 + MS * 5010);
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    assert_eq!(net.a.tcp().send(ha, b"x", net.now), Err(Error::TimedOut));
    let _ = hb;
}

#[test]
fn user_timeout_replaces_the_retransmission_count() {
    let mut net = Net::new();
    for iface in [&mut net.a, &mut net.b] {
        let d = iface.tcp().defaults_mut();
        d.rtt.max_rto = Duration::from_secs(1);
        d.max_retransmissions = 3;
    }
    let (ha, _) = net.connect_pair(80);
    let (hc, _) = net.connect_pair(81);
    net.a.tcp().set_user_timeout(ha, Some(Duration::from_secs(20))).unwrap();
    // Zero is the default behaviour: the count.
    net.a.tcp().set_user_timeout(hc, Some(Duration::ZERO)).unwrap();
    net.filter = Box::new(|s: &Seg| s.from != A_IP);
    let t0 = net.now;
    net.a.tcp().send(ha, b"into the void", t0).unwrap();
    net.a.tcp().send(hc, b"into the void", t0).unwrap();
    net.run_until(t0 + Duration::from_secs(10));
    assert_eq!(net.a.tcp_ref().state(hc), Ok(State::Closed), "3 retransmissions, then gone");
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Established), "the user timeout has not run out");
    net.run_until(t0 + Duration::from_secs(21));
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::Closed));
    assert_eq!(net.a.tcp().send(ha, b"x", net.now), Err(Error::TimedOut));
    assert!(net.a.tcp_ref().connection(ha).unwrap().stats().retransmits > 3);
}

#[test]
fn shutdown_read_drops_data_keeps_the_window_open_and_closes_cleanly() {
    let mut net = Net::new();
    net.b.tcp().defaults_mut().recv_buffer = 8192;
    let (ha, hb) = net.connect_pair(80);
    net.a.tcp().send(ha, &pattern(4000, 1), net.now).unwrap();
    net.run_for(MS * 100);
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), 4000);
    net.b.tcp().shutdown_read(hb, net.now).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(net.b.tcp().recv(hb, &mut buf, net.now), Ok(0), "reads see end of stream");
    assert!(net.b.tcp_ref().readiness(hb).unwrap().readable);
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), 0, "what was queued is gone");

    // Data arriving later is acknowledged and dropped: far more than the
    // buffer goes through, and B's window never closes.
    let mark = net.log.len();
    let more = pattern(100_000, 2);
    let mut sent = 0;
    for _ in 0..1000 {
        if sent < more.len() {
            sent += net.a.tcp().send(ha, &more[sent..], net.now).unwrap_or(0);
        }
        net.run_for(MS * 20);
        if sent == more.len() && net.a.tcp_ref().connection(ha).unwrap().send_queued() == 0 {
            break;
        }
    }
    assert_eq!(net.a.tcp_ref().connection(ha).unwrap().send_queued(), 0, "all of it acknowledged");
    let from_b = net.sent_by(Side::B, mark);
    assert!(from_b.iter().all(|s| s.repr.window_len > 0), "B's window never closed");
    assert_eq!(net.b.tcp().recv(hb, &mut buf, net.now), Ok(0));
    assert_eq!(net.b.tcp_ref().connection(hb).unwrap().recv_queued(), 0);

    // A close after that is orderly: a FIN, no RST over unread data.
    let mark = net.log.len();
    net.b.tcp().close(hb, net.now).unwrap();
    net.run_for(MS * 100);
    let from_b = net.sent_by(Side::B, mark);
    assert!(from_b.iter().any(|s| s.has(TcpFlags::FIN)), "{from_b:?}");
    assert!(!from_b.iter().any(|s| s.has(TcpFlags::RST)), "{from_b:?}");
    assert_eq!(net.a.tcp_ref().state(ha), Ok(State::CloseWait));
}

/// A writer that fills its send buffer faster than the buffer drains gets
/// a larger one (Linux's send-buffer autotuning), within the largest
/// configured; a buffer whose size was set, or whose writer is slower than
/// the path, keeps its size.
#[test]
fn a_send_buffer_grows_only_while_it_holds_a_fast_writer_back() {
    const START: usize = 64 * 1024;
    for case in ["fast", "fixed", "slow"] {
        let mut net = Net::new();
        let d = net.a.tcp().defaults_mut();
        if case == "fixed" {
            d.set_send_buffer(START);
        } else {
            d.send_buffer = START;
        }
        let max = d.send_buffer_max;
        let (ha, hb) = net.connect_pair(80);
        let data = pattern(4 << 20, 3);
        if case == "slow" {
            // A kilobyte every 10 ms: never more than a few queued.
            let mut got = Vec::new();
            for chunk in data[..256 * 1024].chunks(1024) {
                let now = net.now;
                match net.a.tcp().send(ha, chunk, now) {
                    Ok(n) => assert_eq!(n, chunk.len()),
                    Err(e) => panic!("send failed: {e}"),
                }
                net.run_for(MS * 10);
                net.read_all(Side::B, hb, &mut got);
            }
            net.run_for(MS * 100);
            net.read_all(Side::B, hb, &mut got);
            assert!(got == data[..256 * 1024], "{} of {} bytes arrived", got.len(), 256 * 1024);
        } else {
            assert!(net.transfer(Side::A, ha, hb, &data, Duration::from_secs(10)) == data, "{case}: the bytes differ");
        }
        let c = net.a.tcp_ref().connection(ha).unwrap();
        if case == "fast" {
            assert!(c.send_buffer() > START && c.send_buffer() <= max, "{case}: {}", c.send_buffer());
            assert_eq!(c.send_buffer_ceiling(), max, "no owner holds it back");
        } else {
            assert_eq!(c.send_buffer(), START, "{case}");
        }
    }
}

/// A connection whose owner starts its buffers smaller than configured
/// (an inet server short of budget) keeps autotuning: a fast transfer
/// each way stays within the new sizes, asks for more, and grows as far
/// as the ceilings the owner raises; a size the application set shrinks
/// and stays fixed.
#[test]
fn buffers_started_small_grow_once_the_owner_raises_their_ceilings() {
    const SMALL: usize = 16 * 1024;
    let mut net = Net::new();
    let (ha, hb) = net.connect_pair(80);
    assert_eq!(net.a.tcp().start_buffers(ha, SMALL, SMALL, net.now), Ok((SMALL, SMALL)));
    let c = net.a.tcp_ref().connection(ha).unwrap();
    assert_eq!([c.send_buffer(), c.send_buffer_ceiling(), c.recv_buffer(), c.recv_buffer_ceiling()], [SMALL; 4]);
    let data = pattern(2 << 20, 5);
    assert!(net.transfer(Side::A, ha, hb, &data, Duration::from_secs(10)) == data, "a to b");
    assert!(net.transfer(Side::B, hb, ha, &data, Duration::from_secs(10)) == data, "b to a");
    let c = net.a.tcp_ref().connection(ha).unwrap();
    assert_eq!((c.send_buffer(), c.recv_buffer()), (SMALL, SMALL), "held at the ceilings");
    assert!(c.send_buffer_wanted() > SMALL && c.recv_buffer_wanted() > SMALL, "autotuning asks for more");
    net.a.tcp().set_send_buffer_ceiling(ha, 1 << 20, net.now).unwrap();
    net.a.tcp().set_recv_buffer_ceiling(ha, 1 << 20, net.now).unwrap();
    let c = net.a.tcp_ref().connection(ha).unwrap();
    assert!(c.send_buffer() > SMALL && c.recv_buffer() > SMALL, "{} {}", c.send_buffer(), c.recv_buffer());

    // A size the application set shrinks, and stays fixed.
    let (hc, _hd) = net.connect_pair(81);
    net.a.tcp().set_recv_buffer(hc, 128 * 1024, net.now).unwrap();
    assert_eq!(net.a.tcp().start_buffers(hc, SMALL, SMALL, net.now), Ok((SMALL, SMALL)));
    net.a.tcp().set_recv_buffer_ceiling(hc, 1 << 20, net.now).unwrap();
    assert_eq!(net.a.tcp_ref().connection(hc).unwrap().recv_buffer(), SMALL);
}
