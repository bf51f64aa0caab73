/*
 * The env actor: owns a shard of envs (1..K) and steps them together, so
 * dispatch costs are paid per shard, not per env.
 *
 * Hot path: the learner answers the shard's step batch (step_batch.h) with
 * RO_MSG_ACTIONS; the env actor steps every env of its shard with those
 * actions, writes observations, rewards and flags into the batch, and
 * offers it back with RO_MSG_OBS_READY. Auto-reset semantics: see
 * step_batch.h and docs/env-api.md.
 */
#ifndef RO_ENV_ACTOR_H
#define RO_ENV_ACTOR_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "actors/step_batch.h"
#include "rollout/env.h"
#include "runtime/actor.h"
#include "runtime/metrics_ring.h"
#include "runtime/rng.h"

struct ro_rec_port;
struct ro_runq;

typedef struct ro_env_shard {
    ro_actor_t actor;

    /* What the shard hands its learner: the only part of it another
     * actor sees (through the messages). */
    ro_step_batch_t xchg;

    /* Read-only after ro__env_shard_init / wire. */
    const ro_env_vtable_t *vt;
    bool check_finite;  /* validate observations and rewards */
    uint32_t max_steps; /* episode limit, 0 = none */
    uint64_t quota;     /* steps per env before the shard is done, 0 = none */
    ro_metrics_ring_t *ring;
    const atomic_bool *stopping;   /* set by the loop on SIGINT/--seconds */
    bool record_episodes;          /* push one metric record per finished episode */
    struct ro_rec_port *rec;       /* --record: this shard's recorder port, or NULL */
    struct ro_stream_port *stream; /* --learner stream: this shard's port, or NULL */

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

    /* Statistics for the logger: written by the owner after each step of
     * the shard, read by the loop; relaxed (counters, no data behind them). */
    alignas(64) _Atomic uint64_t steps; /* env steps taken */
    _Atomic uint64_t episodes_pub;      /* = episodes */
    _Atomic double return_pub;          /* = return_sum */
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

/* ro__env_shard_destroy destroys the envs and frees the buffers. Main
 * thread, after the scheduler stopped. */
void ro__env_shard_destroy(ro_env_shard_t *s);

/* Where a shard runs and whom it talks to: a worker's run queue, or, with
 * runq NULL, the loop `loop` (its home in `home`, owned by the caller). */
typedef struct ro_env_shard_wiring {
    uint32_t index; /* the shard's index in its node */
    struct ro_runq *runq;
    uv_loop_t *loop;
    ro_loop_home_t *home;
    ro_actor_t *learner;
    ro_metrics_ring_t *ring;
    const atomic_bool *stopping;
    uint32_t max_steps;
    uint64_t quota;
    bool check_finite;
    bool record_episodes; /* one record per episode (for --metrics) */
} ro_env_shard_wiring_t;

/* ro__env_shard_wire connects an initialised shard. Returns 0, or a negative
 * errno when a loop home cannot be made. Main thread, before
 * ro__env_shard_start. */
int ro__env_shard_wire(ro_env_shard_t *s, const ro_env_shard_wiring_t *w);

/* ro__env_shard_start sends START. Any thread, once. */
void ro__env_shard_start(ro_env_shard_t *s);

#endif
