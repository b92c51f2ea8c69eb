/* What the SIGALRM programs share (longjmp.c, fdleak.c, sigclaim.c): a
 * data file named on the command line, a periodic SIGALRM, and for the two
 * that jump (define ALARM_JUMPS before including this) the timeout loop
 * whose handler siglongjmps back to its top from wherever the signal
 * landed, often inside munmap. */
#ifndef MQ_ALARM_H
#define MQ_ALARM_H
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The data file argv[1] opened with flags; exit status 2 without one. */
static inline int open_data(int argc, char **argv, int flags) {
    if (argc < 2)
        exit(2);
    int fd = open(argv[1], flags);
    if (fd < 0)
        exit(2);
    return fd;
}

/* SIGALRM every usec microseconds (0: no more). */
static inline void timer(long usec) {
    struct itimerval it = {{0, usec}, {0, usec}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* handler (with sa_flags flags) for SIGALRM; returns the set of SIGALRM
 * alone, to block it around what must not be interrupted. */
static inline sigset_t handle_alarm(void (*handler)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigaction(SIGALRM, &sa, NULL);
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    return alrm;
}

#ifdef ALARM_JUMPS
static sigjmp_buf back;
static volatile sig_atomic_t armed;

static void jump_back(int sig) {
    (void)sig;
    if (armed)
        siglongjmp(back, 1);
}

/* What the loop counted. */
struct jumps {
    unsigned long jumps, iterations;
};

/* The timeout loop: until 3000 jumps or 3 seconds, map one page of fd
 * (the windows of the file's first 64 pages in turn), touch(p, off) it,
 * unmap it and tell unmapped(p), while SIGALRM fires every usec
 * microseconds and jumps back to the top. Every window is unmapped when
 * it returns. */
static struct jumps jump_loop(int fd, size_t pg, long usec, void (*touch)(const char *, size_t),
                              void (*unmapped)(char *)) {
    sigset_t alrm = handle_alarm(jump_back, 0);
    /* Volatile: they change between sigsetjmp and siglongjmp. */
    volatile unsigned long jumps = 0, iterations = 0;
    volatile size_t k = 0;
    char *volatile cur = NULL; /* mapped, its munmap not known to be done */
    time_t until = time(NULL) + 3;

    timer(usec);
    if (sigsetjmp(back, 1))
        jumps++;
    armed = 1;
    while (jumps < 3000 && time(NULL) < until) {
        if (cur) {
            /* Interrupted last time: unmap again (munmap of a range that is
             * already unmapped succeeds). */
            munmap(cur, pg);
            cur = NULL;
        }
        /* No jump out of mmap: a mapping made but never returned would be
         * lost to the program, with or without munmapq, and make what the
         * programs check depend on timing. */
        sigprocmask(SIG_BLOCK, &alrm, NULL);
        size_t off = (k++ % 64) * pg;
        char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
        if (p != MAP_FAILED)
            cur = p;
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        if (p == MAP_FAILED)
            continue;
        touch(p, off);
        munmap(p, pg);
        unmapped(p);
        cur = NULL;
        iterations++;
    }
    armed = 0;
    timer(0);
    if (cur)
        munmap(cur, pg);
    return (struct jumps){jumps, iterations};
}
#endif
#endif
