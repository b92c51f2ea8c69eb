/* manymaps DIR: 4,000 windows of DIR/f (each of its own length, so that
 * none is reused) are mapped and unmapped, then the program makes one
 * small anonymous mapping after another (every other one PROT_NONE, so
 * that none merges) until 4,400 are left under vm.max_map_count, then
 * starts 400 threads: their stacks are glibc's own mappings, which no
 * hook sees. Without munmapq the windows are gone and every thread
 * starts. Prints "threads created: 400 of 400 (ok)", or a SKIPPED line
 * where vm.max_map_count is too large to fill. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define THREADS 400

static pthread_barrier_t barrier;

static void *wait_at_barrier(void *arg) {
    (void)arg;
    pthread_barrier_wait(&barrier);
    return NULL;
}

/* Lines of /proc/self/maps: one per mapping. */
static long mappings(void) {
    static char buf[1 << 16];
    int fd = open("/proc/self/maps", O_RDONLY);
    long lines = 0;
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
    close(fd);
    return lines;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    char line[64] = {0};
    int m = open("/proc/sys/vm/max_map_count", O_RDONLY);
    long max = m >= 0 && read(m, line, sizeof line - 1) > 0 ? atol(line) : 0;
    close(m);
    if (max <= 0 || max > 1 << 20) {
        printf("SKIPPED: vm.max_map_count is %ld\n", max);
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 32 << 20) != 0 || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return 3;
    /* Counted before the windows: without munmapq they are gone after. */
    long own = max - mappings() - 4400;
    for (int i = 0; i < 4000; i++) {
        size_t len = (1 << 20) + (size_t)i * 4096;
        char *w = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (w == MAP_FAILED)
            return 4;
        munmap(w, len);
    }
    for (long i = 0; i < own; i++) {
        int prot = i & 1 ? PROT_READ : PROT_NONE;
        if (mmap(NULL, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
            printf("mapping %ld of %ld: %s\n", i, own, strerror(errno));
            return 0;
        }
    }
    pthread_barrier_init(&barrier, NULL, THREADS + 1);
    pthread_t threads[THREADS];
    int made = 0, err = 0;
    while (made < THREADS && (err = pthread_create(&threads[made], NULL, wait_at_barrier, NULL)) == 0)
        made++;
    printf("threads created: %d of %d (%s)\n", made, THREADS, err ? strerror(err) : "ok");
    if (made < THREADS) {
        fflush(stdout);
        _exit(0);
    }
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < made; i++)
        pthread_join(threads[i], NULL);
    return close(fd);
}
