/* steplost DIR CALL: round K maps three windows of DIR/f (filled with 'x')
 * and unmaps the second, then unmaps the third with the trap flag set: at
 * step K the SIGTRAP handler makes 64 calls on the first window
 * (madvise MADV_NORMAL, which changes nothing), then CALL on the second,
 * which the program had unmapped: "replace" maps anonymous memory there
 * (MAP_FIXED) and writes 'A' into it; "change" makes it writable
 * (mprotect) and, if that succeeds, writes 'A'. Then the program maps the
 * second window of the file again and reads its first byte. Without
 * munmapq it is always 'x'. With it, a handler that ran while the
 * interrupted hook held the library's table made more calls than the
 * library's record of them holds, and the window it replaced or changed
 * must not be handed out as the file's. Rounds go on until the handler no
 * longer runs inside the munmap. Prints "not the file's bytes after the
 * handler's CALL: 0 of ROUNDS", or a SKIPPED line on another architecture
 * than x86_64. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __x86_64__
#include <ucontext.h>

#define WINDOW (1ul << 20)
#define TRAP_FLAG 0x100L
#define FLOOD 64

static volatile long step, target, hit, replaced;
static char *first, *second;
static const char *call;

static void on_step(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    int saved = errno;
    ucontext_t *uc = context;
    if (++step == target) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
        hit = 1;
        for (int i = 0; i < FLOOD; i++)
            madvise(first, 4096, MADV_NORMAL);
        if (strcmp(call, "replace") == 0) {
            void *p = mmap(second, 4096, PROT_READ | PROT_WRITE,
                           MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == second) {
                second[0] = 'A';
                replaced = 1;
            }
        } else if (mprotect(second, 4096, PROT_READ | PROT_WRITE) == 0) {
            second[0] = 'A';
        }
    }
    errno = saved;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    call = argv[2];
    char path[4096];
    static char block[3 * WINDOW];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    memset(block, 'x', sizeof block);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, block, sizeof block) != (ssize_t)sizeof block || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_step;
    sa.sa_flags = SA_SIGINFO;
    if (fd < 0 || sigaction(SIGTRAP, &sa, NULL) != 0)
        return 3;
    long rounds = 0, wrong = 0;
    for (long k = 1; k < 100000; k++) {
        first = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
        second = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, WINDOW);
        char *third = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 2 * WINDOW);
        if (first == MAP_FAILED || second == MAP_FAILED || third == MAP_FAILED)
            return 4;
        munmap(second, WINDOW);
        step = 0;
        target = k;
        hit = 0;
        replaced = 0;
        __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" ::"i"(TRAP_FLAG) : "memory", "cc");
        int r = munmap(third, WINDOW);
        __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" ::"i"(~TRAP_FLAG) : "memory", "cc");
        if (r != 0)
            return 5;
        char *again = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, WINDOW);
        if (again == MAP_FAILED)
            return 6;
        wrong += again[0] != 'x';
        munmap(again, WINDOW);
        /* The program's own page, where the handler mapped one. */
        if (replaced && again != second)
            munmap(second, 4096);
        munmap(first, WINDOW);
        if (!hit)
            break;
        rounds++;
    }
    printf("not the file's bytes after the handler's %s: %ld of %s\n", call, wrong,
           rounds > 0 ? "every round" : "none");
    return close(fd);
}
#else
int main(void) {
    printf("SKIPPED: the trap flag is x86_64's\n");
    return 0;
}
#endif
