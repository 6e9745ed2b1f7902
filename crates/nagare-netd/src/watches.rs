//! The descriptors of shared sockets, watched. A process that shares a
//! socket (`crate::shares`) connects the socket's placeholder, the kernel
//! descriptor its program holds, to netd's watch socket
//! (`nagare_request::share_watch_path`) and sends the token; netd keeps
//! the other end. The kernel hangs that connection up only when the last
//! descriptor for the placeholder is closed, in whichever process holds
//! it (a child that has not adopted the socket yet, a program it ran).
//! So a shared socket stays open while a descriptor still names it, even
//! after every client let it go, and closes once none does, as the
//! kernel's own sockets do.
//!
//! Bounded: a connection's token is read as it is accepted; at most
//! [`MAX_UNNAMED`] connections whose token has not come yet wait for it,
//! each at most [`TOKEN_WAIT`] (past that, a new one is closed, the
//! waiting ones keep their place); at most [`MAX_WATCHED_PER_USER`]
//! connections per user and [`MAX_WATCHED`] in all (a watch past those is
//! closed: its socket then closes with its last holder); a connection
//! from another user than the socket's, or with a token nobody shared, is
//! closed.
//!
//! A token may have several connections, one per process that holds a
//! placeholder of its own for the socket (`nagare-posix` gives a child
//! after `fork` its own): how many are open is how many processes may
//! still use the socket, which says when its last client may take it
//! back as its own (`Op::Reclaim`).

use nagare_ipc::PeerCred;
use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Connections that may wait for their token at once.
const MAX_UNNAMED: usize = 64;
/// How long a connection may take to send its token.
const TOKEN_WAIT: Duration = Duration::from_secs(1);
/// Watches in all.
const MAX_WATCHED: usize = 4096;
/// Watches of one user.
const MAX_WATCHED_PER_USER: usize = 1024;

/// netd's watch socket and the connections on it.
pub(crate) struct Watches {
    listener: UnixListener,
    path: PathBuf,
    /// Connections whose token has not come, with when they came.
    unnamed: Vec<(UnixStream, Instant, PeerCred)>,
    /// The connections of each watched token (never an empty list), with
    /// their user.
    named: HashMap<u64, Vec<(UnixStream, u32)>>,
    /// Connections in `named`, in all.
    count: usize,
}

impl Watches {
    /// Listens at `path`, replacing a stale socket file.
    pub fn bind(path: &Path) -> io::Result<Watches> {
        if std::fs::symlink_metadata(path).is_ok() && UnixStream::connect(path).is_err() {
            std::fs::remove_file(path)?;
        }
        let listener = nagare_ipc::bind_private(path)?;
        listener.set_nonblocking(true)?;
        Ok(Watches { listener, path: path.to_path_buf(), unnamed: Vec::new(), named: HashMap::new(), count: 0 })
    }

    /// Takes new connections and the tokens that came: each token `may`
    /// accept for the sender's user (a shared socket of that user) is
    /// watched from now on (by one more connection), and returned.
    pub fn accept(&mut self, now: Instant, may: impl Fn(u64, u32) -> bool) -> Vec<u64> {
        let mut waiting = std::mem::take(&mut self.unnamed);
        while let Ok((stream, _)) = self.listener.accept() {
            let Ok(cred) = PeerCred::of(stream.as_fd()) else { continue };
            if stream.set_nonblocking(true).is_ok() {
                waiting.push((stream, now, cred));
            }
        }
        let mut named = Vec::new();
        for (mut stream, since, cred) in waiting {
            let mut word = [0u8; 8];
            match stream.read(&mut word) {
                Ok(8) => {
                    let token = u64::from_le_bytes(word);
                    let of_user = self.named.values().flatten().filter(|(_, uid)| *uid == cred.uid).count();
                    if may(token, cred.uid) && self.count < MAX_WATCHED && of_user < MAX_WATCHED_PER_USER {
                        self.named.entry(token).or_default().push((stream, cred.uid));
                        self.count += 1;
                        named.push(token);
                    }
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        && now.duration_since(since) < TOKEN_WAIT
                        && self.unnamed.len() < MAX_UNNAMED =>
                {
                    self.unnamed.push((stream, since, cred));
                }
                // A short word, an end, an error, too slow, or no room:
                // dropped.
                _ => {}
            }
        }
        named
    }

    /// The watched tokens whose every connection hung up: no descriptor
    /// names their socket any more. They are watched no longer.
    pub fn hung_up(&mut self) -> Vec<u64> {
        let tokens: Vec<u64> = self.named.keys().copied().collect();
        tokens.into_iter().filter(|&t| self.open(t) == 0).collect()
    }

    /// How many connections of `token` are still open, those that hung
    /// up let go first (a token left with none is watched no longer).
    pub fn open(&mut self, token: u64) -> usize {
        let Some(list) = self.named.get_mut(&token) else { return 0 };
        let before = list.len();
        list.retain(|(s, _)| !hung_up(s));
        let left = list.len();
        self.count -= before - left;
        if left == 0 {
            self.named.remove(&token);
        }
        left
    }

    /// Ends every watch of `token` (its connections are closed here).
    pub fn forget(&mut self, token: u64) {
        if let Some(list) = self.named.remove(&token) {
            self.count -= list.len();
        }
    }

    /// Whether tokens are watched (netd then looks for hang-ups often).
    pub fn any(&self) -> bool {
        !self.named.is_empty() || !self.unnamed.is_empty()
    }
}

/// Whether the peer of `s` hung up.
fn hung_up(s: &UnixStream) -> bool {
    let mut p = libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLIN) != 0 && closed(s)
}

/// Whether the peer closed `s`: reading finds its end (anything it sends
/// after the token is read and dropped).
fn closed(mut s: &UnixStream) -> bool {
    let mut sink = [0u8; 256];
    // Bounded: a peer that keeps sending is looked at again next time.
    for _ in 0..16 {
        match s.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
    false
}

impl Drop for Watches {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
