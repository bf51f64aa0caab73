/*
 * What the logger samples from its owner at each interval and each scrape:
 * counters the actors publish (relaxed reads on the loop thread). Shared by
 * the logger's JSON lines (logger_actor.h) and its exports
 * (logger_export.h).
 */
#ifndef RO_LOGGER_SAMPLE_H
#define RO_LOGGER_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "metrics/histo.h"
#include "rollout/env.h"

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
    uint64_t spin_hits, spin_misses; /* the loop's spins for due actions (--spin-us) */
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
    double policy_lag_mean; /* versions behind at send, over the run */
    /* The version of the policy acting here (0: seeded or random; remote:
     * the learners' business, 0). */
    uint64_t policy_version;
    /* --tensorboard or --prometheus (histos set): the returns and lengths
     * of every episode finished so far, from the shards' histograms. */
    bool histos;
    ro_histo_t ret, len;
    /* Env ABI 2 per-episode metrics (nmetrics > 0): the names (the node's
     * layout's) and, over every shard, the sums and counts of the values
     * episodes reported. */
    uint32_t nmetrics;
    const char (*metric_name)[RO_ENV_MAX_NAME];
    double metric_sum[RO_ENV_MAX_METRICS];
    uint64_t metric_count[RO_ENV_MAX_METRICS];
} ro_logger_sample_t;

typedef void (*ro_logger_sample_fn)(void *ctx, ro_logger_sample_t *out);

#endif
