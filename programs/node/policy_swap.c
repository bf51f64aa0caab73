/*
 * Policies pushed by trainers (--listen with local learner lanes): the
 * weights are checked against the env, built into a policy, and handed to
 * every lane, which switches between two batches; the old policy is freed
 * once every lane has switched.
 */
#include <stdio.h>
#include <stdlib.h>

#include "node/node.h"
#include "node/node_internal.h"
#include "policy/params.h"
#include "runtime/error.h"

/* Hand next to every lane; the old policy is freed once all have switched
 * (ro__node_policy_switched). */
static void start_swap(ro_node_t *n, ro_policy_t *next)
{
    n->swap_next = next;
    n->swaps_pending = n->nlanes;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        n->lanes[l].swap_to = next;
        ro__actor_send(&n->lanes[l].actor, &n->lanes[l].swap_msg);
    }
}

/* A trainer (or a stream learner) pushed weights: validate them against the
 * env, build the policy, and switch the lanes to it. A push that comes
 * while the lanes still switch to the one before waits for them, replacing
 * any other waiting push: the lanes go to the newest weights. Loop thread. */
int ro__node_policy_push(void *ctx, const Rollout__V1__PolicyParams *msg, char *err, size_t errlen)
{
    ro_node_t *n = ctx;
    if (n->nretired == 8) {
        snprintf(err, errlen, "lanes failed to switch policies 8 times (out of memory)");
        return RO_ENOMEM;
    }
    char label[64];
    snprintf(label, sizeof label, "pushed policy v%llu", (unsigned long long)msg->version);
    ro_policy_params_t pp;
    int rc = ro__policy_params_from_msg(&pp, msg, label, err, errlen);
    if (rc)
        return rc;
    ro_policy_t *next;
    if (!n->layout.abi1) /* env ABI 2: the push must be of the env's layout (format 2) */
        rc = ro__policy_new_from_params_layout(&next, &pp, n->cfg.policy.gemm, &n->layout, label,
                                               err, errlen);
    else
        rc = ro__policy_new_from_params(&next, &pp, n->cfg.policy.gemm, &n->obs_space,
                                        &n->act_space, label, err, errlen);
    ro__policy_params_free(&pp);
    if (rc)
        return rc;
    /* The rows' recurrent states are sized for the node's cell: a push
     * keeps its kind and size (or, like the node's, has none). */
    uint32_t h_next, h_now;
    const ro_cell_t c_next = ro__policy_cell(next, &h_next),
                    c_now = ro__policy_cell(n->policy, &h_now);
    if (c_next != c_now || h_next != h_now) {
        static const char *const kinds[] = {"none", "gru", "lstm"};
        ro__policy_free(next);
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: its recurrent cell is %s:%u but the node's is %s:%u; a push keeps "
                          "the node's cell",
                          label, kinds[c_next], h_next, kinds[c_now], h_now);
    }
    if (n->swap_next) {
        ro__policy_free(n->swap_queued); /* superseded before it was used */
        n->swap_queued = next;
        return 0;
    }
    start_swap(n, next);
    return 0;
}

void ro__node_policy_switched(ro_node_t *n, ro_learner_t *l)
{
    n->swap_failed |= !l->swap_ok;
    if (--n->swaps_pending > 0)
        return;
    if (n->swap_failed && n->nretired < 8) {
        /* Out of memory in some lane: it still runs the old policy. */
        fprintf(stderr, "rollout-node: a learner lane could not switch policies (out of "
                        "memory); it keeps the old one\n");
        n->retired[n->nretired++] = n->policy;
    } else {
        ro__policy_free(n->policy);
    }
    n->policy = n->swap_next;
    n->swap_next = NULL;
    n->swap_failed = false;
    n->policy_pushes++;
    if (n->swap_queued) { /* pushed meanwhile: now its turn */
        ro_policy_t *next = n->swap_queued;
        n->swap_queued = NULL;
        start_swap(n, next);
    }
}
