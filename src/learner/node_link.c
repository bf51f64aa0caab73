/*
 * rollout-learner's connections to nodes: the hello and welcome, checking
 * every frame a node sends, queueing observations for the forward passes,
 * writing frames, closing, reconnecting to a node whose connection was lost,
 * and --push-policy's exchange.
 *
 * A connection's life: attempt (connect, hello) -> welcomed -> closed. A
 * close is final after the node's goodbye, an error the learner found, an
 * error the node sent (except its learner timeout, ETIMEDOUT), the learner
 * stopping, or a failed first connection. Any other close of a welcomed
 * connection (EOF, reset, keepalive or user timeout, the node timing us out)
 * starts reconnect attempts with backoff, for up to --reconnect-s seconds
 * without a connection.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <uv.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "wire/token.h"
#include "learner/learner.h"
#include "policy/params.h"
#include "ro_build_config.h"
#include "wire/tcp_liveness.h"
#include "wire/checks.h"
#include "runtime/thread_guard.h"

/* Reconnects: 100 ms after the loss, doubling to 2 s between attempts; an
 * attempt that has no welcome after 5 s is abandoned. */
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 2000
#define ATTEMPT_TIMEOUT_MS 5000
/* Failed attempts logged: the first, every 10th, and any with a new reason. */
#define LOG_EVERY 10

static void conn_close(node_conn_t *c, const char *why);
static void conn_attempt(node_conn_t *c);

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    free(req->data);
    free(req);
}

int ro__learner_send(node_conn_t *c, const ro_frame_t *f)
{
    if (c->closing)
        return RO_EIO;
    uv_write_t *req = malloc(sizeof *req);
    uint8_t *buf;
    size_t len;
    if (!req || ro__frame_encode(f, &buf, &len) != 0) {
        free(req);
        return RO_ENOMEM;
    }
    req->data = buf;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    if (uv_write(req, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
        free(buf);
        free(req);
        return RO_EIO;
    }
    return 0;
}

__attribute__((format(printf, 2, 3))) static void conn_fail(node_conn_t *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = (uint32_t)EPROTO;
    e.message = msg;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    ro__learner_send(c, &f);
    c->failed = c->final = true;
    c->L->exit_code = 1;
    conn_close(c, msg);
}

static void on_retry(uv_timer_t *t)
{
    node_conn_t *c = t->data;
    c->waiting = false;
    conn_attempt(c);
}

/* Wait before the next attempt: the backoff doubles up to its cap. */
static void schedule_retry(node_conn_t *c)
{
    uint32_t ms = c->backoff_ms;
    c->backoff_ms = ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : ms * 2;
    c->waiting = true;
    uv_timer_start(&c->retry, on_retry, ms, 0);
}

/* A connection or an attempt has closed: try again, give up, or be done
 * with the node. */
static void on_closed(uv_handle_t *h)
{
    node_conn_t *c = h->data;
    learner_t *L = c->L;
    ro__frame_reader_free(&c->rd);
    bool retry = !c->final && !L->stopping && !L->push && c->attached && L->cfg.reconnect_s > 0;
    if (retry && c->welcomed) {
        /* A session was lost: first attempt soon. */
        c->lost_ns = ro__now_ns();
        c->attempts = 0;
        c->backoff_ms = RECONNECT_MIN_MS;
        c->last_fail[0] = '\0';
        fprintf(stderr,
                "rollout-learner: node %s: connection lost (%s); reconnecting for up to %g s\n",
                c->addr, c->why, L->cfg.reconnect_s);
        schedule_retry(c);
        return;
    }
    if (retry) {
        /* An attempt failed. */
        c->attempts++;
        double down = (double)(ro__now_ns() - c->lost_ns) * 1e-9;
        if (down >= L->cfg.reconnect_s) {
            fprintf(stderr,
                    "rollout-learner: node %s: no connection for %.1f s (%u attempts, last: %s); "
                    "giving up on it (--reconnect-s %g)\n",
                    c->addr, down, c->attempts, c->why, L->cfg.reconnect_s);
            c->failed = true;
            L->exit_code = 1;
        } else {
            if (c->attempts == 1 || c->attempts % LOG_EVERY == 0 || strcmp(c->why, c->last_fail)) {
                fprintf(stderr,
                        "rollout-learner: node %s: reconnect attempt %u failed (%s); %.1f s "
                        "without a connection, retrying every %.1f s at most\n",
                        c->addr, c->attempts, c->why, down, RECONNECT_MAX_MS / 1000.0);
                snprintf(c->last_fail, sizeof c->last_fail, "%s", c->why);
            }
            schedule_retry(c);
            return;
        }
    } else if (!L->cfg.quiet || c->failed) {
        fprintf(stderr, "rollout-learner: node %s: %s\n", c->addr, c->why);
    }
    L->open_conns--;
    ro__learner_maybe_finish(L);
}

static void drop_pending_of(learner_t *L, node_conn_t *c)
{
    pending_t **pp = &L->pending_head;
    while (*pp) {
        pending_t *p = *pp;
        if (p->c == c) {
            *pp = p->next;
            L->pending_rows -= (uint32_t)p->frame->observations->n_env;
            ro__frame_free(p->frame);
            free(p);
        } else {
            pp = &p->next;
        }
    }
    L->pending_tail = &L->pending_head;
    while (*L->pending_tail)
        L->pending_tail = &(*L->pending_tail)->next;
}

static void conn_close(node_conn_t *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    snprintf(c->why, sizeof c->why, "%s", why);
    uv_timer_stop(&c->retry);
    /* Unanswered observations stay with the node, which sends them again to
     * the next learner (us again, after a reconnect): dropping them here
     * loses nothing. */
    drop_pending_of(c->L, c);
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

void ro__learner_stop_all(learner_t *L, const char *why)
{
    if (L->stopping)
        return;
    L->stopping = true;
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    g.reason = (char *)why;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        node_conn_t *c = &L->conns[i];
        if (c->waiting) { /* between two attempts: nothing to close */
            uv_timer_stop(&c->retry);
            c->waiting = false;
            L->open_conns--;
            continue;
        }
        if (c->closing)
            continue;
        if (c->welcomed)
            ro__learner_send(c, &f);
        conn_close(c, why);
    }
    ro__learner_maybe_finish(L);
}

/* ---------- the spec and the policy ---------- */

/* A copy of a checked box space's bounds, owned by the learner. */
static int copy_bounds(ro_space_t *sp, float **low, float **high)
{
    if (sp->kind != RO_SPACE_BOX)
        return 0;
    size_t size = ro_space_size(sp);
    *low = malloc(size * sizeof(float));
    *high = malloc(size * sizeof(float));
    if (!*low || !*high)
        return RO_ENOMEM;
    memcpy(*low, sp->low, size * sizeof(float));
    memcpy(*high, sp->high, size * sizeof(float));
    sp->low = *low;
    sp->high = *high;
    return 0;
}

static int adopt_spec(learner_t *L, node_conn_t *c, const Rollout__V1__Welcome *w)
{
    ro_space_t os, as;
    float *olo = NULL, *ohi = NULL, *alo = NULL, *ahi = NULL;
    const Rollout__V1__EnvSpec *spec = w->spec;
    char err[256];
    int rc = ro__check_welcome(w, MAX_NUM_ENVS, &os, &as, err, sizeof err);
    if (rc == 0)
        rc = copy_bounds(&os, &olo, &ohi);
    if (rc == 0)
        rc = copy_bounds(&as, &alo, &ahi);
    if (rc == RO_ENOMEM)
        snprintf(err, sizeof err, "out of memory for the env spaces");
    uint32_t od = rc == 0 ? (uint32_t)ro_space_size(&os) : 0;
    uint32_t ad = rc == 0 ? (uint32_t)ro_space_size(&as) : 0;
    if (rc == 0 && L->have_spec &&
        (od != L->obs_dim || (as.kind == RO_SPACE_DISCRETE) != L->discrete ||
         (L->discrete ? as.n != L->act_n : ad != L->act_dim))) {
        snprintf(err, sizeof err, "its env spaces differ from the first node's");
        rc = RO_EPROTO;
    }
    if (rc == 0 && !L->have_spec) {
        L->have_spec = true;
        L->obs_dim = od;
        L->act_dim = ad;
        L->act_n = as.n;
        L->discrete = as.kind == RO_SPACE_DISCRETE;
        L->obs_space = os;
        L->act_space = as;
        L->obs_low = olo;
        L->obs_high = ohi;
        L->act_low = alo;
        L->act_high = ahi;
        olo = ohi = alo = ahi = NULL;
        char perr[256] = "";
        rc = ro__policy_new(&L->policy, &L->cfg.policy, &L->obs_space, &L->act_space, perr,
                            sizeof perr);
        if (rc) {
            snprintf(L->err, sizeof L->err, "%s", perr);
            L->exit_code = 2;
            ro__learner_stop_all(L, "policy does not fit the env");
            return rc;
        }
    }
    free(olo);
    free(ohi);
    free(alo);
    free(ahi);
    if (rc) {
        conn_fail(c, "%s", err);
        return rc;
    }
    if (c->attached) {
        /* A reconnect: the sampling streams go on (a lane may still hold a
         * job with some of them); a restarted node starts its envs over. */
        if (spec->num_envs != c->num_envs) {
            conn_fail(c, "came back with %u envs, had %u", spec->num_envs, c->num_envs);
            return RO_EPROTO;
        }
        if (w->node_id != c->node_id) {
            memset(c->ep_ret, 0, c->num_envs * sizeof *c->ep_ret);
            memset(c->next_step, 0, c->num_envs * sizeof *c->next_step);
        }
    } else {
        c->num_envs = spec->num_envs;
        c->rngs = calloc(c->num_envs, sizeof *c->rngs);
        c->ep_ret = calloc(c->num_envs, sizeof *c->ep_ret);
        c->next_step = calloc(c->num_envs, sizeof *c->next_step);
        if (!c->rngs || !c->ep_ret || !c->next_step) {
            conn_fail(c, "out of memory for %u envs", c->num_envs);
            return RO_ENOMEM;
        }
        for (uint32_t e = 0; e < c->num_envs; e++)
            ro__rng_init(&c->rngs[e], ro__seed_mix(L->cfg.policy.seed ^ ((uint64_t)c->index << 32),
                                                   e, RO_STREAM_ACTION));
    }
    c->welcomed = true;
    L->threads = ro__thread_count();
    if (c->attached) {
        uv_timer_stop(&c->retry); /* the attempt's deadline */
        c->reconnects++;
        fprintf(stderr,
                "rollout-learner: node %s: reconnected after %.1f s without a connection "
                "(attempt %u)%s\n",
                c->addr, (double)(ro__now_ns() - c->lost_ns) * 1e-9, c->attempts + 1,
                w->node_id != c->node_id ? ", a new node id: the node restarted" : "");
        c->lost_ns = 0;
    } else if (!L->cfg.quiet) {
        fprintf(stderr, "rollout-learner: node %s: %s x%u, node id %016llx\n", c->addr,
                spec->env ? spec->env : "?", c->num_envs, (unsigned long long)w->node_id);
    }
    c->node_id = w->node_id;
    c->attached = true;
    return 0;
}

/* ---------- batching ---------- */

/* Checks an Observations frame from a node before anything reads it. */
static bool obs_valid(node_conn_t *c, const Rollout__V1__Observations *o)
{
    char err[256];
    if (ro__check_observations(o, c->L->obs_dim, c->num_envs, err, sizeof err) != 0) {
        conn_fail(c, "%s", err);
        return false;
    }
    return true;
}

/* Steps and episode returns. A batch sent again after a reconnect repeats
 * (env, step) pairs already counted: those are skipped, so every env step
 * is counted once however often it was served. */
static void account(node_conn_t *c, const Rollout__V1__Observations *o)
{
    for (size_t i = 0; i < o->n_env; i++) {
        uint32_t e = o->env[i];
        if (o->step[i] < c->next_step[e])
            continue;
        c->next_step[e] = o->step[i] + 1;
        c->steps++;
        c->L->steps++;
        c->ep_ret[e] += o->reward[i];
        if (o->terminated[i] || o->truncated[i]) {
            c->episodes++;
            c->return_sum += c->ep_ret[e];
            c->ep_ret[e] = 0.0;
        }
    }
}

/* ---------- frames from nodes ---------- */

/* --push-policy: welcome -> send the weights -> accepted -> goodbye. */
static void on_push_frame(node_conn_t *c, ro_frame_t *f)
{
    learner_t *L = c->L;
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_WELCOME && !c->welcomed) {
        c->welcomed = true;
        ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
        out.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS;
        out.policy_params = L->push;
        if (ro__learner_send(c, &out) != 0)
            conn_fail(c, "could not send the policy");
    } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED && c->welcomed) {
        L->pushed++;
        Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
        g.reason = "policy pushed";
        ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
        out.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
        out.goodbye = &g;
        ro__learner_send(c, &out);
        char msg[96];
        snprintf(msg, sizeof msg, "accepted policy version %llu",
                 (unsigned long long)f->policy_accepted->version);
        conn_close(c, msg);
    } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR) {
        c->failed = c->final = true;
        L->exit_code = 1;
        conn_close(c, f->error->message ? f->error->message : "error");
    } else {
        conn_fail(c, "unexpected %s frame while pushing a policy", ro__frame_kind(f));
    }
}

static void on_frame(node_conn_t *c, ro_frame_t *f, bool *keep)
{
    learner_t *L = c->L;
    *keep = false;
    if (L->push) {
        on_push_frame(c, f);
        return;
    }
    if (!c->welcomed) {
        if (f->body_case == ROLLOUT__V1__FRAME__BODY_WELCOME && f->welcome) {
            adopt_spec(L, c, f->welcome);
        } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR && f->error && c->attached &&
                   f->error->code == ESHUTDOWN) {
            /* A reconnect to a node that is stopping: it is done, as after
             * a goodbye. */
            c->final = true;
            conn_close(c, "the node is stopping");
        } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR && f->error && c->attached) {
            /* A reconnect refused ("too many connections"): the attempt
             * failed, the next may not. */
            char msg[256];
            snprintf(msg, sizeof msg, "refused: %s", f->error->message ? f->error->message : "");
            conn_close(c, msg);
        } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR && f->error) {
            snprintf(L->err, sizeof L->err, "node %s refused us: %s", c->addr,
                     f->error->message ? f->error->message : "");
            c->failed = c->final = true;
            L->exit_code = 1;
            conn_close(c, L->err);
        } else {
            conn_fail(c, "expected welcome, got %s", ro__frame_kind(f));
        }
        return;
    }
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_OBSERVATIONS:
        if (L->stopping || !obs_valid(c, f->observations))
            return;
        account(c, f->observations);
        pending_t *p = malloc(sizeof *p);
        if (!p) {
            conn_fail(c, "out of memory");
            return;
        }
        p->frame = f;
        p->c = c;
        p->gen = c->gen;
        p->next = NULL;
        if (!L->pending_head)
            L->first_pending_ns = ro__now_ns();
        *L->pending_tail = p;
        L->pending_tail = &p->next;
        L->pending_rows += (uint32_t)f->observations->n_env;
        *keep = true;
        break;
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        c->final = true;
        conn_close(c, "node said goodbye");
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        /* The node timed us out (we were slow, or the link was cut): come
         * back. Any other error is final. */
        if (f->error->code != ETIMEDOUT || L->cfg.reconnect_s <= 0) {
            c->failed = c->final = true;
            L->exit_code = 1;
        }
        conn_close(c, f->error->message ? f->error->message : "error");
        break;
    default:
        conn_fail(c, "unexpected %s frame from a node", ro__frame_kind(f));
        break;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    node_conn_t *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    node_conn_t *c = s->data;
    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        conn_close(c, nread == UV_EOF ? "disconnected" : uv_strerror((int)nread));
        return;
    }
    if (ro__frame_reader_feed(&c->rd, c->rbuf, (size_t)nread) != 0) {
        conn_fail(c, "out of memory");
        return;
    }
    while (!c->closing) {
        ro_frame_t *f;
        char err[256];
        int rc = ro__frame_reader_next(&c->rd, &f, err, sizeof err);
        if (rc == 0)
            return;
        if (rc < 0) {
            conn_fail(c, "%s", err);
            return;
        }
        bool keep;
        on_frame(c, f, &keep);
        if (!keep)
            ro__frame_free(f);
    }
}

/* Keepalive and a user timeout, so that a cut link is noticed
 * (tcp_liveness.h). */
static void set_timeouts(node_conn_t *c)
{
    if (ro__tcp_liveness(&c->tcp) != 0)
        fprintf(stderr,
                "rollout-learner: node %s: warning: could not set TCP keepalive and user "
                "timeout; a cut link may go unnoticed for minutes\n",
                c->addr);
}

static void connect_failed(node_conn_t *c, int status)
{
    char msg[200];
    snprintf(msg, sizeof msg, "cannot connect: %s", uv_strerror(status));
    if (!c->attached) { /* the first connection: the address may be wrong */
        c->failed = c->final = true;
        c->L->exit_code = 1;
    }
    conn_close(c, msg);
}

static void on_connect(uv_connect_t *req, int status)
{
    node_conn_t *c = req->data;
    learner_t *L = c->L;
    if (status == UV_ECANCELED || c->closing)
        return; /* closed while connecting: on_closed decides */
    if (status < 0) {
        connect_failed(c, status);
        return;
    }
    c->connected = true;
    uv_tcp_nodelay(&c->tcp, 1);
    set_timeouts(c);
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    h.protocol_version = RO_PROTOCOL_VERSION;
    h.role = L->push ? "trainer" : "learner";
    h.token = L->token;
    h.name = (char *)L->cfg.name;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    ro__learner_send(c, &f);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_attempt_timeout(uv_timer_t *t)
{
    node_conn_t *c = t->data;
    if (!c->welcomed && !c->closing)
        conn_close(c, c->connected ? "no welcome within 5 s" : "connect timed out after 5 s");
}

/* One connection attempt: a fresh handle and reader, a new generation. A
 * reconnect attempt has ATTEMPT_TIMEOUT_MS to be welcomed; the first one
 * waits as long as the kernel does. */
static void conn_attempt(node_conn_t *c)
{
    learner_t *L = c->L;
    c->gen++;
    c->connected = c->welcomed = c->closing = false;
    uv_tcp_init(&L->loop, &c->tcp);
    c->tcp.data = c;
    c->creq.data = c;
    if (ro__frame_reader_init(&c->rd, L->cfg.max_frame) != 0) {
        c->failed = c->final = true;
        L->exit_code = 1;
        conn_close(c, "out of memory");
        return;
    }
    if (c->attached)
        uv_timer_start(&c->retry, on_attempt_timeout, ATTEMPT_TIMEOUT_MS, 0);
    int rc = uv_tcp_connect(&c->creq, &c->tcp, (struct sockaddr *)&c->sa, on_connect);
    if (rc != 0) /* e.g. no route to the host: no callback comes */
        connect_failed(c, rc);
}

void ro__learner_conn_start(node_conn_t *c)
{
    uv_timer_init(&c->L->loop, &c->retry);
    c->retry.data = c;
    c->L->open_conns++;
    conn_attempt(c);
}

int ro__learner_parse_addr(const char *spec, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
        return RO_EINVAL;
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || colon[1] == '\0' || port < 1 || port > 65535)
        return RO_EINVAL;
    char *h = host;
    size_t hl = strlen(h);
    if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    if (uv_ip4_addr(h, (int)port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(h, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return RO_EINVAL;
}
