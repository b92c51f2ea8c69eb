/* A descriptor number re-pointed with dup2 while another thread maps
 * through it (tests/fd_race.rs).
 *
 *   fdrace DIR bytes MS
 *       DIR/a and DIR/b: 64 windows of 16 KiB each, every byte 'A' in a,
 *       'B' in b. A switcher thread dup2s a's and b's read-only
 *       descriptors onto number N in turn; two mapper threads map, read and
 *       unmap windows through N; the main thread maps and unmaps windows
 *       through the stable descriptors. For MS milliseconds. Then, with the
 *       race over, every window is mapped through each stable descriptor
 *       100 times: a mapping of a must show 'A', one of b 'B'. Prints
 *       "wrong: COUNT" (0 without munmapq: a mapping shows the file its
 *       descriptor named when mmap ran).
 *   fdrace DIR writeonly MS
 *       The same with b open write-only on the switching side: N names a's
 *       read-only description or b's write-only one. b's windows are
 *       mapped and unmapped through a separate read-only descriptor
 *       meanwhile. Every mmap through N that succeeds and shows 'B' is
 *       counted: "b through a write-only descriptor: COUNT" (0 without
 *       munmapq: the kernel refuses to map a write-only descriptor). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WINDOW (16 * 1024)
#define WINDOWS 64

static int fd_a, fd_b, fd_b_read, num;
static atomic_int stop;
static atomic_long b_through_write_only;

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

static void make(const char *dir, const char *name, char fill) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die("create");
    static char buf[WINDOW];
    memset(buf, fill, sizeof buf);
    for (int i = 0; i < WINDOWS; i++)
        if (write(fd, buf, sizeof buf) != sizeof buf)
            die("write");
    close(fd);
}

static int open_in(const char *dir, const char *name, int flags) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, flags);
    if (fd < 0)
        die("open");
    return fd;
}

/* Maps window w through fd: its first byte, 0 when refused. With
 * `linger`, lets the other threads run before the munmap. */
static int map_window(int fd, int w, int linger) {
    char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (off_t)w * WINDOW);
    if (p == MAP_FAILED)
        return 0;
    int c = p[0];
    if (linger)
        sched_yield();
    munmap(p, WINDOW);
    return c;
}

static int first_byte(int fd, int w) {
    return map_window(fd, w, 0);
}

static void *switcher(void *arg) {
    (void)arg;
    for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++)
        if (dup2(i & 1 ? fd_b : fd_a, num) < 0)
            die("dup2");
    return NULL;
}

static void *mapper(void *arg) {
    int write_only = *(int *)arg;
    for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++)
        if (map_window(num, i % WINDOWS, 1) == 'B' && write_only)
            atomic_fetch_add(&b_through_write_only, 1);
    return NULL;
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    const char *dir = argv[1];
    int write_only = !strcmp(argv[2], "writeonly");
    long ms = atol(argv[3]);
    make(dir, "a", 'A');
    make(dir, "b", 'B');
    fd_a = open_in(dir, "a", O_RDONLY);
    fd_b = open_in(dir, "b", write_only ? O_WRONLY : O_RDONLY);
    fd_b_read = open_in(dir, "b", O_RDONLY);
    num = dup(fd_a);
    if (num < 0)
        die("dup");
    pthread_t s, m, m2;
    pthread_create(&s, NULL, switcher, NULL);
    pthread_create(&m, NULL, mapper, &write_only);
    pthread_create(&m2, NULL, mapper, &write_only);
    for (long end = now_ms() + ms, i = 0; now_ms() < end; i++) {
        first_byte(fd_a, i % 8);
        first_byte(fd_b_read, i % 8);
    }
    atomic_store(&stop, 1);
    pthread_join(s, NULL);
    pthread_join(m, NULL);
    pthread_join(m2, NULL);
    if (write_only) {
        printf("b through a write-only descriptor: %ld\n",
               atomic_load(&b_through_write_only));
        return 0;
    }
    long wrong = 0;
    for (int round = 0; round < 100; round++)
        for (int w = 0; w < WINDOWS; w++) {
            wrong += first_byte(fd_a, w) != 'A';
            wrong += first_byte(fd_b_read, w) != 'B';
        }
    printf("wrong: %ld\n", wrong);
    return 0;
}
