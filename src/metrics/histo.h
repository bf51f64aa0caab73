/*
 * A histogram over fixed bucket edges: the one shape behind TensorBoard's
 * histograms (per interval, metrics/tb_writer.h) and Prometheus' (since the
 * start, metrics/prom_text.h), so both show the same buckets. Fixed edges
 * keep it bounded: no allocation, no growth whatever the values.
 *
 * Not thread-safe: one owner (the logger on the loop thread).
 */
#ifndef RO_HISTO_H
#define RO_HISTO_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define RO_HISTO_MAX_EDGES 31

typedef struct ro_histo {
    const double *edges; /* nedges ascending right edges: bucket i is (edges[i-1], edges[i]] */
    uint32_t nedges;     /* and bucket nedges is (edges[nedges-1], +Inf) */
    uint64_t count[RO_HISTO_MAX_EDGES + 1];
    uint64_t n;       /* values counted */
    uint64_t skipped; /* NaN or infinite values, not counted */
    double sum, sum_sq;
    double min, max; /* of the values counted (n > 0) */
} ro_histo_t;

/* Episode returns: symmetric 1-2-5 steps from -10^4 to 10^4 (CartPole's
 * 500, Pendulum's -1600, MuJoCo's thousands all fall inside). */
extern const double ro__histo_return_edges[];
extern const uint32_t ro__histo_return_nedges;
/* Episode lengths and batch sizes: 1-2-5 steps from 1 to 10^6. */
extern const double ro__histo_size_edges[];
extern const uint32_t ro__histo_size_nedges;

/*
 * A histogram one thread counts into while others read it: an env shard's
 * episode returns or lengths, counted by the worker that steps the shard
 * (no record crosses a CPU per episode), summed by the logger at each
 * interval and scrape. Owner writes are plain load + store (relaxed: no
 * data behind the counts, no read-modify-write needed with one writer);
 * readers load relaxed and may see one episode's bucket before its sum.
 */
typedef struct ro_histo_pub {
    /* On cache lines of its own: shards of different workers side by side. */
    alignas(64) _Atomic uint64_t count[RO_HISTO_MAX_EDGES + 1]; /* their total is n */
    _Atomic double sum, sum_sq;
} ro_histo_pub_t;

/* ro__histo_init empties h over edges (nedges <= RO_HISTO_MAX_EDGES,
 * ascending; the caller keeps them). */
void ro__histo_init(ro_histo_t *h, const double *edges, uint32_t nedges);

/* ro__histo_reset empties h, keeping its edges. */
void ro__histo_reset(ro_histo_t *h);

/* ro__histo_add counts v (a NaN or infinite v only in skipped). */
void ro__histo_add(ro_histo_t *h, double v);

/* ro__histo_merge adds from's counts into into (the same edges). */
void ro__histo_merge(ro_histo_t *into, const ro_histo_t *from);

/* ro__histo_sub sets out to a's counts less b's (a later reading of the
 * same published histograms), with min and max the outer edges of its
 * non-empty buckets: what an interval added. */
void ro__histo_sub(ro_histo_t *out, const ro_histo_t *a, const ro_histo_t *b);

/* ro__histo_pub_init zeroes p[0..n). Before their owners start. */
void ro__histo_pub_init(ro_histo_pub_t *p, size_t n);

/* ro__histo_pub_add counts v (finite only) over edges. Owner thread only. */
void ro__histo_pub_add(ro_histo_pub_t *p, const double *edges, uint32_t nedges, double v);

/* ro__histo_pub_read adds p's counts into h (h's edges must be p's), min
 * and max set to the outer edges of the non-empty buckets. Any thread. */
void ro__histo_pub_read(ro_histo_t *h, const ro_histo_pub_t *p);

#endif
