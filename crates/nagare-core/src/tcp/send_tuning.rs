//! Send-buffer autotuning: a connection's send buffer grows to twice its
//! congestion window while the buffer, not the network, holds its sender
//! back (as Linux's tcp_sndbuf_expand does), so that a fast path is not
//! held to what a small starting buffer keeps in flight, while a
//! connection whose application writes slowly keeps a small one.
//!
//! Invariants:
//! - `buffer <= ceiling <= max` while autotuning runs; the buffer only
//!   grows, once an owner has started it ([`SendTuning::start_at`]).
//!   The ceiling is the owner's: an owner that charges buffers to
//!   someone (an inet server to its clients) lets a buffer grow only as
//!   far as it has granted, and reads what autotuning wanted past it
//!   ([`SendTuning::wanted`]) to grant more. A size the application sets
//!   ([`SendTuning::fix`], SO_SNDBUF) ends autotuning.
//! - Growth needs both signs on an ACK that acknowledges new data: the
//!   buffer was pressed (a send found it full, or it had less than a
//!   quarter free), and the bytes in flight after the ACK are below the
//!   congestion window (the network could take more). A connection held
//!   back by its congestion window, or by an application that writes less
//!   than the buffer holds, is not given more.
//! - The buffer is a limit on bytes queued, not an allocation: queued
//!   data stays in the pool buffers (or the application's lent buffers) it
//!   was written into, so growing allocates nothing here.

use super::config::TcpConfig;
use super::grown_buffer::GrownBuffer;

/// The send buffer of one connection.
#[derive(Debug, Clone)]
pub struct SendTuning {
    /// Its size, the owner's ceiling and what a growth aimed at.
    size: GrownBuffer,
    /// A send found the buffer full since the last ACK that was weighed.
    pressed: bool,
    /// Bytes still to be acknowledged before a growth the owner refused
    /// is asked for again.
    quiet: usize,
}

impl SendTuning {
    /// The buffer `config` starts a connection with.
    pub fn new(config: &TcpConfig) -> Self {
        let size = GrownBuffer::new(config.send_autotune, config.send_buffer, config.send_buffer_limit());
        SendTuning { size, pressed: false, quiet: 0 }
    }

    /// Fixes the buffer at `bytes` and ends autotuning (the application
    /// chose a size).
    pub fn fix(&mut self, bytes: usize) {
        self.size.fix(bytes);
    }

    /// The send buffer's size now.
    pub fn buffer(&self) -> usize {
        self.size.buffer()
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
    /// forgotten, and asked for again only once a buffer's worth of bytes
    /// has been acknowledged (about a round trip of a sender the buffer
    /// holds back), so that an owner asked each time it looks is not
    /// asked on every send, and a grant its budget has room for later
    /// still comes.
    pub fn refuse_growth(&mut self) {
        self.size.refuse();
        self.quiet = self.size.buffer();
    }

    /// Starts the send buffer at `bytes` with its ceiling there, autotuning
    /// still on (see [`GrownBuffer::start_at`]). A fixed buffer keeps its
    /// size.
    pub fn start_at(&mut self, bytes: usize) {
        self.size.start_at(bytes);
    }

    /// Moves the ceiling to `bytes`, within `buffer..=max`; a growth the
    /// old ceiling held back happens at once, as far as the new one goes.
    /// True when the buffer grew. A fixed buffer keeps its size.
    pub fn set_ceiling(&mut self, bytes: usize) -> bool {
        self.size.set_ceiling(bytes)
    }

    /// A send found the buffer full: its writer waits for room.
    pub fn press(&mut self) {
        self.pressed = true;
    }

    /// An ACK acknowledged `acked` bytes of new data. `free_before` is
    /// what the buffer had free before it, `flight` the bytes in flight
    /// after it and `cwnd` the congestion window. True when the buffer
    /// grew.
    pub fn on_ack(&mut self, acked: usize, free_before: usize, flight: usize, cwnd: usize) -> bool {
        let buffer = self.size.buffer();
        let pressed = core::mem::take(&mut self.pressed) || free_before < buffer / 4;
        self.quiet = self.quiet.saturating_sub(acked);
        if !self.size.enabled() || !pressed || flight >= cwnd || buffer >= self.size.max() {
            return false;
        }
        let target = cwnd.saturating_mul(2).min(self.size.max());
        if target <= buffer {
            return false;
        }
        if self.quiet == 0 {
            self.size.want(self.size.wanted().max(target));
        }
        self.size.grow_toward(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1024;

    fn tuning(ceiling: Option<usize>) -> SendTuning {
        let config = TcpConfig { send_buffer: 256 * KIB, send_buffer_max: 4096 * KIB, ..TcpConfig::default() };
        let mut t = SendTuning::new(&config);
        if let Some(c) = ceiling {
            t.set_ceiling(c);
        }
        t
    }

    #[test]
    fn a_full_buffer_with_room_in_the_window_grows_to_twice_the_window() {
        let mut t = tuning(None);
        assert!(t.on_ack(KIB, 0, 100 * KIB, 300 * KIB));
        assert_eq!(t.buffer(), 600 * KIB);
        // A pressed writer counts as full, whatever was free.
        t.press();
        assert!(t.on_ack(KIB, 500 * KIB, 100 * KIB, 400 * KIB));
        assert_eq!(t.buffer(), 800 * KIB);
    }

    #[test]
    fn a_buffer_with_room_or_a_full_window_does_not_grow() {
        let mut t = tuning(None);
        assert!(!t.on_ack(KIB, 128 * KIB, 100 * KIB, 300 * KIB), "half free: the writer is slower than the path");
        assert!(!t.on_ack(KIB, 0, 300 * KIB, 300 * KIB), "the window is full: the network holds it back");
        assert!(!t.on_ack(KIB, 0, 10 * KIB, 100 * KIB), "twice the window is below the buffer");
        assert_eq!(t.buffer(), 256 * KIB);
        // A press is used by one ACK only.
        t.press();
        assert!(!t.on_ack(KIB, 128 * KIB, 300 * KIB, 300 * KIB));
        assert!(!t.on_ack(KIB, 128 * KIB, 100 * KIB, 300 * KIB));
        assert_eq!(t.buffer(), 256 * KIB);
    }

    #[test]
    fn growth_stops_at_the_maximum() {
        let mut t = tuning(None);
        assert!(t.on_ack(KIB, 0, 0, usize::MAX));
        assert_eq!(t.buffer(), 4096 * KIB);
        assert!(!t.on_ack(KIB, 0, 0, usize::MAX));
    }

    #[test]
    fn the_ceiling_holds_growth_back_until_it_is_raised() {
        let mut t = tuning(Some(256 * KIB));
        assert!(!t.on_ack(KIB, 0, 100 * KIB, 300 * KIB));
        assert_eq!((t.buffer(), t.ceiling(), t.wanted()), (256 * KIB, 256 * KIB, 600 * KIB));
        assert!(t.set_ceiling(400 * KIB));
        assert_eq!(t.buffer(), 400 * KIB);
        assert!(t.set_ceiling(8192 * KIB));
        assert_eq!((t.buffer(), t.ceiling()), (600 * KIB, 4096 * KIB));
        // Never below the buffer.
        assert!(!t.set_ceiling(0));
        assert_eq!(t.ceiling(), 600 * KIB);
    }

    #[test]
    fn a_refused_growth_is_asked_for_again_once_a_buffer_s_worth_is_acknowledged() {
        let mut t = tuning(Some(256 * KIB));
        t.on_ack(KIB, 0, 100 * KIB, 300 * KIB);
        assert_eq!(t.wanted(), 600 * KIB);
        t.refuse_growth();
        assert_eq!(t.wanted(), 256 * KIB);
        // Pressed ACKs of less than the buffer's worth in all: not asked.
        for _ in 0..3 {
            t.on_ack(64 * KIB, 0, 100 * KIB, 300 * KIB);
            assert_eq!(t.wanted(), 256 * KIB);
        }
        // The fourth makes 256 KiB acknowledged: asked again.
        t.on_ack(64 * KIB, 0, 100 * KIB, 300 * KIB);
        assert_eq!(t.wanted(), 600 * KIB);
    }

    #[test]
    fn a_fixed_buffer_never_grows() {
        let mut t = tuning(None);
        t.fix(64 * KIB);
        t.press();
        assert!(!t.on_ack(KIB, 0, 0, 1 << 20));
        assert!(!t.set_ceiling(1 << 20));
        assert_eq!((t.buffer(), t.ceiling(), t.wanted()), (64 * KIB, 64 * KIB, 64 * KIB));
    }
}
