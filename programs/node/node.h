/*
 * The rollout node: one process, one libuv loop, W pinned workers, env
 * actors, learner lanes and a logger. Start-up reads top to bottom in
 * ro_node_new (node.c).
 */
#ifndef RO_NODE_H
#define RO_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "actors/hub/hub_types.h"
#include "actors/recorder/recorder_actor.h"
#include "node/config.h"
#include "rollout/env.h"

typedef struct ro_node ro_node_t;

#define RO_SUMMARY_MAX_WORKERS 1024

typedef struct ro_summary {
    uint64_t seed;       /* the run seed: --seed, or drawn (seed_drawn) */
    bool seed_drawn;     /* no --seed: --seed <seed> repeats this run */
    uint32_t node_index; /* --node-index */
    uint64_t steps;
    double seconds;
    double sps;
    uint64_t episodes;
    double mean_return; /* over every finished episode; 0 if none */
    uint64_t env_failures;
    uint64_t mujoco_warnings;   /* MuJoCo warnings in this process's envs (not printed) */
    const char *mujoco_version; /* the MuJoCo the envs run on ("4.0.0"); NULL: none built */
    char env_error[3328];       /* a Python env's last failure (its traceback); "": none */
    uint64_t dropped_metrics;
    uint64_t batches;
    double mean_batch;
    int threads;          /* read from /proc/self/task while workers ran */
    int threads_expected; /* 1 loop + W workers */
    int workers;
    const char *workers_chosen; /* "flag" (--workers), "measured" (work_probe.c), "default" */
    double env_step_ns;         /* the env's step as work_probe.c timed it; 0: not timed */
    uint32_t spin_us;           /* the loop's spin for a learner's actions */
    int lanes;
    int numa_nodes;          /* NUMA nodes with workers (worker groups) */
    uint64_t steals;         /* actors run away from their home worker */
    uint64_t policy_pushes;  /* policies pushed by trainers and switched to */
    uint64_t policy_version; /* version of the policy the lanes run now (0 if remote) */
    /* With a hub (--learner remote or stream, or --listen): its counters at
     * the stop, zero without one: learners attached, rejected, upgraded
     * (through the private socket), batches resent after a learner left;
     * with --learner stream (hub.stream) what the learners were sent and
     * took (segments_unsent_at_stop: dropped, no learner left). */
    ro_hub_stats_t hub;
    uint64_t stream_waits; /* --learner stream: times a shard waited for a free segment */
    double stream_wait_s;  /* shards' time waiting for one (summed over shards) */
    int cpus;              /* allowed CPUs */
    int pin_errors;
    uint32_t num_envs;
    uint32_t shard;
    uint32_t batch;
    char env[64];
    char policy[128];
    /* Env ABI 2: rows per env, and the env's per-episode metrics: each
     * one's mean over the episodes that reported it (NaN if none did). */
    uint32_t agents;
    uint32_t nmetrics;
    char metric_name[RO_ENV_MAX_METRICS][RO_ENV_MAX_NAME];
    double metric_mean[RO_ENV_MAX_METRICS];
    uint64_t metric_episodes[RO_ENV_MAX_METRICS];
    bool recording;             /* --record */
    ro_recorder_stats_t record; /* the recorder's counters at the stop (recording set) */
    /* Placement, read back from the OS. */
    int numa_node;           /* --numa-node, or -1 */
    bool topology_declared;  /* nodes from --topology / ROLLOUT_TOPOLOGY */
    int os_numa_nodes;       /* NUMA nodes the kernel reports (1 without libnuma) */
    char allowed_cpus[256];  /* the process's allowed set at start, e.g. "0-3" */
    int affinity_mismatches; /* workers whose OS CPU mask is not their planned CPU */
    int mem_blocks;          /* shard and lane buffers placed on a node */
    int mem_misplaced;       /* of those, blocks with a page elsewhere or unbound */
    int worker_cpu[RO_SUMMARY_MAX_WORKERS];
    int worker_node[RO_SUMMARY_MAX_WORKERS];
    int worker_tid[RO_SUMMARY_MAX_WORKERS];
} ro_summary_t;

/* ro_node_new builds a node from a parsed config: topology, envs, policy,
 * lanes, scheduler, loop. On failure returns a negative code and one line in
 * err naming the problem. Main thread. */
int ro_node_new(ro_node_t **out, const ro_config_t *cfg, char *err, size_t errlen);

/* ro_node_describe writes the start-up line (what runs where). */
void ro_node_describe(const ro_node_t *n, char *buf, size_t len);

/* ro_node_listen_address writes where remote learners attach ("" if none)
 * and the private socket learners on this host move to ("" if none). */
void ro_node_listen_address(const ro_node_t *n, char *buf, size_t len, char *local,
                            size_t local_len);

/* ro_node_stop_signals blocks (how: SIG_BLOCK) or unblocks (SIG_UNBLOCK)
 * in the calling thread the signals that stop a node: SIGINT, SIGTERM and
 * SIGHUP. main() blocks them before ro_node_new, so that the threads it
 * starts keep them blocked; ro_node_run unblocks them once it handles
 * them. Main thread. */
void ro_node_stop_signals(int how);

/* ro_node_run starts the workers and runs the loop until every env is done
 * (--steps), the time is up (--seconds), or SIGINT/SIGTERM; then stops the
 * workers and flushes the logger. Returns 0, or a negative code after
 * printing why on stderr (workers, metrics file or recording failed).
 * Main thread, once. */
int ro_node_run(ro_node_t *n);

/* ro_node_summary fills s after ro_node_run. */
void ro_node_summary(const ro_node_t *n, ro_summary_t *s);

/* ro_node_print_topology reads the topology cfg selects (applying
 * --numa-node's binding), plans the workers and prints both to f; nothing
 * else is built. On error returns a negative code and one line in err. */
int ro_node_print_topology(const ro_config_t *cfg, FILE *f, char *err, size_t errlen);

/* ro_node_free releases everything. Main thread. */
void ro_node_free(ro_node_t *n);

#endif
