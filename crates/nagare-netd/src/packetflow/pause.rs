//! The receive pause: after a full batch of frames that were all
//! datagrams the filter dropped for their sockets' full queues, netd
//! leaves the device unread until one of those queues has drained to half
//! (its receiver caught up) or [`MAX_PAUSE`] has passed. What comes
//! meanwhile waits in the device; where the link's queue fills, a local
//! sender blocks on its socket's send buffer, or the link drops at the
//! sender's cost. Either way netd stops spending CPU on frames that would
//! only be dropped, and the receivers get it: on a machine whose senders
//! share the CPUs, delivered datagrams then do not fall as the offered
//! load rises (receive livelock, Mogul and Ramakrishnan 1997).
//!
//! A pause holds at most one batch's sockets; a TCP segment or any frame
//! that passed in the batch means no pause at all, and no pause outlasts
//! [`MAX_PAUSE`]. A pause whose time ran out with no queue drained (a
//! receiver that does not read at all) is not followed by another for
//! [`BACKOFF`]: the device is read at full speed meanwhile, so that the
//! other traffic behind such a flood is not held to a batch per pause.

use nagare_core::{Interface, UdpHandle};
use std::time::{Duration, Instant};

/// The longest pause.
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(5);
/// How long after a pause that ran out undrained no pause starts.
pub(crate) const BACKOFF: Duration = Duration::from_millis(50);

/// Whether UDP socket `h` holds at most half of what its queue takes, in
/// datagrams and in bytes, or is gone: its receiver has caught up, which
/// ends a pause or a hold (`hold.rs`) for it.
pub(crate) fn drained_to_half(iface: &Interface, h: UdpHandle) -> bool {
    iface.udp_ref().socket(h).is_none_or(|u| {
        let (datagrams, bytes) = u.queue_limits();
        u.queued() * 2 <= datagrams && u.queued_bytes() * 2 <= bytes
    })
}

/// A pause under way: when it ends at the latest, and the sockets whose
/// draining ends it sooner; and until when none may start.
#[derive(Debug, Default)]
pub(crate) struct Pause {
    until: Option<Instant>,
    sockets: Vec<UdpHandle>,
    backoff_until: Option<Instant>,
}

impl Pause {
    /// Pauses from `now` for the full queues of `sockets`, unless a
    /// pause ran out undrained within [`BACKOFF`]. Whether it did.
    pub fn start(&mut self, sockets: &[UdpHandle], now: Instant) -> bool {
        if self.backoff_until.is_some_and(|b| now < b) {
            return false;
        }
        self.sockets.clear();
        self.sockets.extend_from_slice(sockets);
        self.until = Some(now + MAX_PAUSE);
        true
    }

    /// Whether the pause goes on at `now`: it ends once its time has
    /// passed or one of its sockets has drained to half (or is gone).
    pub fn active(&mut self, iface: &Interface, now: Instant) -> bool {
        let Some(until) = self.until else { return false };
        if self.sockets.iter().any(|&h| drained_to_half(iface, h)) {
            self.until = None;
            return false;
        }
        if now >= until {
            self.until = None;
            self.backoff_until = Some(now + BACKOFF);
            return false;
        }
        true
    }

    /// When the pause ends at the latest, while one is under way.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packetflow::queued::socket_holding;

    #[test]
    fn a_pause_ends_when_a_queue_drains_to_half_or_its_time_passes() {
        let (mut us, h) = socket_holding(6);
        let mut p = Pause::default();
        let t0 = Instant::now();
        assert!(!p.active(&us, t0), "none started");
        // Over half full: on until MAX_PAUSE.
        assert!(p.start(&[h], t0));
        assert!(p.active(&us, t0 + MAX_PAUSE / 2));
        assert_eq!(p.until(), Some(t0 + MAX_PAUSE));
        assert!(!p.active(&us, t0 + MAX_PAUSE));
        assert_eq!(p.until(), None);
        // Run out undrained: no pause for BACKOFF.
        assert!(!p.start(&[h], t0 + MAX_PAUSE + BACKOFF / 2));
        assert!(!p.active(&us, t0 + MAX_PAUSE + BACKOFF / 2));
        let t0 = t0 + MAX_PAUSE + BACKOFF;
        // Read down to half: over.
        assert!(p.start(&[h], t0));
        assert!(p.active(&us, t0), "600 of 1000 bytes");
        us.udp().recv(h).unwrap();
        assert!(!p.active(&us, t0), "500 of 1000 bytes");
        // A socket gone ends it too; neither starts a backoff.
        us.udp().close(h).unwrap();
        assert!(p.start(&[h], t0));
        assert!(!p.active(&us, t0));
        assert!(p.start(&[h], t0));
    }
}
