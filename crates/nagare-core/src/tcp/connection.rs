//! One TCP connection: the RFC 9293 state machine with RFC 7323 options,
//! SACK (RFC 2018, RFC 6675), RFC 6298 timers, RFC 5681/6582 recovery with
//! Limited Transmit (RFC 3042) and the RFC 5961 defences.
//!
//! Sans-IO like the rest of the engine: `process` takes a parsed segment and
//! its payload chain, `dispatch` hands out segments to send, `on_timer`
//! runs the timers, and `poll_at` says when they next fire. Payload is never
//! copied: received data is kept as the chains it arrived in, and segments
//! to send are slices of the send queue.

use super::assembler::{Assembler, AssemblerLimits};
use super::config::TcpConfig;
use super::congestion::{Congestion, CongestionControl};
use super::quick_ack::QuickAck;
use super::rack::Rack;
use super::recv_tuning::RecvTuning;
use super::rtt::RttEstimator;
use super::scoreboard::{NextSeg, Scoreboard};
use super::send_queue::SendQueue;
use super::send_tuning::SendTuning;
use super::tail_probe::{Probe, TailLossProbe};
use crate::buf::{BufferPool, PacketBuf, PoolExhausted};
use crate::time::Instant;
use alloc::collections::VecDeque;
use core::net::SocketAddr;
use core::time::Duration;
use nagare_wire::{TcpFlags, TcpRepr, TcpSeqNumber};

/// Default MSS when the peer sends none (RFC 9293 3.7.1).
pub const DEFAULT_MSS: usize = 536;
/// Largest window shift (RFC 7323 2.3).
const MAX_WINDOW_SHIFT: u8 = 14;
/// Segments one `dispatch` call may emit, so a large window cannot make one
/// call run unboundedly long; the caller comes back for more.
const DISPATCH_BURST: usize = 64;
/// How far back an ACK may acknowledge and still be taken as valid
/// (RFC 5961 5.2 uses MAX.SND.WND; this floor covers a closed window).
const MIN_ACK_SLACK: usize = 65535;
/// Least time between two challenge ACKs (RFC 5961 7 asks for a limit).
const CHALLENGE_ACK_INTERVAL: Duration = Duration::from_millis(10);
/// Least time between two ACKs answering bare ACKs outside the window.
const OUT_OF_WINDOW_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// Connection states of RFC 9293 3.3.2 (LISTEN lives in the listener).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No connection.
    Closed,
    /// SYN sent, waiting for the peer's SYN.
    SynSent,
    /// SYN received and answered, waiting for its acknowledgement.
    SynReceived,
    /// Open both ways.
    Established,
    /// We sent FIN; waiting for its ACK or the peer's FIN.
    FinWait1,
    /// Our FIN acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer sent FIN; we may still send.
    CloseWait,
    /// Both sent FIN at once; waiting for the ACK of ours.
    Closing,
    /// The peer closed, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both closed; waiting out old duplicates.
    TimeWait,
}

impl State {
    /// The state's name, as RFC 9293 writes it, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::SynSent => "syn-sent",
            State::SynReceived => "syn-received",
            State::Established => "established",
            State::FinWait1 => "fin-wait-1",
            State::FinWait2 => "fin-wait-2",
            State::CloseWait => "close-wait",
            State::Closing => "closing",
            State::LastAck => "last-ack",
            State::TimeWait => "time-wait",
        }
    }

    /// Whether the handshake is done (RFC 9293's synchronized states).
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::SynSent | State::SynReceived)
    }
}

/// Why a connection ended abnormally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpError {
    /// The peer answered our SYN with RST, or an ICMP error about it said
    /// the port (or the protocol) is unreachable there.
    Refused,
    /// The peer reset the connection.
    Reset,
    /// Retransmissions or keepalives went unanswered.
    TimedOut,
    /// The handshake's next hop never answered address resolution, or an
    /// ICMP error about the SYN said the destination is unreachable.
    HostUnreachable,
}

/// Loss recovery in progress (RFC 6675 with SACK, RFC 6582 without).
#[derive(Debug, Clone, Copy)]
struct Recovery {
    /// Highest sequence sent when recovery began.
    recover: TcpSeqNumber,
    /// Highest sequence retransmitted in this recovery.
    high_rxt: TcpSeqNumber,
    /// NewReno's window inflation by duplicate ACKs (non-SACK only).
    inflation: usize,
}

/// A connection's view of one received segment's options that matter
/// after the handshake.
#[derive(Debug, Clone, Copy)]
struct Negotiated {
    /// MSS we may send (the peer's MSS, capped by our MTU).
    send_mss: usize,
    /// Shift applied to windows the peer advertises.
    snd_shift: u8,
    /// Shift applied to windows we advertise.
    rcv_shift: u8,
    timestamps: bool,
    sack: bool,
}

/// What a processed segment did, for the owner of the connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Processed {
    /// The segment was acceptable (not dropped by a check).
    pub accepted: bool,
    /// The handshake just completed.
    pub established: bool,
    /// Bytes of new in-order data made readable.
    pub readable: usize,
    /// Bytes newly acknowledged (send space freed).
    pub acked: usize,
    /// The connection was reset by this segment.
    pub reset: bool,
    /// The segment was answered with a challenge ACK (RFC 5961).
    pub challenged: bool,
    /// The segment acknowledged something we never sent during the
    /// handshake: the owner answers with a RST of this sequence number.
    pub reset_reply: Option<TcpSeqNumber>,
}

/// Counters of one connection (what `ss -ti` would show).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Segments received.
    pub segments_received: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Fast retransmits (recoveries entered).
    pub fast_recoveries: u64,
    /// Bytes received out of order and held.
    pub ooo_bytes: u64,
    /// Duplicate bytes received.
    pub duplicate_bytes: u64,
    /// Bytes received past the right edge of the window offered, dropped.
    pub beyond_window_bytes: u64,
    /// Segments dropped by PAWS.
    pub paws_drops: u64,
    /// Challenge ACKs sent.
    pub challenge_acks: u64,
    /// Tail loss probes sent.
    pub tail_loss_probes: u64,
    /// Times the path MTU to the peer went down and the send MSS with it.
    pub path_mtu_drops: u64,
}

/// One TCP connection.
#[derive(Debug)]
pub struct Connection {
    state: State,
    local: SocketAddr,
    remote: SocketAddr,
    config: TcpConfig,
    /// Our MSS: what we advertise and the largest segment we accept.
    local_mss: usize,
    /// The largest segment payload and options the path to the peer
    /// carries, as path MTU discovery learnt it: the send MSS never
    /// exceeds it, whatever the peer announced.
    path_mss: usize,
    /// The send MSS the peer's SYN allows (its MSS option, capped by
    /// ours), which the send MSS goes back to when the path allows it
    /// again.
    peer_mss: usize,

    // Send sequence space (RFC 9293 3.3.1).
    iss: TcpSeqNumber,
    snd_una: TcpSeqNumber,
    snd_nxt: TcpSeqNumber,
    /// Highest sequence ever sent (snd_nxt goes back on RTO).
    snd_max: TcpSeqNumber,
    snd_wnd: usize,
    max_snd_wnd: usize,
    snd_wl1: TcpSeqNumber,
    snd_wl2: TcpSeqNumber,
    send_queue: SendQueue,
    /// The application closed its sending side: a FIN follows the data.
    fin_queued: bool,
    /// Sequence number of our FIN, once it has been sent.
    snd_fin: Option<TcpSeqNumber>,
    /// End of the last segment of new data sent smaller than a full one
    /// (Minshall's variant of Nagle's algorithm).
    snd_sml: TcpSeqNumber,

    // Receive sequence space.
    irs: TcpSeqNumber,
    rcv_nxt: TcpSeqNumber,
    /// Right edge of the window last advertised (never moves left).
    rcv_adv: TcpSeqNumber,
    recv_queue: VecDeque<PacketBuf>,
    recv_bytes: usize,
    /// The receive buffer's size, grown by autotuning.
    recv_tuning: RecvTuning,
    send_tuning: SendTuning,
    assembler: Assembler,
    /// A FIN seen beyond a hole: processed when the hole fills.
    pending_fin: Option<TcpSeqNumber>,
    fin_received: bool,
    /// The application will read no more; data arriving now gets a RST.
    read_closed: bool,
    /// The application shut its receiving side: data is acknowledged and
    /// dropped, reads see end of stream.
    read_shut: bool,

    options: Negotiated,
    ts_recent: u32,
    ts_recent_at: Instant,
    ts_offset: u32,
    last_ack_sent: TcpSeqNumber,

    rtt: RttEstimator,
    /// A segment being timed for an RTT sample (Karn: never a retransmission).
    rtt_probe: Option<(TcpSeqNumber, Instant)>,
    congestion: Congestion,
    scoreboard: Scoreboard,
    dupacks: usize,
    recovery: Option<Recovery>,
    rack: Rack,
    tail_probe: TailLossProbe,
    /// One segment to resend at the next dispatch (fast retransmit).
    retransmit_one: Option<TcpSeqNumber>,
    /// New segments that duplicate ACKs below the threshold let go beyond
    /// cwnd at the next dispatch (Limited Transmit, RFC 3042).
    limited_transmit: usize,
    /// Bytes Limited Transmit sent since snd_una last moved: not part of
    /// the flight that ssthresh is taken from (RFC 5681 3.2 step 2).
    limited_sent: usize,
    /// The persist timer fired on a small window: send what fits.
    sws_override: bool,
    /// The retransmission timer fired: the segment at snd_una goes out even
    /// if the peer's window is closed (as a probe), so a lost window update
    /// cannot leave data in flight unanswered for good.
    rto_probe: bool,

    retransmit_at: Option<Instant>,
    /// First transmission of the oldest unacknowledged data (user timeout).
    unacked_since: Option<Instant>,
    persist_at: Option<Instant>,
    persist_backoff: u32,
    delayed_ack_at: Option<Instant>,
    keepalive_sent: u32,
    time_wait_until: Option<Instant>,
    /// When a connection the application closed gives up waiting in
    /// FIN-WAIT-2 for the peer's FIN.
    fin_wait2_until: Option<Instant>,
    last_send_at: Instant,
    last_recv_at: Instant,
    last_challenge_at: Option<Instant>,
    last_oow_ack_at: Option<Instant>,

    /// An ACK must go out at the next dispatch.
    ack_now: bool,
    /// That ACK is a probe (keepalive or zero window): it carries sequence
    /// number snd_una - 1 so the peer answers with its own ACK.
    probe_below_una: bool,
    /// Full segments received since the last ACK we sent.
    segments_unacked: u32,
    /// Which ACKs of received data go at once rather than delayed.
    quick_ack: QuickAck,
    /// SYN (or SYN-ACK) must be (re)sent at the next dispatch.
    syn_due: bool,
    /// A RST must be sent at the next dispatch, then the connection closes.
    rst_due: bool,
    error: Option<TcpError>,
    stats: ConnectionStats,
}

fn seq_lt(a: TcpSeqNumber, b: TcpSeqNumber) -> bool {
    (a - b) < 0
}

fn seq_le(a: TcpSeqNumber, b: TcpSeqNumber) -> bool {
    (a - b) <= 0
}

/// Bytes from `a` up to `b` (0 if `b` is not after `a`).
fn seq_dist(a: TcpSeqNumber, b: TcpSeqNumber) -> usize {
    usize::try_from(b - a).unwrap_or(0)
}

fn window_shift_for(buffer: usize) -> u8 {
    let mut shift = 0u8;
    while shift < MAX_WINDOW_SHIFT && (buffer >> shift) > 65535 {
        shift += 1;
    }
    shift
}

impl Connection {
    fn new(
        config: TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
        local_mss: usize,
        iss: TcpSeqNumber,
        now: Instant,
    ) -> Self {
        let rtt = RttEstimator::new(&config.rtt);
        let recv_tuning = RecvTuning::new(&config, local_mss);
        let assembler =
            Assembler::new(AssemblerLimits { max_segments: config.max_ooo_segments, max_bytes: config.recv_buffer });
        Connection {
            state: State::Closed,
            local,
            remote,
            local_mss,
            path_mss: usize::MAX,
            peer_mss: DEFAULT_MSS,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: TcpSeqNumber(0),
            snd_wl2: iss,
            send_queue: SendQueue::new(config.send_buffer),
            send_tuning: SendTuning::new(&config),
            fin_queued: false,
            snd_fin: None,
            snd_sml: iss,
            irs: TcpSeqNumber(0),
            rcv_nxt: TcpSeqNumber(0),
            rcv_adv: TcpSeqNumber(0),
            recv_queue: VecDeque::new(),
            recv_bytes: 0,
            recv_tuning,
            assembler,
            pending_fin: None,
            fin_received: false,
            read_closed: false,
            read_shut: false,
            options: Negotiated { send_mss: DEFAULT_MSS, snd_shift: 0, rcv_shift: 0, timestamps: false, sack: false },
            ts_recent: 0,
            ts_recent_at: now,
            // Timestamps start at a per-connection offset so they reveal
            // nothing about the host's uptime (RFC 7323 7.1).
            ts_offset: iss.0.rotate_left(13),
            last_ack_sent: TcpSeqNumber(0),
            rtt,
            rtt_probe: None,
            congestion: Congestion::new(config.congestion, DEFAULT_MSS),
            scoreboard: Scoreboard::new(),
            dupacks: 0,
            recovery: None,
            rack: Rack::new(config.rack_tlp),
            tail_probe: TailLossProbe::new(config.rack_tlp),
            retransmit_one: None,
            limited_transmit: 0,
            limited_sent: 0,
            sws_override: false,
            rto_probe: false,
            retransmit_at: None,
            unacked_since: None,
            persist_at: None,
            persist_backoff: 0,
            delayed_ack_at: None,
            keepalive_sent: 0,
            time_wait_until: None,
            fin_wait2_until: None,
            last_send_at: now,
            last_recv_at: now,
            last_challenge_at: None,
            last_oow_ack_at: None,
            ack_now: false,
            probe_below_una: false,
            segments_unacked: 0,
            quick_ack: QuickAck::default(),
            syn_due: false,
            rst_due: false,
            error: None,
            stats: ConnectionStats::default(),
            config,
        }
    }

    /// An active open: a SYN goes out at the next dispatch.
    pub fn connect(
        config: TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
        local_mss: usize,
        iss: TcpSeqNumber,
        now: Instant,
    ) -> Self {
        let mut c = Connection::new(config, local, remote, local_mss, iss, now);
        c.state = State::SynSent;
        c.options.rcv_shift = if c.config.window_scaling { window_shift_for(c.config.recv_buffer_limit()) } else { 0 };
        c.snd_nxt = iss;
        c.syn_due = true;
        c
    }

    /// A passive open from a listener's SYN: SYN-RECEIVED, SYN-ACK due.
    pub fn accept_syn(
        config: TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
        local_mss: usize,
        iss: TcpSeqNumber,
        syn: &TcpRepr,
        now: Instant,
    ) -> Self {
        let mut c = Connection::new(config, local, remote, local_mss, iss, now);
        c.state = State::SynReceived;
        c.take_peer_syn(syn, now);
        c.syn_due = true;
        c
    }

    /// A connection rebuilt from a SYN cookie: the handshake is complete.
    #[allow(clippy::too_many_arguments)]
    pub fn from_cookie(
        config: TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
        local_mss: usize,
        iss: TcpSeqNumber,
        irs: TcpSeqNumber,
        peer_mss: u16,
        ack: &TcpRepr,
        now: Instant,
    ) -> Self {
        let mut c = Connection::new(config, local, remote, local_mss, iss, now);
        c.irs = irs;
        c.rcv_nxt = irs + 1;
        c.rcv_adv = c.rcv_nxt;
        // A cookie keeps no window scale or SACK: both sides run without.
        c.options = Negotiated {
            send_mss: usize::from(peer_mss).min(local_mss),
            snd_shift: 0,
            rcv_shift: 0,
            timestamps: false,
            sack: false,
        };
        c.peer_mss = c.options.send_mss;
        c.congestion.set_mss(c.options.send_mss);
        c.snd_una = iss + 1;
        c.snd_nxt = iss + 1;
        c.snd_max = iss + 1;
        c.state = State::Established;
        // The ACK completing the handshake carries the first window (not a
        // SYN, so scaled, but a cookie connection has no scaling). Taken
        // directly: comparing its sequence number with an unset snd_wl1
        // would depend on which half of the sequence space the peer's ISN
        // fell in.
        c.snd_wnd = usize::from(ack.window_len);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = ack.seq_number;
        c.snd_wl2 = ack.ack_number.unwrap_or(c.snd_una);
        c
    }

    // ---- accessors ---------------------------------------------------------

    /// The connection's state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Our end.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// The peer's end.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Why the connection failed, if it did.
    pub fn error(&self) -> Option<TcpError> {
        self.error
    }

    /// Counters.
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }

    /// The settings this connection runs with.
    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// Sets the offset of this connection's timestamp clock; call it before
    /// the first segment goes out. The owner derives it from the
    /// four-tuple with a keyed hash (as Linux does), so that successive
    /// incarnations of one four-tuple send increasing timestamps, which
    /// PAWS and TIME-WAIT reuse rely on (RFC 7323 5.8, RFC 6191), while
    /// the clock still reveals nothing about the host (RFC 7323 7.1).
    pub fn set_timestamp_offset(&mut self, offset: u32) {
        self.ts_offset = offset;
    }

    /// Turns Nagle's algorithm on or off (TCP_NODELAY is off).
    pub fn set_nagle(&mut self, on: bool) {
        self.config.nagle = on;
    }

    /// Congestion window in bytes.
    pub fn cwnd(&self) -> usize {
        self.congestion.cwnd()
    }

    /// Slow-start threshold in bytes.
    pub fn ssthresh(&self) -> usize {
        self.congestion.ssthresh()
    }

    /// Smoothed RTT, if sampled.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rtt.rto(&self.config.rtt)
    }

    /// MSS used for sending.
    pub fn send_mss(&self) -> usize {
        self.options.send_mss
    }

    /// Whether window scaling, timestamps and SACK were negotiated, and the
    /// two shifts (ours, theirs).
    pub fn negotiated(&self) -> (bool, bool, bool, u8, u8) {
        let o = &self.options;
        (o.snd_shift > 0 || o.rcv_shift > 0, o.timestamps, o.sack, o.rcv_shift, o.snd_shift)
    }

    /// The peer's advertised window in bytes.
    pub fn send_window(&self) -> usize {
        self.snd_wnd
    }

    /// Bytes sent and not yet acknowledged.
    pub fn bytes_in_flight(&self) -> usize {
        seq_dist(self.snd_una, self.snd_nxt)
    }

    /// The oldest received segment not read yet, as it arrived (its bytes
    /// are the next to read).
    pub fn recv_front(&self) -> Option<&PacketBuf> {
        self.recv_queue.front()
    }

    /// Bytes readable now.
    pub fn recv_queued(&self) -> usize {
        self.recv_bytes
    }

    /// The receive buffer's size now: the most the window offers.
    pub fn recv_buffer(&self) -> usize {
        self.recv_tuning.buffer()
    }

    /// How far autotuning may grow the receive buffer before its owner
    /// grants more ([`Connection::set_recv_buffer_ceiling`]); the buffer
    /// itself once its size was set.
    pub fn recv_buffer_ceiling(&self) -> usize {
        self.recv_tuning.ceiling()
    }

    /// The receive buffer autotuning would have grown to without the
    /// ceiling: past the ceiling, what a grant would be used for.
    pub fn recv_buffer_wanted(&self) -> usize {
        self.recv_tuning.wanted()
    }

    /// The send buffer's size now: the most the send queue holds.
    pub fn send_buffer(&self) -> usize {
        self.send_tuning.buffer()
    }

    /// How far autotuning may grow the send buffer before its owner
    /// grants more ([`Connection::set_send_buffer_ceiling`]); the buffer
    /// itself once its size was set.
    pub fn send_buffer_ceiling(&self) -> usize {
        self.send_tuning.ceiling()
    }

    /// The send buffer autotuning would have grown to without the
    /// ceiling: past the ceiling, what a grant would be used for.
    pub fn send_buffer_wanted(&self) -> usize {
        self.send_tuning.wanted()
    }

    /// Bytes waiting in the send queue (sent or not, unacknowledged).
    pub fn send_queued(&self) -> usize {
        self.send_queue.len()
    }

    /// Whether `recv` would return data or end-of-stream.
    pub fn can_recv(&self) -> bool {
        self.recv_bytes > 0 || self.fin_received || self.read_shut || self.error.is_some()
    }

    /// Whether the stream takes no more data (shut down, closing, closed).
    pub fn send_closed(&self) -> bool {
        !self.may_send()
    }

    /// Bytes `send_buf` would take now (0 when the stream is closed for
    /// sending).
    pub fn send_free(&self) -> usize {
        if self.may_send() {
            self.send_queue.free()
        } else {
            0
        }
    }

    /// Whether `send` would accept bytes now.
    pub fn can_send(&self) -> bool {
        self.may_send() && self.send_queue.free() > 0
    }

    /// Whether segments beyond a hole wait in the reassembly queue.
    pub fn has_out_of_order_data(&self) -> bool {
        !self.assembler.is_empty()
    }

    /// Whether reads are over: the peer closed its side and everything
    /// was read, or the application shut its receiving side.
    pub fn at_eof(&self) -> bool {
        (self.fin_received || self.read_shut) && self.recv_bytes == 0
    }

    fn may_send(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait | State::SynSent | State::SynReceived)
            && !self.fin_queued
    }

    /// Whether the connection is finished and can be forgotten.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    // ---- application calls -----------------------------------------------

    /// Copies bytes into the send queue; returns how many were taken.
    pub fn send(&mut self, pool: &BufferPool, headroom: usize, data: &[u8]) -> Result<usize, PoolExhausted> {
        if !self.may_send() {
            return Ok(0);
        }
        let taken = self.send_queue.push_bytes(pool, headroom, data)?;
        // Held back by the buffer, not by a pool that ran dry (which no
        // larger buffer would help).
        if taken < data.len() && self.send_queue.free() == 0 {
            self.send_tuning.press();
        }
        Ok(taken)
    }

    /// Appends a chain to the send queue without copying; returns the part
    /// that did not fit.
    pub fn send_buf(&mut self, data: PacketBuf) -> PacketBuf {
        if !self.may_send() {
            return data;
        }
        let rest = self.send_queue.push(data);
        if !rest.is_empty() {
            self.send_tuning.press();
        }
        rest
    }

    /// A writer waits for room its send would not find: the send buffer
    /// holds it back, as a `send` that took less than it was given says.
    /// For an owner that checks the room itself before sending.
    pub fn note_send_blocked(&mut self) {
        self.send_tuning.press();
    }

    /// Takes up to `max` readable bytes as a chain (zero copy).
    pub fn recv_buf(&mut self, max: usize) -> Option<PacketBuf> {
        let mut out = PacketBuf::new();
        while out.len() < max {
            let Some(mut front) = self.recv_queue.pop_front() else {
                break;
            };
            let want = max - out.len();
            if front.len() > want {
                let rest = front.split_off(want);
                self.recv_queue.push_front(rest);
            }
            out.append(front);
        }
        if out.is_empty() {
            return None;
        }
        self.recv_bytes -= out.len();
        self.maybe_window_update();
        Some(out)
    }

    /// Copies up to `buf.len()` readable bytes into `buf`.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        let mut copied = 0;
        while copied < buf.len() {
            let Some(front) = self.recv_queue.front_mut() else {
                break;
            };
            let n = front.copy_out(0, &mut buf[copied..]);
            copied += n;
            if n >= front.len() {
                self.recv_queue.pop_front();
            } else {
                front.trim_front(n);
            }
        }
        self.recv_bytes -= copied;
        if copied > 0 {
            self.maybe_window_update();
        }
        copied
    }

    /// Sets the send buffer limit (SO_SNDBUF). It grows at once; it shrinks
    /// no lower than the bytes already queued, which are owed to the peer.
    /// A size set this way ends autotuning, as SO_SNDBUF does in Linux.
    /// Returns the limit in force.
    pub fn set_send_buffer(&mut self, bytes: usize) -> usize {
        let limit = bytes.max(self.send_queue.len());
        self.send_queue.set_limit(limit);
        self.config.set_send_buffer(limit);
        self.send_tuning.fix(limit);
        limit
    }

    /// Moves the send buffer's ceiling to `bytes` (within the buffer and
    /// the largest autotuning grows to), for an owner that grants buffer
    /// growth: a growth the old ceiling held back happens at once. A
    /// buffer whose size was set keeps it. Returns the ceiling in force.
    pub fn set_send_buffer_ceiling(&mut self, bytes: usize) -> usize {
        if self.send_tuning.set_ceiling(bytes) {
            self.send_queue.set_limit(self.send_tuning.buffer());
        }
        self.send_tuning.ceiling()
    }

    /// Sets the receive buffer limit (SO_RCVBUF), which bounds the window
    /// offered. It shrinks no lower than what is held (readable and out of
    /// order); a window already offered is still honoured, since its right
    /// edge never moves left (RFC 9293 3.8.6.2.2): it closes as data fills
    /// it. A larger buffer is offered at once when it opens the window by
    /// a worthwhile step; the window scale, fixed by the handshake, caps
    /// what can be offered. A size set this way ends autotuning, as
    /// SO_RCVBUF does in Linux. Returns the limit in force.
    pub fn set_recv_buffer(&mut self, bytes: usize) -> usize {
        let held = self.recv_bytes + self.assembler.bytes();
        let limit = bytes.max(held).max(1);
        self.config.set_recv_buffer(limit);
        self.recv_tuning.fix(limit);
        self.assembler.set_limits(AssemblerLimits { max_segments: self.config.max_ooo_segments, max_bytes: limit });
        if self.state.is_synchronized() {
            self.maybe_window_update();
        }
        limit
    }

    /// Starts a new connection's buffers at `send` and `recv` bytes, for
    /// an owner that grants buffers from a budget and has less room than
    /// the configuration asked: each shrinks as
    /// [`Connection::set_send_buffer`] and [`Connection::set_recv_buffer`]
    /// shrink it (never below what is held), but autotuning still runs,
    /// its ceiling at the new size, and asks for more as use needs. A
    /// window the handshake offered already (at most 64 KiB, unscaled) is
    /// honoured: the buffer may hold that much until it closes.
    /// A size the application set is not kept: it shrinks and stays
    /// fixed. Returns the sizes in force.
    pub fn start_buffers(&mut self, send: usize, recv: usize) -> (usize, usize) {
        let send = if !self.config.send_autotune {
            self.set_send_buffer(send)
        } else {
            let limit = send.max(self.send_queue.len());
            self.send_queue.set_limit(limit);
            self.send_tuning.start_at(limit);
            self.config.send_buffer = limit;
            limit
        };
        let recv = if !self.config.recv_autotune {
            self.set_recv_buffer(recv)
        } else {
            let held = self.recv_bytes + self.assembler.bytes();
            let limit = recv.max(held).max(1);
            // A SYN sent again offers no more than the new size.
            self.config.recv_buffer = limit;
            self.recv_tuning.start_at(limit);
            self.assembler.set_limits(AssemblerLimits { max_segments: self.config.max_ooo_segments, max_bytes: limit });
            if self.state.is_synchronized() {
                self.maybe_window_update();
            }
            limit
        };
        (send, recv)
    }

    /// Moves the receive buffer's ceiling to `bytes` (within the buffer
    /// and the largest the window scale allows), for an owner that grants
    /// buffer growth: a growth the old ceiling held back happens at once
    /// and is offered. A buffer whose size was set keeps it. Returns the
    /// ceiling in force.
    pub fn set_recv_buffer_ceiling(&mut self, bytes: usize) -> usize {
        if self.recv_tuning.set_ceiling(bytes) {
            self.assembler.raise_max_bytes(self.recv_tuning.buffer());
            if self.state.is_synchronized() {
                self.maybe_window_update();
            }
        }
        self.recv_tuning.ceiling()
    }

    /// The owner refuses the receive buffer growth autotuning wanted past
    /// the ceiling: [`Connection::recv_buffer_wanted`] is the ceiling
    /// until the next measurement asks again (see
    /// [`RecvTuning::refuse_growth`]).
    pub fn refuse_recv_buffer_growth(&mut self) {
        self.recv_tuning.refuse_growth();
    }

    /// The owner refuses the send buffer growth autotuning wanted past the
    /// ceiling: [`Connection::send_buffer_wanted`] is the ceiling until a
    /// buffer's worth of bytes has been acknowledged (see
    /// [`SendTuning::refuse_growth`]).
    pub fn refuse_send_buffer_growth(&mut self) {
        self.send_tuning.refuse_growth();
    }

    /// Sets how long transmitted data may stay unacknowledged before the
    /// connection is dropped with `TimedOut` (TCP_USER_TIMEOUT, RFC 5482);
    /// `None` leaves it to the retransmission count (R2).
    pub fn set_user_timeout(&mut self, limit: Option<Duration>) {
        self.config.user_timeout = limit;
    }

    /// Whether a close resets the connection (`SO_LINGER` with a zero
    /// time) rather than sending what was queued and a FIN.
    pub fn set_reset_on_close(&mut self, reset: bool) {
        self.config.reset_on_close = reset;
    }

    /// Sets keepalive (`SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`,
    /// `TCP_KEEPCNT`): probes after `idle` without a segment received
    /// (`None`: none), every `interval`, `probes` unanswered before the
    /// connection fails. The next probe is due from the new settings.
    pub fn set_keepalive(&mut self, idle: Option<Duration>, interval: Duration, probes: u32) {
        self.config.keepalive = idle;
        self.config.keepalive_interval = interval;
        self.config.keepalive_probes = probes;
    }

    /// Shuts the receiving side (SHUT_RD): what is queued is dropped, and
    /// data arriving later is acknowledged and dropped, so the window stays
    /// open and a later close is not a reset over unread data (as BSD does;
    /// Linux keeps queueing until the window closes). Reads see end of
    /// stream.
    pub fn shutdown_read(&mut self) {
        self.read_shut = true;
        self.discard_received();
    }

    /// Drops what was received and not read; tells the peer if that opens
    /// the window enough to matter.
    fn discard_received(&mut self) {
        if self.recv_bytes == 0 {
            return;
        }
        self.recv_queue.clear();
        self.recv_bytes = 0;
        self.maybe_window_update();
    }

    /// A connection still opening cannot reach its peer: its next hop
    /// never answered address resolution, or an ICMP error about its SYN
    /// came back. The connect fails with `error` (a connection already
    /// open rides such errors out, as RFC 1122 4.2.3.9 and RFC 5461 have
    /// it: its retransmissions ask again). Returns whether it failed.
    pub fn unreachable(&mut self, error: TcpError) -> bool {
        if self.state != State::SynSent {
            return false;
        }
        self.error = Some(error);
        self.enter_closed();
        true
    }

    /// The path to the peer carries segments of at most `mss` bytes after
    /// the TCP header (its MTU less the IP and TCP headers, RFC 1191 and
    /// RFC 8201): the send MSS and congestion control's follow it down,
    /// and what is in flight, sent at the old size and dropped on the way,
    /// goes again at once at the new one without a congestion response
    /// (Linux's `tcp_simple_retransmit`). Before the peer's SYN is seen,
    /// the limit waits for it. Returns whether the send MSS went down.
    pub fn path_mss_lowered(&mut self, mss: usize) -> bool {
        let mss = mss.max(64);
        self.path_mss = self.path_mss.min(mss);
        if self.state == State::SynSent || mss >= self.options.send_mss {
            return false;
        }
        self.options.send_mss = mss;
        self.congestion.set_mss(self.effective_mss());
        self.stats.path_mtu_drops += 1;
        if self.state.is_synchronized() && self.snd_una != self.snd_max {
            self.recovery = None;
            self.retransmit_one = None;
            self.tail_probe.forget();
            self.rack.clear();
            self.dupacks = 0;
            self.limited_sent = 0;
            self.scoreboard.clear();
            // Karn: no RTT sample from what goes twice.
            self.rtt_probe = None;
            self.snd_nxt = self.snd_una;
        }
        true
    }

    /// The path to the peer carries segments of `mss` bytes after the TCP
    /// header again (a lowered path MTU expired, RFC 1191 6.3, RFC 8201
    /// 4): the send MSS and congestion control's go back up as far as the
    /// peer's MSS allows. What is in flight stays as it was sent. Before
    /// the peer's SYN is seen, the limit waits for it. Returns whether the
    /// send MSS went up.
    pub fn path_mss_raised(&mut self, mss: usize) -> bool {
        self.path_mss = mss.max(64);
        let mss = self.peer_mss.min(self.path_mss);
        if self.state == State::SynSent || mss <= self.options.send_mss {
            return false;
        }
        self.options.send_mss = mss;
        self.congestion.set_mss(self.effective_mss());
        true
    }

    /// Whether `seq` lies in what was sent and not yet acknowledged
    /// (SND.UNA up to the highest sequence sent): an ICMP error quoting a
    /// segment of this connection must quote one of these (RFC 5927 4.1).
    pub fn sent_unacknowledged(&self, seq: TcpSeqNumber) -> bool {
        seq_le(self.snd_una, seq) && seq_lt(seq, self.snd_max)
    }

    /// Closes our sending side: a FIN follows the queued data.
    pub fn shutdown(&mut self) {
        match self.state {
            // Data queued before the handshake is owed to the peer: the
            // FIN follows it once the connection is established.
            State::SynSent if !self.send_queue.is_empty() => self.fin_queued = true,
            State::SynSent => self.state = State::Closed,
            State::SynReceived | State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Closes both sides. Unread data makes it an abort (RFC 2525 2.17:
    /// the peer must learn its data was not consumed). A connection still
    /// opening is deleted with what it had queued (RFC 9293 3.10.4, CLOSE
    /// in SYN-SENT): nobody holds the socket to hear how its data fared,
    /// and a handshake that may take minutes must not keep the buffers of
    /// an owner that has gone. `shutdown` alone still delivers them first.
    /// With `reset_on_close` (`SO_LINGER` with a zero time) it is an abort
    /// too. Once its FIN is acknowledged, the connection waits for the
    /// peer's at most `fin_timeout`.
    pub fn close(&mut self, now: Instant) {
        self.read_closed = true;
        if self.recv_bytes > 0 || self.state == State::SynSent || self.config.reset_on_close {
            self.abort();
            return;
        }
        self.shutdown();
        if self.state == State::FinWait2 {
            self.arm_fin_timeout(now);
        }
    }

    /// Resets the connection.
    pub fn abort(&mut self) {
        if self.state.is_synchronized() || self.state == State::SynReceived {
            self.rst_due = true;
        } else {
            self.state = State::Closed;
        }
        self.send_queue.consume(usize::MAX);
        self.recv_queue.clear();
        self.recv_bytes = 0;
        self.assembler.clear();
    }

    // ---- input -----------------------------------------------------------

    fn take_peer_syn(&mut self, syn: &TcpRepr, now: Instant) {
        self.irs = syn.seq_number;
        self.rcv_nxt = syn.seq_number + 1;
        self.rcv_adv = self.rcv_nxt;
        let peer_mss = syn.max_seg_size.map_or(DEFAULT_MSS, usize::from);
        self.peer_mss = peer_mss.clamp(64, self.local_mss.max(64));
        self.options.send_mss = self.peer_mss.min(self.path_mss);
        match (self.config.window_scaling, syn.window_scale) {
            (true, Some(shift)) => {
                self.options.snd_shift = shift.min(MAX_WINDOW_SHIFT);
                // Our SYN, if it went first, offered a shift: the peer
                // scales our windows by that one, whatever the buffer has
                // been resized to since.
                if self.state != State::SynSent {
                    self.options.rcv_shift = window_shift_for(self.config.recv_buffer_limit());
                }
            }
            _ => {
                self.options.snd_shift = 0;
                self.options.rcv_shift = 0;
            }
        }
        self.options.sack = self.config.sack && syn.sack_permitted;
        match (self.config.timestamps, syn.timestamp) {
            (true, Some((tsval, _))) => {
                self.options.timestamps = true;
                self.ts_recent = tsval;
                self.ts_recent_at = now;
            }
            _ => self.options.timestamps = false,
        }
        // The window in a SYN is never scaled (RFC 7323 2.2).
        self.snd_wnd = usize::from(syn.window_len);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = syn.seq_number;
        self.congestion.set_mss(self.effective_mss());
    }

    /// Largest payload per segment, after timestamp option space.
    fn effective_mss(&self) -> usize {
        let ts = if self.options.timestamps { 12 } else { 0 };
        self.options.send_mss.saturating_sub(ts).max(1)
    }

    fn ts_now(&self, now: Instant) -> u32 {
        (now.total_millis() as u32).wrapping_add(self.ts_offset)
    }

    fn receive_window(&self) -> usize {
        self.recv_tuning.buffer().saturating_sub(self.recv_bytes + self.assembler.bytes())
    }

    /// Lets autotuning see the in-order data that arrived, and the
    /// reassembly limit follow a buffer that grew.
    fn tune_recv_buffer(&mut self, now: Instant) {
        let consumed = self.rcv_nxt - self.recv_bytes;
        if self.recv_tuning.on_data(now, self.rcv_nxt, consumed, self.rtt.srtt(), self.local_mss) {
            self.assembler.raise_max_bytes(self.recv_tuning.buffer());
        }
    }

    /// Processes one segment addressed to this connection.
    pub fn process(&mut self, seg: &TcpRepr, payload: PacketBuf, now: Instant) -> Processed {
        self.stats.segments_received += 1;
        self.last_recv_at = now;
        self.keepalive_sent = 0;
        match self.state {
            State::Closed => Processed::default(),
            State::SynSent => self.process_syn_sent(seg, now),
            _ => self.process_synchronized(seg, payload, now),
        }
    }

    fn process_syn_sent(&mut self, seg: &TcpRepr, now: Instant) -> Processed {
        let mut result = Processed::default();
        let flags = seg.flags;
        if let Some(ack) = seg.ack_number {
            if seq_le(ack, self.iss) || seq_lt(self.snd_max, ack) {
                if !flags.contains(TcpFlags::RST) {
                    result.reset_reply = Some(ack);
                }
                return result;
            }
        }
        if flags.contains(TcpFlags::RST) {
            if seg.ack_number.is_some() {
                self.state = State::Closed;
                self.error = Some(TcpError::Refused);
                result.reset = true;
            }
            return result;
        }
        if !flags.contains(TcpFlags::SYN) {
            return result;
        }
        result.accepted = true;
        self.take_peer_syn(seg, now);
        if let Some(ack) = seg.ack_number {
            self.snd_una = ack;
            self.on_handshake_acked(now);
            self.state = self.established_state();
            // take_peer_syn took the SYN-ACK's window as it is: the window
            // of a SYN is never scaled (RFC 7323 2.2).
            self.snd_wl2 = ack;
            self.syn_due = false;
            self.retransmit_at = None;
            self.ack_now = true;
            result.established = true;
        } else {
            // Simultaneous open (RFC 9293 3.5, figure 8).
            self.state = State::SynReceived;
            self.syn_due = true;
        }
        result
    }

    /// RFC 9293 3.10.7.4's acceptability test.
    fn acceptable(&self, seq: TcpSeqNumber, len: usize) -> bool {
        let wnd = seq_dist(self.rcv_nxt, self.rcv_adv).max(self.receive_window());
        let end = self.rcv_nxt + wnd;
        match (len, wnd) {
            (0, 0) => seq == self.rcv_nxt,
            // At the right edge too (as Linux's tcp_sequence): a sender
            // that filled our window, and then lost part of it, sends its
            // pure ACKs from there; refusing them loses their ACK and
            // SACK information, and when both sides are in that spot,
            // the connection.
            (0, _) => seq_le(self.rcv_nxt, seq) && seq_le(seq, end),
            (_, 0) => false,
            (_, _) => {
                let last = seq + (len - 1);
                (seq_le(self.rcv_nxt, seq) && seq_lt(seq, end)) || (seq_le(self.rcv_nxt, last) && seq_lt(last, end))
            }
        }
    }

    fn challenge_ack(&mut self, now: Instant, result: &mut Processed) {
        let limited = self.last_challenge_at.is_some_and(|at| now.saturating_since(at) < CHALLENGE_ACK_INTERVAL);
        if !limited {
            self.last_challenge_at = Some(now);
            self.ack_now = true;
            self.stats.challenge_acks += 1;
        }
        result.challenged = true;
    }

    fn process_synchronized(&mut self, seg: &TcpRepr, mut payload: PacketBuf, now: Instant) -> Processed {
        let mut result = Processed::default();
        let flags = seg.flags;
        let seg_len =
            payload.len() + usize::from(flags.contains(TcpFlags::SYN)) + usize::from(flags.contains(TcpFlags::FIN));

        // PAWS (RFC 7323 5.3): an old timestamp means an old duplicate.
        if self.options.timestamps && !flags.contains(TcpFlags::RST) {
            if let Some((tsval, _)) = seg.timestamp {
                let idle_too_long = now.saturating_since(self.ts_recent_at) > Duration::from_secs(24 * 24 * 3600);
                if (tsval.wrapping_sub(self.ts_recent) as i32) < 0 && !idle_too_long {
                    self.stats.paws_drops += 1;
                    self.ack_now = true;
                    return result;
                }
            }
        }

        // The peer's SYN again while we are in SYN-RECEIVED. Its sequence
        // number is below rcv_nxt, so the test below would only answer it
        // with an ACK, which SYN-RECEIVED does not send.
        if self.state == State::SynReceived
            && flags.contains(TcpFlags::SYN)
            && !flags.contains(TcpFlags::RST)
            && seg.seq_number == self.irs
        {
            match seg.ack_number {
                // Our SYN-ACK was lost: send it again.
                None => self.syn_due = true,
                // Simultaneous open (RFC 9293 figure 8): the peer's SYN-ACK
                // acknowledges our SYN; answer with an ACK (as Linux does).
                Some(ack) if ack == self.iss + 1 => {
                    self.establish_from_syn_received(seg, ack, now);
                    // The window of a SYN is not scaled (RFC 7323 2.2).
                    self.snd_wnd = usize::from(seg.window_len);
                    self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                    self.ack_now = true;
                    result.accepted = true;
                    result.established = true;
                }
                Some(_) => {}
            }
            return result;
        }

        // Sequence number check.
        if !self.acceptable(seg.seq_number, seg_len) {
            if !flags.contains(TcpFlags::RST) {
                if self.state == State::TimeWait && flags.contains(TcpFlags::FIN) {
                    self.restart_time_wait(now);
                }
                // Answer with an ACK, but answer bare ACKs out of the window
                // only now and then: two ends that each find the other's
                // ACKs unacceptable must not feed each other forever (Linux
                // rate-limits these the same way).
                // A probe (zero-window or keepalive: one byte below
                // rcv_nxt, no data) is always answered: it exists to get
                // that answer, and its sender already spaces probes out.
                let probe = seg_len == 0 && seg.seq_number + 1 == self.rcv_nxt;
                let limited = seg_len == 0
                    && !probe
                    && self.last_oow_ack_at.is_some_and(|at| now.saturating_since(at) < OUT_OF_WINDOW_ACK_INTERVAL);
                if limited {
                    return result;
                }
                self.last_oow_ack_at = Some(now);
                self.ack_now = true;
                if seg_len > 0 && seq_lt(seg.seq_number, self.rcv_nxt) {
                    self.stats.duplicate_bytes += payload.len() as u64;
                }
            }
            return result;
        }

        // RST (RFC 5961 3.2): only an exact match resets.
        if flags.contains(TcpFlags::RST) {
            if seg.seq_number == self.rcv_nxt {
                // In TIME-WAIT both ends have closed and what arrived is
                // all here, its end included: the RST (a peer that has
                // forgotten the connection answering a late ACK) ends the
                // wait, and reads still give the data and then the end.
                if self.state != State::TimeWait {
                    self.error = Some(match self.state {
                        State::SynReceived => TcpError::Refused,
                        _ => TcpError::Reset,
                    });
                }
                self.enter_closed();
                result.reset = true;
            } else {
                self.challenge_ack(now, &mut result);
            }
            return result;
        }

        // SYN in a synchronized state (RFC 5961 4.2): challenge.
        if flags.contains(TcpFlags::SYN) {
            if self.state == State::SynReceived && seg.seq_number == self.irs {
                // Our SYN-ACK was lost: the peer's SYN came again.
                self.syn_due = true;
                return result;
            }
            self.challenge_ack(now, &mut result);
            return result;
        }

        let Some(ack) = seg.ack_number else {
            return result;
        };
        result.accepted = true;

        if self.state == State::SynReceived {
            if seq_lt(self.snd_una, ack) && seq_le(ack, self.snd_max) {
                self.establish_from_syn_received(seg, ack, now);
                self.snd_wnd = usize::from(seg.window_len) << self.options.snd_shift;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                result.established = true;
            } else {
                result.reset_reply = Some(ack);
                return result;
            }
        }

        // ACK validity (RFC 5961 5.2 and RFC 9293).
        if seq_lt(self.snd_max, ack) {
            self.ack_now = true;
            return result;
        }
        let slack = self.max_snd_wnd.max(MIN_ACK_SLACK);
        if seq_lt(ack, self.snd_una - slack) {
            self.ack_now = true;
            return result;
        }

        // Timestamp bookkeeping (RFC 7323 4.3), only for a segment that
        // passed every check, its ACK included: a blind segment in the
        // window with a bogus ACK and a far-future TSval must not move
        // TS.Recent, or PAWS would drop all that the real peer sends next
        // (RFC 5961 5.2).
        if let (true, Some((tsval, _))) = (self.options.timestamps, seg.timestamp) {
            if seq_le(seg.seq_number, self.last_ack_sent) && (tsval.wrapping_sub(self.ts_recent) as i32) >= 0 {
                self.ts_recent = tsval;
                self.ts_recent_at = now;
            }
        }

        result.acked = self.process_ack(seg, ack, payload.len(), now);

        // Our FIN acknowledged?
        let fin_acked = self.fin_acked();
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
                if self.read_closed {
                    self.arm_fin_timeout(now);
                }
            }
            State::Closing if fin_acked => self.enter_time_wait(now),
            State::LastAck if fin_acked => {
                self.enter_closed();
                return result;
            }
            State::TimeWait => {
                // Only a FIN is expected here: acknowledge it and restart
                // the 2 MSL (RFC 9293 3.10.7.4). Data, which has no place
                // after the peer's FIN, is acknowledged too, so the peer
                // hears where the stream ended; a bare ACK is not, or two
                // ends could keep acknowledging each other's ACKs.
                if flags.contains(TcpFlags::FIN) {
                    self.ack_now = true;
                    self.restart_time_wait(now);
                } else if !payload.is_empty() {
                    self.ack_now = true;
                }
                return result;
            }
            _ => {}
        }

        // The FIN, if any, follows the payload as it arrived (before any
        // trimming below).
        let fin_seq = seg.seq_number + payload.len();

        // Data.
        if !payload.is_empty() {
            match self.state {
                State::Established | State::FinWait1 | State::FinWait2 => {
                    if self.read_closed {
                        // Nobody will read it: tell the peer (RFC 9293 3.10.4).
                        self.rst_due = true;
                        return result;
                    }
                    result.readable = self.receive_data(seg.seq_number, &mut payload);
                    if self.read_shut {
                        self.discard_received();
                        result.readable = 0;
                    } else {
                        self.tune_recv_buffer(now);
                    }
                }
                _ => {}
            }
        }

        // FIN.
        if flags.contains(TcpFlags::FIN) {
            if fin_seq == self.rcv_nxt {
                self.receive_fin(now);
            } else if seq_lt(self.rcv_nxt, fin_seq) {
                self.pending_fin = Some(fin_seq);
                self.ack_now = true;
            }
        }
        result
    }

    fn fin_acked(&self) -> bool {
        self.snd_fin.is_some_and(|fin| seq_lt(fin, self.snd_una))
    }

    /// Sequence number just after the last byte of data queued.
    fn data_end(&self) -> TcpSeqNumber {
        match self.snd_fin {
            // Once the FIN is acknowledged snd_una is past it.
            Some(fin) => fin,
            None => self.snd_una + self.send_queue.len(),
        }
    }

    /// SYN-RECEIVED to ESTABLISHED: our SYN is acknowledged by `seg`.
    fn establish_from_syn_received(&mut self, seg: &TcpRepr, ack: TcpSeqNumber, now: Instant) {
        self.state = self.established_state();
        self.syn_due = false;
        self.snd_una = self.iss + 1;
        self.on_handshake_acked(now);
        self.snd_wl1 = seg.seq_number;
        self.snd_wl2 = ack;
    }

    /// ESTABLISHED, or FIN-WAIT-1 when the application closed its side
    /// during the handshake.
    fn established_state(&self) -> State {
        if self.fin_queued {
            State::FinWait1
        } else {
            State::Established
        }
    }

    fn on_handshake_acked(&mut self, now: Instant) {
        if let Some((seq, sent_at)) = self.rtt_probe.take() {
            if seq == self.iss && self.rtt.backoff_count() == 0 {
                self.rtt.sample(now.saturating_since(sent_at), &self.config.rtt);
            }
        }
        // After a SYN timeout this also keeps the RTO at 3 s or more until
        // the first sample (RFC 6298 5.7).
        self.rtt.on_handshake_complete();
        self.retransmit_at = None;
        self.unacked_since = None;
        self.congestion = Congestion::new(self.config.congestion, self.effective_mss());
        self.snd_nxt = self.snd_nxt.max(self.iss + 1);
        self.snd_max = self.snd_max.max(self.iss + 1);
    }

    fn update_send_window(&mut self, seg: &TcpRepr) {
        let Some(ack) = seg.ack_number else {
            return;
        };
        if seq_lt(self.snd_wl1, seg.seq_number) || (self.snd_wl1 == seg.seq_number && seq_le(self.snd_wl2, ack)) {
            self.snd_wnd = usize::from(seg.window_len) << self.options.snd_shift;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq_number;
            self.snd_wl2 = ack;
        }
    }

    fn in_flight_for_cc(&self) -> usize {
        seq_dist(self.snd_una, self.snd_max)
    }

    /// Handles the ACK field; returns bytes newly acknowledged.
    fn process_ack(&mut self, seg: &TcpRepr, ack: TcpSeqNumber, payload_len: usize, now: Instant) -> usize {
        let old_window = self.snd_wnd;
        self.update_send_window(seg);
        let window_changed = self.snd_wnd != old_window;
        if self.snd_wnd > 0 {
            self.persist_at = None;
            self.persist_backoff = 0;
        }

        let mut sack_new = 0;
        let mut dsack = None;
        if self.options.sack {
            let mut block_store = [(0u32, 0u32); 4];
            let mut count = 0;
            for (slot, block) in block_store.iter_mut().zip(seg.sack_ranges.iter().flatten()) {
                *slot = *block;
                count += 1;
            }
            let blocks = &block_store[..count];
            if !blocks.is_empty() {
                // The scoreboard wants the cumulative ACK after this segment,
                // so that blocks below it read as D-SACKs (RFC 2883).
                let una = if seq_lt(self.snd_una, ack) && seq_le(ack, self.snd_max) { ack } else { self.snd_una };
                let update = self.scoreboard.update(blocks, una, self.snd_max);
                (sack_new, dsack) = (update.newly_sacked, update.dsack);
            }
        }
        if self.tail_probe.on_ack(ack, seq_lt(self.snd_una, ack), sack_new > 0, dsack) {
            // The probe repaired a loss: respond as fast recovery would.
            self.congestion.on_congestion_event(self.in_flight_for_cc(), now);
        }
        let rack_lost = self.options.sack && self.mark_lost_by_time(now, false);

        if seq_lt(self.snd_una, ack) {
            let flight_before = self.in_flight_for_cc();
            let free_before = self.send_queue.free();
            let acked_seq = seq_dist(self.snd_una, ack);
            // SYN and FIN take sequence space but no queue bytes.
            let data_acked = acked_seq.min(self.send_queue.len());
            self.send_queue.consume(data_acked);
            self.snd_una = ack;
            // Keep snd_sml within reach of snd_una, so that sequence
            // comparisons with it never wrap.
            if seq_lt(self.snd_sml, ack) {
                self.snd_sml = ack;
            }
            if seq_lt(self.snd_nxt, ack) {
                self.snd_nxt = ack;
            }
            self.scoreboard.advance(ack);
            self.rack.advance(ack);
            self.dupacks = 0;
            self.limited_transmit = 0;
            self.limited_sent = 0;

            // RTT: a timestamp echo, else the timed segment (Karn's rule).
            let mut sample = None;
            if let (true, Some((_, tsecr))) = (self.options.timestamps, seg.timestamp) {
                let ticks = self.ts_now(now).wrapping_sub(tsecr);
                if ticks < 60_000 && tsecr != 0 {
                    sample = Some(Duration::from_millis(u64::from(ticks)));
                }
            }
            if let Some((seq, sent_at)) = self.rtt_probe {
                if seq_lt(seq, ack) {
                    self.rtt_probe = None;
                    sample = Some(now.saturating_since(sent_at));
                }
            }
            if let Some(rtt) = sample {
                self.rtt.sample(rtt, &self.config.rtt);
            }
            self.rtt.reset_backoff();

            match self.recovery {
                Some(rec) if seq_lt(ack, rec.recover) => {
                    // Partial ACK: the next hole is lost too (RFC 6582 3.2).
                    if !self.options.sack {
                        // Deflate by what was acked, add back one segment
                        // (RFC 6582 3.2 step 3), resend the next hole.
                        let mss = self.effective_mss();
                        let rec = self.recovery.get_or_insert(rec);
                        rec.inflation = rec.inflation.saturating_sub(acked_seq).saturating_add(mss);
                        self.retransmit_one = Some(self.snd_una);
                    }
                }
                Some(_) => {
                    // Full ACK: recovery is over.
                    self.recovery = None;
                }
                None => {
                    let app_limited = flight_before < self.congestion.cwnd();
                    self.congestion.on_ack(acked_seq, flight_before, app_limited, sample, now);
                }
            }
            if self.send_tuning.on_ack(data_acked, free_before, self.in_flight_for_cc(), self.congestion.cwnd()) {
                self.send_queue.set_limit(self.send_tuning.buffer());
            }

            if self.snd_una == self.snd_max {
                self.retransmit_at = None;
                self.unacked_since = None;
            } else {
                self.retransmit_at = Some(now + self.rto());
                self.unacked_since = Some(now);
            }
            // An ACK that moves SND.UNA and SACKs new data above it (the
            // answer to a tail loss probe sent past a hole) is a duplicate
            // ACK too (RFC 6675 2): the holes below the SACKed data may be
            // lost already.
            if self.options.sack && self.recovery.is_none() && self.snd_una != self.snd_max {
                let mss = self.effective_mss();
                let revealed = self.tail_probe.revealed_loss(self.scoreboard.highest_sacked());
                let lost = rack_lost
                    || revealed.is_some()
                    || (sack_new > 0 && self.scoreboard.is_lost(self.snd_una, mss, self.config.dup_thresh));
                if lost {
                    if let Some(probe) = revealed {
                        self.scoreboard.mark_lost_below(probe);
                    }
                    self.enter_recovery(now);
                }
            }
            self.arm_tail_probe(now);
            return data_acked;
        }

        // A duplicate ACK (RFC 5681 2): nothing new acked, no data, same
        // window, data outstanding. Not while the window is shut: then the
        // ACKs answer probes (as in Linux, which does not count them
        // either). With SACK, an ACK that SACKs new data counts as well,
        // whatever its window or payload (RFC 6675 2): a receiver that
        // reads between two ACKs changes its window.
        let outstanding = self.snd_una != self.snd_max;
        let classic = payload_len == 0 && !window_changed && self.snd_wnd > 0 && !seg.flags.contains(TcpFlags::FIN);
        let sacks_new = self.options.sack && sack_new > 0;
        if ack == self.snd_una && outstanding && (classic || sacks_new) {
            self.dupacks += 1;
            let mss = self.effective_mss();
            let revealed = self.tail_probe.revealed_loss(self.scoreboard.highest_sacked());
            let lost = if self.options.sack {
                self.dupacks >= self.config.dup_thresh
                    || (sack_new > 0 && self.scoreboard.is_lost(self.snd_una, mss, self.config.dup_thresh))
                    || revealed.is_some()
                    || rack_lost
            } else {
                self.dupacks >= self.config.dup_thresh
            };
            match &mut self.recovery {
                None if lost => {
                    if let Some(probe) = revealed {
                        self.scoreboard.mark_lost_below(probe);
                    }
                    self.enter_recovery(now);
                }
                Some(rec) if !self.options.sack => rec.inflation += mss,
                // Limited Transmit (RFC 3042, RFC 5681 3.2): the first two
                // duplicate ACKs each let one new segment go, cwnd left as
                // it is. With SACK only an ACK with news does (RFC 3042 2:
                // a duplicated or forged ACK must not release data).
                None if self.dupacks <= 2 && (!self.options.sack || sack_new > 0) => self.limited_transmit += 1,
                _ => {}
            }
        }
        0
    }

    /// Loss detected (RFC 6675 or RACK): fast retransmit and recovery.
    fn enter_recovery(&mut self, now: Instant) {
        let mss = self.effective_mss();
        self.tail_probe.forget();
        // Segments Limited Transmit sent are not part of the flight that
        // sets ssthresh (RFC 5681 3.2 step 2).
        let flight = self.in_flight_for_cc().saturating_sub(self.limited_sent);
        self.congestion.on_congestion_event(flight, now);
        self.stats.fast_recoveries += 1;
        self.recovery = Some(Recovery {
            recover: self.snd_max,
            high_rxt: self.snd_una,
            inflation: if self.options.sack { 0 } else { self.config.dup_thresh * mss },
        });
        // Retransmit the first unacknowledged segment now; it also marks
        // where a rescue may start (RFC 6675 4.3).
        self.retransmit_one = Some(self.snd_una);
        if self.options.sack {
            let first_end = self.snd_una + self.payload_limit().min(seq_dist(self.snd_una, self.snd_max));
            self.scoreboard.set_rescue_rxt(Some(first_end));
        }
    }

    /// RACK's verdict on an ACK (or, `timer`, when its reordering timer
    /// fired) marked in the scoreboard; whether anything at `snd_una` or
    /// above is lost.
    fn mark_lost_by_time(&mut self, now: Instant, timer: bool) -> bool {
        let (min_rtt, srtt) = (self.rtt.min_rtt(), self.rtt.srtt());
        let verdict = if timer {
            self.rack.on_timer(now, self.snd_una, min_rtt, srtt)
        } else {
            self.rack.on_ack(now, self.snd_una, self.scoreboard.highest_sacked(), min_rtt, srtt)
        };
        match verdict {
            Some(seq) => {
                self.scoreboard.mark_lost_below(seq);
                true
            }
            None => false,
        }
    }

    fn receive_data(&mut self, seq: TcpSeqNumber, payload: &mut PacketBuf) -> usize {
        let window_end = self.rcv_nxt + self.receive_window().max(seq_dist(self.rcv_nxt, self.rcv_adv));
        // Trim what we already have.
        if seq_lt(seq, self.rcv_nxt) {
            let dup = seq_dist(seq, self.rcv_nxt).min(payload.len());
            self.stats.duplicate_bytes += dup as u64;
            payload.trim_front(dup);
        }
        let seq = self.rcv_nxt.max(seq);
        let room = seq_dist(seq, window_end);
        if payload.len() > room {
            self.stats.beyond_window_bytes += (payload.len() - room) as u64;
            payload.truncate(room);
        }
        if payload.is_empty() {
            self.ack_now = true;
            return 0;
        }
        if seq != self.rcv_nxt {
            let outcome = self.assembler.insert(seq, core::mem::take(payload), self.rcv_nxt, window_end);
            self.stats.ooo_bytes += outcome.stored as u64;
            // Out of order: a duplicate ACK at once (RFC 5681 4.2).
            self.ack_now = true;
            return 0;
        }
        let had_holes = !self.assembler.is_empty();
        let full = payload.len() >= self.local_mss.saturating_sub(40);
        let mut delivered = payload.len();
        self.rcv_nxt += payload.len();
        self.recv_bytes += payload.len();
        self.recv_queue.push_back(core::mem::take(payload));
        while let Some(more) = self.assembler.take_contiguous(self.rcv_nxt) {
            self.rcv_nxt += more.len();
            self.recv_bytes += more.len();
            delivered += more.len();
            self.recv_queue.push_back(more);
        }
        if let Some(fin_seq) = self.pending_fin {
            if fin_seq == self.rcv_nxt {
                self.pending_fin = None;
                self.receive_fin(self.last_recv_at);
            }
        }
        if full {
            self.segments_unacked += 1;
        }
        let rto = self.rto();
        self.quick_ack.data_received(self.last_recv_at, self.recv_tuning.buffer(), self.local_mss, rto);
        // PSH does not hurry the ACK (as in Linux): past the quick ACKs of
        // a connection's first data, a lone small segment is acknowledged
        // after the delay, or with the reply to it.
        if had_holes || self.segments_unacked >= 2 || self.config.delayed_ack.is_none() || self.quick_ack.ack_at_once()
        {
            self.ack_now = true;
        } else if self.delayed_ack_at.is_none() {
            if let Some(delay) = self.config.delayed_ack {
                self.delayed_ack_at = Some(self.last_recv_at + delay);
            }
        }
        delivered
    }

    fn receive_fin(&mut self, now: Instant) {
        if self.fin_received {
            return;
        }
        self.fin_received = true;
        self.rcv_nxt += 1;
        self.ack_now = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.retransmit_at = None;
        self.persist_at = None;
        self.delayed_ack_at = None;
        self.restart_time_wait(now);
    }

    fn restart_time_wait(&mut self, now: Instant) {
        self.fin_wait2_until = None;
        self.time_wait_until = Some(now + self.config.time_wait);
    }

    /// A closed connection in FIN-WAIT-2 waits at most the FIN timeout
    /// for the peer's FIN.
    fn arm_fin_timeout(&mut self, now: Instant) {
        self.fin_wait2_until = Some(now + self.config.fin_timeout);
    }

    fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.retransmit_at = None;
        self.persist_at = None;
        self.delayed_ack_at = None;
        self.time_wait_until = None;
        self.fin_wait2_until = None;
        self.send_queue.consume(usize::MAX);
        self.assembler.clear();
    }

    /// Whether a new SYN for this four-tuple may reuse a connection in
    /// TIME-WAIT (RFC 6191: its sequence or timestamp is beyond ours).
    pub fn time_wait_accepts(&self, syn: &TcpRepr) -> bool {
        if self.state != State::TimeWait {
            return false;
        }
        match (self.options.timestamps, syn.timestamp) {
            (true, Some((tsval, _))) => (tsval.wrapping_sub(self.ts_recent) as i32) > 0,
            _ => seq_lt(self.rcv_nxt, syn.seq_number),
        }
    }

    /// What a read tells the peer, as Linux's `tcp_cleanup_rbuf` does: a
    /// delayed ACK that covers more than one MSS goes at once (the read
    /// shows the data was taken; holding the ACK would only let the
    /// sender's tail loss probe fire), and a window update goes when the
    /// window a segment could say (clamped to what the scaled field holds)
    /// is at least twice the one still open and past it by at least the
    /// receiver's SWS step of RFC 9293 3.8.6.2.2, min(RCV.BUFF / 2, MSS).
    /// Two MSS here, so that a read of a small request leaves the update
    /// to the reply. Updating only on a doubling keeps a reader that
    /// drains in small pieces from sending one ACK per piece: the data's
    /// own ACKs carry the window meanwhile. Without window scaling a
    /// buffer above 64 KiB is mostly free space the field cannot show:
    /// counting it would send an ACK the same as the last one at every
    /// read.
    fn maybe_window_update(&mut self) {
        // After the peer's FIN nothing more comes to make room for; in
        // TIME-WAIT a peer that already closed would answer with a RST.
        if self.fin_received {
            return;
        }
        if self.delayed_ack_at.is_some() && seq_dist(self.last_ack_sent, self.rcv_nxt) > self.local_mss {
            self.ack_now = true;
            return;
        }
        let advertised = seq_dist(self.rcv_nxt, self.rcv_adv);
        let now_possible = self.advertisable(self.receive_window());
        let threshold = (self.recv_tuning.buffer() / 2).min(2 * self.local_mss);
        if now_possible >= advertised + threshold && now_possible >= 2 * advertised {
            self.ack_now = true;
        }
    }

    /// The largest window up to `wnd` that the window field can say with
    /// our shift.
    fn advertisable(&self, wnd: usize) -> usize {
        let shift = self.options.rcv_shift;
        (wnd.min(65535usize << shift) >> shift) << shift
    }

    // ---- output ------------------------------------------------------------

    /// The window to advertise, with receiver-side silly window syndrome
    /// avoidance (RFC 1122 4.2.3.3): the right edge moves only in steps of
    /// at least min(buffer/2, MSS), and never moves left.
    fn advertise_window(&mut self) -> u16 {
        let shift = self.options.rcv_shift;
        let free = self.receive_window();
        let current = seq_dist(self.rcv_nxt, self.rcv_adv);
        let step = (self.recv_tuning.buffer() / 2).min(self.local_mss);
        let wnd = if free >= current + step || free == self.recv_tuning.buffer() { free } else { current };
        // Round down to what the scaled field can say, then never shrink.
        let edge = self.rcv_nxt + self.advertisable(wnd);
        if seq_lt(self.rcv_adv, edge) {
            self.rcv_adv = edge;
        }
        let honest = seq_dist(self.rcv_nxt, self.rcv_adv);
        ((honest >> shift).min(65535)) as u16
    }

    fn base_repr(&mut self, seq: TcpSeqNumber, flags: TcpFlags, now: Instant) -> TcpRepr {
        let window_len = self.advertise_window();
        let mut repr = TcpRepr {
            window_len,
            ..TcpRepr::bare(self.local.port(), self.remote.port(), seq, Some(self.rcv_nxt), flags | TcpFlags::ACK)
        };
        if self.options.timestamps {
            repr.timestamp = Some((self.ts_now(now), self.ts_recent));
        }
        if self.options.sack && !self.assembler.is_empty() {
            let max = if self.options.timestamps { 3 } else { 4 };
            let (blocks, n) = self.assembler.sack_blocks(max);
            for (slot, block) in repr.sack_ranges.iter_mut().zip(blocks.iter().take(n)) {
                *slot = Some(*block);
            }
        }
        repr
    }

    fn syn_repr(&mut self, now: Instant) -> TcpRepr {
        let synack = self.state == State::SynReceived;
        let mut repr = TcpRepr {
            // The window in a SYN is not scaled.
            window_len: self.config.recv_buffer.min(65535) as u16,
            max_seg_size: Some(self.local_mss.min(65535) as u16),
            ..TcpRepr::bare(
                self.local.port(),
                self.remote.port(),
                self.iss,
                synack.then_some(self.rcv_nxt),
                if synack { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::SYN },
            )
        };
        if synack {
            if self.options.snd_shift > 0
                || self.options.rcv_shift > 0
                || self.config.window_scaling && self.peer_offered_ws()
            {
                repr.window_scale = Some(self.options.rcv_shift);
            }
            repr.sack_permitted = self.options.sack;
            if self.options.timestamps {
                repr.timestamp = Some((self.ts_now(now), self.ts_recent));
            }
        } else {
            if self.config.window_scaling {
                repr.window_scale = Some(self.options.rcv_shift);
            }
            repr.sack_permitted = self.config.sack;
            if self.config.timestamps {
                repr.timestamp = Some((self.ts_now(now), 0));
            }
        }
        self.rcv_adv = self.rcv_nxt + usize::from(repr.window_len);
        repr
    }

    fn peer_offered_ws(&self) -> bool {
        // Recorded in take_peer_syn: a zero shift still means "offered".
        self.options.rcv_shift > 0 || self.options.snd_shift > 0
    }

    /// Whether a segment of `len` new bytes should go now (sender-side SWS
    /// avoidance and Nagle, RFC 1122 4.2.3.4).
    fn worth_sending(&self, len: usize, unsent: usize, mss: usize) -> bool {
        if len == 0 {
            return false;
        }
        if len >= mss || self.sws_override {
            return true;
        }
        // Nagle as Minshall refined it (and Linux does): a small segment
        // waits only while an earlier small segment is unacknowledged, so
        // the tail of a write after full segments is not held back for an
        // ACK the peer may be delaying.
        let small_in_flight = seq_lt(self.snd_una, self.snd_sml);
        if len == unsent && (!small_in_flight || !self.config.nagle) {
            return true;
        }
        self.max_snd_wnd > 0 && len >= self.max_snd_wnd / 2
    }

    /// Hands every segment due now to `emit`, up to a burst limit.
    pub fn dispatch(&mut self, now: Instant, emit: &mut dyn FnMut(TcpRepr, PacketBuf)) {
        if self.rst_due {
            self.rst_due = false;
            // From the highest sequence sent: after an RTO snd_nxt steps
            // back, and a RST from there may fall below the peer's
            // rcv_nxt, out of its window.
            let mut repr = TcpRepr::bare(
                self.local.port(),
                self.remote.port(),
                self.snd_max,
                Some(self.rcv_nxt),
                TcpFlags::RST | TcpFlags::ACK,
            );
            // With timestamps in use a RST carries them too (RFC 7323
            // 3.2), so a peer that checks them on every segment takes it.
            if self.options.timestamps {
                repr.timestamp = Some((self.ts_now(now), self.ts_recent));
            }
            emit(repr, PacketBuf::new());
            self.stats.segments_sent += 1;
            self.enter_closed();
            return;
        }
        match self.state {
            State::Closed => {
                self.ack_now = false;
                return;
            }
            State::SynSent | State::SynReceived => {
                // Before the handshake completes there is nothing to
                // acknowledge but the SYN, which the SYN-ACK does.
                self.ack_now = false;
                if self.syn_due {
                    self.syn_due = false;
                    let repr = self.syn_repr(now);
                    if self.rtt_probe.is_none() && self.rtt.backoff_count() == 0 {
                        self.rtt_probe = Some((self.iss, now));
                    }
                    self.snd_nxt = self.iss + 1;
                    self.snd_max = self.snd_max.max(self.iss + 1);
                    self.retransmit_at = Some(now + self.rto());
                    self.last_ack_sent = self.rcv_nxt;
                    self.stats.segments_sent += 1;
                    emit(repr, PacketBuf::new());
                }
                return;
            }
            _ => {}
        }

        let mut sent = 0;
        if self.state != State::TimeWait {
            sent = self.send_segments(now, emit);
        }
        if sent == 0 && (self.ack_now || self.delayed_ack_at.is_some_and(|t| t <= now)) {
            if !self.ack_now {
                self.quick_ack.delayed_ack_fired();
            }
            // A pure ACK carries the highest sequence sent: after an RTO
            // snd_nxt steps back, and an ACK from below what the peer has
            // already received would be unacceptable to it and ignored.
            let seq = if self.probe_below_una { self.snd_una - 1 } else { self.snd_max };
            self.probe_below_una = false;
            let repr = self.base_repr(seq, TcpFlags::empty(), now);
            self.note_ack_sent();
            self.stats.segments_sent += 1;
            emit(repr, PacketBuf::new());
        }
    }

    fn note_ack_sent(&mut self) {
        self.quick_ack.ack_sent(self.last_ack_sent != self.rcv_nxt);
        self.ack_now = false;
        self.delayed_ack_at = None;
        self.segments_unacked = 0;
        self.last_ack_sent = self.rcv_nxt;
    }

    /// Largest payload of the next segment: the peer's MSS less the
    /// options this segment will carry (RFC 6691), so that a segment with
    /// timestamps and SACK blocks still fits the path.
    fn payload_limit(&self) -> usize {
        let mut options = if self.options.timestamps { 12 } else { 0 };
        if self.options.sack && !self.assembler.is_empty() {
            let max_blocks = if self.options.timestamps { 3 } else { 4 };
            let blocks = self.assembler.segments().clamp(1, max_blocks);
            options += 4 + 8 * blocks;
        }
        self.options.send_mss.saturating_sub(options).max(1)
    }

    /// Payload size of the segments a super-segment is cut into: the
    /// device must cut at this size for every piece to fit the path.
    pub fn segment_payload_limit(&self) -> usize {
        self.payload_limit()
    }

    /// Largest payload of one segment handed to the device: a multiple of
    /// `limit` when the device segments TCP itself, `limit` otherwise.
    fn super_segment_limit(&self, limit: usize) -> usize {
        let offload = self.config.segmentation_offload;
        if offload > limit {
            offload - offload % limit
        } else {
            limit
        }
    }

    /// Builds and hands out one segment of `len` bytes from `seq` (plus a
    /// FIN if `fin`), doing the bookkeeping every transmission needs.
    fn emit_segment(
        &mut self,
        seq: TcpSeqNumber,
        len: usize,
        fin: bool,
        retransmit: bool,
        now: Instant,
        emit: &mut dyn FnMut(TcpRepr, PacketBuf),
    ) -> bool {
        let offset = seq_dist(self.snd_una, seq);
        let payload = if len == 0 {
            PacketBuf::new()
        } else {
            match self.send_queue.slice(offset, len) {
                Some(p) => p,
                None => return false,
            }
        };
        let queue_end = self.data_end();
        let mut flags = TcpFlags::empty();
        if fin {
            flags |= TcpFlags::FIN;
            self.snd_fin = Some(queue_end);
        }
        if len > 0 && seq + len == queue_end {
            flags |= TcpFlags::PSH;
        }
        let mut repr = self.base_repr(seq, flags, now);
        repr.payload_len = len;
        let end = seq + (len + usize::from(fin));
        if retransmit {
            self.stats.retransmits += 1;
            if let Some(rec) = &mut self.recovery {
                if seq_lt(rec.high_rxt, end) {
                    rec.high_rxt = end;
                }
            }
            // Karn: a retransmitted segment gives no RTT sample.
            if let Some((probe, _)) = self.rtt_probe {
                if seq_le(seq, probe) && seq_lt(probe, end) {
                    self.rtt_probe = None;
                }
            }
        } else {
            if self.rtt_probe.is_none() {
                self.rtt_probe = Some((seq, now));
            }
            if len < self.payload_limit() {
                self.snd_sml = seq + len;
            }
        }
        if seq_lt(self.snd_max, end) {
            self.snd_max = end;
        }
        if self.retransmit_at.is_none() {
            self.retransmit_at = Some(now + self.rto());
        }
        self.unacked_since.get_or_insert(now);
        if let (true, Some(delay)) = (len > 0, self.config.delayed_ack) {
            self.quick_ack.data_sent(now, delay);
        }
        self.note_ack_sent();
        self.last_send_at = now;
        self.stats.segments_sent += 1;
        emit(repr, payload);
        true
    }

    /// Sends data (a pending one-shot retransmission first), and a FIN
    /// when it is due, within the congestion and receive windows.
    fn send_segments(&mut self, now: Instant, emit: &mut dyn FnMut(TcpRepr, PacketBuf)) -> usize {
        let mut sent = 0;
        let snd_max_before = self.snd_max;
        // Fast retransmit and NewReno partial ACKs resend one segment at
        // snd_una without moving snd_nxt (RFC 5681 3.2, RFC 6582 3.2).
        if let Some(seq) = self.retransmit_one.take() {
            if seq_le(self.snd_una, seq) && seq_lt(seq, self.snd_max) {
                let fin_seq = self.snd_fin;
                let avail = seq_dist(seq, self.data_end());
                let len = avail.min(self.payload_limit());
                let fin = len == avail && fin_seq.is_some() && !self.fin_acked();
                if (len > 0 || fin) && self.emit_segment(seq, len, fin, true, now, emit) {
                    sent += 1;
                }
            }
        }
        while sent < DISPATCH_BURST {
            let mut lt_segment = false;
            let limit = self.payload_limit();
            let queue_end = self.data_end();
            let sack_recovery = self.options.sack && self.recovery.is_some();
            let (seq, max_len, retransmit) = if sack_recovery {
                // RFC 6675 5: send while cwnd - pipe >= 1 SMSS, choosing
                // what to send with NextSeg.
                let high_rxt = self.recovery.map_or(self.snd_una, |r| r.high_rxt);
                let pipe = self.scoreboard.pipe(self.snd_una, self.snd_max, high_rxt, limit, self.config.dup_thresh);
                if self.congestion.cwnd() < pipe + limit {
                    break;
                }
                let can_new = seq_lt(self.snd_max, queue_end) || (self.fin_queued && self.snd_fin.is_none());
                match self.scoreboard.next_seg(
                    self.snd_una,
                    self.snd_max,
                    high_rxt,
                    limit,
                    self.config.dup_thresh,
                    can_new,
                ) {
                    Some(NextSeg::Retransmit { seq, len }) => (seq, len.min(limit), true),
                    Some(NextSeg::Rescue { seq, len }) => {
                        // Once per recovery (RFC 6675 rule 4), and it does
                        // not move HighRxt. A rescue is for a tail that was
                        // never retransmitted: when the whole of it already
                        // was (by rule 1), sending it again would only be a
                        // spurious retransmission; the RTO covers its loss.
                        if let Some(rec) = self.recovery {
                            if seq_le(seq + len, rec.high_rxt) {
                                self.scoreboard.set_rescue_rxt(Some(rec.recover));
                                break;
                            }
                        }
                        let avail = seq_dist(seq, queue_end);
                        let len = len.min(limit).min(avail);
                        let fin = self.fin_queued && !self.fin_acked() && len == avail;
                        let high_rxt = self.recovery.map(|r| r.high_rxt);
                        let sent_rescue = (len > 0 || fin) && self.emit_segment(seq, len, fin, true, now, emit);
                        if let (Some(rec), Some(h)) = (&mut self.recovery, high_rxt) {
                            rec.high_rxt = h;
                            self.scoreboard.set_rescue_rxt(Some(rec.recover));
                        }
                        if !sent_rescue {
                            break;
                        }
                        sent += 1;
                        continue;
                    }
                    Some(NextSeg::NewData) => (self.snd_max, limit, false),
                    None => break,
                }
            } else {
                let flight = seq_dist(self.snd_una, self.snd_nxt);
                let cwnd = self.congestion.cwnd() + self.recovery.map_or(0, |r| r.inflation);
                let mut room = cwnd.saturating_sub(flight).max(self.tail_probe.take_allowance(limit));
                let new_data = self.recovery.is_none() && self.snd_nxt == self.snd_max;
                if room < limit && self.limited_transmit > 0 && new_data {
                    // One segment of new data, as long as what is
                    // outstanding stays within cwnd + 2 * SMSS (RFC 3042 2).
                    let cap = self.congestion.cwnd() + 2 * self.effective_mss();
                    room = cap.saturating_sub(flight).min(limit);
                    lt_segment = true;
                }
                (self.snd_nxt, self.super_segment_limit(limit).min(room), seq_lt(self.snd_nxt, self.snd_max))
            };
            // The receive window counts from snd_una (RFC 9293 3.8.6.2.1).
            let mut wnd_room = seq_dist(seq, self.snd_una + self.snd_wnd);
            if self.rto_probe && seq == self.snd_una {
                // A window that closed with data in flight (shrunk, or an
                // update reordered behind an older ACK, or lost): the
                // retransmission probes it with one byte (RFC 9293
                // 3.8.6.1: keep retransmitting into a zero window).
                wnd_room = wnd_room.max(1);
            }
            let avail = seq_dist(seq, queue_end);
            let mut len = avail.min(max_len).min(wnd_room);
            if len > limit && len < avail {
                // A super-segment is cut into `limit`-sized pieces: keep
                // them all full, as a run of ordinary segments would be.
                len -= len % limit;
            }
            // The FIN rides on the segment that ends the data, or goes alone
            // (it needs no window), the first time or as a retransmission.
            let fin = self.fin_queued && !self.fin_acked() && len == avail && seq + len == queue_end;
            if len == 0 && !fin {
                break;
            }
            if !retransmit && !fin && !self.worth_sending(len, avail, self.effective_mss()) {
                break;
            }
            if !self.emit_segment(seq, len, fin, retransmit, now, emit) {
                break;
            }
            sent += 1;
            let end = seq + (len + usize::from(fin));
            if lt_segment {
                self.limited_transmit -= 1;
                self.limited_sent += len + usize::from(fin);
            }
            if (!sack_recovery || !retransmit) && seq_lt(self.snd_nxt, end) {
                self.snd_nxt = end;
            }
            if fin {
                break;
            }
        }
        self.sws_override = false;
        self.rto_probe = false;
        // A duplicate ACK releases a segment then or never (RFC 3042 2).
        self.limited_transmit = 0;
        if self.snd_max != snd_max_before {
            if self.options.sack {
                self.rack.on_sent(self.snd_max, now);
            }
            self.arm_tail_probe(now);
        }
        // Data waiting and nothing in flight: only a window update can get
        // it moving, and that may be lost. The persist timer makes sure.
        let queue_end = self.data_end();
        if seq_lt(self.snd_nxt, queue_end) && self.snd_una == self.snd_max && self.persist_at.is_none() {
            self.persist_at = Some(now + self.rto());
        }
        sent
    }

    // ---- timers ------------------------------------------------------------

    /// The earliest time a timer fires, or now if something is due.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        if self.state == State::Closed {
            return None;
        }
        if self.rst_due || self.syn_due || (self.ack_now && self.state.is_synchronized()) {
            return Some(now);
        }
        [
            self.retransmit_at,
            self.tail_probe.probe_at(),
            self.rack.timer_at(),
            self.persist_at,
            self.delayed_ack_at,
            self.keepalive_deadline(),
            self.time_wait_until,
            self.fin_wait2_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the timers that are due.
    pub fn on_timer(&mut self, now: Instant) {
        if self.time_wait_until.is_some_and(|t| t <= now) {
            self.enter_closed();
            return;
        }
        if self.fin_wait2_until.is_some_and(|t| t <= now) {
            // Dropped without a word, as Linux drops an orphan at its FIN
            // timeout: the peer, silent this long, learns of it from a
            // reset should it ever send.
            self.enter_closed();
            return;
        }
        // Before the RTO: a probe due at the same time goes instead, and
        // re-arms it (RFC 8985 7.3).
        if self.tail_probe.due(now) {
            self.on_probe_timeout(now);
        }
        if self.rack.timer_due(now) {
            self.on_reorder_timeout(now);
        }
        if self.retransmit_at.is_some_and(|t| t <= now) {
            self.on_retransmit_timeout(now);
        }
        if self.persist_at.is_some_and(|t| t <= now) {
            self.persist_at = None;
            let waiting = seq_lt(self.snd_nxt, self.data_end());
            if waiting && self.snd_una == self.snd_max {
                if self.snd_wnd == 0 {
                    // A probe below snd_una elicits an ACK with the window,
                    // without committing any data (as Linux does).
                    self.ack_now = true;
                    self.probe_below_una = true;
                } else {
                    // A window too small to be worth it and nothing in
                    // flight to bring news of a bigger one: send what fits
                    // anyway (RFC 1122 4.2.3.4's override timeout).
                    self.sws_override = true;
                }
                self.persist_backoff = self.persist_backoff.saturating_add(1);
                let base = self.rto();
                let factor = 1u32 << self.persist_backoff.min(6);
                self.persist_at = Some(now + (base * factor).min(self.config.rtt.max_rto));
            }
        }
        self.run_keepalive(now);
    }

    fn on_retransmit_timeout(&mut self, now: Instant) {
        self.retransmit_at = None;
        if self.snd_una == self.snd_max && !self.syn_due && !matches!(self.state, State::SynSent | State::SynReceived) {
            return;
        }
        let limit = match self.state {
            State::SynSent | State::SynReceived => self.config.syn_retries,
            _ => self.config.max_retransmissions,
        };
        // A user timeout replaces the count for data (RFC 5482; Linux
        // ignores tcp_retries2 when one is set).
        let user_timeout = match self.config.user_timeout.zip(self.unacked_since) {
            Some((limit, since)) if self.state.is_synchronized() => Some(now.saturating_since(since) >= limit),
            _ => None,
        };
        // Into a zero window the retransmissions are probes; a peer that
        // answers them is alive however long it keeps the window shut (RFC
        // 9293 3.8.6.1). As Linux does, give up only on a peer silent for
        // longer than that; here two max_rto, so one lost answer to a
        // probe at the capped interval is not yet taken for death.
        let probing_live_peer = self.state.is_synchronized()
            && self.snd_wnd == 0
            && now.saturating_since(self.last_recv_at) < self.config.rtt.max_rto * 2;
        let give_up = user_timeout.unwrap_or(self.rtt.backoff_count() >= limit && !probing_live_peer);
        if give_up {
            self.error = Some(TcpError::TimedOut);
            self.enter_closed();
            return;
        }
        self.stats.timeouts += 1;
        self.rtt.back_off();
        self.rtt_probe = None;
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn_due = true;
            }
            _ => {
                let flight = self.in_flight_for_cc();
                self.congestion.on_rto(flight, now);
                self.recovery = None;
                self.retransmit_one = None;
                self.tail_probe.forget();
                self.rack.clear();
                self.dupacks = 0;
                self.limited_sent = 0;
                self.scoreboard.clear();
                // Go back to the first unacknowledged byte.
                self.snd_nxt = self.snd_una;
                self.rto_probe = true;
            }
        }
        let mut next = now + self.rto();
        if let (Some(limit), Some(since), true) =
            (self.config.user_timeout, self.unacked_since, self.state.is_synchronized())
        {
            // The user timeout is checked when it runs out, not at the
            // next backed-off retransmission (as Linux clamps the RTO).
            next = next.min((since + limit).max(now + Duration::from_millis(1)));
        }
        self.retransmit_at = Some(next);
    }

    /// Whether a tail loss probe may be armed or sent: data in flight in
    /// the open state, no loss recovery, nothing SACKed, and no RTO since
    /// new data was last acknowledged (RFC 8985 7.2).
    fn tail_probe_eligible(&self) -> bool {
        self.state.is_synchronized()
            && self.recovery.is_none()
            && self.scoreboard.is_empty()
            && self.rtt.backoff_count() == 0
            && self.snd_nxt == self.snd_max
    }

    fn arm_tail_probe(&mut self, now: Instant) {
        let eligible = self.tail_probe_eligible();
        let flight = self.in_flight_for_cc();
        let segment = self.payload_limit();
        self.tail_probe.arm(now, eligible, self.rtt.srtt(), flight, segment, self.retransmit_at);
    }

    /// The probe timer fired: one new segment if the peer's window admits
    /// one, else the last segment again; the RTO is re-armed behind it.
    fn on_probe_timeout(&mut self, now: Instant) {
        let segment = self.payload_limit();
        let unsent = seq_dist(self.snd_max, self.data_end());
        let new_len = unsent.min(seq_dist(self.snd_max, self.snd_una + self.snd_wnd)).min(segment);
        // Nothing beyond the peer's window is resent (as Linux): into a
        // closed window the RTO's one-byte probe goes instead.
        let last = self.snd_max - seq_dist(self.snd_una, self.snd_max).min(segment);
        let in_window = new_len > 0 || seq_lt(last, self.snd_una + self.snd_wnd);
        let eligible = self.tail_probe_eligible() && in_window;
        match self.tail_probe.fire(eligible, self.snd_una, self.snd_max, new_len, segment) {
            Some(Probe::NewData) => self.sws_override = true,
            Some(Probe::Retransmit { seq }) => self.retransmit_one = Some(seq),
            None => return,
        }
        self.stats.tail_loss_probes += 1;
        self.retransmit_at = Some(now + self.rto());
    }

    /// RACK's reordering timer fired: what it finds lost starts SACK
    /// recovery, or feeds the one under way (RFC 8985 6.3).
    fn on_reorder_timeout(&mut self, now: Instant) {
        let open = self.state.is_synchronized() && self.snd_una != self.snd_max;
        if self.mark_lost_by_time(now, true) && open && self.recovery.is_none() && self.rtt.backoff_count() == 0 {
            self.enter_recovery(now);
        }
    }

    /// When the next keepalive probe is due (or, after the last one, when
    /// the peer is given up): `keepalive` after the last segment received,
    /// then every `keepalive_interval`. Derived from the state, so an idle
    /// connection always has it armed, whatever other timers it had.
    fn keepalive_deadline(&self) -> Option<Instant> {
        let idle = self.config.keepalive?;
        // With data outstanding the retransmission timer watches the peer.
        if !matches!(self.state, State::Established | State::CloseWait) || self.snd_una != self.snd_max {
            return None;
        }
        Some(self.last_recv_at + idle + self.config.keepalive_interval * self.keepalive_sent)
    }

    fn run_keepalive(&mut self, now: Instant) {
        if self.keepalive_deadline().is_none_or(|due| now < due) {
            return;
        }
        if self.keepalive_sent >= self.config.keepalive_probes {
            self.error = Some(TcpError::TimedOut);
            self.enter_closed();
            return;
        }
        self.keepalive_sent += 1;
        self.ack_now = true;
        self.probe_below_una = true;
    }
}
