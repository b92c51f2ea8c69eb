/* steplost DIR CALL: round K maps three windows of DIR/f (filled with 'x')
 * and unmaps the second, then unmaps the third with the trap flag set: at
 * step K the SIGTRAP handler makes 64 calls on the first window
 * (madvise MADV_NORMAL, which changes nothing), then CALL on the second,
 * which the program had unmapped: "replace" maps anonymous memory there
 * (MAP_FIXED) and writes 'A' into it; "change" makes it writable
 * (mprotect) and, if that succeeds, writes 'A'; "otherfs" maps there, at
 * the same offset, a file filled with 'y' on another tmpfs with the same
 * inode number (DIR/a/f and DIR/b/f, two tmpfs mounted in a mount
 * namespace of its own: SKIPPED where that is refused); "samefile" maps
 * the same window of the same file there, writable, and writes 'A' into
 * it (told from munmapq's by being writable); "hole" unmaps a
 * page in its middle, and nothing of it may stay mapped. Then the program
 * maps the second window of the file again and reads its first byte, and
 * looks at what the handler mapped: it must still be mapped there (mincore),
 * and the new mapping elsewhere.
 * Without munmapq the byte is always 'x'. With it, a handler that ran
 * while the interrupted hook held the library's table made more calls
 * than the library's record of them holds, and the window it replaced or
 * changed must not be handed out as the file's, nor what replaced it be
 * unmapped. Rounds go on until the handler no longer runs inside the
 * munmap. Prints "not as without munmapq after the handler's CALL: 0 of
 * ROUNDS", or a SKIPPED line on another architecture than x86_64. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __x86_64__
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <ucontext.h>

#define WINDOW (1ul << 20)
#define TRAP_FLAG 0x100L
#define FLOOD 64

static volatile long step, target, hit, replaced, holed;
static char *first, *second;
static const char *call;
static int fd = -1, other = -1;

static void on_step(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    int saved = errno;
    ucontext_t *uc = context;
    if (++step == target) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
        hit = 1;
        for (int i = 0; i < FLOOD; i++)
            madvise(first, 4096, MADV_NORMAL);
        if (strcmp(call, "hole") == 0) {
            holed = munmap(second + WINDOW / 2, 4096) == 0;
        } else if (other >= 0) {
            replaced = mmap(second, 4096, PROT_READ, MAP_FIXED | MAP_PRIVATE, other, WINDOW) == second;
        } else if (strcmp(call, "samefile") == 0) {
            void *p = mmap(second, 4096, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE, fd, WINDOW);
            if (p == second) {
                second[0] = 'A';
                replaced = 1;
            }
        } else if (strcmp(call, "replace") == 0) {
            void *p = mmap(second, 4096, PROT_READ | PROT_WRITE,
                           MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == second) {
                second[0] = 'A';
                replaced = 1;
            }
        } else if (mprotect(second, 4096, PROT_READ | PROT_WRITE) == 0) {
            second[0] = 'A';
        }
    }
    errno = saved;
}

static char block[3 * WINDOW];

/* DIR/NAME/f filled with FILL, opened for reading (-1 if it cannot be). */
static int filled(const char *dir, const char *name, char fill) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/f", dir, name);
    memset(block, fill, sizeof block);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, block, sizeof block) != (ssize_t)sizeof block || close(fd) != 0)
        return -1;
    return open(path, O_RDONLY);
}

/* Writes TEXT to the file PATH. */
static int put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY);
    int ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    return fd >= 0 && close(fd) == 0 && ok ? 0 : -1;
}

/* Two tmpfs mounted at DIR/a and DIR/b in a mount namespace of this
 * process's own (and a user namespace where it is not root); 0 if done. */
static int two_tmpfs(const char *dir) {
    char a[4096], b[4096], map[64];
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (uid == 0 ? unshare(CLONE_NEWNS) : unshare(CLONE_NEWUSER | CLONE_NEWNS))
        return -1;
    if (uid != 0) {
        snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
        if (put("/proc/self/setgroups", "deny") || put("/proc/self/uid_map", map))
            return -1;
        snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
        if (put("/proc/self/gid_map", map))
            return -1;
    }
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) || (mkdir(a, 0755) && errno != EEXIST) ||
        (mkdir(b, 0755) && errno != EEXIST))
        return -1;
    return mount("munmapq-a", a, "tmpfs", 0, "size=8m") || mount("munmapq-b", b, "tmpfs", 0, "size=8m");
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    call = argv[2];
    if (strcmp(call, "otherfs") == 0) {
        struct stat sa, sb;
        if (two_tmpfs(argv[1]) != 0) {
            printf("SKIPPED: no tmpfs of its own: %s\n", strerror(errno));
            return 0;
        }
        fd = filled(argv[1], "a", 'x');
        other = filled(argv[1], "b", 'y');
        if (fd < 0 || other < 0 || fstat(fd, &sa) || fstat(other, &sb))
            return 3;
        if (sa.st_ino != sb.st_ino || sa.st_dev == sb.st_dev) {
            printf("SKIPPED: the two files' inode numbers differ\n");
            return 0;
        }
    } else {
        fd = filled(argv[1], ".", 'x');
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_step;
    sa.sa_flags = SA_SIGINFO;
    if (fd < 0 || sigaction(SIGTRAP, &sa, NULL) != 0)
        return 3;
    long rounds = 0, wrong = 0;
    for (long k = 1; k < 100000; k++) {
        first = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 0);
        second = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, WINDOW);
        char *third = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 2 * WINDOW);
        if (first == MAP_FAILED || second == MAP_FAILED || third == MAP_FAILED)
            return 4;
        munmap(second, WINDOW);
        step = 0;
        target = k;
        hit = 0;
        replaced = 0;
        holed = 0;
        __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" ::"i"(TRAP_FLAG) : "memory", "cc");
        int r = munmap(third, WINDOW);
        __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" ::"i"(~TRAP_FLAG) : "memory", "cc");
        if (r != 0)
            return 5;
        char *again = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, WINDOW);
        if (again == MAP_FAILED)
            return 6;
        unsigned char vec[1];
        wrong += again[0] != 'x';
        wrong += replaced && (again == second || mincore(second, 4096, vec) != 0);
        /* Nothing left of the window around the hole. */
        wrong += holed && again != second &&
                 (mincore(second, 4096, vec) == 0 || mincore(second + WINDOW - 4096, 4096, vec) == 0);
        munmap(again, WINDOW);
        /* The program's own page, where the handler mapped one. */
        if (replaced && again != second)
            munmap(second, 4096);
        munmap(first, WINDOW);
        if (!hit)
            break;
        rounds++;
    }
    printf("not as without munmapq after the handler's %s: %ld of %s\n", call, wrong,
           rounds > 0 ? "every round" : "none");
    return close(fd) || (other >= 0 && close(other));
}
#else
int main(void) {
    printf("SKIPPED: the trap flag is x86_64's\n");
    return 0;
}
#endif
