//! The C interface packetdrill loads a shared object through, mirrored in
//! Rust.
//!
//! Source: google/packetdrill, `gtests/net/packetdrill/packetdrill.h`
//! (`struct packetdrill_interface` and `packetdrill_interface_init_t`), as
//! used by `so_testing.c` (which `dlopen`s the object with `RTLD_NOW |
//! RTLD_LOCAL | RTLD_NODELETE | RTLD_DEEPBIND`, looks up
//! `packetdrill_interface_init` and calls it with `--so_flags` and a zeroed
//! struct) and by `run.c` / `run_system_call.c` (which call the members).
//! Read at commit 2c4001c4d6fc04a3bbd01d4b92be62717a37648a. This is our own
//! transcription of the layout, not packetdrill's code: every member is a
//! nullable C function pointer in the order of the C struct, so the field
//! order below must never change.

use libc::{
    c_char, c_int, c_uint, c_ulong, c_void, epoll_event, iovec, loff_t, msghdr, nfds_t, pollfd, size_t, sockaddr,
    socklen_t, ssize_t, timeval, useconds_t,
};

/// `void (*free)(void *userdata)`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void);
/// `int (*socket)(void *userdata, int domain, int type, int protocol)`.
pub type SocketFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int) -> c_int;
/// `int (*bind)(void *, int sockfd, const struct sockaddr *, socklen_t)`;
/// `connect` has the same shape.
pub type BindFn = unsafe extern "C" fn(*mut c_void, c_int, *const sockaddr, socklen_t) -> c_int;
/// `int (*listen)(void *, int sockfd, int backlog)`.
pub type ListenFn = unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int;
/// `int (*accept)(void *, int sockfd, struct sockaddr *, socklen_t *)`.
pub type AcceptFn = unsafe extern "C" fn(*mut c_void, c_int, *mut sockaddr, *mut socklen_t) -> c_int;
/// `ssize_t (*read)(void *, int fd, void *buf, size_t count)`.
pub type ReadFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, size_t) -> ssize_t;
/// `ssize_t (*readv)(void *, int fd, const struct iovec *, int iovcnt)`;
/// `writev` has the same shape.
pub type ReadvFn = unsafe extern "C" fn(*mut c_void, c_int, *const iovec, c_int) -> ssize_t;
/// `ssize_t (*recv)(void *, int sockfd, void *buf, size_t len, int flags)`.
pub type RecvFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, size_t, c_int) -> ssize_t;
/// `ssize_t (*recvfrom)(void *, int, void *, size_t, int, struct sockaddr *, socklen_t *)`.
pub type RecvfromFn =
    unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
/// `ssize_t (*recvmsg)(void *, int sockfd, struct msghdr *, int flags)`.
pub type RecvmsgFn = unsafe extern "C" fn(*mut c_void, c_int, *mut msghdr, c_int) -> ssize_t;
/// `ssize_t (*write)(void *, int fd, const void *buf, size_t count)`.
pub type WriteFn = unsafe extern "C" fn(*mut c_void, c_int, *const c_void, size_t) -> ssize_t;
/// `ssize_t (*send)(void *, int sockfd, const void *buf, size_t len, int flags)`.
pub type SendFn = unsafe extern "C" fn(*mut c_void, c_int, *const c_void, size_t, c_int) -> ssize_t;
/// `ssize_t (*sendto)(void *, int, const void *, size_t, int, const struct sockaddr *, socklen_t)`.
pub type SendtoFn =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
/// `ssize_t (*sendmsg)(void *, int sockfd, const struct msghdr *, int flags)`.
pub type SendmsgFn = unsafe extern "C" fn(*mut c_void, c_int, *const msghdr, c_int) -> ssize_t;
/// `int (*fcntl)(void *, int fd, int cmd, ...)`: C-variadic.
pub type FcntlFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, ...) -> c_int;
/// `int (*ioctl)(void *, int fd, unsigned long request, ...)`: C-variadic.
pub type IoctlFn = unsafe extern "C" fn(*mut c_void, c_int, c_ulong, ...) -> c_int;
/// `int (*close)(void *, int fd)`.
pub type CloseFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
/// `int (*shutdown)(void *, int sockfd, int how)`.
pub type ShutdownFn = unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int;
/// `int (*getsockopt)(void *, int, int level, int optname, void *optval, socklen_t *optlen)`.
pub type GetsockoptFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
/// `int (*setsockopt)(void *, int, int level, int optname, const void *optval, socklen_t optlen)`.
pub type SetsockoptFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
/// `int (*poll)(void *, struct pollfd *fds, nfds_t nfds, int timeout)`.
pub type PollFn = unsafe extern "C" fn(*mut c_void, *mut pollfd, nfds_t, c_int) -> c_int;
/// `int (*netdev_send)(void *, const void *buf, size_t count)`: a packet
/// (starting at the IP header) from the script's remote end into the stack.
pub type NetdevSendFn = unsafe extern "C" fn(*mut c_void, *const c_void, size_t) -> c_int;
/// `int (*netdev_receive)(void *, void *buf, size_t *count, long long *time_usecs)`:
/// the next packet (starting at the IP header) the stack sent.
pub type NetdevReceiveFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut size_t, *mut i64) -> c_int;
/// `int (*usleep)(void *, useconds_t usec)`.
pub type UsleepFn = unsafe extern "C" fn(*mut c_void, useconds_t) -> c_int;
/// `int (*gettimeofday)(void *, struct timeval *, struct timezone *)`; the
/// timezone is opaque here.
pub type GettimeofdayFn = unsafe extern "C" fn(*mut c_void, *mut timeval, *mut c_void) -> c_int;
/// `int (*epoll_create)(void *, int size)`.
pub type EpollCreateFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
/// `int (*epoll_ctl)(void *, int epfd, int op, int fd, struct epoll_event *)`.
pub type EpollCtlFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *mut epoll_event) -> c_int;
/// `int (*epoll_wait)(void *, int epfd, struct epoll_event *, int maxevents, int timeout)`.
pub type EpollWaitFn = unsafe extern "C" fn(*mut c_void, c_int, *mut epoll_event, c_int, c_int) -> c_int;
/// `int (*pipe)(void *, int pipefd[2])`.
pub type PipeFn = unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int;
/// `int (*splice)(void *, int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len, unsigned int flags)`.
pub type SpliceFn = unsafe extern "C" fn(*mut c_void, c_int, *mut loff_t, c_int, *mut loff_t, size_t, c_uint) -> c_int;

/// `struct packetdrill_interface`, member for member.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PacketdrillInterface {
    /// Passed back as the first argument of every call.
    pub userdata: *mut c_void,
    pub free: Option<FreeFn>,
    pub socket: Option<SocketFn>,
    pub bind: Option<BindFn>,
    pub listen: Option<ListenFn>,
    pub accept: Option<AcceptFn>,
    pub connect: Option<BindFn>,
    pub read: Option<ReadFn>,
    pub readv: Option<ReadvFn>,
    pub recv: Option<RecvFn>,
    pub recvfrom: Option<RecvfromFn>,
    pub recvmsg: Option<RecvmsgFn>,
    pub write: Option<WriteFn>,
    pub writev: Option<ReadvFn>,
    pub send: Option<SendFn>,
    pub sendto: Option<SendtoFn>,
    pub sendmsg: Option<SendmsgFn>,
    pub fcntl: Option<FcntlFn>,
    pub ioctl: Option<IoctlFn>,
    pub close: Option<CloseFn>,
    pub shutdown: Option<ShutdownFn>,
    pub getsockopt: Option<GetsockoptFn>,
    pub setsockopt: Option<SetsockoptFn>,
    pub poll: Option<PollFn>,
    pub netdev_send: Option<NetdevSendFn>,
    pub netdev_receive: Option<NetdevReceiveFn>,
    pub usleep: Option<UsleepFn>,
    pub gettimeofday: Option<GettimeofdayFn>,
    pub epoll_create: Option<EpollCreateFn>,
    pub epoll_ctl: Option<EpollCtlFn>,
    pub epoll_wait: Option<EpollWaitFn>,
    pub pipe: Option<PipeFn>,
    pub splice: Option<SpliceFn>,
}

impl PacketdrillInterface {
    /// All members null, as packetdrill's `calloc` leaves the struct before
    /// the init function fills it.
    pub const fn zeroed() -> Self {
        PacketdrillInterface {
            userdata: core::ptr::null_mut(),
            free: None,
            socket: None,
            bind: None,
            listen: None,
            accept: None,
            connect: None,
            read: None,
            readv: None,
            recv: None,
            recvfrom: None,
            recvmsg: None,
            write: None,
            writev: None,
            send: None,
            sendto: None,
            sendmsg: None,
            fcntl: None,
            ioctl: None,
            close: None,
            shutdown: None,
            getsockopt: None,
            setsockopt: None,
            poll: None,
            netdev_send: None,
            netdev_receive: None,
            usleep: None,
            gettimeofday: None,
            epoll_create: None,
            epoll_ctl: None,
            epoll_wait: None,
            pipe: None,
            splice: None,
        }
    }
}

/// `void packetdrill_interface_init(const char *flags, struct packetdrill_interface *)`.
pub type InitFn = unsafe extern "C" fn(*const c_char, *mut PacketdrillInterface);

// 33 pointer-sized members, in the C order.
const _: () = assert!(core::mem::size_of::<PacketdrillInterface>() == 33 * core::mem::size_of::<usize>());
