/*
 * rollout-learner: a C remote learner. It connects to one or many
 * rollout-nodes (--learner remote), batches the observations of all of them
 * into forward passes, and sends each node the actions for its envs.
 *
 * Threads: 1 loop + --workers W pinned workers, as in a node. The loop does
 * the I/O: frames that arrive in one turn of the loop are batched together
 * (a uv_check handle runs after each poll), up to --batch envs (--max-wait-us
 * waits longer for a fuller batch), and each batch goes as a job to one of W
 * forward-pass lanes (actors on the workers), round robin; the lane sends it
 * back with the actions and the loop writes them. Every env of every node has
 * its own sampling stream, seeded from (seed, node index, env index); a
 * stream is only touched by the lane that holds the env's job.
 *
 * Exit status: 0 when the run ended (nodes said goodbye, --steps or
 * --seconds reached, SIGINT/SIGTERM), 1 if a node could not be reached or
 * broke the protocol, 2 for bad flags.
 */
#include <math.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "clock.h"
#include "error.h"
#include "flags.h"
#include "learner_cli.h"
#include "policy.h"
#include "policy_params.h"
#include "actor.h"
#include "rng.h"
#include "ro_build_config.h"
#include "scheduler.h"
#include "thread_guard.h"
#include "topology.h"
#include "wire.h"

#define READ_CHUNK 65536
#define MAX_NUM_ENVS (1u << 20)

typedef struct learner learner_t;

typedef struct node_conn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    learner_t *L;
    int index;
    const char *addr;
    ro_frame_reader_t rd;
    bool connected, welcomed, closing, failed;
    uint64_t node_id;
    uint32_t num_envs;
    ro_rng_t *rngs; /* [num_envs] */
    double *ep_ret; /* [num_envs] running return */
    uint64_t steps, episodes;
    double return_sum;
    char rbuf[READ_CHUNK];
} node_conn_t;

/* A received Observations frame waiting for its forward pass. */
typedef struct pending {
    ro_frame_t *frame;
    node_conn_t *c;
    struct pending *next;
} pending_t;

/* One forward pass: the frames it covers and room for their actions.
 * Owned by the loop, then by the lane it is sent to, then by the loop. */
typedef struct job {
    ro_msg_t msg;
    pending_t *frames;
    uint32_t rows;
    ro_rng_t **rowrng; /* [rows] sampling stream of each row */
    int32_t *act_i;    /* [rows] */
    float *act_f;      /* [rows x act_dim] */
} job_t;

/* A forward-pass lane: an actor on one worker with its own scratch. */
typedef struct lane {
    ro_actor_t actor;
    learner_t *L;
    ro_policy_ws_t *ws; /* touched only by the thread running the lane */
    uint32_t ws_rows;
} lane_t;

struct learner {
    uv_loop_t loop;
    uv_check_t check;
    uv_timer_t wait_timer, deadline, progress;
    uv_signal_t sigint, sigterm;
    ro_learner_cfg_t cfg;
    char token[256];
    node_conn_t conns[RO_LEARNER_MAX_NODES];
    uint32_t open_conns;

    /* The spaces, from the first welcome; every node must match. */
    bool have_spec;
    uint32_t obs_dim, act_dim, act_n;
    bool discrete;
    float *obs_low, *obs_high, *act_low, *act_high;
    ro_space_t obs_space, act_space;
    ro_policy_t *policy; /* read-only once built: shared by the lanes */

    /* Forward passes on the workers. */
    ro_topology_t topo;
    ro_worker_plan_t *plan;
    int ngroups, group_nodes[RO_TOPO_MAX_NODES];
    ro_sched_t *sched;
    lane_t *lanes;
    uint32_t nlanes, next_lane;
    uv_async_t done_async;
    ro_actor_t done; /* loop actor: jobs come back here */
    uint32_t jobs_out;
    bool finished;
    int threads;                     /* read from /proc/self/task once the workers run */
    Rollout__V1__PolicyParams *push; /* --push-policy: the weights to push */
    uint32_t pushed;                 /* nodes that accepted them */

    pending_t *pending_head, **pending_tail;
    uint32_t pending_rows;
    uint64_t first_pending_ns;
    bool wait_armed;

    uint64_t steps, batches;
    uint64_t t0;
    bool stopping;
    int exit_code;
    char err[512];
};

static void conn_close(node_conn_t *c, const char *why);

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    free(req->data);
    free(req);
}

static int send_frame(node_conn_t *c, const ro_frame_t *f)
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
    send_frame(c, &f);
    c->failed = true;
    c->L->exit_code = 1;
    conn_close(c, msg);
}

/* Close the loop's handles once no node is connected and no job is out. */
static void maybe_finish(learner_t *L)
{
    if (L->finished || L->open_conns > 0 || L->jobs_out > 0)
        return;
    L->finished = true;
    uv_close((uv_handle_t *)&L->check, NULL);
    uv_close((uv_handle_t *)&L->wait_timer, NULL);
    uv_close((uv_handle_t *)&L->deadline, NULL);
    uv_close((uv_handle_t *)&L->progress, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
    uv_close((uv_handle_t *)&L->sigterm, NULL);
    uv_close((uv_handle_t *)&L->done_async, NULL);
}

static void on_closed(uv_handle_t *h)
{
    node_conn_t *c = h->data;
    learner_t *L = c->L;
    ro__frame_reader_free(&c->rd);
    L->open_conns--;
    maybe_finish(L);
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

static void stop_all(learner_t *L, const char *why)
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
            send_frame(c, &f);
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

/* Grow a lane's scratch to hold rows rows. Lane's thread. */
static int lane_ensure_ws(lane_t *ln, uint32_t rows)
{
    if (rows <= ln->ws_rows)
        return 0;
    ro__policy_ws_free(ln->ws);
    ln->ws = NULL;
    ln->ws_rows = 0;
    if (ro__policy_ws_new(&ln->ws, ln->L->policy, rows) != 0)
        return RO_ENOMEM;
    ln->ws_rows = rows;
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
            stop_all(L, "policy does not fit the env");
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

/* A lane runs a job's forward pass and sends the job back. */
static void lane_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    lane_t *ln = ro__container_of(self, lane_t, actor);
    job_t *j = ro__container_of(msg, job_t, msg);
    const learner_t *L = ln->L;
    if (lane_ensure_ws(ln, j->rows) == 0) {
        float *in = ro__policy_ws_input(ln->ws);
        uint32_t r = 0;
        for (pending_t *p = j->frames; p; p = p->next) {
            const Rollout__V1__Observations *o = p->frame->observations;
            memcpy(in + (size_t)r * L->obs_dim, o->obs, o->n_obs * sizeof(float));
            r += (uint32_t)o->n_env;
        }
        ro__policy_act(L->policy, ln->ws, j->rows, j->rowrng, j->act_i, j->act_f);
    } else {
        j->rows = 0; /* out of memory: the loop answers nothing, the node resends */
    }
    ro__actor_send(&ln->L->done, &j->msg);
}

/* Back on the loop: one Actions frame per Observations frame of the job. */
static void done_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    learner_t *L = ro__container_of(self, learner_t, done);
    job_t *j = ro__container_of(msg, job_t, msg);
    L->jobs_out--;
    uint32_t r = 0;
    while (j->frames) {
        pending_t *p = j->frames;
        j->frames = p->next;
        const Rollout__V1__Observations *o = p->frame->observations;
        Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
        a.seq = o->seq;
        if (L->discrete) {
            a.n_discrete = o->n_env;
            a.discrete = j->act_i + r;
        } else {
            a.n_box = o->n_env * L->act_dim;
            a.box = j->act_f + (size_t)r * L->act_dim;
        }
        ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
        f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
        f.actions = &a;
        /* A node that went away keeps these observations for its next learner. */
        if (j->rows > 0 && !p->c->closing && send_frame(p->c, &f) == 0) {
            p->c->steps += o->n_env;
            L->steps += o->n_env;
        }
        r += (uint32_t)o->n_env;
        ro__frame_free(p->frame);
        free(p);
    }
    free(j->rowrng);
    free(j->act_i);
    free(j->act_f);
    free(j);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        stop_all(L, "step budget reached");
    maybe_finish(L);
}

/* Take pending frames up to --batch envs (at least one frame) into a job
 * for the next lane. */
static void flush_once(learner_t *L)
{
    job_t *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(L->err, sizeof L->err, "out of memory for a batch");
        L->exit_code = 1;
        stop_all(L, "out of memory");
        return;
    }
    pending_t **tail = &j->frames;
    while (L->pending_head) {
        const Rollout__V1__Observations *o = L->pending_head->frame->observations;
        if (j->rows > 0 && j->rows + o->n_env > L->cfg.batch)
            break;
        pending_t *p = L->pending_head;
        L->pending_head = p->next;
        p->next = NULL;
        *tail = p;
        tail = &p->next;
        j->rows += (uint32_t)o->n_env;
    }
    if (!L->pending_head)
        L->pending_tail = &L->pending_head;
    L->pending_rows -= j->rows;
    L->first_pending_ns = ro__now_ns();
    j->rowrng = calloc(j->rows, sizeof *j->rowrng);
    j->act_i = calloc(j->rows, sizeof *j->act_i);
    j->act_f = calloc((size_t)j->rows * L->act_dim, sizeof *j->act_f);
    uint32_t r = 0;
    for (pending_t *p = j->frames; p; p = p->next) {
        const Rollout__V1__Observations *o = p->frame->observations;
        for (size_t i = 0; i < o->n_env && j->rowrng; i++)
            j->rowrng[r + i] = &p->c->rngs[o->env[i]];
        r += (uint32_t)o->n_env;
    }
    if (!j->rowrng || !j->act_i || !j->act_f)
        j->rows = 0; /* answered with nothing; the node resends to someone */
    L->batches++;
    L->jobs_out++;
    lane_t *ln = &L->lanes[L->next_lane++ % L->nlanes];
    if (j->rows > 0)
        ro__actor_send(&ln->actor, &j->msg);
    else
        done_behaviour(&L->done, &j->msg);
}

static void on_wait_timer(uv_timer_t *t);

/* After each turn of the loop: run what is due. */
static void flush(learner_t *L, bool timer_fired)
{
    while (L->pending_head && !L->stopping) {
        bool full = L->pending_rows >= L->cfg.batch;
        bool waited = L->cfg.max_wait_us == 0 || timer_fired ||
                      ro__now_ns() - L->first_pending_ns >= L->cfg.max_wait_us * 1000ull;
        if (!full && !waited)
            break;
        flush_once(L);
    }
    if (L->pending_head && !L->stopping && !L->wait_armed) {
        L->wait_armed = true;
        uv_timer_start(&L->wait_timer, on_wait_timer, (L->cfg.max_wait_us + 999) / 1000, 0);
    }
}

static void on_wait_timer(uv_timer_t *t)
{
    learner_t *L = t->data;
    L->wait_armed = false;
    flush(L, true);
}

static void on_check(uv_check_t *h)
{
    flush(h->data, false);
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
        if (send_frame(c, &out) != 0)
            conn_fail(c, "could not send the policy");
    } else if (f->body_case == ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED && c->welcomed) {
        L->pushed++;
        Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
        g.reason = "policy pushed";
        ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
        out.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
        out.goodbye = &g;
        send_frame(c, &out);
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

static void on_connect(uv_connect_t *req, int status)
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
    send_frame(c, &f);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static int parse_addr(const char *spec, struct sockaddr_storage *ss)
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

/* ---------- run ---------- */

static void on_signal(uv_signal_t *h, int sig)
{
    (void)sig;
    stop_all(h->data, "learner stopped by a signal");
}

static void on_deadline(uv_timer_t *t)
{
    stop_all(t->data, "time limit reached");
}

static void on_progress(uv_timer_t *t)
{
    learner_t *L = t->data;
    double s = (double)(ro__now_ns() - L->t0) * 1e-9;
    fprintf(stderr, "rollout-learner: %.1fs %llu steps (%.0f steps/s), %llu batches\n", s,
            (unsigned long long)L->steps, s > 0 ? (double)L->steps / s : 0.0,
            (unsigned long long)L->batches);
}

static void print_summary(const learner_t *L, double secs)
{
    fprintf(stderr, "rollout-learner summary: %llu steps in %.2f s = %.0f steps/s, %llu batches\n",
            (unsigned long long)L->steps, secs, secs > 0 ? (double)L->steps / secs : 0.0,
            (unsigned long long)L->batches);
    if (!L->cfg.json)
        return;
    printf("{\"steps\":%llu,\"seconds\":%.6f,\"sps\":%.1f,\"batches\":%llu,\"mean_batch\":%.3f,"
           "\"threads\":%d,\"workers\":%u,\"nodes\":[",
           (unsigned long long)L->steps, secs, secs > 0 ? (double)L->steps / secs : 0.0,
           (unsigned long long)L->batches, L->batches ? (double)L->steps / (double)L->batches : 0.0,
           L->threads, L->nlanes);
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        const node_conn_t *c = &L->conns[i];
        printf("%s{\"address\":\"%s\",\"node_id\":\"%016llx\",\"steps\":%llu,\"episodes\":%llu,"
               "\"mean_return\":%.17g,\"failed\":%s}",
               i ? "," : "", c->addr, (unsigned long long)c->node_id, (unsigned long long)c->steps,
               (unsigned long long)c->episodes,
               c->episodes ? c->return_sum / (double)c->episodes : 0.0,
               c->failed ? "true" : "false");
    }
    printf("]}\n");
    fflush(stdout);
}

/* --push-policy: read and check the file, keep the message to send. */
static int load_push(learner_t *L, char *err, size_t errlen)
{
    FILE *f = fopen(L->cfg.push_policy, "rb");
    if (!f) {
        snprintf(err, errlen, "--push-policy '%s': cannot read it (%s)", L->cfg.push_policy,
                 strerror(errno));
        return RO_EINVAL;
    }
    uint8_t *buf = malloc(RO_POLICY_FILE_MAX);
    size_t len = buf ? fread(buf, 1, RO_POLICY_FILE_MAX, f) : 0;
    fclose(f);
    ro_policy_params_t pp; /* full validation, with the loader's messages */
    char label[300];
    snprintf(label, sizeof label, "policy file %s", L->cfg.push_policy);
    int rc = buf ? ro__policy_params_decode(&pp, buf, len, label, err, errlen) : RO_ENOMEM;
    if (rc == 0) {
        ro__policy_params_free(&pp);
        uint64_t body;
        int k = ro__varint_get(buf, len, &body);
        L->push = rollout__v1__policy_params__unpack(NULL, (size_t)body, buf + k);
        if (!L->push)
            rc = RO_ENOMEM;
    }
    free(buf);
    return rc;
}

/* W pinned workers, one forward-pass lane on each. */
static int start_lanes(learner_t *L, char *err, size_t errlen)
{
    int rc = ro__topology_read(&L->topo, err, errlen);
    if (rc)
        return rc;
    int w = (int)L->cfg.workers;
    L->plan = calloc((size_t)w, sizeof *L->plan);
    L->lanes = calloc((size_t)w, sizeof *L->lanes);
    if (!L->plan || !L->lanes)
        return RO_ENOMEM;
    rc = ro__topology_plan(&L->topo, w, L->cfg.overcommit, L->plan, L->group_nodes, &L->ngroups);
    if (rc == RO_ERANGE) {
        snprintf(err, errlen,
                 "--workers %d: only %d CPUs are allowed for this process (use --overcommit to "
                 "insist)",
                 w, L->topo.ncpus);
        return rc;
    }
    if (rc || (rc = ro__sched_new(&L->sched, L->ngroups, L->group_nodes, L->plan, w)))
        return rc;
    L->nlanes = (uint32_t)w;
    for (int i = 0; i < w; i++) {
        L->lanes[i].L = L;
        ro__actor_init_worker(&L->lanes[i].actor, "learner-lane", lane_behaviour,
                              ro__sched_queue(L->sched, i), 4);
    }
    return ro__sched_start(L->sched);
}

int main(int argc, char **argv)
{
    if (ro__threads_single_blas(argv) != 0)
        fprintf(stderr, "rollout-learner: warning: OpenBLAS may keep extra threads\n");
    /* A node that closes its end must not kill us with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    static learner_t L; /* large (read buffers): not on the stack */
    char err[512] = "";
    if (ro__learner_cfg_parse(&L.cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (L.cfg.help) {
        ro__learner_usage(stdout);
        return 0;
    }
    if (L.cfg.version) {
        printf("rollout-learner %s\n", RO_VERSION);
        return 0;
    }
    if (L.cfg.token_file &&
        ro__flag_token_file(L.cfg.token_file, L.token, sizeof L.token, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    struct sockaddr_storage addrs[RO_LEARNER_MAX_NODES];
    for (uint32_t i = 0; i < L.cfg.nconnect; i++)
        if (parse_addr(L.cfg.connect[i], &addrs[i]) != 0) {
            fprintf(stderr,
                    "rollout-learner: --connect '%s': expected HOST:PORT with a numeric IPv4 or "
                    "IPv6 address and a port in [1, 65535]\n",
                    L.cfg.connect[i]);
            return 2;
        }

    if (L.cfg.push_policy && load_push(&L, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (start_lanes(&L, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    uv_loop_init(&L.loop);
    uv_async_init(&L.loop, &L.done_async, ro__actor_async_cb);
    L.done_async.data = &L.done;
    ro__actor_init_loop(&L.done, "learner-done", done_behaviour, &L.done_async);
    L.pending_tail = &L.pending_head;
    uv_check_init(&L.loop, &L.check);
    L.check.data = &L;
    uv_check_start(&L.check, on_check);
    uv_timer_init(&L.loop, &L.wait_timer);
    L.wait_timer.data = &L;
    uv_timer_init(&L.loop, &L.deadline);
    L.deadline.data = &L;
    uv_timer_init(&L.loop, &L.progress);
    L.progress.data = &L;
    uv_signal_init(&L.loop, &L.sigint);
    uv_signal_init(&L.loop, &L.sigterm);
    L.sigint.data = L.sigterm.data = &L;
    uv_signal_start(&L.sigint, on_signal, SIGINT);
    uv_signal_start(&L.sigterm, on_signal, SIGTERM);
    if (L.cfg.seconds > 0)
        uv_timer_start(&L.deadline, on_deadline, (uint64_t)(L.cfg.seconds * 1000.0), 0);
    if (!L.cfg.quiet)
        uv_timer_start(&L.progress, on_progress, 2000, 2000);
    L.t0 = ro__now_ns();
    for (uint32_t i = 0; i < L.cfg.nconnect; i++) {
        node_conn_t *c = &L.conns[i];
        c->L = &L;
        c->index = (int)i;
        c->addr = L.cfg.connect[i];
        ro__frame_reader_init(&c->rd, L.cfg.max_frame);
        uv_tcp_init(&L.loop, &c->tcp);
        c->tcp.data = c;
        c->creq.data = c;
        L.open_conns++;
        uv_tcp_connect(&c->creq, &c->tcp, (struct sockaddr *)&addrs[i], on_connect);
    }
    uv_run(&L.loop, UV_RUN_DEFAULT);
    double secs = (double)(ro__now_ns() - L.t0) * 1e-9;
    ro__sched_stop(L.sched); /* no job is out: maybe_finish waited for them */
    if (L.err[0])
        fprintf(stderr, "rollout-learner: %s\n", L.err);
    if (L.push) {
        fprintf(stderr, "rollout-learner: pushed the policy to %u of %u nodes\n", L.pushed,
                L.cfg.nconnect);
        if (L.pushed != L.cfg.nconnect && L.exit_code == 0)
            L.exit_code = 1;
        rollout__v1__policy_params__free_unpacked(L.push, NULL);
    } else {
        print_summary(&L, secs);
    }

    uv_loop_close(&L.loop);
    for (uint32_t i = 0; i < L.cfg.nconnect; i++) {
        free(L.conns[i].rngs);
        free(L.conns[i].ep_ret);
    }
    while (L.pending_head) {
        pending_t *p = L.pending_head;
        L.pending_head = p->next;
        ro__frame_free(p->frame);
        free(p);
    }
    for (uint32_t i = 0; i < L.nlanes; i++)
        ro__policy_ws_free(L.lanes[i].ws);
    free(L.lanes);
    ro__sched_free(L.sched);
    free(L.plan);
    ro__topology_free(&L.topo);
    ro__policy_free(L.policy);
    free(L.obs_low);
    free(L.obs_high);
    free(L.act_low);
    free(L.act_high);
    return L.exit_code;
}
