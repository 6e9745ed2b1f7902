//! Sharing as netd runs it: the shares table (`crate::shares`) and the
//! watched descriptors (`crate::watches`) kept in step. Before a shared
//! socket's holder lets it go, the watches that came are taken (a process
//! connects its descriptor before it lets go of the socket, so its watch
//! is seen before its close); a watch that ends closes a socket no client
//! holds. A listener's holders waiting on it are woken one a connection
//! when they ask so (`crate::exclusive`).

use crate::config::NetdConfig;
use crate::exclusive::ExclusiveWakes;
use crate::shares::Shares;
use crate::sockets::Sock;
use crate::watches::Watches;
use std::path::Path;
use std::time::Instant;

/// The shares and, if netd could listen for them, the watches.
pub(crate) struct Sharing {
    pub shares: Shares<Sock>,
    /// The wake-ups handed to polls waiting on shared listeners.
    pub exclusive: ExclusiveWakes,
    watches: Option<Watches>,
}

/// What a holder's letting go of a socket leaves: what keeps it open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LetGo {
    /// Nothing keeps it: it is to be closed.
    Close,
    /// Another client holds it.
    Held,
    /// Only watched descriptors, under this token: no client holds it.
    Watched(u64),
}

impl Sharing {
    /// Sharing with watches at `watch_path`, open to whom `config`'s
    /// rendezvous socket is (`None`, or a path netd cannot listen at, said
    /// in the log: a shared socket then closes with its last holder).
    pub fn new(watch_path: Option<&Path>, config: &NetdConfig) -> Sharing {
        let watches = watch_path.and_then(|p| {
            let opened = Watches::bind(p)
                .and_then(|w| crate::access::open_socket(p, config.socket_mode, config.socket_group).map(|()| w));
            opened.inspect_err(|e| log::warn!("cannot watch shared sockets at {}: {e}", p.display())).ok()
        });
        Sharing { shares: Shares::default(), exclusive: ExclusiveWakes::default(), watches }
    }

    /// Takes the watches that came.
    pub fn take_watches(&mut self) {
        let Some(w) = &mut self.watches else { return };
        let shares = &mut self.shares;
        for token in w.accept(Instant::now(), |t, uid| shares.may_watch(t, uid)) {
            shares.watch(token);
        }
    }

    /// Holder `(key, id)` lets its socket go: what keeps it open, if
    /// anything.
    pub fn let_go(&mut self, key: u64, id: u32) -> LetGo {
        let holders = self.shares.holders(key, id);
        if holders > 0 {
            self.take_watches();
        }
        let token = self.shares.token(key, id);
        match (self.shares.let_go(key, id), token) {
            (false, _) => LetGo::Close,
            (true, Some(token)) if holders == 1 => LetGo::Watched(token),
            (true, _) => LetGo::Held,
        }
    }

    /// Holder `(key, id)` takes its socket back as its own
    /// ([`Shares::reclaim`]) when, the watches that came and the hang-ups
    /// taken first, at most one watched descriptor for it is still open
    /// (its own process's): that watch ends. `EINVAL` if it is not
    /// shared, `EBUSY` (and nothing changes) otherwise.
    pub fn reclaim(&mut self, key: u64, id: u32) -> Result<(), i32> {
        let token = self.shares.token(key, id).ok_or(libc::EINVAL)?;
        self.take_watches();
        let open = self.watches.as_mut().map_or(0, |w| w.open(token));
        if open == 0 {
            // Its holder holds it: nothing to close.
            let _ = self.shares.unwatched(token);
        }
        if open > 1 {
            return Err(libc::EBUSY);
        }
        self.shares.reclaim(key, id)?;
        if let Some(w) = &mut self.watches {
            w.forget(token);
        }
        Ok(())
    }

    /// The sockets no client holds whose last descriptor was closed, with
    /// their tokens: to be closed now.
    pub fn ended(&mut self) -> Vec<(u64, Sock)> {
        self.take_watches();
        let Some(w) = &mut self.watches else { return Vec::new() };
        w.hung_up().into_iter().filter_map(|t| self.shares.unwatched(t).map(|s| (t, s))).collect()
    }

    /// Whether descriptors are watched (their hang-ups are looked for at
    /// every housekeeping, so netd sleeps no longer than that).
    pub fn watching(&self) -> bool {
        self.watches.as_ref().is_some_and(Watches::any)
    }
}
