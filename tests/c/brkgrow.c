/* brkgrow DIR: the heap grows into room the program unmapped right above
 * it. The program maps and unmaps a window of DIR/f three times where the
 * kernel puts it (far above the heap: the queue takes it), then reserves
 * the address space above the heap (PROT_NONE, as a runtime may) but for
 * a gap just above the break, where the kernel then places another
 * window; it maps and unmaps that one three times, and grows the heap
 * (sbrk) to just below the reservation: granted, the room is free. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xfile.h"

#define WINDOW (64 << 10)
#define GAP (2 << 20)

static char line[512];

/* The start of the lowest mapping at or above `above`. */
static uintptr_t next_mapping(uintptr_t above) {
    FILE *f = fopen("/proc/self/maps", "r");
    uintptr_t best = UINTPTR_MAX;
    if (!f)
        return best;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo;
        if (sscanf(line, "%lx-", &lo) == 1 && lo >= above && lo < best)
            best = lo;
    }
    fclose(f);
    return best;
}

static char *map_unmap(int fd, off_t off, int times) {
    char *p = MAP_FAILED;
    for (int i = 0; i < times; i++) {
        p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, off);
        if (p == MAP_FAILED)
            return p;
        (void)*(volatile char *)p;
        munmap(p, WINDOW);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    char path[4096];
    if (x_file(path, argv[1], 8 * WINDOW) != 0)
        return 3;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || map_unmap(fd, 2 * WINDOW, 3) == MAP_FAILED)
        return 3;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = ((uintptr_t)sbrk(0) + page - 1) & ~(page - 1);
    uintptr_t hint = base + GAP + WINDOW;
    uintptr_t next = next_mapping(base + 1);
    if (next == UINTPTR_MAX || next <= hint)
        return 3;
    /* Reserved from the gap's end up to the next mapping, then every room
     * above the gap the kernel still offers. */
    if (mmap((void *)hint, next - hint, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0) != (void *)hint)
        return 3;
    for (size_t size = (size_t)1 << 44; size >= WINDOW; size >>= 1)
        for (;;) {
            void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED)
                break;
            if ((uintptr_t)p < hint) {
                munmap(p, size);
                break;
            }
        }
    char *w = map_unmap(fd, 4 * WINDOW, 3);
    if (w == MAP_FAILED)
        return 4;
    printf("the window placed in the gap above the heap: %s\n",
           (uintptr_t)w >= base && (uintptr_t)w < hint ? "yes" : "no");
    intptr_t grow = (intptr_t)(hint - 2 * page) - (intptr_t)sbrk(0);
    void *old = sbrk(grow);
    printf("the heap grown to the reservation: %s\n", old == (void *)-1 ? strerror(errno) : "ok");
    return 0;
}
