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
 *       "lock granted". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
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

static void *close_cancelled(void *arg) {
    int d = *(int *)arg;
    int old;
    /* The request arrives while cancellation is disabled, so it is
     * pending when close() is entered. */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    while (!*((volatile int *)arg + 1))
        ;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    close(d);
    return "not cancelled";
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/file", argv[1]);
    make_file(path, 4 * WINDOW);
    for (int round = 0; round < 3; round++) {
        int d = open(path, O_RDONLY);
        if (d < 0)
            die("open");
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, d, 0);
        if (p == MAP_FAILED)
            die("mmap");
        (void)*(volatile char *)p;
        int arg[2] = {d, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, close_cancelled, arg) != 0)
            die("pthread_create");
        pthread_cancel(t);
        arg[1] = 1;
        void *how;
        pthread_join(t, &how);
        if (how != PTHREAD_CANCELED) {
            printf("round %d: the thread was not cancelled\n", round);
            return 1;
        }
        if (fcntl(d, F_GETFD) < 0)
            die("the descriptor was closed");
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
