//! Network namespaces and processes for interop tests, removed and ended
//! even when a test fails.

#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Why interop tests cannot run here, if they cannot.
pub fn interop_unavailable(tools: &[&str]) -> Option<String> {
    // SAFETY-free check of the effective user through the `id` command keeps
    // this file free of libc.
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("interop tests need root (network namespaces and TAP devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing".into());
    }
    for tool in ["ip"].iter().chain(tools) {
        if !has_tool(tool) {
            return Some(format!("`{tool}` is not installed (scripts/install-test-deps.sh installs it)"));
        }
    }
    None
}

pub fn has_tool(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn skip(test: &str, reason: &str) {
    // Straight to the terminal: the test harness captures eprintln!, and a
    // skip must be seen even when the test passes.
    let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("\n*** SKIPPED {test}: {reason} ***\n\n"));
}

/// A network namespace that is deleted (with every device in it) on drop.
pub struct Netns {
    pub name: String,
}

static NEXT_NS: AtomicU32 = AtomicU32::new(0);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("nagare-{tag}-{}-{}", std::process::id(), NEXT_NS.fetch_add(1, Ordering::Relaxed));
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// A command run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    pub fn ip(&self, args: &[&str]) {
        run_ok(self.command("ip").args(args));
    }

    /// A UDP socket of the namespace's kernel stack, bound to `addr` (made
    /// by a thread that enters the namespace; the socket stays in it).
    pub fn udp_socket(&self, addr: &str) -> std::net::UdpSocket {
        let path = format!("/run/netns/{}", self.name);
        let addr = addr.to_string();
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).expect("opening the namespace");
            // SAFETY: setns with a namespace file we hold open; it changes
            // only this thread, which ends after making the socket.
            let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            std::net::UdpSocket::bind(addr).expect("binding in the namespace")
        })
        .join()
        .expect("the namespace thread panicked")
    }

    /// A persistent TAP device whose kernel side has `kernel_addr`.
    pub fn tap(&self, name: &str, kernel_addr: &str) {
        self.tap_with(name, kernel_addr, &[]);
    }

    /// As [`Netns::tap`], with more `ip tuntap add` flags (`multi_queue`).
    pub fn tap_with(&self, name: &str, kernel_addr: &str, flags: &[&str]) {
        let mut args = vec!["tuntap", "add", "dev", name, "mode", "tap"];
        args.extend_from_slice(flags);
        self.ip(&args);
        self.ip(&["addr", "add", kernel_addr, "dev", name]);
        self.ip(&["link", "set", name, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// A child process ended by its id when dropped.
pub struct Process {
    pub child: Option<Child>,
}

impl Process {
    pub fn spawn(command: &mut Command) -> Process {
        let child = command.spawn().expect("spawning a process for the test");
        Process { child: Some(child) }
    }

    /// Waits (at most `limit`) for it to exit by itself: its output, or
    /// `None` if it had to be killed.
    pub fn wait(&mut self, limit: Duration) -> Option<Output> {
        let mut child = self.child.take()?;
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return child.wait_with_output().ok(),
                Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        }
    }

    /// Sends SIGTERM and waits (at most `limit`) for a clean exit.
    pub fn terminate(&mut self, limit: Duration) -> Option<Output> {
        let pid = self.child.as_ref()?.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.wait(limit)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn run_ok(command: &mut Command) -> Output {
    let output = command.output().expect("running a command");
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// What [`run_bounded`] saw of a command: its pid, its exit status (none
/// if it ran past its limit and was killed), stdout and stderr.
pub struct Bounded {
    pub pid: u32,
    pub status: Option<std::process::ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` with its output captured, for at most `limit`: past it
/// the command is killed by its pid.
pub fn run_bounded(command: &mut Command, limit: Duration) -> Bounded {
    use std::io::Read;
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting a command");
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a command") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    Bounded { pid, status, stdout, stderr }
}

/// Waits until `ready` holds, at most `limit`.
pub fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ready()
}

pub fn nagare() -> &'static str {
    env!("CARGO_BIN_EXE_nagare")
}

/// The replies `ping` says it received, from its summary line.
pub fn ping_received(output: &Output) -> Option<u32> {
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find(|l| l.contains("packets transmitted"))?;
    line.split(", ").nth(1)?.split_whitespace().next()?.parse().ok()
}

/// Waits until `addr` answers one ping from inside `ns`.
pub fn answers_ping(ns: &Netns, addr: &str) -> bool {
    wait_until(Duration::from_secs(10), || {
        ns.command("ping").args(["-c", "1", "-W", "1", addr]).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
    })
}

/// The SHA-256 of a file, as `sha256sum` prints it.
pub fn sha256(path: &Path) -> String {
    let out = run_ok(Command::new("sha256sum").arg(path));
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string()
}

/// Pseudo-random bytes (xorshift), different for every seed.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Paths a test made under the temporary directory, removed when the
/// test ends, passed or failed: a netd's rendezvous socket and the watch
/// socket netd makes beside it (a netd ended with SIGKILL, as
/// [`Process`] ends one, removes neither), its log, a web root.
pub struct TempPaths(Vec<PathBuf>);

impl TempPaths {
    /// The rendezvous socket and log of a netd named `tag` (unique to
    /// this test process), with the guard that removes them and the watch
    /// socket.
    pub fn netd(tag: &str) -> (TempPaths, PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("nagare-{tag}-{}", std::process::id()));
        let with = |ext: &str| {
            let mut p = base.clone().into_os_string();
            p.push(ext);
            PathBuf::from(p)
        };
        let (socket, log) = (with(".sock"), with(".log"));
        (TempPaths(vec![socket.clone(), with(".sock.share"), log.clone()]), socket, log)
    }

    /// The guard of `path` alone (a directory with what it holds).
    pub fn dir(path: &Path) -> TempPaths {
        TempPaths(vec![path.to_path_buf()])
    }

    /// `path` is removed too (a directory with what it holds).
    pub fn also(&mut self, path: &Path) {
        self.0.push(path.to_path_buf());
    }
}

impl Drop for TempPaths {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
        }
    }
}

/// A directory with `big.bin` of `size` bytes of varied content.
pub fn web_root(tag: &str, size: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nagare-www-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("big.bin")).unwrap());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut block = vec![0u8; 1 << 16];
    let mut left = size;
    while left > 0 {
        for chunk in block.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        let n = left.min(block.len());
        file.write_all(&block[..n]).unwrap();
        left -= n;
    }
    file.flush().unwrap();
    std::fs::write(dir.join("index.html"), "<h1>nagare</h1>\n").unwrap();
    dir
}

/// `nagare up` in a namespace with `args`, its standard output read line
/// by line as it runs.
pub struct Up {
    process: Process,
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
}

impl Up {
    pub fn start(ns: &Netns, args: &[&std::ffi::OsStr]) -> Up {
        let mut command = ns.command(nagare());
        command.arg("up").args(args);
        let mut process = Process::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped()));
        let stdout = process.child.as_mut().and_then(|c| c.stdout.take()).expect("nagare up's stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Up { process, lines, seen: Vec::new() }
    }

    /// The first line seen that `wanted` accepts, waiting at most `limit`.
    pub fn wait_for(&mut self, limit: Duration, wanted: impl Fn(&str) -> bool) -> Option<String> {
        if let Some(line) = self.seen.iter().find(|l| wanted(l)) {
            return Some(line.clone());
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Stops nagare up with SIGTERM; everything it printed.
    pub fn stop(mut self) -> String {
        let output = self.process.terminate(Duration::from_secs(5)).expect("nagare up stops on SIGTERM");
        assert!(output.status.success(), "nagare up exited with {}", output.status);
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
        self.seen.join("\n")
    }
}

/// A command's standard output and error, as text.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Counter `name` of `nagare up`'s summary (its last lines); 0 if absent.
pub fn summary_counter(summary: &str, name: &str) -> u64 {
    let line = summary.lines().find(|l| l.split_whitespace().next() == Some(name));
    line.and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}
