//! Unmodified programs through netd with `nagare run` (the preload
//! library): each test starts `nagare netd` on a TAP in a namespace it
//! makes and removes, runs Linux programs with their `AF_INET` sockets
//! through it against peers on the kernel's side of the TAP, and checks
//! every byte. The README's table of programs is these tests.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KERNEL: &str = "10.83.0.1";
const NAGARE: &str = "10.83.0.2";
const KERNEL6: &str = "fd00:83::1";
const NAGARE6: &str = "fd00:83::2";

/// A namespace with `nagare netd` on its TAP, and a scratch directory.
struct Setup {
    ns: Netns,
    netd: Process,
    socket: PathBuf,
    dir: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        Setup::with_families(tag, false)
    }

    /// As [`Setup::new`], netd with [`NAGARE6`] beside its IPv4 address and
    /// the kernel's side with [`KERNEL6`] (once netd's address passed
    /// duplicate address detection).
    fn with_families(tag: &str, ipv6: bool) -> Setup {
        Setup::with_netd_args(tag, ipv6, &[])
    }

    /// As [`Setup::with_families`], netd started with `args` too.
    fn with_netd_args(tag: &str, ipv6: bool, args: &[&str]) -> Setup {
        let library = Path::new(nagare()).with_file_name("libnagare_preload.so");
        assert!(
            library.is_file(),
            "{} is missing: build it first (cargo build -p nagare-preload; scripts/test.sh does)",
            library.display()
        );
        let ns = Netns::new(tag);
        let dir = std::env::temp_dir().join(format!("nagare-run-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("netd.sock");
        let mut command = ns.command(nagare());
        command.args(["netd", "--tap", "tap0", "--addr", &format!("{NAGARE}/24")]);
        if ipv6 {
            command.args(["--addr", &format!("{NAGARE6}/64")]);
        }
        command.args(args);
        let netd = Process::spawn(command.arg("--socket").arg(&socket).stdout(Stdio::null()).stderr(Stdio::null()));
        assert!(
            wait_until(Duration::from_secs(10), || socket.exists()
                && ns.command("ip").args(["link", "show", "tap0"]).output().is_ok_and(|o| o.status.success())),
            "netd never made its TAP and socket"
        );
        ns.ip(&["addr", "add", &format!("{KERNEL}/24"), "dev", "tap0"]);
        if ipv6 {
            ns.ip(&["-6", "addr", "add", &format!("{KERNEL6}/64"), "dev", "tap0", "nodad"]);
        }
        ns.ip(&["link", "set", "tap0", "up"]);
        assert!(answers_ping(&ns, NAGARE), "nagare netd never answered a ping");
        if ipv6 {
            let answers = wait_until(Duration::from_secs(15), || {
                let ping =
                    ns.command("ping").args(["-6", "-c", "1", "-W", "1", NAGARE6]).stdout(Stdio::null()).status();
                ping.is_ok_and(|s| s.success())
            });
            assert!(answers, "nagare netd never answered ping -6");
        }
        Setup { ns, netd, socket, dir }
    }

    /// `program` run through netd (`nagare run --via`), in the namespace.
    fn run(&self, program: &str) -> Command {
        let mut c = self.ns.command(nagare());
        c.args(["run", "--via"]).arg(&self.socket).args(["--", program]);
        c
    }

    /// netd's report (`nagare stat`).
    fn stat(&self) -> String {
        let out = self.ns.command(nagare()).args(["stat", "--via"]).arg(&self.socket).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `program` on the kernel's stack, in the namespace.
    fn kernel(&self, program: &str) -> Command {
        self.ns.command(program)
    }

    /// A file of `len` varied bytes in the scratch directory.
    fn file(&self, name: &str, len: usize, seed: u64) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, pattern(len, seed)).unwrap();
        path
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `c` for at most `secs`, and fails the test unless it exits 0.
fn ok(c: &mut Command, secs: u64, what: &str) -> Bounded {
    let out = run_bounded(c, Duration::from_secs(secs));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "{what} failed ({:?}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    out
}

/// Waits until a server through netd takes a connection on `addr:port`
/// (the kernel's `nc -z` connects and closes).
fn wait_for_port(setup: &Setup, addr: &str, port: u16) {
    let up = wait_until(Duration::from_secs(10), || {
        setup
            .kernel("nc")
            .args(["-z", "-w", "1", addr, &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(up, "nothing listens on {addr}:{port}");
}

/// `nc` both ways and `socat` relaying: nagare's nc sends to the kernel's,
/// the kernel's nc sends to nagare's, and socat through netd relays a
/// kernel client to a kernel server; every byte arrives.
#[test]
fn nc_both_ways_and_socat_relays() {
    if let Some(reason) = interop_unavailable(&["nc", "socat", "ping"]) {
        return skip("nc_both_ways_and_socat_relays", &reason);
    }
    let s = Setup::new("runnc");
    let data = s.file("data.bin", 3 << 20, 1);
    let got = s.dir.join("got.bin");

    // nagare's nc to the kernel's.
    let mut server =
        Process::spawn(s.kernel("nc").args(["-l", KERNEL, "9000"]).stdout(std::fs::File::create(&got).unwrap()));
    wait_for_port_kernel(&s, 9000);
    ok(s.run("nc").args(["-N", KERNEL, "9000"]).stdin(std::fs::File::open(&data).unwrap()), 30, "nagare nc client");
    server.terminate(Duration::from_secs(10));
    assert_eq!(sha256(&got), sha256(&data), "nc through netd to the kernel");

    // The kernel's nc to nagare's (a probe would take its one connection:
    // it is given time to listen instead).
    let mut server = Process::spawn(
        s.run("nc").args(["-l", NAGARE, "9002"]).stdout(std::fs::File::create(&got).unwrap()).stderr(Stdio::null()),
    );
    std::thread::sleep(Duration::from_millis(700));
    ok(s.kernel("nc").args(["-N", NAGARE, "9002"]).stdin(std::fs::File::open(&data).unwrap()), 30, "kernel nc client");
    let _ = wait_until(Duration::from_secs(10), || std::fs::metadata(&got).is_ok_and(|m| m.len() == 3 << 20));
    server.terminate(Duration::from_secs(5));
    assert_eq!(sha256(&got), sha256(&data), "nc from the kernel to nc through netd");

    // socat through netd relays the kernel's client to the kernel's server.
    let mut sink =
        Process::spawn(s.kernel("nc").args(["-l", KERNEL, "9003"]).stdout(std::fs::File::create(&got).unwrap()));
    wait_for_port_kernel(&s, 9003);
    let mut relay = Process::spawn(
        s.run("socat")
            .args([&format!("TCP-LISTEN:9004,bind={NAGARE}"), &format!("TCP:{KERNEL}:9003")])
            .stderr(Stdio::null()),
    );
    std::thread::sleep(Duration::from_millis(500));
    ok(s.kernel("nc").args(["-N", NAGARE, "9004"]).stdin(std::fs::File::open(&data).unwrap()), 30, "through socat");
    let _ = wait_until(Duration::from_secs(10), || std::fs::metadata(&got).is_ok_and(|m| m.len() == 3 << 20));
    sink.terminate(Duration::from_secs(5));
    relay.terminate(Duration::from_secs(5));
    assert_eq!(sha256(&got), sha256(&data), "relayed by socat through netd");
}

/// `nc -6` both ways over IPv6: nagare's to the kernel's, the kernel's to
/// nagare's, byte-exact, through netd's engine.
#[test]
fn nc_both_ways_over_ipv6() {
    if let Some(reason) = interop_unavailable(&["nc", "ss", "ping"]) {
        return skip("nc_both_ways_over_ipv6", &reason);
    }
    let s = Setup::with_families("runnc6", true);
    let data = s.file("data.bin", 3 << 20, 7);
    let got = s.dir.join("got.bin");

    let mut server =
        Process::spawn(s.kernel("nc").args(["-6", "-l", KERNEL6, "9010"]).stdout(std::fs::File::create(&got).unwrap()));
    wait_for_port_kernel(&s, 9010);
    ok(s.run("nc").args(["-6", "-N", KERNEL6, "9010"]).stdin(std::fs::File::open(&data).unwrap()), 30, "nagare nc -6");
    server.terminate(Duration::from_secs(10));
    assert_eq!(sha256(&got), sha256(&data), "nc -6 through netd to the kernel");

    let mut server = Process::spawn(
        s.run("nc")
            .args(["-6", "-l", NAGARE6, "9012"])
            .stdout(std::fs::File::create(&got).unwrap())
            .stderr(Stdio::null()),
    );
    std::thread::sleep(Duration::from_millis(700));
    ok(
        s.kernel("nc").args(["-6", "-N", NAGARE6, "9012"]).stdin(std::fs::File::open(&data).unwrap()),
        30,
        "kernel nc -6",
    );
    let _ = wait_until(Duration::from_secs(10), || std::fs::metadata(&got).is_ok_and(|m| m.len() == 3 << 20));
    server.terminate(Duration::from_secs(5));
    assert_eq!(sha256(&got), sha256(&data), "the kernel's nc -6 to nc through netd");

    // Both went through netd's engine over IPv6, not the kernel's own
    // stack (which holds both addresses' network too): 3 MiB each way is
    // at least 48 segments of 64 KiB.
    let report = s.stat();
    for counter in ["tcp6_segments_received", "tcp6_segments_sent"] {
        let n = report
            .lines()
            .find_map(|l| l.strip_prefix(&format!("engine {counter} ")))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert!(n.is_some_and(|n| n >= 48), "netd's engine {counter} {n:?}:\n{report}");
    }
}

/// Waits until the kernel's stack listens on TCP `port` (`ss`).
fn wait_for_port_kernel(setup: &Setup, port: u16) {
    let up = wait_until(Duration::from_secs(10), || {
        setup
            .kernel("ss")
            .args(["-Htln", &format!("sport = :{port}")])
            .output()
            .is_ok_and(|o| !String::from_utf8_lossy(&o.stdout).trim().is_empty())
    });
    assert!(up, "the kernel's server never listened on {port}");
}

/// A kernel `python3 -m http.server`: curl, wget and python3's urllib
/// through netd each download 20 MB from it, byte-exact.
#[test]
fn curl_wget_and_python_download_through_netd() {
    if let Some(reason) = interop_unavailable(&["curl", "wget", "python3", "ss", "ping"]) {
        return skip("curl_wget_and_python_download_through_netd", &reason);
    }
    let s = Setup::new("runget");
    let www = s.dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let data = s.file("www/big.bin", 20 << 20, 2);
    let _server = Process::spawn(
        s.kernel("python3")
            .args(["-m", "http.server", "--bind", KERNEL, "8000", "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_for_port_kernel(&s, 8000);
    let url = format!("http://{KERNEL}:8000/big.bin");
    let out = s.dir.join("curl.bin");
    ok(s.run("curl").args(["-sS", "--fail", "-o"]).arg(&out).arg(&url), 60, "curl");
    assert_eq!(sha256(&out), sha256(&data), "curl through netd");
    let out = s.dir.join("wget.bin");
    ok(s.run("wget").args(["-q", "-O"]).arg(&out).arg(&url), 60, "wget");
    assert_eq!(sha256(&out), sha256(&data), "wget through netd");
    let out = s.dir.join("urllib.bin");
    let script = format!(
        "import urllib.request; open({:?}, 'wb').write(urllib.request.urlopen({url:?}, timeout=30).read())",
        out.display().to_string()
    );
    ok(s.run("python3").args(["-c", &script]), 60, "python3 urllib");
    assert_eq!(sha256(&out), sha256(&data), "python3 urllib through netd");
}

/// Servers through netd: `python3 -m http.server` (poll) and nginx (epoll,
/// sendfile; its master and two workers, which run as another user and
/// share the master's listener across fork) each serve 20 MB to the
/// kernel's curl (python3's to its wget too), byte-exact; nginx ends on
/// SIGTERM.
#[test]
fn python_and_nginx_serve_the_kernel_through_netd() {
    if let Some(reason) = interop_unavailable(&["curl", "wget", "python3", "nginx", "nc", "ping"]) {
        return skip("python_and_nginx_serve_the_kernel_through_netd", &reason);
    }
    let s = Setup::new("runsrv");
    let www = s.dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let data = s.file("www/big.bin", 20 << 20, 3);

    let mut python = Process::spawn(
        s.run("python3")
            .args(["-m", "http.server", "--bind", NAGARE, "8001", "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_for_port(&s, NAGARE, 8001);
    let out = s.dir.join("from-python.bin");
    ok(
        s.kernel("curl").args(["-sS", "--fail", "-o"]).arg(&out).arg(format!("http://{NAGARE}:8001/big.bin")),
        60,
        "curl",
    );
    assert_eq!(sha256(&out), sha256(&data), "python3's http.server through netd");
    let out = s.dir.join("from-python-wget.bin");
    ok(s.kernel("wget").args(["-q", "-O"]).arg(&out).arg(format!("http://{NAGARE}:8001/big.bin")), 60, "wget");
    assert_eq!(sha256(&out), sha256(&data), "python3's http.server through netd, to wget");
    python.terminate(Duration::from_secs(5));

    let conf = s.dir.join("nginx.conf");
    let temp = s.dir.join("nginx-temp");
    std::fs::create_dir_all(&temp).unwrap();
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process on;\nworker_processes 2;\nerror_log stderr;\npid {pid};\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; sendfile on;\n\
             client_body_temp_path {t}/body; proxy_temp_path {t}/proxy; fastcgi_temp_path {t}/fcgi;\n\
             uwsgi_temp_path {t}/uwsgi; scgi_temp_path {t}/scgi;\n\
             server {{ listen {NAGARE}:8002; root {www}; }} }}\n",
            pid = s.dir.join("nginx.pid").display(),
            t = temp.display(),
            www = www.display()
        ),
    )
    .unwrap();
    let mut nginx = Process::spawn(s.run("nginx").arg("-c").arg(&conf).stdout(Stdio::null()).stderr(Stdio::null()));
    wait_for_port(&s, NAGARE, 8002);
    for i in 0..3 {
        let out = s.dir.join(format!("from-nginx-{i}.bin"));
        ok(
            s.kernel("curl").args(["-sS", "--fail", "-o"]).arg(&out).arg(format!("http://{NAGARE}:8002/big.bin")),
            60,
            "curl",
        );
        assert_eq!(sha256(&out), sha256(&data), "nginx through netd");
    }
    // The master and its workers share the listener: each worker is a
    // client of netd of its own beside the master's.
    let report = s.stat();
    let holders = report.lines().filter(|l| l.contains(" listener local ") && l.contains(" holders 3")).count();
    assert_eq!(holders, 3, "the master's and both workers' listener:\n{report}");
    assert!(nginx.terminate(Duration::from_secs(5)).is_some(), "nginx did not end on SIGTERM");
}

/// iperf3 both ways: nagare's client to the kernel's server, and the
/// kernel's client to nagare's server; each run moves data and both ends
/// agree on the bytes.
#[test]
fn iperf3_both_ways_through_netd() {
    if let Some(reason) = interop_unavailable(&["iperf3", "nc", "ss", "ping"]) {
        return skip("iperf3_both_ways_through_netd", &reason);
    }
    let s = Setup::new("runiperf");
    let received = |json: &str| -> u64 {
        json.split("\"sum_received\"")
            .nth(1)
            .and_then(|r| r.split("\"bytes\":").nth(1))
            .and_then(|r| r.split([',', '}']).next())
            .and_then(|n| n.trim().parse::<f64>().ok())
            .map_or(0, |f| f as u64)
    };
    let _server = Process::spawn(s.kernel("iperf3").args(["-s", "-B", KERNEL, "-1"]).stdout(Stdio::null()));
    wait_for_port_kernel(&s, 5201);
    let out = ok(s.run("iperf3").args(["-c", KERNEL, "-t", "2", "--json"]), 30, "iperf3 client through netd");
    assert!(received(&out.stdout) > 10 << 20, "the kernel's iperf3 server got little:\n{}", out.stdout);

    let _server = Process::spawn(s.run("iperf3").args(["-s", "-B", NAGARE, "-p", "5202", "-1"]).stdout(Stdio::null()));
    std::thread::sleep(Duration::from_millis(800));
    let out = ok(s.kernel("iperf3").args(["-c", NAGARE, "-p", "5202", "-t", "2", "--json"]), 30, "iperf3 client");
    assert!(received(&out.stdout) > 10 << 20, "iperf3's server through netd got little:\n{}", out.stdout);
}

/// redis-server through netd (epoll) answers redis-cli byte-exact and the
/// kernel's redis-benchmark without an error, with 10 connections and
/// with 300 (more than the session's pool keeps receives posted for;
/// netd's default budget holds them, its later connections at the
/// floor).
#[test]
fn redis_serves_the_kernel_benchmark_through_netd() {
    if let Some(reason) = interop_unavailable(&["redis-server", "redis-cli", "redis-benchmark", "nc", "ping"]) {
        return skip("redis_serves_the_kernel_benchmark_through_netd", &reason);
    }
    let s = Setup::new("runredis");
    let mut redis = Process::spawn(
        s.run("redis-server")
            .args(["--bind", NAGARE, "--port", "6379", "--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_for_port(&s, NAGARE, 6379);
    ok(s.kernel("redis-cli").args(["-h", NAGARE, "set", "nagare", "flows"]), 10, "redis-cli set");
    let got = ok(s.kernel("redis-cli").args(["-h", NAGARE, "get", "nagare"]), 10, "redis-cli get");
    assert_eq!(got.stdout.trim(), "flows");
    for clients in ["10", "300"] {
        let bench = ok(
            s.kernel("redis-benchmark").args(["-h", NAGARE, "-q", "-n", "20000", "-c", clients, "-t", "set,get"]),
            60,
            "redis-benchmark",
        );
        let text = bench.stdout.replace('\r', "\n");
        assert!(!text.contains("Error") && !bench.stderr.contains("Error"), "{clients}: {text}\n{}", bench.stderr);
        for test in ["SET:", "GET:"] {
            let done = text.lines().any(|l| l.starts_with(test) && l.contains("requests per second"));
            assert!(done, "{clients} connections, no {test}:\n{text}");
        }
    }
    redis.terminate(Duration::from_secs(5));
}

/// Keys and an `sshd_config` for an sshd listening on `addr:2222`, in the
/// setup's directory: the config and the client's ssh options.
fn ssh_setup(s: &Setup, addr: &str) -> (PathBuf, Vec<String>) {
    let keys = s.dir.join("ssh");
    std::fs::create_dir_all(&keys).unwrap();
    for key in ["host", "client"] {
        run_ok(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(keys.join(key)));
    }
    std::fs::copy(keys.join("client.pub"), keys.join("authorized_keys")).unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    let config = keys.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port 2222\nListenAddress {addr}\nHostKey {k}/host\nAuthorizedKeysFile {k}/authorized_keys\n\
             PermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPidFile none\nSubsystem sftp /usr/lib/openssh/sftp-server\n",
            k = keys.display()
        ),
    )
    .unwrap();
    let key = keys.join("client").display().to_string();
    let options = ["-i", &key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o"]
        .into_iter()
        .chain(["BatchMode=yes", "-o", "LogLevel=ERROR"])
        .map(String::from)
        .collect();
    (config, options)
}

/// Why the ssh tests cannot run here, if they cannot.
fn ssh_unavailable() -> Option<String> {
    if let Some(reason) = interop_unavailable(&["ssh", "scp", "ssh-keygen", "ss", "ping"]) {
        return Some(reason);
    }
    if !Path::new(SSHD).is_file() || !Path::new("/usr/lib/openssh/sftp-server").is_file() {
        return Some(String::from("sshd is not installed (scripts/install-test-deps.sh installs openssh-server)"));
    }
    None
}

const SSHD: &str = "/usr/sbin/sshd";

/// Mint's demonstration: ssh through netd runs a command on the kernel's
/// sshd, and scp through netd copies 100 MB to it, byte-exact.
#[test]
fn ssh_runs_a_command_and_scp_copies_100_mb_through_netd() {
    if let Some(reason) = ssh_unavailable() {
        return skip("ssh_runs_a_command_and_scp_copies_100_mb_through_netd", &reason);
    }
    let s = Setup::new("runssh");
    let (config, options) = ssh_setup(&s, KERNEL);
    let _sshd = Process::spawn(s.kernel(SSHD).args(["-D", "-e", "-f"]).arg(&config).stderr(Stdio::null()));
    wait_for_port_kernel(&s, 2222);
    let out =
        ok(s.run("ssh").args(&options).args(["-p", "2222", &format!("root@{KERNEL}"), "echo", "over-netd"]), 30, "ssh");
    assert_eq!(out.stdout.trim(), "over-netd");
    let data = s.file("big.bin", 100 << 20, 4);
    let copy = s.dir.join("big.copy");
    ok(
        s.run("scp").args(&options).args(["-P", "2222"]).arg(&data).arg(format!("root@{KERNEL}:{}", copy.display())),
        120,
        "scp",
    );
    assert_eq!(sha256(&copy), sha256(&data), "scp through netd");
}

/// sshd through netd, as it runs: its listener's process forks a child
/// for each connection, which runs sshd again (`exec`) with the
/// connection, and that one forks an unprivileged child (another user, a
/// root directory of its own, system calls filtered) for the handshake.
/// Each holds the connection in turn. The kernel's ssh runs commands on
/// it and scp copies 100 MB to it, byte-exact, and sshd ends on SIGTERM.
#[test]
fn sshd_serves_ssh_and_scp_through_netd_across_fork_and_exec() {
    if let Some(reason) = ssh_unavailable() {
        return skip("sshd_serves_ssh_and_scp_through_netd_across_fork_and_exec", &reason);
    }
    let s = Setup::new("runsshd");
    let (config, options) = ssh_setup(&s, NAGARE);
    let mut sshd = Process::spawn(s.run(SSHD).args(["-D", "-e", "-f"]).arg(&config).stderr(Stdio::null()));
    wait_for_port(&s, NAGARE, 2222);
    for i in 0..2 {
        let said = format!("through-netd-{i}");
        let out = ok(
            s.kernel("ssh").args(&options).args(["-p", "2222", &format!("root@{NAGARE}"), "echo", &said]),
            30,
            "ssh",
        );
        assert_eq!(out.stdout.trim(), said, "{}", out.stderr);
    }
    let data = s.file("big.bin", 100 << 20, 5);
    let copy = s.dir.join("big.copy");
    ok(
        s.kernel("scp").args(&options).args(["-P", "2222"]).arg(&data).arg(format!("root@{NAGARE}:{}", copy.display())),
        120,
        "scp",
    );
    assert_eq!(sha256(&copy), sha256(&data), "scp to sshd through netd");
    assert!(sshd.terminate(Duration::from_secs(5)).is_some(), "sshd did not end on SIGTERM");
}

/// A server that forks a child for each connection it accepts (python's
/// `os.fork`), the client speaking first: the child, which first forks a
/// helper of its own, reads what the client sent
/// before the fork, answers, and the parent's close of its copy neither
/// resets nor ends the connection.
#[test]
fn a_forking_server_hands_each_connection_to_its_child() {
    if let Some(reason) = interop_unavailable(&["python3", "nc", "ping"]) {
        return skip("a_forking_server_hands_each_connection_to_its_child", &reason);
    }
    let s = Setup::new("runfork");
    let server = "import os, socket\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('0.0.0.0', 7300)); l.listen(8)\n\
         while True:\n\
         \x20   c, a = l.accept()\n\
         \x20   pid = os.fork()\n\
         \x20   if pid == 0:\n\
         \x20       l.close(); data = b''\n\
         \x20       helper = os.fork()\n\
         \x20       if helper == 0: os._exit(0)\n\
         \x20       os.waitpid(helper, 0)\n\
         \x20       while not data.endswith(b'.'):\n\
         \x20           x = c.recv(100)\n\
         \x20           if not x: os._exit(0)\n\
         \x20           data += x\n\
         \x20       c.sendall(b'child of %d got ' % os.getppid() + data); c.close(); os._exit(0)\n\
         \x20   c.close()\n\
         \x20   os.waitpid(pid, 0)\n";
    let mut python = Process::spawn(s.run("python3").args(["-c", server]));
    wait_for_port(&s, NAGARE, 7300);
    for i in 0..3 {
        let said = format!("hello {i}.");
        let reply = ok(
            s.kernel("python3").args([
                "-c",
                &format!(
                    "import socket; c = socket.create_connection(({NAGARE:?}, 7300), 10); c.sendall(b{said:?})\n\
                     d = b''\nwhile True:\n    x = c.recv(100)\n    if not x: break\n    d += x\nprint(d.decode())"
                ),
            ]),
            20,
            "a client of the forking server",
        );
        assert!(reply.stdout.trim().ends_with(&format!("got {said}")), "{}{}", reply.stdout, reply.stderr);
    }
    python.terminate(Duration::from_secs(5));
}

/// The value of counter `name` (`netd NAME N`) in netd's report `stat`.
fn counter(stat: &str, name: &str) -> u64 {
    stat.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0)
}

/// A server that sets a connection's options and forks a child for it
/// (as PostgreSQL's postmaster does for every client): the child finds
/// the options in netd without setting them again, and the listener,
/// shared at the first fork (a helper that holds it, as PostgreSQL's
/// other children do), is not shared again at the next. netd's
/// counts of `SET_OPTION` and `SHARE` requests say what each connection
/// cost: `TCP_NODELAY`, the probes' interval and count and keepalive on
/// in the parent (4), nothing in the child; one share per connection and
/// one for the listener. From its second fork on, the server connects a
/// spare session after each fork, which the next fork's child takes.
#[test]
fn a_forked_child_finds_its_connections_options_and_the_listener_is_shared_once() {
    let name = "a_forked_child_finds_its_connections_options_and_the_listener_is_shared_once";
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip(name, &reason);
    }
    let s = Setup::new("runopts");
    let server = "import os, socket, time\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('0.0.0.0', 7301)); l.listen(8)\n\
         helper = os.fork()\n\
         if helper == 0: time.sleep(30); os._exit(0)\n\
         for i in range(3):\n\
         \x20   c, a = l.accept()\n\
         \x20   c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n\
         \x20   c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)\n\
         \x20   c.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)\n\
         \x20   pid = os.fork()\n\
         \x20   if pid == 0:\n\
         \x20       l.close(); x = c.recv(100)\n\
         \x20       c.sendall(b'%s nodelay %d interval %d' % (x, c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), c.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)))\n\
         \x20       c.close(); os._exit(0)\n\
         \x20   c.close(); os.waitpid(pid, 0)\n\
         os.kill(helper, 9); os.waitpid(helper, 0)\n";
    let mut python = Process::spawn(s.run("python3").args(["-c", server]));
    let client = format!(
        "import socket, time\n\
         {}\
         for i in range(3):\n\
         \x20   c = connect(7301)\n\
         \x20   c.sendall(b'hello %d' % i); d = b''\n\
         \x20   while True:\n\
         \x20       x = c.recv(100)\n\
         \x20       if not x: break\n\
         \x20       d += x\n\
         \x20   print(d.decode())\n",
        connect_when_listening()
    );
    let out = ok(s.kernel("python3").args(["-c", &client]), 30, "the clients");
    assert_eq!(
        out.stdout, "hello 0 nodelay 1 interval 5\nhello 1 nodelay 1 interval 5\nhello 2 nodelay 1 interval 5\n",
        "{}",
        out.stderr
    );
    python.wait(Duration::from_secs(10)).expect("the server ends after three connections");
    let stat = s.stat();
    assert_eq!(counter(&stat, "netd requests_set_option"), 3 * 4, "{stat}");
    assert_eq!(counter(&stat, "netd requests_share"), 3 + 1, "{stat}");
    // Sessions: the server's, one for each of the first two children, a
    // spare after the second fork and after each later one (the third
    // and fourth children take the spares), and the report's.
    assert_eq!(counter(&stat, "netd clients_accepted"), 1 + 2 + 3 + 1, "{stat}");
}

/// A connection accepted on a listener with keepalive set has the
/// listener's keepalive, as on Linux: `getsockopt` reads it back, and a
/// `setsockopt` that changes it (the probes' interval back to 75 s)
/// reaches netd. netd's count of `SET_OPTION` requests: the interval and
/// count and the idle time at the accept (3), the interval and count
/// again at the change (2).
#[test]
fn an_accepted_connection_has_its_listeners_keepalive() {
    let name = "an_accepted_connection_has_its_listeners_keepalive";
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip(name, &reason);
    }
    let s = Setup::new("runaccopt");
    let server = "import socket\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)\n\
         l.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)\n\
         l.bind(('0.0.0.0', 7303)); l.listen(1)\n\
         c, a = l.accept()\n\
         print(c.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), c.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL), flush=True)\n\
         c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 75)\n\
         c.sendall(b'done'); c.close()\n";
    let mut python = Process::spawn(s.run("python3").args(["-c", server]).stdout(Stdio::piped()));
    let client = format!(
        "import socket, time\n\
         {}\
         c = connect(7303)\n\
         print(c.recv(100).decode())\n",
        connect_when_listening()
    );
    let out = ok(s.kernel("python3").args(["-c", &client]), 30, "the client");
    assert_eq!(out.stdout.trim(), "done", "{}", out.stderr);
    let said = python.wait(Duration::from_secs(10)).expect("the server ends");
    assert_eq!(String::from_utf8_lossy(&said.stdout), "1 5\n", "{}", String::from_utf8_lossy(&said.stderr));
    let stat = s.stat();
    assert_eq!(counter(&stat, "netd requests_set_option"), 3 + 2, "{stat}");
}

/// A parent's session ends with the parent, not with the last child that
/// inherited a copy of it: a server forks a child that keeps its
/// listener, then one that holds no socket (after closing its own), and
/// exits while both children sleep. netd's report then has the first
/// child's session (with the listener) and the report's own, and no
/// session of the parent's (nor the spare one it connected for a next
/// fork), which a child's copy would keep.
#[test]
fn a_parents_sessions_end_with_it_while_its_children_live() {
    let name = "a_parents_sessions_end_with_it_while_its_children_live";
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip(name, &reason);
    }
    let s = Setup::new("runparent");
    let script = "import os, socket, time\n\
         l = socket.socket(); l.bind(('0.0.0.0', 7302)); l.listen(4)\n\
         a = os.fork()\n\
         if a == 0: os.close(1); os.close(2); time.sleep(30); os._exit(0)\n\
         l.close()\n\
         b = os.fork()\n\
         if b == 0: os.close(1); os.close(2); time.sleep(30); os._exit(0)\n\
         print(a, b, flush=True)\n";
    let out = ok(s.run("python3").args(["-c", script]), 20, "the parent");
    let children: Vec<i32> = out.stdout.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    assert_eq!(children.len(), 2, "{}{}", out.stdout, out.stderr);
    let clients = |r: &str| r.lines().filter(|l| l.starts_with("client ")).count();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut report = s.stat();
    while clients(&report) != 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        report = s.stat();
    }
    for pid in children {
        // SAFETY: a signal to the children this test's program made.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert_eq!(clients(&report), 2, "{report}");
    assert!(report.contains(" listeners 1 "), "the first child's session holds the listener:\n{report}");
}

/// Python lines (after `import socket, time`) that define `connect(port)`:
/// a connection from the kernel's side to netd's `port`, tried again
/// while the server through netd is not listening yet (at most 10 s).
fn connect_when_listening() -> String {
    format!(
        "def connect(port):\n\
         \x20   for _ in range(100):\n\
         \x20       try:\n\
         \x20           return socket.create_connection(({NAGARE:?}, port), 10)\n\
         \x20       except OSError:\n\
         \x20           time.sleep(0.1)\n\
         \x20   raise OSError('nobody listens on %d' % port)\n"
    )
}

/// Python lines that define `readn(n)`: `n` bytes from connection `c`
/// (fewer at its end).
const READN: &str = "def readn(n):\n\
     \x20   d = b''\n\
     \x20   while len(d) < n:\n\
     \x20       x = c.recv(n - len(d))\n\
     \x20       if not x: break\n\
     \x20       d += x\n\
     \x20   return d\n";

/// Python lines that call on connection `c` until no placeholder in the
/// namespace is named for a token (`/proc/net/unix`), at most 5 s, and
/// print `named` and how many still are.
const WAIT_UNNAMED: &str = "named = -1\n\
     for _ in range(250):\n\
     \x20   c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)\n\
     \x20   named = sum('@nagare-shared-' in l for l in open('/proc/net/unix'))\n\
     \x20   if named == 0: break\n\
     \x20   time.sleep(0.02)\n\
     print('named', named, flush=True)\n";

/// The kernel's python3 connects to the one connection a server through
/// netd accepts on `port` (waiting for it to listen: a probe's connection
/// would be the one accepted), sends `total` bytes and checks that the
/// same come back.
fn echo_through(s: &Setup, port: u16, total: usize) {
    let connect = connect_when_listening();
    let client = format!(
        "import socket, time\n\
         {connect}\
         data = bytes((i * 7 + 3) % 251 for i in range({total}))\n\
         c = connect({port})\n\
         c.sendall(data)\n\
         d = b''\n\
         while len(d) < {total}:\n\
         \x20   x = c.recv(65536)\n\
         \x20   if not x: break\n\
         \x20   d += x\n\
         print('same' if d == data else 'differs after %d' % len(d))\n"
    );
    let out = ok(s.kernel("python3").args(["-c", &client]), 30, "the client");
    assert_eq!(out.stdout.trim(), "same", "{}", out.stderr);
}

/// A forking server's child, handed the connection, takes it as its own
/// once the parent closed its copy (as `sshd`'s and every
/// fork-per-connection server's children are handed theirs): the bytes
/// read through the shared path and after the reclaim arrive whole and in
/// order, and no placeholder is named for a token any more
/// (`/proc/net/unix`).
#[test]
fn a_child_handed_its_connection_takes_it_back_once_the_parent_let_go() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("a_child_handed_its_connection_takes_it_back_once_the_parent_let_go", &reason);
    }
    let s = Setup::new("runhanded");
    const TOTAL: usize = 400_000;
    let server = format!(
        "import os, socket, time\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('0.0.0.0', 7311)); l.listen(1)\n\
         c, a = l.accept()\n\
         pid = os.fork()\n\
         if pid != 0:\n\
         \x20   c.close(); l.close(); os.waitpid(pid, 0); os._exit(0)\n\
         l.close()\n\
         {READN}\
         got = readn(50000)\n\
         {WAIT_UNNAMED}\
         got += readn({TOTAL} - 50000)\n\
         c.sendall(got)\n\
         c.settimeout(10); c.recv(1)\n\
         print('sent', len(got), flush=True)\n"
    );
    let mut python = Process::spawn(s.run("python3").args(["-c", &server]).stdout(Stdio::piped()));
    echo_through(&s, 7311, TOTAL);
    let server_out = python.wait(Duration::from_secs(15)).expect("the server ends once the client closed");
    let said = String::from_utf8_lossy(&server_out.stdout);
    assert_eq!(said, format!("named 0\nsent {TOTAL}\n"), "{}", String::from_utf8_lossy(&server_out.stderr));
}

/// A server that forks a helper which exits at once (as redis's `BGSAVE`
/// does) takes its connection back once the helper is gone: the bytes
/// read before the fork, through the shared path and after the reclaim
/// arrive whole and in order, the placeholder is no longer named for a
/// token (`/proc/net/unix`), and netd's line for the connection shows no
/// other holder.
#[test]
fn a_server_takes_its_connection_back_once_its_forked_helper_is_gone() {
    if let Some(reason) = interop_unavailable(&["python3", "nc", "ping"]) {
        return skip("a_server_takes_its_connection_back_once_its_forked_helper_is_gone", &reason);
    }
    let s = Setup::new("runback");
    const TOTAL: usize = 400_000;
    let server = format!(
        "import os, socket, time\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('0.0.0.0', 7310)); l.listen(1)\n\
         c, a = l.accept(); l.close()\n\
         {READN}\
         got = readn(50000)\n\
         pid = os.fork()\n\
         if pid == 0: os._exit(0)\n\
         os.waitpid(pid, 0)\n\
         got += readn(50000)\n\
         {WAIT_UNNAMED}\
         got += readn({TOTAL} - 100000)\n\
         c.sendall(got)\n\
         print('sent', len(got), flush=True)\n\
         time.sleep(30)\n"
    );
    let mut python = Process::spawn(s.run("python3").args(["-c", &server]).stdout(Stdio::piped()));
    echo_through(&s, 7310, TOTAL);
    let report = s.stat();
    assert!(report.lines().any(|l| l.starts_with("socket ") && l.contains(":7310 ")), "{report}");
    assert!(!report.lines().any(|l| l.contains(" holders ")), "{report}");
    let server_out = python.terminate(Duration::from_secs(5)).expect("python3 ends");
    let said = String::from_utf8_lossy(&server_out.stdout);
    assert_eq!(said, format!("named 0\nsent {TOTAL}\n"), "{}", String::from_utf8_lossy(&server_out.stderr));
}

/// A connection handed to a grandchild that runs a program (the child
/// forks it and exits at once) is not taken back by the server while
/// that program holds its descriptor: each process holds a placeholder of
/// its own, watched by netd, which refuses the reclaim until the program
/// is gone. The program's write comes first, then the server's, and the
/// server takes the connection back once the program exited.
#[test]
fn a_connection_held_by_a_grandchild_s_program_is_taken_back_only_after_it() {
    if let Some(reason) = interop_unavailable(&["python3", "nc", "ping"]) {
        return skip("a_connection_held_by_a_grandchild_s_program_is_taken_back_only_after_it", &reason);
    }
    let s = Setup::new("runheld");
    let server = "import os, socket, sys, time\n\
         prog = 'import os, socket, sys\\nos.read(int(sys.argv[2]), 1)\\ns = socket.socket(fileno=int(sys.argv[1]))\\ns.sendall(b\"G\")\\n'\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('0.0.0.0', 7320)); l.listen(1)\n\
         c, a = l.accept(); l.close()\n\
         fd = c.fileno(); os.set_inheritable(fd, True)\n\
         r, w = os.pipe(); os.set_inheritable(r, True)\n\
         def named(): return sum('@nagare-shared-' in l for l in open('/proc/net/unix'))\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   if os.fork() == 0: os.execv(sys.executable, [sys.executable, '-c', prog, str(fd), str(r)])\n\
         \x20   os._exit(0)\n\
         os.waitpid(pid, 0)\n\
         for _ in range(30):\n\
         \x20   c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF); time.sleep(0.02)\n\
         print('held', named(), flush=True)\n\
         os.write(w, b'x')\n\
         n = -1\n\
         for _ in range(500):\n\
         \x20   c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF); n = named()\n\
         \x20   if n == 0: break\n\
         \x20   time.sleep(0.02)\n\
         print('named', n, flush=True)\n\
         c.sendall(b'P')\n\
         time.sleep(30)\n";
    let mut python = Process::spawn(s.run("python3").args(["-c", server]).stdout(Stdio::piped()));
    let connect = connect_when_listening();
    let client = format!(
        "import socket, time\n\
         {connect}\
         c = connect(7320)\n\
         d = b''\n\
         while len(d) < 2:\n\
         \x20   x = c.recv(10)\n\
         \x20   if not x: break\n\
         \x20   d += x\n\
         print(d.decode())\n"
    );
    let out = ok(s.kernel("python3").args(["-c", &client]), 30, "the client");
    let server_out = python.terminate(Duration::from_secs(5)).expect("python3 ends");
    let said = String::from_utf8_lossy(&server_out.stdout);
    assert_eq!(out.stdout.trim(), "GP", "{}\n{said}\n{}", out.stderr, String::from_utf8_lossy(&server_out.stderr));
    assert_eq!(said, "held 2\nnamed 0\n", "{}", String::from_utf8_lossy(&server_out.stderr));
}

/// UDP through netd from python3: a datagram to the kernel's echo and its
/// answer, unconnected and connected. A socket made and used before fork
/// sends and receives in the child, and then again in the parent; netd's
/// report names the child, which holds the session made for it.
#[test]
fn python_udp_and_a_socket_across_fork_through_netd() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("python_udp_and_a_socket_across_fork_through_netd", &reason);
    }
    let s = Setup::new("runudp");
    let echo = format!(
        "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(({KERNEL:?}, 9999))\n\
         for _ in range(4):\n    d, a = s.recvfrom(2048)\n    s.sendto(d.upper(), a)\n"
    );
    let mut echo = Process::spawn(s.kernel("python3").args(["-c", &echo]));
    std::thread::sleep(Duration::from_millis(500));
    let (nagare, socket) = (nagare(), s.socket.display().to_string());
    let client = format!(
        "import os, socket, subprocess\n\
         s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)\n\
         s.sendto(b'one', ({KERNEL:?}, 9999)); print(s.recvfrom(100)[0].decode())\n\
         c=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(5)\n\
         c.connect(({KERNEL:?}, 9999)); c.send(b'two'); print(c.recv(100).decode())\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   try:\n\
         \x20       s.sendto(b'four', ({KERNEL:?}, 9999))\n\
         \x20       if s.recvfrom(100)[0] != b'FOUR': os._exit(1)\n\
         \x20       stat = subprocess.run([{nagare:?}, 'stat', '--via', {socket:?}], capture_output=True).stdout\n\
         \x20       os._exit(0 if b' pid %d ' % os.getpid() in stat else 3)\n\
         \x20   except OSError:\n\
         \x20       os._exit(2)\n\
         _, status = os.waitpid(pid, 0); print('child', os.waitstatus_to_exitcode(status))\n\
         s.sendto(b'three', ({KERNEL:?}, 9999)); print(s.recvfrom(100)[0].decode())\n"
    );
    let out = ok(s.run("python3").args(["-c", &client]), 30, "python3 UDP client");
    assert_eq!(out.stdout, "ONE\nTWO\nchild 0\nTHREE\n", "{}", out.stderr);
    echo.terminate(Duration::from_secs(5));
}

/// A socket passed to a program started without `fork`'s handlers:
/// python3's `os.posix_spawn` and `subprocess` (which uses `vfork`) run
/// a python3 child that sends and receives on the parent's UDP socket,
/// which the parent then uses again. A close-on-exec socket, which the
/// program cannot inherit, is not shared for `posix_spawn` (its
/// placeholder is not named).
#[test]
fn a_socket_passed_through_posix_spawn_and_vfork_works_in_the_program() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("a_socket_passed_through_posix_spawn_and_vfork_works_in_the_program", &reason);
    }
    let s = Setup::new("runspawn");
    let echo = format!(
        "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(({KERNEL:?}, 9998))\n\
         for _ in range(4):\n    d, a = s.recvfrom(2048)\n    s.sendto(d.upper(), a)\n"
    );
    let mut echo = Process::spawn(s.kernel("python3").args(["-c", &echo]));
    std::thread::sleep(Duration::from_millis(500));
    let child = format!(
        "import socket, sys\n\
         c = socket.socket(fileno=int(sys.argv[1])); c.settimeout(5)\n\
         c.sendto(sys.argv[2].encode(), ({KERNEL:?}, 9998)); print(c.recvfrom(100)[0].decode(), flush=True)\n"
    );
    let parent = format!(
        "import os, socket, subprocess, sys\n\
         child = {child:?}\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)\n\
         s.sendto(b'one', ({KERNEL:?}, 9998)); print(s.recvfrom(100)[0].decode(), flush=True)\n\
         t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); t.bind(('0.0.0.0', 0))\n\
         fd = s.fileno(); os.set_inheritable(fd, True)\n\
         pid = os.posix_spawn(sys.executable, [sys.executable, '-c', child, str(fd), 'spawned'], os.environ)\n\
         _, status = os.waitpid(pid, 0); print('spawn', os.waitstatus_to_exitcode(status), flush=True)\n\
         print('named', sum('@nagare-shared-' in l for l in open('/proc/net/unix')), flush=True)\n\
         r = subprocess.run([sys.executable, '-c', child, str(fd), 'vforked'], pass_fds=[fd], timeout=20)\n\
         print('subprocess', r.returncode, flush=True)\n\
         s.sendto(b'last', ({KERNEL:?}, 9998)); print(s.recvfrom(100)[0].decode(), flush=True)\n"
    );
    let out = ok(s.run("python3").args(["-c", &parent]), 60, "python3 spawning children");
    assert_eq!(out.stdout, "ONE\nSPAWNED\nspawn 0\nnamed 1\nVFORKED\nsubprocess 0\nLAST\n", "{}", out.stderr);
    echo.terminate(Duration::from_secs(5));
}

/// A name server on the kernel's side that answers every `A` question
/// with 10.83.0.77 and every `PTR` question with ptr.nagare.test (and
/// every other with no answer), printing where each question came from.
const NAME_SERVER: &str = "import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
while True:
    q, a = s.recvfrom(512)
    print('from', a[0], flush=True)
    i = 12
    while i < len(q) and q[i]:
        i += q[i] + 1
    qtype = struct.unpack('!H', q[i + 1:i + 3])[0]
    ans = b''
    if qtype == 1:
        ans = b'\\xc0\\x0c' + struct.pack('!HHIH', 1, 1, 60, 4) + socket.inet_aton('10.83.0.77')
    if qtype == 12:
        target = b''.join(bytes([len(l)]) + l for l in b'ptr.nagare.test'.split(b'.')) + b'\\x00'
        ans = b'\\xc0\\x0c' + struct.pack('!HHIH', 12, 1, 60, len(target)) + target
    s.sendto(q[:2] + struct.pack('!HHHHH', 0x8180, 1, 1 if ans else 0, 0, 0) + q[12:i + 5] + ans, a)
";

/// `/etc/netns/NAME/resolv.conf`, which `ip netns exec` shows the
/// namespace's programs as `/etc/resolv.conf`; removed on drop.
struct ResolvConf(PathBuf);

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Name lookups through netd: getent and python3 ask the name server that
/// `/etc/resolv.conf` (or `nagare run --dns`) names, forward and reverse
/// (`getnameinfo`, `gethostbyaddr`), every question leaves from netd's
/// address (none from the kernel's stack, not even glibc's IPv6 lookups),
/// and `/etc/hosts` and numeric names need none.
#[test]
fn names_are_looked_up_through_netd() {
    if let Some(reason) = interop_unavailable(&["python3", "getent", "ping"]) {
        return skip("names_are_looked_up_through_netd", &reason);
    }
    let s = Setup::new("rundns");
    let conf_dir = Path::new("/etc/netns").join(&s.ns.name);
    std::fs::create_dir_all(&conf_dir).unwrap();
    let _conf = ResolvConf(conf_dir.clone());
    std::fs::write(conf_dir.join("resolv.conf"), format!("nameserver {KERNEL}\nsearch nagare.test\n")).unwrap();
    let log = s.dir.join("questions.log");
    let mut server = Process::spawn(
        s.kernel("python3").args(["-c", NAME_SERVER, KERNEL]).stdout(std::fs::File::create(&log).unwrap()),
    );
    std::thread::sleep(Duration::from_millis(500));

    let out = ok(s.run("getent").args(["hosts", "flows.nagare.test"]), 20, "getent hosts");
    assert!(out.stdout.starts_with("10.83.0.77"), "{}", out.stdout);
    let out = ok(s.run("getent").args(["ahosts", "flows"]), 20, "getent ahosts (a search domain)");
    assert!(out.stdout.contains("10.83.0.77") && out.stdout.contains("flows.nagare.test"), "{}", out.stdout);
    let script = "import socket; print(socket.gethostbyname('py.nagare.test')); print(socket.getaddrinfo('localhost', 80)[0][4][0]); \
                  print(socket.getnameinfo(('10.83.0.50', 80), socket.NI_NAMEREQD)); print(socket.gethostbyaddr('10.83.0.51'))";
    let out = ok(s.run("python3").args(["-c", script]), 20, "python3 lookups");
    assert_eq!(
        out.stdout,
        "10.83.0.77\n127.0.0.1\n('ptr.nagare.test', 'http')\n('ptr.nagare.test', [], ['10.83.0.51'])\n"
    );
    // --dns names the server instead of /etc/resolv.conf.
    std::fs::write(conf_dir.join("resolv.conf"), "nameserver 10.83.0.99\n").unwrap();
    let mut c = s.ns.command(nagare());
    c.args(["run", "--via"]).arg(&s.socket).args(["--dns", KERNEL, "--", "getent", "hosts", "flag.nagare.test"]);
    let out = ok(&mut c, 20, "getent through --dns");
    assert!(out.stdout.starts_with("10.83.0.77"), "{}", out.stdout);

    server.terminate(Duration::from_secs(5));
    let questions = std::fs::read_to_string(&log).unwrap();
    assert!(questions.lines().count() >= 6, "{questions}");
    assert!(questions.lines().all(|l| l == format!("from {NAGARE}")), "a question left from the kernel:\n{questions}");
}

/// A non-blocking connect through netd, as event loops make one:
/// `EINPROGRESS`, then writable once netd answers, `SO_ERROR` saying how
/// it went: 0 to a listening port, `ECONNREFUSED` to a closed one (and a
/// second connect meanwhile `EALREADY` or done).
#[test]
fn a_non_blocking_connect_gives_einprogress_then_its_answer() {
    if let Some(reason) = interop_unavailable(&["python3", "nc", "ss", "ping"]) {
        return skip("a_non_blocking_connect_gives_einprogress_then_its_answer", &reason);
    }
    let s = Setup::new("runconn");
    let _server = Process::spawn(s.kernel("nc").args(["-l", KERNEL, "9100"]).stdout(Stdio::null()));
    wait_for_port_kernel(&s, 9100);
    let script = format!(
        "import errno, select, socket\n\
         for port in (9100, 9101):\n\
         \x20   c = socket.socket(socket.AF_INET, socket.SOCK_STREAM); c.setblocking(False)\n\
         \x20   r = c.connect_ex(({KERNEL:?}, port)); print(errno.errorcode.get(r, r))\n\
         \x20   again = c.connect_ex(({KERNEL:?}, port)); print(again in (errno.EALREADY, errno.EISCONN, errno.ECONNREFUSED, 0))\n\
         \x20   _, w, _ = select.select([], [c], [], 10); print(len(w))\n\
         \x20   e = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR); print(errno.errorcode.get(e, e))\n\
         \x20   c.close()\n"
    );
    let out = ok(s.run("python3").args(["-c", &script]), 30, "python3 non-blocking connects");
    assert_eq!(out.stdout, "EINPROGRESS\nTrue\n1\n0\nEINPROGRESS\nTrue\n1\nECONNREFUSED\n", "{}", out.stderr);
}

/// A program whose connections' queued sends hold every buffer of its
/// session (a kernel server that never reads, each connection written to
/// until it would block) still has its next connects answered: writable
/// once netd answers, as after any non-blocking connect, until netd's
/// budget refuses one with `ENOBUFS`. None waits out its time limit.
#[test]
fn connects_are_answered_while_queued_sends_hold_every_buffer() {
    if let Some(reason) = interop_unavailable(&["python3", "nc", "ss", "ping"]) {
        return skip("connects_are_answered_while_queued_sends_hold_every_buffer", &reason);
    }
    // A budget past what the session's buffers hold: those run out first.
    let s = Setup::with_netd_args("runfull", false, &["--client-memory", "8388608"]);
    let server = format!(
        "import socket, time\nl=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(({KERNEL:?}, 9200)); l.listen(4096); kept = []\n\
         while True:\n    kept.append(l.accept()[0])\n"
    );
    let _server = Process::spawn(s.kernel("python3").args(["-c", &server]));
    wait_for_port_kernel(&s, 9200);
    let script = format!(
        "import errno, socket\nconns, why = [], 'none refused'\n\
         for _ in range(400):\n\
         \x20   try:\n\
         \x20       c = socket.create_connection(({KERNEL:?}, 9200), timeout=5)\n\
         \x20   except OSError as e:\n\
         \x20       why = errno.errorcode.get(e.errno, type(e).__name__); break\n\
         \x20   c.setblocking(False)\n\
         \x20   while True:\n\
         \x20       try: c.send(b'x' * 65536)\n\
         \x20       except BlockingIOError: break\n\
         \x20   conns.append(c)\n\
         print(len(conns), why)\n"
    );
    let out = ok(s.run("python3").args(["-c", &script]), 60, "python3 filling connections");
    let line = out.stdout.trim();
    let (held, why) = line.split_once(' ').unwrap_or((line, ""));
    assert_eq!(why, "ENOBUFS", "{line}\n{}", out.stderr);
    // Queued sends take every buffer the session's pool gives sends (of
    // its 256) long before netd's budget (8 MiB: two connections at full
    // size, the rest at the floor, about 226 in all) refuses a connect;
    // the connects after that, whose sends find no buffer, are answered
    // all the same.
    assert!(held.parse::<u32>().is_ok_and(|n| n > 192), "{line}");
}

/// netd opened to every user (`--socket-mode 666`): a program of another
/// user (`nobody`) runs through it and listens on a port from 1024 on,
/// but a port below takes `CAP_NET_BIND_SERVICE`, as the kernel's `bind`
/// does: its TCP listen and UDP bind there fail with `EACCES`, while
/// root's program takes the same port. netd counts the refusals.
#[test]
fn another_users_program_reaches_an_opened_netd_but_no_privileged_port() {
    if let Some(reason) = interop_unavailable(&["python3", "setpriv", "ping"]) {
        return skip("another_users_program_reaches_an_opened_netd_but_no_privileged_port", &reason);
    }
    let s = Setup::with_netd_args("runusers", false, &["--socket-mode", "666"]);
    let script = format!(
        "import errno, socket\n\
         def said(f):\n\
         \x20   try: f(); return 'ok'\n\
         \x20   except OSError as e: return errno.errorcode.get(e.errno, str(e))\n\
         for port in (80, 8090):\n\
         \x20   t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         \x20   print('tcp', port, said(lambda: (t.bind(({NAGARE:?}, port)), t.listen()))); t.close()\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         print('udp', 53, said(lambda: u.bind(('0.0.0.0', 53))))\n"
    );
    let mut as_nobody = s.ns.command("setpriv");
    as_nobody.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--", nagare(), "run", "--via"]);
    as_nobody.arg(&s.socket).args(["--", "python3", "-c", &script]);
    let out = ok(&mut as_nobody, 30, "python3 as nobody");
    assert_eq!(out.stdout, "tcp 80 EACCES\ntcp 8090 ok\nudp 53 EACCES\n", "{}", out.stderr);
    let out = ok(s.run("python3").args(["-c", &script]), 30, "python3 as root");
    assert_eq!(out.stdout, "tcp 80 ok\ntcp 8090 ok\nudp 53 ok\n", "{}", out.stderr);
    let refused = s.stat().lines().find_map(|l| l.strip_prefix("netd ports_refused ")).map(|v| v.trim().to_owned());
    assert_eq!(refused.as_deref(), Some("2"), "{}", s.stat());
}

/// A server in the shape of PostgreSQL's postmaster before version 16
/// (`tests/c/forks_in_handler.c`): signals blocked but around `select`
/// on its nagare listener, two children forked in its SIGUSR1 handler for
/// each of 30 signals, each sent once the last was handled. Each fork's
/// handlers share the listener through netd from inside the `select`'s
/// sleep without hanging on a lock the interrupted wait holds (the second
/// fork too, after the first made its child's session): every child is
/// forked and reaped. How long a fork there takes is measured in
/// `docs/benchmarks.md`.
#[test]
fn a_server_that_forks_in_its_signal_handlers_around_select() {
    if let Some(reason) = interop_unavailable(&["cc", "ping"]) {
        return skip("a_server_that_forks_in_its_signal_handlers_around_select", &reason);
    }
    let s = Setup::new("runfih");
    let program = s.dir.join("forks_in_handler");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/forks_in_handler.c");
    let built = std::process::Command::new("cc")
        .args(["-std=c99", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .unwrap();
    assert!(built.status.success(), "cc: {}", String::from_utf8_lossy(&built.stderr));
    let mut run = s.ns.command(nagare());
    run.args(["run", "--via"]).arg(&s.socket).arg("--").arg(&program).args([NAGARE, "9110", "30", "20000", "2"]);
    let out = ok(&mut run, 30, "the forking server");
    let counts: Vec<u32> = out.stdout.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert_eq!(counts.len(), 2, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(counts[0], counts[1], "every child reaped: {}", out.stdout);
    assert_eq!(counts[0], 60, "children forked: {}", out.stdout);
}

/// A TCP echo server on the kernel's side (python3), for `clients`
/// connections one after another.
fn kernel_echo(s: &Setup, port: u16, clients: u32) -> Process {
    let script = format!(
        "import socket\nl=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(({KERNEL:?}, {port})); l.listen()\n\
         for _ in range({clients}):\n    c, _ = l.accept()\n    while True:\n        d = c.recv(65536)\n\
         \x20       if not d: break\n        c.sendall(d)\n    c.close()\n"
    );
    let p = Process::spawn(s.kernel("python3").args(["-c", &script]));
    wait_for_port_kernel(s, port);
    p
}

/// The preload library's own edges, from python3 through netd: an `epoll`
/// set with a pipe and a nagare socket reports each as it becomes ready,
/// and `dup2` onto another number gives the same socket (a write through
/// the new number comes back through the old), also onto the number of
/// another nagare socket, which closes in netd (its port is free again).
#[test]
fn epoll_mixes_descriptors_and_dup2_names_the_same_socket() {
    if let Some(reason) = interop_unavailable(&["python3", "ss", "ping"]) {
        return skip("epoll_mixes_descriptors_and_dup2_names_the_same_socket", &reason);
    }
    let s = Setup::new("runepoll");
    let _echo = kernel_echo(&s, 9200, 1);
    let script = format!(
        "import os, select, socket\n\
         r, w = os.pipe()\n\
         s = socket.create_connection(({KERNEL:?}, 9200), timeout=10)\n\
         ep = select.epoll(); ep.register(r, select.EPOLLIN); ep.register(s.fileno(), select.EPOLLIN)\n\
         print(ep.poll(0.2))\n\
         s.sendall(b'ping')\n\
         print([fd == s.fileno() for fd, _ in ep.poll(5)])\n\
         print(s.recv(16))\n\
         os.write(w, b'x')\n\
         print([fd == r for fd, _ in ep.poll(5)])\n\
         n = os.dup2(s.fileno(), 200)\n\
         os.write(n, b'through the copy')\n\
         got = b''\n\
         while len(got) < 16: got += s.recv(16)\n\
         print(got)\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 9207)); m = u.detach()\n\
         os.dup2(s.fileno(), m); os.write(m, b'over a udp one')\n\
         got = b''\n\
         while len(got) < 14: got += s.recv(14)\n\
         print(got)\n\
         v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.bind(('0.0.0.0', 9207)); print('rebound')\n\
         os.close(m); os.close(n); s.sendall(b'still'); print(s.recv(16))\n"
    );
    let out = ok(s.run("python3").args(["-c", &script]), 30, "python3 epoll and dup2");
    assert_eq!(
        out.stdout, "[]\n[True]\nb'ping'\n[True]\nb'through the copy'\nb'over a udp one'\nrebound\nb'still'\n",
        "{}",
        out.stderr
    );
}

/// A program that closes every number but its socket's (`os.closerange`,
/// libc's `close_range`, as daemons and `sshd` do with `closefrom`) keeps
/// the socket working: the library's own descriptors are spared. A copy
/// of the socket in the range is gone from the program's table, so a file
/// that takes its number is a file; and a range over the socket's own
/// number closes the connection in netd (the kernel's echo server,
/// serving one client at a time, then serves the next) while a file holds
/// that number.
#[test]
fn closing_a_range_spares_the_library_and_closes_the_sockets_in_it() {
    if let Some(reason) = interop_unavailable(&["python3", "ss", "ping"]) {
        return skip("closing_a_range_spares_the_library_and_closes_the_sockets_in_it", &reason);
    }
    let s = Setup::new("runrange");
    let _echo = kernel_echo(&s, 9202, 2);
    let file = s.dir.join("range.txt");
    let script = format!(
        "import fcntl, os, socket\n\
         s = socket.create_connection(({KERNEL:?}, 9202), timeout=10)\n\
         n = s.fileno(); os.dup2(n, 300)\n\
         os.closerange(3, n); os.closerange(n + 1, 1000)\n\
         s.sendall(b'ping'); print(s.recv(16))\n\
         f = os.open({file:?}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n\
         g = fcntl.fcntl(f, fcntl.F_DUPFD, 300); os.close(f)\n\
         os.write(g, b'a file'); os.close(g)\n\
         print(g, open({file:?}, 'rb').read())\n\
         null = os.open('/dev/null', os.O_RDONLY)\n\
         fd = s.detach(); os.closerange(fd, fd + 1); held = fcntl.fcntl(null, fcntl.F_DUPFD, fd)\n\
         t = socket.create_connection(({KERNEL:?}, 9202), timeout=10)\n\
         t.sendall(b'next'); print(t.recv(16), held == fd)\n"
    );
    let out = ok(s.run("python3").args(["-c", &script]), 30, "python3 closerange");
    assert_eq!(out.stdout, "b'ping'\n300 b'a file'\nb'next' True\n", "{}", out.stderr);
}

/// A program killed (SIGKILL) in the middle of a download through netd
/// leaves nothing behind: netd lets its client go, with every socket and
/// byte charged; and a program blocked in a receive when netd is killed
/// gets an error within seconds instead of hanging.
#[test]
fn a_killed_program_leaves_nothing_and_a_killed_netd_fails_its_programs() {
    if let Some(reason) = interop_unavailable(&["curl", "python3", "ss", "ping"]) {
        return skip("a_killed_program_leaves_nothing_and_a_killed_netd_fails_its_programs", &reason);
    }
    let s = Setup::new("runkill");
    let www = s.dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    s.file("www/big.bin", 20 << 20, 5);
    let _server = Process::spawn(
        s.kernel("python3")
            .args(["-m", "http.server", "--bind", KERNEL, "8003", "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_for_port_kernel(&s, 8003);
    let out = s.dir.join("partial.bin");
    let mut curl = Process::spawn(
        s.run("curl")
            .args(["-sS", "--limit-rate", "2M", "-o"])
            .arg(&out)
            .arg(format!("http://{KERNEL}:8003/big.bin"))
            .stderr(Stdio::null()),
    );
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::metadata(&out).is_ok_and(|m| m.len() > 1 << 20)),
        "the download never started"
    );
    // curl and the stat itself.
    assert!(s.stat().contains(" clients 2\n"), "{}", s.stat());
    if let Some(child) = curl.child.as_mut() {
        child.kill().unwrap();
        let _ = child.wait();
    }
    assert!(
        wait_until(Duration::from_secs(10), || {
            let r = s.stat();
            r.contains(" clients 1\n") && r.contains("memory charged 0 ")
        }),
        "netd kept the killed client's sockets or memory:\n{}",
        s.stat()
    );

    let _echo = kernel_echo(&s, 9201, 1);
    let script = format!(
        "import socket\ns = socket.create_connection(({KERNEL:?}, 9201))\nprint('connected', flush=True)\n\
         try:\n    s.recv(16)\n    print('returned')\nexcept OSError as e:\n    print('error', e.errno)\n"
    );
    // netd is killed (by its pid) while the program waits in recv.
    let netd_pid = s.netd.child.as_ref().map(|c| c.id()).expect("netd runs");
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let _ = Command::new("kill").args(["-KILL", &netd_pid.to_string()]).status();
    });
    let out = run_bounded(s.run("python3").args(["-c", &script]), Duration::from_secs(20));
    killer.join().unwrap();
    assert!(out.status.is_some(), "the program hung after netd died");
    let text = out.stdout;
    assert!(text.starts_with("connected\nerror "), "{text}\n{}", out.stderr);
}

/// python3 through netd running `script`, which says a line at each step
/// and waits for one before the next, and is ended by an alarm after 20 s
/// whatever it waits on (so that a wait that never ends fails the test
/// rather than hang it): the process (ended by its pid if the test ends
/// first), its input, and a reader of its lines.
fn python_in_steps(s: &Setup, script: &str) -> (Process, std::process::ChildStdin, impl FnMut() -> String) {
    let script = format!("import signal\nsignal.alarm(20)\n{script}");
    let mut python =
        Process::spawn(s.run("python3").args(["-c", &script]).stdin(Stdio::piped()).stdout(Stdio::piped()));
    let child = python.child.as_mut().expect("python3 runs");
    let (input, mut output) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
    let next = move || {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    };
    (python, input, next)
}

/// An event loop whose netd is killed: `epoll_wait`, and `poll`, on a set
/// with a listener through netd fail with `ECONNABORTED`, but only after
/// they waited (at most 100 ms) on the set's kernel descriptors, so a
/// program that waits again at once (as nginx's workers do) fails about
/// ten times a second instead of as fast as it can, and a kernel
/// descriptor of the set that is ready is still reported.
#[test]
fn an_event_loop_whose_netd_died_fails_its_waits_at_a_bounded_rate() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("an_event_loop_whose_netd_died_fails_its_waits_at_a_bounded_rate", &reason);
    }
    let s = Setup::new("rundead");
    // Each way of waiting, a second of waits again and again, counted;
    // then the pipe made readable, which each still reports.
    let script = format!(
        "import errno, os, select, socket, sys, time\n\
         l = socket.socket()\nl.bind(({NAGARE:?}, 9203))\nl.listen()\n\
         r, w = os.pipe()\nep = select.epoll()\nep.register(l.fileno(), select.EPOLLIN)\n\
         ep.register(r, select.EPOLLIN)\np = select.poll()\np.register(l.fileno(), select.POLLIN)\n\
         p.register(r, select.POLLIN)\nprint('listening', flush=True)\nsys.stdin.readline()\n\
         said = []\n\
         for wait in (lambda: ep.poll(-1), lambda: p.poll(-1)):\n\
         \x20   fails = 0\n    other = None\n    start = time.monotonic()\n\
         \x20   while time.monotonic() - start < 1.0:\n\
         \x20       try:\n            wait()\n        except OSError as e:\n\
         \x20           if e.errno == errno.ECONNABORTED:\n                fails += 1\n            else:\n                other = e.errno\n\
         \x20   said += ['fails', str(fails), 'other', str(other)]\n\
         os.write(w, b'x')\n\
         for wait in (lambda: ep.poll(-1), lambda: p.poll(-1)):\n\
         \x20   try:\n        said += ['pipe', str(any(fd == r for fd, _ in wait()))]\n\
         \x20   except OSError as e:\n        said += ['pipe', str(e.errno)]\n\
         print(' '.join(said), flush=True)\n"
    );
    let (_python, mut input, mut next) = python_in_steps(&s, &script);
    assert_eq!(next(), "listening");
    // netd is killed (by its pid), and the program told to wait on.
    let netd_pid = s.netd.child.as_ref().map(|c| c.id()).expect("netd runs");
    assert!(Command::new("kill").args(["-KILL", &netd_pid.to_string()]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    writeln!(input, "go").unwrap();
    let line = next();
    let words: Vec<&str> = line.split_whitespace().collect();
    let fails: [u32; 2] = match words.as_slice() {
        ["fails", e, "other", "None", "fails", p, "other", "None", "pipe", "True", "pipe", "True"] => {
            [e.parse().unwrap(), p.parse().unwrap()]
        }
        _ => panic!("the program said: {line:?}"),
    };
    assert!(fails.iter().all(|n| (1..=30).contains(n)), "failed waits in a second (epoll, poll): {line}");
}

/// An edge-triggered epoll watch on a connection shared with a child
/// (after `fork`), reported once and left unread: the next
/// `epoll_wait` sleeps out its second, asking netd nothing more than a
/// few times, where an answer for the readiness it reported already
/// would end each sleep for a look that reports nothing.
#[test]
fn an_edge_watch_on_a_shared_connection_sleeps_once_reported() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("an_edge_watch_on_a_shared_connection_sleeps_once_reported", &reason);
    }
    let s = Setup::new("runedge");
    let script = format!(
        "import os, select, socket, sys, time\n\
         l = socket.socket()\nl.bind(({NAGARE:?}, 9204))\nl.listen()\n\
         c = socket.create_connection(({NAGARE:?}, 9204))\ns, _ = l.accept()\n\
         pid = os.fork()\nif pid == 0:\n    time.sleep(5)\n    os._exit(0)\n\
         c.send(b'x')\ntime.sleep(0.2)\n\
         ep = select.epoll()\nep.register(s.fileno(), select.EPOLLIN | select.EPOLLET)\n\
         first = ep.poll(5)\nprint('reported', len(first), flush=True)\nsys.stdin.readline()\n\
         start = time.monotonic()\nsecond = ep.poll(1.0)\n\
         print('again', len(second), 'waited', round(time.monotonic() - start, 1), flush=True)\n\
         os.kill(pid, 9)\nos.waitpid(pid, 0)\n"
    );
    let (_python, mut input, mut next) = python_in_steps(&s, &script);
    assert_eq!(next(), "reported 1");
    let polls = |stat: &str| counter(stat, "netd requests_poll");
    let before = polls(&s.stat());
    writeln!(input, "go").unwrap();
    let line = next();
    let asked = polls(&s.stat()) - before;
    assert_eq!(line, "again 0 waited 1.0");
    assert!(asked < 50, "{asked} polls of netd in a wait of a second");
}

/// `SO_KEEPALIVE` with `TCP_KEEPIDLE` and `TCP_KEEPINTVL` of 1 s, set by
/// python3 on an idle connection through netd: netd's engine sends a
/// probe about every second (its segments sent grow while nothing is
/// written), and the options read back.
#[test]
fn keepalive_options_reach_netd() {
    if let Some(reason) = interop_unavailable(&["python3", "nc", "ss", "ping"]) {
        return skip("keepalive_options_reach_netd", &reason);
    }
    let s = Setup::new("runkeep");
    let _server = Process::spawn(s.kernel("nc").args(["-l", KERNEL, "9400"]).stdout(Stdio::null()));
    wait_for_port_kernel(&s, 9400);
    let script = format!(
        "import socket, time\n\
         s = socket.create_connection(({KERNEL:?}, 9400))\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)\n\
         s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)\n\
         s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)\n\
         print(s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE), flush=True)\n\
         time.sleep(6)\n"
    );
    let mut idle = Process::spawn(s.run("python3").args(["-c", &script]).stdout(Stdio::piped()));
    let sent = |r: &str| {
        r.lines()
            .find_map(|l| l.strip_prefix("engine tcp_segments_sent "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    std::thread::sleep(Duration::from_millis(1500));
    let before = sent(&s.stat());
    std::thread::sleep(Duration::from_millis(3000));
    let after = sent(&s.stat());
    assert!(after >= before + 2, "no keepalive probes: {before} then {after} segments sent:\n{}", s.stat());
    let out = idle.terminate(Duration::from_secs(10)).expect("python3 ends");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("1 1\n"), "{out:?}");
}

/// `SO_RCVBUF` on a UDP socket through netd, from python3, set before
/// its bind and after: it sizes the socket's receive queue in netd (its
/// line in `nagare stat`), and reads back doubled, as on Linux.
#[test]
fn udp_so_rcvbuf_sizes_the_queue_in_netd() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("udp_so_rcvbuf_sizes_the_queue_in_netd", &reason);
    }
    let s = Setup::new("runrcvbuf");
    let script = "import socket, sys\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 20000)\n\
         u.bind(('0.0.0.0', 9320))\n\
         print(u.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), flush=True)\n\
         sys.stdin.readline()\n\
         u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 50000)\n\
         print(u.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), flush=True)\n\
         sys.stdin.readline()\n";
    let mut python = Process::spawn(s.run("python3").args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()));
    let child = python.child.as_mut().expect("python3 runs");
    let (mut input, mut output) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
    let mut line = String::new();
    let mut next = |line: &mut String| {
        line.clear();
        output.read_line(line).unwrap();
        line.trim().to_string()
    };
    let queue = |report: &str| {
        let l = report.lines().find(|l| l.contains(" udp local 0.0.0.0:9320 ")).unwrap_or("").to_string();
        l.split(" rcvbuf ").nth(1).and_then(|r| r.split(' ').next()).unwrap_or("").to_string()
    };
    assert_eq!(next(&mut line), "40000", "set before the bind");
    assert_eq!(queue(&s.stat()), "20000", "{}", s.stat());
    writeln!(input).unwrap();
    assert_eq!(next(&mut line), "100000", "set after the bind");
    assert_eq!(queue(&s.stat()), "50000", "{}", s.stat());
    writeln!(input).unwrap();
    let _ = python.terminate(Duration::from_secs(5));
}

/// `MSG_PEEK` and `FIONREAD` on a UDP socket through netd, from python3:
/// the next datagram is peeked at (whole, and cut short), its length read
/// with `FIONREAD`, then read, and the one after it is next.
#[test]
fn udp_peek_and_fionread() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("udp_peek_and_fionread", &reason);
    }
    let s = Setup::new("runpeek");
    let script = format!(
        "import array, fcntl, socket, termios, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(({NAGARE:?}, 9600)); s.settimeout(10)\n\
         print('ready', flush=True)\n\
         print(s.recv(64, socket.MSG_PEEK))\n\
         print(s.recv(2, socket.MSG_PEEK))\n\
         n = array.array('i', [0]); fcntl.ioctl(s.fileno(), termios.FIONREAD, n); print(n[0])\n\
         print(s.recv(64)); print(s.recv(64))\n"
    );
    let mut c = s.run("python3");
    c.args(["-c", &script]).stdout(Stdio::piped());
    let mut reader = Process::spawn(&mut c);
    let mut out = reader.child.as_mut().and_then(|c| c.stdout.take()).expect("stdout");
    let mut ready = [0u8; 6];
    std::io::Read::read_exact(&mut out, &mut ready).expect("python3 ready");
    let sender = s.ns.udp_socket(&format!("{KERNEL}:0"));
    sender.send_to(b"first one", format!("{NAGARE}:9600")).unwrap();
    sender.send_to(b"second", format!("{NAGARE}:9600")).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("python3 output");
    assert_eq!(rest, "b'first one'\nb'fi'\n9\nb'first one'\nb'second'\n");
    reader.terminate(Duration::from_secs(5));
}

/// A signal ends a program's wait on nagare sockets as it ends one on
/// the kernel's: `poll`, `select` and `epoll` over a nagare socket alone
/// and beside a pipe, each interrupted by a timer's `SIGALRM` at varied
/// moments (the handler raises, so Python gives up the wait). A signal
/// that comes after Python last looked for one and before the wait began
/// is Python's own race, the kernel's `poll` has it too, and a thread
/// kept off the CPU there on a loaded machine can meet it: so a wait of
/// each kind may wait out its second once in twelve, never more.
#[test]
fn a_signal_ends_poll_select_and_epoll_waits_on_nagare_sockets() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("a_signal_ends_poll_select_and_epoll_waits_on_nagare_sockets", &reason);
    }
    let s = Setup::new("runsig");
    let script = format!(
        "import os, select, signal, socket, time\n\
         class Alarm(Exception): pass\n\
         def on_alarm(*_): raise Alarm()\n\
         signal.signal(signal.SIGALRM, on_alarm)\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(({NAGARE:?}, 9610))\n\
         r, w = os.pipe()\n\
         p = select.poll(); p.register(u, select.POLLIN)\n\
         pm = select.poll(); pm.register(u, select.POLLIN); pm.register(r, select.POLLIN)\n\
         e = select.epoll(); e.register(u.fileno(), select.EPOLLIN)\n\
         em = select.epoll(); em.register(u.fileno(), select.EPOLLIN); em.register(r, select.EPOLLIN)\n\
         waits = [('poll', lambda: p.poll(1000)), ('poll mixed', lambda: pm.poll(1000)),\n\
                  ('select', lambda: select.select([u], [], [], 1)), ('select mixed', lambda: select.select([u, r], [], [], 1)),\n\
                  ('epoll', lambda: e.poll(1)), ('epoll mixed', lambda: em.poll(1))]\n\
         for name, wait in waits:\n\
         \x20   ended = 0\n\
         \x20   for i in range(12):\n\
         \x20       t = time.monotonic()\n\
         \x20       try:\n\
         \x20           signal.setitimer(signal.ITIMER_REAL, 0.0002 + 0.0013 * i)\n\
         \x20           got = wait()\n\
         \x20           signal.setitimer(signal.ITIMER_REAL, 0)\n\
         \x20           print(name, 'woke without the signal:', got); break\n\
         \x20       except Alarm:\n\
         \x20           ended += time.monotonic() - t < 0.5\n\
         \x20   print(name, 'ended by the signal' if ended >= 11 else 'ended by the signal %d times of 12' % ended)\n"
    );
    let out = ok(s.run("python3").args(["-c", &script]), 60, "python3 waits ended by a signal");
    assert_eq!(
        out.stdout,
        "poll ended by the signal\npoll mixed ended by the signal\nselect ended by the signal\n\
         select mixed ended by the signal\nepoll ended by the signal\nepoll mixed ended by the signal\n",
        "{}",
        out.stderr
    );
}

/// netd's loopback network: `python3 -m http.server` through netd on
/// 127.0.0.1 serves `curl` through the same netd at 127.0.0.1, 5 MB
/// byte-exact, while the kernel's curl in the namespace finds nothing
/// there (the server is on netd's 127.0.0.1, not the kernel's), and netd
/// counted the segments delivered locally.
#[test]
fn curl_reaches_python_on_127_0_0_1_through_one_netd() {
    if let Some(reason) = interop_unavailable(&["curl", "python3", "nc", "ping"]) {
        return skip("curl_reaches_python_on_127_0_0_1_through_one_netd", &reason);
    }
    let s = Setup::new("runlo");
    let www = s.dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let data = s.file("www/big.bin", 5 << 20, 4);
    let mut python = Process::spawn(
        s.run("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "8003", "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let up = wait_until(Duration::from_secs(10), || {
        s.run("nc")
            .args(["-z", "-w", "1", "127.0.0.1", "8003"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|st| st.success())
    });
    assert!(up, "nothing listens on netd's 127.0.0.1:8003");
    let url = "http://127.0.0.1:8003/big.bin";
    let kernel = run_bounded(s.kernel("curl").args(["-sS", "--fail", "-o", "/dev/null", url]), Duration::from_secs(10));
    assert!(!kernel.status.is_some_and(|st| st.success()), "the kernel's 127.0.0.1 served: {}", kernel.stderr);
    let out = s.dir.join("from-loopback.bin");
    ok(s.run("curl").args(["-sS", "--fail", "-o"]).arg(&out).arg(url), 60, "curl");
    assert_eq!(sha256(&out), sha256(&data), "python3's http.server to curl over netd's 127.0.0.1");
    let report = s.stat();
    let local = report
        .lines()
        .find_map(|l| l.strip_prefix("engine local_delivered "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(local > 0, "nothing delivered locally: {report}");
    python.terminate(Duration::from_secs(5));
}

/// IPv6 through netd: curl (`AF_INET6`) downloads from a kernel server
/// over IPv6, and `python3 -m http.server --bind ::` (a dual-stack
/// listener, `IPV6_V6ONLY` 0) serves the kernel's curl over IPv6 and over
/// IPv4 on the one socket; every download byte-exact.
#[test]
fn ipv6_clients_and_a_dual_stack_server_through_netd() {
    if let Some(reason) = interop_unavailable(&["curl", "python3", "ss", "ping"]) {
        return skip("ipv6_clients_and_a_dual_stack_server_through_netd", &reason);
    }
    let s = Setup::with_families("run6", true);
    let www = s.dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let data = s.file("www/big.bin", 20 << 20, 6);
    let _kernel_server = Process::spawn(
        s.kernel("python3")
            .args(["-m", "http.server", "--bind", KERNEL6, "8000", "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_for_port_kernel(&s, 8000);
    let out = s.dir.join("curl6.bin");
    let url = format!("http://[{KERNEL6}]:8000/big.bin");
    ok(s.run("curl").args(["-6", "-g", "-sS", "--fail", "-o"]).arg(&out).arg(&url), 60, "curl -6");
    assert_eq!(sha256(&out), sha256(&data), "curl -6 through netd");
    // It went through netd's engine, not the kernel's own stack (which
    // holds the server's address too).
    let report = s.stat();
    let received = report
        .lines()
        .find_map(|l| l.strip_prefix("engine tcp6_segments_received "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(received.is_some_and(|n| n > 300), "netd's engine saw no download over IPv6:\n{report}");

    let _server = Process::spawn(
        s.run("python3")
            .args(["-m", "http.server", "--bind", "::", "8080", "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_for_port(&s, NAGARE, 8080);
    for (flag, url) in
        [("-6", format!("http://[{NAGARE6}]:8080/big.bin")), ("-4", format!("http://{NAGARE}:8080/big.bin"))]
    {
        let out = s.dir.join(format!("served{flag}.bin"));
        ok(
            s.kernel("curl").args([flag, "-g", "-sS", "--fail", "--max-time", "60", "-o"]).arg(&out).arg(&url),
            70,
            "curl",
        );
        assert_eq!(sha256(&out), sha256(&data), "served through netd to curl {flag}");
    }
    let report = s.stat();
    assert!(report.contains("local [::]:8080"), "the listener is IPv6's:\n{report}");
}

/// UDP over IPv6 through netd from python3, byte-exact: an `AF_INET6`
/// client sends to the kernel's IPv6 echo unconnected (a datagram past the
/// MTU among them, in fragments both ways) and connected, and names its
/// ends; an `AF_INET6` server on `::` (dual stack) answers the kernel's
/// clients over IPv6 and over IPv4, this one's sender IPv4-mapped, beside
/// an `IPV6_V6ONLY` socket that leaves its port to an `AF_INET` one.
#[test]
fn python_udp_over_ipv6_and_a_dual_stack_socket_through_netd() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("python_udp_over_ipv6_and_a_dual_stack_socket_through_netd", &reason);
    }
    let s = Setup::with_families("runudp6", true);
    let echo = format!(
        "import socket\ns=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\ns.bind(({KERNEL6:?}, 9996))\n\
         for _ in range(3):\n    d, a = s.recvfrom(8192)\n    s.sendto(d, a)\n"
    );
    let mut echo = Process::spawn(s.kernel("python3").args(["-c", &echo]));
    std::thread::sleep(Duration::from_millis(500));
    let client = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.settimeout(5)\n\
         s.sendto(b'one', ({KERNEL6:?}, 9996)); d, a = s.recvfrom(100); print(d.decode(), a[0], a[1])\n\
         big = bytes(range(256)) * 16\n\
         s.sendto(big, ({KERNEL6:?}, 9996)); d, a = s.recvfrom(8192); print('big', d == big, len(d))\n\
         c=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); c.settimeout(5)\n\
         c.connect(({KERNEL6:?}, 9996)); c.send(b'two'); print(c.recv(100).decode(), c.getpeername()[0])\n\
         print(s.getsockname()[0])\n"
    );
    let out = ok(s.run("python3").args(["-c", &client]), 30, "python3 UDP client over IPv6");
    assert_eq!(out.stdout, format!("one {KERNEL6} 9996\nbig True 4096\ntwo {KERNEL6}\n::\n"), "{}", out.stderr);
    echo.terminate(Duration::from_secs(5));
    // They went through netd's engine, not the kernel's own stack (which
    // holds the echo's address too).
    let report = s.stat();
    let sent =
        report.lines().find_map(|l| l.strip_prefix("engine udp6_sent ")).and_then(|v| v.trim().parse::<u64>().ok());
    assert!(sent.is_some_and(|n| n >= 3), "netd's engine sent no datagram over IPv6:\n{report}");

    let server = "import socket\n\
         only6=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n\
         only6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1); only6.bind(('::', 9998))\n\
         four=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); four.bind(('0.0.0.0', 9998))\n\
         s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(('::', 9997))\n\
         while True:\n    d, a = s.recvfrom(2048)\n    s.sendto(a[0].encode() + b' ' + d, a)\n";
    let mut server = Process::spawn(s.run("python3").args(["-c", server]).stdout(Stdio::null()));
    // The kernel's clients, over each family, ask until the server is up.
    let clients = format!(
        "import socket\n\
         for fam, host in ((socket.AF_INET6, {NAGARE6:?}), (socket.AF_INET, {NAGARE:?})):\n\
         \x20   c = socket.socket(fam, socket.SOCK_DGRAM); c.settimeout(1); d = b'none'\n\
         \x20   for _ in range(15):\n\
         \x20       c.sendto(b'from ' + host.encode(), (host, 9997))\n\
         \x20       try:\n\
         \x20           d = c.recvfrom(200)[0]; break\n\
         \x20       except socket.timeout:\n\
         \x20           pass\n\
         \x20   print(d.decode())\n"
    );
    let out = ok(s.kernel("python3").args(["-c", &clients]), 40, "the kernel's UDP clients");
    let expected = format!("{KERNEL6} from {NAGARE6}\n::ffff:{KERNEL} from {NAGARE}\n");
    assert_eq!(out.stdout, expected, "{}", out.stderr);
    let report = s.stat();
    assert!(report.contains("local [::]:9997"), "the dual-stack socket is IPv6's:\n{report}");
    assert!(report.contains("local [::]:9998"), "the v6-only socket is netd's:\n{report}");
    server.terminate(Duration::from_secs(5));
}

/// ICMP errors through netd, as Linux reports them, over IPv4 and IPv6: a
/// connected UDP socket that sends to a kernel port nobody has gets
/// `ECONNREFUSED` from its next receive (python3's
/// `ConnectionRefusedError`), and `SO_ERROR` gives it once after the next
/// send; an unconnected socket is told nothing. The client library's
/// connected sockets, in this test's own process, alike. And an
/// `AF_INET6` socket bound to `::ffff:` netd's IPv4 address talks IPv4
/// with the kernel, its peer IPv4-mapped, and refuses an IPv6
/// destination (`EAFNOSUPPORT`).
#[test]
fn icmp_errors_reach_connected_udp_sockets_through_netd() {
    if let Some(reason) = interop_unavailable(&["python3", "ping"]) {
        return skip("icmp_errors_reach_connected_udp_sockets_through_netd", &reason);
    }
    let s = Setup::with_families("runrefused", true);
    let echo = format!(
        "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(({KERNEL:?}, 9995))\n\
         d, a = s.recvfrom(100)\ns.sendto(d.upper(), a)\n"
    );
    let mut echo = Process::spawn(s.kernel("python3").args(["-c", &echo]));
    std::thread::sleep(Duration::from_millis(500));
    let script = format!(
        "import errno, socket, time\n\
         for fam, host in ((socket.AF_INET, {KERNEL:?}), (socket.AF_INET6, {KERNEL6:?})):\n\
         \x20   c = socket.socket(fam, socket.SOCK_DGRAM); c.settimeout(5)\n\
         \x20   c.connect((host, 9)); c.send(b'anyone?')\n\
         \x20   try:\n\
         \x20       c.recv(100); print('no error')\n\
         \x20   except ConnectionRefusedError:\n\
         \x20       print('refused')\n\
         \x20   c.send(b'again'); e = 0\n\
         \x20   for _ in range(500):\n\
         \x20       e = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)\n\
         \x20       if e: break\n\
         \x20       time.sleep(0.01)\n\
         \x20   print(errno.errorcode.get(e), c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))\n\
         \x20   u = socket.socket(fam, socket.SOCK_DGRAM); u.settimeout(0.5)\n\
         \x20   u.sendto(b'anyone?', (host, 9))\n\
         \x20   try:\n\
         \x20       u.recvfrom(100); print('a datagram?')\n\
         \x20   except socket.timeout:\n\
         \x20       print('quiet', u.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))\n\
         m = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); m.settimeout(5)\n\
         m.bind(('::ffff:{NAGARE}', 0)); print(m.getsockname()[0])\n\
         m.sendto(b'mapped', ('::ffff:{KERNEL}', 9995)); d, a = m.recvfrom(100); print(d.decode(), a[0])\n\
         try:\n\
         \x20   m.sendto(b'six', ({KERNEL6:?}, 9995)); print('sent over IPv6?')\n\
         except OSError as e:\n\
         \x20   print(errno.errorcode.get(e.errno))\n"
    );
    let out = ok(s.run("python3").args(["-c", &script]), 40, "python3 connected UDP");
    let expected = format!(
        "refused\nECONNREFUSED 0\nquiet 0\nrefused\nECONNREFUSED 0\nquiet 0\n::ffff:{NAGARE}\nMAPPED ::ffff:{KERNEL}\nEAFNOSUPPORT\n"
    );
    assert_eq!(out.stdout, expected, "{}", out.stderr);
    echo.terminate(Duration::from_secs(5));

    // The client library's sockets, through the same netd.
    let netd = nagare::Session::connect(&s.socket).expect("a session with netd");
    for (bind, to) in [("0.0.0.0:0", format!("{KERNEL}:19")), ("[::]:0", format!("[{KERNEL6}]:19"))] {
        let u = nagare::net::UdpSocket::bind_via(&netd, bind).unwrap();
        u.connect(to.as_str()).unwrap();
        u.send(b"anyone?").unwrap();
        u.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let e = u.recv(&mut [0u8; 64]).expect_err("refused");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{to}: {e}");
    }
    let report = s.stat();
    let reported = report
        .lines()
        .find_map(|l| l.strip_prefix("netd udp_errors_reported "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert_eq!(reported, Some(6), "{report}");
}

/// A kernel server on `port` that takes one connection, sends `greeting`
/// bytes (then its FIN, with `shut`), reads until the end and prints how
/// it ended: `eof N` (a FIN after N bytes) or `reset N` (a reset after N).
fn kernel_sink(s: &Setup, port: u16, greeting: usize, shut: bool) -> Process {
    let shut = if shut { "c.shutdown(socket.SHUT_WR)" } else { "pass" };
    let script = format!(
        "import socket, sys\nl=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(({KERNEL:?}, {port})); l.listen()\nc, _ = l.accept()\nc.sendall(b'g' * {greeting})\n{shut}\nn = 0\n\
         try:\n    while True:\n        d = c.recv(65536)\n        if not d: break\n        n += len(d)\n\
         \x20   print('eof', n, flush=True)\nexcept ConnectionResetError:\n    print('reset', n, flush=True)\n"
    );
    let p = Process::spawn(s.kernel("python3").args(["-c", &script]).stdout(Stdio::piped()));
    wait_for_port_kernel(s, port);
    p
}

/// What a [`kernel_sink`] printed once its connection ended.
fn sink_said(p: &mut Process) -> String {
    use std::io::Read;
    let mut child = p.child.take().expect("the sink runs");
    let ended = wait_until(Duration::from_secs(20), || child.try_wait().is_ok_and(|s| s.is_some()));
    if !ended {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut text = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut text);
    }
    text.trim().to_string()
}

/// A program that writes and then exits without closing its socket
/// (`os._exit`, as a forked child or a small server's handler does) has
/// every byte it wrote delivered and its connection ended with a FIN, as
/// Linux closes a process's sockets when it exits; one that exits with
/// data it never read resets its connection, as Linux does then too (one
/// that read to the end of the stream before it answered and exited does
/// not, nor a forking server's child that answers and exits as the last
/// holder of a connection its parent closed), and so does a close with
/// `SO_LINGER` on and a zero time.
#[test]
fn a_program_that_exits_without_closing_delivers_what_it_wrote() {
    if let Some(reason) = interop_unavailable(&["python3", "ss", "ping"]) {
        return skip("a_program_that_exits_without_closing_delivers_what_it_wrote", &reason);
    }
    let s = Setup::new("runexit");
    const WRITTEN: usize = 4 << 20;
    // Reads the greeting, writes WRITTEN bytes, exits at once.
    let mut sink = kernel_sink(&s, 9301, 100, false);
    let script = format!(
        "import os, socket\ns = socket.create_connection(({KERNEL:?}, 9301))\ngot = b''\n\
         while len(got) < 100: got += s.recv(100 - len(got))\ns.sendall(b'x' * {WRITTEN})\nos._exit(0)\n"
    );
    let out = run_bounded(s.run("python3").args(["-c", &script]), Duration::from_secs(20));
    assert_eq!(out.status.and_then(|st| st.code()), Some(0), "{}", out.stderr);
    assert_eq!(sink_said(&mut sink), format!("eof {WRITTEN}"), "netd:\n{}", s.stat());

    // Leaves the greeting unread.
    let mut sink = kernel_sink(&s, 9302, 100, false);
    let script = format!(
        "import os, socket, time\ns = socket.create_connection(({KERNEL:?}, 9302))\ntime.sleep(0.5)\n\
         s.sendall(b'x' * 1000)\nos._exit(0)\n"
    );
    let out = run_bounded(s.run("python3").args(["-c", &script]), Duration::from_secs(20));
    assert_eq!(out.status.and_then(|st| st.code()), Some(0), "{}", out.stderr);
    let said = sink_said(&mut sink);
    assert!(said.starts_with("reset "), "{said}");

    // Reads to the end of the stream, answers, exits at once.
    let mut sink = kernel_sink(&s, 9304, 100, true);
    let script = format!(
        "import os, socket\ns = socket.create_connection(({KERNEL:?}, 9304))\n\
         while s.recv(4096): pass\ns.sendall(b'x' * 1000)\nos._exit(0)\n"
    );
    let out = run_bounded(s.run("python3").args(["-c", &script]), Duration::from_secs(20));
    assert_eq!(out.status.and_then(|st| st.code()), Some(0), "{}", out.stderr);
    assert_eq!(sink_said(&mut sink), "eof 1000", "read to its end: netd:\n{}", s.stat());

    // A forking server's child, last holder of a connection its parent
    // closed once the child had read the request (a shared socket, whose
    // reads read nothing ahead), answers and exits.
    let server = [
        "import os, socket",
        "l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)",
        "l.bind(('0.0.0.0', 7305)); l.listen(8)",
        "while True:",
        "    c, a = l.accept()",
        "    read_it, told = os.pipe(); closed, tell = os.pipe()",
        "    pid = os.fork()",
        "    if pid == 0:",
        "        got = b''",
        "        while len(got) < 16:",
        "            x = c.recv(16 - len(got))",
        "            if not x: break",
        "            got += x",
        "        os.write(told, b'.'); os.read(closed, 1)",
        "        if len(got) == 16: c.sendall(b'y' * 1000)",
        "        os._exit(0)",
        "    os.read(read_it, 1); c.close(); os.write(tell, b'.')",
        "    os.waitpid(pid, 0)",
        "    for fd in (read_it, told, closed, tell): os.close(fd)",
    ]
    .join("\n");
    let mut forking = Process::spawn(s.run("python3").args(["-c", &server]));
    wait_for_port(&s, NAGARE, 7305);
    let client = format!(
        "import socket\nc = socket.create_connection(({NAGARE:?}, 7305), 10)\nc.sendall(b'q' * 16)\nn = 0\n\
         try:\n    while True:\n        d = c.recv(65536)\n        if not d: break\n        n += len(d)\n\
         \x20   print('eof', n)\nexcept ConnectionResetError:\n    print('reset', n)\n"
    );
    let said = ok(s.kernel("python3").args(["-c", &client]), 20, "a client of the forking server");
    assert_eq!(said.stdout.trim(), "eof 1000", "a shared connection's last holder exited: {}", said.stderr);
    forking.terminate(Duration::from_secs(5));

    // Reads the greeting, writes, and closes with a zero linger time.
    let mut sink = kernel_sink(&s, 9303, 100, false);
    let script = format!(
        "import socket, struct\ns = socket.create_connection(({KERNEL:?}, 9303))\ngot = b''\n\
         while len(got) < 100: got += s.recv(100 - len(got))\ns.sendall(b'x' * 1000)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\ns.close()\n"
    );
    let out = run_bounded(s.run("python3").args(["-c", &script]), Duration::from_secs(20));
    assert_eq!(out.status.and_then(|st| st.code()), Some(0), "{}", out.stderr);
    let said = sink_said(&mut sink);
    assert!(said.starts_with("reset "), "a zero linger time: {said}");
    assert!(
        wait_until(Duration::from_secs(10), || s.stat().contains("memory charged 0 ")),
        "netd kept what the programs left:\n{}",
        s.stat()
    );
}
