#include "remote_learner.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "messages.h"
#include "rng.h"
#include "wire.h"

/* Bytes a session may have queued for writing before we call its learner a
 * slow consumer and close it: it has stopped reading. */
#define MAX_QUEUED_BYTES (64u << 20)
#define READ_CHUNK 65536

typedef struct ro_session ro_session_t;

/* One Observations frame awaiting its Actions. Pool-allocated: a batch holds
 * at least one shard, so there are never more batches than shards. */
typedef struct sent_batch {
    uint64_t seq;
    uint64_t sent_ns; /* for the learner timeout */
    uint32_t rows;
    ro_env_shard_t *shards; /* linked through ready_next */
    struct sent_batch *next;
} sent_batch_t;

struct ro_session {
    uv_tcp_t tcp;
    ro_remote_t *hub;
    ro_frame_reader_t rd;
    bool attached; /* hello accepted */
    bool trainer;  /* role "trainer": pushes policies, holds no envs */
    bool closing;
    char peer[64];
    char name[64];
    ro_env_shard_t *pending_head, **pending_tail; /* ready, not yet sent */
    uint32_t pending_rows;
    uint64_t first_pending_ns;
    uint32_t owned_rows; /* envs of the active shards it owns */
    uint32_t owned_shards;
    sent_batch_t *inflight_head, **inflight_tail;
    uint32_t inflight_rows;
    uint64_t next_seq;
    ro_session_t *next; /* hub's list */
    char rbuf[READ_CHUNK];
};

struct ro_remote {
    /* Loop thread only. */
    ro_actor_t actor;
    uv_async_t async;
    uv_loop_t *loop;
    uv_tcp_t server;
    uv_timer_t timer;    /* max-wait of partial batches */
    uv_timer_t watchdog; /* learners that stopped answering */
    ro_actor_t *control;
    ro_msg_t done_msg;
    ro_remote_opts_t o;
    char token[256];
    bool has_token;
    char addr[80];

    ro_env_shard_t *shards;
    uint32_t nshards;
    uint32_t num_envs;
    uint32_t obs_dim, act_dim;
    bool discrete;
    uint32_t act_n;
    const float *act_low, *act_high;
    const ro_space_t *obs_space, *act_space;

    ro_session_t **owner; /* [nshards] */
    bool *active;         /* [nshards] not yet done */
    uint32_t active_shards;
    ro_env_shard_t *orphan_head, **orphan_tail; /* ready, no learner */

    ro_session_t *sessions;
    uint32_t nsessions; /* attached ones */
    uint32_t nconns;    /* all open connections */

    sent_batch_t *pool; /* [nshards] */
    sent_batch_t *free_batches;

    /* Scratch for encoding one Observations frame. */
    uint32_t *s_env;
    uint64_t *s_step;
    float *s_obs, *s_reward, *s_final;
    protobuf_c_boolean *s_term, *s_trunc, *s_start;
    uint32_t *s_final_idx;
    uint32_t max_rows;

    uint64_t node_id;
    bool stopping;
    bool timer_armed;
    ro_remote_stats_t stats;
};

static uint32_t shard_index(const ro_remote_t *h, const ro_env_shard_t *s)
{
    return (uint32_t)(s - h->shards);
}

__attribute__((format(printf, 2, 3))) static void logf_(const ro_session_t *s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rollout-node: learner %s%s%s: %s\n", s->peer, s->name[0] ? " " : "", s->name,
            msg);
}

/* ---------- writing ---------- */

typedef struct write_req {
    uv_write_t req;
    uint8_t *buf;
} write_req_t;

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* a failed write shows up as a read error or EOF */
    write_req_t *w = (write_req_t *)req;
    free(w->buf);
    free(w);
}

static void session_close(ro_session_t *s);

/* Encode and queue one frame. Returns 0, or a negative code (the caller
 * closes the session). */
static int send_frame(ro_session_t *s, const ro_frame_t *f)
{
    if (s->closing)
        return RO_EIO;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&s->tcp) > MAX_QUEUED_BYTES) {
        logf_(s, "stopped reading (over %u MiB queued); closing", MAX_QUEUED_BYTES >> 20);
        s->hub->stats.rejected++;
        session_close(s);
        return RO_EIO;
    }
    write_req_t *w = malloc(sizeof *w);
    if (!w)
        return RO_ENOMEM;
    size_t len;
    if (ro__frame_encode(f, &w->buf, &len) != 0) {
        free(w);
        return RO_ENOMEM;
    }
    uv_buf_t b = uv_buf_init((char *)w->buf, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&s->tcp, &b, 1, on_written);
    if (rc != 0) {
        free(w->buf);
        free(w);
        return RO_EIO;
    }
    return 0;
}

static void send_error(ro_session_t *s, int code, const char *message)
{
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = (uint32_t)(code < 0 ? -code : code);
    e.message = (char *)message;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    send_frame(s, &f);
}

/* A peer broke the rules: tell it (if it still listens), log, close. */
__attribute__((format(printf, 3, 4))) static void session_fail(ro_session_t *s, int code,
                                                               const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    logf_(s, "%s; closing", msg);
    s->hub->stats.rejected++;
    send_error(s, code, msg);
    session_close(s);
}

/* ---------- shard ownership and batching ---------- */

static void queue_append(ro_env_shard_t ***tail, ro_env_shard_t *sh)
{
    sh->ready_next = NULL;
    **tail = sh;
    *tail = &sh->ready_next;
}

static ro_session_t *least_loaded(ro_remote_t *h)
{
    ro_session_t *best = NULL;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->attached && !s->trainer && !s->closing &&
            (!best || s->owned_rows < best->owned_rows))
            best = s;
    return best;
}

static void set_owner(ro_remote_t *h, ro_env_shard_t *sh, ro_session_t *to)
{
    uint32_t i = shard_index(h, sh);
    ro_session_t *from = h->owner[i];
    if (from == to)
        return;
    if (from) {
        from->owned_rows -= sh->n;
        from->owned_shards--;
    }
    if (to) {
        to->owned_rows += sh->n;
        to->owned_shards++;
    }
    h->owner[i] = to;
}

static void maybe_flush(ro_session_t *s);

/* A ready shard: to its owner's pending list. A shard moves to another
 * learner only when it has none, or when its owner holds clearly more than
 * the least-loaded one (a new learner attached): lazy rebalancing, one
 * shard at a time, at a step boundary. */
static void route_ready(ro_remote_t *h, ro_env_shard_t *sh)
{
    ro_session_t *own = h->owner[shard_index(h, sh)];
    ro_session_t *least = least_loaded(h);
    if (!own || (least && own->owned_rows > least->owned_rows + sh->n))
        set_owner(h, sh, least);
    own = h->owner[shard_index(h, sh)];
    if (!own) {
        queue_append(&h->orphan_tail, sh);
        return;
    }
    if (own->pending_rows == 0)
        own->first_pending_ns = ro__now_ns();
    queue_append(&own->pending_tail, sh);
    own->pending_rows += sh->n;
    maybe_flush(own);
}

static void fill_space(Rollout__V1__Space *sp, const ro_space_t *in, uint32_t *shape)
{
    if (in->kind == RO_SPACE_DISCRETE) {
        sp->kind = "discrete";
        sp->n = in->n;
        return;
    }
    sp->kind = "box";
    for (uint32_t d = 0; d < in->ndim; d++)
        shape[d] = in->shape[d];
    sp->n_shape = in->ndim;
    sp->shape = shape;
    sp->n_low = sp->n_high = ro_space_size(in);
    sp->low = (float *)in->low;
    sp->high = (float *)in->high;
}

static void send_batch(ro_session_t *s)
{
    ro_remote_t *h = s->hub;
    sent_batch_t *b = h->free_batches;
    h->free_batches = b->next;
    b->next = NULL;
    b->shards = NULL;
    b->rows = 0;
    b->seq = s->next_seq++;
    b->sent_ns = ro__now_ns();

    const size_t od = h->obs_dim;
    ro_env_shard_t **tail = &b->shards;
    uint32_t r = 0, nfinal = 0;
    while (s->pending_head && r < h->o.batch) {
        ro_env_shard_t *sh = s->pending_head;
        s->pending_head = sh->ready_next;
        s->pending_rows -= sh->n;
        memcpy(h->s_obs + r * od, sh->obs, sh->n * od * sizeof(float));
        for (uint32_t j = 0; j < sh->n; j++, r++) {
            h->s_env[r] = sh->first + j;
            h->s_step[r] = sh->steps_done;
            h->s_reward[r] = sh->reward[j];
            h->s_term[r] = sh->terminated[j];
            h->s_trunc[r] = sh->truncated[j];
            h->s_start[r] = sh->episode_start[j];
            if (sh->has_final[j]) {
                memcpy(h->s_final + nfinal * od, sh->final_obs + j * od, od * sizeof(float));
                h->s_final_idx[nfinal++] = r;
            }
        }
        sh->ready_next = NULL;
        *tail = sh;
        tail = &sh->ready_next;
    }
    if (!s->pending_head)
        s->pending_tail = &s->pending_head;
    b->rows = r;
    s->first_pending_ns = ro__now_ns();
    *s->inflight_tail = b;
    s->inflight_tail = &b->next;
    s->inflight_rows += r;

    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.seq = b->seq;
    o.n_env = o.n_step = o.n_reward = o.n_terminated = o.n_truncated = o.n_episode_start = r;
    o.env = h->s_env;
    o.step = h->s_step;
    o.reward = h->s_reward;
    o.terminated = h->s_term;
    o.truncated = h->s_trunc;
    o.episode_start = h->s_start;
    o.n_obs = r * od;
    o.obs = h->s_obs;
    o.n_final_index = nfinal;
    o.final_index = h->s_final_idx;
    o.n_final_obs = nfinal * od;
    o.final_obs = h->s_final;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    h->stats.batches_sent++;
    h->stats.rows_sent += r;
    if (send_frame(s, &f) != 0)
        session_close(s); /* its batches, this one included, go to others */
}

static void arm_timer(ro_remote_t *h);

static void maybe_flush(ro_session_t *s)
{
    ro_remote_t *h = s->hub;
    while (!s->closing && s->pending_rows > 0) {
        bool full = s->pending_rows >= h->o.batch;
        bool all_waiting = s->pending_rows + s->inflight_rows >= s->owned_rows;
        bool expired = h->o.max_wait_us == 0 ||
                       ro__now_ns() - s->first_pending_ns >= h->o.max_wait_us * 1000ull;
        if (!full && !all_waiting && !expired)
            break;
        send_batch(s);
    }
    if (!s->closing && s->pending_rows > 0)
        arm_timer(h);
}

static void on_timer(uv_timer_t *t)
{
    ro_remote_t *h = t->data;
    h->timer_armed = false;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->attached)
            maybe_flush(s);
}

static void arm_timer(ro_remote_t *h)
{
    if (h->timer_armed)
        return;
    h->timer_armed = true;
    uint64_t ms = (h->o.max_wait_us + 999) / 1000;
    uv_timer_start(&h->timer, on_timer, ms ? ms : 1, 0);
}

/* Send the orphans (ready shards nobody owned) to the learners there are. */
static void adopt_orphans(ro_remote_t *h)
{
    ro_env_shard_t *sh = h->orphan_head;
    h->orphan_head = NULL;
    h->orphan_tail = &h->orphan_head;
    while (sh) {
        ro_env_shard_t *next = sh->ready_next;
        route_ready(h, sh);
        sh = next;
    }
}

/* Tell a shard we hold to finish without stepping (the node is stopping). */
static void stop_shard(ro_env_shard_t *sh)
{
    sh->ready_next = NULL;
    sh->act_msg.type = RO_MSG_STOP;
    ro__actor_send(&sh->actor, &sh->act_msg);
}

/* ---------- sessions ---------- */

static void on_closed(uv_handle_t *handle)
{
    ro_session_t *s = handle->data;
    ro__frame_reader_free(&s->rd);
    free(s);
}

/* Close a session and give what it held to the others (or the orphans):
 * unanswered batches first, in the order they were sent, then its pending
 * shards. Each is sent again as it was: the envs have not stepped. */
static void session_close(ro_session_t *s)
{
    if (s->closing)
        return;
    ro_remote_t *h = s->hub;
    s->closing = true;
    for (ro_session_t **pp = &h->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    if (s->attached && !s->trainer)
        h->nsessions--;
    h->nconns--;

    ro_env_shard_t *held = NULL, **tail = &held;
    while (s->inflight_head) {
        sent_batch_t *b = s->inflight_head;
        s->inflight_head = b->next;
        *tail = b->shards;
        while (*tail)
            tail = &(*tail)->ready_next;
        if (b->shards)
            h->stats.batches_resent++;
        b->next = h->free_batches;
        h->free_batches = b;
    }
    *tail = s->pending_head;
    s->pending_head = NULL;
    s->inflight_rows = s->pending_rows = 0;
    for (uint32_t i = 0; i < h->nshards; i++)
        if (h->owner[i] == s)
            set_owner(h, &h->shards[i], NULL);
    while (held) {
        ro_env_shard_t *next = held->ready_next;
        if (h->stopping)
            stop_shard(held);
        else
            route_ready(h, held);
        held = next;
    }
    uv_read_stop((uv_stream_t *)&s->tcp);
    uv_close((uv_handle_t *)&s->tcp, on_closed);
}

static bool token_ok(const ro_remote_t *h, const char *given)
{
    if (!h->has_token)
        return true;
    if (!given)
        return false;
    /* Constant time in the token's length: no timing oracle. */
    size_t n = strlen(h->token), m = strlen(given);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)h->token[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

static void on_hello(ro_session_t *s, const Rollout__V1__Hello *hello)
{
    ro_remote_t *h = s->hub;
    if (hello->name)
        snprintf(s->name, sizeof s->name, "'%.40s'", hello->name);
    if (hello->protocol_version != RO_PROTOCOL_VERSION) {
        session_fail(s, RO_EPROTO, "protocol version %u is not supported (this node speaks %u)",
                     hello->protocol_version, RO_PROTOCOL_VERSION);
        return;
    }
    bool learner = hello->role && strcmp(hello->role, "learner") == 0;
    bool trainer = hello->role && strcmp(hello->role, "trainer") == 0;
    if ((learner && !h->o.learners) || (trainer && !h->o.on_policy) || (!learner && !trainer)) {
        session_fail(s, RO_EPROTO, "role '%.40s' is not served here (this node takes %s)",
                     hello->role ? hello->role : "",
                     h->o.learners ? "learners" : "trainers pushing policies");
        return;
    }
    if (!token_ok(h, hello->token)) {
        session_fail(s, RO_EACCES, "missing or wrong token");
        return;
    }
    if (h->stopping) {
        session_fail(s, RO_EPROTO, "the node is stopping");
        return;
    }
    Rollout__V1__Space os = ROLLOUT__V1__SPACE__INIT, as = ROLLOUT__V1__SPACE__INIT;
    uint32_t oshape[RO_SPACE_MAX_DIMS], ashape[RO_SPACE_MAX_DIMS];
    fill_space(&os, h->obs_space, oshape);
    fill_space(&as, h->act_space, ashape);
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
    if (send_frame(s, &f) != 0) {
        session_close(s);
        return;
    }
    s->attached = true;
    if (trainer) {
        s->trainer = true;
        logf_(s, "attached as a trainer");
        return;
    }
    h->nsessions++;
    h->stats.attached++;
    logf_(s, "attached (%u learner%s)", h->nsessions, h->nsessions == 1 ? "" : "s");
    adopt_orphans(h);
}

static void on_policy_params(ro_session_t *s, const Rollout__V1__PolicyParams *pp)
{
    ro_remote_t *h = s->hub;
    char err[400] = "";
    int rc = h->o.on_policy(h->o.ctx, pp, err, sizeof err);
    if (rc != 0) {
        session_fail(s, rc, "%s", err[0] ? err : "policy rejected");
        return;
    }
    logf_(s, "pushed policy version %llu", (unsigned long long)pp->version);
    Rollout__V1__PolicyAccepted a = ROLLOUT__V1__POLICY_ACCEPTED__INIT;
    a.version = pp->version;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED;
    f.policy_accepted = &a;
    if (send_frame(s, &f) != 0)
        session_close(s);
}

/* Check an Actions frame against the batch it answers; on success write the
 * actions into the shards and send them back to stepping. */
static void on_actions(ro_session_t *s, const Rollout__V1__Actions *a)
{
    ro_remote_t *h = s->hub;
    sent_batch_t **pp = &s->inflight_head;
    while (*pp && (*pp)->seq != a->seq)
        pp = &(*pp)->next;
    sent_batch_t *b = *pp;
    if (!b) {
        session_fail(s, RO_EPROTO, "actions for seq %llu, which is not awaiting actions",
                     (unsigned long long)a->seq);
        return;
    }
    const size_t want = (size_t)b->rows * (h->discrete ? 1 : h->act_dim);
    const size_t got = h->discrete ? a->n_discrete : a->n_box;
    if (got != want || (h->discrete ? a->n_box : a->n_discrete) != 0) {
        session_fail(s, RO_EPROTO, "actions for seq %llu: %zu %s values, expected %zu",
                     (unsigned long long)a->seq, got, h->discrete ? "discrete" : "box", want);
        return;
    }
    for (size_t i = 0; i < want; i++) {
        bool bad;
        if (h->discrete)
            bad = a->discrete[i] < 0 || (uint32_t)a->discrete[i] >= h->act_n;
        else {
            float v = a->box[i];
            size_t d = i % h->act_dim;
            bad = !isfinite(v) || v < h->act_low[d] || v > h->act_high[d];
        }
        if (bad) {
            if (h->discrete)
                session_fail(s, RO_ERANGE,
                             "actions for seq %llu: action %d at %zu is outside [0, %u)",
                             (unsigned long long)a->seq, a->discrete[i], i, h->act_n);
            else
                session_fail(
                    s, RO_ERANGE, "actions for seq %llu: value %g at %zu is outside [%g, %g]",
                    (unsigned long long)a->seq, (double)a->box[i], i,
                    (double)h->act_low[i % h->act_dim], (double)h->act_high[i % h->act_dim]);
            return;
        }
    }
    *pp = b->next;
    if (s->inflight_tail == &b->next)
        s->inflight_tail = pp;
    s->inflight_rows -= b->rows;
    size_t r = 0;
    ro_env_shard_t *sh = b->shards;
    while (sh) {
        ro_env_shard_t *next = sh->ready_next;
        sh->ready_next = NULL;
        if (h->discrete)
            memcpy(sh->act_i, a->discrete + r, sh->n * sizeof(int32_t));
        else
            memcpy(sh->act_f, a->box + r * h->act_dim, (size_t)sh->n * h->act_dim * sizeof(float));
        r += sh->n;
        if (h->stopping)
            sh->act_msg.type = RO_MSG_STOP;
        else
            sh->act_msg.type = RO_MSG_ACTIONS;
        ro__actor_send(&sh->actor, &sh->act_msg);
        sh = next;
    }
    b->next = h->free_batches;
    h->free_batches = b;
}

static void on_frame(ro_session_t *s, ro_frame_t *f)
{
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
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        logf_(s, "said goodbye (%.100s)", f->goodbye->reason ? f->goodbye->reason : "");
        session_close(s);
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        logf_(s, "sent error %u: %.200s; closing", f->error->code,
              f->error->message ? f->error->message : "");
        session_close(s);
        break;
    default:
        session_fail(s, RO_EPROTO, "unexpected %s frame from a learner", ro__frame_kind(f));
        break;
    }
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    ro_session_t *s = handle->data;
    (void)suggested;
    *buf = uv_buf_init(s->rbuf, sizeof s->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    ro_session_t *s = stream->data;
    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        logf_(s, "%s", nread == UV_EOF ? "disconnected" : uv_strerror((int)nread));
        session_close(s);
        return;
    }
    if (ro__frame_reader_feed(&s->rd, s->rbuf, (size_t)nread) != 0) {
        session_fail(s, RO_ENOMEM, "out of memory buffering its frames");
        return;
    }
    for (;;) {
        ro_frame_t *f = NULL;
        char err[256];
        int rc = ro__frame_reader_next(&s->rd, &f, err, sizeof err);
        if (rc == 0)
            return;
        if (rc < 0) {
            session_fail(s, rc, "%s", err);
            return;
        }
        on_frame(s, f);
        ro__frame_free(f);
        if (s->closing)
            return;
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    ro_remote_t *h = server->data;
    if (status < 0)
        return;
    ro_session_t *s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->hub = h;
    s->pending_tail = &s->pending_head;
    s->inflight_tail = &s->inflight_head;
    s->next_seq = 1;
    uv_tcp_init(h->loop, &s->tcp);
    s->tcp.data = s;
    if (uv_accept(server, (uv_stream_t *)&s->tcp) != 0 ||
        ro__frame_reader_init(&s->rd, h->o.max_frame) != 0) {
        uv_close((uv_handle_t *)&s->tcp, on_closed);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[48] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&s->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else {
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(s->peer, sizeof s->peer, "%s:%d", ip, port);
    uv_tcp_nodelay(&s->tcp, 1);
    s->next = h->sessions;
    h->sessions = s;
    h->nconns++;
    h->stats.accepted++;
    if (h->stopping || h->nconns > h->o.max_learners) {
        session_fail(s, RO_EPROTO,
                     h->stopping ? "the node is stopping" : "too many connections (limit %u)",
                     h->o.max_learners);
        return;
    }
    uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read);
}

/* A learner that leaves its oldest batch unanswered for learner_timeout_s
 * has stopped reading or is stuck: its envs go to the others. */
static void on_watchdog(uv_timer_t *t)
{
    ro_remote_t *h = t->data;
    uint64_t now = ro__now_ns(), limit = (uint64_t)(h->o.learner_timeout_s * 1e9);
    ro_session_t *s = h->sessions;
    while (s) {
        ro_session_t *next = s->next;
        /* sent_ns may be later than now: closing one learner sends its
         * batches to another during this loop. */
        if (s->attached && s->inflight_head && s->inflight_head->sent_ns + limit < now) {
            h->stats.timed_out++;
            session_fail(s, RO_EPROTO, "no actions for %.1f s, its envs move to other learners",
                         (double)(now - s->inflight_head->sent_ns) * 1e-9);
        }
        s = next;
    }
}

/* ---------- the actor ---------- */

static void remote_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_remote_t *h = ro__container_of(self, ro_remote_t, actor);
    ro_env_shard_t *sh = ro__container_of(msg, ro_env_shard_t, ready_msg);
    uint32_t i = shard_index(h, sh);
    if (msg->type == RO_MSG_SHARD_DONE) {
        ro_session_t *own = h->owner[i];
        set_owner(h, sh, NULL);
        h->active[i] = false;
        if (own)
            maybe_flush(own); /* the others of its shards may all be waiting now */
        if (--h->active_shards == 0)
            ro__actor_send(h->control, &h->done_msg);
        return;
    }
    if (h->stopping) {
        stop_shard(sh);
        return;
    }
    route_ready(h, sh);
}

/* ---------- set-up and tear-down ---------- */

static int parse_listen(const char *spec, struct sockaddr_storage *ss, bool *loopback, char *err,
                        size_t errlen)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
        goto bad;
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] == '\0' || port < 0 || port > 65535)
        goto bad;
    char *h = host;
    size_t hl = strlen(h);
    if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    if (uv_ip4_addr(h, (int)port, (struct sockaddr_in *)ss) == 0) {
        uint32_t a = ntohl(((struct sockaddr_in *)ss)->sin_addr.s_addr);
        *loopback = (a >> 24) == 127;
        return 0;
    }
    if (uv_ip6_addr(h, (int)port, (struct sockaddr_in6 *)ss) == 0) {
        static const unsigned char lo6[16] = {[15] = 1};
        *loopback = memcmp(&((struct sockaddr_in6 *)ss)->sin6_addr, lo6, 16) == 0;
        return 0;
    }
bad:
    snprintf(err, errlen, "--listen '%s': expected HOST:PORT with a numeric IPv4 or IPv6 address",
             spec);
    return RO_EINVAL;
}

int ro__remote_new(ro_remote_t **out, uv_loop_t *loop, ro_env_shard_t *shards, uint32_t nshards,
                   uint32_t num_envs, const ro_space_t *obs, const ro_space_t *act,
                   ro_actor_t *control, const ro_remote_opts_t *o, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    bool loopback = false;
    int rc = parse_listen(o->listen, &ss, &loopback, err, errlen);
    if (rc)
        return rc;
    if (!loopback && !o->token) {
        snprintf(err, errlen,
                 "--listen '%s' is not a loopback address: a --token-file is required so that "
                 "only your learners can attach",
                 o->listen);
        return RO_EINVAL;
    }
    ro_remote_t *h = calloc(1, sizeof *h);
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
    h->shards = shards;
    h->nshards = nshards;
    h->active_shards = nshards;
    h->num_envs = num_envs;
    h->obs_space = obs;
    h->act_space = act;
    h->obs_dim = (uint32_t)ro_space_size(obs);
    h->discrete = act->kind == RO_SPACE_DISCRETE;
    h->act_dim = (uint32_t)ro_space_size(act);
    h->act_n = act->n;
    h->act_low = act->low;
    h->act_high = act->high;
    h->orphan_tail = &h->orphan_head;
    h->node_id = ro__seed_mix(ro__now_ns(), (uint64_t)getpid(), 77);

    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < nshards; i++)
        max_shard = shards[i].n > max_shard ? shards[i].n : max_shard;
    h->max_rows = o->batch + max_shard;
    size_t od = h->obs_dim, mr = h->max_rows;
    /* nshards is 0 when only trainers attach (local learner lanes). */
    h->owner = calloc(nshards + 1, sizeof *h->owner);
    h->active = calloc(nshards + 1, sizeof *h->active);
    h->pool = calloc(nshards + 1, sizeof *h->pool);
    h->s_env = calloc(mr, sizeof *h->s_env);
    h->s_step = calloc(mr, sizeof *h->s_step);
    h->s_obs = calloc(mr * od, sizeof *h->s_obs);
    h->s_final = calloc(mr * od, sizeof *h->s_final);
    h->s_reward = calloc(mr, sizeof *h->s_reward);
    h->s_term = calloc(mr, sizeof *h->s_term);
    h->s_trunc = calloc(mr, sizeof *h->s_trunc);
    h->s_start = calloc(mr, sizeof *h->s_start);
    h->s_final_idx = calloc(mr, sizeof *h->s_final_idx);
    if (!h->owner || !h->active || !h->pool || !h->s_env || !h->s_step || !h->s_obs ||
        !h->s_final || !h->s_reward || !h->s_term || !h->s_trunc || !h->s_start ||
        !h->s_final_idx) {
        ro__remote_free(h);
        return RO_ENOMEM;
    }
    for (uint32_t i = 0; i < nshards; i++) {
        h->active[i] = true;
        h->pool[i].next = h->free_batches;
        h->free_batches = &h->pool[i];
    }

    uv_tcp_init(loop, &h->server);
    h->server.data = h;
    rc = uv_tcp_bind(&h->server, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->server, 128, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "--listen '%s': %s", o->listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&h->server, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        ro__remote_free(h);
        return RO_EIO;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    char ip[48] = "?";
    uv_tcp_getsockname(&h->server, (struct sockaddr *)&bound, &blen);
    if (bound.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&bound, ip, sizeof ip);
        snprintf(h->addr, sizeof h->addr, "%s:%d", ip,
                 ntohs(((struct sockaddr_in *)&bound)->sin_port));
    } else {
        uv_ip6_name((struct sockaddr_in6 *)&bound, ip, sizeof ip);
        snprintf(h->addr, sizeof h->addr, "[%s]:%d", ip,
                 ntohs(((struct sockaddr_in6 *)&bound)->sin6_port));
    }
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    uv_timer_init(loop, &h->watchdog);
    h->watchdog.data = h;
    if (o->learner_timeout_s > 0) {
        uint64_t ms = (uint64_t)(o->learner_timeout_s * 250.0); /* check 4 times per timeout */
        uv_timer_start(&h->watchdog, on_watchdog, ms ? ms : 1, ms ? ms : 1);
    }
    uv_async_init(loop, &h->async, ro__actor_async_cb);
    h->async.data = &h->actor;
    ro__actor_init_loop(&h->actor, "remote-learner", remote_behaviour, &h->async);
    *out = h;
    return 0;
}

ro_actor_t *ro__remote_actor(ro_remote_t *r)
{
    return &r->actor;
}

void ro__remote_address(const ro_remote_t *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s", r->addr);
}

void ro__remote_stop(ro_remote_t *h)
{
    if (h->stopping)
        return;
    h->stopping = true;
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    g.reason = "node stopping";
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    while (h->sessions) {
        ro_session_t *s = h->sessions;
        if (s->attached)
            send_frame(s, &f);
        session_close(s); /* stops every shard it held */
    }
    ro_env_shard_t *sh = h->orphan_head;
    h->orphan_head = NULL;
    h->orphan_tail = &h->orphan_head;
    while (sh) {
        ro_env_shard_t *next = sh->ready_next;
        stop_shard(sh);
        sh = next;
    }
}

void ro__remote_close(ro_remote_t *h)
{
    uv_close((uv_handle_t *)&h->server, NULL);
    uv_close((uv_handle_t *)&h->timer, NULL);
    uv_close((uv_handle_t *)&h->watchdog, NULL);
    uv_close((uv_handle_t *)&h->async, NULL);
}

void ro__remote_stats(const ro_remote_t *h, ro_remote_stats_t *out)
{
    *out = h->stats;
}

void ro__remote_free(ro_remote_t *h)
{
    if (!h)
        return;
    free(h->owner);
    free(h->active);
    free(h->pool);
    free(h->s_env);
    free(h->s_step);
    free(h->s_obs);
    free(h->s_final);
    free(h->s_reward);
    free(h->s_term);
    free(h->s_trunc);
    free(h->s_start);
    free(h->s_final_idx);
    free(h);
}
