/* What the window programs share (growsdown.c, hugefixed.c, vforkcopy.c,
 * sigclose.c, forkcount.c): DIR/f, SIZE bytes of 'x', written whole and
 * closed, the file their windows are mapped from; its path in PATH (4096
 * bytes). Answers 0, or -1 where it could not be written. */
#ifndef MQ_XFILE_H
#define MQ_XFILE_H
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int x_file(char *path, const char *dir, size_t size) {
    snprintf(path, 4096, "%s/f", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (size_t done = 0; done < size;) {
        size_t n = size - done < sizeof buf ? size - done : sizeof buf;
        if (write(fd, buf, n) != (ssize_t)n) {
            close(fd);
            return -1;
        }
        done += n;
    }
    return close(fd);
}
#endif
