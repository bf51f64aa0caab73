/*
 * The vector engine's threads: the calling thread (the owner) plus H
 * helper threads run one job at a time over [0, n), taken in chunks from
 * one shared counter. Whoever is running takes the next chunk, so a helper
 * the kernel has not scheduled (a loaded machine) delays nothing: the owner
 * does its chunks and waits only for chunks already taken.
 *
 * A job costs the owner one futex wake when a helper sleeps (none when they
 * spin) and a wait for the last chunk. Helpers spin for a few tens of
 * microseconds after a job before they sleep, so a tight step loop finds
 * them awake and an idle pool costs no CPU.
 *
 * Threads: ro__vec_pool_start/run/stop from one thread at a time (the
 * owner); helpers only run the job's function.
 */
#ifndef RO_VEC_POOL_H
#define RO_VEC_POOL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One chunk of a job: fn(ctx, begin, end) over [begin, end). */
typedef void (*ro_vec_task_fn)(void *ctx, uint32_t begin, uint32_t end);

/* The most helper threads a pool starts. */
#define RO_VEC_POOL_MAX 256

typedef struct ro_vec_pool {
    /* Owner only. */
    uint32_t helpers; /* 0: the owner runs every job alone */
    pthread_t *tids;
    bool job_open;       /* a posted job not yet waited for */
    uint32_t job_gen;    /* its generation */
    uint32_t job_chunks; /* its chunks */

    /* The job: written by the owner (relaxed) before it publishes the
     * job's generation in `next` (release); a helper reads them after
     * seeing that generation (acquire) and keeps what it read only if its
     * claim of a chunk of that generation succeeds. */
    _Atomic(ro_vec_task_fn) fn;
    _Atomic(void *) ctx;
    _Atomic uint32_t n, chunk, nchunks;

    /* Shared, each on its own line. next: the generation (high 32 bits)
     * and the next chunk to take (low 32). gen: the helpers' futex word (a
     * new job, or stop). done: chunks finished, the owner's futex word. */
    alignas(64) _Atomic uint64_t next;
    alignas(64) _Atomic uint32_t gen;
    _Atomic uint32_t sleepers; /* helpers asleep or about to be */
    _Atomic bool stop;
    alignas(64) _Atomic uint32_t done;
    _Atomic uint32_t owner_waits; /* 1 while the owner sleeps on done */
} ro_vec_pool_t;

/* ro__vec_pool_start starts `helpers` threads (0: none, every job runs on
 * the owner). 0, or RO_ENOMEM / RO_EIO with a message in err (no thread
 * left running). */
int ro__vec_pool_start(ro_vec_pool_t *p, uint32_t helpers, char *err, size_t errlen);

/* ro__vec_pool_run runs fn over [0, n) in chunks on the owner and the
 * helpers, and returns when every chunk is done. */
void ro__vec_pool_run(ro_vec_pool_t *p, ro_vec_task_fn fn, void *ctx, uint32_t n);

/* ro__vec_pool_post hands fn over [0, n) to the helpers and returns at
 * once (after waiting for a job still open: one at a time); without
 * helpers it runs the job itself first. What the job reads and writes is
 * the helpers' until ro__vec_pool_wait returns. */
void ro__vec_pool_post(ro_vec_pool_t *p, ro_vec_task_fn fn, void *ctx, uint32_t n);

/* ro__vec_pool_wait takes the posted job's chunks no helper took yet, and
 * returns when every chunk is done; at once when none is open. */
void ro__vec_pool_wait(ro_vec_pool_t *p);

/* ro__vec_pool_busy tells whether a posted job still has chunks running. */
bool ro__vec_pool_busy(const ro_vec_pool_t *p);

/* ro__vec_pool_stop stops and joins the helpers. Safe on a zeroed pool. */
void ro__vec_pool_stop(ro_vec_pool_t *p);

#endif
