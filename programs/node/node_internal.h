/*
 * The node's insides, shared by the files of programs/node/: node.c builds and
 * frees it, run.c runs it (control actor, signals, shutdown), summary.c
 * reads it (the logger's samples, the summary), policy_swap.c applies
 * pushed policies. Fields say which thread touches them.
 */
#ifndef RO_NODE_INTERNAL_H
#define RO_NODE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "actors/local/env_actor.h"
#include "actors/local/learner_actor.h"
#include "actors/hub/learner_hub.h"
#include "actors/logger/logger_actor.h"
#include "actors/recorder/recorder_actor.h"
#include "actors/stream/stream_port.h"
#include "envs/registry.h"
#include "spaces/layout.h"
#include "node/config.h"
#include "policy/policy.h"
#include "runtime/metrics_ring.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"

struct ro_node;
/* work_probe.c: a SEED node (--learner remote) without --workers times its
 * env's step and puts the envs on the loop thread when a frame's steps cost
 * less than a hand-off to workers and one CPU is all it has (and sets its
 * spin). After open_env and the topology, before the worker plan; a no-op
 * otherwise. */
void ro__node_choose_workers(struct ro_node *n);

struct ro_node {
    /* Main/loop thread only, unless noted. */
    ro_config_t cfg;
    ro_topology_t topo;
    ro_worker_plan_t *plan;
    int nworkers;
    int ngroups; /* NUMA nodes with workers */
    int group_nodes[RO_TOPO_MAX_NODES];
    ro_sched_t *sched;

    ro_env_kind_t kind;
    ro_space_layout_t layout; /* the env's spaces (env ABI 2 layout; ABI 1 through the shim) */
    ro_env_arg_t env_args[RO_MAX_ENV_ARGS];
    size_t nenv_args;
    uint32_t max_steps;
    uint32_t shard_size;
    uint32_t batch;
    /* work_probe.c: a SEED node without --workers timed its env's step
     * (ns; 0: not timed) and says what it chose, for the start line. */
    double env_step_ns;
    char threads_why[192];

    ro_policy_t *policy;
    ro_env_shard_t *shards; /* nshards */
    uint32_t nshards;
    ro_learner_t *lanes;       /* nlanes local learner lanes (none with --learner remote) */
    uint32_t nlanes;           /* env groups: one per worker */
    ro_hub_t *hub;             /* --learner remote (or trainers on --listen): the TCP hub */
    ro_step_batch_t **batches; /* [nshards]: each shard's step batch, for the hub */
    ro_seg_pool_t segs;        /* --learner stream: the segments */
    ro_stream_port_t *ports;   /* --learner stream: [nshards] each shard's port */
    char token[256];
    ro_space_t obs_space, act_space; /* for the hub's welcome and pushed policies */
    /* A pushed policy being switched to (loop thread only). */
    ro_policy_t *swap_next;
    ro_policy_t *swap_queued; /* pushed while the lanes switch to swap_next: next in turn */
    uint32_t swaps_pending;
    bool swap_failed;
    ro_policy_t *retired[8]; /* policies a lane may still use after a failed switch */
    uint32_t nretired;
    uint64_t policy_pushes;

    ro_metrics_ring_t *rings; /* one per lane: its shards' episode records */
    /* --tensorboard or --prometheus: [2 * nshards] each shard's histograms
     * of episode returns and lengths (its worker counts, the logger sums);
     * NULL otherwise. */
    ro_histo_pub_t *histos;
    ro_logger_t logger;
    ro_recorder_t *recorder; /* --record, or NULL */
    int record_rc;

    uv_loop_t loop;
    ro_loop_home_t control_home;
    /* --workers 0: each shard's home on the loop; the first nshard_homes
     * are open. Loop thread. */
    ro_loop_home_t *shard_homes;
    uint32_t nshard_homes;
    ro_actor_t control; /* loop actor: receives RO_MSG_LANE_DONE */
    uv_signal_t sigint, sigterm;
    uv_signal_t sighup; /* started and closed by run.c */
    uv_timer_t deadline;
    uint32_t lanes_done;
    uint32_t learners_expected; /* LANE_DONE messages that end the run */

    /* Set by the loop (signal, deadline); read by env actors on workers. */
    atomic_bool stopping;
    int signals; /* SIGINT/SIGTERM received; loop thread */
    bool hangup; /* SIGHUP received; loop thread */

    uint64_t t_start_ns, t_end_ns;
    char allowed_cpus[256];  /* the allowed set after any --numa-node binding */
    int affinity_mismatches; /* read back from the OS while the workers ran */
    int mem_blocks, mem_misplaced;
    int threads_seen;
    int logger_rc;
    bool ran;
    bool loop_inited;
};

/* run.c: the control actor's behaviour (lanes done, policy switched, a
 * recording failed). */
void ro__node_control(ro_actor_t *self, ro_msg_t *msg);

/* run.c: close the shards' loop homes (--workers 0), once every sender to
 * them has stopped. Loop thread; again is harmless. */
void ro__node_close_shard_homes(struct ro_node *n);

/* summary.c: the logger's sample of the node's counters. Loop thread. */
void ro__node_sample(void *ctx, ro_logger_sample_t *out);

/* summary.c: the lanes' and shards' buffers read back from the OS: each
 * block bound to its node with every page there. Main thread. */
void ro__node_check_placement(struct ro_node *n);

/* policy_swap.c: a trainer pushed weights (the hub's on_policy). */
int ro__node_policy_push(void *ctx, const Rollout__V1__PolicyParams *msg, char *err, size_t errlen);

/* policy_swap.c: lane l answered a switch (RO_MSG_POLICY_DONE). */
void ro__node_policy_switched(struct ro_node *n, ro_learner_t *l);

#endif
