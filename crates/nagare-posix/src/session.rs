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
    let pid = std::process::id();
    let mut slot = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, s)) = slot.as_ref() {
        if *owner == pid {
            return Ok(s.clone());
        }
        // A child's copy of its parent's session: never used, never
        // dropped (dropping would speak for the parent).
        if let Some((_, s)) = slot.take() {
            std::mem::forget(s);
        }
    }
    let path = std::env::var_os(nagare::NETD_ENV)
        .map_or_else(|| std::path::PathBuf::from(nagare_request::DEFAULT_SOCKET), std::path::PathBuf::from);
    match Session::connect(&path) {
        Ok(s) => {
            *slot = Some((pid, s.clone()));
            Ok(s)
        }
        Err(e) => {
            crate::errors::say_once(&format!("no AF_INET sockets: {e}"));
            Err(libc::ENETDOWN)
        }
    }
}
