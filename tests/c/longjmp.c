/* A SIGALRM timeout loop built on sigsetjmp/siglongjmp (issue 13, point 3):
 * the handler jumps back to the loop from wherever the signal landed,
 * often inside munmap. Then the program checks that what it freed is
 * freed. Prints only what is the same on every run; exit 0.
 *
 *   longjmp FILE   (FILE: a data file of at least 64 pages, mq-probe mkfile) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf back;
/* Every window whose munmap returned. */
static char *freed_list[1 << 16];
static volatile size_t freed_n;
static volatile sig_atomic_t armed;

static void on_alarm(int sig) {
    (void)sig;
    if (armed)
        siglongjmp(back, 1);
}

static unsigned char pattern(size_t pos) {
    return (unsigned char)((pos * 7) ^ ((pos >> 12) * 131));
}

static void timer(long usec) {
    struct itimerval it = {{0, usec}, {0, usec}};
    setitimer(ITIMER_REAL, &it, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 2;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);

    /* Volatile: they change between sigsetjmp and siglongjmp. */
    volatile unsigned long jumps = 0, iterations = 0, wrong = 0;
    volatile size_t k = 0;
    char *volatile cur = NULL;  /* mapped, its munmap not known to be done */
    char *volatile freed = NULL; /* the last window whose munmap returned */
    time_t until = time(NULL) + 3;

    timer(43);
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
         * lost to the program, with or without munmapq, and make the checks
         * below depend on timing. */
        sigprocmask(SIG_BLOCK, &alrm, NULL);
        size_t off = (k++ % 64) * pg;
        char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
        if (p != MAP_FAILED)
            cur = p;
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        if (p == MAP_FAILED)
            continue;
        if ((unsigned char)p[5] != pattern(off + 5))
            wrong++;
        munmap(p, pg);
        freed = p;
        if (freed_n < sizeof freed_list / sizeof *freed_list)
            freed_list[freed_n++] = p;
        cur = NULL;
        iterations++;
    }
    armed = 0;
    timer(0);
    if (cur)
        munmap(cur, pg);

    /* Every window is unmapped now, as far as the program knows. */
    unsigned long still = 0;
    unsigned char vec[1];
    unsigned long distinct = 0;
    for (size_t i = 0; i < freed_n; i++) {
        int mapped = mincore(freed_list[i], pg, vec) == 0;
        still += mapped;
        if (mapped) {
            size_t j = 0;
            while (j < i && freed_list[j] != freed_list[i])
                j++;
            distinct += j == i;
        }
    }
    /* Not compared: a recovered queue leaves the mappings whose unmapping
     * the jump interrupted mapped (README, Guarantees). */
    fprintf(stderr, "freed windows still mapped: %lu (%lu addresses)\n", still, distinct);
    still = 0;
    for (size_t i = 0; i < 64; i++) {
        char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)(i * pg));
        if (p == MAP_FAILED || (unsigned char)p[9] != pattern(i * pg + 9))
            wrong++;
        munmap(p, pg);
        still += mincore(p, pg, vec) == 0;
    }
    printf("jumps: %s\n", jumps >= 100 ? "many" : "few");
    printf("wrong data: %lu\n", wrong);
    printf("windows mapped after the loop, still mapped: %lu\n", still);
    if (freed) {
        printf("mprotect freed: %s\n", mprotect(freed, pg, PROT_READ) ? "error" : "ok");
        void *q = mmap(freed, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        printf("map noreplace onto freed: %s\n", q == (void *)freed ? "ok" : "error");
    }
    fprintf(stderr, "jumps=%lu iterations=%lu\n", jumps, iterations);
    return 0;
}
