/*
 * An env shard: the envs one env actor owns (1..K, of either env ABI),
 * their step batch and per-env state, all in one block of memory made
 * once. env_actor.h runs it; this file builds and frees it.
 */
#ifndef RO_ENV_SHARD_H
#define RO_ENV_SHARD_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/exchange/state_port.h"
#include "actors/exchange/step_batch.h"
#include "envs/registry.h"
#include "rollout/env.h"
#include "runtime/actor.h"
#include "metrics/histo.h"
#include "runtime/metrics_ring.h"
#include "runtime/rng.h"

struct ro_rec_port;
struct ro_runq;

/* What the node tells each shard of the run (ro__env_shard_wire): read-only
 * after it. */
typedef struct ro_env_shard_rules {
    ro_metrics_ring_t *ring;
    const atomic_bool *stopping; /* set by the loop on SIGINT/--seconds */
    uint32_t max_steps;          /* episode limit, 0 = none */
    uint64_t quota;              /* steps per env before the shard is done, 0 = none */
    bool check_finite;           /* validate observations and rewards */
    bool record_episodes;        /* push one metric record per finished episode (--metrics) */
    /* --tensorboard or --prometheus: [0] the returns, [1] the lengths of
     * the shard's finished episodes, counted by the owner (the node's,
     * cache-line aligned); NULL: not counted. */
    ro_histo_pub_t *histos;
    uint32_t node_index; /* --node-index: a reseed's envs seed from (seed, it, env) */
} ro_env_shard_rules_t;

typedef struct ro_env_shard {
    ro_actor_t actor;

    /* What the shard hands its learner: the only part of it another
     * actor sees (through the messages). */
    ro_step_batch_t xchg;

    /* Read-only after ro__env_shard_init / wire. */
    const ro_env_vtable_t *vt;     /* an ABI 1 env, or NULL */
    const ro_env2_vtable_t *vt2;   /* an ABI 2 env, or NULL */
    ro_env_kind_t kind;            /* vt or vt2's kind (a copy; the node owns it) */
    ro_env_shard_rules_t rules;    /* the node's, from its wiring */
    struct ro_rec_port *rec;       /* --record: this shard's recorder port, or NULL */
    struct ro_stream_port *stream; /* --learner stream: this shard's port, or NULL */
    /* A learner's reseed re-creates the envs: create()'s arguments (the
     * node's, alive for the run). */
    const ro_env_arg_t *args;
    size_t nargs;
    /* Its envs' states for the batch's holder (env_state_port.c), and the
     * params hash (envs/env_state.h) of its kind, args and max_steps. */
    ro_state_port_t state_port;
    uint64_t state_params;

    /* Every per-env array (here and in xchg) lives in mem, each on its own
     * cache line. */
    void *mem;
    size_t mem_bytes; /* > 0: mem is a NUMA block (ro__numa_alloc) */
    int mem_node;     /* NUMA node mem was placed on, -1 if none */

    /* Owned by the thread running this actor. */
    void **envs;
    uint32_t *ep_len;
    double *ep_return;
    uint64_t *ep_num;
    uint64_t *ep_policy;   /* per env: policy version of its episode's first action */
    uint64_t episodes;     /* finished episodes */
    double return_sum;     /* sum of their returns */
    uint64_t env_failures; /* failed or non-finite steps */
    bool after_start;      /* the step waiting for a buffer was the reset */
    /* ABI 2 only (NULL else): one step's outcome per agent, and the sums
     * and counts of each per-episode metric (spaces/layout.h's metric
     * names); the node reads them after the workers have stopped. */
    ro_step_t *agent_steps; /* [agents] */
    double *metric_sum;     /* [nmetrics] */
    uint64_t *metric_count; /* [nmetrics] */

    /* Statistics for the logger: written by the owner after each step of
     * the shard, read by the loop; relaxed (counters, no data behind them). */
    alignas(64) _Atomic uint64_t steps; /* env steps taken */
    _Atomic uint64_t episodes_pub;      /* = episodes */
    _Atomic double return_pub;          /* = return_sum */
    /* ABI 2: = metric_sum and metric_count, published at each episode end
     * for the --metrics file's throughput lines. */
    _Atomic double metric_sum_pub[RO_ENV_MAX_METRICS];
    _Atomic uint64_t metric_count_pub[RO_ENV_MAX_METRICS];
} ro_env_shard_t;

/*
 * ro__env_shard_init creates the shard's n envs [first, first+n), each
 * seeded with ro__seed_mix(seed, env index, RO_STREAM_ENV), and the per-env
 * action streams (ro__seed_mix(seed, env index, RO_STREAM_ACTION)); seed is
 * the node's seed, ro__node_seed(run seed, node index). args are passed to
 * every env's create(). On failure returns a negative code with a message
 * in err, and frees what it made. Main thread, before the scheduler starts.
 */
int ro__env_shard_init(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                       size_t nargs, uint32_t first, uint32_t n, uint64_t seed, char *err,
                       size_t errlen);

/* ro__env_shard_init_on is ro__env_shard_init with the shard's buffers
 * (observations, rewards, flags, actions, per-env state) placed on NUMA node
 * mem_node, the node of the worker that steps it; mem_node < 0: the heap. */
int ro__env_shard_init_on(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                          size_t nargs, uint32_t first, uint32_t n, uint64_t seed, int mem_node,
                          char *err, size_t errlen);

struct ro_space_layout;
/*
 * ro__env_shard_init_kind is ro__env_shard_init_on for an env kind of either
 * ABI (a Python env's instances are made through the kind, env_ops.h): n
 * envs, each of lay->agents rows; lay
 * (the kind's layout, ro__env_kind_layout) is required for ABI 2 and may be
 * NULL for ABI 1; it must outlive the shard. Row r of env i samples from
 * ro__seed_mix(seed, i x agents + r, RO_STREAM_ACTION) (for one agent, the
 * ABI 1 stream of env i).
 */
int ro__env_shard_init_kind(ro_env_shard_t *s, const ro_env_kind_t *kind,
                            const struct ro_space_layout *lay, const ro_env_arg_t *args,
                            size_t nargs, uint32_t first, uint32_t n, uint64_t seed, int mem_node,
                            char *err, size_t errlen);

/* ro__env_shard_want_state gives the shard's rows a recurrent state of
 * `floats` floats each (xchg.rstate, zeroed) for a local recurrent policy.
 * Main thread, before the scheduler starts. 0 or RO_ENOMEM. */
int ro__env_shard_want_state(ro_env_shard_t *s, uint32_t floats);

/* ro__env_shard_destroy destroys the envs and frees the buffers. Main
 * thread, after the scheduler stopped. */
void ro__env_shard_destroy(ro_env_shard_t *s);

#endif
