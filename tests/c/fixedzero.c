/* fixedzero DIR MODE: mmap(0, X, MAP_FIXED | MAP_ANONYMOUS) over a file
 * window the library tracks: the window's range is the program's
 * anonymous memory from then on, so neither a later mmap of that window
 * nor a munmap of that range may meet the old window.
 *
 * Every gap of the address space above X is filled with a PROT_NONE
 * reservation, so that the kernel places a 64 KiB window of DIR/f (all
 * 'x') below X. Then, by MODE:
 *   queued      the window is unmapped (queued), then [0, X) is mapped;
 *   live        another window is mapped and unmapped (something queued),
 *               [0, X) is mapped, and the old window's range unmapped;
 *   live-plain  as live with nothing queued.
 * 'A' is written over the old window's range, one reservation is given
 * back, and the window is mapped again: it reads 'x', as a fresh mapping
 * of the file. Prints a SKIPPED line where the program may not map at
 * address 0 (CAP_SYS_RAWIO, vm.mmap_min_addr) or on another architecture
 * than x86_64 (the address space's top). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __x86_64__
#define F (64ul << 10)
#define TOP 0x7ffffffff000ul

static char maps[1 << 17];
static unsigned long lo[4096], hi[4096];

/* The lowest address mapped now. */
static unsigned long lowest_mapped(void) {
    int m = open("/proc/self/maps", O_RDONLY);
    ssize_t got = 0, r;
    while (m >= 0 && (r = read(m, maps + got, sizeof maps - 1 - got)) > 0)
        got += r;
    close(m);
    maps[got] = 0;
    unsigned long a = TOP;
    sscanf(maps, "%lx-", &a);
    return a;
}

/* Reserves every gap above `x`; answers the largest reservation's index. */
static int reserve_above(unsigned long x, int *n) {
    lowest_mapped();
    unsigned long prev = x;
    int ng = 0;
    for (char *l = maps; *l && ng < 4095;) {
        unsigned long a, b;
        if (sscanf(l, "%lx-%lx", &a, &b) == 2 && b > x && a < TOP) {
            if (a > prev) {
                lo[ng] = prev;
                hi[ng++] = a;
            }
            if (b > prev)
                prev = b;
        }
        char *nl = strchr(l, '\n');
        if (!nl)
            break;
        l = nl + 1;
    }
    if (TOP > prev) {
        lo[ng] = prev;
        hi[ng++] = TOP;
    }
    int biggest = 0;
    for (int i = 0; i < ng; i++) {
        void *p = mmap((void *)lo[i], hi[i] - lo[i], PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            lo[i] = hi[i] = 0;
        if (hi[i] - lo[i] > hi[biggest] - lo[biggest])
            biggest = i;
    }
    *n = ng;
    return biggest;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    const char *mode = argv[2];
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[2 * F];
    memset(buf, 'x', sizeof buf);
    if (w < 0 || write(w, buf, sizeof buf) != (ssize_t)sizeof buf || close(w) != 0)
        return 3;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 3;
    /* Below everything mapped (the program itself, were it not PIE). */
    unsigned long x = lowest_mapped() & ~((1ul << 20) - 1);
    if (x > (256ul << 20))
        x = 256ul << 20;
    void *zero = mmap(NULL, 4096, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (x < (4ul << 20) || zero == MAP_FAILED) {
        printf("SKIPPED: no mapping at address 0 here (%s)\n", strerror(errno));
        return 0;
    }
    munmap(zero, 4096);
    int n;
    int biggest = reserve_above(x, &n);
    char *win = mmap(NULL, F, PROT_READ, MAP_PRIVATE, fd, 0);
    if (win == MAP_FAILED || (unsigned long)win >= x) {
        printf("SKIPPED: the window was not placed below %#lx\n", x);
        return 0;
    }
    if (strcmp(mode, "queued") == 0) {
        munmap(win, F);
    } else if (strcmp(mode, "live") == 0) {
        char *other = mmap(NULL, F, PROT_READ, MAP_PRIVATE, fd, F);
        if (other == MAP_FAILED)
            return 4;
        munmap(other, F);
    } else if (strcmp(mode, "live-plain") != 0) {
        return 2;
    }
    char *z = mmap(NULL, x, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("mmap(0, X, MAP_FIXED): %s\n", z == MAP_FAILED ? strerror(errno) : "ok");
    if (z == MAP_FAILED)
        return 5;
    memset(win, 'A', F);
    if (strcmp(mode, "queued") != 0)
        printf("munmap of the old window's range: %d\n", munmap(win, F));
    munmap((void *)lo[biggest], hi[biggest] - lo[biggest]);
    char *again = mmap(NULL, F, PROT_READ, MAP_PRIVATE, fd, 0);
    if (again == MAP_FAILED)
        return 6;
    printf("the window mapped again reads '%c'\n", again[0]);
    munmap(again, F);
    for (int i = 0; i < n; i++)
        if (i != biggest && hi[i] > lo[i])
            munmap((void *)lo[i], hi[i] - lo[i]);
    return close(fd);
}
#else
int main(void) {
    printf("SKIPPED: the address space's top is x86_64's\n");
    return 0;
}
#endif
