/* A close stepped one instruction at a time (tests/fd_race.rs): the x86
 * trap flag raises SIGTRAP after each instruction of the program's
 * close(N), so that a signal handler runs at every point of munmapq's close
 * hook. N (the file, 4 MiB, opened read-only) holds a shared flock. Two of
 * those points act, by MODE:
 *
 *   H1, the first step inside the C library's close (N still open, after
 *       everything the hook does before the real call): the handler maps
 *       a 2 MiB window through N and unmaps it; with `reopen` it first
 *       closes N itself and opens the file again read-only (the lowest
 *       free number: N), so that the program's close closes that one.
 *   H2, the first step after N is closed:
 *       reopen: the handler opens the file write-only (N again) and maps it
 *           PROT_READ, MAP_PRIVATE, which the kernel refuses (EACCES): no
 *           window queued at H1, nor the one queued through another
 *           descriptor before the close, may be handed to it;
 *       lock: it opens the file and asks for an exclusive flock without
 *           waiting: granted, as N's open file and its shared lock ended
 *           with the close's system call;
 *       jump: it leaves the close with siglongjmp.
 *   After the close (or the jump), the program asks for the exclusive
 *   flock again: granted.
 *
 *   stepclose DIR reopen|lock|jump
 *       Prints "stage: 2, at H2: ANSWER, after the close: flock ANSWER".
 *       Prints a SKIPPED line on another architecture than x86_64. */
#define _GNU_SOURCE
#include <stdio.h>

#ifdef __x86_64__
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define LEN (2u << 20)
#define TRAP_FLAG 0x100L

static char path[4096];
static const char *mode;
static volatile int n = -1, stage;
static char at_h2[64] = "nothing";
static uintptr_t close_lo, close_hi;
static sigjmp_buf out;

/* Whether N is open, asked past every hook. */
static int n_open(void) {
    return syscall(SYS_fcntl, n, F_GETFD) >= 0;
}

static int is(const char *m) {
    return strcmp(mode, m) == 0;
}

static void map_and_unmap(int fd) {
    char *p = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
        (void)p[0];
        munmap(p, LEN);
    }
}

static void on_step(int sig, siginfo_t *si, void *context) {
    (void)sig;
    (void)si;
    ucontext_t *uc = context;
    int e = errno;
    uintptr_t ip = uc->uc_mcontext.gregs[REG_RIP];
    if (stage == 0 && ip >= close_lo && ip < close_hi && n_open()) {
        if (is("reopen")) {
            close(n);
            open(path, O_RDONLY);
        }
        map_and_unmap(n);
        stage = 1;
    } else if (stage == 1 && !n_open()) {
        stage = 2;
        uc->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
        if (is("jump"))
            siglongjmp(out, 1);
        if (is("reopen")) {
            int w = open(path, O_WRONLY);
            void *p = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, w, 0);
            snprintf(at_h2, sizeof at_h2, "read-only mmap of a write-only descriptor %s",
                     p != MAP_FAILED ? "SUCCEEDED"
                     : errno == EACCES ? "failed EACCES"
                                       : "failed otherwise");
            close(w);
        } else {
            int m = open(path, O_RDONLY);
            snprintf(at_h2, sizeof at_h2, "flock %s",
                     flock(m, LOCK_EX | LOCK_NB) == 0 ? "granted" : "REFUSED");
            close(m);
        }
    }
    errno = e;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    mode = argv[2];
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
    if (n < 0 || flock(n, LOCK_SH) != 0)
        return 2;
    if (sigsetjmp(out, 1) == 0) {
        __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" ::"i"(TRAP_FLAG) : "memory", "cc");
        close(n);
    }
    __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" ::"i"(~TRAP_FLAG) : "memory", "cc");
    int again = open(path, O_RDONLY);
    printf("stage: %d, at H2: %s, after the close: flock %s\n", stage, at_h2,
           flock(again, LOCK_EX | LOCK_NB) == 0 ? "granted" : "REFUSED");
    return 0;
}
#else
int main(void) {
    printf("SKIPPED: the close is stepped with x86_64's trap flag\n");
    return 0;
}
#endif
