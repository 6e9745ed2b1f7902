//! `libnagare_preload.so`: loaded before libc (`LD_PRELOAD`, as `nagare
//! run` does), it stands in for libc's socket calls, so that an unmodified
//! program's `AF_INET` and `AF_INET6` sockets go through a running netd
//! (`nagare_posix`) and everything else (files, pipes, Unix sockets)
//! goes to libc's own calls untouched.
//!
//! Each call here decides one thing, whose call it is, and hands it on:
//! to `nagare_posix` when the descriptor (or `socket`'s family) is ours
//! and the thread is not already inside that layer, else to the next
//! definition (libc's), found once with `dlsym(RTLD_NEXT)`. The layer's
//! own calls into libc (the client library reaching netd, sleeping on its
//! eventfd) carry its thread mark and so reach the kernel.
//!
//! The calls: `socket`, `bind`, `listen`, `accept`, `accept4`, `connect`,
//! `shutdown`, `close`, `close_range`, `closefrom`, `dup`, `dup2`, `dup3`,
//! `fcntl`, `ioctl`,
//! `getsockname`, `getpeername`, `setsockopt`, `getsockopt` (`sockets.rs`);
//! `read`, `write`, `readv`, `writev`, `recv`, `recvfrom`, `recvmsg`,
//! `send`, `sendto`, `sendmsg`, `sendmmsg`, `recvmmsg`, `sendfile` and the
//! fortified `__read_chk`, `__recv_chk`, `__recvfrom_chk` (`data.rs`);
//! `poll`, `ppoll`, `__poll_chk`, `select`, `pselect`, `epoll_ctl`,
//! `epoll_wait`, `epoll_pwait`, `epoll_pwait2` (`wait.rs`); `getaddrinfo`,
//! `freeaddrinfo`, `getnameinfo`, `gethostbyname` and its `_r` and `2`
//! forms, `gethostbyaddr` and its `_r` (`names.rs`: glibc's own resolver
//! sends its DNS queries from inside libc, over the kernel's IPv4, where a
//! preload cannot reach them); `posix_spawn`, `posix_spawnp`, `vfork`
//! and `fork` (`spawn.rs`: a child the first three start runs no fork
//! handlers, and the child's pid of each is recorded).
//!
//! `fcntl` and `ioctl` are variadic in C; they are defined here with their
//! one optional argument as a plain word, which is how the x86-64 and
//! AArch64 Linux calling conventions pass it.

mod data;
mod names;
mod next;
mod sockets;
mod spawn;
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

/// Whether a call on `fd` is ours to answer.
fn ours(fd: libc::c_int) -> bool {
    !nagare_posix::Entered::inside() && nagare_posix::is_ours(fd)
}

/// Run when the library is loaded, before the program's `main`: the
/// shared sockets it inherited across `exec` go in the table
/// (`nagare_posix::inherit`).
extern "C" fn on_load() {
    nagare_posix::inherit();
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
