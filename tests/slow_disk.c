/*
 * A disk that stalls on demand, for tests only: linked into a test build of
 * rollout-node (tests/meson.build: rollout-node-slow-disk, never installed)
 * with -Wl,--wrap=write, so every write(2) the library makes comes here
 * first. The shipped binaries have no such hook.
 *
 * RO_TEST_DISK_GATE=PATH: while the file PATH exists, writes to trajectory
 * files (regular files whose name contains ".traj") are held; the first held
 * write creates PATH.held, so the test knows the recorder is stalled.
 * Removing PATH lets every held write through. Other writes (stderr, the
 * metrics file, a saved policy) are never held.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);

/* Read once, before main: no thread writes yet. */
static const char *gate;
static char held_marker[PATH_MAX];

__attribute__((constructor)) static void read_gate(void)
{
    gate = getenv("RO_TEST_DISK_GATE");
    if (gate && snprintf(held_marker, sizeof held_marker, "%s.held", gate) >= PATH_MAX)
        gate = NULL;
}

static int is_trajectory_file(int fd)
{
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k <= 0)
        return 0;
    target[k] = '\0';
    return strstr(target, ".traj") != NULL;
}

static int gate_closed(void)
{
    struct stat st;
    return stat(gate, &st) == 0;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    /* stdin/stdout/stderr are never trajectory files: the node's signal
     * handler writes to stderr, and must not come through the checks. */
    if (fd <= STDERR_FILENO || !gate)
        return __real_write(fd, buf, n);
    int saved = errno;
    if (is_trajectory_file(fd) && gate_closed()) {
        int m = open(held_marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (m >= 0)
            close(m);
        /* A pause between looks at the gate, which the test opens. */
        const struct timespec pause = {0, 1000000};
        while (gate_closed())
            nanosleep(&pause, NULL);
    }
    errno = saved;
    return __real_write(fd, buf, n);
}
