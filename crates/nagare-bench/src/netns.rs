//! What the benches that run netd on a TAP share: a network namespace they
//! create and delete, a `nagare netd --tap` inside it (stopped by its pid),
//! and threads moved into the namespace to stand for the Linux side.

use anyhow::{bail, Context, Result};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A network namespace, deleted however the bench ends.
pub struct Namespace(pub String);

impl Namespace {
    /// Creates namespace `name` with its loopback up. Needs root.
    pub fn create(name: String) -> Result<Namespace> {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            bail!("this bench needs root (it creates a network namespace and a TAP device)");
        }
        let out = Command::new("ip").args(["netns", "add", &name]).output().context("running ip")?;
        if !out.status.success() {
            bail!("ip netns add: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let ns = Namespace(name);
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs `ip args` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<()> {
        let out = Command::new("ip").args(["netns", "exec", &self.0, "ip"]).args(args).stdin(Stdio::null()).output()?;
        if !out.status.success() {
            bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(())
    }

    /// Moves the calling thread (only it) into the namespace.
    pub fn enter(&self) -> Result<()> {
        let path = format!("/var/run/netns/{}", self.0);
        let f = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        // SAFETY: setns on an open namespace file; it moves only this thread.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            bail!("setns: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Starts `nagare netd --tap tap --addr addr` with `extra` arguments
    /// inside the namespace, listening on a socket named after `tag`, and
    /// waits until it listens. A netd that exits first is reported with
    /// what it wrote on stderr (e.g. its refusal of an argument).
    pub fn start_netd(&self, tap: &str, addr: &str, extra: &[&str], tag: &str) -> Result<NetdProcess> {
        let exe = std::env::current_exe()?;
        let socket = std::env::temp_dir().join(format!("nagare-{tag}-{}.sock", std::process::id()));
        let log = socket.with_extension("log");
        let _ = std::fs::remove_file(&socket);
        let stderr = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .arg(&exe)
            .args(["netd", "--tap", tap, "--addr", addr])
            .args(extra)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .context("starting nagare netd")?;
        let mut p = NetdProcess { child, socket, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !p.socket.exists() {
            if Instant::now() > deadline || !matches!(p.child.try_wait(), Ok(None)) {
                let said = std::fs::read_to_string(&p.log).unwrap_or_default();
                bail!("netd ({}) did not start: {}", extra.join(" "), first_error(&said));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(p)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "delete", &self.0]).stdin(Stdio::null()).output();
    }
}

/// The line of a program's stderr that says what went wrong: the first
/// that starts with `error` (as clap's and anyhow's do), else the last
/// that is not empty, else that it said nothing.
pub fn first_error(stderr: &str) -> String {
    let lines = || stderr.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| l.to_ascii_lowercase().starts_with("error"))
        .or_else(|| lines().next_back())
        .unwrap_or("it wrote nothing on stderr")
        .to_string()
}

/// A netd, stopped (by its pid) however the bench ends.
pub struct NetdProcess {
    child: Child,
    pub socket: PathBuf,
    /// Its stderr.
    log: PathBuf,
}

/// Ends `child` by its pid: SIGTERM, up to 3 s to go (a netd stops its
/// driver), then SIGKILL; reaped either way.
pub(crate) fn terminate(child: &mut Child) {
    if matches!(child.try_wait(), Ok(None)) {
        // SAFETY: kill(2) on the pid of our own child, not yet reaped, with
        // a constant signal.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for NetdProcess {
    fn drop(&mut self) {
        terminate(&mut self.child);
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::first_error;

    #[test]
    fn the_error_line_of_a_refusal() {
        let clap = "error: invalid value 'mm' for '--packetflow <PACKETFLOW>': mm is not built\n\nFor more information, try '--help'.\n";
        assert_eq!(first_error(clap), "error: invalid value 'mm' for '--packetflow <PACKETFLOW>': mm is not built");
        assert_eq!(first_error("starting\n  no such device  \n\n"), "no such device");
        assert_eq!(first_error(""), "it wrote nothing on stderr");
    }
}
