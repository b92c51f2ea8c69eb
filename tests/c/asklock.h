/* Another process that asks for a file's lock when told to (sigclose.c,
 * threadclose.c): it opens the file and asks for an exclusive flock
 * without waiting, which the kernel grants once every open file that held
 * one is gone (its last close). */
#ifndef MQ_ASKLOCK_H
#define MQ_ASKLOCK_H
#include <fcntl.h>
#include <sys/file.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct asker {
    pid_t pid;
    int ask, answer;
};

/* Starts the process that asks for PATH's lock; 0, or -1. */
static int asker_start(struct asker *a, const char *path) {
    int ask[2], answer[2];
    if (pipe(ask) != 0 || pipe(answer) != 0)
        return -1;
    a->pid = fork();
    if (a->pid < 0)
        return -1;
    if (a->pid == 0) {
        char c;
        close(ask[1]);
        while (read(ask[0], &c, 1) == 1) {
            int f = open(path, O_RDONLY);
            char r = flock(f, LOCK_EX | LOCK_NB) == 0 ? 'g' : 'r';
            close(f);
            if (write(answer[1], &r, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    a->ask = ask[1];
    a->answer = answer[0];
    return 0;
}

/* Whether the lock was granted now: 1, 0, or -1 where the process did not
 * answer. */
static int asker_granted(const struct asker *a) {
    char c = 'q', r;
    if (write(a->ask, &c, 1) != 1 || read(a->answer, &r, 1) != 1)
        return -1;
    return r == 'g';
}

/* Ends the process. */
static void asker_stop(const struct asker *a) {
    close(a->ask);
    waitpid(a->pid, NULL, 0);
}
#endif
