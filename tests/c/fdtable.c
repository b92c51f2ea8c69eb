/* Hooks that run on another descriptor table than the process's: a vfork
 * child (in the parent's memory, with a copy of the table) and a thread
 * after unshare(CLONE_FILES) (tests/fd_table.rs).
 *
 *   fdtable DIR lock HOW
 *       The parent opens DIR/file read-only and flocks it; a child made by
 *       vfork closes its copy of the descriptor by HOW (close_range,
 *       closefrom, close, dup2: /dev/null onto it) and execs /bin/true
 *       (HOW unshare: a thread unshares its table and closes its copy
 *       there instead). The parent then maps a window through its
 *       descriptor, closes it and unmaps the window: the last close, which
 *       must release the lock. Another description's
 *       flock(LOCK_EX | LOCK_NB) then says "lock granted" (EAGAIN if it is
 *       still held).
 *   fdtable DIR reopen HOW
 *       The parent queues window 0 of DIR/file (maps and unmaps it through
 *       a read-only descriptor), and opens the file write-only on number N.
 *       A vfork child (HOW vfork; a child of glibc's clone(CLONE_VM |
 *       CLONE_VFORK) with HOW clone; a thread after unshare(CLONE_FILES)
 *       with HOW unshare) closes N, opens the file read-only there, maps
 *       window 0 through it and unmaps it. Then the parent maps window 0
 *       through its own, write-only N: the kernel refuses it (EACCES). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WINDOW (16 * 1024)

static char path[4096];
static const char *how;
static int fd;

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

#include "lockround.h"

static void make(const char *dir) {
    snprintf(path, sizeof path, "%s/file", dir);
    make_lock_file(path, 4 * WINDOW);
}

static void map_unmap(int f) {
    char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, f, 0);
    if (p == MAP_FAILED)
        die("mmap");
    (void)*(volatile char *)p;
    munmap(p, WINDOW);
}

/* In the other table: what HOW says. */
static void close_copy(void) {
    if (!strcmp(how, "close_range"))
        close_range(3, ~0U, 0);
    else if (!strcmp(how, "closefrom"))
        closefrom(3);
    else if (!strcmp(how, "dup2"))
        dup2(open("/dev/null", O_RDONLY), fd);
    else
        close(fd);
}

/* In the other table: number fd names the file, read-only, and a window
 * is mapped through it. */
static void reopen_and_map(void) {
    close(fd);
    int f = open(path, O_RDONLY);
    if (f != fd)
        _exit(3);
    map_unmap(f);
}

static void *unshared(void *what) {
    if (unshare(CLONE_FILES) != 0)
        die("unshare");
    if (!strcmp(what, "lock"))
        close_copy();
    else
        reopen_and_map();
    return NULL;
}

/* A child of glibc's clone(CLONE_VM | CLONE_VFORK): as a vfork child. */
static int cloned(void *what) {
    if (!strcmp(what, "lock")) {
        close_copy();
        char *argv[] = {"true", NULL};
        execve("/bin/true", argv, (char *[]){NULL});
        _exit(127);
    }
    reopen_and_map();
    _exit(0);
}

/* Runs `what` in the other table: a vfork child, a clone child, or an
 * unshared thread. */
static void elsewhere(const char *what) {
    if (!strcmp(how, "clone")) {
        static char stack[1 << 16] __attribute__((aligned(16)));
        pid_t pid = clone(cloned, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                          (void *)what);
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status))
            die("clone child");
        return;
    }
    if (!strcmp(how, "unshare")) {
        pthread_t t;
        pthread_create(&t, NULL, unshared, (void *)what);
        pthread_join(t, NULL);
        return;
    }
    pid_t pid = vfork();
    if (pid < 0)
        die("vfork");
    if (pid == 0) {
        if (!strcmp(what, "lock")) {
            close_copy();
            char *argv[] = {"true", NULL};
            execve("/bin/true", argv, (char *[]){NULL});
            _exit(127);
        }
        reopen_and_map();
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        die("child");
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    make(argv[1]);
    how = argv[3];
    if (!strcmp(argv[2], "lock")) {
        for (int round = 0; round < 3; round++) {
            fd = open(path, O_RDONLY);
            if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0)
                die("flock");
            elsewhere("lock");
            map_close_unmap_then_lock(path, fd, WINDOW, round);
        }
        return 0;
    }
    int r = open(path, O_RDONLY);
    map_unmap(r);
    fd = open(path, O_WRONLY);
    if (fd < 0)
        die("open");
    elsewhere("reopen");
    char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        printf("mmap through the write-only descriptor: %s\n", strerror(errno));
    else
        printf("mmap through the write-only descriptor succeeded\n");
    return 0;
}
