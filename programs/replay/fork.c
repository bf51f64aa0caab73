/*
 * rollout-replay --fork: continuing a recording's envs with another policy
 * into a new recording (fork.h).
 *
 * The envs are driven through their layout (envs/env_ops.h: an ABI 1 env
 * through the layout's shim), so one loop steps both ABIs; only the
 * record's columns differ (fork_record.c): an ABI 1 recording's entries
 * hold obs floats and one action, an ABI 2 one's rows hold typed tensors,
 * the discrete entries and box floats of a composite action, and a mask.
 */
#include "replay/fork.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "replay/fork_record.h"
#include "runtime/error.h"
#include "runtime/rng.h"

/* The default snapshot interval of a fork of a recording without one. */
#define FORK_SNAPSHOT_EVERY 10000

static void fork_free(ro_fork_run_t *f)
{
    ro__policy_ws_free(f->ws);
    ro__policy_free(f->pol);
    ro__fork_record_free(f);
    if (f->own_lay)
        ro__layout_free(&f->lay1);
    for (uint32_t t = 0; t < RO_ENV_MAX_TENSORS; t++)
        free(f->obs[t]);
    free(f->ids), free(f->episode), free(f->step), free(f->rng), free(f->rngp);
    free(f->act_i), free(f->act_f), free(f->mask), free(f->st), free(f->state);
    free(f->statep), free(f->first);
}

/* tensors points t[k] at env j's rows of observation tensor k. */
static void env_tensors(const ro_fork_run_t *f, uint32_t j, void **t)
{
    for (uint32_t k = 0; k < f->lay->ntensors; k++)
        t[k] = f->obs[k] + (size_t)j * f->A * f->lay->t[k].row_bytes;
}

/* env_mask is env j's mask rows, or NULL without a mask. */
static uint8_t *env_mask(const ro_fork_run_t *f, uint32_t j)
{
    return f->lay->mask_width ? f->mask + (size_t)j * f->A * f->lay->mask_width : NULL;
}

/* masks_ok: every mask row of env j leaves each discrete entry a value. */
static bool masks_ok(const ro_fork_run_t *f, uint32_t j)
{
    const uint8_t *m = env_mask(f, j);
    for (uint32_t a = 0; m && a < f->A; a++)
        if (!ro__layout_mask_ok(f->lay, m + (size_t)a * f->lay->mask_width, NULL))
            return false;
    return true;
}

/* reset_env starts env j's next episode, as the node: a reset whose mask
 * corners an entry allows every value. */
static void reset_env(ro_fork_run_t *f, uint32_t j)
{
    void *t[RO_ENV_MAX_TENSORS];
    env_tensors(f, j, t);
    ro__env_reset(f->kind, f->r->envs[f->ids[j]].env, t, env_mask(f, j));
    if (!masks_ok(f, j))
        memset(env_mask(f, j), 1, (size_t)f->A * f->lay->mask_width);
    f->episode[j]++;
    f->step[j] = 0;
}

/* pick_envs takes the envs to fork (--env, or all) and where each stands:
 * its state must be known at the step (replayed bit for bit up to it), and
 * its last recorded observation rows (and mask) are what its policy reads
 * first. An env whose episode just ended is reset first, as the node would. */
static int pick_envs(ro_fork_run_t *f)
{
    struct ro_replay *r = f->r;
    const uint32_t all = r->hdr->num_envs;
    f->n = r->o.envs.n ? (uint32_t)r->o.envs.n : all;
    const size_t rows = (size_t)f->n * f->A;
    f->ids = calloc(f->n, sizeof *f->ids);
    f->episode = calloc(f->n, sizeof *f->episode);
    f->step = calloc(f->n, sizeof *f->step);
    bool ok = f->ids && f->episode && f->step;
    for (uint32_t k = 0; k < f->lay->ntensors; k++)
        ok = ok && (f->obs[k] = calloc(rows, f->lay->t[k].row_bytes));
    if (f->lay->mask_width)
        ok = ok && (f->mask = calloc(rows, f->lay->mask_width));
    if (!ok)
        return ro__fork_fail(f, RO_REPLAY_UNUSABLE, "out of memory");
    for (uint32_t j = 0; j < f->n; j++) {
        uint32_t i = r->o.envs.n ? (uint32_t)r->o.envs.v[j] : j;
        env_state_t *e = &r->envs[i];
        if (!e->env || !e->verifiable || (e->phase != P_ACTIVE && e->phase != P_ENDED))
            return ro__fork_fail(f, RO_REPLAY_UNUSABLE,
                                 "env %u's state at step %" PRIu64
                                 " is not known (it has no snapshot "
                                 "before it and was not replayed from its start, or entries are "
                                 "missing)",
                                 i, f->fo->step);
        f->ids[j] = i;
        f->episode[j] = e->episode;
        f->step[j] = e->step;
        if (e->phase == P_ENDED) {
            reset_env(f, j);
            continue;
        }
        const uint8_t *p = r->last_rows + (size_t)i * r->last_bytes;
        void *t[RO_ENV_MAX_TENSORS];
        env_tensors(f, j, t);
        for (uint32_t k = 0; k < f->lay->ntensors; k++) {
            memcpy(t[k], p, f->A * f->lay->t[k].row_bytes);
            p += f->A * f->lay->t[k].row_bytes;
        }
        if (f->lay->mask_width)
            memcpy(env_mask(f, j), p, (size_t)f->A * f->lay->mask_width);
    }
    return RO_REPLAY_OK;
}

/* make_policy builds the fork's policy for the env's layout, each row's
 * action stream from (seed, STEP, row) and, for a recurrent policy, each
 * row's state: zeros at the fork (the recorded policy's state is not in
 * the recording, and is not this policy's), carried from step to step and
 * zeroed at each episode's start, as the node does. */
static int make_policy(ro_fork_run_t *f)
{
    ro_policy_spec_t spec = {.kind = RO_POLICY_RANDOM};
    if (strcmp(f->fo->policy, "random") != 0) {
        spec.kind = RO_POLICY_MLP;
        spec.params_path = f->fo->policy;
    }
    const uint32_t rows = f->n * f->A;
    char err[512] = "";
    if (ro__policy_new_layout(&f->pol, &spec, f->lay, err, sizeof err) != 0 ||
        ro__policy_ws_new(&f->ws, f->pol, rows) != 0)
        return ro__fork_fail(f, RO_REPLAY_UNUSABLE, "--policy %s: %s", f->fo->policy,
                             err[0] ? err : "out of memory");
    uint64_t seed = f->fo->seed_set ? f->fo->seed : f->r->hdr->seed;
    uint64_t fork_seed = ro__seed_mix(seed, f->fo->step, RO_STREAM_ACTION);
    const uint32_t H = ro__policy_state_floats(f->pol);
    f->rng = calloc(rows, sizeof *f->rng);
    f->rngp = calloc(rows, sizeof *f->rngp);
    f->act_i = calloc((size_t)rows * f->lay->ndisc + 1, sizeof *f->act_i);
    f->act_f = calloc((size_t)rows * f->lay->nbox + 1, sizeof *f->act_f);
    f->st = calloc(f->A, sizeof *f->st);
    if (H) {
        f->state = calloc((size_t)rows * H, sizeof *f->state);
        f->statep = calloc(rows, sizeof *f->statep);
        f->first = calloc(rows, sizeof *f->first);
    }
    if (!f->rng || !f->rngp || !f->act_i || !f->act_f || !f->st ||
        (H && (!f->state || !f->statep || !f->first)))
        return ro__fork_fail(f, RO_REPLAY_UNUSABLE, "out of memory");
    for (uint32_t j = 0; j < f->n; j++)
        for (uint32_t a = 0; a < f->A; a++) {
            uint32_t row = j * f->A + a;
            ro__rng_init(&f->rng[row],
                         ro__seed_mix(fork_seed, f->ids[j] * f->A + a, RO_STREAM_ACTION));
            f->rngp[row] = &f->rng[row];
            if (H)
                f->statep[row] = f->state + (size_t)row * H;
        }
    return RO_REPLAY_OK;
}

/* all_finite: env j's float32 observations and its agents' rewards are
 * numbers (--check-finite, as the node checks them). */
static bool all_finite(const ro_fork_run_t *f, uint32_t j)
{
    for (uint32_t a = 0; a < f->A; a++)
        if (!isfinite(f->st[a].reward))
            return false;
    void *t[RO_ENV_MAX_TENSORS];
    env_tensors(f, j, t);
    for (uint32_t k = 0; k < f->lay->ntensors; k++) {
        if (f->lay->t[k].dtype != RO_DTYPE_FLOAT32)
            continue;
        const float *v = t[k];
        for (size_t i = 0; i < (size_t)f->A * f->lay->t[k].size; i++)
            if (!isfinite(v[i]))
                return false;
    }
    return true;
}

/* act chooses every forked row's action from its observation (and mask,
 * and recurrent state). */
static void act(ro_fork_run_t *f)
{
    const uint32_t rows = f->n * f->A;
    const uint8_t *t[RO_ENV_MAX_TENSORS];
    for (uint32_t k = 0; k < f->lay->ntensors; k++)
        t[k] = f->obs[k];
    ro__layout_flatten(f->lay, t, rows, ro__policy_ws_input(f->ws));
    ro_policy_carry_t carry = {.state = f->statep, .first = f->first};
    for (uint32_t j = 0; f->first && j < f->n; j++)
        memset(f->first + (size_t)j * f->A, f->step[j] == 0, f->A);
    ro__policy_act_masked(f->pol, f->ws, rows, f->rngp, f->lay->mask_width ? f->mask : NULL,
                          f->act_i, f->act_f, NULL, f->first ? &carry : NULL);
}

/* round_of_steps steps every forked env once with the policy's actions
 * into the record, resetting those whose episode ends (auto-reset,
 * max_episode_steps, --check-finite and masks as the node). */
static void round_of_steps(ro_fork_run_t *f)
{
    const Rollout__V1__TrajectoryHeader *h = f->r->hdr;
    const uint32_t A = f->A, nd = f->lay->ndisc, nb = f->lay->nbox;
    act(f);
    for (uint32_t j = 0; j < f->n; j++) {
        void *env = f->r->envs[f->ids[j]].env;
        void *t[RO_ENV_MAX_TENSORS];
        env_tensors(f, j, t);
        const int32_t *di = nd ? f->act_i + (size_t)j * A * nd : NULL;
        const float *bo = nb ? f->act_f + (size_t)j * A * nb : NULL;
        int rc = ro__env_step(f->kind, env, di, bo, t, env_mask(f, j), f->st, A);
        bool failed = rc != 0 || (h->check_finite && !all_finite(f, j)) || !masks_ok(f, j);
        f->step[j]++;
        bool end = failed || (h->max_episode_steps && f->step[j] >= h->max_episode_steps);
        for (uint32_t a = 0; a < A; a++)
            end = end || f->st[a].terminated || f->st[a].truncated;
        ro__fork_put_step(f, j, failed, end);
        if (!end)
            continue;
        f->finished += !failed;
        /* The node asks for the episode's metrics before the reset: so
         * does the fork, in case the env's state depends on it. */
        if (!failed && f->kind->vt2 && f->kind->vt2->metric_names &&
            f->kind->vt2->episode_metrics) {
            float v[RO_ENV_MAX_METRICS];
            for (uint32_t m = 0; m < RO_ENV_MAX_METRICS; m++)
                v[m] = NAN;
            f->kind->vt2->episode_metrics(env, v);
        }
        reset_env(f, j);
        ro__fork_put_reset(f, j);
    }
}

/* header makes the fork's header from its parent's. */
static void header(ro_fork_run_t *f, Rollout__V1__TrajectoryHeader *h, char *desc, size_t desclen)
{
    const Rollout__V1__TrajectoryHeader *p = f->r->hdr;
    *h = *p;
    h->format_version = RO_TRAJ_FORMAT_SNAPSHOTS;
    h->snapshot_every = p->snapshot_every ? p->snapshot_every : FORK_SNAPSHOT_EVERY;
    h->parent = (char *)f->fo->parent;
    h->parent_step = f->fo->step;
    h->part = 0;
    char pol[128];
    ro__policy_describe(f->pol, pol, sizeof pol);
    snprintf(desc, desclen, "fork: %s", pol);
    h->policy = desc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_time_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t max = ro__fork_record_max(f);
    h->max_record_bytes = (uint32_t)(max < RO_TRAJ_MAX_RECORD ? max : RO_TRAJ_MAX_RECORD);
}

/* run writes the fork: its envs' states, then rounds of steps until
 * fo->steps, with every env's state each snapshot_every rounds. */
static int run(ro_fork_run_t *f)
{
    Rollout__V1__TrajectoryHeader h;
    char desc[160], err[512] = "";
    header(f, &h, desc, sizeof desc);
    if (ro__fork_record_max(f) >= RO_TRAJ_MAX_RECORD)
        return ro__fork_fail(f, RO_REPLAY_UNUSABLE,
                             "too many envs for one record: give fewer with --env");
    ro_traj_writer_t w;
    if (ro__traj_writer_open(&w, f->fo->out, &h, 0, err, sizeof err))
        return ro__fork_fail(f, RO_REPLAY_UNUSABLE, "%s", err);
    Rollout__V1__TransitionBatch b;
    ro__fork_record_begin(f, &b);
    int rc = ro__fork_snapshot(f, &b, 0);
    if (rc == RO_REPLAY_OK && ro__traj_writer_append(&w, &b, err, sizeof err))
        rc = ro__fork_fail(f, RO_REPLAY_FAILED, "%s", err);
    uint64_t taken = 0, rounds = 0;
    while (rc == RO_REPLAY_OK && taken < f->fo->steps) {
        ro__fork_record_begin(f, &b);
        round_of_steps(f);
        ro__fork_record_end(f, &b);
        taken += (uint64_t)f->n * f->A;
        rounds++;
        if (rounds % h.snapshot_every == 0)
            rc = ro__fork_snapshot(f, &b, rounds);
        if (rc == RO_REPLAY_OK && ro__traj_writer_append(&w, &b, err, sizeof err))
            rc = ro__fork_fail(f, RO_REPLAY_FAILED, "%s", err);
    }
    int crc = ro__traj_writer_close(&w, err, sizeof err);
    if (rc == RO_REPLAY_OK && crc)
        rc = ro__fork_fail(f, RO_REPLAY_FAILED, "%s", err);
    if (rc == RO_REPLAY_OK)
        fprintf(f->r->o.log,
                "rollout-replay: fork: %" PRIu64 " steps of %u env(s) from step %" PRIu64
                " of %s with %s into %s (%" PRIu64 " episodes finished)\n",
                taken, f->n, f->fo->step, f->fo->parent, desc + 6, f->fo->out, f->finished);
    return rc;
}

/* layout points f->lay at the env's layout: an ABI 2 env's (checked
 * against the header when it was opened), an ABI 1 env's shim. */
static int layout(ro_fork_run_t *f)
{
    if (f->kind->vt2) {
        f->lay = &f->r->renv.layout;
    } else {
        char err[256];
        if (ro__env_layout_of(f->kind->vt, NULL, f->r->envs[f->ids0].env, &f->lay1, err,
                              sizeof err) != 0)
            return ro__fork_fail(f, RO_REPLAY_UNUSABLE, "%s", err);
        f->own_lay = true;
        f->lay = &f->lay1;
    }
    f->A = f->lay->agents;
    return RO_REPLAY_OK;
}

int ro__replay_fork(struct ro_replay *r, const ro_fork_opts_t *fo)
{
    ro_fork_run_t f = {.r = r, .fo = fo, .kind = &r->renv.kind};
    int rc = RO_REPLAY_OK;
    if (r->unusable || r->diverged || !r->hdr)
        rc = ro__fork_fail(&f, RO_REPLAY_FAILED, "the recording did not replay up to step %" PRIu64,
                           fo->step);
    f.ids0 = r->o.envs.n ? (uint32_t)r->o.envs.v[0] : 0;
    if (rc == RO_REPLAY_OK && !r->envs[f.ids0].env)
        rc = ro__fork_fail(&f, RO_REPLAY_UNUSABLE,
                           "env %u's state at step %" PRIu64 " is not known (it has no snapshot "
                           "before it and was not replayed from its start)",
                           f.ids0, fo->step);
    if (rc == RO_REPLAY_OK)
        rc = layout(&f);
    if (rc == RO_REPLAY_OK)
        rc = pick_envs(&f);
    if (rc == RO_REPLAY_OK)
        rc = make_policy(&f);
    if (rc == RO_REPLAY_OK)
        rc = ro__fork_record_init(&f);
    if (rc == RO_REPLAY_OK)
        rc = run(&f);
    fork_free(&f);
    return rc;
}
