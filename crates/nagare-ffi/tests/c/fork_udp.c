/*
 * A C program of libnagare (tests/c_program.rs builds and runs it against
 * a netd): UDP sockets made before fork, used in the child. A server
 * socket and a client socket are bound and used before the fork; the
 * child receives the parent's question on the inherited server socket,
 * answers on it, and sends a datagram of its own on the inherited client
 * socket; the parent, once the child is gone, still receives on its
 * server socket. Exits 0 only if every call did what it should and every
 * byte matched.
 *
 * Usage: fork_udp NETD_ADDRESS (NAGARE_NETD names the netd's socket).
 */
#include "nagare.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The longest any wait lasts, in milliseconds. */
#define LIMIT_MS 5000
#define SERVER_PORT 9700
#define CLIENT_PORT 9701
/* Bytes of each question (varied, so that a byte out of place shows). */
#define QUESTION 1200

static int fail(const char *who, const char *what) {
    fprintf(stderr, "fork_udp (%s): %s failed (errno %d: %s)\n", who, what, errno, strerror(errno));
    return 1;
}

static int check(int ok, const char *who, const char *what) {
    if (!ok) {
        fprintf(stderr, "fork_udp (%s): %s\n", who, what);
    }
    return !ok;
}

static struct sockaddr_in at(const char *addr, int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, addr, &a.sin_addr);
    return a;
}

static int bound(const char *addr, int port) {
    int fd = nagare_socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in a = at(addr, port);
    if (nagare_bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        return -1;
    }
    return fd;
}

static void fill(unsigned char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) {
        buf[i] = (unsigned char)(i * 31u + seed * 7u + (i >> 8));
    }
}

/* Receives one datagram on fd within LIMIT_MS: its length (-1 on error),
 * its sender's port in *from_port. */
static ssize_t receive(int fd, unsigned char *buf, size_t len, int *from_port) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    if (nagare_poll(&p, 1, LIMIT_MS) != 1 || !(p.revents & POLLIN)) {
        errno = ETIMEDOUT;
        return -1;
    }
    struct sockaddr_in from;
    socklen_t from_len = sizeof from;
    ssize_t n = nagare_recvfrom(fd, buf, len, 0, (struct sockaddr *)&from, &from_len);
    *from_port = ntohs(from.sin_port);
    return n;
}

/* The child: answers the question on the inherited server socket (the
 * question's bytes reversed), then a datagram of its own on the inherited
 * client socket. */
static int child(int server, int client, const char *addr) {
    unsigned char got[2048], want[QUESTION], answer[QUESTION];
    int from_port = 0;
    ssize_t n = receive(server, got, sizeof got, &from_port);
    if (n < 0) {
        return fail("child", "recvfrom on the inherited server socket");
    }
    fill(want, QUESTION, 1);
    if (check(n == QUESTION && memcmp(got, want, QUESTION) == 0, "child", "the question's bytes differ") ||
        check(from_port == CLIENT_PORT, "child", "the question came from another port")) {
        return 1;
    }
    for (size_t i = 0; i < QUESTION; i++) {
        answer[i] = got[QUESTION - 1 - i];
    }
    struct sockaddr_in to = at(addr, CLIENT_PORT);
    if (nagare_sendto(server, answer, QUESTION, 0, (struct sockaddr *)&to, sizeof to) != QUESTION) {
        return fail("child", "sendto on the inherited server socket");
    }
    struct sockaddr_in srv = at(addr, SERVER_PORT);
    if (nagare_sendto(client, "child's own", 11, 0, (struct sockaddr *)&srv, sizeof srv) != 11) {
        return fail("child", "sendto on the inherited client socket");
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fork_udp NETD_ADDRESS\n");
        return 2;
    }
    const char *addr = argv[1];
    int server = bound(addr, SERVER_PORT);
    int client = bound(addr, CLIENT_PORT);
    if (server < 0 || client < 0) {
        return fail("parent", "socket and bind");
    }
    unsigned char question[QUESTION], got[2048];
    int from_port = 0;
    struct sockaddr_in srv = at(addr, SERVER_PORT);
    /* Both sockets work before the fork. */
    if (nagare_sendto(client, "before", 6, 0, (struct sockaddr *)&srv, sizeof srv) != 6) {
        return fail("parent", "sendto before the fork");
    }
    ssize_t n = receive(server, got, sizeof got, &from_port);
    if (n < 0) {
        return fail("parent", "recvfrom before the fork");
    }
    if (check(n == 6 && memcmp(got, "before", 6) == 0, "parent", "the datagram before the fork differs")) {
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        return fail("parent", "fork");
    }
    if (pid == 0) {
        _exit(child(server, client, addr));
    }
    fill(question, QUESTION, 1);
    if (nagare_sendto(client, question, QUESTION, 0, (struct sockaddr *)&srv, sizeof srv) != QUESTION) {
        return fail("parent", "sendto of the question");
    }
    n = receive(client, got, sizeof got, &from_port);
    if (n < 0) {
        return fail("parent", "recvfrom of the answer");
    }
    int reversed = n == QUESTION;
    for (size_t i = 0; reversed && i < QUESTION; i++) {
        reversed = got[i] == question[QUESTION - 1 - i];
    }
    if (check(reversed, "parent", "the answer's bytes differ") ||
        check(from_port == SERVER_PORT, "parent", "the answer came from another port")) {
        return 1;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        return fail("parent", "waitpid");
    }
    if (check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "parent", "the child failed")) {
        return 1;
    }
    /* The child's own datagram, and one sent now, on the parent's copy of
     * the server socket, which outlives the child's. */
    n = receive(server, got, sizeof got, &from_port);
    if (n < 0) {
        return fail("parent", "recvfrom of the child's datagram");
    }
    if (check(n == 11 && memcmp(got, "child's own", 11) == 0 && from_port == CLIENT_PORT, "parent",
              "the child's own datagram differs")) {
        return 1;
    }
    if (nagare_sendto(client, "after", 5, 0, (struct sockaddr *)&srv, sizeof srv) != 5) {
        return fail("parent", "sendto after the child");
    }
    n = receive(server, got, sizeof got, &from_port);
    if (n < 0) {
        return fail("parent", "recvfrom after the child");
    }
    if (check(n == 5 && memcmp(got, "after", 5) == 0, "parent", "the datagram after the child differs")) {
        return 1;
    }
    nagare_close(server);
    nagare_close(client);
    printf("every byte matched\n");
    return 0;
}
