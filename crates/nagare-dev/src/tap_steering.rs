//! Receive steering for a multi-queue TAP: a small eBPF program, attached
//! with `TUNSETSTEERINGEBPF`, that puts each TCP/UDP frame sent to a local
//! address (the hash map's key 0 holds the IPv4 one; [`MAX_LOCAL6`] slots
//! of four keys each, from key 1 on, the words of IPv6 ones) on the queue
//! its destination port was given in the same map, and every other frame
//! on queue 0. An IPv4 frame is steered when it is no fragment; an IPv6
//! one when its TCP or UDP header follows the fixed header (one behind an
//! extension or fragment header goes to queue 0).
//!
//! The IPv6 slots are compared one after another, unrolled (no loop for
//! the verifier to bound), each word by one map lookup, the last word
//! first: it tells a host's addresses in one prefix apart, so a slot of
//! another address costs one lookup, and so does an empty one (its key
//! missing). The last word is also the slot's gate: it is taken out
//! first when the slot is emptied or changed and written last, so a frame
//! that finds the gate out matches nothing meanwhile. The program reads
//! each word once, the gate first, and does not read it again: a frame
//! that read the gate before a change took it out may meet the other
//! words half changed, a mix of the old and new addresses. A frame to
//! either address then misses and goes to queue 0, which takes every
//! frame; only a frame crafted for the mix matches, and it is for no
//! address of netd's, which checks the destination of a frame a client's
//! queue brings again and drops it. A slot is written only when its
//! address changes, so the others go on matching meanwhile.
//!
//! Why: a TAP copies a frame out of the kernel before user space can see
//! its headers, so the only way to have the kernel copy a frame straight
//! into the right application's shared region is to pick the queue (the
//! file) it is read from before the read. The program is assembled here by
//! hand (384 instructions), so no compiler or loader library is
//! needed; it is loaded with the `bpf` system call, which needs
//! `CAP_BPF` (root).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
/// `BPF_LD_ABS`/`BPF_LD_IND` offsets from this base are taken from the
/// network header, so the program reads the same bytes whether the frame
/// starts at its Ethernet header (a TAP's queue selection) or at its IP
/// header (`BPF_PROG_TEST_RUN`).
const SKF_NET_OFF: i32 = -0x10_0000;
/// Offset of `protocol` in `struct __sk_buff`.
const SKB_PROTOCOL: i16 = 16;

/// Ports the map holds at most (of all clients together).
pub const MAX_STEERED_PORTS: u32 = 4096;
/// IPv6 addresses frames are steered for at most (netd's link-local
/// one, configured ones and those SLAAC forms).
pub const MAX_LOCAL6: usize = 8;

/// The map's key for the local IPv4 address. No port's key is among the
/// local addresses' keys.
const LOCAL_KEY: u32 = 0;

/// The map's key of word `w` (0 the first) of the IPv6 address in slot
/// `slot`: 1 to `4 * MAX_LOCAL6`.
const fn local6_key(slot: usize, w: usize) -> u32 {
    1 + (4 * slot + w) as u32
}

/// The order a slot's words are compared and written in: the last (the
/// slot's gate) first.
const WORD_ORDER: [usize; 4] = [3, 0, 1, 2];

/// One eBPF instruction, as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: dst | (src << 4), off, imm }
}

// Opcodes used below (class | op | source).
const MOV64_REG: u8 = 0xbf;
const MOV64_IMM: u8 = 0xb7;
const AND64_IMM: u8 = 0x57;
const LSH64_IMM: u8 = 0x67;
const OR64_REG: u8 = 0x4f;
const ADD64_IMM: u8 = 0x07;
const LDX_W: u8 = 0x61;
const STX_W: u8 = 0x63;
const LD_ABS_B: u8 = 0x30;
const LD_ABS_H: u8 = 0x28;
const LD_ABS_W: u8 = 0x20;
const ST_W: u8 = 0x62;
const JNE_REG: u8 = 0x5d;
const JLT_IMM: u8 = 0xa5;
const LD_IND_H: u8 = 0x48;
const LD_IMM64: u8 = 0x18;
const JEQ_IMM: u8 = 0x15;
const JA: u8 = 0x05;
const JNE_IMM: u8 = 0x55;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;

/// A jump to the default exit, whose offset `program` fills in.
const TO_DEFAULT: i16 = i16::MIN;

/// The program: queue = map[(ip protocol << 16) | destination port] for an
/// unfragmented IPv4 TCP or UDP frame sent to the address at map[0]
/// (netd's), or an IPv6 one whose TCP or UDP header follows the fixed
/// header, sent to the address of a slot whose words are all in the map;
/// else 0. A frame too short for a header it reads ends the program with 0
/// (the kernel's rule for `LD_ABS`), so a hostile frame lands on the
/// default queue.
fn program(map_fd: i32) -> Vec<Insn> {
    let ipv4 = i32::from(0x0800u16.to_be());
    let ipv6 = i32::from(0x86ddu16.to_be());
    let d = TO_DEFAULT;
    let mut p = vec![
        insn(MOV64_REG, 6, 1, 0, 0),        // r6 = skb (LD_ABS wants it there)
        insn(LDX_W, 2, 6, SKB_PROTOCOL, 0), // r2 = skb->protocol
        insn(JEQ_IMM, 2, 0, 0, ipv4),       // IPv4: to its part (offset below)
        insn(JNE_IMM, 2, 0, d, ipv6),       // neither
    ];
    let to_ipv4 = p.len() - 2;
    // IPv6: version 6, TCP or UDP right after the fixed header.
    p.extend([
        insn(LD_ABS_B, 0, 0, 0, SKF_NET_OFF), // r0 = version | traffic class
        insn(AND64_IMM, 0, 0, 0, 0xf0),
        insn(JNE_IMM, 0, 0, d, 0x60),                  // version 6 only
        insn(LD_ABS_B, 0, 0, 0, SKF_NET_OFF + 6),      // next header
        insn(MOV64_REG, 8, 0, 0, 0),                   // r8 = protocol
        insn(JEQ_IMM, 8, 0, 1, 6),                     // TCP: skip the next
        insn(JNE_IMM, 8, 0, d, 17),                    // not UDP either
        insn(LD_ABS_H, 0, 0, 0, SKF_NET_OFF + 40 + 2), // r0 = destination port
        insn(LSH64_IMM, 8, 0, 0, 16),
        insn(OR64_REG, 8, 0, 0, 0), // r8 = the port's key
        insn(STX_W, 10, 8, -4, 0),  // on the stack
    ]);
    // A slot whose every word equals the destination's: to the port's
    // lookup; a word missing or another: to the next slot.
    let mut to_port = Vec::new();
    for slot in 0..MAX_LOCAL6 {
        let mut to_next = Vec::new();
        for w in WORD_ORDER {
            p.extend([
                insn(ST_W, 10, 0, -8, local6_key(slot, w) as i32),
                insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd), // r1 = map
                insn(0, 0, 0, 0, 0),                         // (second half)
                insn(MOV64_REG, 2, 10, 0, 0),
                insn(ADD64_IMM, 2, 0, 0, -8),
                insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),
            ]);
            to_next.push(p.len());
            p.extend([
                insn(JEQ_IMM, 0, 0, 0, 0), // the slot is empty
                insn(LDX_W, 9, 0, 0, 0),   // r9 = the word of it
                insn(LD_ABS_W, 0, 0, 0, SKF_NET_OFF + 24 + 4 * w as i32),
            ]);
            to_next.push(p.len());
            p.push(insn(JNE_REG, 0, 9, 0, 0)); // another address
        }
        to_port.push(p.len());
        p.push(insn(JA, 0, 0, 0, 0)); // to the port's lookup (offset below)
        let next = p.len();
        for at in to_next {
            p[at].off = (next - at - 1) as i16;
        }
    }
    // No slot holds the destination.
    p.push(insn(JA, 0, 0, d, 0));
    let ipv4_part = p.len();
    p.extend([
        insn(LD_ABS_B, 0, 0, 0, SKF_NET_OFF), // r0 = version | ihl
        insn(MOV64_REG, 7, 0, 0, 0),
        insn(AND64_IMM, 7, 0, 0, 0xf0),
        insn(JNE_IMM, 7, 0, d, 0x40), // version 4 only
        insn(AND64_IMM, 0, 0, 0, 0x0f),
        insn(LSH64_IMM, 0, 0, 0, 2),
        insn(MOV64_REG, 7, 0, 0, 0),               // r7 = IP header length
        insn(JLT_IMM, 7, 0, d, 20),                // shorter than an IP header
        insn(LD_ABS_H, 0, 0, 0, SKF_NET_OFF + 6),  // flags | fragment offset
        insn(AND64_IMM, 0, 0, 0, 0x3fff),          // more fragments or an offset
        insn(JNE_IMM, 0, 0, d, 0),                 // a fragment
        insn(LD_ABS_W, 0, 0, 0, SKF_NET_OFF + 16), // destination address
        insn(MOV64_REG, 9, 0, 0, 0),               // r9 = it
        insn(LD_ABS_B, 0, 0, 0, SKF_NET_OFF + 9),  // protocol
        insn(MOV64_REG, 8, 0, 0, 0),               // r8 = protocol
        insn(JEQ_IMM, 8, 0, 1, 6),                 // TCP: skip the next
        insn(JNE_IMM, 8, 0, d, 17),                // not UDP either
        insn(LD_IND_H, 0, 7, 0, SKF_NET_OFF + 2),  // r0 = destination port
        insn(LSH64_IMM, 8, 0, 0, 16),
        insn(OR64_REG, 8, 0, 0, 0),                  // r8 = the port's key
        insn(STX_W, 10, 8, -4, 0),                   // on the stack
        insn(ST_W, 10, 0, -8, LOCAL_KEY as i32),     // the local address's key
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd), // r1 = map
        insn(0, 0, 0, 0, 0),                         // (second half)
        insn(MOV64_REG, 2, 10, 0, 0),
        insn(ADD64_IMM, 2, 0, 0, -8),
        insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),
        insn(JEQ_IMM, 0, 0, d, 0), // no local address yet
        insn(LDX_W, 1, 0, 0, 0),
        insn(JNE_REG, 1, 9, d, 0), // to another address
    ]);
    let port = p.len();
    p.extend([
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        insn(MOV64_REG, 2, 10, 0, 0),
        insn(ADD64_IMM, 2, 0, 0, -4),
        insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),
        insn(JEQ_IMM, 0, 0, d, 0), // a port nobody steered
        insn(LDX_W, 0, 0, 0, 0),   // r0 = its queue
        insn(EXIT, 0, 0, 0, 0),
        insn(MOV64_IMM, 0, 0, 0, 0), // default: queue 0
        insn(EXIT, 0, 0, 0, 0),
    ]);
    p[to_ipv4].off = (ipv4_part - to_ipv4 - 1) as i16;
    for at in to_port {
        p[at].off = (port - at - 1) as i16;
    }
    let default = p.len() - 2;
    for (at, i) in p.iter_mut().enumerate() {
        if i.off == TO_DEFAULT {
            i.off = (default - at - 1) as i16;
        }
    }
    p
}

/// The key the program looks a frame up by.
fn key(proto: u8, port: u16) -> u32 {
    u32::from(proto) << 16 | u32::from(port)
}

fn bpf(cmd: libc::c_long, attr: &mut [u64]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, zero-padded `union bpf_attr` image for
    // `cmd` of the size passed; pointers inside it point to memory that
    // lives for the call.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(attr)) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn words(a: u32, b: u32) -> u64 {
    u64::from(a) | u64::from(b) << 32
}

/// The port → queue map the program reads: shared by the process that
/// loaded the program and the one that reads the queues (passed as a
/// descriptor; updating it needs no privilege).
#[derive(Debug)]
pub struct PortMap {
    fd: OwnedFd,
}

impl PortMap {
    /// The map behind descriptor `fd` (from [`PortMap::fd`] in another
    /// process).
    pub fn from_fd(fd: OwnedFd) -> PortMap {
        PortMap { fd }
    }

    /// Its descriptor, to pass on.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Frames of `proto` to local `port` go to `queue`.
    pub fn steer(&self, proto: u8, port: u16, queue: u32) -> io::Result<()> {
        self.update(key(proto, port), queue)
    }

    /// Only frames to IPv4 address `ip` (host order of its big-endian
    /// bytes) are steered; until it is set, none is.
    pub fn set_local(&self, ip: u32) -> io::Result<()> {
        self.update(LOCAL_KEY, ip)
    }

    /// Frames to IPv6 address `ip` are steered, as slot `slot` (below
    /// [`MAX_LOCAL6`]) says; `None` empties the slot. An IPv6 frame is
    /// steered only if sent to the address of a slot (none before one is
    /// set).
    pub fn set_local6(&self, slot: usize, ip: Option<[u8; 16]>) -> io::Result<()> {
        if slot >= MAX_LOCAL6 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no such IPv6 address slot"));
        }
        // The gate first: a frame that finds it out matches nothing
        // until it is written again.
        let [gate, rest @ ..] = WORD_ORDER;
        self.delete(local6_key(slot, gate))?;
        let Some(ip) = ip else {
            for w in rest {
                self.delete(local6_key(slot, w))?;
            }
            return Ok(());
        };
        let bits = u128::from_be_bytes(ip);
        let word = |w: usize| (bits >> (96 - 32 * w)) as u32;
        for w in rest {
            self.update(local6_key(slot, w), word(w))?;
        }
        self.update(local6_key(slot, gate), word(gate))
    }

    fn update(&self, k: u32, value: u32) -> io::Result<()> {
        let mut attr = [0u64; 4];
        attr[0] = self.fd.as_raw_fd() as u64;
        attr[1] = &k as *const u32 as u64;
        attr[2] = &value as *const u32 as u64;
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }

    /// Removes key `k`; one not there is no error.
    fn delete(&self, k: u32) -> io::Result<()> {
        let mut attr = [0u64; 4];
        attr[0] = self.fd.as_raw_fd() as u64;
        attr[1] = &k as *const u32 as u64;
        match bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Frames of `proto` to local `port` go to queue 0 again.
    pub fn unsteer(&self, proto: u8, port: u16) -> io::Result<()> {
        self.delete(key(proto, port))
    }
}

/// The loaded program and its port map; dropping it unloads both once no
/// TAP uses the program.
#[derive(Debug)]
pub struct PortSteering {
    map: PortMap,
    prog: OwnedFd,
}

impl PortSteering {
    /// Creates the map and loads the program. Fails without `CAP_BPF`.
    pub fn load() -> io::Result<PortSteering> {
        let mut attr = [0u64; 16];
        attr[0] = words(BPF_MAP_TYPE_HASH, 4);
        attr[1] = words(4, MAX_STEERED_PORTS + 1 + 4 * MAX_LOCAL6 as u32);
        let fd = bpf(BPF_MAP_CREATE, &mut attr)
            .map_err(|e| io::Error::new(e.kind(), format!("creating the steering map: {e}")))?;
        // SAFETY: the bpf call returned a new descriptor, owned by nobody
        // else.
        let map = PortMap { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) } };
        let insns = program(map.fd.as_raw_fd());
        let license = c"GPL";
        let load = |log: &mut [u8]| {
            let mut attr = [0u64; 16];
            attr[0] = words(BPF_PROG_TYPE_SOCKET_FILTER, insns.len() as u32);
            attr[1] = insns.as_ptr() as u64;
            attr[2] = license.as_ptr() as u64;
            if !log.is_empty() {
                attr[3] = words(1, log.len() as u32);
                attr[4] = log.as_mut_ptr() as u64;
            }
            bpf(BPF_PROG_LOAD, &mut attr)
        };
        // Without a log first (a log that outgrows its buffer fails a
        // valid load); with one only to say why a load failed.
        let fd = load(&mut []).or_else(|_| {
            let mut log = vec![0u8; 65536];
            load(&mut log).map_err(|e| {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                io::Error::new(e.kind(), format!("loading the steering program: {e}: {}", text.trim()))
            })
        })?;
        // SAFETY: as above.
        let prog = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(PortSteering { map, prog })
    }

    /// The port map.
    pub fn map(&self) -> &PortMap {
        &self.map
    }

    /// Makes the TAP whose queue `tun` is choose queues with the program.
    pub fn attach(&self, tun: BorrowedFd<'_>) -> io::Result<()> {
        let fd: libc::c_int = self.prog.as_raw_fd();
        // SAFETY: TUNSETSTEERINGEBPF reads one int (the program's
        // descriptor) through the pointer, which points to `fd`.
        let rc = unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETSTEERINGEBPF as _, &fd as *const libc::c_int) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Runs the program on `frame` (from its Ethernet header) in the
    /// kernel: the queue it picks (tests).
    pub fn queue_of(&self, frame: &[u8]) -> io::Result<u32> {
        let mut out = vec![0u8; frame.len() + 256];
        let mut attr = [0u64; 10];
        attr[0] = words(self.prog.as_raw_fd() as u32, 0);
        attr[1] = words(frame.len() as u32, out.len() as u32);
        attr[2] = frame.as_ptr() as u64;
        attr[3] = out.as_mut_ptr() as u64;
        attr[4] = words(1, 0);
        bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        // The kernel writes the program's return value after the fd.
        Ok((attr[0] >> 32) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program() {
        let p = program(3);
        for (at, i) in p.iter().enumerate() {
            if matches!(i.code, JEQ_IMM | JNE_IMM | JNE_REG | JLT_IMM) {
                let to = at as i64 + 1 + i64::from(i.off);
                assert!(to > at as i64 && (to as usize) < p.len(), "jump at {at} to {to}");
            }
        }
        for (at, i) in p.iter().enumerate().filter(|(_, i)| i.code == JA) {
            let to = at as i64 + 1 + i64::from(i.off);
            assert!(to > at as i64 && (to as usize) < p.len(), "jump at {at} to {to}");
        }
        assert_eq!(p.len(), 384, "the module's doc says so");
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        assert_eq!(p[p.len() - 2].code, MOV64_IMM);
        assert!(p.iter().all(|i| i.off != TO_DEFAULT));
    }

    #[test]
    fn keys_keep_protocols_apart() {
        assert_ne!(key(6, 80), key(17, 80));
        assert_eq!(key(17, 0x1234), 0x11_1234);
        // Keys 0 to 32 hold the local addresses, each one: no port's key
        // is among them.
        let mut locals: Vec<u32> = (0..MAX_LOCAL6).flat_map(|slot| (0..4).map(move |w| local6_key(slot, w))).collect();
        locals.push(LOCAL_KEY);
        locals.sort_unstable();
        locals.dedup();
        assert_eq!(locals, (0..=4 * MAX_LOCAL6 as u32).collect::<Vec<_>>());
        for proto in [6, 17] {
            assert!(key(proto, 0) > 4 * MAX_LOCAL6 as u32);
        }
    }
}
