//! The request/completion protocol between an application and netd, carried
//! in `nagare-ipc` descriptors (64 bytes, one cache line).
//!
//! A request descriptor:
//!
//! | ipc field | meaning |
//! |---|---|
//! | `kind` | op (low 16 bits), flags (high 16 bits) |
//! | `flags` | socket id (0: none) |
//! | `id` | request id, echoed in the completion |
//! | `buffer`, `offset`, `len` | the one buffer piece (`NO_BUFFER`: none) |
//! | `status` | 0 |
//! | `aux[0..4]` | op arguments (addresses, ports, backlog); unused ones 0 |
//!
//! A completion has the same shape: the op and socket of its request, the
//! request id, `status` 0 or a negative errno, the request's buffer handed
//! back (with `len` the bytes in it for a receive), `aux[0]` the result
//! (a new socket id, bytes taken) and `aux[1]` an address.
//!
//! Every field of a request is checked by [`Request::decode`]: an unknown op,
//! unknown flag, a socket id where none belongs (or none where one must be),
//! a buffer where none belongs, a nonzero status, or a nonzero unused aux
//! word is refused with a [`ProtoError`]. Buffer ownership and extent are
//! checked against netd's own table (`nagare_ipc::Pool::take`).

pub mod records;

use nagare_ipc::{Descriptor, NO_BUFFER};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Where netd listens, and clients look, unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/tmp/nagare-netd.sock";

/// The socket where netd watches the descriptors of shared sockets
/// ([`Op::Share`]): the rendezvous socket's path with `.share` added. A
/// process connects a shared socket's placeholder descriptor there and
/// sends the token (8 bytes, little-endian); netd keeps the socket open
/// while that connection is, that is while any process holds the
/// descriptor.
pub fn share_watch_path(rendezvous: &std::path::Path) -> std::path::PathBuf {
    let mut p = rendezvous.as_os_str().to_os_string();
    p.push(".share");
    std::path::PathBuf::from(p)
}

/// Request flag: fail with `EAGAIN` instead of waiting.
pub const NONBLOCK: u16 = 1;
/// Request flag, `SENDTO` only: time the send path. `aux[TRACE_TIME]`
/// holds the client's `CLOCK_MONOTONIC` time in ns when it posted the
/// request; the completion's `aux[1]` and `aux[2]` carry the stage times
/// (see [`SendStages`]).
pub const TRACE: u16 = 2;
/// The aux word of a traced request's post time.
pub const TRACE_TIME: usize = 2;
/// Request flag, `SEND` and `SENDTO`: lend the buffer to the stack
/// instead of having it copied. The request completes when the stack no
/// longer holds the buffer: a datagram once it is on the device (after ARP
/// resolution, if the next hop needs it); a `SEND` waits until the whole
/// buffer fits in the send buffer and completes when its bytes are
/// acknowledged (or the connection is gone: the next call reports that).
pub const LEND: u16 = 4;
/// Request flag, with `LEND` only: complete as soon as the stack has taken
/// the buffer (a datagram queued, a stream's bytes in its send buffer), as
/// a socket's `send` returns, instead of when the stack lets go of it. The
/// buffer comes back later in a second completion of the same request id,
/// which carries the piece; a request the stack did not take (it failed,
/// or netd copied the bytes) completes once, with its buffer.
pub const COMPLETE_ON_ACCEPT: u16 = 8;
/// Request flag, `RECVFROM` only: as many datagrams as the buffer holds,
/// packed as records ([`records`]); the completion says so with
/// [`RECORDS`] in `aux[2]`. netd may still complete one with a single
/// datagram in the classic form (`aux[2]` 0), as when the datagram
/// already lies in a buffer of the client's region and is handed over in
/// place.
pub const BATCH: u16 = 16;
/// Request flag, `SEND` with `LEND` only: the buffer holds the client
/// library's own copy of the bytes (a `write`), not a buffer the
/// application lent, so netd may copy them instead: one of at most
/// [`SHORT_SEND`] bytes that fits in the send buffer goes in copied and
/// completes at once, with its buffer, rather than when the peer
/// acknowledges it.
pub const COPY_SHORT: u16 = 32;
/// The longest `SEND` netd copies under [`COPY_SHORT`]: such bytes cost
/// nothing to copy (and coalesce in the send buffer with the stream's
/// other short ones), while a lent buffer stays out of its client's pool
/// until the peer acknowledges it. A server's replies of a few bytes on
/// hundreds of connections would hold hundreds of buffers, and leave its
/// client none to keep receives posted with.
pub const SHORT_SEND: u32 = 2048;
/// Every flag a request may carry.
pub const KNOWN_FLAGS: u16 = NONBLOCK | TRACE | LEND | COMPLETE_ON_ACCEPT | BATCH | COPY_SHORT;
/// `aux[2]` of a `RECVFROM` completion whose buffer holds records:
/// `aux[0]` is their number.
pub const RECORDS: u64 = 1;
/// Largest listen backlog.
pub const MAX_BACKLOG: u64 = 4096;

/// Operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Op {
    /// UDP socket bound to `aux[0]` (address; port 0: ephemeral).
    UdpBind = 1,
    /// Send the buffer's bytes to `aux[0]` from UDP socket `socket`.
    SendTo = 2,
    /// Receive one datagram into the buffer (at most `len` bytes); the
    /// result is the datagram's whole length, the piece's `len` what fit,
    /// and its sender in `aux[1..4]` as [`encode_sender`] gives it (an
    /// IPv4 one in `aux[1]` alone, as [`encode_addr`] gives it). With
    /// [`BATCH`], as many as fit, as records. `aux[0]`: as for [`Op::Recv`].
    RecvFrom = 3,
    /// TCP listener on `aux[0]` with backlog `aux[1]`.
    Listen = 4,
    /// Take the next connection of listener `socket`. The completion:
    /// `aux[0]` its socket id and local address ([`encode_accepted`]),
    /// `aux[1]` its peer, `aux[2]` and `aux[3]` its send and receive buffer
    /// sizes.
    Accept = 5,
    /// TCP connection to `aux[0]` from local port `aux[1]` (0: ephemeral).
    /// The completion: `aux[0]` its socket id, `aux[1]` its local
    /// address, `aux[2]` and `aux[3]` its send and receive buffer sizes.
    Connect = 6,
    /// Queue the buffer's bytes on connection `socket`. The completion's
    /// `aux[2]` is the connection's send buffer when they went in
    /// (autotuning grows it; 0 when not given, as in the first completion
    /// of a `COMPLETE_ON_ACCEPT` send), which the client keeps its queued
    /// sends within.
    Send = 7,
    /// Receive up to `len` bytes of connection `socket` into the buffer.
    /// The completion's `aux[3]` is the connection's receive buffer now
    /// (autotuning grows it), which the client keeps posted for receives.
    /// `aux[0]`: the payload bytes the client has taken so far out of
    /// what the socket's receives delivered; netd shows
    /// what it delivered beyond that as the bytes waiting in the client
    /// (`nagare stat`), and trusts it for nothing else.
    Recv = 8,
    /// Close one side or both of connection `socket`: `aux[0]` is
    /// [`SHUT_READ`], [`SHUT_WRITE`] or both.
    Shutdown = 9,
    /// Close socket `socket` (any kind); with `aux[0]` = [`CLOSE_RESET`],
    /// a connection is reset instead of ended with a FIN (its reader left
    /// data unread, as a socket closed with data in its receive queue).
    Close = 10,
    /// ICMP echo socket with identifier `aux[0]` (a ping socket), for
    /// ICMP and ICMPv6 echoes alike.
    EchoOpen = 11,
    /// Echo request with the buffer's bytes as data to address `aux[0]`
    /// (port 0), sequence number `aux[1]`.
    EchoSend = 12,
    /// The next reply or error of echo socket `socket`. The completion:
    /// `aux[0]` the echo data length, `aux[1]` who sent it (port 0),
    /// `aux[2]` see [`EchoWord`]; for an ICMPv6 reply `aux[2]` has
    /// [`ECHO_FROM6`] too, and its sender's address is `aux[1]` (high
    /// half) and `aux[3]` (low half).
    EchoRecv = 13,
    /// Nothing: completes at once (what a request's round trip costs).
    Nop = 14,
    /// netd's state as text (see `docs/netd.md`) written into the buffer;
    /// `aux[0]` the bytes written.
    Stat = 15,
    /// Readiness of several sockets, as `poll(2)`: the buffer holds
    /// [`PollEntry`]s; netd fills in their `ready` words and completes once
    /// any is nonzero (or at once with [`NONBLOCK`], or at the time limit
    /// with `EAGAIN`); `aux[0]` the entries ready.
    Poll = 16,
    /// Set option `aux[0]` ([`SockOption`]) of connection `socket` to
    /// `aux[1]`; the completion's `aux[0]` is the value in force (a buffer
    /// shrinks no lower than what it holds).
    SetOption = 17,
    /// The value of option `aux[0]` ([`SockOption`]) of connection
    /// `socket`, in the completion's `aux[0]`.
    GetOption = 18,
    /// Let another client of the same user take socket `socket` too (an
    /// established TCP connection or a listener; netd may refuse others),
    /// as a child after `fork` holds its parent's sockets: the completion's `aux[0]` is the
    /// socket's token (the same on every share), which [`Op::Adopt`] names.
    /// This client's receives and accepts waiting on the socket complete
    /// first, with `ECANCELED`: what arrives later is for whichever holder
    /// asks next.
    Share = 19,
    /// Hold the socket whose token is `aux[0]` (from [`Op::Share`], by a
    /// client of the same user), under a new id. The completion: `aux[0]`
    /// the id, `aux[1]` the local address, `aux[2]` the peer (0 if none),
    /// `aux[3]` see [`AdoptWord`]. The socket closes once every holder
    /// closed it or left.
    Adopt = 20,
    /// The buffer's bytes were taken from shared connection `socket` and
    /// not read: they are read first, before the connection's own, by
    /// the next receive of any holder.
    GiveBack = 21,
    /// TCP listener on an IPv6 address ([`encode_addr6`]: `aux[0]` and
    /// `aux[1]`, its port in `aux[2]` bits 0..16) with [`V6_ONLY`] in
    /// `aux[2]` or not, and backlog `aux[3]`. On `::` without
    /// [`V6_ONLY`] it takes IPv4 connections to its port too. The
    /// completion as [`Op::Listen`]'s.
    Listen6 = 22,
    /// TCP connection to an IPv6 address ([`encode_addr6`]: `aux[0]` and
    /// `aux[1]`, its port in `aux[2]` bits 0..16) from local port `aux[2]`
    /// bits 16..32 (0: ephemeral); an IPv4-mapped address is its IPv4
    /// address. The completion as [`Op::Connect`]'s, its local address
    /// [`ADDR_ELSEWHERE`] when it is IPv6.
    Connect6 = 23,
    /// An address of socket `socket`: its own with `aux[0]` =
    /// [`NAME_LOCAL`], its peer's with [`NAME_PEER`]. The completion
    /// carries it as [`encode_addr6`] does (an IPv4 one mapped,
    /// `::ffff:a.b.c.d`): `aux[0]`, `aux[1]` and the port in `aux[2]`.
    Name = 24,
    /// UDP socket bound to an IPv6 address ([`encode_addr6`]: `aux[0]`
    /// and `aux[1]`, its port in `aux[2]` bits 0..16, 0: ephemeral) with
    /// [`V6_ONLY`] in `aux[2]` or not. On `::` without [`V6_ONLY`] it
    /// holds its port for IPv4 too and receives IPv4 datagrams, whose
    /// senders are IPv4 ([`encode_sender`]; the client reports them
    /// IPv4-mapped), and sends to IPv4-mapped destinations over IPv4. The
    /// completion as [`Op::UdpBind`]'s, its address [`ADDR_ELSEWHERE`]
    /// ([`Op::Name`] gives it).
    UdpBind6 = 25,
    /// Send the buffer's bytes to an IPv6 address ([`encode_addr6`]:
    /// `aux[0]`, `aux[1]` and the port in `aux[2]` bits 0..16) from UDP
    /// socket `socket` (of IPv6; an IPv4-mapped address from a dual-stack
    /// one goes over IPv4). [`LEND`] as with [`Op::SendTo`]; no [`TRACE`].
    SendTo6 = 26,
    /// ICMPv6 echo request with the buffer's bytes as data from echo
    /// socket `socket` to the IPv6 address in `aux[0]` and `aux[1]`
    /// ([`encode_addr6`]'s halves), sequence number `aux[2]`.
    EchoSend6 = 27,
    /// The process of pid `aux[0]` holds the session from now on: a child
    /// after `fork` that took the session its parent made for it. Allowed
    /// for a child of the session's process, of the same user (`EPERM`
    /// otherwise); its nice value then sets the session's priority, and
    /// netd's report names it.
    Pid = 28,
    /// Connect UDP socket `socket` to a peer ([`encode_addr6`]: `aux[0]`,
    /// `aux[1]` and the port in `aux[2]` bits 0..16; an IPv4 peer
    /// IPv4-mapped), or, all three 0, to none (as `AF_UNSPEC`): from then
    /// on an ICMP error about a datagram to the peer fails the socket's
    /// next send or receive, as on Linux, and an error about another
    /// destination, or any while the socket has no peer, is dropped.
    /// Sends still name their destination.
    UdpConnect = 29,
    /// Take shared socket `socket` back as this client's alone, as before
    /// it was shared: granted (done with 0) when this client is its only
    /// holder and at most one watched descriptor for it is still open
    /// (this process's own); its token then names nothing, its watch
    /// ends, and bytes given back ([`Op::GiveBack`]) that still wait are
    /// this client's next receives' first. Refused with `EBUSY` otherwise,
    /// and `EINVAL` for a socket that is not shared; a refusal changes
    /// nothing.
    Reclaim = 30,
}

/// An [`Op::EchoRecv`] completion's `aux[2]` bit: the reply came over
/// ICMPv6, its sender's address in `aux[1]` and `aux[3]`.
pub const ECHO_FROM6: u64 = 1 << 32;

/// A datagram's sender word (a [`Op::RecvFrom`] completion's `aux[1]`, a
/// record's first eight bytes) with this bit: an IPv6 sender, its port in
/// bits 0..16, its address in the two words after it (high half first;
/// a record's 16 bytes after its header). An IPv4 sender's word
/// ([`encode_addr`]) never has it.
pub const SENDER6: u64 = 1 << 63;

/// A datagram's sender as three words: an IPv4 one as [`encode_addr`]
/// gives it and two zeros, an IPv6 one [`SENDER6`] with its port, then the
/// address's halves.
pub fn encode_sender(a: SocketAddr) -> [u64; 3] {
    match a {
        SocketAddr::V4(v4) => [encode_addr(v4), 0, 0],
        SocketAddr::V6(v6) => {
            let bits = v6.ip().to_bits();
            [SENDER6 | u64::from(v6.port()), (bits >> 64) as u64, bits as u64]
        }
    }
}

/// The inverse of [`encode_sender`]; an IPv4 word with bits above its port
/// set, or an IPv6 one with bits between [`SENDER6`] and its port, is
/// refused.
pub fn decode_sender(w: [u64; 3]) -> Result<SocketAddr, ProtoError> {
    if w[0] & SENDER6 == 0 {
        return decode_addr(w[0]).map(SocketAddr::V4);
    }
    if w[0] & !(SENDER6 | 0xffff) != 0 {
        return Err(ProtoError::BadAddress);
    }
    let ip = Ipv6Addr::from_bits(u128::from(w[1]) << 64 | u128::from(w[2]));
    Ok(SocketAddr::V6(SocketAddrV6::new(ip, w[0] as u16, 0, 0)))
}

/// [`Op::Listen6`]'s and [`Op::UdpBind6`]'s `aux[2]` bit: IPv6 only
/// (`IPV6_V6ONLY`).
pub const V6_ONLY: u64 = 1 << 16;

/// [`Op::Name`]: the socket's own address.
pub const NAME_LOCAL: u64 = 0;
/// [`Op::Name`]: its peer's.
pub const NAME_PEER: u64 = 1;

/// An address word of a completion ([`Op::Accept`]'s local address and
/// peer, [`Op::Connect`]'s local address, [`Op::Adopt`]'s) for an
/// address that does not fit one word: an IPv6 one, which [`Op::Name`]
/// gives.
pub const ADDR_ELSEWHERE: u64 = 1 << 63;

/// [`Op::Adopt`]'s `aux[3]`: the socket's kind in bits 0..8
/// ([`AdoptWord::STREAM`], [`AdoptWord::LISTENER`], [`AdoptWord::DATAGRAM`])
/// and, for a stream, its receive buffer's size above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdoptWord {
    /// The kind.
    pub kind: u8,
    /// A stream's receive buffer, in bytes (0 for the others).
    pub recv_buffer: u64,
}

impl AdoptWord {
    /// A TCP connection.
    pub const STREAM: u8 = 1;
    /// A TCP listener.
    pub const LISTENER: u8 = 2;
    /// A UDP socket.
    pub const DATAGRAM: u8 = 3;

    /// The word.
    pub fn encode(self) -> u64 {
        u64::from(self.kind) | self.recv_buffer.min(MAX_SOCKET_BUFFER) << 8
    }

    /// The kind and buffer a word says; `None` for an unknown kind.
    pub fn decode(w: u64) -> Option<AdoptWord> {
        let kind = w as u8;
        matches!(kind, AdoptWord::STREAM | AdoptWord::LISTENER | AdoptWord::DATAGRAM)
            .then_some(AdoptWord { kind, recv_buffer: w >> 8 })
    }
}

/// [`Op::Shutdown`]: the receiving side (data queued and arriving later
/// is dropped, reads see the end of the stream).
pub const SHUT_READ: u64 = 1;
/// [`Op::Shutdown`]: the sending side (a FIN after what is queued).
pub const SHUT_WRITE: u64 = 2;

/// [`Op::Close`]: reset the connection rather than end it.
pub const CLOSE_RESET: u64 = 1;

/// Largest send or receive buffer an option may ask for (as Linux's
/// default `wmem_max`/`rmem_max` bound `SO_SNDBUF`/`SO_RCVBUF`, but
/// higher: 64 MiB).
pub const MAX_SOCKET_BUFFER: u64 = 64 << 20;

/// The most stream bytes a client keeps posted ahead for one socket's
/// receives, with those arrived and not read: the most it gives back to
/// netd when it shares the socket ([`Op::GiveBack`]), which netd keeps
/// for the next holder.
pub const MAX_RECV_AHEAD: u64 = 4 << 20;

/// The options of [`Op::SetOption`] and [`Op::GetOption`], and what each
/// value means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SockOption {
    /// `SO_SNDBUF`: the send buffer in bytes, 1 to [`MAX_SOCKET_BUFFER`].
    SendBuffer = 1,
    /// `SO_RCVBUF`: the receive buffer in bytes, 1 to
    /// [`MAX_SOCKET_BUFFER`]; it bounds the window offered.
    RecvBuffer = 2,
    /// `TCP_USER_TIMEOUT`: how long sent data may stay unacknowledged
    /// before the connection fails with `ETIMEDOUT`, in ms (up to
    /// `u32::MAX`); 0 for the retransmission count alone.
    UserTimeout = 3,
    /// `TCP_NODELAY`: 1 sends small segments at once, 0 runs Nagle.
    NoDelay = 4,
    /// The socket's priority on the kernel's scale, 100 (highest, nice
    /// -20) to 139 (lowest, nice 19), overriding the one netd reads from
    /// the client's nice value, as `SO_PRIORITY` is set per socket; 0
    /// goes back to the client's. Any kind of socket takes it.
    Priority = 5,
    /// `SO_KEEPALIVE` with `TCP_KEEPIDLE`: seconds a connection is idle
    /// before keepalive probes start, 1 to [`MAX_KEEPALIVE_SECS`]; 0 sends
    /// none.
    KeepIdle = 6,
    /// `TCP_KEEPINTVL`: seconds between probes, 1 to
    /// [`MAX_KEEPALIVE_SECS`].
    KeepInterval = 7,
    /// `TCP_KEEPCNT`: unanswered probes before the connection fails with
    /// `ETIMEDOUT`, 1 to [`MAX_KEEPALIVE_PROBES`].
    KeepCount = 8,
    /// `SO_LINGER` with a zero time: 1 makes a close reset the connection,
    /// what was queued dropped (an explicit close, and the close of a
    /// client that went away), 0 closes with a FIN after it.
    ResetOnClose = 9,
}

/// The most seconds of [`SockOption::KeepIdle`] and
/// [`SockOption::KeepInterval`] (Linux's `MAX_TCP_KEEPIDLE`).
pub const MAX_KEEPALIVE_SECS: u64 = 32767;

/// The most probes of [`SockOption::KeepCount`] (Linux's
/// `MAX_TCP_KEEPCNT`).
pub const MAX_KEEPALIVE_PROBES: u64 = 127;

impl SockOption {
    /// The option with this number.
    pub fn from_u64(v: u64) -> Option<SockOption> {
        Some(match v {
            1 => SockOption::SendBuffer,
            2 => SockOption::RecvBuffer,
            3 => SockOption::UserTimeout,
            4 => SockOption::NoDelay,
            5 => SockOption::Priority,
            6 => SockOption::KeepIdle,
            7 => SockOption::KeepInterval,
            8 => SockOption::KeepCount,
            9 => SockOption::ResetOnClose,
            _ => return None,
        })
    }

    /// Whether `v` is a value this option may be set to.
    pub fn admits(self, v: u64) -> bool {
        match self {
            SockOption::SendBuffer | SockOption::RecvBuffer => (1..=MAX_SOCKET_BUFFER).contains(&v),
            SockOption::UserTimeout => v <= u64::from(u32::MAX),
            SockOption::NoDelay | SockOption::ResetOnClose => v <= 1,
            SockOption::Priority => v == 0 || (100..=139).contains(&v),
            SockOption::KeepIdle => v <= MAX_KEEPALIVE_SECS,
            SockOption::KeepInterval => (1..=MAX_KEEPALIVE_SECS).contains(&v),
            SockOption::KeepCount => (1..=MAX_KEEPALIVE_PROBES).contains(&v),
        }
    }
}

/// Readiness: a receive (or accept) would not wait.
pub const READABLE: u16 = 1;
/// Readiness: a send would not wait.
pub const WRITABLE: u16 = 2;
/// Readiness, always reported: the connection is over (closed, reset,
/// refused, timed out).
pub const CLOSED: u16 = 4;
/// Readiness, always reported: no such socket.
pub const INVALID: u16 = 8;
/// In a waiting [`Op::Poll`]'s `interest`, on a listener (one several
/// clients hold, where it matters): the listener is readable to this
/// entry only with a wake-up of the client's own, one per connection
/// waiting to be accepted, as the kernel wakes one of the epoll sets
/// watching a socket with `EPOLLEXCLUSIVE` (`docs/netd.md`, *Exclusive
/// wake-ups*). Ignored on other sockets and by a poll that does not wait.
pub const EXCLUSIVE: u16 = 16;
/// Most entries in one [`Op::Poll`].
pub const MAX_POLL: u32 = 1024;

/// One socket of an [`Op::Poll`]: 8 bytes, little-endian, in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PollEntry {
    /// The socket id.
    pub socket: u32,
    /// What the caller waits for ([`READABLE`], [`WRITABLE`]), and how
    /// ([`EXCLUSIVE`]).
    pub interest: u16,
    /// What is ready (filled in by netd).
    pub ready: u16,
}

impl PollEntry {
    /// Bytes per entry.
    pub const SIZE: usize = 8;

    /// The entry's bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.socket.to_le_bytes());
        b[4..6].copy_from_slice(&self.interest.to_le_bytes());
        b[6..].copy_from_slice(&self.ready.to_le_bytes());
        b
    }

    /// The entry in `b` (8 bytes).
    pub fn from_bytes(b: [u8; 8]) -> PollEntry {
        PollEntry {
            socket: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            interest: u16::from_le_bytes([b[4], b[5]]),
            ready: u16::from_le_bytes([b[6], b[7]]),
        }
    }
}

/// The aux word of a request that may wait ([`Op::can_wait`]) holding its
/// time limit in microseconds (0: none); when it runs out the request fails
/// with `EAGAIN`, as a `std::net` read with a timeout does.
pub const WAIT_LIMIT: usize = 3;
/// Longest time limit: one hour.
pub const MAX_WAIT_MICROS: u64 = 3_600_000_000;

/// What an echo socket received, packed into `aux[2]` of an
/// [`Op::EchoRecv`] completion: sequence number in bits 0..16, TTL (a
/// reply) or ICMP code (an error) in bits 16..24, the kind in bits 24..32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoWord {
    /// An echo reply.
    Reply {
        /// Its sequence number.
        seq: u16,
        /// Its IP TTL.
        ttl: u8,
    },
    /// Destination unreachable, quoting our request.
    Unreachable {
        /// The request's sequence number.
        seq: u16,
        /// The ICMP code.
        code: u8,
    },
    /// Time exceeded, quoting our request.
    TimeExceeded {
        /// The request's sequence number.
        seq: u16,
        /// The ICMP code.
        code: u8,
    },
}

impl EchoWord {
    /// The aux word.
    pub fn encode(self) -> u64 {
        let (kind, seq, byte) = match self {
            EchoWord::Reply { seq, ttl } => (1u64, seq, ttl),
            EchoWord::Unreachable { seq, code } => (2, seq, code),
            EchoWord::TimeExceeded { seq, code } => (3, seq, code),
        };
        u64::from(seq) | u64::from(byte) << 16 | kind << 24
    }

    /// The inverse of [`EchoWord::encode`]; anything else is refused.
    pub fn decode(w: u64) -> Result<EchoWord, ProtoError> {
        let seq = w as u16;
        let byte = (w >> 16) as u8;
        match w >> 24 {
            1 => Ok(EchoWord::Reply { seq, ttl: byte }),
            2 => Ok(EchoWord::Unreachable { seq, code: byte }),
            3 => Ok(EchoWord::TimeExceeded { seq, code: byte }),
            _ => Err(ProtoError::BadArgument),
        }
    }
}

impl Op {
    /// The op with this number.
    pub fn from_u16(v: u16) -> Option<Op> {
        Some(match v {
            1 => Op::UdpBind,
            2 => Op::SendTo,
            3 => Op::RecvFrom,
            4 => Op::Listen,
            5 => Op::Accept,
            6 => Op::Connect,
            7 => Op::Send,
            8 => Op::Recv,
            9 => Op::Shutdown,
            10 => Op::Close,
            11 => Op::EchoOpen,
            12 => Op::EchoSend,
            13 => Op::EchoRecv,
            14 => Op::Nop,
            15 => Op::Stat,
            16 => Op::Poll,
            17 => Op::SetOption,
            18 => Op::GetOption,
            19 => Op::Share,
            20 => Op::Adopt,
            21 => Op::GiveBack,
            22 => Op::Listen6,
            23 => Op::Connect6,
            24 => Op::Name,
            25 => Op::UdpBind6,
            26 => Op::SendTo6,
            27 => Op::EchoSend6,
            28 => Op::Pid,
            29 => Op::UdpConnect,
            30 => Op::Reclaim,
            _ => return None,
        })
    }

    /// Whether the request names an existing socket.
    pub fn needs_socket(self) -> bool {
        !matches!(
            self,
            Op::UdpBind
                | Op::UdpBind6
                | Op::Listen
                | Op::Listen6
                | Op::Connect
                | Op::Connect6
                | Op::EchoOpen
                | Op::Nop
                | Op::Stat
                | Op::Poll
                | Op::Adopt
                | Op::Pid
        )
    }

    /// Whether the request may wait (and so may carry a time limit in
    /// `aux[WAIT_LIMIT]`).
    pub fn can_wait(self) -> bool {
        matches!(
            self,
            Op::Accept | Op::Connect | Op::Connect6 | Op::Send | Op::Recv | Op::RecvFrom | Op::EchoRecv | Op::Poll
        )
    }

    /// Whether the request carries a buffer (data to send, or room to receive).
    pub fn needs_buffer(self) -> bool {
        matches!(
            self,
            Op::SendTo
                | Op::SendTo6
                | Op::RecvFrom
                | Op::Send
                | Op::Recv
                | Op::EchoSend
                | Op::EchoSend6
                | Op::Stat
                | Op::Poll
                | Op::GiveBack
        )
    }
}

/// One buffer piece: a buffer of the client's region and the extent in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Buffer index.
    pub buffer: u32,
    /// Offset of the data.
    pub offset: u32,
    /// Length of the data (for a receive: the room).
    pub len: u32,
}

/// Why a request descriptor was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// Unknown op number.
    BadOp(u16),
    /// A flag bit this protocol does not define.
    BadFlags(u16),
    /// A socket id where the op takes none, or none where it needs one.
    BadSocket,
    /// A buffer where the op takes none, none where it needs one, or
    /// offset/len without a buffer.
    BadBuffer,
    /// The status word of a request must be 0.
    BadStatus,
    /// An address word with bits above the port set.
    BadAddress,
    /// An argument out of range, or an unused aux word not 0.
    BadArgument,
}

impl ProtoError {
    /// The errno the completion carries.
    pub fn errno(self) -> i32 {
        match self {
            ProtoError::BadOp(_) => libc::EOPNOTSUPP,
            ProtoError::BadSocket => libc::EBADF,
            _ => libc::EINVAL,
        }
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::BadOp(op) => write!(f, "unknown op {op}"),
            ProtoError::BadFlags(fl) => write!(f, "unknown flags {fl:#x}"),
            ProtoError::BadSocket => f.write_str("socket id where none belongs or missing"),
            ProtoError::BadBuffer => f.write_str("buffer fields do not fit the op"),
            ProtoError::BadStatus => f.write_str("nonzero status in a request"),
            ProtoError::BadAddress => f.write_str("malformed address word"),
            ProtoError::BadArgument => f.write_str("argument out of range"),
        }
    }
}

impl std::error::Error for ProtoError {}

/// An IPv4 socket address as one aux word: address in bits 0..32, port in
/// bits 32..48, the rest 0.
pub fn encode_addr(a: SocketAddrV4) -> u64 {
    u64::from(a.ip().to_bits()) | u64::from(a.port()) << 32
}

/// The inverse of [`encode_addr`]; bits above the port must be 0.
pub fn decode_addr(w: u64) -> Result<SocketAddrV4, ProtoError> {
    if w >> 48 != 0 {
        return Err(ProtoError::BadAddress);
    }
    Ok(SocketAddrV4::new(Ipv4Addr::from_bits(w as u32), (w >> 32) as u16))
}

/// An IPv6 socket address as three aux words: the address's 16 bytes
/// big-endian in two (high half first), the port in the third's bits
/// 0..16 (the third's other bits are the op's).
pub fn encode_addr6(a: SocketAddrV6) -> [u64; 3] {
    let bits = a.ip().to_bits();
    [(bits >> 64) as u64, bits as u64, u64::from(a.port())]
}

/// The inverse of [`encode_addr6`], reading the port from the third
/// word's low 16 bits (flow label and scope are 0).
pub fn decode_addr6(w: [u64; 3]) -> SocketAddrV6 {
    let ip = Ipv6Addr::from_bits(u128::from(w[0]) << 64 | u128::from(w[1]));
    SocketAddrV6::new(ip, w[2] as u16, 0, 0)
}

/// [`Op::Accept`]'s result word: the connection's socket id in bits 0..32
/// and, in bits 32..64, its local address, the one its peer reached (the
/// listener's port is the client's already; its address may be 0.0.0.0).
pub fn encode_accepted(id: u32, local: Ipv4Addr) -> u64 {
    u64::from(id) | u64::from(local.to_bits()) << 32
}

/// The inverse of [`encode_accepted`]: the socket id and local address.
pub fn decode_accepted(w: u64) -> (u32, Ipv4Addr) {
    (w as u32, Ipv4Addr::from_bits((w >> 32) as u32))
}

/// A request, decoded and checked (except the buffer's ownership, which
/// only netd's table can say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Operation.
    pub op: Op,
    /// Flags ([`NONBLOCK`]).
    pub flags: u16,
    /// Socket id (0: none).
    pub socket: u32,
    /// Request id.
    pub id: u64,
    /// The buffer piece.
    pub piece: Option<Piece>,
    /// Arguments.
    pub aux: [u64; 4],
}

impl Request {
    /// A request with no socket, buffer or arguments.
    pub fn new(op: Op, id: u64) -> Request {
        Request { op, flags: 0, socket: 0, id, piece: None, aux: [0; 4] }
    }

    /// The descriptor for the ring.
    pub fn encode(&self) -> Descriptor {
        let piece = self.piece.unwrap_or(Piece { buffer: NO_BUFFER, offset: 0, len: 0 });
        Descriptor {
            kind: u32::from(self.op as u16) | u32::from(self.flags) << 16,
            flags: self.socket,
            id: self.id,
            buffer: piece.buffer,
            offset: piece.offset,
            len: piece.len,
            status: 0,
            aux: self.aux,
        }
    }

    /// Decodes and checks every field of a descriptor read from a client.
    pub fn decode(d: &Descriptor) -> Result<Request, ProtoError> {
        let raw_op = d.kind as u16;
        let flags = (d.kind >> 16) as u16;
        let op = Op::from_u16(raw_op).ok_or(ProtoError::BadOp(raw_op))?;
        if flags & !KNOWN_FLAGS != 0
            || (flags & TRACE != 0 && op != Op::SendTo)
            || (flags & LEND != 0 && !matches!(op, Op::Send | Op::SendTo | Op::SendTo6))
            || (flags & COMPLETE_ON_ACCEPT != 0 && (flags & LEND == 0 || flags & TRACE != 0))
            || (flags & BATCH != 0 && op != Op::RecvFrom)
            || (flags & COPY_SHORT != 0 && (flags & LEND == 0 || op != Op::Send))
        {
            return Err(ProtoError::BadFlags(flags));
        }
        if d.status != 0 {
            return Err(ProtoError::BadStatus);
        }
        if op.needs_socket() != (d.flags != 0) {
            return Err(ProtoError::BadSocket);
        }
        let piece = if d.buffer == NO_BUFFER {
            if op.needs_buffer() || d.offset != 0 || d.len != 0 {
                return Err(ProtoError::BadBuffer);
            }
            None
        } else {
            if !op.needs_buffer() {
                return Err(ProtoError::BadBuffer);
            }
            Some(Piece { buffer: d.buffer, offset: d.offset, len: d.len })
        };
        if op == Op::Poll
            && (d.len == 0
                || !d.len.is_multiple_of(PollEntry::SIZE as u32)
                || d.len / PollEntry::SIZE as u32 > MAX_POLL)
        {
            return Err(ProtoError::BadBuffer);
        }
        // How many aux words the op uses; the rest must be 0.
        let used = match op {
            Op::UdpBind | Op::SendTo => {
                decode_addr(d.aux[0])?;
                1
            }
            Op::Listen => {
                decode_addr(d.aux[0])?;
                if d.aux[1] == 0 || d.aux[1] > MAX_BACKLOG {
                    return Err(ProtoError::BadArgument);
                }
                2
            }
            Op::Connect => {
                decode_addr(d.aux[0])?;
                if d.aux[1] > u64::from(u16::MAX) {
                    return Err(ProtoError::BadArgument);
                }
                2
            }
            Op::Listen6 => {
                if d.aux[2] & !(V6_ONLY | 0xffff) != 0 || d.aux[3] == 0 || d.aux[3] > MAX_BACKLOG {
                    return Err(ProtoError::BadArgument);
                }
                4
            }
            Op::Connect6 => {
                if d.aux[2] > 0xffff_ffff || d.aux[2] & 0xffff == 0 {
                    return Err(ProtoError::BadArgument);
                }
                3
            }
            Op::UdpBind6 => {
                if d.aux[2] & !(V6_ONLY | 0xffff) != 0 {
                    return Err(ProtoError::BadArgument);
                }
                3
            }
            Op::SendTo6 | Op::UdpConnect => {
                if d.aux[2] > 0xffff {
                    return Err(ProtoError::BadArgument);
                }
                3
            }
            Op::Name => {
                if d.aux[0] > NAME_PEER {
                    return Err(ProtoError::BadArgument);
                }
                1
            }
            Op::EchoOpen => {
                if d.aux[0] > u64::from(u16::MAX) {
                    return Err(ProtoError::BadArgument);
                }
                1
            }
            Op::EchoSend => {
                if decode_addr(d.aux[0])?.port() != 0 || d.aux[1] > u64::from(u16::MAX) {
                    return Err(ProtoError::BadArgument);
                }
                2
            }
            Op::EchoSend6 => {
                if d.aux[2] > u64::from(u16::MAX) {
                    return Err(ProtoError::BadArgument);
                }
                3
            }
            Op::Shutdown => {
                if d.aux[0] == 0 || d.aux[0] & !(SHUT_READ | SHUT_WRITE) != 0 {
                    return Err(ProtoError::BadArgument);
                }
                1
            }
            Op::SetOption => {
                let option = SockOption::from_u64(d.aux[0]).ok_or(ProtoError::BadArgument)?;
                if !option.admits(d.aux[1]) {
                    return Err(ProtoError::BadArgument);
                }
                2
            }
            Op::GetOption => {
                SockOption::from_u64(d.aux[0]).ok_or(ProtoError::BadArgument)?;
                1
            }
            Op::Close => {
                if d.aux[0] & !CLOSE_RESET != 0 {
                    return Err(ProtoError::BadArgument);
                }
                1
            }
            Op::Adopt => {
                if d.aux[0] == 0 {
                    return Err(ProtoError::BadArgument);
                }
                1
            }
            Op::Recv | Op::RecvFrom => 1,
            Op::Pid => {
                if d.aux[0] == 0 || d.aux[0] > i32::MAX as u64 {
                    return Err(ProtoError::BadArgument);
                }
                1
            }
            _ => 0,
        };
        let mut aux = d.aux;
        if flags & TRACE != 0 {
            if aux[TRACE_TIME] == 0 {
                return Err(ProtoError::BadArgument);
            }
            aux[TRACE_TIME] = 0;
        }
        let (limit, unused) = if op.can_wait() { (aux[WAIT_LIMIT], &aux[used..WAIT_LIMIT]) } else { (0, &aux[used..]) };
        if limit > MAX_WAIT_MICROS || unused.iter().any(|&w| w != 0) {
            return Err(ProtoError::BadArgument);
        }
        Ok(Request { op, flags, socket: d.flags, id: d.id, piece, aux: d.aux })
    }

    /// The client's post time of a traced request (ns, `CLOCK_MONOTONIC`).
    pub fn trace_time(&self) -> Option<u64> {
        (self.flags & TRACE != 0).then_some(self.aux[TRACE_TIME])
    }

    /// Whether the caller lends its buffer (`LEND`).
    pub fn lends(&self) -> bool {
        self.flags & LEND != 0
    }

    /// Whether a lent buffer's request completes when the stack takes it
    /// (`COMPLETE_ON_ACCEPT`), its buffer coming back later.
    pub fn completes_on_accept(&self) -> bool {
        self.flags & (LEND | COMPLETE_ON_ACCEPT) == LEND | COMPLETE_ON_ACCEPT
    }

    /// Whether netd may copy a short lent send's bytes (`COPY_SHORT`).
    pub fn copies_short(&self) -> bool {
        self.flags & (LEND | COPY_SHORT) == LEND | COPY_SHORT
    }

    /// Whether the caller asked not to wait.
    pub fn nonblocking(&self) -> bool {
        self.flags & NONBLOCK != 0
    }

    /// How long the request may wait, if it set a limit.
    pub fn wait_limit(&self) -> Option<std::time::Duration> {
        let micros = if self.op.can_wait() { self.aux[WAIT_LIMIT] } else { 0 };
        (micros != 0).then(|| std::time::Duration::from_micros(micros))
    }
}

/// Where a traced send spent its time, in ns, stage by stage (AnT's send
/// path): each is the time from the end of the one before. Packed three to
/// a word, 21 bits each (at most about 2.1 ms; longer ones saturate), in
/// `aux[1]` (netd's stages) and `aux[2]` (the driver's) of the completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendStages {
    /// The request reaching netd (client post to netd taking it).
    pub to_netd: u64,
    /// The engine: UDP, IP and Ethernet, until the frame is queued.
    pub protocol: u64,
    /// The frame's descriptors posted to the driver (or, with no driver,
    /// the device written by netd itself).
    pub to_driver_post: u64,
    /// The descriptors reaching the driver.
    pub to_driver: u64,
    /// The device write.
    pub device: u64,
    /// The completion posted to the application.
    pub return_post: u64,
}

const STAGE_BITS: u32 = 21;
const STAGE_MAX: u64 = (1 << STAGE_BITS) - 1;

/// Three stage times in one word (saturating at about 2.1 ms each).
pub fn pack_stages(a: u64, b: u64, c: u64) -> u64 {
    a.min(STAGE_MAX) | b.min(STAGE_MAX) << STAGE_BITS | c.min(STAGE_MAX) << (2 * STAGE_BITS)
}

/// The three stage times of a word [`pack_stages`] made.
pub fn unpack_stages(w: u64) -> [u64; 3] {
    [w & STAGE_MAX, (w >> STAGE_BITS) & STAGE_MAX, (w >> (2 * STAGE_BITS)) & STAGE_MAX]
}

impl SendStages {
    /// The stages a traced send's completion carries.
    pub fn of(c: &Completion) -> SendStages {
        let [to_netd, protocol, to_driver_post] = unpack_stages(c.aux[1]);
        let [to_driver, device, return_post] = unpack_stages(c.aux[2]);
        SendStages { to_netd, protocol, to_driver_post, to_driver, device, return_post }
    }
}

/// A completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The op number of the request (raw: a refused request's op may be
    /// unknown).
    pub op: u16,
    /// The request's socket id.
    pub socket: u32,
    /// The request id.
    pub id: u64,
    /// 0, or a negative errno.
    pub status: i32,
    /// The request's buffer, handed back (`len`: bytes received, for a
    /// receive).
    pub piece: Option<Piece>,
    /// `aux[0]`: the result; `aux[1]`: an address.
    pub aux: [u64; 4],
}

impl Completion {
    /// A successful completion of `req` with result `value`.
    pub fn ok(req: &Request, value: u64) -> Completion {
        Completion { op: req.op as u16, socket: req.socket, id: req.id, status: 0, piece: None, aux: [value, 0, 0, 0] }
    }

    /// A failed completion of `req`.
    pub fn err(req: &Request, errno: i32) -> Completion {
        Completion { op: req.op as u16, socket: req.socket, id: req.id, status: -errno, piece: None, aux: [0; 4] }
    }

    /// A failed completion of a descriptor that did not decode.
    pub fn refused(d: &Descriptor, errno: i32) -> Completion {
        Completion { op: d.kind as u16, socket: d.flags, id: d.id, status: -errno, piece: None, aux: [0; 4] }
    }

    /// The descriptor for the ring.
    pub fn encode(&self) -> Descriptor {
        let piece = self.piece.unwrap_or(Piece { buffer: NO_BUFFER, offset: 0, len: 0 });
        Descriptor {
            kind: u32::from(self.op),
            flags: self.socket,
            id: self.id,
            buffer: piece.buffer,
            offset: piece.offset,
            len: piece.len,
            status: self.status,
            aux: self.aux,
        }
    }

    /// Decodes a completion (on the client side; netd is trusted, but the
    /// fields are still checked for shape).
    pub fn decode(d: &Descriptor) -> Result<Completion, ProtoError> {
        if d.kind >> 16 != 0 {
            return Err(ProtoError::BadFlags((d.kind >> 16) as u16));
        }
        // Zero or an errno, negated (errno values stay below 4096).
        if d.status > 0 || d.status < -4095 {
            return Err(ProtoError::BadStatus);
        }
        let piece =
            if d.buffer == NO_BUFFER { None } else { Some(Piece { buffer: d.buffer, offset: d.offset, len: d.len }) };
        Ok(Completion { op: d.kind as u16, socket: d.flags, id: d.id, status: d.status, piece, aux: d.aux })
    }

    /// The result, or the errno.
    pub fn result(&self) -> Result<u64, i32> {
        if self.status < 0 {
            Err(-self.status)
        } else {
            Ok(self.aux[0])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7)
    }

    #[test]
    fn an_accepted_word_carries_the_socket_id_and_the_local_address() {
        let w = encode_accepted(0xdead_beef, Ipv4Addr::LOCALHOST);
        assert_eq!(w as u32, 0xdead_beef, "a reader of the id alone still finds it");
        assert_eq!(decode_accepted(w), (0xdead_beef, Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn sharing_requests_are_checked_and_adopt_words_round_trip() {
        let mut share = Request::new(Op::Share, 7);
        share.socket = 3;
        assert_eq!(Request::decode(&share.encode()), Ok(share));
        let mut adopt = Request::new(Op::Adopt, 8);
        adopt.aux[0] = 0x1234;
        assert_eq!(Request::decode(&adopt.encode()), Ok(adopt));
        adopt.aux[0] = 0;
        assert_eq!(Request::decode(&adopt.encode()), Err(ProtoError::BadArgument), "no token");
        adopt.aux[0] = 1;
        adopt.socket = 3;
        assert_eq!(Request::decode(&adopt.encode()), Err(ProtoError::BadSocket), "an adopt names no socket");
        let mut back = Request::new(Op::GiveBack, 9);
        back.socket = 3;
        assert_eq!(Request::decode(&back.encode()), Err(ProtoError::BadBuffer), "a give-back brings bytes");
        back.piece = Some(Piece { buffer: 1, offset: 0, len: 10 });
        assert_eq!(Request::decode(&back.encode()), Ok(back));
        let mut reclaim = Request::new(Op::Reclaim, 11);
        reclaim.socket = 3;
        assert_eq!(Request::decode(&reclaim.encode()), Ok(reclaim));
        reclaim.aux[0] = 1;
        assert_eq!(Request::decode(&reclaim.encode()), Err(ProtoError::BadArgument), "a reclaim takes no argument");
        reclaim.aux[0] = 0;
        reclaim.socket = 0;
        assert_eq!(Request::decode(&reclaim.encode()), Err(ProtoError::BadSocket), "a reclaim names its socket");
        let mut pid = Request::new(Op::Pid, 10);
        pid.aux[0] = 4321;
        assert_eq!(Request::decode(&pid.encode()), Ok(pid));
        for bad in [0, 1 << 31] {
            pid.aux[0] = bad;
            assert_eq!(Request::decode(&pid.encode()), Err(ProtoError::BadArgument), "pid {bad}");
        }
        let w = AdoptWord { kind: AdoptWord::STREAM, recv_buffer: 262_144 };
        assert_eq!(AdoptWord::decode(w.encode()), Some(w));
        assert_eq!(AdoptWord::decode(0), None);
        assert_eq!(AdoptWord::decode(9), None);
    }

    #[test]
    fn ipv6_requests_are_checked_and_their_addresses_round_trip() {
        let six = SocketAddrV6::new("fd00::1:2".parse().unwrap(), 443, 0, 0);
        let words = encode_addr6(six);
        assert_eq!(decode_addr6(words), six);
        let mut listen = Request::new(Op::Listen6, 1);
        listen.aux = [words[0], words[1], words[2] | V6_ONLY, 64];
        assert_eq!(Request::decode(&listen.encode()), Ok(listen));
        for (aux2, backlog) in [(words[2] | 1 << 17, 64), (words[2], 0), (words[2], MAX_BACKLOG + 1)] {
            listen.aux[2] = aux2;
            listen.aux[3] = backlog;
            assert_eq!(Request::decode(&listen.encode()), Err(ProtoError::BadArgument), "{aux2:#x} {backlog}");
        }
        let mut connect = Request::new(Op::Connect6, 2);
        connect.aux = [words[0], words[1], words[2] | 40_000 << 16, 1_000_000];
        assert_eq!(Request::decode(&connect.encode()), Ok(connect), "a time limit in aux[3]");
        connect.aux[2] = 40_000 << 16;
        assert_eq!(Request::decode(&connect.encode()), Err(ProtoError::BadArgument), "no port");
        connect.aux[2] = words[2] | 1 << 32;
        assert_eq!(Request::decode(&connect.encode()), Err(ProtoError::BadArgument));
        connect.aux[2] = words[2];
        connect.socket = 4;
        assert_eq!(Request::decode(&connect.encode()), Err(ProtoError::BadSocket));
        let mut name = Request::new(Op::Name, 3);
        name.socket = 4;
        name.aux[0] = NAME_PEER;
        assert_eq!(Request::decode(&name.encode()), Ok(name));
        name.aux[0] = 2;
        assert_eq!(Request::decode(&name.encode()), Err(ProtoError::BadArgument));
        name.aux[0] = NAME_LOCAL;
        name.socket = 0;
        assert_eq!(Request::decode(&name.encode()), Err(ProtoError::BadSocket));
    }

    #[test]
    fn ipv6_datagram_requests_are_checked_and_senders_round_trip() {
        let six = SocketAddrV6::new("fd00::1:2".parse().unwrap(), 5353, 0, 0);
        let words = encode_addr6(six);
        let mut bind = Request::new(Op::UdpBind6, 1);
        bind.aux = [words[0], words[1], words[2] | V6_ONLY, 0];
        assert_eq!(Request::decode(&bind.encode()), Ok(bind));
        bind.aux[2] = words[2] | 1 << 17;
        assert_eq!(Request::decode(&bind.encode()), Err(ProtoError::BadArgument));
        bind.aux[2] = words[2];
        bind.aux[3] = 1;
        assert_eq!(Request::decode(&bind.encode()), Err(ProtoError::BadArgument), "an unused word set");
        bind.aux[3] = 0;
        bind.socket = 3;
        assert_eq!(Request::decode(&bind.encode()), Err(ProtoError::BadSocket));
        let mut send = Request::new(Op::SendTo6, 2);
        send.socket = 3;
        send.flags = LEND | COMPLETE_ON_ACCEPT;
        send.piece = Some(Piece { buffer: 1, offset: 0, len: 10 });
        send.aux = [words[0], words[1], words[2], 0];
        assert_eq!(Request::decode(&send.encode()), Ok(send));
        send.aux[2] = words[2] | V6_ONLY;
        assert_eq!(Request::decode(&send.encode()), Err(ProtoError::BadArgument));
        send.aux[2] = words[2];
        send.flags = TRACE;
        assert_eq!(Request::decode(&send.encode()), Err(ProtoError::BadFlags(TRACE)), "traced sends are IPv4's");
        send.flags = 0;
        send.piece = None;
        assert_eq!(Request::decode(&send.encode()), Err(ProtoError::BadBuffer));

        let mut echo = Request::new(Op::EchoSend6, 3);
        echo.socket = 3;
        echo.piece = Some(Piece { buffer: 1, offset: 0, len: 10 });
        echo.aux = [words[0], words[1], 65535, 0];
        assert_eq!(Request::decode(&echo.encode()), Ok(echo));
        echo.aux[2] = 65536;
        assert_eq!(Request::decode(&echo.encode()), Err(ProtoError::BadArgument), "a sequence past 16 bits");
        echo.aux[2] = 1;
        echo.aux[3] = 1;
        assert_eq!(Request::decode(&echo.encode()), Err(ProtoError::BadArgument), "an unused word set");

        // Senders: IPv4 ones in one word as before, IPv6 ones in three.
        let four: SocketAddr = "10.0.0.9:53".parse().unwrap();
        let SocketAddr::V4(four_v4) = four else { unreachable!() };
        assert_eq!(encode_sender(four), [encode_addr(four_v4), 0, 0]);
        for a in [four, SocketAddr::V6(six), "[::ffff:10.0.0.9]:1".parse().unwrap(), "[::]:0".parse().unwrap()] {
            assert_eq!(decode_sender(encode_sender(a)), Ok(a), "{a}");
        }
        assert_eq!(encode_sender(SocketAddr::V6(six))[0], SENDER6 | 5353);
        assert_eq!(decode_sender([SENDER6 | 1 << 16, 0, 0]), Err(ProtoError::BadAddress));
        assert_eq!(decode_sender([1 << 50, 0, 0]), Err(ProtoError::BadAddress));
    }

    #[test]
    fn requests_round_trip() {
        let mut r = Request::new(Op::SendTo, 42);
        r.socket = 3;
        r.flags = NONBLOCK;
        r.piece = Some(Piece { buffer: 5, offset: 16, len: 100 });
        r.aux[0] = encode_addr(addr());
        assert_eq!(Request::decode(&r.encode()), Ok(r));
        let mut l = Request::new(Op::Listen, 1);
        l.aux = [encode_addr(addr()), 128, 0, 0];
        assert_eq!(Request::decode(&l.encode()), Ok(l));
    }

    #[test]
    fn every_field_is_checked() {
        let good = {
            let mut r = Request::new(Op::Send, 9);
            r.socket = 1;
            r.piece = Some(Piece { buffer: 0, offset: 0, len: 10 });
            r.encode()
        };
        assert!(Request::decode(&good).is_ok());
        let cases: Vec<(Descriptor, ProtoError)> = vec![
            (Descriptor { kind: 0, ..good }, ProtoError::BadOp(0)),
            (Descriptor { kind: 99, ..good }, ProtoError::BadOp(99)),
            (Descriptor { kind: 7 | 2 << 16, ..good }, ProtoError::BadFlags(2)),
            (Descriptor { status: -1, ..good }, ProtoError::BadStatus),
            (Descriptor { flags: 0, ..good }, ProtoError::BadSocket),
            (Descriptor { buffer: NO_BUFFER, ..good }, ProtoError::BadBuffer),
            (Descriptor { aux: [0, 0, 1, 0], ..good }, ProtoError::BadArgument),
            (Descriptor { aux: [0, 0, 0, MAX_WAIT_MICROS + 1], ..good }, ProtoError::BadArgument),
        ];
        for (d, e) in cases {
            assert_eq!(Request::decode(&d), Err(e), "{d:?}");
        }
        let mut bind = Request::new(Op::UdpBind, 1).encode();
        bind.aux[0] = 1 << 50;
        assert_eq!(Request::decode(&bind), Err(ProtoError::BadAddress));
        bind.aux[0] = 0;
        bind.flags = 4;
        assert_eq!(Request::decode(&bind), Err(ProtoError::BadSocket));
        let mut close = Request::new(Op::Close, 1);
        close.socket = 2;
        let mut d = close.encode();
        d.buffer = 3;
        assert_eq!(Request::decode(&d), Err(ProtoError::BadBuffer));
        d.buffer = NO_BUFFER;
        d.len = 3;
        assert_eq!(Request::decode(&d), Err(ProtoError::BadBuffer));
        let mut listen = Request::new(Op::Listen, 1).encode();
        listen.aux[1] = MAX_BACKLOG + 1;
        assert_eq!(Request::decode(&listen), Err(ProtoError::BadArgument));
        let mut conn = Request::new(Op::Connect, 1).encode();
        conn.aux[1] = 70000;
        assert_eq!(Request::decode(&conn), Err(ProtoError::BadArgument));
        let mut open = Request::new(Op::EchoOpen, 1).encode();
        open.aux[0] = 0x1_0000;
        assert_eq!(Request::decode(&open), Err(ProtoError::BadArgument));
        let mut send = Request::new(Op::EchoSend, 1);
        send.socket = 1;
        send.piece = Some(Piece { buffer: 0, offset: 0, len: 56 });
        send.aux[0] = encode_addr(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 0));
        assert!(Request::decode(&send.encode()).is_ok());
        send.aux[0] = encode_addr(addr());
        assert_eq!(Request::decode(&send.encode()), Err(ProtoError::BadArgument), "a port on an echo");
        let mut recv = Request::new(Op::EchoRecv, 1);
        recv.socket = 1;
        recv.aux[WAIT_LIMIT] = MAX_WAIT_MICROS;
        assert_eq!(
            Request::decode(&recv.encode()).map(|r| r.wait_limit()),
            Ok(Some(std::time::Duration::from_secs(3600)))
        );
        recv.aux[WAIT_LIMIT] = MAX_WAIT_MICROS + 1;
        assert_eq!(Request::decode(&recv.encode()), Err(ProtoError::BadArgument));
        recv.aux[WAIT_LIMIT] = 0;
        recv.aux[2] = 1;
        assert_eq!(Request::decode(&recv.encode()), Err(ProtoError::BadArgument), "an unused word below the limit");
        let mut close = Request::new(Op::Close, 1);
        close.socket = 1;
        close.aux[WAIT_LIMIT] = 5;
        assert_eq!(Request::decode(&close.encode()), Err(ProtoError::BadArgument), "a limit on an op that never waits");
        close.aux[WAIT_LIMIT] = 0;
        close.aux[0] = CLOSE_RESET;
        assert_eq!(Request::decode(&close.encode()).map(|r| r.aux[0]), Ok(CLOSE_RESET), "a close that resets");
        close.aux[0] = 2;
        assert_eq!(Request::decode(&close.encode()), Err(ProtoError::BadArgument), "an unknown close flag");
    }

    #[test]
    fn options_and_shutdowns_carry_checked_arguments() {
        let mut set = Request::new(Op::SetOption, 1);
        set.socket = 3;
        for (option, value, ok) in [
            (SockOption::SendBuffer as u64, 4096, true),
            (SockOption::RecvBuffer as u64, MAX_SOCKET_BUFFER, true),
            (SockOption::RecvBuffer as u64, MAX_SOCKET_BUFFER + 1, false),
            (SockOption::SendBuffer as u64, 0, false),
            (SockOption::UserTimeout as u64, 0, true),
            (SockOption::UserTimeout as u64, u64::from(u32::MAX) + 1, false),
            (SockOption::NoDelay as u64, 1, true),
            (SockOption::NoDelay as u64, 2, false),
            (SockOption::Priority as u64, 0, true),
            (SockOption::Priority as u64, 100, true),
            (SockOption::Priority as u64, 139, true),
            (SockOption::Priority as u64, 99, false),
            (SockOption::Priority as u64, 140, false),
            (SockOption::KeepIdle as u64, 0, true),
            (SockOption::KeepIdle as u64, MAX_KEEPALIVE_SECS, true),
            (SockOption::KeepIdle as u64, MAX_KEEPALIVE_SECS + 1, false),
            (SockOption::KeepInterval as u64, 0, false),
            (SockOption::KeepInterval as u64, 75, true),
            (SockOption::KeepCount as u64, 0, false),
            (SockOption::KeepCount as u64, MAX_KEEPALIVE_PROBES, true),
            (SockOption::KeepCount as u64, MAX_KEEPALIVE_PROBES + 1, false),
            (SockOption::ResetOnClose as u64, 1, true),
            (SockOption::ResetOnClose as u64, 2, false),
            (0, 1, false),
            (10, 1, false),
        ] {
            set.aux = [option, value, 0, 0];
            assert_eq!(Request::decode(&set.encode()).is_ok(), ok, "option {option} = {value}");
        }
        let mut get = Request::new(Op::GetOption, 2);
        get.socket = 3;
        get.aux[0] = SockOption::UserTimeout as u64;
        assert_eq!(Request::decode(&get.encode()), Ok(get));
        get.aux[1] = 7;
        assert_eq!(Request::decode(&get.encode()), Err(ProtoError::BadArgument), "a value on a get");
        let mut shut = Request::new(Op::Shutdown, 3);
        shut.socket = 3;
        for (how, ok) in [(SHUT_READ, true), (SHUT_WRITE, true), (SHUT_READ | SHUT_WRITE, true), (0, false), (4, false)]
        {
            shut.aux[0] = how;
            assert_eq!(Request::decode(&shut.encode()).is_ok(), ok, "shutdown {how}");
        }
    }

    #[test]
    fn poll_entries_round_trip_and_bad_lists_are_refused() {
        let e = PollEntry { socket: 0xdead_beef, interest: READABLE | WRITABLE, ready: CLOSED };
        assert_eq!(PollEntry::from_bytes(e.to_bytes()), e);
        let mut p = Request::new(Op::Poll, 1);
        for (len, ok) in [(8, true), (8 * MAX_POLL, true), (0, false), (12, false), (8 * (MAX_POLL + 1), false)] {
            p.piece = Some(Piece { buffer: 0, offset: 0, len });
            assert_eq!(Request::decode(&p.encode()).is_ok(), ok, "{len} bytes");
        }
    }

    #[test]
    fn echo_words_round_trip_and_junk_is_refused() {
        for w in [
            EchoWord::Reply { seq: 7, ttl: 64 },
            EchoWord::Unreachable { seq: 0xffff, code: 3 },
            EchoWord::TimeExceeded { seq: 0, code: 1 },
        ] {
            assert_eq!(EchoWord::decode(w.encode()), Ok(w));
        }
        assert!(EchoWord::decode(0).is_err());
        assert!(EchoWord::decode(4 << 24).is_err());
        assert!(EchoWord::decode(1 << 40).is_err());
    }

    #[test]
    fn random_descriptors_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..100_000 {
            let w: Vec<u64> = (0..8).map(|_| next()).collect();
            let d = Descriptor {
                kind: (w[0] as u32) & 0x1_000f,
                flags: w[0].wrapping_shr(40) as u32 & 3,
                id: w[1],
                buffer: if w[2] & 1 == 0 { NO_BUFFER } else { w[2] as u32 >> 1 },
                offset: (w[2] >> 40) as u32 & 1,
                len: w[3] as u32,
                status: 0,
                aux: [w[4] & 0xffff_ffff_ffff, w[5] & 0xff, 0, 0],
            };
            if let Ok(r) = Request::decode(&d) {
                assert_eq!(Request::decode(&r.encode()), Ok(r));
            }
        }
    }

    #[test]
    fn traced_sends_carry_a_time_and_only_sends_may_be_traced() {
        let mut send = Request::new(Op::SendTo, 1);
        send.socket = 3;
        send.piece = Some(Piece { buffer: 0, offset: 0, len: 10 });
        send.aux[0] = encode_addr(addr());
        send.flags = TRACE;
        assert!(matches!(Request::decode(&send.encode()), Err(ProtoError::BadArgument)), "a trace needs its time");
        send.aux[TRACE_TIME] = 12345;
        let back = Request::decode(&send.encode()).unwrap();
        assert_eq!(back.trace_time(), Some(12345));
        let mut nop = Request::new(Op::Nop, 2);
        nop.flags = TRACE;
        assert!(matches!(Request::decode(&nop.encode()), Err(ProtoError::BadFlags(_))));
        let mut lend = Request::new(Op::Send, 3);
        lend.socket = 3;
        lend.piece = Some(Piece { buffer: 1, offset: 0, len: 10 });
        lend.flags = LEND;
        assert!(Request::decode(&lend.encode()).unwrap().lends());
        send.flags = LEND;
        send.aux[TRACE_TIME] = 0;
        assert!(Request::decode(&send.encode()).unwrap().lends());
        nop.flags = LEND;
        assert!(matches!(Request::decode(&nop.encode()), Err(ProtoError::BadFlags(_))), "only sends lend");
        send.flags = COMPLETE_ON_ACCEPT;
        assert!(
            matches!(Request::decode(&send.encode()), Err(ProtoError::BadFlags(_))),
            "only a lent buffer completes on accept"
        );
        send.flags = LEND | COMPLETE_ON_ACCEPT;
        assert!(Request::decode(&send.encode()).unwrap().completes_on_accept());
        assert!(Request::decode(&lend.encode()).is_ok_and(|r| !r.copies_short()));
        lend.flags = LEND | COPY_SHORT;
        assert!(Request::decode(&lend.encode()).unwrap().copies_short());
        lend.flags = COPY_SHORT;
        assert!(
            matches!(Request::decode(&lend.encode()), Err(ProtoError::BadFlags(_))),
            "only a lent buffer is copied short"
        );
        send.flags = LEND | COPY_SHORT;
        assert!(
            matches!(Request::decode(&send.encode()), Err(ProtoError::BadFlags(_))),
            "only a stream's send is copied short"
        );
        let mut recv = Request::new(Op::RecvFrom, 4);
        recv.socket = 3;
        recv.piece = Some(Piece { buffer: 1, offset: 0, len: 65536 });
        recv.flags = BATCH | NONBLOCK;
        assert!(Request::decode(&recv.encode()).is_ok());
        send.flags = BATCH;
        assert!(
            matches!(Request::decode(&send.encode()), Err(ProtoError::BadFlags(_))),
            "only datagram receives batch"
        );
        assert_eq!(unpack_stages(pack_stages(1, 2_000_000, 3)), [1, 2_000_000, 3]);
        assert_eq!(unpack_stages(pack_stages(u64::MAX, 0, 5_000_000)), [STAGE_MAX, 0, STAGE_MAX]);
    }
}
