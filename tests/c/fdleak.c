/* A SIGALRM timeout loop built on sigsetjmp/
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
#define ALARM_JUMPS
#include "alarm.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>

static void touch(const char *p, size_t off) {
    (void)off;
    (void)*(volatile const char *)p;
}

static void unmapped(char *p) {
    (void)p;
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
    int fd = open_data(argc, argv, O_RDONLY | O_CLOEXEC);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    int before = open_fds();
    /* The jumps often land in a munmap reading /proc/self/statm. */
    struct jumps n = jump_loop(fd, pg, 37, touch, unmapped);

    printf("jumps: %s\n", n.jumps >= 100 ? "many" : "few");
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
    fprintf(stderr, "jumps=%lu iterations=%lu\n", n.jumps, n.iterations);
    return 0;
}
