/* glibc's other names of hooked functions, exported at a public version
 * (GLIBC_2.2.5 on x86_64, GLIBC_2.17 on aarch64) so a program may call
 * them (tests/fd_table.rs): __close, __dup2, _IO_fclose,
 * __vfork and __clone must act as close, dup2, fclose, vfork and clone
 * do.
 *
 *   aliases DIR close|dup2|fclose
 *       DIR/file opened read-only as A (through fopen for fclose); a window
 *       mapped, read and unmapped through A 200 times (with munmapq:
 *       queued, then reused); A locked (flock LOCK_EX) and closed through
 *       the alias (replaced by /dev/null for dup2). A second open's
 *       non-blocking flock must be granted: "lock granted".
 *   aliases DIR dup2-wronly
 *       The same window queued through A; A replaced by a write-only
 *       descriptor of the file through __dup2; a mmap through A must fail:
 *       "mmap: Permission denied".
 *   aliases DIR vfork|clone
 *       A child of __vfork (or __clone with CLONE_VM | CLONE_VFORK, which
 *       runs in this memory on a copy of the table) opens, locks and maps
 *       the file as above, and exits (closing it). The parent's
 *       non-blocking lock must be granted: "lock granted". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern int __close(int);
extern int __dup2(int, int);
extern int _IO_fclose(FILE *);
extern pid_t __vfork(void);
extern int __clone(int (*)(void *), void *, int, void *, ...);

#define WINDOW (64 * 1024)

static char path[4096];

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

/* The window mapped, read and unmapped through fd 201 times. */
static void cycle(int fd) {
    for (int i = 0; i < 201; i++) {
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            die("mmap");
        (void)*(volatile char *)p;
        munmap(p, WINDOW);
    }
}

static void lock_granted(void) {
    int c = open(path, O_RDONLY);
    if (flock(c, LOCK_EX | LOCK_NB) == 0)
        printf("lock granted\n");
    else
        printf("lock held: %s\n", strerror(errno));
    close(c);
}

static int locked_and_mapped(void *arg) {
    (void)arg;
    int a = open(path, O_RDONLY);
    if (a < 0 || flock(a, LOCK_EX) != 0)
        _exit(1);
    cycle(a);
    return 0; /* the child's exit closes a */
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    const char *how = argv[2];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0 || ftruncate(f, 4 * WINDOW) != 0)
        die("file");
    close(f);
    if (strcmp(how, "vfork") == 0 || strcmp(how, "clone") == 0) {
        static char stack[1 << 20];
        pid_t pid;
        if (strcmp(how, "vfork") == 0) {
            pid = __vfork();
            if (pid == 0)
                _exit(locked_and_mapped(NULL));
        } else {
            pid = __clone(locked_and_mapped, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                          NULL);
        }
        if (pid < 0 || waitpid(pid, NULL, 0) != pid)
            die("child");
        lock_granted();
        return 0;
    }
    FILE *fp = strcmp(how, "fclose") == 0 ? fopen(path, "r") : NULL;
    int a = fp ? fileno(fp) : open(path, O_RDONLY);
    if (a < 0)
        die("open");
    cycle(a);
    if (strcmp(how, "dup2-wronly") == 0) {
        int w = open(path, O_WRONLY);
        if (w < 0 || __dup2(w, a) != a)
            die("__dup2");
        close(w);
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, a, 0);
        printf("mmap: %s\n", p == MAP_FAILED ? strerror(errno) : "mapped");
        return 0;
    }
    if (flock(a, LOCK_EX) != 0)
        die("flock");
    if (strcmp(how, "close") == 0) {
        __close(a);
    } else if (strcmp(how, "dup2") == 0) {
        int n = open("/dev/null", O_RDONLY);
        if (n < 0 || __dup2(n, a) != a)
            die("__dup2");
        close(n);
    } else if (fp) {
        _IO_fclose(fp);
    } else {
        return 2;
    }
    lock_granted();
    return 0;
}
