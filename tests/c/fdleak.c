/* Issue 18, scenario 8: a SIGALRM timeout loop built on sigsetjmp/
 * siglongjmp (as tests/c/longjmp.c), the jump landing wherever the signal
 * finds the program, here often inside a munmap that reads
 * /proc/self/statm (every deferral reads it while RLIMIT_AS is set: the
 * test runs this under `ulimit -v`). A jump between that open and its
 * close leaves a descriptor nobody will close. After the loop the program
 * counts its open descriptors and opens its data file 16 times: without
 * munmapq, always the same count and 16 of 16 (under a small `ulimit -n`
 * too).
 *
 *   fdleak FILE   (FILE: a data file of at least 64 pages, mq-probe mkfile) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf back;
static volatile sig_atomic_t armed;

static void on_alarm(int sig) {
    (void)sig;
    if (armed)
        siglongjmp(back, 1);
}

static void timer(long usec) {
    struct itimerval it = {{0, usec}, {0, usec}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Open descriptors, not counting the one opendir uses; -errno if they
 * cannot be listed. */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 2;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    int before = open_fds();

    volatile unsigned long jumps = 0, iterations = 0;
    volatile size_t k = 0;
    char *volatile cur = NULL;
    time_t until = time(NULL) + 3;

    timer(37);
    if (sigsetjmp(back, 1))
        jumps++;
    armed = 1;
    while (jumps < 3000 && time(NULL) < until) {
        if (cur) {
            munmap(cur, pg);
            cur = NULL;
        }
        /* No jump out of mmap (a mapping made but never returned would be
         * lost, with or without munmapq); munmap is where it may land. */
        sigprocmask(SIG_BLOCK, &alrm, NULL);
        size_t off = (k++ % 64) * pg;
        char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
        if (p != MAP_FAILED)
            cur = p;
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        if (p == MAP_FAILED)
            continue;
        (void)*(volatile char *)p;
        munmap(p, pg);
        cur = NULL;
        iterations++;
    }
    armed = 0;
    timer(0);
    if (cur)
        munmap(cur, pg);

    printf("jumps: %s\n", jumps >= 100 ? "many" : "few");
    int after = open_fds();
    if (after >= 0)
        printf("open descriptors before the loop: %d, after: %d\n", before, after);
    else
        printf("open descriptors before the loop: %d, after: cannot list them (%s)\n", before,
               after == -EMFILE ? "EMFILE" : strerror(-after));
    int opened = 0, emfile = 0;
    for (int i = 0; i < 16; i++) {
        int f = open(argv[1], O_RDONLY | O_CLOEXEC);
        if (f >= 0)
            opened++;
        else
            emfile += errno == EMFILE;
    }
    printf("own opens of the data file after the loop: %d of 16 (%d EMFILE)\n", opened, emfile);
    fprintf(stderr, "jumps=%lu iterations=%lu\n", jumps, iterations);
    return 0;
}
