/* A thread cancelled at the entry of close(): POSIX makes close a
 * cancellation point, and glibc acts on a pending request before the
 * system call, so the descriptor stays open (tests/fd_table.rs).
 *
 *   cancelclose DIR
 *       Three rounds of: DIR/file opened read-only as D, a window mapped
 *       through D; a thread with a cancellation request pending calls
 *       close(D) and is cancelled there. D is still open: the main thread
 *       locks it with flock(LOCK_EX | LOCK_NB), closes it (now for real)
 *       and unmaps the window; another description's flock must then say
 *       "lock granted".
 *
 *   cancelclose DIR fclose-unflushed | fclose-unflushed-mapped
 *       A thread with a request pending calls fclose() of DIR/file opened
 *       read-only (with a window mapped through it first, for -mapped):
 *       prints whether it was cancelled and whether the descriptor is
 *       still open.
 *
 *   cancelclose DIR unrecorded-low | unrecorded-high | unrecorded-fclose
 *       A thread is cancelled at the entry of close(N) of DIR/file opened
 *       read-only, nothing mapped through it: N is the lowest free number,
 *       or 4096 (past the numbers the library gives a place in line of
 *       their own); or in fclose() of a stream on N (the lowest, opened
 *       read-write) with a byte to flush, at the flush's write. N is still open; the main thread closes it, opens the
 *       file again (at the lowest free number) and maps, reads and unmaps
 *       one window 200 times, then prints "cycled". The test asks the
 *       library's counters whether those maps were reused. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define WINDOW (16 * 1024)

static void make_file(const char *path, size_t len) {
    static char buf[4 * WINDOW];
    memset(buf, 'x', sizeof buf);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0 || write(f, buf, len) != (ssize_t)len)
        exit(2);
    close(f);
}

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

struct closing {
    int fd;
    FILE *fp; /* fclose(fp) instead of close(fd) when set */
    volatile int go;
};

static void *close_cancelled(void *arg) {
    struct closing *c = arg;
    int old;
    /* The request arrives while cancellation is disabled, so it is
     * pending when close() is entered. */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    while (!c->go)
        ;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    if (c->fp)
        fclose(c->fp); /* its flush's write acts on the request */
    else
        close(c->fd);
    return "not cancelled";
}

/* close(n), or fclose(fp) of a stream on n, by a thread with a
 * cancellation request pending: whether the thread was cancelled. */
static int closed_with_request_pending(int n, FILE *fp) {
    struct closing c = {n, fp, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, close_cancelled, &c) != 0)
        die("pthread_create");
    pthread_cancel(t);
    c.go = 1;
    void *how;
    pthread_join(t, &how);
    return how == PTHREAD_CANCELED;
}

/* A thread cancelled at the entry of close(n), or in fclose(fp) of a
 * stream on n; n must still be open. */
static void cancelled_closing(int n, FILE *fp) {
    if (!closed_with_request_pending(n, fp)) {
        printf("the thread was not cancelled\n");
        exit(1);
    }
    if (fcntl(n, F_GETFD) < 0)
        die("the descriptor was closed");
}

static int unrecorded(const char *path, int high, int stream) {
    int d = open(path, stream ? O_RDWR : O_RDONLY);
    if (d < 0)
        die("open");
    int n = d;
    if (high) {
        struct rlimit l;
        if (getrlimit(RLIMIT_NOFILE, &l) != 0)
            die("getrlimit");
        if (l.rlim_cur < 4097) {
            l.rlim_cur = l.rlim_max < 4097 ? l.rlim_max : 4097;
            if (l.rlim_cur < 4097 || setrlimit(RLIMIT_NOFILE, &l) != 0) {
                printf("SKIPPED: no descriptor 4096 under RLIMIT_NOFILE\n");
                return 0;
            }
        }
        n = dup2(d, 4096);
        if (n != 4096)
            die("dup2");
        close(d);
    }
    FILE *fp = NULL;
    if (stream) {
        /* Something to flush, so that fclose reaches a write. The stream
         * is left as the cancellation leaves it; its descriptor is closed
         * below. */
        fp = fdopen(n, "r+");
        if (!fp || fputs("y", fp) == EOF)
            die("fdopen");
    }
    cancelled_closing(n, fp);
    close(n);
    d = open(path, O_RDONLY);
    if (d < 0)
        die("open");
    if (!high && d != n) {
        printf("reopened at %d, not %d\n", d, n);
        return 1;
    }
    for (int i = 0; i < 200; i++) {
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, d, 0);
        if (p == MAP_FAILED)
            die("mmap");
        (void)*(volatile char *)p;
        munmap(p, WINDOW);
    }
    close(d);
    printf("cycled\n");
    return 0;
}

/* fclose() of a read-only stream, nothing to flush, by a thread with a
 * request pending: glibc's fclose reaches no cancellation point, so the
 * thread is not cancelled there and the descriptor is closed. */
static int fclose_unflushed(const char *path, int recorded) {
    int n = open(path, O_RDONLY);
    FILE *fp = n < 0 ? NULL : fdopen(n, "r");
    if (!fp)
        die("open");
    char *p = NULL;
    if (recorded) {
        p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, n, 0);
        if (p == MAP_FAILED)
            die("mmap");
        (void)*(volatile char *)p;
    }
    int cancelled = closed_with_request_pending(n, fp);
    printf("%s, the descriptor %s\n", cancelled ? "cancelled" : "not cancelled",
           fcntl(n, F_GETFD) < 0 ? "closed" : "open");
    if (p)
        munmap(p, WINDOW);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    make_file(path, 4 * WINDOW);
    if (argc == 3 && strncmp(argv[2], "fclose-unflushed", 16) == 0)
        return fclose_unflushed(path, strcmp(argv[2], "fclose-unflushed-mapped") == 0);
    if (argc == 3)
        return unrecorded(path, strcmp(argv[2], "unrecorded-high") == 0,
                          strcmp(argv[2], "unrecorded-fclose") == 0);
    for (int round = 0; round < 3; round++) {
        int d = open(path, O_RDONLY);
        if (d < 0)
            die("open");
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, d, 0);
        if (p == MAP_FAILED)
            die("mmap");
        (void)*(volatile char *)p;
        cancelled_closing(d, NULL);
        if (flock(d, LOCK_EX | LOCK_NB) != 0)
            die("flock");
        close(d);
        munmap(p, WINDOW);
        int other = open(path, O_RDONLY);
        if (flock(other, LOCK_EX | LOCK_NB) == 0)
            printf("round %d: lock granted\n", round);
        else
            printf("round %d: %s\n", round, strerror(errno));
        close(other);
    }
    return 0;
}
