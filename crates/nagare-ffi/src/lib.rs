//! `libnagare.so` (and `libnagare.a`): the C ABI of nagare's BSD sockets,
//! for C programs that link it and call `nagare_socket`, `nagare_connect`,
//! `nagare_poll` and the rest by name (`include/nagare.h` at the
//! repository root), with no preloading.
//!
//! The contract is `nagare_posix`'s (descriptors are real kernel numbers,
//! one session with the netd that `NAGARE_NETD` names, and what differs
//! from Linux: `crates/nagare-posix/src/lib.rs`). This crate
//! adds only the C shapes:
//!
//! - Each call returns what its libc namesake would: the value, or -1
//!   with `errno` set.
//! - `nagare_socket` makes `AF_INET` and `AF_INET6` sockets
//!   (`EAFNOSUPPORT` for any other family). Every other call on a descriptor that is not a nagare
//!   socket goes to libc's call of the same name, so a program may pass
//!   its files, pipes and kernel sockets too (`nagare_poll` over a mixed
//!   set among them).
//! - `fcntl` and `ioctl` are variadic in C; stable Rust cannot define a
//!   variadic function, so `nagare_fcntl` takes its argument as a `long`
//!   and `nagare_ioctl` as an `int *`.
//!
//! The calls: `sockets.rs` (making, naming, joining and ending sockets,
//! options, descriptors), `data.rs` (moving bytes), `wait.rs`
//! (`nagare_poll`).

mod data;
mod sockets;
mod wait;

/// A call's C return: the value, or -1 with `errno` set.
fn ret<T: TryInto<isize>>(r: nagare_posix::Res<T>) -> isize {
    match r {
        Ok(v) => v.try_into().unwrap_or(isize::MAX),
        Err(e) => {
            unsafe { *libc::__errno_location() = e };
            -1
        }
    }
}
