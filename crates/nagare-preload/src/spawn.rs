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
    if !posix::Entered::inside() {
        posix::before_spawn(!actions.is_null());
    }
    unsafe {
        next!(posix_spawn: fn(
            *mut pid_t,
            *const c_char,
            *const c_void,
            *const c_void,
            *const *mut c_char,
            *const *mut c_char
        ) -> c_int)(pid, path, actions, attrs, argv, envp)
    }
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
    if !posix::Entered::inside() {
        posix::before_spawn(!actions.is_null());
    }
    unsafe {
        next!(posix_spawnp: fn(
            *mut pid_t,
            *const c_char,
            *const c_void,
            *const c_void,
            *const *mut c_char,
            *const *mut c_char
        ) -> c_int)(pid, file, actions, attrs, argv, envp)
    }
}

#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    unsafe { libc::fork() }
}
