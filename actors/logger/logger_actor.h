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
 * Each interval's sample also goes to the exports (logger_export.h:
 * --tensorboard event files, the --prometheus endpoint, which samples
 * again at each scrape), with the shards' histograms of episode returns
 * and lengths (counted where episodes end: no record either).
 */
#ifndef RO_LOGGER_ACTOR_H
#define RO_LOGGER_ACTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "actors/logger/logger_export.h"
#include "actors/logger/logger_sample.h"
#include "runtime/metrics_ring.h"

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
    bool episode_lines; /* records become episode lines (--metrics-episodes) */
    bool exporting;     /* --tensorboard or --prometheus */
    ro_logger_export_t export;
    bool closed;
} ro_logger_t;

typedef struct ro_logger_opts {
    const char *metrics_path; /* NULL: none */
    double interval_s;        /* throughput line period */
    bool throughput_only;     /* no episode or env-failure lines (--metrics-every) */
    bool episode_lines;       /* a line per episode record (--metrics-episodes) */
    /* --tensorboard DIR, --prometheus ADDR (NULL: none) and the node's
     * labels there (logger_export.h). */
    const char *tensorboard;
    const char *prometheus;
    uint32_t node_index;
    int numa_node;
    const char *env;
    bool quiet; /* no status at all */
    ro_logger_sample_fn sample;
    void *sample_ctx;
} ro_logger_opts_t;

/* ro__logger_init opens the metrics file, the event file and the endpoint,
 * and prepares the timer. On failure returns a negative code and a message
 * naming the file or address (what it opened is closed). Loop thread. */
int ro__logger_init(ro_logger_t *lg, uv_loop_t *loop, ro_metrics_ring_t *rings, uint32_t nrings,
                    const ro_logger_opts_t *o, char *err, size_t errlen);

/* ro__logger_dropped returns the records dropped by every ring. Any thread. */
uint64_t ro__logger_dropped(ro_logger_t *lg);

/* ro__logger_start starts the periodic drain. Loop thread. */
void ro__logger_start(ro_logger_t *lg);

/* ro__logger_finish drains what is left, writes a last throughput line
 * (and event), ends the status line, flushes and closes the files, stops
 * the endpoint, and closes the timer handle. Returns 0 or RO_EIO if a file
 * could not be written. Loop thread. */
int ro__logger_finish(ro_logger_t *lg);

/* ro__logger_abandon closes the files and the endpoint without writing a
 * last line: the run never started (a start-up failure after
 * ro__logger_init). Harmless after ro__logger_finish and on a logger that
 * was zeroed and never initialised. Loop thread; the timer handle is the
 * caller's to close. */
void ro__logger_abandon(ro_logger_t *lg);

#endif
