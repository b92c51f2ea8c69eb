/* threadclose DIR ROUNDS: the main thread holds an flock on DIR/f, maps
 * and unmaps one window through its descriptor and closes it, while
 * another thread maps and unmaps windows of DIR/g in bursts, then works
 * without calling anything. Right after the close, with no call in
 * between, another process asks for the lock: granted, as at the last
 * close of a file, whichever thread was in a hook when the close came.
 * Prints how many rounds it was refused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asklock.h"
#include "xfile.h"

#define WINDOW (64 << 10)
#define WINDOWS 8

static char g_path[4096];
static volatile int done;

static void *other_windows(void *arg) {
    (void)arg;
    int fd = open(g_path, O_RDONLY);
    if (fd < 0)
        return NULL;
    volatile unsigned spin = 0;
    for (unsigned i = 0; !done; i++) {
        void *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (i % WINDOWS) * WINDOW);
        if (p != MAP_FAILED)
            munmap(p, WINDOW);
        /* Work that calls nothing: a close noted while the table was
         * held here is not caught up by this thread's next call. */
        for (unsigned k = 0; k < (i * 2654435761u) % 4000; k++)
            spin++;
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    int rounds = atoi(argv[2]);
    char path[4096];
    if (x_file(path, argv[1], WINDOWS * WINDOW) != 0)
        return 3;
    if (x_file(g_path, argv[1], WINDOWS * WINDOW) != 0)
        return 3;
    /* x_file names its file DIR/f: g is f renamed. */
    snprintf(g_path, sizeof g_path, "%s/g", argv[1]);
    if (rename(path, g_path) != 0 || x_file(path, argv[1], WINDOWS * WINDOW) != 0)
        return 3;
    struct asker other;
    if (asker_start(&other, path) != 0)
        return 3;
    pthread_t t;
    if (pthread_create(&t, NULL, other_windows, NULL) != 0)
        return 3;
    int refused = 0;
    for (int r = 0; r < rounds; r++) {
        int fd = open(path, O_RDONLY);
        if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) != 0)
            return 4;
        void *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (r % WINDOWS) * WINDOW);
        if (p != MAP_FAILED)
            munmap(p, WINDOW);
        close(fd);
        int granted = asker_granted(&other);
        if (granted < 0)
            return 5;
        if (!granted) {
            refused++;
            /* Let the next round's lock through: what the close left is
             * released by the next call that takes munmapq's table. */
            void *q = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            munmap(q, WINDOW);
        }
    }
    done = 1;
    pthread_join(t, NULL);
    printf("rounds the lock was refused right after the close: %d\n", refused);
    asker_stop(&other);
    return 0;
}
