/* clone(CLONE_VM) without CLONE_SETTLS. The child
 * shares the parent's memory and keeps the parent's thread pointer, so the
 * two tasks share every TLS variable (glibc's errno, and munmapq's cells
 * that name the holder of its queue). Both map, check and unmap windows of
 * one file for about two seconds. Without munmapq both finish; the child
 * exits 0 and the parent prints what both saw.
 *
 *   clonevm FILE   (FILE: a data file of at least 64 pages, mq-probe mkfile) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fd;
static size_t pg;
static volatile int stop;
static volatile unsigned long wrong[2], ops[2];

static unsigned char pattern(size_t pos) {
    return (unsigned char)((pos * 7) ^ ((pos >> 12) * 131));
}

/* Maps, checks and unmaps windows of 1-3 pages until told to stop (the
 * child) or until `seconds` have passed. No libc call here
 * but mmap and munmap (and the vDSO's clock_gettime): the child shares
 * the parent's TLS. */
static void work(int who, unsigned seed, int seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0;; i++) {
        if (who == 1 && stop)
            break;
        if ((i & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= seconds)
                break;
        }
        seed = seed * 1103515245u + 12345u;
        size_t pages = 1 + (seed >> 16) % 3;
        size_t first = (seed >> 8) % (64 - pages);
        char *p = mmap(NULL, pages * pg, PROT_READ, MAP_PRIVATE, fd, (off_t)(first * pg));
        if (p == MAP_FAILED) {
            wrong[who]++;
            continue;
        }
        for (size_t k = 0; k < pages; k++)
            wrong[who] += (unsigned char)p[k * pg + 5] != pattern((first + k) * pg + 5);
        if (munmap(p, pages * pg))
            wrong[who]++;
        ops[who]++;
    }
}

static int child(void *arg) {
    (void)arg;
    /* If the parent dies (SIGSEGV) nobody sets `stop`: go with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    work(1, 7, 5);
    return wrong[1] != 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 2;
    pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t stack_len = 1 << 20;
    char *stack = mmap(NULL, stack_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return 2;
    pid_t pid = clone(child, stack + stack_len, CLONE_VM | SIGCHLD, NULL);
    if (pid < 0)
        return 2;
    work(0, 3, 2);
    stop = 1;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return 2;
    if (WIFEXITED(status))
        printf("clone(CLONE_VM) child: exit %d\n", WEXITSTATUS(status));
    else
        printf("clone(CLONE_VM) child: killed by signal %d\n", WTERMSIG(status));
    printf("parent: %s windows, %lu wrong; child: %s windows, %lu wrong\n",
           ops[0] > 1000 ? "many" : "few", wrong[0], ops[1] > 1000 ? "many" : "few", wrong[1]);
    fprintf(stderr, "parent %lu ops, child %lu ops\n", ops[0], ops[1]);
    return 0;
}
