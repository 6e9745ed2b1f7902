//! The TAP steering program, run by the kernel on frames made here
//! (`BPF_PROG_TEST_RUN`: nothing is sent anywhere). Needs root (CAP_BPF).

use nagare_dev::{PortSteering, MAX_LOCAL6};

/// The address frames are sent to, steered once the map has it.
const LOCAL: [u8; 4] = [10, 0, 0, 2];

/// The loaded program, or the reason it cannot be (printed loudly).
fn loaded() -> Option<PortSteering> {
    match PortSteering::load() {
        Ok(s) => Some(s),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES | libc::ENOSYS)) => {
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("\n******** SKIPPED: cannot load eBPF programs here: {e} ********\n\n"),
            );
            None
        }
        Err(e) => panic!("the kernel refused the steering program: {e}"),
    }
}

/// An Ethernet + IPv4 frame of `proto` to `port`, with an IP header of
/// `ihl` words and `frag` as its flags/fragment-offset field.
fn frame(proto: u8, port: u16, ihl: u8, frag: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = usize::from(ihl) * 4;
    let mut ip = vec![0u8; ip_len];
    ip[0] = 0x40 | ihl;
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&LOCAL);
    let l4 = [0x30, 0x39, (port >> 8) as u8, port as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let total = (ip_len + l4.len()) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&l4);
    f
}

#[test]
fn frames_go_to_the_queue_of_their_local_port() {
    let Some(s) = loaded() else { return };
    s.map().steer(17, 5000, 3).unwrap();
    s.map().steer(6, 5000, 2).unwrap();
    s.map().steer(6, 80, 1).unwrap();
    // Nothing is steered before the map knows netd's address, nor after
    // to another address.
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0)).unwrap(), 0);
    s.map().set_local(u32::from_be_bytes([10, 0, 0, 9])).unwrap();
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0)).unwrap(), 0);
    s.map().set_local(u32::from_be_bytes(LOCAL)).unwrap();
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0)).unwrap(), 3);
    assert_eq!(s.queue_of(&frame(6, 5000, 5, 0x4000)).unwrap(), 2, "don't-fragment is no fragment");
    assert_eq!(s.queue_of(&frame(6, 80, 5, 0)).unwrap(), 1);
    // IP options move the transport header: the port is read after them.
    assert_eq!(s.queue_of(&frame(6, 80, 15, 0)).unwrap(), 1);
    // A port nobody steered, and a protocol that is neither.
    assert_eq!(s.queue_of(&frame(17, 80, 5, 0)).unwrap(), 0);
    assert_eq!(s.queue_of(&frame(1, 80, 5, 0)).unwrap(), 0);
    s.map().unsteer(6, 80).unwrap();
    s.map().unsteer(6, 80).unwrap();
    assert_eq!(s.queue_of(&frame(6, 80, 5, 0)).unwrap(), 0);
}

#[test]
fn fragments_odd_and_short_frames_go_to_queue_zero() {
    let Some(s) = loaded() else { return };
    s.map().steer(17, 5000, 3).unwrap();
    s.map().set_local(u32::from_be_bytes(LOCAL)).unwrap();
    // A first fragment (more fragments) and a later one.
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0x2000)).unwrap(), 0);
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0x0010)).unwrap(), 0);
    // Not IPv4 by ether type, or by version.
    let mut arp = frame(17, 5000, 5, 0);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(s.queue_of(&arp).unwrap(), 0);
    let mut v6 = frame(17, 5000, 5, 0);
    v6[14] = 0x65;
    assert_eq!(s.queue_of(&v6).unwrap(), 0);
    // Every truncation of the transport header: a header the program
    // cannot read ends it with 0. (The kernel's test harness itself refuses
    // an IPv4 frame without a whole IP header.)
    let whole = frame(17, 5000, 5, 0);
    for len in 14 + 20..14 + 20 + 4 {
        assert_eq!(s.queue_of(&whole[..len]).unwrap(), 0, "truncated to {len}");
    }
    assert_eq!(s.queue_of(&whole[..14 + 20 + 4]).unwrap(), 3);
    // An IP header length under 20 bytes: the "port" would be read from
    // the IP header itself (here the last half of the destination address,
    // 0.2, as if port 2 were steered).
    s.map().steer(17, 2, 4).unwrap();
    let mut short = frame(17, 5000, 5, 0);
    short[14] = 0x44;
    assert_eq!(s.queue_of(&short).unwrap(), 0);
    // An IP header length pointing past the frame.
    let mut long = frame(17, 5000, 5, 0);
    long[14] = 0x4f;
    assert_eq!(s.queue_of(&long).unwrap(), 0);
}

/// The IPv6 address frames are sent to, steered once the map has it.
const LOCAL6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// An Ethernet + IPv6 frame to `dst` whose next header is `next`, with
/// a TCP or UDP header to `port` right after the fixed header.
fn frame6(next: u8, port: u16, dst: [u8; 16]) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let mut ip = [0u8; 40];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&20u16.to_be_bytes());
    ip[6] = next;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip[24..40].copy_from_slice(&dst);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x30, 0x39, (port >> 8) as u8, port as u8]);
    f.extend_from_slice(&[0u8; 16]);
    f
}

#[test]
fn ipv6_frames_go_to_the_queue_of_their_local_port() {
    let Some(s) = loaded() else { return };
    s.map().steer(17, 5000, 3).unwrap();
    s.map().steer(6, 80, 1).unwrap();
    s.map().set_local(u32::from_be_bytes(LOCAL)).unwrap();
    // Nothing is steered before the map knows netd's IPv6 address.
    assert_eq!(s.queue_of(&frame6(17, 5000, LOCAL6)).unwrap(), 0);
    s.map().set_local6(0, Some(LOCAL6)).unwrap();
    assert_eq!(s.queue_of(&frame6(17, 5000, LOCAL6)).unwrap(), 3);
    assert_eq!(s.queue_of(&frame6(6, 80, LOCAL6)).unwrap(), 1);
    // A port nobody steered, and a protocol that is neither.
    assert_eq!(s.queue_of(&frame6(17, 80, LOCAL6)).unwrap(), 0);
    assert_eq!(s.queue_of(&frame6(58, 80, LOCAL6)).unwrap(), 0);
    // Another address, even one differing in a single word.
    for w in 0..4 {
        let mut other = LOCAL6;
        other[4 * w + 3] ^= 1;
        assert_eq!(s.queue_of(&frame6(17, 5000, other)).unwrap(), 0, "word {w} differs");
    }
    // IPv4 as before, beside it.
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0)).unwrap(), 3);
    // Unset, nothing of IPv6 is steered; IPv4 still is.
    s.map().set_local6(0, None).unwrap();
    s.map().set_local6(0, None).unwrap();
    assert_eq!(s.queue_of(&frame6(17, 5000, LOCAL6)).unwrap(), 0);
    assert_eq!(s.queue_of(&frame(17, 5000, 5, 0)).unwrap(), 3);
}

/// A link-local address and a SLAAC-made one in netd's prefix.
const LINK_LOCAL: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0];
const SLAAC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0];

#[test]
fn ipv6_frames_to_any_address_of_a_slot_are_steered() {
    let Some(s) = loaded() else { return };
    s.map().steer(17, 5000, 3).unwrap();
    s.map().set_local6(0, Some(LINK_LOCAL)).unwrap();
    s.map().set_local6(1, Some(LOCAL6)).unwrap();
    for ip in [LINK_LOCAL, LOCAL6] {
        assert_eq!(s.queue_of(&frame6(17, 5000, ip)).unwrap(), 3, "{ip:x?}");
    }
    // The SLAAC address shares its last words with the link-local one and
    // its first with LOCAL6: it is neither, until a slot holds it.
    assert_eq!(s.queue_of(&frame6(17, 5000, SLAAC)).unwrap(), 0);
    s.map().set_local6(MAX_LOCAL6 - 1, Some(SLAAC)).unwrap();
    assert_eq!(s.queue_of(&frame6(17, 5000, SLAAC)).unwrap(), 3);
    // A slot emptied, or given another address, no longer steers its own.
    s.map().set_local6(0, None).unwrap();
    assert_eq!(s.queue_of(&frame6(17, 5000, LINK_LOCAL)).unwrap(), 0);
    s.map().set_local6(1, Some(LINK_LOCAL)).unwrap();
    assert_eq!(s.queue_of(&frame6(17, 5000, LOCAL6)).unwrap(), 0);
    assert_eq!(s.queue_of(&frame6(17, 5000, LINK_LOCAL)).unwrap(), 3);
    // Every slot full, each steers its address; a word off in any fails.
    let addr = |slot: usize| {
        let mut a = LOCAL6;
        a[15] = 0x10 + slot as u8;
        a
    };
    for slot in 0..MAX_LOCAL6 {
        s.map().set_local6(slot, Some(addr(slot))).unwrap();
    }
    for slot in 0..MAX_LOCAL6 {
        assert_eq!(s.queue_of(&frame6(17, 5000, addr(slot))).unwrap(), 3, "slot {slot}");
        for w in 0..4 {
            let mut other = addr(slot);
            other[4 * w] ^= 0x40;
            assert_eq!(s.queue_of(&frame6(17, 5000, other)).unwrap(), 0, "slot {slot}, word {w} differs");
        }
    }
    assert!(s.map().set_local6(MAX_LOCAL6, Some(LOCAL6)).is_err(), "no slot past the last");
}

#[test]
fn ipv6_frames_behind_extension_headers_odd_or_short_go_to_queue_zero() {
    let Some(s) = loaded() else { return };
    s.map().steer(17, 5000, 3).unwrap();
    s.map().set_local6(0, Some(LOCAL6)).unwrap();
    assert_eq!(s.queue_of(&frame6(17, 5000, LOCAL6)).unwrap(), 3);
    // Hop-by-hop options, routing, a fragment header, destination options.
    for next in [0, 43, 44, 60] {
        assert_eq!(s.queue_of(&frame6(next, 5000, LOCAL6)).unwrap(), 0, "next header {next}");
    }
    // Not version 6.
    let mut v4 = frame6(17, 5000, LOCAL6);
    v4[14] = 0x45;
    assert_eq!(s.queue_of(&v4).unwrap(), 0);
    // Every truncation of the transport header: a header the program
    // cannot read ends it with 0. (The kernel's test harness itself
    // refuses a frame shorter than an Ethernet header.)
    let whole = frame6(17, 5000, LOCAL6);
    for len in 14..14 + 40 + 4 {
        match s.queue_of(&whole[..len]) {
            Ok(queue) => assert_eq!(queue, 0, "truncated to {len}"),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "truncated to {len}"),
        }
    }
    assert_eq!(s.queue_of(&whole[..14 + 40 + 4]).unwrap(), 3);
}
