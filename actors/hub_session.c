/*
 * One learner (or trainer) connection of the remote-learner hub: reading
 * and checking frames, the hello, actions and pushed policies, writing
 * frames, and closing (which hands the session's envs to the others).
 */
#include "actors/learner_hub_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "actors/messages.h"
#include "runtime/rng.h"
#include "wire/tcp_liveness.h"
#include "wire/frame.h"
#include "wire/checks.h"

__attribute__((format(printf, 2, 3))) void ro__session_log(const ro_session_t *s, const char *fmt,
                                                           ...)
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

/* Encode and queue one frame. Returns 0, or a negative code (the caller
 * closes the session). */
int ro__session_send(ro_session_t *s, const ro_frame_t *f)
{
    if (s->closing)
        return RO_EIO;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&s->tcp) > MAX_QUEUED_BYTES) {
        ro__session_log(s, "stopped reading (over %u MiB queued); closing", MAX_QUEUED_BYTES >> 20);
        s->hub->stats.rejected++;
        ro__session_close(s);
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

static void ro__session_error(ro_session_t *s, int code, const char *message)
{
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = (uint32_t)(code < 0 ? -code : code);
    e.message = (char *)message;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    ro__session_send(s, &f);
}

/* A peer broke the rules: tell it (if it still listens), log, close. */
__attribute__((format(printf, 3, 4))) void ro__session_fail(ro_session_t *s, int code,
                                                            const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ro__session_log(s, "%s; closing", msg);
    s->hub->stats.rejected++;
    ro__session_error(s, code, msg);
    ro__session_close(s);
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
void ro__session_close(ro_session_t *s)
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
        if (b->shards && !h->stopping) /* a stopping node sends nothing again */
            h->stats.batches_resent++;
        b->next = h->free_batches;
        h->free_batches = b;
    }
    *tail = s->pending_head;
    s->pending_head = NULL;
    s->inflight_rows = s->pending_rows = 0;
    for (uint32_t i = 0; i < h->nshards; i++)
        if (h->owner[i] == s)
            ro__hub_set_owner(h, &h->shards[i], NULL);
    while (held) {
        ro_env_shard_t *next = held->ready_next;
        if (h->stopping)
            ro__hub_stop_shard(held);
        else
            ro__hub_route(h, held);
        held = next;
    }
    uv_read_stop((uv_stream_t *)&s->tcp);
    uv_close((uv_handle_t *)&s->tcp, on_closed);
}

static void on_hello(ro_session_t *s, const Rollout__V1__Hello *hello)
{
    ro_remote_t *h = s->hub;
    if (hello->name)
        snprintf(s->name, sizeof s->name, "'%.40s'", hello->name);
    ro_hello_rules_t rules = {
        .learners = h->o.learners,
        .trainers = h->o.on_policy != NULL,
        .token = h->has_token ? h->token : NULL,
    };
    bool trainer;
    char err[256];
    int rc = ro__check_hello(hello, &rules, &trainer, err, sizeof err);
    if (rc) {
        ro__session_fail(s, rc, "%s", err);
        return;
    }
    if (h->stopping) {
        ro__session_fail(s, RO_ESHUTDOWN, "the node is stopping");
        return;
    }
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
    if (ro__session_send(s, &f) != 0) {
        ro__session_close(s);
        return;
    }
    s->attached = true;
    if (trainer) {
        s->trainer = true;
        ro__session_log(s, "attached as a trainer");
        return;
    }
    h->nsessions++;
    h->stats.attached++;
    ro__session_log(s, "attached (%u learner%s)", h->nsessions, h->nsessions == 1 ? "" : "s");
    ro__hub_adopt_orphans(h);
}

static void on_policy_params(ro_session_t *s, const Rollout__V1__PolicyParams *pp)
{
    ro_remote_t *h = s->hub;
    char err[400] = "";
    int rc = h->o.on_policy(h->o.ctx, pp, err, sizeof err);
    if (rc != 0) {
        ro__session_fail(s, rc, "%s", err[0] ? err : "policy rejected");
        return;
    }
    ro__session_log(s, "pushed policy version %llu", (unsigned long long)pp->version);
    Rollout__V1__PolicyAccepted a = ROLLOUT__V1__POLICY_ACCEPTED__INIT;
    a.version = pp->version;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED;
    f.policy_accepted = &a;
    if (ro__session_send(s, &f) != 0)
        ro__session_close(s);
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
        ro__session_fail(s, RO_EPROTO, "actions for seq %llu, which is not awaiting actions",
                         (unsigned long long)a->seq);
        return;
    }
    char err[256];
    int rc = ro__check_actions(a, b->rows, h->act_space, err, sizeof err);
    if (rc) {
        ro__session_fail(s, rc, "%s", err);
        return;
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
            ro__session_fail(s, RO_EPROTO, "expected hello first, got %s", ro__frame_kind(f));
        return;
    }
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_ACTIONS:
        if (s->trainer)
            ro__session_fail(s, RO_EPROTO, "a trainer cannot send actions");
        else
            on_actions(s, f->actions);
        break;
    case ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS:
        if (!s->trainer)
            ro__session_fail(s, RO_EPROTO, "only a trainer may push a policy");
        else
            on_policy_params(s, f->policy_params);
        break;
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        ro__session_log(s, "said goodbye (%.100s)", f->goodbye->reason ? f->goodbye->reason : "");
        ro__session_close(s);
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        ro__session_log(s, "sent error %u: %.200s; closing", f->error->code,
                        f->error->message ? f->error->message : "");
        ro__session_close(s);
        break;
    default:
        ro__session_fail(s, RO_EPROTO, "unexpected %s frame from a learner", ro__frame_kind(f));
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
        ro__session_log(s, "%s", nread == UV_EOF ? "disconnected" : uv_strerror((int)nread));
        ro__session_close(s);
        return;
    }
    if (ro__frame_reader_feed(&s->rd, s->rbuf, (size_t)nread) != 0) {
        ro__session_fail(s, RO_ENOMEM, "out of memory buffering its frames");
        return;
    }
    for (;;) {
        ro_frame_t *f = NULL;
        char err[256];
        int rc = ro__frame_reader_next(&s->rd, &f, err, sizeof err);
        if (rc == 0)
            return;
        if (rc < 0) {
            ro__session_fail(s, rc, "%s", err);
            return;
        }
        on_frame(s, f);
        ro__frame_free(f);
        if (s->closing)
            return;
    }
}

void ro__session_accept(uv_stream_t *server, int status)
{
    ro_remote_t *h = server->data;
    if (status < 0)
        return;
    ro_session_t *s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->hub = h;
    s->accepted_ns = ro__now_ns();
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
    /* A learner behind a cut link is closed in seconds (and its envs move),
     * even one that holds no envs and so is never timed out. */
    if (ro__tcp_liveness(&s->tcp) != 0)
        ro__session_log(s, "warning: could not set TCP keepalive; a cut link may go unnoticed");
    s->next = h->sessions;
    h->sessions = s;
    h->nconns++;
    h->stats.accepted++;
    if (h->stopping || h->nconns > h->o.max_learners) {
        ro__session_fail(s, h->stopping ? RO_ESHUTDOWN : RO_EPROTO,
                         h->stopping ? "the node is stopping" : "too many connections (limit %u)",
                         h->o.max_learners);
        return;
    }
    uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read);
}
