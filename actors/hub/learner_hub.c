#include "actors/hub/learner_hub.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/hub/hub_internal.h"
#include "actors/hub/hub_ring.h"
#include "actors/exchange/messages.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "wire/checks.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/gate.h"
#include "wire/listener.h"

static void session_close(ro_session_t *s, const char *why);
__attribute__((format(printf, 3, 4))) static void session_fail(ro_session_t *s, int code,
                                                               const char *fmt, ...);

/* ---------- who holds which env ---------- */

static void maybe_send(ro_session_t *s);

/* Who serves shard i (rows envs) now: its owner, unless it has none or it
 * holds clearly more than the least-loaded learner (a new learner
 * attached): lazy rebalancing, one shard at a time, at a step (or segment)
 * boundary. NULL: no learner. */
static ro_session_t *owner_for(ro_hub_t *h, uint32_t i, uint32_t rows)
{
    ro_session_t *own = h->owner[i];
    ro_session_t *least = ro__hub_least_loaded(h);
    /* Stream mode: not while a learner holds some of the shard's segments. */
    bool movable = !h->sst.held || h->sst.held[i] == 0;
    if (!own || (movable && least && own->flow.owned_rows > least->flow.owned_rows + rows))
        ro__hub_set_owner(h, i, rows, least);
    return h->owner[i];
}

/* A ready shard: to its owner's pending batch. */
static void route(ro_hub_t *h, ro_step_batch_t *b)
{
    ro_session_t *own = owner_for(h, b->index, b->n);
    if (!own) {
        b->item.next = NULL;
        *h->orphan_tail = &b->item;
        h->orphan_tail = &b->item.next;
        return;
    }
    ro__batcher_push(&own->flow.pending, &b->item);
    maybe_send(own);
}

/* Route every step batch of a list (orphans, a closed session's). */
static void route_all(ro_hub_t *h, ro_batch_item_t *it)
{
    while (it) {
        ro_batch_item_t *next = it->next;
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        if (h->stopping)
            ro__step_batch_reply(b, RO_MSG_STOP); /* finish without stepping */
        else
            route(h, b);
        it = next;
    }
}

/* ---------- stream mode: segments ---------- */

static void stream_send(ro_session_t *s);

/* Every shard sent its last segment and every segment was acknowledged
 * (or, stopping with no learner left, dropped): the hub is done. */
static void stream_check_done(ro_hub_t *h)
{
    if (h->done_sent)
        return;
    if (h->stopping && h->nsessions == 0 && h->seg_orphans) {
        /* Dropped now, not once the shards are done: shards still stepping
         * may be waiting for these very segments to finish their last. */
        for (ro_segment_t *g = h->seg_orphans; g; g = g->next)
            h->stats.segments_unsent_at_stop++;
        ro_segment_t *drop = h->seg_orphans;
        h->seg_orphans = NULL;
        h->seg_orphan_tail = &h->seg_orphans;
        ro__seg_pool_give(h->segs, drop);
    }
    if (h->active_shards > 0 || h->seg_orphans)
        return;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->sflow.pending || s->sflow.sent)
            return;
    h->done_sent = true;
    ro__actor_send(h->control, &h->done_msg);
}

/* A full segment: to the learner that holds its shard (each shard's
 * segments go to one learner at a time, in order), or to the orphans. */
static void route_segment(ro_hub_t *h, ro_segment_t *g)
{
    ro_session_t *own = owner_for(h, g->shard, g->n);
    if (!own) {
        g->next = NULL;
        *h->seg_orphan_tail = g;
        h->seg_orphan_tail = &g->next;
        return;
    }
    ro__sflow_push(&own->sflow, g, &h->sst);
    stream_send(own);
}

static void route_segments(ro_hub_t *h, ro_segment_t *g)
{
    while (g) {
        ro_segment_t *next = g->next;
        route_segment(h, g);
        g = next;
    }
}

/* adopt_orphans routes what waited for a learner: the step batches (SEED
 * mode) and the segments (stream mode) of the orphan lists, one of which
 * is always empty. */
static void adopt_orphans(ro_hub_t *h)
{
    ro_batch_item_t *it = h->orphan_head;
    ro_segment_t *g = h->seg_orphans;
    h->orphan_head = NULL;
    h->orphan_tail = &h->orphan_head;
    h->seg_orphans = NULL;
    h->seg_orphan_tail = &h->seg_orphans;
    route_all(h, it);
    route_segments(h, g);
}

static void on_segment(ro_hub_t *h, ro_segment_t *g)
{
    if (g->last) { /* the shard's last: nothing more comes from it */
        h->active_shards--;
        ro__hub_set_owner(h, g->shard, g->n, NULL);
    }
    if (g->t == 0) {
        g->next = NULL;
        ro__seg_pool_give(h->segs, g);
    } else {
        route_segment(h, g);
    }
    stream_check_done(h);
}

static void stream_send(ro_session_t *s)
{
    ro_hub_t *h = s->hub;
    ro_segment_t *dropped = NULL;
    int rc = ro__sflow_send(&s->sflow, &s->conn, h->version_now, &dropped, &h->sst);
    ro__seg_pool_give(h->segs, dropped);
    if (rc == RO_ENOBUFS) {
        ro__conn_log(&s->conn, "stopped reading (over %u MiB queued); closing",
                     RO_CONN_MAX_QUEUED >> 20);
        h->stats.rejected++;
    }
    if (rc)
        session_close(s, "could not send");
}

static void on_segment_ack(ro_session_t *s, const Rollout__V1__SegmentAck *a)
{
    ro_hub_t *h = s->hub;
    char err[200];
    if (ro__sflow_ack(&s->sflow, a->seq, &h->sst, err, sizeof err) != 0) {
        session_fail(s, RO_EPROTO, "%s", err);
        return;
    }
    stream_send(s);
    stream_check_done(h);
}

/* ---------- batching ---------- */

static void on_timer(uv_timer_t *t)
{
    ro_hub_t *h = t->data;
    h->timer_armed = false;
    for (ro_session_t *s = h->sessions; s;) {
        ro_session_t *next = s->next; /* s may close */
        if (s->attached)
            maybe_send(s);
        s = next;
    }
}

static void arm_timer(ro_hub_t *h)
{
    if (h->timer_armed)
        return;
    h->timer_armed = true;
    uint64_t ms = (h->o.max_wait_us + 999) / 1000;
    uv_timer_start(&h->timer, on_timer, ms ? ms : 1, 0);
}

static void maybe_send(ro_session_t *s)
{
    ro_hub_t *h = s->hub;
    while (s->listed && ro__flow_due(&s->flow)) {
        uint32_t rows;
        int rc = ro__flow_send(&s->flow, &h->free_batches, &h->enc, &s->conn, &rows);
        h->stats.batches_sent++;
        h->stats.rows_sent += rows;
        if (rc == RO_ENOBUFS) {
            ro__conn_log(&s->conn, "stopped reading (over %u MiB queued); closing",
                         RO_CONN_MAX_QUEUED >> 20);
            h->stats.rejected++;
        }
        if (rc != 0)
            session_close(s, "could not send"); /* its batches, this one included, go to others */
        else
            ro__loop_spin_arm(&h->spin); /* its actions are due */
    }
    if (s->listed && s->flow.pending.rows > 0)
        arm_timer(h);
}

/* ---------- sessions ---------- */

static void unlist(ro_session_t *s)
{
    ro_hub_t *h = s->hub;
    for (ro_session_t **pp = &h->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    s->listed = false;
    ro__gate_leave(&h->gate, &s->conn);
    if (s->attached && !s->trainer)
        h->nsessions--;
    h->nattached -= s->attached;
}

/* Close a session and give what it held to the others (or the orphans):
 * unanswered batches first, in the order they were sent, then its pending
 * shards. Each is sent again as it was: the envs have not stepped. */
static void session_close(ro_session_t *s, const char *why)
{
    if (!s->listed)
        return;
    ro_hub_t *h = s->hub;
    unlist(s);
    uint64_t resent;
    ro_batch_item_t *held = ro__flow_reclaim(&s->flow, &h->free_batches, &resent);
    if (!h->stopping) /* a stopping node sends nothing again */
        h->stats.batches_resent += resent;
    for (uint32_t i = 0; i < h->nshards; i++)
        if (h->owner[i] == s)
            ro__hub_set_owner(h, i, h->batches[i]->n, NULL);
    route_all(h, held);
    if (h->segs) {
        ro_segment_t *segs = ro__sflow_reclaim(&s->sflow, &resent, &h->sst);
        h->stats.segments_resent += resent;
        route_segments(h, segs);
        stream_check_done(h);
    }
    ro__conn_close(&s->conn, why);
}

/* A peer broke the rules: tell it, log, close. */
__attribute__((format(printf, 3, 4))) static void session_fail(ro_session_t *s, int code,
                                                               const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->hub->stats.rejected++;
    ro__conn_fail(&s->conn, code, "%s", msg); /* logs, sends the error, closes the socket */
    session_close(s, msg);
}

static void on_hello(ro_session_t *s, const Rollout__V1__Hello *hello)
{
    ro_hub_t *h = s->hub;
    if (hello->name) /* a peer's words: ro__conn_log escapes the label */
        snprintf(s->conn.label, sizeof s->conn.label, "learner %s '%.40s'", s->conn.peer,
                 hello->name);
    ro_hello_rules_t rules = {
        .learners = h->o.learners,
        .trainers = h->o.on_policy != NULL,
        .token = h->has_token ? h->token : NULL,
    };
    bool trainer;
    char err[256];
    int rc = ro__check_hello(hello, &rules, &trainer, err, sizeof err);
    if (rc == 0)
        rc = ro__hub_upgrade_admit(s, hello, err, sizeof err);
    if (rc) {
        session_fail(s, rc, "%s", err);
        return;
    }
    if (h->stopping) {
        session_fail(s, RO_ESHUTDOWN, "the node is stopping");
        return;
    }
    if (h->nattached >= h->o.max_learners) {
        session_fail(s, RO_EPROTO, "too many learners attached (limit %u)", h->o.max_learners);
        return;
    }
    if ((rc = ro__hub_upgrade_offer(s, hello, trainer)) != 0) {
        if (rc < 0) /* else offered: the learner closes this one and goes there */
            session_close(s, "could not send the upgrade");
        return;
    }
    ro__gate_pass(&h->gate, &s->conn, h->o.max_frame);
    if (h->segs) { /* before the welcome, which tells the window */
        ro__sflow_init(&s->sflow, hello->window ? hello->window : h->window,
                       hello->max_policy_lag ? hello->max_policy_lag : h->max_lag);
        /* Only a peer on this host can map it; the kernel checks that it
         * may (protocol.md "Segments in shared memory"). */
        if (hello->shared_memory && s->conn.local && h->segs->shm.base)
            s->sflow.shm = &h->segs->shm;
    } else if (hello->shared_memory && hello->seed_memory && s->conn.local && !trainer &&
               (!h->o.layout || hello->seed_memory_abi2)) { /* else frames carry ABI 2 columns */
        /* the welcome says where, or frames carry it all */
        ro__hub_seed_memory(s, hello->seed_ring);
    }
    if (ro__hub_send_welcome(s) != 0) {
        session_close(s, "could not send the welcome");
        return;
    }
    s->attached = true;
    h->nattached++;
    if (trainer) {
        s->trainer = true;
        ro__conn_log(&s->conn, "attached as a trainer");
        return;
    }
    h->nsessions++;
    h->stats.attached++;
    ro__conn_log(&s->conn, "attached (%u learner%s)%s", h->nsessions, h->nsessions == 1 ? "" : "s",
                 s->via_upgrade ? ", moved here from TCP: the same host" : "");
    adopt_orphans(h);
}

static void on_policy_params(ro_session_t *s, const Rollout__V1__PolicyParams *pp)
{
    ro_hub_t *h = s->hub;
    char err[400] = "";
    int rc = h->o.on_policy(h->o.ctx, pp, err, sizeof err);
    if (rc != 0) {
        session_fail(s, rc, "%s", err[0] ? err : "policy rejected");
        return;
    }
    ro__conn_log(&s->conn, "pushed policy version %llu", (unsigned long long)pp->version);
    s->pushed_version = pp->version;
    /* Lag counts from the newest weights accepted, not those the lanes have
     * switched to yet: what a learner means by "versions behind mine". */
    h->version_now = pp->version;
    h->stats.policy_pushes++;
    Rollout__V1__PolicyAccepted a = ROLLOUT__V1__POLICY_ACCEPTED__INIT;
    a.version = pp->version;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED;
    f.policy_accepted = &a;
    if (ro__conn_send(&s->conn, &f) != 0)
        session_close(s, "could not answer");
}

/* Actions answer a batch: its shards step again (or finish, if we stop).
 * From a frame or the session's answer ring (hub_ring.c: bad says why the
 * ring is not to be believed). */
static void on_actions(ro_session_t *s, const Rollout__V1__Actions *a, const char *bad)
{
    ro_hub_t *h = s->hub;
    char err[256];
    ro__loop_spin_answered(&h->spin);
    ro_batch_item_t *it =
        bad ? NULL : ro__flow_answer(&s->flow, &h->free_batches, a, h->act_space, err, sizeof err);
    if (!it) {
        session_fail(s, bad ? RO_EPROTO : s->flow.error, "%s", bad ? bad : err);
        return;
    }
    while (it) {
        ro_batch_item_t *next = it->next;
        s->answered_steps += h->stopping ? 0 : ro__step_batch_of_item(it)->n;
        ro__step_batch_reply(ro__step_batch_of_item(it),
                             h->stopping ? RO_MSG_STOP : RO_MSG_ACTIONS);
        it = next;
    }
    if (s->flow.inflight_head)
        ro__loop_spin_arm(&h->spin); /* the other frames' actions are still due */
}

static void on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    ro_session_t *s = c->o.owner;
    ro_hub_t *h = s->hub;
    (void)keep;
    if (!s->listed)
        return;
    if (!s->attached) {
        if (f->body_case == ROLLOUT__V1__FRAME__BODY_HELLO && f->hello)
            on_hello(s, f->hello);
        else
            session_fail(s, RO_EPROTO, "expected hello first, got %s", ro__frame_kind(f));
        return;
    }
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_ACTIONS:
        if (s->trainer)
            session_fail(s, RO_EPROTO, "a trainer cannot send actions");
        else
            on_actions(s, f->actions, NULL);
        break;
    case ROLLOUT__V1__FRAME__BODY_RESEED: /* hub_reseed.c; a refusal fails s */
        ro__hub_reseed(s, f->reseed, session_fail);
        break;
    case ROLLOUT__V1__FRAME__BODY_GET_STATE: /* hub_env_state.c */
    case ROLLOUT__V1__FRAME__BODY_SET_STATE:
        ro__hub_env_state(s, f, session_fail);
        break;
    case ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS:
        if (!s->trainer && !(h->segs && h->o.on_policy))
            session_fail(s, RO_EPROTO, "only a trainer (or a stream learner) may push a policy");
        else
            on_policy_params(s, f->policy_params);
        break;
    case ROLLOUT__V1__FRAME__BODY_SEGMENT_ACK:
        if (!h->segs || s->trainer)
            session_fail(s, RO_EPROTO, "a segment ack, but no segments were sent");
        else
            on_segment_ack(s, f->segment_ack);
        break;
    case ROLLOUT__V1__FRAME__BODY_GOODBYE: /* the peer's words: ro__conn_log escapes them */
        ro__conn_log(c, "said goodbye (%.100s)", f->goodbye->reason ? f->goodbye->reason : "");
        session_close(s, "goodbye");
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        ro__conn_log(c, "sent error %u: %.200s; closing", f->error->code,
                     f->error->message ? f->error->message : "");
        session_close(s, "error");
        break;
    default:
        session_fail(s, RO_EPROTO, "unexpected %s frame from a learner", ro__frame_kind(f));
        break;
    }
}

/* The socket is gone: a close we started, or one the peer or the network
 * made (then its batches still have to go elsewhere). */
static void on_closed(ro_conn_t *c)
{
    ro_session_t *s = c->o.owner;
    if (s->listed) {
        if (c->broken) /* conn.c logged it */
            s->hub->stats.rejected++;
        else if (!s->offered || s->attached) /* else it went on to the private socket */
            ro__conn_log(c, "%s", c->why[0] ? c->why : "disconnected");
        session_close(s, c->why);
    }
    ro__shared_mem_release(&s->act_mem);
    s->flow.rings = NULL;
    ro__shared_mem_release(&s->ring_mem);
    free(s);
}

/* The watchdog's (hub_admit.c) way to close a session. */
static void fail_session(ro_session_t *s, int code, const char *msg)
{
    session_fail(s, code, "%s", msg);
}

static const ro_conn_ops_t session_ops = {
    .on_frame = on_frame,
    .on_closed = on_closed,
};

static void on_connection(ro_listener_t *l, int fd)
{
    ro_hub_t *h = l->data;
    ro_session_t *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return;
    }
    s->hub = h;
    s->via_upgrade = l == &h->up_listener;
    s->accepted_ns = ro__now_ns();
    ro__flow_init(&s->flow, h->o.batch, h->o.max_wait_us * 1000ull);
    s->flow.layout = h->o.layout;
    /* Empty from the start (closing reclaims it, hello or not); the hello
     * may set its window and lag again. */
    ro__sflow_init(&s->sflow, h->window, h->max_lag);
    ro_conn_opts_t co = {
        .ops = &session_ops,
        .owner = s,
        .program = "rollout-node",
        .max_frame = h->o.max_frame,
        .max_queued = RO_CONN_MAX_QUEUED,
        .alloc = &h->alloc,
        .budget = &h->budget,
    };
    if (ro__conn_accept(&s->conn, h->loop, fd, &co) != 0) {
        free(s);
        return;
    }
    snprintf(s->conn.label, sizeof s->conn.label, "learner %s", s->conn.peer);
    s->listed = true;
    s->next = h->sessions;
    h->sessions = s;
    h->stats.accepted++;
    /* A stranger waits in the gate (wire/gate.h); ETIMEDOUT: a dropped one may retry. */
    ro_conn_t *drop = NULL;
    if (h->stopping)
        session_fail(s, RO_ESHUTDOWN, "the node is stopping");
    else if ((drop = ro__gate_admit(&h->gate, &s->conn, s->accepted_ns)))
        session_fail(drop->o.owner, RO_ETIMEDOUT,
                     "dropped: %u connections wait for their hello, this one the longest",
                     h->gate.slots);
}

/* ---------- the actor ---------- */

static void hub_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_hub_t *h = ro__container_of(self, ro_hub_t, actor);
    if (msg->type == RO_MSG_SEGMENT) {
        on_segment(h, ro__container_of(msg, ro_segment_t, msg));
        return;
    }
    ro_step_batch_t *b = ro__step_batch_of(msg);
    if (msg->type == RO_MSG_SHARD_DONE) {
        ro_session_t *own = h->owner[b->index];
        ro__hub_set_owner(h, b->index, b->n, NULL);
        h->active[b->index] = false;
        if (own)
            maybe_send(own); /* the others of its shards may all be waiting now */
        if (--h->active_shards == 0)
            ro__actor_send(h->control, &h->done_msg);
        return;
    }
    if (h->stopping) {
        ro__step_batch_reply(b, RO_MSG_STOP);
        return;
    }
    route(h, b);
}

/* ---------- set-up and tear-down ---------- */

int ro__hub_new(ro_hub_t **out, uv_loop_t *loop, ro_step_batch_t *const *batches, uint32_t nshards,
                uint32_t num_envs, const ro_space_t *obs, const ro_space_t *act,
                ro_actor_t *control, const ro_hub_opts_t *o, char *err, size_t errlen)
{
    ro_hub_t *h;
    int rc = ro__hub_state_new(&h, loop, batches, nshards, num_envs, obs, act, control, o);
    if (rc)
        goto fail;
    rc = ro__listener_open(&h->listener, loop, o->listen, "--listen", o->token != NULL,
                           "rollout-node", on_connection, h, h->addr, sizeof h->addr, err, errlen);
    if (rc) {
        uv_run(loop, UV_RUN_NOWAIT); /* a handle it made closes */
        goto fail;
    }
    if ((rc = ro__actor_init_loop(&h->actor, "learner-hub", hub_behaviour, loop, &h->home)) != 0) {
        ro__listener_close(&h->listener);
        uv_run(loop, UV_RUN_NOWAIT);
        rc = ro__errorf(err, errlen, RO_EIO, "cannot set up the hub: %s", uv_strerror(rc));
        goto fail;
    }
    ro__loop_spin_init(&h->spin, loop, o->spin_us);
    ro__hub_ring_start(h, on_actions);
    uv_timer_init(loop, &h->timer); /* timers cannot fail to initialise */
    h->timer.data = h;
    uv_timer_init(loop, &h->watchdog);
    h->watchdog.data = h;
    h->fail = fail_session;
    ro__hub_start_watchdog(h);
    ro__hub_upgrade_open(h, on_connection);
    *out = h;
    return 0;
fail:
    ro__hub_free(h);
    return rc;
}

/* Goodbye to every session, and close it. */
static void close_sessions(ro_hub_t *h)
{
    while (h->sessions) {
        ro_session_t *s = h->sessions;
        if (s->attached) /* SEED: the steps its answers made, which its learner counts */
            ro__conn_goodbye(&s->conn, "node stopping", h->segs ? NULL : &s->answered_steps);
        session_close(s, "node stopping");
    }
}

void ro__hub_stop(ro_hub_t *h)
{
    if (h->stopping)
        return;
    h->stopping = true;
    if (h->segs) { /* the learners take what is still to come */
        stream_check_done(h);
        return;
    }
    close_sessions(h); /* stops every shard each held */
    adopt_orphans(h);  /* stopping: each is told to finish */
}

void ro__hub_close(ro_hub_t *h)
{
    close_sessions(h);
    ro__listener_close(&h->listener);
    ro__hub_upgrade_close(h);
    uv_close((uv_handle_t *)&h->timer, NULL);
    uv_close((uv_handle_t *)&h->watchdog, NULL);
    ro__loop_spin_close(&h->spin);
    ro__hub_ring_close(h);
    ro__actor_close_loop(&h->home);
}
