/* A program reading files as git reads its loose objects: open, fstat,
 * map the whole file, close, read it, unmap; each file once, but every
 * REUSE-th one read again at once (reuse too rare for munmapq's queue to
 * pay: tests/payoff.rs counts the system calls).
 *
 *   loose DIR COUNT REUSE [HOLE]
 *       reads DIR/0 .. DIR/COUNT-1; prints the sum of their bytes.
 *       With HOLE, first maps DIR/0 for good and 1 MiB of anonymous
 *       memory, which it gives back after HOLE reads: the later reads are
 *       mapped in the hole it leaves, between that file and the first
 *       reads' addresses, as git's reads land where its growing arrays
 *       were.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned long read_file(const char *dir, long i) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%ld", dir, i);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        exit(1);
    }
    unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    close(fd);
    unsigned long sum = 0;
    for (off_t k = 0; k < st.st_size; k++)
        sum += p[k];
    if (munmap(p, st.st_size) != 0) {
        perror("munmap");
        exit(1);
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: loose DIR COUNT REUSE [HOLE]\n");
        return 2;
    }
    long count = atol(argv[2]), reuse = atol(argv[3]);
    long hole = argc == 5 ? atol(argv[4]) : -1;
    unsigned long sum = 0;
    void *anon = NULL;
    if (hole >= 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/0", argv[1]);
        int fd = open(path, O_RDONLY);
        if (fd < 0 || mmap(NULL, 100, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
            perror(path);
            exit(1);
        }
        close(fd);
        anon = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (anon == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
    }
    for (long i = 0; i < count; i++) {
        if (i == hole)
            munmap(anon, 1 << 20);
        sum += read_file(argv[1], i);
        if (reuse > 0 && i % reuse == 0)
            sum += read_file(argv[1], i);
    }
    printf("%lu\n", sum);
    return 0;
}
