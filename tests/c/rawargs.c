/* libc's syscall() with the words the kernel takes as `unsigned long` or
 * answers as `unsigned int`, and with a call that is no cancellation point
 * there (tests/past_hooks.rs): munmapq routes these numbers through its
 * hooks, which must leave the kernel what the program gave it.
 *
 *   rawargs          each line: the call, what it answered, errno
 *   rawargs cancel   a thread with a cancellation pending makes
 *                    syscall(SYS_msync): "not cancelled" */
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
    if (argc == 2 && strcmp(argv[1], "cancel") == 0) {
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
    return 0;
}
