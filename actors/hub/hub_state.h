/*
 * The remote-learner hub's state (hub_state.c): the hub and its bookkeeping
 * allocated, who owns which shard, stream mode switched on, the node's
 * policy version, the address, the counters; a session's shared memory and
 * its welcome. learner_hub.h (the hub's life) includes this: callers see
 * one hub.
 */
#ifndef RO_HUB_STATE_H
#define RO_HUB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "actors/hub/hub_types.h"
#include "actors/exchange/step_batch.h"
#include "rollout/env.h"
#include "runtime/actor.h"

typedef struct ro_session ro_session_t; /* hub_internal.h */

struct ro_seg_pool;

/* ro__hub_stream switches a new hub to stream mode (docs/protocol.md): its
 * learners get the segments of pool, each session at most `window`
 * unacknowledged (unless its hello asks otherwise), none whose oldest
 * action is more than max_lag policy versions behind (0: any). Shards go
 * to local lanes; they send the hub their segments. Before the loop runs.
 * 0 or RO_ENOMEM. */
int ro__hub_stream(ro_hub_t *h, struct ro_seg_pool *pool, uint32_t window, uint32_t max_lag);

/* ro__hub_policy_version tells the hub the version of the node's own
 * policy at start; pushes accepted later supersede it (stream mode: lag is
 * counted from the newest). Loop thread. */
void ro__hub_policy_version(ro_hub_t *h, uint64_t version);

/* ro__hub_actor is the actor shards offer their step batches to. */
ro_actor_t *ro__hub_actor(ro_hub_t *h);

/* ro__hub_address writes the bound address ("127.0.0.1:40123"). */
void ro__hub_address(const ro_hub_t *h, char *buf, size_t len);

/* ro__hub_stats copies the counters and reads the gauges. Loop thread. */
void ro__hub_stats(const ro_hub_t *h, ro_hub_stats_t *out);

/* ro__hub_free frees the hub after its handles closed. */
void ro__hub_free(ro_hub_t *h);

/* For learner_hub.c and hub_ring.c (hub_internal.h's sessions). */

/* ro__hub_least_loaded is the attached learner holding the fewest envs. */
ro_session_t *ro__hub_least_loaded(ro_hub_t *h);
/* ro__hub_set_owner moves shard i (rows envs) to session `to` (or none). */
void ro__hub_set_owner(ro_hub_t *h, uint32_t i, uint32_t rows, ro_session_t *to);
/* ro__hub_state_new allocates the hub and its bookkeeping (no handle yet).
 * 0, or RO_ENOMEM with *out to free (ro__hub_free) unless NULL. */
int ro__hub_state_new(ro_hub_t **out, uv_loop_t *loop, ro_step_batch_t *const *batches,
                      uint32_t nshards, uint32_t num_envs, const ro_space_t *obs,
                      const ro_space_t *act, ro_actor_t *control, const ro_hub_opts_t *o);

/* ro__hub_seed_memory gives session s (SEED mode, a learner on this host
 * that asked for it) the node's observation memory, made now if it is the
 * first, and action memory of its own; with ring (Hello.seed_ring) a frame
 * ring too (wire/seed_ring.h; without one, logged, frames go on the
 * socket). Returns false, logging why once, when the host has none (the
 * session's frames then carry the columns). */
bool ro__hub_seed_memory(ro_session_t *s, bool ring);

/* ro__hub_send_welcome answers a good hello. 0 or the conn's error. */
int ro__hub_send_welcome(ro_session_t *s);

#endif
