//! `nagare perf` as a library: a server and a client in threads of the
//! test, on the kernel's stack over loopback and on two nagare hosts on a
//! VNI segment (no root, no binary).

use nagare_bench::perf::{self, ClientOptions, Mode, Proto, Stack, Summary};
use nagare_host::{DeviceSpec, LinkSpec};
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

fn options(server: Ipv4Addr, port: u16, proto: Proto, mode: Mode) -> ClientOptions {
    ClientOptions {
        server,
        port,
        proto,
        mode,
        time: None,
        bytes: Some(1 << 20),
        len: None,
        udp_rate: None,
        timeout: Some(20.0),
        json: false,
        quiet: true,
    }
}

/// Serves one test on `server_stack` while the client runs `options` from
/// `client_stack` (retrying while the server is not listening yet).
fn one_test(server_stack: Stack, client_stack: Stack, options: ClientOptions) -> Summary {
    let port = options.port;
    let server = std::thread::spawn(move || perf::run_server(&server_stack, port, true, &AtomicBool::new(false)));
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

fn vni(segment: &str, addr: &str) -> Stack {
    Stack::Engine(LinkSpec {
        device: DeviceSpec::Vni { segment: segment.to_string() },
        addr: addr.parse().unwrap(),
        gateway: None,
        mac: None,
        impair: None,
        syn_budget: None,
    })
}

#[test]
fn nagare_to_nagare_over_a_vni_segment() {
    let segment = format!("nbperf{}", std::process::id());
    nagare_dev::vni::Segment::create(&segment, 2, 1500, 256).unwrap();
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = nagare_dev::vni::destroy(&self.0);
        }
    }
    let _remove = Remove(segment.clone());
    let server = Ipv4Addr::new(10, 211, 0, 1);
    let tests = [(Proto::Tcp, Mode::Reverse), (Proto::Udp, Mode::Stream), (Proto::Tcp, Mode::Rr)];
    for (i, (proto, mode)) in tests.into_iter().enumerate() {
        let mut opts = options(server, 5201 + i as u16, proto, mode);
        if mode == Mode::Rr {
            opts.bytes = Some(100);
        }
        let summary = one_test(vni(&segment, "10.211.0.1/24"), vni(&segment, "10.211.0.2/24"), opts);
        let text = summary.text();
        assert!(summary.receiver.bytes > 0, "{text}");
        match (proto, mode) {
            (Proto::Udp, _) => assert_eq!(summary.lost, 0, "{text}"),
            (_, Mode::Rr) => assert_eq!(summary.latency.map(|l| l.count), Some(100), "{text}"),
            _ => assert!(summary.receiver.bytes >= 1 << 20, "{text}"),
        }
    }
}
