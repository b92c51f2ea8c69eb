/* exefile DIR: replaces the process's executable file, as a checkpoint's
 * restore does (prctl(PR_SET_MM, PR_SET_MM_MAP) with a new exe_fd, every
 * other field as it is), after moving anonymous copies over every mapping
 * of the old file and mapping and unmapping a window of it three times.
 * The kernel refuses with EBUSY while the old file is still mapped: the
 * program unmapped all of it, so it must be granted. Prints SKIPPED where
 * the call is not allowed here (CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN,
 * a kernel or emulator without it). DIR is unused. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define WINDOW (64 << 10)

/* Room for a window past the first pages of the file. */
__attribute__((used)) static const char pad[512 << 10] = {1};

static char exe[4096];

/* Each mapping of the executable replaced, at its place, by an anonymous
 * copy with its protection: the program runs on, the file is unmapped. */
static int drop_exe_mappings(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    struct { unsigned long lo, hi; int prot; } seg[32];
    int n = 0;
    char line[8192];
    while (fgets(line, sizeof line, f) && n < 32) {
        unsigned long lo, hi;
        char perms[8], path[4096] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095[^\n]", &lo, &hi, perms, path) < 3)
            continue;
        char *p = path;
        while (*p == ' ')
            p++;
        if (strcmp(p, exe) != 0)
            continue;
        seg[n].lo = lo;
        seg[n].hi = hi;
        seg[n].prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                      (perms[2] == 'x' ? PROT_EXEC : 0);
        n++;
    }
    fclose(f);
    for (int i = 0; i < n; i++) {
        size_t len = seg[i].hi - seg[i].lo;
        char *c = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (c == MAP_FAILED)
            return -1;
        if (seg[i].prot & PROT_READ)
            memcpy(c, (void *)seg[i].lo, len);
        mprotect(c, len, seg[i].prot);
        if (mremap(c, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)seg[i].lo) == MAP_FAILED)
            return -1;
    }
    return 0;
}

/* Every field of PR_SET_MM_MAP as the kernel has it now (/proc/self/stat),
 * the executable's descriptor aside. */
static int mm_map_now(struct prctl_mm_map *m) {
    FILE *st = fopen("/proc/self/stat", "r");
    if (!st)
        return -1;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, st);
    buf[n] = 0;
    fclose(st);
    char *q = strrchr(buf, ')');
    if (!q)
        return -1;
    unsigned long long v[64] = {0};
    int i = 3;
    for (char *tok = strtok(q + 2, " "); tok && i < 64; tok = strtok(NULL, " "))
        v[i++] = strtoull(tok, NULL, 10);
    memset(m, 0, sizeof *m);
    m->start_code = v[26];
    m->end_code = v[27];
    m->start_stack = v[28];
    m->start_data = v[45];
    m->end_data = v[46];
    m->start_brk = v[47];
    m->arg_start = v[48];
    m->arg_end = v[49];
    m->env_start = v[50];
    m->env_end = v[51];
    m->brk = (unsigned long)sbrk(0);
    return 0;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return 3;
    exe[k] = 0;
    struct prctl_mm_map m;
    if (drop_exe_mappings() != 0 || mm_map_now(&m) != 0)
        return 3;
    int fd = open(exe, O_RDONLY);
    if (fd < 0)
        return 3;
    for (int round = 0; round < 3; round++) {
        volatile unsigned char *p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 2 * WINDOW);
        if (p == MAP_FAILED)
            return 4;
        (void)p[0];
        munmap((void *)p, WINDOW);
    }
    m.exe_fd = open("/bin/true", O_RDONLY);
    int r = prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof m, 0);
    int e = errno;
    if (r != 0 && e != EBUSY) {
        printf("SKIPPED: PR_SET_MM_MAP is refused here (%s)\n", strerror(e));
        return 0;
    }
    printf("exe file replaced: %s\n", r == 0 ? "ok" : strerror(e));
    return 0;
}
