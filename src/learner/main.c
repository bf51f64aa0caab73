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
 * A node whose connection is lost without a goodbye is reconnected to
 * (learner_conn.c); the others are served meanwhile.
 *
 * Exit status: 0 when the run ended (nodes said goodbye, --steps or
 * --seconds reached, SIGINT/SIGTERM), 1 if a node could not be reached,
 * broke the protocol or was given up after --reconnect-s, 2 for bad flags.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "wire/token.h"
#include "learner/learner.h"
#include "policy/params.h"
#include "ro_build_config.h"
#include "runtime/thread_guard.h"

/* Close the loop's handles once no node is left and no job is out. */
void ro__learner_maybe_finish(learner_t *L)
{
    if (L->finished || L->open_conns > 0 || L->jobs_out > 0)
        return;
    L->finished = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++)
        uv_close((uv_handle_t *)&L->conns[i].retry, NULL);
    uv_close((uv_handle_t *)&L->check, NULL);
    uv_close((uv_handle_t *)&L->wait_timer, NULL);
    uv_close((uv_handle_t *)&L->deadline, NULL);
    uv_close((uv_handle_t *)&L->progress, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
    uv_close((uv_handle_t *)&L->sigterm, NULL);
    uv_close((uv_handle_t *)&L->done_async, NULL);
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
        /* A node that went away keeps these observations for its next learner;
         * a connection made since (a reconnect) is not the one they came on. */
        if (j->rows > 0 && !p->c->closing && p->gen == p->c->gen)
            ro__learner_send(p->c, &f); /* steps were counted on arrival (account) */
        r += (uint32_t)o->n_env;
        ro__frame_free(p->frame);
        free(p);
    }
    free(j->rowrng);
    free(j->act_i);
    free(j->act_f);
    free(j);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        ro__learner_stop_all(L, "step budget reached");
    ro__learner_maybe_finish(L);
}

/* Take pending frames up to --batch envs (at least one frame) into a job
 * for the next lane. */
static void flush_once(learner_t *L)
{
    job_t *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(L->err, sizeof L->err, "out of memory for a batch");
        L->exit_code = 1;
        ro__learner_stop_all(L, "out of memory");
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

/* ---------- run ---------- */

static void on_signal(uv_signal_t *h, int sig)
{
    (void)sig;
    ro__learner_stop_all(h->data, "learner stopped by a signal");
}

static void on_deadline(uv_timer_t *t)
{
    ro__learner_stop_all(t->data, "time limit reached");
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
               "\"mean_return\":%.17g,\"reconnects\":%llu,\"failed\":%s}",
               i ? "," : "", c->addr, (unsigned long long)c->node_id, (unsigned long long)c->steps,
               (unsigned long long)c->episodes,
               c->episodes ? c->return_sum / (double)c->episodes : 0.0,
               (unsigned long long)c->reconnects, c->failed ? "true" : "false");
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
        ro__token_read(L.cfg.token_file, L.token, sizeof L.token, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (L.cfg.token_file && ro__token_exposed(L.cfg.token_file, err, sizeof err))
        fprintf(stderr, "rollout-learner: warning: %s\n", err);
    for (uint32_t i = 0; i < L.cfg.nconnect; i++)
        if (ro__learner_parse_addr(L.cfg.connect[i], &L.conns[i].sa) != 0) {
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
        ro__learner_conn_start(c);
    }
    uv_run(&L.loop, UV_RUN_DEFAULT);
    double secs = (double)(ro__now_ns() - L.t0) * 1e-9;
    ro__sched_stop(L.sched); /* no job is out: ro__learner_maybe_finish waited for them */
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
        free(L.conns[i].next_step);
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
