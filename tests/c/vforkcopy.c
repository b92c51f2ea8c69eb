/* vforkcopy DIR HOW: a child that gets a copy of this memory with no
 * atfork handler told (HOW: "_Fork", "syscall" for syscall(SYS_fork) on
 * x86_64 or SYS_clone elsewhere, "clone" for clone() without CLONE_VM),
 * made right after a vfork child exited. The child unmaps a window the
 * parent mapped and makes the last close of the file, on which the
 * parent had an flock; then the parent asks for the lock again from a new
 * open: granted, as at the last close of a file. Prints the answer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xfile.h"

#define WINDOW (3 << 19)

extern pid_t _Fork(void);

static int fd, done[2];
static char *w;

static int child(void *arg) {
    (void)arg;
    munmap(w, WINDOW);
    close(fd);
    if (write(done[1], "x", 1) != 1)
        _exit(1);
    _exit(0);
}

static char stack[1 << 16];

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    if (x_file(path, argv[1], WINDOW) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    /* A window through the descriptor queued once: the queue is reached. */
    char *first = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd < 0 || first == MAP_FAILED || munmap(first, WINDOW) != 0 || flock(fd, LOCK_EX) != 0)
        return 3;
    w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    if (w == MAP_FAILED || pipe(done) != 0)
        return 3;
    pid_t v = vfork();
    if (v == 0)
        _exit(0);
    if (v < 0 || waitpid(v, NULL, 0) != v)
        return 4;
    pid_t c;
    if (strcmp(argv[2], "_Fork") == 0) {
        c = _Fork();
    } else if (strcmp(argv[2], "syscall") == 0) {
#ifdef SYS_fork
        c = syscall(SYS_fork);
#else
        c = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
    } else {
        c = clone(child, stack + sizeof stack, SIGCHLD, NULL);
    }
    if (c == 0)
        child(NULL);
    if (c < 0)
        return 5;
    munmap(w, WINDOW);
    close(fd);
    char b;
    if (read(done[0], &b, 1) != 1)
        return 6;
    int again = open(path, O_RDONLY);
    int r = flock(again, LOCK_EX | LOCK_NB);
    printf("the lock after the child's last close: %s\n", r == 0 ? "granted" : strerror(errno));
    waitpid(c, NULL, 0);
    return 0;
}
