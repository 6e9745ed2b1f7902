/*
 * nagare.h: libnagare (libnagare.so, libnagare.a), nagare's AF_INET and
 * AF_INET6 sockets for C programs that link it, with no preloading.
 *
 * Each socket lives in a running `nagare netd`, the user-space TCP/IP
 * stack's inet server; the environment variable NAGARE_NETD names its
 * rendezvous socket (default /tmp/nagare-netd.sock), reached by the
 * process's first nagare_socket. Descriptors are real kernel descriptor
 * numbers (the kernel holds a placeholder under each), so they never
 * collide with files, and exec closes them as it would the sockets. TCP
 * and UDP over AF_INET and AF_INET6 (struct sockaddr_in6 in and out,
 * IPV6_V6ONLY; IPv4 peers of an AF_INET6 socket IPv4-mapped).
 *
 * Each call returns what its libc namesake would: the value, or -1 with
 * errno set. Every call but nagare_socket takes any descriptor: one that
 * is not a nagare socket goes to libc's call of the same name, so a
 * program may pass its files, pipes and kernel sockets too (nagare_poll
 * over a mixed set among them).
 *
 * What differs from Linux (crates/nagare-posix/src/lib.rs says it in
 * full): a TCP socket's bind is taken up by its listen; a listener
 * needs a port.
 *
 * fcntl and ioctl are variadic in C; this library is written in Rust,
 * which cannot define a variadic C function, so nagare_fcntl always takes
 * its argument (as a long) and nagare_ioctl takes an int pointer.
 *
 * Link: cc app.c -Iinclude -Ltarget/release -lnagare -Wl,-rpath,$PWD/target/release
 */
#ifndef NAGARE_H
#define NAGARE_H

#include <sys/socket.h>
#include <poll.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* socket(2) for domain AF_INET or AF_INET6 (SOCK_STREAM or SOCK_DGRAM), SOCK_NONBLOCK and SOCK_CLOEXEC taken; EAFNOSUPPORT for any other domain, EPROTONOSUPPORT for any other kind. */
int nagare_socket(int domain, int type, int protocol);
/* bind(2): a UDP socket is bound in netd at once, a TCP socket keeps the address for its listen. */
int nagare_bind(int fd, const struct sockaddr *addr, socklen_t len);
/* listen(2): the TCP socket becomes a listener on its bound address, which needs a port. */
int nagare_listen(int fd, int backlog);
/* accept(2): the listener's next connection under a new descriptor, its peer written to addr. */
int nagare_accept(int fd, struct sockaddr *addr, socklen_t *len);
/* accept4(2): as nagare_accept, with SOCK_NONBLOCK and SOCK_CLOEXEC taken in flags. */
int nagare_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
/* connect(2): a TCP handshake completes before it returns; a UDP socket gets its peer (AF_UNSPEC clears it). */
int nagare_connect(int fd, const struct sockaddr *addr, socklen_t len);
/* shutdown(2) of a connected stream: SHUT_RD, SHUT_WR or SHUT_RDWR. */
int nagare_shutdown(int fd, int how);
/* close(2): the descriptor goes back to the kernel; the socket closes with its last descriptor. */
int nagare_close(int fd);
/* read(2). */
ssize_t nagare_read(int fd, void *buf, size_t len);
/* write(2). */
ssize_t nagare_write(int fd, const void *buf, size_t len);
/* readv(2). */
ssize_t nagare_readv(int fd, const struct iovec *iov, int iovcnt);
/* writev(2): the buffers are gathered (up to 256 KiB) and sent as one write. */
ssize_t nagare_writev(int fd, const struct iovec *iov, int iovcnt);
/* recv(2): MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC, MSG_PEEK. */
ssize_t nagare_recv(int fd, void *buf, size_t len, int flags);
/* recvfrom(2): a datagram's sender written to addr. */
ssize_t nagare_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr, socklen_t *addrlen);
/* recvmsg(2): no ancillary data (msg_controllen 0). */
ssize_t nagare_recvmsg(int fd, struct msghdr *msg, int flags);
/* send(2): MSG_DONTWAIT, MSG_NOSIGNAL. */
ssize_t nagare_send(int fd, const void *buf, size_t len, int flags);
/* sendto(2): a datagram to addr. */
ssize_t nagare_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr, socklen_t addrlen);
/* sendmsg(2): the buffers gathered, to msg_name if set; ancillary data ignored. */
ssize_t nagare_sendmsg(int fd, const struct msghdr *msg, int flags);
/* setsockopt(2): the options of crates/nagare-posix/src/options.rs; ENOPROTOOPT for others. */
int nagare_setsockopt(int fd, int level, int name, const void *value, socklen_t len);
/* getsockopt(2): SO_ERROR, SO_TYPE, SO_SNDBUF, TCP_NODELAY and the rest of options.rs. */
int nagare_getsockopt(int fd, int level, int name, void *value, socklen_t *len);
/* getsockname(2): the bound address (0.0.0.0:0 before there is one). */
int nagare_getsockname(int fd, struct sockaddr *addr, socklen_t *len);
/* getpeername(2): a stream's peer or a UDP socket's connected one; ENOTCONN otherwise. */
int nagare_getpeername(int fd, struct sockaddr *addr, socklen_t *len);
/* fcntl(2), not variadic: F_GETFL, F_SETFL (O_NONBLOCK), F_DUPFD, F_DUPFD_CLOEXEC; others go to the kernel's placeholder. */
int nagare_fcntl(int fd, int cmd, long arg);
/* ioctl(2), not variadic: FIONBIO and FIONREAD on a nagare socket; ENOTTY for others. */
int nagare_ioctl(int fd, unsigned long request, int *arg);
/* poll(2) over a set of nagare sockets and kernel descriptors together; a negative timeout waits as long as it takes. */
int nagare_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms);
/* dup(2): a second descriptor for the same socket. */
int nagare_dup(int fd);
/* dup2(2): newfd names what oldfd names (a nagare socket newfd named before is closed). */
int nagare_dup2(int oldfd, int newfd);
/* 1 if fd is a nagare socket, else 0. */
int nagare_is_socket(int fd);

#ifdef __cplusplus
}
#endif

#endif /* NAGARE_H */
