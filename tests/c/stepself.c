/* stepself DIR: the program single-steps itself (the x86 trap flag, a
 * SIGTRAP handler that counts steps) through the munmap of a window of
 * DIR/f, the mmap of the same window again and its munmap: the first
 * deferral of a process is where the library reads /proc for the queue's
 * size. Every step reaches the program's handler, as without the library.
 * Prints "munmap: 0, mmap: ok, munmap: 0, stepped: yes", or a SKIPPED
 * line on another architecture than x86_64. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __x86_64__
#define WINDOW (4ul << 20)
#define TRAP_FLAG 0x100L

static volatile long steps;

static void on_step(int sig) {
    (void)sig;
    steps++;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, WINDOW) != 0 || close(fd) != 0)
        return 3;
    fd = open(path, O_RDONLY);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_step;
    if (fd < 0 || sigaction(SIGTRAP, &sa, NULL) != 0)
        return 3;
    char *w = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    if (w == MAP_FAILED)
        return 4;
    __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" ::"i"(TRAP_FLAG) : "memory", "cc");
    int first = munmap(w, WINDOW);
    char *again = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
    int second = again == MAP_FAILED ? -2 : munmap(again, WINDOW);
    __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" ::"i"(~TRAP_FLAG) : "memory", "cc");
    printf("munmap: %d, mmap: %s, munmap: %d, stepped: %s\n", first,
           again == MAP_FAILED ? "failed" : "ok", second, steps > 100 ? "yes" : "no");
    return close(fd);
}
#else
int main(void) {
    printf("SKIPPED: the trap flag is x86_64's\n");
    return 0;
}
#endif
