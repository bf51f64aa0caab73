/*
 * The exchange between an env actor and a learner (a local learner lane or
 * the remote-learner hub): one step of one shard of envs. Env actors hand
 * any learner this and nothing else, so no actor opens another's struct.
 *
 * Ownership moves with the messages: the env actor owns the batch until it
 * sends to_learner (RO_MSG_OBS_READY or RO_MSG_SHARD_DONE); the learner
 * then owns it, reads the observations and writes the actions, until it
 * sends to_env back (RO_MSG_ACTIONS or RO_MSG_STOP). The mailbox's
 * release/acquire orders the data. At most one of the two messages is in
 * flight at a time, so the batch needs no lock, and sending allocates
 * nothing.
 */
#ifndef RO_STEP_BATCH_H
#define RO_STEP_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/exchange/batcher.h"
#include "actors/exchange/messages.h"
#include "rollout/env.h"
#include "runtime/actor.h"
#include "runtime/rng.h"

typedef struct ro_step_batch {
    ro_msg_t to_learner; /* env actor -> learner */
    ro_msg_t to_env;     /* learner -> env actor; the node's START too */
    /* The holder's queue link (a learner's batcher, the hub's lists): only
     * the side that owns the batch touches it. item.rows == n. */
    ro_batch_item_t item;

    /* Read-only after the env actor is wired. */
    ro_actor_t *env;     /* to_env goes here */
    ro_actor_t *learner; /* to_learner goes here */
    uint32_t index;      /* the shard's index in its node (0 .. shards-1) */
    uint32_t first;      /* env index of row 0 */
    uint32_t n;          /* envs (rows) */
    uint32_t obs_dim;    /* floats per observation (ABI 2: of a flattened row) */
    uint32_t act_dim;    /* floats per box action; 1 for discrete */
    bool discrete;
    /* Env ABI 2 (spaces/layout.h): the env's layout, or NULL for an ABI 1
     * shard (obs and the actions are then all there is). An env of A
     * agents is A consecutive rows: n = envs x agents, and first is the env
     * index of row 0. */
    const struct ro_space_layout *layout;
    uint32_t agents;    /* rows per env: 1 for ABI 1 */
    uint32_t act_ndisc; /* int32 entries per row in act_i: 1 for ABI 1 */
    uint32_t act_nbox;  /* floats per row in act_f: act_dim for an ABI 1 box, else 0 */

    /* Written by the env actor, read by the learner. Auto-reset
     * (docs/env-api.md): after a step that ends an episode, obs holds the
     * next episode's first observation (episode_start = 1),
     * reward/terminated/truncated describe the step that ended the old one,
     * and final_obs its true last observation (has_final = 1). */
    uint64_t steps; /* steps each env of the batch has taken (0: first obs) */
    float *obs; /* [n x obs_dim]; ABI 2: tensor[0] if it is the only one and float32, else NULL */
    float *final_obs; /* [n x obs_dim], valid where has_final; ABI 2: as obs */
    /* ABI 2: each observation tensor, [n x its row bytes] (tensor[0] is obs
     * for ABI 1), the final ones (valid where has_final), and the action
     * mask [n x mask_width] (NULL without one). */
    uint8_t *tensor[RO_ENV_MAX_TENSORS];
    uint8_t *final_tensor[RO_ENV_MAX_TENSORS];
    uint8_t *mask;
    float *reward;                                               /* [n] */
    uint8_t *terminated, *truncated, *episode_start, *has_final; /* [n] */
    ro_rng_t *act_rng; /* [n] each env's action-sampling stream, the learner's to draw from */

    /* Written by the learner, read by the env actor. */
    int32_t *act_i;          /* [n x act_ndisc] discrete actions */
    float *act_f;            /* [n x act_dim] box actions (ABI 2: act_nbox used) */
    uint64_t policy_version; /* of the policy that chose these actions */
    /* With RO_MSG_RESEED (a learner's Reseed): RO_RESEED_SEED re-creates
     * the envs from reseed_seed before resetting them, RO_RESEED_ENVS
     * re-creates env j from its own reseed_env[j] where reseed_has[j],
     * RO_RESEED_RESET only resets them; RO_RESEED_NONE at the first start.
     * Written by the holder with the message, read by the env actor. */
    uint8_t reseed;
    uint64_t reseed_seed;
    uint64_t *reseed_env; /* [envs] */
    uint8_t *reseed_has;  /* [envs] */
    /* [envs] 1: not stepped this time (Actions.hold, a learner's NEXT_STEP
     * autoreset): the env keeps its observation, with reward 0 and no
     * flags. Written with the actions by the holder, read by the env
     * actor and its recorder port. */
    uint8_t *hold;
    uint32_t nheld; /* envs hold marks: 0 (the usual) skips every look at it */
    /* Stream mode: what the policy said of its actions (ro_act_stats_t);
     * written only by a learner asked for them. */
    float *logp;    /* [n] */
    float *mean;    /* [n x act_dim], a box MLP's */
    float *log_std; /* [act_dim], a box MLP's */

    /* The shard's envs' states, for the holder to save and restore while
     * it holds the batch (state_port.h); NULL where none is offered. Set
     * when the env actor is wired. */
    struct ro_state_port *state;

    /* A recurrent policy's state (policy.h's ro_policy_carry_t): [n x
     * state_floats], zeroed at first, NULL without a cell. The local
     * learner reads and updates it while it holds the batch (zeroing a row
     * whose episode_start is set); the env actor reads it when it offers a
     * stream segment's first step. */
    float *rstate;
    uint32_t state_floats;
} ro_step_batch_t;

/* ro_step_batch_t.reseed. */
enum { RO_RESEED_NONE = 0, RO_RESEED_RESET = 1, RO_RESEED_SEED = 2, RO_RESEED_ENVS = 3 };

/* ro__step_batch_of finds the batch a to_learner message belongs to. */
static inline ro_step_batch_t *ro__step_batch_of(ro_msg_t *to_learner)
{
    return ro__container_of(to_learner, ro_step_batch_t, to_learner);
}

/* ro__step_batch_of_item finds the batch a queue link belongs to. */
static inline ro_step_batch_t *ro__step_batch_of_item(ro_batch_item_t *it)
{
    return ro__container_of(it, ro_step_batch_t, item);
}

/* ro__step_batch_offer hands the batch to its learner (type
 * RO_MSG_OBS_READY or RO_MSG_SHARD_DONE). The env actor's thread. */
static inline void ro__step_batch_offer(ro_step_batch_t *b, uint32_t type)
{
    b->to_learner.type = type;
    ro__actor_send(b->learner, &b->to_learner);
}

/* ro__step_batch_reply hands the batch back to its env actor (type
 * RO_MSG_ACTIONS or RO_MSG_STOP). The thread holding it as learner. */
static inline void ro__step_batch_reply(ro_step_batch_t *b, uint32_t type)
{
    b->to_env.type = type;
    ro__actor_send(b->env, &b->to_env);
}

#endif
