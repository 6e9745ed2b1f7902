/*
 * A C program of libnagare (tests/c_program.rs builds and runs it against
 * a netd): a UDP socket and a TCP listener, a TCP connection to its own
 * listener with bytes both ways, nagare_poll over nagare sockets and a
 * pipe together, a datagram to itself, the names of each. Exits 0 only
 * if every call did what it should and every byte matched.
 *
 * Usage: echo NETD_ADDRESS (NAGARE_NETD names the netd's socket).
 */
#include "nagare.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The longest any wait lasts, in milliseconds. */
#define LIMIT_MS 5000
#define TCP_PORT 5555

static int fail(const char *what) {
    fprintf(stderr, "echo: %s failed (errno %d: %s)\n", what, errno, strerror(errno));
    return 1;
}

static int check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "echo: %s\n", what);
    }
    return !ok;
}

/* Waits until fd has `events`, at most LIMIT_MS. */
static int wait_for(int fd, short events) {
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int n = nagare_poll(&p, 1, LIMIT_MS);
    if (n < 0) {
        return fail("nagare_poll");
    }
    return check(n == 1 && (p.revents & events), "nagare_poll: not ready in time");
}

/* Reads exactly len bytes from a stream into buf, in bounded steps. */
static int read_all(int fd, char *buf, size_t len) {
    size_t got = 0;
    for (int step = 0; got < len && step < 1000; step++) {
        if (wait_for(fd, POLLIN)) {
            return 1;
        }
        ssize_t n = nagare_read(fd, buf + got, len - got);
        if (n < 0) {
            return fail("nagare_read");
        }
        if (n == 0) {
            return check(0, "nagare_read: end of stream too early");
        }
        got += (size_t)n;
    }
    return check(got == len, "nagare_read: too few bytes");
}

static int same_address(const struct sockaddr_in *a, const struct sockaddr_in *b) {
    return a->sin_family == AF_INET && b->sin_family == AF_INET && a->sin_addr.s_addr == b->sin_addr.s_addr &&
           a->sin_port == b->sin_port;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: echo NETD_ADDRESS\n");
        return 2;
    }
    struct sockaddr_in here = {.sin_family = AF_INET, .sin_port = 0};
    if (inet_pton(AF_INET, argv[1], &here.sin_addr) != 1) {
        fprintf(stderr, "echo: bad address %s\n", argv[1]);
        return 2;
    }
    /* IPv6 streams and datagrams are netd's, other families not. */
    int six_dgram = nagare_socket(AF_INET6, SOCK_DGRAM, 0);
    if (six_dgram < 0) {
        return fail("nagare_socket(AF_INET6, SOCK_DGRAM)");
    }
    if (check(nagare_close(six_dgram) == 0, "nagare_close of the AF_INET6 datagram socket failed")) {
        return 1;
    }
    if (check(nagare_socket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EAFNOSUPPORT,
              "nagare_socket(AF_UNIX) is not refused with EAFNOSUPPORT")) {
        return 1;
    }
    int six = nagare_socket(AF_INET6, SOCK_STREAM, 0);
    if (six < 0) {
        return fail("nagare_socket(AF_INET6, SOCK_STREAM)");
    }
    int domain = 0;
    socklen_t domain_len = sizeof domain;
    if (nagare_getsockopt(six, SOL_SOCKET, SO_DOMAIN, &domain, &domain_len) != 0) {
        return fail("nagare_getsockopt(SO_DOMAIN)");
    }
    if (check(domain == AF_INET6, "an AF_INET6 socket's SO_DOMAIN is not AF_INET6") ||
        check(nagare_close(six) == 0, "nagare_close of the AF_INET6 socket failed")) {
        return 1;
    }

    /* A TCP listener on a port of its own. */
    int listener = nagare_socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) {
        return fail("nagare_socket(SOCK_STREAM)");
    }
    int one = 1;
    if (nagare_setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        return fail("nagare_setsockopt(SO_REUSEADDR)");
    }
    struct sockaddr_in at = here;
    at.sin_port = htons(TCP_PORT);
    if (nagare_bind(listener, (struct sockaddr *)&at, sizeof at) != 0) {
        return fail("nagare_bind(listener)");
    }
    if (nagare_listen(listener, 8) != 0) {
        return fail("nagare_listen");
    }
    struct sockaddr_in name;
    socklen_t len = sizeof name;
    if (nagare_getsockname(listener, (struct sockaddr *)&name, &len) != 0) {
        return fail("nagare_getsockname(listener)");
    }
    if (check(len == sizeof name && same_address(&name, &at), "the listener's name is not its address")) {
        return 1;
    }

    /* A connection to it, accepted once the listener is readable. */
    int client = nagare_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (client < 0) {
        return fail("nagare_socket(client)");
    }
    if (nagare_connect(client, (struct sockaddr *)&at, sizeof at) != 0) {
        return fail("nagare_connect");
    }
    if (wait_for(listener, POLLIN)) {
        return 1;
    }
    struct sockaddr_in peer;
    len = sizeof peer;
    int server = nagare_accept(listener, (struct sockaddr *)&peer, &len);
    if (server < 0) {
        return fail("nagare_accept");
    }
    struct sockaddr_in client_name;
    len = sizeof client_name;
    if (nagare_getsockname(client, (struct sockaddr *)&client_name, &len) != 0) {
        return fail("nagare_getsockname(client)");
    }
    if (check(same_address(&peer, &client_name), "accept's peer is not the client's name")) {
        return 1;
    }
    struct sockaddr_in server_peer;
    len = sizeof server_peer;
    if (nagare_getpeername(client, (struct sockaddr *)&server_peer, &len) != 0) {
        return fail("nagare_getpeername(client)");
    }
    if (check(same_address(&server_peer, &at), "the client's peer is not the listener's address")) {
        return 1;
    }
    if (check(nagare_is_socket(server) == 1 && nagare_is_socket(client) == 1, "nagare_is_socket of a socket is not 1")) {
        return 1;
    }

    /* Client to server: a write and a writev; the server reads them whole. */
    const char ask[] = "a question from the client, in two parts";
    if (nagare_write(client, ask, 10) != 10) {
        return fail("nagare_write");
    }
    struct iovec rest = {.iov_base = (void *)(ask + 10), .iov_len = sizeof ask - 10};
    if (nagare_writev(client, &rest, 1) != (ssize_t)(sizeof ask - 10)) {
        return fail("nagare_writev");
    }
    char got[256];
    if (read_all(server, got, sizeof ask) || check(memcmp(got, ask, sizeof ask) == 0, "the server read other bytes")) {
        return 1;
    }

    /*
     * Server to client, with a pipe (a kernel descriptor) in the same
     * nagare_poll: it waits for the socket while the pipe is empty, then
     * sees both once the pipe has a byte too.
     */
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) {
        return fail("pipe");
    }
    if (check(nagare_is_socket(pipe_fds[0]) == 0, "nagare_is_socket of a pipe is not 0")) {
        return 1;
    }
    const char answer[] = "and the server's answer";
    if (nagare_send(server, answer, sizeof answer, 0) != (ssize_t)sizeof answer) {
        return fail("nagare_send");
    }
    struct pollfd both[2] = {{.fd = pipe_fds[0], .events = POLLIN}, {.fd = client, .events = POLLIN}};
    int ready = nagare_poll(both, 2, LIMIT_MS);
    if (ready < 0) {
        return fail("nagare_poll(mixed)");
    }
    if (check(ready == 1 && both[0].revents == 0 && (both[1].revents & POLLIN),
              "nagare_poll over an empty pipe and a socket did not see the socket alone readable")) {
        return 1;
    }
    if (nagare_write(pipe_fds[1], "p", 1) != 1) {
        return fail("nagare_write(pipe)");
    }
    both[0].revents = both[1].revents = 0;
    ready = nagare_poll(both, 2, LIMIT_MS);
    if (ready < 0) {
        return fail("nagare_poll(mixed)");
    }
    if (check(ready == 2 && (both[0].revents & POLLIN) && (both[1].revents & POLLIN),
              "nagare_poll over a pipe and a socket did not see both readable")) {
        return 1;
    }
    int unread = 0;
    if (nagare_ioctl(client, FIONREAD, &unread) != 0) {
        return fail("nagare_ioctl(FIONREAD)");
    }
    if (check(unread > 0 && (size_t)unread <= sizeof answer, "FIONREAD is not the bytes waiting")) {
        return 1;
    }
    memset(got, 0, sizeof got);
    size_t have = 0;
    for (int step = 0; have < sizeof answer && step < 1000; step++) {
        if (wait_for(client, POLLIN)) {
            return 1;
        }
        ssize_t n = nagare_recv(client, got + have, sizeof answer - have, 0);
        if (n <= 0) {
            return fail("nagare_recv");
        }
        have += (size_t)n;
    }
    if (check(have == sizeof answer && memcmp(got, answer, sizeof answer) == 0, "the client received other bytes")) {
        return 1;
    }
    char p;
    if (nagare_read(pipe_fds[0], &p, 1) != 1 || p != 'p') {
        return fail("nagare_read(pipe)");
    }

    /* The client ends its side: the server reads the end of the stream. */
    if (nagare_shutdown(client, SHUT_WR) != 0) {
        return fail("nagare_shutdown");
    }
    if (wait_for(server, POLLIN)) {
        return 1;
    }
    if (nagare_read(server, got, sizeof got) != 0) {
        return check(0, "the server did not read the end of the stream");
    }

    /* A UDP socket sends a datagram to itself. */
    int udp = nagare_socket(AF_INET, SOCK_DGRAM, 0);
    if (udp < 0) {
        return fail("nagare_socket(SOCK_DGRAM)");
    }
    if (nagare_bind(udp, (struct sockaddr *)&here, sizeof here) != 0) {
        return fail("nagare_bind(udp)");
    }
    struct sockaddr_in self;
    len = sizeof self;
    if (nagare_getsockname(udp, (struct sockaddr *)&self, &len) != 0) {
        return fail("nagare_getsockname(udp)");
    }
    if (check(self.sin_addr.s_addr == here.sin_addr.s_addr && self.sin_port != 0,
              "the UDP socket's name is not its address with a port")) {
        return 1;
    }
    const char datagram[] = "a datagram to itself";
    if (nagare_sendto(udp, datagram, sizeof datagram, 0, (struct sockaddr *)&self, sizeof self) !=
        (ssize_t)sizeof datagram) {
        return fail("nagare_sendto");
    }
    if (wait_for(udp, POLLIN)) {
        return 1;
    }
    struct sockaddr_in from;
    len = sizeof from;
    memset(got, 0, sizeof got);
    ssize_t n = nagare_recvfrom(udp, got, sizeof got, 0, (struct sockaddr *)&from, &len);
    if (n < 0) {
        return fail("nagare_recvfrom");
    }
    if (check(n == (ssize_t)sizeof datagram && memcmp(got, datagram, sizeof datagram) == 0,
              "the datagram came back with other bytes") ||
        check(same_address(&from, &self), "the datagram's sender is not the socket itself")) {
        return 1;
    }

    /* A closed descriptor is no socket any more. */
    int closed = udp;
    int fds[] = {udp, server, client, listener, pipe_fds[0], pipe_fds[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (nagare_close(fds[i]) != 0) {
            return fail("nagare_close");
        }
    }
    if (check(nagare_is_socket(closed) == 0, "a closed socket is still a nagare socket")) {
        return 1;
    }
    printf("echo: every byte matched\n");
    return 0;
}
