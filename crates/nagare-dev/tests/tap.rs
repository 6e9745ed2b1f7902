//! TAP device against the real kernel: needs root and /dev/net/tun.
//!
//! Each test makes its own interface (`ndt<pid>…`), gives the kernel side
//! an address in 10.213.0.0/16 (or fd6e::/16) and removes the interface
//! when done, even on failure. Traffic stays on that interface.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant as StdInstant};

use nagare_core::buf::{BufferPool, ChecksumState, Offload, PacketBuf, TxOffloads};
use nagare_core::Instant;
use nagare_dev::{Device, TapDevice, RX_HEADROOM};

const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x4e, 0x47, 0x01];

mod common;
use common::{ip, LinkGuard};

fn subnet_octet() -> u8 {
    (std::process::id() % 250) as u8 + 1
}

/// An ARP request "who has `target`? tell `sender`" from `OUR_MAC`, built
/// as a chain of two slices (Ethernet header, ARP body) so that transmit
/// really gathers with writev.
fn arp_request(pool: &BufferPool, sender: [u8; 4], target: [u8; 4]) -> PacketBuf {
    let mut eth = Vec::new();
    eth.extend_from_slice(&[0xff; 6]);
    eth.extend_from_slice(&OUR_MAC);
    eth.extend_from_slice(&[0x08, 0x06]);
    let mut arp = vec![0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01];
    arp.extend_from_slice(&OUR_MAC);
    arp.extend_from_slice(&sender);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&target);
    let mut frame = PacketBuf::from_slice(pool, 0, &eth).unwrap();
    frame.append(PacketBuf::from_slice(pool, 0, &arp).unwrap());
    assert_eq!(frame.slice_count(), 2);
    frame
}

/// The ARP reply from `ip` to us, if `frame` is one: returns the sender MAC.
fn arp_reply_from(frame: &[u8], ip: [u8; 4]) -> Option<[u8; 6]> {
    if frame.len() < 42 || frame[0..6] != OUR_MAC || frame[12..14] != [0x08, 0x06] {
        return None;
    }
    let arp = &frame[14..];
    if arp[6..8] != [0x00, 0x02] || arp[14..18] != ip || arp[18..24] != OUR_MAC {
        return None;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&arp[8..14]);
    Some(mac)
}

/// Receives with `pool` for at most two seconds until `done` says so.
fn receive_until(
    tap: &mut TapDevice,
    pool: &BufferPool,
    mut done: impl FnMut(&TapDevice, &[PacketBuf]) -> bool,
) -> bool {
    let deadline = StdInstant::now() + Duration::from_secs(2);
    let start = StdInstant::now();
    let mut out = Vec::new();
    loop {
        out.clear();
        let now = Instant::from_micros(start.elapsed().as_micros() as u64);
        tap.receive_batch(pool, &mut out, 32, now).expect("receive_batch");
        if done(tap, &out) {
            return true;
        }
        if StdInstant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn kernel_answers_arp_through_a_created_tap() {
    require_tap!();
    let name = format!("ndt{}", std::process::id());
    let _guard = LinkGuard(name.clone());
    let x = subnet_octet();
    let kernel_ip = [10, 213, x, 1];
    let our_ip = [10, 213, x, 2];

    let mut tap = TapDevice::open(&name).expect("open TAP");
    assert!(tap.created(), "{name} did not exist before, so it was created");
    assert_eq!(tap.name(), name);
    assert_eq!(tap.capabilities().mtu, 1500);
    assert!(tap.raw_fd().is_some());
    let flags = std::fs::read_to_string(format!("/sys/class/net/{name}/flags")).unwrap();
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap();
    assert_eq!(flags & 1, 1, "IFF_UP set by open");
    ip(&["addr", "add", &format!("10.213.{x}.1/30"), "dev", &name]);
    ip(&["link", "set", &name, "up"]);
    let kernel_mac = tap.kernel_mac().unwrap();
    assert_ne!(kernel_mac, [0; 6]);

    tap.set_mtu(1400).unwrap();
    assert_eq!(tap.capabilities().mtu, 1400);
    assert_eq!(std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).unwrap().trim(), "1400");

    // 1. An ARP request written into the TAP gets the kernel's reply.
    let pool = BufferPool::new(2048, 64);
    let mut q = VecDeque::from([arp_request(&pool, our_ip, kernel_ip)]);
    assert_eq!(tap.transmit_batch(&mut q, Instant::ZERO).unwrap(), 1);
    assert!(q.is_empty());
    assert_eq!(tap.stats().tx_frames, 1);
    assert_eq!(tap.stats().tx_bytes, 42);
    let mut reply_mac = None;
    let answered = receive_until(&mut tap, &pool, |_, frames| {
        for f in frames {
            assert_eq!(f.headroom(), RX_HEADROOM, "frames land at RX_HEADROOM");
            assert_eq!(f.slice_count(), 1);
            if let Some(mac) = arp_reply_from(&f.to_vec(), kernel_ip) {
                reply_mac = Some(mac);
            }
        }
        reply_mac.is_some()
    });
    assert!(answered, "no ARP reply from the kernel within 2 s");
    assert_eq!(reply_mac, Some(kernel_mac));
    let stats = tap.stats();
    assert!(stats.rx_frames >= 1 && stats.rx_bytes >= 42, "{stats:?}");
    assert_eq!(
        pool.in_use(),
        tap.spare_buffers(),
        "every received buffer went back to the pool (but the TAP's spares)"
    );
    assert!(
        tap.offloads().checksum && tap.offloads().tcp_segmentation == 65535,
        "offloads granted: {:?}",
        tap.offloads()
    );

    // 1b. A frame of more slices than one writev takes (IOV_MAX) still
    // goes out: the same request, padded to 1400 bytes, one byte a slice.
    let mut bytes = arp_request(&pool, our_ip, kernel_ip).to_vec();
    bytes.resize(1400, 0);
    let big_pool = BufferPool::new(64, 2048);
    let mut sliced = PacketBuf::new();
    for b in &bytes {
        sliced.append(PacketBuf::from_slice(&big_pool, 0, &[*b]).unwrap());
    }
    assert_eq!(sliced.slice_count(), 1400);
    let before = tap.stats();
    let mut q = VecDeque::from([sliced]);
    assert_eq!(tap.transmit_batch(&mut q, Instant::ZERO).unwrap(), 1);
    let after = tap.stats();
    assert_eq!((after.tx_frames - before.tx_frames, after.tx_errors - before.tx_errors), (1, 0), "{after:?}");
    let mut answered_again = false;
    let answered = receive_until(&mut tap, &pool, |_, frames| {
        answered_again |= frames.iter().any(|f| arp_reply_from(&f.to_vec(), kernel_ip).is_some());
        answered_again
    });
    assert!(answered, "no ARP reply to the 1400-slice request within 2 s");

    // 1c. Read straight into the caller's memory (netd's driver reads
    // into its region): the reply lands in the slices given, however many
    // (a few, or more than the short iovec array holds); a frame with too
    // little room is dropped and counted.
    let direct = |tap: &mut TapDevice, room: usize, pieces: usize| -> (usize, Vec<u8>) {
        let mut q = VecDeque::from([arp_request(&pool, our_ip, kernel_ip)]);
        tap.transmit_batch(&mut q, Instant::ZERO).unwrap();
        let sizes: Vec<usize> = (0..pieces).map(|i| room / pieces + usize::from(i < room % pieces)).collect();
        let deadline = StdInstant::now() + Duration::from_secs(2);
        while StdInstant::now() < deadline {
            let mut slices: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n]).collect();
            let mut bufs: Vec<&mut [u8]> = slices.iter_mut().map(|v| &mut v[..]).collect();
            if let Some((n, _)) = tap.receive_into(&mut bufs, Instant::ZERO).unwrap() {
                let mut frame = slices.concat();
                frame.truncate(n);
                if n == 0 || arp_reply_from(&frame, kernel_ip).is_some() {
                    return (n, frame);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("no frame through receive_into within 2 s");
    };
    for pieces in [2, 16] {
        let (n, frame) = direct(&mut tap, 2048, pieces);
        assert!(n >= 42 && arp_reply_from(&frame, kernel_ip) == Some(kernel_mac), "{n} bytes in {pieces} slices");
    }
    // 42 bytes in 21 slices of 2: more slices than the short array holds.
    let (n, frame) = direct(&mut tap, 42, 21);
    assert!(n == 42 && arp_reply_from(&frame, kernel_ip) == Some(kernel_mac), "{n} bytes in 21 slices");
    let dropped = tap.stats().rx_dropped_oversize;
    let (n, _) = direct(&mut tap, 20, 2);
    assert_eq!(n, 0, "a frame with too little room is dropped");
    assert_eq!(tap.stats().rx_dropped_oversize, dropped + 1);

    // 2. A reply longer than one of the pool's buffers arrives as a chain
    // (the tail of a frame lands in spare buffers, as a super-segment's
    // does), and those buffers return to the pool with it.
    let small = BufferPool::new(RX_HEADROOM + 30, 8);
    let mut q = VecDeque::from([arp_request(&pool, our_ip, kernel_ip)]);
    tap.transmit_batch(&mut q, Instant::ZERO).unwrap();
    let mut chained = None;
    assert!(
        receive_until(&mut tap, &small, |_, frames| {
            for f in frames {
                if arp_reply_from(&f.to_vec(), kernel_ip).is_some() {
                    chained = Some(f.slice_count());
                }
            }
            chained.is_some()
        }),
        "no chained ARP reply"
    );
    assert!(chained.is_some_and(|n| n > 1), "{chained:?} slices");
    assert_eq!(small.in_use(), tap.spare_buffers());

    // 3. With no buffer at all, frames are taken off the queue and counted.
    let empty = BufferPool::new(2048, 0);
    let mut q = VecDeque::from([arp_request(&pool, our_ip, kernel_ip)]);
    tap.transmit_batch(&mut q, Instant::ZERO).unwrap();
    assert!(receive_until(&mut tap, &empty, |t, _| t.stats().rx_dropped_no_buffer >= 1), "no-buffer drop not counted");

    // 4. Frames too short or too long for the link are refused, not sent.
    let mut q = VecDeque::from([
        PacketBuf::from_slice(&pool, 0, &[0u8; 10]).unwrap(),
        PacketBuf::from_slice(&pool, 0, &[0u8; 1415]).unwrap(),
    ]);
    let before = tap.stats();
    assert_eq!(tap.transmit_batch(&mut q, Instant::ZERO).unwrap(), 2);
    assert_eq!(tap.stats().tx_errors, before.tx_errors + 2);
    assert_eq!(tap.stats().tx_frames, before.tx_frames);
    drop(q);
    assert_eq!(pool.in_use(), 0);

    drop(tap);
    // The kernel unregisters the interface shortly after the fd closes.
    let gone_by = StdInstant::now() + Duration::from_secs(2);
    while Path::new(&format!("/sys/class/net/{name}")).exists() && StdInstant::now() < gone_by {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !Path::new(&format!("/sys/class/net/{name}")).exists(),
        "a TAP created by open disappears when the device is dropped"
    );
}

/// The TCP header and payload length of `frame` if it is an IPv6 TCP
/// segment to `port` (read by etherparse).
fn ipv6_tcp_to(frame: &[u8], port: u16) -> Option<(etherparse::TcpHeader, usize)> {
    let h = etherparse::PacketHeaders::from_ethernet_slice(frame).ok()?;
    let Some(etherparse::NetHeaders::Ipv6(..)) = h.net else { return None };
    let Some(etherparse::TransportHeader::Tcp(tcp)) = h.transport else { return None };
    (tcp.destination_port == port).then(|| (tcp, h.payload.slice().len()))
}

/// A TAP opened with offload on (`ndt6<pid><tag>`), its kernel side at
/// fd6e:<net>::1/64 (no duplicate address detection) and told that
/// fd6e:<net>::2 is at `OUR_MAC`: the TAP, its guard, the kernel's
/// address, ours and the kernel's MAC.
fn ipv6_tap(tag: char, net: u32) -> (TapDevice, LinkGuard, Ipv6Addr, Ipv6Addr, [u8; 6]) {
    let name = format!("ndt6{}{tag}", std::process::id());
    let guard = LinkGuard(name.clone());
    let net = net % 0xffff;
    let kernel_ip: Ipv6Addr = format!("fd6e:{net:x}::1").parse().unwrap();
    let our_ip: Ipv6Addr = format!("fd6e:{net:x}::2").parse().unwrap();
    let tap = TapDevice::open(&name).expect("open TAP");
    assert!(tap.offloads().checksum && tap.offloads().tcp_segmentation > 0, "offloads: {:?}", tap.offloads());
    ip(&["-6", "addr", "add", &format!("{kernel_ip}/64"), "dev", &name, "nodad"]);
    ip(&["link", "set", &name, "up"]);
    let our_mac = OUR_MAC.map(|b| format!("{b:02x}")).join(":");
    ip(&["-6", "neigh", "replace", &our_ip.to_string(), "lladdr", &our_mac, "dev", &name, "nud", "permanent"]);
    let kernel_mac = tap.kernel_mac().unwrap();
    (tap, guard, kernel_ip, our_ip, kernel_mac)
}

/// With offload on, the kernel hands over IPv6 TCP super-segments as it
/// does IPv4 ones: a connection from the kernel's side to an address
/// behind the TAP (its handshake answered here by hand) sends its first
/// flight, ten segments, as one frame longer than the MTU with its
/// checksum left partial.
#[test]
fn kernel_hands_over_ipv6_tcp_super_segments() {
    require_tap!();
    let (mut tap, _guard, kernel_ip, our_ip, kernel_mac) = ipv6_tap('r', std::process::id());
    let port = 40_000 + (std::process::id() % 20_000) as u16;

    // The kernel's side: connect, write 30 000 bytes, hold the connection
    // until told (or 5 s).
    let (stop, stopped) = mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let addr = SocketAddr::from((our_ip, port));
        if let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
            let data: Vec<u8> = (0..30_000u32).map(|i| i as u8).collect();
            let _ = stream.write(&data);
            let _ = stopped.recv_timeout(Duration::from_secs(5));
        }
    });

    let pool = BufferPool::new(2048, 256);
    let mut syn = None;
    let got_syn = receive_until(&mut tap, &pool, |_, frames| {
        for f in frames {
            if let Some((tcp, _)) = ipv6_tcp_to(&f.to_vec(), port) {
                if tcp.syn && !tcp.ack {
                    syn = Some(tcp);
                }
            }
        }
        syn.is_some()
    });
    assert!(got_syn, "no SYN from the kernel within 2 s");
    let syn = syn.unwrap();
    let mut syn_ack = Vec::new();
    etherparse::PacketBuilder::ethernet2(OUR_MAC, kernel_mac)
        .ipv6(our_ip.octets(), kernel_ip.octets(), 64)
        .tcp(port, syn.source_port, 5000, 65535)
        .syn()
        .ack(syn.sequence_number.wrapping_add(1))
        .options(&[etherparse::TcpOptionElement::MaximumSegmentSize(1440)])
        .unwrap()
        .write(&mut syn_ack, &[])
        .unwrap();
    let mut q = VecDeque::from([PacketBuf::from_slice(&pool, 0, &syn_ack).unwrap()]);
    assert_eq!(tap.transmit_batch(&mut q, Instant::ZERO).unwrap(), 1);

    let mut longest = (0, None);
    receive_until(&mut tap, &pool, |_, frames| {
        for f in frames {
            if let Some((_, payload)) = ipv6_tcp_to(&f.to_vec(), port) {
                if payload > longest.0 {
                    longest = (payload, Some(f.offload()));
                }
            }
        }
        longest.0 > 1440
    });
    let _ = stop.send(());
    client.join().unwrap();
    let (payload, offload) = longest;
    assert!(payload > 1440, "the longest segment from the kernel carried {payload} bytes: no super-segment");
    assert_eq!(offload.map(|o| o.checksum), Some(ChecksumState::Partial));
}

/// The kernel takes an IPv6 TCP super-segment from the TAP with the
/// virtio header [`nagare_dev::vnet::header_for`] gives it: a connection
/// opened by hand to a listener on the kernel's side delivers the 10 000
/// bytes of one super-segment, its checksum left partial, to the reader.
#[test]
fn kernel_takes_ipv6_tcp_super_segments() {
    require_tap!();
    let (mut tap, _guard, kernel_ip, our_ip, kernel_mac) = ipv6_tap('w', std::process::id() ^ 1);
    let listener = TcpListener::bind(SocketAddr::from((kernel_ip, 0))).expect("listen on the kernel's side");
    let kernel_port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    // The kernel's side: accept within 8 s (the handshake below may take
    // three SYNs), read what comes within 2 s.
    let reader = std::thread::spawn(move || {
        let deadline = StdInstant::now() + Duration::from_secs(8);
        let mut stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if StdInstant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => panic!("no connection within 8 s: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < 10_000 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        got
    });

    let pool = BufferPool::new(2048, 256);
    let our_port = 41_000;
    let our_seq = 7_000u32;
    // One segment from us to the listener, its checksum complete (or
    // left partial, with `offload`).
    let segment = |seq: u32, ack: Option<u32>, payload: &[u8], offload: Offload| {
        let builder = etherparse::PacketBuilder::ethernet2(OUR_MAC, kernel_mac)
            .ipv6(our_ip.octets(), kernel_ip.octets(), 64)
            .tcp(our_port, kernel_port, seq, 65535);
        let builder = match ack {
            Some(ack) => builder.ack(ack).psh(),
            None => builder.syn().options(&[etherparse::TcpOptionElement::MaximumSegmentSize(1440)]).unwrap(),
        };
        let mut b = Vec::new();
        builder.write(&mut b, payload).unwrap();
        if offload.checksum == ChecksumState::Partial {
            let sum = nagare_wire::pseudo_header_v6(our_ip, kernel_ip, 6, (b.len() - 54) as u32);
            b[54 + 16..54 + 18].copy_from_slice(&sum.folded().to_be_bytes());
        }
        let mut f = PacketBuf::from_slice(&pool, 0, &b).unwrap();
        f.set_offload(offload);
        f
    };
    // The SYN goes again after 2 s without an answer, as a TCP's would:
    // on a loaded machine the kernel may drop the first one.
    let mut syn_ack = None;
    for _ in 0..3 {
        let mut q = VecDeque::from([segment(our_seq, None, &[], Offload::NONE)]);
        assert_eq!(tap.transmit_batch(&mut q, Instant::ZERO).unwrap(), 1);
        let answered = receive_until(&mut tap, &pool, |_, frames| {
            for f in frames {
                if let Some((tcp, _)) = ipv6_tcp_to(&f.to_vec(), our_port) {
                    if tcp.syn && tcp.ack && tcp.acknowledgment_number == our_seq + 1 {
                        syn_ack = Some(tcp);
                    }
                }
            }
            syn_ack.is_some()
        });
        if answered {
            break;
        }
    }
    assert!(syn_ack.is_some(), "no SYN-ACK from the kernel to three SYNs, 2 s apart");
    let ack = syn_ack.unwrap().sequence_number.wrapping_add(1);
    let mut q = VecDeque::from([
        segment(our_seq + 1, Some(ack), &[], Offload::NONE),
        segment(our_seq + 1, Some(ack), &data, Offload::tcp_segments(1440)),
    ]);
    assert!(q[1].len() > 1514);
    let before = tap.stats();
    assert_eq!(tap.transmit_batch(&mut q, Instant::ZERO).unwrap(), 2);
    let after = tap.stats();
    assert_eq!((after.tx_frames - before.tx_frames, after.tx_errors - before.tx_errors), (2, 0), "{after:?}");
    let got = reader.join().unwrap();
    assert_eq!(got.len(), data.len(), "bytes the kernel's reader got");
    assert!(got == data, "the bytes differ");
}

#[test]
fn plain_frames_without_offload_and_oversize_ones_are_dropped() {
    require_tap!();
    let name = format!("ndtp{}", std::process::id());
    let _guard = LinkGuard(name.clone());
    let x = subnet_octet().wrapping_add(1);
    let kernel_ip = [10, 214, x, 1];
    let our_ip = [10, 214, x, 2];
    let mut tap = TapDevice::open_with(&name, false).expect("open TAP");
    assert_eq!(tap.offloads(), TxOffloads::NONE);
    ip(&["addr", "add", &format!("10.214.{x}.1/30"), "dev", &name]);
    let pool = BufferPool::new(2048, 64);
    let small = BufferPool::new(RX_HEADROOM + 30, 8);
    let mut q = VecDeque::from([arp_request(&pool, our_ip, kernel_ip)]);
    tap.transmit_batch(&mut q, Instant::ZERO).unwrap();
    assert!(receive_until(&mut tap, &small, |t, _| t.stats().rx_dropped_oversize >= 1), "oversize frame not counted");
    assert_eq!(small.in_use(), 0);
    assert_eq!(tap.spare_buffers(), 0);
}

#[test]
fn attaches_to_an_existing_persistent_tap() {
    require_tap!();
    let name = format!("ndta{}", std::process::id());
    let _guard = LinkGuard(name.clone());
    ip(&["tuntap", "add", "dev", &name, "mode", "tap"]);
    let tap = TapDevice::open(&name).expect("attach to TAP");
    assert!(!tap.created());
    drop(tap);
    assert!(
        Path::new(&format!("/sys/class/net/{name}")).exists(),
        "a persistent TAP stays after the device is dropped"
    );
}

#[test]
fn refuses_an_interface_that_is_not_a_tap() {
    require_tap!();
    // The loopback interface exists and is not a TAP.
    let e = TapDevice::open("lo").unwrap_err();
    assert!(e.to_string().contains("TUNSETIFF lo"), "{e}");
}

/// A persistent TAP keeps the offloads its last user asked for; opened
/// without offload, the device clears them, so the kernel completes its
/// checksums before handing frames over (without the virtio header there
/// is no way to say one is partial). A UDP datagram from the kernel's side
/// arrives with a checksum that verifies.
#[test]
fn a_tap_opened_without_offload_after_one_with_it_gets_complete_checksums() {
    require_tap!();
    let name = format!("ndt6{}c", std::process::id());
    let _guard = LinkGuard(name.clone());
    ip(&["tuntap", "add", "dev", &name, "mode", "tap"]);
    let net = (std::process::id() ^ 2) % 0xffff;
    let kernel_ip: Ipv6Addr = format!("fd6e:{net:x}::1").parse().unwrap();
    let our_ip: Ipv6Addr = format!("fd6e:{net:x}::2").parse().unwrap();
    let offloaded = TapDevice::open(&name).expect("open TAP with offload");
    assert!(offloaded.offloads().checksum);
    drop(offloaded);
    // The kernel lets go of the first attachment once every copy of its
    // file is closed: a process another test thread is starting may hold
    // one until it execs. Bounded retries while it is busy.
    let deadline = StdInstant::now() + Duration::from_secs(5);
    let mut tap = loop {
        match TapDevice::open_with(&name, false) {
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy && StdInstant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            opened => break opened.expect("open TAP without offload"),
        }
    };
    assert_eq!(tap.offloads(), TxOffloads::NONE);
    ip(&["-6", "addr", "add", &format!("{kernel_ip}/64"), "dev", &name, "nodad"]);
    ip(&["link", "set", &name, "up"]);
    let our_mac = OUR_MAC.map(|b| format!("{b:02x}")).join(":");
    ip(&["-6", "neigh", "replace", &our_ip.to_string(), "lladdr", &our_mac, "dev", &name, "nud", "permanent"]);

    let port = 42_000 + (std::process::id() % 10_000) as u16;
    let socket = std::net::UdpSocket::bind(SocketAddr::from((kernel_ip, 0))).expect("a kernel UDP socket");
    let pool = BufferPool::new(2048, 64);
    let mut datagram = None;
    let arrived = receive_until(&mut tap, &pool, |_, frames| {
        let _ = socket.send_to(b"checksum me, kernel", SocketAddr::from((our_ip, port)));
        for f in frames {
            let bytes = f.to_vec();
            let udp_to_us = bytes.len() > 62 && bytes[12..14] == [0x86, 0xdd] && bytes[20] == 17;
            if udp_to_us && bytes[56..58] == port.to_be_bytes() {
                datagram = Some(bytes);
            }
        }
        datagram.is_some()
    });
    assert!(arrived, "no datagram from the kernel within 2 s");
    let frame = datagram.unwrap();
    let udp = &frame[54..];
    let mut sum = nagare_wire::pseudo_header_v6(kernel_ip, our_ip, 17, udp.len() as u32);
    sum.add_bytes(udp);
    assert_eq!(sum.folded(), 0xffff, "the kernel left the UDP checksum partial");
}
