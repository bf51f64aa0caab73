/*
 * The logger's exports (docs/operations.md#tensorboard-and-prometheus):
 * the same sampled counters as its JSON lines, and the shards' histograms of
 * episode returns and lengths (counted where the episodes end: no record
 * per episode crosses a CPU), as
 * TensorBoard event files (--tensorboard DIR: scalars and histograms per
 * interval, metrics/tb_writer.h) and as a Prometheus endpoint
 * (--prometheus ADDR: counters, gauges and histograms since the start,
 * rendered at each scrape, wire/http_endpoint.h); both opened and closed
 * by metrics/exporters.h, as rollout-learner's.
 *
 * Loop thread only, as the logger. Large (the endpoint's buffers): it lives
 * inside the logger, inside the node.
 */
#ifndef RO_LOGGER_EXPORT_H
#define RO_LOGGER_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "actors/logger/logger_sample.h"
#include "metrics/histo.h"
#include "metrics/exporters.h"
#include "rollout/env.h"
#include "runtime/metrics_ring.h"

typedef struct ro_logger_export_opts {
    const char *tensorboard; /* DIR, or NULL */
    const char *prometheus;  /* ADDR, or NULL */
    /* The node's labels on every Prometheus sample. */
    uint32_t node_index;
    int numa_node; /* -1: not bound */
    const char *env;
    ro_logger_sample_fn sample;
    void *sample_ctx;
    ro_metrics_ring_t *rings; /* their drop counts */
    uint32_t nrings;
    const uint64_t *env_failures; /* the logger's count, read at each scrape */
} ro_logger_export_opts_t;

typedef struct ro_logger_export {
    ro_logger_export_opts_t o;
    ro_exporters_t out;
    char labels[512];
    /* "env/<name>" tags of an env ABI 2 env's per-episode metrics. */
    char metric_tag[RO_ENV_MAX_METRICS][RO_ENV_MAX_NAME + 8];
} ro_logger_export_t;

/* ro__logger_export_open opens what o asks for (neither: nothing). Returns
 * 0, or a negative code with one line in err naming the flag. */
int ro__logger_export_open(ro_logger_export_t *x, uv_loop_t *loop, const ro_logger_export_opts_t *o,
                           char *err, size_t errlen);

/* ro__logger_export_interval writes one TensorBoard event for the interval
 * from last to cur (dt seconds long). */
void ro__logger_export_interval(ro_logger_export_t *x, const ro_logger_sample_t *cur,
                                const ro_logger_sample_t *last, double dt);

/* ro__logger_export_close closes the event file and the endpoint (its
 * handles finish closing on the loop). Returns 0, or RO_EIO if the event
 * file could not be written. Again is harmless. */
int ro__logger_export_close(ro_logger_export_t *x);

#endif
