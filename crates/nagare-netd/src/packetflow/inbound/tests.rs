//! The filter and the memory manager against a real engine: frames a
//! peer engine sends, judged before ours receives them.

use super::super::filter::{BULK_PROBE_EVERY, BULK_SEGMENTS};
use super::super::mm::START;
use super::super::peek::ETHERNET_HEADER;
use super::*;
use crate::config::NetdConfig;
use nagare_core::buf::BufferPool;
use nagare_core::{Capabilities, Instant, InterfaceConfig};
use nagare_dev::UdpShed;
use nagare_wire::{EthernetAddress, Ipv4Cidr};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

const PEER: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const US: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const NOW: Instant = Instant::from_secs(100);
const QUEUE: usize = 4;
/// Client keys.
const HIGH_CLIENT: u64 = 1;
const LOW_CLIENT: u64 = 2;

/// Payload bytes of a datagram in the memory manager's tests, and the
/// size at nice 0 they scale maxima from: 512 KiB at priority 100, 128
/// KiB at 130.
const LEN: usize = 1400;
const MM_DEFAULT: usize = 256 * 1024;

fn engine(mac: u8, ip: Ipv4Addr, queue_packets: usize) -> Interface {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, mac]), Ipv4Cidr::new(ip, 24).unwrap());
    config.udp_rx_queue_packets = queue_packets;
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

/// A peer and us, ARP resolved, with UDP sockets on 7001 (of the client
/// of priority 100) and 7002 (of the client of priority 130).
struct Setup {
    peer: Interface,
    us: Interface,
    from: UdpHandle,
    high: UdpHandle,
    low: UdpHandle,
    receivers: Receivers,
    memory: Memory,
    stats: NetdStats,
}

fn setup() -> Setup {
    setup_with(QUEUE)
}

/// [`setup`] with queues of `queue_packets` datagrams.
fn setup_with(queue_packets: usize) -> Setup {
    let (mut peer, mut us) = (engine(2, PEER, queue_packets), engine(1, US, queue_packets));
    let from = peer.udp().bind(SocketAddrV4::new(PEER, 5000)).unwrap();
    let high = us.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7001)).unwrap();
    let low = us.udp().bind(SocketAddrV4::new(US, 7002)).unwrap();
    // ARP both ways: a datagram to a port nobody holds, and its ICMP error.
    peer.udp().send_to(from, b"hello", SocketAddrV4::new(US, 9), NOW).unwrap();
    for _ in 0..10 {
        let (there, back): (Vec<_>, Vec<_>) = (peer.tx_queue().drain(..).collect(), us.tx_queue().drain(..).collect());
        there.into_iter().for_each(|f| us.receive(f, NOW));
        back.into_iter().for_each(|f| peer.receive(f, NOW));
    }
    assert!(peer.tx_queue().is_empty() && us.tx_queue().is_empty());
    let mut receivers = Receivers::default();
    receivers.set_client(HIGH_CLIENT, 100);
    receivers.set_client(LOW_CLIENT, 130);
    receivers.add(high, HIGH_CLIENT, 1);
    receivers.add(low, LOW_CLIENT, 1);
    let memory = Memory::new(&NetdConfig::default(), 64 << 20);
    Setup { peer, us, from, high, low, receivers, memory, stats: NetdStats::default() }
}

impl Setup {
    /// The frame the peer sends for a datagram of `len` bytes to our `port`.
    fn datagram(&mut self, port: u16, len: usize) -> PacketBuf {
        self.peer.udp().send_to(self.from, &vec![7; len], SocketAddrV4::new(US, port), NOW).unwrap();
        let frame = self.peer.tx_queue().pop_front().expect("a frame");
        assert!(self.peer.tx_queue().is_empty(), "one frame");
        frame
    }

    /// The receive queue limit of socket `h`.
    fn limit(&self, h: UdpHandle) -> usize {
        self.us.udp_ref().socket(h).unwrap().queue_limits().1
    }

    /// Datagrams of [`LEN`] bytes to `port`, a batch each, until one is
    /// not let through or the engine drops one (at most `most`): how
    /// many were queued, the last verdict, and each growth of the
    /// queue (bytes queued and the limit before, the limit after).
    fn flood(&mut self, inbound: &mut Inbound, port: u16, most: usize) -> (usize, Verdict, Vec<[usize; 3]>) {
        let h = self.us.udp_ref().receiver_of(SocketAddrV4::new(US, port)).unwrap().0;
        let mut growths = Vec::new();
        for n in 0..most {
            let (queued, before) = (self.us.udp_ref().socket(h).unwrap().queued_bytes(), self.limit(h));
            let dropped = self.us.counters().drop_udp_queue_full;
            let frame = self.datagram(port, LEN);
            let v = self.batch(inbound, vec![frame])[0];
            if self.limit(h) != before {
                growths.push([queued, before, self.limit(h)]);
            }
            if v != Verdict::Pass || self.us.counters().drop_udp_queue_full != dropped {
                return (n, v, growths);
            }
        }
        (most, Verdict::Pass, growths)
    }

    /// `inbound`'s verdict on `frame`.
    fn judge(&mut self, inbound: &mut Inbound, frame: &PacketBuf) -> Verdict {
        inbound.judge(&mut self.us, &self.receivers, &self.memory, &mut self.stats, frame)
    }

    /// Judges a batch of `frames`; those let through go to our engine.
    /// The verdicts.
    fn batch(&mut self, inbound: &mut Inbound, frames: Vec<PacketBuf>) -> Vec<Verdict> {
        inbound.begin_batch();
        let mut verdicts = Vec::new();
        let mut passed = Vec::new();
        for f in frames {
            let v = self.judge(inbound, &f);
            if v == Verdict::Pass {
                passed.push(f);
            }
            verdicts.push(v);
        }
        self.us.receive_batch(passed.drain(..), NOW);
        verdicts
    }
}

/// [`setup_with`] queues of 1024 datagrams, each socket's queue at the
/// memory manager's start and charged to its client, with `memory` the
/// accounts.
fn setup_mm(memory: Memory) -> Setup {
    let mut s = setup_with(1024);
    s.memory = memory;
    for (h, client) in [(s.high, HIGH_CLIENT), (s.low, LOW_CLIENT)] {
        s.us.udp().set_recv_queue_limit(h, START).unwrap();
        s.memory.charge(client, 1, START);
    }
    s
}

/// The memory manager alone.
fn mm_only() -> Inbound {
    Inbound::new(None, Some(MemoryManager::new(MM_DEFAULT))).unwrap()
}

/// Accounts with `budget` per client over a pool of `pool` bytes.
fn accounts(budget: usize, pool: usize) -> Memory {
    Memory::new(&NetdConfig { client_memory: budget, ..NetdConfig::default() }, pool)
}

/// The filter alone, drawing from `seed`.
fn filter_only(seed: u64) -> Inbound {
    Inbound::new(Some(Filter::new(seed)), None).unwrap()
}

/// The filter alone, its next period dropping with probability `drops` /
/// (`drops` + `seen`), as the controller may come to.
fn dropping(drops: u64, seen: u64) -> Inbound {
    let mut inbound = filter_only(42);
    let junk = PacketBuf::from_slice(&BufferPool::new(64, 4), 0, &[0; 10]).unwrap();
    let mut us = engine(1, US, QUEUE);
    let memory = Memory::new(&NetdConfig::default(), 64 << 20);
    for _ in 0..seen {
        let v = inbound.judge(&mut us, &Receivers::default(), &memory, &mut NetdStats::default(), &junk);
        assert_eq!(v, Verdict::Pass);
    }
    end_period(&mut inbound, drops);
    assert_eq!(inbound.filter().unwrap().last_period(), (drops, seen));
    let total = u128::from(drops) + u128::from(seen);
    let p = (u128::from(drops) << 32).checked_div(total).map_or(0, |p| p as u64);
    inbound.filter_mut().unwrap().set_probability(p);
    inbound
}

/// Ends a period in which the receive path dropped `drops` frames and
/// netd was saturated: the drop probability grows (stays at one).
fn end_period(inbound: &mut Inbound, drops: u64) {
    period_with_reads(inbound, drops, true);
}

#[test]
fn datagrams_for_a_full_queue_are_dropped_by_the_filter_not_by_the_engine() {
    let mut s = setup();
    let mut filter = filter_only(1);
    // One batch: the first QUEUE fill the queue (the engine has delivered
    // none of them when the rest are judged), the rest are dropped.
    let frames = (0..QUEUE + 3).map(|_| s.datagram(7001, 100)).collect();
    let verdicts = s.batch(&mut filter, frames);
    let expected: Vec<_> =
        (0..QUEUE + 3).map(|i| if i < QUEUE { Verdict::Pass } else { Verdict::Overflow(s.high) }).collect();
    assert_eq!(verdicts, expected);
    assert_eq!(s.us.udp_ref().socket(s.high).unwrap().queued(), QUEUE);
    // A batch later, the queue is full already.
    let frames = vec![s.datagram(7001, 10)];
    assert_eq!(s.batch(&mut filter, frames), [Verdict::Overflow(s.high)]);
    assert_eq!(s.us.counters().drop_udp_queue_full, 0, "the engine dropped none");
    // Another socket is not held up by it, and one read makes room.
    let frames = vec![s.datagram(7002, 10)];
    assert_eq!(s.batch(&mut filter, frames), [Verdict::Pass]);
    assert!(s.us.udp().recv(s.high).unwrap().is_some());
    let frames = vec![s.datagram(7001, 10), s.datagram(7001, 10)];
    assert_eq!(s.batch(&mut filter, frames), [Verdict::Pass, Verdict::Overflow(s.high)]);
    assert_eq!(s.us.udp_ref().socket(s.high).unwrap().queued(), QUEUE);
    assert_eq!(s.us.counters().drop_udp_queue_full, 0);
}

#[test]
fn while_the_receive_path_drops_low_priority_datagrams_go_at_the_drop_probability_and_high_priority_ones_never() {
    let mut s = setup();
    // A drop probability of a quarter.
    let mut filter = dropping(1000, 3000);
    let (high, low) = (s.datagram(7001, 10), s.datagram(7002, 10));
    let (mut high_dropped, mut low_dropped) = (0, 0);
    const DRAWS: usize = 10_000;
    for _ in 0..DRAWS {
        filter.begin_batch();
        high_dropped += usize::from(s.judge(&mut filter, &high) != Verdict::Pass);
        match s.judge(&mut filter, &low) {
            Verdict::Pass => {}
            Verdict::LowPriority(h) if h == s.low => low_dropped += 1,
            v => panic!("{v:?}"),
        }
    }
    assert_eq!(high_dropped, 0, "the highest priority receiving is never dropped");
    let rate = low_dropped as f64 / DRAWS as f64;
    assert!((rate - 0.25).abs() < 0.02, "dropped {rate} of the low priority datagrams, not about 0.25");
}

#[test]
fn a_receiver_is_of_high_priority_when_none_better_receives_or_its_client_is_boosted() {
    let mut s = setup();
    let mut filter = dropping(u64::MAX / 2, 0);
    let (high, low) = (s.datagram(7001, 10), s.datagram(7002, 10));
    // The low priority socket alone receives: it is the best there is.
    for _ in 0..100 {
        filter.begin_batch();
        assert_eq!(s.judge(&mut filter, &low), Verdict::Pass);
    }
    // Once a better one receives, this period and the next.
    assert_eq!(s.judge(&mut filter, &high), Verdict::Pass);
    assert_eq!(s.judge(&mut filter, &low), Verdict::LowPriority(s.low));
    end_period(&mut filter, u64::MAX / 2);
    assert_eq!(s.judge(&mut filter, &low), Verdict::LowPriority(s.low));
    // Boosted by the scheduler: high priority whatever its value.
    s.receivers.set_boosted(LOW_CLIENT, true);
    assert_eq!(s.judge(&mut filter, &low), Verdict::Pass);
    s.receivers.set_boosted(LOW_CLIENT, false);
    assert_eq!(s.judge(&mut filter, &low), Verdict::LowPriority(s.low));
    // Two periods without the better one: the low one is the best again.
    end_period(&mut filter, u64::MAX / 2);
    end_period(&mut filter, u64::MAX / 2);
    assert_eq!(s.judge(&mut filter, &low), Verdict::Pass);
    // Its own option makes it the better one.
    s.receivers.set_own(s.low, Some(100));
    assert_eq!(s.judge(&mut filter, &high), Verdict::Pass);
    assert_eq!(s.judge(&mut filter, &low), Verdict::Pass);
}

#[test]
fn a_better_client_receiving_tcp_makes_udp_receivers_of_less_priority_low() {
    let mut s = setup();
    let mut filter = dropping(u64::MAX / 2, 0);
    let low = s.datagram(7002, 10);
    filter.begin_batch();
    assert_eq!(s.judge(&mut filter, &low), Verdict::Pass, "the best receiver there is");
    // A client of priority 100 received TCP segments in this period: in
    // the next, the UDP receiver is of low priority.
    filter.filter_mut().unwrap().note_receiver(100, 1);
    end_period(&mut filter, u64::MAX / 2);
    assert_eq!(s.judge(&mut filter, &low), Verdict::LowPriority(s.low));
    // A period without it: the best again.
    end_period(&mut filter, u64::MAX / 2);
    assert_eq!(s.judge(&mut filter, &low), Verdict::Pass);
}

/// Ends a period in which the receive path dropped `drops` frames and
/// netd's every read found a full batch (`saturated`) or none did.
fn period_with_reads(inbound: &mut Inbound, drops: u64, saturated: bool) {
    let filter = inbound.filter_mut().unwrap();
    for _ in 0..8 {
        filter.note_read(saturated);
    }
    filter.end_period(drops);
}

fn shed(inbound: &Inbound, s: &Setup) -> UdpShed {
    inbound.filter().unwrap().shed(&s.receivers, &s.us)
}

#[test]
fn the_device_is_given_the_ports_of_low_priority_sockets_and_b1_is_left_to_it() {
    let mut s = setup();
    let mut inbound = filter_only(42);
    let high = s.datagram(7001, 10);
    assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
    // Dropping without netd saturated: nothing shed (netd has room).
    period_with_reads(&mut inbound, 1, false);
    assert!(shed(&inbound, &s).ports.is_empty());
    // Saturated and dropping, the high-priority receiver keeping up: a
    // quarter shed, then a quarter of what is left more (the rest
    // admitted, in 64ths).
    assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
    period_with_reads(&mut inbound, 1, true);
    assert_eq!(shed(&inbound, &s).ports, [(7002, 3 << 30)]);
    assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
    period_with_reads(&mut inbound, 1, true);
    assert_eq!(shed(&inbound, &s).ports, [(7002, 9 << 28)]);
    // As long as that lasts, all but a 64th, which a low-priority
    // receiver always keeps (and B1's drop rate is nearly every frame).
    for _ in 0..40 {
        inbound.begin_batch();
        assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
        period_with_reads(&mut inbound, 1000, true);
    }
    assert_eq!(shed(&inbound, &s).ports, [(7002, 1 << 26)]);
    // A boosted client's socket is of high priority: not shed.
    s.receivers.set_boosted(LOW_CLIENT, true);
    assert!(shed(&inbound, &s).ports.is_empty());
    s.receivers.set_boosted(LOW_CLIENT, false);
    // While the device sheds, netd's B1 drops nothing a second time.
    let low = s.datagram(7002, 10);
    inbound.filter_mut().unwrap().set_shed_by_device(true);
    for _ in 0..100 {
        inbound.begin_batch();
        assert_eq!(s.judge(&mut inbound, &low), Verdict::Pass);
    }
    inbound.filter_mut().unwrap().set_shed_by_device(false);
    inbound.begin_batch();
    assert_eq!(s.judge(&mut inbound, &low), Verdict::LowPriority(s.low), "B1 here again");
    // netd keeps up again: the shed loses a quarter a period, to none.
    let mut admitted = Vec::new();
    for _ in 0..20 {
        inbound.begin_batch();
        assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
        period_with_reads(&mut inbound, 1, false);
        admitted.push(shed(&inbound, &s).ports.first().map_or(u32::MAX, |p| p.1));
    }
    assert_eq!(admitted[0], 1 << 30, "three quarters shed");
    assert!(admitted.windows(2).all(|w| w[0] <= w[1]), "{admitted:?}");
    assert_eq!(admitted.last(), Some(&u32::MAX), "none shed");
}

/// A client of the best priority receiving TCP in bulk has the
/// low-priority datagrams shed while the receive path drops, netd
/// saturated or not (TCP takes the CPU the shed frees): fifteen sixteenths
/// from the first period on; an interactive connection, or a bulk one of
/// lower priority than a UDP receiver, does not.
#[test]
fn a_better_client_receiving_tcp_in_bulk_has_fifteen_sixteenths_of_low_priority_datagrams_shed() {
    let s = setup();
    let mut inbound = filter_only(42);
    let admitted = |inbound: &Inbound| shed(inbound, &s).ports.first().map_or(u32::MAX, |p| p.1);
    // Drops with no receiver seen at all: nothing to shed for.
    for _ in 0..5 {
        period_with_reads(&mut inbound, 1, false);
        assert_eq!(inbound.filter().unwrap().probability(), 0);
    }
    for _ in 0..5 {
        inbound.filter_mut().unwrap().note_receiver(100, BULK_SEGMENTS - 1);
        period_with_reads(&mut inbound, 1, false);
        assert_eq!(admitted(&inbound), u32::MAX, "an interactive connection: nothing shed");
    }
    let bulk = |inbound: &mut Inbound, drops: u64, saturated: bool| {
        inbound.filter_mut().unwrap().note_receiver(100, BULK_SEGMENTS);
        period_with_reads(inbound, drops, saturated);
    };
    let mut seen = Vec::new();
    for _ in 0..2 * (BULK_PROBE_EVERY + 1) + 1 {
        bulk(&mut inbound, 1, false);
        seen.push(admitted(&inbound));
    }
    // A sixteenth admitted at once, then a period without the shed in
    // every BULK_PROBE_EVERY + 1; it dropped too, so the shed is back.
    let probe = BULK_PROBE_EVERY as usize;
    for (i, &a) in seen.iter().enumerate() {
        let expected = if i % (probe + 1) == probe { u32::MAX } else { 1 << 28 };
        assert_eq!(a, expected, "period {i}: {seen:?}");
    }
    assert_eq!(shed(&inbound, &s).ports.len(), 1, "the high-priority socket is not shed");
    // Its drops were the shed's own (a TAP's shed counts among them): the
    // period without it drops nothing, and the shed stays off.
    let mut seen = Vec::new();
    for _ in 0..3 * (BULK_PROBE_EVERY + 1) {
        let shedding = admitted(&inbound) != u32::MAX;
        bulk(&mut inbound, u64::from(shedding), false);
        seen.push(admitted(&inbound));
    }
    assert!(seen.iter().skip(probe + 1).all(|&a| a == u32::MAX), "{seen:?}");
    bulk(&mut inbound, 1, false);
    assert_eq!(admitted(&inbound), 1 << 28, "back at once when the load drops again");
    // Saturated and bulk from none: fifteen sixteenths at once, not a
    // quarter.
    let mut other = filter_only(7);
    other.filter_mut().unwrap().note_receiver(100, BULK_SEGMENTS);
    period_with_reads(&mut other, 1, true);
    assert_eq!(shed(&other, &s).ports, [(7002, 1 << 28)]);
    // Saturated as well: all but a 64th may go.
    for _ in 0..30 {
        inbound.filter_mut().unwrap().note_receiver(100, BULK_SEGMENTS);
        period_with_reads(&mut inbound, 1, true);
    }
    assert_eq!(admitted(&inbound), 1 << 26);
    // Back to the bulk receiver alone: a sixteenth admitted again from the
    // next period (a quarter less than sixty-three sixty-fourths is below
    // fifteen sixteenths).
    bulk(&mut inbound, 1, false);
    assert_eq!(admitted(&inbound), 1 << 28);
    // The receive path keeps up: the shed goes.
    for _ in 0..30 {
        bulk(&mut inbound, 0, false);
    }
    assert_eq!(admitted(&inbound), u32::MAX);
    // Bulk TCP at 130 while the UDP receiver at 100 receives: the
    // datagrams of 130 are not the ones holding a better receiver back.
    let mut s = setup();
    let mut inbound = filter_only(42);
    let high = s.datagram(7001, 10);
    for _ in 0..10 {
        inbound.begin_batch();
        assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
        inbound.filter_mut().unwrap().note_receiver(130, 10 * BULK_SEGMENTS);
        period_with_reads(&mut inbound, 1, false);
        assert!(shed(&inbound, &s).ports.is_empty());
    }
}

#[test]
fn a_high_priority_receiver_whose_queue_overflows_stops_the_shed() {
    let mut s = setup();
    let mut inbound = filter_only(42);
    let high = s.datagram(7001, 10);
    assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
    period_with_reads(&mut inbound, 1, true);
    assert_eq!(shed(&inbound, &s).ports, [(7002, 3 << 30)]);
    // Its queue full: its own process is what holds it back, and what the
    // device sheds for it would be lost to the others for nothing.
    let frames = (0..QUEUE + 1).map(|_| s.datagram(7001, 10)).collect();
    let verdicts = s.batch(&mut inbound, frames);
    assert_eq!(verdicts.last(), Some(&Verdict::Overflow(s.high)));
    period_with_reads(&mut inbound, 1, true);
    // Three quarters of a quarter, rounded to a 64th: 12 of them shed.
    assert_eq!(shed(&inbound, &s).ports, [(7002, 52 << 26)]);
    // A low-priority queue overflowing does not stop it (B1 left to the
    // device, so that every one of them reaches the queue).
    inbound.filter_mut().unwrap().set_shed_by_device(true);
    assert!(s.us.udp().recv(s.high).unwrap().is_some());
    let frames = (0..QUEUE + 1).map(|_| s.datagram(7002, 10)).collect();
    let verdicts = s.batch(&mut inbound, frames);
    assert_eq!(verdicts.last(), Some(&Verdict::Overflow(s.low)));
    inbound.begin_batch();
    assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
    period_with_reads(&mut inbound, 1, true);
    assert!(shed(&inbound, &s).ports[0].1 < 52 << 26, "{:?}", shed(&inbound, &s));
}

#[test]
fn nothing_is_dropped_for_low_priority_while_the_receive_path_does_not_drop() {
    let mut s = setup();
    let mut filter = dropping(0, 500);
    let (high, low) = (s.datagram(7001, 10), s.datagram(7002, 10));
    for _ in 0..1000 {
        filter.begin_batch();
        assert_eq!(s.judge(&mut filter, &high), Verdict::Pass);
        assert_eq!(s.judge(&mut filter, &low), Verdict::Pass);
    }
}

#[test]
fn tcp_segments_are_never_dropped() {
    let mut s = setup();
    let mut filter = dropping(1, 0);
    s.us.tcp().listen(SocketAddrV4::new(US, 7002), 4).unwrap();
    let high = s.datagram(7001, 10);
    assert_eq!(s.judge(&mut filter, &high), Verdict::Pass);
    s.peer.tcp().connect(SocketAddrV4::new(US, 7002), 0, NOW).unwrap();
    let syn = s.peer.tx_queue().pop_front().expect("a SYN");
    for _ in 0..100 {
        assert_eq!(s.judge(&mut filter, &syn), Verdict::Pass);
    }
    // A UDP datagram to the same port is dropped at this rate; the same
    // bytes said to be TCP are not.
    let low = s.datagram(7002, 10);
    assert_eq!(s.judge(&mut filter, &low), Verdict::LowPriority(s.low));
    let mut bytes = low.to_vec();
    bytes[ETHERNET_HEADER + 9] = 6;
    let as_tcp = PacketBuf::from_slice(&BufferPool::new(2048, 4), 0, &bytes).unwrap();
    assert_eq!(s.judge(&mut filter, &as_tcp), Verdict::Pass);
    s.us.receive(syn, NOW);
    assert!(!s.us.tx_queue().is_empty(), "the SYN reached the listener, which answers");
}

#[test]
fn frames_it_cannot_read_as_a_whole_udp_datagram_for_us_pass_to_the_engine() {
    let mut s = setup();
    let mut filter = dropping(1, 0);
    let high = s.datagram(7001, 10);
    assert_eq!(s.judge(&mut filter, &high), Verdict::Pass);
    let low = s.datagram(7002, 100).to_vec();
    let pool = BufferPool::new(2048, 16);
    let judge = |s: &mut Setup, filter: &mut Inbound, bytes: &[u8]| {
        let frame = PacketBuf::from_slice(&pool, 0, bytes).unwrap();
        s.judge(filter, &frame)
    };
    assert_eq!(judge(&mut s, &mut filter, &low), Verdict::LowPriority(s.low), "whole, it is dropped");
    for len in 0..low.len() {
        assert_eq!(judge(&mut s, &mut filter, &low[..len]), Verdict::Pass, "cut at {len}");
    }
    let changed = |at: usize, value: u8| {
        let mut b = low.clone();
        b[at] = value;
        b
    };
    for (what, bytes) in [
        ("another MAC address", changed(5, 0x99)),
        ("ARP", changed(13, 0x06)),
        ("IPv6 in the version", changed(14, 0x65)),
        ("an IP header shorter than 20", changed(14, 0x44)),
        ("TCP", changed(23, 6)),
        ("more fragments", changed(20, 0x20)),
        ("a fragment offset", changed(21, 0x01)),
        ("another address", changed(33, 77)),
        ("a UDP length under the header's", changed(39, 7)),
        ("a UDP length past the IP payload", changed(39, 200)),
        ("an IP length under the UDP length", changed(17, 40)),
    ] {
        assert_eq!(judge(&mut s, &mut filter, &bytes), Verdict::Pass, "{what}");
    }
    // Anything at all: no panic.
    let mut x = 0x1234_5678_u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = low.clone();
        let at = (x as usize) % b.len();
        b[at] = (x >> 32) as u8;
        let at = ((x >> 16) as usize) % b.len();
        b[at] = (x >> 40) as u8;
        let _ = judge(&mut s, &mut filter, &b[..(x >> 48) as usize % (b.len() + 1)]);
    }
}

#[test]
fn a_queue_doubles_only_while_full_up_to_its_maximum() {
    let mut s = setup_mm(accounts(64 << 20, 64 << 20));
    let mut inbound = mm_only();
    // Read as its datagrams come, a queue never fills and never grows.
    for _ in 0..200 {
        let frame = s.datagram(7001, LEN);
        assert_eq!(s.batch(&mut inbound, vec![frame]), [Verdict::Pass]);
        assert!(s.us.udp().recv(s.high).unwrap().is_some());
    }
    assert_eq!((s.limit(s.high), s.stats.mm_grown), (START, 0));
    // Not read: each time a datagram would not fit, the queue doubles,
    // up to SB_max = 256 KiB x (140 - 100) / 20.
    let (queued, v, growths) = s.flood(&mut inbound, 7001, 1000);
    assert_eq!(growths.iter().map(|g| g[2]).collect::<Vec<_>>(), [128 << 10, 256 << 10, 512 << 10]);
    for [held, before, after] in growths {
        assert!(held + LEN > before, "grown from {before} holding {held}: it was not full");
        assert_eq!(after, 2 * before);
    }
    assert_eq!((v, queued), (Verdict::Pass, (512 << 10) / LEN), "at its maximum the engine drops the next");
    assert_eq!(s.stats.mm_grown, 3);
    assert_eq!(s.us.counters().drop_udp_queue_full, 1);
    assert_eq!(s.memory.socket_charged(HIGH_CLIENT, 1), 512 << 10, "every growth charged");
    assert_eq!(s.stats.mm_refused, 0, "a queue at its maximum is not refused");
}

#[test]
fn the_clients_budget_and_netds_cap_stop_a_growth() {
    // A budget of 100 KiB: 64 KiB grows to 100 KiB, then no more.
    let mut s = setup_mm(accounts(100 << 10, 64 << 20));
    let mut inbound = mm_only();
    let (queued, _, growths) = s.flood(&mut inbound, 7001, 1000);
    assert_eq!(growths, [[START - START % LEN, START, 100 << 10]]);
    assert_eq!((queued, s.stats.mm_grown, s.stats.mm_refused), ((100 << 10) / LEN, 1, 1));
    assert_eq!(s.memory.client_charged(HIGH_CLIENT), 100 << 10);
    // A cap of 224 KiB (a 256 KiB pool less an eighth), 64 KiB of it the
    // other client's: the queue grows to 128 KiB, then to the 160 KiB
    // left, then no more.
    let mut s = setup_mm(accounts(64 << 20, 256 << 10));
    let mut inbound = mm_only();
    let (_, _, growths) = s.flood(&mut inbound, 7001, 1000);
    assert_eq!(growths.iter().map(|g| g[2]).collect::<Vec<_>>(), [128 << 10, 160 << 10]);
    assert_eq!((s.stats.mm_grown, s.stats.mm_refused), (2, 1));
    assert_eq!(s.memory.line().charged, 224 << 10, "the cap, all of it");
}

#[test]
fn the_filter_spares_the_datagram_that_grows_a_queue_and_no_other() {
    let mut s = setup_mm(accounts(64 << 20, 64 << 20));
    let mut inbound = Inbound::new(Some(Filter::new(42)), Some(MemoryManager::new(MM_DEFAULT))).unwrap();
    // While the receive path does not drop, the best (100) receives and
    // the socket of priority 130 fills its 64 KiB.
    let high = s.datagram(7001, 10);
    assert_eq!(s.judge(&mut inbound, &high), Verdict::Pass);
    let (queued, v, growths) = s.flood(&mut inbound, 7002, START / LEN);
    assert_eq!((queued, v, growths.len()), (START / LEN, Verdict::Pass, 0));
    // Now the receive path drops so much that B1 drops every datagram for
    // a receiver below the best. The one that grows the full queue passes;
    // the next, which fits, is dropped for its low priority: the room a
    // queue could grow to spares nothing.
    end_period(&mut inbound, u64::MAX / 2);
    inbound.filter_mut().unwrap().set_probability(1 << 32);
    let (queued, v, growths) = s.flood(&mut inbound, 7002, 10);
    assert_eq!(growths.iter().map(|g| g[2]).collect::<Vec<_>>(), [128 << 10]);
    assert_eq!((queued, v), (1, Verdict::LowPriority(s.low)));
    // The best socket's queue (SB_max 512 KiB) grows instead of
    // overflowing, until it can grow no more (B2).
    let (queued, v, _) = s.flood(&mut inbound, 7001, 1000);
    assert_eq!((queued, v), ((512 << 10) / LEN, Verdict::Overflow(s.high)));
    assert_eq!(s.us.counters().drop_udp_queue_full, 0, "the engine dropped none");
}

#[test]
fn a_priority_that_falls_cuts_the_queue_back_to_its_maximum_never_below_what_it_holds() {
    let mut s = setup_mm(accounts(64 << 20, 64 << 20));
    let mm = MemoryManager::new(MM_DEFAULT);
    let mut inbound = Inbound::new(None, Some(mm)).unwrap();
    let (queued, _, _) = s.flood(&mut inbound, 7001, 1000);
    assert_eq!(s.limit(s.high), 512 << 10);
    let fit = |s: &mut Setup| {
        let dest = s.receivers.destination(s.high).unwrap();
        mm.fit(&mut s.us, &s.memory, s.high, &dest);
        let held = s.us.udp_ref().socket(s.high).unwrap().queued_bytes();
        (s.limit(s.high), held, s.memory.socket_charged(HIGH_CLIENT, 1))
    };
    assert_eq!(fit(&mut s).0, 512 << 10, "at its priority, nothing moves");
    // 139: SB_max 12.8 KiB, raised to the 16 KiB floor.
    s.receivers.set_own(s.high, Some(139));
    let (limit, held, charged) = fit(&mut s);
    assert_eq!((limit, charged), (held, held), "cut to what it holds");
    // Above its maximum it does not grow: the engine drops the next.
    let grown = s.stats.mm_grown;
    let (_, _, growths) = s.flood(&mut inbound, 7001, 1);
    assert!(growths.is_empty() && s.stats.mm_grown == grown);
    for _ in 0..queued / 2 {
        s.us.udp().recv(s.high).unwrap().unwrap();
    }
    let (limit, held, charged) = fit(&mut s);
    assert_eq!((limit, charged), (held, held), "cut again as it drains");
    while s.us.udp().recv(s.high).unwrap().is_some() {}
    assert_eq!(fit(&mut s), (16 << 10, 0, 16 << 10));
    // A priority that rises moves the maximum; the queue grows once full.
    s.receivers.set_own(s.high, None);
    assert_eq!(fit(&mut s).0, 16 << 10);
    let (_, _, growths) = s.flood(&mut inbound, 7001, 20);
    assert_eq!(growths.iter().map(|g| g[2]).collect::<Vec<_>>(), [32 << 10]);
}

/// Our engine with IPv6 too (`US6`, taken at once), in place of
/// [`setup`]'s, and a UDP frame over IPv6 from the peer's address to
/// `dst` port `port` with `len` bytes (its checksum 0: the filter does
/// not read it); `next_header` is UDP's, or another.
const US6: Ipv6Addr = Ipv6Addr::new(0xfd09, 0, 0, 0, 0, 0, 0, 1);

fn engine6(queue_packets: usize) -> Interface {
    let mut config = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), Ipv4Cidr::new(US, 24).unwrap());
    config.udp_rx_queue_packets = queue_packets;
    config.ipv6 = Some(nagare_core::Ipv6Config {
        addresses: vec![format!("{US6}/64").parse().unwrap()],
        dad_transmits: 0,
        router_solicitations: 0,
        ..nagare_core::Ipv6Config::default()
    });
    Interface::new(config, Capabilities::default(), BufferPool::new(2048, 1024))
}

fn frame6(dst: Ipv6Addr, port: u16, len: usize, next_header: u8) -> PacketBuf {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
    let udp_len = (8 + len) as u16;
    f.extend([0x60, 0, 0, 0]);
    f.extend(udp_len.to_be_bytes());
    f.extend([next_header, 64]);
    f.extend(Ipv6Addr::new(0xfd09, 0, 0, 0, 0, 0, 0, 2).octets());
    f.extend(dst.octets());
    f.extend(5000u16.to_be_bytes());
    f.extend(port.to_be_bytes());
    f.extend(udp_len.to_be_bytes());
    f.extend([0, 0]);
    f.extend(vec![7; len]);
    PacketBuf::from_slice(&BufferPool::new(2048, 4), 0, &f).unwrap()
}

#[test]
fn datagrams_of_both_families_to_a_dual_stack_socket_count_against_its_one_queue() {
    let mut s = setup();
    s.us = engine6(QUEUE);
    let dual = s.us.udp().bind6_dual_stack(7003).unwrap();
    let mut filter = filter_only(3);
    let frames = vec![
        s.datagram(7003, 100),
        frame6(US6, 7003, 100, 17),
        s.datagram(7003, 100),
        frame6(US6, 7003, 100, 17),
        frame6(US6, 7003, 100, 17),
        s.datagram(7003, 100),
    ];
    let verdicts = s.batch(&mut filter, frames);
    let expected: Vec<_> =
        (0..QUEUE + 2).map(|i| if i < QUEUE { Verdict::Pass } else { Verdict::Overflow(dual) }).collect();
    assert_eq!(verdicts, expected);
    // Not ours, or not UDP right after the IPv6 header: the engine's.
    let other = Ipv6Addr::new(0xfd09, 0, 0, 0, 0, 0, 0, 9);
    for (what, frame) in
        [("another address", frame6(other, 7003, 10, 17)), ("an extension header", frame6(US6, 7003, 10, 0))]
    {
        assert_eq!(s.judge(&mut filter, &frame), Verdict::Pass, "{what}");
    }
    let whole = frame6(US6, 7003, 10, 17).to_vec();
    let pool = BufferPool::new(2048, 4);
    for len in 0..whole.len() {
        let cut = PacketBuf::from_slice(&pool, 0, &whole[..len]).unwrap();
        assert_eq!(s.judge(&mut filter, &cut), Verdict::Pass, "cut at {len}");
    }
}

#[test]
fn while_the_device_sheds_neither_an_ipv4_nor_an_ipv6_datagram_for_a_low_priority_socket_is_dropped_again_here() {
    let mut s = setup();
    s.us = engine6(QUEUE);
    let high = s.us.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7001)).unwrap();
    let low4 = s.us.udp().bind(SocketAddrV4::new(US, 7002)).unwrap();
    let low6 = s.us.udp().bind6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 7004, 0, 0)).unwrap();
    s.receivers = Receivers::default();
    s.receivers.set_client(HIGH_CLIENT, 100);
    s.receivers.set_client(LOW_CLIENT, 130);
    s.receivers.add(high, HIGH_CLIENT, 1);
    s.receivers.add(low4, LOW_CLIENT, 2);
    s.receivers.add(low6, LOW_CLIENT, 3);
    let mut inbound = dropping(1, 0);
    let (to_high, to_low4) = (s.datagram(7001, 10), s.datagram(7002, 10));
    assert_eq!(s.judge(&mut inbound, &to_high), Verdict::Pass);
    assert_eq!(s.judge(&mut inbound, &to_low4), Verdict::LowPriority(low4), "B1 here");
    assert_eq!(s.judge(&mut inbound, &frame6(US6, 7004, 10, 17)), Verdict::LowPriority(low6), "B1 here");
    inbound.filter_mut().unwrap().set_shed_by_device(true);
    assert_eq!(s.judge(&mut inbound, &to_low4), Verdict::Pass, "the device sheds IPv4");
    assert_eq!(s.judge(&mut inbound, &frame6(US6, 7004, 10, 17)), Verdict::Pass, "and IPv6");
}
