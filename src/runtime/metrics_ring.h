/*
 * A bounded lock-free ring of fixed-size metric records.
 *
 * Many producers (worker threads running env and learner actors), one
 * consumer (the logger on the loop thread). A producer never blocks and
 * never waits: if the ring is full the record is dropped and counted.
 * Each cell carries a sequence number (the classic bounded MPMC design), so
 * producers claim cells with one CAS and the consumer needs no lock.
 */
#ifndef RO_METRICS_RING_H
#define RO_METRICS_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum ro_metric_kind {
    RO_METRIC_EPISODE = 1,  /* env finished an episode */
    RO_METRIC_ENV_FAIL = 2, /* env step failed or produced a non-finite value; env reset */
} ro_metric_kind_t;

/* 56 bytes (a cell is one 64-byte line): a whole record is written before
 * it is published. */
typedef struct ro_metric {
    uint32_t kind;    /* ro_metric_kind_t */
    uint32_t env;     /* env index */
    uint64_t episode; /* episode number of that env, from 0 */
    double value;     /* episode return */
    uint32_t length;  /* episode length in steps */
    uint8_t terminated, truncated;
    uint16_t pad;
    uint64_t t_ns; /* CLOCK_MONOTONIC when produced */
    /* Version of the policy that chose the episode's first and last action
     * (ro__policy_version; 0 when remote learners chose them). */
    uint64_t policy_first, policy_last;
} ro_metric_t;

typedef struct ro_metric_cell {
    _Atomic uint64_t seq;
    ro_metric_t rec;
} ro_metric_cell_t;

typedef struct ro_metrics_ring {
    ro_metric_cell_t *cells;              /* capacity cells; read-only pointer after init */
    uint64_t mask;                        /* capacity - 1 */
    alignas(64) _Atomic uint64_t tail;    /* next cell to claim: producers */
    alignas(64) uint64_t head;            /* next cell to read: consumer only */
    alignas(64) _Atomic uint64_t dropped; /* records lost to a full ring */
} ro_metrics_ring_t;

/* ro__metrics_ring_init allocates capacity cells (a power of two >= 2). */
int ro__metrics_ring_init(ro_metrics_ring_t *r, uint32_t capacity);
void ro__metrics_ring_free(ro_metrics_ring_t *r);

/* ro__metrics_ring_push copies rec in. Any thread; never blocks. Returns
 * false (and counts a drop) if the ring was full. */
bool ro__metrics_ring_push(ro_metrics_ring_t *r, const ro_metric_t *rec);

/* ro__metrics_ring_pop copies the oldest record out. Consumer thread only.
 * Returns false if none is ready. */
bool ro__metrics_ring_pop(ro_metrics_ring_t *r, ro_metric_t *out);

/* ro__metrics_ring_dropped returns the drop count. Any thread. */
uint64_t ro__metrics_ring_dropped(ro_metrics_ring_t *r);

#endif
