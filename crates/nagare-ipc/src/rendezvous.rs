//! The rendezvous: how a client gets its region.
//!
//! The server (the inet server) listens on a Unix stream socket. When a
//! client connects, the server reads the client's credentials with
//! `SO_PEERCRED` (the kernel's word, not the client's), asks its policy,
//! creates a region for this client alone and two eventfds, and sends one
//! hello message with the three descriptors attached (`SCM_RIGHTS`):
//!
//! ```text
//!   hello (32 bytes, little-endian): magic "NGRV" u32, layout version u32,
//!   status u32 (0, or an errno such as EACCES), fd count u32,
//!   region length u64, client id u64
//!   fds: [region memfd, eventfd the client waits on, eventfd the server waits on]
//! ```
//!
//! The client checks the magic and the version, validates and maps the
//! region ([`Region::attach`]) and reads the server's credentials too. The
//! socket then stays open for the life of the connection, carrying nothing:
//! its end-of-file (or `POLLHUP`) is how each side learns the other died.

use std::fmt;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::region::{Region, RegionConfig, RegionError, LAYOUT_VERSION};
use crate::sys;

const HELLO_MAGIC: u32 = u32::from_le_bytes(*b"NGRV");
const HELLO_LEN: usize = 32;
const HELLO_FDS: usize = 3;
/// How long a client waits for the hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// A peer's credentials as the kernel recorded them at `connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl PeerCred {
    /// The credentials of the peer of a connected Unix socket.
    pub fn of(sock: BorrowedFd<'_>) -> io::Result<PeerCred> {
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` is a writable ucred and `len` its size, as
        // SO_PEERCRED expects; the kernel writes at most `len` bytes.
        sys::cvt(unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        })?;
        Ok(PeerCred { pid: cred.pid, uid: cred.uid, gid: cred.gid })
    }

    /// This process's own credentials.
    pub fn current() -> PeerCred {
        // SAFETY: these calls cannot fail and touch no memory.
        unsafe { PeerCred { pid: libc::getpid(), uid: libc::geteuid(), gid: libc::getegid() } }
    }
}

/// Why a rendezvous failed.
#[derive(Debug)]
pub enum RendezvousError {
    /// A socket call failed.
    Io(io::Error),
    /// The region could not be created or failed validation.
    Region(RegionError),
    /// The hello was short, had a bad magic or the wrong number of fds.
    BadHello(&'static str),
    /// The server speaks another layout version.
    VersionMismatch {
        /// The server's.
        server: u32,
        /// Ours.
        client: u32,
    },
    /// The server refused us (an errno, e.g. `EACCES`).
    Refused(u32),
    /// Our policy refused the client.
    NotAllowed(PeerCred),
}

impl fmt::Display for RendezvousError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RendezvousError::Io(e) => write!(f, "rendezvous: {e}"),
            RendezvousError::Region(e) => write!(f, "rendezvous: {e}"),
            RendezvousError::BadHello(what) => write!(f, "rendezvous: bad hello: {what}"),
            RendezvousError::VersionMismatch { server, client } => {
                write!(f, "rendezvous: server layout version {server}, ours {client}")
            }
            RendezvousError::Refused(errno) => {
                write!(f, "rendezvous: refused by the server: {}", io::Error::from_raw_os_error(*errno as i32))
            }
            RendezvousError::NotAllowed(c) => {
                write!(f, "rendezvous: client pid {} uid {} gid {} not allowed", c.pid, c.uid, c.gid)
            }
        }
    }
}

impl std::error::Error for RendezvousError {}

impl From<io::Error> for RendezvousError {
    fn from(e: io::Error) -> Self {
        RendezvousError::Io(e)
    }
}

impl From<RegionError> for RendezvousError {
    fn from(e: RegionError) -> Self {
        RendezvousError::Region(e)
    }
}

struct Hello {
    version: u32,
    status: u32,
    nfds: u32,
    region_len: u64,
    client_id: u64,
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.version.to_le_bytes());
        b[8..12].copy_from_slice(&self.status.to_le_bytes());
        b[12..16].copy_from_slice(&self.nfds.to_le_bytes());
        b[16..24].copy_from_slice(&self.region_len.to_le_bytes());
        b[24..32].copy_from_slice(&self.client_id.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, RendezvousError> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if u32_at(0) != HELLO_MAGIC {
            return Err(RendezvousError::BadHello("magic"));
        }
        Ok(Hello {
            version: u32_at(4),
            status: u32_at(8),
            nfds: u32_at(12),
            region_len: u64_at(16),
            client_id: u64_at(24),
        })
    }
}

fn send_hello(sock: BorrowedFd<'_>, hello: &Hello, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    crate::fdpass::send_with_fds(sock, &hello.encode(), fds)
}

/// Receives the hello and every descriptor attached to it (owned, so none
/// leaks whatever the server sent).
fn recv_hello(sock: BorrowedFd<'_>) -> Result<([u8; HELLO_LEN], Vec<OwnedFd>), RendezvousError> {
    let mut bytes = [0u8; HELLO_LEN];
    let got = crate::fdpass::recv_with_fds(sock, &mut bytes, 0)?;
    if got.fds_truncated {
        return Err(RendezvousError::BadHello("control data truncated"));
    }
    if got.len < HELLO_LEN {
        return Err(RendezvousError::BadHello("short message"));
    }
    Ok((bytes, got.fds))
}

/// The server's listening socket.
#[derive(Debug)]
pub struct Listener {
    sock: UnixListener,
    path: PathBuf,
    config: RegionConfig,
    next_id: u64,
}

/// A listening Unix socket at `path` that only its user may connect to
/// until its mode is changed: its file has mode 0600 from the `bind` on,
/// whatever the umask (which is left alone: other threads read it).
pub fn bind_private(path: &Path) -> io::Result<UnixListener> {
    crate::sys::unix_listener_private(path)
}

impl Listener {
    /// Listens on `path`, replacing a stale socket file left there; every
    /// client gets a region of `config`'s sizes.
    pub fn bind(path: impl AsRef<Path>, config: RegionConfig) -> Result<Listener, RendezvousError> {
        crate::region::Layout::compute(config)?;
        let path = path.as_ref().to_path_buf();
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if meta.file_type().is_socket() && UnixStream::connect(&path).is_err() {
                std::fs::remove_file(&path)?;
            }
        }
        let sock = bind_private(&path)?;
        Ok(Listener { sock, path, config, next_id: 1 })
    }

    /// The listening socket (readable when a client is waiting).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts one client whose user is ours or root.
    pub fn accept(&mut self) -> Result<ServerConn, RendezvousError> {
        let me = PeerCred::current();
        self.accept_with(|c| c.uid == me.uid || c.uid == 0)
    }

    /// Accepts one client if `allow` approves its credentials; a refused
    /// client is told so (`EACCES`) and disconnected.
    pub fn accept_with(&mut self, allow: impl Fn(&PeerCred) -> bool) -> Result<ServerConn, RendezvousError> {
        let (stream, _) = self.sock.accept()?;
        let cred = PeerCred::of(stream.as_fd())?;
        if !allow(&cred) {
            let refuse =
                Hello { version: LAYOUT_VERSION, status: libc::EACCES as u32, nfds: 0, region_len: 0, client_id: 0 };
            let _ = send_hello(stream.as_fd(), &refuse, &[]);
            return Err(RendezvousError::NotAllowed(cred));
        }
        let id = self.next_id;
        self.next_id += 1;
        let region = Region::create(&format!("nagare-ipc-client-{id}-pid-{}", cred.pid), self.config)?;
        let to_client = sys::eventfd()?;
        let to_server = sys::eventfd()?;
        let hello = Hello {
            version: LAYOUT_VERSION,
            status: 0,
            nfds: HELLO_FDS as u32,
            region_len: region.layout().total_len,
            client_id: id,
        };
        send_hello(stream.as_fd(), &hello, &[region.fd(), to_client.as_fd(), to_server.as_fd()])?;
        Ok(ServerConn { stream, cred, id, region, client_wakeup: to_client, server_wakeup: to_server })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// True if the peer of `sock` has closed it or died (non-blocking check).
fn peer_gone(sock: BorrowedFd<'_>) -> bool {
    match sys::poll_one(sock, libc::POLLIN, Some(Duration::ZERO)) {
        Err(_) => true,
        Ok(0) => false,
        Ok(ev) if ev & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 => true,
        // Readable: end of file, or bytes no peer may send after the hello.
        // Either way the peer is done: one that keeps writing would
        // otherwise keep the other side's poll from ever sleeping.
        Ok(_) => true,
    }
}

/// The server's end of one client connection.
#[derive(Debug)]
pub struct ServerConn {
    stream: UnixStream,
    /// The client's credentials (`SO_PEERCRED`).
    pub cred: PeerCred,
    /// The number the server gave this client.
    pub id: u64,
    /// The client's region (this side is its creator).
    pub region: Region,
    /// The eventfd the client sleeps on (the server signals it).
    pub client_wakeup: OwnedFd,
    /// The eventfd the server sleeps on (the client signals it).
    pub server_wakeup: OwnedFd,
}

impl ServerConn {
    /// The rendezvous socket: `POLLHUP`/readable-at-EOF when the client dies.
    pub fn liveness_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// True once the client has closed its socket or died.
    pub fn peer_gone(&self) -> bool {
        peer_gone(self.stream.as_fd())
    }
}

/// The client's end: the region and eventfds the server passed.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    /// The server's credentials (`SO_PEERCRED`).
    pub server_cred: PeerCred,
    /// The number the server gave us.
    pub id: u64,
    /// Our region (this side is the attacher).
    pub region: Region,
    /// The eventfd we sleep on (the server signals it).
    pub client_wakeup: OwnedFd,
    /// The eventfd the server sleeps on (we signal it).
    pub server_wakeup: OwnedFd,
}

impl Client {
    /// Connects to the server at `path`, checks its hello and maps the region.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, RendezvousError> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
        let server_cred = PeerCred::of(stream.as_fd())?;
        let (bytes, mut fds) = recv_hello(stream.as_fd())?;
        let hello = Hello::decode(&bytes)?;
        if hello.version != LAYOUT_VERSION {
            return Err(RendezvousError::VersionMismatch { server: hello.version, client: LAYOUT_VERSION });
        }
        if hello.status != 0 {
            return Err(RendezvousError::Refused(hello.status));
        }
        if hello.nfds as usize != HELLO_FDS || fds.len() != HELLO_FDS {
            return Err(RendezvousError::BadHello("wrong number of descriptors"));
        }
        let server_wakeup = fds.pop().expect("3 fds");
        let client_wakeup = fds.pop().expect("3 fds");
        let memfd = fds.pop().expect("3 fds");
        let region = Region::attach(memfd)?;
        if region.layout().total_len != hello.region_len {
            return Err(RendezvousError::BadHello("region length differs from the hello"));
        }
        stream.set_read_timeout(None)?;
        Ok(Client { stream, server_cred, id: hello.client_id, region, client_wakeup, server_wakeup })
    }

    /// The rendezvous socket: `POLLHUP`/readable-at-EOF when the server dies.
    pub fn liveness_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// True once the server has closed its socket or died.
    pub fn peer_gone(&self) -> bool {
        peer_gone(self.stream.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock_path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("nagare-ipc-{tag}-{}.sock", std::process::id()))
    }

    #[test]
    fn a_private_socket_is_its_users_alone_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let path = sock_path("private");
        let _ = std::fs::remove_file(&path);
        let listener = bind_private(&path).expect("bind");
        let mode = std::fs::metadata(&path).expect("the socket file").permissions().mode() & 0o777;
        // A plain bind gives 0777 less the umask: 0755 or 0700 under the
        // usual ones.
        assert_eq!(mode, 0o600);
        let client = UnixStream::connect(&path).expect("its user connects");
        let (accepted, _) = listener.accept().expect("accept");
        drop((client, accepted, listener));
        let _ = std::fs::remove_file(&path);
        let long = std::path::PathBuf::from(format!("/tmp/{}", "x".repeat(200)));
        assert!(bind_private(&long).is_err(), "a path longer than an AF_UNIX address holds");
    }

    #[test]
    fn hello_round_trips() {
        let h = Hello { version: 7, status: 13, nfds: 3, region_len: 1 << 40, client_id: 99 };
        let d = Hello::decode(&h.encode()).unwrap();
        assert_eq!((d.version, d.status, d.nfds, d.region_len, d.client_id), (7, 13, 3, 1 << 40, 99));
        let mut bad = h.encode();
        bad[0] ^= 1;
        assert!(matches!(Hello::decode(&bad), Err(RendezvousError::BadHello(_))));
    }

    #[test]
    fn connect_passes_region_and_credentials() {
        let path = sock_path("unit");
        let mut l = Listener::bind(&path, RegionConfig::pair(16, 8, 256)).unwrap();
        let h = std::thread::spawn({
            let path = path.clone();
            move || Client::connect(&path).unwrap()
        });
        let s = l.accept().unwrap();
        let c = h.join().unwrap();
        assert_eq!(s.cred, PeerCred::current());
        assert_eq!(c.server_cred, PeerCred::current());
        assert_eq!(c.id, s.id);
        assert_eq!(c.region.layout(), s.region.layout());
        assert!(!s.peer_gone());
        drop(c);
        assert!(s.peer_gone());
    }

    #[test]
    fn a_refused_client_is_told() {
        let path = sock_path("refuse");
        let mut l = Listener::bind(&path, RegionConfig::pair(16, 8, 256)).unwrap();
        let h = std::thread::spawn({
            let path = path.clone();
            move || Client::connect(&path)
        });
        assert!(matches!(l.accept_with(|_| false), Err(RendezvousError::NotAllowed(_))));
        assert!(matches!(h.join().unwrap(), Err(RendezvousError::Refused(e)) if e == libc::EACCES as u32));
    }
}
