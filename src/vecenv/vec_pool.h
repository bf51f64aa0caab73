/*
 * The vector engine's threads: the calling thread (the owner) plus H
 * helper threads run one job at a time over [0, n), taken in chunks. The
 * chunks are split into one contiguous range per thread, its home: each
 * thread takes its own range's chunks first, in order, then the chunks
 * left in the others' ranges. So a job over the same n gives each thread
 * the same items every time (an env stays on the thread, and in the
 * caches, that made and stepped it last; neighbouring envs' rows are
 * written by one thread), and a helper the kernel has not scheduled (a
 * loaded machine) still delays nothing: the others take its chunks, and
 * the owner waits only for chunks already taken.
 *
 * A job costs the owner one futex wake when a helper sleeps (none when they
 * spin) and a wait for the last chunk. Helpers wait a few tens of
 * microseconds after a job before they sleep, so a tight step loop finds
 * them awake and an idle pool costs no CPU; a wait (the owner's for the
 * last chunk too) spins briefly, then yields the CPU at each look, so on a
 * loaded machine it does not hold a CPU the thread it waits for needs.
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

/* One part of an item of a job in parts: fn(ctx, item, part) runs part
 * `part` (0 first) of item `item`; true while parts of it remain. */
typedef bool (*ro_vec_part_fn)(void *ctx, uint32_t item, uint32_t part);

/* The most helper threads a pool starts. */
#define RO_VEC_POOL_MAX 256

/* Chunks per thread of a job (as many as n allows): enough that a thread
 * the kernel delays leaves little for the others to wait on. */
#define RO_VEC_POOL_CHUNKS 8u

/* A chunk's least work when an item's cost is known
 * (ro__vec_pool_set_cost), in ns: a claim (a compare-and-swap on a shared
 * line, a fraction of a microsecond) stays a few percent of it. Items that
 * cost more than this go one to a chunk, so a job ends with one item, not
 * one chunk, in flight. */
#define RO_VEC_POOL_CHUNK_NS 10000.0

/* The most chunks of a job: a range word holds their indices in 16 bits. */
#define RO_VEC_POOL_MAX_CHUNKS 0xffffu

/* A thread's home range of the posted job's chunks, on a cache line of its
 * own: next (bits 16-31) is the range's next chunk to take, end (bits 0-15)
 * one past its last, gen (bits 32-63) the job's generation. One word, so a
 * claim (a compare-and-swap that bumps next) is of this job's range or
 * fails. Written by the owner when it posts a job, claimed by any thread. */
typedef struct ro_vec_range {
    alignas(64) _Atomic uint64_t w;
} ro_vec_range_t;

/* The most items of a job in parts (a range word's 16 bits hold them). */
#define RO_VEC_POOL_MAX_ITEMS 4096u

/* An item of a job in parts, on a cache line of its own (its threads take
 * it part by part): the job's generation (bits 32-63), done (bit 31), busy
 * (bit 30: a thread runs one of its parts) and its next part (bits 0-29).
 * Written by the owner when it posts the job, then taken and given back by
 * any thread. */
typedef struct ro_vec_item {
    alignas(64) _Atomic uint64_t w;
} ro_vec_item_t;

struct ro_vec_helper;

typedef struct ro_vec_pool {
    /* Owner only. */
    uint32_t helpers; /* 0: the owner runs every job alone */
    struct ro_vec_helper *hs;
    bool job_open;       /* a posted job not yet waited for */
    uint32_t job_gen;    /* its generation */
    uint32_t job_chunks; /* its chunks */
    double item_ns;      /* an item's cost, 0: unknown (ro__vec_pool_set_cost) */
    uint32_t items_cap;  /* the most items of a job in parts (reserved) */

    /* The job: written by the owner (relaxed) before it publishes the
     * job's ranges (release); a thread reads them only after a claim of a
     * chunk of the job (acquire), which the owner cannot outrun: it writes
     * the next job's only once every chunk of this one is done. */
    _Atomic(ro_vec_task_fn) fn;
    _Atomic(ro_vec_part_fn) part_fn; /* a job in parts: its function (fn unused) */
    _Atomic(void *) ctx;
    _Atomic uint32_t n, chunk; /* a job in parts: n items, each a chunk */
    _Atomic bool in_parts;
    ro_vec_range_t *ranges; /* [1 + helpers]: the owner's home is 0, helper i's i + 1 */
    ro_vec_item_t *items;   /* [items_cap]: the items of a job in parts */

    /* Shared, each on its own line. gen: the helpers' futex word (a new
     * job, or stop). done: chunks finished, the owner's futex word. */
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

/* ro__vec_pool_chunk: the items per chunk of a job over n items on
 * `threads` threads, each item costing item_ns (0: unknown). By default
 * RO_VEC_POOL_CHUNKS chunks per thread; items whose cost is known go in
 * chunks worth RO_VEC_POOL_CHUNK_NS or less (one item each when an item
 * costs more), since a job's end waits for the chunk last taken: the
 * finer, the shorter that wait (the tail of a job of costly envs, MuJoCo's,
 * whose steps vary with their contacts). Never more than
 * RO_VEC_POOL_MAX_CHUNKS chunks. */
uint32_t ro__vec_pool_chunk(uint32_t n, uint32_t threads, double item_ns);

/* ro__vec_pool_set_cost tells the pool an item's cost in ns (0: unknown),
 * for its jobs' chunks (ro__vec_pool_chunk). Owner only. */
void ro__vec_pool_set_cost(ro_vec_pool_t *p, double item_ns);

/* ro__vec_pool_run runs fn over [0, n) in chunks on the owner and the
 * helpers, and returns when every chunk is done. Jobs over the same n split
 * alike: thread k's home range is the same chunks each time. */
void ro__vec_pool_run(ro_vec_pool_t *p, ro_vec_task_fn fn, void *ctx, uint32_t n);

/* ro__vec_pool_reserve_parts readies the pool for jobs in parts of up to
 * n items (at most RO_VEC_POOL_MAX_ITEMS), once: the items live until the
 * pool stops (a helper may look through them after a job is done). 0, or
 * RO_ENOMEM, or RO_EINVAL when already reserved, with a message in err.
 * Owner only, before the first job in parts. */
int ro__vec_pool_reserve_parts(ro_vec_pool_t *p, uint32_t n, char *err, size_t errlen);

/*
 * ro__vec_pool_run_parts runs every part of items [0, n) on the owner and
 * the helpers, and returns when every item's last part is done (n beyond
 * the reserve, or no helper: each item's parts in a row, on the owner).
 * The parts of an item run in order, one at a time, on any thread (each
 * part's writes published to the next part's thread).
 *
 * Why parts: a job of a few costly items (8 MuJoCo envs on 2 threads) ends
 * with one thread finishing its last item while the others wait, about
 * half an item per step, lost. Here each thread takes the items of its home
 * range as chunks are taken, but keeps a window of two of them and runs one
 * part of each in turn, so its items progress together; a thread whose
 * home range is done takes what the others' ranges have left, then parts of
 * items others have started and are not running at that moment. So every
 * thread runs until about one part (one frame) before the end. With a few
 * items a thread, a window of two costs nothing measurable; with hundreds,
 * two items' data alternating in the caches costs more than the tail it
 * saves (the vector engine uses parts only with few envs a thread).
 */
void ro__vec_pool_run_parts(ro_vec_pool_t *p, ro_vec_part_fn fn, void *ctx, uint32_t n);

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
