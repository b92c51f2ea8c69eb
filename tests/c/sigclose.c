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
    int ask[2], answer[2];
    if (pipe(ask) != 0 || pipe(answer) != 0)
        return 3;
    pid_t other = fork();
    if (other == 0) {
        char c;
        close(ask[1]);
        while (read(ask[0], &c, 1) == 1) {
            int f = open(path, O_RDONLY);
            char r = flock(f, LOCK_EX | LOCK_NB) == 0 ? 'g' : 'r';
            close(f);
            if (write(answer[1], &r, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
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
        char c = 'q', a;
        if (write(ask[1], &c, 1) != 1 || read(answer[0], &a, 1) != 1)
            return 5;
        refused += a == 'r';
        if (a == 'r') {
            /* Let the next round's lock through: what the close left is
             * released by the next call that takes munmapq's table. */
            void *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            munmap(p, WINDOW);
        }
    }
    printf("rounds the lock was refused right after the close: %d\n", refused);
    close(ask[1]);
    waitpid(other, NULL, 0);
    return 0;
}
