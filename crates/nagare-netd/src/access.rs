//! Who may use netd, and who may take a privileged port through it.
//!
//! - **Reaching netd.** A client connects to the rendezvous socket, which
//!   needs write permission on it: by default only netd's user (and root)
//!   has it. `--socket-mode` and `--socket-group` open it, and the watch
//!   socket beside it, to others, as `/var/run/docker.sock` is opened to a
//!   group. Each client's region is its own (a memory file handed over
//!   the socket, never a path), so a client of another user reaches no
//!   other client's data.
//! - **Privileged ports.** Binding a port below the unprivileged start
//!   (`net.ipv4.ip_unprivileged_port_start`, 1024 unless set) takes
//!   `CAP_NET_BIND_SERVICE`, as the kernel's `bind` does: netd reads the
//!   client's effective capabilities from `/proc/PID/status` at the call
//!   (those of its main thread), and counts them only in netd's own user
//!   namespace, since a process in a user namespace of its own has every
//!   capability there and none over netd's network. A process netd cannot
//!   read may not. A session keeps the right only while every process it
//!   belonged to had it: the one that connected, and each one it moved to
//!   since (a child after `fork`), so that moving a session to a process
//!   of more rights (a child that ran a program with file capabilities)
//!   gives it none.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The capability that binds ports below the unprivileged start.
const CAP_NET_BIND_SERVICE: u32 = 10;

/// The first port anyone may bind, where the kernel that netd runs on
/// says (`net.ipv4.ip_unprivileged_port_start` of netd's network
/// namespace); 1024 when it cannot be read.
pub fn kernel_unprivileged_port_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map_or(1024, |p| p.min(u32::from(u16::MAX)) as u16)
}

/// The id of group `name` (a name in the group database, or a number).
pub fn group_id(name: &str) -> io::Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a group name with a NUL"))?;
    // SAFETY: `group` is plain data, all zeroes a valid value of it.
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    let mut scratch = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: every pointer is to a live object of the type getgrnam_r
    // writes, `scratch` of the length passed.
    let rc = unsafe { libc::getgrnam_r(c.as_ptr(), &mut group, scratch.as_mut_ptr(), scratch.len(), &mut found) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if found.is_null() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no group named {name}")));
    }
    Ok(group.gr_gid)
}

/// Gives socket file `path` permission bits `mode` and group `group`,
/// each if set; a group without a mode gets 0660, so that its members
/// may connect. The file is opened without following a symbolic link and
/// must be a socket of netd's user: whoever can write to its directory
/// could otherwise put a link there, between netd's `bind` and this, and
/// have netd open another file to everyone.
pub(crate) fn open_socket(path: &Path, mode: Option<u32>, group: Option<u32>) -> io::Result<()> {
    let Some(mode) = mode.or(group.map(|_| 0o660)) else { return Ok(()) };
    let said = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)
        .map_err(said)?;
    let meta = file.metadata().map_err(said)?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !meta.file_type().is_socket() || meta.uid() != euid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: not a socket of netd's user", path.display()),
        ));
    }
    // The descriptor's own link in /proc names the file opened, not
    // whatever the path names at this moment (an `O_PATH` descriptor
    // takes no `fchmod`).
    let own = Path::new("/proc/self/fd").join(file.as_raw_fd().to_string());
    if let Some(gid) = group {
        std::os::unix::fs::chown(&own, None, Some(gid)).map_err(said)?;
    }
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(mode & 0o777)).map_err(said)
}

/// Whether a session whose processes all held `CAP_NET_BIND_SERVICE`
/// (`allowed`), whose process is `pid`, may bind `port` when ports from
/// `start` on are anyone's (port 0, an ephemeral one, is).
pub(crate) fn may_bind(allowed: bool, pid: i32, port: u16, start: u16) -> bool {
    port == 0 || port >= start || (allowed && may_bind_privileged(pid))
}

/// Whether a session that `allowed` (every process it had held
/// `CAP_NET_BIND_SERVICE`) still is once it moves to process `pid`: a
/// process with more rights than those before gives the session none.
pub(crate) fn may_bind_after_move(allowed: bool, pid: i32) -> bool {
    allowed && may_bind_privileged(pid)
}

/// Whether process `pid` holds `CAP_NET_BIND_SERVICE` in netd's user
/// namespace.
pub(crate) fn may_bind_privileged(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let ours = std::fs::read_link("/proc/self/ns/user");
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/user"));
    let same_namespace = matches!((ours, theirs), (Ok(a), Ok(b)) if a == b);
    same_namespace && effective_caps(&status).is_some_and(|caps| caps & (1 << CAP_NET_BIND_SERVICE) != 0)
}

/// The effective capability set a `/proc/PID/status` text shows.
fn effective_caps(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_move_never_gives_a_session_the_right_to_bind_a_privileged_port() {
        let me = std::process::id() as i32;
        let mine = super::may_bind_privileged(me);
        assert!(!super::may_bind_after_move(false, me), "a process that may bind gives no right");
        assert_eq!(super::may_bind_after_move(true, me), mine);
        assert!(!super::may_bind_after_move(true, -1), "no process");
        assert!(!super::may_bind(false, me, 80, 1024));
        assert!(super::may_bind(false, me, 0, 1024) && super::may_bind(false, me, 1024, 1024));
    }

    #[test]
    fn a_socket_is_opened_and_a_link_or_another_file_in_its_place_is_not() {
        let dir = std::env::temp_dir().join(format!("nagare-access-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("netd.sock");
        // As netd makes it: its user's alone.
        let _listener = nagare_ipc::bind_private(&sock).unwrap();
        let mode = |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
        super::open_socket(&sock, Some(0o666), None).unwrap();
        assert_eq!(mode(&sock), 0o666);
        let file = dir.join("secret");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("link.sock");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(super::open_socket(&link, Some(0o666), None).is_err(), "a link was followed");
        assert!(super::open_socket(&file, Some(0o666), None).is_err(), "a plain file was opened");
        assert_eq!(mode(&file), 0o600, "the file behind the link kept its mode");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn effective_capabilities_are_read_from_the_status_text() {
        let root = "Name:\tnginx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(effective_caps(root), Some(0x1ff_ffff_ffff));
        let user = "CapPrm:\t0000000000000400\nCapEff:\t0000000000000000\n";
        assert_eq!(effective_caps(user), Some(0));
        assert_eq!(effective_caps("Name:\tx\n"), None, "no field");
        assert_eq!(effective_caps("CapEff:\tzz\n"), None, "no number");
    }

    #[test]
    fn ports_from_the_start_and_ephemeral_ones_are_anyones() {
        assert!(may_bind(false, -1, 0, 1024));
        assert!(may_bind(false, -1, 1024, 1024));
        assert!(may_bind(false, -1, 80, 80));
        assert!(!may_bind(true, -1, 80, 1024), "a process that cannot be read may not");
        assert!(!may_bind(true, i32::MAX, 80, 1024), "nor one that is gone");
        // This process: as its own capabilities say, and never for a
        // session that lost the right.
        let me = std::process::id() as i32;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let caps = effective_caps(&status).unwrap_or(0);
        assert_eq!(may_bind(true, me, 80, 1024), caps & (1 << CAP_NET_BIND_SERVICE) != 0, "{status}");
        assert!(!may_bind(false, me, 80, 1024));
    }

    #[test]
    fn groups_are_named_or_numbered() {
        assert_eq!(group_id("0").ok(), Some(0));
        assert_eq!(group_id("root").ok(), Some(0));
        assert!(group_id("no-such-group-of-nagare").is_err());
        assert!(group_id("a\0b").is_err());
    }
}
