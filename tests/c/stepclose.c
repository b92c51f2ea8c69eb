/* A close stepped one instruction at a time (tests/fd_race.rs): the x86
 * trap flag raises SIGTRAP after each instruction of the program's
 * close(N), so that a signal handler runs at every point of munmapq's close
 * hook. Two of those points act:
 *
 *   H1, the first step inside the C library's close (N still open, after
 *       everything the hook does before the real call): the handler
 *       closes N itself, opens the file again read-only (the lowest free
 *       number: N), maps a 2 MiB window through it and unmaps it. The
 *       program's close then closes that description.
 *   H2, the first step after N is closed: the handler opens the file
 *       write-only (N again) and maps it PROT_READ, MAP_PRIVATE. The
 *       kernel refuses that (EACCES): no window the handler left queued
 *       at H1, nor the one queued through another descriptor before the
 *       close, may be handed to this description.
 *
 *   stepclose DIR
 *       Prints "close: RESULT, stage: 2, read-only mmap through a
 *       write-only descriptor: failed EACCES". Prints a SKIPPED line on
 *       another architecture than x86_64. */
#define _GNU_SOURCE
#include <stdio.h>

#ifdef __x86_64__
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define LEN (2u << 20)
#define TRAP_FLAG 0x100L

static char path[4096];
static volatile int n = -1, stage, refused_errno;
static void *volatile refused = MAP_FAILED;
static uintptr_t close_lo, close_hi;

/* Whether N is open, asked past every hook. */
static int n_open(void) {
    return syscall(SYS_fcntl, n, F_GETFD) >= 0;
}

static void on_step(int sig, siginfo_t *si, void *context) {
    (void)sig;
    (void)si;
    ucontext_t *uc = context;
    int e = errno;
    uintptr_t ip = uc->uc_mcontext.gregs[REG_RIP];
    if (stage == 0 && ip >= close_lo && ip < close_hi && n_open()) {
        close(n);
        int r = open(path, O_RDONLY);
        char *p = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, r, 0);
        if (p != MAP_FAILED) {
            (void)p[0];
            munmap(p, LEN);
        }
        stage = 1;
    } else if (stage == 1 && !n_open()) {
        int w = open(path, O_WRONLY);
        refused = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, w, 0);
        refused_errno = errno;
        stage = 2;
        uc->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
    }
    errno = e;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[LEN];
    memset(buf, 'S', sizeof buf);
    for (int i = 0; i < 2; i++)
        if (w < 0 || write(w, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 2;
    close(w);
    /* Where the C library's close lies: H1 is its first step there. */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *c = libc ? dlsym(libc, "close") : NULL;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!c || !dladdr1(c, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
        return 3;
    close_lo = (uintptr_t)c;
    close_hi = close_lo + sym->st_size;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_step;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTRAP, &sa, NULL);
    /* A window of the file queued through another descriptor, kept open:
     * the queue holds one a wrong answer at H2 could hand out. */
    int m = open(path, O_RDONLY);
    char *q = m < 0 ? MAP_FAILED : mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, m, 0);
    if (q == MAP_FAILED)
        return 2;
    munmap(q, LEN);
    n = open(path, O_RDONLY);
    if (n < 0)
        return 2;
    __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" ::"i"(TRAP_FLAG) : "memory", "cc");
    int r = close(n);
    __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" ::"i"(~TRAP_FLAG) : "memory", "cc");
    printf("close: %d, stage: %d, read-only mmap through a write-only descriptor: %s\n", r,
           stage,
           refused != MAP_FAILED ? "SUCCEEDED"
           : refused_errno == EACCES ? "failed EACCES"
                                     : "failed otherwise");
    return 0;
}
#else
int main(void) {
    printf("SKIPPED: the close is stepped with x86_64's trap flag\n");
    return 0;
}
#endif
