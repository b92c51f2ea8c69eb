/* Maps and unmaps the first page of FILE N times (each munmap one the
 * library can queue and the next mmap reuse), forks a child that does the
 * same and dies of SIGKILL, then writes to stdout until SIGPIPE ends it:
 * run with the reader of its stdout gone, as under a pager quit early or
 * `| head`. Neither process reaches its exit handlers. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void cycle(int fd, long n) {
    for (long i = 0; i < n; i++) {
        void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED || munmap(p, 4096) != 0)
            _exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 2;
    long n = atol(argv[2]);
    cycle(fd, n);
    pid_t child = fork();
    if (child == 0) {
        cycle(fd, n);
        raise(SIGKILL);
    }
    int status;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 2;
    signal(SIGPIPE, SIG_DFL);
    for (;;)
        if (write(1, "x\n", 2) < 0)
            return 3;
}
