//! BSD sockets over a running `nagare netd`, by descriptor number: what a
//! C program's `socket`, `connect`, `read` or `poll` mean for an `AF_INET`
//! socket, built on the `nagare` client library.
//!
//! The contract, stated once:
//!
//! - **Descriptors.** Every socket made here has a real kernel descriptor
//!   number: a placeholder (an unbound `AF_UNIX` socket of the same type,
//!   with the caller's `SOCK_CLOEXEC`) that the kernel keeps, so numbers
//!   never collide with files and `exec` closes it as it would the socket.
//!   The table maps the number to the socket; `dup` gives a second number
//!   for the same one, and the socket closes with its last number.
//! - **Errors.** Every call returns `Err(errno)` with the value Linux
//!   gives for the same mistake; nothing here panics on what the program
//!   passes, and pointers are read only within the lengths it gives.
//! - **Libc underneath.** While a call of this layer runs, its thread is
//!   marked ([`Entered`]), so that a preload library that stands in for
//!   libc sends every call made from inside (the client library's `poll`,
//!   `read` on its eventfd, `socket(AF_UNIX)` to reach netd) straight to
//!   the kernel.
//! - **Processes.** One session with netd per process, made by the first
//!   socket (`NAGARE_NETD` names netd's rendezvous socket). Across `fork`
//!   and `exec` a child holds its parent's TCP connections and listeners,
//!   adopted in its own session on first use (`fork.rs`); sockets the
//!   child makes use that session too.
//! - **Names.** `getaddrinfo`, `gethostbyname`, `getnameinfo` and
//!   `gethostbyaddr` answer IPv4 from numeric forms, `/etc/hosts` and DNS
//!   through netd (`names`): glibc's own resolver would send its queries
//!   over the kernel's IPv4.
//! - **What differs from Linux** is said where it is done: a TCP
//!   socket's `bind` is taken up by its `listen`; a listener needs a
//!   port; `epoll` watches are level-triggered, edges emulated
//!   (`epoll.rs`).

#![warn(missing_docs)]

mod addr;
mod calls;
mod data;
mod epoll;
mod errors;
mod fork;
mod guard;
pub mod names;
mod options;
mod pid;
mod session;
mod sock;
mod table;
mod wait;

pub use calls::{
    accept4, bind, close, close_range, connect, dup, dup3, fcntl, getpeername, getsockname, ioctl, listen, shutdown,
    socket,
};
pub use data::{
    read, readv, recv, recvfrom, recvmmsg, recvmsg, send, sendfile, sendmmsg, sendmsg, sendto, write, writev,
};
pub use epoll::{epoll_ctl, epoll_forget, epoll_wait, epoll_watches};
pub use fork::{before_spawn, forked, inherit};
pub use guard::Entered;
pub use names::addrinfo::{
    freeaddrinfo, getaddrinfo, gethostbyaddr, gethostbyaddr_r, gethostbyname, gethostbyname_r, getnameinfo,
};
pub use names::DNS_ENV;
pub use options::{getsockopt, setsockopt};
pub use table::is_ours;
pub use wait::{poll, select};

/// A call's result: its value, or the `errno` it fails with.
pub type Res<T> = Result<T, i32>;
