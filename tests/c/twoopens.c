/* Two opens of one file: a mapping holds the open file description it was
 * made through, so a queued mapping made through one must not be handed
 * to a mmap through the other (tests/last_close.rs).
 *
 *   twoopens DIR flock|inotify KIB
 *       DIR/file opened as A; a window of KIB KiB mapped, read and unmapped
 *       through A 200 times (with munmapq: queued, then reused), mapped and
 *       unmapped once more. The file opened again as B, the window mapped
 *       through B as Q. Then:
 *       flock:   A locked (flock LOCK_EX) and closed: its last close, as
 *                nothing maps A any more; a third open's non-blocking
 *                flock must be granted. Prints "lock granted".
 *       inotify: A closed, then Q unmapped and B closed; prints how many
 *                IN_CLOSE_NOWRITE events came after each: 1, then 2.
 *
 *   twoopens DIR failed-dup2 KIB
 *       The same window cycled through A, then mapped through A as P and
 *       left mapped; A locked (flock LOCK_SH) through a dup and every
 *       descriptor of it closed: A lives in P alone. The file opened again
 *       (as A's number), the window mapped and unmapped through it, and a
 *       dup2 from a closed descriptor onto it fails. P unmapped: A's last
 *       close, so a third open's non-blocking exclusive flock must be
 *       granted. Prints "lock granted". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <unistd.h>

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

static char *map(int fd, size_t len) {
    char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        die("mmap");
    (void)*(volatile char *)p;
    return p;
}

/* The IN_CLOSE_NOWRITE events waiting on `in` (none after 100 ms). */
static int close_events(int in) {
    int n = 0;
    struct pollfd pfd = {in, POLLIN, 0};
    while (poll(&pfd, 1, 100) == 1) {
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t got = read(in, buf, sizeof buf);
        if (got <= 0)
            die("read inotify");
        for (char *e = buf; e < buf + got;) {
            const struct inotify_event *ev = (const struct inotify_event *)e;
            n += (ev->mask & IN_CLOSE_NOWRITE) != 0;
            e += sizeof *ev + ev->len;
        }
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    size_t len = (size_t)atoi(argv[3]) * 1024;
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0 || ftruncate(f, (off_t)(2 * len)) != 0)
        die("file");
    close(f);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (in < 0 || inotify_add_watch(in, path, IN_CLOSE_NOWRITE) < 0)
        die("inotify");
    int a = open(path, O_RDONLY);
    if (a < 0)
        die("open");
    for (int i = 0; i < 201; i++)
        munmap(map(a, len), len);
    if (strcmp(argv[2], "failed-dup2") == 0) {
        char *p = map(a, len);
        int m = dup(a);
        close(a);
        if (m < 0 || flock(m, LOCK_SH) != 0)
            die("flock");
        close(m);
        int n = open(path, O_RDONLY);
        if (n != a)
            die("reopened elsewhere");
        munmap(map(n, len), len);
        if (dup2(999, n) != -1)
            die("dup2 from a closed descriptor");
        munmap(p, len);
        int c = open(path, O_RDONLY);
        printf("%s\n", flock(c, LOCK_EX | LOCK_NB) == 0 ? "lock granted" : "lock held");
        return 0;
    }
    int b = open(path, O_RDONLY);
    if (b < 0)
        die("open");
    char *q = map(b, len);
    if (strcmp(argv[2], "flock") == 0) {
        if (flock(a, LOCK_EX) != 0)
            die("flock");
        close(a);
        int c = open(path, O_RDONLY);
        if (flock(c, LOCK_EX | LOCK_NB) == 0)
            printf("lock granted\n");
        else
            printf("lock held: %s\n", strerror(errno));
        close(c);
    } else {
        close(a);
        int first = close_events(in);
        munmap(q, len);
        q = NULL;
        close(b);
        printf("%d, then %d close events\n", first, first + close_events(in));
    }
    if (q)
        munmap(q, len);
    return 0;
}
