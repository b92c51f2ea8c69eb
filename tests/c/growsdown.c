/* growsdown DIR MODE: a region that grows down (MAP_GROWSDOWN) above a
 * window of DIR/f (all 'x') the program unmapped. The kernel grows such a
 * region on a fault below it only where no accessible mapping lies
 * within its guard gap (1 MiB by default) below the new start, so the
 * region grows to 64 KiB above the window's range once the window is
 * unmapped. MODE: "before" (the region is mapped, then the window below
 * it) or "after" (the window is unmapped, then the region mapped above
 * it). A window mapped and unmapped first reaches the queue. Prints how
 * far the region grew. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xfile.h"

#define MB (1ul << 20)
#define WINDOW (3 * MB / 2)

static sigjmp_buf fault;

static void on_fault(int sig) {
    (void)sig;
    siglongjmp(fault, 1);
}

static char *window(int fd) {
    char *w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    return w == MAP_FAILED ? NULL : w;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    int before = strcmp(argv[2], "before") == 0;
    unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
    char path[4096];
    if (x_file(path, argv[1], WINDOW) != 0)
        return 3;
    int fd = open(path, O_RDONLY);
    char *first = fd < 0 ? NULL : window(fd);
    if (first == NULL || munmap(first, WINDOW) != 0)
        return 3;
    /* An 8 MiB gap with one page kept at its top, where the region goes:
     * the window lands in the gap (the kernel places top-down); the
     * windows that land elsewhere first stay mapped. */
    char *gap = mmap(NULL, 8 * MB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gap == MAP_FAILED || munmap(gap, 8 * MB - page) != 0)
        return 3;
    char *top = gap + 8 * MB - page;
    int grows = MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN | MAP_FIXED;
    if (before && mmap(top, page, PROT_READ | PROT_WRITE, grows, -1, 0) != top)
        return 4;
    /* Without the region yet, the window is kept 2 MiB below its place. */
    char *room = top - 2 * MB;
    if (!before && mmap(room, 2 * MB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != room)
        return 4;
    char *w = NULL;
    for (int filled = 0; filled < 64; filled++) {
        w = window(fd);
        if (w == NULL || (w >= gap && w + WINDOW <= top))
            break;
    }
    if (w == NULL || w < gap || munmap(w, WINDOW) != 0)
        return 5;
    if (!before && (munmap(room, 2 * MB) != 0 ||
                    mmap(top, page, PROT_READ | PROT_WRITE, grows, -1, 0) != top))
        return 4;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, NULL);
    char *until = w + WINDOW + 64 * 1024;
    volatile char *at = top;
    if (sigsetjmp(fault, 1) == 0) {
        while (at - page >= until) {
            at -= page;
            *at = 1;
        }
    }
    printf("the region grew %lu KiB down, to 64 KiB above the window's range: %s\n",
           (unsigned long)(top - at) / 1024, until < top && at - page < until ? "yes" : "no");
    return 0;
}
