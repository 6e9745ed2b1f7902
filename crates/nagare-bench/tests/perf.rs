//! `nagare perf` as a library: a server and a client in threads of the
//! test, on the kernel's stack over loopback (IPv4 and IPv6) and on two
//! nagare hosts on a VNI segment (IPv4 and IPv6; no root, no binary).

use nagare_bench::perf::{self, ClientOptions, Mode, Proto, Stack, Summary};
use nagare_host::{DeviceSpec, LinkSpec};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

fn options(server: impl Into<IpAddr>, port: u16, proto: Proto, mode: Mode) -> ClientOptions {
    ClientOptions {
        server: server.into(),
        port,
        proto,
        mode,
        time: None,
        bytes: Some(1 << 20),
        len: None,
        udp_rate: None,
        udp_batch: None,
        timeout: Some(20.0),
        json: false,
        quiet: true,
    }
}

/// Serves one test on `server_stack` while the client runs `options` from
/// `client_stack` (retrying while the server is not listening yet).
fn one_test(server_stack: Stack, client_stack: Stack, options: ClientOptions) -> Summary {
    one_test_with_work(server_stack, client_stack, options, Duration::ZERO)
}

/// [`one_test`] with a server that spends `work` on each datagram it
/// receives.
fn one_test_with_work(server_stack: Stack, client_stack: Stack, options: ClientOptions, work: Duration) -> Summary {
    let port = options.port;
    let server = std::thread::spawn(move || perf::run_server(&server_stack, port, true, work, &AtomicBool::new(false)));
    let started = Instant::now();
    let summary = loop {
        match perf::client(&client_stack, &options, &AtomicBool::new(false)) {
            Ok(summary) => break summary,
            Err(e) if started.elapsed() < Duration::from_secs(10) && !server.is_finished() => {
                eprintln!("retrying: {e:#}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("perf client: {e:#}"),
        }
    };
    server.join().expect("the server thread panicked").expect("the server's test failed");
    summary
}

#[test]
fn kernel_to_kernel_over_loopback() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let summary = one_test(Stack::Kernel, Stack::Kernel, options(Ipv4Addr::LOCALHOST, port, Proto::Tcp, Mode::Stream));
    assert!(summary.receiver.bytes >= 1 << 20, "{}", summary.text());
    assert_eq!(summary.sender.bytes, summary.receiver.bytes);
}

#[test]
fn a_udp_sender_may_send_many_datagrams_a_call() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut opts = options(Ipv4Addr::LOCALHOST, port, Proto::Udp, Mode::Stream);
    (opts.len, opts.bytes, opts.udp_rate, opts.udp_batch) = (Some(256), Some(256 * 4000), Some(100.0), Some(16));
    let summary = one_test(Stack::Kernel, Stack::Kernel, opts);
    let text = summary.text();
    // Each call's bytes went out as datagrams of 256 bytes, each with its
    // own sequence number (the receiver counts them in order).
    assert_eq!(summary.sender.packets, 4000, "{text}");
    assert_eq!(summary.sender.bytes, 256 * 4000, "{text}");
    assert!(summary.receiver.packets >= 3600, "{text}");
    assert_eq!(summary.receiver.bytes, summary.receiver.packets * 256, "{text}");
    // Only where the client sends UDP, and at most 64 a call.
    for (proto, mode, batch) in
        [(Proto::Udp, Mode::Stream, 65), (Proto::Tcp, Mode::Stream, 2), (Proto::Udp, Mode::Reverse, 2)]
    {
        let mut opts = options(Ipv4Addr::LOCALHOST, port, proto, mode);
        opts.udp_batch = Some(batch);
        let e = perf::client(&Stack::Kernel, &opts, &AtomicBool::new(false)).expect_err("refused");
        assert!(format!("{e:#}").contains("--udp-batch"), "{e:#}");
    }
}

/// The CPU time this process has had.
fn process_cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage for the call to fill.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0, "getrusage");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec * 1000) as u32);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[test]
fn a_server_that_works_on_each_datagram_spends_that_much_cpu_time_on_each() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut opts = options(Ipv4Addr::LOCALHOST, port, Proto::Udp, Mode::Stream);
    (opts.len, opts.bytes, opts.udp_rate) = (Some(256), Some(256 * 300), Some(100.0));
    let work = Duration::from_millis(1);
    let before = process_cpu_time();
    let summary = one_test_with_work(Stack::Kernel, Stack::Kernel, opts, work);
    let spent = process_cpu_time().saturating_sub(before);
    let text = summary.text();
    // 300 datagrams in about 6 ms; the server works 1 ms of CPU time on
    // each its socket held. Without the work the whole test takes a few
    // milliseconds of CPU.
    assert!(summary.receiver.packets >= 50, "{text}");
    let least = work * summary.receiver.packets as u32;
    assert!(spent >= least, "{spent:?} of CPU for {} datagrams: {text}", summary.receiver.packets);
}

/// Whether this machine's loopback has IPv6 (`::1`); says SKIPPED loudly
/// if not.
fn ipv6_loopback(test: &str) -> bool {
    let there = std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok();
    if !there {
        eprintln!("\n*** SKIPPED {test}: no IPv6 on loopback (::1) ***\n");
    }
    there
}

#[test]
fn kernel_to_kernel_over_ipv6_loopback() {
    if !ipv6_loopback("kernel_to_kernel_over_ipv6_loopback") {
        return;
    }
    let port = std::net::TcpListener::bind("[::1]:0").unwrap().local_addr().unwrap().port();
    for (proto, mode) in [(Proto::Tcp, Mode::Stream), (Proto::Tcp, Mode::Rr), (Proto::Udp, Mode::Reverse)] {
        let mut opts = options(Ipv6Addr::LOCALHOST, port, proto, mode);
        opts.bytes = Some(if mode == Mode::Rr { 100 } else { 1 << 20 });
        opts.udp_rate = (proto == Proto::Udp).then_some(100.0);
        let summary = one_test(Stack::Kernel, Stack::Kernel, opts);
        let text = summary.text();
        assert!(summary.receiver.bytes > 0, "{text}");
        assert_eq!(summary.server, format!("[::1]:{port}"), "{text}");
        assert!(summary.client.starts_with("[::1]:"), "{text}");
    }
}

/// What a UDP request/response summary must say: transactions that came
/// back, latency figures for each, requests counted as sent, and the
/// fields TCP request/response gives in JSON, with the loss beside them.
fn check_udp_rr(summary: &Summary, len: u32) {
    let text = summary.text();
    assert_eq!((summary.proto, summary.mode, summary.len), (Proto::Udp, Mode::Rr, len), "{text}");
    let transactions = summary.receiver.packets;
    assert!(transactions > 0, "{text}");
    assert_eq!(summary.latency.map(|l| l.count), Some(transactions), "{text}");
    assert_eq!(summary.sender.packets, transactions + summary.lost, "{text}");
    assert_eq!(summary.receiver.bytes, transactions * u64::from(len), "{text}");
    assert!(summary.transactions_per_sec() > 0.0, "{text}");
    assert!(text.contains("transactions/s") && text.contains("p99"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
    assert_eq!(json["protocol"], "udp");
    assert_eq!(json["mode"], "rr");
    assert_eq!(json["transactions"], transactions);
    assert!(json["transactions_per_s"].as_f64().is_some_and(|t| t > 0.0), "{json}");
    for field in ["count", "mean", "p50", "p99", "max"] {
        assert!(json["latency_us"][field].is_number(), "{json}");
    }
    assert_eq!(json["lost"], summary.lost);
}

#[test]
fn udp_request_response_kernel_to_kernel_over_loopback() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut opts = options(Ipv4Addr::LOCALHOST, port, Proto::Udp, Mode::Rr);
    opts.bytes = None;
    opts.time = Some(0.5);
    let summary = one_test(Stack::Kernel, Stack::Kernel, opts);
    check_udp_rr(&summary, 1);
    assert_eq!(summary.lost, 0, "{}", summary.text());
}

fn vni(segment: &str, addr: &str) -> Stack {
    vni6(segment, addr, None)
}

/// A host on `segment` at `addr`, and at `v6` if given.
fn vni6(segment: &str, addr: &str, v6: Option<&str>) -> Stack {
    Stack::Engine(LinkSpec {
        device: DeviceSpec::Vni { segment: segment.to_string() },
        addr: Some(addr.parse().unwrap()),
        ipv6: v6.iter().map(|a| a.parse().unwrap()).collect(),
        gateway: None,
        gateway6: None,
        mac: None,
        impair: None,
        syn_budget: None,
    })
}

/// A VNI segment of two ports, removed when dropped.
struct Segment(String);

impl Segment {
    fn create(tag: &str) -> Segment {
        let name = format!("nb{tag}{}", std::process::id());
        nagare_dev::vni::Segment::create(&name, 2, 1500, 256).unwrap();
        Segment(name)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let _ = nagare_dev::vni::destroy(&self.0);
    }
}

#[test]
fn nagare_to_nagare_over_a_vni_segment() {
    let segment = Segment::create("perf");
    let segment = &segment.0;
    let server = Ipv4Addr::new(10, 211, 0, 1);
    let tests =
        [(Proto::Tcp, Mode::Reverse), (Proto::Udp, Mode::Stream), (Proto::Tcp, Mode::Rr), (Proto::Udp, Mode::Rr)];
    for (i, (proto, mode)) in tests.into_iter().enumerate() {
        let mut opts = options(server, 5201 + i as u16, proto, mode);
        match (proto, mode) {
            (Proto::Tcp, Mode::Rr) => opts.bytes = Some(100),
            (Proto::Udp, Mode::Rr) => {
                opts.bytes = Some(100 * 64);
                opts.len = Some(64);
            }
            _ => {}
        }
        let summary = one_test(vni(segment, "10.211.0.1/24"), vni(segment, "10.211.0.2/24"), opts);
        let text = summary.text();
        assert!(summary.receiver.bytes > 0, "{text}");
        match (proto, mode) {
            (Proto::Udp, Mode::Rr) => {
                check_udp_rr(&summary, 64);
                assert_eq!((summary.receiver.packets, summary.lost), (100, 0), "{text}");
            }
            (Proto::Udp, _) => assert_eq!(summary.lost, 0, "{text}"),
            (_, Mode::Rr) => assert_eq!(summary.latency.map(|l| l.count), Some(100), "{text}"),
            _ => assert!(summary.receiver.bytes >= 1 << 20, "{text}"),
        }
    }
}

/// Both hosts with an IPv6 address beside the IPv4 one, the test over
/// IPv6: the client waits for its address to pass duplicate address
/// detection, the server's listener and UDP sockets take IPv6 beside IPv4.
#[test]
fn nagare_to_nagare_over_ipv6_on_a_vni_segment() {
    let segment = Segment::create("six");
    let segment = &segment.0;
    let server: Ipv6Addr = "fd00:213::1".parse().unwrap();
    let tests =
        [(Proto::Tcp, Mode::Stream), (Proto::Tcp, Mode::Rr), (Proto::Udp, Mode::Reverse), (Proto::Udp, Mode::Rr)];
    for (i, (proto, mode)) in tests.into_iter().enumerate() {
        let mut opts = options(server, 5201 + i as u16, proto, mode);
        match (proto, mode) {
            (Proto::Tcp, Mode::Rr) => opts.bytes = Some(100),
            (Proto::Udp, Mode::Rr) => {
                opts.bytes = Some(100 * 64);
                opts.len = Some(64);
            }
            _ => {}
        }
        let summary = one_test(
            vni6(segment, "10.213.0.1/24", Some("fd00:213::1/64")),
            vni6(segment, "10.213.0.2/24", Some("fd00:213::2/64")),
            opts,
        );
        let text = summary.text();
        assert!(summary.receiver.bytes > 0, "{text}");
        assert_eq!(summary.server, format!("[fd00:213::1]:{}", 5201 + i), "{text}");
        assert!(summary.client.starts_with("[fd00:213::2]:"), "{text}");
        match (proto, mode) {
            (Proto::Udp, Mode::Rr) => assert_eq!((summary.receiver.packets, summary.lost), (100, 0), "{text}"),
            (Proto::Udp, _) => assert_eq!(summary.lost, 0, "{text}"),
            (_, Mode::Rr) => assert_eq!(summary.latency.map(|l| l.count), Some(100), "{text}"),
            _ => assert_eq!(summary.receiver.bytes, 1 << 20, "{text}"),
        }
    }
}

/// An IPv6 server is refused at once where the stack cannot reach it:
/// through netd, and from a host without an IPv6 address.
#[test]
fn ipv6_servers_are_refused_where_they_cannot_be_reached() {
    let opts = options(Ipv6Addr::LOCALHOST, 5201, Proto::Tcp, Mode::Stream);
    let via = Stack::Via { socket: "/nonexistent/netd.sock".into(), zero_copy: false };
    let err = perf::client(&via, &opts, &AtomicBool::new(false)).unwrap_err();
    assert!(format!("{err:#}").contains("through netd (--via) reaches IPv4 servers only"), "{err:#}");
    let engine = vni("nagare-bench-no-segment", "10.214.0.2/24");
    let err = perf::client(&engine, &opts, &AtomicBool::new(false)).unwrap_err();
    assert!(format!("{err:#}").contains("needs an IPv6 --addr"), "{err:#}");
}

/// Requests or responses lost on the way count as lost after the
/// response timeout, and the next request goes: the test ends on time.
#[test]
fn udp_request_response_goes_on_past_lost_datagrams() {
    let segment = Segment::create("loss");
    let server = vni(&segment.0, "10.212.0.1/24");
    let Stack::Engine(mut lossy) = vni(&segment.0, "10.212.0.2/24") else { unreachable!() };
    lossy.impair = Some("loss=10%".parse().unwrap());
    let mut opts = options(Ipv4Addr::new(10, 212, 0, 1), 5201, Proto::Udp, Mode::Rr);
    opts.bytes = None;
    opts.time = Some(1.0);
    opts.len = Some(64);
    let started = Instant::now();
    let summary = one_test(server, Stack::Engine(lossy), opts);
    check_udp_rr(&summary, 64);
    assert!(summary.lost > 0, "{}", summary.text());
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
}
