/* A signal handler that maps through a number at the very system call that
 * closes it (tests/fd_race.rs). munmapq's close hook looks at the number's
 * records before the real close (its lane, `Engine::close_lane`): whatever
 * a handler maps through the number after that look must not outlive the
 * close. A mapping made through the open file the close ends, queued at
 * its munmap, would keep that open file, and its lock, past the close.
 *
 * The handler is made to run there every time: a seccomp filter traps
 * `close` (SECCOMP_RET_TRAP), so each close's system call raises SIGSYS
 * instead of running, after everything munmapq's close hook does before
 * it. The SIGSYS handler maps a 2 MiB window through the number, reads and
 * unmaps it, then makes the close itself (`close_range` of that one
 * number, by a raw system call no hook sees) and answers its result.
 *
 *   lanerace DIR ROUNDS
 *       DIR/file (4 MiB) opened read-only as N, with a shared flock; one
 *       window mapped and unmapped through it before the filter is
 *       installed (a library asks about an inherited filter at its first
 *       eligible mmap, and would stop for good after it). Then, ROUNDS
 *       times: N is closed, the file opened again (the lowest free
 *       number: N) and an exclusive flock asked for without waiting:
 *       granted unless an open file the program closed still holds its
 *       shared one; the shared one is taken back. Prints "refused: COUNT,
 *       wrong bytes: COUNT, mapped at the close: COUNT". Prints a
 *       SKIPPED line on another architecture than x86_64. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef __x86_64__
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#endif

#ifdef __x86_64__
#define LEN (2u << 20)

static volatile int n = -1;
static volatile long wrong, mapped;

/* A system call no hook of munmapq sees. */
static long raw(long nr, long a, long b, long c, long d, long e) {
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return r;
}

static int map_and_check(int fd) {
    char *p = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return 0;
    int ok = p[0] == 'L' && p[LEN - 1] == 'L';
    munmap(p, LEN);
    return ok;
}

/* The trapped close: a mapping through the number first, then the close. */
static void on_sigsys(int sig, siginfo_t *si, void *context) {
    (void)sig;
    (void)si;
    ucontext_t *uc = context;
    int e = errno;
    int fd = (int)uc->uc_mcontext.gregs[REG_RDI];
    if (fd == n) {
        wrong += !map_and_check(fd);
        mapped++;
    }
    uc->uc_mcontext.gregs[REG_RAX] = raw(SYS_close_range, fd, fd, 0, 0, 0);
    errno = e;
}

static struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    long rounds = atol(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[LEN];
    memset(buf, 'L', sizeof buf);
    for (int i = 0; i < 2; i++)
        if (w < 0 || write(w, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 2;
    close(w);
    n = open(path, O_RDONLY);
    if (n < 0 || flock(n, LOCK_SH) != 0 || !map_and_check(n))
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
    if (raw(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        raw(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, (long)&prog, 0, 0) != 0)
        return 3;
    long refused = 0;
    for (long i = 0; i < rounds; i++) {
        if (close(n) != 0)
            return 4;
        int m = open(path, O_RDONLY);
        if (m < 0)
            return 5;
        refused += flock(m, LOCK_EX | LOCK_NB) != 0;
        flock(m, LOCK_SH);
        n = m;
    }
    printf("refused: %ld, wrong bytes: %ld, mapped at the close: %ld\n", refused, wrong,
           mapped);
    return 0;
}
#else
int main(void) {
    printf("SKIPPED: the close is trapped with x86_64's registers\n");
    return 0;
}
#endif
