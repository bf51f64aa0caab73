/*
 * rollout-node's configuration: command-line flags parsed into ro_config_t.
 */
#ifndef RO_CONFIG_H
#define RO_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/policy.h"
#include "envs/registry.h"
#include "rollout/env.h"

/* Values of the choice flags, in the order --help lists them. */
enum { RO_LEARNER_LOCAL = 0, RO_LEARNER_REMOTE = 1, RO_LEARNER_STREAM = 2 };
enum { RO_RECORD_BLOCK = 0, RO_RECORD_DROP = 1 };
enum { RO_RECORD_STOP = 0, RO_RECORD_CONTINUE = 1 };

typedef struct ro_config {
    const char *env; /* built-in name or plugin path */
    ro_env_arg_t env_args[RO_MAX_ENV_ARGS];
    size_t nenv_args;
    uint32_t num_envs;
    uint32_t workers;       /* 0 = one per allowed CPU (or none: envs_on_loop) */
    bool envs_on_loop;      /* --workers 0 (--learner remote): env actors on the loop thread */
    bool workers_given;     /* --workers given; else a SEED node chooses (work_probe.c) */
    bool spin_given;        /* --spin-us given */
    uint32_t shard;         /* envs per env actor; 0 = automatic */
    uint32_t env_procs;     /* a Python env's worker processes; 0 = one per worker */
    uint32_t env_timeout_s; /* a Python env worker's time per command; 0 = default */
    uint32_t batch;         /* rows per forward pass; 0 = automatic */
    uint64_t max_wait_us;   /* flush a partial batch after this long */
    ro_policy_spec_t policy;
    const char *policy_arg;  /* as given to --policy */
    const char *save_policy; /* write the policy's weights here at start */
    uint64_t seed;           /* --seed, or drawn from the OS when seed_drawn */
    bool seed_drawn;         /* no --seed: a fresh seed per run (ro__random_seed) */
    uint32_t node_index;     /* --node-index: this node's own env streams (ro__node_seed) */
    uint64_t steps;          /* total env steps, spread evenly over envs; 0 = no limit */
    double seconds;          /* wall-clock limit; 0 = none */
    const char *metrics;     /* JSON-lines file, or NULL */
    bool metrics_episodes;   /* and one line per finished episode in it */
    double metrics_interval; /* seconds between throughput lines */
    const char *tensorboard; /* --tensorboard DIR: event files, or NULL */
    const char *prometheus;  /* --prometheus ADDR: the /metrics endpoint, or NULL */
    bool json;               /* print a one-line JSON summary on stdout */
    bool quiet;              /* no live status line */
    bool check_finite;       /* validate every observation and reward */
    bool overcommit;         /* allow more workers than allowed CPUs */
    int learner;             /* --learner: RO_LEARNER_LOCAL, _REMOTE or _STREAM */
    uint32_t unroll;         /* --learner stream: steps per segment */
    uint32_t stream_window;  /* --learner stream: segments a learner holds unacknowledged */
    uint64_t max_policy_lag; /* --learner stream: drop segments older than this; 0: never */
    const char *listen;      /* HOST:PORT for remote learners */
    const char *token_file;  /* shared secret learners must present */
    uint32_t max_frame;      /* largest frame accepted from a learner */
    uint32_t max_learners;   /* learner connections at once */
    double learner_timeout;  /* seconds a learner may leave a batch unanswered */
    double hello_timeout;    /* seconds a connection may take to say hello */
    uint32_t spin_us; /* SEED: spin this long for a learner's actions (runtime/loop_spin.h) */

    /* --record (docs/replay.md): trajectory file or NULL; rotate at
     * record_max_bytes (0 = never); record_drop: drop and count the steps
     * the disk cannot take instead of pausing the envs. */
    const char *record;
    uint64_t record_max_bytes;
    uint32_t snapshot_every; /* --snapshot-every K: env states every K steps; 0: none */
    int record_full;         /* --record-full: RO_RECORD_BLOCK or RO_RECORD_DROP */
    int record_error;     /* --record-error: RO_RECORD_STOP, or RO_RECORD_CONTINUE: a failed write
                             ends recording, not the run */
    const char *topology; /* declared NUMA nodes ("0:0-3;1:4-7"), or NULL */
    int numa_node;        /* bind CPUs and memory to this node; -1 = none */
    bool print_topology;  /* print the topology and the plan, then exit */
    bool help, version;

    /* --metrics-every: throughput lines only (no episode or env-failure
     * lines); metrics_interval is their period. */
    bool metrics_throughput_only;
} ro_config_t;

/* ro__config_defaults fills the defaults (see --help). */
void ro__config_defaults(ro_config_t *c);

/*
 * ro__config_parse parses argv into c (defaults first) with the node's flag
 * table and the one flag parser (runtime/flags.h). Strings in c point into
 * argv. On a bad flag or value returns RO_EINVAL with one line in err
 * naming the flag, the value and what is accepted; flags that the others
 * given would make meaningless (--hidden with a policy file, --record-full
 * without --record, ...) are refused the same way, never ignored.
 */
int ro__config_parse(ro_config_t *c, int argc, char **argv, char *err, size_t errlen);

/* ro__config_usage writes the --help text. */
void ro__config_usage(FILE *f);

#endif
