//! `nagare run`: a program started with the preload library, so that its
//! `AF_INET` and `AF_INET6` sockets go through a running netd
//! (`nagare-preload`).

use anyhow::{bail, Context, Result};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The environment variable naming the preload library, where it is not
/// beside the `nagare` binary.
pub const PRELOAD_ENV: &str = "NAGARE_PRELOAD";

/// The environment variable naming the name servers the preload
/// library's lookups ask (`nagare_posix::DNS_ENV`).
pub const DNS_ENV: &str = "NAGARE_DNS";

/// The preload library's file name.
pub const PRELOAD_FILE: &str = "libnagare_preload.so";

/// The preload library: `NAGARE_PRELOAD`, else the file beside this
/// binary (where cargo builds both).
pub fn preload_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(PRELOAD_ENV) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{PRELOAD_ENV}={} is not a file", p.display());
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("where is this binary")?;
    let beside = exe.parent().map(|d| d.join(PRELOAD_FILE));
    match beside {
        Some(p) if p.is_file() => Ok(p),
        _ => bail!(
            "{PRELOAD_FILE} is not beside {} (build it: cargo build -p nagare-preload, in the same profile), \
             and {PRELOAD_ENV} does not name it",
            exe.display()
        ),
    }
}

/// `LD_PRELOAD` with `library` first and what was there after it.
fn preload_value(library: &Path, before: Option<OsString>) -> OsString {
    let mut v = OsString::from(library.as_os_str());
    if let Some(b) = before.filter(|b| !b.is_empty()) {
        v.push(":");
        v.push(b);
    }
    v
}

/// Replaces this process with `program` and its `args`, the preload
/// library loaded first, `NAGARE_NETD` set to `via` and `NAGARE_DNS` to
/// `dns` (the name servers its lookups ask, through netd; default:
/// `/etc/resolv.conf`'s), if given. Returns only on failure.
pub fn run(via: Option<&Path>, dns: &[std::net::Ipv4Addr], program: &OsStr, args: &[OsString]) -> Result<()> {
    let library = preload_library()?;
    let library = library.canonicalize().unwrap_or(library);
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env("LD_PRELOAD", preload_value(&library, std::env::var_os("LD_PRELOAD")));
    if let Some(socket) = via {
        cmd.env(nagare::NETD_ENV, socket);
    }
    if !dns.is_empty() {
        let servers: Vec<String> = dns.iter().map(|a| a.to_string()).collect();
        cmd.env(DNS_ENV, servers.join(","));
    }
    let e = cmd.exec();
    Err(e).with_context(|| format!("cannot run {}", program.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_goes_first_and_what_was_preloaded_stays() {
        let lib = Path::new("/x/libnagare_preload.so");
        assert_eq!(preload_value(lib, None), OsString::from("/x/libnagare_preload.so"));
        assert_eq!(preload_value(lib, Some("".into())), OsString::from("/x/libnagare_preload.so"));
        assert_eq!(preload_value(lib, Some("/y/a.so".into())), OsString::from("/x/libnagare_preload.so:/y/a.so"));
    }
}
