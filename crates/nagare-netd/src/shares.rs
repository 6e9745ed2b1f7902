//! Sockets held by several clients, as a child after `fork` holds its
//! parent's: a client shares one of its sockets (`SHARE`, which gives the
//! socket's token) and another client of the same user adopts it by that
//! token (`ADOPT`), under an id of its own table.
//!
//! Invariant: every holder `(client key, id)` of a shared socket is in that
//! client's table under that id, naming the same engine socket; the
//! socket is closed in the engine (or reset) only by its last holder's
//! close or departure, and the others' only take it out of their tables.
//! A socket whose placeholder descriptor is *watched* (`crate::watches`)
//! outlives its last holder until the watch ends: a process may still
//! hold the descriptor and adopt the socket.
//! Tokens are random and never 0, and only a client of the user who
//! shared a socket may adopt it (root may adopt any).
//!
//! A holder left alone takes its socket back as its own (`RECLAIM`,
//! [`Shares::reclaim`]): the socket leaves this table, and its token
//! names nothing from then on; bytes given back that still wait stay
//! here for that holder, received first as before (and, if it shares the
//! socket again before they are received, after the bytes that share
//! gives back, which it had received before them).
//!
//! Bytes a holder took from a shared stream and did not read come back
//! here (`GIVE_BACK`) and are received first by the next receive of any
//! holder, so that a stream handed to a child loses nothing its parent's
//! receives had taken ahead; they are bounded by [`MAX_RETURNED`] per
//! socket.

use std::collections::{HashMap, VecDeque};

/// Bytes given back to one shared stream that may wait to be received:
/// what a client's posted receives can hold.
pub(crate) const MAX_RETURNED: usize = nagare_request::MAX_RECV_AHEAD as usize;

/// Bytes given back that may wait in all.
pub(crate) const MAX_RETURNED_TOTAL: usize = 64 << 20;

struct Shared<S> {
    sock: S,
    /// The user who shared it.
    uid: u32,
    holders: Vec<(u64, u32)>,
    /// A process's descriptor for it is watched.
    watched: bool,
    /// Bytes given back, received before the connection's own.
    returned: VecDeque<u8>,
    /// Bytes kept from before the socket was taken back, shared again
    /// since: received after those given back at this share (which its
    /// sharer had received before them) and before the connection's own.
    later: VecDeque<u8>,
}

impl<S> Shared<S> {
    /// Bytes given back that wait.
    fn waiting(&self) -> usize {
        self.returned.len() + self.later.len()
    }

    /// Up to `into.len()` of the bytes that wait, in order: how many.
    fn take(&mut self, into: &mut [u8]) -> usize {
        let mut n = 0;
        for q in [&mut self.returned, &mut self.later] {
            let k = (into.len() - n).min(q.len());
            for (to, from) in into[n..n + k].iter_mut().zip(q.drain(..k)) {
                *to = from;
            }
            n += k;
        }
        n
    }
}

/// Every shared socket (an `S`: netd's are `crate::sockets::Sock`s), by
/// token and by holder.
pub(crate) struct Shares<S> {
    by_token: HashMap<u64, Shared<S>>,
    by_holder: HashMap<(u64, u32), u64>,
    /// Bytes given back to sockets taken back since, by holder: still
    /// received first.
    kept: HashMap<(u64, u32), VecDeque<u8>>,
    /// Bytes given back, in all (those kept included).
    returned: usize,
}

impl<S> Default for Shares<S> {
    fn default() -> Shares<S> {
        Shares { by_token: HashMap::new(), by_holder: HashMap::new(), kept: HashMap::new(), returned: 0 }
    }
}

impl<S: Copy> Shares<S> {
    /// Socket `id` of client `key` (user `uid`), which is `sock`, is shared:
    /// its token, the one it already had or `fresh` (never 0) for a socket
    /// shared for the first time.
    pub fn share(&mut self, key: u64, id: u32, sock: S, uid: u32, fresh: impl FnOnce() -> u64) -> u64 {
        if let Some(&token) = self.by_holder.get(&(key, id)) {
            return token;
        }
        let mut token = fresh().max(1);
        while self.by_token.contains_key(&token) {
            token = token.wrapping_add(1).max(1);
        }
        // Bytes kept from an earlier share come before the connection's
        // own still, after those this share gives back.
        let later = self.kept.remove(&(key, id)).unwrap_or_default();
        let returned = VecDeque::new();
        self.by_token.insert(token, Shared { sock, uid, holders: vec![(key, id)], watched: false, returned, later });
        self.by_holder.insert((key, id), token);
        token
    }

    /// The socket token `token` names, for a client of user `uid`:
    /// `ENOENT` if no socket has it (any more), `EACCES` if another user
    /// shared it.
    pub fn find(&self, token: u64, uid: u32) -> Result<S, i32> {
        let s = self.by_token.get(&token).ok_or(libc::ENOENT)?;
        if uid != 0 && uid != s.uid {
            return Err(libc::EACCES);
        }
        Ok(s.sock)
    }

    /// Client `key` holds the socket of `token` under `id` from now on.
    pub fn adopted(&mut self, token: u64, key: u64, id: u32) {
        if let Some(s) = self.by_token.get_mut(&token) {
            s.holders.push((key, id));
            self.by_holder.insert((key, id), token);
        }
    }

    /// Holder `(key, id)` lets the socket go (a close, or its client's
    /// departure): whether another holder or a watched descriptor keeps
    /// it, so that it must stay open. Its token goes with the last.
    pub fn let_go(&mut self, key: u64, id: u32) -> bool {
        if let Some(kept) = self.kept.remove(&(key, id)) {
            self.returned = self.returned.saturating_sub(kept.len());
        }
        let Some(token) = self.by_holder.remove(&(key, id)) else { return false };
        let Some(s) = self.by_token.get_mut(&token) else { return false };
        s.holders.retain(|&h| h != (key, id));
        if s.holders.is_empty() && !s.watched {
            self.remove(token);
            return false;
        }
        true
    }

    /// Takes the share of `token` out, with its given-back bytes.
    fn remove(&mut self, token: u64) -> Option<Shared<S>> {
        let s = self.by_token.remove(&token)?;
        self.returned = self.returned.saturating_sub(s.waiting());
        Some(s)
    }

    /// Whether a process of user `uid` may watch the socket of `token`:
    /// it is shared, by that user (or `uid` is root).
    pub fn may_watch(&self, token: u64, uid: u32) -> bool {
        self.by_token.get(&token).is_some_and(|s| uid == 0 || uid == s.uid)
    }

    /// The token of socket `(key, id)`, if it is shared.
    pub fn token(&self, key: u64, id: u32) -> Option<u64> {
        self.by_holder.get(&(key, id)).copied()
    }

    /// Holder `(key, id)` takes its socket back as its own: it leaves
    /// this table, with its token; given-back bytes that wait are kept for
    /// it, received first still. `EINVAL` if it is not shared, `EBUSY`
    /// (and nothing changes) while another holder has it.
    pub fn reclaim(&mut self, key: u64, id: u32) -> Result<(), i32> {
        let token = self.token(key, id).ok_or(libc::EINVAL)?;
        let s = self.by_token.get(&token).ok_or(libc::EINVAL)?;
        if s.holders.iter().any(|&h| h != (key, id)) {
            return Err(libc::EBUSY);
        }
        self.by_holder.remove(&(key, id));
        let mut s = self.by_token.remove(&token).ok_or(libc::EINVAL)?;
        if s.waiting() > 0 {
            let mut kept = std::mem::take(&mut s.returned);
            kept.append(&mut s.later);
            self.kept.insert((key, id), kept);
        }
        Ok(())
    }

    /// The socket of `token` is watched from now on.
    pub fn watch(&mut self, token: u64) {
        if let Some(s) = self.by_token.get_mut(&token) {
            s.watched = true;
        }
    }

    /// The watch of `token` ended (no descriptor names the socket any
    /// more): the socket, to be closed, if no client holds it either.
    pub fn unwatched(&mut self, token: u64) -> Option<S> {
        let s = self.by_token.get_mut(&token)?;
        s.watched = false;
        if !s.holders.is_empty() {
            return None;
        }
        self.remove(token).map(|s| s.sock)
    }

    /// Bytes holder `(key, id)` took from its stream and did not read:
    /// received first from now on. `EINVAL` if the socket is not shared,
    /// `ENOBUFS` past [`MAX_RETURNED`] for it or [`MAX_RETURNED_TOTAL`] in
    /// all.
    pub fn give_back(&mut self, key: u64, id: u32, bytes: &[u8]) -> Result<(), i32> {
        let total = self.returned;
        let s = self.shared_mut(key, id).ok_or(libc::EINVAL)?;
        if s.waiting() + bytes.len() > MAX_RETURNED || total + bytes.len() > MAX_RETURNED_TOTAL {
            return Err(libc::ENOBUFS);
        }
        s.returned.extend(bytes);
        self.returned += bytes.len();
        Ok(())
    }

    /// Up to `into.len()` given-back bytes of holder `(key, id)`'s stream,
    /// taken into `into`: how many (0 when none wait).
    pub fn take_returned(&mut self, key: u64, id: u32, into: &mut [u8]) -> usize {
        let n = if let Some(kept) = self.kept.get_mut(&(key, id)) {
            let n = into.len().min(kept.len());
            for (to, from) in into.iter_mut().zip(kept.drain(..n)) {
                *to = from;
            }
            if kept.is_empty() {
                self.kept.remove(&(key, id));
            }
            n
        } else {
            match self.by_holder.get(&(key, id)).and_then(|t| self.by_token.get_mut(t)) {
                Some(s) => s.take(into),
                None => return 0,
            }
        };
        self.returned -= n;
        n
    }

    /// Whether holder `(key, id)`'s socket is shared, or keeps bytes
    /// given back from before it was taken back: bytes given back may
    /// come to it without an event of the engine's.
    pub fn is_shared(&self, key: u64, id: u32) -> bool {
        self.by_holder.contains_key(&(key, id)) || self.kept.contains_key(&(key, id))
    }

    /// Whether given-back bytes wait on holder `(key, id)`'s stream.
    pub fn has_returned(&self, key: u64, id: u32) -> bool {
        self.kept.contains_key(&(key, id))
            || self.by_holder.get(&(key, id)).and_then(|t| self.by_token.get(t)).is_some_and(|s| s.waiting() > 0)
    }

    /// A holder of socket `(key, id)` other than itself, if it is shared
    /// and has one.
    pub fn other_holder(&self, key: u64, id: u32) -> Option<(u64, u32)> {
        let s = self.by_holder.get(&(key, id)).and_then(|t| self.by_token.get(t))?;
        s.holders.iter().copied().find(|&h| h != (key, id))
    }

    /// Every holder of socket `(key, id)` other than itself (none if it
    /// is not shared).
    pub fn other_holders(&self, key: u64, id: u32) -> impl Iterator<Item = (u64, u32)> + '_ {
        let s = self.by_holder.get(&(key, id)).and_then(|t| self.by_token.get(t));
        s.into_iter().flat_map(|s| s.holders.iter().copied()).filter(move |&h| h != (key, id))
    }

    /// How many holders socket `(key, id)` has (0 if it is not shared).
    pub fn holders(&self, key: u64, id: u32) -> usize {
        self.by_holder.get(&(key, id)).and_then(|t| self.by_token.get(t)).map_or(0, |s| s.holders.len())
    }

    fn shared_mut(&mut self, key: u64, id: u32) -> Option<&mut Shared<S>> {
        let token = self.by_holder.get(&(key, id))?;
        self.by_token.get_mut(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock() -> u32 {
        3
    }

    #[test]
    fn a_socket_stays_until_its_last_holder_lets_go() {
        let mut s: Shares<u32> = Shares::default();
        let token = s.share(1, 5, sock(), 1000, || 42);
        assert_eq!(token, 42);
        assert_eq!(s.share(1, 5, sock(), 1000, || 7), 42, "a second share gives the same token");
        assert_eq!(s.find(42, 1001), Err(libc::EACCES), "another user");
        assert!(s.find(42, 1000).is_ok());
        assert!(s.find(42, 0).is_ok(), "root");
        assert_eq!(s.find(43, 1000), Err(libc::ENOENT));
        assert_eq!(s.other_holder(1, 5), None, "shared, held by one");
        s.adopted(42, 2, 9);
        assert_eq!(s.holders(2, 9), 2);
        assert_eq!(s.other_holder(1, 5), Some((2, 9)));
        assert_eq!(s.other_holder(2, 9), Some((1, 5)));
        assert!(s.let_go(1, 5), "the adopter still holds it");
        assert!(!s.let_go(2, 9), "the last holder closes it");
        assert_eq!(s.find(42, 1000), Err(libc::ENOENT), "the token went with it");
        assert!(!s.let_go(3, 3), "a socket never shared");
    }

    #[test]
    fn a_watched_socket_outlives_its_holders_until_the_watch_ends() {
        let mut s: Shares<u32> = Shares::default();
        let token = s.share(1, 5, sock(), 1000, || 9);
        assert!(!s.may_watch(token, 1001), "another user");
        assert!(s.may_watch(token, 1000));
        s.watch(token);
        assert!(s.may_watch(token, 1000), "by several processes");
        assert!(s.let_go(1, 5), "the watch keeps it");
        assert!(s.find(token, 1000).is_ok(), "still adoptable");
        s.adopted(token, 2, 1);
        assert_eq!(s.unwatched(token), None, "the adopter holds it");
        assert!(!s.let_go(2, 1), "the last holder, unwatched, closes it");
        let token = s.share(3, 1, sock(), 1000, || 10);
        s.watch(token);
        assert!(s.let_go(3, 1));
        assert_eq!(s.unwatched(token), Some(3), "nobody holds it: closed");
        assert_eq!(s.find(token, 1000), Err(libc::ENOENT));
    }

    #[test]
    fn given_back_bytes_come_first_and_are_bounded() {
        let mut s: Shares<u32> = Shares::default();
        assert_eq!(s.give_back(1, 5, b"x"), Err(libc::EINVAL), "not shared");
        s.share(1, 5, sock(), 0, || 0);
        s.adopted(s.by_holder[&(1, 5)], 2, 1);
        s.give_back(1, 5, b"hello").unwrap();
        assert!(s.has_returned(2, 1));
        let mut got = [0u8; 3];
        assert_eq!(s.take_returned(2, 1, &mut got), 3);
        assert_eq!(&got, b"hel");
        assert_eq!(s.take_returned(1, 5, &mut got), 2);
        assert_eq!(&got[..2], b"lo");
        assert!(!s.has_returned(2, 1));
        assert_eq!(s.give_back(1, 5, &vec![0; MAX_RETURNED + 1]), Err(libc::ENOBUFS));
    }

    #[test]
    fn given_back_bytes_are_bounded_in_all() {
        let mut s: Shares<u32> = Shares::default();
        let chunk = vec![0u8; MAX_RETURNED];
        let sockets = (MAX_RETURNED_TOTAL / MAX_RETURNED) as u32;
        for id in 1..=sockets {
            s.share(1, id, id, 0, || u64::from(id));
            s.give_back(1, id, &chunk).expect("within the total");
        }
        s.share(1, sockets + 1, 0, 0, || 999);
        assert_eq!(s.give_back(1, sockets + 1, b"x"), Err(libc::ENOBUFS), "past the total");
        let mut taken = vec![0u8; 10];
        assert_eq!(s.take_returned(1, 1, &mut taken), 10);
        s.give_back(1, sockets + 1, b"x").expect("room again");
        assert!(!s.let_go(1, 2), "the last holder");
        s.give_back(1, sockets + 1, &vec![0; MAX_RETURNED - 1]).expect("a socket's bytes leave with it");
    }

    #[test]
    fn a_holder_left_alone_takes_its_socket_back() {
        let mut s: Shares<u32> = Shares::default();
        assert_eq!(s.reclaim(1, 5), Err(libc::EINVAL), "not shared");
        let token = s.share(1, 5, sock(), 1000, || 11);
        s.adopted(token, 2, 1);
        assert_eq!(s.reclaim(1, 5), Err(libc::EBUSY), "another holder");
        assert!(s.let_go(2, 1));
        s.give_back(1, 5, b"abc").unwrap();
        assert_eq!(s.reclaim(1, 5), Ok(()));
        assert_eq!(s.token(1, 5), None);
        assert_eq!(s.find(token, 1000), Err(libc::ENOENT), "the token names nothing");
        assert!(s.has_returned(1, 5), "given-back bytes kept for it");
        let mut got = [0u8; 1];
        assert_eq!(s.take_returned(1, 5, &mut got), 1);
        assert_eq!(&got, b"a");
        assert_eq!(s.share(1, 5, sock(), 1000, || 12), 12, "shared again, a fresh token");
        s.give_back(1, 5, b"d").unwrap();
        let mut got = [0u8; 4];
        assert_eq!(s.take_returned(1, 5, &mut got), 3);
        assert_eq!(&got[..3], b"dbc", "what this share gave back (received before the kept bytes) first");
        assert!(!s.has_returned(1, 5));
        s.reclaim(1, 5).unwrap();
        s.share(1, 6, sock(), 1000, || 13);
        s.give_back(1, 6, b"xyz").unwrap();
        s.reclaim(1, 6).unwrap();
        assert!(!s.let_go(1, 6), "a plain socket again");
        assert!(!s.has_returned(1, 6), "its kept bytes went with it");
        assert_eq!(s.returned, 0);
    }
}
