/* vdsoat DIR [high]: unmaps the vDSO (and its data pages), maps and unmaps a
 * window of DIR/f three times, then asks the kernel to map the vDSO at
 * the window's address (arch_prctl(ARCH_MAP_VDSO_64) through syscall, as
 * a checkpoint's restore does): the address is free, so it lands there.
 * With "high", the option is passed with bits above its 32 set, which the
 * kernel does not look at (it reads an int).
 * Nothing after the unmap may use the vDSO (no clock or time call).
 * Prints SKIPPED off x86_64 or where the kernel refuses the option. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xfile.h"

#define WINDOW (64 << 10)

/* The lowest start of [vdso] or [vvar...] mappings, each unmapped first
 * when `drop`. */
static uintptr_t vdso_at(int drop) {
    static char line[512];
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    uintptr_t lo[8], hi[8], first = 0;
    int n = 0;
    while (fgets(line, sizeof line, f))
        if ((strstr(line, "[vdso]") || strstr(line, "[vvar")) && n < 8) {
            sscanf(line, "%lx-%lx", &lo[n], &hi[n]);
            if (!first || lo[n] < first)
                first = lo[n];
            n++;
        }
    fclose(f);
    for (int i = 0; drop && i < n; i++)
        munmap((void *)lo[i], hi[i] - lo[i]);
    return first;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3)
        return 2;
#if !defined(__x86_64__)
    puts("SKIPPED: the vDSO is placed by arch_prctl on x86_64 only");
    return 0;
#else
    char path[4096];
    if (x_file(path, argv[1], 8 * WINDOW) != 0)
        return 3;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || vdso_at(1) == 0)
        return 3;
    char *p = NULL;
    for (int i = 0; i < 3; i++) {
        p = mmap(NULL, WINDOW, PROT_READ, MAP_PRIVATE, fd, 2 * WINDOW);
        if (p == MAP_FAILED)
            return 4;
        (void)*(volatile char *)p;
        munmap(p, WINDOW);
    }
    long option = 0x2003; /* ARCH_MAP_VDSO_64 */
    if (argc == 3 && strcmp(argv[2], "high") == 0)
        option |= 1L << 32;
    long r = syscall(SYS_arch_prctl, option, (unsigned long)p);
    if (r < 0) {
        printf("SKIPPED: ARCH_MAP_VDSO_64 is refused here (%s)\n", strerror(errno));
        return 0;
    }
    uintptr_t at = vdso_at(0);
    printf("the vDSO asked at a freed address: %s\n",
           at == (uintptr_t)p ? "there" : "elsewhere");
    return 0;
#endif
}
