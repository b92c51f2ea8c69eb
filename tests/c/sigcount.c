/* Counts the signals it receives for a while, then prints the counts:
 * `sigcount SECONDS SIG...` prints "ready PID" once its handlers are in
 * place, then after SECONDS one line "SIG COUNT" per signal, and exits 0.
 * A realtime signal is queued, never merged: its count is exact. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t counts[65];

static void handler(int sig) {
    if (sig > 0 && sig < 65)
        counts[sig]++;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    double seconds = atof(argv[1]);
    for (int i = 2; i < argc; i++) {
        struct sigaction sa = {0};
        sa.sa_handler = handler;
        sigemptyset(&sa.sa_mask);
        if (sigaction(atoi(argv[i]), &sa, NULL) != 0)
            return 3;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double end = now() + seconds;
    while (now() < end) {
        struct timespec t = {0, 10 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    for (int i = 2; i < argc; i++)
        printf("%s %d\n", argv[i], (int)counts[atoi(argv[i])]);
    return 0;
}
