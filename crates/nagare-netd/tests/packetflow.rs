//! PacketFlow in a netd over a simulated link to a peer that echoes,
//! inline and with a driver thread (the filter runs as frames come from
//! the device or the driver). The filter: datagrams for a socket whose
//! queue is full are dropped by the filter before the engine (by the
//! engine when the filter is off); while the link drops frames on their
//! way to netd, a low-priority socket's datagrams are dropped and the
//! highest-priority socket's and a TCP stream's are not. The scheduler:
//! of clients whose sockets are full, those its rule picks are boosted,
//! and a boosted client that goes leaves nothing behind.

mod support;

use nagare::net::{TcpStream, UdpSocket};
use nagare_netd::{BoostConfig, BoostCount, PacketFlow, Placement};
use nagare_request::{encode_addr, Op, SockOption};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};
use support::{stat_value, wait_for_report, NetdThread, RawClient, Tune, Wire, ECHO_PORT, LIMIT, NETD_ADDR, PEER_ADDR};

const PEER_ECHO: SocketAddrV4 = SocketAddrV4::new(PEER_ADDR, ECHO_PORT);
/// Datagrams each of the engine's UDP sockets queues, and datagrams sent
/// to one that does not read.
const QUEUE: usize = 4;
const SENT: usize = 12;
const PLACEMENTS: [Placement; 2] = [Placement::Inline, Placement::Single];

/// The report's line for the UDP socket on `port`.
fn udp_line(report: &str, port: u16) -> &str {
    let local = format!(" udp local {NETD_ADDR}:{port} ");
    report.lines().find(|l| l.starts_with("socket ") && l.contains(&local)).expect("the socket's line")
}

/// netd in `placement` with `packetflow`: a raw client's socket, which never reads, has
/// [`SENT`] datagrams echoed to it. The report once every echo has been
/// dropped or queued.
fn echoes_to_a_socket_that_does_not_read(placement: Placement, packetflow: PacketFlow) -> String {
    let tune = Tune { udp_rx_queue_packets: Some(QUEUE), packetflow: Some(packetflow), ..Tune::default() };
    let netd = NetdThread::start_tuned(placement, Wire::PeerLink, tune, |_| {});
    let _raw = full_receiver(&netd, 9900, None);
    let s = netd.connect();
    let report = wait_for_report(&s, "every echo queued or dropped", |r| {
        let dropped = stat_value(r, "netd filter_dropped_overflow ").unwrap_or(0)
            + stat_value(r, "engine drop_udp_queue_full ").unwrap_or(0);
        dropped >= (SENT - QUEUE) as u64
    });
    assert!(udp_line(&report, 9900).contains(&format!(" recv_queued {} ", QUEUE * 100)), "{report}");
    assert_eq!(report.contains("\ndriver pid "), placement == Placement::Single, "{report}");
    report
}

#[test]
fn datagrams_for_a_full_socket_are_dropped_by_the_filter_before_the_engine() {
    for placement in PLACEMENTS {
        let report = echoes_to_a_socket_that_does_not_read(placement, PacketFlow::ALL);
        let dropped = (SENT - QUEUE) as u64;
        assert_eq!(stat_value(&report, "netd filter_dropped_overflow "), Some(dropped), "{placement:?}: {report}");
        assert_eq!(stat_value(&report, "engine drop_udp_queue_full "), None, "the engine dropped none:\n{report}");
        assert_eq!(stat_value(&report, "netd filter_dropped_low_priority "), Some(0), "{report}");
        assert!(udp_line(&report, 9900).ends_with(&format!(" filter_drops 0 overflow_drops {dropped}")), "{report}");
        assert!(report.contains("\npacketflow filter on "), "{report}");
    }
}

#[test]
fn with_the_filter_off_the_engine_drops_them_itself() {
    for placement in PLACEMENTS {
        let report = echoes_to_a_socket_that_does_not_read(placement, PacketFlow::NONE);
        let dropped = (SENT - QUEUE) as u64;
        assert_eq!(stat_value(&report, "engine drop_udp_queue_full "), Some(dropped), "{placement:?}: {report}");
        assert_eq!(stat_value(&report, "netd filter_dropped_overflow "), Some(0), "{report}");
        assert_eq!(stat_value(&report, "netd filter_dropped_low_priority "), Some(0), "{report}");
        assert!(udp_line(&report, 9900).ends_with(&format!(" filter_drops 0 overflow_drops {dropped}")), "{report}");
        assert!(report.contains("\npacketflow filter off\n"), "{report}");
    }
}

#[test]
fn while_the_link_drops_a_low_priority_socket_loses_datagrams_and_the_highest_and_tcp_lose_none() {
    for placement in PLACEMENTS {
        low_priority_datagrams_are_dropped_while_the_link_drops(placement);
    }
}

fn low_priority_datagrams_are_dropped_while_the_link_drops(placement: Placement) {
    let counter = std::env::temp_dir().join(format!("nagare-packetflow-link-drops-{}", std::process::id()));
    std::fs::write(&counter, "0").unwrap();
    let tune = Tune { link_drops: Some(counter.clone()), ..Tune::default() };
    // One frame a read: every read that finds one is full, as under load,
    // so the filter takes netd to be saturated.
    let netd = NetdThread::start_tuned(placement, Wire::PeerLink, tune, |c| c.rx_batch = 1);
    let s = netd.connect();
    let at = |port| SocketAddrV4::new(NETD_ADDR, port);
    let high = UdpSocket::bind_via(&s, at(9901)).expect("bind");
    let low = UdpSocket::bind_via(&s, at(9902)).expect("bind");
    high.set_priority(Some(100)).unwrap();
    low.set_priority(Some(139)).unwrap();
    high.set_read_timeout(Some(LIMIT)).unwrap();
    low.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut stream = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(PEER_ECHO), LIMIT).expect("connect");
    stream.set_read_timeout(Some(LIMIT)).unwrap();

    // Each round the link's count of frames it dropped on the way to netd
    // grows by far more than netd receives: the drop probability grows
    // with every period.
    let (mut link_drops, mut lost, mut rounds) = (0u64, 0, 0u32);
    let deadline = Instant::now() + LIMIT;
    let mut buf = [0u8; 2048];
    while lost < 3 || rounds < 20 {
        assert!(Instant::now() < deadline, "{placement:?}: {lost} low-priority datagrams lost in {rounds} rounds");
        rounds += 1;
        link_drops += 1 << 40;
        std::fs::write(&counter, link_drops.to_string()).unwrap();
        let word = rounds.to_be_bytes();
        high.send_to(&word, PEER_ECHO).unwrap();
        let (n, _) = high.recv_from(&mut buf).expect("the highest priority's echo, every time");
        assert_eq!(&buf[..n], &word);
        low.send_to(&word, PEER_ECHO).unwrap();
        // Its echo, or none within 20 ms (an echo of an earlier round
        // that came late is passed over).
        loop {
            match low.recv_from(&mut buf) {
                Ok((n, _)) if buf[..n] == word => break,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    lost += 1;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        let bytes = [rounds as u8; 1000];
        stream.write_all(&bytes).unwrap();
        let mut back = [0u8; 1000];
        stream.read_exact(&mut back).expect("the stream's echo");
        assert_eq!(back, bytes);
    }
    let report = s.stat().expect("stat");
    assert!(udp_line(&report, 9901).ends_with(" filter_drops 0 overflow_drops 0"), "{report}");
    // Every echo the filter dropped was missed; one missed may only have
    // been late.
    let dropped = stat_value(&report, "netd filter_dropped_low_priority ").expect("the counter");
    assert!(dropped >= 1 && dropped <= lost, "{placement:?}: {dropped} dropped, {lost} missed:\n{report}");
    assert!(udp_line(&report, 9902).contains(&format!(" filter_drops {dropped} ")), "{report}");
    assert_eq!(stat_value(&report, "netd filter_dropped_overflow "), Some(0), "{report}");
    let _ = std::fs::remove_file(&counter);
}

/// A raw client's UDP socket on `port`, of its own `priority` if given.
fn bind(raw: &mut RawClient, port: u16, priority: Option<u8>) -> u32 {
    let mut bind = raw.request(Op::UdpBind);
    bind.aux[0] = encode_addr(SocketAddrV4::new(NETD_ADDR, port));
    let udp = raw.call(bind).result().expect("bind") as u32;
    if let Some(priority) = priority {
        let mut option = raw.request(Op::SetOption);
        option.socket = udp;
        option.aux = [SockOption::Priority as u64, u64::from(priority), 0, 0];
        raw.call(option).result().expect("its priority");
    }
    udp
}

/// A raw client (which never reads) with a UDP socket on `port`, of its
/// own `priority` if given, to which [`SENT`] datagrams are echoed.
fn full_receiver(netd: &NetdThread, port: u16, priority: Option<u8>) -> RawClient {
    let mut raw = RawClient::connect(netd);
    let udp = bind(&mut raw, port, priority);
    for i in 0..SENT {
        let mut send = raw.request(Op::SendTo);
        send.socket = udp;
        send.aux[0] = encode_addr(PEER_ECHO);
        send.piece = Some(raw.give(&[i as u8; 100], 100));
        assert_eq!(raw.call(send).result(), Ok(100));
    }
    raw
}

/// Three clients, each with one UDP socket of priority 120, 125 and 130
/// whose echoes fill its queue, under a scheduler that boosts `count`,
/// each client kept awake by a request every few milliseconds (the
/// scheduler boosts only clients that call); the report once the
/// clients on 9910, 9911 and 9912 are boosted as `expected` says, the
/// clients, and a session (with no socket) to ask for reports.
fn three_full_receivers(
    count: BoostCount,
    expected: [bool; 3],
) -> (NetdThread, Vec<RawClient>, nagare::Session, String) {
    let tune = Tune { udp_rx_queue_packets: Some(QUEUE), packetflow: Some(PacketFlow::ALL), ..Tune::default() };
    // A lift would renice this test process, every client's.
    let boost = BoostConfig { count, lift: 0, time: Duration::from_secs(60), ..BoostConfig::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::PeerLink, tune, move |c| c.boost = boost);
    let mut clients: Vec<RawClient> = [120u8, 125, 130]
        .into_iter()
        .enumerate()
        .map(|(i, p)| full_receiver(&netd, 9910 + i as u16, Some(p)))
        .collect();
    let s = netd.connect();
    let deadline = Instant::now() + LIMIT;
    let report = loop {
        for c in &mut clients {
            let nop = c.request(Op::Nop);
            assert_eq!(c.call(nop).result(), Ok(0));
        }
        let r = s.stat().expect("stat");
        let full = (0..3).all(|i| udp_line(&r, 9910 + i).contains(&format!(" recv_queued {} ", QUEUE * 100)));
        let boosts = expected.iter().filter(|&&b| b).count();
        let as_expected = [9910, 9911, 9912].map(|p| boosted(&r, p)) == expected;
        if full && as_expected && r.contains(&format!("\npacketflow scheduler on boosted {boosts} ")) {
            break r;
        }
        assert!(Instant::now() < deadline, "the boosts made:\n{r}");
        std::thread::sleep(Duration::from_millis(5));
    };
    (netd, clients, s, report)
}

/// Whether the client holding the UDP socket on `port` is boosted.
fn boosted(report: &str, port: u16) -> bool {
    let socket = udp_line(report, port);
    let client = socket.split(" client ").nth(1).and_then(|r| r.split(' ').next()).expect("its client");
    let line = report.lines().find(|l| l.starts_with(&format!("client {client} "))).expect("the client's line");
    line.ends_with(" boosted yes")
}

/// The CPUs netd may run on: at most that many boosts under `auto`.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn the_scheduler_boosts_full_receivers_of_all_but_the_worst_priority_one_per_cpu() {
    let two = cpus() >= 2;
    let (_netd, _clients, _s, report) = three_full_receivers(BoostCount::Auto, [true, two, false]);
    assert!(stat_value(&report, "netd boosts ").is_some_and(|n| n > u64::from(two)), "{report}");
}

#[test]
fn a_fixed_count_boosts_the_best_candidates_even_of_the_worst_priority() {
    three_full_receivers(BoostCount::Fixed(2), [false, true, true]);
}

#[test]
fn a_boosted_client_that_goes_ends_its_boost_and_gives_back_its_memory() {
    // The paper's rule with one boost: the priority-125 client's.
    let (netd, mut clients, s, report) = three_full_receivers(BoostCount::Fixed(1), [false, true, false]);
    let charged =
        |r: &str| r.lines().find_map(|l| l.strip_prefix("memory charged ")?.split(' ').next()?.parse::<u64>().ok());
    let before = charged(&report).expect("memory charged");
    // The boosted client's key and own charge, from its line.
    let line =
        report.lines().find(|l| l.starts_with("client ") && l.contains(" boosted yes")).expect("a boosted client");
    let key = line.split(' ').nth(1).expect("its key").to_string();
    let own = line.split(" memory ").nth(1).and_then(|m| m.split(' ').next()?.parse::<u64>().ok()).expect("its charge");
    assert!(own > 0, "{report}");
    let boosted_client = clients.remove(1);
    drop(boosted_client);
    // Another client may be boosted in its place (one boost at a time),
    // so the count of boosts must match the clients that still hold one.
    let boosted = |r: &str| {
        r.lines()
            .find_map(|l| l.strip_prefix("packetflow scheduler on boosted ")?.split(' ').next()?.parse::<usize>().ok())
    };
    let after = wait_for_report(&s, "the boosted client gone", |r| {
        r.contains(" clients 3\n")
            && boosted(r) == Some(r.lines().filter(|l| l.starts_with("client ") && l.contains(" boosted yes")).count())
    });
    assert!(!after.lines().any(|l| l.starts_with(&format!("client {key} "))), "{after}");
    // Its UDP socket's queue limit was its charge: every byte of it
    // comes back, and the others' charges stay.
    assert_eq!(charged(&after), Some(before - own), "{before} before:\n{report}\nafter:\n{after}");
    drop((clients, s));
    assert_eq!(netd.stop().engine_in_use, 0);
}

#[test]
fn a_client_that_makes_no_request_is_not_boosted_however_full() {
    let tune = Tune { udp_rx_queue_packets: Some(QUEUE), packetflow: Some(PacketFlow::ALL), ..Tune::default() };
    let boost = BoostConfig { lift: 0, ..BoostConfig::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::PeerLink, tune, move |c| c.boost = boost);
    let _clients = [120, 125, 130].map(|p| full_receiver(&netd, 9830 + u16::from(p), Some(p)));
    let s = netd.connect();
    // Boosts made while the sends came end once the clients fall silent.
    let report = wait_for_report(&s, "no boost left", |r| {
        udp_line(r, 9955).contains(" recv_queued 400 ") && r.contains("\npacketflow scheduler on boosted 0 ")
    });
    std::thread::sleep(Duration::from_millis(150));
    let later = s.stat().expect("stat");
    assert!(later.contains("\npacketflow scheduler on boosted 0 "), "{report}\n{later}");
    assert!(!later.contains("boosted yes"), "{later}");
}

#[test]
fn without_the_scheduler_nobody_is_boosted() {
    let tune = Tune { udp_rx_queue_packets: Some(QUEUE), packetflow: Some(PacketFlow::NONE), ..Tune::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::PeerLink, tune, |_| {});
    let _clients = [120, 125, 130].map(|p| full_receiver(&netd, 9800 + u16::from(p), Some(p)));
    let s = netd.connect();
    wait_for_report(&s, "the queues full", |r| udp_line(r, 9925).contains(" recv_queued 400 "));
    // Past a housekeeping period.
    std::thread::sleep(Duration::from_millis(60));
    let report = s.stat().expect("stat");
    assert!(report.contains("\npacketflow scheduler off\n"), "{report}");
    assert!(!report.contains("boosted yes"), "{report}");
    assert_eq!(stat_value(&report, "netd boosts "), Some(0), "{report}");
}

#[test]
fn a_better_client_receiving_tcp_makes_the_only_udp_receiver_low_priority() {
    let counter = std::env::temp_dir().join(format!("nagare-packetflow-tcp-best-{}", std::process::id()));
    std::fs::write(&counter, "0").unwrap();
    // The filter alone: the memory manager would spare a queue that can
    // still grow.
    let filter = PacketFlow { filter: true, ..PacketFlow::NONE };
    let tune = Tune { link_drops: Some(counter.clone()), packetflow: Some(filter), ..Tune::default() };
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::PeerLink, tune, |c| c.rx_batch = 1);
    let (s, t) = (netd.connect(), netd.connect());
    let mut stream = TcpStream::connect_timeout_via(&s, &SocketAddr::V4(PEER_ECHO), LIMIT).expect("connect");
    stream.set_priority(Some(100)).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let udp = UdpSocket::bind_via(&t, SocketAddrV4::new(NETD_ADDR, 9930)).expect("bind");
    udp.set_priority(Some(120)).unwrap();
    let deadline = Instant::now() + LIMIT;
    let (mut link_drops, mut rounds) = (0u64, 0u32);
    let mut back = [0u8; 1000];
    loop {
        let report = s.stat().expect("stat");
        if stat_value(&report, "netd filter_dropped_low_priority ").is_some_and(|d| d > 0) {
            assert!(udp_line(&report, 9930).contains(" prio 120 "), "{report}");
            break;
        }
        assert!(Instant::now() < deadline, "no datagram dropped in {rounds} rounds:\n{report}");
        rounds += 1;
        link_drops += 1 << 40;
        std::fs::write(&counter, link_drops.to_string()).unwrap();
        stream.write_all(&[rounds as u8; 1000]).unwrap();
        stream.read_exact(&mut back).expect("the stream's echo");
        for _ in 0..4 {
            udp.send_to(&rounds.to_be_bytes(), PEER_ECHO).unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = std::fs::remove_file(&counter);
}

/// A full batch of datagrams all for a full queue pauses netd's reads of
/// the device: the echoes of 200 datagrams to a socket that queues 4 and
/// never reads.
#[test]
fn a_batch_of_datagrams_all_for_full_queues_pauses_the_device() {
    let tune = Tune { udp_rx_queue_packets: Some(QUEUE), packetflow: Some(PacketFlow::ALL), ..Tune::default() };
    // Buffers and ring slots enough for every send at once.
    let netd = NetdThread::start_tuned(Placement::Inline, Wire::PeerLink, tune, |c| {
        c.buffers = 256;
        c.ring_slots = 512;
    });
    let mut raw = RawClient::connect(&netd);
    let udp = bind(&mut raw, 9940, None);
    // One echo first, so that the peer's address is resolved and the
    // burst is not held back by it.
    let mut first = raw.request(Op::SendTo);
    first.socket = udp;
    first.aux[0] = encode_addr(PEER_ECHO);
    first.piece = Some(raw.give(&[0; 4], 4));
    assert_eq!(raw.call(first).result(), Ok(4));
    let s = netd.connect();
    wait_for_report(&s, "the first echo queued", |r| udp_line(r, 9940).contains(" recv_queued 4 "));
    // Posted together, so that their echoes come back together.
    let mut ids = Vec::new();
    for i in 0..200u32 {
        let mut send = raw.request(Op::SendTo);
        send.socket = udp;
        send.aux[0] = encode_addr(PEER_ECHO);
        send.piece = Some(raw.give(&i.to_be_bytes(), 4));
        ids.push(send.id);
        raw.post(send.encode());
    }
    for id in ids {
        assert_eq!(raw.wait_for(id).result(), Ok(4));
    }
    let report = wait_for_report(&s, "every echo queued or dropped", |r| {
        stat_value(r, "netd filter_dropped_overflow ").is_some_and(|d| d >= 196)
    });
    assert!(stat_value(&report, "netd receive_pauses ").is_some_and(|p| p >= 1), "{report}");
}
