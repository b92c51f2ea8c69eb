/* A signal handler claims, with
 * MAP_FIXED_NOREPLACE, an address the program has unmapped, while the
 * thread it interrupted is inside munmap (whose hook may be holding
 * munmapq's queue, unmapping or queueing). The program keeps, with
 * SIGALRM blocked around each mmap, the set of one-page windows whose
 * munmap returned and that nothing has mapped since: each is free, and
 * without munmapq the handler's claim there always succeeds (then it gives
 * the page back with munmap). The timer fires every 23 us for about two
 * seconds; the program prints how many claims failed (0 without munmapq).
 *
 *   sigclaim FILE   (FILE: a data file of at least 64 pages, mq-probe mkfile) */
#define _GNU_SOURCE
#include "alarm.h"
#include <errno.h>
#include <stdio.h>

#define WINDOWS 64
static size_t pg;
/* freed[w]: the address window w had when its munmap returned, while
 * nothing has been mapped there since; else NULL. */
static char *volatile freed[WINDOWS];
static volatile unsigned long claims, failed, turn;
static volatile int last_errno;

static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    for (int i = 0; i < WINDOWS; i++) {
        char *a = freed[(turn + i) % WINDOWS];
        if (!a)
            continue;
        turn++;
        char *q = mmap(a, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (q == a) {
            claims++;
            munmap(q, pg);
        } else {
            failed++;
            last_errno = q == MAP_FAILED ? errno : 0;
            if (q != MAP_FAILED)
                munmap(q, pg);
        }
        break;
    }
    errno = saved;
}

int main(int argc, char **argv) {
    int fd = open_data(argc, argv, O_RDONLY | O_CLOEXEC);
    pg = (size_t)sysconf(_SC_PAGESIZE);
    sigset_t alrm = handle_alarm(on_alarm, SA_RESTART);

    unsigned long iterations = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    timer(23);
    for (size_t k = 0;; k++) {
        if ((k & 63) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= 2)
                break;
        }
        size_t w = k % WINDOWS;
        sigprocmask(SIG_BLOCK, &alrm, NULL);
        char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)(w * pg));
        if (p == MAP_FAILED) {
            sigprocmask(SIG_UNBLOCK, &alrm, NULL);
            printf("mmap: %s\n", strerror(errno));
            return 1;
        }
        /* Mapped again: no longer free, whichever window had it. */
        for (int i = 0; i < WINDOWS; i++)
            if (freed[i] == p)
                freed[i] = NULL;
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        (void)*(volatile char *)p;
        munmap(p, pg); /* the handler may run in here */
        sigprocmask(SIG_BLOCK, &alrm, NULL);
        freed[w] = p;
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        iterations++;
    }
    timer(0);
    printf("handler claimed freed windows: %s\n", claims + failed > 0 ? "yes" : "no");
    printf("claims that failed: %lu\n", failed);
    fprintf(stderr, "claims %lu, failed %lu (last errno %d), iterations %lu\n", claims, failed,
            last_errno, iterations);
    return 0;
}
