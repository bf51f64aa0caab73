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

#include "learner/learner.h"
#include "actors/exchange/batcher.h"
#include "learner/cli.h"
#include "learner/forward.h"
#include "learner/node_link.h"
#include "learner/stream_rx.h"
#include "policy/params.h"
#include "ro_build_config.h"
#include "runtime/flags.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/text.h"
#include "runtime/shared_mem.h"
#include "runtime/thread_guard.h"
#include "wire/checks.h"
#include "wire/token.h"

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
           "\"threads\":%d,\"workers\":%u,\"workers_chosen\":\"%s\",\"forward_ns\":%llu,"
           "\"spin_us\":%llu,\"spin_hits\":%llu,\"spin_misses\":%llu,\"nodes\":[",
           (unsigned long long)L->steps, secs, secs > 0 ? (double)L->steps / secs : 0.0,
           (unsigned long long)L->batches, L->batches ? (double)L->steps / (double)L->batches : 0.0,
           L->threads, L->cfg.workers, L->cfg.workers_given ? "flag" : "measured",
           (unsigned long long)L->forward_ns, (unsigned long long)(L->spin.cap_ns / 1000),
           (unsigned long long)L->spin.hits, (unsigned long long)L->spin.misses);
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        const node_t *n = &L->nodes[i];
        printf("%s{\"address\":", i ? "," : "");
        ro__json_string(stdout, L->cfg.connect[i], RO_TEXT_SHOW_MAX);
        printf(",\"node_id\":\"%016llx\",\"steps\":%llu,\"episodes\":%llu,\"mean_return\":",
               (unsigned long long)n->link.node_id, (unsigned long long)n->steps,
               (unsigned long long)n->episodes);
        /* null where no episode finished (or a node sent a NaN reward) */
        ro__json_double(stdout, n->episodes ? n->return_sum / (double)n->episodes : NAN);
        printf(",\"reconnects\":%llu,\"failed\":%s,\"upgraded\":%s",
               (unsigned long long)n->link.reconnects, n->link.failed ? "true" : "false",
               n->link.upgraded ? "true" : "false");
        if (!n->stream && n->rstate.floats) /* rows started mid-episode from zeros */
            printf(",\"state_resets\":%llu", (unsigned long long)n->rstate.resets);
        if (!n->stream)
            printf(",\"mode\":\"seed\",\"frames\":%llu,\"frames_in_memory\":%llu,"
                   "\"frames_in_ring\":%llu,\"answers_in_ring\":%llu",
                   (unsigned long long)n->frames, (unsigned long long)n->frames_in_memory,
                   (unsigned long long)n->frames_in_ring, (unsigned long long)n->answers_in_ring);
        if (n->stream)
            printf(",\"mode\":\"stream\",\"segments\":%llu,\"segments_in_memory\":%llu,"
                   "\"duplicates\":%llu,\"gaps\":%llu,"
                   "\"policy_version_min\":%llu,\"policy_version_max\":%llu",
                   (unsigned long long)n->rx.segments, (unsigned long long)n->rx.in_memory,
                   (unsigned long long)n->rx.duplicates, (unsigned long long)n->rx.gaps,
                   (unsigned long long)(n->rx.segments ? n->rx.version_min : 0),
                   (unsigned long long)n->rx.version_max);
        printf("}");
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
    ro__loop_spin_init(&L->spin, &L->loop, L->cfg.spin_us);
    L->check.data = L;
    uv_check_start(&L->check, ro__learner_on_check);
    uv_prepare_init(&L->loop, &L->prepare);
    L->prepare.data = L;
    uv_prepare_start(&L->prepare, ro__learner_on_prepare);
    uv_idle_init(&L->loop, &L->kick);
    L->kick.data = L;
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
        ro__stream_rx_free(&L->nodes[i].rx);
        ro__shared_mem_release(&L->nodes[i].seed_obs);
        ro__shared_mem_release(&L->nodes[i].seed_act);
        ro__shared_mem_release(&L->nodes[i].ring_mem);
        free(L->nodes[i].rngs);
        free(L->nodes[i].ep_ret);
        free(L->nodes[i].next_step);
        ro__state_table_free(&L->nodes[i].rstate);
    }
    uint32_t rows;
    ro__learner_free_pending(ro__batcher_take_all(&L->pending, &rows));
    ro__forward_stop(&L->fw);
    ro__policy_free(L->policy);
    if (L->push)
        rollout__v1__policy_params__free_unpacked(L->push, &L->push_alloc.base);
    for (int i = 0; i < 4; i++)
        free(L->bounds[i]);
    ro__layout_free(&L->lay);
}

int main(int argc, char **argv)
{
    if (ro__threads_single_blas(argv) != 0)
        fprintf(stderr, "rollout-learner: warning: OpenBLAS may keep extra threads\n");
    /* A node that closes its end must not kill us with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    /* We map nodes' action memory and rings writable: another process of
     * this user must not write them through /proc/PID/mem (shared_mem.h). */
    if (ro__process_private() != 0)
        fprintf(stderr, "rollout-learner: warning: could not make the process non-dumpable\n");
    static learner_t L; /* large: not on the stack */
    char err[512] = "";
    if (ro__learner_cfg_parse(&L.cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (ro__flags_answer(L.cfg.help, L.cfg.version, ro__learner_usage, "rollout-learner",
                         RO_VERSION))
        return 0;
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
        (L.cfg.workers_given && /* else the first welcome chooses (threads.c) */
         ro__forward_start(&L.fw, &L.loop, L.cfg.workers, L.cfg.overcommit, ro__learner_job_done,
                           &L, err, sizeof err) != 0)) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    if (ro__learner_metrics_open(&L, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-learner: %s\n", err);
        return 2;
    }
    L.t0 = ro__now_ns();
    for (uint32_t i = 0; i < L.cfg.nconnect; i++) {
        ro_link_opts_t o = {
            .ops = &ro__learner_link_ops,
            .owner = &L,
            .index = (int)i,
            .addr = L.cfg.connect[i],
            .role = L.push ? "trainer" : "learner",
            .token = L.token,
            .name = L.cfg.name,
            .max_frame = L.cfg.max_frame,
            .reconnect_s = L.push ? 0 : L.cfg.reconnect_s,
            .quiet = L.cfg.quiet,
            .shared_memory = !L.cfg.no_shared_memory,
            .seed_ring = !L.cfg.no_ring,
            .upgrade = !L.cfg.no_upgrade && !L.push,
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
