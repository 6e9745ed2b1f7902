//! Drives the shim through its C ABI exactly as packetdrill does: one call
//! to `packetdrill_interface_init`, then only the function pointers in the
//! table it filled, with raw IPv4 and IPv6 packets built and parsed here
//! by hand.
#![allow(dead_code)]

use libc::{c_int, c_void, pollfd, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t, timeval};
use nagare_packetdrill::abi::PacketdrillInterface;
use nagare_packetdrill::packetdrill_interface_init;
use std::ffi::CString;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

pub const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
pub const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The shim's IPv6 defaults, packetdrill's own.
pub const LOCAL6: Ipv6Addr = Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 1);
pub const REMOTE6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const START_USECS: u64 = 1_700_000_000_000_000;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// The errno of the last failed call in this thread.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn check(r: isize) -> Result<isize, i32> {
    if r == -1 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// One loaded "shared object".
pub struct Pd {
    pub ifc: PacketdrillInterface,
}

// SAFETY: the shim's userdata is a `Shim` whose state is behind a mutex;
// packetdrill itself calls it from two threads.
unsafe impl Send for Pd {}
// SAFETY: as above: every call goes through the mutex.
unsafe impl Sync for Pd {}

pub fn sockaddr_of(a: SocketAddrV4) -> sockaddr_in {
    sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

pub fn addr_of(s: &sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)), u16::from_be(s.sin_port))
}

const SIN_LEN: socklen_t = size_of::<sockaddr_in>() as socklen_t;
pub const SIN6_LEN: socklen_t = size_of::<sockaddr_in6>() as socklen_t;

/// `a` as the kernel lays it out, in a `sockaddr_storage`, with its length.
pub fn storage_of(a: SocketAddr) -> (sockaddr_storage, socklen_t) {
    // SAFETY: all zeros is a valid sockaddr_storage.
    let mut ss: sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { *(&raw mut ss).cast::<sockaddr_in>() = sockaddr_of(v4) };
            SIN_LEN
        }
        SocketAddr::V6(v6) => {
            let sin6 = sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: 0,
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { *(&raw mut ss).cast::<sockaddr_in6>() = sin6 };
            SIN6_LEN
        }
    };
    (ss, len)
}

/// The address in `ss`, by its family.
pub fn addr_of_storage(ss: &sockaddr_storage) -> SocketAddr {
    match c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says it holds a sockaddr_in.
            SocketAddr::V4(addr_of(unsafe { &*(ss as *const sockaddr_storage).cast::<sockaddr_in>() }))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it holds a sockaddr_in6.
            let s6 = unsafe { &*(ss as *const sockaddr_storage).cast::<sockaddr_in6>() };
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(s6.sin6_addr.s6_addr), u16::from_be(s6.sin6_port), 0, 0))
        }
        f => panic!("no address of family {f}"),
    }
}

impl Pd {
    pub fn new(flags: &str) -> Pd {
        let flags = CString::new(flags).expect("no NUL in flags");
        let mut ifc = PacketdrillInterface::zeroed();
        // SAFETY: a valid C string and a writable, aligned table.
        unsafe { packetdrill_interface_init(flags.as_ptr(), &mut ifc) };
        assert!(!ifc.userdata.is_null(), "init filled the table");
        Pd { ifc }
    }

    pub fn ud(&self) -> *mut c_void {
        self.ifc.userdata
    }

    pub fn socket(&self) -> Result<c_int, i32> {
        self.socket_of(libc::AF_INET, libc::SOCK_STREAM, 0)
    }

    pub fn socket_of(&self, domain: c_int, ty: c_int, proto: c_int) -> Result<c_int, i32> {
        // SAFETY: plain integers and the userdata init gave us.
        let r = unsafe { (self.ifc.socket.unwrap())(self.ud(), domain, ty, proto) };
        check(r as isize).map(|v| v as c_int)
    }

    pub fn bind(&self, fd: c_int, a: SocketAddrV4) -> Result<(), i32> {
        let sin = sockaddr_of(a);
        // SAFETY: a live sockaddr_in and its length.
        let r = unsafe { (self.ifc.bind.unwrap())(self.ud(), fd, (&raw const sin).cast::<sockaddr>(), SIN_LEN) };
        check(r as isize).map(|_| ())
    }

    /// `bind` to an address of either family.
    pub fn bind_to(&self, fd: c_int, a: SocketAddr) -> Result<(), i32> {
        let (ss, len) = storage_of(a);
        // SAFETY: a live address and its length.
        let r = unsafe { (self.ifc.bind.unwrap())(self.ud(), fd, (&raw const ss).cast::<sockaddr>(), len) };
        check(r as isize).map(|_| ())
    }

    /// `connect` to an address of either family.
    pub fn connect_to(&self, fd: c_int, a: SocketAddr) -> Result<(), i32> {
        let (ss, len) = storage_of(a);
        // SAFETY: a live address and its length.
        let r = unsafe { (self.ifc.connect.unwrap())(self.ud(), fd, (&raw const ss).cast::<sockaddr>(), len) };
        check(r as isize).map(|_| ())
    }

    /// `accept` with room for an address of either family: the descriptor,
    /// the peer and the length the shim reported.
    pub fn accept_any(&self, fd: c_int) -> Result<(c_int, SocketAddr, socklen_t), i32> {
        // SAFETY: all zeros is a valid sockaddr_storage.
        let mut ss: sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = size_of::<sockaddr_storage>() as socklen_t;
        // SAFETY: a writable sockaddr_storage and its length.
        let r = unsafe { (self.ifc.accept.unwrap())(self.ud(), fd, (&raw mut ss).cast::<sockaddr>(), &mut len) };
        let fd = check(r as isize)? as c_int;
        Ok((fd, addr_of_storage(&ss), len))
    }

    pub fn listen(&self, fd: c_int, backlog: c_int) -> Result<(), i32> {
        // SAFETY: plain integers.
        check(unsafe { (self.ifc.listen.unwrap())(self.ud(), fd, backlog) } as isize).map(|_| ())
    }

    pub fn accept(&self, fd: c_int) -> Result<(c_int, SocketAddrV4), i32> {
        let mut sin = sockaddr_of(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let mut len = SIN_LEN;
        // SAFETY: a writable sockaddr_in and its length.
        let r = unsafe { (self.ifc.accept.unwrap())(self.ud(), fd, (&raw mut sin).cast::<sockaddr>(), &mut len) };
        let fd = check(r as isize)? as c_int;
        assert_eq!(len, SIN_LEN);
        Ok((fd, addr_of(&sin)))
    }

    pub fn connect(&self, fd: c_int, a: SocketAddrV4) -> Result<(), i32> {
        let sin = sockaddr_of(a);
        // SAFETY: a live sockaddr_in and its length.
        let r = unsafe { (self.ifc.connect.unwrap())(self.ud(), fd, (&raw const sin).cast::<sockaddr>(), SIN_LEN) };
        check(r as isize).map(|_| ())
    }

    pub fn read(&self, fd: c_int, max: usize) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; max];
        // SAFETY: a writable buffer of `max` bytes.
        let r = unsafe { (self.ifc.read.unwrap())(self.ud(), fd, buf.as_mut_ptr().cast(), max) };
        let n = check(r)? as usize;
        buf.truncate(n);
        Ok(buf)
    }

    pub fn write(&self, fd: c_int, data: &[u8]) -> Result<usize, i32> {
        // SAFETY: a readable buffer of `data.len()` bytes.
        let r = unsafe { (self.ifc.write.unwrap())(self.ud(), fd, data.as_ptr().cast(), data.len()) };
        check(r).map(|n| n as usize)
    }

    pub fn close(&self, fd: c_int) -> Result<(), i32> {
        // SAFETY: plain integers.
        check(unsafe { (self.ifc.close.unwrap())(self.ud(), fd) } as isize).map(|_| ())
    }

    pub fn shutdown(&self, fd: c_int, how: c_int) -> Result<(), i32> {
        // SAFETY: plain integers.
        check(unsafe { (self.ifc.shutdown.unwrap())(self.ud(), fd, how) } as isize).map(|_| ())
    }

    pub fn set_nonblocking(&self, fd: c_int) -> Result<(), i32> {
        let f = self.ifc.fcntl.unwrap();
        // SAFETY: fcntl called as packetdrill calls it: two and three
        // integer arguments through the variadic pointer.
        let flags = check(unsafe { f(self.ud(), fd, libc::F_GETFL) } as isize)? as c_int;
        // SAFETY: as above.
        check(unsafe { f(self.ud(), fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } as isize).map(|_| ())
    }

    pub fn get_flags(&self, fd: c_int) -> Result<c_int, i32> {
        // SAFETY: as in `set_nonblocking`.
        check(unsafe { (self.ifc.fcntl.unwrap())(self.ud(), fd, libc::F_GETFL) } as isize).map(|v| v as c_int)
    }

    pub fn setsockopt_int(&self, fd: c_int, level: c_int, name: c_int, v: c_int) -> Result<(), i32> {
        // SAFETY: a readable int and its size.
        let r = unsafe {
            (self.ifc.setsockopt.unwrap())(
                self.ud(),
                fd,
                level,
                name,
                (&raw const v).cast(),
                size_of::<c_int>() as socklen_t,
            )
        };
        check(r as isize).map(|_| ())
    }

    pub fn getsockopt_int(&self, fd: c_int, level: c_int, name: c_int) -> Result<c_int, i32> {
        let mut v: c_int = -7;
        let mut len = size_of::<c_int>() as socklen_t;
        // SAFETY: a writable int and its size.
        let r = unsafe { (self.ifc.getsockopt.unwrap())(self.ud(), fd, level, name, (&raw mut v).cast(), &mut len) };
        check(r as isize)?;
        assert_eq!(len as usize, size_of::<c_int>());
        Ok(v)
    }

    /// `poll` on one descriptor; returns (result, revents).
    pub fn poll1(&self, fd: c_int, events: i16, timeout_ms: c_int) -> Result<(c_int, i16), i32> {
        let mut p = pollfd { fd, events, revents: 0 };
        // SAFETY: one writable pollfd.
        let r = unsafe { (self.ifc.poll.unwrap())(self.ud(), &mut p, 1, timeout_ms) };
        check(r as isize).map(|n| (n as c_int, p.revents))
    }

    /// Injects a packet from the remote end (`netdev_send`).
    pub fn inject(&self, packet: &[u8]) -> Result<(), i32> {
        // SAFETY: a readable buffer of `packet.len()` bytes.
        check(unsafe { (self.ifc.netdev_send.unwrap())(self.ud(), packet.as_ptr().cast(), packet.len()) } as isize)
            .map(|_| ())
    }

    /// Sniffs the next packet the stack sent (`netdev_receive`): bytes and
    /// time; an empty vector when nothing came.
    pub fn sniff(&self) -> (Vec<u8>, i64) {
        let mut buf = vec![0u8; 65536];
        let mut count = buf.len();
        let mut at: i64 = -1;
        // SAFETY: a writable buffer, its size, and a writable time.
        let r = unsafe { (self.ifc.netdev_receive.unwrap())(self.ud(), buf.as_mut_ptr().cast(), &mut count, &mut at) };
        assert_eq!(r, 0, "netdev_receive succeeds");
        buf.truncate(count);
        (buf, at)
    }

    /// The next packet, parsed (checksums verified).
    pub fn expect(&self) -> Seg {
        let (p, at) = self.sniff();
        assert!(!p.is_empty(), "the stack sent a packet");
        let mut s = Seg::parse(&p).expect("a well-formed IPv4/TCP or IPv6/TCP packet with good checksums");
        s.at = at;
        s
    }

    pub fn now(&self) -> u64 {
        let mut tv = timeval { tv_sec: 0, tv_usec: 0 };
        // SAFETY: a writable timeval; a null timezone.
        let r = unsafe { (self.ifc.gettimeofday.unwrap())(self.ud(), &mut tv, std::ptr::null_mut()) };
        assert_eq!(r, 0);
        tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64
    }

    pub fn usleep(&self, usecs: u32) {
        // SAFETY: a plain integer.
        assert_eq!(unsafe { (self.ifc.usleep.unwrap())(self.ud(), usecs) }, 0);
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        if let Some(free) = self.ifc.free {
            // SAFETY: the userdata init gave us, freed once.
            unsafe { free(self.ud()) };
        }
    }
}

// ---- packets ------------------------------------------------------------------

fn sum16(data: &[u8], mut acc: u32) -> u32 {
    for c in data.chunks(2) {
        acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

fn octets(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// The TCP checksum over the pseudo header of either family (the two sum
/// to the same words but for the addresses' widths).
fn tcp_checksum(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
    let mut pseudo = octets(src);
    pseudo.extend_from_slice(&octets(dst));
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(segment.len() as u16).to_be_bytes());
    fold(sum16(segment, sum16(&pseudo, 0)))
}

/// A TCP segment from the remote end.
#[derive(Clone, Debug)]
pub struct Seg {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub options: Vec<u8>,
    pub payload: Vec<u8>,
    /// When the stack sent it (sniffed segments only).
    pub at: i64,
}

impl Seg {
    pub fn new(src: impl Into<SocketAddr>, dst: impl Into<SocketAddr>, seq: u32, ack: u32, flags: u8) -> Seg {
        let (src, dst) = (src.into(), dst.into());
        Seg { src, dst, seq, ack, flags, window: 65535, options: Vec::new(), payload: Vec::new(), at: 0 }
    }

    pub fn mss(mut self, mss: u16) -> Seg {
        self.options.extend_from_slice(&[2, 4]);
        self.options.extend_from_slice(&mss.to_be_bytes());
        self
    }

    pub fn data(mut self, data: &[u8]) -> Seg {
        self.payload = data.to_vec();
        self
    }

    /// The IP header (of the addresses' family) and the TCP segment,
    /// checksums filled in.
    pub fn build(&self) -> Vec<u8> {
        let mut opts = self.options.clone();
        while !opts.len().is_multiple_of(4) {
            opts.push(1); // NOP
        }
        let tcp_len = 20 + opts.len() + self.payload.len();
        let mut tcp = Vec::with_capacity(tcp_len);
        tcp.extend_from_slice(&self.src.port().to_be_bytes());
        tcp.extend_from_slice(&self.dst.port().to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.push((((20 + opts.len()) / 4) << 4) as u8);
        tcp.push(self.flags);
        tcp.extend_from_slice(&self.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(&opts);
        tcp.extend_from_slice(&self.payload);
        let c = tcp_checksum(self.src.ip(), self.dst.ip(), &tcp);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        let mut ip = match (self.src.ip(), self.dst.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
                ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
                ip.extend_from_slice(&src.octets());
                ip.extend_from_slice(&dst.octets());
                let c = fold(sum16(&ip, 0));
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                ip
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let mut ip = vec![0x60, 0, 0, 0, 0, 0, 6, 64];
                ip[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
                ip.extend_from_slice(&src.octets());
                ip.extend_from_slice(&dst.octets());
                ip
            }
            _ => panic!("a segment's two ends are of one family"),
        };
        ip.extend_from_slice(&tcp);
        ip
    }

    /// Parses an IPv4/TCP or IPv6/TCP packet (no extension headers);
    /// `None` if anything (checksums included) is wrong.
    pub fn parse(p: &[u8]) -> Option<Seg> {
        let (src_ip, dst_ip, t) = match p.first()? >> 4 {
            4 => {
                if p.len() < 40 || p[0] != 0x45 || p[9] != 6 {
                    return None;
                }
                let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
                if total != p.len() || fold(sum16(&p[..20], 0)) != 0 {
                    return None;
                }
                let src = IpAddr::V4(Ipv4Addr::new(p[12], p[13], p[14], p[15]));
                let dst = IpAddr::V4(Ipv4Addr::new(p[16], p[17], p[18], p[19]));
                (src, dst, &p[20..])
            }
            6 => {
                if p.len() < 60 || p[6] != 6 {
                    return None;
                }
                if usize::from(u16::from_be_bytes([p[4], p[5]])) != p.len() - 40 {
                    return None;
                }
                let src = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&p[8..24]).ok()?));
                let dst = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&p[24..40]).ok()?));
                (src, dst, &p[40..])
            }
            _ => return None,
        };
        if tcp_checksum(src_ip, dst_ip, t) != 0 {
            return None;
        }
        let be16 = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
        let be32 = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
        let off = usize::from(t[12] >> 4) * 4;
        if off < 20 || off > t.len() {
            return None;
        }
        Some(Seg {
            src: SocketAddr::new(src_ip, be16(0)),
            dst: SocketAddr::new(dst_ip, be16(2)),
            seq: be32(4),
            ack: be32(8),
            flags: t[13],
            window: be16(14),
            options: t[20..off].to_vec(),
            payload: t[off..].to_vec(),
            at: 0,
        })
    }

    /// The MSS option's value, if present.
    pub fn mss_option(&self) -> Option<u16> {
        let o = &self.options;
        let mut i = 0;
        while i < o.len() {
            match o[i] {
                0 => return None,
                1 => i += 1,
                kind => {
                    let len = usize::from(*o.get(i + 1)?);
                    if len < 2 {
                        return None;
                    }
                    if kind == 2 && len == 4 {
                        return Some(u16::from_be_bytes([*o.get(i + 2)?, *o.get(i + 3)?]));
                    }
                    i += len;
                }
            }
        }
        None
    }
}

/// socket/bind/listen on `LOCAL:port` with SO_REUSEADDR, as scripts begin.
pub fn listener(pd: &Pd, port: u16) -> c_int {
    let fd = pd.socket().expect("socket");
    pd.setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).expect("SO_REUSEADDR");
    pd.bind(fd, SocketAddrV4::new(LOCAL, port)).expect("bind");
    pd.listen(fd, 1).expect("listen");
    fd
}

/// Completes a passive handshake from `REMOTE:rport` to `LOCAL:lport`;
/// returns the stack's initial sequence number.
pub fn handshake(pd: &Pd, rport: u16, lport: u16, iss: u32) -> u32 {
    handshake_between(pd, SocketAddrV4::new(REMOTE, rport).into(), SocketAddrV4::new(LOCAL, lport).into(), iss)
}

/// Completes a passive handshake from `remote` to `local` (of either
/// family); returns the stack's initial sequence number.
pub fn handshake_between(pd: &Pd, remote: SocketAddr, local: SocketAddr, iss: u32) -> u32 {
    pd.inject(&Seg::new(remote, local, iss, 0, SYN).mss(1000).build()).expect("SYN in");
    let synack = pd.expect();
    assert_eq!(synack.flags, SYN | ACK);
    assert_eq!(synack.ack, iss.wrapping_add(1));
    pd.inject(&Seg::new(remote, local, iss.wrapping_add(1), synack.seq.wrapping_add(1), ACK).build()).expect("ACK in");
    synack.seq
}
