/*
 * The remote-learner hub: serves the node's envs to learners attached over
 * TCP (rollout-learner, the Python client), in place of local learner lanes.
 *
 * It is a loop actor. Env actors offer it their step batches exactly as
 * they would a local lane. Each shard is owned by one learner session at a
 * time (so a learner sees whole trajectories); a session batches its ready
 * shards into Observations frames (the one batcher: a full batch, every
 * shard of the session waiting, or max-wait) and the Actions frame that
 * answers each one sends them back to stepping (session_flow.h).
 *
 * No transition is lost: a shard whose observations were sent stays parked
 * (its step batch is the kept copy) until its actions arrive. If the
 * learner goes away, its unanswered batches and its shards pass to another
 * learner, or wait for the next one to attach, and are sent again. Memory is
 * bounded by the number of shards.
 *
 * The same listener takes trainers on a node with local learner lanes: a
 * trainer pushes PolicyParams, which the node validates and switches to.
 *
 * Every frame from a peer is untrusted: size limit, version, order, counts
 * and action ranges are checked; a bad one gets an Error frame, the
 * connection is closed with a log line, and the node keeps serving the
 * other learners.
 *
 * This file is the hub's life (learner_hub.c); what it holds and says
 * (its state, stream mode, stats, the welcome) is hub_state.h's.
 */
#ifndef RO_LEARNER_HUB_H
#define RO_LEARNER_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "actors/hub/hub_state.h"
#include "actors/hub/hub_types.h"
#include "actors/exchange/step_batch.h"
#include "rollout.pb-c.h"
#include "rollout/env.h"
#include "runtime/actor.h"

/*
 * ro__hub_new binds the listener and prepares the hub for the step batches
 * of nshards shards, already initialised (it sizes its frames from their
 * row counts; batches[i]->index == i; their learner must be
 * ro__hub_actor()). control receives RO_MSG_LANE_DONE when every shard is
 * done. On failure returns a negative code and one line in err. Loop
 * thread, before the loop runs.
 */
int ro__hub_new(ro_hub_t **out, uv_loop_t *loop, ro_step_batch_t *const *batches, uint32_t nshards,
                uint32_t num_envs, const ro_space_t *obs, const ro_space_t *act,
                ro_actor_t *control, const ro_hub_opts_t *o, char *err, size_t errlen);

/* ro__hub_upgrade_address writes the private socket same-host learners
 * move to ("unix:PATH"), or "" when there is none (hub_admit.c). */
void ro__hub_upgrade_address(const ro_hub_t *h, char *buf, size_t len);

/* ro__hub_stop stops serving. Seed mode: says goodbye to every learner and
 * tells every shard it holds to finish. Stream mode: takes no new learner;
 * the learners attached get every segment still to come, and the hub sends
 * its done message once they acknowledged them (or none is left). Loop
 * thread; idempotent. */
void ro__hub_stop(ro_hub_t *h);

/* ro__hub_close says goodbye to the learners still attached and closes
 * every handle (after stop). Loop thread. */
void ro__hub_close(ro_hub_t *h);

#endif
