//! The queue hold: where each client's frames come on a TAP queue of their
//! own, a client whose UDP socket overflowed (as the filter or the memory
//! manager sees, or, with the scheduler alone, as the engine's drops say)
//! has its queue left unread until that socket has drained to half (its
//! receiver caught up) or [`MAX_HOLD`] has passed. Its frames wait in the
//! kernel's ring meanwhile instead of being read only to be dropped at
//! the full socket: the ring (`--tap-queue-len` frames) absorbs the time
//! its receiver is off the CPU, and netd spends its own on the other
//! clients' queues. The receive
//! pause (`pause.rs`) does the same for the whole device, after a batch
//! of nothing but such drops; a hold needs one drop and stops one client.
//!
//! A hold whose time ran out with its socket still over half full (a
//! receiver that does not read) is not followed by another for that
//! client for [`BACKOFF`]: its queue is read at full speed meanwhile, so
//! that the rest of its traffic (a TCP connection beside the flooded
//! socket) waits at most [`MAX_HOLD`] in every [`MAX_HOLD`] +
//! [`BACKOFF`].

use super::pause::drained_to_half;
use hashbrown::HashMap;
use nagare_core::{Interface, UdpHandle};
use std::time::{Duration, Instant};

/// The longest hold: a receiver kept off the CPU for a turn or two of
/// the scheduler keeps its hold, and a ring of 4096 frames lasts about
/// as long at 200 000 frames a second.
pub(crate) const MAX_HOLD: Duration = Duration::from_millis(20);
/// How long after a hold that ran out undrained no hold of that client
/// starts.
pub(crate) const BACKOFF: Duration = Duration::from_millis(50);

/// One client's hold: when it ends at the latest and the socket whose
/// draining ends it sooner; or, after one ran out, until when none starts.
#[derive(Debug, Clone, Copy)]
enum State {
    Held { until: Instant, socket: UdpHandle },
    Backoff { until: Instant },
}

/// The clients whose queues are held, by client key.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    clients: HashMap<u64, State>,
}

impl Holds {
    /// Client `client`'s socket `socket` dropped a datagram for its full
    /// queue at `now`: its queue is held, unless it is already, or a hold
    /// of it ran out undrained within [`BACKOFF`]. Whether one started.
    pub fn start(&mut self, client: u64, socket: UdpHandle, now: Instant) -> bool {
        match self.clients.get(&client) {
            Some(State::Held { .. }) => false,
            Some(State::Backoff { until }) if now < *until => false,
            _ => {
                self.clients.insert(client, State::Held { until: now + MAX_HOLD, socket });
                true
            }
        }
    }

    /// Ends at `now` the holds whose socket drained to half (or is gone)
    /// and those whose time passed; the clients still held.
    pub fn update(&mut self, iface: &Interface, now: Instant) -> impl Iterator<Item = u64> + '_ {
        self.clients.retain(|_, state| match *state {
            State::Held { until, socket } => {
                if drained_to_half(iface, socket) {
                    return false;
                }
                if now >= until {
                    *state = State::Backoff { until: now + BACKOFF };
                }
                true
            }
            State::Backoff { until } => now < until,
        });
        self.clients.iter().filter(|(_, s)| matches!(s, State::Held { .. })).map(|(&k, _)| k)
    }

    /// Forgets client `client` (it went).
    pub fn forget(&mut self, client: u64) {
        self.clients.remove(&client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packetflow::queued::socket_holding;

    #[test]
    fn a_hold_ends_when_its_socket_drains_to_half_or_its_time_passes_then_backs_off() {
        let (mut us, h) = socket_holding(6);
        let mut holds = Holds::default();
        let t0 = Instant::now();
        assert!(holds.start(1, h, t0));
        assert!(!holds.start(1, h, t0), "held already");
        assert!(holds.start(2, h, t0), "another client");
        holds.forget(2);
        // Over half full: held until MAX_HOLD, then a backoff.
        assert_eq!(holds.update(&us, t0 + MAX_HOLD / 2).collect::<Vec<_>>(), vec![1]);
        assert_eq!(holds.update(&us, t0 + MAX_HOLD).count(), 0);
        assert!(!holds.start(1, h, t0 + MAX_HOLD + BACKOFF / 2), "backing off");
        assert!(holds.update(&us, t0 + MAX_HOLD + BACKOFF).next().is_none());
        assert!(holds.start(1, h, t0 + MAX_HOLD + BACKOFF));
        // Drained to half (three of six taken): the hold ends, no backoff.
        let mut buf = [0u8; 200];
        for _ in 0..3 {
            us.udp().recv_from(h, &mut buf).unwrap();
        }
        let t1 = t0 + MAX_HOLD + BACKOFF;
        assert_eq!(holds.update(&us, t1).count(), 0);
        assert!(holds.start(1, h, t1), "no backoff after a drained hold");
        // A socket that is gone ends its hold.
        us.udp().close(h).unwrap();
        assert_eq!(holds.update(&us, t1).count(), 0);
    }
}
