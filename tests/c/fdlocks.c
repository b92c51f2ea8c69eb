/* A lock belongs to the open file description, wherever it was taken
 * (tests/fd_table.rs).
 *
 *   fdlocks DIR HOW
 *       Three rounds of: open DIR/file read-only as D, lock it with
 *       flock(LOCK_EX | LOCK_NB), then HOW, then map a window through the
 *       descriptor HOW left, close it (the description's last close) and
 *       unmap the window; another description's flock(LOCK_EX | LOCK_NB)
 *       must then say "lock granted". HOW:
 *         dup2-ebadf      dup2(-1, D) fails (EBADF): D stays open
 *         dup3-flags      dup3(0, D, bad flags) fails (EINVAL)
 *         range-flags     close_range(D, D, bad flags) fails (EINVAL)
 *         syscall-dup3    syscall(SYS_dup3, 0, D, bad flags) fails
 *         scm-rights      D sent to this very process over a socketpair
 *                         (SCM_RIGHTS): the copy received is mapped, D
 *                         closed first
 *         pidfd-getfd     a copy of D made with pidfd_getfd on itself
 *         fork-flock      the lock is taken by a fork child through its
 *                         inherited D, not by the parent
 *         clone-flock     the same with a child of glibc's clone() (no
 *                         atfork handler runs)
 *         _fork-flock     the same with a child of glibc's _Fork()
 *         sys-flock       the lock is taken by syscall(SYS_flock)
 *         sys-ofd         the lock is an OFD read lock taken by
 *                         syscall(SYS_fcntl, F_OFD_SETLK)
 *         sys-dup         flock(), then a copy made by syscall(SYS_dup) is
 *                         mapped, D closed first
 *         sys-dupfd       the same with syscall(SYS_fcntl, F_DUPFD)
 *         raw-flock       the lock is taken by the syscall instruction,
 *                         past libc (as Rust's rustix does)
 *         raw-flock-large the same with a window of 2 MiB (the close asks
 *                         the kernel, where a small window is forgotten)
 *         raw-ofd         an OFD read lock taken by the syscall instruction
 *         raw-dup         flock(), then a copy made by the syscall
 *                         instruction's dup is mapped, D closed first */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WINDOW (16 * 1024)

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

#include "lockround.h"

/* D received back through a unix socket: a new descriptor, same file
 * description. */
static int scm_copy(int d) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        die("socketpair");
    char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &d, sizeof d);
    if (sendmsg(sv[0], &m, 0) != 1)
        die("sendmsg");
    memset(ctl, 0, sizeof ctl);
    if (recvmsg(sv[1], &m, 0) != 1)
        die("recvmsg");
    int copy;
    memcpy(&copy, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof copy);
    close(sv[0]);
    close(sv[1]);
    return copy;
}

static int child_d;

/* In a child: the lock through the inherited descriptor; 0 on success. */
static int child_flock(void *unused) {
    (void)unused;
    return flock(child_d, LOCK_EX | LOCK_NB) != 0;
}

/* System call NR with three arguments by the syscall instruction itself,
 * past libc. */
static long raw3(long nr, long a, long b, long c) {
    long r;
#if defined(__x86_64__)
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    r = x0;
#else
    r = syscall(nr, a, b, c);
#endif
    return r;
}

/* Takes the round's lock on D as HOW says; 0 on success. */
static int take_lock(const char *how, int d) {
    if (!strcmp(how, "sys-flock"))
        return syscall(SYS_flock, d, LOCK_EX | LOCK_NB);
    if (!strcmp(how, "raw-flock") || !strcmp(how, "raw-flock-large"))
        return raw3(SYS_flock, d, LOCK_EX | LOCK_NB, 0);
    if (!strcmp(how, "raw-ofd")) {
        struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
        return raw3(SYS_fcntl, d, F_OFD_SETLK, (long)&fl);
    }
    if (!strcmp(how, "sys-ofd")) {
        struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
        return syscall(SYS_fcntl, d, F_OFD_SETLK, &fl);
    }
    return flock(d, LOCK_EX | LOCK_NB);
}

/* The descriptor to map through after HOW. */
static int after(const char *how, int d) {
    errno = 0;
    if (!strcmp(how, "dup2-ebadf")) {
        if (dup2(-1, d) != -1 || errno != EBADF)
            die("dup2 did not fail");
    } else if (!strcmp(how, "dup3-flags")) {
        if (dup3(0, d, 0x4000) != -1)
            die("dup3 did not fail");
    } else if (!strcmp(how, "range-flags")) {
        if (close_range(d, d, 0x40) != -1)
            die("close_range did not fail");
    } else if (!strcmp(how, "syscall-dup3")) {
        if (syscall(SYS_dup3, 0, d, 0x4000) != -1)
            die("syscall(SYS_dup3) did not fail");
    } else if (!strcmp(how, "scm-rights")) {
        int copy = scm_copy(d);
        close(d);
        return copy;
    } else if (!strcmp(how, "sys-dup") || !strcmp(how, "sys-dupfd")) {
        int copy = !strcmp(how, "sys-dup") ? syscall(SYS_dup, d)
                                           : syscall(SYS_fcntl, d, F_DUPFD, 0);
        if (copy < 0)
            die("syscall dup");
        close(d);
        return copy;
    } else if (!strcmp(how, "raw-dup")) {
        int copy = raw3(SYS_dup, d, 0, 0);
        if (copy < 0)
            die("raw dup");
        close(d);
        return copy;
    } else if (!strcmp(how, "pidfd-getfd")) {
        int pidfd = syscall(SYS_pidfd_open, getpid(), 0);
        if (pidfd < 0)
            die("pidfd_open");
        int copy = syscall(SYS_pidfd_getfd, pidfd, d, 0);
        if (copy < 0)
            die("pidfd_getfd");
        close(pidfd);
        close(d);
        return copy;
    }
    return d;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    const char *how = argv[2];
    size_t window = !strcmp(how, "raw-flock-large") ? 2 << 20 : WINDOW;
    make_lock_file(path, 4 * window);
    for (int round = 0; round < 3; round++) {
        int d = open(path, O_RDONLY);
        if (d < 0)
            die("open");
        if (!strcmp(how, "fork-flock") || !strcmp(how, "clone-flock") ||
            !strcmp(how, "_fork-flock")) {
            static char stack[1 << 16] __attribute__((aligned(16)));
            child_d = d;
            pid_t pid = !strcmp(how, "clone-flock")
                            ? clone(child_flock, stack + sizeof stack, SIGCHLD, NULL)
                        : !strcmp(how, "_fork-flock") ? _Fork()
                                                      : fork();
            if (pid == 0)
                _exit(child_flock(NULL));
            int status;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
                die("the child's flock");
        } else if (take_lock(how, d) != 0) {
            die("lock");
        }
        map_close_unmap_then_lock(path, after(how, d), window, round);
    }
    return 0;
}
