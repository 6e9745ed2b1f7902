//! The process's one session with netd, made by its first socket, and made
//! anew in a child after `fork` (the parent's region is not the child's
//! to use).

use crate::Res;
use nagare::Session;
use std::sync::Mutex;

static SESSION: Mutex<Option<(u32, Session)>> = Mutex::new(None);

/// This process's session, connected on first use to the netd that
/// `NAGARE_NETD` names (or the default socket). `ENETDOWN` when netd
/// cannot be reached; the reason is said on stderr once.
pub(crate) fn session() -> Res<Session> {
    let pid = crate::pid::current();
    let mut slot = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, s)) = slot.as_ref() {
        if *owner == pid {
            return Ok(s.clone());
        }
        // A child's copy of its parent's session, from a `fork` that ran
        // no handlers: never used, never dropped (dropping would speak for
        // the parent), let go of.
        if let Some((_, s)) = slot.take() {
            // SAFETY: the parent's, never used here (nor its clones in the
            // sockets the fork copied).
            unsafe { s.let_go_copy() };
        }
    }
    match Session::connect(netd_path()) {
        Ok(s) => {
            // The program may filter its system calls (`sshd`'s children
            // forbid sched_yield).
            s.set_spin_yields(false);
            *slot = Some((pid, s.clone()));
            crate::fork::register();
            Ok(s)
        }
        Err(e) => {
            crate::errors::say_once(&format!("no AF_INET or AF_INET6 sockets: {e}"));
            Err(libc::ENETDOWN)
        }
    }
}

/// netd's rendezvous socket: `NAGARE_NETD`, or the default.
pub(crate) fn netd_path() -> std::path::PathBuf {
    std::env::var_os(nagare::NETD_ENV)
        .map_or_else(|| std::path::PathBuf::from(nagare_request::DEFAULT_SOCKET), std::path::PathBuf::from)
}

/// The session slot, held across a `fork` (`crate::fork`).
pub(crate) type Held = std::sync::MutexGuard<'static, Option<(u32, Session)>>;

/// Takes the session slot to hold across a `fork`.
pub(crate) fn hold() -> Held {
    SESSION.lock().unwrap_or_else(|e| e.into_inner())
}

/// `session` is this process's (`pid`'s) from now on, in `slot` (held
/// across the `fork`, the parent's copy already let go of): a child's,
/// made for it before the fork.
pub(crate) fn adopt_session(slot: &mut Held, pid: u32, session: Session) {
    if let Some((_, parent)) = slot.take() {
        // SAFETY: the parent's, never used here (nor its clones in the
        // sockets the fork copied).
        unsafe { parent.let_go_copy() };
    }
    **slot = Some((pid, session));
}

/// The descriptors this process's own sessions keep open (the one in the
/// slot, and those made ahead for it or its next child, `crate::fork`):
/// what a `closefrom` of the program's spares. A parent's session, copied
/// by a `fork` and never used here, is not this process's.
pub(crate) fn own_descriptors() -> Vec<i32> {
    let pid = crate::pid::current();
    let mut fds = match SESSION.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        Some((owner, s)) if *owner == pid => s.descriptors(),
        _ => Vec::new(),
    };
    fds.extend(crate::fork::made_ahead_descriptors());
    fds.sort_unstable();
    fds.dedup();
    fds
}
