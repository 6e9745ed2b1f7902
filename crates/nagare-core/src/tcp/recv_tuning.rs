//! Receive-buffer autotuning: a connection's receive buffer grows with what
//! its application reads in a round trip (dynamic right-sizing, as Linux's
//! tcp_rcv_space_adjust does it), so that a long fast path is not held to
//! the window a small starting buffer offers, while a connection whose
//! application reads slowly, or whose path is short, keeps a small one.
//!
//! Invariants:
//! - `buffer <= ceiling <= max` for the connection's life, the buffer
//!   at least its start (the configuration's, or the smaller one an
//!   owner starts it at: [`RecvTuning::start_at`]); `max` is what the
//!   window scale was chosen for in the handshake, so
//!   every buffer size can be advertised. The ceiling is the owner's: an
//!   owner that charges buffers to someone (an inet server to its
//!   clients) lets a buffer grow only as far as it has granted, and reads
//!   what autotuning wanted past it ([`RecvTuning::wanted`]) to grant more.
//! - Autotuning only grows the buffer, so the window's right edge never
//!   has to move left (RFC 9293 3.8.6.2.2). A size the application sets
//!   ([`RecvTuning::fix`], SO_RCVBUF) ends autotuning and may be smaller,
//!   as may an owner's start; the connection then honours the window
//!   already offered.
//! - Growth follows bytes the application consumed, never bytes that
//!   merely arrived: a reader that does not keep up is not given more.
//! - The buffer is a limit on bytes queued, not an allocation: received
//!   data stays in the pool buffers it arrived in, so growing allocates
//!   nothing here, and the pool and `max` bound what a connection holds.
//!
//! A measurement lasts one round trip: the connection's smoothed RTT, or
//! before it has one, the time a window's worth of data takes to arrive
//! (an upper bound, as Linux measures without timestamps). When the
//! application consumed more in it than in the last measurement that grew
//! the buffer, the buffer becomes twice that (plus 16 segments of slack),
//! more again in proportion to the increase (up to three times), since a
//! sender in slow start doubles every round trip; capped at `max`.

use super::config::TcpConfig;
use super::grown_buffer::GrownBuffer;
use crate::time::Instant;
use core::time::Duration;
use nagare_wire::TcpSeqNumber;

/// Segments of slack added to twice the consumption (as Linux).
const SLACK_SEGMENTS: usize = 16;

/// Segments consumed per round trip taken as the starting point (Linux
/// starts from the initial window of ten segments).
const INITIAL_SEGMENTS: usize = 10;

fn seq_le(a: TcpSeqNumber, b: TcpSeqNumber) -> bool {
    (a - b) <= 0
}

/// Bytes from `a` up to `b` (0 if `b` is not after `a`).
fn seq_dist(a: TcpSeqNumber, b: TcpSeqNumber) -> usize {
    usize::try_from(b - a).unwrap_or(0)
}

/// The receive buffer of one connection and its measurement.
#[derive(Debug, Clone)]
pub struct RecvTuning {
    /// Its size, the owner's ceiling and what a growth aimed at.
    size: GrownBuffer,
    /// Bytes consumed in the last measurement that grew the buffer (what
    /// a new measurement must beat).
    space: usize,
    /// The running measurement: when it began and how far the application
    /// had read then.
    start: Option<(Instant, TcpSeqNumber)>,
    /// A round trip being timed without an RTT estimate: when, and the
    /// sequence number whose arrival ends it.
    rtt_mark: Option<(Instant, TcpSeqNumber)>,
    /// The shortest round trip timed that way.
    window_rtt: Option<Duration>,
}

impl RecvTuning {
    /// The buffer `config` starts a connection with; `mss` is the segment
    /// size we advertise.
    pub fn new(config: &TcpConfig, mss: usize) -> Self {
        let buffer = config.recv_buffer;
        RecvTuning {
            size: GrownBuffer::new(config.recv_autotune, buffer, config.recv_buffer_limit()),
            space: buffer.min(INITIAL_SEGMENTS * mss.max(1)).max(1),
            start: None,
            rtt_mark: None,
            window_rtt: None,
        }
    }

    /// Fixes the buffer at `bytes` and ends autotuning (the application
    /// chose a size). `max` stays: the window scale was chosen for it.
    pub fn fix(&mut self, bytes: usize) {
        self.size.fix(bytes);
    }

    /// The receive buffer's size now.
    pub fn buffer(&self) -> usize {
        self.size.buffer()
    }

    /// The largest it may become.
    pub fn max(&self) -> usize {
        self.size.max()
    }

    /// How far it may grow now: the buffer itself once fixed.
    pub fn ceiling(&self) -> usize {
        self.size.ceiling()
    }

    /// What autotuning would have grown the buffer to without the ceiling
    /// (the buffer itself when nothing was held back, or once fixed).
    pub fn wanted(&self) -> usize {
        self.size.wanted()
    }

    /// The owner refuses the growth wanted past the ceiling: it is
    /// forgotten until the next measurement, which asks again if the
    /// application still consumes at least half of what it did (the mark
    /// a measurement must beat is halved), so that an owner asked each
    /// time it looks is asked about once a round trip, and a grant its
    /// budget has room for later still comes.
    pub fn refuse_growth(&mut self) {
        self.size.refuse();
        self.space = (self.space / 2).max(1);
    }

    /// Starts the receive buffer at `bytes` with its ceiling there, autotuning
    /// still on (see [`GrownBuffer::start_at`]). A fixed buffer keeps its
    /// size.
    pub fn start_at(&mut self, bytes: usize) {
        self.size.start_at(bytes);
        self.space = self.space.min(bytes).max(1);
    }

    /// Moves the ceiling to `bytes`, within `buffer..=max`; a growth the
    /// old ceiling held back happens at once, as far as the new one goes.
    /// True when the buffer grew. A fixed buffer keeps its size.
    pub fn set_ceiling(&mut self, bytes: usize) -> bool {
        self.size.set_ceiling(bytes)
    }

    /// In-order data arrived at `now`: `rcv_nxt` is past it, `consumed` is
    /// how far the application has read and `srtt` the connection's
    /// smoothed RTT, if measured. True when the buffer grew.
    pub fn on_data(
        &mut self,
        now: Instant,
        rcv_nxt: TcpSeqNumber,
        consumed: TcpSeqNumber,
        srtt: Option<Duration>,
        mss: usize,
    ) -> bool {
        let buffer = self.size.buffer();
        if !self.size.enabled() || buffer >= self.size.max() {
            return false;
        }
        // At the ceiling the measurement still runs, so that `wanted`
        // tells the owner how much more a grant would be used.
        match self.rtt_mark {
            Some((sent, seq)) if seq_le(seq, rcv_nxt) => {
                let rtt = now.saturating_since(sent);
                self.window_rtt = Some(self.window_rtt.map_or(rtt, |r| r.min(rtt)));
                self.rtt_mark = Some((now, rcv_nxt + buffer));
            }
            Some(_) => {}
            None => self.rtt_mark = Some((now, rcv_nxt + buffer)),
        }
        let Some(rtt) = srtt.or(self.window_rtt) else {
            return false;
        };
        let (began, from) = *self.start.get_or_insert((now, consumed));
        if now.saturating_since(began) < rtt || now == began {
            return false;
        }
        self.start = Some((now, consumed));
        let copied = seq_dist(from, consumed);
        if copied <= self.space {
            return false;
        }
        let mut target = copied.saturating_mul(2).saturating_add(SLACK_SEGMENTS * mss);
        // Anticipating at most one more doubling: a first measurement far
        // above the starting point must not jump to the maximum.
        let increase = target.saturating_mul((copied - self.space).min(self.space)) / self.space;
        target = target.saturating_add(increase.saturating_mul(2));
        self.space = copied;
        let target = target.min(self.size.max());
        self.size.want(target);
        self.size.grow_toward(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1460;

    fn config(autotune: bool) -> TcpConfig {
        TcpConfig { recv_buffer: 64 * 1024, recv_autotune: autotune, recv_buffer_max: 4 << 20, ..TcpConfig::default() }
    }

    /// A reader on a 10 ms path, the data of each round trip arriving in
    /// ten parts and read as it comes.
    struct Reader {
        tuning: RecvTuning,
        now: Instant,
        seq: TcpSeqNumber,
    }

    impl Reader {
        fn new(autotune: bool) -> Self {
            Reader { tuning: RecvTuning::new(&config(autotune), MSS), now: Instant::ZERO, seq: TcpSeqNumber(1000) }
        }

        /// One round trip in which `bytes` arrive and are read; the buffer
        /// after it.
        fn round(&mut self, bytes: usize) -> usize {
            for _ in 0..10 {
                self.seq += bytes / 10;
                self.now += Duration::from_millis(1);
                self.tuning.on_data(self.now, self.seq, self.seq, Some(Duration::from_millis(10)), MSS);
            }
            self.tuning.buffer()
        }
    }

    #[test]
    fn grows_with_a_reader_that_keeps_up_up_to_the_max() {
        let mut r = Reader::new(true);
        assert_eq!(r.tuning.buffer(), 64 * 1024);
        // The sender fills whatever window is offered, the reader keeps up.
        let mut last = r.tuning.buffer();
        let mut rounds = 0;
        while last < 4 << 20 && rounds < 30 {
            let grown = r.round(last);
            assert!(grown >= last, "round {rounds}: shrank from {last} to {grown}");
            last = grown;
            rounds += 1;
        }
        assert_eq!(last, 4 << 20, "after {rounds} round trips");
        // From 64 KiB to 4 MiB is six doublings: a few round trips each.
        assert!(rounds <= 15, "{rounds} round trips");
    }

    #[test]
    fn a_refused_growth_is_asked_for_again_while_the_reader_keeps_up() {
        let mut r = Reader::new(true);
        r.tuning.set_ceiling(64 * 1024);
        r.round(64 * 1024);
        r.round(64 * 1024);
        assert!(r.tuning.wanted() > 64 * 1024);
        r.tuning.refuse_growth();
        assert_eq!(r.tuning.wanted(), 64 * 1024, "nothing asked past the ceiling");
        // A reader that slowed to a quarter is asked about at most while
        // a measurement still holds its faster past, then no more.
        for _ in 0..3 {
            r.round(16 * 1024);
            if r.tuning.wanted() > r.tuning.ceiling() {
                r.tuning.refuse_growth();
            }
        }
        r.round(16 * 1024);
        assert_eq!(r.tuning.wanted(), 64 * 1024);
        // One that keeps reading all the window offers: asked again a
        // round trip on, so a grant can come once the owner has room.
        r.round(64 * 1024);
        r.round(64 * 1024);
        assert!(r.tuning.wanted() > 64 * 1024);
        assert!(r.tuning.set_ceiling(1 << 20));
        assert!(r.tuning.buffer() > 64 * 1024);
    }

    #[test]
    fn a_ceiling_holds_the_growth_back_and_a_higher_one_lets_it_happen_at_once() {
        let mut r = Reader::new(true);
        assert!(!r.tuning.set_ceiling(64 * 1024), "no growth was held back yet");
        assert_eq!(r.tuning.ceiling(), 64 * 1024);
        for _ in 0..5 {
            assert_eq!(r.round(64 * 1024), 64 * 1024, "held at the ceiling");
        }
        // What autotuning asked for is there for the owner to grant.
        let wanted = r.tuning.wanted();
        assert!(wanted >= 2 * 64 * 1024, "{wanted}");
        assert!(r.tuning.set_ceiling(96 * 1024));
        assert_eq!(r.tuning.buffer(), 96 * 1024, "grown at once, as far as the grant");
        assert!(r.tuning.set_ceiling(64 << 20));
        assert_eq!(r.tuning.ceiling(), 4 << 20, "never past the max the window scale was chosen for");
        assert_eq!(r.tuning.buffer(), wanted);
        // A lower ceiling never shrinks the buffer.
        assert!(!r.tuning.set_ceiling(0));
        assert_eq!(r.tuning.ceiling(), wanted);
        // A fixed buffer has no ceiling but itself, and wants nothing.
        r.tuning.fix(32 * 1024);
        assert!(!r.tuning.set_ceiling(1 << 20));
        assert_eq!(r.tuning.ceiling(), 32 * 1024);
        assert_eq!(r.tuning.wanted(), 32 * 1024);
    }

    #[test]
    fn a_steady_slow_reader_stops_the_growth_well_below_the_max() {
        let mut r = Reader::new(true);
        // 100 kB per 10 ms round trip, steadily.
        for _ in 0..10 {
            r.round(100_000);
        }
        let settled = r.tuning.buffer();
        for _ in 0..40 {
            assert_eq!(r.round(100_000), settled);
        }
        // Twice the rate plus slack, times at most three for the jump
        // from the starting estimate.
        assert!(settled >= 2 * 100_000, "{settled}");
        assert!(settled <= 3 * (2 * 100_000 + 16 * MSS), "{settled}");
    }

    #[test]
    fn off_when_disabled_or_without_any_rtt() {
        let mut r = Reader::new(false);
        assert_eq!(r.tuning.max(), 64 * 1024);
        for _ in 0..20 {
            assert_eq!(r.round(1 << 20), 64 * 1024);
        }
        // Without an RTT and with data arriving once, nothing is measured.
        let mut t = RecvTuning::new(&config(true), MSS);
        let grew = t.on_data(Instant::from_millis(1), TcpSeqNumber(1 << 20), TcpSeqNumber(1 << 20), None, MSS);
        assert!(!grew);
        assert_eq!(t.buffer(), 64 * 1024);
    }

    #[test]
    fn without_srtt_a_window_arriving_times_the_round_trip() {
        let mut t = RecvTuning::new(&config(true), MSS);
        let window = t.buffer();
        let mut seq = TcpSeqNumber(0);
        let mut now = Instant::ZERO;
        // The starting window per 5 ms, read as it comes.
        for _ in 0..200 {
            seq += window / 8;
            now += Duration::from_micros(625);
            t.on_data(now, seq, seq, None, MSS);
        }
        assert!(t.buffer() > window, "{}", t.buffer());
    }
}
