//! `nagare netd` on a VNI segment (no root needed), a `nagare up --echo`
//! peer, and client applications through the `nagare` crate: UDP and TCP
//! echo, a client killed with SIGKILL, a hostile client, and netd's death.

use nagare::net::{TcpStream, UdpSocket};
use nagare::Session;
use nagare_ipc::{Client, Descriptor, Notifier, WaitOutcome, Waiter};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PEER: &str = "10.91.0.1";

fn nagare() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nagare"))
}

fn run(args: &[&str]) -> Output {
    nagare().args(args).output().expect("running nagare")
}

/// A segment with an echo peer and a netd on it; children killed by pid and
/// the segment removed, even when the test fails.
struct Fixture {
    name: String,
    socket: PathBuf,
    log: PathBuf,
    /// The peer's HTTP root, with `file.bin`.
    www: PathBuf,
    peer: Option<Child>,
    netd: Option<Child>,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        Self::with(tag, "split", 3_000_000)
    }

    /// netd in `placement`, the peer serving `file.bin` of `len` bytes.
    fn with(tag: &str, placement: &str, len: u32) -> Fixture {
        Self::with_netd_args(tag, &["--placement", placement], len)
    }

    /// netd with `netd_args` added, the peer serving `file.bin` of `len`
    /// bytes.
    fn with_netd_args(tag: &str, netd_args: &[&str], len: u32) -> Fixture {
        Self::with_netd_env(tag, netd_args, &[], len)
    }

    /// netd with `netd_args` added and `env` in its environment (and its
    /// driver's), the peer serving `file.bin` of `len` bytes.
    fn with_netd_env(tag: &str, netd_args: &[&str], env: &[(&str, &str)], len: u32) -> Fixture {
        let name = format!("netd-{tag}-{}", std::process::id());
        let _ = run(&["vni", "destroy", &name]);
        let out = run(&["vni", "create", &name, "--ports", "4"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dir = std::env::temp_dir();
        let www = dir.join(format!("{name}-www"));
        std::fs::create_dir_all(&www).unwrap();
        let body: Vec<u8> = (0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        std::fs::write(www.join("file.bin"), body).unwrap();
        let mut f = Fixture {
            socket: dir.join(format!("{name}.sock")),
            log: dir.join(format!("{name}.log")),
            www,
            name,
            peer: None,
            netd: None,
        };
        f.peer = Some(
            nagare()
                .args(["up", "--vni", &f.name, "--addr", &format!("{PEER}/24"), "--echo", "--http"])
                .arg(&f.www)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting nagare up"),
        );
        let log = std::fs::File::create(&f.log).unwrap();
        f.netd = Some(
            nagare()
                .args(["netd", "--vni", &f.name, "--addr", "10.91.0.2/24"])
                .args(netd_args)
                .envs(env.iter().copied())
                .arg("--socket")
                .arg(&f.socket)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("starting nagare netd"),
        );
        f
    }

    /// A client of this netd, once it listens.
    fn connect(&self) -> Session {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Session::connect(&self.socket) {
                Ok(n) => return n,
                Err(e) => assert!(Instant::now() < deadline, "netd does not answer: {e}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until netd's log contains `needle`.
    fn wait_for_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(Instant::now() < deadline, "no {needle:?} in netd's log:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for child in [self.peer.as_mut(), self.netd.as_mut()].into_iter().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = run(&["vni", "destroy", &self.name]);
        // netd, killed, left its socket and its watch socket beside it.
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(self.socket.with_extension("sock.share"));
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_dir_all(&self.www);
    }
}

#[test]
fn fetch_runs_through_netd_as_its_application() {
    let f = Fixture::new("fetch");
    drop(f.connect()); // netd listens
    let out = std::env::temp_dir().join(format!("netd-fetched-{}.bin", std::process::id()));
    let result = nagare()
        .args(["fetch", "--via"])
        .arg(&f.socket)
        .arg(format!("http://{PEER}/file.bin"))
        .arg("-o")
        .arg(&out)
        .args(["--timeout", "60"])
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    assert!(
        String::from_utf8_lossy(&result.stdout).contains("HTTP 200, 3000000 bytes"),
        "{}",
        String::from_utf8_lossy(&result.stdout)
    );
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(f.www.join("file.bin")).unwrap(), "the download differs");
    let _ = std::fs::remove_file(&out);
    // Without a stack of its own or netd, fetch says what it needs.
    let bare = run(&["fetch", "http://10.91.0.1/file.bin", "-o", "/dev/null"]);
    assert!(!bare.status.success());
    assert!(String::from_utf8_lossy(&bare.stderr).contains("--via"), "{}", String::from_utf8_lossy(&bare.stderr));
}

/// The buffers of a client's region its own at the start: netd keeps its
/// receive pool of the rest.
fn client_pool() -> usize {
    let c = nagare_netd::NetdConfig::default();
    (c.buffers - c.receive_pool) as usize
}

fn udp_round_trip(netd: &Session, payload: &[u8]) {
    let udp = UdpSocket::bind_via(netd, "0.0.0.0:0").unwrap();
    assert_eq!(udp.send_to(payload, (PEER, 7)).unwrap(), payload.len());
    let mut buf = vec![0u8; 16384];
    let (n, from) = udp.recv_from(&mut buf).unwrap();
    assert!(&buf[..n] == payload, "echo of {} bytes came back as {n}", payload.len());
    assert_eq!(from.to_string(), format!("{PEER}:7"));
}

/// The client that is killed: opens a TCP connection and a UDP socket,
/// says "ready", and waits to die. Runs only when re-executed by
/// `clients_through_netd` (the variable names the socket).
#[test]
fn killed_client_child() {
    let Ok(socket) = std::env::var("NAGARE_NETD_TEST_CHILD") else {
        return;
    };
    let netd = Session::connect(socket).unwrap();
    let mut tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
    tcp.write_all(&[7u8; 100_000]).unwrap();
    // Writes the echo cannot answer (nothing is read): they stay queued,
    // their buffers with netd, when the child is killed.
    tcp.set_nonblocking(true).unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        match tcp.write(&[8u8; 16384]) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("write: {e}"),
        }
    }
    let _udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    println!("child ready");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn clients_through_netd() {
    let f = Fixture::new("e2e");
    let netd = f.connect();

    // UDP echo, small and large (IP fragments on the wire).
    udp_round_trip(&netd, b"hello through netd");
    udp_round_trip(&netd, &(0..8000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>());

    // TCP echo of 4 MB, byte-exact.
    let mut tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
    assert_eq!(tcp.peer_addr().unwrap().to_string(), format!("{PEER}:7"));
    let total = 4 << 20;
    let data: Vec<u8> = (0..total as u64).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let mut back = vec![0u8; total];
    let chunk = 64 * 1024;
    let started = Instant::now();
    for (out, inn) in data.chunks(chunk).zip(back.chunks_mut(chunk)) {
        tcp.write_all(out).unwrap();
        tcp.read_exact(inn).unwrap();
    }
    assert!(back == data, "echoed bytes differ");
    eprintln!("TCP echo of {total} bytes through netd: {:?}", started.elapsed());
    tcp.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    tcp.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    drop(tcp);

    // A client killed with SIGKILL: its sockets and buffers are reclaimed,
    // and netd goes on serving the others.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "killed_client_child", "--nocapture", "--test-threads", "1"])
        .env("NAGARE_NETD_TEST_CHILD", &f.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("child exited before it was ready").unwrap();
        if line.contains("child ready") {
            break;
        }
    }
    let pid = child.id();
    // Its queued writes hold buffers beyond its waiting requests'.
    let report = netd.stat().unwrap();
    let marker = format!(" pid {pid} ");
    let (_, held) = client_buffers(&report, &marker);
    assert!(held > pending(&report, &marker), "no write of the child is queued: {report}");
    child.kill().unwrap();
    child.wait().unwrap();
    let log = f.wait_for_log(&format!("(pid {pid}) gone: 2 sockets closed"));
    // Every buffer of its pool comes back: reclaimed now, or lent to the
    // stack (a write not yet acknowledged) until the stack lets go.
    let line = log.lines().find(|l| l.contains(&format!("(pid {pid}) gone: 2 sockets closed, "))).unwrap();
    let count = |what: &str| -> u32 {
        let before = line.split(what).next().unwrap();
        before.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no `{what}` in {line}"))
    };
    assert_eq!(count(" buffers reclaimed") + count(" lent to the stack"), client_pool() as u32, "{line}");
    assert_eq!(count(" in use"), 0, "{line}");
    udp_round_trip(&netd, b"still serving");

    // A hostile client: garbage descriptors get error completions; a
    // broken ring gets it disconnected; netd survives.
    let hostile = Client::connect(&f.socket).unwrap();
    let mut req = hostile.region.producer(0).unwrap();
    let mut comp = hostile.region.consumer(1).unwrap();
    let mut notifier = Notifier::new(hostile.server_wakeup.try_clone().unwrap());
    let mut waiter = Waiter::new(hostile.client_wakeup.try_clone().unwrap(), Duration::ZERO);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let garbage = 200;
    let mut sent = 0;
    let mut errors = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while errors < garbage {
        assert!(Instant::now() < deadline, "{errors} error completions of {garbage}");
        if sent < garbage {
            let w: Vec<u64> = (0..8).map(|_| rnd()).collect();
            let d = Descriptor {
                kind: w[0] as u32 | 0x8000_0000,
                flags: (w[0] >> 32) as u32,
                id: w[1],
                buffer: w[2] as u32,
                offset: (w[2] >> 32) as u32,
                len: w[3] as u32,
                status: (w[3] >> 32) as i32,
                aux: [w[4], w[5], w[6], w[7]],
            };
            if notifier.push_batch(&mut req, &[d]).unwrap() == 1 {
                sent += 1;
            }
        }
        if let WaitOutcome::Ready(_) = waiter.wait(&mut comp, Some(Duration::from_millis(10))).unwrap() {
            while let Some(c) = comp.pop().unwrap() {
                assert!(c.status < 0, "garbage accepted: {c:?}");
                errors += 1;
            }
        }
    }
    // Now break the ring: a head far beyond the capacity.
    req.scribble_head(req.head().wrapping_add(1 << 20));
    let efd = hostile.server_wakeup.try_clone().unwrap();
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live array to an eventfd we hold.
    unsafe { libc::write(std::os::fd::AsRawFd::as_raw_fd(&efd), one.as_ptr().cast(), 8) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while !hostile.peer_gone() {
        assert!(Instant::now() < deadline, "netd did not disconnect the hostile client");
        std::thread::sleep(Duration::from_millis(10));
    }
    f.wait_for_log("request ring broken");
    udp_round_trip(&netd, b"survived the hostile client");
    let mut tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
    tcp.write_all(b"ping").unwrap();
    let mut four = [0u8; 4];
    tcp.read_exact(&mut four).unwrap();
    assert_eq!(&four, b"ping");
}

#[test]
fn netd_death_fails_calls_within_a_second() {
    let mut f = Fixture::new("death");
    let netd = f.connect();
    udp_round_trip(&netd, b"alive");
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    // A call blocked in netd when it dies, and the next call after.
    let blocked = {
        let netd = netd.clone();
        std::thread::spawn(move || {
            let s = UdpSocket::bind_via(&netd, "0.0.0.0:0");
            let mut buf = [0u8; 64];
            s.and_then(|s| s.recv_from(&mut buf).map(|_| ()))
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let mut netd_child = f.netd.take().unwrap();
    netd_child.kill().unwrap();
    let killed = Instant::now();
    netd_child.wait().unwrap();
    let r = blocked.join().unwrap();
    let e = r.expect_err("a blocked call survived netd");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted, "{e}");
    assert!(killed.elapsed() < Duration::from_secs(1), "blocked call failed after {:?}", killed.elapsed());
    let t = Instant::now();
    let e = udp.send_to(b"x", (PEER, 7)).expect_err("a call succeeded without netd");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted, "{e}");
    assert!(t.elapsed() < Duration::from_secs(1), "next call failed after {:?}", t.elapsed());
    // A new connection is refused.
    assert!(Session::connect(&f.socket).is_err());
}

#[test]
fn ping_and_time_limits_through_netd() {
    let f = Fixture::new("ping");
    let netd = f.connect();

    // `nagare ping --via`: the echo requests leave from netd's stack.
    let out = nagare().args(["ping", "--via"]).arg(&f.socket).args(["-c", "3", "-i", "0.05", PEER]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("3 packets transmitted, 3 received"), "{text}");
    assert!(text.contains(&format!("bytes from {PEER}: icmp_seq=1")), "{text}");
    // Nobody at .77: no replies, exit status 1.
    let out = nagare()
        .args(["ping", "--via"])
        .arg(&f.socket)
        .args(["-c", "2", "-i", "0.05", "-W", "0.3", "10.91.0.77"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 packets transmitted, 0 received"));

    // The ping socket itself: two sockets get different identifiers, and
    // each sees only its own replies.
    let a = nagare::ping::PingSocket::open_via(&netd, 4242).unwrap();
    let b = nagare::ping::PingSocket::open_via(&netd, 4242).unwrap();
    assert_ne!(a.ident(), b.ident());
    let peer: std::net::Ipv4Addr = PEER.parse().unwrap();
    a.send(peer, 9, b"abc").unwrap();
    let got = a.recv_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(
        matches!(got, Some(nagare::ping::PingEvent::Reply { from, seq: 9, len: 3, .. }) if from == peer),
        "{got:?}"
    );
    assert_eq!(b.recv_timeout(Some(Duration::from_millis(100))).unwrap(), None, "b saw a's reply");

    // Read time limits end a wait with WouldBlock, as std::net's do, and
    // the socket works afterwards.
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = [0u8; 64];
    let e = udp.recv_from(&mut buf).expect_err("a datagram from nowhere");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
    assert!(udp.set_read_timeout(Some(Duration::ZERO)).is_err(), "a zero limit is refused, as in std");
    udp.send_to(b"after", (PEER, 7)).unwrap();
    assert_eq!(udp.recv_from(&mut buf).unwrap().0, 5);

    // Non-blocking mode and readiness: nothing waiting is WouldBlock at
    // once; poll says when the echo is back; a closed id is INVALID.
    use nagare::poll::{poll, PollEntry, INVALID, READABLE, WRITABLE};
    udp.set_nonblocking(true).unwrap();
    let e = udp.recv_from(&mut buf).expect_err("a datagram from nowhere");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    let mut entries = [
        PollEntry { socket: udp.socket_id(), interest: READABLE, ready: 0 },
        PollEntry { socket: 999, interest: READABLE, ready: 0 },
    ];
    assert_eq!(poll(&netd, &mut entries[..1], Some(Duration::ZERO)).unwrap(), 0);
    assert_eq!(poll(&netd, &mut entries[..1], Some(Duration::from_millis(100))).unwrap(), 0, "nothing came");
    udp.send_to(b"poll me", (PEER, 7)).unwrap();
    assert_eq!(poll(&netd, &mut entries[..1], Some(Duration::from_secs(5))).unwrap(), 1);
    assert_eq!(entries[0].ready, READABLE);
    // An unknown id is ready at once (INVALID), so it is asked about only now.
    assert_eq!(poll(&netd, &mut entries, Some(Duration::ZERO)).unwrap(), 2);
    assert_eq!((entries[0].ready, entries[1].ready), (READABLE, INVALID));
    entries[0].interest = READABLE | WRITABLE;
    poll(&netd, &mut entries[..1], None).unwrap();
    assert_eq!(entries[0].ready, READABLE | WRITABLE);
    assert_eq!(udp.recv_from(&mut buf).unwrap().0, 7);
    udp.set_nonblocking(false).unwrap();
    let mut tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    assert_eq!(tcp.read_timeout().unwrap(), Some(Duration::from_millis(200)));
    let e = tcp.read(&mut buf).expect_err("data from an echo server that was sent nothing");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
    tcp.write_all(b"late").unwrap();
    let mut four = [0u8; 4];
    tcp.read_exact(&mut four).unwrap();
    assert_eq!(&four, b"late");
    // A connection to nobody gives up when its limit runs out, and its
    // half-open socket does not linger in netd.
    let nobody: std::net::SocketAddr = "10.91.0.77:7".parse().unwrap();
    let e =
        TcpStream::connect_timeout_via(&netd, &nobody, Duration::from_millis(300)).err().expect("connected to nobody");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    let report = netd.stat().unwrap();
    let me = std::process::id();
    let line = report.lines().find(|l| l.contains(&format!(" pid {me} "))).unwrap_or_else(|| panic!("{report}"));
    // Waiting, each with a buffer: the stat request itself and the
    // receives the stream and the UDP socket keep posted; netd keeps 64
    // for steered receives.
    let waiting = 1 + 2 * nagare::RECV_AHEAD;
    assert!(
        line.contains(&format!(
            " sockets 4 tcp 1 listeners 0 udp 1 echo 2 pending {waiting} buffers client {} netd {waiting} receive {} of {} ",
            client_pool() - waiting,
            nagare_netd::NetdConfig::default().receive_pool,
            nagare_netd::NetdConfig::default().buffers,
        )),
        "{line}"
    );

    // `nagare stat`: netd, both clients (this one and stat itself), the
    // counters and the round trip.
    let out = nagare().args(["stat", "--via"]).arg(&f.socket).args(["--samples", "200"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("netd pid ") && text.contains(" clients 2\n"), "{text}");
    assert!(text.contains(&format!("client 1 pid {me} ")), "{text}");
    assert!(text.contains("netd buffers_leaked 0\n") && text.contains("engine icmp_echo_replies_received"), "{text}");
    assert!(text.contains("ipc round_trip_us min ") && text.trim_end().ends_with("samples 200"), "{text}");
}

/// Runs `nagare perf client ARGS` and returns its output, which must say
/// it succeeded.
fn perf_client(args: &[&str]) -> String {
    let out = nagare().args(["perf", "client", "-q"]).args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "perf client {args:?}: {text}");
    text
}

#[test]
fn perf_runs_through_netd_both_ways() {
    let f = Fixture::new("perf");
    drop(f.connect());
    let socket = f.socket.to_str().unwrap();
    // A perf server as netd's application; a client with a stack of its own.
    let mut server =
        nagare().args(["perf", "server", "--via", socket]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let vni = ["--vni", f.name.as_str(), "--addr", "10.91.0.4/24"];
    let text = perf_client(&[&vni[..], &["10.91.0.2", "--bytes", "8M"]].concat());
    assert!(text.contains("receiver  8388608 bytes"), "{text}");
    let text = perf_client(&[&vni[..], &["10.91.0.2", "--bytes", "8M", "--mode", "reverse"]].concat());
    assert!(text.contains("receiver  8388608 bytes"), "{text}");
    let text = perf_client(&[&vni[..], &["10.91.0.2", "--time", "0.5", "--mode", "rr"]].concat());
    assert!(text.contains("transactions/s") && !text.contains(" 0 transactions"), "{text}");
    let _ = server.kill();
    let _ = server.wait();

    // The other way: a client through netd, a server with a stack of its own.
    let mut server = nagare()
        .args(["perf", "server", "--vni", &f.name, "--addr", "10.91.0.3/24"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let text = perf_client(&["--via", socket, "10.91.0.3", "--bytes", "8M"]);
    assert!(text.contains("receiver  8388608 bytes"), "{text}");
    let text = perf_client(&["--via", socket, "10.91.0.3", "--udp", "--bytes", "1M", "--udp-rate", "50"]);
    // 1 MiB in whole 1472-byte datagrams; the receiver counts their bytes.
    let line = text.lines().find(|l| l.trim_start().starts_with("receiver")).unwrap_or_else(|| panic!("{text}"));
    let bytes: u64 = line.split_whitespace().nth(3).and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    assert!(bytes > 1_000_000 && bytes.is_multiple_of(1472), "{line}");
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn bench_netd_runs_and_cleans_up() {
    let child = nagare()
        .args(["bench", "netd", "--round-trips", "200"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its segment is named by its pid (another suite may run a bench too).
    let mine = format!("bench-netd-{}", child.id());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for needle in [
        "nagare: both clients of one netd",
        "Linux: two sockets on 127.0.0.1",
        "Linux, polled (non-blocking, yield)",
        "empty request to netd and back",
    ] {
        let line = text.lines().find(|l| l.starts_with(needle)).unwrap_or_else(|| panic!("no {needle:?} in {text}"));
        let median: f64 =
            line[needle.len()..].split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or(f64::NAN);
        assert!(median.is_finite() && median > 0.0, "{line}");
    }
    let leftovers: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(&mine))
        .collect();
    assert!(leftovers.is_empty(), "segments left behind: {leftovers:?}");
}

/// A number from a `nagare stat` report line `"{prefix} {value}"`.
fn stat_value(report: &str, prefix: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(prefix).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {prefix:?} in the report:\n{report}"))
}

/// Every placement carries UDP and TCP; datagrams sent with `send_buf_to`
/// leave without a copy (the application's buffer lent to the engine), and
/// with a driver their completions come straight from it (direct return);
/// the std-shaped `send_to` and `write` copy once, into a region buffer
/// that is lent the same way, and return once it is queued.
#[test]
fn placements_send_datagrams_in_place() {
    for placement in ["split", "single", "inline"] {
        let f = Fixture::with(&format!("pl-{placement}"), placement, 1000);
        let netd = f.connect();
        let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 16384];
        for i in 0..200u32 {
            let payload: Vec<u8> = (0..1 + i % 1400).map(|k| (k ^ i) as u8).collect();
            let mut tx = netd.alloc_tx().unwrap();
            tx[..payload.len()].copy_from_slice(&payload);
            assert_eq!(udp.send_buf_to(tx, payload.len(), (PEER, 7)).unwrap(), payload.len());
            let (n, _) = udp.recv_from(&mut buf).unwrap();
            assert!(buf[..n] == payload[..], "{placement}: echo {i} differs");
        }
        let mut tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut back = vec![0u8; data.len()];
        for (out, inn) in data.chunks(64 * 1024).zip(back.chunks_mut(64 * 1024)) {
            tcp.write_all(out).unwrap();
            tcp.read_exact(inn).unwrap();
        }
        assert!(back == data, "{placement}: TCP echo differs");
        assert_eq!(udp.send_to(b"copied", (PEER, 7)).unwrap(), 6);
        assert_eq!(udp.recv_from(&mut buf).unwrap().0, 6);
        // A traced send: every stage it went through was timed, and the
        // stages fit inside the total the application saw.
        let (n, t) = udp.send_to_traced(&[1u8; 512], (PEER, 7)).unwrap();
        assert_eq!(n, 512);
        let _ = udp.recv_from(&mut buf).unwrap();
        let s = t.stages;
        assert!(s.to_netd > 0 && s.protocol > 0 && s.to_driver_post > 0, "{placement}: {t:?}");
        assert_eq!(placement == "inline", s.to_driver == 0 && s.device == 0, "{placement}: {t:?}");
        let sum = s.to_netd + s.protocol + s.to_driver_post + s.to_driver + s.device + s.return_post;
        assert!(sum <= t.total_ns && t.return_ns() == t.total_ns - sum, "{placement}: {t:?}");
        let report = netd.stat().unwrap();
        assert!(report.contains(&format!("placement {placement} ")), "{report}");
        assert_eq!(stat_value(&report, "netd sends_in_place"), 202, "{placement}: {report}");
        // Every write is copied once by the library, into buffers it lends.
        assert_eq!(stat_value(&report, "netd tx_payload_copied"), 0, "{placement}: {report}");
        assert!(stat_value(&report, "netd tx_payload_in_place") >= 1_000_006, "{placement}: {report}");
        if placement == "inline" {
            assert!(!report.contains("driver pid"), "{report}");
        } else {
            // The datagrams' buffers and the stream's, once acknowledged.
            assert!(stat_value(&report, "driver returns_confirmed") >= 202, "{placement}: {report}");
            assert!(stat_value(&report, "driver tx_bytes_in_place") >= 200, "{placement}: {report}");
            assert!(report.contains(" starts 1 deaths 0\n"), "{placement}: {report}");
            // The driver's own counters reach the report (every 250 ms).
            // It copies no received frame itself: the VNI port copies
            // each out of its slot once, straight into the region of the
            // application whose port it is for (steered) or into the
            // driver region; steered payload reaches the application in
            // the buffer it landed in.
            std::thread::sleep(Duration::from_millis(400));
            let report = netd.stat().unwrap();
            assert!(stat_value(&report, "driver reported tx_frames") >= 201, "{placement}: {report}");
            assert!(stat_value(&report, "driver reported direct_returns") >= 201, "{placement}: {report}");
            assert_eq!(stat_value(&report, "driver reported rx_bytes_copied"), 0, "{placement}: {report}");
            assert!(stat_value(&report, "driver reported rx_steered") >= 201, "{placement}: {report}");
            let (in_place, copied) =
                (stat_value(&report, "netd rx_payload_in_place"), stat_value(&report, "netd rx_payload_copied"));
            eprintln!("{placement}: received in place {in_place}, copied {copied}");
            assert!(in_place > 500_000 && in_place + copied >= 1_000_000 + 200, "{placement}: {report}");
            assert_eq!(stat_value(&report, "driver rx_steer_refused"), 0, "{placement}: {report}");
        }
    }
}

/// The driver's process id, from netd's report.
fn driver_pid(netd: &Session) -> u32 {
    let report = netd.stat().unwrap();
    let line = report.lines().find_map(|l| l.strip_prefix("driver pid ")).unwrap_or_else(|| panic!("{report}"));
    line.split(' ').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("{report}"))
}

fn kill9(pid: u32) {
    let out = Command::new("kill").args(["-9", &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "kill -9 {pid}: {}", String::from_utf8_lossy(&out.stderr));
}

/// kill -9 of the driver process, twice, while a TCP download and a stream
/// of datagrams run through netd: netd starts a new driver each time, the
/// TCP connection survives and the download is byte-exact, every send
/// returns within a second, and no buffer is left behind.
#[test]
fn driver_killed_during_transfers() {
    let len = 24_000_000u32;
    let f = Fixture::with("drvkill", "split", len);
    let netd = f.connect();
    let first = driver_pid(&netd);
    let out = std::env::temp_dir().join(format!("netd-drvkill-{}.bin", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let fetch = nagare()
        .args(["fetch", "--via"])
        .arg(&f.socket)
        .arg(format!("http://{PEER}/file.bin"))
        .arg("-o")
        .arg(&out)
        .args(["--timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sender = {
        let netd = f.connect();
        std::thread::spawn(move || {
            let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
            let started = Instant::now();
            let (mut sent, mut slowest) = (0u32, Duration::ZERO);
            while started.elapsed() < Duration::from_secs(3) && sent < 200_000 {
                let t = Instant::now();
                // Lent datagrams: completions the driver returns, or netd
                // when the driver died with them.
                let mut tx = netd.alloc_tx().unwrap();
                tx[..1200].fill(0x5a);
                udp.send_buf_to(tx, 1200, (PEER, 9)).unwrap();
                slowest = slowest.max(t.elapsed());
                sent += 1;
            }
            (sent, slowest)
        })
    };
    // First kill once the download is under way.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 1_000_000 {
        assert!(Instant::now() < deadline, "the download does not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill9(first);
    f.wait_for_log("driver started again");
    let second = driver_pid(&netd);
    assert_ne!(second, first);
    std::thread::sleep(Duration::from_millis(300));
    kill9(second);
    let (sent, slowest) = sender.join().unwrap_or_else(|_| panic!("sender failed; netd log:\n{}", f.log()));
    assert!(sent > 100, "only {sent} datagrams sent");
    assert!(slowest < Duration::from_secs(1), "a send took {slowest:?}");
    let done = fetch.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(std::fs::read(&out).unwrap() == std::fs::read(f.www.join("file.bin")).unwrap(), "the download differs");
    let _ = std::fs::remove_file(&out);
    let report = netd.stat().unwrap();
    assert!(report.contains(" starts 3 deaths 2\n"), "{report}");
    let third = driver_pid(&netd);
    assert!(third != first && third != second);
    assert!(std::path::Path::new(&format!("/proc/{third}")).exists());
    // Every buffer is back with its client (the report's own request holds one).
    for line in report.lines().filter(|l| l.starts_with("client ")) {
        let word = |w: &str| -> u32 {
            line.split(w).nth(1).and_then(|r| r.split(' ').next()).and_then(|v| v.parse().ok()).unwrap()
        };
        // Only waiting requests hold buffers: the receives the sockets
        // keep posted, and this report's.
        assert!(word(" netd ") <= word(" pending "), "buffers left with netd: {line}");
    }
    assert_eq!(stat_value(&report, "netd buffers_leaked"), 0);
    eprintln!("{sent} datagrams sent (slowest call {slowest:?}); {}", f.log());
}

/// `nagare bench sendpath` (root: it makes a network namespace and a TAP):
/// a stage table per placement, every stage a finite time, the Linux row,
/// and the namespace gone afterwards.
#[test]
fn bench_sendpath_runs_and_cleans_up() {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED bench_sendpath_runs_and_cleans_up: needs root (network namespace and TAP)"
        );
        return;
    }
    let child = nagare()
        .args(["bench", "sendpath", "--count", "200", "--size", "256,1472"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its namespace is named by its pid (another suite may run a bench too).
    let mine = format!("nagare-sendpath-{}", child.id());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for placement in ["split", "single", "inline"] {
        assert!(text.contains(&format!("{placement} placement")), "{text}");
    }
    let cells = |prefix: &str| -> Vec<Vec<f64>> {
        text.lines()
            .filter(|l| l.trim_start().starts_with(prefix))
            .map(|l| l.split_whitespace().filter_map(|w| w.parse().ok()).collect())
            .collect()
    };
    let devices = cells("device write");
    assert_eq!(devices.len(), 3, "{text}");
    for row in devices.iter().chain(&cells("total")) {
        assert_eq!(row.len(), 2, "{text}");
        assert!(row.iter().all(|v| v.is_finite() && *v > 0.0), "{text}");
    }
    let linux = cells("Linux sendto()");
    assert!(linux.len() == 1 && linux[0].len() == 2 && linux[0].iter().all(|v| *v > 0.0), "{text}");
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).split_whitespace().any(|w| w == mine), "namespace left behind");
}

/// `nagare bench copies --tap`: on the multi-queue TAP every zero-copy
/// receive is handed over in place and copies only headers; on the
/// single-queue one, run beside it, each received byte is copied; the
/// bench's namespaces are gone afterwards.
#[test]
fn bench_copies_on_a_tap_runs_and_cleans_up() {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED bench_copies_on_a_tap_runs_and_cleans_up: needs root (network namespace and TAP)"
        );
        return;
    }
    let child = nagare()
        .args(["bench", "copies", "--tap", "--bytes", "1048576"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mine = format!("nagare-copies-{}-", child.id());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let (steered, single) = text.split_once("single-queue TAP").unwrap_or_else(|| panic!("{text}"));
    // A row: its name, then lib, netd, link, send | driver, link, client,
    // lib, recv | in place.
    let row = |table: &str, name: &str| -> Vec<f64> {
        let line = table.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name:?} in:\n{text}"));
        line[name.len()..].split_whitespace().filter_map(|w| w.parse().ok()).collect()
    };
    for name in ["UDP send_buf_to / recv_buf_from", "TCP send_buf / recv_buf (lent)"] {
        let (s, q) = (row(steered, name), row(single, name));
        assert_eq!((s.len(), q.len()), (10, 10), "{text}");
        // Datagrams go one at a time; the lent stream's reader may lag
        // behind its flow on a busy machine and run its pool dry.
        let least = if name.starts_with("UDP") { 0.99 } else { 0.5 };
        assert!(s[9] > least && s[8] <= 1.0 - s[9] + 0.05, "steered {name}: {text}");
        assert!(q[8] >= 1.0 && q[9] < 0.01, "single-queue {name}: {text}");
    }
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains(&mine), "namespace left behind");
}

/// The zero-copy calls (`alloc_tx`, `send_buf_to`, `recv_buf_from`,
/// `send_buf`, `recv_buf`) and asynchronous sends, many in flight at once,
/// one ticket dropped unwaited: every datagram and byte arrives, and every
/// buffer comes back.
#[test]
fn zero_copy_calls_and_asynchronous_sends() {
    let f = Fixture::with("zc", "split", 1000);
    let netd = f.connect();
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tx = netd.alloc_tx().unwrap();
    tx[..5].copy_from_slice(b"hello");
    assert_eq!(udp.send_buf_to(tx, 5, (PEER, 7)).unwrap(), 5);
    let (rx, whole, from) = udp.recv_buf_from().unwrap();
    assert_eq!((&rx[..], whole, from.to_string()), (&b"hello"[..], 5, format!("{PEER}:7")));
    drop(rx);

    let mut tickets = Vec::new();
    for i in 0..64u8 {
        let mut tx = netd.alloc_tx().unwrap();
        tx[..1000].fill(i);
        tickets.push(udp.send_buf_to_async(tx, 1000, (PEER, 7)).unwrap());
    }
    let dropped = tickets.pop();
    drop(dropped);
    for t in tickets {
        assert_eq!(t.wait().unwrap(), 1000);
    }
    let mut seen = [false; 64];
    for _ in 0..64 {
        let (rx, n, _) = udp.recv_buf_from().unwrap();
        assert_eq!(n, 1000);
        assert!(rx.iter().all(|&b| b == rx[0]), "a datagram came back mixed");
        seen[rx[0] as usize] = true;
    }
    assert!(seen.iter().all(|&s| s), "datagrams missing: {seen:?}");

    // The socket's path keeps receives posted: echoes that arrive while
    // nobody reads wait in the region, and a read takes them in order.
    for i in 0..8u8 {
        udp.send_to(&[i; 300], (PEER, 7)).unwrap();
    }
    let firsts: Vec<u8> = (0..8)
        .map(|_| {
            let (rx, n, from) = udp.recv_buf_from().unwrap();
            assert_eq!((n, from.to_string()), (300, format!("{PEER}:7")));
            rx[0]
        })
        .collect();
    let mut sorted = firsts.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..8).collect::<Vec<u8>>());

    // 200 echoes left unread: the engine holds them, more than the driver
    // buffers netd lends it (128), so the later ones are copied; all arrive.
    let before = netd.stat().unwrap();
    for i in 0..200u32 {
        let mut tx = netd.alloc_tx().unwrap();
        tx[..4].copy_from_slice(&i.to_le_bytes());
        udp.send_buf_to(tx, 4, (PEER, 7)).unwrap();
    }
    // Let the last echoes arrive before any is read.
    std::thread::sleep(Duration::from_millis(100));
    let mut got: Vec<u32> = (0..200)
        .map(|_| {
            let (rx, _, _) = udp.recv_buf_from().unwrap();
            u32::from_le_bytes(rx[..4].try_into().unwrap())
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, (0..200).collect::<Vec<u32>>());
    let after = netd.stat().unwrap();
    assert!(stat_value(&after, "driver rx_bytes_copied") > stat_value(&before, "driver rx_bytes_copied"), "{after}");
    assert!(
        stat_value(&after, "driver rx_bytes_in_place") > stat_value(&before, "driver rx_bytes_in_place"),
        "{after}"
    );

    let tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    let mut back = Vec::new();
    let mut sent = 0;
    for chunk in data.chunks(10_000) {
        // Written in place; a short send leaves the rest for another buffer.
        let mut off = 0;
        while off < chunk.len() {
            let mut tx = netd.alloc_tx().unwrap();
            tx[..chunk.len() - off].copy_from_slice(&chunk[off..]);
            off += tcp.send_buf(tx, chunk.len() - off).unwrap();
        }
        sent += chunk.len();
        // Read the echo where netd put it.
        while back.len() < sent {
            let rx = tcp.recv_buf(65536).unwrap();
            assert!(!rx.is_empty(), "the stream ended early");
            back.extend_from_slice(&rx);
        }
    }
    assert!(back == data, "TCP bytes differ");
    // Stream bytes that arrive while nobody reads wait in the region, in
    // the stream's order, however they are read.
    let (msg1, msg2) = (vec![0x11u8; 1000], vec![0x22u8; 1000]);
    (&tcp).write_all(&msg1).unwrap();
    (&tcp).write_all(&msg2).unwrap();
    let mut got = tcp.recv_buf(700).unwrap().to_vec();
    assert!(!got.is_empty() && got.len() <= 700 && got.iter().all(|&b| b == 0x11), "{} bytes first", got.len());
    let mut small = [0u8; 300];
    let n = (&tcp).read(&mut small).unwrap();
    got.extend_from_slice(&small[..n]);
    while got.len() < 2000 {
        got.extend_from_slice(&tcp.recv_buf(65536).unwrap());
    }
    assert!(got == [msg1, msg2].concat(), "the stream's bytes came out of order");
    // Lent TCP sends, a window of eight in flight: 1 MB in 16 000-byte
    // buffers; then 400 sends of 50 bytes, 100 in flight (frames of many
    // small lent slices, which the driver link copies whole).
    tcp.set_nonblocking(true).unwrap();
    let lent: Vec<u8> = (0..1_000_000u32).map(|i| (i % 241) as u8).collect();
    lent_stream(&netd, &tcp, &lent, 16_000, 8);
    let small: Vec<u8> = (0..20_000u32).map(|i| (i % 239) as u8).collect();
    lent_stream(&netd, &tcp, &small, 50, 100);
    let report = netd.stat().unwrap();
    assert!(stat_value(&report, "netd sends_in_place") >= 65, "{report}");
    // Every payload byte sent with the zero-copy calls left without a copy:
    // 265 datagrams (5 + 64 × 1000 + 200 × 4 bytes), 100 000, 1 000 000
    // and 20 000 bytes of TCP, the 50-byte sends among them; and so did
    // the bytes of `send_to` (8 datagrams of 300 bytes), which the library
    // copies into buffers it lends. Its two short `write`s (1000 bytes
    // each) were copied into the send buffer (`COPY_SHORT`).
    assert_eq!(stat_value(&report, "netd tx_payload_in_place"), 1_184_805 + 8 * 300, "{report}");
    assert_eq!(stat_value(&report, "netd tx_payload_copied"), 2000, "{report}");
    for line in report.lines().filter(|l| l.starts_with("client ")) {
        let word = |w: &str| -> u32 {
            line.split(w).nth(1).and_then(|r| r.split(' ').next()).and_then(|v| v.parse().ok()).unwrap()
        };
        // Only waiting requests hold buffers: the receives the sockets
        // keep posted, and this report's.
        assert!(word(" netd ") <= word(" pending "), "buffers left with netd: {line}");
    }
}

/// The embedded placement: two stacks inside this test process (each an
/// inet server in a thread, on a port of one VNI segment), used through the
/// same `TcpListener`/`TcpStream`/`UdpSocket` API as a separate netd.
#[test]
fn embedded_placement_has_the_same_api() {
    use nagare::embedded::Embedded;
    use nagare::net::TcpListener;
    use std::net::Ipv4Addr;
    let name = format!("netd-emb-{}", std::process::id());
    let _ = run(&["vni", "destroy", &name]);
    assert!(run(&["vni", "create", &name, "--ports", "2"]).status.success());
    struct Destroy(String);
    impl Drop for Destroy {
        fn drop(&mut self) {
            let _ = run(&["vni", "destroy", &self.0]);
        }
    }
    let _destroy = Destroy(name.clone());
    let stack = |ip: Ipv4Addr| {
        let name = name.clone();
        move || -> std::io::Result<(nagare_core::Interface, Box<dyn nagare_dev::Device>)> {
            let seg = std::sync::Arc::new(nagare_dev::VniSegment::open(&name)?);
            let port = nagare_dev::VniPort::attach(seg, None)?;
            let addr = nagare_wire::Ipv4Cidr::new(ip, 24).map_err(|_| std::io::Error::other("bad address"))?;
            let config = nagare_core::InterfaceConfig::new(nagare_wire::EthernetAddress(port.mac()), addr);
            let iface = nagare_core::Interface::new(
                config,
                nagare_dev::Device::capabilities(&port),
                nagare_core::buf::BufferPool::new(2048, 8192),
            );
            Ok((iface, Box::new(port) as Box<dyn nagare_dev::Device>))
        }
    };
    let a = Embedded::start(stack(Ipv4Addr::new(10, 92, 0, 1))).unwrap();
    let b = Embedded::start(stack(Ipv4Addr::new(10, 92, 0, 2))).unwrap();
    let listener = TcpListener::bind_via(a.netd(), "10.92.0.1:5000").unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let sender = {
        let data = data.clone();
        let netd = b.netd().clone();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect_via(&netd, "10.92.0.1:5000").unwrap();
            s.write_all(&data).unwrap();
        })
    };
    let (mut conn, from) = listener.accept().unwrap();
    assert_eq!(from.ip().to_string(), "10.92.0.2");
    let mut got = Vec::new();
    conn.read_to_end(&mut got).unwrap();
    sender.join().unwrap();
    assert!(got == data, "the bytes differ");
    let ua = UdpSocket::bind_via(a.netd(), "10.92.0.1:7000").unwrap();
    let ub = UdpSocket::bind_via(b.netd(), "0.0.0.0:0").unwrap();
    ub.send_to(b"over the embedded stacks", "10.92.0.1:7000").unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = ua.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"over the embedded stacks");
    assert!(a.netd().stat().unwrap().contains("placement inline link embedded"));
}

/// Sends `data` on `tcp` as lent buffers of `chunk` bytes, `window` in
/// flight, reading the echo without waiting in between (the socket is
/// non-blocking; lent sends are asynchronous); checks it comes back whole
/// and every ticket completes with the bytes it lent.
fn lent_stream(netd: &Session, tcp: &TcpStream, data: &[u8], chunk: usize, window: usize) {
    let mut tickets = std::collections::VecDeque::new();
    let (mut posted, mut echoed) = (0, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while echoed.len() < data.len() || !tickets.is_empty() {
        assert!(Instant::now() < deadline, "lent sends stalled at {} of {} echoed", echoed.len(), data.len());
        let mut progress = false;
        while tickets.len() < window && posted < data.len() {
            let n = (data.len() - posted).min(chunk);
            let mut tx = netd.alloc_tx().unwrap();
            tx[..n].copy_from_slice(&data[posted..posted + n]);
            tickets.push_back((tcp.send_buf_async(tx, n).unwrap(), n));
            posted += n;
            progress = true;
        }
        if let Some((t, n)) = tickets.front_mut() {
            if let Some(sent) = t.try_wait().unwrap() {
                assert_eq!(sent, *n as u64);
                tickets.pop_front();
                progress = true;
            }
        }
        if echoed.len() < data.len() {
            match tcp.recv_buf(65536) {
                Ok(rx) => {
                    assert!(!rx.is_empty(), "the stream ended early");
                    echoed.extend_from_slice(&rx);
                    progress = true;
                }
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
            }
        }
        if !progress {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    assert!(echoed == data, "lent TCP bytes came back different");
}

/// A device that holds frames after taking them (a 5 ms delay line in the
/// driver): a lent datagram's buffer comes back only once the frame has
/// really left, so rewriting it at once for the next datagram never
/// changes one still waiting. Every echo arrives with its own content.
#[test]
fn lent_buffers_return_only_after_a_delaying_device_sent_them() {
    let f = Fixture::with_netd_args("delay", &["--placement", "split", "--impair", "delay=5ms"], 1000);
    let netd = f.connect();
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tickets = Vec::new();
    for i in 0..40u8 {
        let mut tx = netd.alloc_tx().unwrap();
        tx[..600].fill(i);
        tickets.push(udp.send_buf_to_async(tx, 600, (PEER, 7)).unwrap());
        if tickets.len() == 4 {
            // Completed ones free their buffers for the next sends, which
            // the pool hands out again at once.
            for t in tickets.drain(..) {
                assert_eq!(t.wait().unwrap(), 600);
            }
        }
    }
    let mut seen = [false; 40];
    for _ in 0..40 {
        let (rx, n, _) = udp.recv_buf_from().expect("an echo is missing");
        assert_eq!(n, 600);
        assert!(rx.iter().all(|&b| b == rx[0]), "a datagram changed while the device held it");
        seen[rx[0] as usize] = true;
    }
    assert!(seen.iter().all(|&s| s));
    // A lent send on a stream shut down for writing fails at once.
    let tcp = TcpStream::connect_via(&netd, (PEER, 7)).unwrap();
    tcp.shutdown(std::net::Shutdown::Write).unwrap();
    let tx = netd.alloc_tx().unwrap();
    let e = tcp.send_buf(tx, 100).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPIPE), "{e}");
}

/// A client that rewrites the headers of a frame steered into its region
/// so that it claims another client's port (checksum cleared, so the
/// engine would take it) reaches nothing: netd parses its own copy of the
/// headers, finds the port is another client's, and drops the frame.
///
/// The rewrite must land between the driver placing the frame and netd
/// reading it. Rather than race for that moment, the test makes it: the
/// echo peer is stopped while the datagram goes out, netd is stopped while
/// the echo comes back, and the headers are rewritten once the driver has
/// placed the echo in the region, before netd runs again.
#[test]
fn rewritten_steered_headers_reach_no_other_client() {
    use nagare_netd::{encode_addr, Completion, Op, Piece, Request};
    let f = Fixture::new("steer");
    let netd = f.connect();
    let victim = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    let victim_port = victim.local_addr().unwrap().port();
    victim.set_nonblocking(true).unwrap();

    let hostile = Client::connect(&f.socket).unwrap();
    let mut req = hostile.region.producer(0).unwrap();
    let mut comp = hostile.region.consumer(1).unwrap();
    let mut pool = hostile.region.pool().unwrap();
    let mut notifier = Notifier::new(hostile.server_wakeup.try_clone().unwrap());
    let mut waiter = Waiter::new(hostile.client_wakeup.try_clone().unwrap(), Duration::ZERO);
    let mut call = |r: Request, pool: &mut nagare_ipc::Pool| -> Completion {
        notifier.push_batch(&mut req, &[r.encode()]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            assert!(Instant::now() < deadline, "no completion for {r:?}");
            if let Some(d) = comp.pop().unwrap() {
                if d.id == r.id {
                    if let Ok(Some(b)) = pool.take(&d) {
                        pool.release(b.index).unwrap();
                    }
                    return Completion::decode(&d).unwrap();
                }
            }
            let _ = waiter.wait(&mut comp, Some(Duration::from_millis(10)));
        }
    };
    let mut bind = Request::new(Op::UdpBind, 1);
    bind.aux[0] = encode_addr("0.0.0.0:0".parse().unwrap());
    let socket = call(bind, &mut pool).result().unwrap() as u32;
    let mut send = |id: u64, payload: &[u8], pool: &mut nagare_ipc::Pool| {
        let b = pool.alloc().expect("a free buffer");
        pool.write(b, 0, payload).unwrap();
        pool.give(b).unwrap();
        let mut r = Request::new(Op::SendTo, id);
        r.socket = socket;
        r.aux[0] = encode_addr(format!("{PEER}:7").parse().unwrap());
        r.piece = Some(Piece { buffer: b, offset: 0, len: payload.len() as u32 });
        assert!(call(r, pool).result().is_ok());
    };
    let wait_stat = |what: &str, until: &dyn Fn(&str) -> bool| -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let report = netd.stat().unwrap();
            if until(&report) {
                return report;
            }
            assert!(Instant::now() < deadline, "{what}:\n{report}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    // One echo steered as it should be: the peer knows netd's address and
    // the driver holds receive buffers of the hostile client's.
    send(2, b"warm-up", &mut pool);
    wait_stat("the warm-up echo is never steered", &|r| stat_value(r, "driver rx_steered") >= 1);

    let marker = b"rewrite me: the victim's now";
    let paused_peer = Paused::new(f.peer.as_ref().unwrap().id());
    send(3, marker, &mut pool);
    // The driver has written the datagram to the segment (its own count,
    // reported every 250 ms, reaches what netd handed it).
    wait_stat("the datagram never reaches the segment", &|r| {
        stat_value(r, "driver reported tx_frames") >= stat_value(r, "driver tx_frames")
    });
    let paused_netd = Paused::new(f.netd.as_ref().unwrap().id());
    drop(paused_peer);

    // The echo comes back to the driver, which places it in one of the
    // buffers of netd's receive pool in the hostile client's region (those
    // the region started netd with) and tells the stopped netd. Only a
    // frame from the echo port counts: the marker also lies in the
    // client's own send buffer.
    let layout = *hostile.region.layout();
    let size = u64::from(layout.config.buffer_size);
    let receive_pool = u64::from(layout.config.creator_buffers);
    let deadline = Instant::now() + Duration::from_secs(5);
    let udp_payload_at = loop {
        let found = (0..receive_pool).find_map(|i| {
            let at = layout.buffer_offset + i * size;
            let bytes = hostile.region.peek_bytes(at, size as usize);
            let k = bytes.windows(marker.len()).position(|w| w == marker)?;
            let source_port = bytes.get(k.checked_sub(8)?..k.checked_sub(6)?)?;
            (source_port == 7u16.to_be_bytes()).then_some(at + k as u64)
        });
        if let Some(at) = found {
            break at;
        }
        assert!(Instant::now() < deadline, "the echo never reached the hostile client's region");
        std::thread::sleep(Duration::from_millis(5));
    };
    // The UDP header's destination port and checksum, just before the
    // payload: the victim's port, no checksum.
    hostile.region.scribble_bytes(udp_payload_at - 6, &victim_port.to_be_bytes());
    hostile.region.scribble_bytes(udp_payload_at - 2, &[0, 0]);
    drop(paused_netd);

    wait_stat("the rewritten frame was not refused", &|r| stat_value(r, "driver rx_steer_refused") == 1);
    std::thread::sleep(Duration::from_millis(50));
    let mut buf = [0u8; 64];
    match victim.recv_from(&mut buf) {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
        Ok((n, from)) => panic!("the victim received {:?} from {from}", &buf[..n]),
    }
    // netd lives on and serves the others.
    udp_round_trip(&netd, b"after the forger");
}

/// A process stopped (SIGSTOP) until this is dropped (SIGCONT), however
/// the test ends.
struct Paused(u32);

impl Paused {
    fn new(pid: u32) -> Paused {
        signal(pid, libc::SIGSTOP);
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, libc::SIGCONT);
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: kill(2) with a pid of a child this test started.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}): {}", std::io::Error::last_os_error());
}

/// A VNI floods a frame for an unknown station to every port. One sent to
/// another address, for a port a client of netd owns, is never steered
/// into that client's region (it would read traffic meant for someone
/// else); the same frame sent to netd is, and reaches the client.
#[test]
fn frames_for_other_stations_are_not_steered() {
    let f = Fixture::new("flood");
    let netd = f.connect();
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    udp.set_nonblocking(true).unwrap();
    // netd steers only once it has sent the driver its addresses and the
    // port: an echo through the peer makes sure of both.
    udp.set_nonblocking(false).unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    udp.send_to(b"warm", (PEER, 7)).unwrap();
    let mut buf = [0u8; 2048];
    assert_eq!(udp.recv_from(&mut buf).unwrap().0, 4);
    udp.set_nonblocking(true).unwrap();
    let mut sender = FrameSender::attach(&f.name);
    let frame = |dst_mac: [u8; 6], dst_ip: [u8; 4]| udp_frame(dst_mac, dst_ip, port, b"not for this client!");
    let mut send = |fr: &[u8], n: usize| sender.send(&vec![fr.to_vec(); n]);
    let steered = |netd: &Session| {
        std::thread::sleep(Duration::from_millis(400));
        stat_value(&netd.stat().unwrap(), "driver reported rx_steered")
    };
    let before = steered(&netd);
    // To an unknown station (flooded), and to netd's MAC but another IP.
    send(&frame([0x02, 0x77, 0, 0, 0, 7], [10, 91, 0, 77]), 20);
    send(&frame(NETD_MAC, [10, 91, 0, 77]), 20);
    let after = steered(&netd);
    assert_eq!(after, before, "frames for others were steered into the client's region");
    assert!(udp.recv_from(&mut buf).is_err(), "the client received a frame meant for another station");
    // The same frame sent to netd is steered and received (so the test
    // can see a steered frame at all).
    send(&frame(NETD_MAC, NETD_IP), 5);
    assert_eq!(steered(&netd), after + 5);
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while got < 5 && Instant::now() < deadline {
        match udp.recv_from(&mut buf) {
            Ok((n, _)) => {
                assert_eq!(&buf[..n], b"not for this client!");
                got += 1;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    assert_eq!(got, 5);
}

/// netd's Ethernet address on the fixture's segment (nagare's default for
/// its IPv4 address).
const NETD_MAC: [u8; 6] = [0x02, 0x6e, 10, 91, 0, 2];
const NETD_IP: [u8; 4] = [10, 91, 0, 2];

/// A UDP frame from a made-up station, 10.91.0.9 port 4242, to `dst_mac`
/// and `dst_ip`:`port` (no UDP checksum).
fn udp_frame(dst_mac: [u8; 6], dst_ip: [u8; 4], port: u16, payload: &[u8]) -> Vec<u8> {
    let mut fr = vec![0u8; 14 + 20 + 8 + payload.len()];
    fr[0..6].copy_from_slice(&dst_mac);
    fr[6..12].copy_from_slice(&[0x02, 0x99, 0, 0, 0, 9]);
    fr[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut fr[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(28 + payload.len() as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 91, 0, 9]);
    ip[16..20].copy_from_slice(&dst_ip);
    let sum = !ip.chunks(2).fold(0u32, |s, w| {
        let s = s + u32::from(u16::from_be_bytes([w[0], w[1]]));
        (s & 0xffff) + (s >> 16)
    }) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    fr[34..36].copy_from_slice(&4242u16.to_be_bytes());
    fr[36..38].copy_from_slice(&port.to_be_bytes());
    fr[38..40].copy_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    fr[42..].copy_from_slice(payload);
    fr
}

/// A port of the fixture's segment the test writes raw frames from.
struct FrameSender {
    port: nagare_dev::VniPort,
    pool: nagare_core::buf::BufferPool,
}

impl FrameSender {
    fn attach(segment: &str) -> FrameSender {
        let segment = std::sync::Arc::new(nagare_dev::VniSegment::open(segment).unwrap());
        let port = nagare_dev::VniPort::attach(segment, Some([0x02, 0x99, 0, 0, 0, 9])).unwrap();
        FrameSender { port, pool: nagare_core::buf::BufferPool::new(2048, 64) }
    }

    /// Puts `frames` on the segment, in order, waiting while it is full.
    fn send(&mut self, frames: &[Vec<u8>]) {
        use nagare_dev::Device;
        let mut q: std::collections::VecDeque<nagare_core::buf::PacketBuf> = frames
            .iter()
            .map(|fr| nagare_core::buf::PacketBuf::from_slice(&self.pool, nagare_dev::RX_HEADROOM, fr).unwrap())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !q.is_empty() {
            assert!(Instant::now() < deadline, "the segment does not take frames");
            self.port.transmit_batch(&mut q, nagare_core::Instant::ZERO).unwrap();
            if !q.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// A port that changes hands between two clients: every datagram sent to
/// it after the new owner's bind returned reaches the new owner. None is
/// steered into the old owner's region (where the old owner could read
/// it; netd refuses it there, so it would be lost): netd answers the bind
/// only once the driver has applied the port's change. The driver here
/// applies steering changes 20 ms late (a driver held off the CPU), which
/// makes the race certain where it would otherwise be rare.
#[test]
fn a_port_that_changes_hands_is_steered_only_to_its_new_owner() {
    const PORT: u16 = 47001;
    const ROUNDS: u32 = 20;
    const AFTER_BIND: u32 = 8;
    let f = Fixture::with_netd_env(
        "handover",
        &["--placement", "split"],
        &[(nagare_netd::driver::STEER_DELAY_VAR, "20")],
        1000,
    );
    let (first, second) = (f.connect(), f.connect());
    let mut sender = FrameSender::attach(&f.name);
    let bind = |netd: &Session| {
        // The last owner's close may still be on its way.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match UdpSocket::bind_via(netd, ("0.0.0.0", PORT)) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    return s;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(100))
                }
                Err(e) => panic!("bind: {e}"),
            }
        }
    };
    let mut buf = [0u8; 2048];
    for round in 0..ROUNDS {
        let (old, new) = if round % 2 == 0 { (&first, &second) } else { (&second, &first) };
        let (old_netd, old) = (old, bind(old));
        // A frame the old owner receives in place: its port is steered
        // to it (once the late driver has applied that).
        std::thread::sleep(Duration::from_millis(50));
        let in_place = || stat_value(&old_netd.stat().unwrap(), "netd rx_payload_in_place");
        let before = in_place();
        sender.send(&[udp_frame(NETD_MAC, NETD_IP, PORT, b"warm")]);
        assert_eq!(old.recv_from(&mut buf).unwrap().0, 4);
        assert_eq!(
            in_place(),
            before + 4,
            "round {round}: the old owner's port is not steered: the test shows nothing"
        );
        drop(old);
        let new = bind(new);
        let frames: Vec<Vec<u8>> = (0..AFTER_BIND)
            .map(|i| udp_frame(NETD_MAC, NETD_IP, PORT, &[round.to_be_bytes(), i.to_be_bytes()].concat()))
            .collect();
        sender.send(&frames);
        for i in 0..AFTER_BIND {
            let (n, _) = new.recv_from(&mut buf).unwrap_or_else(|e| {
                panic!("round {round}: datagram {i}, sent after the bind returned, did not reach the new owner ({e})")
            });
            assert_eq!(&buf[..n], [round.to_be_bytes(), i.to_be_bytes()].concat(), "round {round}");
        }
    }
    let report = first.stat().unwrap();
    assert_eq!(stat_value(&report, "driver rx_steer_refused"), 0, "{report}");
    assert!(stat_value(&report, "netd binds_held") >= u64::from(ROUNDS), "{report}");
}

/// The buffers of the client whose `nagare stat` line contains `marker`:
/// those it holds (free ones included) and those netd holds (lent to the
/// engine, or waiting with a request).
/// The requests waiting for the client whose line has `marker`.
fn pending(report: &str, marker: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.starts_with("client ") && l.contains(marker))
        .unwrap_or_else(|| panic!("no client with {marker:?}:\n{report}"));
    line.split(" pending ").nth(1).and_then(|r| r.split(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn client_buffers(report: &str, marker: &str) -> (u64, u64) {
    let line = report
        .lines()
        .find(|l| l.starts_with("client ") && l.contains(marker))
        .unwrap_or_else(|| panic!("no client with {marker:?}:\n{report}"));
    let after = |word: &str| -> u64 {
        line.split(word)
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {word:?} in {line}"))
    };
    (after(" buffers client "), after(" netd "))
}

/// `send_to` and `write` copy the caller's bytes once, into a region buffer
/// lent to the engine (netd copies nothing), and return once the engine
/// has taken them, as a socket's calls return once the kernel has: many
/// more sends than the pool has buffers succeed (their buffers come back
/// on the way); streams whose reader stops hold at most half the pool
/// (later writes are copied, and receives still find a buffer); a send
/// that fails says so at once.
#[test]
fn std_sends_lend_one_copy_and_never_run_the_pool_dry() {
    let f = Fixture::new("lend");
    let netd = f.connect();
    let receiver = f.connect();
    let udp = UdpSocket::bind_via(&netd, "0.0.0.0:0").unwrap();
    for i in 0..3000u32 {
        assert_eq!(udp.send_to(&[i as u8; 1000], (PEER, 7)).unwrap(), 1000, "send {i}");
    }
    let report = netd.stat().unwrap();
    let (mine, lent) = client_buffers(&report, "listeners 0 udp 1");
    let pool = mine + lent;
    assert!(
        stat_value(&report, "netd sends_in_place") > pool,
        "lent buffers did not come back to be lent again: {report}"
    );
    // A send without a route is queued, and its error is the socket's
    // next (`SO_ERROR`).
    udp.send_to(b"nowhere", ("192.0.2.1", 9)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    let e = loop {
        if let Some(e) = udp.take_error().unwrap() {
            break e;
        }
        assert!(Instant::now() < deadline, "the send's error never came");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(e.raw_os_error(), Some(libc::EHOSTUNREACH), "{e}");
    assert!(udp.take_error().unwrap().is_none(), "the error is reported once");

    // Six local streams whose reader does not read: their writes queue
    // until each send buffer is full, and never take the pool's reserve.
    let listener = nagare::net::TcpListener::bind_via(&receiver, "10.91.0.2:5001").unwrap();
    let mut streams = Vec::new();
    for _ in 0..6 {
        let s = TcpStream::connect_via(&netd, ("10.91.0.2", 5001)).unwrap();
        s.set_nonblocking(true).unwrap();
        streams.push((s, listener.accept().unwrap().0, 0usize));
    }
    let pattern: Vec<u8> = (0..251 + 16384).map(|i| (i % 251) as u8).collect();
    for _pass in 0..8 {
        for (s, _, written) in &mut streams {
            for _ in 0..64 {
                match (&*s).write(&pattern[*written % 251..][..16384]) {
                    Ok(n) => *written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("write: {e}"),
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = netd.stat().unwrap();
    // Queued sends and posted receives leave the client an eighth of the
    // region's 256 buffers at least.
    let (_, held) = client_buffers(&report, "listeners 0 udp 1");
    assert!(held <= 256 - 32 + 1, "{held} of {pool} buffers with netd: {report}");
    assert!(streams.iter().all(|(_, _, written)| *written > 0), "a stream took no write");
    udp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    while udp.recv_from(&mut [0u8; 1000]).is_ok() {}
    udp.send_to(b"a receive still finds a buffer", (PEER, 7)).unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = udp.recv_from(&mut buf).expect("no buffer for a receive");
    assert_eq!(&buf[..n], b"a receive still finds a buffer");

    // Every byte arrives, in order; then every lent buffer is back.
    for (k, (_, accepted, written)) in streams.iter_mut().enumerate() {
        let mut got = vec![0u8; *written];
        accepted.read_exact(&mut got).unwrap();
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "stream {k} differs");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let report = netd.stat().unwrap();
        // Only waiting requests hold buffers: posted receives and the
        // report's own.
        if client_buffers(&report, "listeners 0 udp 1").1 <= pending(&report, "listeners 0 udp 1") {
            break;
        }
        assert!(Instant::now() < deadline, "lent buffers did not come back: {report}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The accounting options reach netd: the cap on every client together
/// and the orphan cap, as `nagare stat` shows them; a UDP socket asking
/// for more than the cap is given what the cap leaves, whatever its
/// client's budget.
#[test]
fn the_memory_options_set_netds_accounts() {
    let f = Fixture::with_netd_args(
        "memory",
        &["--placement", "inline", "--memory-cap", "600000", "--max-orphans", "7"],
        1000,
    );
    let n = f.connect();
    let report = n.stat().expect("stat");
    assert!(report.contains("\nmemory charged 0 of 600000 orphans 0 of 7 "), "{report}");
    let u = UdpSocket::bind_via(&n, "0.0.0.0:9400").expect("bind");
    u.set_recv_buffer_size(2 << 20).expect("SO_RCVBUF");
    let report = n.stat().expect("stat");
    let line = report.lines().find(|l| l.starts_with("client ")).expect("a client line");
    assert!(line.contains(" memory 600000 of 33554432 "), "the cap binds, not the budget: {report}");
    drop(u);
}
