/* Hooks called from a signal handler that runs on an alternate stack of
 * the kernel's minimum plus 2 KiB (tests/altstack.rs): what its signal
 * frame takes here, measured, and at least AT_MINSIGSTKSZ.
 *
 *   altstack FILE BOUND [measure]
 *       FILE: a data file of at least 8 windows. The handler, raised once
 *       per step on its small stack, makes one call each time: the first
 *       mmap of a window (a miss) and its munmap (the first deferral, which
 *       reads the process's memory figures), a second mmap of it (a
 *       reuse) and munmap, a close of a descriptor with a live mapping
 *       after a fork (which asks the kernel about its locks), and
 *       mprotect, madvise, msync, mincore, mlock and a munmap that passes
 *       through. Prints each step's result and whether the call took at
 *       most BOUND bytes of stack below the handler's frame; on stderr,
 *       how many it took. The stack is painted and read back from its low
 *       end; a guard page lies below it. With `measure`, the stack is
 *       64 KiB, to see how much a call takes where it would not fit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WINDOW (16 * 1024)
#define PAINT 0xa5

static int fd;
static volatile sig_atomic_t step;
static char *volatile p, *volatile q;
static volatile int result;
static unsigned char *stack;
static size_t stack_size;
/* Where the handler's own frame ends: what lies below it was used by the
 * call the handler made (libc's, and munmapq's hook with the library). */
static unsigned char *volatile handler_sp;

static void on_signal(int sig) {
    (void)sig;
    int e = errno;
    handler_sp = __builtin_frame_address(0);
    errno = 0;
    switch (step) {
    case 0: p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0); result = p == MAP_FAILED; break;
    case 1: result = munmap(p, WINDOW); break;
    case 2: p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0); result = p == MAP_FAILED; break;
    case 3: result = munmap(p, WINDOW); break;
    case 4: q = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, WINDOW); result = q == MAP_FAILED; break;
    case 5: result = close(fd); break;
    case 6: result = mprotect(q, WINDOW, PROT_READ); break;
    case 7: result = madvise(q, WINDOW, MADV_WILLNEED); break;
    case 8: result = msync(q, WINDOW, MS_ASYNC); break;
    case 9: { unsigned char v[WINDOW / 4096]; result = mincore(q, WINDOW, v); break; }
    case 10: result = mlock(q, WINDOW); break;
    case 11: result = munmap(q, WINDOW); break;
    }
    result = result ? errno : 0;
    errno = e;
}

static const char *names[] = {"mmap (miss)", "munmap (first deferral)", "mmap (reuse)",
                              "munmap", "mmap (another window)", "close (after a fork)",
                              "mprotect", "madvise", "msync", "mincore", "mlock",
                              "munmap (passes through)"};

/* The alternate stack: `size` bytes at `at`. */
static void on_stack(unsigned char *at, size_t size) {
    stack_t ss = {.ss_sp = at, .ss_size = size};
    if (sigaltstack(&ss, NULL) != 0)
        exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    size_t bound = atol(argv[2]);
    int measure = argc > 3 && !strcmp(argv[3], "measure");
    fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 2;
    /* A large region whose top serves as the alternate stack: the whole of
     * it to measure the signal frame, its top `frame + 2048` bytes (with a
     * guard page below) for each step. */
    size_t region = 1 << 16;
    unsigned char *base = mmap(NULL, region + 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    /* Each function called once first: the dynamic loader's lazy binding
     * (_dl_runtime_resolve saves every register on the stack) must not
     * run on the small stack. */
    {
        unsigned char v[1];
        void *a = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mprotect(a, 4096, PROT_READ);
        madvise(a, 4096, MADV_WILLNEED);
        msync(a, 4096, MS_ASYNC);
        mincore(a, 4096, v);
        mlock(a, 4096);
        munmap(a, 4096);
        close(dup(0));
    }
    /* Every description is shared from here on: a close asks the kernel. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    size_t deepest = 0, deepest_call = 0;
    unsigned long min = getauxval(AT_MINSIGSTKSZ);
    for (step = 0; step < (int)(sizeof names / sizeof *names); step++) {
        /* The kernel's minimum here: AT_MINSIGSTKSZ, or what its frame
         * takes in this very state where that is more (it grows with the
         * CPU's register state in use). */
        int real_step = step;
        step = -1;
        on_stack(base, region + 4096);
        memset(base, PAINT, region + 4096);
        raise(SIGUSR1);
        size_t frame = base + region + 4096 - handler_sp;
        if (frame < min)
            frame = min;
        step = real_step;
        /* Right above the guard page; `measure`: the whole region. */
        stack_size = measure ? region : (frame + 2048 + 15) & ~(size_t)15;
        stack = base + 4096;
        mprotect(base, 4096, PROT_NONE);
        on_stack(stack, stack_size);
        memset(stack, PAINT, stack_size);
        raise(SIGUSR1);
        mprotect(base, 4096, PROT_READ | PROT_WRITE);
        size_t untouched = 0;
        while (untouched < stack_size && stack[untouched] == PAINT)
            untouched++;
        size_t call = handler_sp - (stack + untouched);
        if (stack_size - untouched > deepest)
            deepest = stack_size - untouched;
        if (call > deepest_call)
            deepest_call = call;
        printf("%s: %s, %s\n", names[step], result ? strerror(result) : "ok",
               call <= bound ? "within the bound" : "over the bound");
        fprintf(stderr, "  %s: %zu bytes below the handler's frame\n", names[step], call);
        if (step == 0 || step == 2)
            (void)*(volatile char *)p;
    }
    fprintf(stderr, "altstack: %zu of %zu bytes used at the deepest, %zu by a call\n", deepest,
            stack_size, deepest_call);
    return 0;
}
