//! The SYN guard's filter as a classic BPF program on a TAP
//! (`TUNATTACHFILTER`): the kernel runs it in the system call of whoever
//! sends to the TAP, before the frame is queued, so a SYN it drops costs
//! the reader nothing: no read, no wake-up, no SYN-ACK.
//!
//! The program sees the Ethernet frame from its first byte (the virtio
//! header is added only when the frame is read). It passes every frame
//! but one kind: an IPv4 packet that is not a later fragment, carrying
//! TCP with SYN set and ACK and RST clear, to one of the filter's ports,
//! from an address not on its proven list. Such a SYN passes only if the
//! kernel's random number for it is at most the filter's `admit`
//! ([`nagare_core::tcp::syn_guard::SynFilter`]). A frame too short for a
//! load the program makes is dropped by the kernel; the loads past the
//! EtherType are made only for IPv4 carrying TCP, which such a frame
//! would not be.

use nagare_core::tcp::syn_guard::SynFilter;
use std::io;
use std::os::fd::RawFd;

// Classic BPF opcodes (linux/bpf_common.h, linux/filter.h).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MSH: u16 = 0xa0;
const AND: u16 = 0x50;
const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const JGT: u16 = 0x20;
const JSET: u16 = 0x40;

/// The load offset of the kernel's random number (`SKF_AD_OFF + SKF_AD_RANDOM`).
const RANDOM: u32 = (libc::SKF_AD_OFF + libc::SKF_AD_RANDOM) as u32;

// Where the program looks, from the start of the Ethernet frame.
const ETHERTYPE: u32 = 12;
const IP: u32 = 14;
const IP_PROTOCOL: u32 = IP + 9;
const IP_FRAGMENT: u32 = IP + 6;
const IP_SOURCE: u32 = IP + 12;
/// Past the IP header (whose length is in X): the destination port and
/// the flags.
const TCP_DST_PORT: u32 = IP + 2;
const TCP_FLAGS: u32 = IP + 13;

const ETHERTYPE_IPV4: u32 = 0x0800;
const PROTOCOL_TCP: u32 = 6;
const FRAGMENT_OFFSET_MASK: u32 = 0x1fff;
const SYN: u32 = 0x02;
const SYN_RST_ACK: u32 = 0x02 | 0x04 | 0x10;

/// What `ret` keeps of a passed frame: all of it.
const PASS_ALL: u32 = u32::MAX;

/// `_IOW('T', nr, struct sock_fprog)`.
const fn tun_ioctl(nr: libc::c_ulong) -> libc::c_ulong {
    (1 << 30) | ((std::mem::size_of::<libc::sock_fprog>() as libc::c_ulong) << 16) | ((b'T' as libc::c_ulong) << 8) | nr
}
const TUNATTACHFILTER: libc::c_ulong = tun_ioctl(213);
const TUNDETACHFILTER: libc::c_ulong = tun_ioctl(214);

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

/// The program for `filter`; `None` when it drops nothing (not engaged,
/// or no port).
pub fn program(filter: &SynFilter) -> Option<Vec<libc::sock_filter>> {
    if !filter.engaged || filter.ports.is_empty() {
        return None;
    }
    let ports = &filter.ports[..filter.ports.len().min(nagare_core::tcp::syn_guard::MAX_FILTER_PORTS)];
    let proven = &filter.proven[..filter.proven.len().min(nagare_core::tcp::syn_guard::MAX_PROVEN)];
    // Layout: 11 header instructions, the ports, a jump to PASS, the
    // source load, the proven addresses, the draw (load and compare),
    // then PASS and DROP.
    let source = 11 + ports.len() + 1;
    let draw = source + 1 + proven.len();
    let pass = draw + 2;
    let drop = pass + 1;
    // Every jump is forward and short: the widest spans the whole
    // program, at most 11 + 8 + 1 + 1 + 64 + 2 instructions.
    let rel = |from: usize, to: usize| -> u8 { u8::try_from(to - from - 1).unwrap_or(u8::MAX) };
    let jump = |at: usize, code: u16, k: u32, on_true: usize, on_false: usize| libc::sock_filter {
        code: JMP | code,
        jt: rel(at, on_true),
        jf: rel(at, on_false),
        k,
    };
    let mut p = Vec::with_capacity(drop + 1);
    p.push(stmt(LD | H | ABS, ETHERTYPE)); // 0
    p.push(jump(1, JEQ, ETHERTYPE_IPV4, 2, pass));
    p.push(stmt(LD | B | ABS, IP_PROTOCOL)); // 2
    p.push(jump(3, JEQ, PROTOCOL_TCP, 4, pass));
    p.push(stmt(LD | H | ABS, IP_FRAGMENT)); // 4
    p.push(jump(5, JSET, FRAGMENT_OFFSET_MASK, pass, 6));
    p.push(stmt(LDX | B | MSH, IP)); // 6: X = IP header length
    p.push(stmt(LD | B | IND, TCP_FLAGS)); // 7
    p.push(stmt(ALU | AND, SYN_RST_ACK)); // 8
    p.push(jump(9, JEQ, SYN, 10, pass));
    p.push(stmt(LD | H | IND, TCP_DST_PORT)); // 10
    for (i, port) in ports.iter().enumerate() {
        let at = 11 + i;
        p.push(jump(at, JEQ, u32::from(*port), source, at + 1));
    }
    p.push(stmt(JMP | JA, (pass - source) as u32)); // from source - 1
    p.push(stmt(LD | W | ABS, IP_SOURCE)); // source
    for (i, addr) in proven.iter().enumerate() {
        let at = source + 1 + i;
        p.push(jump(at, JEQ, u32::from(*addr), pass, at + 1));
    }
    p.push(stmt(LD | W | ABS, RANDOM)); // draw
    p.push(jump(draw + 1, JGT, filter.admit, drop, pass));
    p.push(stmt(RET, PASS_ALL)); // pass
    p.push(stmt(RET, 0)); // drop
    debug_assert_eq!(p.len(), drop + 1);
    Some(p)
}

/// Attaches `program` to the TAP open on `fd` (every queue of it),
/// replacing any filter before.
pub fn attach(fd: RawFd, program: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let prog = libc::sock_fprog { len, filter: program.as_ptr().cast_mut() };
    // SAFETY: TUNATTACHFILTER copies `len` instructions from `filter`,
    // which `program` holds for the duration of the call.
    let rc = unsafe { libc::ioctl(fd, TUNATTACHFILTER as _, &prog as *const libc::sock_fprog) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes the filter from the TAP open on `fd`.
pub fn detach(fd: RawFd) -> io::Result<()> {
    let prog = libc::sock_fprog { len: 0, filter: std::ptr::null_mut() };
    // SAFETY: TUNDETACHFILTER reads the `sock_fprog` only for its size.
    let rc = unsafe { libc::ioctl(fd, TUNDETACHFILTER as _, &prog as *const libc::sock_fprog) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// Runs a classic BPF program as the kernel does, for the opcodes
    /// [`program`] uses; a load past the frame drops it (returns 0).
    fn run(program: &[libc::sock_filter], frame: &[u8], random: u32) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut pc = 0usize;
        let load = |at: u32, size: usize| -> Option<u32> {
            if at == RANDOM && size == 4 {
                return Some(random);
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
            match i.code & 0x07 {
                c if c == LD => {
                    let at = if i.code & 0xe0 == IND { x.wrapping_add(i.k) } else { i.k };
                    match load(at, size) {
                        Some(v) => a = v,
                        None => return 0,
                    }
                }
                c if c == LDX => match load(i.k, 1) {
                    Some(v) => x = (v & 0xf) * 4,
                    None => return 0,
                },
                c if c == ALU => a &= i.k,
                c if c == JMP => {
                    let taken = match i.code & 0xf0 {
                        JA => {
                            pc += i.k as usize;
                            continue;
                        }
                        JEQ => a == i.k,
                        JGT => a > i.k,
                        JSET => a & i.k != 0,
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

    fn filter(admit: u32) -> SynFilter {
        SynFilter { generation: 1, engaged: true, ports: vec![80, 443], proven: vec![PROVEN], admit }
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
    fn a_filter_that_drops_nothing_has_no_program() {
        assert!(program(&SynFilter::default()).is_none());
        assert!(program(&SynFilter { ports: Vec::new(), ..filter(0) }).is_none());
    }

    #[test]
    fn the_largest_filter_keeps_every_jump_in_range() {
        let full = SynFilter {
            generation: 1,
            engaged: true,
            ports: (1..=nagare_core::tcp::syn_guard::MAX_FILTER_PORTS as u16).collect(),
            proven: (0..nagare_core::tcp::syn_guard::MAX_PROVEN as u32)
                .map(|i| Ipv4Addr::from(0x0a00_0000 + i))
                .collect(),
            admit: 0,
        };
        let p = program(&full).expect("an engaged filter has a program");
        let last = nagare_core::tcp::syn_guard::MAX_PROVEN as u32 - 1;
        let port = nagare_core::tcp::syn_guard::MAX_FILTER_PORTS as u16;
        assert_eq!(run(&p, &frame(Ipv4Addr::from(0x0a00_0000 + last), port, 0x02, 5, 0), u32::MAX), PASS_ALL);
        assert_eq!(run(&p, &frame(SPOOFED, port, 0x02, 5, 0), 1), 0);
        assert_eq!(run(&p, &frame(SPOOFED, port + 1, 0x02, 5, 0), 1), PASS_ALL);
        for (at, i) in p.iter().enumerate() {
            if i.code & 0x07 == JMP && i.code & 0xf0 != JA {
                assert!(at + 1 + usize::from(i.jt.max(i.jf)) < p.len(), "jump at {at} leaves the program");
            }
        }
    }
}
