/* A program that sandboxes itself. It opens its data
 * file, then installs a seccomp filter that allows only read, write, mmap,
 * munmap, close, fstat/newfstatat, brk, rt_sigreturn, exit and exit_group,
 * and kills the process on anything else; then it maps, reads and unmaps
 * file windows (twice each, so a queued one could be reused), prints one
 * line with write(2) and returns from main. Without munmapq it exits 0;
 * with a library that makes any other system call after the filter is in
 * place (statx, fcntl, openat of /proc/self/..., getpid at exit) it dies
 * of SIGSYS.
 *
 *   seccomp FILE prctl|syscall   (FILE: at least 16 pages, mq-probe mkfile)
 *
 * `prctl` installs the filter with prctl(PR_SET_SECCOMP,
 * SECCOMP_MODE_FILTER), `syscall` with syscall(SYS_seccomp,
 * SECCOMP_SET_MODE_FILTER). Before that it says on stderr whether
 * libmunmapq is mapped (the test checks that the library was loaded). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filter.h"

#define ALLOW(nr)                                        \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),     \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static struct sock_filter filter[] = {
    FILTER_OPENING,
    ALLOW(__NR_read),
    ALLOW(__NR_write),
    ALLOW(__NR_mmap),
    ALLOW(__NR_munmap),
    ALLOW(__NR_close),
    ALLOW(__NR_fstat),
    ALLOW(__NR_newfstatat),
    ALLOW(__NR_brk),
    ALLOW(__NR_rt_sigreturn),
    ALLOW(__NR_exit),
    ALLOW(__NR_exit_group),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
};

static unsigned char pattern(size_t pos) {
    return (unsigned char)((pos * 7) ^ ((pos >> 12) * 131));
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    int by_prctl = strcmp(argv[2], "prctl") == 0;
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 2;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    fprintf(stderr, "libmunmapq loaded: %s\n", library_mapped() ? "yes" : "no");
    fflush(stderr);

    struct sock_fprog prog = {sizeof filter / sizeof *filter, filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return 2;
    int r = by_prctl ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
                     : (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
    if (r)
        return 2;

    /* From here on: only the allowed calls. */
    unsigned long maps = 0, wrong = 0;
    for (int round = 0; round < 2; round++)
        for (size_t w = 0; w < 16; w++) {
            char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)(w * pg));
            if (p == MAP_FAILED) {
                wrong++;
                continue;
            }
            maps++;
            wrong += (unsigned char)p[17] != pattern(w * pg + 17);
            munmap(p, pg);
        }
    close(fd);
    char line[160];
    int n = snprintf(line, sizeof line, "seccomp filter (%s) in place: %lu windows mapped, %lu wrong\n",
                     by_prctl ? "prctl" : "seccomp syscall", maps, wrong);
    if (write(1, line, (size_t)n) != n)
        return 1;
    return 0;
}
