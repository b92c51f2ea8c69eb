/* limittid DIR HOW: 64 windows of 4 MiB of DIR/f (sparse) are mapped and
 * unmapped, then RLIMIT_AS is lowered to the process's size before them
 * plus 128 MiB, and malloc(100 MiB) is asked for (glibc's own mmap, which
 * no hook sees). Without munmapq the windows are gone and the malloc
 * fits. HOW says who lowers the limit: "thread", a second thread by
 * prlimit on its own thread id; "main", the main thread by prlimit on
 * its thread id (the process id too); "self", prlimit on 0. Prints
 * "prlimit: 0, malloc(100 MiB): ok". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WINDOW (4ul << 20)
#define WINDOWS 64

static rlim_t limit;
static int who;
static int result = -2;

/* The process's address space size, bytes (/proc/self/statm). */
static unsigned long vm_size(void) {
    char buf[128] = {0};
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0)
        exit(3);
    close(fd);
    return strtoul(buf, NULL, 10) * (unsigned long)sysconf(_SC_PAGESIZE);
}

static void lower(void) {
    struct rlimit r = {limit, RLIM_INFINITY};
    pid_t pid = who ? (pid_t)syscall(SYS_gettid) : 0;
    result = prlimit(pid, RLIMIT_AS, &r, NULL);
}

static void *in_thread(void *arg) {
    if (arg)
        lower();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, WINDOW * WINDOWS) != 0 || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    /* A thread made and joined first: its stack is in the size below. */
    pthread_t t;
    if (pthread_create(&t, NULL, in_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 4;
    limit = vm_size() + (128ul << 20);
    for (int i = 0; i < WINDOWS; i++) {
        char *w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (off_t)(i * WINDOW));
        if (w == MAP_FAILED)
            return 6;
        munmap(w, WINDOW);
    }
    if (strcmp(argv[2], "thread") == 0) {
        who = 1;
        if (pthread_create(&t, NULL, in_thread, &who) != 0 || pthread_join(t, NULL) != 0)
            return 4;
    } else {
        who = strcmp(argv[2], "main") == 0;
        lower();
    }
    void *m = malloc(100ul << 20);
    printf("prlimit: %d, malloc(100 MiB): %s\n", result, m ? "ok" : strerror(errno));
    free(m);
    return close(fd);
}
