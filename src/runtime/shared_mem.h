/*
 * Memory shared with a learner on the same host: read-only (stream mode's
 * segments, docs/protocol.md "Segments in shared memory"; SEED mode's
 * observations), or written by the learner (SEED mode's actions, which the
 * owner copies out and checks before it uses them).
 *
 * The owner (a node) allocates it as a sealed memfd: its size can never
 * change (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so a mapping of it
 * never faults past its end. A peer maps it by opening
 * /proc/<owner pid>/fd/<fd>: the kernel lets only a process that may
 * inspect the owner (the same user, by default) do that, and a read-only
 * peer's mapping cannot write. Each side treats memory the other writes as
 * untrusted bytes: the peer checks the seals and the size before mapping,
 * and every offset it is given against the size.
 *
 * Both sides: any thread, but one owner per ro_shared_mem_t.
 */
#ifndef RO_SHARED_MEM_H
#define RO_SHARED_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ro_shared_mem {
    void *base;   /* the mapping; NULL when none */
    size_t bytes; /* its size */
    int fd;       /* the memfd (owner) or -1 (a peer closes it once mapped) */
} ro_shared_mem_t;

/* ro__shared_mem_create makes bytes of zeroed, sealed, shared memory
 * named name (for /proc/PID/fd). 0, or a negative code with one line in
 * err (no memfd on this kernel, out of memory). */
int ro__shared_mem_create(ro_shared_mem_t *m, const char *name, size_t bytes, char *err,
                          size_t errlen);

/* ro__shared_mem_map_peer maps read-only the memory process pid holds as
 * its file descriptor fd, which must be bytes long and sealed against
 * shrinking. 0, or a negative code with one line in err naming why not. */
int ro__shared_mem_map_peer(ro_shared_mem_t *m, pid_t pid, uint32_t fd, uint64_t bytes, char *err,
                            size_t errlen);

/* ro__shared_mem_map_peer_rw is ro__shared_mem_map_peer for memory the
 * peer writes to (SEED mode's actions): mapped read-write. */
int ro__shared_mem_map_peer_rw(ro_shared_mem_t *m, pid_t pid, uint32_t fd, uint64_t bytes,
                               char *err, size_t errlen);

/* ro__shared_mem_release unmaps (and closes) m; a zeroed or released m is
 * left alone. */
void ro__shared_mem_release(ro_shared_mem_t *m);

#endif
