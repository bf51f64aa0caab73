#include <stddef.h>
#include <stdlib.h>

#include "actors/hub/hub_internal.h"
#include "actors/exchange/messages.h"
#include "actors/exchange/step_batch.h"
#include "runtime/error.h"

/* check_env_seeds: a Reseed's per-env seeds (Gymnasium's seed list) are
 * one per env of the node, alone, and not to a node that records (its
 * files note one seed a record). NULL, or why not. */
static const char *check_env_seeds(const ro_hub_t *h, const Rollout__V1__Reseed *r)
{
    if (r->n_seeds == 0 && r->n_unseeded == 0)
        return NULL;
    if (r->has_seed)
        return "a reseed with a seed and per-env seeds: one or the other";
    if (r->n_seeds != h->num_envs)
        return "a reseed's per-env seeds are one per env of the node";
    for (size_t k = 0; k < r->n_unseeded; k++)
        if (r->unseeded[k] >= h->num_envs)
            return "a reseed's unseeded env is not an env of the node";
    return NULL;
}

/* take_env_seeds gives step batch b its envs' own seeds (RO_RESEED_ENVS):
 * env j's is seeds[first + j], unless keep marks it (unseeded). */
static void take_env_seeds(ro_step_batch_t *b, const Rollout__V1__Reseed *r, const uint8_t *keep)
{
    const uint32_t ne = b->n / (b->agents ? b->agents : 1);
    for (uint32_t j = 0; j < ne; j++) {
        b->reseed_env[j] = r->seeds[b->first + j];
        b->reseed_has[j] = !keep[b->first + j];
    }
}

/* ro__hub_reseed takes a learner's Reseed (docs/protocol.md "Reseed"): the
 * step batches of every frame awaiting its answer go back to their env
 * actors to be reset (re-created from the seed first when it has one, or
 * each env from its own seed) instead of stepped; their first
 * observations then come in new frames. Refused while other learners
 * share the node: their episodes would restart under them. Loop thread,
 * as the hub. */
void ro__hub_reseed(ro_session_t *s, const Rollout__V1__Reseed *r, ro_hub_fail_fn fail)
{
    ro_hub_t *h = s->hub;
    if (s->trainer || h->segs) {
        fail(s, RO_EPROTO,
             "a reseed from a trainer, or to a stream node: only a SEED learner "
             "reseeds its envs");
        return;
    }
    const char *bad = check_env_seeds(h, r);
    if (bad) {
        fail(s, RO_EPROTO, "%s (%zu seeds, %u envs)", bad, r->n_seeds, h->num_envs);
        return;
    }
    bool own = r->n_seeds > 0;
    if (own && h->o.recording) {
        fail(s, RO_ENOTSUP,
             "reseed with per-env seeds refused: this node records (--record), and a record "
             "notes one seed for its envs; reseed with one seed");
        return;
    }
    if (h->nsessions > 1) {
        fail(s, RO_EBUSY,
             "reseed refused: %u learners share this node's envs, and a reseed would restart the "
             "others' episodes; only a node's sole learner may reseed",
             h->nsessions);
        return;
    }
    /* Which envs keep their streams: one byte per env, for this reseed. */
    uint8_t *keep = own ? calloc(h->num_envs, 1) : NULL;
    if (own && !keep) {
        fail(s, RO_ENOMEM, "reseed: out of memory");
        return;
    }
    for (size_t k = 0; own && k < r->n_unseeded; k++)
        keep[r->unseeded[k]] = 1;
    uint64_t frames;
    ro_batch_item_t *it = ro__flow_take_awaiting(&s->flow, &h->free_batches, &frames);
    while (it) {
        ro_batch_item_t *next = it->next;
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        /* Read by the env actor after the message (its queue orders them). */
        b->reseed = own ? RO_RESEED_ENVS : r->has_seed ? RO_RESEED_SEED : RO_RESEED_RESET;
        b->reseed_seed = r->seed;
        if (own)
            take_env_seeds(b, r, keep);
        ro__step_batch_reply(b, h->stopping ? RO_MSG_STOP : RO_MSG_RESEED);
        it = next;
    }
    free(keep);
}
