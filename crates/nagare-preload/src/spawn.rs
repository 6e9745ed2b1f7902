//! The calls that start a child without `fork`'s handlers, which share
//! the sockets a child inherits (`nagare_posix`'s `fork.rs`): without them
//! the program the child runs would find descriptors it cannot use.
//!
//! - `posix_spawn` and `posix_spawnp` share the sockets the program may
//!   inherit first (`nagare_posix::before_spawn`: every one when file
//!   actions are given, else those not close-on-exec), then hand on to
//!   libc's.
//! - `vfork` is a `fork` (POSIX lets it be one: its child may only call
//!   `exec` or `_exit`), so that the fork handlers run; a function that
//!   called libc's `vfork` and returned in the child would leave the
//!   parent's stack to it.
//! - `fork` is libc's, and then, in the parent, the child's pid is
//!   recorded (`nagare_posix::forked`), as it is after `posix_spawn` and
//!   `posix_spawnp`: the sockets shared for the child are taken back once
//!   it is gone.
//!
//! glibc's `system` and `popen` spawn from inside libc, where a preload
//! cannot reach them: a socket they pass on is not shared.

use crate::next::next;
use libc::{c_char, c_int, c_void, pid_t};
use nagare_posix as posix;

#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    actions: *const c_void,
    attrs: *const c_void,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    let outside = !posix::Entered::inside();
    if outside {
        posix::before_spawn(!actions.is_null());
    }
    let r = unsafe {
        next!(posix_spawn: fn(
            *mut pid_t,
            *const c_char,
            *const c_void,
            *const c_void,
            *const *mut c_char,
            *const *mut c_char
        ) -> c_int)(pid, path, actions, attrs, argv, envp)
    };
    if outside {
        unsafe { spawned(r, pid) };
    }
    r
}

/// After `posix_spawn` returned `r`: the child's pid, if one was made and
/// `pid` names where it was written, is recorded.
unsafe fn spawned(r: c_int, pid: *mut pid_t) {
    let child = if r == 0 && !pid.is_null() { unsafe { *pid } } else { 0 };
    posix::forked(child);
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    actions: *const c_void,
    attrs: *const c_void,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    let outside = !posix::Entered::inside();
    if outside {
        posix::before_spawn(!actions.is_null());
    }
    let r = unsafe {
        next!(posix_spawnp: fn(
            *mut pid_t,
            *const c_char,
            *const c_void,
            *const c_void,
            *const *mut c_char,
            *const *mut c_char
        ) -> c_int)(pid, file, actions, attrs, argv, envp)
    };
    if outside {
        unsafe { spawned(r, pid) };
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fork() -> pid_t {
    let pid = unsafe { next!(fork: fn() -> pid_t)() };
    // The layer itself never forks: a fork inside one of its calls is a
    // signal handler's, run while the call slept, and its child is the
    // program's.
    if pid != 0 {
        posix::forked(pid);
    }
    pid
}

#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    unsafe { fork() }
}
