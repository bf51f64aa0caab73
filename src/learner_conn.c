/*
 * rollout-learner's connections to nodes: the hello and welcome, checking
 * every frame a node sends, queueing observations for the forward passes,
 * writing frames, closing, and --push-policy's exchange.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "clock.h"
#include "error.h"
#include "flags.h"
#include "learner_internal.h"
#include "policy_params.h"
#include "ro_build_config.h"
#include "thread_guard.h"

static void conn_close(node_conn_t *c, const char *why);

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
    c->failed = true;
    c->L->exit_code = 1;
    conn_close(c, msg);
}

static void on_closed(uv_handle_t *h)
{
    node_conn_t *c = h->data;
    learner_t *L = c->L;
    ro__frame_reader_free(&c->rd);
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
    if (!c->L->cfg.quiet || c->failed)
        fprintf(stderr, "rollout-learner: node %s: %s\n", c->addr, why);
    /* Unanswered observations stay with the node, which sends them again to
     * the next learner: dropping them here loses nothing. */
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
        if (c->closing)
            continue;
        if (c->welcomed)
            ro__learner_send(c, &f);
        conn_close(c, why);
    }
}

/* ---------- the spec and the policy ---------- */

static int space_from(const Rollout__V1__Space *sp, ro_space_t *out, float **low, float **high,
                      char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!sp || !sp->kind) {
        snprintf(err, errlen, "welcome without a space");
        return RO_EPROTO;
    }
    if (strcmp(sp->kind, "discrete") == 0) {
        if (sp->n < 1 || sp->n > (1u << 20)) {
            snprintf(err, errlen, "discrete space with n = %u", sp->n);
            return RO_EPROTO;
        }
        out->kind = RO_SPACE_DISCRETE;
        out->n = sp->n;
        return 0;
    }
    if (strcmp(sp->kind, "box") != 0 || sp->n_shape < 1 || sp->n_shape > RO_SPACE_MAX_DIMS) {
        snprintf(err, errlen, "space of kind '%.20s' with %zu dims", sp->kind, sp->n_shape);
        return RO_EPROTO;
    }
    out->kind = RO_SPACE_BOX;
    out->ndim = (uint32_t)sp->n_shape;
    size_t size = 1;
    for (size_t d = 0; d < sp->n_shape; d++) {
        if (sp->shape[d] < 1 || sp->shape[d] > (1u << 20) || size * sp->shape[d] > (1u << 20)) {
            snprintf(err, errlen, "box space with a bad shape");
            return RO_EPROTO;
        }
        out->shape[d] = sp->shape[d];
        size *= sp->shape[d];
    }
    if (sp->n_low != size || sp->n_high != size) {
        snprintf(err, errlen, "box space of %zu values with %zu/%zu bounds", size, sp->n_low,
                 sp->n_high);
        return RO_EPROTO;
    }
    *low = malloc(size * sizeof(float));
    *high = malloc(size * sizeof(float));
    if (!*low || !*high)
        return RO_ENOMEM;
    memcpy(*low, sp->low, size * sizeof(float));
    memcpy(*high, sp->high, size * sizeof(float));
    out->low = *low;
    out->high = *high;
    return 0;
}

static int adopt_spec(learner_t *L, node_conn_t *c, const Rollout__V1__Welcome *w)
{
    ro_space_t os, as;
    float *olo = NULL, *ohi = NULL, *alo = NULL, *ahi = NULL;
    const Rollout__V1__EnvSpec *spec = w->spec;
    if (!spec) {
        conn_fail(c, "welcome without an env spec");
        return RO_EPROTO;
    }
    char err[256];
    int rc = space_from(spec->observation, &os, &olo, &ohi, err, sizeof err);
    if (rc == 0)
        rc = space_from(spec->action, &as, &alo, &ahi, err, sizeof err);
    if (rc == 0 && os.kind != RO_SPACE_BOX) {
        snprintf(err, sizeof err, "observations must be a box");
        rc = RO_EPROTO;
    }
    if (rc == 0 && (spec->num_envs < 1 || spec->num_envs > MAX_NUM_ENVS)) {
        snprintf(err, sizeof err, "num_envs %u outside [1, %u]", spec->num_envs, MAX_NUM_ENVS);
        rc = RO_EPROTO;
    }
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
    c->num_envs = spec->num_envs;
    c->node_id = w->node_id;
    c->rngs = calloc(c->num_envs, sizeof *c->rngs);
    c->ep_ret = calloc(c->num_envs, sizeof *c->ep_ret);
    if (!c->rngs || !c->ep_ret) {
        conn_fail(c, "out of memory for %u envs", c->num_envs);
        return RO_ENOMEM;
    }
    for (uint32_t e = 0; e < c->num_envs; e++)
        ro__rng_init(&c->rngs[e], ro__seed_mix(L->cfg.policy.seed ^ ((uint64_t)c->index << 32), e,
                                               RO_STREAM_ACTION));
    c->welcomed = true;
    L->threads = ro__thread_count();
    if (!L->cfg.quiet)
        fprintf(stderr, "rollout-learner: node %s: %s x%u, node id %016llx\n", c->addr,
                spec->env ? spec->env : "?", c->num_envs, (unsigned long long)c->node_id);
    return 0;
}

/* ---------- batching ---------- */

/* Checks an Observations frame from a node before anything reads it. */
static bool obs_valid(node_conn_t *c, const Rollout__V1__Observations *o)
{
    const learner_t *L = c->L;
    size_t n = o->n_env;
    if (n == 0 || o->n_step != n || o->n_reward != n || o->n_terminated != n ||
        o->n_truncated != n || o->n_episode_start != n || o->n_obs != n * L->obs_dim ||
        o->n_final_obs != o->n_final_index * L->obs_dim || o->n_final_index > n) {
        conn_fail(c, "observations %llu: inconsistent field lengths", (unsigned long long)o->seq);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (o->env[i] >= c->num_envs) {
            conn_fail(c, "observations %llu: env %u outside [0, %u)", (unsigned long long)o->seq,
                      o->env[i], c->num_envs);
            return false;
        }
    for (size_t i = 0; i < o->n_final_index; i++)
        if (o->final_index[i] >= n) {
            conn_fail(c, "observations %llu: final_index %u outside the batch",
                      (unsigned long long)o->seq, o->final_index[i]);
            return false;
        }
    return true;
}

static void account(node_conn_t *c, const Rollout__V1__Observations *o)
{
    for (size_t i = 0; i < o->n_env; i++) {
        uint32_t e = o->env[i];
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
        c->failed = true;
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
            if (f->welcome->protocol_version != RO_PROTOCOL_VERSION)
                conn_fail(c, "protocol version %u (this learner speaks %u)",
                          f->welcome->protocol_version, RO_PROTOCOL_VERSION);
            else
                adopt_spec(L, c, f->welcome);
        } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR && f->error) {
            snprintf(L->err, sizeof L->err, "node %s refused us: %s", c->addr,
                     f->error->message ? f->error->message : "");
            c->failed = true;
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
        p->next = NULL;
        if (!L->pending_head)
            L->first_pending_ns = ro__now_ns();
        *L->pending_tail = p;
        L->pending_tail = &p->next;
        L->pending_rows += (uint32_t)f->observations->n_env;
        *keep = true;
        break;
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        conn_close(c, "node said goodbye");
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        c->failed = true;
        L->exit_code = 1;
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

void ro__learner_on_connect(uv_connect_t *req, int status)
{
    node_conn_t *c = req->data;
    learner_t *L = c->L;
    if (status < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "cannot connect: %s", uv_strerror(status));
        c->failed = true;
        L->exit_code = 1;
        conn_close(c, msg);
        return;
    }
    c->connected = true;
    uv_tcp_nodelay(&c->tcp, 1);
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
