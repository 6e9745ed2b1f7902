//! The SYN filter on a real TAP: needs root, /dev/net/tun and `ip`.
//!
//! The test makes its own interface (`ndf<pid>`) and a VLAN on it, sends
//! frames into the TAP from the kernel side with an `AF_PACKET` socket
//! (so they pass through the TAP's transmit and its filter) and reads
//! what reaches the TAP's descriptor. The interface is removed when done,
//! even on failure.

use std::ffi::CString;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::time::{Duration, Instant};

use nagare_core::tcp::syn_guard::SynFilter;
use nagare_dev::{Device, TapDevice, UdpShed};

mod common;
use common::{ip, LinkGuard};

const SPOOFED: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const PROVEN: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const GUARDED: u16 = 80;
const SPOOFED6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);
const PROVEN6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);

/// The source MAC of test frame `id`: frames are told apart by its last
/// byte, and from the kernel's own (IPv6 router solicitations and such).
fn mac(id: u8) -> [u8; 6] {
    [0x02, 0x00, 0x5e, 0x4e, 0x46, id]
}

/// An Ethernet frame `id` carrying IPv4 and a TCP header with `flags`.
fn tcp_frame(id: u8, src: Ipv4Addr, port: u16, flags: u8, fragment: u16) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac(id));
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&40u16.to_be_bytes());
    ip[6..8].copy_from_slice(&fragment.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&[10, 215, 0, 1]);
    f.extend_from_slice(&ip);
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&port.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = flags;
    f.extend_from_slice(&tcp);
    f
}

/// An Ethernet frame `id` carrying IPv6 from `src` with next header
/// `next` and then a TCP header to `port` with `flags` (for next header
/// 17, the same bytes read as a UDP header to `port`).
fn ipv6_frame(id: u8, src: Ipv6Addr, next: u8, port: u16, flags: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac(id));
    f.extend_from_slice(&[0x86, 0xdd]);
    let mut ip = [0u8; 40];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&20u16.to_be_bytes());
    ip[6] = next;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xd).octets());
    f.extend_from_slice(&ip);
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&port.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = flags;
    f.extend_from_slice(&tcp);
    f
}

fn arp_frame(id: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac(id));
    f.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
    f.extend_from_slice(&mac(id));
    f.extend_from_slice(&[10, 215, 0, 2, 0, 0, 0, 0, 0, 0, 10, 215, 0, 1]);
    f
}

/// An `AF_PACKET` socket that sends raw Ethernet frames out of `ifname`,
/// into the TAP's transmit path.
struct Sender {
    fd: OwnedFd,
    ifindex: i32,
}

impl Sender {
    fn new(ifname: &str) -> Sender {
        let name = CString::new(ifname).expect("interface name");
        // SAFETY: `name` is a NUL-terminated string alive for the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(ifindex > 0, "if_nametoindex {ifname}: {}", std::io::Error::last_os_error());
        // SAFETY: plain system call with constant arguments; protocol 0
        // receives nothing.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket(AF_PACKET): {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just returned by socket(2) and is owned by
        // nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Sender { fd, ifindex: ifindex as i32 }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: `sockaddr_ll` is plain integers; all-zero is valid.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_ifindex = self.ifindex;
        to.sll_protocol = u16::from_ne_bytes([frame[12], frame[13]]);
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` and `to` are alive for the call; sendto only
        // reads them.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&to as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(n, frame.len() as isize, "sendto: {}", std::io::Error::last_os_error());
    }
}

/// Test frames read from the TAP's queues `fds` (by queue, id and
/// bytes) until `done` says so, for at most three seconds and 20 000
/// rounds, then for 100 ms more: a frame that would follow comes by then.
fn receive(fds: &[RawFd], mut done: impl FnMut(&[(usize, u8, Vec<u8>)]) -> bool) -> Vec<(usize, u8, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut linger: Option<Instant> = None;
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    for _ in 0..20_000 {
        let mut read_any = false;
        for (queue, &fd) in fds.iter().enumerate() {
            // SAFETY: `buf` is writable for its length; the fd is a TAP
            // queue's, non-blocking.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                read_any = true;
                let frame = &buf[..n as usize];
                if frame.len() >= 12 && frame[6..11] == mac(0)[..5] {
                    got.push((queue, frame[11], frame.to_vec()));
                }
            }
        }
        if read_any {
            continue;
        }
        let now = Instant::now();
        if linger.is_none() && done(&got) {
            linger = Some(now + Duration::from_millis(100));
        }
        if now > deadline || linger.is_some_and(|l| now > l) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

/// The ids of test frames read from `tap` until frame `last` arrives.
fn received_until(tap: &TapDevice, last: u8) -> Vec<(u8, Vec<u8>)> {
    let fd = tap.raw_fd().expect("a TAP has a descriptor");
    let got = receive(&[fd], |got| got.iter().any(|(_, id, _)| *id == last));
    got.into_iter().map(|(_, id, frame)| (id, frame)).collect()
}

#[test]
fn the_kernel_drops_unproven_syns_to_guarded_ports_before_the_tap() {
    require_tap!();
    let name = format!("ndf{}", std::process::id() % 100_000);
    let vlan = format!("{name}.5");
    let _guard = LinkGuard(name.clone());
    let mut tap = TapDevice::open_with(&name, false).expect("open TAP");
    let vlan_made = Command::new("ip")
        .args(["link", "add", "link", &name, "name", &vlan, "type", "vlan", "id", "5"])
        .output()
        .expect("run ip");
    let with_vlan = vlan_made.status.success();
    if with_vlan {
        ip(&["link", "set", &vlan, "up"]);
    } else {
        let reason = String::from_utf8_lossy(&vlan_made.stderr);
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("\n******** SKIPPED (the VLAN part): no VLAN on a TAP here: {} ********\n\n", reason.trim()),
        );
    }
    let filter = SynFilter {
        generation: 1,
        engaged: true,
        ports: vec![GUARDED],
        proven: vec![PROVEN],
        proven6: vec![],
        admit: 0,
    };
    tap.set_syn_filter(&filter).expect("attach the SYN filter");
    let sender = Sender::new(&name);

    let syn = |id| tcp_frame(id, SPOOFED, GUARDED, 0x02, 0);
    let dropped = [1u8, 8];
    let cases: [(u8, Vec<u8>); 9] = [
        (1, syn(1)),
        (2, tcp_frame(2, SPOOFED, GUARDED, 0x12, 0)),
        (3, tcp_frame(3, PROVEN, GUARDED, 0x02, 0)),
        (4, tcp_frame(4, SPOOFED, 22, 0x02, 0)),
        (5, arp_frame(5)),
        // A TCP header cut short before the flags.
        (6, syn(6)[..14 + 20 + 10].to_vec()),
        // A tiny first fragment (more fragments, offset 0).
        (7, tcp_frame(7, SPOOFED, GUARDED, 0x02, 0x2000)[..14 + 20 + 8].to_vec()),
        (8, syn(8)),
        // Shorter than an Ethernet and an IPv4 header.
        (9, syn(9)[..30].to_vec()),
    ];
    for (_, frame) in &cases {
        sender.send(frame);
    }
    // An unproven SYN through the VLAN: the kernel holds its tag out of
    // band, and inserts it when the frame is read.
    if with_vlan {
        Sender::new(&vlan).send(&syn(10));
    }
    sender.send(&arp_frame(11));

    let got = received_until(&tap, 11);
    let ids: Vec<u8> = got.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.last(), Some(&11), "the last frame did not arrive: got {ids:?}");
    for (id, frame) in &cases {
        if dropped.contains(id) {
            assert!(!ids.contains(id), "the unproven SYN {id} reached the TAP: got {ids:?}");
        } else {
            let arrived = got.iter().find(|(i, _)| i == id).map(|(_, f)| f);
            assert_eq!(arrived, Some(frame), "frame {id} did not arrive whole: got {ids:?}");
        }
    }
    if with_vlan {
        let tagged = got.iter().find(|(i, _)| *i == 10).map(|(_, f)| f);
        let tagged = tagged.unwrap_or_else(|| panic!("the SYN with an out-of-band VLAN tag did not arrive: {ids:?}"));
        assert_eq!(tagged[12..14], [0x81, 0x00], "the VLAN tag is in the frame read");
    }

    // Detached, the unproven SYN arrives.
    tap.set_syn_filter(&SynFilter::default()).expect("detach the SYN filter");
    sender.send(&syn(12));
    sender.send(&arp_frame(13));
    let ids: Vec<u8> = received_until(&tap, 13).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [12, 13]);
}

/// Test frame `id`: a TCP segment with `flags` from source port `40000 +
/// id`, so that frames spread over the queues of a multi-queue TAP.
fn flow(id: u8, src: Ipv4Addr, flags: u8) -> Vec<u8> {
    let mut f = tcp_frame(id, src, GUARDED, flags, 0);
    f[34..36].copy_from_slice(&(40000 + u16::from(id)).to_be_bytes());
    f
}

#[test]
fn a_queue_opened_later_is_filtered_and_dropping_the_device_detaches() {
    require_tap!();
    let name = format!("ndq{}", std::process::id() % 100_000);
    let _guard = LinkGuard(name.clone());
    let mut tap = TapDevice::open_multi_queue(&name, false).expect("open TAP");
    assert!(tap.multi_queue(), "a created TAP takes more queues");
    let filter = SynFilter {
        generation: 1,
        engaged: true,
        ports: vec![GUARDED],
        proven: vec![PROVEN],
        proven6: vec![],
        admit: 0,
    };
    tap.set_syn_filter(&filter).expect("attach the SYN filter");
    // Opened after the attach: the kernel filters it with the program the
    // device keeps.
    let later = tap.open_queue().expect("open a second queue");
    let sender = Sender::new(&name);
    let fds = [tap.raw_fd().expect("a TAP has a descriptor"), later.as_raw_fd()];

    let unproven = 100u8..132;
    let answers = 140u8..172;
    for id in unproven.clone() {
        sender.send(&flow(id, SPOOFED, 0x02));
    }
    for id in answers.clone() {
        sender.send(&flow(id, SPOOFED, 0x12));
    }
    let got = receive(&fds, |got| answers.clone().all(|a| got.iter().any(|(_, id, _)| *id == a)));
    let seen: Vec<(usize, u8)> = got.iter().map(|(q, id, _)| (*q, *id)).collect();
    for id in answers.clone() {
        assert!(seen.iter().any(|(_, i)| *i == id), "SYN-ACK {id} did not arrive: {seen:?}");
    }
    assert!(seen.iter().any(|(q, _)| *q == 1), "nothing reached the later queue: {seen:?}");
    assert!(!seen.iter().any(|(_, id)| unproven.contains(id)), "an unproven SYN arrived: {seen:?}");

    // Dropping the device detaches the filter from the queue left.
    drop(tap);
    let after = 180u8..190;
    for id in after.clone() {
        sender.send(&flow(id, SPOOFED, 0x02));
    }
    let got = receive(&fds[1..], |got| after.clone().all(|a| got.iter().any(|(_, id, _)| *id == a)));
    let seen: Vec<u8> = got.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(seen, after.collect::<Vec<u8>>(), "unproven SYNs after the device was dropped");
}

#[test]
fn the_kernel_sheds_datagrams_to_listed_ports_before_the_tap_and_the_syn_filter_still_holds() {
    require_tap!();
    let name = format!("nds{}", std::process::id() % 100_000);
    let _guard = LinkGuard(name.clone());
    let mut tap = TapDevice::open_with(&name, false).expect("open TAP");
    let sender = Sender::new(&name);
    let udp = |id: u8, port: u16| {
        let mut f = tcp_frame(id, SPOOFED, port, 0, 0);
        f[14 + 9] = 17;
        f.truncate(14 + 20 + 8 + 4);
        f
    };
    // 5301 shed whole, 5302 listed but admitted whole, 5303 not listed;
    // the SYN filter engaged beside.
    let filter =
        SynFilter { generation: 1, engaged: true, ports: vec![GUARDED], proven: vec![], proven6: vec![], admit: 0 };
    tap.set_syn_filter(&filter).expect("attach the SYN filter");
    tap.set_udp_shed(&UdpShed { ports: vec![(5301, 0), (5302, u32::MAX)] }).expect("attach the shed");
    let cases: [(u8, Vec<u8>, bool); 5] = [
        (1, udp(1, 5301), false),
        (2, udp(2, 5302), true),
        (3, udp(3, 5303), true),
        (4, tcp_frame(4, SPOOFED, GUARDED, 0x02, 0), false),
        (5, tcp_frame(5, SPOOFED, 5301, 0x10, 0), true),
    ];
    for (_, frame, _) in &cases {
        sender.send(frame);
    }
    sender.send(&arp_frame(6));
    let ids: Vec<u8> = received_until(&tap, 6).iter().map(|(id, _)| *id).collect();
    for (id, _, arrives) in &cases {
        assert_eq!(ids.contains(id), *arrives, "frame {id}: got {ids:?}");
    }
    // Shed nothing: the datagram arrives; the SYN filter is still on.
    tap.set_udp_shed(&UdpShed::default()).expect("shed nothing");
    sender.send(&udp(7, 5301));
    sender.send(&tcp_frame(8, SPOOFED, GUARDED, 0x02, 0));
    sender.send(&arp_frame(9));
    let ids: Vec<u8> = received_until(&tap, 9).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [7, 9]);
}

#[test]
fn the_kernel_judges_ipv6_syns_and_datagrams_before_the_tap() {
    require_tap!();
    let name = format!("nd6{}", std::process::id() % 100_000);
    let _guard = LinkGuard(name.clone());
    let mut tap = TapDevice::open_with(&name, false).expect("open TAP");
    let filter = SynFilter {
        generation: 1,
        engaged: true,
        ports: vec![GUARDED],
        proven: vec![PROVEN],
        proven6: vec![PROVEN6],
        admit: 0,
    };
    tap.set_syn_filter(&filter).expect("attach the SYN filter");
    // 5301 shed whole, 5302 listed but admitted whole, 5303 not listed.
    tap.set_udp_shed(&UdpShed { ports: vec![(5301, 0), (5302, u32::MAX)] }).expect("attach the shed");
    let sender = Sender::new(&name);
    let syn = |id| ipv6_frame(id, SPOOFED6, 6, GUARDED, 0x02);
    let udp = |id, port| ipv6_frame(id, SPOOFED6, 17, port, 0);
    let cases: [(u8, Vec<u8>, bool); 14] = [
        (1, syn(1), false),
        (2, ipv6_frame(2, SPOOFED6, 6, GUARDED, 0x12), true),
        (3, ipv6_frame(3, SPOOFED6, 6, GUARDED, 0x10), true),
        (4, ipv6_frame(4, PROVEN6, 6, GUARDED, 0x02), true),
        (5, ipv6_frame(5, SPOOFED6, 6, 22, 0x02), true),
        // Behind a destination options header: the engine's to judge.
        (6, ipv6_frame(6, SPOOFED6, 60, GUARDED, 0x02), true),
        // Cut one byte short of the flags, and of the UDP port.
        (7, syn(7)[..14 + 40 + 13].to_vec(), true),
        (8, udp(8, 5301), false),
        (9, udp(9, 5302), true),
        (10, udp(10, 5303), true),
        (11, udp(11, 5301)[..14 + 40 + 3].to_vec(), true),
        // Behind a fragment header.
        (12, ipv6_frame(12, SPOOFED6, 44, 5301, 0), true),
        // IPv4 as before.
        (13, tcp_frame(13, SPOOFED, GUARDED, 0x02, 0), false),
        (14, tcp_frame(14, PROVEN, GUARDED, 0x02, 0), true),
    ];
    for (_, frame, _) in &cases {
        sender.send(frame);
    }
    sender.send(&arp_frame(15));
    let got = received_until(&tap, 15);
    let ids: Vec<u8> = got.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.last(), Some(&15), "the last frame did not arrive: got {ids:?}");
    for (id, frame, arrives) in &cases {
        if *arrives {
            let arrived = got.iter().find(|(i, _)| i == id).map(|(_, f)| f);
            assert_eq!(arrived, Some(frame), "frame {id} did not arrive whole: got {ids:?}");
        } else {
            assert!(!ids.contains(id), "frame {id} reached the TAP: got {ids:?}");
        }
    }

    // Neither shed nor guarded: all arrive.
    tap.set_udp_shed(&UdpShed::default()).expect("shed nothing");
    tap.set_syn_filter(&SynFilter::default()).expect("detach the SYN filter");
    sender.send(&syn(16));
    sender.send(&udp(17, 5301));
    sender.send(&arp_frame(18));
    let ids: Vec<u8> = received_until(&tap, 18).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [16, 17, 18]);
}
