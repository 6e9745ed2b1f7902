//! The bench's helper processes: `nagare perf server` receivers and
//! `nagare perf client` senders, their output in files of the bench's
//! work folder, each ended by its pid however the bench ends, every wait
//! bounded.

use super::table::Report;
use crate::netns::{first_error, terminate};
use anyhow::{bail, Context, Result};
use nagare_host::realtime;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Raised by SIGINT or SIGTERM: waits end early, and what the bench made
/// is removed as it unwinds.
static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Makes SIGINT and SIGTERM raise the flag [`interrupted`] reads.
pub fn catch_signals() -> Result<()> {
    if INTERRUPTED.get().is_none() {
        let _ = INTERRUPTED.set(realtime::stop_flag()?);
    }
    Ok(())
}

pub fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| realtime::stopped(f))
}

/// Sleeps `d`, or less when interrupted (then an error).
pub fn pause(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if interrupted() {
            bail!("interrupted");
        }
        std::thread::sleep(Duration::from_millis(20).min(end.saturating_duration_since(Instant::now())));
    }
    Ok(())
}

/// A process the bench started: stdout and stderr in files; on drop,
/// SIGTERM, up to 3 s to go, then SIGKILL, and reaped.
pub struct Proc {
    child: Child,
    pub name: String,
    out: PathBuf,
    err: PathBuf,
}

impl Proc {
    /// Starts `program args` with its output in `work`/`name`.out and .err.
    pub fn spawn(work: &Path, name: &str, program: &Path, args: &[String]) -> Result<Proc> {
        Proc::spawn_on(work, name, program, args, None)
    }

    /// As [`Proc::spawn`], on CPU `cpu` alone if given (the program and
    /// whatever it runs inherit it).
    pub fn spawn_on(work: &Path, name: &str, program: &Path, args: &[String], cpu: Option<usize>) -> Result<Proc> {
        let out = work.join(format!("{name}.out"));
        let err = work.join(format!("{name}.err"));
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::null()).stdout(std::fs::File::create(&out)?);
        command.stderr(std::fs::File::create(&err)?);
        // An error's message is what the run reports; with RUST_BACKTRACE
        // set (as test environments do), anyhow would also capture a
        // backtrace for it and symbolize that from the debug information
        // on the way out, tens of milliseconds of a measured CPU.
        command.env("RUST_LIB_BACKTRACE", "0");
        if let Some(cpu) = cpu.filter(|&c| c < libc::CPU_SETSIZE as usize) {
            // SAFETY: between fork and exec the closure only fills a set on
            // its stack and makes one system call, both async-signal-safe.
            unsafe {
                command.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().with_context(|| format!("starting {name}"))?;
        Ok(Proc { child, name: name.to_string(), out, err })
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// What went wrong, as its stderr says.
    pub fn complaint(&self) -> String {
        first_error(&std::fs::read_to_string(&self.err).unwrap_or_default())
    }

    /// Waits until its stdout holds `text`, at most `limit`.
    pub fn wait_for_output(&mut self, text: &str, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if self.stdout().contains(text) {
                return Ok(());
            }
            if !matches!(self.child.try_wait(), Ok(None)) {
                bail!("{} exited: {}", self.name, self.complaint());
            }
            if Instant::now() > deadline {
                bail!("{} did not say {text:?} within {limit:?}", self.name);
            }
            pause(Duration::from_millis(20))?;
        }
    }

    /// Waits for it to exit, at most until `deadline` (then it is ended);
    /// its summary, or why there is none.
    pub fn report(&mut self, deadline: Instant) -> Result<Report, String> {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline && !interrupted() => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    self.stop();
                    let why = if interrupted() { "interrupted" } else { "ended at its time limit" };
                    return Err(format!("{}: {why}", self.name));
                }
                Err(e) => return Err(format!("{}: {e}", self.name)),
            }
        };
        match Report::parse(&self.stdout()) {
            Some(r) if status.success() => Ok(r),
            _ => Err(format!("{}: exit {}: {}", self.name, status.code().unwrap_or(-1), self.complaint())),
        }
    }

    /// SIGTERM to its pid, up to 3 s to go, then SIGKILL; reaped.
    pub fn stop(&mut self) {
        terminate(&mut self.child);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Signals every one of `procs` at once (so that they end side by side),
/// then stops each.
pub fn stop_all(procs: &mut [Proc]) {
    for p in procs.iter_mut() {
        if matches!(p.child.try_wait(), Ok(None)) {
            // SAFETY: as in `Proc::stop`: our own child, not yet reaped.
            unsafe { libc::kill(p.child.id() as i32, libc::SIGTERM) };
        }
    }
    for p in procs.iter_mut() {
        p.stop();
    }
}
