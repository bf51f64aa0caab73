#include "actors/learner_hub.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/messages.h"
#include "actors/obs_codec.h"
#include "actors/session_flow.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "wire/checks.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/gate.h"
#include "wire/listener.h"

/* Bytes a session may have queued for writing before we call its learner a
 * slow consumer and close it: it has stopped reading. */
#define MAX_QUEUED_BYTES (64u << 20)

typedef struct ro_session {
    ro_conn_t conn;
    ro_hub_t *hub;
    ro_flow_t flow;
    bool attached; /* hello accepted */
    bool trainer;  /* role "trainer": pushes policies, holds no envs */
    bool listed;   /* in the hub's list (until it starts closing) */
    uint64_t accepted_ns;
    struct ro_session *next;
} ro_session_t;

struct ro_hub {
    /* Loop thread only. */
    ro_actor_t actor;
    uv_async_t async;
    uv_loop_t *loop;
    ro_listener_t listener;
    uv_timer_t timer;    /* max-wait of partial batches */
    uv_timer_t watchdog; /* learners that stopped answering */
    ro_actor_t *control;
    ro_msg_t done_msg;
    ro_hub_opts_t o;
    char token[256];
    bool has_token;
    char addr[80];

    ro_step_batch_t *const *batches; /* [nshards], batches[i]->index == i */
    uint32_t nshards;
    uint32_t num_envs;
    const ro_space_t *obs_space, *act_space;

    ro_session_t **owner; /* [nshards] */
    bool *active;         /* [nshards] not yet done */
    uint32_t active_shards;
    ro_batch_item_t *orphan_head, **orphan_tail; /* ready, no learner */

    ro_session_t *sessions;
    uint32_t nsessions;       /* attached learners */
    uint32_t nattached;       /* attached learners and trainers: at most max_learners */
    ro_gate_t gate;           /* connections that have not said hello (wire/gate.h) */
    ro_frame_budget_t budget; /* frames being received: 2 x max_frame, all connections */

    ro_sent_batch_t *pool; /* [nshards]: no more frames than shards are ever in flight */
    ro_sent_batch_t *free_batches;
    ro_obs_encoder_t enc;
    ro_pb_alloc_t alloc; /* decodes every session's frames (each is freed at once) */

    uint64_t node_id;
    bool stopping;
    bool timer_armed;
    ro_hub_stats_t stats;
};

static void session_close(ro_session_t *s, const char *why);

/* ---------- who holds which env ---------- */

static ro_session_t *least_loaded(ro_hub_t *h)
{
    ro_session_t *best = NULL;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->attached && !s->trainer && (!best || s->flow.owned_rows < best->flow.owned_rows))
            best = s;
    return best;
}

static void set_owner(ro_hub_t *h, ro_step_batch_t *b, ro_session_t *to)
{
    ro_session_t *from = h->owner[b->index];
    if (from == to)
        return;
    if (from)
        from->flow.owned_rows -= b->n;
    if (to)
        to->flow.owned_rows += b->n;
    h->owner[b->index] = to;
}

static void maybe_send(ro_session_t *s);

/* A ready shard: to its owner's pending batch. A shard moves to another
 * learner only when it has none, or when its owner holds clearly more than
 * the least-loaded one (a new learner attached): lazy rebalancing, one
 * shard at a time, at a step boundary. */
static void route(ro_hub_t *h, ro_step_batch_t *b)
{
    ro_session_t *own = h->owner[b->index];
    ro_session_t *least = least_loaded(h);
    if (!own || (least && own->flow.owned_rows > least->flow.owned_rows + b->n))
        set_owner(h, b, least);
    own = h->owner[b->index];
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

static void adopt_orphans(ro_hub_t *h)
{
    ro_batch_item_t *it = h->orphan_head;
    h->orphan_head = NULL;
    h->orphan_tail = &h->orphan_head;
    route_all(h, it);
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
                         MAX_QUEUED_BYTES >> 20);
            h->stats.rejected++;
        }
        if (rc != 0)
            session_close(s, "could not send"); /* its batches, this one included, go to others */
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
            set_owner(h, h->batches[i], NULL);
    route_all(h, held);
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

static int send_welcome(ro_session_t *s)
{
    ro_hub_t *h = s->hub;
    Rollout__V1__Space os = ROLLOUT__V1__SPACE__INIT, as = ROLLOUT__V1__SPACE__INIT;
    uint32_t oshape[RO_SPACE_MAX_DIMS], ashape[RO_SPACE_MAX_DIMS];
    ro__wire_space(&os, h->obs_space, oshape);
    ro__wire_space(&as, h->act_space, ashape);
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.env = (char *)h->o.env_name;
    spec.observation = &os;
    spec.action = &as;
    spec.num_envs = h->num_envs;
    spec.max_episode_steps = h->o.max_episode_steps;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.node_id = h->node_id;
    w.spec = &spec;
    w.seed = h->o.seed;
    w.max_frame = (uint32_t)h->o.max_frame;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_WELCOME;
    f.welcome = &w;
    return ro__conn_send(&s->conn, &f);
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
    ro__gate_pass(&h->gate, &s->conn, h->o.max_frame);
    if (send_welcome(s) != 0) {
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
    ro__conn_log(&s->conn, "attached (%u learner%s)", h->nsessions, h->nsessions == 1 ? "" : "s");
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
    Rollout__V1__PolicyAccepted a = ROLLOUT__V1__POLICY_ACCEPTED__INIT;
    a.version = pp->version;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED;
    f.policy_accepted = &a;
    if (ro__conn_send(&s->conn, &f) != 0)
        session_close(s, "could not answer");
}

/* Actions answer a batch: its shards step again (or finish, if we stop). */
static void on_actions(ro_session_t *s, const Rollout__V1__Actions *a)
{
    ro_hub_t *h = s->hub;
    char err[256];
    ro_batch_item_t *it =
        ro__flow_answer(&s->flow, &h->free_batches, a, h->act_space, err, sizeof err);
    if (!it) {
        session_fail(s, RO_EPROTO, "%s", err);
        return;
    }
    while (it) {
        ro_batch_item_t *next = it->next;
        ro__step_batch_reply(ro__step_batch_of_item(it),
                             h->stopping ? RO_MSG_STOP : RO_MSG_ACTIONS);
        it = next;
    }
}

static void on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    ro_session_t *s = c->owner;
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
            on_actions(s, f->actions);
        break;
    case ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS:
        if (!s->trainer)
            session_fail(s, RO_EPROTO, "only a trainer may push a policy");
        else
            on_policy_params(s, f->policy_params);
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
    ro_session_t *s = c->owner;
    if (s->listed) {
        if (c->broken) /* conn.c logged it */
            s->hub->stats.rejected++;
        else
            ro__conn_log(c, "%s", c->why[0] ? c->why : "disconnected");
        session_close(s, c->why);
    }
    free(s);
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
    s->accepted_ns = ro__now_ns();
    ro__flow_init(&s->flow, h->o.batch, h->o.max_wait_us * 1000ull);
    ro_conn_opts_t co = {
        .ops = &session_ops,
        .owner = s,
        .program = "rollout-node",
        .max_frame = h->o.max_frame,
        .max_queued = MAX_QUEUED_BYTES,
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
        session_fail(drop->owner, RO_ETIMEDOUT,
                     "dropped: %u connections wait for their hello, this one the longest",
                     h->gate.slots);
}

/* A learner that leaves its oldest batch unanswered for learner_timeout_s
 * has stopped reading or is stuck: its envs go to the others. Strangers
 * leave the gate after hello_timeout_s. */
static void on_watchdog(uv_timer_t *t)
{
    ro_hub_t *h = t->data;
    uint64_t now = ro__now_ns(), limit = (uint64_t)(h->o.learner_timeout_s * 1e9);
    for (ro_conn_t *c; (c = ro__gate_expired(&h->gate, now));) {
        h->stats.timed_out++;
        session_fail(c->owner, RO_EPROTO, "no hello within %.1f s", h->o.hello_timeout_s);
    }
    ro_session_t *s = h->sessions;
    while (s) {
        ro_session_t *next = s->next;
        uint64_t sent = ro__flow_oldest_sent_ns(&s->flow);
        if (limit && s->attached && sent && sent + limit < now) {
            /* sent may be later than now: closing one learner sends its
             * batches to another during this loop. ETIMEDOUT, not EPROTO: a
             * learner may come back (rollout-learner reconnects after this
             * one, not after a protocol error). */
            h->stats.timed_out++;
            session_fail(s, RO_ETIMEDOUT, "no actions for %.1f s, its envs move to other learners",
                         (double)(now - sent) * 1e-9);
        }
        s = next;
    }
}

/* ---------- the actor ---------- */

static void hub_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_hub_t *h = ro__container_of(self, ro_hub_t, actor);
    ro_step_batch_t *b = ro__step_batch_of(msg);
    if (msg->type == RO_MSG_SHARD_DONE) {
        ro_session_t *own = h->owner[b->index];
        set_owner(h, b, NULL);
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

/* The watchdog looks 4 times per timeout (the shorter one). */
static void start_watchdog(ro_hub_t *h)
{
    double period_s = 0;
    if (h->o.learner_timeout_s > 0)
        period_s = h->o.learner_timeout_s / 4;
    if (h->o.hello_timeout_s > 0 && (period_s == 0 || h->o.hello_timeout_s / 4 < period_s))
        period_s = h->o.hello_timeout_s / 4;
    if (period_s > 0) {
        uint64_t ms = (uint64_t)(period_s * 1000.0);
        uv_timer_start(&h->watchdog, on_watchdog, ms ? ms : 1, ms ? ms : 1);
    }
}

int ro__hub_new(ro_hub_t **out, uv_loop_t *loop, ro_step_batch_t *const *batches, uint32_t nshards,
                uint32_t num_envs, const ro_space_t *obs, const ro_space_t *act,
                ro_actor_t *control, const ro_hub_opts_t *o, char *err, size_t errlen)
{
    ro_hub_t *h = calloc(1, sizeof *h);
    if (!h)
        return RO_ENOMEM;
    h->o = *o;
    if (o->token) {
        snprintf(h->token, sizeof h->token, "%s", o->token);
        h->has_token = true;
    }
    h->loop = loop;
    h->control = control;
    h->done_msg.type = RO_MSG_LANE_DONE;
    h->batches = batches;
    h->nshards = nshards;
    h->active_shards = nshards;
    h->num_envs = num_envs;
    h->obs_space = obs;
    h->act_space = act;
    h->orphan_tail = &h->orphan_head;
    h->node_id = ro__seed_mix(ro__now_ns(), (uint64_t)getpid(), 77);
    /* Decoded frames are freed as soon as they are handled: a few frames'
     * worth of decoded memory at once is plenty. */
    ro__pb_alloc_init(&h->alloc, 4 * o->max_frame + (1u << 20));
    ro__gate_init(&h->gate, o->max_learners, o->hello_timeout_s);
    h->budget.limit = 2 * o->max_frame;

    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < nshards; i++)
        max_shard = batches[i]->n > max_shard ? batches[i]->n : max_shard;
    /* nshards is 0 when only trainers attach (local learner lanes). */
    h->owner = calloc(nshards + 1, sizeof *h->owner);
    h->active = calloc(nshards + 1, sizeof *h->active);
    h->pool = calloc(nshards + 1, sizeof *h->pool);
    int rc = RO_ENOMEM;
    if (!h->owner || !h->active || !h->pool ||
        ro__obs_encoder_init(&h->enc, o->batch + max_shard, (uint32_t)ro_space_size(obs)) != 0)
        goto fail;
    for (uint32_t i = 0; i < nshards; i++) {
        h->active[i] = true;
        h->pool[i].next = h->free_batches;
        h->free_batches = &h->pool[i];
    }
    rc = ro__listener_open(&h->listener, loop, o->listen, "--listen", o->token != NULL,
                           "rollout-node", on_connection, h, h->addr, sizeof h->addr, err, errlen);
    if (rc) {
        uv_run(loop, UV_RUN_NOWAIT); /* a handle it made closes */
        goto fail;
    }
    if ((rc = uv_async_init(loop, &h->async, ro__actor_async_cb)) != 0) {
        ro__listener_close(&h->listener);
        uv_run(loop, UV_RUN_NOWAIT);
        rc = ro__errorf(err, errlen, RO_EIO, "cannot set up the hub: %s", uv_strerror(rc));
        goto fail;
    }
    h->async.data = &h->actor;
    uv_timer_init(loop, &h->timer); /* timers cannot fail to initialise */
    h->timer.data = h;
    uv_timer_init(loop, &h->watchdog);
    h->watchdog.data = h;
    start_watchdog(h);
    ro__actor_init_loop(&h->actor, "learner-hub", hub_behaviour, &h->async);
    *out = h;
    return 0;
fail:
    ro__hub_free(h);
    return rc;
}

ro_actor_t *ro__hub_actor(ro_hub_t *h)
{
    return &h->actor;
}

void ro__hub_address(const ro_hub_t *h, char *buf, size_t len)
{
    snprintf(buf, len, "%s", h->addr);
}

void ro__hub_stop(ro_hub_t *h)
{
    if (h->stopping)
        return;
    h->stopping = true;
    while (h->sessions) {
        ro_session_t *s = h->sessions;
        if (s->attached)
            ro__conn_goodbye(&s->conn, "node stopping");
        session_close(s, "node stopping"); /* stops every shard it held */
    }
    adopt_orphans(h); /* stopping: each is told to finish */
}

void ro__hub_close(ro_hub_t *h)
{
    ro__listener_close(&h->listener);
    uv_close((uv_handle_t *)&h->timer, NULL);
    uv_close((uv_handle_t *)&h->watchdog, NULL);
    uv_close((uv_handle_t *)&h->async, NULL);
}

void ro__hub_stats(const ro_hub_t *h, ro_hub_stats_t *out)
{
    *out = h->stats;
    uint64_t now = ro__now_ns();
    /* At most --max-learners sessions and nshards orphans: cheap enough
     * for the logger's once-a-second sample. */
    for (const ro_session_t *s = h->sessions; s; s = s->next) {
        if (s->attached && !s->trainer)
            out->learners++;
        out->envs_in_flight += s->flow.inflight_rows;
        out->envs_unsent += s->flow.pending.rows;
        uint64_t sent = ro__flow_oldest_sent_ns(&s->flow);
        if (sent && now - sent > out->oldest_wait_ns)
            out->oldest_wait_ns = now - sent;
        out->queued_bytes += ro__conn_queued(&s->conn);
    }
    for (const ro_batch_item_t *it = h->orphan_head; it; it = it->next)
        out->envs_unsent += it->rows;
}

void ro__hub_free(ro_hub_t *h)
{
    if (!h)
        return;
    free(h->owner);
    free(h->active);
    free(h->pool);
    ro__obs_encoder_free(&h->enc);
    free(h);
}
