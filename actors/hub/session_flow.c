#include "actors/hub/session_flow.h"

#include <stdio.h>
#include <string.h>

#include "actors/exchange/step_batch.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "wire/seed_ring.h"

void ro__flow_init(ro_flow_t *f, uint32_t batch, uint64_t max_wait_ns)
{
    ro__batcher_init(&f->pending, batch, max_wait_ns);
    f->inflight_head = NULL;
    f->inflight_tail = &f->inflight_head;
    f->inflight_rows = 0;
    f->owned_rows = 0;
    f->next_seq = 1;
    f->mem_layout = NULL;
    f->obs_mem = NULL;
    f->act_mem = NULL;
    f->rings = NULL;
    f->layout = NULL;
}

bool ro__flow_due(const ro_flow_t *f)
{
    uint32_t waiting = f->pending.rows + f->inflight_rows;
    return ro__batcher_due(&f->pending, waiting >= f->owned_rows ? 0 : f->owned_rows - waiting);
}

int ro__flow_send(ro_flow_t *f, ro_sent_batch_t **pool, ro_obs_encoder_t *enc, ro_conn_t *c,
                  uint32_t *rows)
{
    ro_sent_batch_t *b = *pool; /* never empty: see ro_sent_batch_t */
    *pool = b->next;
    b->next = NULL;
    b->items = ro__batcher_take(&f->pending, &b->rows);
    b->seq = f->next_seq++;
    b->sent_ns = ro__now_ns();
    *f->inflight_tail = b;
    f->inflight_tail = &b->next;
    f->inflight_rows += b->rows;
    *rows = b->rows;

    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__obs_encode(enc, b->items, b->seq, f->mem_layout, f->obs_mem, &o);
    /* The ring while the learner is awake; the socket when it may sleep
     * (the frame wakes it), the ring is full or the frame too big for it. */
    if (f->rings && o.in_memory &&
        ro__seed_ring_post(&f->rings->frames, o.seq, o.ranges, o.n_ranges) == RO_SEED_RING_POSTED)
        return 0;
    ro_frame_t fr = ROLLOUT__V1__FRAME__INIT;
    fr.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    fr.observations = &o;
    return ro__conn_send(c, &fr);
}

/* apply_hold marks the frame's envs that Actions.hold names (NEXT_STEP:
 * not stepped this time) in their shards' batches, and clears the others;
 * an env not in the frame (or a batch without a hold column) is a
 * protocol error. */
static int apply_hold(const Rollout__V1__Actions *a, ro_batch_item_t *items, char *err,
                      size_t errlen)
{
    for (ro_batch_item_t *it = items; it; it = it->next) {
        ro_step_batch_t *sb = ro__step_batch_of_item(it);
        if (sb->hold && sb->nheld)
            memset(sb->hold, 0, sb->n / (sb->agents ? sb->agents : 1));
        sb->nheld = 0;
    }
    for (size_t k = 0; k < a->n_hold; k++) {
        uint32_t e = a->hold[k];
        ro_batch_item_t *it = items;
        for (; it; it = it->next) {
            ro_step_batch_t *sb = ro__step_batch_of_item(it);
            uint32_t ne = sb->n / (sb->agents ? sb->agents : 1);
            if (sb->hold && e >= sb->first && e - sb->first < ne) {
                sb->nheld += !sb->hold[e - sb->first];
                sb->hold[e - sb->first] = 1;
                break;
            }
        }
        if (!it)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "actions for seq %llu hold env %u, which is not in that frame",
                              (unsigned long long)a->seq, e);
    }
    return 0;
}

ro_batch_item_t *ro__flow_answer(ro_flow_t *f, ro_sent_batch_t **pool,
                                 const Rollout__V1__Actions *a, const ro_space_t *act, char *err,
                                 size_t errlen)
{
    ro_sent_batch_t **pp = &f->inflight_head;
    while (*pp && (*pp)->seq != a->seq)
        pp = &(*pp)->next;
    ro_sent_batch_t *b = *pp;
    if (!b) {
        f->error = ro__errorf(err, errlen, RO_EPROTO,
                              "actions for seq %llu, which is not awaiting actions",
                              (unsigned long long)a->seq);
        return NULL;
    }
    if (a->in_memory && !f->act_mem) {
        f->error =
            ro__errorf(err, errlen, RO_EPROTO,
                       "actions for seq %llu in memory, but this connection has no shared memory",
                       (unsigned long long)a->seq);
        return NULL;
    }
    int rc = ro__actions_apply(a, b->items, b->rows, act, f->layout, f->mem_layout, f->act_mem, err,
                               errlen);
    if (rc == 0)
        rc = apply_hold(a, b->items, err, errlen);
    if (rc != 0) {
        f->error = rc;
        return NULL;
    }
    *pp = b->next;
    if (f->inflight_tail == &b->next)
        f->inflight_tail = pp;
    f->inflight_rows -= b->rows;
    ro_batch_item_t *items = b->items;
    b->items = NULL;
    b->next = *pool;
    *pool = b;
    return items;
}

ro_batch_item_t *ro__flow_take_awaiting(ro_flow_t *f, ro_sent_batch_t **pool, uint64_t *frames)
{
    ro_batch_item_t *all = NULL, **tail = &all;
    *frames = 0;
    while (f->inflight_head) {
        ro_sent_batch_t *b = f->inflight_head;
        f->inflight_head = b->next;
        *tail = b->items;
        while (*tail)
            tail = &(*tail)->next;
        *frames += b->items != NULL;
        b->items = NULL;
        b->next = *pool;
        *pool = b;
    }
    f->inflight_tail = &f->inflight_head;
    f->inflight_rows = 0;
    return all;
}

ro_batch_item_t *ro__flow_reclaim(ro_flow_t *f, ro_sent_batch_t **pool, uint64_t *resent)
{
    ro_batch_item_t *all = ro__flow_take_awaiting(f, pool, resent), **tail = &all;
    while (*tail)
        tail = &(*tail)->next;
    uint32_t rows;
    *tail = ro__batcher_take_all(&f->pending, &rows);
    return all;
}

uint64_t ro__flow_oldest_sent_ns(const ro_flow_t *f)
{
    return f->inflight_head ? f->inflight_head->sent_ns : 0;
}
