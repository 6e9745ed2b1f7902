//! The SYN guard's filter, and the shedding of UDP datagrams for
//! receivers of low priority ([`UdpShed`]), as one classic BPF program on
//! a TAP (`TUNATTACHFILTER`): the kernel runs it in the system call of
//! whoever sends to the TAP, before the frame is queued, so what it drops
//! costs the reader nothing: no read, no wake-up, no SYN-ACK, no room in
//! the TAP's ring that a frame the reader wants then lacks.
//!
//! Both parts read IPv4 and IPv6 frames: an IPv4 packet that is not a
//! later fragment (its header's options skipped), or an IPv6 packet whose
//! next header right after the fixed 40-byte header is the transport's.
//! An IPv6 packet whose transport header lies behind an extension header
//! (hop-by-hop or destination options, routing, a fragment header, even
//! an atomic fragment's) passes untouched: the program does not walk the
//! chain. The engine knows which IPv6 segments the program could not
//! read and draws for those SYNs itself (`nagare_core::tcp::syn_guard`).
//!
//! The UDP part, first in the program, drops such a UDP datagram (or the
//! first fragment of an IPv4 one) to one of its ports when the kernel's
//! random number for it is above that port's `admit`; anything else goes
//! on to the SYN part (or passes, without one).
//!
//! The program sees the Ethernet frame from its first byte (the virtio
//! header is added only when the frame is read). The SYN part passes
//! every frame but one kind: such a packet carrying TCP with SYN set and
//! ACK and RST clear, to one of the filter's ports, from an address not
//! on its proven lists (IPv4's or IPv6's, by the packet's family). Such a
//! SYN passes only if the kernel's random number for it is at most the
//! filter's `admit` ([`nagare_core::tcp::syn_guard::SynFilter`]).
//!
//! A load past the end of the frame makes the kernel drop it, so the
//! program checks the frame's length before its loads and passes a frame
//! too short for them (a tiny first fragment, a truncated header): the
//! engine counts and drops such a frame itself. A frame whose VLAN tag
//! the kernel holds apart from the bytes (out of band) passes untouched,
//! as the offsets past the MAC addresses are not the ones it would read.

use crate::device::UdpShed;
use nagare_core::tcp::syn_guard::{self, SynFilter, MAX_FILTER_PORTS, MAX_FILTER_PROVEN, MAX_FILTER_PROVEN6};
use std::io;
use std::os::fd::RawFd;

/// Most proven IPv4 addresses a program lists (the engine's filter lists
/// no more); the rest of a longer list are not exempt. Every jump of the
/// program is forward and its offset is a `u8`: a jump to PASS from the
/// start spans the header, the ports and this many addresses, which must
/// stay within 255 instructions of it (checked below at compile time).
const MAX_LISTED: usize = MAX_FILTER_PROVEN;
/// Most proven IPv6 addresses a program lists; the rest are not exempt.
/// They come after the IPv4 part's PASS and DROP, each with a PASS of its
/// own, so they widen no jump; each costs [`PER_ADDRESS6`] instructions.
const MAX_LISTED6: usize = MAX_FILTER_PROVEN6;
/// Instructions per proven IPv6 address: a load and a comparison per
/// word, and PASS.
const PER_ADDRESS6: usize = 9;
/// The most instructions the kernel takes in a classic program
/// (`BPF_MAXINSNS`).
const MAX_INSNS: usize = 4096;

// Classic BPF opcodes (linux/bpf_common.h, linux/filter.h).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const LEN: u16 = 0x80;
const MSH: u16 = 0xa0;
const SUB: u16 = 0x10;
const AND: u16 = 0x50;
const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const JGT: u16 = 0x20;
const JGE: u16 = 0x30;
const JSET: u16 = 0x40;
/// The operand of an ALU or jump instruction is X, not `k`.
const X: u16 = 0x08;

/// The load offset of the kernel's random number (`SKF_AD_OFF + SKF_AD_RANDOM`).
const RANDOM: u32 = (libc::SKF_AD_OFF + libc::SKF_AD_RANDOM) as u32;
/// The load offset that reads 1 when the frame's VLAN tag is out of band.
const VLAN_TAG_PRESENT: u32 = (libc::SKF_AD_OFF + libc::SKF_AD_VLAN_TAG_PRESENT) as u32;

// Where the program looks, from the start of the Ethernet frame.
const ETHERTYPE: u32 = 12;
const IP: u32 = 14;
const IP_PROTOCOL: u32 = IP + 9;
const IP_FRAGMENT: u32 = IP + 6;
const IP_SOURCE: u32 = IP + 12;
/// The shortest frame the loads at fixed offsets fit in: an Ethernet
/// header and a 20-byte IP header.
const MIN_IP_FRAME: u32 = IP + 20;
/// The fixed IPv6 header's length, and where its next header and source
/// address are.
const IPV6_HEADER: u32 = 40;
const IPV6_NEXT_HEADER: u32 = IP + 6;
const IPV6_SOURCE: u32 = IP + 8;
/// Past the IP header (whose length is in X): the destination port (of
/// TCP and UDP alike) and TCP's flags.
const DST_PORT: u32 = IP + 2;
const TCP_FLAGS: u32 = IP + 13;
/// The frame's length less the IP header's must reach past the flags (the
/// engine draws for an IPv4 SYN whose first fragment ended before them).
const TCP_FLAGS_END: u32 = TCP_FLAGS + 1;
const _: () = assert!(TCP_FLAGS_END == IP + syn_guard::TCP_FLAGS_END as u32);

const ETHERTYPE_IPV4: u32 = 0x0800;
const ETHERTYPE_IPV6: u32 = 0x86dd;
const PROTOCOL_TCP: u32 = 6;
const FRAGMENT_OFFSET_MASK: u32 = 0x1fff;
const SYN: u32 = 0x02;
const SYN_RST_ACK: u32 = 0x02 | 0x04 | 0x10;

/// What `ret` keeps of a passed frame: all of it.
const PASS_ALL: u32 = u32::MAX;

/// Instructions of [`transport_header`].
const TRANSPORT_HEADER: usize = 20;
/// Instructions of the SYN part before its port comparisons.
const HEADER: usize = TRANSPORT_HEADER + 4;

const PROTOCOL_UDP: u32 = 17;
/// The frame's length less the IP header's must reach past the UDP
/// destination port.
const UDP_PORT_END: u32 = IP + 4;
/// Instructions of the UDP part before its port comparisons.
const UDP_HEADER: usize = TRANSPORT_HEADER + 1;
/// The most ports a UDP shed lists; the rest are not shed.
pub const MAX_SHED_PORTS: usize = 32;
/// The longest UDP part: its header, a comparison, a draw (2) for each
/// port, the jump past the draws, and DROP.
const MAX_UDP_PART: usize = UDP_HEADER + 3 * MAX_SHED_PORTS + 2;
// Its widest jump, from its first test past its end, fits a `u8`.
const _: () = assert!(MAX_UDP_PART <= u8::MAX as usize);

/// Where the SYN part's PASS is at most: after the header, the ports, the
/// jump past the addresses, the family's test (2), the IPv4 source load,
/// the IPv4 addresses and the draw.
const MAX_PASS: usize = HEADER + MAX_FILTER_PORTS + 1 + 2 + 1 + MAX_LISTED + 2;
// The widest jump, from the header's first test to PASS, fits a `u8`.
const _: () = assert!(MAX_PASS - 2 <= u8::MAX as usize);
// So does the jump from the family's test past PASS and DROP to the IPv6
// addresses.
const _: () = assert!(1 + MAX_LISTED + 2 + 2 <= u8::MAX as usize);
/// The longest SYN part: to PASS, then DROP, the IPv6 addresses, and their
/// draw, DROP and PASS.
const MAX_PROGRAM: usize = MAX_PASS + 2 + PER_ADDRESS6 * MAX_LISTED6 + 4;
const _: () = assert!(MAX_UDP_PART + MAX_PROGRAM <= MAX_INSNS);

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

/// A conditional jump at instruction `at` to `on_true` or `on_false`,
/// both after it and within `u8::MAX` of it (each program's layout
/// ensures so).
fn jump(at: usize, code: u16, k: u32, on_true: usize, on_false: usize) -> libc::sock_filter {
    let rel = |to: usize| -> u8 { u8::try_from(to - at - 1).unwrap_or(u8::MAX) };
    libc::sock_filter { code: JMP | code, jt: rel(on_true), jf: rel(on_false), k }
}

/// The [`TRANSPORT_HEADER`] instructions that start a program's part for
/// `protocol`, pushed onto `p` from its instruction 0 (or the part's
/// first): a frame with an out-of-band VLAN tag, shorter than an Ethernet
/// and an IPv4 header, neither IPv4 nor IPv6, not `protocol` (for IPv6:
/// not `protocol` right after the fixed header), an IPv4 later fragment,
/// or too short to reach `end` bytes past its IP header goes to `out`;
/// the rest goes on with X holding the IP header's length (40 for IPv6).
fn transport_header(p: &mut Vec<libc::sock_filter>, protocol: u32, end: u32, out: usize) {
    let base = p.len();
    let at = |i: usize| base + i;
    let join = at(TRANSPORT_HEADER);
    p.push(stmt(LD | W | ABS, VLAN_TAG_PRESENT)); // 0
    p.push(jump(at(1), JEQ, 1, out, at(2)));
    p.push(stmt(LD | W | LEN, 0)); // 2
    p.push(jump(at(3), JGE, MIN_IP_FRAME, at(4), out));
    p.push(stmt(LD | H | ABS, ETHERTYPE)); // 4
    p.push(jump(at(5), JEQ, ETHERTYPE_IPV4, at(6), at(14)));
    // IPv4.
    p.push(stmt(LD | B | ABS, IP_PROTOCOL)); // 6
    p.push(jump(at(7), JEQ, protocol, at(8), out));
    p.push(stmt(LD | H | ABS, IP_FRAGMENT)); // 8
    p.push(jump(at(9), JSET, FRAGMENT_OFFSET_MASK, out, at(10)));
    // 10: X = IP header length; then len - end >= X: `end` bytes past
    // the IP header are within the frame (the length is at least 34
    // here, so it does not wrap).
    p.push(stmt(LDX | B | MSH, IP));
    p.push(stmt(LD | W | LEN, 0)); // 11
    p.push(stmt(ALU | SUB, end)); // 12
    p.push(jump(at(13), JGE | X, 0, join, out));
    // IPv6 (A still holds the EtherType): the length reaches `end` past
    // the fixed header, which holds the next header and the source.
    p.push(jump(at(14), JEQ, ETHERTYPE_IPV6, at(15), out)); // 14
    p.push(stmt(LD | W | LEN, 0)); // 15
    p.push(jump(at(16), JGE, end + IPV6_HEADER, at(17), out));
    p.push(stmt(LD | B | ABS, IPV6_NEXT_HEADER)); // 17
    p.push(jump(at(18), JEQ, protocol, at(19), out));
    p.push(stmt(LDX | W | IMM, IPV6_HEADER)); // 19
    debug_assert_eq!(p.len(), join);
}

/// The program for `filter` and `shed`; `None` when it drops nothing
/// (the SYN filter not engaged or with no port, and nothing shed).
pub fn program_for(filter: &SynFilter, shed: &UdpShed) -> Option<Vec<libc::sock_filter>> {
    let syn = program(filter);
    let ports = &shed.ports[..shed.ports.len().min(MAX_SHED_PORTS)];
    let ports: Vec<(u16, u32)> = ports.iter().copied().filter(|&(_, admit)| admit < u32::MAX).collect();
    if ports.is_empty() {
        return syn;
    }
    let mut p = udp_part(&ports);
    match syn {
        Some(syn) => p.extend(syn),
        None => p.push(stmt(RET, PASS_ALL)),
    }
    Some(p)
}

/// The UDP part of a program for `ports` (1 to [`MAX_SHED_PORTS`]), which
/// ends in DROP: what it passes goes on to the instruction after it.
fn udp_part(ports: &[(u16, u32)]) -> Vec<libc::sock_filter> {
    // Layout: the header, a comparison per port, a jump past the draws,
    // a draw (load and compare) per port, DROP; then the rest.
    let draws = UDP_HEADER + ports.len() + 1;
    let drop = draws + 2 * ports.len();
    let next = drop + 1;
    let mut p = Vec::with_capacity(next);
    transport_header(&mut p, PROTOCOL_UDP, UDP_PORT_END, next);
    p.push(stmt(LD | H | IND, DST_PORT));
    debug_assert_eq!(p.len(), UDP_HEADER);
    for (i, &(port, _)) in ports.iter().enumerate() {
        let at = UDP_HEADER + i;
        p.push(jump(at, JEQ, u32::from(port), draws + 2 * i, at + 1));
    }
    p.push(stmt(JMP | JA, (next - draws) as u32)); // from draws - 1
    for (i, &(_, admit)) in ports.iter().enumerate() {
        let at = draws + 2 * i;
        p.push(stmt(LD | W | ABS, RANDOM));
        p.push(jump(at + 1, JGT, admit, drop, next));
    }
    p.push(stmt(RET, 0)); // drop
    debug_assert_eq!(p.len(), next);
    p
}

/// The program for `filter`; `None` when it drops nothing (not engaged,
/// or no port). It lists at most 8 ports, 200 proven IPv4 addresses and
/// 64 proven IPv6 ones.
pub fn program(filter: &SynFilter) -> Option<Vec<libc::sock_filter>> {
    if !filter.engaged || filter.ports.is_empty() {
        return None;
    }
    let ports = &filter.ports[..filter.ports.len().min(MAX_FILTER_PORTS)];
    let proven = &filter.proven[..filter.proven.len().min(MAX_LISTED)];
    let proven6 = &filter.proven6[..filter.proven6.len().min(MAX_LISTED6)];
    // Layout: the header, the ports, a jump to PASS, the family's test,
    // the IPv4 source load, the proven IPv4 addresses, the draw (load and
    // compare), PASS and DROP; then the proven IPv6 addresses (each
    // compared word by word, with a PASS of its own), their draw, DROP
    // and PASS.
    let family = HEADER + ports.len() + 1;
    let source = family + 2;
    let draw = source + 1 + proven.len();
    let pass = draw + 2;
    let drop = pass + 1;
    let source6 = drop + 1;
    let draw6 = source6 + PER_ADDRESS6 * proven6.len();
    let (drop6, pass6) = (draw6 + 2, draw6 + 3);
    // Every jump is forward and within `u8::MAX` (MAX_PASS above).
    let mut p = Vec::with_capacity(pass6 + 1);
    transport_header(&mut p, PROTOCOL_TCP, TCP_FLAGS_END, pass);
    p.push(stmt(LD | B | IND, TCP_FLAGS)); // 20
    p.push(stmt(ALU | AND, SYN_RST_ACK)); // 21
    p.push(jump(22, JEQ, SYN, 23, pass));
    p.push(stmt(LD | H | IND, DST_PORT)); // 23
    debug_assert_eq!(p.len(), HEADER);
    for (i, port) in ports.iter().enumerate() {
        let at = HEADER + i;
        p.push(jump(at, JEQ, u32::from(*port), family, at + 1));
    }
    p.push(stmt(JMP | JA, (pass - family) as u32)); // from family - 1
    p.push(stmt(LD | H | ABS, ETHERTYPE)); // family
    p.push(jump(family + 1, JEQ, ETHERTYPE_IPV6, source6, source));
    p.push(stmt(LD | W | ABS, IP_SOURCE)); // source
    for (i, addr) in proven.iter().enumerate() {
        let at = source + 1 + i;
        p.push(jump(at, JEQ, u32::from(*addr), pass, at + 1));
    }
    p.push(stmt(LD | W | ABS, RANDOM)); // draw
    p.push(jump(draw + 1, JGT, filter.admit, drop, pass));
    p.push(stmt(RET, PASS_ALL)); // pass
    p.push(stmt(RET, 0)); // drop
    for (i, addr) in proven6.iter().enumerate() {
        let first = source6 + PER_ADDRESS6 * i;
        let next = first + PER_ADDRESS6;
        let bits = u128::from(*addr);
        for w in 0..4u32 {
            let word = (bits >> (96 - 32 * w)) as u32;
            let at = first + 2 * w as usize + 1;
            p.push(stmt(LD | W | ABS, IPV6_SOURCE + 4 * w));
            p.push(jump(at, JEQ, word, at + 1, next));
        }
        p.push(stmt(RET, PASS_ALL)); // all four words matched
        debug_assert_eq!(p.len(), next);
    }
    p.push(stmt(LD | W | ABS, RANDOM)); // draw6
    p.push(jump(draw6 + 1, JGT, filter.admit, drop6, pass6));
    p.push(stmt(RET, 0)); // drop6
    p.push(stmt(RET, PASS_ALL)); // pass6
    debug_assert_eq!(p.len(), pass6 + 1);
    Some(p)
}

/// Attaches `program` to the TAP open on `fd` (every queue of it),
/// replacing any filter before.
///
/// The kernel copies the instructions into each queue, and keeps the
/// address of `program` too: it reads it again, in the address space of
/// whoever attaches, to filter a queue attached later with TUNSETQUEUE
/// or with TUNSETIFF without IFF_NO_PI (that flag shares its bit with
/// IFF_NOFILTER, so a queue attached with it gets no filter). The caller
/// keeps `program` alive and unchanged until it [`detach`]es the filter
/// or attaches another.
///
/// When this fails, some queues may keep the filter they had and others
/// none: the caller detaches.
pub fn attach(fd: RawFd, program: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let prog = libc::sock_fprog { len, filter: program.as_ptr().cast_mut() };
    // SAFETY: TUNATTACHFILTER copies the `sock_fprog` and then `len`
    // instructions from `filter`, which `program` holds; the kernel only
    // reads through the pointer, and the caller keeps `program` alive for
    // the later reads described above.
    let rc = unsafe { libc::ioctl(fd, libc::TUNATTACHFILTER, &prog as *const libc::sock_fprog) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes the filter from every queue of the TAP open on `fd`.
pub fn detach(fd: RawFd) -> io::Result<()> {
    // SAFETY: TUNDETACHFILTER does not read its argument (the request
    // number names a `sock_fprog` only for its size); no memory is passed.
    let rc = unsafe { libc::ioctl(fd, libc::TUNDETACHFILTER, 0 as libc::c_ulong) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// What the kernel knows of a frame apart from its bytes.
    #[derive(Clone, Copy, Default)]
    struct Side {
        random: u32,
        vlan_out_of_band: bool,
    }

    /// Runs a classic BPF program as the kernel does, for the opcodes
    /// [`program`] uses; a load past the frame drops it (returns 0).
    fn run(program: &[libc::sock_filter], frame: &[u8], random: u32) -> u32 {
        run_with(program, frame, Side { random, vlan_out_of_band: false })
    }

    fn run_with(program: &[libc::sock_filter], frame: &[u8], side: Side) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut pc = 0usize;
        let load = |at: u32, size: usize| -> Option<u32> {
            if at == RANDOM && size == 4 {
                return Some(side.random);
            }
            if at == VLAN_TAG_PRESENT && size == 4 {
                return Some(u32::from(side.vlan_out_of_band));
            }
            let at = at as usize;
            let bytes = frame.get(at..at + size)?;
            Some(bytes.iter().fold(0u32, |v, b| (v << 8) | u32::from(*b)))
        };
        for _ in 0..program.len() {
            let Some(i) = program.get(pc) else { return 0 };
            pc += 1;
            let size = match i.code & 0x18 {
                H => 2,
                B => 1,
                _ => 4,
            };
            let operand = if i.code & X != 0 { x } else { i.k };
            match i.code & 0x07 {
                c if c == LD && i.code & 0xe0 == LEN => a = frame.len() as u32,
                c if c == LD => {
                    let at = if i.code & 0xe0 == IND { x.wrapping_add(i.k) } else { i.k };
                    match load(at, size) {
                        Some(v) => a = v,
                        None => return 0,
                    }
                }
                c if c == LDX && i.code & 0xe0 == IMM => x = i.k,
                c if c == LDX && i.code & 0xe0 == MSH => match load(i.k, 1) {
                    Some(v) => x = (v & 0xf) * 4,
                    None => return 0,
                },
                c if c == ALU => match i.code & 0xf0 {
                    AND => a &= operand,
                    SUB => a = a.wrapping_sub(operand),
                    _ => return 0,
                },
                c if c == JMP => {
                    let taken = match i.code & 0xf0 {
                        JA => {
                            pc += i.k as usize;
                            continue;
                        }
                        JEQ => a == operand,
                        JGT => a > operand,
                        JGE => a >= operand,
                        JSET => a & operand != 0,
                        _ => return 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                c if c == RET => return i.k,
                _ => return 0,
            }
        }
        0
    }

    const SPOOFED: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
    const PROVEN: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const MORE_FRAGMENTS: u16 = 0x2000;
    const SPOOFED6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);
    const PROVEN6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
    /// Proven IPv6 addresses that share three of their four words with
    /// [`SPOOFED6`]: each word is compared.
    const NEAR6: [Ipv6Addr; 4] = [
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 8),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 1, 0, 7),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 7),
        Ipv6Addr::new(0x2001, 0xdb9, 0, 0, 0, 0, 0, 7),
    ];

    fn filter(admit: u32) -> SynFilter {
        SynFilter {
            generation: 1,
            engaged: true,
            ports: vec![80, 443],
            proven: vec![PROVEN],
            proven6: vec![NEAR6[0], NEAR6[1], NEAR6[2], NEAR6[3], PROVEN6],
            admit,
        }
    }

    /// The largest filter: every port, and more proven addresses than a
    /// program lists.
    fn largest() -> SynFilter {
        SynFilter {
            generation: 1,
            engaged: true,
            ports: (1..=MAX_FILTER_PORTS as u16).collect(),
            proven: (0..MAX_LISTED as u32 + 10).map(|i| Ipv4Addr::from(0x0a00_0000 + i)).collect(),
            proven6: (0..MAX_LISTED6 as u128 + 10).map(|i| Ipv6Addr::from(u128::from(PROVEN6) + i)).collect(),
            admit: 0,
        }
    }

    /// An Ethernet frame with an IPv4 header of `ihl` words and a TCP
    /// header with `flags`.
    fn frame(src: Ipv4Addr, port: u16, flags: u8, ihl: u8, fragment: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = vec![0u8; usize::from(ihl) * 4];
        ip[0] = 0x40 | ihl;
        ip[6..8].copy_from_slice(&fragment.to_be_bytes());
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src.octets());
        f.extend_from_slice(&ip);
        let mut tcp = [0u8; 20];
        tcp[2..4].copy_from_slice(&port.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags;
        f.extend_from_slice(&tcp);
        f
    }

    #[test]
    fn an_unproven_syn_to_a_guarded_port_passes_only_on_a_low_draw() {
        let p = program(&filter(1000)).expect("an engaged filter has a program");
        let syn = frame(SPOOFED, 80, 0x02, 5, 0);
        assert_eq!(run(&p, &syn, 1000), PASS_ALL);
        assert_eq!(run(&p, &syn, 1001), 0);
        assert_eq!(run(&p, &frame(SPOOFED, 443, 0x02, 5, 0), u32::MAX), 0);
        // With IP options, the flags are found past them.
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x02, 8, 0), u32::MAX), 0);
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x02, 8, 0), 0), PASS_ALL);
        // The shortest frame with the flags, and a first fragment with
        // the whole TCP header, are judged.
        assert_eq!(run(&p, &syn[..14 + 20 + 14], u32::MAX), 0);
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x02, 5, MORE_FRAGMENTS), u32::MAX), 0);
    }

    #[test]
    fn everything_else_passes() {
        let p = program(&filter(0)).expect("an engaged filter has a program");
        let high = u32::MAX;
        assert_eq!(run(&p, &frame(PROVEN, 80, 0x02, 5, 0), high), PASS_ALL, "a proven peer");
        assert_eq!(run(&p, &frame(SPOOFED, 22, 0x02, 5, 0), high), PASS_ALL, "another port");
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x12, 5, 0), high), PASS_ALL, "a SYN-ACK");
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x06, 5, 0), high), PASS_ALL, "SYN with RST");
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x10, 5, 0), high), PASS_ALL, "an ACK");
        assert_eq!(run(&p, &frame(SPOOFED, 80, 0x02, 5, 0x0010), high), PASS_ALL, "a later fragment");
        let mut udp = frame(SPOOFED, 80, 0x02, 5, 0);
        udp[IP_PROTOCOL as usize] = 17;
        assert_eq!(run(&p, &udp, high), PASS_ALL, "UDP");
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(run(&p, &arp, high), PASS_ALL, "ARP");
    }

    #[test]
    fn vlan_frames_pass() {
        let p = program(&filter(0)).expect("an engaged filter has a program");
        let high = u32::MAX;
        // An 802.1Q tag in the frame moves the IP header by 4 bytes.
        for syn in [frame(SPOOFED, 80, 0x02, 5, 0), frame6(SPOOFED6, 80, 0x02, 6)] {
            let mut tagged = syn[..12].to_vec();
            tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
            tagged.extend_from_slice(&syn[12..]);
            assert_eq!(run(&p, &tagged, high), PASS_ALL, "an in-band 802.1Q tag");
            // A tag the kernel holds out of band: the same unproven SYN
            // passes.
            assert_eq!(run(&p, &syn, high), 0);
            let side = Side { random: high, vlan_out_of_band: true };
            assert_eq!(run_with(&p, &syn, side), PASS_ALL, "out-of-band tag");
        }
    }

    /// An Ethernet frame with a fixed IPv6 header from `src` whose next
    /// header is `next`, then a TCP header to `port` with `flags`.
    fn frame6(src: Ipv6Addr, port: u16, flags: u8, next: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let mut ip = [0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&20u16.to_be_bytes());
        ip[6] = next;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&src.octets());
        ip[24..40].copy_from_slice(&PROVEN6.octets());
        f.extend_from_slice(&ip);
        let mut tcp = [0u8; 20];
        tcp[2..4].copy_from_slice(&port.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags;
        f.extend_from_slice(&tcp);
        f
    }

    #[test]
    fn an_unproven_ipv6_syn_to_a_guarded_port_passes_only_on_a_low_draw() {
        let p = program(&filter(1000)).expect("an engaged filter has a program");
        let syn = frame6(SPOOFED6, 80, 0x02, 6);
        assert_eq!(run(&p, &syn, 1000), PASS_ALL);
        assert_eq!(run(&p, &syn, 1001), 0);
        assert_eq!(run(&p, &frame6(SPOOFED6, 443, 0x02, 6), u32::MAX), 0);
        // The shortest frame with the flags is judged.
        assert_eq!(run(&p, &syn[..14 + 40 + 14], u32::MAX), 0);
        // A proven IPv4 address's bytes where IPv4 keeps its source are
        // no proof for IPv6.
        let mut v4_proof = syn.clone();
        v4_proof[IP_SOURCE as usize..IP_SOURCE as usize + 4].copy_from_slice(&PROVEN.octets());
        assert_eq!(run(&p, &v4_proof, u32::MAX), 0);
        // Nor are three of a proven address's four words.
        for near in NEAR6 {
            assert_ne!(near, SPOOFED6);
            assert_eq!(run(&p, &frame6(near, 80, 0x02, 6), u32::MAX), PASS_ALL, "{near} is proven");
        }
        assert_eq!(run(&p, &syn, u32::MAX), 0, "{SPOOFED6} is not");
    }

    #[test]
    fn every_other_ipv6_frame_passes() {
        let p = program(&filter(0)).expect("an engaged filter has a program");
        let high = u32::MAX;
        assert_eq!(run(&p, &frame6(PROVEN6, 80, 0x02, 6), high), PASS_ALL, "a proven peer");
        assert_eq!(run(&p, &frame6(SPOOFED6, 22, 0x02, 6), high), PASS_ALL, "another port");
        assert_eq!(run(&p, &frame6(SPOOFED6, 80, 0x12, 6), high), PASS_ALL, "a SYN-ACK");
        assert_eq!(run(&p, &frame6(SPOOFED6, 80, 0x06, 6), high), PASS_ALL, "SYN with RST");
        assert_eq!(run(&p, &frame6(SPOOFED6, 80, 0x10, 6), high), PASS_ALL, "an ACK");
        assert_eq!(run(&p, &frame6(SPOOFED6, 80, 0x02, 17), high), PASS_ALL, "UDP");
        // Behind an extension header the program does not look: the
        // engine draws for such a SYN.
        for (next, what) in [(0, "hop-by-hop options"), (60, "destination options"), (43, "routing"), (44, "fragment")]
        {
            assert_eq!(run(&p, &frame6(SPOOFED6, 80, 0x02, next), high), PASS_ALL, "{what}");
        }
        // The IPv4 layout under the IPv6 EtherType.
        let mut v4 = frame(SPOOFED, 80, 0x02, 5, 0);
        v4[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(run(&p, &v4, high), PASS_ALL, "not TCP after the fixed header");
        // IPv6 bytes under the IPv4 EtherType.
        let mut v6 = frame6(SPOOFED6, 80, 0x02, 6);
        v6[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert_eq!(run(&p, &v6, high), PASS_ALL, "not TCP in IPv4");
    }

    #[test]
    fn ipv6_frames_too_short_for_the_loads_pass() {
        let p = program(&filter(0)).expect("an engaged filter has a program");
        let syn = frame6(SPOOFED6, 80, 0x02, 6);
        let shortest = 14 + 40 + 14;
        for len in 0..shortest {
            assert_eq!(run(&p, &syn[..len], u32::MAX), PASS_ALL, "a {len}-byte frame");
        }
        assert_eq!(run(&p, &syn[..shortest], u32::MAX), 0);
        let shed = UdpShed { ports: vec![(5302, 0)] };
        let p = program_for(&SynFilter::default(), &shed).expect("something shed");
        let datagram = datagram6(5302, 17);
        let shortest = 14 + 40 + 4;
        for len in 0..shortest {
            assert_eq!(run(&p, &datagram[..len], u32::MAX), PASS_ALL, "a {len}-byte frame");
        }
        assert_eq!(run(&p, &datagram[..shortest], u32::MAX), 0);
    }

    /// An Ethernet frame with a fixed IPv6 header whose next header is
    /// `next`, then a UDP header to `port`.
    fn datagram6(port: u16, next: u8) -> Vec<u8> {
        let mut f = frame6(SPOOFED6, port, 0, next);
        f.truncate(14 + 40 + 8 + 4);
        f
    }

    #[test]
    fn an_ipv6_datagram_to_a_shed_port_passes_only_on_a_low_draw_and_others_go_on() {
        let shed = UdpShed { ports: vec![(5301, 1000), (5302, 0), (5303, u32::MAX)] };
        for syn in [SynFilter::default(), filter(0)] {
            let p = program_for(&syn, &shed).expect("something shed");
            assert_eq!(run(&p, &datagram6(5301, 17), 1000), PASS_ALL);
            assert_eq!(run(&p, &datagram6(5301, 17), 1001), 0);
            assert_eq!(run(&p, &datagram6(5302, 17), 1), 0, "dropped with probability 1");
            assert_eq!(run(&p, &datagram6(5302, 17), 0), PASS_ALL);
            assert_eq!(run(&p, &datagram6(5303, 17), u32::MAX), PASS_ALL, "dropped with probability 0");
            assert_eq!(run(&p, &datagram6(5304, 17), u32::MAX), PASS_ALL, "another port");
            for (next, what) in [(0, "hop-by-hop options"), (60, "destination options"), (44, "fragment")] {
                assert_eq!(run(&p, &datagram6(5302, next), u32::MAX), PASS_ALL, "behind a {what} header");
            }
            assert_eq!(run(&p, &frame6(SPOOFED6, 5302, 0x10, 6), u32::MAX), PASS_ALL, "TCP to the same port");
            let side = Side { random: u32::MAX, vlan_out_of_band: true };
            assert_eq!(run_with(&p, &datagram6(5302, 17), side), PASS_ALL, "out-of-band tag");
            // The SYN part still judges what the UDP part lets go on.
            let expected = if syn.engaged { 0 } else { PASS_ALL };
            assert_eq!(run(&p, &frame6(SPOOFED6, 80, 0x02, 6), u32::MAX), expected);
        }
    }

    #[test]
    fn frames_too_short_for_the_loads_pass() {
        let p = program(&filter(0)).expect("an engaged filter has a program");
        let high = u32::MAX;
        let syn = frame(SPOOFED, 80, 0x02, 5, 0);
        // One byte short of the flags: a truncated TCP header.
        assert_eq!(run(&p, &syn[..14 + 20 + 13], high), PASS_ALL, "a truncated TCP header");
        assert_eq!(run(&p, &syn[..14 + 20 + 2], high), PASS_ALL, "half a port");
        // Shorter than an Ethernet and an IPv4 header.
        for len in [14, 20, 24, 30, 33] {
            assert_eq!(run(&p, &syn[..len], high), PASS_ALL, "a {len}-byte frame");
        }
        // A tiny first fragment: its TCP header ends before the flags.
        let tiny = frame(SPOOFED, 80, 0x02, 5, MORE_FRAGMENTS);
        assert_eq!(run(&p, &tiny[..14 + 20 + 8], high), PASS_ALL, "a tiny first fragment");
        // A header length longer than the frame: 60 bytes claimed, the
        // frame ends after 40 (the length check must not wrap).
        let long_ihl = frame(SPOOFED, 80, 0x02, 15, 0);
        assert_eq!(run(&p, &long_ihl[..40], high), PASS_ALL, "an IP header past the end");
        assert_eq!(run(&p, &long_ihl[..14 + 60 + 13], high), PASS_ALL, "options, and the flags cut off");
        assert_eq!(run(&p, &long_ihl, high), 0, "options, and the whole TCP header");
    }

    /// An Ethernet frame with an IPv4 header and a UDP header to `port`.
    fn datagram(port: u16, fragment: u16) -> Vec<u8> {
        let mut f = frame(SPOOFED, port, 0, 5, fragment);
        f[IP_PROTOCOL as usize] = 17;
        f.truncate(14 + 20 + 8 + 4);
        f
    }

    #[test]
    fn a_datagram_to_a_shed_port_passes_only_on_a_low_draw_and_others_go_on() {
        let shed = UdpShed { ports: vec![(5301, 1000), (5302, 0), (5303, u32::MAX)] };
        for syn in [SynFilter::default(), filter(0)] {
            let p = program_for(&syn, &shed).expect("something shed");
            assert_eq!(run(&p, &datagram(5301, 0), 1000), PASS_ALL);
            assert_eq!(run(&p, &datagram(5301, 0), 1001), 0);
            assert_eq!(run(&p, &datagram(5302, 0), 1), 0);
            assert_eq!(run(&p, &datagram(5302, 0), 0), PASS_ALL);
            assert_eq!(run(&p, &datagram(5302, MORE_FRAGMENTS), u32::MAX), 0, "a first fragment");
            assert_eq!(run(&p, &datagram(5302, 0x0010), u32::MAX), PASS_ALL, "a later fragment");
            assert_eq!(run(&p, &datagram(5303, 0), u32::MAX), PASS_ALL, "admitting all: not listed");
            assert_eq!(run(&p, &datagram(5304, 0), u32::MAX), PASS_ALL, "another port");
            assert_eq!(run(&p, &datagram(5302, 0)[..14 + 20 + 3], u32::MAX), PASS_ALL, "half a port");
            assert_eq!(run(&p, &datagram(5302, 0)[..30], u32::MAX), PASS_ALL, "too short");
            let mut tcp = datagram(5302, 0);
            tcp[IP_PROTOCOL as usize] = 6;
            assert_eq!(run(&p, &tcp, u32::MAX), PASS_ALL, "TCP to the same port");
            assert_eq!(
                run_with(&p, &datagram(5302, 0), Side { random: u32::MAX, vlan_out_of_band: true }),
                PASS_ALL,
                "out-of-band tag"
            );
            // The SYN part still judges what the UDP part lets go on.
            let expected = if syn.engaged { 0 } else { PASS_ALL };
            assert_eq!(run(&p, &frame(SPOOFED, 80, 0x02, 5, 0), u32::MAX), expected);
        }
        let lens = |p: Option<Vec<libc::sock_filter>>| p.map(|p| p.len());
        assert_eq!(lens(program_for(&filter(0), &UdpShed::default())), lens(program(&filter(0))), "the SYN part");
        assert!(program_for(&SynFilter::default(), &UdpShed { ports: vec![(1, u32::MAX)] }).is_none());
    }

    #[test]
    fn the_largest_shed_keeps_every_jump_in_range_and_the_kernel_accepts_it() {
        let shed = UdpShed { ports: (1..=MAX_SHED_PORTS as u16 + 5).map(|p| (p, 0)).collect() };
        let p = program_for(&largest(), &shed).expect("something shed");
        assert_eq!(p.len(), MAX_UDP_PART + MAX_PROGRAM);
        assert_eq!(run(&p, &datagram(MAX_SHED_PORTS as u16, 0), 1), 0);
        assert_eq!(run(&p, &datagram(MAX_SHED_PORTS as u16 + 1, 0), 1), PASS_ALL, "past the most listed");
        for (at, i) in p.iter().enumerate() {
            if i.code & 0x07 == JMP && i.code & 0xf0 != JA {
                assert!(at + 1 + usize::from(i.jt.max(i.jf)) < p.len(), "jump at {at} leaves the program");
            }
        }
        kernel_accepts(&p).expect("the kernel takes the largest program");
        let small = program_for(&SynFilter::default(), &UdpShed { ports: vec![(9, 7)] }).expect("shed");
        kernel_accepts(&small).expect("the kernel takes the smallest");
    }

    #[test]
    fn a_filter_that_drops_nothing_has_no_program() {
        assert!(program(&SynFilter::default()).is_none());
        assert!(program(&SynFilter { ports: Vec::new(), ..filter(0) }).is_none());
    }

    #[test]
    fn the_largest_filter_keeps_every_jump_in_range() {
        let full = largest();
        let p = program(&full).expect("an engaged filter has a program");
        assert_eq!(p.len(), MAX_PROGRAM);
        let last = MAX_LISTED as u32 - 1;
        let port = MAX_FILTER_PORTS as u16;
        assert_eq!(run(&p, &frame(Ipv4Addr::from(0x0a00_0000 + last), port, 0x02, 5, 0), u32::MAX), PASS_ALL);
        assert_eq!(run(&p, &frame(Ipv4Addr::from(0x0a00_0000 + last + 1), port, 0x02, 5, 0), 1), 0, "not listed");
        assert_eq!(run(&p, &frame(SPOOFED, port, 0x02, 5, 0), 1), 0);
        assert_eq!(run(&p, &frame(SPOOFED, port + 1, 0x02, 5, 0), 1), PASS_ALL);
        for (at, i) in p.iter().enumerate() {
            if i.code & 0x07 == JMP && i.code & 0xf0 != JA {
                assert!(at + 1 + usize::from(i.jt.max(i.jf)) < p.len(), "jump at {at} leaves the program");
            }
        }
        // The widest jump, from the first test to PASS, lands on PASS
        // (an offset past 255 would have been cut short).
        let widest = usize::from(p[1].jt);
        assert_eq!(1 + 1 + widest, MAX_PASS);
        assert!(widest <= usize::from(u8::MAX));
        assert_eq!(p[1 + 1 + widest].code, RET);
        assert_eq!(p[1 + 1 + widest].k, PASS_ALL);
        // The last proven IPv6 address listed passes, the first past the
        // list does not.
        let last6 = Ipv6Addr::from(u128::from(PROVEN6) + MAX_LISTED6 as u128 - 1);
        let next6 = Ipv6Addr::from(u128::from(PROVEN6) + MAX_LISTED6 as u128);
        assert_eq!(run(&p, &frame6(last6, port, 0x02, 6), u32::MAX), PASS_ALL);
        assert_eq!(run(&p, &frame6(next6, port, 0x02, 6), u32::MAX), 0, "not listed");
        assert_eq!(run(&p, &frame6(next6, port, 0x02, 6), 0), PASS_ALL);
    }

    /// Attaches `program` to an ordinary UDP socket (`SO_ATTACH_FILTER`,
    /// no privilege needed), where the kernel checks it as for a TAP.
    fn kernel_accepts(program: &[libc::sock_filter]) -> io::Result<()> {
        // SAFETY: plain system call with constant arguments.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        // SAFETY: `fd` was just returned by socket(2) and is owned by
        // nobody else.
        let _owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let len = u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let prog = libc::sock_fprog { len, filter: program.as_ptr().cast_mut() };
        // SAFETY: SO_ATTACH_FILTER reads one `sock_fprog` and the `len`
        // instructions it points to, all alive for the call.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&prog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    #[test]
    fn the_kernel_accepts_the_programs() {
        let smallest = SynFilter { ports: vec![80], proven: Vec::new(), proven6: Vec::new(), ..filter(0) };
        let filters = [smallest, filter(0), filter(u32::MAX), largest()];
        for f in &filters {
            let p = program(f).expect("an engaged filter has a program");
            if let Err(e) = kernel_accepts(&p) {
                panic!("the kernel refused the {}-instruction program: {e}", p.len());
            }
        }
        // The check is real: a jump past the end is refused.
        let mut bad = program(&filters[0]).expect("an engaged filter has a program");
        bad[1].jt = 200;
        assert!(kernel_accepts(&bad).is_err());
    }
}
