#include "actors/local/learner_actor.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "actors/exchange/messages.h"
#include "actors/exchange/step_batch.h"
#include "runtime/numa_mem.h"
#include "spaces/layout.h"

/* gather copies a step batch's rows into the forward pass's input at row r:
 * as they are for one float32 tensor (ABI 1: one memcpy), flattened
 * (spaces/layout.h) otherwise; and its mask rows. */
static void gather(ro_learner_t *l, const ro_step_batch_t *b, float *in, uint32_t r)
{
    const ro_space_layout_t *lay = l->lay;
    if (!lay || lay->plain_obs)
        memcpy(in + (size_t)r * l->obs_dim, b->obs, (size_t)b->n * l->obs_dim * sizeof(float));
    else
        ro__layout_flatten(lay, (const uint8_t *const *)b->tensor, b->n,
                           in + (size_t)r * l->obs_dim);
    if (l->mask)
        memcpy(l->mask + (size_t)r * lay->mask_width, b->mask, (size_t)b->n * lay->mask_width);
}

/* One forward pass over a batch of step batches: their observations in,
 * one action per row out, each batch answered. */
static void flush_one(ro_learner_t *l)
{
    uint32_t rows;
    ro_batch_item_t *taken = ro__batcher_take(&l->ready, &rows);
    float *in = ro__policy_ws_input(l->ws);
    uint32_t r = 0;
    for (ro_batch_item_t *it = taken; it; it = it->next) {
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        gather(l, b, in, r);
        for (uint32_t j = 0; j < b->n; j++)
            l->rngs[r + j] = &b->act_rng[j];
        for (uint32_t j = 0; l->state && j < b->n; j++)
            l->state[r + j] = b->rstate + (size_t)j * b->state_floats;
        if (l->state)
            memcpy(l->first + r, b->episode_start, b->n);
        r += b->n;
    }

    ro_act_stats_t stats = {.logp = l->logp, .mean = l->mean};
    const ro_policy_carry_t carry = {.state = l->state, .first = l->first};
    const ro_policy_carry_t *c = l->state ? &carry : NULL;
    if (l->composite)
        ro__policy_act_masked(l->policy, l->ws, rows, l->rngs, l->mask, l->act_i, l->act_f,
                              l->logp ? &stats : NULL, c);
    else
        ro__policy_act(l->policy, l->ws, rows, l->rngs, l->act_i, l->act_f, l->logp ? &stats : NULL,
                       c);
    const uint64_t version = ro__policy_version(l->policy);
    const float *log_std = l->logp ? ro__policy_log_std(l->policy) : NULL;

    r = 0;
    while (taken) {
        ro_step_batch_t *b = ro__step_batch_of_item(taken);
        taken = taken->next; /* read before the batch goes back */
        if (l->composite) {
            memcpy(b->act_i, l->act_i + (size_t)r * l->lay->ndisc,
                   (size_t)b->n * l->lay->ndisc * sizeof(int32_t));
            memcpy(b->act_f, l->act_f + (size_t)r * l->lay->nbox,
                   (size_t)b->n * l->lay->nbox * sizeof(float));
        } else if (l->discrete) {
            memcpy(b->act_i, l->act_i + r, b->n * sizeof(int32_t));
        } else {
            memcpy(b->act_f, l->act_f + (size_t)r * l->act_dim,
                   (size_t)b->n * l->act_dim * sizeof(float));
        }
        b->policy_version = version; /* handed over with the actions */
        if (l->logp) {               /* stream mode: what the policy said of them */
            memcpy(b->logp, l->logp + r, b->n * sizeof(float));
            if (log_std) {
                memcpy(b->mean, l->mean + (size_t)r * l->act_dim,
                       (size_t)b->n * l->act_dim * sizeof(float));
                memcpy(b->log_std, log_std, l->act_dim * sizeof(float));
            }
        }
        r += b->n;
        ro__step_batch_reply(b, RO_MSG_ACTIONS);
    }
    /* Relaxed: statistics. */
    atomic_fetch_add_explicit(&l->batches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->rows, rows, memory_order_relaxed);
}

/* Run every batch that is due, then arm the max-wait timer for the rest. */
static void maybe_flush(ro_learner_t *l)
{
    /* Rows that may still come: those of shards not waiting here. */
    while (ro__batcher_due(&l->ready, l->active_rows - l->ready.rows))
        flush_one(l);
    if (l->ready.rows > 0 && !l->timer_armed) {
        l->timer_armed = true;
        ro__runq_arm(l->runq, &l->timer, ro__batcher_deadline(&l->ready));
    }
}

static void learner_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_learner_t *l = ro__container_of(self, ro_learner_t, actor);
    switch (msg->type) {
    case RO_MSG_OBS_READY:
        ro__batcher_push(&l->ready, &ro__step_batch_of(msg)->item);
        break;
    case RO_MSG_SHARD_DONE:
        l->active_rows -= ro__step_batch_of(msg)->n;
        l->active_shards--;
        if (l->active_shards == 0)
            ro__actor_send(l->control, &l->done_msg);
        break;
    case RO_MSG_TICK:
        l->timer_armed = false;
        break;
    case RO_MSG_POLICY: {
        /* Between batches: new scratch for the new shapes, then switch. */
        ro_policy_ws_t *ws;
        l->swap_ok = ro__policy_ws_new_on(&ws, l->swap_to, l->max_rows, l->mem_node) == 0;
        if (l->swap_ok) {
            ro__policy_ws_free(l->ws);
            l->ws = ws;
            l->policy = l->swap_to;
        }
        ro__actor_send(l->control, &l->swap_done_msg);
        break;
    }
    default:
        return;
    }
    maybe_flush(l);
}

/* carve points the lane's batch arrays into mem (NULL: only sizes them),
 * each on cache lines of its own, and returns their bytes: the sampling
 * streams, the actions (wi entries a row), a composite policy's mask rows
 * and a recurrent one's (cell) state pointers and episode-start flags. */
static size_t carve(ro_learner_t *l, void *mem, size_t wi, bool cell)
{
    const size_t n = l->max_rows;
    size_t off = 0;
    l->rngs = ro__carve(mem, &off, n * sizeof *l->rngs);
    l->act_i = ro__carve(mem, &off, n * wi * sizeof *l->act_i);
    l->act_f = ro__carve(mem, &off, n * l->act_dim * sizeof *l->act_f);
    if (l->composite && l->lay->mask_width)
        l->mask = ro__carve(mem, &off, n * l->lay->mask_width);
    if (cell) {
        l->state = ro__carve(mem, &off, n * sizeof *l->state);
        l->first = ro__carve(mem, &off, n);
    }
    return off;
}

int ro__learner_init(ro_learner_t *l, const ro_policy_t *p, ro_runq_t *runq, ro_actor_t *control,
                     uint32_t batch, uint64_t max_wait_us, uint32_t shards, uint32_t rows,
                     uint32_t max_shard, bool discrete)
{
    return ro__learner_init_on(l, p, runq, control, batch, max_wait_us, shards, rows, max_shard,
                               discrete, -1);
}

int ro__learner_init_on(ro_learner_t *l, const ro_policy_t *p, ro_runq_t *runq, ro_actor_t *control,
                        uint32_t batch, uint64_t max_wait_us, uint32_t shards, uint32_t rows,
                        uint32_t max_shard, bool discrete, int mem_node)
{
    memset(l, 0, sizeof *l);
    l->policy = p;
    l->runq = runq;
    l->control = control;
    ro__batcher_init(&l->ready, batch, max_wait_us * 1000ull);
    l->max_rows = batch + max_shard - 1;
    l->obs_dim = ro__policy_obs_dim(p);
    l->act_dim = ro__policy_act_dim(p);
    l->discrete = discrete;
    /* Env ABI 2: the layout the policy reads (NULL: ABI 1 as always). A
     * composite action takes ndisc entries and nbox floats a row, and the
     * mask rows go with the observations. */
    l->lay = ro__policy_layout(p);
    l->composite = l->lay && !l->lay->simple_act;
    const size_t wi = l->composite && l->lay->ndisc ? l->lay->ndisc : 1;
    if (l->composite && l->lay->nbox > l->act_dim)
        l->act_dim = l->lay->nbox;
    l->active_rows = rows;
    l->active_shards = shards;
    l->mem_node = mem_node;
    const bool cell = ro__policy_state_floats(p) > 0;
    int rc = ro__policy_ws_new_on(&l->ws, p, l->max_rows, mem_node);
    if (rc)
        return rc;
    /* One block, on the lane's node where it has one. */
    l->mem_bytes = carve(l, NULL, wi, cell);
    if (!(l->mem = ro__numa_alloc(l->mem_bytes, mem_node))) {
        ro__learner_destroy(l);
        return RO_ENOMEM;
    }
    carve(l, l->mem, wi, cell);
    l->timer.msg.type = RO_MSG_TICK;
    l->timer.target = &l->actor;
    l->done_msg.type = RO_MSG_LANE_DONE;
    l->swap_msg.type = RO_MSG_POLICY;
    l->swap_done_msg.type = RO_MSG_POLICY_DONE;
    atomic_init(&l->batches, 0);
    atomic_init(&l->rows, 0);
    /* Batches of messages: a lane may have many shards queued at once. */
    ro__actor_init_worker(&l->actor, "learner", learner_behaviour, runq, 64);
    return 0;
}

int ro__learner_want_stats(ro_learner_t *l)
{
    l->logp = calloc(l->max_rows, sizeof *l->logp);
    l->mean = calloc((size_t)l->max_rows * l->act_dim, sizeof *l->mean);
    if (!l->logp || !l->mean) {
        free(l->logp);
        free(l->mean);
        l->logp = l->mean = NULL;
        return RO_ENOMEM;
    }
    return 0;
}

void ro__learner_destroy(ro_learner_t *l)
{
    free(l->logp);
    free(l->mean);
    ro__policy_ws_free(l->ws);
    ro__numa_free(l->mem, l->mem_bytes); /* the carved arrays */
    l->logp = l->mean = NULL;
    l->ws = NULL;
    l->mem = NULL;
}
