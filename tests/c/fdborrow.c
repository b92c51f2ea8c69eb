/* fdborrow DIR ROUNDS: while the main thread maps, reads and unmaps 16 MiB
 * windows of DIR/big (the queue over its resident budget, so that the
 * library reads /proc now and then), a second thread points the lowest
 * free number at a file of its own with dup2, looks at it and closes it,
 * over and over. The library's reads of /proc take that same number for
 * their length: the thread's descriptor must never be closed behind it,
 * nor its file's offset moved. Prints "closed behind the program: 0,
 * offset moved: 0" (and how often dup2 found the number being opened:
 * EBUSY, which the kernel answers while any open takes it). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WINDOW (16ul << 20)
#define WINDOWS 8

static volatile int stop;
static int number, source;
static long closed_behind, moved, busy;

static void *borrow(void *arg) {
    (void)arg;
    while (!stop) {
        if (dup2(source, number) != number) {
            if (errno == EBUSY) {
                busy++;
                continue;
            }
            exit(5);
        }
        for (int k = 0; k < 50; k++) {
            struct stat st;
            if (fstat(number, &st) != 0) {
                closed_behind++;
                break;
            }
        }
        off_t at = lseek(number, 0, SEEK_CUR);
        if (at != 0 && at != -1)
            moved++;
        lseek(source, 0, SEEK_SET);
        close(number);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/big", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, WINDOW * WINDOWS) != 0 || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    snprintf(path, sizeof path, "%s/small", argv[1]);
    source = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || source < 0 || write(source, "0123456789", 10) != 10)
        return 3;
    lseek(source, 0, SEEK_SET);
    /* The lowest free number, taken by no one now. */
    number = dup(source);
    close(number);
    pthread_t t;
    if (pthread_create(&t, NULL, borrow, NULL) != 0)
        return 4;
    long rounds = atol(argv[2]);
    for (long r = 0; r < rounds; r++) {
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (off_t)(r % WINDOWS) * WINDOW);
        if (p == MAP_FAILED)
            return 6;
        for (size_t o = 0; o < WINDOW; o += 1 << 16)
            (void)*(volatile char *)(p + o);
        munmap(p, WINDOW);
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("closed behind the program: %ld, offset moved: %ld\n", closed_behind, moved);
    fprintf(stderr, "dup2 answered EBUSY %ld times\n", busy);
    return 0;
}
