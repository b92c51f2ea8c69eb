/* A program started under a seccomp filter it inherited, as from a
 * container runtime or systemd: the parent installs a filter that kills
 * the process on statx and allows everything else, then execs itself as
 * the child, which maps, reads and unmaps file windows (twice each, so a
 * queued one could be reused). The library, loaded into the child, must
 * find the filter before its first system call of its own (its statx on
 * the first mmap it takes up) and pass every call through.
 *
 *   inheritfilter FILE        (FILE: at least 16 pages)
 *
 * The child says on stderr whether libmunmapq is mapped, and prints one
 * line of what it read. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filter.h"

static struct sock_filter filter[] = {
    FILTER_OPENING,
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_statx, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

static int child(const char *file) {
    fprintf(stderr, "libmunmapq loaded: %s\n", library_mapped() ? "yes" : "no");
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 2;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    unsigned long maps = 0, sum = 0;
    for (int round = 0; round < 2; round++)
        for (size_t w = 0; w < 16; w++) {
            unsigned char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)(w * pg));
            if (p == MAP_FAILED)
                return 3;
            maps++;
            sum += p[17];
            munmap(p, pg);
        }
    close(fd);
    printf("under an inherited filter: %lu windows mapped, sum %lu\n", maps, sum);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[2], "child"))
        return child(argv[1]);
    if (argc != 2)
        return 2;
    struct sock_fprog prog = {sizeof filter / sizeof *filter, filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return 2;
    char *args[] = {argv[0], argv[1], "child", NULL};
    execv("/proc/self/exe", args);
    return 4;
}
