/*
 * rollout-learner: a C remote learner. It connects to one or many
 * rollout-nodes (--learner remote), batches the observations of all of them
 * into forward passes, and sends each node the actions for its envs.
 *
 * Threads: 1 loop + --workers W pinned workers, as in a node. The loop does
 * the I/O (node_link.c, one link per node): frames that arrive in one turn
 * of the loop are batched together by the one batcher (a uv_check handle
 * runs after each poll), up to --batch envs (--max-wait-us waits longer for
 * a fuller batch), and each batch goes as a job to one of W forward-pass
 * lanes (forward.c); the lane hands it back with the actions and the loop
 * writes them. Every env of every node has its own sampling stream, seeded
 * from (seed, node index, env index); a stream is only touched by the lane
 * that holds the env's job.
 *
 * Exit status: 0 when the run ended (nodes said goodbye, --steps or
 * --seconds reached, SIGINT/SIGTERM), 1 if a node could not be reached,
 * broke the protocol or was given up after --reconnect-s, 2 for bad flags.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "actors/batcher.h"
#include "learner/cli.h"
#include "learner/forward.h"
#include "learner/node_link.h"
#include "policy/params.h"
#include "ro_build_config.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/text.h"
#include "runtime/thread_guard.h"
#include "wire/checks.h"
#include "wire/token.h"

#define MAX_NUM_ENVS (1u << 20)

/* One node: its link and what the learner keeps of it. Loop thread. */
typedef struct node {
    ro_link_t link;
    uint32_t num_envs;
    ro_rng_t *rngs;      /* [num_envs]; kept across reconnects (lanes may hold them) */
    double *ep_ret;      /* [num_envs] running return */
    uint64_t *next_step; /* [num_envs] first step not yet counted: a resent batch is not
                            counted twice */
    uint64_t steps, episodes;
    double return_sum;
} node_t;

typedef struct learner {
    uv_loop_t loop;
    uv_check_t check;
    uv_timer_t wait_timer, deadline, progress;
    uv_signal_t sigint, sigterm;
    ro_learner_cfg_t cfg;
    char token[256];
    node_t nodes[RO_LEARNER_MAX_NODES];
    uint32_t open_links; /* nodes not done with */

    /* The spaces, from the first welcome; every node must match. */
    bool have_spec;
    uint32_t obs_dim, act_dim, act_n;
    bool discrete;
    float *bounds[4]; /* copies of the box bounds: obs low/high, act low/high */
    ro_space_t obs_space, act_space;
    ro_policy_t *policy; /* read-only once built: shared by the lanes */

    ro_forward_t fw;
    ro_batcher_t pending; /* received frames waiting for a forward pass */
    bool wait_armed;
    bool finished;
    int threads;                     /* read from /proc/self/task once the workers run */
    Rollout__V1__PolicyParams *push; /* --push-policy: the weights to push */
    ro_pb_alloc_t push_alloc;
    uint32_t pushed; /* nodes that accepted them */

    uint64_t steps, batches;
    uint64_t t0;
    bool stopping;
    int exit_code;
    char err[512];
} learner_t;

static node_t *node_of(ro_link_t *l)
{
    return ro__container_of(l, node_t, link);
}

/* Close the loop's handles once no node is left and no job is out. */
static void maybe_finish(learner_t *L)
{
    if (L->finished || L->open_links > 0 || L->fw.jobs_out > 0)
        return;
    L->finished = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++)
        ro__link_release(&L->nodes[i].link);
    uv_close((uv_handle_t *)&L->check, NULL);
    uv_close((uv_handle_t *)&L->wait_timer, NULL);
    uv_close((uv_handle_t *)&L->deadline, NULL);
    uv_close((uv_handle_t *)&L->progress, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
    uv_close((uv_handle_t *)&L->sigterm, NULL);
    ro__forward_close(&L->fw);
}

static void stop_all(learner_t *L, const char *why)
{
    if (L->stopping)
        return;
    L->stopping = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++)
        ro__link_stop(&L->nodes[i].link, why);
    maybe_finish(L);
}

static void free_pending(ro_batch_item_t *it)
{
    while (it) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        it = it->next;
        ro__frame_free(&p->link->alloc, p->frame);
        free(p);
    }
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

/* The first welcome fixes the spaces and builds the policy; every later one
 * must have the same spaces. */
static int adopt_spec(learner_t *L, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    ro_space_t os, as;
    int rc = ro__check_welcome(w, MAX_NUM_ENVS, &os, &as, err, errlen);
    if (rc)
        return rc;
    uint32_t od = (uint32_t)ro_space_size(&os), ad = (uint32_t)ro_space_size(&as);
    if (L->have_spec) {
        if (od != L->obs_dim || (as.kind == RO_SPACE_DISCRETE) != L->discrete ||
            (L->discrete ? as.n != L->act_n : ad != L->act_dim))
            return ro__errorf(err, errlen, RO_EPROTO,
                              "its env spaces differ from the first node's");
        return 0;
    }
    if (copy_bounds(&os, &L->bounds[0], &L->bounds[1]) ||
        copy_bounds(&as, &L->bounds[2], &L->bounds[3]))
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the env spaces");
    L->have_spec = true;
    L->obs_dim = od;
    L->act_dim = ad;
    L->act_n = as.n;
    L->discrete = as.kind == RO_SPACE_DISCRETE;
    L->obs_space = os;
    L->act_space = as;
    char perr[256] = "";
    if (ro__policy_new(&L->policy, &L->cfg.policy, &L->obs_space, &L->act_space, perr,
                       sizeof perr) != 0) {
        snprintf(L->err, sizeof L->err, "%s", perr);
        L->exit_code = 2;
        stop_all(L, "policy does not fit the env");
        return RO_EINVAL;
    }
    L->fw.policy = L->policy;
    L->fw.obs_dim = L->obs_dim;
    return 0;
}

static int on_welcome(ro_link_t *l, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    learner_t *L = l->o.owner;
    node_t *n = node_of(l);
    if (L->push) { /* --push-policy: the weights, then wait for the answer */
        ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
        out.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS;
        out.policy_params = L->push;
        if (ro__conn_send(&l->conn, &out) != 0)
            return ro__errorf(err, errlen, RO_EIO, "could not send the policy");
        return 0;
    }
    int rc = adopt_spec(L, w, err, errlen);
    if (rc)
        return rc;
    uint32_t envs = w->spec->num_envs;
    if (l->attached) {
        /* A reconnect: the sampling streams go on (a lane may still hold a
         * job with some of them); a restarted node starts its envs over. */
        if (envs != n->num_envs)
            return ro__errorf(err, errlen, RO_EPROTO, "came back with %u envs, had %u", envs,
                              n->num_envs);
        if (w->node_id != l->node_id) {
            memset(n->ep_ret, 0, n->num_envs * sizeof *n->ep_ret);
            memset(n->next_step, 0, n->num_envs * sizeof *n->next_step);
        }
    } else {
        n->num_envs = envs;
        n->rngs = calloc(envs, sizeof *n->rngs);
        n->ep_ret = calloc(envs, sizeof *n->ep_ret);
        n->next_step = calloc(envs, sizeof *n->next_step);
        if (!n->rngs || !n->ep_ret || !n->next_step)
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %u envs", envs);
        uint64_t seed = L->cfg.policy.seed ^ ((uint64_t)l->o.index << 32);
        for (uint32_t e = 0; e < envs; e++)
            ro__rng_init(&n->rngs[e], ro__seed_mix(seed, e, RO_STREAM_ACTION));
    }
    L->threads = ro__thread_count();
    return 0;
}

/* ---------- observations in, jobs out ---------- */

/* Steps and episode returns. A batch sent again after a reconnect repeats
 * (env, step) pairs already counted: those are skipped, so every env step
 * is counted once however often it was served. */
static void account(learner_t *L, node_t *n, const Rollout__V1__Observations *o)
{
    for (size_t i = 0; i < o->n_env; i++) {
        uint32_t e = o->env[i];
        if (o->step[i] < n->next_step[e])
            continue;
        n->next_step[e] = o->step[i] + 1;
        n->steps++;
        L->steps++;
        n->ep_ret[e] += o->reward[i];
        if (o->terminated[i] || o->truncated[i]) {
            n->episodes++;
            n->return_sum += n->ep_ret[e];
            n->ep_ret[e] = 0.0;
        }
    }
}

static void on_frame(ro_link_t *l, ro_frame_t *f, bool *keep)
{
    learner_t *L = l->o.owner;
    node_t *n = node_of(l);
    char err[256];
    if (L->push && f->body_case == ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED) {
        L->pushed++;
        ro__conn_goodbye(&l->conn, "policy pushed");
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
    if (ro__check_observations(f->observations, L->obs_dim, n->num_envs, err, sizeof err) != 0) {
        ro__link_fail(l, "%s", err);
        return;
    }
    account(L, n, f->observations);
    ro_pending_t *p = malloc(sizeof *p);
    if (!p) {
        ro__link_fail(l, "out of memory");
        return;
    }
    p->frame = f;
    p->link = l;
    p->gen = l->gen;
    p->item.rows = (uint32_t)f->observations->n_env;
    ro__batcher_push(&L->pending, &p->item);
    *keep = true;
}

/* A connection went down: its frames not yet in a job are void (the node
 * keeps them for its next learner, us again after a reconnect). */
static void on_down(ro_link_t *l)
{
    learner_t *L = l->o.owner;
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
    free_pending(mine);
    if (l->failed && L->exit_code == 0)
        L->exit_code = 1;
    if (l->done) {
        L->open_links--;
        maybe_finish(L);
    }
}

static const ro_link_ops_t link_ops = {
    .on_welcome = on_welcome,
    .on_frame = on_frame,
    .on_down = on_down,
};

/* Back from a lane: one Actions frame per Observations frame of the job. */
static void on_job_done(void *ctx, ro_job_t *j)
{
    learner_t *L = ctx;
    uint32_t r = 0;
    for (ro_batch_item_t *it = j->frames; it; it = it->next) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
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
        /* A node that went away keeps these observations for its next
         * learner; a connection made since (a reconnect) is not the one they
         * came on. Steps were counted on arrival (account). */
        if (!j->failed && p->gen == p->link->gen)
            ro__link_send(p->link, &f);
        r += (uint32_t)o->n_env;
    }
    free_pending(j->frames);
    free(j->rowrng);
    free(j->act_i);
    free(j->act_f);
    free(j);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        stop_all(L, "step budget reached");
    maybe_finish(L);
}

/* One batch of pending frames into a job for the next lane. */
static void submit_batch(learner_t *L)
{
    ro_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(L->err, sizeof L->err, "out of memory for a batch");
        L->exit_code = 1;
        stop_all(L, "out of memory");
        return;
    }
    j->frames = ro__batcher_take(&L->pending, &j->rows);
    j->rowrng = calloc(j->rows, sizeof *j->rowrng);
    j->act_i = calloc(j->rows, sizeof *j->act_i);
    j->act_f = calloc((size_t)j->rows * L->act_dim, sizeof *j->act_f);
    j->failed = !j->rowrng || !j->act_i || !j->act_f; /* answered with nothing: resent */
    uint32_t r = 0;
    for (ro_batch_item_t *it = j->frames; it && !j->failed; it = it->next) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        const Rollout__V1__Observations *o = p->frame->observations;
        for (size_t i = 0; i < o->n_env; i++)
            j->rowrng[r + i] = &node_of(p->link)->rngs[o->env[i]];
        r += (uint32_t)o->n_env;
    }
    L->batches++;
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

static void on_check(uv_check_t *h)
{
    flush(h->data);
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
           L->threads, L->fw.nlanes);
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        const node_t *n = &L->nodes[i];
        printf("%s{\"address\":", i ? "," : "");
        ro__json_string(stdout, L->cfg.connect[i], RO_TEXT_SHOW_MAX);
        printf(",\"node_id\":\"%016llx\",\"steps\":%llu,\"episodes\":%llu,\"mean_return\":",
               (unsigned long long)n->link.node_id, (unsigned long long)n->steps,
               (unsigned long long)n->episodes);
        /* null where no episode finished (or a node sent a NaN reward) */
        ro__json_double(stdout, n->episodes ? n->return_sum / (double)n->episodes : NAN);
        printf(",\"reconnects\":%llu,\"failed\":%s}", (unsigned long long)n->link.reconnects,
               n->link.failed ? "true" : "false");
    }
    printf("]}\n");
    fflush(stdout);
}

/* --push-policy: read and check the file, keep the message to send. */
static int load_push(learner_t *L, char *err, size_t errlen)
{
    FILE *f = fopen(L->cfg.push_policy, "rb");
    if (!f)
        return ro__errorf(err, errlen, RO_EINVAL, "--push-policy '%s': cannot read it (%s)",
                          L->cfg.push_policy, strerror(errno));
    uint8_t *buf = malloc(RO_POLICY_FILE_MAX);
    size_t len = buf ? fread(buf, 1, RO_POLICY_FILE_MAX, f) : 0;
    fclose(f);
    ro_policy_params_t pp; /* full validation, with the loader's messages */
    char label[300];
    snprintf(label, sizeof label, "policy file %s", L->cfg.push_policy);
    int rc = buf ? ro__policy_params_decode(&pp, buf, len, label, err, errlen) : RO_ENOMEM;
    if (rc == 0) {
        ro__policy_params_free(&pp);
        rc = ro__policy_params_unpack(&L->push, &L->push_alloc, buf, len, label, err, errlen);
    }
    free(buf);
    return rc;
}

static int init_loop(learner_t *L, char *err, size_t errlen)
{
    int rc = uv_loop_init(&L->loop);
    if (rc == 0 && (rc = uv_signal_init(&L->loop, &L->sigint)) == 0 &&
        (rc = uv_signal_init(&L->loop, &L->sigterm)) == 0) {
        L->sigint.data = L->sigterm.data = L;
        if ((rc = uv_signal_start(&L->sigint, on_signal, SIGINT)) == 0)
            rc = uv_signal_start(&L->sigterm, on_signal, SIGTERM);
    }
    if (rc)
        return ro__errorf(err, errlen, RO_EIO, "cannot set up the event loop: %s", uv_strerror(rc));
    ro__batcher_init(&L->pending, L->cfg.batch, L->cfg.max_wait_us * 1000ull);
    /* Check and timer handles cannot fail to initialise or start. */
    uv_check_init(&L->loop, &L->check);
    L->check.data = L;
    uv_check_start(&L->check, on_check);
    uv_timer_init(&L->loop, &L->wait_timer);
    L->wait_timer.data = L;
    uv_timer_init(&L->loop, &L->deadline);
    L->deadline.data = L;
    uv_timer_init(&L->loop, &L->progress);
    L->progress.data = L;
    if (L->cfg.seconds > 0)
        uv_timer_start(&L->deadline, on_deadline, (uint64_t)(L->cfg.seconds * 1000.0), 0);
    if (!L->cfg.quiet)
        uv_timer_start(&L->progress, on_progress, 2000, 2000);
    return 0;
}

/* Every --connect address, checked before anything starts. */
static int check_addresses(const learner_t *L, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        ro_addr_t a;
        int rc = ro__addr_parse(L->cfg.connect[i], false, &a, "--connect", err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

static void free_learner(learner_t *L)
{
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        free(L->nodes[i].rngs);
        free(L->nodes[i].ep_ret);
        free(L->nodes[i].next_step);
    }
    uint32_t rows;
    free_pending(ro__batcher_take_all(&L->pending, &rows));
    ro__forward_stop(&L->fw);
    ro__policy_free(L->policy);
    if (L->push)
        rollout__v1__policy_params__free_unpacked(L->push, &L->push_alloc.base);
    for (int i = 0; i < 4; i++)
        free(L->bounds[i]);
}

int main(int argc, char **argv)
{
    if (ro__threads_single_blas(argv) != 0)
        fprintf(stderr, "rollout-learner: warning: OpenBLAS may keep extra threads\n");
    /* A node that closes its end must not kill us with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    static learner_t L; /* large: not on the stack */
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
        ro__token_read(L.cfg.token_file, L.token, sizeof L.token, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (L.cfg.token_file && ro__token_exposed(L.cfg.token_file, err, sizeof err))
        fprintf(stderr, "rollout-learner: warning: %s\n", err);
    if (check_addresses(&L, err, sizeof err) != 0 ||
        (L.cfg.push_policy && load_push(&L, err, sizeof err) != 0)) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (init_loop(&L, err, sizeof err) != 0 ||
        ro__forward_start(&L.fw, &L.loop, L.cfg.workers, L.cfg.overcommit, on_job_done, &L, err,
                          sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    L.t0 = ro__now_ns();
    for (uint32_t i = 0; i < L.cfg.nconnect; i++) {
        ro_link_opts_t o = {
            .ops = &link_ops,
            .owner = &L,
            .index = (int)i,
            .addr = L.cfg.connect[i],
            .role = L.push ? "trainer" : "learner",
            .token = L.token,
            .name = L.cfg.name,
            .max_frame = L.cfg.max_frame,
            .reconnect_s = L.push ? 0 : L.cfg.reconnect_s,
            .quiet = L.cfg.quiet,
        };
        L.open_links++;
        ro__link_start(&L.nodes[i].link, &L.loop, &o, err, sizeof err); /* checked above */
    }
    uv_run(&L.loop, UV_RUN_DEFAULT);
    double secs = (double)(ro__now_ns() - L.t0) * 1e-9;
    if (L.err[0])
        fprintf(stderr, "rollout-learner: %s\n", L.err);
    if (L.push) {
        fprintf(stderr, "rollout-learner: pushed the policy to %u of %u nodes\n", L.pushed,
                L.cfg.nconnect);
        if (L.pushed != L.cfg.nconnect && L.exit_code == 0)
            L.exit_code = 1;
    } else {
        print_summary(&L, secs);
    }
    uv_loop_close(&L.loop);
    free_learner(&L);
    return L.exit_code;
}
