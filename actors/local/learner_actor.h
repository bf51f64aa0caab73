/*
 * The learner actor (one "lane" per worker): gathers the observations of
 * its env shards and runs batched forward passes.
 *
 * Dynamic batching: ready shards queue up until `batch` envs are ready, or
 * every still-running shard of the lane is waiting (nothing more can come),
 * or max_wait has passed since the first of them arrived; then one forward
 * pass over all of them, one action per env drawn from that env's own
 * sampling stream, and RO_MSG_ACTIONS back to each shard.
 *
 * A node has one lane per worker so that forward passes run in parallel;
 * each env belongs to exactly one lane. Lanes share the policy's weights
 * (read-only) and own their scratch.
 */
#ifndef RO_LEARNER_ACTOR_H
#define RO_LEARNER_ACTOR_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/actor.h"
#include "actors/exchange/batcher.h"
#include "policy/policy.h"
#include "runtime/scheduler.h"

typedef struct ro_learner {
    ro_actor_t actor;

    /* Changed only by the lane itself, on RO_MSG_POLICY (a pushed policy). */
    const ro_policy_t *policy;

    /* Read-only after ro__learner_init. */
    ro_runq_t *runq;
    ro_actor_t *control; /* receives RO_MSG_LANE_DONE */
    uint32_t max_rows;   /* batch + largest shard - 1 */
    uint32_t obs_dim, act_dim;
    bool discrete;
    /* Env ABI 2: the policy's layout (NULL for ABI 1); composite: actions
     * are ndisc entries and nbox floats a row, masked (policy.h). */
    const struct ro_space_layout *lay;
    bool composite;

    /* Owned by the thread running this actor. */
    ro_policy_ws_t *ws;
    ro_batcher_t ready;   /* step batches waiting for a forward pass */
    uint32_t active_rows; /* envs in shards not yet done */
    uint32_t active_shards;
    bool timer_armed; /* timer.msg is with the run queue or our mailbox */
    ro_rng_t **rngs;  /* [max_rows] sampling stream of each batch row */
    int32_t *act_i;   /* [max_rows x ndisc (1 unless composite)] */
    float *act_f;     /* [max_rows x act_dim] */
    float *logp;      /* [max_rows] stream mode: each action's log-probability, or NULL */
    float *mean;      /* [max_rows x act_dim] stream mode: a box policy's means */
    uint8_t *mask;    /* [max_rows x mask_width] composite with a mask: the batch's mask rows */
    /* A recurrent policy: each batch row's state (in its step batch's
     * rstate) and episode-start flag; NULL without a cell. */
    float **state;
    uint8_t *first;
    ro_timer_t timer;
    ro_msg_t done_msg;
    /* Policy swap: the node sets swap_to and sends swap_msg; the lane
     * answers with swap_done_msg (swap_ok tells whether it switched). */
    ro_msg_t swap_msg, swap_done_msg;
    const ro_policy_t *swap_to;
    bool swap_ok;
    void *mem;        /* rngs .. first in one block (ro__numa_alloc), on mem_node */
    size_t mem_bytes; /* its size */
    int mem_node;     /* NUMA node of the lane's buffers, -1 if not placed */

    /* Statistics for the logger: written by the owner, read by the loop. */
    alignas(64) _Atomic uint64_t batches; /* forward passes, relaxed */
    _Atomic uint64_t rows;                /* envs in them, relaxed */
} ro_learner_t;

/*
 * ro__learner_init prepares a lane serving `shards` shards holding `rows`
 * envs in all, the largest with max_shard envs; discrete tells how actions
 * are handed back. Main thread.
 */
int ro__learner_init(ro_learner_t *l, const ro_policy_t *p, ro_runq_t *runq, ro_actor_t *control,
                     uint32_t batch, uint64_t max_wait_us, uint32_t shards, uint32_t rows,
                     uint32_t max_shard, bool discrete);

/* ro__learner_init_on is ro__learner_init with the lane's batch buffers
 * (policy scratch, action rows) placed on NUMA node mem_node, the node of
 * its worker; mem_node < 0: the heap. */
int ro__learner_init_on(ro_learner_t *l, const ro_policy_t *p, ro_runq_t *runq, ro_actor_t *control,
                        uint32_t batch, uint64_t max_wait_us, uint32_t shards, uint32_t rows,
                        uint32_t max_shard, bool discrete, int mem_node);

/* ro__learner_want_stats makes the lane hand each step batch its actions'
 * log-probabilities (and a box policy's mean and log_std) with them, for
 * stream mode. Main thread, before the lane runs. 0 or RO_ENOMEM. */
int ro__learner_want_stats(ro_learner_t *l);

/* ro__learner_destroy frees a lane's buffers. Main thread, after the stop. */
void ro__learner_destroy(ro_learner_t *l);

#endif
