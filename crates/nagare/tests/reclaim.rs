//! A socket shared with another session and taken back once that session
//! went (`reclaim`): no byte is lost or reordered across the share, the
//! other holder's reads and the reclaim, and the stream reads ahead
//! again, with a readiness descriptor for the program's own `poll(2)`.

#[path = "../../nagare-netd/tests/support/mod.rs"]
mod support;

use nagare::net::{TcpListener, TcpStream};
use nagare_netd::Placement;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::Duration;
use support::{NetdThread, Wire, LIMIT, NETD_ADDR};

fn at(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(NETD_ADDR, port))
}

#[test]
fn a_stream_taken_back_loses_no_byte_and_reads_ahead_again() {
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let (parent, child, peer) = (netd.connect(), netd.connect(), netd.connect());
    let listener = TcpListener::bind_via(&parent, at(9800)).expect("listen");
    let mut out = TcpStream::connect_timeout_via(&peer, &at(9800), LIMIT).expect("connect");
    let (mut inside, _) = listener.accept().expect("accept");
    let all: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    out.write_all(&all[..20_000]).unwrap();
    // Some of it is in the parent's receives when it shares.
    let mut first = vec![0u8; 1000];
    inside.set_read_timeout(Some(LIMIT)).unwrap();
    inside.read_exact(&mut first).unwrap();
    let token = inside.share().expect("share");
    let err = inside.readiness_fd().err().map(|e| e.kind());
    assert_eq!(err, Some(ErrorKind::Unsupported), "no descriptor while shared");
    let mut adopted = TcpStream::adopt_via(&child, token).expect("adopt");
    adopted.set_read_timeout(Some(LIMIT)).unwrap();
    let mut middle = vec![0u8; 9000];
    adopted.read_exact(&mut middle).expect("the child reads some");
    // The child goes.
    drop((adopted, child));
    let mut granted = false;
    for _ in 0..200 {
        if inside.reclaim().expect("a reclaim") {
            granted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(granted, "taken back once the child went");
    let fd = inside.readiness_fd().expect("a readiness descriptor again");
    out.write_all(&all[20_000..]).unwrap();
    let mut rest = vec![0u8; all.len() - 10_000];
    inside.read_exact(&mut rest).expect("the rest");
    let mut got = first;
    got.extend_from_slice(&middle);
    got.extend_from_slice(&rest);
    assert!(got == all, "every byte once, in order");
    // Read ahead: what comes is here before a read asks, and the
    // descriptor says so.
    out.write_all(b"more").unwrap();
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, LIMIT.as_millis() as libc::c_int) };
    assert_eq!(n, 1, "the descriptor became readable");
    assert_eq!(inside.unread().unwrap(), 4, "received ahead");
}
