/* sigclose DIR ROUNDS: a timer signal's handler closes the one descriptor
 * of DIR/f, on which the program holds an flock, while the program maps
 * and unmaps windows through it. Right after the loop sees the close
 * (its last munmap returned), with no call in between, another process
 * asks for the lock: granted, as at the last close of a file. Prints
 * how many rounds it was refused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asklock.h"
#include "xfile.h"

#define WINDOW (64 << 10)

static volatile int fd = -1, closed;

static void on_alarm(int sig) {
    (void)sig;
    if (!closed) {
        close(fd);
        closed = 1;
    }
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    int rounds = atoi(argv[2]);
    char path[4096];
    if (x_file(path, argv[1], 8 * WINDOW) != 0)
        return 3;
    struct asker other;
    if (asker_start(&other, path) != 0)
        return 3;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    int refused = 0;
    for (int r = 0; r < rounds; r++) {
        fd = open(path, O_RDONLY);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0)
            return 4;
        closed = 0;
        struct itimerval t = {{0, 0}, {0, 300 + (r * 7919) % 1500}};
        setitimer(ITIMER_REAL, &t, NULL);
        for (unsigned i = 0; !closed; i++) {
            void *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (i % 8) * WINDOW);
            if (p != MAP_FAILED)
                munmap(p, WINDOW);
        }
        int granted = asker_granted(&other);
        if (granted < 0)
            return 5;
        refused += !granted;
        if (!granted) {
            /* Let the next round's lock through: what the close left is
             * released by the next call that takes munmapq's table. */
            void *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            munmap(p, WINDOW);
        }
    }
    printf("rounds the lock was refused right after the close: %d\n", refused);
    asker_stop(&other);
    return 0;
}
