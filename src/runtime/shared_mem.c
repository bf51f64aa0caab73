#include "runtime/shared_mem.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"

/* A learner maps at most this much of a node's memory: a peer's word
 * bounds nothing else here, and more than this is no segment pool. */
#define MAX_PEER_BYTES ((uint64_t)64 << 30)

int ro__shared_mem_create(ro_shared_mem_t *m, const char *name, size_t bytes, char *err,
                          size_t errlen)
{
    m->base = NULL;
    m->bytes = 0;
    m->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (m->fd < 0)
        return ro__errorf(err, errlen, -errno, "memfd_create: %s", strerror(errno));
    const char *what = "ftruncate";
    if (ftruncate(m->fd, (off_t)bytes) != 0)
        goto fail;
    what = "sealing";
    if (fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        goto fail;
    what = "mmap";
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED)
        goto fail;
    m->base = p;
    m->bytes = bytes;
    return 0;
fail:;
    int e = errno;
    close(m->fd);
    m->fd = -1;
    return ro__errorf(err, errlen, -e, "shared memory of %zu bytes: %s: %s", bytes, what,
                      strerror(e));
}

static int map_peer(ro_shared_mem_t *m, pid_t pid, uint32_t fd, uint64_t bytes, bool writable,
                    char *err, size_t errlen)
{
    m->base = NULL;
    m->bytes = 0;
    m->fd = -1;
    if (pid <= 0)
        return ro__errorf(err, errlen, RO_EINVAL, "the node's process is not visible here");
    if (bytes == 0 || bytes > MAX_PEER_BYTES || bytes > SIZE_MAX)
        return ro__errorf(err, errlen, RO_EPROTO, "shared memory of %llu bytes offered",
                          (unsigned long long)bytes);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%u", (int)pid, fd);
    int f = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (f < 0)
        return ro__errorf(err, errlen, -errno, "open %s: %s", path, strerror(errno));
    struct stat st;
    int seals = fcntl(f, F_GET_SEALS);
    int rc = 0;
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes)
        rc = ro__errorf(err, errlen, RO_EPROTO, "%s is not %llu bytes of memory", path,
                        (unsigned long long)bytes);
    else if (seals < 0 || !(seals & F_SEAL_SHRINK))
        rc = ro__errorf(err, errlen, RO_EPROTO, "%s is not sealed against shrinking", path);
    const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    void *p = rc ? MAP_FAILED : mmap(NULL, (size_t)bytes, prot, MAP_SHARED, f, 0);
    if (!rc && p == MAP_FAILED)
        rc = ro__errorf(err, errlen, -errno, "mmap %s: %s", path, strerror(errno));
    close(f); /* the mapping keeps the memory */
    if (rc)
        return rc;
    m->base = p;
    m->bytes = (size_t)bytes;
    return 0;
}

int ro__shared_mem_map_peer(ro_shared_mem_t *m, pid_t pid, uint32_t fd, uint64_t bytes, char *err,
                            size_t errlen)
{
    return map_peer(m, pid, fd, bytes, false, err, errlen);
}

int ro__shared_mem_map_peer_rw(ro_shared_mem_t *m, pid_t pid, uint32_t fd, uint64_t bytes,
                               char *err, size_t errlen)
{
    return map_peer(m, pid, fd, bytes, true, err, errlen);
}

void ro__shared_mem_release(ro_shared_mem_t *m)
{
    if (!m->base) /* zeroed (fd 0 is not ours), failed or released */
        return;
    munmap(m->base, m->bytes);
    if (m->fd >= 0)
        close(m->fd);
    m->base = NULL;
    m->bytes = 0;
    m->fd = -1;
}
