/* stepchange DIR CALL: round K maps three windows of DIR/f and unmaps the
 * second, then unmaps the third with the trap flag set: at step K the
 * SIGTRAP handler makes CALL ("mprotect" to read-write, "madvise"
 * MADV_DONTNEED or "mlock"; "munmap" of a page in its middle) on the
 * second window, which the program had unmapped. Then the first is
 * unmapped, and mincore asks whether the second is still mapped: without
 * munmapq it never is (the handler's call answers ENOMEM, or 0 for the
 * munmap). With it, a handler that ran while the interrupted hook held
 * the library's table was answered 0 and changed the queued window (or
 * took a page of it); the table's next holder (the first window's munmap)
 * unmaps it (what is left of it). Rounds
 * go on until the handler no longer runs inside the munmap. Prints "still
 * mapped after the handler's CALL: 0 of ROUNDS", or a SKIPPED line on
 * another architecture than x86_64. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __x86_64__
#include <sys/syscall.h>
#include <ucontext.h>

#define WINDOW (4ul << 20)
#define TRAP_FLAG 0x100L

static volatile long step, target, hit, answered_zero;
static char *second;
static const char *call;

static void on_step(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    int saved = errno;
    ucontext_t *uc = context;
    if (++step == target) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
        hit = 1;
        int r;
        if (strcmp(call, "mprotect") == 0)
            r = mprotect(second, 4096, PROT_READ | PROT_WRITE);
        else if (strcmp(call, "madvise") == 0)
            r = madvise(second, 4096, MADV_DONTNEED);
        else if (strcmp(call, "munmap") == 0)
            r = munmap(second + WINDOW / 2, 4096);
        else if ((r = mlock(second, 4096)) == 0)
            munlock(second, 4096);
        answered_zero += r == 0;
    }
    errno = saved;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    call = argv[2];
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 3 * WINDOW) != 0 || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_step;
    sa.sa_flags = SA_SIGINFO;
    if (fd < 0 || sigaction(SIGTRAP, &sa, NULL) != 0)
        return 3;
    long rounds = 0, mapped = 0;
    unsigned char vec[1];
    for (long k = 1; k < 100000; k++) {
        char *first = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
        second = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, WINDOW);
        char *third = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 2 * WINDOW);
        if (first == MAP_FAILED || second == MAP_FAILED || third == MAP_FAILED)
            return 4;
        munmap(second, WINDOW);
        step = 0;
        target = k;
        hit = 0;
        __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" ::"i"(TRAP_FLAG) : "memory", "cc");
        int r = munmap(third, WINDOW);
        __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" ::"i"(~TRAP_FLAG) : "memory", "cc");
        if (r != 0)
            return 5;
        munmap(first, WINDOW);
        if (!hit)
            break;
        rounds++;
        if (mincore(second, 4096, vec) == 0)
            mapped++;
    }
    fprintf(stderr, "the handler's call answered 0: %ld\n", answered_zero);
    printf("still mapped after the handler's %s: %ld of %s\n", call, mapped,
           rounds > 0 ? "every round" : "none");
    return close(fd);
}
#else
int main(void) {
    printf("SKIPPED: the trap flag is x86_64's\n");
    return 0;
}
#endif
