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

#include "actors/hub/hub_types.h"
#include "metrics/histo.h"
#include "rollout/env.h"

/* Counters the logger samples from the node (relaxed reads). */
typedef struct ro_logger_sample {
    uint64_t steps;    /* env steps so far */
    uint64_t batches;  /* forward passes so far */
    uint64_t rows;     /* envs in those forward passes */
    uint64_t episodes; /* finished episodes */
    double return_sum; /* sum of their returns */
    /* The hub's counters (actors/hub/hub_types.h), read on the loop thread
     * (its own) with remote learners (remote set: where the envs wait;
     * backpressure from a slow learner shows here) or with stream learners
     * (stream set: learners falling behind show here); zero otherwise. */
    bool remote;
    ro_hub_stats_t hub;
    /* With --record (recording set): where the disk makes the envs wait. */
    bool recording;
    uint64_t record_waits;   /* shard steps that waited for a chunk */
    uint64_t record_dropped; /* env steps dropped (--record-full drop) */
    /* --learner stream (stream set): the shards' waits for a segment. */
    bool stream;
    uint64_t stream_waits; /* times a shard waited for a free segment */
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
