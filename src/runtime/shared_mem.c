#include "runtime/shared_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1; older libc headers lack it */
#endif

/* A learner maps at most this much of a node's memory: a peer's word
 * bounds nothing else here, and more than this is no segment pool. */
#define MAX_PEER_BYTES ((uint64_t)64 << 30)

int ro__shared_mem_create(ro_shared_mem_t *m, const char *name, size_t bytes, bool peer_writes,
                          char *err, size_t errlen)
{
    m->base = NULL;
    m->bytes = 0;
    m->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (m->fd < 0)
        return ro__errorf(err, errlen, -errno, "memfd_create: %s", strerror(errno));
    void *p = MAP_FAILED;
    const char *what = "ftruncate";
    if (ftruncate(m->fd, (off_t)bytes) != 0)
        goto fail;
    what = "sealing";
    if (fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
        goto fail;
    what = "mmap";
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED)
        goto fail;
    /* Ours to write, through the mapping made above; the peer's to read
     * only: no writable mapping, no write() from now on, by anyone. */
    what = "sealing against writes";
    if (!peer_writes && fcntl(m->fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0)
        goto fail;
    what = "sealing";
    if (fcntl(m->fd, F_ADD_SEALS, F_SEAL_SEAL) != 0)
        goto fail;
    m->base = p;
    m->bytes = bytes;
    return 0;
fail:;
    int e = errno;
    if (p != MAP_FAILED)
        munmap(p, bytes);
    close(m->fd);
    m->fd = -1;
    return ro__errorf(err, errlen, -e, "shared memory of %zu bytes: %s: %s", bytes, what,
                      strerror(e));
}

int ro__shared_mem_map_peer(ro_shared_mem_t *m, const int *fds, unsigned nfds, uint32_t index,
                            uint64_t bytes, bool writable, const char *what, char *err,
                            size_t errlen)
{
    m->base = NULL;
    m->bytes = 0;
    m->fd = -1;
    if (index == 0 || index > nfds)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "its %s is descriptor %u of the %u that came with the welcome", what,
                          index, nfds);
    if (bytes == 0 || bytes > MAX_PEER_BYTES || bytes > SIZE_MAX)
        return ro__errorf(err, errlen, RO_EPROTO, "its %s of %llu bytes offered", what,
                          (unsigned long long)bytes);
    const int f = fds[index - 1];
    struct stat st;
    int seals = fcntl(f, F_GET_SEALS);
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes)
        return ro__errorf(err, errlen, RO_EPROTO, "its %s is not %llu bytes of memory", what,
                          (unsigned long long)bytes);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return ro__errorf(err, errlen, RO_EPROTO, "its %s is not sealed against shrinking", what);
    const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    void *p = mmap(NULL, (size_t)bytes, prot, MAP_SHARED, f, 0);
    if (p == MAP_FAILED)
        return ro__errorf(err, errlen, -errno, "mapping its %s: %s", what, strerror(errno));
    m->base = p;
    m->bytes = (size_t)bytes;
    return 0;
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

int ro__process_private(void)
{
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : -errno;
}
