//! Who netd serves: the rendezvous listener and the sessions of the
//! clients it admitted.
//!
//! Invariant: at most `MAX_CLIENTS` sessions exist (each holds a region
//! and about six descriptors, so netd stays well inside the usual limit of
//! 1024 descriptors); a connection beyond that, or one whose region cannot
//! be set up, is refused and counted. A session marked doomed is let go
//! in the same turn ([`Clients::next_doomed`]).

use crate::config::NetdConfig;
use crate::memory::Memory;
use crate::os::set_nonblocking;
use crate::session::Session;
use crate::stats::NetdStats;
use crate::wakes::Wakes;
use nagare_ipc::{Listener, RendezvousError};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

/// Clients served at once.
const MAX_CLIENTS: usize = 128;

/// Why netd cannot listen at its socket, and what to do about it.
fn listen_error(config: &NetdConfig, e: RendezvousError) -> io::Error {
    let at = config.socket.display();
    let RendezvousError::Io(e) = e else {
        return io::Error::other(format!("cannot listen at {at}: {e}"));
    };
    let text = match e.kind() {
        io::ErrorKind::AddrInUse => format!(
            "cannot listen at {at}: it is taken, by a nagare netd that runs there or by a file that is not a \
             socket; stop that netd or remove the file, or give this netd a socket of its own with --socket PATH \
             (its applications find it through NAGARE_NETD=PATH)"
        ),
        io::ErrorKind::NotFound => format!(
            "cannot listen at {at}: its directory does not exist; create it, or choose another path with --socket PATH"
        ),
        io::ErrorKind::PermissionDenied => format!(
            "cannot listen at {at} ({e}): this user may not create files there; choose a directory it may \
             write with --socket PATH"
        ),
        _ => format!("cannot listen at {at}: {e}; choose another path with --socket PATH"),
    };
    io::Error::new(e.kind(), text)
}

/// The listener and the sessions.
pub(crate) struct Clients {
    listener: Listener,
    /// Its socket was opened to others (`crate::access`): whoever the
    /// kernel let connect is served. Else only netd's user and root are.
    opened: bool,
    pub sessions: Vec<Session>,
}

impl Clients {
    /// Listens on `config.socket`, offering `config.region()` to clients.
    pub fn listen(config: &NetdConfig) -> io::Result<Clients> {
        let listener = Listener::bind(&config.socket, config.region()).map_err(|e| listen_error(config, e))?;
        crate::access::open_socket(&config.socket, config.socket_mode, config.socket_group).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot open {} to other users: {e}", config.socket.display()))
        })?;
        set_nonblocking(listener.fd().as_raw_fd())?;
        let opened = config.socket_mode.is_some() || config.socket_group.is_some();
        Ok(Clients { listener, opened, sessions: Vec::new() })
    }

    /// The listener's descriptor (readable: a client is waiting).
    pub fn listener_fd(&self) -> RawFd {
        self.listener.fd().as_raw_fd()
    }

    /// Whether a client waits at the listener, without waiting.
    pub fn client_waiting(&self) -> bool {
        let mut fds = [libc::pollfd { fd: self.listener_fd(), events: libc::POLLIN, revents: 0 }];
        crate::os::poll(&mut fds, 0).is_ok() && fds[0].revents & libc::POLLIN != 0
    }

    /// Takes every waiting connection; `admit` sets up each new session
    /// (steering, lending, the driver) before it is served; its sockets are
    /// charged in `memory` and indexed in `wakes`. Returns whether any came.
    pub fn accept_all(
        &mut self,
        stats: &mut NetdStats,
        memory: &Rc<Memory>,
        wakes: &Rc<Wakes>,
        mut admit: impl FnMut(&mut Session),
    ) -> bool {
        let mut any = false;
        loop {
            let accepted = match self.opened {
                true => self.listener.accept_with(|_| true),
                false => self.listener.accept(),
            };
            match accepted {
                Ok(_) if self.sessions.len() >= MAX_CLIENTS => {
                    stats.clients_refused += 1;
                    any = true;
                }
                Ok(conn) => match Session::new(conn, Rc::clone(memory), Rc::clone(wakes)) {
                    Ok(mut s) => {
                        stats.clients_accepted += 1;
                        any = true;
                        admit(&mut s);
                        self.sessions.push(s);
                    }
                    Err(_) => stats.clients_refused += 1,
                },
                Err(RendezvousError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => return any,
                Err(RendezvousError::Io(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Out of descriptors or memory: the connection stays
                    // queued, so trying again now would spin; the next
                    // turn tries again.
                    stats.clients_refused += 1;
                    return any;
                }
            }
        }
    }

    /// Dooms the sessions of clients that have gone (exit or death), and
    /// reads the others' nice values again when due.
    pub fn notice_gone(&mut self) {
        let now = std::time::Instant::now();
        let lifted = self.lifted_pids();
        for s in &mut self.sessions {
            s.notice_gone();
            // A process another session lifted keeps, for this one too,
            // the nice value it had.
            if s.priority.lifted().is_some() || !lifted.contains(&s.conn.cred.pid) {
                s.priority.refresh(now);
            }
        }
    }

    /// The pids of the processes a session has lifted (none allocated
    /// while nobody is lifted).
    pub fn lifted_pids(&self) -> Vec<i32> {
        self.sessions.iter().filter(|s| s.priority.lifted().is_some()).map(|s| s.conn.cred.pid).collect()
    }

    /// Takes out the next doomed session, with the reason.
    pub fn next_doomed(&mut self) -> Option<(Session, &'static str)> {
        let i = self.sessions.iter().position(|s| s.doomed.is_some())?;
        let s = self.sessions.swap_remove(i);
        let why = s.doomed.unwrap_or("doomed");
        Some((s, why))
    }
}
