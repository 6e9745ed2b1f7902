//! PacketFlow's memory manager in a netd over a simulated link to a peer
//! that echoes (`docs/netd.md`, "PacketFlow memory manager"): raw
//! clients' UDP sockets that never read have datagrams echoed to them.
//! Sockets of nice 0, 5 and 10 grow to maxima in their priority's order
//! and give every byte back when their client goes; without the memory
//! manager a queue keeps its fixed size; a queue its application sized
//! is left so; a priority that falls cuts a queue back, never below what
//! it holds.

mod support;

use nagare_netd::{PacketFlow, Placement};
use nagare_request::{encode_addr, Op, SockOption};
use std::net::SocketAddrV4;
use support::{stat_value, wait_for_report, NetdThread, RawClient, Tune, Wire, ECHO_PORT, NETD_ADDR, PEER_ADDR};

const PEER_ECHO: SocketAddrV4 = SocketAddrV4::new(PEER_ADDR, ECHO_PORT);
/// Payload bytes of each datagram.
const LEN: usize = 1400;
/// The largest queue at nice 0: 256 KiB; 192 KiB at nice 5, 128 KiB at
/// nice 10. A socket starts at 64 KiB.
const MM_DEFAULT: usize = 256 * 1024;
const START: u64 = 64 * 1024;
/// Datagrams echoed to each socket: more than the largest queue holds.
const SENT: usize = 250;

/// netd inline with `packetflow`, less the scheduler, and [`MM_DEFAULT`].
/// Every client here is this test binary's process, and tests run side
/// by side: a boost by one test's netd would renice the process whose
/// priority another test's netd reads.
fn netd(packetflow: PacketFlow) -> NetdThread {
    let tune = Tune { packetflow: Some(PacketFlow { scheduler: false, ..packetflow }), ..Tune::default() };
    NetdThread::start_tuned(Placement::Inline, Wire::PeerLink, tune, |c| c.mm_default = MM_DEFAULT)
}

/// A UDP socket of `raw` on `port`, of priority `prio` by its own option
/// if given.
fn bind(raw: &mut RawClient, port: u16, prio: Option<u8>) -> u32 {
    let mut bind = raw.request(Op::UdpBind);
    bind.aux[0] = encode_addr(SocketAddrV4::new(NETD_ADDR, port));
    let udp = raw.call(bind).result().expect("bind") as u32;
    if let Some(prio) = prio {
        assert_eq!(set_option(raw, udp, SockOption::Priority, u64::from(prio)), Ok(u64::from(prio)));
    }
    udp
}

fn set_option(raw: &mut RawClient, socket: u32, option: SockOption, value: u64) -> Result<u64, i32> {
    let mut r = raw.request(Op::SetOption);
    r.socket = socket;
    r.aux[0] = option as u64;
    r.aux[1] = value;
    raw.call(r).result()
}

/// [`SENT`] datagrams from `udp` to the echo, which sends them back.
fn echo(raw: &mut RawClient, udp: u32) {
    for i in 0..SENT {
        let mut send = raw.request(Op::SendTo);
        send.socket = udp;
        send.aux[0] = encode_addr(PEER_ECHO);
        send.piece = Some(raw.give(&[i as u8; LEN], LEN as u32));
        assert_eq!(raw.call(send).result(), Ok(LEN as u64));
    }
}

/// The report's line for the UDP socket on `port`.
fn udp_line(report: &str, port: u16) -> &str {
    let local = format!(" udp local {NETD_ADDR}:{port} ");
    report.lines().find(|l| l.starts_with("socket ") && l.contains(&local)).expect("the socket's line")
}

/// Socket `port`'s queue: bytes queued, its size, its largest.
fn queue(report: &str, port: u16) -> (u64, u64, u64) {
    let line = udp_line(report, port);
    let value = |key| stat_value(line, key).expect(key);
    (value(" recv_queued "), value(" rcvbuf "), value(" rcvbuf_max "))
}

/// What client `id` is charged.
fn charged(report: &str, id: u64) -> Option<u64> {
    let line = report.lines().find(|l| l.starts_with(&format!("client {id} ")))?;
    stat_value(line, " memory ")
}

/// The report once every echo to the sockets on `ports` is queued or
/// dropped.
fn settled(s: &nagare::Session, ports: &[u16]) -> String {
    wait_for_report(s, "every echo queued or dropped", |r| {
        let queued: u64 = ports.iter().map(|&p| queue(r, p).0 / LEN as u64).sum();
        let dropped = stat_value(r, "netd filter_dropped_overflow ").unwrap_or(0)
            + stat_value(r, "engine drop_udp_queue_full ").unwrap_or(0);
        queued + dropped == (SENT * ports.len()) as u64
    })
}

#[test]
fn sockets_of_nice_0_5_and_10_grow_to_maxima_in_priority_order_and_give_every_byte_back() {
    let netd = netd(PacketFlow::ALL);
    let s = netd.connect();
    let mut raw = RawClient::connect(&netd);
    let ports = [9910, 9911, 9912];
    let maxima = [256 << 10, 192 << 10, 128 << 10];
    for (port, prio) in ports.into_iter().zip([120, 125, 130]) {
        let udp = bind(&mut raw, port, Some(prio));
        echo(&mut raw, udp);
    }
    let report = settled(&s, &ports);
    let mut last = u64::MAX;
    for (port, max) in ports.into_iter().zip(maxima) {
        let (queued, size, most) = queue(&report, port);
        assert_eq!((size, most), (max, max), "{port}: grown to its maximum:\n{report}");
        assert!(queued + LEN as u64 > size && queued < last, "{port}: full, and below the one before:\n{report}");
        assert!(udp_line(&report, port).contains(" fill 99% "), "{report}");
        last = queued;
    }
    // 64 KiB to 128 and 256; to 128 and 192; to 128.
    assert_eq!(stat_value(&report, "netd mm_grown "), Some(5), "{report}");
    assert_eq!(stat_value(&report, "netd mm_refused "), Some(0), "{report}");
    assert_eq!(stat_value(&report, "engine drop_udp_queue_full "), None, "the filter dropped the rest:\n{report}");
    assert_eq!(charged(&report, raw.client.id), Some(maxima.iter().sum()), "{report}");
    drop(raw);
    let report = wait_for_report(&s, "the client gone", |r| stat_value(r, "netd clients_gone ") == Some(1));
    assert_eq!(stat_value(&report, "memory charged "), Some(0), "every byte back:\n{report}");
    drop(s);
    assert_eq!(netd.stop().stats.buffers_leaked, 0);
}

#[test]
fn without_the_memory_manager_a_queue_keeps_its_fixed_size() {
    let netd = netd(PacketFlow { mm: false, ..PacketFlow::ALL });
    let s = netd.connect();
    let mut raw = RawClient::connect(&netd);
    let udp = bind(&mut raw, 9920, None);
    echo(&mut raw, udp);
    let report = settled(&s, &[9920]);
    let fixed = 256 << 10;
    assert_eq!(queue(&report, 9920), ((fixed / LEN as u64) * LEN as u64, fixed, fixed), "{report}");
    assert_eq!(stat_value(&report, "netd mm_grown "), Some(0), "{report}");
    assert!(report.contains("\npacketflow mm off\n"), "{report}");
}

#[test]
fn a_queue_its_application_sized_is_not_grown() {
    let netd = netd(PacketFlow::ALL);
    let s = netd.connect();
    let mut raw = RawClient::connect(&netd);
    let udp = bind(&mut raw, 9930, None);
    assert_eq!(queue(&s.stat().unwrap(), 9930), (0, START, 256 << 10));
    assert_eq!(set_option(&mut raw, udp, SockOption::RecvBuffer, 100_000), Ok(100_000));
    let mut get = raw.request(Op::GetOption);
    get.socket = udp;
    get.aux[0] = SockOption::RecvBuffer as u64;
    assert_eq!(raw.call(get).result(), Ok(100_000));
    echo(&mut raw, udp);
    let report = settled(&s, &[9930]);
    assert_eq!(queue(&report, 9930), ((100_000 / LEN as u64) * LEN as u64, 100_000, 100_000), "{report}");
    assert_eq!(stat_value(&report, "netd mm_grown "), Some(0), "{report}");
    assert_eq!(charged(&report, raw.client.id), Some(100_000), "{report}");
}

#[test]
fn a_priority_that_falls_cuts_a_queue_back_no_lower_than_it_holds() {
    let netd = netd(PacketFlow::ALL);
    let s = netd.connect();
    let mut raw = RawClient::connect(&netd);
    let udp = bind(&mut raw, 9940, Some(120));
    echo(&mut raw, udp);
    let report = settled(&s, &[9940]);
    let (held, size, _) = queue(&report, 9940);
    assert_eq!(size, 256 << 10, "{report}");
    // 139: 12.8 KiB, raised to the 16 KiB floor; it holds more.
    set_option(&mut raw, udp, SockOption::Priority, 139).unwrap();
    let report = s.stat().unwrap();
    assert_eq!(queue(&report, 9940), (held, held, 16 << 10), "{report}");
    assert_eq!(charged(&report, raw.client.id), Some(held), "{report}");
    for _ in 0..held / LEN as u64 {
        let mut recv = raw.request(Op::RecvFrom);
        recv.socket = udp;
        recv.piece = Some(raw.give(&[], 2048));
        assert_eq!(raw.call(recv).result(), Ok(LEN as u64));
    }
    let report = wait_for_report(&s, "the drained queue cut to its maximum", |r| queue(r, 9940).1 == 16 << 10);
    assert_eq!(queue(&report, 9940), (0, 16 << 10, 16 << 10), "{report}");
    assert_eq!(charged(&report, raw.client.id), Some(16 << 10), "{report}");
}

/// A datagram from one client of netd to another never passes the frame
/// path (the engine delivers it here): the memory manager sees it at the
/// send, and the receiver's queue grows to its maximum as it would for
/// datagrams from the link.
#[test]
fn datagrams_between_two_clients_of_netd_grow_the_receiver_s_queue() {
    let netd = netd(PacketFlow::ALL);
    let (sender, receiver) = (netd.connect(), netd.connect());
    let _sink = nagare::net::UdpSocket::bind_via(&receiver, SocketAddrV4::new(NETD_ADDR, 9930)).expect("bind");
    let source = nagare::net::UdpSocket::bind_via(&sender, SocketAddrV4::new(NETD_ADDR, 0)).expect("bind");
    let payload = [0x5au8; LEN];
    for _ in 0..SENT {
        source.send_to(&payload, SocketAddrV4::new(NETD_ADDR, 9930)).expect("send");
    }
    let report = wait_for_report(&sender, "the receiver's queue at its maximum", |r| queue(r, 9930).1 == 256 << 10);
    // 64 KiB to 128, then 256.
    assert_eq!(stat_value(&report, "netd mm_grown "), Some(2), "{report}");
}
