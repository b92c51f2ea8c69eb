/* madvsplit DIR HOW: maps, reads and unmaps 64 windows of DIR/f, then
 * splits an anonymous region with advice on every other page until the
 * process's mappings reach a few short of vm.max_map_count. HOW gives the
 * advice: "madvise" (MADV_DONTFORK), "posix" (posix_madvise with
 * POSIX_MADV_RANDOM) or "syscall" (MADV_DONTFORK through syscall). The
 * kernel answers a split it has no room for with EAGAIN (not ENOMEM);
 * the program unmapped the windows, so each split has room. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xfile.h"

#define WINDOW (64 << 10)
#define WINDOWS 64

static long count_maps(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f)
        return -1;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static int advise(const char *how, char *p, size_t len) {
    if (strcmp(how, "posix") == 0)
        return posix_madvise(p, len, POSIX_MADV_RANDOM);
    long r = strcmp(how, "syscall") == 0 ? syscall(SYS_madvise, p, len, MADV_DONTFORK)
                                         : madvise(p, len, MADV_DONTFORK);
    return r == 0 ? 0 : errno;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    long limit = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (!f || fscanf(f, "%ld", &limit) != 1 || x_file(path, argv[1], (WINDOWS + 1) * WINDOW) != 0)
        return 3;
    fclose(f);
    int fd = open(path, O_RDONLY);
    /* Counted before the windows: once unmapped, they take no room. */
    long room = limit - count_maps() - 8;
    if (fd < 0 || room <= 0)
        return 3;
    for (int i = 0; i < WINDOWS; i++) {
        char *w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (off_t)(i + 1) * WINDOW);
        if (w == MAP_FAILED)
            return 4;
        (void)*(volatile char *)w;
        munmap(w, WINDOW);
    }
    long page = sysconf(_SC_PAGESIZE);
    long splits = room / 2 - 4;
    char *a = mmap(NULL, (size_t)(room + 8) * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED)
        return 3;
    for (long i = 0; i < splits; i++) {
        int e = advise(argv[2], a + (2 * i + 1) * page, page);
        if (e != 0) {
            printf("splits: failed after %ld of %ld: %s\n", i, splits, strerror(e));
            return 0;
        }
    }
    printf("splits: all\n");
    return 0;
}
