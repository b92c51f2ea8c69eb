/* What a program sees of the calls the library makes plainly (nothing
 * queued: the real call alone, errno left to it) and of the same calls
 * once a window is queued (errno kept around the engine's own calls):
 * each call's result and errno, errno set to 4242 before each.
 *
 *   plain DIR
 *       prints one line per call, first with nothing queued, then after a
 *       16 KiB window of DIR/file was unmapped with its descriptor open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WINDOW 16384

static void said(const char *phase, const char *what, long r) {
    printf("%s %s: %s, errno %d\n", phase, what, r == 0 ? "0" : r > 0 ? "ok" : "-1", errno);
}

static void calls(const char *phase, int fd) {
    errno = 4242;
    void *anon = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    said(phase, "anonymous mmap", anon == MAP_FAILED ? -1 : 1);
    errno = 4242;
    void *whole = mmap(NULL, 100, PROT_READ, MAP_PRIVATE, fd, 0);
    said(phase, "file mmap", whole == MAP_FAILED ? -1 : 1);
    errno = 4242;
    said(phase, "mmap of a bad descriptor",
         mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 3999, 0) == MAP_FAILED ? -1 : 1);
    errno = 4242;
    said(phase, "mmap of no length", mmap(NULL, 0, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED ? -1 : 1);
    errno = 4242;
    said(phase, "mmap at an unaligned offset",
         mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 100) == MAP_FAILED ? -1 : 1);
    errno = 4242;
    said(phase, "anonymous munmap", munmap(anon, 8192));
    errno = 4242;
    said(phase, "file munmap", munmap(whole, 100));
    errno = 4242;
    said(phase, "unaligned munmap", munmap((char *)anon + 1, 4096));
    errno = 4242;
    said(phase, "munmap of no length", munmap(anon, 0));
    int other = dup(fd);
    errno = 4242;
    said(phase, "close", close(other));
    errno = 4242;
    said(phase, "close again", close(other));
    errno = 4242;
    said(phase, "close of -1", close(-1));
    errno = 4242;
    said(phase, "close of a high number", close(5000));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: plain DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    char page[4096];
    memset(page, 'x', sizeof page);
    for (int i = 0; i < 8; i++)
        if (write(fd, page, sizeof page) != sizeof page) {
            perror("write");
            return 1;
        }
    close(fd);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    calls("nothing queued:", fd);
    /* A window unmapped with its descriptor open: the library queues it. */
    char *w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    if (w == MAP_FAILED || w[0] != 'x' || munmap(w, WINDOW) != 0) {
        perror("window");
        return 1;
    }
    calls("one queued:", fd);
    return 0;
}
