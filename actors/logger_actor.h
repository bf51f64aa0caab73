/*
 * The logger actor: drains metric records off the critical path.
 *
 * Producers (env actors on workers) push fixed-size records into bounded
 * lock-free rings (only with --metrics: one per finished episode, and env
 * failures), one per learner lane so that a lane's shards (which share
 * a CPU) never contend with another CPU's, and never wait
 * (ro_metrics_ring_t). The logger
 * lives on the loop thread: a timer drains the rings every 50 ms, writes
 * JSON lines to the --metrics file (one per finished episode, one per
 * throughput interval; with throughput_only, --metrics-every, only the
 * latter), and keeps a one-line live status on a terminal, computed from
 * counters the actors publish (no record needed). A throughput line also
 * says how many episodes ended in its interval and their mean return,
 * from the same counters, so it needs no per-episode record either.
 */
#ifndef RO_LOGGER_ACTOR_H
#define RO_LOGGER_ACTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "rollout/env.h"
#include "runtime/metrics_ring.h"

/* Counters the logger samples from the node (relaxed reads). */
typedef struct ro_logger_sample {
    uint64_t steps;    /* env steps so far */
    uint64_t batches;  /* forward passes so far */
    uint64_t rows;     /* envs in those forward passes */
    uint64_t episodes; /* finished episodes */
    double return_sum; /* sum of their returns */
    /* With remote learners (remote set): where the envs wait, from
     * ro_remote_stats_t. Backpressure from a slow learner shows here. */
    bool remote;
    uint32_t learners;
    uint32_t envs_in_flight;
    uint32_t envs_unsent;
    uint64_t oldest_wait_ns;
    uint64_t queued_bytes;
    uint64_t batches_resent;
    /* With --record (recording set): where the disk makes the envs wait. */
    bool recording;
    uint64_t record_waits;   /* shard steps that waited for a chunk */
    uint64_t record_dropped; /* env steps dropped (--record-full drop) */
    /* --learner stream (stream set): learners falling behind show here. */
    bool stream;
    uint32_t segments_in_flight; /* sent, not acknowledged */
    uint32_t segments_unsent;    /* full, waiting for a learner's window */
    uint64_t segments_acked;
    uint64_t stream_waits; /* times a shard waited for a free segment */
    uint64_t segments_dropped_lag;
    /* Env ABI 2 per-episode metrics (nmetrics > 0): the names (the node's
     * layout's) and, over every shard, the sums and counts of the values
     * episodes reported. */
    uint32_t nmetrics;
    const char (*metric_name)[RO_ENV_MAX_NAME];
    double metric_sum[RO_ENV_MAX_METRICS];
    uint64_t metric_count[RO_ENV_MAX_METRICS];
} ro_logger_sample_t;

typedef void (*ro_logger_sample_fn)(void *ctx, ro_logger_sample_t *out);

typedef struct ro_logger {
    /* Loop thread only. */
    uv_timer_t timer;
    ro_metrics_ring_t *rings; /* nrings, drained in turn */
    uint32_t nrings;
    FILE *metrics;        /* NULL: no file */
    bool throughput_only; /* write throughput lines only */
    bool status_tty;      /* redraw one status line on stderr */
    bool status_lines;    /* print a progress line every few seconds instead */
    ro_logger_sample_fn sample;
    void *sample_ctx;
    uint64_t t0_ns;
    uint64_t interval_ns; /* throughput lines */
    uint64_t next_tput_ns, next_status_ns;
    ro_logger_sample_t last; /* at the previous throughput line */
    uint64_t last_ns;
    uint64_t env_failures;
    double sps_recent;    /* steps/s over the last status period */
    double return_recent; /* mean return of the episodes of that period */
    ro_logger_sample_t status_last;
    uint64_t status_last_ns;
    bool closed;
} ro_logger_t;

typedef struct ro_logger_opts {
    const char *metrics_path; /* NULL: none */
    double interval_s;        /* throughput line period */
    bool throughput_only;     /* no episode or env-failure lines (--metrics-every) */
    bool quiet;               /* no status at all */
    ro_logger_sample_fn sample;
    void *sample_ctx;
} ro_logger_opts_t;

/* ro__logger_init opens the metrics file and prepares the timer. On failure
 * returns a negative code and a message naming the file. Loop thread. */
int ro__logger_init(ro_logger_t *lg, uv_loop_t *loop, ro_metrics_ring_t *rings, uint32_t nrings,
                    const ro_logger_opts_t *o, char *err, size_t errlen);

/* ro__logger_dropped returns the records dropped by every ring. Any thread. */
uint64_t ro__logger_dropped(ro_logger_t *lg);

/* ro__logger_start starts the periodic drain. Loop thread. */
void ro__logger_start(ro_logger_t *lg);

/* ro__logger_finish drains what is left, writes a last throughput line,
 * ends the status line, flushes and closes the file, and closes the timer
 * handle. Returns 0 or RO_EIO if the file could not be written. Loop thread. */
int ro__logger_finish(ro_logger_t *lg);

#endif
