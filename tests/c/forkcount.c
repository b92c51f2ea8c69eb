/* forkcount DIR HOW: 40 windows of DIR/f mapped and unmapped, then a child
 * made without the atfork handlers (HOW: "_Fork", or "syscall" for a fork
 * through syscall()) maps and unmaps 10 more and exits (its exit handlers
 * run); the parent waits for it. Prints the child's status. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>

#include "xfile.h"

#define WINDOW (64 << 10)

extern pid_t _Fork(void);

static void cycle(int fd, int n) {
    for (int i = 0; i < n; i++) {
        void *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (i % 4) * WINDOW);
        if (p != MAP_FAILED)
            munmap(p, WINDOW);
    }
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    if (x_file(path, argv[1], 4 * WINDOW) != 0)
        return 3;
    int fd = open(path, O_RDONLY);
    cycle(fd, 40);
    fflush(stdout);
#ifdef SYS_fork
    pid_t c = strcmp(argv[2], "_Fork") == 0 ? _Fork() : syscall(SYS_fork);
#else
    pid_t c = strcmp(argv[2], "_Fork") == 0 ? _Fork() : syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
    if (c == 0) {
        cycle(fd, 10);
        exit(0);
    }
    int status;
    if (c < 0 || waitpid(c, &status, 0) != c)
        return 4;
    printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
