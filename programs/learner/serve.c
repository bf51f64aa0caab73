/*
 * rollout-learner's serving: what the node links report (welcomes, frames,
 * segments, connections going down), batching frames into jobs for the
 * forward-pass lanes and answering them. Calls nothing of main.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "learner/learner.h"
#include "actors/exchange/batcher.h"
#include "learner/frame_ring.h"
#include "runtime/error.h"
#include "runtime/thread_guard.h"
#include "wire/checks.h"
#include "wire/typed_checks.h"

static node_t *node_of(ro_link_t *l)
{
    return ro__container_of(l, node_t, link);
}

/* Close the loop's handles once no node is left and no job is out. */
void ro__learner_maybe_finish(learner_t *L)
{
    if (L->finished || L->open_links > 0 || L->fw.jobs_out > 0)
        return;
    L->finished = true;
    if (ro__learner_metrics_close(L) != 0 && L->exit_code == 0) {
        snprintf(L->err, sizeof L->err, "could not write the TensorBoard events in %s",
                 L->cfg.tensorboard);
        L->exit_code = 1;
    }
    for (uint32_t i = 0; i < L->cfg.nconnect; i++)
        ro__link_release(&L->nodes[i].link);
    uv_close((uv_handle_t *)&L->check, NULL);
    uv_close((uv_handle_t *)&L->prepare, NULL);
    uv_close((uv_handle_t *)&L->kick, NULL);
    ro__loop_spin_close(&L->spin);
    uv_close((uv_handle_t *)&L->wait_timer, NULL);
    uv_close((uv_handle_t *)&L->deadline, NULL);
    uv_close((uv_handle_t *)&L->progress, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
    uv_close((uv_handle_t *)&L->sigterm, NULL);
    ro__forward_close(&L->fw);
}

/* Acknowledge a stream node's segments taken so far (one cumulative ack). */
static void send_ack(node_t *n)
{
    Rollout__V1__SegmentAck a = ROLLOUT__V1__SEGMENT_ACK__INIT;
    a.seq = n->ack_owed;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT_ACK;
    f.segment_ack = &a;
    n->ack_owed = 0;
    ro__link_send(&n->link, &f);
}

void ro__learner_stop_all(learner_t *L, const char *why)
{
    if (L->stopping)
        return;
    L->stopping = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        if (L->nodes[i].ack_owed) /* taken and counted: not to be sent again */
            send_ack(&L->nodes[i]);
        ro__link_stop(&L->nodes[i].link, why);
    }
    ro__learner_maybe_finish(L);
}

void ro__learner_free_pending(ro_batch_item_t *it)
{
    while (it) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        it = it->next;
        ro__frame_free(&p->link->alloc, p->frame);
        free(p->rs);
        free(p);
    }
}

static int on_welcome(ro_link_t *l, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    learner_t *L = l->o.owner;
    bool misfit = false;
    int rc = ro__learner_welcome(L, node_of(l), w, &misfit, err, errlen);
    if (misfit)
        ro__learner_stop_all(L, "policy does not fit the env");
    const node_t *n = node_of(l);
    if (rc == 0 && !misfit)
        rc = ro__learner_choose_threads(L, n->stream || L->push ? 0 : n->num_envs, l->conn.local,
                                        ro__learner_job_done, err, errlen);
    L->threads = ro__thread_count(); /* the workers, if any, run now */
    return rc;
}

/* An Observations frame, from the socket (f) or the ring (f NULL: o is
 * the caller's), checked and pending for a forward pass; true if taken
 * (then f is the pending frame's to free). */
static bool take_observations(learner_t *L, ro_link_t *l, const Rollout__V1__Observations *o,
                              ro_frame_t *f)
{
    node_t *n = node_of(l);
    char err[256];
    ro__loop_spin_answered(&L->spin);
    if ((L->abi2 ? ro__check_observations_typed(o, &L->lay, n->num_envs, err, sizeof err)
                 : ro__check_observations(o, L->obs_dim, n->num_envs, err, sizeof err)) != 0) {
        ro__link_fail(l, "%s", err);
        return false;
    }
    if (o->in_memory && !n->seed_obs.base) {
        ro__link_fail(l, "observations %llu in memory, but no shared memory was agreed",
                      (unsigned long long)o->seq);
        return false;
    }
    uint32_t rows = (uint32_t)o->n_env;
    if (o->in_memory) /* checked: the ranges add up to at most num_envs */
        (void)ro__seed_mem_rows(o->ranges, o->n_ranges, n->num_envs, &rows, err, sizeof err);
    const size_t extra = ro__learner_rows_bytes(L, o, rows);
    ro_pending_t *p = malloc(sizeof *p + extra);
    if (!p) {
        ro__link_fail(l, "out of memory");
        return false;
    }
    p->frame = f;
    p->seq = o->seq;
    p->in_memory = o->in_memory;
    p->link = l;
    p->gen = l->gen;
    p->item.rows = rows;
    p->rs = NULL;
    if (ro__learner_take_rows(L, n, o, p, err, sizeof err) != 0) {
        free(p->rs);
        free(p);
        ro__link_fail(l, "%s", err);
        return false;
    }
    n->frames++;
    n->frames_in_memory += o->in_memory;
    ro__batcher_push(&L->pending, &p->item);
    return true;
}

static void on_frame(ro_link_t *l, ro_frame_t *f, bool *keep)
{
    learner_t *L = l->o.owner;
    char err[256];
    if (L->push && f->body_case == ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED) {
        L->pushed++;
        ro__conn_goodbye(&l->conn, "policy pushed", NULL);
        snprintf(err, sizeof err, "accepted policy version %llu",
                 (unsigned long long)f->policy_accepted->version);
        ro__link_close(l, err, true);
        return;
    }
    if (L->push || f->body_case != ROLLOUT__V1__FRAME__BODY_OBSERVATIONS) {
        ro__link_fail(l, "unexpected %s frame from a node", ro__frame_kind(f));
        return;
    }
    if (L->stopping)
        return;
    *keep = take_observations(L, l, f->observations, f);
}

/* The frames n's node posted in its ring, taken as if they had come on
 * the socket; a ring not to be believed fails the link. */
static void drain_ring(learner_t *L, node_t *n)
{
    Rollout__V1__Observations o;
    ro_seed_ring_slot_t slot;
    char err[256];
    while (!L->stopping && ro__learner_ring_live(n)) {
        int rc = ro__learner_ring_next(n, &o, &slot, err, sizeof err);
        if (rc < 0)
            ro__link_fail(&n->link, "%s", err);
        if (rc <= 0 || !take_observations(L, &n->link, &o, NULL))
            return;
    }
}

/* A connection went down: its frames not yet in a job are void (the node
 * keeps them for its next learner, us again after a reconnect). */
static void on_down(ro_link_t *l)
{
    learner_t *L = l->o.owner;
    node_t *n = node_of(l);
    /* A SEED node that stopped said how many env steps this connection's
     * answers made: counted as that, as the node counts them, not as the
     * observations served (the frames held when it stopped were never
     * stepped). docs/protocol.md "rollout-learner". */
    if (l->has_goodbye_steps && !n->stream) {
        const uint64_t want = n->steps_at_welcome + l->goodbye_steps;
        L->steps = L->steps - n->steps + want;
        n->steps = want;
        l->has_goodbye_steps = false;
    }
    uint32_t rows;
    ro_batch_item_t *all = ro__batcher_take_all(&L->pending, &rows), *mine = NULL;
    while (all) {
        ro_batch_item_t *next = all->next;
        ro_pending_t *p = ro__container_of(all, ro_pending_t, item);
        if (p->link == l) {
            all->next = mine;
            mine = all;
        } else {
            ro__batcher_push(&L->pending, all);
        }
        all = next;
    }
    ro__learner_free_pending(mine);
    if (l->failed && L->exit_code == 0)
        L->exit_code = 1;
    if (l->done) {
        L->open_links--;
        ro__learner_maybe_finish(L);
    }
}

/* A stream node's segment, read in place: counted, then acknowledged: at
 * once when half the window is owed, else after this turn of the loop has
 * read what came (ro__learner_on_check), so that one ack covers a read's
 * worth of segments and the node's loop wakes once for them. */
static bool on_raw(ro_link_t *l, const uint8_t *body, size_t len)
{
    learner_t *L = l->o.owner;
    node_t *n = node_of(l);
    if (!n->stream || L->stopping)
        return false;
    uint64_t before = n->rx.steps, ack;
    char err[256];
    int rc = ro__stream_rx_frame(&n->rx, body, len, &ack, err, sizeof err);
    if (rc < 0)
        ro__link_fail(l, "%s", err);
    if (rc <= 0)
        return rc < 0;
    L->steps += n->rx.steps - before;
    n->steps = n->rx.steps;
    n->episodes = n->rx.episodes;
    n->return_sum = n->rx.return_sum;
    L->batches++;
    if (n->ack_owed == 0)
        n->first_owed = ack;
    n->ack_owed = ack;
    if (ack - n->first_owed + 1 >= n->ack_every)
        send_ack(n);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        ro__learner_stop_all(L, "step budget reached");
    return true;
}

const ro_link_ops_t ro__learner_link_ops = {
    .on_welcome = on_welcome,
    .on_frame = on_frame,
    .on_raw = on_raw,
    .on_down = on_down,
};

/* Back from a lane: one Actions frame per Observations frame of the job. */
void ro__learner_job_done(void *ctx, ro_job_t *j)
{
    learner_t *L = ctx;
    uint32_t r = 0;
    for (ro_batch_item_t *it = j->frames; it; it = it->next) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
        a.seq = p->seq;
        node_t *n = node_of(p->link);
        const bool current = !j->failed && p->gen == p->link->gen;
        const size_t sf = n->rstate.floats;
        for (size_t i = 0; current && p->rs && i < it->rows; i++) /* the answer goes: kept */
            ro__state_table_commit(&n->rstate, p->env[i], p->rs_step[i], p->rs + i * 2 * sf,
                                   p->rs + (i * 2 + 1) * sf);
        const int32_t *act_i = j->act_i + (size_t)r * L->act_ndisc;
        const float *act_f = j->act_f + (size_t)r * L->act_dim;
        if (p->in_memory && current) { /* this connection's memory: mapped */
            ro__learner_write_actions(L, n, p, act_i, act_f);
            a.in_memory = true;
        } else { /* every row's entries and floats, in order (ABI 1: one or the other) */
            a.n_discrete = (size_t)it->rows * L->lay.ndisc;
            a.discrete = a.n_discrete ? (int32_t *)act_i : NULL;
            a.n_box = (size_t)it->rows * L->lay.nbox;
            a.box = a.n_box ? (float *)act_f : NULL;
        }
        ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
        f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
        f.actions = &a;
        /* A node that went away keeps these observations for its next
         * learner; a connection made since (a reconnect) is not the one they
         * came on. Steps were counted on arrival (take_rows). */
        if (current) { /* in memory: through the ring while the node is awake */
            if (!a.in_memory || !ro__learner_ring_answer(n, a.seq))
                ro__link_send(p->link, &f);
            ro__loop_spin_arm(&L->spin); /* the envs' next observations come soon */
        }
        r += it->rows;
    }
    ro__learner_free_pending(j->frames);
    free(j->rowrng);
    free(j->act_i);
    free(j->act_f);
    free(j->mask);
    free(j->state);
    free(j);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        ro__learner_stop_all(L, "step budget reached");
    ro__learner_maybe_finish(L);
}

/* One batch of pending frames into a job for the next lane. */
static void submit_batch(learner_t *L)
{
    ro_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(L->err, sizeof L->err, "out of memory for a batch");
        L->exit_code = 1;
        ro__learner_stop_all(L, "out of memory");
        return;
    }
    j->frames = ro__batcher_take(&L->pending, &j->rows);
    j->rowrng = calloc(j->rows, sizeof *j->rowrng);
    /* + 1: an ABI 2 action may have no discrete entries, or no floats. */
    j->act_i = calloc((size_t)j->rows * L->act_ndisc + 1, sizeof *j->act_i);
    j->act_f = calloc((size_t)j->rows * L->act_dim + 1, sizeof *j->act_f);
    const size_t mw = L->lay.mask_width;
    j->mask = mw ? malloc((size_t)j->rows * mw) : NULL;
    const bool cell = ro__policy_state_floats(L->policy) > 0;
    j->state = cell ? calloc(j->rows, sizeof *j->state) : NULL;
    j->failed = !j->rowrng || !j->act_i || !j->act_f || (mw && !j->mask) ||
                (cell && !j->state); /* resent */
    uint32_t r = 0;
    for (ro_batch_item_t *it = j->frames; it && !j->failed; it = it->next) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        const size_t f = node_of(p->link)->rstate.floats;
        for (size_t i = 0; i < it->rows; i++)
            j->rowrng[r + i] = &node_of(p->link)->rngs[p->env[i]];
        for (size_t i = 0; cell && i < it->rows; i++)
            j->state[r + i] = p->rs + (i * 2 + 1) * f;
        if (mw)
            memcpy(j->mask + (size_t)r * mw, p->mask, (size_t)it->rows * mw);
        r += it->rows;
    }
    L->batches++;
    if (L->met.on)
        ro__histo_add(&L->met.rows_iv, (double)j->rows);
    if (j->failed) {
        L->fw.jobs_out++; /* as if a lane had it: on_job_done counts it back */
        ro__actor_send(&L->fw.done, &j->msg);
    } else {
        ro__forward_submit(&L->fw, j);
    }
}

static void on_wait_timer(uv_timer_t *t);

/* After each turn of the loop: run what is due. */
static void flush(learner_t *L)
{
    while (!L->stopping && ro__batcher_due(&L->pending, RO_BATCHER_UNKNOWN))
        submit_batch(L);
    if (L->pending.rows > 0 && !L->stopping && !L->wait_armed) {
        L->wait_armed = true;
        uv_timer_start(&L->wait_timer, on_wait_timer, (L->cfg.max_wait_us + 999) / 1000, 0);
    }
}

static void on_wait_timer(uv_timer_t *t)
{
    learner_t *L = t->data;
    L->wait_armed = false;
    flush(L);
}

/* Rounds of reading at once per turn of the loop (below): enough for a
 * pipeline of SEED frames to go on without the loop, few enough that its
 * timers and signals still come round every few hundred microseconds. */
#define READ_NOW_ROUNDS 16

void ro__learner_on_check(uv_check_t *h)
{
    learner_t *L = h->data;
    ro__learner_rings_wake(L);
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        if (L->nodes[i].ack_owed)
            send_ack(&L->nodes[i]);
        drain_ring(L, &L->nodes[i]);
    }
    flush(L);
    /* The answers just sent; a SEED node's next frame has usually come
     * while we computed: take it now, from the ring or the socket, rather
     * than after another turn of the loop and its epoll_wait (perf: 1.5
     * epoll_wait and 10-15 % of the learner's time in the loop's system
     * calls per frame at 256 envs). */
    for (int round = 0; round < READ_NOW_ROUNDS && !L->stopping; round++) {
        uint32_t before = L->pending.rows;
        size_t got = 0;
        for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
            node_t *n = &L->nodes[i];
            drain_ring(L, n);
            if (n->link.welcomed && !n->stream)
                got += ro__conn_read_now(&n->link.conn);
        }
        if (got == 0 && L->pending.rows == before)
            break;
        flush(L);
    }
}

static void on_kick(uv_idle_t *h)
{
    uv_idle_stop(h);
}

void ro__learner_on_prepare(uv_prepare_t *h)
{
    learner_t *L = h->data;
    /* Only if the loop may block (no idle handle, no spin): a ring marked
     * asleep makes its node send on the socket, which costs it a wake-up. */
    for (int round = 0; round < READ_NOW_ROUNDS; round++) {
        if (L->stopping || uv_backend_timeout(&L->loop) == 0 || ro__learner_rings_sleep(L))
            return;
        for (uint32_t i = 0; i < L->cfg.nconnect; i++) /* frames came: take them first */
            drain_ring(L, &L->nodes[i]);
        flush(L);
    }
    /* They keep coming: one more turn without blocking, then try again. */
    uv_idle_start(&L->kick, on_kick);
}
