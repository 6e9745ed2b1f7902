//! Link impairments: loss, duplication, reordering, corruption, delay and
//! jitter, reproducible from a seed.
//!
//! The decisions are made by one engine (`Impairer`, feeding a
//! `DelayLine`) that both the simulated link ([`crate::sim`]) and the
//! [`Impaired`] wrapper around a real device use.
//!
//! Per frame, in this order (each draw from the seeded generator):
//! 1. **loss**: the frame disappears;
//! 2. **delay/jitter**: the frame is held `delay ± jitter` (uniform,
//!    never below zero); jitter alone can reorder frames, as with netem;
//! 3. **reorder**: the frame is held a further `reorder_extra_delay`, so
//!    frames sent after it overtake it;
//! 4. **duplicate**: a second copy (sharing the buffers) arrives with it;
//! 5. **corrupt**: one random bit of one random byte is flipped, in a copy
//!    made when the frame is delivered (the sender's buffers are never
//!    written).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::str::FromStr;
use std::time::Duration;

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::Instant;

use crate::device::{copy_into_pool, earliest, Device, DeviceStats};
use crate::rng::SimRng;

/// Extra hold time of a reordered frame when none is given.
pub const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(1);

/// What a link does wrong. Probabilities are fractions in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairment {
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame arrives twice.
    pub duplicate: f64,
    /// Probability that a frame is held back by `reorder_extra_delay` so
    /// that later frames overtake it.
    pub reorder: f64,
    /// How long a reordered frame is held back.
    pub reorder_extra_delay: Duration,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// Constant extra delay of every frame.
    pub delay: Duration,
    /// Each frame's delay varies uniformly in `delay ± jitter`.
    pub jitter: Duration,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment::none()
    }
}

impl Impairment {
    /// A perfect link.
    pub const fn none() -> Self {
        Impairment {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_extra_delay: DEFAULT_REORDER_DELAY,
            corrupt: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
        }
    }

    /// Whether this impairment changes nothing.
    pub fn is_none(&self) -> bool {
        self.loss <= 0.0
            && self.duplicate <= 0.0
            && (self.reorder <= 0.0 || self.reorder_extra_delay.is_zero())
            && self.corrupt <= 0.0
            && self.delay.is_zero()
            && self.jitter.is_zero()
    }
}

/// Why an impairment string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseImpairmentError {
    message: String,
}

impl ParseImpairmentError {
    fn new(message: String) -> Self {
        ParseImpairmentError { message }
    }
}

impl fmt::Display for ParseImpairmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParseImpairmentError {}

const KEYS_HELP: &str = "expected comma-separated key=value items with keys loss, dup, reorder, \
reorder_delay, corrupt, delay, jitter (for example \"loss=3%,delay=2ms,jitter=1ms\")";

fn parse_probability(key: &str, value: &str) -> Result<f64, ParseImpairmentError> {
    let bad = |why: &str| {
        ParseImpairmentError::new(format!(
            "{key}={value}: {why}; write a percentage such as {key}=3% or a fraction such as {key}=0.03"
        ))
    };
    let (number, scale) = match value.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (value, 1.0),
    };
    if number.is_empty() {
        return Err(bad("missing number"));
    }
    let x: f64 = number.parse().map_err(|_| bad("not a number"))?;
    if !x.is_finite() {
        return Err(bad("not a finite number"));
    }
    let p = x / scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(bad(if scale == 1.0 && x > 1.0 {
            "a bare number must be a fraction between 0 and 1 (did you mean a percentage?)"
        } else {
            "must be between 0% and 100%"
        }));
    }
    Ok(p)
}

fn parse_duration(key: &str, value: &str) -> Result<Duration, ParseImpairmentError> {
    let bad = |why: &str| {
        ParseImpairmentError::new(format!(
            "{key}={value}: {why}; write a duration such as {key}=2ms, {key}=500us or {key}=1.5s"
        ))
    };
    let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    if number.is_empty() {
        return Err(bad("missing number"));
    }
    let x: f64 = number.parse().map_err(|_| bad("not a number"))?;
    let micros_per_unit = match unit.trim() {
        "us" | "µs" => 1.0,
        "ms" => 1_000.0,
        "s" => 1_000_000.0,
        "" if x == 0.0 => 1.0,
        "" => return Err(bad("missing unit (us, ms or s)")),
        _ => return Err(bad("unknown unit (use us, ms or s)")),
    };
    let micros = (x * micros_per_unit).round();
    if !micros.is_finite() || micros > 3_600.0 * 1e6 {
        return Err(bad("out of range (at most one hour)"));
    }
    Ok(Duration::from_micros(micros as u64))
}

impl FromStr for Impairment {
    type Err = ParseImpairmentError;

    /// Parses the command-line form, for example
    /// `loss=3%,delay=2ms,reorder=10%,dup=1%,corrupt=0.1%,jitter=1ms`.
    /// An empty string or `none` is a perfect link.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut imp = Impairment::none();
        let s = s.trim();
        if s.is_empty() || s.eq_ignore_ascii_case("none") {
            return Ok(imp);
        }
        let mut seen: Vec<&'static str> = Vec::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(ParseImpairmentError::new(format!("empty item in {s:?}; {KEYS_HELP}")));
            }
            let Some((key, value)) = item.split_once('=') else {
                return Err(ParseImpairmentError::new(format!("{item:?} has no '='; {KEYS_HELP}")));
            };
            let (key, value) = (key.trim(), value.trim());
            let canonical: &'static str = match key.to_ascii_lowercase().as_str() {
                "loss" => {
                    imp.loss = parse_probability(key, value)?;
                    "loss"
                }
                "dup" | "duplicate" => {
                    imp.duplicate = parse_probability(key, value)?;
                    "dup"
                }
                "reorder" => {
                    imp.reorder = parse_probability(key, value)?;
                    "reorder"
                }
                "reorder_delay" | "reorder-delay" => {
                    imp.reorder_extra_delay = parse_duration(key, value)?;
                    "reorder_delay"
                }
                "corrupt" => {
                    imp.corrupt = parse_probability(key, value)?;
                    "corrupt"
                }
                "delay" => {
                    imp.delay = parse_duration(key, value)?;
                    "delay"
                }
                "jitter" => {
                    imp.jitter = parse_duration(key, value)?;
                    "jitter"
                }
                _ => {
                    return Err(ParseImpairmentError::new(format!("unknown key {key:?}; {KEYS_HELP}")));
                }
            };
            if seen.contains(&canonical) {
                return Err(ParseImpairmentError::new(format!("{canonical} given twice in {s:?}")));
            }
            seen.push(canonical);
        }
        Ok(imp)
    }
}

fn fmt_duration(d: Duration) -> String {
    let us = d.as_micros();
    // The largest unit that divides the value exactly.
    for (per_unit, unit) in [(1_000_000, "s"), (1_000, "ms")] {
        let (whole, rest) = (us / per_unit, us % per_unit);
        if whole > 0 && rest == 0 {
            return format!("{whole}{unit}");
        }
    }
    format!("{us}us")
}

impl fmt::Display for Impairment {
    /// The command-line form, parseable by `FromStr`; `none` for a perfect
    /// link.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Vec::new();
        let pct = |p: f64| format!("{}%", p * 100.0);
        if self.loss > 0.0 {
            items.push(format!("loss={}", pct(self.loss)));
        }
        if !self.delay.is_zero() {
            items.push(format!("delay={}", fmt_duration(self.delay)));
        }
        if !self.jitter.is_zero() {
            items.push(format!("jitter={}", fmt_duration(self.jitter)));
        }
        if self.reorder > 0.0 {
            items.push(format!("reorder={}", pct(self.reorder)));
            if self.reorder_extra_delay != DEFAULT_REORDER_DELAY {
                items.push(format!("reorder_delay={}", fmt_duration(self.reorder_extra_delay)));
            }
        }
        if self.duplicate > 0.0 {
            items.push(format!("dup={}", pct(self.duplicate)));
        }
        if self.corrupt > 0.0 {
            items.push(format!("corrupt={}", pct(self.corrupt)));
        }
        if items.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&items.join(","))
        }
    }
}

/// What an impairment did to the frames passing one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImpairStats {
    /// Frames that entered the impairment.
    pub frames: u64,
    /// Frames lost.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Frames held back so that later ones overtake them.
    pub reordered: u64,
    /// Frames with a bit flipped.
    pub corrupted: u64,
    /// Frames dropped because too many were already held.
    pub overflow_dropped: u64,
}

/// A bit to flip when a frame is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BitFlip {
    pub(crate) byte: usize,
    pub(crate) mask: u8,
}

/// A frame waiting for its delivery time.
pub(crate) struct Held {
    pub(crate) at: Instant,
    seq: u64,
    pub(crate) frame: PacketBuf,
    pub(crate) flip: Option<BitFlip>,
}

impl Held {
    /// The frame as the receiver sees it: the same `PacketBuf` unless it
    /// is corrupted, in which case a copy in `pool` with the bit flipped.
    /// `None` if the pool has no buffer for the copy.
    pub(crate) fn deliver(self, pool: &BufferPool) -> Option<PacketBuf> {
        match self.flip {
            None => Some(self.frame),
            Some(flip) => copy_into_pool(pool, &self.frame, |bytes| {
                if let Some(b) = bytes.get_mut(flip.byte) {
                    *b ^= flip.mask;
                }
            }),
        }
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    /// Reversed, so that the max-heap pops the earliest (then the first
    /// queued) frame.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Frames in flight, released in order of delivery time; frames due at the
/// same time keep the order in which they were queued.
#[derive(Default)]
pub(crate) struct DelayLine {
    heap: BinaryHeap<Held>,
    next_seq: u64,
}

impl DelayLine {
    pub(crate) fn push(&mut self, at: Instant, frame: PacketBuf, flip: Option<BitFlip>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Held { at, seq, frame, flip });
    }

    /// The earliest frame if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Held> {
        if self.heap.peek()?.at <= now {
            self.heap.pop()
        } else {
            None
        }
    }

    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|h| h.at)
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

/// The seeded decision maker shared by the simulated link and [`Impaired`].
pub(crate) struct Impairer {
    config: Impairment,
    rng: SimRng,
    pub(crate) stats: ImpairStats,
}

impl Impairer {
    pub(crate) fn new(config: Impairment, seed: u64) -> Self {
        Impairer { config, rng: SimRng::new(seed), stats: ImpairStats::default() }
    }

    pub(crate) fn config(&self) -> &Impairment {
        &self.config
    }

    /// Decides the fate of `frame`, which would arrive at `arrive` on a
    /// perfect link, and queues what survives on `line`, holding at most
    /// `limit` frames there. Returns how many copies were queued.
    pub(crate) fn apply(&mut self, frame: PacketBuf, arrive: Instant, line: &mut DelayLine, limit: usize) -> usize {
        let c = self.config;
        self.stats.frames += 1;
        if self.rng.chance(c.loss) {
            self.stats.lost += 1;
            return 0;
        }
        let mut at = arrive;
        if !c.delay.is_zero() || !c.jitter.is_zero() {
            let delay = u64::try_from(c.delay.as_micros()).unwrap_or(u64::MAX);
            let jitter = u64::try_from(c.jitter.as_micros()).unwrap_or(u64::MAX);
            let held = self.rng.between(delay.saturating_sub(jitter), delay.saturating_add(jitter));
            at += Duration::from_micros(held);
        }
        if self.rng.chance(c.reorder) {
            self.stats.reordered += 1;
            at += c.reorder_extra_delay;
        }
        let duplicate = self.rng.chance(c.duplicate);
        let flip = if self.rng.chance(c.corrupt) && !frame.is_empty() {
            self.stats.corrupted += 1;
            let byte = self.rng.below(frame.len() as u64) as usize;
            let bit = self.rng.below(8) as u32;
            Some(BitFlip { byte, mask: 1 << bit })
        } else {
            None
        };
        let mut queued = 0;
        if duplicate {
            self.stats.duplicated += 1;
            if line.len() < limit {
                line.push(at, frame.clone(), None);
                queued += 1;
            } else {
                self.stats.overflow_dropped += 1;
            }
        }
        if line.len() < limit {
            line.push(at, frame, flip);
            queued += 1;
        } else {
            self.stats.overflow_dropped += 1;
        }
        queued
    }
}

/// Most frames an [`Impaired`] device holds per direction; beyond this it
/// drops (counted in [`ImpairStats::overflow_dropped`]).
pub const IMPAIRED_HOLD_LIMIT: usize = 4096;

/// Both directions' impairment counters of an [`Impaired`] device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImpairedStats {
    /// Frames coming in from the inner device.
    pub rx: ImpairStats,
    /// Frames going out to the inner device.
    pub tx: ImpairStats,
}

/// Wraps any device and impairs the frames it receives and transmits.
///
/// Frames held back (delay, jitter, reordering) are released by later
/// `receive_batch` and `transmit_batch` calls once due; [`Device::poll_at`]
/// reports when. Corrupted frames going out are copied into a small pool
/// the wrapper owns (the transmit path is given no pool); corrupted frames
/// coming in are copied into the caller's pool.
pub struct Impaired<D: Device> {
    inner: D,
    rx: Impairer,
    tx: Impairer,
    rx_line: DelayLine,
    tx_line: DelayLine,
    /// Due outgoing frames the inner device has not taken yet.
    tx_ready: VecDeque<PacketBuf>,
    tx_pool: BufferPool,
    scratch: Vec<PacketBuf>,
    last_now: Instant,
}

impl<D: Device> Impaired<D> {
    /// Applies `impairment` to both directions of `inner`. The two
    /// directions draw from independent generators derived from `seed`.
    pub fn new(inner: D, impairment: Impairment, seed: u64) -> Self {
        Impaired::with_directions(inner, impairment, impairment, seed)
    }

    /// Applies `rx` to frames received from `inner` and `tx` to frames
    /// transmitted through it.
    pub fn with_directions(inner: D, rx: Impairment, tx: Impairment, seed: u64) -> Self {
        let mut sm = seed;
        let rx_seed = crate::rng::splitmix64(&mut sm);
        let tx_seed = crate::rng::splitmix64(&mut sm);
        Impaired {
            inner,
            rx: Impairer::new(rx, rx_seed),
            tx: Impairer::new(tx, tx_seed),
            rx_line: DelayLine::default(),
            tx_line: DelayLine::default(),
            tx_ready: VecDeque::new(),
            tx_pool: BufferPool::new(2048, 256),
            scratch: Vec::new(),
            last_now: Instant::ZERO,
        }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Unwraps the device; held frames are dropped.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// The impairment applied to received frames.
    pub fn rx_impairment(&self) -> &Impairment {
        self.rx.config()
    }

    /// The impairment applied to transmitted frames.
    pub fn tx_impairment(&self) -> &Impairment {
        self.tx.config()
    }

    /// What the impairment has done so far.
    pub fn impair_stats(&self) -> ImpairedStats {
        ImpairedStats { rx: self.rx.stats, tx: self.tx.stats }
    }

    /// Frames currently held in either direction.
    pub fn held(&self) -> usize {
        self.rx_line.len() + self.tx_line.len() + self.tx_ready.len()
    }

    /// Moves due outgoing frames to the inner device.
    fn flush_tx(&mut self, now: Instant) -> io::Result<()> {
        while let Some(held) = self.tx_line.pop_due(now) {
            if let Some(frame) = held.deliver(&self.tx_pool) {
                self.tx_ready.push_back(frame);
            } else {
                self.tx.stats.overflow_dropped += 1;
            }
        }
        if !self.tx_ready.is_empty() {
            self.inner.transmit_batch(&mut self.tx_ready, now)?;
        }
        Ok(())
    }
}

impl<D: Device> Device for Impaired<D> {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        self.last_now = self.last_now.max(now);
        self.flush_tx(now)?;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let room = IMPAIRED_HOLD_LIMIT.saturating_sub(self.rx_line.len()).min(max);
        let result = if room > 0 { self.inner.receive_batch(pool, &mut scratch, room, now) } else { Ok(0) };
        for frame in scratch.drain(..) {
            self.rx.apply(frame, now, &mut self.rx_line, IMPAIRED_HOLD_LIMIT);
        }
        self.scratch = scratch;
        let mut delivered = 0;
        while delivered < max {
            let Some(held) = self.rx_line.pop_due(now) else {
                break;
            };
            match held.deliver(pool) {
                Some(frame) => {
                    out.push(frame);
                    delivered += 1;
                }
                None => self.rx.stats.overflow_dropped += 1,
            }
        }
        match result {
            Err(e) if delivered == 0 => Err(e),
            _ => Ok(delivered),
        }
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        self.last_now = self.last_now.max(now);
        let mut taken = 0;
        while self.tx_line.len() + self.tx_ready.len() < IMPAIRED_HOLD_LIMIT {
            let Some(frame) = frames.pop_front() else {
                break;
            };
            self.tx.apply(frame, now, &mut self.tx_line, IMPAIRED_HOLD_LIMIT);
            taken += 1;
        }
        self.flush_tx(now)?;
        Ok(taken)
    }

    fn set_syn_filter(&mut self, filter: &nagare_core::tcp::syn_guard::SynFilter) -> io::Result<()> {
        self.inner.set_syn_filter(filter)
    }

    fn set_udp_shed(&mut self, shed: &crate::device::UdpShed) -> io::Result<()> {
        self.inner.set_udp_shed(shed)
    }

    fn capabilities(&self) -> nagare_core::Capabilities {
        self.inner.capabilities()
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.inner.raw_fd()
    }

    fn poll_at(&self) -> Option<Instant> {
        let mut at = earliest(self.inner.poll_at(), self.rx_line.next_at());
        at = earliest(at, self.tx_line.next_at());
        if !self.tx_ready.is_empty() {
            // The inner device refused frames (EAGAIN): try again soon.
            at = earliest(at, Some(self.last_now + Duration::from_millis(1)));
        }
        at
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopback::Loopback;

    #[test]
    fn parses_the_command_line_form() {
        let imp: Impairment = "loss=3%,delay=2ms,reorder=10%,dup=1%,corrupt=0.1%,jitter=1ms".parse().unwrap();
        assert!((imp.loss - 0.03).abs() < 1e-12);
        assert!((imp.reorder - 0.10).abs() < 1e-12);
        assert!((imp.duplicate - 0.01).abs() < 1e-12);
        assert!((imp.corrupt - 0.001).abs() < 1e-12);
        assert_eq!(imp.delay, Duration::from_millis(2));
        assert_eq!(imp.jitter, Duration::from_millis(1));
        assert_eq!(imp.reorder_extra_delay, DEFAULT_REORDER_DELAY);
        assert!(!imp.is_none());

        let imp: Impairment = " loss = 0.5 , reorder_delay=250us, delay=1.5s ,duplicate=100%".parse().unwrap();
        assert_eq!(imp.loss, 0.5);
        assert_eq!(imp.reorder_extra_delay, Duration::from_micros(250));
        assert_eq!(imp.delay, Duration::from_millis(1500));
        assert_eq!(imp.duplicate, 1.0);

        assert!("".parse::<Impairment>().unwrap().is_none());
        assert!("none".parse::<Impairment>().unwrap().is_none());
        assert!("loss=0%,delay=0".parse::<Impairment>().unwrap().is_none());
        // A reorder delay alone does nothing.
        assert!("reorder_delay=5ms".parse::<Impairment>().unwrap().is_none());
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "loss=3%,delay=2ms,jitter=1ms,reorder=10%,dup=1%,corrupt=0.1%",
            "none",
            "reorder=50%,reorder_delay=300us",
            "delay=2s",
        ] {
            let imp: Impairment = s.parse().unwrap();
            assert_eq!(imp.to_string(), s);
            assert_eq!(imp.to_string().parse::<Impairment>().unwrap(), imp);
        }
    }

    #[test]
    fn rejects_bad_strings_with_clear_messages() {
        let cases = [
            ("loss", "no '='"),
            ("loss=", "missing number"),
            ("loss=abc%", "not a number"),
            ("loss=150%", "between 0% and 100%"),
            ("loss=-1%", "between 0% and 100%"),
            ("loss=3", "did you mean a percentage"),
            ("loss=NaN", "not a finite number"),
            ("delay=5", "missing unit"),
            ("delay=5parsecs", "unknown unit"),
            ("delay=ms", "missing number"),
            ("delay=1.2.3ms", "not a number"),
            ("jitter=99999999s", "out of range"),
            ("lose=3%", "unknown key \"lose\""),
            ("loss=1%,,dup=1%", "empty item"),
            ("loss=1%,loss=2%", "loss given twice"),
            ("dup=1%,duplicate=2%", "dup given twice"),
        ];
        for (input, expected) in cases {
            let err = input.parse::<Impairment>().unwrap_err().to_string();
            assert!(err.contains(expected), "{input:?} gave {err:?}, expected it to mention {expected:?}");
        }
    }

    fn frames(pool: &BufferPool, n: u32) -> VecDeque<PacketBuf> {
        (0..n)
            .map(|i| {
                let mut bytes = [0u8; 60];
                bytes[..4].copy_from_slice(&i.to_be_bytes());
                PacketBuf::from_slice(pool, 0, &bytes).unwrap()
            })
            .collect()
    }

    fn seq(frame: &PacketBuf) -> u32 {
        u32::from_be_bytes(frame.header::<4>().unwrap())
    }

    #[test]
    fn impaired_loopback_delays_both_directions_and_returns_buffers() {
        let pool = BufferPool::new(2048, 256);
        let imp: Impairment = "delay=1ms".parse().unwrap();
        let mut dev = Impaired::new(Loopback::new(1500, 64), imp, 1);
        let mut q = frames(&pool, 3);
        let t0 = Instant::from_millis(10);
        assert_eq!(dev.transmit_batch(&mut q, t0).unwrap(), 3);
        assert!(q.is_empty());
        // Held on the way out for 1 ms.
        assert_eq!(dev.inner().queued(), 0);
        assert_eq!(dev.poll_at(), Some(t0 + Duration::from_millis(1)));
        let mut out = Vec::new();
        assert_eq!(dev.receive_batch(&pool, &mut out, 16, t0 + Duration::from_micros(999)).unwrap(), 0);
        // Due: released to the loopback, received back, and held again 1 ms.
        let t1 = t0 + Duration::from_millis(1);
        assert_eq!(dev.receive_batch(&pool, &mut out, 16, t1).unwrap(), 0);
        assert_eq!(dev.poll_at(), Some(t1 + Duration::from_millis(1)));
        let t2 = t1 + Duration::from_millis(1);
        assert_eq!(dev.receive_batch(&pool, &mut out, 2, t2).unwrap(), 2);
        assert_eq!(dev.receive_batch(&pool, &mut out, 2, t2).unwrap(), 1);
        assert_eq!(out.iter().map(seq).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(dev.poll_at(), None);
        let s = dev.impair_stats();
        assert_eq!((s.rx.frames, s.tx.frames), (3, 3));
        drop(out);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn impaired_loss_and_corruption_are_counted() {
        let pool = BufferPool::new(2048, 512);
        let imp: Impairment = "loss=50%,corrupt=100%".parse().unwrap();
        let mut dev = Impaired::with_directions(Loopback::new(1500, 1024), Impairment::none(), imp, 9);
        let original: Vec<u8> = (0..60u8).map(|i| i.wrapping_mul(37)).collect();
        let mut q: VecDeque<PacketBuf> =
            (0..200).map(|_| PacketBuf::from_slice(&pool, 0, &original).unwrap()).collect();
        let now = Instant::from_secs(1);
        assert_eq!(dev.transmit_batch(&mut q, now).unwrap(), 200);
        let mut out = Vec::new();
        let n = dev.receive_batch(&pool, &mut out, 1000, now).unwrap();
        let s = dev.impair_stats().tx;
        assert_eq!(s.frames, 200);
        assert_eq!(n as u64, 200 - s.lost);
        assert!((70..130).contains(&s.lost), "lost {}", s.lost);
        assert_eq!(s.corrupted, n as u64);
        for frame in &out {
            let bytes = frame.to_vec();
            let flipped: u32 = bytes.iter().zip(&original).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(flipped, 1, "exactly one bit flipped");
        }
        drop(out);
        assert_eq!(pool.in_use(), 0);
        assert_eq!(dev.held(), 0);
    }
}
