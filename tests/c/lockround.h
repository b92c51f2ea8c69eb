/* One round of the last-close check, after the caller took or shared a
 * flock on `fd`'s open file: a window mapped through `fd` is touched, `fd`
 * closed and the window unmapped; then another open of `path` asks for the
 * lock, which the kernel grants once the locked file's last reference is
 * gone (a flock, and an OFD write lock). Prints "round N: lock granted"
 * or why not. Needs the includer's
 * die(). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

/* The file the rounds lock: `len` bytes of 'x' at `path`. */
static void make_lock_file(const char *path, size_t len) {
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0)
        die("create");
    for (size_t done = 0; done < len;) {
        size_t n = len - done < sizeof buf ? len - done : sizeof buf;
        if (write(f, buf, n) != (ssize_t)n)
            die("create");
        done += n;
    }
    close(f);
}

static void map_close_unmap_then_lock(const char *path, int fd, size_t window, int round) {
    char *p = mmap(NULL, window, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        die("mmap");
    (void)*(volatile char *)p;
    close(fd);
    munmap(p, window);
    /* Read-write: an OFD write lock conflicts with any OFD lock held. */
    int other = open(path, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (flock(other, LOCK_EX | LOCK_NB) == 0 && fcntl(other, F_OFD_SETLK, &fl) == 0)
        printf("round %d: lock granted\n", round);
    else
        printf("round %d: %s\n", round, strerror(errno));
    close(other);
}
