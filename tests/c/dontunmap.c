/* dontunmap DIR VIA: a 4 MiB window of DIR/f is mapped and unmapped, then
 * 2 MiB of anonymous memory are moved by mremap with MREMAP_MAYMOVE |
 * MREMAP_DONTUNMAP, the window's address given as the new address: a
 * hint, which the kernel takes where the range is free, as it is once the
 * program unmapped the window. VIA: "libc" (glibc's mremap) or "syscall"
 * (syscall(SYS_mremap)). Prints "mremap: ok, at the hint: yes, reads 'Z'",
 * or a SKIPPED line where the kernel has no MREMAP_DONTUNMAP for such a
 * mapping (before Linux 5.13). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#define MB (1ul << 20)

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 4 * MB) != 0 || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    char *w = mmap(NULL, 4 * MB, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd < 0 || w == MAP_FAILED || munmap(w, 4 * MB) != 0)
        return 4;
    char *a = mmap(NULL, 2 * MB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return 5;
    a[0] = 'Z';
    int flags = MREMAP_MAYMOVE | MREMAP_DONTUNMAP;
    char *n = strcmp(argv[2], "syscall") == 0
                  ? (char *)syscall(SYS_mremap, a, 2 * MB, 2 * MB, flags, w)
                  : mremap(a, 2 * MB, 2 * MB, flags, w);
    if (n == MAP_FAILED && errno == EINVAL) {
        printf("SKIPPED: no MREMAP_DONTUNMAP here\n");
        return 0;
    }
    printf("mremap: %s, at the hint: %s, reads '%c'\n", n == MAP_FAILED ? strerror(errno) : "ok",
           n == w ? "yes" : "no", n == MAP_FAILED ? '-' : n[0]);
    return close(fd);
}
