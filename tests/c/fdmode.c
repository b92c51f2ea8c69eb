/* What a reuse costs, and what the per-descriptor F_GETFL answer
 * munmapq keeps (core/src/readonly_fds.rs) must never hide.
 *
 *   fdmode FILE cycle ROUNDS WINDOWS
 *       maps, reads and unmaps WINDOWS 16 KiB windows of FILE in turn,
 *       ROUNDS times, through one read-only descriptor (strace counts the
 *       system calls: tests/fd_mode.rs).
 *   fdmode FILE reopen HOW
 *       fd A and fd B are read-only descriptors of FILE; window 0 is
 *       mapped and unmapped through B (munmapq asks F_GETFL about B once),
 *       window 1 through A (queued with munmapq). Then B's number is made
 *       to name a write-only (or, with HOW rdwr, read-write) description
 *       of FILE, by HOW: close, dup2, dup3, close_range, fclose (B was a
 *       stream's), syscall (syscall(SYS_close)), syscall_high and
 *       syscall_dup3_high (syscall(SYS_close) and syscall(SYS_dup3) with
 *       the descriptor's upper 32 bits set: the kernel takes it as an
 *       unsigned int), opath (close, then open
 *       O_PATH), rdwr (close, then open O_RDWR). A PROT_READ, MAP_PRIVATE
 *       mmap of window 1 through B must then fail with EACCES (EBADF for
 *       O_PATH) as it does without munmapq (the queued
 *       mapping made through A must not be handed back); through a
 *       read-write B it succeeds, and its munmap must really unmap (a
 *       mapping made through a read-write descriptor is never queued).
 *
 *   fdmode FILE high ROUNDS
 *       ROUNDS times: FILE opened, moved to a descriptor numbered 4999 or
 *       more, window ROUND % 16 (a miss, where FILE has 16 windows and
 *       ROUNDS is at most 16) mapped through it, the descriptor closed, the
 *       window unmapped (strace counts the system calls).
 *   fdmode FILE large ROUNDS
 *       ROUNDS times: FILE opened, its first LARGE bytes (more than 1 MiB)
 *       mapped and read, the descriptor closed, the mapping unmapped
 *       (strace counts the system calls). FILE: at least LARGE bytes.
 *
 * FILE: a data file of at least 8 windows (mq-probe mkfile). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WINDOW (16 * 1024)

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

static int open_or_die(const char *file, int flags) {
    int fd = open(file, flags);
    if (fd < 0)
        die("open");
    return fd;
}

/* Maps window `w` through `fd`, reads its first byte, unmaps it. */
static int map_read_unmap(int fd, int w) {
    char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, (off_t)w * WINDOW);
    if (p == MAP_FAILED)
        die("mmap");
    int c = *(volatile char *)p;
    if (munmap(p, WINDOW) != 0)
        die("munmap");
    return c;
}

static int cycle(const char *file, long rounds, int windows) {
    int fd = open_or_die(file, O_RDONLY);
    long sum = 0;
    for (long r = 0; r < rounds; r++)
        for (int w = 0; w < windows; w++)
            sum += map_read_unmap(fd, w);
    printf("sum %ld\n", sum);
    return 0;
}

/* Whether a mapping starts at `p`, by /proc/self/maps (mincore would
 * not do: munmapq unmaps queued mappings in its range first, as it must). */
static int mapped(void *p) {
    char line[512], start[32];
    snprintf(start, sizeof start, "%lx-", (unsigned long)p);
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        die("/proc/self/maps");
    int found = 0;
    while (!found && fgets(line, sizeof line, maps))
        found = !strncmp(line, start, strlen(start));
    fclose(maps);
    return found;
}

/* Makes the number `b` name a new description of `file` opened with
 * `flags`, by `how`. */
static void replace(const char *file, int b, FILE *stream, const char *how, int flags) {
    int got = b, w;
    if (!strcmp(how, "close") || !strcmp(how, "rdwr") || !strcmp(how, "opath")) {
        close(b);
        got = open_or_die(file, flags);
    } else if (!strcmp(how, "close_range")) {
        if (close_range(b, b, 0) != 0)
            die("close_range");
        got = open_or_die(file, flags);
    } else if (!strcmp(how, "syscall")) {
        syscall(SYS_close, b);
        got = open_or_die(file, flags);
    } else if (!strcmp(how, "syscall_high")) {
        if (syscall(SYS_close, (long)b | 1L << 32) != 0)
            die("syscall(SYS_close)");
        got = open_or_die(file, flags);
    } else if (!strcmp(how, "syscall_dup3_high")) {
        w = open_or_die(file, flags);
        got = syscall(SYS_dup3, (long)w | 3L << 32, (long)b | 1L << 32, 0);
        close(w);
    } else if (!strcmp(how, "fclose")) {
        fclose(stream);
        got = open_or_die(file, flags);
    } else if (!strcmp(how, "dup2") || !strcmp(how, "dup3")) {
        w = open_or_die(file, flags);
        got = !strcmp(how, "dup2") ? dup2(w, b) : dup3(w, b, 0);
        close(w);
    } else {
        printf("unknown HOW %s\n", how);
        exit(2);
    }
    if (got != b) {
        printf("%s: the new description is on %d, not %d\n", how, got, b);
        exit(1);
    }
}

static int reopen(const char *file, const char *how) {
    int rdwr = !strcmp(how, "rdwr");
    int a = open_or_die(file, O_RDONLY);
    FILE *stream = NULL;
    int b;
    if (!strcmp(how, "fclose")) {
        stream = fopen(file, "r");
        if (!stream)
            die("fopen");
        b = fileno(stream);
    } else {
        b = open_or_die(file, O_RDONLY);
    }
    map_read_unmap(b, 0);
    map_read_unmap(b, 0);
    map_read_unmap(a, 1);
    replace(file, b, stream, how, rdwr ? O_RDWR : !strcmp(how, "opath") ? O_PATH : O_WRONLY);
    char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, b, WINDOW);
    if (p == MAP_FAILED) {
        printf("%s: mmap through the new description: %s\n", how, strerror(errno));
        return 0;
    }
    printf("%s: mmap through the new description: mapped\n", how);
    /* A window no mapping of A covers: made through B now. */
    char *q = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, b, 2 * WINDOW);
    if (q == MAP_FAILED)
        die("mmap window 2");
    munmap(p, WINDOW);
    munmap(q, WINDOW);
    printf("%s: after munmap the mapping made through it is %s\n", how,
           mapped(q) ? "still there" : "gone");
    return 0;
}

/* ROUNDS times: FILE opened, its descriptor moved to a number at or above
 * 4096 (F_DUPFD), window ROUND % 16 mapped through it and read, the
 * descriptor closed, the window unmapped. */
static int high(const char *file, long rounds) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < 5000)
        die("RLIMIT_NOFILE");
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("setrlimit");
    long sum = 0;
    for (long r = 0; r < rounds; r++) {
        int fd = open_or_die(file, O_RDONLY);
        int hi = fcntl(fd, F_DUPFD, 4999);
        if (hi < 4096)
            die("F_DUPFD");
        close(fd);
        char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, hi, (off_t)(r % 16) * WINDOW);
        if (p == MAP_FAILED)
            die("mmap");
        sum += *(volatile char *)p;
        close(hi);
        munmap(p, WINDOW);
    }
    printf("sum %ld\n", sum);
    return 0;
}

#define LARGE ((1 << 20) + WINDOW)

/* ROUNDS times: FILE opened, its first LARGE bytes mapped and read, the
 * descriptor closed, the mapping unmapped. */
static int large(const char *file, long rounds) {
    long sum = 0;
    for (long r = 0; r < rounds; r++) {
        int fd = open_or_die(file, O_RDONLY);
        char *p = mmap(NULL, LARGE, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            die("mmap");
        sum += *(volatile char *)(p + LARGE - 1);
        close(fd);
        munmap(p, LARGE);
    }
    printf("sum %ld\n", sum);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[2], "large"))
        return large(argv[1], atol(argv[3]));
    if (argc >= 4 && !strcmp(argv[2], "high"))
        return high(argv[1], atol(argv[3]));
    if (argc >= 5 && !strcmp(argv[2], "cycle"))
        return cycle(argv[1], atol(argv[3]), atoi(argv[4]));
    if (argc >= 4 && !strcmp(argv[2], "reopen"))
        return reopen(argv[1], argv[3]);
    fprintf(stderr, "usage: fdmode FILE cycle ROUNDS WINDOWS | fdmode FILE reopen HOW | fdmode FILE high ROUNDS\n");
    return 2;
}
