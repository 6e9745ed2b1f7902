/* A server in the shape of PostgreSQL's postmaster before version 16: its
 * signals are blocked but around select(), and its SIGUSR1 handler forks
 * FORKS children (which exit at once) from inside that select(); SIGCHLD's
 * reaps. A helper process sends SIGUSR1 SIGNALS times, GAP_US
 * microseconds apart and each once the handler said it ran for the one
 * before (a byte on a pipe; at most 5 s each), so no two merge.
 * Usage: forks_in_handler ADDR PORT SIGNALS GAP_US FORKS. Prints
 * "forked N reaped M" once the helper is done and every child reaped. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t forked, reaped, helper_done;
static int handled[2];
static int forks_per_signal = 1;
static volatile pid_t helper;

static void on_usr1(int sig) {
    (void)sig;
    int saved = errno;
    for (int i = 0; i < forks_per_signal; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            _exit(0);
        }
        if (pid > 0) {
            forked++;
        }
    }
    char one = 1;
    ssize_t w = write(handled[1], &one, 1);
    (void)w;
    errno = saved;
}

static void on_chld(int sig) {
    (void)sig;
    int saved = errno;
    pid_t pid;
    while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
        if (pid == helper) {
            helper_done = 1;
        } else {
            reaped++;
        }
    }
    errno = saved;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: forks_in_handler ADDR PORT SIGNALS GAP_US FORKS\n");
        return 2;
    }
    forks_per_signal = atoi(argv[5]);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    if (l < 0 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(l, 16) != 0) {
        perror("listen");
        return 1;
    }
    sigset_t blocked, open;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigaddset(&blocked, SIGCHLD);
    sigprocmask(SIG_BLOCK, &blocked, &open);
    sigdelset(&open, SIGUSR1);
    sigdelset(&open, SIGCHLD);
    struct sigaction usr1 = {.sa_handler = on_usr1}, chld = {.sa_handler = on_chld};
    sigfillset(&usr1.sa_mask);
    sigfillset(&chld.sa_mask);
    sigaction(SIGUSR1, &usr1, NULL);
    sigaction(SIGCHLD, &chld, NULL);
    int signals = atoi(argv[3]);
    useconds_t gap = (useconds_t)atoi(argv[4]);
    pid_t parent = getpid();
    if (pipe(handled) != 0) {
        perror("pipe");
        return 1;
    }
    helper = fork();
    if (helper == 0) {
        for (int i = 0; i < signals; i++) {
            usleep(gap);
            kill(parent, SIGUSR1);
            struct pollfd p = {.fd = handled[0], .events = POLLIN};
            char one;
            if (poll(&p, 1, 5000) != 1 || read(handled[0], &one, 1) != 1) {
                _exit(1);
            }
        }
        _exit(0);
    }
    while (!helper_done || reaped < forked) {
        fd_set r;
        FD_ZERO(&r);
        FD_SET(l, &r);
        struct timeval tv = {.tv_sec = 0, .tv_usec = 500};
        sigprocmask(SIG_SETMASK, &open, NULL);
        select(l + 1, &r, NULL, NULL, &tv);
        sigprocmask(SIG_BLOCK, &blocked, NULL);
    }
    printf("forked %d reaped %d\n", (int)forked, (int)reaped);
    return 0;
}
