//! A socket buffer that autotuning grows within a ceiling its owner
//! grants: the part receive-buffer and send-buffer autotuning share
//! (`recv_tuning.rs` and `send_tuning.rs` decide when and how far to aim).
//!
//! Invariants:
//! - While autotuning runs, `buffer <= ceiling <= max(max, buffer)`, and
//!   the buffer only grows once started ([`GrownBuffer::start_at`]).
//!   The ceiling is the owner's: an owner that charges buffers to
//!   someone (an inet server to its clients) lets a buffer grow only as
//!   far as it has granted, and reads what autotuning wanted past it
//!   ([`GrownBuffer::wanted`]) to grant more.
//! - A size the application sets ([`GrownBuffer::fix`]) ends autotuning:
//!   the buffer is then its own ceiling and wants nothing more.

/// One autotuned buffer's size, ceiling and wish.
#[derive(Debug, Clone)]
pub struct GrownBuffer {
    enabled: bool,
    buffer: usize,
    /// How far the buffer may grow before its owner grants more.
    ceiling: usize,
    /// The size the last growth aimed at, before the ceiling held it back.
    wanted: usize,
    max: usize,
}

impl GrownBuffer {
    /// A buffer of `buffer` bytes that autotuning (if `enabled`) may grow
    /// up to `max`, no ceiling below that until the owner sets one.
    pub fn new(enabled: bool, buffer: usize, max: usize) -> Self {
        GrownBuffer { enabled, buffer, ceiling: max, wanted: buffer, max }
    }

    /// Fixes the buffer at `bytes` and ends autotuning (the application
    /// chose a size). `max` stays.
    pub fn fix(&mut self, bytes: usize) {
        self.enabled = false;
        self.buffer = bytes;
    }

    /// Starts the buffer at `bytes` instead (an owner's grant for a new
    /// connection, smaller than the configuration's), its ceiling there
    /// too: autotuning still runs and asks the owner for more as use
    /// needs. A fixed buffer keeps its size.
    pub fn start_at(&mut self, bytes: usize) {
        if !self.enabled {
            return;
        }
        self.buffer = bytes;
        self.ceiling = bytes;
        self.wanted = bytes;
    }

    /// Whether autotuning still runs.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The buffer's size now.
    pub fn buffer(&self) -> usize {
        self.buffer
    }

    /// The largest it may become.
    pub fn max(&self) -> usize {
        self.max
    }

    /// How far it may grow now: the buffer itself once fixed.
    pub fn ceiling(&self) -> usize {
        if self.enabled {
            self.ceiling
        } else {
            self.buffer
        }
    }

    /// What autotuning would have grown the buffer to without the ceiling
    /// (the buffer itself when nothing was held back, or once fixed).
    pub fn wanted(&self) -> usize {
        if self.enabled {
            self.wanted.max(self.buffer)
        } else {
            self.buffer
        }
    }

    /// Moves the ceiling to `bytes`, within `buffer..=max`; a growth the
    /// old ceiling held back happens at once, as far as the new one goes.
    /// True when the buffer grew. A fixed buffer keeps its size.
    pub fn set_ceiling(&mut self, bytes: usize) -> bool {
        if !self.enabled {
            return false;
        }
        self.ceiling = bytes.clamp(self.buffer, self.max.max(self.buffer));
        self.grow_toward(self.wanted)
    }

    /// The owner refuses the growth wanted past the ceiling: what is
    /// wanted comes back to the ceiling.
    pub fn refuse(&mut self) {
        self.wanted = self.wanted.min(self.ceiling);
    }

    /// Autotuning wants `bytes` (at most `max`), for the owner to grant
    /// past the ceiling.
    pub fn want(&mut self, bytes: usize) {
        self.wanted = bytes.min(self.max);
    }

    /// Grows the buffer toward `bytes`, as far as the ceiling goes; true
    /// when it grew.
    pub fn grow_toward(&mut self, bytes: usize) -> bool {
        let grown = bytes.min(self.ceiling);
        if grown > self.buffer {
            self.buffer = grown;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_stops_at_the_ceiling_and_a_raised_ceiling_grants_what_was_wanted() {
        let mut b = GrownBuffer::new(true, 100, 1000);
        b.set_ceiling(100);
        b.want(400);
        assert!(!b.grow_toward(400));
        assert_eq!((b.buffer(), b.ceiling(), b.wanted()), (100, 100, 400));
        assert!(b.set_ceiling(250));
        assert_eq!(b.buffer(), 250);
        assert!(b.set_ceiling(5000));
        assert_eq!((b.buffer(), b.ceiling()), (400, 1000));
        // Never below the buffer.
        assert!(!b.set_ceiling(0));
        assert_eq!(b.ceiling(), 400);
    }

    #[test]
    fn a_refusal_brings_what_is_wanted_back_to_the_ceiling() {
        let mut b = GrownBuffer::new(true, 100, 1000);
        b.set_ceiling(100);
        b.want(5000);
        assert_eq!(b.wanted(), 1000, "never past the max");
        b.refuse();
        assert_eq!(b.wanted(), 100);
    }

    #[test]
    fn a_buffer_started_smaller_grows_again_when_granted() {
        let mut b = GrownBuffer::new(true, 1000, 4000);
        b.start_at(100);
        assert!(b.enabled());
        assert_eq!((b.buffer(), b.ceiling(), b.wanted()), (100, 100, 100));
        b.want(800);
        assert!(!b.grow_toward(800), "held at the new ceiling");
        assert!(b.set_ceiling(4000));
        assert_eq!(b.buffer(), 800);
        // A fixed one keeps its size.
        let mut fixed = GrownBuffer::new(true, 1000, 4000);
        fixed.fix(500);
        fixed.start_at(100);
        assert_eq!((fixed.buffer(), fixed.ceiling()), (500, 500));
    }

    #[test]
    fn a_fixed_buffer_is_its_own_ceiling_and_wants_nothing() {
        let mut b = GrownBuffer::new(true, 100, 1000);
        b.want(800);
        b.fix(50);
        assert!(!b.enabled());
        assert!(!b.set_ceiling(900));
        assert_eq!((b.buffer(), b.ceiling(), b.wanted()), (50, 50, 50));
    }
}
