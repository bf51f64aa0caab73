#include <stddef.h>

#include "actors/hub/hub_internal.h"
#include "actors/exchange/messages.h"
#include "actors/exchange/step_batch.h"
#include "runtime/error.h"

/* ro__hub_reseed takes a learner's Reseed (docs/protocol.md "Reseed"): the
 * step batches of every frame awaiting its answer go back to their env
 * actors to be reset (re-created from the seed first when it has one)
 * instead of stepped; their first observations then come in new frames.
 * Refused while other learners share the node: their episodes would
 * restart under them. Loop thread, as the hub. */
void ro__hub_reseed(ro_session_t *s, const Rollout__V1__Reseed *r, ro_hub_fail_fn fail)
{
    ro_hub_t *h = s->hub;
    if (s->trainer || h->segs) {
        fail(s, RO_EPROTO,
             "a reseed from a trainer, or to a stream node: only a SEED learner "
             "reseeds its envs");
        return;
    }
    if (h->nsessions > 1) {
        fail(s, RO_EBUSY,
             "reseed refused: %u learners share this node's envs, and a reseed would restart the "
             "others' episodes; only a node's sole learner may reseed",
             h->nsessions);
        return;
    }
    uint64_t frames;
    ro_batch_item_t *it = ro__flow_take_awaiting(&s->flow, &h->free_batches, &frames);
    while (it) {
        ro_batch_item_t *next = it->next;
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        /* Read by the env actor after the message (its queue orders them). */
        b->reseed = r->has_seed ? RO_RESEED_SEED : RO_RESEED_RESET;
        b->reseed_seed = r->seed;
        ro__step_batch_reply(b, h->stopping ? RO_MSG_STOP : RO_MSG_RESEED);
        it = next;
    }
}
