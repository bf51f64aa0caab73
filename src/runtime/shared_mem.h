/*
 * Memory shared with a learner on the same host: read-only to it (stream
 * mode's segments, docs/protocol.md "Segments in shared memory"; SEED
 * mode's observations), or written by it (SEED mode's actions and frame
 * rings, which the owner copies out and checks before it uses them).
 *
 * The owner (a node) allocates it as a sealed memfd: its size can never
 * change (F_SEAL_SHRINK | F_SEAL_GROW), so a mapping of it never faults
 * past its end, and memory the peer only reads is also sealed with
 * F_SEAL_FUTURE_WRITE once the owner has mapped it: from then on nobody,
 * whoever holds the descriptor, can map it writable or write() to it; the
 * owner's own mapping stays writable. F_SEAL_SEAL closes the seals.
 *
 * A peer gets the descriptors only over the Unix-domain socket of its
 * connection, with the Welcome frame (SCM_RIGHTS, wire/conn.h), never by
 * number through /proc: the node is not dumpable (ro__process_private), so
 * another process of the same user cannot open /proc/NODE/fd/N. Each side
 * treats memory the other writes as untrusted bytes: the peer checks the
 * seals and the size before mapping, and every offset it is given against
 * the size.
 *
 * Both sides: any thread, but one owner per ro_shared_mem_t.
 */
#ifndef RO_SHARED_MEM_H
#define RO_SHARED_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most descriptors one Welcome carries (segments; or observations,
 * actions and rings). */
#define RO_SHARED_FDS_MAX 4

typedef struct ro_shared_mem {
    void *base;   /* the mapping; NULL when none */
    size_t bytes; /* its size */
    int fd;       /* the memfd (owner) or -1 (a peer closes it once mapped) */
} ro_shared_mem_t;

/* ro__shared_mem_create makes bytes of zeroed, sealed, shared memory
 * named name (for /proc/PID/maps), writable by the peer it is handed to
 * only if peer_writes. 0, or a negative code with one line in err (no
 * memfd on this kernel, out of memory). */
int ro__shared_mem_create(ro_shared_mem_t *m, const char *name, size_t bytes, bool peer_writes,
                          char *err, size_t errlen);

/* ro__shared_mem_map_peer maps the memory a node handed over as the
 * index'th (1-based) of the nfds descriptors fds that came with its
 * welcome; it must be bytes long and sealed against shrinking. Mapped
 * read-write if writable, else read-only. fds stay the caller's. 0, or a
 * negative code with one line in err naming why not (what names the
 * memory). */
int ro__shared_mem_map_peer(ro_shared_mem_t *m, const int *fds, unsigned nfds, uint32_t index,
                            uint64_t bytes, bool writable, const char *what, char *err,
                            size_t errlen);

/* ro__shared_mem_release unmaps (and closes) m; a zeroed or released m is
 * left alone. */
void ro__shared_mem_release(ro_shared_mem_t *m);

/* ro__process_private makes this process non-dumpable
 * (PR_SET_DUMPABLE 0): another process of the same user can then neither
 * open /proc/PID/fd/N (the memories above) nor /proc/PID/mem, nor ptrace
 * it; only a process with CAP_SYS_PTRACE (root) can. It also means no core
 * file. 0, or a negative code. */
int ro__process_private(void);

#endif
