/* libc's syscall() with the words the kernel takes as `unsigned long` or
 * answers as `unsigned int`, and with a call that is no cancellation point
 * there (tests/past_hooks.rs): munmapq routes these numbers through its
 * hooks, which must leave the kernel what the program gave it.
 *
 *   rawargs DIR         each line: the call, what it answered, errno;
 *                       the last one about a window of DIR/file the
 *                       program mapped and unmapped 200 times (with
 *                       munmapq: queued)
 *   rawargs DIR cancel  a thread with a cancellation pending makes
 *                       syscall(SYS_msync): "not cancelled" */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SAY(what, call)                                                                  \
    do {                                                                                 \
        errno = EXDEV;                                                                   \
        long r_ = (long)(call);                                                          \
        printf("%s: %ld, errno %d\n", what, r_, errno);                                 \
    } while (0)

static void *msync_pending(void *page) {
    pthread_cancel(pthread_self()); /* deferred: pending */
    syscall(SYS_msync, page, 4096, MS_ASYNC);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    return "not cancelled";
}

int main(int argc, char **argv) {
    char *a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return 2;
    if (argc < 2)
        return 2;
    if (argc == 3 && strcmp(argv[2], "cancel") == 0) {
        pthread_t t;
        void *how;
        if (pthread_create(&t, NULL, msync_pending, a) != 0 || pthread_join(t, &how) != 0)
            return 2;
        printf("%s\n", how == PTHREAD_CANCELED ? "cancelled" : (char *)how);
        return 0;
    }
    int fd = open("/proc/self/exe", O_RDONLY);
    unsigned long high = 1UL << 32;
    SAY("mprotect, bit 32 in prot", syscall(SYS_mprotect, a, 4096, high | PROT_READ));
    SAY("pkey_mprotect, bit 32 in prot",
        syscall(SYS_pkey_mprotect, a, 4096, high | PROT_READ, -1));
    long m = syscall(SYS_mmap, 0, 4096, PROT_READ, high | MAP_SHARED_VALIDATE, fd, 0);
    printf("mmap MAP_SHARED_VALIDATE, bit 32 in flags: %s\n", m == -1 ? strerror(errno) : "mapped");
    long old = syscall(SYS_personality, 0xffffffffUL);
    SAY("personality, bit 31", syscall(SYS_personality, 0x80000000UL));
    SAY("personality, asked", syscall(SYS_personality, 0xffffffffUL));
    syscall(SYS_personality, old);
    /* A window the program unmapped: the kernel's checks of the place
     * come before its refusal of the unknown flag. */
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w < 0 || ftruncate(w, 65536) != 0)
        return 2;
    close(w);
    int r = open(path, O_RDONLY);
    char *p = MAP_FAILED;
    for (int i = 0; i < 200; i++) {
        p = mmap(NULL, 65536, PROT_READ, MAP_PRIVATE, r, 0);
        if (p == MAP_FAILED)
            return 2;
        (void)*(volatile char *)p;
        munmap(p, 65536);
    }
    m = syscall(SYS_mmap, p, 65536, PROT_READ, high | MAP_SHARED_VALIDATE | MAP_FIXED_NOREPLACE, r,
                0);
    printf("mmap MAP_SHARED_VALIDATE | MAP_FIXED_NOREPLACE onto the freed window, bit 32: %s\n",
           m == -1 ? strerror(errno) : "mapped");
    return 0;
}
