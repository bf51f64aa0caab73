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

#include "actors/local/env_shard.h"
#include "actors/exchange/step_batch.h"
#include "rollout/env.h"
#include "runtime/actor.h"

struct ro_runq;
#include "runtime/metrics_ring.h"
#include "runtime/rng.h"

/* Where a shard runs and whom it talks to: a worker's run queue, or, with
 * runq NULL, the loop `loop` (its home in `home`, owned by the caller). */
typedef struct ro_env_shard_wiring {
    uint32_t index; /* the shard's index in its node */
    struct ro_runq *runq;
    uv_loop_t *loop;
    ro_loop_home_t *home;
    ro_actor_t *learner;
    ro_env_shard_rules_t rules; /* the run's, copied into the shard */
} ro_env_shard_wiring_t;

/* ro__env_shard_wire connects an initialised shard. Returns 0, or a negative
 * errno when a loop home cannot be made. Main thread, before
 * ro__env_shard_start. */
int ro__env_shard_wire(ro_env_shard_t *s, const ro_env_shard_wiring_t *w);

/* ro__env_shard_start sends START. Any thread, once. */
void ro__env_shard_start(ro_env_shard_t *s);

#endif
