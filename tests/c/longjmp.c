/* A SIGALRM timeout loop built on sigsetjmp/siglongjmp:
 * the handler jumps back to the loop from wherever the signal landed,
 * often inside munmap. Then the program checks that what it freed is
 * freed. Prints only what is the same on every run; exit 0.
 *
 *   longjmp FILE [USEC]   (FILE: a data file of at least 64 pages, mq-probe
 *   mkfile; USEC: the alarm's period, 43 microseconds unless given) */
#define _GNU_SOURCE
#define ALARM_JUMPS
#include "alarm.h"
#include <stdio.h>

/* Every window whose munmap returned. */
static char *freed_list[1 << 16];
static volatile size_t freed_n;
/* The last window whose munmap returned. */
static char *volatile freed;
static volatile unsigned long wrong;

static unsigned char pattern(size_t pos) {
    return (unsigned char)((pos * 7) ^ ((pos >> 12) * 131));
}

static void touch(const char *p, size_t off) {
    if ((unsigned char)p[5] != pattern(off + 5))
        wrong++;
}

static void unmapped(char *p) {
    freed = p;
    if (freed_n < sizeof freed_list / sizeof *freed_list)
        freed_list[freed_n++] = p;
}

int main(int argc, char **argv) {
    int fd = open_data(argc, argv, O_RDONLY);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    long usec = argc > 2 ? atol(argv[2]) : 43;
    struct jumps n = jump_loop(fd, pg, usec, touch, unmapped);

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
    printf("jumps: %s\n", n.jumps >= 100 ? "many" : "few");
    printf("wrong data: %lu\n", wrong);
    printf("windows mapped after the loop, still mapped: %lu\n", still);
    if (freed) {
        printf("mprotect freed: %s\n", mprotect(freed, pg, PROT_READ) ? "error" : "ok");
        void *q = mmap(freed, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        printf("map noreplace onto freed: %s\n", q == (void *)freed ? "ok" : "error");
    }
    fprintf(stderr, "jumps=%lu iterations=%lu\n", n.jumps, n.iterations);
    return 0;
}
