//! What the client library says when netd cannot be reached or goes away:
//! every case this test can provoke without privileges it provokes for
//! real (a missing socket, a stale one, a file that is no socket, servers
//! that greet wrongly, netd stopping mid-session, `NAGARE_NETD`; as root,
//! a socket of another user through a child process that drops to
//! `nobody`), and checks that the message names the socket, says what
//! happened and what to do.

use nagare::Session;
use nagare_core::buf::BufferPool;
use nagare_core::{Capabilities, Interface, InterfaceConfig};
use nagare_dev::{Loopback, MonotonicClock};
use nagare_netd::NetdConfig;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A fresh directory of its own for each case, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("nagare-error-texts-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server at `path` that answers one connection with `greeting` and
/// closes it (no descriptors attached).
fn greeting_server(path: &Path, greeting: Vec<u8>) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.write_all(&greeting);
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

/// A rendezvous hello as netd sends it: magic, layout version, status,
/// descriptor count, region length, client id.
fn hello(version: u32, status: u32) -> Vec<u8> {
    let mut b = b"NGRV".to_vec();
    for word in [version, status, 0] {
        b.extend_from_slice(&word.to_le_bytes());
    }
    b.extend_from_slice(&[0; 16]);
    b
}

fn connect_error(path: &Path) -> io::Error {
    match Session::connect(path) {
        Ok(_) => panic!("connected to {}", path.display()),
        Err(e) => e,
    }
}

fn check(case: &str, e: &io::Error, kind: io::ErrorKind, path: &Path, needles: &[&str]) {
    let message = e.to_string();
    assert_eq!(e.kind(), kind, "{case}: {message}");
    assert!(message.contains(&path.display().to_string()), "{case}: the socket is not named: {message}");
    for needle in needles {
        assert!(message.contains(needle), "{case}: {needle:?} missing from: {message}");
    }
}

/// What `nagare netd` takes, as the hint spells it out.
const START: &str = "nagare netd --tap TAP --addr ADDRESS/PREFIX --socket ";

#[test]
fn connecting_without_a_netd() {
    type Setup = fn(&Dir) -> (PathBuf, Option<std::thread::JoinHandle<()>>);
    let cases: [(&str, Setup, io::ErrorKind, &[&str]); 7] = [
        (
            "no socket file",
            |d| (d.path("missing.sock"), None),
            io::ErrorKind::NotFound,
            &["no nagare netd answers at", "there is no socket there", START, "NAGARE_NETD"],
        ),
        (
            "a stale socket file",
            |d| {
                let path = d.path("stale.sock");
                drop(UnixListener::bind(&path).unwrap());
                (path, None)
            },
            io::ErrorKind::ConnectionRefused,
            &["no nagare netd answers at", "nothing listens", START, "replaces a stale socket", "NAGARE_NETD"],
        ),
        (
            "a plain file",
            |d| {
                let path = d.path("plain.sock");
                std::fs::write(&path, b"not a socket").unwrap();
                (path, None)
            },
            io::ErrorKind::ConnectionRefused,
            &["no nagare netd answers at", "not a socket at all", START],
        ),
        (
            "a directory that is a file",
            |d| {
                std::fs::write(d.path("file"), b"").unwrap();
                (d.path("file").join("netd.sock"), None)
            },
            io::ErrorKind::NotADirectory,
            &["cannot reach nagare netd at", "check that NAGARE_NETD"],
        ),
        (
            "a netd of another layout version",
            |d| {
                let path = d.path("version.sock");
                let server = greeting_server(&path, hello(nagare_ipc::LAYOUT_VERSION + 41, 0));
                (path, Some(server))
            },
            io::ErrorKind::ConnectionRefused,
            &[&format!("version {}", nagare_ipc::LAYOUT_VERSION + 41), "same nagare release"],
        ),
        (
            "a netd that refuses this user",
            |d| {
                let path = d.path("refused.sock");
                let server = greeting_server(&path, hello(nagare_ipc::LAYOUT_VERSION, libc::EACCES as u32));
                (path, Some(server))
            },
            io::ErrorKind::PermissionDenied,
            &["refused this process", "netd's user", "--socket PATH", "NAGARE_NETD"],
        ),
        (
            "something else listening",
            |d| {
                let path = d.path("http.sock");
                let server = greeting_server(&path, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec());
                (path, Some(server))
            },
            io::ErrorKind::InvalidData,
            &["is not a nagare netd", "NAGARE_NETD"],
        ),
    ];
    for (case, setup, kind, needles) in cases {
        let dir = Dir::new();
        let (path, server) = setup(&dir);
        let e = connect_error(&path);
        check(case, &e, kind, &path, needles);
        if let Some(server) = server {
            server.join().unwrap();
        }
    }
}

/// Runs only when re-executed by a test below: connects as
/// `NAGARE_NETD` says (through `Session::connect_default`) and prints the
/// error's kind and text.
#[test]
fn child_connects() {
    if std::env::var_os("NAGARE_ERROR_TEXTS_CHILD").is_none() {
        return;
    }
    match Session::connect_default() {
        Ok(_) => println!("\nchild: connected"),
        Err(e) => println!("\nchild: {:?}|{e}", e.kind()),
    }
}

fn run_child(socket: &Path, as_nobody: bool) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_connects", "--nocapture", "--test-threads", "1"])
        .env("NAGARE_ERROR_TEXTS_CHILD", "1")
        .env("NAGARE_NETD", socket);
    if as_nobody {
        std::os::unix::process::CommandExt::uid(&mut command, 65534);
        std::os::unix::process::CommandExt::gid(&mut command, 65534);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| l.strip_prefix("child: ")).unwrap_or_default().to_string()
}

#[test]
fn the_socket_named_by_nagare_netd_is_the_one_in_the_message() {
    let dir = Dir::new();
    let socket = dir.path("from-env.sock");
    let line = run_child(&socket, false);
    assert!(line.starts_with("NotFound|"), "{line}");
    assert!(line.contains(&format!("no nagare netd answers at {}", socket.display())), "{line}");
    assert!(line.contains(&format!("--socket {}", socket.display())), "{line}");
}

#[test]
fn a_socket_of_another_user() {
    let dir = Dir::new();
    let socket = dir.path("private.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY: geteuid has no preconditions and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let line = if root {
        run_child(&socket, true)
    } else {
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o000)).unwrap();
        run_child(&socket, false)
    };
    assert!(line.starts_with("PermissionDenied|"), "{line}");
    for needle in ["not allowed to connect to nagare netd at", "netd's user or as root", "NAGARE_NETD"] {
        assert!(line.contains(needle), "{needle:?} missing from: {line}");
    }
}

#[test]
fn netd_stopping_mid_session() {
    let dir = Dir::new();
    let socket = dir.path("netd.sock");
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = {
        let (socket, stop) = (socket.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let config = InterfaceConfig::new(Default::default(), "10.66.0.1/24".parse().unwrap());
            let iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 256));
            let config = NetdConfig { socket, link: String::from("error texts"), ..NetdConfig::default() };
            let mut netd =
                nagare_netd::Netd::new(iface, Box::new(Loopback::new(1500, 64)), MonotonicClock::new(), config)
                    .unwrap();
            ready_tx.send(()).unwrap();
            netd.run(&stop).unwrap();
        })
    };
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let session = Session::connect(&socket).unwrap();
    session.nop().unwrap();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    for call in 0..2 {
        let e = session.nop().unwrap_err();
        check(
            &format!("call {call} after netd stopped"),
            &e,
            io::ErrorKind::ConnectionAborted,
            &socket,
            &["is gone", "this session's sockets", "start netd again and reconnect"],
        );
    }
}
