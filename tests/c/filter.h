/* What the seccomp test programs share: the filter's opening, which
 * kills a process of another architecture and loads the system call's
 * number, and whether libmunmapq is in the address space (read from
 * /proc/self/maps before any filter is in place). */
#ifndef MUNMAPQ_TEST_FILTER_H
#define MUNMAPQ_TEST_FILTER_H

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "x86_64 or aarch64"
#endif

/* The first statements of every filter: another architecture is killed,
 * then the system call's number is loaded for the rules after it. */
#define FILTER_OPENING                                                        \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),                      \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),                  \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

static int library_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, "libmunmapq") != NULL;
    fclose(f);
    return found;
}

#endif
