#include "runtime/io.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int ro__write_all(int fd, const void *p, size_t n, size_t *done)
{
    const uint8_t *b = p;
    size_t written = 0;
    int rc = 0;
    while (written < n) {
        ssize_t k = write(fd, b + written, n - written);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        written += (size_t)k;
    }
    if (done)
        *done = written;
    return rc;
}
