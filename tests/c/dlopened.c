/* Loads the library named by argv[1] with dlopen, not LD_PRELOAD, then
 * maps and unmaps a window of argv[2] a few times. The program's calls
 * bind to libc's mmap and munmap: the library is loaded but not
 * interposed, as on macOS when dyld loads an inserted library without the
 * permission to interpose. Prints "mapped N" on success. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dlopened LIB FILE\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 2;
    }
    long page = sysconf(_SC_PAGESIZE);
    int n = 0;
    for (int i = 0; i < 8; i++) {
        void *p = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        (void)((volatile char *)p)[0];
        n++;
        if (munmap(p, (size_t)page) != 0) {
            perror("munmap");
            return 1;
        }
    }
    printf("mapped %d\n", n);
    return 0;
}
