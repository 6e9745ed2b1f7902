//! One client's waiting receives and accepts parked on their sockets: each
//! found nothing, and only an event of its socket, a request naming the
//! socket, its time limit or a run of every wait can change that. They
//! wait here out of the list a turn walks, so that a turn costs what the
//! client's busy sockets cost, not what each idle one's receives do; a
//! turn takes back the sockets it must ([`Parked::take_back`]) and merges
//! their requests with the rest in the order they came.
//!
//! Invariant: each socket's list holds its requests in the order they
//! came (`Pending::seq`), `count` is the requests of all lists, and every
//! list's socket is either named in `by_sock` under that list's id or
//! counted in `aliased` (a list whose socket another id had when it was
//! made): while `aliased` is not 0, the sockets with events are found by
//! a look at every list.

use crate::session::Pending;
use crate::sockets::Sock;
use hashbrown::HashMap;
use nagare_core::Instant;

/// Emptied lists kept for the next socket to park, at most.
const SPARE_LISTS: usize = 64;

/// What a turn knows of the engine's last lists of events.
pub(crate) trait Events {
    /// How many sockets they named.
    fn listed(&self) -> usize;
    /// Calls `f` with each socket they named.
    fn each_listed(&self, f: &mut dyn FnMut(Sock));
    /// Whether they named `sock`.
    fn had_event(&self, sock: Sock) -> bool;
}

/// The requests parked on one socket.
struct List {
    sock: Sock,
    waiting: Vec<Pending>,
    /// The earliest time limit of its requests.
    deadline: Option<Instant>,
}

/// One client's parked requests, by the id of their socket.
#[derive(Default)]
pub(crate) struct Parked {
    lists: HashMap<u32, List>,
    by_sock: HashMap<Sock, u32>,
    aliased: usize,
    count: usize,
    /// The earliest time limit of a parked request, or an earlier one
    /// (a list taken back since may have had it).
    deadline: Option<Instant>,
    spare_lists: Vec<Vec<Pending>>,
    /// Scratch for the ids a turn takes back.
    ids: Vec<u32>,
}

impl Parked {
    /// The requests parked.
    pub fn len(&self) -> usize {
        self.count
    }

    /// The requests parked on socket `id`.
    pub fn on(&self, id: u32) -> usize {
        self.lists.get(&id).map_or(0, |l| l.waiting.len())
    }

    /// Every parked request.
    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.lists.values().flat_map(|l| l.waiting.iter())
    }

    /// The earliest time limit of a parked request, or an earlier time.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Parks `p` on `sock`, under the socket id it names.
    pub fn park(&mut self, sock: Sock, p: Pending) {
        self.deadline = earliest(self.deadline, p.deadline);
        let id = p.req.socket;
        let list = match self.lists.entry(id) {
            hashbrown::hash_map::Entry::Occupied(e) => e.into_mut(),
            hashbrown::hash_map::Entry::Vacant(e) => {
                match self.by_sock.entry(sock) {
                    hashbrown::hash_map::Entry::Vacant(b) => {
                        b.insert(id);
                    }
                    hashbrown::hash_map::Entry::Occupied(_) => self.aliased += 1,
                }
                e.insert(List { sock, waiting: self.spare_lists.pop().unwrap_or_default(), deadline: None })
            }
        };
        list.deadline = earliest(list.deadline, p.deadline);
        let at = list.waiting.partition_point(|q| q.seq < p.seq);
        list.waiting.insert(at, p);
        self.count += 1;
    }

    /// Takes the requests parked on socket `id`, in the order they came.
    pub fn take(&mut self, id: u32) -> Option<Vec<Pending>> {
        let list = self.lists.remove(&id)?;
        self.count -= list.waiting.len();
        match self.by_sock.get(&list.sock) {
            Some(&by) if by == id => {
                self.by_sock.remove(&list.sock);
            }
            _ => self.aliased = self.aliased.saturating_sub(1),
        }
        if self.lists.is_empty() {
            self.by_sock.clear();
            self.aliased = 0;
        }
        Some(list.waiting)
    }

    /// Moves into `list` (the other waiting requests, in the order they
    /// came) the requests parked on each socket `events` names or `named`
    /// lists, or on every socket if `all`, and those of each socket one of
    /// whose time limits passed at `now`; sorts `list` back into the
    /// order they came. The sockets with events are found from the fewer:
    /// the engine's list, or this client's parked sockets.
    pub fn take_back(&mut self, list: &mut Vec<Pending>, all: bool, named: &[u32], events: &dyn Events, now: Instant) {
        let before = list.len();
        let mut ids = std::mem::take(&mut self.ids);
        if all {
            ids.extend(self.lists.keys());
            self.deadline = None;
        } else {
            if self.deadline.is_some_and(|d| now >= d) {
                // The due lists, and the earliest limit of the others.
                let due = |l: &List| l.deadline.is_some_and(|d| now >= d);
                ids.extend(self.lists.iter().filter(|(_, l)| due(l)).map(|(&id, _)| id));
                self.deadline = self.lists.values().filter(|l| !due(l)).filter_map(|l| l.deadline).min();
            }
            ids.extend_from_slice(named);
            if self.aliased == 0 && events.listed() < self.lists.len() {
                let by_sock = &self.by_sock;
                events.each_listed(&mut |sock| ids.extend(by_sock.get(&sock)));
            } else {
                ids.extend(self.lists.iter().filter(|(_, l)| events.had_event(l.sock)).map(|(&id, _)| id));
            }
        }
        let mut taken = 0;
        for id in ids.drain(..) {
            if let Some(mut waiting) = self.take(id) {
                list.append(&mut waiting);
                taken += 1;
                if self.spare_lists.len() < SPARE_LISTS {
                    self.spare_lists.push(waiting);
                }
            }
        }
        self.ids = ids;
        if taken > 1 || (taken == 1 && before > 0) {
            list.sort_by_key(|p| p.seq);
        }
    }

    /// Takes every parked request.
    pub fn drain(&mut self) -> impl Iterator<Item = Pending> + '_ {
        (self.count, self.aliased, self.deadline) = (0, 0, None);
        self.by_sock.clear();
        self.lists.drain().flat_map(|(_, l)| l.waiting)
    }
}

/// The earlier of two time limits, either of which may be none.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::UdpHandle;
    use nagare_request::{Op, Request};
    use std::net::{Ipv4Addr, SocketAddrV4};

    const NOW: Instant = Instant::from_secs(2);

    /// The engine's last lists, as a test says them.
    struct Listed(Vec<Sock>);

    impl Events for Listed {
        fn listed(&self) -> usize {
            self.0.len()
        }
        fn each_listed(&self, f: &mut dyn FnMut(Sock)) {
            self.0.iter().for_each(|&s| f(s));
        }
        fn had_event(&self, sock: Sock) -> bool {
            self.0.contains(&sock)
        }
    }

    fn udp_sockets(n: u16) -> Vec<Sock> {
        let mut iface = crate::packetflow::queued::socket_holding(0).0;
        (0..n)
            .map(|i| {
                let h: UdpHandle = iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 100 + i)).unwrap();
                Sock::Udp(h)
            })
            .collect()
    }

    fn recv(socket: u32, seq: u64, deadline: Option<Instant>) -> Pending {
        let mut req = Request::new(Op::RecvFrom, seq);
        req.socket = socket;
        Pending { req, buf: None, deadline, parked: None, seq }
    }

    fn seqs(list: &[Pending]) -> Vec<u64> {
        list.iter().map(|p| p.seq).collect()
    }

    #[test]
    fn a_socket_with_an_event_comes_back_merged_in_the_order_its_requests_came() {
        let s = udp_sockets(3);
        let mut parked = Parked::default();
        parked.park(s[0], recv(1, 1, None));
        parked.park(s[1], recv(2, 2, None));
        parked.park(s[0], recv(1, 4, None));
        // Parked out of order (an older one that waited unparked a turn
        // longer): its place is by when it came.
        parked.park(s[0], recv(1, 3, None));
        assert_eq!((parked.len(), parked.on(1), parked.on(2)), (4, 3, 1));
        // A newer receive of the same socket waits unparked.
        let mut list = vec![recv(3, 0, None), recv(1, 5, None)];
        parked.take_back(&mut list, false, &[], &Listed(vec![s[0]]), NOW);
        assert_eq!(seqs(&list), [0, 1, 3, 4, 5], "socket 1's receives in the order they came");
        assert_eq!((parked.len(), parked.on(1), parked.on(2)), (1, 0, 1));
        // Socket 3 had no event; socket 2 is named by a request.
        let mut list = Vec::new();
        parked.take_back(&mut list, false, &[2], &Listed(vec![s[2]]), NOW);
        assert_eq!(seqs(&list), [2]);
        assert_eq!(parked.len(), 0);
        // Taken back alone, a list is in order as it was parked.
        for seq in [6, 8, 7] {
            parked.park(s[0], recv(1, seq, None));
        }
        list.clear();
        parked.take_back(&mut list, false, &[1], &Listed(vec![]), NOW);
        assert_eq!(seqs(&list), [6, 7, 8]);
    }

    #[test]
    fn events_are_found_from_the_engines_list_or_from_the_parked_sockets_alike() {
        let s = udp_sockets(6);
        for events in [vec![s[4]], vec![s[4], s[5], s[0], s[1], s[2], s[3]]] {
            let mut parked = Parked::default();
            for (i, &sock) in s.iter().enumerate().take(5) {
                parked.park(sock, recv(i as u32 + 1, i as u64 + 1, None));
            }
            let mut list = Vec::new();
            parked.take_back(&mut list, false, &[], &Listed(events.clone()), NOW);
            let expected: Vec<u64> = if events.len() == 1 { vec![5] } else { vec![1, 2, 3, 4, 5] };
            assert_eq!(seqs(&list), expected, "{} listed", events.len());
        }
    }

    #[test]
    fn a_socket_parked_under_two_ids_comes_back_under_both() {
        let s = udp_sockets(3);
        let mut parked = Parked::default();
        parked.park(s[0], recv(1, 1, None));
        parked.park(s[0], recv(7, 2, None));
        parked.park(s[1], recv(2, 3, None));
        parked.park(s[2], recv(3, 4, None));
        let mut list = Vec::new();
        // One listed socket among three parked: the short way would find
        // id 1 only.
        parked.take_back(&mut list, false, &[], &Listed(vec![s[0]]), NOW);
        assert_eq!(seqs(&list), [1, 2]);
        assert_eq!(parked.len(), 2);
    }

    #[test]
    fn a_passed_time_limit_takes_back_its_socket_and_a_run_of_every_wait_all() {
        let ms = |n| NOW + std::time::Duration::from_millis(n);
        let s = udp_sockets(3);
        let mut parked = Parked::default();
        parked.park(s[0], recv(1, 1, None));
        parked.park(s[1], recv(2, 2, Some(ms(5))));
        parked.park(s[2], recv(3, 3, Some(ms(9))));
        parked.park(s[1], recv(2, 4, None));
        assert_eq!(parked.deadline(), Some(ms(5)));
        let mut list = Vec::new();
        parked.take_back(&mut list, false, &[], &Listed(vec![]), NOW);
        assert!(list.is_empty(), "nothing is due yet");
        parked.take_back(&mut list, false, &[], &Listed(vec![]), ms(5));
        assert_eq!(seqs(&list), [2, 4], "the socket whose limit passed, whole");
        assert_eq!((parked.len(), parked.deadline()), (2, Some(ms(9))));
        list.clear();
        parked.take_back(&mut list, false, &[], &Listed(vec![]), ms(9));
        assert_eq!(seqs(&list), [3]);
        assert_eq!((parked.len(), parked.deadline()), (1, None));
        list.clear();
        parked.take_back(&mut list, true, &[], &Listed(vec![]), NOW);
        assert_eq!(seqs(&list), [1]);
        assert_eq!(parked.len(), 0);
        parked.park(s[0], recv(1, 3, None));
        list.clear();
        parked.take_back(&mut list, true, &[], &Listed(vec![]), NOW);
        assert_eq!(seqs(&list), [3]);
        parked.park(s[1], recv(2, 4, None));
        assert_eq!(parked.drain().map(|p| p.seq).collect::<Vec<_>>(), [4]);
        assert_eq!(parked.len(), 0);
        // Many sockets' lists come back in the order their requests came,
        // whatever the table's.
        let many = udp_sockets(40);
        for (i, &sock) in many.iter().enumerate() {
            parked.park(sock, recv(100 + i as u32, 1000 - i as u64, None));
        }
        list.clear();
        parked.take_back(&mut list, true, &[], &Listed(vec![]), NOW);
        assert_eq!(seqs(&list), (961..=1000).collect::<Vec<u64>>());
    }
}
