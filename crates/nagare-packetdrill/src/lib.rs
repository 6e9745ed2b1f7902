//! packetdrill's shared-object interface over the nagare engine.
//!
//! packetdrill (google/packetdrill) normally drives the kernel through a TUN
//! device. Run with `--so_filename=libnagare_packetdrill.so`, it instead
//! `dlopen`s this library, calls [`packetdrill_interface_init`], and makes
//! every socket call, every injected packet (`netdev_send`), every sniffed
//! packet (`netdev_receive`) and every reading of the clock
//! (`gettimeofday`, `usleep`) through the table of function pointers it gets
//! back ([`abi::PacketdrillInterface`]). Here that table leads to one nagare
//! [`Interface`](nagare_core::Interface), on a virtual clock, with no TAP
//! and no kernel in between. See `docs/packetdrill.md`.
//!
//! Test-only: this crate is not published and nothing else depends on it.
//! It is the only place in the workspace with `unsafe`, all of it in
//! `ffi.rs`, at the C boundary.
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))))]
compile_error!(
    "nagare-packetdrill receives packetdrill's variadic fcntl/ioctl calls through non-variadic functions, \
     which is sound only where variadic integer and pointer arguments travel like named ones \
     (x86_64, aarch64 and riscv64 Linux)"
);

pub mod abi;
mod ffi;
mod stack;

pub use ffi::packetdrill_interface_init;
pub use stack::{Config, Errno, Ready, SockOpt, Stack, LOCAL_MAC, REMOTE_MAC};

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// What `userdata` points at: the stack behind a lock (packetdrill makes
/// blocking calls from a second thread) and a condition variable that
/// wakes blocked calls whenever the stack changes.
///
/// The engine's buffers are reference-counted with `Rc`, so `Stack` is not
/// `Send` and the compiler cannot check this sharing; it is sound because
/// every access to the stack, from any thread, happens under the mutex
/// (which orders those accesses), and nothing reference-counted leaves it:
/// packets and data are copied out as bytes.
#[derive(Debug)]
pub(crate) struct Shim {
    /// [`SHIM_MAGIC`] while alive, checked on every call.
    magic: u64,
    stack: Mutex<Stack>,
    changed: Condvar,
    block_idle: Duration,
}

/// "nagarePD" in ASCII.
pub(crate) const SHIM_MAGIC: u64 = 0x6e61_6761_7265_5044;

impl Shim {
    pub(crate) fn new(stack: Stack) -> Shim {
        let block_idle = Duration::from_millis(stack.config().block_idle_ms);
        Shim { magic: SHIM_MAGIC, stack: Mutex::new(stack), changed: Condvar::new(), block_idle }
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.magic == SHIM_MAGIC
    }

    pub(crate) fn kill(&mut self) {
        self.magic = 0;
    }

    fn lock(&self) -> MutexGuard<'_, Stack> {
        // A panic inside a call is caught at the boundary; the stack it
        // left is still the best there is.
        self.stack.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the stack and wakes blocked calls if anything changed.
    pub(crate) fn run<T>(&self, f: impl FnOnce(&mut Stack) -> T) -> T {
        let mut g = self.lock();
        let before = g.generation();
        let out = f(&mut g);
        if g.generation() != before {
            self.changed.notify_all();
        }
        out
    }

    /// Runs `op` until it stops answering `EAGAIN`, or returns that at once
    /// when `may_block` says the call must not wait.
    ///
    /// A waiting call first gives other threads (packetdrill's main thread,
    /// while this one is its syscall thread) `block_idle` of real time to
    /// change the stack; when nobody does, virtual time runs to the
    /// engine's next timer. `timeout_usecs` bounds the wait in virtual time
    /// (then `on_timeout` answers); without one the wait ends with `EAGAIN`
    /// after the sniff timeout, rather than hanging forever.
    pub(crate) fn block<T>(
        &self,
        may_block: impl Fn(&Stack) -> bool,
        timeout_usecs: Option<u64>,
        on_timeout: impl Fn() -> Result<T, Errno>,
        mut op: impl FnMut(&mut Stack) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let mut g = self.lock();
        let start = g.now_usecs();
        let limit = start.saturating_add(timeout_usecs.unwrap_or(g.config().sniff_timeout_usecs));
        loop {
            let before = g.generation();
            let r = op(&mut g);
            if g.generation() != before {
                self.changed.notify_all();
            }
            match r {
                Err(libc::EAGAIN) if may_block(&g) => {}
                r => return r,
            }
            if g.now_usecs() >= limit {
                return match timeout_usecs {
                    Some(_) => on_timeout(),
                    None => Err(libc::EAGAIN),
                };
            }
            let seen = g.generation();
            let (guard, _) = self.changed.wait_timeout(g, self.block_idle).unwrap_or_else(|e| e.into_inner());
            g = guard;
            if g.generation() == seen {
                g.advance_to_next_timer(limit);
                self.changed.notify_all();
            }
        }
    }
}
