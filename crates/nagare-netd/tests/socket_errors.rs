//! What netd says when it cannot listen at its socket: each message names
//! the path, says what is in the way and what to do.

use nagare_core::buf::BufferPool;
use nagare_core::{Capabilities, Interface, InterfaceConfig};
use nagare_dev::{Loopback, MonotonicClock};
use nagare_netd::{Netd, NetdConfig};
use std::io;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

fn start(socket: &Path) -> io::Result<Netd> {
    let config = InterfaceConfig::new(Default::default(), "10.67.0.1/24".parse().unwrap());
    let iface = Interface::new(config, Capabilities::default(), BufferPool::new(2048, 256));
    let config =
        NetdConfig { socket: socket.to_path_buf(), link: String::from("socket errors"), ..NetdConfig::default() };
    Netd::new(iface, Box::new(Loopback::new(1500, 64)), MonotonicClock::new(), config)
}

#[test]
fn a_socket_path_that_cannot_be_had() {
    let dir = std::env::temp_dir().join(format!("nagare-netd-socket-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Something listens at the first path, as another netd would.
    let taken = dir.join("taken.sock");
    let _other = UnixListener::bind(&taken).unwrap();
    let file = dir.join("file.sock");
    std::fs::write(&file, b"not a socket").unwrap();
    let cases: [(PathBuf, io::ErrorKind, &[&str]); 3] = [
        (taken, io::ErrorKind::AddrInUse, &["it is taken", "stop that netd", "--socket PATH", "NAGARE_NETD=PATH"]),
        (file, io::ErrorKind::AddrInUse, &["a file that is not a socket", "remove the file"]),
        (
            dir.join("missing").join("netd.sock"),
            io::ErrorKind::NotFound,
            &["directory does not exist", "--socket PATH"],
        ),
    ];
    for (path, kind, needles) in cases {
        let e = match start(&path) {
            Ok(_) => panic!("netd listened at {}", path.display()),
            Err(e) => e,
        };
        let message = e.to_string();
        assert_eq!(e.kind(), kind, "{message}");
        assert!(message.contains(&format!("cannot listen at {}", path.display())), "{message}");
        for needle in needles {
            assert!(message.contains(needle), "{needle:?} missing from: {message}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
