//! Two interfaces joined by a wire in virtual time: what one sends, the
//! other receives, until neither has more to send.

use nagare_core::{Instant, Interface};
use std::time::Duration;

pub struct Wire {
    pub a: Interface,
    pub b: Interface,
    pub now: Instant,
    /// When false, frames from A are lost (B is unplugged).
    pub b_plugged: bool,
    /// Every frame A sent, as bytes, for the assertions.
    pub sent_by_a: Vec<Vec<u8>>,
    pub sent_by_b: Vec<Vec<u8>>,
}

impl Wire {
    /// `a` and `b` joined, at 100 s of virtual time.
    pub fn between(a: Interface, b: Interface) -> Wire {
        Wire { a, b, now: Instant::from_secs(100), b_plugged: true, sent_by_a: Vec::new(), sent_by_b: Vec::new() }
    }

    /// Carries frames both ways until neither side sends more (at most
    /// 1000 rounds).
    pub fn settle(&mut self) {
        for _ in 0..1000 {
            let from_a: Vec<_> = self.a.tx_queue().drain(..).collect();
            let from_b: Vec<_> = self.b.tx_queue().drain(..).collect();
            if from_a.is_empty() && from_b.is_empty() {
                return;
            }
            for frame in from_a {
                self.sent_by_a.push(frame.to_vec());
                if self.b_plugged {
                    self.b.receive(frame, self.now);
                }
            }
            for frame in from_b {
                self.sent_by_b.push(frame.to_vec());
                self.a.receive(frame, self.now);
            }
        }
        panic!("frames kept flowing");
    }

    /// Runs both interfaces' timers at every instant they ask for up to
    /// `by` from now.
    pub fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        for _ in 0..10_000 {
            self.a.poll(self.now);
            self.b.poll(self.now);
            self.settle();
            let next = [self.a.poll_at(), self.b.poll_at()].into_iter().flatten().min();
            match next {
                Some(t) if t <= end && t > self.now => self.now = t,
                Some(t) if t <= self.now => {}
                _ => break,
            }
        }
        self.now = end;
        self.a.poll(self.now);
        self.b.poll(self.now);
        self.settle();
    }
}
