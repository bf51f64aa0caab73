/*
 * rollout-learner's threads, chosen for the work when --workers is not
 * given (docs/operations.md "Threads chosen for the work"): at the first
 * welcome the policy exists, and one forward pass over a frame's rows is
 * timed on the loop thread. A pass cheaper than handing it to a worker and
 * back runs on the loop thread itself (workers 0; the loop spins for the
 * next frame, --spin-us 50); a dearer one goes to workers, one per allowed
 * CPU but the loop's (and, the node being on this host, but one for the
 * node's loop), when that leaves two or more: workers do not split a pass,
 * they run passes side by side, and one worker runs them one after another
 * as the loop would, a hand-off later (SEED at 2048 envs between two
 * network namespaces on 2 CPUs: the learner on its loop made 1.15x the old
 * defaults, with one worker 1.06x). Called by serve.c; calls forward.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "learner/learner.h"
#include "runtime/clock.h"
#include "runtime/error.h"

/* What a hand-off to a worker and back costs the loop: two wake-ups, each
 * tens of microseconds on the 2-vCPU VM this project is measured on
 * (docs/protocol.md "Spinning instead of sleeping"). A forward pass that
 * costs less gains nothing from a worker. */
#define HANDOFF_NS 50000ull
/* The spin of a loop that runs the passes itself (cli.c's default). */
#define LOOP_SPIN_US 50

/* time_pass runs the policy over rows rows of zeros, three times (the first
 * warms the caches), and returns the fastest in ns; 0 when out of memory. */
static uint64_t time_pass(const learner_t *L, uint32_t rows)
{
    const ro_policy_t *p = L->policy;
    const uint32_t sf = ro__policy_state_floats(p);
    const uint32_t ai = L->act_ndisc ? L->act_ndisc : 1, af = L->act_dim ? L->act_dim : 1;
    ro_policy_ws_t *ws = NULL;
    ro_rng_t *rng = calloc(rows, sizeof *rng);
    ro_rng_t **rngs = calloc(rows, sizeof *rngs);
    int32_t *act_i = calloc((size_t)rows * ai, sizeof *act_i);
    float *act_f = calloc((size_t)rows * af, sizeof *act_f);
    float *rs = sf ? calloc((size_t)rows * 2 * sf, sizeof *rs) : NULL;
    float **state = sf ? calloc(rows, sizeof *state) : NULL;
    uint64_t best = 0;
    if (!rng || !rngs || !act_i || !act_f || (sf && (!rs || !state)) ||
        ro__policy_ws_new(&ws, p, rows) != 0)
        goto out;
    for (uint32_t r = 0; r < rows; r++) {
        ro__rng_init(&rng[r], r);
        rngs[r] = &rng[r];
        if (sf)
            state[r] = rs + (size_t)r * 2 * sf;
    }
    const ro_policy_carry_t carry = {.state = state};
    for (int k = 0; k < 3; k++) {
        uint64_t t0 = ro__now_ns();
        ro__policy_act_masked(p, ws, rows, rngs, NULL, act_i, act_f, NULL, sf ? &carry : NULL);
        uint64_t dt = ro__now_ns() - t0;
        best = k == 0 || dt < best ? (dt ? dt : 1) : best;
    }
out:
    ro__policy_ws_free(ws);
    free(rng);
    free(rngs);
    free(act_i);
    free(act_f);
    free(rs);
    free(state);
    return best;
}

int ro__learner_choose_threads(learner_t *L, uint32_t rows, bool local, ro_job_done_fn on_done,
                               char *err, size_t errlen)
{
    if (L->fw.lanes) /* started: --workers given, or an earlier welcome chose */
        return 0;
    uint32_t workers = 0;
    uint64_t pass_ns = 0;
    int ncpus = 0;
    if (L->policy && rows > 0) { /* SEED: forward passes; stream and pushes have none */
        if (rows > L->cfg.batch)
            rows = L->cfg.batch;
        pass_ns = time_pass(L, rows);
        ro_topology_t topo = {0};
        char terr[200];
        if (ro__topology_read(&topo, terr, sizeof terr) == 0)
            ncpus = topo.ncpus;
        ro__topology_free(&topo);
        /* The loop keeps a CPU for the I/O, and a node on this host (we
         * reached it on a Unix-domain socket) at least one for its loop.
         * One worker would only move the passes off the loop, serially. */
        const int spare = ncpus - 1 - (local ? 1 : 0);
        if (pass_ns > HANDOFF_NS && spare > 1)
            workers = (uint32_t)spare;
    }
    L->cfg.workers = workers;
    L->forward_ns = pass_ns;
    L->forward_rows = rows;
    if (!L->cfg.spin_given) /* the loop is the data path only without workers */
        L->spin.cap_ns = workers ? 0 : LOOP_SPIN_US * 1000ull;
    if (!L->cfg.quiet && pass_ns)
        fprintf(stderr,
                "rollout-learner: threads: a forward pass over %u rows took %.1f us, %s a "
                "hand-off to a worker (%.0f us), %d CPUs%s: %u workers%s (--workers W decides "
                "instead)\n",
                rows, (double)pass_ns * 1e-3, pass_ns > HANDOFF_NS ? "more than" : "less than",
                (double)HANDOFF_NS * 1e-3, ncpus, local ? " shared with the node" : "", workers,
                workers ? "" : ", the passes on the loop thread");
    return ro__forward_start(&L->fw, &L->loop, workers, L->cfg.overcommit, on_done, L, err, errlen);
}
