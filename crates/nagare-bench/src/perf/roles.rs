//! The two ends of a test once it is agreed: who sends, who receives, how
//! each knows it is over. Both the client and the server use these, on
//! either stack. Every tick does a bounded amount of work and returns.

use super::net::{Net, Recv};
use super::protocol::{
    encode, DatagramHeader, Done, FrameReader, Message, Mode, Proto, Start, TestResult, DATAGRAM_HEADER_LEN,
};
use super::report::{Latency, Side};
use super::udp_rr::{UdpRrClient, UdpRrServer};
use anyhow::{anyhow, bail, Result};
use nagare_core::Instant;
use std::net::SocketAddr;
use std::time::Duration;

/// Calls into the stack per tick, at most, for each loop below.
pub(super) const MAX_CALLS_PER_TICK: usize = 64;
/// Bytes taken from the stack per receive call.
const RECV_QUANTUM: usize = 256 * 1024;
/// How long a UDP receiver waits for stragglers after Done.
const UDP_DRAIN: Duration = Duration::from_millis(300);
/// How long a stalled UDP sender (no buffer) waits before trying again.
pub(super) const UDP_BACKOFF: Duration = Duration::from_micros(200);

/// What a tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Made progress: tick again at once.
    Busy,
    /// Nothing to do until input arrives or the given time.
    Idle(Option<Instant>),
    /// This end of the test is over.
    Finished,
}

/// The control connection: frames out, frames in, never more than one
/// frame buffered either way.
pub struct Ctl<C> {
    pub conn: C,
    reader: FrameReader,
    out: Vec<u8>,
    /// The peer has closed its side.
    pub eof: bool,
}

impl<C: Copy> Ctl<C> {
    pub fn new(conn: C) -> Ctl<C> {
        Ctl { conn, reader: FrameReader::default(), out: Vec::new(), eof: false }
    }

    pub fn queue(&mut self, message: &Message) {
        self.out.extend_from_slice(&encode(message));
    }

    /// Sends what is queued; returns whether all of it went.
    pub fn flush<N: Net<Conn = C>>(&mut self, net: &mut N) -> Result<bool> {
        while !self.out.is_empty() {
            let n = net.tcp_send(self.conn, &self.out)?;
            if n == 0 {
                return Ok(false);
            }
            self.out.drain(..n);
        }
        Ok(true)
    }

    /// The next whole frame, if one has arrived. An Error frame from the
    /// peer becomes an error here; the end of stream sets `eof` (an error
    /// inside a frame).
    pub fn poll<N: Net<Conn = C>>(&mut self, net: &mut N) -> Result<Option<Message>> {
        if self.eof {
            return Ok(None);
        }
        let mut buf = [0u8; super::protocol::MAX_FRAME];
        for _ in 0..4 {
            let want = self.reader.want().min(buf.len());
            match net.tcp_recv(self.conn, &mut buf[..want])? {
                Recv::Data(n) => {
                    match self.reader.push(&buf[..n]).map_err(|e| anyhow!("bad message from the peer: {e}"))? {
                        Some(Message::Error { code, text }) => bail!("the peer reports error {code}: {text}"),
                        Some(message) => return Ok(Some(message)),
                        None => {}
                    }
                }
                Recv::Eof => {
                    if self.reader.partial() {
                        bail!("the peer closed the connection inside a message");
                    }
                    self.eof = true;
                    return Ok(None);
                }
                Recv::WouldBlock => return Ok(None),
            }
        }
        Ok(None)
    }
}

/// When a sender stops.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    Time(Duration),
    Bytes(u64),
}

impl Limit {
    pub fn of(start: &Start) -> Limit {
        if start.bytes > 0 {
            Limit::Bytes(start.bytes)
        } else {
            Limit::Time(Duration::from_millis(u64::from(start.duration_ms)))
        }
    }
}

/// What an end of a test saw: its own side exactly, the peer's as the
/// peer reported it (or as well as this end can tell).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub sent: Side,
    pub received: Side,
    pub out_of_order: u64,
    pub latency: Option<Latency>,
}

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn secs_from_micros(m: u64) -> f64 {
    m as f64 / 1e6
}

/// Sends filler until the limit, then FIN, then waits for the receiver's
/// Result.
pub struct TcpSender {
    start: Instant,
    limit: Limit,
    write: u64,
    sent: u64,
    shut_at: Option<Instant>,
    result: Option<(TestResult, Instant)>,
}

impl TcpSender {
    fn tick<N: Net>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if let Some(message) = ctl.poll(net)? {
            match message {
                Message::Result(r) if self.shut_at.is_some() => {
                    self.result = Some((r, now));
                    return Ok(Poll::Finished);
                }
                other => bail!("unexpected message while sending: {other:?}"),
            }
        }
        if ctl.eof {
            bail!("the receiver closed the connection before reporting");
        }
        if self.shut_at.is_some() {
            return Ok(Poll::Idle(None));
        }
        let mut busy = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            let room = match self.limit {
                Limit::Bytes(total) => total - self.sent,
                Limit::Time(d) if now.saturating_since(self.start) >= d => 0,
                Limit::Time(_) => u64::MAX,
            };
            if room == 0 {
                net.tcp_shutdown(ctl.conn)?;
                self.shut_at = Some(now);
                return Ok(Poll::Busy);
            }
            let n = net.tcp_send_fill(ctl.conn, room.min(self.write))?;
            if n == 0 {
                break;
            }
            self.sent += n as u64;
            busy = true;
        }
        Ok(if busy {
            Poll::Busy
        } else {
            Poll::Idle(match self.limit {
                Limit::Time(d) => Some(self.start + d),
                Limit::Bytes(_) => None,
            })
        })
    }

    fn outcome(&self) -> Outcome {
        let end = self.result.map_or(self.shut_at.unwrap_or(self.start), |(_, at)| at);
        let r = self.result.map(|(r, _)| r).unwrap_or_default();
        Outcome {
            sent: Side { bytes: self.sent, packets: 0, secs: end.saturating_since(self.start).as_secs_f64() },
            received: Side { bytes: r.bytes, packets: 0, secs: secs_from_micros(r.micros) },
            ..Outcome::default()
        }
    }
}

/// Counts bytes to the end of stream, then sends Result.
pub struct TcpReceiver {
    start: Instant,
    received: u64,
    first: Option<Instant>,
    last: Instant,
    reported: bool,
}

impl TcpReceiver {
    fn tick<N: Net>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.reported {
            return Ok(if ctl.flush(net)? { Poll::Finished } else { Poll::Idle(None) });
        }
        let mut busy = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            match net.tcp_recv_discard(ctl.conn, RECV_QUANTUM)? {
                Recv::Data(n) => {
                    self.first.get_or_insert(now);
                    self.last = now;
                    self.received += n as u64;
                    busy = true;
                }
                Recv::Eof => {
                    let first = self.first.unwrap_or(now);
                    ctl.queue(&Message::Result(TestResult {
                        bytes: self.received,
                        packets: 0,
                        micros: micros(self.last.saturating_since(first)),
                        out_of_order: 0,
                    }));
                    self.reported = true;
                    self.last = self.last.max(first);
                    return Ok(Poll::Busy);
                }
                Recv::WouldBlock => break,
            }
        }
        Ok(if busy { Poll::Busy } else { Poll::Idle(None) })
    }

    fn outcome(&self) -> Outcome {
        let first = self.first.unwrap_or(self.start);
        let received = Side { bytes: self.received, packets: 0, secs: self.last.saturating_since(first).as_secs_f64() };
        // The sender's count is the same bytes; its time, as seen here, runs
        // from the start of the test to the end of stream.
        let sent = Side { secs: self.last.saturating_since(self.start).as_secs_f64(), ..received };
        Outcome { sent, received, ..Outcome::default() }
    }
}

/// Request/response, the asking side: `len` bytes out, `len` bytes back,
/// timed; then FIN and the server's Result.
pub struct RrClient {
    start: Instant,
    limit: Limit,
    len: u64,
    transactions: u64,
    /// Bytes of the current request still to send, and of its response to read.
    to_send: u64,
    to_read: u64,
    asked_at: std::time::Instant,
    latency: Latency,
    shut_at: Option<Instant>,
    result: Option<TestResult>,
}

impl RrClient {
    fn tick<N: Net>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.shut_at.is_some() {
            return match ctl.poll(net)? {
                Some(Message::Result(r)) => {
                    self.result = Some(r);
                    Ok(Poll::Finished)
                }
                Some(other) => bail!("unexpected message after the last transaction: {other:?}"),
                None if ctl.eof => bail!("the server closed the connection before reporting"),
                None => Ok(Poll::Idle(None)),
            };
        }
        let mut busy = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            if self.to_send == 0 && self.to_read == 0 {
                let done = match self.limit {
                    Limit::Bytes(total) => self.transactions * self.len >= total,
                    Limit::Time(d) => now.saturating_since(self.start) >= d,
                };
                if done {
                    net.tcp_shutdown(ctl.conn)?;
                    self.shut_at = Some(now);
                    return Ok(Poll::Busy);
                }
                self.to_send = self.len;
                self.to_read = self.len;
                self.asked_at = std::time::Instant::now();
            }
            if self.to_send > 0 {
                let n = net.tcp_send_fill(ctl.conn, self.to_send)?;
                self.to_send -= n as u64;
                busy |= n > 0;
                if self.to_send > 0 {
                    break;
                }
            }
            match net.tcp_recv_discard(ctl.conn, self.to_read.min(RECV_QUANTUM as u64) as usize)? {
                Recv::Data(n) => {
                    busy = true;
                    self.to_read -= n as u64;
                    if self.to_read == 0 {
                        self.transactions += 1;
                        self.latency.record(self.asked_at.elapsed());
                    }
                }
                Recv::Eof => bail!("the server closed the connection inside a transaction"),
                Recv::WouldBlock => break,
            }
        }
        Ok(if busy { Poll::Busy } else { Poll::Idle(None) })
    }

    fn outcome(&self, now: Instant) -> Outcome {
        let end = self.shut_at.unwrap_or(now);
        let secs = end.saturating_since(self.start).as_secs_f64();
        let side = Side { bytes: self.transactions * self.len, packets: self.transactions, secs };
        Outcome { sent: side, received: side, latency: Some(self.latency.clone()), ..Outcome::default() }
    }

    /// Transactions the server counted, if it reported.
    pub fn server_transactions(&self) -> Option<u64> {
        self.result.map(|r| r.packets)
    }
}

/// Request/response, the answering side.
pub struct RrServer {
    start: Instant,
    len: u64,
    transactions: u64,
    to_read: u64,
    to_send: u64,
    last: Instant,
    reported: bool,
}

impl RrServer {
    fn tick<N: Net>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.reported {
            return Ok(if ctl.flush(net)? { Poll::Finished } else { Poll::Idle(None) });
        }
        let mut busy = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            if self.to_send > 0 {
                let n = net.tcp_send_fill(ctl.conn, self.to_send)?;
                self.to_send -= n as u64;
                busy |= n > 0;
                if self.to_send > 0 {
                    break;
                }
                self.transactions += 1;
                self.last = now;
            }
            match net.tcp_recv_discard(ctl.conn, self.to_read.min(RECV_QUANTUM as u64) as usize)? {
                Recv::Data(n) => {
                    busy = true;
                    self.to_read -= n as u64;
                    if self.to_read == 0 {
                        self.to_read = self.len;
                        self.to_send = self.len;
                    }
                }
                Recv::Eof if self.to_read == self.len => {
                    ctl.queue(&Message::Result(TestResult {
                        bytes: self.transactions * self.len,
                        packets: self.transactions,
                        micros: micros(self.last.saturating_since(self.start)),
                        out_of_order: 0,
                    }));
                    self.reported = true;
                    return Ok(Poll::Busy);
                }
                Recv::Eof => bail!("the client closed the connection inside a request"),
                Recv::WouldBlock => break,
            }
        }
        Ok(if busy { Poll::Busy } else { Poll::Idle(None) })
    }

    fn outcome(&self) -> Outcome {
        let side = Side {
            bytes: self.transactions * self.len,
            packets: self.transactions,
            secs: self.last.saturating_since(self.start).as_secs_f64(),
        };
        Outcome { sent: side, received: side, ..Outcome::default() }
    }
}

/// Sends numbered datagrams, paced if asked, then Done; then waits for
/// the receiver's Result.
pub struct UdpSender<U> {
    udp: U,
    to: SocketAddr,
    start: Instant,
    limit: Limit,
    /// Bytes per second; 0: as fast as the stack takes them.
    rate: u64,
    /// Bytes of one datagram.
    len: usize,
    /// Room for as many datagrams as one call sends, one after another.
    datagram: Vec<u8>,
    cookie: u32,
    packets: u64,
    last_send: Instant,
    done: bool,
    result: Option<TestResult>,
}

impl<U: Copy> UdpSender<U> {
    fn tick<N: Net<Udp = U>>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.done {
            ctl.flush(net)?;
            return match ctl.poll(net)? {
                Some(Message::Result(r)) => {
                    self.result = Some(r);
                    Ok(Poll::Finished)
                }
                Some(other) => bail!("unexpected message after Done: {other:?}"),
                None if ctl.eof => bail!("the receiver closed the connection before reporting"),
                None => Ok(Poll::Idle(None)),
            };
        }
        if let Some(message) = ctl.poll(net)? {
            bail!("unexpected message while sending datagrams: {message:?}");
        }
        if ctl.eof {
            bail!("the receiver closed the connection during the test");
        }
        let len = self.len as u64;
        let batch = (self.datagram.len() / self.len.max(1)).max(1) as u64;
        let mut busy = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            let finished = match self.limit {
                Limit::Bytes(total) => self.packets * len >= total,
                Limit::Time(d) => now.saturating_since(self.start) >= d,
            };
            if finished {
                let elapsed = self.last_send.saturating_since(self.start);
                ctl.queue(&Message::Done(Done {
                    packets: self.packets,
                    bytes: self.packets * len,
                    micros: micros(elapsed),
                }));
                ctl.flush(net)?;
                self.done = true;
                return Ok(Poll::Busy);
            }
            // Datagrams due now: the rate from the start (all of a batch
            // without one), within a byte limit.
            let mut count = batch;
            if self.rate > 0 {
                let due_bytes = (now.saturating_since(self.start).as_secs_f64() * self.rate as f64) as u64;
                count = count.min((due_bytes / len.max(1) + 1).saturating_sub(self.packets));
                if count == 0 {
                    let due = self.start + Duration::from_secs_f64((self.packets * len) as f64 / self.rate as f64);
                    let wake = match self.limit {
                        Limit::Time(d) => due.min(self.start + d),
                        Limit::Bytes(_) => due,
                    };
                    return Ok(if busy { Poll::Busy } else { Poll::Idle(Some(wake)) });
                }
            }
            if let Limit::Bytes(total) = self.limit {
                count = count.min(total.div_ceil(len.max(1)).saturating_sub(self.packets)).max(1);
            }
            let bytes = count as usize * self.len;
            for (i, d) in self.datagram[..bytes].chunks_mut(self.len.max(1)).enumerate() {
                DatagramHeader { cookie: self.cookie, seq: self.packets + i as u64 }.write(d);
            }
            let taken = if count == 1 {
                u64::from(net.udp_send(self.udp, &self.datagram[..bytes], self.to)?)
            } else {
                net.udp_send_segments(self.udp, &self.datagram[..bytes], self.len, self.to)? as u64
            };
            if taken == 0 {
                return Ok(if busy { Poll::Busy } else { Poll::Idle(Some(now + UDP_BACKOFF)) });
            }
            self.packets += taken;
            self.last_send = now;
            busy = true;
        }
        Ok(Poll::Busy)
    }

    fn outcome(&self) -> Outcome {
        let len = self.len as u64;
        let r = self.result.unwrap_or_default();
        Outcome {
            sent: Side {
                bytes: self.packets * len,
                packets: self.packets,
                secs: self.last_send.saturating_since(self.start).as_secs_f64(),
            },
            received: Side { bytes: r.bytes, packets: r.packets, secs: secs_from_micros(r.micros) },
            out_of_order: r.out_of_order,
            latency: None,
        }
    }
}

/// The CPU time the calling thread has had.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// Keeps this thread on the CPU until it has had `work` more CPU time
/// (nothing for zero): time it spends preempted does not count, as an
/// application's work would not get done meanwhile. Wall time bounds it
/// (a thousand times `work`) where the CPU clock cannot be read.
fn busy_for(work: Duration) {
    if work.is_zero() {
        return;
    }
    let (cpu, wall) = (thread_cpu_time(), std::time::Instant::now());
    while thread_cpu_time().saturating_sub(cpu) < work && wall.elapsed() < work * 1000 {
        std::hint::spin_loop();
    }
}

/// The most work a receiver does in one tick, so that it looks at its
/// control connection, and stamps its datagrams, at least this often.
const MAX_WORK_PER_TICK: Duration = Duration::from_millis(1);

/// Counts this test's datagrams; after the sender's Done and a short
/// drain, sends Result.
pub struct UdpReceiver<U> {
    udp: U,
    work: Duration,
    cookie: u32,
    packets: u64,
    bytes: u64,
    next_seq: u64,
    out_of_order: u64,
    first: Option<Instant>,
    last: Instant,
    done: Option<(Done, Instant)>,
    reported: bool,
}

impl<U: Copy> UdpReceiver<U> {
    fn tick<N: Net<Udp = U>>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.reported {
            return Ok(if ctl.flush(net)? { Poll::Finished } else { Poll::Idle(None) });
        }
        let mut busy = false;
        let mut header = [0u8; DATAGRAM_HEADER_LEN];
        let mut worked = Duration::ZERO;
        for _ in 0..MAX_CALLS_PER_TICK * 4 {
            if worked >= MAX_WORK_PER_TICK {
                busy = true;
                break;
            }
            let Some((len, _from)) = net.udp_recv(self.udp, &mut header)? else {
                break;
            };
            busy = true;
            match DatagramHeader::read(&header[..len.min(DATAGRAM_HEADER_LEN)]) {
                Some(h) if h.cookie == self.cookie => {
                    busy_for(self.work);
                    worked += self.work;
                    self.packets += 1;
                    self.bytes += len as u64;
                    self.first.get_or_insert(now);
                    self.last = now;
                    if h.seq < self.next_seq {
                        self.out_of_order += 1;
                    } else {
                        self.next_seq = h.seq.saturating_add(1);
                    }
                }
                // Another test's datagram, or not ours at all.
                _ => {}
            }
        }
        if self.done.is_none() {
            match ctl.poll(net)? {
                Some(Message::Done(d)) => {
                    self.done = Some((d, now + UDP_DRAIN));
                    busy = true;
                }
                Some(other) => bail!("unexpected message during a UDP test: {other:?}"),
                None if ctl.eof => bail!("the sender closed the connection during the test"),
                None => {}
            }
        }
        if let Some((done, until)) = self.done {
            if self.packets >= done.packets || now >= until {
                let first = self.first.unwrap_or(now);
                ctl.queue(&Message::Result(TestResult {
                    bytes: self.bytes,
                    packets: self.packets,
                    micros: micros(self.last.saturating_since(first)),
                    out_of_order: self.out_of_order,
                }));
                self.reported = true;
                return Ok(Poll::Busy);
            }
            if !busy {
                return Ok(Poll::Idle(Some(until)));
            }
        }
        Ok(if busy { Poll::Busy } else { Poll::Idle(None) })
    }

    fn outcome(&self) -> Outcome {
        let first = self.first.unwrap_or(self.last);
        let d = self.done.map(|(d, _)| d).unwrap_or_default();
        Outcome {
            sent: Side { bytes: d.bytes, packets: d.packets, secs: secs_from_micros(d.micros) },
            received: Side {
                bytes: self.bytes,
                packets: self.packets,
                secs: self.last.saturating_since(first).as_secs_f64(),
            },
            out_of_order: self.out_of_order,
            latency: None,
        }
    }
}

/// One end of a test.
pub enum Role<N: Net> {
    TcpSend(TcpSender),
    TcpRecv(TcpReceiver),
    RrClient(Box<RrClient>),
    RrServer(RrServer),
    UdpSend(UdpSender<N::Udp>),
    UdpRecv(UdpReceiver<N::Udp>),
    UdpRrClient(Box<UdpRrClient<N::Udp>>),
    UdpRrServer(UdpRrServer<N::Udp>),
}

/// Which end of a test a program plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Client,
    Server,
}

/// What the role needs besides the agreed test.
pub struct RoleSetup<U> {
    pub end: End,
    pub cookie: u32,
    /// UDP: the socket this end uses and where the peer's is.
    pub udp: Option<(U, SocketAddr)>,
    /// Datagrams per send call, when this end sends UDP.
    pub udp_batch: usize,
    /// CPU time this end spends on each datagram of the test it receives
    /// (a busy loop), standing in for an application's own work.
    pub work: Duration,
}

impl<N: Net> Role<N> {
    pub fn new(start: &Start, setup: RoleSetup<N::Udp>, now: Instant) -> Result<Role<N>> {
        let limit = Limit::of(start);
        let sends = matches!((setup.end, start.mode), (End::Client, Mode::Stream) | (End::Server, Mode::Reverse));
        let len = u64::from(start.len);
        Ok(match (start.proto, start.mode) {
            (Proto::Tcp, Mode::Rr) => match setup.end {
                End::Client => Role::RrClient(Box::new(RrClient {
                    start: now,
                    limit,
                    len,
                    transactions: 0,
                    to_send: 0,
                    to_read: 0,
                    asked_at: std::time::Instant::now(),
                    latency: Latency::default(),
                    shut_at: None,
                    result: None,
                })),
                End::Server => Role::RrServer(RrServer {
                    start: now,
                    len,
                    transactions: 0,
                    to_read: len,
                    to_send: 0,
                    last: now,
                    reported: false,
                }),
            },
            (Proto::Tcp, _) if sends => {
                Role::TcpSend(TcpSender { start: now, limit, write: len, sent: 0, shut_at: None, result: None })
            }
            (Proto::Tcp, _) => {
                Role::TcpRecv(TcpReceiver { start: now, received: 0, first: None, last: now, reported: false })
            }
            (Proto::Udp, mode) => {
                let Some((udp, to)) = setup.udp else {
                    bail!("a UDP test without a UDP socket");
                };
                if mode == Mode::Rr {
                    match setup.end {
                        End::Client => {
                            Role::UdpRrClient(Box::new(UdpRrClient::new(udp, to, start.len, limit, setup.cookie, now)))
                        }
                        End::Server => Role::UdpRrServer(UdpRrServer::new(udp, to, start.len, now)),
                    }
                } else if sends {
                    // One datagram's bytes after another, `udp_batch` of them.
                    let one = start.len as usize;
                    let mut datagram = vec![0u8; one * setup.udp_batch.max(1)];
                    for d in datagram.chunks_mut(one.max(1)) {
                        d.iter_mut()
                            .enumerate()
                            .skip(DATAGRAM_HEADER_LEN)
                            .for_each(|(i, b)| *b = (i - DATAGRAM_HEADER_LEN) as u8);
                    }
                    Role::UdpSend(UdpSender {
                        len: one,
                        udp,
                        to,
                        start: now,
                        limit,
                        rate: u64::from(start.udp_rate_kbit) * 1000 / 8,
                        datagram,
                        cookie: setup.cookie,
                        packets: 0,
                        last_send: now,
                        done: false,
                        result: None,
                    })
                } else {
                    Role::UdpRecv(UdpReceiver {
                        udp,
                        work: setup.work,
                        cookie: setup.cookie,
                        packets: 0,
                        bytes: 0,
                        next_seq: 0,
                        out_of_order: 0,
                        first: None,
                        last: now,
                        done: None,
                        reported: false,
                    })
                }
            }
        })
    }

    pub fn tick(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        match self {
            Role::TcpSend(r) => r.tick(net, ctl, now),
            Role::TcpRecv(r) => r.tick(net, ctl, now),
            Role::RrClient(r) => r.tick(net, ctl, now),
            Role::RrServer(r) => r.tick(net, ctl, now),
            Role::UdpSend(r) => r.tick(net, ctl, now),
            Role::UdpRecv(r) => r.tick(net, ctl, now),
            Role::UdpRrClient(r) => r.tick(net, ctl, now),
            Role::UdpRrServer(r) => r.tick(net, ctl, now),
        }
    }

    /// Bytes moved so far by this end, for the progress line.
    pub fn progress(&self) -> u64 {
        match self {
            Role::TcpSend(r) => r.sent,
            Role::TcpRecv(r) => r.received,
            Role::RrClient(r) => r.transactions * r.len * 2,
            Role::RrServer(r) => r.transactions * r.len * 2,
            Role::UdpSend(r) => r.packets * r.datagram.len() as u64,
            Role::UdpRecv(r) => r.bytes,
            Role::UdpRrClient(r) => r.transactions * r.request_len() * 2,
            Role::UdpRrServer(r) => r.transactions * r.request_len() * 2,
        }
    }

    pub fn outcome(&self, now: Instant) -> Outcome {
        match self {
            Role::TcpSend(r) => r.outcome(),
            Role::TcpRecv(r) => r.outcome(),
            Role::RrClient(r) => r.outcome(now),
            Role::RrServer(r) => r.outcome(),
            Role::UdpSend(r) => r.outcome(),
            Role::UdpRecv(r) => r.outcome(),
            Role::UdpRrClient(r) => r.outcome(now),
            Role::UdpRrServer(r) => r.outcome(),
        }
    }

    /// Request/response: the server's count of transactions.
    pub fn peer_transactions(&self) -> Option<u64> {
        match self {
            Role::RrClient(r) => r.server_transactions(),
            Role::UdpRrClient(r) => r.server_transactions(),
            _ => None,
        }
    }
}
