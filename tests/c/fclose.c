/* fclose() where the hooks must leave nothing of their own behind
 * (tests/fd_table.rs).
 *
 *   fclose DIR setcontext
 *       In a second thread: a fopencookie() stream with a byte to flush,
 *       whose write function leaves by setcontext() to a context saved
 *       before its fclose() (as a coroutine switching stacks would); then,
 *       at the same depth, a second such stream whose write function
 *       calls pthread_exit(). The thread must exit: "the thread exited".
 *
 *   fclose DIR longjmp
 *       In a process with threads, a stream on DIR/file (a window mapped
 *       through its descriptor N) whose fclose() is left by longjmp() from
 *       the program's own free(), which glibc's fclose calls after it
 *       closed N: "closed". (The test reads the library's trace.)
 *
 *   fclose DIR longjmp-reopen
 *       A stream on DIR/file, a 2 MiB window mapped through its descriptor
 *       N and still in use, no thread: fclose() left by longjmp() from the
 *       program's own free() after it opened the file again (as N). The
 *       window unmapped, mapped again through N, N locked (flock) and
 *       closed while the window is still mapped: the window holds N's open
 *       file, so a third open's flock must find it held: "lock held".
 *
 *   fclose DIR errno
 *       fclose() of a fopencookie() and of a fmemopen() stream, both with
 *       no descriptor, with errno 0 before: errno after each. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define WINDOW (16 * 1024)

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

static ucontext_t before_fclose;

static ssize_t leave_by_setcontext(void *cookie, const char *buf, size_t n) {
    (void)cookie, (void)buf, (void)n;
    setcontext(&before_fclose);
    return -1;
}

static ssize_t exit_thread(void *cookie, const char *buf, size_t n) {
    (void)cookie, (void)buf, (void)n;
    pthread_exit(NULL);
}

/* fclose(fp) of a cookie stream with a byte to flush, so that its write
 * function runs; always from this one depth. */
static __attribute__((noinline)) void flush_and_close(cookie_io_functions_t io) {
    FILE *fp = fopencookie(NULL, "w", io);
    if (!fp || fputc('x', fp) == EOF)
        die("fopencookie");
    fclose(fp);
}

static void *leave_then_exit(void *arg) {
    (void)arg;
    volatile int left = 0;
    if (getcontext(&before_fclose) != 0)
        die("getcontext");
    if (!left) {
        left = 1;
        flush_and_close((cookie_io_functions_t){.write = leave_by_setcontext});
        die("fclose returned");
    }
    flush_and_close((cookie_io_functions_t){.write = exit_thread});
    return "fclose returned";
}

static int setcontext_case(void) {
    pthread_t t;
    void *how;
    if (pthread_create(&t, NULL, leave_then_exit, NULL) != 0 || pthread_join(t, &how) != 0)
        die("pthread");
    printf("%s\n", how ? (char *)how : "the thread exited");
    return 0;
}

/* free() of the program's own: glibc's fclose frees the stream's buffer
 * and the stream after closing its descriptor; armed, it jumps out. */
extern void __libc_free(void *);
static jmp_buf out_of_fclose;
static volatile int armed;
static void reopen_then_jump(void);

void free(void *p) {
    __libc_free(p);
    if (armed && p) {
        int how = armed;
        armed = 0;
        if (how == 2)
            reopen_then_jump();
        longjmp(out_of_fclose, 1);
    }
}

static void *nothing(void *arg) { return arg; }

static int longjmp_case(const char *path) {
    /* A process with threads: the hooks then make every close ready to
     * be cancelled. */
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
        die("pthread");
    int n = open(path, O_RDONLY);
    FILE *fp = n < 0 ? NULL : fdopen(n, "r");
    if (!fp || fgetc(fp) == EOF)
        die("open");
    char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, n, 0);
    if (p == MAP_FAILED)
        die("mmap");
    (void)*(volatile char *)p;
    if (setjmp(out_of_fclose) == 0) {
        armed = 1;
        fclose(fp);
        die("free was not called");
    }
    if (fcntl(n, F_GETFD) >= 0) {
        printf("the descriptor is still open\n");
        return 1;
    }
    munmap(p, WINDOW);
    printf("closed\n");
    return 0;
}

#define LARGE (2 << 20)

static const char *reopen_path;
static int reopened = -1;

/* As free, but opens the file again (the number fclose just closed)
 * before it jumps. */
static void reopen_then_jump(void) {
    reopened = open(reopen_path, O_RDONLY);
    longjmp(out_of_fclose, 1);
}

static int longjmp_reopen_case(const char *path) {
    int f = open(path, O_WRONLY);
    if (f < 0 || ftruncate(f, 2 * LARGE) != 0)
        die("ftruncate");
    close(f);
    int n = open(path, O_RDONLY);
    FILE *fp = n < 0 ? NULL : fdopen(n, "r");
    if (!fp || fgetc(fp) == EOF)
        die("open");
    char *p = mmap(NULL, LARGE, PROT_READ, MAP_PRIVATE, n, 0);
    if (p == MAP_FAILED)
        die("mmap");
    (void)*(volatile char *)p;
    reopen_path = path;
    if (setjmp(out_of_fclose) == 0) {
        armed = 2;
        fclose(fp);
        die("free was not called");
    }
    if (reopened != n)
        die("reopened elsewhere");
    munmap(p, LARGE);
    char *q = mmap(NULL, LARGE, PROT_READ, MAP_PRIVATE, n, 0);
    if (q == MAP_FAILED)
        die("mmap");
    (void)*(volatile char *)q;
    if (flock(n, LOCK_EX) != 0)
        die("flock");
    close(n);
    int c = open(path, O_RDONLY);
    printf("%s\n", flock(c, LOCK_EX | LOCK_NB) == 0 ? "lock granted" : "lock held");
    munmap(q, LARGE);
    return 0;
}

static ssize_t swallow(void *cookie, const char *buf, size_t n) {
    (void)cookie, (void)buf;
    return (ssize_t)n;
}

static int errno_case(void) {
    FILE *fp = fopencookie(NULL, "w", (cookie_io_functions_t){.write = swallow});
    if (!fp || fputc('x', fp) == EOF)
        die("fopencookie");
    errno = 0;
    int r = fclose(fp);
    printf("cookie stream: fclose %d, errno %d\n", r, errno);
    char buf[8] = "";
    fp = fmemopen(buf, sizeof buf, "r");
    if (!fp)
        die("fmemopen");
    errno = 0;
    r = fclose(fp);
    printf("memory stream: fclose %d, errno %d\n", r, errno);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[4 * WINDOW];
    memset(buf, 'x', sizeof buf);
    if (f < 0 || write(f, buf, sizeof buf) != (ssize_t)sizeof buf)
        return 2;
    close(f);
    if (strcmp(argv[2], "setcontext") == 0)
        return setcontext_case();
    if (strcmp(argv[2], "longjmp") == 0)
        return longjmp_case(path);
    if (strcmp(argv[2], "longjmp-reopen") == 0)
        return longjmp_reopen_case(path);
    if (strcmp(argv[2], "errno") == 0)
        return errno_case();
    return 2;
}
