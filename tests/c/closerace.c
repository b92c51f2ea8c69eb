/* A descriptor number closed and opened again (or re-pointed by dup2)
 * from a signal handler that interrupts mmaps through it
 * (tests/fd_race.rs): a mapping made through the open file the handler
 * ended must not be recorded as the number's, or the queue would keep
 * that open file, and its lock, past its close.
 *
 *   closerace DIR close|dup2 ITERATIONS
 *       DIR/file (8 MiB) opened read-only as N, with a shared flock. A
 *       2 MiB window mapped, read and unmapped through N 300 times, then
 *       ITERATIONS more times while SIGALRM fires every 50 us: its handler
 *       ends N's open file (close, or dup2 of a new open onto N) and gives
 *       N a new one of the file with a shared flock. Every 64 iterations,
 *       with SIGALRM blocked, after one more map and unmap (which lets the
 *       library apply closes it was told of while busy) and nothing
 *       mapped, N asks for an exclusive flock without waiting: granted
 *       unless an open file the program closed still holds its shared
 *       one. Prints "checks: COUNT, refused: COUNT, wrong bytes: COUNT". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#define LEN (2u << 20)

static char path[4096];
static int n, dup2_mode;

static void reopen(int sig) {
    (void)sig;
    int e = errno;
    if (dup2_mode) {
        int o = open(path, O_RDONLY);
        flock(o, LOCK_SH | LOCK_NB);
        dup2(o, n);
        close(o);
    } else {
        close(n);
        open(path, O_RDONLY); /* the lowest free number: n */
        flock(n, LOCK_SH | LOCK_NB);
    }
    errno = e;
}

/* Maps, reads and unmaps the window; whether it read the file's bytes. */
static int cycle(void) {
    char *p = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, n, 0);
    if (p == MAP_FAILED)
        return 1;
    int ok = p[0] == 'Q' && p[LEN / 2] == 'Q';
    munmap(p, LEN);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    dup2_mode = strcmp(argv[2], "dup2") == 0;
    long iterations = atol(argv[3]);
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[LEN];
    memset(buf, 'Q', sizeof buf);
    for (int i = 0; i < 4; i++)
        if (w < 0 || write(w, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 2;
    close(w);
    n = open(path, O_RDONLY);
    if (n < 0 || flock(n, LOCK_SH) != 0)
        return 2;
    for (int i = 0; i < 300; i++)
        cycle();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = reopen;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, NULL);
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    long checks = 0, refused = 0, wrong = 0;
    for (long i = 0; i < iterations; i++) {
        wrong += !cycle();
        if (i % 64 == 63) {
            sigprocmask(SIG_BLOCK, &alrm, NULL);
            wrong += !cycle();
            checks++;
            refused += flock(n, LOCK_EX | LOCK_NB) != 0;
            flock(n, LOCK_SH);
            sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("checks: %ld, refused: %ld, wrong bytes: %ld\n", checks, refused, wrong);
    return 0;
}
