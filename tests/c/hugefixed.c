/* hugefixed DIR MODE: a huge page mapping (MAP_HUGETLB, 2 MiB pages,
 * MAP_NORESERVE) of one small page at a 2 MiB boundary whose first small
 * page is free, while a window of DIR/f (all 'x') the program unmapped
 * lies further inside that huge page. The kernel takes the whole huge
 * page. MODE: "fixed" (MAP_FIXED), "noreplace" (MAP_FIXED_NOREPLACE) or
 * "hint" (the boundary as a hint). Then the window is mapped again and
 * read by a child: 'x', as a fresh mapping. Prints the huge page
 * mapping's result, whether it is at the boundary, and what the child
 * read. Prints a SKIPPED line where MAP_HUGETLB is refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xfile.h"

#define MB (1ul << 20)
#define HUGE (2 * MB)
#define WINDOW (3 * MB / 2)
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    const char *mode = argv[2];
    int huge = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE | MAP_HUGE_2MB;
    void *probe = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, huge, -1, 0);
    if (probe == MAP_FAILED) {
        printf("SKIPPED: no huge page mappings here (%s)\n", strerror(errno));
        return 0;
    }
    munmap(probe, HUGE);
    char path[4096];
    if (x_file(path, argv[1], WINDOW) != 0)
        return 3;
    int fd = open(path, O_RDONLY);
    /* A free, 2 MiB-aligned 4 MiB gap, the window placed at its top
     * (the kernel places top-down): past the first small page of the
     * huge page it falls in. Other gaps the window lands in first stay
     * filled. */
    char *gap = mmap(NULL, 8 * MB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fd < 0 || gap == MAP_FAILED)
        return 3;
    unsigned long lo = ((unsigned long)gap + HUGE - 1) & ~(HUGE - 1);
    munmap((void *)lo, 4 * MB);
    char *w, *fill[64];
    int filled = 0;
    for (;;) {
        w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
        if (w == MAP_FAILED || filled == 64)
            return 4;
        if ((unsigned long)w >= lo && (unsigned long)w + WINDOW <= lo + 4 * MB)
            break;
        fill[filled++] = w;
    }
    unsigned long boundary = (unsigned long)w & ~(HUGE - 1);
    if ((unsigned long)w < boundary + 4096 || (unsigned long)w + WINDOW > boundary + HUGE)
        return 5;
    munmap(w, WINDOW);
    int how = strcmp(mode, "fixed") == 0       ? MAP_FIXED
              : strcmp(mode, "noreplace") == 0 ? MAP_FIXED_NOREPLACE
                                               : 0;
    char *h = mmap((void *)boundary, 4096, PROT_READ | PROT_WRITE, huge | how, -1, 0);
    printf("huge page mapping: %s, at the boundary: %s\n", h == MAP_FAILED ? strerror(errno) : "ok",
           h == (char *)boundary ? "yes" : "no");
    char *again = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    if (again == MAP_FAILED)
        return 6;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("the window mapped again reads '%c'\n", again[0]);
        fflush(stdout);
        _exit(0);
    }
    int status;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 7;
    if (WIFSIGNALED(status))
        printf("the child reading the window again: %s\n", strsignal(WTERMSIG(status)));
    munmap(again, WINDOW);
    for (int i = 0; i < filled; i++)
        munmap(fill[i], WINDOW);
    return close(fd);
}
