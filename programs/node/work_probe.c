/*
 * The node's threads chosen for the work (docs/operations.md "Threads
 * chosen for the work"): a SEED node (--learner remote) given no --workers
 * times its env's step on one instance before it plans its workers, and
 * weighs what workers would save against what they cost: W workers (one
 * per allowed CPU) step a frame's shards side by side in 1/W of the time,
 * saving (W-1)/W of a frame's steps, and the frame pays a hand-off to them
 * and back. When the saving is the smaller, the loop thread steps the envs
 * itself (--workers 0: no hand-off, and it spins for the learner's answer,
 * --spin-us 300); otherwise one worker per allowed CPU. On one CPU workers
 * save nothing; on the 2-CPU machine a frame under 100 us goes on the
 * loop: 256 or 2048 CartPole envs (frames of 128 and 1024 steps, 10 and
 * 75 us), where a pair of loops outran the node's 2 workers beside the
 * learner (1.1-4x on an idle machine), over shared memory and over TCP
 * between two network namespaces alike (docs/benchmarks/learners.md). The
 * choice follows what is measured, not the address. A machine so loaded
 * that the loops lose their CPUs is not measured here: --workers decides
 * there. A Python env's step crosses to a worker process: workers, without
 * a probe. Other modes keep their workers (their policy runs on them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "node/node.h"
#include "node/node_internal.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/rng.h"

/* What a hand-off to a worker and back costs the loop: two wake-ups, each
 * tens of microseconds on the 2-vCPU VM this project is measured on
 * (docs/protocol.md "Spinning instead of sleeping"). */
#define HANDOFF_NS 50000.0
/* The probe: at most this many steps, and no longer than this (an env
 * whose steps are dear says so in a few). */
#define PROBE_STEPS 2000
#define PROBE_NS 20000000ull
/* The loop's spin when it steps the envs (config.c's with --workers 0). */
#define LOOP_SPIN_US 300

/* probe_step_ns steps one instance of the env (seeded as env 0) with a
 * fixed allowed action and returns the mean ns per step; 0 when it cannot
 * (no memory, or the env failed: the default plan then stands). */
static double probe_step_ns(ro_node_t *n)
{
    const ro_env_kind_t *k = &n->kind;
    uint64_t seed = ro__seed_mix(ro__node_seed(n->cfg.seed, n->cfg.node_index), 0, RO_STREAM_ENV);
    void *env = NULL;
    char err[256];
    ro_space_layout_t own = {0};
    const ro_space_layout_t *lay = &n->layout; /* ABI 2: open_env made it */
    void *tensors[RO_ENV_MAX_TENSORS] = {0};
    uint8_t *mask = NULL;
    int32_t *disc = NULL;
    float *box = NULL;
    ro_step_t *st = NULL;
    double ns = 0;
    /* A Python env steps in its own processes (and env 0 must not move
     * before the run): the default plan stands. */
    if (k->py || ro__env_create(k, &env, n->env_args, n->nenv_args, seed, 0, err, sizeof err) != 0)
        return 0;
    if (!k->vt2) {
        if (ro__env_layout_of(k->vt, NULL, env, &own, err, sizeof err) != 0)
            goto out;
        lay = &own;
    }
    const uint32_t A = lay->agents ? lay->agents : 1;
    bool ok = (mask = calloc((size_t)A * lay->mask_width + 1, 1)) &&
              (disc = calloc((size_t)A * lay->ndisc + 1, sizeof *disc)) &&
              (box = calloc((size_t)A * lay->nbox + 1, sizeof *box)) &&
              (st = calloc(A, sizeof *st));
    for (uint32_t t = 0; ok && t < lay->ntensors; t++)
        ok = (tensors[t] = calloc(A, lay->t[t].row_bytes + 1)) != NULL;
    if (!ok)
        goto out;
    for (uint32_t a = 0; a < A; a++) /* a box float at the middle of its bounds */
        for (uint32_t b = 0; b < lay->nbox; b++)
            box[a * lay->nbox + b] = 0.5f * (lay->box_low[b] + lay->box_high[b]);
    uint8_t *m = lay->mask_width ? mask : NULL;
    ro__env_reset(k, env, tensors, m);
    uint64_t t0 = ro__now_ns(), t1 = t0;
    uint32_t steps = 0;
    while (steps < PROBE_STEPS && t1 - t0 < PROBE_NS) {
        for (uint32_t a = 0; m && a < A; a++) /* the first value the mask allows */
            for (uint32_t d = 0; d < lay->ndisc; d++) {
                const uint8_t *row = m + (size_t)a * lay->mask_width + lay->disc_mask[d];
                uint32_t v = 0;
                while (v + 1 < lay->disc_n[d] && !row[v])
                    v++;
                disc[a * lay->ndisc + d] = (int32_t)v;
            }
        /* NULL for a kind of part the env has none of: an ABI 1 env's
         * action is discrete exactly when disc is given. */
        if (ro__env_step(k, env, lay->ndisc ? disc : NULL, lay->nbox ? box : NULL, tensors, m, st,
                         A) != 0)
            goto out;
        steps++;
        if (st[0].terminated || st[0].truncated)
            ro__env_reset(k, env, tensors, m);
        t1 = ro__now_ns();
    }
    ns = steps ? (double)(t1 - t0) / steps : 0;
out:
    for (uint32_t t = 0; t < RO_ENV_MAX_TENSORS; t++)
        free(tensors[t]);
    free(mask);
    free(disc);
    free(box);
    free(st);
    ro__layout_free(&own);
    ro__env_destroy(k, env);
    return ns;
}

void ro__node_choose_workers(ro_node_t *n)
{
    if (n->cfg.learner != RO_LEARNER_REMOTE || n->cfg.workers_given ||
        (!n->kind.vt && !n->kind.vt2))
        return;       /* other modes' policy runs on workers; --print-topology opened no env */
    if (n->kind.py) { /* its steps cross to a worker process: dearer than any hand-off */
        snprintf(n->threads_why, sizeof n->threads_why, " (chosen: a Python env)");
        return;
    }
    const double step_ns = probe_step_ns(n);
    uint32_t batch = n->cfg.batch ? n->cfg.batch : (n->cfg.num_envs + 1) / 2; /* make_hub's */
    const double frame_ns = step_ns * batch;
    n->env_step_ns = step_ns;
    if (step_ns <= 0) {
        snprintf(n->threads_why, sizeof n->threads_why, " (the env's step could not be timed)");
        return;
    }
    /* What W workers would save a frame: all of its steps but their 1/W. */
    const int w = n->topo.ncpus > 1 ? n->topo.ncpus : 1;
    const double saved_ns = frame_ns * (w - 1) / w;
    const bool loop = saved_ns < HANDOFF_NS;
    if (loop) {
        n->cfg.envs_on_loop = true;
        if (!n->cfg.spin_given)
            n->cfg.spin_us = LOOP_SPIN_US;
    }
    snprintf(n->threads_why, sizeof n->threads_why,
             " (chosen: a step %.0f ns, a frame of %u %.1f us; %d workers would save %.1f us, %s "
             "a hand-off's %.0f us%s)",
             step_ns, batch, frame_ns * 1e-3, w, saved_ns * 1e-3, loop ? "less than" : "more than",
             HANDOFF_NS * 1e-3, loop ? ": the loop steps the envs" : "");
}
